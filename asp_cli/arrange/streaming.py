"""Plans for engines that refill freed slots (vLLM and SGLang servers, verl's agent loop, slime, AReaL).

Such an engine has no blocking minibatch: each instance keeps up to ``max_num_seqs`` sequences in flight and
starts the next request as soon as a slot and the KV cache allow. Packing has no padding to remove there; what
an offline plan still decides is which instance runs each group and in what order each instance's queue
starts them. Every group is its own request batch (one ``minibatch`` per group) except in ``bands``, ``seq`` is
the order and ``instance`` the queue. Orders (`STREAMING_ORDERS`):

* ``interleave``: groups in equal-count length classes by predicted group maximum, dealt in turn from every
  class (longest class first, longest first inside a class), so finished groups reach the trainer as a steady
  mix from the start; each group to the instance with the least predicted work so far.
* ``long-first`` / ``short-first``: by predicted group maximum, each group to the least-loaded instance
  (longest-processing-time list scheduling, Graham 1969, on predicted tokens).
* ``shuffle``: a seeded shuffle (the equal-footing baselines' own permutation), each group to the instance
  with the least predicted work so far: replayed with free dispatch it is verl's least-pending router on a
  shuffled stream, with planned dispatch the length-aware router, row for row.
* ``quick-start``: a train batch of each epoch's shortest prompts first (shortest first), then the rest in the
  shuffle's order: rollout runs ahead of the trainer, which waits for its first full batch of groups before it
  can train at all, so the pipeline fills sooner; every later step is a shuffle of the rest, whose mean length
  is above the epoch's by what the first batch took out (less representative than a shuffle's). On the true lengths
  it was the fastest candidate on the benchmark's realistic mixes under a lag bound (train batches of 256-512
  groups: 4 of 4 seeds on mix-k16-n16-b512, 3 of 4 on mix-k8-n8-b256), never on long reasoning alone, where
  the shortest batch is hardly shorter (docs/benchmarks.md, "How well auto chooses").
* ``bands``: shortest first by predicted group maximum, cut into consecutive train batches, each batch cut into
  one contiguous band of lengths per instance (the shortest band to the first) and each band into request
  batches of ``--minibatch-size`` groups, sent the first request batch of every band, then the second, ...
  (verl's chunks of a sorted dataset, `asp_cli.bench.baselines` ``short-first``, row for row when the plan
  uses the predicted maximum). A request batch is one ``minibatch``: it goes to one server, whichever frees
  first under free dispatch, its band's under planned. Each instance then works one band of lengths at a
  time, and the instances on short bands run ahead (as far as the lag bound lets them) while those on long
  bands finish theirs, so finished groups keep reaching the trainer where a plain sort sends every instance
  the same lengths at once. On the true lengths, under a lag bound, it was the fastest order on the
  benchmark's 16-instance mix with train batches of 512 (4% ahead of the shuffle, where short-first fed one
  group at a time to whichever server frees is 8% behind it) and 18% behind the shuffle on the 8-instance mix
  with train batches of 256 (docs/benchmarks.md, "Other engines").
* ``per-step``: a seeded shuffle's consecutive train batches kept as they are (each step as representative
  as a shuffle's), longest first inside each, each group to the least-loaded instance of its batch (longest
  processing time per step: what pays where every step waits for its slowest instance, synchronous training).

The expected times of such a plan come from the simulator itself (`asp_cli.sim.run.simulate_arrays`) run on
the point predictions (one sample at the predicted group maximum, the others at the length that keeps the
group's mean), under the same lag rule as the run.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.arrange.packing import per_step_order
from asp_cli.arrange.timeline import group_tokens, policy_version_at, stratified_steps, trainer_timeline
from asp_cli.costmodel import HardwarePreset
from asp_cli.settings import SHUFFLE_STREAM, SORTS, ScheduleSettings, lag_steps

STREAMING_ORDERS: tuple[str, ...] = ("interleave", "long-first", "short-first", "shuffle", "per-step", "quick-start",
                                     "bands")


def band_order(by_length: np.ndarray, batch: int, instances: int, request_batch: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, instance per position, request batch per position, counted from 0) of plan ``bands``:
    ``by_length`` (shortest first) cut into train batches of ``batch``, each into ``instances`` contiguous bands
    whose sizes differ by at most one (`numpy.array_split`'s), each band into request batches of
    ``request_batch``; within a train batch the first request batch of every band goes first, then the second,
    ... (verl's ``chunk`` of each batch, then its minibatches; verl's chunks are ceil(batch / instances) wide,
    which leaves instances without a band when it does not divide, e.g. 15 of 16 at a batch of 100, so the two
    are the same row for row where the instances divide the batch)."""
    order, instance, request = [], [], []
    offset = 0
    for start in range(0, by_length.size, max(batch, 1)):
        part = by_length[start:start + batch]
        sizes = np.full(instances, part.size // instances)
        sizes[:part.size % instances] += 1
        band = np.repeat(np.arange(instances), sizes)
        first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        key = (np.arange(part.size) - first[band]) // max(request_batch, 1) * instances + band
        ordered = np.lexsort((np.arange(part.size), key))
        _, local = np.unique(key[ordered], return_inverse=True)
        order.append(part[ordered])
        instance.append(band[ordered])
        request.append(local.reshape(-1) + offset)
        offset += int(local.max()) + 1
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(order) if order else empty, np.concatenate(instance) if instance else empty,
            np.concatenate(request) if request else empty)


