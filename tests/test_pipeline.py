import dataclasses
import re

import numpy as np
import polars as pl
import pytest

from asp_cli.reading import ReadOptions
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.errors import SettingsError
from asp_cli.arrange.pipeline import arrange, schedule
from asp_cli.schedule_format import recorded_command_line
from asp_cli.schedule_format import read_schedule, validate_frame
from asp_cli.settings import ScheduleSettings

from util import make_predictions, prompt_frame, write_jsonl, make_prompts


def check_invariants(frame: pl.DataFrame, s: ScheduleSettings, count: int, footprint_budget: int | None = None):
    validate_frame(frame, where="test")
    assert frame.height == count * s.epochs
    assert frame["seq"].to_list() == list(range(frame.height))
    assert frame["instance"].min() >= 0 and frame["instance"].max() < s.instances
    for epoch in range(s.epochs):
        ids = frame.filter(pl.col("epoch") == epoch)["prompt_id"]
        assert ids.n_unique() == count  # every prompt exactly once per epoch
    sizes = frame.group_by("minibatch").len()
    assert sizes["len"].max() <= s.minibatch_size
    # Each instance runs its minibatches in increasing seq, and a minibatch never spans epochs.
    assert frame.group_by("minibatch").agg(pl.col("epoch").n_unique())["epoch"].max() == 1
    steps = frame.group_by("train_step").len().sort("train_step")["len"].to_list()
    assert all(x == s.train_batch_size for x in steps[:-1]) and steps[-1] <= s.train_batch_size


@given(
    count=st.integers(1, 150),
    instances=st.integers(1, 9),
    samples=st.integers(1, 16),
    epochs=st.integers(1, 3),
    minibatch=st.integers(1, 40),
    batch=st.integers(1, 64),
    seed=st.integers(0, 1000),
)
@settings(max_examples=40, deadline=None)
def test_whole_schedules_hold_their_invariants(count, instances, samples, epochs, minibatch, batch, seed):
    s = ScheduleSettings(instances=instances, samples_per_prompt=samples, epochs=epochs, minibatch_size=minibatch,
                         train_batch_size=batch, seed=seed, max_tokens_per_minibatch=2_000_000)
    frame = arrange(prompt_frame(count), make_predictions(count, seed), s)
    check_invariants(frame, s, count)


def test_token_budget_is_respected():
    from asp_cli.arrange.choose import sample_sigma
    from asp_cli.arrange.timeline import group_kv_tokens

    preds = make_predictions(500)
    whole = ScheduleSettings(max_tokens_per_minibatch=200_000, samples_per_prompt=8, kv_budget="whole")
    frame = arrange(prompt_frame(500), preds, whole)
    tokens = frame.group_by("minibatch").agg(
        (8 * (pl.col("prompt_tokens") + pl.col("predicted_mean_tokens"))).sum().alias("t"))
    assert tokens["t"].max() <= 200_000
    # The peak accounting (the default) keeps each minibatch's expected peak within the budget, and so packs more.
    peak = arrange(prompt_frame(500), preds, dataclasses.replace(whole, kv_budget="peak"))
    share = group_kv_tokens(8, peak["prompt_tokens"].to_numpy(), peak["predicted_mean_tokens"].to_numpy(),
                            sample_sigma(peak["predicted_max_tokens"].to_numpy(), peak["predicted_mean_tokens"].to_numpy(), 8))
    per_minibatch = peak.with_columns(pl.Series("share", np.ceil(share))).group_by("minibatch").agg(pl.col("share").sum())
    assert per_minibatch["share"].max() <= 200_000
    assert peak["minibatch"].n_unique() < frame["minibatch"].n_unique()


def test_budget_below_one_prompt_is_a_settings_error():
    with pytest.raises(SettingsError, match="smaller than one prompt: prompt id 'p"):
        arrange(prompt_frame(50), make_predictions(50), ScheduleSettings(max_tokens_per_minibatch=100))


def test_epochs_get_fresh_arrangements():
    s = ScheduleSettings(epochs=2)
    frame = arrange(prompt_frame(400), make_predictions(400), s)
    first = frame.filter(pl.col("epoch") == 0)["prompt_id"].to_list()
    second = frame.filter(pl.col("epoch") == 1)["prompt_id"].to_list()
    assert first != second and sorted(first) == sorted(second)
    # Epoch 1 is dispatched after epoch 0.
    assert frame.filter(pl.col("epoch") == 1)["seq"].min() == 400


def test_long_work_starts_early_and_last_minibatches_are_short():
    preds = make_predictions(2000, seed=5)
    frame = arrange(prompt_frame(2000), preds, ScheduleSettings(instances=4))
    per_mb = frame.group_by("minibatch").agg(pl.col("predicted_tokens").max(), pl.col("seq").min(),
                                             pl.len().alias("prompts")).sort("seq")
    # Warm start: the first minibatches hold one train batch and are the shortest of the epoch.
    warm = int(np.searchsorted(np.cumsum(per_mb["prompts"].to_numpy()), 128)) + 1
    assert per_mb["prompts"].head(warm).sum() >= 128
    assert per_mb["predicted_tokens"].head(warm).max() <= np.quantile(per_mb["predicted_tokens"].to_numpy(), 0.2)
    longest = per_mb.sort("predicted_tokens", descending=True)["minibatch"][0]
    assert per_mb["minibatch"].to_list().index(longest) < warm + 4  # right after the warm start
    # The last minibatches dispatched are short ones (below the 60th percentile: the warm start has taken the
    # very shortest to the front).
    tail = per_mb.tail(4)["predicted_tokens"].to_numpy()
    assert tail.max() <= np.quantile(per_mb["predicted_tokens"].to_numpy(), 0.6)


