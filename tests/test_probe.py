"""`asp probe`: the stratified draw, the rows it writes, its bad settings, and the OpenAI-compatible example."""

import io
import json
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from asp_cli.cli.main import app
from asp_cli.errors import SettingsError
from asp_cli.integrate.probe import ProbeSettings, allocate, choose, probe

ROOT = Path(__file__).resolve().parent.parent


def _dataset(path: Path, n: int = 200, with_id: bool = True) -> Path:
    rows = []
    for i in range(n):
        source = "aime" if i % 4 == 0 else "gsm"
        words = " ".join(["word"] * (5 + (i * 37) % 200))
        row = {"question": f"Problem {i}: {words}?", "data_source": source, "answer": str(i), "extra": i * 2}
        if with_id:
            row = {"uid": f"q{i}", **row}
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_settings_are_checked_once():
    for bad in (0, 0.0, -0.1, 1.5, float("nan"), True):
        with pytest.raises(SettingsError, match="--fraction"):
            ProbeSettings(fraction=bad)
    with pytest.raises(SettingsError, match="not both"):
        ProbeSettings(fraction=0.1, prompts=3)
    with pytest.raises(SettingsError, match="--prompts"):
        ProbeSettings(prompts=0)
    with pytest.raises(SettingsError, match="--min-per-source"):
        ProbeSettings(min_per_source=-1)
    with pytest.raises(SettingsError, match="more than the 10 prompts"):
        ProbeSettings(prompts=11).target(10)
    assert ProbeSettings(fraction=1.0).target(10) == 10
    assert ProbeSettings().target(2636) == 53  # 2% rounded up
    assert ProbeSettings(fraction=0.001).target(10) == 1


def test_allocation_is_proportional_with_a_minimum_per_source():
    assert allocate(np.array([1000, 100, 10]), 50, 4).tolist() == [41, 5, 4]
    assert allocate(np.array([1000, 100, 2]), 50, 4).tolist() == [43, 5, 2]  # a source smaller than the minimum
    assert allocate(np.array([10, 10, 10]), 6, 4).tolist() == [4, 4, 4]  # the minimums win (said in a warning)
    assert allocate(np.array([5, 5]), 10, 0).tolist() == [5, 5]
    for sizes, count in ((np.array([7, 300, 41]), 20), (np.array([1, 1, 1000]), 3)):
        got = allocate(sizes, count, 1)
        assert got.sum() == max(count, np.minimum(sizes, 1).sum()) and np.all(got <= sizes)


def test_the_draw_is_stratified_deterministic_and_holds_the_tail():
    rng = np.random.default_rng(0)
    predicted = rng.normal(size=300)
    code = np.repeat([0, 1], 150)
    ids = [f"p{i}" for i in range(300)]
    first = choose(code, predicted, ids, np.array([10, 5]), seed=3)
    assert np.array_equal(first, choose(code, predicted, ids, np.array([10, 5]), seed=3))
    assert not np.array_equal(first, choose(code, predicted, ids, np.array([10, 5]), seed=4))
    assert (code[first] == 0).sum() == 10 and (code[first] == 1).sum() == 5
    for s in (0, 1):
        members = np.flatnonzero(code == s)
        assert members[np.argmax(predicted[members])] in first  # each source's longest prediction
        ranks = np.argsort(np.argsort(predicted[members]))
        picked = ranks[np.isin(members, first)]
        m = (code[first] == s).sum()
        assert sorted(np.floor(picked * m / members.size).astype(int).tolist()) == list(range(m))  # one per stratum


def test_probe_writes_the_inputs_own_rows(tmp_path):
    data = _dataset(tmp_path / "train.jsonl")
    result = probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=20, seed=1))
    rows = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert len(rows) == 20 == result.summary["probe_prompts"]
    source = {json.loads(line)["uid"]: json.loads(line) for line in data.read_text().splitlines()}
    for row in rows:
        assert row == source[row["uid"]]  # every column, unchanged, the id under its own name
    assert [r["uid"] for r in rows] == result.prompt_ids
    counts = {s["data_source"]: s["probe_prompts"] for s in result.summary["sources"]}
    assert counts == {"aime": 5, "gsm": 15}
    again = probe([data], tmp_path / "probe2.jsonl", settings=ProbeSettings(prompts=20, seed=1))
    assert (tmp_path / "probe2.jsonl").read_bytes() == (tmp_path / "probe.jsonl").read_bytes()
    assert again.prompt_ids == result.prompt_ids


