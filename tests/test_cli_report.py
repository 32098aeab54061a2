import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.schedule_format import METADATA_KEY

from test_report import make_schedule

runner = CliRunner()


@pytest.fixture(scope="module")
def schedules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-report")
    make_schedule(folder / "a.parquet")
    make_schedule(folder / "b.parquet", instances=4, max_lag=2)
    return folder


def run(*args):
    return runner.invoke(app, ["report", *map(str, args)])


def test_summary_goes_to_stdout_and_exits_0(schedules):
    result = run(schedules / "a.parquet")
    assert result.exit_code == 0, result.stderr
    assert "asp report: a.parquet" in result.stdout and "Training queue" in result.stdout
    assert result.stderr == ""


def test_the_report_says_which_arrangement_won_and_for_which_dispatch(tmp_path):
    import json

    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    out = tmp_path / "s.parquet"
    schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))], out,
             settings=ScheduleSettings(instances=3, train_batch_size=32, minibatch_size=16))
    document = json.loads(run(out, "--json").stdout)
    choice = document["provenance"]["arrangement"]
    assert choice["chosen"] in {c["name"] for c in choice["candidates"]} and choice["dispatch"] == "free"
    text = " ".join(run(out).stdout.split())
    assert f"arrangement {choice['chosen']} (auto, for the continuous engine with free dispatch" in text
    # The headline, first in the text as on the page's cards, and in --json (report 1.6) as the summary gives it.
    mine = next(c for c in choice["candidates"] if c["name"] == choice["chosen"] and c["kv_budget"] == choice["kv_budget"])
    gain = choice["expected_gain_over_shuffle"]
    assert document["headline"] == {"expected_end_to_end_s": round(mine["expected_end_to_end_s"], 3),
                                    "whole_run": True, "epochs_judged": 1,
                                    "expected_gain_over_shuffle": round(gain, 4), "order_matters_little": abs(gain) < 0.02,
                                    "judged_in_miniature": False}
    assert run(out).stdout.splitlines()[1] == (f"expected end-to-end, by auto's draws (tails included): "
                                              f"{mine['expected_end_to_end_s']:,.1f} s")
    # A replay is read against what auto's draws expected of the chosen candidate (tails included), not only
    # against the point predictions' makespan, which leaves every tail out (a newcomer read 366 s against 106 s).
    drawn = next(c["expected_rollout_s"] for c in choice["candidates"]
                 if c["name"] == choice["chosen"] and c["kv_budget"] == choice["kv_budget"])
    replayed = " ".join(run(out, "--simulate").stdout.split())
    assert f"({drawn:,.1f} s expected by auto's draws, " in replayed and "at the point predictions" in replayed


def test_a_schedule_made_for_verls_colocated_mode_says_its_timeline_lets_rollout_run_on(tmp_path):
    """verl's colocate_async sleeps the servers while the trainer trains; the report's queue timeline does not (a
    newcomer read "0.0% idle" beside a mode where the two take turns). Said for such a schedule only."""
    colocated, plain = tmp_path / "c.parquet", tmp_path / "p.parquet"
    make_schedule(colocated, arrangement="shuffle", engine="streaming", max_lag=1, verl_trainer="colocate-async")
    make_schedule(plain, arrangement="shuffle", engine="streaming", max_lag=1)
    said = "made for verl's colocate_async, whose servers sleep while the trainer trains"
    assert said in " ".join(run(colocated).stdout.split())
    assert said not in " ".join(run(plain).stdout.split())


def test_the_report_says_whose_deal_the_plan_was_made_for_as_asp_schedule_did(tmp_path):
    """`asp schedule` says under its first line whose framework's router and trainer a plan on servers was made
    for; `asp report` (what a user opens later to see what a schedule does) did not. It says it in a "made for"
    row and in --json's provenance.made_for, worked out from the settings (files made before the summary kept it
    say it too), and not for a plan that names no framework's deal."""
    slime, plain = tmp_path / "s.parquet", tmp_path / "p.parquet"
    make_schedule(slime, arrangement="shuffle", engine="streaming", max_lag=1, trainer="schedule",
                  router="cache-aware")
    make_schedule(plain, arrangement="shuffle", engine="streaming", max_lag=1)
    text = " ".join(run(slime).stdout.split())
    assert ("made for slime's router (--router cache-aware: sglang-router's cache-aware policy) and "
            "train_async.py, each rollout generated while the step before trains") in text
    document = json.loads(run(slime, "--json").stdout)
    assert document["provenance"]["made_for"] == {
        "framework": "slime", "trainer": "train_async.py", "alternatives": [],
        "options": ["--router cache-aware", "--max-lag 1", "--trainer schedule"]}
    assert "made for" not in run(plain).stdout
    assert "made_for" not in json.loads(run(plain, "--json").stdout)["provenance"]
    html = tmp_path / "s.html"
    assert run(slime, "--html", html).exit_code == 0
    assert "<th>made for</th><td><code>slime&#x27;s router" in html.read_text()


