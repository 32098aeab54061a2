"""Discrete-event simulation of a schedule on K rollout instances feeding one trainer (docs/simulation.md).

The model is the one of ../shared/docs/mission.md and rollout-cost-model.md section 6:

* An **instance** runs one inference minibatch at a time (a blocking ``generate()`` call). Inside it the
  engine batches continuously, vLLM style: at most ``max_num_seqs`` live sequences, admission while the KV
  cache has room for the prompt (above a small watermark), and when a decode step would overflow the cache
  the newest running sequence is preempted and later recomputed (its prompt and the tokens it has generated
  are prefilled again; its output is kept). This follows vLLM V1's scheduler as described in
  rollout-cost-model.md section 2.1 and Vidur's vLLM replica scheduler.
* ``static`` mode is HF ``generate``: the minibatch runs in batches of ``max_num_seqs`` rows that all step
  until the longest row ends; finished rows keep paying for weight reads and KV reads (padding).
* ``streaming`` mode refills freed slots from the instance's next minibatch as soon as the current one has
  no waiting requests left (rollout-cost-model.md section 2.2's ``pipelined_submit``).
* A decode step costs ``t_o + max(t_w, c·b) + kv·Σctx`` (`asp_cli.costmodel`); prefill is compute bound.
  Between two events (a finish, an admission, a KV overflow) the live set is fixed, so the summed context
  grows by ``b`` per step and the time of ``m`` steps is an arithmetic series: the engine jumps from event
  to event, never token by token. A minibatch that fits at once uses the vectorised wave closed form of
  `asp_cli.costmodel.wave_decode_seconds`.
* The **trainer** takes ``train_batch_size`` complete groups per step in arrival order, costs
  ``train_fixed_s + train_per_token_s·tokens``, then a weight sync of ``weight_sync_s``; the policy version
  goes up by one per step. An instance loads the newest published weights when it starts a minibatch, and
  pauses ``weight_sync_s`` to do so when a newer version exists.
* ``max_lag``: AReaL's admission rule (``inclusionAI/AReaL:areal/core/staleness_manager.py``): a minibatch
  may start only while the groups started so far stay below ``(max_lag + v + 1)·train_batch_size``; otherwise
  the instance waits for the next published version.

Everything here takes NumPy arrays; `simulate_schedule` is the entry point over a schedule frame.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from asp_cli.costmodel import HardwarePreset, wave_decode_seconds
from asp_cli.errors import SettingsError

Mode = Literal["continuous", "static", "streaming"]
Dispatch = Literal["planned", "free"]
MODES: tuple[str, ...] = ("continuous", "static", "streaming")
DISPATCHES: tuple[str, ...] = ("planned", "free")

# vLLM keeps ~1% of KV blocks free when admitting (its `watermark`, Vidur's vLLM scheduler does the same).
KV_WATERMARK = 0.01
# The time share with fewer than this fraction of the minibatch's slots live counts as "tail"
# (rollout-cost-model.md section 6.4).
TAIL_THRESHOLD = 0.25


@dataclass(frozen=True)
class SimulationSettings:
    """How to replay a schedule."""

    samples_per_prompt: int = 8
    train_batch_size: int = 128
    mode: Mode = "continuous"
    dispatch: Dispatch = "planned"
    max_lag: int | None = None
    kv_watermark: float = KV_WATERMARK
    tail_threshold: float = TAIL_THRESHOLD

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SettingsError(f"--mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if self.dispatch not in DISPATCHES:
            raise SettingsError(f"--dispatch must be one of {', '.join(DISPATCHES)} (got {self.dispatch!r})")
        if self.samples_per_prompt < 1 or self.train_batch_size < 1:
            raise SettingsError("samples per prompt and train batch size must be at least 1")
        if self.max_lag is not None and self.max_lag < 0:
            raise SettingsError(f"--max-lag must be 0 or more (got {self.max_lag})")


@dataclass
class SimulationResult:
    """What one replay produced: per-sequence, per-group and per-step arrays plus the summary metrics."""

    metrics: dict
    seq_admit_s: np.ndarray
    seq_finish_s: np.ndarray
    seq_instance: np.ndarray
    group_arrival_s: np.ndarray
    group_consumed_s: np.ndarray
    group_step: np.ndarray
    group_version: np.ndarray
    step_start_s: np.ndarray
    step_end_s: np.ndarray
    step_groups: np.ndarray
    extras: dict = field(default_factory=dict)

    def timeseries(self, bins: int = 400) -> dict[str, np.ndarray]:
        """Bin-averaged series over [0, end-to-end]: live sequences, queue occupancy, trainer busy, version."""
        end = float(self.metrics["end_to_end_s"]) or 1.0
        edges = np.linspace(0.0, end, bins + 1)
        width = np.diff(edges)
        live = np.diff(_interval_area(self.seq_admit_s, self.seq_finish_s, edges)) / width
        queue = np.diff(_interval_area(self.group_arrival_s, self.group_consumed_s, edges)) / width
        busy = np.diff(_interval_area(self.step_start_s, self.step_end_s, edges)) / width
        arrived = np.searchsorted(np.sort(self.group_arrival_s), edges[1:], side="right")
        version = np.searchsorted(np.sort(self.step_end_s), edges[1:], side="right")
        return {
            "time_s": edges[:-1],
            "live_sequences": live,
            "queue_groups": queue,
            "trainer_busy_fraction": busy,
            "groups_arrived": arrived.astype(np.int64),
            "policy_version": version.astype(np.int64),
        }


def _interval_area(start: np.ndarray, end: np.ndarray, points: np.ndarray) -> np.ndarray:
    """∫_0^x (number of intervals [start_i, end_i) holding t) dt at each point x."""
    s = np.sort(np.asarray(start, dtype=np.float64))
    e = np.sort(np.asarray(end, dtype=np.float64))
    cs = np.concatenate(([0.0], np.cumsum(s)))
    ce = np.concatenate(([0.0], np.cumsum(e)))
    ks = np.searchsorted(s, points, side="right")
    ke = np.searchsorted(e, points, side="right")
    return (points * ks - cs[ks]) - (points * ke - ce[ke])


# --------------------------------------------------------------------------------------------------------
# One instance's engine


@dataclass
class _Stats:
    """Per-instance accumulators."""

    busy_s: float = 0.0
    decode_steps: float = 0.0
    live_slot_steps: float = 0.0  # Σ over steps of live sequences (decoded tokens, padding rows excluded)
    target_slot_steps: float = 0.0  # Σ over steps of the minibatch's slot target
    tail_s: float = 0.0
    preemptions: int = 0
    recomputed_tokens: int = 0
    sync_s: float = 0.0
    held_s: float = 0.0  # waiting for the max_lag admission rule
    oversize: int = 0  # requests larger than the whole KV cache (run alone, over capacity)
    static_over_capacity: int = 0
    peak_kv_tokens: float = 0.0
    end_s: float = 0.0


class _Engine:
    """One rollout instance: continuous batching with preemption, advanced segment by segment."""

    def __init__(self, preset: HardwarePreset, settings: SimulationSettings, stats: _Stats,
                 finish_out: np.ndarray, admit_out: np.ndarray) -> None:
        self.preset = preset
        self.max_seqs = int(preset.max_num_seqs)
        self.capacity = float(preset.kv_capacity_tokens) or math.inf
        self.admit_limit = self.capacity * (1.0 - settings.kv_watermark)
        self.tail_fraction = settings.tail_threshold
        self.stats = stats
        self.finish_out = finish_out
        self.admit_out = admit_out
        self.t = 0.0
        self.step = 0
        self.sum_c = 0.0  # Σ c_j over live j: live j holds c_j + step tokens of KV after `step` steps
        self.live = 0
        self.heap: list[tuple[int, int, int]] = []  # (finish step, token, local id)
        self.stack: list[int] = []  # live ids in admission order (the newest is preempted first)
        self.waiting: deque[int] = deque()
        self.target = 1
        # Per fed request (local id): global id, length, prompt, generated before its admission, c, token.
        self.gid: list[int] = []
        self.length: list[int] = []
        self.prompt: list[int] = []
        self.done_before: list[int] = []
        self.c: list[float] = []
        self.token: list[int] = []
        self.alive: list[bool] = []
        self.admit_step: list[int] = []
        self.g_o = preset.step_overhead_s
        self.t_w = preset.weight_read_s
        self.c_tok = preset.compute_s_per_token
        self.kv = preset.kv_s_per_token

    @property
    def idle(self) -> bool:
        return self.live == 0 and not self.waiting

    def feed(self, gids: np.ndarray, lengths: np.ndarray, prompts: np.ndarray) -> None:
        base = len(self.gid)
        self.gid.extend(gids.tolist())
        self.length.extend(lengths.tolist())
        self.prompt.extend(prompts.tolist())
        n = gids.size
        self.done_before.extend([0] * n)
        self.c.extend([0.0] * n)
        self.token.extend([0] * n)
        self.alive.extend([False] * n)
        self.admit_step.extend([0] * n)
        self.waiting.extend(range(base, base + n))
        self.target = max(1, min(self.max_seqs, n))

    def fits_at_once(self, lengths: np.ndarray, prompts: np.ndarray) -> bool:
        return (
            self.idle
            and lengths.size <= self.max_seqs
            and float(prompts.sum()) + lengths.size <= self.admit_limit
            and float(prompts.sum() + lengths.sum()) <= self.capacity
        )

    def run_wave(self, gids: np.ndarray, lengths: np.ndarray, prompts: np.ndarray) -> None:
        """Closed form for a minibatch admitted whole at one step (it fits the slots and the cache)."""
        total, finish = wave_decode_seconds(self.preset, lengths, prompts)
        start = self.t
        self.admit_out[gids] = start
        self.finish_out[gids] = start + finish
        st = self.stats
        n = lengths.size
        steps = float(lengths.max())
        st.decode_steps += steps
        st.live_slot_steps += float(lengths.sum())
        st.target_slot_steps += steps * n
        st.busy_s += total
        st.peak_kv_tokens = max(st.peak_kv_tokens, _peak_held(lengths, prompts))
        # Tail: after the (m+1)-th longest finishes only m are live; m < threshold·n is tail.
        last_tail = math.ceil(self.tail_fraction * n) - 1
        if last_tail >= 1:
            ordered = np.sort(finish)[::-1]
            st.tail_s += total - float(ordered[last_tail])
        self.t = start + total

    def run(self, *, drain: bool) -> None:
        """Advance until the waiting queue is empty (``drain=False``) or nothing is live (``drain=True``)."""
        st = self.stats
        while True:
            if self.waiting:
                self._admit()
            if not drain and not self.waiting:
                return
            if self.live == 0:
                if not self.waiting:
                    return
                self._admit(force=True)
            while self.heap and self.token[self.heap[0][2]] != self.heap[0][1]:
                heapq.heappop(self.heap)
            finish_step = self.heap[0][0]
            room = int((self.capacity - self.sum_c) // self.live) - self.step if self.capacity < math.inf else 1 << 60
            if room < 1:
                if self.live > 1:
                    self._preempt()
                    continue
                room = finish_step - self.step  # a lone request larger than the cache: let it run
            m = min(finish_step - self.step, room)
            b = self.live
            s = self.step
            dt = m * (self.g_o + max(self.t_w, self.c_tok * b)) + self.kv * (
                m * self.sum_c + b * (m * s + m * (m + 1) / 2.0)
            )
            st.decode_steps += m
            st.live_slot_steps += m * b
            st.target_slot_steps += m * max(self.target, b)
            st.busy_s += dt
            if b < self.tail_fraction * self.target:
                st.tail_s += dt
            self.t += dt
            self.step = s + m
            st.peak_kv_tokens = max(st.peak_kv_tokens, self.sum_c + b * self.step)
            while self.heap and self.heap[0][0] == self.step:
                _, tok, j = heapq.heappop(self.heap)
                if self.token[j] != tok:
                    continue
                self.alive[j] = False
                self.live -= 1
                self.sum_c -= self.c[j]
                self.finish_out[self.gid[j]] = self.t
            if self.live == 0:
                self.stack.clear()

    def _admit(self, force: bool = False) -> None:
        prefill_tokens = 0
        held = self.sum_c + self.live * self.step
        while self.waiting and self.live < self.max_seqs:
            j = self.waiting[0]
            need = self.prompt[j] + self.done_before[j]
            # Room for the prompt and for one more token of every live sequence, so an admission is never
            # undone by a preemption at the very next step (which would loop forever).
            if held + need + self.live + 1 > self.admit_limit and not force:
                break
            if held + need > self.capacity:
                self.stats.oversize += 1
            force = False
            self.waiting.popleft()
            held += need
            prefill_tokens += need
            self.c[j] = need - self.step
            self.sum_c += self.c[j]
            self.live += 1
            self.alive[j] = True
            self.admit_step[j] = self.step
            self.token[j] += 1
            if self.done_before[j] == 0:
                self.admit_out[self.gid[j]] = self.t
            heapq.heappush(self.heap, (self.step + self.length[j] - self.done_before[j], self.token[j], j))
            self.stack.append(j)
        if prefill_tokens:
            dt = float(self.preset.prefill_seconds(prefill_tokens))
            self.t += dt
            self.stats.busy_s += dt

    def _preempt(self) -> None:
        # vLLM V1: the newest running request loses its KV blocks and goes back to the front of the queue;
        # its generated tokens are kept and recomputed (prefilled again) on readmission.
        while True:
            j = self.stack.pop()
            if self.alive[j]:
                break
        generated = self.done_before[j] + self.step - self.admit_step[j]
        self.alive[j] = False
        self.token[j] += 1  # the heap entry becomes stale
        self.live -= 1
        self.sum_c -= self.c[j]
        self.done_before[j] = generated
        self.waiting.appendleft(j)
        self.stats.preemptions += 1
        self.stats.recomputed_tokens += self.prompt[j] + generated


def _peak_held(lengths: np.ndarray, prompts: np.ndarray) -> float:
    """Peak KV tokens of a wave: with the k longest live, the cache peaks just as the k-th finishes."""
    order = np.argsort(-lengths, kind="stable")
    count = np.arange(1, lengths.size + 1, dtype=np.float64)
    return float(np.max(np.cumsum(prompts[order]) + count * lengths[order]))


def _static_batch(preset: HardwarePreset, lengths: np.ndarray, prompts: np.ndarray,
                  tail_fraction: float) -> tuple[float, float]:
    """HF-generate batch: every row steps until the longest ends. Returns (seconds, tail seconds)."""
    n = lengths.size
    longest = float(lengths.max())
    fixed = preset.step_overhead_s + max(preset.weight_read_s, preset.compute_s_per_token * n)

    def steps_time(first: float, last: float) -> float:  # steps first..last inclusive, all n rows live
        m = last - first + 1
        if m <= 0:
            return 0.0
        return m * fixed + preset.kv_s_per_token * (m * float(prompts.sum()) + n * (first + last) * m / 2.0)

    total = float(preset.prefill_seconds(prompts.sum())) + steps_time(1.0, longest)
    tail = 0.0
    last_tail = math.ceil(tail_fraction * n) - 1
    if last_tail >= 1:
        ordered = np.sort(lengths)[::-1]
        tail = steps_time(float(ordered[last_tail]) + 1.0, longest)
    return total, tail


# --------------------------------------------------------------------------------------------------------
# The trainer


class _Trainer:
    """Consumes complete groups in arrival order, ``batch`` per step; advanced lazily up to a watermark."""

    def __init__(self, preset: HardwarePreset, batch: int, group_tokens: np.ndarray) -> None:
        self.preset = preset
        self.batch = batch
        self.group_tokens = group_tokens
        self.total = group_tokens.size
        self.pending: list[tuple[float, int]] = []  # arrivals not yet moved to the queue
        self.queue: deque[tuple[float, int]] = deque()
        self.free_at = 0.0
        self.published: list[float] = []  # version v is available from published[v - 1]
        self.consumed = 0
        self.arrived = 0
        self.step_start: list[float] = []
        self.step_end: list[float] = []
        self.step_groups: list[int] = []
        self.group_step = np.full(self.total, -1, dtype=np.int64)
        self.group_consumed = np.zeros(self.total, dtype=np.float64)

    def arrive(self, time: float, group: int) -> None:
        heapq.heappush(self.pending, (time, group))

    def next_arrival(self) -> float:
        return self.pending[0][0] if self.pending else math.inf

    def advance(self, now: float) -> None:
        """Process everything decided by the arrivals up to ``now`` (all arrivals <= now are known)."""
        while self.pending and self.pending[0][0] <= now:
            self.queue.append(heapq.heappop(self.pending))
            self.arrived += 1
        while self.queue:
            everything_in = self.arrived == self.total
            if len(self.queue) < self.batch and not everything_in:
                return
            take = min(self.batch, len(self.queue))
            members = [self.queue.popleft() for _ in range(take)]
            start = max(self.free_at, members[-1][0])
            ids = np.fromiter((g for _, g in members), dtype=np.int64, count=take)
            train = float(self.preset.train_step_seconds(self.group_tokens[ids].sum()))
            step = len(self.step_start)
            self.group_step[ids] = step
            self.group_consumed[ids] = start
            self.step_start.append(start)
            self.step_end.append(start + train)
            self.step_groups.append(take)
            self.free_at = start + train + self.preset.weight_sync_s
            self.published.append(self.free_at)
            self.consumed += take

    def version_at(self, time: float) -> int:
        # `published` is increasing; a step not yet decided publishes after any time we ask about.
        lo, hi = 0, len(self.published)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.published[mid] <= time:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def next_publish_after(self, time: float) -> float:
        v = self.version_at(time)
        return self.published[v] if v < len(self.published) else math.inf


# --------------------------------------------------------------------------------------------------------
# The replay


def simulate_arrays(
    preset: HardwarePreset,
    settings: SimulationSettings,
    *,
    instances: int,
    row_minibatch: np.ndarray,
    row_instance: np.ndarray,
    response_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
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
    """
    n_rows = row_minibatch.size
    n = settings.samples_per_prompt
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
            raise SettingsError(
                f"the schedule uses instance {int(mb_instance.max())} but the simulation has {instances}; "
                "pass --instances to match, or --dispatch free"
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
    stats = [_Stats() for _ in range(instances)]
    engines = [_Engine(preset, settings, stats[k], finish, admit) for k in range(instances)]
    loaded = [0] * instances
    trainer = _Trainer(preset, settings.train_batch_size, group_tokens)
    # Groups whose samples are spread over an instance's stream: report arrival once all N are done.
    open_groups: list[list[int]] = [[] for _ in range(instances)]
    started_groups = 0
    cap_groups = None if settings.max_lag is None else settings.max_lag + 1
    streaming = settings.mode == "streaming"
    static = settings.mode == "static"

    events: list[tuple[float, int, int]] = [(0.0, k, k) for k in range(instances)]
    heapq.heapify(events)
    counter = instances
    held: dict[int, float] = {}  # instance -> time it started waiting for the lag rule

    def report_groups(k: int, upto: float) -> None:
        # Streaming engines finish groups over time: release those whose samples all finished by `upto`.
        keep = []
        for r in open_groups[k]:
            done = finish[r * n:(r + 1) * n]
            if np.all(done > 0) and done.max() <= upto:
                trainer.arrive(float(done.max()), r)
            else:
                keep.append(r)
        open_groups[k] = keep

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
                report_groups(k, math.inf)
            stats[k].end_s = max(stats[k].end_s, engine.t)
            continue
        mb = queue[0]
        rows = int(mb_end[mb] - mb_start[mb])
        if cap_groups is not None and started_groups > 0:
            limit = (cap_groups + trainer.version_at(t)) * settings.train_batch_size
            if started_groups >= limit:
                if streaming and not engine.idle:
                    engine.t = max(engine.t, t)
                    engine.run(drain=True)
                    report_groups(k, math.inf)
                    heapq.heappush(events, (engine.t, counter, k))
                    counter += 1
                else:
                    held[k] = t
                continue
        queue.popleft()
        engine.t = max(engine.t, t)
        version = trainer.version_at(engine.t)
        if version > loaded[k]:
            loaded[k] = version
            engine.t += preset.weight_sync_s
            stats[k].sync_s += preset.weight_sync_s
        r0, r1 = int(mb_start[mb]), int(mb_end[mb])
        group_version[r0:r1] = loaded[k]
        started_groups += rows
        gids = np.arange(r0 * n, r1 * n, dtype=np.int64)
        seq_instance[gids] = k
        mb_lengths = seq_lengths[r0 * n:r1 * n]
        mb_prompts = seq_prompts[r0 * n:r1 * n]
        if static:
            _run_static(engine, preset, settings, gids, mb_lengths, mb_prompts, finish, admit)
        elif not streaming and engine.fits_at_once(mb_lengths, mb_prompts):
            engine.run_wave(gids, mb_lengths, mb_prompts)
        else:
            engine.feed(gids, mb_lengths, mb_prompts)
            engine.run(drain=not streaming)
        if streaming:
            open_groups[k].extend(range(r0, r1))
            report_groups(k, engine.t)
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
    result.metrics = _metrics(result, preset, settings, instances)
    return result


def _wake(trainer: _Trainer, held: dict[int, float], events: list, stats: list[_Stats]) -> None:
    """Wake instances held by the lag rule at the first publish after they stopped, once it is known."""
    for k in list(held):
        publish = trainer.next_publish_after(held[k])
        if publish < math.inf:
            stats[k].held_s += publish - held.pop(k)
            heapq.heappush(events, (publish, -1 - k, k))


def _run_static(engine: _Engine, preset: HardwarePreset, settings: SimulationSettings, gids: np.ndarray,
                lengths: np.ndarray, prompts: np.ndarray, finish: np.ndarray, admit: np.ndarray) -> None:
    st = engine.stats
    cap = max(1, int(preset.max_num_seqs))
    for lo in range(0, lengths.size, cap):
        part = slice(lo, min(lo + cap, lengths.size))
        seconds, tail = _static_batch(preset, lengths[part], prompts[part], settings.tail_threshold)
        rows = lengths[part].size
        longest = float(lengths[part].max())
        if rows * (float(prompts[part].max()) + longest) > engine.capacity:
            st.static_over_capacity += 1
        admit[gids[part]] = engine.t
        engine.t += seconds
        finish[gids[part]] = engine.t
        st.busy_s += seconds
        st.tail_s += tail
        st.decode_steps += longest
        st.live_slot_steps += float(lengths[part].sum())
        st.target_slot_steps += longest * rows


# --------------------------------------------------------------------------------------------------------
# Metrics


def _metrics(result: SimulationResult, preset: HardwarePreset, settings: SimulationSettings,
             instances: int) -> dict:
    stats: list[_Stats] = result.extras["stats"]
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
    overall_mean = float(sample_len.mean())
    step_tokens = np.bincount(result.group_step, weights=tokens_per_group, minlength=steps)
    step_samples = np.bincount(result.group_step, minlength=steps) * settings.samples_per_prompt
    ratio = step_tokens / np.maximum(step_samples, 1) / overall_mean
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
        "preemptions": int(sum(s.preemptions for s in stats)),
        "recomputed_tokens": int(sum(s.recomputed_tokens for s in stats)),
        "oversize_requests": int(sum(s.oversize for s in stats)),
        "static_batches_over_kv_capacity": int(sum(s.static_over_capacity for s in stats)),
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
        "steps_beyond_25pct_of_mean": float(np.mean(np.abs(ratio - 1.0) > 0.25)),
    }


