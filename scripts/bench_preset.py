"""Do the equal-footing summaries hold under another cost model? The summary tables of docs/benchmarks.md
("Simulated end-to-end time against baselines") for one engine, with asp's schedules, every baseline and the
replays all under the preset named.

    python scripts/bench_preset.py h200-qwen2.5-7b --mode continuous --seeds 4
    python scripts/bench_preset.py h100-qwen2.5-7b --mode streaming --seeds 4      # the same seeds, default preset

Prints the table (the columns of bench_simulate.py's); writes nothing. Reads `../shared/data`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="a preset name or a calibration file (asp calibrate -o)")
    parser.add_argument("--mode", choices=("continuous", "static", "streaming"), default="continuous")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--max-lag", default="workload",
                        help="'workload' (each workload's own bound), 'none', or a whole number")
    parser.add_argument("--workloads", default="", help="comma-separated names (default: every non-held-out one)")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args(argv)
    from asp_cli.costmodel import load_preset
    from asp_cli.errors import SettingsError

    try:
        preset = load_preset(args.preset)
    except SettingsError as exc:
        parser.error(str(exc))
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.max_lag not in ("workload", "none"):
        try:
            if int(args.max_lag) < 0:
                raise ValueError
        except ValueError:
            parser.error(f"--max-lag must be 'workload', 'none' or a whole number >= 0 (got {args.max_lag!r})")
    if not (args.data / "README.md").exists():
        print(f"bench_preset: {args.data} not found (the project's shared data); nothing measured", file=sys.stderr)
        return 3
    from bench_simulate import seed_summary

    lag_given = args.max_lag != "workload"
    max_lag = None if args.max_lag in ("workload", "none") else int(args.max_lag)
    names = tuple(n for n in args.workloads.split(",") if n) or None
    table, _ = seed_summary(args.data, preset, seeds=args.seeds, mode=args.mode, names=names, max_lag=max_lag,
                            lag_given=lag_given)
    print(f"Preset {preset.name}.")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
