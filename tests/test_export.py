"""Export: the dataset's rows in schedule order, its formats, and its checks against the schedule."""

from __future__ import annotations

import json
import math
import re

import polars as pl
import pytest
from _schedules import BATCH, EPOCHS, PROMPTS, built  # noqa: F401 - fixture
from util import make_prompts, write_jsonl

from asp_cli.errors import InputError, OutputError, SettingsError
from asp_cli.integrate.export import export
from asp_cli.integrate.replay import open_schedule
from asp_cli.settings import ScheduleSettings


@pytest.mark.parametrize("name, fmt, words", [
    ("o.csv", "parquet", "--format parquet writes Parquet, but the name ends in '.csv'; name it .parquet"),
    ("o.jsonl", "parquet", "name it .parquet or pass --format jsonl"),
    ("o.parquet", "jsonl", "--format jsonl writes JSON lines, but the name ends in '.parquet'"),
    ("o", "verl", "but the name has no extension"),
    # it said "ends in '(no extension)'"
    ("o", "jsonl", "--format jsonl writes JSON lines, but the name has no extension; name it .jsonl"),
    (".jsonl", "jsonl", "names a hidden file with no extension; name it e.g. out.jsonl"),  # it said "name it .jsonl"
    # `-o -` is no standard output (it said "the name has no extension")
    ("-", "jsonl", "'-' is not standard output here: this output is written as a file, atomically (beside it, then "
                   "renamed into place), not to stdout; name a file, e.g. out.jsonl"),
])
def test_output_name_must_match_the_format(built, tmp_path, monkeypatch, name, fmt, words):  # noqa: F811
    """`-o ordered.jsonl` without --format wrote Parquet bytes into a .jsonl file, silently."""
    monkeypatch.chdir(tmp_path)  # the names as given on a command line (`-o -`)
    with pytest.raises(SettingsError, match=re.escape(words)):
        export(built["schedule"], [built["prompts"]], name, format=fmt)
    assert list(tmp_path.iterdir()) == []


def test_parquet_export_is_the_dataset_in_seq_order(built, tmp_path):  # noqa: F811
    out = tmp_path / "ordered.parquet"
    result = export(built["schedule"], [built["prompts"]], out)
    frame = pl.read_parquet(out)
    schedule = open_schedule(built["schedule"]).frame
    assert frame.height == PROMPTS * EPOCHS
    assert frame["id"].to_list() == schedule["prompt_id"].to_list()
    assert frame["seq"].to_list() == list(range(frame.height))
    for column in ("question", "data_source", "answer", "epoch", "instance", "minibatch", "train_step"):
        assert column in frame.columns
    assert result.order == "dispatch" and result.trainer_settings == {}


def test_verl_export_has_the_rlhf_dataset_columns(built, tmp_path):  # noqa: F811
    out = tmp_path / "train.parquet"
    result = export(built["schedule"], [built["prompts"]], out, format="verl")
    frame = pl.read_parquet(out)
    assert frame.columns[:5] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    first = frame.row(0, named=True)
    assert first["prompt"] == [{"role": "user", "content": first["question"]}]
    assert first["reward_model"] == {"style": "rule", "ground_truth": first["answer"]}
    assert first["extra_info"]["prompt_id"] == first["id"]
    assert first["extra_info"]["index"] == int(first["id"][1:])
    assert set(frame["data_source"].unique().to_list()) == {"a", "b"}
    assert result.order == "train"
    assert result.trainer_settings["data.shuffle"] is False
    assert result.trainer_settings["data.train_batch_size"] == BATCH
    assert result.trainer_settings["trainer.total_epochs"] == 1
    # Rows follow the training steps; the trailing partial batch is announced.
    steps = frame["train_step"].to_list()
    assert all(steps[i * BATCH] >= steps[(i - 1) * BATCH] for i in range(1, len(steps) // BATCH))
    assert result.summary["trailing_rows"] == (PROMPTS * EPOCHS) % BATCH
    # Short prompts: verl's default prompt limit holds them, so nothing is said about it.
    assert not any("max_prompt_length" in w for w in result.warnings)
    one = export(built["schedule"], [built["prompts"]], None, format="verl", epoch=0)
    assert one.summary["trailing_rows"] == PROMPTS % BATCH > 0
    assert any("drop_last" in w for w in one.warnings)
    # One schedule epoch per file: verl's default of 30 epochs would replay it thirty times.
    assert one.trainer_settings["trainer.total_epochs"] == 1
    assert any(f"--train-batch-size that divides its {PROMPTS} rows" in w for w in one.warnings)


def test_verl_export_keeps_a_verl_dataset_as_it_is(tmp_path):
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading import ReadOptions
    from asp_cli.settings import ScheduleSettings

    rows = [
        {"data_source": "gsm", "prompt": [{"role": "user", "content": f"q{i} " * (i + 1)}], "ability": "math",
         "reward_model": {"style": "rule", "ground_truth": str(i)}, "extra_info": {"index": i, "split": "x"}}
        for i in range(20)
    ]
    data = write_jsonl(tmp_path / "verl.jsonl", rows)
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=5))
    result = export(sched, [data], tmp_path / "out.parquet", format="verl")
    frame = pl.read_parquet(tmp_path / "out.parquet")
    by_index = {r["extra_info"]["index"]: r for r in frame.iter_rows(named=True)}
    for i, row in enumerate(rows):
        got = by_index[i]
        assert got["prompt"] == row["prompt"] and got["reward_model"] == row["reward_model"]
        assert got["extra_info"]["split"] == "x" and got["ability"] == "math" and got["data_source"] == "gsm"
        # The user's extra_info gains the schedule's prompt id (here the row number: no id column), which the
        # rollout logs fed back to `asp observe` carry; before, it was kept without one.
        assert got["extra_info"]["prompt_id"] == str(i)
    assert result.summary["trailing_rows"] == 0
    # verl's own datasets keep their id in extra_info.index: `--id-key extra_info.index` reads it (Parquet too).
    pl.read_ndjson(data).with_columns(pl.col("extra_info").struct.with_fields(
        (pl.col("extra_info").struct.field("index") + 100).alias("index"))).write_parquet(tmp_path / "verl.parquet")
    indexed = tmp_path / "i.parquet"
    schedule([tmp_path / "verl.parquet"], indexed, settings=ScheduleSettings(
        instances=2, samples_per_prompt=2, train_batch_size=5), read=ReadOptions(id_key="extra_info.index"))
    assert sorted(pl.read_parquet(indexed)["prompt_id"].to_list(), key=int) == [str(100 + i) for i in range(20)]
    out = export(indexed, [tmp_path / "verl.parquet"], None, format="verl").frame
    assert all(r["extra_info"]["prompt_id"] == str(r["extra_info"]["index"]) for r in out.iter_rows(named=True))


@pytest.mark.parametrize("column, rows, words", [
    ("reward_model", [{"style": "rule", "ground_truth": "2"}, {"style": "rule", "ground_truth": 4}],
     "holds objects whose field 'ground_truth' is text in some rows and a number in others"),
    ("extra_info", [{"index": 0, "tools_kwargs": {"calc": {"x": 1}}}, {"index": 1, "tools_kwargs": {"calc": "x"}}],
     "holds objects whose field 'tools_kwargs.calc' is an object in some rows and text in others"),
    ("reward_model", ["rule", {"style": "rule", "ground_truth": "4"}], "is text in some rows and an object in others"),
])
def test_verl_export_refuses_objects_of_mixed_kinds_it_would_drop(tmp_path, column, rows, words):
    """A hostile-input audit: a JSON-lines dataset whose ground truths were text in one row and a number in another
    (the reader keeps such a column as JSON text) exported to verl with every ground truth null, `extra_info`
    rebuilt, and a warning that the dataset had no answer column (exit 0). The probe's verl layout is the same."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.probe import probe
    from asp_cli.settings import ScheduleSettings

    data = write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "question": "What is 1+1?", column: rows[0]},
                                                 {"id": "b", "question": "What is 2+2?", column: rows[1]}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    with pytest.raises(InputError, match=re.escape(f"data.jsonl: column {column!r} {words}, which verl's layout")):
        export(sched, [data], tmp_path / "v.parquet", format="verl")
    assert not (tmp_path / "v.parquet").exists()
    with pytest.raises(InputError, match=re.escape(f"column {column!r} ")):
        probe([data], tmp_path / "p.parquet", format="verl")
    export(sched, [data], tmp_path / "v.jsonl", format="jsonl")  # JSON lines keep each row's own objects
    assert [json.loads(line)[column] for line in (tmp_path / "v.jsonl").read_text().splitlines()] == rows


def test_a_dataset_line_that_is_not_json_is_skipped_as_scheduling_skipped_it(tmp_path):
    """export had no --on-bad-row, yet a malformed line stopped it with advice to pass --on-bad-row skip."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading import ReadOptions
    from asp_cli.settings import ScheduleSettings

    rows = make_prompts(12)
    lines = [json.dumps(row) for row in rows]
    lines.insert(5, '{"id": "broken", "question": ')
    data = tmp_path / "p.jsonl"
    data.write_text("\n".join(lines) + "\n")
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=4),
             read=ReadOptions(on_bad_row="skip"))
    out = tmp_path / "o.jsonl"
    result = export(sched, [data], out, format="jsonl")
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["id"] for row in exported) == sorted(row["id"] for row in rows)
    assert {row["id"]: row["question"] for row in exported} == {row["id"]: row["question"] for row in rows}
    assert any("skipped 1 unreadable line of the dataset, e.g." in w and "p.jsonl:6" in w for w in result.warnings)


def test_jsonl_export_and_one_epoch(built, tmp_path):  # noqa: F811
    out = tmp_path / "ordered.jsonl"
    result = export(built["schedule"], [built["prompts"]], out, format="jsonl", epoch=1, order="train")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == PROMPTS
    assert {line["epoch"] for line in lines} == {1}
    expected = open_schedule(built["schedule"]).trainer_order(epoch=1)["prompt_id"].to_list()
    assert [line["id"] for line in lines] == expected
    assert result.summary["epochs"] == [1]


