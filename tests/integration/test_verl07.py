"""asp's support for the oldest verl it keeps, verl 0.7.1, against the real package (.ci/verl.sh 0.7.1).

verl 0.7 has no v1 trainer; what asp keeps for it is tested here through verl 0.7.1's own code: the sampler
hook ``data.sampler.class_path`` read by its ``create_rl_sampler`` (verl/trainer/main_ppo.py:392) inside
``RayPPOTrainer._create_dataloader`` (verl/trainer/ppo/ray_trainer.py:312), export's order through the same
dataloader, the legacy cut of the batch (``DataProto.chunk``), and its dump writer read back by
``asp observe``. The tokenizer is trained here; no model, no Ray.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

pytestmark = pytest.mark.verl
verl = pytest.importorskip("verl", reason="verl is not installed; .ci/verl.sh 0.7.1 builds an environment with it")
if verl.__version__ != "0.7.1":
    pytest.skip(f"these tests pin verl 0.7.1 (found {verl.__version__}); run .ci/verl.sh 0.7.1",
                allow_module_level=True)

from asp_cli import export, observe  # noqa: E402
from asp_cli.integrate.observe import OBSERVE_READ  # noqa: E402
from asp_cli.integrate.replay import chunk_capacities, open_schedule  # noqa: E402
from verl_common import (  # noqa: E402
    BATCH, EPOCHS, SAMPLES, build_tokenizer, column, compose, fake_rollout, make_schedule, write_dataset,
)

ROWS = 24
SAMPLER = ["data.sampler.class_path=pkg://asp_cli.integrate.sampler", "data.sampler.class_name=ScheduleSampler"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("verl07")


@pytest.fixture(scope="module")
def tokenizer(work):
    return build_tokenizer(work, ROWS)


@pytest.fixture(scope="module")
def data(work):
    train = write_dataset(work / "train.parquet", ROWS)
    val = write_dataset(work / "val.parquet", 4, "test")
    out = make_schedule(train, work / "schedule.parquet")
    return {"train": train, "val": val, "schedule": out, "replay": open_schedule(out)}


def legacy_trainer(config, tokenizer):
    """verl 0.7's trainer with its dataloaders built by its own `_create_dataloader` (no workers)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    tr = RayPPOTrainer.__new__(RayPPOTrainer)
    tr.config, tr.tokenizer, tr.processor, tr.global_steps = config, tokenizer, None, 0
    tr._create_dataloader(None, None, None, None)
    return tr


def test_the_sampler_hook_replays_each_epoch(work, data, tokenizer):
    """data.sampler.class_path=pkg://asp_cli.integrate.sampler: each verl epoch is the next schedule epoch, cut
    for verl 0.7's 8 agent-loop workers (its default) the legacy way."""
    from verl.experimental.dataset.sampler import AbstractSampler

    from asp_cli.integrate.sampler import ScheduleSampler

    replay = data["replay"]
    config = compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}", *SAMPLER,
                            f"+data.asp_schedule={data['schedule']}", "data.shuffle=False",
                            "data.filter_overlong_prompts=False"])
    tr = legacy_trainer(config, tokenizer)
    sampler = tr.train_dataloader.sampler
    assert isinstance(sampler, ScheduleSampler) and isinstance(sampler, AbstractSampler) and sampler.workers == 8
    assert len(tr.train_dataloader) == ROWS // BATCH
    for epoch in range(EPOCHS):
        order = replay.dataset_indices(epoch=epoch, workers=8, chunking="legacy")
        assert [i for batch in tr.train_dataloader for i in column(batch, "index")] == order
    # The hook's own requirement (main_ppo.py:415): a custom sampler needs dataloader_num_workers=0.
    with pytest.raises(AssertionError, match="num_workers must be 0"):
        legacy_trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}", *SAMPLER,
                                      f"+data.asp_schedule={data['schedule']}", "data.dataloader_num_workers=2"]),
                       tokenizer)


def test_verl_07s_default_prompt_limit_is_the_one_export_names(work, data):
    from asp_cli.integrate.export import VERL_DEFAULT_MAX_PROMPT_TOKENS

    config = compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}"])
    assert config.data.max_prompt_length == VERL_DEFAULT_MAX_PROMPT_TOKENS
    assert config.actor_rollout_ref.rollout.prompt_length == VERL_DEFAULT_MAX_PROMPT_TOKENS


def test_export_for_verl_07_through_its_dataloader(work, data, tokenizer):
    """asp export --format verl --verl-version 0.7, with the settings it prints: batch b is schedule step b."""
    replay = data["replay"]
    result = export(data["schedule"], [data["train"]], work / "ordered.parquet", format="verl", verl_version="0.7")
    settings = [f"{k}={v}" for k, v in result.trainer_settings.items()]
    tr = legacy_trainer(compose(work, [f"data.train_files={work / 'ordered.parquet'}", f"data.val_files={data['val']}",
                                       *settings]), tokenizer)
    expected = replay.trainer_order(workers=8, chunking="legacy")["seq"].to_list()
    batches = list(tr.train_dataloader)
    assert len(batches) == ROWS * EPOCHS // BATCH == tr.total_training_steps
    for step, batch in enumerate(batches):
        assert column(batch, "seq") == expected[step * BATCH:(step + 1) * BATCH]
        assert set(column(batch, "train_step")) == {step}


def test_legacy_chunking_is_verl_07s_dataproto_chunk(work, data, tokenizer):
    import torch
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    tr = legacy_trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}",
                                       "data.shuffle=False"]), tokenizer)
    for prompts in (4, 6, 12):
        proto = DataProto.from_single_dict(collate_fn([tr.train_dataset[i] for i in range(prompts)]))
        repeated = proto.repeat(repeat_times=SAMPLES, interleave=True)
        repeated.batch["row"] = torch.arange(prompts * SAMPLES)
        for workers in range(1, 9):
            if prompts * SAMPLES % workers:
                with pytest.raises(AssertionError):
                    repeated.chunk(workers)
                continue
            firsts = [int((chunk.batch["row"] % SAMPLES == 0).sum()) for chunk in repeated.chunk(workers)]
            assert firsts == chunk_capacities(prompts, SAMPLES, workers, rule="legacy").tolist()


def test_verl_07_dumps_are_read_by_observe(work, data, tokenizer):
    from verl.protocol import DataProto

    tr = legacy_trainer(compose(work, [f"data.train_files={data['train']}", f"data.val_files={data['val']}",
                                       "data.shuffle=False"]), tokenizer)
    batch = DataProto.from_single_dict(next(iter(tr.train_dataloader)))
    indices = [int(i) for i in batch.non_tensor_batch["index"]]
    batch = batch.repeat(repeat_times=SAMPLES, interleave=True)
    prompts, responses, mask, scores, lengths = fake_rollout(tokenizer, indices)
    batch.batch["prompts"], batch.batch["responses"] = prompts, responses
    batch.batch["attention_mask"], batch.batch["token_level_scores"] = mask, scores
    tr.global_steps = 1
    tr._log_rollout_data(batch, {"acc": scores.sum(-1).tolist()}, {}, str(work / "dump"))  # ray_trainer.py:422
    result = observe([work / "dump" / "1.jsonl"], None, dataset=[data["train"]],
                     read=replace(OBSERVE_READ, tokenizer=work / "tokenizer.json"))
    assert result.summary["log_formats"] == {"verl_legacy_dump": 1} and result.summary["bad_rows"] == 0
    assert result.added["prompt_id"].to_list() == [str(i) for i in indices for _ in range(SAMPLES)]
    assert result.added["response_tokens"].to_list() == [n - 1 for n in lengths]
