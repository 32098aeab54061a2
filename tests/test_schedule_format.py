import dataclasses
import json
import re
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from asp_cli.errors import ScheduleFormatError
from asp_cli.arrange.pipeline import arrange
from asp_cli.schedule_format import FORMAT_VERSION, METADATA_KEY, REQUIRED_COLUMNS, read_schedule, validate_frame, write_schedule
from asp_cli.settings import ScheduleSettings

from util import make_predictions, prompt_frame


@pytest.fixture
def frame():
    return arrange(prompt_frame(100), make_predictions(100), ScheduleSettings(instances=3))


def test_round_trip_keeps_rows_types_and_metadata(tmp_path, frame):
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    back = read_schedule(path)
    assert back.frame.equals(frame)
    assert back.metadata["format"] == "asp.schedule" and back.metadata["format_version"] == "1.0"
    assert back.instances == 3
    assert list(back.frame.columns[:8]) == ["seq", "instance", "minibatch", "epoch", "row", "prompt_id",
                                           "predicted_tokens", "train_step"]


def test_writing_twice_gives_the_same_bytes(tmp_path, frame):
    write_schedule(frame, {"a": 1}, tmp_path / "a.parquet")
    write_schedule(frame.sample(fraction=1.0, shuffle=True, seed=1), {"a": 1}, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def _rewrite_metadata(path, **changes):
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta.update(changes)
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)


def test_newer_major_version_is_refused_minor_is_read(tmp_path, frame):
    path = tmp_path / "s.parquet"
    write_schedule(frame, {}, path)
    _rewrite_metadata(path, format_version="1.7")
    assert read_schedule(path).frame.height == 100
    _rewrite_metadata(path, format_version="2.0")
    with pytest.raises(ScheduleFormatError, match="newer than this asp reads"):
        read_schedule(path)


@pytest.mark.parametrize("settings", [{"instances": "four"}, {"instances": 0}, ["not", "an", "object"]])
def test_damaged_settings_are_a_format_error(tmp_path, frame, settings):
    """Commands rebuild settings from the metadata: a bad value was an internal error (report) or a
    misleading --instances error (simulate); it is a damaged schedule (exit 6) naming the file."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    _rewrite_metadata(path, settings=settings)
    with pytest.raises(ScheduleFormatError, match=r"s\.parquet: damaged asp schedule metadata \(settings: "):
        read_schedule(path)


def test_a_schedule_of_asp_without_its_settings_or_with_a_preset_of_text_is_damaged(tmp_path, frame):
    """An audit: without `settings` every command fell back to the defaults (another run: groups of 8 for 4), and a
    recorded preset replaced by text made `asp report` crash (exit 70)."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"created_by": "asp 0.1.0", "settings": {"instances": 3}}, path)
    assert read_schedule(path).frame.height == 100
    _rewrite_metadata(path, preset="h100-qwen2.5-7b")
    with pytest.raises(ScheduleFormatError, match=r"damaged asp schedule metadata \(preset: not an object\)"):
        read_schedule(path)
    write_schedule(frame, {"created_by": "asp 0.1.0"}, path, force=True)
    with pytest.raises(ScheduleFormatError, match=r"damaged asp schedule metadata \(no settings\)"):
        read_schedule(path)


@pytest.mark.parametrize("kind", ["text", "plain-parquet", "history", "resaved"])
def test_not_a_schedule(tmp_path, kind):
    path = tmp_path / "x.parquet"
    if kind == "resaved":  # a hostile-input round: re-saved by Polars, it was "not an asp schedule" with no more said
        pl.DataFrame({name: pl.Series([], dtype=dtype) for name, dtype in REQUIRED_COLUMNS.items()}).write_parquet(path)
        fragment = ("without asp schedule metadata: it has a schedule's columns but not asp's metadata, which Polars "
                    "and pandas drop when they write a file: write edited rows with pyarrow")
    elif kind == "text":
        path.write_text("hello")
        fragment = "not a Parquet file"
    elif kind == "history":  # a newcomer gave `asp report` the history `asp observe` wrote: named as one
        pl.DataFrame({"prompt_id": ["a"], "response_tokens": [3]}).write_parquet(path)
        fragment = ("without asp schedule metadata: an asp observe history \\(observed lengths\\), not a schedule; a "
                    "history goes to --history or --lengths; give the schedule `asp schedule -o` wrote")
    else:
        pl.DataFrame({"a": [1]}).write_parquet(path)
        fragment = "without asp schedule metadata: it is not an asp schedule; give the schedule"
    with pytest.raises(ScheduleFormatError, match=fragment):
        read_schedule(path)


