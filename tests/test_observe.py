"""Observe: rollout logs in, a validated history out; nothing dropped without a count."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import polars as pl
import pytest
from _schedules import PROMPTS, SAMPLES, built  # noqa: F401 - fixture
from util import write_jsonl

from asp_cli.errors import InputError, OutputError, SettingsError
from asp_cli.integrate.observe import OBSERVE_READ, observe, read_history
from asp_cli.reading import read_lengths


def _log(path, ids, tokens=100, epoch=None):
    rows = []
    for i, prompt_id in enumerate(ids):
        for sample in range(SAMPLES):
            row = {"prompt_id": prompt_id, "sample": sample, "response_tokens": tokens + i + sample}
            if epoch is not None:
                row["epoch"] = epoch
            rows.append(row)
    return write_jsonl(path, rows)


def test_a_log_becomes_a_history_schedule_can_read(built, tmp_path):  # noqa: F811
    log = _log(tmp_path / "r.jsonl", [f"p{i}" for i in range(PROMPTS)])
    out = tmp_path / "history.parquet"
    result = observe([log], out, schedule=built["schedule"], epoch=0)
    assert result.summary["rows_added"] == PROMPTS * SAMPLES
    assert result.summary["scheduled_prompts_without_samples"] == 0
    history, logs = read_history(out)
    assert history.columns == ["prompt_id", "response_tokens", "truncated", "epoch", "log"]
    assert history["epoch"].unique().to_list() == [0]
    assert history["truncated"].unique().to_list() == [False]
    assert logs[0]["name"] == "r.jsonl" and logs[0]["rows"] == PROMPTS * SAMPLES
    frame, _ = read_lengths([out])
    assert frame.height == PROMPTS * SAMPLES


def test_append_adds_and_the_same_log_is_not_added_twice(built, tmp_path):  # noqa: F811
    out = tmp_path / "h.parquet"
    first = _log(tmp_path / "e0.jsonl", ["p1", "p2"], epoch=0)
    second = _log(tmp_path / "e1.jsonl", ["p1", "p3"], tokens=200, epoch=1)
    observe([first], out)
    with pytest.raises(OutputError, match="--force"):
        observe([second], out)
    result = observe([second], out, append=True)
    assert result.summary["history_rows"] == 4 * SAMPLES
    again = observe([first, second], out, append=True)
    assert again.summary["logs_already_observed"] == 2 and again.summary["rows_added"] == 0
    assert any("already in the history" in w for w in again.warnings)
    history, _ = read_history(out)
    assert history.height == 4 * SAMPLES and sorted(history["epoch"].unique().to_list()) == [0, 1]
    # The same rows with other bytes (a copy saved with Windows line endings) are added, with a warning (a
    # hostile-input audit: they were added without a word, their samples counted twice).
    copy = tmp_path / "e0-crlf.jsonl"
    copy.write_bytes(first.read_bytes().replace(b"\n", b"\r\n"))
    crlf = observe([copy], out, append=True)
    assert crlf.summary["rows_added"] == 2 * SAMPLES
    assert any("its rows are those of e0.jsonl" in w and "count twice" in w for w in crlf.warnings), crlf.warnings


def test_two_steps_dumps_of_the_same_rows_are_two_logs_and_a_copy_is_still_said(built, tmp_path):  # noqa: F811
    """Answers of a fixed two tokens: verl's dumps of steps 1 and 2 hold the same ids and lengths, and were told
    that the second might be the first saved again (its rows fingerprint left verl's step out)."""
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:4]
    dumps = [write_jsonl(tmp_path / f"{step}.jsonl", [
        {"input": f"user: {row['question']}\nassistant:", "output": "42", "score": 1.0, "step": step}
        for row in prompts for _ in range(2)]) for step in (1, 2)]
    out = tmp_path / "h.parquet"
    result = observe(dumps, out, dataset=[built["prompts"]])
    assert result.summary["rows_added"] == 16
    assert not any("its rows are those of" in w for w in result.warnings), result.warnings
    _, logs = read_history(out)
    assert logs[0]["rows_fingerprint"] != logs[1]["rows_fingerprint"]
    # Step 1's dump saved again (other line endings) is still the same log's rows.
    copy = tmp_path / "copy" / "1.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(dumps[0].read_bytes().replace(b"\n", b"\r\n"))
    again = observe([copy], out, dataset=[built["prompts"]], append=True)
    assert any("its rows are those of 1.jsonl" in w and "count twice" in w for w in again.warnings), again.warnings


def test_a_log_that_grew_since_it_was_observed_adds_its_new_samples_or_replaces_its_earlier_ones(tmp_path):
    """A probe run again with --resume writes the samples it lacked; appended again, its first samples counted twice
    without a word (a probe newcomer's round). Where its first rows are the earlier samples only the new ones are
    added (a log entry of their own); where it was rewritten whole in another order the earlier samples are
    replaced, said; a log of the same name that does not hold them (another run's, written over the last) is added
    beside them, said too (it was silent)."""
    out, log = tmp_path / "h.parquet", tmp_path / "probe_log.jsonl"
    rows = [{"prompt_id": f"p{i}", "sample": 0, "response_tokens": 100 + i} for i in range(7)]
    write_jsonl(log, rows[:4])
    observe([log], out)
    write_jsonl(log, rows[:6])  # resumed: the two samples that had failed, after the others
    grown = observe([log], out, append=True)
    assert grown.warnings == [
        f"{log} grew by 2 samples since it was observed, after the 4 samples (no epoch) the history took from a log of "
        "this name: only those are added, without an epoch as the earlier ones; if they are a later epoch's, pass "
        "--epoch E to each append (--epoch 0 where a log is first observed)"]
    history, logs = read_history(out)
    assert history["response_tokens"].to_list() == list(range(100, 106)) and history["epoch"].null_count() == 6
    assert [(e["name"], e["rows"], e["rows_kept"]) for e in logs] == [("probe_log.jsonl", 4, 4), ("probe_log.jsonl", 2, 2)]
    write_jsonl(log, rows[::-1])  # rewritten whole, in another order, with one more
    rewritten = observe([log], out, append=True)
    assert rewritten.warnings == [
        f"{log}: holds the 6 samples (no epoch) the history took from a log of this name and 1 more, in another order "
        "(a log rewritten as it grew, as a probe run again with --resume rewrites it): the earlier ones replaced, not "
        "counted twice"]
    history, logs = read_history(out)
    assert history.height == 7 and [e["name"] for e in logs] == ["probe_log.jsonl"] and logs[0]["rows"] == 7
    write_jsonl(log, [{**r, "response_tokens": 900} for r in rows[:6]] + [{**rows[0], "sample": 1}])  # another run's
    other = observe([log], out, append=True)
    assert other.warnings == [
        f"{log}: its rows do not begin with the 7 samples (no epoch) the history took from a log of this name (a log "
        "written over, or changed?): all 7 samples added beside those, none replaced; if it is that log rewritten, "
        "rebuild the history with --force from every log, or give each epoch's log its own --epoch"]
    assert read_history(out)[0].height == 14
    # The command says it appended, though the history now holds no more rows than this log gave (it said "Wrote").
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    write_jsonl(log, rows[:3])
    runner = CliRunner()
    assert runner.invoke(app, ["observe", str(log), "-o", str(out), "--force"]).exit_code == 0
    write_jsonl(log, rows[5::-1])  # rewritten whole as it grew: the earlier samples replaced
    result = runner.invoke(app, ["observe", str(log), "-o", str(out), "--append"])
    assert result.exit_code == 0 and result.stderr.startswith(f"Appended to {out}: 6 samples of 6 prompts from 1 "
                                                              "log; history now 6 samples"), result.stderr
    fresh = tmp_path / "new.parquet"
    result = runner.invoke(app, ["observe", str(log), "-o", str(fresh), "--append"])
    assert result.exit_code == 0 and result.stderr.startswith(f"Wrote {fresh}: 6 samples"), result.stderr
    write_jsonl(log, rows[:1])  # one sample of one prompt read "1 samples of 1 prompts"
    result = runner.invoke(app, ["observe", str(log), "-o", str(tmp_path / "one.parquet")])
    assert result.exit_code == 0 and result.stderr.startswith(f"Wrote {tmp_path / 'one.parquet'}: 1 sample of 1 prompt "
                                                              "from 1 log; history now 1 sample of 1 prompt"), \
        result.stderr


def test_unknown_ids_are_counted_skipped_kept_or_refused(built, tmp_path):  # noqa: F811
    log = _log(tmp_path / "r.jsonl", ["p1", "ghost", "p2", "ghost2"])
    skipped = observe([log], None, schedule=built["schedule"])
    assert skipped.summary["unknown_id_rows"] == 2 * SAMPLES and skipped.summary["unknown_ids"] == 2
    assert skipped.added.height == 2 * SAMPLES
    assert any("left out" in w for w in skipped.warnings)
    kept = observe([log], None, schedule=built["schedule"], unknown_ids="keep")
    assert kept.added.height == 4 * SAMPLES
    with pytest.raises(InputError, match="'ghost'"):
        observe([log], None, schedule=built["schedule"], unknown_ids="error")
    by_dataset = observe([log], None, dataset=[built["prompts"]])
    assert by_dataset.summary["unknown_ids"] == 2
    assert not any("wrong id column" in w for w in skipped.warnings)  # half the log: strays, maybe
    mostly = observe([_log(tmp_path / "m.jsonl", ["p1", "ghost", "ghost2", "ghost3"])], None,
                     schedule=built["schedule"], unknown_ids="skip")  # named: most of the log left out on purpose
    assert any(w.endswith("left out (--unknown-ids): 75% of the log, a wrong id column? (--id-key names it; "
                          "--unknown-ids error fails the run instead)") for w in mostly.warnings), mostly.warnings


def test_a_schedule_kept_in_memory_is_taken_as_its_file_is(built, tmp_path):  # noqa: F811
    """A library newcomer's round: `observe(log, schedule=asp_cli.schedule(..., None))` (or `read_schedule`'s) was
    a TypeError from Path(); every other twin that takes a schedule takes one kept in memory."""
    from asp_cli import read_schedule

    log = _log(tmp_path / "r.jsonl", ["p1", "ghost", "p2"])
    on_disk = observe([log], None, schedule=built["schedule"])
    in_memory = observe([log], None, schedule=read_schedule(built["schedule"]))
    assert in_memory.added.equals(on_disk.added) and in_memory.summary == on_disk.summary
    with pytest.raises(InputError, match=re.escape("'ghost'")) as raised:
        observe([log], None, schedule=read_schedule(built["schedule"]), unknown_ids="error")
    assert "Schedule(" not in str(raised.value)
    with pytest.raises(SettingsError, match="the schedule must be a schedule file's path, or a schedule made in "
                                            "memory"):
        observe([log], None, schedule=3)


def test_a_log_mostly_of_other_prompts_is_refused_unless_skip_is_named(built, tmp_path):  # noqa: F811
    """A wrong --dataset (one holding a subset of the log's prompts) left out 89% of a probe's log with a warning and
    exit 0 under the default policy: a pipeline went on with a history lacking most of what was paid for. The
    default (None) skips strays but refuses a log most of whose rows match nothing; `unknown_ids="skip"`, named,
    keeps only the matched rows on purpose, as before."""
    import inspect

    assert inspect.signature(observe).parameters["unknown_ids"].default is None
    log, out = _log(tmp_path / "m.jsonl", ["p1", "ghost", "ghost2", "ghost3"]), tmp_path / "h.parquet"
    with pytest.raises(InputError) as caught:
        observe([log], out, schedule=built["schedule"])
    assert str(caught.value) == (
        f"{log}: {3 * SAMPLES} of its {4 * SAMPLES} rows (3 ids, e.g. 'ghost') name no prompt of the schedule "
        f"({built['schedule']}), so the history would lack most of the log; observe it with the --schedule its "
        f"rollouts replayed, name the log's id column with --id-key, or pass --unknown-ids skip to keep only the "
        f"{SAMPLES} matched rows")
    assert not out.exists()
    with pytest.raises(InputError, match=r"name no prompt of the dataset \(.*prompts\.jsonl\), .* with the --dataset "
                                         "its rollouts were made from"):
        observe([log], None, dataset=[built["prompts"]])  # without an output too: the frames would lack it
    named = observe([log], out, schedule=built["schedule"], unknown_ids="skip")
    assert named.summary["rows_added"] == SAMPLES and named.summary["unknown_id_rows"] == 3 * SAMPLES
    assert any("75% of the log, a wrong id column?" in w for w in named.warnings)
    assert observe([log], None, schedule=built["schedule"], unknown_ids="keep").added.height == 4 * SAMPLES
    # Half a log is strays, maybe: skipped with a warning, as before.
    half = observe([_log(tmp_path / "half.jsonl", ["p1", "ghost"])], None, schedule=built["schedule"])
    assert half.added.height == SAMPLES and any("left out (--unknown-ids)" in w for w in half.warnings)
    # Each log on its own: one of another dataset among good ones is named, though the run's total is mostly matched.
    good = _log(tmp_path / "good.jsonl", [f"p{i}" for i in range(10)])
    with pytest.raises(InputError, match=f"^{re.escape(str(log))}: {3 * SAMPLES} of its {4 * SAMPLES} rows"):
        observe([good, log], None, schedule=built["schedule"])
    with pytest.raises(SettingsError, match="--unknown-ids must be one of skip, keep, error"):
        observe([log], None, schedule=built["schedule"], unknown_ids="maybe")
    # Ids that differ from the schedule's only by spaces: that pair and its fix (E87's), then the named skip.
    spaced = _log(tmp_path / "spaced.jsonl", ["p1", "p2 ", " p3"])
    with pytest.raises(InputError, match=r"so the history would lack most of the log; 2 of them differ from an id in "
                                         r"the schedule only by spaces around it, .*: write the ids alike in both "
                                         r"files, or pass --unknown-ids skip to keep only the 4 matched rows$"):
        observe([spaced], None, schedule=built["schedule"])


def test_a_log_of_no_known_prompt_says_nothing_is_left_with_or_without_an_output(built, tmp_path):  # noqa: F811
    """Every row unknown is E67's `nothing to write`, the same words without an output (the frames were returned
    empty, with a warning, under the default policy)."""
    log = _log(tmp_path / "r.jsonl", ["ghost", "ghost2"])
    with pytest.raises(InputError, match=f"^nothing to write: all {2 * SAMPLES} rows were left out"):
        observe([log], None, schedule=built["schedule"])
    assert observe([log], None, schedule=built["schedule"], unknown_ids="skip").added.height == 0


def test_the_probes_prompts_given_as_its_log_are_sent_to_generate_them_first(tmp_path):
    """`asp observe probe.jsonl` (the probe's prompts, not its generation log) was told to give "a rollout log
    (`asp observe` turns one into a history)" while running asp observe: it says to generate the probe first."""
    probe = write_jsonl(tmp_path / "probe.jsonl", [{"id": "a", "prompt": [{"role": "user", "content": "2+2?"}]},
                                                   {"id": "b", "prompt": [{"role": "user", "content": "3+3?"}]}])
    with pytest.raises(InputError) as caught:
        observe([probe], tmp_path / "h.parquet")
    message = str(caught.value)
    assert message.startswith(f"{probe}: holds prompts but no response lengths (looked for response_tokens, ")
    assert "`asp observe` turns" not in message
    assert ("a prompt file (the probe's, as asp probe writes it?), not a generation log: generate its responses "
            "first (docs/probe.md: examples/probe_openai.py, vLLM, or verl's generation) and observe the log that "
            "writes (prompt ids and response token counts), or name the length column with --length-key") in message


