"""Side-by-side comparison of arrangements on the same prompts and lengths, and the benchmark workloads.

`compare` replays today's arrangements (`asp_cli.bench.baselines`), asp's own (`asp_cli.arrange.pipeline.arrange` with a
real prediction), asp given the true lengths (the scheduling ceiling) and the lower bound, all on the same
true lengths, and returns one row per arrangement. `build_workload` makes the benchmark workloads of
docs/benchmarks.md from real length data: what may ship ships inside the package, the rest is read at run
time from a ``--data`` folder (`asp_cli.bench.data`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, SettingsError
from asp_cli.costmodel import HardwarePreset
from asp_cli.predict.features import BYTES_PER_TOKEN
from asp_cli.settings import ScheduleSettings, check_lag, one_step_off, replayed_owner, router_owner
from asp_cli.bench.partial import partial_step, routed_partial_step
from asp_cli.sim.records import SimulationSettings
from asp_cli.sim.run import simulate_schedule

# ZeroEval stores characters; 3.12 characters per token is the ratio over all AIME R1-distill outputs
# (the same constant as scripts/eval_predictor.py).
CHARS_PER_TOKEN = 3.12
ZEROEVAL_EXCLUDED = ("openai/o1-mini-2024-09-12", "openai/o1-preview-2024-09-12")
# AlpacaEval stores characters of English chat: about 4 per token, the predictor's own rule of thumb
# (`BYTES_PER_TOKEN`). Its deliberate length variants are not real policies.
ALPACA_CHARS_PER_TOKEN = BYTES_PER_TOKEN
ALPACA_VARIANTS = r"(?i)_concise|_verbose|NullModel|gamed"

ASP = "asp"
ASP_TRUE = "asp (true lengths)"
ASP_PINNED = "asp, planned instances"  # the same schedule with each minibatch kept on its planned instance
LOWER_BOUND = "lower bound"


@dataclass
class Workload:
    """Prompts, a real prediction for them, and the true lengths the arrangements are judged on."""

    name: str
    description: str
    prompts: pl.DataFrame  # row, prompt_id, prompt_text, ...
    predictions: pl.DataFrame  # aligned with prompts (predict_lengths' columns)
    truth: np.ndarray  # (prompts, samples_per_prompt) true lengths
    settings: ScheduleSettings
    predictor: str = ""
    notes: list[str] = field(default_factory=list)


def true_predictions(truth: np.ndarray, prompt_tokens: np.ndarray, plan_with: str = "max") -> pl.DataFrame:
    """A predictions frame that knows the true group maximum and mean (for the "true lengths" ceiling)."""
    top = truth.max(axis=1).astype(np.int64)
    mean = np.rint(truth.mean(axis=1)).astype(np.int64)
    return pl.DataFrame(
        {
            C.PROMPT_TOKENS: pl.Series(np.asarray(prompt_tokens, dtype=np.int64)),
            C.PREDICTED_MAX_TOKENS: pl.Series(top),
            C.PREDICTED_MEAN_TOKENS: pl.Series(mean),
            C.PREDICTED_TOKENS: pl.Series(top if plan_with == "max" else mean),
            C.PREDICTION_SOURCE: pl.Series(["truth"] * top.size, dtype=pl.String),
        }
    )


def compare(
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    truth: np.ndarray,
    settings: ScheduleSettings,
    preset: HardwarePreset,
    *,
    mode: str = "continuous",
    max_lag: int | float | None = None,
    asp_frame: pl.DataFrame | None = None,
    include: tuple[str, ...] | None = None,
    progress=None,
    truth_by_epoch: dict[int, np.ndarray] | None = None,
    kv_cut: str | None = None,
    router: str | None = None,
) -> list[dict]:
    """Simulate every arrangement on the same true lengths; one dict per row, the lower bound last.

    ``truth`` is aligned with ``prompts`` (row ``i`` of the prompts is ``truth[i]``), the same lengths in every
    epoch; ``truth_by_epoch``, when given, has each epoch's own (aligned the same way; an epoch it lacks
    replays ``truth``), so that `asp simulate --compare` replays every row on the very lengths of its main
    replay, which draws each epoch's samples afresh. ``asp_frame`` replaces
    the asp row's arrangement (``asp simulate --compare`` passes the schedule being judged). Only the
    baselines made for ``mode``'s kind of engine run (`asp_cli.bench.baselines.Baseline.modes`). Each row
    says whether it is on equal footing with asp (``equal_footing``) and how many prompts it sends per
    ``generate()`` call on average (``prompts_per_call``). ``progress``, when given, is told
    "replaying i/n: NAME" before each replay. The baselines in asp's sizes are cut as asp's minibatches were:
    ``kv_cut`` (`settings.KV_CUTS`; with ``asp_frame``, the schedule's `Schedule.kv_budget`), else as asp's
    own plan for ``mode`` chose. ``router`` routes every row on servers where ``settings`` lacks it (a schedule's
    --router that this replay's lag bound or trainer dropped from them: `ScheduleSettings.replayed_as`).
    """
    from asp_cli.arrange.pipeline import arrange, plan
    from asp_cli.bench.baselines import BASELINES, RANDOM_IN_ASP_SLOTS, random_in_asp_slots

    # asp plans for the engine it is judged on, under the same lag bound (the static engine cuts padded, whatever
    # the settings' --kv-budget, which may be peak only where the engine is not static).
    settings = settings.replayed_as(engine=mode, max_lag=max_lag,
                                   # verl's rollouter limit only where asp plans for asynchronous servers
                                   prompts_per_server=settings.prompts_per_server
                                   if mode == "streaming" and max_lag != 0 else None,
                                   kv_budget="auto" if mode == "static" and settings.kv_budget == "peak"
                                   else settings.kv_budget)

    prompts = prompts.with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).alias("\x00pos"))
    position_of_row = dict(zip(prompts[C.ROW].to_list(), prompts["\x00pos"].to_list()))
    wanted = (lambda name: include is None or name in include)  # noqa: E731 - a one-line filter
    frame = asp_frame
    # The baselines in asp's sizes are cut by the KV accounting asp's schedule was cut with.
    cut = kv_cut
    if frame is None and (wanted(ASP) or wanted(ASP_PINNED) or wanted(RANDOM_IN_ASP_SLOTS)):
        frame, choice = plan(prompts, predictions, settings, preset=preset)
        cut = cut or choice.kv_budget
    arrangements: list[tuple[str, pl.DataFrame, str, bool]] = []
    for name, baseline in BASELINES.items():
        if wanted(name) and mode in baseline.modes:
            arrangements.append((name, baseline.arrange(prompts, predictions, settings, preset, cut),
                                 baseline.dispatch, baseline.equal_footing_on(mode)))
    # The rows that keep to a given schedule's own instance column cannot run on fewer instances than it plans
    # (`asp simulate --compare --instances K`): they are left out (`asp_cli.bench.simulate` warns).
    fits = asp_frame is None or int(asp_frame["instance"].max()) < settings.instances
    if frame is not None:
        if wanted(RANDOM_IN_ASP_SLOTS) and (fits or settings.dispatch == "free"):
            # Dispatched as asp's own row is: only the order differs.
            arrangements.append((RANDOM_IN_ASP_SLOTS, random_in_asp_slots(frame, settings.seed), settings.dispatch,
                                 True))
        if wanted(ASP):  # replayed the way it was planned to be dispatched (`--dispatch`, free by default)
            arrangements.append((ASP, frame, settings.dispatch, True))
        if wanted(ASP_PINNED) and settings.dispatch != "planned" and fits:
            arrangements.append((ASP_PINNED, frame, "planned", True))
    if wanted(ASP_TRUE):
        oracle = true_predictions(truth, predictions[C.PROMPT_TOKENS].to_numpy(), settings.plan_with)
        # Replayed with asp's dispatch, which its own choice was judged under.
        arrangements.append((ASP_TRUE, arrange(prompts, oracle, _room_for_each_group(settings, oracle, preset),
                                                preset=preset), settings.dispatch, True))
    rows = []
    bound = None
    for i, (name, frame, dispatch, equal) in enumerate(arrangements):
        if progress is not None:
            progress(f"replaying {i + 1}/{len(arrangements)}: {name}")
        sim = SimulationSettings(
            samples_per_prompt=settings.samples_per_prompt,
            train_batch_size=settings.train_batch_size,
            mode=mode,  # type: ignore[arg-type]
            dispatch=dispatch,  # type: ignore[arg-type]
            max_lag=max_lag,
            trainer=settings.trainer,  # type: ignore[arg-type]
        )
        frame = frame.sort("seq")
        index = np.fromiter((position_of_row[r] for r in frame[C.ROW].to_list()), dtype=np.int64,
                            count=frame.height)
        lengths = epoch_lengths(frame, index, truth, truth_by_epoch)
        result = simulate_schedule(frame, lengths, preset, sim, instances=settings.instances)
        calls = frame.select(pl.col("epoch"), pl.col("minibatch")).n_unique()
        rows.append({"arrangement": name, "dispatch": dispatch, "equal_footing": equal,
                     "prompts_per_call": frame.height / max(calls, 1), **result.metrics,
                     **partial_step(result, frame, settings.train_batch_size, max_lag, settings.trainer),
                     **(_as_verl_routes(name, frame, lengths, preset, settings, dispatch, max_lag,
                                        predictions[C.PREDICTED_MEAN_TOKENS].to_numpy()[index], router)
                        if mode == "streaming" else {})})
        bound = result.metrics
    if bound is not None:
        rows.append(
            {
                "arrangement": LOWER_BOUND,
                "dispatch": "",
                "end_to_end_s": bound["lower_bound_end_to_end_s"],
                "rollout_makespan_s": bound["lower_bound_rollout_s"],
                "lower_bound_end_to_end_s": bound["lower_bound_end_to_end_s"],
                "lower_bound_end_to_end_binding": bound["lower_bound_end_to_end_binding"],
                "lower_bound_rollout_binding": bound["lower_bound_rollout_binding"],
                "ratio_to_lower_bound": 1.0,
            }
        )
    mark_equal_footing(rows)
    routed = next((r.get("verl_routed_end_to_end_s") for r in rows if r["arrangement"] == "verl-default"), None)
    for r in rows:
        if routed and r.get("verl_routed_end_to_end_s"):
            r["verl_routed_ratio_to_verl_default"] = r["verl_routed_end_to_end_s"] / routed
    reference = next((r["end_to_end_s"] for r in rows if r["arrangement"] == "verl-default"), None)
    best = best_equal_footing(rows)
    for r in rows:
        r["ratio_to_verl_default"] = r["end_to_end_s"] / reference if reference else None
        r["ratio_to_best_equal_footing"] = r["end_to_end_s"] / best["end_to_end_s"] if best else None
    return rows


def _as_verl_routes(name: str, frame: pl.DataFrame, lengths: np.ndarray, preset: HardwarePreset,
                    settings: ScheduleSettings, dispatch: str, max_lag: int | float | None,
                    predicted_tokens: np.ndarray, router: str | None = None) -> dict[str, float]:
    """A row on servers, replayed as verl 0.9 routes (`asp_cli.sim.submit_all` at lag 0, `asp_cli.sim.verl_async`
    otherwise, with the settings' `prompts_per_server`): the length-aware rows through asp's length-aware plug-in,
    the rows kept to their instances (the round-robin deal, asp's planned row) through its router plug-in, the rest
    through verl's balancer; where the settings name one of verl's v1 modes (`ScheduleSettings.verl_trainer`), as
    that mode runs (following the schedule's steps with ``--trainer schedule``). The simulator's own replay routes
    each group whole to whichever server frees first."""
    routing = "length-aware" if "length-aware" in name else "planned" if dispatch == "planned" else "least-pending"
    # Made for another router (`ScheduleSettings.router`): every row routed so, since asp's plug-ins for verl (the
    # planned and length-aware routes) do not run behind sglang-router or AReaL (a review: the column said "as
    # sglang" of rows, verl's default among them, routed by those plug-ins).
    other_router = settings.other_router or (router if router not in (None, "least-pending") else None)
    routing = other_router or routing
    overlapped = one_step_off(other_router, max_lag, settings.trainer)  # slime's train_async.py
    if max_lag == 0 or overlapped:
        from asp_cli.sim.submit_all import replay_frame

        verl = replay_frame(frame, lengths, preset, instances=settings.instances,
                            train_batch_size=settings.train_batch_size, routing=routing,
                            predicted_tokens=predicted_tokens, seed=settings.seed, one_step_off=overlapped)
        seconds, partial = verl.end_to_end_s, routed_partial_step(verl, frame, settings.train_batch_size,
                                                                  preset.weight_sync_s, overlapped)
    else:
        from asp_cli.sim.verl_async import replay_async_frame

        per_server, partial = settings.prompts_per_server, {}  # groups taken as they finish: no step of its own
        v1 = settings.verl_v1_mode
        seconds = replay_async_frame(frame, lengths, preset, instances=settings.instances,
                                     train_batch_size=settings.train_batch_size, max_lag=max_lag, routing=routing,
                                     predicted_tokens=predicted_tokens, seed=settings.seed,
                                     prompts_in_flight=None if per_server is None else per_server * settings.instances,
                                     v1_mode=v1.replace("-", "_") if v1 else None,
                                     follow_steps=bool(v1) and settings.trainer == "schedule").end_to_end_s
    return {"verl_routed_end_to_end_s": seconds, **partial,
            **({"routed_by": routing, "routed_as": replayed_owner(routing, max_lag, settings.trainer)}
               if other_router else {})}


def epoch_lengths(frame: pl.DataFrame, index: np.ndarray, truth: np.ndarray,
                truth_by_epoch: dict[int, np.ndarray] | None) -> np.ndarray:
    """The true lengths of ``frame``'s rows (``index``: each row's position among the prompts)."""
    if not truth_by_epoch:
        return truth[index]
    epochs = frame["epoch"].to_numpy()
    out = np.empty((frame.height, truth.shape[1]), dtype=truth.dtype)
    for epoch in np.unique(epochs):
        rows = epochs == epoch
        out[rows] = truth_by_epoch.get(int(epoch), truth)[index[rows]]
    return out


def _room_for_each_group(settings: ScheduleSettings, predictions: pl.DataFrame,
                         preset: HardwarePreset) -> ScheduleSettings:
    """``settings`` with the minibatch KV budget raised, where needed, to the largest single group of
    ``predictions`` (the true-lengths ceiling plans with observed lengths, which may exceed what the schedule's
    predictions fitted: the ceiling row is then cut a little looser, never refused)."""
    from asp_cli.arrange.packing import PaddedTokens
    from asp_cli.arrange.pipeline import kv_footprint, minibatch_token_budget

    alone = kv_footprint(predictions[C.PROMPT_TOKENS].to_numpy().astype(np.float64),
                         predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64),
                         predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64),
                         settings.samples_per_prompt, settings.resolved_kv_budget())
    need = int((alone.alone() if isinstance(alone, PaddedTokens) else alone).max(initial=0))
    if need > minibatch_token_budget(settings, preset):
        return dataclasses.replace(settings, max_tokens_per_minibatch=need)
    return settings


def compare_names() -> tuple[str, ...]:
    """Every arrangement `compare` can replay, in its order (the lower bound is always added)."""
    from asp_cli.bench.baselines import BASELINES, RANDOM_IN_ASP_SLOTS

    return (*BASELINES, RANDOM_IN_ASP_SLOTS, ASP, ASP_PINNED, ASP_TRUE)


def mark_equal_footing(rows: list[dict]) -> None:
    """Count among the equal-footing rows each other row that does not run at less concurrency than asp, or beats
    it with less. A row in verl's chunking whose calls are no smaller than asp's has no less concurrency: only its
    order differs (a synchronous plan cuts each step into one minibatch per instance at least, and verl's chunks
    of a sort then held more prompts than asp's calls and beat asp unseen: a newcomer, 2026-12-05). One with
    smaller calls that is faster than asp all the same beat it with less concurrency (the sample data's file
    order, 31.6 prompts a call against asp's 31.9, was faster and left out: an evaluator's audit, 2026-12-05); a
    slower one stays apart, as what asp's bigger calls win."""
    mine = next((r for r in rows if r["arrangement"] == ASP), None)
    for r in rows:
        if (mine is not None and r.get("equal_footing") is False and r["arrangement"] not in (ASP, ASP_PINNED, ASP_TRUE)
                and (r["prompts_per_call"] >= mine["prompts_per_call"] or r["end_to_end_s"] < mine["end_to_end_s"])):
            r["equal_footing"] = True


def best_equal_footing(rows: list[dict]) -> dict | None:
    """The fastest baseline row on equal footing with asp (asp's own rows excluded), or None."""
    footing = [r for r in rows if r.get("equal_footing") and r["arrangement"] not in (ASP, ASP_PINNED, ASP_TRUE)]
    return min(footing, key=lambda r: r["end_to_end_s"]) if footing else None


TABLE_COLUMNS = (
    ("arrangement", "arrangement", "{}"),
    ("end_to_end_s", "end-to-end s", "{:,.0f}"),
    ("prompts_per_call", "prompts/call", "{:.1f}"),
    ("ratio_to_best_equal_footing", "vs best equal", "{:.3f}"),
    ("ratio_to_verl_default", "vs verl", "{:.3f}"),
    ("ratio_to_lower_bound", "vs bound", "{:.3f}"),
    ("mean_iteration_s", "iter s", "{:.1f}"),
    ("rollout_makespan_s", "rollout s", "{:,.0f}"),
    ("padding_fraction", "padding", "{:.2f}"),
    ("tail_time_fraction", "tail", "{:.2f}"),
    ("trainer_idle_fraction", "trainer idle", "{:.2f}"),
    ("queue_groups_cv", "queue CV", "{:.2f}"),
    ("policy_lag_mean", "lag mean", "{:.2f}"),
    ("policy_lag_max", "lag max", "{}"),
    ("step_length_deviation_mean", "step len dev", "{:.2f}"),
    ("step_length_deviation_p90", "step dev p90", "{:.2f}"),
    ("preemptions", "preempt", "{:,}"),
)


# The columns `asp simulate --compare` shows without --wide: two newcomers found all seventeen (240 characters)
# hard to read; the rest stay in --wide, --json and the benchmark's tables.
COMPACT_COLUMNS = ("arrangement", "end_to_end_s", "prompts_per_call", "ratio_to_best_equal_footing",
                   "ratio_to_verl_default", "verl_routed_end_to_end_s", "padding_fraction", "policy_lag_max",
                   "step_length_deviation_p90")


def format_table(rows: list[dict], *, markdown: bool = True, compact: bool = False) -> str:
    """The comparison as a Markdown (or plain) table; on the static engine with a column of the padded batches
    over the KV cache, which HF generate could not run (it does not preempt). ``compact``: `COMPACT_COLUMNS` only."""
    columns = TABLE_COLUMNS + ((("static_batches_over_kv_capacity", "over cache", "{:,}"),)
                               if any(r.get("static_batches") for r in rows) else ())
    if any(r.get("verl_routed_end_to_end_s") for r in rows):  # on servers: each row as verl routes it, too
        by = next((r.get("routed_as") or router_owner(r["routed_by"], "schedule") for r in rows
                   if r.get("routed_by")), "verl")  # `--router`
        columns = (*columns[:5], ("verl_routed_end_to_end_s", f"as {by} s", "{:,.0f}"),
                   ("verl_routed_ratio_to_verl_default", f"vs verl, as {by}", "{:.3f}"), *columns[5:])
    if compact:
        columns = tuple(c for c in columns if c[0] in COMPACT_COLUMNS or c[0] == "static_batches_over_kv_capacity")
    header = [h for _, h, _ in columns]
    lines = []
    body = []
    for r in rows:
        cells = []
        for key, _, fmt in columns:
            value = r.get(key)
            if key == "end_to_end_s" and isinstance(value, float) and value < 100:
                fmt = "{:.1f}"  # a small schedule's rows all read "32" in whole seconds (a hostile-input audit)
            cells.append("" if value is None else fmt.format(value))
        body.append(cells)
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines.extend("| " + " | ".join(c) + " |" for c in body)
    else:
        widths = [max(len(h), *(len(c[i]) for c in body)) for i, h in enumerate(header)]
        lines.append("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))))
        for c in body:
            lines.append("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(c, widths))))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# Workloads from real lengths (`asp_cli.bench.data`: the copy that ships, or a --data folder)


def _prompt_frame(ids: list[str], texts: list[str], sources: list[str]) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame(
        {
            C.ROW: pl.Series(np.arange(n, dtype=np.int64)),
            C.PROMPT_ID: pl.Series(ids, dtype=pl.String),
            C.PROMPT_TEXT: pl.Series(texts, dtype=pl.String),
            C.N_MESSAGES: pl.Series([1] * n, dtype=pl.Int32),
            C.DATA_SOURCE: pl.Series(sources, dtype=pl.String),
            C.DIFFICULTY: pl.Series([None] * n, dtype=pl.Float64),
        }
    )


def _samples(matrix: list[list[int]], sources: list[str], n: int, rng: np.random.Generator) -> np.ndarray:
    """N samples per prompt: the first N real ones; where fewer exist, all of them and the rest drawn around
    them (`asp_cli.sim.lengths.complete_groups`, the spread pooled per source). Before 2026-12-03 the rest were
    resampled from the real ones, which made AIME's groups of 8 from 4 truth samples 11% short in their mean
    maximum and narrow (within-group sd of log length 0.25 against 8 real samples' 0.31)."""
    from asp_cli.sim.lengths import complete_groups

    count = np.array([len(values) for values in matrix], dtype=np.int64)
    if count.size and not count.min():
        raise InputError(f"{sources[int(np.argmin(count))]}: a prompt without any true length; every prompt of a "
                         "benchmark workload needs at least one")
    offset = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    tokens = np.array([v for values in matrix for v in values], dtype=np.int64)
    codes = {s: i for i, s in enumerate(sorted(set(sources)))}
    pool = np.array([codes[s] for s in sources], dtype=np.int64)
    return complete_groups(tokens, offset, count, n, rng, pool=pool)


def load_zeroeval(data: Path | None, dataset: str, *, history_generators: int = 4, seed: int = 0):
    """ZeroEval GSM8K or MATH-L5: truth from some generators, history from other, disjoint ones.

    Returns (prompts, history, truth_lists, truth generators, history generators): history is a lengths frame
    (prompt_id, response_tokens, ...), truth_lists one list of true lengths per prompt.
    """
    from asp_cli.bench.data import zeroeval_tables

    problems, lengths = zeroeval_tables(data)
    problems = problems.filter(pl.col("dataset") == dataset)
    lengths = lengths.filter((pl.col("dataset") == dataset) & ~pl.col("generator").is_in(ZEROEVAL_EXCLUDED))
    return _split_by_generator(problems, lengths, dataset, CHARS_PER_TOKEN, history_generators, seed)


def load_alpaca(data: Path | None, *, history_generators: int = 4, seed: int = 0):
    """AlpacaEval's 805 chat instructions: truth from some models' outputs, history from other, disjoint ones.

    The held-out chat workload (`HELD_OUT`): not math, and never used to set asp's defaults. The length
    variants AlpacaEval keeps on purpose (``*_concise``, ``*_verbose``, ``NullModel``, ``gpt4_gamed``) are left
    out. Returns what `load_zeroeval` returns.
    """
    from asp_cli.bench.data import alpaca_tables

    problems, lengths = alpaca_tables(data)
    lengths = lengths.filter(~pl.col("generator").str.contains(ALPACA_VARIANTS))
    return _split_by_generator(problems, lengths, "chat", ALPACA_CHARS_PER_TOKEN, history_generators, seed)


def _split_by_generator(problems: pl.DataFrame, lengths: pl.DataFrame, source: str, chars_per_token: float,
                        history_generators: int, seed: int):
    """Prompts (``problems``: id, problem) answered by many generators (``lengths``: id, generator,
    output_chars): a seeded draw of the generators that answered every prompt, the first ``history_generators``
    as history, the rest as truth (each prompt's truth in the drawn order, so "the first N samples" is fixed)."""
    full = (
        lengths.group_by("generator").agg(pl.col("id").n_unique().alias("n"))
        .filter(pl.col("n") == problems.height)["generator"].sort().to_list()
    )
    rng = np.random.default_rng([seed, 11])
    chosen = [full[i] for i in rng.permutation(len(full))]
    history_set, truth_set = chosen[:history_generators], chosen[history_generators:]
    tokens = (pl.col("output_chars") / chars_per_token).ceil().cast(pl.Int64).clip(1)
    keep = lengths.filter(pl.col("generator").is_in(full)).with_columns(tokens.alias(C.RESPONSE_TOKENS))
    rank = {g: i for i, g in enumerate(chosen)}
    keep = keep.with_columns(pl.col("generator").replace_strict(rank, return_dtype=pl.Int64).alias("\x00g"))
    history = keep.filter(pl.col("generator").is_in(history_set)).sort(["id", "\x00g"]).select(
        pl.concat_str(pl.lit(f"{source}:"), pl.col("id")).alias(C.PROMPT_ID), C.RESPONSE_TOKENS,
        pl.lit(None, pl.Boolean).alias(C.TRUNCATED), pl.lit(None, pl.Int32).alias(C.EPOCH),
    )
    truth = keep.filter(pl.col("generator").is_in(truth_set)).sort(["id", "\x00g"]).group_by(
        "id", maintain_order=True).agg(pl.col(C.RESPONSE_TOKENS))
    order = problems.select("id", "problem").join(truth, on="id", how="left", maintain_order="left")
    ids = [f"{source}:{i}" for i in order["id"].to_list()]
    prompts = _prompt_frame(ids, order["problem"].to_list(), [source] * len(ids))
    return prompts, history, order[C.RESPONSE_TOKENS].to_list(), len(truth_set), len(history_set)


def load_aime(data: Path | None, *, history_samples: int = 4):
    """AIME R1-distill: samples 0..h-1 are history (an earlier epoch), samples h..7 the truth."""
    from asp_cli.bench.data import aime_folder, read_ndjson

    folder = aime_folder(data)
    gens = pl.read_csv(folder / "generations.csv").filter(pl.col("run") == "A").sort(["aime_id", "gen_index"])
    gens = gens.with_columns(pl.col("completion_tokens").cast(pl.Int64, strict=True))  # text: a PolarsError
    if gens["completion_tokens"].null_count():
        raise InputError(f"{folder / 'generations.csv'}: {gens['completion_tokens'].null_count()} rows without "
                         "completion_tokens; every generation needs its length")
    if gens.height == 0:
        raise InputError(f"{folder / 'generations.csv'}: no generation of run A; the benchmark reads run A's")
    if int(gens["completion_tokens"].min()) < 1:  # an audit's negated lengths gave a table of nonsense, exit 0
        bad = gens.filter(pl.col("completion_tokens") < 1).row(0, named=True)
        raise InputError(f"{folder / 'generations.csv'}: aime_id {bad['aime_id']!r}, gen_index {bad['gen_index']}: "
                         f"completion_tokens {bad['completion_tokens']} is not a length; every one is at least 1")
    problems = read_ndjson(folder / "aime_problems_1983_2024.jsonl")
    used = gens.select("aime_id").unique(maintain_order=True).join(problems, on="aime_id", how="left")
    if "problem" not in used.columns or used["problem"].null_count():
        missing = used.filter(pl.col("problem").is_null())["aime_id"][0] if "problem" in used.columns else "any"
        raise InputError(f"{folder / 'aime_problems_1983_2024.jsonl'}: no problem text for aime_id {missing!r} of "
                         "generations.csv; every generated problem needs its text")
    history = gens.filter(pl.col("gen_index") < history_samples).select(
        pl.concat_str(pl.lit("aime:"), pl.col("aime_id")).alias(C.PROMPT_ID),
        pl.col("completion_tokens").cast(pl.Int64).alias(C.RESPONSE_TOKENS),
        pl.col("truncated").cast(pl.Boolean).alias(C.TRUNCATED),
        pl.lit(None, pl.Int32).alias(C.EPOCH),
    )
    truth = gens.filter(pl.col("gen_index") >= history_samples).group_by("aime_id", maintain_order=True).agg(
        pl.col("completion_tokens").cast(pl.Int64))
    order = used.join(truth, on="aime_id", how="left", maintain_order="left")
    if order["completion_tokens"].null_count():
        short = order.filter(pl.col("completion_tokens").is_null())["aime_id"][0]
        raise InputError(f"{folder / 'generations.csv'}: aime_id {short!r} has no generation past the "
                         f"{history_samples} history samples; the benchmark needs more than {history_samples} a problem")
    ids = [f"aime:{i}" for i in order["aime_id"].to_list()]
    prompts = _prompt_frame(ids, order["problem"].to_list(), ["aime"] * len(ids))
    return prompts, history, order["completion_tokens"].to_list()


SOURCES = ("gsm8k", "math-l5", "aime", "chat")


def build_workload(
    name: str,
    data: Path | None,
    sources: tuple[str, ...],
    settings: ScheduleSettings,
    *,
    seed: int = 0,
) -> Workload:
    """Prompts of the given sources, shuffled together, with the real predictor and the true lengths.

    The predictor is asp's own (`asp_cli.predict.prediction.predict_lengths`: the bundled model, with the history
    frame folded in). History never includes a truth sample: for AIME it is generations 0-3 (truth 4-7);
    for ZeroEval it is four generators disjoint from the truth generators.
    """
    from asp_cli.bench.data import SOURCE_FOLDERS, reading_folder
    from asp_cli.predict.prediction import predict_lengths

    parts, histories, truths, notes = [], [], [], []
    rng = np.random.default_rng([seed, 13])
    for source in sources:
        with reading_folder(SOURCE_FOLDERS[source]):
            if source == "aime":
                prompts, history, truth = load_aime(data)
                notes.append(f"aime: {prompts.height} prompts, history = R1-distill samples 0-3, truth = samples 4-7 "
                             "(a larger group: the rest drawn around them)")
            elif source == "chat":
                prompts, history, truth, t_gen, h_gen = load_alpaca(data, seed=seed)
                notes.append(f"chat: {prompts.height} AlpacaEval instructions, truth = {t_gen} models' outputs, "
                             f"history = {h_gen} other models")
            else:
                dataset = "gsm" if source == "gsm8k" else source
                prompts, history, truth, t_gen, h_gen = load_zeroeval(data, dataset, seed=seed)
                notes.append(f"{source}: {prompts.height} prompts, truth = {t_gen} ZeroEval generators, "
                             f"history = {h_gen} other generators")
        parts.append(prompts)
        histories.append(history)
        truths.extend(truth)
    prompts = pl.concat(parts, how="vertical")
    order = rng.permutation(prompts.height)
    prompts = prompts[order].with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).alias(C.ROW))
    truth = _samples([truths[i] for i in order], prompts[C.DATA_SOURCE].to_list(), settings.samples_per_prompt, rng)
    truth = np.clip(truth, 1, settings.max_response_tokens)
    history = pl.concat(histories, how="vertical")
    predictions, info = predict_lengths(
        prompts, history=history, samples_per_prompt=settings.samples_per_prompt,
        max_response_tokens=settings.max_response_tokens, plan_with=settings.plan_with,
    )
    predictor = (f"{info.predictor_name} model + history ({info.prompts_from_history} prompts from history, "
                 f"{info.prompts_from_model} from the model)")
    return Workload(name, ", ".join(sources), prompts, predictions, truth, settings, predictor, notes)


# --------------------------------------------------------------------------------------------------------
# The benchmark of docs/benchmarks.md


@dataclass(frozen=True)
class WorkloadSpec:
    """One benchmark workload: which sources, and the run's shape."""

    name: str
    title: str
    sources: tuple[str, ...]
    instances: int
    samples_per_prompt: int
    train_batch_size: int
    minibatch_size: int
    max_response_tokens: int = 16_000
    max_lag: int | None = 2
    epochs: int = 1
    # Held out: data that asp's defaults were never set on (`HELD_OUT`); such a workload runs only when named.
    held_out: bool = False

    def settings(self, seed: int = 0) -> ScheduleSettings:
        return ScheduleSettings(
            instances=self.instances, samples_per_prompt=self.samples_per_prompt,
            train_batch_size=self.train_batch_size, minibatch_size=self.minibatch_size,
            max_response_tokens=self.max_response_tokens, max_lag=self.max_lag, seed=seed, epochs=self.epochs,
        )


WORKLOADS: dict[str, WorkloadSpec] = {
    s.name: s
    for s in (
        WorkloadSpec("gsm8k-k4-n8", "short answers: GSM8K test, 4 instances, groups of 8",
                     ("gsm8k",), 4, 8, 64, 16, max_response_tokens=4096),
        WorkloadSpec("aime-k8-n4", "long reasoning: AIME R1-distill, 8 instances, groups of 4, 16k cap",
                     ("aime",), 8, 4, 32, 8),
        WorkloadSpec("mix-k8-n8", "mix: GSM8K + MATH-L5 + AIME, 8 instances, groups of 8",
                     ("gsm8k", "math-l5", "aime"), 8, 8, 128, 32),
        WorkloadSpec("mix-k16-n16", "mix: GSM8K + MATH-L5 + AIME, 16 instances, groups of 16",
                     ("gsm8k", "math-l5", "aime"), 16, 16, 128, 16),
        WorkloadSpec("mix-k2-n4", "mix: GSM8K + MATH-L5 + AIME, 2 instances, groups of 4",
                     ("gsm8k", "math-l5", "aime"), 2, 4, 64, 32),
        # The shapes of real runs (train batches of 256-512 prompts, 8-16 instances, groups of 8-16), two or
        # three epochs each.
        WorkloadSpec("mix-k8-n8-b256", "mix, realistic: 8 instances, groups of 8, train batch 256, 2 epochs",
                     ("gsm8k", "math-l5", "aime"), 8, 8, 256, 32, epochs=2),
        WorkloadSpec("mix-k16-n16-b512", "mix, realistic: 16 instances, groups of 16, train batch 512, 2 epochs",
                     ("gsm8k", "math-l5", "aime"), 16, 16, 512, 16, epochs=2),
        WorkloadSpec("aime-k8-n8-b256", "long reasoning, realistic: 8 instances, groups of 8, train batch 256, "
                     "3 epochs", ("aime",), 8, 8, 256, 16, epochs=3),
        # Held out (measured once asp's defaults were fixed, never tuned on): chat instructions, alone and mixed
        # with math and long reasoning as an RLHF + RLVR run mixes them.
        WorkloadSpec("chat-k8-n8", "held out, chat: AlpacaEval, 8 instances, groups of 8, 4k cap", ("chat",),
                     8, 8, 128, 32, max_response_tokens=4096, held_out=True),
        WorkloadSpec("chat-mix-k8-n8-b256", "held out, chat + math + reasoning: AlpacaEval + GSM8K + AIME, "
                     "8 instances, groups of 8, train batch 256, 2 epochs", ("chat", "gsm8k", "aime"),
                     8, 8, 256, 32, epochs=2, held_out=True),
    )
}
HELD_OUT: tuple[str, ...] = tuple(name for name, spec in WORKLOADS.items() if spec.held_out)


def run_benchmark(
    data: Path | None,
    preset: HardwarePreset | str,
    *,
    names: tuple[str, ...] | None = None,
    mode: str = "continuous",
    max_lag: int | float | str | None = None,
    progress=None,
) -> list[tuple[WorkloadSpec, Workload, list[dict]]]:
    """Build each workload and compare every arrangement on it, under ``max_lag`` (None: each workload's own
    bound; ``"none"``: no bound on any).

    Lengths come from the copy that ships and from ``data`` (a ``--data`` folder holding the folders that do not ship, or None);
    a workload whose data is in neither is left out (`asp_cli.bench.data.missing_folders` says why).
    """
    from asp_cli.bench.data import check_data_folder, missing_folders, unavailable_text, unavailable_workloads

    if isinstance(preset, str):  # a preset's name or calibration file, as every other twin takes it
        from asp_cli.costmodel import load_preset

        preset = load_preset(preset)
    check_data_folder(data)
    # Checked before any workload is built; a fraction is verl's staleness_threshold, kept as asp simulate keeps it
    # (it was cut to a whole number: 0.1 ran as a synchronous 0, and NaN failed as a bug, exit 70).
    asked_lag = None if max_lag in (None, "none") else check_lag(max_lag)
    unknown = [n for n in names or () if n not in WORKLOADS]
    if unknown:  # `asp bench --workload` says so; the twin said "no benchmark workload could run:  need , ..."
        raise SettingsError(f"unknown workload {unknown[0]!r}; choose from {', '.join(WORKLOADS)}")
    results = []
    for name, spec in WORKLOADS.items():
        if (names is not None and name not in names) or (names is None and spec.held_out):
            continue
        if missing_folders(spec.sources, data):
            continue
        if progress is not None:
            progress(f"building {name} ...")
        settings = spec.settings()
        workload = build_workload(name, data, spec.sources, settings)
        lag = spec.max_lag if max_lag is None else asked_lag
        rows = compare(workload.prompts, workload.predictions, workload.truth, settings, preset, mode=mode,
                       max_lag=lag)
        workload.notes.append(f"max_lag {lag}, mode {mode}, preset {preset.name}")
        results.append((spec, workload, rows))
    if not results:
        raise InputError("no benchmark workload could run: " + unavailable_text(
            unavailable_workloads(WORKLOADS, names, data), data))
    return results


def benchmark_markdown(results: list[tuple[WorkloadSpec, Workload, list[dict]]], *, command: str) -> str:
    """The tables of docs/benchmarks.md's section, each with its workload's description."""
    lines = []
    for spec, workload, rows in results:
        s = workload.settings
        lines += [
            f"### {spec.name}: {spec.title}",
            "",
            f"{workload.prompts.height:,} prompts x {s.samples_per_prompt} samples; train batch "
            f"{s.train_batch_size} groups, minibatches of at most {s.minibatch_size} prompts; "
            f"cap {s.max_response_tokens:,} tokens. Predictor for asp: {workload.predictor}.",
            "",
            *[f"- {note}" for note in workload.notes],
            "",
            format_table(rows),
            "",
        ]
        bound = rows[-1]
        lines += [f"Lower bound binds: {bound.get('lower_bound_end_to_end_binding', '')}.", ""]
    lines.append(f"Reproduce: `{command}`")
    return "\n".join(lines) + "\n"
