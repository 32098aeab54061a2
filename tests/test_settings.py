"""asp_cli.settings: what `ScheduleSettings` takes from a Python user, and how it records it."""

from __future__ import annotations

import json

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
