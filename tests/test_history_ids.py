"""asp_cli.reading.history_ids: `asp observe` records which ids its logs were matched by, and `asp schedule
--history` warns where its own ids name other prompts (row numbers of a changed file, row numbers against an id
column, or the other way round)."""

from __future__ import annotations

import json
import re

import pytest

from util import make_prompts, write_jsonl

from asp_cli.arrange.pipeline import schedule
from asp_cli.integrate.observe import observe, read_history
from asp_cli.reading.history_ids import ROW_NUMBER, id_warnings, recorded_ids
from asp_cli.reading.options import ReadOptions
from asp_cli.settings import ScheduleSettings

SETTINGS = ScheduleSettings(instances=2, samples_per_prompt=2, train_batch_size=8, minibatch_size=4)


def _without_ids(count: int, index_from: int = 0) -> list[dict]:
    """Prompts without an id column; a verl-style ``extra_info.index`` that is not their row number."""
    rows = make_prompts(count)
    for i, row in enumerate(rows):
        del row["id"]
        row["extra_info"] = {"index": i + index_from}
    return rows


def _log(path, ids):
    return write_jsonl(path, [{"prompt_id": str(i), "response_tokens": 50 + 3 * int(i)} for i in ids
                              for _ in range(2)])


def _id_warnings(result) -> list[str]:
    return [w for w in result.summary["warnings"] if "name prompts by" in w]


def test_row_number_ids_of_a_changed_file_are_warned_and_of_the_same_file_not(tmp_path):
    rows = _without_ids(40)
    first = write_jsonl(tmp_path / "epoch0.jsonl", rows)
    made = schedule([first], tmp_path / "s0.parquet", settings=SETTINGS)
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "log.jsonl", range(40))], history, schedule=made.output)
    _, logs = read_history(history)
    assert logs[0]["ids"]["id"] == ROW_NUMBER
    assert logs[0]["ids"]["inputs"][0]["name"] == "epoch0.jsonl"

    again = schedule([first], tmp_path / "s1.parquet", settings=SETTINGS, history=[history])
    assert _id_warnings(again) == []

    # Five rows dropped: every later row's number now names another prompt.
    second = write_jsonl(tmp_path / "epoch1.jsonl", rows[5:])
    shifted = schedule([second], tmp_path / "s2.parquet", settings=SETTINGS, history=[history])
    [warning] = _id_warnings(shifted)
    assert warning.startswith(f"{history}: its lengths name prompts by row number of another version of epoch0.jsonl")
    assert "--id-key" in warning and "--dataset" in warning


def test_row_numbers_of_the_same_files_in_another_order_are_warned(tmp_path):
    """A Hugging Face dataset's two shards, observed with --dataset in one order and scheduled in the other: every
    row number named another prompt, and the check by the files' fingerprints, a set, said nothing."""
    rows = _without_ids(40)
    shards = [write_jsonl(tmp_path / "train-00000.jsonl", rows[:20]), write_jsonl(tmp_path / "train-00001.jsonl",
                                                                                   rows[20:])]
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "log.jsonl", range(40))], history, dataset=shards[::-1])
    assert _id_warnings(schedule(shards[::-1], tmp_path / "s0.parquet", settings=SETTINGS, history=[history])) == []
    [warning] = _id_warnings(schedule(shards, tmp_path / "s1.parquet", settings=SETTINGS, history=[history]))
    assert warning == (
        f"{history}: its lengths name prompts by row number of the same files in another order (train-00001.jsonl, "
        "train-00000.jsonl, as observed; here train-00000.jsonl, train-00001.jsonl): the numbers name other prompts; "
        "give the files in the order observed, or observe the log again with --dataset in this order")


