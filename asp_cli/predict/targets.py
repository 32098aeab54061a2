"""What observed lengths say per prompt, and the statistics the model, history and prediction share.

A GRPO group costs as much as its longest sample: `expected_max_z` gives the expected maximum of N standard
normals, so a log-normal prediction ``N(mu, sigma^2)`` of one sample's log length becomes the group maximum
``exp(mu + sigma * e_N)``. `group_targets` summarises observed samples per prompt; a sample that hit the
generation cap is only known to be at least the cap and enters the log statistics as ``CENSORED_FACTOR`` x its
length (see `asp_cli.predict.model`).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import polars as pl

from asp_cli import columns as C

# The mean excess over a threshold near the group's upper decile for a log-normal with sigma 0.3: a fixed,
# documented imputation for capped samples, not a Tobit fit.
CENSORED_FACTOR = 1.25

_GRID = np.linspace(-8.0, 8.0, 4001)
_PDF = np.exp(-_GRID**2 / 2.0) / np.sqrt(2.0 * np.pi)
_CDF = np.array([NormalDist().cdf(x) for x in _GRID])


def expected_max_z(samples: int | np.ndarray) -> np.ndarray:
    """Expected maximum of N standard normals: the integral of x * N * phi(x) * Phi(x)^(N-1), on a grid."""
    n = np.maximum(np.asarray(samples, dtype=np.int64), 1)
    unique, where = np.unique(n, return_inverse=True)
    step = _GRID[1] - _GRID[0]
    values = np.array([np.sum(_GRID * k * _PDF * _CDF ** (k - 1)) * step for k in unique])
    return values[where].reshape(n.shape)


def group_targets(lengths: pl.DataFrame, *, cap: int | None = None) -> pl.DataFrame:
    """Per-prompt summaries of observed lengths: samples, mean and sd of log length, max and mean tokens.

    Truncated samples (flag, or length >= ``cap``) enter the log statistics as ``CENSORED_FACTOR`` x length.
    """
    tokens = pl.col(C.RESPONSE_TOKENS).cast(pl.Float64).clip(1.0)
    censored = pl.col(C.TRUNCATED).fill_null(False)
    if cap is not None:
        censored = censored | (pl.col(C.RESPONSE_TOKENS) >= cap)
    log_len = pl.when(censored).then((tokens * CENSORED_FACTOR).log()).otherwise(tokens.log())
    return (
        lengths.with_columns(log_len.alias("\x00log"), censored.alias("\x00cens"))
        .group_by(C.PROMPT_ID, maintain_order=True)
        .agg(
            pl.len().alias("samples"),
            pl.col("\x00log").mean().alias("log_mean"),
            pl.col("\x00log").std(ddof=1).alias("log_sd"),
            pl.col(C.RESPONSE_TOKENS).max().alias("max_tokens"),
            pl.col(C.RESPONSE_TOKENS).mean().alias("mean_tokens"),
            pl.col("\x00cens").sum().alias("censored"),
        )
    )
