"""What a verl rollout dump's ``step`` and its counts at the cap say: steps dumped twice, prompts at several steps
(several epochs), responses cut at the cap.

verl writes one ``{global_steps}.jsonl`` a step under ``trainer.rollout_data_dir`` (``_write_generations`` of
verl/trainer/ppo/ray_trainer.py:454 and verl/trainer/ppo/v1/trainer_base.py:1226, 0.9.1), ``step`` on each row
being that global step: 1 for the first, counting on over epochs. A run resumed from ``global_step_K`` numbers its
steps from K + 1 again, so dumps of the run before the resume and after it, kept in two folders, hold steps K + 1
onward twice, whose prompts the restored data loader draws again. A response cut at ``data.max_response_length``
is dumped whole (no end token to lose), so the cap is the largest count, held by many samples.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli.errors import shown_id

# A cap is suspected where at least this share of the counted samples hold the largest count: a length
# distribution without a cap has one sample there, a few with ties; the 2026-12-07 newcomer's run, 32%.
_CAP_SHARE = 0.05
_CAP_MIN_SAMPLES = 3
# Nor where the largest count is below this: answers of a token or two (a letter, a number: "42") pile at their
# largest count by themselves, and no rollout caps responses that short (verl 0.9.1's packaged configs set
# data.max_response_length 512; the runs docs/integrations.md cites, 1,024 and 4,096; its toy run, 64). Not a
# rule relative to the lengths' spread: a run whose cap cuts most of its responses has its median at the cap too,
# and is the one the warning matters most for.
_CAP_MIN_TOKENS = 8
_DUMP_FORMATS = ("verl_v1_dump", "verl_legacy_dump")
_STEP_NAME = re.compile(r"^\d+\.jsonl$")  # as `asp_cli.reading.dump_folders` knows them


def dump_steps(frame: pl.DataFrame, columns: dict[str, str], kept: pl.Series,
               ids: list[str | None]) -> pl.DataFrame:
    """The ``prompt_id`` (matched, ``ids``) and ``step`` of a dump's kept rows (none where the column is missing or
    not whole)."""
    step = columns.get("step")
    if step is None or not frame.schema[step].is_integer():
        return pl.DataFrame(schema={"prompt_id": pl.String, "step": pl.Int64})
    return pl.DataFrame({"prompt_id": ids, "step": frame[step].cast(pl.Int64)},
                        schema={"prompt_id": pl.String, "step": pl.Int64}).filter(kept & pl.col("step").is_not_null())


def history_dumps(existing: pl.DataFrame | None, logs: list[dict[str, Any]]) -> list[tuple[Path, pl.DataFrame]]:
    """The verl dumps a history appended to took samples from, as `steps_dumped_twice` takes dumps: each by its
    name's step (verl names them ``{global_steps}.jsonl``). The resumed run's dumps appended to the history of the run
    before counted the steps both hold twice, unsaid (one `asp observe` of both said it)."""
    found = []
    names = sorted({str(log.get("name", "")) for log in logs if log.get("format") in _DUMP_FORMATS})
    for name in names if existing is not None else []:  # two logs of a name: their rows, once
        if _STEP_NAME.match(name):
            rows = existing.filter(pl.col("log") == name).select(  # type: ignore[union-attr]
                "prompt_id", pl.lit(int(name.split(".")[0]), pl.Int64).alias("step"))
            found.append((Path(f"the history's {name}"), rows))
    return found


def steps_dumped_twice(dumps: list[tuple[Path, pl.DataFrame]], summary: dict[str, Any],
                       warnings: list[str], held: int = 0) -> None:
    """Say steps that two dumps of one ``asp observe`` both hold, and how many samples that adds; the first ``held``
    dumps are the history's (`history_dumps`), a step of theirs said only where a dump read now holds it too (each
    later append said again what the one that added it said)."""
    where: dict[int, list[tuple[Path, int]]] = {}
    new: set[int] = set()
    for i, (path, rows_of) in enumerate(dumps):
        for step, rows in rows_of.group_by("step").len().sort("step").iter_rows():
            where.setdefault(int(step), []).append((path, int(rows)))
            if i >= held:
                new.add(int(step))
    twice = sorted(step for step, holders in where.items() if len(holders) > 1 and step in new)
    summary["steps_dumped_twice"] = twice
    if not twice:
        return
    # The samples beyond one dump's of each such step: the last file given is taken as the one kept.
    extra = sum(sum(rows for _, rows in where[step][:-1]) for step in twice)
    first = where[twice[0]]
    named = " and ".join(str(path) for path, _ in first[:2]) + (f" and {len(first) - 2} more" if len(first) > 2 else "")
    listed = ", ".join(map(str, twice[:8])) + (", ..." if len(twice) > 8 else "")
    warnings.append(
        f"step{'s' if len(twice) > 1 else ''} {listed} {'are' if len(twice) > 1 else 'is'} in more than one dump "
        f"(step {twice[0]}: {named}), so {extra:,} samples count twice: a verl run resumed from a checkpoint "
        "into another trainer.rollout_data_dir dumps the steps after the checkpoint again, the restored data "
        "loader's same prompts drawn again; observe each step's dump once (the resumed run's, whose samples were "
        "trained), or, where these are dumps of two runs, keep them: each run numbers its steps from 1")


def steps_of_epochs(dumps: list[tuple[Path, pl.DataFrame]], epoch: int | None, shared: set[str],
                    summary: dict[str, Any], warnings: list[str]) -> None:
    """Say prompts that these dumps hold at more than one step: verl's step counts on over epochs, so they are
    several epochs' samples, recorded under one epoch or none (a verl newcomer's two epochs, observed at once, were
    told later of a probe given twice). Ids of a text several share (``shared``) are left out: their samples were
    spread over them from each of the text's steps."""
    rows = pl.concat([frame for _, frame in dumps]) if dumps else None
    if rows is None or not rows.height:
        summary["prompts_at_several_steps"] = 0
        return
    # Of the prompts not of a shared text, both counts: the whole was said "of the N prompts", shared ids in N.
    rows = rows.filter(~pl.col("prompt_id").is_in(sorted(shared)))
    steps = rows.group_by("prompt_id").agg(
        pl.col("step").unique().sort()).filter(pl.col("step").list.len() > 1).sort("prompt_id")
    summary["prompts_at_several_steps"] = steps.height
    if not steps.height:
        return
    example, at = steps.row(0)
    warnings.append(
        f"{steps.height:,} of the {rows['prompt_id'].n_unique():,} prompts of these dumps are at more than one step "
        f"(e.g. {shown_id(example)} at steps {', '.join(map(str, at[:3]))}): verl's step counts on over epochs, so they "
        f"hold several epochs' samples, recorded {'as epoch ' + str(epoch) if epoch is not None else 'without an epoch'}"
        " (asp schedule --history-epochs and --lengths-epoch cannot tell them apart); observe each epoch's steps with "
        "its --epoch E (docs/integrations.md, \"Feeding the lengths back\")")


