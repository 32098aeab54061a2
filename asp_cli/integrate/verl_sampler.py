"""A replay buffer for verl 0.9's v1 trainers that trains each step on the groups the schedule assigns to it.

verl 0.9 builds the object that picks each training batch from the finished rollout groups (held in
TransferQueue) from ``trainer.v1.sampler.custom_sampler`` (``PPOTrainer._build_replay_buffer``,
verl/trainer/ppo/v1/trainer_base.py)::

    trainer.v1.sampler.custom_sampler.path=pkg://asp_cli.integrate.verl_sampler
    trainer.v1.sampler.custom_sampler.name=ScheduleReplayBuffer
    +trainer.v1.sampler.sampler_kwargs.schedule=/abs/path/schedule.parquet

It works in the three trainer modes (``trainer.v1.trainer_mode``: ``sync``, ``colocate_async``,
``separate_async``). The prompts must carry asp's ``seq`` column, which tells each group's schedule row: train
on `asp export --format verl` output, or through `asp_cli.integrate.verl_dataset.ScheduleDataset`. The choice
itself is `asp_cli.integrate.step_groups.choose`: groups in the schedule's (``train_step``, ``seq``) order,
each global step waiting for its own; in the async modes under verl's lag bound
(``trainer.v1.sampler.max_off_policy_threshold`` and ``max_off_policy_strategy``, which verl leaves to custom
samplers to apply); in sync mode returning only once no prompt is in flight, as verl's own buffer does. When
groups the step needs were never submitted (a dataset read in dispatch order), it asks the trainer for more
prompts through ``refill_fn``. Validation batches take the oldest finished groups, as verl's own buffer does.

``sampler_kwargs`` (add each with ``+trainer.v1.sampler.sampler_kwargs.KEY=VALUE``): ``schedule`` (required),
``epoch`` (only that schedule epoch, when the dataset holds only it), ``prefix`` (of asp's columns, as given
to `asp export --prefix` or ``data.asp_prefix``), ``refill_size`` (prompts per refill; default 1 in the async
modes, where verl forces ``data.gen_batch_size=1``, else the schedule's train batch size, verl's default
``gen_batch_size``), ``poll_interval`` (seconds, default 1), ``max_refills`` (per call, default the schedule's
row count; beyond it the call fails naming the rows that never came).

Nothing here imports verl or torch; TransferQueue is imported when the trainer first samples, and
``import asp_cli`` never imports this module. The trainer only calls the methods below (``sample``, and
``get_sampleable_count`` / ``wait_for_sampleable`` in separate_async with
``trainer.v1.separate_async.hybrid_rollout.enable_switch``), so no verl base class is needed.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asp_cli.errors import SettingsError
from asp_cli.integrate.step_groups import Choice, Group, LagBound, StepPlan, choose

_log = logging.getLogger("asp_cli.integrate.verl_sampler")

TRAINER_MODES = ("sync", "colocate_async", "separate_async")
SAMPLER_KWARGS = ("schedule", "epoch", "prefix", "refill_size", "poll_interval", "max_refills")
# Status tags verl's trainer and agent loop put on a prompt key (trainer_base.py `_submit_batch_to_rollout`,
# agent_loop_tq.py): pending and running groups are in flight, the others finished.
_IN_FLIGHT = ("pending", "running")
_FINISHED = ("finished", "failure")
_DEBUG_EVERY_S = 60.0


@dataclass
class _View:
    """One partition of TransferQueue: prompt groups by status and each group's trajectories."""

    finished: dict[str, int] = field(default_factory=dict)  # uid -> submitted global step
    inflight: dict[str, int] = field(default_factory=dict)
    trajectories: dict[str, list[tuple[str, dict]]] = field(default_factory=lambda: defaultdict(list))


