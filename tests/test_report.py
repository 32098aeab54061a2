import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asp_cli.costmodel import load_preset
from asp_cli.arrange.pipeline import arrange, summarize
from asp_cli.report.checks import CheckLimits, check_report, compare_reports, fact, headline
from asp_cli.report.facts import REPORT_VERSION, build_report
from asp_cli.report.files import report_schedule
from asp_cli.report.text import render_compare_text, render_text, sparkline
from asp_cli.schedule_format import OPTIONAL_COLUMNS, read_schedule, write_schedule
from asp_cli.settings import ScheduleSettings

from util import make_predictions, prompt_frame

TOP_KEYS = {"report_version", "schedule", "provenance", "headline", "size", "instances", "predicted_lengths", "minibatches",
            "padding", "queue", "effective_batch", "lag", "steps", "observed", "simulated", "minibatch_table"}


class Made:
    """A schedule written for the tests, with the summary `asp schedule` would print for it."""

    def __init__(self, frame: pl.DataFrame, summary: dict) -> None:
        self.frame, self.summary = frame, summary


def make_schedule(path, count: int = 300, **settings_values) -> Made:
    """Write a schedule of ``count`` long-tailed prompts (no predictor involved, so it is fast and stable)."""
    values = {"instances": 3, "epochs": 2, "train_batch_size": 32, "minibatch_size": 16, **settings_values}
    settings = ScheduleSettings(**values)
    preset = load_preset(settings.preset)
    frame = arrange(prompt_frame(count), make_predictions(count), settings, preset=preset)
    metadata = {
        "asp_version": "0.0-test",
        "created_by": "asp 0.0-test",
        "settings": settings.to_dict(),
        "preset": preset.to_dict(),
        "inputs": [{"name": "prompts.jsonl", "fingerprint": "sha256:" + "0" * 64}],
        "input_fingerprint": "sha256:" + "0" * 64,
        "predictor": {"name": "test", "fingerprint": "sha256:" + "1" * 64, "history_fingerprint": None},
        "command_line": ["asp", "schedule"],
    }
    write_schedule(frame, metadata, path)
    return Made(frame, summarize(frame, settings, preset))


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    return folder, make_schedule(folder / "s.parquet")


@pytest.fixture(scope="module")
def report(made):
    folder, _ = made
    return build_report(read_schedule(folder / "s.parquet"))


def test_structure_is_complete_and_json_ready(report):
    assert set(report) == TOP_KEYS
    assert report["report_version"] == REPORT_VERSION
    json.dumps(report, allow_nan=False)  # no NaN, no numpy types
    assert report["size"] == {"prompts": 300, "epochs": 2, "rows": 600, "instances": 3, "samples_per_prompt": 8,
                              "train_batch_size": 32, "minibatches": report["size"]["minibatches"],
                              "train_steps": 19, "short_steps": 1}
    assert len(report["minibatch_table"]) == report["size"]["minibatches"]
    assert report["provenance"]["input_fingerprint"].startswith("sha256:")
    assert report["provenance"]["command_line"] == "asp schedule"
    assert report["observed"] is None


def test_facts_agree_with_the_schedule_summary(made, report):
    _, result = made
    summary = result.summary
    assert report["padding"]["fraction"] == pytest.approx(summary["predicted_padding_fraction"], abs=1e-4)
    assert report["instances"]["busy_s"] == pytest.approx(summary["predicted_instance_busy_s"], abs=1e-3)
    assert report["instances"]["makespan_s"] == pytest.approx(summary["predicted_rollout_makespan_s"], abs=1e-3)
    assert report["lag"]["max"] == summary["expected_lag_max"]
    assert report["lag"]["mean"] == pytest.approx(summary["expected_lag_mean"], abs=1e-3)
    assert sum(report["instances"]["minibatches"]) == report["size"]["minibatches"]
    assert sum(report["instances"]["predicted_tokens"]) == int(result.frame["predicted_tokens"].sum())
    assert sum(c for _, c in report["lag"]["histogram"]) == 600
    assert sum(report["predicted_lengths"]["histogram"]["counts"]) == 600


def test_queue_curves_are_consistent(report):
    queue = report["queue"]
    arrived, consumed, depth = queue["arrived_groups"], queue["consumed_groups"], queue["queue_groups"]
    assert arrived[-1] == consumed[-1] == 600
    assert all(np.diff(arrived) >= 0) and all(np.diff(consumed) >= 0)
    assert all(d >= 0 for d in depth)  # the trainer never takes a group before it has arrived
    assert len(queue["step_start_s"]) == report["size"]["train_steps"]
    assert 0.0 <= queue["trainer_idle_fraction"] <= 1.0
    batch = report["effective_batch"]
    assert min(batch["live_sequences"]) >= 0 and batch["live_sequences"][-1] == 0


def test_steps_are_measured_against_their_epoch(report):
    steps = report["steps"]
    table = steps["table"]
    assert [s["step"] for s in table] == list(range(19))
    assert sum(s["groups"] for s in table) == 600
    weighted = sum(s["ratio_to_epoch_mean"] * s["groups"] for s in table) / 600
    assert weighted == pytest.approx(1.0, abs=0.02)
    assert steps["max_skew"] >= 0


def test_the_same_schedule_gives_the_same_bytes(made):
    folder, _ = made
    first = json.dumps(build_report(read_schedule(folder / "s.parquet")), sort_keys=True)
    second = json.dumps(build_report(read_schedule(folder / "s.parquet")), sort_keys=True)
    assert first == second


def test_a_schedule_without_optional_columns_reports_what_it_can(made, tmp_path):
    folder, result = made
    bare = result.frame.drop([c for c in OPTIONAL_COLUMNS if c in result.frame.columns])
    write_schedule(bare, {"settings": {"instances": 3, "samples_per_prompt": 8}}, tmp_path / "bare.parquet")
    report = build_report(read_schedule(tmp_path / "bare.parquet"))
    assert report["schedule"]["timing_columns"] is False
    assert report["queue"] is None and report["effective_batch"] is None and report["lag"] is None
    assert report["instances"]["busy_s"] is None and report["instances"]["tokens_spread"] is not None
    json.dumps(report, allow_nan=False)
    checks = check_report(report, CheckLimits(max_lag=3, max_instance_spread=5.0))
    by_name = {r["check"]: r for r in checks["results"]}
    assert not by_name["max_lag"]["passed"] and "missing" in by_name["max_lag"]["message"]
    assert by_name["max_instance_spread"]["passed"]  # falls back to the token spread
    assert by_name["max_instance_spread"]["fact"] == "instances.tokens_spread"
    assert "not available" in render_text(report)


