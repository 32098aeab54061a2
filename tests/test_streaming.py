"""Plans for engines that refill freed slots: one request batch per group, balanced instances, simulated times."""

import numpy as np
import polars as pl
import pytest

from asp_cli.arrange.pipeline import plan
from asp_cli.arrange.streaming import STREAMING_ORDERS, streaming_order
from asp_cli.costmodel import load_preset
from asp_cli.schedule_format import validate_frame
from asp_cli.settings import ScheduleSettings

from util import make_predictions, prompt_frame

PRESET = load_preset()


@pytest.mark.parametrize("name", STREAMING_ORDERS)
def test_every_streaming_plan_is_a_valid_schedule(name):
    s = ScheduleSettings(engine="streaming", arrangement=name, epochs=2, instances=3, train_batch_size=40)
    frame, _ = plan(prompt_frame(200), make_predictions(200, seed=1), s, preset=PRESET)
    validate_frame(frame, where=name)
    assert frame.height == 400 and frame["minibatch"].n_unique() == 400  # one request batch per group
    assert frame.group_by("epoch").agg(pl.col("row").n_unique())["row"].to_list() == [200, 200]
    assert (frame["expected_finish_s"] >= frame["expected_start_s"]).all()


def test_least_loaded_assignment_balances_predicted_work():
    rng = np.random.default_rng(0)
    top = rng.lognormal(6, 1, 500)
    work = top * 8
    for name in ("interleave", "long-first", "short-first"):
        _, instance, _ = streaming_order(name, top, work, 4, 8, rng)
        order, _, _ = streaming_order(name, top, work, 4, 8, np.random.default_rng(0))
        load = np.bincount(instance, weights=work[order], minlength=4)
        assert load.max() - load.min() <= work.max()  # list scheduling: within one item


def test_quick_start_opens_with_the_shortest_batch_then_keeps_the_shuffle():
    rng = np.random.default_rng(5)
    top = rng.lognormal(6, 1, 300)
    order, instance, _ = streaming_order("quick-start", top, top * 4, 4, 8, np.random.default_rng(9), batch=40)
    shuffled, _, _ = streaming_order("shuffle", top, top * 4, 4, 8, np.random.default_rng(9), batch=40)
    assert sorted(order.tolist()) == list(range(300))
    head = order[:40]
    assert np.all(np.diff(top[head]) >= 0) and top[head].max() <= np.sort(top)[39]  # the 40 shortest, shortest first
    rest = order[40:].tolist()
    assert rest == [g for g in shuffled.tolist() if g not in set(head.tolist())]  # the shuffle's order after
    assert np.bincount(instance, minlength=4).min() > 0


def test_quick_start_plans_for_streaming_engines_only():
    from asp_cli.errors import SettingsError

    with pytest.raises(SettingsError, match="--arrangement quick-start is a plan for --engine streaming"):
        ScheduleSettings(arrangement="quick-start")
    frame, choice = plan(prompt_frame(120), make_predictions(120, seed=2),
                         ScheduleSettings(engine="streaming", arrangement="quick-start", train_batch_size=16),
                         preset=PRESET)
    first = frame.filter(pl.col("epoch") == 0).sort("seq").head(16)
    assert first["predicted_max_tokens"].max() <= frame.filter(pl.col("epoch") == 0)["predicted_max_tokens"].sort()[15]
    assert choice.chosen == "quick-start"


def test_interleave_deals_every_class_in_turn():
    top = np.arange(1, 81, dtype=float)
    order, _, classes = streaming_order("interleave", top, top, 2, 4, np.random.default_rng(0))
    first_round = classes[order[:4]]
    assert sorted(first_round.tolist()) == [0, 1, 2, 3] and first_round[0] == 3  # longest class first


def test_the_lag_bound_holds_rollout_back_in_the_simulated_expectation():
    # The AReaL admission rule bounds how far rollout runs ahead (in train batches); a group that finishes
    # after later-started ones can still be trained a step later than that, so the bound is on admission.
    prompts, preds = prompt_frame(600), make_predictions(600, seed=3)
    free, _ = plan(prompts, preds, ScheduleSettings(engine="streaming", arrangement="long-first",
                                                    train_batch_size=32), preset=PRESET)
    held, _ = plan(prompts, preds, ScheduleSettings(engine="streaming", arrangement="long-first",
                                                    train_batch_size=32, max_lag=1), preset=PRESET)
    assert held["expected_lag"].max() < free["expected_lag"].max()
    assert held["expected_lag"].mean() <= 2
