"""`asp export` and `asp observe`: stdout/stderr contract, exit codes, help and docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _schedules import PROMPTS, SAMPLES, built  # noqa: F401 - fixture
from typer.testing import CliRunner
from util import REPO, make_prompts, write_jsonl

from asp_cli.cli.main import app
from asp_cli.errors import ExitCode

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_export_writes_and_talks_on_stderr_only(built, tmp_path):  # noqa: F811
    out = tmp_path / "train.parquet"
    result = invoke("export", built["schedule"], built["prompts"], "-o", out, "--format", "verl")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "data.shuffle=False" in result.stderr and "data.train_batch_size=" in result.stderr
    assert "set in verl 0.9:" in result.stderr and "actor_rollout_ref.rollout.agent.num_workers=8" in result.stderr
    assert "laid out for 8 workers (v1 chunking): 2, 2, 2, 2, 2, 2, 2, 2 prompts per worker" in result.stderr
    # A clean export warns of nothing (it warned of verl's prompt filter every time: now only for a long prompt)
    # but that the schedule was made for blocking calls and an asynchronous trainer, that verl's default mini batch
    # exceeds its train batch of 16, and that verl's 8 agent-loop workers are not its instances.
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    engine, lag, mini, workers = (next(w for w in warnings if words in w) for words in (
        "continuous engine", "planned for an asynchronous trainer", "ppo_mini_batch_size", "agent-loop workers"))
    assert len(warnings) == 4, warnings
    assert "planned for the continuous engine" in engine and "--engine streaming" in engine
    assert "--max-lag 0 --trainer schedule" in engine  # for verl's default trainer, not --engine streaming alone
    assert "planned for an asynchronous trainer (--max-lag none)" in lag and "--max-lag 0 --trainer schedule" in lag
    assert "ppo_mini_batch_size (its default 256) is larger than data.train_batch_size=16" in mini
    assert "laid out for 8 agent-loop workers" in workers and out.exists()


def test_export_with_many_workers_says_how_many_get_each_count(built, tmp_path):  # noqa: F811
    """--workers 100000 printed one number per worker: a 300 KB summary line."""
    result = invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "t.parquet", "--format", "verl",
                    "--workers", 100)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stderr.splitlines() if "laid out for 100 workers" in x)
    assert line.endswith("(v1 chunking): 16 workers get 1 prompt, 84 workers get 0 prompts"), line


def test_export_for_other_trainers_does_not_speak_of_verls_chunking(built, tmp_path):  # noqa: F811
    result = invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "o.jsonl", "-f", "jsonl",
                    "--order", "train")
    assert result.exit_code == 0, result.output
    assert "contiguous chunks, one per rollout worker:" in result.stderr and "chunking)" not in result.stderr
    # Each trainer's own settings, as verl's are printed (an OpenRLHF newcomer was sent to the docs for them).
    from _schedules import BATCH, INSTANCES

    assert divmod(2 * PROMPTS, BATCH) == (15, 0)  # two epochs of 7 batches and 8 rows: whole batches in all
    said = " ".join(result.stderr.split())
    # slime's --input-key (its default is `input`) and the --num-steps-per-rollout its scripts set, which must agree
    # with --global-batch-size (a slime newcomer's round).
    assert (f"slime: --prompt-data {tmp_path / 'o.jsonl'} --rollout-batch-size {BATCH} --n-samples-per-prompt {SAMPLES} --global-batch-size "
            f"{BATCH * SAMPLES} (or --num-steps-per-rollout 1 in its place) --input-key question --label-key answer --num-rollout "
            f"15, no --rollout-shuffle; for its length log export with --metadata-key metadata (slime keeps a row's prompt, "
            f"label and that object only: each sample then carries its prompt_id) OpenRLHF: --data.prompt_dataset {tmp_path / 'o.jsonl'} --data.input_key question "
            f"--data.label_key answer --rollout.batch_size {BATCH} --rollout.n_samples_per_prompt {SAMPLES} "
            f"--vllm.num_engines {INSTANCES} (the schedule's --max-lag is no lag OpenRLHF runs: it is synchronous, --max-lag 0, "
            "or with --train.async_enable one batch ahead, --max-lag 1 --trainer schedule) (answer: the dataset's label "
            "column, which OpenRLHF hands the reward function; name another if yours reads another; "
            "no --rollout.vllm_generate_batch_size, which deals several batches at once), its dataloader's hard-coded "
            "shuffle patched off (or asp's ScheduleSampler on the original file, not this one") in said
    assert "the schedule was not made for OpenRLHF's deal: make it with --engine streaming --router " in said
    # A schedule made for none of their deals (verl's balancer) keeps the three lines under one heading.
    assert "read it in file order, unshuffled: slime:" in said and "whose deal the schedule was" not in said
    # consumer_batch_size is the batch of AReaL's staleness rule (default 1), and a schedule timed otherwise than as
    # its controller deals says so (an AReaL newcomer's round).
    assert (f"AReaL: train_dataset.shuffle=false train_dataset.batch_size={BATCH} rollout.consumer_batch_size={BATCH} "
            f"gconfig.n_samples={SAMPLES}" in said)
    assert "total_train_epochs=1 (the file holds 2 epochs)" in said
    assert "the schedule was not made for AReaL's controller" in said


def test_export_names_the_label_column_and_puts_the_framework_the_schedule_was_made_for_first(tmp_path):
    """An OpenRLHF newcomer's Parquet dataset (`messages`, `data_source`, `answer`, no id) was printed `--data.label_key
    LABEL`, and slime's line first with "the schedule was timed for another router", for a schedule made for
    OpenRLHF's deal."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def made(label: str) -> Path:
        rows = make_prompts(64)
        train = tmp_path / f"train_{label}.parquet"
        pq.write_table(pa.table({"messages": [[{"role": "user", "content": r["question"]}] for r in rows],
                                 "data_source": [r["data_source"] for r in rows],
                                 label: [str(i) for i in range(len(rows))]}), train)
        result = invoke("schedule", train, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--router",
                        "group-round-robin", "--trainer", "schedule", "--max-lag", "1", "--train-batch-size", 16,
                        "--instances", 2, "--quiet", "--force")
        assert result.exit_code == 0, result.output
        return train

    train = made("answer")
    out = invoke("export", tmp_path / "s.parquet", train, "-o", tmp_path / "o.jsonl", "-f", "jsonl", "--order", "train",
                 "--epoch", 0)
    assert out.exit_code == 0, out.output
    lines = out.stderr.splitlines()
    heading = next(i for i, line in enumerate(lines) if "read it in file order" in line)
    assert lines[heading] == ("  read it in file order, unshuffled, in OpenRLHF, whose deal the schedule was made for "
                              "(--router group-round-robin --trainer schedule --max-lag 1):")
    assert lines[heading + 1].startswith("    OpenRLHF: ") and "--data.label_key answer " in lines[heading + 1]
    assert "LABEL" not in lines[heading + 1] and "--train.async_enable --train.async_queue_size 1" in lines[heading + 1]
    assert lines[heading + 2].startswith("  in another framework, whose deal the schedule was not timed for")
    assert {lines[heading + 3].split(":")[0], lines[heading + 4].split(":")[0]} == {"    slime", "    AReaL"}
    assert "--input-key messages --label-key answer --apply-chat-template" in lines[heading + 3 if "slime" in
                                                                                       lines[heading + 3] else heading + 4]
    # Without a label column of a common name the placeholder stays, and says what to give.
    train = made("reference")
    out = invoke("export", tmp_path / "s.parquet", train, "-o", tmp_path / "p.jsonl", "-f", "jsonl", "--order", "train",
                 "--epoch", 0)
    assert out.exit_code == 0, out.output
    said = " ".join(out.stderr.split())
    assert "--data.label_key LABEL " in said and "(LABEL your label column, a top-level one" in said
    # slime's too: its --label-key defaults to none, every sample's label None (left out, it was said nowhere)
    assert "--label-key LABEL " in said and "LABEL your label column, a top-level one: slime reads data[LABEL]" in said


def test_export_for_slime_says_what_its_rollouts_do_with_a_short_last_batch(built, tmp_path):  # noqa: F811
    """slime wraps a short last batch into the file's start; --num-rollout is a plain integer (slime's argparse int
    refused '1,770'), and a file of less than one batch is not told --num-rollout 0 (which trains nothing)."""
    from _schedules import BATCH, INSTANCES

    one = invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "o.jsonl", "-f", "jsonl", "--epoch", "0")
    assert one.exit_code == 0, one.output
    assert (f"--num-rollout 7 (as --num-epoch 1: the last 8 rows are left out; one rollout more would take "
            f"{BATCH - 8} rows from the file's start), no --rollout-shuffle") in " ".join(one.stderr.split())
    # Which order each trainer wants follows the schedule's trainer (an AReaL newcomer exported --order train).
    from asp_cli.schedule_format import read_schedule

    trainer = read_schedule(built["schedule"]).recorded_settings.trainer
    wants_train = "slime and OpenRLHF train each batch of consecutive rows, which this schedule's steps are in --order train"
    wants_dispatch = "AReaL, which submits rows in file order and trains them so, runs the dispatch order"
    dispatch = " ".join(invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "d.jsonl", "-f",
                               "jsonl").stderr.split())
    assert (wants_train in dispatch) == (trainer == "schedule") and wants_dispatch not in dispatch
    arrival = tmp_path / "arrival.parquet"
    made = invoke("schedule", built["prompts"], "-o", arrival, "--engine", "streaming", "--max-lag", "2", "--quiet")
    assert made.exit_code == 0, made.output
    said = " ".join(invoke("export", arrival, built["prompts"], "-o", tmp_path / "a.jsonl", "-f", "jsonl", "--order",
                           "train").stderr.split())
    assert wants_dispatch in said and "rollout.max_head_offpolicyness=2" in said
    small = write_jsonl(tmp_path / "small.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(5)])
    made = invoke("schedule", small, "-o", tmp_path / "s.parquet", "--train-batch-size", "8", "--quiet")
    assert made.exit_code == 0, made.output
    out = invoke("export", tmp_path / "s.parquet", small, "-o", tmp_path / "t.jsonl", "-f", "jsonl")
    assert ("--num-rollout 1 (the file holds 5 rows, less than one batch: slime takes the other 3 from the file's "
            "start again; --num-epoch 1 runs none)") in " ".join(out.stderr.split())
    # One row past the last batch, said in the singular (a slime newcomer's 33 prompts in batches of 8 read 'the last
    # 1 rows are left out', '1 batches of 8 + 1 rows' and 'the last batch has 1 rows ... drops them').
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(9)])
    made = invoke("schedule", odd, "-o", tmp_path / "odd.parquet", "--train-batch-size", "8", "--quiet")
    assert made.exit_code == 0, made.output
    out = " ".join(invoke("export", tmp_path / "odd.parquet", odd, "-o", tmp_path / "odd_out.jsonl", "-f", "jsonl",
                          "--order", "train").stderr.split())
    assert "; 1 batch of 8 + 1 row " in out, out
    assert ("--num-rollout 1 (as --num-epoch 1: the last row is left out; one rollout more would take 7 rows from the "
            "file's start)") in out and "the last batch has 1 row, fewer than the train batch size 8; a trainer with " \
        "drop_last drops it" in out, out
    many = write_jsonl(tmp_path / "many.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(2400)])
    assert invoke("schedule", many, "-o", tmp_path / "m.parquet", "--train-batch-size", "2", "--quiet").exit_code == 0
    out = invoke("export", tmp_path / "m.parquet", many, "-o", tmp_path / "m.jsonl", "-f", "jsonl")
    assert "--num-rollout 1200, no --rollout-shuffle" in " ".join(out.stderr.split())


def test_export_json_is_the_only_stdout(built, tmp_path):  # noqa: F811
    out = tmp_path / "o.jsonl"
    result = invoke("export", built["schedule"], built["prompts"], "-o", out, "-f", "jsonl", "--json", "-q")
    assert result.exit_code == 0 and result.stderr == ""
    document = json.loads(result.stdout)
    assert document["rows"] == 2 * PROMPTS and document["order"] == "dispatch"
    assert "trainer_overrides" not in document  # no trainer's settings for JSON lines
    # The format by the output's name, as `asp probe` takes it (a pipeline newcomer's `-o x.jsonl` was refused).
    named = invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "n.jsonl", "--json", "-q")
    assert named.exit_code == 0 and json.loads(named.stdout)["format"] == "jsonl", named.output
    assert json.loads((tmp_path / "n.jsonl").read_text().splitlines()[0])
    # verl's settings also as the command line's words, ready for a launcher.
    verl = invoke("export", built["schedule"], built["prompts"], "-o", tmp_path / "v.parquet", "-f", "verl",
                  "--json", "-q")
    document = json.loads(verl.stdout)
    assert document["trainer_overrides"].split()[0] == "data.shuffle=False"
    assert len(document["trainer_overrides"].split()) == len(document["trainer_settings"])


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("mismatch", ExitCode.BAD_INPUT, "prompt id"),
        ("not_schedule", ExitCode.SCHEDULE_FORMAT, "not"),
        ("exists", ExitCode.OUTPUT, "--force"),
        ("format", ExitCode.BAD_SETTINGS, "--format"),
        ("verl_version", ExitCode.BAD_SETTINGS, "--verl-version must be one of 0.9, 0.7"),
    ],
)
def test_export_exit_codes(built, tmp_path, case, code, message):  # noqa: F811
    schedule, data, out, extra = built["schedule"], built["prompts"], tmp_path / "o.parquet", []
    if case == "mismatch":
        rows = make_prompts(PROMPTS)
        rows[0]["id"] = "zz"
        data = write_jsonl(tmp_path / "d.jsonl", rows)
    elif case == "not_schedule":
        schedule = built["prompts"]
    elif case == "exists":
        out.write_text("x")
    elif case == "verl_version":
        extra = ["--format", "verl", "--verl-version", "0.8"]
    else:
        extra = ["--format", "csv"]
    result = invoke("export", schedule, data, "-o", out, *extra)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0]


def test_observe_appends_and_reports(built, tmp_path):  # noqa: F811
    rows = [{"prompt_id": f"p{i}", "response_tokens": 50 + s} for i in range(PROMPTS) for s in range(SAMPLES)]
    rows.append({"prompt_id": "ghost", "response_tokens": 3})
    log = write_jsonl(tmp_path / "r.jsonl", rows)
    out = tmp_path / "h.parquet"
    result = invoke("observe", log, "-o", out, "--schedule", built["schedule"], "--epoch", "0", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["rows_added"] == PROMPTS * SAMPLES and document["unknown_id_rows"] == 1
    assert "Warning:" in result.stderr and "ghost" in result.stderr
    assert document["log_formats"] == {"rollout_log": 1} and "read as: 1 rollout log\n" in result.stderr
    assert invoke("observe", log, "-o", out).exit_code == ExitCode.OUTPUT
    again = invoke("observe", log, "-o", out, "--append", "--json", "-q")
    assert again.exit_code == 0 and json.loads(again.stdout)["logs_already_observed"] == 1
    # Samples cut off at the cap are counted in the summary line (a probe newcomer saw them in --json alone), and
    # its `sample` column is read (it numbers the samples: one logged twice is refused), not said to be left unread.
    cut = write_jsonl(tmp_path / "c.jsonl", [{"prompt_id": "p1", "sample": s, "response_tokens": 9, "truncated": s == 0}
                                             for s in range(SAMPLES)])
    said = " ".join(invoke("observe", cut, "-o", tmp_path / "c.parquet").stderr.split())
    assert "history now 4 samples of 1 prompt; 1 of the samples added was cut off at the response cap" in said, said
    assert "not needed" not in said


def test_observe_append_of_a_grown_log_without_epoch_numbers_the_next_epoch(tmp_path):
    """slime's loop, `asp observe LOG -o h --epoch 0` after epoch 0 and `asp observe LOG --append -o h` after epoch 1
    with --epoch forgotten: the new samples are epoch 1 (they had no epoch), said on stderr in one line; with --epoch
    they take it; a log changed before its end is added whole, said; the same log again adds nothing."""
    rows = [{"prompt_id": f"p{i}", "response_tokens": 50 + i} for i in range(9)]
    log, out = tmp_path / "asp_lengths.jsonl", tmp_path / "h.parquet"
    write_jsonl(log, rows[:3])
    assert invoke("observe", log, "-o", out, "--epoch", "0").exit_code == 0
    write_jsonl(log, rows[:6])
    grown = invoke("observe", log, "-o", out, "--append", "--json")
    assert grown.exit_code == 0 and json.loads(grown.stdout)["rows_added"] == 3
    assert json.loads(grown.stdout)["epochs_added"] == [1]  # for a script, as the warning says
    assert f"Warning: {log} grew by 3 samples since it was observed, after the 3 samples (epoch 0) the history took " \
           "from a log of this name: recorded them as epoch 1; pass --epoch to number them yourself\n" in grown.stderr
    unchanged = invoke("observe", log, "-o", out, "--append", "--json", "-q")
    assert unchanged.exit_code == 0 and json.loads(unchanged.stdout)["rows_added"] == 0
    assert json.loads(unchanged.stdout)["epochs_added"] == []
    write_jsonl(log, rows)
    given = invoke("observe", log, "-o", out, "--append", "--epoch", "7", "-q")
    assert given.exit_code == 0 and given.stderr == (
        f"Warning: {log} grew by 3 samples since it was observed, after the 6 samples (epochs 0, 1) the history took "
        "from a log of this name: only those are added, as --epoch 7\n")
    import polars as pl

    history = pl.read_parquet(out)
    assert history["epoch"].to_list() == [0] * 3 + [1] * 3 + [7] * 3
    write_jsonl(log, [{**rows[0], "response_tokens": 1}, *rows[1:]])
    changed = invoke("observe", log, "-o", out, "--append", "--json")
    assert changed.exit_code == 0 and json.loads(changed.stdout)["rows_added"] == 9
    assert f"Warning: {log}: its rows do not begin with the 9 samples (epochs 0, 1, 7) the history took from a log " \
           "of this name" in changed.stderr


def test_observe_max_response_tokens_marks_samples_at_the_rollouts_cap(tmp_path):
    """A verl newcomer's round (2026-12-07): without a schedule nothing said a log's cap, so samples cut at it were
    recorded as whole lengths; --max-response-tokens is the run's cap (verl's data.max_response_length)."""
    log = write_jsonl(tmp_path / "r.jsonl", [{"prompt_id": "p1", "sample": s, "response_tokens": 7 + s}
                                             for s in range(3)])
    result = invoke("observe", log, "-o", tmp_path / "h.parquet", "--max-response-tokens", "8", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["truncated_samples"] == 2
    assert "Warning: 1 sample is longer than --max-response-tokens (8); kept as observed" in result.stderr
    assert invoke("observe", log, "-o", tmp_path / "h2.parquet", "--max-response-tokens", "0").exit_code == \
        ExitCode.BAD_SETTINGS


def test_observe_bad_row_exit_code(tmp_path):
    log = tmp_path / "bad.csv"
    log.write_text("id,response_tokens\np1,ten\n")
    result = invoke("observe", log, "-o", tmp_path / "h.parquet")
    assert result.exit_code == ExitCode.BAD_INPUT
    assert result.stderr.startswith("Error:") and "bad.csv" in result.stderr
    assert invoke("observe", log, "-o", tmp_path / "h.parquet", "--unknown-ids", "maybe").exit_code == ExitCode.BAD_SETTINGS


def test_observe_refuses_a_log_most_of_whose_ids_the_dataset_lacks_unless_skip_is_named(tmp_path):
    """`asp observe probe_log.jsonl --dataset gsm.jsonl` (a dataset holding a subset of the log's prompts) left out
    most of the log with a warning and exit 0: a pipeline never stopped. By default it is refused (exit 3, one line
    naming the log, the counts, an id and the fixes); `--unknown-ids skip`, named, keeps the matched rows."""
    dataset = write_jsonl(tmp_path / "gsm.jsonl", [{"id": f"gsm-{i}", "question": f"q{i}"} for i in range(2)])
    log = write_jsonl(tmp_path / "probe_log.jsonl", [{"prompt_id": p, "response_tokens": 10} for p in
                                                     ("gsm-0", "gsm-1", "math-0", "math-1", "math-2", "aime-0")])
    out = tmp_path / "h.parquet"
    result = invoke("observe", log, "-o", out, "--dataset", dataset)
    assert result.exit_code == ExitCode.BAD_INPUT and result.stdout == ""
    assert result.stderr == (
        f"Error: {log}: 4 of its 6 rows (4 ids, e.g. 'math-0') name no prompt of the dataset ({dataset}), so the "
        "history would lack most of the log; observe it with the --dataset its rollouts were made from, name the "
        "log's id column with --id-key, or pass --unknown-ids skip to keep only the 2 matched rows\n")
    assert not out.exists()
    kept = invoke("observe", log, "-o", out, "--dataset", dataset, "--unknown-ids", "skip", "--json", "-q")
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout)["rows_added"] == 2 and "4 rows (4 ids, e.g. 'math-0')" in kept.stderr
    help_text = " ".join(invoke("observe", "--help").stdout.split())
    assert "match no prompt is refused (exit 3" in help_text, help_text


def test_observe_of_the_probes_prompts_says_to_generate_them_first(tmp_path):
    """The probe's prompt file given as the log was told of "a rollout log (`asp observe` turns one into a
    history)", by asp observe itself."""
    probe = write_jsonl(tmp_path / "probe.jsonl", [{"id": "a", "question": "2+2?"}, {"id": "b", "question": "3+3?"}])
    result = invoke("observe", probe, "-o", tmp_path / "h.parquet", "--dataset", tmp_path / "probe.jsonl")
    assert result.exit_code == ExitCode.BAD_INPUT and result.stderr.count("\n") == 1
    assert "generate its responses first (docs/probe.md" in result.stderr
    assert "`asp observe` turns" not in result.stderr


def test_observe_of_a_text_log_with_the_schedule_reads_the_file_it_was_made_from(tmp_path, monkeypatch):
    """An OpenRLHF newcomer's `asp observe asp_lengths.jsonl -o x.parquet --schedule schedule.parquet` (a text log,
    no ids) was asked for --dataset, though the schedule records the file it was made from and its bytes."""
    rows = [{"question": f"what is {i} plus {i}?", "answer": str(2 * i)} for i in range(24)]
    data = tmp_path / "data"
    data.mkdir()
    train = write_jsonl(data / "train.jsonl", rows)
    made = invoke("schedule", train, "-o", data / "schedule.parquet", "--train-batch-size", 8, "--quiet")
    assert made.exit_code == 0, made.output
    log = write_jsonl(tmp_path / "asp_lengths.jsonl", [{"input": f"user: {r['question']}\nassistant:",
                                                        "output": "x" * 40} for r in rows[:6]])
    monkeypatch.chdir(tmp_path)  # the prompt file is beside the schedule, not here
    result = invoke("observe", log, "-o", tmp_path / "h.parquet", "--schedule", data / "schedule.parquet")
    assert result.exit_code == 0, result.output
    assert (f"  matched to the prompts of {train}, the file the schedule was made from (found with the bytes it "
            "recorded; --dataset names others)") in result.stderr.splitlines()
    given = invoke("observe", log, "-o", tmp_path / "g.parquet", "--schedule", data / "schedule.parquet", "--dataset",
                   train)
    assert given.exit_code == 0 and "matched to the prompts of" not in given.stderr, given.output
    import polars as pl

    assert pl.read_parquet(tmp_path / "h.parquet").equals(pl.read_parquet(tmp_path / "g.parquet"))
    write_jsonl(train, rows[::-1])  # edited since: other bytes, so the error names the file to give
    refused = invoke("observe", log, "-o", tmp_path / "r.parquet", "--schedule", data / "schedule.parquet")
    assert refused.exit_code == 3, refused.output
    assert ("the schedule was made from train.jsonl, not found beside it or here with the bytes it recorded: pass "
            "--dataset train.jsonl (where each is now)") in " ".join(refused.stderr.split())


@pytest.mark.parametrize("command", ["export", "observe"])
def test_commands_have_help_and_a_docs_section(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0 and len(result.stdout) > 200
    docs = (REPO / "docs" / "pipelines.md").read_text()
    assert f"`asp {command}`" in docs


def test_integration_docs_cover_the_frameworks():
    docs = (REPO / "docs" / "integrations.md").read_text()
    for name in ("verl", "OpenRLHF", "slime", "AReaL", "MindSpeed-RL", "data.shuffle=False",
                 "filter_overlong_prompts", "ScheduleSampler"):
        assert name in docs, name
    assert Path(REPO / "examples" / "pipeline.sh").exists()


def test_the_slime_line_asks_for_its_router_where_the_schedule_was_timed_for_verls(tmp_path):
    """A schedule on servers timed as verl's balancer routes: the JSON-lines export's slime line says to make it
    with --router cache-aware (slime's router keeps a group on one server); made so, or for a blocking engine, not."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(64)])
    hint = "make it with --router cache-aware"
    for extra, said in ((["--engine", "streaming"], True), (["--engine", "streaming", "--router", "cache-aware"], False),
                        ([], False)):
        schedule = tmp_path / "s.parquet"
        assert invoke("schedule", data, "-o", schedule, "--train-batch-size", "16", "--force", "-q",
                      *extra).exit_code == 0
        out = invoke("export", schedule, data, "-o", tmp_path / "o.jsonl", "--force")
        assert out.exit_code == 0 and (hint in " ".join(out.stderr.split())) is said, (extra, out.stderr)


def test_the_slime_line_counts_a_resumed_runs_rollouts_for_a_later_epoch(tmp_path):
    """One slime run per epoch, each resumed from the last one's checkpoint: slime counts --num-rollout from the
    run's first rollout, so epoch 1's file alone is not the count (a slime newcomer's epoch 2 would run none)."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(64)])
    schedule = tmp_path / "s.parquet"
    assert invoke("schedule", data, "-o", schedule, "--train-batch-size", "16", "--epochs", "2", "-q").exit_code == 0
    later = " ".join(invoke("export", schedule, data, "-o", tmp_path / "e1.jsonl", "--epoch", "1").stderr.split())
    assert ("--num-rollout 4 for this file alone; a run resumed from epoch 0's checkpoint counts from its first "
            "rollout: --num-rollout 8") in later
    first = " ".join(invoke("export", schedule, data, "-o", tmp_path / "e0.jsonl", "--epoch", "0").stderr.split())
    assert "--num-rollout 4, no --rollout-shuffle" in first and "resumed" not in first


def test_the_slime_line_counts_a_resumed_runs_rollouts_for_a_schedule_per_epoch_planned_on_a_history(tmp_path):
    """One asp schedule per epoch, each planned on the epochs before (--history): every such file is epoch 0 inside,
    and its export told slime --num-rollout of that file alone, with which epoch 1's run, resumed from epoch 0's
    checkpoint, trains nothing (a slime newcomer's walk). Now the count for epoch E's run is said; not for epoch 0's
    schedule, planned without a history."""
    from asp_cli.integrate.observe import observe

    rows = [{"id": f"p{i}", "question": f"q {i}"} for i in range(64)]
    data = write_jsonl(tmp_path / "p.jsonl", rows)
    first, later = tmp_path / "s0.parquet", tmp_path / "s1.parquet"
    assert invoke("schedule", data, "-o", first, "--train-batch-size", "16", "-q").exit_code == 0
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": row["id"], "response_tokens": 40 + i}
                                               for i, row in enumerate(rows) for _ in range(4)])
    observe([log], tmp_path / "h.parquet", schedule=first, epoch=0)
    assert invoke("schedule", data, "-o", later, "--train-batch-size", "16", "--history", tmp_path / "h.parquet",
                  "--seed", "1", "-q").exit_code == 0
    said = " ".join(invoke("export", later, data, "-o", tmp_path / "e1.jsonl").stderr.split())
    assert ("--num-rollout 4 for this file alone; a run resumed from an earlier epoch's checkpoint counts from its "
            "first rollout: epoch E's run sets --num-rollout (E+1) x 4, with the checkpoint's dataset state moved "
            "aside") in said
    plain = " ".join(invoke("export", first, data, "-o", tmp_path / "e0.jsonl").stderr.split())
    assert "--num-rollout 4, no --rollout-shuffle" in plain and "resumed" not in plain


def test_the_slime_line_asks_for_the_chat_template_for_chat_list_prompts(tmp_path):
    """slime passes a chat-message list through as the list unless --apply-chat-template: the JSON-lines export's
    OpenRLHF line said --data.apply_chat_template for the sample data's chat lists and its slime line did not (a
    slime newcomer's round); text prompts are told neither."""
    chat = write_jsonl(tmp_path / "chat.jsonl", [{"id": f"p{i}", "prompt": [{"role": "user", "content": f"q {i}"}]}
                                                 for i in range(64)])
    text = write_jsonl(tmp_path / "text.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(64)])
    for data, key, said in ((chat, "prompt", True), (text, "question", False)):
        schedule = tmp_path / f"{key}.parquet"
        assert invoke("schedule", data, "-o", schedule, "--train-batch-size", "16", "-q").exit_code == 0
        out = invoke("export", schedule, data, "-o", tmp_path / f"{key}.jsonl", "--metadata-key", "metadata")
        assert out.exit_code == 0, out.output
        slime = next(line for line in out.stderr.splitlines() if line.strip().startswith("slime:"))
        assert (f"--input-key {key} --label-key LABEL --apply-chat-template --metadata-key metadata" in slime) is said
        assert ("--apply-chat-template" in slime) is said
        assert (f"--input-key {key} --label-key LABEL --metadata-key" in slime) is not said, slime
        # exported with the object slime keeps, the line does not ask for it (below: without it, it does)
        assert "export with --metadata-key metadata" not in slime
    # slime keeps a row's prompt, label and --metadata-key object only: exported without one, no sample carries its
    # prompt_id and examples/slime_length_log.py logs nothing (a slime newcomer exported as for OpenRLHF).
    out = invoke("export", tmp_path / "prompt.parquet", chat, "-o", tmp_path / "plain.jsonl")
    slime = next(line for line in out.stderr.splitlines() if line.strip().startswith("slime:"))
    assert slime.endswith("; for its length log export with --metadata-key metadata (slime keeps a row's prompt, label "
                          "and that object only: each sample then carries its prompt_id)"), slime


def test_the_slime_line_names_the_exported_file_as_prompt_data(tmp_path):
    """The OpenRLHF line named the file (--data.prompt_dataset) and slime's did not: a slime newcomer who pasted the
    line kept the --prompt-data of the original, unordered file, and trained in its order (a slime newcomer's round)."""
    data = write_jsonl(tmp_path / "train.jsonl", [{"prompt": [{"role": "user", "content": f"q {i}"}], "label": str(i),
                                                   "metadata": {"source": "s"}} for i in range(64)])
    schedule = tmp_path / "s.parquet"
    assert invoke("schedule", data, "-o", schedule, "--engine", "streaming", "--max-lag", "0", "--trainer", "schedule",
                  "--router", "cache-aware", "--train-batch-size", "16", "-q").exit_code == 0
    out = invoke("export", schedule, data, "-o", tmp_path / "ordered.jsonl", "--order", "train",
                 "--metadata-key", "metadata")
    assert out.exit_code == 0, out.output
    slime = next(line for line in out.stderr.splitlines() if line.strip().startswith("slime:"))
    assert slime.strip().startswith(f"slime: --prompt-data {tmp_path / 'ordered.jsonl'} --rollout-batch-size 16 "), slime


def test_the_slime_line_asks_for_a_top_level_label_where_it_finds_none(tmp_path):
    """slime's --label-key defaults to none, and each sample's label is then None: the line left the flag out, in
    silence, for the sample data's nested reward_model.ground_truth, where the OpenRLHF line said LABEL and what to
    give (a slime newcomer's round)."""
    for label, row in (("answer", {"answer": "4"}), (None, {"reward_model": {"ground_truth": "4"}})):
        data = write_jsonl(tmp_path / f"{label}.jsonl", [{"id": f"p{i}", "question": f"q {i}", **row}
                                                         for i in range(32)])
        schedule = tmp_path / f"{label}.parquet"
        assert invoke("schedule", data, "-o", schedule, "--train-batch-size", "16", "-q").exit_code == 0
        out = invoke("export", schedule, data, "-o", tmp_path / f"{label}.out.jsonl", "--metadata-key", "metadata")
        assert out.exit_code == 0, out.output
        slime = next(line for line in out.stderr.splitlines() if line.strip().startswith("slime:"))
        assert f"--input-key question --label-key {label or 'LABEL'} --metadata-key metadata" in slime, slime
        assert ("LABEL your label column, a top-level one: slime reads data[LABEL] (without --label-key every "
                "sample's label is None)" in slime) is (label is None), slime


def test_a_parquet_export_prints_mindspeed_rls_settings(tmp_path):
    """A MindSpeed-RL newcomer's Parquet export (the format docs/integrations.md gives MindSpeed-RL) printed no
    settings, where verl's and the JSON-lines frameworks' exports print theirs: MindSpeed-RL's example configs
    shuffle (no_shuffle: false) and hand each replica a batch's groups at random (guarantee_order: false), its
    train_iters past the file's whole batches reads the file again from its start, and max_prompt_length drops long
    prompts as training loads them. Keys as MindSpeed-RL v2.3.0's config classes name them."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"problem": f"What is {i} + {i}?", "answer": str(2 * i)}
                                              for i in range(72)])

    def export(schedule_args, *export_args):
        made = invoke("schedule", data, "-o", tmp_path / "s.parquet", "--samples-per-prompt", 8, "--quiet", "--force",
                      *schedule_args)
        assert made.exit_code == 0, made.output
        result = invoke("export", tmp_path / "s.parquet", data, "-o", tmp_path / "o.parquet", "--force", *export_args)
        assert result.exit_code == 0, result.output
        return next(line for line in result.stderr.splitlines() if line.startswith("  if you train with MindSpeed-RL: "))

    synchronous = ["--max-lag", 0, "--trainer", "schedule", "--train-batch-size", 16, "--instances", 2,
                   "--max-response-tokens", 2048]
    line = export([*synchronous, "--minibatch-size", 4], "--order", "train")
    assert line == (
        f"  if you train with MindSpeed-RL: preprocess {tmp_path / 'o.parquet'} (its data config's input, your handler and map_keys), "
        "then megatron_training: no_shuffle: true, global_batch_size: 16, train_iters: 4 (the last 8 rows left out; "
        "one step more would fill their batch from the file's start); rl_config: n_samples_per_prompt: 8, "
        "guarantee_order: true (each of its 2 rollout replicas then takes its own chunk of a batch, as laid out here; "
        "actor_resource.num_npus / generate_config.infer_tensor_parallel_size = 2), actor_rollout_dispatch_size: 32 "
        "(--minibatch-size 4 groups a vLLM call, where its default is a replica's whole share, 8), max_prompt_length "
        "above your longest prompt in tokens (longer ones are dropped as training loads them, which shifts every "
        "later row); generate_config.sampling_config.max_tokens: 2048 (the schedule's --max-response-tokens)")
    # A schedule of asp's defaults (an asynchronous trainer) is told how to make one for MindSpeed-RL's; a batch its
    # replicas do not divide is refused by MindSpeed-RL (validate_config.py:135-138), and said so.
    line = export(["--train-batch-size", 18, "--instances", 4], "--order", "train")
    assert "global_batch_size 18 is not a multiple of the 4 replicas, which MindSpeed-RL refuses" in line
    assert line.endswith("the schedule was not made for its synchronous trainer and blocking vLLM calls: make it "
                         "with --engine continuous --max-lag 0 --trainer schedule")
    # A later epoch's file, in a run resumed from the last checkpoint: MindSpeed-RL counts on and skips the batches
    # it trained from the new file's start (cli/train_grpo.py:165), whole passes of it where the batch divides it.
    line = export([*synchronous, "--epochs", 2, "--train-batch-size", 18], "--order", "train", "--epoch", 1)
    assert "train_iters: 4 for this file alone (a run that loads epoch 0's checkpoint with finetune: true counts " \
           "from 0); resumed from it (finetune: false) it counts on, train_iters: 8, and skips the 4 batches it " \
           "trained from this file's start, whole passes of it;" in line
    assert "not a multiple" not in line and "not made for" not in line


def test_observe_reads_a_verl_dump_with_id_key_as_a_dump(tmp_path):
    """`asp observe DUMP --id-key index` of a verl dump whose reward extras hold the prompt's index was refused as "a
    prompt file (the probe's ...)"; now its ids come from that column and its lengths from the output text, and
    --id-key step (verl's own column) is one line, exit 3."""
    dump = write_jsonl(tmp_path / "1.jsonl", [{"input": f"user\nq{i}\nassistant\n", "output": "w " * 8, "gts": "1",
                                               "score": 1.0, "step": 1, "index": i} for i in range(3)])
    out = tmp_path / "h.parquet"
    result = invoke("observe", dump, "-o", out, "--id-key", "index")
    assert result.exit_code == 0, result.output
    assert "read as: 1 input/output text dump" in result.stderr
    assert "columns: 1.jsonl: ids 'index', lengths 'output'" in result.stderr
    assert "3 response lengths are estimated from text at 4 bytes per token" in result.stderr
    result = invoke("observe", dump, "-o", tmp_path / "s.parquet", "--id-key", "step")
    assert result.exit_code == ExitCode.BAD_INPUT and result.stderr == (
        f"Error: {dump}: --id-key step names 'step', the training step verl writes into every rollout dump, not a "
        "prompt id; drop --id-key: a dump of text is matched to the --dataset's prompts (their id column: "
        "--dataset-id-key)\n")


def test_a_parquet_export_for_slime_prints_slimes_settings_too(tmp_path):
    """slime, OpenRLHF and AReaL read Parquet as well as JSON lines: a slime newcomer's Parquet export of a schedule
    made for slime's router printed MindSpeed-RL's settings alone, with no --prompt-data line for slime."""
    data = write_jsonl(tmp_path / "p.jsonl", [{"id": f"p{i}", "prompt": [{"role": "user", "content": f"q {i}"}],
                                              "label": str(i), "metadata": {"source": "math"}} for i in range(16)])
    made = invoke("schedule", data, "-o", tmp_path / "s.parquet", "--engine", "streaming", "--max-lag", 0, "--trainer",
                  "schedule", "--router", "cache-aware", "--train-batch-size", 8, "--instances", 2, "--quiet")
    assert made.exit_code == 0, made.output
    out = invoke("export", tmp_path / "s.parquet", data, "-o", tmp_path / "o.parquet", "-f", "parquet", "--order",
                 "train", "--metadata-key", "metadata")
    assert out.exit_code == 0, out.output
    lines = out.stderr.splitlines()
    slime = next((line for line in lines if line.startswith("    slime: ")), "")
    assert slime.startswith(f"    slime: --prompt-data {tmp_path / 'o.parquet'} --rollout-batch-size 8 "
                            "--n-samples-per-prompt 8 ") and "--metadata-key metadata --num-rollout 2" in slime, lines
    assert any(line.startswith("  if you train with MindSpeed-RL: ") for line in lines)  # still said, after it


def test_export_says_one_row_past_the_batches_in_the_singular(tmp_path):
    """'1 batches of 8 + 1 rows', 'the last 1 rows are left out' and 'the file holds 1 rows' read so where one row
    (or batch) was counted."""
    nine = write_jsonl(tmp_path / "nine.jsonl", [{"id": f"p{i}", "question": f"q {i}"} for i in range(9)])
    made = invoke("schedule", nine, "-o", tmp_path / "s.parquet", "--train-batch-size", "8", "--quiet")
    assert made.exit_code == 0, made.output
    said = " ".join(invoke("export", tmp_path / "s.parquet", nine, "-o", tmp_path / "o.jsonl", "-f", "jsonl")
                    .stderr.split())
    assert "; 1 batch of 8 + 1 row" in said, said
    assert ("--num-rollout 1 (as --num-epoch 1: the last row is left out; one rollout more would take 7 rows from "
            "the file's start)") in said, said
    one = write_jsonl(tmp_path / "one.jsonl", [{"id": "p0", "question": "q"}])
    made = invoke("schedule", one, "-o", tmp_path / "one.parquet", "--train-batch-size", "8", "--quiet")
    assert made.exit_code == 0, made.output
    said = " ".join(invoke("export", tmp_path / "one.parquet", one, "-o", tmp_path / "one_out.jsonl", "-f", "jsonl")
                    .stderr.split())
    assert "Wrote" in said and ": 1 row (jsonl" in said and "the file holds 1 row, less than one batch" in said, said