def test_mismatched_dataset_names_the_id(built, tmp_path):  # noqa: F811
    rows = make_prompts(PROMPTS)
    rows[3]["id"] = "intruder"
    other = write_jsonl(tmp_path / "other.jsonl", rows)
    # The row is counted from 1 within its file, as its lines are (docs/errors.md, E07).
    with pytest.raises(InputError, match=r"other\.jsonl row 4 has prompt id 'intruder' .* \(1 row differs\)"):
        export(built["schedule"], [other], tmp_path / "o.parquet")
    short = write_jsonl(tmp_path / "short.jsonl", make_prompts(50))
    with pytest.raises(InputError, match=r"short\.jsonl row 51: .*\(50 readable rows\)"):
        export(built["schedule"], [short], tmp_path / "o.parquet")
    single = write_jsonl(tmp_path / "single.jsonl", make_prompts(1))  # it read "(1 readable rows)"
    with pytest.raises(InputError, match=r"single\.jsonl row 2: .*\(1 readable row\) has no usable prompt"):
        export(built["schedule"], [single], tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


def test_a_mismatch_in_a_second_file_names_that_file_and_its_line(tmp_path):
    """With several dataset files the error names the file that holds the wrong row and its row there (from 1),
    not a row counted over all of them; an unusable row says what is wrong in its file (the reader's own error);
    a prompt column the user did not name is said to be the schedule's."""
    first = write_jsonl(tmp_path / "g1.jsonl", [{"id": "a", "question": "hi"}, {"id": "b", "question": "yo"}])
    second = write_jsonl(tmp_path / "g2.jsonl", [{"id": "c", "question": "hi"}, {"id": "d", "question": "yo"}])
    schedule = tmp_path / "s.parquet"
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    done = CliRunner().invoke(app, ["schedule", str(first), str(second), "-o", str(schedule), "-q"])
    assert done.exit_code == 0, done.output
    wrong = write_jsonl(tmp_path / "b2.jsonl", [{"id": "c", "question": "hi"}, {"id": "X", "question": "yo"}])
    with pytest.raises(InputError, match=r"^\S*b2\.jsonl row 2 has prompt id 'X' but the schedule expects 'd'"):
        export(schedule, [first, wrong], tmp_path / "o.parquet")
    # another, shorter file (a probe of the dataset): its first row that differs is named, not a row past its end
    short = write_jsonl(tmp_path / "probe.jsonl", [{"id": "b", "question": "yo"}])
    with pytest.raises(InputError, match=r"^\S*probe\.jsonl row 1 has prompt id 'b' but the schedule expects 'a'"):
        export(schedule, [short], None)
    latin = tmp_path / "l4.jsonl"
    latin.write_bytes(b'{"id": "c", "question": "ok"}\n{"id": "d", "question": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"l4\.jsonl row 2: .*no usable prompt there \(that file's first unreadable line: "
                                         r"\S*l4\.jsonl:2: not valid UTF-8"):
        export(schedule, [first, latin], tmp_path / "o.parquet")
    keyless = write_jsonl(tmp_path / "nop.jsonl", [{"text": "x"}, {"text": "y"}])
    with pytest.raises(InputError, match=r"no column 'question' \(the prompt column the schedule was made with; "
                                         r"pass --prompt-key"):
        export(schedule, [first, keyless], tmp_path / "o.parquet")
    assert not (tmp_path / "o.parquet").exists()


def test_the_schedules_ids_in_another_order_are_told_the_file_the_schedule_was_made_from(tmp_path):
    """A dataset holding exactly the schedule's prompt ids in another order is the right prompts in the wrong order:
    an earlier export (in the schedule's order) given back to export was told only that its rows differ (3,540 of
    the sample's, a newcomer's round). The one-line error says so and names the file the schedule records; where
    that file itself was reordered, it says so; a dataset of other ids keeps the plain error. Exit 3 as before."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    rows = make_prompts(40)
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    schedule = tmp_path / "s.parquet"
    done = CliRunner().invoke(app, ["schedule", str(data), "-o", str(schedule), "-q", "--train-batch-size", "8",
                                    "--minibatch-size", "4"])
    assert done.exit_code == 0, done.output
    ordered = tmp_path / "ordered.jsonl"
    export(schedule, [data], ordered, format="jsonl", order="train")
    again = CliRunner().invoke(app, ["export", str(schedule), str(ordered), "-o", str(tmp_path / "re.jsonl"),
                                     "--format", "jsonl", "--order", "train"])
    assert again.exit_code == 3 and again.stderr.count("\n") == 1, again.stderr
    assert re.fullmatch(
        rf"Error: \S*ordered\.jsonl row \d+ has prompt id '\w+' but the schedule expects '\w+': the dataset holds the "
        rf"schedule's 40 prompt ids in another order \(an earlier export\?\); export from {re.escape(str(data))}, "
        r"the file the schedule was made from \(export writes the schedule's own order itself\)\n", again.stderr)
    assert not (tmp_path / "re.jsonl").exists()
    write_jsonl(data, rows[::-1])  # the original itself, reordered in place
    with pytest.raises(InputError, match=rf"in another order; {re.escape(str(data))} was reordered after the "
                                         r"schedule was made from it: restore its order, or make the schedule again"):
        export(schedule, [data], None)
    fewer = write_jsonl(tmp_path / "fewer.jsonl", rows[1:])
    with pytest.raises(InputError, match=r"expects 'p0' \(39 rows differ\); export with the file\(s\) the schedule "
                                         r"was made from, in the same order$"):
        export(schedule, [fewer], None)


def test_an_export_of_several_epochs_given_back_is_told_the_file_the_schedule_was_made_from(tmp_path):
    """A multi-epoch export given back to `asp export` as the dataset holds each prompt once an epoch: it was told
    "duplicate prompt id ... pass --id-key" (E07), advice that cannot help. It is told, as a single epoch's export
    is, to export from the file the schedule was made from; a dataset of its own repeated ids keeps E07."""
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    rows = make_prompts(40)
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    schedule = tmp_path / "s.parquet"
    done = CliRunner().invoke(app, ["schedule", str(data), "-o", str(schedule), "-q", "--epochs", "2",
                                    "--train-batch-size", "8", "--minibatch-size", "4"])
    assert done.exit_code == 0, done.output
    for name, format in [("e.parquet", "parquet"), ("e.jsonl", "jsonl"), ("v.parquet", "verl")]:
        exported = tmp_path / name
        export(schedule, [data], exported, format=format)
        again = CliRunner().invoke(app, ["export", str(schedule), str(exported), "-o", str(tmp_path / "re.parquet")])
        assert again.exit_code == 3 and again.stderr.count("\n") == 1, again.stderr
        assert again.stderr == (f"Error: {exported}: an asp export (its rows repeat each prompt, once an epoch), not "
                                f"the prompt file(s) the schedule was made from; export from {data}, the file the "
                                "schedule was made from (export writes the schedule's own order itself)\n")
        assert not (tmp_path / "re.parquet").exists()
    twice = write_jsonl(tmp_path / "twice.jsonl", rows + rows)
    with pytest.raises(InputError, match=r"^duplicate prompt id 'p0' .*pass another --id-key"):
        export(schedule, [twice], None)



def test_an_export_of_one_epoch_without_ids_given_back_is_named_as_an_export(tmp_path):
    """One epoch's export of a dataset without ids, written with --metadata-key (its schedule's ids in that object),
    given back to `asp export` as the dataset is read by row numbers: it was told to "give the file it was made from,
    or schedule this one", and scheduling it is refused (E102). It is named as an export, with the file the schedule
    was made from, as one of several epochs is."""
    from asp_cli.arrange.pipeline import schedule

    data = write_jsonl(tmp_path / "bare.jsonl", [{"prompt": row["question"]} for row in make_prompts(16)])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2))
    exported = tmp_path / "e.jsonl"
    export(sched, [data], exported, format="jsonl", metadata_key="asp_meta")
    with pytest.raises(InputError) as caught:
        export(sched, [exported], None, format="jsonl")
    assert str(caught.value) == (f"{exported}: an asp export (its rows are a dataset's prompts in a schedule's order, "
                                 "with asp's columns added), not the prompt file(s) the schedule was made from; export "
                                 f"from {data}, the file the schedule was made from (export writes the schedule's own "
                                 "order itself)")


def test_column_clash_needs_a_prefix(built, tmp_path):  # noqa: F811
    rows = make_prompts(PROMPTS)
    for row in rows:
        row["epoch"] = 9
    data = write_jsonl(tmp_path / "clash.jsonl", rows)
    with pytest.raises(InputError, match="--prefix asp_"):
        export(built["schedule"], [data], tmp_path / "o.parquet")
    export(built["schedule"], [data], tmp_path / "o.parquet", prefix="asp_")
    frame = pl.read_parquet(tmp_path / "o.parquet")
    assert frame["epoch"].unique().to_list() == [9] and "asp_epoch" in frame.columns
    # The prefix given clashes too: another one is the advice (it said "pass --prefix asp_", the one given).
    clash = write_jsonl(tmp_path / "clash2.jsonl", [{**row, "asp_epoch": 1} for row in rows])
    with pytest.raises(InputError, match=r"pass another --prefix than 'asp_' \(asp's columns would be asp_epoch"):
        export(built["schedule"], [clash], None, prefix="asp_")


def test_output_rules_and_determinism(built, tmp_path):  # noqa: F811
    out = tmp_path / "o.parquet"
    export(built["schedule"], [built["prompts"]], out, format="verl")
    first = out.read_bytes()
    with pytest.raises(OutputError, match="--force"):
        export(built["schedule"], [built["prompts"]], out, format="verl")
    export(built["schedule"], [built["prompts"]], out, format="verl", force=True)
    assert out.read_bytes() == first
    with pytest.raises(OutputError):
        export(built["schedule"], [built["prompts"]], built["prompts"], force=True)
    with pytest.raises(SettingsError, match="--format"):
        export(built["schedule"], [built["prompts"]], None, format="csv")
    with pytest.raises(SettingsError, match="no epoch 7"):
        export(built["schedule"], [built["prompts"]], None, epoch=7)
    assert not list(tmp_path.glob(".*asp-tmp*"))


def test_verl_export_lays_batches_out_for_verls_workers(built, tmp_path):  # noqa: F811
    """The default is verl 0.9's 8 agent-loop workers and its cut of the prompts; 0.7 cuts the repeated batch."""
    replay = open_schedule(built["schedule"])
    default = export(built["schedule"], [built["prompts"]], None, format="verl")
    assert default.summary["workers"] == 8 and default.summary["chunking"] == "v1"
    assert default.summary["worker_prompts"] == [2] * 8
    assert default.trainer_settings["actor_rollout_ref.rollout.agent.num_workers"] == 8
    assert default.frame["id"].to_list() == replay.trainer_order(workers=8)["prompt_id"].to_list()
    # verl then generates 8 chunks a batch, not the schedule's minibatches on its instances: said, with both fixes.
    assert replay.instances != 8
    mismatch = [w for w in default.warnings if "agent-loop workers" in w and "planned for" in w]
    assert len(mismatch) == 1 and f"pass --workers {replay.instances}" in mismatch[0]
    assert "make the schedule with --instances 8" in mismatch[0]
    matched = export(built["schedule"], [built["prompts"]], None, format="verl", workers=replay.instances)
    assert not any("agent-loop workers" in w and "planned for" in w for w in matched.warnings)
    # The fixture was planned for blocking calls; verl rolls out on servers that refill: said, with the fix.
    (engine,) = [w for w in matched.warnings if "planned for the continuous engine" in w]
    assert "make the schedule with --engine streaming" in engine
    assert matched.trainer_settings["data.max_response_length"] == replay.schedule.recorded_settings.max_response_tokens
    # 16 prompts on 7 workers: chunks of 3, so the 7th worker idles (verl's TensorDict.chunk).
    seven = export(built["schedule"], [built["prompts"]], None, format="verl", workers=7)
    assert seven.summary["worker_prompts"] == [3, 3, 3, 3, 3, 1, 0]
    assert any("1 of the 7 agent-loop workers get no prompt" in w for w in seven.warnings)
    # verl 0.7: 16 x 4 = 64 samples do not split into 3 equal chunks, which DataProto.chunk refuses.
    old = export(built["schedule"], [built["prompts"]], None, format="verl", workers=3, verl_version="0.7")
    assert old.summary["chunking"] == "legacy" and old.summary["worker_prompts"] == [6, 5, 5]
    assert any("DataProto.chunk asserts" in w for w in old.warnings)
    assert old.frame["id"].to_list() == replay.trainer_order(workers=3, chunking="legacy")["prompt_id"].to_list()
    plain = export(built["schedule"], [built["prompts"]], None, format="jsonl", order="train")
    assert plain.summary["workers"] == replay.instances and "verl_version" not in plain.summary
    with pytest.raises(SettingsError, match="--verl-version"):
        export(built["schedule"], [built["prompts"]], None, format="verl", verl_version="1.0")


