"""Warnings about a finished plan for the trainer that reads it (`asp_cli.arrange.advice`)."""

from __future__ import annotations

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


def test_a_step_cut_short_at_each_epochs_end_is_warned_about():
    # 50 prompts in steps of 32 with a schedule-following trainer: each epoch ends in a step of 18.
    settings = ScheduleSettings(train_batch_size=32, minibatch_size=8, epochs=2, trainer="schedule",
                                arrangement="per-step", instances=4)
    frame = arrange(prompt_frame(50), make_predictions(50), settings)
    (warning,) = [w for w in plan_warnings(frame, settings) if "short of" in w]
    assert warning.startswith("each epoch's 50 prompts end in a step of 18 groups, short of --train-batch-size 32")
    assert ("divides 50 (e.g. 25 or 50; a different batch size changes the number of steps, so compare with asp "
            "simulate), or export one epoch at a time") in warning
    # One epoch: its short last step is the run's last, nothing is cut across; but a dataloader that drops a
    # partial last batch (verl's) leaves its prompts out, and that is said.
    one = dataclass_replace(settings, epochs=1)
    (warning,) = plan_warnings(arrange(prompt_frame(50), make_predictions(50), one), one)
    assert warning.startswith("the epoch's 50 prompts end in a step of 18 groups, short of --train-batch-size 32: a "
                              "trainer that reads batches of 32 consecutive rows and drops a partial last one (verl's "
                              "dataloader) leaves those 18 prompts out; use a --train-batch-size that divides 50 (e.g.")
    # A trainer that takes groups as they arrive does not read the schedule's steps: nothing to say.
    arrival = dataclass_replace(one, trainer="arrival")
    assert not plan_warnings(arrange(prompt_frame(50), make_predictions(50), arrival), arrival)


def test_a_synchronous_plan_that_leaves_instances_idle_is_warned_about():
    settings = ScheduleSettings(train_batch_size=32, minibatch_size=16, instances=4, max_lag=0, trainer="schedule")
    frame = arrange(prompt_frame(64), make_predictions(64), settings)
    (warning,) = plan_warnings(frame, settings)
    assert warning.startswith("each synchronous step's 32 prompts make about 2 minibatches (--minibatch-size 16) for "
                              "4 instances, so 2 of them idle")
    assert "give --minibatch-size 8 (verl itself" in warning
    fitted = dataclass_replace(settings, minibatch_size=8)
    assert plan_warnings(arrange(prompt_frame(64), make_predictions(64), fitted), fitted) == []
    # The size suggested gives every instance a minibatch, and is never the one given: 10 prompts a step on 8
    # instances in minibatches of 2 make 5; 1 makes 10 (rounding 10 / 8 up gave 2 again).
    tiny = dataclass_replace(settings, train_batch_size=10, minibatch_size=2, instances=8)
    (warning,) = plan_warnings(arrange(prompt_frame(20), make_predictions(20), tiny), tiny)
    assert "give --minibatch-size 1 " in warning
    fitted = dataclass_replace(tiny, minibatch_size=1)
    assert plan_warnings(arrange(prompt_frame(20), make_predictions(20), fitted), fitted) == []
    # An epoch smaller than the train batch: the steps hold the epoch, and the advice is sized to it.
    small = dataclass_replace(settings, train_batch_size=128, minibatch_size=16, instances=8)
    (warning,) = plan_warnings(arrange(prompt_frame(100), make_predictions(100), small), small)
    assert warning.startswith("each synchronous step's 100 prompts") and "give --minibatch-size 12 " in warning
    # An asynchronous trainer keeps every instance busy across steps: nothing to say.
    free = dataclass_replace(settings, max_lag=None)
    assert plan_warnings(arrange(prompt_frame(64), make_predictions(64), free), free) == []


def dataclass_replace(settings, **changes):
    import dataclasses

    return dataclasses.replace(settings, **changes)
