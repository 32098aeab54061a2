"""The simulator: closed-form segments against token-by-token stepping, queue sanity, modes and dispatch."""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np
import polars as pl
import pytest

from asp_cli.costmodel import load_preset
from asp_cli.errors import SettingsError
from asp_cli.sim.engine import Engine as _Engine
from asp_cli.sim.lengths import epoch_samples, lengths_for_schedule, sample_lengths
from asp_cli.sim.records import SimulationSettings, Stats as _Stats
from asp_cli.sim.run import simulate_arrays, simulate_schedule


def _stepwise(preset, lengths, prompts, *, capacity, max_seqs, watermark=0.01):
    """Reference: vLLM-like continuous batching, one decode step at a time."""
    n = len(lengths)
    waiting = deque(range(n))
    done = [0] * n  # generated tokens
    live: list[int] = []
    t = 0.0
    finish = [0.0] * n
    while waiting or live:
        held = sum(prompts[j] + done[j] for j in live)
        prefill = 0
        force = not live
        while waiting and len(live) < max_seqs:
            j = waiting[0]
            need = prompts[j] + done[j]
            if held + need + len(live) + 1 > capacity * (1 - watermark) and not force:
                break
            force = False
            waiting.popleft()
            live.append(j)
            held += need
            prefill += need
        t += float(preset.prefill_seconds(prefill)) if prefill else 0.0
        # KV for the next step: every live sequence adds a token; preempt the newest while it overflows.
        while len(live) > 1 and sum(prompts[j] + done[j] + 1 for j in live) > capacity:
            victim = live.pop()
            waiting.appendleft(victim)
        ctx = sum(prompts[j] + done[j] + 1 for j in live)
        t += float(preset.step_seconds(len(live), ctx))
        for j in live:
            done[j] += 1
        still = []
        for j in live:
            if done[j] >= lengths[j]:
                finish[j] = t
            else:
                still.append(j)
        live = still
    return t, np.array(finish)


def _engine(preset, capacity, max_seqs):
    preset = dataclasses.replace(preset, max_num_seqs=max_seqs)
    n_max = 64
    finish = np.zeros(n_max)
    admit = np.zeros(n_max)
    engine = _Engine(preset, SimulationSettings(samples_per_prompt=1, train_batch_size=1), _Stats(), finish, admit)
    engine.capacity = capacity
    engine.admit_limit = capacity * (1 - 0.01)
    return engine, finish, preset


@pytest.mark.parametrize("case", range(12))
def test_segments_match_token_stepping(case):
    rng = np.random.default_rng(case)
    base = load_preset("a100-llama2-7b" if case % 2 else "h100-qwen2.5-7b")
    n = int(rng.integers(1, 20))
    lengths = rng.integers(1, 60, n)
    prompts = rng.integers(1, 30, n)
    max_seqs = int(rng.integers(1, 12))
    capacity = float(rng.integers(int(prompts.max() + lengths.max() + 2), 400))
    engine, finish, preset = _engine(base, capacity, max_seqs)
    engine.feed(range(n), lengths.tolist(), prompts.tolist())
    engine.run(drain=True)
    total, expected = _stepwise(preset, lengths.tolist(), prompts.tolist(), capacity=capacity, max_seqs=max_seqs)
    assert engine.t == pytest.approx(total, rel=1e-9)
    np.testing.assert_allclose(finish[:n], expected, rtol=1e-9)


class _NoReuse(list):
    def append(self, item):  # a finished request's local id is never handed out again
        pass


@pytest.mark.parametrize("case", range(8))
def test_a_refilled_engine_reuses_finished_slots_without_changing_anything(case):
    # Streaming refill: chunks fed while earlier ones are still decoding, under KV pressure (preemptions leave
    # stale heap and stack entries behind). Reusing the local ids of finished requests gives exactly the run
    # of an engine that never reuses them, and keeps its per-request lists short.
    rng = np.random.default_rng(200 + case)
    base = load_preset("h100-qwen2.5-7b")
    max_seqs = int(rng.integers(2, 8))
    chunks = [(int(rng.integers(1, 7)), int(rng.integers(0, 4))) for _ in range(10)]  # at most 60: `_engine`'s 64
    total = sum(size for size, _ in chunks)
    lengths = rng.integers(1, 80, total)
    prompts = rng.integers(1, 30, total)
    runs = []
    for reuse in (True, False):
        engine, finish, _ = _engine(base, 120.0, max_seqs)
        if not reuse:
            engine.free = _NoReuse()
        first = 0
        for size, finishes in chunks:
            engine.feed(range(first, first + size), lengths[first:first + size].tolist(),
                            prompts[first:first + size].tolist())
            engine.run(drain=False)
            for _ in range(finishes):  # decode on to a few completions before the next chunk arrives
                engine.run(drain=True, one_finish=True)
            first += size
        engine.run(drain=True)
        runs.append((engine, finish[:total].copy()))
    (reused, finish_reused), (fresh, finish_fresh) = runs
    assert reused.stats.preemptions > 0  # stale heap and stack entries were left behind
    assert reused.t == fresh.t and reused.stats.preemptions == fresh.stats.preemptions
    np.testing.assert_array_equal(finish_reused, finish_fresh)
    assert (finish_reused > 0).all()
    assert len(reused.gid) < len(fresh.gid) == total


