"""How an `asp export` is known where a prompt file is read, and what a reader of prompts says of one.

An export holds the dataset's own rows in a schedule's order, with asp's columns added; one of several epochs holds
each prompt once an epoch, so its ids repeat. Given where prompts are read (`asp schedule`, `asp observe --dataset`,
`asp export`'s dataset) it was told E07's "make ids unique, or pass --id-key", which cannot help: the fix is the
file the schedule was made from. `integrate.export_match` says more where the schedule is at hand. Given where a
schedule is read, it was told only that it is no schedule (E22): it is named, with the schedule it came from.
`asp schedule` refuses one of a single epoch too (E102): planned as prompts, it made a schedule of asp's own output;
`asp observe --dataset` reads one on purpose (the file the trainer was given).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError, ScheduleFormatError, shown_id

METADATA_KEY = b"asp.export"  # where an export's Parquet file records what wrote it
EXPORT_REPEATS = "an asp export (its rows repeat each prompt, once an epoch)"  # how every reader names one
EXPORT_ONE_EPOCH = "an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns added)"


def export_id_key(path: Path) -> str | None:
    """The column of ``path`` holding the schedule's prompt id where it is an `asp export` that wrote one (Parquet:
    its ``asp.export`` metadata; JSON lines: a first row carrying asp's ``seq`` and ``train_step``), else None."""
    return export_marks(path)[1]


def export_marks(path: Path) -> tuple[bool, str | None]:
    """Whether ``path`` is an `asp export` (Parquet: its ``asp.export`` metadata; JSON lines: a first row carrying
    asp's ``seq`` and ``train_step``, at its top or in an object field), and the column holding the schedule's
    prompt id where it wrote one (`export_id_key`)."""
    if not path.is_file():  # a pipe blocks the first read (its reader refuses it), a missing file is its reader's
        return False, None
    if path.suffix.lower() in (".parquet", ".pq"):
        marked = _parquet_marks(path)
        if marked is None:
            return False, None
        schema, document = marked
        fields = {f.name: f.type for f in schema}
        nested = [k for k in ("extra_info", document.get("metadata_key")) if k in fields
                  and getattr(fields[k], "num_fields", 0) and fields[k].get_field_index("prompt_id") >= 0]
        return True, f"{nested[0]}.prompt_id" if nested else "prompt_id" if "prompt_id" in fields else None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        try:
            with open(path, encoding="utf-8") as lines:
                first = json.loads(lines.readline() or "null")
        except (OSError, ValueError, RecursionError):  # not an export: the reader of the file says what it is
            return False, None
        if _asp_fields(first) is None:
            return False, None
        holders = [("", first), *((f"{k}.", v) for k, v in first.items() if isinstance(v, dict))]
        ids = [prefix for prefix, row in holders if "prompt_id" in row]
        return True, f"{ids[0]}prompt_id" if ids else None
    return False, None


def _asp_fields(row: object) -> dict[str, Any] | None:
    """The object of a JSON-lines export's ``row`` holding asp's ``seq`` and ``train_step`` (the row itself, or its
    --metadata-key field), else None."""
    if not isinstance(row, dict):
        return None
    holders = [row, *(v for v in row.values() if isinstance(v, dict))]
    return next((held for held in holders if "seq" in held and "train_step" in held), None)


def _jsonl_spans_epochs(path: Path) -> bool:
    """Whether a JSON-lines export's first and last rows are of different epochs: its rows are in dispatch order
    (``seq``) or training order (``train_step``), both of which start in its first epoch and end in its last, and
    JSON lines keep no metadata saying which epochs a file holds."""
    try:
        with open(path, "rb") as lines:
            first = _asp_fields(json.loads(lines.readline() or b"null"))
            last = _asp_fields(json.loads(_last_line(lines) or b"null")) if first is not None else None
    except (OSError, ValueError, RecursionError):  # a row nested too deep: the reader of the file says so
        return False
    return first is not None and last is not None and first.get("epoch") != last.get("epoch")


def _last_line(lines: Any, block: int = 1 << 16) -> bytes:
    """The last line of a binary file that is not blank, read back from its end a ``block`` at a time."""
    end = lines.seek(0, 2)
    tail = b""
    while end > 0:
        start = max(0, end - block)
        lines.seek(start)
        tail = lines.read(end - start) + tail
        end = start
        text = tail.rstrip()
        if b"\n" in text or start == 0:
            return text.rsplit(b"\n", 1)[-1]
    return b""


