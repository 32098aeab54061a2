"""Reading user files into Polars frames: raw tables, prompts, and observed lengths.

Formats are JSONL (``.jsonl``/``.ndjson``), JSON arrays (``.json``), Parquet and CSV/TSV, optionally gzipped
(``.gz``). `tables` reads a file into its own columns (CSV through `csv_text`, UTF-8 checked by
`text_checks`), `prompts` finds each row's prompt, id and metadata, `lengths` each observed sample's length;
`options` holds the reading options, validated once. Nothing here prints: skipped rows are counted in the
returned `ReadReport`.

The names below load on first use, so importing `asp_cli.reading.options` (as the command line does for its
defaults) does not import Polars.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "DEFAULT_READ": "options",
    "ON_BAD_ROW": "options",
    "OnBadRow": "options",
    "ReadOptions": "options",
    "ReadReport": "tables",
    "file_format": "tables",
    "find_column": "tables",
    "read_table": "tables",
    "extract_prompts": "prompts",
    "read_prompts": "prompts",
    "extract_lengths": "lengths",
    "read_lengths": "lengths",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'asp_cli.reading' has no attribute {name!r}")
    return getattr(import_module(f"asp_cli.reading.{_WHERE[name]}"), name)
