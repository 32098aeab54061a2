import numpy as np
import pytest

from asp_cli.costmodel import PRESETS, wave_decode_seconds
from asp_cli.arrange.timeline import minibatch_times, policy_version_at, trainer_seconds, trainer_timeline

PRESET = PRESETS["h100-qwen2.5-7b"]


@pytest.mark.parametrize("samples", [1, 2, 8])
def test_vectorised_minibatch_times_match_the_single_wave_closed_form(samples):
    rng = np.random.default_rng(samples)
    count, waves = 60, 7
    minibatch = rng.integers(0, waves, count)
    minibatch[:waves] = np.arange(waves)
    top = rng.integers(10, 2000, count).astype(float)
    mean = top * rng.uniform(0.3, 1.0, count)
    prompts = rng.integers(5, 300, count).astype(float)
    duration, finish = minibatch_times(PRESET, minibatch, waves, prompts, top, mean, samples)
    rest = np.clip((samples * mean - top) / max(samples - 1, 1), 1, top)
    for m in range(waves):
        idx = np.flatnonzero(minibatch == m)
        lengths = np.concatenate([top[idx]] + [rest[idx]] * (samples - 1))
        total, each = wave_decode_seconds(PRESET, lengths, np.concatenate([prompts[idx]] * samples))
        assert duration[m] == pytest.approx(total, rel=1e-12)
        assert np.allclose(finish[idx], each[: idx.size], rtol=1e-12)


def test_oversized_minibatch_is_stretched():
    top = np.full(2000, 100.0)
    duration_small, _ = minibatch_times(PRESET, np.zeros(100, dtype=int), 1, np.full(100, 10.0), top[:100], top[:100], 1)
    duration_big, _ = minibatch_times(PRESET, np.zeros(2000, dtype=int), 1, np.full(2000, 10.0), top, top, 1)
    # 2000 sequences exceed max_num_seqs (1024): at least two waves' worth of time.
    assert duration_big[0] > 1.9 * duration_small[0]


def test_trainer_takes_batches_in_arrival_order():
    arrival = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 6.0])
    step, start, end = trainer_timeline(PRESET, arrival, np.full(6, 1000.0), train_batch_size=2)
    assert step.tolist() == [2, 0, 1, 0, 1, 2]
    assert start[0] == 2.0  # the second arrival completes the first batch
    assert np.all(start[1:] >= end[:-1])
    assert np.all(start >= np.array([2.0, 4.0, 6.0]))


def test_trainer_seconds_is_the_timeline_without_waits():
    tokens = np.linspace(1000.0, 9000.0, 7)
    arrival = np.zeros(7)  # everything there at once: the trainer never waits
    _, start, end = trainer_timeline(PRESET, arrival, tokens, train_batch_size=3)
    assert trainer_seconds(PRESET, tokens, train_batch_size=3) == pytest.approx(end[-1] - start[0])


def test_policy_version_counts_finished_steps():
    assert policy_version_at(np.array([10.0, 20.0]), np.array([0.0, 10.0, 15.0, 25.0])).tolist() == [0, 1, 1, 2]


def test_stratified_steps_give_every_step_its_share_of_every_class():
    from asp_cli.arrange.timeline import stratified_steps

    rng = np.random.default_rng(0)
    classes = np.repeat(np.arange(4), 100)
    finish = rng.random(400)
    epoch = np.zeros(400, dtype=np.int64)
    steps = stratified_steps(finish, classes, epoch, 40)
    assert np.bincount(steps).tolist() == [40] * 10
    for s in range(10):
        assert np.bincount(classes[steps == s], minlength=4).tolist() == [10, 10, 10, 10]
    # Inside a class, earlier finishers go to earlier steps.
    for c in range(4):
        members = np.flatnonzero(classes == c)
        by_finish = members[np.argsort(finish[members])]
        assert np.all(np.diff(steps[by_finish]) >= 0)


def test_stratified_steps_restart_each_epoch():
    from asp_cli.arrange.timeline import stratified_steps

    epoch = np.repeat([0, 1], 50)
    steps = stratified_steps(np.arange(100.0), np.zeros(100, dtype=np.int64), epoch, 32)
    assert steps[:50].max() == 1 and steps[50:].min() == 2 and steps.max() == 3


@pytest.mark.parametrize("samples", [1, 4])
def test_minibatch_times_in_pieces_match_the_whole_to_the_last_bit(samples):
    rng = np.random.default_rng(samples)
    prompts = 3_000
    minibatch = rng.integers(0, 400, prompts)
    prompt_tokens = rng.integers(10, 500, prompts).astype(np.float64)
    top = np.rint(np.exp(rng.normal(6.0, 1.2, prompts)))
    mean = top * rng.uniform(0.3, 1.0, prompts)
    whole = minibatch_times(PRESET, minibatch, 400, prompt_tokens, top, mean, samples, chunk_prompts=10**9)
    for chunk in (1, 37, 1_000):
        pieces = minibatch_times(PRESET, minibatch, 400, prompt_tokens, top, mean, samples, chunk_prompts=chunk)
        assert pieces[0].tobytes() == whole[0].tobytes()
        assert pieces[1].tobytes() == whole[1].tobytes()
    assert np.all(whole[0][np.setdiff1d(np.arange(400), minibatch)] == 0.0)


