"""`asp replay` against local fake servers: the order it keeps, the lengths it forces, the timeline it writes,
baselines and --compare, dry runs, the in-process path, and how it ends (errors, Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import types

import numpy as np
import polars as pl
import pytest
from _replay import INSTANCES, PROMPTS, SAMPLES, forced_lengths, small  # noqa: F401 - fixture
from fake_openai import FakeServer, Faults
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.errors import ExitCode
from asp_cli.integrate.timings import read_timeline

from util import REPO

runner = CliRunner()
REQUESTS = PROMPTS * SAMPLES


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def replay(small, servers, out, *extra):  # noqa: F811
    urls = ",".join(s.url for s in servers)
    return invoke("replay", small["schedule"], small["prompts"], "--lengths", small["lengths"], "--servers", urls,
                  "-o", out, "--warmup", "0", "--retry-backoff", "0.001", *extra)


def request_ids(server: FakeServer, kind: str) -> list[str]:
    return [rid for event, rid in server.log if event == kind and rid.startswith("asp-")]


def test_blocking_replay_keeps_the_order_forces_the_lengths_and_writes_the_timeline(small, tmp_path):  # noqa: F811
    out = tmp_path / "timeline.parquet"
    with FakeServer(time_scale=0.05) as a, FakeServer(time_scale=0.05) as b:
        result = replay(small, [a, b], out, "--json")
        logs = [list(a.log), list(b.log)]
        bodies = {**a.bodies, **b.bodies}
    assert result.exit_code == 0, result.output
    timeline = read_timeline(out)
    frame = timeline.frame
    assert frame.height == REQUESTS and timeline.metadata["complete"] is True
    # Lengths: what the server generated is what the lengths file recorded for that prompt's sample.
    recorded = forced_lengths(small["lengths"])
    for row in frame.iter_rows(named=True):
        assert row["forced_tokens"] == row["completion_tokens"] == recorded[row["prompt_id"]][row["sample"]]
        body = bodies[f"asp-0-{row['seq']}-{row['sample']}"]
        assert body["max_tokens"] == body["min_tokens"] == row["forced_tokens"] and body["ignore_eos"] is True
        assert isinstance(body["prompt"], str) and body["n"] == 1
        assert row["send_s"] <= row["first_token_s"] <= row["finish_s"]
        assert row["attempts"] == 1 and row["server"] == [a.url, b.url][row["instance"]]
    # Order: on each server no request of a minibatch arrives before the previous minibatch has finished.
    schedule = pl.read_parquet(small["schedule"])
    minibatch_of = dict(zip(schedule["seq"].to_list(), schedule["minibatch"].to_list()))
    for k, log in enumerate(logs):
        assert set(schedule.filter(pl.col("instance") == k)["seq"].to_list()) == {
            int(rid.split("-")[2]) for event, rid in log if event == "arrive"}
        open_mb, pending = None, 0
        for event, rid in log:
            mb = minibatch_of[int(rid.split("-")[2])]
            if event == "arrive":
                assert pending == 0 or mb == open_mb, "a minibatch started before the previous one finished"
                open_mb = mb
                pending += 1
            else:
                pending -= 1
    # The same from the client's clock, and minibatches in seq order per instance.
    spans = frame.group_by("instance", "minibatch").agg(pl.col("send_s").min(), pl.col("finish_s").max(),
                                                        pl.col("seq").min()).sort("instance", "seq")
    for k in range(INSTANCES):
        part = spans.filter(pl.col("instance") == k)
        assert (part["send_s"].to_numpy()[1:] >= part["finish_s"].to_numpy()[:-1]).all()
    document = json.loads(result.stdout)
    entry = document["arrangements"][0]
    assert entry["arrangement"] == "asp" and entry["completed"] == REQUESTS
    assert entry["measured"]["requests"] == entry["simulated"]["requests"] == REQUESTS
    assert document["length_mismatches"] == 0 and "measured s" in result.stderr and "simulated s" in result.stderr


def test_streaming_keeps_each_queue_full_up_to_the_limit(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    # The gate holds the first three requests until all three have arrived, so the limit is reached for sure.
    with FakeServer(time_scale=0.05, faults=Faults(gate=3)) as a, FakeServer(time_scale=0.05,
                                                                             faults=Faults(gate=3)) as b:
        result = invoke("replay", small["schedule"], "--synthetic-prompts", "--lengths", small["lengths"],
                        "--servers", f"{a.url},{b.url}", "-o", out, "--warmup", "0", "--engine", "streaming",
                        "--max-in-flight", "3", "--force")
        peaks = a.max_in_flight, b.max_in_flight
        bodies = {**a.bodies, **b.bodies}
        order = [request_ids(a, "arrive"), request_ids(b, "arrive")]
    assert result.exit_code == 0, result.output
    assert peaks == (3, 3)
    frame = read_timeline(out).frame
    # Client side: never more than 3 in flight per instance.
    for k in range(INSTANCES):
        part = frame.filter(pl.col("instance") == k)
        events = sorted([(t, 1) for t in part["send_s"]] + [(t, -1) for t in part["finish_s"]],
                        key=lambda e: (e[0], e[1]))
        assert max(np.cumsum([d for _, d in events])) <= 3
    # Requests are released in seq order per instance: with at most 3 in flight, one arrives at most 2 places
    # away from its place in seq order (connections opened at once may race); synthetic prompts have the
    # recorded prompt length.
    for ids in order:
        seqs = [(int(r.split("-")[2]), int(r.split("-")[3])) for r in ids]
        place = {key: i for i, key in enumerate(sorted(seqs))}
        assert max(abs(place[key] - i) for i, key in enumerate(seqs)) <= 2
    for row in frame.iter_rows(named=True):
        prompt = bodies[f"asp-0-{row['seq']}-{row['sample']}"]["prompt"]
        assert isinstance(prompt, list) and len(prompt) == row["planned_prompt_tokens"] == row["prompt_tokens"]


def test_compare_runs_asp_then_baselines_with_free_dispatch(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer(time_scale=0.02) as a, FakeServer(time_scale=0.02) as b:
        result = replay(small, [a, b], out, "--compare", "--baseline", "count-balance", "--baseline",
                        "verl-default", "--json", "--warmup", "2")
        warmups = [rid for event, rid in a.log if event == "arrive" and not rid.startswith("asp-")]
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    names = [e["arrangement"] for e in document["arrangements"]]
    assert names == ["asp", "count-balance", "verl-default"]
    # One warm-up, before the first run only, of as many requests at once as a run holds in flight on one server
    # (asp's first run opened the connections the later ones reused, and measured slowest: a newcomer's round).
    largest = pl.read_parquet(small["schedule"]).group_by("minibatch").len()["len"].max() * SAMPLES
    assert len(warmups) == max(2, largest) and largest > 2
    frame = read_timeline(out).frame
    assert frame.group_by("arrangement").len().sort("arrangement")["len"].to_list() == [REQUESTS] * 3
    # Every arrangement replays the same lengths per prompt sample.
    per = {name: dict(zip(zip(part["prompt_id"], part["sample"], part["epoch"]), part["forced_tokens"]))
           for (name,), part in frame.group_by("arrangement")}
    assert per["asp"] == per["count-balance"] == per["verl-default"]
    assert set(document["ranking"]["measured"]) == set(names)
    assert "Fastest first, measured:" in result.stderr


def test_dry_run_sends_nothing_and_prints_the_gpu_time(small):  # noqa: F811
    with FakeServer() as a:
        result = invoke("replay", small["schedule"], small["prompts"], "--lengths", small["lengths"], "--dry-run",
                        "--compare", "--json", "--servers", f"{a.url},{a.url}")
        assert a.log == []
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dry_run"] is True and document["simulated_gpu_minutes_total"] > 0
    # --compare alone runs asp and the baselines on equal footing with it for the engine.
    from asp_cli.integrate.replay_plan import equal_footing_names

    names = [a["arrangement"] for a in document["arrangements"]]
    assert names == ["asp", *equal_footing_names("blocking")] and "random (asp slots)" in names
    assert "Expected GPU time:" in result.stderr and "GPU-minutes for these" in result.stderr
    assert "Each is the rollout alone, as `asp replay` sends it: no trainer" in result.stderr


def test_a_dry_run_without_servers_plans_the_engine_asked_for(small):  # noqa: F811
    """A hostile-input round: without --servers, --engine streaming was ignored and the plan a blocking engine's."""
    plans = {engine: json.loads(invoke("replay", small["schedule"], small["prompts"], "--dry-run", "--json", "-q",
                                       *(["--engine", engine] if engine else [])).stdout)
             for engine in (None, "streaming")}
    assert plans[None]["engine"] == "blocking" and plans["streaming"]["engine"] == "streaming"
    assert plans[None]["arrangements"][0]["simulated"] != plans["streaming"]["arrangements"][0]["simulated"]