def test_row_numbers_read_against_an_id_column_and_the_reverse_are_warned(tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", _without_ids(40, index_from=50))
    by_row = tmp_path / "by_row.parquet"
    observe([_log(tmp_path / "log.jsonl", range(0, 40, 3))], by_row, dataset=[data])
    keyed = schedule([data], tmp_path / "s.parquet", settings=SETTINGS, history=[by_row],
                     read=ReadOptions(id_key="extra_info.index"))
    [warning] = _id_warnings(keyed)
    assert "by row number (of train.jsonl, as observed)" in warning
    assert "the column extra_info.index" in warning and "--dataset-id-key extra_info.index" in warning
    assert "observed against other files" not in warning  # the same file: that column is there
    # observed against another file (one without the id column: a newcomer's train_noid.parquet), the fix names it
    other = write_jsonl(tmp_path / "noid.jsonl", _without_ids(40, index_from=50)[::-1])
    by_other = tmp_path / "by_other.parquet"
    observe([_log(tmp_path / "log3.jsonl", range(0, 40, 3))], by_other, dataset=[other])
    [warning] = _id_warnings(schedule([data], tmp_path / "s4.parquet", settings=SETTINGS, history=[by_other],
                                      read=ReadOptions(id_key="extra_info.index")))
    assert "observe again against the file these prompts come from" in warning
    assert warning.endswith("the history was observed against other files (noid.jsonl), which may not have that column")

    by_index = tmp_path / "by_index.parquet"
    observe([_log(tmp_path / "log2.jsonl", range(50, 90, 3))], by_index, dataset=[data],
            read=ReadOptions(id_key="extra_info.index", id_flag="--dataset-id-key"))
    numbered = schedule([data], tmp_path / "s2.parquet", settings=SETTINGS, history=[by_index])
    [warning] = _id_warnings(numbered)
    assert "by the column extra_info.index" in warning and "pass --id-key extra_info.index" in warning
    # Read as observed: nothing to say.
    assert _id_warnings(schedule([data], tmp_path / "s3.parquet", settings=SETTINGS, history=[by_index],
                                 read=ReadOptions(id_key="extra_info.index"))) == []


def test_a_probe_log_observed_against_the_probe_instead_of_the_dataset_is_not_told_to_pass_a_missing_column(tmp_path):
    """A newcomer observed the probe log with `--dataset probe.jsonl` (the file they generated from, not the
    training file): the probe's added prompt_id is the dataset's row number, and `asp schedule train --history` said
    "pass --id-key prompt_id", which the dataset, having no such column, refused."""
    from asp_cli.integrate.probe import ProbeSettings, probe

    data = write_jsonl(tmp_path / "train.jsonl", _without_ids(40))
    probe([data], tmp_path / "probe.jsonl", settings=ProbeSettings(prompts=6))
    ids = [json.loads(line)["prompt_id"] for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "log.jsonl", ids)], history, dataset=[tmp_path / "probe.jsonl"])
    [warning] = _id_warnings(schedule([data], tmp_path / "s.parquet", settings=SETTINGS, history=[history]))
    assert "--id-key" not in warning, warning
    assert warning == (f"{history}: its lengths name prompts by the column prompt_id of other files (probe.jsonl, as "
                       "observed), and these prompts' ids are row numbers, so nothing says the ids name these "
                       "prompts; observe the log again with --dataset naming these prompts' own files (`asp probe`'s "
                       "output is not the dataset: the prompt_id it adds is the dataset's row number)")
    fixed = tmp_path / "fixed.parquet"
    observe([_log(tmp_path / "log.jsonl", ids)], fixed, dataset=[data])
    assert _id_warnings(schedule([data], tmp_path / "s2.parquet", settings=SETTINGS, history=[fixed])) == []