# --------------------------------------------------------------------------------------------------------
# Lengths for a schedule: observed ones, or the noise model around the predictions

# The noise model (docs/simulation.md, "Lengths"): a prompt's true mean is its predicted mean times a
# lognormal factor of sigma 0.5 (a predictor's typical error on log length), and each sample is that mean
# times a lognormal factor of sigma 0.3 (the median within-group CV of 0.28 in the AIME R1-distill data,
# ../shared/data/aime_r1distill1.5b_lengths/SOURCE.md). Both factors have mean 1.
PROMPT_SIGMA = 0.5
SAMPLE_SIGMA = 0.3
# Prefill is charged on this many prompt tokens when the schedule has no prompt_tokens column.
DEFAULT_PROMPT_TOKENS = 200


def sample_lengths(
    predicted_mean_tokens: np.ndarray,
    prompt_keys: np.ndarray,
    samples_per_prompt: int,
    *,
    seed: int,
    max_response_tokens: int,
    prompt_sigma: float = PROMPT_SIGMA,
    sample_sigma: float = SAMPLE_SIGMA,
) -> np.ndarray:
    """Lengths drawn around predictions: ``(rows, samples_per_prompt)`` int64, in [1, max_response_tokens].

    ``prompt_keys`` (one integer per row) ties the per-prompt factor to the prompt, so every epoch of a
    prompt shares it.
    """
    rng = np.random.default_rng(seed)
    keys = np.asarray(prompt_keys)
    n_keys = int(keys.max()) + 1 if keys.size else 0
    prompt_factor = np.exp(rng.normal(0.0, prompt_sigma, n_keys) - prompt_sigma**2 / 2)
    sample_factor = np.exp(rng.normal(0.0, sample_sigma, (keys.size, samples_per_prompt)) - sample_sigma**2 / 2)
    mean = np.maximum(np.asarray(predicted_mean_tokens, dtype=np.float64), 1.0) * prompt_factor[keys]
    return np.clip(np.rint(mean[:, None] * sample_factor), 1, max_response_tokens).astype(np.int64)