class ScheduleReplayBuffer:
    """verl's ``custom_sampler``: training batches follow the schedule's steps.

    Parameters are those verl passes (``PPOTrainer._build_replay_buffer``).

    Raises
    ------
    SettingsError
        Without ``sampler_kwargs.schedule``, for an unknown trainer mode or key, or (at the first sample) a
        train batch size other than the schedule's, or prompts without asp's ``seq`` column.
    """

    def __init__(
        self,
        trainer_mode: str,
        trainer_config: Any,
        max_off_policy_threshold: int | None,
        max_off_policy_strategy: str,
        sampler_kwargs: Any,
        refill_fn: Any = None,
    ) -> None:
        from asp_cli.schedule_format import read_schedule

        if trainer_mode not in TRAINER_MODES:
            raise SettingsError(
                f"trainer.v1.trainer_mode must be one of {', '.join(TRAINER_MODES)} (got {trainer_mode!r})")
        kwargs = dict(sampler_kwargs.items()) if hasattr(sampler_kwargs, "items") else {}
        unknown = sorted(set(kwargs) - set(SAMPLER_KWARGS))
        if unknown:
            raise SettingsError(f"trainer.v1.sampler.sampler_kwargs.{unknown[0]} is not a ScheduleReplayBuffer "
                                f"setting; it takes {', '.join(SAMPLER_KWARGS)}")
        if not kwargs.get("schedule"):
            raise SettingsError("ScheduleReplayBuffer needs a schedule: set "
                                "+trainer.v1.sampler.sampler_kwargs.schedule=/abs/path/schedule.parquet")
        schedule = read_schedule(Path(str(kwargs["schedule"])))
        frame = schedule.frame
        if kwargs.get("epoch") is not None:
            epoch = int(kwargs["epoch"])
            if epoch not in set(frame["epoch"].to_list()):
                raise SettingsError(f"sampler_kwargs.epoch={epoch}: the schedule has no epoch {epoch}")
            frame = frame.filter(frame["epoch"] == epoch)
        self.plan = StepPlan(frame["seq"].to_numpy(), frame["train_step"].to_numpy())
        # The schedule's own, or what its rows say where an edited file lacks it (`Schedule.recorded_settings`).
        self.train_batch_size = schedule.recorded_settings.train_batch_size
        self.trainer_mode = trainer_mode
        self.parameter_sync_step = int(_get(trainer_config, "parameter_sync_step", 1) or 1)
        self.seq_key = f"{kwargs.get('prefix') or ''}seq"
        synchronous = trainer_mode == "sync"
        default_refill = self.train_batch_size if synchronous and self.train_batch_size else 1
        self.refill_size = int(kwargs.get("refill_size") or default_refill)
        self.poll_interval = float(kwargs.get("poll_interval") or 1.0)
        self.max_refills = int(kwargs.get("max_refills") or len(self.plan))
        # verl applies the bound only in the async modes (its sync buffer is on-policy): so does this one.
        self.bound = (LagBound(int(max_off_policy_threshold), str(max_off_policy_strategy))
                      if max_off_policy_threshold is not None and not synchronous else None)
        self.drain = synchronous
        self.refill_fn = refill_fn
        self.trained: set[int] = set()
        self.decisions: list[dict[str, Any]] = []  # one entry per training call, for people and tests
        self._seq_of: dict[str, int | None] = {}
        self._written_off: set[str] = set()

    # ----------------------------------------------------------------------------------------------------
    # What verl calls

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict[str, float]]:
        """The next training (or validation) batch: a ``KVBatchMeta`` of trajectory keys, and metrics."""
        if partition_id != "train":
            return self._sample_oldest(partition_id, batch_size)
        self._check_batch_size(batch_size)
        choice, view, metrics = self._poll(int(global_steps), partition_id, batch_size)
        taken = [self._seq_of[uid] for uid in choice.take]
        self.trained.update(s for s in taken if s is not None)
        self.decisions.append({"global_step": int(global_steps), "train_step": self.plan.train_step(global_steps),
                               "seqs": taken, **choice.counts, "refills": metrics["training/asp/refills"]})
        return self._materialize(partition_id, choice.take, view), metrics

    def get_sampleable_count(self, global_steps: int, partition_id: str) -> int:
        """How many finished groups the next call could take now (separate_async's switch heuristic)."""
        view = self._view(partition_id)
        if partition_id != "train":
            return len(view.finished)
        self._learn(partition_id, view)
        size = (self.train_batch_size or 1) // self.parameter_sync_step
        return len(self._choose(int(global_steps), size, view).take)

    def wait_for_sampleable(self, global_steps: int, partition_id: str, target_count: int) -> tuple[set[str], dict]:
        """Poll until ``target_count`` groups can be taken; their uids and the metrics of the wait."""
        choice, _, metrics = self._poll(int(global_steps), partition_id, max(1, int(target_count)))
        return set(choice.take), metrics

    # ----------------------------------------------------------------------------------------------------
    # The loop

    def _poll(self, global_step: int, partition_id: str, batch_size: int) -> tuple[Choice, _View, dict[str, float]]:
        """Look, decide, act (evict, write off, refill) until the decision is final."""
        refills = evicted = lost = 0
        last_note = time.monotonic()
        while True:
            view = self._view(partition_id)
            self._learn(partition_id, view)
            choice = self._choose(global_step, batch_size, view)
            if choice.evict:
                self._clear(partition_id, choice.evict, view)
                self.trained.update(s for s in (self._seq_of.get(uid) for uid in choice.evict) if s is not None)
                evicted += len(choice.evict)
                continue
            if choice.lost:
                empty = sorted(uid for uid in view.finished if self._seq_of.get(uid) is None
                               and uid not in self._written_off)[:len(choice.lost)]
                self._written_off.update(empty)
                self._clear(partition_id, empty, view)
                self.trained.update(choice.lost)
                lost += len(choice.lost)
                _log.warning("asp: step %d: schedule rows %s came back with no sample; trained without them",
                             global_step, choice.lost)
                continue
            if choice.refill:
                if self.refill_fn is None:
                    raise SettingsError("ScheduleReplayBuffer needs verl's refill_fn to ask for missing prompts")
                if refills + choice.refill > self.max_refills:
                    raise RuntimeError(
                        f"asp: step {global_step} waits for schedule rows {choice.waiting_for[:10]} that "
                        f"{refills} more prompts did not bring; is data.train_files the file `asp export` wrote "
                        "(or data.custom_cls ScheduleDataset) with data.shuffle=False, and the same schedule?")
                self.refill_fn(choice.refill)
                refills += choice.refill
                continue
            if choice.ready:
                break
            if time.monotonic() - last_note > _DEBUG_EVERY_S:
                last_note = time.monotonic()
                _log.info("asp: step %d waits for schedule rows %s (%d groups in flight)", global_step,
                          choice.waiting_for[:10], len(view.inflight))
            time.sleep(self.poll_interval)
        metrics = {f"training/asp/{name}": float(value) for name, value in choice.counts.items()}
        metrics.update({"training/asp/refills": float(refills), "training/asp/evicted_over_lag": float(evicted),
                        "training/asp/lost": float(lost)})
        return choice, view, metrics

    def _choose(self, global_step: int, batch_size: int, view: _View) -> Choice:
        finished = [Group(uid, self._seq_of[uid], step) for uid, step in view.finished.items()
                    if self._seq_of.get(uid) is not None]
        unknown = sum(1 for uid in view.finished if self._seq_of.get(uid) is None and uid not in self._written_off)
        return choose(self.plan, global_step=global_step, batch_size=batch_size, finished=finished,
                      inflight_steps=sorted(view.inflight.values()), trained=self.trained, bound=self.bound,
                      drain=self.drain, refill_size=self.refill_size, unknown_lost=unknown)

    def _sample_oldest(self, partition_id: str, batch_size: int) -> tuple[Any, dict[str, float]]:
        """verl's own rule, for validation: the oldest ``batch_size`` finished groups."""
        while True:
            view = self._view(partition_id)
            if len(view.finished) >= batch_size:
                oldest = sorted(view.finished, key=lambda uid: (view.finished[uid], uid))[:batch_size]
                return self._materialize(partition_id, oldest, view), {}
            time.sleep(self.poll_interval)

    def _check_batch_size(self, batch_size: int) -> None:
        if self.train_batch_size and batch_size * self.parameter_sync_step != self.train_batch_size:
            raise SettingsError(
                f"data.train_batch_size={batch_size * self.parameter_sync_step} but the schedule was made with "
                f"--train-batch-size {self.train_batch_size}; make them equal, or the steps will not line up")

    # ----------------------------------------------------------------------------------------------------
    # TransferQueue

    def _view(self, partition_id: str) -> _View:
        import transfer_queue as tq

        view = _View()
        for key, tag in (tq.kv_list(partition_id) or {}).get(partition_id, {}).items():
            # A trajectory's key ({uid}_{session}_{output}: a uid has no underscore) is never a prompt's, whatever its
            # tag says: once in CI under load, TransferQueue 0.1.11 listed a trajectory (status "success", which
            # agent_loop_tq.py writes on each sample) with a prompt's is_prompt, a tag of the index it reused.
            if tag.get("is_prompt", False) and "_" not in key:
                status = tag.get("status")
                if status in _IN_FLIGHT:
                    view.inflight[key] = int(tag["global_steps"])
                elif status in _FINISHED:
                    view.finished[key] = int(tag["global_steps"])
                else:
                    raise ValueError(f"TransferQueue holds prompt {key} with an unknown status {status!r}")
            else:
                # Trajectory keys are {uid}_{session}_{output}, and a uid (uuid4) has no underscore.
                view.trajectories[key.split("_")[0]].append((key, tag))
        return view

    def _learn(self, partition_id: str, view: _View) -> None:
        """Read the schedule row (``seq``) of each newly finished group from one of its trajectories."""
        new = sorted(uid for uid in view.finished if uid not in self._seq_of)
        with_samples = [uid for uid in new if view.trajectories.get(uid)]
        keys = [min(view.trajectories[uid])[0] for uid in with_samples]
        for uid, seq in zip(with_samples, self._read_seqs(keys, partition_id), strict=True):
            self._seq_of[uid] = seq
        for uid in new:
            if uid not in self._seq_of:
                # No sample came back. In the async modes the prompt key holds the prompt's columns too.
                self._seq_of[uid] = None
                if self.trainer_mode != "sync":
                    try:
                        self._seq_of[uid] = self._read_seqs([uid], partition_id)[0]
                    except Exception:  # noqa: BLE001 - any failure: the row stays unknown
                        pass

    def _read_seqs(self, keys: list[str], partition_id: str) -> list[int | None]:
        import transfer_queue as tq

        if not keys:
            return []
        try:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=[self.seq_key])
            values = list(data[self.seq_key])
        except Exception as exc:  # noqa: BLE001 - TransferQueue raises several types for a missing field
            raise SettingsError(
                f"the prompts in TransferQueue carry no {self.seq_key!r} column ({type(exc).__name__}): train on "
                "`asp export --format verl` output or through data.custom_cls ScheduleDataset, with the same "
                "prefix as sampler_kwargs.prefix") from None
        return [None if v is None else int(v.item() if hasattr(v, "item") else v) for v in values]

    def _materialize(self, partition_id: str, uids: list[str], view: _View) -> Any:
        """The trajectories of ``uids`` as verl's batch, their prompt keys cleared (as verl's buffer does)."""
        import transfer_queue as tq
        from transfer_queue import KVBatchMeta

        keys, tags = [], []
        for uid in uids:
            for key, tag in sorted(view.trajectories.get(uid, ())):
                keys.append(key)
                tags.append(tag)
        if uids:
            tq.kv_clear(keys=list(uids), partition_id=partition_id)
        return KVBatchMeta(partition_id=partition_id, keys=keys, tags=tags)

    def _clear(self, partition_id: str, uids: list[str], view: _View) -> None:
        import transfer_queue as tq

        keys = [*uids, *(key for uid in uids for key, _ in view.trajectories.get(uid, ()))]
        if keys:
            tq.kv_clear(keys=keys, partition_id=partition_id)


def _get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    try:
        value = config.get(key, default)
    except Exception:  # noqa: BLE001 - an OmegaConf struct config without the key
        return default
    return default if value is None else value
