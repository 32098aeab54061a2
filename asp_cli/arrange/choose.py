"""`--arrangement auto`: try each candidate arrangement in asp's own simulator and keep the fastest.

The scheduler's closed-form estimates (`timeline`) price a plan under its point predictions; the real run
sees lengths spread around them, and a plan that wins on points can lose once a mispredicted long group lands
late. So each candidate is arranged and replayed (`asp_cli.sim.run.simulate_schedule`, the settings' engine,
lag bound, trainer order and dispatch; on servers, as verl routes: `asp_cli.sim.submit_all` for a synchronous
plan, `asp_cli.sim.verl_async` for an asynchronous one) on ``draws`` sets of lengths drawn from the predictive
distribution: per prompt a log-normal factor around the predicted mean (sigma `MODEL_SIGMA` for model
predictions, `HISTORY_SIGMA` for prompts seen in history) and per sample a log-normal spread whose sigma is
the prompt's own, read back from its predicted group maximum and mean (`sample_sigma`); where the candidates are timed
as verl routes an asynchronous trainer, with heavy tails and more draws (`SAMPLE_TAIL_DF`, `MAX_DRAW_REPEATS`).
The candidate with the lowest mean simulated end-to-end time wins,
except that an earlier candidate (interleave first: steadier arrival, steps closer to representative; on the
padded `static` engine long-first first) within `TIE_MARGIN` of it is kept, since a difference that small is inside the draws' own noise. Large inputs are judged on a seeded sample of prompts (`SAMPLE_PROMPTS`) and
one epoch, which keeps the cost a fixed few seconds; on engines that refill the sample is judged as a
miniature of the run, its instances and train batch cut with the prompts (`miniature_of`), and each replay is
scaled up to the whole run (`run_time`). The winner is then arranged on everything. On the `continuous`
engine with `--kv-budget auto`, where the minibatch KV budget binds, the candidates are judged with each group
counted whole against it, the winner again with each group counted at its share of its wave's expected peak,
and, if that is faster, every candidate cut so and the choice made among them (`kv_budgets_to_try`); the
choice says which cut was kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import SettingsError
from asp_cli.settings import STEP_LAYOUTS, ScheduleSettings

BLOCKING_CANDIDATES: tuple[str, ...] = ("interleave", "long-first", "short-first", "shuffle", "per-step")
# On engines that refill, `bands` (verl's chunks of a sorted epoch, the order users run there) comes first and wins a
# tie: the draws cannot tell it from the others within the tie margin where it is 1-6% faster on the true lengths
# (aime-k8-n8-b256 at lag 2; mix-k16-n16-b512 planned for servers that keep to its instances). Measured with
# `scripts/bench_choice_regret.py --modes streaming [--max-lag none] --tie-order bands,...` over 4 seeds of the 8
# benchmark workloads: regret summed 3.6% -> 2.9% at each workload's lag bound, 6.1% -> 5.5% without one
# (docs/benchmarks.md, "How well auto chooses").
STREAMING_CANDIDATES: tuple[str, ...] = ("bands", "interleave", "long-first", "short-first", "quick-start",
                                         "shuffle", "per-step")
# On the padded `static` engine a minibatch lasts as long as its longest sequence, and the draws' tails are
# lighter than real ones (a GSM8K group's true maximum is 6x its prediction one time in a hundred), so a plan
# that leaves long minibatches late pays for every long sequence it did not foresee. Longest first (LPT) is
# the robust order there and wins a tie. Measured over 4 seeds of the 8 benchmark workloads: interleave won a
# tie twice (AIME, mix-k8-n8) and was 2-5% slower than long-first on the true lengths both times; on the
# held-out chat workloads the order changes nothing (docs/benchmarks.md, "Other engines").
STATIC_CANDIDATES: tuple[str, ...] = ("long-first", "interleave", "short-first", "shuffle", "per-step")
SAMPLE_PROMPTS = 4096
# The engines whose sampled replays are scaled up to the run (`run_time`).
SCALED_ENGINES: tuple[str, ...] = ("streaming",)
# Gauss-Hermite nodes (in standard deviations) and weights for the common scale factor of every draw.
SCALE_NODES: tuple[tuple[float, float], ...] = ((-3**0.5, 1 / 6), (0.0, 2 / 3), (3**0.5, 1 / 6))
DRAWS = len(SCALE_NODES)
TIE_MARGIN = 0.005
# Within this expected difference from the candidate `shuffle`, on any engine, the summary says the order matters
# little: a saving that small is within what the benchmark's workload seeds move asp's gains by (standard
# deviations of 1-2% in docs/benchmarks.md), not one to plan a run around. (The tie margin above is smaller:
# it only settles which of two near-equal candidates to keep.)
ORDER_MATTERS_LITTLE = 0.02
# `--steps representative`: a candidate qualifies when its expected p90 step deviation is at most the
# shuffle's times 1.25, plus 0.02 (the draws' own noise on a few steps).
STEP_SLACK = 0.25
STEP_SLACK_ABSOLUTE = 0.02
# The summary says what `--steps representative` costs when the fastest other candidate is expected to be
# more than this much faster.
REPRESENTATIVE_COST_SHOWN = 0.05
# Besides the pick, the fastest candidates after it timed through the length-aware router plug-in: where the
# whole input makes auto fall back (`arrange_chosen`), the next fastest is all but always the one arranged.
LENGTH_AWARE_FALLBACKS = 2
# Prediction error on log length: the bundled model's typical error on unseen prompts (docs/predictor.md), and
# what is left once a prompt's own samples are known (the per-prompt mean correlates ~0.9 across epochs).
MODEL_SIGMA = 0.5
HISTORY_SIGMA = 0.25
# The common factor's sigma on log length: the bundled model alone does not know the user's policy (a reasoning
# model writes several times what a chat model does: docs/predictor.md); once history covers some prompts the
# correction fitted on them (`predict.history`) leaves much less; a prompt's own history least.
MODEL_SCALE_SIGMA = 0.5
CALIBRATED_SCALE_SIGMA = 0.2
HISTORY_SCALE_SIGMA = 0.1
DEFAULT_SAMPLE_SIGMA = 0.3  # the median within-group CV of 0.28 in the AIME R1-distill data
# A what-if, off: each group's spread drawn as its predicted sigma times a log-normal factor of this sigma (the
# predicted group maximum misses a group's true log-sd by 0.27-0.52 beyond sampling noise on the benchmark's
# workloads). At 0.35 it made `static` picks worse, regret summed over 8 workloads 6.0% -> 10.9%
# (`scripts/bench_choice_regret.py --spread-sigma`; docs/benchmarks.md, "How well auto chooses").
SPREAD_SIGMA = 0.0
# Where the candidates are timed as verl's asynchronous trainers route (engines that refill, a lag bound other than 0,
# groups taken in arrival order), each sample's deviation from its group is drawn from a Student t of this many
# degrees of freedom (scaled to unit sd), not a normal: real lengths are heavy-tailed (on the shared data's workloads a sample
# lies more than 3.5 sd above its group's mean 10-50 times as often as a normal's 0.02%; a t of 4 degrees gives
# 0.4%), and there a few samples far above their group's prediction, landing late, set the run's end: on the
# held-out chat workload the draws expected long-first 12-26% faster than a shuffle where it was 2-19% slower.
# Elsewhere the normal stays: on the blocking engines the t made picks worse (`static`: regret summed 6.0% -> 16.0%)
# or changed nothing (`continuous`; docs/benchmarks.md, "How well auto chooses, as verl routes"), and for synchronous
# steps on servers it understated the saving by 1.6-5.5 points where the normal overstates it by 1.1-5.0, picking
# worse on held-out chat (docs/benchmarks.md, "How far the expected gain holds").
SAMPLE_TAIL_DF = 4.0
# Heavy tails make each draw noisier, so there an input judged whole draws the scale nodes up to this many
# times (each repeat on its own random streams), as many as keep the judged prompt-epochs within one sample's.
MAX_DRAW_REPEATS = 4


@dataclass
class ArrangementChoice:
    """Which arrangement was used, and what each candidate was expected to take."""

    setting: str  # what the user asked for: auto or a name
    chosen: str
    engine: str
    candidates: list[dict[str, Any]] = field(default_factory=list)  # name, expected_end_to_end_s, step dev
    evaluated_prompts: int = 0
    draws: int = 0
    dispatch: str = "free"  # the dispatch the candidates were judged under (the settings')
    evaluated_epochs: int = 0
    steps: str = "any"  # "representative": only candidates whose steps are about a shuffle's were eligible
    # Judged on a sample: the prompt-epochs of the whole run its times were scaled up to (`run_time`); 0 when the
    # input was judged whole (and then left out of the document).
    run_prompt_epochs: int = 0
    # How the chosen arrangement's groups count against the minibatch KV budget ("peak" or "whole",
    # `ScheduleSettings.kv_budget`); with `--kv-budget auto` on a continuous engine, where the budget binds, the
    # candidates were judged counted whole (at the peak, one that cannot keep the lag bound whole), the winner both
    # ways, and all of them at the peak if it won.
    kv_budget: str = "peak"
    # Candidates tried before the chosen one that kept the lag bound where judged (a sample, or fewer epochs) but
    # not on the whole run (`arrange_chosen`), in the order tried; left out of the document when none.
    bound_broken_on_input: list[str] = field(default_factory=list)
    # Candidates that could not keep the lag bound where judged, so were not candidates; left out when none.
    refused: list[str] = field(default_factory=list)
    # Judged on a seeded sample of the prompts (`SAMPLE_PROMPTS`); left out of the document when judged whole.
    sampled: bool = False
    # Judged as a miniature of the run (`miniature_of`): its instances and train batch; 0 (and left out of the
    # document) otherwise.
    judged_instances: int = 0
    judged_train_batch_size: int = 0
    # With --steps representative, the most expected p90 step deviation an eligible candidate had (`step_bound`:
    # about a random arrangement's); 0 (and left out of the document) otherwise.
    step_deviation_bound: float = 0.0
    # With --steps any, where the chosen candidate's steps are not about as representative as a random
    # arrangement's: the fastest candidate whose steps are (its `name` and `kv_budget`, chosen by the same tie
    # rules) and that bound (`step_deviation_bound`), for the summary to say what representative steps would cost;
    # empty (and left out of the document) otherwise.
    representative_alternative: dict[str, Any] = field(default_factory=dict)
    # How the candidates on servers were timed: "verl", a synchronous plan, as verl routes a step
    # (`asp_cli.sim.submit_all`); "slime-async", so with each step's rollout while the step before trains (slime's
    # train_async.py; "openrlhf-async" for OpenRLHF's asynchronous trainer); "verl-async", as verl's asynchronous
    # trainers route (`asp_cli.sim.verl_async`);
    # "" (and left out of the document): the simulator's own replay.
    timed_as: str = ""
    # With "verl-async": the prompts in flight per server it was timed with (`ScheduleSettings.prompts_per_server`);
    # 0 (and left out of the document): as many as the servers' slots hold.
    prompts_per_server: int = 0
    # With "verl-async": the v1 mode of verl's main_ppo it was timed as (`ScheduleSettings.verl_trainer`,
    # colocate-async or separate-async); "" (and left out of the document): the fully asynchronous trainer.
    verl_trainer: str = ""
    # "cache-aware", "round-robin", "group-round-robin": timed as that router routes (`ScheduleSettings.router`);
    # "": verl's balancer.
    router: str = ""
    # With "slime-async" or "openrlhf-async": what each rollout holds (`ScheduleSettings.step_layout`), and the pick of the other layout,
    # judged too (`name`, `step_layout`, `expected_end_to_end_s`); "" and {} (left out of the document) otherwise.
    step_layout: str = ""
    other_layout: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        for key in ("timed_as", "verl_trainer", "router", "step_layout", "other_layout", "prompts_per_server",
                    "step_deviation_bound",
                    "representative_alternative", "sampled", "refused", "run_prompt_epochs", "bound_broken_on_input"):
            if not document[key]:  # left out where empty: files read as before the key existed
                del document[key]
        if not document["judged_instances"]:
            del document["judged_instances"], document["judged_train_batch_size"]
        mine = [c for c in self.candidates if _is(c, self.chosen, self.kv_budget)]
        chosen = mine[0]["expected_end_to_end_s"] if mine else None
        others = [c["expected_end_to_end_s"] for c in self.candidates
                  if c["name"] != self.chosen and c["name"] not in self.bound_broken_on_input]
        # How much faster the chosen arrangement is expected to be than the best other arrangement, under either
        # KV cut (negative when a candidate within the tie margin was faster; the chosen one cut the other way is
        # no other arrangement).
        document["expected_gain_over_next"] = (round(min(others) / chosen - 1.0, 4)
                                               if chosen and others else None)
        # Against the candidate `shuffle` (what a user runs anyway; the summary's line): the expected saving, and
        # the least and most of it over the draws of lengths, each draw replaying both (how sure it is).
        shuffle = next((c for c in self.candidates if _is(c, "shuffle", self.kv_budget)), None)
        usable = bool(shuffle and chosen and shuffle["expected_end_to_end_s"]
                      and "shuffle" not in self.bound_broken_on_input)
        document["expected_gain_over_shuffle"] = (gain_over(chosen, shuffle["expected_end_to_end_s"])
                                                  if usable else None)
        gains = gains_by_draw(mine[0], shuffle) if mine and usable else []
        if gains:
            document["gain_over_shuffle_by_draw"] = {"min": min(gains), "max": max(gains)}
        return document


    def expected_end_to_end_s(self) -> float | None:
        """The chosen candidate's expected end-to-end time (None for a named arrangement)."""
        mine = [c for c in self.candidates if _is(c, self.chosen, self.kv_budget)]
        return mine[0]["expected_end_to_end_s"] if mine else None

    def expected_rollout_s(self) -> float | None:
        """The chosen candidate's rollout alone under the draws, scaled up to the whole run where a sample or
        fewer epochs were judged (`run_rollout_s`; None for a named arrangement or older records): the point
        predictions' makespan misses every tail the spread adds (106 s against 240-400 s replayed on the
        sample data), so this is what says whether the trainer or rollout binds (without a lag bound: under one
        the replays' rollout waits for the trainer)."""
        mine = [c for c in self.candidates if _is(c, self.chosen, self.kv_budget)]
        return mine[0].get("expected_rollout_s") if mine else None


