"""`asp schedule` from the command line: outputs, streams and exit codes."""

import json
import re
import os
import subprocess
import sys

import polars as pl
import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.schedule_format import read_schedule

from util import SAMPLE_PROMPTS, write_jsonl

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_sample_data_schedules_with_defaults(tmp_path):
    out = tmp_path / "schedule.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "Wrote" in result.stderr and "predicted padding" in result.stderr
    schedule = read_schedule(out)
    assert schedule.frame.height == 3540
    assert schedule.metadata["settings"]["instances"] == 4


def test_json_summary_is_the_only_stdout(tmp_path):
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--json", "--quiet", "--instances", "3", "--epochs", "2")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["rows"] == 2 * 3540 and document["instances"] == 3
    # Whether the trainer binds is judged on the rollout auto's replays expect (the point predictions' makespan
    # misses the tails: on the sample data it said the trainer binds where the replays' rollout was longer).
    rollout = document["expected_rollout_s"]  # the input was judged whole, both epochs
    assert document["trainer_bound"] == (document["predicted_trainer_busy_s"] > rollout)
    assert rollout > document["predicted_rollout_makespan_s"]
    # --quiet keeps Warning: lines only (3,540 prompts leave a partial batch of 128), each also in the JSON.
    assert result.stderr == "".join(f"Warning: {w}\n" for w in document["warnings"])
    assert [w[:40] for w in document["warnings"]] == ["each epoch's 3,540 prompts leave 84 rows"]


def test_options_reach_the_schedule(tmp_path):
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "-k", "6", "-n", "4", "--train-batch-size", "64",
                    "--minibatch-size", "16", "--max-response-tokens", "2048", "--seed", "5", "--plan-with", "mean")
    assert result.exit_code == 0, result.stderr
    frame = read_schedule(out).frame
    assert frame["instance"].max() == 5
    assert frame.group_by("minibatch").len()["len"].max() <= 16
    assert frame["predicted_tokens"].max() <= 2048
    assert (frame["predicted_tokens"] == frame["predicted_mean_tokens"]).all()


def test_existing_output_needs_force(tmp_path):
    out = tmp_path / "s.parquet"
    out.write_bytes(b"old")
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out)
    assert result.exit_code == 7
    assert "exists; pass --force" in result.stderr
    assert out.read_bytes() == b"old"
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--force").exit_code == 0


def test_output_equal_to_input_is_refused(tmp_path):
    copy = tmp_path / "p.jsonl"
    copy.write_bytes(SAMPLE_PROMPTS.read_bytes())
    result = invoke("schedule", copy, "-o", copy, "--force")
    assert result.exit_code == 7 and "is also an input" in result.stderr
    assert copy.read_bytes() == SAMPLE_PROMPTS.read_bytes()


def test_usage_errors_exit_2():
    assert invoke("schedule", "--no-such-option").exit_code == 2
    assert invoke("schedule", SAMPLE_PROMPTS).exit_code == 2  # no -o


def test_history_changes_the_plan(tmp_path):
    history = tmp_path / "h.csv"
    history.write_text("prompt_id,response_tokens\n" + "".join(f"gsm-gsm8k-main-test-#{i},7000\n" for i in range(50)))
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--history", history)
    assert result.exit_code == 0, result.stderr
    frame = read_schedule(out).frame
    observed = frame.filter(pl.col("prediction_source") == "history")
    assert observed.height == 50
    assert "lengths from history for 50 prompts" in result.stderr


def test_source_key_gives_the_history_a_correction_per_source(tmp_path):
    """Sources kept under a name asp does not look for (`task`) got one global correction, with no way to name them."""
    rows = [{"id": f"p{i}", "prompt": f"Question {i}: what is {i} + {i}?", "task": "long" if i % 2 else "short"}
            for i in range(80)]
    data = write_jsonl(tmp_path / "p.jsonl", rows)
    history = tmp_path / "h.csv"
    history.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{6000 if i % 2 else 60}\n" for i in range(20)))
    plain = invoke("schedule", data, "-o", tmp_path / "a.parquet", "--history", history, "--json")
    assert plain.exit_code == 0, plain.stderr
    assert "carry no data_source: one global correction for every prompt (a source under another name: --source-key)" \
        in plain.stderr
    keyed = invoke("schedule", data, "-o", tmp_path / "b.parquet", "--history", history, "--source-key", "task")
    assert keyed.exit_code == 0, keyed.stderr
    assert "carry no data_source" not in keyed.stderr
    unseen = pl.read_parquet(tmp_path / "b.parquet").filter(pl.col("prediction_source") != "history")
    by_task = {row["prompt_id"]: row["predicted_tokens"] for row in unseen.iter_rows(named=True)}
    long = [v for k, v in by_task.items() if int(k[1:]) % 2]
    short = [v for k, v in by_task.items() if not int(k[1:]) % 2]
    assert min(long) > 10 * max(short)  # each source corrected by its own observations
    wrong = invoke("schedule", data, "-o", tmp_path / "c.parquet", "--source-key", "kind")
    assert wrong.exit_code == 3 and "no column 'kind' (from --source-key)" in wrong.stderr


def test_traceback_on_request(tmp_path):
    env = {**os.environ, "ASP_TRACEBACK": "1"}
    proc = subprocess.run([sys.executable, "-m", "asp_cli", "schedule", str(tmp_path / "missing.jsonl"), "-o",
                           str(tmp_path / "o.parquet")], capture_output=True, text=True, env=env)
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr and "Error: " in proc.stderr
    for off in (None, "0", "false", "No"):  # `false` and `no` turned it on (a hostile-input round)
        if off is None:
            env.pop("ASP_TRACEBACK")
        else:
            env["ASP_TRACEBACK"] = off
        proc = subprocess.run([sys.executable, "-m", "asp_cli", "schedule", str(tmp_path / "missing.jsonl"), "-o",
                               str(tmp_path / "o.parquet")], capture_output=True, text=True, env=env)
        assert proc.returncode == 3 and "Traceback" not in proc.stderr, off
        assert proc.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("flag", ["--help"])
def test_every_command_has_help(flag):
    result = invoke(flag)
    assert result.exit_code == 0
    for command in ("schedule",):
        assert command in result.stdout
        assert invoke(command, flag).exit_code == 0


def test_the_max_lag_help_names_verls_synchronous_trainer():
    """A verl newcomer reading `asp schedule --help` found --max-lag's steps, AReaL's and verl's asynchronous
    bounds, and none: not the 0 (with --trainer schedule) that the README asks of verl's default trainer."""
    shown = " ".join(invoke("schedule", "--help").stdout.split())
    assert "0: synchronous training, verl's default trainer (give --trainer schedule with it)" in shown


@pytest.mark.parametrize("flag", ["--train-batch-size", "--samples-per-prompt", "--max-tokens-per-minibatch",
                                  "--max-response-tokens", "--max-lag", "--epochs"])
def test_huge_settings_are_refused_not_an_internal_error(tmp_path, flag):
    """A number beyond 64-bit arithmetic (it overflowed as exit 70) is a settings error: exit 4, one line."""
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, flag, "99999999999999999999999")
    assert result.exit_code == 4, result.stderr
    assert result.stderr.strip() == (
        # A count with a bound of its own says that bound, however far above it the value is.
        "Error: --samples-per-prompt 99999999999999999999999 is not a GRPO group; give at most 4096"
        if flag == "--samples-per-prompt" else
        f"Error: {flag} must be a whole number from 1 to 2147483647 (got 99999999999999999999999)"
        if flag != "--max-lag" else
        "Error: --max-lag must be a number of training steps from 0 to 2147483647 (a fraction is verl's "
        "staleness_threshold), or none for no bound (got 99999999999999999999999)")
    assert not out.exists()


def test_max_lag_none_is_no_bound_and_anything_else_but_a_number_is_refused(tmp_path):
    # The summary tells a trainer-bound run "with --max-lag none, groups queue": the option takes that value.
    default, none = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", default, "--quiet").exit_code == 0
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", none, "--quiet", "--max-lag", "None")
    assert result.exit_code == 0, result.stderr
    assert default.read_bytes() == none.read_bytes()
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "c.parquet", "--max-lag", "soon")
    assert result.exit_code == 2
    assert "give a number of training steps (0, 2, or a fraction such as verl's staleness_threshold 0.1), or none " \
        "for no bound (got 'soon')" in result.stderr
    for bad in ("-1", "nan", "inf", "-0.5"):
        result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "c.parquet", "--max-lag", bad)
        assert result.exit_code == 4 and "--max-lag must be a number of training steps from 0" in result.stderr, bad


