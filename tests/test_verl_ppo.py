"""The settings `asp export --format verl` prints for verl's default trainer, and what it says of them
(`asp_cli.integrate.verl_ppo`); tests/integration/test_verl.py runs them through verl 0.9.1 itself."""

from __future__ import annotations

from _schedules import BATCH, EPOCHS, PROMPTS, built  # noqa: F401 - fixture

from asp_cli.integrate.export import export
from asp_cli.integrate.verl_ppo import VERL_DEFAULT_PPO_MINI_BATCH, ppo_settings
from asp_cli.settings import ScheduleSettings


def test_one_epochs_file_of_a_run_made_epoch_by_epoch_continues_the_run(built, tmp_path):  # noqa: F811
    """A newcomer's second verl run, with trainer.total_epochs=1, trained no step: verl counts the resumed run's
    steps as epochs done. Epoch E's file sets E + 1 epochs, the whole run's steps (one learning-rate horizon) and a
    checkpoint at the end of each epoch, and says where the run before it stopped."""
    steps = PROMPTS // BATCH
    whole = export(built["schedule"], [built["prompts"]], None, format="verl").trainer_settings
    assert whole["trainer.total_epochs"] == 1
    assert "trainer.total_training_steps" not in whole and "trainer.save_freq" not in whole
    for epoch in range(EPOCHS):
        result = export(built["schedule"], [built["prompts"]], None, format="verl", epoch=epoch)
        settings = result.trainer_settings
        assert settings["trainer.total_epochs"] == epoch + 1
        assert settings["trainer.total_training_steps"] == steps * EPOCHS and settings["trainer.save_freq"] == steps
        resume = [w for w in result.warnings if "trainer.resume_from_path" in w]
        assert resume == ([] if epoch == 0 else [next(w for w in resume if f"global_step_{epoch * steps} " in w)])


def test_asps_defaults_and_verls_mini_batch_are_said_where_they_would_bite():
    """A newcomer took asp's defaults (train batch 128, n 8, a cap of 8,192) for their run's, and verl refused the
    batch of 128 at startup against its default mini batch of 256."""
    notes: list[str] = []
    defaults = ScheduleSettings()
    ppo_settings(defaults, defaults.train_batch_size, 8, route="none", epoch=None, steps=10, epochs=1, notes=notes)
    made, mini = notes
    assert made.startswith("data.train_batch_size=128, actor_rollout_ref.rollout.n=8, data.max_response_length=8192 "
                           "are asp schedule's defaults")
    assert f"its default {VERL_DEFAULT_PPO_MINI_BATCH}) is larger than data.train_batch_size=128" in mini
    # In the settings too, not only said: a pipeline applying them failed verl's startup check.
    small = ppo_settings(defaults, 128, 8, route="none", epoch=None, steps=10, epochs=1, notes=[])
    assert small["actor_rollout_ref.actor.ppo_mini_batch_size"] == 128
    assert "actor_rollout_ref.actor.ppo_mini_batch_size" not in ppo_settings(
        defaults, 256, 8, route="none", epoch=None, steps=10, epochs=1, notes=[])
    notes.clear()
    own = ScheduleSettings(train_batch_size=512, samples_per_prompt=16, max_response_tokens=4096)
    ppo_settings(own, 512, 8, route="none", epoch=None, steps=10, epochs=1, notes=notes)
    assert notes == []
    ppo_settings(ScheduleSettings(train_batch_size=512), 512, 8, route="none", epoch=None, steps=10, epochs=1,
                 notes=notes)
    assert notes == ["actor_rollout_ref.rollout.n=8, data.max_response_length=8192 are asp schedule's defaults, "
                     "which the schedule was made with: if your run's differ, make the schedule with them "
                     "(--train-batch-size, --samples-per-prompt, --max-response-tokens: they shape the plan) rather "
                     "than change your run to these"]


def test_values_given_on_the_command_line_are_not_called_asps_defaults():
    """A newcomer passed --samples-per-prompt 8 and was told `rollout.n=8` was asp schedule's default."""
    notes: list[str] = []
    own = ScheduleSettings(train_batch_size=512)
    for line in (["asp", "schedule", "p.jsonl", "--samples-per-prompt", "8", "--max-response-tokens=8192"],
                 ["asp", "schedule", "p.jsonl", "-n8", "--max-response-tokens", "8192"]):
        ppo_settings(own, 512, 8, route="none", epoch=None, steps=10, epochs=1, notes=notes, command_line=line)
        assert notes == []
    ppo_settings(own, 512, 8, route="none", epoch=None, steps=10, epochs=1, notes=notes,
                 command_line=["asp", "schedule", "p.jsonl", "-n", "8"])
    assert notes and notes[0].startswith("data.max_response_length=8192 is asp schedule's default")


def test_a_one_epoch_schedule_made_with_a_history_and_exported_whole_says_how_to_continue_a_run():
    """A newcomer's loop exported each epoch's schedule (made with the last epoch's history) whole: verl, resumed
    from the run before with trainer.total_epochs=1, trains no step."""
    for from_history, epochs, epoch, said in ((True, 1, None, True), (False, 1, None, False), (True, 3, None, False),
                                              (True, 3, 1, False)):
        notes: list[str] = []
        ppo_settings(ScheduleSettings(train_batch_size=512), 512, 8, route="none", epoch=epoch, steps=10,
                     epochs=epochs, notes=notes, from_history=from_history)
        assert any("trainer.total_epochs=1 trains no step" in n for n in notes) == said
