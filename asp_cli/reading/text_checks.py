"""Checks of raw text shared by the readers: valid UTF-8 (naming the line and the byte), column names asp keeps for
itself, lone UTF-16 surrogate escapes, and an error's first line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from asp_cli.errors import InputError


def is_utf8(data: bytes) -> bool:
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


def check_utf8(path: Path, data: bytes, first_line: int = 1) -> None:
    """Raise `InputError` naming the line (``first_line`` being the line of ``data``'s start) and the byte
    within it of ``data``'s first byte that is not UTF-8."""
    if is_utf8(data):
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + first_line
        # The byte counted from 1 within its line, as an editor's column: the same whichever reader (whole file
        # or streamed batches) found it.
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        if exc.reason == "unexpected end of data" and exc.end == len(data):
            # A log still being written, cut inside a character: re-encoding (the advice below) would corrupt it.
            raise InputError(f"{path}:{line}: the file ends inside a character of this line (cut short: a log "
                             "still being written, or a copy interrupted); read it once the writer has finished")
        raise InputError(
            f"{path}:{line}: not valid UTF-8 (byte {column} of the line); re-encode the file as UTF-8, "
            "for example with `iconv -f LATIN1 -t UTF-8`"
        ) from None


# asp names its own columns of a frame of user rows with a leading NUL ("\x00line", "\x00row", ...), which no
# real column name holds: a user column so named would be taken for (or replaced by) one of them.
RESERVED_PREFIX = "\x00"


def check_column_names(path: Path, names: Iterable[str], where: str = "") -> None:
    """Raise `InputError` for a column name that starts with a NUL character (``where``: the line, ":3", or "").

    The readers keep the source line of a row in such a column, `asp export` the row's number: a user's column of
    that name gave wrong line numbers in messages, or was dropped from what `asp export` wrote.
    """
    for name in names:
        if isinstance(name, str) and name.startswith(RESERVED_PREFIX):
            raise InputError(f"{path}{where}: column {name!r} starts with a NUL character, which asp keeps "
                             "for its own columns; rename the column (or drop it)")


def first_error_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 200 characters), or its type's name."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


# A JSON escape of a UTF-16 surrogate (\\ud800-\\udfff). A pair of them is one character and decodes to it; one
# alone is no character (text cannot hold it as UTF-8), so a row with one is a bad row, not text to quote.
SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89abcdefABCDEF]")
LONE_SURROGATE = "holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its pair), which is no character"


def has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_UNFINISHED_NUMBER = re.compile(r"-?[0-9]*\.?[0-9]*(?:[eE][-+]?[0-9]*)?")


def ran_out_of_text(raw: bytes, exc: json.JSONDecodeError) -> bool:
    """Whether the parser of an unfinished last line (no newline after it) ran out of text: in a string, at its end,
    or with only the start of a literal or number left (`tru`, `12.`; an observe of a log still being written met a
    half-written last line, said as malformed JSON)."""
    text = raw.decode("utf-8", "replace").rstrip()
    if exc.msg.startswith("Unterminated") or exc.pos >= len(text):
        return True
    if exc.msg.startswith("Invalid \\uXXXX escape") and len(text) - exc.pos < 6:  # cut inside `\u00e9`
        return True
    tail = text[exc.pos:].strip()
    return any(word.startswith(tail) for word in ("true", "false", "null")) or bool(
        _UNFINISHED_NUMBER.fullmatch(tail))
