"""CSV and TSV text: the separator, the columns read as text, a whole file's frame, and where a bad line is.

`tables.read_table` reads a CSV with `read_csv`; the streamed reader (`stream`) parses batches with the same
helpers, so both read a file alike and name its bad lines alike.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError
from asp_cli.reading.json_records import escape_tag_lookalikes
from asp_cli.reading.options import OnBadRow
from asp_cli.reading.text_checks import check_column_names, check_utf8, first_error_line, is_utf8

_CSV_TEXT_KEYS = frozenset(k.lower() for k in (*C.ID_KEYS, *C.PROMPT_KEYS))


def csv_separator(path: Path, header: bytes) -> str:
    """The separator of a CSV file, from its name and its header line."""
    separator = "\t" if ".tsv" in [s.lower() for s in Path(path).suffixes] else ","
    if separator == "," and b"," not in header:
        # Spreadsheet exports in many locales separate with ';', and some tools with tabs: take the header's.
        for other in (b";", b"\t"):
            if other in header:
                return other.decode()
    return separator


def csv_text_schema(header: bytes, separator: str, text_columns: Sequence[str] = ()) -> dict[str, Any]:
    """The columns of a CSV header to read as text: those named like an id or a prompt, and ``text_columns``."""
    try:
        names = pl.read_csv(io.BytesIO(header), separator=separator, n_rows=0).columns
    except pl.exceptions.PolarsError:
        return {}  # the read itself then names the problem
    extra = set(text_columns)
    return {name: pl.String for name in names if name.lower() in _CSV_TEXT_KEYS or name in extra}


def check_unique_header(path: Path, header: bytes, separator: str) -> None:
    """Refuse a CSV header that names a column twice: which of the two is the prompt (or the id) would be a guess
    (Polars renames the second ``NAME_duplicated_0`` and the first silently wins); and one that runs past a lone
    carriage return (a file of old Mac line endings, one line to a CSV reader)."""
    import csv

    if b"\r" in re.sub(rb'"(?:[^"]|"")*"', b"", header).rstrip(b"\r\n"):
        # Lines ended by a carriage return alone make the whole file its header line: "the file has a header but
        # no rows" (a hostile-input round), where a JSON-lines file was told of its line endings.
        raise InputError(f"{path}: its lines end in a carriage return alone (old Mac line endings), so the whole "
                         "file reads as one header line: convert them to newlines (tr '\\r' '\\n')")
    try:
        names = next(csv.reader([header.decode("utf-8-sig").rstrip("\r")], delimiter=separator), [])
    except (UnicodeDecodeError, csv.Error):
        return  # the read itself names the problem
    check_column_names(path, names, ":1")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{path}:1: the header names column {name!r} twice; rename one of them")
        seen.add(name)


def csv_without_extra_marks(header: bytes) -> bytes:
    """A CSV header with at most one UTF-8 byte-order mark (Polars drops one): a file converted twice starts
    with two, and its first column, named with the second, was not found (its ids silently row numbers)."""
    while header.startswith(_BOM * 2):
        header = header[len(_BOM):]
    return header


_BOM = b"\xef\xbb\xbf"
_LINE_MARKS = re.compile(b"(?:^|(?<=\n))(?:" + re.escape(_BOM) + b")+")


def csv_without_line_marks(data: bytes) -> bytes:
    """CSV text (``data`` starting at a line's start) without the UTF-8 byte-order marks that open a line.

    Two files concatenated (``cat a.csv b.csv``) leave the second's mark at the start of a later line, where it
    became part of the first value: an id ``\\ufeffb``, unequal to ``b`` (a history's lengths matched no prompt).
    A mark there is never text anyone typed, so it goes, as the one that opens a file does (Polars drops it).
    """
    return _LINE_MARKS.sub(b"", data) if _BOM in data else data


def header_repeats(header: bytes, data: bytes) -> list[int]:
    """The lines of ``data`` (CSV records from a record's start; 0-based) that repeat the ``header`` line exactly,
    outside quotes (a quoted prompt may hold any line), byte-order marks and a carriage return aside.

    Two files concatenated (``cat a.csv b.csv``) leave the second's header as a data row: an id ``id`` with the
    prompt ``question``, or a history's length ``response_tokens`` that turned the whole column into text.
    """
    core = header
    while core.startswith(_BOM):
        core = core[len(_BOM):]
    core = core.rstrip(b"\r\n")
    if not core.strip() or core not in data:
        return []
    found = []
    lines = quotes = at = 0
    for match in re.finditer(b"(?:^|(?<=\n))(?:" + re.escape(_BOM) + b")*" + re.escape(core) + rb"\r?(?=\n|\Z)",
                             data):
        lines += data.count(b"\n", at, match.start())
        quotes += data.count(b'"', at, match.start())
        at = match.start()
        if quotes % 2 == 0:
            found.append(lines)
    return found


def check_no_header_repeats(path: Path, header: bytes, data: bytes, first_line: int) -> None:
    """Refuse CSV records (``data``, ``first_line`` the file's line of its first) that repeat the header line."""
    found = header_repeats(header, data)
    if found:
        raise InputError(f"{path}:{first_line + found[0]}: {HEADER_REPEAT}")


HEADER_REPEAT = ("the header line repeats here as a data row (files joined with cat?); remove the repeated header "
                 "line, or pass --on-bad-row skip to skip bad rows")


def utf8_lines_only(path: Path, data: bytes, first_line: int, report: Any, header: bytes = b"") -> bytes:
    """``data`` (CSV records, ``first_line`` the line of its first) without the lines that are not UTF-8 and those
    that repeat ``header`` (`header_repeats`), each skipped and counted in ``report`` (a `tables.ReadReport`;
    `--on-bad-row skip`, as a JSON line that is not UTF-8 is): they take no row number."""
    repeats = set(header_repeats(header, data)) if header else set()
    if not repeats and is_utf8(data):
        return data
    kept = []
    for index, line in enumerate(data.split(b"\n")):
        if index in repeats:
            report.skip(f"{path}:{first_line + index}")
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            report.skip(f"{path}:{first_line + index}")
            continue
        kept.append(line)
    return b"\n".join(kept)


def read_csv(path: Path, data: bytes, text_columns: Sequence[str] = (), on_bad_row: OnBadRow = "error",
              report: Any | None = None) -> pl.DataFrame:
    if on_bad_row == "skip" and report is not None and b"\n" in data:
        cut = data.index(b"\n") + 1
        check_utf8(path, data[:cut])  # the header: without it no row can be read
        data = data[:cut] + utf8_lines_only(path, data[cut:], 2, report, header=data[:cut])
    check_utf8(path, data)
    data = csv_without_line_marks(data)
    header = data[: data.find(b"\n") if b"\n" in data else len(data)]
    separator = csv_separator(path, header)
    check_unique_header(path, header, separator)
    check_no_header_repeats(path, header, data[len(header) + 1:], 2)
    overrides = csv_text_schema(header, separator, text_columns)
    try:
        try:
            frame = pl.read_csv(io.BytesIO(data), separator=separator, infer_schema_length=10000,
                                schema_overrides=overrides)
        except pl.exceptions.ComputeError:
            # A column whose kind changes after the rows the types were guessed from (numbers, then text after row
            # 10,000: a valid file was refused as unreadable): every row decides, at the cost of a second pass.
            frame = pl.read_csv(io.BytesIO(data), separator=separator, infer_schema_length=None,
                                schema_overrides=overrides)
    except pl.exceptions.PolarsError as exc:
        found = csv_bad_line(data, separator)
        if found is not None:
            raise InputError(f"{path}:{found[0]}: {found[1]}; check quoting and the separator") from None
        raise InputError(f"{path}: unreadable CSV ({first_error_line(exc)}); check quoting and the separator") from None
    if frame.height == 0:
        raise InputError(f"{path}: the file has a header but no rows; give at least one row")
    return escape_tag_lookalikes(frame) if b"\x00" in data else frame


def csv_bad_line(data: bytes, separator: str) -> tuple[int, str] | None:
    """(line, what is wrong) of the first record of a CSV with another number of fields than its header, or
    with broken quoting; lines count from ``data``'s first, 1 (error path only: Polars' parser names no line)."""
    import csv

    reader = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=""), delimiter=separator,
                        strict=True)
    width = None
    try:
        for fields in reader:
            if width is None:
                width = len(fields)
            elif fields and len(fields) != width:
                return reader.line_num, f"{len(fields)} fields where the header has {width}"
    except csv.Error as exc:
        return reader.line_num, str(exc)
    return None