def test_a_sampled_input_weighs_the_trainer_against_its_rollout_scaled_up_to_the_run(tmp_path, monkeypatch):
    import asp_cli.arrange.choose as choose

    monkeypatch.setattr(choose, "SAMPLE_PROMPTS", 1000)
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["arrangement"]["evaluated_prompts"] == 1000
    rollout = document["expected_rollout_s"]  # 3,540 prompts judged on 1,000: the run's, not the sample's
    mine = next(c for c in document["arrangement"]["candidates"] if c["name"] == document["arrangement"]["chosen"])
    assert rollout == mine["expected_rollout_s"] > 2 * document["predicted_rollout_makespan_s"]
    assert document["trainer_bound"] == (document["predicted_trainer_busy_s"] > rollout)
    assert (f"({rollout:,.1f} s in auto's replays, which draw lengths with the predictions' spread, scaled up "
            "from their 1,000 prompts x 1 epoch to the run)") in result.stderr


def test_a_synchronous_makespan_line_says_what_autos_replays_expected(tmp_path):
    """Synchronous, the line's makespan holds rollout and training alternating at the point predictions, which miss
    every tail: the chosen candidate's expected end-to-end time is said beside it (an OpenRLHF newcomer read 334 s
    beside an expected 482 s with nothing said of the gap, 2026-12-07); a named arrangement has none to say."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": "q " * (1 + i % 37)} for i in range(96)])
    result = invoke("schedule", data, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--max-lag", "0",
                    "--instances", "3", "--train-batch-size", "16", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    choice = document["arrangement"]
    mine = next(c for c in choice["candidates"] if c["name"] == choice["chosen"])
    assert "expected_rollout_s" not in document
    assert (f"{document['predicted_rollout_makespan_s']:,.1f} s at the point predictions "
            f"({mine['expected_end_to_end_s']:,.1f} s end-to-end, the last step's training included, in auto's "
            "replays, which draw lengths with the predictions' spread); per-instance busy") in result.stderr
    named = invoke("schedule", data, "-o", tmp_path / "n.parquet", "--engine", "streaming", "--max-lag", "0",
                   "--instances", "3", "--train-batch-size", "16", "--arrangement", "long-first")
    assert named.exit_code == 0 and "in auto's replays" not in named.stderr


def test_kv_budget_is_recorded_and_a_bad_one_exits_4(tmp_path):
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--kv-budget", "whole", "--json")
    assert result.exit_code == 0, result.stderr
    schedule = read_schedule(out)
    assert schedule.settings["kv_budget"] == "whole" and schedule.kv_budget == "whole"
    assert "kv_budget" in result.stdout  # the --json summary carries the choice's accounting
    streaming = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "v.parquet", "--kv-budget", "peak",
                       "--engine", "streaming")
    assert streaming.exit_code == 0 and "--kv-budget peak does not change a plan for --engine streaming" in streaming.stderr
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet", "--kv-budget", "peak",
                    "--engine", "static")
    assert result.exit_code == 4 and "--kv-budget peak does not apply to --engine static" in result.stderr
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "u.parquet", "--kv-budget", "some").exit_code == 4


def test_a_static_plan_at_the_whole_cache_is_warned_to_leave_headroom(tmp_path):
    """HF generate does not preempt, and a padded batch's longest response runs past the predictions: a static
    plan cut to the whole KV cache overflows it (asp's own replay: 51 of 78 batches on a small cache)."""
    out = tmp_path / "s.parquet"
    result = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--engine", "static", "--json",
                                 "--max-tokens-per-minibatch", "955113"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("Leave headroom, e.g. --max-tokens-per-minibatch 477,556 (half the cache, the default there)" in w
               for w in warnings)
    default = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--engine", "static", "--json",
                                  "--force", "--kv-budget", "whole"])
    document = json.loads(default.stdout)
    assert not any("headroom" in w for w in document["warnings"])
    assert any("--kv-budget whole does not change a plan for --engine static" in w for w in document["warnings"])
    assert read_schedule(out).metadata["max_tokens_per_minibatch_used"] == 477_556  # half the cache by default
    continuous = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--force", "--quiet"])
    assert continuous.exit_code == 0 and read_schedule(out).metadata["max_tokens_per_minibatch_used"] == 955_113


def test_an_input_without_an_id_column_is_warned_about(tmp_path):
    import polars as pl

    source = tmp_path / "prompts.parquet"
    pl.read_ndjson(SAMPLE_PROMPTS).drop("id").write_parquet(source)
    result = invoke("schedule", source, "-o", tmp_path / "s.parquet", "--json", "--quiet")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["warnings"][-1:] == [  # after the partial last batch's
        "prompts.parquet has no id column, so each prompt's id is its row number; history must use the same ids "
        "(`asp observe --schedule` and `asp probe` do), or name the id column with --id-key"]  # extra_info.index
    # repeats across the sample's sources: not named as an id
    named = json.loads(invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet", "--json", "--quiet").stdout)
    assert not any("no id column" in w for w in named["warnings"])
    # A history that matched these row-number ids already uses them: nothing to warn about (a newcomer's history
    # of verl dumps, matched by text, got the warning all the same).
    history = tmp_path / "h.jsonl"
    history.write_text("".join(f'{{"prompt_id": "{i}", "response_tokens": {100 + i}}}\n' for i in range(40)))
    matched = invoke("schedule", source, "-o", tmp_path / "u.parquet", "--json", "--quiet", "--history", history)
    assert matched.exit_code == 0, matched.stderr
    assert not any("no id column" in w for w in json.loads(matched.stdout)["warnings"])


def test_under_a_lag_bound_the_summary_says_rollout_waits_for_the_trainer(tmp_path):
    # A newcomer saw a 15,233 s makespan beside 1,795-1,942 s of instance busy time and nothing to explain it.
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--max-lag", "0", "--trainer",
                    "schedule")
    assert result.exit_code == 0, result.stderr
    assert "expected policy lag under --max-lag 0 (synchronous training" in result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("  synchronous steps:"))
    assert "each step's rollout lasts as long as its slowest instance; the instances are busy at most" in line
    # The figure is named and rounded as on the makespan line above it (a newcomer read "predicted makespan of
    # rollout and training alternating ...: 442.5 s" there and "the 443 s makespan (training included)" here).
    document = read_schedule(tmp_path / "s.parquet").metadata["summary"]
    makespan = f"{document['predicted_rollout_makespan_s']:,.1f} s"
    assert f"the {makespan} predicted makespan (the training between steps included)" in line
    assert f"  predicted makespan (synchronous steps: rollout and training alternate; it ends with the last step's " \
           f"rollout, the training of every step before it included): {makespan} at the point predictions" in result.stderr
    assert f"at most {max(document['predicted_instance_busy_s']):,.1f} s of" in line
    free = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet")
    assert "synchronous steps" not in free.stderr and "rollout waits for the trainer" not in free.stderr
    # Without a bound the summary names the options a synchronous trainer is planned with (a verl newcomer left
    # out --max-lag 0 and only `asp export --format verl` told them).
    assert "a synchronous trainer has none, and is planned with --max-lag 0 --trainer schedule" in " ".join(
        free.stderr.split())
    # ... on servers that refill, which those trainers run (a verl newcomer followed it on the blocking engine).
    assert "default trainers, whose servers refill freed slots: with --engine streaming too)" in " ".join(
        free.stderr.split())
    served = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "v.parquet", "--engine", "streaming")
    assert "a synchronous trainer has none" in served.stderr and "with --engine streaming too" not in " ".join(
        served.stderr.split())


def test_synchronous_training_over_many_steps_is_scheduled(tmp_path):
    # At a flat 60 rounds of holds, --max-lag 0 --trainer schedule gave up past about 60 train steps (exit 4 on
    # the sample data's 3 epochs, 84 steps): each round moves the holds about one step.
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--json", "--quiet", "--epochs", "3",
                    "--max-lag", "0", "--trainer", "schedule")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["train_steps"] >= 84 and document["expected_lag_max"] == 0


