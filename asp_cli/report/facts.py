"""The facts of a schedule: what it was made from and what it is expected to do (docs/report.md).

`build_report` turns a `Schedule` into one JSON-ready dict with a stable structure (``report_version``);
`compare_reports` puts two of them side by side; `check_report` tests thresholds. The terminal view
(`report_text`) and the HTML page (`report_html`) only render these dicts, so the three outputs of
`asp report` always say the same thing.

Everything is computed from the schedule file alone: the required columns give sizes, balance in tokens,
padding and step representativeness; the optional ``expected_*`` columns (written by `asp schedule`) add
busy time, the training-queue curves, the effective batch and lag. A section whose columns are missing is
``null`` rather than guessed. Floats are rounded so that the output is byte-for-byte deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.arrange.timeline import run_steps
from asp_cli.errors import SettingsError
from asp_cli.reading.options import ReadOptions
from asp_cli.schedule_format import Schedule

# `asp report` names the id and length columns of its --lengths files so.
REPORT_READ = ReadOptions(length_id_flag="--lengths-id-key", length_flag="--lengths-length-key")

# Bump the major when a key is removed, renamed or changes meaning; the minor for added keys.
REPORT_VERSION = "1.1"

# Points on the time grid of the queue and effective-batch curves: smooth enough for a plot, small in JSON.
_GRID_POINTS = 160
# The "long tail": prompts above this quantile of predicted length in their epoch.
_TAIL_QUANTILE = 0.9
_QUANTILES = (0.0, 0.1, 0.5, 0.9, 1.0)
_TIMING_COLUMNS = ("expected_start_s", "expected_finish_s", "expected_minibatch_end_s")


def _r(value: float | None, digits: int = 4) -> float | None:
    """Round for output; non-finite values become None (JSON has no NaN)."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return round(value, digits) + 0.0  # + 0.0 turns -0.0 into 0.0


def _quantiles(values: np.ndarray, digits: int = 1) -> dict[str, float | None]:
    """Named quantiles (p0, p10, p50, p90, p100) and the mean of ``values``."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {**{f"p{int(q * 100)}": None for q in _QUANTILES}, "mean": None}
    out = {f"p{int(q * 100)}": _r(np.quantile(values, q), digits) for q in _QUANTILES}
    out["mean"] = _r(values.mean(), digits)
    return out


def _spread(values: np.ndarray) -> float | None:
    """(max - min) / mean: 0 for perfect balance; None when the mean is 0."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0 or values.mean() <= 0:
        return None
    return _r((values.max() - values.min()) / values.mean())


def _log_edges(low: float, high: float, bins: int = 24) -> np.ndarray:
    """Histogram edges spaced evenly in log length (lengths are long-tailed)."""
    low = max(float(low), 1.0)
    high = max(float(high), low * 1.01)
    return np.unique(np.round(np.geomspace(low, high * 1.0001, bins + 1)).astype(np.int64))


def _histogram(values: np.ndarray, edges: np.ndarray) -> list[int]:
    counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
    return [int(c) for c in counts]


# --------------------------------------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class ObservedLengths:
    """Observed response lengths, one row per prompt: ``prompt_id``, ``observed_max_tokens``,
    ``observed_mean_tokens``, ``samples``, ``truncated_samples`` (see `observed_from_samples`)."""

    frame: pl.DataFrame
    files: tuple[str, ...] = ()


def observed_from_samples(samples: pl.DataFrame, files: Sequence[Path | str] = ()) -> ObservedLengths:
    """Aggregate per-sample lengths (as `reading.read_lengths` returns them) to one row per prompt.

    The group's maximum is the label that matters for a GRPO group (it ends the group), the mean is what
    the trainer consumes.
    """
    truncated = pl.col("truncated").fill_null(False).cast(pl.Int64) if "truncated" in samples.columns else pl.lit(0)
    frame = (
        samples.group_by("prompt_id")
        .agg(
            pl.col("response_tokens").max().alias("observed_max_tokens"),
            pl.col("response_tokens").mean().alias("observed_mean_tokens"),
            pl.len().alias("samples"),
            truncated.sum().alias("truncated_samples"),
        )
        .sort("prompt_id")
    )
    return ObservedLengths(frame=frame, files=tuple(Path(f).name for f in files))