def test_json_is_the_only_thing_on_stdout(schedules):
    result = run(schedules / "a.parquet", "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["report_version"] == "1.7"
    assert document["checks"] is None and document["comparison"] is None and document["simulated"] is None
    assert document["size"]["prompts"] == 300


def test_json_is_deterministic(schedules):
    assert run(schedules / "a.parquet", "--json").stdout == run(schedules / "a.parquet", "--json").stdout


def test_compare_shows_both(schedules):
    result = run(schedules / "a.parquet", "--compare", schedules / "b.parquet")
    assert result.exit_code == 0
    assert "A = a.parquet" in result.stdout and "B = b.parquet" in result.stdout
    document = json.loads(run(schedules / "a.parquet", "--compare", schedules / "b.parquet", "--json").stdout)
    assert document["comparison"]["b"] == "b.parquet"
    assert document["comparison"]["other"]["size"]["instances"] == 4


def test_passing_checks_exit_0(schedules):
    result = run(schedules / "a.parquet", "--check", "--max-padding", "0.99", "--max-step-skew", "100", "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""


def test_one_broken_check_is_said_in_the_singular(schedules):
    """'Error: 1 check(s) broken: ...' (a slime newcomer's round gated on --max-instance-spread)."""
    result = run(schedules / "b.parquet", "--check", "--max-padding", "0", "-q")
    assert result.exit_code == 1 and "Error: 1 check broken: --max-padding 0.0" in result.stderr, result.stderr


def test_broken_check_exits_1_and_names_each_threshold(schedules):
    result = run(schedules / "b.parquet", "--check", "--max-padding", "0", "--max-lag", "0",
                 "--max-instance-spread", "100", "--json")
    assert result.exit_code == 1
    assert "--max-padding 0.0" in result.stderr and "--max-lag 0" in result.stderr
    assert "--max-instance-spread" not in result.stderr  # it passed
    assert "2 checks broken: " in result.stderr
    document = json.loads(result.stdout)  # the report still comes out, for the pipeline's logs
    assert document["checks"]["passed"] is False


def test_thresholds_need_check_and_check_needs_thresholds(schedules):
    assert run(schedules / "a.parquet", "--check").exit_code == 4
    result = run(schedules / "a.parquet", "--max-padding", "0.1")
    assert result.exit_code == 4 and "add --check" in result.stderr
    # a fraction of a step is the library's one-line refusal, not Typer's parser text (exit 2: a hostile-input round)
    result = run(schedules / "a.parquet", "--check", "--max-lag", "0.5")
    assert result.exit_code == 4 and result.stderr == "Error: --max-lag must be a whole number of steps (got 0.5)\n"
    assert run(schedules / "a.parquet", "--check", "--max-lag", "1000").exit_code == 0  # 1000.0 read as 1000
    # none: no limit, as asp schedule reads it (a gate fed a schedule's own bound; it was Typer's exit 2)
    result = run(schedules / "a.parquet", "--check", "--max-lag", "none", "-q")
    assert result.exit_code == 0 and "--max-lag none sets no limit, and no other threshold was given" in result.stderr
    result = run(schedules / "b.parquet", "--check", "--max-lag", "none", "--max-padding", "0", "-q")
    assert result.exit_code == 1 and "--max-lag" not in result.stderr.replace("--max-lag none", "")


@pytest.mark.parametrize("kind", ["text", "plain-parquet"])
def test_not_a_schedule_exits_6(schedules, tmp_path, kind):
    path = tmp_path / "x.parquet"
    if kind == "text":
        path.write_text('{"prompt": "hello"}\n')
    elif kind == "plain-parquet":
        table = pq.read_table(schedules / "a.parquet")
        pq.write_table(table.replace_schema_metadata({}), path)
    result = run(path)
    assert result.exit_code == 6
    assert result.stderr.startswith("Error: ") and str(path) in result.stderr
    assert result.stdout == ""


def test_newer_format_exits_6(schedules, tmp_path):
    table = pq.read_table(schedules / "a.parquet")
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["format_version"] = "2.0"
    path = tmp_path / "new.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)
    result = run(path)
    assert result.exit_code == 6 and "newer than this asp reads" in result.stderr


def test_metadata_without_its_maker_says_an_unknown_asp_version(schedules, tmp_path):
    """Metadata of format_version alone: the report said "made by asp None" (and the page "None")."""
    table = pq.read_table(schedules / "a.parquet")
    version = json.loads(table.schema.metadata[METADATA_KEY])["format_version"]
    path = tmp_path / "bare.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps({"format_version": version}).encode()}),
                   path)
    result = run(path)
    assert result.exit_code == 0, result.output
    assert f"(schedule format {version}, made by an unknown asp version)" in result.stdout
    assert run(path, "--html", tmp_path / "bare.html").exit_code == 0
    page = (tmp_path / "bare.html").read_text(encoding="utf-8")
    assert "None" not in page and "schedule made by an unknown asp version" in page
    assert "made by asp " in run(schedules / "a.parquet").stdout


def test_a_newer_compare_file_exits_6_too(schedules, tmp_path):
    path = tmp_path / "notes.parquet"
    path.write_text("not parquet")
    assert run(schedules / "a.parquet", "--compare", path).exit_code == 6


def test_html_is_written_and_never_overwritten_without_force(schedules, tmp_path):
    out = tmp_path / "report.html"
    result = run(schedules / "a.parquet", "--html", out, "-q")
    assert result.exit_code == 0 and out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not result.stderr.strip()  # -q: no summary, "Wrote" included
    assert f"Wrote {out}" in run(schedules / "a.parquet", "--html", out, "--force").stderr
    first = out.read_bytes()
    out.write_text("keep me")
    result = run(schedules / "a.parquet", "--html", out)
    assert result.exit_code == 7 and "--force" in result.stderr
    assert out.read_text() == "keep me"
    assert run(schedules / "a.parquet", "--html", out, "--force", "-q").exit_code == 0
    assert out.read_bytes() == first  # deterministic page
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left behind


def test_html_equal_to_the_schedule_is_refused(schedules):
    result = run(schedules / "a.parquet", "--html", schedules / "a.parquet", "--force")
    assert result.exit_code == 7 and "also an input" in result.stderr


def test_lengths_file_problems_exit_3(schedules, tmp_path):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_id,response_tokens\np0,-5\n")
    assert run(schedules / "a.parquet", "--lengths", lengths).exit_code == 3


def test_lengths_are_reported(schedules, tmp_path):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{100 + i}\n" for i in range(300)))
    result = run(schedules / "a.parquet", "--lengths", lengths, "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["observed"]["prompts_matched"] == 300
    # With --lengths, --max-padding gates the padding those lengths give, not the prediction's (a newcomer's gate
    # passed on a predicted 5.9% where the rollouts gave 73.7%).
    observed, predicted = document["observed"]["padding_fraction"], document["padding"]["fraction"]
    assert abs(observed - predicted) > 0.01
    between = f"{(observed + predicted) / 2:.4f}"
    gated = run(schedules / "a.parquet", "--lengths", lengths, "--check", "--max-padding", between, "-q")
    assert gated.exit_code == (1 if observed > predicted else 0)
    checked = json.loads(run(schedules / "a.parquet", "--lengths", lengths, "--check", "--max-padding", between,
                             "--json").stdout)["checks"]["results"][0]
    assert checked["fact"] == "observed.padding_fraction" and checked["value"] == observed
    assert "observed padding fraction (at the --lengths)" in checked["message"]
    alone = json.loads(run(schedules / "a.parquet", "--check", "--max-padding", between, "--json").stdout)
    assert alone["checks"]["results"][0]["fact"] == "padding.fraction"
    assert "predicted padding fraction" in alone["checks"]["results"][0]["message"]


def test_simulate_replays_the_schedule_on_observed_or_sampled_lengths(schedules, tmp_path):
    lengths = tmp_path / "lengths.csv"
    lengths.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{100 + i}\n" for i in range(300)))
    observed = json.loads(run(schedules / "a.parquet", "--simulate", "--lengths", lengths, "--json").stdout)
    simulated = observed["simulated"]
    assert simulated["lengths"]["prompts_with_observed_lengths"] == 300 and simulated["noise_model"] is None
    assert simulated["metrics"]["end_to_end_s"] >= simulated["metrics"]["lower_bound_end_to_end_s"]
    assert simulated["queue"]["arrived_groups"][-1] == observed["size"]["rows"]
    assert simulated["queue"]["consumed_groups"][-1] == observed["size"]["rows"]
    assert len(simulated["minibatch_spans"]) == observed["size"]["minibatches"]
    assert sum(c for _, c in simulated["lag_histogram"]) == observed["size"]["rows"]
    sampled = json.loads(run(schedules / "a.parquet", "--simulate", "--json").stdout)["simulated"]
    assert sampled["lengths"]["prompts_with_sampled_lengths"] == 300 and sampled["noise_model"] is not None
    text = run(schedules / "a.parquet", "--simulate")
    assert text.exit_code == 0 and "Simulated replay" in text.stdout
    # No auto choice recorded: the point predictions alone, said to leave out the tails.
    assert "at the point predictions, which leave out the tails" in " ".join(text.stdout.split())


def test_help_describes_every_option():
    result = runner.invoke(app, ["report", "--help"])
    assert result.exit_code == 0
    for option in ("--json", "--html", "--force", "--lengths", "--lengths-epoch", "--simulate", "--compare", "--check", "--max-padding",
                   "--max-instance-spread", "--max-lag", "--max-step-skew", "--max-trainer-idle"):
        assert option in result.stdout


def test_lengths_errors_name_reports_own_options_and_skip_works(schedules, tmp_path):
    """The --lengths errors named --history-length-key and --on-bad-row, which `asp report` did not have."""
    prompts_only = tmp_path / "prompts.jsonl"
    prompts_only.write_text('{"id": "a", "prompt": "x"}\n')
    result = run(schedules / "a.parquet", "--lengths", prompts_only)
    assert result.exit_code == 3 and "holds prompts but no response lengths" in result.stderr and "--lengths-length-key" in result.stderr
    bad = tmp_path / "lengths.csv"
    bad.write_text("prompt_id,response_tokens\np0,120\np1,abc\n")
    result = run(schedules / "a.parquet", "--lengths", bad)
    assert result.exit_code == 3 and "lengths.csv: row 2 (after the header)" in result.stderr
    assert "--on-bad-row skip" in result.stderr
    result = run(schedules / "a.parquet", "--lengths", bad, "--on-bad-row", "skip", "--json")
    assert result.exit_code == 0, result.stderr
    assert "skipped 1 bad row of --lengths files (--on-bad-row skip)" in result.stderr
    json.loads(result.stdout)
    result = run(schedules / "a.parquet", "--lengths", bad, "--on-bad-row", "maybe")
    assert result.exit_code == 4 and "--on-bad-row must be 'error' or 'skip'" in result.stderr


@pytest.mark.parametrize("flag, value", [("--max-padding", "nan"), ("--max-padding", "-0.1"), ("--max-lag", "-1"),
                                         ("--max-trainer-idle", "nan")])
def test_nonsense_thresholds_are_settings_errors(schedules, flag, value):
    """A NaN or negative threshold was reported as a broken check (exit 1) whatever the schedule."""
    result = run(schedules / "a.parquet", "--check", flag, value)
    assert result.exit_code == 4, result.stderr
    assert result.stderr.startswith(f"Error: {flag} must be a number of at least 0 (got ")


def test_html_into_a_directory_says_so_without_force(schedules, tmp_path):
    result = run(schedules / "a.parquet", "--html", tmp_path, "-q")
    assert result.exit_code == 7 and "is a directory; name a file" in result.stderr


def test_lengths_of_other_prompts_above_the_cap_and_a_compare_of_other_prompts_are_warned_about(schedules, tmp_path):
    """Each went by as a count in the text (and with --json, nothing at all on stderr)."""
    import polars as pl

    from asp_cli.report.files import report_schedule

    ids = pl.read_parquet(schedules / "a.parquet")["prompt_id"].unique().sort().to_list()
    lengths = tmp_path / "l.jsonl"
    rows = [{"id": ids[0], "response_tokens": 10**6}, {"id": ids[1], "response_tokens": 8192},
            {"id": ids[2], "response_tokens": 40}, {"id": "ghost", "response_tokens": 3}]
    lengths.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run(schedules / "a.parquet", "--lengths", lengths, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["warnings"] == [
        "1 of the 4 prompt ids of --lengths is not in the schedule ('ghost'); its samples are left out of "
        "the comparison with the predictions",
        "1 sample of --lengths is longer than the schedule's max_response_tokens (8,192); was it generated "
        "with a larger cap?"]
    assert all(f"Warning: {w}" in result.stderr for w in document["warnings"])
    # The sample at the cap and the one above it were cut there: truncated, though the file does not say.
    observed = report_schedule(schedules / "a.parquet", lengths=[lengths]).report["observed"]
    assert observed["truncated_fraction"] == 0.5  # 2 of the 4 samples (the fraction counts every observed sample)
    other = tmp_path / "other.parquet"
    make_schedule(other, count=50)
    result = run(schedules / "a.parquet", "--compare", other)
    assert "Warning: " in result.stderr and "schedules other prompts (50 in common; 300 prompts here, 50 there)" \
        in result.stderr
    assert "schedules other prompts" not in run(schedules / "a.parquet", "--compare", schedules / "b.parquet").stderr


@pytest.mark.parametrize("flag", ["--max-padding", "--max-trainer-idle"])
def test_a_fraction_threshold_above_1_is_refused(schedules, flag):
    """--max-padding 2 was accepted: a check that could never fail."""
    result = run(schedules / "a.parquet", "--check", flag, "2")
    assert result.exit_code == 4 and f"{flag} is a fraction from 0 to 1, e.g. 0.1 for 10% (got 2.0)" in result.stderr


def test_a_static_schedule_cut_before_the_padded_count_is_warned_about(tmp_path):
    """A static schedule written before asp counted padded batches (format 1.1: arrangement.kv_budget "whole")
    showed its fill counted whole and nothing about padded minibatches over its budget."""
    import json

    import pyarrow.parquet as pq

    from util import SAMPLE_PROMPTS

    out = tmp_path / "s.parquet"
    made = runner.invoke(app, ["schedule", str(SAMPLE_PROMPTS), "-o", str(out), "--engine", "static", "--quiet",
                               "--max-tokens-per-minibatch", "200000"])
    assert made.exit_code == 0, made.output
    assert "padded KV" not in runner.invoke(app, ["report", str(out)]).stderr  # cut padded: within its budget
    table = pq.read_table(out)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    # As the summed count would have recorded it: whole groups, and a budget the padded minibatches exceed.
    meta["arrangement"]["kv_budget"], meta["format_version"] = "whole", "1.1"
    meta["max_tokens_per_minibatch_used"] = 50_000
    old = tmp_path / "old.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), old)
    result = runner.invoke(app, ["report", str(old)])
    assert result.exit_code == 0, result.output
    assert "minibatches hold more padded KV at the predicted lengths than the 50,000 tokens they were cut by" \
        in result.stderr and "Make the schedule again with this asp" in result.stderr


def test_what_the_metadata_holds_is_printed_with_its_control_characters_escaped(schedules, tmp_path):
    """A recorded command line with escape sequences reached the terminal as them, and an input named with a newline
    forged a report line (a hostile-input audit); rich's markup in them is printed, not applied."""
    table = pq.read_table(schedules / "a.parquet")
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["command_line"] = "asp schedule \x1b[2J\x1b]0;TITLE\x07 [red]x -o OUT"
    meta["inputs"] = [{"name": "in\x1b[31mred\nFAKE: line", "fingerprint": "sha256:00"}]
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), tmp_path / "h.parquet")
    result = run(tmp_path / "h.parquet")
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "asp schedule \\x1b[2J\\x1b]0;TITLE\\x07 [red]x -o OUT" in result.stdout
    assert "in\\x1b[31mred\\nFAKE: line" in result.stdout
    assert not any(line.startswith("FAKE") for line in result.stdout.splitlines())


def test_every_metadata_field_the_report_prints_is_escaped_and_its_markup_not_applied(schedules, tmp_path):
    """A schedule whose `created_by`, `asp_version`, chosen arrangement or predictor record held rich's closing tag
    (`[/x]`) stopped `asp report` with an internal error (MarkupError, exit 70), and an escape sequence in
    `created_by` reached the terminal (a hostile-input audit, 2026-12-07). Also the names of --lengths and
    --compare files, which a glob can pick up."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    made = tmp_path / "auto.parquet"
    schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(40, seed=4))], made,
             settings=ScheduleSettings(instances=2, train_batch_size=16, minibatch_size=8))
    table = pq.read_table(made)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["created_by"] = "[/x]\x1b]0;TITLE\x07"
    chosen = meta["arrangement"]["chosen"]
    meta["arrangement"]["chosen"] = "[/y]"
    for candidate in meta["arrangement"]["candidates"]:
        if candidate["name"] == chosen:
            candidate["name"] = "[/y]"
    meta["predictor"]["history_fingerprint"] = "[/z]\x1b[2J"
    meta["predictor"]["prompts_from_history"] = "[/w]"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), tmp_path / "h.parquet")
    result = run(tmp_path / "h.parquet")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "made by [/x]\\x1b]0;TITLE\\x07)" in result.stdout
    assert "history [/z]\\x1b[2J" in result.stdout and "[/y]" in result.stdout and "[/w]" in result.stdout
    meta.pop("created_by")
    meta["asp_version"] = "[/v]"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), tmp_path / "v.parquet")
    result = run(tmp_path / "v.parquet")
    assert result.exit_code == 0, result.output
    assert "made by asp [/v])" in result.stdout

    odd = "\x1b[31m[red]"
    schedule_ids = pq.read_table(made, columns=["prompt_id"]).column(0).to_pylist()
    lengths = write_jsonl(tmp_path / f"{odd}.jsonl", [{"prompt_id": p, "response_tokens": 50} for p in schedule_ids])
    other = tmp_path / f"{odd}.parquet"
    other.write_bytes(made.read_bytes())
    for args in (["--lengths", lengths, "--simulate"], ["--compare", other]):
        result = run(made, *args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.stdout and "\\x1b[31m[red]" in result.stdout


@pytest.mark.parametrize(("env", "expected"), [({}, True), ({"NO_COLOR": "1"}, False), ({"TERM": "dumb"}, False)])
def test_the_report_is_styled_on_a_terminal_unless_no_color_or_a_dumb_terminal(monkeypatch, env, expected):
    import io

    from asp_cli.cli.report import styled

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert styled(Terminal()) is expected
    assert styled(io.StringIO()) is False  # redirected: never


def test_a_nan_in_the_metadata_s_records_is_no_internal_error_in_json(tmp_path):
    """A hand-edited NaN in an arrangement candidate (Python reads JSON's NaN): `asp report --json` was exit 70 (JSON
    has no NaN; a hostile-input round, 2026-12-07). The record is left out as damaged, as other edits are, and a
    NaN elsewhere in what the report copies is null."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    made = tmp_path / "auto.parquet"
    schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(40, seed=4))], made,
             settings=ScheduleSettings(instances=2, train_batch_size=16, minibatch_size=8))
    table = pq.read_table(made)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["arrangement"]["candidates"][0]["expected_end_to_end_s"] = float("nan")
    meta["created_by"] = float("inf")
    edited = tmp_path / "nan.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), edited)
    result = run(edited, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["provenance"]["arrangement"] is None and document["provenance"]["created_by"] is None
    assert "holds arrangement not as asp wrote it" in result.stderr
    assert run(edited).exit_code == 0


def test_a_synchronous_replay_reads_each_figure_beside_its_like_and_says_how_verl_routes(tmp_path):
    """A newcomer's synchronous plan on servers (`--max-lag 0`, timed as verl routes) read "rollout 826.7 s
    (334.3 s expected by auto's draws, 442.5 s at the point predictions)": the replay's rollout ran to its last
    arrival, training between steps included, the draws' was the rollout alone, and the point predictions' the
    makespan with training. Now end-to-end sits beside end-to-end, the rollout alone beside the rollout alone,
    and the replay says it routes as asp's simulator does, and which command gives it as verl routes."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    out = tmp_path / "verl.parquet"
    schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))], out,
             settings=ScheduleSettings(instances=2, train_batch_size=32, minibatch_size=16, engine="streaming",
                                       max_lag=0, trainer="schedule"))
    lengths = tmp_path / "log.csv"
    lengths.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{100 + 7 * i}\n" for i in range(200)))
    document = json.loads(run(out, "--simulate", "--lengths", lengths, "--json").stdout)
    choice, simulated, queue = document["provenance"]["arrangement"], document["simulated"], document["queue"]
    assert choice["timed_as"] == "verl"
    mine = next(c for c in choice["candidates"] if c["name"] == choice["chosen"] and c["kv_budget"] == choice["kv_budget"])
    metrics = simulated["metrics"]
    # The rollout alone: what the trainer waits, in the replay and at the point predictions.
    assert simulated["rollout_alone_s"] == pytest.approx(metrics["end_to_end_s"] * metrics["trainer_idle_fraction"], abs=0.5)
    assert queue["rollout_alone_s"] == pytest.approx(queue["trainer_first_start_s"] + queue["trainer_idle_s"], abs=0.01)
    assert queue["rollout_alone_s"] < document["instances"]["makespan_s"]
    text = " ".join(run(out, "--simulate", "--lengths", lengths).stdout.split())
    assert (f"end-to-end {metrics['end_to_end_s']:,.1f} s ({mine['expected_end_to_end_s']:,.1f} s expected by auto's "
            f"draws as verl routes, {queue['trainer_end_s']:,.1f} s at the point predictions)") in text
    assert (f"rollout alone {simulated['rollout_alone_s']:,.1f} s (the steps' rollouts summed, the training between "
            f"them left out; {mine['expected_rollout_s']:,.1f} s expected by auto's draws as verl routes, "
            f"{queue['rollout_alone_s']:,.1f} s at the point predictions)") in text
    assert f"{document['instances']['makespan_s']:,.1f} s at the point" not in text
    # Trainer idle likewise: the replay's share of the whole run beside the point predictions' (a newcomer read
    # 62.8% beside 30.9%, the latter only the waits between steps).
    of_run = queue["trainer_idle_of_run_fraction"]
    assert of_run == pytest.approx((queue["trainer_first_start_s"] + queue["trainer_idle_s"]) / queue["trainer_end_s"],
                                   abs=1e-4)
    assert of_run > queue["trainer_idle_fraction"]  # the wait before the first step counts here
    assert (f"trainer idle {metrics['trainer_idle_fraction']:.1%} of the run (expected {of_run:.1%}, the wait "
            "before its first step included)") in text
    assert ("this replay routes as asp's simulator does (each group whole to whichever server frees first)" in text
            and "`asp simulate verl.parquet --compare --lengths log.csv` sets verl's own arrangements beside it" in text)
    # The same lengths as verl routes them, the figure auto's draws timed the plan by: as `asp simulate` gives it
    # (a newcomer was pointed to that command for it).
    routed, alone = simulated["verl_routed_end_to_end_s"], simulated["verl_routed_rollout_s"]
    assert 0 < alone < routed
    assert f"replayed on the same lengths as verl routes, end-to-end {routed:,.1f} s (rollout alone {alone:,.1f} s)" \
        in text
    simulate = CliRunner().invoke(app, ["simulate", str(out), "--lengths", str(lengths), "--json", "--quiet"])
    assert json.loads(simulate.stdout)["metrics"]["verl_routed_end_to_end_s"] == pytest.approx(routed, abs=1e-3)


def test_the_page_reads_a_replay_beside_auto_draws_as_the_text_does(tmp_path):
    """The page's replay table set the replay (839.8 s) beside the point predictions alone (456.9 s), where the
    text said auto's draws expected 674.2 s: a team lead reading the page saw a plan 84% slower than promised.
    The JSON carries the draws' figures (`simulated.expected_by_draws`, report 1.5), and both renderers read them."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    out = tmp_path / "verl.parquet"
    schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))], out,
             settings=ScheduleSettings(instances=2, train_batch_size=32, minibatch_size=16, engine="streaming",
                                       max_lag=0, trainer="schedule"))
    document = json.loads(run(out, "--simulate", "--json").stdout)
    choice, draws = document["provenance"]["arrangement"], document["simulated"]["expected_by_draws"]
    mine = next(c for c in choice["candidates"] if c["name"] == choice["chosen"] and c["kv_budget"] == choice["kv_budget"])
    assert draws == {"end_to_end_s": mine["expected_end_to_end_s"], "rollout_s": mine["expected_rollout_s"],
                     "timed_as": "verl", "whole_run": True, "epochs_judged": 1}
    page = tmp_path / "r.html"
    assert run(out, "--simulate", "--html", page, "-q").exit_code == 0
    html = page.read_text()
    assert "expected by auto&#x27;s draws as verl routes (tails included)" in html
    assert f"<td>{mine['expected_end_to_end_s']:,.1f}</td>" in html and f"<td>{mine['expected_rollout_s']:,.1f}</td>" in html
    # A named arrangement has no draws: null figures, and the page leaves the column out.
    named = tmp_path / "named.parquet"
    make_schedule(named, arrangement="shuffle")
    assert json.loads(run(named, "--simulate", "--json").stdout)["simulated"]["expected_by_draws"] == {
        "end_to_end_s": None, "rollout_s": None, "timed_as": None, "whole_run": None, "epochs_judged": None}
    assert run(named, "--simulate", "--html", tmp_path / "n.html", "-q").exit_code == 0
    assert "expected by auto" not in (tmp_path / "n.html").read_text()
    # Replayed on drawn lengths, the command names no log.
    plain = " ".join(run(tmp_path / "verl.parquet", "--simulate").stdout.split())
    assert "`asp simulate verl.parquet --compare` sets" in plain


