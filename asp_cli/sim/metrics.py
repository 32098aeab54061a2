"""Summary metrics of one replay (docs/simulation.md, "Metrics")."""

from __future__ import annotations

import math

import numpy as np

from asp_cli.costmodel import HardwarePreset
from asp_cli.sim.records import SimulationResult, SimulationSettings, Stats


def replay_metrics(result: SimulationResult, preset: HardwarePreset, settings: SimulationSettings,
             instances: int) -> dict:
    stats: list[Stats] = result.extras["stats"]
    lengths: np.ndarray = result.extras["lengths"]
    n_rows = lengths.shape[0]
    steps = result.step_start_s.size
    end_to_end = float(result.step_end_s.max())
    rollout = float(result.group_arrival_s.max())
    train_busy = float(np.sum(result.step_end_s - result.step_start_s))
    sync_busy = preset.weight_sync_s * max(steps - 1, 0)
    waits = result.group_consumed_s - result.group_arrival_s
    # Queue occupancy q(t), groups waiting, time-weighted over [0, end-to-end].
    times = np.concatenate((result.group_arrival_s, result.group_consumed_s))
    delta = np.concatenate((np.ones(n_rows), -np.ones(n_rows)))
    order = np.lexsort((-delta, times))  # at equal times, count the arrival before the consumption
    t_sorted = times[order]
    q = np.cumsum(delta[order])
    span = np.diff(np.append(t_sorted, end_to_end))
    q_mean = float(np.sum(q * span) / end_to_end) if end_to_end > 0 else 0.0
    q_sq = float(np.sum(q * q * span) / end_to_end) if end_to_end > 0 else 0.0
    q_cv = math.sqrt(max(q_sq - q_mean * q_mean, 0.0)) / q_mean if q_mean > 0 else 0.0
    lag = result.group_step - result.group_version
    sample_len = lengths.astype(np.float64)
    tokens_per_group = sample_len.sum(axis=1)
    lag_token_mean = float(np.sum(lag * tokens_per_group) / tokens_per_group.sum())
    values, counts = np.unique(lag, return_counts=True)
    # Representativeness: each step's mean response length against the mean over every sample.
    ratio = step_length_ratio(result.group_step, tokens_per_group, settings.samples_per_prompt, steps)
    busy = np.array([s.busy_s for s in stats])
    ends = np.array([s.end_s for s in stats])
    live_steps = sum(s.live_slot_steps for s in stats)
    target_steps = sum(s.target_slot_steps for s in stats)
    decode_steps = sum(s.decode_steps for s in stats)
    total_busy = float(busy.sum())
    return {
        "end_to_end_s": end_to_end,
        "mean_iteration_s": end_to_end / max(steps, 1),
        "train_steps": steps,
        "rollout_makespan_s": rollout,
        "sequences": int(lengths.size),
        "groups": int(n_rows),
        "response_tokens": int(lengths.sum()),
        "padding_fraction": 1.0 - live_steps / target_steps if target_steps else 0.0,
        "effective_batch_mean": live_steps / decode_steps if decode_steps else 0.0,
        "tail_time_fraction": float(sum(s.tail_s for s in stats) / total_busy) if total_busy else 0.0,
        "instance_busy_fraction_mean": float(np.mean(busy) / rollout) if rollout else 0.0,
        "instance_busy_fraction_min": float(np.min(busy) / rollout) if rollout else 0.0,
        "instance_finish_spread_s": float(ends.max() - ends.min()),
        "instance_busy_imbalance": float(busy.max() / busy.mean()) if busy.mean() > 0 else 1.0,
        "weight_sync_pause_s": float(sum(s.sync_s for s in stats)),
        "lag_hold_s": float(sum(s.held_s for s in stats)),
        "lag_rule_released": int(sum(s.lag_rule_released for s in stats)),
        "preemptions": int(sum(s.preemptions for s in stats)),
        "recomputed_tokens": int(sum(s.recomputed_tokens for s in stats)),
        "oversize_requests": int(sum(s.oversize for s in stats)),
        "static_batches_over_kv_capacity": int(sum(s.static_over_capacity for s in stats)),
        "static_batches": int(sum(s.static_batches for s in stats)),
        "peak_kv_utilization": float(max(s.peak_kv_tokens for s in stats) / preset.kv_capacity_tokens)
        if preset.kv_capacity_tokens else 0.0,
        "trainer_idle_fraction": max(0.0, 1.0 - (train_busy + sync_busy) / end_to_end) if end_to_end else 0.0,
        "trainer_first_step_s": float(result.step_start_s.min()),
        "queue_groups_mean": q_mean,
        "queue_groups_cv": q_cv,
        "queue_wait_mean_s": float(waits.mean()),
        "policy_lag_mean": float(lag.mean()),
        "policy_lag_token_weighted_mean": lag_token_mean,
        "policy_lag_max": int(lag.max()),
        "policy_lag_histogram": {str(int(v)): int(c) for v, c in zip(values, counts)},
        "step_length_ratio_min": float(ratio.min()),
        "step_length_ratio_max": float(ratio.max()),
        "step_length_deviation_mean": float(np.mean(np.abs(ratio - 1.0))),
        "step_length_deviation_p90": float(np.quantile(np.abs(ratio - 1.0), 0.9)),
        "steps_beyond_25pct_of_mean": float(np.mean(np.abs(ratio - 1.0) > 0.25)),
    }