def test_observed_lengths_equal_to_the_prediction_score_perfectly(made, tmp_path):
    folder, result = made
    first = result.frame.filter(pl.col("epoch") == 0)
    lengths = tmp_path / "lengths.csv"
    # One sample per prompt at exactly the planned length, and one prompt the schedule does not know.
    first.select("prompt_id", pl.col("predicted_tokens").alias("response_tokens")).vstack(
        pl.DataFrame({"prompt_id": ["unknown"], "response_tokens": [5]})
    ).write_csv(lengths)
    done = report_schedule(folder / "s.parquet", lengths=[lengths])
    observed = done.report["observed"]
    assert observed["prompts_matched"] == 300 and observed["prompts_unmatched"] == 0
    assert observed["observed_not_in_schedule"] == 1
    assert observed["spearman"] == pytest.approx(1.0)
    assert observed["median_abs_log_error"] == 0.0
    assert observed["tail_recall"] == 1.0
    assert observed["padding_fraction"] == pytest.approx(done.report["padding"]["fraction"], abs=1e-4)
    assert observed["files"] == ["lengths.csv"]
    text = render_text(done.report)
    assert "Observed lengths" in text and "Spearman 1.000" in text


def test_more_samples_of_a_prompt_than_a_group_holds_are_cut_to_the_first_n(made, tmp_path):
    """A log of two epochs (or a file given twice) pooled 16 samples a prompt into one group maximum, silently,
    where asp simulate replays the first 8 (a hostile-input round): the first N are compared, and it is said."""
    folder, result = made
    first = result.frame.filter(pl.col("epoch") == 0)
    one = first.select("prompt_id", pl.lit(100).alias("response_tokens"))
    lengths = tmp_path / "twice.csv"
    pl.concat([one] * 8 + [one.with_columns(pl.lit(9000).alias("response_tokens"))] * 8).write_csv(lengths)
    done = report_schedule(folder / "s.parquet", lengths=[lengths])
    assert any("300 prompts have more than the schedule's 8 samples per prompt in --lengths" in w
               for w in done.warnings)
    assert done.report["observed"]["prompts_matched"] == 300
    single = tmp_path / "one_over.csv"  # one prompt over: it read "1 prompts have more than"
    pl.concat([one] * 8 + [one.head(1)]).write_csv(single)
    assert any(w.startswith("1 prompt has more than the schedule's 8 samples per prompt in --lengths")
               for w in report_schedule(folder / "s.parquet", lengths=[single]).warnings)
    cut = tmp_path / "once.csv"
    pl.concat([one] * 8).write_csv(cut)
    assert done.report["observed"] == {**report_schedule(folder / "s.parquet", lengths=[cut]).report["observed"],
                                       "files": ["twice.csv"]}
    # Two numbered epochs of a group each are not told of a larger rollout.n (a verl newcomer's round, 2026-12-07:
    # "remake the schedule with --samples-per-prompt 16" for two epochs of 8). The schedule's own two epochs are
    # each compared with their own group, no more than N (report 1.7); two it does not number pool as before.
    epochs = tmp_path / "epochs.csv"
    pl.concat([one.with_columns(pl.lit(e).alias("epoch")) for e in (0, 1) for _ in range(8)]).write_csv(epochs)
    assert not report_schedule(folder / "s.parquet", lengths=[epochs]).warnings
    pl.concat([one.with_columns(pl.lit(e).alias("epoch")) for e in (2, 3) for _ in range(8)]).write_csv(epochs)
    said = [w for w in report_schedule(folder / "s.parquet", lengths=[epochs]).warnings if "in --lengths" in w]
    assert said and said[0].endswith("each of its 2 epochs holds at most 8 samples of a prompt, as the schedule's "
                                     "groups do") and "--samples-per-prompt" not in said[0]
    # It names the option that picks one epoch, as asp simulate's warning does (it said "give one epoch's lengths").
    assert "give one epoch's lengths to compare that one (or pick it with --lengths-epoch E; of a history of " \
           "several epochs, the oldest is compared)" in said[0]



def _probe_then_epoch(result, tmp_path):
    """A history of one probe sample (no epoch, 9,000 tokens) and then epoch 0's 8 (100 tokens) per prompt."""
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id")
    probe = one.with_columns(pl.lit(9000).alias("response_tokens"), pl.lit(None, pl.Int32).alias("epoch"))
    epoch = one.with_columns(pl.lit(100).alias("response_tokens"), pl.lit(0, pl.Int32).alias("epoch"))
    history = tmp_path / "history.parquet"
    pl.concat([probe] + [epoch] * 8).write_parquet(history)
    return one, epoch, history


def test_a_probe_before_the_epochs_of_a_history_is_left_out_as_asp_simulate_leaves_it_out(made, tmp_path):
    """A history of a probe (no epoch) and then epoch 0 counted each prompt's probe sample with its group, 9 of 8,
    and compared the probe's sample and 7 of the epoch's, where asp simulate replays the epoch's 8."""
    folder, result = made
    one, epoch, history = _probe_then_epoch(result, tmp_path)
    done = report_schedule(folder / "s.parquet", lengths=[history])
    assert not any("more than the schedule's 8 samples" in w for w in done.warnings), done.warnings
    alone = tmp_path / "epoch.parquet"
    pl.concat([epoch] * 8).write_parquet(alone)
    assert done.report["observed"] == {**report_schedule(folder / "s.parquet", lengths=[alone]).report["observed"],
                                       "files": ["history.parquet"]}