def test_the_python_twin_takes_one_dataset_path_and_one_baseline_name(small):  # noqa: F811
    """A Python user's `replay_schedule(s, "prompts.jsonl", dry_run=True)` read the files "p", "r", ... ("r: given
    twice"), and `baselines="verl-default"` the baselines "v", "e", ... ("'v': no such baseline")."""
    from asp_cli import replay_schedule

    one = replay_schedule(str(small["schedule"]), str(small["prompts"]), lengths=str(small["lengths"]),
                          baselines="verl-default", dry_run=True)
    listed = replay_schedule(small["schedule"], [small["prompts"]], lengths=[small["lengths"]],
                             baselines=["verl-default"], dry_run=True)
    assert one.document == listed.document
    assert [a["arrangement"] for a in one.document["arrangements"]] == ["verl-default"]


@pytest.mark.parametrize("kwargs, named", [
    ({"lengths_epoch": -2}, "(in Python: lengths_epoch for --lengths-epoch)"),
    ({"seed": -1}, "(in Python: seed for --seed)"),
    ({"gpus_per_instance": 0}, "(in Python: gpus_per_instance for --gpus-per-instance)"),
    ({"engine": "foo"}, "(in Python: engine for --engine)"),
])
def test_the_python_twin_names_its_own_arguments(small, kwargs, named):  # noqa: F811
    """`replay_schedule(..., lengths_epoch=-2)` was told of --lengths-epoch only, where `simulate_file`'s errors name
    the keyword too; the command line still names the options only."""
    from asp_cli import replay_schedule
    from asp_cli.errors import SettingsError, on_the_command_line

    with pytest.raises(SettingsError) as raised:
        replay_schedule(small["schedule"], small["prompts"], dry_run=True, **kwargs)
    assert str(raised.value).endswith(named) and str(raised.value).count("in Python") == 1, str(raised.value)
    with on_the_command_line(), pytest.raises(SettingsError) as raised:
        replay_schedule(small["schedule"], small["prompts"], dry_run=True, **kwargs)
    assert "in Python" not in str(raised.value)


