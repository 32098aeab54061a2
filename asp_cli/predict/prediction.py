"""Response-length prediction for the scheduler: model predictions, combined with observed history.

``predict_lengths`` is the one call ``asp schedule`` makes. It loads the predictor (the bundled default
when none is named), predicts each prompt's log-normal length distribution, folds in history when given
(see ``history``), and turns the distribution into the group maximum over ``samples_per_prompt`` samples
and the mean, capped at ``max_response_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.errors import PredictorError, shown_id, shown_name
from asp_cli.settings import MAX_SAMPLES_PER_PROMPT, check_count, check_plan_with

DEFAULT_MODEL = Path(__file__).parent.parent / "models" / "default.skops"

_cache: dict[tuple[str, int, int], object] = {}


@dataclass(frozen=True)
class PredictionInfo:
    """How the predictions were made, for the schedule's metadata and the summary."""

    predictor_name: str
    predictor_fingerprint: str
    history_fingerprint: str | None = None
    prompts_from_history: int = 0
    prompts_from_model: int = 0
    details: dict = field(default_factory=dict)
    # What is legal but probably a mistake in how the lengths were given (the schedule summary's warnings):
    # a predictions file's `prompt_tokens` far from the prompts' text (`predictions_file.prompt_tokens_warning`).
    warnings: list[str] = field(default_factory=list)


def lost_sources_warning(path: Path | None, sources: pl.Series, by_model: pl.Series | None = None) -> list[str]:
    """A warning where the user's own predictor (``path``; the bundled one knows sources few datasets name alike)
    learned per-source terms but no prompt here carries a source (``sources``): a model fitted with --source-key
    and used without it predicted without them, silently (a review's repro: 358 and 3,006 tokens became 1,036 and
    1,039). Where only some prompts carry no source or one it never saw, it says how many. ``by_model`` (aligned
    with ``sources``) marks the prompts the model predicted; the others took their lengths from history."""
    if by_model is not None:
        sources = sources.filter(by_model)
    if path is None or not len(sources):
        return []
    known = load_predictor(path).sources_
    if not known:
        return []
    names = ", ".join(repr(shown_name(s)) for s in known[:3]) + (", ..." if len(known) > 3 else "")
    if sources.null_count() == len(sources):
        return [f"{Path(path).name} learned a term per data source ({names}), but no prompt here carries one: it "
                "predicts without them; name the source column with --source-key, as when it was fitted"]
    here = sources.drop_nulls().unique()
    if not here.is_in(list(known)).any():  # every source here is one it never saw (another column named?)
        seen = ", ".join(repr(shown_name(s)) for s in here.sort().head(3).to_list()) + (", ..." if len(here) > 3 else "")
        return [f"{Path(path).name} learned a term per data source ({names}), and none of these prompts' sources "
                f"({seen}) is one of them: it predicts without them; name the column it was fitted with "
                "(--source-key)"]
    unknown = sources.is_null() | ~sources.is_in(list(known))
    n_unknown = int(unknown.sum())
    if n_unknown:  # some prompts only: a source added since the fit, or a file without the column
        strays = sources.filter(unknown).drop_nulls().unique().sort()
        seen = ", ".join(repr(shown_name(s)) for s in strays.head(3).to_list()) + (", ..." if len(strays) > 3 else "")
        what = f"a source it never saw ({seen})" if len(strays) else "no source"
        if len(strays) and sources.null_count():
            what += " or none"
        return [f"{n_unknown:,} of {len(sources):,} prompts carry {what}: {Path(path).name} learned a term per data "
                f"source ({names}) and predicts those prompts without one"]
    return []