def test_more_samples_per_prompt_than_the_group_names_both_causes(schedules, tmp_path):
    """A log of 16 samples per prompt against a schedule of 8 (a newcomer's verl ran rollout.n=16) was told only of a
    history of several epochs: the warning now names the other cause and its fix, with what was observed."""
    lengths = tmp_path / "sixteen.csv"
    lengths.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{100 + i + k}\n" for i in range(300) for k in range(16)))
    n = json.loads(run(schedules / "a.parquet", "--json").stdout)["size"]["samples_per_prompt"]
    assert n < 16
    result = run(schedules / "a.parquet", "--lengths", lengths)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "several epochs" in said
    assert (f"if the rollout ran more samples per prompt than the schedule's {n} (verl's rollout.n), remake the "
            "schedule with --samples-per-prompt 16 (every prompt here has 16)") in said


def test_lengths_epoch_picks_one_epoch_of_a_history_and_says_which(schedules, tmp_path):
    """`asp report` had no --lengths-epoch (`asp simulate`'s and `asp replay`'s): a history of a probe and two
    epochs was compared on its oldest epoch, with no way to pick another. It takes it now, says the epoch in the
    summary, the page and the JSON, and refuses an epoch the lengths lack as simulate does (E110, exit 4)."""
    rows = ([f"p{i},50,\n" for i in range(300)] + [f"p{i},{100 + i},0\n" for i in range(300) for _ in range(8)]
            + [f"p{i},{200 + i},1\n" for i in range(300) for _ in range(8)])
    history = tmp_path / "history.csv"
    history.write_text("prompt_id,response_tokens,epoch\n" + "".join(rows))
    text = run(schedules / "a.parquet", "--lengths", history, "--lengths-epoch", 1, "--simulate",
               "--html", tmp_path / "r.html")
    assert text.exit_code == 0, text.output
    said = " ".join(text.stdout.split())
    assert "Observed lengths (history.csv; epoch 1): 2,400 samples for 300 prompts" in said
    assert "--simulate: observed lengths (epoch 1) for 300 prompts" in said
    assert "<th>epoch (--lengths-epoch)</th><td>epoch 1</td>" in (tmp_path / "r.html").read_text()
    assert ("<th>epochs compared</th><td>schedule epoch 0 with the lengths&#x27; epoch 1; epoch 1 left out (the same "
            "lengths would stand for it again)</td>") in (tmp_path / "r.html").read_text()
    assert "compared: schedule epoch 0 with the lengths' epoch 1; epoch 1 left out" in said
    document = json.loads(run(schedules / "a.parquet", "--lengths", history, "--lengths-epoch", -1, "--simulate",
                              "--json").stdout)
    assert document["observed"]["epoch"] == document["simulated"]["lengths"]["epoch"] == -1
    assert document["observed"]["quantiles"]["p100"] == 50
    plain = json.loads(run(schedules / "a.parquet", "--lengths", history, "--json").stdout)
    # Without it, each schedule epoch is compared with the history's own, as --simulate replays it (before 1.7 the
    # oldest alone: p100 399, epoch 0's)
    assert plain["observed"]["epoch"] is None and plain["observed"]["quantiles"]["p100"] == 499  # epoch 1's
    assert [(c["schedule_epoch"], c["lengths_epoch"]) for c in plain["observed"]["epochs_compared"]] == [(0, 0), (1, 1)]
    missing = run(schedules / "a.parquet", "--lengths", history, "--lengths-epoch", 2)
    assert missing.exit_code == 4 and missing.stdout == ""
    assert (f"Error: --lengths-epoch 2: {history} holds epochs 0 and 1, and samples without an epoch (a probe's: "
            "--lengths-epoch -1); give one of those, or leave --lengths-epoch out") in missing.stderr
    assert "in Python" not in missing.stderr
    alone = run(schedules / "a.parquet", "--lengths-epoch", 0)
    assert alone.exit_code == 4 and "give --lengths too, or leave it out" in alone.stderr
    negative = run(schedules / "a.parquet", "--lengths", history, "--lengths-epoch", -2)
    assert negative.exit_code == 4
    assert "Error: --lengths-epoch must be a whole number from -1 to 2147483647 (got -2)\n" in negative.stderr