@pytest.mark.parametrize("args, words", [
    (["--engine", "foo"], "--engine must be one of"),
    (["--max-in-flight", "0"], "--max-in-flight must be a whole number from 1 to 2147483647 (got 0)"),
    (["--seed", "-1"], "--seed must be a whole number from 0 to 2147483647 (got -1)"),  # was exit 70
    (["--gpus-per-instance", str(10**20)], "--gpus-per-instance must be a whole number from 1 to 2147483647"),
    (["--warmup", str(10**11)], "--warmup must be a whole number from 0 to 2147483647"),  # warmed up for ever
    (["--max-in-flight", str(10**20)], "--max-in-flight must be a whole number from 1 to 2147483647"),
    (["--timeout", "-1"], "--timeout must be a number of seconds above 0 (got -1.0)"),
    (["--retries", "-1"], "--retries must be 0 or more (got -1)"),
    (["--retry-backoff", "nan"], "--retry-backoff must be 0 or more (got nan)"),
    (["--retry-backoff", "1e308"], "--retry-backoff must be at most 600 seconds (got 1e+308)"),  # it hung
    (["--retries", "1100"], "--retries must be at most 100 (got 1100)"),  # 2 ** 1024 overflowed: exit 70
    (["-o", "SCHEDULE"], "is also an input"),
    # Without --servers the run is in process: these were ignored, the plan blocking (a hostile-input round).
    (["--max-in-flight", "2"], "--max-in-flight is the requests in flight per server of --servers; without them"),
    (["--tensor-parallel-size", "4"], "--tensor-parallel-size is the in-process engine's (--in-process)"),
])
def test_a_dry_run_checks_the_options_the_run_would(small, args, words):  # noqa: F811
    """A dry run, meant to check a plan before GPUs are spent, let through options the run then refused."""
    args = [str(small["schedule"]) if a == "SCHEDULE" else a for a in args]
    result = invoke("replay", small["schedule"], small["prompts"], "--dry-run", *args, "--force")
    assert result.exit_code in (4, 7) and words in result.stderr, result.output
    assert result.stderr.count("\n") == 1


def test_a_server_error_that_recovers_is_retried(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer(time_scale=0.02, faults=Faults(fail_first=3)) as a, FakeServer(time_scale=0.02) as b:
        result = replay(small, [a, b], out, "--no-stream")
    assert result.exit_code == 0, result.output
    frame = read_timeline(out).frame
    assert frame.height == REQUESTS and frame["attempts"].max() > 1
    # The table's times hold the failed attempts and the waits: said, where they were shown as any run's (a hostile
    # round: a server that answered 500 and 429 gave asp's run 0.2 s against 0.1 s, without a word).
    retried = int((frame["attempts"] > 1).sum())
    assert (f"Warning: {retried} requests were retried (asp: {retried}); the measured times include their failed "
            "attempts and the waits between them") in result.stderr
    # Plain answers: no first-token times, lengths still forced and reported.
    assert frame["first_token_s"].null_count() == REQUESTS
    assert (frame["completion_tokens"] == frame["forced_tokens"]).all()


def test_answers_without_token_counts_are_said_to_be_unchecked(small, tmp_path):  # noqa: F811
    """A server that leaves `usage` out: the forced lengths cannot be checked, which read as 0 mismatches without a
    word (a hostile-input round); and -o naming a folder is said to be one (exit 7, not "name it .parquet")."""
    out = tmp_path / "t.parquet"
    with FakeServer(time_scale=0.02, faults=Faults(no_usage=True)) as a, FakeServer(time_scale=0.02) as b:
        result = replay(small, [a, b], out, "--json")
    assert result.exit_code == 0, result.output
    frame = read_timeline(out).frame
    unchecked = frame.filter(pl.col("instance") == 0).height
    assert frame["completion_tokens"].null_count() == unchecked > 0
    words = f"{unchecked} requests came back without a token count asp could read (no `usage` in the answer"
    assert f"Warning: {words}" in result.stderr
    assert any(w.startswith(words) for w in json.loads(result.stdout)["warnings"])
    with FakeServer() as c:
        folder = invoke("replay", small["schedule"], small["prompts"], "-o", tmp_path, "--servers", f"{c.url},{c.url}")
    assert folder.exit_code == ExitCode.OUTPUT, folder.output


@pytest.mark.parametrize("reported", [10**15, -5, "7"])
def test_token_counts_no_timeline_holds_are_left_out_and_said(small, tmp_path, reported):  # noqa: F811
    """A server reporting completion_tokens 10**15 had it written into the timeline, which asp calibrate then refused
    (E92: "record the timeline again", which wrote the same); -5 and "7" were said to be no `usage` at all (a
    hostile-input round). Such counts are left out, and the warning says the answer's count could not be read."""
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(reported_tokens=reported)) as a, FakeServer() as b:
        result = replay(small, [a, b], out)
    assert result.exit_code == 0, result.output
    frame = read_timeline(out).frame  # readable by its own reader
    unread = frame.filter(pl.col("instance") == 0).height
    assert frame["completion_tokens"].null_count() == unread > 0
    assert (f"Warning: {unread} requests came back without a token count asp could read (no `usage` in the answer, "
            "or a count that is not a whole number from 0 to 2,147,483,647)") in result.stderr


