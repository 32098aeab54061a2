"""The settings `asp export --format verl` prints for verl's default trainer, and what it says of them
(`asp_cli.integrate.verl_ppo`); tests/integration/test_verl.py runs them through verl 0.9.1 itself."""

from __future__ import annotations

import pytest
from _schedules import BATCH, EPOCHS, PROMPTS, built  # noqa: F401 - fixture

from asp_cli.errors import SettingsError
from asp_cli.integrate.export import export
from asp_cli.integrate.verl_ppo import VERL_DEFAULT_PPO_MINI_BATCH, ppo_settings, v1_async_settings
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
                     "(--samples-per-prompt, --max-response-tokens: they shape the plan) rather "
                     "than change your run to these"]  # only the options of the values said
    notes.clear()
    ppo_settings(ScheduleSettings(train_batch_size=512, samples_per_prompt=16), 512, 8, route="none", epoch=None,
                 steps=10, epochs=1, notes=notes)
    assert notes == ["data.max_response_length=8192 is asp schedule's default, which the schedule was made with: if "
                     "your run's differs, make the schedule with it (--max-response-tokens: it shapes the plan) "
                     "rather than change your run to these"]


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
    from the run before with trainer.total_epochs=1, trains no step. Exported with --epoch 0 (its one epoch, as the
    docs' --epoch E reads), the note was left out (a hostile review, 2026-12-07)."""
    for from_history, epochs, epoch, said in ((True, 1, None, True), (False, 1, None, False), (True, 3, None, False),
                                              (True, 3, 1, False), (True, 1, 0, True), (False, 1, 0, False)):
        notes: list[str] = []
        ppo_settings(ScheduleSettings(train_batch_size=512), 512, 8, route="none", epoch=epoch, steps=10,
                     epochs=epochs, notes=notes, from_history=from_history)
        assert any("trainer.total_epochs=1 trains no step" in n for n in notes) == said


def _async(tmp_path, name, **settings):
    """A small schedule of the shared prompts made for verl's servers with ``settings``."""
    from asp_cli import schedule

    prompts = tmp_path / f"{name}.jsonl"
    prompts.write_text("".join(f'{{"id": "p{i}", "prompt": "{"x" * (10 + 37 * i % 400)}"}}\n' for i in range(48)))
    out = schedule([prompts], tmp_path / f"{name}.parquet", settings=ScheduleSettings(
        instances=2, train_batch_size=8, samples_per_prompt=2, engine="streaming", **settings)).output
    return out, prompts


def test_a_plan_for_verls_asynchronous_modes_exports_their_settings(tmp_path):
    """verl 0.9.1's main_ppo runs asynchronously with trainer.v1.trainer_mode colocate_async or separate_async,
    its rollout num_warmup_batches ahead; `asp export` printed only the synchronous settings and told such a
    schedule to be remade with --max-lag 0. A schedule on servers with a lag bound whose steps the trainer follows
    now exports for colocate_async by default: the lag bound as the warm-up, asp's replay buffer (Option C) with
    the schedule's absolute path, the file laid out by train batch."""
    out, prompts = _async(tmp_path, "lag1", max_lag=1, trainer="schedule")
    result = export(out, [prompts], None, format="verl")
    settings = result.trainer_settings
    assert result.summary["verl_trainer"] == "colocate-async" and result.order == "train"
    assert settings["trainer.v1.trainer_mode"] == "colocate_async"
    assert settings["trainer.v1.colocate_async.num_warmup_batches"] == 1
    assert settings["trainer.v1.sampler.custom_sampler.name"] == "ScheduleReplayBuffer"
    assert settings["+trainer.v1.sampler.sampler_kwargs.schedule"] == str(out.resolve())
    assert settings["actor_rollout_ref.actor.ppo_mini_batch_size"] == 8
    assert "trainer.v1.sampler.max_off_policy_threshold" not in settings  # verl's 8 holds a lag of 1
    assert any("first rows again, rolled out and not trained" in w for w in result.warnings)
    assert not any("--max-lag 0 --trainer schedule" in w for w in result.warnings)
    # separate_async: its asserted mini batch x parameter_sync_step = the train batch, and its cluster needs said.
    separate = export(out, [prompts], None, format="verl", verl_trainer="separate-async")
    settings = separate.trainer_settings
    assert settings["trainer.v1.trainer_mode"] == "separate_async"
    assert settings["trainer.v1.separate_async.num_warmup_batches"] == 1
    assert (settings["trainer.v1.separate_async.parameter_sync_step"]
            * settings["actor_rollout_ref.actor.ppo_mini_batch_size"]) == 8
    assert any("checkpoint_engine.backend other than naive" in w for w in separate.warnings)
    assert not any("the settings set it to 8" in w for w in separate.warnings)  # the mini batch is 2, not 8
    # The synchronous trainer on request says the asynchronous modes are there.
    sync = export(out, [prompts], None, format="verl", verl_trainer="ppo")
    assert "trainer.v1.trainer_mode" not in sync.trainer_settings
    assert any("--verl-trainer colocate-async" in w for w in sync.warnings)


def test_the_asynchronous_modes_warm_up_by_the_lag_and_say_what_does_not_fit(tmp_path):
    """A lag of 10 needs verl's drop bound raised (a group trained 10 versions behind spans 11); a warm-up of 2
    goes out as one dispatch; a fraction shifts every batch off the file's; one epoch's file is for the
    synchronous trainer; no bound, or a bound of 0, cannot be verl's async modes' and is said so."""
    out, prompts = _async(tmp_path, "lag10", max_lag=10, trainer="schedule")
    settings = export(out, [prompts], None, format="verl").trainer_settings
    assert settings["trainer.v1.colocate_async.num_warmup_batches"] == 10
    assert settings["trainer.v1.sampler.max_off_policy_threshold"] == 11
    out, prompts = _async(tmp_path, "lag2", max_lag=2, trainer="schedule")
    result = export(out, [prompts], None, format="verl")
    assert any("the first 2 batches' per-worker layout does not hold" in w for w in result.warnings)
    one = export(out, [prompts], None, format="verl", epoch=0)
    assert any("one verl run per epoch is for verl's synchronous trainer" in w for w in one.warnings)
    out, prompts = _async(tmp_path, "half", max_lag=1.5, trainer="schedule")
    result = export(out, [prompts], None, format="verl")
    assert result.trainer_settings["trainer.v1.colocate_async.num_warmup_batches"] == 1.5
    assert any("one dispatch of 12 prompts" in w and "does not hold (the order does)" in w for w in result.warnings)
    # A fraction below 1 (verl's fully asynchronous staleness_threshold, given as the warm-up) is a warm-up of that
    # share of a batch, said so; one that verl rounds down to no prompt is refused, not exported as a count.
    out, prompts = _async(tmp_path, "tenth", max_lag=0.125, trainer="schedule")
    result = export(out, [prompts], None, format="verl")
    assert result.trainer_settings["trainer.v1.colocate_async.num_warmup_batches"] == 0.125
    assert any("a warm-up of 1 prompt (" in w and "staleness_threshold" in w for w in result.warnings)
    out, prompts = _async(tmp_path, "staleness", max_lag=0.1)  # the fully asynchronous trainer's, exported as v1
    assert export(out, [prompts], None, format="verl").trainer_settings[
        "async_training.staleness_threshold"] == 0.1
    with pytest.raises(SettingsError, match=r"num_warmup_batches, a count of train batches .* 0\.1 x 8 is a "
                                            r"warm-up of none"):
        export(out, [prompts], None, format="verl", verl_trainer="separate-async")
    # Groups in arrival order with a bound: verl's own buffer (no Option C), on request; the default stays the
    # fully asynchronous trainer.
    out, prompts = _async(tmp_path, "arrival", max_lag=1)
    assert export(out, [prompts], None, format="verl").summary["verl_trainer"] == "fully-async"
    arrival = export(out, [prompts], None, format="verl", verl_trainer="colocate-async").trainer_settings
    assert arrival["trainer.v1.trainer_mode"] == "colocate_async"
    assert not any(key.startswith("trainer.v1.sampler") for key in arrival)
    for lag, words in ((None, "the schedule has no lag bound"), (0, "--verl-trainer ppo")):
        out, prompts = _async(tmp_path, f"lag{lag}", max_lag=lag, trainer="schedule")
        assert export(out, [prompts], None, format="verl").summary["verl_trainer"] == "ppo"
        forced = export(out, [prompts], None, format="verl", verl_trainer="colocate-async")
        assert "trainer.v1.colocate_async.num_warmup_batches" not in forced.trainer_settings
        assert any(words in w for w in forced.warnings), forced.warnings


def test_a_lag_verls_v1_modes_refuse_is_not_pointed_to_them(tmp_path):
    """A schedule whose lag bound verl's v1 modes would round down to a warm-up of no prompt (0.1 at a batch of 8),
    which `asp export --verl-trainer colocate-async` refuses (E81), was told by the --verl-trainer ppo export to
    "export with --verl-trainer colocate-async (or separate-async)", and by the fully asynchronous export's note to
    pass them for verl's asynchronous modes: each now points where the lag is taken (fully-async, its
    staleness_threshold), and a lag a v1 mode takes still points there."""
    out, prompts = _async(tmp_path, "staleness", max_lag=0.1)
    ppo = export(out, [prompts], None, format="verl", verl_trainer="ppo").warnings
    planned = next(w for w in ppo if w.startswith("the schedule was planned for an asynchronous trainer"))
    assert "colocate-async" not in planned and planned.endswith(
        ", or export with --verl-trainer fully-async (its staleness_threshold is such a fraction)"), planned
    fully = export(out, [prompts], None, format="verl", verl_trainer="fully-async").warnings
    assert not any("colocate-async" in w for w in fully), fully
    out, prompts = _async(tmp_path, "whole", max_lag=1)
    ppo = export(out, [prompts], None, format="verl", verl_trainer="ppo").warnings
    assert any("or export with --verl-trainer colocate-async (or separate-async)" in w for w in ppo), ppo
    fully = export(out, [prompts], None, format="verl", verl_trainer="fully-async").warnings
    assert any("--verl-trainer colocate-async or separate-async" in w for w in fully), fully


def test_the_trainer_a_schedule_was_timed_for_is_the_exports_default_and_any_other_is_said(tmp_path):
    """A schedule made with --verl-trainer separate-async exports for that mode by default, with no note on its
    timing; exported for another of verl's trainers, or a schedule timed for the fully asynchronous trainer exported
    for a v1 mode, a note names the --verl-trainer that times auto's candidates as that trainer runs them."""
    out, prompts = _async(tmp_path, "separate", max_lag=1, verl_trainer="separate-async")
    mine = export(out, [prompts], None, format="verl")
    assert mine.summary["verl_trainer"] == "separate-async"
    assert mine.trainer_settings["trainer.v1.trainer_mode"] == "separate_async"
    assert not any("the schedule was timed for" in w for w in mine.warnings)
    colocated = export(out, [prompts], None, format="verl", verl_trainer="colocate-async")
    assert any("timed for verl's separate-async trainer: make it with asp schedule --verl-trainer colocate-async"
               in w and "the servers asleep while the trainer trains" in w for w in colocated.warnings)
    fully = export(out, [prompts], None, format="verl", verl_trainer="fully-async")
    assert any("timed for verl's separate-async trainer" in w and "--verl-trainer fully-async" in w
               for w in fully.warnings)
    out, prompts = _async(tmp_path, "fully", max_lag=1)
    v1 = export(out, [prompts], None, format="verl", verl_trainer="separate-async")
    assert any("timed for verl's fully-async trainer: make it with asp schedule --verl-trainer separate-async" in w
               for w in v1.warnings)
    assert not any("timed for" in w for w in export(out, [prompts], None, format="verl").warnings)
    # Made for asp's buffer (a trainer that follows its steps), with or without --verl-trainer: auto kept asp's own
    # replay, which lets rollout run on while the trainer trains; said, and no --verl-trainer offered as the fix.
    for name, extra in (("follows", {}), ("follows-named", {"verl_trainer": "colocate-async"})):
        out, prompts = _async(tmp_path, name, max_lag=1, trainer="schedule", **extra)
        for how in ({}, {"verl_trainer": "colocate-async"}):
            warnings = export(out, [prompts], None, format="verl", **how).warnings
            assert any("asp's estimates for this schedule let rollout run on while the trainer trains" in w
                       for w in warnings), (name, how)
            assert not any("timed for" in w for w in warnings)
    # A plan for blocking engines, or without a lag bound, exported for colocate_async: the pause is said.
    for made in (ScheduleSettings(max_lag=2), ScheduleSettings(engine="streaming")):
        notes: list[str] = []
        v1_async_settings(made, 8, trainer="colocate-async", schedule_path=None, order="train", epoch=None,
                          notes=notes)
        assert any("colocate_async trainer pauses the rollout while it trains" in n for n in notes), made
    # Timed for a v1 mode, exported for the fully asynchronous trainer: no note on its rollouter slots.
    out, prompts = _async(tmp_path, "colocated", max_lag=1, verl_trainer="colocate-async")
    fully = export(out, [prompts], None, format="verl", verl_trainer="fully-async")
    assert any("timed for verl's colocate-async trainer" in w for w in fully.warnings)
    assert not any("as many prompts in flight as the servers' slots hold" in w for w in fully.warnings)


def test_a_verl_trainer_without_verls_format_is_refused(tmp_path):
    """--verl-trainer names the trainer whose settings --format verl prints: with another format it did nothing."""
    out, prompts = _async(tmp_path, "plain", max_lag=1)
    with pytest.raises(SettingsError, match="--verl-trainer ppo names the trainer whose settings --format verl "
                                            r"prints \(got --format jsonl\): add --format verl, or drop it"):
        export(out, [prompts], tmp_path / "x.jsonl", format="jsonl", verl_trainer="ppo")
    assert not (tmp_path / "x.jsonl").exists()
