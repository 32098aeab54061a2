"""The arrangements people run today, and the same arrangements on equal footing with asp, as schedule frames.

Each function takes the same inputs as `asp_cli.arrange.pipeline.arrange` (prompts, aligned predictions,
settings, the cost-model preset) and returns a frame with the schedule's required columns plus
``prompt_tokens``, ``predicted_max_tokens`` and ``predicted_mean_tokens``, sorted by ``seq``; none looks at the
true lengths.

**Equal footing** (`EQUAL_FOOTING`): the same concurrency as asp. For blocking engines, prompts in the
baseline's order are cut into minibatches by asp's own packer limits (at most ``minibatch_size`` prompts and
asp's KV-token budget per ``generate()`` call; `asp_cli.arrange.packing.cut_minibatches`) and handed to
whichever instance frees first (free dispatch); ``random (asp slots)`` keeps asp's very minibatches, instances
and order and only fills them with a random permutation of the prompts (what the arrangement adds over
asp's structure). For engines that refill freed slots (``streaming``), every group is its own request batch,
each instance keeps up to its ``max_num_seqs`` in flight, and the baselines differ only in order and routing:
``least-pending`` (verl's server mode: a shuffled stream, each next group to the instance with the fewest
pending requests, i.e. whichever frees a slot first), ``round-robin`` (the shuffled stream dealt out at once,
one group per instance in turn), ``length-aware`` (each group, in shuffled order, to the instance with the
least predicted outstanding tokens), and the least-pending and length-aware routers fed longest first or
shortest first (``long-first (least-pending)``, ``short-first (length-aware)``, ...: the plain sorts, which
auto's sorted candidates are). On those engines every row has asp's concurrency, verl's chunked rows below
included (there a chunk is an order and a routing, not a smaller call): all are on equal footing
(`Baseline.equal_footing_on`).

**Today** (verl's chunking): verl cuts each train batch into one contiguous chunk per worker before any
minibatch cap, so these rows run ``min(minibatch_size, train batch / K)`` prompts per call, fewer than asp
(the "prompts/call" column of every table says how many). Sources (../shared/docs/peers.md):

* ``verl-default``: verl shuffles the dataset (``data.shuffle: True``, seeded), takes consecutive train
  batches, and ``AgentLoopManager.generate_sequences`` splits each generation batch into contiguous chunks, one
  per worker (``prompts.chunk(len(workers))``).
* ``dataset-order``: the same without the shuffle.
* ``short-first`` / ``long-first``: the dataset sorted by predicted length (SortedRL's short-first, the naive
  fix), then split like verl, which puts the longest prompts of a batch on one worker.
* ``count-balance``: verl's server manager sends each request to the server with the fewest pending requests,
  and OpenRLHF (0.9.1 and later; ``samples_generator.py`` ``_dispatch_prompts_to_vllm`` in 0.11.2) each prompt,
  its samples together, to the engine with the fewest unfinished requests by one snapshot per batch (a deal in
  turn: `asp_cli.sim.submit_all.route`'s ``group-round-robin``), blind to length; offline that is a round-robin
  deal, and the simulator replays it with ``dispatch="free"`` (the next minibatch goes to whichever instance is free).
* ``rollpacker-tail``: RollPacker's tail batching (Farrrrland/RollPacker, NSDI'26) defers long-tail prompts
  to dedicated long rounds: prompts predicted in the longest ``tail_fraction`` are held back and run together
  as soon as a full train batch of them is collected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.arrange.packing import PaddedTokens, cut_minibatches, cut_per_step
from asp_cli.arrange.timeline import group_tokens
from asp_cli.costmodel import HardwarePreset, load_preset
from asp_cli.settings import SHUFFLE_STREAM, ScheduleSettings

# RollPacker over-provisions by eta = 1.25, so about 1 - 1/1.25 = 20% of prompts end up in long rounds.
ROLLPACKER_TAIL_FRACTION = 0.2


BLOCKING = ("continuous", "static")
STREAMING = ("streaming",)


@dataclass(frozen=True)
class Baseline:
    """One arrangement: how to order and split, how the engine hands minibatches out, and for which engines."""

    name: str
    description: str
    arrange: Callable[..., pl.DataFrame]  # (prompts, predictions, settings, preset) -> frame
    dispatch: str = "planned"
    modes: tuple[str, ...] = (*BLOCKING, *STREAMING)
    equal_footing: bool = False

    def equal_footing_on(self, mode: str) -> bool:
        """Whether it has asp's concurrency on engine ``mode``: the rows in asp's sizes everywhere, and every row
        on engines that refill freed slots, where each instance keeps its slots full whatever the calls hold
        (verl's chunks included: there they are an order and a routing, not smaller calls)."""
        return self.equal_footing or mode in STREAMING


def _shuffled(rows: int, settings: ScheduleSettings, epoch: int) -> np.ndarray:
    return np.random.default_rng([settings.seed, epoch, SHUFFLE_STREAM]).permutation(rows)


def _contiguous_split(batch: np.ndarray, settings: ScheduleSettings) -> tuple[np.ndarray, np.ndarray]:
    """verl's ``chunk``: K contiguous chunks of ceil(n/K); then minibatches of ``minibatch_size`` in each.

    Returns (instance, local minibatch index within its instance) per position of ``batch``.
    """
    k = settings.instances
    size = -(-batch.size // k)
    position = np.arange(batch.size)
    instance = position // size
    within = position - instance * size
    return instance.astype(np.int64), within // settings.minibatch_size


def _round_robin_split(batch: np.ndarray, settings: ScheduleSettings) -> tuple[np.ndarray, np.ndarray]:
    """Least pending requests with equal-cost requests: deal the batch out one prompt at a time."""
    position = np.arange(batch.size)
    instance = position % settings.instances
    within = position // settings.instances
    return instance.astype(np.int64), within // settings.minibatch_size


def _frame_from_rounds(
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    rounds_per_epoch: list[list[np.ndarray]],
    split: Callable[[np.ndarray, ScheduleSettings], tuple[np.ndarray, np.ndarray]],
) -> pl.DataFrame:
    """Build the schedule frame from train rounds (arrays of prompt positions), split onto instances.

    Within a round, ``seq`` runs over (local minibatch, instance, position): the first minibatch of every
    instance, then the second, ... so a free-dispatch engine starts every chunk early.
    """
    parts = []
    minibatch_offset = 0
    step = 0
    for epoch, rounds in enumerate(rounds_per_epoch):
        for batch in rounds:
            instance, local = split(batch, settings)
            key = local * settings.instances + instance
            order = np.lexsort((np.arange(batch.size), key))
            _, mb_local = np.unique(key[order], return_inverse=True)
            parts.append(
                {
                    "position": batch[order],
                    "instance": instance[order],
                    "minibatch": mb_local + minibatch_offset,
                    "epoch": np.full(batch.size, epoch),
                    "train_step": np.full(batch.size, step),
                }
            )
            minibatch_offset += int(mb_local.max()) + 1 if batch.size else 0
            step += 1
    position = np.concatenate([p["position"] for p in parts])
    frame = pl.DataFrame(
        {
            "seq": np.arange(position.size, dtype=np.int64),
            "instance": np.concatenate([p["instance"] for p in parts]).astype(np.int32),
            "minibatch": np.concatenate([p["minibatch"] for p in parts]).astype(np.int64),
            "epoch": np.concatenate([p["epoch"] for p in parts]).astype(np.int32),
        }
    )
    picked = pl.concat([prompts.select(C.ROW, C.PROMPT_ID), predictions.select(
        C.PREDICTED_TOKENS, C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PROMPT_TOKENS)], how="horizontal")
    picked = picked[position]
    return pl.concat(
        [
            frame,
            picked.select(
                pl.col(C.ROW).cast(pl.Int64),
                pl.col(C.PROMPT_ID).cast(pl.String),
                pl.col(C.PREDICTED_TOKENS).cast(pl.Int64),
            ),
            pl.DataFrame({"train_step": np.concatenate([p["train_step"] for p in parts]).astype(np.int64)}),
            picked.select(
                pl.col(C.PREDICTED_MAX_TOKENS).cast(pl.Int64),
                pl.col(C.PREDICTED_MEAN_TOKENS).cast(pl.Int64),
                pl.col(C.PROMPT_TOKENS).cast(pl.Int64),
            ),
        ],
        how="horizontal",
    )


def _consecutive(order: np.ndarray, batch: int) -> list[np.ndarray]:
    return [order[i:i + batch] for i in range(0, order.size, batch)]


def _ordered(key: Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings, int], np.ndarray],
             split=_contiguous_split) -> Callable[..., pl.DataFrame]:
    def arrange(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                preset: HardwarePreset | None = None, kv_cut: str | None = None) -> pl.DataFrame:
        rounds = [
            _consecutive(key(prompts, predictions, settings, epoch), settings.train_batch_size)
            for epoch in range(settings.epochs)
        ]
        return _frame_from_rounds(prompts, predictions, settings, rounds, split)

    return arrange