def test_a_batch_holding_a_prompt_twice_is_warned_about(built, monkeypatch):  # noqa: F811
    """A schedule for a trainer that takes groups as they finish lets epochs overlap: on a 14,829-prompt mix one
    verl batch held a prompt of epoch 0 and the same prompt of epoch 1."""
    import asp_cli.integrate.export as module
    from asp_cli.integrate.export import batches_repeating_a_prompt

    rows = pl.DataFrame({"trainer_batch": [0, 0, 1, 1, 2, 2, 2], "row": [1, 2, 3, 3, 4, 5, 4]})
    assert batches_repeating_a_prompt(rows) == [1, 2]
    clean = export(built["schedule"], [built["prompts"]], None, format="verl")
    assert clean.summary["batches_repeating_a_prompt"] == 0
    assert not any("hold a prompt twice" in w for w in clean.warnings)
    monkeypatch.setattr(module, "batches_repeating_a_prompt", lambda rows: [7])
    overlapping = export(built["schedule"], [built["prompts"]], None, format="verl")
    assert overlapping.summary["batches_repeating_a_prompt"] == 1
    # 120 prompts do not fill whole batches of 16: that is the cause the warning names.
    assert any("1 training batch(es) hold a prompt twice (the first: batch 7): an epoch's 120 prompts do not fill "
               "whole batches of 16" in w and "divides 120" in w for w in overlapping.warnings)


def test_a_synchronous_schedule_whose_epochs_do_not_fill_batches_names_that_cause(tmp_path):
    """The review's case: 50 prompts in batches of 32 over 3 epochs, made for a synchronous trainer: batches at
    the epoch boundaries repeat prompts, and the advice was to make the schedule the way it was made."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(50))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=3, max_lag=0,
                                                       trainer="schedule", arrangement="per-step"))
    result = export(out, [prompts], None, format="verl")
    repeats = [w for w in result.warnings if "hold a prompt twice" in w]
    assert result.summary["batches_repeating_a_prompt"] >= 1 and len(repeats) == 1
    assert "an epoch's 50 prompts do not fill whole batches of 32" in repeats[0]
    assert "--max-lag 0 --trainer schedule" not in repeats[0]


def test_batches_shifted_by_an_epochs_partial_step_say_how_to_keep_them_aligned(tmp_path):
    # A synchronous schedule keeps each epoch's steps (per-step): 50 prompts in steps of 32 end each epoch in a
    # partial step, and every later verl batch of 32 rows is cut across the schedule's steps.
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(50))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=2, max_lag=0,
                                                       trainer="schedule", arrangement="per-step"))
    whole = export(out, [prompts], None, format="verl")
    shifted = [w for w in whole.warnings if "mix rows the schedule expects in different steps" in w]
    assert len(shifted) == 1 and whole.summary["batches_spanning_steps"] > 0
    assert shifted[0].endswith("an epoch's 50 prompts end in a partial step, which shifts every later batch: export "
                               "one epoch at a time (--epoch), or schedule with a --train-batch-size that divides 50 "
                               "(e.g. 25 or 50; a different batch size changes the number of steps, so compare with "
                               "asp simulate; or keep 32 of the prompts, 1 batch of 32)")
    one = export(out, [prompts], None, format="verl", epoch=1)
    assert not any("end in a partial step" in w for w in one.warnings)


def test_verl_export_names_the_prompt_limit_a_long_prompt_needs(tmp_path):
    """The note about verl's prompt limit came with every export; now only when a prompt is over verl's default
    data.max_prompt_length (its dataset raises on one), with the limit to set."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.export import VERL_DEFAULT_MAX_PROMPT_TOKENS
    from asp_cli.settings import ScheduleSettings

    rows = make_prompts(16)
    rows[5]["question"] = "why " * 3000
    prompts = write_jsonl(tmp_path / "prompts.jsonl", rows)
    out = tmp_path / "schedule.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=8,
                                                        max_response_tokens=1024))
    longest = int(open_schedule(out).frame["prompt_tokens"].max())
    assert longest > VERL_DEFAULT_MAX_PROMPT_TOKENS
    result = export(out, [prompts], None, format="verl")
    [note] = [w for w in result.warnings if "max_prompt_length" in w]
    assert f"about {longest:,} tokens" in note and f"set data.max_prompt_length to at least {math.ceil(longest * 1.3):,}" in note
    assert "data.filter_overlong_prompts=False" in note
    assert result.trainer_settings["data.filter_overlong_prompts"] is False
    # In the settings too (a pipeline applying `trainer_settings` kept verl's 512 and had prompts cut).
    assert result.trainer_settings["data.max_prompt_length"] == math.ceil(longest * 1.3)


def test_workers_past_any_fleet_are_a_settings_error(built, tmp_path):  # noqa: F811
    """A typo of a worker count fails at once as a setting (exit 4), before anything is allocated per worker."""
    with pytest.raises(SettingsError, match=r"--workers 99999999999 is not a rollout fleet; give at most 100000"):
        export(built["schedule"], [built["prompts"]], tmp_path / "o.parquet", format="verl", workers=99_999_999_999)
    assert not (tmp_path / "o.parquet").exists()


def test_route_planned_adds_each_rows_planned_instance_for_verls_router(built, tmp_path):  # noqa: F811
    """--route planned: a `priority` column that names each row's planned instance, in the file's row order, for
    asp_cli.integrate.verl_router (docs/integrations.md, Option D); without it no such column."""
    from asp_cli.integrate.verl_router import decode_instance

    out = tmp_path / "train.parquet"
    export(built["schedule"], [built["prompts"]], out, format="verl", route="planned")
    frame = pl.read_parquet(out)
    assert [decode_instance(p) for p in frame["priority"].to_list()] == frame["instance"].to_list()
    assert frame["priority"].to_list() == sorted(frame["priority"].to_list())  # vLLM's priority order = file order
    assert "priority" not in pl.read_parquet(export(built["schedule"], [built["prompts"]], tmp_path / "p.parquet",
                                                    format="verl").output).columns
    with pytest.raises(SettingsError, match="--route must be one of none, planned, length"):
        export(built["schedule"], [built["prompts"]], None, route="least")
    rows = make_prompts(PROMPTS)
    for row in rows:
        row["priority"] = 1
    data = write_jsonl(tmp_path / "clash.jsonl", rows)
    with pytest.raises(InputError, match="already has a column 'priority'"):
        export(built["schedule"], [data], None, route="planned")
    assert export(built["schedule"], [data], None).frame["priority"].to_list() == [1] * PROMPTS * EPOCHS
    # verl 0.9.1's tool agent loop passes no priority on to its requests: the route does nothing for its rows, said
    # with how many (an agent newcomer's round: 1,152 tool_agent rows of 1,280, and not a word).
    rows = make_prompts(PROMPTS)
    for i, row in enumerate(rows):
        row["agent_name"] = "tool_agent" if i % 3 else ("single_turn_agent" if i % 2 else None)
    agents = write_jsonl(tmp_path / "agents.jsonl", rows)
    said = [w for w in export(built["schedule"], [agents], None, route="planned").warnings if "agent loop" in w]
    tools = sum(1 for i in range(PROMPTS) if i % 3)  # of the dataset's rows
    assert said == [f"--route planned: {tools:,} of the {PROMPTS:,} rows name an agent loop other than verl's "
                    "single-turn one, the only one of verl 0.9.1's that passes the row's priority on to its requests "
                    f"(tool_agent {tools:,}; its tool agent loop drops it, tool_agent_loop.py:244-254): asp's router "
                    "places those requests as verl's balancer would, unless your own loop passes priority on"]
    assert not [w for w in export(built["schedule"], [agents], None).warnings if "agent loop" in w]