def test_instances_are_balanced():
    frame = arrange(prompt_frame(3000), make_predictions(3000, seed=2),
                    ScheduleSettings(instances=8, arrangement="interleave"))
    ends = frame.group_by("instance").agg(pl.col("expected_minibatch_end_s").max())["expected_minibatch_end_s"]
    busy = frame.group_by("minibatch").agg(pl.col("instance").first(), (pl.col("expected_minibatch_end_s") - pl.col("expected_start_s")).first().alias("d"))
    assert ends.max() / ends.min() < 1.05
    assert busy["d"].sum() / 8 <= ends.max()


def test_a_lag_bound_spreads_long_work_over_a_slower_trainer():
    import dataclasses

    from asp_cli.costmodel import load_preset

    slow_trainer = dataclasses.replace(load_preset("h100-qwen2.5-7b"), train_per_token_s=2e-3)
    preds = make_predictions(2000, seed=5)
    settings = ScheduleSettings(instances=8, arrangement="interleave")  # the interleaving's own horizon rule
    free = arrange(prompt_frame(2000), preds, settings, preset=slow_trainer)
    held = arrange(prompt_frame(2000), preds, dataclasses.replace(settings, max_lag=50), preset=slow_trainer)
    check_invariants(held, dataclasses.replace(settings, max_lag=50), 2000)

    def last_long_seq(frame: pl.DataFrame) -> int:
        cut = frame["predicted_tokens"].quantile(0.9)
        return int(frame.filter(pl.col("predicted_tokens") >= cut)["seq"].max())

    # Without a bound, the long tail is front-loaded over the rollout's horizon; held to the trainer's pace, it
    # is spread over the trainer's, so its last minibatch is dispatched later.
    assert last_long_seq(held) > last_long_seq(free)


def test_max_lag_is_respected_by_the_estimate():
    preds = make_predictions(1500, seed=4)
    free = arrange(prompt_frame(1500), preds, ScheduleSettings(train_batch_size=32))
    assert free["expected_lag"].max() > 2
    bounded = arrange(prompt_frame(1500), preds, ScheduleSettings(train_batch_size=32, max_lag=2))
    assert bounded["expected_lag"].max() <= 2
    assert (bounded["expected_lag"] >= 0).all()


def test_a_fractional_lag_bound_holds_the_plan_to_the_next_whole_step_and_a_whole_one_stays_an_int():
    """A fraction (verl's staleness_threshold): the plan's holds count whole steps (1.5 as 2: a group may be two
    steps stale), the replay's count rule the fraction; 2.0 is the bound 2, recorded as such."""
    preds = make_predictions(1500, seed=4)
    settings = ScheduleSettings(train_batch_size=32, arrangement="long-first")
    half = arrange(prompt_frame(1500), preds, dataclasses.replace(settings, max_lag=1.5))
    two = arrange(prompt_frame(1500), preds, dataclasses.replace(settings, max_lag=2))
    assert half["expected_lag"].max() <= 2
    assert half.equals(two)  # the plan is the whole-step one; auto's timing and the replays take the fraction
    with pytest.raises(SettingsError, match="--max-lag 0.1 cannot be met"):  # as --max-lag 1 would
        arrange(prompt_frame(1500), preds, dataclasses.replace(settings, arrangement="shuffle", max_lag=0.1))
    assert ScheduleSettings(max_lag=2.0).max_lag == 2 and isinstance(ScheduleSettings(max_lag=2.0).max_lag, int)
    assert ScheduleSettings(max_lag=0.5).max_lag == 0.5
    for bad in (-0.1, float("nan"), float("inf"), True, "2"):
        with pytest.raises(SettingsError, match="--max-lag must be a number of training steps"):
            ScheduleSettings(max_lag=bad)
    with pytest.raises(SettingsError, match="max_lag takes None for no bound in Python"):  # the CLI's word
        ScheduleSettings(max_lag="none")


def test_same_inputs_same_bytes(tmp_path, prompts_file):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    s = ScheduleSettings(epochs=2, seed=3)
    schedule([prompts_file], a, settings=s, command_line=["asp", "schedule", str(prompts_file), "-o", str(a)])
    schedule([prompts_file], b, settings=s, command_line=["asp", "schedule", str(prompts_file), "-o", str(b)])
    assert a.read_bytes() == b.read_bytes()
    c = tmp_path / "c.parquet"
    schedule([prompts_file], c, settings=ScheduleSettings(epochs=2, seed=4))
    assert read_schedule(c).frame["prompt_id"].to_list() != read_schedule(a).frame["prompt_id"].to_list()


def test_schedule_records_how_it_was_made(tmp_path, prompts_file):
    out = tmp_path / "s.parquet"
    result = schedule([prompts_file], out, settings=ScheduleSettings(instances=3),
                      command_line=["asp", "schedule", str(prompts_file), "-o", str(out), "--force"])
    meta = read_schedule(out).metadata
    assert meta["format_version"] == "1.1" and meta["arrangement"]["chosen"] in ("interleave", "long-first",
                                                                               "short-first", "shuffle")
    assert meta["settings"]["instances"] == 3
    assert meta["input_fingerprint"].startswith("sha256:")
    assert meta["predictor"]["fingerprint"]
    assert meta["command_line"] == ["asp", "schedule", str(prompts_file), "-o", "OUT"]
    assert result.summary["prompts"] == 300


def test_history_rows_are_marked(tmp_path, prompts_file):
    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": "p1", "response_tokens": 5000},
                                                 {"prompt_id": "p1", "response_tokens": 7000}])
    result = schedule([prompts_file], None, history=[history])
    row = result.frame.filter(pl.col("prompt_id") == "p1")
    assert row["prediction_source"][0] == "history"