@pytest.mark.parametrize("case", range(6))
def test_stopping_at_a_time_changes_nothing_but_where_the_engine_pauses(case):
    # Run to a series of times, then to the end: the same finishes as one uninterrupted run, and every pause
    # lands on the first decode step ending at or after its time.
    rng = np.random.default_rng(100 + case)
    base = load_preset("h100-qwen2.5-7b")
    n = int(rng.integers(2, 20))
    lengths = rng.integers(1, 400, n)
    prompts = rng.integers(1, 30, n)
    whole, finish_whole, _ = _engine(base, 2000.0, 6)
    whole.feed(range(n), lengths.tolist(), prompts.tolist())
    whole.run(drain=True)
    paused, finish_paused, _ = _engine(base, 2000.0, 6)
    paused.feed(range(n), lengths.tolist(), prompts.tolist())
    for until in np.linspace(0.0, whole.t, 7)[1:-1]:
        before = paused.t
        paused.run(drain=True, until=float(until))
        assert paused.t >= min(until, before) - 1e-12
        assert paused.t < until + 0.05 or paused.idle  # one decode step is milliseconds
    paused.run(drain=True)
    assert paused.t == pytest.approx(whole.t, rel=1e-9)
    np.testing.assert_allclose(finish_paused[:n], finish_whole[:n], rtol=1e-9)


def test_a_busy_instance_held_by_the_lag_rule_takes_work_at_the_publish():
    # One instance, lag 1, one group per step: it starts the long group 0 and the short group 1, then waits
    # for version 1. Group 1 finishes, is trained, and the publish lets group 2 in while group 0 (5,000
    # tokens) is still decoding: group 2 starts then (after loading the new weights), not when group 0 ends.
    preset = load_preset()
    lengths = np.array([[5000], [10], [10], [10]])
    result = simulate_arrays(preset, SimulationSettings(1, 1, mode="streaming", dispatch="free", max_lag=1),
                             instances=1, row_minibatch=np.arange(4), row_instance=np.zeros(4, dtype=np.int32),
                             response_tokens=lengths, prompt_tokens=np.full(4, 50))
    publish = float(result.step_end_s[0]) + preset.weight_sync_s
    assert result.seq_admit_s[2] >= publish - 1e-9
    assert result.seq_admit_s[2] < publish + preset.weight_sync_s + 0.1 < result.seq_finish_s[0]


def test_wave_matches_general_engine():
    preset = load_preset()
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 500, 40)
    prompts = rng.integers(10, 200, 40)
    a, fa, _ = _engine(preset, 1e9, 1024)
    a.run_wave(np.arange(40), lengths, prompts)
    b, fb, _ = _engine(preset, 1e9, 1024)
    b.feed(range(40), lengths.tolist(), prompts.tolist())
    b.run(drain=True)
    assert a.t == pytest.approx(b.t, rel=1e-9)
    np.testing.assert_allclose(fa[:40], fb[:40], rtol=1e-9)
    assert a.stats.tail_s == pytest.approx(b.stats.tail_s, rel=1e-9)
    assert a.stats.live_slot_steps == b.stats.live_slot_steps


def _random_run(seed, **overrides):
    rng = np.random.default_rng(seed)
    rows, n, k = 96, 4, 3
    lengths = np.clip(rng.lognormal(5, 1, (rows, n)), 1, 4000).astype(np.int64)
    prompts = rng.integers(20, 300, rows)
    mb = np.arange(rows) // 8
    instance = (mb % k).astype(np.int32)
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=16, **overrides)
    return simulate_arrays(load_preset(), settings, instances=k, row_minibatch=mb, row_instance=instance,
                           response_tokens=lengths, prompt_tokens=prompts)


@pytest.mark.parametrize("mode", ["continuous", "static", "streaming"])
@pytest.mark.parametrize("max_lag", [None, 0, 2])
def test_littles_law_and_accounting(mode, max_lag):
    result = _random_run(1, mode=mode, max_lag=max_lag)
    m = result.metrics
    # Time-averaged queue occupancy equals arrival rate times mean wait (Little's law, exact over a run).
    waits = result.group_consumed_s - result.group_arrival_s
    assert np.all(waits >= -1e-9)
    assert m["queue_groups_mean"] == pytest.approx(waits.sum() / m["end_to_end_s"], rel=1e-9)
    assert m["groups"] == 96 and result.step_groups.sum() == 96
    assert np.all(result.seq_finish_s > result.seq_admit_s)
    assert m["rollout_makespan_s"] <= m["end_to_end_s"]
    assert 0 <= m["trainer_idle_fraction"] <= 1
    assert np.all(np.diff(result.step_start_s) > 0)


def test_max_lag_bounds_the_lag_and_costs_time():
    free = _random_run(2).metrics
    held = _random_run(2, max_lag=0).metrics
    assert held["policy_lag_max"] <= free["policy_lag_max"]
    assert held["end_to_end_s"] >= free["end_to_end_s"] - 1e-6
    assert held["policy_lag_mean"] <= 1.0


def test_static_is_slower_than_continuous_and_streaming_not_slower():
    continuous = _random_run(4).metrics
    static = _random_run(4, mode="static").metrics
    streaming = _random_run(4, mode="streaming").metrics
    assert static["rollout_makespan_s"] > continuous["rollout_makespan_s"]
    assert streaming["rollout_makespan_s"] <= continuous["rollout_makespan_s"] * 1.01


def test_free_dispatch_balances_a_skewed_plan():
    rng = np.random.default_rng(5)
    rows, n = 64, 2
    lengths = rng.integers(100, 2000, (rows, n))
    mb = np.arange(rows) // 4
    everything_on_zero = np.zeros(rows, dtype=np.int32)
    common = dict(instances=4, row_minibatch=mb, row_instance=everything_on_zero, response_tokens=lengths,
                  prompt_tokens=np.full(rows, 50))
    planned = simulate_arrays(load_preset(), SimulationSettings(n, 8), **common).metrics
    free = simulate_arrays(load_preset(), SimulationSettings(n, 8, dispatch="free"), **common).metrics
    assert free["rollout_makespan_s"] < planned["rollout_makespan_s"] / 2