def test_when_every_id_is_unknown_the_error_says_so_with_the_count_and_the_fix(built, tmp_path):  # noqa: F811
    # It said only "no usable rows in the logs", though every row had been dropped as an unknown id.
    log = _log(tmp_path / "r.jsonl", ["ghost", "ghost2", "ghost3"])
    with pytest.raises(InputError) as caught:
        observe([log], tmp_path / "h.parquet", schedule=built["schedule"])
    message = str(caught.value)
    assert message.startswith(f"nothing to write: all {3 * SAMPLES} rows were left out because their prompt ids "
                              "(3 ids, e.g. 'ghost', 'ghost2', 'ghost3') are not in the schedule;")
    assert "--unknown-ids keep" in message and "--id-key" in message
    assert not (tmp_path / "h.parquet").exists()


def test_ids_the_schedule_holds_and_the_dataset_lacks_name_the_dataset(built, tmp_path):  # noqa: F811
    """--schedule and --dataset together hold a log to the prompts both have: a dataset of other prompts beside the
    right schedule was told the ids "are not in the schedule; observe with the schedule these rollouts were made
    from" (a hostile review, 2026-12-07). The dataset is named now, in the error and in the warning; ids neither
    holds still name the schedule."""
    ids = pl.read_parquet(built["schedule"])["prompt_id"].unique().sort().to_list()
    log = _log(tmp_path / "r.jsonl", ids[:4])
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": f"o{i}", "question": f"other {i}"} for i in range(8)])
    with pytest.raises(InputError) as caught:
        observe([log], tmp_path / "h.parquet", schedule=built["schedule"], dataset=[other])
    assert re.search(r"are not in the dataset; observe with the dataset these rollouts were made from",
                     str(caught.value)), caught.value
    some = write_jsonl(tmp_path / "some.jsonl", [{"id": i, "question": f"p {i}"} for i in ids[:3]])
    result = observe([log], tmp_path / "h2.parquet", schedule=built["schedule"], dataset=[some],
                     unknown_ids="skip")
    assert any(w.startswith(f"{SAMPLES} rows (1 id, e.g. '{ids[3]}') name prompts the dataset does not hold")
               for w in result.warnings), result.warnings
    ghost = _log(tmp_path / "g.jsonl", ["ghost"])
    with pytest.raises(InputError, match="is not in the schedule;"):
        observe([ghost], tmp_path / "h3.parquet", schedule=built["schedule"], dataset=[other])


def test_scheduled_prompts_whose_samples_the_dataset_left_out_are_counted_apart(built, tmp_path):  # noqa: F811
    """--schedule S --dataset D with D lacking some of S's ids: their samples are left out as unknown, and the
    coverage warning counted them among the "scheduled prompts [that] have no sample in the logs", as if the
    rollouts had never reached them. They are counted and said apart now."""
    ids = pl.read_parquet(built["schedule"])["prompt_id"].unique().sort().to_list()
    log = _log(tmp_path / "r.jsonl", ids[:4])
    some = write_jsonl(tmp_path / "some.jsonl", [{"id": i, "question": f"p {i}"} for i in ids[:3]])
    result = observe([log], None, schedule=built["schedule"], dataset=[some], unknown_ids="skip")
    assert result.summary["scheduled_prompts_left_out_by_dataset"] == 1
    assert result.summary["scheduled_prompts_without_samples"] == len(ids) - 4
    assert f"1 scheduled prompt has samples in the logs but none in the history (e.g. '{ids[3]}'): the --dataset " \
           "lacks its id, so its rows were left out with the unknown ids" in " ".join(result.warnings), result.warnings
    assert any(w.startswith(f"{len(ids) - 4} scheduled prompts have no sample in the logs") for w in result.warnings)
    # without --dataset nothing is left out: the count is there, 0
    alone = observe([log], None, schedule=built["schedule"])
    assert alone.summary["scheduled_prompts_left_out_by_dataset"] == 0
    assert not any("but none in the history" in w for w in alone.warnings)


def test_bad_rows_stop_or_are_counted(tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"prompt_id": "p1", "response_tokens": 10}\n{"prompt_id": "p2", "response_tokens": -4}\n'
                   '{"prompt_id": "p3", "response_tokens": 12}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2"):
        observe([log], tmp_path / "h.parquet")
    assert not (tmp_path / "h.parquet").exists()
    result = observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.summary["bad_rows"] == 1 and result.summary["rows_added"] == 2
    assert any("skipped 1 bad row (--on-bad-row skip)" in w for w in result.warnings)


def test_a_true_in_a_list_of_lengths_is_a_bad_row(tmp_path):
    """A hostile-input audit: a log row of lengths [10, true, 30] was observed as three samples, one of 1 token."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    log = tmp_path / "log.jsonl"
    write_jsonl(log, [{"prompt_id": "p1", "response_tokens": [10, 20]},
                      {"prompt_id": "p2", "response_tokens": [10, True, 30]}])
    history = tmp_path / "h.parquet"
    run = CliRunner().invoke(app, ["observe", str(log), "-o", str(history)])
    assert run.exit_code == 3 and not history.exists()
    assert run.output.strip().splitlines()[-1] == (
        f"Error: {log}:2: column 'response_tokens' holds true, not a token count for prompt id 'p2'; fix the row, "
        "or pass --on-bad-row skip to skip bad rows")
    result = observe([log], history, read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.summary["bad_rows"] == 1
    assert read_history(history)[0]["response_tokens"].to_list() == [10, 20, 10, 30]


def test_a_half_written_last_line_is_skipped_with_on_bad_row_skip(built, tmp_path):  # noqa: F811
    """A crashed run's log ends mid-line: --on-bad-row skip reads the rest and counts it, as report does (the
    format sniffing read used to raise before the skip could apply); without it, the error names the line."""
    log = tmp_path / "crashed.jsonl"
    log.write_bytes(b'{"id": "p1", "response_tokens": 3}\n\xff\xfe\n[1, 2]\n{"id": "p2", "response_tokens": 4}\n'
                    b'{"id": "p3", "respo')
    with pytest.raises(InputError, match=r"crashed.jsonl:2"):
        observe([log], tmp_path / "h.parquet")
    result = observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.added["prompt_id"].to_list() == ["p1", "p2"]
    assert result.summary["bad_rows"] == 3
    # A verl generation dump cut off the same way: its malformed line is counted too.
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()]
    dump = tmp_path / "dump.jsonl"
    rows = [{"input": f"user: {row['question']}\nassistant:", "output": "x" * 40, "score": 1.0, "step": 1}
            for row in prompts[:2]]
    dump.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"input": "user: ')
    result = observe([dump], None, dataset=[built["prompts"]], read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.added.height == 2 and result.summary["bad_rows"] == 1
    # A row after a skipped line is named by its line, not its row: line 3 here.
    stray = {"input": "user: not a dataset prompt\nassistant:", "output": "y", "score": 0.0, "step": 1}
    dump.write_text(json.dumps(rows[0]) + '\n{"input": "user: \n' + json.dumps(stray) + "\n" + json.dumps(rows[1])
                    + "\n")
    result = observe([dump], None, dataset=[built["prompts"]], read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.summary["bad_rows"] == 2
    assert any(e.endswith("dump.jsonl:3: its input matches no dataset prompt")
               for e in result.summary["bad_row_examples"])


def test_capped_samples_are_marked_truncated(built, tmp_path):  # noqa: F811
    log = tmp_path / "cap.csv"
    log.write_text("id,completion_tokens\np1,4096\np1,5000\np2,10\n")
    result = observe([log], None, schedule=built["schedule"])
    assert result.added["truncated"].to_list() == [True, True, False]
    assert result.summary["rows_over_max_response_tokens"] == 1


def test_parquet_log_with_a_list_of_lengths_per_prompt(tmp_path):
    log = tmp_path / "lists.parquet"
    pl.DataFrame({"uid": ["p1", "p2"], "response_length": [[1, 2, 3], [4, 5]]}).write_parquet(log)
    result = observe([log], None)
    assert result.added["response_tokens"].to_list() == [1, 2, 3, 4, 5]


def test_verl_generation_dump_is_matched_through_the_dataset(built, tmp_path):  # noqa: F811
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()]
    dump = tmp_path / "12.jsonl"
    rows = []
    for row in prompts[:3]:
        templated = f"<|im_start|>user\n{row['question']}<|im_end|>\n<|im_start|>assistant\n"
        rows.append({"input": templated, "output": "x" * 400, "gts": "1", "score": 1.0, "step": 12})
    rows.append({"input": "<|im_start|>user\nnot a dataset prompt<|im_end|>", "output": "y", "score": 0.0, "step": 12})
    write_jsonl(dump, rows)
    short = write_jsonl(tmp_path / "short.jsonl", [{"id": "s1", "question": "Add 2+2."}, {"id": "s2", "question": "Add 2+2 and 3."}])
    tiny = write_jsonl(tmp_path / "1.jsonl", [{"input": "user: Add 2+2 and 3.\nassistant:", "output": "abcd"}])
    assert observe([tiny], None, dataset=[short]).added["prompt_id"].to_list() == ["s2"]
    with pytest.raises(InputError, match="--dataset"):
        observe([dump], None)
    result = observe([dump], None, dataset=[built["prompts"]], read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.added["prompt_id"].to_list() == [p["id"] for p in prompts[:3]]
    assert result.added["response_tokens"].to_list() == [100, 100, 100]
    assert result.summary["bad_rows"] == 1 and result.summary["estimated_lengths"] == 3  # the rows kept
    assert any("estimated" in w for w in result.warnings)
    # The default (--on-bad-row error) stops at the first bad row, naming its line and why (an audit: dump rows
    # were skipped with exit 0 whatever the option said, and a row without an output said to match no prompt).
    # A row whose input matches no prompt says how many do not, of which file (a verl newcomer's round, 2026-12-07:
    # "fix the row", where the file given was not the run's).
    with pytest.raises(InputError, match=r"12\.jsonl:4: its input matches no dataset prompt \(1 of its 4 rows does not "
                                         r"match any of the \d+ prompts of .*prompts\.jsonl: prompts edited or removed "
                                         r"since the run\?\); give --dataset the prompt file\(s\) the run read"):
        observe([dump], None, dataset=[built["prompts"]])
    rows[3] = {**rows[0], "output": None}
    write_jsonl(dump, rows)
    with pytest.raises(InputError, match=r"12\.jsonl:4: its output is missing"):
        observe([dump], None, dataset=[built["prompts"]])


def test_a_dump_whose_input_or_output_is_a_list_or_an_object_is_refused_naming_the_column(built, tmp_path):  # noqa: F811
    """A hostile-input round (2026-12-07): a verl dump whose every output was a list of texts was an internal error
    (Polars cannot cast a list to text), exit 70."""
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()]
    for column, value in (("output", ["x" * 40]), ("input", {"text": "q"})):
        rows = [{"input": f"user: {row['question']}\nassistant:", "output": "x" * 40, "score": 1.0, "step": 1}
                for row in prompts[:2]]
        dump = write_jsonl(tmp_path / f"{column}.jsonl", [{**row, column: value} for row in rows])
        with pytest.raises(InputError, match=rf"{column}\.jsonl: column '{column}' holds .*, not text"):
            observe([dump], None, dataset=[built["prompts"]])


def test_a_dump_carrying_prompt_ids_and_token_counts_is_read_by_them(built, tmp_path):  # noqa: F811
    """A hostile-input round: a verl dump with the prompt id and token count docs/integrations.md shows was read as
    text, its lengths estimated and a sample of shared text given to the first such prompt. verl's own uid (its
    group key) is no dataset id: such a dump is still matched by text."""
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:3]
    rows = [{"input": f"user\n{p['question']}\nassistant\n", "output": "x" * 40, "gts": "1", "score": 1.0, "step": 1,
             "prompt_id": p["id"], "response_length": 999} for p in prompts]
    result = observe([write_jsonl(tmp_path / "d.jsonl", rows)], None, dataset=[built["prompts"]])
    assert result.added["response_tokens"].to_list() == [999] * 3 and result.summary["estimated_lengths"] == 0
    assert result.added["prompt_id"].to_list() == [p["id"] for p in prompts]
    grouped = [{**{k: v for k, v in r.items() if k != "prompt_id"}, "uid": f"u{i}"} for i, r in enumerate(rows)]
    result = observe([write_jsonl(tmp_path / "g.jsonl", grouped)], None, dataset=[built["prompts"]])
    assert result.added["prompt_id"].to_list() == [p["id"] for p in prompts] and result.summary["estimated_lengths"] == 3


def _three_questions(tmp_path):
    """A dataset of three questions, ids a, b and c, for the dump tests."""
    return write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "What is 2+2?"},
                                              {"id": "b", "question": "Name a prime."},
                                              {"id": "c", "question": "Spell it."}])


def test_a_dump_of_mixed_kinds_is_read_as_the_file_holds_it(tmp_path):
    """An audit: a dump whose outputs mix text and numbers (or text that starts as the reader's tags do) was cast to
    text with the reader's tag still on: the number 12345678 was counted as "\\x00json:12345678" (4 tokens, not 2).
    Each value is now as the file holds it (`json_records.untag`), as the other readers give them."""
    data = _three_questions(tmp_path)
    dump = write_jsonl(tmp_path / "1.jsonl", [
        {"input": "user\nWhat is 2+2?\nassistant\n", "output": "x" * 40, "score": 1, "step": 1},
        {"input": "user\nName a prime.\nassistant\n", "output": 12345678, "score": 1, "step": 1},
        {"input": "user\nSpell it.\nassistant\n", "output": "\x00json:abcdef", "score": 1, "step": 1},
    ])
    # A number is no response text (a hostile-input round, 2026-12-07: `"output": 5` was counted as the text "5").
    with pytest.raises(InputError, match=r"1\.jsonl:2: column 'output' holds 12345678, not text \(a verl dump's "
                                         r"output is the response's text\); fix the row"):
        observe([dump], None, dataset=[data])
    lines = dump.read_text().splitlines()
    dump.write_text("\n".join([lines[0], lines[1].replace("12345678", '"12345678"'), lines[2]]) + "\n")
    result = observe([dump], None, dataset=[data])
    assert result.added["prompt_id"].to_list() == ["a", "b", "c"]
    assert result.added["response_tokens"].to_list() == [10, 2, 3]
    numbers = write_jsonl(tmp_path / "2.jsonl", [{**json.loads(line), "output": 5} for line in lines])
    with pytest.raises(InputError, match=r"2\.jsonl:1: column 'output' holds 5, not text"):
        observe([numbers], None, dataset=[data])


def test_generation_output_whose_responses_are_not_texts_is_refused_naming_the_column_and_row(tmp_path):
    """A hostile-input round: verl generation output whose `responses` list held a number (`["a", 5]`) was told it
    "holds prompts but no response lengths ... a prompt file (the probe's?)"."""
    for name, responses, said in [("mixed", [["a", "bb"], ["a", 5]], r"mixed\.jsonl:2: column 'responses' holds 5"),
                                  ("numbers", [[1, 2], [3]], r"numbers\.jsonl:1: column 'responses' holds 1"),
                                  ("text", ["abc", "x"], r"text\.jsonl:1: column 'responses' holds the text 'abc'")]:
        log = write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"p{i}", "prompt": "q", "responses": r}
                                                       for i, r in enumerate(responses)])
        with pytest.raises(InputError, match=said + r", not a list of response texts \(verl's generation output"):
            observe([log], None)


def test_on_bad_row_skip_skips_and_counts_dump_rows_that_are_not_text(tmp_path):
    """`--on-bad-row skip` skipped other bad rows but stopped at a verl dump row whose input or output is not text,
    and at generation output whose responses are not lists of texts (a `responses` of 5 was exit 70 either way)."""
    skip = replace(OBSERVE_READ, on_bad_row="skip")
    data = _three_questions(tmp_path)
    dump = write_jsonl(tmp_path / "dump.jsonl", [
        {"input": "user\nWhat is 2+2?\nassistant\n", "output": "x" * 40, "score": 1, "step": 1},
        {"input": "user\nName a prime.\nassistant\n", "output": 5, "score": 1, "step": 1},
        {"input": 7, "output": "abc", "score": 1, "step": 1},
        {"input": "user\nSpell it.\nassistant\n", "output": "abcdefgh", "score": 1, "step": 1},
    ])
    with pytest.raises(InputError, match=r"dump\.jsonl:3: column 'input' holds 7, not text \(a verl dump's input "
                                         r"is the prompt's text\); fix the row, or pass --on-bad-row skip"):
        observe([dump], None, dataset=[data])
    result = observe([dump], None, dataset=[data], read=skip)
    assert result.added["prompt_id"].to_list() == ["a", "c"] and result.summary["bad_rows"] == 2
    assert result.summary["bad_row_examples"] == ["dump.jsonl:2: column 'output' holds 5, not text".replace(
        "dump", str(tmp_path / "dump"), 1), f"{tmp_path / 'dump.jsonl'}:3: column 'input' holds 7, not text"]
    listed = write_jsonl(tmp_path / "listed.jsonl", [{"input": "user\nSpell it.\nassistant\n", "output": ["ab"],
                                                      "score": 1, "step": 1}])
    with pytest.raises(InputError, match=r"nothing to write: the one row was bad and skipped"):
        observe([listed], tmp_path / "h.parquet", dataset=[data], read=skip)
    gen = write_jsonl(tmp_path / "gen.jsonl", [{"id": "a", "prompt": "q", "responses": ["aaaa", "bbbbbbbb"]},
                                               {"id": "b", "prompt": "q", "responses": ["a", 5]},
                                               {"id": "c", "prompt": "q", "responses": {"x": "t"}}])
    result = observe([gen], None, read=skip)
    assert result.added["prompt_id"].to_list() == ["a", "a"] and result.summary["bad_rows"] == 2
    assert [e.split(": ", 1)[1] for e in result.summary["bad_row_examples"]] == [
        "column 'responses' holds 5, not a list of response texts",
        "column 'responses' holds {\"x\": \"t\"}, not a list of response texts"]
    numbers = write_jsonl(tmp_path / "numbers.jsonl", [{"id": "a", "prompt": "q", "responses": 5}])
    with pytest.raises(InputError, match=r"numbers\.jsonl:1: column 'responses' holds 5, not a list of response"):
        observe([numbers], None)
    with pytest.raises(InputError, match=r"nothing to write: the one row was bad and skipped"):
        observe([numbers], tmp_path / "h.parquet", read=skip)


def test_a_bad_dataset_row_follows_on_bad_row(tmp_path):
    dataset = write_jsonl(tmp_path / "ds.jsonl", [{"id": "a", "prompt": "hello"}, {"id": "b", "prompt": 5},
                                                  {"id": "c", "prompt": "x"}])
    log = write_jsonl(tmp_path / "log.jsonl", [{"id": "a", "response_tokens": 10}, {"id": "b", "response_tokens": 3}])
    with pytest.raises(InputError, match=r"ds\.jsonl:2: column 'prompt' is not text"):
        observe([log], None, dataset=[dataset])
    result = observe([log], None, dataset=[dataset], read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert result.added["prompt_id"].to_list() == ["a"]  # b's row is bad in the dataset, so b is unknown
    assert result.summary["unknown_ids"] == 1
    assert any("skipped 1 bad row of the dataset" in w and "ds.jsonl:2" in w for w in result.warnings)


def test_a_folder_given_as_a_log_is_called_a_folder(tmp_path):
    (tmp_path / "logs.jsonl").mkdir()
    with pytest.raises(InputError, match="logs.jsonl: is a folder, not a rollout log"):
        observe([tmp_path / "logs.jsonl"], tmp_path / "h.parquet")


def test_append_to_a_file_that_is_not_a_history(tmp_path):
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    log = _log(tmp_path / "r.jsonl", ["p1"])
    with pytest.raises(InputError, match="not an asp history"):
        observe([log], other, append=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.parquet", "r.jsonl"]  # no lock file left beside it
    observe([log], tmp_path / "h.parquet")
    cut = tmp_path / "cut.parquet"
    cut.write_bytes((tmp_path / "h.parquet").read_bytes()[:200])  # a copy cut short: named as one, with the fix
    with pytest.raises(InputError, match=r"not a Parquet history file \(damaged or cut short\?\); --append needs a "
                                         r"history `asp observe` wrote: rebuild it with --force from every log"):
        observe([log], cut, append=True)


@pytest.mark.parametrize("damage", [lambda raw: raw[:-5], lambda raw: b'{"logs": "e0.jsonl"}',
                                    lambda raw: b'{"logs": ["e0.jsonl"]}'])
def test_append_to_a_history_whose_log_list_is_damaged_is_refused(tmp_path, damage):
    """Read as an empty list, a damaged list of ingested logs let --append add the same log again: 2,400
    samples became 2,800 without a word."""
    import pyarrow.parquet as pq

    from asp_cli.integrate.observe import METADATA_KEY

    out = tmp_path / "h.parquet"
    first = _log(tmp_path / "e0.jsonl", ["p1", "p2"], epoch=0)
    observe([first], out)
    table = pq.read_table(out)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: damage(table.schema.metadata[METADATA_KEY])}), out)
    before = out.read_bytes()
    with pytest.raises(InputError, match="damaged asp history metadata .* appending could add a log twice"):
        observe([first], out, append=True)
    assert out.read_bytes() == before


def test_append_to_a_history_saved_again_without_its_metadata_is_refused(tmp_path):
    """A hostile-input round: a history saved again by Polars (its list of observed logs gone) took the same log a
    second time, 40 samples counted twice, exit 0. A lengths file of another tool (no `log` column) still takes."""
    out = tmp_path / "h.parquet"
    first = _log(tmp_path / "e0.jsonl", ["p1", "p2"], epoch=0)
    observe([first], out)
    pl.read_parquet(out).write_parquet(out)  # the metadata is gone
    before = out.read_bytes()
    with pytest.raises(InputError, match="without its list of the logs already observed .* add a log twice"):
        observe([first], out, append=True)
    assert out.read_bytes() == before
    other = tmp_path / "other.parquet"
    pl.read_parquet(out).with_columns(pl.lit(None, pl.String).alias("log")).write_parquet(other)
    assert observe([first], other, append=True).summary["rows_added"] == pl.read_ndjson(first).height


def test_missing_columns_name_observes_own_options(tmp_path):
    """The error named --history-id-key / --history-length-key; `asp observe` calls them --id-key / --length-key."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "tokens": 10}])
    with pytest.raises(InputError, match="name the right one with --length-key$"):
        observe([log], tmp_path / "h.parquet")
    assert observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, length_key="tokens")).summary["rows_added"] == 1


