"""The settings of verl 0.9's fully asynchronous trainer that replay an exported schedule (`asp export --format
verl`, ``--verl-trainer fully-async``).

verl's fully asynchronous trainer (``python -m verl.experimental.fully_async_policy.fully_async_main``, config
``fully_async_ppo_trainer.yaml``; read from verl 0.9.1's ``fully_async_rollouter.py`` and ``fully_async_trainer.py``,
and run in tests/integration/test_verl.py) is not verl's default trainer, and refuses the default trainer's settings:

- its rollouter asserts ``data.train_batch_size == 0`` and ``data.gen_batch_size == 1``: it reads the dataset one
  prompt at a time, in file order with ``data.shuffle=False``, and starts each as a slot frees. So the file is laid
  out in dispatch order (the schedule's ``seq``), not in train batches cut for agent-loop workers;
- a trainer step takes ``actor.ppo_mini_batch_size * async_training.require_batches`` finished prompts, and the
  weights reach the servers every ``async_training.trigger_parameter_sync_step`` steps: the prompts between two
  weight syncs are what asp calls a train batch (`asp_cli.sim.verl_async` publishes after each);
- the rollouter pauses while the prompts started since the last sync, counted from those then outstanding, reach
  ``(staleness_threshold + 1)`` of those batches: asp's ``--max-lag``, which takes verl's fractions (its default
  is 0.1: `asp_cli.settings.check_lag`);
- it stops after ``rollout.total_rollout_steps`` prompts (100 in the shipped config), so the file's row count is
  set;
- ``async_training.concurrent_samples_per_replica`` (16) caps the prompts in flight per server: asp's
  ``--prompts-per-server``.
"""

from __future__ import annotations

from typing import Any

# verl 0.9.1's fully_async_ppo_trainer.yaml: weights synced every 4 trainer steps, one mini batch a step.
VERL_SYNC_STEPS = 4
VERL_PROMPTS_PER_SERVER = 16
VERL_TRAINERS = ("auto", "ppo", "colocate-async", "separate-async", "fully-async")


def planned_for_async(recorded: Any) -> bool:
    """Whether a schedule was made for an asynchronous trainer on servers taking groups as they finish: the
    setting verl's fully asynchronous trainer runs (``--engine streaming``, a lag bound other than 0,
    ``--trainer arrival``)."""
    return recorded.engine == "streaming" and recorded.max_lag != 0 and recorded.trainer == "arrival"


def v1_refuses(recorded: Any) -> bool:
    """Whether verl's v1 modes (colocate-async, separate-async) would take the schedule's lag bound as a warm-up of no
    prompt, which `asp export` refuses (E81, `asp_cli.settings.check_warmup`): so the notes that point elsewhere do
    not point there."""
    from asp_cli.settings import warmup_prompts

    return bool(recorded.max_lag) and warmup_prompts(recorded.max_lag, recorded.train_batch_size) < 1


def async_export_hint(recorded: Any) -> str:
    """``, or export with ...``: the export for one of verl's asynchronous trainers of a schedule with a lag bound,
    where one takes it: a v1 mode, or where it refuses the lag (`v1_refuses`) the fully asynchronous trainer's
    staleness_threshold (under --trainer arrival, which it needs). Empty without a lag bound."""
    if not recorded.max_lag:
        return ""
    if not v1_refuses(recorded):
        return ", or export with --verl-trainer colocate-async (or separate-async) for verl's asynchronous modes"
    return (", or export with --verl-trainer fully-async (its staleness_threshold is such a fraction)"
            if recorded.trainer == "arrival" else "")


def resolve_trainer(verl_trainer: str, recorded: Any) -> str:
    """``auto``: the trainer the schedule was timed for (``asp schedule --verl-trainer``); else the fully
    asynchronous trainer for a schedule planned for one (`planned_for_async`); the v1 trainer's ``colocate_async``
    mode for a schedule on servers with a lag bound above 0 whose steps the trainer follows (``--trainer schedule``:
    asp's replay buffer, docs/integrations.md, Option C); verl's default synchronous trainer otherwise."""
    if verl_trainer != "auto":
        return verl_trainer
    if recorded.verl_trainer:
        return recorded.verl_trainer
    if planned_for_async(recorded):
        return "fully-async"
    if recorded.engine == "streaming" and recorded.max_lag and recorded.trainer == "schedule":
        return "colocate-async"
    return "ppo"


def sync_steps(train_batch_size: int) -> int:
    """Trainer steps per weight sync: verl's default of 4 where it divides the train batch, else the most that
    does (2 or 1), so that the mini batch is a whole number of prompts."""
    return next(t for t in (VERL_SYNC_STEPS, 2, 1) if train_batch_size % t == 0)


