"""Observed response lengths next to a schedule's predictions: the ``observed`` section of `asp report --lengths`
(docs/report.md, "Observed lengths")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.report.numbers import TAIL_QUANTILE, histogram, log_edges, quantiles, rank, rounded, spread


@dataclass(frozen=True)
class ObservedLengths:
    """Observed response lengths, one row per prompt: ``prompt_id``, ``observed_max_tokens``,
    ``observed_mean_tokens``, ``samples``, ``truncated_samples`` (see `observed_from_samples`)."""

    frame: pl.DataFrame
    files: tuple[str, ...] = ()
    epoch: int | None = None  # the epoch of the files kept (`asp report --lengths-epoch`; -1: a probe's); None: all


def observed_from_samples(samples: pl.DataFrame, files: Sequence[Path | str] = (), *,
                          epoch: int | None = None) -> ObservedLengths:
    """Aggregate per-sample lengths (as `reading.read_lengths` returns them) to one row per prompt.

    The group's maximum is the label that matters for a GRPO group (it ends the group), the mean is what
    the trainer consumes. ``epoch``: the epoch the samples were kept of (`asp report --lengths-epoch`), recorded.
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
    return ObservedLengths(frame=frame, files=tuple(Path(f).name for f in files), epoch=epoch)


def observed_section(frame: pl.DataFrame, per_mb: pl.DataFrame, observed: ObservedLengths,
              instances: int) -> dict[str, Any]:
    """Observed lengths next to the predictions: accuracy, and padding and balance replayed with them."""
    obs = observed.frame
    joined = frame.join(obs, on="prompt_id", how="left")
    matched = joined.filter(pl.col("observed_max_tokens").is_not_null())
    first_epoch = frame["epoch"].min()
    scheduled_ids = frame.filter(pl.col("epoch") == first_epoch)["prompt_id"]
    out: dict[str, Any] = {
        "files": list(observed.files),
        "epoch": observed.epoch,
        "samples": int(obs["samples"].sum()),
        "prompts_observed": obs.height,
        "prompts_matched": int(scheduled_ids.is_in(obs["prompt_id"].implode()).sum()),
        "prompts_unmatched": int((~scheduled_ids.is_in(obs["prompt_id"].implode())).sum()),
        "observed_not_in_schedule": int((~obs["prompt_id"].is_in(scheduled_ids.implode())).sum()),
        "truncated_fraction": rounded(obs["truncated_samples"].sum() / max(int(obs["samples"].sum()), 1)),
    }
    if matched.height == 0:
        out.update(quantiles=None, histogram=None, spearman=None, median_abs_log_error=None, tail_recall=None,
                   padding_fraction=None, instance_tokens=None, instance_tokens_spread=None, points=[])
        return out
    once = matched.filter(pl.col("epoch") == first_epoch)
    predicted = once["predicted_tokens"].to_numpy().astype(np.float64)
    actual = once["observed_max_tokens"].to_numpy().astype(np.float64)
    values = frame["predicted_tokens"].to_numpy()
    edges = log_edges(min(values.min(), actual.min()), max(values.max(), actual.max()))
    spearman = None
    if once.height > 2 and np.std(predicted) > 0 and np.std(actual) > 0:
        spearman = rounded(np.corrcoef(rank(predicted), rank(actual))[0, 1])
    # Tail recall: of the prompts in the observed longest 10%, the share the prediction also put there.
    k = max(int(round(once.height * (1.0 - TAIL_QUANTILE))), 1)
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
        quantiles=quantiles(actual),
        histogram={"edges": [int(e) for e in edges], "predicted_counts": histogram(values, edges),
                   "observed_counts": histogram(actual, edges)},
        spearman=spearman,
        median_abs_log_error=rounded(np.median(np.abs(np.log(np.maximum(predicted, 1)) - np.log(np.maximum(actual, 1))))),
        tail_recall=rounded(len(top_actual & top_predicted) / k),
        padding_fraction=rounded(1.0 - float(mb["tokens"].sum()) / slots if slots else 0.0),
        instance_tokens=[int(x) for x in tokens],
        instance_tokens_spread=spread(tokens),
        points=[[int(p), int(a)] for p, a in points[::step].iter_rows()],
    )
    return out
