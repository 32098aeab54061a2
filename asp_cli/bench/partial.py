"""The time a replay spends on the rows past an epoch's last whole train batch: each epoch's short last step, which a
dataloader that drops a partial last batch (verl's ``drop_last``, one epoch exported at a time) never runs, so a
replay's times are not a verl run's by that much (a verl newcomer's comparison of a `bands` plan replayed its 468
longest prompts, which verl drops). `asp simulate` says it in its warning and `--compare` in each row
(``partial_step_s``, ``verl_routed_partial_step_s``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from asp_cli.sim.records import SimulationResult


def partial_steps(frame: pl.DataFrame, train_batch_size: int) -> np.ndarray:
    """The steps (indices into the schedule's sorted ``train_step`` values, as a replay that follows the steps
    numbers them) that are an epoch's partial last batch: the epoch's last step, holding its own rows alone, as many
    as the epoch holds past its whole train batches (not 0). Empty where the steps run across the epochs' ends (a
    trainer that takes groups as they finish fills them), or a row's own short step (rollpacker-tail's long rounds)
    is not that batch."""
    if not frame.height or "train_step" not in frame.columns:
        return np.zeros(0, dtype=np.int64)
    steps = np.unique(frame["train_step"].to_numpy())
    per_step = frame.group_by("train_step").agg(pl.len().alias("rows"), pl.col("epoch").n_unique().alias("epochs"))
    ends = frame.group_by("epoch").agg(pl.len().alias("rows"), pl.col("train_step").max().alias("train_step"))
    last = ends.join(per_step, on="train_step", suffix="_step").sort("epoch")
    short = last.filter((pl.col("rows") % train_batch_size > 0) & (pl.col("epochs") == 1)
                        & (pl.col("rows_step") == pl.col("rows") % train_batch_size))
    if short.height != last.filter(pl.col("rows") % train_batch_size > 0).height:
        return np.zeros(0, dtype=np.int64)  # some epoch's remainder is no step of its own: not the batch dropped
    return np.searchsorted(steps, short["train_step"].to_numpy()).astype(np.int64)


def partial_step(result: SimulationResult, frame: pl.DataFrame, train_batch_size: int, max_lag: int | float | None,
                 trainer: str) -> dict[str, float]:
    """``{"partial_step_s": T}``: what the epochs' partial last steps (`partial_steps`) add to a replay's end-to-end
    time (each step's end less the end of the step before), where a synchronous trainer follows the steps
    (``max_lag`` 0, ``trainer`` schedule), so each step runs alone; nothing otherwise. Over several epochs, each
    epoch's short last step summed (one epoch alone before 2026-12-07)."""
    short = partial_steps(frame, train_batch_size)
    ends = np.asarray(result.step_end_s, dtype=np.float64)
    if max_lag != 0 or trainer != "schedule" or not short.size or ends.size < 2 or short.max() >= ends.size:
        return {}
    ends = ends.copy()
    ends[-1] = float(result.metrics["end_to_end_s"])  # the run ends with its last step
    before = np.concatenate(([0.0], ends[:-1]))
    return {"partial_step_s": float(np.sum(ends[short] - before[short]))}


def routed_partial_step(verl: Any, frame: pl.DataFrame, train_batch_size: int, weight_sync_s: float,
                        one_step_off: bool) -> dict[str, float]:
    """``{"verl_routed_partial_step_s": T}``: what the epochs' partial last steps (`partial_steps`) add to a replay
    as verl routes it step by step (``verl``: `asp_cli.sim.submit_all.SubmitAllResult`, whose steps are the
    schedule's): each such step's rollout and training where the steps take turns; where each rollout runs while the
    step before trains (``one_step_off``: slime's train_async.py, OpenRLHF's --train.async_enable), the end-to-end
    time less that of the same steps without them (`one_step_off_end_to_end_s`). Nothing where no step is an epoch's
    partial batch. The as-verl-routes line and column had none (a review's, 2026-12-07)."""
    from asp_cli.sim.submit_all import one_step_off_end_to_end_s

    short = partial_steps(frame, train_batch_size)
    if not short.size:
        return {}
    rollout, train = np.asarray(verl.rollout_s, dtype=np.float64), np.asarray(verl.train_s, dtype=np.float64)
    if rollout.size < 2 or short.max() >= rollout.size:
        return {}
    if not one_step_off:
        return {"verl_routed_partial_step_s": float(np.sum(rollout[short] + train[short]))}
    kept = np.ones(rollout.size, dtype=bool)
    kept[short] = False
    without = one_step_off_end_to_end_s(rollout[kept], train[kept], weight_sync_s)
    return {"verl_routed_partial_step_s": float(verl.end_to_end_s - without)}
