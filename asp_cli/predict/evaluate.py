"""How good a length predictor is: ranking, tail recall, log error and calibration of the group maximum.

The metrics follow ``../shared/docs/mission.md`` ("Length prediction"): ranking (Kendall tau-b, Spearman),
recall of the longest 10% (did we find the tail?), mean absolute error of log length, and, for the group
maximum, calibration: the share of groups whose observed maximum stays within the prediction (coverage)
and the median ratio observed / predicted. Bucket accuracy is deliberately absent (it misleads).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C

TAIL_FRACTION = 0.10


def _round(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else round(float(value), 4)


def kendall_tau(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Kendall's tau-b (ties handled), NaN for fewer than 2 items or a constant input."""
    from scipy.stats import kendalltau

    if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(observed) == 0:
        return float("nan")
    return float(kendalltau(predicted, observed).statistic)


def spearman(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Spearman's rank correlation, NaN for fewer than 2 items or a constant input."""
    from scipy.stats import spearmanr

    if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(observed) == 0:
        return float("nan")
    return float(spearmanr(predicted, observed).statistic)


def tail_recall(predicted: np.ndarray, observed: np.ndarray, fraction: float = TAIL_FRACTION) -> float:
    """Share of the longest ``fraction`` of items (observed) that are also in the predicted longest ``fraction``.

    Ties in either ranking break by position, so the figure is deterministic.
    """
    n = len(observed)
    top = max(1, int(round(n * fraction)))
    if n < 2:
        return float("nan")
    true_top = set(np.argsort(-np.asarray(observed), kind="stable")[:top].tolist())
    pred_top = set(np.argsort(-np.asarray(predicted), kind="stable")[:top].tolist())
    return len(true_top & pred_top) / top


def mae_log(predicted: np.ndarray, observed: np.ndarray) -> float:
    """Mean absolute error of natural-log length (0.69 = off by a factor of 2 on average)."""
    p = np.log(np.maximum(np.asarray(predicted, dtype=np.float64), 1.0))
    o = np.log(np.maximum(np.asarray(observed, dtype=np.float64), 1.0))
    return float(np.mean(np.abs(p - o))) if len(p) else float("nan")


def calibration(predicted_max: np.ndarray, observed_max: np.ndarray) -> dict[str, Any]:
    """Calibration of the predicted group maximum: coverage, median ratio and a table by predicted quintile."""
    p = np.maximum(np.asarray(predicted_max, dtype=np.float64), 1.0)
    o = np.asarray(observed_max, dtype=np.float64)
    if not len(p):
        return {"coverage": None, "median_ratio": None, "by_quintile": []}
    order = np.argsort(p, kind="stable")
    rows = []
    for part in np.array_split(order, min(5, len(order))):
        rows.append({"predicted_mean": _round(p[part].mean()), "observed_mean": _round(o[part].mean()),
                     "prompts": int(len(part))})
    return {
        "coverage": _round(np.mean(o <= p)),
        "median_ratio": _round(np.median(o / p)),
        "by_quintile": rows,
    }


def score(predicted: np.ndarray, observed: np.ndarray) -> dict[str, float | None]:
    """Ranking, tail and log-error metrics of one prediction against one observation."""
    predicted = np.asarray(predicted, dtype=np.float64)
    observed = np.asarray(observed, dtype=np.float64)
    return {
        "prompts": int(len(observed)),
        "kendall_tau": _round(kendall_tau(predicted, observed)),
        "spearman": _round(spearman(predicted, observed)),
        "tail_recall": _round(tail_recall(predicted, observed)),
        "mae_log": _round(mae_log(predicted, observed)),
    }


def evaluate_frame(frame: pl.DataFrame) -> dict[str, Any]:
    """Metrics overall and per ``data_source`` for a frame of predictions and observations per prompt.

    ``frame`` needs ``predicted_max_tokens``, ``predicted_mean_tokens``, ``max_tokens`` and ``mean_tokens``
    (observed), ``prompt_tokens``, and optionally ``data_source``. The prompt-length baseline is scored
    next to the model.
    """

    def block(part: pl.DataFrame) -> dict[str, Any]:
        obs_max = part["max_tokens"].to_numpy()
        obs_mean = part["mean_tokens"].to_numpy()
        return {
            "prompts": part.height,
            "group_max": score(part[C.PREDICTED_MAX_TOKENS].to_numpy(), obs_max),
            "mean": score(part[C.PREDICTED_MEAN_TOKENS].to_numpy(), obs_mean),
            "baseline_prompt_length_group_max": score(part[C.PROMPT_TOKENS].to_numpy(), obs_max),
            "calibration_group_max": calibration(part[C.PREDICTED_MAX_TOKENS].to_numpy(), obs_max),
        }

    result: dict[str, Any] = {"overall": block(frame), "by_source": {}}
    if C.DATA_SOURCE in frame.columns and frame[C.DATA_SOURCE].n_unique() > 1:
        for source in sorted(frame[C.DATA_SOURCE].drop_nulls().unique().to_list()):
            result["by_source"][source] = block(frame.filter(pl.col(C.DATA_SOURCE) == source))
    return result


def evaluate(
    prompts: pl.DataFrame,
    lengths: pl.DataFrame,
    *,
    predictor: Path | None = None,
    history: pl.DataFrame | None = None,
    max_response_tokens: int | None = None,
    tokenizer: Path | None = None,
) -> dict[str, Any]:
    """Evaluate a model file (the default when None) on prompts with observed lengths.

    The group maximum is predicted for each prompt's own observed number of samples, so a prompt with 8
    observed samples is scored against the expected maximum of 8.
    """
    from asp_cli.predict.prediction import lengths_from_lognormal, predict_distribution
    from asp_cli.predict.targets import group_targets

    targets = group_targets(lengths, cap=max_response_tokens)
    data = prompts.join(targets, on=C.PROMPT_ID, how="inner", maintain_order="left")
    if data.height == 0:
        from asp_cli.errors import InputError

        raise InputError("no prompt has observed lengths; check that the ids of prompts and lengths match")
    cap = int(max_response_tokens) if max_response_tokens else 1 << 40
    mu, sigma, tokens, seen, model, fit = predict_distribution(
        data, predictor=predictor, history=history, max_response_tokens=cap, tokenizer=tokenizer
    )
    group_max, mean = lengths_from_lognormal(mu, sigma, data["samples"].to_numpy(), cap)
    frame = data.with_columns(
        pl.Series(C.PREDICTED_MAX_TOKENS, group_max),
        pl.Series(C.PREDICTED_MEAN_TOKENS, mean),
        pl.Series(C.PROMPT_TOKENS, tokens),
    )
    result = evaluate_frame(frame)
    result["samples"] = int(data["samples"].sum())
    result["prompts_from_history"] = int((seen > 0).sum())
    if fit is not None:
        result["history"] = fit.as_dict()
    return result


def format_report(result: dict[str, Any], title: str = "") -> str:
    """The evaluation as a short text table for people."""
    lines = [title] if title else []
    header = f"{'slice':<24}{'prompts':>8}{'tau max':>9}{'tau len':>9}{'rho max':>9}{'tail10':>8}{'mae log':>9}{'cover':>7}"
    lines.append(header)

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    def row(name: str, block: dict[str, Any]) -> str:
        g, b = block["group_max"], block["baseline_prompt_length_group_max"]
        return (f"{name[:23]:<24}{block['prompts']:>8}{fmt(g['kendall_tau']):>9}{fmt(b['kendall_tau']):>9}"
                f"{fmt(g['spearman']):>9}{fmt(g['tail_recall']):>8}{fmt(g['mae_log']):>9}"
                f"{fmt(block['calibration_group_max']['coverage']):>7}")

    lines.append(row("overall", result["overall"]))
    for source, block in result.get("by_source", {}).items():
        lines.append(row(str(source), block))
    lines.append("tau max: Kendall tau of the predicted vs observed group max; tau len: the same for the prompt's "
                 "own length, a baseline (pooled over sources, whose prompt and answer lengths differ in unrelated "
                 "ways, it can come out near 0 while each source's is not); cover: share of groups within the "
                 "predicted max")
    return "\n".join(lines)


def metrics_names() -> Sequence[str]:
    return ("kendall_tau", "spearman", "tail_recall", "mae_log")
