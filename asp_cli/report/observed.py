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
    ``observed_mean_tokens``, ``samples``, ``truncated_samples`` (see `observed_from_samples`).

    ``by_epoch``: where a schedule of several epochs meets lengths that number its epochs, the same columns per
    schedule row (``prompt_id`` and ``epoch``, the schedule's), each epoch's as `asp simulate` replays it
    (`observed_by_epoch`), with ``epochs_compared`` those compared; None: each prompt's row of ``frame`` in every
    epoch, the schedule's first epoch compared."""

    frame: pl.DataFrame
    files: tuple[str, ...] = ()
    epoch: int | None = None  # the epoch of the files kept (`asp report --lengths-epoch`; -1: a probe's); None: all
    by_epoch: pl.DataFrame | None = None
    epochs_compared: tuple[dict[str, Any], ...] = ()


def observed_from_samples(samples: pl.DataFrame, files: Sequence[Path | str] = (), *,
                          epoch: int | None = None, by_epoch: EpochRows | None = None) -> ObservedLengths:
    """Aggregate per-sample lengths (as `reading.read_lengths` returns them) to one row per prompt.

    The group's maximum is the label that matters for a GRPO group (it ends the group), the mean is what
    the trainer consumes. ``epoch``: the epoch the samples were kept of (`asp report --lengths-epoch`), recorded.
    ``by_epoch``: each schedule epoch's lengths, where they are matched by epoch (`observed_by_epoch`).
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
    return ObservedLengths(frame=frame, files=tuple(Path(f).name for f in files), epoch=epoch,
                           by_epoch=by_epoch.rows if by_epoch else None,
                           epochs_compared=by_epoch.compared if by_epoch else ())


@dataclass(frozen=True)
class EpochRows:
    """Each schedule row's observed lengths where they are matched by epoch (`observed_by_epoch`): ``rows`` (per
    ``prompt_id`` and schedule ``epoch``: ``observed_max_tokens``, ``observed_mean_tokens``, ``samples``,
    ``truncated_samples``, and ``judged``, the samples its group is judged by, as a replay judges them: its own
    epoch's where it has them, else all the prompt's), ``compared`` (the ``observed.epochs_compared`` entries)."""

    rows: pl.DataFrame
    compared: tuple[dict[str, Any], ...]


def observed_by_epoch(samples: pl.DataFrame, frame: pl.DataFrame, samples_per_prompt: int) -> EpochRows | None:
    """The observed lengths of each row of a schedule of several epochs, matched by epoch as `asp simulate
    --lengths` (and `asp report --simulate`) replays them (`asp_cli.sim.lengths.lengths_for_schedule`): a row of an
    epoch the lengths number takes its prompt's samples of that epoch first, then its others; a row of another epoch
    its prompt's samples oldest epoch first (`in_replay_order`); the first N of them. None where the schedule holds
    one epoch or the lengths number none of its epochs (``samples``: in replay order, a probe's left out): each
    prompt's first N, oldest epoch first, then stand for every epoch. The comparison with the predictions compared
    the oldest epoch alone, where the replay beside it replayed each epoch with its own (a review's, 2026-12-07).

    ``compared``: per epoch the lengths number, ``schedule_epoch``, ``lengths_epoch`` (the same), ``prompts`` (its
    rows with observed lengths) and ``prompts_from_other_epochs`` (those of them without a sample of that epoch, which
    took their other epochs', as the replay's ``epochs_replayed`` counts them)."""
    from asp_cli.sim.lengths import matched_epochs

    _, matched = matched_epochs(frame, samples)
    if not matched:
        return None
    truncated = pl.col("truncated").fill_null(False) if "truncated" in samples.columns else pl.lit(False)
    obs = samples.select("prompt_id", "response_tokens", truncated.alias("truncated"),
                         pl.col("epoch").fill_null(-1).cast(pl.Int64).alias("lengths_epoch"))
    obs = obs.with_columns(pl.int_range(pl.len()).over("prompt_id").alias("k"))  # replay order within the prompt
    # Each schedule row (a prompt in an epoch) numbered, so that the sorts and groupings below run on integers.
    pairs = frame.select("prompt_id", pl.col("epoch").cast(pl.Int64)).unique().sort("prompt_id", "epoch")
    pairs = pairs.with_row_index("row")
    own = pl.col("epoch").is_in(matched) & (pl.col("lengths_epoch") == pl.col("epoch"))
    laid = (pairs.join(obs, on="prompt_id", how="inner").select("row", "epoch", "response_tokens", "truncated",
                                                                 "lengths_epoch", "k", own.alias("own"))
            .sort(["row", "own", "k"], descending=[False, True, False]))
    per_row = laid.group_by("row").agg(
        pl.col("response_tokens").head(samples_per_prompt).max().alias("observed_max_tokens"),
        pl.col("response_tokens").head(samples_per_prompt).mean().alias("observed_mean_tokens"),
        pl.len().clip(upper_bound=samples_per_prompt).alias("samples"),
        pl.col("truncated").head(samples_per_prompt).cast(pl.Int64).sum().alias("truncated_samples"),
        pl.col("own").any().alias("own"),
        pl.when(pl.col("own").any()).then(pl.col("own").sum()).otherwise(pl.len()).alias("judged"),
        (pl.col("lengths_epoch") >= 0).any().alias("numbered"),
    )
    rows = pairs.join(per_row, on="row", how="inner").sort("row").drop("row")
    compared = []
    for e in matched:
        mine = rows.filter(pl.col("epoch") == e)
        compared.append({"schedule_epoch": e, "lengths_epoch": e, "prompts": mine.height,
                         "prompts_from_other_epochs": int((~mine["own"] & mine["numbered"]).sum())})
    return EpochRows(rows=rows.drop("own", "numbered"), compared=tuple(compared))


def epochs_compared_words(observed: dict[str, Any]) -> str:
    """Which epochs of the schedule the comparison with the predictions took, with which epoch's lengths, for both
    renderers ("" for a schedule of one epoch, or a report before 1.7)."""
    from asp_cli.sim.lengths import epochs_words

    compared = observed.get("epochs_compared") or []
    if not compared:
        return ""
    own = [c["schedule_epoch"] for c in compared if c["lengths_epoch"] == c["schedule_epoch"]]
    others = sum(c["prompts_from_other_epochs"] for c in compared)
    parts = []
    if own:
        parts.append(f"schedule {epochs_words(own)} with the lengths' own, as --simulate replays "
                     + ("it" if len(own) == 1 else "each")
                     + (f" ({others:,} prompt{'s' if others != 1 else ''} without a sample of its epoch with its other "
                        "epochs')" if others else ""))
    for c in compared:
        if c["lengths_epoch"] is None:
            parts.append(f"schedule epoch {c['schedule_epoch']} with each prompt's first samples, oldest epoch first")
        elif c["lengths_epoch"] != c["schedule_epoch"]:
            picked = (f"epoch {c['lengths_epoch']}" if c["lengths_epoch"] >= 0
                      else "the samples without an epoch (a probe's)")
            parts.append(f"schedule epoch {c['schedule_epoch']} with the lengths' {picked}")
    left = observed.get("epochs_left_out") or []
    if left:
        why = ("the lengths number no sample of it" if own else "the same lengths would stand for it again")
        if len(left) > 1:
            why = why.replace(" of it", " of them").replace("for it", "for them")
        parts.append(f"{epochs_words(left)} left out ({why})")
    return "compared: " + "; ".join(parts)


def observed_section(frame: pl.DataFrame, per_mb: pl.DataFrame, observed: ObservedLengths,
                     instances: int) -> dict[str, Any]:
    """Observed lengths next to the predictions: accuracy over the epochs compared (``epochs_compared``: each with
    its own lengths where they are matched by epoch, else the first), and padding and balance replayed with them
    over every epoch."""
    obs = observed.frame
    first_epoch = frame["epoch"].min()
    epochs = sorted(int(e) for e in frame["epoch"].unique().to_list())
    if observed.by_epoch is not None:  # each epoch with its own lengths, as a replay matches them
        joined = frame.join(observed.by_epoch.drop("judged"), on=["prompt_id", "epoch"], how="left")
        compared = [dict(entry) for entry in observed.epochs_compared]
    else:  # each prompt's lengths in every epoch: the first compared
        joined = frame.join(obs, on="prompt_id", how="left")
        compared = [{"schedule_epoch": first_epoch, "lengths_epoch": observed.epoch, "prompts": None,
                     "prompts_from_other_epochs": 0}] if len(epochs) > 1 else []
    matched = joined.filter(pl.col("observed_max_tokens").is_not_null())
    once = matched.filter(pl.col("epoch").is_in([c["schedule_epoch"] for c in compared] or [first_epoch]))
    for entry in compared:
        if entry["prompts"] is None:
            entry["prompts"] = once.height
    counted = once if observed.by_epoch is not None else obs  # the samples compared
    scheduled_ids = frame.filter(pl.col("epoch") == first_epoch)["prompt_id"]
    out: dict[str, Any] = {
        "files": list(observed.files),
        "epoch": observed.epoch,
        "epochs_compared": compared,
        "epochs_left_out": [e for e in epochs if compared and e not in {c["schedule_epoch"] for c in compared}],
        "samples": int(counted["samples"].sum()),
        "prompts_observed": obs.height,
        "prompts_matched": int(scheduled_ids.is_in(obs["prompt_id"].implode()).sum()),
        "prompts_unmatched": int((~scheduled_ids.is_in(obs["prompt_id"].implode())).sum()),
        "observed_not_in_schedule": int((~obs["prompt_id"].is_in(scheduled_ids.implode())).sum()),
        "truncated_fraction": rounded(counted["truncated_samples"].sum() / max(int(counted["samples"].sum()), 1)),
    }
    if matched.height == 0:
        out.update(quantiles=None, histogram=None, spearman=None, median_abs_log_error=None, tail_recall=None,
                   padding_fraction=None, instance_tokens=None, instance_tokens_spread=None, points=[])
        return out
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
