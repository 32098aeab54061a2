"""asp_cli.settings: what `ScheduleSettings` takes from a Python user, and how it records it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from asp_cli import ScheduleSettings, SettingsError
from util import make_prompts, write_jsonl


def test_numpy_integers_are_whole_numbers_kept_as_python_ints(tmp_path):
    """A library newcomer's `ScheduleSettings(instances=np.int64(8))` (a count read from a config array or a frame)
    was refused: "--instances must be a whole number from 1 to 100000 (got np.int64(8))", which it is."""
    given = dict(instances=np.int64(3), samples_per_prompt=np.int32(4), epochs=np.uint8(2),
                 train_batch_size=np.int64(16), minibatch_size=np.int16(8), max_response_tokens=np.int64(4096),
                 seed=np.int64(7), max_tokens_per_minibatch=np.int64(200_000), max_lag=np.int64(1), length_classes=np.int64(4))
    made = ScheduleSettings(**given)
    plain = ScheduleSettings(**{k: int(v) for k, v in given.items()})
    assert made == plain and made.to_dict() == plain.to_dict()
    assert all(type(getattr(made, k)) is int for k in given)
    json.dumps(made.to_dict())
    # the same schedule, byte for byte
    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(40))
    from asp_cli import schedule

    schedule(prompts, tmp_path / "a.parquet", settings=made)
    schedule(prompts, tmp_path / "b.parquet", settings=plain)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


@pytest.mark.parametrize("value", [np.bool_(True), True, 8.0, np.float64(8.0), "8"])
def test_what_is_not_a_whole_number_is_still_refused(value):
    with pytest.raises(SettingsError, match=r"--instances must be a whole number from 1 to 100000 \(got "):
        ScheduleSettings(instances=value)


@pytest.mark.parametrize("make", [
    lambda n: __import__("asp_cli").ReplayOptions(instances=n, seed=n, max_lag=n),
    lambda n: __import__("asp_cli").ReplayOptions(mode="streaming", max_lag=n, prompts_per_server=n),
    lambda n: __import__("asp_cli").ProbeSettings(prompts=n, min_per_source=n, seed=n),
    lambda n: __import__("asp_cli").CheckLimits(max_lag=n, max_padding=n // 2),
])
def test_every_settings_class_takes_numpy_integers_as_ints(make):
    """ReplayOptions(instances=np.int64(2)) was "--instances must be a whole number from 1 to 100000 (got
    np.int64(2))", ProbeSettings and CheckLimits alike (a library newcomer's round)."""
    import dataclasses

    made = make(np.int64(2))
    assert made == make(2) and not [v for v in dataclasses.asdict(made).values() if isinstance(v, np.generic)]


def test_the_twins_take_numpy_integers(tmp_path):
    import asp_cli

    prompts = write_jsonl(tmp_path / "p.jsonl", make_prompts(30))
    log = write_jsonl(tmp_path / "log.jsonl", [{"prompt_id": f"p{i}", "response_tokens": 10 + i} for i in range(30)])
    two = np.int64(2)
    assert asp_cli.observe(log, epoch=two).history.equals(asp_cli.observe(log, epoch=2).history)
    assert asp_cli.predict_file(prompts, samples_per_prompt=two, max_response_tokens=np.int64(4096)).table.equals(
        asp_cli.predict_file(prompts, samples_per_prompt=2, max_response_tokens=4096).table)
    assert asp_cli.probe(prompts, samples_per_prompt=two).frame.equals(asp_cli.probe(prompts, samples_per_prompt=2).frame)
    made = asp_cli.schedule(prompts, None)
    plan = asp_cli.replay_schedule(made, dry_run=True, seed=two, gpus_per_instance=two)
    assert plan.document == asp_cli.replay_schedule(made, dry_run=True, seed=2, gpus_per_instance=2).document
    json.dumps(plan.document)
    fitted = asp_cli.fit_predictor(prompts, history=log, seed=two, max_response_tokens=np.int64(64))
    assert fitted.card == asp_cli.fit_predictor(prompts, history=log, seed=2, max_response_tokens=64).card
    json.dumps(fitted.card)


def test_a_numpy_integer_left_unconverted_is_told_to_pass_int():
    """Where a NumPy integer is not taken (a count checked deep inside), the refusal says what to do, rather than
    that np.int64(5) is not a whole number from 1."""
    from asp_cli.settings import check_count

    with pytest.raises(SettingsError, match=re.escape("--x must be a whole number from 1 to 9 (got np.int64(5), a "
                                                      "NumPy integer: pass int(value))")):
        check_count("--x", np.int64(5), minimum=1, maximum=9)
    with pytest.raises(SettingsError, match=re.escape("(got np.int64(50))")):  # out of range: as any other
        check_count("--x", np.int64(50), minimum=1, maximum=9)


@pytest.mark.parametrize(("max_lag", "batch", "prompts"), [(0.1, 128, 12), (0.1, 10, 1), (1.5, 8, 12), (2, 8, 16)])
def test_a_v1_warm_up_is_the_lag_in_train_batches_rounded_down_to_prompts(max_lag, batch, prompts):
    """verl 0.9.1's v1 trainer submits floor(num_warmup_batches x train batch) prompts (gen_batch_size 1 in its
    asynchronous modes, trainer_base.py:624-650), fractions included."""
    from asp_cli.settings import warmup_prompts

    assert warmup_prompts(max_lag, batch) == prompts
    settings = ScheduleSettings(engine="streaming", max_lag=max_lag, train_batch_size=batch,
                                verl_trainer="separate-async", trainer="schedule")
    assert settings.max_lag == max_lag


@pytest.mark.parametrize("mode", ["colocate-async", "separate-async"])
def test_a_fractional_lag_that_is_no_prompt_of_warm_up_is_refused_for_verls_v1_modes(mode):
    """`--max-lag 0.1` (verl's fully asynchronous staleness_threshold, given to a v1 mode) became
    num_warmup_batches=0.1, which verl rounds down to no prompt at a train batch of 8: no warm-up, every step
    synchronous, where the plan was timed asynchronous. Refused there, naming the count and the other knob; the
    fully asynchronous trainer keeps the fraction (its staleness_threshold)."""
    with pytest.raises(SettingsError) as refused:
        ScheduleSettings(engine="streaming", max_lag=0.1, train_batch_size=8, verl_trainer=mode)
    message = str(refused.value)
    assert "\n" not in message and f"trainer.v1.{mode.replace('-', '_')}.num_warmup_batches, a count of train " \
        "batches" in message
    assert "0.1 x 8 is a warm-up of none" in message and "staleness_threshold" in message
    assert "--max-lag 1" in message and "at least 1/8 of a batch" in message
    assert ScheduleSettings(engine="streaming", max_lag=0.125, train_batch_size=8, verl_trainer=mode).max_lag == 0.125
    assert ScheduleSettings(engine="streaming", max_lag=0.1, train_batch_size=8,
                            verl_trainer="fully-async").max_lag == 0.1
    assert ScheduleSettings(engine="streaming", max_lag=0.1, train_batch_size=8).max_lag == 0.1
