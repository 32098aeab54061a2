"""asp's verl integration against the real verl 0.9.1 (.ci/verl.sh runs it in an environment of its own).

verl's side is verl's own code: its packaged Hydra config; ``PPOTrainer._init_dataloader`` (``create_rl_dataset``,
``create_rl_sampler``, ``StatefulDataLoader``, ``collate_fn``); ``TensorDict.chunk`` and ``DataProto.chunk``; both
trainers' dump writers; and, on a local Ray cluster with TransferQueue, the v1 trainer's path from the dataloader
to the replay buffer and the dump (``prepare_step``, ``AgentLoopManagerTQ.generate_sequences``, the agent-loop
worker actors, ``_build_replay_buffer``, ``_log_rollout_data``); and the rollout router's plug-in loader
(``get_router_handle``) with ``LLMServerClient``'s acquire call. Stand-ins, and only these: the tokenizer (a
byte-level BPE trained here, so nothing is downloaded), the LLM call inside the agent-loop worker
(``_run_agent_loop``), and the model workers (trainer objects are made without ``__init__``, which would start
them; nothing is trained).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.verl
verl = pytest.importorskip("verl", reason="verl is not installed; .ci/verl.sh builds an environment with verl 0.9.1")
if verl.__version__ != "0.9.1":
    pytest.skip(f"these tests pin verl 0.9.1 (found {verl.__version__}); run .ci/verl.sh", allow_module_level=True)

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from asp_cli import export, observe  # noqa: E402
from asp_cli.errors import InputError, SettingsError  # noqa: E402
from asp_cli.integrate.observe import OBSERVE_READ  # noqa: E402
from asp_cli.integrate.replay import chunk_capacities, open_schedule  # noqa: E402

from verl_common import (  # noqa: E402
    BATCH, EPOCHS, SAMPLES, answer, build_tokenizer, column, compose, fake_rollout, make_schedule, write_dataset,
)

ROWS = 40
DATASET_CLS = ["data.custom_cls.path=pkg://asp_cli.integrate.verl_dataset", "data.custom_cls.name=ScheduleDataset"]
SAMPLER_CLS = ["trainer.v1.sampler.custom_sampler.path=pkg://asp_cli.integrate.verl_sampler",
               "trainer.v1.sampler.custom_sampler.name=ScheduleReplayBuffer"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("verl")


@pytest.fixture(scope="module")
def tokenizer(work):
    return build_tokenizer(work, ROWS)


@pytest.fixture(scope="module")
def data(work):
    train = write_dataset(work / "train.parquet", ROWS)
    val = write_dataset(work / "val.parquet", 6, "test")
    out = make_schedule(train, work / "schedule.parquet")
    exported = work / "ordered.parquet"
    settings = export(out, [train], exported, format="verl").trainer_settings
    return {"train": train, "val": val, "schedule": out, "exported": exported, "replay": open_schedule(out),
            "settings": [f"{key}={value}" for key, value in settings.items()]}


def trainer(config, tokenizer, cls=None):
    """A v1 trainer with its dataloaders built by verl's own `_init_dataloader` (no model workers)."""
    from verl.trainer.ppo.v1 import PPOTrainerSync

    tr = (cls or PPOTrainerSync).__new__(cls or PPOTrainerSync)
    tr.config, tr.trainer_mode, tr.parameter_sync_step = config, config.trainer.v1.trainer_mode, 1
    tr.tokenizer, tr.processor, tr.global_steps = tokenizer, None, 0
    tr._init_dataloader()
    return tr


# --------------------------------------------------------------------------------------------------------
# Chunking: asp's rules against verl's own chunk functions


def test_v1_chunking_is_tensordict_chunk_of_the_prompts(work, data, tokenizer):
    """verl's v1 trainer cuts the prompt batch with TensorDict.chunk (agent_loop_tq.py:246); asp's v1 rule is it."""
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    tr = trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}",
                                "data.shuffle=False"]), tokenizer)
    items = [tr.train_dataset[i % ROWS] for i in range(64)]
    for prompts in range(1, 65):
        batch = tu.get_tensordict(collate_fn(items[:prompts]))
        for workers in range(1, 12):
            sizes = [len(chunk) for chunk in batch.chunk(workers)]
            expected = chunk_capacities(prompts, SAMPLES, workers).tolist()
            assert sizes + [0] * (workers - len(sizes)) == expected, (prompts, workers)


def test_legacy_chunking_is_dataproto_chunk_of_the_repeated_batch(work, data, tokenizer):
    """verl's legacy trainer repeats the batch n times, interleaved, and cuts it with DataProto.chunk."""
    import torch
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    tr = trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}",
                                "data.shuffle=False"]), tokenizer)
    for prompts in (4, 6, 12, 16):
        proto = DataProto.from_single_dict(collate_fn([tr.train_dataset[i] for i in range(prompts)]))
        repeated = proto.repeat(repeat_times=SAMPLES, interleave=True)
        repeated.batch["row"] = torch.arange(prompts * SAMPLES)
        for workers in range(1, 9):
            if prompts * SAMPLES % workers:
                with pytest.raises(AssertionError):
                    repeated.chunk(workers)
                continue
            firsts = [int((chunk.batch["row"] % SAMPLES == 0).sum()) for chunk in repeated.chunk(workers)]
            assert firsts == chunk_capacities(prompts, SAMPLES, workers, rule="legacy").tolist(), (prompts, workers)


# --------------------------------------------------------------------------------------------------------
# Order: the exported file and the dataset class, through verl's own dataloader


