"""Streamed reading: prompt files in bounded batches, keeping per prompt only what the caller asks for.

`read_prompts_streamed` gives the same prompts as `prompts.read_prompts` (rows, ids, metadata, bad rows, errors),
but reads each file a batch at a time: JSON lines and CSV in blocks of whole lines of about `BATCH_BYTES`
(gzip inflated on the fly), Parquet by record batches of `PARQUET_BATCH_ROWS` rows. Each batch goes through
the same parsers and the same prompt extraction as a whole file, and then through the caller's ``keep``
function (the predictor: it is row-wise), so only what ``keep`` returns stays in memory: the prompt text of
one batch at a time, never the file's bytes.

A whole-file read decides a few things over the whole file: which column holds the prompt and the id, each
column's type, whether text prompts are chat lists in JSON. A batch decides them over its own rows. So every
batch's decisions (its *plan*) are compared with the plan of the whole file's columns (their union, in order
of first appearance, as the whole-file readers build it): when they all agree, the batches' prompts are
exactly the whole file's; when one differs (a column that changes type between batches, a prompt column that
first appears late), the file is read again whole (`read_table`), so the result is always the whole-file one,
at the whole-file read's memory for that file only. JSON arrays (``.json``) are one document and are read whole.
"""

from __future__ import annotations

import hashlib
import io
import queue
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError
from asp_cli.output import as_given
from asp_cli.reading.exported import refuse_exports_of_epochs
from asp_cli.reading.json_records import escape_tag_lookalikes
from asp_cli.reading.nested import with_nested_key
from asp_cli.reading.options import DEFAULT_READ, ReadOptions
from asp_cli.reading.prompts import (_check_unique_ids, _choose_prompt_column, difficulty_column, extract_prompts,
                                     source_column)
from asp_cli import limits
from asp_cli.reading.csv_text import (check_no_header_repeats, check_unique_header, csv_bad_line, csv_separator,
                                      csv_text_schema, csv_without_extra_marks, csv_without_line_marks,
                                      utf8_lines_only)
from asp_cli.reading.tables import (
    FILE_LINE,
    FILE_ROW,
    LINE,
    bad_gzip,
    ReadReport,
    _check_encoding,
    _check_utf8,
    _first_line,
    _in_background,
    _mismatch,
    _sniff,
    looks_like_json_array,
    check_parquet_footer,
    each_file_once,
    file_format,
    find_column,
    input_file_errors,
    mislabelled,
    parse_jsonl_block,
    read_table,
    release_arrow_memory,
)

BATCH_BYTES = 8 << 20  # text per batch: about 20,000 verl-style prompts (docs/benchmarks.md: peak memory by batch size)
PARQUET_BATCH_ROWS = 65_536
_READ_BYTES = 16 << 20  # bytes read from disk per call
_CSV_INFER_ROWS = 10_000  # as `csv_text.read_csv`: the first rows decide the column types
_WHOLE_KEEP_ROWS = 1_000_000  # rows per ``keep`` call on a file read whole (as `prediction._PREDICT_CHUNK_ROWS`)
SOURCE_FILE_INDEX = "\x00file"  # hidden column of the kept frame: the index of the row's file in ``paths``

Keep = Callable[[pl.DataFrame], pl.DataFrame]


@dataclass
class _FileState:
    """One file's batches so far: what was kept, what each batch decided, the first error met."""

    parts: list[pl.DataFrame] = field(default_factory=list)
    plans: list[tuple] = field(default_factory=list)
    columns: dict[str, pl.DataType] = field(default_factory=dict)  # union in order; pl.Unknown where types differ
    rows: int = 0  # rows the parser gave (the row numbers they take), before bad prompts are skipped
    error: InputError | None = None  # the first error of the prompt extraction, raised if the plans agree


class _ReadWhole(Exception):
    """The batches of a file disagree with its whole: read it whole."""


