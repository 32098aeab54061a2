"""asp_cli.arrange.scaling: a judged sample's replay scaled up to the whole run."""

from __future__ import annotations

import numpy as np
import pytest

from asp_cli.costmodel import load_preset
from asp_cli.settings import ScheduleSettings

PRESET = load_preset()


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


def test_an_instance_slice_takes_as_long_per_step_for_its_share_of_the_load():
    from asp_cli.arrange.scaling import instance_slice

    part = instance_slice(PRESET, 0.25)
    assert part.max_num_seqs == PRESET.max_num_seqs // 4
    assert part.kv_capacity_tokens == pytest.approx(PRESET.kv_capacity_tokens / 4, abs=1)
    live, context = np.array([64.0, 512.0, 1024.0]), np.array([2e4, 3e5, 9e5])
    assert np.allclose(part.step_seconds(live / 4, context / 4), PRESET.step_seconds(live, context))
    assert np.allclose(part.prefill_seconds(np.array([1000.0]) / 4), PRESET.prefill_seconds(np.array([1000.0])))
    assert part.weight_sync_s == PRESET.weight_sync_s and part.train_per_token_s == PRESET.train_per_token_s


def test_the_miniature_cuts_instances_and_train_batch_with_the_prompts():
    from asp_cli.arrange.scaling import miniature_of

    # A 31,632-prompt mix on 8 instances, train batch 256, judged on 4,096 prompts: one instance of about 1.03
    # of a real one, train batch 33: the same prompts per instance and steps per epoch as the run.
    mix = ScheduleSettings(instances=8, samples_per_prompt=8, train_batch_size=256, engine="streaming")
    small = miniature_of(mix, PRESET, 4096, 31_632, 16_500)
    assert (small.instances, small.train_batch_size) == (1, 33)
    assert small.capacity_fraction == pytest.approx(33 / 256)
    assert small.preset.max_num_seqs == round(PRESET.max_num_seqs * 8 * 33 / 256)
    # The trainer takes as long per step as the run's: its per-token cost times the run's batch over 33.
    assert small.preset.train_per_token_s == pytest.approx(PRESET.train_per_token_s * 256 / 33)
    # A million prompts on 16 instances: the share (0.4% of an instance per instance) is below the floor of a
    # slice that holds a whole group of the longest requests: the miniature is that slice, larger than its share.
    big = ScheduleSettings(instances=16, samples_per_prompt=16, train_batch_size=512, engine="streaming")
    floor = miniature_of(big, PRESET, 4096, 1_000_000, 16_500)
    assert floor.instances == 1 and floor.preset.kv_capacity_tokens >= 16 * 16_500
    assert floor.capacity_fraction > 4096 / 1_000_000
    assert floor.train_batch_size == round(512 * floor.capacity_fraction)
    # A sample of a run on a hundred instances: a miniature of several.
    fleet = ScheduleSettings(instances=100, samples_per_prompt=8, train_batch_size=1024, engine="streaming")
    assert miniature_of(fleet, PRESET, 4096, 40_960, 16_500).instances == 10
    # Rounding the instances never cuts a slice below the floor: 1.75 instance-equivalents whose floor is 0.89 of
    # an instance make one slice of 1.75, not two of 0.875 (each a cache too small for one group).
    long = ScheduleSettings(instances=8, samples_per_prompt=16, train_batch_size=256, engine="streaming")
    tight = miniature_of(long, PRESET, 4096, 21_845, 53_000)
    assert tight.preset.kv_capacity_tokens >= 16 * 53_000