def test_exported_file_gives_the_schedules_steps_in_order(work, data, tokenizer):
    """asp export --format verl with the settings it prints: batch b holds exactly schedule step b, laid out for
    verl's 8 agent-loop workers, and verl plans one epoch of exactly the schedule's steps."""
    replay = data["replay"]
    cap = replay.schedule.recorded_settings.max_response_tokens
    assert data["settings"] == ["data.shuffle=False", f"data.train_batch_size={BATCH}",
                                "data.filter_overlong_prompts=False", f"actor_rollout_ref.rollout.n={SAMPLES}",
                                f"data.max_response_length={cap}",
                                "actor_rollout_ref.rollout.agent.num_workers=8", "trainer.total_epochs=1",
                                f"actor_rollout_ref.actor.ppo_mini_batch_size={BATCH}"]  # below verl's 256
    config = compose(work, [f"data.train_files={data['exported']}", f"data.val_files={data['val']}", *data["settings"]])
    # The response cap the schedule planned with reaches the rollout (rollout.response_length follows it).
    assert config.data.max_response_length == cap == config.actor_rollout_ref.rollout.response_length
    tr = trainer(config, tokenizer)
    assert type(tr.train_dataset).__name__ == "RLHFDataset"
    expected = replay.trainer_order(workers=8)["seq"].to_list()
    batches = list(tr.train_dataloader)
    assert len(batches) == ROWS * EPOCHS // BATCH == tr.total_training_steps
    for step, batch in enumerate(batches):
        assert column(batch, "seq") == expected[step * BATCH:(step + 1) * BATCH]
        assert set(column(batch, "train_step")) == {step}
    # verl's default (data.shuffle=True) would not keep it: the check above can fail.
    shuffled = trainer(compose(work, [f"data.train_files={data['exported']}", f"data.val_files={data['val']}"]),
                       tokenizer)
    assert [s for b in shuffled.train_dataloader for s in column(b, "seq")] != expected


def test_a_run_made_one_verl_run_per_epoch_continues_where_the_last_one_stopped(work, data, tokenizer):
    """`asp export --epoch E` for a run made one verl run per epoch (each epoch's schedule made with the lengths of
    the ones before): a newcomer's second run, with trainer.total_epochs=1 and the first run's checkpoint, trained no
    step (verl counts its epoch as global_steps // steps per epoch). With the printed settings, verl's own trainer
    fetches epoch E's file whole, step for step (`_fetch_one_gen_batch`, as fit() does), whether or not the
    checkpoint's dataloader position (data.pt) is restored, counts the run before it as its first E epochs, keeps
    the learning-rate horizon of the whole run, and saves where the next run resumes. (fit()'s loop needs model
    workers; its conditions are checked on the trainer verl builds, as trainer_base.py:450-467, 481-482 and 522
    state them.)"""
    replay = data["replay"]
    steps = ROWS // BATCH
    expected = replay.trainer_order(workers=8)["seq"].to_list()
    saved = None  # the dataloader position the last run's checkpoint holds (its data.pt)
    for epoch in range(EPOCHS):
        out = work / f"epoch{epoch}.parquet"
        result = export(data["schedule"], [data["train"]], out, format="verl", epoch=epoch)
        settings = [f"{key}={value}" for key, value in result.trainer_settings.items()]
        config = compose(work, [f"data.train_files={out}", f"data.val_files={data['val']}", *settings])
        start = epoch * steps  # the global step the run resumes at (the checkpoint global_step_{start})
        for restore in ([False, True] if saved is not None else [False]):
            tr = trainer(config, tokenizer)
            if restore:
                tr.train_dataloader.load_state_dict(saved)
            assert tr.steps_per_epoch == steps and tr.total_training_steps == EPOCHS * steps  # one horizon for all
            assert start // tr.steps_per_epoch == epoch < config.trainer.total_epochs  # fit() trains
            assert (start + steps) // tr.steps_per_epoch == config.trainer.total_epochs  # and stops after its epoch
            assert (start + steps) % config.trainer.save_freq == 0  # on a checkpoint the next run resumes
            fetched = [int(s) for _ in range(steps) for s in tr._fetch_one_gen_batch()["seq"]]
            assert fetched == expected[start * BATCH:(start + steps) * BATCH]
        saved = tr.train_dataloader.state_dict()
        assert any("global_step_" in note for note in result.warnings) == (epoch > 0)


