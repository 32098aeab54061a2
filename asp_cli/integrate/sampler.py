"""A sampler that makes verl 0.5-0.7 (or any ``torch.utils.data.DataLoader``) read a dataset in an asp schedule's
order.

verl 0.8 removed the hook this sampler plugs into (``data.sampler.class_path``): Hydra refuses the key, and
with ``+data.sampler.*`` verl ignores it and shuffles. On verl 0.8 and later use `asp export --format verl`
or the dataset class `asp_cli.integrate.verl_dataset.ScheduleDataset` (``data.custom_cls``); built with a
verl data config while verl >= 0.8 is installed, this sampler refuses with that message.

verl 0.5-0.7 loads it through its curriculum-sampler hook::

    data.sampler.class_path=pkg://asp_cli.integrate.sampler   # or the path of this file
    data.sampler.class_name=ScheduleSampler
    +data.asp_schedule=/abs/path/schedule.parquet    # or the ASP_SCHEDULE environment variable
    data.dataloader_num_workers=0                    # verl requires it for custom samplers
    data.filter_overlong_prompts=False               # a filtered dataset no longer matches the schedule

and builds it as ``ScheduleSampler(data_source=dataset, data_config=config.data)``. ``train_files`` must be
the file(s) the schedule was made from, in the same order: the sampler yields their row positions.

Each pass over the sampler (each verl epoch) replays the next schedule epoch in `Replay.trainer_order`:
rows by training step, every batch of ``data.train_batch_size`` rows laid out so verl 0.7's contiguous split
of the n-times repeated batch across its agent-loop workers is balanced (the ``legacy`` chunking).
Optional keys (under ``data`` or ``data.sampler``): ``asp_workers`` (contiguous chunks per batch; default
verl's ``actor_rollout_ref.rollout.agent.num_workers`` when given a verl config, else one for a schedule made for
slime's or OpenRLHF's router (``--router cache-aware`` or ``group-round-robin``: a batch in the schedule's order), else the schedule's
instances), ``asp_first_epoch`` (the schedule epoch of the first pass, e.g. when resuming a checkpoint taken
in epoch 2). Environment variables ``ASP_SCHEDULE``, ``ASP_WORKERS`` and ``ASP_FIRST_EPOCH`` stand in for
missing keys.

Torch is optional: with it the class is a ``torch.utils.data.Sampler`` (verl's ``AbstractSampler`` when verl
0.5-0.7 is installed); without it a plain iterable. ``import asp_cli`` never imports this module. Imports are
absolute because verl may load this file by path, outside its package.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sized
from typing import Any

_log = logging.getLogger("asp_cli.integrate.sampler")

CONFIG_KEYS = {"schedule": "asp_schedule", "workers": "asp_workers", "first_epoch": "asp_first_epoch"}
ENV_KEYS = {"schedule": "ASP_SCHEDULE", "workers": "ASP_WORKERS", "first_epoch": "ASP_FIRST_EPOCH"}
# The verl releases with the data.sampler.class_path hook: 0.5.0 added it, 0.8.0 removed it (checked in the
# published wheels 0.4.1 to 0.9.1; docs/integrations.md).
HOOK_VERSIONS = ((0, 5), (0, 8))


def verl_version() -> tuple[int, int] | None:
    """The installed verl's (major, minor), read from its metadata without importing it; None without verl."""
    from importlib import metadata

    try:
        text = metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found[1]), int(found[2])) if found else None


def _base_class() -> type:
    """verl's AbstractSampler (verl 0.5-0.7), else torch's Sampler, else object: whatever this environment has."""
    version = verl_version()
    if version is not None and HOOK_VERSIONS[0] <= version < HOOK_VERSIONS[1]:
        try:
            from verl.experimental.dataset.sampler import AbstractSampler  # type: ignore[import-not-found]

            return AbstractSampler
        except Exception:  # noqa: BLE001 - a broken verl install: fall back to torch
            pass
    try:
        from torch.utils.data import Sampler

        return Sampler
    except ImportError:
        return object


def _lookup(config: Any, key: str) -> Any:
    """``config[key]`` for dicts and OmegaConf configs alike, or None."""
    if config is None:
        return None
    if isinstance(config, Mapping) or hasattr(config, "get"):
        try:
            return config.get(key)
        except Exception:  # noqa: BLE001 - an OmegaConf struct config without the key
            return None
    return getattr(config, key, None)


def _setting(config: Any, name: str) -> Any:
    key = CONFIG_KEYS[name]
    for where in (config, _lookup(config, "sampler")):
        value = _lookup(where, key)
        if value not in (None, ""):
            return value
    value = os.environ.get(ENV_KEYS[name], "")
    return value or None


