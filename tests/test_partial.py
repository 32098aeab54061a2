"""asp_cli.bench.partial: which steps are an epoch's partial last batch, and what they add to a replay."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asp_cli.bench.partial import partial_steps, routed_partial_step
from asp_cli.sim.submit_all import SubmitAllResult, one_step_off_end_to_end_s


def _frame(steps_per_epoch: list[list[int]]) -> pl.DataFrame:
    """Rows per step, epoch by epoch: [[32, 4], [32, 4]] is two epochs of 36 rows, each ending in a step of 4."""
    epoch, step, k = [], [], 0
    for e, sizes in enumerate(steps_per_epoch):
        for size in sizes:
            epoch += [e] * size
            step += [k] * size
            k += 1
    return pl.DataFrame({"epoch": epoch, "train_step": step})


def test_each_epochs_short_last_step_of_its_own_rows_is_the_partial_batch():
    assert partial_steps(_frame([[32, 4]]), 32).tolist() == [1]
    assert partial_steps(_frame([[32, 4], [32, 4]]), 32).tolist() == [1, 3]  # several epochs, each its own
    assert partial_steps(_frame([[32, 32]]), 32).tolist() == []  # whole batches
    assert partial_steps(_frame([[32, 2, 2]]), 32).tolist() == []  # a row's own short steps: not that batch
    # Steps across the epochs' ends (a trainer taking groups as they finish): the remainder is no step of its own.
    across = pl.DataFrame({"epoch": [0] * 36 + [1] * 36, "train_step": [0] * 32 + [1] * 32 + [2] * 8})
    assert partial_steps(across, 32).tolist() == []


def test_the_partial_steps_as_verl_routes_are_their_rollout_and_training_or_what_they_add_one_step_off():
    rollout, train = np.array([10.0, 3.0, 10.0, 3.0]), np.array([2.0, 1.0, 2.0, 1.0])
    steps = SubmitAllResult(end_to_end_s=float(rollout.sum() + train.sum()), rollout_s=rollout, train_s=train,
                            server_busy_s=np.zeros((4, 1)), requests_per_server=np.ones((4, 1)))
    frame = _frame([[32, 4], [32, 4]])
    assert routed_partial_step(steps, frame, 32, 0.5, False) == {"verl_routed_partial_step_s": 8.0}
    overlapped = SubmitAllResult(end_to_end_s=one_step_off_end_to_end_s(rollout, train, 0.5), rollout_s=rollout,
                                 train_s=train, server_busy_s=np.zeros((4, 1)), requests_per_server=np.ones((4, 1)))
    without = one_step_off_end_to_end_s(rollout[[0, 2]], train[[0, 2]], 0.5)
    assert routed_partial_step(overlapped, frame, 32, 0.5, True)["verl_routed_partial_step_s"] == pytest.approx(
        overlapped.end_to_end_s - without)
    assert routed_partial_step(steps, _frame([[32, 32], [32, 32]]), 32, 0.5, False) == {}
