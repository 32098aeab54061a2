"""What the verl integration tests share (each test file pins one verl release): a tokenizer trained here,
datasets in verl's layout, a schedule of them, and verl's packaged Hydra config."""

from __future__ import annotations

from pathlib import Path

BATCH = 4
SAMPLES = 2
EPOCHS = 2
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def question(i: int) -> str:
    return f"What is {i} plus {i}?" + " Show each step." * (i % 7)


def answer(i: int, session: int = 0) -> str:
    return f"The answer is {2 * i}." + " Check it." * ((i + session) % 5)


def build_tokenizer(folder: Path, rows: int):
    """A byte-level BPE (decoding gives the text back, as Qwen's and Llama's do) with a ChatML template; its
    tokenizer.json is saved in ``folder`` for `asp observe --tokenizer`. Nothing is downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    corpus = [question(i) + "\n" + answer(i, s) for i in range(rows) for s in range(SAMPLES)]
    raw.train_from_iterator(corpus + ["user assistant system"], trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    raw.save(str(folder / "tokenizer.json"))
    hf = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                 additional_special_tokens=["<|im_start|>"])
    hf.chat_template = CHAT_TEMPLATE
    return hf


def write_dataset(path: Path, rows: int, split: str = "train") -> Path:
    """verl's RL layout (examples/data_preprocess/gsm8k.py): the five columns, extra_info.index the row."""
    import pandas as pd

    pd.DataFrame([{
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": question(i)}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
        "extra_info": {"split": split, "index": i},
    } for i in range(rows)]).to_parquet(path)
    return path


def make_schedule(train: Path, out: Path) -> Path:
    from asp_cli import ScheduleSettings, schedule

    schedule([train], out, settings=ScheduleSettings(instances=2, samples_per_prompt=SAMPLES, epochs=EPOCHS,
                                                     train_batch_size=BATCH, minibatch_size=4,
                                                     max_response_tokens=256))
    return out


def compose(work: Path, overrides: list[str]):
    """verl/trainer/config/ppo_trainer.yaml as verl's main_ppo composes it, with the tests' sizes."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import verl

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=[
            f"data.train_batch_size={BATCH}", "data.dataloader_num_workers=0", f"+data.cache_dir={work / 'cache'}",
            f"actor_rollout_ref.rollout.n={SAMPLES}", *overrides])


def column(batch: dict, name: str) -> list[int]:
    return [int(v) for v in batch[name]]


def fake_rollout(tokenizer, indices: list[int]):
    """Token tensors as the legacy trainer holds them after generation (left-padded prompts, right-padded
    responses ending in EOS, each prompt's n samples adjacent), and each response's true length."""
    import torch

    prompt_ids = [tokenizer.apply_chat_template([{"role": "user", "content": question(i)}],
                                                add_generation_prompt=True, tokenize=True) for i in indices]
    prompt_ids = [list(p["input_ids"]) if hasattr(p, "keys") else list(p) for p in prompt_ids]
    responses = [tokenizer(answer(i, s), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                 for i in indices for s in range(SAMPLES)]
    prompts = [p for p in prompt_ids for _ in range(SAMPLES)]
    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    prompt_t = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
    response_t = torch.tensor([r + [pad] * (width_r - len(r)) for r in responses])
    mask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (width_r - len(r))
                         for p, r in zip(prompts, responses, strict=True)])
    scores = torch.zeros(response_t.shape)
    for row, r in enumerate(responses):
        scores[row, len(r) - 1] = float(row % SAMPLES == 0)
    return prompt_t, response_t, mask, scores, [len(r) for r in responses]
