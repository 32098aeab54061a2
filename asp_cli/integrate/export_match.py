"""What `asp export` says where a dataset row holds another prompt id than the schedule expects there.

Most often the dataset is not the schedule's; but where it holds exactly the schedule's prompt ids in another
order, it is the right prompts in the wrong order: an earlier export (written in the schedule's order) given back
to `asp export`, or a shuffled copy. Export reads the rows in the order of the file the schedule was made from and
writes them in the schedule's own order, so the fix is that file, which the schedule records (a newcomer's
re-export of its own export was told only that 3,540 rows differ). An export of several epochs holds each prompt
once an epoch, so its ids repeat: it is told the same (it was told to make ids unique or pass --id-key).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError, shown_id

METADATA_KEY = b"asp.export"  # where an export's Parquet file records what wrote it
_WHY = "export writes the schedule's own order itself"


def recorded_datasets(metadata: dict[str, Any]) -> list[str]:
    """The prompt files the schedule was made from, as `asp schedule` was given them (its ``columns_used``, by path),
    else by name (its ``inputs``); none where neither is readable (a damaged record)."""
    used = metadata.get("columns_used")
    if isinstance(used, dict) and used and all(isinstance(k, str) and k for k in used):
        return list(used)
    inputs = metadata.get("inputs")
    names = [i.get("name") for i in inputs if isinstance(i, dict)] if isinstance(inputs, list) else []
    return [n for n in names if isinstance(n, str) and n]


def misplaced_id_error(where: str, found: object, expected: object, differ: int, dataset_ids: Collection[object],
                       scheduled_ids: Collection[object], datasets: Sequence[Path],
                       metadata: dict[str, Any]) -> InputError:
    """The refusal of a dataset whose row ``where`` holds prompt id ``found`` where the schedule expects
    ``expected`` (``differ`` rows in all): where the dataset's ids (``dataset_ids``, one a row) are exactly the
    schedule's (``scheduled_ids``, one a scheduled row) in another order, it says so and names the file(s) the
    schedule was made from (`recorded_datasets`)."""
    head = f"{where} has prompt id {shown_id(found)} but the schedule expects {shown_id(expected)}"
    if len(dataset_ids) != len(scheduled_ids) or set(dataset_ids) != set(scheduled_ids):
        return InputError(f"{head} ({differ} rows differ); export with the file(s) the schedule was made from, in "
                          "the same order")
    head += f": the dataset holds the schedule's {len(scheduled_ids):,} prompt ids in another order"
    original = recorded_datasets(metadata)
    if original and original == [str(d) for d in datasets]:  # the same names: that file was reordered since
        return InputError(f"{head}; {', '.join(original)} was reordered after the schedule was made from it: restore "
                          f"its order, or make the schedule again ({_WHY})")
    return InputError(f"{head} (an earlier export?); export from {_named(original)} ({_WHY})")


def reexport_error(datasets: Sequence[Path], metadata: dict[str, Any]) -> InputError | None:
    """The refusal of an `asp export` given as the dataset where its prompt ids repeat (an export of several epochs
    holds each prompt once an epoch), naming the file(s) the schedule was made from; None where no dataset file is an
    export (the duplicate ids are the dataset's own)."""
    export = next((d for d in datasets if export_marks(d)[0]), None)
    if export is None:
        return None
    head = (f"{export}: an asp export (its rows repeat each prompt, once an epoch), not the prompt file(s) the "
            "schedule was made from")
    original = recorded_datasets(metadata)
    if original and original == [str(d) for d in datasets]:  # the same names: an export written over that file
        return InputError(f"{head}, whose name it has: the export was written over it? Restore that file, or make "
                          f"the schedule again ({_WHY})")
    return InputError(f"{head}; export from {_named(original)} ({_WHY})")


def _named(original: list[str]) -> str:
    """The file(s) the schedule was made from (`recorded_datasets`), as the fix names them."""
    if not original:
        return "the file(s) the schedule was made from, in the same order"
    return (f"{', '.join(original)}, the file{'s' if len(original) > 1 else ''} the schedule was made from"
            + (" (in that order)" if len(original) > 1 else ""))


def export_id_key(path: Path) -> str | None:
    """The column of ``path`` holding the schedule's prompt id where it is an `asp export` that wrote one (Parquet:
    its ``asp.export`` metadata; JSON lines: a first row carrying asp's ``seq`` and ``train_step``), else None."""
    return export_marks(path)[1]


def export_marks(path: Path) -> tuple[bool, str | None]:
    """Whether ``path`` is an `asp export` (Parquet: its ``asp.export`` metadata; JSON lines: a first row carrying
    asp's ``seq`` and ``train_step``, at its top or in an object field), and the column holding the schedule's
    prompt id where it wrote one (`export_id_key`)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        try:
            schema = pq.read_schema(path)
        except Exception:  # noqa: BLE001 - not readable as Parquet: the read below says why
            return False, None
        if METADATA_KEY not in (schema.metadata or {}):
            return False, None
        document = json.loads(schema.metadata[METADATA_KEY])
        fields = {f.name: f.type for f in schema}
        nested = [k for k in ("extra_info", document.get("metadata_key")) if k in fields
                  and getattr(fields[k], "num_fields", 0) and fields[k].get_field_index("prompt_id") >= 0]
        return True, f"{nested[0]}.prompt_id" if nested else "prompt_id" if "prompt_id" in fields else None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        try:
            with open(path, encoding="utf-8") as lines:
                first = json.loads(lines.readline() or "null")
        except (OSError, ValueError):
            return False, None
        if not isinstance(first, dict):
            return False, None
        holders = [("", first), *((f"{k}.", v) for k, v in first.items() if isinstance(v, dict))]
        marked = next((prefix for prefix, row in holders if "seq" in row and "train_step" in row), None)
        if marked is None:
            return False, None
        ids = [prefix for prefix, row in holders if "prompt_id" in row]
        return True, f"{ids[0]}prompt_id" if ids else None
    return False, None
