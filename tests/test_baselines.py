"""Baselines: valid schedule frames, the documented orders and splits."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest

from asp_cli.bench.baselines import BASELINES, arrange_baseline, rollpacker_rounds
from asp_cli.schedule_format import REQUIRED_COLUMNS, validate_frame
from asp_cli.settings import ScheduleSettings


def _inputs(rows=40):
    prompts = pl.DataFrame({"row": np.arange(rows, dtype=np.int64), "prompt_id": [f"p{i}" for i in range(rows)]})
    planned = (np.arange(rows) * 37 % 101 + 1) * 10
    predictions = pl.DataFrame({
        "prompt_tokens": np.full(rows, 50, dtype=np.int64), "predicted_max_tokens": planned,
        "predicted_mean_tokens": planned // 2, "predicted_tokens": planned,
        "prediction_source": ["model"] * rows,
    })
    return prompts, predictions


SETTINGS = ScheduleSettings(instances=3, samples_per_prompt=2, epochs=2, train_batch_size=12, minibatch_size=4)


@pytest.mark.parametrize("name", list(BASELINES))
def test_every_baseline_is_a_valid_schedule(name):
    prompts, predictions = _inputs()
    frame = arrange_baseline(name, prompts, predictions, SETTINGS)
    validate_frame(frame, where=name)
    for column, dtype in REQUIRED_COLUMNS.items():
        assert frame.schema[column] == dtype
    assert frame.height == 80
    assert frame.group_by("epoch").agg(pl.col("row").n_unique())["row"].to_list() == [40, 40]
    assert frame.group_by("minibatch").len()["len"].max() <= SETTINGS.minibatch_size
    assert frame["instance"].max() < SETTINGS.instances
    again = arrange_baseline(name, prompts, predictions, SETTINGS)
    assert frame.equals(again)


def test_verl_default_splits_contiguous_chunks():
    prompts, predictions = _inputs()
    frame = arrange_baseline("verl-default", prompts, predictions, SETTINGS).filter(pl.col("train_step") == 0)
    # 12 prompts over 3 workers: 4 each, one minibatch each; all rows of a train step are one batch.
    assert frame.group_by("instance").len().sort("instance")["len"].to_list() == [4, 4, 4]
    shuffled = arrange_baseline("verl-default", prompts, predictions, SETTINGS)
    assert shuffled.filter(pl.col("epoch") == 0)["row"].to_list() != list(range(40))


def test_sorted_baselines_follow_predicted_length():
    prompts, predictions = _inputs()
    short = arrange_baseline("short-first", prompts, predictions, SETTINGS).filter(pl.col("epoch") == 0)
    steps = short.group_by("train_step").agg(pl.col("predicted_tokens").max()).sort("train_step")
    assert steps["predicted_tokens"].is_sorted()
    long = arrange_baseline("long-first", prompts, predictions, SETTINGS).filter(pl.col("epoch") == 0)
    steps = long.group_by("train_step").agg(pl.col("predicted_tokens").min()).sort("train_step")
    assert steps["predicted_tokens"].is_sorted(descending=True)


@pytest.mark.parametrize("name", ["short-first (asp sizes)", "long-first (asp sizes)"])
def test_sorts_in_asp_sizes_keep_each_train_batch_whole_in_synchronous_training(name):
    # At --max-lag 0 a minibatch across two steps holds groups that may start only after the earlier step
    # trained: the sort is cut train batch by train batch, as a synchronous trainer generates it.
    prompts, predictions = _inputs()
    crossing = arrange_baseline(name, prompts, predictions, dataclasses.replace(SETTINGS, train_batch_size=10))
    assert (crossing.group_by("minibatch").agg(pl.col("train_step").n_unique())["train_step"] > 1).any()
    frame = arrange_baseline(name, prompts, predictions, dataclasses.replace(SETTINGS, train_batch_size=10, max_lag=0))
    validate_frame(frame, where=name)
    assert (frame.group_by("minibatch").agg(pl.col("train_step").n_unique())["train_step"] == 1).all()
    assert frame["train_step"].is_sorted() and frame.group_by("minibatch").len()["len"].max() <= 4
    assert frame.filter(pl.col("epoch") == 0)["row"].to_list() == crossing.filter(pl.col("epoch") == 0)["row"].to_list()


def test_count_balance_uses_free_dispatch():
    assert BASELINES["count-balance"].dispatch == "free"


def test_rollpacker_defers_long_prompts_to_their_own_rounds():
    planned = np.array([1, 100, 2, 3, 200, 4, 5, 300, 6, 7])
    rounds = rollpacker_rounds(planned, np.arange(10), batch=2, tail_fraction=0.3)
    long_rounds = [r for r in rounds if set(planned[r]) <= {100, 200, 300}]
    assert long_rounds and all(planned[r].min() >= 100 for r in long_rounds)
    assert sorted(np.concatenate(rounds).tolist()) == list(range(10))


def test_on_engines_that_refill_every_plain_sort_is_a_baseline_and_every_row_is_on_equal_footing():
    """The audit of 2026-12-02: streaming had a longest-first baseline but no shortest-first one, and auto's
    streaming gains on GSM8K and mix-k8-n8 were its short-first candidate, that very sort."""
    from asp_cli.arrange.pipeline import _arrange_named
    from asp_cli.costmodel import load_preset

    for order in ("long-first", "short-first"):
        for router, dispatch in (("least-pending", "free"), ("length-aware", "planned")):
            baseline = BASELINES[f"{order} ({router})"]
            assert baseline.modes == ("streaming",) and baseline.dispatch == dispatch
    assert all(b.equal_footing_on("streaming") for b in BASELINES.values())
    assert not BASELINES["verl-default"].equal_footing_on("continuous")
    assert BASELINES["random (asp sizes)"].equal_footing_on("static")
    prompts, predictions = _inputs()
    settings = ScheduleSettings(instances=3, samples_per_prompt=2, epochs=2, train_batch_size=12, engine="streaming")
    for order in ("long-first", "short-first"):
        candidate = _arrange_named(prompts, predictions, dataclasses.replace(settings, arrangement=order),
                                   load_preset())
        baseline = arrange_baseline(f"{order} (least-pending)", prompts, predictions, settings)
        assert candidate.sort("seq")["row"].to_list() == baseline.sort("seq")["row"].to_list()
