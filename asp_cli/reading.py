"""Reading prompt files and length files (history, rollout logs) into Polars frames.

Formats are JSONL (``.jsonl``/``.ndjson``), JSON arrays (``.json``), Parquet and CSV/TSV, optionally gzipped
(``.gz``). The fast path hands the file to PyArrow's or Polars' native readers; when that fails, a slow
line-by-line pass finds the exact line and column to name in the error, or skips bad rows when asked
(``on_bad_row="skip"``). Nothing here prints: skipped rows are counted in the returned report.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError

OnBadRow = Literal["error", "skip"]

_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIXES = {".json"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_CSV_SUFFIXES = {".csv", ".tsv"}
_LINE = "\x00line"  # hidden column: the 1-based source line of a row read by the slow path
_BAD_ROW_FIX = "fix the row, or pass --on-bad-row skip to skip bad rows"
_FILE_ROW = "\x00file_row"  # hidden column: a prompt's 0-based row within its own file, for messages


def check_on_bad_row(value: str) -> None:
    """Refuse an unknown ``--on-bad-row`` mode (every command that reads user files takes one)."""
    from asp_cli.errors import SettingsError

    if value not in ("error", "skip"):
        raise SettingsError(f"--on-bad-row must be 'error' or 'skip' (got {value!r})")


@dataclass
class ReadReport:
    """What a read found: the columns it used per file and the rows it skipped."""

    rows: int = 0
    fingerprints: dict[str, str] = field(default_factory=dict)  # per file: "sha256:" of its bytes on disk
    pending: dict[str, Future] = field(default_factory=dict, repr=False)
    skipped_rows: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    columns_used: dict[str, dict[str, str]] = field(default_factory=dict)

    def settle(self) -> None:
        """Wait for the fingerprints still being computed."""
        for name, future in self.pending.items():
            self.fingerprints[name] = future.result()
        self.pending.clear()

    def skip(self, where: str) -> None:
        self.skipped_rows += 1
        if len(self.skipped_examples) < 5:
            self.skipped_examples.append(where)


_HASHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="asp-hash")


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------------------
# Format detection and raw tables


def file_format(path: Path) -> tuple[str, bool]:
    """Return (format, gzipped) from the file name: format is jsonl, json, parquet or csv."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    gzipped = bool(suffixes) and suffixes[-1] == ".gz"
    if gzipped:
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext in _JSONL_SUFFIXES:
        return "jsonl", gzipped
    if ext in _JSON_SUFFIXES:
        return "json", gzipped
    if ext in _PARQUET_SUFFIXES:
        return "parquet", gzipped
    if ext in _CSV_SUFFIXES:
        return "csv", gzipped
    raise InputError(
        f"{path}: unknown file type {ext or '(no extension)'!r}; "
        "name it .jsonl, .json, .parquet or .csv (optionally .gz)"
    )


def _read_bytes(path: Path, gzipped: bool, report: ReadReport | None = None) -> bytes:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; name a file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    if report is not None:
        # hashlib releases the GIL on large buffers: hash on the second core while the parser runs.
        report.pending[str(path)] = _HASHER.submit(_sha256, data)
    if gzipped:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"{path}: not a valid gzip file ({exc}); drop the .gz suffix if it is plain") from None
    return data


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
    return "csv"


def _check_not_empty(path: Path, data: bytes) -> None:
    if not data or data.isspace():  # isspace stops at the first other byte; strip() would copy the file
        raise InputError(f"{path}: the file is empty; give a file with at least one row")


def _mismatch(path: Path, declared: str, data: bytes) -> InputError:
    actual = _sniff(data)
    described = {"parquet": "a Parquet file", "json": "a JSON array", "jsonl": "JSON lines", "gzip": "gzip data",
                 "csv": "text (CSV?)"}[actual]
    return InputError(
        f"{path}: the name says {declared} but the file looks like {described}; rename it to match its content"
    )