def dealt_in_turn(order: np.ndarray, work: np.ndarray, batch: int, instances: int) -> tuple[np.ndarray, np.ndarray]:
    """``order`` laid out, train batch by train batch, for a router that deals a batch's prompts to the engines in
    turn (OpenRLHF's: the j-th prompt of a batch to engine j mod ``instances``, `--router group-round-robin`): each
    batch keeps its groups, dealt to the engines longest first, each to the engine with the least predicted
    ``work`` that still has a turn left (engine e has the batch's positions e, e + instances, ...), and each
    engine's groups laid out on its turns longest first (its queue, first come first served). A shuffle dealt as it
    lies gives some engines more work than others, and a synchronous step waits for its slowest engine (on the true
    lengths the same shuffle laid out so was 3.8-6.7% faster end to end on the benchmark's mixes and long reasoning:
    docs/benchmarks.md, "As OpenRLHF deals"). Returns the order and each position's engine."""
    import heapq

    laid = np.empty_like(order)
    engine = np.empty(order.size, dtype=np.int64)
    for start in range(0, order.size, max(batch, 1)):
        chunk = order[start:start + batch]
        turns = [len(range(e, chunk.size, instances)) for e in range(instances)]
        heap = [(0.0, e) for e in range(instances) if turns[e]]
        mine: list[list[int]] = [[] for _ in range(instances)]
        for g in chunk[np.lexsort((np.arange(chunk.size), -work[chunk]))].tolist():
            load, e = heapq.heappop(heap)
            mine[e].append(g)
            if len(mine[e]) < turns[e]:
                heapq.heappush(heap, (load + float(work[g]), e))
        for e in range(instances):
            laid[start + e:start + chunk.size:instances] = mine[e]
            engine[start + e:start + chunk.size:instances] = e
    return laid, engine


