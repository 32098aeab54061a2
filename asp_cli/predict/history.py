"""Combine lengths observed in earlier epochs with the model's predictions.

Observed lengths of the same prompt are the strongest signal (per-prompt mean length correlates ~0.9
between two runs on the AIME R1-distill data), so they dominate once a few samples are seen; prompts never
seen fall back to the model. Everything happens on log length, where lengths are close to normal:

1. **Scale.** The model may have been trained on another generator (the bundled default predicts the
   length scale of instruct models). With at least ``MIN_PROMPTS_FOR_SLOPE`` seen prompts the model's
   ``mu`` is recalibrated by weighted least squares, ``observed ~ a + b * mu`` (``b`` clipped to [0, 1.5]);
   with fewer, only the offset ``a`` (the weighted mean difference). The calibrated ``mu`` is applied to
   every prompt, seen or not, so history fixes the scale of unseen prompts too.
2. **Shrinkage.** For a prompt with ``k`` observed samples, ``mu = w * observed_mean + (1 - w) * mu_model``
   with ``w = k / (k + k0)``: the posterior mean of a normal-normal model (empirical Bayes, as in
   James-Stein shrinkage), where ``k0 = within-prompt variance / between-prompt residual variance``.
   ``k0`` is estimated from the history itself (clipped to [0.25, 16]); without enough data it is 1.
3. **Spread.** The within-prompt sd of log length is pooled over the history's prompts with two or more
   samples (else the model's); each prompt's own sd is shrunk towards it with ``SPREAD_PRIOR_DOF``
   pseudo-degrees of freedom.

The group maximum of N samples then follows from ``mu`` and the spread (see ``predictor``), whatever the
number of samples observed: 2 seen samples or 16 both give an estimate for N = 8. All epochs count
equally; samples that hit the cap count as ``CENSORED_FACTOR`` x the cap (see ``predictor``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.predict.targets import group_targets

MIN_PROMPTS_FOR_SLOPE = 30
DEFAULT_PRIOR_SAMPLES = 1.0
SPREAD_PRIOR_DOF = 4.0


@dataclass(frozen=True)
class HistoryFit:
    """How history was combined: the scale recalibration, the shrinkage strength and the pooled spread."""

    prompts_seen: int
    offset: float
    slope: float
    prior_samples: float
    log_spread: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "prompts_seen": self.prompts_seen,
            "offset": round(self.offset, 4),
            "slope": round(self.slope, 4),
            "prior_samples": round(self.prior_samples, 4),
            "log_spread": round(self.log_spread, 4),
        }


def combine_with_history(
    prompt_ids: pl.Series,
    mu_model: np.ndarray,
    sigma_model: np.ndarray,
    history: pl.DataFrame,
    *,
    cap: int | None = None,
    prior_samples: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, HistoryFit]:
    """Combine model log-normal parameters with observed lengths.

    Parameters
    ----------
    prompt_ids
        The prompts to predict, in order.
    mu_model, sigma_model
        The model's log-length mean and sd per prompt.
    history
        Observed samples (``read_lengths`` columns: ``prompt_id``, ``response_tokens``, ``truncated``).
    cap
        Lengths at or above it count as truncated.
    prior_samples
        ``k0`` of the shrinkage; estimated from the history when None.

    Returns
    -------
    (mu, sigma, samples_seen, fit)
        Combined parameters, the number of observed samples per prompt (0 = model only), and the fit.
    """
    targets = group_targets(history, cap=cap)
    joined = (
        pl.DataFrame({C.PROMPT_ID: prompt_ids.cast(pl.String)})
        .join(targets, on=C.PROMPT_ID, how="left", maintain_order="left")
    )
    k = joined["samples"].fill_null(0).to_numpy().astype(np.float64)
    observed = joined["log_mean"].fill_null(0.0).to_numpy()
    own_sd = joined["log_sd"].fill_null(np.nan).to_numpy()
    mu_model = np.asarray(mu_model, dtype=np.float64)
    sigma_model = np.asarray(sigma_model, dtype=np.float64)
    seen = k > 0

    multi = targets.filter(pl.col("samples") >= 2)
    if multi.height >= 5:
        dof = (multi["samples"] - 1).to_numpy().astype(np.float64)
        pooled = float(np.sqrt(np.sum(dof * multi["log_sd"].fill_null(0.0).to_numpy() ** 2) / np.sum(dof)))
    else:
        pooled = float(np.median(sigma_model)) if len(sigma_model) else 0.3

    offset, slope = 0.0, 1.0
    n_seen = int(seen.sum())
    weight = k[seen] / (k[seen] + 1.0)
    if n_seen:
        x, y = mu_model[seen], observed[seen]
        if n_seen >= MIN_PROMPTS_FOR_SLOPE and np.var(x) > 1e-9:
            xm, ym = np.average(x, weights=weight), np.average(y, weights=weight)
            slope = float(np.clip(np.average((x - xm) * (y - ym), weights=weight)
                                  / np.average((x - xm) ** 2, weights=weight), 0.0, 1.5))
            offset = float(ym - slope * xm)
        else:
            offset = float(np.average(y - x, weights=weight))
    mu_cal = offset + slope * mu_model

    if prior_samples is None:
        prior_samples = DEFAULT_PRIOR_SAMPLES
        if n_seen >= MIN_PROMPTS_FOR_SLOPE:
            residual = observed[seen] - mu_cal[seen]
            between = float(np.var(residual) - np.mean(pooled**2 / k[seen]))
            prior_samples = float(np.clip(pooled**2 / max(between, 1e-6), 0.25, 16.0))
    w = k / (k + prior_samples)
    mu = w * observed + (1.0 - w) * mu_cal

    sd_dof = np.maximum(k - 1.0, 0.0)
    own_var = np.where(np.isnan(own_sd), 0.0, own_sd) ** 2
    base = np.where(seen, pooled, sigma_model if multi.height < 5 else pooled)
    sigma = np.sqrt((sd_dof * own_var + SPREAD_PRIOR_DOF * base**2) / (sd_dof + SPREAD_PRIOR_DOF))
    fit = HistoryFit(n_seen, offset, slope, float(prior_samples), pooled)
    return mu, sigma, k.astype(np.int64), fit