def test_kv_pressure_preempts_and_recomputes():
    preset = load_preset("a100-llama2-7b")  # MHA: a small cache
    rows, n = 16, 8
    lengths = np.full((rows, n), 3000)
    mb = np.zeros(rows, dtype=np.int64)
    m = simulate_arrays(preset, SimulationSettings(n, 16), instances=1, row_minibatch=mb,
                        row_instance=np.zeros(rows, dtype=np.int32), response_tokens=lengths,
                        prompt_tokens=np.full(rows, 500)).metrics
    assert m["preemptions"] > 0 and m["recomputed_tokens"] > 0
    assert m["peak_kv_utilization"] <= 1.0 + 1e-9


@pytest.mark.parametrize("mode", ["continuous", "streaming"])
def test_a_request_that_outgrows_the_whole_cache_is_counted_once(mode):
    """A response larger than the whole KV cache runs alone and is counted: it was counted only where its prompt
    alone overflowed at admission, so a 1.5M-token response read 0 oversize requests at 157% of the cache (a
    hostile-input round); preempted and readmitted, it still counts once."""
    preset = load_preset("a100-llama2-7b")  # MHA: a small cache
    rows, n = 8, 4
    lengths = np.full((rows, n), 200)
    lengths[3, 1] = 1_500_000
    m = simulate_arrays(preset, SimulationSettings(n, 8, mode=mode), instances=1,
                        row_minibatch=np.arange(rows) // 2, row_instance=np.zeros(rows, dtype=np.int32),
                        response_tokens=lengths, prompt_tokens=np.full(rows, 100)).metrics
    assert m["oversize_requests"] == 1 and m["peak_kv_utilization"] > 1.0
    lengths[5, 0] = 2_000_000
    m = simulate_arrays(preset, SimulationSettings(n, 8, mode=mode), instances=1,
                        row_minibatch=np.arange(rows) // 2, row_instance=np.zeros(rows, dtype=np.int32),
                        response_tokens=lengths, prompt_tokens=np.full(rows, 100)).metrics
    assert m["oversize_requests"] == 2


def test_settings_are_checked():
    with pytest.raises(SettingsError):
        SimulationSettings(mode="fast")  # type: ignore[arg-type]
    with pytest.raises(SettingsError):
        SimulationSettings(dispatch="random")  # type: ignore[arg-type]


def _frame(ids, epochs=1):
    rows = len(ids)
    return pl.DataFrame({
        "seq": np.arange(rows * epochs), "instance": np.zeros(rows * epochs, dtype=np.int32),
        "minibatch": np.arange(rows * epochs) // 2, "epoch": np.repeat(np.arange(epochs), rows).astype(np.int32),
        "row": np.tile(np.arange(rows), epochs), "prompt_id": ids * epochs,
        "predicted_tokens": [100] * rows * epochs, "train_step": np.zeros(rows * epochs, dtype=np.int64),
        "predicted_mean_tokens": [80] * rows * epochs, "prompt_tokens": [30] * rows * epochs,
    })


def test_observed_lengths_first_n_then_drawn_then_noise_model():
    frame = _frame(["a", "b", "c"])
    observed = pl.DataFrame({"prompt_id": ["a"] * 5 + ["b"], "response_tokens": [1, 2, 3, 4, 5, 900]})
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=3, seed=1)
    assert lengths[0].tolist() == [1, 2, 3]
    # One sample of b: it is kept, and the rest of its group is drawn around it with the spread the other
    # prompts show (not copies of it: a group with no spread at all).
    assert lengths[1, 0] == 900 and len(set(lengths[1].tolist())) == 3
    assert info.prompts_observed == 2 and info.prompts_sampled == 1 and info.prompts_drawn == 1
    # a's 5 samples, of a group of 3: its first 3 replayed, and said (a history of several epochs replayed its
    # oldest without a word: a newcomer's round).
    assert info.prompts_over_group == 1 and ("1 prompt has more observed samples than a group holds (3): the first 3"
                                             in " ".join(info.warnings(1 << 30)))
    assert lengths_for_schedule(frame, observed, samples_per_prompt=5, seed=1)[1].warnings(1 << 30) == []
    # The other likely cause, and its fix: the rollout ran more samples per prompt than the schedule's group (a
    # newcomer's verl ran rollout.n=16 on a schedule of 8), named where every prompt has as many.
    assert ("if the rollout ran more samples per prompt than the schedule's 3 (verl's rollout.n), remake the schedule "
            "with --samples-per-prompt N (N the samples per prompt it ran)") in info.over_group_warning()
    every = pl.DataFrame({"prompt_id": [p for p in "abc" for _ in range(6)], "response_tokens": list(range(1, 19))})
    _, uniform = lengths_for_schedule(frame, every, samples_per_prompt=3, seed=1)
    assert uniform.prompts_over_group == 3 and uniform.over_group_warning().endswith(
        "remake the schedule with --samples-per-prompt 6 (every prompt here has 6)")
    again, _ = lengths_for_schedule(frame, observed, samples_per_prompt=3, seed=1)
    np.testing.assert_array_equal(lengths, again)



