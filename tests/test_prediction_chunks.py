"""Prediction in row chunks (bounded memory at 10M prompts) gives the same numbers as one pass."""

from pathlib import Path

import numpy as np

import asp_cli.predict.prediction as prediction
from asp_cli.reading import read_prompts

from util import SAMPLE_PROMPTS


def test_chunked_prediction_matches_one_pass(monkeypatch):
    prompts, _ = read_prompts([Path(SAMPLE_PROMPTS)])
    whole, _ = prediction.predict_lengths(prompts)
    monkeypatch.setattr(prediction, "_PREDICT_CHUNK_ROWS", 333)
    chunked, _ = prediction.predict_lengths(prompts)
    assert chunked.equals(whole)
    assert np.all(whole["predicted_tokens"].to_numpy() >= 1)
