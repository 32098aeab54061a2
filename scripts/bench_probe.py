#!/usr/bin/env python3
"""Does a probe of the user's own policy calibrate the predictor? Kendall tau on the prompts it did not cover, and
the simulated end-to-end time of the schedule it makes, against the true-lengths schedule and a random one.

    python scripts/bench_probe.py [--seeds 4] [--generator meta-llama/Meta-Llama-3.1-8B-Instruct] [--json out.json]
    python scripts/bench_probe.py --gap [--seeds 4]     # where the 2% probe's gap to the true lengths lies

"The user's policy" is one generator whose lengths the predictor never saw: on ZeroEval's GSM8K (1,319) and
MATH level 5 (721) problems, the outputs of ``--generator`` (tokens = characters / 3.12); on AIME (596), the
DeepSeek-R1-Distill-Qwen-1.5B samples (evaluation-only data: read from ../shared/data at run time, never
shipped; the script stops with a message when it is absent). The predictor is a held-out variant of the bundled
model, trained here exactly as scripts/train_default_predictor.py trains the bundled one (the consensus of the
ZeroEval generators, rescaled per generator, metadata off, sigma 0.3) but without ``--generator``; the bundled
model file is not touched. It saw the ZeroEval problem texts (with the other generators' lengths), never AIME.

ZeroEval stores one greedy output per generator and problem; a policy sampled for RL varies around it. So each
ZeroEval sample of the policy, in the probe and in the truth alike, is the generator's real length times
``exp(s z)``, ``z`` standard normal, with ``s`` the within-prompt sd of log length measured here on the real AIME
samples (pooled over prompts, uncapped samples). AIME samples are real: the probe takes samples 0..m-1 (m = 1 or
4), the truth of every prompt is samples 4-7, so no probe sample is ever judged.

For each seed (>= 4) and each probe (1%, 2%, 5% of the prompts; 1 or 4 samples per probed prompt), `asp probe`'s
own draw (`asp_cli.integrate.probe`: stratified over sources and predicted length) picks the prompts, and
`asp_cli.predict.history.combine_with_history` calibrates the model with the probe's samples. Reported:

- Kendall tau-b of the predicted group maximum (N = 4) against the true one, on the prompts the probe did not
  cover; next to the model alone and to "the source alone" (each prompt predicted by its source's mean log
  length in the probe: ties within a source);
- the simulated end-to-end time (`asp_cli.sim`, H100 + Qwen2.5-7B preset, continuous batching) of asp's
  schedule with the calibrated predictions, over asp's schedule with the true lengths, and over a random
  arrangement with asp's minibatch sizes (`asp_cli.bench.baselines.random_in_asp_slots` of asp's own frame);
- a history of random lengths (log-uniform between 1 and 8,192 tokens) for 5% of the prompts: within-source
  Kendall tau of the corrected predictions against the model alone, on the other prompts;
- later epochs: a history of epoch 1 (4 samples) covering 80% of the prompts (the rest filtered or failed):
  tau on the 20% it did not reach;
- two ceilings: the "consensus ceiling" replaces the model's GSM8K and MATH-L5 predictions by the other
  generators' consensus itself (what the held-out model was trained to predict: no text model trained on
  them ranks better), calibrated with the same probe; and every prompt probed (1 or 4 samples each), the
  most a history can tell the scheduler before the epoch runs.

Settings of the workload: 4 instances, groups of 4, train batch 64, minibatches of at most 32, cap 16,000.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_predictor import (  # noqa: E402
    DEFAULT_DATA, consensus_lengths, full_generators, load_aime, load_zeroeval, say,
)

from asp_cli import columns as C  # noqa: E402
from asp_cli.predict.evaluate import kendall_tau  # noqa: E402

CAP = 16_000
N = 4
FRACTIONS = (0.01, 0.02, 0.05)
PROBE_SAMPLES = (1, 4)
DEFAULT_GENERATOR = "meta-llama/Meta-Llama-3.1-8B-Instruct"
# The bundled model's training options (scripts/train_default_predictor.py).
MODEL_PARAMS = {"use_metadata": False, "log_spread": 0.3}


def build(data: Path, generator: str, difficulty: bool = False):
    """Prompts (with data_source), the held-out model's mu, the policy's per-prompt ZeroEval length, AIME samples.

    ``difficulty``: AIME keeps its problem number (1-15, a contest's own order of difficulty) as its ``difficulty``
    column, which the probe's correction groups by; otherwise no prompt has one."""
    from asp_cli.predict.model import LengthPredictor

    prompts, lengths = load_zeroeval(data)
    generators = full_generators(lengths, prompts)
    if generator not in generators:
        raise SystemExit(f"--generator {generator!r} is not one of the {len(generators)} full ZeroEval generators")
    others = [g for g in generators if g != generator]
    consensus = consensus_lengths(lengths, others)
    model = LengthPredictor(random_state=0, **MODEL_PARAMS).fit(
        prompts.with_columns(pl.lit(None, pl.String).alias(C.DATA_SOURCE)), consensus)
    policy = lengths.filter(pl.col("generator") == generator).group_by(C.PROMPT_ID).agg(
        pl.col(C.RESPONSE_TOKENS).first())
    zero = prompts.join(policy, on=C.PROMPT_ID, how="inner", maintain_order="left")
    aime = load_aime(data)
    if aime is None:
        raise SystemExit(3)
    aime_prompts, aime_lengths = aime
    wide = (aime_lengths.sort(C.PROMPT_ID, "gen_index").group_by(C.PROMPT_ID, maintain_order=True)
            .agg(pl.col(C.RESPONSE_TOKENS), pl.col(C.TRUNCATED)))
    aime_prompts = aime_prompts.join(wide, on=C.PROMPT_ID, how="inner", maintain_order="left")
    samples = np.array(aime_prompts[C.RESPONSE_TOKENS].to_list(), dtype=np.int64)[:, :8]
    truncated = np.array(aime_prompts[C.TRUNCATED].to_list(), dtype=bool)[:, :8]
    # Within-prompt sd of log length of real policy samples: AIME prompts, uncapped samples only.
    logs = np.where(truncated, np.nan, np.log(samples))
    count = np.sum(~np.isnan(logs), axis=1)
    keep = count >= 2
    dev = np.nansum((logs[keep] - np.nanmean(logs[keep], axis=1, keepdims=True)) ** 2, axis=1)
    within_sd = float(np.sqrt(dev.sum() / (count[keep] - 1).sum()))
    columns = [C.ROW, C.PROMPT_ID, C.PROMPT_TEXT, C.N_MESSAGES, C.DATA_SOURCE, C.DIFFICULTY]
    aime_part = aime_prompts.drop(C.RESPONSE_TOKENS, C.TRUNCATED)
    if not difficulty:
        aime_part = aime_part.with_columns(pl.lit(None, pl.Float64).alias(C.DIFFICULTY))
    frame = pl.concat([zero.drop(C.RESPONSE_TOKENS).with_columns(pl.lit(None, pl.Float64).alias(C.DIFFICULTY)),
                       aime_part], how="vertical")
    frame = frame.with_columns(pl.int_range(0, pl.len(), dtype=pl.Int64).alias(C.ROW)).select(columns)
    mu, sigma, tokens = model.predict_log(frame.with_columns(pl.lit(None, pl.String).alias(C.DATA_SOURCE)))
    # The ceiling of any text model trained on the other generators: their consensus itself (mean log of the
    # rescaled lengths per prompt), moved to the model's mean per source. AIME has one generator: the model.
    shared = consensus.group_by(C.PROMPT_ID).agg(pl.col(C.RESPONSE_TOKENS).cast(pl.Float64).log().mean().alias("c"))
    ceiling = frame.select(C.PROMPT_ID).join(shared, on=C.PROMPT_ID, how="left", maintain_order="left")["c"].to_numpy()
    ceiling = np.where(np.isnan(ceiling), mu, ceiling)
    sources = frame[C.DATA_SOURCE].to_numpy()
    for source in np.unique(sources):
        part = sources == source
        ceiling[part] += mu[part].mean() - ceiling[part].mean()
    return {
        "ceiling_mu": ceiling,
        "prompts": frame, "mu": mu, "sigma": sigma, "prompt_tokens": tokens,
        "zero_length": zero[C.RESPONSE_TOKENS].to_numpy().astype(np.float64), "n_zero": zero.height,
        "aime_samples": samples, "aime_truncated": truncated, "within_sd": within_sd,
    }


def draw(world: dict, seed: int, noise: bool) -> dict:
    """One seed's policy: truth (prompts x N) and a pool of 4 probe samples per prompt, independent of it."""
    rng = np.random.default_rng([seed, 1])
    n_zero = world["n_zero"]
    base = world["zero_length"][:, None]
    sd = world["within_sd"] if noise else 0.0
    zero_truth = np.rint(base * np.exp(sd * rng.standard_normal((n_zero, N))))
    zero_probe = np.rint(base * np.exp(sd * rng.standard_normal((n_zero, 4))))
    truth = np.vstack([zero_truth, world["aime_samples"][:, 4:8]])
    pool = np.vstack([zero_probe, world["aime_samples"][:, :4]])
    cut = np.vstack([np.zeros((n_zero, 4), dtype=bool), world["aime_truncated"][:, :4]])
    return {"truth": np.clip(truth, 1, CAP).astype(np.int64), "pool": np.clip(pool, 1, CAP).astype(np.int64),
            "pool_truncated": cut | (pool >= CAP)}


def history_frame(ids: list[str], lengths: np.ndarray, truncated: np.ndarray) -> pl.DataFrame:
    rows = lengths.shape[1]
    return pl.DataFrame({
        C.PROMPT_ID: pl.Series(np.repeat(np.asarray(ids, dtype=object), rows).tolist(), dtype=pl.String),
        C.RESPONSE_TOKENS: pl.Series(lengths.reshape(-1), dtype=pl.Int64),
        C.TRUNCATED: pl.Series(truncated.reshape(-1), dtype=pl.Boolean),
        C.EPOCH: pl.Series([None] * lengths.size, dtype=pl.Int32),
    })


def predictions(world: dict, mu: np.ndarray, sigma: np.ndarray, seen: np.ndarray) -> pl.DataFrame:
    from asp_cli.predict.prediction import lengths_from_lognormal

    top, mean = lengths_from_lognormal(mu, sigma, N, CAP)
    return pl.DataFrame({
        C.PROMPT_TOKENS: pl.Series(world["prompt_tokens"], dtype=pl.Int64),
        C.PREDICTED_MAX_TOKENS: pl.Series(top, dtype=pl.Int64), C.PREDICTED_MEAN_TOKENS: pl.Series(mean, dtype=pl.Int64),
        C.PREDICTED_TOKENS: pl.Series(top, dtype=pl.Int64),
        C.PREDICTION_SOURCE: pl.Series(np.where(seen > 0, "history", "model").tolist(), dtype=pl.String),
    })


def source_codes(frame: pl.DataFrame) -> tuple[np.ndarray, list[str]]:
    names = sorted(frame[C.DATA_SOURCE].unique().to_list())
    lookup = {n: i for i, n in enumerate(names)}
    return np.array([lookup[s] for s in frame[C.DATA_SOURCE].to_list()]), names


def simulate(world: dict, frame: pl.DataFrame, truth: np.ndarray, settings, preset) -> float:
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_schedule

    # Replayed with the dispatch the schedule was planned (and auto judged) for: free, asp schedule's default.
    sim = SimulationSettings(samples_per_prompt=N, train_batch_size=settings.train_batch_size,
                             dispatch=settings.dispatch, max_lag=settings.max_lag, trainer=settings.trainer)
    frame = frame.sort("seq")
    result = simulate_schedule(frame, truth[frame[C.ROW].to_numpy()], preset, sim, instances=settings.instances)
    return float(result.metrics["end_to_end_s"])


def run(data: Path, generator: str, seeds: int, schedules: bool = True, noise: bool = False,
        difficulty: bool = False) -> dict:
    from asp_cli.arrange.pipeline import arrange
    from asp_cli.costmodel import load_preset
    from asp_cli.integrate.probe import ProbeSettings, allocate, choose
    from asp_cli.predict.history import combine_with_history
    from asp_cli.settings import ScheduleSettings
    from asp_cli.bench.baselines import random_in_asp_slots
    from asp_cli.bench.compare import true_predictions

    started = time.time()
    world = build(data, generator, difficulty)
    prompts = world["prompts"]
    # What the correction groups by: the source and, with --difficulty, AIME's problem number.
    groups = {"data_source": prompts[C.DATA_SOURCE], "difficulty": prompts[C.DIFFICULTY]}
    ids = prompts[C.PROMPT_ID].to_list()
    code, names = source_codes(prompts)
    sizes = np.bincount(code)
    mu0, sigma0 = world["mu"], world["sigma"]
    say(f"{prompts.height} prompts ({dict(zip(names, sizes.tolist()))}); within-prompt sd of log length "
        f"{world['within_sd']:.3f}; policy: {generator} + R1-distill-1.5B on AIME")
    rows: list[dict] = []
    random_rows: list[dict] = []
    epoch_rows: list[dict] = []
    model_top, _ = predictions(world, mu0, sigma0, np.zeros(len(ids))).select(C.PREDICTED_MAX_TOKENS).to_numpy().T, None
    model_top = model_top[0]
    for seed in range(seeds):
        policy = draw(world, seed, noise)
        truth, truth_top = policy["truth"], policy["truth"].max(axis=1)
        settings = ScheduleSettings(instances=4, samples_per_prompt=N, train_batch_size=64, minibatch_size=32,
                                    max_response_tokens=CAP, seed=seed)
        preset = load_preset(settings.preset)
        true_time = random_true = None
        if schedules:
            true_frame = arrange(prompts, true_predictions(truth, world["prompt_tokens"]), settings, preset=preset)
            true_time = simulate(world, true_frame, truth, settings, preset)
            model_frame = arrange(prompts, predictions(world, mu0, sigma0, np.zeros(len(ids))), settings, preset=preset)
            model_time = simulate(world, model_frame, truth, settings, preset)
            random_true = simulate(world, random_in_asp_slots(true_frame, seed), truth, settings, preset)
        for fraction in FRACTIONS:
            count = ProbeSettings(fraction=fraction).target(len(ids))
            chosen = choose(code, mu0, ids, allocate(sizes, count, 4), seed)
            unprobed = np.ones(len(ids), dtype=bool)
            unprobed[chosen] = False
            for m in PROBE_SAMPLES:
                history = history_frame([ids[i] for i in chosen], policy["pool"][chosen, :m],
                                        policy["pool_truncated"][chosen, :m])
                mu, sigma, seen, fit = combine_with_history(pl.Series(ids), mu0, sigma0, history, cap=CAP,
                                                            **groups)
                pred = predictions(world, mu, sigma, seen)
                top = pred[C.PREDICTED_MAX_TOKENS].to_numpy()
                # The source alone: each source's mean log length in the probe (capped samples as observed).
                logs = np.log(policy["pool"][chosen, :m]).mean(axis=1)
                by_source = np.array([logs[code[chosen] == s].mean() for s in range(len(names))])
                c_mu, c_sigma, c_seen, _ = combine_with_history(pl.Series(ids), world["ceiling_mu"], sigma0, history,
                                                                cap=CAP, **groups)
                ceiling_top = predictions(world, c_mu, c_sigma, c_seen)[C.PREDICTED_MAX_TOKENS].to_numpy()
                row = {
                    "tau_unprobed_consensus_ceiling": kendall_tau(ceiling_top[unprobed], truth_top[unprobed]),
                    "tau_within_source_consensus_ceiling": {
                        names[s]: kendall_tau(ceiling_top[unprobed & (code == s)], truth_top[unprobed & (code == s)])
                        for s in range(len(names))},
                    "seed": seed, "fraction": fraction, "probe_prompts": int(chosen.size), "probe_samples": m,
                    "tau_unprobed": kendall_tau(top[unprobed], truth_top[unprobed]),
                    "tau_unprobed_model_alone": kendall_tau(model_top[unprobed], truth_top[unprobed]),
                    "tau_unprobed_source_alone": kendall_tau(by_source[code][unprobed], truth_top[unprobed]),
                    "tau_within_source": {names[s]: kendall_tau(top[unprobed & (code == s)],
                                                                truth_top[unprobed & (code == s)])
                                          for s in range(len(names))},
                    "factors": {s["data_source"]: s["factor"] for s in fit.as_dict()["sources"]},
                }
                if schedules:
                    frame = arrange(prompts, pred, settings, preset=preset)
                    asp_time = simulate(world, frame, truth, settings, preset)
                    source_pred = predictions(world, by_source[code] - world["within_sd"] ** 2 / 2,
                                              np.full(len(ids), world["within_sd"]), seen)
                    source_time = simulate(world, arrange(prompts, source_pred, settings, preset=preset), truth,
                                           settings, preset)
                    ceiling_frame = arrange(prompts, predictions(world, c_mu, c_sigma, c_seen), settings, preset=preset)
                    row.update({
                        "consensus_ceiling_s": simulate(world, ceiling_frame, truth, settings, preset),
                        "end_to_end_s": asp_time, "true_lengths_s": true_time, "model_alone_s": model_time,
                        "source_alone_s": source_time,
                        "random_asp_slots_s": simulate(world, random_in_asp_slots(frame, seed), truth, settings, preset),
                        "random_true_sizes_s": random_true,
                    })
                rows.append(row)
                say(f"seed {seed} probe {fraction:.0%} x{m} ({chosen.size} prompts): tau {row['tau_unprobed']:.3f} "
                    f"(model {row['tau_unprobed_model_alone']:.3f}, source {row['tau_unprobed_source_alone']:.3f})"
                    + (f"; e2e vs true {row['end_to_end_s'] / true_time:.3f}, vs random "
                       f"{row['end_to_end_s'] / row['random_asp_slots_s']:.3f}" if schedules else ""))
        if schedules:
            # The other end: every prompt probed (a full pass of 1 sample, 1/N of an epoch; or a whole epoch of N).
            for m in (1, 4):
                history = history_frame(ids, policy["pool"][:, :m], policy["pool_truncated"][:, :m])
                mu, sigma, seen, _ = combine_with_history(pl.Series(ids), mu0, sigma0, history, cap=CAP,
                                                          **groups)
                frame = arrange(prompts, predictions(world, mu, sigma, seen), settings, preset=preset)
                epoch_rows.append({"seed": seed, "every_prompt_samples": m,
                                   "end_to_end_vs_true": simulate(world, frame, truth, settings, preset) / true_time})
        # A history of random lengths for 5% of the prompts: the rest must keep each source's ranking.
        rng = np.random.default_rng([seed, 5])
        covered = np.sort(rng.choice(len(ids), size=int(round(0.05 * len(ids))), replace=False))
        others = np.ones(len(ids), dtype=bool)
        others[covered] = False
        for m in (1, 4):
            random_lengths = np.rint(np.exp(rng.uniform(0.0, np.log(8192), size=(covered.size, m)))).astype(np.int64)
            history = history_frame([ids[i] for i in covered], random_lengths, np.zeros_like(random_lengths, dtype=bool))
            mu, sigma, seen, fit = combine_with_history(pl.Series(ids), mu0, sigma0, history, cap=CAP,
                                                        **groups)
            top = predictions(world, mu, sigma, seen)[C.PREDICTED_MAX_TOKENS].to_numpy()
            random_rows.append({"seed": seed, "samples": m, **{
                names[s]: kendall_tau(top[others & (code == s)], model_top[others & (code == s)])
                for s in range(len(names))}, "distinct_predictions": int(np.unique(top[others]).size)})
        # Later epochs: epoch 1 (4 samples) reached 80% of the prompts; tau on the 20% it did not.
        reached = np.sort(rng.choice(len(ids), size=int(round(0.8 * len(ids))), replace=False))
        missed = np.ones(len(ids), dtype=bool)
        missed[reached] = False
        history = history_frame([ids[i] for i in reached], policy["pool"][reached], policy["pool_truncated"][reached])
        mu, sigma, seen, _ = combine_with_history(pl.Series(ids), mu0, sigma0, history, cap=CAP,
                                                  **groups)
        top = predictions(world, mu, sigma, seen)[C.PREDICTED_MAX_TOKENS].to_numpy()
        epoch_rows.append({"seed": seed, "tau_missed": kendall_tau(top[missed], truth_top[missed]),
                           "tau_missed_model_alone": kendall_tau(model_top[missed], truth_top[missed]),
                           "tau_missed_within_source": {
                               names[s]: kendall_tau(top[missed & (code == s)], truth_top[missed & (code == s)])
                               for s in range(len(names))}})
    return {"generator": generator, "seeds": seeds, "sampling_noise": noise, "prompts": len(ids), "sources": dict(zip(names, sizes.tolist())),
            "within_sd": world["within_sd"], "rows": rows, "random_history": random_rows, "later_epochs": epoch_rows,
            "seconds": round(time.time() - started, 1)}


def _two_percent_probe(world: dict, seed: int):
    """One seed's policy and the 2%, 1-sample probe of it: (truth, settings, preset, the true-lengths schedule's
    simulated time, the probe's history)."""
    from asp_cli.arrange.pipeline import arrange
    from asp_cli.bench.compare import true_predictions
    from asp_cli.costmodel import load_preset
    from asp_cli.integrate.probe import ProbeSettings, allocate, choose
    from asp_cli.settings import ScheduleSettings

    prompts = world["prompts"]
    ids = prompts[C.PROMPT_ID].to_list()
    code, _ = source_codes(prompts)
    policy = draw(world, seed, False)
    truth = policy["truth"]
    settings = ScheduleSettings(instances=4, samples_per_prompt=N, train_batch_size=64, minibatch_size=32,
                                max_response_tokens=CAP, seed=seed)
    preset = load_preset(settings.preset)
    true_time = simulate(world, arrange(prompts, true_predictions(truth, world["prompt_tokens"]), settings,
                                        preset=preset), truth, settings, preset)
    chosen = choose(code, world["mu"], ids, allocate(np.bincount(code), ProbeSettings(fraction=0.02).target(len(ids)), 4),
                    seed)
    history = history_frame([ids[i] for i in chosen], policy["pool"][chosen, :1], policy["pool_truncated"][chosen, :1])
    return truth, settings, preset, true_time, history


def shrink_study(data: Path, generator: str, seeds: int, factors: list[float]) -> dict:
    """The 2%, 1-sample probe's schedule with the model's within-source deviations shrunk by each factor,
    before the probe's correction (which refits its slope) and after it (unprobed prompts only)."""
    from asp_cli.arrange.pipeline import arrange
    from asp_cli.predict.history import combine_with_history

    world = build(data, generator)
    prompts = world["prompts"]
    groups = {"data_source": prompts[C.DATA_SOURCE], "difficulty": prompts[C.DIFFICULTY]}
    ids = prompts[C.PROMPT_ID].to_list()
    code, names = source_codes(prompts)
    mu0, sigma0 = world["mu"], world["sigma"]

    def shrunk(mu: np.ndarray, factor: float, rows: np.ndarray) -> np.ndarray:
        out = mu.copy()
        for s in range(len(names)):
            part = rows & (code == s)
            out[part] = mu[part].mean() + factor * (mu[part] - mu[part].mean())
        return out

    ratios: dict[str, list[float]] = {}
    for seed in range(seeds):
        truth, settings, preset, true_time, history = _two_percent_probe(world, seed)
        everywhere = np.ones(len(ids), dtype=bool)
        for factor in factors:
            for when in ("before", "after"):
                start = shrunk(mu0, factor, everywhere) if when == "before" else mu0
                mu, sigma, seen, _ = combine_with_history(pl.Series(ids), start, sigma0, history, cap=CAP,
                                                          **groups)
                if when == "after":
                    mu = shrunk(mu, factor, seen == 0)
                frame = arrange(prompts, predictions(world, mu, sigma, seen), settings, preset=preset)
                ratios.setdefault(f"{factor:g} {when}", []).append(simulate(world, frame, truth, settings, preset) / true_time)
    return ratios


def gap_study(data: Path, generator: str, seeds: int) -> dict:
    """Where the 2%, 1-sample probe's gap to the true-lengths schedule lies: its calibrated predictions, with one
    source's (or every source's) replaced by an oracle, each prompt's mean log length over its own true samples
    (the realized mean; the spread stays the calibrated one), and with AIME's problem number given the slope the
    true lengths show (fitted on them: the most a difficulty column could add). 2026-12-05."""
    from asp_cli.arrange.pipeline import arrange
    from asp_cli.predict.history import combine_with_history

    world = build(data, generator, difficulty=True)
    prompts = world["prompts"]
    # The correction groups by source alone, as the main table's (AIME's levels do not pass at 2%).
    groups = {"data_source": prompts[C.DATA_SOURCE], "difficulty": pl.Series([None] * prompts.height, dtype=pl.Float64)}
    ids = prompts[C.PROMPT_ID].to_list()
    code, names = source_codes(prompts)
    number = prompts[C.DIFFICULTY].to_numpy()
    aime = ~np.isnan(number)
    ratios: dict[str, list[float]] = {}
    for seed in range(seeds):
        truth, settings, preset, true_time, history = _two_percent_probe(world, seed)
        mu, sigma, seen, _ = combine_with_history(pl.Series(ids), world["mu"], world["sigma"], history, cap=CAP,
                                                  **groups)
        realized = np.log(truth).mean(axis=1)
        fit = np.linalg.lstsq(np.column_stack([np.ones(aime.sum()), mu[aime], number[aime]]), realized[aime],
                              rcond=None)[0]
        sloped = mu.copy()
        sloped[aime] += fit[2] * (number[aime] - number[aime].mean())
        cases = {"the probe's calibration": mu, "AIME's problem number, at the truth's slope": sloped}
        for s, name in enumerate(names):
            shown = {"aime": "AIME", "gsm8k": "GSM8K", "math-l5": "MATH-L5"}.get(name, name)
            cases[f"{shown}: each prompt's realized mean"] = np.where(code == s, realized, mu)
        cases["every source: each prompt's realized mean"] = realized
        for label, centre in cases.items():
            frame = arrange(prompts, predictions(world, centre, sigma, seen), settings, preset=preset)
            ratios.setdefault(label, []).append(simulate(world, frame, truth, settings, preset) / true_time)
        say(f"seed {seed}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in ratios.items()))
    return ratios


def table(result: dict) -> str:
    rows = result["rows"]
    simulated = bool(rows) and "end_to_end_s" in rows[0]  # without (--no-schedules) the header has tau's columns only
    lines = ["| probe | prompts | tau unprobed | model alone | source alone | consensus ceiling |"
             + (" e2e vs true lengths | e2e vs random (asp slots) | model alone vs true | source alone vs true | "
                "consensus ceiling vs true | asp, s | true lengths, s |" if simulated else ""),
             "|---|---:|---:|---:|---:|---:|" + ("---:|" * 7 if simulated else "")]
    for fraction in FRACTIONS:
        for m in PROBE_SAMPLES:
            part = [r for r in rows if r["fraction"] == fraction and r["probe_samples"] == m]
            mean = lambda key: float(np.mean([r[key] for r in part]))  # noqa: E731
            line = (f"| {fraction:.0%}, {m} sample{'s' if m > 1 else ''} | {part[0]['probe_prompts']} | "
                    f"{mean('tau_unprobed'):.3f} | {mean('tau_unprobed_model_alone'):.3f} | "
                    f"{mean('tau_unprobed_source_alone'):.3f} | {mean('tau_unprobed_consensus_ceiling'):.3f} |")
            if "end_to_end_s" in part[0]:
                ratio = lambda a, b: float(np.mean([r[a] / r[b] for r in part]))  # noqa: E731
                worst = max(r["end_to_end_s"] / r["true_lengths_s"] for r in part)
                line += (f" {ratio('end_to_end_s', 'true_lengths_s'):.3f} (worst {worst:.3f}) | "
                         f"{ratio('end_to_end_s', 'random_asp_slots_s'):.3f} | "
                         f"{ratio('model_alone_s', 'true_lengths_s'):.3f} | {ratio('source_alone_s', 'true_lengths_s'):.3f} | "
                         f"{ratio('consensus_ceiling_s', 'true_lengths_s'):.3f} | {mean('end_to_end_s'):,.0f} | "
                         f"{mean('true_lengths_s'):,.0f} |")
            lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--generator", default=DEFAULT_GENERATOR, help="the ZeroEval generator that is 'the policy'")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--no-schedules", action="store_true", help="only the tau figures (no simulation)")
    parser.add_argument("--sampling-noise", action="store_true",
                        help="ZeroEval samples vary around the greedy length (sd measured on AIME) instead of "
                             "repeating it")
    parser.add_argument("--difficulty", action="store_true",
                        help="give AIME its problem number (1-15) as the difficulty column the correction groups by")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--shrink", help="instead: the 2%%, 1-sample probe's schedule with the model's "
                        "within-source deviations shrunk by these factors (comma-separated, e.g. 0.5,0.25,0)")
    parser.add_argument("--gap", action="store_true",
                        help="instead: where the 2%%, 1-sample probe's gap to the true-lengths schedule lies (one "
                             "source's predictions at a time replaced by each prompt's realized mean)")
    args = parser.parse_args(argv)
    for folder in ("zeroeval_math_gsm_outputs", "aime_r1distill1.5b_lengths"):
        if not (args.data / folder).is_dir():
            print(f"skipped: {args.data / folder} is absent (this benchmark reads ../shared/data at run time)",
                  file=sys.stderr)
            return 0
    if args.shrink:
        ratios = shrink_study(args.data, args.generator, args.seeds, [float(f) for f in args.shrink.split(",")])
        print("| within-source deviations x | shrunk | e2e vs the true-lengths schedule |\n|---:|---|---:|")
        for key, values in ratios.items():
            factor, when = key.split()
            print(f"| {factor} | {when} the probe's correction | {np.mean(values):.3f} (worst {max(values):.3f}) |")
        return 0
    if args.gap:
        ratios = gap_study(args.data, args.generator, args.seeds)
        print("| 2% probe, 1 sample, with | e2e vs the true-lengths schedule |\n|---|---:|")
        for label, values in ratios.items():
            print(f"| {label} | {np.mean(values):.3f} (worst {max(values):.3f}) |")
        return 0
    result = run(args.data, args.generator, args.seeds, schedules=not args.no_schedules, noise=args.sampling_noise,
                 difficulty=args.difficulty)
    print(table(result))
    print()
    print("| random-length history, 5% of prompts | " + " | ".join(result["sources"]) + " | distinct predictions |")
    print("|---|" + "---:|" * (len(result["sources"]) + 1))
    for m in (1, 4):
        part = [r for r in result["random_history"] if r["samples"] == m]
        print(f"| {m} sample{'s' if m > 1 else ''}, within-source tau vs the model alone (min over seeds) | "
              + " | ".join(f"{min(r[s] for r in part):.3f}" for s in result["sources"])
              + f" | {min(r['distinct_predictions'] for r in part)} |")
    two = [r for r in result["rows"] if r["fraction"] == 0.02 and r["probe_samples"] == 1]
    print()
    print("within-source tau on the unprobed prompts (2% probe, 1 sample), the model + probe against the other "
          "generators' consensus + probe (the ceiling of a text model trained on them; AIME: the model in both): "
          + "; ".join(f"{s} {np.mean([r['tau_within_source'][s] for r in two]):.3f} vs "
                      f"{np.mean([r['tau_within_source_consensus_ceiling'][s] for r in two]):.3f}"
                      for s in result["sources"]))
    later = [r for r in result["later_epochs"] if "tau_missed" in r]
    for m in (1, 4):
        every = [r["end_to_end_vs_true"] for r in result["later_epochs"] if r.get("every_prompt_samples") == m]
        if every:
            print(f"every prompt probed, {m} sample{'s' if m > 1 else ''} each: e2e vs the true-lengths schedule "
                  f"{np.mean(every):.3f} (worst {max(every):.3f})")
    print()
    print(f"later epochs: epoch-1 history of 80% of the prompts, tau on the other 20%: "
          f"{np.mean([r['tau_missed'] for r in later]):.3f} (model alone {np.mean([r['tau_missed_model_alone'] for r in later]):.3f}); "
          "within each source: " + ", ".join(
              f"{name} {np.mean([r['tau_missed_within_source'][name] for r in later]):.3f}"
              for name in result["sources"]))
    say(f"done in {result['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