def _parquet_marks(path: Path) -> tuple[Any, dict[str, Any]] | None:
    """The Arrow schema of a Parquet ``path`` and what its ``asp.export`` metadata records, where it has such
    metadata (an object), else None."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        document = json.loads((schema.metadata or {})[METADATA_KEY])
    except Exception:  # noqa: BLE001 - not an export (or not readable as Parquet): the reader of the file says why
        return None
    return (schema, document) if isinstance(document, dict) else None


def export_not_schedule(path: Path) -> ScheduleFormatError | None:
    """The refusal of an `asp export` given where a schedule is read (`asp export`'s SCHEDULE, `asp report`,
    `asp simulate`): it holds a dataset's rows in a schedule's order, not the schedule, which its Parquet metadata
    names where it recorded one; None where ``path`` is no export (E22 says what it is)."""
    if not export_marks(path)[0]:
        return None
    marked = _parquet_marks(path) if path.suffix.lower() in (".parquet", ".pq") else None
    named = marked[1].get("schedule") if marked is not None else None
    recorded = f" ({shown_id(named)}, as the export records)" if isinstance(named, str) and named else ""
    return ScheduleFormatError(f"{path}: an asp export, not a schedule; pass the schedule it was exported from"
                               f"{recorded}")


def refuse_exports_of_epochs(paths: Sequence[Path]) -> None:
    """Refuse, before a prompt file is read, an `asp export` of every epoch of a schedule of several: in Parquet as
    its metadata records it (``epoch`` null, ``schedule_settings.epochs`` above 1), in JSON lines where its first and
    last rows are of different epochs. Read without an id column (verl's layout keeps the schedule's id in
    ``extra_info`` only; --metadata-key keeps it in that object), its row numbers were new ids, none repeated, and
    each prompt was read once an epoch again in silence. Exports that repeat an id read are said at the duplicate-id
    check (`repeated_export_error`)."""
    for path in paths:
        if not Path(path).is_file():  # a pipe blocks the first read (its reader refuses it)
            continue
        if Path(path).suffix.lower() in (".jsonl", ".ndjson") and _jsonl_spans_epochs(Path(path)):
            raise repeated_export_error({str(path): 2})  # the first row's epoch is not the last's: several
        marked = _parquet_marks(Path(path)) if Path(path).suffix.lower() in (".parquet", ".pq") else None
        if marked is None:
            continue
        settings = marked[1].get("schedule_settings")
        epochs = settings.get("epochs") if isinstance(settings, dict) else None
        if marked[1].get("epoch") is None and isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 1:
            raise repeated_export_error({str(path): epochs})


def refuse_exports_as_prompts(paths: Sequence[Path]) -> None:
    """Refuse an `asp export` among `asp schedule`'s prompt files, of several epochs (`refuse_exports_of_epochs`) or
    of one: its rows are a dataset's in a schedule's order, with asp's ``seq`` and ``train_step`` added, so a schedule
    of it plans asp's own output, its row numbers (the ids of a dataset without ids) not the dataset's. `asp observe
    --dataset` reads one on purpose (the file the trainer was given), by the schedule's ids it wrote."""
    refuse_exports_of_epochs(paths)
    export = next((path for path in paths if export_marks(Path(path))[0]), None)
    if export is not None:
        raise InputError(f"{export}: {EXPORT_ONE_EPOCH}, not the prompt file(s) the schedule was made from; give that "
                         "file instead (each prompt once, in its own order)")


def repeated_export_error(held: Mapping[str, int]) -> InputError | None:
    """The refusal of prompt files whose ids repeat where one of the files holding a repeated id (``held``: each, with
    how many of its rows hold it) is an `asp export`: one of several epochs repeats the id itself, one of a single
    epoch beside its dataset repeats that file's. None where none is an export (the ids are the files' own: E07)."""
    export = next((f for f in sorted(held) if export_marks(Path(f))[0]), None)
    if export is None:
        return None
    what = EXPORT_REPEATS if held[export] > 1 else "an asp export (its rows are another file's prompts, reordered)"
    return InputError(f"{export}: {what}, not the prompt file(s) the schedule was made from; give that file instead "
                      "(each prompt once, in its own order)")