@pytest.mark.parametrize("epoch", [-1, 2**31, 10**20, True, "0", 1.0])
def test_epoch_out_of_range_is_a_settings_error(tmp_path, epoch):
    """--epoch -1 was recorded as is; a huge one was an internal error (exit 70); from Python True was epoch 1 and
    '0' a TypeError."""
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "response_tokens": 10}])
    with pytest.raises(SettingsError, match=r"--epoch must be a whole number from 0 to 2147483647"):
        observe([log], tmp_path / "h.parquet", epoch=epoch)
    assert not (tmp_path / "h.parquet").exists()


def test_history_must_be_named_parquet(tmp_path):
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "response_tokens": 10}])
    with pytest.raises(SettingsError, match=r"h\.jsonl: asp observe writes Parquet, but the name ends in .\.jsonl.; name it \.parquet"):
        observe([log], tmp_path / "h.jsonl")
    assert not (tmp_path / "h.jsonl").exists()


def test_verl_generation_output_is_read_as_samples(tmp_path):
    """verl.trainer.main_generation_server (verl 0.9.1) writes the dataset's rows plus `responses`, a list of the
    n response texts of each prompt; each text is one sample, counted at 4 bytes per token without a tokenizer."""
    frame = pl.DataFrame({"data_source": ["a", "b"], "id": ["q1", "q2"],
                          "prompt": [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]],
                          "responses": [["x" * 40, "y" * 400], ["z" * 8, "w" * 80]]})
    log = tmp_path / "gen.parquet"
    frame.write_parquet(log)
    result = observe([log], tmp_path / "h.parquet")
    assert result.added.select("prompt_id", "response_tokens").rows() == [("q1", 10), ("q1", 100), ("q2", 2),
                                                                          ("q2", 20)]
    assert result.summary["estimated_lengths"] == 4 and result.summary["log_formats"] == {"verl_generations": 1}
    assert any("estimated from text" in w for w in result.warnings)
    # A response without text is a bad row: an error naming its row by default, skipped with --on-bad-row skip
    # (it was skipped with exit 0 whatever the option said).
    frame.with_columns(pl.Series("responses", [["x" * 40, None], ["z" * 8, "w" * 80]])).write_parquet(log)
    with pytest.raises(InputError, match=r"gen\.parquet: 1 responses without an id or text \(the first: "
                                         r".*gen\.parquet: row 1\); fix the row, or pass --on-bad-row skip"):
        observe([log], None)
    skipped = observe([log], None, read=replace(OBSERVE_READ, on_bad_row="skip"))
    assert skipped.added.height == 3 and skipped.summary["bad_rows"] == 1


def test_a_missing_log_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no such rollout log"):
        observe([tmp_path / "absent.jsonl"], tmp_path / "h.parquet")


def _dump_rows(questions, *, uid: bool, extras: bool = False):
    """Records shaped like verl 0.9.1's _write_generations output (see tests/integration/test_verl.py)."""
    rows = []
    for i, question in enumerate(questions):
        for session in range(2):
            row = {"input": f"system\nBe brief.\nuser\n{question}\nassistant\n", "output": "word " * (10 + session),
                   "gts": str(i), "score": 1.0, "step": 3}
            if uid:
                row["uid"] = f"{i:08x}-0000-4000-8000-{i:012x}_{session}_0"
            if extras:
                row.update(acc=1.0, index=i)
            rows.append(row)
    return rows


def test_both_verl_trainers_dumps_are_read_and_named(built, tmp_path):  # noqa: F811
    """A v1 dump's `uid` ({uuid4}_{session}_{i}) is not a prompt id, nor a legacy dump's `index` extra."""
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:4]
    (tmp_path / "v1").mkdir()
    (tmp_path / "legacy").mkdir()
    v1 = write_jsonl(tmp_path / "v1" / "3.jsonl", _dump_rows([p["question"] for p in prompts], uid=True))
    legacy = write_jsonl(tmp_path / "legacy" / "3.jsonl", _dump_rows([p["question"] for p in prompts], uid=False,
                                                                   extras=True))
    plain = _log(tmp_path / "log.jsonl", [prompts[0]["id"]])
    result = observe([v1, legacy, plain], tmp_path / "h.parquet", dataset=[built["prompts"]])
    assert result.summary["log_formats"] == {"verl_v1_dump": 1, "verl_legacy_dump": 1, "rollout_log": 1}
    expected = [p["id"] for p in prompts for _ in range(2)]
    assert result.added["prompt_id"].to_list() == expected + expected + [prompts[0]["id"]] * SAMPLES
    assert result.summary["bad_rows"] == 0
    _, logs = read_history(tmp_path / "h.parquet")
    assert [entry["format"] for entry in logs] == ["verl_v1_dump", "verl_legacy_dump", "rollout_log"]
    # A uid that is not a trajectory key makes a legacy dump, never a v1 one.
    odd = write_jsonl(tmp_path / "odd.jsonl", [dict(r, uid="p1") for r in _dump_rows([prompts[0]["question"]], uid=False)])
    assert observe([odd], None, dataset=[built["prompts"]]).summary["log_formats"] == {"verl_legacy_dump": 1}


def test_dump_text_with_changed_whitespace_still_matches(tmp_path):
    """Word-level decoders join tokens by single spaces and drop newlines: the loose match still finds them."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "What is\n 2 plus 2 ?"},
                                             {"id": "b", "question": "What is 2 plus 2 ? Think."},
                                             {"id": "c", "question": "Same text"}, {"id": "d", "question": "Same text"}])
    dump = write_jsonl(tmp_path / "1.jsonl", [
        {"input": "user What is 2 plus 2 ? assistant", "output": "4", "score": 1, "step": 1},
        {"input": "user What is 2 plus 2 ? Think. assistant", "output": "4", "score": 1, "step": 1},
        {"input": "user\nSame text\nassistant\n", "output": "4", "score": 1, "step": 1},
        {"input": "user\nSame text\nassistant\n", "output": "44", "score": 1, "step": 1},
        {"input": "user\nSame text\nassistant\n", "output": "444", "score": 1, "step": 1},
    ])
    result = observe([dump], None, dataset=[data])
    # The samples of a text two ids share are spread over them in turn: all went to the first, the other left without
    # one (an OpenRLHF newcomer's repeated prompts).
    assert result.added["prompt_id"].to_list() == ["a", "b", "c", "d", "c"]
    assert result.summary["ambiguous_matches"] == 3
    assert ("3 dump samples match a prompt text that several dataset ids share (1 such text, e.g. that of ids 'c', "
            "'d'); spread over those ids in turn (the same text, the same policy's lengths)") in result.warnings


def test_tokenizer_counts_of_a_dump_are_flagged_one_eos_short(built, tmp_path):  # noqa: F811
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    model = tokenizers.models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:2]
    dump = write_jsonl(tmp_path / "3.jsonl", _dump_rows([p["question"] for p in prompts], uid=True))
    read = replace(OBSERVE_READ, tokenizer=tmp_path / "tokenizer.json")
    result = observe([dump], None, dataset=[built["prompts"]], read=read)
    assert result.added["response_tokens"].to_list() == [10, 11, 10, 11]
    assert result.summary["eos_short_lengths"] == 4 and result.summary["estimated_lengths"] == 0
    assert any("1 token short (the end-of-sequence token)" in w for w in result.warnings)
    # Not only verl dumps text without special tokens: a log decoded with them (OpenRLHF's) holds none only where
    # every response was cut at the cap, and the warning says so (an OpenRLHF newcomer's round, 2026-12-07).
    assert any("(OpenRLHF's) holds an end token unless cut at the cap" in w for w in result.warnings)
    assert not any("was not used" in w for w in result.warnings)


def test_a_dump_whose_every_response_is_empty_is_refused_as_a_log_of_zeros_is(built, tmp_path):  # noqa: F811
    """A hostile-input round: verl generation output whose `responses` are all `[""]`, or a dump whose `output` is
    all "", wrote a history (exit 0, no warning: 1 token each estimated, 0 each counted) that `asp schedule --history`
    then refused (E82). A rollout log of zeros was already refused at observe time: these are too."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:3]
    dump = write_jsonl(tmp_path / "3.jsonl", [dict(r, output="") for r in _dump_rows([p["question"] for p in prompts],
                                                                                   uid=True)])
    generations = tmp_path / "gen.parquet"
    pl.DataFrame({"id": [p["id"] for p in prompts], "question": [p["question"] for p in prompts],
                  "responses": [[""]] * 3}).write_parquet(generations)
    for tokenizer_file in (None, tmp_path / "tokenizer.json"):
        read = replace(OBSERVE_READ, tokenizer=tokenizer_file)
        with pytest.raises(InputError) as caught:
            observe([dump], tmp_path / "h.parquet", dataset=[built["prompts"]], read=read)
        assert str(caught.value) == (f"{dump}: every one of the 6 responses (column 'output') is empty: the wrong "
                                     "column, or a rollout that wrote nothing; give the log of a rollout whose "
                                     "responses hold text")
        with pytest.raises(InputError, match=r"gen\.parquet: every one of the 3 responses \(column 'responses'\) is "
                                             "empty: the wrong column, or a rollout that wrote nothing"):
            observe([generations], tmp_path / "h.parquet", dataset=[built["prompts"]], read=read)
    assert not (tmp_path / "h.parquet").exists()
    # One empty response among others is a response (an immediate end of sequence), read as before.
    pl.DataFrame({"id": [p["id"] for p in prompts], "question": [p["question"] for p in prompts],
                  "responses": [[""], ["word word"], ["word"]]}).write_parquet(generations)
    assert observe([generations], None).added["response_tokens"].to_list() == [1, 2, 1]