def fully_async_rollouter(work: Path, overrides: list[str], tokenizer):
    """verl 0.9.1's fully asynchronous rollouter (the class under its Ray actor) built from its own packaged config
    with ``overrides``: its constructor checks the data settings and builds the dataloader it reads prompts from."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from verl.experimental.fully_async_policy.fully_async_rollouter import FullyAsyncRollouter

    GlobalHydra.instance().clear()
    folder = Path(verl.__file__).parent / "experimental" / "fully_async_policy" / "config"
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        config = hydra_compose(config_name="fully_async_ppo_trainer", overrides=[
            "data.dataloader_num_workers=0", f"+data.cache_dir={work / 'cache'}", *overrides])
    return FullyAsyncRollouter.__ray_actor_class__(config, tokenizer), config


def test_fully_async_trainer_reads_the_export_in_dispatch_order(work, data, tokenizer):
    """A schedule for an asynchronous trainer on servers (streaming, lag 2, groups in arrival order) exports, by
    default, for verl's fully asynchronous trainer: its rollouter accepts the printed settings, reads every row one
    prompt at a time in the schedule's seq order, and syncs weights once per schedule train batch; the default
    trainer's settings, printed before 2026-12-05, stop it at once (a newcomer's run)."""
    from asp_cli import ScheduleSettings, schedule

    out = schedule([data["train"]], work / "async.parquet", settings=ScheduleSettings(
        instances=2, samples_per_prompt=SAMPLES, epochs=EPOCHS, train_batch_size=BATCH, minibatch_size=4,
        max_response_tokens=256, engine="streaming", max_lag=2)).output
    result = export(out, [data["train"]], work / "async-ordered.parquet", format="verl")
    assert result.order == "dispatch" and result.summary["verl_trainer"] == "fully-async"
    settings = [f"{key}={value}" for key, value in result.trainer_settings.items()]
    files = [f"data.train_files={work / 'async-ordered.parquet'}", f"data.val_files={data['val']}"]
    rollouter, config = fully_async_rollouter(work, [*files, *settings], tokenizer)
    rows = ROWS * EPOCHS
    assert rollouter.total_rollout_steps == rows == len(rollouter.train_dataloader)
    assert [column(b, "seq")[0] for b in rollouter.train_dataloader] == list(range(rows))
    # The prompts between two weight syncs are the schedule's train batch; the lag bound is its staleness.
    assert rollouter.required_samples * config.async_training.trigger_parameter_sync_step == BATCH
    assert rollouter.staleness_threshold == 2
    ppo = export(out, [data["train"]], work / "async-ppo.parquet", format="verl", verl_trainer="ppo").trainer_settings
    files[0] = f"data.train_files={work / 'async-ppo.parquet'}"
    with pytest.raises(AssertionError, match="train_batch_size must be zero"):
        fully_async_rollouter(work, [*files, *[f"{k}={v}" for k, v in ppo.items()],
                                     "actor_rollout_ref.hybrid_engine=False"], tokenizer)


def test_the_fully_async_defaults_are_the_ones_the_docs_and_the_export_name():
    """verl 0.9.1's fully_async_ppo_trainer.yaml as shipped: the staleness, sync, limit and stop the export sets."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from asp_cli.integrate.verl_fully_async import VERL_PROMPTS_PER_SERVER, VERL_SYNC_STEPS

    GlobalHydra.instance().clear()
    folder = Path(verl.__file__).parent / "experimental" / "fully_async_policy" / "config"
    with initialize_config_dir(config_dir=str(folder), version_base=None):
        config = hydra_compose(config_name="fully_async_ppo_trainer")
    assert config.async_training.staleness_threshold == 0.1
    assert config.async_training.trigger_parameter_sync_step == VERL_SYNC_STEPS
    assert config.async_training.require_batches == 1
    assert config.async_training.concurrent_samples_per_replica == VERL_PROMPTS_PER_SERVER
    assert config.rollout.total_rollout_steps == 100 and config.data.gen_batch_size == 1
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size == 256


def test_verls_default_prompt_limit_is_the_one_export_names(work, data, tokenizer):
    """`asp export` tells the user to raise data.max_prompt_length past verl's default when a prompt is longer: that
    default is verl's own, and the rollout's prompt limit (past which the agent loop cuts a prompt's start) follows it."""
    from asp_cli.integrate.export import VERL_DEFAULT_MAX_PROMPT_TOKENS

    config = compose(work, [f"data.train_files={data['exported']}", f"data.val_files={data['val']}"])
    assert config.data.max_prompt_length == VERL_DEFAULT_MAX_PROMPT_TOKENS
    assert config.actor_rollout_ref.rollout.prompt_length == VERL_DEFAULT_MAX_PROMPT_TOKENS


def test_verls_default_mini_batch_is_the_one_export_names(work, data):
    """`asp export` says verl refuses a train batch below its default actor.ppo_mini_batch_size: that default is
    verl's own."""
    from asp_cli.integrate.verl_ppo import VERL_DEFAULT_PPO_MINI_BATCH

    config = compose(work, [f"data.train_files={data['exported']}", f"data.val_files={data['val']}"])
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size == VERL_DEFAULT_PPO_MINI_BATCH