def test_epochs_out_of_order_compare_each_epochs_own_samples_as_asp_simulate_replays_them(made, tmp_path):
    """A history of epoch 1 and then epoch 0 (its files given late one first) compared epoch 1's samples, the first
    N in the file's order, where asp simulate replays the oldest epoch's; since report 1.7 each schedule epoch is
    compared with its own, whatever the files' order."""
    folder, result = made
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id")
    late = one.with_columns(pl.lit(9000).alias("response_tokens"), pl.lit(1, pl.Int32).alias("epoch"))
    early = one.with_columns(pl.lit(100).alias("response_tokens"), pl.lit(0, pl.Int32).alias("epoch"))
    history, ordered = tmp_path / "history.parquet", tmp_path / "ordered.parquet"
    pl.concat([late] * 8 + [early] * 8).write_parquet(history)
    pl.concat([early] * 8 + [late] * 8).write_parquet(ordered)
    done = report_schedule(folder / "s.parquet", lengths=[history])
    assert done.report["observed"] == {**report_schedule(folder / "s.parquet", lengths=[ordered]).report["observed"],
                                       "files": ["history.parquet"]}
    assert done.report["observed"]["quantiles"]["p0"] == 100 and done.report["observed"]["quantiles"]["p100"] == 9000


def test_a_log_of_two_epochs_compares_each_schedule_epoch_with_its_own_as_the_replay_matches_them(made, tmp_path):
    """A two-epoch schedule and a log of two epochs of different lengths: --lengths compared the oldest epoch alone
    (each prompt's first N samples, in every epoch), where --simulate replays each epoch with the log's own
    (`simulated.lengths.epochs_replayed`). The comparison now takes each row's samples as the replay does, says which
    epochs it compared, and counts the prompts of an epoch the log holds no sample of (they take their others')."""
    from asp_cli.report.observed import observed_by_epoch
    from asp_cli.sim.lengths import lengths_for_schedule

    folder, result = made
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id", "predicted_tokens")
    rows = []
    for k in range(8):  # epoch 0 at the predictions, epoch 1 half as long; each sample its own length
        rows.append(one.select("prompt_id", (pl.col("predicted_tokens") - k).alias("response_tokens"),
                               pl.lit(0, pl.Int32).alias("epoch")))
        later = one.tail(one.height - (10 if k < 4 else 30))  # 10 prompts without epoch 1, 20 with 4 of its samples
        rows.append(later.select("prompt_id", (pl.col("predicted_tokens") // 2 + k).alias("response_tokens"),
                                 pl.lit(1, pl.Int32).alias("epoch")))
    history = tmp_path / "two.parquet"
    samples = pl.concat(rows)
    samples.write_parquet(history)
    done = report_schedule(folder / "s.parquet", lengths=[history], simulate=True)
    observed = done.report["observed"]
    assert observed["epochs_compared"] == [
        {"schedule_epoch": 0, "lengths_epoch": 0, "prompts": 300, "prompts_from_other_epochs": 0},
        {"schedule_epoch": 1, "lengths_epoch": 1, "prompts": 300, "prompts_from_other_epochs": 10}]
    assert observed["epochs_left_out"] == [] and not done.warnings, done.warnings
    replayed = done.report["simulated"]["lengths"]["epochs_replayed"]
    assert [(e["schedule_epoch"], e["lengths_epoch"]) for e in replayed] == [(0, 0), (1, 1)]
    # Each row's observed group max is the replay's: its own epoch's samples first, then its others', the first 8.
    frame = result.frame.sort("seq")
    lengths, _ = lengths_for_schedule(frame, samples, samples_per_prompt=8)
    expected = frame.select("prompt_id", "epoch", pl.Series("top", lengths.max(axis=1)))
    joined = expected.join(observed_by_epoch(samples, result.frame, 8).rows, on=["prompt_id", "epoch"])
    assert joined.height == 600 and (joined["top"] == joined["observed_max_tokens"]).all()
    # Epoch 1's halved lengths are compared: the oldest epoch's group maxima alone are the predictions.
    assert observed["quantiles"]["p0"] < int(one["predicted_tokens"].min())
    assert observed["samples"] == 300 * 8 * 2
    text = " ".join(done.text().split())
    assert ("compared: schedule epochs 0 and 1 with the lengths' own, as --simulate replays each (10 prompts "
            "without a sample of its epoch with its other epochs')") in text
    # A log of one epoch, unnumbered: the schedule's first epoch compared, and the other said left out.
    plain = tmp_path / "plain.parquet"
    samples.filter(pl.col("epoch") == 0).drop("epoch").write_parquet(plain)
    alone = report_schedule(folder / "s.parquet", lengths=[plain])
    assert alone.report["observed"]["epochs_compared"] == [
        {"schedule_epoch": 0, "lengths_epoch": None, "prompts": 300, "prompts_from_other_epochs": 0}]
    assert ("compared: schedule epoch 0 with each prompt's first samples, oldest epoch first; epoch 1 left out (the "
            "same lengths would stand for it again)") in " ".join(alone.text().split())


def test_the_schedule_compared_matches_its_own_epochs_with_the_lengths(made, tmp_path):
    """--compare B's observed facts used A's lengths per prompt; matched by epoch, B's rows are its own epochs'."""
    folder, result = made
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id")
    history = tmp_path / "two.parquet"
    pl.concat([one.with_columns(pl.lit(100 * (e + 1) + k).alias("response_tokens"), pl.lit(e, pl.Int32).alias("epoch"))
               for e in (0, 1) for k in range(8)]).write_parquet(history)
    for epochs in (1, 2):
        other = tmp_path / f"b{epochs}.parquet"
        make_schedule(other, epochs=epochs, instances=4)
        done = report_schedule(folder / "s.parquet", lengths=[history], compare=other)
        assert done.other["observed"] == report_schedule(other, lengths=[history]).report["observed"]
        assert len(done.other["observed"]["epochs_compared"]) == (2 if epochs == 2 else 0)


def test_lengths_epoch_compares_and_replays_one_epoch_as_asp_simulate_does(made, tmp_path):
    """`asp report` left a probe's samples out as `asp simulate` does, but had no --lengths-epoch to pick one epoch of
    a history (or the probe): it now takes simulate's, with its meaning, its checks and its messages (E110), and
    says the epoch it kept in ``observed.epoch`` and, replayed, in ``simulated.lengths.epoch`` (simulate's key)."""
    from asp_cli.bench.simulate import simulate_file
    from asp_cli.errors import SettingsError
    from asp_cli.sim.options import ReplayOptions

    folder, result = made
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id")
    probe = one.with_columns(pl.lit(50).alias("response_tokens"), pl.lit(None, pl.Int32).alias("epoch"))
    early = one.with_columns(pl.lit(100).alias("response_tokens"), pl.lit(0, pl.Int32).alias("epoch"))
    late = one.with_columns(pl.lit(3000).alias("response_tokens"), pl.lit(1, pl.Int32).alias("epoch"))
    history, alone = tmp_path / "history.parquet", tmp_path / "late.parquet"
    pl.concat([probe] + [early] * 8 + [late] * 8).write_parquet(history)
    pl.concat([late] * 8).write_parquet(alone)
    schedule = folder / "s.parquet"
    done = report_schedule(schedule, lengths=[history], lengths_epoch=1, simulate=True)
    # The same lengths compared, said of another epoch: with --lengths-epoch 1, the schedule's first epoch with the
    # lengths' epoch 1; the file of epoch 1 alone, the schedule's epoch 1 with its own.
    apart = ("epochs_compared", "epochs_left_out")
    assert {k: v for k, v in done.report["observed"].items() if k not in apart} == {
        **{k: v for k, v in report_schedule(schedule, lengths=[alone]).report["observed"].items() if k not in apart},
        "files": ["history.parquet"], "epoch": 1}
    assert done.report["observed"]["epochs_compared"] == [
        {"schedule_epoch": 0, "lengths_epoch": 1, "prompts": 300, "prompts_from_other_epochs": 0}]
    assert "compared: schedule epoch 0 with the lengths' epoch 1; epoch 1 left out (the same lengths would stand " \
           "for it again)" in " ".join(done.text().split())
    assert done.report["observed"]["quantiles"]["p50"] == 3000 and not done.warnings, done.warnings
    replayed = simulate_file(schedule, [history], options=ReplayOptions(lengths_epoch=1)).document
    simulated = done.report["simulated"]
    assert simulated["lengths"]["epoch"] == replayed["lengths"]["epoch"] == 1
    assert simulated["metrics"]["end_to_end_s"] == round(replayed["metrics"]["end_to_end_s"], 4)
    assert "observed lengths (epoch 1) for 300 prompts" in " ".join(done.text().split())
    assert report_schedule(schedule, lengths=[history]).report["observed"]["epoch"] is None
    probed = report_schedule(schedule, lengths=[history], lengths_epoch=-1).report["observed"]
    assert probed["epoch"] == -1 and probed["samples"] == 300 and probed["quantiles"]["p100"] == 50
    said = {epoch: str(pytest.raises(SettingsError, report_schedule, schedule, lengths=lengths,
                                     lengths_epoch=epoch).value)
            for epoch, lengths in ((3, [history]), (0, []), (-2, [history]))}
    assert said[3] == (f"--lengths-epoch 3: {history} holds epochs 0 and 1, and samples without an epoch (a "
                       "probe's: --lengths-epoch -1); give one of those, or leave --lengths-epoch out")
    assert said[0] == "--lengths-epoch picks an epoch of the --lengths files: give --lengths too, or leave it out"
    assert said[-2].startswith("--lengths-epoch must be a whole number from -1 to 2147483647 (got -2)")
    assert "(in Python: lengths_epoch for --lengths-epoch)" in said[-2]
    # Two files of one epoch: more samples than a group holds, said as a file given twice (not several epochs).
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(alone.read_bytes())
    twice = report_schedule(schedule, lengths=[alone, copy], lengths_epoch=1).warnings
    assert any("(of epoch 1 alone: a file given twice?)" in w and "give each file once" in w for w in twice), twice


def test_a_replays_padding_says_what_its_idle_slot_steps_are_for_the_plans_engine(tmp_path):
    """A streaming plan's replay showed "padding (idle slot-steps)" on the page and a bare "padding 66.1%" in the
    text: on servers that refill freed slots there is no static batch, and nothing said what was idle. Each says,
    for the replay's engine, what it counts."""
    from asp_cli.report.html import render_html

    said = {}
    for engine in ("streaming", "continuous"):
        path = tmp_path / f"{engine}.parquet"
        make_schedule(path, 120, arrangement="shuffle", engine=engine, max_lag=1)
        done = report_schedule(path, simulate=True)
        padding = done.report["simulated"]["metrics"]["padding_fraction"]
        said[engine] = " ".join(done.text().split())
        assert f"padding {padding:.1%} (idle slot-steps: each decode step's slots below " in said[engine]
        assert "<td>padding (idle slot-steps: each decode step&#x27;s slots below " in render_html(done.report)
    assert ("the sequences of the requests last sent to that server (at most its max_num_seqs), left empty because no "
            "request waited to refill them, as a step's or the run's last requests drain or --max-lag holds the "
            "server)") in said["streaming"]
    assert ("its minibatch's sequences (at most max_num_seqs), left by sequences that ended before the minibatch's "
            "longest)") in said["continuous"]


def test_a_synchronous_plans_queue_depth_says_why_it_has_no_peak_to_read(tmp_path):
    """A synchronous plan (--max-lag 0) showed "queue depth ... (peak 30 groups)", unexplained: its trainer takes
    each step's groups at once, so the depth fills to about one train batch and empties every step. The peak is
    left out there, and the reason said in its place (on the page, in the depth plot's legend)."""
    from asp_cli.report.html import render_html

    synchronous, bounded = tmp_path / "sync.parquet", tmp_path / "lag.parquet"
    make_schedule(synchronous, 120, max_lag=0, trainer="schedule")
    make_schedule(bounded, 120, max_lag=2)
    sync_report = build_report(read_schedule(synchronous))
    depth = next(line for line in render_text(sync_report, width=400).splitlines() if "queue depth" in line)
    assert "peak" not in depth and depth.endswith(
        "(synchronous (--max-lag 0): each step's groups wait here for its last, and the trainer takes them at once, "
        "so the depth fills to one train batch (32 groups) and empties every step)")
    assert "groups waiting in the queue (synchronous (--max-lag 0): each step&#x27;s groups wait here" in \
        render_html(sync_report)
    lag_report = build_report(read_schedule(bounded))
    depth = next(line for line in render_text(lag_report, width=400).splitlines() if "queue depth" in line)
    assert depth.endswith(f"(peak {max(lag_report['queue']['queue_groups']):,} groups)")
    assert "groups waiting in the queue</span>" in render_html(lag_report)


def test_compare_with_itself_changes_nothing(report):
    comparison = compare_reports(report, report)
    assert comparison["facts"]
    for row in comparison["facts"]:
        assert row["a"] == row["b"]
        assert row["change"] in (0, None)
        assert row["better"] in ("same", None)
    assert "better" in render_compare_text(comparison)


def test_compare_says_which_is_better(report):
    worse = json.loads(json.dumps(report))
    worse["padding"]["fraction"] = report["padding"]["fraction"] + 0.1
    row = next(r for r in compare_reports(report, worse)["facts"] if r["fact"] == "padding.fraction")
    assert row["better"] == "a" and row["change"] == pytest.approx(0.1)
    # Made with the same predictions: comparable as they are. With another predictor (or history), said so.
    assert compare_reports(report, worse)["predictions_differ"] is False
    other = json.loads(json.dumps(report))
    other["provenance"]["predictor"]["fingerprint"] = "sha256:" + "2" * 64
    comparison = compare_reports(report, other)
    assert comparison["predictions_differ"] is True
    assert "made with different predictions" in " ".join(render_compare_text(comparison, width=200).split())
    # Then no fact of predicted lengths gets a verdict (a probe newcomer read "better b" of a schedule made without
    # the probe's history: 105.8 s against 2,251 s, the predictor's units), and the reason is said once.
    other["padding"]["fraction"] = report["padding"]["fraction"] + 0.1
    row = next(r for r in compare_reports(report, other)["facts"] if r["fact"] == "padding.fraction")
    assert row["better"] is None and row["note"].startswith("each under its own predictions")
    text = " ".join(render_compare_text(compare_reports(report, other), width=200).split())
    assert "no verdict; each under its own" not in text and "none but the observed ones gets a verdict" in text
    other["provenance"]["predictor"] = {**report["provenance"]["predictor"], "history_fingerprint": "sha256:" + "3" * 64}
    assert compare_reports(report, other)["predictions_differ"] is True


def test_report_schedule_names_same_named_files_by_path(made, tmp_path):
    folder, _ = made
    other = tmp_path / "s.parquet"
    other.write_bytes((folder / "s.parquet").read_bytes())
    done = report_schedule(folder / "s.parquet", compare=other)
    assert done.comparison["a"] == str(folder / "s.parquet") and done.comparison["b"] == str(other)
    document = done.document
    assert document["comparison"]["other"]["size"] == done.report["size"]
    assert document["checks"] is None


def test_compare_says_when_the_other_schedule_is_for_another_run(made, tmp_path):
    """A hostile-input round: 3 epochs on `static` against 1 streaming, B "better" on its last step's end without
    a word. Settings of the arrangement (the seed, --arrangement) are what a comparison weighs: not said."""
    folder, _ = made
    make_schedule(tmp_path / "other.parquet", epochs=1, engine="streaming", max_lag=1)
    make_schedule(tmp_path / "seed.parquet", seed=5, arrangement="long-first")
    done = report_schedule(folder / "s.parquet", compare=tmp_path / "other.parquet")
    said = [w for w in done.warnings if "made for another run" in w]
    assert len(said) == 1 and ("(--epochs 2 here, 1 there; --engine continuous here, streaming there; --max-lag none "
                               "here, 1 there)") in said[0]
    assert not [w for w in report_schedule(folder / "s.parquet", compare=tmp_path / "seed.parquet").warnings
                if "another run" in w]


def test_checks_pass_and_fail_on_the_limits(report):
    padding = report["padding"]["fraction"]
    passed = check_report(report, CheckLimits(max_padding=padding, max_lag=report["lag"]["max"]))
    assert passed["passed"] and len(passed["results"]) == 2
    failed = check_report(report, CheckLimits(max_padding=padding - 0.001, max_step_skew=1e9,
                                              max_trainer_idle=1.0))
    assert not failed["passed"]
    broken = [r for r in failed["results"] if not r["passed"]]
    assert [r["flag"] for r in broken] == ["--max-padding"]
    assert "--max-padding" in broken[0]["message"] and "broken" in broken[0]["message"]
    assert not CheckLimits().any() and check_report(report, CheckLimits())["passed"]


def test_a_broken_instance_spread_says_where_the_instances_are_advisory(report):
    """A slime newcomer gated a --router cache-aware schedule on --max-instance-spread (pipelines.md step 2's
    example) and read only 'broken': behind a router that places each request itself the instances are advisory."""
    import copy

    spread = report["instances"]["busy_spread"]
    limits = CheckLimits(max_instance_spread=spread / 2)
    own = check_report(report, limits)["results"][0]["message"]  # the fixture's engine keeps to its instances
    assert report["provenance"]["settings"]["engine"] != "streaming" and "advisory" not in own
    routed = copy.deepcopy(report)
    routed["provenance"]["settings"].update(engine="streaming", dispatch="free", router="cache-aware")
    said = check_report(routed, limits)["results"][0]["message"]
    assert said.endswith("(broken); behind a router that places each request itself (this schedule's --router "
                         "cache-aware) the planned instances are advisory: gate such a schedule on what its trainer "
                         "sees instead (--max-padding, --max-lag, --max-step-skew; docs/pipelines.md, step 2)"), said
    routed["provenance"]["settings"].update(router="group-round-robin")  # OpenRLHF's deal keeps the file's engines
    assert "advisory" not in check_report(routed, limits)["results"][0]["message"]
    routed["provenance"]["settings"].update(router=None, dispatch="planned")  # asp's router plug-in
    assert "advisory" not in check_report(routed, limits)["results"][0]["message"]
    assert check_report(routed, CheckLimits(max_instance_spread=spread))["passed"]


def test_headline_and_fact_paths(report):
    assert fact(report, "padding.fraction") == report["padding"]["fraction"]
    assert fact(report, "observed.spearman") is None
    assert all(row["value"] is not None for row in headline(report))


def test_terminal_text_shows_every_part(report):
    text = render_text(report, checks=check_report(report, CheckLimits(max_lag=0)), width=100)
    for part in ("asp report: s.parquet", "settings", "predictor", "Instances", "spread", "padding",
                 "Training queue", "groups finishing", "groups trained", "Expected policy lag",
                 "Step representativeness", "Checks", "FAIL"):
        assert part in text, part
    assert "\x1b[" not in text  # no colour unless asked
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_list_cut_short_says_so_and_how_much_is_left(report):
    # "groups per lag" stopped at lag 11 of 38 without a word.
    import re

    long = json.loads(json.dumps(report))
    long["lag"]["histogram"] = [[v, 10 + v] for v in range(39)]
    text = " ".join(render_text(long, width=100).split())
    assert "11: 21, ... and 27 more lags (12-38: 945 groups; --json has them all)" in text
    assert "12: 22" not in text
    short = json.loads(json.dumps(report))
    short["lag"]["histogram"] = [[0, 5], [1, 7]]
    text = " ".join(render_text(short, width=100).split())
    assert "groups per lag: 0: 5, 1: 7 Step" in text and not re.search(r"more lags", text)


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=0, max_size=80))
def test_sparkline_has_one_block_per_value(values):
    line = sparkline(values)
    assert len(line) == len(values)
    if values and max(values) > 0:
        assert "█" in line