def test_the_export_command_takes_the_route(built, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    out = tmp_path / "o.jsonl"
    run = CliRunner().invoke(app, ["export", str(built["schedule"]), str(built["prompts"]), "-o", str(out),
                                   "--format", "jsonl", "--route", "planned"])
    assert run.exit_code == 0, run.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["priority"] >= 2**40 for r in rows) and len(rows) == PROMPTS * EPOCHS
    bad = CliRunner().invoke(app, ["export", str(built["schedule"]), str(built["prompts"]), "-o",
                                   str(tmp_path / "x.jsonl"), "--format", "jsonl", "--route", "nope"])
    assert bad.exit_code != 0 and "--route must be one of none, planned, length" in bad.output


def test_route_length_carries_each_rows_predicted_tokens_per_sample(built, tmp_path):  # noqa: F811
    """--route length: the `priority` column carries each row's predicted response tokens per sample (the
    schedule's predicted_mean_tokens), in the file's row order, for the router's length-aware mode."""
    from asp_cli.schedule_format import read_schedule
    from asp_cli.integrate.verl_router import decode_instance, decode_tokens

    out = tmp_path / "train.parquet"
    export(built["schedule"], [built["prompts"]], out, format="verl", route="length")
    frame = pl.read_parquet(out)
    schedule = read_schedule(built["schedule"]).frame
    mean = dict(zip(zip(schedule["epoch"].to_list(), schedule["seq"].to_list()),
                    schedule["predicted_mean_tokens"].to_list()))
    assert [decode_tokens(p) for p in frame["priority"].to_list()] == [
        mean[(e, q)] for e, q in zip(frame["epoch"].to_list(), frame["seq"].to_list())]
    assert [decode_instance(p) for p in frame["priority"].to_list()] == [None] * frame.height
    assert frame["priority"].to_list() == sorted(frame["priority"].to_list())


def test_a_column_of_mixed_json_kinds_is_exported_as_text_and_said_so(tmp_path):
    """A hostile-input audit found an id column of text and numbers exported as the reader's internal tag
    ("\\x00json:2"), silently, where the schedule's prompt id is "2". Parquet holds one kind per column."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = tmp_path / "mixed.jsonl"
    write_jsonl(data, [{"id": "a", "question": "What is 1+1?", "meta": [1]},
                       {"id": 2, "question": "What is 2+2?", "meta": "x"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    out = tmp_path / "o.parquet"
    result = export(sched, [data], out, format="parquet")
    rows = pl.read_parquet(out).sort("seq").to_dicts()
    assert sorted(r["id"] for r in rows) == ["2", "a"] and sorted(r["meta"] for r in rows) == ["[1]", "x"]
    assert not any("\x00" in str(v) for r in rows for v in r.values())
    assert any("columns 'id', 'meta' mix JSON kinds" in w and "--format jsonl" in w for w in result.warnings)


@pytest.mark.parametrize("fmt", ["parquet", "verl"])
def test_text_that_starts_as_the_readers_tag_is_exported_as_it_is(tmp_path, fmt):
    """Text that starts as the reader's tags do ("\\x00json:", "\\x00text:") is kept escaped while read; the export
    gives it back as the file held it, beside a column of mixed kinds."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = tmp_path / "lookalike.jsonl"
    write_jsonl(data, [{"id": "\x00json:5", "question": "\x00json:5", "extra": "\x00text:z"},
                       {"id": 2, "question": "What is 2+2?", "extra": "q"}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    out = tmp_path / "o.parquet"
    export(sched, [data], out, format=fmt)
    rows = {r["question"]: r for r in pl.read_parquet(out).to_dicts()}
    assert rows["\x00json:5"]["id"] == "\x00json:5" and rows["\x00json:5"]["extra"] == "\x00text:z"
    assert rows["What is 2+2?"]["id"] == "2"
    if fmt == "verl":
        assert rows["\x00json:5"]["prompt"] == [{"role": "user", "content": "\x00json:5"}]
        assert rows["\x00json:5"]["extra_info"]["prompt_id"] == "\x00json:5"


MULTIMODAL = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                           {"type": "image_url", "image_url": {"url": "file:///x.png"}}]}]