def test_the_predicted_padding_says_it_is_a_floor_and_auto_draws_figure_as_asp_schedule_does(tmp_path):
    """`asp report` said "predicted padding 5.9%" bare, where `asp schedule`'s summary said beside it "a floor:
    63.3% under auto's draws of lengths, a shuffle's 70.0%", and the observed lengths then said 74%: a team lead
    read a plan that pads a twentieth against one that pads three quarters. On servers that refill freed slots
    it says the static figure is not what they idle."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule
    from asp_cli.arrange.choice_summary import drawn_padding

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))
    out, streaming = tmp_path / "s.parquet", tmp_path / "v.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=3, train_batch_size=32, minibatch_size=16))
    document = json.loads(run(out, "--json").stdout)
    drawn, shuffle = drawn_padding(document["provenance"]["arrangement"])
    assert drawn is not None and drawn >= document["padding"]["fraction"]
    assert document["padding"]["drawn_fraction"] == drawn and document["padding"]["shuffle_drawn_fraction"] == shuffle
    said = f"a floor: at the point predictions a minibatch's groups look alike; {drawn:.1%} under auto's draws"
    assert said in " ".join(run(out).stdout.split())
    page = tmp_path / "r.html"
    assert run(out, "--html", page, "-q").exit_code == 0
    assert said.replace("'", "&#x27;") in " ".join(page.read_text().split())
    schedule([prompts], streaming, settings=ScheduleSettings(instances=2, train_batch_size=32, minibatch_size=16,
                                                             engine="streaming", max_lag=0, trainer="schedule"))
    document = json.loads(run(streaming, "--json").stdout)
    assert document["padding"]["drawn_fraction"] is None and document["padding"]["shuffle_drawn_fraction"] is None
    assert "give a freed slot the next request, so this static-batch figure is not what they idle" in " ".join(
        run(streaming).stdout.split())
    # A named arrangement has no draws: a floor all the same.
    named = tmp_path / "named.parquet"
    make_schedule(named, arrangement="shuffle")
    assert "lengths that spread as real ones do pad more" in " ".join(run(named).stdout.split())
    # Beside the observed lengths' padding, the predicted one.
    lengths = tmp_path / "l.csv"
    lengths.write_text("prompt_id,response_tokens\n" + "".join(f"p{i},{100 + 7 * i}\n" for i in range(200)))
    text = " ".join(run(out, "--lengths", lengths).stdout.split())
    predicted = json.loads(run(out, "--json").stdout)["padding"]["fraction"]
    assert f"(predicted {predicted:.1%}), instance token spread" in text


def test_the_sizes_name_what_a_plan_on_servers_sends_as_asp_schedule_does(tmp_path):
    """`asp schedule`'s summary said "112 request batches (a few prompts sent to the servers at once)" (or
    "requests of one prompt each"), `asp report` "112 minibatches": a team lead could not tell that the two
    counted the same thing. The report names it as the summary does and says the word it uses below."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule
    from asp_cli.cli.schedule import _units

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))
    for engine, extra in (("streaming", {"max_lag": 0, "trainer": "schedule"}), ("continuous", {})):
        out = tmp_path / f"{engine}.parquet"
        schedule([prompts], out, settings=ScheduleSettings(instances=2, train_batch_size=32, minibatch_size=16,
                                                           engine=engine, **extra))
        document = json.loads(run(out, "--json").stdout)
        summary = pq.read_schema(out).metadata  # the summary the file keeps, as asp schedule printed it
        said = _units(json.loads(summary[METADATA_KEY])["summary"])
        text = " ".join(run(out).stdout.split())
        assert f"= 200 groups of 8; {said}" in text
        assert (", below called minibatches, on 2 instances" in text) == (engine == "streaming")
        assert said.startswith(f"{document['size']['minibatches']:,} ")
        page = tmp_path / f"{engine}.html"
        assert run(out, "--html", page, "-q").exit_code == 0
        assert ("(minibatches below) / instances" in page.read_text()) == (engine == "streaming")


