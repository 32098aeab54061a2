"""The verl sampler: config lookup, dataset checks, and replay through a real torch DataLoader."""

from __future__ import annotations

import re

import importlib.util
import subprocess
import sys

import pytest
from _schedules import BATCH, EPOCHS, PROMPTS, built  # noqa: F401 - fixture

from asp_cli.errors import InputError, SettingsError
from asp_cli.integrate.replay import open_schedule


class Dataset:
    """A stand-in for verl's RLHFDataset: a length, items, and optionally an HF-like dataframe."""

    def __init__(self, size: int, ids: list[str] | None = None) -> None:
        self.size = size
        if ids is not None:
            self.dataframe = _Frame({"id": ids})

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


class _Frame(dict):
    @property
    def column_names(self) -> list[str]:
        return list(self)


def test_importing_asp_does_not_import_torch():
    code = "import sys, asp_cli, asp_cli.cli.main, asp_cli.integrate.replay, asp_cli.integrate.export; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sampler_works_without_torch(built):  # noqa: F811
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['verl'] = None\n"
        "from asp_cli.integrate.sampler import ScheduleSampler\n"
        f"s = ScheduleSampler(range({PROMPTS}), {{'asp_schedule': {str(built['schedule'])!r}}})\n"
        "print(type(s).__mro__[1].__name__, len(list(s)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["object", str(PROMPTS)]


def test_each_pass_replays_the_next_epoch(built, monkeypatch):  # noqa: F811
    from asp_cli.integrate.sampler import ScheduleSampler

    replay = open_schedule(built["schedule"])
    sampler = ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(built["schedule"]), "train_batch_size": BATCH})
    assert len(sampler) == PROMPTS
    assert list(sampler) == replay.dataset_indices(epoch=0, chunking="legacy")
    assert list(sampler) == replay.dataset_indices(epoch=1, chunking="legacy")
    sampler.set_epoch(0)
    assert list(sampler) == replay.dataset_indices(epoch=0, chunking="legacy")
    assert EPOCHS == 2
    # The last epoch's pass asks its length once under way (list() does): no "past the schedule" warning then.
    import logging

    sampler.set_epoch(EPOCHS - 1)
    with monkeypatch.context():
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("asp_cli.integrate.sampler").addHandler(handler)
        try:
            assert len(list(sampler)) == PROMPTS and len(sampler) == PROMPTS
        finally:
            logging.getLogger("asp_cli.integrate.sampler").removeHandler(handler)
    assert not [r for r in records if "past the schedule" in r.getMessage()]
    # A pass past the last epoch counts round again, and says so with the epochs counted (it said "epoch(s)").
    sampler.set_epoch(EPOCHS)
    logging.getLogger("asp_cli.integrate.sampler").addHandler(handler)
    try:
        assert list(sampler) == replay.dataset_indices(epoch=0, chunking="legacy")
    finally:
        logging.getLogger("asp_cli.integrate.sampler").removeHandler(handler)
    assert [r.getMessage() for r in records if "past the schedule" in r.getMessage()] == [
        "asp: pass 2 is past the schedule's 2 epochs; replaying them again"]


def test_settings_from_nested_key_and_environment(built, monkeypatch):  # noqa: F811
    from asp_cli.integrate.sampler import ScheduleSampler

    nested = ScheduleSampler(Dataset(PROMPTS), {"sampler": {"asp_schedule": str(built["schedule"]), "asp_workers": 2,
                                                            "asp_first_epoch": 1}})
    assert nested.workers == 2 and nested.epoch == 1
    monkeypatch.setenv("ASP_SCHEDULE", str(built["schedule"]))
    from_env = ScheduleSampler(Dataset(PROMPTS), {})
    assert list(from_env) == open_schedule(built["schedule"]).dataset_indices(epoch=0, chunking="legacy")


