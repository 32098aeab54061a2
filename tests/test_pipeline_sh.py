"""examples/pipeline.sh: the whole feedback loop, run as a user would, and its exit codes."""

from __future__ import annotations

import json
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
    assert all(float(line[2]) > 0 and float(line[4]) > 0 for line in lines)  # predicted makespan, simulated end
    for name in ("history.parquet", "train.e1.parquet", "rollouts.e1.jsonl", "report.e1.json"):
        assert (tmp_path / name).exists(), name
    # Run again into the same folder (a retried job): the same files, byte for byte. Before, epoch 0 was planned
    # from the last run's history and every log was appended again, the history doubled (a newcomer's round).
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], env=_env(EPOCHS="2"), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == result.stdout, again.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first
    # The export is for verl's default trainer, which the schedules are made for: nothing says otherwise.
    assert "the schedule was planned for" not in result.stderr
    # One verl run per epoch, as docs/pipelines.md step 3 recommends: each schedule plans the run's epochs and its
    # own epoch alone is exported, whose settings resume the run before. Each one-epoch schedule exported whole said
    # trainer.total_epochs=1, with which the resumed run of epoch 1 trains no step (its export warned so).
    assert "trains no step" not in result.stderr
    assert "this is epoch 1's file of a run made one verl run per epoch" in result.stderr
    import polars as pl

    for epoch in (0, 1):
        assert pl.read_parquet(tmp_path / f"schedule.e{epoch}.parquet")["epoch"].unique().sort().to_list() == [0, 1]
        exported = pl.read_parquet(tmp_path / f"train.e{epoch}.parquet")
        assert exported["epoch"].unique().to_list() == [epoch] and exported.height == 3540
        assert pl.read_ndjson(tmp_path / f"rollouts.e{epoch}.jsonl")["epoch"].unique().to_list() == [epoch]
    # docs/pipelines.md quotes this run's figures: they went stale as the simulator changed (1,531 s against a
    # 1,552 s run; an ops round that ran the script to check its numbers).
    import re

    page = " ".join((REPO / "docs" / "pipelines.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"epoch 1's plan is ([\d.]+)% (slower|faster) than epoch 0's \(([\d,]+) s and ([\d,]+) s "
                       r"simulated, [^;]*; 118 steps of 60 prompts, rollout-bound: ([\d,]+) s of predicted rollout",
                       page)
    assert quoted, "docs/pipelines.md no longer quotes the script's figures where this test looks"
    first, second = (float(line[4]) for line in lines)
    assert [int(quoted[3].replace(",", "")), int(quoted[4].replace(",", ""))] == [round(first), round(second)]
    assert int(quoted[5].replace(",", "")) == round(float(lines[0][2]))
    change = (second / first - 1) * 100
    assert quoted[2] == ("slower" if change > 0 else "faster") and float(quoted[1]) == round(abs(change), 1)


def test_a_failing_step_stops_with_its_exit_code(tmp_path):
    if shutil.which("asp", path=_env()["PATH"]) is None:
        pytest.skip("the asp command is not installed (pip install -e .)")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], env=_env(DATA=str(tmp_path / "missing.jsonl")),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 3
    assert "Error:" in result.stderr and result.stdout == ""
    # The failing step's JSON summary is neither written nor left half-written under a temporary name.
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_every_column_is_filled_on_a_small_dataset(tmp_path):
    """The simulated end-to-end column reads the JSON's metrics (it printed "-" when it looked at the top)."""
    if shutil.which("asp", path=_env()["PATH"]) is None:
        pytest.skip("the asp command is not installed (pip install -e .)")
    from util import make_prompts, write_jsonl

    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(48))
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "work")], env=_env(EPOCHS="1", DATA=str(data),
                            BATCH="8", INSTANCES="1"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [row.split("\t") for row in result.stdout.strip().splitlines()]
    assert len(line) == 5 and line[0] == "0" and line[3] == "0"
    simulated = json.loads((tmp_path / "work" / "simulate.e0.json").read_text())["metrics"]["end_to_end_s"]
    assert float(line[2]) > 0 and float(line[4]) == pytest.approx(simulated)


def test_a_key_missing_from_asp_json_stops_the_script(tmp_path):
    """The script's JSON reader fails loudly (exit 70) instead of printing a placeholder."""
    body = SCRIPT.read_text(encoding="utf-8")
    start = body.index("json_get() {")
    end = body.index("; }", start) + 3
    (tmp_path / "good.json").write_text('{"metrics": {"a": 2}}')
    (tmp_path / "bad.json").write_text('{"a": 1}')
    probe = (f"set -euo pipefail\npython={sys.executable}\n{body[start:end]}\n"
             f"x=$(json_get metrics.a <{tmp_path}/good.json)\necho $x\n"
             f"x=$(json_get metrics.a <{tmp_path}/bad.json)\necho unreachable\n")
    result = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout == "2\n" and result.returncode == 70
    assert "no 'metrics.a' in the JSON document" in result.stderr


def test_the_emulated_truth_stays_put_when_the_plan_changes(tmp_path):
    """emulate_rollouts drew each epoch's truth around that epoch's own predictions, so history that changed the
    predictions changed the truth too (epoch 1 of the sample data emulated 22% more tokens than epoch 0)."""
    import importlib.util

    import polars as pl

    from asp_cli import ScheduleSettings, schedule
    from util import make_prompts, write_jsonl

    spec = importlib.util.spec_from_file_location("emulate_rollouts", REPO / "examples" / "emulate_rollouts.py")
    emulator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(emulator)
    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(40))
    settings = ScheduleSettings(instances=2, train_batch_size=8, samples_per_prompt=4)
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    schedule([data], first, settings=settings)
    ids = pl.read_parquet(first)["prompt_id"].to_list()
    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": i, "response_tokens": 3000} for i in ids[:10]])
    schedule([data], second, settings=settings, history=[history])  # a history that moves every prediction

    def lengths(path, **kwargs):
        log = emulator.emulate(path, epoch_label=1, seed=0, schedule_epoch=None, **kwargs)
        return log.sort("prompt_id", "sample")["response_tokens"].to_list()

    assert lengths(second) != lengths(first)  # each schedule's own predictions: the truth moved
    assert lengths(second, truth_from=first) == lengths(first)