def build_report(schedule: Schedule, *, observed: ObservedLengths | None = None,
                 name: str | None = None) -> dict[str, Any]:
    """Compute every fact `asp report` shows about one schedule.

    Parameters
    ----------
    schedule
        As `schedule_format.read_schedule` returns it.
    observed
        Observed lengths to put next to the predictions (`observed_from_samples`), or None.
    name
        How to name the schedule in the output; by default its file name.

    Returns
    -------
    dict
        JSON-ready, keys documented in docs/report.md: ``report_version``, ``schedule``, ``provenance``,
        ``size``, ``instances``, ``predicted_lengths``, ``minibatches``, ``padding``, ``queue``,
        ``effective_batch``, ``lag``, ``steps``, ``observed`` (null without observed lengths), ``simulated``
        (null here; `report_schedule` fills it with ``simulate=True``) and ``minibatch_table`` (one entry per
        minibatch, for timelines).
    """
    frame = schedule.frame
    meta = schedule.metadata
    settings = meta.get("settings", {}) or {}
    n = int(settings.get("samples_per_prompt", 1) or 1)
    timed = all(c in frame.columns for c in _TIMING_COLUMNS)
    per_mb = _per_minibatch(frame, timed)
    instances = max(int(settings.get("instances", 0) or 0), int(frame["instance"].max()) + 1)
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "schedule": {
            "name": name or (schedule.path.name if schedule.path else None),
            "format_version": meta.get("format_version"),
            "timing_columns": timed,
        },
        "provenance": _provenance(meta),
        "size": {
            "prompts": int(frame.filter(pl.col("epoch") == frame["epoch"].min()).height),
            "epochs": int(frame["epoch"].n_unique()),
            "rows": frame.height,
            "instances": instances,
            "samples_per_prompt": n,
            "train_batch_size": settings.get("train_batch_size"),
            "minibatches": per_mb.height,
            "train_steps": int(frame["train_step"].max()) + 1,
        },
        "instances": _instances(per_mb, instances, timed),
        "predicted_lengths": _predicted_lengths(frame),
        "minibatches": _minibatch_lengths(per_mb),
        "padding": _padding(per_mb),
        "queue": _queue(frame, meta, n) if timed else None,
        "effective_batch": _effective_batch(frame, n, instances) if timed else None,
        "lag": _lag(frame, settings),
        "steps": _steps(frame),
        "observed": _observed(frame, per_mb, observed, instances) if observed is not None else None,
        "simulated": None,  # filled by `report_schedule(..., simulate=True)` (report_simulated)
        "minibatch_table": _minibatch_table(per_mb, timed),
    }
    return report


def _provenance(meta: dict[str, Any]) -> dict[str, Any]:
    preset = meta.get("preset") or {}
    command = meta.get("command_line")
    return {
        "asp_version": meta.get("asp_version"),
        "created_by": meta.get("created_by"),
        "command_line": " ".join(command) if isinstance(command, list) else command,
        "settings": meta.get("settings", {}),
        "preset": {"name": preset.get("name"), "description": preset.get("description")} if preset else None,
        "max_tokens_per_minibatch_used": meta.get("max_tokens_per_minibatch_used"),
        "inputs": meta.get("inputs", []),
        "input_fingerprint": meta.get("input_fingerprint"),
        "predictor": meta.get("predictor"),
    }


def _per_minibatch(frame: pl.DataFrame, timed: bool) -> pl.DataFrame:
    aggs = [
        pl.col("instance").first(),
        pl.col("epoch").first(),
        pl.col("seq").min().alias("first_seq"),
        pl.len().alias("prompts"),
        pl.col("predicted_tokens").max().alias("longest"),
        pl.col("predicted_tokens").min().alias("shortest"),
        pl.col("predicted_tokens").sum().alias("tokens"),
    ]
    if "length_class" in frame.columns:
        aggs.append(pl.col("length_class").first())
    if timed:
        aggs += [pl.col("expected_start_s").min().alias("start_s"),
                 pl.col("expected_minibatch_end_s").max().alias("end_s")]
    per_mb = frame.group_by("minibatch").agg(aggs).sort("first_seq")
    return per_mb.with_columns(
        (1.0 - pl.col("tokens") / (pl.col("longest") * pl.col("prompts")).clip(lower_bound=1)).alias("padding")
    )


