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


def test_a_tokenizer_that_loads_but_cannot_encode_is_exit_3_naming_it(tmp_path):
    """A hostile-input round (2026-12-07): a WordLevel tokenizer.json whose unknown token is not in its vocabulary
    loads, then fails on the first word it does not know with the library's bare Exception: `asp probe`, `asp
    schedule` and `asp predictor predict --tokenizer` were exit 70."""
    import json

    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    source = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "what is 2+2"}])
    broken = tmp_path / "tokenizer.json"
    broken.write_text(json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0},
                                                              "unk_token": "[UNK]"}}))
    for command in (["probe", str(source), "-o", str(tmp_path / "probe.jsonl")],
                    ["predictor", "predict", str(source), "-o", str(tmp_path / "p.parquet")]):
        result = CliRunner().invoke(app, [*command, "--tokenizer", str(broken)])
        assert result.exit_code == 3, result.output
        assert result.stderr.startswith(f"Error: {broken}: the tokenizer cannot encode the text (WordLevel error")
    assert not (tmp_path / "probe.jsonl").exists() and not (tmp_path / "p.parquet").exists()