def test_the_report_shows_how_full_the_kv_cut_left_each_minibatch(tmp_path):
    """How close each minibatch came to the KV budget it was cut by, counted as its cut counted it: a padded
    static cut fills them up to 100% and never beyond; files without the budget show nothing."""
    from asp_cli.arrange.pipeline import plan

    prompts, preds = prompt_frame(300), make_predictions(300)
    for engine, counted in (("static", "padded"), ("continuous", "whole")):
        settings = ScheduleSettings(instances=3, train_batch_size=32, minibatch_size=16, engine=engine,
                                    kv_budget="auto" if engine == "static" else "whole",
                                    max_tokens_per_minibatch=120_000)
        frame, choice = plan(prompts, preds, settings, preset=load_preset())
        path = tmp_path / f"{engine}.parquet"
        write_schedule(frame, {"settings": settings.to_dict(), "max_tokens_per_minibatch_used": 120_000,
                               "arrangement": choice.to_dict()}, path)
        report = build_report(read_schedule(path))
        fill = report["minibatches"]["kv_fill"]
        assert fill["counted"] == counted and fill["budget_tokens"] == 120_000
        assert 0.5 < fill["quantiles"]["p100"] <= 1.0  # the budget binds here, and holds
        assert f"minibatch: KV / budget ({counted})" in render_text(report)
    write_schedule(frame, {"settings": settings.to_dict()}, tmp_path / "old.parquet")
    assert build_report(read_schedule(tmp_path / "old.parquet"))["minibatches"]["kv_fill"] is None


