import json

import numpy as np

import pytest
import typer
from typer.testing import CliRunner

from _predictor_data import make_data, write_jsonl
from asp_cli.cli import predictor as cli_predictor
from asp_cli.cli.common import set_traceback

app = typer.Typer()
cli_predictor.register(app)


@app.callback()
def _root() -> None:
    set_traceback(False)


runner = CliRunner()


@pytest.fixture(scope="module")
def data_and_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    prompts, lengths = make_data()
    data = folder / "rollouts.jsonl"
    write_jsonl(data, prompts, lengths)
    model = folder / "model.skops"
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(model), "--json"])
    assert result.exit_code == 0, result.output
    return folder, data, model, result


def test_fit_writes_a_model_and_a_card(data_and_model):
    _, _, model, result = data_and_model
    card = json.loads(result.stdout)
    assert model.is_file() and card["training"]["prompts"] == 80 and card["format_version"] == 1


def test_fit_refuses_to_overwrite_without_force(data_and_model):
    _, data, model, _ = data_and_model
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(model)])
    assert result.exit_code == 7 and "--force" in result.output


def test_fit_force_replaces_a_model_but_not_a_file_that_is_no_asp_model(data_and_model, tmp_path):
    """A hostile-input round: `--force` replaced any .skops file (`echo hello > notmodel.skops`), exit 0; it replaces
    an asp model, and an empty file, as before (E101, the rule of E85 and E94)."""
    import shutil
    import zipfile

    _, data, model, _ = data_and_model
    text = tmp_path / "notmodel.skops"
    text.write_text("hello\n")
    archive = tmp_path / "other.skops"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", "x")
    for path, what in [(text, "not a skops archive, as a model file is"),
                       (archive, "a zip archive without an asp model's card")]:
        before = path.read_bytes()
        result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(path), "--force"])
        assert result.exit_code == 7 and result.stderr == (
            f"Error: {path} is not an asp model ({what}), and asp predictor fit writes one: --force replaces only an "
            "asp model; name another output\n"), result.output
        assert path.read_bytes() == before
    mine = shutil.copy(model, tmp_path / "mine.skops")
    empty = tmp_path / "empty.skops"
    empty.write_bytes(b"")
    for path in (mine, empty):
        assert runner.invoke(app, ["predictor", "fit", str(data), "-o", str(path), "--force", "-q"]).exit_code == 0


def test_eval_says_a_file_given_twice_as_fit_does(data_and_model, tmp_path):
    """A hostile-input round: the same bytes under two names were scored twice without a word."""
    import shutil

    _, data, model, _ = data_and_model
    copy = shutil.copy(data, tmp_path / "copy.jsonl")
    result = runner.invoke(app, ["predictor", "eval", str(data), str(copy), "--model", str(model)])
    assert result.exit_code == 0 and f"{copy} has the same bytes as {data}: its samples are counted twice" in result.stderr


def test_eval_json(data_and_model):
    _, data, model, _ = data_and_model
    result = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["overall"]["group_max"]["kendall_tau"] > 0.5


