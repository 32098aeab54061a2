"""How far does `asp schedule`'s summary line "expected X% faster than a shuffle" hold? Regenerate
docs/benchmarks.md's section "How far the expected gain holds".

    python scripts/bench_expectation.py [--seeds 4] [--workloads NAME,...] [--write-docs]

For every benchmark workload (the held-out ones included) and seed, auto judges its candidates under lengths
drawn around its predictions (`asp_cli.arrange.choose`) and the summary reports its pick's expected saving over
the candidate `shuffle` (`expected_gain_over_shuffle`, with its least and most over the draws). Here the pick and
the shuffle are each forced (`--arrangement NAME`, the same KV cut) and replayed on the workload's true lengths,
routed as auto timed them: the blocking engine (`continuous`, each workload's own lag bound) by the simulator's
replay; a synchronous trainer on servers (`streaming`, `--max-lag 0 --trainer schedule`) as its framework routes a
step (`asp_cli.sim.submit_all`): verl's balancer, sglang-router's cache-aware policy (slime, `--router
cache-aware`), OpenRLHF's deal of each batch's groups in turn (`--router group-round-robin`). The table sets the expected saving beside the realized one (mean over seeds) and
counts the seeds whose realized saving fell within the draws' range. The predictions are the benchmark's own
(the bundled model with the workload's history: AIME's own earlier samples, other generators' answers for the
ZeroEval and AlpacaEval sets). Reads ../shared/data; skipped with a message when it is absent. About 6 minutes
on two cores at 4 seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from bench_simulate import write_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## How far the expected gain holds"

FINDINGS = """
What this shows (measured 2026-12-07, `h100-qwen2.5-7b`, the code of that day):

- **On the blocking engine the summary's figure holds**: within 1.3 points below to 3.5 points above the
  replayed saving on every workload (mean 1.1 points above); the largest gap is long reasoning at 4 prompts a
  group (aime-k8-n4: 10.6% expected, 7.0% replayed).
- **For a synchronous trainer on servers it overstates the saving on the mixes by 1.1-5.0 points**, alike as
  verl, sglang-router (slime) and OpenRLHF route a step: mix-k8-n8 40.0% expected as verl routes, 35.0% replayed;
  mix-k8-n8-b256 26.3% and 21.7%. On long reasoning it is within 0.4 points at train batches of 256, 1.7-1.9
  above at 4 a group. The saving itself is real and large there (the curriculum of a sort: "As verl routes");
  only its size is overstated, by 7-21% of it, and by 44% on mix-k16-n16-b512 as verl routes (8.2% expected,
  5.7% replayed).
- **On the held-out chat workload alone it overstates most**: 14.0% expected, 4.7% +- 5.9% replayed (9.3-9.4
  points, every router); the chat + math + reasoning mix is 0.7-3.4 points above.
- **For verl's fully asynchronous trainer it holds** (`--settings verl-async`, not in the table: each workload's
  lag bound, as verl routes, where auto's draws are heavy-tailed): within 0.9 points on every workload, held-out
  chat included (chat-k8-n8 2.3% expected, 2.2% replayed), the replayed saving within the draws' range on 38 of
  40 runs; the savings there are small (0-4%).
- **Why**: a synchronous step waits for its longest sample, and the true lengths (other models' answers than
  the history's for GSM8K, MATH and the chat prompts) have rare long answers the log-normal draws around the
  predictions lack; a sorted plan's short steps are where a rare long sample costs most. The realized saving fell
  within the range of auto's own draws on 0-4 seeds of 4 (97 of the table's 160 runs): that range is the
  draws' spread, not an interval the truth keeps to. GSM8K is the one workload understated on every setting
  (by 1.1-1.3 points).
