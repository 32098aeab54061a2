"""The row-wise work on Ray (`asp predictor predict --ray`, `asp_cli.predict.on_ray`), on a local Ray runtime of
two workers: the same predictions and the same schedule as one process. Skipped, with a message, without Ray."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import polars as pl
import pytest
from typer.testing import CliRunner

from asp_cli import columns as C
from asp_cli.cli.main import app
from asp_cli.errors import SettingsError

from util import SAMPLE_PROMPTS, write_jsonl


def test_an_address_with_no_cluster_is_one_line_exit_4(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'asp-cli[ray]')")
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray runtime is already up in this process")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # "auto" joins any Ray cluster on this machine, found by scanning its processes: another pytest worker's
    # local runtime (the fixture below) or a developer's own. Hide them, so that this test sees none.
    from ray._private import services

    if not (hasattr(services, "_cached_find_gcs_addresses") and hasattr(services, "find_bootstrap_address")):
        pytest.skip("this Ray finds clusters otherwise (ray._private.services changed): the test cannot hide them")
    monkeypatch.setattr(services, "_cached_find_gcs_addresses", functools.cache(frozenset))
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "hi"}])
    result = CliRunner().invoke(app, ["predictor", "predict", str(path), "-o", str(tmp_path / "out"), "--ray",
                                      "--ray-address", "auto"])
    assert result.exit_code == 4, result.output
    assert result.stderr.startswith("Error: --ray-address auto: no Ray cluster found there (")
    assert result.stderr.strip().count("\n") == 0


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray runtime with two worker CPUs, shared by this module's tests."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'asp-cli[ray]'): the Ray path is "
                                            "not tested here")
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'asp-cli[ray]')")
    if ray.is_initialized():
        ray.shutdown()
    # "local": a runtime of this worker's own, never a cluster that another process started on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def shards(tmp_path):
    lines = SAMPLE_PROMPTS.read_text().splitlines()
    first = tmp_path / "a.jsonl"
    first.write_text("\n".join(lines[:1500]) + "\n")
    second = tmp_path / "b.parquet"
    pl.read_ndjson(SAMPLE_PROMPTS).slice(1500, 1000).write_parquet(second, row_group_size=100)
    third = tmp_path / "c.csv"
    pl.read_ndjson(SAMPLE_PROMPTS).slice(2500, None).select(
        "id", "data_source", pl.col("prompt").list.first().struct.field("content").alias("question")).write_csv(third)
    return [first, second, third]


@pytest.mark.ray
def test_predictions_on_ray_equal_one_process(local_ray, shards, tmp_path):
    from asp_cli import predict_file
    from asp_cli.predict.on_ray import predict_with_ray

    result = predict_with_ray(shards, tmp_path / "out", workers=2)
    assert [f.name for f in result.files] == ["predictions-00000.parquet", "predictions-00001.parquet",
                                              "predictions-00002.parquet"]
    assert result.prompts == 3540
    single = predict_file(shards, tmp_path / "single.parquet").table
    on_ray = pl.concat([pl.read_parquet(f) for f in result.files])
    assert on_ray.equals(single)  # same rows, same order (inputs in order, rows in order), same bits

    # The schedule planned from the Ray files is the one planned from the single-process file.
    from asp_cli import schedule

    a = schedule(shards, tmp_path / "s1.parquet", predictions=result.files)
    b = schedule(shards, tmp_path / "s2.parquet", predictions=[tmp_path / "single.parquet"])
    assert a.frame.equals(b.frame)
    plain = schedule(shards, None)
    assert a.frame.drop("prediction_source").equals(plain.frame.drop("prediction_source"))


@pytest.mark.ray
def test_row_number_ids_count_across_shards(local_ray, tmp_path):
    from asp_cli import predict_file
    from asp_cli.predict.on_ray import predict_with_ray

    rows = [{"question": f"what is {i} times {i}?"} for i in range(50)]
    paths = [write_jsonl(tmp_path / "a.jsonl", rows[:20]), write_jsonl(tmp_path / "b.jsonl", rows[20:])]
    result = predict_with_ray(paths, tmp_path / "out")
    on_ray = pl.concat([pl.read_parquet(f) for f in result.files])
    assert on_ray[C.PROMPT_ID].to_list() == [str(i) for i in range(50)]
    assert on_ray.equals(predict_file(paths, None).table)


@pytest.mark.ray
def test_an_input_error_on_a_worker_is_the_command_error(local_ray, tmp_path):
    from asp_cli.errors import InputError
    from asp_cli.predict.on_ray import predict_with_ray

    good = write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "question": "fine"}])
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"id": "y", "question": "ok"}\n{"id": "z", "question": \n')
    with pytest.raises(InputError, match=r"b\.jsonl:2: malformed JSON"):
        predict_with_ray([good, bad], tmp_path / "out")
    dup = write_jsonl(tmp_path / "c.jsonl", [{"id": "x", "question": "again"}])
    with pytest.raises(InputError, match="duplicate prompt id 'x'"):
        predict_with_ray([good, dup], tmp_path / "out2")


@pytest.mark.ray
def test_cli_ray_writes_shards_and_schedule_consumes_them(local_ray, shards, tmp_path):
    runner = CliRunner()
    out = tmp_path / "preds"
    result = runner.invoke(app, ["predictor", "predict", *map(str, shards), "-o", str(out), "--ray", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["prompts"] == 3540 and len(document["files"]) == 3
    again = runner.invoke(app, ["predictor", "predict", *map(str, shards), "-o", str(out), "--ray"])
    assert again.exit_code == 7 and "exists; pass --force" in again.output
    history = runner.invoke(app, ["predictor", "predict", str(shards[0]), "-o", str(out), "--ray", "--history",
                                  str(shards[0])])
    assert history.exit_code == 4 and "--history cannot go with --ray" in history.output
    planned = runner.invoke(app, ["schedule", *map(str, shards), "-o", str(tmp_path / "s.parquet"), "--quiet",
                                  *[arg for f in document["files"] for arg in ("--predictions", f)]])
    assert planned.exit_code == 0, planned.output


def test_cli_without_ray_exits_4_with_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as on an install without the extra
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "hi"}])
    result = CliRunner().invoke(app, ["predictor", "predict", str(path), "-o", str(tmp_path / "out"), "--ray"])
    assert result.exit_code == 4
    assert result.stderr == ("Error: --ray needs Ray Data, which is not installed here; pip install 'asp-cli[ray]' "
                             "(on every node of the cluster), or drop --ray\n")
    assert not (tmp_path / "out").exists()  # the output folder was made and left empty (a hostile-input round)


def test_a_folder_of_predictions_stands_for_its_files(tmp_path):
    from asp_cli import predict_file, schedule

    path = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": "word " * i} for i in range(1, 40)])
    (tmp_path / "preds").mkdir()
    predict_file([path], tmp_path / "preds" / "predictions-00000.parquet")
    a = schedule([path], None, predictions=[tmp_path / "preds"])
    b = schedule([path], None, predictions=[tmp_path / "preds" / "predictions-00000.parquet"])
    assert a.frame.equals(b.frame) and a.metadata["predictor"] == b.metadata["predictor"]


def test_missing_ray_is_one_line_with_the_install_hint(tmp_path):
    # A fresh interpreter where `import ray` fails, as on an install without the extra.
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from asp_cli.predict.on_ray import import_ray\n"
        "from asp_cli.errors import SettingsError\n"
        "try:\n    import_ray()\nexcept SettingsError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("--ray needs Ray Data, which is not installed here; pip install 'asp-cli[ray]' (on every "
                           "node of the cluster), or drop --ray")
    assert SettingsError.exit_code == 4