def _instances(per_mb: pl.DataFrame, instances: int, timed: bool) -> dict[str, Any]:
    idx = per_mb["instance"].to_numpy()
    minibatches = np.bincount(idx, minlength=instances)
    tokens = np.bincount(idx, weights=per_mb["tokens"].to_numpy().astype(np.float64), minlength=instances)
    out: dict[str, Any] = {
        "minibatches": [int(x) for x in minibatches],
        "predicted_tokens": [int(x) for x in tokens],
        "tokens_spread": _spread(tokens),
        "busy_s": None,
        "end_s": None,
        "busy_spread": None,
        "finish_spread_s": None,
    }
    if timed:
        busy = np.bincount(idx, weights=(per_mb["end_s"] - per_mb["start_s"]).to_numpy(), minlength=instances)
        end = np.zeros(instances)
        np.maximum.at(end, idx, per_mb["end_s"].to_numpy())
        out.update(
            busy_s=[_r(x, 3) for x in busy],
            end_s=[_r(x, 3) for x in end],
            busy_spread=_spread(busy),
            finish_spread_s=_r(end.max() - end.min(), 3),
            makespan_s=_r(end.max(), 3),
        )
    return out


def _predicted_lengths(frame: pl.DataFrame) -> dict[str, Any]:
    values = frame["predicted_tokens"].to_numpy()
    edges = _log_edges(values.min(), values.max())
    out: dict[str, Any] = {
        "column": "predicted_tokens",
        "quantiles": _quantiles(values),
        "histogram": {"edges": [int(e) for e in edges], "counts": _histogram(values, edges)},
        "sources": None,
    }
    if "prediction_source" in frame.columns:
        counts = frame.group_by("prediction_source").len().sort("prediction_source")
        out["sources"] = {str(k): int(v) for k, v in zip(counts["prediction_source"], counts["len"])}
    return out


def _minibatch_lengths(per_mb: pl.DataFrame) -> dict[str, Any]:
    longest = per_mb["longest"].to_numpy().astype(np.float64)
    shortest = per_mb["shortest"].to_numpy().astype(np.float64)
    return {
        "prompts": _quantiles(per_mb["prompts"].to_numpy()),
        "longest_predicted_tokens": _quantiles(longest),
        "mean_predicted_tokens": _quantiles(per_mb["tokens"].to_numpy() / per_mb["prompts"].to_numpy()),
        # How tight the packing is: shortest / longest predicted length inside a minibatch (1 = uniform).
        "shortest_to_longest": _quantiles(shortest / np.maximum(longest, 1.0), 3),
    }


def _padding(per_mb: pl.DataFrame) -> dict[str, Any]:
    slots = float((per_mb["longest"] * per_mb["prompts"]).sum())
    fraction = 1.0 - float(per_mb["tokens"].sum()) / slots if slots else 0.0
    return {
        "fraction": _r(fraction),
        "per_minibatch": _quantiles(per_mb["padding"].to_numpy(), 4),
    }