def test_a_comparisons_change_is_the_difference_of_the_values_shown():
    """2.04% and 2.16% were shown as 2.0% and 2.2% with a change of +0.1% (the exact difference rounded)."""
    from asp_cli.report.checks import shown_change
    from asp_cli.report.formats import change_text, fact_text

    a, b = 0.0204, 0.0216
    assert (fact_text("percent", a), fact_text("percent", b)) == ("2.0%", "2.2%")
    assert change_text("percent", shown_change(a, b, "percent")) == "+0.2%"
    assert change_text("seconds", shown_change(10.04, 10.06, "seconds")) == "+0.1"
    assert shown_change(0.0204, 0.0196, "percent") == 0.0  # both shown as 2.0%: the same


ARRANGEMENT = {"setting": "auto", "chosen": "interleave", "engine": "continuous", "draws": 3, "evaluated_prompts": 300,
               "kv_budget": "peak", "candidates": [{"name": "interleave", "kv_budget": "peak",
                                                    "expected_end_to_end_s": 100.0},
                                                   {"name": "shuffle", "kv_budget": "peak",
                                                    "expected_end_to_end_s": 120.0}]}


@pytest.mark.parametrize("edit, record", [
    (lambda m: m["arrangement"].pop("candidates"), "arrangement"),  # the bulky list stripped with jq
    (lambda m: m["arrangement"].pop("chosen"), "arrangement"),
    (lambda m: m["arrangement"].update(candidates=["a"]), "arrangement"),
    (lambda m: m["arrangement"]["candidates"][0].update(expected_end_to_end_s=None), "arrangement"),
    (lambda m: m.update(command_line=[1, 2]), "command_line"),
    (lambda m: m.update(inputs="x"), "inputs"),
    (lambda m: m.update(predictor="x"), "predictor"),
    (lambda m: m["predictor"].update(calibration="x"), "predictor.calibration"),
])
def test_an_informational_record_edited_out_of_shape_is_left_out_and_said(made, tmp_path, edit, record):
    """A hostile-input round: `asp report` ended in an internal error (exit 70) on a schedule whose arrangement record
    had lost a key, or whose command line was a list of numbers; the rows and settings were fine."""
    import pyarrow.parquet as pq

    from asp_cli.schedule_format import METADATA_KEY

    folder, _ = made
    table = pq.read_table(folder / "s.parquet")
    metadata = json.loads(table.schema.metadata[METADATA_KEY])
    metadata["arrangement"] = json.loads(json.dumps(ARRANGEMENT))
    intact = tmp_path / "intact.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata)}), intact)
    assert report_schedule(intact).warnings == [] and "interleave" in report_schedule(intact).text()
    edit(metadata)
    edited = tmp_path / "edited.parquet"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata)}), edited)
    result = report_schedule(edited)
    assert result.warnings == [f"the schedule's metadata holds {record} not as asp wrote it (edited by hand?): left out "
                               "of this report; its rows and settings are read as they are"]
    assert result.report["provenance"]["damaged_metadata"] == [record]
    assert result.text().startswith("asp report") and json.dumps(result.document)
    from asp_cli.report.html import render_html

    assert "<html" in render_html(result.report)


