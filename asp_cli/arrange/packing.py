"""Packing: prompts of similar predicted length share an inference minibatch (against padding bubbles).

Kernels take NumPy arrays and return indices; they know nothing of Polars, files or predictors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class PaddedTokens:
    """A minibatch's KV tokens on the padded `static` engine (HF ``generate``): every row keeps its cache until
    the longest ends, each padded to the longest prompt plus the longest response, so ``g`` groups of
    ``samples`` rows hold ``g x samples x (max prompt + max predicted group maximum)`` tokens at the end: not a
    sum over groups. ``prompt_tokens`` and ``max_tokens_predicted`` are per prompt, whole tokens."""

    prompt_tokens: np.ndarray
    max_tokens_predicted: np.ndarray
    samples: int

    def alone(self) -> np.ndarray:
        """Each group's tokens in a minibatch of its own (the least it can count)."""
        return self.samples * (self.prompt_tokens + self.max_tokens_predicted)

    def subset(self, part: np.ndarray) -> PaddedTokens:
        return PaddedTokens(self.prompt_tokens[part], self.max_tokens_predicted[part], self.samples)


def cut_minibatches(
    footprint_tokens: np.ndarray | PaddedTokens, order: np.ndarray, *, max_prompts: int, max_tokens: int
) -> np.ndarray:
    """Cut prompts, taken in ``order``, into consecutive minibatches under both limits.

    Each minibatch holds at most ``max_prompts`` prompts whose summed ``footprint_tokens`` (KV tokens of all
    samples) is at most ``max_tokens``; with `PaddedTokens` (the static engine), whose padded tokens are.
    Greedy on a length-sorted order this is next-fit, which on sorted input keeps every minibatch's lengths
    within a narrow band.

    Returns
    -------
    numpy.ndarray
        ``minibatch[i]`` is the 0-based minibatch of prompt ``i``, numbered in cutting order.

    Raises
    ------
    ValueError
        If one prompt alone exceeds ``max_tokens`` (the caller names it).
    """
    if isinstance(footprint_tokens, PaddedTokens):
        return _cut_padded(footprint_tokens, order, max_prompts=max_prompts, max_tokens=max_tokens)
    footprint = np.asarray(footprint_tokens, dtype=np.int64)[order]
    n = footprint.size
    if n and footprint.max() > max_tokens:
        raise ValueError("a prompt's footprint exceeds max_tokens")
    cumulative = np.concatenate(([0], np.cumsum(footprint)))

    def furthest_end(start: int) -> int:  # the furthest end whose tokens fit: binary search on the running sum
        by_tokens = int(np.searchsorted(cumulative, cumulative[start] + max_tokens, side="right")) - 1
        return min(start + max_prompts, by_tokens, n)

    return _next_fit(order, n, furthest_end)


def _next_fit(order: np.ndarray, n: int, furthest_end: Callable[[int], int]) -> np.ndarray:
    """Consecutive minibatches of the prompts in ``order``, each from its start to ``furthest_end(start)`` (at
    least one prompt); ``minibatch[i]`` of prompt ``i``, numbered in cutting order."""
    assigned_sorted = np.empty(n, dtype=np.int64)
    start = 0
    index = 0
    while start < n:
        end = max(furthest_end(start), start + 1)
        assigned_sorted[start:end] = index
        index += 1
        start = end
    minibatch = np.empty(n, dtype=np.int64)
    minibatch[order] = assigned_sorted
    return minibatch


def _cut_padded(padded: PaddedTokens, order: np.ndarray, *, max_prompts: int, max_tokens: int) -> np.ndarray:
    """`cut_minibatches` counting a minibatch's padded tokens: next-fit on the running maxima of prompt and
    predicted maximum (a minibatch's padded tokens never fall as it grows, so the furthest end that fits is
    found by binary search on at most ``max_prompts`` of them)."""
    prompt = np.asarray(padded.prompt_tokens, dtype=np.int64)[order]
    top = np.asarray(padded.max_tokens_predicted, dtype=np.int64)[order]
    n = prompt.size
    if n and int(padded.samples * (prompt + top).max()) > max_tokens:
        raise ValueError("a prompt's footprint exceeds max_tokens")

    def furthest_end(start: int) -> int:
        stop = min(start + max_prompts, n)
        rows = padded.samples * np.arange(1, stop - start + 1, dtype=np.int64)
        tokens = rows * (np.maximum.accumulate(prompt[start:stop]) + np.maximum.accumulate(top[start:stop]))
        return start + int(np.searchsorted(tokens, max_tokens, side="right"))

    return _next_fit(order, n, furthest_end)


