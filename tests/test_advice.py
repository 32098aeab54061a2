"""Warnings about a finished plan for the trainer that reads it (`asp_cli.arrange.advice`)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from asp_cli.arrange.advice import dividing_batch_size, plan_warnings
from asp_cli.arrange.pipeline import arrange
from asp_cli.settings import ScheduleSettings

from util import make_predictions, prompt_frame


@pytest.mark.parametrize("prompts, batch, expected", [(3540, 128, 118), (3540, 118, 118), (50, 32, 25),
                                                     (97, 32, None), (120, 16, 15)])
def test_the_nearest_dividing_batch_size(prompts, batch, expected):
    assert dividing_batch_size(prompts, batch) == expected


def test_an_epoch_with_no_dividing_size_near_the_batch_is_told_what_else_to_do():
    from asp_cli.arrange.advice import dividing_example

    # 5,222 = 2 x 7 x 373 (a newcomer's GSM8K + DeepMath + AIME mix): nothing from 64 to 256 divides it.
    assert dividing_example(5222, 128) == (" (none from 64 to 256 does; or keep 5,120 of the prompts, 40 batches "
                                           "of 128, as verl's dataloader would)")
    assert dividing_example(3540, 128).startswith(" (e.g. 118 or 177;")


def test_a_train_batch_larger_than_the_epoch_says_a_dropping_trainer_trains_nothing(tmp_path):
    """A verl newcomer's 80 prompts at the default batch of 128 were told only "every training step is the epoch's
    only, partial batch", where verl (drop_last) trains no step at all: said, with the batch sizes that fit."""
    from asp_cli.arrange.advice import largest_divisors, oversized_batch_warning

    assert oversized_batch_warning(ScheduleSettings(train_batch_size=80), 80) is None
    assert oversized_batch_warning(ScheduleSettings(), 80) == (
        "--train-batch-size 128 is larger than the 80 prompts of an epoch: every training step is the epoch's only, "
        "partial batch, which a trainer that drops a partial last batch (verl's and AReaL's dataloaders; slime with "
        "--num-epoch) never trains: no step at all (`asp export --format verl` refuses such a file, E146; OpenRLHF "
        "trains it as one short step); use a --train-batch-size that divides 80 (e.g. 80, 40 or 20)")
    assert "(`asp export --format verl --epoch E` refuses an epoch's file, E146, and one of every epoch cuts its " \
           "batches across epochs; OpenRLHF" in oversized_batch_warning(ScheduleSettings(epochs=3), 80)
    assert (largest_divisors(7), largest_divisors(1), largest_divisors(12)) == ("7 or 1", "1", "12, 6 or 4")
    from asp_cli.arrange.pipeline import schedule
    from util import make_prompts, write_jsonl

    said = schedule([write_jsonl(tmp_path / "p.jsonl", make_prompts(20))], None,
                    settings=ScheduleSettings(train_batch_size=32)).warnings
    assert any(w.startswith("--train-batch-size 32 is larger than the 20 prompts of an epoch") and
               w.endswith("divides 20 (e.g. 20, 10 or 5)") for w in said), said


def test_one_prompt_past_the_last_batch_is_said_in_the_singular():
    """'end in a step of 1 groups ... leaves those 1 prompts out (OpenRLHF trains them ...)' (a slime newcomer's 33
    prompts in batches of 8)."""
    one = ScheduleSettings(train_batch_size=8, minibatch_size=8, epochs=1, trainer="schedule", arrangement="per-step",
                           instances=2)
    (warning,) = plan_warnings(arrange(prompt_frame(33), make_predictions(33), one), one)
    assert warning.startswith("the epoch's 33 prompts end in a step of 1 group, short of --train-batch-size 8: a ")
    assert "leaves that prompt out (OpenRLHF trains it as a short step; " in warning, warning