def test_a_jsonl_probe_keeps_chat_lists_among_text_and_content_parts(tmp_path):
    """A hostile-input audit: a chat row among text prompts was written as JSON text, and a message's image part
    was dropped; a probe row is the input's own."""
    parts = [{"role": "user", "content": [{"type": "text", "text": "Describe it."},
                                          {"type": "image_url", "image_url": {"url": "file:///x.png"}}]}]
    rows = [{"id": "a", "prompt": "What is 1+1?"}, {"id": 2, "prompt": [{"role": "user", "content": "Hi"}]},
            {"id": "c", "prompt": [{"role": "system", "content": "Be brief."}, *parts]}]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=3))
    written = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert sorted(written, key=str) == sorted(rows, key=str) and not result.warnings
    assert (tmp_path / "probe.jsonl").read_text().splitlines()[0] in [json.dumps(r) for r in rows]
    probe([data], tmp_path / "probe.parquet", settings=ProbeSettings(prompts=3))
    kept = pl.read_parquet(tmp_path / "probe.parquet")["prompt"].to_list()
    assert sorted(kept) == sorted(["What is 1+1?", *(json.dumps(r["prompt"]) for r in rows[1:])])


def test_a_jsonl_probe_says_the_nan_and_infinities_json_cannot_hold(tmp_path):
    """A hostile-input round: a Parquet input's NaN and infinities, at the top and inside an object, were written as
    null without a word, though the probe promises the input's own rows; `asp export --format jsonl` said so (of
    top-level columns). Both say it now; Parquet keeps them and says nothing."""
    import math

    data = tmp_path / "d.parquet"
    pl.DataFrame({"id": ["a", "b", "c"], "question": ["q1", "q2 long", "q3 x"], "score": [math.nan, math.inf, 1.0],
                  "extra": [{"w": -math.inf}, {"w": 1.0}, {"w": 2.0}]}).write_parquet(data)
    result = probe([data], tmp_path / "p.jsonl", settings=ProbeSettings(prompts=3))
    assert result.warnings == [
        "column 'score' holds 2 NaN or infinite values, which JSON cannot hold: written as null; write --format "
        "parquet to keep them",
        "column 'extra' (extra.w) holds 1 NaN or infinite values, which JSON cannot hold: written as null; write "
        "--format parquet to keep them"]
    kept = probe([data], tmp_path / "p.parquet", settings=ProbeSettings(prompts=3))
    assert not any("NaN" in w for w in kept.warnings)
    assert pl.read_parquet(tmp_path / "p.parquet")["score"].is_nan().sum() == 1


def test_probe_parquet_and_verl_layouts(tmp_path):
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.parquet", settings=ProbeSettings(prompts=10))
    frame = pl.read_parquet(tmp_path / "probe.parquet")
    assert set(frame.columns) == {"uid", "question", "data_source", "answer", "extra"} and frame.height == 10
    result = probe([data], tmp_path / "verl.parquet", settings=ProbeSettings(prompts=10), format="verl")
    verl = pl.read_parquet(tmp_path / "verl.parquet")
    assert verl.columns[:5] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert verl["prompt"][0].to_list()[0]["role"] == "user"
    assert verl["reward_model"].struct.field("ground_truth").to_list() == frame["answer"].to_list()
    assert verl["extra_info"].struct.field("prompt_id").to_list() == result.prompt_ids
    with pytest.raises(SettingsError, match="Parquet"):
        probe([data], tmp_path / "verl.jsonl", format="verl")
    with pytest.raises(SettingsError, match="probe.jsonl or probe.parquet"):
        probe([data], tmp_path / "probe.csv")


def test_verls_prompt_is_built_from_the_prompt_column_the_reader_took(tmp_path):
    """A hostile-input round: chat lists under `question` went into verl's prompt as their JSON text (or, in every
    row, were refused) where `asp export --format verl` took the column the reader had found."""
    rows = [{"id": "a", "question": "plain"}, {"id": "b", "question": [{"role": "user", "content": "chat"}]}]
    for name, data in (("mixed", rows), ("chat", [{**rows[1], "id": "c"}, rows[1]])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
        probe([path], tmp_path / f"{name}.parquet", settings=ProbeSettings(fraction=1.0), format="verl")
        prompts = pl.read_parquet(tmp_path / f"{name}.parquet")["prompt"].to_list()
        expected = [[{"role": "user", "content": "plain" if r["question"] == "plain" else "chat"}] for r in data]
        assert sorted(map(str, prompts)) == sorted(map(str, expected))


def test_skipped_bad_lines_leave_the_probe_rows_in_place(tmp_path):
    """With --on-bad-row skip, a line that is not JSON raised anyway when the rows were read for writing."""
    from asp_cli.reading import ReadOptions

    data = _dataset(tmp_path / "train.jsonl", n=40)
    lines = data.read_text().splitlines()
    lines.insert(7, "{not json")
    data.write_text("\n".join(lines) + "\n")
    result = probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=8),
                   read=ReadOptions(on_bad_row="skip"))
    source = {json.loads(line)["uid"]: json.loads(line) for line in lines if line != "{not json"}
    rows = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert [row["uid"] for row in rows] == result.prompt_ids and all(row == source[row["uid"]] for row in rows)
    assert result.summary["skipped_rows"] == 1
    assert any("skipped 1 bad row (--on-bad-row skip)" in w and "train.jsonl:8" in w for w in result.warnings)


