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


def test_only_a_settings_class_s_own_checks_name_its_keywords_and_a_pickled_error_says_it_once():
    # Raised elsewhere (a function's own check) the same option may be another keyword (asp observe's --id-key is
    # ReadOptions.length_id_key): the options only (a review).
    assert str(SettingsError("--seed must be a number")) == "--seed must be a number"
    with pytest.raises(SettingsError) as raised:
        ScheduleSettings(seed=-1)
    error = raised.value
    assert str(error).endswith("(in Python: seed for --seed)") and str(error).count("in Python") == 1
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
    with on_the_command_line(), pytest.raises(SettingsError) as raised:
        ScheduleSettings(seed=-1)
    assert "in Python" not in str(raised.value)
    with pytest.raises(SettingsError, match=r"\(in Python: mode for --engine\)$"):  # one keyword, two options
        ReplayOptions(mode="foo")
    with pytest.raises(SettingsError) as raised:  # no settings class of its own: the options only
        from asp_cli.integrate.export_options import check_options
        check_options("jsonl", "dispatch", 3, None, "", "none", None)
    assert "in Python" not in str(raised.value)


def test_a_command_names_the_options_only(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "question": "What is 2+2?"}\n')
    result = CliRunner().invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"), "--max-lag", "-1"])
    assert result.exit_code == 4 and "--max-lag must be" in result.output and "in Python" not in result.output


@pytest.mark.parametrize("args, given", [(["schedule", "p.jsonl", "-o", "s.parquet", "--instances", "abc"], "'abc'"),
                                         (["schedule", "p.jsonl", "-o", "s.parquet", "--seed", "1.5"], "'1.5'"),
                                         (["probe", "p.jsonl", "-o", "probe.jsonl", "--fraction", "two"], "'two'")])
def test_a_value_the_command_line_cannot_read_is_named(args, given):
    """Typer reads numbers through Pydantic, whose message leaves the value out: "Input should be a valid integer,
    unable to parse string as an integer" did not say which of two numbers it meant (a newcomer's round)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: Invalid value for '{args[-2]}'") and last.count(given) == 1, last


@pytest.mark.parametrize("call, words", [
    (lambda a, t: a.observe(t / "log.jsonl", None, read={}), "read must be a ReadOptions"),
    (lambda a, t: a.simulate_file(t / "s.parquet", read={}), "read must be a ReadOptions"),
    (lambda a, t: a.report_schedule(t / "s.parquet", read={}), "read must be a ReadOptions"),
    (lambda a, t: a.replay_schedule(t / "s.parquet", t / "p.jsonl", read={}, dry_run=True),
     "read must be a ReadOptions"),
    (lambda a, t: a.probe(t / "p.jsonl", read={}), "read must be a ReadOptions"),
    (lambda a, t: a.probe(t / "p.jsonl", settings={"prompts": 5}), "settings must be a ProbeSettings"),
    (lambda a, t: a.fit_predictor(t / "p.jsonl", read={}), "read must be a ReadOptions"),
    (lambda a, t: a.fit_predictor(t / "p.jsonl", history_read={}), "history_read must be a ReadOptions"),
    (lambda a, t: a.evaluate_predictor(t / "p.jsonl", lengths_read={}), "lengths_read must be a ReadOptions"),
    (lambda a, t: a.predict_file(t / "p.jsonl", read={}), "read must be a ReadOptions"),
    (lambda a, t: a.replay_schedule(t / "s.parquet", t / "p.jsonl", live={"servers": ["http://gpu0:8000/v1"]}),
     "live must be a LiveSettings"),
    (lambda a, t: a.replay_schedule(t / "s.parquet", t / "p.jsonl", in_process={"model": "m"}),
     "in_process must be an InProcessSettings"),
    (lambda a, t: a.calibrate(None, t / "c.json", live={"servers": []}), "live must be a LiveSettings"),
])
def test_a_twin_given_a_dict_for_its_options_names_the_class_to_give(tmp_path, call, words):
    """A library newcomer's round: a dict where a twin takes `ReadOptions`, `ProbeSettings` or `LiveSettings` was an
    AttributeError from inside ("'dict' object has no attribute 'named_as'", "... 'on_bad_row'", "... 'servers'")."""
    import re

    import asp_cli
    from util import make_prompts, write_jsonl

    write_jsonl(tmp_path / "p.jsonl", make_prompts(4))
    write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p0", "response_tokens": 5}])
    asp_cli.schedule(tmp_path / "p.jsonl", tmp_path / "s.parquet")
    with pytest.raises(SettingsError, match=re.escape(words) + r" \(asp_cli\.\w+\(.*\)\)(?: or None)?, not dict$"):
        call(asp_cli, tmp_path)


def test_a_quoted_glob_is_told_to_let_the_shell_expand_it(tmp_path):
    """`asp schedule p.jsonl --history 'dump/*.jsonl'` (the glob quoted, so no shell expanded it) was "no such file"
    without a word; a name holding a pattern says asp reads files by name. A plain missing name reads as before."""
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "1.jsonl").write_text('{"prompt_id": "p0", "response_tokens": 5}\n', encoding="utf-8")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "p0", "prompt": "What is 1+1?"}\n', encoding="utf-8")
    for history, said in ((tmp_path / "dump" / "*.jsonl", "; it is a pattern, and asp reads files by name: leave out "
                           "the quotes so that the shell expands it, or name each file"),
                          (tmp_path / "dump" / "2.jsonl", "")):
        result = CliRunner().invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "s.parquet"),
                                          "--history", str(history)])
        assert result.exit_code == 3, result.output
        assert result.stderr == f"Error: {history}: no such file{said}\n"
        assert not (tmp_path / "s.parquet").exists()


@pytest.mark.parametrize("name, hinted", [("~/runs/h.jsonl", True), ("~data.jsonl", False), ("~", False),
                                          ("~no-such-user-asp/h.jsonl", False)])
def test_only_a_tilde_the_shell_would_have_expanded_is_blamed_on_quotes(tmp_path, monkeypatch, name, hinted):
    """E125 told a missing `~data.jsonl` (a file's own name, say a backup's) that the shell expands ~ only outside
    quotes, "(a folder named ~data.jsonl): write the full path", and `~nouser/h.jsonl`, which no shell expands, the
    same: the hint is for a folder the quotes kept from expanding (~/, ~user/ of a user there) and no other name."""
    from asp_cli.errors import missing_hint, no_such_file

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    said = str(no_such_file(name))
    assert said.startswith(f"{name}: no such file")
    assert ("the shell expands ~ only outside quotes" in said) == hinted, said
    assert bool(missing_hint(name)) == hinted
    if hinted:
        assert said.endswith(f"(a folder named ~): write {tmp_path}/home/runs/h.jsonl, or leave the ~ outside the "
                             "quotes"), said