@pytest.mark.parametrize("layout", ["jsonl", "json-array"])
def test_jsonl_export_writes_every_row_as_the_dataset_holds_it(tmp_path, layout):
    """A hostile-input audit: in a prompt column of text and chat lists the chat rows were exported as JSON text, and a
    message's content parts (the image among them) were dropped, keeping their text. A row is the user's own."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    rows = [{"id": "a", "prompt": "What is 1+1?", "meta": {"tags": ["x"]}},
            {"id": 2, "prompt": [{"role": "user", "content": "Solve x+1=3."}], "meta": {"tags": [1, True]}},
            {"id": "c", "prompt": MULTIMODAL, "score": 1.0, "when": "2024-01-02"},
            {"id": "d", "prompt": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "extra": {}}]
    if layout == "jsonl":
        data = write_jsonl(tmp_path / "mixed.jsonl", rows)
    else:
        data = tmp_path / "mixed.json"
        data.write_text(json.dumps(rows, indent=1))
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    out = tmp_path / "o.jsonl"
    result = export(sched, [data], out, format="jsonl")
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == len(rows) and not any("mix JSON kinds" in w for w in result.warnings), result.warnings
    by_seq = sorted(written, key=lambda r: r["seq"])
    for row in by_seq:
        own = {k: v for k, v in row.items() if k not in ("epoch", "instance", "minibatch", "seq", "train_step",
                                                          "predicted_tokens")}
        assert own in rows  # every value of its own kind, every field there, nothing added
        assert list(row)[len(own):] == ["epoch", "instance", "minibatch", "seq", "train_step", "predicted_tokens"]
    assert "\x00" not in out.read_text() and "\x00source_json" not in result.frame.columns
    if layout == "jsonl":  # a JSON line is written as the user wrote it, asp's columns after it
        lines = {json.loads(line)["id"]: line for line in out.read_text().splitlines()}
        # spaced as the row is (json.dumps' default): the columns came compact after spaced fields
        assert lines["c"].startswith(json.dumps(rows[2])[:-1] + ', "epoch": 0, "instance": ')


def test_jsonl_export_writes_asps_columns_spaced_as_each_row_is(tmp_path):
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = tmp_path / "d.jsonl"
    data.write_text('{"id":"a","prompt":"x","meta":{"k":1}}\n{"id": "b", "prompt": "y ü", "meta": {"k": 2}}\n')
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    for key, compact, spaced in (
            (None, ',"epoch":0,"instance":0,', ', "epoch": 0, "instance": 0, '),
            ("meta", '"meta":{"k":1,"prompt_id":"a","epoch":0,', '"meta": {"k": 2, "prompt_id": "b", "epoch": 0, ')):
        out = tmp_path / f"o{key}.jsonl"
        export(sched, [data], out, format="jsonl", metadata_key=key)
        lines = {json.loads(line)["id"]: line for line in out.read_text(encoding="utf-8").splitlines()}
        assert compact in lines["a"] and ": " not in lines["a"], lines["a"]
        assert spaced in lines["b"] and '"y ü"' in lines["b"] and '":' not in lines["b"].replace('": ', ""), lines["b"]


def test_a_parquet_export_keeps_multi_part_contents_and_says_what_it_writes_as_text(tmp_path):
    """Parquet holds a message's content parts where every message has them; where some contents are text and
    others parts, the column is written as JSON text (said); verl's layout refuses what its prompt cannot hold."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    parts_only = [{"role": "user", "content": MULTIMODAL[1]["content"]}]
    data = write_jsonl(tmp_path / "parts.jsonl", [{"id": "a", "prompt": parts_only}, {"id": "b", "prompt": parts_only}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    result = export(sched, [data], tmp_path / "o.parquet")
    content = pl.read_parquet(tmp_path / "o.parquet")["prompt"].to_list()[0][0]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"] and content[1]["image_url"]["url"] == "file:///x.png"
    assert not result.warnings

    mixed = write_jsonl(tmp_path / "mixed.jsonl", [{"id": "a", "prompt": MULTIMODAL}, {"id": "b", "prompt": "Hi"}])
    sched = tmp_path / "s2.parquet"
    schedule([mixed], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    result = export(sched, [mixed], tmp_path / "o2.parquet")
    prompts = dict(pl.read_parquet(tmp_path / "o2.parquet").select("id", "prompt").iter_rows())
    assert json.loads(prompts["a"]) == MULTIMODAL and prompts["b"] == "Hi"
    assert any("column 'prompt' mixes JSON kinds" in w for w in result.warnings), result.warnings
    with pytest.raises(InputError, match=re.escape("dataset row 1: column 'prompt' holds a chat list that verl's "
                                                   "prompt column cannot hold")):
        export(sched, [mixed], tmp_path / "v.parquet", format="verl")
    assert not (tmp_path / "v.parquet").exists()


def test_verl_export_makes_each_chat_list_among_text_prompts_its_chat_list(tmp_path):
    """The chat rows of a prompt column of text and chat lists became user messages whose content was the chat
    list's JSON text."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Solve x+1=3."}]
    data = write_jsonl(tmp_path / "mixed.jsonl", [{"id": "a", "prompt": "What is 1+1?", "source": "gsm"},
                                                  {"id": "b", "prompt": chat, "source": 7}])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=2))
    export(sched, [data], tmp_path / "v.parquet", format="verl")
    frame = pl.read_parquet(tmp_path / "v.parquet")
    prompts = dict(zip(frame["extra_info"].struct.field("prompt_id").to_list(), frame["prompt"].to_list()))
    assert prompts == {"a": [{"role": "user", "content": "What is 1+1?"}], "b": chat}
    assert sorted(frame["data_source"].to_list()) == ["7", "gsm"]  # the reader's tag is not the data's


def test_a_schedule_with_rows_removed_is_exported_with_a_warning(tmp_path):
    """A hostile-input audit: a schedule with a row deleted by hand, or cut to its first epoch, exported
    "99 rows" without a word, though every prompt is in every epoch of a schedule asp writes."""
    import pyarrow.parquet as pq

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    data = tmp_path / "p.jsonl"
    write_jsonl(data, make_prompts(10))
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=4,
                                                      epochs=2))
    table = pq.read_table(sched)
    assert not export(sched, [data], tmp_path / "all.jsonl", format="jsonl").warnings
    dropped = tmp_path / "dropped.parquet"
    pq.write_table(table.slice(0, table.num_rows - 1).replace_schema_metadata(table.schema.metadata), dropped)
    result = export(dropped, [data], tmp_path / "d.jsonl", format="jsonl")
    assert any("epoch 1 holds 9 prompts where epoch 0 holds 10: rows were removed" in w for w in result.warnings)
    cut = tmp_path / "cut.parquet"
    pq.write_table(table.slice(0, 10).replace_schema_metadata(table.schema.metadata), cut)
    result = export(cut, [data], tmp_path / "c.jsonl", format="jsonl")
    assert any("settings name 2 epochs but its rows hold 1" in w for w in result.warnings), result.warnings


def test_numpy_integers_serve_as_epoch_and_workers_and_the_summary_stays_json(built):  # noqa: F811
    """A library newcomer's `workers=np.int64(4)` was refused: "--workers must be at least 1 (got np.int64(4))"."""
    import numpy as np

    given = export(built["schedule"], [built["prompts"]], None, format="verl", epoch=np.int64(1), workers=np.int64(2))
    plain = export(built["schedule"], [built["prompts"]], None, format="verl", epoch=1, workers=2)
    assert given.frame.equals(plain.frame) and given.summary == plain.summary
    json.dumps([given.summary, given.trainer_settings])


def test_workers_are_checked_whatever_the_order(built, tmp_path):  # noqa: F811
    """`--workers 0` with the dispatch order was accepted silently (it is read only by --order train)."""
    with pytest.raises(SettingsError, match="--workers must be at least 1"):
        export(built["schedule"], [built["prompts"]], tmp_path / "o.jsonl", format="jsonl", order="dispatch",
               workers=0)
    # Read only by --order train: a count with the dispatch order changed nothing (a hostile-input round).
    with pytest.raises(SettingsError, match="--workers cuts each train batch .* add --order train"):
        export(built["schedule"], [built["prompts"]], tmp_path / "o.jsonl", format="jsonl", order="dispatch",
               workers=3)
    with pytest.raises(SettingsError, match="--verl-version says how verl cuts"):
        export(built["schedule"], [built["prompts"]], tmp_path / "o.jsonl", format="jsonl", verl_version="0.7")
    assert not (tmp_path / "o.jsonl").exists()
    export(built["schedule"], [built["prompts"]], tmp_path / "o.jsonl", format="jsonl", order="train", workers=3,
           verl_version="0.7")  # where they are read
    from asp_cli.integrate.export_options import check_options

    with pytest.raises(SettingsError, match="fully asynchronous rollouter does not: .* leave --workers out$"):
        check_options("verl", "dispatch", 4, None, "", "none", None, "fully-async")  # not "add --order train"


def test_metadata_key_keeps_a_dataset_column_named_as_asps_and_refuses_a_path_or_asps_own_name(tmp_path):
    """A hostile-input round: a dataset with its own top-level `prompt_id` (or `epoch`, ...) and --metadata-key
    crashed the export (exit 70, Polars' DuplicateError); a dotted key was written as a key of that name, which
    asp's --id-key then refused; --metadata-key epoch was told the dataset's 'epoch' was no object."""
    from asp_cli.arrange.pipeline import schedule

    rows = [{"prompt_id": f"q{i}", "epoch": "spring", "question": f"What is {i} + {i}?"} for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    made = schedule([data], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
    for suffix in ("jsonl", "parquet"):
        out = tmp_path / f"e.{suffix}"
        result = export(made.output, [data], out, format=suffix, metadata_key="metadata")
        written = pl.read_ndjson(out) if suffix == "jsonl" else pl.read_parquet(out)
        assert written.columns == ["prompt_id", "epoch", "question", "metadata"] == result.frame.columns
        assert written["epoch"].to_list() == ["spring"] * 6
        assert written["metadata"].struct.field("prompt_id").to_list() == written["prompt_id"].to_list()
        assert written["metadata"].struct.field("epoch").to_list() == [0] * 6
    for key, words in [("extra_info.index", "not a path: 'extra_info.index' has a '.'; .* --metadata-key extra_info"),
                       ("epoch", "--metadata-key epoch is one of the fields asp puts inside that object"),
                       (5, "--metadata-key must be a field name")]:
        with pytest.raises(SettingsError, match=words):
            export(made.output, [data], tmp_path / "x.jsonl", format="jsonl", metadata_key=key)
    with pytest.raises(SettingsError, match="--prefix must be text"):
        export(made.output, [data], tmp_path / "x.jsonl", format="jsonl", prefix=None)
    assert not (tmp_path / "x.jsonl").exists()


def test_verl_extra_info_carries_the_ids_the_schedule_and_the_probe_gave(tmp_path):
    """An audit: with `--id-key uid` beside an `id` column, extra_info.prompt_id named the `id` column's values
    (row0, row1), so logs fed back by it matched the wrong prompts; with ids 1.0 and 2 it wrote '1.0'."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.probe import ProbeSettings, probe
    from asp_cli.reading import ReadOptions

    data = write_jsonl(tmp_path / "uid.jsonl", [{"id": f"row{i}", "uid": f"q{i}", "prompt": f"question {i} " * (i + 1)}
                                                for i in range(12)])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=12), read=ReadOptions(id_key="uid"))
    ids = export(sched, [data], None, format="verl").frame
    assert sorted(r["extra_info"]["prompt_id"] for r in ids.iter_rows(named=True)) == sorted(f"q{i}" for i in range(12))
    probed = probe([data], tmp_path / "p.parquet", settings=ProbeSettings(prompts=4), read=ReadOptions(id_key="uid"),
                   format="verl")
    written = pl.read_parquet(tmp_path / "p.parquet")
    assert all(r["extra_info"]["prompt_id"] == r["uid"] for r in written.iter_rows(named=True)), probed
    numbers = write_jsonl(tmp_path / "n.jsonl", [{"id": 1.0, "prompt": "a b"}, {"id": 2, "prompt": "c d e"}])
    schedule([numbers], tmp_path / "n.parquet", settings=ScheduleSettings(train_batch_size=2))
    frame = export(tmp_path / "n.parquet", [numbers], None, format="verl").frame
    assert sorted(r["extra_info"]["prompt_id"] for r in frame.iter_rows(named=True)) == ["1", "2"]


def test_verl_layout_builds_the_prompt_from_the_column_the_user_named(tmp_path):
    """A newcomer (OpenRLHF's `context_messages`): `asp export --format verl` and `asp probe --format verl` ignored
    `--prompt-key` (and the schedule's), and refused with "no chat list under 'prompt'/'messages'"; the named
    column is now verl's prompt (a chat list moved there, a text column wrapped and kept), and one that is neither
    is refused naming it."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.integrate.probe import ProbeSettings, probe
    from asp_cli.reading import ReadOptions

    rows = [{"id": f"p{i}", "context_messages": [{"role": "user", "content": f"question {i} " * (i + 1)}],
             "body": f"text {i}", "label": str(i)} for i in range(12)]
    data = write_jsonl(tmp_path / "orl.jsonl", rows)
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=12), read=ReadOptions(prompt_key="context_messages"))
    frame = export(sched, [data], None, format="verl").frame  # the schedule's --prompt-key
    chats = {r["extra_info"]["prompt_id"]: r["prompt"] for r in frame.iter_rows(named=True)}
    assert chats == {r["id"]: r["context_messages"] for r in rows}
    assert "context_messages" not in frame.columns and frame["reward_model"].struct.field("ground_truth").to_list()
    texts = export(sched, [data], None, format="verl", prompt_key="body").frame  # named otherwise, the flag wins
    assert all(r["prompt"] == [{"role": "user", "content": r["body"]}] for r in texts.iter_rows(named=True))
    probe([data], tmp_path / "p.parquet", settings=ProbeSettings(prompts=4), format="verl",
          read=ReadOptions(prompt_key="context_messages"))
    probed = pl.read_parquet(tmp_path / "p.parquet")
    assert all(r["prompt"] == next(q["context_messages"] for q in rows if q["id"] == r["extra_info"]["prompt_id"])
               for r in probed.iter_rows(named=True))
    with pytest.raises(InputError, match="column 'label' holds Int64, not text or a chat-message list"):
        write_jsonl(tmp_path / "n.jsonl", [{"id": f"n{i}", "question": f"x {i}", "label": i} for i in range(4)])
        schedule([tmp_path / "n.jsonl"], tmp_path / "n.parquet")
        export(tmp_path / "n.parquet", [tmp_path / "n.jsonl"], None, format="verl", prompt_key="label")


def test_a_dataset_without_ids_gets_them_in_the_export_and_a_reordered_copy_is_refused(tmp_path):
    """A newcomer (OpenRLHF/slime, JSONL without ids): the export reordered the rows and wrote no id, so the
    rollout log could not be fed back; and a shuffled copy of the file was exported with exit 0 ("ids match row by
    row"), the schedule applied to the wrong prompts."""
    from asp_cli.arrange.pipeline import schedule

    rows = [{"prompt": f"question {i} " * (i % 7 + 1), "answer": str(i)} for i in range(30)]
    data = write_jsonl(tmp_path / "p.jsonl", rows)
    sched = tmp_path / "s.parquet"
    schedule([data], sched)
    result = export(sched, [data], tmp_path / "o.jsonl", format="jsonl")
    written = pl.read_ndjson(tmp_path / "o.jsonl")
    assert [rows[int(i)]["answer"] for i in written["prompt_id"]] == written["answer"].to_list()
    assert any("adds `prompt_id`" in w for w in result.warnings)
    shuffled = write_jsonl(tmp_path / "shuffled.jsonl", rows[::-1])
    with pytest.raises(InputError, match="the schedule's ids are row numbers, which match any file of as many rows"):
        export(sched, [shuffled], None, format="jsonl")


def test_a_verl_export_of_a_schedule_for_servers_that_refill_says_nothing_of_engines_or_workers(tmp_path):
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(24))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=3, train_batch_size=12, samples_per_prompt=2,
                                                       engine="streaming", max_lag=0, trainer="schedule"))
    result = export(out, [prompts], None, format="verl")
    assert not any("engine" in w or "agent-loop workers (" in w for w in result.warnings), result.warnings

    assert not any("--route planned" in w for w in result.warnings)
    # Kept to planned servers, a synchronous step loses verl's spread of each group over the servers: said.
    routed = export(out, [prompts], None, format="verl", route="planned")
    assert any("--route planned keeps each group on one server" in w and "As verl routes" in w
               and "verl's synchronous trainer" in w for w in routed.warnings), routed.warnings
    # So does an asynchronous one's (a lag bound): verl's balancer spreads its groups too.
    lagged = tmp_path / "lagged.parquet"
    schedule([prompts], lagged, settings=ScheduleSettings(instances=3, train_batch_size=12, samples_per_prompt=2,
                                                          engine="streaming", max_lag=1, dispatch="planned"))
    spread = export(lagged, [prompts], None, format="verl", route="planned")
    assert any("--route planned keeps each group on one server" in w and "asynchronous trainers" in w
               for w in spread.warnings), spread.warnings
    length = export(out, [prompts], None, format="verl", route="length")
    assert [w for w in length.warnings if "--route" in w] == [
        "--route length: verl routes by the priority column only through asp's router: set "
        "actor_rollout_ref.rollout.router_config_path to a YAML holding router_class: "
        "asp_cli.integrate.verl_router.ScheduleRouter (docs/integrations.md, Option D)"]
    # The plan was made for free dispatch: keeping to its instance column is said to be no plan.
    assert any("--dispatch planned" in w for w in routed.warnings)
    assert length.trainer_settings["actor_rollout_ref.rollout.full_determinism"] is False  # a route needs it off
    assert "actor_rollout_ref.rollout.full_determinism" not in result.trainer_settings


@pytest.mark.parametrize("used", [
    {"p.jsonl": 5},  # asp replay: exit 70 ('int' object has no attribute 'get')
    {"p.jsonl": {"prompt": 5, "id": ["x"]}},  # asp export and replay: "--prompt-key must name a column (got 5)"
    [1, 2],
])
def test_damaged_columns_used_metadata_means_detecting_the_columns_again(tmp_path, used):
    """Edited schedule metadata: its recorded columns are a hint, and a damaged one is detected again by export,
    observe and replay alike (one function, `recorded_keys`)."""
    from asp_cli.integrate.export import recorded_keys
    from asp_cli.integrate.replay_plan import dataset_prompts

    assert recorded_keys({"columns_used": used}) == (None, None)
    prompts = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "question": "x"}, {"id": "b", "question": "y"}])
    assert dataset_prompts([prompts], {"columns_used": used}, prompt_key=None, id_key=None) == {"a": "x", "b": "y"}