def test_a_verl_generation_of_a_probe_records_its_own_id_column_and_a_schedule_by_another_column_is_warned(tmp_path):
    """A verl newcomer's probe without --id-key (asp probe adds prompt_id, the dataset's row number), generated by
    verl's main_generation_server and observed as docs/probe.md says (no --dataset), then a schedule with --id-key
    extra_info.index: every probed length went to another prompt (prompts_from_history 8), unwarned. The log's own
    id column is recorded now; the schedule by row numbers, the documented pairing, is not warned."""
    import polars as pl

    from asp_cli.integrate.probe import ProbeSettings, probe

    data = write_jsonl(tmp_path / "train.jsonl", _without_ids(40, index_from=100))
    probe([data], tmp_path / "probe.parquet", settings=ProbeSettings(prompts=6), format="verl")
    generated = tmp_path / "probe_gen.parquet"
    pl.read_parquet(tmp_path / "probe.parquet").with_columns(
        pl.lit(["word " * 40], dtype=pl.List(pl.String)).alias("responses")).write_parquet(generated)
    history = tmp_path / "h.parquet"
    observed = observe([generated], history)
    assert observed.summary["log_formats"] == {"verl_generations": 1}
    assert observed.summary["columns_used"] == {"probe_gen.parquet": {"id": "prompt_id", "length": "responses"}}
    assert recorded_ids(history) == [{"inputs": [], "id": "prompt_id", "of_log": True}]
    [warning] = _id_warnings(schedule([data], tmp_path / "s.parquet", settings=SETTINGS, history=[history],
                                      read=ReadOptions(id_key="extra_info.index")))
    assert warning == (
        f"{history}: its lengths name prompts by the column prompt_id of the log itself (verl's generation output of a "
        "probe, as observed), and these prompts' ids are the column extra_info.index: the two name other prompts (asp "
        "probe adds prompt_id, the dataset's row number, where the dataset has no id column): make the probe with asp "
        "probe --id-key extra_info.index and generate and observe it again, or schedule without --id-key")
    assert _id_warnings(schedule([data], tmp_path / "s2.parquet", settings=SETTINGS, history=[history])) == []
    keyed = write_jsonl(tmp_path / "keyed.jsonl", [dict(row, uid=f"u{i}") for i, row in enumerate(_without_ids(40))])
    probe([keyed], tmp_path / "probe_u.parquet", settings=ProbeSettings(prompts=6), format="verl")
    pl.read_parquet(tmp_path / "probe_u.parquet").with_columns(
        pl.lit(["word " * 40], dtype=pl.List(pl.String)).alias("responses")).write_parquet(generated := tmp_path / "u.parquet")
    observe([generated], by_uid := tmp_path / "hu.parquet")
    [warning] = _id_warnings(schedule([keyed], tmp_path / "s3.parquet", settings=SETTINGS, history=[by_uid],
                                      read=ReadOptions(id_key="extra_info.index")))
    assert warning.endswith("and these prompts' ids are the column extra_info.index: the two name other prompts: pass "
                            "--id-key uid where these prompts hold that column, or observe the log again with --dataset "
                            "naming these prompts' own files"), warning
    assert _id_warnings(schedule([keyed], tmp_path / "s4.parquet", settings=SETTINGS, history=[by_uid])) == []


def test_dumps_observed_against_the_verl_export_alone_record_the_schedules_ids(tmp_path):
    """A verl newcomer observed the run's dumps against the file verl read (`asp export --format verl`'s, as
    docs/integrations.md allows) without --schedule: the history recorded nothing, and a schedule with --id-key
    extra_info.index took its row-number ids for indexes, every prompt another's lengths, unwarned. The export
    records what its schedule's ids name; the history takes that record."""
    import polars as pl

    from asp_cli.integrate.export import export
    from asp_cli.reading.exported import export_ids

    rows = _without_ids(24, index_from=100)
    data = tmp_path / "train.parquet"
    pl.DataFrame([{"prompt": [{"role": "user", "content": r["question"]}], "extra_info": r["extra_info"]}
                  for r in rows]).write_parquet(data)
    made = schedule([data], tmp_path / "s.parquet", settings=SETTINGS)
    exported = tmp_path / "verl.parquet"
    export(made.output, [data], exported, format="verl")
    from asp_cli.fingerprint import file_fingerprint

    assert export_ids([exported]) == {"id": ROW_NUMBER, "inputs": [{"name": "train.parquet",
                                                                    "fingerprint": file_fingerprint([data])}]}
    dump = write_jsonl(tmp_path / "1.jsonl", [{"input": f"user\n{r['question']}\nassistant\n", "output": "w " * (5 + i),
                                               "score": 1.0, "step": 1} for i, r in enumerate(rows)])
    history = tmp_path / "h.parquet"
    observe([dump], history, dataset=[exported])
    assert recorded_ids(history) == [export_ids([exported])]
    [warning] = _id_warnings(schedule([data], tmp_path / "s1.parquet", settings=SETTINGS, history=[history],
                                      read=ReadOptions(id_key="extra_info.index")))
    assert warning.startswith(f"{history}: its lengths name prompts by row number (of train.parquet, as observed), "
                              "and these prompts' ids are the column extra_info.index: the numbers name other prompts")
    assert _id_warnings(schedule([data], tmp_path / "s2.parquet", settings=SETTINGS, history=[history])) == []