def test_a_tokenizer_that_cannot_split_the_text_is_named(built, tmp_path):  # noqa: F811
    """A hostile-input round: a WordLevel tokenizer without a pre-tokenizer reads each response whole, one unknown
    word, so every response counted 1 token (an all-1 history, exit 0, no word)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]")).save(
        str(tmp_path / "wordlevel.json"))
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:2]
    dump = write_jsonl(tmp_path / "3.jsonl", _dump_rows([p["question"] for p in prompts], uid=True))
    read = replace(OBSERVE_READ, tokenizer=tmp_path / "wordlevel.json")
    result = observe([dump], None, dataset=[built["prompts"]], read=read)
    assert result.added["response_tokens"].to_list() == [1, 1, 1, 1]
    assert (f"{dump}: --tokenizer {tmp_path / 'wordlevel.json'} counts 4 of its 4 responses of several words as one "
            "token each: it cannot split the text (a tokenizer without a pre-tokenizer?), so these lengths are wrong; "
            "give the tokenizer.json of the model that generated them") in result.warnings
    # One that splits them says nothing of it.
    splitting = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    splitting.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    splitting.save(str(tmp_path / "split.json"))
    result = observe([dump], None, dataset=[built["prompts"]], read=replace(read, tokenizer=tmp_path / "split.json"))
    assert result.added["response_tokens"].to_list() == [10, 11, 10, 11]
    assert not any("cannot split the text" in w for w in result.warnings)


def test_a_tokenizer_no_log_needs_is_said_and_a_missing_one_is_refused_first(tmp_path):
    """`--tokenizer nope.json` was silently ignored when no log was a verl dump: a missing file is exit 3 (before any
    log is read, whatever the logs are), an existing one that counted nothing is a warning."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "a", "response_tokens": 12}])
    result = CliRunner().invoke(app, ["observe", str(log), "-o", str(tmp_path / "h.parquet"),
                                      "--tokenizer", str(tmp_path / "nope.json")])
    assert result.exit_code == 3, result.output
    assert result.stderr == f"Error: {tmp_path / 'nope.json'}: no such file; --tokenizer names a local tokenizer.json\n"
    assert not (tmp_path / "h.parquet").exists()
    # The model's folder, a newcomer's likely --tokenizer, is named with the file inside it (was "is not a file").
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tokenizer.json").write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(app, ["observe", str(log), "-o", str(tmp_path / "h.parquet"),
                                      "--tokenizer", str(tmp_path / "model")])
    assert result.exit_code == 3, result.output
    assert result.stderr == (f"Error: {tmp_path / 'model'}: a folder; --tokenizer names the tokenizer.json file: "
                             f"pass --tokenizer {tmp_path / 'model' / 'tokenizer.json'}\n")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")  # never parsed: no log needs it
    result = observe([log], None, read=replace(OBSERVE_READ, tokenizer=tmp_path / "tokenizer.json"))
    assert result.warnings == [f"--tokenizer {tmp_path / 'tokenizer.json'} was not used: it counts the response text "
                               "of verl dumps, and these logs give token counts; drop it"]
    assert observe([log], None).warnings == []


def test_a_verl_dump_takes_the_ids_the_schedule_was_made_with(tmp_path):
    """A verl dataset without an id column, scheduled with --id-key extra_info.index: `asp observe --dataset-id-key
    extra_info.index` gives the dump's samples those ids, not the dataset's row numbers (a newcomer's --id-key went
    to the dump and was refused); a key the dataset lacks is named by its flag."""
    import polars as pl

    from asp_cli.errors import InputError

    questions = ["What is 2 + 2?", "Name a prime above 10.", "Integrate x dx."]
    dataset = tmp_path / "train.parquet"
    pl.DataFrame({"prompt": [[{"role": "user", "content": q}] for q in questions],
                  "data_source": ["gsm8k"] * 3,
                  "extra_info": [{"split": "train", "index": 40 + i} for i in range(3)]}).write_parquet(dataset)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"input": f"user: {q}\nassistant:", "output": "y" * (8 * (i + 1)),
                                        "score": 1.0, "step": 1}) + "\n" for i, q in enumerate(questions)))
    by_index = observe([dump], None, dataset=[dataset], read=replace(OBSERVE_READ, id_key="extra_info.index"))
    assert sorted(by_index.added["prompt_id"].to_list()) == ["40", "41", "42"]
    by_row = observe([dump], None, dataset=[dataset])
    assert sorted(by_row.added["prompt_id"].to_list()) == ["0", "1", "2"]
    with pytest.raises(InputError, match="--dataset-id-key"):
        observe([dump], None, dataset=[dataset], read=replace(OBSERVE_READ, id_key="extra_info.uid"))
    # without the dataset it names a column of, it is refused rather than ignored
    from asp_cli.errors import SettingsError

    with pytest.raises(SettingsError, match="--dataset-id-key names the id column of the --dataset files"):
        observe([dump], None, read=replace(OBSERVE_READ, id_key="extra_info.index"))


def test_a_dataset_whose_named_ids_repeat_is_told_to_change_the_flag_observe_takes(tmp_path):
    """`asp observe LOG --dataset D --dataset-id-key extra_info.index` on a file joining sources, each numbered from
    0, was told to "pass another --id-key", which in `asp observe` names the logs' id column, not the dataset's."""
    dataset = write_jsonl(tmp_path / "train.jsonl", [
        {"prompt": f"question {i}", "data_source": "ab"[i % 2], "extra_info": {"index": i // 2}} for i in range(4)])
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "0", "sample": 0, "response_tokens": 10}])
    with pytest.raises(InputError) as caught:
        observe([log], None, dataset=[dataset], read=replace(OBSERVE_READ, id_key="extra_info.index"))
    assert str(caught.value).endswith(
        "Make ids unique, or pass another --dataset-id-key than 'extra_info.index', or leave --dataset-id-key out to "
        "read an id column of a common name (id, prompt_id, uid, ...) where there is one, else "
        "to number the rows (a file joining sources often repeats each source's own index)")


def test_with_its_schedule_a_dataset_is_read_with_the_id_column_the_schedule_was_made_with(tmp_path):
    """`asp observe DUMP --schedule S --dataset D`: S was made with --id-key extra_info.index, so D's prompts take
    those ids without --dataset-id-key (as `asp export` reads D), and the samples count against S."""
    import polars as pl
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    questions = [f"What is {i} + {i}?" for i in range(12)]
    dataset = tmp_path / "train.parquet"
    pl.DataFrame({"prompt": [[{"role": "user", "content": q}] for q in questions],
                  "extra_info": [{"index": 100 + i} for i in range(12)]}).write_parquet(dataset)
    schedule = tmp_path / "s.parquet"
    made = CliRunner().invoke(app, ["schedule", str(dataset), "-o", str(schedule), "--id-key", "extra_info.index",
                                    "--train-batch-size", "4", "--quiet"])
    assert made.exit_code == 0, made.output
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"input": f"user: {q}\nassistant:", "output": "z" * 20, "score": 1.0,
                                        "step": 1}) + "\n" for q in questions[:3]))
    result = observe([dump], None, schedule=schedule, dataset=[dataset])
    assert sorted(result.added["prompt_id"].to_list()) == ["100", "101", "102"]
    assert result.summary.get("unknown_ids", 0) == 0
    # named otherwise, the flag wins
    named = observe([dump], None, dataset=[dataset], read=replace(OBSERVE_READ, id_key="extra_info.index"))
    assert sorted(named.added["prompt_id"].to_list()) == ["100", "101", "102"]


def test_a_dataset_whose_prompt_column_is_named_takes_it_from_the_flag_or_the_schedule(tmp_path):
    """An OpenRLHF-style dataset (`context_messages`): `asp observe --dataset D` could not read it, and had no option
    to name the column (a newcomer round); `--dataset-prompt-key` names it, the schedule's `--prompt-key` is taken
    where `--schedule` is given, and alone (without --dataset) it is refused, naming itself."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    dataset = tmp_path / "orl.jsonl"
    write_jsonl(dataset, [{"context_messages": [{"role": "user", "content": f"question {i}"}], "label": str(i)}
                          for i in range(12)])
    log = tmp_path / "log.jsonl"
    write_jsonl(log, [{"prompt_id": str(i), "response_tokens": 10 + i} for i in range(12)])
    with pytest.raises(InputError, match="name the right one with --dataset-prompt-key$"):
        observe([log], None, dataset=[dataset])
    named = observe([log], None, dataset=[dataset], read=replace(OBSERVE_READ, prompt_key="context_messages"))
    assert named.summary["prompts_observed"] == 12 and named.summary.get("unknown_ids", 0) == 0
    schedule = tmp_path / "s.parquet"
    made = CliRunner().invoke(app, ["schedule", str(dataset), "-o", str(schedule), "--prompt-key", "context_messages",
                                    "--train-batch-size", "4", "--quiet"])
    assert made.exit_code == 0, made.output
    assert observe([log], None, schedule=schedule, dataset=[dataset]).summary["prompts_observed"] == 12
    cli = CliRunner().invoke(app, ["observe", str(log), "-o", str(tmp_path / "h.parquet"), "--dataset", str(dataset),
                                   "--dataset-prompt-key", "context_messages", "--quiet"])
    assert cli.exit_code == 0, cli.output
    with pytest.raises(SettingsError, match="--dataset-prompt-key names the prompt column of the --dataset files"):
        observe([log], None, read=replace(OBSERVE_READ, prompt_key="context_messages"))


@pytest.mark.parametrize("fmt, name, extra", [("verl", "train.parquet", {}), ("jsonl", "train.jsonl", {}),
                                               ("jsonl", "meta.jsonl", {"metadata_key": "metadata"}),
                                               ("parquet", "flat.parquet", {"metadata_key": "info"}),
                                               ("jsonl", "pre.jsonl", {"metadata_key": "metadata", "prefix": "asp_"}),
                                               ("parquet", "pre.parquet", {"metadata_key": "info", "prefix": "asp_"}),
                                               ("verl", "pre_verl.parquet", {"prefix": "asp_"})])
def test_an_export_given_as_the_dataset_gives_the_schedules_ids_not_its_row_numbers(tmp_path, fmt, name, extra):
    """A newcomer passed the file verl was given (`asp export`'s, in the schedule's order) as --dataset, without
    --schedule: its row numbers became the ids, 45 of 256 right, and the next epoch was planned on other prompts'
    lengths, without a word. An export carries the schedule's id; observe takes it. Written with --prefix asp_ and
    --metadata-key, the id is that object's asp_prompt_id: JSON lines so written were not known as an export, and
    Parquet's id was looked for as prompt_id, so both were read by row numbers again."""
    from asp_cli.integrate.export import export

    questions = [f"What is {i} times {i + 3}?" for i in range(12)]
    dataset = tmp_path / "data.parquet"
    pl.DataFrame({"prompt": [[{"role": "user", "content": q}] for q in questions],
                  "extra_info": [{"index": 100 + i} for i in range(12)]}).write_parquet(dataset)
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    sched = tmp_path / "s.parquet"
    from asp_cli.reading.options import ReadOptions

    schedule([dataset], sched, settings=ScheduleSettings(train_batch_size=4, instances=2),
             read=ReadOptions(id_key="extra_info.index"))
    exported = tmp_path / name
    export(sched, [dataset], exported, format=fmt, **extra)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps({"input": f"user: {q}\nassistant:", "output": "z" * (4 * i + 4), "score": 1.0,
                                        "step": 1}) + "\n" for i, q in enumerate(questions[:5])))
    result = observe([dump], None, dataset=[exported])
    by_id = dict(zip(result.added["prompt_id"].to_list(), result.added["response_tokens"].to_list(), strict=True))
    assert by_id == {str(100 + i): (4 * i + 4) // 4 for i in range(5)}  # 4 bytes a token, estimated


def test_an_export_of_several_epochs_given_as_the_dataset_is_named_as_one(tmp_path):
    """One epoch's export is read as --dataset by the schedule's ids; one of two epochs holds each id twice and was
    told E07's "pass --dataset-id-key", which cannot help. It is named as an export, as `asp export` and
    `asp schedule` name one, with the fix: the file the schedule was made from."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import export
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "prompts.jsonl", [{"id": f"p{i}", "prompt": f"What is {i} + 1?"} for i in range(8)])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2, epochs=2))
    exported = tmp_path / "e.jsonl"
    export(sched, [data], exported, format="jsonl")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"input": "user: What is 1 + 1?\nassistant:", "output": "zzzz", "score": 1.0,
                                "step": 1}) + "\n")
    with pytest.raises(InputError) as caught:
        observe([dump], None, dataset=[exported])
    assert str(caught.value) == (f"{exported}: an asp export (its rows repeat each prompt, once an epoch), not the "
                                 "prompt file(s) the schedule was made from; give that file instead (each prompt "
                                 "once, in its own order)")
    assert observe([dump], None, dataset=[data]).added["prompt_id"].to_list() == ["p1"]


def test_a_given_epoch_is_every_rows_and_a_log_column_that_says_otherwise_is_warned_about(tmp_path):
    """asp export's metadata numbers the schedule's epochs (0 for every one-epoch schedule): a slime newcomer's
    second epoch observed with --epoch 1 was recorded as epoch 0 without a word, and --history-epochs 1 then used
    both. --epoch is every row's epoch; a log column that disagrees is said."""
    log = _log(tmp_path / "e1.jsonl", ["p1", "p2"], epoch=0)
    result = observe([log], tmp_path / "h.parquet", epoch=1)
    assert result.history["epoch"].unique().to_list() == [1]
    assert any(f"{log}: its epoch column says otherwise for {2 * SAMPLES:,} rows (e.g. 0); recorded as --epoch 1" in w
               for w in result.warnings), result.warnings
    # Without --epoch the log's own column stands; with the same epoch nothing is said.
    assert observe([log], tmp_path / "o.parquet").history["epoch"].unique().to_list() == [0]
    assert not any("epoch column" in w for w in observe([log], tmp_path / "s.parquet", epoch=0).warnings)


def test_a_dotted_id_key_reaches_into_a_logs_objects_and_the_columns_read_are_said(tmp_path):
    """A slime sample dump holds its prompt id in `metadata` and a sample counter `index`: `--id-key
    metadata.prompt_id` was refused ("no column"), and without it `index` was read as the id without a word."""
    log = write_jsonl(tmp_path / "slime.jsonl", [
        {"index": i, "response_length": 10 + i, "metadata": {"prompt_id": f"p{i // 2}"}} for i in range(4)])
    nested = observe([log], tmp_path / "h.parquet", read=replace(OBSERVE_READ, length_id_key="metadata.prompt_id"))
    assert sorted(nested.history["prompt_id"].unique().to_list()) == ["p0", "p1"]
    # What else the log holds is said as not read (an agent newcomer's `turns` went without a word).
    assert nested.summary["columns_used"] == {"slime.jsonl": {"id": "metadata.prompt_id", "length": "response_length",
                                                              "unread": ["index"]}}
    detected = observe([log], tmp_path / "d.parquet")
    assert detected.summary["columns_used"] == {"slime.jsonl": {"id": "index", "length": "response_length",
                                                                "unread": ["metadata"]}}
    # Lengths and histories read alike (asp schedule --history-id-key, asp report --lengths-id-key).
    frame, _ = read_lengths([log], replace(OBSERVE_READ, length_id_key="metadata.prompt_id"))
    assert frame["prompt_id"].to_list() == ["p0", "p0", "p1", "p1"]


def test_appending_numbered_samples_to_unnumbered_ones_says_how_they_count(tmp_path):
    """A MindSpeed newcomer appended epoch 1 (numbered) to epoch 0 (observed without --epoch): --history-epochs 1
    then kept epoch 1 alone, which nothing had said."""
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "a.jsonl", ["p1", "p2"])], history)
    appended = observe([_log(tmp_path / "b.jsonl", ["p1", "p3"])], history, append=True, epoch=1)
    assert any(w.startswith("the history's samples so far have no epoch, these have: `asp schedule "
                            "--history-epochs` counts those without one as before the first epoch") for w in appended.warnings)
    assert any(w.endswith("where they are an epoch's, rebuild the history with every epoch's log numbered (the "
                          "first with --epoch 0 --force, each later one with --append --epoch E)")
               for w in appended.warnings)
    again = observe([_log(tmp_path / "c.jsonl", ["p4"])], history, append=True, epoch=2)
    assert not any("no epoch" in w for w in again.warnings)
    # An existing history named without --append or --force: both are named (an AReaL newcomer was told of --force
    # only, which dropped the probe's samples); nothing is written.
    before = history.read_bytes()
    with pytest.raises(OutputError, match=r"h\.parquet exists; pass --append to add these logs to it, or --force "
                                          r"to replace it$"):
        observe([_log(tmp_path / "d.jsonl", ["p5"])], history, epoch=3)
    assert history.read_bytes() == before