def test_the_predicted_padding_is_said_beside_its_value_under_autos_draws(tmp_path):
    # A newcomer read 5.9% at the point predictions (every minibatch's groups alike) and 74% on emulated real
    # lengths, a shuffle's 50% and 80%: the draws' figure, said beside it, is the one near what a run pays.
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    choice = document["arrangement"]
    by_name = {c["name"]: c for c in choice["candidates"] if c["kv_budget"] == choice["kv_budget"]}
    drawn, shuffle = by_name[choice["chosen"]]["expected_padding_fraction"], by_name["shuffle"]["expected_padding_fraction"]
    assert document["predicted_padding_fraction"] < drawn < shuffle < 1
    line = next(x for x in result.stderr.splitlines() if x.startswith("  predicted padding:"))
    assert (f"{document['predicted_padding_fraction']:.1%} (slots a static batch of each minibatch would leave idle at "
            f"the predicted group lengths, a floor: {drawn:.1%} under auto's draws of lengths, which spread them as "
            f"the predictions do, a shuffle's {shuffle:.1%};") in line
    named = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet", "--arrangement", "interleave")
    assert "under auto's draws" not in named.stderr  # no draws made


def test_a_schedule_that_mixes_lengths_says_why_its_padding_is_high(tmp_path):
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--arrangement", "shuffle")
    assert result.exit_code == 0, result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("  predicted padding:"))
    assert line.endswith("tail included); high because shuffle deals prompts at random")
    packed = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet", "--arrangement", "interleave")
    assert "high because" not in packed.stderr


def test_the_summary_says_when_autos_pick_trains_a_length_curriculum():
    # A schedule whose choice names no candidate with representative steps (older files; none within the bound):
    # only a step deviation far above the shuffle's is said.
    from asp_cli.arrange.choice_summary import arrangement_line

    def choice(own: float, **extra) -> dict:
        return {"setting": "auto", "chosen": "long-first", "kv_budget": "whole", "steps": "any", "engine": "continuous",
                "draws": 3, "evaluated_prompts": 10,
                "candidates": [{"name": "long-first", "kv_budget": "whole", "expected_step_deviation_p90": own,
                                "expected_end_to_end_s": 90.0},
                               {"name": "shuffle", "kv_budget": "whole", "expected_step_deviation_p90": 0.09,
                                "expected_end_to_end_s": 100.0}],
                **extra}

    line = arrangement_line(choice(0.51))
    assert ("\n  its training steps are a length curriculum: a step's mean length is expected up to 51% off the "
            "epoch's (90th percentile; a shuffle's 9%)") in line
    assert "length curriculum" not in arrangement_line(choice(0.2))  # about a shuffle's
    assert "length curriculum" not in arrangement_line(choice(0.51, steps="representative"))
    assert "length curriculum" not in arrangement_line(choice(0.51, setting="long-first"))  # forced: the user chose it
    # With the candidate that has representative steps recorded, the line names it and what it costs.
    line = arrangement_line(choice(0.51, representative_alternative={
        "name": "shuffle", "kv_budget": "whole", "step_deviation_bound": 0.13}))
    assert ("its training steps are expected to be a length curriculum, so the order the policy trains on changes, "
            "not only the speed: a step's mean length 51% off the epoch mean at the 90th percentile, where a random "
            "arrangement's are within about 13%; of the candidates whose steps are about that, the fastest within the tie margin, shuffle, is expected to take "
            "100 s (11.1% slower): --steps representative takes it") in line
    assert line.count("its training steps") == 1



def test_verls_rollouter_limit_is_recorded_and_refused_where_it_cannot_apply(tmp_path):
    """--prompts-per-server (verl's async_training.concurrent_samples_per_replica): recorded in the settings and
    the choice, said in the summary; exit 4 without asynchronous training on servers. Without it the settings carry
    no such key (schedules read as before it existed)."""
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--engine", "streaming", "--max-lag", "2",
                    "--prompts-per-server", "16", "--json")
    assert result.exit_code == 0, result.stderr
    schedule = read_schedule(out)
    assert schedule.settings["prompts_per_server"] == 16 and schedule.recorded_settings.prompts_per_server == 16
    choice = json.loads(result.stdout)["arrangement"]
    assert choice["timed_as"] == "verl-async" and choice["prompts_per_server"] == 16
    assert "16 prompts in flight per server" in result.stderr
    plain = tmp_path / "p.parquet"
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", plain).exit_code == 0
    assert "prompts_per_server" not in read_schedule(plain).settings
    for bad in (("--engine", "streaming", "--max-lag", "0"), ("--max-lag", "2"),
                ("--engine", "streaming", "--max-lag", "2", "--trainer", "schedule"),
                ("--engine", "streaming", "--max-lag", "2", "--prompts-per-server", "0")):
        args = bad if "--prompts-per-server" in bad else (*bad, "--prompts-per-server", "16")
        refused = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "x.parquet", *args)
        assert refused.exit_code == 4 and "--prompts-per-server" in refused.stderr, (bad, refused.output)
        assert not (tmp_path / "x.parquet").exists()


def test_the_verl_trainer_planned_for_is_recorded_and_refused_where_it_cannot_apply(tmp_path):
    """--verl-trainer colocate-async: auto times its candidates as verl's v1 trainer runs that mode, recorded in the
    settings and the choice and said in the summary. Refused (exit 4, nothing written, the message naming the fix)
    off servers, without a lag bound for a v1 mode, beside --prompts-per-server for a v1 mode, with fully-async and
    --trainer schedule, and for a name that is not one of verl's asynchronous trainers."""
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--engine", "streaming", "--max-lag", "1",
                    "--verl-trainer", "colocate-async", "--json")
    assert result.exit_code == 0, result.stderr
    schedule = read_schedule(out)
    assert schedule.settings["verl_trainer"] == "colocate-async"
    assert schedule.recorded_settings.verl_trainer == "colocate-async"
    choice = json.loads(result.stdout)["arrangement"]
    assert choice["timed_as"] == "verl-async" and choice["verl_trainer"] == "colocate-async"
    said = " ".join(result.stderr.split())
    assert "as verl's v1 trainer runs colocate_async" in said
    # The servers sleep while the trainer trains: nothing "binds", the two add (said instead).
    assert "in colocate_async the servers sleep while the trainer trains" in said and "trainer binds" not in said
    assert "the expected end-to-end above counts that" in said
    # A named arrangement (or asp's buffer) is not timed so: the pause is said all the same, and that the figures
    # let rollout run on.
    named = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "n.parquet", "--engine", "streaming", "--max-lag",
                   "1", "--verl-trainer", "colocate-async", "--arrangement", "shuffle", "--json")
    assert named.exit_code == 0, named.stderr
    words = " ".join(named.stderr.split())
    assert json.loads(named.stdout)["verl_trainer"] == "colocate-async"
    assert ("in colocate_async the servers sleep while the trainer trains" in words and "the figures above let "
            "rollout run on (`asp simulate`'s 'verl v1 async' line replays the plan that way)" in words)
    assert "trainer binds" not in words
    for bad, said in ((("--max-lag", "1"), "a warm-up ahead: add --engine streaming, or drop it"),
                      (("--engine", "streaming", "--max-lag", "0"), "add --max-lag other than 0, or drop it"),
                      ((), "add --engine streaming and --max-lag equal to trainer.v1.colocate_async.num_warmup_batches "
                           "(1 by default), or drop it"),
                      (("--engine", "streaming", "--max-lag", "1", "--prompts-per-server", "16"),
                       "--prompts-per-server is verl's fully asynchronous rollouter's limit"),
                      (("--engine", "streaming", "--max-lag", "1", "--trainer", "schedule", "--prompts-per-server",
                        "16"), "--prompts-per-server is verl's fully asynchronous rollouter's limit"),
                      (("--engine", "streaming", "--max-lag", "1", "--verl-trainer", "colocate_async"),
                       "did you mean colocate-async?"),
                      (("--engine", "streaming", "--max-lag", "1", "--trainer", "schedule", "--verl-trainer",
                        "fully-async"), "use --trainer arrival"),
                      (("--engine", "streaming", "--max-lag", "1", "--verl-trainer", "ppo"),
                       "--verl-trainer must be one of fully-async, colocate-async, separate-async")):
        args = bad if "--verl-trainer" in bad else (*bad, "--verl-trainer", "colocate-async")
        refused = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "x.parquet", *args)
        assert refused.exit_code == 4 and said in " ".join(refused.stderr.split()), (bad, refused.output)
        assert not (tmp_path / "x.parquet").exists()


