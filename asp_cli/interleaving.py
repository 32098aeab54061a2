"""Interleaving: when and where each minibatch runs (against skewness and sorting bubbles).

The idea, in three steps (docs/algorithms.md):

1. Classes: minibatches are ranked by predicted duration and split into equal-count length classes.
2. Ideal start times: inside an epoch, the minibatches of each class are spread evenly over the part of the
   epoch's ideal horizon ``H = sum(durations) / K`` in which they can still finish, ``[0, H - d_c]``, longest
   first. Every class therefore finishes groups at a steady rate over the whole epoch: the trainer sees a
   steady, representative stream (no sorting bubble), long work starts early and never runs last (no
   skewness bubble at the end of the epoch).
3. Dispatch: minibatches are taken in ideal-start order and each goes to the instance that frees first
   (list scheduling, Graham 1966). Because the order is a single list, an engine that ignores the planned
   instance and hands minibatches in ``seq`` order to whichever instance is free reproduces the plan.

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


def ideal_start_s(duration_s: np.ndarray, classes: np.ndarray, instances: int, lead: float = 1.0) -> np.ndarray:
    """Each minibatch's ideal start time, relative to the epoch's start.

    Inside class c (n_c minibatches, longest one d_c), the j-th longest starts at ``j * span_c / n_c`` with
    ``span_c = max(H - lead * d_c, 0)`` and ``H = sum(durations) / instances``: a class's completions are
    spread evenly over ``[d_c, H]``.
    """
    duration = np.asarray(duration_s, dtype=np.float64)
    m = duration.size
    if m == 0:
        return np.zeros(0, dtype=np.float64)
    horizon = float(duration.sum()) / instances
    ideal = np.empty(m, dtype=np.float64)
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        # Longest first inside the class; ties by index (stable) for determinism.
        members = members[np.argsort(-duration[members], kind="stable")]
        span = max(horizon - lead * float(duration[members].max()), 0.0)
        ideal[members] = np.arange(members.size) * (span / members.size)
    return ideal


def dispatch_order(ideal_s: np.ndarray, duration_s: np.ndarray) -> np.ndarray:
    """Minibatch indices in dispatch order: by ideal start, longer first on ties, then by index."""
    m = np.asarray(ideal_s).size
    return np.lexsort((np.arange(m), -np.asarray(duration_s, dtype=np.float64), np.asarray(ideal_s)))


def list_schedule(
    order: np.ndarray, duration_s: np.ndarray, free_at_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hand minibatches, in ``order``, to the instance that frees first (ties: the lowest instance).

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
    for m in order:
        t, k = heapq.heappop(heap)
        instance[m] = k
        start[m] = t
        end = t + float(duration[m])
        free[k] = end
        heapq.heappush(heap, (end, k))
    return instance, start, free
