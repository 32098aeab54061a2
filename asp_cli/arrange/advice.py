"""What a finished plan means for the trainer that will read it: warnings `asp schedule` adds to its summary.

Each is legal but probably not what the user meant: a step cut short at the end of every epoch (a trainer that
reads fixed batches of consecutive rows, as verl's does, then cuts across the schedule's steps), a
synchronous plan whose steps cannot keep every instance busy, and steps that each hold one data source only.
"""

from __future__ import annotations

import polars as pl

from asp_cli.errors import counted, shown_name
from asp_cli.settings import ScheduleSettings, warmup_note, warmup_prompts


def dividing_batch_size(prompts: int, batch: int) -> int | None:
    """The train batch size nearest ``batch`` (within half to twice it) that divides ``prompts``, or None."""
    sizes = dividing_batch_sizes(prompts, batch)
    return min(sizes, key=lambda d: (abs(d - batch), d)) if sizes else None


def dividing_batch_sizes(prompts: int, batch: int) -> list[int]:
    """The nearest train batch sizes below and above ``batch`` (within half to twice it) that divide ``prompts``."""
    candidates = [d for d in range(max(1, batch // 2), min(prompts, 2 * batch) + 1) if prompts % d == 0]
    below = [d for d in candidates if d <= batch]
    above = [d for d in candidates if d > batch]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def largest_divisors(prompts: int) -> str:
    """``80, 40 or 20``: the largest train batch sizes that divide ``prompts`` (the fewest steps first), for an epoch
    that a batch larger than it would leave with no whole batch."""
    fits = [d for d in range(prompts, 0, -1) if prompts % d == 0][:3]
    return ", ".join(map(str, fits[:-1])) + (" or " if len(fits) > 1 else "") + str(fits[-1])


def oversized_batch_warning(settings: ScheduleSettings, prompts: int) -> str | None:
    """Where ``--train-batch-size`` is larger than an epoch's ``prompts``: each epoch is one partial batch, which a
    trainer dropping a short last batch never trains. It said only "every training step is the epoch's only,
    partial batch" (a verl newcomer's 80 prompts at the default 128), where verl trains no step at all."""
    if settings.train_batch_size <= prompts:
        return None
    refused = ("`asp export --format verl` refuses such a file, E146" if settings.epochs == 1 else
               # every epoch in one file fills a batch or more, across epochs (a prompt twice in a batch: export says)
               "`asp export --format verl --epoch E` refuses an epoch's file, E146, and one of every epoch cuts its "
               "batches across epochs")
    return (f"--train-batch-size {settings.train_batch_size} is larger than the {prompts:,} prompts of an epoch: "
            "every training step is the epoch's only, partial batch, which a trainer that drops a partial last "
            f"batch (verl's and AReaL's dataloaders; slime with --num-epoch) never trains: no step at all ({refused}; "
            f"OpenRLHF trains it as one short step); use a --train-batch-size that divides {prompts:,} (e.g. "
            f"{largest_divisors(prompts)})")


def dividing_example(prompts: int, batch: int) -> str:
    """`` (e.g. 118 or 177; ...)``: the dividing sizes to try, or nothing."""
    sizes = dividing_batch_sizes(prompts, batch)
    if not sizes:
        # 5,222 prompts at 128: no size from half to twice the batch divides them; the other fix is the data.
        kept = prompts - prompts % batch
        return (f" (none from {max(1, batch // 2)} to {min(prompts, 2 * batch)} does; or keep {kept:,} of the prompts, "
                f"{kept // batch:,} batches of {batch}, as verl's dataloader would)" if kept else "")
    kept = prompts - prompts % batch
    # A batch size that divides the prompts may not divide the trainer's data-parallel ranks (a MindSpeed newcomer's
    # 512 on 16 instances was offered 451): keeping whole batches is the other fix, said too.
    whole = kept // batch
    keep = f"; or keep {kept:,} of the prompts, {whole:,} batch{'' if whole == 1 else 'es'} of {batch}" if kept else ""
    return (f" (e.g. {' or '.join(str(d) for d in sizes)}; a different batch size changes the number of steps, so "
            f"compare with asp simulate{keep})")


def settings_warnings(settings: ScheduleSettings) -> list[str]:
    """Options given that change nothing in a plan with these other settings (each is recorded all the same)."""
    warnings = []
    if settings.engine == "static" and settings.kv_budget == "whole":
        warnings.append("--kv-budget whole does not change a plan for --engine static: its minibatches are counted "
                        "padded, rows x (longest prompt + longest predicted group maximum)")
    if settings.engine == "streaming":
        given = [f"--kv-budget {settings.kv_budget}"] if settings.kv_budget != "auto" else []
        given += (["--max-tokens-per-minibatch"] if settings.max_tokens_per_minibatch is not None else [])
        if given:  # a hostile-input round: --max-tokens-per-minibatch 5000 made the same plan, unsaid
            warnings.append(f"{' and '.join(given)} do{'es' if len(given) == 1 else ''} not change a plan for --engine "
                            "streaming: servers that refill freed slots are given no minibatches to cut (recorded, "
                            "it cuts only the baselines in asp's sizes of `asp simulate --compare` on a blocking "
                            "--mode)")
    # verl's v1 mode, named or the one `asp export --format verl` takes for a plan whose trainer follows its steps
    # a warm-up ahead behind verl's balancer (`made_for`): a fraction below 1 was said only at export (a review's).
    exported = (settings.engine == "streaming" and settings.trainer == "schedule" and settings.max_lag
                and settings.router in (None, "least-pending") and settings.verl_trainer is None)
    mode = settings.verl_v1_mode or ("colocate-async" if exported else None)
    warmup = warmup_note(mode, settings.max_lag, settings.train_batch_size) if mode else None
    if warmup and exported and warmup_prompts(settings.max_lag, settings.train_batch_size) < 1:
        warnings.append(f"--max-lag {settings.max_lag:g} --trainer schedule behind verl's balancer is verl's v1 "
                        f"trainer with asp's replay buffer, a warm-up of {settings.max_lag:g} train batches, which "
                        f"verl rounds down to 0 prompts of a batch of {settings.train_batch_size}: `asp export --format verl` "
                        "refuses it (E81); make it with --max-lag 1 (verl's default warm-up), or --max-lag 0 for "
                        "verl's synchronous trainer")
    elif warmup:  # a fraction below 1, mistaken for verl's staleness_threshold (legal: a warm-up of a few prompts)
        warnings.append(warmup + (" (`asp export --format verl` takes colocate_async for this schedule; name the "
                                  "mode with --verl-trainer)" if exported else ""))
    if settings.steps == "representative" and settings.arrangement != "auto":
        warnings.append(f"--steps representative holds auto's pick to steps as representative as a shuffle's; with "
                        f"--arrangement {settings.arrangement} nothing is picked, and the steps are that "
                        "arrangement's: use --arrangement auto, or leave --steps out")
    return warnings


# What MindSpeed-RL (v2.3.0) does with the rows past a file's last whole batch (docs/integrations.md, MindSpeed-RL):
# it reads train_iters x global_batch_size rows, going through the file again from its start for more
# (mindspeed_rl/datasets/utils.py:128-139), so at train_iters of the whole batches (what `asp export` prints) it
# leaves them out, and one iteration more fills their batch with the file's first rows, which it then trains twice.
# The partial-batch warnings named verl, AReaL, slime and OpenRLHF only (a MindSpeed-RL newcomer's round).
_MINDSPEED_PARTIAL = ("MindSpeed-RL leaves them out at train_iters of the whole batches, and one iteration more fills "
                      "their batch from the file's start, training its first prompts twice")


def plan_warnings(frame: pl.DataFrame, settings: ScheduleSettings, *, partial_batch: bool = True) -> list[str]:
    """Warnings about ``frame`` (a schedule, all epochs) for the trainer ``settings`` describe; ``partial_batch``
    False leaves out the one-epoch partial last batch's, where `dropped_tail_warnings` says it with what it drops
    (the two said the same batch in two warnings, the first thing a newcomer's `asp schedule` printed)."""
    warnings = partial_batch_warnings(frame, settings, partial_batch=partial_batch)
    used = frame["instance"].n_unique() if frame.height else 0
    if used < settings.instances:
        minibatches = frame["minibatch"].n_unique() if frame.height else 0
        warnings.append(
            f"{settings.instances - used} of the {settings.instances} instances get{'s' if settings.instances - used == 1 else ''} no minibatch ({minibatches:,} "
            f"minibatch{'' if minibatches == 1 else 'es'} in all): those instances would idle through the whole "
            "rollout; plan fewer --instances or smaller minibatches (--minibatch-size)")
    return warnings


def tail_warnings(frame: pl.DataFrame, sources: pl.DataFrame | None, settings: ScheduleSettings) -> list[str]:
    """`plan_warnings`' and `dropped_tail_warnings`' warnings about the rows past an epoch's last whole train batch,
    as `asp schedule` says them (what a dataloader that drops a partial last batch leaves out); `asp simulate`
    says them too, since its replay runs those rows (a verl newcomer compared a plan whose 468 longest prompts verl
    never runs)."""
    dropped = dropped_tail_warnings(frame, sources, settings)
    # An epoch smaller than one batch: every row is past it (`asp simulate mine.parquet` of a verl newcomer's 80
    # prompts at 128 replayed a step verl never runs, unsaid: `asp schedule` says it where it reads the settings).
    first = frame.filter(pl.col("epoch") == frame["epoch"].min()).height if frame.height else 0
    oversized = [w for w in [oversized_batch_warning(settings, first)] if w and first]
    return oversized + partial_batch_warnings(frame, settings, partial_batch=not dropped) + dropped


def partial_batch_warnings(frame: pl.DataFrame, settings: ScheduleSettings, *,
                           partial_batch: bool = True) -> list[str]:
    """`plan_warnings`' about an epoch that is no whole number of train batches (``partial_batch`` as there)."""
    warnings = []
    size = settings.train_batch_size
    prompts = int(frame.filter(pl.col("epoch") == frame["epoch"].min()).height) if frame.height else 0
    steps = frame.group_by("train_step").len().sort("train_step")
    short = steps.head(max(steps.height - 1, 0)).filter(pl.col("len") < size)
    if settings.epochs > 1 and short.height:
        warnings.append(
            f"each epoch's {prompts:,} prompts end in a step of {counted(int(short['len'][0]), 'group')}, short of "
            f"--train-batch-size {size}: a trainer that reads batches of {size} consecutive rows (verl) cuts across "
            f"this schedule's steps from the second epoch on; use a --train-batch-size that divides {prompts:,}"
            + dividing_example(prompts, size) + ", or export one epoch at a time (asp export --epoch; verl then "
            "drops each epoch's short last batch)")
    elif settings.epochs == 1 and prompts > size and prompts % size and partial_batch:
        # One epoch: nothing is cut across, but a dataloader that drops its last partial batch leaves it out (an
        # epoch smaller than one batch is warned about where the settings are read). A trainer that takes groups
        # as they finish reads the file in dispatch order all the same (AReaL, which drops it too).
        left = prompts % size
        warnings.append(
            (f"the epoch's {prompts:,} prompts end in a step of {counted(left, 'group')}, short of --train-batch-size "
             f"{size}: a trainer that reads batches of {size} consecutive rows" if settings.trainer == "schedule" else
             f"the epoch's {prompts:,} prompts leave {counted(left, 'row')} past the last whole batch of {size}: a "
             "trainer that reads its rows in batches")
            + " and drops a partial last one (verl's and AReaL's dataloaders; slime with --num-epoch) leaves "
            + ("that prompt" if left == 1 else f"those {left:,} prompts")
            + f" out (OpenRLHF trains {'it' if left == 1 else 'them'} as a short step; {_MINDSPEED_PARTIAL}); use a "
            f"--train-batch-size that divides {prompts:,}"
            + dividing_example(prompts, size))
    elif settings.epochs > 1 and prompts > size and prompts % size:
        # Steps that run across the epochs (a trainer that takes groups as they finish): no step is short, but a
        # file of every epoch ends in a partial batch, and one epoch exported at a time in its own (a review's).
        whole = frame.height % size
        warnings.append(
            f"each epoch's {prompts:,} prompts leave {counted(prompts % size, 'row')} past its last whole batch of {size}, and "
            f"a file of all {settings.epochs} epochs ({frame.height:,} rows) "
            + (f"leaves {whole:,}" if whole else "fills whole batches only by a batch that spans two epochs")
            + ": a trainer that reads its rows in batches and drops a partial last one (verl's and AReaL's "
            "dataloaders; slime with --num-epoch) leaves those rows out, of each epoch exported alone (asp export "
            f"--epoch) or of the file's last ({_MINDSPEED_PARTIAL}); use a --train-batch-size that divides {prompts:,}"
            + dividing_example(prompts, size))
    return warnings


def source_warnings(frame: pl.DataFrame, sources: pl.DataFrame) -> list[str]:
    """A warning where many of ``frame``'s training steps hold one data source only, far more than a shuffle's would
    (``sources``: each input row's ``row`` and ``data_source``): an OpenRLHF newcomer's mix of GSM8K and code was
    trained math first, then code, and the summary spoke only of a step's mean length."""
    shares = (sources["data_source"].drop_nulls().value_counts(normalize=True)
              .sort(["proportion", "data_source"], descending=[True, False]))
    if shares.height < 2 or not frame.height:
        return []
    import numpy as np

    # Each prompt's source as a small code, looked up by row (a join of the 1M-row schedule with the sources' text
    # took about 0.1 GiB); a prompt without a source is its own kind, so its step mixes.
    names = shares["data_source"].to_list()
    codes = np.full(int(sources["row"].max()) + 1, -1, dtype=np.int32)
    codes[sources["row"].to_numpy()] = (sources["data_source"].replace_strict(names, list(range(len(names))),
                                                                             default=-1, return_dtype=pl.Int32)
                                        .fill_null(-1).to_numpy())
    rows = frame.select("row", "train_step")
    steps = (rows.with_columns(pl.Series("code", codes[rows["row"].to_numpy()]))
             .group_by("train_step").agg(pl.len().alias("groups"), pl.col("code").min().alias("low"),
                                         pl.col("code").max().alias("high")).sort("train_step"))
    size = int(steps["groups"].median() or 0)
    share = dict(zip(names, shares["proportion"].to_list(), strict=True))
    single = (steps.filter((pl.col("low") == pl.col("high")) & (pl.col("low") >= 0) & (pl.col("groups") >= 2))
              .with_columns(pl.col("low").map_elements(lambda c: names[c], return_dtype=pl.String).alias("only")))
    # A shuffle's step of B groups holds one source with probability about sum_s p_s^B.
    by_chance = sum(p ** size for p in share.values()) if size >= 2 else 1.0
    fraction = single.height / steps.height
    if fraction < 0.25 or fraction <= 3 * by_chance:
        return []
    runs = []
    for name, part in single.group_by("only", maintain_order=True).agg(pl.col("train_step")).iter_rows():
        runs.append((len(part), f"{shown_name(name)}: {_ranges(part)}"))
    shown = "; ".join(text for _, text in sorted(runs, key=lambda r: -r[0])[:3]) + ("; ..." if len(runs) > 3 else "")
    return [f"{single.height:,} of {steps.height:,} training steps hold a single data source ({shown}), where a "
            f"shuffle's would mix the epoch's {len(share)}: a curriculum by source, not only by length; --steps "
            "representative keeps steps about a shuffle's"]


def dropped_tail_warnings(frame: pl.DataFrame, sources: pl.DataFrame | None, settings: ScheduleSettings) -> list[str]:
    """A warning where the rows a dataloader drops as a partial last batch (verl's and AReaL's by default) are mostly
    one data source, or far longer or shorter than the rest: an AReaL newcomer's `bands` plan put AIME last, and a
    third of AIME's prompts went untrained every epoch; another's length curriculum left out the 212 longest prompts
    (831 predicted tokens against 401), of mixed sources, without a word. The rows dropped are the epoch's last in
    the exported order: training order (``train_step``) for a trainer that takes the schedule's steps, dispatch
    order (``seq``, the file order a trainer that submits rows as they come and trains them as they finish reads)
    otherwise. ``sources`` as `source_warnings`' (None: the input has no data source)."""
    import numpy as np

    size = settings.train_batch_size
    if not frame.height:
        return []
    epoch = frame.filter(pl.col("epoch") == frame["epoch"].min())
    left = epoch.height % size
    if not left or epoch.height <= size:
        return []
    order = ["train_step", "seq"] if settings.trainer == "schedule" else ["seq"]
    rows, p = epoch.height, left / epoch.height
    said: list[str] = []
    if sources is not None and sources["data_source"].drop_nulls().n_unique() >= 2:
        kinds = epoch.select("row", *order).join(sources, on="row", how="left").sort(order)
        tail = kinds.tail(left)["data_source"].drop_nulls().value_counts().rename({"count": "dropped"})
        # A shuffle drops a hypergeometric count of each source: flag one dropped far beyond it (4 sd), in numbers
        # that matter (10 prompts, a fifth of the source), not a 3-prompt source whose one row fell last by chance.
        share = tail.join(kinds["data_source"].drop_nulls().value_counts(), on="data_source").with_columns(
            (pl.col("dropped") / pl.col("count")).alias("fraction"),
            (pl.col("count") * p + 4 * (pl.col("count") * p * (1 - p) * (rows - pl.col("count")) / max(rows - 1, 1)
                                        ).sqrt()).alias("chance")
        ).filter((pl.col("dropped") >= 10) & (pl.col("fraction") >= max(0.2, 2 * p))
                 & (pl.col("dropped") > pl.col("chance"))).sort(["fraction", "data_source"], descending=[True, False])
        if share.height:
            name, dropped, _, fraction, _ = share.row(0)
            said.append(f"{dropped:,} of them are {shown_name(name)!r}, {fraction:.0%} of that source's prompts")
    if "predicted_tokens" in epoch.columns and left >= 10:
        # Their mean predicted length against the rows trained: flagged beyond 4 sd of a shuffle's tail mean (a
        # sample of `left` rows without replacement) and at least 1.5 times apart either way.
        tokens = epoch.sort(order)["predicted_tokens"].to_numpy().astype(np.float64)
        dropped_mean, kept_mean = float(tokens[-left:].mean()), float(tokens[:-left].mean())
        sd = float(tokens.std()) * np.sqrt((1 - p) / left * rows / max(rows - 1, 1))
        if (abs(dropped_mean - tokens.mean()) > 4 * sd and kept_mean > 0
                and not 1 / 1.5 < dropped_mean / kept_mean < 1.5):
            said.append(f"their predicted responses average {dropped_mean:,.0f} tokens against {kept_mean:,.0f} for the "
                        f"rows trained ({'the longest' if dropped_mean > kept_mean else 'the shortest'} left out)")
    if not said:
        return []
    sourced = sources is not None and sources["data_source"].drop_nulls().n_unique() >= 2
    return [f"a dataloader that drops a partial last batch (verl's and AReaL's by default; slime's --num-epoch) "
            f"leaves out the epoch's last {counted(left, 'row')} in "
            + ("training order" if settings.trainer == "schedule" else "file (dispatch) order")
            + (" (each epoch exported alone; of a file of every epoch, its last partial batch)"
               if settings.epochs > 1 else "")
            + ": " + "; ".join(said) + f", where a shuffle's would leave out about {p:.0%} "
            + ("of each source, at about the epoch's mean length" if sourced else "of the epoch, at about its mean length")
            + " (" + ("" if settings.epochs > 1 else "OpenRLHF trains them as a short step; ") + _MINDSPEED_PARTIAL + ")"
            + f"; use a --train-batch-size that divides {rows:,}"
            + (dividing_example(rows, size) if settings.epochs == 1 else "")
            + (", or --steps representative" if settings.arrangement == "auto" else "")]


def _ranges(steps: list[int]) -> str:
    """``steps 0-3, 7``: sorted step numbers as runs."""
    parts: list[str] = []
    start = prev = steps[0]
    for step in [*steps[1:], None]:
        if step is not None and step == prev + 1:
            prev = step
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if step is not None:
            start = prev = step
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(parts)
