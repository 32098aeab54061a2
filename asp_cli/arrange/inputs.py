"""The pure core's frames checked before they are arranged (`asp_cli.arrange.pipeline.arrange`): a Python user's
own prompts and predictions, which no reader has checked as `asp schedule`'s files are.

NaN, null or negative predictions were arranged as -9223372036854775808 tokens, repeated or null prompt ids made a
schedule no reader takes, and a pandas frame, a missing column or settings of None were an AttributeError or a
ColumnNotFoundError from inside (a library newcomer's round).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, SettingsError, shown_id
from asp_cli.settings import ScheduleSettings

PROMPT_COLUMNS = (C.ROW, C.PROMPT_ID)
PREDICTION_COLUMNS = (C.PROMPT_TOKENS, C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PREDICTED_TOKENS,
                      C.PREDICTION_SOURCE)
TOKEN_COLUMNS = PREDICTION_COLUMNS[:4]


def check_frames(prompts: Any, predictions: Any, settings: Any) -> None:
    """Refuse what `arrange` cannot arrange.

    Raises
    ------
    SettingsError
        ``settings`` not a `ScheduleSettings`, or a frame not a Polars DataFrame.
    InputError
        A missing column, frames of different heights, a null row or id, a repeated id, or a token count that is
        null, NaN, infinite or negative.
    """
    if not isinstance(settings, ScheduleSettings):
        raise SettingsError(f"settings must be a ScheduleSettings (asp_cli.ScheduleSettings(instances=8, ...)), not "
                            f"{type(settings).__name__}")
    for name, frame in (("prompts", prompts), ("predictions", predictions)):
        if not isinstance(frame, pl.DataFrame):
            raise SettingsError(f"{name} must be a Polars DataFrame, not {type(frame).__name__}"
                                + (": polars.from_pandas(frame) converts a pandas one" if hasattr(frame, "to_parquet")
                                   else ""))
    _need(prompts, "prompts", PROMPT_COLUMNS, "each prompt's 0-based position in its input, and its id; "
                                              "prompts.with_row_index('row') numbers them")
    _need(predictions, "predictions", PREDICTION_COLUMNS, "as asp_cli.predict.prediction.predict_lengths makes them")
    if prompts.height != predictions.height:
        raise InputError(f"prompts has {prompts.height:,} rows and predictions {predictions.height:,}: give one "
                         "prediction per prompt, in the prompts' order")
    for column in PROMPT_COLUMNS:
        nulls = prompts[column].is_null()
        if nulls.any():
            index = int(nulls.arg_true()[0])
            raise InputError(f"prompts: column {column!r} is null in row {index}; every prompt needs "
                             + ("an id" if column == C.PROMPT_ID else "its position"))
    counts = prompts.group_by(C.PROMPT_ID).len().filter(pl.col("len") > 1)
    if counts.height:
        first = counts.join(prompts.select(C.PROMPT_ID).with_row_index("\x00at"), on=C.PROMPT_ID).sort("\x00at").row(0)
        raise InputError(f"prompts: prompt id {shown_id(first[0])} appears {first[1]:,} times; each prompt needs an "
                         "id of its own")
    ids = prompts[C.PROMPT_ID]
    for column in TOKEN_COLUMNS:
        values = predictions[column]
        if not values.dtype.is_numeric():
            raise InputError(f"predictions: column {column!r} holds {_kind(values)}, not numbers: give each prompt's "
                             "token count")
        as_float = values.cast(pl.Float64)
        bad = as_float.is_null() | as_float.is_nan() | as_float.is_infinite() | (as_float < 0)
        if bad.any():
            index = int(bad.arg_true()[0])
            raise InputError(f"predictions: column {column!r} must be a token count of 0 or more for every prompt: "
                             f"prompt id {shown_id(ids[index])} has {_shown(values[index])}")


def _need(frame: pl.DataFrame, name: str, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{name} has no column {missing[0]!r} (it needs {', '.join(columns)}: {what})")


def _kind(values: pl.Series) -> str:
    return "str" if values.dtype == pl.String else str(values.dtype)


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    return "NaN" if value != value else repr(value)