def test_an_export_given_as_the_schedule_is_named_as_one(tmp_path):
    """`asp export e.parquet prompts.jsonl` (the export where the schedule goes) was told only that e.parquet is no
    asp schedule (E22). It is named as an export, with the schedule it came from where its metadata records it;
    still exit 6."""
    from typer.testing import CliRunner
    from util import make_prompts, write_jsonl

    from asp_cli.arrange.pipeline import schedule
    from asp_cli.cli.main import app
    from asp_cli.integrate.export import export

    data = write_jsonl(tmp_path / "prompts.jsonl", make_prompts(8))
    sched = tmp_path / "s.parquet"
    schedule([data], sched, settings=ScheduleSettings(train_batch_size=4, minibatch_size=2, instances=2))
    for name, fmt in [("e.parquet", "parquet"), ("v.parquet", "verl"), ("e.jsonl", "jsonl")]:
        exported = tmp_path / name
        export(sched, [data], exported, format=fmt)
        recorded = "" if fmt == "jsonl" else " ('s.parquet', as the export records)"
        said = f"{exported}: an asp export, not a schedule; pass the schedule it was exported from{recorded}"
        with pytest.raises(ScheduleFormatError) as caught:
            read_schedule(exported)
        assert str(caught.value) == said
        refused = CliRunner().invoke(app, ["export", str(exported), str(data), "-o", str(tmp_path / "x.jsonl")])
        assert refused.exit_code == 6 and refused.stderr == f"Error: {said}\n", refused.stderr


def test_a_missing_schedule_is_a_bad_input_not_a_bad_format(tmp_path):
    # Exit 3 like every other missing input (docs/errors.md E11), not 6 ("not a schedule").
    from asp_cli.errors import InputError

    with pytest.raises(InputError, match=r"x\.parquet: no such file") as missing:
        read_schedule(tmp_path / "x.parquet")
    assert not isinstance(missing.value, ScheduleFormatError)
    with pytest.raises(InputError, match="is a directory"):
        read_schedule(tmp_path)


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        # These two, and an empty schedule, said what was wrong but not what to do.
        (lambda f: f.drop("train_step"), "required column 'train_step' is missing; write the schedule again$"),
        (lambda f: f.with_columns(pl.col("instance").cast(pl.Int64)),
         "column 'instance' is Int64, expected Int32; cast it back to Int32 \\(a CSV or pandas round trip widens "
         "it\\), or write the schedule again$"),
        (lambda f: f.head(0), "the schedule has no rows; write the schedule again$"),
        (lambda f: f.with_columns(pl.col("seq") * 2), "not a permutation"),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 0).then(99).otherwise(pl.col("instance")).cast(pl.Int32).alias("instance")),
         "spans several instances"),
        (lambda f: f.with_columns(pl.lit("same").alias("prompt_id")), "appears twice in one epoch"),
        # Hand-edited files: these reached the report as an internal error (negative instance) or as nonsense.
        (lambda f: f.with_columns(pl.lit(-1, pl.Int32).alias("instance")), "column 'instance' has a negative value"),
        (lambda f: f.with_columns(pl.lit(-5, pl.Int64).alias("predicted_tokens")),
         "column 'predicted_tokens' has a negative value"),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 3).then(None).otherwise(pl.col("predicted_tokens"))
                                  .alias("predicted_tokens")), "column 'predicted_tokens' has 1 missing values"),
    ],
)
def test_invariants_are_checked(frame, mutate, fragment):
    with pytest.raises(ScheduleFormatError, match=fragment):
        validate_frame(mutate(frame), where="x")


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 7).then(None).otherwise(pl.col("predicted_tokens"))
                                  .alias("predicted_tokens")), r"1 missing values, the first at row 8 \(seq 7, prompt_id "),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 4).then(-2).otherwise(pl.col("train_step"))
                                  .cast(pl.Int64).alias("train_step")), r"negative value \(-2\) at row 5 \(seq 4, "),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 9).then(3).otherwise(pl.col("seq")).alias("seq")),
         r"\(rows 4 and 10 both hold seq 3\)"),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 9).then(500).otherwise(pl.col("seq")).alias("seq")),
         r"\(row 10 holds seq 500, outside it\)"),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 2).then(pl.col("prompt_id").first())
                                  .otherwise(pl.col("prompt_id")).alias("prompt_id")),
         r"appears twice in one epoch \(prompt id '\w+' in epoch 0, first at row 1 "),
        # A row holding another prompt's number: export wrote that prompt twice and dropped one, silently.
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 5).then(pl.col("row").filter(pl.col("seq") == 4).first())
                                  .otherwise(pl.col("row")).alias("row")),
         r"columns 'row' and 'prompt_id' disagree \(row \d+ holds prompt ids '\w+' and '\w+'"),
        # A step or minibatch numbered past the rows: asp report allocated per step (7 TiB for 10**12).
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 3).then(10**12).otherwise(pl.col("train_step"))
                                  .cast(pl.Int64).alias("train_step")),
         r"column 'train_step' holds 1000000000000 at row 4 \(seq 3, .*more than any schedule's rows can number"),
        (lambda f: f.with_columns(pl.when(pl.col("seq") == 0).then(10**9).otherwise(pl.col("minibatch"))
                                  .cast(pl.Int64).alias("minibatch")),
         r"column 'minibatch' holds 1000000000 at row 1 "),
    ],
)
def test_a_broken_schedule_names_its_first_bad_row(frame, mutate, fragment):
    """Edited schedules were refused without saying where: a million-row file left the user to search."""
    with pytest.raises(ScheduleFormatError, match=fragment):
        validate_frame(mutate(frame.sort("seq")), where="x")


