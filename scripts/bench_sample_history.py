#!/usr/bin/env python3
"""The README's history figures on the sample data, as its commands run them: the table behind "What that wins for
verl's synchronous trainer on the sample data" (its history paragraph) and docs/benchmarks.md's "On the sample
data, as the README runs it".

    python scripts/bench_sample_history.py [--work DIR]

Every step is the `asp` command (or `examples/emulate_rollouts.py`) the README writes, on
`sample_data/prompts.jsonl` (3,540 prompts), 4 instances, schedules for verl's synchronous trainer on servers
that refill (`--engine streaming --max-lag 0 --trainer schedule`):

1. epoch 0: `asp schedule` with the bundled predictor (seed 0); its rollouts emulated
   (`emulate_rollouts.py S -o rollouts.jsonl --epoch-label 0`) and replayed with `asp simulate --compare`;
2. the same epoch planned from per-source predictions: `asp predictor predict`'s predicted columns replaced by each
   source's geometric mean (every prompt of a source alike), passed as `--predictions`, replayed on the same
   rollouts (the emulation's truth of the prompts without real lengths is the seed-0 schedule's predictions
   times noise, so every plan of the epoch is graded on one truth);
3. epoch 1: `asp observe rollouts.jsonl --schedule S` into a history, `asp schedule --history --seed 1`, its
   rollouts emulated with `--epoch-label 1 --truth-from S` and replayed with `--compare`; the same with `--seed 0`
   (epoch 0's seed, the README's 782 s; `asp schedule` warns that it deals epoch 0's shuffles),
   on the same lengths (the emulator draws each prompt's samples by its id, epoch label and `--seed`); and the
   `--seed 1` schedule on rollouts emulated from its own predictions (no `--truth-from`: the noise model's truth
   then follows the plan being graded, which flatters it);
4. each prompt's history-planned mean length (the epoch-1 schedule's `predicted_mean_tokens`) against the mean
   of its epoch-1 samples: the Pearson correlation of their logs, per source and per pair of sources (pooled,
   the sources' different scales add to it). GSM8K and MATH level 5 have real lengths (each sample one of about
   40 ZeroEval models' answers); MATH-500 and DeepMath are the emulator's noise model (a stable per-prompt mean
   around the seed-0 schedule's prediction, which a history of 8 samples pins down).

Beside each replay, what the schedule's own summary expects (`asp schedule --json`'s `arrangement`: auto's pick and
its candidate `shuffle`, each judged on lengths drawn around the predictions, and `expected_gain_over_shuffle`).

The times are `asp simulate --compare`'s "as verl routes" figures (`verl_routed_end_to_end_s` in `--json`: every
sample a request at submission, each group spread over the servers): its `asp` row (free dispatch), its
`verl-default` row (verl's shuffle) and its `dataset-order` row (the file's order). Deterministic: the same
commands give the same table. About two minutes on one core of this project's machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "sample_data" / "prompts.jsonl"
EMULATOR = ROOT / "examples" / "emulate_rollouts.py"
VERL_SYNC = ("--engine", "streaming", "--max-lag", "0", "--trainer", "schedule")
SOURCES = (  # data_source; the first two have real ZeroEval lengths, the others the emulator's noise model
    ("GSM8K (real answers)", ("openai/gsm8k",)),
    ("MATH level 5 (real answers)", ("math-l5",)),
    ("GSM8K and MATH level 5 together", ("openai/gsm8k", "math-l5")),
    ("MATH-500 (noise model)", ("HuggingFaceH4/MATH-500",)),
    ("DeepMath (noise model)", ("deepmath_103k",)),
    ("MATH-500 and DeepMath together", ("HuggingFaceH4/MATH-500", "deepmath_103k")),
)


def _run(*command: str | Path) -> str:
    """Run one command of the README's; its stdout."""
    done = subprocess.run([str(part) for part in command], check=True, stdout=subprocess.PIPE, text=True)
    return done.stdout


