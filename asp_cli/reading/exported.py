"""How an `asp export` is known where a prompt file is read, and what a reader of prompts says of one.

An export holds the dataset's own rows in a schedule's order, with asp's columns added; one of several epochs holds
each prompt once an epoch, so its ids repeat. Given where prompts are read (`asp schedule`, `asp observe --dataset`,
`asp export`'s dataset) it was told E07's "make ids unique, or pass --id-key", which cannot help: the fix is the
file the schedule was made from. `integrate.export_match` says more where the schedule is at hand. Given where a
schedule is read, it was told only that it is no schedule (E22): it is named, with the schedule it came from.
`asp schedule` and `asp probe` refuse one of a single epoch too (E102): planned as prompts, it made a schedule of
asp's own output, and a probe of its rows; `asp observe --dataset` reads one on purpose (the file the trainer was
given). An export written with `asp export --prefix P` names asp's columns ``Pseq``, ``Ptrain_step``, ... and is known
by them too (`_asp_prefix`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError, ScheduleFormatError, shown_id
from asp_cli.output import as_given
from asp_cli.reading.options import ReadOptions

METADATA_KEY = b"asp.export"  # where an export's Parquet file records what wrote it
EXPORT_REPEATS = "an asp export (its rows repeat each prompt, once an epoch)"  # how every reader names one
EXPORT_ONE_EPOCH = "an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns added)"


def export_id_key(path: Path) -> str | None:
    """The column of ``path`` holding the schedule's prompt id where it is an `asp export` that wrote one (Parquet:
    its ``asp.export`` metadata; JSON lines: a first row carrying asp's columns, `_asp_prefix`), else None."""
    return export_marks(path)[1]


def with_export_id_key(read: ReadOptions, paths: Sequence[Path]) -> ReadOptions:
    """``read`` with the schedule's own id column of an `asp export` where the prompt files ``paths`` are exports (the
    file the trainer was given: `asp observe --dataset`, the predictor's prompt files) and no id column was named:
    ``extra_info.prompt_id`` in verl's layout, ``prompt_id`` or ``<metadata-key>.<prefix>prompt_id`` where the export
    added it. An export is in the schedule's order, so its row numbers are not the dataset's: a newcomer's history
    took them as ids and planned the next epoch on other prompts' lengths (45 of 256 right), and `asp predictor
    eval` scored each prompt against another's lengths. Messages name the column as the command's ``id_flag``."""
    if read.id_key is not None:
        return read
    keys = {export_id_key(Path(path)) for path in paths}
    if len(keys) != 1 or None in keys:
        return read
    return dataclasses.replace(read, id_key=keys.pop(), id_flag=f"{read.id_flag}, here the id `asp export` wrote")


def export_marks(path: Path) -> tuple[bool, str | None]:
    """Whether ``path`` is an `asp export` (Parquet: its ``asp.export`` metadata; JSON lines: a first row carrying
    asp's columns, at its top or in an object field, under `asp export --prefix` or not: `_asp_prefix`), and the
    column holding the schedule's prompt id where it wrote one (`export_id_key`): ``prompt_id`` beside the dataset's
    columns (unprefixed), ``extra_info.prompt_id`` in verl's layout, ``<metadata-key>.<prefix>prompt_id``."""
    if not path.is_file():  # a pipe blocks the first read (its reader refuses it), a missing file is its reader's
        return False, None
    if path.suffix.lower() in (".parquet", ".pq"):
        marked = _parquet_marks(path)
        if marked is None:
            return False, None
        schema, document = marked
        fields = {f.name: f.type for f in schema}
        structs = {k: [fields[k].field(i).name for i in range(fields[k].num_fields)]
                   for k in ("extra_info", document.get("metadata_key")) if k in fields
                   and getattr(fields[k], "num_fields", 0)}
        held = document.get("metadata_key") if document.get("metadata_key") in structs else None
        prefix = document.get("prefix")  # recorded since 2026-12-07; inferred from the names for an older export
        if not isinstance(prefix, str):
            prefix = _asp_prefix(structs[held] if held is not None else fields) or ""
        holders = [*((f"{k}.", names) for k, names in structs.items()), ("", list(fields))]
        return True, _id_name(holders, f"{held}." if held is not None else "", prefix)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        try:
            with open(path, encoding="utf-8") as lines:
                first = json.loads(lines.readline() or "null")
        except (OSError, ValueError, RecursionError):  # not an export: the reader of the file says what it is
            return False, None
        found = _asp_fields(first)
        if found is None:
            return False, None
        holders = [("", first), *((f"{k}.", v) for k, v in first.items() if isinstance(v, dict))]
        held = next(where for where, row in holders if row is found[0])
        return True, _id_name(holders, held, found[1])
    return False, None