def test_the_printed_settings_pass_verls_config_check(work, data):
    """verl 0.9.1's `validate_config` on main_ppo's config with the settings `asp export` prints (a train batch of
    BATCH, below verl's default mini batch of 256): it refused them with the mini batch left out of the settings."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = compose(work, [f"data.train_files={data['exported']}", f"data.val_files={data['val']}", *data["settings"],
                            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
                            "critic.ppo_micro_batch_size_per_gpu=1", "algorithm.adv_estimator=grpo"])
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size == BATCH
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def test_the_printed_separate_async_settings_pass_its_startup_checks(work, data, monkeypatch):
    """verl 0.9.1's separate_async trainer asserts data.train_batch_size == parameter_sync_step x
    actor.ppo_mini_batch_size before anything else; the printed settings pass its checks (those on the cluster,
    which the export's note names, set here as a user would), up to the base trainer's start, which needs GPUs."""
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync

    result = export(data["schedule"], [data["train"]], work / "separate.parquet", format="verl",
                    verl_trainer="separate-async")
    settings = [f"{key}={value}" for key, value in result.trainer_settings.items()]
    config = compose(work, [f"data.train_files={work / 'separate.parquet'}", f"data.val_files={data['val']}",
                            *settings, "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=1",
                            "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"])
    assert config.trainer.v1.trainer_mode == "separate_async"

    class Reached(Exception):
        pass

    def start(self, config):
        raise Reached

    monkeypatch.setattr(trainer_base.PPOTrainer, "__init__", start)
    with pytest.raises(Reached):
        PPOTrainerSeparateAsync(config)
    monkeypatch.undo()
    wrong = compose(work, [f"data.train_files={work / 'separate.parquet'}", f"data.val_files={data['val']}",
                           *data["settings"], "trainer.v1.trainer_mode=separate_async"])
    with pytest.raises(AssertionError, match="train_batch_size must equal parameter_sync_step"):
        PPOTrainerSeparateAsync(wrong)  # the synchronous settings: the check the test relies on is verl's


def test_schedule_dataset_reorders_the_original_file(work, data, tokenizer):
    """data.custom_cls ScheduleDataset on the unexported file: the same batches, asp's columns on every row."""
    replay = data["replay"]
    base = [f"data.train_files={data['train']}", f"data.val_files={data['val']}", "data.shuffle=False", *DATASET_CLS,
            f"+data.asp_schedule={data['schedule']}"]
    tr = trainer(compose(work, base), tokenizer)
    assert type(tr.train_dataset).__name__ == "ScheduleDataset" and len(tr.train_dataset) == ROWS * EPOCHS
    assert tr.train_dataset.asp_settings["workers"] == 8 and tr.train_dataset.asp_settings["chunking"] == "v1"
    order = replay.trainer_order(workers=8)
    batches = list(tr.train_dataloader)
    assert [s for b in batches for s in column(b, "seq")] == order["seq"].to_list()
    assert [i for b in batches for i in column(b, "index")] == order["row"].to_list()
    assert all(set(column(b, "train_step")) == {step} for step, b in enumerate(batches))
    # The validation file is read as it is.
    assert tr.val_dataset.asp_rows is None and len(tr.val_dataset) == 6
    # Resuming mid-epoch from the StatefulDataLoader's state continues where it stopped.
    it = iter(tr.train_dataloader)
    next(it), next(it)
    state = tr.train_dataloader.state_dict()
    again = trainer(compose(work, base), tokenizer)
    again.train_dataloader.load_state_dict(state)
    assert column(next(iter(again.train_dataloader)), "seq") == column(batches[2], "seq")
    # The worker count and the cut follow the trainer's own settings.
    legacy = trainer(compose(work, [*base, "actor_rollout_ref.rollout.agent.num_workers=3", "trainer.use_v1=False"]),
                     tokenizer)
    assert legacy.train_dataset.asp_settings["chunking"] == "legacy"
    assert legacy.train_dataset.asp_rows == replay.trainer_order(workers=3, chunking="legacy")["row"].to_list()
    dispatch = trainer(compose(work, [*base, "+data.asp_order=dispatch", "+data.asp_epoch=1"]), tokenizer)
    assert dispatch.train_dataset.asp_rows == replay.rows(epoch=1)["row"].to_list()


def test_the_legacy_trainers_dataloader_reads_both_in_order(work, data, tokenizer):
    """trainer.use_v1=False: verl 0.9.1's RayPPOTrainer._create_dataloader reads the exported file (made with
    --verl-version 0.7) and ScheduleDataset (which follows use_v1) in the schedule's order, cut the legacy way."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    replay = data["replay"]
    expected = replay.trainer_order(workers=8, chunking="legacy")
    exported = work / "ordered-legacy.parquet"
    export(data["schedule"], [data["train"]], exported, format="verl", verl_version="0.7")
    for train, extra in ((exported, []), (data["train"], [*DATASET_CLS, f"+data.asp_schedule={data['schedule']}"])):
        tr = RayPPOTrainer.__new__(RayPPOTrainer)
        tr.config = compose(work, [f"data.train_files={train}", f"data.val_files={data['val']}", "data.shuffle=False",
                                   "trainer.use_v1=False", *extra])
        tr.tokenizer, tr.processor = tokenizer, None
        tr._create_dataloader(None, None, None, None)  # ray_trainer.py:374
        assert [s for b in tr.train_dataloader for s in column(b, "seq")] == expected["seq"].to_list()


def test_the_legacy_trainers_batches_carry_the_planned_instance(work, data, tokenizer):
    """trainer.use_v1=False with +data.asp_route=planned, and a file exported with --route planned: every batch of
    verl's legacy dataloader holds each row's priority, and it survives verl's DataProto and the n-fold repeat the trainer makes before generate_sequences
    (whose default priorities, agent_loop.py:1245, it then replaces)."""
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from asp_cli.integrate.verl_router import decode_instance

    exported = work / "ordered-routed.parquet"
    export(data["schedule"], [data["train"]], exported, format="verl", verl_version="0.7", route="planned")
    planned = {(r["epoch"], r["seq"]): r["instance"] for r in data["replay"].rows().iter_rows(named=True)}
    for train, extra in ((data["train"], [*DATASET_CLS, f"+data.asp_schedule={data['schedule']}",
                                          "+data.asp_route=planned"]), (exported, [])):
        tr = RayPPOTrainer.__new__(RayPPOTrainer)
        tr.config = compose(work, [f"data.train_files={train}", f"data.val_files={data['val']}",
                                   "data.shuffle=False", "trainer.use_v1=False", *extra])
        tr.tokenizer, tr.processor = tokenizer, None
        tr._create_dataloader(None, None, None, None)
        rows = 0
        for batch in tr.train_dataloader:
            keys = list(zip(column(batch, "epoch"), column(batch, "seq")))
            assert [decode_instance(p) for p in column(batch, "priority")] == [planned[k] for k in keys]
            repeated = DataProto.from_single_dict(batch).repeat(repeat_times=SAMPLES, interleave=True)
            assert [int(p) for p in repeated.non_tensor_batch["priority"]] == [
                int(p) for p in column(batch, "priority") for _ in range(SAMPLES)]
            rows += len(keys)
        assert rows == data["replay"].rows().height, train


@pytest.mark.parametrize("extra, error, words", [
    (["data.shuffle=True"], SettingsError, "data.shuffle=False"),
    (["data.train_batch_size=8"], SettingsError, "--train-batch-size 4"),
    (["data.filter_overlong_prompts=True", "data.max_prompt_length=16"], InputError, "filter_overlong_prompts"),
    (["+data.asp_order=random"], SettingsError, "data.asp_order"),
])
def test_schedule_dataset_refuses_what_would_break_the_order(work, data, tokenizer, extra, error, words):
    config = compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}", "data.shuffle=False",
                            *DATASET_CLS, f"+data.asp_schedule={data['schedule']}", *extra])
    with pytest.raises(error, match=words):
        trainer(config, tokenizer)


def test_schedule_dataset_refuses_another_file(work, data, tokenizer):
    other = write_dataset(work / "other.parquet", ROWS - 5)
    config = compose(work, [f"data.train_files={other}", f"data.val_files={data['val']}", "data.shuffle=False",
                            *DATASET_CLS, f"+data.asp_schedule={data['schedule']}"])
    with pytest.raises(InputError, match="prompt id"):
        trainer(config, tokenizer)


def test_the_old_sampler_hook_is_dead_and_the_old_sampler_says_so(work, data, tokenizer):
    """verl 0.9.1 ignores +data.sampler.*; asp's 0.5-0.7 sampler refuses a verl config instead of pretending."""
    from torch.utils.data import SequentialSampler

    from asp_cli.integrate.sampler import ScheduleSampler

    config = compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}", "data.shuffle=False",
                            "+data.sampler.class_path=pkg://asp_cli.integrate.sampler",
                            "+data.sampler.class_name=ScheduleSampler", f"+data.asp_schedule={data['schedule']}"])
    tr = trainer(config, tokenizer)
    assert isinstance(tr.train_dataloader.sampler, SequentialSampler)
    with pytest.raises(SettingsError, match="verl 0.9 has no data.sampler hook"):
        ScheduleSampler(tr.train_dataset, config.data)