def _asp(*arguments: str | Path) -> str:
    return _run(sys.executable, "-m", "asp_cli", *arguments)


def _schedule(out: Path, *options: str | Path) -> dict:
    """`asp schedule`; what its summary expects: the pick's and the candidate shuffle's end-to-end seconds (as
    auto judged them, the pick's KV cut) and the saving (`expected_gain_over_shuffle`)."""
    summary = json.loads(_asp("schedule", PROMPTS, "-o", out, "--force", "--quiet", "--json", *VERL_SYNC, *options))
    choice = summary["arrangement"]
    seconds = {c["name"]: c["expected_end_to_end_s"] for c in choice["candidates"]
               if c["kv_budget"] == choice["kv_budget"]}
    return {"gain_over_shuffle": choice["expected_gain_over_shuffle"], "chosen": choice["chosen"],
            "chosen_s": seconds.get(choice["chosen"]), "shuffle_s": seconds.get("shuffle")}


def _emulate(schedule: Path, out: Path, epoch: int, *options: str | Path) -> None:
    _run(sys.executable, EMULATOR, schedule, "-o", out, "--epoch-label", str(epoch), *options)


def _compare(schedule: Path, lengths: Path) -> dict[str, float]:
    """`asp simulate S --lengths L --compare --json`: each arrangement's end-to-end seconds as verl routes."""
    result = json.loads(_asp("simulate", schedule, "--lengths", lengths, "--compare", "--json", "--quiet"))
    return {row["arrangement"]: row["verl_routed_end_to_end_s"] for row in result["comparison"]
            if row.get("verl_routed_end_to_end_s") is not None}


def _per_source_predictions(work: Path) -> Path:
    """`asp predictor predict`'s predicted columns, each replaced by its source's geometric mean (every prompt of a
    source alike); the prompts' own token counts kept."""
    predicted = work / "predictions.parquet"
    _asp("predictor", "predict", PROMPTS, "-o", predicted)
    frame = pl.read_parquet(predicted)
    sources = pl.read_ndjson(PROMPTS).select(pl.col("id").alias("prompt_id"), pl.col("data_source"))
    frame = frame.join(sources, on="prompt_id", how="left", validate="1:1")
    # The predicted_* columns only: prompt_tokens is each prompt's own count, which the replay's prefill reads
    # (averaged too, it gave the per-source schedule's replays, its baselines' included, other prompts).
    numeric = [name for name, dtype in frame.schema.items() if dtype.is_numeric() and name.startswith("predicted_")]
    alike = frame.with_columns(
        pl.col(name).log().mean().over("data_source").exp().round(0).cast(frame.schema[name]) if
        frame.schema[name].is_integer() else pl.col(name).log().mean().over("data_source").exp()
        for name in numeric
    ).drop("data_source")
    out = work / "predictions.per-source.parquet"
    alike.write_parquet(out)
    return out


def _log_correlations(schedule: Path, rollouts: Path) -> list[dict]:
    """Per source group: Pearson r of log planned mean against log mean of the epoch's samples."""
    planned = pl.read_parquet(schedule, columns=["prompt_id", "predicted_mean_tokens"]).unique("prompt_id")
    observed = (pl.read_ndjson(rollouts).group_by("prompt_id").agg(pl.col("response_tokens").mean()
                                                                  .alias("observed_mean_tokens")))
    sources = pl.read_ndjson(PROMPTS).select(pl.col("id").alias("prompt_id"), pl.col("data_source"))
    joined = planned.join(observed, on="prompt_id").join(sources, on="prompt_id")
    rows = []
    for label, names in SOURCES:
        part = joined.filter(pl.col("data_source").is_in(names))
        r = np.corrcoef(np.log(part["predicted_mean_tokens"].to_numpy().astype(float)),
                        np.log(part["observed_mean_tokens"].to_numpy().astype(float)))[0, 1]
        rows.append({"sources": label, "prompts": part.height, "log_correlation": float(r)})
    return rows