def test_rows_removed_since_the_plan_was_made_are_said(tmp_path):
    """A hostile-input round: one epoch of a two-epoch schedule filtered out and renumbered, its metadata kept, was
    reported as 56 training steps with a lag max of 38 (the whole plan's planned columns), without a word."""
    import pyarrow.parquet as pq

    from asp_cli import schedule

    from util import make_prompts, write_jsonl

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    made = schedule([prompts], tmp_path / "s.parquet", settings=ScheduleSettings(instances=2, train_batch_size=8,
                                                                              epochs=2))
    assert report_schedule(made.output).warnings == []
    table = pq.read_table(made.output)
    later = pl.from_arrow(table).filter(pl.col("epoch") == 1).with_columns(pl.col("seq") - pl.col("seq").min())
    pq.write_table(later.to_arrow().replace_schema_metadata(table.schema.metadata), tmp_path / "e1.parquet")
    assert report_schedule(tmp_path / "e1.parquet").warnings == [
        f"{tmp_path / 'e1.parquet'} holds 40 rows (epoch 1 of 2) where the plan held 80 when it was made: rows were "
        "removed since (by hand?), and its planned columns (times, lag, steps) are still the whole plan's: the "
        "figures below read them as they are"]


def test_the_twin_refuses_limits_that_are_not_check_limits(made):
    """A library newcomer's round: `report_schedule(s, limits={"max_padding": 0.1})` was an AttributeError from
    inside ("'dict' object has no attribute 'any'")."""
    from asp_cli.errors import SettingsError

    folder, _ = made
    with pytest.raises(SettingsError, match=r"limits must be a CheckLimits \(asp_cli.CheckLimits\(max_padding=0.1, "
                                            r"\.\.\.\)\) or None, not dict"):
        report_schedule(folder / "s.parquet", limits={"max_padding": 0.1})


