"""The verl v1 replay buffer's settings, without verl (tests/integration/test_verl.py runs it inside verl)."""

from __future__ import annotations

import pytest
from _schedules import BATCH, PROMPTS, built  # noqa: F401 - fixture

from asp_cli.errors import SettingsError
from asp_cli.integrate.verl_config import trainer_setting
from asp_cli.integrate.verl_sampler import ScheduleReplayBuffer


def make(schedule, mode="sync", threshold=8, **kwargs):
    return ScheduleReplayBuffer(trainer_mode=mode, trainer_config={}, max_off_policy_threshold=threshold,
                                max_off_policy_strategy="drop", sampler_kwargs={"schedule": str(schedule), **kwargs})


def test_importing_it_needs_neither_verl_nor_transfer_queue():
    import subprocess
    import sys

    code = ("import sys; sys.modules['verl'] = None; sys.modules['transfer_queue'] = None; sys.modules['torch'] = None\n"
            "import asp_cli.integrate.verl_sampler")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_settings_follow_the_trainer_mode(built):  # noqa: F811
    sync = make(built["schedule"])
    assert sync.bound is None and sync.drain and sync.refill_size == BATCH and len(sync.plan) == 2 * PROMPTS
    async_ = make(built["schedule"], mode="colocate_async", poll_interval=0.1, prefix="asp_")
    assert async_.bound.max_span == 8 and not async_.drain and async_.refill_size == 1
    assert async_.poll_interval == 0.1 and async_.seq_key == "asp_seq"
    assert make(built["schedule"], mode="separate_async", threshold=None).bound is None
    one = make(built["schedule"], epoch=1)
    assert len(one.plan) == PROMPTS and one.plan.first_step > 0


@pytest.mark.parametrize("mode, kwargs, words", [
    ("sync", {"schedule": None}, "needs a schedule"),
    ("sync", {"schedul": "x"}, "sampler_kwargs.schedul is not a ScheduleReplayBuffer setting"),
    ("fast", {}, "trainer.v1.trainer_mode must be one of"),
    ("sync", {"epoch": 9}, "no epoch 9"),
])
def test_bad_settings_are_refused(built, mode, kwargs, words):  # noqa: F811
    sampler_kwargs = {"schedule": str(built["schedule"]), **kwargs}
    sampler_kwargs = {k: v for k, v in sampler_kwargs.items() if v is not None}
    with pytest.raises(SettingsError, match=words):
        ScheduleReplayBuffer(trainer_mode=mode, trainer_config={}, max_off_policy_threshold=8,
                             max_off_policy_strategy="drop", sampler_kwargs=sampler_kwargs)


def test_another_train_batch_size_is_refused_before_touching_the_queue(built):  # noqa: F811
    buffer = ScheduleReplayBuffer(trainer_mode="separate_async", trainer_config={"parameter_sync_step": 4},
                                  max_off_policy_threshold=8, max_off_policy_strategy="wait",
                                  sampler_kwargs={"schedule": str(built["schedule"])})
    with pytest.raises(SettingsError, match=f"train_batch_size=8 but the schedule was made with --train-batch-size {BATCH}"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=2)
    buffer._check_batch_size(BATCH // 4)


def test_a_plain_mapping_has_no_trainer_settings():
    assert trainer_setting({"train_files": "x"}, "trainer.use_v1") is None