# --------------------------------------------------------------------------------------------------------
# Dumps: both trainers' writers, read back by asp observe


def test_both_trainers_dumps_are_read_by_observe(work, data, tokenizer):
    import uuid

    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    tr = trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}",
                                "data.shuffle=False"]), tokenizer)
    batch = DataProto.from_single_dict(next(iter(tr.train_dataloader)))
    indices = [int(i) for i in batch.non_tensor_batch["index"]]
    batch = batch.repeat(repeat_times=SAMPLES, interleave=True)
    prompts, responses, mask, scores, lengths = fake_rollout(tokenizer, indices)
    batch.batch["prompts"], batch.batch["responses"] = prompts, responses
    batch.batch["attention_mask"], batch.batch["token_level_scores"] = mask, scores

    legacy = RayPPOTrainer.__new__(RayPPOTrainer)
    legacy.tokenizer, legacy.global_steps = tokenizer, 1
    legacy._init_dump_executor()
    legacy._log_rollout_data(batch, {"acc": scores.sum(-1).numpy()}, {}, str(work / "legacy"))  # ray_trainer.py:514
    legacy._shutdown_dump_executor()
    # The v1 writer, given what its _log_rollout_data passes (the TransferQueue test below runs that for real).
    keys = [f"{uuid.uuid4()}_{s}_0" for _ in indices for s in range(SAMPLES)]
    PPOTrainer._write_generations(
        inputs=[tokenizer.decode(p, skip_special_tokens=True) for p in prompts],
        outputs=[tokenizer.decode(r, skip_special_tokens=True) for r in responses],
        gts=[str(2 * i) for i in indices for _ in range(SAMPLES)], scores=scores.sum(-1).tolist(),
        reward_extra_infos_dict={"uid": keys}, dump_path=str(work / "v1"), global_steps=1)

    first = json.loads((work / "v1" / "1.jsonl").read_text().splitlines()[0])
    assert sorted(first) == ["gts", "input", "output", "score", "step", "uid"]
    assert "acc" in json.loads((work / "legacy" / "1.jsonl").read_text().splitlines()[0])
    read = replace(OBSERVE_READ, tokenizer=work / "tokenizer.json")
    expected_ids = [str(i) for i in indices for _ in range(SAMPLES)]
    for kind in ("legacy", "v1"):
        result = observe([work / kind / "1.jsonl"], None, dataset=[data["train"]], read=read)
        assert result.summary["log_formats"] == {f"verl_{kind}_dump": 1}
        assert result.summary["bad_rows"] == 0
        assert result.added["prompt_id"].to_list() == expected_ids
        # verl drops the EOS token when it decodes: asp's count is exactly one short, and says so.
        assert result.added["response_tokens"].to_list() == [n - 1 for n in lengths]
        assert any("1 token short" in w for w in result.warnings)
    cli = subprocess.run([sys.executable, "-m", "asp_cli", "observe", str(work / "v1" / "1.jsonl"), "-o",
                          str(work / "history.parquet"), "--dataset", str(data["train"]), "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout)["log_formats"] == {"verl_v1_dump": 1}
    assert "read as: 1 verl v1-trainer dump" in cli.stderr


# --------------------------------------------------------------------------------------------------------
# The v1 sampler through Ray and TransferQueue


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster (2 CPUs) and TransferQueue's simple storage, as verl's TaskRunnerV1 starts them."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # The fake worker lives in these test modules, which Ray's workers cannot import: ship them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(sys.modules["verl_common"])
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 * 1024**2, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"storage_backend": "SimpleStorage", "SimpleStorage": {
        "total_storage_size": 10000, "num_data_storage_units": 1}}}))
    yield
    tq.close()
    ray.shutdown()


def _fake_worker_class():
    """verl's AgentLoopWorkerTQ with the LLM call replaced."""
    import asyncio

    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.trainer.ppo.v1 import AgentLoopWorkerTQ
    from verl.utils.tokenizer import normalize_token_ids

    base = AgentLoopWorkerTQ.__ray_metadata__.modified_class.__mro__[1]

    class FakeLLMWorker(base):
        def __init__(self, config, tokenizer):
            import transfer_queue as tq

            tq.init()  # attach to the driver's TransferQueue, as AgentLoopWorkerTQ.__init__ does
            self.config, self.tokenizer, self.processor = config, tokenizer, None
            self.distillation_enabled, self.reward_loop_worker_handles = False, None
            self.background_tasks = set()

        async def _run_agent_loop(self, sampling_params, trajectory, *, agent_name, trace=True, **kwargs):
            index, session = int(kwargs["index"]), int(kwargs["session_id"])
            prompt_ids = normalize_token_ids(self.tokenizer.apply_chat_template(
                kwargs["raw_prompt"], add_generation_prompt=True, tokenize=True))
            response_ids = (self.tokenizer(answer(index, session), add_special_tokens=False)["input_ids"]
                            + [self.tokenizer.eos_token_id])
            await asyncio.sleep(0.01 * ((index * 7 + session) % 5))  # rollouts finish out of order
            output = AgentLoopOutput(prompt_ids=prompt_ids, response_ids=response_ids,
                                     response_mask=[1] * len(response_ids), reward_score=float(session == 0),
                                     num_turns=2, metrics=AgentLoopMetrics(),
                                     extra_fields={"reward_extra_info": {"acc": float(session == 0)}})
            return await self._agent_loop_postprocess(output, trajectory["validate"], **kwargs)

    return FakeLLMWorker


