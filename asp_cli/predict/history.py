"""Combine lengths observed in earlier epochs (or in a probe) with the model's predictions.

Observed lengths of the same prompt are the strongest signal (per-prompt mean length correlates ~0.9
between two runs on the AIME R1-distill data), so they dominate once a few samples are seen. The prompts the
history does not cover learn from it too: the model was trained on other generators, and what it misses most
is the scale of *this* policy per kind of prompt (a reasoning model writes 10-50x more than a chat model on the
same problem). Everything happens on log length, where lengths are close to normal.

The model, for a sample j of prompt i in group g (a ``data_source``, and within it a ``difficulty`` level
where the prompts carry one)::

    y_ij = mu_i + delta_g + u_i + e_ij,    u_i ~ N(0, tau^2),    e_ij ~ N(0, s^2)

``mu_i`` is the model's prediction, ``delta_g`` the group's correction, ``u_i`` what the model gets wrong about
this prompt beyond its group, ``e_ij`` sampling noise. The estimator:

1. **Spread** ``s``: the within-prompt sd of log length, pooled over the covered prompts with two or more
   samples (at least ``MIN_SPREAD_PROMPTS`` of them; else the model's sigma), per source shrunk towards the
   all-source value with ``SOURCE_SPREAD_PRIOR_DOF`` pseudo-degrees of freedom. It becomes the sigma of the
   prompts the history does not cover, so "the sigma is corrected where prompts have several samples".
2. **Group corrections** ``delta``, partially pooled (a normal-normal hierarchy, empirical Bayes): the global
   term ``delta_0`` gets a vague ``N(0, GLOBAL_PRIOR_SD^2)`` prior (the model); each source's
   ``delta_s ~ N(delta_0, omega_1^2)``; each (source, difficulty) cell's ``delta_c ~ N(delta_s, omega_2^2)``.
   A group's own estimate ``theta_g`` (variance ``v_g``) becomes ``delta_parent + B (theta_g - delta_parent)``
   with ``B = omega^2 / (omega^2 + v_g)``: a group with few observations stays near its parent, one with many
   keeps its own value, and a group without observations gets its parent's (a source never seen gets the
   global term). The between-group variances ``omega^2`` are estimated from the data by the
   DerSimonian-Laird moment estimator (DerSimonian and Laird 1986, the random-effects meta-analysis
   estimator: groups are "studies" with an estimate and a known variance), truncated at 0. This is the
   Efron-Morris / James-Stein idea applied to group means: with one group only, nothing is learned about
   ``omega``, and the one source's correction is the global one (said so in ``notes``).
3. **Censoring.** ``theta_g`` is the maximum-likelihood location of the group's residuals ``y_ij - mu_i``
   under a censored normal (a Tobit model, Tobin 1958): a sample that hit the cap says only that its residual
   is at least ``log(cap) - mu_i``. Samples are weighted so that a prompt counts ``1 / (tau^2 + s^2 / k_i)``
   in all (the generalised-least-squares weight of its mean), and ``v_g`` is the inverse Fisher information.
   When every sample of a group is censored the likelihood has no maximum: the correction is then the mean
   censoring point, a **lower bound**, never shrunk below it, and flagged.
4. **Monotone within a source.** The correction is one additive shift of log length per group and one
   positive slope ``b`` of the model's deviation from the mean of its finest group with a correction of its
   own (the source, or its difficulty level where Cochran's test finds the levels apart), shrunk towards 1
   and kept in ``SLOPE_RANGE``; so it never reorders the prompts of a source (of a level, where the levels
   differ), and the sigma of a source's uncovered prompts is one value, so the expected maximum
   ``exp(mu + sigma * e_N)`` keeps their order too. (The old global recalibration ``observed ~ a + b * mu``,
   ``b`` free, gave a history of random lengths ``b`` near 0: every prediction flattened to one value.)
   The groups' estimates are weighed with ``tau^2`` measured around the sources' corrections, floored at
   ``s^2 / 16`` (`measured_tau2` in `combine_with_history`), and a difficulty level gets its own correction
   only past Cochran's test (`_between_variance`).
5. **Covered prompts** keep their own observations, combined with the corrected prior ``mu_i + delta_g``:
   ``mu = w * observed_mean + (1 - w) * (mu_i + delta_g)`` with ``w = k / (k + k0)``, the normal-normal
   posterior mean, ``k0 = s^2 / tau^2`` (the between-prompt residual variance ``tau^2`` is estimated from the
   history after the group corrections, with at least ``MIN_PROMPTS_FOR_PRIOR`` covered prompts; ``k0`` is
   clipped to ``PRIOR_SAMPLES_RANGE``, and is 1 with fewer prompts). A prompt with censored samples gets the
   exact posterior mean of the same model with the censored likelihood, by integration on a grid. Its own sd
   is shrunk towards its source's spread with ``SPREAD_PRIOR_DOF`` pseudo-degrees of freedom.

The group maximum of N samples then follows from ``mu`` and the spread (see ``predictor``), whatever the
number of samples observed. All epochs count equally; the per-prompt spread treats a capped sample as
``CENSORED_FACTOR`` x the cap (see ``targets``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.errors import shown_name
from asp_cli.predict.targets import group_targets

MIN_PROMPTS_FOR_PRIOR = 30
# The difficulty levels of a source get corrections of their own only where they differ beyond chance: the
# heterogeneity statistic Q of the levels' estimates is above this quantile of its chi-square (`_fit_groups`;
# 95% and 99% still let a history of random lengths reorder AIME: `_between_variance`).
CELL_HETEROGENEITY_QUANTILE = 0.999
# The slope of the model's within-group deviations is fitted with this many covered prompts, shrunk towards 1
# (the model taken at its word) with this prior sd, and kept positive (so it never reorders a group).
MIN_PROMPTS_FOR_SLOPE = 10
SLOPE_PRIOR_SD = 0.5
SLOPE_RANGE = (0.1, 2.0)
DEFAULT_PRIOR_SAMPLES = 1.0
PRIOR_SAMPLES_RANGE = (0.25, 16.0)
SPREAD_PRIOR_DOF = 4.0
SOURCE_SPREAD_PRIOR_DOF = 8.0
MIN_SPREAD_PROMPTS = 5
# The least spread the history may set: identical lengths (greedy decoding, a fake server) would otherwise make
# every weight infinite. 0.05 is a 5% length difference between two samples of one prompt.
MIN_LOG_SPREAD = 0.05
# A priori the model's scale may be off by a factor of e^2 (7.4x) either way; this matters only for a history
# of one or two prompts (with ten prompts the global term is within 2% of its own estimate).
GLOBAL_PRIOR_SD = 2.0
# A source with more distinct difficulty values than this is binned into DIFFICULTY_BINS quantile bins.
MAX_DIFFICULTY_LEVELS = 16
DIFFICULTY_BINS = 8
_NEWTON_STEPS = 60
_GRID_POINTS = 801
_GRID_CHUNK = 20_000


@dataclass(frozen=True)
class SourceFit:
    """The correction fitted for one data source (``name`` None: prompts without a source)."""

    name: str | None
    prompts: int  # covered prompts of this source
    samples: int
    censored: int
    prompts_corrected: int  # the source's prompts the history does not cover
    log_shift: float
    lower_bound: bool
    log_spread: float
    fitted: str  # "own" (its observations, partially pooled) or "global" (none of its own)
    # Every sample at the cap: the least correction they prove (the mean censoring point); None otherwise.
    bound_log_shift: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "data_source": self.name,
            "prompts": self.prompts,
            "samples": self.samples,
            "censored": self.censored,
            "prompts_corrected": self.prompts_corrected,
            "factor": round(math.exp(self.log_shift), 4),
            "log_shift": round(self.log_shift, 4),
            "lower_bound": self.lower_bound,
            "log_spread": round(self.log_spread, 4),
            "fitted": self.fitted,
            **({"bound_factor": round(math.exp(self.bound_log_shift), 4)} if self.bound_log_shift is not None
               else {}),
        }


@dataclass(frozen=True)
class HistoryFit:
    """What the history taught the predictor: the corrections per source, the global term, the spread."""

    prompts_seen: int
    samples_seen: int = 0
    censored_samples: int = 0
    prior_samples: float = DEFAULT_PRIOR_SAMPLES
    log_spread: float = 0.3  # the pooled within-prompt sd used (the history's, or the model's)
    model_log_spread: float = 0.3
    spread_from_history: bool = False
    global_shift: float = 0.0
    global_lower_bound: bool = False
    between_source_sd: float | None = None
    between_difficulty_sd: float | None = None
    difficulty_groups: int = 0
    sources: tuple[SourceFit, ...] = ()
    notes: tuple[str, ...] = field(default=())
    slope: float = 1.0
    slope_se: float | None = None

    @property
    def lower_bound(self) -> bool:
        return self.global_lower_bound or any(s.lower_bound for s in self.sources)

    def as_dict(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "prompts_seen": self.prompts_seen,
            "samples_seen": self.samples_seen,
            "censored_samples": self.censored_samples,
            "prior_samples": round(self.prior_samples, 4),
            "spread": {"model": round(self.model_log_spread, 4),
                       "history": round(self.log_spread, 4) if self.spread_from_history else None},
            "global": {"factor": round(math.exp(self.global_shift), 4), "log_shift": round(self.global_shift, 4),
                       "lower_bound": self.global_lower_bound},
            "between_source_sd": rounded(self.between_source_sd),
            "between_difficulty_sd": rounded(self.between_difficulty_sd),
            "difficulty_groups": self.difficulty_groups,
            "slope": round(self.slope, 4),
            "slope_se": rounded(self.slope_se),
            "sources": [s.as_dict() for s in self.sources],
            "lower_bound": self.lower_bound,
            "notes": list(self.notes),
        }


def combine_with_history(
    prompt_ids: pl.Series,
    mu_model: np.ndarray,
    sigma_model: np.ndarray,
    history: pl.DataFrame,
    *,
    cap: int | None = None,
    prior_samples: float | None = None,
    data_source: pl.Series | np.ndarray | list | None = None,
    difficulty: pl.Series | np.ndarray | list | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, HistoryFit]:
    """Combine model log-normal parameters with observed lengths, correcting the prompts history misses.

    Parameters
    ----------
    prompt_ids
        The prompts to predict, in order.
    mu_model, sigma_model
        The model's log-length mean and sd per prompt.
    history
        Observed samples (``read_lengths`` columns: ``prompt_id``, ``response_tokens``, ``truncated``); samples
        of ids outside ``prompt_ids`` are ignored.
    cap
        Lengths at or above it count as truncated (censored).
    prior_samples
        ``k0`` of the per-prompt shrinkage; estimated from the history when None.
    data_source, difficulty
        Per prompt (aligned with ``prompt_ids``; None or nulls allowed): the groups of the correction.

    Returns
    -------
    (mu, sigma, samples_seen, fit)
        Combined parameters, the number of observed samples per prompt (0 = the corrected model), and the fit.
        With no sample of any of the prompts, ``mu`` and ``sigma`` are the model's, unchanged.
    """
    ids = pl.Series(prompt_ids).cast(pl.String)
    n = ids.len()
    mu_model = np.asarray(mu_model, dtype=np.float64)
    sigma_model = np.asarray(sigma_model, dtype=np.float64)
    model_spread = float(np.median(sigma_model)) if n else 0.3

    positions = pl.DataFrame({C.PROMPT_ID: ids, "\x00pos": pl.Series(np.arange(n, dtype=np.int64))})
    samples = (
        history.select(pl.col(C.PROMPT_ID).cast(pl.String), C.RESPONSE_TOKENS, C.TRUNCATED)
        .join(positions, on=C.PROMPT_ID, how="inner", maintain_order="left")
    )
    if samples.height == 0:
        return mu_model.copy(), sigma_model.copy(), np.zeros(n, dtype=np.int64), HistoryFit(
            0, model_log_spread=model_spread, log_spread=model_spread)

    pos = samples["\x00pos"].to_numpy()
    tokens = samples[C.RESPONSE_TOKENS].cast(pl.Float64).to_numpy()
    censored = samples[C.TRUNCATED].fill_null(False).to_numpy().astype(bool)
    if cap is not None:
        censored |= tokens >= cap
    log_len = np.log(np.maximum(tokens, 1.0))
    k = np.bincount(pos, minlength=n).astype(np.float64)
    seen = k > 0

    source_code, source_names = _codes(data_source, n)
    cell_code = _difficulty_cells(source_code, difficulty, n)

    # 1. Spread: pooled within-prompt sd over covered prompts with 2+ samples (capped samples imputed).
    targets = group_targets(samples.select(C.PROMPT_ID, C.RESPONSE_TOKENS, C.TRUNCATED), cap=cap)
    aligned = positions.join(targets, on=C.PROMPT_ID, how="left", maintain_order="left")
    own_sd = aligned["log_sd"].fill_null(np.nan).to_numpy()
    observed_mean = aligned["log_mean"].fill_null(0.0).to_numpy()
    multi = (k >= 2) & ~np.isnan(own_sd)
    dof = np.where(multi, k - 1.0, 0.0)
    var = np.where(multi, own_sd, 0.0) ** 2
    spread_from_history = int(multi.sum()) >= MIN_SPREAD_PROMPTS
    if spread_from_history:
        pooled = max(float(np.sqrt(np.sum(dof * var) / np.sum(dof))), MIN_LOG_SPREAD)
        n_sources = len(source_names)
        source_dof = np.bincount(source_code, weights=dof, minlength=n_sources)
        source_ss = np.bincount(source_code, weights=dof * var, minlength=n_sources)
        source_spread = np.maximum(np.sqrt((source_ss + SOURCE_SPREAD_PRIOR_DOF * pooled**2)
                                           / (source_dof + SOURCE_SPREAD_PRIOR_DOF)), MIN_LOG_SPREAD)
        base_sigma = source_spread[source_code]
    else:
        pooled = model_spread
        source_spread = None
        base_sigma = sigma_model.copy()

    # 2-3. Group corrections and the slope, with k0 (so tau^2) estimated from the residuals they leave.
    within = np.maximum(base_sigma, MIN_LOG_SPREAD) ** 2
    k0 = DEFAULT_PRIOR_SAMPLES if prior_samples is None else float(prior_samples)
    n_seen = int(seen.sum())
    source_centre = (np.bincount(source_code, weights=mu_model)
                     / np.maximum(np.bincount(source_code), 1))[source_code]

    def fit(mu_now: np.ndarray, groups_tau2: float) -> _Groups:
        return _fit_groups(log_len - mu_now[pos], censored, pos, k, within, groups_tau2, source_code, cell_code)

    def measured_tau2(mu_now: np.ndarray, groups: _Groups, free: int) -> float | None:
        """tau^2 as measured around the sources' corrections (None: too few covered prompts to say).

        The groups' estimates are weighed with it, not with s^2 / k0 (k0 is clipped for a covered prompt's own
        shrinkage, so tau^2 at most 4 s^2): a history far noisier than the sampling spread (lengths unrelated
        to the model's) makes each group's mean that much less certain. Weighed as certain, difficulty levels
        seen in a prompt or two looked far apart: a 5% history of random lengths shifted AIME's fifteen
        problem-number cells apart (sd 1.66) and reordered its other prompts. Around the sources (not the cells)
        it also holds any real difference between the levels, so the cells are shrunk more, never less, than
        sampling noise alone would shrink them; it is floored where k0's clip floors tau^2 (s^2 / 16)."""
        fitted = int(groups.source_has_data.sum()) + free
        if n_seen - fitted < 2:
            return None
        left = (observed_mean - mu_now - groups.source_shift[source_code])[seen]
        measured = float(np.sum(left**2) / (n_seen - fitted) - np.mean(within[seen] / k[seen]))
        return max(measured, pooled**2 / PRIOR_SAMPLES_RANGE[1])

    def settle(mu_now: np.ndarray, groups: _Groups, groups_tau2: float, free: int) -> tuple[_Groups, float]:
        """The groups refitted with tau^2 as measured around them, where it can be measured."""
        measured = measured_tau2(mu_now, groups, free)
        return (groups, groups_tau2) if measured is None else (fit(mu_now, measured), measured)

    groups_tau2 = pooled**2 / k0
    groups, groups_tau2 = settle(mu_model, fit(mu_model, groups_tau2), groups_tau2, 0)
    # The slope scales the model's deviations from the mean of the finest group that has its own correction: a
    # source's difficulty cell where the cells differ (Cochran's test, `_fit_groups`), else the source. Centred
    # on cells the history does not tell apart, a slope below 1 pulled a source's levels apart by the model's
    # own cell means and reordered it; centred on the source where the cells do differ (levels that follow the
    # model), it read the cells' differences as the slope's (a within-level slope of 0.5 fitted as 1.0).
    centre = source_centre
    if groups.between_difficulty_sd:
        finest = np.where(cell_code >= 0, cell_code + source_code.max() + 1, source_code)
        centre = (np.bincount(finest, weights=mu_model) / np.maximum(np.bincount(finest), 1))[finest]
    spread = mu_model - centre
    slope, slope_se = 1.0, None
    if n_seen >= MIN_PROMPTS_FOR_SLOPE:
        slope, slope_se = _slope(spread[seen], (observed_mean - mu_model - groups.shift)[seen],
                                 1.0 / (groups_tau2 + within[seen] / k[seen]))
    mu_fit = centre + slope * spread
    if slope != 1.0:
        groups, groups_tau2 = settle(mu_fit, fit(mu_fit, groups_tau2), groups_tau2, slope_se is not None)
    if prior_samples is None and n_seen >= MIN_PROMPTS_FOR_PRIOR:
        # tau^2 by moments for the covered prompts' own shrinkage: the spread of their residuals around their
        # groups' corrections (the cells' only where they have their own), less the part sampling noise
        # explains (imputed capped samples; the Tobit handles them in the groups).
        left = (observed_mean - mu_fit - groups.shift)[seen]
        fitted = max(groups.fitted_groups + (slope_se is not None), 1)
        between = float(np.sum(left**2) / max(n_seen - fitted, 1) - np.mean(within[seen] / k[seen]))
        k0 = float(np.clip(pooled**2 / max(between, 1e-6), *PRIOR_SAMPLES_RANGE))
        if between > groups_tau2:  # the groups are never weighed as surer than the prompts around them say
            groups_tau2 = between
            groups = fit(mu_fit, groups_tau2)
    tau2 = pooled**2 / k0

    # 5. Covered prompts: their observations with the corrected prior.
    prior_mu = mu_fit + groups.shift
    mu = prior_mu.copy()
    unc = ~censored
    ku = np.bincount(pos[unc], minlength=n).astype(np.float64)
    sum_u = np.bincount(pos[unc], weights=log_len[unc], minlength=n)
    mean_u = np.divide(sum_u, ku, out=np.zeros(n), where=ku > 0)
    precision_data = ku / within
    mu_closed = (precision_data * mean_u + prior_mu / tau2) / (precision_data + 1.0 / tau2)
    kc = k - ku
    plain = seen & (kc == 0)
    mu[plain] = mu_closed[plain]
    if censored.any():
        rows = np.flatnonzero(kc > 0)
        mu[rows] = _censored_posterior(rows, prior_mu, tau2, within, ku, mean_u, pos[censored], log_len[censored])
    sd_dof = np.maximum(k - 1.0, 0.0)
    own_var = np.where(np.isnan(own_sd), 0.0, own_sd) ** 2
    sigma = np.where(
        seen,
        np.sqrt((sd_dof * own_var + SPREAD_PRIOR_DOF * base_sigma**2) / (sd_dof + SPREAD_PRIOR_DOF)),
        base_sigma,
    )

    fit = _describe(groups, source_code, source_names, k, censored, pos, source_spread, pooled, model_spread,
                    spread_from_history, k0, n_seen, int(samples.height), int(censored.sum()), slope, slope_se)
    return mu, sigma, k.astype(np.int64), fit


# --------------------------------------------------------------------------------------------------------
# Groups


def _codes(values: Any, n: int) -> tuple[np.ndarray, list[str | None]]:
    """Integer codes of a per-prompt label (nulls one group), with the names sorted (nulls first)."""
    if values is None:
        return np.zeros(n, dtype=np.int64), [None]
    series = pl.Series(values).cast(pl.String)
    names = series.unique().sort(nulls_last=False).to_list()
    lookup = {name: i for i, name in enumerate(names)}
    return np.fromiter((lookup[v] for v in series.to_list()), dtype=np.int64, count=n), names


def _difficulty_cells(source_code: np.ndarray, difficulty: Any, n: int) -> np.ndarray:
    """A cell index per prompt for (source, difficulty level); -1 where the prompt has no difficulty.

    A source with more than ``MAX_DIFFICULTY_LEVELS`` distinct values is cut into ``DIFFICULTY_BINS``
    equal-count bins of its own prompts' values, so a continuous score does not make one cell per prompt.
    """
    cells = np.full(n, -1, dtype=np.int64)
    if difficulty is None:
        return cells
    values = pl.Series(difficulty).cast(pl.Float64, strict=False).fill_nan(None).to_numpy()
    values = np.asarray(values, dtype=np.float64)
    present = ~np.isnan(values)
    if not present.any():
        return cells
    level = np.full(n, -1, dtype=np.int64)
    for code in np.unique(source_code[present]):
        where = present & (source_code == code)
        distinct = np.unique(values[where])
        if distinct.size > MAX_DIFFICULTY_LEVELS:
            edges = np.unique(np.quantile(values[where], np.linspace(0, 1, DIFFICULTY_BINS + 1)[1:-1]))
            level[where] = np.searchsorted(edges, values[where], side="right")
        else:
            level[where] = np.searchsorted(distinct, values[where])
    key = source_code * (level.max() + 2) + level
    _, cells_present = np.unique(key[present], return_inverse=True)
    cells[present] = cells_present
    return cells


@dataclass
class _Groups:
    shift: np.ndarray  # per prompt: the correction of its finest group
    global_shift: float
    global_lower_bound: bool
    source_shift: np.ndarray
    source_lower_bound: np.ndarray
    source_has_data: np.ndarray
    between_source_sd: float | None
    between_difficulty_sd: float | None
    difficulty_groups: int
    fitted_groups: int
    # Per source whose every sample hit the cap: the mean censoring point, the least its correction can be.
    source_bound: np.ndarray


def _fit_groups(residual: np.ndarray, censored: np.ndarray, pos: np.ndarray, k: np.ndarray, within: np.ndarray,
                tau2: float, source_code: np.ndarray, cell_code: np.ndarray) -> _Groups:
    """The hierarchy of corrections: global, per source, per (source, difficulty) cell (see the module doc)."""
    weight = 1.0 / (tau2 + within[pos] / k[pos])  # a prompt's GLS weight ...
    a = weight / k[pos]  # ... spread over its samples
    scale = np.sqrt(tau2 + within[pos])
    n_sources = int(source_code.max()) + 1

    theta0, v0, has0 = _censored_location(residual, censored, a, scale, np.zeros(pos.size, dtype=np.int64), 1)
    global_shift = float(theta0[0] * GLOBAL_PRIOR_SD**2 / (GLOBAL_PRIOR_SD**2 + v0[0]))
    global_lb = not bool(has0[0])
    if global_lb:
        global_shift = max(global_shift, float(theta0[0]))

    sample_source = source_code[pos]
    theta, v, has = _censored_location(residual, censored, a, scale, sample_source, n_sources)
    data = np.bincount(sample_source, minlength=n_sources) > 0
    omega1 = _between_variance(theta, v, data & has, np.zeros(n_sources, dtype=np.int64))
    source_shift = np.full(n_sources, global_shift)
    shrunk = global_shift + omega1 / (omega1 + v) * (theta - global_shift)
    source_shift[data] = shrunk[data]
    lower = data & ~has
    source_shift[lower] = np.maximum(source_shift[lower], theta[lower])
    if int(data.sum()) <= 1:  # one source observed: it is the global term
        source_shift[data] = global_shift
        omega1_sd = None
    else:
        omega1_sd = math.sqrt(omega1)
    shift = source_shift[source_code]

    omega2_sd = None
    n_cells = int(cell_code.max()) + 1
    fitted = int(data.sum())
    if n_cells > 0:
        sample_cell = cell_code[pos]
        keep = sample_cell >= 0
        theta_c, v_c, has_c = _censored_location(residual[keep], censored[keep], a[keep], scale[keep],
                                                 sample_cell[keep], n_cells)
        cell_source = np.zeros(n_cells, dtype=np.int64)
        cell_source[cell_code[cell_code >= 0]] = source_code[cell_code >= 0]
        data_c = np.bincount(sample_cell[keep], minlength=n_cells) > 0
        omega2 = _between_variance(theta_c, v_c, data_c & has_c, cell_source,
                                   significance=CELL_HETEROGENEITY_QUANTILE)
        parent = source_shift[cell_source]
        cell_shift = parent.copy()
        shrunk_c = parent + omega2 / (omega2 + v_c) * (theta_c - parent)
        cell_shift[data_c] = shrunk_c[data_c]
        lower_c = data_c & ~has_c
        cell_shift[lower_c] = np.maximum(cell_shift[lower_c], theta_c[lower_c])
        with_cell = cell_code >= 0
        shift = shift.copy()
        shift[with_cell] = cell_shift[cell_code[with_cell]]
        omega2_sd = math.sqrt(omega2)
        if omega2 > 0:  # cells pooled into their source (Cochran's test) fit nothing of their own
            fitted += int(data_c.sum())
    bound = np.where(lower, theta, np.nan)
    return _Groups(shift, global_shift, global_lb, source_shift, ~has, data, omega1_sd, omega2_sd, n_cells, fitted,
                   bound)


def _censored_location(e: np.ndarray, censored: np.ndarray, a: np.ndarray, scale: np.ndarray, group: np.ndarray,
                       groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group, the weighted maximum-likelihood location of a censored normal (Tobit) and its variance.

    Sample j contributes ``a_j * scale_j^2`` times its log-likelihood: ``-(e_j - d)^2 / (2 scale_j^2)`` when
    observed, ``log(1 - Phi((e_j - d) / scale_j))`` when censored at ``e_j``. Without censoring this is the
    weighted mean of ``e`` with variance ``1 / sum(a)``. The log-likelihood is concave in ``d``, so Newton's
    method (steps clipped to 2 log units) converges. Returns ``(location, variance, has_uncensored)``; a group
    with only censored samples gets its weighted mean censoring point (a lower bound) and ``1 / sum(a)``.
    """
    from scipy.special import log_ndtr

    sum_a = np.bincount(group, weights=a, minlength=groups)
    observed = ~censored
    has = np.bincount(group[observed], minlength=groups) > 0
    start = np.divide(np.bincount(group, weights=a * e, minlength=groups), sum_a, out=np.zeros(groups),
                      where=sum_a > 0)
    theta = start.copy()
    variance = np.divide(1.0, sum_a, out=np.full(groups, np.inf), where=sum_a > 0)
    if not censored.any():
        return theta, variance, has
    for _ in range(_NEWTON_STEPS):
        d = theta[group]
        z = (e - d) / scale
        mills = np.exp(-0.5 * z**2 - 0.5 * math.log(2 * math.pi) - log_ndtr(-z))
        grad = np.where(observed, a * (e - d), a * scale * mills)
        hess = np.where(observed, a, a * mills * (mills - z))
        g = np.bincount(group, weights=grad, minlength=groups)
        h = np.bincount(group, weights=hess, minlength=groups)
        step = np.clip(np.divide(g, h, out=np.zeros(groups), where=(h > 0) & has), -2.0, 2.0)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    d = theta[group]
    z = (e - d) / scale
    mills = np.exp(-0.5 * z**2 - 0.5 * math.log(2 * math.pi) - log_ndtr(-z))
    h = np.bincount(group, weights=np.where(observed, a, a * mills * (mills - z)), minlength=groups)
    variance = np.where(has, np.divide(1.0, h, out=np.full(groups, np.inf), where=h > 0), variance)
    theta = np.where(has, theta, start)
    return theta, variance, has


def _slope(x: np.ndarray, r: np.ndarray, w: np.ndarray) -> tuple[float, float | None]:
    """The within-group slope of the model's log length, shrunk towards 1 and kept in ``SLOPE_RANGE``.

    ``r`` (covered prompts' residuals after the group corrections) is regressed on ``x`` (the model's deviation
    from the mean of its source, or of its difficulty level where the levels have corrections of their own) by weighted least squares through the origin: ``r = (b - 1) x``. The estimate of
    ``b - 1`` (its robust variance, at least ``1 / sum(w x^2)``) gets a ``N(0, SLOPE_PRIOR_SD^2)`` prior: the
    posterior mean. Returns
    the slope and the standard error of the raw estimate (None when the model does not vary within groups).
    """
    sxx = float(np.sum(w * x**2))
    if sxx <= 1e-12:
        return 1.0, None
    raw = float(np.sum(w * x * r)) / sxx
    # The sandwich (heteroskedasticity-robust, White 1980) variance: it reads the residuals' real spread, which
    # the weights (from the model's spread) may understate badly, as for a history of random lengths.
    variance = max(float(np.sum((w * x * (r - raw * x)) ** 2)) / sxx**2, 1.0 / sxx)
    slope = 1.0 + raw * SLOPE_PRIOR_SD**2 / (SLOPE_PRIOR_SD**2 + variance)
    return float(np.clip(slope, *SLOPE_RANGE)), math.sqrt(variance)


def _between_variance(theta: np.ndarray, v: np.ndarray, use: np.ndarray, parent: np.ndarray,
                      significance: float | None = None) -> float:
    """DerSimonian-Laird estimate of the between-group variance, groups centred within their parent.

    ``Q = sum W (theta - mean_W)^2`` within each parent, ``omega^2 = max(0, (Q - df) / C)`` with ``df`` the
    groups less one per parent and ``C = sum over parents of (sum W - sum W^2 / sum W)``. With ``significance``
    (a quantile), ``omega^2`` is 0 unless ``Q`` passes that quantile of its chi-square on ``df`` under no
    difference (Cochran's test of heterogeneity): DL alone is positive in about half the draws where the groups
    do not differ, and on a noisy history of a few prompts per difficulty level that was enough to reorder a
    source (a history of random lengths for 5% of the prompts, AIME-like levels 1-15: within-source tau 0.5-0.8
    against the model in 17 draws of 40; at the 95% quantile still one draw in eight of AIME's own levels, at 99%
    one 4-sample draw in twenty, at 99.9% none of forty: 1 and 4 samples, scripts/bench_probe.py's history). The price: AIME's problem numbers, which do order its lengths, are learned from a later
    epoch's history (80% of the prompts: within-AIME tau on the rest 0.10 -> 0.19, scripts/bench_probe.py
    --difficulty), not from a probe of 1-5%.
    """
    q = df = c = 0.0
    for p in np.unique(parent[use]):
        where = use & (parent == p)
        if where.sum() < 2:
            continue
        w = 1.0 / v[where]
        centre = np.sum(w * theta[where]) / np.sum(w)
        q += float(np.sum(w * (theta[where] - centre) ** 2))
        df += float(where.sum() - 1)
        c += float(np.sum(w) - np.sum(w**2) / np.sum(w))
    if df <= 0 or c <= 0:
        return 0.0
    if significance is not None:
        from scipy.stats import chi2

        if q <= float(chi2.ppf(significance, df)):
            return 0.0
    return max(0.0, (q - df) / c)


def _censored_posterior(rows: np.ndarray, prior_mu: np.ndarray, tau2: float, within: np.ndarray, ku: np.ndarray,
                        mean_u: np.ndarray, censored_pos: np.ndarray, censored_log: np.ndarray) -> np.ndarray:
    """Posterior mean of ``m_i`` for prompts with censored samples: prior ``N(prior_mu, tau2)``, observed samples
    ``N(m, s^2)``, censored ones ``P(y >= c) = Phi((m - c) / s)``; integrated on a grid per prompt."""
    from scipy.special import log_ndtr

    out = np.empty(rows.size)
    slot = np.full(prior_mu.size, -1, dtype=np.int64)
    slot[rows] = np.arange(rows.size)
    pairs = pl.DataFrame({"r": slot[censored_pos], "c": censored_log}).group_by("r", "c").len().sort("r", "c")
    pair_row = pairs["r"].to_numpy()
    pair_c = pairs["c"].to_numpy()
    pair_n = pairs["len"].to_numpy().astype(np.float64)
    top = np.full(rows.size, -np.inf)
    np.maximum.at(top, pair_row, pair_c)
    t = math.sqrt(tau2)
    for start in range(0, rows.size, _GRID_CHUNK):
        part = np.arange(start, min(start + _GRID_CHUNK, rows.size))
        r = rows[part]
        s = np.sqrt(within[r])
        lo = prior_mu[r] - 8.0 * t
        hi = np.maximum(prior_mu[r], top[part]) + 8.0 * np.maximum(t, s)
        grid = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, _GRID_POINTS)[None, :]
        logp = -0.5 * (grid - prior_mu[r][:, None]) ** 2 / tau2
        logp -= 0.5 * ku[r][:, None] * (grid - mean_u[r][:, None]) ** 2 / within[r][:, None]
        chosen = (pair_row >= part[0]) & (pair_row <= part[-1])
        for row, c, count in zip(pair_row[chosen], pair_c[chosen], pair_n[chosen], strict=True):
            i = row - part[0]
            logp[i] += count * log_ndtr((grid[i] - c) / s[i])
        logp -= logp.max(axis=1, keepdims=True)
        weight = np.exp(logp)
        out[part] = np.sum(weight * grid, axis=1) / np.sum(weight, axis=1)
    return out


def _describe(groups: _Groups, source_code: np.ndarray, source_names: list[str | None], k: np.ndarray,
              censored: np.ndarray, pos: np.ndarray, source_spread: np.ndarray | None, pooled: float,
              model_spread: float, spread_from_history: bool, k0: float, n_seen: int, n_samples: int,
              n_censored: int, slope: float, slope_se: float | None) -> HistoryFit:
    seen = k > 0
    n_sources = len(source_names)
    covered = np.bincount(source_code[seen], minlength=n_sources)
    total = np.bincount(source_code, minlength=n_sources)
    sample_counts = np.bincount(source_code[pos], minlength=n_sources)
    censored_counts = np.bincount(source_code[pos], weights=censored.astype(np.float64), minlength=n_sources)
    sources = []
    for i, name in enumerate(source_names):
        has = bool(groups.source_has_data[i])
        sources.append(SourceFit(
            name=name, prompts=int(covered[i]), samples=int(sample_counts[i]), censored=int(censored_counts[i]),
            prompts_corrected=int(total[i] - covered[i]), log_shift=float(groups.source_shift[i]),
            lower_bound=bool(has and groups.source_lower_bound[i]) or (not has and groups.global_lower_bound),
            log_spread=float(source_spread[i]) if source_spread is not None else model_spread,
            fitted="own" if has else "global",
            bound_log_shift=(float(groups.source_bound[i]) if has and np.isfinite(groups.source_bound[i])
                             else None),
        ))
    notes = []
    if n_censored == n_samples:
        notes.append("every observed sample was cut off (truncated: at the cap, or where the server stopped it), so "
                     "each correction is a lower bound: the policy writes at least this much more; raise the cap of "
                     "the probe or of the history's rollouts to measure it")
    elif groups.global_lower_bound or any(s.lower_bound for s in sources):
        bounded = [shown_name(s.name or "(no source)") for s in sources if s.lower_bound and s.fitted == "own"]
        listed = ", ".join(bounded[:5]) + (f" and {len(bounded) - 5:,} more" if len(bounded) > 5 else "")
        notes.append(f"every observed sample of {listed} was cut off (truncated): its correction is a lower bound")
    if int(groups.source_has_data.sum()) == 1 and n_sources > 1:
        only = shown_name(next(s.name or "(no source)" for s, has in zip(sources, groups.source_has_data) if has))
        notes.append(f"the history covers one data source ({only}): its correction applies to every source")
    elif n_sources == 1 and sources and sources[0].name is None:
        notes.append("the prompts carry no data_source: one global correction for every prompt (a source under "
                     "another name: --source-key)")
    elif n_sources == 1:
        notes.append(f"all prompts are of one data source ({shown_name(sources[0].name)}): one global correction")
    return HistoryFit(
        prompts_seen=n_seen, samples_seen=n_samples, censored_samples=n_censored, prior_samples=k0,
        log_spread=pooled, model_log_spread=model_spread, spread_from_history=spread_from_history,
        global_shift=groups.global_shift, global_lower_bound=groups.global_lower_bound,
        between_source_sd=groups.between_source_sd, between_difficulty_sd=groups.between_difficulty_sd,
        difficulty_groups=groups.difficulty_groups, sources=tuple(sources), notes=tuple(notes),
        slope=slope, slope_se=slope_se,
    )