def test_a_history_without_a_record_is_not_checked(tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", _without_ids(20))
    plain = _log(tmp_path / "lengths.jsonl", range(20))  # another tool's lengths file
    observed = tmp_path / "h.parquet"
    observe([plain], observed)  # neither --schedule nor --dataset: nothing says what the ids name
    assert recorded_ids(plain) == [] and recorded_ids(observed) == []
    assert id_warnings([plain, observed], {"x": "sha256:0"}, {"x": {"id": ROW_NUMBER}}) == []


def test_a_hand_edited_record_or_log_entry_of_another_kind_says_nothing_and_is_no_internal_error(tmp_path):
    """A hostile-input round (2026-12-07): a history whose list of logs held a record's input that is no object
    (`"inputs": [1]`), or a log's name that is a list or an object, stopped `asp schedule --history`, `asp report
    --lengths`, `asp predictor eval --lengths` and `asp observe --append` with an internal error (exit 70)."""
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from asp_cli.cli.main import app

    data = write_jsonl(tmp_path / "train.jsonl", make_prompts(20))
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": row["id"], "response_tokens": 50 + 3 * i}
                                               for i, row in enumerate(make_prompts(20))])
    history = tmp_path / "h.parquet"
    observe([log], history, dataset=[data])
    table = pq.read_table(history)
    document = json.loads(table.schema.metadata[b"asp.history"])
    runner = CliRunner()
    for n, edit in enumerate([lambda entry: entry["ids"].update(inputs=[1, None]),
                              lambda entry: entry.update(name=["log.jsonl"]),
                              lambda entry: entry.update(name={"a": 1})]):
        edited = json.loads(json.dumps(document))
        edit(edited["logs"][0])
        path = tmp_path / f"edited{n}.parquet"
        pq.write_table(table.replace_schema_metadata({b"asp.history": json.dumps(edited).encode()}), path)
        assert recorded_ids(path) == ([] if n == 0 else recorded_ids(history))
        result = runner.invoke(app, ["schedule", str(data), "-o", str(tmp_path / f"s{n}.parquet"), "--history",
                                     str(path), "-q"])
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, ["predictor", "eval", str(data), "--lengths", str(path), "-q", "--json"])
        assert result.exit_code == 0, result.output


def test_a_history_of_damaged_or_unknown_metadata_is_read_with_a_warning_that_the_double_count_checks_are_off(tmp_path):
    """A hostile-input round: `asp schedule --history` with a history whose metadata was not JSON, or of format 9,
    exited 0 in silence, its checks that keep a log from counting twice skipped."""
    import pyarrow.parquet as pq

    data = write_jsonl(tmp_path / "train.jsonl", make_prompts(20))
    history = tmp_path / "h.parquet"
    observe([_log(tmp_path / "log.jsonl", range(20))], history)
    table = pq.read_table(history)
    document = json.loads(table.schema.metadata[b"asp.history"])
    for name, raw, said in [
            ("bad", b"{not json", r"h_bad\.parquet: damaged asp history metadata \(not JSON\), so the checks that "
                                  r"keep a log from counting twice are off for it"),
            ("v9", json.dumps({**document, "format_version": "9.0"}).encode(),
             r"h_v9\.parquet: an asp history of format 9\.0, newer than this asp reads, so the checks that keep a log "
             r"from counting twice are off"),
            ("entry", json.dumps({**document, "logs": [{"path": 5}]}).encode(),
             r"h_entry\.parquet: damaged asp history metadata \(log entry 0 has no fingerprint")]:
        path = tmp_path / f"h_{name}.parquet"
        pq.write_table(table.replace_schema_metadata({b"asp.history": raw}), path)
        result = schedule([data], tmp_path / f"s_{name}.parquet", settings=SETTINGS, history=[path])
        assert any(re.search(said, w) for w in result.summary["warnings"]), result.summary["warnings"]
    result = schedule([data], tmp_path / "s.parquet", settings=SETTINGS, history=[history])
    assert not [w for w in result.summary["warnings"] if "counting twice are off" in w]


@pytest.mark.parametrize("version", ["1.0.0", "1", "01.0", " 1.0", "1_0.0", 1.0, None])
def test_a_history_format_version_is_major_minor_text_as_a_schedules_is(version):
    """The schedule reader refuses a format_version that is not text "MAJOR.MINOR" (E55); the history reader took
    "1.0.0", "1", "01.0" (and " 1.0", "1_0.0") as format 1. Both now read it with `parse_version` and say it alike."""
    from asp_cli.reading.history_ids import metadata_problem
    from asp_cli.schedule_format import format_version_problem

    raw = json.dumps({"format_version": version, "logs": []}).encode()
    assert metadata_problem(raw) == format_version_problem(version)
    assert metadata_problem(raw) == f"format_version {version!r} is not text \"MAJOR.MINOR\" of two whole numbers"
    assert metadata_problem(json.dumps({"format_version": "1.0", "logs": []}).encode()) is None
    assert metadata_problem(json.dumps({"format_version": "1.999", "logs": []}).encode()) is None
    assert metadata_problem(json.dumps({"logs": []}).encode()) is None  # none at all: read as this format


