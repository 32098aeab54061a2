"""The replay loop: instances take minibatches (planned or free dispatch) under the lag rule, the trainer
consumes what they finish; `simulate_schedule` runs it over a schedule frame and adds the lower bound."""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import SettingsError
from asp_cli.settings import check_replay_size, lag_steps
from asp_cli.sim.engine import Engine, static_batch
from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS
from asp_cli.sim.metrics import replay_metrics
from asp_cli.sim.records import SimulationResult, SimulationSettings, Stats
from asp_cli.sim.trainer import Trainer


def simulate_arrays(
    preset: HardwarePreset,
    settings: SimulationSettings,
    *,
    instances: int,
    row_minibatch: np.ndarray,
    row_instance: np.ndarray,
    response_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    row_train_step: np.ndarray | None = None,
) -> SimulationResult:
    """Replay a schedule given as arrays in ``seq`` order.

    Parameters
    ----------
    row_minibatch, row_instance
        Per schedule row (one prompt in one epoch), in ``seq`` order; a minibatch's rows are contiguous.
    response_tokens
        ``(rows, samples_per_prompt)`` true lengths of each sample (at least 1 token each).
    prompt_tokens
        Per row.
    row_train_step
        Per row, the step the schedule assigns its group to; needed when ``settings.trainer == "schedule"``.
    """
    n_rows = row_minibatch.size
    n = settings.samples_per_prompt
    check_replay_size(n_rows, n, "the simulator")
    lengths = np.maximum(np.asarray(response_tokens, dtype=np.int64).reshape(n_rows, n), 1)
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    if n_rows == 0:
        raise SettingsError("the schedule has no rows to simulate")
    # Minibatches in seq order: [start, end) row ranges.
    change = np.flatnonzero(np.diff(row_minibatch)) + 1
    mb_start = np.concatenate(([0], change))
    mb_end = np.concatenate((change, [n_rows]))
    mb_instance = np.asarray(row_instance)[mb_start].astype(np.int64)
    if settings.dispatch == "planned":
        if mb_instance.min() < 0 or mb_instance.max() >= instances:
            planned = int(mb_instance.max()) + 1
            raise SettingsError(
                f"the schedule plans {planned} instances (instance 0 to {planned - 1}) but the simulation has "
                f"{instances}, and planned dispatch keeps each minibatch on its instance; pass --instances "
                f"{planned}, or --dispatch free"
            )
        queues = [deque(np.flatnonzero(mb_instance == k).tolist()) for k in range(instances)]
    else:
        shared: deque[int] = deque(range(mb_start.size))
        queues = [shared] * instances

    seq_lengths = lengths.reshape(-1)
    seq_prompts = np.repeat(prompts, n)
    group_tokens = prompts * n + lengths.sum(axis=1)
    finish = np.zeros(seq_lengths.size, dtype=np.float64)
    admit = np.zeros(seq_lengths.size, dtype=np.float64)
    seq_instance = np.zeros(seq_lengths.size, dtype=np.int32)
    group_version = np.zeros(n_rows, dtype=np.int64)
    stats = [Stats() for _ in range(instances)]
    engines = [Engine(preset, settings, stats[k], finish, admit) for k in range(instances)]
    loaded = [0] * instances
    assigned = None
    if settings.trainer == "schedule":
        if row_train_step is None:
            raise SettingsError("a trainer that follows the schedule needs its train_step column")
        _, assigned = np.unique(np.asarray(row_train_step), return_inverse=True)
    trainer = Trainer(preset, settings.train_batch_size, group_tokens, assigned_step=assigned)
    # Streaming engines finish a group's samples over time: a group arrives when its last sample is done.
    remaining = [n] * n_rows
    started_groups = 0
    # The AReaL admission rule counts groups started against versions published; a trainer that follows the
    # schedule needs exactly the groups assigned to each step, which a count-based hold can starve (no step
    # completes, nothing is admitted). There a minibatch is held instead until the policy its latest step may
    # be trained from is live (step s needs version s - max_lag). Where the order makes that wait forever (a
    # later step's minibatch ahead of an earlier step's groups), the waiting minibatch is let go and the lag
    # it then has is reported (`lag_rule_released`).
    # (A fractional bound, verl's staleness_threshold, counts whole in the steps a trainer follows: `lag_steps`.)
    cap_groups = None if settings.max_lag is None or settings.trainer == "schedule" else settings.max_lag + 1
    need_version = None
    if settings.max_lag is not None and assigned is not None:
        need_version = np.maximum.reduceat(assigned.astype(np.int64), mb_start) - lag_steps(settings.max_lag)
    released: set[int] = set()  # instances whose waiting minibatch was let go to break a deadlock
    streaming = settings.mode == "streaming"
    static = settings.mode == "static"

    events: list[tuple[float, int, int]] = [(0.0, k, k) for k in range(instances)]
    heapq.heapify(events)
    counter = instances
    held: dict[int, float] = {}  # instance -> time it started waiting for the lag rule

    shortest_step_s = float(preset.train_step_seconds(0)) + preset.weight_sync_s

    def earliest_publish(now: float) -> float:
        # A step not yet started publishes no sooner than the shortest step after the trainer is free.
        return max(trainer.free_at, now) + shortest_step_s

    def report_groups(k: int) -> None:
        # Release the groups whose last sample the engine has just finished. A group runs on one engine, whose
        # clock never goes back, so its last sample to finish has its latest finish time: the group's arrival.
        finished = engines[k].finished
        for gid in finished:
            r = gid // n
            left = remaining[r] - 1
            remaining[r] = left
            if left == 0:
                trainer.arrive(finish_list(gid), r)
        finished.clear()

    finish_list = finish.item  # a Python float, as float(finish[...]) gives

    while True:
        if held:
            _wake(trainer, held, events, stats)
        # Arrivals are events too: the trainer decides a step at the time its last group arrives, so a
        # step's publish time is never in the simulated past.
        next_event = events[0][0] if events else math.inf
        next_arrival = trainer.next_arrival()
        if next_arrival <= next_event and next_arrival < math.inf:
            trainer.advance(next_arrival)
            _wake(trainer, held, events, stats)
            continue
        if not events:
            if held and need_version is not None:
                k = min(held, key=lambda i: (held[i], i))  # the one waiting longest goes first
                released.add(k)
                heapq.heappush(events, (held.pop(k), -1 - k, k))
                stats[k].lag_rule_released += 1
                continue
            if held:
                raise AssertionError("simulation deadlock: instances held with nothing left to train")
            break
        t, _, k = heapq.heappop(events)
        trainer.advance(t)
        engine = engines[k]
        queue = queues[k]
        if not queue:
            if streaming and not engine.idle:
                engine.run(drain=True)
                report_groups(k)
            stats[k].end_s = max(stats[k].end_s, engine.t)
            continue
        mb = queue[0]
        rows = int(mb_end[mb] - mb_start[mb])
        # The lag rule: by counts (AReaL's), or by the version a schedule-following trainer's step needs. A
        # streaming request batch of several groups (`bands`, verl's chunks) is sent at once, so all of it must
        # fit under the cap (AReaL counts each group it submits), unless the trainer's next step still lacks
        # groups (a batch that straddles a step boundary, as at the end of an epoch that is not a whole number
        # of train batches: held, nothing could ever train). A blocking minibatch starts while the count is
        # below the cap, as documented.
        version = trainer.version_at(t)
        starting = 1
        if streaming and started_groups >= (version + 1) * settings.train_batch_size:
            starting = min(rows, settings.train_batch_size)
        too_far_ahead = (cap_groups is not None and started_groups > 0 and started_groups + starting
                         > (cap_groups + version) * settings.train_batch_size)
        too_early = (need_version is not None and k not in released
                     and trainer.version_at(t) < need_version[mb])
        if too_far_ahead or too_early:
            if streaming and not engine.idle:
                # Decode what is live, and look again at the next completion or when the rule may let the
                # instance go: at the next publish, which is known once its step has started, and otherwise
                # no sooner than the shortest train step from now. (Run to its next completion alone, an
                # instance with a few long sequences left slept through the publish while idle instances took
                # every group it let in.)
                engine.t = max(engine.t, t)
                engine.run(drain=True, one_finish=True, until=min(trainer.next_publish_after(t), earliest_publish(t)))
                report_groups(k)
                heapq.heappush(events, (engine.t, counter, k))
                counter += 1
            else:
                held[k] = t
            continue
        released.discard(k)
        queue.popleft()
        load_newest(engine, t, trainer, loaded, k)
        r0, r1 = int(mb_start[mb]), int(mb_end[mb])
        group_version[r0:r1] = loaded[k]
        started_groups += rows
        seq_instance[r0 * n:r1 * n] = k
        mb_lengths = seq_lengths[r0 * n:r1 * n]
        mb_prompts = seq_prompts[r0 * n:r1 * n]
        if static:
            _run_static(engine, preset, settings, np.arange(r0 * n, r1 * n, dtype=np.int64), mb_lengths, mb_prompts,
                        finish, admit)
        elif not streaming and engine.fits_at_once(mb_lengths, mb_prompts):
            engine.run_wave(np.arange(r0 * n, r1 * n, dtype=np.int64), mb_lengths, mb_prompts)
        else:
            engine.feed(range(r0 * n, r1 * n), mb_lengths.tolist(), mb_prompts.tolist())
            engine.run(drain=not streaming)
        if streaming:
            report_groups(k)
        else:
            ends = finish[r0 * n:r1 * n].reshape(rows, n).max(axis=1)
            for r, end in zip(range(r0, r1), ends.tolist()):
                trainer.arrive(end, r)
        stats[k].end_s = max(stats[k].end_s, engine.t)
        heapq.heappush(events, (engine.t, counter, k))
        counter += 1
    trainer.advance(math.inf)
    assert trainer.consumed == n_rows, "every group is trained exactly once"

    result = SimulationResult(
        metrics={},
        seq_admit_s=admit,
        seq_finish_s=finish,
        seq_instance=seq_instance,
        group_arrival_s=finish.reshape(n_rows, n).max(axis=1),
        group_consumed_s=trainer.group_consumed,
        group_step=trainer.group_step,
        group_version=group_version,
        step_start_s=np.asarray(trainer.step_start),
        step_end_s=np.asarray(trainer.step_end),
        step_groups=np.asarray(trainer.step_groups, dtype=np.int64),
        extras={"stats": stats, "lengths": lengths, "group_tokens": group_tokens},
    )
    result.metrics = replay_metrics(result, preset, settings, instances)
    return result