def run(work: Path) -> dict:
    first, rollouts = work / "schedule.parquet", work / "rollouts.jsonl"
    expected = {"epoch 0": _schedule(first)}
    _emulate(first, rollouts, 0)
    epoch0 = _compare(first, rollouts)
    per_source = work / "per-source.parquet"
    expected["epoch 0, per-source predictions"] = _schedule(per_source, "--predictions", _per_source_predictions(work))
    epoch0_per_source = _compare(per_source, rollouts)
    history = work / "history.parquet"
    _asp("observe", rollouts, "-o", history, "--schedule", first, "--epoch", "0", "--force", "--quiet")
    second, following = work / "next.parquet", work / "next.jsonl"
    expected["epoch 1, with history"] = _schedule(second, "--history", history, "--seed", "1")
    _emulate(second, following, 1, "--truth-from", first)
    epoch1 = _compare(second, following)
    own = work / "next.own.jsonl"  # emulated from the history-planned schedule's own predictions (no --truth-from)
    _emulate(second, own, 1)
    expected["epoch 1, with history, on its own emulation"] = expected["epoch 1, with history"]
    epoch1_own = _compare(second, own)
    same_seed, same_seed_rollouts = work / "next.seed0.parquet", work / "next.seed0.jsonl"
    expected["epoch 1, with history, seed 0"] = _schedule(same_seed, "--history", history, "--seed", "0")
    _emulate(same_seed, same_seed_rollouts, 1, "--truth-from", first)
    epoch1_seed0 = _compare(same_seed, same_seed_rollouts)
    return {"epoch 0": epoch0, "epoch 0, per-source predictions": epoch0_per_source, "epoch 1, with history": epoch1,
            "epoch 1, with history, seed 0": epoch1_seed0, "epoch 1, with history, on its own emulation": epoch1_own,
            "expected": expected, "log_correlations": _log_correlations(second, following)}


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _gain(expected: dict) -> str:
    """The expected saving over the shuffle: `expected_gain_over_shuffle`, which the summary line formats too."""
    return "" if expected["gain_over_shuffle"] is None else f"{expected['gain_over_shuffle']:.1%}"


def render(result: dict) -> str:
    """The two tables of docs/benchmarks.md's section, as printed."""
    lines = ["| schedule (replayed as verl routes, on emulated lengths) | auto's pick | asp, s | expected, s "
             "| verl's shuffle, s | the candidate shuffle expected, s | saved over verl's shuffle | expected saving "
             "| the file's order, s | asp vs the file's order |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, key in (("epoch 0, the bundled predictor (seed 0)", "epoch 0"),
                       ("epoch 0, per-source predictions (every prompt of a source alike)",
                        "epoch 0, per-source predictions"),
                       ("epoch 1, with epoch 0's history (seed 1)", "epoch 1, with history"),
                       ("epoch 1, with epoch 0's history, seed 0 (epoch 0's own; asp warns)",
                        "epoch 1, with history, seed 0"),
                       ("epoch 1, with history (seed 1), on lengths emulated from its own predictions",
                        "epoch 1, with history, on its own emulation")):
        times, expected = result[key], result["expected"][key]
        asp, shuffle, order = times["asp"], times["verl-default"], times["dataset-order"]
        lines.append(f"| {label} | `{expected['chosen']}` | {asp:,.0f} | {_seconds(expected['chosen_s'])} | "
                     f"{shuffle:,.0f} | {_seconds(expected['shuffle_s'])} | {1 - asp / shuffle:.1%} | "
                     f"{_gain(expected)} | {order:,.0f} | {asp / order - 1:+.1%} |")
    lines += ["", "| epoch 1's prompts, by source | prompts | log correlation, planned mean vs the epoch's mean |",
              "|---|---:|---:|"]
    lines += [f"| {row['sources']} | {row['prompts']:,} | {row['log_correlation']:.2f} |"
              for row in result["log_correlations"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep the schedules and logs here (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        result = run(args.work)
    else:
        with tempfile.TemporaryDirectory() as folder:
            result = run(Path(folder))
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
