"""Progress on stderr for long commands: on a terminal, or anywhere with --progress; never on stdout."""

from __future__ import annotations

import io
import json

from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.cli.progress import StageBar

from util import make_prompts, write_jsonl

runner = CliRunner()
STAGES = ("reading prompts", "reading history", "predicting lengths", "packing and interleaving")


def test_the_live_line_names_each_stage_with_its_number_and_no_stray_comma():
    out = io.StringIO()
    bar = StageBar("asp schedule", STAGES, live=True, file=out)
    for stage in ("reading prompts", "predicting lengths", "packing and interleaving"):
        bar.step(stage)
    bar.close()
    drawn = out.getvalue()
    for line in ("asp schedule: 1/4 reading prompts", "asp schedule: 3/4 predicting lengths",
                 "asp schedule: 4/4 packing and interleaving"):
        assert line in drawn, drawn
    assert ", packing" not in drawn and "/4 ," not in drawn  # it once read "asp schedule: 2/5 , packing..."


def test_plain_lines_off_a_terminal_and_unnumbered_stages():
    out = io.StringIO()
    bar = StageBar("asp simulate", live=False, file=out)
    bar.step("replaying 2/9: short-first")
    bar.close()
    assert out.getvalue() == "asp simulate: replaying 2/9: short-first\n"


def test_schedule_progress_when_asked_and_the_same_file_either_way(tmp_path):
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    quiet = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "a.parquet")])
    assert quiet.exit_code == 0 and "asp schedule: " not in quiet.stderr  # not a terminal, not asked
    shown = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "b.parquet"), "--progress", "--quiet",
                                "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert [line for line in shown.stderr.splitlines() if not line.startswith("Warning: ")] == [
        "asp schedule: 1/3 reading prompts and predicting lengths", "asp schedule: 2/3 packing and interleaving",
        "asp schedule: 3/3 writing schedule"]  # (--quiet keeps the warnings: 30 prompts make a train batch short)
    assert json.loads(shown.stdout)["prompts"] == 30
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()  # --progress not recorded
    history = write_jsonl(tmp_path / "h.jsonl", [{"id": f"p{i}", "response_tokens": 100 + i} for i in range(10)])
    with_history = runner.invoke(app, ["schedule", str(prompts), "-o", str(tmp_path / "c.parquet"), "--progress",
                                       "--quiet", "--history", str(history)])
    assert with_history.exit_code == 0, with_history.stderr
    assert with_history.stderr.splitlines()[:2] == ["asp schedule: 1/4 reading history",
                                                    "asp schedule: 2/4 reading prompts and predicting lengths"]


def test_simulate_compare_reports_each_replay(tmp_path):
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    schedule = tmp_path / "s.parquet"
    assert runner.invoke(app, ["schedule", str(prompts), "-o", str(schedule), "--quiet"]).exit_code == 0
    silent = runner.invoke(app, ["simulate", str(schedule), "--compare", "--json"])
    assert silent.exit_code == 0 and "asp simulate: " not in silent.stderr
    result = runner.invoke(app, ["simulate", str(schedule), "--compare", "--json", "--quiet", "--progress"])
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[:3] == ["asp simulate: reading the schedule", "asp simulate: replaying the schedule",
                         "asp simulate: arranging the baselines"]
    replays = [line for line in lines[3:] if line.startswith("asp simulate: replaying ")]
    rows = json.loads(result.stdout)["comparison"]
    assert len(replays) == len(rows) - 1  # every arrangement but the lower bound is replayed
    assert replays[0] == f"asp simulate: replaying 1/{len(replays)}: verl-default"
