"""A dataset's own rows, read and written as the user's file holds them: `asp export` and `asp probe` write
them back (in the schedule's order, or the probe's choice), so neither may retype a value or lose a field.

`read_rows` gives the rows of every input concatenated, numbered as `asp_cli.reading.read_prompts` numbers them;
`write_rows` writes a frame atomically and deterministically as Parquet (with a metadata document) or JSON lines
(a JSON file's rows as their own text). Nothing here prints.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli.reading.tables import SOURCE_JSON


def read_rows(datasets: Sequence[Path], *, on_bad_row: str = "skip", report: Any = None,
              heights: list[int] | None = None, mixed: list[str] | None = None, sources: bool = False,
              untag: bool = True) -> pl.DataFrame:
    """The datasets' own rows, concatenated, with ``\x00row``: the 0-based row over all inputs, as
    `asp_cli.reading.read_prompts` numbers them (so ``row`` of a prompt frame or a schedule finds its row here).

    Lines that are not JSON objects are skipped and counted in ``report`` (a `reading.ReadReport`) when
    ``on_bad_row`` is ``"skip"``; without a report they raise. ``heights``, given, gets each file's row count.
    A column whose values mix JSON kinds (text in one row, a number or a list in another, or kinds that differ
    inside lists and objects) cannot keep its kinds in one output column: its values are given as text (JSON text
    for the non-text ones; with ``untag`` false still behind the reader's tag, for `verl_layout.to_verl`), and
    ``mixed``, given, gets its name. With ``sources``, the rows of JSON files also carry
    `reading.tables.SOURCE_JSON`, their own text, which `write_rows` writes to JSON lines as it is.
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
    if mixed is not None:
        mixed.extend(tagged)
    tagged = [c for c, hit in zip(texts, hits, strict=True) if hit["j"] or hit["t"]]
    return frame.with_columns([untagged(pl.col(c)) for c in tagged]) if tagged and untag else frame


def mixed_kinds_warning(columns: list[str]) -> str:
    """What `read_rows` did with columns of mixed JSON kinds, in one line."""
    shown = ", ".join(repr(c) for c in columns[:3]) + (f" and {len(columns) - 3} more" if len(columns) > 3 else "")
    return (f"column{'s' if len(columns) > 1 else ''} {shown} mix{'' if len(columns) > 1 else 'es'} JSON kinds "
            "(text in some rows, numbers or lists in others, or kinds that differ inside lists): Parquet holds one "
            "kind per column, so they are written as text, the other kinds as their JSON text; JSON lines "
            "(--format jsonl) keep every row's own values")


def write_rows(frame: pl.DataFrame, output: Path, format: str, document: dict[str, Any],  # noqa: A002
               key: bytes, *, replace: bool, added: Sequence[str] = ()) -> None:
    """Write rows atomically and deterministically (fixed Parquet writer options, ordered JSON lines); Parquet
    files carry ``document`` as JSON under ``key`` in their metadata. An existing ``output`` is replaced only with
    ``replace`` (`asp_cli.output.atomic_path`). JSON lines write a row that carries its source text
    (`reading.tables.SOURCE_JSON`) as that text with the ``added`` columns appended, so its values keep their own
    kinds and fields (a chat list beside text prompts, a message's content parts); other rows as the frame holds
    them."""
    from asp_cli.output import atomic_path

    if format == "jsonl":
        with atomic_path(output, replace=replace) as tmp:
            if SOURCE_JSON in frame.columns:
                _write_sourced_jsonl(frame, tmp, added)
            else:
                frame.write_ndjson(tmp)
        return
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


_JSONL_CHUNK_ROWS = 65_536  # rows turned into text at a time: an export's memory stays that of its frame


def _write_sourced_jsonl(frame: pl.DataFrame, path: Path, added: Sequence[str]) -> None:
    """JSON lines of ``frame``: a row's `SOURCE_JSON` text (an object) with the ``added`` columns' members put
    before its closing brace; a row without one (from a Parquet or CSV dataset) as Polars writes its columns."""
    own = [c for c in frame.columns if c != SOURCE_JSON]
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for start in range(0, frame.height, _JSONL_CHUNK_ROWS):
            chunk = frame.slice(start, _JSONL_CHUNK_ROWS)
            sources = chunk[SOURCE_JSON].to_list()
            plain = chunk.select(own).write_ndjson().split("\n") if None in sources else None
            members = [line[1:-1] for line in chunk.select(added).write_ndjson().split("\n")] if added else None
            for i, source in enumerate(sources):
                if source is None:
                    line = plain[i]  # type: ignore[index]
                elif members is None or not members[i]:
                    line = source
                else:
                    body = source[:-1].rstrip()  # the object without its closing brace
                    line = f"{body}{'' if body.endswith('{') else ','}{members[i]}}}"
                out.write(line + "\n")


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
