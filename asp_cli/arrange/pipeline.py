"""The Python twin of `asp schedule`: read prompts, predict lengths, pack, interleave, estimate, write.

`arrange` is the pure core (frames in, schedule frame out); `schedule` adds files, fingerprints and
metadata. The CLI only parses options, calls `schedule` and renders its `ScheduleResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import __version__
from asp_cli import columns as C
from asp_cli.costmodel import HardwarePreset, load_preset
from asp_cli.errors import LagBoundError, SettingsError, counted, expect_callable, shown_id, shown_name
from asp_cli.fingerprint import combine_fingerprints, file_fingerprint
from asp_cli.output import json_finite
from asp_cli.reading.history_ids import id_hints, row_numbered
from asp_cli.reading.options import DEFAULT_READ, ReadOptions, one_path, paths_of
from asp_cli.arrange.advice import (dropped_tail_warnings, oversized_batch_warning, plan_warnings, settings_warnings,
                                    source_warnings)
from asp_cli.arrange.choose import ArrangementChoice, arrange_chosen, choose_arrangement, sample_sigma
from asp_cli.arrange.inputs import check_frames
from asp_cli.arrange.interleaving import (
    balanced_assignment,
    dispatch_order,
    ideal_start_s,
    length_classes,
    list_schedule,
)
from asp_cli.arrange.packing import PaddedTokens, cut_minibatches, cut_per_step, pack, per_step_order
from asp_cli.arrange.streaming import plan_streaming
from asp_cli.arrange.summary import summarize
from asp_cli.schedule_format import format_version_for, recorded_command_line, write_schedule
from asp_cli.settings import (MAX_SCHEDULE_ROWS, MAX_SETTING, SHUFFLE_STREAM, SORTS, ScheduleSettings,
                              check_replay_size, lag_steps)
from asp_cli.arrange.timeline import (
    group_kv_tokens,
    group_tokens,
    kv_peak_ratio,
    minibatch_times,
    policy_version_at,
    replay_starts,
    stratified_steps,
    synchronous_holds,
    trainer_seconds,
    trainer_timeline,
)

# Relative noise on log length when ordering prompts for packing; keeps epochs different while moving a
# prompt by at most a few percent of its length (well inside the predictor's own error).
_PACKING_JITTER = 0.02
# Rounds of holding minibatches back to honour --max-lag before giving up: at least this many, and one more than
# the train steps (a tight bound, e.g. synchronous training at 0, moves the holds about one step a round: at a
# flat 60 an 84-step run with --max-lag 0 --trainer schedule was refused).
_MAX_LAG_ROUNDS = 60
# Train batches of the shortest minibatches dispatched first, so the trainer's first step starts at once.
_WARM_TRAIN_BATCHES = 1
# How many more minibatches of one length class an instance may hold than the instance with the fewest.
_CLASS_BALANCE_SLACK = 1

Progress = Callable[[str], None]


@dataclass
class ScheduleResult:
    """What `schedule` made: the rows, the metadata written with them, and a summary for people."""

    frame: pl.DataFrame
    metadata: dict[str, Any]
    summary: dict[str, Any] = field(default_factory=dict)
    output: Path | None = None
    # per input file, the columns read as what (prompt, id, source, difficulty; None: none found), for people
    columns: dict[str, dict[str, str | None]] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        """What is legal but probably a mistake (the summary's ``warnings``): where every other result keeps them."""
        return self.summary.get("warnings", [])


# --------------------------------------------------------------------------------------------------------
# The core


# On the padded static engine the default budget is this share of the KV cache, and a larger one is warned
# about: a minibatch's longest response runs past its largest predicted group maximum, and HF generate does not
# preempt. Replayed on the sample prompts under asp's noise model with a 13,427-token cache, a budget of the
# whole cache left 51 of 78 padded batches over it, half the cache 5 of 180, a third 0 of 291 (2026-12-02).
STATIC_HEADROOM = 0.5


def minibatch_token_budget(settings: ScheduleSettings, preset: HardwarePreset) -> int:
    """The per-minibatch KV budget in tokens: the user's, or the preset's cache capacity (on the padded static
    engine `STATIC_HEADROOM` of it: HF generate does not preempt, and a batch's longest response runs past the
    predictions)."""
    if settings.max_tokens_per_minibatch is not None:
        return settings.max_tokens_per_minibatch
    share = STATIC_HEADROOM if settings.engine == "static" else 1.0
    return max(int(share * preset.kv_capacity_tokens), 1)


def kv_footprint(prompt_tokens: np.ndarray, top: np.ndarray, mean: np.ndarray, n: int,
                 kv_budget: str) -> np.ndarray | PaddedTokens:
    """KV tokens a group counts against its minibatch's budget, whole tokens.

    ``kv_budget`` "whole": N x (prompt + predicted mean), which its wave never exceeds; "peak": its share of the
    wave's expected peak (`timeline.group_kv_tokens`, the within-group spread read back from the predicted
    maximum and mean by `choose.sample_sigma`); "padded" (the static engine): no sum over its groups, every
    row held at the longest prompt plus the longest predicted group maximum until the longest ends
    (`packing.PaddedTokens`). The one place the packer, the estimates and the equal-footing baselines take it
    from.
    """
    if kv_budget == "padded":
        return PaddedTokens(np.ceil(prompt_tokens).astype(np.int64), np.ceil(top).astype(np.int64), n)
    if kv_budget == "whole":
        return np.ceil(group_tokens(n, prompt_tokens, mean)).astype(np.int64)
    return np.ceil(group_kv_tokens(n, prompt_tokens, mean, sample_sigma(top, mean, n))).astype(np.int64)


def arrange(
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    *,
    preset: HardwarePreset | None = None,
) -> pl.DataFrame:
    """Arrange prompts into a schedule frame (all epochs), sorted by ``seq``: `plan` without its choice; a Python
    user's frames checked first (`asp_cli.arrange.inputs.check_frames`: raises `InputError`, `SettingsError`)."""
    check_frames(prompts, predictions, settings)
    return plan(prompts, predictions, settings, preset=preset)[0]


def plan(
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    *,
    preset: HardwarePreset | None = None,
) -> tuple[pl.DataFrame, ArrangementChoice]:
    """Arrange prompts into a schedule frame (all epochs), sorted by ``seq``, and say which arrangement won.

    With ``settings.arrangement == "auto"`` every candidate of the settings' engine is tried in asp's own
    simulator under lengths drawn from the predictions (`asp_cli.arrange.choose`); otherwise the named one is
    used.

    Parameters
    ----------
    prompts
        At least ``row`` and ``prompt_id`` (as `reading.read_prompts` returns).
    predictions
        Aligned with ``prompts``: ``prompt_tokens``, ``predicted_max_tokens``, ``predicted_mean_tokens``,
        ``predicted_tokens``, ``prediction_source`` (as `prediction.predict_lengths` returns).
    settings
        The scheduler settings.
    preset
        The cost model; by default ``settings.preset``.

    Raises
    ------
    SettingsError
        When one prompt does not fit the minibatch token budget, or ``max_lag`` cannot be honoured.
    """
    preset = preset or load_preset(settings.preset)
    if prompts.height != predictions.height:
        raise ValueError("prompts and predictions differ in length")
    if settings.canonical_order:
        # Ids are unique, so sorting by id fixes one order whatever order the rows came in; `row` still
        # names each prompt's position in the input.
        by_id = prompts[C.PROMPT_ID].arg_sort()
        prompts, predictions = prompts[by_id], predictions[by_id]
    n = settings.samples_per_prompt
    rows = prompts.height * settings.epochs
    if rows > MAX_SCHEDULE_ROWS:
        raise SettingsError(
            f"--epochs {settings.epochs} x {prompts.height:,} prompts is {rows:,} schedule rows, more than "
            f"{MAX_SCHEDULE_ROWS:,}; schedule a few epochs per run (with a different --seed for each run)")
    if settings.engine == "streaming":  # its expected times come from replaying every sequence
        check_replay_size(rows, settings.samples_per_prompt, "a plan for --engine streaming")
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    top = predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64)
    prompt_tokens = predictions[C.PROMPT_TOKENS].to_numpy().astype(np.float64)
    # KV footprint of a group: a wave's cache use at step s is the sum of (prompt + s) over the sequences still
    # live. It never exceeds the sum of (prompt + length) over all of them (`--kv-budget whole`: minibatches
    # within the budget never overflow the cache when the predictions hold); a group's share of the wave's
    # expected peak (`peak`) admits more, where lengths spread, at the price of a preemption now and then.
    kv_budget = settings.resolved_kv_budget()
    counted_as = kv_footprint(prompt_tokens, top, mean, n, kv_budget)
    footprint = counted_as.alone() if isinstance(counted_as, PaddedTokens) else counted_as
    budget = minibatch_token_budget(settings, preset)
    if settings.engine != "streaming" and footprint.size and footprint.max() > budget:
        worst = int(np.argmax(footprint))
        ratio = float(kv_peak_ratio(sample_sigma(top[worst:worst + 1], mean[worst:worst + 1], n))[0])
        counted = ("(prompt + predicted maximum response), each row held padded to the longest on the static "
                   "engine" if kv_budget == "padded" else
                   "(prompt + predicted mean response)" if kv_budget == "whole" else
                   f"(prompt + {ratio:.2f} x predicted mean response), its share of a minibatch's expected peak")
        needs = (f"prompt id {prompts[C.PROMPT_ID][worst]!r} needs {int(footprint[worst])} tokens ({n} samples x "
                 f"{counted}")
        one = int(prompt_tokens[worst] + top[worst])  # one sequence: what an engine must hold at once; a larger
        if one > preset.kv_capacity_tokens:  # budget would plan what none runs (a hostile round's 100M tokens)
            raise SettingsError(
                f"{needs}); one of its sequences alone, {one} tokens, is more than the {preset.name} engine's KV "
                f"cache holds ({preset.kv_capacity_tokens} tokens): drop or shorten that prompt, or give a --preset "
                "whose cache holds it")
        raise SettingsError(
            f"--max-tokens-per-minibatch {budget} is smaller than one prompt: {needs}); raise it to at least "
            f"{int(footprint[worst])}")
    if settings.arrangement == "auto":
        choice = choose_arrangement(_arrange_named, prompts, predictions, settings, preset, budget_tokens=budget)
    else:
        choice = ArrangementChoice(settings.arrangement, settings.arrangement, settings.engine,
                                   dispatch=settings.dispatch, kv_budget=kv_budget)
    del mean, top, prompt_tokens, footprint, counted_as  # the check's per-prompt arrays; the arrangement makes its own
    frame, choice = arrange_chosen(_arrange_named, prompts, predictions, settings, preset, choice)
    return frame, choice


