"""Regenerate docs/benchmarks.md's section "Simulated end-to-end time against baselines".

    python scripts/bench_simulate.py [--data ../shared/data] [--doc docs/benchmarks.md]

Builds the workloads of `asp_cli.bench.WORKLOADS` from the real length data (evaluation only, read at run
time; skipped with a message when absent), replays every arrangement on the same true lengths, and rewrites
only this section of the document. Takes about ten seconds on two cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Simulated end-to-end time against baselines"
COMMAND = "python scripts/bench_simulate.py"

INTRO = """\
Each table replays, on the same prompts and the same true lengths, the arrangements people use today, asp's
schedule (made with a real prediction: the bundled model with history from an earlier epoch, never the
lengths it is judged on), the same schedule with free dispatch, asp given the true lengths (the scheduling
ceiling, not a result) and the lower bound of the model. Engine: continuous batching (vLLM), blocking
minibatches, preset `h100-qwen2.5-7b`, the AReaL admission rule with max_lag 2. Columns are defined in
docs/simulation.md; "vs verl" is end-to-end time over verl's default, "vs bound" over the lower bound.
"""


FINDINGS = """\
### Where asp wins, where it loses, and why (read from the tables above)

- **Mixed sources, 8 instances (mix-k8-n8)**: asp is 0.60x verl's default, inside the 0.85x goal, and
  asp given the true lengths is 1.13x the bound (goal 1.3x). But long-first (0.598x) ties asp, and with
  free dispatch asp is best (0.54x). The gap to the ceiling is prediction error: padding 0.63 against 0.33.
- **Planned instances do not absorb prediction error.** In every workload "asp, free dispatch" beats "asp"
  (up to 14%): the schedule's static instance assignment is list scheduling on *predicted* durations, and
  when a minibatch runs long its instance finishes late (finish spread 430 s on mix-k2-n4).
- **Two instances (mix-k2-n4)**: asp 0.54x, but plain long-first (0.47x) and short-first (0.50x) win.
  Sorting globally makes every minibatch homogeneous and puts all long work in the first wave, so the
  skew tail hides; asp's interleaving starts long work later and, with errors, ends with a long minibatch.
  The bound is far (1.66x even with true lengths): 32 prompts x 4 samples cap a batch at 128 sequences,
  well under the 1,024 the bound assumes.
- **Trainer-bound (mix-k16-n16, gsm8k-k4-n8)**: every arrangement is within 1.1x of the bound except
  verl; short-first's and count balance's early first batch feeds the trainer sooner. asp's first train
  step starts later (it front-loads long work), which costs a few percent when the trainer binds.
- **Long reasoning only (aime-k8-n4)**: asp 0.64x, the best plain arrangement; with 8 instances and 596
  prompts the bound (longest request, 16k tokens alone) cannot be met by any arrangement (2.0x with true
  lengths).
- Sorting gives the worst step representativeness (step mean length 1.2-1.4 away from the epoch mean);
  asp keeps it at 0.4-0.6 and verl at 0.15.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"Skipped: {args.data} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    from asp_cli.bench import benchmark_markdown, run_benchmark
    from asp_cli.costmodel import load_preset

    results = run_benchmark(args.data, load_preset("h100-qwen2.5-7b"),
                            progress=lambda m: print(m, file=sys.stderr))
    body = f"{SECTION}\n\n{INTRO}\n{benchmark_markdown(results, command=COMMAND)}\n{FINDINGS}"
    text = args.doc.read_text(encoding="utf-8") if args.doc.exists() else "# Benchmarks\n\n"
    if SECTION in text:
        head, _, rest = text.partition(SECTION)
        following = rest.find("\n## ")
        tail = rest[following + 1:] if following >= 0 else ""
        text = head + body + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    args.doc.write_text(text, encoding="utf-8")
    print(f"wrote {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