def test_the_summary_leads_with_the_arrangement_and_its_expected_gain(tmp_path):
    """A newcomer's complaint: a wall of lines after a schedule is written, the arrangement chosen and what it is
    expected to gain fifth and sixth, under the padding, makespan and lag figures. The headline follows the "Wrote"
    line; then the figures at the point predictions; then the notes (the trainer, the lengths), then the columns."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(96)])
    result = invoke("schedule", prompts, "-o", tmp_path / "s.parquet", "--train-batch-size", "16", "--instances", "2")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Wrote ") and lines[1].startswith("  arrangement: "), lines
    # The pick and its gain on the headline, then a short line per candidate, the pick's marked (the one line of
    # every candidate's time ran to ~900 characters: two newcomers, verl and slime).
    assert "(auto), expected " in lines[1] and "than a shuffle (" in lines[1], lines[1]
    rows = [line for line in lines[2:] if line.startswith("    ")]
    assert len(rows) >= 3 and lines[2:2 + len(rows)] == rows and max(map(len, rows)) < 100, rows
    assert sum(row.endswith("  the pick") for row in rows) == 1 and lines[2 + len(rows)].startswith("  (auto, for the ")
    starts = [line.split(":")[0].strip() for line in lines]
    padding = starts.index("predicted padding")
    assert any(line.startswith("  expected ") and "a shuffle" in line for line in lines[2:padding]), lines
    assert [line for line in lines if not line.startswith("Warning: ")][-1].startswith("  columns: "), lines
    assert any(line.startswith("  lengths from the bundled model") for line in lines[padding:])


def test_on_servers_the_summary_counts_request_batches(tmp_path):
    # A newcomer read "3,540 minibatches on 4 instances" for a shuffle on servers, one per prompt, as a mistake.
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--engine", "streaming",
                    "--arrangement", "shuffle")
    assert result.exit_code == 0, result.stderr
    first = result.stderr.splitlines()[0]
    # (and an OpenRLHF newcomer could not parse the line that said so: requests, plainly)
    assert "rows, 3,540 requests of one prompt each (its group of samples) on 4 instances" in first
    bands = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "b.parquet", "--engine", "streaming",
                   "--arrangement", "bands")
    assert " request batches (a few prompts sent to the servers at once) on 4 instances" in bands.stderr
    blocking = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "t.parquet", "--arrangement", "shuffle")
    assert "request batches" not in blocking.stderr and " minibatches on 4 instances" in blocking.stderr


@pytest.mark.parametrize("value, words", [
    ("99999999999999999999", "--instances 99999999999999999999 is not a rollout fleet; give at most 100000"),
    ("200000", "--instances 200000 is not a rollout fleet; give at most 100000"),
    ("-1", "--instances must be a whole number from 1 to 100000 (got -1)"),
])
def test_instances_out_of_range_name_the_same_bound_however_far_out(tmp_path, value, words):
    # A newcomer: -1 read "from 1 to 100000" and 99999999999999999999 "from 1 to 2147483647".
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "s.parquet", "--instances", value)
    assert result.exit_code == 4 and words in result.stderr, result.stderr
    assert not (tmp_path / "s.parquet").exists()


def test_a_lag_past_the_bound_is_said_with_the_gate_that_holds(tmp_path):
    """The lag rule holds back the groups started ahead; one that finishes late is trained past the bound, and a
    pipeline gated on `asp report --check --max-lag L` stopped there (a newcomer, slime). The summary says so and
    names the gate this schedule passes; the report's check agrees."""
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--engine", "streaming", "--max-lag", "1", "-k", "8",
                    "--train-batch-size", "32", "--arrangement", "shuffle", "--json")
    assert result.exit_code == 0, result.stderr
    worst = json.loads(result.stdout)["expected_lag_max"]
    assert worst > 1
    said = " ".join(result.stderr.split())
    assert ("a group that finishes late is trained past the bound (the rule holds back the groups started ahead, as "
            f"AReaL's and verl's do), so `asp report --check --max-lag 1` fails on this schedule: gate on its "
            f"expected max, --max-lag {worst}") in said
    assert invoke("report", out, "--check", "--quiet", "--max-lag", "1").exit_code == 1
    assert invoke("report", out, "--check", "--quiet", "--max-lag", str(worst)).exit_code == 0
    # A fraction (verl's count rule) is no gate `asp report` takes: it was named, and refused there.
    fraction = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "f.parquet", "--engine", "streaming", "--max-lag",
                      "0.1", "-k", "8", "--train-batch-size", "32", "--arrangement", "shuffle", "--json")
    said = " ".join(fraction.stderr.split())
    assert "--max-lag 0.1` fails" not in said and "so gate `asp report --check` on its expected max, --max-lag " in said