def test_a_step_cut_short_at_each_epochs_end_is_warned_about():
    # 50 prompts in steps of 32 with a schedule-following trainer: each epoch ends in a step of 18.
    settings = ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=2, trainer="schedule",
                                arrangement="per-step", instances=4)
    frame = arrange(prompt_frame(50), make_predictions(50), settings)
    (warning,) = [w for w in plan_warnings(frame, settings) if "short of" in w]
    assert warning.startswith("each epoch's 50 prompts end in a step of 18 groups, short of --train-batch-size 32")
    assert ("divides 50 (e.g. 25 or 50; a different batch size changes the number of steps, so compare with asp "
            "simulate; or keep 32 of the prompts, 1 batch of 32), or export one epoch at a time") in warning
    # One epoch: its short last step is the run's last, nothing is cut across; but a dataloader that drops a
    # partial last batch (verl's) leaves its prompts out, and that is said.
    one = dataclass_replace(settings, epochs=1)
    (warning,) = plan_warnings(arrange(prompt_frame(50), make_predictions(50), one), one)
    assert warning.startswith("the epoch's 50 prompts end in a step of 18 groups, short of --train-batch-size 32: a "
                              "trainer that reads batches of 32 consecutive rows and drops a partial last one (verl's "
                              "and AReaL's dataloaders; slime with --num-epoch) leaves those 18 prompts out "
                              "(OpenRLHF trains them as a short step; MindSpeed-RL leaves them out at train_iters of "
                              "the whole batches, and one iteration more fills their batch from the file's start, "
                              "training its first prompts twice); use a --train-batch-size that divides 50 (e.g.")
    # Where `dropped_tail_warnings` says what the batch drops (its own warning, with the same fixes), this one is
    # left out: the sample data's `asp schedule` printed both, the first thing a newcomer read.
    assert plan_warnings(arrange(prompt_frame(50), make_predictions(50), one), one, partial_batch=False) == []
    # A trainer that takes groups as they arrive does not read the schedule's steps, but its dataloader reads the
    # file in batches all the same and drops the partial last one (AReaL's; an AReaL newcomer's 5,000 at 512).
    arrival = dataclass_replace(one, trainer="arrival")
    (warning,) = plan_warnings(arrange(prompt_frame(50), make_predictions(50), arrival), arrival)
    assert warning.startswith("the epoch's 50 prompts leave 18 rows past the last whole batch of 32: a trainer that "
                              "reads its rows in batches and drops a partial last one (verl's and AReaL's dataloaders; "
                              "slime with --num-epoch) leaves those 18 prompts out (OpenRLHF trains them as a short step; "
                              "MindSpeed-RL leaves them out at train_iters of the whole batches, and one iteration "
                              "more fills their batch from the file's start, training its first prompts twice); use a "
                              "--train-batch-size that "
                              "divides 50 (e.g.")