@pytest.fixture(scope="module")
def small(work):
    """16 prompts, 2 epochs of 4 steps: a schedule the Ray tests replay in full."""
    train = write_dataset(work / "small.parquet", 16)
    val = write_dataset(work / "small-val.parquet", 4, "test")
    out = make_schedule(train, work / "small-schedule.parquet")
    return {"train": train, "val": val, "schedule": out, "replay": open_schedule(out)}


@pytest.fixture(scope="module")
def workers(cluster, work, small, tokenizer):
    """Two agent-loop worker actors (rollout.agent.num_workers=2), shared by the tests: each imports verl once."""
    import ray

    config = compose(work, _base(work, small))
    actors = [ray.remote(num_cpus=0)(_fake_worker_class()).remote(config, tokenizer) for _ in range(2)]
    yield actors
    for actor in actors:
        ray.kill(actor)


def _run_v1(config, tokenizer, workers, steps: int, dump: Path, cls=None, warmup: bool = False, waits=None,
            fields: tuple[str, ...] = ()):
    """verl's v1 step loop up to the model update: prepare_step, sample, dump, clear (trainer_base.py fit).

    With ``waits`` (a list), each step first asks the buffer what separate_async's hybrid switch asks
    (``get_sampleable_count``, ``wait_for_sampleable``) and records it."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import AgentLoopManagerTQ

    config.trainer.rollout_data_dir = str(dump)
    tr = trainer(config, tokenizer, cls)
    tr.replay_buffer = tr._build_replay_buffer()
    tr._init_dump_executor()
    manager = AgentLoopManagerTQ.__new__(AgentLoopManagerTQ)
    manager.agent_loop_workers = workers
    tr.agent_loop_manager = manager
    trained = []
    try:
        if warmup:
            tr.global_steps, tr._restored_tq_prompt_count = 1, 0
            # what on_train_begin does in the async trainers
            tr._add_async_warmup_batches(config.trainer.v1[config.trainer.v1.trainer_mode].num_warmup_batches)
        for step in range(1, steps + 1):
            tr.global_steps = step
            tr.prepare_step()
            if waits is not None:
                ready, _ = tr.replay_buffer.wait_for_sampleable(step, "train", BATCH)
                waits.append((ready, tr.replay_buffer.get_sampleable_count(step, "train")))
            batch, metrics = tr.replay_buffer.sample(global_steps=step, partition_id="train", batch_size=BATCH)
            got = tq.kv_batch_get(keys=batch.keys, partition_id="train",
                                  select_fields=["seq", "global_steps", *fields])
            seqs = [int(v) for v in got["seq"]]
            trained.append({"seqs": sorted(set(seqs)), "samples": len(seqs), "metrics": metrics,
                            "uids": {key.split("_")[0] for key in batch.keys},
                            "submitted": sorted({int(v) for v in got["global_steps"]}),
                            **{name: [int(v) for v in got[name]] for name in fields}, "seq": seqs})
            tr._log_rollout_data(batch, {}, str(dump))  # the real v1 dump (trainer_base.py:1297)
            tq.kv_clear(keys=batch.keys, partition_id="train")
    finally:
        tr._shutdown_dump_executor()
        left = list((tq.kv_list("train") or {}).get("train", {}))
        if left:
            tq.kv_clear(keys=left, partition_id="train")
    return tr, trained


def _base(work, small, trainer_mode="sync", order=None):
    return [f"data.train_files={small['train']}", f"data.val_files={small['val']}", "data.shuffle=False",
            *DATASET_CLS, f"+data.asp_schedule={small['schedule']}", *( [f"+data.asp_order={order}"] if order else []),
            "actor_rollout_ref.rollout.agent.num_workers=2", f"trainer.v1.trainer_mode={trainer_mode}", *SAMPLER_CLS,
            f"+trainer.v1.sampler.sampler_kwargs.schedule={small['schedule']}",
            "+trainer.v1.sampler.sampler_kwargs.poll_interval=0.05"]


def test_v1_sampler_trains_each_step_on_its_scheduled_groups(workers, work, small, tokenizer):
    """Sync trainer, the dataset in training order: every step trains exactly the schedule's step."""
    replay = small["replay"]
    steps = 16 * EPOCHS // BATCH
    tr, trained = _run_v1(compose(work, _base(work, small)), tokenizer, workers, steps, work / "dump-sync")
    assert type(tr.replay_buffer).__name__ == "ScheduleReplayBuffer"
    for step, got in enumerate(trained):
        assert got["seqs"] == sorted(replay.rows().filter(pl.col("train_step") == step)["seq"].to_list())
        assert got["samples"] == BATCH * SAMPLES and got["metrics"]["training/asp/scheduled"] == BATCH
    assert [d["train_step"] for d in tr.replay_buffer.decisions] == list(range(steps))
    # Validation (PPOTrainer._validate's first two steps): the val partition gets every group it submitted.
    import transfer_queue as tq
    from verl.utils import tensordict_utils as tu

    batch_dict = next(iter(tr.val_dataloader))
    batch_dict["uid"] = np.array([f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(len(batch_dict["raw_prompt"]))],
                                 dtype=object)
    val = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(val, "global_steps", steps)
    tu.assign_non_tensor_data(val, "validate", True)
    tq.kv_batch_put(keys=list(val["uid"]), partition_id="val",
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": steps}] * len(val))
    tr.agent_loop_manager.generate_sequences(val)
    got, _ = tr.replay_buffer.sample(global_steps=steps, partition_id="val", batch_size=len(val))
    assert {key.split("_")[0] for key in got.keys} == set(batch_dict["uid"]) and len(got.keys) == len(val)
    tq.kv_clear(keys=list(got.keys) + list(batch_dict["uid"]), partition_id="val")
    # The real v1 dumps, read back: the v1 format, every record matched to its prompt, EOS-short counts.
    result = observe(sorted((work / "dump-sync").glob("*.jsonl")), None, dataset=[small["train"]],
                     read=replace(OBSERVE_READ, tokenizer=work / "tokenizer.json"))
    assert result.summary["log_formats"] == {"verl_v1_dump": steps} and result.summary["bad_rows"] == 0
    assert result.added.height == 16 * EPOCHS * SAMPLES
    assert result.added.group_by("prompt_id").len()["len"].to_list() == [EPOCHS * SAMPLES] * 16


def test_v1_sampler_refills_when_the_dataset_is_in_dispatch_order(workers, work, small, tokenizer):
    """The dataset read in seq order: the step's groups are not all submitted yet, so the sampler asks for more
    prompts and holds the others back; each step still trains exactly its scheduled groups."""
    replay = small["replay"]
    config = compose(work, [*_base(work, small, order="dispatch"), "+data.asp_epoch=0",
                            "+trainer.v1.sampler.sampler_kwargs.epoch=0"])
    _, trained = _run_v1(config, tokenizer, workers, 16 // BATCH, work / "dump-dispatch")
    first = replay.rows(epoch=0)
    for step, got in enumerate(trained):
        assert got["seqs"] == sorted(first.filter(pl.col("train_step") == step)["seq"].to_list())
    assert sum(got["metrics"]["training/asp/refills"] for got in trained) > 0


def test_v1_sampler_in_the_async_trainer(workers, work, small, tokenizer):
    """colocate_async: verl prefetches a warmup batch and forces gen_batch_size=1; the steps stay the schedule's,
    and every group stays inside verl's lag bound (max_off_policy_threshold, default 8)."""
    from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync

    replay = small["replay"]
    steps = 16 * EPOCHS // BATCH
    config = compose(work, _base(work, small, trainer_mode="colocate_async"))
    waits = []
    tr, trained = _run_v1(config, tokenizer, workers, steps, work / "dump-async", cls=PPOTrainerColocateAsync,
                          warmup=True, waits=waits)
    assert tr.config.data.gen_batch_size == 1 and tr.replay_buffer.bound.max_span == 8
    # What separate_async's hybrid switch waits for is what the step then takes.
    assert [ready for ready, _ in waits] == [got["uids"] for got in trained]
    assert all(count == BATCH for _, count in waits)
    for step, got in enumerate(trained):
        assert got["seqs"] == sorted(replay.rows().filter(pl.col("train_step") == step)["seq"].to_list())
        assert all(step + 1 - s + 1 <= 8 for s in got["submitted"])


def test_the_printed_asynchronous_settings_run_verls_colocate_async_trainer(workers, work, small, tokenizer):
    """A schedule for verl's servers with a lag bound of 2 whose steps the trainer follows exports, by default, for
    main_ppo's colocate_async mode (before 2026-12-06 only the synchronous settings were printed): verl's
    `validate_config` accepts the printed settings, and with them alone (Option A's file, asp's replay buffer
    loaded from the printed keys, the warm-up verl reads from them) every step trains its scheduled groups, each
    inside the bound."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
    from verl.utils.config import validate_config

    from asp_cli import ScheduleSettings, schedule

    out = schedule([small["train"]], work / "small-async.parquet", settings=ScheduleSettings(
        instances=2, samples_per_prompt=SAMPLES, epochs=EPOCHS, train_batch_size=BATCH, minibatch_size=4,
        max_response_tokens=256, engine="streaming", max_lag=2, trainer="schedule")).output
    exported = work / "small-async-ordered.parquet"
    result = export(out, [small["train"]], exported, format="verl", workers=2)
    assert result.summary["verl_trainer"] == "colocate-async"
    settings = [f"{key}={value}" for key, value in result.trainer_settings.items()]
    config = compose(work, [f"data.train_files={exported}", f"data.val_files={small['val']}", *settings,
                            "+trainer.v1.sampler.sampler_kwargs.poll_interval=0.05",
                            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
                            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
                            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
                            "critic.ppo_micro_batch_size_per_gpu=1", "algorithm.adv_estimator=grpo"])
    assert config.trainer.v1.trainer_mode == "colocate_async"
    assert config.trainer.v1.colocate_async.num_warmup_batches == 2
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    steps = 16 * EPOCHS // BATCH
    tr, trained = _run_v1(config, tokenizer, workers, steps, work / "dump-async-export", cls=PPOTrainerColocateAsync,
                          warmup=True)
    assert type(tr.replay_buffer).__name__ == "ScheduleReplayBuffer" and tr.config.data.gen_batch_size == 1
    replay = open_schedule(out)
    for step, got in enumerate(trained):
        assert got["seqs"] == sorted(replay.rows().filter(pl.col("train_step") == step)["seq"].to_list())
        assert all(step + 1 - s <= 2 for s in got["submitted"])  # at most 2 versions behind: the lag bound


# --------------------------------------------------------------------------------------------------------
# The planned instance through verl's router plug-in (asp_cli.integrate.verl_router)


def test_every_sample_carries_its_planned_instance_to_the_agent_loop(workers, work, small, tokenizer):
    """+data.asp_route=planned: the `priority` verl's agent loop receives with each sample (and stores with it in
    TransferQueue) names the schedule's instance for its group, ordered as the dataset is."""
    from asp_cli.integrate.verl_router import decode_instance

    replay = small["replay"]
    config = compose(work, [*_base(work, small), "+data.asp_route=planned"])
    tr, trained = _run_v1(config, tokenizer, workers, 16 * EPOCHS // BATCH, work / "dump-route",
                          fields=("priority", "instance", "epoch"))
    assert tr.train_dataset.asp_settings["route"] == "planned"
    planned = {(r["epoch"], r["seq"]): r["instance"] for r in replay.rows().iter_rows(named=True)}
    samples = 0
    for got in trained:
        for seq, epoch, instance, priority in zip(got["seq"], got["epoch"], got["instance"], got["priority"]):
            assert decode_instance(priority) == instance == planned[(epoch, seq)]
            samples += 1
    assert samples == 16 * EPOCHS * SAMPLES
    assert {decode_instance(p) for got in trained for p in got["priority"]} == {0, 1}
    # Without the key nothing changes: no priority of asp's.
    plain = compose(work, _base(work, small))
    assert "priority" not in trainer(plain, tokenizer).train_dataset[0]


def test_every_sample_carries_its_predicted_length_to_the_agent_loop(workers, work, small, tokenizer):
    """+data.asp_route=length: the `priority` verl's agent loop receives with each sample carries its group's
    predicted response tokens per sample (the schedule's predicted_mean_tokens), for the router's length mode."""
    from asp_cli.integrate.verl_router import decode_instance, decode_tokens

    replay = small["replay"]
    config = compose(work, [*_base(work, small), "+data.asp_route=length"])
    tr, trained = _run_v1(config, tokenizer, workers, 16 * EPOCHS // BATCH, work / "dump-length",
                          fields=("priority", "epoch"))
    assert tr.train_dataset.asp_settings["route"] == "length"
    predicted = {(r["epoch"], r["seq"]): r["predicted_mean_tokens"] for r in replay.rows().iter_rows(named=True)}
    samples = 0
    for got in trained:
        for seq, epoch, priority in zip(got["seq"], got["epoch"], got["priority"]):
            assert decode_tokens(priority) == predicted[(epoch, seq)] and decode_instance(priority) is None
            samples += 1
    assert samples == 16 * EPOCHS * SAMPLES


def test_schedule_dataset_refuses_a_route_it_cannot_carry(work, small, tokenizer):
    with pytest.raises(SettingsError, match="data.asp_route must be one of none, planned"):
        trainer(compose(work, [*_base(work, small), "+data.asp_route=least"]), tokenizer)
    with pytest.raises(SettingsError, match="full_determinism=True"):
        trainer(compose(work, [*_base(work, small), "+data.asp_route=planned",
                               "actor_rollout_ref.rollout.full_determinism=True"]), tokenizer)


def _router_client(path, port: int):
    """asp's router made by verl's own plug-in loader from a YAML at ``path``, over three servers from ``port`` on,
    and verl's LLMServerClient that asks it for servers."""
    from omegaconf import OmegaConf
    from verl.workers.rollout.llm_server import LLMServerClient
    from verl.workers.rollout.router import get_router_handle

    path.write_text("router_class: asp_cli.integrate.verl_router.ScheduleRouter\n")
    servers = {f"127.0.0.1:{port + i}": f"replica-{i}" for i in range(3)}
    handle = get_router_handle(servers=servers, router_config_path=str(path))
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "vllm", "full_determinism": False}}})
    return handle, LLMServerClient(config, load_balancer_handle=handle)