def _id_name(holders: Sequence[tuple[str, Any]], held: str, prefix: str) -> str | None:
    """The first of ``holders`` (each: where its names are, ``""`` or ``"<field>."``, and its names) holding the
    schedule's prompt id: ``<prefix>prompt_id`` in the one holding asp's columns (``held``: --metadata-key's object,
    where `asp export` puts the id with them), else ``prompt_id`` (beside the dataset's columns and in verl's
    ``extra_info`` the id is never prefixed)."""
    for where, names in holders:
        for name in dict.fromkeys((f"{prefix}prompt_id", "prompt_id") if where == held else ("prompt_id",)):
            if name in names:
                return f"{where}{name}"
    return None


# Written by every `asp export` beside its predicted_tokens (which may be null), under its --prefix: asp's columns.
_PREFIXED_MARKS = ("epoch", "instance", "minibatch", "seq", "train_step")


def _asp_prefix(names: Collection[str]) -> str | None:
    """The `asp export --prefix` of asp's columns among ``names`` (a JSON row's keys, a Parquet schema's or struct's
    field names), else None: P where ``P`` + each of epoch, instance, minibatch, seq and train_step is there (a
    prefix is any text, so the pair ``Pseq``, ``Ptrain_step`` alone is weaker evidence than asp's bare names, and a
    dataset's own ``x_seq`` and ``x_train_step`` are not taken for an export: all five that asp always writes are
    asked for); else ``""`` where ``seq`` and ``train_step`` are (asp's own pair, as it was known before). A prefixed
    set wins over the bare pair: --prefix is what `asp export` asks for where the dataset has its own ``seq``."""
    for prefix in sorted({n[:-3] for n in names if isinstance(n, str) and n.endswith("seq") and n != "seq"},
                         key=lambda p: (-len(p), p)):
        if all(f"{prefix}{c}" in names for c in _PREFIXED_MARKS):
            return prefix
    return "" if "seq" in names and "train_step" in names else None


def _asp_fields(row: object) -> tuple[dict[str, Any], str] | None:
    """The object of a JSON-lines export's ``row`` holding asp's columns (the row itself, or its --metadata-key
    field), with their --prefix (`_asp_prefix`), else None."""
    if not isinstance(row, dict):
        return None
    holders = [row, *(v for v in row.values() if isinstance(v, dict))]
    return next(((held, prefix) for held in holders if (prefix := _asp_prefix(held)) is not None), None)


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
    return (first is not None and last is not None
            and first[0].get(f"{first[1]}epoch") != last[0].get(f"{last[1]}epoch"))


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
        schema = pq.read_schema(as_given(path))
        document = json.loads((schema.metadata or {})[METADATA_KEY])
    except Exception:  # noqa: BLE001 - not an export (or not readable as Parquet): the reader of the file says why
        return None
    return (schema, document) if isinstance(document, dict) else None


def export_ids(paths: Sequence[Path]) -> dict[str, Any]:
    """What the ids of Parquet exports (``paths``, one schedule's) name, as `asp export` recorded it from its schedule
    (``schedule_ids``: `history_ids.schedule_ids`), or {} where they do not all record one and the same. Logs observed
    against an export alone (verl's dumps of the file it was given) were recorded as naming nothing: a verl
    newcomer's history by row numbers was taken by a schedule with --id-key extra_info.index, every prompt another's
    lengths, without a word (`history_ids.id_warnings`)."""
    records = [(_parquet_marks(Path(p)) or (None, {}))[1].get("schedule_ids") for p in paths]
    first = records[0] if records else None
    return first if isinstance(first, dict) and first and all(r == first for r in records) else {}


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
    """Refuse an `asp export` among `asp schedule`'s or `asp probe`'s prompt files, of several epochs
    (`refuse_exports_of_epochs`) or of one: its rows are a dataset's in a schedule's order, with asp's ``seq`` and
    ``train_step`` added, so a schedule of it plans asp's own output, its row numbers (the ids of a dataset without
    ids) not the dataset's, and a probe of it writes rows carrying asp's columns, asp's output again. `asp observe
    --dataset` reads one on purpose (the file the trainer was given), by the schedule's ids it wrote; so do the
    predictor's commands, which join prompts to lengths by id (the rows the trainer saw: `with_export_id_key`)."""
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
