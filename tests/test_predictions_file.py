"""`asp schedule --predictions FILE`: lengths predicted elsewhere (a cluster, a model of one's own)."""

import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.errors import InputError, SettingsError
from asp_cli.arrange.pipeline import schedule

from util import write_jsonl

runner = CliRunner()


@pytest.fixture
def prompts(tmp_path):
    return write_jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "question": "x " * (i + 1)} for i in range(40)])


def test_predictions_from_asp_predictor_predict_give_the_same_schedule(tmp_path, prompts):
    predicted = tmp_path / "pred.parquet"
    assert runner.invoke(app, ["predictor", "predict", str(prompts), "-o", str(predicted)]).exit_code == 0
    own = schedule([prompts], None).frame
    from_file = schedule([prompts], None, predictions=[predicted]).frame
    assert from_file["prediction_source"].unique().to_list() == ["file"]
    assert from_file.drop("prediction_source").equals(own.drop("prediction_source"))


def test_one_length_column_is_planned_as_max_and_mean(tmp_path, prompts):
    path = write_jsonl(tmp_path / "pred.jsonl", [{"uid": f"q{i}", "predicted_tokens": 100 + 10 * i} for i in range(40)])
    frame = schedule([prompts], None, predictions=[path]).frame.sort("row")
    assert frame["predicted_tokens"].to_list() == [100 + 10 * i for i in range(40)]
    assert (frame["predicted_mean_tokens"] == frame["predicted_max_tokens"]).all()


def test_several_files_and_the_cap(tmp_path, prompts):
    a = write_jsonl(tmp_path / "a.jsonl", [{"prompt_id": f"q{i}", "predicted_max_tokens": 50_000} for i in range(20)])
    b = tmp_path / "b.csv"
    b.write_text("prompt_id,predicted_max_tokens\n" + "".join(f"q{i},300\n" for i in range(20, 40)))
    frame = schedule([prompts], None, predictions=[a, b]).frame.sort("row")
    assert frame["predicted_tokens"].to_list() == [8192] * 20 + [300] * 20
    with pytest.raises(InputError, match=r"b.csv, .*c.jsonl: prompt id 'q20' has more than one prediction"):
        schedule([prompts], None, predictions=[a, b, write_jsonl(tmp_path / "c.jsonl", [{"prompt_id": "q20",
                                                                                         "predicted_max_tokens": 9}])])


def test_a_predictions_file_named_twice_is_said_so(tmp_path, prompts):
    """It was "pred.jsonl, pred.jsonl: prompt id 'q0' has more than one prediction; keep one row per prompt",
    advice about the file's rows, where the other readers say the file was given twice."""
    path = write_jsonl(tmp_path / "pred.jsonl", [{"id": f"q{i}", "predicted_tokens": 5} for i in range(40)])
    result = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"),
                                 "--predictions", str(path), "--predictions", str(path)])
    assert result.exit_code == 3, result.output
    assert result.stderr == f"Error: {path}: given twice; name each predictions file once\n"


@pytest.mark.parametrize(
    "rows, fragment",
    [
        ([{"id": f"q{i}", "predicted_tokens": 5} for i in range(39)], "no prediction for 1 prompt"),
        ([{"id": "q0", "predicted_tokens": 5}] * 2 + [{"id": f"q{i}", "predicted_tokens": 5} for i in range(1, 40)],
         r"pred.jsonl: prompt id 'q0' has more than one prediction"),
        ([{"id": f"q{i}", "predicted_tokens": -1 if i == 3 else 5} for i in range(40)],
         "pred.jsonl:4: column 'predicted_tokens' must be a whole token count from 0 to 2,147,483,647 for prompt id 'q3'"),
        ([{"id": f"q{i}", "length": 5} for i in range(40)], "no predicted length column"),
    ],
)
def test_bad_prediction_files(tmp_path, prompts, rows, fragment):
    path = write_jsonl(tmp_path / "pred.jsonl", rows)
    with pytest.raises(InputError, match=fragment):
        schedule([prompts], None, predictions=[path])