def test_a_row_outside_the_schedules_epochs_is_refused(tmp_path):
    """An epoch edited to 5 in a 1-epoch schedule was accepted, and export dropped that prompt silently."""
    frame = arrange(prompt_frame(20), make_predictions(20), ScheduleSettings(instances=2, epochs=2))
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 2, "epochs": 2}}, path)
    assert read_schedule(path).frame.height == 40
    edited = frame.sort("seq").with_columns(
        pl.when(pl.col("seq") == 3).then(5).otherwise(pl.col("epoch")).cast(pl.Int32).alias("epoch"))
    write_schedule(edited, {"settings": {"instances": 2, "epochs": 2}}, path, force=True)
    with pytest.raises(ScheduleFormatError, match=r"column 'epoch' holds 5 at row 4 \(seq 3, prompt_id '\w+'\), "
                                                  r"but the schedule's settings have epochs 2 \(0 to 1\)"):
        read_schedule(path)


@pytest.mark.parametrize("column, value, words", [
    ("prompt_tokens", -154, "column 'prompt_tokens' holds -154 at row 1"),
    ("predicted_mean_tokens", -3, "column 'predicted_mean_tokens' holds -3 at row 1"),
    ("predicted_max_tokens", 2**62, f"column 'predicted_max_tokens' holds {2**62} at row 1"),
    ("instance", 99, "column 'instance' holds 99 at row 1"),
    ("predicted_tokens", 0, "column 'predicted_tokens' holds 0 at row 1"),  # planned, and simulated, as no response
    ("predicted_mean_tokens", 0, "not a response length (1 to"),
    # A lag of 2**62 steps made `asp report --html` divide by zero, exit 70 (a hostile-input round, 2026-12-07).
    ("expected_lag", 2**62, f"column 'expected_lag' holds {2**62} at row 1"),
    ("expected_lag", -5, "column 'expected_lag' holds -5 at row 1"),
    ("expected_policy_version", -1, "not a count from 0 to 99,999,999"),
    ("length_class", -1, "column 'length_class' holds -1 at row 1"),
    ("position_in_minibatch", -1, "column 'position_in_minibatch' holds -1 at row 1"),
])
def test_hand_edits_that_make_impossible_runs_are_refused(tmp_path, column, value, words):
    """A hostile-input audit: negative or astronomical token counts (a lower bound above the simulated time, a
    dry run of 1.8e15 GPU-minutes) and an instance outside the fleet were read, and replayed, silently."""
    import pyarrow as pa

    frame = arrange(prompt_frame(20), make_predictions(20), ScheduleSettings(instances=2))
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 2, "epochs": 1}}, path)
    table = pq.read_table(path)
    first = table.column(column).to_pylist()
    first = [value] * len(first) if column == "instance" else [value, *first[1:]]  # a minibatch keeps one instance
    index = table.column_names.index(column)
    pq.write_table(table.set_column(index, column, pa.array(first, table.schema.field(column).type))
                   .replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(ScheduleFormatError, match=re.escape(words)):
        read_schedule(path)


def test_a_broken_recorded_preset_is_damage_not_a_reason_to_use_another(tmp_path, frame):
    """A recorded preset with a NaN field was replaced by the named preset silently (simulate) or shown as
    "preset None" (report); one with fields this version does not know still falls back (an older file)."""
    from asp_cli.costmodel import load_preset

    fields = dataclasses.asdict(load_preset("h100-qwen2.5-7b"))
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}, "preset": fields}, path)
    table = pq.read_table(path)
    document = json.loads(table.schema.metadata[METADATA_KEY])
    document["preset"]["eta_bandwidth"] = float("nan")
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(document)}), path)
    with pytest.raises(ScheduleFormatError, match=re.escape("damaged asp schedule (its recorded preset: field "
                                                            "'eta_bandwidth'")):
        read_schedule(path)
    write_schedule(frame, {"settings": {"instances": 3}, "preset": {**fields, "renamed_since": 1.0}}, path, force=True)
    assert read_schedule(path).cost_preset().name == "h100-qwen2.5-7b"