def read_prompts_streamed(
    paths: Sequence[Path],
    options: ReadOptions = DEFAULT_READ,
    *,
    keep: Keep | None = None,
    batch_bytes: int = BATCH_BYTES,
    parquet_batch_rows: int = PARQUET_BATCH_ROWS,
) -> tuple[pl.DataFrame, ReadReport]:
    """Read prompt files a batch at a time; keep ``keep(batch)`` of each batch of prompts.

    Parameters
    ----------
    paths, options
        As for `prompts.read_prompts`.
    keep
        Called on each batch's prompt frame (`read_prompts`' columns); returns a frame of the same height and
        order whose columns are kept beside ``row``, ``prompt_id``, ``data_source`` and ``difficulty``. None
        keeps only those four.
    batch_bytes, parquet_batch_rows
        The size of a batch: bytes of text of JSON lines and CSV, rows of Parquet.

    Returns
    -------
    (frame, report)
        ``frame``: ``row``, ``prompt_id``, ``data_source``, ``difficulty`` and ``keep``'s columns, one row per
        prompt in input order, the same rows as `read_prompts` gives; ``report`` as `read_prompts`' report.

    Raises
    ------
    InputError
        As `read_prompts`, naming the file and line.
    """
    each_file_once(paths, "prompt file")  # with ids or without (row numbers: read twice in silence before)
    refuse_exports_of_epochs(paths)  # an export of several epochs without ids read: nothing repeats
    report = ReadReport()
    parts: list[pl.DataFrame] = []
    offset = 0
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("no input files given; name at least one prompt file")
    for index, path in enumerate(paths):
        fmt, gzipped = file_format(path)
        saved = report.tallies()
        state = _FileState()
        try:
            if fmt == "json":
                raise _ReadWhole
            for frame, locate in _batches(path, fmt, gzipped, options, report, batch_bytes, parquet_batch_rows):
                _take(state, frame, locate, path, fmt, options, report, offset + state.rows, keep)
                state.rows += frame.height
            _check_plans(state, path, options)
            if state.error is not None:
                raise state.error
            if state.rows == 0:
                raise InputError(_no_rows(path, fmt))
            file_parts = state.parts
            rows = state.rows
        except _ReadWhole:
            report.restore(saved)
            state = _FileState()
            frame = read_table(path, on_bad_row=options.on_bad_row, report=report, text_columns=options.text_keys)
            _take(state, frame, None, path, fmt, options, report, offset, keep, whole=True)
            if state.error is not None:
                raise state.error from None
            file_parts, rows = state.parts, frame.height
            del frame
        report.file_rows[str(path)] = rows
        parts.extend(part.with_columns(pl.lit(index, dtype=pl.UInt32).alias(SOURCE_FILE_INDEX))
                     for part in file_parts)
        offset += rows
        release_arrow_memory()
    frame = pl.concat(parts, how="vertical") if parts else pl.DataFrame()
    if frame.height == 0:
        raise InputError("no usable prompts left after skipping bad rows; fix the input files")
    _check_unique(frame, paths, options.id_key, [name for name, used in report.columns_used.items()
                                                 if used.get("id") == "(row number)"], options.id_flag)
    report.settle()
    report.rows = frame.height
    return frame.drop(FILE_ROW, FILE_LINE, SOURCE_FILE_INDEX), report


def _take(state: _FileState, frame: pl.DataFrame, locate: Callable[[int], str] | None, path: Path, fmt: str,
          options: ReadOptions, report: ReadReport, offset: int, keep: Keep | None, *, whole: bool = False) -> None:
    """Extract one batch's prompts under its own plan and keep what ``keep`` returns; remember its plan."""
    for name, dtype in frame.schema.items():
        seen = state.columns.get(name)
        state.columns[name] = dtype if seen is None or seen == dtype or seen == pl.Null else (
            seen if dtype == pl.Null else pl.Unknown)
    if frame.height == 0 or state.error is not None:
        return
    try:
        state.plans.append(_plan(frame, options, path))
        prompts = extract_prompts(frame, path, fmt, options.prompt_key, options.id_key, options.on_bad_row, report,
                                  offset, file_row_offset=state.rows, locate_row=locate, source_key=options.source_key,
                                  difficulty_key=options.difficulty_key)
    except InputError as exc:
        if whole:
            raise
        state.error = exc  # raised only if the whole file decides as this batch did (`_check_plans`)
        return
    kept = prompts.select(C.ROW, C.PROMPT_ID, C.DATA_SOURCE, C.DIFFICULTY, FILE_ROW, FILE_LINE)
    if keep is not None:
        # A file read whole goes to ``keep`` in slices, so the predictor's working memory stays bounded.
        step = _WHOLE_KEEP_ROWS if whole else max(prompts.height, 1)
        starts = range(0, prompts.height, step) or range(1)
        extra = pl.concat([keep(prompts.slice(start, step)) for start in starts], how="vertical")
        if extra.height != prompts.height:
            raise ValueError("keep() must return one row per prompt")
        kept = pl.concat([kept, extra], how="horizontal")
    state.parts.append(kept)