def test_a_parquet_predictions_row_is_counted_from_1_and_a_missing_id_column_says_what_to_do(tmp_path, prompts):
    import re

    import polars as pl

    path = tmp_path / "pred.parquet"
    pl.DataFrame({"id": [f"q{i}" for i in range(40)], "predicted_tokens": [5] * 3 + [-1] + [5] * 36}).write_parquet(path)
    with pytest.raises(InputError, match=r"pred\.parquet: row 4: column 'predicted_tokens' must be a whole token count"):
        schedule([prompts], None, predictions=[path])
    nameless = write_jsonl(tmp_path / "nameless.jsonl", [{"key": f"q{i}", "predicted_tokens": 5} for i in range(40)])
    with pytest.raises(InputError, match=re.escape("columns are: key, predicted_tokens; rename the right one to id")):
        schedule([prompts], None, predictions=[nameless])


def test_predictions_replace_the_predictor(tmp_path, prompts):
    path = write_jsonl(tmp_path / "pred.jsonl", [{"id": f"q{i}", "predicted_tokens": 5} for i in range(40)])
    with pytest.raises(SettingsError, match="--predictions replaces the predictor"):
        schedule([prompts], None, predictions=[path], history=[path])
    result = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"), "--predictions",
                                 str(path), "--predictor", str(path)])
    assert result.exit_code == 4


def test_a_schedule_from_predictions_says_format_1_1(tmp_path, prompts):
    """The value "file" came with format 1.1 (docs/schedule-format.md), so such a file is marked 1.1."""
    from asp_cli.schedule_format import read_schedule

    predicted = tmp_path / "pred.parquet"
    assert runner.invoke(app, ["predictor", "predict", str(prompts), "-o", str(predicted)]).exit_code == 0
    made = schedule([prompts], tmp_path / "s.parquet", predictions=[predicted])
    assert made.metadata["format_version"] == "1.1"
    assert read_schedule(tmp_path / "s.parquet").metadata["format_version"] == "1.1"


def test_lengths_that_mix_numbers_and_text_are_read_as_numbers(tmp_path, prompts):
    """A hostile-input audit: a JSON-lines predictions file with a length as text in one row refused every row
    holding a number ("predictions.jsonl:1: ... must be a whole token count" of a 100): the reader tags a number
    among text, and the tag was not taken off."""
    rows = [{"id": f"q{i}", "predicted_tokens": 100 + i if i % 2 else str(100 + i)} for i in range(40)]
    mixed = write_jsonl(tmp_path / "pred.jsonl", rows)
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"id": f"q{i}", "predicted_tokens": 100 + i} for i in range(40)])
    same = schedule([prompts], None, predictions=[plain]).frame
    assert schedule([prompts], None, predictions=[mixed]).frame.equals(same)