def test_appending_an_epoch_the_history_holds_again_says_its_samples_count_twice(built, tmp_path):  # noqa: F811
    """A retried pipeline step regenerated epoch 0's log (other bytes) and appended it: every prompt then held 16
    samples for a schedule of 8, without a word (a shell-pipeline newcomer's round). A log split by rank, each part
    of the epoch's samples, stays within the schedule's samples per prompt and is not warned about."""
    out = tmp_path / "h.parquet"
    ids = [f"p{i}" for i in range(PROMPTS)]
    observe([_log(tmp_path / "e0.jsonl", ids)], out, schedule=built["schedule"], epoch=0)
    again = observe([_log(tmp_path / "e0-retry.jsonl", ids, tokens=150)], out, append=True,
                    schedule=built["schedule"], epoch=0)
    said = [w for w in again.warnings if w.startswith("epoch 0:")]
    assert said == [f"epoch 0: {PROMPTS:,} prompts now hold more samples than the schedule's {SAMPLES} per prompt (up "
                    f"to {2 * SAMPLES}): the history held this epoch's samples of them already, and these count "
                    "again; if this log is that epoch's log regenerated (a retried step), rebuild the history "
                    "without it (--force with the other logs)"]
    later = observe([_log(tmp_path / "e1.jsonl", ids, tokens=150)], out, append=True, schedule=built["schedule"],
                    epoch=1)
    assert not [w for w in later.warnings if "more samples than" in w]
    # One prompt logged again read "epoch 0: 1 prompts now hold more samples ... of them".
    once = observe([_log(tmp_path / "e0-one.jsonl", ids[:1], tokens=170)], out, append=True,
                   schedule=built["schedule"], epoch=0, unknown_ids="skip")
    assert any(w.startswith(f"epoch 0: 1 prompt now holds more samples than the schedule's {SAMPLES} per prompt (up "
                            f"to {3 * SAMPLES}): the history held this epoch's samples of it already") for w in
               once.warnings), once.warnings
    # A new epoch logged with more samples than the schedule's is not one the history held (a review).
    rows = [{"prompt_id": i, "sample": s, "response_tokens": 100} for i in ids for s in range(2 * SAMPLES)]
    wide = observe([write_jsonl(tmp_path / "e2.jsonl", rows)], out, append=True, schedule=built["schedule"], epoch=2)
    assert not [w for w in wide.warnings if "more samples than" in w]
    # By rank: each log half of every prompt's samples.
    split = tmp_path / "split.parquet"
    halves = [write_jsonl(tmp_path / f"rank{r}.jsonl", [{"prompt_id": i, "sample": s, "response_tokens": 100}
                                                         for i in ids for s in range(SAMPLES) if s % 2 == r])
              for r in (0, 1)]
    observe([halves[0]], split, schedule=built["schedule"], epoch=0)
    second = observe([halves[1]], split, append=True, schedule=built["schedule"], epoch=0)
    assert not [w for w in second.warnings if "more samples than" in w]


def test_a_history_given_as_a_log_is_refused(tmp_path):
    """Taken as a rollout log, a history's samples were added again to another (55,000 became 110,000, exit 0)."""
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "a.jsonl", ["p1", "p2"])], history)
    with pytest.raises(InputError, match=r"h\.parquet: an asp history, not a rollout log; to plan with several "
                                         r"histories give each to asp schedule --history"):
        observe([history], tmp_path / "h2.parquet")
    assert not (tmp_path / "h2.parquet").exists()


def test_a_history_resaved_without_its_metadata_given_as_a_log_is_refused(tmp_path):
    """A hostile-input round: a history saved again by Polars (its asp metadata dropped) appended to the history it
    came from doubled it, exit 0 ("history now 80 samples of 40 prompts"); known by its columns, it is refused."""
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "a.jsonl", ["p1", "p2"])], history)
    resaved = tmp_path / "h_pl.parquet"
    pl.read_parquet(history).write_parquet(resaved)
    before = history.read_bytes()
    with pytest.raises(InputError, match=r"h_pl\.parquet: an asp observe history \(its columns; its asp metadata is "
                                         r"gone.*pass it as --history where it is read.*the rollout log it was made"):
        observe([resaved], history, append=True)
    assert history.read_bytes() == before
    as_lines = tmp_path / "h.jsonl"  # written out as JSON lines, it is known by its columns too
    pl.read_parquet(history).write_ndjson(as_lines)
    with pytest.raises(InputError, match=r"h\.jsonl: an asp observe history \(its columns"):
        observe([as_lines], history, append=True)
    assert history.read_bytes() == before


def test_a_log_named_twice_and_an_id_check_with_nothing_to_check_against_are_refused(tmp_path):
    """A hostile-input round: `asp observe log log` took the log once in silence (asp schedule refuses a file named
    twice), and --unknown-ids error without --schedule or --dataset checked nothing."""
    log = _log(tmp_path / "a.jsonl", ["p1"])
    with pytest.raises(InputError, match=r"a\.jsonl: given twice; name each rollout log once"):
        observe([log, log], tmp_path / "h.parquet")
    with pytest.raises(SettingsError, match="--unknown-ids error checks the logs' ids against --schedule or --dataset"):
        observe([log], tmp_path / "h.parquet", unknown_ids="error")
    assert not (tmp_path / "h.parquet").exists()


def test_a_python_users_own_read_options_are_named_as_observe_names_them(tmp_path):
    """A library newcomer's round: `ReadOptions(length_id_key="uid")` of their own made observe say
    "--history-id-key", an option observe has not."""
    from asp_cli.reading import ReadOptions

    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": "p1", "response_tokens": 10}])
    with pytest.raises(InputError, match=r"no column 'uid' \(from --id-key\)"):
        observe([log], None, read=ReadOptions(length_id_key="uid"))


def test_a_history_copied_joined_to_itself_or_cut_down_is_said_where_it_is_read(tmp_path):
    """A hostile-input round: a history re-saved by Polars (asp's list of observed logs dropped) given beside itself,
    one concatenated with itself (its metadata kept), and one cut to its first rows each planned without a word, the
    first two with every sample counted twice; and `--append` into the cut one kept it cut ("already in the
    history")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    log, out = tmp_path / "gen.jsonl", tmp_path / "h.parquet"
    write_jsonl(log, [{"prompt_id": f"p{i}", "response_tokens": 10 + i} for i in range(40)])
    observe([log], out)
    assert read_lengths([out])[1].notes == []
    table = pq.read_table(out)
    pl.read_parquet(out).write_parquet(tmp_path / "copy.parquet")
    notes = read_lengths([out, tmp_path / "copy.parquet"])[1].notes
    assert notes == [f"{tmp_path / 'copy.parquet'}: its rows name log gen.jsonl, as the rows of {out} do: if one is a "
                     "copy of the other (a history re-saved by Polars or pandas, which drop asp's list of observed "
                     "logs), each of those samples counts twice; give one of them"]
    pq.write_table(pa.concat_tables([table, table]).replace_schema_metadata(table.schema.metadata), tmp_path / "2.parquet")
    assert read_lengths([tmp_path / "2.parquet"])[1].notes == [
        f"{tmp_path / '2.parquet'}: holds 80 samples of log gen.jsonl where its list of observed logs records 40: rows "
        "repeated (the history joined to itself?) count twice; rebuild it with asp observe --force from the logs"]
    cut = tmp_path / "cut.parquet"
    pq.write_table(table.slice(0, 10).replace_schema_metadata(table.schema.metadata), cut)
    assert "holds 10 samples of log gen.jsonl where its list of observed logs records 40: rows left out" in \
        read_lengths([cut])[1].notes[0]
    again = observe([log], cut, append=True)
    assert again.warnings == [f"{log}: already in the history (same bytes); not added again, though the history holds "
                              "10 of the 40 samples it took from it (cut down or filtered since?): rebuild the history "
                              "with --force from every log"]


def test_samples_left_out_as_unknown_ids_are_not_taken_for_a_cut_history(built, tmp_path):  # noqa: F811
    """The list records the samples kept of each log (`rows_kept`), not those read: ids the schedule lacks, left out,
    would otherwise read as a history cut down."""
    log, out = _log(tmp_path / "r.jsonl", ["p1", "ghost"]), tmp_path / "h.parquet"
    observe([log], out, schedule=built["schedule"])
    assert read_history(out)[1][0]["rows"] == 2 * SAMPLES and read_history(out)[1][0]["rows_kept"] == SAMPLES
    assert read_lengths([out])[1].notes == []


def test_a_text_estimate_past_the_cap_is_taken_as_cut_at_it(built, tmp_path):  # noqa: F811
    """Without a tokenizer a response's length is estimated at 4 bytes a token, and one past the schedule's cap (4,096
    here) was said both "cut off at the response cap" and "longer than max_response_tokens; kept as observed", and
    reported as a group maximum past the cap (an OpenRLHF newcomer's round): an estimate's error, taken as cut at it."""
    prompts = [json.loads(line) for line in built["prompts"].read_text().splitlines()][:2]
    rows = _dump_rows([p["question"] for p in prompts], uid=True)
    rows[0]["output"] = "x" * 4 * 5000  # estimated at 5,000 tokens
    dump = write_jsonl(tmp_path / "3.jsonl", rows)
    result = observe([dump], None, dataset=[built["prompts"]], schedule=built["schedule"])
    assert result.added["response_tokens"].max() == 4096 and result.summary["rows_over_max_response_tokens"] == 0
    assert result.summary["truncated_samples"] == 1
    assert ("4 response lengths are estimated from text at 4 bytes per token (1 estimated past the schedule's "
            "max_response_tokens, 4,096, taken as cut at it); pass --tokenizer tokenizer.json for exact counts"
            ) in result.warnings
    assert not [w for w in result.warnings if "longer than the schedule's max_response_tokens" in w]
    # The run's cap given without a schedule (verl's data.max_response_length) is named as the option, not a
    # schedule's (a verl newcomer's dumps were said past "the schedule's max_response_tokens" with no schedule).
    given = observe([dump], None, dataset=[built["prompts"]], max_response_tokens=3000)
    assert ("4 response lengths are estimated from text at 4 bytes per token (1 estimated past --max-response-tokens, "
            "3,000, taken as cut at it); pass --tokenizer tokenizer.json for exact counts") in given.warnings


def test_a_history_observed_against_an_export_is_read_by_the_schedules_ids(tmp_path):
    """An OpenRLHF newcomer observed the log against the exported file (its `prompt_id` the schedule's ids, here row
    numbers of a file without an id column); the next `asp schedule --history` then said the ids named other prompts
    and told them to pass --id-key prompt_id, which the prompt file lacks."""
    from asp_cli import export, schedule
    from asp_cli.settings import ScheduleSettings

    from util import make_prompts

    prompts = write_jsonl(tmp_path / "p.jsonl", [{k: v for k, v in r.items() if k != "id"} for r in make_prompts(30)])
    settings = ScheduleSettings(instances=2, train_batch_size=10)
    made = schedule([prompts], tmp_path / "s.parquet", settings=settings)
    export(made.output, [prompts], tmp_path / "ordered.jsonl", format="jsonl", order="train")
    ids = made.frame["prompt_id"].to_list()
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": i, "response_tokens": 50} for i in ids])
    observe([log], tmp_path / "h.parquet", dataset=[tmp_path / "ordered.jsonl"], schedule=made.output)
    again = schedule([prompts], tmp_path / "s1.parquet", settings=replace(settings, seed=1),
                     history=[tmp_path / "h.parquet"])
    assert not [w for w in again.warnings if "name other prompts" in w], again.warnings


def test_a_log_appended_over_several_epochs_adds_only_its_new_samples(tmp_path):
    """slime_length_log.py and openrlhf_length_log.py append every epoch's samples to one log; observed after each
    epoch with its --epoch, the grown log's earlier samples were added again under the new epoch (a slime newcomer's
    epoch 1 held epoch 0's 28,320 samples twice, without a word). Now only the rows after them are added, said."""
    out, log = tmp_path / "h.parquet", tmp_path / "asp_lengths.jsonl"
    rows = [{"prompt_id": f"p{i}", "response_tokens": 100 + i} for i in range(10)]
    write_jsonl(log, rows[:4])
    observe([log], out, epoch=0)
    write_jsonl(log, rows[:7])  # epoch 1 appended to the same file
    one = observe([log], out, append=True, epoch=1)
    assert one.summary["rows_added"] == 3
    assert one.warnings == [f"{log} grew by 3 samples since it was observed, after the 4 samples (epoch 0) the history "
                            "took from a log of this name: only those are added, as --epoch 1"]
    write_jsonl(log, rows)
    two = observe([log], out, append=True, epoch=2)
    assert two.summary["rows_added"] == 3 and any("after the 7 samples (epochs 0, 1)" in w for w in two.warnings)
    history, _ = read_history(out)
    assert history["epoch"].to_list() == [0] * 4 + [1] * 3 + [2] * 3
    # A log of that name whose first rows are not the earlier samples (another run's, written over the last) and
    # numbered as another epoch is added whole, as before, without a word.
    write_jsonl(log, [{**r, "response_tokens": 900 + i} for i, r in enumerate(rows + rows)])
    other = observe([log], out, append=True, epoch=3)
    assert other.summary["rows_added"] == 20 and other.warnings == []


def test_a_grown_log_appended_without_epoch_numbers_its_new_samples_the_next_epoch(tmp_path):
    """slime's hook appends every epoch to one log; observed with --epoch 0 after epoch 0, then appended after epoch 1
    without --epoch, its new samples were taken without an epoch (where none of the log's samples had one, the log
    counted as rewritten: its earlier samples and their entry replaced). The new samples are the next epoch now,
    said in one line; the earlier ones keep their epoch and entry."""
    out, log = tmp_path / "h.parquet", tmp_path / "asp_lengths.jsonl"
    rows = [{"prompt_id": f"p{i}", "response_tokens": 100 + i} for i in range(10)]
    write_jsonl(log, rows[:4])
    observe([log], out, epoch=0)
    write_jsonl(log, rows[:7])
    one = observe([log], out, append=True)
    assert one.warnings == [f"{log} grew by 3 samples since it was observed, after the 4 samples (epoch 0) the history "
                            "took from a log of this name: recorded them as epoch 1; pass --epoch to number them "
                            "yourself"]
    assert one.summary["rows_added"] == 3 and one.added["epoch"].to_list() == [1] * 3
    assert one.summary["epochs_added"] == [1]
    write_jsonl(log, rows)
    two = observe([log], out, append=True)
    assert any("after the 7 samples (epochs 0, 1)" in w and "recorded them as epoch 2;" in w for w in two.warnings)
    history, logs = read_history(out)
    assert history["epoch"].to_list() == [0] * 4 + [1] * 3 + [2] * 3
    assert history["response_tokens"].to_list() == list(range(100, 110))
    assert [(e["rows"], e["rows_kept"]) for e in logs] == [(4, 4), (3, 3), (3, 3)]
    # Observed twice unchanged: nothing added, as before.
    again = observe([log], out, append=True)
    assert again.summary["rows_added"] == 0 and again.summary["logs_already_observed"] == 1
    assert read_history(out)[0].equals(history)
    # The same rows saved again (other bytes): said, as for a log observed in one piece.
    log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    saved = observe([log], out, append=True)
    assert saved.warnings[0] == (f"{log}: its rows are those of asp_lengths.jsonl, already in the history, though its "
                                 "bytes differ; if it is the same log saved again, its samples now count twice: observe "
                                 "again without it")
    # A log whose own epoch column numbers its rows keeps its numbers.
    numbered, history2 = tmp_path / "numbered.jsonl", tmp_path / "h2.parquet"
    write_jsonl(numbered, [{**r, "epoch": 0} for r in rows[:4]])
    observe([numbered], history2)
    write_jsonl(numbered, [{**r, "epoch": 0 if i < 4 else 5} for i, r in enumerate(rows[:6])])
    own = observe([numbered], history2, append=True)
    assert own.added["epoch"].to_list() == [5, 5] and own.warnings[0].endswith("only those are added, with the log's "
                                                                               "own epochs")


def test_a_grown_log_whose_unknown_ids_were_left_out_adds_only_its_new_samples(built, tmp_path):  # noqa: F811
    """The history keeps fewer of a log's rows than it read where ids the schedule lacks were left out: the grown log's
    first rows were then not the history's, and its earlier samples were added again (under the new epoch) beside
    them. The rows the history read of it (its entries' ``rows``) are its first rows, less those of ids it holds none
    of."""
    out, log = tmp_path / "h.parquet", tmp_path / "asp_lengths.jsonl"
    epochs = [[{"prompt_id": "ghost", "response_tokens": 5 + e}]  # first: the history's rows are not the log's first
              + [{"prompt_id": f"p{i}", "response_tokens": 100 * (e + 1) + i} for i in range(PROMPTS)] for e in range(2)]
    write_jsonl(log, epochs[0])
    first = observe([log], out, schedule=built["schedule"], epoch=0)
    assert first.summary["unknown_id_rows"] == 1 and first.summary["rows_added"] == PROMPTS
    write_jsonl(log, epochs[0] + epochs[1])
    grown = observe([log], out, schedule=built["schedule"], append=True)
    assert grown.summary["rows_added"] == PROMPTS and grown.summary["unknown_id_rows"] == 1
    assert f"{log} grew by {PROMPTS + 1} samples since it was observed, after the {PROMPTS} samples (epoch 0) the " \
           "history took from a log of this name: recorded them as epoch 1; pass --epoch to number them yourself" \
           in grown.warnings, grown.warnings
    history, logs = read_history(out)
    assert history["epoch"].to_list() == [0] * PROMPTS + [1] * PROMPTS
    assert [(e["rows"], e["rows_kept"]) for e in logs] == [(PROMPTS + 1, PROMPTS)] * 2


def test_a_changed_log_of_a_name_observed_before_is_added_whole_and_said(tmp_path):
    """A log of a name the history holds whose first rows are not the samples taken from it (rewritten by another
    run, or edited) was added beside them without a word where it numbered the same epochs (or none)."""
    out, log = tmp_path / "h.parquet", tmp_path / "asp_lengths.jsonl"
    rows = [{"prompt_id": f"p{i}", "response_tokens": 100 + i} for i in range(6)]
    write_jsonl(log, rows[:4])
    observe([log], out, epoch=0)
    write_jsonl(log, [{**rows[0], "response_tokens": 7}, *rows[1:]])  # its first sample changed
    changed = observe([log], out, append=True)
    assert changed.warnings[0] == (
        f"{log}: its rows do not begin with the 4 samples (epoch 0) the history took from a log of this name (a log "
        "written over, or changed?): all 6 samples added beside those, none replaced; if it is that log rewritten, "
        "rebuild the history with --force from every log, or give each epoch's log its own --epoch")
    assert changed.summary["rows_added"] == 6 and read_history(out)[0].height == 10


def test_more_samples_per_prompt_than_the_schedules_group_names_both_causes(built, tmp_path):  # noqa: F811
    """A log of twice the schedule's samples per prompt in one epoch (a newcomer's verl ran rollout.n=16 on a
    schedule of 8) was taken without a word: said, with the fix, and the history keeps every sample. One epoch's
    log within the group, or two epochs' logs each within it, are not."""
    ids = [f"p{i}" for i in range(PROMPTS)]
    double = write_jsonl(tmp_path / "double.jsonl", [{"prompt_id": p, "response_tokens": 100 + k, "epoch": 0}
                                                     for p in ids for k in range(2 * SAMPLES)])
    result = observe([double], None, schedule=built["schedule"])
    assert result.summary["rows_added"] == 2 * PROMPTS * SAMPLES
    said = [w for w in result.warnings if f"more than samples_per_prompt={SAMPLES} samples in an epoch" in w]
    assert len(said) == 1 and said[0].startswith(f"{PROMPTS:,} prompts have") and said[0].endswith(
        f"remake the schedule with --samples-per-prompt {2 * SAMPLES} (every prompt here has {2 * SAMPLES})")
    epochs = observe([_log(tmp_path / "e0.jsonl", ids, epoch=0), _log(tmp_path / "e1.jsonl", ids, epoch=1)], None,
                     schedule=built["schedule"])
    assert not any("more than samples_per_prompt" in w for w in epochs.warnings)


def test_a_log_of_whole_groups_without_epochs_is_named_a_log_of_several_epochs_first(built, tmp_path):  # noqa: F811
    """A hook's log appended to every epoch (every prompt 2 x the schedule's group, no epoch) was offered only the
    verl rollout.n fix and a parenthesis of epochs: now the log of 2 epochs first, with its fix (--epoch per epoch),
    and --samples-per-prompt last. A count that is no whole number of groups keeps the old words."""
    ids = [f"p{i}" for i in range(PROMPTS)]
    two = write_jsonl(tmp_path / "asp_lengths.jsonl", [{"prompt_id": p, "response_tokens": 100 + k}
                                                       for e in (0, 1) for p in ids for k in range(SAMPLES)])
    result = observe([two], None, schedule=built["schedule"])
    said = [w for w in result.warnings if "more than samples_per_prompt" in w]
    assert len(said) == 1 and said[0] == (
        f"{PROMPTS:,} prompts have more than samples_per_prompt={SAMPLES} samples in an epoch of the logs (a log "
        "without an epoch column counts as one): the history keeps them all; every prompt here has "
        f"{2 * SAMPLES}, 2 x {SAMPLES}, and no sample says its epoch: most often a log of 2 epochs (a rollout hook's "
        "log appended to every epoch, as examples/slime_length_log.py's and openrlhf_length_log.py's are: its first "
        "samples are its first epoch's), or a log given twice (give each once): observe each epoch's samples into a "
        "history with asp observe --append --epoch E after that epoch (this history holds them as one: rebuild it "
        "with --force from each epoch's log, each with its --epoch); where the rollout ran "
        f"{2 * SAMPLES} samples per prompt, remake the schedule with --samples-per-prompt {2 * SAMPLES}")
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"prompt_id": p, "response_tokens": 100 + k}
                                               for p in ids for k in range(SAMPLES + 1)])
    old = [w for w in observe([odd], None, schedule=built["schedule"]).warnings if "more than samples_per_prompt" in w]
    assert len(old) == 1 and "a log of" not in old[0] and old[0].endswith(
        f"remake the schedule with --samples-per-prompt {SAMPLES + 1} (every prompt here has {SAMPLES + 1})")


