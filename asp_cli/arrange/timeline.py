"""The scheduler's own estimates: minibatch durations, group finish times, training steps and policy lag.

These use the same cost model as the simulator (`costmodel`), in a cheaper, vectorised form: every
minibatch is one wave of continuous batching (all its sequences admitted at once), which the packer
guarantees for the KV cache and `max_num_seqs` by default; beyond them the wave is stretched in proportion
(docs/algorithms.md, "Estimates").
"""

from __future__ import annotations

import numpy as np

from asp_cli.costmodel import HardwarePreset


def group_tokens(samples_per_prompt: int, prompt_tokens: np.ndarray, mean_response_tokens: np.ndarray) -> np.ndarray:
    """Tokens of each GRPO group, N x (prompt + mean response): the most KV cache the group holds at once, and
    what the trainer trains on (the one home of this formula)."""
    # In place on one copy (the same numbers as N * (prompt + mean) in float64): one array, not four.
    tokens = np.array(prompt_tokens, dtype=np.float64)
    tokens += np.asarray(mean_response_tokens)
    tokens *= samples_per_prompt
    return tokens


# The table of `kv_peak_ratio`: spreads from 0 to `_PEAK_SIGMA_MAX` in steps of `_PEAK_SIGMA_STEP`, the peak taken
# over standard-normal quantiles t from -8 to 6 in steps of 0.005 (the ratio is exact to about 1e-5 there).
_PEAK_SIGMA_STEP = 0.005
_PEAK_SIGMA_MAX = 3.0


def _peak_table() -> np.ndarray:
    import math

    t = np.arange(-8.0, 6.0 + 1e-9, 0.005)
    survival = np.array([0.5 * math.erfc(x / math.sqrt(2.0)) for x in t])
    sigma = np.arange(0.0, _PEAK_SIGMA_MAX + 1e-9, _PEAK_SIGMA_STEP)
    ratio = np.exp(np.outer(sigma, t) - sigma[:, None] ** 2 / 2.0) * survival
    table = ratio.max(axis=1)
    table[0] = 1.0  # no spread: every sequence ends together, the peak is the whole sum
    return table


_PEAK_TABLE = _peak_table()


def kv_peak_ratio(sigma: np.ndarray) -> np.ndarray:
    """The expected peak KV of a wave over its summed response tokens, for log-normal lengths of spread ``sigma``.

    A wave's sequences start together; at decode step s those longer than s are live and hold s tokens each, so
    with n sequences of lengths L the cache holds n s P(L > s) in expectation. For L = exp(mu + sigma z) and
    s = exp(mu + sigma t) that is n E[L] exp(sigma t - sigma^2 / 2) Q(t) (Q the normal tail), whose maximum
    over t is this ratio: 1 with no spread, 0.60 at sigma 0.3 (the within-group spread of the AIME R1-distill
    samples), 0.48 at 0.5. Interpolated in a table (deterministic, vectorised).
    """
    position = np.clip(np.asarray(sigma, dtype=np.float64), 0.0, _PEAK_SIGMA_MAX) / _PEAK_SIGMA_STEP
    return np.interp(position, np.arange(_PEAK_TABLE.size, dtype=np.float64), _PEAK_TABLE)


def group_kv_tokens(samples_per_prompt: int, prompt_tokens: np.ndarray, mean_response_tokens: np.ndarray,
                    spread: np.ndarray) -> np.ndarray:
    """KV tokens a group adds to its wave's expected peak: N x (prompt + ratio x mean response), the ratio that
    of `kv_peak_ratio` for the group's within-group spread of log length (the one home of this formula).

    Summed over a wave it is never below the wave's expected peak (a sum of peaks bounds the peak of a sum) and
    about equal to it where the groups' lengths are alike, as the packer cuts them; the sum of N x (prompt + mean), which a wave never
    exceeds, reserves 1.7x what a spread of 0.3 ever holds at once. Realised lengths may overshoot the expected
    peak for a few steps: the engine then preempts a sequence and recomputes it later (a prefill, cheap beside
    decoding), which the simulator charges.
    """
    tokens = np.asarray(mean_response_tokens, dtype=np.float64) * kv_peak_ratio(spread)
    tokens += np.asarray(prompt_tokens, dtype=np.float64)
    tokens *= samples_per_prompt
    return tokens


def _segment_starts(segment: np.ndarray) -> np.ndarray:
    starts = np.ones(segment.size, dtype=bool)
    starts[1:] = segment[1:] != segment[:-1]
    return starts