def _arrange_named(prompts: pl.DataFrame, predictions: pl.DataFrame, settings: ScheduleSettings,
                   preset: HardwarePreset) -> pl.DataFrame:
    """The frame of arrangement ``settings.arrangement`` (a name, not auto) for ``settings.engine``."""
    if settings.engine == "streaming":
        return plan_streaming(prompts, predictions, settings, preset, settings.arrangement)
    n = settings.samples_per_prompt
    planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
    top = predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64)
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    prompt_tokens = predictions[C.PROMPT_TOKENS].to_numpy().astype(np.float64)
    kv_budget = settings.resolved_kv_budget()
    footprint = kv_footprint(prompt_tokens, top, mean, n, kv_budget)
    budget = minibatch_token_budget(settings, preset)
    # Under a max_lag bound, rollout can run only a few steps ahead of the trainer. When the trainer is the
    # slower side, the epoch then lasts as long as the trainer's work, and each class is spread over that
    # horizon, so every stretch of the trainer's timeline gets its share of long groups (front-loading the
    # long class would fill the admission window with it and leave the trainer waiting). Without a lag bound
    # rollout runs ahead freely and its own horizon stays (the long tail must start early).
    trainer_s = (trainer_seconds(preset, group_tokens(n, prompt_tokens, mean), settings.train_batch_size)
                 if settings.max_lag is not None else None)
    sync = {"seconds": lambda local, m: minibatch_times(  # synchronous steps' cuts (`packing.cut_per_step`)
        preset, local, m, prompt_tokens, top, mean, n, kv_tokens=footprint if kv_budget == "peak" else None)[0],
        "instances": settings.instances} if settings.max_lag == 0 else {}
    epochs = []
    free_at = np.zeros(settings.instances, dtype=np.float64)
    minibatch_offset = 0
    for epoch in range(settings.epochs):
        rng = np.random.default_rng([settings.seed, epoch])
        name = settings.arrangement
        step_of_prompt = None  # the train step each prompt belongs to, where the arrangement fixes it
        if name == "per-step":
            # A shuffle's train batches kept whole (steps as representative as a shuffle's), each packed
            # longest first on its own: no minibatch crosses a step, so a synchronous step waits only for its
            # own work. In synchronous training (--max-lag 0) a step waits for its slowest instance: its groups
            # are dealt into balanced minibatches, or cut where that is expected sooner (`packing.cut_per_step`).
            by_step = per_step_order(planned, settings.train_batch_size, rng)
            work = group_tokens(n, prompt_tokens, mean) if settings.max_lag == 0 else None
            local = cut_per_step(by_step, footprint, settings.train_batch_size, settings.minibatch_size, budget,
                                 work, **sync)
            step_of_prompt = np.empty(planned.size, dtype=np.int64)
            step_of_prompt[by_step] = np.arange(planned.size) // settings.train_batch_size
        elif name in ("shuffle", "long-first", "short-first"):
            # A seeded shuffle (no length order, drawn as the equal-footing baseline draws it, `bench.baselines`,
            # so it is that baseline row for row) or the plain sort (ties by position), cut by the same limits
            # and dispatched in cutting order: exactly the equal-footing rows of the benchmark.
            by = (np.random.default_rng([settings.seed, epoch, SHUFFLE_STREAM]).permutation(planned.size)
                  if name == "shuffle" else
                  np.lexsort((np.arange(planned.size), -planned if name == "long-first" else planned)))
            # Under a lag bound a trainer that follows a shuffle trains its own consecutive batches too (already
            # representative): stratified by predicted finish it waited for stragglers, and the summary called
            # auto's pick 44% faster than that shuffle where replays put it 1% ahead (a verl newcomer's round).
            if settings.trainer == "schedule" and (settings.max_lag == 0
                                                   or (name == "shuffle" and settings.max_lag is not None)):
                # Synchronous: the order's consecutive train batches (a sort's: a length curriculum), each cut on
                # its own (a sort's dealt, as per-step's). Left to arrival order they could not keep the bound (a
                # group overtaken by a later minibatch's trains a step late): auto took 2.4 times the plain sort's
                # time on mix-k8-n8, and a shuffle, verl's own default, was no candidate (docs/benchmarks.md).
                work = None if name == "shuffle" else group_tokens(n, prompt_tokens, mean)  # a shuffle: a plain cut
                local = cut_per_step(by, footprint, settings.train_batch_size, settings.minibatch_size, budget, work,
                                     **sync)
                step_of_prompt = np.empty(planned.size, dtype=np.int64)
                step_of_prompt[by] = np.arange(planned.size) // settings.train_batch_size
            else:
                local = cut_minibatches(footprint, by, max_prompts=settings.minibatch_size, max_tokens=budget)
        else:
            local = pack(planned, footprint, max_prompts=settings.minibatch_size, max_tokens=budget, rng=rng,
                         jitter=_PACKING_JITTER)
        m = int(local.max()) + 1
        # The estimate stretches a minibatch over the cache as the packer counted it (the whole-group default
        # otherwise: the same numbers as before the peak budget).
        duration, finish_offset = minibatch_times(preset, local, m, prompt_tokens, top, mean, n,
                                                  kv_tokens=footprint if kv_budget == "peak" else None)
        classes = length_classes(duration, settings.length_classes)
        if name == "interleave":
            ideal = ideal_start_s(duration, classes, settings.instances, groups=np.bincount(local, minlength=m),
                                  warm_groups=_WARM_TRAIN_BATCHES * settings.train_batch_size,
                                  horizon_s=trainer_s)
            order = dispatch_order(ideal, duration)
            instance, start, free_at = balanced_assignment(order, duration, classes, free_at,
                                                           slack=_CLASS_BALANCE_SLACK)
        else:
            order = np.arange(m)  # cutting order: the sort's own, or the shuffle's
            barrier = None if not sync or step_of_prompt is None else np.empty(m, dtype=np.int64)
            if barrier is not None:  # synchronous steps start from instances all free
                barrier[local] = step_of_prompt
            instance, start, free_at = list_schedule(order, duration, free_at, barrier)
        rank = np.empty(m, dtype=np.int64)
        rank[order] = np.arange(m)
        epochs.append(
            {
                "epoch": epoch,
                "minibatch_local": local,
                "minibatch_global": rank[local] + minibatch_offset,
                "duration": duration,
                "dispatch_rank": rank,
                "instance": instance,
                "start": start,
                "finish_offset": finish_offset,
                "classes": classes,
                "step_of_prompt": step_of_prompt,
            }
        )
        minibatch_offset += m
    # The per-prompt arrays above are not needed any more: free them before the rows are built.
    del planned, top, mean, prompt_tokens, footprint, local, duration, finish_offset
    return _assemble(prompts, predictions, settings, preset, epochs)


