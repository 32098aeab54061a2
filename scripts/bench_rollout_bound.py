#!/usr/bin/env python3
"""Engines that refill freed slots, with a trainer that is not the bottleneck: the three large workloads of
docs/benchmarks.md replayed with the trainer's step cost scaled down.

    python scripts/bench_rollout_bound.py [--trainer-scale 0.25] [--seeds 4]

The benchmark's preset prices a training step for 8 trainer GPUs (docs/cost-model.md, "The trainer"), which
makes the large workloads trainer-bound: the trainer's steps back to back take longer than the rollout's own
lower bound, so no order of the rollout can shorten the run by much ("Room for an order on engines that
refill"). Published step breakdowns of synchronous verl runs put rollout at 66-72% of a step and training at
21-23% (RollPacker, arXiv 2509.21009, section 2.2), and a deployment that moves GPUs to the
trainer until it no longer waits is rollout-bound. So here `train_fixed_s` and `train_per_token_s` are
multiplied by ``--trainer-scale`` (0.25: four times the trainer GPUs), for asp's plan and every baseline alike,
and the equal-footing summaries of bench_simulate.py are printed over the round-robin deal: at lag 2 and without
a lag bound. A first table says which side binds at each scale (seed 0's workload: the trainer's steps back to
back, and the rollout's lower bound). About 25 minutes on two cores at 4 seeds. ``--planned`` prints instead
the lag-2 summary with asp planned for engines that keep to its instance column (`--dispatch planned`);
``--sync`` the summaries of verl's default synchronous trainer (max_lag 0), free and planned. Reads
../shared/data; exits with a message when it is absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_simulate import seed_summary  # noqa: E402

LARGE = ("mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")


def scaled_preset(preset, scale: float):
    """The preset with its training step ``scale`` times as costly (the weight sync unchanged)."""
    return dataclasses.replace(preset, train_fixed_s=preset.train_fixed_s * scale,
                               train_per_token_s=preset.train_per_token_s * scale)


def regime_table(data: Path, preset, scales: tuple[float, ...]) -> str:
    """Seed 0 of each large workload: the trainer's steps back to back over the rollout's lower bound, at each
    trainer scale (above 1: trainer-bound, every order waits for the trainer)."""
    from bench_streaming_room import replay_frame

    from asp_cli.bench.baselines import BASELINES
    from asp_cli.bench.compare import WORKLOADS, build_workload

    deal = BASELINES["round-robin"]
    lines = ["| workload | " + " | ".join(f"trainer x{s:g}: trainer / rollout bound" for s in scales) + " |",
             "|---|" + "---:|" * len(scales)]
    for name in LARGE:
        spec = WORKLOADS[name]
        settings = dataclasses.replace(spec.settings(0), engine="streaming")
        workload = build_workload(name, data, spec.sources, settings, seed=0)
        cells = []
        for scale in scales:
            scaled = scaled_preset(preset, scale)
            frame = deal.arrange(workload.prompts, workload.predictions, settings, scaled)
            metrics = replay_frame(scaled, settings, settings.max_lag, workload, frame, deal.dispatch).metrics
            trainer = metrics["lower_bound_end_to_end_terms_s"]["trainer"]
            cells.append(f"{trainer / metrics['lower_bound_rollout_s']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from asp_cli.costmodel import load_preset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--trainer-scale", type=float, default=0.25,
                        help="multiply the training step's cost by this (0.25: four times the trainer GPUs)")
    parser.add_argument("--regime-only", action="store_true", help="only the first table (seconds)")
    parser.add_argument("--planned", action="store_true",
                        help="instead of the two free-dispatch tables: asp planned for and replayed with "
                             "--dispatch planned, at lag 2 (about 12 minutes)")
    parser.add_argument("--sync", action="store_true",
                        help="instead: verl's default synchronous trainer (max_lag 0), asp under free dispatch and "
                             "planned for --dispatch planned (verl's router plug-in), about 15 minutes")
    args = parser.parse_args(argv)
    if not (args.trainer_scale > 0):
        parser.error("--trainer-scale must be above 0")
    if not (args.data / "README.md").exists():
        print(f"bench_rollout_bound: {args.data} not found (the project's shared data); nothing measured",
              file=sys.stderr)
        return 3
    preset = load_preset("h100-qwen2.5-7b")
    print(regime_table(args.data, preset, (1.0, args.trainer_scale)) + "\n", flush=True)
    if args.regime_only:
        return 0
    scaled = scaled_preset(preset, args.trainer_scale)
    if args.sync:
        for dispatch in ("free", "planned"):
            text = seed_summary(args.data, scaled, seeds=args.seeds, mode="streaming", names=LARGE,
                                reference="round-robin", dispatch=dispatch, max_lag=0, lag_given=True)[0]
            print(f"Trainer step cost x{args.trainer_scale:g}. " + text + "\n", flush=True)
        return 0
    if args.planned:
        text = seed_summary(args.data, scaled, seeds=args.seeds, mode="streaming", names=LARGE,
                            reference="round-robin", dispatch="planned")[0]
        print(f"Trainer step cost x{args.trainer_scale:g}. " + text + "\n", flush=True)
        return 0
    for lag in (2, None):
        keywords = {} if lag == 2 else {"max_lag": None, "lag_given": True}
        text = seed_summary(args.data, scaled, seeds=args.seeds, mode="streaming", names=LARGE,
                            reference="round-robin", **keywords)[0]
        print(f"Trainer step cost x{args.trainer_scale:g}. " + text + "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