def _is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8, checked by Arrow's vectorised validator without building a str
    (about ten times faster than ``bytes.decode`` and no copy)."""
    import pyarrow as pa

    offsets = pa.array([0, len(data)], type=pa.int64()).buffers()[1]
    blob = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        blob.cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _check_utf8(path: Path, data: bytes) -> None:
    if _is_utf8(data):
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}:{line}: not valid UTF-8 (byte {exc.start}); re-encode the file as UTF-8, "
            "for example with `iconv -f LATIN1 -t UTF-8`"
        ) from None


def read_table(path: Path, *, on_bad_row: OnBadRow = "error", report: ReadReport | None = None) -> pl.DataFrame:
    """Read a whole file into a frame of the user's own columns, choosing the reader by the file name.

    Malformed JSON lines raise, or are skipped and counted in ``report`` when ``on_bad_row="skip"``.

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
    if _sniff(data) == "parquet" or _sniff(data) == "gzip":
        raise _mismatch(path, fmt.upper() if fmt != "jsonl" else "JSON lines", data)
    if fmt == "jsonl":
        return _read_jsonl(path, data, on_bad_row, report)
    if fmt == "json":
        return _read_json_array(path, data)
    return _read_csv(path, data)


def _read_parquet(path: Path, data: bytes) -> pl.DataFrame:
    if data[:4] != b"PAR1":
        raise _mismatch(path, "Parquet", data)
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - any reader failure is the file's fault here
        raise InputError(f"{path}: unreadable Parquet file ({_first_line(exc)}); rewrite it") from None
    if frame.height == 0:
        raise InputError(f"{path}: the file has no rows; give a file with at least one row")
    # Dictionary-encoded text (pandas `category`, Arrow dictionaries) reads as Categorical: use it as text.
    categorical = [name for name, dtype in frame.schema.items() if isinstance(dtype, (pl.Categorical, pl.Enum))]
    if categorical:
        frame = frame.with_columns(pl.col(categorical).cast(pl.String))
    return frame


def _read_jsonl(path: Path, data: bytes, on_bad_row: OnBadRow, report: ReadReport | None) -> pl.DataFrame:
    import pyarrow as pa
    import pyarrow.json as pa_json

    if _sniff(data) == "json":
        raise InputError(f"{path}: holds a JSON array, not JSON lines; rename it to .json")
    valid_utf8 = _is_utf8(data)
    if not valid_utf8 and on_bad_row == "error":
        _check_utf8(path, data)
    try:
        if not valid_utf8:
            raise pa.ArrowInvalid("invalid UTF-8: parse line by line")
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(block_size=1 << 26))
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pl.exceptions.PolarsError):
        frame = _read_jsonl_slow(path, data, on_bad_row=on_bad_row, report=report)
    if frame.height == 0:
        raise InputError(f"{path}: the file has no rows; give a file with at least one row")
    return frame


def _read_jsonl_slow(path: Path, data: bytes, *, on_bad_row: OnBadRow, report: ReadReport | None) -> pl.DataFrame:
    """Parse JSON lines one by one: exact line numbers, bad rows skipped on request, mixed types kept as text."""
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        problem = None
        try:
            value = json.loads(raw)
            if not isinstance(value, dict):
                problem = f"expected a JSON object, found {type(value).__name__}"
        except UnicodeDecodeError:
            problem = "not valid UTF-8; re-encode the file as UTF-8"
        except json.JSONDecodeError as exc:
            problem = f"malformed JSON at column {exc.colno} ({exc.msg})"
        if problem is not None:
            if on_bad_row == "skip" and report is not None:
                report.skip(f"{path}:{number}")
                continue
            raise InputError(f"{path}:{number}: {problem}; {_BAD_ROW_FIX}")
        value["\x00line"] = number
        records.append(value)
    if not records:
        raise InputError(f"{path}: no readable rows; give a file with at least one JSON object per line")
    return _records_to_frame(records)


def _first_line_is_object(data: bytes) -> bool:
    for raw in data.split(b"\n"):
        if raw.strip():
            try:
                return isinstance(json.loads(raw), dict)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return False
    return False


def _parts_text(parts: list[Any]) -> str:
    """The text of OpenAI-style multi-part content, ``[{"type": "text", "text": ...}, {"type": "image_url", ...}]``:
    its text parts joined by newlines (other parts carry no prompt text)."""
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _flatten_content_parts(value: Any) -> Any:
    """A chat list whose message contents are multi-part lists, with each such content replaced by its text."""
    if not isinstance(value, list) or not any(isinstance(m, dict) and isinstance(m.get(_CHAT_CONTENT), list)
                                              for m in value):
        return value
    return [{**m, _CHAT_CONTENT: _parts_text(m[_CHAT_CONTENT])}
            if isinstance(m, dict) and isinstance(m.get(_CHAT_CONTENT), list) else m for m in value]