def gain_over(mine_s: float, theirs_s: float) -> float:
    """How much faster ``mine_s`` is than ``theirs_s`` (1 - mine / theirs; negative where slower), to four
    places: the figure `--json` and the schedule's metadata keep, and the one the summary line formats, so that
    the two never read 9.7% and 9.6% for one saving (`asp_cli.arrange.choice_summary`)."""
    return round(1.0 - mine_s / theirs_s, 4)


def gains_by_draw(mine: dict[str, Any], theirs: dict[str, Any]) -> list[float]:
    """`gain_over` of candidate ``mine`` over candidate ``theirs`` under each draw of lengths, in draw order;
    empty where either lacks `end_to_end_s_by_draw` (schedules before it), their draws differ in number, or
    one of ``theirs``' times is zero."""
    mine_s, theirs_s = mine.get("end_to_end_s_by_draw"), theirs.get("end_to_end_s_by_draw")
    if not mine_s or not theirs_s or len(mine_s) != len(theirs_s) or not all(theirs_s):
        return []
    return [gain_over(m, t) for m, t in zip(mine_s, theirs_s)]


def _is(candidate: dict[str, Any], name: str, kv_budget: str) -> bool:
    """Whether a candidate entry is arrangement ``name`` cut under ``kv_budget`` (entries before the budget: any)."""
    return candidate["name"] == name and candidate.get("kv_budget", kv_budget) == kv_budget


