"""Raw tables: a user file (JSONL, JSON, Parquet, CSV/TSV, optionally gzipped) into a frame of its own columns.

The fast path hands the file to PyArrow's or Polars' native readers; when that fails, a slow line-by-line pass
finds the exact line and column to name in the error, or skips bad rows when asked (``on_bad_row="skip"``).
Also here: finding a column by its candidate names (where a row is in its file: `places`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import json
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import limits
from asp_cli.errors import InputError, no_such_file, shown_columns, shown_id, stdin_named
from asp_cli.fingerprint import bytes_fingerprint
from asp_cli.reading.csv_text import read_csv
from asp_cli.reading.json_records import (EXACT_FLOAT, DuplicateKey, element_holding_duplicate, escape_tag_lookalikes,
                                         records_to_frame, unique_keys)
from asp_cli.reading.nested import candidates_inside, fields_on_path, path_reaches_field
from asp_cli.reading.options import OnBadRow
from asp_cli.reading.text_checks import (LONE_SURROGATE, SURROGATE_ESCAPE, check_column_names, has_lone_surrogate,
                                         ran_out_of_text)
from asp_cli.reading.text_checks import check_utf8 as _check_utf8
from asp_cli.reading.text_checks import first_error_line as _first_line
from asp_cli.reading.text_checks import is_utf8 as _is_utf8


_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIXES = {".json"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_CSV_SUFFIXES = {".csv", ".tsv"}
LINE = "\x00line"  # hidden column: the 1-based source line of a row read by the slow path
BAD_ROW_FIX = "fix the row, or pass --on-bad-row skip to skip bad rows"
FILE_ROW = "\x00file_row"  # hidden column: a prompt's 0-based row within its own file, for messages
FILE_LINE = "\x00file_line"  # hidden column: a JSON line's 1-based line where the line-by-line parser read it, else null
# CSV carries no types and Polars infers them, which would read the id `001` as the number 1 (and `01` beside
# `1` as a duplicate): the columns that can hold an id or a prompt are read as text.


@dataclass
class ReadReport:
    """What a read found: the columns it used per file and the rows it skipped."""

    rows: int = 0
    fingerprints: dict[str, str] = field(default_factory=dict)  # per file: "sha256:" of its bytes on disk
    pending: dict[str, Future] = field(default_factory=dict, repr=False)
    skipped_rows: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    columns_used: dict[str, dict[str, str]] = field(default_factory=dict)
    # per file: the data source and difficulty columns found (None: none), said by `asp schedule`; not in the
    # schedule's metadata, whose `columns_used` names them only where --source-key did
    metadata_columns: dict[str, dict[str, str | None]] = field(default_factory=dict)
    file_rows: dict[str, int] = field(default_factory=dict)  # per file: the rows its parser gave (row numbers taken)
    empty_prompts: int = 0  # prompts without text (an empty chat list, empty contents): legal, but likely a mistake
    empty_examples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the read left out and why, for the caller's warnings

    def settle(self) -> None:
        """Wait for the fingerprints still being computed."""
        for name, future in self.pending.items():
            self.fingerprints[name] = future.result()
        self.pending.clear()

    def skip(self, where: str) -> None:
        self.skipped_rows += 1
        if len(self.skipped_examples) < 5:
            self.skipped_examples.append(where)

    def empty(self, count: int, where: list[str]) -> None:
        self.empty_prompts += count
        self.empty_examples.extend(where[: 5 - len(self.empty_examples)])

    def tallies(self) -> tuple:
        """What a read of rows adds up so far, to restore when a file is read again (`restore`)."""
        return self.skipped_rows, list(self.skipped_examples), self.empty_prompts, list(self.empty_examples)

    def restore(self, tallies: tuple) -> None:
        self.skipped_rows, self.skipped_examples, self.empty_prompts, self.empty_examples = tallies

    def empty_warning(self) -> str | None:
        """The warning for prompts without text, if any."""
        if not self.empty_prompts:
            return None
        one = self.empty_prompts == 1
        return (f"{self.empty_prompts:,} {'prompt has' if one else 'prompts have'} no text (an empty chat list, or "
                f"empty contents){':' if one else ', e.g.'} {', '.join(self.empty_examples[:3])}; "
                f"{'it is scheduled as an empty prompt' if one else 'they are scheduled as empty prompts'}, which a "
                f"server may refuse: fix or drop {'that row' if one else 'those rows'}")


def _in_background(function, *args) -> Future:
    """Run ``function(*args)`` on a daemon thread and return its future.

    hashlib releases the GIL on large buffers, so a file's fingerprint is computed on the second core while
    the parser runs. A daemon thread, not a pool: an interrupted command must not wait at exit for a worker
    (a ThreadPoolExecutor's workers are joined when the interpreter shuts down).
    """
    future: Future = Future()

    def work() -> None:
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=work, name="asp-hash", daemon=True).start()
    return future


# --------------------------------------------------------------------------------------------------------
# Format detection and raw tables


def file_format(path: Path) -> tuple[str, bool]:
    """Return (format, gzipped) from the file name: format is jsonl, json, parquet or csv."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    gzipped = bool(suffixes) and suffixes[-1] == ".gz"
    if gzipped:
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    stdin = stdin_named(path)
    if stdin is not None:
        raise stdin
    if Path(path).is_dir():
        from asp_cli.reading.dump_folders import dump_folder_fix  # verl's rollout_data_dir (`read_lengths`: its own)

        raise InputError(dump_folder_fix(path)
                         or f"{path}: is a folder; name the files in it (e.g. {Path(path) / '*.jsonl'})")
    if Path(path).exists() and not Path(path).is_file():
        # A pipe (mkfifo) blocks every read until a writer comes, where Ctrl-C cannot reach it, and is read more
        # than once (the fingerprint, the rows, `asp export`'s second pass): an audit's `asp schedule` hung.
        raise InputError(f"{path}: is not a regular file (a pipe or a device); write it to a file first")
    if ext in _JSONL_SUFFIXES:
        return "jsonl", gzipped
    if ext in _JSON_SUFFIXES:
        return "json", gzipped
    if ext in _PARQUET_SUFFIXES:
        return "parquet", gzipped
    if ext in _CSV_SUFFIXES:
        return "csv", gzipped
    arrow = ext in (".arrow", ".feather", ".ipc")  # Hugging Face datasets' save_to_disk, which OpenRLHF reads
    # A MindSpeed-RL newcomer gave its preprocessed data (`OUTPUT_PREFIX_packed_input_ids_document.bin`): token ids,
    # no text, which no renaming makes readable.
    indexed = ext in (".bin", ".idx")
    raise InputError(
        f"{path}: unknown file type {ext or '(no extension)'!r}; "
        + (f"asp reads no Arrow files: write it as Parquet first (datasets.Dataset.from_file({path.name!r})"
           ".to_parquet('train.parquet'))" if arrow else
           "asp reads no Megatron indexed datasets (.bin/.idx, what MindSpeed-RL's and Megatron's preprocessing "
           "write: token ids, not text): give the file they were made from (the data config's input)" if indexed else
           "name it .jsonl, .json, .parquet or .csv (optionally .gz)"))


@contextlib.contextmanager
def input_file_errors(path: Path) -> Iterator[None]:
    """Turn the errors of opening an input file into one-line `InputError`s naming it."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: a path through a file (a.jsonl/b.jsonl)
        raise no_such_file(path) from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; name a file") from None
    except OSError as exc:  # no permission; a symlink loop (ELOOP), an I/O error: exit 70 before
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); check the file's permissions, "
                         "or name a readable file") from None


def bad_gzip(path: Path, exc: Exception) -> InputError:
    """The error for a gzip file that does not inflate: cut short (a log still being written, a copy interrupted:
    it was told to drop the .gz suffix), or not gzip at all."""
    if isinstance(exc, EOFError):
        return InputError(f"{path}: the compressed file ends before its end (cut short: a log still being written, "
                          "or a copy interrupted); read it once the writer has finished")
    if isinstance(exc, limits.TrailingGzipData):
        return InputError(f"{path}: {exc} (appended to it?); cut them off, or compress the file again")
    return InputError(f"{path}: not a valid gzip file ({exc}); drop the .gz suffix if it is plain")


def _read_bytes(path: Path, gzipped: bool, report: ReadReport | None = None) -> bytes:
    with input_file_errors(path):
        data = Path(path).read_bytes()
    if report is not None:
        report.pending[str(path)] = _in_background(bytes_fingerprint, data)
    if gzipped:
        data = limits.gunzip(data, str(path), InputError, on_bad=lambda exc: bad_gzip(path, exc))
    return data


# Other compressors' first bytes: read as text their data failed as "not valid UTF-8", with advice to re-encode.
_COMPRESSED_MAGIC = ((b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))


def _sniff(data: bytes) -> str:
    """Guess what a file really holds from its first bytes."""
    if data[:4] == b"PAR1":
        return "parquet"
    head = data[:4096].lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    if head.startswith(b"["):
        return "json"
    if head.startswith(b"{"):
        return "jsonl"
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    for magic, kind in _COMPRESSED_MAGIC:
        if data.startswith(magic):
            return kind
    return "csv"


def _check_not_empty(path: Path, data: bytes) -> None:
    if not data or data.isspace():  # isspace stops at the first other byte; strip() would copy the file
        raise InputError(f"{path}: the file is empty; give a file with at least one row")


def mislabelled(declared: str, data: bytes) -> bool:
    """Whether a text file's first bytes say it is not what its name (``declared``: "CSV", "JSON lines", "JSON")
    says: Parquet or gzip under any text name, JSON under a CSV name (a CSV header cannot open with ``{`` or ``[``
    and mean it; read as CSV it fails on its second line with a parser message that names no fix)."""
    actual = _sniff(data)
    if actual in ("parquet", "gzip", "zstd", "bzip2", "xz"):
        return True
    if declared != "CSV" or actual not in ("json", "jsonl"):
        return False
    # A header may open with a bracket (`[id],prompt`): JSON only if its first line is JSON, or opens an array.
    first = data[:4096].lstrip().removeprefix(b"\xef\xbb\xbf").lstrip().split(b"\n", 1)[0].strip()
    if first == b"[" or first.startswith(b"[{"):
        return True
    try:
        return isinstance(json.loads(first), (dict, list))
    except ValueError:
        return False


_SUFFIXES = {"parquet": ".parquet", "json": ".json", "jsonl": ".jsonl"}  # each kind's name (E09); "csv" is only a guess


def _mismatch(path: Path, declared: str, data: bytes) -> InputError:
    actual = _sniff(data)
    described = {"parquet": "a Parquet file", "json": "a JSON array", "jsonl": "JSON lines", "gzip": "gzip data",
                 "csv": "text (CSV?)", "zstd": "zstd data", "bzip2": "bzip2 data", "xz": "xz data"}[actual]
    fix = (f"decompress it ({'unzstd' if actual == 'zstd' else 'bunzip2' if actual == 'bzip2' else 'unxz'}); "
           "asp reads plain files and .gz" if actual in ("zstd", "bzip2", "xz") else "rename it to match its content"
           + (f" ({path.name}.gz)" if actual == "gzip" else f" ({Path(path.name.removesuffix('.gz')).stem}"
              f"{_SUFFIXES[actual]})" if actual in _SUFFIXES else ""))
    return InputError(f"{path}: the name says {declared} but the file looks like {described}; {fix}")


def _wide_encoding(head: bytes) -> str | None:
    """UTF-16 or UTF-32 (Windows tools write them) from a file's first bytes: a byte-order mark, or text whose
    every second (or every fourth) byte is NUL, as ASCII characters are there; None for anything else."""
    for mark, name in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                       (b"\xfe\xff", "UTF-16")):
        if head.startswith(mark):
            return name
    head = head[: len(head) // 4 * 4]
    if len(head) < 8:
        return None
    for step, name in ((4, "UTF-32"), (2, "UTF-16")):
        lanes = [head[i::step] for i in range(step)]
        zero = [lane.count(0) / len(lane) for lane in lanes]
        if sum(z > 0.9 for z in zero) == step - 1 and min(zero) < 0.1:  # one lane of characters, the rest NUL
            return name
    return None


def _check_encoding(path: Path, data: bytes) -> None:
    """A text input in UTF-16 or UTF-32 is named as such (read as UTF-8 it failed at byte 0, or worse, read
    through with NUL bytes in every name)."""
    wide = _wide_encoding(data[:4096])
    if wide is not None:
        raise InputError(f"{path}: the file is {wide}, not UTF-8; re-encode it as UTF-8, for example with "
                         f"`iconv -f {wide} -t UTF-8`")


def each_file_once(paths: Sequence[Path], what: str) -> None:
    """Raise `InputError` when one file is named twice among ``paths`` (the same path, or two names of one
    file): every row would count twice, as duplicate prompt ids or as doubled samples. ``what`` names the
    files in the message ("prompt file", "length file")."""
    given: dict[str, Path] = {}
    for path in paths:
        path = Path(path)
        try:
            same = given.setdefault(os.path.realpath(path), path)  # Path.resolve raised on a symlink loop: exit 70
        except FileNotFoundError:  # a relative name where the working directory was removed: exit 70, "a bug"
            raise no_such_file(path) from None
        if same is not path:
            shown = f"{path}" if str(same) == str(path) else f"{path} (the same file as {same})"
            raise InputError(f"{shown}: given twice; name each {what} once")


def read_table(path: Path, *, on_bad_row: OnBadRow = "error", report: ReadReport | None = None,
               text_columns: Sequence[str] = (), source_json: bool = False) -> pl.DataFrame:
    """Read a whole file into a frame of the user's own columns, choosing the reader by the file name.

    Malformed JSON lines raise, or are skipped and counted in ``report`` when ``on_bad_row="skip"``. A CSV
    file's id and prompt columns (by their usual names, and ``text_columns``) are read as text. With
    ``source_json``, the rows of a JSON lines or JSON file also carry `SOURCE_JSON`: each row's object as the file
    holds it (a JSON line's own text; an array element written compactly), for writers that must give the rows back
    as they came (a frame's column has one type: `asp export --format jsonl`).

    Raises
    ------
    InputError
        For a missing, empty, malformed or mislabelled file, naming the line where one can be found.
    """
    path = Path(path)
    fmt, gzipped = file_format(path)
    data = _read_bytes(path, gzipped, report)
    _check_not_empty(path, data)
    if fmt == "parquet":
        return _read_parquet(path, data)
    declared = fmt.upper() if fmt != "jsonl" else "JSON lines"
    if mislabelled(declared, data):
        raise _mismatch(path, declared, data)
    _check_encoding(path, data)
    if fmt == "jsonl":
        frame = _read_jsonl(path, data, on_bad_row, report)
        return frame.with_columns(_jsonl_sources(data, frame)) if source_json else frame
    if fmt == "json":
        return _read_json_array(path, data, source_json)
    return read_csv(path, data, text_columns, on_bad_row, report)


SOURCE_JSON = "\x00source_json"  # hidden column: a JSON row's own object text (`read_table`'s ``source_json``)


def _jsonl_sources(data: bytes, frame: pl.DataFrame) -> pl.Series:
    """The text of the JSON line each row of ``frame`` was parsed from: by its `LINE` where the line-by-line parser
    read it (it skips bad lines), else the file's non-blank lines in order (PyArrow's reader gives one row each)."""
    lines = data.split(b"\n")
    if LINE in frame.columns:
        chosen = [lines[number - 1] for number in frame[LINE].to_list()]
    else:
        chosen = [line for line in lines if line.strip()]
    assert len(chosen) == frame.height, (len(chosen), frame.height)
    # A byte-order mark opens a file (or a file concatenated to another), not the row: the parsers skip it too.
    texts = [line.decode("utf-8").strip().lstrip("\ufeff").lstrip() for line in chosen]
    return pl.Series(SOURCE_JSON, texts, dtype=pl.String)


def _read_parquet(path: Path, data: bytes) -> pl.DataFrame:
    if data[:4] != b"PAR1":
        raise _mismatch(path, "Parquet", data)
    check_parquet_footer(io.BytesIO(data), str(path))
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - any reader failure (a Rust panic
        # too, a BaseException) is the file's fault here
        raise InputError(f"{path}: unreadable Parquet file ({_first_line(exc)}); rewrite it") from None
    if frame.height == 0:
        raise InputError(f"{path}: the file has no rows; give a file with at least one row")
    # Dictionary-encoded text (pandas `category`, Arrow dictionaries) reads as Categorical: use it as text.
    categorical = [name for name, dtype in frame.schema.items() if isinstance(dtype, (pl.Categorical, pl.Enum))]
    if categorical:
        frame = frame.with_columns(pl.col(categorical).cast(pl.String))
    return escape_tag_lookalikes(frame)


def check_parquet_footer(source: Any, where: str) -> Any:
    """Read a Parquet file's schema from its footer and refuse columns nested too deep to read safely, and a
    schedule given where rows are read.

    Polars' Parquet reader recurses once per nesting level and crashes (SIGSEGV) at about 800 levels; the
    footer says how deep every column goes before any page is read. Returns the Arrow schema.
    """
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(source)
    except Exception as exc:  # noqa: BLE001 - a damaged footer is the file's fault
        if limits.PARQUET_TOO_DEEP in str(exc):
            raise limits.parquet_depth_error(where, InputError) from None
        raise InputError(f"{where}: unreadable Parquet file ({_first_line(exc)}); rewrite it") from None
    limits.check_parquet_depth(schema, where, InputError)
    check_column_names(where, schema.names)
    from asp_cli.schedule_format import METADATA_KEY

    if METADATA_KEY in (schema.metadata or {}):  # an input of rows, given the schedule made from them
        raise InputError(f"{where}: this is an asp schedule, not a file of prompts or lengths; give the prompt "
                         "or length file itself (the schedule goes where a command asks for SCHEDULE)")
    return schema


def _too_deep_lines(path: Path, data: bytes, on_bad_row: OnBadRow, first_line: int = 1) -> set[int]:
    """Lines nested deeper than asp reads: an error naming the first, or (skipping bad rows) their numbers.

    Checked before PyArrow's parser sees the bytes: it crashes the process on deep enough nesting. ``data`` may
    be a block of a file starting at line ``first_line``; the numbers are the file's.
    """
    offsets = limits.json_depth_violations(data, per_line=True, first_only=on_bad_row == "error")
    if not offsets:
        return set()
    if on_bad_row == "error":
        line, column = limits.line_and_column(data, offsets[0])
        line += first_line - 1
        raise InputError(f"{path}:{line}: JSON nested more than {limits.MAX_NESTING_DEPTH} levels deep (at column "
                         f"{column}); asp reads at most {limits.MAX_NESTING_DEPTH} levels: flatten the field, "
                         f"or {BAD_ROW_FIX}")
    import numpy as np

    breaks = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
    return {int(i) + first_line for i in np.searchsorted(breaks, np.asarray(offsets), side="left")}


def _read_jsonl(path: Path, data: bytes, on_bad_row: OnBadRow, report: ReadReport | None) -> pl.DataFrame:
    if _sniff(data) == "json" and looks_like_json_array(data):
        raise InputError(f"{path}: holds a JSON array, not JSON lines; rename it to .json")
    # (A file that opens with "[" but is not one array is JSON lines whose first line is bad: parsed line by line,
    # that line is named.)
    frame = parse_jsonl_block(path, data, on_bad_row=on_bad_row, report=report)
    if frame.height == 0:
        raise InputError(f"{path}: the file has no rows; give a file with at least one row")
    return frame


def looks_like_json_array(data: bytes) -> bool:
    """Whether data that opens with "[" is a JSON array (a .json file misnamed), not JSON lines whose first line is
    an array: the first line of such lines is a whole JSON value and more lines follow, where an array's first
    line alone is not one (``[`` or ``[{...},``), unless the whole array is that one line."""
    head, _, rest = data.lstrip().removeprefix(b"\xef\xbb\xbf").partition(b"\n")
    if not rest.strip():
        return True
    try:
        json.loads(head)
    except (ValueError, UnicodeDecodeError):
        return True
    return False


def parse_jsonl_block(path: Path, data: bytes, *, on_bad_row: OnBadRow, report: ReadReport | None,
                      first_line: int = 1, allow_empty: bool = False) -> pl.DataFrame:
    """Parse whole JSON lines (a file, or a block of one starting at line ``first_line``) into a frame.

    PyArrow's reader first; when it fails, line by line (`_read_jsonl_slow`). Errors and skipped rows name the
    file's own line numbers. ``allow_empty`` returns an empty frame for a block without a readable row.
    """
    import pyarrow as pa
    import pyarrow.json as pa_json

    too_deep = _too_deep_lines(path, data, on_bad_row, first_line)
    valid_utf8 = _is_utf8(data)
    if not valid_utf8 and on_bad_row == "error":
        _check_utf8(path, data, first_line)
    try:
        if not valid_utf8 or too_deep or _has_null_line(data):
            raise pa.ArrowInvalid("invalid UTF-8, lines to skip or a null line: parse line by line")
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 26))
        if _has_timestamp(table.schema):
            # PyArrow takes text shaped like a date ("2024-01-02") for a timestamp, which JSON has not: an id
            # "2024-01-02" was refused as a Datetime, and exported a date column came back retyped. Read it as text.
            text = pa.schema([pa.field(f.name, _timestamps_as_text(f.type)) for f in table.schema])
            table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 26),
                                      parse_options=pa_json.ParseOptions(explicit_schema=text))
        if _NUL_ESCAPE in data and any(name.startswith("\x00") for name in table.column_names):
            raise pa.ArrowInvalid("a column named with a NUL: line by line, to name its line")
        if table.num_rows > _filled_lines(data):
            # More rows than lines: two values on one line ({...}{...}, {...}null) or lines split by a bare
            # carriage return, which PyArrow takes as rows; line by line they are malformed lines, named.
            raise pa.ArrowInvalid("more rows than lines: parse line by line")
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        if _may_have_rounded(frame):
            raise pa.ArrowInvalid("a column of floats that may hold integers it rounded: line by line")
        if _NUL_ESCAPE in data:  # text can start with a NUL (as the reader's tags do) only written so
            frame = escape_tag_lookalikes(frame)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pl.exceptions.PolarsError):
        frame = _read_jsonl_slow(path, data, on_bad_row=on_bad_row, report=report, too_deep=too_deep,
                                 first_line=first_line, allow_empty=allow_empty)
    return frame


def _may_have_rounded(frame: pl.DataFrame) -> bool:
    """Whether a column of floats reaches 2**53, where PyArrow may have rounded an integer of the file beside
    fractions (2**53 + 1 to 2**53); line by line such a column keeps the file's integers (`records_to_frame`)."""
    floats, stack = [], [(pl.col(c), t) for c, t in frame.schema.items()]
    while stack:  # a struct's fields too: a dotted --id-key reads them (`with_nested_key`)
        expr, dtype = stack.pop()
        floats += [expr] if dtype.is_float() else []
        stack += [(expr.struct.field(f.name), f.dtype) for f in dtype.fields] if isinstance(dtype, pl.Struct) else []
    return bool(floats) and any(v is not None and v >= EXACT_FLOAT
                                for v in frame.select(e.abs().max().alias(str(i)) for i, e in enumerate(floats)).row(0))


def _timestamps_as_text(dtype: Any) -> Any:
    """An Arrow type with every timestamp in it (nested too) made text."""
    import pyarrow as pa

    if pa.types.is_timestamp(dtype):
        return pa.string()
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pa.list_(_timestamps_as_text(dtype.value_type))
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _timestamps_as_text(f.type)) for f in dtype])
    return dtype


def _has_timestamp(schema: Any) -> bool:
    return any(_timestamps_as_text(f.type) != f.type for f in schema)


# A line that is JSON ``null``: PyArrow's JSON reader crashes the process (SIGSEGV, pyarrow 26) when a block
# it parses begins with one, before any error can be raised; such input goes line by line instead, where the line
# is a bad row ("expected a JSON object, found null"). A search for a newline, blanks and "null": 40 ms a 100 MB.
_NULL_LINE_START = re.compile(rb"[ \t\r\n]*null")
_NULL_LINE = re.compile(rb"\n[ \t\r]*null")


def _json_name(value: Any) -> str:
    """A parsed JSON value's kind by JSON's own names (null, a number, ...), for messages."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return {list: "an array", str: "a string"}.get(type(value), "a number")


_BLANK_AFTER = re.compile(rb"\n(?=[ \t\r]*(?:\n|\Z))")  # a newline whose line is blank (or the end)
_BLANK_FIRST = re.compile(rb"[ \t\r]*(?:\n|\Z)")


def _filled_lines(data: bytes) -> int:
    """How many lines of ``data`` hold more than blanks (about 40 ms a 100 MB)."""
    lines = data.count(b"\n") + 1
    return lines - len(_BLANK_AFTER.findall(data)) - bool(_BLANK_FIRST.match(data))


def _has_null_line(data: bytes) -> bool:
    return bool(_NULL_LINE_START.match(data) or _NULL_LINE.search(data))


def _read_jsonl_slow(path: Path, data: bytes, *, on_bad_row: OnBadRow, report: ReadReport | None,
                     too_deep: set[int] = frozenset(),  # type: ignore[assignment]
                     first_line: int = 1, allow_empty: bool = False) -> pl.DataFrame:
    """Parse JSON lines one by one: exact line numbers, bad rows skipped on request, mixed types kept as text.

    Lines in ``too_deep`` (nested deeper than asp reads; the file's own numbers) are bad rows, never parsed.
    """
    records: list[dict[str, Any]] = []
    nul_names = _NUL_ESCAPE in data  # a key can start with NUL only written as this escape (JSON text has no raw NUL)
    pieces = data.split(b"\n")
    unfinished = len(pieces) - 1 if pieces[-1].strip() else -1  # the last line, where no newline ends it
    for index, raw in enumerate(pieces):
        number = first_line + index
        if not raw.strip():
            continue
        problem = None
        try:
            if number in too_deep:
                problem = f"JSON nested more than {limits.MAX_NESTING_DEPTH} levels deep"
            else:
                value = json.loads(raw, object_pairs_hook=unique_keys)
                if not isinstance(value, dict):
                    problem = f"expected a JSON object, found {_json_name(value)}"
                elif SURROGATE_ESCAPE.search(raw) and has_lone_surrogate(value):
                    problem = LONE_SURROGATE
        except UnicodeDecodeError:
            problem = "not valid UTF-8; re-encode the file as UTF-8"
        except json.JSONDecodeError as exc:
            problem = f"malformed JSON at column {exc.colno} ({exc.msg})"
            if exc.msg == "Extra data" and (b"\r" if isinstance(raw, bytes) else "\r") in raw.strip():  # a hostile-input round's old-Mac file was
                # told of extra data only
                problem += ("; its lines end in a carriage return alone (old Mac line endings): convert them to "
                            "newlines (tr '\\r' '\\n')")
            if index == unfinished and ran_out_of_text(raw, exc):
                problem = ("the file ends inside this line (cut short: a log still being written, or a copy "
                           "interrupted)")
        except DuplicateKey as exc:
            problem = exc.problem
        if problem is not None:
            if on_bad_row == "skip" and report is not None:
                report.skip(f"{path}:{number}")
                continue
            raise InputError(f"{path}:{number}: {problem}; {BAD_ROW_FIX}")
        if nul_names:
            check_column_names(path, value, f":{number}")
        value["\x00line"] = number
        records.append(value)
    if not records:
        if allow_empty:
            return pl.DataFrame()
        raise InputError(f"{path}: no readable rows; give a file with at least one JSON object per line")
    return records_to_frame(records)


_NUL_ESCAPE = b"\\u0000"  # JSON's only spelling of a NUL character in text (a raw one is malformed JSON)
def _first_line_is_object(data: bytes) -> bool:
    for raw in data.split(b"\n"):
        if raw.strip():
            try:
                return isinstance(json.loads(raw), dict)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return False
    return False


def _read_json_array(path: Path, data: bytes, source_json: bool = False) -> pl.DataFrame:
    _check_utf8(path, data)
    limits.check_json_depth(data, str(path), InputError)
    try:
        value = json.loads(data, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InputError(f"{path}: element {element_holding_duplicate(data)} of the array {exc.problem}") from None
    except json.JSONDecodeError as exc:
        if _sniff(data) == "jsonl" and _first_line_is_object(data):
            raise InputError(f"{path}: holds JSON objects one per line, not a JSON array; rename it to .jsonl") from None
        raise InputError(f"{path}:{exc.lineno}: malformed JSON at column {exc.colno} ({exc.msg}); fix the file") from None
    if isinstance(value, dict):
        raise InputError(f"{path}: holds one JSON object, not an array of objects; wrap it in [...] or rename it to .jsonl")
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a JSON array of objects; found {type(value).__name__}")
    escaped = bool(SURROGATE_ESCAPE.search(data))  # once: the elements are checked only where one may be
    nul_names = _NUL_ESCAPE in data
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            kind = {type(None): "null", bool: "true/false", str: "text", int: "a number", float: "a number",
                    list: "a list"}.get(type(item), type(item).__name__)  # JSON's words, counted from 1
            raise InputError(f"{path}: element {index + 1} of the array is {kind}, not an object; fix it")
        if escaped and has_lone_surrogate(item):
            raise InputError(f"{path}: element {index + 1} of the array {LONE_SURROGATE}; fix its text")
        if nul_names:
            check_column_names(path, item, f": element {index + 1} of the array")
        if source_json:
            item[SOURCE_JSON] = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        item["\x00line"] = index + 1
    if not value:
        raise InputError(f"{path}: the array is empty; give at least one object")
    return records_to_frame(value)


def release_arrow_memory() -> None:
    """Hand the memory PyArrow's allocator keeps after a read back to the system.

    The JSON reader's buffers are freed once the user's columns are extracted, but PyArrow's pool keeps
    them for reuse, and Polars (a different allocator) cannot use them: on a 10M-prompt file that is about
    8 GB held for nothing.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


# --------------------------------------------------------------------------------------------------------
# Column detection


def find_column(
    frame: pl.DataFrame,
    candidates: Sequence[str],
    override: str | None,
    *,
    what: str,
    flag: str | None,
    path: Path,
    required: bool = True,
) -> str | None:
    """Return the column to use: the override if given, else the first candidate present.

    ``flag`` is the option that names the column, for the message; None where no option can (then the
    message asks to rename one).
    """
    present = [c for c in frame.columns if not c.startswith("\x00")]
    if override is not None:
        if override not in frame.columns:
            inside = (f": {flag} names a column of its own, not a field inside one; give that field a column of its "
                      "own first" if path_reaches_field(frame, override) else "")  # a dotted path it does not read
            raise InputError(f"{path}: no column {shown_id(override)} (from {flag}); columns are: {shown_columns(present)}"
                             + fields_on_path(frame, override) + inside)
        return override
    lowered: dict[str, str] = {}
    for c in present:
        # Case-insensitive, but an exact match wins (`id` over `ID` when a file has both).
        if c.lower() not in lowered or c == c.lower():
            lowered[c.lower()] = c
    for candidate in candidates:
        if candidate in lowered:
            return lowered[candidate]
    if required:
        fix = f"name the right one with {flag}" if flag else f"rename the right one to {candidates[0]}"
        raise InputError(
            f"{path}: no {what} column found (looked for {', '.join(candidates)}); columns are: "
            f"{shown_columns(present)}; {candidates_inside(frame, candidates, flag)[2:] or fix}"
        )
    return None
