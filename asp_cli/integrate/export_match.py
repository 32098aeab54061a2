"""What `asp export` says where a dataset row holds another prompt id than the schedule expects there.

Most often the dataset is not the schedule's; but where it holds exactly the schedule's prompt ids in another
order, it is the right prompts in the wrong order: an earlier export (written in the schedule's order) given back
to `asp export`, or a shuffled copy. Export reads the rows in the order of the file the schedule was made from and
writes them in the schedule's own order, so the fix is that file, which the schedule records (a newcomer's
re-export of its own export was told only that 3,540 rows differ). An export of several epochs holds each prompt
once an epoch, so its ids repeat: it is told the same (it was told to make ids unique or pass --id-key). How an export
is known is `reading.exported`'s, which readers of prompts share.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError, shown_id
from asp_cli.reading.exported import EXPORT_ONE_EPOCH, EXPORT_REPEATS, export_marks

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
        return InputError(f"{head} ({differ:,} {'row differs' if differ == 1 else 'rows differ'}); export with the "
                          "file(s) the schedule was made from, in "
                          "the same order")
    head += f": the dataset holds the schedule's {len(scheduled_ids):,} prompt ids in another order"
    original = recorded_datasets(metadata)
    if original and original == [str(d) for d in datasets]:  # the same names: that file was reordered since
        return InputError(f"{head}; {', '.join(original)} was reordered after the schedule was made from it: restore "
                          f"its order, or make the schedule again ({_WHY})")
    return InputError(f"{head} (an earlier export?); export from {_named(original)} ({_WHY})")


def reexport_error(datasets: Sequence[Path], metadata: dict[str, Any], *, repeats: bool = True) -> InputError | None:
    """The refusal of an `asp export` given as the dataset where its prompt ids repeat (an export of several epochs
    holds each prompt once an epoch), naming the file(s) the schedule was made from; None where no dataset file is an
    export (the duplicate ids are the dataset's own). Not ``repeats``: one epoch's, read by row numbers (its ids are
    then no help), where E102's wording names it."""
    export = next((d for d in datasets if export_marks(d)[0]), None)
    if export is None:
        return None
    what = EXPORT_REPEATS if repeats else EXPORT_ONE_EPOCH
    head = f"{export}: {what}, not the prompt file(s) the schedule was made from"
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