def _segmented_cumsum(values: np.ndarray, segment: np.ndarray, carry: float = 0.0) -> tuple[np.ndarray, float]:
    """Inclusive running sums that restart at each new segment (segments contiguous, the first one starting at
    index 0), and the running total at the end.

    The sums are taken as one running total less its value where each segment starts, continued from
    ``carry`` (the total of the pieces before): so a long array cut at segment boundaries into pieces, each
    continued from the last one's total, gives the same numbers to the last bit as the array whole.
    """
    total = np.cumsum(np.concatenate(([carry], values)))[1:] if carry else np.cumsum(values)
    starts = np.flatnonzero(_segment_starts(segment))
    base = np.zeros(values.size, dtype=np.float64)
    base[starts] = total[starts] - values[starts]
    base = np.maximum.accumulate(np.where(_segment_starts(segment), base, -np.inf))
    return total - base, float(total[-1]) if total.size else carry


# Prompts per piece of `minibatch_times`: its arrays are about 30 float64 values per prompt, so a piece holds
# about 30 MB however many prompts there are (a million at once held 0.25 GB).
MINIBATCH_TIMES_CHUNK = 1 << 17


def minibatch_times(
    preset: HardwarePreset,
    minibatch: np.ndarray,
    n_minibatches: int,
    prompt_tokens: np.ndarray,
    max_tokens: np.ndarray,
    mean_tokens: np.ndarray,
    samples_per_prompt: int,
    *,
    kv_tokens: np.ndarray | None = None,
    chunk_prompts: int = MINIBATCH_TIMES_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Predicted seconds of each minibatch and each group's finish offset inside its minibatch.

    A group of N samples is modelled as one sample at its predicted maximum and N - 1 at the length that
    keeps the group's total at N times the predicted mean. The wave time is the exact closed form of
    `costmodel.wave_decode_seconds` for weighted sequences, evaluated for all minibatches at once with
    segmented prefix sums.

    The minibatches are taken in pieces of whole minibatches of about ``chunk_prompts`` prompts, in two passes
    (forward sums, then the sums that run from the end), each piece continuing the running totals of the
    pieces before it: the result is the same to the last bit whatever ``chunk_prompts``, and memory is
    bounded by the piece.

    ``kv_tokens`` (per prompt) is what the packer counted against the cache (`group_kv_tokens`); a minibatch
    whose sum exceeds the cache is stretched in proportion. By default a group counts N x (prompt + mean), the
    most its wave can ever hold.

    Returns
    -------
    (duration_s, finish_offset_s)
        ``duration_s[m]`` per minibatch; ``finish_offset_s[i]`` per prompt (its group's last sample).
    """
    n = int(samples_per_prompt)
    p = np.asarray(prompt_tokens, dtype=np.float64)
    top = np.maximum(np.asarray(max_tokens, dtype=np.float64), 1.0)
    mean = np.clip(np.asarray(mean_tokens, dtype=np.float64), 1.0, top)
    rest = np.clip((n * mean - top) / max(n - 1, 1), 1.0, top) if n > 1 else np.zeros_like(top)
    minibatch = np.asarray(minibatch)
    prompts_count = top.size
    duration = np.zeros(n_minibatches, dtype=np.float64)
    finish_offset = np.empty(prompts_count, dtype=np.float64)
    if prompts_count == 0:
        return duration, finish_offset
    # One float key sorts items by (wave, length descending): a single argsort is several times faster than
    # lexsort on millions of items; lengths that differ by less than float precision may swap, which the
    # closed form (continuous in the lengths) does not notice. The span is the longest item's (a group's
    # other samples are never longer than its maximum).
    span = float(top.max()) + 2.0
    # Prompts by minibatch (stable: by index within one), cut into pieces at minibatch boundaries.
    by_wave = np.argsort(minibatch, kind="stable")
    wave_sorted = minibatch[by_wave]
    cuts = [0]
    while cuts[-1] < prompts_count:
        at = min(cuts[-1] + max(int(chunk_prompts), 1), prompts_count)
        if at < prompts_count:
            at = int(np.searchsorted(wave_sorted, wave_sorted[at - 1], side="right"))
        cuts.append(at)
    pieces = list(zip(cuts[:-1], cuts[1:]))
    del wave_sorted

    def items(a: int, b: int) -> tuple[np.ndarray, ...]:
        """The piece's items, sorted: (prompt index, length, weight, prompt tokens, wave, is a maximum)."""
        index = by_wave[a:b]
        if n > 1:
            # Items 0..k-1: the group maxima; k..2k-1: the other N-1 samples (the order of the whole array).
            length = np.concatenate((top[index], rest[index]))
            weight = np.concatenate((np.ones(index.size), np.full(index.size, n - 1.0)))
            prompt = np.concatenate((p[index], p[index]))
            wave = np.concatenate((minibatch[index], minibatch[index]))
        else:
            length, weight, prompt, wave = top[index], np.ones(index.size), p[index], minibatch[index]
        order = np.argsort(np.asarray(wave, dtype=np.float64) * span + (span - 1.0 - length), kind="stable")
        return index, order, length[order], weight[order], prompt[order], wave[order]

    # Pass 1, forward: each piece's running totals at its start, and the per-minibatch sums.
    carries = []
    live_carry = prompt_carry = 0.0
    prefill_tokens = np.zeros(n_minibatches, dtype=np.float64)
    sequences = np.zeros(n_minibatches, dtype=np.float64)
    footprint = np.zeros(n_minibatches, dtype=np.float64)
    for a, b in pieces:
        _, _, length, weight, prompt, wave = items(a, b)
        carries.append((live_carry, prompt_carry))
        _, live_carry = _segmented_cumsum(weight, wave, live_carry)
        _, prompt_carry = _segmented_cumsum(weight * prompt, wave, prompt_carry)
        # bincount adds each bin's items in item order, and a minibatch lies in one piece: the same sums.
        prefill_tokens += np.bincount(wave, weights=weight * prompt, minlength=n_minibatches)
        sequences += np.bincount(wave, weights=weight, minlength=n_minibatches)
        if kv_tokens is None:
            footprint += np.bincount(wave, weights=weight * (prompt + length), minlength=n_minibatches)
    if kv_tokens is not None:
        footprint = np.bincount(minibatch, weights=np.asarray(kv_tokens, dtype=np.float64), minlength=n_minibatches)
    prefill = preset.prefill_seconds(prefill_tokens)
    # More sequences than the engine's max_num_seqs, or a KV footprint above the cache: several waves.
    stretch_factor = np.maximum.reduce(
        [np.ones(n_minibatches), sequences / preset.max_num_seqs, footprint / max(preset.kv_capacity_tokens, 1)]
    )

    # Pass 2, from the last piece back: the sums that run from each item to its wave's end.
    fixed_carry = life_carry = 0.0
    for (a, b), (live_start, prompt_start) in zip(pieces[::-1], carries[::-1]):
        index, order, length, weight, prompt, wave = items(a, b)
        starts = _segment_starts(wave)
        # Live weight during each item's stretch, and the stretch itself (steps until the next shorter item).
        live, _ = _segmented_cumsum(weight, wave, live_start)
        next_length = np.append(length[1:], 0.0)
        ends = np.append(starts[1:], True)
        next_length[ends] = 0.0
        stretch = length - next_length
        gemm = np.maximum(preset.weight_read_s, preset.compute_s_per_token * live)
        fixed = stretch * (preset.step_overhead_s + gemm)
        # Reverse segmented sums: the fixed time until each item's last step (all stretches at or after it).
        fixed_until, fixed_carry = _segmented_cumsum(fixed[::-1], wave[::-1], fixed_carry)
        fixed_until = fixed_until[::-1]
        life = weight * (prompt * length + length * (length + 1.0) / 2.0)
        life_after, life_carry = _segmented_cumsum(life[::-1], wave[::-1], life_carry)
        life_after = life_after[::-1]
        weighted_prompts_before = _segmented_cumsum(weight * prompt, wave, prompt_start)[0] - weight * prompt
        weight_before = live - weight
        kv = preset.kv_s_per_token * (
            weighted_prompts_before * length + weight_before * length * (length + 1.0) / 2.0 + life_after
        )
        finish_sorted = prefill[wave] + fixed_until + kv
        first = np.flatnonzero(starts)
        duration[wave[first]] = finish_sorted[first]
        finish = np.empty(length.size, dtype=np.float64)
        finish[order] = finish_sorted * stretch_factor[wave]
        finish_offset[index] = finish[: index.size]
    duration *= stretch_factor
    return duration, finish_offset


def trainer_seconds(preset: HardwarePreset, group_tokens: np.ndarray, train_batch_size: int) -> float:
    """The trainer's busy time for one epoch of groups with these tokens: every step and its weight sync,
    back to back (the trainer term of `lower_bound`, from predicted tokens)."""
    tokens = np.asarray(group_tokens, dtype=np.float64)
    steps = -(-tokens.size // max(int(train_batch_size), 1))
    return steps * (preset.train_fixed_s + preset.weight_sync_s) + preset.train_per_token_s * float(tokens.sum())


def trainer_timeline(
    preset: HardwarePreset,
    arrival_s: np.ndarray,
    step_tokens: np.ndarray,
    train_batch_size: int,
    assigned_step: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train steps of groups arriving at ``arrival_s``.

    By default the trainer takes ``train_batch_size`` complete groups per step in arrival order (ties by
    index); with ``assigned_step`` (dense, 0-based) step ``s`` takes exactly the groups assigned to it. A step
    starts when its last group has arrived and the previous step and weight sync are done.

    Returns
    -------
    (train_step, step_start_s, step_end_s)
        Per group its step; per step its start and end (the end includes the weight sync, after which the
        new policy version is live on the instances).
    """
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if assigned_step is None:
        order = np.lexsort((np.arange(arrival.size), arrival))
        rank = np.empty(arrival.size, dtype=np.int64)
        rank[order] = np.arange(arrival.size)
        train_step = rank // train_batch_size
    else:
        train_step = np.asarray(assigned_step, dtype=np.int64)
    n_steps = int(train_step.max()) + 1 if arrival.size else 0
    ready = np.zeros(n_steps)
    np.maximum.at(ready, train_step, arrival)
    tokens = np.bincount(train_step, weights=np.asarray(step_tokens, dtype=np.float64), minlength=n_steps)
    busy = preset.train_step_seconds(tokens) + preset.weight_sync_s
    start, end = run_steps(ready, busy)
    return train_step, start, end


def stratified_steps(finish_s: np.ndarray, length_class: np.ndarray, epoch: np.ndarray,
                     train_batch_size: int) -> np.ndarray:
    """Assign groups to training steps so that every step holds its share of every length class.

    Inside each epoch, the groups of each class are ranked by expected finish; a group's key is its rank's
    fraction of its class, ``(rank + 0.5) / n_c``, and consecutive ``train_batch_size`` groups in key order
    form a step (ties by expected finish, then index). Step ``s`` so takes, from every class, the groups that
    class finishes in the ``s``-th stretch of its completions: stratified sampling, which keeps each step's
    mean length at the epoch's (a replay buffer that follows ``train_step`` trains on exactly these). Steps
    are numbered densely across epochs; an epoch's last step may be partial.
    """
    finish = np.asarray(finish_s, dtype=np.float64)
    classes = np.asarray(length_class, dtype=np.int64)
    epochs = np.asarray(epoch, dtype=np.int64)
    steps = np.empty(finish.size, dtype=np.int64)
    offset = 0
    for e in np.unique(epochs):
        members = np.flatnonzero(epochs == e)
        f, c = finish[members], classes[members]
        order = np.lexsort((members, f, c))  # by class, then finish, then index
        sorted_c = c[order]
        first = np.searchsorted(sorted_c, sorted_c, side="left")
        count = np.bincount(sorted_c)[sorted_c]
        key = np.empty(members.size)
        key[order] = (np.arange(members.size) - first + 0.5) / count
        within = np.lexsort((members, f, key))
        local = np.empty(members.size, dtype=np.int64)
        local[within] = np.arange(members.size) // train_batch_size
        steps[members] = local + offset
        offset += int(local.max()) + 1
    return steps


def run_steps(ready_s: np.ndarray, busy_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of trainer steps run one after another, each no earlier than its inputs are ready."""
    start = np.empty(len(ready_s))
    end = np.empty(len(ready_s))
    previous = 0.0
    for s in range(len(ready_s)):
        start[s] = max(previous, ready_s[s])
        end[s] = start[s] + busy_s[s]
        previous = end[s]
    return start, end


def busy_seconds(instance: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, instances: int) -> np.ndarray:
    """Each instance's busy time: how long at least one of its minibatches runs (the union of their
    ``[start, end)`` intervals). On blocking engines an instance's minibatches follow one another and this is
    their summed durations; on engines that refill (`--engine streaming`) its request batches overlap, and
    their sum counted the same seconds many times over (14,566 s busy in a 95 s rollout)."""
    instance = np.asarray(instance, dtype=np.int64)
    start_s = np.asarray(start_s, dtype=np.float64)
    end_s = np.maximum(np.asarray(end_s, dtype=np.float64), start_s)
    busy = np.zeros(instances, dtype=np.float64)
    if not instance.size:
        return busy
    order = np.lexsort((start_s, instance))
    k, s, e = instance[order], start_s[order], end_s[order]
    # Within an instance, sorted by start: a running maximum of the ends before each interval says how much of
    # it is already covered; only the rest is new busy time.
    bounds = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1, k.size]
    covered = np.empty_like(e)
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # per instance: a running maximum must not cross instances
        covered[lo] = -np.inf
        covered[lo + 1:hi] = np.maximum.accumulate(e[lo:hi - 1])
    new = np.clip(e - np.maximum(s, covered), 0.0, None)
    np.add.at(busy, k, new)
    return busy


def policy_version_at(step_end_s: np.ndarray, time_s: np.ndarray) -> np.ndarray:
    """The policy version live at each time: the number of training steps finished (and synced) by then."""
    return np.searchsorted(np.asarray(step_end_s), np.asarray(time_s, dtype=np.float64), side="right")


def replay_starts(instance: np.ndarray, duration: np.ndarray, hold: np.ndarray, instances: int) -> np.ndarray:
    """Start times when each instance runs its minibatches in order, none before its hold time."""
    start = np.empty(duration.size, dtype=np.float64)
    free = np.zeros(instances, dtype=np.float64)
    for m in range(duration.size):
        k = instance[m]
        start[m] = max(free[k], hold[m])
        free[k] = start[m] + duration[m]
    return start


def synchronous_starts(mb_instance: np.ndarray, mb_duration: np.ndarray, mb_step: np.ndarray,
                       mb_last_offset: np.ndarray, step_busy_s: np.ndarray, instances: int) -> np.ndarray:
    """Start times of a synchronous plan (``--max-lag 0``, a trainer that trains each step's own groups) in
    one pass: step ``s``'s minibatches, each on its instance in turn, start once the step before has trained
    (``step_busy_s``: each step's training and weight sync); a step trains once its last group has finished
    (``mb_last_offset``: each minibatch's last group's finish after its start) and the step before has.

    The same starts as `replay_starts` reaches by holding minibatches round after round until none is too
    early (the `_assemble` loop of `arrange.pipeline`), which takes a round per step: 3.4x the default
    schedule's time at 1M prompts and 1,000 steps. ``mb_step`` must not decrease (steps in dispatch order).
    """
    start = np.empty(mb_duration.size, dtype=np.float64)
    free = np.zeros(instances, dtype=np.float64)
    bounds = np.flatnonzero(np.diff(mb_step)) + 1
    trained = 0.0  # when the step before has trained (its policy live)
    for first, last in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [mb_step.size])).tolist()):
        ready = 0.0
        for m in range(first, last):
            k = mb_instance[m]
            start[m] = max(free[k], trained)
            free[k] = start[m] + mb_duration[m]
            ready = max(ready, start[m] + mb_last_offset[m])
        trained = max(trained, ready) + step_busy_s[mb_step[first]]
    return start


def synchronous_holds(preset: HardwarePreset, row_step: np.ndarray, row_mb: np.ndarray, row_offset: np.ndarray,
                      step_tokens: np.ndarray, mb_instance: np.ndarray, mb_duration: np.ndarray, instances: int,
                      hold: np.ndarray) -> np.ndarray:
    """`synchronous_starts` of a plan whose minibatches each hold one training step (``row_step``, per row), the
    steps in dispatch order; ``hold`` unchanged where they do not (the lag loop then holds them round by round).
    ``row_offset``: each row's finish after its minibatch's start; ``step_tokens``: each row's tokens to train."""
    mb_step = np.zeros(mb_duration.size, dtype=np.int64)
    np.maximum.at(mb_step, row_mb, row_step)
    low = np.full(mb_duration.size, np.iinfo(np.int64).max)
    np.minimum.at(low, row_mb, row_step)
    if not (low == mb_step).all() or (np.diff(mb_step) < 0).any():
        return hold
    last = np.zeros(mb_duration.size)
    np.maximum.at(last, row_mb, row_offset)
    busy = preset.train_step_seconds(np.bincount(row_step, weights=step_tokens)) + preset.weight_sync_s
    return synchronous_starts(mb_instance, mb_duration, mb_step, last, busy, instances)

