"""Produce the accuracy table of docs/predictor.md from the real datasets in ../shared/data.

    python scripts/eval_predictor.py [--data ../shared/data] [--json results.json] [--quick] [--char-ngrams]

Every figure is group-wise cross-validated: 5 folds over prompt ids, so no prompt is in both the training
and the test part of a fold. Evaluation-only data (the AIME R1-distill lengths) is read at run time and
skipped with a message when absent. ``--char-ngrams`` fits every model with the opt-in character n-gram score
(``LengthPredictor(char_ngrams=True)``) on the same folds, for the with/without comparison in the docs.
The dataset loaders here are also used by train_default_predictor.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.predict.prediction import lengths_from_lognormal
from asp_cli.predict.model import LengthPredictor
from asp_cli.predict.targets import group_targets
from asp_cli.predict.evaluate import evaluate_frame, score

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
# Characters per token of real reasoning text: 3.12 over all AIME R1-distill outputs
# (aime_r1distill1.5b_lengths: sum of completion_chars / sum of completion_tokens). Used to turn ZeroEval's
# character counts into tokens; ZeroEval's whitespace tokens undercount LaTeX-heavy math.
CHARS_PER_TOKEN = 3.12
# ZeroEval generators left out: o1 models store only the visible answer (hidden reasoning not counted).
EXCLUDED_GENERATORS = ("openai/o1-mini-2024-09-12", "openai/o1-preview-2024-09-12")
FOLDS = 5
PARAMS: dict = {}  # LengthPredictor options for every fit (--char-ngrams sets char_ngrams=True)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prompt_frame(ids, texts, source=None, difficulty=None) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame({
        C.PROMPT_ID: pl.Series(ids, dtype=pl.String),
        C.PROMPT_TEXT: pl.Series(texts, dtype=pl.String),
        C.N_MESSAGES: pl.Series([1] * n, dtype=pl.Int32),
        C.DATA_SOURCE: pl.Series(source if source is not None else [None] * n, dtype=pl.String),
        C.DIFFICULTY: pl.Series(difficulty if difficulty is not None else [None] * n, dtype=pl.Float64),
    })


def _length_frame(ids, tokens, truncated=None) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame({
        C.PROMPT_ID: pl.Series(ids, dtype=pl.String),
        C.RESPONSE_TOKENS: pl.Series(tokens, dtype=pl.Int64),
        C.TRUNCATED: pl.Series(truncated if truncated is not None else [None] * n, dtype=pl.Boolean),
        C.EPOCH: pl.Series([None] * n, dtype=pl.Int32),
    })


def load_zeroeval(data: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """ZeroEval GSM8K-test + MATH-L5 prompts and per-generator lengths (tokens = chars / 3.12).

    Returns (prompts, lengths) where lengths has a ``generator`` column; ids are ``dataset/id``.
    """
    folder = data / "zeroeval_math_gsm_outputs"
    problems = pl.read_ndjson(folder / "problems.jsonl")
    problems = problems.with_columns((pl.col("dataset") + "/" + pl.col("id")).alias("pid"))
    prompts = _prompt_frame(problems["pid"], problems["problem"],
                            source=problems["dataset"].replace({"gsm": "gsm8k", "math-l5": "math-l5"}))
    raw = pl.read_csv(folder / "lengths.csv.gz", schema_overrides={"id": pl.String})
    raw = raw.filter(~pl.col("generator").is_in(EXCLUDED_GENERATORS))
    lengths = raw.select(
        (pl.col("dataset") + "/" + pl.col("id")).alias(C.PROMPT_ID),
        (pl.col("output_chars") / CHARS_PER_TOKEN).round().clip(1).cast(pl.Int64).alias(C.RESPONSE_TOKENS),
        pl.lit(None, pl.Boolean).alias(C.TRUNCATED),
        pl.lit(None, pl.Int32).alias(C.EPOCH),
        pl.col("generator"),
    )
    return prompts, lengths


def full_generators(lengths: pl.DataFrame, prompts: pl.DataFrame) -> list[str]:
    """Generators with a length for every ZeroEval prompt (both GSM8K and MATH-L5)."""
    counts = lengths.group_by("generator").agg(pl.col(C.PROMPT_ID).n_unique().alias("n"))
    return sorted(counts.filter(pl.col("n") == prompts.height)["generator"].to_list())


def consensus_lengths(lengths: pl.DataFrame, generators: list[str]) -> pl.DataFrame:
    """One 'sample' per generator and prompt, each generator rescaled to the pooled mean log length.

    Generators differ in verbosity (mean length varies ~3x); removing each one's mean log length keeps
    the per-prompt signal they share (which problems need long answers) without their scale.
    """
    chosen = lengths.filter(pl.col("generator").is_in(generators))
    logs = pl.col(C.RESPONSE_TOKENS).cast(pl.Float64).log()
    shifted = chosen.with_columns((logs - logs.mean().over("generator") + logs.mean()).exp().round()
                                  .cast(pl.Int64).alias(C.RESPONSE_TOKENS))
    return shifted.drop("generator")


def load_aime(data: Path) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """AIME R1-distill-1.5B: 596 prompts x 8 samples, real tokens, cap 16,000 (evaluation only)."""
    folder = data / "aime_r1distill1.5b_lengths"
    if not (folder / "generations.csv").is_file():
        say(f"skipped AIME: {folder} is absent (evaluation-only data, read at run time)")
        return None
    gens = pl.read_csv(folder / "generations.csv").filter(pl.col("run") == "A")
    problems = pl.read_ndjson(folder / "aime_problems_1983_2024.jsonl")
    used = gens.group_by("aime_id").agg(pl.col("problem_number").first()).join(problems, on="aime_id").sort("aime_id")
    prompts = _prompt_frame(used["aime_id"], used["problem"], source=["aime"] * used.height,
                            difficulty=used["problem_number"].cast(pl.Float64))
    lengths = _length_frame(gens["aime_id"], gens["completion_tokens"], gens["truncated"]).with_columns(
        gens["gen_index"].cast(pl.Int32).alias("gen_index"))
    return prompts, lengths


# Characters per token of English chat text. Used only for AlpacaEval's character counts; a constant scale
# changes no ranking figure (tau, Spearman, tail recall), only the MAE of log length.
CHAT_CHARS_PER_TOKEN = 4.0
# AlpacaEval result directories that are deliberate length variants or degenerate (see its SOURCE.md).
ALPACA_VARIANTS = ("concise", "verbose", "NullModel", "gamed")
ALPACA_GENERATORS = 25


def load_alpaca(data: Path) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """AlpacaEval: 805 chat instructions, one output per model (evaluation only; CC BY-NC 4.0).

    Returns (prompts, lengths) with a ``generator`` column in lengths, or None when the folder is absent.
    """
    folder = data / "alpaca_eval_outputs"
    if not (folder / "lengths.csv.gz").is_file():
        say(f"skipped AlpacaEval: {folder} is absent (evaluation-only data, read at run time)")
        return None
    instructions = pl.read_ndjson(folder / "instructions.jsonl")
    prompts = _prompt_frame(instructions["instruction_id"].cast(pl.String), instructions["instruction"],
                            source=instructions["dataset"])
    raw = pl.read_csv(folder / "lengths.csv.gz", schema_overrides={"instruction_id": pl.String})
    variant = pl.any_horizontal([pl.col("results_dir").str.contains(v, literal=True) for v in ALPACA_VARIANTS])
    raw = raw.filter(~variant & (pl.col("output_chars") > 0))
    lengths = raw.select(
        pl.col("instruction_id").alias(C.PROMPT_ID),
        (pl.col("output_chars") / CHAT_CHARS_PER_TOKEN).round().clip(1).cast(pl.Int64).alias(C.RESPONSE_TOKENS),
        pl.lit(None, pl.Boolean).alias(C.TRUNCATED),
        pl.lit(None, pl.Int32).alias(C.EPOCH),
        pl.col("results_dir").alias("generator"),
    )
    return prompts, lengths


def alpaca_generators(lengths: pl.DataFrame, prompts: pl.DataFrame, count: int) -> list[str]:
    """``count`` generators with an output for every instruction, evenly spaced over the sorted names (fixed)."""
    full = full_generators(lengths, prompts)
    if len(full) <= count:
        return full
    picks = np.linspace(0, len(full) - 1, count).round().astype(int)
    return [full[i] for i in picks]


# --------------------------------------------------------------------------------------------------------


def cross_validate(prompts: pl.DataFrame, lengths: pl.DataFrame, *, cap: int | None = None, seed: int = 0,
                   **params) -> pl.DataFrame:
    """Out-of-fold predictions per prompt, folds over prompt ids, with observed targets joined."""
    targets = group_targets(lengths, cap=cap)
    data = prompts.join(targets, on=C.PROMPT_ID, how="inner", maintain_order="left")
    rng = np.random.default_rng(seed)
    fold = rng.permutation(data.height) % FOLDS
    parts = []
    for k in range(FOLDS):
        train, test = data.filter(pl.Series(fold != k)), data.filter(pl.Series(fold == k))
        model = LengthPredictor(random_state=seed, **{**PARAMS, **params}).fit(
            train.select(prompts.columns), lengths.filter(pl.col(C.PROMPT_ID).is_in(train[C.PROMPT_ID].implode())),
            cap=cap)
        mu, sigma, tokens = model.predict_log(test.select(prompts.columns))
        gmax, mean = lengths_from_lognormal(mu, sigma, test["samples"].to_numpy(), cap or 1 << 40)
        parts.append(test.with_columns(pl.Series(C.PREDICTED_MAX_TOKENS, gmax), pl.Series(C.PREDICTED_MEAN_TOKENS, mean),
                                       pl.Series(C.PROMPT_TOKENS, tokens), pl.Series("mu", mu)))
    return pl.concat(parts).sort(C.PROMPT_ID)


def headline(name: str, result: dict) -> dict:
    block = result["overall"]
    row = {
        "set": name,
        "prompts": block["prompts"],
        "tau_group_max": block["group_max"]["kendall_tau"],
        "tau_prompt_length": block["baseline_prompt_length_group_max"]["kendall_tau"],
        "spearman_group_max": block["group_max"]["spearman"],
        "tail_recall": block["group_max"]["tail_recall"],
        "mae_log": block["group_max"]["mae_log"],
        "coverage": block["calibration_group_max"]["coverage"],
    }
    say(f"{name:<58} n={row['prompts']:>5} tau={row['tau_group_max']} (prompt length {row['tau_prompt_length']}) "
        f"rho={row['spearman_group_max']} tail={row['tail_recall']} mae_log={row['mae_log']} cover={row['coverage']}")
    return row


def aime_history(prompts: pl.DataFrame, lengths: pl.DataFrame, cap: int) -> list[dict]:
    """Epoch 1 = samples 0-3, epoch 2 = samples 4-7 of the same prompts; predict epoch 2's group max of 4."""
    from asp_cli.predict.history import combine_with_history

    first = lengths.filter(pl.col("gen_index") < 4)
    second = lengths.filter(pl.col("gen_index") >= 4)
    cv = cross_validate(prompts, first.drop("gen_index"), cap=cap)  # the model never sees epoch 2
    target = group_targets(second.drop("gen_index"), cap=cap)
    frame = cv.select(C.PROMPT_ID, "mu", C.PROMPT_TOKENS).join(
        target.select(C.PROMPT_ID, pl.col("max_tokens").alias("next_max")), on=C.PROMPT_ID)
    observed = frame["next_max"].to_numpy()
    sigma0 = np.full(frame.height, 0.3)
    rows = []
    mu_h, sigma_h, seen, fit = combine_with_history(frame[C.PROMPT_ID], frame["mu"].to_numpy(), sigma0,
                                                    first.drop("gen_index"), cap=cap)
    gmax_h, _ = lengths_from_lognormal(mu_h, sigma_h, 4, cap)
    gmax_m, _ = lengths_from_lognormal(frame["mu"].to_numpy(), sigma0, 4, cap)
    hist_only = group_targets(first.drop("gen_index"), cap=cap).join(frame.select(C.PROMPT_ID), on=C.PROMPT_ID,
                                                                       how="right")["max_tokens"].to_numpy()
    for name, predicted in (
        ("prompt length alone", frame[C.PROMPT_TOKENS].to_numpy()),
        ("model alone (text, no history)", gmax_m),
        ("epoch-1 observed max alone", hist_only),
        ("history + model (asp --history)", gmax_h),
    ):
        s = score(predicted, observed)
        s["set"] = f"AIME epoch 2 max of 4: {name}"
        say(f"{s['set']:<58} tau={s['kendall_tau']} rho={s['spearman']} tail={s['tail_recall']} mae_log={s['mae_log']}")
        rows.append(s)
    rows[-1]["history_fit"] = fit.as_dict()
    return rows


