"""Fit the cost model to measured per-request timings, the estimator behind `asp calibrate` (docs/replay.md).

The model (`asp_cli.costmodel`): on one instance a decode step with ``b`` live sequences holding ``ctx``
tokens costs ``t_o + max(t_w, c*b) + kv*ctx``, and admitting prompts adds ``p`` per prompt token, with
``p = c`` in the preset (both are the 2N FLOPs of a token). Writing ``A = t_o + t_w`` and the knee
``b* = t_w / c``, a step costs ``A + c*max(0, b - b*) + kv*ctx``.

The estimator, per instance and run, from each request's send ``s``, first-token ``f`` and finish ``e``
times, prompt ``P`` and response ``L`` tokens:

1. **Step clock.** Between two consecutive first-token or finish events the set of decoding requests is
   fixed: ``b`` of them, each gaining one token per step, so the summed context grows by ``b`` per step. With
   the current parameters the number of steps ``dS`` in such a segment of length ``dt`` solves
   ``dS*(A + c*max(0, b-b*) + kv*ctx0) + kv*b*dS^2/2 = dt`` (prefill time taken out first, from the time
   before each first token); where a request finishes, the clock is set to its first token's step plus
   ``L - 1``, so the token counts, not the timing noise, fix the step count.
2. **Decode regression.** Request ``i`` decodes ``L-1`` steps in ``(f, e]``, so
   ``e - f = A*(L-1) + kv*X + c*G(b*) + p*Pi``, where ``X`` and ``G`` are the sums over those steps of the
   context and of ``max(0, b-b*)`` and ``Pi`` the prompt tokens admitted while it decoded. Weighted least
   squares (weights ``1/(e-f)``: every request counts by its relative error) gives ``A``, ``kv``, ``c`` (and
   ``p`` when enough prompts were admitted mid-decode). The knee is iterated to the fixed point
   ``b* = (A - t_o)/c``, ``t_o`` kept from the base preset (at replay batch sizes the per-step overhead
   cannot be told from the weight read); the knee model is kept only if it beats the knee-less one by the
   Bayesian information criterion and makes the busiest step at least 5% dearer, else no step was compute
   bound and ``c`` comes from prefill.
3. **Prefill regression.** A request sent to an idle instance waits for its prompt and those admitted with it
   before it: ``f - s - (one decode step) = d + p*Q`` with ``Q`` the prompt tokens of its burst that got their
   first token no later than it; least squares over those requests gives ``p``.
4. Steps 1-3 repeat from the new parameters (four rounds; the first starts from the base preset).

``max_num_seqs`` is the peak decoding count when requests were seen waiting at that peak; the KV capacity
is the one the servers reported (vLLM's ``/metrics``, SGLang's ``/get_server_info``) or given. The fitted
times become preset fields (`preset_document`) so that the preset's derived figures equal the fit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import InputError, shown_columns

ROUNDS = 4
KNEE_ITERATIONS = 60
POOR_FIT = 0.25  # relative RMS error of decode times above which the fit is flagged
MIN_DECODE_ROWS = 8


@dataclass(frozen=True)
class Fit:
    """Fitted step-model parameters and how well they explain the timings."""

    overhead_s: float
    weight_read_s: float
    compute_s_per_token: float
    kv_s_per_token: float
    prefill_s_per_token: float
    knee_live: float | None  # b* = t_w / c, None when no compute-bound step was observed
    max_num_seqs: int | None
    decode_requests: int
    prefill_requests: int
    decode_rel_rmse: float
    decode_median_abs_error: float
    prefill_rel_rmse: float | None
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Group:
    """One instance's requests in one run."""

    s: np.ndarray
    f: np.ndarray
    e: np.ndarray
    prompt: np.ndarray
    length: np.ndarray
    clean: np.ndarray  # sent once (a retried request's times are of its last attempt only)