def test_interrupted_write_leaves_the_old_file(tmp_path, frame, monkeypatch):
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"v": 1}, path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pq.ParquetWriter, "write_table", boom)
    with pytest.raises(KeyboardInterrupt):
        write_schedule(frame, {"v": 2}, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.parquet"]


def test_a_calibration_key_makes_a_1_1_file_that_this_asp_reads(tmp_path, frame):
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}, "predictor": {"name": "default", "calibration": {}}}, path)
    back = read_schedule(path)
    assert back.metadata["format_version"] == "1.1"


def test_a_file_is_written_at_the_oldest_version_that_describes_it(tmp_path, frame):
    """docs/schedule-format.md: 1.1 added the prediction_source value "file", 1.2 the arrangement.kv_budget value
    "padded"; other files stay 1.0."""
    assert FORMAT_VERSION == "1.2"
    write_schedule(frame, {"arrangement": {"chosen": "long-first", "kv_budget": "padded"}}, tmp_path / "static.parquet")
    assert read_schedule(tmp_path / "static.parquet").metadata["format_version"] == "1.2"
    write_schedule(frame, {"arrangement": {"chosen": "long-first", "kv_budget": "peak"}}, tmp_path / "peak.parquet")
    assert read_schedule(tmp_path / "peak.parquet").metadata["format_version"] == "1.1"
    write_schedule(frame, {}, tmp_path / "model.parquet")
    assert read_schedule(tmp_path / "model.parquet").metadata["format_version"] == "1.0"
    mixed = frame.with_columns(pl.when(pl.col("seq") == 0).then(pl.lit("file")).otherwise(pl.col("prediction_source"))
                               .alias("prediction_source"))
    write_schedule(mixed, {"format_version": "1.0"}, tmp_path / "file.parquet")  # the frame decides, not the caller
    assert read_schedule(tmp_path / "file.parquet").metadata["format_version"] == "1.1"


def test_every_prediction_source_asp_writes_is_documented_with_its_version():
    import re

    from asp_cli.schedule_format import _VERSION_VALUES

    doc = (Path(__file__).resolve().parents[1] / "docs" / "schedule-format.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `prediction_source`"))
    assert set(re.findall(r"`(\w+)`", row)) - {"prediction_source", "string"} == {"history", "model", "file"}
    for since, column, value in _VERSION_VALUES:
        assert f"`{value}`" in row and since in row, (column, value)