def _shuffle_key(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                 epoch: int) -> np.ndarray:
    return _shuffled(prompts.height, settings, epoch)


def _dataset_key(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                 epoch: int) -> np.ndarray:
    return np.arange(prompts.height)


def _length_key(descending: bool):
    def key(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings, epoch: int) -> np.ndarray:
        planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
        # Ties broken by dataset position, so the sort is stable and deterministic.
        return np.lexsort((np.arange(planned.size), -planned if descending else planned))

    return key


def rollpacker_rounds(planned: np.ndarray, order: np.ndarray, batch: int,
                      tail_fraction: float = ROLLPACKER_TAIL_FRACTION) -> list[np.ndarray]:
    """Tail batching: short rounds in ``order``; predicted-long prompts wait for a round of their own."""
    if planned.size == 0:
        return []
    threshold = np.quantile(planned, 1.0 - tail_fraction)
    is_long = planned >= threshold if tail_fraction > 0 else np.zeros(planned.size, dtype=bool)
    rounds: list[np.ndarray] = []
    short: list[int] = []
    deferred: list[int] = []
    for p in order.tolist():
        (deferred if is_long[p] else short).append(p)
        if len(short) == batch:
            rounds.append(np.asarray(short))
            short = []
        if len(deferred) == batch:
            rounds.append(np.asarray(deferred))
            deferred = []
    rounds.extend(np.asarray(r) for r in (short, deferred) if r)
    return rounds


