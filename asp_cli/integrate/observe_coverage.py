"""`asp observe --schedule`'s count of how much of the schedule the logs cover: prompts without a sample, groups
with fewer samples than the schedule's N, and prompts with more than N in an epoch.

A dump without prompt ids is matched to the dataset by its text, and the samples of a text that several ids share
are spread over those ids in turn (`asp_cli.integrate.prompt_match`): one group of such a text, where the rollout
reached one of its ids, leaves each id with part of a group (and dumps spread each from the first id, so at an odd
N the first gets more). That shortfall is of asp's own making: where a shared text's samples make whole groups it is
said so, apart from the groups a rollout really cut short or ran more samples of.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from asp_cli.errors import counted, shown_id


def spread_shortfalls(counts: pl.DataFrame, n: int, shared: Iterable[tuple[str, ...]],
                      scheduled: set[str] | None = None) -> tuple[set[str], int, int, list[tuple[int, int, tuple]]]:
    """The prompts holding other than ``n`` samples (``counts``: ``prompt_id``, ``len``) only because their text's
    samples were spread over the ids in ``shared`` (each a tuple of the ids that share one text), with the groups and
    ids of those texts: a text whose ids hold a whole number of groups between them (4 samples over 2 ids at n = 4,
    2 each; or at n = 3 two groups in two dumps, each spread from the first id, 4 and 2) had no group cut short. A
    text whose samples make no whole number of groups, or more groups than the ``scheduled`` ids it has (a rollout of
    more samples per prompt), keeps its ids' shortfalls and excesses. Last, of each such text with fewer
    groups than the ``scheduled`` ids it has (each a group of it the schedule holds), (the number of those ids, its
    groups, its ids): one group of a text two scheduled ids share leaves a group of it out of the logs, which no id's
    count shows."""
    held = dict(counts.select("prompt_id", "len").iter_rows())
    off: set[str] = set()
    groups = ids = 0
    lacking: list[tuple[int, int, tuple]] = []
    for text_ids in sorted(set(shared)):
        total = sum(held.get(i, 0) for i in text_ids)
        uneven = [i for i in text_ids if held.get(i, 0) and held[i] != n]
        planned = len(text_ids) if scheduled is None else sum(i in scheduled for i in text_ids)
        # More groups than the schedule has ids of the text are the rollout's (more samples per prompt, or several
        # epochs in one log), not the spreading's: left to the more-than-n warning, as any prompt's are.
        if uneven and total % n == 0 and (total // n <= planned or not planned):
            off.update(uneven)
            groups += total // n
            ids += len(text_ids)
            if total // n < planned:
                lacking.append((planned, total // n, text_ids))
    return off, groups, ids, lacking


def coverage(sched: Any, added: pl.DataFrame, summary: dict[str, Any], warnings: list[str],
             shared: Iterable[tuple[str, ...]] = (), read_ids: pl.Series | None = None) -> None:
    """How much of the schedule the logs cover: prompts without samples, groups with fewer than n (``shared``: the ids
    of each prompt text several ids share, whose samples were spread over them: `spread_shortfalls`). ``read_ids``:
    the ids the logs named before the rows of ids the ``--dataset`` lacks were left out (`settle_unknown_ids`):
    scheduled prompts whose samples went so are counted apart (`left_out_by_dataset`)."""
    n = sched.samples_per_prompt
    scheduled = sched.frame["prompt_id"].unique()
    counts = added.group_by("prompt_id").len()
    spread, groups, ids, lacking = spread_shortfalls(counts, n, shared, set(scheduled.to_list()))
    # An id of such a text without samples is one of the groups it lacks, counted there: 'c' of one group over a, b
    # and c was counted twice (3 scheduled prompts without samples, where 2 groups lack).
    in_lacking = sorted({i for *_, text_ids in lacking for i in text_ids})
    missing = scheduled.filter(~scheduled.is_in(counts["prompt_id"].implode()) & ~scheduled.is_in(in_lacking))
    dropped = missing.filter(missing.is_in(read_ids.implode())) if read_ids is not None else missing.clear()
    missing = missing.filter(~missing.is_in(dropped.implode()))
    summary["scheduled_prompts_left_out_by_dataset"] = dropped.len()
    warnings.extend(left_out_by_dataset(dropped))
    # Short in an epoch, of the scheduled prompts: a prompt the schedule lacks (another dataset's, in the same log)
    # was counted, and one epoch's 4 samples beside another's 8 were 12, not short (a hostile round).
    counted = pl.col("prompt_id").is_in(scheduled.implode()) & ~pl.col("prompt_id").is_in(sorted(spread))
    per_epoch = added.filter(counted).group_by("prompt_id", "epoch").len()
    short = per_epoch.filter(pl.col("len") < n)["prompt_id"].n_unique()
    lacked = sum(planned - had for planned, had, _ in lacking)  # groups of shared texts the logs lack
    summary["scheduled_prompts_without_samples"] = missing.len() + lacked
    summary["prompts_with_fewer_samples_than_n"] = short
    summary["prompts_uneven_by_spreading"] = len(spread)
    if missing.len() and not lacked:
        warnings.append(f"{missing.len():,} scheduled prompts have no sample in the logs (e.g. {shown_id(missing[0])})")
    elif lacked:
        total = missing.len() + lacked
        texts = (f"a prompt text {lacking[0][0]:,} scheduled ids share" if len(lacking) == 1 else
                 f"{len(lacking):,} prompt texts that several scheduled ids share")
        had = sum(h for _, h, _ in lacking)
        warnings.append(f"{total:,} scheduled prompt{'s have' if total != 1 else ' has'} no sample in the logs"
                        + (f" (e.g. {shown_id(missing[0])}); {lacked:,} of them" if missing.len() else ":")
                        + f" of {texts}, whose samples were spread over them ({had:,} group{'s' if had != 1 else ''} "
                        f"of {'it' if len(lacking) == 1 else 'them'} for {sum(p for p, _, _ in lacking):,} ids)")
    if short:
        warnings.append(f"{short:,} prompt{'s have' if short != 1 else ' has'} fewer than samples_per_prompt={n} samples "
                        "in an epoch of the logs (a log without an epoch column counts as one)")
    if spread:
        held = counts.filter(pl.col("prompt_id").is_in(sorted(spread)))["len"]
        than = "fewer or more" if held.min() < n < held.max() else "fewer" if held.max() < n else "more"
        warnings.append(f"{len(spread):,} prompt{'s hold' if len(spread) != 1 else ' holds'} {than} than "
                        f"samples_per_prompt={n} samples only as their text's samples were spread over the ids that "
                        f"share it (whole groups of it: {groups:,} group{'s' if groups != 1 else ''} over {ids:,} ids); "
                        "no group was cut short")
    # More than n in an epoch: several epochs without an epoch column, or a rollout of more samples per prompt than
    # the schedule's (a newcomer's verl ran rollout.n=16 on a schedule of 8, and nothing here said so).
    # Prompts, not (prompt, epoch) pairs: a prompt over the group in two epochs was counted twice (a hostile review).
    if (over := per_epoch.filter(pl.col("len") > n)["prompt_id"].n_unique()):
        from asp_cli.sim.lengths import epochs_in_one_log, more_samples_fix

        each = per_epoch["len"].unique()
        alike = int(each[0]) if each.len() == 1 else 0
        said = (f"{over:,} prompt{'s have' if over != 1 else ' has'} more than samples_per_prompt={n} samples in an "
                "epoch of the logs (a log without an epoch column counts as one): the history keeps them all; ")
        if alike and alike % n == 0 and added["epoch"].null_count() == added.height and not _dumps_of_one_step(summary):
            # Every prompt k whole groups, none with an epoch: most often a hook's log appended to every epoch (the
            # slime and OpenRLHF hooks' in examples/), which a slime newcomer was told to remake the schedule with
            # --samples-per-prompt 2N for, the epochs' fix second (2026-12-07; as `asp simulate` says it, ed36ddf).
            warnings.append(said + epochs_in_one_log(n, alike) + " (this history holds them as one: rebuild it with "
                            "--force from each epoch's log, each with its --epoch); where the rollout ran "
                            f"{alike} samples per prompt, remake the schedule with --samples-per-prompt {alike}")
        else:
            warnings.append(said + "if they are several epochs', observe each epoch's log with its --epoch"
                            + more_samples_fix(n, alike))
    warnings.extend(epochs_not_scheduled(sched, added))


def left_out_by_dataset(dropped: pl.Series) -> list[str]:
    """A warning where scheduled prompts had samples in the logs that were all left out as unknown ids, since the
    ``--dataset`` given beside ``--schedule`` lacks their ids (the ids held to are those both hold): they were counted
    as "scheduled prompts have no sample in the logs", as if the rollouts had never reached them (a round's own
    `asp observe --schedule S --dataset D` with D of fewer prompts than S)."""
    if not dropped.len():
        return []
    one = dropped.len() == 1
    return [f"{counted(dropped.len(), 'scheduled prompt')} {'has' if one else 'have'} samples in the logs but none "
            f"in the history (e.g. {shown_id(dropped.sort()[0])}): the --dataset lacks {'its id' if one else 'their ids'}, "
            f"so {'its' if one else 'their'} rows were left out with the unknown ids; give the --dataset the "
            "schedule was made from"]


def epochs_not_scheduled(sched: Any, added: pl.DataFrame) -> list[str]:
    """Where the samples counted against a schedule of several epochs number epochs it does not hold: such a schedule
    numbers the run's epochs as its own (a schedule of the run's --epochs K, remade each epoch: docs/pipelines.md), so
    epoch 5's log against epochs 0-2 replayed another schedule, or was numbered otherwise; taken without a word, its
    record named this schedule's seed for it, and `asp simulate --lengths` replays a schedule epoch with the lengths'
    own epoch of its number only (a hostile review, 2026-12-07). A one-epoch schedule is any epoch's (its own is 0)."""
    held = sorted(int(e) for e in sched.frame["epoch"].unique().to_list())
    past = sorted(int(e) for e in added["epoch"].drop_nulls().unique().to_list() if int(e) not in held)
    if len(held) < 2 or not past:
        return []
    shown = ", ".join(map(str, past[:5])) + (", ..." if len(past) > 5 else "")
    return [f"these samples are numbered epoch{'s' if len(past) > 1 else ''} {shown}, which the schedule does not hold "
            f"(epochs {held[0]} to {held[-1]}): a schedule of several epochs numbers the run's, so their run replayed "
            "another schedule, or they are numbered otherwise; observe them against the schedule their run replayed "
            "(the one its export was made from), or with the schedule's epoch (--epoch E)"]


