"""Dotted keys: a path into objects (struct columns), as `--id-key extra_info.index` names verl's index."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from asp_cli.errors import InputError
from asp_cli.reading.json_records import escape_tag_lookalikes, field_of_tagged

# The most fields of an object a message lists.
FIELDS_SHOWN = 8


def with_nested_key(frame: pl.DataFrame, key: str | None, path: Path | None = None) -> pl.DataFrame:
    """``frame`` with a column named ``key`` when ``key`` is a dotted path into struct columns (``extra_info.index``:
    the field ``index`` of the struct column ``extra_info``) and no column of that name exists; else ``frame``.

    verl's own preprocessing keeps a dataset's index in ``extra_info`` only, so `--id-key extra_info.index` is
    the id a verl dataset has (a newcomer's was refused: "no column 'extra_info.index'").

    Raises
    ------
    InputError
        ``key`` names both a column of its own (a flattened file's ``extra_info.index``) and a field inside
        another (``path``, for the message): the column won without a word.
    """
    if key is None or "." not in key:
        return frame
    if key in frame.columns:
        head = key.split(".")[0]
        if head in frame.columns and key in with_nested_key(frame.drop(key), key).columns:
            raise InputError(f"{path or 'the input'}: {key!r} names both a column of that name and a field inside "
                             f"column {head!r}; rename one of them in the file")
        return frame
    head, *path = key.split(".")
    if head not in frame.columns:
        return frame
    expr, dtype = pl.col(head), frame.schema[head]
    if dtype == pl.String:  # a column of mixed kinds (`records_to_frame`): its objects are JSON text
        values = field_of_tagged(frame[head].to_list(), path)
        return frame if values is None else frame.with_columns(pl.Series(key, values, dtype=pl.String))
    for name in path:
        if not isinstance(dtype, pl.Struct) or name not in {f.name for f in dtype.fields}:
            return frame  # not a path of this frame: `find_column` says which columns there are
        expr, dtype = expr.struct.field(name), next(f.dtype for f in dtype.fields if f.name == name)
    return escape_tag_lookalikes(frame.with_columns(expr.alias(key)), [key])


def fields_on_path(frame: pl.DataFrame, key: str) -> str:
    """``; 'metadata' holds source, id``: for a dotted ``key`` that names no column, the fields of the deepest
    object along its path (a slime newcomer's `--id-key metadata.ID` listed the top-level columns only); empty
    where the path reaches no object, or one without fields."""
    head, *rest = key.split(".")
    dtype, reached = frame.schema.get(head), head
    if not rest or not isinstance(dtype, pl.Struct):
        return ""
    for name in rest[:-1]:
        inner = next((f.dtype for f in dtype.fields if f.name == name), None)
        if not isinstance(inner, pl.Struct):
            break
        dtype, reached = inner, f"{reached}.{name}"
    names = [f.name for f in dtype.fields]
    if not names:
        return ""
    return f"; {reached!r} holds {', '.join(names[:FIELDS_SHOWN])}" + (", ..." if len(names) > FIELDS_SHOWN else "")


def path_reaches_field(frame: pl.DataFrame, key: str) -> bool:
    """Whether the dotted ``key`` names a field that is there, inside struct columns (``extra_info.question`` of a
    verl dataset), where the option that named it reads top-level columns only (`--prompt-key`)."""
    head, *rest = key.split(".")
    dtype = frame.schema.get(head)
    for name in rest:
        if not isinstance(dtype, pl.Struct):
            return False
        dtype = next((f.dtype for f in dtype.fields if f.name == name), None)
        if dtype is None:
            return False
    return bool(rest)


def field_inside(frame: pl.DataFrame, key: str, flag: str) -> str:
    """``; 'metadata' holds a field 'source': --source-key metadata.source``: for an undotted ``key`` that names no
    column but a field of an object column (a slime newcomer's `--source-key source`, where slime keeps the source
    in its `metadata` object, was listed the top-level columns only); empty where no object holds such a field."""
    if "." in key:
        return ""
    holders = [c for c, dtype in frame.schema.items() if not c.startswith("\x00") and isinstance(dtype, pl.Struct)
               and key in {f.name for f in dtype.fields}]
    return f"; {holders[0]!r} holds a field {key!r}: give {flag} {holders[0]}.{key}" if holders else ""


def candidates_inside(frame: pl.DataFrame, candidates: Sequence[str], flag: str | None) -> str:
    """``; 'metadata' holds a field 'prompt_id': give --id-key metadata.prompt_id``: where no column has one of
    ``candidates``' names but an object column holds a field of one (a slime newcomer's length log kept the id in
    each sample's `metadata`, and was told only the top-level columns); empty for an option that reads top-level
    columns only (`--prompt-key`), or where no object holds one."""
    if not flag or "prompt" in flag:
        return ""
    for name in candidates:
        hint = field_inside(frame, name, flag)
        if hint:
            return hint
    return ""