def test_history_epochs_plans_from_the_last_epochs_only(tmp_path, prompts_file):
    """--history-epochs 1: a prompt's lengths come from the history's last epoch, not the mean over all of them."""
    from asp_cli.errors import SettingsError

    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": "p1", "response_tokens": 1000 * (e + 1), "epoch": e}
                                                 for e in range(3) for _ in range(2)])
    every = schedule([prompts_file], None, history=[history]).frame.filter(pl.col("prompt_id") == "p1")
    kept = schedule([prompts_file], None, history=[history], history_epochs=1)
    last = kept.frame.filter(pl.col("prompt_id") == "p1")
    # Recorded (a library newcomer found nothing in the metadata said half the history was left out).
    assert kept.metadata["predictor"]["history_epochs"] == 1
    assert "history_epochs" not in schedule([prompts_file], None, history=[history]).metadata["predictor"]
    assert last["predicted_mean_tokens"][0] > 1.3 * every["predicted_mean_tokens"][0]
    assert 2500 <= last["predicted_mean_tokens"][0] <= 3500
    with pytest.raises(SettingsError, match="--history-epochs keeps the last epochs of --history"):
        schedule([prompts_file], None, history_epochs=1)


def test_a_later_epochs_schedule_with_an_earlier_epochs_seed_is_warned_about(tmp_path, prompts_file):
    """An OpenRLHF newcomer's epoch-by-epoch loop kept the default seed: every epoch the same train batches."""
    rows = [{"prompt_id": "p1", "response_tokens": 100, "epoch": e} for e in range(2)]
    history = write_jsonl(tmp_path / "h.jsonl", rows)
    shuffle = ScheduleSettings(arrangement="shuffle")
    again = schedule([prompts_file], None, history=[history], settings=shuffle)
    message = ("the history holds epochs up to 1, and this schedule has --seed 0: a schedule made with an earlier "
               "epoch's seed deals that epoch's shuffles again (the same train batches every epoch); give each "
               "epoch its own seed, e.g. --seed 2 (the epoch's number)")
    assert message in again.summary["warnings"]
    def steps(result):
        return result.frame.sort("prompt_id")["train_step"].to_list()

    first = schedule([prompts_file], None, settings=shuffle)
    assert steps(first) == steps(again)  # what it warns of
    own = schedule([prompts_file], None, history=[history], settings=dataclasses.replace(shuffle, seed=2))
    assert not any("--seed" in w for w in own.summary["warnings"])
    assert steps(own) != steps(first)
    probe = write_jsonl(tmp_path / "probe.jsonl", [{"prompt_id": "p1", "response_tokens": 100}])
    assert not any("--seed" in w for w in schedule([prompts_file], None, history=[probe]).summary["warnings"])
    # An epoch at the seed's own bound is told of a seed it can take (a hostile-input round got --seed 2147483648).
    last = write_jsonl(tmp_path / "last.jsonl", [{"prompt_id": "p1", "response_tokens": 100, "epoch": 2**31 - 1}])
    said = [w for w in schedule([prompts_file], None, history=[last], settings=shuffle).summary["warnings"]
            if "--seed 0" in w]
    assert said and said[0].endswith("give each epoch its own seed, one no epoch of the history was made with")


def test_a_history_observed_against_a_schedule_of_the_same_seed_is_warned_about(tmp_path, prompts_file):
    """A constant --seed 42 every epoch escaped the check by epoch numbers: observe --schedule records the seed."""
    from asp_cli.integrate.observe import observe

    made = tmp_path / "s.parquet"
    first = schedule([prompts_file], made, settings=ScheduleSettings(seed=42))
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": i, "response_tokens": 100}
                                               for i in first.frame["prompt_id"].to_list()[:10]])
    history = tmp_path / "h.parquet"
    observe([log], history, schedule=made)
    said = (f"{history}: observed against a schedule made with --seed 42, as this one is: it deals that schedule's "
            "shuffles again (the same train batches); give each epoch its own seed")
    assert said in schedule([prompts_file], None, history=[history], settings=ScheduleSettings(seed=42)).summary[
        "warnings"]
    assert not any("--seed" in w for w in schedule([prompts_file], None, history=[history],
                                                    settings=ScheduleSettings(seed=43)).summary["warnings"])


def test_history_calibrates_every_prompt_and_is_recorded(tmp_path, prompts_file):
    """History of a few prompts of source "a" at 20x the model's scale: every prompt is corrected, the fit is in
    the summary and the metadata, and the file is format 1.1 (a new optional key)."""
    plain = schedule([prompts_file], tmp_path / "plain.parquet")
    model = dict(zip(plain.frame["prompt_id"].to_list(), plain.frame["predicted_mean_tokens"].to_list()))
    rows = [{"prompt_id": f"p{i}", "response_tokens": 20 * model[f"p{i}"]} for i in range(0, 40, 2)]
    history = write_jsonl(tmp_path / "h.jsonl", rows)
    result = schedule([prompts_file], tmp_path / "s.parquet", history=[history])
    calibration = result.summary["calibration"]
    assert calibration["prompts_seen"] == 20
    assert calibration["global"]["factor"] == pytest.approx(20, rel=0.25)
    assert any("one data source (a)" in note for note in calibration["notes"])
    # The source it lacks is said in a warning (it was only a note inside the calibration).
    [lacking] = [w for w in result.summary["warnings"] if "the history has no prompt of" in w]
    other = next(c for c in calibration["sources"] if c["fitted"] == "global")
    assert f"1 data source(s) ({other['data_source']!r})" in lacking and "global correction" in lacking
    meta = read_schedule(tmp_path / "s.parquet").metadata
    assert meta["format_version"] == "1.1" and meta["predictor"]["calibration"] == calibration
    unseen = result.frame.filter(pl.col("prediction_source") == "model")
    ratio = [mean / model[pid] for pid, mean in zip(unseen["prompt_id"], unseen["predicted_mean_tokens"])]
    assert min(ratio) > 5  # the prompts without history (both sources) moved to the policy's scale


