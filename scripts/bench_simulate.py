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

asp dispatches the shortest minibatches holding one train batch first (the trainer's first step starts at
once), then each length class spread over the epoch, longest first; `seq` is that order, and the planned
`instance` is list scheduling under a per-class count balance (docs/algorithms.md). Over 6 workload seeds
(mean end-to-end over verl's default; planned / free dispatch / true lengths): mix-k8-n8 0.551 / 0.524 /
0.487 (long-first 0.579), mix-k2-n4 0.492 / 0.495 / 0.423 (long-first 0.467), mix-k16-n16 0.927 / 0.909 /
0.912 (short-first 0.894). Single tables above are one seed and move by +-0.03.

- **Mixed sources, 8 instances (mix-k8-n8)**: asp wins: 0.55x verl's default, below every baseline
  (long-first 0.60x), and asp given the true lengths is 1.13x the bound. The warm start removes the wait
  for the first train batch (long work started at time 0 cannot feed it).
- **Two instances (mix-k2-n4)**: asp (0.51x) ties short-first and loses to long-first (0.48x) by about 5%.
  The cause is measured: with the same sorted packing, long-first's minibatches of 32 long prompts keep
  more sequences per decode step, and asp's per-minibatch KV budget (N x (prompt + predicted mean) within
  the cache) cuts long minibatches to about 23 prompts; summed instance busy time is 6% higher for asp
  (4,600 s against 4,337 s on seed 0). Raising the budget 1.35x wins here (0.48x) without preemptions, but
  causes preemptions and loses on mix-k16-n16, so the budget stays. The bound is far (1.6x even with true
  lengths): 32 prompts x 4 samples cap a batch at 128 sequences, well under the 1,024 the bound assumes.
- **Trainer-bound (mix-k16-n16)**: 0.85x verl is impossible here: the lower bound itself is 0.86-0.88x
  (the trainer's work). asp is 1.06x the bound and about 1.5% behind short-first. When the trainer binds,
  short-first is close to ideal: cheap steps come first while rollout fills the admission window, and the
  long groups are generated during the long, expensive steps. asp's steps are representative (step length
  deviation 0.4 against 1.3), so every step needs long groups, and after the warm batch the trainer waits
  for them for two or three steps (30-50 s each).
- **Planned instances absorb less prediction error than free dispatch.** Short sources are under-predicted
  2-5x per minibatch (a minibatch lasts as long as its longest group, and the longest of 32 noisy groups
  is far above the longest prediction), the long class about 1.1x. The count balance spreads that shared
  error over every instance; free dispatch remains the most robust (finish spread of seconds, not minutes).
- **Long reasoning only (aime-k8-n4)**: asp 0.58x, far ahead of every baseline; the bound (the longest
  request alone) cannot be met by any arrangement (2.0x with true lengths).
- **Short answers (gsm8k-k4-n8)**: trainer-bound and noisy (one generator's very long outputs decide a
  minibatch); free dispatch is best (0.90x), the fixed plan is not (1.04x on this seed, 0.93x over 6).
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