def kv_budgets_to_try(settings: ScheduleSettings, whole_footprint: np.ndarray, budget_tokens: int) -> tuple[str, ...]:
    """The KV accountings auto judges under: the first for every candidate, the second for the winner and, if it
    is faster cut that way, for every candidate again (`choose_arrangement`); both only where the choice is
    open and can matter.

    Only with ``--kv-budget auto`` on the `continuous` engine (static counts its minibatches padded; engines that refill
    cut no minibatches), and only where the whole-group count can bind at all (the ``minibatch_size`` largest
    groups exceed the budget: otherwise both cut the same minibatches) and fits one group per minibatch.
    Measured on the benchmark's workloads, neither accounting wins everywhere: the peak one's bigger long
    minibatches were 3-7.5% faster on four workloads and 2% slower on the trainer-bound mix-k16-n16
    (docs/benchmarks.md, "The KV budget").
    """
    resolved = settings.resolved_kv_budget()
    if settings.kv_budget != "auto" or settings.engine != "continuous" or whole_footprint.size == 0:
        return (resolved,)
    k = min(settings.minibatch_size, whole_footprint.size)
    largest = np.partition(whole_footprint, whole_footprint.size - k)[whole_footprint.size - k:]
    if int(whole_footprint.max()) > budget_tokens or int(largest.sum()) <= budget_tokens:
        return (resolved,)
    # The cut that never overflows the cache first: the other must beat it on the winner by the tie margin.
    return ("whole", "peak")


