"""Response-length prediction for the scheduler: model predictions, combined with observed history.

INTERIM VERSION: a prompt-length heuristic so the pipeline runs end to end; the predictor work (issue 3)
replaces the body of `predict_lengths` with the bundled scikit-learn model. The signature is the contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from . import columns as C


@dataclass(frozen=True)
class PredictionInfo:
    """How the predictions were made, for the schedule's metadata and the summary."""

    predictor_name: str
    predictor_fingerprint: str
    history_fingerprint: str | None = None
    prompts_from_history: int = 0
    prompts_from_model: int = 0
    details: dict = field(default_factory=dict)


def predict_lengths(
    prompts: pl.DataFrame,
    *,
    predictor: Path | None = None,
    history: pl.DataFrame | None = None,
    history_fingerprint: str | None = None,
    samples_per_prompt: int = 8,
    max_response_tokens: int = 8192,
    plan_with: str = "max",
    tokenizer: Path | None = None,
) -> tuple[pl.DataFrame, PredictionInfo]:
    """Predict each prompt's response length.

    Returns a frame aligned with ``prompts`` (same height and order) with ``prompt_tokens``,
    ``predicted_max_tokens`` (the group maximum over ``samples_per_prompt`` samples), ``predicted_mean_tokens``,
    ``predicted_tokens`` (what the scheduler plans with: the maximum or the mean, per ``plan_with``) and
    ``prediction_source`` ("history" or "model"), all lengths capped at ``max_response_tokens``.
    """
    cap = max_response_tokens
    prompt_tokens = (pl.col(C.PROMPT_TEXT).str.len_bytes() / 4).ceil().cast(pl.Int64).clip(1)
    mean = (prompt_tokens * 3 + 100).clip(1, cap)
    frame = prompts.select(
        prompt_tokens.alias(C.PROMPT_TOKENS),
        mean.cast(pl.Int64).alias(C.PREDICTED_MEAN_TOKENS),
        (mean * 1.5).clip(1, cap).cast(pl.Int64).alias(C.PREDICTED_MAX_TOKENS),
    )
    planned = C.PREDICTED_MAX_TOKENS if plan_with == "max" else C.PREDICTED_MEAN_TOKENS
    frame = frame.with_columns(
        pl.col(planned).alias(C.PREDICTED_TOKENS), pl.lit("model").alias(C.PREDICTION_SOURCE)
    )
    return frame, PredictionInfo("interim-heuristic", "none", history_fingerprint, 0, prompts.height)