def test_a_probe_is_left_out_of_the_prompts_an_epoch_holds_and_an_epoch_is_picked_by_its_number():
    """`without_probe_samples`: a prompt's samples without an epoch (a probe's) go where it has an epoch's, and stay
    where it has none; all-numbered or all-unnumbered lengths are as they were. `epoch_samples` names what it holds."""
    from asp_cli.sim.lengths import epoch_samples, without_probe_samples

    observed = pl.DataFrame({"prompt_id": ["a", "b", "a", "a", "a"], "response_tokens": [900, 800, 1, 2, 3],
                             "epoch": [None, None, 0, 0, 1]}, schema_overrides={"epoch": pl.Int32})
    kept, left_out = without_probe_samples(observed)
    assert left_out == 1 and kept["response_tokens"].to_list() == [800, 1, 2, 3]
    lengths, info = lengths_for_schedule(_frame(["a", "b"]), observed, samples_per_prompt=2, seed=1)
    assert lengths[0].tolist() == [1, 2] and lengths[1, 0] == 800 and info.prompts_over_group == 1
    for whole in (observed.filter(pl.col("epoch").is_not_null()), observed.filter(pl.col("epoch").is_null())):
        assert without_probe_samples(whole) == (whole, 0)
    assert epoch_samples(observed, None) is observed
    assert epoch_samples(observed, 0)["response_tokens"].to_list() == [1, 2]
    assert epoch_samples(observed, -1)["response_tokens"].to_list() == [900, 800]
    with pytest.raises(SettingsError, match=r"^--lengths-epoch 2: h.parquet holds epochs 0 and 1, and samples without "
                                            r"an epoch \(a probe's: --lengths-epoch -1\); give one of those"):
        epoch_samples(observed, 2, ["h.parquet"])
    many = pl.DataFrame({"prompt_id": ["a"] * 10, "response_tokens": [1] * 10, "epoch": list(range(10))})
    with pytest.raises(SettingsError, match=r"^--lengths-epoch 10: a.jsonl, b.jsonl hold epochs 0 to 9; give"):
        epoch_samples(many, 10, ["a.jsonl", "b.jsonl"])
    with pytest.raises(SettingsError, match=r"^--lengths-epoch -1: --lengths holds epoch 3; give"):
        epoch_samples(many.head(1).with_columns(pl.lit(3).alias("epoch")), -1)

def test_epochs_out_of_order_replay_the_oldest_as_the_warning_says():
    """A history whose epochs stand out of order (`--lengths e1.jsonl --lengths e0.jsonl`) replayed epoch 1's
    samples, where the warning said the oldest epoch's were: each prompt's samples are taken oldest epoch first."""
    frame = _frame(["a", "b"])
    late_first = pl.DataFrame({"prompt_id": ["a", "a", "b", "b", "a", "a", "b", "b"],
                               "response_tokens": [500, 501, 600, 601, 5, 6, 7, 8],
                               "epoch": [1, 1, 1, 1, 0, 0, 0, 0]}, schema_overrides={"epoch": pl.Int32})
    lengths, info = lengths_for_schedule(frame, late_first, samples_per_prompt=2, seed=1)
    assert lengths.tolist() == [[5, 6], [7, 8]]
    assert "(of a history of several epochs, the oldest)" in info.over_group_warning()


def test_more_samples_than_a_group_of_one_epoch_is_not_called_a_history_of_several():
    """A prompt with more than N samples of one epoch (a log given twice, or a rollout of more samples per prompt;
    what `--lengths-epoch E` leaves) was told to give one epoch's lengths or pick one with --lengths-epoch, which it
    already is: it is told the epoch, and the fixes that fit."""
    frame = _frame(["a", "b"])
    twice = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"], "response_tokens": [5, 6, 7, 8], "epoch": [0] * 4},
                         schema_overrides={"epoch": pl.Int32})
    twice = pl.concat([twice, twice])
    lengths, info = lengths_for_schedule(frame, twice, samples_per_prompt=2, seed=1)
    warning = info.over_group_warning()
    assert info.prompts_over_group == 2 and "epoch 0 alone" in warning
    assert "several epochs" not in warning and "--lengths-epoch" not in warning
    assert warning.endswith("remake the schedule with --samples-per-prompt 4 (every prompt here has 4)")


@pytest.mark.parametrize("epochs", [None, [None] * 8])
def test_more_samples_than_a_group_of_a_probe_is_not_called_a_history_of_several(epochs):
    """`--lengths-epoch -1` (a probe's samples alone) with more probe samples per prompt than the group was told of
    "a history of several epochs": it is told they are a probe's, and the fixes that fit (a file without an epoch
    column too, whose samples --lengths-epoch -1 takes as a probe's)."""
    frame = _frame(["a", "b"])
    probe = pl.DataFrame({"prompt_id": ["a", "b"] * 4, "response_tokens": list(range(5, 13))})
    if epochs is not None:
        probe = probe.with_columns(pl.Series("epoch", epochs, dtype=pl.Int32))
    lengths, info = lengths_for_schedule(frame, epoch_samples(probe, -1), samples_per_prompt=2, seed=1)
    warning = info.over_group_warning()
    assert lengths.tolist() == [[5, 7], [6, 8]] and info.prompts_over_group == 2
    assert "several epochs" not in warning and "of epoch -1" not in warning, warning
    # Nor a probe's alone: several epochs' logs observed without --epoch (a verl newcomer's two epochs of step
    # dumps, observed at once, were told of a probe given twice, 2026-12-07).
    # Every prompt 2 whole groups, none with an epoch: a slime newcomer's hook log of two epochs was told first to
    # remake the schedule with --samples-per-prompt 4, the epochs' fix inside a parenthesis about verl (2026-12-07).
    assert ("the first 2 of each, in the file's order, are replayed; every prompt here has 4, 2 x 2, and no sample "
            "says its epoch: most often a log of 2 epochs (a rollout hook's log appended to every epoch, as "
            "examples/slime_length_log.py's and openrlhf_length_log.py's are: its first samples are its first "
            "epoch's), or a log given twice (give each once): observe each epoch's samples into a history with asp "
            "observe --append --epoch E after that epoch, and replay one with --lengths-epoch E; where the rollout "
            "ran 4 samples per prompt (or a probe did, as --lengths-epoch -1 picks), remake the schedule with "
            "--samples-per-prompt 4") in warning, warning
    # Not whole groups: the causes as before.
    odd = pl.concat([probe, probe.head(2)])
    _, info = lengths_for_schedule(frame, epoch_samples(odd, -1), samples_per_prompt=2, seed=1)
    assert "they are samples without an epoch alone (a probe's" in info.over_group_warning()


