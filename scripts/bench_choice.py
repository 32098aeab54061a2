"""What `--arrangement auto` costs at scale: the whole `asp schedule` command with auto against the same command
with one named arrangement (`interleave`), per engine, on N prompts generated as scripts/bench_schedule.py
generates them (issue 17: auto at most 2x today's schedule time at 1M prompts).

    python scripts/bench_choice.py --prompts 1000000

Each setting runs `asp schedule` as a child process, `--runs` times in turn (interleave, auto, interleave, ...),
and reports the median wall time and the CPU seconds (user + system, from the children's resource usage) of
each; the ratio is auto's over interleave's. The choice itself, judged on a 4,096-prompt sample, costs the same
at any size; what grows with the input is the arrangement of the whole file that follows it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (label, options): the engines `asp schedule` plans for, with and without a lag bound where it decides the plan.
SETTINGS = (
    ("continuous (default)", ()),
    ("static", ("--engine", "static")),
    ("streaming, --max-lag 2", ("--engine", "streaming", "--max-lag", "2")),
    ("streaming, no bound", ("--engine", "streaming")),
    ("streaming, --max-lag 0", ("--engine", "streaming", "--max-lag", "0")),
)


def run_schedule(asp: str, prompts: Path, out: Path, options: tuple[str, ...]) -> tuple[float, float]:
    """One `asp schedule` run: (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([asp, "schedule", str(prompts), "-o", str(out), "--quiet", "--force", *options],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--runs", type=int, default=2, help="runs of each command (the median is reported)")
    args = parser.parse_args()
    from bench_schedule import make_prompts  # the same generated prompts as the scale benchmark

    asp = str(Path(sys.executable).with_name("asp"))
    if not os.path.exists(asp):
        sys.exit(f"bench_choice: no `asp` next to {sys.executable}; pip install -e . into this environment")
    print(f"{args.prompts:,} prompts, --instances {args.instances}; `asp schedule`, median of {args.runs} runs")
    print("| setting | interleave wall s | auto wall s | auto / interleave | interleave CPU s | auto CPU s | "
          "auto / interleave (CPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        prompts = Path(folder) / "prompts.jsonl"
        out = Path(folder) / "schedule.parquet"
        make_prompts(args.prompts, prompts)
        for label, options in SETTINGS:
            options = ("--instances", str(args.instances), *options)
            times: dict[str, list[tuple[float, float]]] = {"interleave": [], "auto": []}
            for _ in range(args.runs):
                for name in times:
                    times[name].append(run_schedule(asp, prompts, out, (*options, "--arrangement", name)))
            wall = {name: statistics.median(run[0] for run in runs) for name, runs in times.items()}
            cpu = {name: statistics.median(run[1] for run in runs) for name, runs in times.items()}
            print(f"| {label} | {wall['interleave']:.1f} | {wall['auto']:.1f} | "
                  f"{wall['auto'] / wall['interleave']:.2f}x | {cpu['interleave']:.1f} | {cpu['auto']:.1f} | "
                  f"{cpu['auto'] / cpu['interleave']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