def test_the_emulator_logs_each_schedule_epoch_as_its_own_epoch_which_asp_observe_reads(tmp_path):
    """A library newcomer's round: the README's Python schedule (epochs=2) emulated as the README says (no
    --schedule-epoch) wrote each prompt's samples twice, the same draws under one --epoch-label, and `asp observe`
    refused the log as "sample 0 of epoch 0 again, of the same length"; the emulator then only printed a note. Each
    row now carries its own epoch, counted from --epoch-label, drawn as that epoch replayed alone would be: `asp
    observe` reads the log as those epochs' samples, and epoch 0's draws (the ones replays of such logs take, the
    oldest epoch first) are the ones the log held before."""
    import subprocess
    import sys

    import polars as pl

    from asp_cli import ScheduleSettings, observe, schedule
    from util import make_prompts, write_jsonl

    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(12))
    made = tmp_path / "s.parquet"
    schedule(data, made, settings=ScheduleSettings(instances=2, train_batch_size=4, samples_per_prompt=2, epochs=2))

    def emulate(name, *extra):
        said = subprocess.run([sys.executable, str(REPO / "examples" / "emulate_rollouts.py"), str(made), "-o",
                               str(tmp_path / name), *extra], capture_output=True, text=True, check=True).stderr
        return pl.read_ndjson(tmp_path / name), said

    whole, said = emulate("r.jsonl")
    assert ("the schedule's 2 epochs are logged as epochs 0 and 1 (each row its own, counted from --epoch-label 0); "
            "pass --schedule-epoch E for one epoch's log") in said
    assert whole.group_by("epoch").len().sort("epoch").rows() == [(0, 24), (1, 24)]
    for e in (0, 1):  # each epoch as that epoch replayed alone under its label
        alone, note = emulate(f"e{e}.jsonl", "--schedule-epoch", str(e), "--epoch-label", str(e))
        assert "Note:" not in note and alone["epoch"].unique().to_list() == [e]
        key = ["prompt_id", "sample"]
        assert whole.filter(pl.col("epoch") == e).sort(key).equals(alone.sort(key))
    first, second = (whole.filter(pl.col("epoch") == e).sort("prompt_id", "sample")["response_tokens"] for e in (0, 1))
    assert not first.equals(second)  # drawn afresh, not the same samples twice
    history = observe([tmp_path / "r.jsonl"], tmp_path / "h.parquet", schedule=made).history
    assert history.group_by("epoch").len().sort("epoch").rows() == [(0, 24), (1, 24)]
    later, _ = emulate("later.jsonl", "--epoch-label", "3")
    assert sorted(later["epoch"].unique().to_list()) == [3, 4]


def test_a_json_summary_gets_the_mode_a_redirect_gives(tmp_path):
    """to_json wrote each summary under mktemp's name and renamed it, so every summary was 0600 where a plain
    redirect (the script before) gave 0666 less the umask: others reading a shared run's folder were refused."""
    body = SCRIPT.read_text(encoding="utf-8")
    start = body.index("to_json() {")
    end = body.index("\n}\n", start) + 3
    probe = f"set -euo pipefail\numask 022\n{body[start:end]}\nto_json {tmp_path}/s.json echo '{{}}'\n"
    subprocess.run(["bash", "-c", probe], check=True, timeout=60)
    assert (tmp_path / "s.json").read_text() == "{}\n"
    assert (tmp_path / "s.json").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