def test_missing_schedule_and_wrong_batch_size(built, monkeypatch):  # noqa: F811
    from asp_cli.integrate.sampler import ScheduleSampler

    monkeypatch.delenv("ASP_SCHEDULE", raising=False)
    with pytest.raises(SettingsError, match="asp_schedule"):
        ScheduleSampler(Dataset(PROMPTS), {})
    with pytest.raises(SettingsError, match="train_batch_size=7"):
        ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(built["schedule"]), "train_batch_size": 7})
    # Checked when built, not on the first batch; a typo is no silent default (a Python user's asp_wrokers).
    schedule = str(built["schedule"])
    for key, value, said in (("asp_workers", 0, "asp_workers must be a whole number of at least 1 (got 0)"),
                             ("asp_first_epoch", -1, "asp_first_epoch must be a whole number of at least 0"),
                             ("asp_workers", "two", "asp_workers must be a whole number of at least 1 (got 'two')"),
                             ("asp_wrokers", 2, "unknown key asp_wrokers for ScheduleSampler")):
        with pytest.raises(SettingsError, match=re.escape(said)):
            ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": schedule, key: value})
    assert ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": schedule, "asp_workers": "2",
                                              "asp_route": "length"}).workers == 2


def test_a_python_user_s_schedule_dataset_and_counts(built, monkeypatch):  # noqa: F811
    """A library newcomer's round: `schedule=` a schedule kept in memory was a TypeError from os.fspath; the path
    passed as the config (`ScheduleSampler(dataset, "s.parquet")`) was told to set verl's +data.asp_schedule;
    `asp_workers` of np.int64(2) was "must be a whole number of at least 1"; a train_batch_size of "abc", a
    set_epoch("x") and a dataset of None were ValueErrors and a TypeError from inside."""
    import numpy as np

    from asp_cli import read_schedule
    from asp_cli.integrate.sampler import ScheduleSampler

    monkeypatch.delenv("ASP_SCHEDULE", raising=False)
    path = built["schedule"]
    expected = open_schedule(path).dataset_indices(epoch=0, chunking="legacy")
    assert list(ScheduleSampler(Dataset(PROMPTS), schedule=read_schedule(path))) == expected
    with pytest.raises(SettingsError, match=re.escape(
            "data_config is a data config (a mapping, such as verl's config.data or {'asp_schedule': path}), not "
            "the schedule: pass ScheduleSampler(dataset, schedule=")):
        ScheduleSampler(Dataset(PROMPTS), str(path))
    counted = ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(path), "asp_workers": np.int64(2),
                                                 "train_batch_size": np.int64(BATCH), "asp_first_epoch": np.int32(1)})
    assert (counted.workers, counted.epoch) == (2, 1) and type(counted.workers) is int
    with pytest.raises(SettingsError, match=re.escape("train_batch_size must be a whole number of at least 1 (got "
                                                      "'abc')")):
        ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(path), "train_batch_size": "abc"})
    with pytest.raises(SettingsError, match=re.escape("epoch must be a whole number of at least 0 (got 'x')")):
        counted.set_epoch("x")
    counted.set_epoch(np.int64(0))
    assert list(counted) == open_schedule(path).dataset_indices(epoch=0, workers=2, chunking="legacy")
    with pytest.raises(SettingsError, match=re.escape("data_source must be the dataset (anything with a length, "
                                                      "e.g. verl's RLHFDataset or a list of rows), not None")):
        ScheduleSampler(None, {"asp_schedule": str(path)})


def test_a_filtered_or_different_dataset_is_refused(built):  # noqa: F811
    from asp_cli.integrate.sampler import ScheduleSampler

    config = {"asp_schedule": str(built["schedule"])}
    with pytest.raises(InputError, match=r"filter_overlong_prompts or data.train_max_samples, OpenRLHF.s --data.max_samples"):
        ScheduleSampler(Dataset(PROMPTS - 10), config)
    ids = [f"p{i}" for i in range(PROMPTS)]
    ScheduleSampler(Dataset(PROMPTS, ids), config)
    ids[5] = "other"
    with pytest.raises(InputError, match="'p5'"):
        ScheduleSampler(Dataset(PROMPTS, ids), config)