def test_the_simulated_lengths_count_the_prompts_whose_probe_samples_were_left_out(made, tmp_path):
    """`asp report --simulate` leaves a probe's samples out before it simulates, as `asp simulate` does; its
    `simulated.lengths` said 0 prompts' were left out, where `asp simulate --json` of the same history counts them."""
    folder, result = made
    one, epoch, history = _probe_then_epoch(result, tmp_path)
    done = report_schedule(folder / "s.parquet", lengths=[history], simulate=True)
    assert done.report["simulated"]["lengths"]["prompts_with_probe_samples_left_out"] == one.height


def test_a_probe_of_other_prompts_does_not_hide_that_each_epoch_holds_a_group(made, tmp_path):
    """Two epochs of a group of each prompt but one, of which a probe holds one sample: the epochs were judged over
    every sample, the probe's without an epoch among them, and the warning told to remake the schedule with
    --samples-per-prompt 16 for two epochs of groups of 8 (`asp simulate` says the same since this review)."""
    folder, result = made
    one = result.frame.filter(pl.col("epoch") == 0).select("prompt_id")
    kept, probed = one.head(one.height - 1), one.tail(1)
    rows = [kept.with_columns(pl.lit(100).alias("response_tokens"), pl.lit(e, pl.Int32).alias("epoch"))
            for e in (2, 3) for _ in range(8)]  # epochs the schedule does not number: pooled, over the group
    rows.append(probed.with_columns(pl.lit(50).alias("response_tokens"), pl.lit(None, pl.Int32).alias("epoch")))
    history = tmp_path / "history.parquet"
    pl.concat(rows).write_parquet(history)
    said = [w for w in report_schedule(folder / "s.parquet", lengths=[history]).warnings if "in --lengths" in w]
    assert said and said[0].endswith("each of its 2 epochs holds at most 8 samples of a prompt, as the schedule's "
                                     "groups do") and "--samples-per-prompt" not in said[0], said


def test_auto_draws_of_fewer_epochs_than_the_run_are_said_not_to_be_the_run():
    """A 3-epoch plan's auto judged 2 epochs and did not scale its times up (they rank the candidates): the report
    read its 1,348 s as the expectation of a replay of all 3 (2,597 s). `expected_by_draws` says whether its times
    are the run's, and the words say of what part they are."""
    from asp_cli.report.simulated import draws_words, expected_by_draws

    choice = {"chosen": "bands", "kv_budget": "peak", "timed_as": "verl", "evaluated_epochs": 2,
              "candidates": [{"name": "bands", "kv_budget": "peak", "expected_end_to_end_s": 1348.1,
                              "expected_rollout_s": 668.5}]}
    draws = expected_by_draws(choice, synchronous=True, run_epochs=3)
    assert draws == {"end_to_end_s": 1348.1, "rollout_s": 668.5, "timed_as": "verl", "whole_run": False,
                     "epochs_judged": 2}
    report = {"simulated": {"expected_by_draws": draws}, "size": {"epochs": 3}}
    assert draws_words(report) == " as verl routes over the 2 of the run's 3 epochs judged, not the whole run"
    assert expected_by_draws(choice, synchronous=True, run_epochs=2)["whole_run"] is True
    assert expected_by_draws({**choice, "run_prompt_epochs": 10620}, synchronous=True, run_epochs=3)["whole_run"]
    sampled = expected_by_draws({**choice, "sampled": True, "evaluated_epochs": 3}, synchronous=False, run_epochs=3)
    assert sampled["whole_run"] is False and sampled["rollout_s"] == 668.5
    assert draws_words({"simulated": {"expected_by_draws": sampled}, "size": {"epochs": 3}}).endswith(
        " over the sample of prompts judged, not the whole run")
    # Not timed as verl routes, a synchronous plan's draws have no rollout alone; a named arrangement no draws.
    assert expected_by_draws({**choice, "timed_as": None}, synchronous=True, run_epochs=2)["rollout_s"] is None
    assert expected_by_draws(None, synchronous=False, run_epochs=1) == {
        "end_to_end_s": None, "rollout_s": None, "timed_as": None, "whole_run": None, "epochs_judged": None}