- **Tried, not adopted: heavy-tailed draws for synchronous steps** (the Student t of 4 degrees auto uses where it
  times an asynchronous trainer as verl routes, `choose.SAMPLE_TAIL_DF`), as verl routes, 4 seeds: the figure
  then understated the saving on the six mixes by 1.6-5.5 points (mix-k8-n8 30.9% expected, 35.0% replayed;
  GSM8K by 3.6), and on held-out chat the picks replayed a 2.9% saving where the normal draws' picks replayed
  4.7% (the other workloads' picks within 0.6 points: GSM8K 0.6 better, mix-k16-n16 0.5 worse). Neither rule is right on all; the normal, which
  chooses as well or better, stays, and the summary says how far below its figure the replayed saving has
  come out (up to 5 points, 9 on chat alone, more where each sample is another model's answer).
- The sample data's history-planned schedule (README, "With that epoch's history") is the same effect, larger:
  its emulated GSM8K and MATH samples are each a different one of about 40 models' answers.
"""

# name: (engine, lag bound or the workload's own, trainer, router, label)
SETTINGS = {
    "blocking": ("continuous", "workload", "arrival", None, "blocking engine, the workload's lag bound"),
    "verl-sync": ("streaming", 0, "schedule", None, "verl's synchronous trainer on servers, as verl routes"),
    "slime-sync": ("streaming", 0, "schedule", "cache-aware", "slime's synchronous trainer, as sglang-router routes"),
    "openrlhf-sync": ("streaming", 0, "schedule", "group-round-robin", "OpenRLHF's synchronous trainer, as it deals"),
    # Not in the table (`--settings verl-async`): verl's fully asynchronous trainer at the workload's lag bound,
    # every sample placed by count as it is submitted (`asp_cli.sim.verl_async`), as auto times it.
    "verl-async": ("streaming", "workload", "arrival", None, "verl's asynchronous trainer, as verl routes"),
}
TABLE_SETTINGS = ("blocking", "verl-sync", "slime-sync", "openrlhf-sync")


def realized_s(row: dict, engine: str) -> float:
    """The replayed time auto's judging corresponds to: as verl routes on servers, the simulator's elsewhere."""
    return float(row["verl_routed_end_to_end_s"] if engine == "streaming" else row["end_to_end_s"])


def expectation_rows(data: Path, preset, seeds: int, names: tuple[str, ...] | None = None,
                     settings_named: tuple[str, ...] = TABLE_SETTINGS) -> list[dict]:
    """One row per workload and setting: the summary's expected saving over the shuffle, the realized one."""
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.compare import ASP, WORKLOADS, build_workload, compare

    rows = []
    for name, spec in WORKLOADS.items():
        if names is not None and name not in names:
            continue
        for engine, lag_rule, trainer, router, label in (SETTINGS[n] for n in settings_named):
            expected, realized, inside, picks = [], [], 0, []
            for seed in range(seeds):
                lag = spec.max_lag if lag_rule == "workload" else lag_rule
                settings = dataclasses.replace(spec.settings(), seed=seed, engine=engine, max_lag=lag,
                                               trainer=trainer, router=router)
                workload = build_workload(name, data, spec.sources, settings, seed=seed)
                _, choice = plan(workload.prompts, workload.predictions, settings, preset=preset)
                document = choice.to_dict()
                gain = document.get("expected_gain_over_shuffle")
                if gain is None:  # the shuffle could not keep the bound: nothing to compare with
                    continue
                times = {}
                for arrangement in (choice.chosen, "shuffle"):
                    forced = dataclasses.replace(settings, arrangement=arrangement).with_kv_cut(choice.kv_budget)
                    replay = compare(workload.prompts, workload.predictions, workload.truth, forced, preset,
                                     max_lag=lag, mode=engine, include=(ASP,))
                    times[arrangement] = realized_s(replay[0], engine)
                real = 1.0 - times[choice.chosen] / times["shuffle"]
                band = document.get("gain_over_shuffle_by_draw") or {"min": gain, "max": gain}
                expected.append(gain)
                realized.append(real)
                inside += band["min"] - 0.005 <= real <= band["max"] + 0.005
                picks.append(choice.chosen)
            if not expected:
                continue
            rows.append({"workload": name, "setting": label, "held_out": spec.held_out, "seeds": len(expected),
                         "expected": float(np.mean(expected)), "realized": float(np.mean(realized)),
                         "realized_sd": float(np.std(realized)), "inside": inside,
                         "overstated_by": float(np.mean(np.array(expected) - np.array(realized))),
                         "picks": ", ".join(sorted(set(picks)))})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| workload | setting | picks | expected saving over a shuffle | realized (sd) | expected - realized "
             "| realized within the draws' range |", "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        held = " (held out)" if r["held_out"] else ""
        lines.append(f"| {r['workload']}{held} | {r['setting']} | {r['picks']} | {r['expected']:.1%} | "
                     f"{r['realized']:.1%} ({r['realized_sd']:.1%}) | {r['overstated_by']:+.1%} | "
                     f"{r['inside']} of {r['seeds']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workloads", default=None, help="comma-separated workload names (default: all)")
    parser.add_argument("--settings", default=",".join(TABLE_SETTINGS),
                        help=f"comma-separated, of {', '.join(SETTINGS)} (default: the table's)")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the section in --doc")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    chosen = tuple(args.settings.split(","))
    if not chosen or any(n not in SETTINGS for n in chosen):
        parser.error(f"--settings takes names of {', '.join(SETTINGS)} (got {args.settings!r})")
    if args.write_docs and chosen != TABLE_SETTINGS:
        parser.error("--settings other than the table's is a what-if; it does not rewrite the docs")
    if not args.data.is_dir():
        print(f"Skipped: {args.data} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    from asp_cli.costmodel import load_preset

    names = tuple(args.workloads.split(",")) if args.workloads else None
    rows = expectation_rows(args.data, load_preset("h100-qwen2.5-7b"), args.seeds, names, chosen)
    body = (f"{SECTION}\n\n`python scripts/bench_expectation.py --seeds {args.seeds}`: the summary's expected saving of auto's "
            "pick over a shuffle beside the saving replayed on the true lengths (mean over seeds).\n\n"
            + table(rows) + FINDINGS)
    print(body)
    if args.write_docs:
        write_section(args.doc, SECTION, body)


if __name__ == "__main__":
    main()