def test_real_dataloader_reads_schedule_batches(built):  # noqa: F811
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install '.[torch]' (the [torch] extra)")
    from torch.utils.data import DataLoader, Sampler

    from asp_cli.integrate.sampler import ScheduleSampler

    replay = open_schedule(built["schedule"])
    sampler = ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(built["schedule"]), "train_batch_size": BATCH})
    assert isinstance(sampler, Sampler)
    loader = DataLoader(Dataset(PROMPTS), batch_size=BATCH, sampler=sampler, drop_last=True, num_workers=0)
    assert len(loader) == PROMPTS // BATCH
    for epoch in range(EPOCHS):
        batches = [b.tolist() for b in loader]
        expected = replay.dataset_indices(epoch=epoch, chunking="legacy")
        assert len(batches) == PROMPTS // BATCH
        assert [i for b in batches for i in b] == expected[: len(batches) * BATCH]
        assert all(isinstance(b, list) and len(b) == BATCH for b in batches)
    assert torch.__version__


def test_loading_by_file_path_as_verl_does(built):  # noqa: F811
    pytest.importorskip("torch", reason="torch is not installed: pip install '.[torch]' (the [torch] extra)")
    import asp_cli.integrate.sampler as module

    spec = importlib.util.spec_from_file_location("custom_module", module.__file__)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    sampler = loaded.ScheduleSampler(data_source=Dataset(PROMPTS), data_config={"asp_schedule": str(built["schedule"])})
    assert len(list(sampler)) == PROMPTS


def test_verl_without_the_hook_is_refused_plain_loaders_are_not(built, monkeypatch):  # noqa: F811
    """verl 0.8 removed data.sampler.class_path: a verl config there means a run that would silently shuffle."""
    import asp_cli.integrate.sampler as module

    config = {"asp_schedule": str(built["schedule"]), "train_files": "train.parquet"}
    monkeypatch.setattr(module, "verl_version", lambda: (0, 9))
    with pytest.raises(SettingsError, match=r"verl 0\.9 has no data\.sampler hook .*verl_dataset"):
        module.ScheduleSampler(Dataset(PROMPTS), config)
    plain = module.ScheduleSampler(Dataset(PROMPTS), {"asp_schedule": str(built["schedule"])})
    assert len(list(plain)) == PROMPTS
    monkeypatch.setattr(module, "verl_version", lambda: (0, 7))
    assert len(list(module.ScheduleSampler(Dataset(PROMPTS), config))) == PROMPTS
    monkeypatch.setattr(module, "verl_version", lambda: None)
    assert len(list(module.ScheduleSampler(Dataset(PROMPTS), config))) == PROMPTS