def _seed_said(result) -> list[str]:
    return [w for w in result.summary["warnings"] if "--seed" in w]


def test_verl_shuffled_epochs_are_not_taken_for_asp_schedules_seeds(tmp_path):
    """verl's own rollout dumps observed against the dataset verl read, epoch by epoch: verl's sampler dealt the
    epochs, no asp schedule of seed 0 or 1, so a schedule at --seed 0 is not told it deals epoch 0's shuffles again
    (a false alarm before). The same epochs as a log of ids and counts (OpenRLHF's loop) may be asp schedules'
    replays, and are still warned about; so is a dump counted against a schedule of the same seed."""
    rows = make_prompts(16)
    prompts = write_jsonl(tmp_path / "train.jsonl", rows)
    history, ids = tmp_path / "h.parquet", tmp_path / "ids.parquet"
    for epoch in range(2):
        dump = write_jsonl(tmp_path / f"{epoch + 1}.jsonl", [
            {"input": f"user: {row['question']}\nassistant:", "output": "x" * (40 + 8 * i + epoch), "score": 1.0,
             "step": epoch + 1} for i, row in enumerate(rows) for _ in range(2)])
        observe([dump], history, dataset=[prompts], epoch=epoch, append=epoch > 0)
        log = write_jsonl(tmp_path / f"lengths{epoch}.jsonl", [
            {"prompt_id": row["id"], "response_tokens": 10 + i + epoch} for i, row in enumerate(rows) for _ in range(2)])
        observe([log], ids, dataset=[prompts], epoch=epoch, append=epoch > 0)
    _, logs = read_history(history)
    assert [e["format"] for e in logs] == ["verl_legacy_dump"] * 2 and "schedule_seed" not in logs[0]["ids"]
    assert _seed_said(schedule([prompts], None, settings=SETTINGS, history=[history])) == []
    [said] = _seed_said(schedule([prompts], None, settings=SETTINGS, history=[ids]))
    assert said.startswith("the history holds epochs up to 1, and this schedule has --seed 0")
    # Observed without --epoch, the dumps number none: the default seed's check of an unnumbered run is off too.
    unnumbered = tmp_path / "unnumbered.parquet"
    observe([tmp_path / "1.jsonl", tmp_path / "2.jsonl"], unnumbered, dataset=[prompts])
    assert _seed_said(schedule([prompts], None, settings=SETTINGS, history=[unnumbered])) == []
    # Both given: the epochs of the log of ids count.
    assert len(_seed_said(schedule([prompts], None, settings=SETTINGS, history=[history, ids]))) == 1

    # A dump counted against a schedule (--schedule beside --dataset) replayed it: its seed is recorded and checked.
    made = schedule([prompts], tmp_path / "s.parquet", settings=SETTINGS)
    replayed = tmp_path / "replayed.parquet"
    observe([tmp_path / "1.jsonl"], replayed, dataset=[prompts], schedule=made.output, epoch=0)
    assert read_history(replayed)[1][0]["ids"]["schedule_seed"] == 0
    [said] = _seed_said(schedule([prompts], None, settings=SETTINGS, history=[replayed]))
    assert said.startswith(f"{replayed}: observed against a schedule made with --seed 0")  # the exact check
    assert _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, 1), history=[replayed])) == []


