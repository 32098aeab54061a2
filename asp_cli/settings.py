"""Scheduler settings: one frozen dataclass, validated once, recorded in every schedule.

Defaults suit a 7B model on 80 GB GPUs (the `h100-qwen2.5-7b` preset): 4 rollout instances, GRPO groups of
8, 128 prompts per training step, minibatches of up to 32 prompts (256 sequences, where an H100 decode step
is still cheap) whose predicted KV footprint fits the instance's cache, and an 8k generation cap.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any, Literal

from asp_cli.errors import SettingsError, named_in_python

PlanWith = Literal["max", "mean"]
MAX_SETTING = 2**31 - 1  # the largest count or token budget a setting may hold (64-bit arithmetic downstream)
MAX_INSTANCES = 100_000  # a larger "fleet" is a typo, and runs out of memory before it runs out of work
# A GRPO group is 2-512 samples in practice; a larger one is a typo, and the replays that judge and time a plan
# hold every sample (an edited schedule's 67,108,863 asked the simulator for 30 GiB).
MAX_SAMPLES_PER_PROMPT = 4096
_MAXIMA = {"instances": MAX_INSTANCES, "samples_per_prompt": MAX_SAMPLES_PER_PROMPT}
# The presets' names (`asp_cli.costmodel.PRESETS`, in its order; a test holds them equal), here so that the command
# line can list them in its help without importing the cost model.
PRESET_NAMES = ("h100-qwen2.5-7b", "h800-qwen2.5-7b", "h200-qwen2.5-7b", "a100-llama2-7b", "ascend910b-qwen2.5-7b")
# The most sequences (groups x samples) a replay holds at once: the simulator keeps about 100 bytes a sequence
# (a 1M-prompt streaming plan of 8M sequences peaks at 0.83 GiB), so this is about 10 GiB.
MAX_REPLAY_SEQUENCES = 100_000_000
# Most rows one schedule may hold (epochs x prompts). At about 1.3 kB of peak memory per row (docs/benchmarks.md,
# 10M prompts) that is already 130 GB; a typo such as `--epochs 100000000` stops with exit 4 (E12) rather than in
# an out-of-memory kill. Larger runs schedule a few epochs at a time. A schedule file's step and minibatch
# numbers stay below it too (`schedule_format`).
MAX_SCHEDULE_ROWS = 100_000_000


def check_replay_size(groups: int, samples_per_prompt: int, what: str) -> None:
    """Refuse a replay of more than `MAX_REPLAY_SEQUENCES` sequences before anything is allocated for it."""
    sequences = groups * samples_per_prompt
    if sequences > MAX_REPLAY_SEQUENCES:
        raise SettingsError(
            f"{what} replays every sequence: {groups:,} groups x {samples_per_prompt:,} samples is {sequences:,} "
            f"sequences, more than the {MAX_REPLAY_SEQUENCES:,} asp replays at once; replay fewer epochs or "
            "prompts at a time")
PLAN_WITH: tuple[str, ...] = ("max", "mean")
TRAINER_ORDERS: tuple[str, ...] = ("arrival", "schedule")
ENGINES: tuple[str, ...] = ("continuous", "static", "streaming")
ARRANGEMENTS: tuple[str, ...] = ("auto", "interleave", "long-first", "short-first", "shuffle", "per-step",
                                 "quick-start", "bands")
# Arrangements made for one engine only: the engine they plan for.
ENGINE_ONLY_ARRANGEMENTS: dict[str, str] = {"quick-start": "streaming", "bands": "streaming"}
# The plain sorts: the equal-footing baselines' sorts row for row, their steps in arrival order whatever the
# trainer (stratifying a sorted order would keep the trainer waiting for the last length class); `bands` is a
# sort too (shortest first by train batch).
SORTS: tuple[str, ...] = ("long-first", "short-first", "bands")
# The random stream of a shuffle, epoch e: numpy.random.default_rng([seed, e, SHUFFLE_STREAM]). The `shuffle`
# candidate and the equal-footing random baselines draw the same permutation, so auto has them among its
# candidates row for row.
SHUFFLE_STREAM = 7
# How the engine hands minibatches to instances: "free" (the next minibatch in seq order to whichever instance
# frees first: a shared queue, verl's workers, least-pending servers) or "planned" (each instance keeps to its
# own queue, the schedule's instance column).
DISPATCHES: tuple[str, ...] = ("planned", "free")
# What `--arrangement auto` may trade for speed: "any" (the fastest candidate) or "representative" (only
# candidates whose training steps are expected to be about as representative of the epoch as a shuffle's).
STEP_RULES: tuple[str, ...] = ("any", "representative")
# How a group counts against its minibatch's KV budget (`--kv-budget`): "peak" (its share of the wave's expected
# peak, `arrange.timeline.group_kv_tokens`), "whole" (N x (prompt + mean), which a wave never exceeds) or "auto"
# (where the budget binds, `--arrangement auto` judges its candidates counted whole (at the peak, one that cannot
# keep the lag bound whole), the winner also at the
# peak, and if that is faster all of them at the peak, choosing among those, else it keeps whole; where the
# budget does not bind, with a named arrangement, or when one group alone exceeds it counted whole: peak). The
# padded static engine counts neither way: every row keeps its cache, padded to the longest, until the longest
# ends (`arrange.packing.PaddedTokens`); its schedules record "padded" (`KV_CUTS`).
KV_BUDGETS: tuple[str, ...] = ("auto", "peak", "whole")
# verl's trainers a plan for asynchronous training on servers can be timed for (`--verl-trainer`): its fully
# asynchronous trainer (the rollouter's slots, `--prompts-per-server`), or main_ppo's v1 modes
# (trainer.v1.trainer_mode), which submit a train batch a step after `--max-lag` of warm-up; colocate-async also
# puts the servers to sleep while the trainer trains and resumes their requests after (`asp_cli.sim.verl_async`).
VERL_PLANNED_TRAINERS: tuple[str, ...] = ("fully-async", "colocate-async", "separate-async")
# How the servers' router places requests, which auto times its candidates with on servers (`--router`):
# "least-pending" (verl's balancer: each sample to the server with the fewest requests in flight, so a group's
# samples spread over the servers) or "cache-aware" (sglang-router's default policy, slime's: a group's samples
# share their prompt and follow the first to its server; `asp_cli.sim.submit_all.cache_aware_server`) or
# "round-robin" (AReaL's in its SPMD mode: each sample to the next server in turn, whatever its load) or
# "group-round-robin" (each prompt's samples together, dealt to the servers in turn: OpenRLHF's, a rollout batch at a
# time, with --trainer schedule; AReaL's single controller, its default, with --trainer arrival).
ROUTERS: tuple[str, ...] = ("least-pending", "cache-aware", "round-robin", "group-round-robin")
# The routers of trainers that train each rollout batch whole as one step and generate the next one while it trains
# (`one_step_off`): slime's train_async.py behind sglang-router, and OpenRLHF's --train.async_enable.
ONE_STEP_OFF_ROUTERS: tuple[str, ...] = ("cache-aware", "group-round-robin")
STEP_LAYOUTS: tuple[str, ...] = ("batches", "finish")  # `ScheduleSettings.step_layout`
# How a schedule's minibatches were cut against the KV budget (its metadata's `arrangement.kv_budget`, and what
# the baselines in its sizes are cut by): a group's share of the peak, whole groups, or padded (static).
KV_CUTS: tuple[str, ...] = ("peak", "whole", "padded")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# What `--max-lag` takes besides a number (no bound), and the hint said when a number is refused.
NO_LAG_BOUND = "none"
LAG_NONE_HINT = f"{NO_LAG_BOUND} for no bound"


def check_lag(value: object) -> int | float | None:
    """Refuse a ``--max-lag`` that is not None or a finite number from 0 up; return it, a whole number as an int.

    A fraction is verl's ``async_training.staleness_threshold`` (0.1 by default): its fully asynchronous rollouter
    keeps at most ``(staleness_threshold + 1)`` train batches of prompts started since a weight sync, the count rule
    `asp_cli.sim` replays, which takes any such number. Where the lag is counted in whole steps (the plan's holds,
    a trainer that follows the schedule) a fraction counts as the next whole number (`lag_steps`): a group may then
    be one step stale, as some of verl's are.
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == NO_LAG_BOUND:  # the command line's word, in Python
        raise SettingsError(f"max_lag takes None for no bound in Python (the command line's --max-lag {NO_LAG_BOUND}); "
                            f"got {value!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_SETTING:
        raise SettingsError(f"--max-lag must be a number of training steps from 0 to {MAX_SETTING} (a fraction is "
                            f"verl's staleness_threshold), or {LAG_NONE_HINT} (got {value!r})")
    return int(value) if float(value).is_integer() else float(value)


def lag_steps(max_lag: int | float | None) -> int | None:
    """The lag bound in whole training steps: a fraction rounded up (`check_lag`)."""
    return None if max_lag is None else math.ceil(max_lag)


def warmup_prompts(max_lag: int | float, train_batch_size: int) -> int:
    """The prompts verl 0.9.1's v1 trainer submits as the warm-up of ``trainer.v1.<mode>.num_warmup_batches`` =
    ``max_lag`` in its asynchronous modes: the train batches it counts, rounded down to whole prompts (it forces
    ``data.gen_batch_size=1`` there; trainer_base.py:624-650, :731)."""
    return math.floor(max_lag * train_batch_size)


def check_warmup(mode: str, max_lag: int | float | None, train_batch_size: int) -> None:
    """Refuse a lag bound that verl's v1 ``mode`` (colocate-async, separate-async) would take as a warm-up of no
    prompt (a fraction below one prompt of the train batch): verl then skips the warm-up and runs each step
    synchronously, where the plan and the export say asynchronous (`warmup_prompts`)."""
    if max_lag is None or max_lag == 0 or warmup_prompts(max_lag, train_batch_size) >= 1:
        return
    key = f"trainer.v1.{mode.replace('-', '_')}.num_warmup_batches"
    raise SettingsError(f"--max-lag {max_lag:g} with --verl-trainer {mode} is {key}, a count of train batches that "
                        f"verl rounds down to whole prompts: {max_lag:g} x {train_batch_size} is a warm-up of none, "
                        "and every step runs synchronously; verl's staleness_threshold (0.1 by default) is its fully "
                        "asynchronous trainer's knob (--verl-trainer fully-async --trainer arrival): make the schedule "
                        f"with --max-lag 1 (verl's default warm-up) or at least 1/{train_batch_size} of a batch, or "
                        "for verl's synchronous trainer with --max-lag 0 --trainer schedule (exported with "
                        "--verl-trainer ppo)")


def warmup_note(mode: str, max_lag: int | float | None, train_batch_size: int) -> str | None:
    """What a lag bound below 1 means to verl's v1 ``mode``, said where it is legal (a warm-up of at least one
    prompt: `check_warmup`): a fraction of a train batch of warm-up, not the fully asynchronous trainer's
    staleness_threshold, for which such a fraction is usually meant."""
    if max_lag is None or not 0 < max_lag < 1:
        return None
    key = f"trainer.v1.{mode.replace('-', '_')}.num_warmup_batches"
    prompts = warmup_prompts(max_lag, train_batch_size)
    return (f"--max-lag {max_lag:g} with verl's {mode.replace('-', '_')} trainer is {key}={max_lag:g}, a warm-up of "
            f"{prompts:,} prompt{'' if prompts == 1 else 's'} (a fraction of a train batch of "
            f"{train_batch_size}, rounded down): the rollout runs at most that far ahead; verl's staleness_threshold "
            "(0.1 by default) is another knob, its fully asynchronous trainer's (--verl-trainer fully-async "
            "--trainer arrival); for verl's default warm-up of one train batch give --max-lag 1")


def whole(value: object) -> object:
    """An integer of another type than `int` (NumPy's ``np.int64``, a frame's cell) as a Python `int`; anything else,
    ``bool`` and ``np.bool_`` too, as it is, for the checks to judge. ``ScheduleSettings(instances=np.int64(8))`` was
    refused as not "a whole number from 1 to 100000" (a library newcomer's round)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def whole_fields(instance: object, names: tuple[str, ...]) -> None:
    """Set each named field of a frozen dataclass to `whole` of itself (NumPy's integers as ints): the one loop
    every settings class runs first in its ``__post_init__``."""
    for name in names:
        object.__setattr__(instance, name, whole(getattr(instance, name)))


def check_count(flag: str, value: object, *, minimum: int, optional: bool = False,
                maximum: int = MAX_SETTING, also: str = "") -> None:
    """Refuse a count or token budget that is not a whole number in ``minimum..maximum`` (None when optional;
    ``also`` names what else the option takes, said in the message: `--max-lag`'s ``none``).

    The one rule for every count setting, wherever its dataclass or entry point takes it.
    """
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        # A NumPy integer where the caller does not convert (`whole`): in range, it is told what to do.
        numpy = whole(value) is not value and minimum <= whole(value) <= maximum
        raise SettingsError(f"{flag} must be a whole number from {minimum} to {maximum}"
                            + (f", or {also}" if also else "") + f" (got {value!r}"
                            + (", a NumPy integer: pass int(value))" if numpy else ")"))


def check_flags(**flags: object) -> None:
    """Refuse a flag that is not True or False: from Python, force="no" replaced a file and append="no" appended
    (a hostile-input round). Named by its keyword, as a Python user wrote it."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise SettingsError(f"{name} must be True or False (got {value!r})")


def check_plan_with(value: object) -> None:
    """Refuse a ``--plan-with`` other than ``max`` or ``mean``."""
    if not isinstance(value, str) or value not in PLAN_WITH:
        raise SettingsError(f"--plan-with must be 'max' or 'mean' (got {value!r})")



def router_owner(router: str | None, trainer: str) -> str:
    """Whose routing ``router`` is, as the replays' words name it: "sglang" (slime's router), "AReaL" (its SPMD mode's
    round-robin, or its single controller's deal of whole groups with a trainer that takes finished groups),
    "OpenRLHF" (the same deal, a rollout batch trained whole) or "verl" (its balancer)."""
    if router == "group-round-robin":
        return "AReaL" if trainer == "arrival" else "OpenRLHF"
    return {"cache-aware": "sglang", "round-robin": "AReaL"}.get(router or "", "verl")


def replayed_owner(router: str | None, max_lag: int | float | None, trainer: str) -> str:
    """Whose routing a replay of ``router`` under ``max_lag`` and ``trainer`` is (`router_owner`), for the
    combinations `asp schedule` refuses too, which `asp simulate`'s --max-lag and --trainer can make: a deal of whole
    groups is OpenRLHF's only with a trainer that follows the schedule at a bound of 0 or 1 (synchronous, or one step
    off); otherwise AReaL's controller's (at a bound of 0, a train batch at a time; above it, groups started as the
    bound admits them)."""
    if router == "group-round-robin":
        return "OpenRLHF" if trainer == "schedule" and max_lag in (0, 1) else "AReaL"
    return router_owner(router, trainer)


def one_step_off(router: str | None, max_lag: int | float | None, trainer: str) -> bool:
    """Whether a replay with these settings is slime's `train_async.py` (slime v0.3.1, lines 32-70) or OpenRLHF's
    asynchronous trainer (0.11.2, `--train.async_enable` with its default `--train.async_queue_size 1`:
    `openrlhf/trainer/ppo_trainer_async.py`, a generator actor that takes a queue slot, generates a whole batch and
    queues it, the trainer returning the slot as it takes a batch): rollout k+1 generated (through sglang-router,
    ``router`` cache-aware, or OpenRLHF's deal, group-round-robin) while the trainer trains on rollout k
    (``max_lag`` 1, each step's own groups: ``trainer`` schedule), the next rollout started once both are done
    and the weights synced (`asp_cli.sim.submit_all.one_step_off_end_to_end_s`)."""
    return router in ONE_STEP_OFF_ROUTERS and max_lag == 1 and trainer == "schedule"


@named_in_python()
@dataclass(frozen=True)
class ScheduleSettings:
    """Everything that shapes a schedule besides the prompts and the predictions.

    Each field is the `asp schedule` option of its name with dashes (``max_lag`` is ``--max-lag``; None where the
    command line says ``none``), with the same default and meaning: `asp schedule --help` and the README's table
    ("Make a schedule") say each one (a library newcomer found nothing here). Checked once, when made.
    """

    instances: int = 4
    samples_per_prompt: int = 8
    epochs: int = 1
    train_batch_size: int = 128
    minibatch_size: int = 32
    max_tokens_per_minibatch: int | None = None  # None: the preset's KV-cache capacity
    max_response_tokens: int = 8192
    # None: rollout runs ahead freely (a synchronous trainer has no lag at all; an asynchronous one sees the
    # lag grow wherever the trainer is the slower side). A bound is not the default because one that the
    # minibatches cannot meet (a minibatch holding more groups than the bound allows) is an error.
    max_lag: int | float | None = None  # a fraction: verl's staleness_threshold (`check_lag`)
    seed: int = 0
    plan_with: PlanWith = "max"
    preset: str = "h100-qwen2.5-7b"
    length_classes: int = 8
    canonical_order: bool = False  # arrange as if the prompts came sorted by id: input row order cannot matter
    # How the trainer takes groups: "arrival" (the next train batch of finished groups, most frameworks) or
    # "schedule" (exactly the groups `train_step` assigns to each step, stratified by length: a replay buffer
    # that follows the schedule, e.g. asp's verl 0.9.1 sampler).
    trainer: str = "arrival"
    # The engine the plan is for: "continuous" (blocking generate() calls with continuous batching inside,
    # vLLM offline), "static" (padded HF generate) or "streaming" (servers that refill freed slots).
    engine: str = "continuous"
    # "auto" tries every candidate in asp's own simulator and keeps the fastest (`arrange.choose`); or a name.
    arrangement: str = "auto"
    # How the engine will take the minibatches (`DISPATCHES`); `--arrangement auto` judges its candidates so.
    dispatch: str = "free"
    # `STEP_RULES`: whether auto may choose an arrangement whose steps are less representative than a shuffle's.
    steps: str = "any"
    # `KV_BUDGETS`: how a group counts against --max-tokens-per-minibatch on blocking engines.
    kv_budget: str = "auto"
    # Prompts verl's fully asynchronous rollouter keeps in flight per server
    # (``async_training.concurrent_samples_per_replica``, 16 by default there); None: as many as the servers'
    # slots hold (verl's v1 trainer, or a rollouter set that high). Only servers with asynchronous training
    # (--engine streaming, --max-lag other than 0) have it: auto times its candidates so.
    prompts_per_server: int | None = None
    # `VERL_PLANNED_TRAINERS`: which of verl's asynchronous trainers auto times its candidates as (servers with a lag
    # bound other than 0); None: the fully asynchronous one, with --trainer arrival.
    verl_trainer: str | None = None
    # `ROUTERS`: the servers' router (--engine streaming); None: verl's balancer, least-pending.
    router: str | None = None
    # For slime's train_async.py (`slime_async`): what each rollout holds, `STEP_LAYOUTS` ("batches": each step one
    # consecutive train batch of the order, as synchronous steps; "finish": the groups the plan expects to finish in
    # that step under the lag bound of 1, long ones spread over the rollouts); None: auto judges both, a named
    # arrangement takes "batches". Set by `--arrangement auto`, not on the command line.
    step_layout: str | None = None

    def __post_init__(self) -> None:
        whole_fields(self, ("instances", "samples_per_prompt", "epochs", "train_batch_size", "minibatch_size",
                            "max_tokens_per_minibatch", "max_response_tokens", "max_lag", "seed", "length_classes",
                            "prompts_per_server"))  # NumPy's integers as ints: recorded as JSON, compared as ints
        # A count above its own bound gets the message that says why (below), however far above (a newcomer's
        # --instances 99999999999999999999 read "from 1 to 2147483647" where -1 read "from 1 to 100000"); one
        # below 1 or not a whole number is told the real range, not the generic one.
        for name in ("instances", "samples_per_prompt", "epochs", "train_batch_size", "minibatch_size",
                     "max_response_tokens", "length_classes"):
            value = getattr(self, name)
            if not (name in _MAXIMA and isinstance(value, int) and not isinstance(value, bool) and value > _MAXIMA[name]):
                check_count(_flag(name), value, minimum=1, maximum=_MAXIMA.get(name, MAX_SETTING))
        check_count("--max-tokens-per-minibatch", self.max_tokens_per_minibatch, minimum=1, optional=True)
        object.__setattr__(self, "max_lag", check_lag(self.max_lag))  # frozen: 2.0 is kept as 2
        check_count("--seed", self.seed, minimum=0)
        check_count("--prompts-per-server", self.prompts_per_server, minimum=1, optional=True)
        if self.prompts_per_server is not None and (self.engine != "streaming" or self.max_lag == 0):
            raise SettingsError("--prompts-per-server is verl's asynchronous rollouter's limit: it needs --engine "
                                "streaming and --max-lag other than 0 (a synchronous step submits its whole batch); "
                                "drop it, or set both")
        if self.prompts_per_server is not None and self.trainer != "arrival" and self.verl_trainer in (None,
                                                                                                   "fully-async"):
            raise SettingsError("--prompts-per-server is verl's asynchronous rollouter's limit, whose trainer takes "
                                "groups as they finish: with --trainer schedule asp times its plans in its own replay, "
                                "which has no such limit; drop it, or use --trainer arrival")
        check_plan_with(self.plan_with)
        self._check_verl_trainer()
        self._check_router()
        if self.step_layout is not None and self.step_layout not in STEP_LAYOUTS:
            raise SettingsError(f"step_layout must be one of {', '.join(STEP_LAYOUTS)} (got {self.step_layout!r})")
        if self.step_layout is not None and not self.slime_async:  # recorded, and meant nothing (a hostile round)
            raise SettingsError(f"step_layout lays out the rollouts of slime's train_async.py or OpenRLHF's "
                                f"asynchronous trainer (--engine streaming --router cache-aware or group-round-robin "
                                f"--max-lag 1 --trainer schedule), which these settings are not "
                                f"(got step_layout={self.step_layout!r}): leave it out")
        if self.engine not in ENGINES:
            raise SettingsError(f"--engine must be one of {', '.join(ENGINES)} (got {self.engine!r})")
        if self.arrangement not in ARRANGEMENTS:
            raise SettingsError(f"--arrangement must be one of {', '.join(ARRANGEMENTS)} (got {self.arrangement!r})")
        only = ENGINE_ONLY_ARRANGEMENTS.get(self.arrangement)
        if only is not None and self.engine != only:
            raise SettingsError(f"--arrangement {self.arrangement} is a plan for --engine {only} (got --engine "
                                f"{self.engine}); use --engine {only}, or another --arrangement")
        if self.trainer not in TRAINER_ORDERS:
            raise SettingsError(f"--trainer must be one of {', '.join(TRAINER_ORDERS)} (got {self.trainer!r})")
        if self.dispatch not in DISPATCHES:
            raise SettingsError(f"--dispatch must be one of {', '.join(DISPATCHES)} (got {self.dispatch!r})")
        if self.steps not in STEP_RULES:
            raise SettingsError(f"--steps must be one of {', '.join(STEP_RULES)} (got {self.steps!r})")
        if self.kv_budget not in KV_BUDGETS:
            raise SettingsError(f"--kv-budget must be one of {', '.join(KV_BUDGETS)} (got {self.kv_budget!r})")
        if self.kv_budget == "peak" and self.engine == "static":
            raise SettingsError("--kv-budget peak does not apply to --engine static: a padded batch keeps every "
                                "row's cache until its longest row ends; use --kv-budget whole or auto")
        if not isinstance(self.preset, str):
            raise SettingsError(f"--preset must be a preset's name or a calibration file (got {self.preset!r})")
        if not isinstance(self.canonical_order, bool):
            raise SettingsError(f"--canonical-order is a flag, True or False (got {self.canonical_order!r})")
        if self.instances > MAX_INSTANCES:
            raise SettingsError(f"--instances {self.instances} is not a rollout fleet; give at most {MAX_INSTANCES}")
        if self.samples_per_prompt > MAX_SAMPLES_PER_PROMPT:
            raise SettingsError(f"--samples-per-prompt {self.samples_per_prompt} is not a GRPO group; give at most "
                                f"{MAX_SAMPLES_PER_PROMPT}")

    def _check_verl_trainer(self) -> None:
        """Refuse a `verl_trainer` that is not one of verl's asynchronous trainers, or that these settings do not
        describe (each message names the fix)."""
        mode = self.verl_trainer
        if mode is None:
            return
        if mode not in VERL_PLANNED_TRAINERS:
            spelled = str(mode).replace("_", "-")  # verl's own spelling, trainer.v1.trainer_mode=colocate_async
            hint = (f"; did you mean {spelled}?" if spelled in VERL_PLANNED_TRAINERS else
                    "; verl's synchronous trainer (ppo, sync) is --max-lag 0" if mode in ("ppo", "sync") else "")
            raise SettingsError(f"--verl-trainer must be one of {', '.join(VERL_PLANNED_TRAINERS)} (got {mode!r})"
                                + hint)
        v1 = mode != "fully-async"
        missing = [flag for flag, lacking in (
            ("--engine streaming", self.engine != "streaming"),
            ("--max-lag other than 0", self.max_lag == 0),
            (f"--max-lag equal to trainer.v1.{mode.replace('-', '_')}.num_warmup_batches (1 by default)",
             v1 and self.max_lag is None)) if lacking]
        if missing:
            raise SettingsError(f"--verl-trainer {mode} is one of verl's asynchronous trainers, which run on servers"
                                + (" a warm-up ahead" if v1 else "") + f": add {' and '.join(missing)}, or drop it")
        if v1:
            check_warmup(mode, self.max_lag, self.train_batch_size)
        if not v1 and self.trainer != "arrival":
            raise SettingsError("--verl-trainer fully-async takes groups as they finish: use --trainer arrival, "
                                "or --verl-trainer colocate-async or separate-async for asp's replay buffer")
        if v1 and self.prompts_per_server is not None:
            raise SettingsError(f"--prompts-per-server is verl's fully asynchronous rollouter's limit; verl's {mode} "
                                "trainer submits a whole train batch at a time: drop it")

    def _check_router(self) -> None:
        """Refuse a `router` that is not one of `ROUTERS`, or that these settings cannot use (naming the fix)."""
        if self.router is None:
            return
        if self.router not in ROUTERS:
            spelled = str(self.router).replace("_", "-")  # sglang-router's own spelling, --router-policy cache_aware
            raise SettingsError(f"--router must be one of {', '.join(ROUTERS)} (got {self.router!r})"
                                + (f"; did you mean {spelled}?" if spelled in ROUTERS else ""))
        if self.engine != "streaming":
            raise SettingsError(f"--router {self.router} is how servers that refill place requests: add --engine "
                                "streaming, or drop it")
        if self.dispatch == "planned":  # least-pending too: the help said "not with --dispatch planned"
            raise SettingsError(f"--router {self.router} places each request where that router puts it, while "
                                "--dispatch planned keeps it to its planned instance (asp's router plug-in for verl): "
                                "drop one")
        if self.router == "group-round-robin" and (self.max_lag == 0) == (self.trainer == "arrival") \
                and not (self.max_lag == 1 and self.trainer == "schedule"):
            # OpenRLHF's trainer trains each rollout batch whole (--trainer schedule, lag 0 or 1); AReaL's single
            # controller deals whole groups in turn as its staleness bound admits them and trains finished ones
            # (--trainer arrival, a lag bound above 0 or none). At lag 0 both train each batch whole: the deal's
            # batches are the steps only with --trainer schedule (a review: with --trainer arrival 2,206 of 3,540
            # rows were exported onto another engine than planned).
            lag = NO_LAG_BOUND if self.max_lag is None else self.max_lag
            raise SettingsError("--router group-round-robin deals a batch's groups to the servers in turn: with "
                                "--trainer schedule it is OpenRLHF's, at --max-lag 0 (synchronous, its default) or 1 "
                                "(--train.async_enable with its default --train.async_queue_size 1; a larger queue is "
                                "not modelled); with --trainer arrival AReaL's, at a --max-lag above 0 "
                                "(rollout.max_head_offpolicyness), or none for a bound larger than the run (at 0 use "
                                "--trainer schedule) (got --max-lag "
                                f"{lag} --trainer {self.trainer})")
        if self.router == "group-round-robin" and self.max_lag is not None and self.max_lag != int(self.max_lag):
            raise SettingsError(f"--router group-round-robin --trainer arrival is AReaL's controller, whose bound "
                                f"(rollout.max_head_offpolicyness) is a whole number of steps, not a fraction (got "
                                f"--max-lag {self.max_lag}, verl's staleness_threshold): give a whole number")
        if self.router != "least-pending" and self.verl_trainer is not None:
            raise SettingsError(f"--verl-trainer {self.verl_trainer} is one of verl's trainers, which route through "
                                f"verl's balancer (--router least-pending): drop --router {self.router}, or "
                                "--verl-trainer")

    @property
    def other_router(self) -> str | None:
        """`router` where it is not verl's balancer (the replays' ``routing`` for it), else None."""
        return self.router if self.router not in (None, "least-pending") else None

    @property
    def timed_router(self) -> str | None:
        """The router `--arrangement auto` timed its candidates with (`router`, else verl's balancer), or None where
        it timed none: a named arrangement, a blocking engine, planned dispatch (asp's router plug-in), or a trainer
        that follows the schedule under a lag bound (asp's own replay, each group whole to the first free server)."""
        if (self.engine != "streaming" or self.arrangement != "auto" or self.dispatch != "free"
                or (self.max_lag != 0 and self.trainer != "arrival" and not self.slime_async)):
            return None
        return self.router or "least-pending"

    @property
    def slime_async(self) -> bool:
        """Whether these settings describe slime's `train_async.py` or OpenRLHF's asynchronous trainer
        (`one_step_off`) on servers."""
        return self.engine == "streaming" and one_step_off(self.router, self.max_lag, self.trainer)

    @property
    def verl_v1_mode(self) -> str | None:
        """`verl_trainer` where it names one of verl's v1 modes (colocate-async, separate-async), else None."""
        return self.verl_trainer if self.verl_trainer not in (None, "fully-async") else None

    def replayed_as(self, **changes: Any) -> ScheduleSettings:
        """These settings with ``changes`` (another engine, lag bound or trainer rule to replay or compare under),
        `verl_trainer`, `router` and `step_layout` each dropped where it no longer applies there, as none was given (a colocate-async
        schedule compared at --max-lag 0 is verl's synchronous trainer; a cache-aware one on a blocking engine has no
        router)."""
        kept = {key: getattr(self, key) for key in ("verl_trainer", "router", "step_layout")
                if getattr(self, key) is not None and key not in changes}
        if not kept:
            return dataclasses.replace(self, **changes)
        without = dataclasses.replace(self, **{**changes, **dict.fromkeys(kept)})  # any other refusal is raised here
        for key, value in kept.items():  # each kept where it still applies (the router on servers)
            try:
                without = dataclasses.replace(without, **{key: value})
            except SettingsError:
                pass
        return without

    def resolved_kv_budget(self) -> str:
        """The KV accounting a named arrangement is cut with (`KV_CUTS`): padded on the static engine, peak for
        auto."""
        if self.engine == "static":
            return "padded"
        return "peak" if self.kv_budget == "auto" else self.kv_budget

    def with_kv_cut(self, cut: str) -> ScheduleSettings:
        """These settings cutting minibatches as ``cut`` (`KV_CUTS`) says: the static engine cuts padded whatever
        its setting, so a padded cut keeps the setting as it is."""
        return self if cut == "padded" else dataclasses.replace(self, kv_budget=cut)

    def to_dict(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        for key in ("prompts_per_server", "verl_trainer", "router", "step_layout"):
            if document[key] is None:  # schedules made without it read as before it existed
                del document[key]
        return document

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ScheduleSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in values.items() if k in known}
        if values.get("router") == "least-pending" and values.get("dispatch") == "planned":
            # Made before that pair was refused (2026-12-06), where the router changed nothing: read without it.
            del values["router"]
        return cls(**values)