def test_a_synchronous_plans_trainer_idle_is_said_to_be_by_design(tmp_path):
    """A synchronous plan (verl's default trainer) read "waiting for data 140.7 s in between (30.9% idle)" with no
    word that rollout and training take turns there: a team lead took it for a fault. Said for --max-lag 0 alone,
    with the rollout's own time, in the text and on the page."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))
    sync, free = tmp_path / "sync.parquet", tmp_path / "free.parquet"
    schedule([prompts], sync, settings=ScheduleSettings(instances=2, train_batch_size=32, minibatch_size=16,
                                                        engine="streaming", max_lag=0, trainer="schedule"))
    make_schedule(free, arrangement="shuffle")
    alone = json.loads(run(sync, "--json").stdout)["queue"]["rollout_alone_s"]
    said = (f"synchronous (--max-lag 0): the trainer waits out each step's rollout, {alone:,.1f} s in all with the "
            "wait before its first step, as the rollout waits out each training step: by design, not a fault")
    assert said in " ".join(run(sync).stdout.split())
    assert "by design, not a fault" not in run(free).stdout
    page = tmp_path / "s.html"
    assert run(sync, "--html", page, "-q").exit_code == 0
    assert "Synchronous (--max-lag 0): the trainer waits out" in page.read_text()


def test_an_unbounded_plans_lag_says_it_is_an_asynchronous_trainers(tmp_path):
    """The default plan (no --max-lag) read "Expected policy lag: mean 9.49 steps, max 19" to a team lead running
    verl's synchronous trainer, where `asp schedule`'s summary said the lag is an asynchronous trainer's and how a
    synchronous one is planned. Said where the plan has no bound, not where it has one."""
    free, bounded = tmp_path / "free.parquet", tmp_path / "bounded.parquet"
    make_schedule(free, arrangement="shuffle")
    make_schedule(bounded, arrangement="shuffle", engine="streaming", max_lag=1)
    said = ("if an asynchronous trainer lets rollout run that far ahead; a synchronous trainer (verl's, OpenRLHF's "
            "and slime's default) has none, and is planned with --max-lag 0 --trainer schedule")
    assert said in " ".join(run(free).stdout.split())
    assert said not in " ".join(run(bounded).stdout.split())
    page = tmp_path / "f.html"
    assert run(free, "--html", page, "-q").exit_code == 0
    assert "Made without --max-lag: the lag expected if an asynchronous trainer" in page.read_text()


def test_the_trainer_lines_idle_share_says_it_is_of_the_steps_span(schedules):
    """The text's "(30.9% idle)" did not say of what; the page's replay table gives another share, of the run."""
    report = json.loads(run(schedules / "b.parquet", "--json").stdout)
    result = run(schedules / "b.parquet")
    text = " ".join(result.stdout.split())
    assert f"({report['queue']['trainer_idle_fraction']:.1%} of the steps' span idle)" in text


def test_the_report_says_which_instance_count_the_schedule_was_made_for(schedules, tmp_path):
    """A team lead with 8 servers read a schedule of 4 with nothing to say that its times were of 4 (text, page)."""
    words = "planned for 4 instances: its times, the arrangement chosen and each minibatch's instance are for that many"
    assert words in " ".join(run(schedules / "b.parquet").stdout.split())
    assert "asp schedule --instances N" in " ".join(run(schedules / "b.parquet").stdout.split())
    assert json.loads(run(schedules / "b.parquet", "--json").stdout)["size"]["instances"] == 4
    assert run(schedules / "b.parquet", "--html", tmp_path / "p.html").exit_code == 0
    page = (tmp_path / "p.html").read_text()
    assert "Planned for 4 instances: its times, the arrangement chosen and each minibatch&#x27;s instance" in page


def test_the_page_leads_with_the_expected_end_to_end_time_and_gain_over_a_shuffle(schedules, tmp_path):
    """The run's expected time and its gain over a shuffle, the two figures a team lead decides on, were on the page
    only inside the provenance table's arrangement row; two headline cards now give them as the summary does."""
    from util import make_prompts, write_jsonl

    from asp_cli import ScheduleSettings, schedule
    from asp_cli.report.simulated import drawn

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(200, seed=4))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=3, train_batch_size=32, minibatch_size=16))
    choice = json.loads(run(out, "--json").stdout)["provenance"]["arrangement"]
    assert run(out, "--html", tmp_path / "p.html").exit_code == 0
    page = (tmp_path / "p.html").read_text()
    cards = page[page.index('<div class="cards">'):]
    assert (f"<b>{drawn(choice, 'expected_end_to_end_s'):,.1f} s</b><span>expected end-to-end, by auto&#x27;s "
            "draws (tails included)</span>") in cards
    gain = choice["expected_gain_over_shuffle"]
    shown = f"{abs(gain):.1%} {'faster' if gain >= 0 else 'slower'}"
    assert f"{shown}</b><span>expected over a shuffle, in auto&#x27;s draws" in cards
    assert cards.index("expected end-to-end") < cards.index("prompts x epochs")
    # a named arrangement records no auto choice: no headline cards
    assert run(schedules / "a.parquet", "--html", tmp_path / "a.html").exit_code == 0
    assert "expected end-to-end" not in (tmp_path / "a.html").read_text()


def test_the_sizes_line_counts_one_in_the_singular(tmp_path):
    """'1 prompts x 1 epoch(s) = 1 groups ... on 1 instances' read so, as asp schedule's 'Wrote' line did."""
    make_schedule(tmp_path / "one.parquet", count=1, instances=1, epochs=1, train_batch_size=1, minibatch_size=1)
    text = " ".join(run(tmp_path / "one.parquet").stdout.split())
    assert "1 prompt x 1 epoch = 1 group of" in text and "on 1 instance (rollout" in text, text
    assert "1 training step of" in text and "epoch(s)" not in text
    make_schedule(tmp_path / "many.parquet", count=40, instances=2, epochs=2, train_batch_size=8, minibatch_size=4)
    several = " ".join(run(tmp_path / "many.parquet").stdout.split())
    assert "40 prompts x 2 epochs = 80 groups of" in several and "on 2 instances (rollout" in several, several