@dataclass(frozen=True)
class LengthInfo:
    """Where the simulated lengths came from."""

    prompts_observed: int
    prompts_sampled: int
    prompts_resampled: int  # observed, but with fewer samples than N (drawn with replacement)

    def to_dict(self) -> dict:
        return {
            "prompts_with_observed_lengths": self.prompts_observed,
            "prompts_with_sampled_lengths": self.prompts_sampled,
            "prompts_resampled_with_replacement": self.prompts_resampled,
        }


def lengths_for_schedule(
    frame,  # pl.DataFrame: the schedule rows in seq order
    observed=None,  # pl.DataFrame | None: prompt_id, response_tokens (one row per sample, file order)
    *,
    samples_per_prompt: int,
    seed: int = 0,
    max_response_tokens: int = 1 << 30,
) -> tuple[np.ndarray, LengthInfo]:
    """True lengths per schedule row: observed where given, otherwise the noise model.

    A prompt with at least N observed samples uses its first N; one with fewer draws N with replacement
    (deterministically from ``seed``); a prompt absent from ``observed`` is sampled around its prediction.
    """
    import polars as pl

    n = samples_per_prompt
    ids = frame["prompt_id"]
    keys = ids.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    rows = frame.height
    out = np.zeros((rows, n), dtype=np.int64)
    have = np.zeros(rows, dtype=bool)
    resampled = 0
    if observed is not None and observed.height:
        obs = observed.select("prompt_id", "response_tokens").with_columns(
            pl.int_range(0, pl.len()).over("prompt_id").alias("k")
        )
        counts = obs.group_by("prompt_id", maintain_order=True).agg(pl.len().alias("count"))
        counts = counts.with_columns(
            (pl.col("count").cum_sum() - pl.col("count")).alias("offset")
        )
        flat = obs.join(counts, on="prompt_id", how="left").sort(["offset", "k"])["response_tokens"].to_numpy()
        joined = frame.select("prompt_id").join(counts, on="prompt_id", how="left", maintain_order="left")
        count = joined["count"].fill_null(0).to_numpy().astype(np.int64)
        offset = joined["offset"].fill_null(0).to_numpy().astype(np.int64)
        have = count > 0
        rng = np.random.default_rng(seed)
        draws = np.floor(rng.random((rows, n)) * np.maximum(count, 1)[:, None]).astype(np.int64)
        j = np.arange(n)[None, :]
        index = np.where(j < count[:, None], j, draws)
        out[have] = flat[(offset[:, None] + index)[have]]
        resampled = int(np.sum(have & (count < n)))
    if not have.all():
        col = "predicted_mean_tokens" if "predicted_mean_tokens" in frame.columns else "predicted_tokens"
        mean = frame[col].fill_null(1).to_numpy()
        drawn = sample_lengths(mean, keys, n, seed=seed, max_response_tokens=max_response_tokens)
        out[~have] = drawn[~have]
    observed_prompts = int(ids.filter(pl.Series(have)).n_unique())
    sampled_prompts = int(ids.filter(pl.Series(~have)).n_unique())
    return np.maximum(out, 1), LengthInfo(observed_prompts, sampled_prompts, resampled)


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
    )
    m = result.metrics
    m.update(bound.to_dict())
    m["ratio_to_lower_bound"] = m["end_to_end_s"] / bound.end_to_end_s if bound.end_to_end_s else 1.0
    m["rollout_ratio_to_lower_bound"] = m["rollout_makespan_s"] / bound.rollout_s if bound.rollout_s else 1.0
    return result