def load_predictor(path: Path | None = None):
    """Load a model file (the bundled default when ``path`` is None), cached by path, size and mtime.

    Raises
    ------
    PredictorError, UnsafePredictorError
        Missing, damaged, newer-format or unsafe files.
    """
    from asp_cli.predict import model as P

    path = Path(path) if path is not None else DEFAULT_MODEL
    if path == DEFAULT_MODEL and not path.is_file():
        raise PredictorError(
            f"the bundled default model is missing ({path}); reinstall asp or rebuild it with "
            "scripts/train_default_predictor.py"
        )
    from asp_cli.predict.model_file import is_model_file, missing_model

    if not is_model_file(path):
        raise missing_model(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _cache:
        _cache.clear()
        _cache[key] = P.load(path)
    return _cache[key]


def _check_settings(samples_per_prompt: int, max_response_tokens: int, plan_with: str) -> None:
    # The same rules as `ScheduleSettings` (one function each), for callers of the library without one.
    check_count("--samples-per-prompt", samples_per_prompt, minimum=1, maximum=MAX_SAMPLES_PER_PROMPT)
    check_count("--max-response-tokens", max_response_tokens, minimum=1)
    check_plan_with(plan_with)


def lengths_from_lognormal(
    mu: np.ndarray, sigma: np.ndarray, samples: int | np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """Expected group maximum over ``samples`` draws and the mean of one draw, as whole tokens in [1, cap].

    The mean never exceeds the maximum (they meet at one sample per group).
    """
    from asp_cli.predict.targets import expected_max_z

    z = expected_max_z(samples)
    group_max = np.exp(np.minimum(mu + sigma * z, 60.0))
    mean = np.exp(np.minimum(mu + sigma**2 / 2.0, 60.0))
    group_max = np.clip(np.rint(group_max), 1, cap).astype(np.int64)
    mean = np.clip(np.rint(mean), 1, cap).astype(np.int64)
    return group_max, np.minimum(mean, group_max)


# Rows per feature pass: word features explode each prompt into words, so memory grows with the rows in
# one pass; a million prompts at a time keeps 10M-prompt runs far below the machine's memory.
_PREDICT_CHUNK_ROWS = 1_000_000


def _predict_log_in_chunks(model, prompts: pl.DataFrame, tokenizer: Path | None):
    """`LengthPredictor.predict_log` over slices of the prompts (it is row-wise, so the result is the same)."""
    if prompts.height <= _PREDICT_CHUNK_ROWS:
        return model.predict_log(prompts, tokenizer=tokenizer)
    parts = [model.predict_log(prompts.slice(start, _PREDICT_CHUNK_ROWS), tokenizer=tokenizer)
             for start in range(0, prompts.height, _PREDICT_CHUNK_ROWS)]
    return tuple(np.concatenate([part[i] for part in parts]) for i in range(3))


def predict_distribution(
    prompts: pl.DataFrame,
    *,
    predictor: Path | None = None,
    history: pl.DataFrame | None = None,
    max_response_tokens: int = 8192,
    tokenizer: Path | None = None,
):
    """The log-normal length parameters per prompt: ``(mu, sigma, prompt_tokens, samples_seen, model, fit)``."""
    model = load_predictor(predictor)
    mu, sigma, tokens = _predict_log_in_chunks(model, prompts, tokenizer)
    return with_history(prompts, mu, sigma, tokens, model, history, max_response_tokens=max_response_tokens,
                        predictor=predictor)


def check_finite(mu: np.ndarray, sigma: np.ndarray, prompt_ids: pl.Series, predictor: Path | None) -> None:
    """Refuse non-finite log-normal parameters: the load checks every value; this keeps any other path from
    writing garbage.

    Raises
    ------
    PredictorError
        Naming the model file and the first prompt id.
    """
    broken = ~(np.isfinite(mu) & np.isfinite(sigma))
    if broken.any():
        where = predictor if predictor is not None else DEFAULT_MODEL
        raise PredictorError(
            f"{where}: the model predicts a non-finite length for prompt id {shown_id(prompt_ids[int(np.argmax(broken))])}; "
            "the model file is damaged, refit it with `asp predictor fit`"
        )


def with_history(prompts: pl.DataFrame, mu: np.ndarray, sigma: np.ndarray, tokens: np.ndarray, model,
                 history: pl.DataFrame | None, *, max_response_tokens: int, predictor: Path | None = None):
    """`predict_distribution`'s result from the model's parameters: history folded in when given.

    ``prompts`` needs ``prompt_id`` (and ``data_source``, ``difficulty`` when present), not the text: the
    history correction is pooled over all prompts, so it runs once the model has seen every batch.
    ``predictor`` names the model file in errors.
    """
    from asp_cli.predict.history import combine_with_history

    check_finite(mu, sigma, prompts[C.PROMPT_ID], predictor)
    seen = np.zeros(prompts.height, dtype=np.int64)
    fit = None
    if history is not None and history.height and prompts.height:
        mu, sigma, seen, fit = combine_with_history(
            prompts[C.PROMPT_ID], mu, sigma, history, cap=max_response_tokens,
            data_source=prompts[C.DATA_SOURCE] if C.DATA_SOURCE in prompts.columns else None,
            difficulty=prompts[C.DIFFICULTY] if C.DIFFICULTY in prompts.columns else None,
        )
    return mu, sigma, tokens, seen, model, fit


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

    Parameters
    ----------
    prompts
        ``read_prompts`` frame (``prompt_id``, ``prompt_text``; ``n_messages``, ``data_source``,
        ``difficulty`` used when present).
    predictor
        A model file from ``asp predictor fit``; None for the bundled default.
    history
        Observed samples (``read_lengths`` frame); they override the model per prompt, weighted by
        the number of samples seen (see ``history``).
    samples_per_prompt
        N, the GRPO group size: ``predicted_max_tokens`` is the expected maximum of N samples.
    max_response_tokens
        The generation cap; every length is clipped to it.
    plan_with
        "max" or "mean": which one becomes ``predicted_tokens``.

    Returns
    -------
    (frame, info)
        ``frame`` is aligned with ``prompts`` (same height and order) with Int64 ``prompt_tokens``,
        ``predicted_max_tokens``, ``predicted_mean_tokens``, ``predicted_tokens`` and String
        ``prediction_source`` ("history" or "model").

    Raises
    ------
    SettingsError
        Bad N, cap or plan_with, or ``prompts`` not a Polars frame.
    InputError
        ``prompts`` without an id or text column, or with a prompt whose text is missing.
    PredictorError, UnsafePredictorError
        The model file cannot be used.
    """
    _check_settings(samples_per_prompt, max_response_tokens, plan_with)
    _check_prompts(prompts)
    distribution = predict_distribution(
        prompts, predictor=predictor, history=history, max_response_tokens=max_response_tokens,
        tokenizer=tokenizer,
    )
    return lengths_from_distribution(distribution, predictor=predictor, history_fingerprint=history_fingerprint,
                                     samples_per_prompt=samples_per_prompt, max_response_tokens=max_response_tokens,
                                     plan_with=plan_with)


def _check_prompts(prompts: object) -> None:
    """A Python user's own prompt frame, which no reader has checked: one without ``prompt_text`` was a
    ColumnNotFoundError from inside, a null text an InvalidOperationError about NaN (a library newcomer's round)."""
    from asp_cli.errors import InputError, SettingsError

    if not isinstance(prompts, pl.DataFrame):
        raise SettingsError(f"prompts must be a Polars DataFrame, not {type(prompts).__name__}"
                            + (": polars.from_pandas(frame) converts a pandas one" if hasattr(prompts, "to_parquet")
                               else ""))
    for column in (C.PROMPT_ID, C.PROMPT_TEXT):
        if column not in prompts.columns:
            raise InputError(f"prompts has no column {column!r} (it needs {C.PROMPT_ID}, {C.PROMPT_TEXT}: each "
                             "prompt's id and its text, as asp_cli.reading.read_prompts reads them)")
    text = prompts[C.PROMPT_TEXT]
    if text.dtype not in (pl.String, pl.Null):
        raise InputError(f"prompts: column {C.PROMPT_TEXT!r} holds {text.dtype}, not text")
    if text.null_count():
        index = int(text.is_null().arg_true()[0])
        raise InputError(f"prompts: column {C.PROMPT_TEXT!r} is not text in row {index} (prompt id "
                         f"{shown_id(prompts[C.PROMPT_ID][index])}); give every prompt its text")


def lengths_from_distribution(
    distribution: tuple,
    *,
    predictor: Path | None,
    history_fingerprint: str | None,
    samples_per_prompt: int,
    max_response_tokens: int,
    plan_with: str,
) -> tuple[pl.DataFrame, PredictionInfo]:
    """`predict_lengths`' frame and info from a `predict_distribution` result (the model is not run again)."""
    from asp_cli.fingerprint import file_fingerprint

    mu, sigma, tokens, seen, model, fit = distribution
    frame = lengths_frame(mu, sigma, tokens, seen, samples_per_prompt=samples_per_prompt,
                          max_response_tokens=max_response_tokens, plan_with=plan_with)
    path = Path(predictor) if predictor is not None else DEFAULT_MODEL
    from_history = int((seen > 0).sum())
    details = {"samples_per_prompt": int(samples_per_prompt), "plan_with": plan_with,
               "log_spread": round(float(model.log_spread_), 4)}
    if fit is not None:
        details["history"] = fit.as_dict()
    info = PredictionInfo(
        predictor_name="default" if predictor is None else path.name,
        predictor_fingerprint=file_fingerprint(path),
        history_fingerprint=history_fingerprint,
        prompts_from_history=from_history,
        prompts_from_model=mu.size - from_history,
        details=details,
    )
    return frame, info


def lengths_frame(mu: np.ndarray, sigma: np.ndarray, tokens: np.ndarray, seen: np.ndarray, *,
                  samples_per_prompt: int, max_response_tokens: int, plan_with: str) -> pl.DataFrame:
    """`predict_lengths`' frame from the log-normal parameters: row-wise, so a shard's frame is its rows of the whole."""
    group_max, mean = lengths_from_lognormal(mu, sigma, int(samples_per_prompt), int(max_response_tokens))
    planned = group_max if plan_with == "max" else mean
    return pl.DataFrame(
        {
            C.PROMPT_TOKENS: pl.Series(tokens, dtype=pl.Int64),
            C.PREDICTED_MAX_TOKENS: pl.Series(group_max, dtype=pl.Int64),
            C.PREDICTED_MEAN_TOKENS: pl.Series(mean, dtype=pl.Int64),
            C.PREDICTED_TOKENS: pl.Series(planned, dtype=pl.Int64),
        }
    ).with_columns(
        pl.when(pl.Series(seen > 0)).then(pl.lit("history")).otherwise(pl.lit("model")).alias(C.PREDICTION_SOURCE)
    )


def quantile_tokens(mu: np.ndarray, sigma: np.ndarray, quantile: float, cap: int) -> np.ndarray:
    """The ``quantile`` of one sample's log-normal length, as whole tokens in [1, cap]."""
    z = NormalDist().inv_cdf(quantile)
    return np.clip(np.rint(np.exp(np.minimum(mu + z * sigma, 60.0))), 1, cap).astype(np.int64)