def test_fewer_samples_than_the_group_are_counted_per_epoch_of_the_scheduled_prompts(built, tmp_path):  # noqa: F811
    """The "fewer than samples_per_prompt" count took every prompt of the logs over all their epochs: prompts the
    schedule lacks (another dataset's, in the same log) were counted, and a prompt whole in one epoch and short in
    the next was not. It counts the scheduled prompts short in an epoch."""
    ids = [f"p{i}" for i in range(PROMPTS)]
    rows = [{"prompt_id": p, "response_tokens": 100 + k, "epoch": 0} for p in ids for k in range(SAMPLES)]
    rows += [{"prompt_id": p, "response_tokens": 100 + k, "epoch": 1} for p in ids[1:] for k in range(SAMPLES)]
    rows += [{"prompt_id": ids[0], "response_tokens": 100 + k, "epoch": 1} for k in range(SAMPLES - 1)]  # short
    rows += [{"prompt_id": other, "response_tokens": 50, "epoch": 0} for other in ("x1", "x2")]  # not scheduled
    result = observe([write_jsonl(tmp_path / "log.jsonl", rows)], None, schedule=built["schedule"])
    assert result.summary["prompts_with_fewer_samples_than_n"] == 1
    assert (f"1 prompt has fewer than samples_per_prompt={SAMPLES} samples in an epoch of the logs (a log without an "
            "epoch column counts as one)") in result.warnings


def test_a_datasets_shards_after_one_dataset_option_are_refused_as_logs_naming_the_fix(tmp_path):
    """A Hugging Face dataset in Parquet shards, given as `--dataset train-*.parquet`: the shell gives --dataset the
    first shard only and the others became logs, and an OpenRLHF newcomer's text log was told "its input matches no
    dataset prompt" (a log of ids, that the shard was a probe to generate first). Each shard with its own --dataset
    is read."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    rows = [{"messages": [{"role": "user", "content": f"What is {i} times {i + 3}?"}], "data_source": "gsm"}
            for i in range(8)]
    shards = [tmp_path / "train-00000-of-00002.parquet", tmp_path / "train-00001-of-00002.parquet"]
    pl.DataFrame(rows[:4]).write_parquet(shards[0])
    pl.DataFrame(rows[4:]).write_parquet(shards[1])
    log = write_jsonl(tmp_path / "asp_lengths.jsonl", [  # examples/openrlhf_length_log.py's lines
        {"input": f"<|im_start|>user\n{row['messages'][0]['content']}<|im_end|>\n<|im_start|>assistant\n",
         "output": "word " * (10 + i)} for i, row in enumerate(reversed(rows))])
    out = tmp_path / "h.parquet"
    result = CliRunner().invoke(app, ["observe", str(log), "-o", str(out), "--dataset", *map(str, shards)])
    assert result.exit_code == 3 and not out.exists()
    assert result.stderr == (
        f"Error: {shards[1]}: a prompt file among the rollout logs (prompts, no response lengths): --dataset takes one "
        f"file, and the files after it are read as logs; repeat it for each prompt file (--dataset {shards[0]} "
        f"--dataset {shards[1]}: a shell glob after --dataset gives it only the first)\n")
    result = CliRunner().invoke(app, ["observe", str(log), "-o", str(out), "--dataset", str(shards[0]),
                                      "--dataset", str(shards[1])])
    assert result.exit_code == 0, result.output
    assert sorted(read_history(out)[0]["prompt_id"].to_list()) == [str(i) for i in range(8)]


def test_a_verl_dump_with_the_datasets_id_as_id_key_is_sent_to_dataset_id_key(tmp_path):
    """`asp observe DIR/*.jsonl --dataset train.parquet --id-key extra_info.index` (the dataset's id, given as the
    log's) was told the verl dump was "a prompt file (the probe's ...)": it says --dataset-id-key names it."""
    dump = write_jsonl(tmp_path / "1.jsonl", [{"input": "user: 2+2?\nassistant:", "output": "4", "gts": "4",
                                               "score": 1.0, "step": 1, "uid": "0b8e9c1e_0_0"}])
    with pytest.raises(InputError) as caught:
        observe([dump], tmp_path / "h.parquet", read=replace(OBSERVE_READ, length_id_key="extra_info.index"))
    message = str(caught.value)
    assert message.startswith(f"{dump}: input/output text without a column 'extra_info', which --id-key "
                              "extra_info.index names")
    assert "--dataset-id-key extra_info.index" in message and "prompt file" not in message


def _text_dump(tmp_path, groups):
    """A verl-style text dump (input, output, score, step) of ``samples`` samples of each ``(text, samples)``."""
    return write_jsonl(tmp_path / "1.jsonl", [{"input": f"user\n{text}\nassistant\n", "output": "w " * (5 + k),
                                               "score": 1, "step": 1}
                                              for text, samples in groups for k in range(samples)])


def test_shortfalls_made_by_spreading_a_shared_text_are_told_apart_from_real_ones(tmp_path):
    """A dump whose prompt text two dataset ids share, of one group of it (the epoch's rollout reached one of them):
    asp spread its 4 samples over both ids, 2 each, and then warned that 2 prompts had fewer than samples_per_prompt
    samples, a shortfall of its own making (the warning before said the samples were spread). Texts whose samples
    make whole groups are said as spread; a group cut short (of a shared text or not) is still a shortfall."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "Same text"},
                                             {"id": "b", "question": "Same text"},
                                             {"id": "c", "question": "Other text"},
                                             {"id": "d", "question": "Third text"},
                                             {"id": "e", "question": "Shared again"},
                                             {"id": "f", "question": "Shared again"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=2, instances=1, samples_per_prompt=4))

    def dump(groups):
        return _text_dump(tmp_path, groups)

    # One group of the shared text, a whole one of c and d: nothing is short.
    result = observe([dump([("Same text", 4), ("Other text", 4), ("Third text", 4)])], None, schedule=sched,
                     dataset=[data])
    assert sorted(result.added.group_by("prompt_id").len().rows()) == [("a", 2), ("b", 2), ("c", 4), ("d", 4)]
    assert result.summary["prompts_with_fewer_samples_than_n"] == 0
    assert result.summary["prompts_uneven_by_spreading"] == 2
    assert not any("have fewer than samples_per_prompt" in w for w in result.warnings), result.warnings
    assert ("2 prompts hold fewer than samples_per_prompt=4 samples only as their text's samples were spread over "
            "the ids that share it (whole groups of it: 1 group over 2 ids); no group was cut short") in result.warnings
    # A group of c cut short, and one of a shared text (3 samples over e and f): both are real shortfalls.
    result = observe([dump([("Same text", 8), ("Other text", 3), ("Third text", 4), ("Shared again", 3)])], None,
                     schedule=sched, dataset=[data])
    assert result.summary["prompts_with_fewer_samples_than_n"] == 3
    assert result.summary["prompts_uneven_by_spreading"] == 0
    assert ("3 prompts have fewer than samples_per_prompt=4 samples in an epoch of the logs (a log without an epoch "
            "column counts as one)") in result.warnings
    assert not any("were spread over the ids" in w for w in result.warnings)


def test_a_group_of_a_shared_text_the_logs_lack_is_counted_as_a_scheduled_prompt_without_samples(tmp_path):
    """Two scheduled ids of one text are two groups of it; a log of one (the rollout reached one id, or one step's
    dump) was said as asp's spreading, "no group was cut short", and counted nowhere: no prompt without samples, none
    short, where before 2026-12-07 both ids read short. The group the logs lack is a scheduled prompt without
    samples, said of the shared text."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "Same text"},
                                             {"id": "b", "question": "Same text"},
                                             {"id": "c", "question": "Other text"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=1, instances=1, samples_per_prompt=4))

    def dump(groups):
        return _text_dump(tmp_path, groups)

    result = observe([dump([("Same text", 4), ("Other text", 4)])], None, schedule=sched, dataset=[data])
    assert result.summary["prompts_uneven_by_spreading"] == 2
    assert result.summary["scheduled_prompts_without_samples"] == 1
    assert ("1 scheduled prompt has no sample in the logs: of a prompt text 2 scheduled ids share, whose samples were "
            "spread over them (1 group of it for 2 ids)") in result.warnings, result.warnings
    # Both groups of it: nothing lacks.
    result = observe([dump([("Same text", 8), ("Other text", 4)])], None, schedule=sched, dataset=[data])
    assert result.summary["scheduled_prompts_without_samples"] == 0
    assert not any("no sample in the logs" in w for w in result.warnings), result.warnings


