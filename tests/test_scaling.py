"""asp_cli.arrange.scaling: a judged sample's replay scaled up to the whole run."""

from __future__ import annotations

import numpy as np
import pytest


def test_run_time_keeps_the_head_and_the_drain_and_scales_the_middle():
    from types import SimpleNamespace

    from asp_cli.arrange.scaling import run_time

    # First train step at 10 s, last admission at 70 s, last group in at 85 s, end at 100 s: head 10, drain 15,
    # middle 75 (the trainer's steps after the last arrival grow with the run).
    result = SimpleNamespace(metrics={"end_to_end_s": 100.0}, seq_admit_s=np.array([0.0, 5.0, 70.0]),
                             group_arrival_s=np.array([30.0, 85.0]), step_start_s=np.array([10.0, 40.0, 90.0]))
    assert run_time(result, 1.0) == 100.0  # an input judged whole
    assert run_time(result, 5.0) == pytest.approx(10.0 + 15.0 + 5 * 75.0)


def test_run_rollout_keeps_the_drain_and_scales_the_rest():
    from types import SimpleNamespace

    from asp_cli.arrange.scaling import run_rollout_s

    # Last admission at 70 s, last group in at 85 s: drain 15, the 70 s before it grow with the run.
    result = SimpleNamespace(metrics={"rollout_makespan_s": 85.0}, seq_admit_s=np.array([0.0, 5.0, 70.0]))
    assert run_rollout_s(result, 1.0) == 85.0
    assert run_rollout_s(result, 4.0) == pytest.approx(15.0 + 4 * 70.0)


def test_a_replay_as_verl_routes_is_scaled_as_the_simulators_is():
    """async_run_time / async_rollout_s: the same split, a prompt's submission standing for its admission."""
    from types import SimpleNamespace

    from asp_cli.arrange.scaling import async_rollout_s, async_run_time

    result = SimpleNamespace(end_to_end_s=100.0, rollout_end_s=85.0, group_submit_s=np.array([0.0, 5.0, 70.0]),
                             group_arrival_s=np.array([30.0, 85.0]), step_start_s=np.array([10.0, 40.0, 90.0]))
    assert async_run_time(result, 1.0) == 100.0 and async_rollout_s(result, 1.0) == 85.0
    assert async_run_time(result, 5.0) == pytest.approx(10.0 + 15.0 + 5 * 75.0)
    assert async_rollout_s(result, 4.0) == pytest.approx(15.0 + 4 * 70.0)