def test_a_long_schedule_is_written_a_row_group_at_a_time_and_reads_back_whole(tmp_path, monkeypatch):
    import asp_cli.schedule_format as schedule_format

    monkeypatch.setattr(schedule_format, "ROW_GROUP_ROWS", 7)
    frame = arrange(prompt_frame(40), make_predictions(40), ScheduleSettings(instances=3, samples_per_prompt=2))
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"v": 1}, path)
    assert pq.ParquetFile(path).metadata.num_row_groups == -(-frame.height // 7)
    assert read_schedule(path).frame.equals(frame.sort("seq"))
    again = tmp_path / "again.parquet"
    write_schedule(frame, {"v": 1}, again)
    assert again.read_bytes() == path.read_bytes()


def test_a_schedule_says_which_kv_budget_cut_it_and_older_ones_counted_whole_groups():
    from asp_cli.schedule_format import Schedule

    frame = pl.DataFrame({"instance": [0]})
    assert Schedule(frame, {"settings": {}, "arrangement": {"kv_budget": "peak"}}).kv_budget == "peak"
    assert Schedule(frame, {"settings": {}}).kv_budget == "whole"  # written before the peak accounting
    assert Schedule(frame, {"settings": {"engine": "static"}, "arrangement": {"kv_budget": "peak"}}).kv_budget == "whole"


@pytest.mark.parametrize("arrangement", [{"kv_budget": "bogus"}, {"kv_budget": None}, "interleave"])
def test_a_damaged_kv_budget_record_is_a_format_error(tmp_path, frame, arrangement):
    """A bad arrangement.kv_budget was read as "whole" and silently changed how the baselines were cut."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"arrangement": {"kv_budget": "peak"}}, path)
    assert read_schedule(path).kv_budget == "peak"
    _rewrite_metadata(path, arrangement=arrangement)
    with pytest.raises(ScheduleFormatError, match=r"s.parquet: damaged asp schedule metadata \(arrangement.kv_budget"):
        read_schedule(path)
    _rewrite_metadata(path, arrangement={"chosen": "interleave"})  # written before the KV budget was recorded
    assert read_schedule(path).kv_budget == "whole"


def test_a_schedule_replays_with_the_preset_it_recorded_wherever_its_calibration_file_is(tmp_path, frame):
    from asp_cli.costmodel import load_preset

    calibration = tmp_path / "small.json"
    calibration.write_text(json.dumps({"base": "h100-qwen2.5-7b", "hbm_bytes": 23e9}), encoding="utf-8")
    small = load_preset(calibration)
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"preset": str(calibration)}, "preset": small.to_dict()}, path)
    calibration.unlink()  # moved, or the schedule read on another machine
    schedule = read_schedule(path)
    assert schedule.cost_preset() == small and schedule.cost_preset().kv_capacity_tokens < load_preset().kv_capacity_tokens
    assert schedule.cost_preset("a100-llama2-7b") == load_preset("a100-llama2-7b")  # --preset still wins
    _rewrite_metadata(path, preset={"no_such_field": 1}, settings={"preset": "a100-llama2-7b"})
    assert read_schedule(path).cost_preset() == load_preset("a100-llama2-7b")  # unreadable record: the name


def test_a_partial_preset_record_takes_the_missing_fields_from_its_named_preset(tmp_path, frame):
    """Fields an edited or older record lacks came from the default preset (h100's trainer costs under an
    a100 schedule's name)."""
    from asp_cli.costmodel import load_preset

    a100 = load_preset("a100-llama2-7b")
    record = {k: v for k, v in a100.to_dict().items() if k not in ("train_per_token_s", "weight_sync_s")}
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"preset": "a100-llama2-7b"}, "preset": record}, path)
    assert read_schedule(path).cost_preset() == a100