def test_a_dataset_without_ids_gets_the_row_number_id(tmp_path):
    data = _dataset(tmp_path / "train.jsonl", with_id=False)
    result = probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=8))
    rows = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert all(r["question"].startswith(f"Problem {r['prompt_id']}:") for r in rows)
    assert any("adds `prompt_id`" in w for w in result.warnings)


def test_cli_probe_json_and_exit_codes(tmp_path):
    data = _dataset(tmp_path / "train.jsonl")
    runner = CliRunner()
    ok = runner.invoke(app, ["probe", str(data), "-o", str(tmp_path / "p.jsonl"), "--fraction", "0.1", "--json",
                             "-n", "4"])
    assert ok.exit_code == 0, ok.output
    document = json.loads(ok.stdout)
    assert document["probe_prompts"] == 20 and document["epoch_cost_per_probe_sample"] == pytest.approx(0.1 / 4)
    # The next step names the response cap: a probe at one cap fed to a schedule at another misreads the cut-off
    # samples (a newcomer dropped it).
    assert "--history history.parquet --max-response-tokens CAP` (the same cap" in ok.stderr
    for args in (["--fraction", "0"], ["--fraction", "1.01"], ["--prompts", "201"], ["--prompts", "0"],
                 ["--fraction", "0.1", "--prompts", "3"], ["-n", "100000"]):  # a group above schedule's 4,096
        bad = runner.invoke(app, ["probe", str(data), "-o", str(tmp_path / "q.jsonl"), *args])
        assert bad.exit_code == 4, (args, bad.output)
        assert bad.output.count("Error:") == 1
    exists = runner.invoke(app, ["probe", str(data), "-o", str(tmp_path / "p.jsonl")])
    assert exists.exit_code == 7
    # With an id column named, the next step names it to observe and schedule too: without it, observe matched the
    # log's ids against row numbers and dropped some samples as unknown (a newcomer, 2026-12-05).
    keyed = runner.invoke(app, ["probe", str(data), "-o", str(tmp_path / "k.jsonl"), "--id-key", "uid"])
    assert keyed.exit_code == 0, keyed.output
    assert f"--dataset {data} --dataset-id-key uid` and `asp schedule {data} --id-key uid ..." in keyed.stderr
    # and a prompt column named likewise (a newcomer, 2026-12-06: observe could not read such a dataset)
    both = runner.invoke(app, ["probe", str(data), "-o", str(tmp_path / "b.jsonl"), "--id-key", "uid",
                               "--prompt-key", "question"])
    assert both.exit_code == 0, both.output
    assert (f"--dataset {data} --dataset-id-key uid --dataset-prompt-key question` and `asp schedule {data} --id-key "
            "uid --prompt-key question ...") in both.stderr


class _FakeOpenAI(BaseHTTPRequestHandler):
    """A chat-completions server answering with a length that depends on the prompt (and hits the cap)."""

    calls: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeOpenAI.calls.append(body)
        text = body["messages"][-1]["content"]
        tokens = min(len(text), body["max_tokens"])
        answer = {"choices": [{"message": {"role": "assistant", "content": "x"},
                               "finish_reason": "length" if tokens == body["max_tokens"] else "stop"}],
                  "usage": {"completion_tokens": tokens, "prompt_tokens": 3}}
        self.reply(200, json.dumps(answer).encode())

    def reply(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):  # quiet
        pass