def _records_to_frame(records: list[dict[str, Any]]) -> pl.DataFrame:
    """Build a frame from parsed JSON objects; a column whose values mix JSON types is kept as JSON text."""
    keys: dict[str, None] = {}
    for record in records:
        for key in record:
            keys.setdefault(key, None)
    data: dict[str, list[Any]] = {}
    for key in keys:
        values = [_flatten_content_parts(record.get(key)) for record in records]
        kinds = {_json_kind(v) for v in values if v is not None}
        if len(kinds) > 1 and kinds != {"int", "float"}:
            values = [v if v is None or isinstance(v, str) else _Mixed(v) for v in values]
        data[key] = values
    series = []
    for key, values in data.items():
        if any(isinstance(v, _Mixed) for v in values):
            # Keep the kind of each value visible to validators: text stays text, the rest becomes JSON.
            series.append(pl.Series(key, [None if v is None else (v if isinstance(v, str) else "\x00json:" + json.dumps(v.value)) for v in values], dtype=pl.String))
        else:
            try:
                column = pl.Series(key, values, strict=False)
                if column.len() != len(values):  # odd nesting Polars flattens: keep it as JSON text
                    raise ValueError(key)
            except Exception:  # noqa: BLE001 - unrepresentable nesting: keep it as JSON text
                column = pl.Series(key, [None if v is None else json.dumps(v) for v in values], dtype=pl.String)
            series.append(column)
    return pl.DataFrame(series)


class _Mixed:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


