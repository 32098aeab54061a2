"""asp_cli.sim.verl_async: verl's fully asynchronous rollout, each prompt submitted when a slot frees and its
samples routed one by one at submission."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asp_cli.costmodel import load_preset
from asp_cli.errors import SettingsError
from asp_cli.sim.engine import Engine
from asp_cli.sim.records import SimulationSettings, Stats
from asp_cli.sim.verl_async import replay_async, replay_async_frame

PRESET = load_preset("h100-qwen2.5-7b")


def _workload(rows: int = 96, n: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.normal(6.5, 1.0, (rows, n))).astype(np.int64).clip(1, 8000)
    return lengths, np.full(rows, 150, dtype=np.int64)


def _replay(lengths, prompts, **kw):
    kw = {"instances": 4, "train_batch_size": 16, "max_lag": 2, **kw}
    return replay_async(PRESET, response_tokens=lengths, prompt_tokens=prompts, **kw)


def test_deterministic_and_every_request_placed_once():
    lengths, prompts = _workload()
    first, again = _replay(lengths, prompts, seed=3), _replay(lengths, prompts, seed=3)
    assert first.end_to_end_s == again.end_to_end_s
    assert first.sample_server.tolist() == again.sample_server.tolist()
    assert first.requests_per_server.sum() == lengths.size
    assert np.bincount(first.sample_server, minlength=4).tolist() == first.requests_per_server.tolist()
    assert (first.group_step >= 0).all() and np.bincount(first.group_step).max() == 16
    assert first.end_to_end_s > first.rollout_end_s > 0
    # Each step starts once its train batch is in and the trainer is free, and ends after it started.
    assert first.step_start_s.size == first.step_end_s.size == np.bincount(first.group_step).size
    assert (first.step_end_s > first.step_start_s).all() and (np.diff(first.step_start_s) > 0).all()
    last_in = np.array([first.group_arrival_s[first.group_step == s].max() for s in range(first.step_end_s.size)])
    assert (first.step_start_s >= last_in).all()


def test_the_balancer_spreads_a_group_over_the_servers():
    # Every group submitted at once to quiet servers: fewest in flight deals each group's 4 samples one per server.
    lengths, prompts = _workload(rows=8)
    result = _replay(lengths, prompts, max_lag=None)
    spread = result.sample_server.reshape(8, 4)
    assert all(sorted(row) == [0, 1, 2, 3] for row in spread.tolist())


def test_sglang_routers_cache_aware_policy_keeps_each_group_on_one_server():
    # slime's router: a group's samples share their prompt and follow the first, which takes the least-loaded server.
    lengths, prompts = _workload(rows=8)
    result = _replay(lengths, prompts, max_lag=None, routing="cache-aware")
    whole = result.sample_server.reshape(8, 4)
    assert (whole == whole[:, :1]).all()
    assert np.bincount(whole[:, 0], minlength=4).tolist() == [2, 2, 2, 2]


def test_areals_round_robin_deals_every_sample_to_the_next_server_in_turn():
    lengths, prompts = _workload(rows=8)
    result = _replay(lengths, prompts, max_lag=None, routing="round-robin")
    assert result.sample_server.tolist() == [k % 4 for k in range(32)]


def test_areals_controller_deals_each_group_whole_to_the_next_server_in_turn():
    # AReaL v1.0.4's default (its single controller): the i-th group submitted to worker i mod k, from worker 0,
    # over the whole run and whatever the loads (an AReaL newcomer's round: per-sample dealing is its SPMD mode).
    lengths, prompts = _workload(rows=10)
    lengths[0] *= 50  # a long first group does not move the turn
    for lag in (None, 1):
        result = _replay(lengths, prompts, max_lag=lag, routing="group-round-robin", train_batch_size=4)
        assert result.sample_server.reshape(10, 4).tolist() == [[r % 4] * 4 for r in range(10)]
    # One turn over the run, across train batches that the servers do not divide.
    result = _replay(lengths, prompts, max_lag=1, routing="group-round-robin", train_batch_size=4, instances=3)
    assert result.sample_server.reshape(10, 4).tolist() == [[r % 3] * 4 for r in range(10)]


def test_planned_keeps_a_group_on_its_instance_and_length_aware_balances_predicted_tokens():
    lengths, prompts = _workload(rows=8)
    planned = _replay(lengths, prompts, routing="planned", row_instance=np.array([0, 1, 2, 3, 4, 5, 6, 7]))
    assert planned.sample_server.reshape(8, 4).tolist() == [[r % 4] * 4 for r in range(8)]
    # One prompt predicted 10x the others, all submitted at once: its 4 samples take a server each (each then
    # the lightest by predicted tokens, ties by index), and the light prompts' samples even out after it.
    predicted = np.array([1000.0] + [100.0] * 7)
    aware = _replay(lengths, prompts, max_lag=None, routing="length-aware", row_predicted_tokens=predicted)
    servers = aware.sample_server.reshape(8, 4)
    assert sorted(servers[0].tolist()) == [0, 1, 2, 3]
    assert np.bincount(aware.sample_server, minlength=4).tolist() == [8, 8, 8, 8]
    with pytest.raises(SettingsError, match="planned instance"):
        _replay(lengths, prompts, routing="planned")
    with pytest.raises(SettingsError, match="predicted tokens"):
        _replay(lengths, prompts, routing="length-aware")
    with pytest.raises(SettingsError, match="routing must be one of"):
        _replay(lengths, prompts, routing="random")
    with pytest.raises(SettingsError, match="quantum_s"):
        _replay(lengths, prompts, quantum_s=0)


def test_the_lag_rule_holds_a_prompt_until_its_version_is_published():
    lengths, prompts = _workload()
    result = _replay(lengths, prompts, max_lag=0)
    # Bound 0: row i starts only once version i // 16 is live (started + 1 <= (v + 1) * 16).
    for i in range(16, 96):
        assert result.group_submit_s[i] >= result.publish_s[i // 16 - 1] - 1e-9
    free = _replay(lengths, prompts, max_lag=None)
    assert (free.group_submit_s == 0).all()  # no bound and room for every prompt: all at once
    assert free.end_to_end_s < result.end_to_end_s


def test_a_fractional_bound_is_verls_staleness_threshold():
    """verl's staleness_threshold of 0.1 (its default): the rollouter pauses once 1.1 train batches were started
    since the last sync, so row i starts only after version floor(i / 16 - 0.1) is live; it lies between bounds 0
    and 1."""
    lengths, prompts = _workload()
    tenth = _replay(lengths, prompts, max_lag=0.1)
    for i in range(17, 96):  # started + 1 <= (0.1 + v + 1) * 16: row i needs v >= (i + 1) / 16 - 1.1
        need = int(np.ceil((i + 1) / 16 - 1.1))
        if need > 0:
            assert tenth.group_submit_s[i] >= tenth.publish_s[need - 1] - 1e-9, i
    zero, one = _replay(lengths, prompts, max_lag=0), _replay(lengths, prompts, max_lag=1)
    assert one.end_to_end_s <= tenth.end_to_end_s <= zero.end_to_end_s
    assert not np.array_equal(tenth.group_submit_s, zero.group_submit_s)


def test_the_rollouter_slots_bound_the_prompts_in_flight():
    lengths, prompts = _workload(rows=24)
    one = _replay(lengths, prompts, max_lag=None, prompts_in_flight=1)
    # One slot: each prompt starts when the previous one's last sample is done (within the quantum and a step).
    assert (one.group_submit_s[1:] >= one.group_arrival_s[:-1] - 1e-9).all()
    assert (one.group_submit_s[1:] <= one.group_arrival_s[:-1] + 0.1).all()
    with pytest.raises(SettingsError, match="prompts_in_flight"):
        _replay(lengths, prompts, prompts_in_flight=0)


def test_one_server_with_every_prompt_in_flight_is_the_engine_fed_the_whole_epoch():
    lengths, prompts = _workload(rows=40)
    result = _replay(lengths, prompts, instances=1, max_lag=None)
    finish = np.zeros(lengths.size)
    engine = Engine(PRESET, SimulationSettings(4, 16, mode="streaming"), Stats(), finish, np.zeros(lengths.size))
    engine.feed(range(lengths.size), lengths.reshape(-1).tolist(), np.repeat(prompts, 4).tolist())
    engine.run(drain=True)
    assert result.rollout_end_s == pytest.approx(engine.t, rel=1e-12)
    assert result.group_arrival_s.tolist() == pytest.approx(finish.reshape(40, 4).max(axis=1).tolist(), rel=1e-12)


def test_the_quantum_has_converged_at_its_default():
    # Routing without random ties (the balancer's would reshuffle with the quantum, as with a seed): a twentieth
    # of the default quantum moves the end-to-end time by under 0.1%; a quantum of 5 s is visibly off.
    lengths, prompts = _workload(rows=256, n=8, seed=1)
    keep = {"instances": 8, "train_batch_size": 64, "routing": "planned", "row_instance": np.arange(256) % 8}
    coarse = _replay(lengths, prompts, **keep)
    fine = _replay(lengths, prompts, quantum_s=0.005, **keep)
    assert fine.end_to_end_s == pytest.approx(coarse.end_to_end_s, rel=1e-3)
    assert abs(_replay(lengths, prompts, quantum_s=5.0, **keep).end_to_end_s / fine.end_to_end_s - 1) > 3e-3


def test_a_frame_is_read_in_seq_order():
    lengths, prompts = _workload(rows=32)
    frame = pl.DataFrame({"seq": np.arange(32), "instance": np.arange(32) % 4, "prompt_tokens": prompts})
    shuffled = np.random.default_rng(0).permutation(32)
    direct = replay_async_frame(frame, lengths, PRESET, instances=4, train_batch_size=16, max_lag=1,
                                dispatch="planned")
    mixed = replay_async_frame(frame[shuffled], lengths[shuffled], PRESET, instances=4, train_batch_size=16,
                               max_lag=1, dispatch="planned")
    assert mixed.end_to_end_s == direct.end_to_end_s
    assert mixed.sample_server.tolist() == direct.sample_server.tolist()


def test_verls_v1_asynchronous_modes_submit_the_warm_up_then_a_batch_a_step():
    """verl 0.9.1's main_ppo with trainer.v1.trainer_mode colocate_async or separate_async submits
    num_warmup_batches train batches before its first step and one at the start of every step (trainer_base.py:
    624-650, :1525-1527): with no limit on prompts in flight the count rule admits exactly those, every sample
    routed at submission."""
    lengths, prompts = _workload(rows=96)
    result = _replay(lengths, prompts, max_lag=1, prompts_in_flight=96)
    assert (result.group_submit_s[:32] == 0).all() and (result.group_submit_s[32:] > 0).all()
    for step in range(96 // 16 - 2):  # step v's end submits the next batch whole (seen within the quantum)
        batch = result.group_submit_s[32 + 16 * step:48 + 16 * step]
        assert (batch == batch[0]).all() and 0 <= batch[0] - result.publish_s[step] < 0.2
    assert np.unique(result.group_submit_s, return_counts=True)[1].tolist() == [32, 16, 16, 16, 16]


def test_colocate_async_stops_the_rollout_while_the_trainer_trains():
    """colocate_async aborts the requests in flight and puts the servers to sleep for every step
    (trainer_colocate_async.py:44-50): no sample finishes inside a training step (past the quantum it may run into
    one before the step is known), where side by side (separate_async) some do, and the replay takes longer; the
    requests it resumes are prefilled again (re-prefill counted since 2026-12-06)."""
    lengths, prompts = _workload(rows=96)
    apart = _replay(lengths, prompts, max_lag=1, prompts_in_flight=96)
    shared = _replay(lengths, prompts, max_lag=1, prompts_in_flight=96, colocated=True)
    assert shared.end_to_end_s > apart.end_to_end_s

    def inside(result):
        finish = result.group_arrival_s[:, None]
        return int(((finish > result.step_start_s + 0.5) & (finish < result.step_end_s)).sum())

    assert inside(shared) == 0 and inside(apart) > 0
    # Asleep, a server dropped its KV cache: the requests it resumes prefill their contexts again (partial rollout);
    # side by side nothing is dropped.
    assert shared.recomputed_tokens > 0 and apart.recomputed_tokens == 0


def test_a_v1_replay_follows_the_schedules_steps_with_asps_replay_buffer():
    """With asp's replay buffer (Option C) each step trains the groups the schedule assigns it (here each pair of
    batches swapped, both submitted before either is trained), not the first ones to finish."""
    lengths, prompts = _workload(rows=96)
    steps = (np.arange(96) // 16) ^ 1
    followed = _replay(lengths, prompts, max_lag=1, prompts_in_flight=96, row_train_step=steps)
    assert followed.group_step.tolist() == steps.tolist()
    assert _replay(lengths, prompts, max_lag=1, prompts_in_flight=96).group_step.tolist() != steps.tolist()
    # A step whose groups were not submitted yet asks for them (the buffer's refills) rather than waiting forever.
    reversed_steps = 5 - np.arange(96) // 16
    refilled = _replay(lengths, prompts, max_lag=1, prompts_in_flight=96, row_train_step=reversed_steps)
    assert refilled.group_step.tolist() == reversed_steps.tolist()
    assert (refilled.group_submit_s[80:] == 0).all()  # step 0's groups, the last rows, went out at once