def test_quiet_keeps_warnings_and_the_summary_names_the_columns_read(tmp_path):
    """A MindSpeed newcomer's CI ran `asp schedule --quiet` and kept no warning; their `task` column went unused
    without a word until the second epoch's history said so."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"uid": f"u{i}", "problem": f"Problem {i}", "task": "a", "level": i % 3}
                                              for i in range(20)])
    quiet = invoke("schedule", data, "-o", tmp_path / "q.parquet", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr.startswith(
        "Warning: --train-batch-size 128 is larger than the 20 prompts of an epoch")
    said = invoke("schedule", data, "-o", tmp_path / "s.parquet", "--json")
    assert ("\n  columns: p.jsonl: prompt 'problem', id 'uid', no data source (--source-key names one), difficulty "
            "'level'\n") in said.stderr
    assert json.loads(said.stdout)["columns_used"] == {str(data): {"prompt": "problem", "id": "uid", "source": None,
                                                                    "difficulty": "level"}}
    keyed = invoke("schedule", data, "-o", tmp_path / "k.parquet", "--source-key", "task")
    assert "id 'uid', data source 'task', difficulty 'level'" in keyed.stderr


def test_a_history_matching_no_row_number_says_to_name_the_prompts_id_first(tmp_path):
    """A slime newcomer's prompts keep their id in metadata.id (found: metadata.source); the epoch log, keyed by it,
    matched no row number, and the first fix named was --history-id-key."""
    rows = [{"prompt": [{"role": "user", "content": f"Solve {i} + {i}."}],
             "metadata": {"source": "dapo", "id": f"dapo-{i:04d}"}} for i in range(40)]
    data = tmp_path / "dapo.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"prompt_id": f"dapo-{i:04d}", "response_length": 300}) + "\n" for i in range(40)))
    result = invoke("schedule", data, "-o", tmp_path / "s.parquet", "--history", log)
    assert result.exit_code == 0, result.stderr
    assert ("columns: dapo.jsonl: prompt 'prompt', id the row number (--id-key metadata.id names the rows' own), "
            "data source 'metadata.source'") in result.stderr
    assert ("Warning: none of the 40 prompt ids in --history is among the prompts, so every length comes from the "
            "model: dapo.jsonl has no id column, so each prompt's id is its row number; name the prompts' id column "
            "with --id-key (e.g. --id-key metadata.id, which the rows hold), or check --history-id-key") in result.stderr
    named = invoke("schedule", data, "-o", tmp_path / "t.parquet", "--history", log, "--id-key", "metadata.id",
                   "--json", "--quiet", "--seed", "1", "--train-batch-size", "8")
    assert json.loads(named.stdout)["warnings"] == [], named.stdout
    predicted = invoke("predictor", "predict", data, "-o", tmp_path / "p.parquet", "--history", log, "--json", "--quiet")
    assert json.loads(predicted.stdout)["warnings"][0].endswith(
        "name the prompts' id column with --id-key (e.g. --id-key metadata.id, which the rows hold), or check "
        "--history-id-key")


def test_the_router_timed_with_is_recorded_replayed_by_simulate_and_refused_where_it_cannot_apply(tmp_path):
    """--router cache-aware (sglang-router's default policy, slime's): auto times its candidates with each group's
    samples on one server, recorded in the settings and the choice, said in the summary; `asp simulate` replays the
    schedule that way ("as sglang routes", and the comparison's "as sglang s" column). Refused (exit 4, nothing
    written, naming the fix) off servers, beside --dispatch planned or --verl-trainer, and misspelled."""
    out = tmp_path / "s.parquet"
    result = invoke("schedule", SAMPLE_PROMPTS, "-o", out, "--engine", "streaming", "--max-lag", "0", "--trainer",
                    "schedule", "--router", "cache-aware", "--json")
    assert result.exit_code == 0, result.stderr
    schedule = read_schedule(out)
    assert schedule.settings["router"] == "cache-aware" and schedule.recorded_settings.router == "cache-aware"
    assert json.loads(result.stdout)["arrangement"]["router"] == "cache-aware"
    assert "through sglang-router's cache_aware policy (--router cache-aware" in " ".join(result.stderr.split())
    assert "slime reads the file in its own order unless --rollout-shuffle" in " ".join(result.stderr.split())
    plain = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "p.parquet", "--engine", "streaming")
    assert "router" not in read_schedule(tmp_path / "p.parquet").settings and "sglang" not in plain.stderr
    replayed = invoke("simulate", out, "--compare")
    assert replayed.exit_code == 0, replayed.stderr
    words = " ".join(replayed.output.split())
    assert "as sglang routes" in words and "as sglang s" in words and "as verl s" not in words
    # Every row of the column routed by sglang-router, verl's default and the planned rows too (a review: they went
    # through asp's verl plug-ins, which do not run behind it).
    # The verdict judges asp as that router routes it too, and against the file's own order, slime's default.
    assert "as sglang-router (slime) routes, asp" in words and "the fastest row so routed" in words
    # Exported for slime, each batch keeps the simulated order (one chunk: slime submits a rollout in file order).
    exported = invoke("export", out, SAMPLE_PROMPTS, "-o", tmp_path / "o.jsonl", "--order", "train")
    assert exported.exit_code == 0 and "each batch in the schedule's own order, as one loop submits it" in exported.stderr
    rows = json.loads(invoke("simulate", out, "--compare", "--json").stdout)["comparison"]
    routed = [r for r in rows if r.get("verl_routed_end_to_end_s")]
    assert len(routed) > 10 and all(r.get("routed_by") == "cache-aware" for r in routed)
    # slime's train_async.py: made with --max-lag 1 and a trainer that follows the schedule, timed and replayed by
    # rollout, each generated while the step before trains.
    overlapped = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "a.parquet", "--engine", "streaming",
                        "--max-lag", "1", "--trainer", "schedule", "--router", "cache-aware")
    assert "as slime's train_async.py runs" in " ".join(overlapped.stderr.split()), overlapped.output
    words = " ".join(invoke("simulate", tmp_path / "a.parquet").output.split())
    assert "(slime's train_async.py through sglang-router's cache_aware policy" in words
    assert "summed over its steps (the training beside them left out)" in words
    said = invoke("export", tmp_path / "a.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "a.jsonl", "--order", "train")
    assert "train_async.py, each rollout generated while the step before trains" in " ".join(said.stderr.split())
    said = invoke("export", out, SAMPLE_PROMPTS, "-o", tmp_path / "s.jsonl", "--order", "train")
    assert "train.py, synchronous steps, as the schedule was timed" in " ".join(said.stderr.split())
    for bad, said in ((("--router", "cache-aware"), "add --engine streaming, or drop it"),
                      (("--engine", "streaming", "--router", "cache_aware"), "did you mean cache-aware?"),
                      (("--engine", "streaming", "--router", "cache-aware", "--dispatch", "planned"), "drop one"),
                      (("--engine", "streaming", "--max-lag", "1", "--router", "cache-aware", "--verl-trainer",
                        "fully-async"), "drop --router cache-aware, or --verl-trainer")):
        refused = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "x.parquet", *bad)
        assert refused.exit_code == 4 and said in " ".join(refused.stderr.split()), (bad, refused.output)
        assert not (tmp_path / "x.parquet").exists()


def test_openrlhfs_deal_is_timed_replayed_exported_and_refused_where_openrlhf_does_not_run(tmp_path):
    """--router group-round-robin (OpenRLHF 0.11.2: a prompt's samples together, a batch's prompts dealt to the
    engines in turn, its generator waiting for the whole batch): an OpenRLHF newcomer found its routing described as
    least-pending and its asynchronous mode timed as overlapping batches, which OpenRLHF does not run."""
    sync = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "orl0.parquet",
                  "--engine", "streaming", "--max-lag", "0", "--trainer", "schedule", "--router", "group-round-robin")
    assert sync.exit_code == 0, sync.output
    assert "as OpenRLHF's synchronous trainer rolls out a batch" in " ".join(sync.stderr.split())
    overlapped = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "orl1.parquet", "--force", "--engine",
                        "streaming", "--max-lag", "1", "--trainer", "schedule", "--router", "group-round-robin",
                        "--json")
    assert overlapped.exit_code == 0, overlapped.output
    choice = json.loads(overlapped.stdout)["arrangement"]
    assert choice["timed_as"] == "openrlhf-async" and choice["router"] == "group-round-robin"
    assert "as OpenRLHF's asynchronous trainer runs" in " ".join(overlapped.stderr.split())
    words = " ".join(invoke("simulate", tmp_path / "orl1.parquet").output.split())
    assert "as OpenRLHF routes" in words and "OpenRLHF's asynchronous trainer" in words
    assert "the batch's prompts dealt to the engines in turn" in words
    said = " ".join(invoke("export", tmp_path / "orl1.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "orl1.jsonl",
                           "--force", "--order", "train").stderr.split())
    assert "--train.async_enable --train.async_queue_size 1" in said and "--data.input_key prompt" in said
    assert "each batch in the schedule's own order, as one loop submits it" in said
    assert "--train.async_enable" not in " ".join(invoke(
        "export", tmp_path / "orl0.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "orl0.jsonl", "--force", "--order", "train").stderr.split())
    # OpenRLHF's trainer trains each batch whole (lag 0 or 1); a trainer that takes groups as they finish is AReaL's
    # (a lag bound above 0: at lag 0 it trained other batches than the deal's, a review: 2,206 of 3,540 exported rows
    # on another engine than planned).
    for lag, trainer in (("2", "schedule"), ("0", "arrival"), ("none", "schedule")):
        refused = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "x.parquet", "--engine", "streaming",
                         "--max-lag", lag, "--trainer", trainer, "--router", "group-round-robin")
        said = " ".join(refused.stderr.split())
        assert refused.exit_code == 4 and "--router group-round-robin deals a batch's groups" in said, refused.output
        assert said.endswith(f"(got --max-lag {lag} --trainer {trainer})"), said


@pytest.mark.parametrize(("options", "deal", "other"), [
    ((), "made for AReaL's controller (--router group-round-robin --trainer arrival, no --max-lag: no bound)",
     "for OpenRLHF, which trains each rollout batch whole, add --trainer schedule --max-lag 0"),
    (("--max-lag", "2"), "made for AReaL's controller (--router group-round-robin --trainer arrival, --max-lag 2)",
     "add --trainer schedule --max-lag 0 (synchronous, its default) or --max-lag 1 (--train.async_enable)"),
    (("--trainer", "schedule", "--max-lag", "0"), "made for OpenRLHF's synchronous trainer (its default: --router "
     "group-round-robin --trainer schedule --max-lag 0)", "for AReaL's asynchronous controller, --trainer arrival"),
    (("--trainer", "schedule", "--max-lag", "1"), "made for OpenRLHF's --train.async_enable (--router "
     "group-round-robin --trainer schedule --max-lag 1)", "for its synchronous default give --max-lag 0"),
])
def test_a_plan_for_a_shared_router_says_first_whose_deal_it_was_made_for(tmp_path, options, deal, other):
    """`--router group-round-robin` without `--trainer schedule --max-lag 0` is AReaL's controller: an OpenRLHF
    newcomer who left them out got AReaL's plan, exit 0, said only deep in the arrangement line."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1), "answer": str(i)}
                                                 for i in range(48)])
    result = invoke("schedule", prompts, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--router",
                    "group-round-robin", "--train-batch-size", "16", "--instances", "2", *options)
    assert result.exit_code == 0, result.output
    second = result.stderr.splitlines()[1]
    assert second.startswith(f"  {deal}") and other in second, second