# --------------------------------------------------------------------------------------------------------
# The Python twin of `asp simulate`


@dataclass
class SimulationReport:
    """What `simulate_file` produced: the summary document, the replay, and the comparison rows."""

    document: dict
    result: SimulationResult
    comparison: list[dict] | None = None


def schedule_prompts(frame):  # pl.DataFrame -> (prompts, predictions), one row per prompt
    """The prompts and predictions a schedule was made from (first occurrence of each row)."""
    import polars as pl

    first = frame.sort("seq").unique("row", keep="first", maintain_order=True).sort("row")
    predicted = pl.col("predicted_tokens")
    prompts = first.select("row", "prompt_id")
    predictions = first.select(
        (pl.col("prompt_tokens") if "prompt_tokens" in first.columns else pl.lit(DEFAULT_PROMPT_TOKENS))
        .cast(pl.Int64).alias("prompt_tokens"),
        (pl.col("predicted_max_tokens") if "predicted_max_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_max_tokens"),
        (pl.col("predicted_mean_tokens") if "predicted_mean_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_mean_tokens"),
        predicted.cast(pl.Int64).alias("predicted_tokens"),
        (pl.col("prediction_source") if "prediction_source" in first.columns else pl.lit("model"))
        .cast(pl.String).alias("prediction_source"),
    )
    return prompts, predictions