def step_length_ratio(group_step: np.ndarray, group_tokens: np.ndarray, samples_per_prompt: int,
                      steps: int) -> np.ndarray:
    """Each train step's mean response length over the mean of every sample (``group_tokens``: each group's
    response tokens; ``group_step``: the step that trained it): how representative of the epoch each step is."""
    tokens = np.asarray(group_tokens, dtype=np.float64)
    overall_mean = float(tokens.sum()) / max(tokens.size * samples_per_prompt, 1)
    step_tokens = np.bincount(group_step, weights=tokens, minlength=steps)
    step_samples = np.bincount(group_step, minlength=steps) * samples_per_prompt
    return step_tokens / np.maximum(step_samples, 1) / overall_mean


def random_step_deviation_p90(group_tokens: np.ndarray, samples_per_prompt: int, train_batch_size: int,
                              epochs: int, seed: int, permutations: int = 32) -> float:
    """The `step_length_deviation_p90` that random arrangements of these groups have, on average over
    ``permutations`` seeded shuffles: each epoch's groups (``group_tokens``, each group's response tokens)
    shuffled and cut into steps of ``train_batch_size``, as a shuffling dataloader's trainer takes them.

    The reference of `--steps representative` beside the candidate shuffle's own replay: with ten steps a
    single shuffle's p90 is nearly its largest step, and one shuffle of verl's mix measured 0.07 where a
    shuffle's batches typically measure 0.16, so a plan with a shuffle's batches (`per-step`, 0.17) was judged
    not representative."""
    tokens = np.asarray(group_tokens, dtype=np.float64)
    if tokens.size == 0:
        return 0.0
    rng = np.random.default_rng([seed, 53])
    shuffled = tokens[np.argsort(rng.random((permutations * max(epochs, 1), tokens.size)), axis=1)]
    starts = np.arange(0, tokens.size, max(train_batch_size, 1))
    counts = np.diff(np.append(starts, tokens.size)) * samples_per_prompt
    ratio = np.add.reduceat(shuffled, starts, axis=1) / counts / (tokens.sum() / (tokens.size * samples_per_prompt))
    deviation = np.abs(ratio - 1.0).reshape(permutations, -1)
    return float(np.quantile(deviation, 0.9, axis=1).mean())


def minibatch_padding(minibatch: np.ndarray, group_max_tokens: np.ndarray) -> float:
    """The slot-steps a static batch of each minibatch would leave idle, over all of them: 1 minus the groups'
    maxima summed over each minibatch's longest group maximum times its groups (``minibatch`` and
    ``group_max_tokens``: per row). The summary's predicted padding at the point predictions, auto's under each
    draw of lengths, and `asp report --lengths`' on observed lengths."""
    top = np.asarray(group_max_tokens, dtype=np.float64)
    if top.size == 0:
        return 0.0
    _, inverse = np.unique(np.asarray(minibatch), return_inverse=True)
    longest = np.zeros(int(inverse.max()) + 1, dtype=np.float64)
    np.maximum.at(longest, inverse, top)
    slots = float((longest * np.bincount(inverse)).sum())
    return 1.0 - float(top.sum()) / slots if slots else 0.0