def sample_sigma(predicted_max: np.ndarray, predicted_mean: np.ndarray, samples: int,
                 cap: int | None = None) -> np.ndarray:
    """The within-group sigma of log length that the predicted group maximum and mean imply.

    The prediction is log-normal: ``max = exp(mu + sigma e_N)`` and ``mean = exp(mu + sigma^2 / 2)`` with
    ``e_N`` the expected maximum of N standard normals, so ``log(max / mean) = sigma e_N - sigma^2 / 2``; the
    smaller root is sigma. One sample per group says nothing about the spread: `DEFAULT_SAMPLE_SIGMA` then.

    With ``cap`` (the response cap the predictions were clipped to), a maximum at the cap is a clipped one, and
    the ratio it gives only a lower bound: such a group gets at least the median sigma of the groups below the
    cap (`DEFAULT_SAMPLE_SIGMA` when there are none). Without it, long-reasoning prompts predicted near the cap
    were drawn with every sample at the cap (a spread of 0.05-0.1), where their real samples spread as widely
    as the others' and some end far below it (docs/benchmarks.md, "With a trainer that does not bind").
    """
    from asp_cli.predict.targets import expected_max_z

    if samples < 2:
        return np.full(np.asarray(predicted_max).size, DEFAULT_SAMPLE_SIGMA)
    e = float(expected_max_z(samples))
    ratio = np.log(np.maximum(np.asarray(predicted_max, dtype=np.float64), 1.0)
                   / np.maximum(np.asarray(predicted_mean, dtype=np.float64), 1.0))
    sigma = np.clip(e - np.sqrt(np.maximum(e * e - 2.0 * np.maximum(ratio, 0.0), 0.0)), 0.05, 2.0)
    if cap is not None:
        clipped = np.asarray(predicted_max) >= cap
        if clipped.any():
            below = sigma[~clipped]
            typical = float(np.median(below)) if below.size else DEFAULT_SAMPLE_SIGMA
            sigma = np.where(clipped, np.maximum(sigma, typical), sigma)
    return sigma


def sample_deviations(rng: np.random.Generator, size: tuple[int, int], tailed: bool) -> np.ndarray:
    """Each sample's deviation of log length from its group's, in units of the group's sigma: standard normal, or
    with ``tailed`` a Student t of `SAMPLE_TAIL_DF` degrees of freedom scaled to unit sd (the same spread, far more
    samples several sigma out)."""
    if not tailed:
        return rng.normal(0.0, 1.0, size)
    return rng.standard_t(SAMPLE_TAIL_DF, size) * math.sqrt((SAMPLE_TAIL_DF - 2) / SAMPLE_TAIL_DF)


def candidates_for(engine: str) -> tuple[str, ...]:
    """The engine's candidates, in the order that breaks a tie (the earliest within `TIE_MARGIN` wins)."""
    return {"streaming": STREAMING_CANDIDATES, "static": STATIC_CANDIDATES}.get(engine, BLOCKING_CANDIDATES)