def simulate_file(
    schedule_path,
    lengths_paths=(),
    *,
    preset: str | None = None,
    mode: Mode = "continuous",
    dispatch: Dispatch = "planned",
    max_lag: int | None = None,
    use_schedule_max_lag: bool = True,
    instances: int | None = None,
    seed: int | None = None,
    lengths_id_key: str | None = None,
    lengths_length_key: str | None = None,
    compare: bool = False,
    on_bad_row: str = "error",
) -> SimulationReport:
    """Read a schedule (and observed lengths), replay it, and optionally compare it with the baselines.

    Settings the schedule recorded (instances, N, train batch size, cap, preset, max_lag, seed) are used
    unless given here.

    Raises
    ------
    ScheduleFormatError, InputError, SettingsError
    """
    from pathlib import Path

    from asp_cli.costmodel import load_preset
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import read_schedule
    from asp_cli.settings import ScheduleSettings

    schedule = read_schedule(Path(schedule_path))
    recorded = ScheduleSettings.from_dict(schedule.settings) if schedule.settings else ScheduleSettings(
        instances=schedule.instances)
    n = recorded.samples_per_prompt
    k = instances if instances is not None else max(recorded.instances, int(schedule.frame["instance"].max()) + 1)
    lag = max_lag if max_lag is not None else (recorded.max_lag if use_schedule_max_lag else None)
    seed = recorded.seed if seed is None else seed
    hardware = load_preset(preset or recorded.preset)
    observed = None
    skipped = 0
    if lengths_paths:
        observed, read = read_lengths([Path(p) for p in lengths_paths], id_key=lengths_id_key,
                                      length_key=lengths_length_key, on_bad_row=on_bad_row,  # type: ignore[arg-type]
                                      id_flag="--lengths-id-key", length_flag="--lengths-length-key")
        skipped = read.skipped_rows
    frame = schedule.frame.sort("seq")
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=n, seed=seed,
                                         max_response_tokens=recorded.max_response_tokens)
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=recorded.train_batch_size, mode=mode,
                                  dispatch=dispatch, max_lag=lag)
    result = simulate_schedule(frame, lengths, hardware, settings, instances=k)
    document = {
        "schedule": str(schedule_path),
        "preset": hardware.name,
        "mode": mode,
        "dispatch": dispatch,
        "instances": k,
        "samples_per_prompt": n,
        "train_batch_size": recorded.train_batch_size,
        "max_lag": lag,
        "lengths": {**info.to_dict(), "skipped_rows": skipped},
        "noise_model": None if info.prompts_sampled == 0 else {
            "prompt_sigma": PROMPT_SIGMA, "sample_sigma": SAMPLE_SIGMA, "seed": seed},
        "metrics": result.metrics,
    }
    comparison = None
    if compare:
        import dataclasses

        import polars as pl

        from asp_cli.sim.bench import compare as run_compare

        prompts, predictions = schedule_prompts(frame)
        truth, _ = lengths_for_schedule(pl.concat([prompts, predictions], how="horizontal"), observed,
                                        samples_per_prompt=n, seed=seed,
                                        max_response_tokens=recorded.max_response_tokens)
        include = None if info.prompts_sampled == 0 else tuple(
            name for name in _COMPARE_ALL if name != "asp (true lengths)")
        recorded_k = dataclasses.replace(recorded, instances=k, max_lag=lag)
        comparison = run_compare(prompts, predictions, truth, recorded_k, hardware, mode=mode, max_lag=lag,
                                 asp_frame=frame, include=include)
        document["comparison"] = comparison
    return SimulationReport(document, result, comparison)


_COMPARE_ALL = ("verl-default", "dataset-order", "short-first", "long-first", "count-balance",
                "rollpacker-tail", "asp", "asp, free dispatch", "asp (true lengths)")