def test_the_openai_example_feeds_observe_and_schedule(tmp_path):
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=12))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"), "-o",
             str(tmp_path / "log.jsonl"), "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1",
             "--model", "fake", "--samples", "2", "--max-tokens", "400", "--concurrency", "4", "--timeout", "30"],
            capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(log) == 24 and all(call["n"] == 1 and call["max_tokens"] == 400 for call in _FakeOpenAI.calls)
    assert any(r["truncated"] for r in log) and not all(r["truncated"] for r in log)
    runner = CliRunner()
    observed = runner.invoke(app, ["observe", str(tmp_path / "log.jsonl"), "-o", str(tmp_path / "h.parquet"),
                                   "--dataset", str(data)])
    assert observed.exit_code == 0, observed.output
    made = runner.invoke(app, ["schedule", str(data), "-o", str(tmp_path / "s.parquet"), "--history",
                               str(tmp_path / "h.parquet"), "--max-response-tokens", "400", "--json", "-q"])
    assert made.exit_code == 0, made.output
    calibration = json.loads(made.stdout)["calibration"]
    assert calibration["prompts_seen"] == 12 and calibration["censored_samples"] > 0
    assert {s["data_source"] for s in calibration["sources"]} == {"aime", "gsm"}


class _CompletionsOpenAI(_FakeOpenAI):
    """A server of plain completions (/completions, a "prompt" text), as vLLM serves a base model."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path.endswith("/completions") and not self.path.endswith("/chat/completions"), self.path
        _FakeOpenAI.calls.append(body)
        tokens = min(len(body["prompt"]), body["max_tokens"])
        self.reply(200, json.dumps({"choices": [{"text": "x", "finish_reason": "stop"}],
                                    "usage": {"completion_tokens": tokens, "prompt_tokens": 3}}).encode())


def test_the_openai_example_sends_text_to_completions_for_a_run_without_a_chat_template(tmp_path):
    """A newcomer: OpenRLHF runs without --apply_chat_template (base-model "zero" RL) could not be probed under the
    prompt format they train on; the example only posted chat messages."""
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=4))
    _FakeOpenAI.calls = []
    done = _run_example(tmp_path, _CompletionsOpenAI, "--completions")
    assert done.returncode == 0, done.stderr
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(log) == len(_FakeOpenAI.calls) == len((tmp_path / "probe.jsonl").read_text().splitlines())
    assert all(isinstance(c["prompt"], str) and "messages" not in c for c in _FakeOpenAI.calls)


class _UnknownModelOpenAI(_FakeOpenAI):
    """Answers every request as vLLM does for a model it does not serve."""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        payload = b'{"object": "error", "message": "The model `M` does not exist.", "code": 404}'
        self.reply(404, payload)


def test_the_openai_example_says_why_the_server_refused_and_writes_no_empty_log(tmp_path):
    """A newcomer's `--model M` got "HTTPError: HTTP Error 404: Not Found" five times, advice to --resume, and an
    empty log that the next step (`asp observe`) refused."""
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=3))
    done = _run_example(tmp_path, _UnknownModelOpenAI, "--retries", "1")
    assert done.returncode == 1 and not (tmp_path / "log.jsonl").exists()
    assert "HTTP 404: " in done.stderr and "The model `M` does not exist." in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("nothing written to " + str(tmp_path / "log.jsonl")
                                                         + "; the server refused them: check --model and --base-url")


class _DroppingOpenAI(_FakeOpenAI):
    """Closes the connection, unanswered, on the first request of every prompt (a restarting server)."""

    seen: set = set()
    lock = threading.Lock()
    refuse = False

    def do_POST(self):  # noqa: N802
        length = int(self.headers["Content-Length"])
        body = self.rfile.read(length)
        key = json.loads(body)["messages"][-1]["content"]
        with _DroppingOpenAI.lock:
            first = key not in _DroppingOpenAI.seen
            _DroppingOpenAI.seen.add(key)
        if first or _DroppingOpenAI.refuse:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.rfile = io.BytesIO(body)
        super().do_POST()


def _run_example(tmp_path, handler, *extra):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        return subprocess.run(
            [sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"), "-o",
             str(tmp_path / "log.jsonl"), "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1",
             "--model", "fake", "--max-tokens", "400", "--concurrency", "2", "--timeout", "30", *extra],
            capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()


def test_the_openai_example_retries_dropped_connections_and_resumes(tmp_path):
    """A dropped connection (RemoteDisconnected) failed the request at once, whatever --retries said; and a run
    with failures could only be redone whole."""
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=6))
    prompts = len((tmp_path / "probe.jsonl").read_text().splitlines())
    _DroppingOpenAI.seen = set()
    done = _run_example(tmp_path, _DroppingOpenAI, "--retries", "3")
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == prompts
    # Every request dropped: each fails, is counted, and --resume later sends only what the log lacks.
    (tmp_path / "log.jsonl").unlink()
    _DroppingOpenAI.refuse = True
    try:
        failed = _run_example(tmp_path, _DroppingOpenAI, "--retries", "1", "--samples", "2")
    finally:
        _DroppingOpenAI.refuse = False
    # Nothing answered: no log (an empty one only failed the next step), and the advice is to run again.
    assert failed.returncode == 1 and f"all {2 * prompts} requests failed; nothing written" in failed.stderr
    assert not (tmp_path / "log.jsonl").exists() and "run the same command again" in failed.stderr
    (tmp_path / "log.jsonl").write_text(json.dumps({"prompt_id": "kept", "sample": 0, "response_tokens": 7,
                                                    "truncated": False}) + "\n")
    _FakeOpenAI.calls = []
    resumed = _run_example(tmp_path, _FakeOpenAI, "--samples", "2", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(log) == 2 * prompts + 1 and log[0]["prompt_id"] == "kept" and len(_FakeOpenAI.calls) == 2 * prompts
    again = _run_example(tmp_path, _FakeOpenAI, "--samples", "2", "--resume")
    assert again.returncode == 0 and len(_FakeOpenAI.calls) == 2 * prompts
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 2 * prompts + 1


def test_the_openai_example_says_it_reads_json_lines(tmp_path):
    data = _dataset(tmp_path / "train.jsonl")
    probe([data], tmp_path / "probe.parquet", settings=ProbeSettings(prompts=4), format="verl")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.parquet"),
                           "-o", str(tmp_path / "log.jsonl"), "--model", "m", "--max-tokens", "10"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stderr.startswith("Error: ") and "Traceback" not in done.stderr
    assert "-o probe.jsonl" in done.stderr
    # --resume on a log this script did not write: one line saying so, not a traceback.
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=4))
    (tmp_path / "log.jsonl").write_text('{"prompt_id": "a", "response_tokens": 5}\n')
    foreign = subprocess.run([sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"),
                              "-o", str(tmp_path / "log.jsonl"), "--model", "m", "--max-tokens", "10", "--resume"],
                             capture_output=True, text=True, timeout=60)
    assert foreign.returncode == 3 and "log.jsonl:1: not a line this script writes" in foreign.stderr
    assert "Traceback" not in foreign.stderr


class _AnyOpenAI(_FakeOpenAI):
    """Both endpoints: a chat list's last message, or /completions' prompt text (its length is the answer's)."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeOpenAI.calls.append(body)
        text = body["prompt"] if "prompt" in body else json.dumps(body["messages"][-1]["content"])
        answer = {"choices": [{"finish_reason": "stop"}], "usage": {"completion_tokens": len(text)}}
        self.reply(200, json.dumps(answer).encode())


def test_the_openai_example_reads_the_columns_asp_probe_was_told_of(tmp_path):
    """A newcomer round: docs/probe.md says to name verl's `extra_info.index` in every command, but the example
    looked the dotted name up as one key ("no prompt id", exit 3); it had no --prompt-key (OpenRLHF's
    `context_messages`); and --completions sent a content given as parts as their Python text."""
    rows = [{"extra_info": {"index": 10 + i}, "context_messages": [
        {"role": "user", "content": [{"type": "text", "text": f"What is {i} "}, {"type": "text", "text": "+ 1?"}]}]}
        for i in range(3)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _FakeOpenAI.calls = []
    done = _run_example(tmp_path, _AnyOpenAI, "--id-key", "extra_info.index", "--prompt-key", "context_messages",
                        "--completions")
    assert done.returncode == 0, done.stderr
    assert sorted(call["prompt"] for call in _FakeOpenAI.calls) == [f"What is {i} + 1?" for i in range(3)]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["prompt_id"] for r in log] == ["10", "11", "12"]
    # as chat, the parts go as they are; an image part cannot go to /completions, said before any request
    _FakeOpenAI.calls = []
    chat = _run_example(tmp_path, _AnyOpenAI, "--id-key", "extra_info.index", "--prompt-key", "context_messages",
                        "--resume")
    assert chat.returncode == 0 and _FakeOpenAI.calls == []  # all in the log already
    rows[0]["context_messages"][0]["content"].append({"type": "image_url", "image_url": {"url": "data:,"}})
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "log.jsonl").unlink()
    image = _run_example(tmp_path, _AnyOpenAI, "--id-key", "extra_info.index", "--prompt-key", "context_messages",
                         "--completions")
    assert image.returncode == 3 and "probe.jsonl:1: a message holds a part that is not text" in image.stderr
    assert _FakeOpenAI.calls == [] and not (tmp_path / "log.jsonl").exists()
    unnamed = _run_example(tmp_path, _AnyOpenAI, "--id-key", "extra_info.index")
    assert unnamed.returncode == 3 and "name the column with --prompt-key" in unnamed.stderr