def test_a_server_that_does_not_generate_the_lengths_asked_fails_the_replay(small, tmp_path):  # noqa: F811
    """A server that ignores min_tokens and ignore_eos (every completion 0 tokens) gave a table, a ranking and exit 0,
    with one warning (a hostile-server round): no comparison holds when the lengths are not the ones asked. The run
    stops after that arrangement (no baseline is sent), with one line naming the server, the count, an example and
    the fix (exit 8); the timeline of what was measured is kept."""
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(reported_tokens=0)) as a, FakeServer() as b:
        result = replay(small, [a, b], out, "--compare", "-q")
    assert result.exit_code == ExitCode.SERVER, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    line = result.stderr.strip()
    timeline = read_timeline(out)
    frame = timeline.frame
    wrong = frame.filter(pl.col("instance") == 0)
    assert set(frame["arrangement"].to_list()) == {"asp"} and frame.height == REQUESTS
    assert timeline.metadata["complete"] is False
    first = wrong.sort("seq", "sample").row(0, named=True)
    assert line.startswith(
        f"Error: server {a.url}: {wrong.height} of the {wrong.height} requests of asp it answered came back with "
        f"another length than asked (e.g. asp request seq {first['seq']} sample {first['sample']} (prompt id "
        f"'{first['prompt_id']}'): asked {first['forced_tokens']} tokens, got 0)"), line
    assert "min_tokens and ignore_eos" in line and f"the {REQUESTS} requests measured are in {out}" in line, line


def test_lengths_off_by_a_token_are_a_warning_not_a_failure(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(reported_tokens=lambda n: n + 1)) as a, FakeServer() as b:
        result = replay(small, [a, b], out)
    assert result.exit_code == 0, result.output
    off = read_timeline(out).frame.filter(pl.col("instance") == 0).height
    assert f"Warning: {off} requests came back with another length than forced" in result.stderr


def test_a_server_that_answers_json_to_a_stream_request_says_pass_no_stream(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(ignore_stream=True)) as a, FakeServer(faults=Faults(ignore_stream=True)) as b:
        result = replay(small, [a, b], out, "-q", "--retries", "3", "--retry-backoff", "5")  # no retry waited
        tried = a.completions + b.completions
    assert result.exit_code == ExitCode.SERVER, result.output
    assert result.stderr.count("\n") == 1 and "was answered with plain JSON, not a stream" in result.stderr
    assert "pass --no-stream" in result.stderr and tried <= 16  # the first minibatches (8 requests each), once


def test_start_up_checks_say_what_they_wait_on_and_are_capped(small, tmp_path, monkeypatch):  # noqa: F811
    """A server hanging on GET /v1/models printed nothing for up to 40 minutes (--timeout 600 s x 4 attempts; a
    hostile-server round). The start-up checks wait at most STARTUP_TIMEOUT_S (30 s) an attempt, and a check still
    unanswered after NOTE_AFTER_S says so in one line; the KV-cache lookup, too, and the run goes on without it."""
    import asp_cli.integrate.live as live

    assert (live.STARTUP_TIMEOUT_S, live.NOTE_AFTER_S) == (30.0, 5.0)
    monkeypatch.setattr(live, "STARTUP_TIMEOUT_S", 0.3)
    monkeypatch.setattr(live, "NOTE_AFTER_S", 0.05)
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(hang_paths=("/v1/models",))) as a, FakeServer() as b:
        result = replay(small, [a, b], out, "--timeout", "2", "--retries", "1")
    assert result.exit_code == ExitCode.SERVER, result.output
    note, line = result.stderr.strip().split("\n")
    assert note == (f"waiting for {a.url} to answer GET /v1/models: no answer yet after 0.05 s (each try waits at "
                    "most 0.3 s, 2 tries)")
    assert line.startswith(f"Error: server {a.url}: GET /v1/models failed after 2 attempts (nothing came from the "
                           "server for 0.3 s)"), line
    with FakeServer(faults=Faults(hang_paths=("/metrics",))) as a, FakeServer() as b:
        result = replay(small, [a, b], out, "--timeout", "2", "--json")
    assert result.exit_code == 0, result.output
    assert (f"waiting for {a.url} to answer GET /metrics (its KV-cache size): no answer yet after 0.05 s (one try of "
            "at most 0.3 s, then the size goes unrecorded)") in result.stderr
    servers = json.loads(result.stdout)["servers"]
    assert [s["kv_cache_tokens"] for s in servers] == [None, 123_456 // 16 * 16]


def test_a_refusal_names_the_request(small, tmp_path):  # noqa: F811
    """A request a server refused (a 4xx: too long for its --max-model-len) was named by the server alone."""
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(fail_first=10**6, fail_status=400)) as a, FakeServer() as b:
        result = replay(small, [a, b], out)
    assert result.exit_code == ExitCode.SERVER, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"Error: server {a.url}: asp request seq "), line
    assert "(prompt id '" in line and "was refused: HTTP 400 (engine hiccup)" in line