def test_no_history_is_unchanged_format_1_0_without_calibration(tmp_path, prompts_file):
    result = schedule([prompts_file], tmp_path / "s.parquet")
    meta = read_schedule(tmp_path / "s.parquet").metadata
    assert meta["format_version"] == "1.1" and meta["arrangement"]["chosen"] in ("interleave", "long-first",
                                                                               "short-first", "shuffle") and "calibration" not in meta["predictor"]
    assert "calibration" not in result.summary
    # Byte-identity with the schedules made before this change: tests/test_architecture.py (GOLDEN).


def test_history_matching_no_prompt_warns_and_keeps_the_model(tmp_path, prompts_file):
    plain = schedule([prompts_file], None)
    history = write_jsonl(tmp_path / "h.jsonl", [{"prompt_id": "other", "response_tokens": 9000}] * 3)
    result = schedule([prompts_file], None, history=[history])
    assert result.frame.equals(plain.frame)
    assert "calibration" not in result.summary and "none of the 1 prompt ids" in result.summary["warnings"][0]


@pytest.mark.parametrize("words", ["asp schedule in.jsonl", b"asp", ["asp", 3], 7, iter(["asp"])])
def test_a_command_line_that_is_no_list_of_words_is_refused_before_any_work(tmp_path, words):
    with pytest.raises(SettingsError, match="command_line takes the command's words as a list of strings"):
        recorded_command_line(words)
    with pytest.raises(SettingsError, match="command_line takes"):
        schedule([tmp_path / "absent.jsonl"], tmp_path / "s.parquet", command_line=words)
    assert not (tmp_path / "s.parquet").exists()


@pytest.mark.parametrize("kwargs, words", [
    ({"read": None}, "read must be a ReadOptions"), ({"predictor": 5}, "predictor must be a path"),
    ({"force": "no"}, "force must be True or False (got 'no')"),
])
def test_a_python_user_s_wrong_types_are_settings_errors_before_any_work(tmp_path, kwargs, words):
    """A hostile-input round: read=None was an AttributeError, predictor=5 a TypeError, force='no' replaced the
    file."""
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(8))
    out = tmp_path / "s.parquet"
    out.write_bytes(b"keep")
    with pytest.raises(SettingsError, match=re.escape(words)):
        schedule([prompts], out, **kwargs)
    assert out.read_bytes() == b"keep"


def test_a_schedule_kept_in_memory_is_taken_by_every_twin_that_takes_a_schedule(tmp_path):
    """A library newcomer's round: `schedule(..., None)` ("to keep it in memory") was a TypeError in open_schedule,
    export and report_schedule, and simulate_file's message pasted the frame; only a file could go on."""
    from asp_cli import export, open_schedule, report_schedule, simulate_file
    from asp_cli.schedule_format import read_schedule, schedule_of

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    settings = ScheduleSettings(instances=2, train_batch_size=8, minibatch_size=4)
    kept = schedule([prompts], None, settings=settings)
    written = read_schedule(schedule([prompts], tmp_path / "s.parquet", settings=settings).output)
    taken = schedule_of(kept)
    assert taken.frame.equals(written.frame) and taken.metadata == written.metadata and taken.path is None
    assert [m.rows.to_dicts() for m in open_schedule(kept).minibatches()] == [
        m.rows.to_dicts() for m in open_schedule(written.path).minibatches()]
    assert export(kept, [prompts]).frame.equals(export(written.path, [prompts]).frame)
    assert report_schedule(kept).report["schedule"]["name"] == "the schedule in memory"
    assert simulate_file(kept).document["metrics"] == simulate_file(written.path).document["metrics"]
    with pytest.raises(SettingsError, match="the schedule must be a schedule file's path, or a schedule made in memory"):
        simulate_file(kept.frame)


