"""The arrangements people run today, written as schedule frames so the simulator can replay them.

Each function takes the same inputs as `asp_cli.arrange.pipeline.arrange` (prompts, aligned predictions, settings) and
returns a frame with the schedule's required columns plus ``prompt_tokens``, ``predicted_max_tokens`` and
``predicted_mean_tokens``, sorted by ``seq``. All of them use the settings' minibatch size (prompts per
``generate()`` call) and train batch size; none looks at the true lengths. Sources (../shared/docs/peers.md):

* ``verl-default``: verl shuffles the dataset (``data.shuffle: True``, seeded), takes consecutive train
  batches, and ``AgentLoopManager.generate_sequences`` splits each generation batch into contiguous chunks, one
  per worker (``prompts.chunk(len(workers))``).
* ``dataset-order``: the same without the shuffle.
* ``short-first`` / ``long-first``: the dataset sorted by predicted length (SortedRL's short-first, the naive
  fix), then split like verl, which puts the longest prompts of a batch on one worker.
* ``count-balance``: OpenRLHF's and verl's server manager send each request to the server with the fewest
  pending requests, blind to length; offline that is a round-robin deal, and the simulator replays it with
  ``dispatch="free"`` (the next minibatch goes to whichever instance is free).
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
from asp_cli.settings import ScheduleSettings

# RollPacker over-provisions by eta = 1.25, so about 1 - 1/1.25 = 20% of prompts end up in long rounds.
ROLLPACKER_TAIL_FRACTION = 0.2


@dataclass(frozen=True)
class Baseline:
    """One arrangement: how to order and split, and how the engine hands minibatches out."""

    name: str
    description: str
    arrange: Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings], pl.DataFrame]
    dispatch: str = "planned"


def _shuffled(rows: int, settings: ScheduleSettings, epoch: int) -> np.ndarray:
    return np.random.default_rng([settings.seed, epoch, 7]).permutation(rows)


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
             split=_contiguous_split) -> Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings], pl.DataFrame]:
    def arrange(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings) -> pl.DataFrame:
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


def _rollpacker(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings) -> pl.DataFrame:
    planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
    rounds = [
        rollpacker_rounds(planned, _shuffled(prompts.height, settings, epoch), settings.train_batch_size)
        for epoch in range(settings.epochs)
    ]
    return _frame_from_rounds(prompts, predictions, settings, rounds, _contiguous_split)


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
    )
}


def arrange_baseline(name: str, prompts: pl.DataFrame, predictions: pl.DataFrame,
                     settings: ScheduleSettings) -> pl.DataFrame:
    """The schedule frame of baseline ``name`` (one of `BASELINES`)."""
    return BASELINES[name].arrange(prompts, predictions, settings)


# The denominator of an arrangement's worth: asp's own minibatch sizes, instances and dispatch order, with the
# prompts dealt into those slots at random. What asp wins against it is the choice of which prompts share a
# minibatch and when each runs, not the size of its generate() calls (../shared/docs/mission.md, "Compare on
# equal footing").
RANDOM_ASP_SIZES = "random (asp sizes)"
_PROMPT_COLUMNS = (C.ROW, C.PROMPT_ID, C.PREDICTED_TOKENS, C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS,
                   C.PROMPT_TOKENS, C.PREDICTION_SOURCE)


def random_fill(frame: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """A schedule frame with the same slots (``seq``, ``instance``, ``minibatch``, ``train_step``, the times)
    and, within each epoch, the prompts permuted at random over them (``numpy.random.default_rng([seed, epoch,
    17])``): every prompt still runs exactly once per epoch."""
    frame = frame.sort("seq")
    columns = [c for c in _PROMPT_COLUMNS if c in frame.columns]
    parts = []
    for epoch in frame["epoch"].unique().sort().to_list():
        part = frame.filter(pl.col("epoch") == epoch)
        perm = pl.Series(np.random.default_rng([seed, int(epoch), 17]).permutation(part.height))
        parts.append(part.with_columns([pl.col(c).gather(perm) for c in columns]))
    return pl.concat(parts, how="vertical")