def _plan(frame: pl.DataFrame, options: ReadOptions, path: Path, chat: bool | None = None) -> tuple:
    """What `extract_prompts` decides from this frame: columns, their types, whether text prompts are chat JSON.

    ``chat`` gives that last decision instead of computing it from the rows (for the whole file's columns).
    """
    frame = with_nested_key(frame, options.id_key, path)
    prompt_col = _choose_prompt_column(frame, options.prompt_key, path)
    id_col = find_column(frame, C.ID_KEYS, options.id_key, what="id", flag="--id-key", path=path, required=False)
    frame, source_col = source_column(frame, path, options.source_key)
    frame, difficulty_col = difficulty_column(frame, path, options.difficulty_key)
    schema = frame.schema
    if schema[prompt_col] != pl.String or prompt_col.lower() == "messages":
        chat = None
    elif chat is None:  # `_prompt_text`: text prompts are parsed as chat lists when every row looks like one
        chat = bool(frame.select(pl.col(prompt_col).str.strip_chars_start().str.starts_with("[{")
                                 .fill_null(False).all()).item())
    # Metadata columns read as null where absent or all null, so those batches agree with any type.
    meta = tuple((name, None if name is None or schema[name] == pl.Null else str(schema[name]))
                 for name in (source_col, difficulty_col))
    return (prompt_col, str(schema[prompt_col]), chat, id_col, str(schema[id_col]) if id_col else None, meta)


def _check_plans(state: _FileState, path: Path, options: ReadOptions) -> None:
    """Raise `_ReadWhole` unless every batch decided what the whole file's columns decide."""
    if not state.plans:
        if state.error is not None or state.rows:
            raise _ReadWhole
        return
    watched = {k.lower() for k in (*C.PROMPT_KEYS, *C.ID_KEYS, *C.SOURCE_KEYS, *C.DIFFICULTY_KEYS)}
    watched |= {k.lower() for k in (options.prompt_key, options.id_key) if k}
    if any(dtype == pl.Unknown and name.lower() in watched for name, dtype in state.columns.items()):
        raise _ReadWhole  # a column asp may use changes type between batches: the whole file decides its type
    whole_columns = pl.DataFrame(schema={name: (pl.Null if dtype == pl.Unknown else dtype)
                                         for name, dtype in state.columns.items()})
    chat_all = all(plan[2] is not False for plan in state.plans)
    try:
        whole = _plan(whole_columns, options, path, chat=chat_all)
    except InputError:
        raise _ReadWhole from None
    if not all(_agrees(plan, whole) for plan in state.plans):
        raise _ReadWhole


def _agrees(batch: tuple, whole: tuple) -> bool:
    if batch[:5] != whole[:5]:
        return False
    for (name, dtype), (whole_name, whole_type) in zip(batch[5], whole[5], strict=True):
        if name is None or dtype is None:  # absent or all null here: null, as the whole file reads these rows
            if name is not None and name != whole_name:
                return False
            continue
        if name != whole_name or (whole_type is not None and dtype != whole_type):
            return False
    return True


def _no_rows(path: Path, fmt: str) -> str:
    if fmt == "csv":
        return f"{path}: the file has a header but no rows; give at least one row"
    if fmt == "jsonl":
        return f"{path}: no readable rows; give a file with at least one JSON object per line"
    return f"{path}: the file has no rows; give a file with at least one row"


def _check_unique(frame: pl.DataFrame, paths: Sequence[Path], named: str | None = None,
                  row_numbered: Sequence[str] = (), flag: str = "--id-key") -> None:
    duplicated = frame.filter(pl.col(C.PROMPT_ID).is_duplicated())
    if duplicated.height:
        names = pl.Series([str(p) for p in paths], dtype=pl.String)
        _check_unique_ids(duplicated.with_columns(names.gather(duplicated[SOURCE_FILE_INDEX]).alias("source_file")),
                          named, row_numbered, flag)