def test_a_kv_budget_value_of_a_newer_minor_version_is_read_as_whole(tmp_path, frame):
    """The format's rule: a newer minor version is compatible. A value this asp does not know, in a file that says
    it is newer, is read as whole groups; in a file of this version it is damage (above)."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"arrangement": {"kv_budget": "peak"}}, path)
    _rewrite_metadata(path, arrangement={"kv_budget": "some-later-cut"}, format_version="1.99")
    assert read_schedule(path).kv_budget == "whole"


def test_every_command_reads_one_group_size_from_a_schedule_that_lacks_it(tmp_path, frame):
    """A hand-edited file without settings.samples_per_prompt: `asp simulate` replayed groups of 8 (asp's
    default) while `asp report`, `asp observe --schedule` and the replay client read groups of 1."""
    from asp_cli.integrate.replay import Replay
    from asp_cli.report.facts import build_report

    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    schedule = read_schedule(path)
    default = ScheduleSettings().samples_per_prompt
    assert schedule.samples_per_prompt == schedule.recorded_settings.samples_per_prompt == default
    assert Replay.open(path).samples_per_prompt == default
    assert build_report(schedule)["size"]["samples_per_prompt"] == default
    write_schedule(frame, {"settings": {"instances": 3, "samples_per_prompt": 5}}, path, force=True)
    assert read_schedule(path).samples_per_prompt == Replay.open(path).samples_per_prompt == 5
    write_schedule(frame, {"settings": None}, path, force=True)
    # The train batch its rows say: 100 prompts in one step (the default train batch of 128 holds them all).
    assert read_schedule(path).recorded_settings == ScheduleSettings(instances=3, train_batch_size=100)


def test_every_command_reads_one_train_batch_size_from_a_schedule_that_lacks_it(tmp_path):
    """A hand-edited file without settings.train_batch_size: the replay client took the whole epoch as one
    train batch where `asp simulate` took asp's default of 128; both now read the most rows a step holds."""
    from asp_cli.bench.simulate import simulate_file
    from asp_cli.integrate.replay import Replay
    from asp_cli.report.facts import build_report

    made = arrange(prompt_frame(100), make_predictions(100), ScheduleSettings(instances=3, train_batch_size=16))
    path = tmp_path / "s.parquet"
    write_schedule(made, {"settings": {"instances": 3}}, path)
    schedule = read_schedule(path)
    assert schedule.recorded_settings.train_batch_size == Replay.open(path).train_batch_size == 16
    assert build_report(schedule)["size"]["train_batch_size"] == 16
    assert simulate_file(path).document["train_batch_size"] == 16
    write_schedule(made, {"settings": {"instances": 3, "train_batch_size": 20}}, path, force=True)
    assert Replay.open(path).train_batch_size == 20  # what the file says wins over what its rows suggest
    # Epochs of 20 prompts in steps of 32: every step but the first spans two epochs, and is still one batch.
    for trainer in ("arrival", "schedule"):
        spanning = arrange(prompt_frame(20), make_predictions(20), ScheduleSettings(
            instances=3, train_batch_size=32, epochs=3, trainer=trainer))
        write_schedule(spanning, {"settings": {"instances": 3}}, path, force=True)
        assert read_schedule(path).recorded_settings.train_batch_size == 32, trainer


def test_a_schedule_with_a_repeated_column_is_damaged_not_a_crash(tmp_path, frame):
    """A column written twice made every reader of the schedule exit 70 (Polars' DuplicateError)."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    table = pq.read_table(path)
    pq.write_table(table.append_column("seq", table.column("seq")), path)
    with pytest.raises(ScheduleFormatError, match=r"damaged asp schedule \(column 'seq' appears more than once\); write the schedule again"):
        read_schedule(path)


def test_a_schedule_with_a_damaged_page_is_damaged_not_a_crash(tmp_path, frame):
    """Bytes flipped in a data page header made every reader of the schedule exit 70 (Polars' ComputeError)."""
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    meta = pq.ParquetFile(path).metadata
    column = meta.schema.names.index("minibatch")
    offset = meta.row_group(0).column(column).data_page_offset + 5
    data = bytearray(path.read_bytes())
    data[offset:offset + 8] = bytes(b ^ 0xFF for b in data[offset:offset + 8])
    path.write_bytes(bytes(data))
    with pytest.raises(ScheduleFormatError, match=r"damaged asp schedule \(.*\); write the schedule again$") as info:
        read_schedule(path)
    assert "\n" not in str(info.value)


def test_flipped_bytes_in_a_schedule_are_a_format_error_never_a_crash(tmp_path, frame):
    """Bytes flipped in the pages made Polars' reader panic (a Rust backtrace, then a Python traceback, exit 1);
    seeded flips of one to three bytes must each read, or be a one-line ScheduleFormatError. In a subprocess:
    a native abort must fail this test, not end the test run."""
    import subprocess
    import sys

    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": {"instances": 3}}, path)
    code = """
import random, sys
from pathlib import Path
from asp_cli.errors import ScheduleFormatError
from asp_cli.schedule_format import read_schedule
data = Path(sys.argv[1]).read_bytes()
rng = random.Random(2)
target = Path(sys.argv[2])
for case in range(60):
    flipped = bytearray(data)
    start = rng.randrange(4, len(data) - 8)
    for k in range(rng.randrange(1, 4)):
        flipped[min(start + k, len(data) - 9)] = rng.randrange(256)
    target.write_bytes(bytes(flipped))
    try:
        read_schedule(target)
    except ScheduleFormatError as exc:
        assert "\\n" not in str(exc), (case, str(exc))
print("done")
"""
    done = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "f.parquet")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout == "done\n", (done.returncode, done.stderr[-2000:])
    assert "panicked" not in done.stderr, done.stderr[-2000:]