def test_an_id_of_a_shared_text_without_samples_is_counted_once(tmp_path):
    """One group of a text three scheduled ids share (n = 2) spreads over a and b, 1 each, and leaves c without a
    sample: 2 groups of it lack. c was counted as a scheduled prompt without samples and again among the text's
    lacking groups: "3 scheduled prompts have no sample in the logs (e.g. 'c'); 2 of them of a prompt text ..."."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "question": "Same text"} for i in "abc"]
                       + [{"id": "z", "question": "Other text"}, {"id": "y", "question": "Third text"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=1, instances=1, samples_per_prompt=2))
    result = observe([_text_dump(tmp_path, [("Same text", 2), ("Other text", 2)])], None, schedule=sched,
                     dataset=[data])
    assert sorted(result.added.group_by("prompt_id").len().rows()) == [("a", 1), ("b", 1), ("z", 2)]
    assert result.summary["scheduled_prompts_without_samples"] == 3  # y, and 2 groups of the shared text
    assert ("3 scheduled prompts have no sample in the logs (e.g. 'y'); 2 of them of a prompt text 3 scheduled ids "
            "share, whose samples were spread over them (1 group of it for 3 ids)") in result.warnings, result.warnings


def test_more_groups_of_a_shared_text_than_its_scheduled_ids_are_an_excess_not_spreading(tmp_path):
    """A rollout of 8 samples per prompt on a schedule of 4 (verl's rollout.n=16 on 8, a newcomer's): a text two ids
    share got 16 samples, 8 each, a whole number of groups, so it was said as asp's spreading ("no group was cut
    short") and left out of the more-than-n warning, which counted the other prompts alone. Four groups for two
    scheduled ids is an excess of the rollout's making: warned as the others are."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "Same text"},
                                             {"id": "b", "question": "Same text"},
                                             {"id": "c", "question": "Other text"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=1, instances=1, samples_per_prompt=4))
    dump = write_jsonl(tmp_path / "1.jsonl", [{"input": f"user\n{text}\nassistant\n", "output": "w " * (5 + k),
                                               "score": 1, "step": 1}
                                              for text, samples in (("Same text", 16), ("Other text", 8))
                                              for k in range(samples)])
    result = observe([dump], None, schedule=sched, dataset=[data])
    assert result.summary["prompts_uneven_by_spreading"] == 0
    assert not any("were spread over the ids" in w for w in result.warnings), result.warnings
    assert any(w.startswith("3 prompts have more than samples_per_prompt=4 samples in an epoch of the logs")
               and w.endswith("(every prompt here has 8)") for w in result.warnings), result.warnings


def test_spreading_over_several_dumps_at_an_odd_group_size_is_not_a_shortfall_or_an_excess(tmp_path):
    """Each dump spreads a shared text's samples from its first id: at n = 3, a group of it in each of two step dumps
    left a with 4 and b with 2, warned as one prompt short and one with more than n, both of asp's making."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "question": "Same text"},
                                             {"id": "b", "question": "Same text"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=1, instances=1, samples_per_prompt=3))
    dumps = [write_jsonl(tmp_path / f"{step}.jsonl", [{"input": "user\nSame text\nassistant\n", "output": "w " * (5 + step),
                                                       "score": 1, "step": step}] * 3) for step in (1, 2)]
    result = observe(dumps, None, schedule=sched, dataset=[data])
    assert sorted(result.added.group_by("prompt_id").len().rows()) == [("a", 4), ("b", 2)]
    assert result.summary["prompts_with_fewer_samples_than_n"] == 0
    assert result.summary["prompts_uneven_by_spreading"] == 2
    assert not any("prompts have more than" in w or "prompts have fewer" in w for w in result.warnings), result.warnings
    assert ("2 prompts hold fewer or more than samples_per_prompt=3 samples only as their text's samples were spread "
            "over the ids that share it (whole groups of it: 2 groups over 2 ids); no group was cut short"
            ) in result.warnings


def _steps_dump(path, questions, step, words=10):
    """A v1 dump of one step, as `_dump_rows`, its `step` and output length set."""
    return write_jsonl(path, [dict(r, step=step, output="word " * (words + i % 2))
                              for i, r in enumerate(_dump_rows(questions, uid=True))])


def test_steps_two_dumps_hold_are_said_with_the_samples_counted_twice(built, tmp_path):  # noqa: F811
    """A verl newcomer's round (2026-12-07): a run resumed from global_step_4 into another rollout_data_dir dumps
    steps 5 and 6 again (the restored loader's same prompts); both folders observed together counted those
    samples twice, without a word."""
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:2]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = [_steps_dump(tmp_path / "a" / f"{s}.jsonl", questions, s, words=s) for s in (4, 5, 6)]
    resumed = [_steps_dump(tmp_path / "b" / f"{s}.jsonl", questions, s, words=20 + s) for s in (5, 6, 7)]
    result = observe([*first, *resumed], None, dataset=[built["prompts"]])
    assert result.summary["steps_dumped_twice"] == [5, 6]
    assert (f"steps 5, 6 are in more than one dump (step 5: {first[1]} and {resumed[0]}), so 8 samples count twice: "
            "a verl run resumed from a checkpoint into another trainer.rollout_data_dir dumps the steps after the "
            "checkpoint again") in " ".join(result.warnings)
    # Each step once: nothing said.
    result = observe([first[0], *resumed], None, dataset=[built["prompts"]])
    assert result.summary["steps_dumped_twice"] == [] and not any("more than one dump" in w for w in result.warnings)


def test_answers_of_a_token_or_two_are_not_taken_for_a_cap(built, tmp_path):  # noqa: F811
    """Half the samples at the largest count, 2 tokens (answers of a token or two), were told they were cut at the
    rollout's cap; below 8 tokens no count is taken for one, at 8 it is."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:4]
    read = replace(OBSERVE_READ, tokenizer=tmp_path / "tokenizer.json")
    for words, said in ((1, False), (6, False), (7, True)):  # largest counts 2, 7 and 8
        result = observe([_steps_dump(tmp_path / f"{words}.jsonl", questions, 1, words=words)], None,
                         dataset=[built["prompts"]], read=read)
        assert result.added["response_tokens"].max() == words + 1
        assert any(f"4 of the 8 samples have the largest count, {words + 1} tokens" in w
                   for w in result.warnings) is said, result.warnings


def test_the_rollouts_cap_marks_cut_dump_samples_and_gives_the_others_their_end_token(built, tmp_path):  # noqa: F811
    """A verl newcomer's round (2026-12-07): responses cut at data.max_response_length were recorded as whole
    lengths (truncated null) with nothing to say so, so a next run with a larger cap predicted them as lengths that
    ended there; and every count stayed one short (the end token verl's decode drops), though the cap tells them
    apart."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:4]
    dump = _steps_dump(tmp_path / "1.jsonl", questions, 1)  # 10 and 11 words: 11 is the cap
    read = replace(OBSERVE_READ, tokenizer=tmp_path / "tokenizer.json")
    unsaid = observe([dump], None, dataset=[built["prompts"]], read=read)
    assert unsaid.added["response_tokens"].to_list() == [10, 11] * 4
    assert unsaid.added["truncated"].null_count() == 8
    assert ("4 of the 8 samples have the largest count, 11 tokens: responses cut at the rollout's cap (verl's "
            "data.max_response_length)?") in " ".join(unsaid.warnings)
    result = observe([dump], None, dataset=[built["prompts"]], read=read, max_response_tokens=11)
    assert result.added["response_tokens"].to_list() == [11, 11] * 4
    assert result.added["truncated"].to_list() == [False, True] * 4
    assert result.summary["eos_added"] == 4 and result.summary["eos_short_lengths"] == 0
    assert result.summary["truncated_samples"] == 4
    assert not any("largest count" in w or "1 token short" in w for w in result.warnings)
    with pytest.raises(SettingsError, match="--max-response-tokens"):
        observe([dump], None, dataset=[built["prompts"]], read=read, max_response_tokens=0)
    # Observed before without the cap, a log is not read again: said, with the fix (rebuild with --force).
    observe([dump], tmp_path / "h.parquet", dataset=[built["prompts"]], read=read)
    again = observe([dump], tmp_path / "h.parquet", dataset=[built["prompts"]], read=read, append=True,
                    max_response_tokens=11)
    assert ("--max-response-tokens does not apply to the 1 log already in the history, which was not read again; "
            "to apply it, rebuild the history: observe every log again with --force") in again.warnings


def test_prompts_at_several_steps_of_the_dumps_are_said_to_be_several_epochs(built, tmp_path):  # noqa: F811
    """A verl newcomer's round (2026-12-07): two epochs of dumps (verl's step counts on over epochs) observed at once
    were recorded without an epoch, without a word; asp simulate --lengths later called them a probe given twice."""
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:2]
    dumps = [_steps_dump(tmp_path / f"{s}.jsonl", questions, s, words=s) for s in (1, 2)]
    result = observe(dumps, None, dataset=[built["prompts"]])
    assert result.summary["prompts_at_several_steps"] == 2
    assert ("2 of the 2 prompts of these dumps are at more than one step (e.g. 'p0' at steps 1, 2): verl's step "
            "counts on over epochs, so they hold several epochs' samples, recorded without an epoch") in \
        " ".join(result.warnings)
    told = observe(dumps, None, dataset=[built["prompts"]], epoch=0).warnings
    assert any("several epochs' samples, recorded as epoch 0 (" in w for w in told)
    # Each epoch's steps apart: nothing said.
    one = observe(dumps[:1], None, dataset=[built["prompts"]], epoch=0)
    assert one.summary["prompts_at_several_steps"] == 0 and not any("more than one step" in w for w in one.warnings)



def test_prompts_over_the_group_in_several_epochs_are_counted_once(built, tmp_path):  # noqa: F811
    """The "more than samples_per_prompt" warning counted (prompt, epoch) pairs as prompts: each prompt over the group
    in both epochs of a log was said twice ("2 x PROMPTS prompts have ..." of PROMPTS prompts)."""
    ids = [f"p{i}" for i in range(PROMPTS)]
    rows = [{"prompt_id": p, "response_tokens": 100 + k, "epoch": e} for e in (0, 1) for p in ids
            for k in range(2 * SAMPLES)]
    result = observe([write_jsonl(tmp_path / "log.jsonl", rows)], None, schedule=built["schedule"])
    said = [w for w in result.warnings if f"more than samples_per_prompt={SAMPLES} samples in an epoch" in w]
    assert len(said) == 1 and said[0].startswith(f"{PROMPTS:,} prompts have"), said
    one = observe([write_jsonl(tmp_path / "one.jsonl", rows[:2 * SAMPLES])], None, schedule=built["schedule"])
    assert any(w.startswith(f"1 prompt has more than samples_per_prompt={SAMPLES}") for w in one.warnings), \
        one.warnings


def test_prompts_at_several_steps_are_said_of_the_prompts_counted_with_a_short_id(tmp_path):
    """The several-steps warning showed its example id whole (an id that is a whole prompt made a message of its
    length) and said "N of the M prompts", M counting the ids of a shared text that N leaves out."""
    long_id = "q" * 300
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": long_id, "question": "First text"},
                                             {"id": "a", "question": "Same text"},
                                             {"id": "b", "question": "Same text"}])
    dumps = [write_jsonl(tmp_path / f"{step}.jsonl", [{"input": f"user\n{text}\nassistant\n", "output": "w " * 5,
                                                        "score": 1, "step": step}
                                                       for text in ("First text", "Same text") for _ in range(2)])
             for step in (1, 2)]
    result = observe(dumps, None, dataset=[data])
    assert result.summary["prompts_at_several_steps"] == 1
    said = next(w for w in result.warnings if "at more than one step" in w)
    assert said.startswith(f"1 of the 1 prompts of these dumps are at more than one step (e.g. {'q' * 80!r}... "
                           "(300 characters) at steps 1, 2)"), said


def test_a_spike_below_the_schedules_cap_is_said_as_a_cap_the_run_had(built, tmp_path):  # noqa: F811
    """Observed against a schedule (asp's default cap, 8,192), tokenizer counts of a verl dump cut at the run's own
    cap (here 11 tokens) were kept as whole lengths without a word: the schedule's cap made the warning of a spike
    at the largest count stay silent, though it marked nothing. A spike at the schedule's cap is marked and unsaid."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (the [tokenizer] extra)")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:4]
    dump = _steps_dump(tmp_path / "1.jsonl", questions, 1)  # 10 and 11 words
    read = replace(OBSERVE_READ, tokenizer=tmp_path / "tokenizer.json")
    from asp_cli.schedule_format import read_schedule

    cap = read_schedule(built["schedule"]).settings["max_response_tokens"]
    assert cap > 11
    result = observe([dump], None, schedule=built["schedule"], dataset=[built["prompts"]], read=read,
                     unknown_ids="skip")
    assert (f"4 of the 8 samples have the largest count, 11 tokens, below the schedule's max_response_tokens "
            f"({cap:,}), which marks samples at it truncated: responses cut at the rollout's cap") in \
        " ".join(result.warnings), result.warnings
    given = observe([dump], None, schedule=built["schedule"], dataset=[built["prompts"]], read=read,
                    unknown_ids="skip", max_response_tokens=11)
    assert not any("largest count" in w for w in given.warnings)


def test_steps_the_history_holds_from_a_dump_are_said_when_another_dump_of_them_is_appended(built, tmp_path):  # noqa: F811
    """The resumed run's dumps (steps 5 to 7) appended to the history of the run before (steps 4 to 6) counted steps 5
    and 6 twice without a word, where one `asp observe` of both folders said it; a next epoch's steps (7 on) are no
    step held twice."""
    questions = [json.loads(line)["question"] for line in built["prompts"].read_text().splitlines()][:2]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = [_steps_dump(tmp_path / "a" / f"{s}.jsonl", questions, s, words=s) for s in (4, 5, 6)]
    resumed = [_steps_dump(tmp_path / "b" / f"{s}.jsonl", questions, s, words=20 + s) for s in (5, 6, 7)]
    history = tmp_path / "h.parquet"
    observe(first, history, dataset=[built["prompts"]])
    result = observe(resumed, history, dataset=[built["prompts"]], append=True)
    assert result.summary["steps_dumped_twice"] == [5, 6]
    assert (f"steps 5, 6 are in more than one dump (step 5: the history's 5.jsonl and {resumed[0]}), so 8 samples "
            "count twice") in " ".join(result.warnings), result.warnings
    assert not any("do not begin with" in w for w in result.warnings)  # said once, by step, not again by name
    later = _steps_dump(tmp_path / "b" / "8.jsonl", questions, 8)
    result = observe([later], history, dataset=[built["prompts"]], append=True)
    assert result.summary["steps_dumped_twice"] == [] and not any("more than one dump" in w for w in result.warnings)


def test_the_summary_lists_the_epochs_the_added_rows_were_recorded_as(tmp_path):
    """`epochs_added` (--json): the epochs of the rows added, null for those without one (a probe's), after the
    numbered ones; none where nothing was added."""
    log = write_jsonl(tmp_path / "l.jsonl", [{"prompt_id": "a", "response_tokens": 5, "epoch": 2},
                                             {"prompt_id": "b", "response_tokens": 6},
                                             {"prompt_id": "c", "response_tokens": 7, "epoch": 0}])
    assert observe([log], tmp_path / "h.parquet").summary["epochs_added"] == [0, 2, None]
    assert observe([log], tmp_path / "h.parquet", epoch=4, force=True).summary["epochs_added"] == [4]
    assert observe([log], tmp_path / "h.parquet", append=True).summary["epochs_added"] == []


def test_verl_generation_of_a_probe_made_with_a_nested_id_key_is_read_by_asps_copy_of_the_id(tmp_path):
    """docs/probe.md tells a verl user to name `--id-key extra_info.index` in every command; `asp probe --format
    verl` then writes no id column of its own (the id is inside extra_info, and asp's copy in extra_info.prompt_id),
    and verl's generation output of it was refused: without --id-key as "a prompt file ... generate its responses
    first", and with --id-key extra_info.index as a field inside a column. It is read by extra_info.prompt_id now,
    and the schedule by that --id-key takes every probed length for its own prompt."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.probe import ProbeSettings, probe
    from asp_cli.reading.history_ids import recorded_ids
    from asp_cli.reading.options import ReadOptions
    from asp_cli.settings import ScheduleSettings

    rows = [{"prompt": [{"role": "user", "content": f"What is {i} plus {i * 7}?" + " Think." * (i % 5)}],
             "data_source": "gsm8k", "extra_info": {"index": 500 - i}} for i in range(40)]
    data = tmp_path / "train.parquet"
    pl.DataFrame(rows).write_parquet(data)
    keyed = ReadOptions(id_key="extra_info.index")
    probe([data], tmp_path / "probe.parquet", settings=ProbeSettings(prompts=6), format="verl", read=keyed)
    probed = pl.read_parquet(tmp_path / "probe.parquet")
    assert "prompt_id" not in probed.columns  # no id column of its own
    generated = tmp_path / "probe_gen.parquet"
    probed.with_columns(pl.Series("responses", [["word " * (10 + i)] for i in range(probed.height)])).write_parquet(
        generated)
    observed = observe([generated], tmp_path / "h.parquet")
    assert observed.summary["log_formats"] == {"verl_generations": 1}
    assert observed.summary["columns_used"] == {"probe_gen.parquet": {"id": "extra_info.prompt_id",
                                                                      "length": "responses"}}
    history = read_history(tmp_path / "h.parquet")[0]
    assert sorted(history["prompt_id"]) == sorted(str(r["extra_info"]["index"]) for r in probed.iter_rows(named=True))
    assert recorded_ids(tmp_path / "h.parquet") == []  # asp's copy of whichever id the probe read: nothing to check
    made = schedule([data], None, settings=ScheduleSettings(train_batch_size=8), read=keyed,
                    history=[tmp_path / "h.parquet"])
    assert made.summary["prompts_from_history"] == probed.height
    assert not [w for w in made.warnings if "name prompts by" in w or "prompt ids in --history" in w], made.warnings


def test_epochs_a_schedule_of_several_does_not_hold_are_said(built, tmp_path):  # noqa: F811
    """A log of epoch 5 counted against a schedule of epochs 0 and 1 was taken without a word: its record named this
    schedule's seed for an epoch it never dealt, and `asp simulate --lengths` matches no schedule epoch to it (a
    hostile review, 2026-12-07). Said now; not for an epoch the schedule holds, nor against a one-epoch schedule,
    which is any epoch's (one schedule per epoch, each epoch 0 inside)."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    ids = pl.read_parquet(built["schedule"])["prompt_id"].unique().sort().to_list()
    log = _log(tmp_path / "r.jsonl", ids)

    def said(result) -> list[str]:
        return [w for w in result.warnings if "which the schedule does not hold" in w]

    [warning] = said(observe([log], tmp_path / "h.parquet", schedule=built["schedule"], epoch=5))
    assert warning.startswith("these samples are numbered epoch 5, which the schedule does not hold (epochs 0 to 1)")
    assert said(observe([log], tmp_path / "h1.parquet", schedule=built["schedule"], epoch=1)) == []
    one = schedule([built["prompts"]], tmp_path / "one.parquet",
                   settings=ScheduleSettings(instances=2, samples_per_prompt=SAMPLES, train_batch_size=8,
                                             minibatch_size=8)).output
    assert said(observe([log], tmp_path / "h2.parquet", schedule=one, epoch=5)) == []