def test_a_server_that_keeps_dropping_is_a_clear_error_and_keeps_what_was_measured(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer(time_scale=0.02, faults=Faults(drop_after=10)) as a, FakeServer(time_scale=0.02) as b:
        result = replay(small, [a, b], out, "--retries", "1")
    assert result.exit_code == ExitCode.SERVER, result.output
    # A log without a terminal says what started (one line an arrangement), then the error in one line.
    started, line = result.stderr.strip().split("\n")
    assert started == f"replaying asp: {REQUESTS} requests"
    assert line.startswith(f"Error: server {a.url}: asp request seq ")
    assert "failed after 2 attempts" in line and f"measured before it are in {out}" in line
    timeline = read_timeline(out)
    assert 10 <= timeline.frame.height < REQUESTS and timeline.metadata["complete"] is False


def test_a_server_that_keeps_sending_bytes_fails_by_the_request_deadline(small, tmp_path):  # noqa: F811
    """A 200 answer trickling a byte at a time never went silent for --timeout: the replay ran on for ever (a
    hostile-server round). Each attempt has a deadline (--request-timeout); past it the request is retried, then the
    run stops with one line naming the server, the request and its prompt id (exit 8)."""
    out = tmp_path / "t.parquet"
    with FakeServer(faults=Faults(trickle_s=0.02)) as a, FakeServer() as b:
        # Timeouts of a second or more: at 0.2 s a loaded machine's connect now and then took longer (1 run in 6).
        result = replay(small, [a, b], out, "--no-stream", "--timeout", "1", "--request-timeout", "1.5",
                        "--retries", "1", "-q")
    assert result.exit_code == ExitCode.SERVER, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    line = result.stderr.strip()
    assert line.startswith(f"Error: server {a.url}: asp request seq ") and "(prompt id '" in line, line
    assert "failed after 2 attempts (the answer was not complete after 1.5 s" in line, line
    refused = invoke("replay", small["schedule"], small["prompts"], "-o", tmp_path / "u.parquet", "--servers", f"{a.url},{b.url}",
                     "--request-timeout", "0")
    assert refused.exit_code == ExitCode.BAD_SETTINGS and "--request-timeout must be a number of seconds above 0" in \
        refused.stderr


def test_bad_settings_are_refused_before_anything_is_sent(small, tmp_path):  # noqa: F811
    out = tmp_path / "t.parquet"
    with FakeServer() as a:
        cases = [
            (["--servers", a.url], "the schedule plans 2 instances but --servers names 1"),
            (["--servers", f"{a.url},{a.url}", "--baseline", "magic"], "--baseline 'magic': no such baseline"),
            (["--servers", f"{a.url},{a.url}", "--baseline", "least-pending"],
             "'least-pending' is made for the other engine (--engine streaming)"),
            (["--servers", f"{a.url},{a.url}", "--engine", "eager"], "--engine must be one of blocking, streaming"),
            (["--servers", "localhost:8000,x"], "is not a server URL"),
            (["--servers", f"{a.url},{a.url}", "--synthetic-prompts"], "or --synthetic-prompts (not both)"),
        ]
        for extra, words in cases:
            result = invoke("replay", small["schedule"], small["prompts"], "-o", out, *extra)
            assert result.exit_code == ExitCode.BAD_SETTINGS, (extra, result.output)
            assert words in result.stderr and result.stderr.count("\n") == 1
        assert a.log == [] and not out.exists()
        result = invoke("replay", small["schedule"], small["prompts"], "--servers", f"{a.url},{a.url}")
        assert result.exit_code == ExitCode.BAD_SETTINGS and "-o timeline.parquet" in result.stderr


def test_a_dataset_without_a_scheduled_prompt_is_refused(small, tmp_path):  # noqa: F811
    partial = tmp_path / "partial.jsonl"
    lines = small["prompts"].read_text().splitlines()[:-1]
    partial.write_text("\n".join(lines) + "\n")
    result = invoke("replay", small["schedule"], partial, "--dry-run")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "the dataset has no prompt with id" in result.stderr and "--synthetic-prompts" in result.stderr


def test_in_process_without_vllm_says_how_to_get_it(small, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    result = invoke("replay", small["schedule"], small["prompts"], "--in-process", "Qwen/Qwen2.5-7B", "-o",
                    tmp_path / "t.parquet")
    assert result.exit_code == ExitCode.BAD_SETTINGS
    assert "--in-process needs vLLM" in result.stderr and "pip install 'asp-cli[vllm]'" in result.stderr
    assert not (tmp_path / "t.parquet").exists()


def test_in_process_replays_minibatches_through_the_offline_api(small, tmp_path, monkeypatch):  # noqa: F811
    calls = []

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LLM:
        def __init__(self, model, tensor_parallel_size):
            self.model = model

        def generate(self, prompts, params, use_tqdm):
            calls.append(len(prompts))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=[0] * p.max_tokens)],
                                          prompt_token_ids=[0] * 5, metrics=None) for p in params]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    out = tmp_path / "t.parquet"
    result = invoke("replay", small["schedule"], small["prompts"], "--lengths", small["lengths"], "--in-process",
                    "m", "-o", out)
    assert result.exit_code == 0, result.output
    frame = read_timeline(out).frame
    assert frame.height == REQUESTS and (frame["completion_tokens"] == frame["forced_tokens"]).all()
    assert sum(calls) == REQUESTS and max(calls) <= 4 * SAMPLES  # one generate() per minibatch
    for k in range(INSTANCES):  # each instance's minibatches back to back on its own clock from 0
        part = frame.filter(pl.col("instance") == k).group_by("minibatch").agg(pl.col("send_s").min(),
                                                                               pl.col("finish_s").max())
        part = part.sort("send_s")
        assert part["send_s"][0] == 0.0
        assert np.allclose(part["send_s"].to_numpy()[1:], part["finish_s"].to_numpy()[:-1])