def _groups(frame: pl.DataFrame) -> list[_Group]:
    frame = frame.filter(pl.col("first_token_s").is_not_null())
    groups = []
    for _, part in frame.group_by(["run", "instance"], maintain_order=True):
        part = part.sort(["first_token_s", "seq", "sample"])
        prompt = part["prompt_tokens"].fill_null(part["planned_prompt_tokens"]).to_numpy().astype(np.float64)
        length = part["completion_tokens"].fill_null(part["forced_tokens"]).to_numpy().astype(np.float64)
        groups.append(_Group(part["send_s"].to_numpy(), part["first_token_s"].to_numpy(), part["finish_s"].to_numpy(),
                             prompt, length, (part["attempts"].fill_null(1) <= 1).to_numpy()))
    return groups


@dataclass
class _Params:
    a: float  # t_o + t_w
    c: float
    knee: float  # b*, math.inf for none
    kv: float
    p: float

    def decode_s(self, live: float, context: float) -> float:
        over = max(0.0, live - self.knee) if math.isfinite(self.knee) else 0.0
        return self.a + self.c * over + self.kv * context


@dataclass
class _Clock:
    """Per-segment step counts of one group and the per-request sums over its decode life."""

    bounds: np.ndarray  # segment boundaries (sorted event times)
    steps: np.ndarray  # dS per segment
    live: np.ndarray  # b per segment
    context_steps: np.ndarray  # sum over the segment's steps of the context


def _step_clock(g: _Group, theta: _Params) -> _Clock:
    bounds = np.unique(np.concatenate((g.f, g.e)))
    joins = np.searchsorted(bounds, g.f)
    leaves = np.searchsorted(bounds, g.e)
    admitted = np.bincount(joins, weights=g.prompt, minlength=bounds.size)
    lived = leaves > joins  # a one-token request never decodes
    join_at: list[list[int]] = [[] for _ in range(bounds.size)]
    leave_at: list[list[int]] = [[] for _ in range(bounds.size)]
    for j in np.flatnonzero(lived).tolist():
        join_at[joins[j]].append(j)
        leave_at[leaves[j]].append(j)
    s_join = np.zeros(g.f.size)
    leave_count = np.bincount(leaves[lived], minlength=bounds.size)
    leave_mass = np.zeros(bounds.size)
    segments = max(bounds.size - 1, 0)
    steps = np.zeros(segments)
    live_arr = np.zeros(segments)
    ctx_arr = np.zeros(segments)
    # Prefill time goes in the time before a first token; what a (short) segment cannot hold is taken from
    # the segments before it, so jitter that splits one admission step over several events does not leak
    # prefill time into decode steps.
    decode_time = np.diff(bounds)
    debt = 0.0
    for k in range(segments - 1, -1, -1):
        debt += theta.p * admitted[k + 1]
        take = min(debt, decode_time[k])
        decode_time[k] -= take
        debt -= take
    live = 0
    mass = 0.0  # sum over live requests of (P + 1 - S(f)): a live request holds P + 1 + S - S(f) tokens
    s_now = 0.0
    for k in range(segments):
        # Requests finishing at this boundary leave; those whose first token is here join.
        live -= int(leave_count[k])
        mass -= leave_mass[k]
        for j in join_at[k]:
            live += 1
            s_join[j] = s_now
            mass += g.prompt[j] + 1.0 - s_now
            leave_mass[leaves[j]] += g.prompt[j] + 1.0 - s_now
        dt = decode_time[k]
        if live <= 0 or dt <= 0:
            continue
        ctx0 = mass + s_now * live
        linear = theta.decode_s(live, ctx0)
        quad = theta.kv * live / 2.0
        ds = dt / linear if quad <= 0 else (-linear + math.sqrt(linear * linear + 4 * quad * dt)) / (2 * quad)
        # Anchor the clock on token counts: a request that finishes here decoded L - 1 steps since its first
        # token, exactly; the model only spreads steps between such anchors, so timing noise does not pile up.
        ending = leave_at[k + 1]
        if ending:
            anchored = float(np.mean([s_join[j] + g.length[j] - 1.0 for j in ending])) - s_now
            if anchored > 0:
                ds = anchored
        steps[k] = ds
        live_arr[k] = live
        ctx_arr[k] = ds * ctx0 + live * ds * ds / 2.0
        s_now += ds
    return _Clock(bounds, steps, live_arr, ctx_arr)


