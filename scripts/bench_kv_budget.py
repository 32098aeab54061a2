"""What a looser per-minibatch KV budget does on mix-k8-n8 with the true lengths (docs/benchmarks.md).

    python scripts/bench_kv_budget.py [--data ../shared/data] [--seed 0]

Scales asp's whole KV footprint of a group (N x (prompt + mean), `pipeline.kv_footprint`) by each factor, and
then counts each group at its share of the wave's expected peak (`--kv-budget peak`); plans with the true
lengths, replays in the simulator (continuous engine, max_lag 2) and prints a table: long-class minibatches
(group maximum above 8,000 tokens) and their size, instance finish spread, preemptions and end-to-end time.
Reads the evaluation-only AIME lengths from ../shared/data at run time.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asp_cli.arrange.pipeline as P  # noqa: E402
from asp_cli import columns as C  # noqa: E402
from asp_cli.bench.compare import WORKLOADS, build_workload, true_predictions  # noqa: E402
from asp_cli.costmodel import load_preset  # noqa: E402
from asp_cli.sim.records import SimulationSettings  # noqa: E402
from asp_cli.sim.run import simulate_schedule

FACTORS = (1.0, 0.85, 0.75, 0.6, 0.4)
LONG_TOKENS = 8000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (args.data / "aime_r1distill1.5b_lengths").is_dir():
        print(f"Skipped: {args.data} has no AIME lengths (evaluation-only data, read at run time).", file=sys.stderr)
        return
    preset = load_preset("h100-qwen2.5-7b")
    spec = WORKLOADS["mix-k8-n8"]
    settings = dataclasses.replace(spec.settings(), seed=args.seed)
    workload = build_workload(spec.name, args.data, spec.sources, settings, seed=args.seed)
    position = dict(zip(workload.prompts[C.ROW].to_list(), range(workload.prompts.height)))
    oracle = true_predictions(workload.truth, workload.predictions[C.PROMPT_TOKENS].to_numpy(), settings.plan_with)
    original = P.kv_footprint
    print("| groups counted | long minibatches | mean size | finish spread s | preemptions | end-to-end s |")
    print("|---|---:|---:|---:|---:|---:|")
    try:
        for factor in (*FACTORS, "peak"):
            if factor == "peak":
                P.kv_footprint = original
                counted, budget = "at the expected peak (`--kv-budget peak`)", "peak"
            else:
                P.kv_footprint = lambda p, t, m, n, b, f=factor: np.ceil(f * original(p, t, m, n, "whole")).astype(np.int64)
                counted, budget = f"whole x {factor:.2f}", "whole"
            planned = dataclasses.replace(settings, kv_budget=budget)
            frame = P.arrange(workload.prompts, oracle, planned, preset=preset).sort("seq")
            truth = workload.truth[np.array([position[r] for r in frame[C.ROW].to_list()])]
            sim = SimulationSettings(samples_per_prompt=settings.samples_per_prompt,
                                     train_batch_size=settings.train_batch_size, max_lag=spec.max_lag)
            metrics = simulate_schedule(frame, truth, preset, sim, instances=settings.instances).metrics
            per_mb = frame.with_columns(pl.Series("gmax", truth.max(axis=1))).group_by("minibatch").agg(
                pl.len().alias("n"), pl.col("gmax").max().alias("longest"))
            long = per_mb.filter(pl.col("longest") > LONG_TOKENS)
            print(f"| {counted} | {long.height} | {long['n'].mean():.1f} | {metrics['instance_finish_spread_s']:,.0f} "
                  f"| {metrics['preemptions']:,} | {metrics['end_to_end_s']:,.0f} |")
    finally:
        P.kv_footprint = original


if __name__ == "__main__":
    main()