def _interrupted(small, out, hold, servers_hold, sig="SIGINT", *extra):  # noqa: F811
    """`asp replay` in its own process, sent ``sig`` once a request ``hold`` accepts arrives: (code, stdout, stderr).
    ``servers_hold``: whether the second server holds its requests too."""
    with FakeServer(time_scale=0.02, faults=hold) as a, \
            FakeServer(time_scale=0.02, faults=hold if servers_hold else None) as b:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "asp_cli", "replay", str(small["schedule"]), str(small["prompts"]), "--lengths",
             str(small["lengths"]), "--servers", f"{a.url},{b.url}", "-o", str(out), "--warmup", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert hold.held.wait(60), "the held request never arrived"
            proc.send_signal(getattr(signal, sig))
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            hold.release.set()
            if proc.poll() is None:
                proc.kill()
    return proc.returncode, stdout, stderr


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
@pytest.mark.parametrize("sig, existing", [("SIGINT", False), ("SIGTERM", False), ("SIGINT", True),
                                           ("SIGHUP", False), ("SIGUSR1", False)])  # a closed session; Slurm's warning
def test_ctrl_c_stops_cleanly_and_keeps_the_partial_timeline(small, tmp_path, sig, existing):  # noqa: F811
    """Interrupted, a replay keeps what it measured; over a timeline already there (--force) it keeps that one and
    writes the partial beside it (it replaced a complete timeline of 400 requests by 72: a hostile-input round)."""
    out = tmp_path / "t.parquet"
    if existing:
        out.write_bytes(b"a complete timeline of an earlier run")
    schedule = pl.read_parquet(small["schedule"])
    # Hold the first request of instance 0's third minibatch: by then its first two have finished.
    third = schedule.filter(pl.col("instance") == 0).group_by("minibatch").agg(pl.col("seq").min()).sort("seq")
    seq = int(third["seq"][2])
    before = schedule.filter((pl.col("instance") == 0) & (pl.col("seq") < seq)).height * SAMPLES
    hold = Faults(hold=lambda rid: rid == f"asp-0-{seq}-0")
    code, stdout, stderr = _interrupted(small, out, hold, False, sig, *(["--force"] if existing else []))
    assert code == 130, stderr
    started, line = stderr.strip().split("\n")
    assert started.startswith("replaying asp: ") and line.startswith("Interrupted; wrote the ")
    assert stdout == ""
    partial = tmp_path / "t.partial.parquet"
    if existing:
        assert out.read_bytes() == b"a complete timeline of an earlier run"
        assert line.endswith(f"so far to {partial} ({out}, which was there before, is as it was).")
        out = partial
    timeline = read_timeline(out)
    assert timeline.metadata["complete"] is False and timeline.metadata["interrupted"] is True
    mine = timeline.frame.filter(pl.col("instance") == 0)
    assert mine.height >= before and not mine.filter((pl.col("seq") == seq) & (pl.col("sample") == 0)).height
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet", *(["t.partial.parquet"] if existing else [])]


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX signals")
def test_ctrl_c_before_any_request_finished_writes_nothing(small, tmp_path):  # noqa: F811
    """An empty timeline was written, which then stood in the way of the next run (exit 7 without --force)."""
    out = tmp_path / "t.parquet"
    code, _, stderr = _interrupted(small, out, Faults(hold=lambda rid: True), True)
    assert code == 130, stderr
    assert stderr.strip().split("\n")[-1] == "Interrupted before any request finished; nothing was written."
    assert list(tmp_path.iterdir()) == []


def test_a_schedule_planned_for_a_streaming_engine_replays_streaming(small, tmp_path, monkeypatch):  # noqa: F811
    planned = tmp_path / "streaming.parquet"
    result = invoke("schedule", small["prompts"], "-o", planned, "--engine", "streaming", "--instances", INSTANCES,
                    "--samples-per-prompt", SAMPLES, "--train-batch-size", 8, "--quiet")
    assert result.exit_code == 0, result.output
    result = invoke("replay", planned, "--dry-run", "--compare", "--lengths", small["lengths"], "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    from asp_cli.integrate.replay_plan import equal_footing_names

    assert document["engine"] == "streaming" and document["max_in_flight"] > 0
    assert [a["arrangement"] for a in document["arrangements"]] == ["asp", *equal_footing_names("streaming")]
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace())  # installed, but the plan streams
    result = invoke("replay", planned, small["prompts"], "--in-process", "m", "-o", tmp_path / "t.parquet")
    assert result.exit_code == ExitCode.BAD_SETTINGS and "planned for a streaming engine" in result.stderr


