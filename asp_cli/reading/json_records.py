"""Parsed JSON objects (the rows of JSON lines or of a JSON array) into a frame of the user's own columns.

A column is built by Polars when its values share one JSON kind at every depth; otherwise (text beside numbers,
``[10, true]``, a chat message's content as text in one row and as a list of parts in another) it is kept as text,
each non-text value as its JSON text behind `JSON_TAG`, so no value is coerced to another type: the readers judge
each one (`prompts`: a chat list row by row; `lengths`: a list element by element) and `asp export` writes them back.
A user's own text that starts as a tag does is kept behind `TEXT_TAG` (`escape_tag_lookalikes`, in every reader), so
that no text is taken for a tagged value; `untag` gives each value back as the file held it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import polars as pl

CHAT_CONTENT = "content"  # a chat message's text field


def _parts_text(parts: list[Any]) -> str | None:
    """The text of OpenAI-style multi-part content, ``[{"type": "text", "text": ...}, {"type": "image_url", ...}]``,
    or of a list of strings: its text parts joined by newlines (other parts carry no prompt text). None where a part
    is neither text nor an object, or its ``text`` is not text (``{"type": "text", "text": 5}``): no text to read,
    as a content of 5 is not (a hostile-input audit found such prompts scheduled as empty, and a list of strings
    dropped whole)."""
    if not all(isinstance(p, str) or isinstance(p, dict) and isinstance(p.get("text"), (str, type(None)))
               for p in parts):
        return None
    return "\n".join(p if isinstance(p, str) else p["text"] for p in parts
                     if isinstance(p, str) or isinstance(p.get("text"), str))


def flatten_content_parts(value: Any) -> Any:
    """A chat list whose message contents are multi-part lists, with each such content replaced by its text (left
    as the list where a part is not text: the reader's bad row)."""
    if not isinstance(value, list) or not any(isinstance(m, dict) and isinstance(m.get(CHAT_CONTENT), list)
                                              for m in value):
        return value
    flat = []
    for m in value:
        text = _parts_text(m[CHAT_CONTENT]) if isinstance(m, dict) and isinstance(m.get(CHAT_CONTENT), list) else None
        flat.append(m if text is None else {**m, CHAT_CONTENT: text})
    return flat


def records_to_frame(records: list[dict[str, Any]]) -> pl.DataFrame:
    """Build a frame from parsed JSON objects; a column whose values mix JSON types (at any depth: ``[10, true]``,
    a chat list whose contents are text in one message and parts in another) is kept as JSON text, tagged, since
    Polars would coerce its values to one type (true to 1, a list of parts to its Rust debug text)."""
    keys: dict[str, None] = {}
    for record in records:
        for key in record:
            keys.setdefault(key, None)
    data: dict[str, list[Any]] = {}
    for key in keys:
        values = [record.get(key) for record in records]
        if any(isinstance(v, str) and v.startswith(_TAG_START) for v in values):
            values = [escape_text(v) if isinstance(v, str) else v for v in values]
        kinds = {_json_kind(v) for v in values if v is not None}
        nested = bool(kinds & {"list", "object"})
        # An integer beyond 64 bits is JSON text even alone: Polars made a column of them Int128, or null past 128 bits.
        if ((len(kinds) > 1 and (kinds != {"int", "float"} or inexact_beside_fractions(values))) or "bigint" in kinds
                or (nested and (kind_difference(values) is not None or _inexact_field(values)))):
            values = [v if v is None or isinstance(v, str) else _Mixed(v) for v in values]
        data[key] = values
    series = []
    for key, values in data.items():
        if any(isinstance(v, _Mixed) for v in values):
            # Keep the kind of each value visible to validators: text stays text, the rest becomes JSON.
            series.append(pl.Series(key, [None if v is None else (v if isinstance(v, str) else JSON_TAG + json.dumps(v.value)) for v in values], dtype=pl.String))
        else:
            try:
                column = pl.Series(key, values, strict=False)
                if column.len() != len(values):  # odd nesting Polars flattens: keep it as JSON text
                    raise ValueError(key)
            except Exception:  # noqa: BLE001 - unrepresentable nesting: keep it as JSON text
                column = pl.Series(key, [None if v is None else json.dumps(v) for v in values], dtype=pl.String)
            series.append(column)
    return pl.DataFrame(series)


EXACT_FLOAT = 2**53  # integers from here on (in size) a float64 may not hold exactly


def inexact_beside_fractions(values: list[Any]) -> bool:
    """Whether integers among fractions (one column of floats) include one that a float cannot be trusted to hold
    exactly: 2**53 + 1 became 2**53, the id of another prompt. Such a column is kept as JSON text instead."""
    return any(type(v) is int and abs(v) >= EXACT_FLOAT for v in values)


def _inexact_field(values: list[Any]) -> bool:
    """Whether an object field (at any depth: ``extra_info.index``) holds fractions beside an integer a float may not
    hold exactly, as `inexact_beside_fractions` says of a column: the column is then kept as JSON text, so a dotted
    ``--id-key`` into it reads the file's integer (`field_of_tagged`)."""
    fields: dict[tuple[str, ...], list[Any]] = {}
    stack: list[tuple[tuple[str, ...], Any]] = [((), v) for v in values if isinstance(v, dict)]
    while stack:
        path, value = stack.pop()
        for name, item in value.items():
            if isinstance(item, dict):
                stack.append((path + (name,), item))
            elif type(item) in (int, float):
                fields.setdefault(path + (name,), []).append(item)
    return any(float in {type(v) for v in found} and inexact_beside_fractions(found) for found in fields.values())


def field_of_tagged(values: list[str | None], path: list[str]) -> list[str | None] | None:
    """The field at ``path`` of each tagged JSON object of a column of mixed kinds, as such a column holds its values
    (text as itself, the rest behind `JSON_TAG`; null where a row has no such field); None when no row has it."""
    out: list[str | None] = []
    for raw in values:
        value = json.loads(raw[len(JSON_TAG):]) if raw is not None and raw.startswith(JSON_TAG + "{") else None
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        out.append(None if value is None else escape_text(value) if isinstance(value, str)
                   else JSON_TAG + json.dumps(value))
    return out if any(v is not None for v in out) else None


# How a non-text JSON value is kept in a column of mixed kinds (text stays text): its JSON text behind this tag.
JSON_TAG = "\x00json:"
# How a user's own text that starts with either tag is kept (in any text column of any reader): behind this tag, so
# that the text "\x00json:5" is not read as the number 5 (no parsed JSON text starts with a NUL; this one does).
TEXT_TAG = "\x00text:"
_TAG_START = "\x00"  # both tags start with it: text that does not is never escaped


def escape_text(value: str) -> str:
    """A user's text as a column keeps it: behind `TEXT_TAG` when it starts as a tag does, else as it is."""
    return TEXT_TAG + value if value.startswith((JSON_TAG, TEXT_TAG)) else value


def escape_tag_lookalikes(frame: pl.DataFrame, columns: list[str] | None = None) -> pl.DataFrame:
    """``frame`` with each text value of its own columns (``columns``, or every text column but asp's hidden
    NUL-named ones) that starts as a tag does kept behind `TEXT_TAG` (`escape_text`); unchanged when none does.

    For the readers whose columns hold no tags of their own (PyArrow's JSON lines, CSV, Parquet): a frame built
    by `records_to_frame` is escaped as it is built."""
    names = [c for c, t in frame.schema.items() if t == pl.String and not c.startswith("\x00")
             and (columns is None or c in columns)]
    if not names:
        return frame
    found = [c for c, hit in zip(names, frame.select(pl.col(c).str.starts_with(_TAG_START).any() for c in names).row(0),
                                 strict=True) if hit]
    return frame.with_columns(
        pl.when(pl.col(c).str.starts_with(JSON_TAG) | pl.col(c).str.starts_with(TEXT_TAG))
        .then(TEXT_TAG + pl.col(c)).otherwise(pl.col(c)).alias(c)
        for c in found
    ) if found else frame


def untag(value: pl.Expr) -> pl.Expr:
    """The values of a text column as the file held them: text as itself (escaped text unescaped), another JSON
    value of a column of mixed kinds as its JSON text."""
    return (pl.when(value.str.starts_with(TEXT_TAG)).then(value.str.slice(len(TEXT_TAG)))
            .otherwise(value.str.strip_prefix(JSON_TAG)))


def untag_value(raw: str) -> str:
    """`untag` of one value."""
    return raw[len(TEXT_TAG):] if raw.startswith(TEXT_TAG) else raw.removeprefix(JSON_TAG)


def kind_difference(values: list[Any]) -> tuple[str, str, str] | None:
    """Where parsed JSON values differ in kind at one place (the values themselves, a list element, an object's
    field), which one Polars column cannot hold: ``[10, true]``, ``{"a": 1}`` beside ``{"a": "x"}``; as (the place,
    e.g. ``"a"`` or ``"tools.[]"``, empty for the values themselves; one kind; the other, in JSON's words), or None.
    Numbers mix (as integers and fractions do in a column). Nulls and empty lists take any kind."""
    seen: dict[tuple, str] = {}
    stack: list[tuple[tuple, Any]] = [((), v) for v in reversed(values) if v is not None]
    while stack:
        path, value = stack.pop()
        if value is None:
            continue
        kind = _json_kind(value)
        kind = "number" if kind in ("int", "float") else kind
        if seen.setdefault(path, kind) != kind:
            place = ".".join("[]" if step == 0 else str(step) for step in path)
            return place, _KIND_WORDS[seen[path]], _KIND_WORDS[kind]
        if isinstance(value, list):
            stack.extend((path + (0,), item) for item in value)  # 0: any element (object keys are text)
        elif isinstance(value, dict):
            stack.extend((path + (name,), item) for name, item in value.items())
    return None


_KIND_WORDS = {"bool": "true/false", "number": "a number", "bigint": "an integer beyond 64 bits", "str": "text",
               "list": "a list", "object": "an object"}


class _Mixed:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        # An integer beyond 64 bits would silently become a float in a numeric column: keep it as JSON text.
        return "int" if -(2**63) <= value < 2**63 else "bigint"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


class DuplicateKey(ValueError):
    """A JSON object holding one key twice (`unique_keys`)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.problem = (f"holds the key {json.dumps(key, ensure_ascii=True)[:80]} twice in one object (JSON readers "
                        "differ on which value they keep); keep one")


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for `json.loads`: the object, refused where a key repeats. Python keeps the last value
    and PyArrow refuses the file, so a row of {"prompt": a, "prompt": b} was read as b without a word (a
    hostile-input audit, 2026-12-05). About 30% slower than a plain parse, on the line-by-line path only."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return record


def element_holding_duplicate(data: bytes) -> str:
    """Which element of a JSON array (counted from 1, with its line) holds an object with a repeated key: the array
    parsed again an element at a time, once such an object is known to be there."""
    text = data.decode("utf-8")
    decoder = json.JSONDecoder(object_pairs_hook=unique_keys)
    at = text.index("[") + 1
    for number in itertools.count(1):
        while text[at] in " \t\r\n,":
            at += 1
        try:
            _, end = decoder.raw_decode(text, at)
        except DuplicateKey:
            return f"{number} (line {text.count(chr(10), 0, at) + 1})"
        at = end
    raise AssertionError("unreachable")  # pragma: no cover
