"""Predictions made elsewhere: a file of per-prompt lengths instead of asp's own predictor.

For predictions computed on a cluster (`asp predictor predict` per shard, Ray Data, Spark) or by a model of
the user's own. The file holds one row per prompt: the id (found as in prompt files) and the predicted
lengths, under asp's names (`predicted_max_tokens`, `predicted_mean_tokens`, `predicted_tokens`, optionally
`prompt_tokens`), as `asp predictor predict` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, shown_columns, shown_id
from asp_cli.predict.prediction import PredictionInfo
from asp_cli.reading import file_format, find_column, read_table
from asp_cli.reading.json_records import untag
from asp_cli.reading.prompts import id_column
from asp_cli.reading.tables import each_file_once

LENGTH_COLUMNS = (C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PREDICTED_TOKENS)
# The prompts' own token counts (the --tokenizer's, else bytes / 4), for prediction files without ``prompt_tokens``
# and to check the counts of those with one; a streamed read keeps this column instead of the text.
TEXT_TOKENS = "\x00text_tokens"


def text_tokens(text: pl.Expr) -> pl.Expr:
    """Prompt tokens from the text alone: bytes / 4, at least 1."""
    return (text.str.len_bytes() / 4).ceil().clip(1).cast(pl.Int64)


def expand_prediction_paths(paths: Sequence[Path]) -> list[Path]:
    """Prediction files as given, a folder standing for its ``predictions-*.parquet`` (what ``--ray`` writes).

    Raises
    ------
    InputError
        A folder without such files, or a file given twice.
    """
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(path.glob("predictions-*.parquet"))
            if not found:
                raise InputError(f"{path}: a folder without predictions-*.parquet files; give the folder "
                                 "`asp predictor predict --ray -o` wrote, or name the files")
            out.extend(found)
        else:
            out.append(path)
    # A file named twice (or named and in a folder named): say so, not "has more than one prediction".
    each_file_once(out, "predictions file")
    return out


def predictions_from_files(
    prompts: pl.DataFrame,
    paths: Sequence[Path],
    *,
    fingerprint: str,
    max_response_tokens: int,
    plan_with: str = "max",
    counted_by: str = "their text's estimate (bytes / 4)",
) -> tuple[pl.DataFrame, PredictionInfo]:
    """Look up every prompt's predicted lengths in prediction files.

    A file with both ``predicted_max_tokens`` and ``predicted_mean_tokens`` gives both; a file with one of
    them, or only ``predicted_tokens``, plans with that one length as both the group maximum and the mean.
    Lengths are capped at ``max_response_tokens``; ``prompt_tokens`` comes from the file when present (and
    ``info.warnings`` says where it is far from the prompts' own: `prompt_tokens_warning`), else the prompts' own
    counts (their ``TEXT_TOKENS`` column where ``prompts`` has one, as `streamed` counts it with a --tokenizer, said
    by ``counted_by``; else bytes / 4).

    Returns
    -------
    (frame, info)
        As `prediction.predict_lengths`: aligned with ``prompts``; ``prediction_source`` is "file".

    Raises
    ------
    InputError
        A missing id or length column, a missing, negative or fractional length, an id given twice, or a
        prompt that no file predicts.
    """
    parts = [_read_one(Path(path)).with_columns(pl.lit(i, pl.Int32).alias("\x00file"))
             for i, path in enumerate(paths)]
    table = pl.concat(parts, how="diagonal_relaxed")
    del parts
    # Distinct 64-bit hashes of the ids first (a fraction of the memory of hashing the strings); the ids
    # themselves are compared only when two hashes agree.
    repeated = table.head(0)
    if table.select(pl.col(C.PROMPT_ID).hash(seed=0).n_unique()).item() < table.height:
        repeated = table.filter(pl.col(C.PROMPT_ID).is_duplicated())
    if repeated.height:
        first = repeated[C.PROMPT_ID][0]
        files = [str(paths[i]) for i in sorted(set(repeated.filter(pl.col(C.PROMPT_ID) == first)["\x00file"].to_list()))]
        raise InputError(f"{', '.join(files)}: prompt id {shown_id(first)} has more than one prediction; keep one "
                         "row per prompt")
    if TEXT_TOKENS not in prompts.columns:
        prompts = prompts.with_columns(text_tokens(pl.col(C.PROMPT_TEXT)).alias(TEXT_TOKENS))
    joined = prompts.select(C.PROMPT_ID, TEXT_TOKENS).join(table, on=C.PROMPT_ID, how="left",
                                                           maintain_order="left")
    del table
    missing = joined.filter(pl.col("\x00found").is_null())
    if missing.height:
        raise InputError(
            f"no prediction for {missing.height} prompt(s), for example prompt id {shown_id(missing[C.PROMPT_ID][0])}; "
            "predict every prompt (asp predictor predict) or drop --predictions"
        )
    cap = int(max_response_tokens)
    top = _first_present(joined, (C.PREDICTED_MAX_TOKENS, C.PREDICTED_TOKENS, C.PREDICTED_MEAN_TOKENS))
    mean = _first_present(joined, (C.PREDICTED_MEAN_TOKENS, C.PREDICTED_TOKENS, C.PREDICTED_MAX_TOKENS))
    top = np.clip(top, 1, cap)
    mean = np.minimum(np.clip(mean, 1, cap), top)
    warnings: list[str] = []
    if C.PROMPT_TOKENS in joined.columns and joined[C.PROMPT_TOKENS].null_count() == 0:
        prompt_tokens = joined[C.PROMPT_TOKENS].to_numpy().astype(np.int64)
        warnings = prompt_tokens_warning(joined, paths, counted_by)
    else:
        prompt_tokens = joined[TEXT_TOKENS].to_numpy()
    planned = top if plan_with == "max" else mean
    frame = pl.DataFrame(
        {
            C.PROMPT_TOKENS: pl.Series(np.maximum(prompt_tokens, 1), dtype=pl.Int64),
            C.PREDICTED_MAX_TOKENS: pl.Series(top, dtype=pl.Int64),
            C.PREDICTED_MEAN_TOKENS: pl.Series(mean, dtype=pl.Int64),
            C.PREDICTED_TOKENS: pl.Series(planned, dtype=pl.Int64),
            C.PREDICTION_SOURCE: pl.repeat("file", prompts.height, dtype=pl.String, eager=True),
        }
    )
    info = PredictionInfo(
        predictor_name="file:" + ",".join(Path(p).name for p in paths),
        predictor_fingerprint=fingerprint,
        prompts_from_model=0,
        details={"plan_with": plan_with, "source": "predictions file"},
        warnings=warnings,
    )
    return frame, info


# How far a predictions file's `prompt_tokens` may stray from the text's estimate (bytes / 4) before asp says so:
# a tokenizer's count stays within 2x of it on English, code and CJK text, and a chat template adds tens of tokens
# to a short prompt, so only counts more than `FAR_FACTOR` apart and `FAR_TOKENS` apart are said (a column of
# characters, of response lengths, a mean put in every row, another dataset's rows).
FAR_FACTOR = 2.0
FAR_TOKENS = 64


def prompt_tokens_warning(joined: pl.DataFrame, paths: Sequence[Path],
                          counted_by: str = "their text's estimate (bytes / 4)") -> list[str]:
    """One warning where the files' ``prompt_tokens`` of some prompts are far from the prompts' own counts
    (``counted_by`` says how they were counted: bytes / 4, or the --tokenizer's) (`FAR_FACTOR` and `FAR_TOKENS`
    apart): how many, and the one furthest off by its id, file and both counts.

    They replace the prompts' own counts in the schedule (its ``prompt_tokens`` column), which every later replay's
    prefill and the KV budget read, `asp simulate --compare`'s baselines included; said once, whatever the count.
    """
    given = joined[C.PROMPT_TOKENS].to_numpy().astype(np.int64)
    estimate = joined[TEXT_TOKENS].to_numpy().astype(np.int64)
    apart = np.abs(given - estimate)
    far = ((given > FAR_FACTOR * estimate) | (FAR_FACTOR * given < estimate)) & (apart > FAR_TOKENS)
    if not far.any():
        return []
    worst = int(np.flatnonzero(far)[np.argmax(apart[far])])  # the first of equals: rows in input order
    where = paths[int(joined["\x00file"][worst])]
    return [f"{int(far.sum()):,} of {joined.height:,} prompts' prompt_tokens in the predictions file"
            f"{'s' if len(paths) > 1 else ''} are over {FAR_FACTOR:.0f}x and {FAR_TOKENS} tokens from "
            f"{counted_by}, e.g. prompt id {shown_id(joined[C.PROMPT_ID][worst])} in {where}: "
            f"{int(given[worst]):,} against {int(estimate[worst]):,}; the schedule keeps the file's counts, which "
            "every replay's prefill reads (`asp simulate --compare`'s baselines too): give each prompt's own count "
            "(a tokenizer's, chat template included), or drop the column to count from the text"]


def _read_one(path: Path) -> pl.DataFrame:
    fmt, _ = file_format(path)
    frame = read_table(path)
    id_col = find_column(frame, C.ID_KEYS, None, what="prompt id", flag=None, path=path)
    present = [c for c in LENGTH_COLUMNS if c in frame.columns]
    if not present:
        raise InputError(
            f"{path}: no predicted length column (looked for {', '.join(LENGTH_COLUMNS)}); columns are: "
            f"{shown_columns(c for c in frame.columns if not c.startswith(chr(0)))}"
        )
    keep = [*present, *([C.PROMPT_TOKENS] if C.PROMPT_TOKENS in frame.columns else [])]
    ids, id_problem = id_column(frame, id_col)
    problems = frame.select(id_problem).to_series()
    if problems.is_not_null().any():
        index = int(problems.is_not_null().arg_true()[0])
        raise InputError(f"{_where(path, fmt, index, frame)}: column {id_col!r} (the id) {problems[index]}; ids are "
                         "text or integers: fix the row")
    out = frame.select(ids.alias(C.PROMPT_ID), *keep)
    for column in keep:
        dtype = out.schema[column]
        if not (dtype.is_numeric() or dtype in (pl.String, pl.Null)):
            raise InputError(f"{path}: column {column!r} holds {dtype}; give one whole token count per prompt")
        # A number among text (JSON lines of mixed kinds) is the reader's tagged JSON text: read as the number.
        values = (out.select(untag(pl.col(column))).to_series() if dtype == pl.String else out[column]).cast(
            pl.Float64, strict=False)
        bad = (values.is_null() | values.is_nan() | (values < 0) | (values > C.MAX_TOKEN_COUNT)
               | (values != values.floor()))
        if bad.any():
            index = int(bad.arg_true()[0])
            where = _where(path, fmt, index, frame)
            raise InputError(
                f"{where}: column {column!r} must be a whole token count from 0 to {C.MAX_TOKEN_COUNT:,} for prompt id "
                f"{out[C.PROMPT_ID][index]!r}"
            )
        out = out.with_columns(values.cast(pl.Int64).alias(column))
    return out.with_columns(pl.lit(True).alias("\x00found"))


def _where(path: Path, fmt: str, index: int, frame: pl.DataFrame) -> str:
    from asp_cli.reading.places import row_location

    return row_location(path, frame, index, fmt)


def _first_present(frame: pl.DataFrame, names: Sequence[str]) -> np.ndarray:
    """Per row, the first of ``names`` that the files give (files may differ in which columns they have)."""
    present = [pl.col(n) for n in names if n in frame.columns]
    return frame.select(pl.coalesce(present)).to_series().to_numpy().astype(np.int64)