def _assemble(
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    preset: HardwarePreset,
    epochs: list[dict[str, Any]],
) -> pl.DataFrame:
    """Turn per-epoch arrays into rows; estimate training steps and lag; honour max_lag."""
    p = prompts.height
    n = settings.samples_per_prompt
    # Global minibatch arrays (dispatch order across epochs is epoch-major, then dispatch rank).
    mb_instance = np.concatenate([e["instance"][np.argsort(e["dispatch_rank"])] for e in epochs])
    mb_duration = np.concatenate([e["duration"][np.argsort(e["dispatch_rank"])] for e in epochs])
    mb_start = np.concatenate([e["start"][np.argsort(e["dispatch_rank"])] for e in epochs])
    mb_class = np.concatenate([e["classes"][np.argsort(e["dispatch_rank"])] for e in epochs])
    row_mb = np.concatenate([e["minibatch_global"] for e in epochs])
    # per-step keeps a shuffle's train batches: a trainer that follows the schedule trains exactly those.
    fixed_steps = None
    if all(e.get("step_of_prompt") is not None for e in epochs):
        per_epoch = -(-p // settings.train_batch_size)
        fixed_steps = np.concatenate([e["step_of_prompt"] + i * per_epoch for i, e in enumerate(epochs)])
    row_offset = np.concatenate([e["finish_offset"] for e in epochs])
    n_epochs = len(epochs)
    epochs.clear()  # the caller's per-epoch arrays: each is in the concatenations above now
    row_epoch = np.repeat(np.arange(n_epochs, dtype=np.int32), p)
    row_prompt = np.tile(np.arange(p, dtype=np.int64), n_epochs)
    planned = predictions[C.PREDICTED_TOKENS].to_numpy().astype(np.int64)
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    prompt_tokens = predictions[C.PROMPT_TOKENS].to_numpy().astype(np.float64)
    step_tokens = np.tile(group_tokens(n, prompt_tokens, mean), n_epochs)

    start = mb_start.copy()
    hold = np.zeros_like(start)
    # A trainer that follows a schedule whose steps are fixed (per-step) is held to those steps from the start.
    follow = fixed_steps if settings.trainer == "schedule" else None
    if follow is not None and settings.max_lag == 0:  # synchronous: the holds the loop would find, at once
        hold = synchronous_holds(preset, follow, row_mb, row_offset, step_tokens, mb_instance, mb_duration,
                                 settings.instances, hold)
    # The plan's holds count the lag in whole steps: a fractional bound (verl's staleness_threshold) rounded up.
    bound = lag_steps(settings.max_lag)
    rounds = max(_MAX_LAG_ROUNDS, -(-row_mb.size // settings.train_batch_size) + 1)
    for _ in range(rounds + 1):
        start = replay_starts(mb_instance, mb_duration, hold, settings.instances)
        finish = start[row_mb] + row_offset
        train_step, _, step_end = trainer_timeline(preset, finish, step_tokens, settings.train_batch_size, follow)
        version = policy_version_at(step_end, start)[row_mb]
        lag = train_step - version
        if bound is None or lag.max() <= bound:
            break
        # Hold each offending minibatch until the policy it needs is live.
        need = np.zeros(mb_start.size, dtype=np.int64)
        np.maximum.at(need, row_mb, train_step - bound)
        ready_at = np.where(need > 0, step_end[np.clip(need - 1, 0, step_end.size - 1)], 0.0)
        too_early = (policy_version_at(step_end, start) < need) & (ready_at > start)
        if not too_early.any():
            break
        hold = np.maximum(hold, np.where(too_early, ready_at, 0.0))
    if bound is not None and lag.max() > bound:
        worst = int(np.argmax(lag))
        shown, behind = shown_id(prompts[C.PROMPT_ID][int(row_prompt[worst])]), int(lag[worst])
        steps = f"{behind} step{'' if behind == 1 else 's'}"
        if settings.max_lag == 0 and settings.trainer == "schedule" and settings.arrangement != "per-step":
            raise LagBoundError(  # synchronous training has no lag to raise: the minibatches mix training steps
                f"--max-lag 0 (synchronous training) cannot be met by --arrangement {settings.arrangement}: its "
                f"minibatches mix groups of different training steps (prompt id {shown} would train {steps} "
                "after the policy that generated it); for synchronous training --arrangement per-step (or auto) "
                "keeps each step's groups together")
        raise LagBoundError(
            f"--max-lag {settings.max_lag} cannot be met: prompt id {shown} is expected {steps} behind even "
            "when rollout is held back; raise --max-lag, raise --train-batch-size, or give more --instances"
            + ("; a synchronous trainer (verl's default) trains the schedule's own steps: give --trainer schedule"
               if settings.trainer == "arrival" and settings.max_lag == 0 else ""))
    if settings.trainer == "schedule" and follow is None and settings.arrangement not in SORTS:
        # A trainer that follows the schedule takes the stratified steps assigned here, from the finish times
        # of the plan that keeps the lag bound; where stratifying would break the bound, arrival order stays.
        # (Fixed steps were followed by the loop above already; a plain sort keeps its arrival order.)
        assigned = stratified_steps(finish, mb_class[row_mb], row_epoch, settings.train_batch_size)
        s_step, _, s_end = trainer_timeline(preset, finish, step_tokens, settings.train_batch_size, assigned)
        s_lag = s_step - policy_version_at(s_end, start)[row_mb]
        if bound is None or s_lag.max() <= bound:
            train_step, step_end, lag = s_step, s_end, s_lag
    del version, mean, prompt_tokens
    version_rows = policy_version_at(step_end, start)[row_mb]
    # Dispatch order: the interleaving's (epoch by epoch), which is also what a free-dispatch engine follows;
    # rows in a minibatch longest first.
    mb_order = np.arange(start.size)
    mb_rank = np.empty(start.size, dtype=np.int64)
    mb_rank[mb_order] = np.arange(start.size)
    row_planned = np.tile(planned, n_epochs)
    del planned
    row_order = np.lexsort((row_prompt, -row_planned, mb_rank[row_mb]))
    del row_prompt, row_offset, step_tokens

    # The rows are built in ``seq`` order (each column gathered by ``row_order``), which is ``frame.sort("seq")``
    # without a second copy of the whole schedule in memory. Each per-row array is dropped once its column is
    # made, the columns gathered by row first, so little beyond the finished columns is in flight at the end.
    rows = row_order.size
    by_seq_mb = row_mb[row_order]
    del row_mb
    # Prompt p of epoch e is row e * P + p, so its prompt index is the row index modulo P.
    by_seq_prompt = row_order % max(p, 1)
    columns: dict[str, pl.Series] = {}

    def put(name: str, values: Any) -> None:
        columns[name] = values if isinstance(values, pl.Series) else pl.Series(name, values)

    put("epoch", row_epoch[row_order])
    del row_epoch
    put("predicted_tokens", row_planned[row_order])
    del row_planned
    put("train_step", train_step.astype(np.int64, copy=False)[row_order])
    del train_step
    put("expected_finish_s", np.round(finish, 6)[row_order])
    del finish
    put("expected_policy_version", version_rows.astype(np.int64, copy=False)[row_order])
    del version_rows
    put("expected_lag", lag.astype(np.int64, copy=False)[row_order])
    del lag, row_order
    put("seq", pl.Series("seq", np.arange(rows, dtype=np.int64)).set_sorted())
    put("instance", mb_instance[by_seq_mb].astype(np.int32))
    sorted_mb = mb_rank[by_seq_mb]
    # Rows of a minibatch are contiguous in seq: a row's place in its minibatch counts from the first of them.
    put("position_in_minibatch", (np.arange(rows) - np.searchsorted(sorted_mb, sorted_mb, side="left"))
        .astype(np.int32))
    put("minibatch", sorted_mb)
    del sorted_mb
    put("length_class", mb_class[by_seq_mb].astype(np.int32))
    put("expected_start_s", np.round(start[by_seq_mb], 6))
    put("expected_minibatch_end_s", np.round((start + mb_duration)[by_seq_mb], 6))
    del by_seq_mb
    put("row", prompts[C.ROW].to_numpy().astype(np.int64, copy=False)[by_seq_prompt])
    put("prompt_id", prompts[C.PROMPT_ID].gather(by_seq_prompt))
    for name in (C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PROMPT_TOKENS):
        put(name, predictions[name].to_numpy().astype(np.int64, copy=False)[by_seq_prompt])
    put("prediction_source", predictions[C.PREDICTION_SOURCE].gather(by_seq_prompt))
    del by_seq_prompt
    order = ("seq", "instance", "minibatch", "epoch", "row", "prompt_id", "predicted_tokens", "train_step",
             C.PREDICTED_MAX_TOKENS, C.PREDICTED_MEAN_TOKENS, C.PROMPT_TOKENS, "prediction_source", "length_class",
             "position_in_minibatch", "expected_start_s", "expected_finish_s", "expected_minibatch_end_s",
             "expected_policy_version", "expected_lag")
    columns = {name: columns.pop(name) for name in order}
    frame = pl.DataFrame(list(columns.values()))
    columns.clear()
    text = [pl.col(name).cast(pl.String) for name in ("prompt_id", "prediction_source") if frame.schema[name] != pl.String]
    return frame.with_columns(text) if text else frame


# --------------------------------------------------------------------------------------------------------
# Files in, file out


def schedule(
    inputs: str | Path | Sequence[str | Path],
    output: str | Path | None = None,
    *,
    settings: ScheduleSettings | None = None,
    predictor: str | Path | None = None,
    predictions: str | Path | Sequence[str | Path] = (),
    history: str | Path | Sequence[str | Path] = (),
    read: ReadOptions = DEFAULT_READ,
    command_line: Sequence[str] | None = None,
    force: bool = False,
    progress: Progress | None = None,
    history_epochs: int | None = None,
) -> ScheduleResult:
    """Make a schedule from prompt files; write it to ``output`` when given.

    This is what `asp schedule` runs. See the README for the options; every setting lives in
    ``settings`` (a `ScheduleSettings`), every reading option (columns, ``on_bad_row``, the tokenizer) in ``read``
    (a `ReadOptions`); ``history_epochs`` keeps the history's last epochs only (`--history-epochs`). ``inputs``,
    ``predictions`` and ``history`` each take a path or a list of paths. ``command_line`` is recorded in the
    metadata (the output written ``OUT``, `recorded_command_line`): `asp schedule` passes its own, so the same
    one makes the CLI's bytes.

    Raises
    ------
    AspError
        Its subclasses for bad input, settings, predictor files or outputs; nothing is written then.
    """
    from asp_cli.output import check_output_path, check_parquet_name
    from asp_cli.predict.streamed import read_and_predict
    from asp_cli.reading import read_lengths
    from asp_cli.reading.exported import refuse_exports_as_prompts
    from asp_cli.reading.history_ids import id_warnings, seed_warnings
    from asp_cli.reading.lengths import check_history_epochs, latest_epochs

    settings = settings or ScheduleSettings()
    if not isinstance(settings, ScheduleSettings):  # a dict of them raised "'dict' object has no attribute 'preset'"
        raise SettingsError(f"settings must be a ScheduleSettings (asp_cli.ScheduleSettings(instances=8, ...)), not "
                            f"{type(settings).__name__}")
    note = expect_callable(progress, "progress") or (lambda _msg: None)  # 5 was a TypeError from inside
    recorded = recorded_command_line(command_line)  # checked before any work
    if not isinstance(read, ReadOptions):  # None was an AttributeError (a hostile-input round)
        raise SettingsError(f"read must be a ReadOptions (asp_cli.ReadOptions(...)), not {type(read).__name__}")
    predictor = one_path(predictor, "predictor") if predictor is not None else None
    inputs = paths_of(inputs)
    history = paths_of(history)
    predictions = paths_of(predictions)
    read.check_length_keys_used(history, "--history")
    if predictions:
        from asp_cli.predict.predictions_file import expand_prediction_paths
        predictions = expand_prediction_paths(predictions)
    history_epochs = check_history_epochs(history_epochs)  # "1" was a TypeError after the history was read
    if history_epochs is not None and not history:
        raise SettingsError("--history-epochs keeps the last epochs of --history: give --history too, or leave it out")
    if predictions and (predictor is not None or history):
        raise SettingsError("--predictions replaces the predictor: give it without --predictor and --history")
    if output is not None:
        check_output_path(output, [*inputs, *history, *predictions, *([predictor] if predictor else [])],
                          force=force)
        check_parquet_name(output, writer="asp schedule", kind=b"asp.schedule")
    refuse_exports_as_prompts(inputs)  # asp's own output (one epoch's too): planned as prompts, exit 0, before
    preset = load_preset(settings.preset)
    history_frame = None
    history_print = None
    history_report = None
    if history:
        note("reading history")
        history_frame, history_report = read_lengths(history, read)
        if history_epochs is not None:
            history_frame = latest_epochs(history_frame, history_epochs, history)
        history_print = file_fingerprint(history)
    # Prompts are read a batch at a time and predicted per batch; only ids, rows and lengths are kept.
    note("reading prompts and predicting lengths")
    prompts, predicted, info, read_report = read_and_predict(
        inputs, read, predictor=predictor, predictions=predictions,
        predictions_fingerprint=file_fingerprint(predictions) if predictions else None,
        history=history_frame, history_fingerprint=history_print,
        samples_per_prompt=settings.samples_per_prompt, max_response_tokens=settings.max_response_tokens,
        plan_with=settings.plan_with,
    )
    note("packing and interleaving")
    # The arrangement reads ids and rows only: drop the metadata columns (the calibration has used them).
    sources = prompts.select(C.ROW, C.DATA_SOURCE) if C.DATA_SOURCE in prompts.columns else None
    prompts = prompts.select(C.ROW, C.PROMPT_ID)
    frame, choice = plan(prompts, predicted, settings, preset=preset)
    unnamed, id_hint = row_numbered(read_report)
    dropped = dropped_tail_warnings(frame, sources, settings)
    warnings = (_input_warnings(prompts, history_frame, settings, preset, unnamed, id_hint, list(history))
                + plan_warnings(frame, settings, partial_batch=not dropped))
    warnings.extend((source_warnings(frame, sources) if sources is not None else []) + dropped)
    if sources is not None and not predictions:
        from asp_cli.predict.prediction import lost_sources_warning

        warnings.extend(lost_sources_warning(predictor, sources[C.DATA_SOURCE],
                                             predicted[C.PREDICTION_SOURCE] == "model"))
    warnings.extend(info.warnings)  # a predictions file's prompt_tokens far from the text's (predict.predictions_file)
    del sources
    if read_report.empty_warning():
        warnings.insert(0, read_report.empty_warning())
    if history:  # the ids the history's logs were observed by, against this input's (reading.history_ids)
        warnings.extend(history_report.notes if history_report else [])
        read_report.settle()
        warnings.extend(id_warnings(list(history), read_report.fingerprints, read_report.columns_used))
        if not any("this schedule has --seed" in w for w in warnings):  # the epochs' check said it already
            numbered = (history_frame is not None and C.EPOCH in history_frame.columns
                        and history_frame[C.EPOCH].null_count() < history_frame.height)
            warnings.extend(seed_warnings(list(history), settings.seed,
                                          # most prompts: an epoch's log, not a probe's
                                          unnumbered_run=not numbered and info.prompts_from_history
                                          >= info.prompts_from_model))
    if unnamed and not info.prompts_from_history and not history:  # with a history, `unmatched_warnings` says it
        # verl's parquet keeps its own index in extra_info, which asp does not read as an id.
        warnings.append(f"{', '.join(unnamed[:3])} {'has' if len(unnamed) == 1 else 'have'} no id column, so each "
                        "prompt's id is its row number; history must use the same ids (`asp observe --schedule` "
                        "and `asp probe` do), or name the id column with --id-key"
                        + (f" (e.g. --id-key {id_hint}, which the rows hold)" if id_hint else
                           # verl's files each number extra_info.index from 0: --id-key of it repeats (E07, README)
                           "; over several files an index each numbers from 0 (verl's extra_info.index) repeats and "
                           "is no id: keep these files in this order for asp export and asp observe --dataset, or "
                           "give each row an id of its own" if len(unnamed) > 1 else ""))
    del prompts, predicted, history_frame  # every row is in the frame now: let them go before it is summed up
    summary = summarize(frame, settings, preset, choice)
    summary["skipped_rows"] = read_report.skipped_rows + (history_report.skipped_rows if history_report else 0)
    if summary["skipped_rows"]:  # a warning, so --quiet keeps it (a summary line, it went with the summary)
        examples = [*read_report.skipped_examples, *(history_report.skipped_examples if history_report else [])][:3]
        warnings.insert(0, f"skipped {counted(summary['skipped_rows'], 'bad row')} (--on-bad-row skip), e.g. "
                        + "; ".join(examples))
    summary["warnings"] = warnings
    calibration = info.details.get("history")
    if calibration and calibration.get("prompts_seen"):
        summary["calibration"] = calibration
        unseen = [c for c in calibration.get("sources") or [] if c.get("fitted") == "global"]
        if unseen and len(unseen) < len(calibration.get("sources") or []):
            names = ", ".join(repr(shown_name(c["data_source"])) if c.get("data_source") else "no source"
                              for c in unseen[:5])
            more = f" and {len(unseen) - 5} more" if len(unseen) > 5 else ""
            warnings.append(
                f"the history has no prompt of {len(unseen):,} data source(s) ({names}{more}): their "
                f"{sum(c.get('prompts_corrected', 0) for c in unseen):,} prompts get the global correction "
                f"(x{calibration['global']['factor']:.3g}), not their own; a probe of every source "
                "(`asp probe`) learns each one's"
            )
    else:
        calibration = None
    metadata = {
        "asp_version": __version__,
        "created_by": f"asp {__version__}",
        "format_version": "",
        "settings": settings.to_dict(),
        "preset": preset.to_dict(),
        "max_tokens_per_minibatch_used": minibatch_token_budget(settings, preset),
        "inputs": [{"name": p.name, "fingerprint": read_report.fingerprints[str(p)]} for p in inputs],
        "input_fingerprint": combine_fingerprints([read_report.fingerprints[str(p)] for p in inputs]),
        "predictor": {
            "name": info.predictor_name,
            "fingerprint": info.predictor_fingerprint,
            "history_fingerprint": info.history_fingerprint,
            "prompts_from_history": info.prompts_from_history,
            "prompts_from_model": info.prompts_from_model,
            **({"calibration": calibration} if calibration else {}),
            **({"history_epochs": history_epochs} if history and history_epochs is not None else {}),  # kept last
        },
        "arrangement": choice.to_dict(),
        "columns_used": read_report.columns_used,
        "skipped_rows": summary["skipped_rows"],
        "command_line": recorded,
        "summary": json_finite(summary),
    }
    metadata["format_version"] = format_version_for(metadata, frame)
    hints = id_hints(read_report)
    columns = {name: {**used, **hints.get(name, {})} for name, used in read_report.columns_used.items()}
    result = ScheduleResult(frame=frame, metadata=metadata, summary=summary, columns=columns)
    if output is not None:
        note("writing schedule")
        write_schedule(frame, metadata, Path(output), force=force)
        result.output = Path(output)
    return result





def _input_warnings(prompts: pl.DataFrame, history: pl.DataFrame | None, settings: ScheduleSettings,
                    preset: HardwarePreset, unnamed: list[str], id_hint: str | None,
                    history_paths: list[Path]) -> list[str]:
    """What is legal but probably not what the user meant: history that matches no prompt, a KV budget an engine
    ignores, a static plan without headroom, or a train batch larger than an epoch."""
    warnings = []
    cache, budget = max(preset.kv_capacity_tokens, 1), minibatch_token_budget(settings, preset)
    if settings.engine == "static" and budget > STATIC_HEADROOM * cache:
        warnings.append(
            f"--engine static cuts minibatches so their padded KV fits {budget:,} tokens ({budget / cache:.0%} of the "
            "KV cache) at the predicted lengths, but a batch's longest response usually runs past its largest "
            "predicted group maximum, and HF generate does not preempt: it runs out of memory. Leave headroom, e.g. "
            f"--max-tokens-per-minibatch {int(STATIC_HEADROOM * cache):,} (half the cache, the default there); asp "
            "simulate counts the padded batches over the cache")
    if history is not None and history.height:
        from asp_cli.reading.history_ids import epoch_seed_warnings, unmatched_warnings

        warnings.extend(unmatched_warnings(prompts[C.PROMPT_ID], history, unnamed=unnamed, id_hint=id_hint))
        # An OpenRLHF newcomer's epoch-by-epoch loop kept the default seed: every epoch the same train batches.
        warnings.extend(epoch_seed_warnings(history_paths, history, settings.seed, MAX_SETTING))
        over = int((history[C.RESPONSE_TOKENS] > settings.max_response_tokens).sum())
        if over:
            warnings.append(f"{counted(over, 'sample')} in --history {'is' if over == 1 else 'are'} longer than "
                            f"--max-response-tokens ({settings.max_response_tokens:,}), which no generation under this "
                            "schedule's cap reaches; was the history made with a larger cap? Check --max-response-tokens")
    warnings.extend(settings_warnings(settings))
    warnings.extend(filter(None, [oversized_batch_warning(settings, prompts.height)]))
    return warnings