def _dumps_of_one_step(summary: dict[str, Any]) -> bool:
    """Whether every log was a verl step dump and no prompt was at more than one step (`dump_steps.steps_of_epochs`):
    each prompt's samples then are one step's, a rollout of more samples per prompt, not several epochs."""
    kinds = summary.get("log_formats") or {}
    return bool(kinds) and all(k.endswith("_dump") for k in kinds) and not summary.get("prompts_at_several_steps")


def epochs_overfull(existing: pl.DataFrame, added: pl.DataFrame, n: int) -> list[str]:
    """A warning per epoch that ``added`` numbers where prompts the ``existing`` history held in that epoch now hold
    more samples than the schedule's ``n``: a log with other bytes appended again (a retried pipeline step
    regenerated its log, and every sample counted twice without a word: a newcomer's round). Logs split by rank,
    each a part of an epoch's samples, stay within ``n``; a new epoch logged with more samples than ``n`` is not
    one the history held (a review)."""
    keys = ["epoch", "prompt_id"]
    held = existing.filter(pl.col("epoch").is_not_null()).select(keys).unique()
    if not held.height:
        return []
    counts = (pl.concat([existing.select(keys), added.select(keys)]).join(held, on=keys, how="semi")
              .join(added.select(keys).unique(), on=keys, how="semi").group_by(keys).len()
              .filter(pl.col("len") > n).group_by("epoch").agg(pl.len().alias("prompts"), pl.col("len").max())
              .sort("epoch"))
    return [f"epoch {e}: {counted(k, 'prompt')} now hold{'s' if k == 1 else ''} more samples than the schedule's {n} "
            f"per prompt (up to {most}): the history held this epoch's samples of {'it' if k == 1 else 'them'} "
            "already, and these count again; if this log is that epoch's "
            "log regenerated (a retried step), rebuild the history without it (--force with the other logs)"
            for e, k, most in counts.iter_rows()]
