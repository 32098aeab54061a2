"""Limits on hostile input, checked before any parser or decompressor does work on the bytes.

What asp refuses, and why (docs/errors.md, "Hostile input"):

- **Nesting deeper than `MAX_NESTING_DEPTH` levels** in any JSON document asp parses (prompt, history,
  prediction and log files; JSON text inside their cells; presets; schedule and history metadata; model
  files' JSON members) and in Parquet column types. PyArrow's JSON reader, Polars' Arrow conversion and its
  Parquet reader recurse once per level and crash the process (SIGSEGV) at about 800 levels; Python's
  ``json`` stops at about 1,000 with a RecursionError. Real files nest a handful of levels (a chat list of
  messages with multi-part content is 4), so 100 leaves room for anything legitimate and a wide margin
  below every parser's crash. `json_depth_violations` finds deeper nesting with a byte scan (NumPy, no
  parsing), so a file is refused before a native parser sees it.
- **Zip members larger than `MAX_ZIP_MEMBER_BYTES`** (or more than `MAX_ZIP_TOTAL_BYTES` in all, or more
  than `MAX_ZIP_MEMBERS` members) in model files, read from the central directory before anything inflates;
  Python's `zipfile` never inflates past a member's declared size, so the declared sizes bound the work.
- **Gzip input that inflates more than `MAX_GZIP_RATIO` times its size** (beyond the first
  `GZIP_FREE_BYTES`), stopped while inflating: text compresses 3-10x, a decompression bomb about 1,000x.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from asp_cli.errors import AspError

MAX_NESTING_DEPTH = 100
# The largest difficulty asp reads (a level, a rating, a pass rate are far below): a feature of 1e12 fitted a model
# file asp then refused as damaged, and 1e308 overflowed the fit (a hostile-input round).
MAX_DIFFICULTY = 1e6
MAX_ZIP_MEMBERS = 64
MAX_ZIP_MEMBER_BYTES = 256 * 2**20  # the largest array asp writes is 2**24 float64s (128 MiB)
MAX_ZIP_TOTAL_BYTES = 512 * 2**20
MAX_GZIP_RATIO = 200
GZIP_FREE_BYTES = 16 * 2**20

_NOT_NUL = re.compile(rb"[^\x00]")
DEPTH_FIX = f"asp reads JSON nested at most {MAX_NESTING_DEPTH} levels deep; flatten the field or store it as text"

_CHUNK_BYTES = 1 << 24  # 16 MiB a pass: a few arrays of this size at a time, whatever the file's size
_WINDOW_BYTES = 512  # the cheap bound counts opening brackets per window of this many bytes (a multiple of 8)
_QUOTE, _BACKSLASH, _NEWLINE, _OPEN, _CLOSE = ord('"'), ord("\\"), ord("\n"), ord("{"), ord("}")
# b | 0x20 maps '[' to '{' and ']' to '}' and no other byte onto either: one comparison finds both brackets.
_CASE = np.uint8(0x20)


@dataclass
class _ScanState:
    """What carries over from one chunk to the next within a document (or a line)."""

    in_string: bool = False
    backslashes_odd: bool = False  # the chunk ended on an odd run of backslashes
    depth: int = 0  # nesting (not clamped) since the start of the document or line
    floor: int = 0  # the lowest ``depth`` so far in this document or line, at most 0


def json_depth_violations(data: bytes | bytearray | memoryview, *, per_line: bool,
                          limit: int = MAX_NESTING_DEPTH, first_only: bool = True) -> list[int]:
    """Byte offsets where JSON nesting first goes deeper than ``limit``, found without parsing.

    Brackets (``[`` ``{`` ``]`` ``}``) count outside strings only; a string ends at an unescaped quote; a raw
    newline, which valid JSON never holds inside a string, ends any string. With ``per_line`` every line is
    its own document (JSON lines) and its depth starts at 0; otherwise the whole input is one document. A
    closing bracket at depth 0 (malformed JSON) is not counted below 0, so the measure is never lower than
    what a parser reading left to right reaches.

    Lines go through a cheap bound first: no line can nest deeper than the opening brackets it holds, counted
    per 512-byte window with NumPy (about 20 ms per 100 MB); only chunks where some line could exceed the
    limit get the exact scan, which follows strings and escapes (about 200 ms per 100 MB). Work is done 16 MiB
    at a time, so memory stays a small multiple of that whatever the input's size.

    Returns the offset of the bracket that opens level ``limit + 1``, for each offending line (or the
    document), in order; only the first when ``first_only``. Empty when nothing is too deep.
    """
    view = memoryview(data).cast("B")
    total = len(view)
    buffer = np.frombuffer(view, dtype=np.uint8)
    found: list[int] = []
    if not per_line:
        opens = sum(int(np.count_nonzero((buffer[i:i + _CHUNK_BYTES] | _CASE) == _OPEN))
                    for i in range(0, total, _CHUNK_BYTES))
        if opens <= limit:  # nothing can nest deeper than the brackets it opens
            return found
        state = _ScanState()
        for start in range(0, total, _CHUNK_BYTES):
            hits = _exact(buffer[start:start + _CHUNK_BYTES], state, False, limit)
            if hits.size:
                return [int(hits[0]) + start]
        return found
    scratch = (np.empty(min(total, _CHUNK_BYTES), dtype=np.uint8), np.empty(min(total, _CHUNK_BYTES), dtype=bool))
    start = 0
    while start < total:
        end = min(start + _CHUNK_BYTES, total)
        if end < total:
            cut = view.obj.rfind(b"\n", start, end) if isinstance(view.obj, bytes) else _rfind_newline(buffer, start, end)
            if cut < 0:  # a line longer than a chunk: scan it exactly, a chunk at a time
                line_end = _find_newline(view, buffer, end, total)
                state = _ScanState()
                for piece in range(start, line_end, _CHUNK_BYTES):
                    hits = _exact(buffer[piece:min(piece + _CHUNK_BYTES, line_end)], state, True, limit)
                    if hits.size:
                        found.append(int(hits[0]) + piece)
                        break
                if found and first_only:
                    return found
                start = line_end
                continue
            end = cut + 1
        chunk = buffer[start:end]
        if _may_exceed(chunk, limit, scratch):
            hits = _exact(chunk, _ScanState(), True, limit)
            found.extend(int(h) + start for h in hits)
            if found and first_only:
                return found[:1]
        start = end
    return found


def _rfind_newline(buffer: np.ndarray, start: int, end: int) -> int:
    hits = np.flatnonzero(buffer[start:end] == _NEWLINE)
    return int(hits[-1]) + start if hits.size else -1


def _find_newline(view: memoryview, buffer: np.ndarray, start: int, total: int) -> int:
    """The offset just past the next newline at or after ``start`` (or ``total``)."""
    if isinstance(view.obj, bytes):
        at = view.obj.find(b"\n", start)
        return total if at < 0 else at + 1
    for piece in range(start, total, _CHUNK_BYTES):
        hits = np.flatnonzero(buffer[piece:piece + _CHUNK_BYTES] == _NEWLINE)
        if hits.size:
            return piece + int(hits[0]) + 1
    return total


def _may_exceed(chunk: np.ndarray, limit: int, scratch: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether some line of ``chunk`` (whole lines) could hold more than ``limit`` opening brackets.

    A line spans windows a..b, where a and b hold newlines (or the chunk's ends) and none between them does;
    its openers are at most those of windows a..b. ``scratch`` is reused memory of the chunk's size.
    """
    size = chunk.size
    usable = size - size % _WINDOW_BYTES
    windows = usable // _WINDOW_BYTES
    opens = np.zeros(windows + 1, dtype=np.int64)
    newlines = np.ones(windows + 1, dtype=bool)  # the chunk starts a line and its tail ends one
    folded, flags = scratch[0][:usable], scratch[1][:usable]
    np.bitwise_or(chunk[:usable], _CASE, out=folded)
    np.equal(folded, _OPEN, out=flags)
    if windows:
        # Sum each window's flags as 64-bit words: every byte lane adds at most 64 ones, so no lane carries
        # into the next, and the lanes' bytes add up to the window's count (SWAR, without a per-byte pass).
        lanes = flags.view(np.uint64).reshape(windows, _WINDOW_BYTES // 8).sum(axis=1, dtype=np.uint64)
        opens[:-1] = lanes.view(np.uint8).reshape(windows, 8).sum(axis=1, dtype=np.int64)
        np.equal(chunk[:usable], _NEWLINE, out=flags)
        newlines[1:-1] = flags.view(np.uint64).reshape(windows, _WINDOW_BYTES // 8).any(axis=1)[1:]
    tail = chunk[usable:]
    opens[-1] = np.count_nonzero((tail | _CASE) == _OPEN)
    if int(opens.sum()) <= limit:
        return False
    ends = np.flatnonzero(newlines)
    running = np.concatenate(([0], np.cumsum(opens)))
    spans = running[ends[1:] + 1] - running[ends[:-1]]  # windows from one newline window to the next
    return bool(spans.size and spans.max() > limit) or int(opens[ends[0]]) > limit


def _backslash_runs_odd(chunk: np.ndarray, quotes: np.ndarray, carry_odd: bool) -> np.ndarray:
    """For each quote position, whether an odd run of backslashes (continuing from the last chunk) precedes it."""
    odd = np.zeros(quotes.size, dtype=bool)
    candidates = np.flatnonzero(quotes >= 1)
    candidates = candidates[chunk[quotes[candidates] - 1] == _BACKSLASH]
    if candidates.size == 0:
        if carry_odd and quotes.size and quotes[0] == 0:
            odd[0] = True
        return odd
    backslashes = np.flatnonzero(chunk == _BACKSLASH)
    run_start = np.ones(backslashes.size, dtype=bool)
    run_start[1:] = np.diff(backslashes) != 1
    first = np.maximum.accumulate(np.where(run_start, np.arange(backslashes.size), 0))
    last = np.searchsorted(backslashes, quotes[candidates] - 1)  # the backslash right before each quote
    length = last - first[last] + 1
    reaches_start = backslashes[first[last]] == 0
    odd[candidates] = ((length + (reaches_start & carry_odd)) % 2) == 1
    if carry_odd and quotes.size and quotes[0] == 0:
        odd[0] = True
    return odd


def _exact(chunk: np.ndarray, state: _ScanState, per_line: bool, limit: int) -> np.ndarray:
    """The exact scan of one chunk: follows strings and escapes; updates ``state``; offsets within the chunk."""
    folded = chunk | _CASE
    brackets = np.flatnonzero((folded == _OPEN) | (folded == _CLOSE))
    quotes = np.flatnonzero(chunk == _QUOTE)
    newlines = np.flatnonzero(chunk == _NEWLINE)
    real = quotes[~_backslash_runs_odd(chunk, quotes, state.backslashes_odd)]
    # String state before each bracket: real quotes since its line started (plus the carry on the first line).
    line = np.searchsorted(newlines, brackets)  # newlines before each bracket: its line within the chunk
    first_line = line == 0
    line_start = np.where(first_line, 0, newlines[np.maximum(line - 1, 0)] if newlines.size else 0)
    quotes_in_line = np.searchsorted(real, brackets) - np.where(first_line, 0, np.searchsorted(real, line_start))
    inside = ((quotes_in_line + (first_line & state.in_string)) & 1).astype(bool)
    outside = brackets[~inside]
    step = np.where(folded[outside] == _OPEN, 1, -1).astype(np.int64)
    segment = line[~inside] if per_line else np.zeros(outside.size, dtype=np.int64)
    carried = segment == 0
    climb = np.cumsum(step)
    fresh = np.ones(outside.size, dtype=bool)
    fresh[1:] = segment[1:] != segment[:-1]
    base_index = np.maximum.accumulate(np.where(fresh, np.arange(outside.size), 0))
    depth = climb - (climb[base_index] - step[base_index]) + np.where(carried, state.depth, 0)
    # A running minimum that restarts with each line: later lines are shifted below earlier ones.
    spread = 2 * (outside.size + abs(state.depth) + abs(state.floor)) + 2
    floor = np.minimum.accumulate(depth - segment * spread) + segment * spread
    floor = np.minimum(floor, np.where(carried, state.floor, 0))
    level = depth - floor
    over = np.flatnonzero((level == limit + 1) & (step == 1))
    if per_line and over.size:
        lines = segment[over]
        keep = np.ones(over.size, dtype=bool)
        keep[1:] = lines[1:] != lines[:-1]
        over = over[keep]
    if over.size and carried[over[0]] and state.depth - state.floor > limit:
        over = over[1:]  # that line (or document) went too deep in an earlier chunk, and was reported there
    if not per_line:
        over = over[:1]
    # Carry to the next chunk: string state, backslashes and depth at the end of this one.
    last_line = newlines.size
    tail_start = int(newlines[-1]) + 1 if newlines.size else 0
    tail_quotes = real.size - int(np.searchsorted(real, tail_start))
    state.in_string = bool((tail_quotes + (state.in_string if last_line == 0 else 0)) & 1)
    trailing = 0
    while trailing < chunk.size and chunk[chunk.size - 1 - trailing] == _BACKSLASH:
        trailing += 1
        if trailing > 64:  # a long run: count it at NumPy speed
            others = np.flatnonzero(chunk != _BACKSLASH)
            trailing = chunk.size - 1 - int(others[-1]) if others.size else chunk.size
            break
    state.backslashes_odd = bool((trailing + (state.backslashes_odd if trailing == chunk.size else 0)) % 2)
    if outside.size and (not per_line or segment[-1] == last_line):
        state.floor = int(min(floor[-1], 0))
        state.depth = int(depth[-1])
    elif per_line and last_line > 0:
        state.depth = state.floor = 0
    return outside[over]


def line_and_column(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column of byte ``offset`` (error path only: counts newlines up to it)."""
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1


def check_json_depth(data: bytes, where: str, error: type[AspError], *, per_line: bool = False,
                     fix: str = DEPTH_FIX) -> None:
    """Refuse ``data`` when its JSON nests deeper than `MAX_NESTING_DEPTH`, naming ``where`` and the line."""
    hits = json_depth_violations(data, per_line=per_line)
    if hits:
        line, column = line_and_column(data, hits[0])
        at = f"{where}:{line}" if b"\n" in data else where
        raise error(f"{at}: JSON nested more than {MAX_NESTING_DEPTH} levels deep (at column {column}); {fix}")


def loads(text: str | bytes, where: str, error: type[AspError], *, fix: str = DEPTH_FIX,
          invalid: str | None = None):
    """`json.loads` behind the depth check.

    A malformed document raises ``error`` with ``invalid`` as its message (default: ``where`` and the reason).
    """
    import json

    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    check_json_depth(data, where, error, fix=fix)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(invalid or f"{where}: not valid JSON ({str(exc)[:120]})") from None


def too_deep_rows(values: Iterable[str | None]) -> list[int]:
    """Indices of the text values (one JSON document each) that nest deeper than `MAX_NESTING_DEPTH`.

    ``values`` may be a Polars text Series (joined natively) or any iterable of texts. The texts are scanned as
    one document per line, a raw newline inside one (whitespace to JSON) read as a space.
    """
    if hasattr(values, "str") and hasattr(values, "len"):  # a Polars Series: join without a Python loop
        if values.len() == 0:
            return []
        text = values.fill_null("").str.replace_all("\n", " ", literal=True).str.join("\n").item()
    else:
        texts = ["" if v is None else v.replace("\n", " ") for v in values]
        if not texts:
            return []
        text = "\n".join(texts)
    joined = text.encode("utf-8", "surrogatepass")
    hits = json_depth_violations(joined, per_line=True, first_only=False)
    if not hits:
        return []
    breaks = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == ord("\n"))
    return sorted({int(i) for i in np.searchsorted(breaks, np.asarray(hits), side="left")})


def arrow_type_depth(arrow_type) -> int:
    """How deeply an Arrow type nests (a plain column is 0, a list of them 1, ...), without recursion."""
    deepest = 0
    stack = [(arrow_type, 0)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING_DEPTH:
            break
        for i in range(getattr(current, "num_fields", 0)):
            stack.append((current.field(i).type, depth + 1))
        value = getattr(current, "value_type", None)
        if value is not None and getattr(current, "num_fields", 0) == 0:
            stack.append((value, depth + 1))
    return deepest


PARQUET_TOO_DEEP = "too deeply nested"  # PyArrow's own refusal: at most 100 Parquet schema levels (about 50 lists)


def parquet_depth_error(where: str, error: type[AspError]) -> AspError:
    return error(f"{where}: a column is nested more than {MAX_NESTING_DEPTH} levels deep (or more than PyArrow reads); "
                 "flatten the column")


def check_parquet_depth(schema, where: str, error: type[AspError]) -> None:
    """Refuse a Parquet (Arrow) schema with a column nested deeper than `MAX_NESTING_DEPTH`."""
    for field in schema:
        if arrow_type_depth(field.type) > MAX_NESTING_DEPTH:
            raise error(f"{where}: column {field.name!r} is nested more than {MAX_NESTING_DEPTH} levels deep; asp "
                        f"reads at most {MAX_NESTING_DEPTH} levels, flatten the column")


def check_zip(archive, where: str, error: type[AspError], what: str = "an asp file") -> None:
    """Refuse a zip archive whose central directory declares too many or too large members.

    Nothing is inflated: the sizes come from the central directory, and `zipfile` stops every member at its
    declared size (a member that claims less than it holds fails its CRC check instead of growing).
    """
    members = archive.infolist()
    if len(members) > MAX_ZIP_MEMBERS:
        raise error(f"{where}: the archive holds {len(members)} members, more than {what} can "
                    f"({MAX_ZIP_MEMBERS}); it is not {what}")
    total = 0
    for member in members:
        total += member.file_size
        if member.file_size > MAX_ZIP_MEMBER_BYTES:
            raise error(f"{where}: member {member.filename!r} inflates to {member.file_size:,} bytes, more than "
                        f"{MAX_ZIP_MEMBER_BYTES:,}; it is not {what}")
    if total > MAX_ZIP_TOTAL_BYTES:
        raise error(f"{where}: the archive inflates to {total:,} bytes, more than {MAX_ZIP_TOTAL_BYTES:,}; "
                    f"it is not {what}")


GZIP_MAGIC = b"\x1f\x8b"


class TrailingGzipData(Exception):
    """Whole gzip data followed by bytes that are not gzip (a hostile-input round was told such a file was not
    gzip at all, and to drop the .gz suffix)."""

    def __str__(self) -> str:
        return "after its gzip data the file holds more bytes that are not gzip"


def gunzip(data: bytes, where: str, error: type[AspError], *,
           on_bad: Callable[[Exception], AspError] | None = None) -> bytes:
    """Inflate gzip ``data`` (all members), refusing it once the output passes `GZIP_FREE_BYTES` plus
    `MAX_GZIP_RATIO` times the compressed bytes consumed so far.

    The input is fed 64 KiB at a time, so a bomb (about 1,000 to 1) is stopped after inflating a little more
    than `GZIP_FREE_BYTES`, whatever it would grow to. ``on_bad`` turns a corrupt stream's exception into the
    error to raise (default: ``error`` with the reason).
    """
    step = 1 << 16
    parts: list[bytes] = []
    produced = 0
    view = memoryview(data)
    position = 0  # where the next member starts
    member_start = -1  # where the member being inflated started, once a first one was whole
    members = 0  # members inflated whole
    try:
        while True:
            found = _NOT_NUL.search(data, position)  # members may be followed by NUL padding, as gzip allows
            if found is None:
                break
            position = found.start()
            member_start = position if members else -1
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not inflater.eof:
                if position >= len(data):
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                piece = view[position:position + step]
                position += len(piece)
                out = inflater.decompress(piece, 1 << 20)  # at most 1 MiB out per call: checked as it grows
                while True:
                    produced += len(out)
                    if produced > GZIP_FREE_BYTES + MAX_GZIP_RATIO * (position - len(inflater.unconsumed_tail)):
                        raise error(f"{where}: the gzip data inflates to more than {MAX_GZIP_RATIO} times its size "
                                    "(a decompression bomb, or data asp cannot tell from one); decompress it yourself "
                                    "and give the plain file")
                    parts.append(out)
                    if not inflater.unconsumed_tail:
                        break
                    out = inflater.decompress(inflater.unconsumed_tail, 1 << 20)
            position -= len(inflater.unused_data)
            members += 1
    except (zlib.error, EOFError) as exc:
        if member_start > 0 and isinstance(exc, zlib.error) and data[member_start:member_start + 2] != GZIP_MAGIC:
            exc = TrailingGzipData()
        if on_bad is not None:
            raise on_bad(exc) from None
        raise error(f"{where}: not valid gzip data ({exc})") from None
    return b"".join(parts)
