"""`asp observe`'s checks on what a log names: ids the schedule or dataset do not hold (``--unknown-ids``), and a
prompt file given where the generation log goes.

The policy for unknown ids is ``skip`` (counted, left out), ``keep`` (counted, kept) or ``error`` (refused). Left
unnamed (None, the default) it is ``skip``, except that a log most of whose rows match no prompt is refused: a wrong
``--dataset`` (one holding a subset of the log's prompts) left out 89% of a probe's log with a warning and exit 0,
and a pipeline went on with a history lacking most of what was paid for. Naming ``skip`` keeps only the matched
rows, on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, SettingsError, counted, shown_id
from asp_cli.output import as_given
from asp_cli.reading.id_forms import near_misses
from asp_cli.reading.options import ReadOptions

UNKNOWN_POLICIES = ("skip", "keep", "error")


def check_unknown_policy(unknown_ids: str | None) -> None:
    """Refuse a policy that is none of `UNKNOWN_POLICIES` (None, the default, is ``skip`` refusing a majority)."""
    if unknown_ids is not None and unknown_ids not in UNKNOWN_POLICIES:
        raise SettingsError(f"--unknown-ids must be one of {', '.join(UNKNOWN_POLICIES)} (got {unknown_ids!r})")


def held_to(sched: Any, dataset: Sequence[Path] | None, added: pl.DataFrame, known: set[str]) -> dict[str, Any]:
    """What a log's ids were held to, for `settle_unknown_ids`' ``against``: the schedule, else the dataset; where both
    were given (the ids ``known`` are those both hold), the dataset where every unknown id is in the schedule: a
    dataset of other prompts beside the right schedule was told its ids "are not in the schedule; observe with the
    schedule these rollouts were made from" (a hostile review, 2026-12-07)."""
    schedule = {"word": "schedule", "files": [sched.path or "the schedule in memory"]} if sched is not None else None
    if schedule is None or not dataset:
        return schedule or {"word": "dataset", "files": list(dataset or [])}
    ids = added.filter(~pl.col(C.PROMPT_ID).is_in(list(known)))[C.PROMPT_ID]
    in_schedule = ids.is_in(sched.frame[C.PROMPT_ID].unique().implode())
    return {"word": "dataset", "files": list(dataset)} if ids.len() and in_schedule.all() else schedule


def settle_unknown_ids(added: pl.DataFrame, known: set[str], logs: Sequence[Path], against: dict[str, Any],
                       unknown_ids: str | None, summary: dict[str, Any], warnings: list[str]) -> pl.DataFrame:
    """The rows of ``added`` whose ids are ``known`` (and the others too under ``keep``), the counts in ``summary``.

    ``against`` says what the ids were held to: ``word`` (``schedule`` or ``dataset``) and ``files`` (the
    schedule's or the dataset's paths). Under the default policy (None) a log more than half of whose rows name no
    known prompt is refused; where every row read is unknown, E67's ``nothing to write`` says so instead.

    Raises
    ------
    InputError
        An unknown id under ``error``; under the default, a log mostly of unknown ids, or nothing left.
    """
    summary.update(unknown_id_rows=0, unknown_ids=0, unknown_id_examples=[], unknown_ids_written_otherwise="")
    if not added.height:
        return added
    unknown = ~pl.col(C.PROMPT_ID).is_in(list(known))
    strays = added.filter(unknown)
    if not strays.height:
        return added
    word = against["word"]
    distinct = strays[C.PROMPT_ID].unique(maintain_order=True)
    near = near_misses(distinct, known)
    alike = near.clause("in the log", f"in the {word}") if near else ""
    summary.update(unknown_id_rows=strays.height, unknown_ids=distinct.len(),
                   unknown_id_examples=distinct.head(5).to_list(), unknown_ids_written_otherwise=alike[2:])
    if unknown_ids == "error":
        raise InputError(
            f"{_rows_name(strays.height, distinct.len())} first {shown_id(distinct[0])}) "
            f"{_name_prompts(strays.height)} the {word} does not hold" + (alike or "; observe with the matching schedule, or pass --unknown-ids skip or keep"))
    if unknown_ids is None:
        if strays.height == added.height:  # nothing is left: E67's words, with or without an output
            raise InputError(nothing_to_write(summary, word))
        _refuse_a_log_mostly_unknown(added, strays, logs, against, alike)
    verb = "kept" if unknown_ids == "keep" else "left out"
    # Most of a log unmatched is a wrong id column more often than strays (a MindSpeed newcomer's mangled ids made a
    # nearly empty history, exit 0): said, with the strict mode a pipeline can gate on.
    most = (f": {strays.height / added.height:.0%} of the log, a wrong id column? (--id-key names it; "
            "--unknown-ids error fails the run instead)" if 2 * strays.height > added.height else "")
    warnings.append(
        f"{_rows_name(strays.height, distinct.len())} e.g. {shown_id(distinct[0])}) "
        f"{_name_prompts(strays.height)} the {word} does not hold; {verb} (--unknown-ids){most if not near else alike}")
    return added if unknown_ids == "keep" else added.filter(~unknown)


