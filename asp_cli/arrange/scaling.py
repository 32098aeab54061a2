"""A judged sample's replay scaled up to the whole run: the times `asp_cli.arrange.choose` ranks candidates by."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from asp_cli.costmodel import HardwarePreset
from asp_cli.settings import ScheduleSettings


def run_time(result: Any, scale: float) -> float:
    """The end-to-end time of the whole run, from a replay of a sample ``1 / scale`` of its size.

    Since 2026-12-03 the sample is replayed as a miniature of one epoch of the run (`miniature_of`), so ``scale``
    is the run's epochs times what rounding and the slice's floor left the miniature larger than its share (a
    little below 1 where its train batch rounded down: the middle then shrinks); the split below then carries
    one epoch's replay to several. It was first made for a sample replayed on the
    run's own instances and train batch, where ``scale`` was the run's prompt-epochs over the sample's (8 on a
    31,632-prompt mix); there it misjudged the sorted orders, which the miniature fixed (same page).

    A replay splits into the head (until the first train step starts: the pipeline filling), the drain (from
    the last admission to the last group's arrival: the last groups decoding) and the middle. The head and the
    drain last about as long in the whole run as in the sample (the same instances, the same longest groups);
    the middle, trainer steps queued behind the drain included, grows with the prompts. So the run takes
    ``head + drain + scale * middle``. Judged on the sample's own end-to-end time instead, the drain weighs as
    much as a few train steps' worth of prompts where in the run it weighs one among hundreds, and orders that
    end on long work lose where they win at scale: on engines that refill, short-first at 7,000-32,000
    prompts (docs/benchmarks.md, "Large inputs: the sample as a miniature of the run"). ``scale`` 1 (an input judged
    whole) gives the replay's own time.

    Only on engines that refill (`SCALED_ENGINES`): on the blocking engines the sample's own times ranked the
    candidates as the whole run did, and scaled up they made `continuous` pick per-step, 3% slower than the
    interleaving, on two seeds of two (same page).
    """
    if scale == 1.0 or not result.seq_admit_s.size or not result.step_start_s.size:
        return float(result.metrics["end_to_end_s"])
    return _split(float(result.metrics["end_to_end_s"]), float(result.step_start_s[0]),
                  float(result.seq_admit_s.max()), float(result.group_arrival_s.max()), scale)


def _split(end: float, head: float, last_admit: float, last_arrival: float, scale: float) -> float:
    # The rollout's drain ends with the last group's arrival: the trainer steps queued behind it (a trainer that
    # binds) grow with the prompts, and stay in the middle.
    drain = max(last_arrival - last_admit, 0.0)
    return head + drain + scale * max(end - head - drain, 0.0)


def async_run_time(result: Any, scale: float) -> float:
    """`run_time` of a replay as verl's asynchronous trainers route (`asp_cli.sim.verl_async.AsyncResult`): a
    prompt's submission stands for its admission."""
    if scale == 1.0 or not result.group_submit_s.size or not result.step_start_s.size:
        return float(result.end_to_end_s)
    return _split(float(result.end_to_end_s), float(result.step_start_s[0]), float(result.group_submit_s.max()),
                  float(result.group_arrival_s.max()), scale)


def async_rollout_s(result: Any, scale: float) -> float:
    """`run_rollout_s` of a replay as verl's asynchronous trainers route."""
    rollout = float(result.rollout_end_s)
    if scale == 1.0 or not result.group_submit_s.size:
        return rollout
    drain = min(max(rollout - float(result.group_submit_s.max()), 0.0), rollout)
    return drain + scale * (rollout - drain)


def run_rollout_s(result: Any, scale: float) -> float:
    """The whole run's rollout alone (to its last group's arrival), from a replay of ``1 / scale`` of its
    prompt-epochs: the drain (from the last admission to the last arrival: the longest groups decoding) lasts
    about as long in the whole run, the rest grows with the prompts (as in `run_time`). A sample's own rollout
    would tell a 20,000-prompt run that its trainer binds where its rollout is five times the sample's. Where the
    sample's sequences nearly all fit the instances' slots at once, its replay is mostly drain and the estimate
    runs low: measured against replays of the whole input, about 6% low on `streaming` at the real 4,096-prompt
    sample of 10,620 prompts (the sample data three times), within 5% on the blocking engines."""
    rollout = float(result.metrics["rollout_makespan_s"])
    if scale == 1.0 or not result.seq_admit_s.size:
        return rollout
    drain = min(max(rollout - float(result.seq_admit_s.max()), 0.0), rollout)
    return drain + scale * (rollout - drain)


@dataclass(frozen=True)
class Miniature:
    """A sample's run cut down with it: as many instance-equivalents and as large a train batch per prompt as
    the whole run has (`miniature_of`)."""

    instances: int
    train_batch_size: int
    preset: HardwarePreset  # one miniature instance: a slice of a real one (`instance_slice`)
    # The miniature's rollout capacity and train batch over the run's: how many of the run's prompt-epochs one
    # judged prompt stands for is the run's prompt-epochs times this over the sample's (`choose_arrangement`).
    capacity_fraction: float


def instance_slice(preset: HardwarePreset, fraction: float) -> HardwarePreset:
    """A ``fraction`` of one instance: ``fraction`` of its sequence slots and KV cache, at the same decode step
    time for the same share of its load.

    A decode step costs ``t_o + max(t_w, c b) + kv sum(ctx)`` (`asp_cli.costmodel`). With ``b`` and the summed
    context cut by ``fraction`` and ``c`` and ``kv`` (per sequence, per context token) raised by its inverse,
    every step takes as long as the whole instance's; the weight read ``t_w`` and the overhead stay. Raising
    the KV bytes per token cuts the cache's capacity in tokens by the same fraction; lowering the FLOP/s raises
    the per-token prefill cost with it.
    """
    return dataclasses.replace(preset, kv_bytes_per_token=preset.kv_bytes_per_token / fraction,
                               flops_per_s=preset.flops_per_s * fraction,
                               max_num_seqs=max(1, round(preset.max_num_seqs * fraction)))


def miniature_of(settings: ScheduleSettings, preset: HardwarePreset, sample_prompts: int, epoch_prompts: int,
                 longest_request_tokens: int) -> Miniature:
    """One epoch of the run cut down to ``sample_prompts``: the instances and the train batch cut by the sample's
    share of an epoch's ``epoch_prompts``, so that its replay is loaded as the run is, phase by phase.

    A sample replayed on the run's own instances and train batch is a short, lightly loaded run: an order that
    ends on its long work (short-first) leaves its last phase to a few long groups on half-empty instances,
    where the run, with many times the long groups, keeps them full; scaling that replay's middle up to the run
    multiplied the empty phase, and put short-first 36% behind on a 31,632-prompt mix where replays of the whole
    input put it ahead (docs/benchmarks.md, "Large inputs"). Cut down with the sample, the instances hold as
    many prompts each and the trainer takes as many steps per epoch as in the run.

    The share can fall below one instance: the miniature then runs on a slice of one (`instance_slice`), never
    smaller than one that holds a whole group of the longest requests in its cache and its slots (below that a
    group's samples queue one behind another as they never would in the run); where that floor binds, the
    miniature is larger than the sample's share, and its times are scaled up by the rest (`run_time`). The
    trainer takes as long per step as the run's: its per-token cost is raised by the run's train batch over
    the miniature's.
    """
    n = settings.samples_per_prompt
    share = sample_prompts / max(epoch_prompts, 1)
    floor = min(1.0, max(n * longest_request_tokens / max(preset.kv_capacity_tokens, 1), n / preset.max_num_seqs))
    capacity = max(share, floor / settings.instances)
    batch = max(1, round(settings.train_batch_size * capacity),
                math.ceil(settings.train_batch_size * floor / settings.instances))
    capacity = min(batch / settings.train_batch_size, 1.0)
    equivalents = settings.instances * capacity
    # As many instances as the equivalents round to, but none a slice below the floor.
    instances = max(1, min(round(equivalents), math.floor(equivalents / floor + 1e-9)))
    small = instance_slice(preset, equivalents / instances)
    small = dataclasses.replace(small, train_per_token_s=preset.train_per_token_s / capacity)
    return Miniature(instances, batch, small, capacity)