def test_predict_and_info(data_and_model, tmp_path):
    folder, _, model, _ = data_and_model
    prompts, _ = make_data(n_prompts=15)
    prompt_file = tmp_path / "prompts.jsonl"
    prompts.rename({"prompt_text": "prompt", "prompt_id": "id"}).select("id", "prompt").write_ndjson(prompt_file)
    out = tmp_path / "pred.parquet"
    result = runner.invoke(app, ["predictor", "predict", str(prompt_file), "-o", str(out), "--model", str(model),
                                 "--json"])
    assert result.exit_code == 0, result.output
    import polars as pl

    table = pl.read_parquet(out)
    assert {"prompt_id", "predicted_tokens", "predicted_p90_tokens"} <= set(table.columns)
    result = runner.invoke(app, ["predictor", "info", str(model), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["training"]["prompts"] == 80


def test_missing_and_unsafe_models_exit_5(tmp_path):
    result = runner.invoke(app, ["predictor", "info", str(tmp_path / "none.skops")])
    assert result.exit_code == 5 and result.output.startswith("Error:")


def test_the_command_group_does_not_import_scikit_learn():
    import subprocess
    import sys

    code = "import sys, asp_cli.cli.predictor; sys.exit('sklearn' in sys.modules or 'skops' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_fit_with_char_ngrams_records_them_and_predict_uses_them(data_and_model, tmp_path):
    _, data, _, _ = data_and_model
    model = tmp_path / "chars.skops"
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(model), "--char-ngrams", "--json"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["features"][-1] == "char_score" and card["char_ngrams"]["hash_bits"] == 18
    info = runner.invoke(app, ["predictor", "info", str(model)])
    assert info.exit_code == 0 and "hashed character n-grams" in info.output
    prompts, _ = make_data(n_prompts=15)
    prompt_file = tmp_path / "prompts.jsonl"
    prompts.rename({"prompt_text": "prompt", "prompt_id": "id"}).select("id", "prompt").write_ndjson(prompt_file)
    out = tmp_path / "p.parquet"
    result = runner.invoke(app, ["predictor", "predict", str(prompt_file), "--model", str(model), "-o", str(out)])
    assert result.exit_code == 0, result.output
    import polars as pl

    from asp_cli.predict import model as P

    mu = P.load(model).predict_log(prompts)[0]
    expected = np.clip(np.rint(np.exp(mu)), 1, 8192).astype(np.int64)  # p50 = exp(mu): the char score is applied
    assert pl.read_parquet(out)["predicted_p50_tokens"].to_list() == expected.tolist()


def test_eval_history_columns_can_be_named(data_and_model, tmp_path):
    """eval's --history errors said `name the right one with --history-id-key`, an option eval lacked."""
    _, data, model, _ = data_and_model
    history = tmp_path / "history.jsonl"
    history.write_text('{"who": "p0", "tokens": 100}\n')
    result = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--history", str(history)])
    assert result.exit_code == 3 and "--history-id-key" in result.stderr
    result = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--history", str(history),
                                 "--history-id-key", "who", "--history-length-key", "tokens"])
    assert result.exit_code == 0, result.output


def test_fit_on_too_few_prompts_names_its_files(tmp_path):
    """"only 1 prompts have observed lengths" did not say of which files (a hostile-input round)."""
    prompts, lengths = make_data(n_prompts=3)
    data = tmp_path / "three.jsonl"
    write_jsonl(data, prompts, lengths)
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / "m.skops")])
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: three.jsonl: only 3 prompts have observed lengths"), result.stderr


def test_predict_and_eval_warn_of_a_history_of_other_prompts(data_and_model, tmp_path):
    """A history whose ids match none of the prompts changes nothing, and says so, as `asp schedule` does:
    `asp predictor predict` and `eval` printed "0 from history" without a word (a hostile-input round)."""
    _, data, model, _ = data_and_model
    prompts, _ = make_data(n_prompts=15)
    prompt_file = tmp_path / "prompts.jsonl"
    prompts.rename({"prompt_text": "prompt", "prompt_id": "id"}).select("id", "prompt").write_ndjson(prompt_file)
    strangers = tmp_path / "other.jsonl"
    strangers.write_text('{"prompt_id": "zz0", "response_tokens": 50}\n{"prompt_id": "zz1", "response_tokens": 60}\n')
    words = "none of the 2 prompt ids in --history is among the prompts, so every length comes from the model"
    result = runner.invoke(app, ["predictor", "predict", str(prompt_file), "--model", str(model), "-o",
                                 str(tmp_path / "p.parquet"), "--history", str(strangers), "--json"])
    assert result.exit_code == 0, result.output
    assert f"Warning: {words}" in result.stderr and words in json.loads(result.stdout)["warnings"][0]
    result = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--history", str(strangers)])
    assert result.exit_code == 0 and f"Warning: {words}" in result.stderr, result.output
    plain = runner.invoke(app, ["predictor", "predict", str(prompt_file), "--model", str(model), "-o",
                                str(tmp_path / "q.parquet"), "--json"])
    assert json.loads(plain.stdout)["warnings"] == []


@pytest.mark.parametrize("command, args, words", [
    ("fit", ["--max-response-tokens", "0"], "--max-response-tokens must be a whole number from 1 to 2147483647"),
    ("fit", ["--seed", "-1"], "--seed must be a whole number from 0 to 4294967295"),  # was exit 70
    ("eval", ["--max-response-tokens", "-3"], "--max-response-tokens must be a whole number from 1 to"),
    ("predict", ["--samples-per-prompt", "99999999999999999999"], "--samples-per-prompt must be a whole number from 1 to 4096"),  # was 70
])
def test_predictor_settings_out_of_range_exit_4(data_and_model, tmp_path, command, args, words):
    _, data, _, _ = data_and_model
    if command == "predict":
        data = tmp_path.parent / "prompts-for-predict.jsonl"
        data.write_text('{"id": "a", "prompt": "x"}\n')
    out = ["-o", str(tmp_path / ("out.skops" if command == "fit" else "out.parquet"))] if command in ("fit", "predict") else []
    result = runner.invoke(app, ["predictor", command, str(data), *out, *args])
    assert result.exit_code == 4, result.output
    assert words in result.stderr and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def prompts_and_history(tmp_path_factory):
    """The data of `data_and_model` as `asp schedule` and `asp observe` hold it: prompts in one file, lengths in
    another."""
    import polars as pl

    folder = tmp_path_factory.mktemp("two_files")
    prompts, lengths = make_data()
    prompts.select(pl.col("prompt_id").alias("id"), pl.col("prompt_text").alias("question")).write_ndjson(
        folder / "prompts.jsonl")
    lengths.select("prompt_id", "response_tokens").write_parquet(folder / "history.parquet")
    return folder


