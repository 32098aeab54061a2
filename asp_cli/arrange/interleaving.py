"""Interleaving: when and where each minibatch runs (against skewness and sorting bubbles).

The idea, in three steps (docs/algorithms.md):

1. Classes: minibatches are ranked by predicted duration and split into equal-count length classes.
2. Ideal start times: inside an epoch, the minibatches of each class are spread evenly over the part of the
   epoch's ideal horizon ``H = sum(durations) / K`` in which they can still finish, ``[0, H - d_c]``, longest
   first. Every class therefore finishes groups at a steady rate over the whole epoch: the trainer sees a
   steady, representative stream (no sorting bubble), long work starts early and never runs last (no
   skewness bubble at the end of the epoch).
3. Dispatch: ``seq`` is the ideal-start order; an engine that hands minibatches in ``seq`` order to whichever
   instance is free does list scheduling (Graham 1966) on it and absorbs prediction error as it goes. The
   planned ``instance`` of each minibatch is list scheduling under a per-class count balance
   (`balanced_assignment`), so that an engine that keeps to it is hurt less by errors shared by a class.

Kernels take NumPy arrays and return indices; O(M log M) for M minibatches plus O(M log K) for dispatch.
"""

from __future__ import annotations

import heapq

import numpy as np


def length_classes(duration_s: np.ndarray, n_classes: int) -> np.ndarray:
    """Equal-count classes by duration rank: 0 is the shortest class, ``n_classes - 1`` the longest."""
    duration = np.asarray(duration_s, dtype=np.float64)
    m = duration.size
    if m == 0:
        return np.zeros(0, dtype=np.int32)
    n_classes = max(1, min(n_classes, m))
    # Stable ascending rank; ties keep input order, so the classes are deterministic.
    rank = np.empty(m, dtype=np.int64)
    rank[np.argsort(duration, kind="stable")] = np.arange(m)
    return (rank * n_classes // m).astype(np.int32)


def ideal_start_s(
    duration_s: np.ndarray,
    classes: np.ndarray,
    instances: int,
    lead: float = 1.0,
    *,
    groups: np.ndarray | None = None,
    warm_groups: int = 0,
    horizon_s: float | None = None,
) -> np.ndarray:
    """Each minibatch's ideal start time, relative to the epoch's start.

    Inside class c (n_c minibatches, longest one d_c), the j-th longest starts at ``j * span_c / n_c`` with
    ``span_c = max(H - lead * d_c, 0)`` and ``H = sum(durations) / instances``: a class's completions are
    spread evenly over ``[d_c, H]``.

    Warm start: with ``warm_groups`` > 0 (and ``groups``, the groups in each minibatch), the shortest
    minibatches that together hold ``warm_groups`` groups go first, shortest first (negative ideal starts).
    Nothing longer can finish before its own duration, so without them the trainer's first step waits for
    whatever short work the spread happens to put early.
    """
    duration = np.asarray(duration_s, dtype=np.float64)
    m = duration.size
    if m == 0:
        return np.zeros(0, dtype=np.float64)
    horizon = float(duration.sum()) / instances
    if horizon_s is not None:
        horizon = max(horizon, float(horizon_s))
    ideal = np.empty(m, dtype=np.float64)
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        # Longest first inside the class; ties by index (stable) for determinism.
        members = members[np.argsort(-duration[members], kind="stable")]
        span = max(horizon - lead * float(duration[members].max()), 0.0)
        ideal[members] = np.arange(members.size) * (span / members.size)
    if warm_groups > 0 and groups is not None:
        # Shortest first (ties: the lower index); enough of them to hold ``warm_groups`` groups.
        shortest = np.lexsort((np.arange(m), duration))
        held = np.cumsum(np.asarray(groups, dtype=np.float64)[shortest])
        count = min(int(np.searchsorted(held, warm_groups, side="left")) + 1, m)
        ideal[shortest[:count]] = -np.arange(count, 0, -1, dtype=np.float64)
    return ideal


def dispatch_order(ideal_s: np.ndarray, duration_s: np.ndarray) -> np.ndarray:
    """Minibatch indices in dispatch order: by ideal start, longer first on ties, then by index."""
    m = np.asarray(ideal_s).size
    return np.lexsort((np.arange(m), -np.asarray(duration_s, dtype=np.float64), np.asarray(ideal_s)))


def list_schedule(
    order: np.ndarray, duration_s: np.ndarray, free_at_s: np.ndarray, step: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hand minibatches, in ``order``, to the instance that frees first (ties: the lowest instance). Given each
    minibatch's synchronous training ``step``, a minibatch of a new step waits until every instance has ended
    the step before (each step then starts from instances all free, and its own work is balanced over them).

    Parameters
    ----------
    order
        Minibatch indices in dispatch order.
    duration_s
        Predicted seconds of each minibatch.
    free_at_s
        When each instance frees (it is updated: the caller's array is not modified).

    Returns
    -------
    (instance, start_s, free_at_s)
        Per-minibatch instance and start time, and each instance's new free time.
    """
    duration = np.asarray(duration_s, dtype=np.float64)
    free = np.array(free_at_s, dtype=np.float64)
    heap = [(float(t), k) for k, t in enumerate(free)]
    heapq.heapify(heap)
    instance = np.empty(duration.size, dtype=np.int32)
    start = np.empty(duration.size, dtype=np.float64)
    current = None
    for m in order:
        if step is not None and step[m] != current:
            current, t = step[m], float(free.max())
            heap = [(t, k) for k in range(free.size)]
        t, k = heapq.heappop(heap)
        instance[m] = k
        start[m] = t
        end = t + float(duration[m])
        free[k] = end
        heapq.heappush(heap, (end, k))
    return instance, start, free


def balanced_assignment(
    order: np.ndarray, duration_s: np.ndarray, classes: np.ndarray, free_at_s: np.ndarray, slack: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """List scheduling under a per-class count balance: a fixed instance plan that is robust to bias.

    Minibatches, in ``order``, go to the instance that frees first among those holding at most ``slack``
    more minibatches of the same length class than the instance with the fewest (ties: the lowest
    instance). Every instance so gets about ``n_c / K`` minibatches of each class c (within ``slack + 1``):
    an error shared by a class (a source whose lengths are under-predicted by the same factor) lands on
    every instance alike instead of on the few that took most of that class. Pure list scheduling
    balances the *predicted* load exactly and the actual load not at all once a class is mispredicted.

    Returns
    -------
    (instance, start_s, free_at_s)
        As `list_schedule`.
    """
    duration = np.asarray(duration_s, dtype=np.float64)
    free = np.array(free_at_s, dtype=np.float64)
    k = free.size
    n_classes = int(np.max(classes)) + 1 if duration.size else 0
    count = np.zeros((n_classes, k), dtype=np.int64)
    instance = np.empty(duration.size, dtype=np.int32)
    start = np.empty(duration.size, dtype=np.float64)
    lanes = np.arange(k)
    position, last_free = 0, len(order) - 2 * k
    for m in order:
        c = int(classes[m])
        fewest = count[c] <= count[c].min() + slack
        if position >= last_free:
            # The last 2K minibatches are placed freely: they fill the gaps, so the plan still ends level.
            fewest = np.ones(k, dtype=bool)
        position += 1
        # Earliest free among the instances with the fewest of this class; ties to the lowest instance.
        pick = int(lanes[fewest][np.argmin(free[fewest])])
        instance[m] = pick
        start[m] = free[pick]
        free[pick] += float(duration[m])
        count[c, pick] += 1
    return instance, start, free
