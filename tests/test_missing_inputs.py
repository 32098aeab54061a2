"""A missing input file is exit 3 with one `Error: FILE: no such file` line, whichever command and option reads
it (docs/errors.md E11). Predictor model files keep their own code (E21, exit 5)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app

from util import write_jsonl

runner = CliRunner()

# Each command line names exactly one missing file, "{tmp}/missing.*"; every other file exists.
CASES = [
    ["schedule", "{tmp}/missing.jsonl", "-o", "{tmp}/o.parquet"],
    ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--history", "{tmp}/missing.jsonl"],
    ["schedule", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet", "--predictions", "{tmp}/missing.parquet"],
    ["report", "{tmp}/missing.parquet"],
    ["report", "{tmp}/s.parquet", "--compare", "{tmp}/missing.parquet"],
    ["report", "{tmp}/s.parquet", "--lengths", "{tmp}/missing.jsonl"],
    ["simulate", "{tmp}/missing.parquet"],
    ["simulate", "{tmp}/s.parquet", "--lengths", "{tmp}/missing.jsonl"],
    ["export", "{tmp}/missing.parquet", "{tmp}/good.jsonl", "-o", "{tmp}/o.parquet"],
    ["export", "{tmp}/s.parquet", "{tmp}/missing.jsonl", "-o", "{tmp}/o.parquet"],
    ["observe", "{tmp}/missing.jsonl", "-o", "{tmp}/h.parquet"],
    ["observe", "{tmp}/log.jsonl", "-o", "{tmp}/h.parquet", "--schedule", "{tmp}/missing.parquet"],
    ["observe", "{tmp}/log.jsonl", "-o", "{tmp}/h.parquet", "--dataset", "{tmp}/missing.jsonl"],
    ["predictor", "fit", "{tmp}/missing.jsonl", "-o", "{tmp}/m.skops"],
    ["predictor", "fit", "{tmp}/good.jsonl", "--history", "{tmp}/missing.jsonl", "-o", "{tmp}/m.skops"],
    ["predictor", "eval", "{tmp}/missing.jsonl"],
    ["predictor", "eval", "{tmp}/observed.jsonl", "--history", "{tmp}/missing.jsonl"],
    ["predictor", "eval", "{tmp}/good.jsonl", "--lengths", "{tmp}/missing.jsonl"],
    ["predictor", "predict", "{tmp}/missing.jsonl", "-o", "{tmp}/p.parquet"],
    ["bench", "--data", "{tmp}/missing"],
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("missing")
    write_jsonl(tmp / "good.jsonl", [{"id": "a", "question": "What is 2+2?"}, {"id": "b", "question": "Why?"}])
    write_jsonl(tmp / "log.jsonl", [{"prompt_id": "a", "response_tokens": 12}])
    write_jsonl(tmp / "observed.jsonl", [{"id": "a", "question": "What is 2+2?", "response_tokens": 12},
                                         {"id": "b", "question": "Why?", "response_tokens": 40}])
    result = runner.invoke(app, ["schedule", str(tmp / "good.jsonl"), "-o", str(tmp / "s.parquet"), "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a).replace("{tmp}/", "") for a in CASES])
def test_a_missing_input_is_exit_3(folder, args):
    result = runner.invoke(app, [a.replace("{tmp}", str(folder)) for a in args])
    missing = next(a for a in args if "missing" in a).replace("{tmp}", str(folder))
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("Error: ") and missing in result.stderr
    assert "no such" in result.stderr and result.stderr.strip().count("\n") == 0
    assert result.stdout == ""
