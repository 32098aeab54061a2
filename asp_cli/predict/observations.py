"""Training data for the length model: prompts and their observed lengths, read as `asp schedule` reads them.

Either one set of files holding both (a prompt and its length(s) per row), or prompt files and, apart, the
lengths observed for them (`asp observe`'s history), joined by prompt id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, counted, shown_id
from asp_cli.reading import ReadOptions, ReadReport, extract_lengths, extract_prompts, file_format, find_column, read_table
from asp_cli.reading.id_forms import near_misses

# `asp predictor fit` and `eval` name the length column --length-key.
OBSERVATIONS_READ = ReadOptions(length_flag="--length-key")


@dataclass
class Observations:
    """Prompts and their observed lengths, as the predictor learns from them."""

    prompts: pl.DataFrame  # read_prompts columns, one row per prompt
    lengths: pl.DataFrame  # read_lengths columns, one row per sample
    skipped_rows: int = 0
    columns_used: dict[str, dict[str, str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The prompt files' ids without an observed length (`join_lengths`): prompts, though not scored or learned from.
    unobserved_ids: pl.Series | None = None


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
        frame = read_table(path, on_bad_row=read.on_bad_row, report=report, text_columns=read.text_keys)
        id_col = find_column(frame, C.ID_KEYS, read.id_key, what="id", flag="--id-key", path=path, required=False)
        if id_col is None:
            id_col = "\x00row_id"
            frame = frame.with_columns((pl.int_range(0, pl.len(), dtype=pl.Int64) + offset).alias(id_col))
        length_col = find_column(frame, C.LENGTH_KEYS, read.length_key, what="response length",
                                 flag=read.length_flag, path=path)
        assert length_col is not None
        # The same detection as `asp schedule`.
        prompts = extract_prompts(frame, path, fmt, read.prompt_key, id_col, read.on_bad_row, report, offset,
                                  source_key=read.source_key, difficulty_key=read.difficulty_key)
        lengths = extract_lengths(frame, path, fmt, id_col, length_col, read.on_bad_row, report)
        if lengths.height and lengths[C.RESPONSE_TOKENS].max() == 0:  # E82, as for a --history: `asp predictor fit`
            # and `eval` read lengths beside their prompts here, and took a file of zeros (a hostile-input round)
            raise InputError(f"{path}: every one of the {lengths.height:,} lengths (column {length_col!r}) is 0: the "
                             "wrong column, or a rollout that wrote nothing; give response lengths in tokens, naming "
                             f"their column with {read.length_flag}")
        offset += frame.height
        prompt_parts.append(prompts)
        length_parts.append(lengths)
    if not prompt_parts:
        raise InputError("no input files given; name at least one file of prompts with observed lengths")
    prompts = pl.concat(prompt_parts, how="vertical")
    conflicting = prompts.group_by(C.PROMPT_ID).agg(pl.col(C.PROMPT_TEXT).n_unique().alias("n")).filter(pl.col("n") > 1)
    if conflicting.height:
        raise InputError(
            f"prompt id {shown_id(conflicting[C.PROMPT_ID].sort()[0])} has {conflicting['n'].max()} different prompt "
            f"texts{f' ({conflicting.height:,} ids do)' if conflicting.height > 1 else ''}; give each prompt one id, "
            "or pass --id-key"
        )
    prompts = prompts.unique(C.PROMPT_ID, keep="first", maintain_order=True)
    lengths = pl.concat(length_parts, how="vertical")
    return Observations(prompts, lengths, report.skipped_rows, report.columns_used)


def join_lengths(
    paths: Sequence[Path],
    lengths_paths: Sequence[Path],
    read: ReadOptions = OBSERVATIONS_READ,
    lengths_read: ReadOptions = ReadOptions(),
) -> Observations:
    """Prompt files and, apart, the lengths observed for them (as `asp observe` writes them), joined by id.

    The prompts are read as `asp schedule` reads them (``read``), the lengths as its ``--history``
    (``lengths_read``, whose flags the messages name). Only prompts with observed lengths are kept; length rows
    whose id is not a prompt are left out and counted in ``warnings``.

    Raises
    ------
    InputError
        Unreadable files, or lengths whose ids match none of the prompts.
    """
    from asp_cli.reading import read_lengths, read_prompts
    from asp_cli.reading.exported import with_export_id_key

    paths, lengths_paths = [Path(p) for p in paths], [Path(p) for p in lengths_paths]
    # The file the trainer was given (an `asp export`) is read by the schedule's ids it wrote, the logs' ids.
    prompts, report = read_prompts(paths, with_export_id_key(read, paths))
    lengths, length_report = read_lengths(lengths_paths, lengths_read)
    known = lengths[C.PROMPT_ID].is_in(prompts[C.PROMPT_ID].implode())
    matched = lengths.filter(known)
    names = ", ".join(p.name for p in lengths_paths)
    strays = lengths.filter(~known)
    near = near_misses(strays[C.PROMPT_ID], prompts[C.PROMPT_ID]) if strays.height else None
    alike = near.clause(f"in {names}", "among the prompts") if near else ""
    if matched.height == 0:
        raise InputError(
            f"no prompt id of {names} is among the {prompts.height:,} prompts of "
            f"{', '.join(p.name for p in paths)}: its ids look like {shown_id(lengths[C.PROMPT_ID][0])} and the prompts' "
            f"like {shown_id(prompts[C.PROMPT_ID][0])}"
            + (alike or f"; give the prompt files the rollouts were made from, or name the id columns with --id-key "
               f"and {lengths_read.length_id_flag}")
        )
    observed_ids = matched[C.PROMPT_ID].unique()
    # What reading the lengths noted (a history and its copy re-saved by Polars: every sample twice) is said, as
    # `asp schedule --history` and `asp report --lengths` say it (eval and fit dropped it: a hostile-input round).
    warnings = list(length_report.notes)
    if strays.height:
        warnings.append(
            f"{counted(strays.height, 'row')} of {names} ({counted(strays[C.PROMPT_ID].n_unique(), 'id')}, e.g. "
            f"{shown_id(strays[C.PROMPT_ID][0])}) name{'s a prompt' if strays.height == 1 else ' prompts'} the prompt "
            "files do not hold; left out" + alike
        )
    unobserved = prompts.height - observed_ids.len()
    if unobserved:
        warnings.append(f"{unobserved:,} of the {prompts.height:,} prompts {'has' if unobserved == 1 else 'have'} no "
                        f"observed length in {names}; "
                        f"used the other {observed_ids.len():,}")
    observed = pl.col(C.PROMPT_ID).is_in(observed_ids.implode())
    return Observations(prompts.filter(observed), matched, report.skipped_rows + length_report.skipped_rows,
                        report.columns_used, warnings, prompts.filter(~observed)[C.PROMPT_ID])