def test_replays_that_record_their_schedules_seed_are_judged_by_that_seed_not_by_their_epoch_numbers(tmp_path):
    """Schedules made with seeds 10, 11 and 12 for epochs 0-2, each replayed and observed with --schedule: a
    schedule at --seed 1 deals none of their shuffles (each drawn from [seed, epoch]), and was told that the
    history held epochs up to 2 and that it dealt an earlier epoch's shuffles again. It is not now; --seed 11 is
    told, by the exact check of the seed recorded. A log of ids and counts observed without --schedule beside them
    still counts its epochs."""
    rows = make_prompts(16)
    prompts = write_jsonl(tmp_path / "train.jsonl", rows)
    history = tmp_path / "h.parquet"
    for epoch, seed in enumerate([10, 11, 12]):
        made = schedule([prompts], tmp_path / f"s{epoch}.parquet", settings=replace_seed(SETTINGS, seed))
        log = write_jsonl(tmp_path / f"rollouts{epoch}.jsonl", [
            {"prompt_id": row["id"], "response_tokens": 10 + i + epoch}
            for i, row in enumerate(rows) for _ in range(2)])
        observe([log], history, schedule=made.output, epoch=epoch, append=epoch > 0)
    assert [e["ids"]["schedule_seed"] for e in read_history(history)[1]] == [10, 11, 12]
    for seed in (0, 1, 2, 3):
        assert _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, seed), history=[history])) == []
    [said] = _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, 11), history=[history]))
    assert said.startswith(f"{history}: observed against a schedule made with --seed 11, as this one is")
    # A log of no recorded seed, epoch 1, given beside them: its epoch counts, as before.
    unknown = tmp_path / "unknown.parquet"
    observe([tmp_path / "rollouts1.jsonl"], unknown, epoch=1)
    [said] = _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, 1), history=[history, unknown]))
    assert said.startswith("the history holds epochs up to 1, and this schedule has --seed 1")


def replace_seed(settings: ScheduleSettings, seed: int) -> ScheduleSettings:
    import dataclasses

    return dataclasses.replace(settings, seed=seed)


def test_an_epoch_counted_against_a_one_epoch_schedule_of_an_earlier_epochs_seed_is_warned_about(tmp_path):
    """slime's hook appends every epoch to one log, observed after each epoch with `--schedule`: epoch 1's samples
    counted against epoch 0's schedule again were taken without a word, and the record named seed 0 for epoch 1,
    which `asp schedule --history` then checks --seed against. Said now, naming the epoch; not where the schedule
    is epoch 1's own (seed 1), nor for one schedule of several epochs observed an epoch at a time."""
    import dataclasses

    rows = make_prompts(16)
    prompts = write_jsonl(tmp_path / "train.jsonl", rows)
    made = [schedule([prompts], tmp_path / f"s{seed}.parquet", settings=replace_seed(SETTINGS, seed)).output
            for seed in (0, 1)]
    lines = [{"prompt_id": row["id"], "response_tokens": 10 + i + epoch} for epoch in range(3)
             for i, row in enumerate(rows) for _ in range(2)]
    log = tmp_path / "asp_lengths.jsonl"

    def grown(epochs: int):
        return write_jsonl(log, lines[:len(rows) * 2 * epochs])

    def said(result) -> list[str]:
        return [w for w in result.warnings if "one-epoch schedule" in w]

    history = tmp_path / "h.parquet"
    assert said(observe([grown(1)], history, schedule=made[0], epoch=0)) == []
    wrong = tmp_path / "wrong.parquet"
    wrong.write_bytes(history.read_bytes())
    [warning] = said(observe([grown(2)], wrong, schedule=made[0], epoch=1, append=True))
    assert warning.startswith("these samples (epoch 1) are counted against a one-epoch schedule made with --seed 0, "
                              "as the history's samples of epoch 0 were")
    assert said(observe([grown(2)], history, schedule=made[1], epoch=1, append=True)) == []
    # Epoch 2 against epoch 1's schedule: of the one log's two epochs, the one of that seed is named.
    again = tmp_path / "again.parquet"
    again.write_bytes(history.read_bytes())
    [warning] = said(observe([grown(3)], again, schedule=made[1], epoch=2, append=True))
    assert "--seed 1, as the history's samples of epoch 1 were" in warning

    # One schedule of two epochs, each epoch observed against it: each epoch its own shuffle, nothing said.
    both = schedule([prompts], tmp_path / "both.parquet", settings=dataclasses.replace(SETTINGS, epochs=2)).output
    two = tmp_path / "two.parquet"
    assert said(observe([grown(1)], two, schedule=both, epoch=0)) == []
    assert said(observe([grown(2)], two, schedule=both, epoch=1, append=True)) == []