def _count(value: Any, key: str, least: int) -> int:
    """An ``asp_*`` count (an integer, NumPy's too, or its text from the environment), checked when the sampler is
    built: 0 workers failed only on iteration, and a first epoch of -1 was taken as given."""
    from asp_cli.errors import SettingsError
    from asp_cli.settings import whole

    value = whole(value)
    text = str(value).strip()
    number = (value if isinstance(value, int) and not isinstance(value, bool)
              else int(text) if isinstance(value, str) and text.lstrip("-").isdigit() else None)
    if number is None or number < least:
        raise SettingsError(f"{key} must be a whole number of at least {least} (got {value!r})")
    return number


def _refuse_unknown_keys(config: Any) -> None:
    """An ``asp_``-prefixed key the sampler does not read (a typo such as ``asp_wrokers`` was silently ignored)."""
    from asp_cli.errors import SettingsError

    # The keys the other plug-ins read from the same `data` config (the dataset class, the router) are no typos.
    known = set(CONFIG_KEYS.values()) | {"asp_route", "asp_prompts", "asp_order", "asp_epoch", "asp_prefix"}
    for where in (config, _lookup(config, "sampler")):
        try:
            keys = [str(k) for k in where.keys()] if where is not None and hasattr(where, "keys") else []
        except Exception:  # noqa: BLE001 - a config without key listing
            keys = []
        unknown = sorted(k for k in keys if k.startswith("asp_") and k not in known)
        if unknown:
            raise SettingsError(f"unknown key {unknown[0]} for ScheduleSampler; it reads "
                                f"{', '.join(sorted(CONFIG_KEYS.values()))}")


