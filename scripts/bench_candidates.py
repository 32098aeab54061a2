#!/usr/bin/env python3
"""Every candidate of `--arrangement auto`, as auto's draws saw it and as the true lengths replay it, per seed.

    python scripts/bench_candidates.py aime-k8-n8-b256 [--seeds 4] [--mode streaming] [--max-lag 2]
                                       [--trainer-scale 0.25]

For one benchmark workload (`asp_cli.bench.compare.WORKLOADS`) and each seed: auto's pick; the reference
arrangement of the engine (least-pending routing of a shuffle on `streaming`, a shuffle in asp's sizes on the
blocking engines) and, on `streaming`, the round-robin deal, the length-aware router and verl's chunks dealt whole
(`count-balance`); then every candidate
with its time under each of auto's draws over the shuffle's under the same draw, and its time replayed on
the true lengths (forced with `--arrangement NAME`, the way bench_simulate.py replays asp: same engine, lag bound,
free dispatch) over the reference. ``--trainer-scale`` prices the training step as bench_rollout_bound.py does.
A diagnostic of auto's choice (docs/benchmarks.md, "With a trainer that does not bind"): about 1 minute per seed
of aime-k8-n8-b256. Reads ../shared/data; exits 3 with a message when it is absent, 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rollout_bound import scaled_preset  # noqa: E402
from bench_simulate import REFERENCE  # noqa: E402

# The baselines shown beside the reference on `streaming`: the round-robin deal, the length-aware router, and
# verl's chunks of a train batch each sent whole to the first free server (`count-balance`).
ROUTERS = ("round-robin", "length-aware", "count-balance")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--mode", default="streaming", choices=("continuous", "static", "streaming"))
    parser.add_argument("--max-lag", default="2", help="an integer, or none")
    parser.add_argument("--trainer-scale", type=float, default=1.0)
    args = parser.parse_args()
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.compare import ASP, WORKLOADS, build_workload, compare
    from asp_cli.costmodel import load_preset

    if args.workload not in WORKLOADS:
        parser.error(f"no workload {args.workload!r}; one of {', '.join(WORKLOADS)}")
    if args.trainer_scale <= 0:
        parser.error("--trainer-scale must be above 0")
    if args.max_lag != "none" and not args.max_lag.isdigit():
        parser.error("--max-lag must be an integer or none")
    if not args.data.is_dir():
        print(f"{args.data} is not there (the real length data is read at run time): nothing measured",
              file=sys.stderr)
        sys.exit(3)
    spec = WORKLOADS[args.workload]
    lag = None if args.max_lag == "none" else int(args.max_lag)
    preset = scaled_preset(load_preset("h100-qwen2.5-7b"), args.trainer_scale)
    reference = REFERENCE[args.mode]
    true_over_reference: dict[str, list[float]] = {}
    picks = []
    routed: dict[str, list[float]] = {}
    for seed in range(args.seeds):
        settings = dataclasses.replace(spec.settings(), seed=seed, trainer="arrival", max_lag=lag, engine=args.mode)
        workload = build_workload(args.workload, args.data, spec.sources, settings, seed=seed)
        include = (reference, *ROUTERS) if args.mode == "streaming" else (reference,)
        baselines = {r["arrangement"]: r["end_to_end_s"] for r in compare(
            workload.prompts, workload.predictions, workload.truth, settings, preset, mode=args.mode, max_lag=lag,
            include=include)}
        # As compare plans asp's own row for this engine.
        judged = dataclasses.replace(settings, engine=args.mode, kv_budget="auto" if args.mode == "static"
                                     and settings.kv_budget == "peak" else settings.kv_budget)
        _, choice = plan(workload.prompts, workload.predictions, judged, preset=preset)
        ref = baselines[reference]
        routers = "  ".join(f"{name} {baselines[name] / ref:.3f}" for name in ROUTERS if name in baselines)
        for name in ROUTERS:
            if name in baselines:
                routed.setdefault(name, []).append(baselines[name] / ref)
        print(f"seed {seed}: auto picks {choice.chosen}/{choice.kv_budget}; over {reference}: {routers}")
        # Each draw over the shuffle's under the same draw (the first candidate's where no shuffle was judged).
        base = next((c for c in choice.candidates if c["name"] == "shuffle"), choice.candidates[0])
        first = base["end_to_end_s_by_draw"]
        for c in choice.candidates:
            forced = dataclasses.replace(settings, arrangement=c["name"]).with_kv_cut(c["kv_budget"])
            rows = compare(workload.prompts, workload.predictions, workload.truth, forced, preset, mode=args.mode,
                           max_lag=lag, include=(ASP,))
            true = next(r["end_to_end_s"] for r in rows if r["arrangement"] == ASP) / ref
            name = f"{c['name']}/{c['kv_budget']}"
            true_over_reference.setdefault(name, []).append(true)
            if c["name"] == choice.chosen and c["kv_budget"] == choice.kv_budget:
                picks.append(true)
            draws = " ".join(f"{t / f:.3f}" for t, f in zip(c["end_to_end_s_by_draw"], first))
            print(f"  {name:22s} draws over {base['name']}: {draws}   true over {reference}: "
                  f"{true:.3f}")
    print(f"\nmean over {args.seeds} seeds, true end-to-end over {reference}:")
    for name, values in true_over_reference.items():
        print(f"  {name:22s} {np.mean(values):.3f}  ({', '.join(f'{v:.3f}' for v in values)})")
    print(f"  {'auto':22s} {np.mean(picks):.3f}  ({', '.join(f'{v:.3f}' for v in picks)})")
    for name, values in routed.items():  # mean +- its standard error over the seeds
        spread = np.std(values, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
        print(f"  {name + ' (baseline)':22s} {np.mean(values):.3f} +- {spread:.3f}")


if __name__ == "__main__":
    main()