def _rollpacker(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                preset: HardwarePreset | None = None, kv_cut: str | None = None) -> pl.DataFrame:
    planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
    rounds = [
        rollpacker_rounds(planned, _shuffled(prompts.height, settings, epoch), settings.train_batch_size)
        for epoch in range(settings.epochs)
    ]
    return _frame_from_rounds(prompts, predictions, settings, rounds, _contiguous_split)


# --------------------------------------------------------------------------------------------------------
# Equal footing: asp's concurrency, the baseline's order


def _footprint(predictions: pl.DataFrame, settings: ScheduleSettings,
               kv_cut: str | None) -> np.ndarray | PaddedTokens:
    """Each group's KV tokens as asp's packer counts them (`pipeline.kv_footprint`) under ``kv_cut``, the
    accounting asp's schedule was cut with (`settings.KV_CUTS`; `compare` takes it from asp's choice or the
    schedule's metadata), else the settings' own."""
    from asp_cli.arrange.pipeline import kv_footprint

    return kv_footprint(predictions[C.PROMPT_TOKENS].to_numpy().astype(np.float64),
                        predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64),
                        predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64),
                        settings.samples_per_prompt, kv_cut or settings.resolved_kv_budget())


def _frame(prompts: pl.DataFrame, predictions: pl.DataFrame, parts: list[dict[str, np.ndarray]]) -> pl.DataFrame:
    """A schedule frame from per-epoch parts: ``position`` (prompt index), ``minibatch`` (epoch-local, in
    dispatch order), ``instance``, ``train_step`` (epoch-local), all in seq order within the epoch."""
    positions, minibatch, instance, epoch, step = [], [], [], [], []
    mb_offset = step_offset = 0
    for e, part in enumerate(parts):
        positions.append(part["position"])
        minibatch.append(part["minibatch"] + mb_offset)
        instance.append(part["instance"])
        epoch.append(np.full(part["position"].size, e))
        step.append(part["train_step"] + step_offset)
        mb_offset += int(part["minibatch"].max()) + 1 if part["minibatch"].size else 0
        step_offset += int(part["train_step"].max()) + 1 if part["train_step"].size else 0
    position = np.concatenate(positions)
    picked = pl.concat([prompts.select(C.ROW, C.PROMPT_ID), predictions.select(
        C.PREDICTED_TOKENS, C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PROMPT_TOKENS)], how="horizontal")[position]
    return pl.DataFrame({
        "seq": np.arange(position.size, dtype=np.int64),
        "instance": np.concatenate(instance).astype(np.int32),
        "minibatch": np.concatenate(minibatch).astype(np.int64),
        "epoch": np.concatenate(epoch).astype(np.int32),
        "row": picked[C.ROW].cast(pl.Int64),
        "prompt_id": picked[C.PROMPT_ID].cast(pl.String),
        "predicted_tokens": picked[C.PREDICTED_TOKENS].cast(pl.Int64),
        "train_step": np.concatenate(step).astype(np.int64),
        "predicted_max_tokens": picked[C.PREDICTED_MAX_TOKENS].cast(pl.Int64),
        "predicted_mean_tokens": picked[C.PREDICTED_MEAN_TOKENS].cast(pl.Int64),
        "prompt_tokens": picked[C.PROMPT_TOKENS].cast(pl.Int64),
    })