def test_each_partial_batch_warning_says_what_mindspeed_rl_does_with_those_rows():
    """The partial-last-batch warnings named verl, AReaL, slime and OpenRLHF but not MindSpeed-RL, which reads
    train_iters x global_batch_size rows of the file (docs/integrations.md, MindSpeed-RL): at train_iters of the whole
    batches it leaves them out, and one iteration more fills their batch from the file's start."""
    from asp_cli.arrange.advice import dropped_tail_warnings

    said = ("MindSpeed-RL leaves them out at train_iters of the whole batches, and one iteration more fills their "
            "batch from the file's start, training its first prompts twice")
    for epochs, trainer in ((1, "schedule"), (1, "arrival"), (2, "arrival")):
        settings = ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=epochs, trainer=trainer,
                                    instances=4, arrangement="per-step" if trainer == "schedule" else "auto")
        frame = arrange(prompt_frame(50), make_predictions(50), settings)
        (warning,) = [w for w in plan_warnings(frame, settings) if "partial last one" in w]
        assert f"({said})" in warning or f"; {said})" in warning, (epochs, trainer, warning)
    sources = pl.DataFrame({"row": list(range(500)), "data_source": ["gsm8k"] * 400 + ["aime"] * 100})
    frame = pl.DataFrame({"row": list(range(500)), "seq": list(range(500)), "epoch": [0] * 500,
                          "train_step": [r // 160 for r in range(500)]})
    for epochs in (1, 2):
        settings = ScheduleSettings(train_batch_size=160, trainer="arrival", epochs=epochs)
        (warning,) = dropped_tail_warnings(frame, sources, settings)
        assert (f"; {said});" if epochs == 1 else f"mean length ({said});") in warning, warning


def test_a_synchronous_plan_gives_every_instance_a_minibatch_in_each_step():
    # A synchronous step rolls out alone: 32 prompts in minibatches of at most 16 on 4 instances are cut into
    # 4 minibatches of 8 (before 2026-12-05: 2 of 16, 2 instances idle, and a warning asking for 8).
    settings = ScheduleSettings(train_batch_size=32, minibatch_size=16, instances=4, max_lag=0, trainer="schedule")
    for arrangement in ("long-first", "short-first", "per-step", "auto"):
        chosen = dataclass_replace(settings, arrangement=arrangement)
        frame = arrange(prompt_frame(64), make_predictions(64), chosen)
        per_step = frame.group_by("train_step").agg(pl.col("minibatch").n_unique(), pl.col("instance").n_unique())
        assert per_step["minibatch"].to_list() == [4, 4] and per_step["instance"].to_list() == [4, 4], arrangement
        assert frame.group_by("minibatch").len()["len"].max() <= 16
        assert plan_warnings(frame, chosen) == []
    # 10 prompts a step on 8 instances: 8 minibatches (one or two prompts each), not 5 of 2.
    tiny = dataclass_replace(settings, train_batch_size=10, minibatch_size=2, instances=8, arrangement="long-first")
    frame = arrange(prompt_frame(20), make_predictions(20), tiny)
    assert frame.group_by("train_step").agg(pl.col("minibatch").n_unique())["minibatch"].to_list() == [8, 8]
    # An asynchronous trainer keeps every instance busy across steps: minibatches as large as allowed.
    free = dataclass_replace(settings, max_lag=None, arrangement="long-first")
    assert arrange(prompt_frame(64), make_predictions(64), free).group_by("minibatch").len()["len"].max() == 16


def dataclass_replace(settings, **changes):
    import dataclasses

    return dataclasses.replace(settings, **changes)


def test_steps_of_a_single_data_source_are_warned_about_beyond_a_shuffles_chance():
    """An OpenRLHF newcomer's GSM8K + code mix was trained math first, then code; the summary spoke of lengths."""
    from asp_cli.arrange.advice import source_warnings

    sources = pl.DataFrame({"row": list(range(16)), "data_source": ["gsm8k"] * 8 + ["lcb"] * 8})
    sorted_steps = pl.DataFrame({"row": list(range(16)), "train_step": [r // 4 for r in range(16)]})
    (warning,) = source_warnings(sorted_steps, sources)
    assert warning.startswith("4 of 4 training steps hold a single data source (gsm8k: steps 0-1; lcb: steps 2-3), "
                              "where a shuffle's would mix the epoch's 2: a curriculum by source")
    mixed = sorted_steps.with_columns(pl.Series("train_step", [r % 4 for r in range(16)]))
    assert source_warnings(mixed, sources) == []
    # Steps of 2 groups of two even sources are single-source half the time by chance: not a curriculum.
    pairs = pl.DataFrame({"row": list(range(16)), "train_step": [r // 2 for r in range(16)]})
    assert source_warnings(pairs, sources) == []
    one = sources.with_columns(pl.lit("gsm8k").alias("data_source"))
    assert source_warnings(sorted_steps, one) == [] and source_warnings(sorted_steps, one.with_columns(
        pl.lit(None, pl.String).alias("data_source"))) == []


def test_a_prompt_without_a_source_mixes_its_step():
    from asp_cli.arrange.advice import source_warnings

    sources = pl.DataFrame({"row": list(range(16)), "data_source": ["gsm8k"] * 7 + [None] + ["lcb"] * 8})
    steps = pl.DataFrame({"row": list(range(16)), "train_step": [r // 4 for r in range(16)]})
    (warning,) = source_warnings(steps, sources)
    assert warning.startswith("3 of 4 training steps hold a single data source (lcb: steps 2-3; gsm8k: step 0)")


def test_source_names_are_shown_on_one_short_line():
    """A source holding a newline and an escape split a warning over two lines; 3,000 sources made a 98,000-character
    calibration line (a hostile-input audit)."""
    from asp_cli.arrange.advice import source_warnings
    from asp_cli.predict.calibration_text import calibration_lines

    odd = "math\n\x1b[2J" + "é" * 300
    sources = pl.DataFrame({"row": list(range(16)), "data_source": [odd] * 8 + ["lcb"] * 8})
    steps = pl.DataFrame({"row": list(range(16)), "train_step": [r // 4 for r in range(16)]})
    (warning,) = source_warnings(steps, sources)
    assert "\n" not in warning and "\x1b" not in warning and "math\\n\\x1b[2J" in warning
    assert "... (309 characters)" in warning
    many = {"prompts_seen": 3000, "samples_seen": 3000, "global": {"factor": 2.0},
            "sources": [{"data_source": f"s{i}", "factor": 1.5, "prompts": 1, "fitted": "own"} for i in range(3000)]}
    (_, per_source) = calibration_lines(many)
    assert len(per_source) < 400 and per_source.endswith("and 2,988 more (--json has each)")


def test_a_dropped_partial_batch_holding_one_source_is_warned_about():
    """An AReaL newcomer's `bands` plan put AIME last; AReaL's dataloader drops the partial last batch, and a third
    of AIME's prompts went untrained every epoch. A small source whose few rows fell last by chance is not flagged
    (a review: a shuffle of 3-prompt sources warned on every seed)."""
    from asp_cli.arrange.advice import dropped_tail_warnings

    # 500 prompts in batches of 160: the last 20 rows dropped, a shuffle's 4% of each source. AIME (rows 400-499)
    # comes last in dispatch order: 20 of its 100 prompts.
    sources = pl.DataFrame({"row": list(range(500)), "data_source": ["gsm8k"] * 400 + ["aime"] * 100})
    frame = pl.DataFrame({"row": list(range(500)), "seq": list(range(500)), "epoch": [0] * 500,
                          "train_step": [r // 160 for r in range(500)]})
    arrival = ScheduleSettings(train_batch_size=160, trainer="arrival")
    assert dropped_tail_warnings(frame, sources, arrival) == [
        "a dataloader that drops a partial last batch (verl's and AReaL's by default; slime's --num-epoch) leaves out "
        "the epoch's last 20 rows in file (dispatch) order: 20 of them are 'aime', 20% of that source's prompts, "
        "where a shuffle's would leave out about 4% of each source, at about the epoch's mean length (OpenRLHF trains "
        "them as a short step; MindSpeed-RL leaves them out at train_iters of the whole batches, and one iteration "
        "more fills their batch from the file's start, training its first prompts twice); use a --train-batch-size that divides 500 (e.g. 125 or 250; a different batch size "
        "changes the number of steps, so compare with asp simulate; or keep 480 of the prompts, 3 batches of 160), or "
        "--steps representative"]
    named = dataclass_replace(arrival, arrangement="long-first")  # --steps constrains auto alone: not offered
    assert dropped_tail_warnings(frame, sources, named)[0].endswith("or keep 480 of the prompts, 3 batches of 160)")
    # A schedule-following trainer drops its last train step's groups, here gsm8k's first rows: 5% of it, no warning.
    schedule = dataclass_replace(arrival, trainer="schedule")
    reordered = frame.with_columns(pl.Series("train_step", [9 if r < 20 else 0 for r in range(500)]))
    assert dropped_tail_warnings(reordered, sources, schedule) == []
    assert dropped_tail_warnings(frame.with_columns(pl.Series("seq", list(range(499, -1, -1)))), sources, schedule)
    # Mixed tails, whole batches, one source, a few rare prompts last by chance: nothing to say.
    mixed = frame.with_columns(pl.Series("seq", [(r * 7) % 500 for r in range(500)]))
    assert dropped_tail_warnings(mixed, sources, arrival) == []
    assert dropped_tail_warnings(frame, sources, dataclass_replace(arrival, train_batch_size=250)) == []
    assert dropped_tail_warnings(frame, sources.with_columns(pl.lit("x").alias("data_source")), arrival) == []
    rare = sources.with_columns(pl.Series("data_source", ["gsm8k"] * 497 + ["rare"] * 3))
    assert dropped_tail_warnings(frame, rare, arrival) == []


def test_a_dropped_partial_batch_of_the_longest_prompts_is_warned_about():
    """An AReaL newcomer's length curriculum left the 212 longest prompts (831 predicted tokens against 401), of
    mixed sources, out of every epoch without a word: the dropped rows' length is said, with or without sources."""
    from asp_cli.arrange.advice import dropped_tail_warnings

    tokens = [100 + r for r in range(500)]  # sorted shortest first: the last 20 rows are the longest
    frame = pl.DataFrame({"row": list(range(500)), "seq": list(range(500)), "epoch": [0] * 500,
                          "train_step": [r // 160 for r in range(500)], "predicted_tokens": tokens})
    arrival = ScheduleSettings(train_batch_size=160, trainer="arrival")
    (warning,) = dropped_tail_warnings(frame, None, arrival)
    assert ("the epoch's last 20 rows in file (dispatch) order: their predicted responses average 590 tokens against "
            "340 for the rows trained (the longest left out)") in warning
    mixed = pl.DataFrame({"row": list(range(500)), "data_source": ["a", "b"] * 250})
    assert "of the epoch, at about its mean length" in warning  # no sources to speak of
    (with_sources,) = dropped_tail_warnings(frame, mixed, arrival)
    assert with_sources.split(", where")[0] == warning.split(", where")[0] and "of each source" in with_sources
    # A shuffle's tail, or one near the mean, is not flagged.
    shuffled = frame.with_columns(pl.Series("predicted_tokens", 100 + np.random.default_rng(0).permutation(500)))
    assert dropped_tail_warnings(shuffled, mixed, arrival) == []
    assert dropped_tail_warnings(frame.with_columns(pl.lit(400).alias("predicted_tokens")), None, arrival) == []


def test_options_that_change_nothing_in_the_plan_are_said():
    """A hostile-input round: --max-tokens-per-minibatch on servers that refill and --steps representative with a
    named arrangement made the same plan as without them, without a word."""
    from asp_cli.arrange.advice import settings_warnings

    assert settings_warnings(ScheduleSettings()) == []
    said = settings_warnings(ScheduleSettings(engine="streaming", max_tokens_per_minibatch=5000))
    assert len(said) == 1 and said[0].startswith("--max-tokens-per-minibatch does not change a plan for --engine "
                                                 "streaming")
    said = settings_warnings(ScheduleSettings(engine="streaming", max_tokens_per_minibatch=5000, kv_budget="whole"))
    assert said[0].startswith("--kv-budget whole and --max-tokens-per-minibatch do not change a plan")
    said = settings_warnings(ScheduleSettings(steps="representative", arrangement="long-first"))
    assert said == ["--steps representative holds auto's pick to steps as representative as a shuffle's; with "
                    "--arrangement long-first nothing is picked, and the steps are that arrangement's: use "
                    "--arrangement auto, or leave --steps out"]
    assert settings_warnings(ScheduleSettings(steps="representative")) == []


def test_a_router_with_planned_dispatch_and_a_step_layout_outside_slimes_trainer_are_refused():
    from asp_cli.errors import SettingsError

    with pytest.raises(SettingsError, match="--router least-pending places each request .* drop one"):
        ScheduleSettings(engine="streaming", router="least-pending", dispatch="planned")
    # A schedule made before the pair was refused still reads (the router changed nothing there).
    old = {**ScheduleSettings(engine="streaming", dispatch="planned").to_dict(), "router": "least-pending"}
    assert ScheduleSettings.from_dict(old) == ScheduleSettings(engine="streaming", dispatch="planned")
    with pytest.raises(SettingsError, match="step_layout lays out the rollouts of slime's train_async.py"):
        ScheduleSettings(step_layout="finish")
    slime = ScheduleSettings(engine="streaming", router="cache-aware", max_lag=1, trainer="schedule",
                             step_layout="finish")
    # Replayed on another engine (asp simulate --mode static), the layout is dropped as the router is.
    assert slime.replayed_as(engine="continuous").step_layout is None
    assert slime.replayed_as(max_lag=2).router == "cache-aware" and slime.replayed_as(max_lag=2).step_layout is None


def test_a_lag_below_one_for_verls_v1_modes_is_said_to_be_a_warm_up_not_the_staleness_threshold():
    """A fraction below 1 given with --verl-trainer colocate-async is a warm-up of a few prompts (legal in verl),
    most likely meant as the fully asynchronous trainer's staleness_threshold: warned, naming both."""
    from asp_cli.arrange.advice import settings_warnings

    said = settings_warnings(ScheduleSettings(engine="streaming", max_lag=0.1, verl_trainer="colocate-async"))
    assert [w for w in said if "num_warmup_batches" in w] == [
        "--max-lag 0.1 with verl's colocate_async trainer is trainer.v1.colocate_async.num_warmup_batches=0.1, a "
        "warm-up of 12 prompts (a fraction of a train batch of 128, rounded down): the rollout runs at most that far "
        "ahead; verl's staleness_threshold (0.1 by default) is another knob, its fully asynchronous trainer's "
        "(--verl-trainer fully-async --trainer arrival); for verl's default warm-up of one train batch give "
        "--max-lag 1"]
    for lag, mode in ((1.5, "colocate-async"), (1, "separate-async"), (0.1, "fully-async")):
        assert not any("num_warmup_batches" in w for w in settings_warnings(
            ScheduleSettings(engine="streaming", max_lag=lag, verl_trainer=mode)))


def test_a_lag_below_one_that_follows_the_schedule_on_verls_balancer_is_warned_of_at_schedule_time():
    """Without --verl-trainer a --trainer schedule plan a lag below 1 ahead behind verl's balancer is exported for
    colocate_async: its warm-up was said only at `asp export` (refused there where it rounds to no prompt, E81)."""
    from asp_cli.arrange.advice import settings_warnings

    def said(**options):
        return [w for w in settings_warnings(ScheduleSettings(engine="streaming", trainer="schedule", **options))
                if "warm-up" in w]

    legal = said(max_lag=0.5)
    assert len(legal) == 1 and "colocate_async.num_warmup_batches=0.5, a warm-up of 64 prompts" in legal[0]
    assert legal[0].endswith("(`asp export --format verl` takes colocate_async for this schedule; name the mode "
                             "with --verl-trainer)")
    assert said(max_lag=0.001) == [
        "--max-lag 0.001 --trainer schedule behind verl's balancer is verl's v1 trainer with asp's replay buffer, a "
        "warm-up of 0.001 train batches, which verl rounds down to 0 prompts of a batch of 128: `asp export --format "
        "verl` refuses it (E81); make it with --max-lag 1 (verl's default warm-up), or --max-lag 0 for verl's "
        "synchronous trainer"]
    # A whole lag, another router's trainer, or groups in arrival order (verl's own buffer): nothing to say.
    assert said(max_lag=1) == said(max_lag=2) == said(max_lag=0.5, router="cache-aware") == []
    assert not [w for w in settings_warnings(ScheduleSettings(engine="streaming", max_lag=0.5)) if "warm-up" in w]


def test_a_count_of_one_is_said_in_the_singular():
    """'leave 1 rows past the last whole batch ... leaves those 1 prompts out', 'a step of 1 groups' and '1 of the 4
    instances get no minibatch' read so where one row, group or instance was counted."""
    one = ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=1, trainer="arrival", instances=4)
    (warning,) = [w for w in plan_warnings(arrange(prompt_frame(33), make_predictions(33), one), one)
                  if "partial last one" in w]
    assert warning.startswith("the epoch's 33 prompts leave 1 row past the last whole batch of 32: ")
    assert "leaves that prompt out (OpenRLHF trains it as a short step;" in warning
    steps = dataclass_replace(one, trainer="schedule", arrangement="per-step")
    (warning,) = [w for w in plan_warnings(arrange(prompt_frame(33), make_predictions(33), steps), steps)
                  if "short of" in w]
    assert warning.startswith("the epoch's 33 prompts end in a step of 1 group, short of --train-batch-size 32")
    idle = dataclass_replace(one, train_batch_size=8, minibatch_size=8, instances=4, arrangement="long-first")
    said = plan_warnings(arrange(prompt_frame(24), make_predictions(24), idle), idle)
    assert any(w.startswith("1 of the 4 instances gets no minibatch (3 minibatches in all)") for w in said), said