def _rows_name(rows: int, ids: int) -> str:
    """'3 rows (2 ids,' or '1 row (1 id,': the opening of the unknown-ids warning and refusal."""
    return f"{counted(rows, 'row')} ({counted(ids, 'id')},"


def _name_prompts(rows: int) -> str:
    return "names a prompt" if rows == 1 else "name prompts"


def _refuse_a_log_mostly_unknown(added: pl.DataFrame, strays: pl.DataFrame, logs: Sequence[Path],
                                 against: dict[str, Any], alike: str) -> None:
    """Refuse the first log (in the order given) more than half of whose rows ``strays`` holds: each log on its own,
    so that one of another dataset among good ones is named too."""
    rows = dict(added.group_by("log").len().iter_rows())
    unmatched = dict(strays.group_by("log").len().iter_rows())
    for path in logs:
        name = path.name
        if name not in unmatched or 2 * unmatched[name] <= rows[name]:
            continue
        ids = strays.filter(pl.col("log") == name)[C.PROMPT_ID].unique(maintain_order=True)
        word, files = against["word"], [str(f) for f in against["files"]]
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        flag = "--schedule its rollouts replayed" if word == "schedule" else "--dataset its rollouts were made from"
        raise InputError(
            f"{path}: {unmatched[name]:,} of its {counted(rows[name], 'row')} ({counted(ids.len(), 'id')}, e.g. "
            f"{shown_id(ids[0])}) name{'s' if unmatched[name] == 1 else ''} no prompt of the {word} ({shown}), so the history would lack most of the log"
            + (f"{alike}, or" if alike else f"; observe it with the {flag}, name the log's id column with --id-key, or")
            + f" pass --unknown-ids skip to keep only the {counted(rows[name] - unmatched[name], 'matched row')}")


def nothing_to_write(summary: dict[str, Any], against: str) -> str:
    """Why no row of the logs is usable, with the counts, and what to do."""
    read, bad, unknown = summary["rows_read"], summary["bad_rows"], summary["unknown_id_rows"]
    if unknown:
        rows = (("the one row" if unknown == 1 else f"all {unknown:,} rows") if unknown == read - bad
                else f"{unknown:,} of the {counted(read, 'row')}")
        examples = ", ".join(shown_id(i) for i in summary["unknown_id_examples"][:3])
        ids = (f"prompt id ({examples}) is" if summary["unknown_ids"] == 1
               else f"prompt ids ({summary['unknown_ids']:,} ids, e.g. {examples}) are")
        reason = (f"{rows} {'was' if unknown == 1 else 'were'} left out because {'its' if unknown == 1 else 'their'} "
                  f"{ids} not in the {against}"
                  + (f", and {counted(bad, 'bad row')} {'was' if bad == 1 else 'were'} skipped" if bad else ""))
        fix = (summary["unknown_ids_written_otherwise"] or
               f"observe with the {against} these rollouts were made from, name the log's id column with --id-key, "
               "or pass --unknown-ids keep")
    elif bad:
        reason = ("the one row was bad and skipped" if bad == 1 else f"all {bad:,} rows were bad and skipped") + (
            " (--on-bad-row skip)")
        fix = "fix the rows (the first ones are named with --on-bad-row error)"
    elif summary["logs_already_observed"]:
        reason = "every log is already in a history"
        fix = "give the logs of new rollouts"
    else:
        reason = "the logs hold no rows"
        fix = "give logs with one row per sample"
    return f"nothing to write: {reason}; {fix}"