@pytest.mark.parametrize("recorded", [["x"], {"a": 1}, 5])
def test_an_export_of_a_schedule_whose_recorded_id_column_is_no_text_detects_it_again(tmp_path, recorded):
    """A hostile-input round (2026-12-07): `columns_used`'s id edited into a list made `asp export` itself (not only
    `recorded_keys`) exit 70, unhashable type; `asp observe --schedule` recorded it as the text "['x']"."""
    import pyarrow.parquet as pq

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading.history_ids import ids_of
    from asp_cli.schedule_format import METADATA_KEY

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(20))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=2, train_batch_size=8))
    table = pq.read_table(out)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["columns_used"] = {name: {**used, "id": recorded} for name, used in meta["columns_used"].items()}
    edited = tmp_path / "edited.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), edited)
    result = export(edited, [prompts], tmp_path / "e.jsonl", format="jsonl")
    assert result.frame.height == 20
    assert ids_of([{"name": "p.jsonl", "fingerprint": "x"}], meta["columns_used"]) == {}


def test_a_schedule_for_an_asynchronous_trainer_exports_for_verls_fully_async_trainer(tmp_path):
    """Streaming, a lag bound, groups in arrival order: verl's fully asynchronous trainer, whose rollouter refuses the
    default trainer's data.train_batch_size (a newcomer's run, 2026-12-05; its rollouter is built from these
    settings in tests/integration/test_verl.py). The file is in dispatch order; the weight syncs cut the train
    batch; verl's defaults the schedule did not plan with are said."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=3, train_batch_size=12, samples_per_prompt=2,
                                                       engine="streaming", max_lag=2))
    result = export(out, [prompts], None, format="verl")
    assert result.order == "dispatch" and result.summary["verl_trainer"] == "fully-async"
    assert result.frame["seq"].to_list() == list(range(40))
    settings = result.trainer_settings
    assert settings["data.train_batch_size"] == 0 and settings["data.gen_batch_size"] == 1
    assert settings["rollout.total_rollout_steps"] == 40  # verl's shipped config stops after 100
    assert settings["async_training.staleness_threshold"] == 2
    # 12 prompts between weight syncs: verl's 4 steps a sync of 3 prompts each.
    assert (settings["actor_rollout_ref.actor.ppo_mini_batch_size"] * settings["async_training.require_batches"]
            * settings["async_training.trigger_parameter_sync_step"]) == 12
    assert settings["async_training.trigger_parameter_sync_step"] == 4
    assert "async_training.concurrent_samples_per_replica" not in settings
    assert any("--prompts-per-server 16" in w for w in result.warnings), result.warnings
    # verl's trainer takes 3 prompts a step until the queue ends: 13 steps, 1 prompt untrained (it said 4).
    assert any("40 prompts end in 1 that fill no whole trainer step of 3" in w for w in result.warnings)
    assert settings["actor_rollout_ref.hybrid_engine"] is False  # verl's fully asynchronous classes assert it
    assert not any("agent-loop workers" in w for w in result.warnings)
    # verl's default trainer on request, as before; a train order for the fully async trainer is said to be wrong.
    ppo = export(out, [prompts], None, format="verl", verl_trainer="ppo")
    assert ppo.order == "train" and ppo.trainer_settings["data.train_batch_size"] == 12
    trained = export(out, [prompts], None, format="verl", order="train", verl_trainer="fully-async")
    assert any("export in dispatch order" in w for w in trained.warnings)
    with pytest.raises(SettingsError, match="--verl-trainer must be one of auto, ppo, colocate-async, "
                                            "separate-async, fully-async"):
        export(out, [prompts], None, format="verl", verl_trainer="async")
    # verl's own spelling (trainer.v1.trainer_mode=colocate_async) is asked about, as asp schedule asks (E81).
    with pytest.raises(SettingsError, match=r"\(got 'colocate_async'\); did you mean colocate-async\?"):
        export(out, [prompts], None, format="verl", verl_trainer="colocate_async")
    with pytest.raises(SettingsError, match=r"\(got 'sync'\); verl's synchronous trainer is --verl-trainer ppo"):
        export(out, [prompts], None, format="verl", verl_trainer="sync")
    # The rollouter's limit planned with is the one set; a batch of 10 syncs every 2 steps of 5.
    limited = tmp_path / "limited.parquet"
    schedule([prompts], limited, settings=ScheduleSettings(instances=3, train_batch_size=10, samples_per_prompt=2,
                                                           engine="streaming", max_lag=1, prompts_per_server=16))
    settings = export(limited, [prompts], None, format="verl").trainer_settings
    assert settings["async_training.concurrent_samples_per_replica"] == 16
    assert settings["async_training.trigger_parameter_sync_step"] == 2
    assert settings["actor_rollout_ref.actor.ppo_mini_batch_size"] == 5
    # A synchronous schedule stays with verl's default trainer.
    sync = tmp_path / "sync.parquet"
    schedule([prompts], sync, settings=ScheduleSettings(instances=3, train_batch_size=10, samples_per_prompt=2,
                                                        engine="streaming", max_lag=0))
    assert export(sync, [prompts], None, format="verl").summary["verl_trainer"] == "ppo"


def test_a_verl_export_fills_data_source_from_the_source_column_the_schedule_named(tmp_path):
    """A schedule made with --source-key meta.task was exported with every data_source 'unknown' (verl routes its
    reward function by it): a library user's round."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.reading.options import ReadOptions
    from asp_cli.settings import ScheduleSettings

    rows = [{"id": f"p{i}", "prompt": f"Question {i}?", "meta": {"task": "code" if i % 2 else "math"}} for i in range(8)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(instances=1, samples_per_prompt=2, train_batch_size=4),
             read=ReadOptions(source_key="meta.task"))
    result = export(sched, [data], tmp_path / "v.parquet", format="verl")
    frame = pl.read_parquet(tmp_path / "v.parquet")
    by_id = dict(zip(frame["id"].to_list(), frame["data_source"].to_list(), strict=True))
    assert by_id == {r["id"]: r["meta"]["task"] for r in rows} and "meta.task" not in frame.columns
    assert not any("no data_source" in w for w in result.warnings)