def cut_at_cap(part: pl.DataFrame, cap: int, summary: dict[str, Any]) -> pl.DataFrame:
    """A tokenizer-counted dump's samples (``prompt_id``, ``response_tokens``, ``\\x00whole``: decoded with special
    tokens) with the rollout's cap known, as history rows: those at the cap truncated (a cut response has no end
    token to lose: exact), the others given back the end-of-sequence token verl's ``skip_special_tokens=True``
    decode dropped (text decoded with its special tokens kept it)."""
    short = (~part["\x00whole"]) & (part["response_tokens"] < cap)
    summary["eos_added"] = summary.get("eos_added", 0) + int(short.sum())
    return part.select(
        "prompt_id",
        pl.when(short).then(pl.col("response_tokens") + 1).otherwise(pl.col("response_tokens"))
        .alias("response_tokens"),
        (pl.col("response_tokens") >= cap).alias("truncated"),
        pl.lit(None, pl.Int32).alias("epoch"))


def dump_notes(summary: dict[str, Any], warnings: list[str], cap_unknown: bool, epoch: int | None,
               shared: set[tuple[str, ...]], schedule_cap: int | None = None,
               history: tuple[pl.DataFrame | None, list[dict[str, Any]]] = (None, [])) -> None:
    """Take the dumps' private notes out of ``summary`` (`asp_cli.integrate.observe`) and say what they show;
    ``cap_unknown``: no --max-response-tokens given (the ``schedule_cap``, where a schedule gives one, may not be the
    run's); ``history``: the rows and logs of the history appended to, whose dumps count among the steps held twice."""
    dumps = summary.pop("\x00steps", [])
    held = history_dumps(*history)
    steps_dumped_twice(held + dumps, summary, warnings, len(held))
    steps_of_epochs(dumps, epoch, {i for ids in shared for i in ids}, summary, warnings)
    counted = summary.pop("\x00counted", [])
    if cap_unknown and counted:
        cap_unsaid(pl.concat(counted), warnings, schedule_cap)


def cap_unsaid(counts: pl.Series, warnings: list[str], schedule_cap: int | None = None) -> None:
    """Warn where many tokenizer-counted dump samples share the largest count and no cap was given: responses cut
    at the rollout's ``max_response_length``, which the history would otherwise hold as whole lengths. Under a
    ``schedule_cap`` (`asp observe --schedule`) that count marks them truncated: said where it is below that cap (a
    run with a cap of 1,024 observed against a schedule of asp's default 8,192 was said nothing, its cut samples
    kept as whole lengths). Not where the largest count is below `_CAP_MIN_TOKENS` (8): answers of a token or two
    share it by themselves (a false alarm before, 2026-12-07)."""
    if not counts.len() or counts.null_count() == counts.len():
        return
    top = int(counts.max())  # type: ignore[arg-type]
    at_top = int((counts == top).sum())
    if (at_top < max(_CAP_MIN_SAMPLES, _CAP_SHARE * counts.len()) or top < _CAP_MIN_TOKENS
            or (schedule_cap is not None and top >= schedule_cap)):
        return
    whose = (f", below the schedule's max_response_tokens ({schedule_cap:,}), which marks samples at it truncated"
             if schedule_cap is not None else "")
    warnings.append(
        f"{at_top:,} of the {counts.len():,} samples have the largest count, {top:,} tokens{whose}: responses cut at "
        f"the rollout's cap (verl's data.max_response_length)? Without it they are recorded as whole lengths, not "
        f"truncated, and an asp schedule --max-response-tokens above {top:,} predicts them as lengths that ended "
        f"there; pass the run's cap, --max-response-tokens N (N = data.max_response_length), to record them as cut "
        "(and give the other samples back the end token their decoded text lost)")