def test_a_plan_for_slimes_router_says_so_and_verls_balancer_adds_no_line(tmp_path):
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(48)])
    common = ("schedule", prompts, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--train-batch-size", "16",
              "--instances", "2", "--force")
    slime = invoke(*common, "--router", "cache-aware", "--trainer", "schedule", "--max-lag", "1")
    assert slime.exit_code == 0, slime.output
    assert slime.stderr.splitlines()[1] == ("  made for slime's router (--router cache-aware: sglang-router's "
                                            "cache-aware policy) and train_async.py, each rollout generated while "
                                            "the step before trains")
    verl = invoke(*common)
    # No "made for" line: the arrangement (the summary's headline) follows the "Wrote" line.
    assert verl.exit_code == 0 and verl.stderr.splitlines()[1].startswith("  arrangement: "), verl.output


@pytest.mark.parametrize(("options", "routed"), [
    ((), "verl's balancer (least-pending: a group's samples spread over the servers)"),
    (("--router", "least-pending"), "verl's balancer (least-pending: a group's samples spread over the servers)"),
    (("--dispatch", "planned"), "asp's router plug-in (--dispatch planned: each group to its planned server)"),
])
def test_synchronous_steps_behind_verls_router_say_they_are_verls_and_name_slimes_router(tmp_path, options, routed):
    """`--engine streaming --max-lag 0 --trainer schedule` without `--router cache-aware` (a slime newcomer's slip:
    slime's train.py runs behind sglang-router) passed in silence, timed as verl routes; `asp export` and the
    `--compare` legend said it, the schedule's own summary did not. It says whose routing it assumed, and the
    router each of the other frameworks that take the same steps needs (a note: verl's users make this plan)."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(48)])
    result = invoke("schedule", prompts, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--max-lag", "0",
                    "--trainer", "schedule", "--train-batch-size", "16", "--instances", "2", *options)
    assert result.exit_code == 0, result.output
    second = result.stderr.splitlines()[1]
    assert second == ("  made for verl's synchronous trainer (main_ppo's default: --engine streaming --max-lag 0 "
                      f"--trainer schedule), each sample routed by {routed}; slime's train.py and OpenRLHF's "
                      "synchronous trainer take the same steps behind their own routers: for slime add --router "
                      "cache-aware (sglang-router keeps a group on one server), for OpenRLHF --router "
                      "group-round-robin" + (", each with --dispatch free" if "planned" in options else ""))
    assert not any("Warning" in line and "cache-aware" in line for line in result.stderr.splitlines())  # a note
    # Other lags or trainers on verl's balancer, and blocking engines, add no line.
    for other in (("--engine", "streaming", "--max-lag", "0"), ("--engine", "streaming", "--max-lag", "none",
                                                                 "--trainer", "schedule"),
                  ("--max-lag", "0", "--trainer", "schedule")):
        said = invoke("schedule", prompts, "-o", tmp_path / "o.parquet", "--train-batch-size", "16", "--instances",
                      "2", "--force", *other)
        assert said.exit_code == 0 and said.stderr.splitlines()[1].startswith("  arrangement: "), said.output


@pytest.mark.parametrize(("options", "made_for"), [
    (("--router", "group-round-robin"),
     {"framework": "AReaL", "trainer": "single controller",
      "options": ["--router group-round-robin", "--trainer arrival", "--max-lag none"],
      "alternatives": [{"framework": "OpenRLHF", "trainer": "synchronous",
                        "options": ["--trainer schedule", "--max-lag 0"], "without": []},
                       {"framework": "OpenRLHF", "trainer": "--train.async_enable",
                        "options": ["--trainer schedule", "--max-lag 1"], "without": []}]}),
    (("--router", "group-round-robin", "--trainer", "schedule", "--max-lag", "1"),
     {"framework": "OpenRLHF", "trainer": "--train.async_enable",
      "options": ["--router group-round-robin", "--trainer schedule", "--max-lag 1"],
      "alternatives": [{"framework": "OpenRLHF", "trainer": "synchronous", "options": ["--max-lag 0"], "without": []},
                       {"framework": "AReaL", "trainer": "single controller",
                        "options": ["--trainer arrival", "--max-lag N"], "without": []}]}),
    (("--router", "cache-aware", "--max-lag", "2"),
     {"framework": "slime", "trainer": None, "options": ["--router cache-aware"],
      "alternatives": [{"framework": "slime", "trainer": "train.py",
                        "options": ["--max-lag 0", "--trainer schedule"], "without": []},
                       {"framework": "slime", "trainer": "train_async.py",
                        "options": ["--max-lag 1", "--trainer schedule"], "without": []}]}),
    (("--router", "cache-aware", "--max-lag", "0", "--trainer", "schedule"),
     {"framework": "slime", "trainer": "train.py",
      "options": ["--router cache-aware", "--max-lag 0", "--trainer schedule"], "alternatives": []}),
    (("--max-lag", "0", "--trainer", "schedule", "--dispatch", "planned"),
     {"framework": "verl", "trainer": "synchronous",
      "options": ["--engine streaming", "--max-lag 0", "--trainer schedule", "--dispatch planned"],
      "alternatives": [{"framework": "slime", "trainer": "train.py",
                        "options": ["--router cache-aware", "--dispatch free"], "without": []},
                       {"framework": "OpenRLHF", "trainer": "synchronous",
                        "options": ["--router group-round-robin", "--dispatch free"], "without": []}]}),
    (("--max-lag", "1"), None),
])
def test_json_says_whose_deal_the_plan_was_made_for(tmp_path, options, made_for):
    """`asp schedule --json` had no field for the "made for ..." line: a script could not tell an OpenRLHF plan
    from AReaL's, or verl's synchronous one from slime's, without parsing stderr. `made_for` holds the framework,
    its trainer, the options that make the deal and, for each other framework or trainer, the options that would
    make it; the line says the same options; absent where the plan names no framework's deal."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(48)])
    result = invoke("schedule", prompts, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--train-batch-size",
                    "16", "--instances", "2", "--json", *options)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document.get("made_for", "absent") == (made_for or "absent")  # absent where none, as in older files
    line = result.stderr.splitlines()[1]
    if made_for is None:
        assert line.startswith("  arrangement: "), line
        return
    assert line.startswith(f"  made for {made_for['framework']}'s"), line
    for other in made_for["alternatives"]:
        assert all(option in line for option in other["options"]), (other, line)
    assert read_schedule(tmp_path / "s.parquet").metadata["summary"]["made_for"] == made_for  # the file's too