def test_several_epochs_each_within_a_group_are_not_told_of_a_larger_rollout_n(tmp_path):
    """A verl newcomer's round (2026-12-07): a history of two epochs of 4 samples a prompt, replayed on a schedule of
    groups of 4, was told to remake it with --samples-per-prompt 8 (every prompt has 8): each epoch's groups are the
    schedule's, and the warning says so (asp report's too)."""
    frame = _frame(["a", "b"])
    history = pl.DataFrame({"prompt_id": ["a", "b"] * 4, "response_tokens": list(range(5, 13)),
                            "epoch": [0, 0, 0, 0, 1, 1, 1, 1]}, schema_overrides={"epoch": pl.Int32})
    _, info = lengths_for_schedule(frame, history, samples_per_prompt=2, seed=1)
    warning = info.over_group_warning()
    assert warning.endswith("(or pick it with --lengths-epoch E); each of its 2 epochs holds at most 2 samples of a "
                            "prompt, as the schedule's groups do"), warning
    assert "--samples-per-prompt" not in warning
    # An epoch that holds more than a group is still told of rollout.n.
    _, info = lengths_for_schedule(frame, history.with_columns(pl.lit(0, pl.Int32).alias("epoch")).vstack(
        history.head(2).with_columns(pl.lit(1, pl.Int32).alias("epoch"))), samples_per_prompt=2, seed=1)
    assert "--samples-per-prompt" in info.over_group_warning()


def test_the_epochs_of_the_prompts_over_a_group_alone_say_what_the_excess_is():
    """A probe of 4 samples of prompt b, which no epoch holds, beside epoch 0's 2 samples of a (N = 2): b alone is
    over the group, all of it a probe's, yet the warning looked at every sample's epoch, said "of a history of
    several epochs, the oldest" and told to pick one with --lengths-epoch, which leaves b's probe out altogether."""
    frame = _frame(["a", "b"])
    observed = pl.DataFrame({"prompt_id": ["b"] * 4 + ["a"] * 2, "response_tokens": [5, 6, 7, 8, 50, 60],
                             "epoch": [None] * 4 + [0] * 2}, schema_overrides={"epoch": pl.Int32})
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=2, seed=1)
    warning = info.over_group_warning()
    assert lengths.tolist() == [[50, 60], [5, 6]] and info.prompts_over_group == 1
    assert "several epochs" not in warning and "pick it with --lengths-epoch" not in warning, warning
    assert "they are samples without an epoch alone (a probe's" in warning, warning


def test_each_epoch_of_a_schedule_of_several_replays_the_lengths_own_epoch_where_they_number_it():
    """A 3-epoch schedule replayed with a 3-epoch history replayed epoch 0's samples in all three epochs (and warned
    of more samples than a group): schedule epoch e takes the history's epoch e where it holds it; a prompt without
    a sample of e takes its others, oldest first; an epoch the history does not number replays as before; a schedule
    of one epoch is as it was."""
    frame = _frame(["a", "b"], epochs=3)
    history = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 3,
                            "response_tokens": [1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24],
                            "epoch": [0] * 4 + [1] * 4 + [2] * 4}, schema_overrides={"epoch": pl.Int32})
    lengths, info = lengths_for_schedule(frame, history, samples_per_prompt=2, seed=1)
    assert lengths.tolist() == [[1, 2], [3, 4], [11, 12], [13, 14], [21, 22], [23, 24]]
    assert info.warnings(1 << 30) == [] and info.epochs_text() == "schedule epochs 0, 1 and 2 replayed the lengths' own"
    assert info.to_dict()["epochs_replayed"][1] == {"schedule_epoch": 1, "lengths_epoch": 1,
                                                    "prompts_from_other_epochs": 0}
    # Epoch 2 not in the history: each prompt's oldest, said.
    lengths, info = lengths_for_schedule(frame, history.filter(pl.col("epoch") < 2), samples_per_prompt=2, seed=1)
    assert lengths.tolist()[4:] == [[1, 2], [3, 4]]
    assert info.epochs_text() == ("schedule epochs 0 and 1 replayed the lengths' own; epoch 2, which the lengths do "
                                  "not number, each prompt's oldest epoch's")
    # b has no sample of epoch 1: its oldest (epoch 0's) there, counted.
    gap = history.filter(~((pl.col("prompt_id") == "b") & (pl.col("epoch") == 1)))
    lengths, info = lengths_for_schedule(frame, gap, samples_per_prompt=2, seed=1)
    assert lengths.tolist()[2:4] == [[11, 12], [3, 4]]
    assert info.to_dict()["epochs_replayed"][1]["prompts_from_other_epochs"] == 1
    # An epoch with fewer than N of a prompt: the rest from its other epochs, oldest first, before any is drawn.
    short = history.filter(~((pl.col("epoch") == 2) & pl.col("response_tokens").is_in([22, 24])))
    assert lengths_for_schedule(frame, short, samples_per_prompt=2, seed=1)[0].tolist()[4:] == [[21, 1], [23, 3]]
    # Numbered otherwise (a later run's epochs 5 to 7): the oldest everywhere, as before, and said.
    lengths, info = lengths_for_schedule(frame, history.with_columns(pl.col("epoch") + 5), samples_per_prompt=2,
                                         seed=1)
    assert lengths.tolist() == [[1, 2], [3, 4]] * 3
    assert "which the lengths do not number" in info.epochs_text()
    # One epoch: as it was (its oldest, warned), nothing said of epochs replayed.
    lengths, info = lengths_for_schedule(_frame(["a", "b"]), history, samples_per_prompt=2, seed=1)
    assert lengths.tolist() == [[1, 2], [3, 4]] and info.prompts_over_group == 2 and info.epochs_text() == ""
    assert info.to_dict()["epochs_replayed"] == []


