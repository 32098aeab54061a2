"""Where a row is in its file, for messages: a JSON line's own line (blank lines and skipped bad lines counted, as an
editor counts them), a CSV or Parquet row counted from 1."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from asp_cli.reading.tables import LINE, _read_bytes, file_format


def row_location(path: Path, frame: pl.DataFrame, index: int, fmt: str) -> str:
    """Say where row ``index`` of ``frame`` is in its file: a line for text files, a row for Parquet."""
    if LINE in frame.columns:
        return f"{path}:{frame[LINE][index]}"
    if fmt == "jsonl":
        return f"{path}:{jsonl_line_of_row(path, index)}"
    if fmt == "csv":
        return f"{path}: row {index + 1} (after the header)"
    return f"{path}: row {index + 1}"  # Parquet: counted from 1, as lines are


def place_in_file(file: str, row: int, line: int | None, lines: dict[str, pl.Series | None] | None = None) -> str:
    """Where a prompt is in its file, for a message naming rows of several files: the line of a JSON line (blank
    lines and skipped bad lines counted, as an editor counts them), else the row counted from 1. Without the line
    (a block read fast, where a batch before it may have skipped bad lines: a streamed read named line 22 for 23)
    the file is read again as the reader read it, bad lines skipped (error path only; ``lines`` keeps each file's
    line numbers, or None where every line was a row, for the next call)."""
    if line is not None:
        return f"{file}:{line}"
    if file_format(Path(file))[0] != "jsonl":
        return f"{file} row {row + 1}"
    cache = {} if lines is None else lines
    if file not in cache:
        from asp_cli.reading.tables import ReadReport, read_table

        table = read_table(Path(file), on_bad_row="skip", report=ReadReport())
        cache[file] = table[LINE] if LINE in table.columns else None
    numbers = cache[file]
    if numbers is not None and row < numbers.len():
        return f"{file}:{numbers[row]}"
    return f"{file}:{jsonl_line_of_row(Path(file), row)}"


def jsonl_line_of_row(path: Path, index: int) -> int:
    """The 1-based line of the ``index``-th non-blank line (error path only: it rereads the file)."""
    data = _read_bytes(path, file_format(path)[1])
    seen = -1
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            seen += 1
            if seen == index:
                return number
    return index + 1

