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
* ``max_lag``: AReaL's admission rule (``inclusionAI/AReaL:areal/infra/staleness_manager.py:106-109`` at v1.0.4,
  ``areal/core/staleness_manager.py`` in 0.4.0-0.5.3): a minibatch may start only while the groups started so far
  stay below ``(max_lag + v + 1)·train_batch_size``; otherwise the instance waits for the next published version.
  (AReaL counts the groups running or accepted, so one its filter rejects frees its place; asp rejects none.)

Everything here takes NumPy arrays; `simulate_schedule` is the entry point over a schedule frame.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from asp_cli.costmodel import HardwarePreset, wave_decode_seconds
from asp_cli.sim.records import SimulationSettings, Stats


class Engine:
    """One rollout instance: continuous batching with preemption, advanced segment by segment."""

    def __init__(self, preset: HardwarePreset, settings: SimulationSettings, stats: Stats,
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
        self.finished: list[int] = []  # global ids finished by `run`, for the caller to collect
        self.target = 1
        # Per fed request (local id): global id, length, prompt, generated before its admission, c, token. A
        # finished request's local id goes to `free` and is reused by a later feed, so these lists stay as long
        # as the most requests live or waiting at once, not as the whole replay (8M sequences at 1M prompts).
        # `token` keeps growing across reuse (a finished request has no stale heap entry left, since a preempted
        # entry always ends before its readmission does, but nothing needs to rely on that).
        self.free: list[int] = []
        self.oversized: set[int] = set()  # global ids counted as larger than the cache (`Stats.oversize`)
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

    def feed(self, gids: Sequence[int], lengths: Sequence[int], prompts: Sequence[int]) -> None:
        """Queue requests: global ids, response lengths and prompt tokens, as Python ints (a range and lists)."""
        n = len(gids)
        free = self.free
        reused = min(n, len(free))
        ids = free[len(free) - reused:]
        del free[len(free) - reused:]
        gid, length, prompt = self.gid, self.length, self.prompt
        done_before, c, alive, admit_step = self.done_before, self.c, self.alive, self.admit_step
        for j, g, size, tokens in zip(ids, gids, lengths, prompts):
            gid[j], length[j], prompt[j] = g, size, tokens
            done_before[j], c[j], alive[j], admit_step[j] = 0, 0.0, False, 0
        base = len(gid)
        new = n - reused
        if new:
            gid.extend(gids[reused:])
            length.extend(lengths[reused:])
            prompt.extend(prompts[reused:])
            done_before.extend([0] * new)
            c.extend([0.0] * new)
            self.token.extend([0] * new)
            alive.extend([False] * new)
            admit_step.extend([0] * new)
        self.waiting.extend(ids)
        self.waiting.extend(range(base, base + new))
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

    def run(self, *, drain: bool, one_finish: bool = False, until: float = math.inf) -> None:
        """Advance until the waiting queue is empty (``drain=False``) or nothing is live (``drain=True``); with
        ``one_finish``, also stop once some sequences have finished (an engine held by the lag rule keeps
        decoding what it has and looks again after each completion), and with ``until``, at the first decode
        step that ends at or after that time (so a held engine looks again when the lag rule may let it go)."""
        st = self.stats
        # Containers, constants and the engine's clock, step, live count and summed context are read into locals
        # once (the loop runs once per event of the whole replay) and written back around `_admit` and
        # `_preempt`, which change them, and on leaving. The integer counters of `stats` are summed here and
        # added on leaving (sums of whole numbers: exact either way); the float ones are added in place, in the
        # same order as `_admit` adds its prefill time. The arithmetic is the same, in the same order.
        heap, token, alive, c, waiting = self.heap, self.token, self.alive, self.c, self.waiting
        gid, finish_out, finished, free, stack = self.gid, self.finish_out, self.finished, self.free, self.stack
        capacity, g_o, t_w, c_tok, kv = self.capacity, self.g_o, self.t_w, self.c_tok, self.kv
        max_seqs, target = self.max_seqs, self.target
        tail_below = self.tail_fraction * target
        bounded = capacity < math.inf
        timed = until < math.inf
        heappop = heapq.heappop
        t, step, live, sum_c = self.t, self.step, self.live, self.sum_c
        decode_steps = live_slot_steps = target_slot_steps = 0
        while True:
            if t >= until:
                break
            if waiting and live < max_seqs:  # `_admit` admits nothing into full slots
                self.t, self.step, self.live, self.sum_c = t, step, live, sum_c
                self._admit()
                t, live, sum_c = self.t, self.live, self.sum_c
            if not drain and not waiting:
                break
            if live == 0:
                if not waiting:
                    break
                self.t, self.step, self.live, self.sum_c = t, step, live, sum_c
                self._admit(force=True)
                t, live, sum_c = self.t, self.live, self.sum_c
            while heap and token[heap[0][2]] != heap[0][1]:
                heappop(heap)
            finish_step = heap[0][0]
            room = int((capacity - sum_c) // live) - step if bounded else 1 << 60
            if room < 1:
                if live > 1:
                    self.step, self.live, self.sum_c = step, live, sum_c
                    self._preempt()
                    live, sum_c = self.live, self.sum_c
                    continue
                # A lone request larger than the cache: let it run, counted once (it was counted only where its
                # prompt alone overflowed at admission: a 1.5M-token response read 0 oversize at 157% KV).
                j = heap[0][2]
                if gid[j] not in self.oversized:
                    self.oversized.add(gid[j])
                    st.oversize += 1
                room = finish_step - step
            m = min(finish_step - step, room)
            b = live
            s = step
            if timed:
                self.sum_c = sum_c
                m = self._steps_within(m, b, s, until - t)
            dt = m * (g_o + max(t_w, c_tok * b)) + kv * (
                m * sum_c + b * (m * s + m * (m + 1) / 2.0)
            )
            decode_steps += m
            live_slot_steps += m * b
            target_slot_steps += m * (target if target > b else b)
            st.busy_s += dt
            if b < tail_below:
                st.tail_s += dt
            t += dt
            step = s + m
            held = sum_c + b * step
            if held > st.peak_kv_tokens:
                st.peak_kv_tokens = held
            finished_now = False
            while heap and heap[0][0] == step:
                _, tok, j = heappop(heap)
                if token[j] != tok:
                    continue
                alive[j] = False
                live -= 1
                sum_c -= c[j]
                finish_out[gid[j]] = t
                finished.append(gid[j])
                free.append(j)
                finished_now = True
            if live == 0:
                stack.clear()
            if one_finish and finished_now:
                break
        self.t, self.step, self.live, self.sum_c = t, step, live, sum_c
        st.decode_steps += decode_steps
        st.live_slot_steps += live_slot_steps
        st.target_slot_steps += target_slot_steps

    def _steps_within(self, m: int, b: int, s: int, seconds: float) -> int:
        """The most of the next ``m`` decode steps (``b`` live, from step ``s``) that end within ``seconds``, at
        least one: the segment's time ``m·A + kv·(m·Σc + b·(m·s + m(m+1)/2))`` is quadratic in ``m``."""
        per_step = self.g_o + max(self.t_w, self.c_tok * b) + self.kv * (self.sum_c + b * s + b / 2.0)
        curve = self.kv * b / 2.0
        if curve > 0:
            within = (-per_step + math.sqrt(per_step * per_step + 4.0 * curve * max(seconds, 0.0))) / (2.0 * curve)
        else:
            within = max(seconds, 0.0) / per_step if per_step > 0 else m
        return max(1, min(m, math.ceil(within)))

    def _admit(self, force: bool = False) -> None:
        # The hottest loop of a streaming plan (every request passes here once, and again after a preemption):
        # attributes are read once into locals; the arithmetic is the same, in the same order.
        waiting, prompt, done_before, c, token = self.waiting, self.prompt, self.done_before, self.c, self.token
        gid, admit_out, heap, stack, alive = self.gid, self.admit_out, self.heap, self.stack, self.alive
        step, t, max_seqs, admit_limit, capacity = self.step, self.t, self.max_seqs, self.admit_limit, self.capacity
        prefill_tokens = 0
        live = self.live
        sum_c = self.sum_c
        held = sum_c + live * step
        while waiting and live < max_seqs:
            j = waiting[0]
            before = done_before[j]
            need = prompt[j] + before
            # Room for the prompt and for one more token of every live sequence, so an admission is never
            # undone by a preemption at the very next step (which would loop forever).
            if held + need + live + 1 > admit_limit and not force:
                break
            if held + need > capacity and gid[j] not in self.oversized:
                self.oversized.add(gid[j])
                self.stats.oversize += 1
            force = False
            waiting.popleft()
            held += need
            prefill_tokens += need
            c[j] = need - step
            sum_c += c[j]
            live += 1
            alive[j] = True
            self.admit_step[j] = step
            token[j] += 1
            if before == 0:
                admit_out[gid[j]] = t
            heapq.heappush(heap, (step + self.length[j] - before, token[j], j))
            stack.append(j)
        self.live = live
        self.sum_c = sum_c
        if prefill_tokens:
            dt = self.c_tok * float(prefill_tokens)  # `HardwarePreset.prefill_seconds`, for one count
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


def static_batch(preset: HardwarePreset, lengths: np.ndarray, prompts: np.ndarray,
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