def test_verl_generation_output_is_read_by_a_dotted_id_key_as_asp_schedule_reads_it(tmp_path):
    """`asp observe --id-key extra_info.index` of verl's generation output of a verl dataset (its id inside
    extra_info, no asp copy of it) was refused ("--id-key names a column of its own, not a field inside one") where
    `asp schedule --id-key extra_info.index` reads that field, and a rollout log's dotted --id-key was read: each row's
    field is now its id, by schedule's reader (`reading.nested.with_nested_key`), Parquet and JSON lines alike, and
    the schedule by that --id-key takes every length for its own prompt; a path the rows lack is one line naming the
    object's fields."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading.options import ReadOptions
    from asp_cli.settings import ScheduleSettings

    rows = [{"prompt": f"What is {i} plus {i * 7}?", "data_source": "gsm8k",
             "extra_info": {"index": 300 + i, "split": "train"}} for i in range(12)]
    data = write_jsonl(tmp_path / "train.jsonl", rows)
    generated = pl.DataFrame(rows).with_columns(
        pl.Series("responses", [["word " * (10 + i), "word " * (20 + i)] for i in range(12)]))
    keyed = replace(OBSERVE_READ, length_id_key="extra_info.index")
    for log in (tmp_path / "gen.parquet", tmp_path / "gen.jsonl"):
        if log.suffix == ".parquet":
            generated.write_parquet(log)
        else:
            generated.write_ndjson(log)
        observed = observe([log], tmp_path / f"h_{log.suffix[1:]}.parquet", read=keyed)
        assert observed.summary["log_formats"] == {"verl_generations": 1}
        assert observed.summary["columns_used"] == {log.name: {"id": "extra_info.index", "length": "responses"}}
        assert observed.added["prompt_id"].to_list() == [str(300 + i) for i in range(12) for _ in range(2)]
    made = schedule([data], None, settings=ScheduleSettings(train_batch_size=4, samples_per_prompt=2),
                    read=ReadOptions(id_key="extra_info.index"), history=[tmp_path / "h_parquet.parquet"])
    assert made.summary["prompts_from_history"] == 12
    with pytest.raises(InputError) as refused:
        observe([tmp_path / "gen.parquet"], tmp_path / "h_bad.parquet",
                read=replace(OBSERVE_READ, length_id_key="extra_info.idx"))
    assert str(refused.value) == (f"{tmp_path / 'gen.parquet'}: no column 'extra_info.idx' (from --id-key); columns "
                                  "are: prompt, data_source, extra_info, responses; 'extra_info' holds index, split")


def _keyed_dump(tmp_path, extra):
    """A verl legacy dump of 4 prompts, each row with ``extra(i)`` added (a reward extra holding the prompt's id)."""
    return write_jsonl(tmp_path / "keyed.jsonl", [
        {"input": f"user\nWhat is {i}+{i}?\nassistant\n", "output": "w " * (5 + 3 * i), "gts": str(2 * i),
         "score": 1.0, "step": 1, **extra(i)} for i in range(4)])


def test_a_verl_dump_with_id_key_naming_a_column_it_holds_is_counted_from_its_text(tmp_path):
    """A verl dump observed with --id-key (dotted or not) was read as a rollout log and called "a prompt file (the
    probe's ...)": the text-counting path ran only without --id-key. The named column now gives each sample's id,
    and its length is counted from the output text as without --id-key (no --dataset needed to match it)."""
    dataset = write_jsonl(tmp_path / "train.jsonl", [{"question": f"What is {i}+{i}?"} for i in range(4)])
    plain = observe([_keyed_dump(tmp_path, lambda i: {})], None, dataset=[dataset])
    for extra, key in ((lambda i: {"index": i}, "index"), (lambda i: {"extra_info": {"index": i}}, "extra_info.index")):
        result = observe([_keyed_dump(tmp_path, extra)], tmp_path / f"{key}.parquet",
                         read=replace(OBSERVE_READ, length_id_key=key))
        assert result.added.select("prompt_id", "response_tokens").rows() == \
            plain.added.select("prompt_id", "response_tokens").rows() == [("0", 2), ("1", 4), ("2", 6), ("3", 7)]
        assert result.summary["log_formats"] == {"verl_legacy_dump": 1}
        assert result.summary["columns_used"]["keyed.jsonl"] == {"id": key, "length": "output"}
        assert result.summary["estimated_lengths"] == 4
    # An input/output log (OpenRLHF's) with an id column of its own, named: no dump columns needed either.
    log = write_jsonl(tmp_path / "oai.jsonl", [{"input": "q", "output": "w " * 8, "prompt_id": "0"}])
    assert observe([log], None, read=replace(OBSERVE_READ, length_id_key="prompt_id")).added.rows()[0][:2] == ("0", 4)


def test_a_verl_dump_with_id_key_naming_verls_own_column_is_refused_in_one_line(tmp_path):
    """--id-key uid (the v1 trainer's trajectory keys), step, input, ...: none is a prompt id, and each was told it
    was "a prompt file"; a bad id in a named column is a bad row naming it."""
    v1 = _keyed_dump(tmp_path, lambda i: {"uid": f"0b8e9c1e-1111-2222-3333-444455556666_{i}_0"})
    for key, what in (("uid", "'uid', the v1 trainer's trajectory keys"), ("step", "'step', the training step")):
        with pytest.raises(InputError) as caught:
            observe([v1], None, read=replace(OBSERVE_READ, length_id_key=key))
        assert str(caught.value) == (
            f"{v1}: --id-key {key} names {what} verl writes into every rollout dump, not a prompt id; drop --id-key: "
            "a dump of text is matched to the --dataset's prompts (their id column: --dataset-id-key)")
    own_uid = _keyed_dump(tmp_path, lambda i: {"uid": f"p{i}"})  # not trajectory keys: a log's own prompt ids
    assert observe([own_uid], None, read=replace(OBSERVE_READ, length_id_key="uid")).added["prompt_id"][0] == "p0"
    holed = _keyed_dump(tmp_path, lambda i: {"index": None if i == 2 else i})
    with pytest.raises(InputError, match=r"keyed\.jsonl:3: column 'index' \(the id\) is missing"):
        observe([holed], None, read=replace(OBSERVE_READ, length_id_key="index"))
    skipped = observe([holed], None, read=replace(OBSERVE_READ, length_id_key="index", on_bad_row="skip"))
    assert skipped.added["prompt_id"].to_list() == ["0", "1", "3"] and skipped.summary["bad_rows"] == 1


def test_one_unknown_row_is_said_in_the_singular(tmp_path):
    """`asp observe`'s unknown-id warning, refusal and E67 said '1 rows (1 ids, ...) name prompts' and 'all 1 rows
    were left out because their prompt ids (1 ids, ...) are'."""
    dataset = write_jsonl(tmp_path / "ds.jsonl", [{"id": f"p{i}", "prompt": f"q{i}"} for i in range(3)])
    log = write_jsonl(tmp_path / "log.jsonl", [{"id": "p0", "response_length": 5}, {"id": "p1", "response_length": 6},
                                               {"id": "zz", "response_length": 7}])
    result = observe([log], None, dataset=[dataset])
    assert "1 row (1 id, e.g. 'zz') names a prompt the dataset does not hold; left out" in result.warnings[0]
    with pytest.raises(InputError, match=r"^1 row \(1 id, first 'zz'\) names a prompt the dataset does not hold"):
        observe([log], None, dataset=[dataset], unknown_ids="error")
    lone = write_jsonl(tmp_path / "lone.jsonl", [{"id": "zz", "response_length": 7}])
    with pytest.raises(InputError, match=r"^nothing to write: the one row was left out because its prompt id \('zz'\) "
                                         r"is not in the dataset"):
        observe([lone], tmp_path / "h.parquet", dataset=[dataset])
    mostly = write_jsonl(tmp_path / "mostly.jsonl", [{"id": "p0", "response_length": 5},
                                                     {"id": "zz", "response_length": 7},
                                                     {"id": "zz", "response_length": 8}])
    with pytest.raises(InputError, match=r"mostly\.jsonl: 2 of its 3 rows \(1 id, e\.g\. 'zz'\) name no prompt .* "
                                         r"keep only the 1 matched row$"):
        observe([mostly], None, dataset=[dataset])


def test_a_dataset_without_an_id_column_whose_rows_hold_one_is_said_where_no_schedule_names_it(tmp_path):
    """An OpenRLHF newcomer's round (2026-12-07): a text log observed with --dataset (as the docs said) of a slime-
    layout file whose ids are `metadata.uid` named its prompts by row number, and the schedule made with --id-key
    metadata.uid (which asp schedule's warning offers) took none of it, without a word from observe."""
    from asp_cli import ScheduleSettings, schedule
    from asp_cli.reading.options import ReadOptions

    rows = [{"prompt": f"question {i} " * (i + 1), "metadata": {"uid": f"u{i}"}} for i in range(4)]
    dataset = write_jsonl(tmp_path / "ds.jsonl", rows)
    log = write_jsonl(tmp_path / "log.jsonl", [{"input": f"<user> {r['prompt']} <assistant>", "output": "a b c d"}
                                               for r in rows])
    said = [w for w in observe([log], None, dataset=[dataset]).warnings if "has no id column" in w]
    assert said == ["ds.jsonl has no id column, so this history names its prompts by row number, as a schedule made "
                    "without --id-key does; its rows hold metadata.uid: where the schedule was made with --id-key "
                    "metadata.uid, observe with --dataset-id-key metadata.uid or with --schedule SCHEDULE (which reads "
                    "the id column it was made with), else its asp schedule --history takes none of these lengths"]
    keyed = observe([log], None, dataset=[dataset], read=replace(OBSERVE_READ, id_key="metadata.uid"))
    assert not any("has no id column" in w for w in keyed.warnings) and keyed.added["prompt_id"][0] == "u0"
    made = schedule([dataset], tmp_path / "s.parquet", read=ReadOptions(id_key="metadata.uid"),
                    settings=ScheduleSettings(instances=1, train_batch_size=2, samples_per_prompt=1))
    by_schedule = observe([log], None, dataset=[dataset], schedule=tmp_path / "s.parquet")
    assert made.frame.height == 4 and not any("has no id column" in w for w in by_schedule.warnings)
    assert sorted(by_schedule.added["prompt_id"].to_list()) == ["u0", "u1", "u2", "u3"]


def test_one_prompt_over_the_group_or_past_the_cap_is_said_in_the_singular(built, tmp_path):  # noqa: F811
    """'epoch 0: 1 prompts now hold more samples ... of them' and '1 samples are longer than ...' (counts of one, a
    slime newcomer's round)."""
    ids = [f"p{i}" for i in range(PROMPTS)]
    out = tmp_path / "h.parquet"
    observe([_log(tmp_path / "e0.jsonl", ids)], out, schedule=built["schedule"], epoch=0)
    again = observe([_log(tmp_path / "one.jsonl", ids[:1], tokens=150)], out, append=True,
                    schedule=built["schedule"], epoch=0)
    said = [w for w in again.warnings if w.startswith("epoch 0:")]
    assert said and said[0].startswith(f"epoch 0: 1 prompt now holds more samples than the schedule's {SAMPLES} per "
                                       f"prompt (up to {2 * SAMPLES}): the history held this epoch's samples of it "
                                       "already"), said
    long = write_jsonl(tmp_path / "long.jsonl", [{"prompt_id": "p0", "response_tokens": 10 ** 6}])
    over = observe([long], None, schedule=built["schedule"], epoch=0)
    assert any(w.startswith("1 sample is longer than the schedule's max_response_tokens (") for w in over.warnings), \
        over.warnings
