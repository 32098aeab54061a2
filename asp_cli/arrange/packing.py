"""Packing: prompts of similar predicted length share an inference minibatch (against padding bubbles).

Kernels take NumPy arrays and return indices; they know nothing of Polars, files or predictors.
"""

from __future__ import annotations

import numpy as np


def length_order(planned_tokens: np.ndarray, rng: np.random.Generator, jitter: float = 0.0) -> np.ndarray:
    """Indices of prompts from the longest predicted length to the shortest.

    Ties (and near-ties when ``jitter`` > 0, a relative noise on the log length) break by a seeded random
    key, so each epoch packs slightly different company while keeping similar lengths together.
    """
    planned = np.asarray(planned_tokens, dtype=np.float64)
    key = np.log(np.maximum(planned, 1.0))
    if jitter > 0:
        key = key + rng.normal(0.0, jitter, size=key.shape)
    tiebreak = rng.permutation(planned.size)
    # lexsort: last key is primary. Primary: longest first; then the random tie-break.
    return np.lexsort((tiebreak, -key))


def per_step_order(planned: np.ndarray, batch: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded shuffle cut into consecutive train batches of ``batch`` prompts, each batch longest first (ties
    by shuffled position): the batches a shuffling dataloader would give, planned inside each."""
    shuffled = rng.permutation(planned.size)
    step = np.arange(planned.size) // max(batch, 1)
    return shuffled[np.lexsort((np.arange(planned.size), -np.asarray(planned)[shuffled], step))]


def cut_minibatches(
    footprint_tokens: np.ndarray, order: np.ndarray, *, max_prompts: int, max_tokens: int
) -> np.ndarray:
    """Cut prompts, taken in ``order``, into consecutive minibatches under both limits.

    Each minibatch holds at most ``max_prompts`` prompts whose summed ``footprint_tokens`` (KV tokens of all
    samples) is at most ``max_tokens``. Greedy on a length-sorted order this is next-fit, which on sorted
    input keeps every minibatch's lengths within a narrow band.

    Returns
    -------
    numpy.ndarray
        ``minibatch[i]`` is the 0-based minibatch of prompt ``i``, numbered in cutting order.

    Raises
    ------
    ValueError
        If one prompt alone exceeds ``max_tokens`` (the caller names it).
    """
    footprint = np.asarray(footprint_tokens, dtype=np.int64)[order]
    n = footprint.size
    if n and footprint.max() > max_tokens:
        raise ValueError("a prompt's footprint exceeds max_tokens")
    cumulative = np.concatenate(([0], np.cumsum(footprint)))
    assigned_sorted = np.empty(n, dtype=np.int64)
    start = 0
    index = 0
    while start < n:
        # The furthest end whose tokens fit, found by binary search on the running sum.
        by_tokens = int(np.searchsorted(cumulative, cumulative[start] + max_tokens, side="right")) - 1
        end = min(start + max_prompts, by_tokens, n)
        end = max(end, start + 1)
        assigned_sorted[start:end] = index
        index += 1
        start = end
    minibatch = np.empty(n, dtype=np.int64)
    minibatch[order] = assigned_sorted
    return minibatch


def pack(
    planned_tokens: np.ndarray,
    footprint_tokens: np.ndarray,
    *,
    max_prompts: int,
    max_tokens: int,
    rng: np.random.Generator,
    jitter: float = 0.0,
) -> np.ndarray:
    """Sort by predicted length and cut into minibatches; see `length_order` and `cut_minibatches`."""
    order = length_order(planned_tokens, rng, jitter)
    minibatch = cut_minibatches(footprint_tokens, order, max_prompts=max_prompts, max_tokens=max_tokens)
    _check_packing(minibatch, footprint_tokens, max_prompts, max_tokens)
    return minibatch


def _check_packing(minibatch: np.ndarray, footprint: np.ndarray, max_prompts: int, max_tokens: int) -> None:
    # The kernel checks its own output (the habit of verl's seqlen_balancing): every prompt in exactly one
    # minibatch, ids dense, limits held.
    if minibatch.size == 0:
        return
    counts = np.bincount(minibatch)
    assert counts.min() >= 1, "empty minibatch"
    assert counts.max() <= max_prompts, "minibatch over the prompt limit"
    tokens = np.bincount(minibatch, weights=np.asarray(footprint, dtype=np.float64))
    assert tokens.max() <= max_tokens, "minibatch over the token limit"
