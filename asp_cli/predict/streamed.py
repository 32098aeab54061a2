"""Read prompt files and predict their lengths a batch at a time: what `asp schedule` runs.

The predictor is row-wise, so it runs on each batch of the streamed read (`asp_cli.reading.stream`) and only
its outputs are kept: per prompt the row, id, metadata and three numbers, not the text. The history
correction is pooled over all prompts, so it runs once every batch has been predicted. The result is the
same, to the bit, as reading every file whole and predicting once (`predict_lengths`, `predictions_from_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli.predict.prediction import (
    _check_settings,
    lengths_from_distribution,
    load_predictor,
    with_history,
)
from asp_cli.reading.options import DEFAULT_READ, ReadOptions

_MU, _SIGMA, _TOKENS = "\x00mu", "\x00sigma", "\x00tokens"


def read_and_predict(
    inputs: Sequence[Path],
    read: ReadOptions = DEFAULT_READ,
    *,
    predictor: Path | None = None,
    predictions: Sequence[Path] = (),
    predictions_fingerprint: str | None = None,
    history: pl.DataFrame | None = None,
    history_fingerprint: str | None = None,
    samples_per_prompt: int = 8,
    max_response_tokens: int = 8192,
    plan_with: str = "max",
    batch_bytes: int | None = None,
    with_distribution: bool = False,
) -> tuple:
    """Stream the prompt files, predicting each batch (or looking it up in ``predictions`` files).

    Returns
    -------
    (prompts, predicted, info, report)
        ``prompts``: ``row``, ``prompt_id``, ``data_source``, ``difficulty`` (no text); ``predicted`` and
        ``info`` as `predict_lengths` (or `predictions_from_files` with ``predictions``); ``report`` as
        `read_prompts`'. With ``with_distribution`` (not with ``predictions``), a fifth item: the
        `predict_distribution` tuple the lengths came from.

    Raises
    ------
    InputError, SettingsError, PredictorError
    """
    from asp_cli.reading.stream import BATCH_BYTES, read_prompts_streamed

    size = {"batch_bytes": batch_bytes or BATCH_BYTES}
    if predictions:
        from asp_cli.predict.features import prompt_token_counts
        from asp_cli.predict.predictions_file import TEXT_TOKENS, predictions_from_files

        def own_counts(batch: pl.DataFrame) -> pl.DataFrame:
            # The prompts' own counts where the file has none: the --tokenizer's, as the predictor's path counts
            # them (before 2026-12-08 a predictions file without `prompt_tokens` was counted at bytes / 4 whatever
            # --tokenizer said), else bytes / 4.
            return pl.DataFrame({TEXT_TOKENS: prompt_token_counts(batch, read.tokenizer)},
                                schema={TEXT_TOKENS: pl.Int64})

        prompts, report = read_prompts_streamed(inputs, read, keep=own_counts, **size)
        predicted, info = predictions_from_files(
            prompts, predictions, fingerprint=predictions_fingerprint or "",
            max_response_tokens=max_response_tokens, plan_with=plan_with,
            counted_by="the tokenizer's count" if read.tokenizer is not None else "their text's estimate (bytes / 4)")
        return prompts.drop(TEXT_TOKENS), predicted, info, report
    _check_settings(samples_per_prompt, max_response_tokens, plan_with)
    model = load_predictor(predictor)

    def keep(batch: pl.DataFrame) -> pl.DataFrame:
        mu, sigma, tokens = model.predict_log(batch, tokenizer=read.tokenizer)
        return pl.DataFrame({_MU: mu, _SIGMA: sigma, _TOKENS: tokens}, schema={
            _MU: pl.Float64, _SIGMA: pl.Float64, _TOKENS: pl.Int64})

    prompts, report = read_prompts_streamed(inputs, read, keep=keep, **size)
    mu, sigma, tokens = (prompts[name].to_numpy().astype(dtype) for name, dtype in
                         ((_MU, np.float64), (_SIGMA, np.float64), (_TOKENS, np.int64)))
    prompts = prompts.drop(_MU, _SIGMA, _TOKENS)
    distribution = with_history(prompts, mu, sigma, tokens, model, history, max_response_tokens=max_response_tokens,
                                predictor=predictor)
    predicted, info = lengths_from_distribution(
        distribution, predictor=predictor, history_fingerprint=history_fingerprint,
        samples_per_prompt=samples_per_prompt, max_response_tokens=max_response_tokens, plan_with=plan_with)
    if with_distribution:
        return prompts, predicted, info, report, distribution
    return prompts, predicted, info, report