def test_a_schedule_changed_in_memory_is_checked_as_a_file_is(tmp_path):
    """A hostile-input round: a schedule made in memory, its frame concatenated with itself, was exported with every
    prompt twice, and a copy of a schedule read from disk with an instance past the plan's or without its prompt_id
    went on (or ended in a Polars error); the checks a file gets when it is read now apply to both."""
    import dataclasses

    import polars as pl

    from asp_cli import export, report_schedule, simulate_file
    from asp_cli.errors import ScheduleFormatError
    from asp_cli.schedule_format import read_schedule

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    settings = ScheduleSettings(instances=2, train_batch_size=8, minibatch_size=4)
    kept = schedule([prompts], None, settings=settings)
    kept.frame = pl.concat([kept.frame, kept.frame])
    with pytest.raises(ScheduleFormatError, match=r"^the schedule in memory: column 'seq' is not a permutation"):
        export(kept, [prompts], tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists()
    read = read_schedule(schedule([prompts], tmp_path / "s.parquet", settings=settings).output)
    assert simulate_file(read).document["metrics"]  # read from disk: taken as checked
    where = re.escape(f"{tmp_path / 's.parquet'} (as changed in memory): ")
    for edit, said in ((pl.col("instance") + 9, "column 'instance' holds 9"),
                       (pl.col("prompt_id").cast(pl.Categorical), "column 'prompt_id' is Categorical")):
        changed = dataclasses.replace(read, frame=read.frame.with_columns(edit))
        with pytest.raises(ScheduleFormatError, match=where + said):
            report_schedule(changed)
    with pytest.raises(ScheduleFormatError, match=where + "required column 'prompt_id' is missing"):
        simulate_file(dataclasses.replace(read, frame=read.frame.drop("prompt_id")))


def test_recorded_command_line_drops_output_placement():
    argv = ["asp", "schedule", "in.jsonl", "-o", "x.parquet", "--force", "--json", "--output=y", "--seed", "3"]
    assert recorded_command_line(argv) == ["asp", "schedule", "in.jsonl", "-o", "OUT", "--output=OUT", "--seed", "3"]
    # The value attached to the short option (Click takes -oFILE): the path was recorded, so two paths differed.
    assert recorded_command_line(["asp", "schedule", "in.jsonl", "-oa.parquet"]) == ["asp", "schedule", "in.jsonl",
                                                                                    "-oOUT"]
    # In a cluster with -q: its value next (-qo FILE) or attached (-qoFILE).
    # -q goes as it does alone, so -qo FILE records what -q -o FILE does.
    assert recorded_command_line(["asp", "schedule", "-qo", "a.parquet", "in.jsonl"]) == ["asp", "schedule", "-o",
                                                                                        "OUT", "in.jsonl"]
    assert recorded_command_line(["asp", "schedule", "-q", "-o", "a.parquet", "in.jsonl"]) == [
        "asp", "schedule", "-o", "OUT", "in.jsonl"]
    assert recorded_command_line(["asp", "schedule", "-qoa.parquet"]) == ["asp", "schedule", "-oOUT"]


def test_multiple_inputs_number_rows_across_files(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", make_prompts(10))
    rows = make_prompts(20)[10:]
    b = write_jsonl(tmp_path / "b.jsonl", rows)
    result = schedule([a, b], None)
    assert sorted(result.frame["row"].to_list()) == list(range(20))


def test_canonical_order_ignores_input_row_order():
    count = 400
    preds = make_predictions(count, seed=9)
    prompts = prompt_frame(count)
    s = ScheduleSettings(canonical_order=True, epochs=2)
    a = arrange(prompts, preds, s)
    shuffled = np.random.default_rng(1).permutation(count)
    b = arrange(prompts[shuffled].with_columns(pl.Series("row", np.arange(count))), preds[shuffled], s)
    assert a.drop("row").equals(b.drop("row"))
    # Without the option, row order is part of the input (tie-breaks follow it).
    c = arrange(prompts[shuffled], preds[shuffled], ScheduleSettings(epochs=2))
    d = arrange(prompts, preds, ScheduleSettings(epochs=2))
    assert not c.drop("row").equals(d.drop("row"))


@given(
    count=st.integers(1, 120),
    instances=st.integers(1, 6),
    epochs=st.integers(1, 2),
    seed=st.integers(0, 50),
    canonical=st.booleans(),
)
@settings(max_examples=25, deadline=None)
def test_same_seed_same_bytes_property(tmp_path_factory, count, instances, epochs, seed, canonical):
    """Whole schedules: the same inputs, settings and seed give identical rows and identical file bytes."""
    from asp_cli.schedule_format import write_schedule

    s = ScheduleSettings(instances=instances, epochs=epochs, seed=seed, canonical_order=canonical,
                         max_tokens_per_minibatch=2_000_000)
    preds = make_predictions(count, seed)
    first = arrange(prompt_frame(count), preds, s)
    second = arrange(prompt_frame(count), preds, s)
    assert first.equals(second)
    folder = tmp_path_factory.mktemp("bytes")
    write_schedule(first, {"settings": s.to_dict()}, folder / "a.parquet")
    write_schedule(second, {"settings": s.to_dict()}, folder / "b.parquet")
    assert (folder / "a.parquet").read_bytes() == (folder / "b.parquet").read_bytes()


def test_warnings_for_history_that_matches_nothing_and_an_oversized_train_batch(tmp_path):
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    stranger = write_jsonl(tmp_path / "h.jsonl", [{"id": "nobody", "response_tokens": 9}])
    result = schedule([prompts], None, history=[stranger], settings=ScheduleSettings(train_batch_size=64))
    assert any("none of the 1 prompt ids in --history" in w for w in result.summary["warnings"])
    assert any("--train-batch-size 64 is larger than the 40 prompts" in w for w in result.summary["warnings"])
    assert result.warnings == result.summary["warnings"]  # where every other result keeps them
    ids = [r["id"] for r in make_prompts(40)]
    partly = write_jsonl(tmp_path / "h2.jsonl", [{"id": ids[0], "response_tokens": 9}, {"id": "x", "response_tokens": 3}])
    result = schedule([prompts], None, history=[partly], settings=ScheduleSettings(train_batch_size=8))
    # (One prompt of history covers one of the two sources: the other source is said too.)
    idle = ("2 of the 4 instances get no minibatch (2 minibatches in all): those instances would idle through the "
            "whole rollout; plan fewer --instances or smaller minibatches (--minibatch-size)")
    assert [w for w in result.summary["warnings"] if "the history has no prompt of" not in w] == [
        "1 of the 2 prompt ids in --history are not among the prompts (their samples are ignored)", idle]
    assert schedule([prompts], None, settings=ScheduleSettings(train_batch_size=8)).summary["warnings"] == [idle]
    # Every planned instance is in the balance, the idle ones at 0 s (counted only where they had work, this
    # read "imbalance 1.0" on one minibatch); small enough minibatches give each instance work, and no warning.
    few = schedule([prompts], None, settings=ScheduleSettings(train_batch_size=8)).summary
    assert len(few["predicted_instance_busy_s"]) == 4 and few["predicted_instance_busy_s"][2:] == [0.0, 0.0]
    assert few["idle_instances"] == 2 and few["predicted_instance_imbalance"] > 1.9
    assert few["preset"] == "h100-qwen2.5-7b" and few["kv_capacity_tokens"] == 955_113
    spread = schedule([prompts], None, settings=ScheduleSettings(train_batch_size=8, minibatch_size=8)).summary
    assert spread["idle_instances"] == 0 and spread["warnings"] == []
    long = write_jsonl(tmp_path / "h3.jsonl", [{"id": ids[0], "response_tokens": 9000}, {"id": ids[1], "response_tokens": 30}])
    result = schedule([prompts], None, history=[long], settings=ScheduleSettings(train_batch_size=8, max_response_tokens=8192, minibatch_size=8))
    # (The history's 9,000 and 30 tokens set the two sources apart: most steps then hold one, which is said too.)
    assert any(w.startswith("4 of 5 training steps hold a single data source") for w in result.summary["warnings"])
    assert [w for w in result.summary["warnings"] if "the history has no prompt of" not in w
            and "single data source" not in w] == ["1 sample in --history is longer than --max-response-tokens (8,192), which "
                                          "no generation under this schedule's cap reaches; was the history made with a "
                                          "larger cap? Check --max-response-tokens"]


def test_prompts_without_text_are_scheduled_with_a_warning_naming_their_lines(tmp_path):
    """An empty chat list or empty contents were scheduled without a word."""
    from asp_cli.reading.stream import read_prompts_streamed

    rows = [{"id": f"q{i}", "prompt": [{"role": "user", "content": f"question {i}"}]} for i in range(30)]
    rows[4]["prompt"] = []
    rows[9]["prompt"] = [{"role": "user", "content": "   "}]
    rows[12]["prompt"] = {"not": "a prompt"}  # a bad row: skipped, not counted as empty
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    result = schedule([path], None, settings=ScheduleSettings(train_batch_size=8), read=ReadOptions(on_bad_row="skip"))
    assert result.frame.height == 29
    skipped, empty = result.summary["warnings"][:2]
    assert skipped.startswith("skipped 1 bad row (--on-bad-row skip), e.g. ") and skipped.endswith("p.jsonl:13")
    assert empty.startswith("2 prompts have no text (an empty chat list, or empty contents), e.g. ") and \
        "p.jsonl:5, " in empty and "p.jsonl:10;" in empty
    _, report = read_prompts_streamed([path], ReadOptions(on_bad_row="skip"), batch_bytes=200)
    assert report.empty_prompts == 2 and report.skipped_rows == 1
    # One such prompt read "1 prompts have no text ..., e.g. p.jsonl:5; they are scheduled as empty prompts".
    rows[9]["prompt"] = [{"role": "user", "content": "question 9"}]
    one = schedule([write_jsonl(tmp_path / "one.jsonl", rows)], None, settings=ScheduleSettings(train_batch_size=8),
                   read=ReadOptions(on_bad_row="skip")).summary["warnings"][1]
    assert one.startswith("1 prompt has no text (an empty chat list, or empty contents): ") and one.endswith(
        "one.jsonl:5; it is scheduled as an empty prompt, which a server may refuse: fix or drop that row"), one


def test_a_typo_sized_epoch_count_is_refused_before_any_work():
    with pytest.raises(SettingsError, match=r"--epochs 10000000 x 40 prompts is 400,000,000 schedule rows"):
        arrange(prompt_frame(40), make_predictions(40), ScheduleSettings(epochs=10_000_000))


def test_static_schedules_and_their_equal_footing_sorts_fit_the_budget_padded():
    """On the padded static engine a minibatch holds rows x (longest prompt + longest predicted maximum): the
    schedule and the baselines in its sizes are cut so (they summed N x (prompt + predicted mean))."""
    from asp_cli.bench.baselines import BASELINES

    prompts, preds = prompt_frame(400), make_predictions(400, seed=11)
    budget = 200_000
    settings = ScheduleSettings(instances=4, samples_per_prompt=8, train_batch_size=64, engine="static",
                                max_tokens_per_minibatch=budget)
    frames = {"asp": arrange(prompts, preds, settings)}
    for name in ("long-first (asp sizes)", "random (asp sizes)"):
        frames[name] = BASELINES[name].arrange(prompts, preds, settings, None)
    for name, frame in frames.items():
        padded = frame.group_by("epoch", "minibatch").agg(
            (8 * pl.len() * (pl.col("prompt_tokens").max() + pl.col("predicted_max_tokens").max())).alias("kv"))
        assert padded["kv"].max() <= budget, name
    summed = frames["asp"].group_by("epoch", "minibatch").agg(
        (8 * (pl.col("prompt_tokens") + pl.col("predicted_mean_tokens"))).sum().alias("kv"))
    assert summed["kv"].max() < budget  # what the old count saw


def test_a_synchronous_shuffle_trains_its_own_consecutive_batches_and_is_a_candidate():
    # verl's own default is a synchronous shuffle: at --max-lag 0 with a trainer that follows the schedule it
    # trains the shuffle's consecutive batches, each cut on its own (before 2026-12-05 its minibatches crossed
    # steps, it could not keep the bound, and the summary could not say what auto saves over it).
    from asp_cli.arrange.choose import choose_arrangement
    from asp_cli.arrange.pipeline import _arrange_named
    from asp_cli.costmodel import load_preset
    from asp_cli.settings import ScheduleSettings
    from util import make_predictions, prompt_frame

    settings = ScheduleSettings(instances=4, train_batch_size=30, minibatch_size=16, max_lag=0, trainer="schedule",
                                epochs=2)
    prompts, predictions = prompt_frame(90), make_predictions(90)
    frame = arrange(prompts, predictions, dataclasses.replace(settings, arrangement="shuffle"))
    assert (frame.group_by("minibatch").agg(pl.col("train_step").n_unique())["train_step"] == 1).all()
    per_step = frame.group_by("train_step").agg(pl.col("minibatch").n_unique(), pl.len()).sort("train_step")
    assert per_step["len"].to_list() == [30] * 6 and per_step["minibatch"].to_list() == [4] * 6
    from asp_cli.settings import SHUFFLE_STREAM

    shuffled = np.random.default_rng([settings.seed, 0, SHUFFLE_STREAM]).permutation(90)
    first = frame.filter(pl.col("epoch") == 0)
    for step in range(3):
        assert set(first.filter(pl.col("train_step") == step)["row"].to_list()) == set(
            shuffled[30 * step:30 * step + 30].tolist())
    choice = choose_arrangement(_arrange_named, prompts, predictions, settings, load_preset(settings.preset))
    assert "shuffle" in {c["name"] for c in choice.candidates} and "shuffle" not in choice.refused


def test_an_asynchronous_shuffle_that_the_trainer_follows_trains_its_own_consecutive_batches():
    """A verl newcomer's round (`--trainer schedule --max-lag 1`, blocking engine): a shuffle's steps were stratified
    by predicted finish, so a trainer following them waited for stragglers, auto's draws put it 1.8x per-step's
    time and the summary called per-step 44% faster than "a shuffle" where replays put it 1% ahead. Under a lag
    bound it now trains its own consecutive batches, within the bound, as fast as per-step in auto's draws; with no
    bound its steps stay stratified."""
    from asp_cli.arrange.choose import choose_arrangement
    from asp_cli.arrange.pipeline import _arrange_named
    from asp_cli.costmodel import load_preset
    from asp_cli.settings import SHUFFLE_STREAM

    settings = ScheduleSettings(instances=4, train_batch_size=30, minibatch_size=16, max_lag=1, trainer="schedule",
                                epochs=2)
    prompts, predictions = prompt_frame(90), make_predictions(90)
    frame = arrange(prompts, predictions, dataclasses.replace(settings, arrangement="shuffle"))
    shuffled = np.random.default_rng([settings.seed, 0, SHUFFLE_STREAM]).permutation(90)
    first = frame.filter(pl.col("epoch") == 0)
    for step in range(3):
        assert set(first.filter(pl.col("train_step") == step)["row"].to_list()) == set(
            shuffled[30 * step:30 * step + 30].tolist())
    assert frame["expected_lag"].max() <= 1
    choice = choose_arrangement(_arrange_named, prompts, predictions, settings, load_preset(settings.preset))
    times = {c["name"]: c["expected_end_to_end_s"] for c in choice.candidates}
    assert times["shuffle"] <= 1.1 * times["per-step"]
    free = arrange(prompts, predictions, dataclasses.replace(settings, arrangement="shuffle", max_lag=None))
    steps = free.filter(pl.col("epoch") == 0).group_by("train_step").agg(pl.col("row"))
    assert any(set(rows) != set(shuffled[30 * s:30 * s + 30].tolist()) for s, rows in steps.iter_rows())


@pytest.mark.parametrize("count", [64, 192])
def test_a_synchronous_summary_weighs_the_trainer_against_the_rollout_inside_its_makespan(count):
    # Synchronous, the makespan (the last minibatch's end) holds every step's rollout and the training of every
    # step but the last, which starts after it: the trainer binds where its steps take longer than the rollout.
    # Before, all of its steps were taken out of the makespan, the last one twice: one step of 20 s of rollout and
    # 12 s of training read "trainer_bound": true.
    from asp_cli.arrange.pipeline import plan, summarize
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    settings = ScheduleSettings(instances=4, train_batch_size=64, arrangement="per-step", max_lag=0,
                                trainer="schedule")
    predictions = make_predictions(count, seed=13).with_columns(
        (pl.col(c) // 2).clip(1) for c in ("predicted_max_tokens", "predicted_mean_tokens", "predicted_tokens"))
    frame, _ = plan(prompt_frame(count), predictions, settings, preset=preset)
    summary = summarize(frame, settings, preset)
    steps = frame.group_by("train_step").agg(pl.col("expected_start_s").min(), pl.col("expected_minibatch_end_s").max())
    rollout = float((steps["expected_minibatch_end_s"] - steps["expected_start_s"]).sum())
    assert summary["trainer_bound"] == (summary["predicted_trainer_busy_s"] > rollout)
    if count == 64:  # one step: 20 s of rollout, 12 s of training
        assert summary["predicted_rollout_makespan_s"] > summary["predicted_trainer_busy_s"]
        assert not summary["trainer_bound"]


def test_settings_given_as_a_dict_are_refused_with_the_type_to_use(prompts_file):
    with pytest.raises(SettingsError, match=r"settings must be a ScheduleSettings \(asp_cli.ScheduleSettings\("):
        schedule([prompts_file], None, settings={"instances": 2})  # type: ignore[arg-type]


def test_a_frameworks_own_log_of_most_prompts_at_the_default_seed_is_warned_about(tmp_path, prompts_file):
    """A slime newcomer made epoch 2 from the raw epoch-1 log (no epoch column, no asp observe) at the default seed:
    89% of the prompts trained in the same step again, without a word. A probe's few prompts are not warned of."""
    ids = schedule([prompts_file], None).frame["prompt_id"].to_list()
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": i, "response_tokens": 100 + k} for k, i in enumerate(ids)])
    said = ("--history numbers no epoch and records no schedule seed, and this schedule has the default --seed 0: if the "
            "rollout it logged replayed a schedule made with --seed 0 too, this one deals its shuffles again")
    assert any(w.startswith(said) for w in schedule([prompts_file], None, history=[log]).summary["warnings"])
    seeded = schedule([prompts_file], None, history=[log], settings=ScheduleSettings(seed=1))
    assert not any("--seed" in w for w in seeded.summary["warnings"])
    few = write_jsonl(tmp_path / "few.jsonl", [{"prompt_id": i, "response_tokens": 100} for i in ids[:3]])
    assert not any("--seed" in w for w in schedule([prompts_file], None, history=[few]).summary["warnings"])


def test_the_texts_the_commands_print_are_the_results_own(tmp_path):
    """A library newcomer found `asp simulate --compare`'s table and `asp report`'s text only in the commands' code."""
    from typer.testing import CliRunner

    from asp_cli import report_schedule, simulate_file
    from asp_cli.cli.main import app

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    made = schedule([prompts], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=8))
    compared = simulate_file(made.output, compare=True)
    table, verdict = compared.table(), compared.verdict()
    assert table.startswith("| arrangement") or "arrangement" in table.splitlines()[0]
    assert verdict.startswith("  asp ") and "the fastest row on equal footing (" in verdict  # instance-hours too
    printed = CliRunner().invoke(app, ["simulate", str(made.output), "--compare"])
    assert printed.exit_code == 0 and table in printed.stderr and verdict in printed.stderr
    alone = simulate_file(made.output)  # without compare=True: it said "" (a newcomer's round), as if nothing won
    for method in (alone.table, alone.verdict):
        with pytest.raises(SettingsError, match=r"make it with simulate_file\(\.\.\., compare=True\)"):
            method()
    text = report_schedule(made.output, compare=made.output).text()
    shown = CliRunner().invoke(app, ["report", str(made.output), "--compare", str(made.output)])
    assert shown.exit_code == 0 and shown.stdout.rstrip("\n") == text.rstrip("\n")


def test_a_progress_that_is_no_function_is_a_settings_error_naming_it(tmp_path):
    """`schedule(P, None, progress=5)` was "TypeError: 'int' object is not callable" from inside pipeline.py (a
    library newcomer's round); simulate_file, whose ``progress`` is the same kind of function, says the same."""
    from asp_cli import simulate_file

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(20))
    said = r"progress must be a function taking one line of text \(e\.g\. print\) or None, not "
    for value, shown in ((5, "5"), ("print", "'print'"), (0, "0")):
        with pytest.raises(SettingsError, match=said + re.escape(shown) + "$"):
            schedule([prompts], None, progress=value)
    made = schedule([prompts], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=4),
                    progress=[].append)  # any callable is taken
    with pytest.raises(SettingsError, match=said + "5$"):
        simulate_file(made.output, progress=5)


def test_made_for_names_a_framework_only_where_the_router_or_synchronous_steps_make_the_plan_one():
    """`made_for` (the summary's "made for ..." line and `--json`'s field): verl's synchronous steps behind its
    balancer, named or not; None on a blocking engine, or for verl's balancer under an asynchronous trainer."""
    from asp_cli.arrange.made_for import made_for

    for router in (None, "least-pending"):
        deal = made_for(ScheduleSettings(engine="streaming", max_lag=0, trainer="schedule", router=router))
        assert deal["framework"] == "verl" and deal["trainer"] == "synchronous"
        assert [other["options"] for other in deal["alternatives"]] == [["--router cache-aware"],
                                                                        ["--router group-round-robin"]]
    assert made_for(ScheduleSettings(max_lag=0, trainer="schedule")) is None  # blocking generate() calls
    assert made_for(ScheduleSettings(engine="streaming", max_lag=0)) is None  # groups in arrival order
    # A warm-up ahead with each step's own groups: verl's v1 trainer with asp's buffer (colocate_async unless
    # named); at a lag of 1 slime's train_async.py and OpenRLHF's --train.async_enable behind their routers.
    one = made_for(ScheduleSettings(engine="streaming", max_lag=1, trainer="schedule"))
    assert (one["framework"], one["trainer"]) == ("verl", "colocate_async")
    assert [(other["framework"], other["options"]) for other in one["alternatives"]] == [
        ("slime", ["--router cache-aware"]), ("OpenRLHF", ["--router group-round-robin"])]
    two = made_for(ScheduleSettings(engine="streaming", max_lag=2, trainer="schedule", verl_trainer="separate-async"))
    assert two["trainer"] == "separate_async" and "--verl-trainer separate-async" in two["options"]
    assert two["alternatives"] == []  # slime and OpenRLHF run a rollout ahead, not two
    named = made_for(ScheduleSettings(engine="streaming", max_lag=1, trainer="schedule", verl_trainer="colocate-async"))
    assert [other["without"] for other in one["alternatives"]] == [[], []]
    assert [other["without"] for other in named["alternatives"]] == [["--verl-trainer colocate-async"]] * 2
    assert made_for(ScheduleSettings(engine="streaming", max_lag=1)) is None  # verl's own buffer: its line says it
    assert made_for(ScheduleSettings(engine="streaming", router="round-robin")) is None  # AReaL's SPMD mode


def test_prompt_files_without_ids_read_together_are_told_their_own_index_is_no_id(tmp_path):
    """A verl newcomer's gsm8k.parquet and math.parquet (each numbering extra_info.index from 0) were told to "name the
    id column with --id-key", which of that index repeats (E07): the warning says what to do over several files."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings
    from util import write_jsonl

    files = [write_jsonl(tmp_path / f"{name}.jsonl", [{"question": f"{name} question {i}", "extra_info": {"index": i}}
                                                     for i in range(8)]) for name in ("gsm8k", "math")]
    said = [w for w in schedule(files, None, settings=ScheduleSettings(train_batch_size=8)).warnings
            if "no id column" in w]
    assert said == [
        "gsm8k.jsonl, math.jsonl have no id column, so each prompt's id is its row number; history must use the same "
        "ids (`asp observe --schedule` and `asp probe` do), or name the id column with --id-key; over several files an "
        "index each numbers from 0 (verl's extra_info.index) repeats and is no id: keep these files in this order for "
        "asp export and asp observe --dataset, or give each row an id of its own"]
    one = [w for w in schedule(files[:1], None, settings=ScheduleSettings(train_batch_size=8)).warnings
           if "no id column" in w]
    assert one and one[0].endswith("(e.g. --id-key extra_info.index, which the rows hold)")
