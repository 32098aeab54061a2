#!/usr/bin/env python3
"""How `--arrangement auto` should decide the KV cut: three rules replayed on the same candidates
(docs/benchmarks.md, "The KV budget").

    python scripts/bench_kv_choice.py [--seeds 4] [--data ../shared/data]

For every blocking benchmark workload whose minibatch KV budget binds, each seed and two trainer orders
(arrival with the workload's lag bound; the schedule's own steps without one), every candidate arrangement is
cut both ways (each group counted whole, or at its share of its wave's expected peak: `--kv-budget`), judged
as auto judges it (its expected end-to-end time over the predictive draws) and replayed on the true lengths.
Then three rules pick from the same figures, each with auto's tie margin (the earliest candidate within 0.5%
of the fastest):

- "all ten": the fastest of the ten at once (the whole ones first, so a tie keeps the whole cut);
- "winner's cut": the fastest cut whole, switched to its own peak cut when that is expected faster;
- "settled on the winner" (what auto does): the fastest cut whole; if its peak cut is expected faster, the
  fastest of the five cut at the peak.

The table gives each rule's mean true end-to-end time against counting whole (asp before the peak cut), its
regret (true time over the best of the ten, minus 1) and the picks' step deviation. About 10 minutes on two
cores at 4 seeds. Reads the evaluation-only AIME lengths from ../shared/data at run time.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS_BOUND = ("mix-k8-n8", "mix-k2-n4", "mix-k16-n16", "mix-k8-n8-b256", "aime-k8-n8-b256", "mix-k16-n16-b512")
TRAINERS = (("arrival", "spec"), ("schedule", None))
MARGIN = 0.005
RULES = ("whole only", "all ten", "winner's cut", "settled on the winner")


def _pick(candidates: list[dict]) -> dict:
    fastest = min(c["expected"] for c in candidates)
    return next(c for c in candidates if c["expected"] <= fastest * (1.0 + MARGIN))


def pick(rule: str, candidates: list[dict]) -> dict:
    """What ``rule`` picks from every candidate cut both ways (the whole ones first, in auto's order)."""
    whole = [c for c in candidates if c["kv_budget"] == "whole"]
    peak = [c for c in candidates if c["kv_budget"] == "peak"]
    winner = _pick(whole)
    if rule == "whole only":
        return winner
    if rule == "all ten":
        return _pick(whole + peak)
    own = next(c for c in peak if c["name"] == winner["name"])
    if own["expected"] >= winner["expected"] * (1.0 - MARGIN):
        return winner
    return own if rule == "winner's cut" else _pick(peak)


def judged(data: Path, name: str, seed: int, trainer: str, lag) -> list[dict]:
    """Every candidate cut both ways: auto's expected time and the true-lengths replay."""
    from asp_cli.arrange.choose import candidates_for, choose_arrangement
    from asp_cli.arrange.pipeline import _arrange_named
    from asp_cli.bench.compare import ASP, WORKLOADS, build_workload, compare
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    spec = WORKLOADS[name]
    max_lag = spec.max_lag if lag == "spec" else lag
    settings = dataclasses.replace(spec.settings(), seed=seed, engine="continuous", max_lag=max_lag, trainer=trainer)
    workload = build_workload(name, data, spec.sources, settings, seed=seed)
    out = []
    for kv_budget in ("whole", "peak"):
        # auto's own judgement, every candidate under one cut (the choice's draws, trial and tie order).
        fixed = dataclasses.replace(settings, kv_budget=kv_budget)
        choice = choose_arrangement(_arrange_named, workload.prompts, workload.predictions, fixed, preset)
        expected = {c["name"]: c["expected_end_to_end_s"] for c in choice.candidates}
        for arrangement in candidates_for("continuous"):
            if arrangement not in expected:
                continue
            forced = dataclasses.replace(fixed, arrangement=arrangement)
            row = compare(workload.prompts, workload.predictions, workload.truth, forced, preset, max_lag=max_lag,
                          mode="continuous", include=(ASP,))[0]
            out.append({"name": arrangement, "kv_budget": kv_budget, "expected": expected[arrangement],
                        "true": row["end_to_end_s"], "deviation": row["step_length_deviation_p90"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    if not (args.data / "aime_r1distill1.5b_lengths").is_dir():
        print(f"Skipped: {args.data} has no AIME lengths (evaluation-only data, read at run time).", file=sys.stderr)
        return
    print("| trainer | workload | " + " | ".join(f"{r}: vs whole (regret), step dev" for r in RULES) + " |")
    print("|---|---|" + "---:|" * len(RULES))
    for trainer, lag in TRAINERS:
        for name in WORKLOADS_BOUND:
            picks = {r: [] for r in RULES}
            for seed in range(args.seeds):
                candidates = judged(args.data, name, seed, trainer, lag)
                best = min(c["true"] for c in candidates)
                for rule in RULES:
                    c = pick(rule, candidates)
                    picks[rule].append((c["true"], c["true"] / best - 1.0, c["deviation"]))
            base = np.mean([p[0] for p in picks["whole only"]])
            cells = [f"{np.mean([p[0] for p in v]) / base - 1:+.1%} ({np.mean([p[1] for p in v]):.1%}), "
                     f"{np.mean([p[2] for p in v]):.2f}" for v in picks.values()]
            label = "arrival, lag as the workload's" if trainer == "arrival" else "schedule, no lag bound"
            print(f"| {label} | {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
