"""verl's default trainer (``verl.trainer.main_ppo``, 0.9.1): the settings `asp export --format verl` prints for it,
and what a user copying them should know.

The trainer reads the export's file in order, ``data.train_batch_size`` prompts a step (``data.shuffle=False``),
drops a short last batch, and cuts each batch over its agent-loop workers (`chunking_notes`). A file may be the
whole run (every schedule epoch once: ``trainer.total_epochs=1``) or one epoch of a run made one verl run per epoch,
each epoch's schedule made with the lengths of the ones before (`_per_epoch_run`).
"""

from __future__ import annotations

import math
from typing import Any

from asp_cli.errors import SettingsError
from asp_cli.integrate.replay import chunk_capacities
from asp_cli.integrate.verl_fully_async import sync_steps
from asp_cli.settings import ScheduleSettings, check_warmup, warmup_note


def check_some_batch(rows: int, epochs: int, size: int, epoch: int | None, schedule: str) -> None:
    """Refuse (E146) a verl file of ``rows`` rows (``epochs`` schedule epochs; ``epoch`` the one exported, or None)
    that fills no train batch of ``size``: verl's dataloader drops a short batch (``drop_last=True``), so the run
    would have no step, and verl stops at ``Train dataloader is empty!``. A newcomer's 80-prompt dataset at asp's
    default batch of 128 was exported with exit 0, "0 batches of 128 + 80 rows" and settings to paste."""
    if rows >= size:
        return
    from asp_cli.arrange.advice import largest_divisors

    per_epoch = rows // max(1, epochs)
    which = f"epoch {epoch}'s" if epoch is not None else "its"
    raise SettingsError(
        f"{schedule}: {which} {'1 row is' if rows == 1 else f'{rows:,} rows are'} fewer than one train batch of "
        f"{size} (the schedule's "
        "--train-batch-size, verl's data.train_batch_size), and verl's dataloader drops a partial batch "
        "(drop_last=True): the file would train no step (verl stops with 'Train dataloader is empty!'); make the "
        + (f"schedule with a --train-batch-size that divides {'an epoch' + chr(39) + 's ' if epochs > 1 else 'its '}"
           f"{per_epoch:,} prompts (e.g. {largest_divisors(per_epoch)})" if per_epoch > 1 else
           "schedule with --train-batch-size 1, or of more prompts"))


def ppo_settings(settings: ScheduleSettings, size: int, workers: int | None, *, route: str, epoch: int | None,
                 steps: int, epochs: int, notes: list[str], from_history: bool = False,
                 command_line: Any = None, mini_batch: int | None = None) -> dict[str, Any]:
    """The trainer's settings for a schedule made with ``settings`` exported with a train batch of ``size``
    (``workers`` chunks per batch in the train order, else None), ``steps`` full batches in the file; ``epoch`` the
    one epoch exported of the schedule's ``epochs`` (None: all); ``from_history``: the schedule was made with
    lengths observed in earlier epochs; ``command_line``: the one it was made with (its metadata's), whose options
    are the user's own choice, not asp's defaults; ``mini_batch``: the actor's mini batch a mode needs (else the
    train batch where verl's default is larger). What the user should know goes to ``notes``."""
    trainer = {
        "data.shuffle": False,
        "data.train_batch_size": size,
        "data.filter_overlong_prompts": False,
        "actor_rollout_ref.rollout.n": settings.samples_per_prompt,
        # The response cap the schedule planned with (verl's default is 512: rollout.response_length follows it).
        "data.max_response_length": settings.max_response_tokens,
        "actor_rollout_ref.rollout.agent.num_workers": workers,
        # The file is the run: every schedule epoch it holds once (verl's default of 30 would repeat it); one
        # epoch's file of a run made epoch by epoch is that run's epoch `epoch` (`_per_epoch_run`).
        "trainer.total_epochs": 1 if epoch is None else epoch + 1,
        # True names each request after its priority, alike for a group's samples: one server per group.
        "actor_rollout_ref.rollout.full_determinism": False if route != "none" else None,
    }
    trainer = {k: v for k, v in trainer.items() if v is not None}
    if mini_batch is not None:
        trainer["actor_rollout_ref.actor.ppo_mini_batch_size"] = mini_batch
    elif size < VERL_DEFAULT_PPO_MINI_BATCH:
        # verl's config check refuses a train batch below actor.ppo_mini_batch_size (256 by default): said in a
        # note only, a pipeline applying these settings failed at startup (a check against verl 0.9.1).
        trainer["actor_rollout_ref.actor.ppo_mini_batch_size"] = size
    if epoch is not None:
        trainer.update(_per_epoch_run(epoch, steps, epochs, notes))
    if from_history and epochs == 1 and not epoch:  # --epoch 0 of it too, which dropped the note (a hostile review)
        # A newcomer's loop (schedule each epoch with the last one's history, export it whole) ran verl with
        # total_epochs=1 each time: resumed from the run before, such a run trains no step.
        notes.append("this schedule was made with lengths from earlier epochs: if it is the next epoch of a run made "
                     "one verl run per epoch, trainer.total_epochs=1 trains no step once resumed from the last run's "
                     "checkpoint; make it with asp schedule --epochs K (the run's epochs) and export it with --epoch E "
                     "(this run's, from 0), whose settings count the runs before (docs/integrations.md)")
    notes.extend(_defaults_notes(settings, size, _options_given(command_line), mini_batch_set=mini_batch is not None))
    return trainer