def test_noise_model_is_centred_and_seeded():
    mean = np.full(20_000, 400)
    drawn = sample_lengths(mean, np.arange(20_000), 4, seed=0, max_response_tokens=100_000)
    assert drawn.mean() == pytest.approx(400, rel=0.03)
    assert np.array_equal(drawn, sample_lengths(mean, np.arange(20_000), 4, seed=0, max_response_tokens=100_000))


def test_simulate_schedule_adds_the_bound():
    frame = _frame([str(i) for i in range(8)], epochs=2)
    lengths, _ = lengths_for_schedule(frame, None, samples_per_prompt=2, seed=0)
    result = simulate_schedule(frame, lengths, load_preset(), SimulationSettings(2, 4), instances=1)
    m = result.metrics
    assert m["ratio_to_lower_bound"] >= 1.0
    assert m["lower_bound_end_to_end_binding"]
    series = result.timeseries(bins=20)
    assert series["live_sequences"].shape == (20,)
    assert series["groups_arrived"][-1] == 16


@pytest.mark.slow
def test_one_million_sequences_is_fast():
    import time

    rng = np.random.default_rng(0)
    rows, n = 125_000, 8
    lengths = np.clip(rng.lognormal(np.log(300), 0.8, (rows, n)), 1, 8192).astype(np.int64)
    mb = np.arange(rows) // 32
    started = time.perf_counter()
    simulate_arrays(load_preset(), SimulationSettings(n, 128), instances=8, row_minibatch=mb,
                    row_instance=(mb % 8).astype(np.int32), response_tokens=lengths,
                    prompt_tokens=rng.integers(50, 400, rows))
    assert time.perf_counter() - started < 20


def test_a_trainer_that_follows_the_schedule_takes_exactly_the_assigned_groups():
    from asp_cli.costmodel import load_preset

    preset = load_preset()
    rows, n = 12, 2
    lengths = np.tile(np.arange(1, rows + 1)[:, None] * 50, (1, n))  # later rows are longer
    assigned = np.array([1, 0, 2] * 4)  # not arrival order
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=4, trainer="schedule")
    result = simulate_arrays(preset, settings, instances=2, row_minibatch=np.arange(rows),
                             row_instance=np.arange(rows) % 2, response_tokens=lengths,
                             prompt_tokens=np.full(rows, 10), row_train_step=assigned)
    assert np.array_equal(result.group_step, assigned)
    # A step starts only once its last assigned group has arrived.
    for s in range(3):
        assert result.step_start_s[s] >= result.group_arrival_s[assigned == s].max()
    arrival = simulate_arrays(preset, SimulationSettings(samples_per_prompt=n, train_batch_size=4), instances=2,
                              row_minibatch=np.arange(rows), row_instance=np.arange(rows) % 2,
                              response_tokens=lengths, prompt_tokens=np.full(rows, 10))
    assert not np.array_equal(arrival.group_step, assigned)


def test_a_schedule_trainer_needs_the_train_step_column():
    from asp_cli.costmodel import load_preset
    from asp_cli.errors import SettingsError

    with pytest.raises(SettingsError, match="needs its train_step column"):
        simulate_arrays(load_preset(), SimulationSettings(samples_per_prompt=1, trainer="schedule"), instances=1,
                        row_minibatch=np.arange(3), row_instance=np.zeros(3), response_tokens=np.ones((3, 1)),
                        prompt_tokens=np.ones(3))


@pytest.mark.parametrize("mode", ["continuous", "streaming"])
def test_a_schedule_following_trainer_is_held_to_the_lag_bound(mode):
    rng = np.random.default_rng(8)
    rows, n, batch = 96, 2, 8
    lengths = rng.integers(50, 3000, (rows, n))
    step = np.arange(rows) // batch  # steps in dispatch order: the bound can always be kept
    common = dict(instances=4, row_minibatch=np.arange(rows) // 4 if mode == "continuous" else np.arange(rows),
                  row_instance=np.arange(rows) % 4, response_tokens=lengths, prompt_tokens=np.full(rows, 50),
                  row_train_step=step)
    for lag in (0, 2):
        settings = SimulationSettings(n, batch, mode=mode, dispatch="free", max_lag=lag, trainer="schedule")
        m = simulate_arrays(load_preset(), settings, **common).metrics
        assert m["policy_lag_max"] <= lag and m["lag_rule_released"] == 0
    free = simulate_arrays(load_preset(), SimulationSettings(n, batch, mode=mode, dispatch="free",
                                                             trainer="schedule"), **common).metrics
    assert free["policy_lag_max"] > 2  # without the bound rollout runs ahead


def test_an_order_that_would_wait_forever_is_let_go_and_its_lag_reported():
    rows, n, batch = 32, 1, 8
    # Step 3's groups are dispatched first, then step 0's: with lag 0 step 3 may not start before version 3,
    # which needs step 0, which is queued behind it.
    step = np.repeat([3, 0, 1, 2], batch)
    settings = SimulationSettings(n, batch, dispatch="free", max_lag=0, trainer="schedule")
    m = simulate_arrays(load_preset(), settings, instances=1, row_minibatch=np.arange(rows) // batch,
                        row_instance=np.zeros(rows, dtype=np.int32), response_tokens=np.full((rows, n), 100),
                        prompt_tokens=np.full(rows, 50), row_train_step=step).metrics
    assert m["lag_rule_released"] >= 1 and m["policy_lag_max"] >= 3