def test_a_bands_request_batch_goes_to_one_server_whole(small, tmp_path):  # noqa: F811
    # `--arrangement bands` sends request batches of --minibatch-size groups; with free dispatch each goes whole
    # to whichever server asks first, as the simulator's streaming engine sends it.
    planned = tmp_path / "bands.parquet"
    result = invoke("schedule", small["prompts"], "-o", planned, "--engine", "streaming", "--arrangement", "bands",
                    "--instances", INSTANCES, "--samples-per-prompt", SAMPLES, "--train-batch-size", 8,
                    "--minibatch-size", 2, "--quiet")
    assert result.exit_code == 0, result.output
    schedule = pl.read_parquet(planned)
    assert schedule["minibatch"].n_unique() == PROMPTS // 2  # bands of 4 prompts, request batches of 2
    out = tmp_path / "t.parquet"
    with FakeServer(time_scale=0.02) as a, FakeServer(time_scale=0.02) as b:
        result = invoke("replay", planned, "--synthetic-prompts", "--lengths", small["lengths"], "--servers",
                        f"{a.url},{b.url}", "-o", out, "--warmup", "0")
    assert result.exit_code == 0, result.output
    frame = read_timeline(out).frame
    assert frame.height == REQUESTS
    servers = frame.group_by("minibatch").agg(pl.col("server").n_unique(), pl.len())
    assert servers["server"].max() == 1 and servers["len"].to_list() == [2 * SAMPLES] * (PROMPTS // 2)


def test_the_schedule_is_sent_the_way_it_was_made_to_be_dispatched(small):  # noqa: F811
    from asp_cli.costmodel import load_preset
    from asp_cli.integrate.replay_plan import arrangements
    from asp_cli.schedule_format import read_schedule
    from asp_cli.settings import ScheduleSettings

    loaded = read_schedule(small["schedule"])
    assert loaded.settings["dispatch"] == "planned"
    for dispatch in ("planned", "free"):
        settings = ScheduleSettings.from_dict({**loaded.settings, "dispatch": dispatch})
        (asp,) = arrangements(loaded.frame, settings, ["asp"], load_preset())
        assert asp.dispatch == dispatch


def test_a_dry_run_on_another_preset_cuts_the_baselines_in_asps_sizes_as_asp_was_cut(small, tmp_path):  # noqa: F811
    """`asp replay --compare --preset OTHER` cut the baselines in asp's sizes by OTHER's cache: a long-first
    schedule and its own "long-first (asp sizes)" baseline had other minibatches."""
    from util import SAMPLE_PROMPTS

    prompts = tmp_path / "p300.jsonl"
    prompts.write_text("".join(SAMPLE_PROMPTS.read_text(encoding="utf-8").splitlines(keepends=True)[:300]),
                       encoding="utf-8")
    out = tmp_path / "long.parquet"  # the default budget, h100's cache: 5 calls of 64; a100's cache cuts 9
    made = invoke("schedule", prompts, "-o", out, "--samples-per-prompt", 16, "--minibatch-size", 64,
                  "--arrangement", "long-first", "--quiet")
    assert made.exit_code == 0, made.output
    result = invoke("replay", out, "--dry-run", "--synthetic-prompts", "--compare", "--json", "--preset",
                    "a100-llama2-7b")
    assert result.exit_code == 0, result.output
    rows = {a["arrangement"]: a for a in json.loads(result.stdout)["arrangements"]}
    assert rows["asp"]["minibatches"] == rows["long-first (asp sizes)"]["minibatches"]


def test_the_dry_run_table_of_docs_replay_is_what_the_command_prints(tmp_path):
    """docs/replay.md's table of the sample data's dry run had gone stale (224.9 s for asp where it printed 215.3)."""
    import re

    from util import SAMPLE_PROMPTS

    schedule = tmp_path / "sample.parquet"
    assert invoke("schedule", SAMPLE_PROMPTS, "-o", schedule).exit_code == 0
    result = invoke("replay", schedule, SAMPLE_PROMPTS, "--dry-run", "--compare", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    text = (REPO / "docs" / "replay.md").read_text(encoding="utf-8")
    for row in document["arrangements"]:
        documented = re.search(rf"^\| {re.escape(row['arrangement'])} \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \|$",
                               text, re.M)
        assert documented, row["arrangement"]
        assert float(documented.group(3)) == round(row["simulated"]["wall_s"], 1), row["arrangement"]
    total = re.search(r"^\| all five \| \| \| \| ([\d.]+) \|$", text, re.M)
    assert total and float(total.group(1)) == round(document["simulated_gpu_minutes_total"], 1)


def test_a_dry_run_replays_the_epochs_not_the_probe_and_lengths_epoch_picks_one(small, tmp_path):  # noqa: F811
    """A history of a probe (no epoch) and two epochs forced each prompt's probe sample first; by default a probe's
    samples are left out of the prompts an epoch holds, and --lengths-epoch E forces epoch E's alone (as in asp
    simulate); an epoch the lengths lack is refused before anything is planned (E110)."""
    ids = pl.read_ndjson(small["lengths"])["prompt_id"].unique(maintain_order=True).to_list()
    parts = {"probe": [{"prompt_id": i, "response_tokens": 60, "epoch": None} for i in ids]}
    for epoch in (0, 1):
        parts[epoch] = [{"prompt_id": i, "response_tokens": 5 + 20 * epoch + k % 7 + s, "epoch": epoch}
                        for k, i in enumerate(ids) for s in range(SAMPLES)]
    from util import write_jsonl

    history = write_jsonl(tmp_path / "history.jsonl", parts["probe"] + parts[0] + parts[1])
    alone = {name: write_jsonl(tmp_path / f"{name}.jsonl", rows) for name, rows in parts.items()}

    def minutes(lengths, *extra):
        result = invoke("replay", small["schedule"], small["prompts"], "--lengths", lengths, "--dry-run", "--json",
                        "-q", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["simulated_gpu_minutes_total"]

    both = write_jsonl(tmp_path / "both.jsonl", parts[0] + parts[1])
    assert minutes(history) == minutes(both)
    assert minutes(history, "--lengths-epoch", 1) == minutes(alone[1]) != minutes(alone[0])
    assert minutes(history, "--lengths-epoch", -1) == minutes(alone["probe"])
    # What was replayed is in the document: the epoch picked, and the prompts whose probe samples were left out.
    said = lambda *extra: json.loads(invoke("replay", small["schedule"], small["prompts"], "--lengths", history,  # noqa: E731
                                            "--dry-run", "--json", "-q", *extra).stdout)["lengths"]
    assert said()["epoch"] is None and said()["prompts_with_probe_samples_left_out"] == len(ids)
    assert said("--lengths-epoch", 1)["epoch"] == 1 and said("--lengths-epoch", 1)["prompts_with_probe_samples_left_out"] == 0
    result = invoke("replay", small["schedule"], small["prompts"], "--lengths", history, "--dry-run",
                    "--lengths-epoch", 3)
    assert result.exit_code == 4 and result.stderr == (
        f"Error: --lengths-epoch 3: {history} holds epochs 0 and 1, and samples without an epoch (a probe's: "
        "--lengths-epoch -1); give one of those, or leave --lengths-epoch out\n")


def test_lengths_none_of_whose_ids_are_the_schedules_are_refused_as_asp_simulate_refuses_them(small, tmp_path):  # noqa: F811
    """`asp replay --lengths` of another run's log (or, with --lengths-epoch, an epoch of other prompts beside a
    probe of these) forced none of them and replayed every length around the predictions, exit 0 with a warning,
    where asp simulate and asp report refuse such lengths (E76, exit 3)."""
    from util import write_jsonl

    ids = pl.read_ndjson(small["lengths"])["prompt_id"].unique(maintain_order=True).to_list()
    other = write_jsonl(tmp_path / "other.jsonl", [{"prompt_id": f"other-{i}", "response_tokens": 50} for i in ids])
    result = invoke("replay", small["schedule"], small["prompts"], "--lengths", other, "--dry-run", "-q")
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"Error: {other}: none of its {len(ids)} prompt ids is in the schedule (e.g. ")
    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"prompt_id": i, "response_tokens": 60, "epoch": None} for i in ids]
                        + [{"prompt_id": f"other-{i}", "response_tokens": 50, "epoch": 0} for i in ids])
    result = invoke("replay", small["schedule"], small["prompts"], "--lengths", mixed, "--dry-run", "-q",
                    "--lengths-epoch", 0)
    assert result.exit_code == 3 and "none of its" in result.stderr, result.output


