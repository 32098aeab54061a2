"""Replay API: walking minibatches, looking rows up, the trainer order and its balancing kernels."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest
from _schedules import BATCH, EPOCHS, INSTANCES, PROMPTS, SAMPLES, built  # noqa: F401 - fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from asp_cli.errors import ScheduleFormatError, SettingsError
from asp_cli.integrate.replay import Replay, balanced_blocks, chunk_capacities, open_schedule


@pytest.fixture(scope="module")
def replay(built):  # noqa: F811
    return open_schedule(built["schedule"])


def test_facts_come_from_the_schedule(replay):
    assert replay.epochs == list(range(EPOCHS))
    assert replay.instances == INSTANCES
    assert replay.samples_per_prompt == SAMPLES
    assert replay.train_batch_size == BATCH
    assert replay.frame.height == PROMPTS * EPOCHS


def test_minibatches_in_global_order_cover_every_row_once(replay):
    seen = []
    for mb in replay.minibatches():
        seqs = mb.rows["seq"].to_list()
        assert seqs == list(range(mb.first_seq, mb.first_seq + len(mb)))
        assert mb.rows["instance"].n_unique() == 1 and mb.rows["minibatch"].n_unique() == 1
        assert mb.predicted_tokens == max(mb.rows["predicted_tokens"])
        seen.extend(seqs)
    assert seen == list(range(replay.frame.height))


def test_one_instance_queue_is_its_rows_in_dispatch_order(replay):
    for k in range(INSTANCES):
        batches = list(replay.minibatches(instance=k, epoch=1))
        assert all(mb.instance == k and mb.epoch == 1 for mb in batches)
        firsts = [mb.first_seq for mb in batches]
        assert firsts == sorted(firsts)
    total = sum(len(mb) for k in range(INSTANCES) for mb in replay.minibatches(instance=k, epoch=1))
    assert total == PROMPTS


def test_lookup_by_prompt_id_and_seq(replay):
    rows = replay.lookup("p7")
    assert rows["epoch"].to_list() == [0, 1]
    assert replay.lookup(["p7", "p8"], epoch=0).height == 2
    row = replay.at_seq(int(rows["seq"][0]))
    assert row["prompt_id"] == "p7" and row["row"] == 7
    with pytest.raises(KeyError, match="'nope'"):
        replay.lookup("nope")
    with pytest.raises(IndexError):
        replay.at_seq(10**6)
    # A Python user's wrong types said '<=' not supported, or 'int' object is not iterable.
    with pytest.raises(TypeError, match="seq must be an integer"):
        replay.at_seq("3")
    with pytest.raises(SettingsError, match="instance must be an integer"):
        next(replay.minibatches(instance="0"))
    with pytest.raises(KeyError, match="prompt id '5' is not in the schedule"):
        replay.lookup(5)  # an integer is its decimal text (row-number ids); this schedule's ids are p0, p1, ...


def test_numpy_integers_serve_as_epochs_instances_seqs_ids_and_sizes(replay):
    """A library newcomer's values read back from a frame (`frame["epoch"].to_numpy()`) were refused: "epoch must be
    an integer (got int64 np.int64(1))", "--workers must be at least 1 (got np.int64(4))"; `lookup(np.int64(5))`
    said "'numpy.int64' object is not iterable"."""
    assert [len(m) for m in replay.minibatches(epoch=np.int64(1), instance=np.int32(2))] == \
        [len(m) for m in replay.minibatches(epoch=1, instance=2)]
    assert replay.at_seq(np.int64(3)) == replay.at_seq(3)
    assert replay.lookup(np.array(["p7", "p8"])).equals(replay.lookup(["p7", "p8"]))
    with pytest.raises(KeyError, match="prompt id '5' is not in the schedule"):
        replay.lookup(np.int64(5))
    assert replay.trainer_order(epoch=np.int64(0), workers=np.int64(2), train_batch_size=np.int64(8)).equals(
        replay.trainer_order(epoch=0, workers=2, train_batch_size=8))


@pytest.mark.parametrize("call, words", [
    (lambda r: r.trainer_order(train_batch_size="8"), "train_batch_size must be a whole number from 1 to 2147483647 "
                                                      "(got '8')"),
    (lambda r: r.trainer_order(train_batch_size=2.5), "train_batch_size must be a whole number from 1 to 2147483647 "
                                                      "(got 2.5)"),
    (lambda r: r.dataset_indices(train_batch_size=0), "train_batch_size must be a whole number from 1 to 2147483647 "
                                                      "(got 0)"),
    (lambda r: r.lookup(None), "prompt_ids must be a prompt id or a list of them (got None)"),
    (lambda r: r.lookup([None]), "prompt_ids must be a prompt id or a list of them (got [None])"),
])
def test_a_wrong_type_of_size_or_id_is_a_settings_error(replay, call, words):
    """A train batch size of "8" or 2.5 was a TypeError ("'<' not supported", "'float' object cannot be interpreted
    as an integer"), a None id a TypeError from inside the lookup."""
    with pytest.raises(SettingsError, match=re.escape(words)):
        call(replay)


def test_every_refusal_of_the_replay_api_is_an_asp_error_and_still_the_builtin_it_was(replay):
    """`lookup` of an unknown id raised a bare KeyError and `at_seq` a bare TypeError or IndexError, which a Python
    user's `except asp_cli.AspError` (the README's errors) did not catch; each is now both."""
    from asp_cli.errors import AspError, InputError

    with pytest.raises(InputError, match="prompt id 'nope' is not in the schedule") as raised:
        replay.lookup("nope")
    assert isinstance(raised.value, KeyError) and str(raised.value) == "prompt id 'nope' is not in the schedule"
    for call, builtin in ((lambda: replay.at_seq("3"), TypeError), (lambda: replay.at_seq(10**6), IndexError),
                          (lambda: replay.at_seq(-1), IndexError)):
        with pytest.raises(AspError) as raised:
            call()
        assert isinstance(raised.value, builtin) and isinstance(raised.value, SettingsError)


def test_unknown_epoch_or_instance_is_a_settings_error(replay):
    with pytest.raises(SettingsError, match="no epoch 5"):
        list(replay.minibatches(epoch=5))
    with pytest.raises(SettingsError, match="no instance 9"):
        replay.rows(instance=9)


def test_open_schedule_raises_what_its_docstring_says(tmp_path):
    """Its docstring named only ScheduleFormatError, where a missing file is an InputError and None a SettingsError
    (a library newcomer's round); read_schedule's likewise."""
    from asp_cli.errors import InputError
    from asp_cli.schedule_format import read_schedule

    for documented, call in ((InputError, lambda: open_schedule(tmp_path / "nope.parquet")),
                             (SettingsError, lambda: open_schedule(None))):
        with pytest.raises(documented):
            call()
        assert documented.__name__ in open_schedule.__doc__
    with pytest.raises(InputError):
        read_schedule(tmp_path / "nope.parquet")
    assert "InputError" in read_schedule.__doc__


def test_opening_a_non_schedule_fails_clearly(tmp_path):
    path = tmp_path / "x.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    with pytest.raises(ScheduleFormatError):
        Replay.open(path)


def test_trainer_order_follows_training_steps_and_balances_chunks(replay):
    order = replay.trainer_order(epoch=0, workers=4)
    assert sorted(order["row"].to_list()) == list(range(PROMPTS))
    steps = order["train_step"].to_numpy()
    # Batches come in training-step order: no batch holds a step earlier than the previous batch's last.
    batch = order["trainer_batch"].to_numpy()
    for b in range(int(batch.max())):
        assert steps[batch == b].max() <= steps[batch == b + 1].min()
    full = order.filter(pl.col("trainer_batch") < PROMPTS // BATCH)
    loads = full.group_by("trainer_batch", "trainer_worker").agg(pl.col("predicted_tokens").sum(), pl.len())
    assert (loads["len"] == BATCH // 4).all()
    # Balanced: within each batch the chunks differ by at most the largest item.
    spread = full.group_by("trainer_batch").agg(pl.col("predicted_tokens").max().alias("top"))
    per = loads.group_by("trainer_batch").agg((pl.col("predicted_tokens").max() - pl.col("predicted_tokens").min()).alias("gap"))
    joined = per.join(spread, on="trainer_batch")
    assert (joined["gap"] <= joined["top"]).all()


def test_trainer_order_is_contiguous_per_worker(replay):
    order = replay.trainer_order(epoch=0, workers=2)
    for _, group in order.group_by("trainer_batch"):
        workers = group["trainer_worker"].to_list()
        assert workers == sorted(workers)


def test_dataset_indices_are_the_rows_in_trainer_order(replay):
    assert replay.dataset_indices(epoch=1) == replay.trainer_order(epoch=1)["row"].to_list()
    assert len(replay.dataset_indices()) == PROMPTS * EPOCHS


def test_trainer_order_cuts_batches_as_verl_does(replay):
    """16 prompts over 3 workers: verl 0.9 cuts [6, 6, 4] prompts; verl 0.7 cuts 64 samples [22, 22, 20]."""
    for chunking, sizes in (("v1", [6, 6, 4]), ("legacy", [6, 5, 5])):
        order = replay.trainer_order(epoch=0, workers=INSTANCES, chunking=chunking)
        full = order.filter(pl.col("trainer_batch") < PROMPTS // BATCH)
        for _, batch in full.group_by("trainer_batch"):
            assert np.bincount(batch["trainer_worker"].to_numpy(), minlength=3).tolist() == sizes
    with pytest.raises(SettingsError, match="chunking rule"):
        replay.trainer_order(chunking="v2")


def test_legacy_chunk_capacities_follow_the_repeated_batch():
    assert chunk_capacities(16, 4, 4, rule="legacy").tolist() == [4, 4, 4, 4]
    # 10 prompts x 2 samples = 20 samples in chunks of ceil(20/3) = 7: first samples 0,2,4,6 | 8,10,12 | 14,16,18
    assert chunk_capacities(10, 2, 3, rule="legacy").tolist() == [4, 3, 3]
    assert chunk_capacities(3, 1, 3, rule="legacy").tolist() == [1, 1, 1]
    assert chunk_capacities(0, 4, 2, rule="legacy").tolist() == [0, 0]


@pytest.mark.parametrize("prompts, workers, sizes", [
    # What TensorDict.chunk gave on a real prompt batch in verl 0.9.1 (tests/integration/test_verl.py checks
    # every size up to 64 against it): ceil-sized chunks, the last smaller, trailing workers idle.
    (64, 8, [8] * 8), (64, 7, [10, 10, 10, 10, 10, 10, 4]), (64, 3, [22, 22, 20]), (63, 8, [8] * 7 + [7]),
    (10, 8, [2, 2, 2, 2, 2, 0, 0, 0]), (6, 4, [2, 2, 2, 0]), (3, 8, [1, 1, 1, 0, 0, 0, 0, 0]), (1, 8, [1] + [0] * 7),
    (0, 2, [0, 0]),
])
def test_v1_chunk_capacities_follow_tensordict_chunk(prompts, workers, sizes):
    assert chunk_capacities(prompts, 16, workers).tolist() == sizes


def test_balanced_blocks_beats_contiguous_sorted_chunks():
    loads = np.array([100, 90, 80, 70, 10, 9, 8, 7], dtype=float)
    block = balanced_blocks(loads, np.array([4, 4]))
    sums = np.bincount(block, weights=loads)
    assert abs(sums[0] - sums[1]) < 20
    assert np.bincount(block).tolist() == [4, 4]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(1, 8))
def test_balanced_blocks_respects_capacities(values, blocks):
    loads = np.array(values, dtype=float)
    capacities = np.bincount(np.arange(loads.size) % blocks, minlength=blocks)
    block = balanced_blocks(loads, capacities)
    assert np.bincount(block, minlength=blocks).tolist() == capacities.tolist()
    assert np.array_equal(block, balanced_blocks(loads, capacities))


def test_balanced_blocks_rejects_wrong_capacities():
    with pytest.raises(ValueError):
        balanced_blocks(np.ones(3), np.array([1, 1]))
