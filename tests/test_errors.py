"""asp_cli.errors: a settings error raised from Python names the library's keywords beside the command line's
options; one raised by an `asp` command names the options only."""

from __future__ import annotations

import pickle

import pytest
from typer.testing import CliRunner

from asp_cli import ScheduleSettings
from asp_cli.cli.main import app
from asp_cli.errors import SettingsError, on_the_command_line
from asp_cli.sim.options import ReplayOptions


def test_a_settings_error_from_python_names_each_keyword_once():
    with pytest.raises(SettingsError) as raised:
        ScheduleSettings(engine="static", kv_budget="peak")
    message = str(raised.value)
    assert message.startswith("--kv-budget peak does not apply to --engine static")
    assert message.endswith("(in Python: kv_budget for --kv-budget, engine for --engine)")
    with pytest.raises(SettingsError, match=r"\(got -1\) \(in Python: max_lag for --max-lag\)$"):
        ScheduleSettings(max_lag=-1)
    with pytest.raises(SettingsError, match=r"in Python: instances for --instances\)$"):
        ReplayOptions(instances=0)


def test_options_that_are_no_keyword_are_left_alone_and_a_pickled_error_says_it_once():
    assert str(SettingsError("--no-such-thing is wrong")) == "--no-such-thing is wrong"
    error = SettingsError("--seed must be a number")
    assert str(pickle.loads(pickle.dumps(error))) == str(error) == "--seed must be a number (in Python: seed for --seed)"
    with on_the_command_line():
        assert str(SettingsError("--seed must be a number")) == "--seed must be a number"
    assert "in Python" in str(SettingsError("--seed"))  # the command line's context ends with it


def test_a_command_names_the_options_only(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "question": "What is 2+2?"}\n')
    result = CliRunner().invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"), "--max-lag", "-1"])
    assert result.exit_code == 4 and "--max-lag must be" in result.output and "in Python" not in result.output