def test_a_group_is_completed_with_the_spread_of_its_own_samples_and_its_source():
    from asp_cli.sim.lengths import complete_groups

    rng = np.random.default_rng(0)
    wide = np.exp(rng.normal(7.0, 0.6, (300, 2)))  # source 0: two samples a prompt, sd 0.6
    narrow = np.exp(rng.normal(7.0, 0.1, (300, 2)))  # source 1: sd 0.1
    tokens = np.rint(np.concatenate([wide, narrow]).ravel()).astype(np.int64)
    count = np.full(600, 2)
    offset = np.arange(600) * 2
    pool = np.repeat([0, 1], 300)
    groups = complete_groups(tokens, offset, count, 8, np.random.default_rng(1), pool=pool,
                             max_response_tokens=5_000)
    assert np.array_equal(groups[:, :2], tokens.reshape(600, 2))  # the observed samples first, unchanged
    spread = np.log(groups).std(axis=1, ddof=1)
    assert 0.45 < spread[:300].mean() < 0.75 and spread[300:].mean() < 0.15  # each source its own spread
    assert groups[:, 2:].max() <= 5_000  # drawn lengths stop at the cap
    none = complete_groups(tokens[:0], np.zeros(2, np.int64), np.zeros(2, np.int64), 4, np.random.default_rng(1))
    assert not none.any()  # nothing observed: left for the noise model
    again = complete_groups(tokens, offset, count, 8, np.random.default_rng(1), pool=pool, max_response_tokens=5_000)
    assert np.array_equal(groups, again)


def test_prompts_with_drawn_samples_are_counted_once_over_epochs():
    frame = _frame(["a", "b"], epochs=2)
    observed = pl.DataFrame({"prompt_id": ["a", "b", "b"], "response_tokens": [50, 60, 70]})
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=3, seed=0)
    assert info.prompts_drawn == 2 and info.to_dict()["prompts_with_drawn_samples"] == 2
    assert lengths[0, 0] == 50 and lengths[2, 0] == 50 and lengths[1, :2].tolist() == [60, 70]


def test_random_arrangements_step_deviation_is_their_average_p90():
    from asp_cli.sim.metrics import random_step_deviation_p90

    assert random_step_deviation_p90(np.full(500, 40.0), 4, 50, 2, seed=0) == 0.0
    rng = np.random.default_rng(1)
    tokens = rng.lognormal(6.0, 1.0, 2000)
    got = random_step_deviation_p90(tokens, 4, 100, 1, seed=0, permutations=64)
    assert got == random_step_deviation_p90(tokens, 4, 100, 1, seed=0, permutations=64)
    # About 1.645 standard deviations of a random step's mean (sampling without replacement), relative.
    sd = tokens.std() / tokens.mean() / np.sqrt(100) * np.sqrt((2000 - 100) / 1999)
    assert 1.3 * sd < got < 2.0 * sd
    # Each step's deviation as the replay metric measures it: one permutation by hand.
    one = random_step_deviation_p90(tokens[:300], 1, 100, 1, seed=3, permutations=1)
    order = np.argsort(np.random.default_rng([3, 53]).random((1, 300)), axis=1)[0]
    ratio = tokens[:300][order].reshape(3, 100).mean(axis=1) / tokens[:300].mean()
    assert one == pytest.approx(np.quantile(np.abs(ratio - 1), 0.9))



def test_a_probe_of_other_prompts_does_not_hide_that_each_epoch_holds_a_group():
    """Two epochs of 2 samples of a and b (N = 2) beside one probe sample of c, which no epoch holds: a and b alone
    are over the group, yet the epochs were judged over every sample, c's without an epoch among them, and the
    warning told to remake the schedule with --samples-per-prompt 4 for two epochs of groups of 2."""
    frame = _frame(["a", "b", "c"])
    observed = pl.DataFrame({"prompt_id": ["a", "b"] * 4 + ["c"], "response_tokens": list(range(5, 14)),
                             "epoch": [0, 0, 0, 0, 1, 1, 1, 1, None]}, schema_overrides={"epoch": pl.Int32})
    _, info = lengths_for_schedule(frame, observed, samples_per_prompt=2, seed=1)
    warning = info.over_group_warning()
    assert info.prompts_over_group == 2
    assert warning.endswith("each of its 2 epochs holds at most 2 samples of a prompt, as the schedule's groups do"), \
        warning
    assert "--samples-per-prompt" not in warning


