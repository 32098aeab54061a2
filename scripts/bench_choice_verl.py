#!/usr/bin/env python3
"""How well `--arrangement auto` chooses as verl routes an asynchronous trainer: its pick against every candidate
it judged, each forced and replayed on the true lengths as verl 0.9.1's fully asynchronous trainer routes it
(`asp_cli.sim.verl_async`, verl's balancer), the way auto itself now times them (docs/algorithms.md, section 8).

    python scripts/bench_choice_verl.py --seeds 4 --out choices.jsonl            # all ten workloads, lag 2, x0.25
    python scripts/bench_choice_verl.py --from choices.jsonl                      # the tables again, no replays

Per workload: how often auto's pick was the candidate fastest on the true lengths (within `BEST_SLACK`), its regret (its true time over
the best candidate's, minus 1; mean and worst over the seeds), and auto and the best candidate over verl's default
(a shuffle through verl's balancer). A second table replays choice rules on the same records: the plain tie rule
(the fastest expected, ties to the earliest candidate), auto's (the shuffle wins ties: kept unless another is
expected faster by more than the tie margin), and wider margins. The held-out workloads (chat-*) are shown apart: they were not used to set
any rule. Every record (candidates' expected and true times) goes to ``--out`` as JSON lines, so that other rules
can be tried without replaying. Reads ../shared/data; exits with a message when it is absent. About 15 minutes
for the ten workloads and four seeds on one core (docs/benchmarks.md; the small workloads 10-15 s a seed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from asp_cli.errors import SettingsError  # noqa: E402
from asp_cli.settings import check_lag  # noqa: E402

HELD_OUT_PREFIX = "chat"
# A pick this close to the fastest candidate's true time counts as the best (the replays' own noise).
BEST_SLACK = 0.004
# 0: the plain tie rule (the earliest candidate within the tie margin of the fastest); the tie margin itself:
# auto's rule since 2026-12-05 (`asp_cli.arrange.choose.keep_the_shuffle`); larger: what-ifs.
MARGINS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05)


def record(name: str, seed: int, data: Path, max_lag: int | None, trainer_scale: float) -> dict:
    """One workload and seed: auto's pick, and every candidate it judged, expected and on the true lengths."""
    import asp_cli.columns as C
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.compare import WORKLOADS as SPECS
    from asp_cli.bench.compare import build_workload
    from asp_cli.costmodel import load_preset
    from asp_cli.sim.verl_async import replay_async_frame
    from bench_rollout_bound import scaled_preset
    from bench_sync import arranged

    preset = scaled_preset(load_preset("h100-qwen2.5-7b"), trainer_scale)
    spec = SPECS[name]
    settings = dataclasses.replace(spec.settings(seed), engine="streaming", max_lag=max_lag)
    workload = build_workload(name, data, spec.sources, settings, seed=seed)
    position = {r: i for i, r in enumerate(workload.prompts[C.ROW].to_list())}

    def true_time(frame) -> float:
        frame = frame.sort("seq")
        index = np.fromiter((position[r] for r in frame[C.ROW].to_list()), dtype=np.int64, count=frame.height)
        return replay_async_frame(frame, workload.truth[index], preset, instances=settings.instances,
                                  train_batch_size=settings.train_batch_size, max_lag=max_lag,
                                  routing="least-pending", seed=seed).end_to_end_s

    frame, choice = plan(workload.prompts, workload.predictions, settings, preset=preset)
    default_frame, _ = arranged(workload, settings, preset, "least-pending", {})
    candidates = []
    for c in choice.candidates:
        forced = dataclasses.replace(settings, arrangement=c["name"]).with_kv_cut(c.get("kv_budget", choice.kv_budget))
        candidates.append({"name": c["name"], "kv_budget": c.get("kv_budget", choice.kv_budget),
                           "expected_s": c["expected_end_to_end_s"], "by_draw_s": c["end_to_end_s_by_draw"],
                           "true_s": true_time(plan(workload.prompts, workload.predictions, forced,
                                                    preset=preset)[0])})
    return {"workload": name, "seed": seed, "max_lag": max_lag, "trainer_scale": trainer_scale,
            "chosen": choice.chosen, "kv_budget": choice.kv_budget, "auto_true_s": true_time(frame),
            "verl_default_true_s": true_time(default_frame), "candidates": candidates}