def test_a_source_left_without_probe_prompts_is_warned_about(tmp_path):
    """--min-per-source 0 with a small probe left a source unprobed without a word."""
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}", "data_source": f"s{i % 3}"}) + "\n"
                            for i in range(40)))
    result = probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=2, min_per_source=0))
    assert [w for w in result.warnings if "get no probe prompt" in w] == [
        "1 data sources get no probe prompt (s2): their lengths stay the model's guess; raise --prompts or "
        "--min-per-source"]
    assert not any("get no probe prompt" in w for w in probe([data], tmp_path / "p2.jsonl",
                                                               settings=ProbeSettings(prompts=6)).warnings)


def test_the_openai_example_refuses_a_probe_whose_ids_repeat_under_the_key_it_was_given(tmp_path):
    """verl's extra_info.index numbers each source from 0: named as the id, two probed prompts became one, each
    sample credited to whichever prompt the dataset numbers so, exit 0 (a probe newcomer's round)."""
    rows = [{"prompt_id": f"r{i}", "prompt": f"Problem {i}", "extra_info": {"index": i % 2}} for i in range(3)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"),
                           "-o", str(tmp_path / "log.jsonl"), "--model", "m", "--max-tokens", "10", "--id-key",
                           "extra_info.index"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and not (tmp_path / "log.jsonl").exists(), done.stderr
    assert done.stderr.strip() == (f"Error: {tmp_path / 'probe.jsonl'}:3: prompt id '0' (--id-key extra_info.index) "
                                   "is line 1's too: name the probe's unique id column: leave --id-key out to read "
                                   "its 'prompt_id', or pass --id-key prompt_id")
    # A probe of a dataset with its own `id` holds no prompt_id: the advice names the column it has (it said
    # --id-key prompt_id, which then found no id at all).
    rows = [{"id": f"q{i}", "prompt": f"Problem {i}", "extra_info": {"index": i % 2}} for i in range(3)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"),
                           "-o", str(tmp_path / "log.jsonl"), "--model", "m", "--max-tokens", "10", "--id-key",
                           "extra_info.index"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stderr.strip().endswith(
        "name the probe's unique id column: leave --id-key out to read its 'id', or pass --id-key id"), done.stderr


class _SlowOpenAI(_FakeOpenAI):
    """Answers every prompt at once but those holding ``slow`` in their text, which wait ``delay_s`` (a long
    reasoning sample on a loaded server)."""

    slow = "Problem 0:"
    delay_s = 3.0

    def do_POST(self):  # noqa: N802 - http.server's name
        length = int(self.headers["Content-Length"])
        body = self.rfile.read(length)
        if _SlowOpenAI.slow in json.loads(body)["messages"][-1]["content"]:
            threading.Event().wait(_SlowOpenAI.delay_s)
        self.rfile = io.BytesIO(body)
        super().do_POST()


def test_the_openai_example_says_a_timeout_loses_the_long_samples(tmp_path):
    """A timed-out request was told to --resume, which timed out again; left out, the longest samples calibrate the
    schedule too short (a probe newcomer's deepmath prompts)."""
    rows = [{"id": f"q{i}", "prompt": f"Problem {i}: words"} for i in range(4)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = _run_example(tmp_path, _SlowOpenAI, "--timeout", "0.5", "--retries", "1")
    assert done.returncode == 1
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 3
    assert ("1 timed out after --timeout 0.5 s, the longest samples, which left out calibrate the schedule too "
            "short: raise --timeout and run the same command with --resume") in done.stderr, done.stderr


def test_the_openai_example_keeps_what_a_stopped_run_got_and_resumes_it(tmp_path):
    """Written only at the end, a probe stopped midway (Ctrl-C, a lost machine) lost every answer: each is now
    journalled as it comes, and --resume reads the journal back."""
    import os
    import signal
    import time

    rows = [{"id": f"q{i}", "prompt": f"Problem {i}: words"} for i in range(5)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _SlowOpenAI.delay_s = 60.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowOpenAI)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    journal = tmp_path / "log.jsonl.partial"
    command = [sys.executable, str(ROOT / "examples" / "probe_openai.py"), str(tmp_path / "probe.jsonl"), "-o",
               str(tmp_path / "log.jsonl"), "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1",
               "--model", "fake", "--max-tokens", "400", "--concurrency", "5"]
    try:
        running = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (journal.exists() and len(journal.read_text().splitlines()) == 4):
            time.sleep(0.05)
        os.kill(running.pid, signal.SIGINT)
        _, stderr = running.communicate(timeout=60)
    finally:
        _SlowOpenAI.delay_s = 3.0
        server.shutdown()
        server.server_close()
    assert running.returncode == 130 and not (tmp_path / "log.jsonl").exists(), stderr
    assert f"Interrupted: 4 samples kept in {journal}; the same command with --resume sends only the rest" in stderr
    _FakeOpenAI.calls = []
    resumed = _run_example(tmp_path, _FakeOpenAI, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert len(_FakeOpenAI.calls) == 1 and not journal.exists()
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["prompt_id"] for r in log] == ["q0", "q1", "q2", "q3", "q4"]


def test_the_openai_example_keeps_an_existing_log_unless_told_to_resume_or_replace_it(tmp_path):
    """A newcomer's rerun without --resume (another --max-tokens, a forgotten flag) replaced a finished log, and a
    stopped run's OUTPUT.partial, in silence: generation time spent, lost. asp's own commands refuse an existing
    output (exit 7); the example now does too, before any request."""
    rows = [{"id": f"q{i}", "prompt": f"Problem {i}: words"} for i in range(3)]
    (tmp_path / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = '{"prompt_id": "q0", "response_tokens": 7, "sample": 0, "truncated": false}\n'

    class Counted(_FakeOpenAI):  # its own list: another test's server may still append to _FakeOpenAI.calls
        posts: list = []

        def do_POST(self):  # noqa: N802 - http.server's name
            Counted.posts.append(self.path)
            super().do_POST()

    for name, whose in (("log.jsonl", "an earlier run"), ("log.jsonl.partial", "a stopped run")):
        (tmp_path / name).write_text(kept)
        done = _run_example(tmp_path, Counted)
        assert done.returncode == 7 and Counted.posts == [], done.stderr
        assert done.stderr.strip() == (f"Error: {tmp_path / name} exists ({whose}'s samples); pass --resume to keep "
                                       "them and send only the rest, or --force to replace them")
        assert (tmp_path / name).read_text() == kept
        (tmp_path / name).unlink()
    (tmp_path / "log.jsonl").write_text(kept)
    replaced = _run_example(tmp_path, Counted, "--force")
    assert replaced.returncode == 0 and len(Counted.posts) == 3, replaced.stderr
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 3


def test_the_openai_example_says_its_retries_are_tries_in_all():
    """docs/probe.md said requests were "retried --retries times", as asp replay's are (tries = retries + 1), and the
    script's --help said nothing: its --retries counts every try, the first included, so a newcomer's --retries 0
    (no retry) was refused by a line that did not say why."""
    shown = subprocess.run([sys.executable, str(ROOT / "examples" / "probe_openai.py"), "--help"],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "tries per request in all, the first included" in " ".join(shown.stdout.split())
    doc = " ".join((ROOT / "docs" / "probe.md").read_text(encoding="utf-8").split())
    assert "are tried `--retries` times in all (3: the first try and two retries;" in doc


def test_an_asp_export_given_as_the_input_is_refused_as_asp_schedule_refuses_it(tmp_path):
    """`asp probe` of an `asp export` (one epoch's, the file the trainer was given) picked its rows, asp's seq and
    train_step with them, and wrote them as a probe, exit 0: asp's own output again, whose ids (row numbers of a
    dataset without ids) are not the dataset's. Refused as `asp schedule` refuses it (E102, exit 3), nothing
    written; in each layout, prefixed or not, alone or beside its dataset, from the CLI and the Python twin."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.errors import InputError
    from asp_cli.integrate.export import export
    from asp_cli.settings import ScheduleSettings

    data = _dataset(tmp_path / "train.jsonl", n=40, with_id=False)
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=8, minibatch_size=4, instances=2))
    said = ("an asp export (its rows are a dataset's prompts in a schedule's order, with asp's columns added), not the "
            "prompt file(s) the schedule was made from; give that file instead (each prompt once, in its own order)")
    for name, extra in (("e.jsonl", {"format": "jsonl"}), ("m.jsonl", {"format": "jsonl", "metadata_key": "meta"}),
                        ("p.jsonl", {"format": "jsonl", "prefix": "asp_"}), ("e.parquet", {}),
                        ("v.parquet", {"format": "verl"})):
        exported = tmp_path / name
        export(sched, [data], exported, **extra)
        for inputs in ([exported], [data, exported]):
            out = tmp_path / "probe.jsonl"
            refused = CliRunner().invoke(app, ["probe", *map(str, inputs), "-o", str(out), "--prompts", "4"])
            assert refused.exit_code == 3, refused.output
            assert refused.stderr == f"Error: {exported}: {said}\n"
            assert not out.exists()
        with pytest.raises(InputError, match=re.escape(said)):
            probe([exported], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=4))
    assert probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=8)).summary["probe_prompts"] == 8


def test_the_vllm_example_reads_the_prompt_column_of_a_messages_dataset(tmp_path, monkeypatch):
    """docs/probe.md's vLLM snippet read `row["prompt"]`: on a Hugging Face dataset whose chat list is `messages`
    (no id column) it stopped with KeyError: 'prompt' after loading the model (an OpenRLHF newcomer's). Run with a
    stand-in for vLLM and the two settings the snippet asks for set to that dataset's columns, its log feeds
    `asp observe`."""
    import re
    import types

    rows = [{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"What is {i}+{i}?"}],
             "data_source": "gsm" if i % 2 else "math", "answer": str(2 * i)} for i in range(40)]
    pl.DataFrame(rows).write_parquet(tmp_path / "train.parquet")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["probe", "train.parquet", "-o", "probe.jsonl", "--prompts", "4"])
    assert result.exit_code == 0, result.output

    class LLM:
        def __init__(self, model):
            self.model = model

        def chat(self, conversations, params):
            assert all(isinstance(c, list) and c[-1]["role"] == "user" for c in conversations)
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=[0] * (10 + k),
                                                                         finish_reason="stop")
                                                   for k in range(params.n)]) for _ in conversations]

    class SamplingParams:
        def __init__(self, n=1, **settings):
            self.n = n

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    doc = (ROOT / "docs" / "probe.md").read_text(encoding="utf-8")
    snippet = doc.split("### vLLM offline", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    snippet = re.sub(r'^ID = .*$', 'ID = "prompt_id"', snippet, flags=re.M)  # the probe adds it: no id column
    snippet = re.sub(r'^PROMPT = .*$', 'PROMPT = "messages"', snippet, flags=re.M)
    exec(compile(snippet, "docs/probe.md", "exec"), {})
    result = CliRunner().invoke(app, ["observe", "probe_log.jsonl", "-o", "history.parquet", "--dataset",
                                      "train.parquet"])
    assert result.exit_code == 0, result.output
    probed = len((tmp_path / "probe.jsonl").read_text().splitlines())
    assert pl.read_parquet(tmp_path / "history.parquet").height == 2 * probed  # n=2 samples of each probed prompt


def test_a_verl_probe_whose_chat_lists_differ_in_length_is_warned_that_verls_generation_stops(tmp_path):
    """docs/probe.md says verl 0.9.1's main_generation_server stops (an inhomogeneous NumPy array) on a probe whose
    prompts hold different numbers of messages; `asp probe --format verl` of a dataset where half the prompts carry a
    system message wrote one without a word. Warned, naming the fix; a probe of alike lists, and JSON lines, are not."""
    rows = [{"id": f"q{i}", "data_source": "math",
             "prompt": ([{"role": "system", "content": "You are a math expert."}] if i % 2 else [])
             + [{"role": "user", "content": f"What is {i} times {i + 3}?" + " Explain." * (i % 4)}]}
            for i in range(40)]
    data = tmp_path / "train.parquet"
    pl.DataFrame(rows).write_parquet(data)
    said = [w for w in probe([data], tmp_path / "p.parquet", settings=ProbeSettings(prompts=8), format="verl").warnings
            if "main_generation_server" in w]
    written = pl.read_parquet(tmp_path / "p.parquet")["prompt"].list.len()
    fewest = int((written == 1).sum())
    assert said == [
        f"the probe's chat lists hold 1 to 2 messages ({fewest} of 8 prompts hold 1): verl 0.9.1's "
        "main_generation_server makes one NumPy array of them and stops with 'ValueError: setting an array element "
        "with a sequence. The requested array has an inhomogeneous shape' before any server starts (docs/probe.md); "
        "generate this probe with vLLM offline or examples/probe_openai.py (asp probe ... -o probe.jsonl), or give "
        "every prompt the same messages"] and 0 < fewest < 8
    alike = tmp_path / "alike.parquet"
    pl.DataFrame([dict(r, prompt=r["prompt"][-1:]) for r in rows]).write_parquet(alike)
    assert not [w for w in probe([alike], tmp_path / "a.parquet", settings=ProbeSettings(prompts=8),
                                 format="verl").warnings if "main_generation_server" in w]
    assert not [w for w in probe([data], tmp_path / "p.jsonl", settings=ProbeSettings(prompts=8)).warnings
                if "main_generation_server" in w]