def test_the_kv_peak_ratio_is_the_peak_of_the_expected_live_tokens_of_a_lognormal_wave():
    import math

    from asp_cli.arrange.timeline import kv_peak_ratio

    def brute(sigma: float) -> float:  # max over s of s P(L > s) / E[L], on a fine grid of quantiles
        t = np.linspace(-8, 6, 140_001)
        tail = np.array([0.5 * math.erfc(x / math.sqrt(2)) for x in t[::100]])
        return float(np.max(np.exp(sigma * t[::100] - sigma**2 / 2) * tail))

    sigmas = np.array([0.0, 0.05, 0.1, 0.3, 0.5, 1.0, 2.5])
    ratio = kv_peak_ratio(sigmas)
    assert ratio[0] == 1.0 and np.all(np.diff(ratio) < 0)  # no spread: the whole sum; more spread, a lower peak
    assert np.allclose(ratio[1:], [brute(s) for s in sigmas[1:]], atol=2e-3)
    assert abs(float(kv_peak_ratio(0.3)) - 0.596) < 0.002
    assert float(kv_peak_ratio(9.0)) == float(kv_peak_ratio(3.0))  # clipped at the table's end


def test_a_large_waves_realised_peak_is_about_its_expected_peak():
    # 4,000 sequences of one wave, log-normal lengths of spread 0.3: the cache peaks (the longest k live, as the
    # k-th ends) at about kv_peak_ratio(0.3) of the summed lengths, far below the sum the whole count reserves.
    from asp_cli.arrange.timeline import group_kv_tokens, group_tokens, kv_peak_ratio

    lengths = np.sort(np.random.default_rng(5).lognormal(np.log(5000.0), 0.3, 4000))[::-1]
    realised = float(np.max(np.arange(1, lengths.size + 1) * lengths))
    assert realised / lengths.sum() == pytest.approx(float(kv_peak_ratio(0.3)), rel=0.03)
    mean = np.array([5000.0 * np.exp(0.045)])
    assert group_kv_tokens(8, np.array([100.0]), mean, np.array([0.0]))[0] == group_tokens(8, np.array([100.0]), mean)[0]
    assert group_kv_tokens(8, np.array([100.0]), mean, np.array([0.3]))[0] < group_tokens(8, np.array([100.0]), mean)[0]


def test_minibatch_times_stretch_a_wave_over_the_cache_as_the_packer_counted_it():
    # Counted at its expected peak, a minibatch within the cache runs as one wave; the whole count would have
    # stretched the same minibatch over two.
    prompts, top, mean = np.full(40, 100.0), np.full(40, 12_000.0), np.full(40, 9_000.0)
    minibatch = np.zeros(40, dtype=int)
    whole, _ = minibatch_times(PRESET, minibatch, 1, prompts, top, mean, 4)
    kv = np.full(40, PRESET.kv_capacity_tokens / 40.0)  # exactly fills the cache
    peak, _ = minibatch_times(PRESET, minibatch, 1, prompts, top, mean, 4, kv_tokens=kv)
    assert 40 * 4 * (100 + 9_000) > PRESET.kv_capacity_tokens
    assert peak[0] < whole[0]
    over, _ = minibatch_times(PRESET, minibatch, 1, prompts, top, mean, 4, kv_tokens=2 * kv)
    assert over[0] == pytest.approx(2 * peak[0])


def test_busy_time_is_the_union_of_an_instances_intervals():
    """Overlapping request batches (an engine that refills) counted each second once: their sum made an
    instance 14,566 s busy in a 95 s rollout."""
    from asp_cli.arrange.timeline import busy_seconds

    instance = np.array([1, 0, 0, 0, 1, 0])
    start = np.array([5.0, 0.0, 1.0, 10.0, 7.0, 11.0])
    end = np.array([6.0, 4.0, 3.0, 12.0, 9.0, 11.5])
    # instance 0: [0, 4) with [1, 3) inside it, then [10, 12) with [11, 11.5) inside: 6 s; instance 1: 1 + 2 s.
    assert busy_seconds(instance, start, end, 3).tolist() == [6.0, 3.0, 0.0]
    back_to_back = np.array([0.0, 2.0, 5.0])  # a blocking instance: the sum of its durations
    assert busy_seconds(np.zeros(3, dtype=int), back_to_back, back_to_back + 2.0, 1).tolist() == [6.0]
    assert busy_seconds(np.array([], dtype=int), np.array([]), np.array([]), 2).tolist() == [0.0, 0.0]


def test_a_streaming_plan_is_never_busier_than_its_makespan():
    from asp_cli.arrange.pipeline import arrange, summarize
    from asp_cli.settings import ScheduleSettings
    from util import make_predictions, prompt_frame

    settings = ScheduleSettings(instances=4, engine="streaming")
    frame = arrange(prompt_frame(300), make_predictions(300), settings, preset=PRESET)
    summary = summarize(frame, settings, PRESET)
    assert max(summary["predicted_instance_busy_s"]) <= summary["predicted_rollout_makespan_s"] + 1e-6