def test_areals_controller_deals_whole_groups_in_turn(tmp_path):
    """AReaL v1.0.4's default single controller deals each group whole to the next worker's server in turn, in the
    file's order (an AReaL newcomer's round: the docs modelled its SPMD mode's per-sample round-robin): `--router
    group-round-robin --trainer arrival` times auto's candidates so, each row's instance is its turn, and simulate
    and export say so."""
    made = invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "a.parquet", "--engine", "streaming", "--max-lag", "1",
                  "--router", "group-round-robin", "--instances", "4", "--json")
    assert made.exit_code == 0, made.output
    choice = json.loads(made.stdout)["arrangement"]
    assert choice["timed_as"] == "verl-async" and choice["router"] == "group-round-robin"
    assert "as AReaL's controller deals an asynchronous trainer's rollouts" in " ".join(made.stderr.split())
    frame = pl.read_parquet(tmp_path / "a.parquet").sort("seq")
    assert frame["instance"].to_list() == [i % 4 for i in range(frame.height)]
    # One turn over the run, not batch by batch: 101 prompts, batches of 16 and 3 servers divide nothing (a review).
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"id": f"p{i}", "question": "q " * (1 + i % 37)} for i in range(101)])
    assert invoke("schedule", odd, "-o", tmp_path / "odd.parquet", "--engine", "streaming", "--max-lag", "1",
                  "--router", "group-round-robin", "--instances", "3", "--epochs", "2", "--train-batch-size", "16",
                  "-q").exit_code == 0
    frame = pl.read_parquet(tmp_path / "odd.parquet").sort("seq")
    assert frame["instance"].to_list() == [i % 3 for i in range(202)]
    # AReaL's bound is whole steps (a fraction is verl's staleness_threshold); at 0, the per-batch deal with
    # --trainer schedule is AReaL's where the batch is a multiple of the servers, and the export says so.
    fraction = invoke("schedule", odd, "-o", tmp_path / "f.parquet", "--engine", "streaming", "--max-lag", "0.5",
                      "--router", "group-round-robin")
    assert fraction.exit_code == 4 and "a whole number of steps, not a fraction" in fraction.stderr
    for batch, note in (("48", False), ("16", True)):
        assert invoke("schedule", odd, "-o", tmp_path / "z.parquet", "--engine", "streaming", "--max-lag", "0",
                      "--trainer", "schedule", "--router", "group-round-robin", "--instances", "3",
                      "--train-batch-size", batch, "--force", "-q").exit_code == 0
        said = " ".join(invoke("export", tmp_path / "z.parquet", odd, "-o", tmp_path / "z.jsonl",
                               "--force").stderr.split())
        assert "not made for AReaL's controller" not in said and "max_concurrent_rollouts" not in said
        assert ("where the train batch (16) is a multiple of the servers (3)" in said) is note
    words = " ".join(invoke("simulate", tmp_path / "a.parquet").output.split())
    assert "as AReaL routes" in words and "as AReaL's single controller deals them" in words
    said = " ".join(invoke("export", tmp_path / "a.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "a.jsonl").stderr.split())
    assert "rollout.consumer_batch_size=128" in said and "rollout.max_head_offpolicyness=1" in said
    # A value to paste (the servers' slots the schedule was timed with), and RLVRWorkflow's column (a newcomer's round).
    assert re.search(r"rollout\.max_concurrent_rollouts=\d+ \(the servers' slots", said)
    assert "rename 'prompt' to 'messages'" in said
    assert "not made for AReaL's controller" not in said
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", tmp_path / "v.parquet", "--engine", "streaming", "--max-lag",
                  "1", "--arrangement", "shuffle").exit_code == 0  # verl's balancer
    assert "not made for AReaL's controller" in " ".join(invoke(
        "export", tmp_path / "v.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "v.jsonl").stderr.split())
    # In train order the one-loop line names AReaL's deal, not OpenRLHF's, and no longer says the instance is each
    # row's server (AReaL deals the file's rows in turn: the dispatch order's).
    said = " ".join(invoke("export", tmp_path / "a.parquet", SAMPLE_PROMPTS, "-o", tmp_path / "t.jsonl", "--order",
                           "train").stderr.split())
    assert "OpenRLHF deals it" not in said and "AReaL's controller deals the file's rows" in said


def test_an_export_of_several_epochs_given_as_the_prompt_file_is_named_as_one(tmp_path):
    """`asp schedule` given an export of two epochs (each prompt twice) was told E07's "pass --id-key"; it is told
    the file is an asp export and to give the prompt file the schedule was made from, on one line, exit 3."""
    first = invoke("schedule", SAMPLE_PROMPTS, "--epochs", "2", "-o", tmp_path / "s.parquet", "-q")
    assert first.exit_code == 0, first.stderr
    exported = tmp_path / "e.jsonl"
    done = invoke("export", tmp_path / "s.parquet", SAMPLE_PROMPTS, "-o", exported)
    assert done.exit_code == 0, done.stderr
    _refused_as_an_export_of_epochs(tmp_path, exported)


def _refused_as_an_export_of_epochs(tmp_path, exported):
    """`asp schedule` of ``exported``, an export of several epochs: named as one, exit 3, nothing written."""
    again = invoke("schedule", exported, "-o", tmp_path / "s2.parquet")
    assert again.exit_code == 3, again.stderr
    assert again.stderr == (f"Error: {exported}: an asp export (its rows repeat each prompt, once an epoch), not the "
                            "prompt file(s) the schedule was made from; give that file instead (each prompt once, in "
                            "its own order)\n")
    assert not (tmp_path / "s2.parquet").exists()


def _bare_schedule(tmp_path, *args):
    """A dataset without ids (a `prompt` column only) and its schedule, made with the options ``args``."""
    with open(SAMPLE_PROMPTS, encoding="utf-8") as lines:
        texts = [json.loads(next(lines))["prompt"] for _ in range(16)]
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"prompt": text} for text in texts])
    made = invoke("schedule", bare, "-o", tmp_path / "s.parquet", "--instances", "2", "--train-batch-size", "4",
                  "--minibatch-size", "2", "-q", *args)
    assert made.exit_code == 0, made.stderr
    return bare, tmp_path / "s.parquet"


def test_an_export_of_several_epochs_under_a_metadata_key_given_as_prompts_is_named_as_one(tmp_path):
    """A JSON-lines export of two epochs of a dataset without ids, written with --metadata-key (slime's layout, its
    schedule's ids in that object), was read with row numbers as ids, none repeated, and `asp schedule` planned
    every prompt once an epoch twice over, exit 0. It is named as an export, as its Parquet twin is, exit 3."""
    bare, sched = _bare_schedule(tmp_path, "--epochs", "2")
    for name in ("e.jsonl", "e.parquet"):
        exported = tmp_path / name
        done = invoke("export", sched, bare, "--metadata-key", "asp_meta", "-o", exported)
        assert done.exit_code == 0, done.stderr
        _refused_as_an_export_of_epochs(tmp_path, exported)


def test_an_export_of_one_epoch_given_as_prompts_is_named_as_one(tmp_path):
    """One epoch's export holds each prompt once, with asp's seq and train_step: `asp schedule` planned it as the
    dataset, exit 0, a schedule of asp's own output whose row numbers (the ids of a dataset without them) are not the
    dataset's. It is named as an export, as one of several epochs is, exit 3, nothing written; alone, beside its
    dataset, in every layout, and from the Python twin. `asp observe --dataset` still reads one (the file the
    trainer was given)."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.errors import InputError
    from asp_cli.reading import read_prompts

    bare, sched = _bare_schedule(tmp_path)
    said = ("an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns added), not the "
            "prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own order)")
    for name, extra in (("e.jsonl", ()), ("m.jsonl", ("--metadata-key", "asp_meta")), ("e.parquet", ()),
                        ("v.parquet", ("--format", "verl")), ("one.jsonl", ("--epoch", "0"))):
        exported = tmp_path / name
        done = invoke("export", sched, bare, "-o", exported, *extra)
        assert done.exit_code == 0, done.stderr
        for inputs in ([exported], [bare, exported]):
            again = invoke("schedule", *inputs, "-o", tmp_path / "s2.parquet")
            assert again.exit_code == 3, again.stderr
            assert again.stderr == f"Error: {exported}: {said}\n"
            assert not (tmp_path / "s2.parquet").exists()
        with pytest.raises(InputError, match=re.escape(said)):
            schedule([exported], tmp_path / "s2.parquet")
        assert read_prompts([exported])[0].height == 16  # a reader of prompts reads it (observe's dataset)


def test_the_trainer_binds_line_gives_short_runs_their_seconds(tmp_path):
    """The trainer-binds line gave whole seconds: a short run read "about 3 s against 0 s of rollout" beside a
    makespan of 0.4 s. It gives them as the summary's other lines do, to one decimal, the same rollout alike."""
    from asp_cli.cli.schedule import _seconds

    assert [_seconds(s) for s in (0, 0.043, 0.4, 3.14, 1234.56)] == ["0.0", "0.043", "0.4", "3.1", "1,234.6"]
    with open(SAMPLE_PROMPTS, encoding="utf-8") as lines:
        tiny = write_jsonl(tmp_path / "tiny.jsonl", [json.loads(next(lines)) for _ in range(4)])
    result = invoke("schedule", tiny, "-o", tmp_path / "s.parquet", "--max-lag", "1", "--samples-per-prompt", "1",
                    "--max-response-tokens", "64", "--json")
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    said = " ".join(result.stderr.split())
    rollout = summary.get("expected_rollout_s") or summary["predicted_rollout_makespan_s"]
    assert 0 < rollout < 1 and summary["predicted_trainer_busy_s"] > rollout
    assert (f"the trainer binds: its steps need about {summary['predicted_trainer_busy_s']:,.1f} s against "
            f"{rollout:,.1f} s of rollout" in said)
    assert " against 0 s " not in said