def _decode_rows(groups: list[_Group], theta: _Params) -> dict[str, np.ndarray]:
    """Per clean request with L >= 2: y = e - f and the regressors of step 2, plus the segments' live counts."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("y", "steps", "x", "pi")}
    lives = []
    for g in groups:
        clock = _step_clock(g, theta)
        zero = np.zeros(1)
        cum_steps = np.concatenate((zero, np.cumsum(clock.steps)))
        cum_ctx = np.concatenate((zero, np.cumsum(clock.context_steps)))
        a = np.searchsorted(clock.bounds, g.f)
        b = np.searchsorted(clock.bounds, g.e)
        span = cum_steps[b] - cum_steps[a]
        keep = g.clean & (g.length >= 2) & (span > 0) & (g.e > g.f)
        scale = np.where(span > 0, (g.length - 1) / np.where(span > 0, span, 1.0), 0.0)
        # Prompts admitted while i decoded: first token at least half a step after i's (co-admitted ones share
        # i's step even when jitter splits their first tokens) and no later than half a step after its last.
        order = np.argsort(g.f, kind="stable")
        f_sorted = g.f[order]
        s_sorted = cum_steps[a][order]  # non-decreasing, as S is
        cum_prompt = np.concatenate((zero, np.cumsum(g.prompt[order])))
        half_step = np.where(g.length > 1, (g.e - g.f) / np.maximum(g.length - 1, 1) / 2, 0.0)
        low = np.searchsorted(s_sorted, cum_steps[a] + 0.5, side="left")
        high = np.searchsorted(f_sorted, g.e + half_step, side="right")
        pi = np.where(high > low, cum_prompt[high] - cum_prompt[np.minimum(low, high)], 0.0)
        cols["y"].append((g.e - g.f)[keep])
        cols["steps"].append((g.length - 1)[keep])
        cols["x"].append((scale * (cum_ctx[b] - cum_ctx[a]))[keep])
        cols["pi"].append(pi[keep])
        lives.append((clock, a[keep], b[keep], scale[keep]))
    out: dict = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    out["_lives"] = lives
    return out


def _knee_column(lives: list, knee: float) -> np.ndarray:
    """G(b*) per decode row: the steps' sum of max(0, b - b*), scaled like the other regressors."""
    parts = []
    for clock, a, b, scale in lives:
        over = clock.steps * np.maximum(clock.live - knee, 0.0)
        cum = np.concatenate(([0.0], np.cumsum(over)))
        parts.append(scale * (cum[b] - cum[a]))
    return np.concatenate(parts) if parts else np.zeros(0)