def streaming_order(name: str, top: np.ndarray, work: np.ndarray, instances: int, classes: int,
                    rng: np.random.Generator, batch: int = 1, request_batch: int = 1
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, instance per position, length class per prompt, request batch per position) of one epoch's groups
    for plan ``name`` (``batch``: the train batch, for ``per-step`` and ``bands``; ``request_batch``: the groups
    per request batch of ``bands``, every other plan sending each group on its own)."""
    size = top.size
    rank = np.empty(size, dtype=np.int64)
    rank[np.lexsort((np.arange(size), top))] = np.arange(size)  # 0 = shortest
    n_classes = max(1, min(classes, size))
    length_class = (rank * n_classes // max(size, 1)).astype(np.int32)
    if name == "bands":
        order, instance, request = band_order(np.lexsort((np.arange(size), top)), batch, instances, request_batch)
        return order, instance, length_class, request
    if name == "shuffle":
        order = rng.permutation(size)
    elif name == "quick-start":
        shuffled = rng.permutation(size)  # the shuffle's own permutation (the same stream)
        head = np.lexsort((np.arange(size), top))[:max(batch, 1)]
        first = np.zeros(size, dtype=bool)
        first[head] = True
        order = np.concatenate([head, shuffled[~first[shuffled]]])
    elif name == "long-first":
        order = np.lexsort((np.arange(size), -top))
    elif name == "per-step":
        order = per_step_order(top, batch, rng)
    elif name == "short-first":
        order = np.lexsort((np.arange(size), top))
    else:
        # Turn by turn over the classes: the i-th longest of every class, longest class first.
        within = np.empty(size, dtype=np.int64)
        by_class = np.lexsort((np.arange(size), -top, -length_class))
        sorted_class = length_class[by_class]
        first = np.searchsorted(-sorted_class, -sorted_class, side="left")
        within[by_class] = np.arange(size) - first
        order = np.lexsort((np.arange(size), -length_class, within))
    load = np.zeros(instances)
    instance = np.empty(size, dtype=np.int64)
    for position, g in enumerate(order.tolist()):
        if name == "per-step" and position % max(batch, 1) == 0:
            load[:] = 0.0  # each step balanced on its own: the step waits for its slowest instance
        k = int(np.argmin(load))
        instance[position] = k
        load[k] += work[g]
    return order, instance, length_class, np.arange(size, dtype=np.int64)


def plan_streaming(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                   preset: HardwarePreset, name: str) -> pl.DataFrame:
    """The schedule frame of streaming plan ``name`` (all epochs), with expected times from the simulator."""
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_arrays

    n = settings.samples_per_prompt
    p = prompts.height
    top = predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64)
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    prompt_tokens = predictions[C.PROMPT_TOKENS].to_numpy().astype(np.int64)
    work = np.ceil(group_tokens(n, prompt_tokens, mean))  # whole KV tokens, as the baselines count them
    positions, instances, classes, epochs, requests = [], [], [], [], []
    request_offset = 0
    for epoch in range(settings.epochs):
        rng = np.random.default_rng([settings.seed, epoch]
                                    + ([SHUFFLE_STREAM] if name in ("shuffle", "quick-start") else []))
        order, instance, length_class, request = streaming_order(
            name, top, work, settings.instances, settings.length_classes, rng, settings.train_batch_size,
            settings.minibatch_size)
        # Each step one consecutive batch of the order (synchronous, or one step off laid out by batches): the batch
        # OpenRLHF deals. The shuffle stays OpenRLHF's own default, what auto's gain is against.
        if settings.router == "group-round-robin":
            if name != "shuffle" and (settings.max_lag == 0 or settings.step_layout != "finish"):
                order, instance = dealt_in_turn(order, work, settings.train_batch_size, settings.instances)
            else:  # the shuffle (and a layout by finish) as it lies: each consecutive batch's j-th row to engine j mod k
                instance = np.arange(p, dtype=np.int64) % max(settings.train_batch_size, 1) % settings.instances
            if settings.trainer == "arrival":  # AReaL's controller: one turn over the run, the first group to server 0
                instance = (epoch * p + np.arange(p, dtype=np.int64)) % settings.instances
            request = np.arange(p, dtype=np.int64)  # OpenRLHF and AReaL send each prompt as its own request
        positions.append(order)
        instances.append(instance)
        classes.append(length_class[order])
        epochs.append(np.full(p, epoch, dtype=np.int32))
        requests.append(request + request_offset)
        request_offset += int(request.max()) + 1 if request.size else 0
    position = np.concatenate(positions)
    row_instance = np.concatenate(instances)
    row_class = np.concatenate(classes)
    row_epoch = np.concatenate(epochs)
    # The request batch of each row: one group each, except in `bands` (a band's request batch of groups).
    row_request = np.concatenate(requests)
    rows = position.size
    # Point predictions: one sample at the group maximum, the others at the length that keeps the mean.
    rest = np.clip((n * mean - top) / max(n - 1, 1), 1.0, np.maximum(top, 1.0)) if n > 1 else top
    lengths = np.empty((rows, n), dtype=np.int64)
    lengths[:, 0] = np.maximum(np.rint(top[position]), 1)
    if n > 1:
        lengths[:, 1:] = np.maximum(np.rint(rest[position]), 1)[:, None]
    bound = lag_steps(settings.max_lag)
    # slime's train_async.py (`ScheduleSettings.slime_async`) trains each rollout as a step and generates the next
    # whole while it trains: synchronous steps, one ahead. Laid out as `batches`, its steps are each one order's own
    # consecutive batch, as at --max-lag 0: where rollout binds, arranged as a lag bound of 1 let steps interleave
    # and a rollout held every step's long groups (long-first 22% more rollout than the sort it is, on
    # mix-k8-n8-b256); as `finish`, the lag bound's steps spread long groups over the rollouts, which pays where
    # training takes about as long as a rollout (12% on aime-k8-n8-b256). auto judges both (`choose`).
    synchronous = settings.max_lag == 0 or (settings.slime_async and settings.step_layout != "finish")
    follows = settings.trainer == "schedule" and (name not in SORTS or synchronous)  # a sort: its arrival order
    # A shuffle's train batches (per-step), or in synchronous training any order's own consecutive batches: each
    # epoch's position // batch, fixed by the order alone. Under a lag bound a shuffle's own batches too (and
    # quick-start's, a batch of the shortest prompts, then the rest shuffled): about representative, dispatched in step order;
    # its steps stratified by predicted finish, or its predicted arrival order, made a trainer that follows them
    # wait for stragglers of lengths off their predictions (1.6-2.7x per-step's time in auto's draws, so the
    # summary's "faster than a shuffle" compared with no shuffle anyone runs).
    fixed = follows and (name == "per-step" or synchronous
                         or (bound is not None and name in ("shuffle", "quick-start")))
    per_epoch = -(-p // settings.train_batch_size)
    own_batches = (np.tile(np.arange(p) // settings.train_batch_size, settings.epochs)
                   + np.repeat(np.arange(settings.epochs) * per_epoch, p))
    # Under a lag bound, fixed steps are replayed with the trainer following them, so that the plan's times and
    # lags are the ones the replay holds rollout back to (per-step's were computed unheld: expected 4 steps behind
    # under --max-lag 1, which the replay never let happen; a newcomer's verl colocate_async round). Synchronous
    # too (--max-lag 0): unheld, step 1's groups were expected to start at 0.65 s while step 0 ran to 42 s, and
    # `asp report` showed a queue of a whole epoch (an agent newcomer's round, 2026-12-06).
    held = fixed and bound is not None
    sim = SimulationSettings(samples_per_prompt=n, train_batch_size=settings.train_batch_size, mode="streaming",
                             dispatch="planned", max_lag=settings.max_lag,
                             trainer="schedule" if held else "arrival")
    result = simulate_arrays(preset, sim, instances=settings.instances, row_minibatch=row_request,
                             row_instance=row_instance, response_tokens=lengths,
                             prompt_tokens=prompt_tokens[position], row_train_step=own_batches if held else None)
    start = result.seq_admit_s.reshape(rows, n).min(axis=1)
    finish = result.group_arrival_s
    train_step, version = result.group_step, result.group_version
    if follows and not held:
        tokens = group_tokens(n, prompt_tokens[position], mean[position])
        # Stratified by estimated finish, a later step's group sat ahead of an earlier step's in the order, held
        # there at --max-lag 0 (a shuffle replayed 3x slower, lag up to 4).
        assigned = own_batches if fixed else stratified_steps(finish, row_class, row_epoch, settings.train_batch_size)
        s_step, _, step_end = trainer_timeline(preset, finish, tokens, settings.train_batch_size, assigned)
        s_version = policy_version_at(step_end, start)  # (synchronous plans are held above: their own times)
        # Where stratifying would break the lag bound by more than the arrival order the plan admitted groups in
        # (the bound is on admission: a long group can train later than it), that order stays, as on the blocking
        # engines (`pipeline._assemble`).
        worst = max(bound or 0, int((train_step - version).max(initial=0)))
        if bound is None or int((s_step - s_version).max(initial=0)) <= worst:
            train_step, version = s_step, s_version
    planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
    if settings.router == "group-round-robin" and settings.trainer != "arrival":  # each row's engine under
        # OpenRLHF's deal, as its step is exported (AReaL's controller deals in the file's order: as above):
        # the j-th row of a step (seq order) to engine j mod k (steps by finish are no consecutive batch of the order)
        by_step = np.lexsort((np.arange(rows), train_step))
        rank = np.empty(rows, dtype=np.int64)
        rank[by_step] = np.arange(rows) - np.searchsorted(train_step[by_step], train_step[by_step])
        row_instance = rank % settings.instances
    return pl.DataFrame(
        {
            "seq": np.arange(rows, dtype=np.int64),
            "instance": row_instance.astype(np.int32),
            "minibatch": row_request.astype(np.int64),
            "epoch": row_epoch,
            "row": prompts[C.ROW].to_numpy().astype(np.int64)[position],
            "prompt_id": prompts[C.PROMPT_ID].gather(position),
            "predicted_tokens": planned[position],
            "train_step": train_step.astype(np.int64),
            "predicted_max_tokens": top.astype(np.int64)[position],
            "predicted_mean_tokens": mean.astype(np.int64)[position],
            "prompt_tokens": prompt_tokens[position],
            "prediction_source": predictions[C.PREDICTION_SOURCE].gather(position),
            "length_class": row_class.astype(np.int32),
            "position_in_minibatch": _position_within(row_request).astype(np.int32),
            "expected_start_s": np.round(start, 6),
            "expected_finish_s": np.round(finish, 6),
            # A request batch of several groups (`bands`) ends with its last group; every other plan sends one.
            "expected_minibatch_end_s": np.round(_batch_end(finish, row_request), 6),
            "expected_policy_version": version.astype(np.int64),
            "expected_lag": (train_step - version).astype(np.int64),
        },
        schema_overrides={"prompt_id": pl.String, "prediction_source": pl.String},
    )


def _batches(request: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row, rows) of each request batch (``request`` non-decreasing: a batch's rows are consecutive)."""
    first = np.concatenate(([0], np.flatnonzero(np.diff(request)) + 1))
    return first, np.diff(np.concatenate((first, [request.size])))


def _position_within(request: np.ndarray) -> np.ndarray:
    """Each row's place in its request batch."""
    if not request.size:
        return np.zeros(0, dtype=np.int64)
    first, rows = _batches(request)
    return np.arange(request.size) - np.repeat(first, rows)


def _batch_end(finish: np.ndarray, request: np.ndarray) -> np.ndarray:
    """Each row's request batch's last finish."""
    if not request.size:
        return finish
    first, rows = _batches(request)
    return np.repeat(np.maximum.reduceat(finish, first), rows)