def test_each_epoch_of_a_schedule_of_several_forces_the_lengths_own_epoch_as_asp_simulate_replays_it(small, tmp_path):  # noqa: F811
    """A 2-epoch schedule replayed with a log of two epochs of different lengths forced each prompt's epoch-0 lengths
    in both epochs (the prompts' first N samples, oldest epoch first), where `asp simulate --lengths` replays each
    schedule epoch with the lengths' own; now replay forces each epoch's own and says so in simulate's words, and
    --lengths-epoch E forces epoch E's in both, as in asp simulate."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings
    from util import write_jsonl

    two = tmp_path / "two.parquet"
    schedule([small["prompts"]], two, settings=ScheduleSettings(
        instances=INSTANCES, samples_per_prompt=SAMPLES, train_batch_size=8, minibatch_size=4, max_response_tokens=64,
        dispatch="planned", epochs=2))
    ids = pl.read_ndjson(small["lengths"])["prompt_id"].unique(maintain_order=True).to_list()
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": i, "response_tokens": 10 + 20 * e, "epoch": e}
                                               for e in (0, 1) for i in ids for _ in range(SAMPLES)])

    def dry(*extra):
        result = invoke("replay", two, small["prompts"], "--lengths", log, "--dry-run", "--json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout), result.stderr

    document, said = dry()
    asp = next(a for a in document["arrangements"] if a["arrangement"] == "asp")
    assert asp["response_tokens"] == PROMPTS * SAMPLES * (10 + 30)  # was PROMPTS * SAMPLES * 10 * 2
    assert document["lengths"]["epochs_replayed"] == [
        {"schedule_epoch": e, "lengths_epoch": e, "prompts_from_other_epochs": 0} for e in (0, 1)]
    simulated = invoke("simulate", two, "--lengths", log)
    assert simulated.exit_code == 0, simulated.output
    words = "(schedule epochs 0 and 1 replayed the lengths' own)"
    assert words in simulated.stdout + simulated.stderr
    assert f"Forced lengths: {PROMPTS} prompts with observed lengths, 0 sampled around predictions {words}." in said
    picked, said = dry("--lengths-epoch", 1)
    assert picked["arrangements"][0]["response_tokens"] == PROMPTS * SAMPLES * 30 * 2
    assert "Forced lengths" not in said