def test_fit_takes_prompts_and_history_apart_and_learns_the_same_model(data_and_model, prompts_and_history):
    folder, _, one_file_model, one_file = data_and_model
    two = prompts_and_history
    model = two / "model.skops"
    result = runner.invoke(app, ["predictor", "fit", str(two / "prompts.jsonl"), "--history",
                                 str(two / "history.parquet"), "-o", str(model), "--json"])
    assert result.exit_code == 0, result.output
    card, reference = json.loads(result.stdout), json.loads(one_file.stdout)
    assert card["training"]["prompts"] == reference["training"]["prompts"] == 80
    assert card["training"]["samples"] == reference["training"]["samples"]
    predictions = []
    for path in (one_file_model, model):
        out = two / f"predictions-{path.parent.name}.parquet"
        assert runner.invoke(app, ["predictor", "predict", str(two / "prompts.jsonl"), "-o", str(out), "--model",
                                   str(path), "--force"]).exit_code == 0
        import polars as pl

        predictions.append(pl.read_parquet(out))
    assert predictions[0].equals(predictions[1])


def test_fit_with_history_names_ids_that_do_not_match(prompts_and_history, tmp_path):
    import polars as pl

    two = prompts_and_history
    pl.DataFrame({"prompt_id": ["x1", "x2"], "response_tokens": [5, 7]}).write_parquet(tmp_path / "other.parquet")
    result = runner.invoke(app, ["predictor", "fit", str(two / "prompts.jsonl"), "--history",
                                 str(tmp_path / "other.parquet"), "-o", str(tmp_path / "m.skops")])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("Error: no prompt id of other.parquet is among the 80 prompts of "
                                    "prompts.jsonl: its ids look like 'x1' and the prompts' like 'p0'")
    assert "--history-id-key" in result.stderr and not (tmp_path / "m.skops").exists()
    # Some ids match: the others are left out with a warning, and prompts without lengths are counted.
    history = pl.concat([pl.read_parquet(two / "history.parquet").filter(pl.col("prompt_id") != "p3"),
                         pl.read_parquet(tmp_path / "other.parquet")])
    history.write_parquet(tmp_path / "mixed.parquet")
    result = runner.invoke(app, ["predictor", "fit", str(two / "prompts.jsonl"), "--history",
                                 str(tmp_path / "mixed.parquet"), "-o", str(tmp_path / "m.skops")])
    assert result.exit_code == 0, result.output
    assert "Warning: 2 rows of mixed.parquet (2 ids, e.g. 'x1') name prompts the prompt files do not hold; left out" \
        in result.stderr
    assert "Warning: 1 of the 80 prompts has no observed length in mixed.parquet; used the other 79" in result.stderr
    one = pl.concat([pl.read_parquet(two / "history.parquet"), pl.read_parquet(tmp_path / "other.parquet").head(1)])
    one.write_parquet(tmp_path / "one.parquet")  # one stray row: said in the singular ('1 rows (1 ids ...) name')
    result = runner.invoke(app, ["predictor", "fit", str(two / "prompts.jsonl"), "--history", str(tmp_path / "one.parquet"),
                                 "-o", str(tmp_path / "m1.skops")])
    assert result.exit_code == 0 and ("Warning: 1 row of one.parquet (1 id, e.g. 'x1') names a prompt the prompt files "
                                      "do not hold; left out") in result.stderr, result.output
    result = runner.invoke(app, ["predictor", "fit", str(two / "prompts.jsonl"), "--history",
                                 str(two / "history.parquet"), "--length-key", "n", "-o", str(tmp_path / "n.skops")])
    assert result.exit_code == 4 and "--history-length-key" in result.stderr


