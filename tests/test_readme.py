"""The README runs as written: its Python example, and (slow) every command line of its shell blocks, in order,
from a folder laid out as the repository root, as a new user would paste them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from util import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
# Lines that set up or test the checkout itself rather than use asp: pip, the test suite.
NOT_RUN = re.compile(r"^(pip |python -m pytest|HYPOTHESIS_PROFILE|ASP_FUZZ)")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def _commands() -> list[str]:
    commands = []
    for block in _blocks("bash"):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.strip()
            if command.startswith("pip install") and " && " in command:
                command = command.split(" && ", 1)[1]  # "pip install . && asp schedule ...": the asp part
            if command and not NOT_RUN.match(command):
                commands.append(command)
    return commands


def _root(tmp_path: Path) -> Path:
    """A working folder with what a clone has at its root (the sample data and the examples)."""
    for name in ("sample_data", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def test_the_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    code = _blocks("python")[0]
    monkeypatch.chdir(_root(tmp_path))
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
    assert (tmp_path / "from-python.parquet").is_file()
    assert 0 < float(capsys.readouterr().out) < 1  # it prints the predicted padding fraction


def test_the_epoch_to_epoch_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """observe epoch 0's log, then schedule the next epoch with that history: on the files its text says it starts
    from (epoch 0's schedule, and the log examples/emulate_rollouts.py writes for it)."""
    blocks = _blocks("python")
    assert len(blocks) == 2, "the README's Python blocks: the first example and the epoch-to-epoch one"
    monkeypatch.chdir(_root(tmp_path))
    from asp_cli import schedule

    schedule(["sample_data/prompts.jsonl"], "epoch0.parquet")  # `asp schedule sample_data/prompts.jsonl -o ...`
    emulate = [sys.executable, "examples/emulate_rollouts.py", "epoch0.parquet", "-o", "rollouts.jsonl"]
    subprocess.run(emulate, check=True, capture_output=True, timeout=300)
    exec(compile(blocks[1], "README.md", "exec"), {})  # noqa: S102 - the README's own example
    assert (tmp_path / "history.parquet").is_file() and (tmp_path / "epoch1.parquet").is_file()
    assert capsys.readouterr().out.strip() == "[0]"  # a later epoch's schedule numbers its epochs from 0 too
    for command in ("asp schedule sample_data/prompts.jsonl -o epoch0.parquet",
                    "python examples/emulate_rollouts.py\nepoch0.parquet -o rollouts.jsonl"):
        assert command in README  # the commands the text names for the files it starts from


def test_the_readme_names_commands_a_new_user_can_run():
    commands = _commands()
    assert commands[0] == "asp schedule sample_data/prompts.jsonl -o schedule.parquet"
    assert any(c.startswith("asp predictor fit sample_data/prompts.jsonl --history") for c in commands)
    assert "torch==" not in README  # the [torch] extra is what users install


def test_the_set_up_section_tells_a_verl_user_the_settings_of_verls_trainer():
    """A verl newcomer's first schedule, the set-up command's, was for blocking generate() calls and an asynchronous
    trainer; verl's settings came 450 lines later. The set-up section names them, and options asp schedule has."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    said = " ".join(setup.split())
    assert "For verl's default trainer" in said and "add `--engine streaming --max-lag 0 --trainer schedule`" in said
    options = CliRunner().invoke(app, ["schedule", "--help"], terminal_width=200).output
    for option in ("--engine", "--max-lag", "--trainer", "--train-batch-size", "--samples-per-prompt",
                   "--max-response-tokens"):
        assert option in said and option in options, option


def _needs_servers(commands: list[str]) -> set[str]:
    """The commands that say they need the user's own inference servers, and those that read what they write."""
    skipped, made = set(), set()
    for command in commands:
        if "needs your" in command or any(name in command for name in made):
            skipped.add(command)
            made.update(re.findall(r"-o (\S+)", command))
    return skipped


@pytest.mark.slow
def test_every_readme_command_runs_in_order(tmp_path):
    if shutil.which("asp", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the asp command is not installed (pip install -e .)")
    root = _root(tmp_path)
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    commands = _commands()
    servers = _needs_servers(commands)
    assert len(servers) <= 6, servers  # only the lines that say so, and what reads their output
    for command in commands:
        if command in servers:
            continue
        command = re.sub(r"^python ", f"{sys.executable} ", command)
        result = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
        assert "Error: internal error" not in result.stderr, command