def _per_epoch_run(epoch: int, steps: int, epochs: int, notes: list[str]) -> dict[str, Any]:
    """verl's settings for one epoch's file of a run made one verl run per epoch (each epoch's schedule made with
    the lengths of the ones before): run ``epoch`` trains its ``steps`` and stops on a checkpoint the next run
    resumes. verl 0.9.1's trainer (trainer_base.py:450-467) counts its epoch as global_steps // steps per epoch and
    trains while that is below trainer.total_epochs: with 1, a newcomer's second run trained no step. It saves
    where global_steps is a multiple of trainer.save_freq (:481), and sizes the learning-rate schedule by
    trainer.total_training_steps (:768-782). The checkpoint's dataloader position (data.pt) is the previous file's
    end, from which verl's fetch starts the new file again at its first row (`_fetch_one_gen_batch`, :1466)."""
    if epoch:
        notes.append(
            f"this is epoch {epoch}'s file of a run made one verl run per epoch: continue the run before it, with "
            f"trainer.resume_mode=resume_path trainer.resume_from_path=<its checkpoint dir>/global_step_{epoch * steps} "
            "(the printed settings count that run as this one's first epochs and end this one on a checkpoint)")
    # Every run's learning-rate schedule spans the whole run (verl sizes it by total_training_steps), and each
    # ends on a checkpoint: its last step is a multiple of save_freq.
    return {"trainer.total_training_steps": steps * epochs, "trainer.save_freq": steps}


# verl 0.9.1's v1 trainer modes (trainer.v1.trainer_mode, ppo_trainer.yaml:238) behind `asp export --verl-trainer`.
V1_ASYNC_MODES = {"colocate-async": "colocate_async", "separate-async": "separate_async"}
# verl 0.9.1's trainer.v1.sampler.max_off_policy_threshold (ppo_trainer.yaml:298): the span, in policy versions, past
# which its replay buffers (and asp's, `asp_cli.integrate.step_groups`) drop a finished group.
VERL_MAX_OFF_POLICY = 8