def test_eval_takes_prompts_and_observed_lengths_apart(data_and_model, prompts_and_history):
    _, data, model, _ = data_and_model
    two = prompts_and_history
    one = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--json"])
    apart = runner.invoke(app, ["predictor", "eval", str(two / "prompts.jsonl"), "--lengths",
                                str(two / "history.parquet"), "--model", str(model), "--json"])
    assert one.exit_code == 0 and apart.exit_code == 0, apart.output
    assert json.loads(apart.stdout)["overall"] == json.loads(one.stdout)["overall"]
    (two / "strangers.jsonl").write_text('{"prompt_id": "zz", "response_tokens": 3}\n')
    wrong = runner.invoke(app, ["predictor", "eval", str(two / "prompts.jsonl"), "--lengths", str(two / "strangers.jsonl")])
    assert wrong.exit_code == 3 and "no prompt id of strangers.jsonl" in wrong.stderr
    assert "--lengths-id-key" in wrong.stderr


def test_eval_says_a_history_of_the_scored_lengths_and_history_ids_without_lengths(data_and_model, prompts_and_history,
                                                                                   tmp_path):
    """A hostile-input round: `eval --lengths lens --history copy_of_lens` scored the answers against themselves (tau
    0.54 -> 0.75) without a word; and history ids of prompts the prompt file holds, without an observed length in
    --lengths, were said to be "not among the prompts"."""
    import polars as pl

    _, _, model, _ = data_and_model
    two = prompts_and_history
    history = pl.read_parquet(two / "history.parquet")
    ids = history["prompt_id"].unique(maintain_order=True)
    lens = tmp_path / "lens.parquet"
    history.filter(pl.col("prompt_id").is_in(ids[:50].implode())).write_parquet(lens)
    copy = tmp_path / "copy.jsonl"
    pl.read_parquet(lens).write_ndjson(copy)  # the same lengths in another file (other bytes)
    base = ["predictor", "eval", str(two / "prompts.jsonl"), "--lengths", str(lens), "--model", str(model), "--json"]
    scored = pl.read_parquet(lens).height
    result = runner.invoke(app, [*base, "--history", str(copy)])
    assert result.exit_code == 0, result.output
    said = (f"--history holds {scored:,} of the {scored:,} lengths being scored (the same lengths of the same prompts): "
            "the prediction is scored against answers it was given, so every figure flatters it; give a history of "
            "earlier rollouts only (another epoch's log), or score without --history")
    assert said in json.loads(result.stdout)["warnings"]
    # Another epoch's lengths of 70 of the prompts (50 of them scored), and one id of no prompt.
    other = tmp_path / "other.jsonl"
    pl.concat([history.filter(pl.col("prompt_id").is_in(ids[:70].implode())).with_columns(
        pl.col("response_tokens") + 7), pl.DataFrame({"prompt_id": ["zz"], "response_tokens": [5]})],
        how="vertical_relaxed").write_ndjson(other)
    result = runner.invoke(app, [*base, "--history", str(other)])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert "1 of the 71 prompt ids in --history are not among the prompts (their samples are ignored)" in warnings
    assert ("20 of the 71 prompt ids in --history are prompts with no observed length in lens.parquet, so nothing of "
            "theirs is scored (their history changes no score)") in warnings
    assert not any("lengths being scored" in w for w in warnings)


def test_quiet_leaves_stderr_empty_and_the_json_whole(data_and_model, tmp_path):
    _, data, model, _ = data_and_model
    loud = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--json"])
    quiet = runner.invoke(app, ["predictor", "eval", str(data), "--model", str(model), "--json", "-q"])
    assert loud.exit_code == quiet.exit_code == 0, quiet.output
    assert loud.stderr.strip() and not quiet.stderr.strip()
    assert json.loads(quiet.stdout) == json.loads(loud.stdout)
    prompts, _ = make_data(n_prompts=15)
    prompt_file = tmp_path / "prompts.jsonl"
    prompts.rename({"prompt_text": "prompt", "prompt_id": "id"}).select("id", "prompt").write_ndjson(prompt_file)
    predicted = runner.invoke(app, ["predictor", "predict", str(prompt_file), "-o", str(tmp_path / "p.parquet"),
                                    "--model", str(model), "--quiet"])
    fitted = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / "m.skops"), "-q"])
    assert predicted.exit_code == fitted.exit_code == 0, predicted.output + fitted.output
    assert not predicted.stderr.strip() and not fitted.stderr.strip()
    assert (tmp_path / "p.parquet").is_file() and (tmp_path / "m.skops").is_file()