def generator_reference(lengths: pl.DataFrame, generators: list[str]) -> list[float]:
    """Per generator: tau of the other generators' mean centred log length (their actual outputs) against its own.

    A reference for what text alone can reach on one generator's single greedy sample: even the real lengths
    of 24 other models do not rank it perfectly.
    """
    from asp_cli.predict.evaluate import kendall_tau

    logs = pl.col(C.RESPONSE_TOKENS).cast(pl.Float64).log()
    centred = (lengths.filter(pl.col("generator").is_in(generators))
               .with_columns((logs - logs.mean().over("generator")).alias("c"))
               .group_by(C.PROMPT_ID, "generator").agg(pl.col("c").mean()))
    wide = centred.pivot(on="generator", index=C.PROMPT_ID, values="c").sort(C.PROMPT_ID).select(generators).to_numpy()
    return [kendall_tau(np.delete(wide, j, axis=1).mean(axis=1), wide[:, j]) for j in range(wide.shape[1])]


def aime_ceiling(lengths: pl.DataFrame, cap: int, *, draws: int = 100, seed: int = 0) -> dict:
    """How far label noise alone caps tau on AIME, by simulation from per-prompt fitted log-normals.

    Each prompt's log-length mean (shrunk by empirical Bayes, so sampling noise does not widen the spread of
    prompts) and sd (shrunk towards the pooled sd) are fitted on all 8 samples; samples are redrawn and capped.
    ``oracle``: the true expected maximum (perfect knowledge of every prompt) against a drawn maximum.
    ``four_seen``: the mean log length of 4 drawn samples against the maximum of 4 other draws, the best a
    history of one 4-sample epoch can do without the model.
    """
    from asp_cli.predict.targets import CENSORED_FACTOR, expected_max_z
    from asp_cli.predict.evaluate import kendall_tau

    wide = lengths.sort(C.PROMPT_ID, "gen_index").group_by(C.PROMPT_ID, maintain_order=True).agg(
        pl.col(C.RESPONSE_TOKENS))[C.RESPONSE_TOKENS].to_list()
    x = np.array([row[:8] for row in wide if len(row) >= 8], dtype=np.float64)
    logs = np.log(np.where(x >= cap, cap * CENSORED_FACTOR, x))
    mu, sd = logs.mean(axis=1), logs.std(axis=1, ddof=1)
    pooled = float(np.sqrt(np.mean(sd**2)))
    between = float(np.var(mu) - pooled**2 / 8)
    mu = mu.mean() + between / (between + pooled**2 / 8) * (mu - mu.mean())
    sd = np.sqrt((7 * sd**2 + 8 * pooled**2) / 15)
    rng = np.random.default_rng(seed)
    out = {"oracle_max8": [], "oracle_max4": [], "four_seen_max4": [], "epoch1_max_max4": []}
    for _ in range(draws):
        draw = np.minimum(np.exp(mu[:, None] + sd[:, None] * rng.standard_normal((len(mu), 12))), cap)
        out["oracle_max8"].append(kendall_tau(mu + sd * expected_max_z(8), draw[:, :8].max(axis=1)))
        nxt = draw[:, 4:8].max(axis=1)
        out["oracle_max4"].append(kendall_tau(mu + sd * expected_max_z(4), nxt))
        out["four_seen_max4"].append(kendall_tau(np.log(draw[:, 8:12]).mean(axis=1), nxt))
        out["epoch1_max_max4"].append(kendall_tau(draw[:, 8:12].max(axis=1), nxt))
    return {k: round(float(np.mean(v)), 3) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None, help="also write all figures here")
    parser.add_argument("--quick", action="store_true", help="fewer generators (a smoke run)")
    parser.add_argument("--char-ngrams", action="store_true",
                        help="fit with the opt-in character n-gram score (same folds as without)")
    args = parser.parse_args()
    if args.char_ngrams:
        PARAMS["char_ngrams"] = True
    started = time.time()
    results: dict = {"rows": [], "details": {}, "params": dict(PARAMS)}

    prompts, lengths = load_zeroeval(args.data)
    generators = full_generators(lengths, prompts)
    say(f"ZeroEval: {prompts.height} prompts, {len(generators)} generators with every prompt")
    chosen = generators[:3] if args.quick else generators
    per_model = []
    for generator in chosen:
        cv = cross_validate(prompts, lengths.filter(pl.col("generator") == generator).drop("generator"))
        result = evaluate_frame(cv)
        per_model.append(headline(f"mix GSM8K+MATH-L5, one generator: {generator}", result))
        results["details"][generator] = result
    taus = [r["tau_group_max"] for r in per_model]
    base = [r["tau_prompt_length"] for r in per_model]
    results["rows"].append({"set": "mix GSM8K+MATH-L5, median over generators", "generators": len(per_model),
                            "tau_group_max": float(np.median(taus)), "tau_prompt_length": float(np.median(base)),
                            "tau_min": float(np.min(taus)), "tau_max": float(np.max(taus))})
    say(f"median over {len(per_model)} generators: tau {np.median(taus):.3f} (min {np.min(taus):.3f}, max "
        f"{np.max(taus):.3f}); prompt length {np.median(base):.3f}")
    results["rows"].extend(per_model)
    reference = generator_reference(lengths, generators)
    results["rows"].append({"set": "reference: other generators' real lengths against one generator, median",
                            "tau_group_max": float(np.median(reference)), "tau_min": float(np.min(reference)),
                            "tau_max": float(np.max(reference))})
    say(f"reference: the {len(generators) - 1} other generators' real lengths rank one generator at median tau "
        f"{np.median(reference):.3f} (min {np.min(reference):.3f}, max {np.max(reference):.3f})")
    consensus = consensus_lengths(lengths, generators)
    cv = cross_validate(prompts, consensus)
    results["details"]["consensus"] = evaluate_frame(cv)
    results["rows"].append(headline("mix GSM8K+MATH-L5, consensus of all generators", results["details"]["consensus"]))
    for source, block in results["details"]["consensus"]["by_source"].items():
        say(f"  within {source}: tau {block['group_max']['kendall_tau']} (prompt length "
            f"{block['baseline_prompt_length_group_max']['kendall_tau']})")

    aime = load_aime(args.data)
    if aime is not None:
        aime_prompts, aime_lengths = aime
        cap = 16000
        no_difficulty = aime_prompts.with_columns(pl.lit(None, pl.Float64).alias(C.DIFFICULTY))
        cv = cross_validate(no_difficulty, aime_lengths.drop("gen_index"), cap=cap)
        results["details"]["aime_text"] = evaluate_frame(cv)
        results["rows"].append(headline("AIME alone (8 samples), text only", results["details"]["aime_text"]))
        cv = cross_validate(aime_prompts, aime_lengths.drop("gen_index"), cap=cap)
        results["details"]["aime_difficulty"] = evaluate_frame(cv)
        results["rows"].append(headline("AIME alone, text + problem number as difficulty",
                                        results["details"]["aime_difficulty"]))
        # Mixed generators: Llama-3.1-8B on GSM8K+MATH-L5 next to R1-distill on AIME (see docs for caveats).
        llama = "meta-llama/Meta-Llama-3.1-8B-Instruct"
        mixed_prompts = pl.concat([prompts, no_difficulty])
        mixed_lengths = pl.concat([lengths.filter(pl.col("generator") == llama).drop("generator"),
                                   aime_lengths.drop("gen_index")])
        cv = cross_validate(mixed_prompts, mixed_lengths, cap=cap)
        results["details"]["mix3"] = evaluate_frame(cv)
        results["rows"].append(headline("mix GSM8K+MATH-L5 (Llama-3.1-8B) + AIME (R1-distill)",
                                        results["details"]["mix3"]))
        results["rows"].extend(aime_history(no_difficulty, aime_lengths, cap))
        ceiling = aime_ceiling(aime_lengths, cap)
        results["rows"].append({"set": "AIME noise ceilings (simulation from per-prompt fitted log-normals)", **ceiling})
        say(f"AIME ceilings by simulation: perfect knowledge, max of 8 tau {ceiling['oracle_max8']}; max of 4 "
            f"{ceiling['oracle_max4']}; 4 seen samples (log mean) -> next max of 4 {ceiling['four_seen_max4']} "
            f"(seen max {ceiling['epoch1_max_max4']})")
    alpaca = load_alpaca(args.data)
    if alpaca is not None:
        chat_prompts, chat_lengths = alpaca
        chat_generators = alpaca_generators(chat_lengths, chat_prompts, 3 if args.quick else ALPACA_GENERATORS)
        chat_rows = []
        for generator in chat_generators:
            cv = cross_validate(chat_prompts, chat_lengths.filter(pl.col("generator") == generator).drop("generator"))
            chat_rows.append(headline(f"AlpacaEval chat, one generator: {generator}", evaluate_frame(cv)))
        taus = [r["tau_group_max"] for r in chat_rows]
        base = [r["tau_prompt_length"] for r in chat_rows]
        chat_reference = generator_reference(chat_lengths, chat_generators)
        results["rows"].append({"set": "AlpacaEval chat, median over generators", "generators": len(chat_rows),
                                "tau_group_max": float(np.median(taus)), "tau_prompt_length": float(np.median(base)),
                                "tau_min": float(np.min(taus)), "tau_max": float(np.max(taus)),
                                "reference_median": float(np.median(chat_reference))})
        results["rows"].extend(chat_rows)
        say(f"AlpacaEval: median over {len(chat_rows)} generators tau {np.median(taus):.3f} (min {np.min(taus):.3f}, "
            f"max {np.max(taus):.3f}); prompt length {np.median(base):.3f}; the other generators' real lengths "
            f"{np.median(chat_reference):.3f}")
        chat_consensus = cross_validate(chat_prompts, consensus_lengths(chat_lengths, chat_generators))
        results["details"]["alpaca_consensus"] = evaluate_frame(chat_consensus)
        results["rows"].append(headline("AlpacaEval chat, consensus of the generators",
                                        results["details"]["alpaca_consensus"]))
    results["seconds"] = round(time.time() - started, 1)
    say(f"done in {results['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
