"""Training data for the length model: prompts and their observed lengths, read as `asp schedule` reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError
from asp_cli.reading import ReadOptions, ReadReport, extract_lengths, extract_prompts, file_format, find_column, read_table

# `asp predictor fit` and `eval` name the length column --length-key.
OBSERVATIONS_READ = ReadOptions(length_flag="--length-key")


@dataclass
class Observations:
    """Prompts and their observed lengths, as the predictor learns from them."""

    prompts: pl.DataFrame  # read_prompts columns, one row per prompt
    lengths: pl.DataFrame  # read_lengths columns, one row per sample
    skipped_rows: int = 0
    columns_used: dict[str, dict[str, str]] = field(default_factory=dict)


def read_observations(
    paths: Sequence[Path],
    read: ReadOptions = OBSERVATIONS_READ,
) -> Observations:
    """Read files of prompts with observed lengths: one row per sample, or one row per prompt with a list.

    Columns are detected as in ``asp schedule`` (``columns.PROMPT_KEYS``, ``ID_KEYS``, ``LENGTH_KEYS``);
    ``read.prompt_key``, ``read.id_key`` and ``read.length_key`` override them. Rows of one prompt repeat its text; the first one is kept.

    Raises
    ------
    InputError
        Unreadable files, missing columns, bad lengths, or one id with two different prompt texts.
    """
    report = ReadReport()
    prompt_parts, length_parts = [], []
    offset = 0
    for path in paths:
        path = Path(path)
        fmt, _ = file_format(path)
        frame = read_table(path, on_bad_row=read.on_bad_row, report=report)
        id_col = find_column(frame, C.ID_KEYS, read.id_key, what="id", flag="--id-key", path=path, required=False)
        if id_col is None:
            id_col = "\x00row_id"
            frame = frame.with_columns((pl.int_range(0, pl.len(), dtype=pl.Int64) + offset).alias(id_col))
        length_col = find_column(frame, C.LENGTH_KEYS, read.length_key, what="response length",
                                 flag=read.length_flag, path=path)
        assert length_col is not None
        # The same detection as `asp schedule`.
        prompts = extract_prompts(frame, path, fmt, read.prompt_key, id_col, read.on_bad_row, report, offset)
        lengths = extract_lengths(frame, path, fmt, id_col, length_col, read.on_bad_row, report)
        offset += frame.height
        prompt_parts.append(prompts)
        length_parts.append(lengths)
    if not prompt_parts:
        raise InputError("no input files given; name at least one file of prompts with observed lengths")
    prompts = pl.concat(prompt_parts, how="vertical")
    conflicting = prompts.group_by(C.PROMPT_ID).agg(pl.col(C.PROMPT_TEXT).n_unique().alias("n")).filter(pl.col("n") > 1)
    if conflicting.height:
        raise InputError(
            f"prompt id {conflicting[C.PROMPT_ID].sort()[0]!r} has {conflicting['n'].max()} different prompt "
            f"texts ({conflicting.height} ids do); give each prompt one id, or pass --id-key"
        )
    prompts = prompts.unique(C.PROMPT_ID, keep="first", maintain_order=True)
    lengths = pl.concat(length_parts, how="vertical")
    return Observations(prompts, lengths, report.skipped_rows, report.columns_used)
