"""What `--arrangement auto` costs at scale: CPU seconds of the choice and of the whole arrangement, against a
named arrangement, on N prompts generated as scripts/bench_schedule.py generates them.

    python scripts/bench_choice.py --prompts 1000000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--instances", type=int, default=16)
    args = parser.parse_args()
    from bench_schedule import make_prompts  # the same generated prompts as the scale benchmark

    from asp_cli.arrange.choose import DRAWS, SAMPLE_PROMPTS, candidates_for, choose_arrangement
    from asp_cli.arrange.pipeline import _arrange_named, plan
    from asp_cli.costmodel import load_preset
    from asp_cli.predict.prediction import predict_lengths
    from asp_cli.reading import read_prompts
    from asp_cli.settings import ScheduleSettings

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "prompts.jsonl"
        make_prompts(args.prompts, path)
        prompts, _ = read_prompts([path])
    predictions, _ = predict_lengths(prompts)
    preset = load_preset()
    print(f"{args.prompts:,} prompts, K={args.instances}; CPU seconds (time.process_time)")
    for name in ("interleave", "auto"):
        started = time.process_time()
        _, choice = plan(prompts, predictions, ScheduleSettings(instances=args.instances, arrangement=name),
                         preset=preset)
        print(f"  arrange with --arrangement {name}: {time.process_time() - started:.2f} s (chose {choice.chosen})")
    started = time.process_time()
    choose_arrangement(_arrange_named, prompts, predictions, ScheduleSettings(instances=args.instances), preset)
    print(f"  the choice alone ({len(candidates_for('continuous'))} candidates x {DRAWS} draws x 2 dispatches on a "
          f"{SAMPLE_PROMPTS:,}-prompt sample): {time.process_time() - started:.2f} s")


if __name__ == "__main__":
    main()
