"""The lower bound: its terms, and that no simulated arrangement beats it."""

from __future__ import annotations

import numpy as np
import pytest

from asp_cli.costmodel import load_preset
from asp_cli.sim.lower_bound import lower_bound, rollout_lower_bound
from asp_cli.sim.records import SimulationSettings
from asp_cli.sim.run import simulate_arrays


def test_longest_request_binds_for_one_huge_request():
    preset = load_preset()
    lengths = np.array([10, 10, 50_000])
    seconds, terms, binding = rollout_lower_bound(preset, lengths, np.array([10, 10, 10]), instances=4)
    assert binding == "longest_request"
    assert seconds == terms["longest_request"]
    assert seconds > 50_000 * preset.weight_read_s


def test_work_binds_for_many_short_requests():
    preset = load_preset()
    lengths = np.full(200_000, 100)
    _, _, binding = rollout_lower_bound(preset, lengths, np.full(200_000, 10), instances=1)
    assert binding in ("decode_work", "compute")


def test_trainer_term():
    preset = load_preset()
    bound = lower_bound(preset, np.full(8, 5), np.full(8, 5), np.full(8, 1e6), instances=8, train_batch_size=2)
    assert bound.end_to_end_binding == "trainer"
    assert bound.end_to_end_s == pytest.approx(4 * preset.train_fixed_s + preset.train_per_token_s * 8e6
                                               + 3 * preset.weight_sync_s)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mode", ["continuous", "static", "streaming"])
def test_no_simulation_beats_the_bound(seed, mode):
    rng = np.random.default_rng(seed)
    preset = load_preset(["h100-qwen2.5-7b", "a100-llama2-7b", "ascend910b-qwen2.5-7b"][seed % 3])
    rows, n, k = int(rng.integers(8, 80)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
    lengths = np.clip(rng.lognormal(rng.uniform(3, 7), 1.2, (rows, n)), 1, 16_000).astype(np.int64)
    prompts = rng.integers(1, 800, rows)
    mb = np.sort(rng.integers(0, max(rows // 3, 1), rows))
    instance = rng.integers(0, k, mb.max() + 1)[mb].astype(np.int32)
    batch = int(rng.integers(1, 20))
    max_lag = (None, 1, 0)[seed % 3]  # synchronous on every third: rollout and training in turn
    result = simulate_arrays(preset, SimulationSettings(n, batch, mode=mode, max_lag=max_lag),
                             instances=k, row_minibatch=mb, row_instance=instance, response_tokens=lengths,
                             prompt_tokens=prompts)
    bound = lower_bound(preset, lengths.reshape(-1), np.repeat(prompts, n), prompts * n + lengths.sum(axis=1),
                        instances=k, train_batch_size=batch, synchronous=max_lag == 0)
    assert result.metrics["rollout_makespan_s"] >= bound.rollout_s * (1 - 1e-9)
    assert result.metrics["end_to_end_s"] >= bound.end_to_end_s * (1 - 1e-9)


def test_a_synchronous_run_is_bound_by_rollout_and_training_in_turn():
    # asp simulate read a synchronous run as bound by the trainer (312 s) while the trainer sat idle 63% of it: in
    # turn, the run is at least the rollout's bound and every step's training, added.
    preset = load_preset()
    lengths, prompts, groups = np.full(64, 2000), np.full(64, 100), np.full(16, 8 * 2100.0)
    loose = lower_bound(preset, lengths, prompts, groups, instances=2, train_batch_size=4)
    tight = lower_bound(preset, lengths, prompts, groups, instances=2, train_batch_size=4, synchronous=True)
    assert tight.end_to_end_s == pytest.approx(loose.rollout_s + loose.end_to_end_terms_s["trainer"])
    assert tight.end_to_end_s > loose.end_to_end_s
    assert tight.end_to_end_binding.endswith("and training in turn")