def test_step_numbers_past_the_rows_kept_are_no_damage(frame):
    """A schedule cut to its first rows by seq (a smoke test) keeps step numbers past the rows it kept: no
    damage; only numbers no schedule can reach are."""
    shifted = frame.sort("seq").with_columns(pl.col("train_step") + frame.height)
    assert shifted["train_step"].max() >= shifted.height
    validate_frame(shifted, where="x")


@pytest.mark.parametrize("column, value, words", [
    ("predicted_tokens", 1_000_000, "column 'predicted_tokens' holds 1000000 at row 1 (seq 0, prompt_id"),
    ("expected_finish_s", -5.0, "column 'expected_finish_s' holds -5.0 at row 1 (seq 0, prompt_id"),
    ("train_step", 1, "train step 1 holds 9 groups, more than the schedule's train_batch_size 8"),
])
def test_hand_edits_past_the_recorded_settings_are_refused(tmp_path, column, value, words):
    """A hostile-input round: a length past the cap (asp report showed a group of 1,000,000 tokens under a cap of
    8,192), a time before the run, and a step of more groups than a train batch (export said "batches of 100" of a
    step of 101) were read as written."""
    import pyarrow as pa

    settings = {"instances": 2, "epochs": 1, "max_response_tokens": 8192, "train_batch_size": 8}
    frame = arrange(prompt_frame(20), make_predictions(20), ScheduleSettings(instances=2, train_batch_size=8))
    path = tmp_path / "s.parquet"
    write_schedule(frame, {"settings": settings}, path)
    assert read_schedule(path).frame.height == 20
    table = pq.read_table(path)
    seq = table.column("seq").to_pylist()
    first = seq.index(0) if column != "train_step" else table.column("train_step").to_pylist().index(0)
    values = table.column(column).to_pylist()
    values[first] = value
    index = table.column_names.index(column)
    pq.write_table(table.set_column(index, column, pa.array(values, table.schema.field(column).type))
                   .replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(ScheduleFormatError, match=re.escape(words)):
        read_schedule(path)


def test_every_timed_as_value_and_router_key_of_the_arrangement_is_documented():
    """A schedule made with --router (slime's, OpenRLHF's) records `router`, `step_layout`, `other_layout` and the
    timed_as values slime-async and openrlhf-async in its arrangement metadata, a public contract the format doc did
    not name; and its `timed_as: verl` meant through that router, not verl's balancer (a slime newcomer's read)."""
    import inspect
    import re

    from asp_cli.arrange import choose

    doc = (Path(__file__).resolve().parents[1] / "docs" / "schedule-format.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| `arrangement`"))
    source = inspect.getsource(choose)
    written = set(re.findall(r'"([a-z-]+)"', source[source.index("timed_as=("):source.index("prompts_per_server=")]))
    assert {"verl", "verl-async", "slime-async", "openrlhf-async"} <= written, written
    for name in (*written, "router", "step_layout", "other_layout", "batches", "finish"):
        assert f"`{name}`" in row, name
    assert "not through verl's balancer" in row