def _packed(order_of: Callable[[np.ndarray, np.random.Generator], np.ndarray]) -> Callable[..., pl.DataFrame]:
    """Blocking engines: prompts in the baseline's order, cut by asp's packer limits, free dispatch.

    In synchronous training (``max_lag`` 0) each train batch is cut on its own, as a synchronous trainer
    generates it, and into at least one minibatch per instance, as asp cuts it (`packing.cut_per_step`): a
    minibatch across two steps holds groups of the next step, which may only start once this step has trained
    (until 2026-12-05 the cut crossed steps, the replay let such minibatches go to break the wait, and the sorts
    ran at a lag of 1 against asp's 0: 18 of mix-k16-n16's minibatches, seed 0)."""

    def arrange(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                preset: HardwarePreset | None = None, kv_cut: str | None = None) -> pl.DataFrame:
        from asp_cli.arrange.pipeline import minibatch_token_budget

        preset = preset or load_preset(settings.preset)
        planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
        footprint = _footprint(predictions, settings, kv_cut)
        budget = minibatch_token_budget(settings, preset)
        parts = []
        for epoch in range(settings.epochs):
            rng = np.random.default_rng([settings.seed, epoch, SHUFFLE_STREAM])
            order = order_of(planned, rng)
            if settings.max_lag == 0:
                mb = cut_per_step(order, footprint, settings.train_batch_size, settings.minibatch_size, budget,
                                  instances=settings.instances)[order]
            else:
                mb = cut_minibatches(footprint, order, max_prompts=settings.minibatch_size, max_tokens=budget)[order]
            rank = np.arange(order.size)
            parts.append({"position": order, "minibatch": mb, "instance": mb % settings.instances,
                          "train_step": rank // settings.train_batch_size})
        return _frame(prompts, predictions, parts)

    return arrange


def _streamed(order_of: Callable[[np.ndarray, np.random.Generator], np.ndarray],
              route: str) -> Callable[..., pl.DataFrame]:
    """Engines that refill: one group per request batch, in the baseline's order and routing."""

    def arrange(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                preset: HardwarePreset | None = None, kv_cut: str | None = None) -> pl.DataFrame:
        planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
        # Predicted work, whole KV tokens as asp's streaming plan counts it (`arrange.streaming`).
        work = np.ceil(group_tokens(settings.samples_per_prompt, predictions[C.PROMPT_TOKENS].to_numpy(),
                                    predictions[C.PREDICTED_MEAN_TOKENS].to_numpy()))
        k = settings.instances
        parts = []
        for epoch in range(settings.epochs):
            rng = np.random.default_rng([settings.seed, epoch, SHUFFLE_STREAM])
            order = order_of(planned, rng)
            if route == "round-robin":
                instance = np.arange(order.size) % k
            elif route == "length-aware":
                instance = _least_loaded(work[order], k)
            else:  # least-pending: the simulator routes dynamically (free dispatch); the column is a hint
                instance = np.arange(order.size) % k
            parts.append({"position": order, "minibatch": np.arange(order.size), "instance": instance,
                          "train_step": np.arange(order.size) // settings.train_batch_size})
        return _frame(prompts, predictions, parts)

    return arrange


def _least_loaded(work: np.ndarray, instances: int) -> np.ndarray:
    """Each item, in order, to the instance with the least work so far (ties: the lowest instance)."""
    load = np.zeros(instances)
    out = np.empty(work.size, dtype=np.int64)
    for i, w in enumerate(work.tolist()):
        k = int(np.argmin(load))
        out[i] = k
        load[k] += w
    return out


def _random_order(planned: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(planned.size)


def _by_length(descending: bool) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    def order(planned: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # Ties broken by dataset position, so the sort is stable and deterministic.
        return np.lexsort((np.arange(planned.size), -planned if descending else planned))

    return order


def random_in_asp_slots(asp_frame: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """asp's own slots (``seq``, ``instance``, ``minibatch``, ``train_step``, the times), with each epoch's
    prompts permuted at random over them (``numpy.random.default_rng([seed, epoch, 17])``): the same
    structure and generate() sizes with the arrangement taken away. What asp wins against it is the choice of
    which prompts share a minibatch and when each runs (../shared/docs/mission.md, "Compare on equal
    footing")."""
    frame = asp_frame.sort("seq")
    columns = [c for c in (C.ROW, C.PROMPT_ID, C.PREDICTED_TOKENS, C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS,
                           C.PROMPT_TOKENS, C.PREDICTION_SOURCE) if c in frame.columns]
    parts = []
    for epoch in frame["epoch"].unique().sort().to_list():
        part = frame.filter(pl.col("epoch") == epoch)
        permutation = pl.Series(np.random.default_rng([seed, int(epoch), 17]).permutation(part.height))
        parts.append(part.with_columns([pl.col(c).gather(permutation) for c in columns]))
    return pl.concat(parts, how="vertical")


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        Baseline("verl-default", "seeded shuffle, consecutive batches, contiguous chunk per worker",
                 _ordered(_shuffle_key)),
        Baseline("dataset-order", "dataset order, consecutive batches, contiguous chunk per worker",
                 _ordered(_dataset_key)),
        Baseline("short-first", "sorted by predicted length, shortest first, contiguous chunks",
                 _ordered(_length_key(descending=False))),
        Baseline("long-first", "sorted by predicted length, longest first, contiguous chunks",
                 _ordered(_length_key(descending=True))),
        Baseline("count-balance", "seeded shuffle, next minibatch to the instance with least pending work "
                 "(length-blind)", _ordered(_shuffle_key, _round_robin_split), dispatch="free"),
        Baseline("rollpacker-tail", "seeded shuffle, predicted-long 20% deferred to dedicated long rounds",
                 _rollpacker),
        # Equal footing with asp (the module docstring).
        Baseline("random (asp sizes)", "seeded shuffle cut by asp's packer limits, free dispatch",
                 _packed(_random_order), dispatch="free", modes=BLOCKING, equal_footing=True),
        Baseline("short-first (asp sizes)", "shortest first, cut by asp's packer limits, free dispatch",
                 _packed(_by_length(descending=False)), dispatch="free", modes=BLOCKING, equal_footing=True),
        Baseline("long-first (asp sizes)", "longest first, cut by asp's packer limits, free dispatch",
                 _packed(_by_length(descending=True)), dispatch="free", modes=BLOCKING, equal_footing=True),
        Baseline("least-pending", "verl's server mode: a shuffled stream, each group to whichever instance "
                 "frees a slot first", _streamed(_random_order, "least-pending"), dispatch="free",
                 modes=STREAMING, equal_footing=True),
        Baseline("round-robin", "a shuffled stream dealt out one group per instance in turn",
                 _streamed(_random_order, "round-robin"), modes=STREAMING, equal_footing=True),
        Baseline("length-aware", "a shuffled stream, each group to the instance with the least predicted "
                 "outstanding tokens", _streamed(_random_order, "length-aware"), modes=STREAMING,
                 equal_footing=True),
        Baseline("long-first (least-pending)", "the least-pending router fed longest first",
                 _streamed(_by_length(descending=True), "least-pending"), dispatch="free", modes=STREAMING,
                 equal_footing=True),
        Baseline("short-first (least-pending)", "the least-pending router fed shortest first",
                 _streamed(_by_length(descending=False), "least-pending"), dispatch="free", modes=STREAMING,
                 equal_footing=True),
        Baseline("long-first (length-aware)", "the length-aware router fed longest first",
                 _streamed(_by_length(descending=True), "length-aware"), modes=STREAMING, equal_footing=True),
        Baseline("short-first (length-aware)", "the length-aware router fed shortest first",
                 _streamed(_by_length(descending=False), "length-aware"), modes=STREAMING, equal_footing=True),
    )
}
RANDOM_IN_ASP_SLOTS = "random (asp slots)"


def arrange_baseline(name: str, prompts: pl.DataFrame, predictions: pl.DataFrame,
                     settings: ScheduleSettings, preset: HardwarePreset | None = None,
                     kv_cut: str | None = None) -> pl.DataFrame:
    """The schedule frame of baseline ``name`` (one of `BASELINES`); the ones in asp's sizes are cut as
    ``kv_cut`` says (`settings.KV_CUTS`: how asp's schedule was cut), else as the settings would cut."""
    return BASELINES[name].arrange(prompts, predictions, settings, preset, kv_cut)
