"""Replaying a schedule: its minibatches per instance or in global order, its rows by prompt id or ``seq``,
and the order a synchronous trainer should read it in.

A rollout engine that dispatches minibatches itself walks `Replay.minibatches` (all instances in global
dispatch order, or one instance's queue). A trainer that reads a dataset in fixed batches of
``train_batch_size`` consecutive rows (verl's trainers, slime, OpenRLHF) reads `Replay.trainer_order`:
rows ordered by the training step the schedule expects to consume them, and inside each batch laid out so
that cutting the batch into contiguous chunks, one per rollout worker, the way verl cuts it
(`chunk_capacities`), gives every worker a balanced predicted load.

Example
-------
>>> from asp_cli.integrate.replay import open_schedule
>>> replay = open_schedule("schedule.parquet")                          # doctest: +SKIP
>>> for mb in replay.minibatches(instance=0, epoch=0):                  # doctest: +SKIP
...     engine.generate([dataset[i] for i in mb.dataset_rows], n=replay.samples_per_prompt)
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.errors import InputError, SettingsError, shown_id
from asp_cli.schedule_format import Schedule, schedule_of
from asp_cli.settings import MAX_INSTANCES, MAX_SETTING, check_count, whole
# How a trainer cuts a batch across rollout workers, and verl's default worker count: facts of verl that the
# simulator's model of its rollout shares.
from asp_cli.sim.submit_all import CHUNKING, VERL_AGENT_WORKERS, chunk_capacities  # noqa: F401


class UnknownPromptId(InputError, KeyError):
    """A prompt id the schedule does not hold (`Replay.lookup`): an `InputError`, which ``except AspError`` catches,
    and the `KeyError` it always was. Its text is the message, not KeyError's quoted repr of it."""

    __str__ = Exception.__str__


class SeqTypeError(SettingsError, TypeError):
    """`Replay.at_seq` of a ``seq`` that is not an integer: a `SettingsError`, and the `TypeError` it was."""


class SeqRangeError(SettingsError, IndexError):
    """`Replay.at_seq` of a ``seq`` outside the schedule: a `SettingsError`, and the `IndexError` it was."""


@dataclass(frozen=True)
class Minibatch:
    """One inference minibatch: one ``generate()`` call on one instance, its rows in ``seq`` order."""

    minibatch: int
    instance: int
    epoch: int
    rows: pl.DataFrame

    @property
    def first_seq(self) -> int:
        return int(self.rows["seq"][0])

    @property
    def prompt_ids(self) -> list[str]:
        return self.rows["prompt_id"].to_list()

    @property
    def dataset_rows(self) -> list[int]:
        """0-based positions of the prompts in the scheduled input (inputs concatenated in order)."""
        return self.rows["row"].to_list()

    @property
    def predicted_tokens(self) -> int:
        """The longest planned response in the minibatch: what bounds its duration."""
        return int(self.rows["predicted_tokens"].max())

    @property
    def expected_start_s(self) -> float | None:
        if "expected_start_s" not in self.rows.columns:
            return None
        return float(self.rows["expected_start_s"][0])

    def __len__(self) -> int:
        return self.rows.height


