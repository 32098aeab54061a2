import polars as pl
import pytest

from _predictor_data import make_data
from asp_cli import columns as C
from asp_cli.predict import model as P
from asp_cli.errors import PredictorError, SettingsError
from asp_cli.predict.prediction import predict_lengths


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    prompts, lengths = make_data()
    path = tmp_path_factory.mktemp("m") / "m.skops"
    P.save(P.LengthPredictor(min_df=1).fit(prompts, lengths), path)
    return path


def test_contract_with_the_default_model():
    prompts, _ = make_data(n_prompts=30)
    frame, info = predict_lengths(prompts, max_response_tokens=400, samples_per_prompt=8)
    assert frame.height == prompts.height
    assert frame.schema[C.PREDICTED_MAX_TOKENS] == pl.Int64 and frame.schema[C.PREDICTION_SOURCE] == pl.String
    assert (frame[C.PREDICTED_MAX_TOKENS] <= 400).all() and (frame[C.PREDICTED_MEAN_TOKENS] >= 1).all()
    assert (frame[C.PREDICTED_MEAN_TOKENS] <= frame[C.PREDICTED_MAX_TOKENS]).all()
    assert (frame[C.PREDICTED_TOKENS] == frame[C.PREDICTED_MAX_TOKENS]).all()
    assert info.predictor_name == "default" and info.prompts_from_model == 30
    assert info.predictor_fingerprint.startswith("sha256:")


def test_plan_with_mean_and_group_size(model_file):
    prompts, _ = make_data(n_prompts=20)
    f1, _ = predict_lengths(prompts, predictor=model_file, samples_per_prompt=1, plan_with="mean")
    f16, _ = predict_lengths(prompts, predictor=model_file, samples_per_prompt=16)
    assert (f1[C.PREDICTED_TOKENS] == f1[C.PREDICTED_MEAN_TOKENS]).all()
    assert (f16[C.PREDICTED_MAX_TOKENS] > f1[C.PREDICTED_MAX_TOKENS]).all()


def test_history_marks_its_prompts(model_file):
    prompts, lengths = make_data(n_prompts=20)
    seen = lengths.filter(pl.col(C.PROMPT_ID).is_in(["p0", "p1"]))
    frame, info = predict_lengths(prompts, predictor=model_file, history=seen, history_fingerprint="h")
    assert frame[C.PREDICTION_SOURCE].to_list()[:3] == ["history", "history", "model"]
    assert info.prompts_from_history == 2 and info.history_fingerprint == "h"


def test_bad_settings_and_missing_model(tmp_path):
    prompts, _ = make_data(n_prompts=10)
    with pytest.raises(SettingsError):
        predict_lengths(prompts, plan_with="median")
    with pytest.raises(SettingsError):
        predict_lengths(prompts, samples_per_prompt=0)
    with pytest.raises(PredictorError):
        predict_lengths(prompts, predictor=tmp_path / "none.skops")


@pytest.mark.parametrize("prompts, error, words", [
    (lambda: pl.DataFrame({"prompt_id": ["a"], "question": ["what is 2+2?"]}), "InputError",
     "prompts has no column 'prompt_text' (it needs prompt_id, prompt_text: each prompt's id and its text, as "
     "asp_cli.reading.read_prompts reads them)"),
    (lambda: pl.DataFrame({"prompt_id": ["a", "b"], "prompt_text": ["what is 2+2?", None]}), "InputError",
     "prompts: column 'prompt_text' is not text in row 1 (prompt id 'b'); give every prompt its text"),
    (lambda: pl.DataFrame({"prompt_id": ["a"], "prompt_text": [5]}), "InputError",
     "prompts: column 'prompt_text' holds Int64, not text"),
    (lambda: {"prompt_id": ["a"], "prompt_text": ["hi"]}, "SettingsError",
     "prompts must be a Polars DataFrame, not dict"),
])
def test_a_python_user_s_prompt_frame_is_checked(prompts, error, words):
    """A library newcomer's round: a frame without `prompt_text` was a ColumnNotFoundError from inside, a null text
    an InvalidOperationError about casting NaN after NumPy's RuntimeWarnings, a dict an AttributeError."""
    import re

    import asp_cli

    with pytest.raises(getattr(asp_cli, error), match=re.escape(words)):
        predict_lengths(prompts())