def test_the_verl_dataset_class_without_verl_says_it_needs_verl():
    """asp_cli.integrate.verl_dataset subclasses verl's dataset: imported where verl is not installed, one message
    names what it is and the install, not a bare missing module (a newcomer round, 2026-12-05)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['verl'] = None\n"  # verl absent, even where the verl stage installed it
            "try:\n    import asp_cli.integrate.verl_dataset\n"
            "except ModuleNotFoundError as exc:\n    print(exc)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("asp_cli.integrate.verl_dataset is a dataset class for verl (data.custom_cls) and "
                                 "needs verl installed (pip install verl==0.9.1")


def test_a_schedule_for_openrlhfs_deal_is_sampled_in_its_own_order(tmp_path):
    """An OpenRLHF newcomer's round: the sampler laid each batch out for verl's contiguous chunks, which put 3,479 of
    4,000 prompts on other engines than planned under OpenRLHF's deal; a schedule made for it (`--router
    group-round-robin`) is sampled as `asp export --order train` writes it, each step's rows in seq order."""
    from asp_cli import ScheduleSettings, schedule
    from asp_cli.integrate.sampler import ScheduleSampler

    from util import make_prompts, write_jsonl

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(60))
    settings = ScheduleSettings(engine="streaming", router="group-round-robin", max_lag=0, trainer="schedule",
                                instances=3, samples_per_prompt=4, train_batch_size=12)
    made = schedule([prompts], tmp_path / "s.parquet", settings=settings)
    sampler = ScheduleSampler(Dataset(60), {"asp_schedule": str(made.output), "train_batch_size": 12})
    frame = open_schedule(made.output).frame.sort("train_step", "seq")
    assert sampler.workers == 1 and list(sampler) == frame["row"].to_list()
    # each position's engine under the deal is the schedule's instance
    assert [i % 12 % 3 for i in range(60)] == frame["instance"].to_list()


def test_asp_workers_on_a_schedule_for_openrlhfs_deal_is_warned_about(tmp_path, caplog):
    """asp_workers above 1 lays each batch out for that many chunks where OpenRLHF deals the batch whole in the
    sampler's order: rows then reach other engines than the schedule's instance, which `asp export --workers` warns
    of and the sampler took in silence."""
    import logging

    from asp_cli import ScheduleSettings, schedule
    from asp_cli.integrate.sampler import ScheduleSampler

    from util import make_prompts, write_jsonl

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(60))
    settings = ScheduleSettings(engine="streaming", router="group-round-robin", max_lag=0, trainer="schedule",
                                instances=3, samples_per_prompt=4, train_batch_size=12)
    made = schedule([prompts], tmp_path / "s.parquet", settings=settings)
    with caplog.at_level(logging.WARNING, logger="asp_cli.integrate.sampler"):
        ScheduleSampler(Dataset(60), {"asp_schedule": str(made.output), "asp_workers": 3})
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("asp: asp_workers=3 lays each batch out for 3 contiguous chunks, but the schedule was made "
                            "with --router group-round-robin") and m.endswith("leave asp_workers out (one chunk a batch)")
               for m in said), said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="asp_cli.integrate.sampler"):
        ScheduleSampler(Dataset(60), {"asp_schedule": str(made.output)})
    assert not caplog.records


def test_the_documented_rank_shard_gives_each_process_its_share_of_every_step(built):  # noqa: F811
    """ScheduleSampler reads no rank (every process gets every index); docs/integrations.md's RankShard recipe,
    run as written with torch's DataLoader: the ranks' k-th batches together are the schedule's step k."""
    pytest.importorskip("torch", reason="torch is not installed: pip install '.[torch]' (the [torch] extra)")
    from util import REPO

    from asp_cli.integrate.sampler import ScheduleSampler

    doc = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = doc.split("### ScheduleSampler in several processes", 1)[1]
    recipe = section.split("```python\n", 1)[1].split("```", 1)[0]
    space: dict = {}
    exec(compile(recipe, "docs/integrations.md", "exec"), space)  # noqa: S102 - the doc's own recipe
    alone = list(ScheduleSampler(Dataset(PROMPTS), schedule=built["schedule"]))
    assert sorted(alone) == list(range(PROMPTS))  # unsharded: the whole epoch, whatever the process's rank
    steps = PROMPTS // BATCH  # 7 whole train batches; the partial 8th is left out on every rank
    for world in (2, 4):
        loaders = [space["rank_loader"](Dataset(PROMPTS), built["schedule"], BATCH, rank, world) for rank in range(world)]
        assert all(len(loader) == steps for loader in loaders)
        for epoch in range(EPOCHS):
            expected = ScheduleSampler(Dataset(PROMPTS), schedule=built["schedule"]).indices(epoch)
            per_rank = [[b.tolist() for b in loader] for loader in loaders]
            assert all(len(batches) == steps for batches in per_rank)
            for k in range(steps):
                step = expected[k * BATCH:(k + 1) * BATCH]
                assert [batches[k] for batches in per_rank] == [step[rank::world] for rank in range(world)]
    with pytest.raises(ValueError, match="does not split over 3 processes"):
        space["rank_loader"](Dataset(PROMPTS), built["schedule"], BATCH, 0, 3)