# --------------------------------------------------------------------------------------------------------
# Batches of one file


def _batches(path: Path, fmt: str, gzipped: bool, options: ReadOptions, report: ReadReport, batch_bytes: int,
             parquet_batch_rows: int) -> Iterator[tuple[pl.DataFrame, Callable[[int], str] | None]]:
    """(frame of the user's columns, where its rows are) per batch, as `read_table` would read those rows."""
    if fmt == "parquet":
        yield from _parquet_batches(path, gzipped, report, parquet_batch_rows)
        return
    source = _ByteSource(path, gzipped, report)
    if fmt == "jsonl":
        yield from _jsonl_batches(path, source, options, report, batch_bytes)
    else:
        yield from _csv_batches(path, source, batch_bytes, options.text_keys,
                                report if options.on_bad_row == "skip" else None)


class _ByteSource:
    """A file's bytes in pieces, inflated when gzipped, hashed on the way (the fingerprint of its bytes on disk)."""

    def __init__(self, path: Path, gzipped: bool, report: ReadReport) -> None:
        self.path, self.gzipped, self.report = path, gzipped, report
        self.consumed = 0  # compressed bytes fed to the inflater so far
        self.produced = 0  # bytes it gave back

    def pieces(self) -> Iterator[bytes]:
        path = self.path
        digest = hashlib.sha256()
        with input_file_errors(path):
            handle = open(path, "rb")  # noqa: SIM115 - closed below, after the last piece
        # hashlib releases the GIL on large buffers: hash on the second core while the parser runs, on one
        # daemon thread (pieces in order; an interrupted command never waits for it at exit).
        pieces: queue.SimpleQueue = queue.SimpleQueue()

        def hash_pieces() -> None:
            while (piece := pieces.get()) is not None:
                digest.update(piece)

        hasher = threading.Thread(target=hash_pieces, name="asp-hash", daemon=True)
        hasher.start()

        def read() -> Iterator[bytes]:
            for raw in iter(lambda: handle.read(_READ_BYTES), b""):
                pieces.put(raw)
                yield raw

        try:
            with handle:
                yield from (self._gunzip(read()) if self.gzipped else read())
        finally:
            pieces.put(None)
        hasher.join()
        self.report.fingerprints[str(path)] = "sha256:" + digest.hexdigest()

    def _gunzip(self, raws: Iterator[bytes]) -> Iterator[bytes]:
        """Inflate every member of a gzip stream, refusing a bomb as `limits.gunzip` does: the output may not
        pass `limits.GZIP_FREE_BYTES` plus `limits.MAX_GZIP_RATIO` times the compressed bytes consumed so far,
        checked every MiB it grows."""
        step = 1 << 16
        inflater = None  # none while between members
        consumed = produced = 0
        later = b""  # the first bytes of a member after the first: not gzip, they are trailing data
        try:
            for raw in raws:
                data = raw
                while data:
                    if inflater is None or inflater.eof:
                        data = data.lstrip(b"\x00")  # members may be followed by NUL padding, as gzip allows
                        if not data:
                            break
                        later = data[:2] if inflater is not None else b""
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    piece, data = data[:step], data[step:]
                    consumed += len(piece)
                    out = inflater.decompress(piece, 1 << 20)
                    while True:
                        produced += len(out)
                        if produced > limits.GZIP_FREE_BYTES + limits.MAX_GZIP_RATIO * (
                                consumed - len(inflater.unconsumed_tail)):
                            raise InputError(
                                f"{self.path}: the gzip data inflates to more than {limits.MAX_GZIP_RATIO} times its "
                                "size (a decompression bomb, or data asp cannot tell from one); decompress it "
                                "yourself and give the plain file")
                        if out:
                            yield out
                        if not inflater.unconsumed_tail:
                            break
                        out = inflater.decompress(inflater.unconsumed_tail, 1 << 20)
                    if inflater.eof and inflater.unused_data:  # the next member starts in this piece
                        consumed -= len(inflater.unused_data)
                        data = inflater.unused_data + data
            if inflater is not None and not inflater.eof:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
        except (zlib.error, EOFError) as exc:
            trailing = isinstance(exc, zlib.error) and later and not limits.GZIP_MAGIC.startswith(later)
            raise bad_gzip(self.path, limits.TrailingGzipData() if trailing else exc) from None