def load_newest(engine: Engine, now: float, trainer: Trainer, loaded: list[int], k: int) -> None:
    """Instance ``k`` takes work at ``now`` (or its own clock, if later): it loads the newest published weights first,
    pausing ``weight_sync_s``, when they are newer than those it has (``loaded``, per instance)."""
    engine.t = max(engine.t, now)
    version = trainer.version_at(engine.t)
    if version > loaded[k]:
        loaded[k] = version
        engine.t += engine.preset.weight_sync_s
        engine.stats.sync_s += engine.preset.weight_sync_s


def _wake(trainer: Trainer, held: dict[int, float], events: list, stats: list[Stats]) -> None:
    """Wake instances held by the lag rule at the first publish after they stopped, once it is known."""
    for k in list(held):
        publish = trainer.next_publish_after(held[k])
        if publish < math.inf:
            stats[k].held_s += publish - held.pop(k)
            heapq.heappush(events, (publish, -1 - k, k))


def _run_static(engine: Engine, preset: HardwarePreset, settings: SimulationSettings, gids: np.ndarray,
                lengths: np.ndarray, prompts: np.ndarray, finish: np.ndarray, admit: np.ndarray) -> None:
    st = engine.stats
    cap = max(1, int(preset.max_num_seqs))
    for lo in range(0, lengths.size, cap):
        part = slice(lo, min(lo + cap, lengths.size))
        seconds, tail = static_batch(preset, lengths[part], prompts[part], settings.tail_threshold)
        rows = lengths[part].size
        longest = float(lengths[part].max())
        held = rows * (float(prompts[part].max()) + longest)  # every row padded to the longest, until it ends
        st.static_batches += 1
        st.peak_kv_tokens = max(st.peak_kv_tokens, held)
        if held > engine.capacity:
            st.static_over_capacity += 1
        admit[gids[part]] = engine.t
        engine.t += seconds
        finish[gids[part]] = engine.t
        st.busy_s += seconds
        st.tail_s += tail
        st.decode_steps += longest
        st.live_slot_steps += float(lengths[part].sum())
        st.target_slot_steps += longest * rows