def _step_end_times(frame: pl.DataFrame, meta: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Each training step's start and end (after the weight sync), from the preset's trainer cost."""
    preset = meta.get("preset") or {}
    if "train_fixed_s" not in preset:
        return None
    tokens = frame["predicted_mean_tokens"] if "predicted_mean_tokens" in frame.columns else frame["predicted_tokens"]
    prompt = frame["prompt_tokens"] if "prompt_tokens" in frame.columns else pl.Series([0] * frame.height)
    step = frame["train_step"].to_numpy()
    steps = int(step.max()) + 1
    ready = np.zeros(steps)
    np.maximum.at(ready, step, frame["expected_finish_s"].to_numpy())
    step_tokens = np.bincount(step, weights=n * (prompt.to_numpy() + tokens.to_numpy()).astype(np.float64),
                              minlength=steps)
    busy = (float(preset["train_fixed_s"]) + float(preset.get("train_per_token_s", 0.0)) * step_tokens
            + float(preset.get("weight_sync_s", 0.0)))
    return run_steps(ready, busy)


def _queue(frame: pl.DataFrame, meta: dict[str, Any], n: int) -> dict[str, Any]:
    """Finished groups reaching the trainer's queue against the groups the trainer takes, over time."""
    arrival = np.sort(frame["expected_finish_s"].to_numpy())
    step = frame["train_step"].to_numpy()
    groups_per_step = np.bincount(step)
    timing = _step_end_times(frame, meta, n)
    horizon = float(arrival[-1]) if arrival.size else 0.0
    if timing is not None:
        horizon = max(horizon, float(timing[1][-1]))
    grid = np.linspace(0.0, horizon, _GRID_POINTS)
    arrived = np.searchsorted(arrival, grid, side="right")
    out: dict[str, Any] = {
        "grid_s": [_r(t, 3) for t in grid],
        "arrived_groups": [int(x) for x in arrived],
        "consumed_groups": None,
        "queue_groups": None,
        "arrival_rate_cv": None,
        "trainer_first_start_s": None,
        "trainer_idle_s": None,
        "trainer_idle_fraction": None,
        "trainer_end_s": None,
    }
    # How steady the flow is: coefficient of variation of groups arriving per 1/40 of the rollout span.
    bins = np.histogram(arrival, bins=40, range=(0.0, max(float(arrival[-1]), 1e-9)))[0] if arrival.size else []
    if len(bins) and np.mean(bins) > 0:
        out["arrival_rate_cv"] = _r(np.std(bins) / np.mean(bins))
    if timing is not None:
        start, end = timing
        consumed_at = np.cumsum(groups_per_step)
        taken = np.searchsorted(start, grid, side="right")
        consumed = np.where(taken > 0, consumed_at[np.clip(taken - 1, 0, None)], 0)
        # Idle: the trainer waits for data between steps (the wait before the first step is reported apart).
        waits = np.maximum(start[1:] - end[:-1], 0.0)
        span = float(end[-1] - start[0])
        out.update(
            consumed_groups=[int(x) for x in consumed],
            queue_groups=[int(a - c) for a, c in zip(arrived, consumed)],
            trainer_first_start_s=_r(start[0], 3),
            trainer_idle_s=_r(waits.sum(), 3),
            trainer_idle_fraction=_r(waits.sum() / span if span > 0 else 0.0),
            trainer_end_s=_r(end[-1], 3),
            step_start_s=[_r(x, 3) for x in start],
            step_end_s=[_r(x, 3) for x in end],
        )
    return out


def _effective_batch(frame: pl.DataFrame, n: int, instances: int) -> dict[str, Any]:
    """Live sequences over time, all instances together.

    A group counts N sequences from its minibatch's start until its last sample ends (its expected
    finish): an upper bound, since the group's other samples may end earlier.
    """
    start = np.sort(frame["expected_start_s"].to_numpy())
    finish = np.sort(frame["expected_finish_s"].to_numpy())
    horizon = float(finish[-1]) if finish.size else 0.0
    grid = np.linspace(0.0, horizon, _GRID_POINTS)
    live = n * (np.searchsorted(start, grid, side="right") - np.searchsorted(finish, grid, side="right"))
    busy_mean = float(live[grid < horizon].mean()) if (grid < horizon).any() else 0.0
    return {
        "grid_s": [_r(t, 3) for t in grid],
        "live_sequences": [int(x) for x in live],
        "mean_live_sequences_per_instance": _r(busy_mean / max(instances, 1), 1),
        "peak_live_sequences": int(live.max()) if live.size else 0,
    }


def _lag(frame: pl.DataFrame, settings: dict[str, Any]) -> dict[str, Any] | None:
    if "expected_lag" not in frame.columns:
        return None
    lag = frame["expected_lag"].to_numpy()
    values, counts = np.unique(lag, return_counts=True)
    return {
        "mean": _r(lag.mean(), 3),
        "max": int(lag.max()),
        "bound": settings.get("max_lag"),
        "histogram": [[int(v), int(c)] for v, c in zip(values, counts)],
    }


def _steps(frame: pl.DataFrame) -> dict[str, Any]:
    """How representative each training step is of its epoch.

    A step's ratio is its groups' mean predicted length over the mean of the epochs they come from
    (1.0 = a typical step); its tail share is the fraction of its groups in the epoch's longest 10%.
    """
    column = "predicted_mean_tokens" if "predicted_mean_tokens" in frame.columns else "predicted_tokens"
    length = pl.col(column).cast(pl.Float64)
    rows = frame.with_columns(
        length.mean().over("epoch").alias("epoch_mean"),
        (length > length.quantile(_TAIL_QUANTILE, "nearest").over("epoch")).alias("tail"),
    )
    aggs = [
        pl.len().alias("groups"),
        length.mean().alias("mean_tokens"),
        pl.col("epoch_mean").mean(),
        pl.col("tail").mean().alias("tail_share"),
        pl.col("epoch").min().alias("epoch"),
    ]
    if "expected_lag" in frame.columns:
        aggs.append(pl.col("expected_lag").mean().alias("lag_mean"))
    per_step = rows.group_by("train_step").agg(aggs).sort("train_step")
    ratio = (per_step["mean_tokens"] / per_step["epoch_mean"]).to_numpy()
    full = per_step["groups"].to_numpy() == per_step["groups"].max()
    skew = np.abs(ratio - 1.0)
    table = []
    for i, s in enumerate(per_step.iter_rows(named=True)):
        table.append({
            "step": int(s["train_step"]),
            "epoch": int(s["epoch"]),
            "groups": int(s["groups"]),
            "mean_tokens": _r(s["mean_tokens"], 1),
            "ratio_to_epoch_mean": _r(ratio[i]),
            "tail_share": _r(s["tail_share"]),
            "lag_mean": _r(s.get("lag_mean"), 3) if "lag_mean" in s else None,
        })
    return {
        "length_column": column,
        "ratio": _quantiles(ratio, 4),
        # The last step of a run may be a partial batch; skew counts full steps only when there are any.
        "max_skew": _r(skew[full].max() if full.any() else skew.max()),
        "tail_share_expected": _r(1.0 - _TAIL_QUANTILE),
        "table": table,
    }


def _minibatch_table(per_mb: pl.DataFrame, timed: bool) -> list[dict[str, Any]]:
    table = []
    has_class = "length_class" in per_mb.columns
    for m in per_mb.iter_rows(named=True):
        entry = {
            "minibatch": int(m["minibatch"]),
            "instance": int(m["instance"]),
            "epoch": int(m["epoch"]),
            "prompts": int(m["prompts"]),
            "longest_predicted_tokens": int(m["longest"]),
            "mean_predicted_tokens": _r(m["tokens"] / m["prompts"], 1),
            "padding": _r(m["padding"]),
            "length_class": int(m["length_class"]) if has_class and m["length_class"] is not None else None,
            "start_s": _r(m["start_s"], 3) if timed else None,
            "end_s": _r(m["end_s"], 3) if timed else None,
        }
        table.append(entry)
    return table


def _rank(values: np.ndarray) -> np.ndarray:
    return pl.Series(values).rank("average").to_numpy().astype(np.float64)


def _observed(frame: pl.DataFrame, per_mb: pl.DataFrame, observed: ObservedLengths,
              instances: int) -> dict[str, Any]:
    """Observed lengths next to the predictions: accuracy, and padding and balance replayed with them."""
    obs = observed.frame
    joined = frame.join(obs, on="prompt_id", how="left")
    matched = joined.filter(pl.col("observed_max_tokens").is_not_null())
    first_epoch = frame["epoch"].min()
    scheduled_ids = frame.filter(pl.col("epoch") == first_epoch)["prompt_id"]
    out: dict[str, Any] = {
        "files": list(observed.files),
        "samples": int(obs["samples"].sum()),
        "prompts_observed": obs.height,
        "prompts_matched": int(scheduled_ids.is_in(obs["prompt_id"].implode()).sum()),
        "prompts_unmatched": int((~scheduled_ids.is_in(obs["prompt_id"].implode())).sum()),
        "observed_not_in_schedule": int((~obs["prompt_id"].is_in(scheduled_ids.implode())).sum()),
        "truncated_fraction": _r(obs["truncated_samples"].sum() / max(int(obs["samples"].sum()), 1)),
    }
    if matched.height == 0:
        out.update(quantiles=None, histogram=None, spearman=None, median_abs_log_error=None, tail_recall=None,
                   padding_fraction=None, instance_tokens=None, instance_tokens_spread=None, points=[])
        return out
    once = matched.filter(pl.col("epoch") == first_epoch)
    predicted = once["predicted_tokens"].to_numpy().astype(np.float64)
    actual = once["observed_max_tokens"].to_numpy().astype(np.float64)
    values = frame["predicted_tokens"].to_numpy()
    edges = _log_edges(min(values.min(), actual.min()), max(values.max(), actual.max()))
    spearman = None
    if once.height > 2 and np.std(predicted) > 0 and np.std(actual) > 0:
        spearman = _r(np.corrcoef(_rank(predicted), _rank(actual))[0, 1])
    # Tail recall: of the prompts in the observed longest 10%, the share the prediction also put there.
    k = max(int(round(once.height * (1.0 - _TAIL_QUANTILE))), 1)
    top_actual = set(np.argsort(-actual, kind="stable")[:k].tolist())
    top_predicted = set(np.argsort(-predicted, kind="stable")[:k].tolist())
    mb = matched.group_by("minibatch").agg(
        pl.col("instance").first(),
        pl.len().alias("prompts"),
        pl.col("observed_max_tokens").max().alias("longest"),
        pl.col("observed_max_tokens").sum().alias("tokens"),
        pl.col("observed_mean_tokens").sum().alias("mean_tokens"),
    )
    slots = float((mb["longest"] * mb["prompts"]).sum())
    tokens = np.bincount(mb["instance"].to_numpy(), weights=mb["mean_tokens"].to_numpy(), minlength=instances)
    # Predicted histogram edges are reused so the two distributions can be drawn on one axis.
    points = once.select("predicted_tokens", "observed_max_tokens").sort("predicted_tokens", "observed_max_tokens")
    step = max(points.height // 1500, 1)  # enough points for a scatter plot, a bounded JSON size
    out.update(
        quantiles=_quantiles(actual),
        histogram={"edges": [int(e) for e in edges], "predicted_counts": _histogram(values, edges),
                   "observed_counts": _histogram(actual, edges)},
        spearman=spearman,
        median_abs_log_error=_r(np.median(np.abs(np.log(np.maximum(predicted, 1)) - np.log(np.maximum(actual, 1))))),
        tail_recall=_r(len(top_actual & top_predicted) / k),
        padding_fraction=_r(1.0 - float(mb["tokens"].sum()) / slots if slots else 0.0),
        instance_tokens=[int(x) for x in tokens],
        instance_tokens_spread=_spread(tokens),
        points=[[int(p), int(a)] for p, a in points[::step].iter_rows()],
    )
    return out


# --------------------------------------------------------------------------------------------------------
# Comparison and checks

# (key path, label, which way is better) of the facts shown side by side by `--compare`.
HEADLINE: tuple[tuple[str, str, str], ...] = (
    ("size.prompts", "prompts", ""),
    ("size.epochs", "epochs", ""),
    ("size.instances", "instances", ""),
    ("size.minibatches", "minibatches", ""),
    ("size.train_steps", "train steps", ""),
    ("padding.fraction", "predicted padding", "lower"),
    ("instances.tokens_spread", "instance token spread", "lower"),
    ("instances.busy_spread", "instance busy spread", "lower"),
    ("instances.makespan_s", "rollout makespan (s)", "lower"),
    ("instances.finish_spread_s", "instance finish spread (s)", "lower"),
    ("queue.arrival_rate_cv", "arrival rate CV", "lower"),
    ("queue.trainer_idle_fraction", "trainer idle fraction", "lower"),
    ("queue.trainer_end_s", "last step ends (s)", "lower"),
    ("effective_batch.mean_live_sequences_per_instance", "mean live seqs / instance", "higher"),
    ("lag.mean", "mean lag (steps)", "lower"),
    ("lag.max", "max lag (steps)", "lower"),
    ("steps.max_skew", "worst step skew", "lower"),
    ("observed.padding_fraction", "observed padding", "lower"),
    ("observed.spearman", "Spearman (pred vs obs)", "higher"),
)


def fact(report: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a report, or None where a section is missing."""
    node: Any = report
    for key in path.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return None
        node = node[key]
    return node


def headline(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline facts of one report, in display order (missing ones left out)."""
    return [{"fact": path, "label": label, "value": fact(report, path), "better": better}
            for path, label, better in HEADLINE if fact(report, path) is not None]


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two reports side by side: each headline fact for A and B, the change, and which is better.

    Returns
    -------
    dict
        ``{"report_version", "a": name, "b": name, "facts": [{"fact", "label", "a", "b", "change",
        "better"}]}`` where ``better`` is "a", "b", "same" or null (a size, not a quality).
    """
    facts = []
    for path, label, better in HEADLINE:
        va, vb = fact(a, path), fact(b, path)
        if va is None and vb is None:
            continue
        change = _r(vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        winner = None
        if better and change is not None:
            winner = "same" if change == 0 else ("b" if (change < 0) == (better == "lower") else "a")
        facts.append({"fact": path, "label": label, "a": va, "b": vb, "change": change, "better": winner})
    return {"report_version": REPORT_VERSION, "a": a["schedule"]["name"], "b": b["schedule"]["name"],
            "facts": facts}


@dataclass(frozen=True)
class CheckLimits:
    """Thresholds for `asp report --check`; None means not checked."""

    max_padding: float | None = None
    max_instance_spread: float | None = None
    max_lag: int | None = None
    max_step_skew: float | None = None
    max_trainer_idle: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_padding", "max_instance_spread", "max_lag", "max_step_skew", "max_trainer_idle"):
            value = getattr(self, name)
            flag = _CHECKS[name][0]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                # NaN too: no value would ever pass or break it
                raise SettingsError(f"{flag} must be a number of at least 0 (got {value})")
            if name == "max_lag" and not isinstance(value, int):
                raise SettingsError(f"{flag} must be a whole number of steps (got {value})")

    def any(self) -> bool:
        return any(v is not None for v in (self.max_padding, self.max_instance_spread, self.max_lag,
                                            self.max_step_skew, self.max_trainer_idle))


# limit field -> (command-line flag, fact paths tried in order, what the fact is)
_CHECKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "max_padding": ("--max-padding", ("padding.fraction",), "predicted padding fraction"),
    "max_instance_spread": ("--max-instance-spread", ("instances.busy_spread", "instances.tokens_spread"),
                            "instance spread (max - min) / mean"),
    "max_lag": ("--max-lag", ("lag.max",), "expected policy lag in steps"),
    "max_step_skew": ("--max-step-skew", ("steps.max_skew",), "worst |step mean length / epoch mean - 1|"),
    "max_trainer_idle": ("--max-trainer-idle", ("queue.trainer_idle_fraction",), "trainer idle fraction"),
}


def check_report(report: dict[str, Any], limits: CheckLimits) -> dict[str, Any]:
    """Test a report against thresholds.

    Returns
    -------
    dict
        ``{"passed": bool, "results": [{"check", "flag", "fact", "limit", "value", "passed", "message"}]}``;
        a fact the schedule cannot give (missing columns) fails its check, since it cannot be vouched for.
    """
    results = []
    for name, (flag, paths, what) in _CHECKS.items():
        limit = getattr(limits, name)
        if limit is None:
            continue
        path = next((p for p in paths if fact(report, p) is not None), paths[0])
        value = fact(report, path)
        passed = value is not None and value <= limit
        if value is None:
            message = f"{flag} {limit}: the schedule has no {what} (its expected_* columns are missing)"
        else:
            verdict = "ok" if passed else "broken"
            message = f"{flag} {limit}: {what} is {value} ({verdict})"
        results.append({"check": name, "flag": flag, "fact": path, "limit": limit, "value": value,
                        "passed": passed, "message": message})
    return {"passed": all(r["passed"] for r in results), "results": results}


# --------------------------------------------------------------------------------------------------------
# Files in, one result out: the Python twin of `asp report`


@dataclass
class ReportResult:
    """What `report_schedule` found: the report, and the comparison and check results when asked for."""

    report: dict[str, Any]
    other: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    checks: dict[str, Any] | None = None
    skipped_rows: int = 0  # bad rows of the --lengths files skipped with on_bad_row="skip"

    def document(self) -> dict[str, Any]:
        """The JSON document of `asp report --json`: the report plus ``checks`` and ``comparison`` (or null);
        ``comparison`` holds the facts side by side and, under ``other``, the other schedule's full report."""
        comparison = None if self.comparison is None else {**self.comparison, "other": self.other}
        return {**self.report, "checks": self.checks, "comparison": comparison}


def report_schedule(
    schedule: Path,
    *,
    lengths: Sequence[Path] = (),
    read: ReadOptions = REPORT_READ,
    compare: Path | None = None,
    limits: CheckLimits | None = None,
    simulate: bool = False,
) -> ReportResult:
    """Read a schedule (and optionally observed lengths and a second schedule) and report on it.

    This is what `asp report` runs. With ``simulate``, the schedule is also replayed in the simulator (on the
    observed lengths when given) and the report's ``simulated`` section holds the replay
    (`asp_cli.report.simulated.simulated_section`). Each file is read once.

    Raises
    ------
    ScheduleFormatError
        When a file is not an asp schedule or is of a newer format version.
    InputError
        When a lengths file is unreadable.
    """
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import read_schedule

    observed = None
    samples = None
    skipped = 0
    if lengths:
        samples, report = read_lengths([Path(p) for p in lengths], read)
        skipped = report.skipped_rows
        observed = observed_from_samples(samples, lengths)
    # Two files of the same name (before/s.parquet, after/s.parquet) are told apart by their paths.
    same_name = compare is not None and Path(compare).name == Path(schedule).name
    loaded = read_schedule(Path(schedule))
    main = build_report(loaded, observed=observed, name=str(schedule) if same_name else None)
    if simulate:
        from asp_cli.report.simulated import simulated_section

        main["simulated"] = simulated_section(loaded, samples, skipped_rows=skipped)
    result = ReportResult(report=main, skipped_rows=skipped)
    if compare is not None:
        result.other = build_report(read_schedule(Path(compare)), observed=observed,
                                    name=str(compare) if same_name else None)
        result.comparison = compare_reports(main, result.other)
    if limits is not None and limits.any():
        result.checks = check_report(main, limits)
    return result


QUANTILE_NAMES = ("p0", "p10", "p50", "p90", "p100", "mean")


def length_quantile_rows(report: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """The rows of the length and padding quantile table both renderers draw: (label, quantiles, kind).

    ``kind`` is "tokens", "ratio" or "percent": how the renderer formats the values.
    """
    mbs = report["minibatches"]
    rows = [
        ("group length (planned)", report["predicted_lengths"]["quantiles"], "tokens"),
        ("minibatch: prompts", mbs["prompts"], "tokens"),
        ("minibatch: longest", mbs["longest_predicted_tokens"], "tokens"),
        ("minibatch: mean", mbs["mean_predicted_tokens"], "tokens"),
        ("minibatch: shortest / longest", mbs["shortest_to_longest"], "ratio"),
        ("minibatch: padding", report["padding"]["per_minibatch"], "percent"),
    ]
    if (report.get("observed") or {}).get("quantiles"):
        rows.insert(1, ("observed group max", report["observed"]["quantiles"], "tokens"))
    return rows
