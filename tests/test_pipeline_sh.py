"""examples/pipeline.sh: the whole feedback loop, run as a user would, and its exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from util import REPO

SCRIPT = REPO / "examples" / "pipeline.sh"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHON"] = sys.executable
    asp = shutil.which("asp", path=env["PATH"])
    if asp:
        env["ASP"] = asp
    env.update(extra)
    return env


def test_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.slow
def test_two_epochs_close_the_loop(tmp_path):
    if shutil.which("asp", path=_env()["PATH"]) is None:
        pytest.skip("the asp command is not installed (pip install -e .)")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], env=_env(EPOCHS="2"), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line.split("\t") for line in result.stdout.strip().splitlines()]
    assert [line[0] for line in lines] == ["0", "1"]
    assert lines[0][3] == "0" and int(lines[1][3]) > 0  # epoch 1 predicts from epoch 0's history
    for name in ("history.parquet", "train.e1.parquet", "rollouts.e1.jsonl", "report.e1.json"):
        assert (tmp_path / name).exists(), name


def test_a_failing_step_stops_with_its_exit_code(tmp_path):
    if shutil.which("asp", path=_env()["PATH"]) is None:
        pytest.skip("the asp command is not installed (pip install -e .)")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], env=_env(DATA=str(tmp_path / "missing.jsonl")),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 3
    assert "Error:" in result.stderr and result.stdout == ""