def v1_async_settings(settings: ScheduleSettings, size: int, *, trainer: str, schedule_path: str | None,
                      order: str, epoch: int | None, notes: list[str]) -> dict[str, Any]:
    """What `ppo_settings` prints, added to for verl 0.9.1's v1 asynchronous modes (``trainer``: ``colocate-async``
    or ``separate-async``, run by the same ``verl.trainer.main_ppo``), for a schedule made with ``settings`` at
    ``schedule_path`` and exported in ``order``.

    verl's async modes submit ``trainer.v1.<mode>.num_warmup_batches`` train batches before the first step, then
    one a step (trainer_base.py:624-650, :1525-1527), so the rollout runs at most that many batches ahead of the
    trainer: the schedule's ``--max-lag``, fractions included (verl takes 1.5 batches as one and a half). Which
    finished groups a step trains is verl's replay buffer's choice, the oldest submitted first; a schedule made
    for a trainer that follows its steps (``--trainer schedule``) gets asp's buffer
    (`asp_cli.integrate.verl_sampler.ScheduleReplayBuffer`, docs/integrations.md, Option C)."""
    mode = V1_ASYNC_MODES[trainer]
    added: dict[str, Any] = {"trainer.v1.trainer_mode": mode}
    # verl 0.9.1's colocated trainer aborts the requests in flight and puts the servers to sleep while it trains
    # (trainer_colocate_async.py:44-50, on_sample_end), resuming them after. Auto times a v1 mode only for verl's own
    # buffer (`--trainer arrival`, `asp_cli.arrange.choose`); timed otherwise, its candidates let rollout run on.
    timed_v1 = settings.verl_trainer if settings.verl_trainer in V1_ASYNC_MODES and settings.trainer == "arrival" \
        else None
    if timed_v1 != trainer and settings.engine == "streaming" and settings.max_lag and settings.trainer == "arrival":
        notes.append(f"the schedule was timed for verl's {timed_v1 or 'fully-async'} trainer: make it with asp "
                     f"schedule --verl-trainer {trainer} so that --arrangement auto times its candidates as {mode} runs "
                     "them" + (" (the servers asleep while the trainer trains, their requests resumed after)"
                               if mode == "colocate_async" else "")
                     + "; `asp simulate`'s 'verl v1 async' line replays this plan that way")
    elif timed_v1 != trainer and mode == "colocate_async":
        notes.append("verl's colocate_async trainer pauses the rollout while it trains (the servers share its GPUs) "
                     "and resumes the requests after; asp's estimates for this schedule let rollout run on while the "
                     "trainer trains: `asp simulate`'s 'verl v1 async' line replays the plan that way")
    lag = settings.max_lag
    if lag is None:
        notes.append(f"the schedule has no lag bound, but verl's {mode} trainer runs at most "
                     f"trainer.v1.{mode}.num_warmup_batches train batches ahead (1 by default): make the schedule "
                     "with --max-lag equal to it, for which its estimates and auto's choice are made")
    elif lag == 0:
        notes.append(f"the schedule was made for a synchronous trainer (--max-lag 0), but verl's {mode} trainer "
                     f"runs trainer.v1.{mode}.num_warmup_batches train batches ahead: export with --verl-trainer ppo "
                     "(trainer_mode sync), or make the schedule with --max-lag equal to num_warmup_batches")
    else:
        check_warmup(trainer, lag, size)  # a fraction verl rounds down to no prompt: refused, not exported
        added[f"trainer.v1.{mode}.num_warmup_batches"] = lag
        note = warmup_note(trainer, lag, size)
        if note:
            notes.append(note)
        if order == "train" and (lag > 1 or not float(lag).is_integer()):
            notes.append(
                f"verl submits its warm-up of {lag} train batches as one dispatch of {math.floor(lag * size)} "
                "prompts over the agent-loop workers" + (
                    ", which shifts every later batch off the file's batches: the per-worker layout does not hold "
                    "(the order does); plan with a whole --max-lag to keep it" if not float(lag).is_integer() else
                    f": the first {lag} batches' per-worker layout does not hold, the later ones' does"))
    if mode == "separate_async":
        # verl asserts data.train_batch_size == parameter_sync_step x actor.ppo_mini_batch_size there
        # (trainer_separate_async.py:55-62); its default is 4, as the fully asynchronous trainer's weight sync.
        sync = sync_steps(size)
        added["trainer.v1.separate_async.parameter_sync_step"] = sync
        notes.append(f"verl's separate_async trainer trains a step as trainer.v1.separate_async.parameter_sync_step "
                     f"mini batches and asserts that their product is data.train_batch_size: the settings set "
                     f"parameter_sync_step={sync} and actor_rollout_ref.actor.ppo_mini_batch_size={size // sync}; "
                     "it rolls out on GPUs of their own, and also needs "
                     "actor_rollout_ref.rollout.nnodes and n_gpus_per_node above 0 and a "
                     "rollout.checkpoint_engine.backend other than naive (it asserts them at startup): set them "
                     "for your cluster. With actor_rollout_ref.hybrid_engine=True (verl's default) the trainer's "
                     "GPUs also serve rollout until a step begins (trainer_separate_async.py, switch_to_trainer), "
                     "which asp's replay leaves out: it times the --instances servers alone")
    if settings.trainer == "schedule":
        # verl's own buffers train the oldest finished groups, not the schedule's steps (Option C). Measured with
        # `asp simulate`'s v1 replay on the sample data (docs/integrations.md, "Which trainer rule to plan for").
        notes.append("asp's replay buffer (--trainer schedule) makes every step wait for the groups the schedule "
                     "gives it: in asp's replay of verl's v1 trainer on the sample data 32% slower than verl's own "
                     "buffer in colocate_async and 15% in separate_async; make the schedule with --trainer arrival "
                     "(and leave out the sampler keys) unless you want the schedule's steps trained")
        added.update({
            "trainer.v1.sampler.custom_sampler.path": "pkg://asp_cli.integrate.verl_sampler",
            "trainer.v1.sampler.custom_sampler.name": "ScheduleReplayBuffer",
            "+trainer.v1.sampler.sampler_kwargs.schedule": schedule_path or "/abs/path/schedule.parquet",
        })
        if schedule_path is None:
            notes.append("trainer.v1.sampler.sampler_kwargs.schedule names the schedule file: set its absolute path")
        span = None if lag is None else math.ceil(lag) + 1  # asp's lag counts versions behind: span minus 1
        if span is not None and span > VERL_MAX_OFF_POLICY:
            added["trainer.v1.sampler.max_off_policy_threshold"] = span
    if epoch is not None:
        notes.append(f"one verl run per epoch is for verl's synchronous trainer: in {mode} the run's last "
                     "prefetch wraps the file around to its first batch and the checkpoint keeps it (that batch "
                     "trained twice, the next run one batch late): for an asynchronous run export the whole "
                     "schedule (leave out --epoch)")
    elif lag:
        notes.append(f"verl keeps prefetching past the last step: the {lag} batch(es) it submits after the file's "
                     "end are its first rows again, rolled out and not trained (verl's prefetch, whatever the order)")
    return added


