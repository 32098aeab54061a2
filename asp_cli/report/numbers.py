"""The numbers of a report as it writes them: rounded for deterministic output, quantiles, spreads and log-spaced
histograms (`asp_cli.report.facts` and `asp_cli.report.observed` share them)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

# The "long tail": prompts above this quantile of predicted length in their epoch.
TAIL_QUANTILE = 0.9
QUANTILE_POINTS = (0.0, 0.1, 0.5, 0.9, 1.0)


def rounded(value: float | None, digits: int = 4) -> float | None:
    """Round for output; non-finite values become None (JSON has no NaN)."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return round(value, digits) + 0.0  # + 0.0 turns -0.0 into 0.0


def quantiles(values: np.ndarray, digits: int = 1) -> dict[str, float | None]:
    """Named quantiles (p0, p10, p50, p90, p100) and the mean of ``values``."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {**{f"p{int(q * 100)}": None for q in QUANTILE_POINTS}, "mean": None}
    out = {f"p{int(q * 100)}": rounded(np.quantile(values, q), digits) for q in QUANTILE_POINTS}
    out["mean"] = rounded(values.mean(), digits)
    return out


def spread(values: np.ndarray) -> float | None:
    """(max - min) / mean: 0 for perfect balance; None when the mean is 0."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or values.mean() <= 0:
        return None
    return rounded((values.max() - values.min()) / values.mean())


def log_edges(low: float, high: float, bins: int = 24) -> np.ndarray:
    """Histogram edges spaced evenly in log length (lengths are long-tailed)."""
    low = max(float(low), 1.0)
    high = max(float(high), low * 1.01)
    return np.unique(np.round(np.geomspace(low, high * 1.0001, bins + 1)).astype(np.int64))


def histogram(values: np.ndarray, edges: np.ndarray) -> list[int]:
    counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
    return [int(c) for c in counts]


def rank(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share theirs), for a rank correlation."""
    return pl.Series(values).rank("average").to_numpy().astype(np.float64)
