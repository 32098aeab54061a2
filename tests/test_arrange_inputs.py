"""asp_cli.arrange.inputs: the pure core's frames (`asp_cli.arrange.pipeline.arrange`) checked before they are
arranged. A library newcomer's round: NaN, null or negative predictions were arranged as -9223372036854775808
tokens, repeated or null prompt ids made a schedule no reader takes, and a pandas frame, a missing column or
settings of None were an AttributeError or a ColumnNotFoundError from inside."""

from __future__ import annotations

import re

import polars as pl
import pytest

from asp_cli import InputError, ScheduleSettings, SettingsError
from asp_cli.arrange.pipeline import arrange
from asp_cli.predict.prediction import predict_lengths

PROMPTS = pl.DataFrame({"prompt_id": [f"p{i}" for i in range(12)],
                        "prompt_text": [("what is %d + %d? " % (i, i)) * (i + 1) for i in range(12)]})


class FakePandas:
    """What matters of a pandas frame here: not a Polars one (pandas is no dependency of asp's)."""

    def to_parquet(self, path):  # noqa: ARG002
        raise AssertionError("not called")


@pytest.fixture(scope="module")
def frames():
    predictions, _ = predict_lengths(PROMPTS)
    return PROMPTS.with_row_index("row"), predictions


def test_good_frames_arrange_as_before(frames):
    prompts, predictions = frames
    made = arrange(prompts, predictions, ScheduleSettings(seed=3))
    assert made.height == 12 and made.equals(arrange(prompts, predictions, ScheduleSettings(seed=3)))
    floats = predictions.with_columns(pl.col("predicted_mean_tokens").cast(pl.Float64))  # a model's own means
    assert arrange(prompts, floats, ScheduleSettings(seed=3)).height == 12


@pytest.mark.parametrize("edit, words", [
    (lambda p, q: (p, q.with_columns(pl.lit(float("nan")).alias("predicted_tokens"))),
     "predictions: column 'predicted_tokens' must be a token count of 0 or more for every prompt: prompt id 'p0' has "
     "NaN"),
    (lambda p, q: (p, q.with_columns(pl.lit(None, pl.Int64).alias("predicted_max_tokens"))),
     "predictions: column 'predicted_max_tokens' must be a token count of 0 or more for every prompt: prompt id 'p0' "
     "has null"),
    (lambda p, q: (p, q.with_columns((-pl.col("prompt_tokens")).alias("prompt_tokens"))),
     "predictions: column 'prompt_tokens' must be a token count of 0 or more for every prompt: prompt id 'p0' has -"),
    (lambda p, q: (p, q.with_columns(pl.lit("many").alias("predicted_mean_tokens"))),
     "predictions: column 'predicted_mean_tokens' holds str, not numbers"),
    (lambda p, q: (p, q.drop("prediction_source")),
     "predictions has no column 'prediction_source' (it needs prompt_tokens, predicted_max_tokens, "
     "predicted_mean_tokens, predicted_tokens, prediction_source: as asp_cli.predict.prediction.predict_lengths "
     "makes them)"),
    (lambda p, q: (p.drop("row"), q),
     "prompts has no column 'row' (it needs row, prompt_id: each prompt's 0-based position in its input, and its "
     "id; prompts.with_row_index('row') numbers them)"),
    (lambda p, q: (p.with_columns(pl.lit("p1").alias("prompt_id")), q),
     "prompts: prompt id 'p1' appears 12 times; each prompt needs an id of its own"),
    (lambda p, q: (p.with_columns(pl.when(pl.col("row") == 4).then(None).otherwise(pl.col("prompt_id"))
                                  .alias("prompt_id")), q),
     "prompts: column 'prompt_id' is null in row 4; every prompt needs an id"),
    (lambda p, q: (p.head(5), q), "prompts has 5 rows and predictions 12: give one prediction per prompt, in the "
                                  "prompts' order"),
])
def test_bad_frames_are_input_errors_naming_the_column_and_prompt(frames, edit, words):
    prompts, predictions = edit(*frames)
    with pytest.raises(InputError, match=re.escape(words)):
        arrange(prompts, predictions, ScheduleSettings())


def test_the_wrong_kinds_of_argument_are_settings_errors(frames):
    prompts, predictions = frames
    with pytest.raises(SettingsError, match=re.escape("settings must be a ScheduleSettings (asp_cli.ScheduleSettings("
                                                      "instances=8, ...)), not NoneType")):
        arrange(prompts, predictions, None)
    with pytest.raises(SettingsError, match=re.escape("prompts must be a Polars DataFrame, not FakePandas: "
                                                      "polars.from_pandas(frame) converts a pandas one")):
        arrange(FakePandas(), predictions, ScheduleSettings())