def test_fit_warns_about_a_file_given_twice_and_lengths_that_say_nothing(data_and_model, tmp_path):
    """Each was fitted without a word: the same data twice (every sample counted twice), one constant length,
    every sample at the cap."""
    import shutil

    _, data, _, _ = data_and_model
    copy = tmp_path / "copy.jsonl"
    shutil.copy(data, copy)
    result = runner.invoke(app, ["predictor", "fit", str(data), str(copy), "-o", str(tmp_path / "a.skops"), "-q"])
    assert result.exit_code == 0 and result.stderr == (
        f"Warning: {copy} has the same bytes as {data}: its samples are counted twice; give each file once\n")
    constant = tmp_path / "constant.jsonl"
    constant.write_text("".join(json.dumps({**json.loads(line), "response_tokens": 500}) + "\n"
                                for line in data.read_text().splitlines()))
    result = runner.invoke(app, ["predictor", "fit", str(constant), "-o", str(tmp_path / "b.skops"), "-q"])
    assert "every sample is 500 tokens long: the model learns no ranking" in result.stderr
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / "c.skops"), "-q",
                                 "--max-response-tokens", "10"])
    assert "every sample reached --max-response-tokens (10)" in result.stderr
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / "d.skops"), "-q"])
    assert result.stderr == ""
    halved = tmp_path / "halved.jsonl"  # half the samples 0 tokens: failed requests pulled the model down, unsaid
    halved.write_text("".join(json.dumps({**json.loads(line), "response_tokens": 0 if i % 2 else
                                          json.loads(line)["response_tokens"]}) + "\n"
                              for i, line in enumerate(data.read_text().splitlines())))
    result = runner.invoke(app, ["predictor", "fit", str(halved), "-o", str(tmp_path / "e.skops"), "-q"])
    assert result.exit_code == 0 and "samples are 0 tokens long, which a generation seldom is" in result.stderr


def test_a_model_path_that_is_a_folder_or_a_dangling_link_says_so(tmp_path):
    """All said "no such model file", though the path was there."""
    folder = tmp_path / "models"
    folder.mkdir()
    link = tmp_path / "link.skops"
    link.symlink_to(tmp_path / "gone.skops")
    for path, words in ((folder, "is a folder, not a model file"), (link, "is a link to nothing"),
                        (tmp_path / "none.skops", "no such model file")):
        result = runner.invoke(app, ["predictor", "info", str(path)])
        assert result.exit_code == 5 and f"{path}: {words}; give a file written by" in result.stderr


def test_a_model_name_too_long_for_the_file_system_is_a_missing_model_file(tmp_path):
    """It was exit 3 (the generic message for an input name too long), where a missing model file is exit 5."""
    from asp_cli.cli.main import app as asp

    path = tmp_path / ("m" * 300 + ".skops")
    data = tmp_path / "p.jsonl"
    data.write_text('{"id": "a", "question": "What is 2+2?"}\n', encoding="utf-8")
    for args in (["predictor", "info", str(path)],
                 ["predictor", "predict", str(data), "-o", str(tmp_path / "p.parquet"), "--model", str(path)],
                 ["schedule", str(data), "-o", str(tmp_path / "s.parquet"), "--predictor", str(path)]):
        result = runner.invoke(asp, args)
        assert result.exit_code == 5, result.output
        assert result.stderr == (f"Error: {path}: the name is too long for the file system, so no such model file "
                                 "exists; give a file written by `asp predictor fit`\n")


def test_fit_on_text_without_spaces_and_an_infinite_difficulty(tmp_path):
    """A hostile-input audit: Chinese prompts (no word shared by enough prompts: no word feature at all) and one
    difficulty of JSON's Infinity each stopped `predictor fit` with a scikit-learn error (exit 70)."""
    rows = [{"id": f"z{k}", "question": f"计算{k}加{3 * k}等于多少？", "response_tokens": [100 + k, 120 + k],
             "difficulty": float("inf") if k == 3 else 1 + k % 5} for k in range(30)]
    data = tmp_path / "zh.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert "Infinity" in data.read_text()
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(tmp_path / "m.skops")])
    assert result.exit_code == 0, result.output
    assert "no word occurs in enough prompts" in result.stderr and "--char-ngrams" in result.stderr
    result = runner.invoke(app, ["predictor", "predict", str(data), "--model", str(tmp_path / "m.skops"),
                                 "-o", str(tmp_path / "p.parquet")])
    assert result.exit_code == 0, result.output