def fully_async_settings(recorded: Any, rows: int, samples_per_prompt: int, *,
                         route: str = "none") -> tuple[dict[str, Any], list[str]]:
    """The overrides of ``fully_async_ppo_trainer.yaml`` that replay ``rows`` exported prompts in file order, and
    notes on what they cannot say."""
    size = int(recorded.train_batch_size)
    steps = sync_steps(size)
    settings: dict[str, Any] = {
        "data.shuffle": False,
        "data.train_batch_size": 0,
        "data.gen_batch_size": 1,
        "data.filter_overlong_prompts": False,
        "actor_rollout_ref.rollout.n": samples_per_prompt,
        "data.max_response_length": recorded.max_response_tokens,
        "trainer.total_epochs": 1,
        "rollout.total_rollout_steps": rows,
        # The prompts between two weight syncs: the schedule's train batch.
        "actor_rollout_ref.actor.ppo_mini_batch_size": size // steps,
        "async_training.require_batches": 1,
        "async_training.trigger_parameter_sync_step": steps,
        "async_training.staleness_threshold": recorded.max_lag,
        "async_training.concurrent_samples_per_replica": recorded.prompts_per_server,
        "actor_rollout_ref.rollout.full_determinism": False if route != "none" else None,
        # verl's fully asynchronous trainer and rollouter both assert it off (fully_async_trainer.py:75-76,
        # fully_async_rollouter.py:348-350), and ppo_trainer.yaml has it on: the printed line stopped at once.
        "actor_rollout_ref.hybrid_engine": False,
    }
    settings = {k: v for k, v in settings.items() if v is not None}
    notes = [f"verl's fully asynchronous trainer (python -m verl.experimental.fully_async_policy.fully_async_main) "
             f"trains on actor.ppo_mini_batch_size x async_training.require_batches prompts a step and syncs the "
             f"weights every async_training.trigger_parameter_sync_step steps: keep their product at the schedule's "
             f"--train-batch-size {size} (e.g. ppo_mini_batch_size={size // steps}, require_batches=1, "
             f"trigger_parameter_sync_step={steps}), or make the schedule with --train-batch-size equal to it; for "
             f"verl's default trainer (verl.trainer.main_ppo) pass --verl-trainer ppo"
             + ("" if v1_refuses(recorded) else ", and for its asynchronous modes (trainer.v1.trainer_mode) "
                "--verl-trainer colocate-async or separate-async")]
    # The trainer collects ppo_mini_batch_size x require_batches prompts a step until the queue ends; a step it
    # cannot fill is not trained, and a sync cut short is flushed at the end (fully_async_trainer.py:402-429,
    # :521-534, verl 0.9.1). (Before 2026-12-05 this said the whole last train batch went untrained.)
    mini = size // steps
    if rows % mini:
        notes.append(f"the file's {rows:,} prompts end in {rows % mini} that fill no whole trainer step of {mini} "
                     f"(actor.ppo_mini_batch_size x async_training.require_batches): verl's fully asynchronous "
                     "trainer does not train them; make the schedule with a --train-batch-size that divides the "
                     "prompts")
    elif rows % size:
        notes.append(f"the file's {rows:,} prompts end in {rows % size} that fill no whole train batch of {size}: "
                     f"verl's fully asynchronous trainer trains them in {(rows % size) // mini} step(s) and syncs "
                     "the weights after them, a last train batch shorter than the schedule's")
    if recorded.max_lag is None:
        notes.append("the schedule has no lag bound, but verl's fully asynchronous rollouter always keeps one "
                     "(async_training.staleness_threshold, 0.1 by default): make the schedule with --max-lag equal "
                     "to the staleness_threshold you run (--max-lag 0.1 for verl's default)")
    elif recorded.max_lag == 0:
        notes.append("the schedule was made for a synchronous trainer (--max-lag 0); for verl's fully asynchronous "
                     "trainer make it with --max-lag equal to async_training.staleness_threshold")
    # Auto times a v1 mode only for verl's own buffer (`asp_cli.arrange.choose`).
    timed_for_v1 = recorded.verl_v1_mode is not None and recorded.trainer == "arrival"
    if recorded.prompts_per_server is None and recorded.engine == "streaming" and not timed_for_v1:
        notes.append(f"the schedule was timed with as many prompts in flight as the servers' slots hold; verl keeps "
                     f"async_training.concurrent_samples_per_replica={VERL_PROMPTS_PER_SERVER} by default: make the "
                     f"schedule with --prompts-per-server {VERL_PROMPTS_PER_SERVER} (or the value you set), or set "
                     "concurrent_samples_per_replica high enough that the servers' slots bind")
    if timed_for_v1:
        notes.append(f"the schedule was timed for verl's {recorded.verl_trainer} trainer (asp schedule --verl-trainer "
                     f"{recorded.verl_trainer}): for the fully asynchronous trainer make it with --verl-trainer "
                     "fully-async, for which auto's choice is made")
    if recorded.trainer == "schedule":
        notes.append("the schedule was made for a trainer that follows its steps (--trainer schedule), but verl's "
                     "fully asynchronous trainer takes groups as they finish: make it with --trainer arrival")
    return settings, notes