def _with_headline(choice, epochs):
    from asp_cli.report.headline import headline_facts

    return {"provenance": {"arrangement": choice}, "size": {"epochs": epochs}, "headline": headline_facts(choice, epochs)}


def test_headline_cards_say_what_part_auto_judged_and_when_the_order_matters_little():
    from asp_cli.report.headline import headline_cards

    choice = {"chosen": "interleave", "kv_budget": "peak", "evaluated_epochs": 2, "expected_gain_over_shuffle": 0.012,
              "candidates": [{"name": "interleave", "kv_budget": "peak", "expected_end_to_end_s": 1348.1}]}
    report = _with_headline(choice, 3)
    assert report["headline"] == {"expected_end_to_end_s": 1348.1, "whole_run": False, "epochs_judged": 2,
                                  "expected_gain_over_shuffle": 0.012, "order_matters_little": True,
                                  "judged_in_miniature": False}
    (time_label, time_value), (gain_label, gain_value) = headline_cards(report)
    assert time_value == "1,348.1 s" and "over the 2 of the run's 3 epochs judged, not the whole run" in time_label
    assert gain_value == "within 2% (1.2% faster)" and "in the miniature" not in gain_label
    assert "in the miniature judged" in headline_cards(_with_headline({**choice, "judged_instances": 4}, 3))[1][0]
    kept = {**choice, "chosen": "shuffle", "candidates": [{**choice["candidates"][0], "name": "shuffle"}]}
    assert [value for _, value in headline_cards(_with_headline(kept, 3))] == ["1,348.1 s"]
    assert _with_headline(kept, 3)["headline"]["expected_gain_over_shuffle"] is None
    assert _with_headline("long-first", 3)["headline"] is None and headline_cards(_with_headline("long-first", 3)) == []
    # An edited record's figure that is not a number is left out, not shown as text or a crash.
    edited = {**choice, "expected_gain_over_shuffle": "12%"}
    assert [value for _, value in headline_cards(_with_headline(edited, 3))] == ["1,348.1 s"]


def test_the_text_opens_with_the_pages_headline_read_from_the_reports_facts(made):
    """The page's headline cards (auto's expected end-to-end time and gain over a shuffle) had no line in the text
    report. Both render the report's ``headline`` section (in --json too), computed once: a changed fact changes
    both renderers' words."""
    from asp_cli.report.html import render_html

    folder, _ = made
    report = build_report(read_schedule(folder / "s.parquet"))
    assert report["headline"] is None  # a schedule without auto's record (made here by `arrange`)
    assert render_text(report).splitlines()[1].startswith("command")
    choice = {"chosen": "interleave", "kv_budget": "peak", "evaluated_epochs": 2, "expected_gain_over_shuffle": 0.0677,
              "candidates": [{"name": "interleave", "kv_budget": "peak", "expected_end_to_end_s": 91.787}]}
    report = {**report, "headline": _with_headline(choice, 2)["headline"]}
    lines = render_text(report).splitlines()
    assert lines[1:3] == ["expected end-to-end, by auto's draws (tails included): 91.8 s",
                          "expected over a shuffle, in auto's draws (a replay on real lengths can save less): 6.8% faster"]
    report["headline"] = {**report["headline"], "expected_end_to_end_s": 12.0}  # the facts are what both show
    assert render_text(report).splitlines()[1].endswith(": 12.0 s")
    assert "<b>12.0 s</b><span>expected end-to-end, by auto&#x27;s draws (tails included)</span>" in render_html(report)


def _predictor_line(report, **predictor):
    shown = {**report, "provenance": {**report["provenance"], "predictor": {
        "name": "default", "fingerprint": "sha256:" + "1" * 64, **predictor}}}
    return next(line for line in render_text(shown, width=200).splitlines() if line.startswith("predictor"))


def test_the_predictor_line_splits_the_lengths_by_source_only_where_a_history_was_given(report):
    # Without --history every length is the model's: "from history for 0" read as a history that matched nothing.
    line = _predictor_line(report, history_fingerprint=None, prompts_from_history=0, prompts_from_model=3540)
    assert "lengths from the model for 3540 prompts" in line and "history" not in line
    line = _predictor_line(report, history_fingerprint="sha256:" + "2" * 64, prompts_from_history=0,
                           prompts_from_model=3540)
    assert "lengths from history for 0, from the model for 3540 prompts" in line
    # a predictions file records no split (both 0): no lengths clause at all
    line = _predictor_line(report, history_fingerprint=None, prompts_from_history=0, prompts_from_model=0)
    assert "lengths" not in line


def test_an_epoch_smaller_than_one_train_batch_is_warned_about_as_asp_schedule_warns(made, tmp_path):
    # 80 prompts at --train-batch-size 128: verl's dataloader trains no step; asp report said nothing of it.
    make_schedule(tmp_path / "small.parquet", count=80, epochs=1, train_batch_size=128)
    said = report_schedule(tmp_path / "small.parquet").warnings
    assert any(w.startswith("--train-batch-size 128 is larger than the 80 prompts of an epoch") for w in said), said
    folder, _ = made
    assert not any("--train-batch-size" in w for w in report_schedule(folder / "s.parquet").warnings)


def test_observed_lengths_of_one_sample_are_counted_in_the_singular(made, tmp_path):
    # It read "1 samples for 1 prompts; 1 scheduled prompts matched, ..., 0 observed prompts not in the schedule".
    folder, result = made
    one = tmp_path / "one.csv"
    result.frame.head(1).select("prompt_id", pl.lit(100).alias("response_tokens")).write_csv(one)
    text = render_text(report_schedule(folder / "s.parquet", lengths=[one]).report, width=200)
    assert "1 sample for 1 prompt; 1 scheduled prompt matched, 299 not observed, 0 observed prompts not in the " \
        "schedule" in " ".join(text.split()), text