def test_verls_router_plugin_runs_the_schedule_router(cluster, work):
    """verl's own plug-in loader (router.get_router_handle with rollout.router_config_path) makes the Ray actor, and
    verl's LLMServerClient asks it for a server with the fields it declares: planned requests go to their
    instance, others to the server with the fewest in flight."""
    import asyncio

    from asp_cli.integrate.verl_router import encode_priority

    handle, client = _router_client(work / "asp-router.yaml", 8000)

    async def route(priorities, name="planned"):
        return [(await client._acquire_server(f"{name}-{i}", prompt_ids=[1, 2, 3], sampling_params={},
                                              priority=p))[0] for i, p in enumerate(priorities)]

    planned = [2, 2, 0, 1, 2, 2]
    got = asyncio.run(route([encode_priority(i, k) for i, k in enumerate(planned)]))
    assert got == [f"127.0.0.1:{8000 + k}" for k in planned]
    import ray

    status = ray.get(handle.get_status.remote())
    assert status["routed"]["planned"] == 6 and status["servers"]["127.0.0.1:8002"] == 4
    # verl's default priorities (row indices): the least-loaded server, as verl's own balancer picks it.
    assert asyncio.run(route([0, 1], "validation")) == ["127.0.0.1:8000", "127.0.0.1:8001"]
    client._release_server("127.0.0.1:8002", request_id="planned-0")
    assert ray.get(handle.get_inflight_count.remote("127.0.0.1:8002")) in (3, 4)  # the release is fire-and-forget
    ray.kill(handle)