def _read_json_array(path: Path, data: bytes) -> pl.DataFrame:
    _check_utf8(path, data)
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        if _sniff(data) == "jsonl" and _first_line_is_object(data):
            raise InputError(f"{path}: holds JSON objects one per line, not a JSON array; rename it to .jsonl") from None
        raise InputError(f"{path}:{exc.lineno}: malformed JSON at column {exc.colno} ({exc.msg}); fix the file") from None
    if isinstance(value, dict):
        raise InputError(f"{path}: holds one JSON object, not an array of objects; wrap it in [...] or rename it to .jsonl")
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a JSON array of objects; found {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InputError(f"{path}: element {index} of the array is {type(item).__name__}, not an object; fix it")
        item["\x00line"] = index + 1
    if not value:
        raise InputError(f"{path}: the array is empty; give at least one object")
    return _records_to_frame(value)


def _read_csv(path: Path, data: bytes) -> pl.DataFrame:
    _check_utf8(path, data)
    separator = "\t" if Path(path).suffixes and ".tsv" in [s.lower() for s in Path(path).suffixes] else ","
    header = data[: data.find(b"\n") if b"\n" in data else len(data)]
    if separator == "," and b"," not in header:
        # Spreadsheet exports in many locales separate with ';', and some tools with tabs: take the header's.
        for other in (b";", b"\t"):
            if other in header:
                separator = other.decode()
                break
    try:
        frame = pl.read_csv(io.BytesIO(data), separator=separator, infer_schema_length=10000)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: unreadable CSV ({_first_line(exc)}); check quoting and the separator") from None
    if frame.height == 0:
        raise InputError(f"{path}: the file has a header but no rows; give at least one row")
    return frame


def _release_arrow_memory() -> None:
    """Hand the memory PyArrow's allocator keeps after a read back to the system.

    The JSON reader's buffers are freed once the user's columns are extracted, but PyArrow's pool keeps
    them for reuse, and Polars (a different allocator) cannot use them: on a 10M-prompt file that is about
    8 GB held for nothing.
    """
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


# --------------------------------------------------------------------------------------------------------
# Column detection


def find_column(
    frame: pl.DataFrame,
    candidates: Sequence[str],
    override: str | None,
    *,
    what: str,
    flag: str,
    path: Path,
    required: bool = True,
) -> str | None:
    """Return the column to use: the override if given, else the first candidate present."""
    present = [c for c in frame.columns if not c.startswith("\x00")]
    if override is not None:
        if override not in frame.columns:
            raise InputError(
                f"{path}: no column {override!r} (from {flag}); columns are: {', '.join(present)}"
            )
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
        raise InputError(
            f"{path}: no {what} column found (looked for {', '.join(candidates)}); columns are: "
            f"{', '.join(present)}; name the right one with {flag}"
        )
    return None


def _row_location(path: Path, frame: pl.DataFrame, index: int, fmt: str) -> str:
    """Say where row ``index`` of ``frame`` is in its file: a line for text files, a row for Parquet."""
    if "\x00line" in frame.columns:
        return f"{path}:{frame[_LINE][index]}"
    if fmt == "jsonl":
        return f"{path}:{_jsonl_line_of_row(path, index)}"
    if fmt == "csv":
        return f"{path}: row {index + 1} (after the header)"
    return f"{path}: row {index}"


def _jsonl_line_of_row(path: Path, index: int) -> int:
    """The 1-based line of the ``index``-th non-blank line (error path only: it rereads the file)."""
    data = _read_bytes(path, file_format(path)[1])
    seen = -1
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            seen += 1
            if seen == index:
                return number
    return index + 1


# --------------------------------------------------------------------------------------------------------
# Prompts


_CHAT_CONTENT = "content"


def _prompt_text(frame: pl.DataFrame, column: str, path: Path) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(prompt text, number of messages, bad-row mask) of a prompt column, one value per row."""
    dtype = frame.schema[column]
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        fields = {f.name: f.dtype for f in dtype.inner.fields}
        if _CHAT_CONTENT not in fields:
            raise InputError(
                f"{path}: column {column!r} is a list of objects without a 'content' field; "
                "give chat messages as [{\"role\": ..., \"content\": ...}]"
            )
        content_type = fields[_CHAT_CONTENT]
        content = pl.element().struct.field(_CHAT_CONTENT)
        if (isinstance(content_type, pl.List) and isinstance(content_type.inner, pl.Struct)
                and "text" in {f.name for f in content_type.inner.fields}):
            # Multi-part content (OpenAI style): a message's text is its text parts, joined.
            content = content.list.eval(pl.element().struct.field("text").cast(pl.String)).list.drop_nulls()
            content = content.list.join("\n")
        elif content_type not in (pl.String, pl.Null):
            raise InputError(
                f"{path}: the 'content' of the messages in column {column!r} is {fields[_CHAT_CONTENT]}, not text; "
                "give each message's content as a string"
            )
        col = pl.col(column)
        out = frame.select(
            col.list.eval(content.cast(pl.String)).list.join("\n").alias("t"),
            col.list.len().cast(pl.Int32).alias("m"),
            (col.is_null() | col.list.eval(pl.element().struct.field(_CHAT_CONTENT).is_null()).list.any()).alias("b"),
        )
        return out["t"], out["m"], out["b"].fill_null(True)
    if dtype == pl.String:
        col = pl.col(column)
        chat_like = col.str.strip_prefix("\x00json:").str.strip_chars_start().str.starts_with("[")
        if column.lower() == "messages" or frame.select(
            col.str.strip_chars_start().str.starts_with("[{").fill_null(False).all()
        ).item():
            return _chat_json_text(frame[column], chat_like_all=frame.select(chat_like.fill_null(False)).to_series())
        out = frame.select(col.alias("t"), (col.is_null() | col.str.starts_with("\x00json:")).alias("b"))
        return out["t"], pl.Series("m", [1] * frame.height, dtype=pl.Int32), out["b"]
    raise InputError(
        f"{path}: column {column!r} holds {dtype}, not text or a chat-message list; "
        "name the prompt column with --prompt-key"
    )


_CHAT_DTYPE = pl.List(pl.Struct({"role": pl.String, _CHAT_CONTENT: pl.String}))


def _chat_json_text(values: pl.Series, chat_like_all: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """Chat lists stored as JSON text (e.g. the RollPacker files): parse them; plain text stays text."""
    stripped = values.str.strip_prefix("\x00json:")
    try:
        decoded = stripped.str.json_decode(_CHAT_DTYPE)
        out = pl.DataFrame({"v": values, "d": decoded, "c": chat_like_all}).select(
            pl.when(pl.col("c"))
            .then(pl.col("d").list.eval(pl.element().struct.field(_CHAT_CONTENT)).list.join("\n"))
            .otherwise(pl.col("v"))
            .alias("t"),
            pl.when(pl.col("c")).then(pl.col("d").list.len().cast(pl.Int32)).otherwise(1).alias("m"),
            (
                pl.col("v").is_null()
                | (pl.col("v").str.starts_with("\x00json:") & ~pl.col("c"))
                | (pl.col("c") & pl.col("d").list.eval(pl.element().struct.field(_CHAT_CONTENT).is_null()).list.any())
            ).alias("b"),
        )
        return out["t"], out["m"], out["b"].fill_null(True)
    except pl.exceptions.PolarsError:
        pass
    # Some row is not a well-formed chat list: parse row by row to find which.
    texts: list[str | None] = []
    counts: list[int] = []
    bad: list[bool] = []
    for raw in values.to_list():
        text, count = _parse_chat_json(raw)
        texts.append(text)
        counts.append(count)
        bad.append(text is None)
    return (pl.Series("t", texts, dtype=pl.String), pl.Series("m", counts, dtype=pl.Int32),
            pl.Series("b", bad, dtype=pl.Boolean))


def _parse_chat_json(raw: str | None) -> tuple[str | None, int]:
    if raw is None:
        return None, 0
    mixed = raw.startswith("\x00json:")
    body = raw[len("\x00json:"):] if mixed else raw
    if not body.lstrip().startswith("["):
        return (None, 0) if mixed else (raw, 1)
    try:
        messages = json.loads(body)
    except json.JSONDecodeError:
        return (None, 0) if mixed else (raw, 1)
    messages = _flatten_content_parts(messages)
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get(_CHAT_CONTENT), str) for m in messages
    ):
        return None, 0
    return "\n".join(m[_CHAT_CONTENT] for m in messages), len(messages)


def _choose_prompt_column(frame: pl.DataFrame, override: str | None, path: Path) -> str:
    if override is not None:
        return find_column(frame, (), override, what="prompt", flag="--prompt-key", path=path)  # type: ignore[return-value]
    # A chat list under `prompt` (verl) wins; then `messages`; then the text columns in order.
    for name in frame.columns:
        if name.lower() == "prompt" and isinstance(frame.schema[name], pl.List):
            return name
    lowered = {c.lower(): c for c in frame.columns}
    if "messages" in lowered:
        return lowered["messages"]
    return find_column(frame, C.PROMPT_KEYS, None, what="prompt", flag="--prompt-key", path=path)  # type: ignore[return-value]


def read_prompts(
    paths: Sequence[Path],
    *,
    prompt_key: str | None = None,
    id_key: str | None = None,
    on_bad_row: OnBadRow = "error",
) -> tuple[pl.DataFrame, ReadReport]:
    """Read one or more prompt files into one frame, inputs concatenated in the order given.

    Returns
    -------
    (frame, report)
        ``frame`` has columns ``row`` (int64, 0-based over all inputs), ``prompt_id`` (str), ``prompt_text``
        (str; a chat list joined by newlines), ``n_messages`` (int32), ``data_source`` (str or null),
        ``difficulty`` (float64 or null), ``source_file`` (str).

    Raises
    ------
    InputError
        Missing, empty or malformed files, a missing prompt column, a prompt that is not text or a chat
        list, duplicate ids.
    """
    report = ReadReport()
    parts: list[pl.DataFrame] = []
    offset = 0
    for path in paths:
        path = Path(path)
        fmt, _ = file_format(path)
        frame = read_table(path, on_bad_row=on_bad_row, report=report)
        part = _extract_prompts(frame, path, fmt, prompt_key, id_key, on_bad_row, report, offset)
        offset += frame.height
        parts.append(part)
        del frame
        _release_arrow_memory()
    if not parts:
        raise InputError("no input files given; name at least one prompt file")
    frame = pl.concat(parts, how="vertical")
    if frame.height == 0:
        raise InputError("no usable prompts left after skipping bad rows; fix the input files")
    _check_unique_ids(frame)
    frame = frame.drop(_FILE_ROW)
    report.settle()
    report.rows = frame.height
    return frame, report


def _extract_prompts(
    frame: pl.DataFrame,
    path: Path,
    fmt: str,
    prompt_key: str | None,
    id_key: str | None,
    on_bad_row: OnBadRow,
    report: ReadReport,
    offset: int,
) -> pl.DataFrame:
    prompt_col = _choose_prompt_column(frame, prompt_key, path)
    id_col = find_column(frame, C.ID_KEYS, id_key, what="id", flag="--id-key", path=path, required=False)
    source_col = find_column(frame, C.SOURCE_KEYS, None, what="source", flag="", path=path, required=False)
    difficulty_col = find_column(frame, C.DIFFICULTY_KEYS, None, what="difficulty", flag="", path=path,
                                 required=False)
    report.columns_used[str(path)] = {"prompt": prompt_col, "id": id_col or "(row number)"}
    text, messages, bad = _prompt_text(frame, prompt_col, path)
    row = (pl.int_range(0, pl.len(), dtype=pl.Int64) + offset).alias(C.ROW)
    if id_col is None:
        prompt_id = row.cast(pl.String)
    else:
        prompt_id = _id_expr(frame, id_col, path)
    selected = frame.select(
        row,
        prompt_id.alias(C.PROMPT_ID),
        pl.lit(text).alias(C.PROMPT_TEXT),
        pl.lit(messages).alias(C.N_MESSAGES),
        _source_expr(frame, source_col).alias(C.DATA_SOURCE),
        _difficulty_expr(frame, difficulty_col).alias(C.DIFFICULTY),
        pl.lit(str(path)).alias("source_file"),
        pl.int_range(0, pl.len(), dtype=pl.Int64).alias(_FILE_ROW),
        (pl.lit(bad) | pl.lit(text).is_null()).alias("\x00bad"),
        (prompt_id.is_null() if id_col is not None else pl.lit(False)).alias("\x00noid"),
    )
    problems = selected.select(pl.col("\x00bad") | pl.col("\x00noid")).to_series()
    if problems.any():
        indices = problems.arg_true().to_list()
        if on_bad_row == "skip":
            for index in indices:
                report.skip(_row_location(path, frame, index, fmt))
            selected = selected.filter(~problems)
        else:
            index = indices[0]
            where = _row_location(path, frame, index, fmt)
            if selected["\x00noid"][index]:
                raise InputError(f"{where}: column {id_col!r} (the id) is missing; give every row an id, or {_BAD_ROW_FIX}")
            raise InputError(
                f"{where}: column {prompt_col!r} is not text or a chat-message list (or is missing); {_BAD_ROW_FIX}"
            )
    return selected.drop("\x00bad", "\x00noid")


def _id_expr(frame: pl.DataFrame, column: str, path: Path) -> pl.Expr:
    dtype = frame.schema[column]
    if dtype == pl.String:
        return pl.col(column).str.strip_prefix("\x00json:")
    if dtype.is_integer() or dtype == pl.Boolean:
        return pl.col(column).cast(pl.String)
    if dtype.is_float():
        # 3.0 -> "3": ids written by tools that turn integers into floats.
        return (
            pl.when(pl.col(column) == pl.col(column).floor())
            .then(pl.col(column).cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(pl.col(column).cast(pl.String))
        )
    raise InputError(f"{path}: id column {column!r} holds {dtype}; ids must be text or integers (--id-key)")


def _source_expr(frame: pl.DataFrame, column: str | None) -> pl.Expr:
    if column is None:
        return pl.lit(None, dtype=pl.String)
    dtype = frame.schema[column]
    if dtype == pl.String or dtype.is_numeric() or dtype == pl.Boolean:
        return pl.col(column).cast(pl.String)
    return pl.lit(None, dtype=pl.String)


def _difficulty_expr(frame: pl.DataFrame, column: str | None) -> pl.Expr:
    if column is None:
        return pl.lit(None, dtype=pl.Float64)
    dtype = frame.schema[column]
    if dtype.is_numeric():
        return pl.col(column).cast(pl.Float64)
    if dtype == pl.String:
        # "Level 5" (MATH) or "6.5" (DeepMath): take the first number.
        return pl.col(column).str.extract(r"(-?\d+(?:\.\d+)?)", 1).cast(pl.Float64, strict=False)
    return pl.lit(None, dtype=pl.Float64)


def _check_unique_ids(frame: pl.DataFrame) -> None:
    duplicated = frame.filter(pl.col(C.PROMPT_ID).is_duplicated())
    if duplicated.height:
        first = duplicated[C.PROMPT_ID][0]
        rows = duplicated.filter(pl.col(C.PROMPT_ID) == first)
        # Rows are counted within each file (the global row of a second file's row 0 is not where it is).
        places = ", ".join(f"{f} row {r}" for f, r in zip(rows["source_file"], rows[_FILE_ROW], strict=False))
        raise InputError(
            f"duplicate prompt id {first!r} ({places}); {duplicated[C.PROMPT_ID].n_unique()} ids repeat. "
            "Make ids unique, or pass --id-key to use another column"
        )


# --------------------------------------------------------------------------------------------------------
# Lengths: history, rollout logs, observed lengths


def read_lengths(
    paths: Sequence[Path],
    *,
    id_key: str | None = None,
    length_key: str | None = None,
    on_bad_row: OnBadRow = "error",
    id_flag: str = "--history-id-key",
    length_flag: str = "--history-length-key",
) -> tuple[pl.DataFrame, ReadReport]:
    """Read observed response lengths: one row per sample, or one row per prompt with a list of lengths.

    ``id_flag`` and ``length_flag`` are the calling command's options for the two columns, named in errors.

    Returns
    -------
    (frame, report)
        ``frame`` has one row per observed sample: ``prompt_id`` (str), ``response_tokens`` (int64),
        ``truncated`` (bool or null when the file does not say), ``epoch`` (int32 or null).

    Raises
    ------
    InputError
        A missing id or length column, or lengths that are negative, missing, fractional or not numbers.
    """
    report = ReadReport()
    parts = []
    for path in paths:
        path = Path(path)
        fmt, _ = file_format(path)
        frame = read_table(path, on_bad_row=on_bad_row, report=report)
        id_col = find_column(frame, C.ID_KEYS, id_key, what="prompt id", flag=id_flag, path=path)
        length_col = find_column(frame, C.LENGTH_KEYS, length_key, what="response length", flag=length_flag,
                                 path=path)
        assert id_col is not None and length_col is not None
        report.columns_used[str(path)] = {"id": id_col, "length": length_col}
        parts.append(_extract_lengths(frame, path, fmt, id_col, length_col, on_bad_row, report))
    if not parts:
        raise InputError("no length files given")
    frame = pl.concat(parts, how="vertical")
    if frame.height == 0:
        raise InputError("no usable lengths left after skipping bad rows; fix the length files")
    report.settle()
    report.rows = frame.height
    return frame, report


def _extract_lengths(
    frame: pl.DataFrame,
    path: Path,
    fmt: str,
    id_col: str,
    length_col: str,
    on_bad_row: OnBadRow,
    report: ReadReport,
) -> pl.DataFrame:
    dtype = frame.schema[length_col]
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    line = pl.col("\x00line") if "\x00line" in frame.columns else pl.int_range(0, pl.len(), dtype=pl.Int64)
    truncated_col = C.TRUNCATED if C.TRUNCATED in frame.columns else None
    if truncated_col is not None:
        _check_truncated_dtype(frame.schema[truncated_col], listed, path)
    epoch_col = C.EPOCH if C.EPOCH in frame.columns and frame.schema[C.EPOCH].is_integer() else None
    flags_listed = truncated_col is not None and isinstance(frame.schema[truncated_col], pl.List)
    flags = _truncated_expr(frame.schema[truncated_col]) if truncated_col else pl.lit(None, pl.Boolean)
    # A scalar flag that is there but reads as neither true nor false is a bad row, not a silent "unknown".
    unreadable = (pl.col(truncated_col).is_not_null() & flags.is_null()
                  if truncated_col and not flags_listed else pl.lit(False))
    base = frame.select(
        _id_expr(frame, id_col, path).alias(C.PROMPT_ID),
        pl.col(length_col).alias("\x00len"),
        flags.alias(C.TRUNCATED),
        unreadable.alias("\x00badflags"),
        (pl.col(epoch_col).cast(pl.Int32, strict=False) if epoch_col else pl.lit(None, pl.Int32)).alias(C.EPOCH),
        line.alias("\x00where"),
    )
    if listed:
        if flags_listed:
            # A row whose flags do not match its lengths one to one is a bad row (its flags are dropped). The
            # exploded lists must have equal sizes: no lengths, no flags; missing flags become nulls.
            flags, lengths = pl.col(C.TRUNCATED), pl.col("\x00len")
            mismatch = flags.is_not_null() & (flags.list.len() != lengths.list.len().fill_null(0))
            base = base.with_columns(
                pl.when(lengths.is_null()).then(None)
                .when(flags.is_null() | mismatch).then(lengths.list.eval(pl.lit(None, pl.Boolean)))
                .otherwise(flags)
                .alias(C.TRUNCATED),
                mismatch.alias("\x00badflags"),
            )
            base = base.explode(["\x00len", C.TRUNCATED])
        else:
            base = base.explode("\x00len")
    if inner == pl.String:
        numeric = pl.col("\x00len").str.strip_prefix("\x00json:").str.strip_chars().cast(pl.Float64, strict=False)
    elif inner.is_numeric() or inner == pl.Null:
        numeric = pl.col("\x00len").cast(pl.Float64)
    else:
        raise InputError(f"{path}: length column {length_col!r} holds {dtype}; give whole token counts")
    base = base.with_columns(numeric.alias("\x00num"))
    bad = (
        pl.col(C.PROMPT_ID).is_null()
        | pl.col("\x00badflags")
        | pl.col("\x00num").is_null()
        | pl.col("\x00num").is_nan()
        | (pl.col("\x00num") < 0)
        | (pl.col("\x00num") > C.MAX_TOKEN_COUNT)
        | (pl.col("\x00num") != pl.col("\x00num").floor())
    )
    flagged = base.with_columns(bad.alias("\x00bad"))
    if flagged["\x00bad"].any():
        bad_rows = flagged.filter(pl.col("\x00bad"))
        if on_bad_row == "skip":
            for where in bad_rows["\x00where"].to_list():
                report.skip(_length_location(path, fmt, where, frame))
            flagged = flagged.filter(~pl.col("\x00bad"))
        else:
            first = bad_rows.row(0, named=True)
            where = _length_location(path, fmt, first["\x00where"], frame)
            if first[C.PROMPT_ID] is None:
                reason = f"column {id_col!r} (the prompt id) is missing"
            elif first["\x00badflags"] and flags_listed:
                reason = f"column {C.TRUNCATED!r} does not hold one flag per length in {length_col!r}"
            elif first["\x00badflags"]:
                reason = f"column {C.TRUNCATED!r} is not true or false"
            else:
                raw = first["\x00len"]
                value = first["\x00num"]
                if raw is None:
                    reason = f"column {length_col!r} is missing"
                elif value is None or (isinstance(value, float) and math.isnan(value)):
                    reason = f"column {length_col!r} is not a number"
                elif value < 0:
                    reason = f"column {length_col!r} is negative ({value:g})"
                elif value > C.MAX_TOKEN_COUNT:
                    reason = f"column {length_col!r} is larger than any response ({value:g} > {C.MAX_TOKEN_COUNT:,})"
                else:
                    reason = f"column {length_col!r} is not a whole token count ({value:g})"
            raise InputError(f"{where}: {reason} for prompt id {first[C.PROMPT_ID]!r}; {_BAD_ROW_FIX}")
    return flagged.select(
        C.PROMPT_ID,
        pl.col("\x00num").cast(pl.Int64).alias(C.RESPONSE_TOKENS),
        C.TRUNCATED,
        C.EPOCH,
    )


def _check_truncated_dtype(dtype: pl.DataType, lengths_listed: bool, path: Path) -> None:
    """The ``truncated`` flags must be scalars beside scalar lengths, or lists beside lists of lengths."""
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    castable = inner == pl.Boolean or inner == pl.String or inner == pl.Null or inner.is_numeric()
    if not castable or (listed and not lengths_listed):
        shape = "a list of true/false, one per length" if lengths_listed else "true or false"
        raise InputError(f"{path}: column {C.TRUNCATED!r} holds {dtype}; give {shape} per row")


def _truncated_expr(dtype: pl.DataType) -> pl.Expr:
    """The ``truncated`` column as booleans (lists of them stay lists); text "true"/"false"/"1"/"0" counts."""
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    value = pl.element() if listed else pl.col(C.TRUNCATED)
    if inner == pl.String:
        word = value.str.strip_chars().str.to_lowercase()
        flag = pl.when(word.is_in(["true", "1", "yes"])).then(True).when(word.is_in(["false", "0", "no"])).then(False)
        flag = flag.otherwise(None)
    else:
        flag = value.cast(pl.Boolean, strict=False)
    return pl.col(C.TRUNCATED).list.eval(flag) if listed else flag


def _length_location(path: Path, fmt: str, where: int, frame: pl.DataFrame) -> str:
    if "\x00line" in frame.columns:
        return f"{path}:{where}"
    if fmt == "jsonl":
        return f"{path}:{_jsonl_line_of_row(path, where)}"
    if fmt == "csv":
        return f"{path}: row {where + 1} (after the header)"
    return f"{path}: row {where}"