def test_verl_layout_says_when_it_replaces_a_dataset_s_own_values(tmp_path):
    """A hostile-input round: an extra_info of text and a reward_model of lists became asp's defaults, unsaid."""
    from asp_cli.arrange.pipeline import schedule

    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?", "extra_info": "notadict", "reward_model": [1, 2]}
            for i in range(6)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    made = schedule([data], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
    result = export(made.output, [data], tmp_path / "v.parquet", format="verl")
    said = " ".join(result.warnings)
    assert "column 'extra_info' holds 6 values that are not objects (String)" in said
    assert "column 'reward_model' holds 6 values that are not objects" in said


@pytest.mark.parametrize(("name", "told"), [
    ("openrlhf", "OpenRLHF reads JSON lines: --format jsonl --order train (docs/integrations.md)"),
    ("slime", "slime reads JSON lines: --format jsonl --order train --metadata-key metadata"),
    ("AReaL", "AReaL reads JSON lines in dispatch order: --format jsonl"),
    ("mindspeed-rl", "MindSpeed-RL reads Parquet: --format parquet --order train"),
    ("mindspeed", "MindSpeed-RL reads Parquet: --format parquet --order train"),
    ("csv", None),
])
def test_a_frameworks_name_as_the_format_is_told_which_format_it_reads(built, name, told):  # noqa: F811
    """An OpenRLHF newcomer's first try was `--format openrlhf`: refused with the three formats alone, the format and
    order docs/integrations.md gives that framework were a search away. Any other wrong name is told the list."""
    with pytest.raises(SettingsError) as refused:
        export(built["schedule"], [built["prompts"]], None, format=name)
    message = str(refused.value)
    assert message.startswith(f"--format must be one of parquet, jsonl, verl (got {name!r})"), message
    assert (told in message) if told else message.endswith(f"(got {name!r})"), message


def test_workers_on_a_schedule_for_openrlhfs_deal_or_slimes_router_is_warned_about(tmp_path):
    """An OpenRLHF newcomer's `--workers 8` ("8 engines") laid each batch out for 8 contiguous chunks, where OpenRLHF
    deals the batch in the file's order: most rows then reached other engines than the schedule's instance column,
    in silence. It is warned about; left out (one chunk, the default for these routers) or 1, it is not."""
    from asp_cli import ScheduleSettings, schedule

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(60))
    for router, who in (("group-round-robin", "OpenRLHF deals it to its engines in turn"),
                        ("cache-aware", "slime submits it through its router")):
        settings = ScheduleSettings(engine="streaming", router=router, max_lag=0, trainer="schedule", instances=3,
                                    samples_per_prompt=4, train_batch_size=12)
        made = schedule([prompts], tmp_path / f"{router}.parquet", settings=settings)
        warned = export(made.output, [prompts], None, format="jsonl", order="train", workers=3).warnings
        note = next((w for w in warned if w.startswith("--workers 3 lays each batch out")), None)
        assert note is not None and f"--router {router}, which takes each batch whole" in note and who in note, warned
        assert note.endswith("leave --workers out (one chunk a batch)")
        for workers, order in ((None, "train"), (1, "train"), (None, "dispatch")):
            quiet = export(made.output, [prompts], None, format="jsonl", order=order, workers=workers).warnings
            assert not any("lays each batch out" in w for w in quiet), (workers, order, quiet)


def test_the_areal_section_names_the_columns_an_export_adds(tmp_path):
    """docs/integrations.md's AReaL section said the export holds the input's columns, asp's `prompt_id` added only
    with --metadata-key: an AReaL newcomer's dataset without an id column (a `messages` list, `data_source`) got
    `prompt_id` and asp's six columns too, each passed to the reward function by name."""
    from pathlib import Path

    from asp_cli.arrange.pipeline import schedule

    rows = [{"messages": [{"role": "user", "content": f"What is {i} + {i}?"}], "data_source": "gsm",
             "answer": str(2 * i)} for i in range(12)]
    prompts = write_jsonl(tmp_path / "p.jsonl", rows)
    out = tmp_path / "s.parquet"
    schedule([prompts], out, settings=ScheduleSettings(train_batch_size=4, minibatch_size=4))
    export(out, [prompts], tmp_path / "o.jsonl", format="jsonl")
    added = set(json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])) - set(rows[0])
    doc = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    areal = " ".join(doc.split("\n## AReaL\n", 1)[1].split("\n## ", 1)[0].split())
    assert "prompt_id" in added and not [c for c in added if f"`{c}`" not in areal]
    assert "added only with `--metadata-key`" not in areal


def test_a_datasets_shards_in_another_order_are_told_the_order_the_schedule_was_made_from(tmp_path):
    """A Hugging Face dataset in two Parquet shards without an id column, scheduled in one order and exported in the
    other: it was told the files' "bytes differ" from the schedule's, which sent a newcomer comparing files that were
    the same; the schedule records each file's fingerprint, so it names the order to give them in."""
    from asp_cli.arrange.pipeline import schedule

    rows = [{"messages": [{"role": "user", "content": f"question {i} " * (i % 5 + 1)}], "data_source": "gsm"}
            for i in range(16)]
    shards = [tmp_path / "train-00000-of-00002.parquet", tmp_path / "train-00001-of-00002.parquet"]
    pl.DataFrame(rows[:8]).write_parquet(shards[0])
    pl.DataFrame(rows[8:]).write_parquet(shards[1])
    sched = tmp_path / "s.parquet"
    schedule(shards, sched)
    with pytest.raises(InputError) as refused:
        export(sched, shards[::-1], None, format="jsonl")
    assert str(refused.value) == (
        f"{shards[1]}, {shards[0]}: the files the schedule was made from, in another order; give them in the order "
        f"the schedule was made from: {shards[0]} {shards[1]}")
    assert export(sched, shards, None, format="jsonl").summary["rows"] == 16


def test_chat_lists_held_as_json_text_are_warned_about_for_the_trainers_that_read_them_as_text(tmp_path):
    """A CSV of a Hugging Face dataset keeps its `messages` lists as JSON text: asp schedules them as chat lists, but
    OpenRLHF, slime and AReaL take the column as it is, and the export printed their settings without a chat template
    and without a word, so the policy would be prompted with the JSON text itself."""
    import csv

    from asp_cli.arrange.pipeline import schedule

    messages = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(12)]
    data = tmp_path / "train.csv"
    with open(data, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["messages", "data_source", "answer"])
        writer.writerows([json.dumps(m), "gsm", str(2 * i)] for i, m in enumerate(messages))
    sched = tmp_path / "s.parquet"
    schedule([data], sched)
    result = export(sched, [data], tmp_path / "o.jsonl", format="jsonl")
    assert not result.summary["prompt_is_chat"]
    [note] = [w for w in result.warnings if "JSON text" in w]
    assert note.startswith("column 'messages' holds chat lists as JSON text (asp read them as chat lists): OpenRLHF, "
                           "slime and AReaL take it as the text it is")
    listed = write_jsonl(tmp_path / "listed.jsonl", [{"messages": m, "data_source": "gsm"} for m in messages])
    schedule([listed], tmp_path / "l.parquet")
    assert not [w for w in export(tmp_path / "l.parquet", [listed], None, format="jsonl").warnings if "JSON text" in w]


@pytest.mark.parametrize("first", ["chat", "text"])
def test_a_prompt_column_of_chat_lists_and_text_asks_for_the_chat_template(tmp_path, first):
    """slime and OpenRLHF template chat lists, and wrap a text prompt as one user message, only with their chat
    template: a dataset whose `prompt` was a chat list in some rows and text in others was printed no
    --apply-chat-template, and where its first exported row was a list it was told to store its lists as lists, the
    warning for a CSV's JSON text (a slime newcomer's round)."""
    from asp_cli.arrange.pipeline import schedule

    rows = [{"prompt": [{"role": "user", "content": f"q {i}"}] if (i % 2 == 0) == (first == "chat") else f"q {i}",
             "label": str(i)} for i in range(16)]
    data = write_jsonl(tmp_path / "mixed.jsonl", rows)
    schedule([data], tmp_path / "s.parquet", settings=ScheduleSettings(instances=1, train_batch_size=4,
                                                                       arrangement="shuffle"))
    result = export(tmp_path / "s.parquet", [data], tmp_path / "o.jsonl", format="jsonl", order="train",
                    metadata_key="metadata")
    assert result.summary["prompt_is_chat"]
    assert not [w for w in result.warnings if "JSON text" in w], result.warnings
    [note] = [w for w in result.warnings if "chat lists in" in w]
    assert note.startswith("column 'prompt' holds chat lists in 8 rows and text in 8: slime's --apply-chat-template "
                           "and OpenRLHF's --data.apply_chat_template")
    # every prompt a chat list, or every one text: no such note
    for kind in ("chat", "text"):
        same = write_jsonl(tmp_path / f"{kind}.jsonl", [{**r, "prompt": [{"role": "user", "content": f"q {i}"}]
                                                         if kind == "chat" else f"q {i}"} for i, r in enumerate(rows)])
        schedule([same], tmp_path / f"{kind}.parquet", settings=ScheduleSettings(instances=1, train_batch_size=4))
        plain = export(tmp_path / f"{kind}.parquet", [same], None, format="jsonl", order="train")
        assert plain.summary["prompt_is_chat"] is (kind == "chat") and not [w for w in plain.warnings if "chat" in w]


def test_a_label_column_of_objects_is_warned_about_for_the_reward_rules_that_take_text(tmp_path):
    """slime hands the reward function data[--label-key] as it is, and its built-in --rm-type rules take text or a
    number: a slime newcomer's label {"answer": ..., "style": ...} was printed `--label-key label` as ready."""
    from asp_cli.arrange.pipeline import schedule

    for kind, value in (("object", {"answer": "4", "style": "rule"}), ("list", ["4", "four"]), ("text", "4"),
                        ("mixed", None)):
        rows = [{"id": f"p{i}", "question": f"q {i}", "label": value if kind != "mixed" else ("4" if i % 2 else
                                                                                               {"answer": "4"})}
                for i in range(8)]
        data = write_jsonl(tmp_path / f"{kind}.jsonl", rows)
        schedule([data], tmp_path / f"{kind}.parquet", settings=ScheduleSettings(instances=1, train_batch_size=4))
        result = export(tmp_path / f"{kind}.parquet", [data], None, format="jsonl", order="train")
        said = [w for w in result.warnings if w.startswith("label column 'label' holds objects or lists")]
        assert len(said) == (kind != "text"), (kind, result.warnings)
        assert result.summary["label_column"] == "label"


