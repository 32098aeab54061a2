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
                 max_tokens: int, work: np.ndarray | None = None, *,
                 seconds: Callable[[np.ndarray, int], np.ndarray] | None = None, instances: int = 1) -> np.ndarray:
    """Minibatch of each prompt when ``order`` (train batches of ``batch`` in turn) is cut batch by batch: each
    batch in ``order`` (`cut_minibatches`), or, given each group's predicted ``work``, dealt into balanced
    minibatches (`deal_minibatches`), into at least one minibatch per instance of ``instances`` (while it has
    groups enough). A synchronous step runs alone, so a step of fewer minibatches than instances leaves the
    others idle: 128 groups in minibatches of 16 kept 8 of mix-k16-n16's 16 instances idle in most steps.

    Given also ``seconds`` (the predicted seconds of each minibatch of a cut: ``seconds(minibatch, count)``),
    each batch takes whichever of two cuts ends sooner on its instances, taking its minibatches in turn as
    they free (`step_makespans`): dealt, or its groups heaviest first cut consecutively (minibatches of alike
    lengths, the longest handed out first). Dealing wins where a step has about one minibatch per instance
    (one minibatch would hold all the long groups); the consecutive cut where it has several, since a blocking
    minibatch lasts as long as its longest group, so mixing lengths in every one makes them all long (the
    plain longest-first cut was 1.3% faster than the dealt one on mix-k16-n16-b512, seed 0, four minibatches
    per instance and step).
    """
    def cut_part(part: np.ndarray) -> np.ndarray:
        mine = footprint.subset(part) if isinstance(footprint, PaddedTokens) else np.asarray(footprint)[part]
        if instances > 1:
            # As many consecutive pieces of near-equal counts as the prompt limit and the instances ask for
            # (100 prompts on 8 instances: 8 of 12-13, where a greedy cut at 13 makes 7 of 13 and one of 9); where
            # one holds more KV than the limit, that piece alone is cut greedily by it. (A greedy cut of the whole
            # step at the pieces' size made fewer pieces than instances: 20 groups on 16 instances, one heavy,
            # made 11 of at most 2, and 5 instances idled through the step.)
            count = max(-(-part.size // max(max_prompts, 1)), min(part.size, instances))
            even = np.arange(part.size) * count // part.size
            held = padded_tokens_of(even, mine) if isinstance(mine, PaddedTokens) else np.bincount(even, weights=mine)
            if held.max() <= max_tokens:
                return even
            # The greedy cut of the whole step at the pieces' size, where it still fills the instances (it
            # balanced the step's heavy and light pieces: splitting only the heavy ones left the equal-footing
            # longest-first sort 3.7% slower on mix-k16-n16-b512, scripts/bench_sync.py, 2026-12-05).
            greedy = cut_minibatches(mine, np.arange(part.size), max_tokens=max_tokens,
                                     max_prompts=min(max_prompts, -(-part.size // count)))
            if int(greedy.max()) + 1 >= min(part.size, instances):
                return greedy
            edges = np.searchsorted(even, np.arange(count + 1))  # piece p: positions edges[p] to edges[p + 1]
            out, next_id = np.empty(part.size, dtype=np.int64), 0
            for p in range(count):
                lo, hi = int(edges[p]), int(edges[p + 1])
                if held[p] <= max_tokens:
                    out[lo:hi], next_id = next_id, next_id + 1
                    continue
                piece = mine.subset(np.arange(lo, hi)) if isinstance(mine, PaddedTokens) else mine[lo:hi]
                sub = cut_minibatches(piece, np.arange(hi - lo), max_prompts=max_prompts, max_tokens=max_tokens)
                out[lo:hi] = sub + next_id
                next_id += int(sub.max()) + 1
            return out
        return cut_minibatches(mine, np.arange(part.size), max_prompts=max_prompts, max_tokens=max_tokens)

    if work is None or isinstance(footprint, PaddedTokens):
        return _cut_each_step(order, batch, cut_part)[0]
    tokens, weight = np.asarray(footprint), np.asarray(work, dtype=np.float64)
    dealt, dealt_steps = _cut_each_step(order, batch, lambda part: deal_minibatches(
        tokens[part], weight[part], max_prompts=max_prompts, max_tokens=max_tokens,
        min_count=min(part.size, max(instances, 1))))
    if seconds is None:
        return dealt
    step = np.arange(order.size) // max(batch, 1)
    heaviest_first = order[np.lexsort((np.arange(order.size), -weight[order], step))]
    cut, cut_steps = _cut_each_step(heaviest_first, batch, cut_part)
    use_cut = (step_makespans(seconds(cut, cut_steps[-1]), cut_steps, instances)
               < step_makespans(seconds(dealt, dealt_steps[-1]), dealt_steps, instances))
    if not use_cut.any():
        return dealt
    # Each step's minibatches from the cut it takes, renumbered so that steps keep their turn.
    count = np.where(use_cut, np.diff(cut_steps), np.diff(dealt_steps))
    offset = np.concatenate(([0], np.cumsum(count)))
    out = np.empty(order.size, dtype=np.int64)
    for s in range(use_cut.size):
        part = order[s * batch:(s + 1) * batch]
        local, first = (cut, cut_steps[s]) if use_cut[s] else (dealt, dealt_steps[s])
        out[part] = local[part] - first + offset[s]
    return out


def _cut_each_step(order: np.ndarray, batch: int,
                   cut_part: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``cut_part`` applied to each train batch of ``order`` in turn, numbered on from the batch before: each
    prompt's minibatch, and the first minibatch of each batch (with the count of all at the end)."""
    local = np.empty(order.size, dtype=np.int64)
    firsts = [0]
    for start in range(0, order.size, max(batch, 1)):
        part = order[start:start + batch]
        cut = cut_part(part)
        local[part] = cut + firsts[-1]
        firsts.append(firsts[-1] + int(cut.max()) + 1)
    return local, np.asarray(firsts, dtype=np.int64)


def step_makespans(duration_s: np.ndarray, step_first: np.ndarray, instances: int) -> np.ndarray:
    """Seconds until the last of each step's minibatches ends when ``instances`` instances, all free at the
    step's start, take them in number order as each frees (list scheduling). ``step_first`` holds each step's
    first minibatch and, last, the count of all."""
    import heapq

    spans = np.empty(step_first.size - 1, dtype=np.float64)
    for s in range(spans.size):
        free = [0.0] * max(instances, 1)
        for d in duration_s[step_first[s]:step_first[s + 1]].tolist():
            heapq.heapreplace(free, free[0] + d)
        spans[s] = max(free)
    return spans


def deal_minibatches(footprint_tokens: np.ndarray, work: np.ndarray, *, max_prompts: int,
                     max_tokens: int, min_count: int = 1) -> np.ndarray:
    """Deal one training step's groups into as few minibatches as the prompt and KV limits allow (and at least
    ``min_count``), each group (the heaviest first, ties by position) to the lightest minibatch with room (ties
    to the one with fewer groups, then by position): the minibatches' predicted work balanced (Graham's
    longest-processing-time rule, 1969), numbered heaviest first. With as many groups as minibatches, none is
    empty: groups predicted to do no work were all dealt to the first minibatch (ties went by position alone), so
    a step of such groups made one minibatch where ``min_count`` asked for one per instance.

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
    count = max(-(-k // max(max_prompts, 1)), -(-int(tokens_of.sum()) // max(max_tokens, 1)), min(min_count, k), 1)
    loads, counts, tokens = [0.0] * count, [0] * count, [0] * count
    heap = [(0.0, 0, b) for b in range(count)]
    out = np.empty(k, dtype=np.int64)
    for j in np.lexsort((np.arange(k), -np.asarray(work, dtype=np.float64))).tolist():
        need, chosen, set_aside = int(tokens_of[j]), None, []
        while heap:
            load, held, b = heapq.heappop(heap)
            if tokens[b] + need <= max_tokens:
                chosen = b
                break
            set_aside.append((load, held, b))  # no KV room for this group; a smaller one may fit later
        if chosen is None:  # every minibatch is full: open one more
            chosen = len(loads)
            loads.append(0.0), counts.append(0), tokens.append(0)
        out[j] = chosen
        loads[chosen] += float(work[j])
        counts[chosen] += 1
        tokens[chosen] += need
        if counts[chosen] < max_prompts:  # a full minibatch leaves the heap for good
            heapq.heappush(heap, (loads[chosen], counts[chosen], chosen))
        for item in set_aside:
            heapq.heappush(heap, item)
    rank = np.empty(len(loads), dtype=np.int64)
    rank[np.lexsort((np.arange(len(loads)), -np.asarray(loads)))] = np.arange(len(loads))
    return rank[out]