def test_fit_clamps_a_spread_wider_than_a_model_file_holds_and_says_so(tmp_path):
    """A hostile-input round: every prompt sampled at 1 and 10,000,000 tokens spreads 11.4 in log length; fit wrote
    the model (exit 0) and `predictor predict` then refused it as damaged ('log_spread' outside [0, 10], exit 5)."""
    data = tmp_path / "f.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "question": f"q {i} " * (i + 1),
                                        "response_tokens": [1, 10_000_000]}) + "\n" for i in range(40)))
    first, second = tmp_path / "m.skops", tmp_path / "m2.skops"
    result = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(first)])
    assert result.exit_code == 0, result.output
    assert ("Warning: a prompt's samples differ by 11.40 in log length (the pooled standard deviation; 0.3 is "
            "typical), more than a model file holds: the model uses 10") in result.stderr
    assert runner.invoke(app, ["predictor", "fit", str(data), "-o", str(second)]).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    result = runner.invoke(app, ["predictor", "predict", str(data), "--model", str(first),
                                 "-o", str(tmp_path / "p.parquet")])
    assert result.exit_code == 0, result.output
    info = runner.invoke(app, ["predictor", "info", str(first), "--json"])
    assert info.exit_code == 0 and json.loads(info.stdout)["log_spread"] == 10.0


def test_a_model_fitted_with_a_source_key_warns_where_the_prompts_carry_no_source(tmp_path):
    """Fitted with --source-key and used without it, a model predicted without its per-source terms, silently."""
    rng = np.random.default_rng(0)
    words = ["solve", "find", "prove", "sum", "count", "list", "sort", "graph", "prime", "array"]
    rows, prompts = [], []
    for i in range(120):
        task = "code" if i % 2 else "math"
        text = " ".join(rng.choice(words, 8).tolist()) + f" item {i}"
        prompts.append({"id": f"p{i}", "prompt": text, "task": task})
        rows += [{"id": f"p{i}", "prompt": text, "task": task,
                  "response_tokens": int((2000 if task == "code" else 200) * np.exp(rng.normal(0, 0.2)))}
                 for _ in range(2)]
    data, model, plain = tmp_path / "obs.jsonl", tmp_path / "m.skops", tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain.write_text("".join(json.dumps(r) + "\n" for r in prompts))
    fitted = runner.invoke(app, ["predictor", "fit", str(data), "-o", str(model), "--source-key", "task", "--json"])
    assert fitted.exit_code == 0, fitted.output
    assert json.loads(fitted.stdout)["data_sources"] == ["code", "math"]
    said = ("m.skops learned a term per data source ('code', 'math'), but no prompt here carries one: it predicts "
            "without them; name the source column with --source-key, as when it was fitted")
    for command in (["predict", str(plain), "-o", str(tmp_path / "a.parquet")],
                    ["eval", str(data), "--model", str(model)]):
        bare = runner.invoke(app, ["predictor", *command, "--json", *(["--model", str(model)]
                                                                     if command[0] == "predict" else [])])
        assert bare.exit_code == 0, bare.output
        assert said in json.loads(bare.stdout)["warnings"]
    keyed = runner.invoke(app, ["predictor", "predict", str(plain), "-o", str(tmp_path / "b.parquet"), "--model",
                                str(model), "--source-key", "task", "--json"])
    assert keyed.exit_code == 0 and json.loads(keyed.stdout)["warnings"] == []
    other = runner.invoke(app, ["predictor", "predict", str(plain), "-o", str(tmp_path / "c.parquet"), "--model",
                                str(model), "--source-key", "id", "--json"])  # a column of sources it never saw
    assert ("m.skops learned a term per data source ('code', 'math'), and none of these prompts' sources ('p0', "
            "'p1', 'p10', ...) is one of them") in json.loads(other.stdout)["warnings"][0]
    from asp_cli.arrange.pipeline import schedule

    assert said in schedule([plain], None, predictor=model).summary["warnings"]