# asp schedule's defaults that verl's trainer then takes from the export (`_defaults_notes`).
_ASP_DEFAULTS = ScheduleSettings()
# verl 0.9.1's actor.ppo_mini_batch_size (trainer/config/actor/actor.yaml:18): a train batch below it stops verl at
# startup (workers/config/actor.py: "train_batch_size ... must be >= actor.ppo_mini_batch_size"); the verl stage
# of CI checks the default.
VERL_DEFAULT_PPO_MINI_BATCH = 256


# asp schedule's options behind each setting `_defaults_notes` speaks of.
_OPTIONS = {"data.train_batch_size": ("--train-batch-size",),
            "actor_rollout_ref.rollout.n": ("--samples-per-prompt", "-n"),
            "data.max_response_length": ("--max-response-tokens",)}


def _options_given(command_line: Any) -> set[str]:
    """The settings of `_OPTIONS` whose option the recorded command line names (``--opt V``, ``--opt=V``,
    ``-nV``); none for a schedule made from Python (no command line)."""
    words = [str(w) for w in command_line] if isinstance(command_line, list) else []
    return {key for key, flags in _OPTIONS.items() for word in words
            if any(word == f or word.startswith(f + "=") or (len(f) == 2 and word.startswith(f) and word[2:].isdigit())
                   for f in flags)}


def _defaults_notes(settings: ScheduleSettings, size: int, given: frozenset[str] | set[str] = frozenset(), *,
                    mini_batch_set: bool = False) -> list[str]:
    """What a verl user copying the printed settings should know of where they came from: a newcomer got asp's
    defaults (train batch 128, n 8, a cap of 8,192 tokens) as their run's, and verl refused the batch of 128 at
    startup against its default mini batch of 256. A value ``given`` on the command line is the user's own (another
    newcomer was told `rollout.n=8` was asp's default after passing --samples-per-prompt 8)."""
    # Only the options of the values said (a verl newcomer with --train-batch-size 512 was told to make the schedule
    # with "--train-batch-size, --samples-per-prompt, --max-response-tokens" of one default cap).
    found = [(f"{key}={value}", option) for key, option, value, default in (
        ("data.train_batch_size", "--train-batch-size", size, _ASP_DEFAULTS.train_batch_size),
        ("actor_rollout_ref.rollout.n", "--samples-per-prompt", settings.samples_per_prompt,
         _ASP_DEFAULTS.samples_per_prompt),
        ("data.max_response_length", "--max-response-tokens", settings.max_response_tokens,
         _ASP_DEFAULTS.max_response_tokens))
        if value == default and key not in given]
    notes = []
    if found:
        one = len(found) == 1
        notes.append(f"{', '.join(d for d, _ in found)} {'is' if one else 'are'} asp schedule's "
                     f"default{'' if one else 's'}, which the schedule was made with: if your run's "
                     f"{'differs' if one else 'differ'}, make the schedule with {'it' if one else 'them'} "
                     f"({', '.join(o for _, o in found)}: {'it shapes' if one else 'they shape'} the plan) rather "
                     "than change your run to these")
    if size < VERL_DEFAULT_PPO_MINI_BATCH and not mini_batch_set:
        notes.append(f"verl refuses to start when actor_rollout_ref.actor.ppo_mini_batch_size (its default "
                     f"{VERL_DEFAULT_PPO_MINI_BATCH}) is larger than data.train_batch_size={size}: the settings set "
                     f"it to {size} (one update a step); a divisor of it gives more")
    return notes


def chunking_notes(size: int, n: int, workers: int, verl_version: str) -> list[str]:
    """What verl's cut of a batch of ``size`` prompts over ``workers`` does that a user would not expect."""
    if verl_version == "0.7":
        if size * n % workers:
            return [f"verl's legacy trainer cuts the {size} x {n} = {size * n} samples of a batch into "
                    f"{workers} equal chunks and stops (DataProto.chunk asserts) when they do not divide; "
                    "pick actor_rollout_ref.rollout.agent.num_workers dividing it"]
        return []
    idle = int((chunk_capacities(size, n, workers, rule="v1") == 0).sum())
    if idle:
        return [f"verl cuts a batch of {size} prompts into chunks of {-(-size // workers)} (TensorDict.chunk), "
                f"so {idle} of the {workers} agent-loop workers get no prompt; pick "
                "actor_rollout_ref.rollout.agent.num_workers dividing data.train_batch_size"]
    return []