def simulate_schedule(
    frame,  # pl.DataFrame
    response_tokens: np.ndarray,
    preset: HardwarePreset,
    settings: SimulationSettings,
    *,
    instances: int,
) -> SimulationResult:
    """Replay a schedule frame (sorted by ``seq``) with the given true lengths, and add the lower bound.

    ``metrics`` then also holds the `asp_cli.sim.lower_bound.LowerBound` keys and
    ``ratio_to_lower_bound`` (end-to-end over its bound) and ``rollout_ratio_to_lower_bound``.
    """
    from asp_cli.sim.lower_bound import lower_bound

    frame = frame.sort("seq")
    if "prompt_tokens" in frame.columns:
        prompts = frame["prompt_tokens"].fill_null(DEFAULT_PROMPT_TOKENS).to_numpy().astype(np.int64)
    else:
        prompts = np.full(frame.height, DEFAULT_PROMPT_TOKENS, dtype=np.int64)
    result = simulate_arrays(
        preset,
        settings,
        instances=instances,
        row_minibatch=frame["minibatch"].to_numpy(),
        row_instance=frame["instance"].to_numpy(),
        row_train_step=frame["train_step"].to_numpy() if "train_step" in frame.columns else None,
        response_tokens=response_tokens,
        prompt_tokens=prompts,
    )
    lengths = result.extras["lengths"]
    bound = lower_bound(
        preset,
        lengths.reshape(-1),
        np.repeat(prompts, settings.samples_per_prompt),
        result.extras["group_tokens"],
        instances=instances,
        train_batch_size=settings.train_batch_size,
        synchronous=settings.max_lag == 0,
    )
    m = result.metrics
    m.update(bound.to_dict())
    m["ratio_to_lower_bound"] = m["end_to_end_s"] / bound.end_to_end_s if bound.end_to_end_s else 1.0
    m["rollout_ratio_to_lower_bound"] = m["rollout_makespan_s"] / bound.rollout_s if bound.rollout_s else 1.0
    return result