def rule_pick(rec: dict, margin: float) -> dict:
    """The candidate a rule picks: the fastest expected (the earliest within auto's tie margin, candidates being
    in auto's tie order), kept to `shuffle` unless that one is expected faster than it by more than ``margin``."""
    from asp_cli.arrange.choose import TIE_MARGIN

    cands = rec["candidates"]
    fastest = min(c["expected_s"] for c in cands)
    pick = next(c for c in cands if c["expected_s"] <= fastest * (1.0 + TIE_MARGIN))
    shuffle = next((c for c in cands if c["name"] == "shuffle"), None)
    if margin > 0 and shuffle is not None and pick["expected_s"] > shuffle["expected_s"] * (1.0 - margin):
        return shuffle
    return pick


def tables(records: list[dict]) -> str:
    """The regret table per workload (auto's picks as recorded), then the rules' table (the plain tie rule, auto's,
    and wider margins), held-out apart."""
    from asp_cli.arrange.choose import TIE_MARGIN

    lines = ["| workload | seeds | auto picked the best | regret mean | regret worst | auto / verl default | "
             "best candidate / verl default | picks |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    by_workload: dict[str, list[dict]] = {}
    for rec in records:
        by_workload.setdefault(rec["workload"], []).append(rec)
    for name, recs in by_workload.items():
        regrets, hits, autos, bests = [], 0, [], []
        for rec in recs:
            best = min(c["true_s"] for c in rec["candidates"])
            regrets.append(rec["auto_true_s"] / best - 1.0)
            hits += rec["auto_true_s"] <= best * (1.0 + BEST_SLACK)
            autos.append(rec["auto_true_s"] / rec["verl_default_true_s"])
            bests.append(best / rec["verl_default_true_s"])
        picks = ", ".join(sorted({r["chosen"] for r in recs}))
        lines.append(f"| {name} | {len(recs)} | {hits}/{len(recs)} | {np.mean(regrets):.1%} | {max(regrets):.1%} | "
                     f"{np.mean(autos):.3f} | {np.mean(bests):.3f} | {picks} |")
    lines += ["", "| rule | regret, benchmark workloads (mean / worst) | over verl default, benchmark (mean / worst "
              "workload) | regret, held out (mean / worst) | over verl default, held out (mean / worst workload) |",
              "|---|---:|---:|---:|---:|"]
    for margin in MARGINS:
        cells = []
        for held in (False, True):
            recs = [r for r in records if r["workload"].startswith(HELD_OUT_PREFIX) == held]
            if not recs:
                cells += ["", ""]
                continue
            regrets, ratio = [], {}
            for rec in recs:
                true = rule_pick(rec, margin)["true_s"]
                regrets.append(true / min(c["true_s"] for c in rec["candidates"]) - 1.0)
                ratio.setdefault(rec["workload"], []).append(true / rec["verl_default_true_s"])
            means = [np.mean(v) for v in ratio.values()]
            cells += [f"{np.mean(regrets):.1%} / {max(regrets):.1%}", f"{np.mean(means):.3f} / {max(means):.3f}"]
        label = ("fastest expected, ties to the earliest candidate" if margin == 0 else
                 "shuffle wins ties (auto's rule)" if margin == TIE_MARGIN else
                 f"shuffle unless {margin:.0%} faster expected")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from asp_cli.bench.compare import WORKLOADS as SPECS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(SPECS))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--max-lag", default="2", help="the lag bound, 'none' for no bound")
    parser.add_argument("--trainer-scale", type=float, default=0.25, help="training step cost multiplier")
    parser.add_argument("--out", type=Path, default=None, help="append every record here (JSON lines)")
    parser.add_argument("--from", dest="source", type=Path, action="append", default=[],
                        help="print the tables of these records (JSON lines) instead of replaying")
    args = parser.parse_args(argv)
    if args.source:
        records = [json.loads(line) for path in args.source for line in path.read_text().splitlines() if line]
        print(tables(records))
        return 0
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if not (args.data / "README.md").exists():
        print(f"bench_choice_verl: {args.data} not found (the project's shared data); nothing measured",
              file=sys.stderr)
        return 3
    try:  # a fraction is verl's staleness_threshold (`asp_cli.settings.check_lag`)
        max_lag = None if args.max_lag == "none" else check_lag(float(args.max_lag))
    except (ValueError, SettingsError):
        parser.error(f"--max-lag takes a number of steps from 0 up or none (got {args.max_lag!r})")
    records = []
    for name in (n for n in args.workloads.split(",") if n):
        for seed in range(args.seeds):
            rec = record(name, seed, args.data, max_lag, args.trainer_scale)
            records.append(rec)
            if args.out is not None:
                with args.out.open("a") as out:
                    out.write(json.dumps(rec) + "\n")
            print(f"{name} seed {seed}: auto picked {rec['chosen']}", file=sys.stderr, flush=True)
    print(f"lag {args.max_lag}, trainer x{args.trainer_scale:g}, {args.seeds} seeds, as verl routes\n")
    print(tables(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