def test_an_export_written_with_a_prefix_given_as_prompts_is_named_as_one(tmp_path):
    """`asp export --prefix asp_` names asp's columns asp_seq, asp_train_step, ... (and, under --metadata-key, the
    schedule's id asp_prompt_id): a JSON-lines export so written was known by the exact names seq and train_step
    only, and `asp schedule` planned it as the dataset, exit 0 (one epoch's) or planned each prompt once an epoch
    twice over (two epochs', under --metadata-key). Named as an export, exit 3, as unprefixed ones are. A dataset's
    own prefixed pair (run_seq, run_train_step) is no export: asp's five prefixed columns are asked for."""
    from asp_cli.reading.exported import export_id_key

    one = ("an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns added), not the "
           "prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own order)")
    repeats = ("an asp export (its rows repeat each prompt, once an epoch), not the prompt file(s) the schedule was "
               "made from; give that file instead (each prompt once, in its own order)")
    for epochs, said in ((1, one), (2, repeats)):
        where = tmp_path / f"epochs{epochs}"
        where.mkdir()
        bare, sched = _bare_schedule(where, "--epochs", str(epochs))
        for name, extra, id_key in (("e.jsonl", (), "prompt_id"), ("m.jsonl", ("--metadata-key", "meta"),
                                                                     "meta.asp_prompt_id"),
                                    ("m.parquet", ("--metadata-key", "meta"), "meta.asp_prompt_id")):
            exported = where / name
            done = invoke("export", sched, bare, "-o", exported, "--prefix", "asp_", *extra)
            assert done.exit_code == 0, done.stderr
            assert export_id_key(exported) == id_key  # observe --dataset reads it by the schedule's ids
            again = invoke("schedule", exported, "-o", where / "s2.parquet")
            assert again.exit_code == 3, again.stderr
            assert again.stderr == f"Error: {exported}: {said}\n"
            assert not (where / "s2.parquet").exists()
    import pyarrow.parquet as pq  # an export written before its metadata recorded the prefix: read off the names

    table = pq.read_table(tmp_path / "epochs1" / "m.parquet")
    document = json.loads(table.schema.metadata[b"asp.export"])
    assert document.pop("prefix") == "asp_"
    older = tmp_path / "older.parquet"
    pq.write_table(table.replace_schema_metadata({b"asp.export": json.dumps(document).encode()}), older)
    assert export_id_key(older) == "meta.asp_prompt_id"
    own = write_jsonl(tmp_path / "own.jsonl", [{"id": f"p{i}", "prompt": f"What is {i} + 1?", "run_seq": i,
                                                "run_train_step": i // 2} for i in range(8)])
    assert export_id_key(own) is None
    made = invoke("schedule", own, "-o", tmp_path / "own.parquet", "-q")
    assert made.exit_code == 0, made.stderr


def test_steps_a_rollout_ahead_behind_verls_balancer_say_they_are_verls_v1_trainer_and_name_the_others(tmp_path):
    """`--engine streaming --max-lag 1 --trainer schedule` without a router (a slime newcomer's slip for
    train_async.py, or OpenRLHF's --train.async_enable) said nothing of whose plan it made: verl's v1 trainer with
    asp's replay buffer, which `asp export --format verl` takes for it. The line says so and names the others'
    routers; at a lag of 2, which neither runs, it names none."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(48)])
    common = ("schedule", prompts, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--trainer", "schedule",
              "--train-batch-size", "16", "--instances", "2", "--force")
    one = invoke(*common, "--max-lag", "1")
    assert one.exit_code == 0, one.output
    assert one.stderr.splitlines()[1] == (
        "  made for verl's v1 trainer (colocate_async) with asp's replay buffer: each step trains the groups the "
        "schedule gives it, the rollout a warm-up of 1 train batch ahead "
        "(trainer.v1.colocate_async.num_warmup_batches), each sample routed by verl's balancer (least-pending); for "
        "separate_async add --verl-trainer separate-async; slime's train_async.py and OpenRLHF's "
        "--train.async_enable take the same steps a rollout ahead behind their own routers: for slime add --router "
        "cache-aware, for OpenRLHF --router group-round-robin")
    two = invoke(*common, "--max-lag", "2", "--verl-trainer", "separate-async", "--json")
    assert two.exit_code == 0, two.output
    assert two.stderr.splitlines()[1] == (
        "  made for verl's v1 trainer (separate_async) with asp's replay buffer: each step trains the groups the "
        "schedule gives it, the rollout a warm-up of 2 train batches ahead "
        "(trainer.v1.separate_async.num_warmup_batches), each sample routed by verl's balancer (least-pending)")
    assert json.loads(two.stdout)["made_for"] == {
        "framework": "verl", "trainer": "separate_async", "alternatives": [],
        "options": ["--engine streaming", "--max-lag 2", "--trainer schedule", "--verl-trainer separate-async"]}


def test_a_named_verl_v1_trainer_is_dropped_in_the_other_frameworks_options_the_line_gives(tmp_path):
    """Steps a rollout ahead made with --verl-trainer separate-async: the "made for" line told a slime user to add
    --router cache-aware, which `asp schedule` refuses beside --verl-trainer (verl's trainers route through its
    balancer); it says to leave --verl-trainer out too, and the command it gives runs."""
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"question": "word " * (i % 40 + 1)} for i in range(48)])
    common = ("schedule", prompts, "--engine", "streaming", "--max-lag", "1", "--trainer", "schedule",
              "--train-batch-size", "16", "--instances", "2")
    made = invoke(*common, "-o", tmp_path / "s.parquet", "--verl-trainer", "separate-async", "--json")
    assert made.exit_code == 0, made.output
    assert made.stderr.splitlines()[1].endswith(
        "for slime add --router cache-aware, for OpenRLHF --router group-round-robin, each without --verl-trainer "
        "separate-async"), made.stderr
    # --json says it too (`without`: the plan's options to leave out), where its alternatives could only add options
    assert [(other["framework"], other["options"], other["without"])
            for other in json.loads(made.stdout)["made_for"]["alternatives"]] == [
        ("slime", ["--router cache-aware"], ["--verl-trainer separate-async"]),
        ("OpenRLHF", ["--router group-round-robin"], ["--verl-trainer separate-async"])]
    slime = invoke(*common, "-o", tmp_path / "slime.parquet", "--router", "cache-aware")
    assert slime.exit_code == 0, slime.output
    planned = invoke(*common, "-o", tmp_path / "p.parquet", "--verl-trainer", "colocate-async", "--dispatch", "planned")
    assert planned.exit_code == 0, planned.output
    assert planned.stderr.splitlines()[1].endswith(
        ", each with --dispatch free and without --verl-trainer colocate-async"), planned.stderr


def test_the_summary_counts_one_in_the_singular(tmp_path):
    """'Wrote s.parquet: 1 prompts x 1 epoch(s) = 1 rows, 1 minibatches on 1 instances, 1 train steps.' (as the
    verdict's 'on 1 instances', 4ad828e); auto's line read 'on 1 prompts x 1 epoch(s)'."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"id": "p0", "question": "q q"}])
    out = tmp_path / "s.parquet"
    result = invoke("schedule", data, "-o", out, "--train-batch-size", "1", "--instances", "1",
                    "--samples-per-prompt", "1")
    assert result.exit_code == 0, result.output
    words = " ".join(result.stderr.split())
    assert f"Wrote {out}: 1 prompt x 1 epoch = 1 row, 1 minibatch on 1 instance, 1 train step." in words, words
    assert " on 1 prompt x 1 epoch)" in words, words
    two = invoke("schedule", data, "-o", tmp_path / "t.parquet", "--train-batch-size", "1", "--instances", "2",
                 "--samples-per-prompt", "1", "--epochs", "2")
    assert " = 2 rows, 2 minibatches on 2 instances, 2 train steps." in " ".join(two.stderr.split()), two.output
    assert "1 prompt x 2 epochs" in " ".join(two.stderr.split())