def test_prompt_tokens_far_from_the_text_are_said_once(tmp_path, prompts):
    """A file's `prompt_tokens` replace the prompts' own counts in the schedule, which every replay's prefill reads
    (`asp simulate --compare`'s baselines too): a review's per-source predictions put each source's mean in every
    row, and nothing said so. Counts near the text's estimate (a tokenizer's, a chat template added) are not
    said; counts over 2x and 64 tokens from it are, once, with how many and the one furthest off."""
    estimate = [-(-2 * (i + 1) // 4) for i in range(40)]  # "x " * (i + 1): bytes / 4, rounded up

    def predicted(name: str, tokens: list[int]):
        return write_jsonl(tmp_path / name, [{"id": f"q{i}", "predicted_tokens": 100, "prompt_tokens": t}
                                             for i, t in enumerate(tokens)])

    templated = predicted("templated.jsonl", [e + 60 for e in estimate])  # within 64 tokens of the text
    made = schedule([prompts], None, predictions=[templated])
    assert not [w for w in made.warnings if "prompt_tokens" in w]
    assert made.frame.sort("row")["prompt_tokens"].to_list() == [e + 60 for e in estimate]  # the file's, kept

    meaned = predicted("meaned.jsonl", [e if i < 37 else 9_000 + i for i, e in enumerate(estimate)])
    said = [w for w in schedule([prompts], None, predictions=[meaned]).warnings if "prompt_tokens" in w]
    assert said == [f"3 of 40 prompts' prompt_tokens in the predictions file are over 2x and 64 tokens from their "
                    f"text's estimate (bytes / 4), e.g. prompt id 'q39' in {meaned}: 9,039 against 20; the schedule "
                    "keeps the file's counts, which every replay's prefill reads (`asp simulate --compare`'s "
                    "baselines too): give each prompt's own count (a tokenizer's, chat template included), or drop "
                    "the column to count from the text"]
    # Several files: the one holding the prompt furthest off is named; the CLI says it once, on stderr.
    head = write_jsonl(tmp_path / "head.jsonl", [{"id": f"q{i}", "predicted_tokens": 100, "prompt_tokens": estimate[i]}
                                                 for i in range(20)])
    tail = write_jsonl(tmp_path / "tail.jsonl", [{"id": f"q{i}", "predicted_tokens": 100, "prompt_tokens": 500 + i}
                                                 for i in range(20, 40)])
    result = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"), "--predictions",
                                 str(head), "--predictions", str(tail), "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("prompt_tokens in the predictions files are over 2x") == 1
    assert "20 of 40 prompts' prompt_tokens" in result.stderr
    assert f"e.g. prompt id 'q39' in {tail}: 539 against 20;" in result.stderr


def test_prompts_without_a_count_in_the_file_are_counted_by_the_tokenizer(tmp_path):
    """`--predictions` beside `--tokenizer`: the prompts the file gives no `prompt_tokens` are counted by the
    tokenizer, as the predictor's path counts them (before 2026-12-08 at bytes / 4 whatever --tokenizer said, which
    every replay's prefill and the KV budget then read); a file's own counts are checked against the tokenizer's."""
    tokenizers = pytest.importorskip("tokenizers", reason="the optional `tokenizers` package is not installed")
    from asp_cli.reading.options import ReadOptions

    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "x": 1}, unk_token="[UNK]"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = tmp_path / "tokenizer.json"
    words.save(str(tokenizer))
    source = write_jsonl(tmp_path / "p.jsonl", [{"id": f"q{i}", "question": "x " * (40 * i + 1)} for i in range(4)])
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"id": f"q{i}", "predicted_tokens": 100} for i in range(4)])
    counted = schedule([source], None, predictions=[bare], read=ReadOptions(tokenizer=tokenizer)).frame.sort("row")
    assert counted["prompt_tokens"].to_list() == [1, 41, 81, 121]  # one token a word
    assert schedule([source], None, predictions=[bare]).frame.sort("row")["prompt_tokens"].to_list() == [1, 21, 41, 61]
    # A file's counts are judged against the tokenizer's: 200 for q0 is far from its 1 token, not from bytes / 4.
    given = write_jsonl(tmp_path / "given.jsonl", [{"id": f"q{i}", "predicted_tokens": 100, "prompt_tokens": t}
                                                  for i, t in enumerate([200, 41, 81, 121])])
    said = [w for w in schedule([source], None, predictions=[given], read=ReadOptions(tokenizer=tokenizer)).warnings
            if "prompt_tokens" in w]
    assert len(said) == 1 and "1 of 4 prompts' prompt_tokens" in said[0]
    assert "64 tokens from the tokenizer's count, e.g. prompt id 'q0'" in said[0] and ": 200 against 1;" in said[0]
    result = runner.invoke(app, ["schedule", str(source), "-o", str(tmp_path / "s.parquet"), "--predictions",
                                 str(bare), "--tokenizer", str(tokenizer), "--quiet"])
    assert result.exit_code == 0, result.output
    import polars as pl
    assert pl.read_parquet(tmp_path / "s.parquet").sort("row")["prompt_tokens"].to_list() == [1, 41, 81, 121]