def row_number_ids_warning(report: Any) -> list[str]:
    """Said where ``--dataset`` (read, ``report`` its `ReadReport`) without ``--schedule`` has no id column but its
    rows hold a field that looks like one (`reading.history_ids.row_numbered`): the history then names prompts by
    row number, and a schedule made with ``--id-key`` that field (which asp schedule's own warning offers) takes
    none of it. An OpenRLHF newcomer's round (2026-12-07): observed as the docs said, with --dataset, the next
    epoch's schedule read every length from the model."""
    from asp_cli.reading.history_ids import row_numbered

    names, hint = row_numbered(report)
    if not names or hint is None:
        return []
    return [f"{names[0]} has no id column, so this history names its prompts by row number, as a schedule made "
            f"without --id-key does; its rows hold {hint}: where the schedule was made with --id-key {hint}, observe "
            f"with --dataset-id-key {hint} or with --schedule SCHEDULE (which reads the id column it was made with), "
            "else its asp schedule --history takes none of these lengths"]


def refuse_a_prompt_file(path: Path, frame: pl.DataFrame, read: ReadOptions) -> None:
    """Refuse a file of prompts without response lengths given as a log: most often the probe's prompts (`asp probe
    -o`), given where the log of their generation goes. `read_lengths` says "a rollout log (`asp observe` turns one
    into a history)", which sent a newcomer running asp observe to asp observe."""
    lowered = {c.lower() for c in frame.columns}
    if read.length_key is not None or lowered & set(C.LENGTH_KEYS) or not lowered & set(C.PROMPT_KEYS):
        return
    raise InputError(f"{path}: holds prompts but no response lengths (looked for {', '.join(C.LENGTH_KEYS)}): a "
                     "prompt file (the probe's, as asp probe writes it?), not a generation log: generate its responses "
                     "first (docs/probe.md: examples/probe_openai.py, vLLM, or verl's generation) and observe the log "
                     "that writes (prompt ids and response token counts), or name the length column with "
                     f"{read.length_flag}")


def _column_names(path: Path) -> set[str]:
    """A file's column names, lower-cased, from its header alone (a Parquet footer, a JSON line's first object, a
    CSV header); empty where they cannot be read so cheaply."""
    import gzip
    import json

    name = path.name.lower().removesuffix(".gz")
    try:
        if name.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            return {c.lower() for c in pq.read_schema(as_given(path)).names}
        with (gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")) as handle:
            first = handle.readline(1 << 24).decode("utf-8-sig").strip()
        if name.endswith((".jsonl", ".ndjson")):
            row = json.loads(first)
            return {str(c).lower() for c in row} if isinstance(row, dict) else set()
        if name.endswith(".csv"):
            import csv

            return {c.strip().lower() for c in next(csv.reader([first]), [])}
    except Exception:  # noqa: BLE001 - unreadable here: the log's own reading says why
        return set()
    return set()


def refuse_datasets_among_logs(logs: Sequence[Path], dataset: Sequence[Path]) -> None:
    """Refuse prompt files among several logs given with ``--dataset``: `--dataset a.parquet b.parquet` (a shell glob
    of a Hugging Face dataset's shards) gives --dataset the first file only, and the others are read as logs, which
    was told only that a log's text "matches no dataset prompt", or that the shard is a probe to generate first."""
    if not dataset or len(logs) < 2:
        return
    heads = {path: _column_names(path) for path in logs}
    if not any(set(C.LENGTH_KEYS) & names or {"input", "output"} <= names for names in heads.values()):
        return  # no log among them: the reading of each says what it is
    for path, names in heads.items():
        if names & set(C.PROMPT_KEYS) and not names & set(C.LENGTH_KEYS) and not names & {"output", "responses"}:
            raise InputError(f"{path}: a prompt file among the rollout logs (prompts, no response lengths): "
                             "--dataset takes one file, and the files after it are read as logs; repeat it for each "
                             "prompt file "
                             f"(--dataset {dataset[0]} --dataset {path}: a shell glob after --dataset gives it only the "
                             "first)")
