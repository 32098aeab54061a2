"""A dataset class for verl 0.9 that reads the training files in an asp schedule's order (``data.custom_cls``).

verl builds its datasets with ``get_dataset_class`` (verl/utils/dataset/rl_dataset.py), which loads
``data.custom_cls.{path,name}``, and ``create_rl_dataset`` (verl/trainer/ppo/utils.py), which calls it as
``cls(data_files=..., tokenizer=..., processor=..., config=config.data, max_samples=...)``::

    data.custom_cls.path=pkg://asp_cli.integrate.verl_dataset
    data.custom_cls.name=ScheduleDataset
    +data.asp_schedule=/abs/path/schedule.parquet
    data.shuffle=False

``data.train_files`` stays the file(s) the schedule was made from, in the same order. With ``data.shuffle=False``
verl reads a dataset front to back (a ``SequentialSampler``), so position ``i`` of this dataset is the ``i``-th
prompt the trainer rolls out: the dataset lists the rows in `Replay.trainer_order` (by training step, each
batch laid out for the agent-loop workers the way the trainer cuts it), all schedule epochs one after the
other (so ``trainer.total_epochs=1``), and adds asp's columns (``seq``, ``train_step``, ... with
``data.asp_prefix``) to every row, which the v1 sampler `asp_cli.integrate.verl_sampler.ScheduleReplayBuffer`
reads back. It is `asp export --format verl` without the exported file.

Optional keys under ``data`` (added with ``+``): ``asp_order`` (``train``, the default, or ``dispatch``: the
schedule's ``seq``), ``asp_epoch`` (hold only that schedule epoch), ``asp_workers`` (default
``actor_rollout_ref.rollout.agent.num_workers``), ``asp_prefix`` (before asp's column names), ``asp_route``
(``none``, the default; ``planned``: every training row also carries its planned instance in ``priority``, which
verl's agent loops pass to the rollout router, for `asp_cli.integrate.verl_router.ScheduleRouter`; ``length``: its
predicted response tokens per sample instead, which that router balances). The cut follows
the trainer: ``trainer.use_v1=True`` cuts the prompts (TensorDict.chunk), ``False`` the n-times repeated batch.
The validation files (``data.val_files``, when they differ from ``data.train_files``) are read as they are.

It refuses (``SettingsError``, ``InputError``) what would quietly break the order: no schedule,
``data.shuffle=True``, a ``data.train_batch_size`` other than the schedule's, files that do not hold the
schedule's prompts at its rows, and rows dropped by ``data.filter_overlong_prompts`` or
``data.train_max_samples``. This module imports verl; ``import asp_cli`` never imports it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

try:
    from verl.utils.dataset.rl_dataset import RLHFDataset
except ModuleNotFoundError as exc:  # verl loads this module (data.custom_cls); alone it needs verl installed
    if exc.name is None or exc.name.split(".")[0] != "verl":
        raise
    raise ModuleNotFoundError("asp_cli.integrate.verl_dataset is a dataset class for verl (data.custom_cls) and "
                              "needs verl installed (pip install verl==0.9.1, the release docs/integrations.md "
                              "names); asp's other commands do not", name=exc.name) from None

from asp_cli.errors import InputError, SettingsError
from asp_cli.integrate.export import check_dataset
from asp_cli.integrate.export_options import ASP_COLUMNS, ORDERS
from asp_cli.integrate.replay import VERL_AGENT_WORKERS, Replay
from asp_cli.integrate.verl_config import trainer_setting
from asp_cli.integrate.verl_router import ROUTES, route_priorities, unrouted_agents_note

_log = logging.getLogger("asp_cli.integrate.verl_dataset")

DATA_KEYS = ("asp_schedule", "asp_order", "asp_epoch", "asp_workers", "asp_prefix", "asp_route")


class ScheduleDataset(RLHFDataset):
    """verl's RLHFDataset, its training rows in the schedule's order, each with asp's columns.

    Parameters are those of ``RLHFDataset`` (verl passes them by keyword).

    Attributes
    ----------
    asp_rows
        The dataset row behind each position (None for validation files, read as they are).
    asp_settings
        What the order was made with: schedule, order, epoch, workers, chunking, prefix.
    """

    def __init__(self, data_files: Any, tokenizer: Any, config: Any, processor: Any = None, max_samples: int = -1):
        super().__init__(data_files=data_files, tokenizer=tokenizer, config=config, processor=processor,
                         max_samples=max_samples)
        self.asp_rows: list[int] | None = None
        self.asp_columns: dict[str, list[int]] = {}
        self.asp_settings: dict[str, Any] = {}
        if not _same_files(data_files, config.get("train_files")):
            _log.info("asp: %s is not data.train_files; read as it is", _files(data_files))
            return
        self._arrange(config)

    def _arrange(self, config: Any) -> None:
        path = config.get("asp_schedule")
        if not path:
            raise SettingsError("ScheduleDataset needs a schedule: set +data.asp_schedule=/abs/path/schedule.parquet")
        replay = Replay.open(Path(str(path)))
        if config.get("shuffle"):
            raise SettingsError("data.shuffle=True makes verl read the dataset in random order, not the schedule's; "
                                "set data.shuffle=False")
        size = config.get("train_batch_size")
        if size is not None and int(size) != replay.train_batch_size:
            raise SettingsError(f"data.train_batch_size={int(size)} but the schedule was made with --train-batch-size "
                                f"{replay.train_batch_size}; make them equal, or the steps will not line up")
        order = str(config.get("asp_order") or "train")
        if order not in ORDERS:
            raise SettingsError(f"data.asp_order must be one of {', '.join(ORDERS)} (got {order!r})")
        epoch = config.get("asp_epoch")
        epoch = None if epoch is None else int(epoch)
        prefix = str(config.get("asp_prefix") or "")
        workers = config.get("asp_workers") or trainer_setting(config, "actor_rollout_ref.rollout.agent.num_workers")
        workers = int(workers or VERL_AGENT_WORKERS)
        chunking = "v1" if trainer_setting(config, "trainer.use_v1") in (None, True) else "legacy"
        n = trainer_setting(config, "actor_rollout_ref.rollout.n")
        if n is not None and int(n) != replay.samples_per_prompt:
            _log.warning("asp: actor_rollout_ref.rollout.n=%s but the schedule plans %d samples per prompt", n,
                         replay.samples_per_prompt)

        rows, warnings = check_dataset(replay, self.data_files)
        for warning in warnings:
            _log.warning("asp: %s", warning)
        if len(self.dataframe) != rows:
            raise InputError(
                f"{_files(self.data_files)}: verl kept {len(self.dataframe)} of the {rows} rows the schedule was made "
                "from (data.filter_overlong_prompts or data.train_max_samples dropped rows); set "
                "data.filter_overlong_prompts=False and data.train_max_samples=-1, or drop those prompts before "
                "`asp schedule`")
        clashes = [f"{prefix}{c}" for c in ASP_COLUMNS if f"{prefix}{c}" in self.dataframe.column_names]
        if clashes:
            raise SettingsError(
                f"the dataset already has column(s) {', '.join(map(repr, clashes))}, which ScheduleDataset adds; set "
                "+data.asp_prefix=asp_ (and +trainer.v1.sampler.sampler_kwargs.prefix=asp_ for the sampler)")
        route = str(config.get("asp_route") or "none")
        if route not in ROUTES:
            raise SettingsError(f"data.asp_route must be one of {', '.join(ROUTES)} (got {route!r})")
        if route != "none" and "priority" in self.dataframe.column_names:
            raise SettingsError(f"the dataset already has a column 'priority', which +data.asp_route={route} sets "
                                "for verl's router; rename or drop it")
        agents = unrouted_agents_note(list(self.dataframe["agent_name"]) if "agent_name" in
                                      self.dataframe.column_names else None, route, f"+data.asp_route={route}")
        if agents:
            _log.warning("asp: %s", agents)
        if route != "none" and trainer_setting(config, "actor_rollout_ref.rollout.full_determinism"):
            raise SettingsError("actor_rollout_ref.rollout.full_determinism=True names each request after its "
                                f"priority, which +data.asp_route={route} gives every sample of a group alike; turn "
                                "one of them off")
        frame = (replay.trainer_order(epoch=epoch, workers=workers, chunking=chunking) if order == "train"
                 else replay.rows(epoch=epoch))
        self.asp_rows = frame["row"].to_list()
        self.asp_columns = {f"{prefix}{c}": frame[c].to_list() for c in ASP_COLUMNS}
        if route != "none":
            # The planned instance or the predicted length rides in `priority`, ordered by the row's position
            # (`verl_router`).
            self.asp_columns["priority"] = route_priorities(frame, route)
        self.asp_settings = {"schedule": str(path), "order": order, "epoch": epoch, "workers": workers,
                             "chunking": chunking, "prefix": prefix, "route": route}
        _log.info("asp: %d rows in schedule order (%s)", len(self.asp_rows), self.asp_settings)

    def __len__(self) -> int:
        return super().__len__() if self.asp_rows is None else len(self.asp_rows)

    def __getitem__(self, item: int) -> dict:
        if self.asp_rows is None:
            return super().__getitem__(item)
        row = super().__getitem__(self.asp_rows[item])
        for name, values in self.asp_columns.items():
            row[name] = values[item]
        return row


def _files(files: Any) -> list[str]:
    if files is None:
        return []
    if isinstance(files, (str, Path)):
        return [str(files)]
    return [str(f) for f in files]


def _same_files(a: Any, b: Any) -> bool:
    return bool(_files(a)) and _files(a) == _files(b)
