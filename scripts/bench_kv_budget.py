"""How a group counts against the minibatch KV budget (`--kv-budget`): what it does on the benchmark workloads
(docs/benchmarks.md, "The KV budget").

    python scripts/bench_kv_budget.py --workloads [--seeds 4] [--data ../shared/data]
    python scripts/bench_kv_budget.py --probe [--seeds 4]
    python scripts/bench_kv_budget.py [--seed 0]

With ``--workloads``: every blocking benchmark workload (continuous engine, its own lag bound, free dispatch),
asp's default schedule (`--kv-budget auto`) against the same schedule made with `--kv-budget whole` (every group
counted at N x (prompt + mean), as before the peak accounting): end-to-end time, the preemptions it causes,
prompts per call, and asp against the best equal-footing baseline under each (the baselines in asp's sizes are
cut with the accounting asp used). About 15 minutes on two cores at 4 seeds.

With ``--probe``: the probe workload's true-lengths schedule (`bench_probe.py`'s "the true lengths" row, the
same policy, sizes and replay) made with each of `--kv-budget whole`, `peak` and `auto`, per seed. About 30 s.

Without either: on mix-k8-n8 with the true lengths, the whole footprint scaled by each factor, and the peak
accounting; a table of long-class minibatches (group maximum above 8,000 tokens) and their size, instance
finish spread, preemptions and end-to-end time. Both read the evaluation-only AIME lengths from
../shared/data at run time.
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


BASELINE_ROWS_SKIPPED = ("asp", "asp, planned instances", "asp (true lengths)", "lower bound")


def workload_table(data: Path, seeds: int) -> str:
    """asp with --kv-budget auto against --kv-budget whole on every blocking benchmark workload."""
    from asp_cli.bench.compare import compare

    preset = load_preset("h100-qwen2.5-7b")
    lines = ["| workload | seeds | whole, s | auto, s | change | peak chosen (of seeds judged both ways) | preemptions whole / auto | "
             "prompts per call whole / auto | asp / best equal, whole | asp / best equal, auto |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, spec in WORKLOADS.items():
        if spec.held_out:
            continue
        runs = {"whole": [], "auto": []}
        peak_chosen = judged_both = 0
        for seed in range(seeds):
            settings = dataclasses.replace(spec.settings(), seed=seed, engine="continuous")
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            for budget in runs:
                planned = dataclasses.replace(settings, kv_budget=budget)
                rows = compare(workload.prompts, workload.predictions, workload.truth, planned, preset,
                               mode="continuous", max_lag=spec.max_lag)
                asp = next(r for r in rows if r["arrangement"] == "asp")
                best = min(r["end_to_end_s"] for r in rows
                           if r.get("equal_footing") and r["arrangement"] not in BASELINE_ROWS_SKIPPED)
                runs[budget].append((asp["end_to_end_s"], asp["preemptions"], asp["prompts_per_call"],
                                     asp["end_to_end_s"] / best))
            _, choice = P.plan(workload.prompts, workload.predictions,
                               dataclasses.replace(settings, max_lag=spec.max_lag), preset=preset)
            peak_chosen += choice.kv_budget == "peak"
            judged_both += len({c["kv_budget"] for c in choice.candidates}) > 1
        mean = {b: np.mean(np.array(v), axis=0) for b, v in runs.items()}
        chosen = f"{peak_chosen} of {judged_both}" if judged_both else "does not bind"
        w, a = mean["whole"], mean["auto"]
        lines.append(f"| {name} | {seeds} | {w[0]:,.0f} | {a[0]:,.0f} | {a[0] / w[0] - 1:+.1%} | {chosen} "
                     f"| {w[1]:,.0f} / {a[1]:,.0f} | {w[2]:.1f} / {a[2]:.1f} | {w[3]:.3f} | {a[3]:.3f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def probe_table(data: Path, seeds: int) -> str:
    """The probe workload's true-lengths schedule (`bench_probe.py`'s last row: its policy, sizes and replay) cut
    under each KV accounting, per seed and on average."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_probe as B
    from asp_cli.arrange.pipeline import arrange
    from asp_cli.settings import ScheduleSettings

    world = B.build(data, "meta-llama/Meta-Llama-3.1-8B-Instruct")
    budgets = ("whole", "peak", "auto")
    times: dict[str, list[float]] = {b: [] for b in budgets}
    for seed in range(seeds):
        truth = B.draw(world, seed, False)["truth"]
        for budget in budgets:
            settings = ScheduleSettings(instances=4, samples_per_prompt=B.N, train_batch_size=64, minibatch_size=32,
                                        max_response_tokens=B.CAP, seed=seed, kv_budget=budget)
            preset = load_preset(settings.preset)
            frame = arrange(world["prompts"], true_predictions(truth, world["prompt_tokens"]), settings, preset=preset)
            times[budget].append(B.simulate(world, frame, truth, settings, preset))
    lines = ["| --kv-budget | " + " | ".join(f"seed {s}, s" for s in range(seeds)) + " | mean, s |",
             "|---|" + "---:|" * (seeds + 1)]
    for budget in budgets:
        lines.append(f"| {budget} | " + " | ".join(f"{t:,.0f}" for t in times[budget])
                     + f" | {np.mean(times[budget]):,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workloads", action="store_true", help="the comparison on every blocking workload")
    parser.add_argument("--seeds", type=int, default=4, help="with --workloads or --probe: seeds")
    parser.add_argument("--probe", action="store_true", help="the probe workload's true-lengths schedule "
                        "(bench_probe.py's last row) under each --kv-budget")
    args = parser.parse_args()
    if not (args.data / "aime_r1distill1.5b_lengths").is_dir():
        print(f"Skipped: {args.data} has no AIME lengths (evaluation-only data, read at run time).", file=sys.stderr)
        return
    if args.workloads:
        print(workload_table(args.data, args.seeds))
        return
    if args.probe:
        print(probe_table(args.data, args.seeds))
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