def _line_blocks(pieces: Iterator[bytes], batch_bytes: int) -> Iterator[bytes]:
    """Blocks of whole lines of about ``batch_bytes`` (the last one may lack its final newline)."""
    held: list[bytes] = []
    size = 0
    for piece in pieces:
        held.append(piece)
        size += len(piece)
        if size >= batch_bytes:
            data = b"".join(held) if len(held) > 1 else held[0]
            cut = data.rfind(b"\n")
            if cut < 0:
                held, size = [data], len(data)
                continue
            rest = data[cut + 1:]
            held, size = ([rest], len(rest)) if rest else ([], 0)
            yield data if cut + 1 == len(data) else data[: cut + 1]
    if held:
        yield b"".join(held)


def _first_block(path: Path, blocks: Iterator[bytes], declared: str) -> Iterator[bytes]:
    """The blocks, after the whole-file checks of the file's start: empty, Parquet or gzip under a text name."""
    seen_text = False
    first = True
    for block in blocks:
        if first:
            first = False
            if mislabelled(declared, block):
                raise _mismatch(path, declared, block)
            _check_encoding(path, block)
        if not seen_text and not block.isspace():
            seen_text = True
        yield block
    if not seen_text:
        raise InputError(f"{path}: the file is empty; give a file with at least one row")


def _jsonl_batches(path: Path, source: _ByteSource, options: ReadOptions, report: ReadReport,
                   batch_bytes: int) -> Iterator[tuple[pl.DataFrame, Callable[[int], str]]]:
    line = 1
    first = True
    for block in _first_block(path, _line_blocks(source.pieces(), batch_bytes), "JSON lines"):
        if first and _sniff(block) == "json" and looks_like_json_array(block):
            raise InputError(f"{path}: holds a JSON array, not JSON lines; rename it to .json")
        first = False
        frame = parse_jsonl_block(path, block, on_bad_row=options.on_bad_row, report=report, first_line=line,
                                  allow_empty=True)
        yield frame, _jsonl_locator(path, frame, block, line)
        line += block.count(b"\n")


def _jsonl_locator(path: Path, frame: pl.DataFrame, block: bytes, first_line: int) -> Callable[[int], str]:
    """Where the ``index``-th row of a block is: the parser's line, or the ``index``-th non-blank line."""
    if LINE in frame.columns:
        lines = frame[LINE]
        return lambda index: f"{path}:{lines[index]}"
    found: list[int] = []

    def locate(index: int) -> str:
        if not found:  # the error path only: PyArrow skips blank lines, so row i is the i-th non-blank line
            found.extend(n for n, raw in enumerate(block.split(b"\n"), start=first_line) if raw.strip())
        return f"{path}:{found[index]}"

    return locate


def _csv_batches(path: Path, source: _ByteSource, batch_bytes: int, text_columns: Sequence[str],
                 skip: ReadReport | None = None) -> Iterator[tuple[pl.DataFrame, None]]:
    import numpy as np

    header = b""
    separator = ","
    schema = None
    text_schema: dict = {}
    line = 1
    pending = b""
    for block in _first_block(path, _line_blocks(source.pieces(), batch_bytes), "CSV"):
        if schema is None and not header:
            cut = block.find(b"\n")
            header = block[: cut + 1] if cut >= 0 else block + b"\n"
            block = block[len(header):] if cut >= 0 else b""
            header = csv_without_extra_marks(header)
            _check_utf8(path, header, line)
            separator = csv_separator(path, header)
            check_unique_header(path, header, separator)
            text_schema = csv_text_schema(header, separator, text_columns)
            line += 1
        data = pending + block
        # Cut at the last newline outside quotes (RFC 4180 quotes may hold newlines): an even count of quotes
        # before it.
        array = np.frombuffer(data, dtype=np.uint8)
        newlines = np.flatnonzero(array == 10)
        quotes = np.flatnonzero(array == 34)
        even = newlines[np.searchsorted(quotes, newlines) % 2 == 0] if newlines.size else newlines
        cut = int(even[-1]) + 1 if even.size else 0
        records, pending = data[:cut], data[cut:]
        if schema is None and records.count(b"\n") <= _CSV_INFER_ROWS and pending + records:
            pending = records + pending  # the first batch holds the rows that decide the types
            continue
        if records:
            frame, schema = _parse_csv(path, header, records, separator, schema or text_schema, line, skip)
            line += records.count(b"\n")
            yield frame, None
    if pending:  # the last records (the first batch too, when the file holds fewer than 10,000 rows)
        frame, schema = _parse_csv(path, header, pending, separator, schema or text_schema, line, skip)
        yield frame, None


