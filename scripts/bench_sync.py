"""Synchronous training (verl's default trainer) on the blocking `continuous` engine: asp's plans against the
equal-footing baselines, every row replayed with the trainer following the schedule's steps at --max-lag 0.

    python scripts/bench_sync.py --seeds 4            # about 12 minutes on 2 cores; reads ../shared/data
    python scripts/bench_sync.py --seeds 4 --mode static   # the padded engine (HF generate)

Prints a Markdown table (docs/benchmarks.md, "Synchronous training on blocking engines"): per workload, each
row's end-to-end time over a shuffle cut into asp's sizes (`random (asp sizes)`), mean +- sd over the seeds,
and the 90th-percentile step deviation (|step mean length / epoch mean - 1|) of the representative ones.
asp cuts each synchronous step either way, whichever its predictions say ends sooner: dealt into minibatches of
balanced work, or cut consecutively longest first (`asp_cli.arrange.packing.cut_per_step`). `per-step, cut
longest first` is the per-step plan as it was before 2026-12-04 (every step cut), `per-step, always dealt` as
it was from then to 2026-12-05 (every step dealt), kept to show what each change did. The sorts in asp's sizes
are cut train batch by train batch (since 2026-12-05; before, their minibatches crossed steps and ran at a lag
of 1 against the bound of 0).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKLOADS = ("gsm8k-k4-n8", "mix-k8-n8", "mix-k16-n16", "mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")
BASELINES = ("random (asp sizes)", "verl-default", "short-first (asp sizes)", "long-first (asp sizes)")
# asp's rows: (label, arrangement, steps rule, how each step is cut: None as asp does, "dealt" always dealt as
# 2026-12-04, "cut" cut longest first as before that)
ASP_ROWS = (("asp (auto)", "auto", "any", None), ("asp (auto, --steps representative)", "auto", "representative", None),
            ("asp long-first", "long-first", "any", None), ("asp per-step", "per-step", "any", None),
            ("per-step, always dealt", "per-step", "any", "dealt"),
            ("per-step, cut longest first", "per-step", "any", "cut"))


def run(names: tuple[str, ...], seeds: int, data: Path,
        mode: str = "continuous") -> dict[str, dict[str, list[tuple[float, float]]]]:
    import asp_cli.arrange.pipeline as pipeline
    from asp_cli.bench.compare import WORKLOADS as SPECS
    from asp_cli.bench.compare import build_workload, compare
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    own = pipeline.cut_per_step
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for name in names:
        spec = SPECS[name]
        rows: dict[str, list[tuple[float, float]]] = {}
        for seed in range(seeds):
            settings = dataclasses.replace(spec.settings(seed), trainer="schedule")
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            base = {r["arrangement"]: r for r in compare(workload.prompts, workload.predictions, workload.truth,
                                                         settings, preset, mode=mode, max_lag=0,
                                                         include=BASELINES)}
            reference = base["random (asp sizes)"]["end_to_end_s"]
            for label in BASELINES:
                rows.setdefault(label, []).append((base[label]["end_to_end_s"] / reference,
                                                   base[label]["step_length_deviation_p90"]))
            for label, arrangement, steps, variant in ASP_ROWS:
                if variant == "cut":  # the cut of before 2026-12-04: each step's groups in order, longest first
                    pipeline.cut_per_step = lambda *a, **k: own(*a[:5])
                elif variant == "dealt":  # every step dealt, as from 2026-12-04 to 2026-12-05
                    pipeline.cut_per_step = lambda *a, **k: own(*a)
                try:
                    asp = compare(workload.prompts, workload.predictions, workload.truth,
                                  dataclasses.replace(settings, arrangement=arrangement, steps=steps), preset,
                                  mode=mode, max_lag=0, include=("asp",))[0]
                finally:
                    pipeline.cut_per_step = own
                rows.setdefault(label, []).append((asp["end_to_end_s"] / reference,
                                                   asp["step_length_deviation_p90"]))
            print(f"{name} seed {seed} done", file=sys.stderr, flush=True)
        results[name] = rows
    return results


def table(results: dict[str, dict[str, list[tuple[float, float]]]]) -> str:
    labels = [*BASELINES[1:], *(r[0] for r in ASP_ROWS)]
    lines = ["| workload | " + " | ".join(labels) + " | step dev p90: random / per-step |",
             "|---|" + "---:|" * (len(labels) + 1)]
    for name, rows in results.items():
        cells = []
        for label in labels:
            ratios = np.array([r for r, _ in rows[label]])
            cells.append(f"{ratios.mean():.3f} +- {ratios.std(ddof=1) if ratios.size > 1 else 0.0:.3f}")
        dev = (np.mean([d for _, d in rows["random (asp sizes)"]]), np.mean([d for _, d in rows["asp per-step"]]))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {dev[0]:.2f} / {dev[1]:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--mode", default="continuous", choices=("continuous", "static"),
                        help="the blocking engine: continuous batching (vLLM offline) or padded (HF generate)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if not args.data.is_dir():
        print(f"{args.data}: no such folder; this benchmark reads ../shared/data (--data)", file=sys.stderr)
        return 3
    names = tuple(n for n in args.workloads.split(",") if n)
    print(table(run(names, args.seeds, args.data, args.mode)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