def choose_arrangement(
    arrange: Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings, HardwarePreset], pl.DataFrame],
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    preset: HardwarePreset,
    *,
    budget_tokens: int | None = None,
) -> ArrangementChoice:
    """Evaluate every candidate of the settings' engine under lengths drawn from the predictions.

    ``arrange(prompts, predictions, settings, preset)`` makes one candidate's frame (the caller's
    `asp_cli.arrange.pipeline.arrange`, passed in so that this module stays below it). ``budget_tokens`` is the
    minibatch KV budget (`pipeline.minibatch_token_budget`); given, each candidate is also judged under the
    other KV accounting where that can matter (`kv_budgets_to_try`).
    """
    if settings.slime_async and settings.step_layout is None:
        # slime's train_async.py: both layouts of its rollouts judged, each a whole choice, and the one whose pick
        # is expected faster by more than the tie margin kept (else `batches`, each rollout one consecutive train
        # batch: sorted batches won by 6-12% where rollout binds, the lag bound's layout by 11% on aime-k8-n8-b256
        # where training takes about as long: docs/benchmarks.md, "As slime's asynchronous trainer runs").
        both = [choose_arrangement(arrange, prompts, predictions, dataclasses.replace(settings, step_layout=layout),
                                   preset, budget_tokens=budget_tokens) for layout in STEP_LAYOUTS]
        times = [c.expected_end_to_end_s() or math.inf for c in both]
        kept, other = (1, 0) if times[1] < times[0] * (1.0 - TIE_MARGIN) else (0, 1)
        return dataclasses.replace(both[kept], other_layout={
            "name": both[other].chosen, "step_layout": both[other].step_layout,
            "expected_end_to_end_s": both[other].expected_end_to_end_s()})
    from asp_cli.arrange.scaling import async_rollout_s, async_run_time, miniature_of, run_rollout_s, run_time
    from asp_cli.arrange.timeline import group_tokens

    from asp_cli.sim.metrics import minibatch_padding, random_step_deviation_p90, step_length_ratio
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_schedule
    from asp_cli.sim.submit_all import replay_frame
    from asp_cli.sim.verl_async import replay_async_frame

    sampled = prompts.height > SAMPLE_PROMPTS
    run_prompts = prompts.height * settings.epochs
    # On engines that refill, a sample is judged as a miniature of the run (`miniature_of`), its times scaled up
    # to the run (`run_time` says why only there).
    scaled = sampled and settings.engine in SCALED_ENGINES
    # The miniature is of one epoch (the sample is judged on one): its instances and train batch are cut by the
    # sample's share of an epoch, and its replay is scaled up by the epochs and by what rounding and the slice's
    # floor left it larger than that share.
    small = (miniature_of(settings, preset, SAMPLE_PROMPTS, prompts.height,
                          int(predictions[C.PROMPT_TOKENS].max()) + settings.max_response_tokens)
             if scaled else None)
    scale = run_prompts * small.capacity_fraction / SAMPLE_PROMPTS if small is not None else 1.0
    # Which KV accountings to judge under is settled on the whole input: a group too large to be cut whole
    # that the sample happened to miss would otherwise leave a whole cut that the full input cannot take.
    whole = np.ceil(group_tokens(settings.samples_per_prompt, predictions[C.PROMPT_TOKENS].to_numpy(),
                                 predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)))
    budgets = (kv_budgets_to_try(settings, whole, budget_tokens) if budget_tokens is not None
               else (settings.resolved_kv_budget(),))
    del whole
    if sampled:
        keep = np.sort(np.random.default_rng([settings.seed, 29]).choice(prompts.height, SAMPLE_PROMPTS,
                                                                         replace=False))
        prompts, predictions = prompts[keep], predictions[keep]
    # As many epochs as fit the sample's budget: where an epoch is only a few train steps, how one epoch's tail
    # meets the next one's head decides the order (each epoch's first train batch starts on the last one's).
    # An input that fits the sample whole is judged over at least two epochs when the run has them: judged on
    # one epoch, the 2-epoch mixes of docs/benchmarks.md (2,636 prompts) picked orders 4-7% slower on engines
    # that refill than the best candidate ("How well auto chooses").
    epochs = SAMPLE_PROMPTS // max(prompts.height, 1)
    trial = dataclasses.replace(settings, epochs=max(1, min(settings.epochs, epochs if sampled else max(epochs, 2))))
    judged_preset = preset
    if small is not None:
        trial = dataclasses.replace(trial, instances=small.instances, train_batch_size=small.train_batch_size)
        judged_preset = small.preset
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    from_history = (predictions[C.PREDICTION_SOURCE] == "history").to_numpy()
    sim = SimulationSettings(samples_per_prompt=settings.samples_per_prompt,
                             train_batch_size=trial.train_batch_size, mode=settings.engine,  # type: ignore[arg-type]
                             dispatch=settings.dispatch, max_lag=settings.max_lag,  # type: ignore[arg-type]
                             trainer=settings.trainer)  # type: ignore[arg-type]
    top = predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64)
    n = settings.samples_per_prompt
    spread = sample_sigma(top, mean, n, cap=settings.max_response_tokens)
    prompt_sigma = np.where(from_history, HISTORY_SIGMA, MODEL_SIGMA)
    # The model's error is mostly shared (a policy that writes twice as much as the model thinks writes twice
    # as much on every prompt), so each draw also scales every prompt by one common factor, at the nodes of a
    # three-point Gauss-Hermite rule (log factor -sqrt(3) s, 0, +sqrt(3) s; weights 1/6, 2/3, 1/6): the
    # expected time then weighs a run much longer than predicted as a real possibility.
    scale_sigma = np.where(from_history, HISTORY_SCALE_SIGMA,
                           MODEL_SCALE_SIGMA if not from_history.any() else CALIBRATED_SCALE_SIGMA)
    # Synchronous training on servers, or slime's train_async.py (each rollout while the step before trains).
    verl_routed = settings.engine == "streaming" and (settings.max_lag == 0 or settings.slime_async)
    # Asynchronous training on servers, the trainer taking finished groups in arrival order: timed as verl's
    # asynchronous trainers route (`asp_cli.sim.verl_async`: every sample placed at submission by count, each group
    # spread over the servers), not as the simulator routes (whole groups to whichever server frees first), which
    # had auto pick `bands` on mix-k16-n16-b512 at lag 2, 12.1% slower as verl routes (docs/benchmarks.md, "As verl
    # routes an asynchronous trainer"). A trainer that follows the schedule (`--trainer schedule`) is not modelled
    # there and keeps the simulator's replay. verl's v1 modes (`--verl-trainer`) are timed so too, not with asp's
    # replay buffer (`--trainer schedule`: timed following the schedule's steps, auto took `bands` on the sample
    # data, 5% slower in colocate_async than the shuffle it keeps: docs/benchmarks.md, "As verl's v1 trainer ...").
    v1 = (settings.verl_v1_mode if settings.trainer == "arrival" else None) or ""
    verl_async = settings.engine == "streaming" and settings.max_lag != 0 and settings.trainer == "arrival"
    v1_replay = {"v1_mode": v1.replace("-", "_") or None}
    # `--router` cache-aware (slime's) keeps a group's samples on one server, round-robin (AReaL's SPMD mode) deals
    # them in turn, group-round-robin (OpenRLHF's, and AReaL's controller's) deals whole groups in turn, where verl's
    # balancer (None) sends each to the least loaded: timed so (docs/benchmarks.md).
    routing = settings.other_router
    # There the draws are heavy-tailed and repeated: see `SAMPLE_TAIL_DF`.
    repeats = (min(MAX_DRAW_REPEATS, max(1, SAMPLE_PROMPTS // max(prompts.height * trial.epochs, 1))) if verl_async
               else 1)
    draws = []
    for rep, (d, (node, _)) in ((r, dn) for r in range(repeats) for dn in enumerate(SCALE_NODES)):
        rng = np.random.default_rng([settings.seed, 31, d] if rep == 0 else [settings.seed, 31, d, rep])
        prompt_factor = np.exp(rng.normal(0.0, prompt_sigma) - prompt_sigma**2 / 2 + node * scale_sigma)
        own = spread
        if SPREAD_SIGMA > 0:  # a stream of its own: the other draws stay as they were
            own = spread * np.exp(np.random.default_rng([settings.seed, 37, d]).normal(0.0, SPREAD_SIGMA, mean.size)
                                  - SPREAD_SIGMA**2 / 2)
        sample_factor = np.exp(sample_deviations(rng, (mean.size, n), verl_async) * own[:, None] - own[:, None] ** 2 / 2)
        lengths = np.maximum(mean, 1.0)[:, None] * prompt_factor[:, None] * sample_factor
        draws.append(np.clip(np.rint(lengths), 1, settings.max_response_tokens).astype(np.int64))
    weights = np.array([w for _ in range(repeats) for _, w in SCALE_NODES]) / repeats
    # Random arrangements' step deviation: the bound of `--steps representative`, and under `any` what the summary
    # holds the pick's steps to (`representative_alternative`).
    random_deviation = float(weights @ [random_step_deviation_p90(
        d.sum(axis=1), n, trial.train_batch_size, trial.epochs, settings.seed) for d in draws])
    # The run's prompt-epochs per the judged ones, for every engine: what the rollout alone is scaled up by (a
    # miniature's rollout by what its times are).
    rollout_scale = (scale if small is not None else
                     run_prompts / (prompts.height * trial.epochs) if prompts.height else 1.0)
    position_of_row = {r: i for i, r in enumerate(prompts[C.ROW].to_list())}
    refused: list[SettingsError] = []
    # verl's rollouter limit, over the servers judged: a miniature's instances are slices of the run's
    # (`instance_slice`), so it keeps the run's prompts in flight per instance-equivalent (its slots' share), not
    # per miniature instance: on a 0.4 slice, 16 per instance would leave the limit slack where the run's binds.
    in_flight = (None if settings.prompts_per_server is None else
                 settings.prompts_per_server * trial.instances if small is None else
                 max(1, round(settings.prompts_per_server * settings.instances * small.capacity_fraction)))

    judged_frames: dict[tuple[str, str], tuple[pl.DataFrame, np.ndarray]] = {}

    def judge(name: str, kv_budget: str) -> dict[str, Any] | None:
        """One candidate's expected times and step deviation over the draws; None if it cannot keep the bound."""
        try:
            named = dataclasses.replace(trial, arrangement=name).with_kv_cut(kv_budget)
            frame = arrange(prompts, predictions, named, judged_preset).sort("seq")
        except SettingsError as exc:  # this order cannot keep the lag bound: not a candidate
            refused.append(exc)
            return None
        index = np.fromiter((position_of_row[r] for r in frame[C.ROW].to_list()), dtype=np.int64,
                            count=frame.height)
        judged_frames[(name, kv_budget)] = (frame, index)
        times, deviations, rollouts = [], [], []
        minibatch = frame["minibatch"].to_numpy()  # padding under each draw, as the summary's at the predictions
        padding = [minibatch_padding(minibatch, truth[index].max(axis=1)) for truth in draws]

        def as_verl_routes(truth: np.ndarray, dispatch: str) -> tuple[float, float]:
            # A synchronous step on servers is timed as verl routes it (every sample at submission, each group
            # spread over the servers: `submit_all`), not as the replay routes whole groups; a step's time does
            # not overlap the next, so the run's is the judged steps' scaled (docs/benchmarks.md, "As verl routes").
            # With it the rollout alone, its steps' slowest servers (from the simulator's replay it could exceed
            # the end-to-end time it is part of: a newcomer read 692 s of rollout in 674 s).
            replay = replay_frame(frame, truth, judged_preset, instances=trial.instances, seed=settings.seed,
                                  train_batch_size=trial.train_batch_size, dispatch=dispatch, routing=routing,
                                  one_step_off=settings.slime_async)
            return scale * replay.end_to_end_s, scale * float(replay.rollout_s.sum())
        def as_verl_async(truth: np.ndarray, dispatch: str):
            return replay_async_frame(frame, truth, judged_preset, instances=trial.instances,
                                      train_batch_size=trial.train_batch_size, max_lag=sim.max_lag,
                                      dispatch=dispatch, prompts_in_flight=in_flight, seed=settings.seed,
                                      routing=routing, **v1_replay)
        for truth in draws:
            if verl_async:
                replay = as_verl_async(truth[index], sim.dispatch)
                times.append(async_run_time(replay, scale))
                ratio = step_length_ratio(replay.group_step, truth[index].sum(axis=1), n, replay.step_end_s.size)
                deviations.append(float(np.quantile(np.abs(ratio - 1.0), 0.9)))
                rollouts.append(async_rollout_s(replay, rollout_scale))
                continue
            result = simulate_schedule(frame, truth[index], judged_preset, sim, instances=trial.instances)
            if verl_routed:
                end_to_end, rollout = as_verl_routes(truth[index], sim.dispatch)
                times.append(end_to_end)
                rollouts.append(rollout)
            else:
                times.append(run_time(result, scale))
                rollouts.append(run_rollout_s(result, rollout_scale))
            deviations.append(result.metrics["step_length_deviation_p90"])
        return {"name": name, "kv_budget": kv_budget, "expected_end_to_end_s": round(float(weights @ times), 3),
                # Each draw's own time (at the scale nodes' order): how much the lengths' uncertainty moves it.
                "end_to_end_s_by_draw": [round(float(t), 3) for t in times],
                "expected_step_deviation_p90": round(float(weights @ deviations), 4),
                # The replays' rollout alone, scaled up to the whole run where a sample or fewer epochs were
                # judged (`run_rollout_s`): whether the trainer or rollout binds.
                "expected_rollout_s": round(float(weights @ rollouts), 3),
                "expected_padding_fraction": round(float(weights @ padding), 4)}

    def step_bound(judged: list[dict[str, Any]]) -> float:
        """The most step deviation a candidate of this set may have with `--steps representative`: about a
        random arrangement's. A trainer that follows the schedule trains the steps it is given: what random
        arrangements' steps have on average. One that takes groups in arrival order: its shuffle's in that
        order, or that average, whichever is more (arrival mixes even a shuffle's steps)."""
        # In arrival order, where the shuffle cannot keep the lag bound, per-step (a shuffle's own train batches,
        # each packed) is the reference; without either, the average alone (before 2026-12-05 every candidate
        # then counted as representative, a length curriculum included). Following the schedule, the shuffle's
        # steps are stratified by its minibatches' classes, and a shuffled minibatch mixes lengths: they came out
        # a curriculum (p90 1.13 against 0.25), and a bound of theirs admitted short-first (a review, 2026-12-05).
        shuffle = next((r for r in judged if r["name"] == "shuffle"),
                       next((r for r in judged if r["name"] == "per-step"), None))
        own = shuffle["expected_step_deviation_p90"] if shuffle is not None and settings.trainer != "schedule" else 0.0
        reference = max(own, random_deviation)
        return reference * (1.0 + STEP_SLACK) + STEP_SLACK_ABSOLUTE

    def pick(judged: list[dict[str, Any]], representative: bool = settings.steps == "representative") -> dict[str, Any]:
        """The earliest eligible candidate within the tie margin of the fastest eligible one (with `--steps
        representative`, marking each: eligible when its steps are about as representative as a shuffle's;
        ``representative`` alone holds the choice to that bound and marks nothing)."""
        bound = step_bound(judged) if representative else np.inf
        # None about as representative (shuffle and per-step refused, the rest length curricula): the one closest.
        eligible = ([r for r in judged if r["expected_step_deviation_p90"] <= bound]
                    or [min(judged, key=lambda r: r["expected_step_deviation_p90"])])
        if settings.steps == "representative":
            for r in judged:
                r["representative_steps"] = bool(r["expected_step_deviation_p90"] <= bound)
        fastest = min(r["expected_end_to_end_s"] for r in eligible)
        chosen = next(r for r in eligible if r["expected_end_to_end_s"] <= fastest * (1.0 + TIE_MARGIN))
        return keep_the_shuffle(chosen, eligible) if verl_async or verl_routed else chosen

    def first_judged(name: str) -> dict[str, Any] | None:
        # A candidate that cannot keep the bound counted whole may keep it at the peak (its long minibatches
        # larger, fewer steps behind): judged so, it stays a candidate. Before, synchronous runs (`--max-lag 0`)
        # lost every sort and the shuffle this way and kept per-step, 10% slower than verl's own default.
        return next((r for r in (judge(name, b) for b in budgets) if r is not None), None)

    results = [r for r in (first_judged(name) for name in candidates_for(settings.engine)) if r is not None]
    if not results:
        raise refused[0]
    chosen = pick(results)
    chosen_from = list(results)  # the set the choice was made in, whose shuffle the steps were held to
    if len(budgets) > 1 and chosen["kv_budget"] == budgets[0]:
        # How to cut is settled on the winner alone: cut the other way (each group counted at its share of the
        # wave's peak), is it expected faster by more than the tie margin? Only then are the other arrangements
        # judged cut that way, and the choice made among them. Judging all ten both ways at once picked the one
        # the draws flattered most: on mix-k8-n8 with a trainer that follows the schedule, short-first at the
        # peak, expected 7% faster than the old pick (per-step) and 2.5% slower on the true lengths; keeping the
        # winner's arrangement and changing only its cut left aime-k8-n8-b256 1% behind long-first in the same
        # sizes (docs/benchmarks.md, "The KV budget").
        alternative = judge(chosen["name"], budgets[1])
        if alternative is not None:
            if alternative["expected_end_to_end_s"] < chosen["expected_end_to_end_s"] * (1.0 - TIE_MARGIN):
                at_second = {r["name"]: r for r in results if r["kv_budget"] == budgets[1]}
                others = (at_second.get(name) or judge(name, budgets[1]) for name in candidates_for(settings.engine)
                          if name != chosen["name"])
                second = sorted([alternative, *(r for r in others if r is not None)],
                                key=lambda r: candidates_for(settings.engine).index(r["name"]))
                results.extend(r for r in second if not any(r is q for q in results))
                chosen, chosen_from = pick(second), second
            else:
                results.append(alternative)
    # Every candidate marked against the bound the choice was held to, the one said (`step_deviation_bound`):
    # after a choice among the other cut's set, the first set's marks and bound were its own shuffle's.
    bound = step_bound(chosen_from)
    if settings.steps == "representative":
        for r in results:
            r["representative_steps"] = bool(r["expected_step_deviation_p90"] <= bound)
    alternative: dict[str, Any] = {}
    if settings.steps == "any" and chosen["expected_step_deviation_p90"] > bound and any(
            r["expected_step_deviation_p90"] <= bound for r in chosen_from):
        # The default takes the fastest whatever its steps: what representative ones would cost is said beside it
        # (by default a length curriculum where a sort wins: README, "What it saves, measured").
        other = pick(chosen_from, representative=True)
        alternative = {"name": other["name"], "kv_budget": other["kv_budget"],
                       "step_deviation_bound": round(float(bound), 4)}
    # The pick and its first fallbacks (`fallbacks`' order) under the other dispatch and, timed as verl routes,
    # through the length-aware router plug-in (`+data.asp_route=length`), said where they pay. Until 2026-12-06
    # every candidate's other dispatch: twice the choice's cost on engines that refill (80-95 s of CPU).
    other_sim = dataclasses.replace(sim, dispatch="planned" if settings.dispatch == "free" else "free")

    def expected(frame: pl.DataFrame, index: np.ndarray, **how: Any) -> float:
        times = []
        for truth in draws:
            if verl_async:
                times.append(async_run_time(replay_async_frame(
                    frame, truth[index], judged_preset, instances=trial.instances,
                    train_batch_size=trial.train_batch_size, max_lag=sim.max_lag, prompts_in_flight=in_flight,
                    seed=settings.seed, **v1_replay, **how), scale))
            elif verl_routed:
                times.append(scale * replay_frame(frame, truth[index], judged_preset, instances=trial.instances,
                                                  seed=settings.seed, train_batch_size=trial.train_batch_size,
                                                  **how).end_to_end_s)
            else:  # the other dispatch alone
                times.append(run_time(simulate_schedule(frame, truth[index], judged_preset, other_sim,
                                                        instances=trial.instances), scale))
        return round(float(weights @ times), 3)

    following = sorted((r for r in results if r is not chosen and r.get("representative_steps") is not False),
                       key=lambda r: r["expected_end_to_end_s"])
    # Under sglang-router (`--router cache-aware`) neither of asp's verl plug-ins can run: nothing to say.
    for r in [chosen, *following[:LENGTH_AWARE_FALLBACKS]] if routing is None else []:
        frame, index = judged_frames[(r["name"], r["kv_budget"])]
        r[f"expected_end_to_end_s_{other_sim.dispatch}_dispatch"] = expected(frame, index,
                                                                             dispatch=other_sim.dispatch)
        if verl_routed or verl_async:
            r["expected_end_to_end_s_length_aware_route"] = expected(frame, index, routing="length-aware",
                                                                     predicted_tokens=mean[index])
    return ArrangementChoice("auto", chosen["name"], settings.engine, results, prompts.height, len(draws),
                             settings.dispatch, trial.epochs, settings.steps, run_prompts if scaled else 0,
                             chosen["kv_budget"], sampled=sampled,
                             judged_instances=small.instances if small is not None else 0,
                             judged_train_batch_size=small.train_batch_size if small is not None else 0,
                             step_deviation_bound=round(float(bound), 4)
                             if settings.steps == "representative" else 0.0,
                             representative_alternative=alternative,
                             refused=[n for n in candidates_for(settings.engine)
                                      if n not in {r["name"] for r in results}],
                             timed_as=(("openrlhf-async" if routing == "group-round-robin" else "slime-async")
                                       if settings.slime_async else "verl" if verl_routed
                                       else "verl-async" if verl_async else ""),
                             prompts_per_server=settings.prompts_per_server or 0 if verl_async else 0,
                             verl_trainer=v1, router=routing or "", step_layout=settings.step_layout or "")


def keep_the_shuffle(chosen: dict[str, Any], eligible: list[dict[str, Any]]) -> dict[str, Any]:
    """The candidate `shuffle` (verl's own order) where it is eligible and ``chosen`` is not expected faster than it
    by more than the tie margin: an order that changes what the trainer sees (a length curriculum, most of them)
    for a saving the draws cannot tell from none is not worth it. Used where candidates are timed as verl routes an
    asynchronous trainer: on the records of `scripts/bench_choice_verl.py` it matched or bettered the plain tie rule
    on every set, where a 1% or 2% margin gave up more than it saved (docs/benchmarks.md, "How well auto chooses, as
    verl routes", has the figures). And since 2026-12-07 where they are timed as a synchronous step is routed on
    servers (`--max-lag 0`, and slime's one-step-off trainer): `python scripts/bench_sync.py --mode verl` gave the
    same means, AIME's pick now verl's shuffle on every seed (1.000 +- 0.000, before +- 0.003; docs/benchmarks.md,
    "As verl routes: a train batch routed at submission")."""
    shuffle = next((r for r in eligible if r["name"] == "shuffle"), None)
    if shuffle is None or chosen is shuffle:
        return chosen
    return shuffle if chosen["expected_end_to_end_s"] > shuffle["expected_end_to_end_s"] * (1.0 - TIE_MARGIN) \
        else chosen


def fallbacks(choice: ArrangementChoice, *, include_chosen: bool = False) -> list[tuple[str, str]]:
    """The candidates to arrange (name and KV cut), fastest expected first, should the chosen one fail to keep the
    lag bound on the whole input where it kept it when judged (`arrange_chosen`): every other one, and with
    ``include_chosen`` the chosen arrangement under its other cut; with `--steps representative` only those
    eligible."""
    eligible = [c for c in choice.candidates if c.get("representative_steps") is not False
                and (c["name"] != choice.chosen
                     or include_chosen and c.get("kv_budget", choice.kv_budget) != choice.kv_budget)]
    return [(c["name"], c.get("kv_budget", choice.kv_budget))
            for c in sorted(eligible, key=lambda c: c["expected_end_to_end_s"])]


def arrange_chosen(
    arrange: Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings, HardwarePreset], pl.DataFrame],
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    preset: HardwarePreset,
    choice: ArrangementChoice,
) -> tuple[pl.DataFrame, ArrangementChoice]:
    """The frame of ``choice``'s arrangement on the whole input, and the choice as it stands.

    Judged on a sample, auto's winner can keep the lag bound there and not on the whole input (a long group the
    sample missed): then the next fastest candidate that keeps it is arranged, and the choice says which did not
    (`ArrangementChoice.bound_broken_on_input`). A named arrangement that cannot keep it is the error.
    """
    from asp_cli.errors import LagBoundError

    try:
        settings = dataclasses.replace(settings, step_layout=choice.step_layout or settings.step_layout)
        return arrange(prompts, predictions, dataclasses.replace(settings, arrangement=choice.chosen)
                       .with_kv_cut(choice.kv_budget), preset), choice
    except LagBoundError:
        if choice.setting != "auto":
            raise
        broken = [choice.chosen]
        # Every candidate judged, under each cut it was judged with (the chosen one's other cut too: other
        # minibatches, which may keep the bound), fastest expected first.
        for name, kv_cut in fallbacks(choice, include_chosen=True):
            try:
                frame = arrange(prompts, predictions, dataclasses.replace(settings, arrangement=name)
                                .with_kv_cut(kv_cut), preset)
            except LagBoundError:
                broken += [name] if name not in broken else []
                continue
            return frame, dataclasses.replace(choice, chosen=name, kv_budget=kv_cut,
                                              bound_broken_on_input=[b for b in broken if b != name])
        raise