@pytest.mark.parametrize("first_epoch", [0, None])
def test_a_grown_log_appended_without_epoch_keeps_each_epochs_seed_record(tmp_path, first_epoch):
    """slime's hook log observed after epoch 0 against epoch 0's schedule (seed 0), then, grown, after epoch 1 against
    epoch 1's (seed 1) with --epoch forgotten: where epoch 0 had no --epoch either, the grown log replaced epoch 0's
    entry, and the history no longer recorded seed 0, so `asp schedule --history` let a schedule of seed 0 deal epoch
    0's shuffles again without a word. Each append keeps its own entry and seed record now (numbered the next epoch
    where the first had one)."""
    from asp_cli.reading.history_ids import seed_warnings

    rows = make_prompts(16)
    prompts = write_jsonl(tmp_path / "train.jsonl", rows)
    made = [schedule([prompts], tmp_path / f"s{seed}.parquet", settings=replace_seed(SETTINGS, seed)).output
            for seed in (0, 1)]
    lines = [{"prompt_id": row["id"], "response_tokens": 10 + i + 5 * epoch} for epoch in range(2)
             for i, row in enumerate(rows) for _ in range(2)]
    log, history = tmp_path / "asp_lengths.jsonl", tmp_path / "h.parquet"
    write_jsonl(log, lines[:32])
    observe([log], history, schedule=made[0], epoch=first_epoch)
    write_jsonl(log, lines)
    added = observe([log], history, schedule=made[1], append=True)
    assert added.summary["rows_added"] == 32 and not any("more than samples_per_prompt" in w for w in added.warnings)
    frame, logs = read_history(history)
    assert [(e["rows_kept"], e["ids"]["schedule_seed"]) for e in logs] == [(32, 0), (32, 1)]
    assert frame["epoch"].to_list() == ([None] * 64 if first_epoch is None else [0] * 32 + [1] * 32)
    assert seed_warnings([history], 0)[0].startswith(f"{history}: observed against a schedule made with --seed 0")


def test_one_log_of_several_epochs_counted_against_a_one_epoch_schedule_is_warned_about(tmp_path):
    """slime's hook log, grown over epochs 0-2 and observed once at the end against the last epoch's one-epoch schedule
    (seed 2): the record named seed 2 for all three epochs, nothing was said, and `asp schedule --history` then let
    --seed 0 and --seed 1 deal epochs 0's and 1's shuffles again without a word (a log observed without --schedule
    warns of them by its epoch numbers). Said now at the observe; not for one epoch, nor against a schedule of
    several epochs, which deals each its own."""
    import dataclasses

    rows = make_prompts(16)
    prompts = write_jsonl(tmp_path / "train.jsonl", rows)
    last = schedule([prompts], tmp_path / "s2.parquet", settings=replace_seed(SETTINGS, 2)).output
    log = write_jsonl(tmp_path / "asp_lengths.jsonl", [
        {"prompt_id": row["id"], "response_tokens": 10 + i + epoch, "epoch": epoch}
        for epoch in range(3) for i, row in enumerate(rows) for _ in range(2)])

    def said(result) -> list[str]:
        return [w for w in result.warnings if "one-epoch schedule" in w]

    [warning] = said(observe([log], tmp_path / "h.parquet", schedule=last))
    assert warning.startswith("these samples hold epochs 0, 1 and 2, all counted against one one-epoch schedule made "
                              "with --seed 2")
    assert "observe each epoch's log against that one" in warning
    # The history so made: its seed record says nothing of epochs 0 and 1, which count by their numbers.
    made = tmp_path / "h.parquet"
    for seed in (0, 1):
        [seen] = _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, seed), history=[made]))
        assert seen.startswith(f"the history holds epochs up to 2, and this schedule has --seed {seed}")
    assert _seed_said(schedule([prompts], None, settings=replace_seed(SETTINGS, 3), history=[made])) == []
    assert said(observe([log], tmp_path / "one.parquet", schedule=last, epoch=2)) == []
    many = write_jsonl(tmp_path / "many.jsonl", [{"prompt_id": rows[0]["id"], "response_tokens": 10, "epoch": e}
                                                 for e in range(12)])
    [warning] = said(observe([many], tmp_path / "many.parquet", schedule=last, unknown_ids="skip"))
    assert warning.startswith("these samples hold epochs 0 to 11, all counted")
    three = schedule([prompts], tmp_path / "three.parquet", settings=dataclasses.replace(SETTINGS, epochs=3)).output
    assert said(observe([log], tmp_path / "h3.parquet", schedule=three)) == []