def padded_tokens_of(minibatch: np.ndarray, padded: PaddedTokens) -> np.ndarray:
    """Each minibatch's padded KV tokens (`PaddedTokens`), by minibatch id."""
    count = np.bincount(minibatch)
    longest_prompt = np.zeros(count.size, dtype=np.int64)
    longest = np.zeros(count.size, dtype=np.int64)
    np.maximum.at(longest_prompt, minibatch, np.asarray(padded.prompt_tokens, dtype=np.int64))
    np.maximum.at(longest, minibatch, np.asarray(padded.max_tokens_predicted, dtype=np.int64))
    return padded.samples * count * (longest_prompt + longest)


def pack(
    planned_tokens: np.ndarray,
    footprint_tokens: np.ndarray | PaddedTokens,
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


def _check_packing(minibatch: np.ndarray, footprint: np.ndarray | PaddedTokens, max_prompts: int,
                   max_tokens: int) -> None:
    # The kernel checks its own output (the habit of verl's seqlen_balancing): every prompt in exactly one
    # minibatch, ids dense, limits held.
    if minibatch.size == 0:
        return
    counts = np.bincount(minibatch)
    assert counts.min() >= 1, "empty minibatch"
    assert counts.max() <= max_prompts, "minibatch over the prompt limit"
    if isinstance(footprint, PaddedTokens):
        assert padded_tokens_of(minibatch, footprint).max() <= max_tokens, "minibatch over the token limit"
        return
    tokens = np.bincount(minibatch, weights=np.asarray(footprint, dtype=np.float64))
    assert tokens.max() <= max_tokens, "minibatch over the token limit"


def cut_per_step(order: np.ndarray, footprint: np.ndarray | PaddedTokens, batch: int, max_prompts: int,
                 max_tokens: int, work: np.ndarray | None = None) -> np.ndarray:
    """Minibatch of each prompt when ``order`` (train batches of ``batch`` in turn) is cut batch by batch: each
    batch in ``order`` (`cut_minibatches`), or, given each group's predicted ``work``, dealt into balanced
    minibatches (`deal_minibatches`)."""
    local = np.empty(order.size, dtype=np.int64)
    offset = 0
    for start in range(0, order.size, max(batch, 1)):
        part = order[start:start + batch]
        if work is not None and not isinstance(footprint, PaddedTokens):
            cut = deal_minibatches(np.asarray(footprint)[part], np.asarray(work)[part], max_prompts=max_prompts,
                                   max_tokens=max_tokens)
        else:
            mine = footprint.subset(part) if isinstance(footprint, PaddedTokens) else footprint[part]
            cut = cut_minibatches(mine, np.arange(part.size), max_prompts=max_prompts, max_tokens=max_tokens)
        local[part] = cut + offset
        offset += int(cut.max()) + 1
    return local


def deal_minibatches(footprint_tokens: np.ndarray, work: np.ndarray, *, max_prompts: int,
                     max_tokens: int) -> np.ndarray:
    """Deal one training step's groups into as few minibatches as the prompt and KV limits allow, each group (the
    heaviest first, ties by position) to the lightest minibatch with room: the minibatches' predicted work
    balanced (Graham's longest-processing-time rule, 1969), numbered heaviest first.

    In synchronous training each step waits for its slowest instance, and a step has about one minibatch per
    instance: cut longest first, one minibatch held all the step's long groups and the step lasted as long as
    it (`per-step` was 38-49% slower than a shuffle in asp's sizes on three of the benchmark's mixes at
    --max-lag 0); dealt, every minibatch gets its share (docs/algorithms.md, section 7).
    """
    import heapq

    tokens_of = np.asarray(footprint_tokens, dtype=np.int64)
    k = tokens_of.size
    if k and tokens_of.max() > max_tokens:
        raise ValueError("a prompt's footprint exceeds max_tokens")
    count = max(-(-k // max(max_prompts, 1)), -(-int(tokens_of.sum()) // max(max_tokens, 1)), 1)
    loads, counts, tokens = [0.0] * count, [0] * count, [0] * count
    heap = [(0.0, b) for b in range(count)]
    out = np.empty(k, dtype=np.int64)
    for j in np.lexsort((np.arange(k), -np.asarray(work, dtype=np.float64))).tolist():
        need, chosen, set_aside = int(tokens_of[j]), None, []
        while heap:
            load, b = heapq.heappop(heap)
            if tokens[b] + need <= max_tokens:
                chosen = b
                break
            set_aside.append((load, b))  # no KV room for this group; a smaller one may fit later
        if chosen is None:  # every minibatch is full: open one more
            chosen = len(loads)
            loads.append(0.0), counts.append(0), tokens.append(0)
        out[j] = chosen
        loads[chosen] += float(work[j])
        counts[chosen] += 1
        tokens[chosen] += need
        if counts[chosen] < max_prompts:  # a full minibatch leaves the heap for good
            heapq.heappush(heap, (loads[chosen], chosen))
        for item in set_aside:
            heapq.heappush(heap, item)
    rank = np.empty(len(loads), dtype=np.int64)
    rank[np.lexsort((np.arange(len(loads)), -np.asarray(loads)))] = np.arange(len(loads))
    return rank[out]