class Replay:
    """A schedule opened for replay.

    Parameters
    ----------
    schedule
        A schedule from `asp_cli.schedule_format.read_schedule`, or one made in memory (`asp_cli.schedule(...,
        None)`'s result); `open_schedule` reads a file.
    """

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule_of(schedule)

    @classmethod
    def open(cls, path: str | Path) -> Replay:
        """Read and check a schedule file, or take one made in memory (raises `ScheduleFormatError`)."""
        return cls(schedule_of(path))

    # ----------------------------------------------------------------------------------------------------
    # Facts

    @property
    def frame(self) -> pl.DataFrame:
        """All rows, sorted by ``seq``."""
        return self.schedule.frame

    @property
    def settings(self) -> dict[str, Any]:
        return self.schedule.settings

    @property
    def instances(self) -> int:
        return self.schedule.instances

    @property
    def epochs(self) -> list[int]:
        return sorted(self.frame["epoch"].unique().to_list())

    @property
    def samples_per_prompt(self) -> int:
        return self.schedule.samples_per_prompt

    @property
    def train_batch_size(self) -> int:
        return self.schedule.recorded_settings.train_batch_size

    def rows(self, *, epoch: int | None = None, instance: int | None = None) -> pl.DataFrame:
        """The rows of one epoch and/or one instance (all by default), in ``seq`` order.

        Raises
        ------
        SettingsError
            For an epoch or instance the schedule does not have.
        """
        frame = self.frame
        epoch, instance = whole(epoch), whole(instance)  # NumPy's integers too (a value read back from a frame)
        for name, value in (("epoch", epoch), ("instance", instance)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise SettingsError(f"{name} must be an integer (got {type(value).__name__} {value!r})")
        if epoch is not None:
            if epoch not in self.epochs:
                raise SettingsError(f"the schedule has no epoch {epoch}; it has epoch{'s' if len(self.epochs) > 1 else ''} "
                                    f"{_span(self.epochs)} (numbered from 0)")
            frame = frame.filter(pl.col("epoch") == epoch)
        if instance is not None:
            if not 0 <= instance < self.instances:
                raise SettingsError(
                    f"the schedule has no instance {instance}; it has instances 0..{self.instances - 1}"
                )
            frame = frame.filter(pl.col("instance") == instance)
        return frame

    # ----------------------------------------------------------------------------------------------------
    # Walking and looking up

    def minibatches(self, *, instance: int | None = None, epoch: int | None = None) -> Iterator[Minibatch]:
        """Minibatches in global dispatch order (``seq``), or one instance's queue in its own order."""
        frame = self.rows(epoch=epoch, instance=instance)
        if frame.height == 0:
            return
        mb = frame["minibatch"].to_numpy()
        cuts = np.flatnonzero(np.diff(mb)) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [mb.size]])
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            rows = frame.slice(start, end - start)
            yield Minibatch(
                minibatch=int(rows["minibatch"][0]),
                instance=int(rows["instance"][0]),
                epoch=int(rows["epoch"][0]),
                rows=rows,
            )

    def lookup(self, prompt_ids: str | int | Iterable[str | int], *, epoch: int | None = None) -> pl.DataFrame:
        """The schedule rows of one or more prompt ids (one row per epoch), in ``seq`` order. An id is its text;
        an integer (NumPy's too) is taken as its decimal text (row-number ids: ``lookup(5)`` was a TypeError).

        Raises
        ------
        KeyError
            Naming the first id the schedule does not hold (`UnknownPromptId`, an `InputError` too).
        SettingsError
            For something that is not an id or a list of them (None, a float).
        """
        one = whole(prompt_ids)
        listed = ([one] if isinstance(one, (str, int)) else list(prompt_ids) if isinstance(prompt_ids, Iterable)
                  else None)
        listed = None if listed is None else [whole(p) for p in listed]
        if listed is None or not all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in listed):
            shown = repr(prompt_ids) if listed is None else repr(listed)
            raise SettingsError(f"prompt_ids must be a prompt id or a list of them (got {shown[:80]})")
        wanted = [str(p) for p in listed]
        frame = self.rows(epoch=epoch).filter(pl.col("prompt_id").is_in(wanted))
        found = set(frame["prompt_id"].to_list())
        for prompt_id in wanted:
            if prompt_id not in found:
                raise UnknownPromptId(f"prompt id {shown_id(prompt_id)} is not in the schedule")
        return frame

    def at_seq(self, seq: int) -> dict[str, Any]:
        """The row dispatched at position ``seq`` (0-based), as a dict.

        Raises
        ------
        TypeError
            For a ``seq`` that is not an integer (NumPy's are): `SeqTypeError`, a `SettingsError` too.
        IndexError
            For one outside the schedule: `SeqRangeError`, a `SettingsError` too.
        """
        seq = whole(seq)
        if not isinstance(seq, int) or isinstance(seq, bool):  # at_seq("3") was a TypeError about '<='
            raise SeqTypeError(f"seq must be an integer (got {type(seq).__name__} {seq!r})")
        if not 0 <= seq < self.frame.height:
            raise SeqRangeError(f"seq {seq} is outside 0..{self.frame.height - 1}")
        return self.frame.row(seq, named=True)

    # ----------------------------------------------------------------------------------------------------
    # Trainer order

    def trainer_order(
        self,
        *,
        epoch: int | None = None,
        workers: int | None = None,
        train_batch_size: int | None = None,
        chunking: str = "v1",
    ) -> pl.DataFrame:
        """Rows in the order a trainer reading fixed batches of consecutive rows should read them.

        Rows go by ``train_step`` (ties by ``seq``); the result is cut into batches of ``train_batch_size``
        consecutive rows, and inside each batch rows are laid out in ``workers`` contiguous blocks, sized as
        the trainer cuts them (`chunk_capacities`) and of balanced predicted load (`balanced_blocks`), each
        block in dispatch order.

        Parameters
        ----------
        epoch
            One epoch, or all of them (``None``) as one sequence.
        workers
            Contiguous chunks a batch is split into (verl: rollout replicas or agent-loop workers);
            default the schedule's instances.
        train_batch_size
            Prompts per training batch; default the schedule's own.
        chunking
            ``v1`` (verl 0.9's trainer: prompts cut by ``TensorDict.chunk``) or ``legacy`` (verl 0.7's:
            the n-times repeated batch cut by ``DataProto.chunk``); see `chunk_capacities`.

        Returns
        -------
        pl.DataFrame
            The schedule rows plus ``trainer_position`` (0-based), ``trainer_batch`` and ``trainer_worker``.
        """
        workers = self.instances if workers is None else whole(workers)
        size = self.train_batch_size if train_batch_size is None else whole(train_batch_size)
        check_workers(workers)
        if chunking not in CHUNKING:
            raise SettingsError(f"the chunking rule must be one of {', '.join(CHUNKING)} (got {chunking!r})")
        # "8" and 2.5 were TypeErrors from the comparison and the range below
        check_count("train_batch_size", size, minimum=1, maximum=MAX_SETTING)
        frame = self.rows(epoch=epoch).sort(["train_step", "seq"])
        loads = frame["predicted_tokens"].to_numpy().astype(np.float64)
        n = frame.height
        order = np.empty(n, dtype=np.int64)
        worker = np.empty(n, dtype=np.int64)
        for start in range(0, n, size):
            end = min(start + size, n)
            capacities = chunk_capacities(end - start, self.samples_per_prompt, workers, rule=chunking)
            block = balanced_blocks(loads[start:end], capacities)
            # Blocks in worker order, each in dispatch order (the rows are already sorted by seq within a step).
            local = np.lexsort((np.arange(end - start), block))
            order[start:end] = start + local
            worker[start:end] = block[local]
        out = frame.select(pl.all().gather(order))
        positions = np.arange(n, dtype=np.int64)
        return out.with_columns(
            pl.Series("trainer_position", positions),
            pl.Series("trainer_batch", positions // size),
            pl.Series("trainer_worker", worker.astype(np.int32)),
        )

    def dataset_indices(
        self,
        *,
        epoch: int | None = None,
        workers: int | None = None,
        train_batch_size: int | None = None,
        chunking: str = "v1",
    ) -> list[int]:
        """Dataset positions (the ``row`` column) in `trainer_order`: what a sampler yields."""
        order = self.trainer_order(epoch=epoch, workers=workers, train_batch_size=train_batch_size, chunking=chunking)
        return order["row"].to_list()


def open_schedule(path: str | Path) -> Replay:
    """Open a schedule for replay: a file, read once (its rows are kept: open it again after it is rewritten), or
    one kept in memory (`asp_cli.schedule(..., None)`'s result, `read_schedule`'s).

    Raises
    ------
    InputError
        When there is no such file.
    ScheduleFormatError
        When the file is not an asp schedule.
    SettingsError
        When ``path`` is neither a path nor a schedule (None, a frame).
    """
    return Replay.open(path)


# --------------------------------------------------------------------------------------------------------
# Kernels




def balanced_blocks(loads: np.ndarray, capacities: np.ndarray) -> np.ndarray:
    """Assign items to blocks of fixed sizes so that block loads come out close.

    Longest item first, each to the least-loaded block that still has room (LPT with capacities); ties
    between items go to the lower index, ties between blocks to the lower block. Items of equal load keep
    their relative order across blocks, so the result is deterministic.

    Parameters
    ----------
    loads
        One non-negative load per item.
    capacities
        Items per block; must sum to ``len(loads)``.

    Returns
    -------
    np.ndarray
        The block (0-based) of each item.
    """
    loads = np.asarray(loads, dtype=np.float64)
    capacities = np.asarray(capacities, dtype=np.int64)
    if int(capacities.sum()) != loads.size:
        raise ValueError(f"capacities sum to {int(capacities.sum())}, not to the {loads.size} items")
    block = np.full(loads.size, -1, dtype=np.int64)
    room = capacities.copy()
    heap = [(0.0, b) for b in range(capacities.size) if room[b] > 0]
    heapq.heapify(heap)
    for item in np.lexsort((np.arange(loads.size), -loads)).tolist():
        total, b = heapq.heappop(heap)
        block[item] = b
        room[b] -= 1
        if room[b] > 0:
            heapq.heappush(heap, (total + loads[item], b))
    assert (block >= 0).all() and (np.bincount(block, minlength=capacities.size) == capacities).all()
    return block


def _span(values: list[int]) -> str:
    if not values:
        return "(none)"
    if values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])
    return ", ".join(map(str, values))


def check_workers(workers: int) -> None:
    """The rule for a rollout worker count (`--workers`): a whole number from 1 to `MAX_INSTANCES`, as
    ``--instances`` (a larger one is a typo, which would allocate per worker before failing); NumPy's integers too."""
    workers = whole(workers)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise SettingsError(f"--workers must be at least 1 (got {workers!r})")
    if workers > MAX_INSTANCES:
        raise SettingsError(f"--workers {workers} is not a rollout fleet; give at most {MAX_INSTANCES}")