def test_verls_router_plugin_balances_predicted_lengths(cluster, work):
    """+data.asp_route=length through verl's own loader and client: each request to the server with the fewest
    predicted tokens in flight, and verl's release (with the request id the router declares) takes them away."""
    import asyncio
    import time

    import ray

    from asp_cli.integrate.verl_router import encode_length_priority

    handle, client = _router_client(work / "asp-router-length.yaml", 9000)

    async def route(lengths):
        return [(await client._acquire_server(f"len-{i}", prompt_ids=[1, 2, 3], sampling_params={},
                                              priority=encode_length_priority(i, t)))[0]
                for i, t in enumerate(lengths)]

    got = asyncio.run(route([1000, 900, 800, 200, 100]))
    assert got == ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9002", "127.0.0.1:9001"]
    status = ray.get(handle.get_status.remote())
    assert status["routed"]["length"] == 5
    assert status["predicted_tokens"] == {"127.0.0.1:9000": 1000, "127.0.0.1:9001": 1000, "127.0.0.1:9002": 1000}
    client._release_server("127.0.0.1:9000", request_id="len-0")
    for _ in range(100):  # the release is fire-and-forget
        if ray.get(handle.get_status.remote())["predicted_tokens"]["127.0.0.1:9000"] == 0:
            break
        time.sleep(0.05)
    assert ray.get(handle.get_status.remote())["predicted_tokens"]["127.0.0.1:9000"] == 0
    ray.kill(handle)
