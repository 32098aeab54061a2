"""A dataset's own rows, read and written as the user's file holds them: `asp export` and `asp probe` write
them back (in the schedule's order, or the probe's choice), so neither may retype a value or lose a field.

`read_rows` gives the rows of every input concatenated, numbered as `asp_cli.reading.read_prompts` numbers them;
`write_rows` writes a frame atomically and deterministically as Parquet (with a metadata document) or JSON lines
(a JSON file's rows as their own text). Nothing here prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli.errors import InputError
from asp_cli.reading.tables import SOURCE_JSON


def read_rows(datasets: Sequence[Path], *, on_bad_row: str = "skip", report: Any = None,
              heights: list[int] | None = None, mixed: list[str] | None = None, sources: bool = False,
              untag: bool = True, differing: list[str] | None = None, as_text: list[str] | None = None,
              kinds: dict[str, list[str | None]] | None = None) -> pl.DataFrame:
    """The datasets' own rows, concatenated, with ``\x00row``: the 0-based row over all inputs, as
    `asp_cli.reading.read_prompts` numbers them (so ``row`` of a prompt frame or a schedule finds its row here).

    Lines that are not JSON objects are skipped and counted in ``report`` (a `reading.ReadReport`) when
    ``on_bad_row`` is ``"skip"``; without a report they raise. ``heights``, given, gets each file's row count.
    A column whose values mix JSON kinds (text in one row, a number or a list in another, or kinds that differ
    inside lists and objects) cannot keep its kinds in one output column: its values are given as text (JSON text
    for the non-text ones; with ``untag`` false still behind the reader's tag, for `verl_layout.to_verl`), and
    ``mixed``, given, gets its name. With ``sources``, the rows of JSON files also carry
    `reading.tables.SOURCE_JSON`, their own text, which `write_rows` writes to JSON lines as it is.
    A column that two files hold as different kinds (an object in one, text in the other, at any depth) is one of
    mixed kinds too (`kinds_across_files`), and ``differing``, given, gets a line naming the place and the files.
    ``as_text``, given, gets every column some of whose values the reader gave as their JSON text (values of mixed
    kinds, in one file or across files); a column that holds JSON text in the file itself (a Parquet dataset's
    metadata as JSON text) is not one of them: `object_fields` tells the two apart by it. ``kinds``, given, gets each
    such column's kind of value in each row, in JSON's words (`json_kinds`), which the text no longer tells.
    Concatenated as they were, an object became its values' text without its keys (an agent newcomer's
    ``reward_model.ground_truth`` ``{"target": [...]}`` became ``{["..."]}``), in silence.
    """
    from asp_cli.reading import read_table

    parts = []
    offset = 0
    for path in datasets:
        part = read_table(Path(path), on_bad_row=on_bad_row, report=report,  # type: ignore[arg-type]
                          source_json=sources)
        part = part.select([c for c in part.columns if not c.startswith("\x00") or c == SOURCE_JSON])
        parts.append(part.with_columns((pl.int_range(0, pl.len(), dtype=pl.Int64) + offset).alias("\x00row")))
        offset += part.height
        if heights is not None:
            heights.append(part.height)
    said: list[str] = []
    if len(parts) > 1:
        parts = kinds_across_files(parts, [Path(p).name for p in datasets], said, sources=sources)
        if differing is not None:
            differing.extend(said)
    frame = parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed")
    # `reading.tables` tags a non-text value in a column of mixed kinds; the tag is the reader's, not the data's.
    # A user's text that starts as a tag does is escaped (`json_records.TEXT_TAG`): given back as it is.
    from asp_cli.reading.json_records import JSON_TAG, TEXT_TAG
    from asp_cli.reading.json_records import untag as untagged

    texts = [c for c, t in frame.schema.items() if t == pl.String and not c.startswith("\x00")]
    hits = frame.select(pl.struct(pl.col(c).str.starts_with(JSON_TAG).any().alias("j"),
                                  pl.col(c).str.starts_with(TEXT_TAG).any().alias("t")).alias(c)
                        for c in texts).row(0) if texts else ()
    tagged = [c for c, hit in zip(texts, hits, strict=True) if hit["j"]]
    if as_text is not None:
        as_text.extend(tagged)
    if kinds is not None:
        kinds.update((c, json_kinds(frame[c].to_list())) for c in tagged)
    if mixed is not None:  # a column the files differ in is said by its own line (`differing`), not twice
        mixed.extend(c for c in tagged if not any(line.startswith((f"{c} ", f"{c}.", f"{c}[")) for line in said))
    tagged = [c for c, hit in zip(texts, hits, strict=True) if hit["j"] or hit["t"]]
    return frame.with_columns([untagged(pl.col(c)) for c in tagged]) if tagged and untag else frame


def json_kinds(values: list[str | None]) -> list[str | None]:
    """The kind of each value of a column of mixed kinds as the reader tags them: "text", "number", "true/false",
    "object" or "list" (None for a null)."""
    from asp_cli.reading.json_records import JSON_TAG

    def kind(value: str | None) -> str | None:
        if value is None or not value.startswith(JSON_TAG):
            return None if value is None else "text"
        first = value[len(JSON_TAG):len(JSON_TAG) + 1]
        return {"{": "object", "[": "list", "t": "true/false", "f": "true/false", "n": None}.get(first, "number")

    return [kind(v) for v in values]


def _kind(dtype: pl.DataType) -> str:
    """A column type as JSON names its kind."""
    return ("an object" if isinstance(dtype, pl.Struct) else "a list" if isinstance(dtype, (pl.List, pl.Array))
            else "text" if dtype == pl.String else "a boolean" if dtype == pl.Boolean
            else "a number" if dtype.is_numeric() else str(dtype))


def kind_conflict(a: pl.DataType, b: pl.DataType, path: str) -> tuple[str, str, str] | None:
    """The first place (``path`` and below) where two files' types of one column cannot share a column without a
    value changing (`pl.concat`'s relaxed supertype turns an object into text without its keys), with each side's
    kind; None where they can: equal types, a column of nulls, numbers of two widths, objects whose common fields
    can, lists whose elements can."""
    if a == b or a == pl.Null or b == pl.Null or (a.is_numeric() and b.is_numeric()):
        return None
    if isinstance(a, pl.Struct) and isinstance(b, pl.Struct):
        theirs = {f.name: f.dtype for f in b.fields}
        for field in a.fields:
            if field.name in theirs:
                found = kind_conflict(field.dtype, theirs[field.name], f"{path}.{field.name}")
                if found is not None:
                    return found
        return None
    if isinstance(a, pl.List) and isinstance(b, pl.List):
        return kind_conflict(a.inner, b.inner, f"{path}[]")
    return path, _kind(a), _kind(b)


def kinds_across_files(parts: list[pl.DataFrame], names: list[str], differing: list[str] | None = None, *,
                       sources: bool = False) -> list[pl.DataFrame]:
    """``parts`` (one frame per file, ``names`` the files') with each column that two of them hold as kinds that
    cannot share a column (`kind_conflict`) made one of mixed kinds, as `reading.tables` makes one inside a file:
    text stays text, every other value becomes its JSON text behind `json_records.JSON_TAG`. ``differing`` gets
    one line per such column, naming the place and the first two files that disagree there. With ``sources``
    (JSON lines out), a file's rows that carry no source text of their own (Parquet, CSV) get it, written from
    their columns before the change, so that each row keeps its own kinds there."""
    import json

    from asp_cli.reading.json_records import JSON_TAG, untag

    # Every earlier file's type of a column, not the first's alone: a first file of nulls there (or of objects
    # without the field) let text in the second and an object in the third through unseen (a review).
    seen: dict[str, list[tuple[pl.DataType, str]]] = {}
    conflicted: dict[str, str] = {}
    for part, name in zip(parts, names, strict=True):
        for column, dtype in part.schema.items():
            if column.startswith("\x00") or column in conflicted:
                continue
            for earlier, where in seen.get(column, []):
                found = kind_conflict(earlier, dtype, column)
                if found is not None:
                    place, theirs, mine = found
                    conflicted[column] = (f"{place} is {theirs} in {where} and {mine} in {name}: both are written "
                                          "as JSON text, which a trainer reading it as "
                                          f"{theirs if theirs != 'text' else mine} will not parse; give the files "
                                          "one kind there (verl refuses such a pair outright)")
                    break
            seen.setdefault(column, []).append((dtype, name))
    if not conflicted:
        return parts
    if differing is not None:
        differing.extend(conflicted.values())

    def as_json(value: Any) -> str | None:
        return None if value is None else JSON_TAG + json.dumps(value, ensure_ascii=False, default=str)

    def own_text(part: pl.DataFrame) -> pl.Series:
        columns = [c for c in part.columns if not c.startswith("\x00")]
        plain = part.select(untag(pl.col(c)) if part.schema[c] == pl.String else pl.col(c) for c in columns)
        return pl.Series(SOURCE_JSON, plain.write_ndjson().splitlines() if plain.height else [], dtype=pl.String)

    out = []
    for part in parts:
        if sources and SOURCE_JSON not in part.columns and any(c in part.columns for c in conflicted):
            part = part.with_columns(own_text(part))
        out.append(part.with_columns(pl.Series(c, [as_json(v) for v in part[c].to_list()], dtype=pl.String)
                                     for c in conflicted if c in part.columns and part.schema[c] != pl.String))
    return out


def mixed_kinds_warning(columns: list[str]) -> str:
    """What `read_rows` did with columns of mixed JSON kinds, in one line."""
    shown = ", ".join(repr(c) for c in columns[:3]) + (f" and {len(columns) - 3} more" if len(columns) > 3 else "")
    return (f"column{'s' if len(columns) > 1 else ''} {shown} mix{'' if len(columns) > 1 else 'es'} JSON kinds "
            "(text in some rows, numbers or lists in others, or kinds that differ inside lists): Parquet holds one "
            "kind per column, so they are written as text, the other kinds as their JSON text; JSON lines "
            "(--format jsonl) keep every row's own values")


def object_fields(frame: pl.DataFrame, name: str, where: str = "the dataset", as_text: Sequence[str] = ()) -> list[str]:
    """The fields of the object column ``name`` (none where the rows have no such column, or only nulls there):
    where `nest_columns` puts columns. A JSON dataset's objects whose fields differ in kind from row to row
    (``{"a": 1}`` beside ``{"a": "x"}``) are read as their JSON text: still objects where the rows carry their own
    text (`SOURCE_JSON`, for JSON lines, which keep each row's own; they were refused as not objects: a slime
    newcomer's round). Raises `InputError`, naming ``where`` and the first such row, where some row holds another
    kind of value there, or such objects are to go into one Parquet column: that one says to export JSON lines
    where ``name`` is one of ``as_text`` (`read_rows`: objects the reader gave as their text), not of a column of
    text that reads as JSON objects (a Parquet dataset's metadata as JSON text: JSON lines refuse it as well)."""
    if name not in frame.columns or frame.schema[name] == pl.Null:
        return []
    dtype = frame.schema[name]
    if isinstance(dtype, pl.Struct):
        return [f.name for f in dtype.fields]
    sources = frame[SOURCE_JSON].to_list() if SOURCE_JSON in frame.columns else [None] * frame.height
    fields: dict[str, None] = {}
    for at, (value, source) in enumerate(zip(frame[name].to_list(), sources)):
        if value is None:
            continue
        own = json.loads(source).get(name) if dtype == pl.String and source is not None else None
        if not isinstance(own, dict):
            row = int(frame["\x00row"][at] if "\x00row" in frame.columns else at) + 1
            # a JSON file's objects that differ in kind are read as their text: without the row's own text (a
            # Parquet output) they cannot be told from text, and one Parquet column cannot nest them
            mixed = source is None and name in as_text and _json_object(value) is not None
            raise InputError(f"{where}: row {row} (counting from 1): {name!r} holds "
                             f"{_kind(dtype) if source is None or dtype != pl.String else _value_kind(own)}, not an "
                             "object, so asp's columns cannot go into it" + (
                                 " (a JSON file's objects whose fields differ in kind from row to row are read as "
                                 "their text: export them to JSON lines, an output ending .jsonl)" if mixed else "")
                             + "; name another field with --metadata-key")
        fields.update(dict.fromkeys(own))
    return list(fields)


def _value_kind(value: Any) -> str:
    """A JSON value's kind, as `_kind` names a column's."""
    return ("text" if isinstance(value, str) else "a boolean" if isinstance(value, bool) else "a number"
            if isinstance(value, (int, float)) else "a list" if isinstance(value, list) else "null")


def _json_object(text: str) -> dict | None:
    """The object a JSON text holds, else None."""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


# A dataset's column that waits under another name while asp's column of its name is nested (`nest_columns`).
SHADOWED = "\x00shadowed:"


def nest_columns(frame: pl.DataFrame, columns: Sequence[str], name: str) -> pl.DataFrame:
    """``frame`` with ``columns`` moved into the object column ``name``: each row's own object there (its fields
    first; a row without one, or with null, gets the moved fields alone), which keeps its place, or a new column
    at the end. slime keeps only the prompt, the label and this object of each row (``--metadata-key``).

    A column of the frame's own named as one moved in (a dataset's top-level ``prompt_id``) waits under its name
    after `SHADOWED` and gets its name back once the moved one is inside the object."""
    if frame.schema.get(name) == pl.String:  # objects of differing kinds, as their JSON text (`object_fields`): so
        # they stay, each with the moved fields inside (JSON lines write a row's own text; Parquet the text, warned)
        merged = [json.dumps({**(json.loads(text) if text is not None else {}), **moved}, ensure_ascii=False)
                  for text, moved in zip(frame[name].to_list(), frame.select(columns).to_dicts())]
        nested = frame.with_columns(pl.Series(name, merged, dtype=pl.String)).drop(columns)
    else:
        own = [pl.col(name).struct.field(f) for f in object_fields(frame, name)]
        nested = frame.with_columns(pl.struct([*own, *(pl.col(c) for c in columns)]).alias(name)).drop(columns)
    return nested.rename({c: c[len(SHADOWED):] for c in nested.columns if c.startswith(SHADOWED)})


def write_rows(frame: pl.DataFrame, output: Path, format: str, document: dict[str, Any],  # noqa: A002
               key: bytes, *, replace: bool, added: Sequence[str] = (), nest: tuple[str, Sequence[str]] | None = None,
               source: str = "the dataset") -> None:
    """Write rows atomically and deterministically (fixed Parquet writer options, ordered JSON lines); Parquet
    files carry ``document`` as JSON under ``key`` in their metadata. An existing ``output`` is replaced only with
    ``replace`` (`asp_cli.output.atomic_path`). JSON lines write a row that carries its source text
    (`reading.tables.SOURCE_JSON`) as that text with the ``added`` columns appended, so its values keep their own
    kinds and fields (a chat list beside text prompts, a message's content parts); other rows as the frame holds
    them. ``nest`` (an object's name and some of the ``added`` columns) writes those columns as fields of that
    object (`nest_columns`; in a row's own text, inside its object there, whose text is otherwise kept). Binary
    values (a multimodal dataset's images) refuse JSON lines, naming ``source`` (the input the rows came from)."""
    from asp_cli.output import atomic_path

    if format == "jsonl":
        binary = binary_fields(frame)
        if binary:  # Polars cannot write them as JSON (it panicked: "Writing BinaryView to JSON"), nor can JSON hold bytes
            raise InputError(f"{source}: {binary[0]} holds binary data (images or audio as bytes), which JSON lines cannot "
                             "hold; write Parquet (an output ending .parquet, or --format parquet / verl)")
        with atomic_path(output, replace=replace) as tmp:
            if SOURCE_JSON in frame.columns:
                _write_sourced_jsonl(frame, tmp, added, nest)
            else:
                (nest_columns(frame, nest[1], nest[0]) if nest else frame).write_ndjson(tmp)
        return
    if nest:
        frame = nest_columns(frame, nest[1], nest[0])
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = frame.drop(SOURCE_JSON, strict=False).to_arrow()
    table = table.cast(pa.schema([_narrow(f) for f in table.schema]))
    table = table.replace_schema_metadata(
        {key: json.dumps(document, sort_keys=True, separators=(",", ":"), default=str).encode()}
    )
    with atomic_path(output, replace=replace) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=3, use_dictionary=True,
                       write_statistics=True, row_group_size=1 << 20)


def binary_fields(frame: pl.DataFrame) -> list[str]:
    """The columns (or fields inside them, as ``images[].bytes``) that hold binary values, in the frame's order:
    a multimodal dataset's images, which no JSON line can hold. Rows written from their own JSON text hold none."""
    found: list[str] = []

    def visit(column: str, path: str, dtype: pl.DataType) -> None:
        if dtype == pl.Binary:
            found.append(f"column {column!r}" + (f" ({path})" if path != column else ""))
        elif isinstance(dtype, (pl.List, pl.Array)):
            visit(column, f"{path}[]", dtype.inner)
        elif isinstance(dtype, pl.Struct):
            for field in dtype.fields:
                visit(column, f"{path}.{field.name}", field.dtype)

    for name, dtype in frame.schema.items():
        if name != SOURCE_JSON:
            visit(name, name, dtype)
    return found


def non_finite_notes(frame: pl.DataFrame) -> list[str]:
    """What JSON lines lose of ``frame``: NaN and infinities in its number columns and the number fields inside
    them (lists, objects), which JSON has no value for and Polars writes as null (a Parquet dataset's NaN scores
    left `asp export --format jsonl` as nulls without a word: a hostile-input audit; `asp probe -o *.jsonl` said
    nothing either). Rows written from their own JSON text (`SOURCE_JSON`) keep theirs."""
    if SOURCE_JSON in frame.columns:
        frame = frame.filter(pl.col(SOURCE_JSON).is_null()).drop(SOURCE_JSON)
    found: list[tuple[str, str, pl.Expr]] = []

    def visit(column: str, path: str, expr: pl.Expr, dtype: pl.DataType) -> None:
        if dtype.is_float():
            found.append((column, path, (~expr.is_finite()).sum()))
        elif isinstance(dtype, pl.List):
            visit(column, f"{path}[]", expr.list.explode(), dtype.inner)
        elif isinstance(dtype, pl.Array):
            visit(column, f"{path}[]", expr.arr.explode(), dtype.inner)
        elif isinstance(dtype, pl.Struct):
            for inner in dtype.fields:
                visit(column, f"{path}.{inner.name}", expr.struct.field(inner.name), inner.dtype)

    for name, dtype in frame.schema.items():
        visit(name, name, pl.col(name), dtype)
    if not found or not frame.height:
        return []
    counts = frame.select(expr.alias(str(i)) for i, (_, _, expr) in enumerate(found)).row(0)
    return [f"column {column!r}" + (f" ({path})" if path != column else "")
            + f" holds {int(count):,} NaN or infinite values, which JSON cannot hold: written as null; write "
            "--format parquet to keep them" for (column, path, _), count in zip(found, counts, strict=True) if count]


_JSONL_CHUNK_ROWS = 65_536  # rows turned into text at a time: an export's memory stays that of its frame


def _write_sourced_jsonl(frame: pl.DataFrame, path: Path, added: Sequence[str],
                         nest: tuple[str, Sequence[str]] | None = None) -> None:
    """JSON lines of ``frame``: a row's `SOURCE_JSON` text (an object) with the ``added`` columns' members put
    before its closing brace, those ``nest`` names inside its object of that name (`_into_object`); a row without
    one (from a Parquet or CSV dataset) as Polars writes its columns."""
    own = [c for c in frame.columns if c != SOURCE_JSON]
    inside = list(nest[1]) if nest else []
    outside = [c for c in added if c not in inside]
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for start in range(0, frame.height, _JSONL_CHUNK_ROWS):
            chunk = frame.slice(start, _JSONL_CHUNK_ROWS)
            sources = chunk[SOURCE_JSON].to_list()
            plain = ((nest_columns(chunk.select(own), inside, nest[0]) if nest else chunk.select(own))
                     .write_ndjson().split("\n") if None in sources else None)
            members = [line[1:-1] for line in chunk.select(outside).write_ndjson().split("\n")] if outside else None
            nested = [line[1:-1] for line in chunk.select(inside).write_ndjson().split("\n")] if inside else None
            for i, source in enumerate(sources):
                if source is None:
                    out.write(plain[i] + "\n")  # type: ignore[index]
                    continue
                spaced = _SPACED.match(source) is not None
                line = (_into_object(source, nest[0], _spaced(nested[i]) if spaced else nested[i], spaced=spaced)
                        if nest and nested else source)
                if members is not None and members[i]:
                    body = line[:-1].rstrip()  # the object without its closing brace
                    comma = "" if body.endswith("{") else ", " if spaced else ","
                    line = f"{body}{comma}{_spaced(members[i]) if spaced else members[i]}}}"
                out.write(line + "\n")


_SPACE = re.compile(r"[ \t\n\r]*")
# A row written as Python's json.dumps writes by default (`{"a": 1, "b": 2}`: a blank after the first key's colon):
# the columns appended to it are written so too (they came compact after spaced fields: a newcomer round).
_SPACED = re.compile(r'[ \t\r]*\ufeff?[ \t\r]*\{[ \t\r]*"(?:[^"\\]|\\.)*"[ \t\r]*: ')


def _spaced(members: str) -> str:
    """Compact JSON members (``"a":1,"b":[2,3]``) as ``"a": 1, "b": [2, 3]``, values unchanged."""
    return json.dumps(json.loads(f"{{{members}}}"), ensure_ascii=False, separators=(", ", ": "))[1:-1]


def _into_object(text: str, name: str, members: str, *, spaced: bool = False) -> str:
    """A JSON object's text with ``members`` (``"a":1,"b":2``) put at the end of its top-level object ``name`` (the
    last, as JSON readers take a repeated name), which is made where it is missing or null; the rest of the text
    as it was. The members of the top level are walked with the standard library's own scanner, each value
    decoded only to find where it ends."""
    decoder = json.JSONDecoder()
    found = None
    i = _SPACE.match(text, _SPACE.match(text).end() + 1).end()  # past the opening brace
    while text[i] != "}":
        key, i = json.decoder.scanstring(text, i + 1)
        i = _SPACE.match(text, _SPACE.match(text, i).end() + 1).end()  # past the colon
        _, end = decoder.raw_decode(text, i)
        if key == name:
            found = (i, end)
        i = _SPACE.match(text, end).end()
        i = _SPACE.match(text, i + 1).end() if text[i] == "," else i
    comma, colon = (", ", ": ") if spaced else (",", ":")
    if found is None:
        body = text[:i].rstrip()
        return f"{body}{'' if body.endswith('{') else comma}{json.dumps(name)}{colon}{{{members}}}{text[i:]}"
    start, end = found
    value = text[start:end]
    if value == "null":
        return f"{text[:start]}{{{members}}}{text[end:]}"
    if not value.startswith("{"):
        raise InputError(f"a row's {name!r} is not an object, so asp's columns cannot go into it; name another "
                         "field with --metadata-key")
    inner = value[:-1].rstrip()
    return f"{text[:start]}{inner}{'' if inner.endswith('{') else comma}{members}}}{text[end:]}"


def _narrow(f: Any) -> Any:
    """Arrow large types to their plain forms, for the widest reader support (HF datasets, pandas)."""
    import pyarrow as pa

    def narrow(t: Any) -> Any:
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_large_binary(t):
            return pa.binary()
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(narrow(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(c.name, narrow(c.type)) for c in t])
        return t

    return pa.field(f.name, narrow(f.type), nullable=True)