def test_predict_says_the_rows_it_skipped(tmp_path):
    """`asp predictor predict --on-bad-row skip` wrote its predictions without a word of the lines it skipped."""
    data = tmp_path / "p.jsonl"
    data.write_text('{"question": "x"}\n{"question": "y"}\n{"question": ')
    result = runner.invoke(app, ["predictor", "predict", str(data), "-o", str(tmp_path / "o.parquet"),
                                 "--on-bad-row", "skip", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [f"skipped 1 bad row (--on-bad-row skip), e.g. {data}:3"]


def test_fit_says_the_rows_it_skipped_once_and_predict_counts_one_in_the_singular(data_and_model, tmp_path):
    """`asp predictor fit --on-bad-row skip` says 'skipped 1 bad row' once, as eval and predict do (their warning); and
    predict wrote '1 predictions'."""
    _, data, model, _ = data_and_model
    bad = tmp_path / "bad.jsonl"
    bad.write_text(data.read_text() + '{"id": "x", "prompt": "y", "response_tokens": "oops"}\n')
    fit = runner.invoke(app, ["predictor", "fit", str(bad), "-o", str(tmp_path / "m.skops"), "--on-bad-row", "skip"])
    assert fit.exit_code == 0, fit.output
    assert fit.stderr.count("skipped 1 bad row") == 1 and "skipped 1 bad row (--on-bad-row skip)" in fit.stderr
    one = tmp_path / "one.jsonl"
    one.write_text('{"id": "q1", "prompt": "prove that the sum"}\n')
    predicted = runner.invoke(app, ["predictor", "predict", str(one), "-o", str(tmp_path / "o.parquet"), "--model",
                                    str(model)])
    assert predicted.exit_code == 0 and "wrote 1 prediction to " in predicted.stderr, predicted.output


def test_no_metadata_with_a_metadata_key_is_refused(tmp_path):
    result = runner.invoke(app, ["predictor", "fit", str(tmp_path / "x.jsonl"), "-o", str(tmp_path / "m.skops"),
                                 "--no-metadata", "--source-key", "task"])
    assert result.exit_code == 4 and "--no-metadata leaves the data source and difficulty out" in result.stderr


def test_a_model_fitted_with_a_source_key_says_how_many_prompts_carry_a_source_it_never_saw(tmp_path):
    """An audit: where only some prompts carried an unknown source (a dataset added since the fit), predict said
    nothing, and those prompts were predicted without a source term."""
    rng = np.random.default_rng(1)
    rows = [{"id": f"p{i}", "prompt": f"solve item {i} " + " ".join(rng.choice(["sum", "graph", "prime"], 6)),
             "task": "code" if i % 2 else "math", "response_tokens": 2000 if i % 2 else 200} for i in range(80)]
    data, model = tmp_path / "obs.jsonl", tmp_path / "m.skops"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert runner.invoke(app, ["predictor", "fit", str(data), "-o", str(model), "--source-key", "task"]).exit_code == 0
    mixed = [{"id": f"q{i}", "prompt": f"find item {i}", **({"task": ["math", "chat", "chat"][i % 3]} if i < 9 else {})}
             for i in range(12)]
    plain = tmp_path / "p.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in mixed))
    result = runner.invoke(app, ["predictor", "predict", str(plain), "-o", str(tmp_path / "a.parquet"), "--model",
                                 str(model), "--source-key", "task", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "9 of 12 prompts carry a source it never saw ('chat') or none: m.skops learned a term per data source "
        "('code', 'math') and predicts those prompts without one"]
    # Prompts whose lengths come from history are not predicted by the model: not counted (a review's repro).
    history = tmp_path / "h.jsonl"
    history.write_text("".join(json.dumps({"prompt_id": r["id"], "response_tokens": 300}) + "\n"
                               for r in mixed if r.get("task") != "math"))
    covered = runner.invoke(app, ["predictor", "predict", str(plain), "-o", str(tmp_path / "b.parquet"), "--model",
                                  str(model), "--source-key", "task", "--history", str(history), "--json"])
    assert covered.exit_code == 0, covered.output
    assert not any("learned a term per data source" in w for w in json.loads(covered.stdout)["warnings"])
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading.options import ReadOptions

    planned = schedule([plain], None, predictor=model, history=[history], read=ReadOptions(source_key="task"))
    assert not any("learned a term per data source" in w for w in planned.summary["warnings"])
    partly = schedule([plain], None, predictor=model, read=ReadOptions(source_key="task"))
    assert any(w.startswith("9 of 12 prompts carry a source it never saw") for w in partly.summary["warnings"])


@pytest.mark.parametrize("command", ["fit", "eval"])
def test_prompts_whose_every_length_is_0_are_refused_as_a_history_of_zeros_is(tmp_path, command):
    """E82 for the lengths beside the prompts (`asp predictor fit` and `eval` without --history or --lengths): a
    file of zeros was fitted (one warning) and scored (none), where the same lengths as --history were refused (a
    hostile-input round, 2026-12-07)."""
    from util import write_jsonl as write_rows

    zeros = write_rows(tmp_path / "zeros.jsonl", [{"id": f"p{i}", "question": f"What is {i} + {i}?",
                                                    "response_tokens": 0} for i in range(12)])
    extra = ["-o", str(tmp_path / "m.skops")] if command == "fit" else []
    result = runner.invoke(app, ["predictor", command, str(zeros), *extra])
    assert result.exit_code == 3, result.output
    assert result.stderr == (f"Error: {zeros}: every one of the 12 lengths (column 'response_tokens') is 0: the wrong "
                             "column, or a rollout that wrote nothing; give response lengths in tokens, naming their "
                             "column with --length-key\n")
    assert not (tmp_path / "m.skops").exists()


def test_eval_and_fit_say_what_reading_the_lengths_noted(tmp_path):
    """A history and its copy re-saved by Polars (asp's list of observed logs dropped) given together count every
    sample twice: `asp schedule --history` and `asp report --lengths` said so, `asp predictor eval --lengths` and
    `fit --history` dropped what reading them noted (a hostile-input round, 2026-12-07)."""
    from util import make_prompts, write_jsonl as write_rows

    rows = make_prompts(20)
    prompts = write_rows(tmp_path / "p.jsonl", rows)
    log = write_rows(tmp_path / "log.jsonl", [{"prompt_id": r["id"], "response_tokens": 40 + 7 * i}
                                              for i, r in enumerate(rows)])
    import polars as pl

    from asp_cli.integrate.observe import observe

    history = tmp_path / "h.parquet"
    observe([log], history)
    resaved = tmp_path / "resaved.parquet"
    pl.read_parquet(history).write_parquet(resaved)
    said = "its rows name log log.jsonl, as the rows of"
    for command in (["eval", str(prompts), "--lengths", str(resaved), "--lengths", str(history), "-q", "--json"],
                    ["fit", str(prompts), "--history", str(resaved), "--history", str(history), "-q",
                     "-o", str(tmp_path / "m.skops")]):
        result = runner.invoke(app, ["predictor", *command])
        assert result.exit_code == 0, result.output
        assert said in result.stderr, result.stderr


def test_an_asp_export_given_as_prompts_is_read_by_the_schedules_ids(tmp_path):
    """The predictor's commands read an `asp export` (the file the trainer was given) on purpose: they join prompts
    to lengths by id, the rows the trainer saw. One of a dataset without ids, written with --metadata-key (slime's
    layout) or in verl's, holds the schedule's ids in an object only: it was read by its row numbers, in the
    schedule's order, and `asp predictor eval --lengths` scored each prompt against another's lengths (`predict`
    keyed its predictions so too), without a word. It is read by the schedule's ids it wrote, as `asp observe
    --dataset` reads it: the same answers as the dataset itself gives."""
    import polars as pl

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import export
    from asp_cli.predict.commands import evaluate_predictor, predict_file
    from asp_cli.settings import ScheduleSettings

    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({"prompt": f"Problem {i}: " + "word " * (5 + i * 37 % 90)}) + "\n"
                            for i in range(40)))
    log = tmp_path / "log.jsonl"  # the trainer's log: the schedule's ids (the dataset's row numbers)
    log.write_text("".join(json.dumps({"prompt_id": str(i), "response_tokens": 40 + (i * 53) % 700 + s}) + "\n"
                           for i in range(40) for s in range(4)))
    sched = tmp_path / "s.parquet"
    schedule([bare], sched, settings=ScheduleSettings(train_batch_size=8, minibatch_size=4, instances=2))
    scored = evaluate_predictor([bare], lengths=[log])["overall"]
    predicted = predict_file([bare]).table.sort("prompt_id")
    for name, extra in (("m.jsonl", {"format": "jsonl", "metadata_key": "meta"}),
                        ("p.jsonl", {"format": "jsonl", "metadata_key": "meta", "prefix": "asp_"}),
                        ("v.parquet", {"format": "verl"})):
        exported = tmp_path / name
        export(sched, [bare], exported, **extra)
        assert evaluate_predictor([exported], lengths=[log])["overall"] == scored, name
        again = predict_file([exported]).table.sort("prompt_id")
        assert again.equals(predicted), name


def test_one_id_of_two_texts_is_named_without_a_count_of_one(tmp_path):
    # It read "prompt id 'a' has 2 different prompt texts (1 ids do)".
    path = tmp_path / "two_texts.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "x", "response_tokens": 5}) + "\n"
                    + json.dumps({"id": "a", "question": "y", "response_tokens": 6}) + "\n")
    result = runner.invoke(app, ["predictor", "fit", str(path), "-o", str(tmp_path / "m.skops")])
    assert result.exit_code == 3, result.output
    assert "prompt id 'a' has 2 different prompt texts; give each prompt one id, or pass --id-key" in result.stderr