def _wls(columns: list[np.ndarray], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of y on the columns, each row weighted by 1/y; returns (coefficients, prediction)."""
    design = np.column_stack(columns)
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(design * w[:, None], y * w, rcond=None)
    return coef, design @ coef


def _fit_decode(rows: dict, theta: _Params, overhead_s: float) -> tuple[_Params, np.ndarray, list[str]]:
    y = rows["y"]
    if y.size == 0:  # every request too short, or its decode hidden by its own prefill
        raise InputError("the timeline has no request whose decode can be timed (a first token after its send and "
                         "before its finish, in a burst the fit can follow); replay with streaming and longer "
                         "responses")
    fit_pi = np.count_nonzero(rows["pi"]) >= max(MIN_DECODE_ROWS, y.size // 20)
    target = y if fit_pi else y - theta.p * rows["pi"]
    seg_live = np.concatenate([c.live[c.steps > 0] for c, *_ in rows["_lives"]] or [np.zeros(0)])
    top_live = float(seg_live.max()) if seg_live.size else 0.0

    def solve(knee: float) -> tuple[np.ndarray, np.ndarray]:
        columns = [rows["steps"], rows["x"]]
        if math.isfinite(knee):
            columns.append(_knee_column(rows["_lives"], knee))
        if fit_pi:
            columns.append(rows["pi"])
        return _wls(columns, target)

    def score(predicted: np.ndarray, parameters: int) -> float:
        # Bayesian information criterion on the relative errors.
        sse = float(np.sum(((predicted - target) / y) ** 2))
        return y.size * math.log(max(sse / y.size, 1e-300)) + parameters * math.log(y.size)

    coef, predicted = solve(math.inf)
    best = (score(predicted, 2), math.inf, coef, predicted)
    # The knee b* = (A - t_o) / c is where the weight read stops hiding the GEMMs: iterate it to a fixed point.
    knee = theta.knee if math.isfinite(theta.knee) and theta.knee < top_live else top_live / 2.0
    converged = False
    for _ in range(KNEE_ITERATIONS if top_live > 0 else 0):
        coef, predicted = solve(knee)
        new = (coef[0] - overhead_s) / coef[2] if coef[2] > 0 else math.nan
        if not 0 < new < top_live:
            break
        if abs(new - knee) < 1e-3:
            converged = True
            break
        knee = 0.5 * knee + 0.5 * new
    if converged:
        coef, predicted = solve(knee)
        # A knee must be real: compute-bound steps at least 5% dearer than memory-bound ones at the most live
        # sequences seen; it costs two parameters (b* and c).
        if coef[2] > 0 and coef[2] * (top_live - knee) >= 0.05 * coef[0]:
            best = min(best, (score(predicted, 4), knee, coef, predicted), key=lambda t: t[0])
    _, knee, coef, predicted = best
    a, kv = float(coef[0]), float(coef[1])
    c = float(coef[2]) if math.isfinite(knee) else None
    p = float(coef[-1]) if fit_pi else None
    predicted = predicted + (0 if fit_pi else theta.p * rows["pi"])
    notes = []
    if kv <= 0:
        notes.append("the KV term did not show (contexts too short or too alike); kept the base model's KV bytes per "
                     "token, read at the fitted bandwidth")
        kv = theta.kv
    new_theta = _Params(a=a, c=c if c is not None else theta.c, knee=knee, kv=kv,
                        p=p if p is not None and p > 0 else theta.p)
    return new_theta, predicted, notes


def _prefill_rows(groups: list[_Group], theta: _Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, Q, wait) for requests sent to an idle instance: y is the first-token wait less one decode step."""
    ys, qs, waits = [], [], []
    for g in groups:
        order = np.lexsort((g.f, g.s))
        s, f, e, prompt, clean = g.s[order], g.f[order], g.e[order], g.prompt[order], g.clean[order]
        busy_until = -math.inf
        slack = theta.a / 2.0  # a finish seen a little late must not hide that the instance was idle
        i = 0
        while i < s.size:
            if s[i] < busy_until - slack:
                busy_until = max(busy_until, e[i])
                i += 1
                continue
            first = f[i]
            j = i
            while j < s.size and s[j] < first:  # sent before the burst's first token: admitted with it
                first = min(first, f[j])
                j += 1
            members = np.arange(i, j)
            by_first = members[np.argsort(f[members], kind="stable")]
            # Only those admitted in the burst's first prefill: first token before any member finished.
            admitted = f[by_first] <= e[members].min()
            burst = float(np.sum(admitted))
            step = theta.decode_s(burst, float(prompt[by_first][admitted].sum()))
            # Prompt tokens of the burst prefilled by a member's first token: those whose first token came by
            # then, within half a step (the same step, split by jitter).
            f_sorted = f[by_first]
            queued = np.cumsum(prompt[by_first])[np.searchsorted(f_sorted, f_sorted + step / 2, side="right") - 1]
            for m, q, ok in zip(by_first.tolist(), queued.tolist(), admitted.tolist()):
                if clean[m] and ok:
                    ys.append(f[m] - s[m] - step)
                    qs.append(q)
                    waits.append(f[m] - s[m])
            busy_until = max(busy_until, float(e[members].max()))
            i = j
    return np.asarray(ys), np.asarray(qs), np.asarray(waits)


def fit_timeline(frame: pl.DataFrame, base: HardwarePreset) -> Fit:
    """Fit the step model to a timeline (`asp_cli.integrate.timings` columns).

    Raises
    ------
    InputError
        When the timeline has too few streamed requests to fit (no first-token times: replay with streaming).
    """
    groups = _groups(frame)
    if sum(int(np.sum(g.clean & (g.length >= 2))) for g in groups) < MIN_DECODE_ROWS:
        raise InputError(f"the timeline has fewer than {MIN_DECODE_ROWS} streamed requests of 2 tokens or more; "
                         "replay with streaming (the default, not --no-stream) and more requests")
    knee0 = base.weight_read_s / base.compute_s_per_token if base.compute_s_per_token > 0 else math.inf
    theta = _Params(a=base.step_overhead_s + base.weight_read_s, c=base.compute_s_per_token, knee=knee0,
                    kv=base.kv_s_per_token, p=base.compute_s_per_token)
    notes: list[str] = []
    prefill_error = None
    prefill_n = 0
    for _ in range(ROUNDS):
        rows = _decode_rows(groups, theta)
        theta, predicted, notes = _fit_decode(rows, theta, base.step_overhead_s)
        y_pre, q, wait = _prefill_rows(groups, theta)
        prefill_n = int(y_pre.size)
        if y_pre.size >= 3 and np.ptp(q) > 0:
            coef, *_ = np.linalg.lstsq(np.column_stack((np.ones_like(q), q)), y_pre, rcond=None)
            if coef[1] > 0:
                theta = dataclasses.replace(theta, p=float(coef[1]))
                residual = y_pre - (coef[0] + coef[1] * q)
                prefill_error = float(np.sqrt(np.mean((residual / np.maximum(wait, 1e-9)) ** 2)))
    y = rows["y"]
    rel = (predicted - y) / y
    sources = {"kv_s_per_token": "fitted" if not notes else "base", "prefill_s_per_token":
               "fitted" if prefill_error is not None else "base"}
    overhead = min(base.step_overhead_s, max(theta.a, 0.0) / 2.0)
    t_w = theta.a - overhead
    if math.isfinite(theta.knee):
        compute = theta.c
        sources.update(weight_read_s="fitted", compute_s_per_token="fitted (compute-bound decode)")
    else:
        compute = theta.p
        sources.update(weight_read_s="fitted", compute_s_per_token="prefill fit (no compute-bound decode step)")
        notes.append("no decode step was compute bound (too few live sequences); the compute term comes from "
                     "prefill")
    sources["overhead_s"] = "base"
    if math.isfinite(theta.knee) and prefill_error is not None and abs(theta.p / theta.c - 1.0) > 0.25:
        notes.append(f"prefill costs {theta.p:.3g} s/token but compute-bound decode {theta.c:.3g}; the preset has one "
                     "compute term and keeps the decode one")
    poor = bool(np.sqrt(np.mean(rel ** 2)) > POOR_FIT)
    if poor:
        notes.append(f"the step model explains these timings poorly ({np.sqrt(np.mean(rel ** 2)):.0%} RMS error); "
                     "check that the servers ran nothing else and streamed every token, and trust the preset less")
    return Fit(overhead_s=float(overhead), weight_read_s=float(t_w), compute_s_per_token=float(compute),
               kv_s_per_token=float(theta.kv), prefill_s_per_token=float(theta.p),
               knee_live=float(theta.knee) if math.isfinite(theta.knee) else None,
               max_num_seqs=None if poor else _observed_cap(groups), decode_requests=int(y.size), prefill_requests=prefill_n,
               decode_rel_rmse=float(np.sqrt(np.mean(rel ** 2))),
               decode_median_abs_error=float(np.median(np.abs(rel))), prefill_rel_rmse=prefill_error,
               sources=sources, notes=notes)


def _observed_cap(groups: list[_Group]) -> int | None:
    """The engine's sequence limit, if requests were seen waiting while the decoding count sat at its peak for
    at least 20 decode steps in all (a request's own admission lag is a step or two)."""
    caps = []
    for g in groups:
        lived = g.length > 1
        if not lived.any():
            continue
        step_s = float(np.median((g.e - g.f)[lived] / (g.length[lived] - 1)))
        # Counts after all events at each time: decoding (+1 at f, -1 at e), waiting (+1 at s, -1 at f).
        times = np.concatenate((g.f, g.e, g.s, g.f))
        decoding_delta = np.concatenate((np.ones(g.f.size), -np.ones(g.e.size), np.zeros(2 * g.s.size)))
        waiting_delta = np.concatenate((np.zeros(2 * g.f.size), np.ones(g.s.size), -np.ones(g.f.size)))
        order = np.argsort(times, kind="stable")
        last = np.flatnonzero(np.append(np.diff(times[order]) > 0, True))
        decoding = np.rint(np.cumsum(decoding_delta[order])[last])
        waiting = np.rint(np.cumsum(waiting_delta[order])[last])
        if decoding.size < 2:
            continue
        held = np.diff(times[order][last])  # how long each state lasted
        decoding, waiting = decoding[:-1], waiting[:-1]
        peak = int(decoding.max())
        capped = float(np.sum(held[(decoding == peak) & (waiting > 0)]))
        if peak > 0 and step_s > 0 and capped >= 20 * step_s:
            caps.append(peak)
    return max(caps) if caps else None


# --------------------------------------------------------------------------------------------------------
# From a fit to a preset file


# How far from the base model's KV bytes a token a fit may put them before it is taken as not pinned.
KV_PLAUSIBLE = 8.0


def preset_document(base: HardwarePreset, base_document: dict[str, Any], fit: Fit, *, kv_cache_tokens: int | None,
                    max_num_seqs: int | None, train: tuple[float, float] | None, name: str,
                    description: str) -> dict[str, Any]:
    """The JSON document `asp_cli.costmodel.load_preset` reads, whose derived figures equal the fit.

    The weight read fixes ``eta_bandwidth``, the KV term then ``kv_bytes_per_token``, the compute term
    ``eta_flops``; ``hbm_bytes`` is set so that the KV capacity stays the one reported, given or in the base.
    """
    eta_bw = base.weights_bytes / (max(fit.weight_read_s, 1e-9) * base.bandwidth_bytes_per_s)
    if eta_bw > 1.0 and not any("faster than" in note for note in fit.notes):
        # Reading the weights faster than the GPU's bandwidth allows: the timings are not of this model on this GPU
        # (another model served, a server that does not decode: a fake one gave eta_bandwidth 4,997).
        fit.notes.append(f"decode steps ({fit.weight_read_s:.3g} s of weight read) are faster than the base's "
                         f"bandwidth allows for its {base.weights_bytes / 1e9:,.1f} GB of weights (eta_bandwidth "
                         f"{eta_bw:,.3g} > 1): check that the servers serve the base preset's model on its GPU, and "
                         "trust the preset less")
    kv_bytes = fit.kv_s_per_token * eta_bw * base.bandwidth_bytes_per_s
    if fit.sources.get("kv_s_per_token") == "base":
        # Not fitted: the model's own bytes a token (its architecture), read at the fitted bandwidth as the weights
        # are. Carrying over the base's seconds instead moved the bytes by the bandwidth's factor, and then the
        # plausibility check below called that "fitted" (a hostile-input round: "kept the base preset's" beside a
        # KV term 800 times smaller).
        kv_bytes = base.kv_bytes_per_token
    elif not base.kv_bytes_per_token / KV_PLAUSIBLE <= kv_bytes <= base.kv_bytes_per_token * KV_PLAUSIBLE:
        # The KV bytes a token holds are the model's architecture; a fit that puts them far from the base's did not
        # pin the KV read (short contexts, a noisy clock: a probe of 12-token answers once gave 7e12 B a token and
        # a cache of 10^18 bytes). The base's stand, said so.
        fit.notes.append(f"the timeline did not pin the KV read (fitted {kv_bytes:,.0f} B a token, the base model's "
                         f"{base.kv_bytes_per_token:,.0f}): the base's is kept; replay longer responses to fit it")
        kv_bytes = base.kv_bytes_per_token
    eta_flops = 2.0 * base.params / (max(fit.compute_s_per_token, 1e-15) * base.flops_per_s)
    capacity = kv_cache_tokens if kv_cache_tokens else base.kv_capacity_tokens
    hbm = (capacity * kv_bytes + base.weights_bytes + base.activation_reserve_bytes) / base.gpu_memory_utilization
    seqs = max_num_seqs or fit.max_num_seqs or base.max_num_seqs
    document = {**base_document, "name": name, "description": description,
                "step_overhead_s": fit.overhead_s, "eta_bandwidth": eta_bw, "kv_bytes_per_token": kv_bytes,
                "eta_flops": eta_flops, "hbm_bytes": hbm, "max_num_seqs": int(seqs)}
    if train is not None:
        document["train_fixed_s"], document["train_per_token_s"] = max(train[0], 0.0), max(train[1], 0.0)
    return document


def fit_train_steps(frame: pl.DataFrame, where: str) -> tuple[float, float]:
    """``train_fixed_s`` and ``train_per_token_s`` from measured trainer steps (columns ``tokens``, ``step_s``).

    Raises
    ------
    InputError
        When the columns are missing or fewer than two distinct token counts are given.
    """
    seconds = "step_s" if "step_s" in frame.columns else "seconds"
    if "tokens" not in frame.columns or seconds not in frame.columns:
        raise InputError(f"{where}: needs columns 'tokens' and 'step_s' (one row per trainer step); columns are: "
                         f"{shown_columns(frame.columns)}")
    from asp_cli.reading.json_records import untag

    # As the file holds each value (`json_records.untag`): in a column of mixed kinds (a number beside text) the
    # reader tags the numbers, which no cast reads.
    frame = frame.with_columns(untag(pl.col(c)) for c in ("tokens", seconds) if frame.schema[c] == pl.String)
    tokens = frame["tokens"].cast(pl.Float64, strict=False).to_numpy()
    step = frame[seconds].cast(pl.Float64, strict=False).to_numpy()
    # A step that took no time, or a negative or unreadable value, is a broken measurement: refused, named,
    # rather than fitted into a trainer cost (a fit to negative times came out as a plausible-looking preset).
    # Beyond any trainer step too (1e30 tokens, 1e-300 s: a hostile-input audit's preset of a trainer costing 0 s).
    bad = ~(np.isfinite(tokens) & np.isfinite(step) & (tokens >= 0) & (tokens <= _MOST_STEP_TOKENS)
            & (step >= _LEAST_STEP_S) & (step <= _MOST_STEP_S))
    if bad.any():
        from asp_cli.reading.places import row_location
        from asp_cli.reading.tables import file_format

        index = int(np.flatnonzero(bad)[0])
        try:
            fmt = file_format(Path(where))[0]
        except InputError:
            fmt = "parquet"
        raw = {name: frame[name][index] for name in ("tokens", seconds)}
        raise InputError(f"{row_location(Path(where), frame, index, fmt)}: a trainer step needs 'tokens' from 0 to "
                         f"{_MOST_STEP_TOKENS:.0e} and '{seconds}' from {_LEAST_STEP_S:g} to {_MOST_STEP_S:.0e} seconds "
                         f"(got tokens {raw['tokens']!r}, {seconds} "
                         f"{raw[seconds]!r}); fix or drop the row"
                         + (f" ({int(bad.sum()):,} such rows)" if bad.sum() > 1 else ""))
    if np.unique(tokens).size < 2:
        raise InputError(f"{where}: needs steps of at least two different token counts to fit fixed and per-token "
                         "cost")
    coef, *_ = np.linalg.lstsq(np.column_stack((np.ones(tokens.size), tokens)), step, rcond=None)
    if not coef[1] > 0:
        # Steps that got shorter with more tokens fitted "12 s + 0 s a token" without a word: no cost to plan with.
        raise InputError(f"{where}: the steps do not take longer with more tokens (fitted {float(coef[1]):.3g} s a "
                         "token): the trainer's cost cannot be told from them; give steps of several sizes, each "
                         "measured alike (the same model and parallelism, the time of the update alone)")
    return float(coef[0]), float(coef[1])


_MOST_STEP_TOKENS = 1e12  # tokens in one trainer step (a train batch of 1M prompts x 16 x 64k is 1e12)
_LEAST_STEP_S, _MOST_STEP_S = 1e-3, 1e6  # seconds of one trainer step