def _parse_csv(path: Path, header: bytes, records: bytes, separator: str, schema, line: int,
               skip: ReadReport | None = None):
    """One batch of records; ``schema`` is the first batch's (all columns), or the text columns before it. With
    ``skip`` (`--on-bad-row skip`: the report), lines that are not UTF-8 are skipped and counted there."""
    if skip is not None:
        records = utf8_lines_only(path, records, line, skip, header)
    _check_utf8(path, records, line)
    records = csv_without_line_marks(records)
    check_no_header_repeats(path, header, records, line)
    try:
        if not isinstance(schema, pl.Schema):
            try:
                frame = pl.read_csv(io.BytesIO(header + records), separator=separator,
                                    infer_schema_length=_CSV_INFER_ROWS, schema_overrides=schema)
            except pl.exceptions.ComputeError:  # a kind that changes after the rows guessed from (as below)
                frame = pl.read_csv(io.BytesIO(header + records), separator=separator, infer_schema_length=None,
                                    schema_overrides=schema)
        else:
            try:
                frame = pl.read_csv(io.BytesIO(header + records), separator=separator, schema=schema)
            except pl.exceptions.ComputeError:
                # A column whose kind changed after the first batch (numbers, then text): this batch's own types,
                # the text columns kept; the batches then disagree, and the file is read whole (`_check_plans`).
                frame = pl.read_csv(io.BytesIO(header + records), separator=separator, infer_schema_length=None,
                                    schema_overrides={n: t for n, t in schema.items() if t == pl.String})
    except pl.exceptions.PolarsError as exc:
        found = csv_bad_line(header + records, separator)  # its line counted from this batch's header, 1
        if found is not None:
            raise InputError(f"{path}:{line + found[0] - 2}: {found[1]}; check quoting and the separator") from None
        raise InputError(f"{path}: unreadable CSV ({_first_line(exc)}); check quoting and the separator") from None
    return (escape_tag_lookalikes(frame) if b"\x00" in records else frame), frame.schema


def _parquet_batches(path: Path, gzipped: bool, report: ReadReport,
                     rows: int) -> Iterator[tuple[pl.DataFrame, None]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from asp_cli.fingerprint import file_fingerprint

    with input_file_errors(path), open(path, "rb") as handle:
        magic = handle.read(4)
    if gzipped:
        # Parquet needs to seek to its footer: a gzipped file is inflated into memory (its columns stay compressed).
        source = _ByteSource(path, True, report)
        data = b"".join(source.pieces())
        if not data or data.isspace():
            raise InputError(f"{path}: the file is empty; give a file with at least one row")
        where: io.BytesIO | Path = io.BytesIO(data)
        magic = data[:4]
    else:
        report.pending[str(path)] = _in_background(file_fingerprint, path)  # beside the parser, on the other core
        where = as_given(path)
        if not magic:
            raise InputError(f"{path}: the file is empty; give a file with at least one row")
    if magic != b"PAR1":
        if gzipped:
            head = data[:4096]
        else:
            with open(path, "rb") as handle:
                head = handle.read(4096)
        raise _mismatch(path, "Parquet", head)
    check_parquet_footer(where, str(path))  # nesting the readers could not survive is refused from the footer
    try:
        parquet = pq.ParquetFile(where)
        batches = parquet.iter_batches(batch_size=rows)
        for batch in batches:
            frame = pl.from_arrow(pa.Table.from_batches([batch]))
            assert isinstance(frame, pl.DataFrame)
            categorical = [n for n, t in frame.schema.items() if isinstance(t, (pl.Categorical, pl.Enum))]
            if categorical:
                frame = frame.with_columns(pl.col(categorical).cast(pl.String))
            yield escape_tag_lookalikes(frame), None
    except (pa.ArrowException, OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{path}: unreadable Parquet file ({_first_line(exc)}); rewrite it") from None
