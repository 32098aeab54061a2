"""A local Hugging Face tokenizer.json gives exact prompt token counts end to end (no network)."""

from pathlib import Path

import pytest

from asp_cli.predict.prediction import predict_lengths
from asp_cli.reading import read_prompts

from util import write_jsonl

tokenizers = pytest.importorskip("tokenizers", reason="the optional `tokenizers` package is not installed")


def _word_level_tokenizer(path: Path) -> Path:
    model = tokenizers.models.WordLevel({"[UNK]": 0, "what": 1, "is": 2}, unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_tokenizer_file_sets_prompt_tokens(tmp_path):
    source = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "what is 2+2"},
                                                 {"id": "b", "question": "what"}])
    prompts, _ = read_prompts([source])
    tokenizer = _word_level_tokenizer(tmp_path / "tokenizer.json")
    predictions, _ = predict_lengths(prompts, tokenizer=tokenizer)
    assert predictions["prompt_tokens"].to_list() == [5, 1]
    approximate, _ = predict_lengths(prompts)
    assert approximate["prompt_tokens"].to_list() != [5, 1]


def test_a_file_that_is_not_a_tokenizer_is_refused(tmp_path):
    from asp_cli.errors import InputError

    source = write_jsonl(tmp_path / "p.jsonl", [{"question": "hi"}])
    prompts, _ = read_prompts([source])
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="not a Hugging Face tokenizer.json"):
        predict_lengths(prompts, tokenizer=bad)
