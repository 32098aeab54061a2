"""The simulated trainer: complete groups in arrival order, one step per train batch, then a weight sync."""

from __future__ import annotations

import heapq
from bisect import bisect_right
import math
from collections import deque

import numpy as np

from asp_cli.costmodel import HardwarePreset


class Trainer:
    """Consumes complete groups, ``batch`` per step; advanced lazily up to a watermark.

    By default in arrival order (what most trainers do: the next ``batch`` finished groups). With
    ``assigned_step`` (one step per group, 0-based and dense), step ``s`` takes exactly the groups assigned to
    it, once all of them have arrived (a replay buffer that follows the schedule's ``train_step``).
    """

    def __init__(self, preset: HardwarePreset, batch: int, group_tokens: np.ndarray,
                 assigned_step: np.ndarray | None = None) -> None:
        self.preset = preset
        self.batch = batch
        self.assigned = None if assigned_step is None else np.asarray(assigned_step, dtype=np.int64)
        if self.assigned is not None:
            self.step_size = np.bincount(self.assigned)
            self.step_arrived = np.zeros(self.step_size.size, dtype=np.int64)
            self.step_ready = np.zeros(self.step_size.size, dtype=np.float64)
            self.members = np.argsort(self.assigned, kind="stable")
            self.member_start = np.concatenate(([0], np.cumsum(self.step_size)))
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
        if self.assigned is not None:
            self._advance_assigned(now)
            return
        while self.pending and self.pending[0][0] <= now:
            self.queue.append(heapq.heappop(self.pending))
            self.arrived += 1
        while self.queue:
            everything_in = self.arrived == self.total
            if len(self.queue) < self.batch and not everything_in:
                return
            take = min(self.batch, len(self.queue))
            members = [self.queue.popleft() for _ in range(take)]
            ids = np.fromiter((g for _, g in members), dtype=np.int64, count=take)
            self._take(len(self.step_start), ids, max(self.free_at, members[-1][0]))

    def _advance_assigned(self, now: float) -> None:
        while self.pending and self.pending[0][0] <= now:
            time, group = heapq.heappop(self.pending)
            s = int(self.assigned[group])
            self.step_arrived[s] += 1
            self.step_ready[s] = max(self.step_ready[s], time)
            self.arrived += 1
        while len(self.step_start) < self.step_size.size:
            step = len(self.step_start)
            if self.step_arrived[step] < self.step_size[step]:
                return
            ids = self.members[self.member_start[step]:self.member_start[step + 1]]
            start = max(self.free_at, float(self.step_ready[step]))
            self._take(step, ids, start)

    def _take(self, step: int, ids: np.ndarray, start: float) -> None:
        train = float(self.preset.train_step_seconds(self.group_tokens[ids].sum()))
        self.group_step[ids] = step
        self.group_consumed[ids] = start
        self.step_start.append(start)
        self.step_end.append(start + train)
        self.step_groups.append(ids.size)
        self.free_at = start + train + self.preset.weight_sync_s
        self.published.append(self.free_at)
        self.consumed += ids.size

    def version_at(self, time: float) -> int:
        # `published` is increasing; a step not yet decided publishes after any time we ask about. The versions
        # published by ``time``: a binary search (`bisect_right`: how many are <= time).
        return bisect_right(self.published, time)

    def next_publish_after(self, time: float) -> float:
        v = self.version_at(time)
        return self.published[v] if v < len(self.published) else math.inf