@pytest.mark.parametrize("fmt, made", [
    ("parquet", "Parquet holds one kind per column, so every value is written as text (a number as its digits): a "
                "reward function that compares the label with a number finds text in every row"),
    ("jsonl", "JSON lines keep each row's own, so slime (--label-key) and OpenRLHF (--data.label_key) hand the reward "
              "function a number in some rows and text in others: one that compares them as one kind misjudges the rest"),
])
def test_a_label_column_of_numbers_and_text_says_the_kinds_and_rows_not_objects(tmp_path, fmt, made):
    """A JSON-lines dataset whose answers were numbers in some rows and text in others was told its label column
    "holds objects or lists" (slime's warning), of a column holding neither: the kinds, and which rows hold each."""
    from asp_cli.arrange.pipeline import schedule

    answers = ["0", 2, 4, "6", 8, 10, "12", 14]
    data = write_jsonl(tmp_path / "m.jsonl", [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": a}
                                              for i, a in enumerate(answers)])
    made_schedule = schedule([data], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
    warnings = export(made_schedule.output, [data], tmp_path / f"e.{fmt}", format=fmt).warnings
    assert not any("objects or lists" in w for w in warnings), warnings
    assert (f"label column 'answer' mixes kinds: text in 3 rows (rows 1, 4 and 7) and numbers in 5 rows (rows 2, 3, 5 "
            f"and 2 more) (counted from 1 over the dataset's rows); {made}; make the labels one kind (text) in the "
            "dataset and schedule that file") in warnings, warnings


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_label_column_of_numbers_alone_given_as_text_is_no_mix_and_a_mix_with_gaps_says_them(tmp_path, fmt):
    """Integers one of which is past 64 bits are all numbers, which the reader gives as text: the mixed-kinds warning
    said "mixes kinds:  and numbers in 8 rows" and that JSON lines hand the reward function "a number in some rows and
    text in others". JSON lines keep every number (nothing to say); Parquet writes them as text (said so). A mix of
    true/false and numbers is not said to be text; a mix with an empty label, whose row MindSpeed-RL drops, says
    that too (Parquet)."""
    from asp_cli.arrange.pipeline import schedule

    def warned(answers, name):
        data = write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": a}
                                                        for i, a in enumerate(answers)])
        made = schedule([data], tmp_path / f"{name}.s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
        return [w for w in export(made.output, [data], tmp_path / f"{name}.o.{fmt}", format=fmt).warnings
                if "label column" in w]

    said = warned([2**70, 2, 4, 6, 8, 10, 12, 14], "big")
    assert not any("mixes kinds" in w for w in said), said
    if fmt == "jsonl":
        assert said == []
    else:
        assert said == ["label column 'answer' holds numbers that Parquet cannot hold as one number type (an integer "
                        "past 64 bits beside others), so every value is written as text (a number as its digits): a "
                        "reward function that compares the label with a number finds text in every row; make the "
                        "labels text in the dataset and schedule that file"], said
    said = " ".join(warned([True, 2, 4, 6], "bools"))
    assert "true/false in 1 row (row 1) and numbers in 3 rows (rows 2, 3 and 4)" in said, said
    assert "text in others" not in said and (fmt == "parquet" or "each row's own kind (a number or true/false)" in said)
    said = " ".join(warned(["0", 2, None, 6], "gaps"))
    assert "mixes kinds: text in 1 row (row 1) and numbers in 2 rows (rows 2 and 4)" in said, said
    assert ("holds 1 value that is empty (null)" in said) == (fmt == "parquet"), said


def test_a_parquet_export_whose_labels_are_not_text_warns_that_mindspeed_rl_drops_those_rows(tmp_path):
    """A MindSpeed-RL newcomer's math set kept its answers as integers: MindSpeed-RL v2.3.0's Alpaca-style
    preprocessing (map_keys' response: the answer) makes a response that is neither text nor a list into none and drops
    the row (handler_utils.py:176), so every later row left the schedule's batches without a word. A Parquet export
    (MindSpeed-RL's format) says so, for numbers and for empty labels; text labels, and JSON lines, say nothing."""
    from asp_cli.arrange.pipeline import schedule

    def exported(answers, name, fmt="parquet"):
        data = write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": a}
                                                        for i, a in enumerate(answers)])
        made = schedule([data], tmp_path / f"{name}.s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
        return export(made.output, [data], tmp_path / f"{name}.o.{fmt}", format=fmt).warnings

    said = " ".join(exported([2 * i for i in range(6)], "ints"))
    assert ("label column 'answer' holds 6 values that are a number, not text: MindSpeed-RL's preprocessing (its "
            "Alpaca-style handlers, with 'answer' as map_keys' response) drops such rows "
            "(mindspeed_rl/datasets/handler_utils.py:176), which shifts every later row off the schedule's batches; "
            "store the labels as text and schedule that file") in said
    said = " ".join(exported(["2", None, "6", "8", "10", "12"], "gap"))
    assert "label column 'answer' holds 1 value that is empty (null): MindSpeed-RL's preprocessing" in said
    assert "MindSpeed-RL's preprocessing" not in " ".join(exported([str(2 * i) for i in range(6)], "text"))
    assert "MindSpeed-RL's preprocessing" not in " ".join(exported([2 * i for i in range(6)], "lines", "jsonl"))


def test_a_parquet_export_whose_labels_are_all_empty_or_numbers_with_gaps_says_which(tmp_path):
    """A label column with no value at all (JSON nulls throughout: Polars' Null type) was said to hold "values that
    are a number, not text", and a number column with gaps counted its empty values as numbers."""
    from asp_cli.arrange.pipeline import schedule

    def exported(answers, name):
        data = write_jsonl(tmp_path / f"{name}.jsonl", [{"id": f"q{i}", "problem": f"What is {i} + {i}?", "answer": a}
                                                        for i, a in enumerate(answers)])
        made = schedule([data], tmp_path / f"{name}.s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
        return " ".join(export(made.output, [data], tmp_path / f"{name}.o.parquet", format="parquet").warnings)

    said = exported([None] * 6, "none")
    assert "label column 'answer' holds 6 values that are empty (null): MindSpeed-RL's preprocessing" in said, said
    said = exported([2, None, 6, None, 10, 12], "gaps")
    assert ("label column 'answer' holds 4 values that are a number, not text, and 2 that are empty (null): "
            "MindSpeed-RL's preprocessing") in said, said


def test_a_parquet_export_whose_labels_are_objects_says_mindspeed_rl_drops_them(tmp_path):
    """A label column of objects exported to Parquet (MindSpeed-RL's format) was told slime's and OpenRLHF's reward
    rules alone, and not that MindSpeed-RL's preprocessing drops every row whose label is neither text nor a list:
    all of them here."""
    from asp_cli.arrange.pipeline import schedule

    data = write_jsonl(tmp_path / "o.jsonl", [{"id": f"q{i}", "problem": f"What is {i} + {i}?",
                                               "answer": {"value": 2 * i}} for i in range(6)])
    made = schedule([data], tmp_path / "o.s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=2))
    warnings = export(made.output, [data], tmp_path / "o.o.parquet", format="parquet").warnings
    assert any(w.startswith("label column 'answer' holds 6 values that are objects, not text: MindSpeed-RL's "
                            "preprocessing") for w in warnings), warnings


def test_verl_export_refuses_a_file_that_fills_no_train_batch(tmp_path):
    """E146: a newcomer's 80-prompt verl dataset, scheduled at the default batch of 128, was exported with exit 0,
    "0 batches of 128 + 80 rows" and settings to paste; verl's dataloader drops the short batch (drop_last) and
    the run has no step. Refused, with batch sizes that fit; an epoch exported alone is judged by its own rows,
    and the fully asynchronous trainer, which reads a prompt at a time, is not refused."""
    from asp_cli.arrange.pipeline import schedule

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": f"q{i}", "question": f"question {i} " * (i + 1)} for i in range(12)])
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(epochs=2, train_batch_size=16))
    with pytest.raises(SettingsError) as caught:
        export(sched, [data], tmp_path / "v.parquet", format="verl", epoch=1)
    assert str(caught.value) == (
        "s.parquet: epoch 1's 12 rows are fewer than one train batch of 16 (the schedule's --train-batch-size, "
        "verl's data.train_batch_size), and verl's dataloader drops a partial batch (drop_last=True): the file would "
        "train no step (verl stops with 'Train dataloader is empty!'); make the schedule with a --train-batch-size "
        "that divides its 12 prompts (e.g. 12, 6 or 4)") and caught.value.exit_code == 4
    assert not (tmp_path / "v.parquet").exists()
    whole = export(sched, [data], None, format="verl")  # both epochs: 24 rows, one batch of 16 (and 8 dropped)
    assert whole.summary["full_batches"] == 1
    assert export(sched, [data], None, format="jsonl").frame.height == 24  # other trainers' formats: not judged
    small = tmp_path / "small.parquet"
    schedule([data], small, settings=ScheduleSettings(train_batch_size=16))
    with pytest.raises(SettingsError, match="its 12 rows are fewer than one train batch of 16"):
        export(small, [data], None, format="verl")
    streaming = tmp_path / "async.parquet"
    schedule([data], streaming, settings=ScheduleSettings(engine="streaming", max_lag=1, train_batch_size=16))
    assert export(streaming, [data], None, format="verl").summary["verl_trainer"] == "fully-async"


def test_one_dataset_row_the_schedule_lacks_is_said_in_the_singular(built, tmp_path):  # noqa: F811
    # It read "1 dataset rows are not in the schedule ... and are not exported".
    longer = write_jsonl(tmp_path / "longer.jsonl", make_prompts(PROMPTS + 1))
    result = export(built["schedule"], [longer], tmp_path / "o.parquet")
    assert any(w.startswith("1 dataset row is not in the schedule (skipped as bad rows when scheduling?) and is not "
                            "exported") for w in result.warnings), result.warnings


def test_one_row_without_a_data_source_is_said_in_the_singular():
    # It read "1 rows have no data_source; set to 'unknown'".
    from asp_cli.integrate.verl_layout import to_verl

    _, notes = to_verl(pl.DataFrame({"prompt": ["a?", "b?"], "data_source": ["gsm8k", None], "\x00row": [0, 1]}))
    assert any(n.startswith("1 row has no data_source; set to 'unknown'. verl picks") for n in notes), notes


def test_a_verl_export_of_one_row_is_refused_in_the_singular(tmp_path):
    # It read "its 1 rows are fewer than one train batch of 16 ...; make the schedule with a --train-batch-size that
    # divides its 1 prompts (e.g. 1)".
    from asp_cli.arrange.pipeline import schedule

    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "q0", "question": "question 0"}])
    schedule([data], tmp_path / "s.parquet", settings=ScheduleSettings(train_batch_size=16))
    with pytest.raises(SettingsError) as caught:
        export(tmp_path / "s.parquet", [data], None, format="verl")
    said = str(caught.value)
    assert said.startswith("s.parquet: its 1 row is fewer than one train batch of 16 (the schedule's"), said
    assert said.endswith("make the schedule with --train-batch-size 1, or of more prompts"), said