def test_each_schedule_epochs_replay_matches_a_row_by_row_reading_of_the_rule():
    """`_replay_segments` (NumPy since a hostile review found the Polars window and joins a third slower and three
    times the memory of the replay before it, on 100k prompts x 3 epochs) against the rule read row by row: a row of
    a schedule epoch the lengths number takes its prompt's samples of that epoch first, then the others in replay
    order; any other row the prompt's samples in replay order. Epochs 0 and 2 observed, not 1; a probe's samples
    (no epoch) of a prompt no epoch holds; a prompt missing from epoch 2; one never observed; a huge epoch number."""
    from asp_cli.sim.lengths import matched_epochs, _replay_segments, in_replay_order

    rng = np.random.default_rng(3)
    ids = [f"p{i}" for i in range(7)]
    frame = pl.DataFrame({"prompt_id": ids * 4, "epoch": np.repeat([0, 1, 2, 10**9], 7)})
    rows = []
    for epoch in (2, 0, 10**9):  # the files out of order: the replay order is oldest epoch first
        for i in ids[:5]:
            if (epoch, i) != (2, "p4"):
                rows += [(i, int(rng.integers(1, 500)), epoch) for _ in range(int(rng.integers(1, 4)))]
    rows += [("p5", 77, None), ("p5", 78, None)]
    observed = pl.DataFrame({"prompt_id": [r[0] for r in rows], "response_tokens": [r[1] for r in rows],
                             "epoch": [r[2] for r in rows]}, schema_overrides={"epoch": pl.Int32})
    ordered, _ = in_replay_order(observed)
    _, matched = matched_epochs(frame, ordered)
    assert matched == [0, 2, 10**9]
    flat, offset, count, own, own_count, _numbered, source = _replay_segments(frame, ordered, matched)
    base = flat[:source.size // (len(matched) + 1)]
    assert (base[source] == flat).all()  # each element's sample in the first layout
    listed = list(zip(ordered["prompt_id"], ordered["response_tokens"], ordered["epoch"]))
    for r, (i, e) in enumerate(zip(frame["prompt_id"], frame["epoch"])):
        samples = [(t, s_e) for s_i, t, s_e in listed if s_i == i]
        mine = [t for t, s_e in samples if s_e == e]
        expected = (mine + [t for t, s_e in samples if s_e != e]) if mine else [t for t, _ in samples]
        assert flat[offset[r]:offset[r] + count[r]].tolist() == expected, (i, e)
        assert (bool(own[r]), int(own_count[r]) if own[r] else 0) == (bool(mine), len(mine)), (i, e)


def test_a_prompt_of_a_probe_alone_is_not_counted_as_replaying_other_epochs():
    """A prompt the lengths hold a probe's samples of (no epoch) and no epoch's replays those in every schedule
    epoch, as before; `epochs_replayed` counted it among the prompts that replayed "their other epochs'" samples
    (and the summary said so), though it has none (a hostile review, 2026-12-07)."""
    frame = pl.DataFrame({"prompt_id": ["a", "b"] * 2, "epoch": [0, 0, 1, 1]})
    observed = pl.DataFrame({"prompt_id": ["a", "a", "b", "a", "a", "c"], "response_tokens": [10, 11, 50, 20, 21, 5],
                             "epoch": [0, 0, None, 1, 1, 2]}, schema_overrides={"epoch": pl.Int32})
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=2, seed=1)
    assert lengths[:, 0].tolist()[::2] == [10, 20] and lengths[1, 0] == lengths[3, 0] == 50
    assert info.epochs_replayed == ((0, 0, 0), (1, 1, 0))


def test_a_sample_over_the_cap_replayed_in_several_epochs_is_counted_once():
    """An observed sample longer than the cap, replayed in every epoch of a 3-epoch schedule (a one-epoch log, or a
    schedule epoch the lengths do not number replaying the oldest), was counted once per epoch: 1 sample was said as
    "3 observed samples are longer than the schedule's max_response_tokens" (a hostile review, 2026-12-07)."""
    frame = pl.DataFrame({"prompt_id": ["a", "b"] * 3, "epoch": [0, 0, 1, 1, 2, 2]})
    one = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"], "response_tokens": [900, 10, 20, 30]})
    _, info = lengths_for_schedule(frame, one, samples_per_prompt=2, max_response_tokens=100)
    assert info.samples_over_cap == 1
    assert info.warnings(100)[0].startswith("1 observed sample is longer than the schedule's max_response_tokens (100)")
    # Epochs 0 and 1 observed: schedule epoch 1 replays its own, epochs 0 and 2 epoch 0's with the long one in it.
    two = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 2, "response_tokens": [900, 10, 20, 30, 40, 950, 60, 70],
                        "epoch": [0] * 4 + [1] * 4}, schema_overrides={"epoch": pl.Int32})
    lengths, info = lengths_for_schedule(frame, two, samples_per_prompt=2, max_response_tokens=100)
    assert lengths[:, 0].tolist() == [900, 20, 40, 60, 900, 20] and info.samples_over_cap == 2


def test_more_than_a_group_in_a_schedule_epochs_own_samples_is_said_of_that_epoch():
    """Each schedule epoch replays the lengths' own epoch: where epoch 0 holds twice a group of each prompt (its log
    given twice under two names), the warning said the oldest epoch of a history of several was replayed and to pick
    one with --lengths-epoch, beside a summary saying each epoch replayed its own (a hostile review, 2026-12-07). It
    names the epoch that holds too many now, and every such epoch where all do; a schedule epoch the lengths do not
    number, which replays all epochs' samples, is said as before."""
    frame = pl.DataFrame({"prompt_id": ["a", "b"] * 3, "epoch": [0, 0, 1, 1, 2, 2]})

    def observed(copies: dict[int, int]) -> pl.DataFrame:
        rows = [(i, 10 * e + k, e) for e, times in copies.items() for _ in range(times) for i in "ab" for k in (1, 2)]
        return pl.DataFrame({"prompt_id": [r[0] for r in rows], "response_tokens": [r[1] for r in rows],
                             "epoch": [r[2] for r in rows]}, schema_overrides={"epoch": pl.Int32})

    lengths, info = lengths_for_schedule(frame, observed({0: 2, 1: 1, 2: 1}), samples_per_prompt=2)
    assert lengths.tolist() == [[1, 2], [1, 2], [11, 12], [11, 12], [21, 22], [21, 22]]
    warning = info.over_group_warning()
    assert "they are of epoch 0 alone: a log given twice (give each once), or a rollout of more samples" in warning
    assert "oldest" not in warning and "--lengths-epoch" not in warning
    warning = lengths_for_schedule(frame, observed({0: 2, 1: 2, 2: 2}), samples_per_prompt=2)[1].over_group_warning()
    assert ("they are of epochs 0, 1 and 2 each, every schedule epoch replaying its own: a log given twice (give each "
            "once)") in warning and "--samples-per-prompt 4 (every prompt here has 4)" in warning
    # Epoch 2 not observed: its rows replay each prompt's first samples of every epoch, the oldest first.
    warning = lengths_for_schedule(frame, observed({0: 1, 1: 1}), samples_per_prompt=2)[1].over_group_warning()
    assert "(of a history of several epochs, the oldest)" in warning