class ScheduleSampler(_base_class()):  # type: ignore[misc]
    """Yield dataset indices in an asp schedule's order, one schedule epoch per pass.

    It yields the whole order on every process that builds it: it reads no rank. In verl that is right (the single
    controller, the driver, builds the one dataloader); under a data loader per process (``torch.distributed``,
    one per rank) every rank would get every index: take ``order[r::world_size]`` of each train batch on rank
    ``r``, as the ``RankShard`` wrapper in docs/integrations.md ("ScheduleSampler in several processes") does.

    Parameters
    ----------
    data_source
        The dataset (verl's RLHFDataset); only its length (and, when it has one, its ``dataframe``'s id
        column) is read, to check it is the dataset the schedule was made from.
    data_config
        verl's ``config.data`` (or any mapping) holding ``asp_schedule`` and optionally ``asp_workers``,
        ``asp_first_epoch`` and ``train_batch_size``.
    schedule
        A schedule path, or a schedule kept in memory (`asp_cli.schedule(..., None)`'s result, `read_schedule`'s),
        overriding the config (for use outside verl).

    Raises
    ------
    SettingsError
        When no schedule is named, ``data_config`` is a path rather than a config, ``data_source`` has no length,
        a count is not a whole number, ``train_batch_size`` differs from the schedule's, or ``data_config`` is a
        verl config while verl 0.8 or later (which has no sampler hook) is installed.
    InputError
        When the dataset does not match the schedule (filtered, truncated or another file).
    ScheduleFormatError
        When the file is not an asp schedule.
    """

    def __init__(self, data_source: Sized, data_config: Any = None, *, schedule: Any = None):
        from asp_cli.errors import SettingsError
        from asp_cli.integrate.replay import Replay
        from asp_cli.integrate.verl_config import trainer_setting

        if isinstance(data_config, (str, bytes, os.PathLike)):  # was told to set verl's +data.asp_schedule
            raise SettingsError(f"data_config is a data config (a mapping, such as verl's config.data or "
                                f"{{'asp_schedule': path}}), not the schedule: pass ScheduleSampler(dataset, "
                                f"schedule={os.fsdecode(data_config)!r})")
        if not isinstance(data_source, Sized):  # len(None) was a TypeError from inside
            raise SettingsError(f"data_source must be the dataset (anything with a length, e.g. verl's RLHFDataset or "
                                f"a list of rows), not {data_source!r:.60}")
        _refuse_verl_without_the_hook(data_config)
        path = schedule if schedule is not None else _setting(data_config, "schedule")
        if path is None or path == "":
            raise SettingsError(
                "ScheduleSampler needs a schedule: set +data.asp_schedule=/path/schedule.parquet "
                "(or the ASP_SCHEDULE environment variable)"
            )
        # A path (text, a Path) or a schedule kept in memory: os.fspath refused the latter with a TypeError.
        self.replay = Replay.open(os.fspath(path) if isinstance(path, os.PathLike) else path)
        workers = _setting(data_config, "workers")
        if workers is None:
            workers = trainer_setting(data_config, "actor_rollout_ref.rollout.agent.num_workers")
        # slime's and OpenRLHF's routers take a batch in the schedule's own order (OpenRLHF deals it to its engines
        # in turn): one chunk, as `asp export` writes it (verl's chunks put 3,479 of 4,000 prompts on other engines
        # than planned: an OpenRLHF newcomer's round).
        own = self.replay.schedule.recorded_settings.router in ("cache-aware", "group-round-robin")
        self.workers = _count(workers, "asp_workers", 1) if workers is not None else 1 if own else self.replay.instances
        if own and self.workers != 1:  # as `asp export --workers` warns (dealt_workers_note)
            from asp_cli.integrate.export_options import dealt_workers_note

            note = dealt_workers_note(self.replay.schedule.recorded_settings.router, self.workers, "train", "jsonl")
            _log.warning("asp: %s", note.replace("--workers ", "asp_workers=", 1).replace("--workers", "asp_workers"))
        first = _setting(data_config, "first_epoch")
        self.epoch = _count(first, "asp_first_epoch", 0) if first is not None else 0
        _refuse_unknown_keys(data_config)
        size = _lookup(data_config, "train_batch_size")
        size = None if size is None else _count(size, "train_batch_size", 1)  # "abc" was a ValueError from int()
        if size is not None and size != self.replay.train_batch_size:
            raise SettingsError(
                f"train_batch_size={size} (verl's data.train_batch_size, OpenRLHF's --rollout.batch_size) but "
                f"the schedule was made with --train-batch-size {self.replay.train_batch_size}; make them equal, or "
                "the batches will not line up"
            )
        self._check_dataset(data_source)
        self._orders: dict[int, list[int]] = {}

    def _check_dataset(self, data_source: Sized) -> None:
        from asp_cli.errors import InputError, shown_id

        rows = self.replay.frame.select("row", "prompt_id").unique("row").sort("row")
        size = len(data_source)
        top = int(rows["row"].max())
        if top >= size:
            raise InputError(
                f"the dataset has {size} rows but the schedule uses row {top}: did the trainer drop rows (verl's "
                "data.filter_overlong_prompts or data.train_max_samples, OpenRLHF's --data.max_samples)? Keep every "
                "row (filter_overlong_prompts=False, no sample limit below the file's rows) and train on the file(s) "
                "the schedule was made from"
            )
        if size > rows.height:
            _log.warning("asp: %d dataset rows are not in the schedule and will not be sampled", size - rows.height)
        frame = getattr(data_source, "dataframe", None)
        names = getattr(frame, "column_names", None) or []
        id_col = next((c for c in ("id", "prompt_id", "uid") if c in names), None)
        if id_col is None:
            return
        ids = frame[id_col]
        for row, prompt_id in zip(rows["row"].to_list(), rows["prompt_id"].to_list(), strict=True):
            if str(ids[row]) != prompt_id:
                raise InputError(
                    f"dataset row {row} has {id_col} {shown_id(ids[row])} but the schedule expects {shown_id(prompt_id)}; "
                    "train on the file(s) the schedule was made from, unfiltered, in the same order"
                )

    def _schedule_epoch(self, epoch: int) -> int:
        epochs = self.replay.epochs
        if epoch >= len(epochs):
            from asp_cli.errors import counted

            # "the schedule's 1 epoch(s)" read so: the count says its noun, and one epoch is replayed as "it"
            _log.warning("asp: pass %d is past the schedule's %s; replaying %s again", epoch,
                         counted(len(epochs), "epoch"), "it" if len(epochs) == 1 else "them")
        return epochs[epoch % len(epochs)]

    def indices(self, epoch: int) -> list[int]:
        """The dataset indices of pass ``epoch`` (0-based), in schedule order."""
        key = self._schedule_epoch(epoch)
        if key not in self._orders:
            self._orders[key] = self.replay.dataset_indices(epoch=key, workers=self.workers, chunking="legacy")
        return self._orders[key]

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass replay schedule epoch ``epoch`` (as DistributedSampler.set_epoch does; a whole number
        from 0, past the schedule's last epoch counting round again)."""
        self.epoch = _count(epoch, "epoch", 0)
        self._pass_length = None

    def __iter__(self) -> Iterator[int]:
        order = self.indices(self.epoch)
        self.epoch += 1
        self._pass_length = len(order)
        return iter(order)

    def __len__(self) -> int:
        # The pass under way, once one has started (`__iter__` already counts the next): asked after the first
        # pass began, it warned that "pass 1 is past the schedule's 1 epoch(s)" of a one-epoch run.
        started = getattr(self, "_pass_length", None)
        if started is not None:
            return started
        epochs = self.replay.epochs
        return len(self.indices(self.epoch % len(epochs)))


def _refuse_verl_without_the_hook(data_config: Any) -> None:
    """A verl data config (it has ``train_files``) on verl >= 0.8 means a run whose hook no longer exists."""
    from asp_cli.errors import SettingsError

    version = verl_version()
    if version is None or version < HOOK_VERSIONS[1] or _lookup(data_config, "train_files") is None:
        return
    raise SettingsError(
        f"verl {version[0]}.{version[1]} has no data.sampler hook (verl 0.8.0 removed it: the keys are refused or "
        "ignored, and verl shuffles), so ScheduleSampler serves only verl 0.5-0.7 and plain PyTorch DataLoaders; "
        "use data.custom_cls.path=pkg://asp_cli.integrate.verl_dataset data.custom_cls.name=ScheduleDataset, or "
        "`asp export --format verl` (docs/integrations.md)"
    )
