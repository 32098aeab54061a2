"""Regenerate docs/benchmarks.md's section "Held out: chat instructions".

    python scripts/bench_held_out.py [--data ../shared/data] [--doc docs/benchmarks.md]

The same equal-footing summaries as scripts/bench_simulate.py, on the held-out workloads of
`asp_cli.bench.compare.HELD_OUT`: AlpacaEval's 805 chat instructions answered by about 200 models, alone and
mixed with GSM8K and AIME (data asp's defaults were never set on: the candidates, the predictive draws and the
tie margin were fixed before these workloads existed, and are not tuned on them). AlpacaEval's lengths are
CC BY-NC 4.0, evaluation only: read at run time from ``--data``, skipped with a message when absent. Rewrites
only this section of the document. Takes about 5 minutes on two idle cores, 16 on one shared with other work (2026-12-07).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_simulate import OTHER_MODE_SEEDS, STATIC_SEEDS, SUMMARY_SEEDS, seed_summary, write_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Held out: chat instructions"

INTRO = """\
Reproduce: `python scripts/bench_held_out.py` (about 5 minutes on 2 idle cores, 16 on one shared with other work; reads AlpacaEval's output lengths
from `../shared/data/alpaca_eval_outputs`, CC BY-NC 4.0, evaluation only, never shipped). Does what the
summaries above show hold on data that none of asp's defaults were set on? `chat-k8-n8` is AlpacaEval's 805
chat instructions (no math; 8 instances, groups of 8, train batch 128, cap 4,096); `chat-mix-k8-n8-b256` mixes
them with GSM8K and AIME as an RLHF + RLVR run would (train batch 256, 2 epochs). As in the ZeroEval workloads,
each prompt's samples are different models' outputs (characters / 4 as tokens; AlpacaEval's deliberate
length variants left out), the history is four other models, and each seed draws the models anew. The
candidates, the predictive draws and the tie margin were fixed before these workloads were built. One change
followed their first measurement: with a trainer that follows the schedule, auto was 3.9% behind short-first
on chat, because its sorted candidates had stratified steps (the trainer waited for the last length class);
the sorts now keep their arrival-order steps (docs/algorithms.md), which also took GSM8K there from 4.0% behind
to level. Two later changes were decided on the math workloads alone and rerun here: long-first wins a
near-tie on `static` (no chat figure changed), and an input that fits the choice's sample is judged over two
epochs (only the 2-epoch mix changed: before it, continuous +20.8%, streaming 1.7% behind the length-aware
router, static +0.4%, trainer-following +7.7%, and `--steps representative` +15.7% with steps that measured
0.43 against the shuffle's 0.26). A fix to the simulator followed (docs/simulation.md: an instance held by
the lag rule with sequences still decoding now looks again at the next publish); it changed one figure here,
streaming at lag 2 on the mix, from 1.6% ahead of the length-aware router to 0.5% behind a round-robin deal.
The peak KV accounting (`--kv-budget`, decided on the math workloads, 2026-12-02) changed three figures on the
mix, all with blocking engines: continuous from +21.1% to +20.7% over the best baseline (asp itself 6% faster
in seconds), trainer-following from +7.1% to +3.3% (asp 1.6% faster in seconds: the baselines in its sizes
gained more), and `--steps representative` from 1.5% to 3.1% behind (it takes the shuffle). An audit of the
baselines (2026-12-02) added the shortest-first sorts and verl's chunked orders to the streaming tables and
replayed the true-lengths row with asp's dispatch: the 2.1% streaming lead on chat became level (it was that
sort). The streaming candidate `quick-start` (the shuffle opened by each epoch's shortest train batch, decided
on the math workloads, 2026-12-02) took streaming at lag 2 on the mix from 0.6% behind to 1.3% ahead of the
best baseline (rerun 2026-12-03, which also picked up the history estimator's changes of 2026-12-02: every
other gain within 0.1 point but the forced `per-step` in synchronous streaming, -26.7% to -27.3%, and the
planned-instance rows within 0.01, and in synchronous streaming the best baseline is now the least-pending router
fed longest first, 0.736, asp level with it). The groups of 8 on the mix take AIME's 4 truth samples and,
since 2026-12-03, draw the rest around them instead of resampling the 4 (docs/simulation.md, "Lengths"); the
rerun that day changed only the mix: continuous +20.7% to +22.1%, streaming at lag 2 +1.3% +- 0.7% to
+1.0% +- 2.0%, static +5.4% to +4.4%, trainer-following +3.4% to +4.0%, `--steps representative` 3.1% to
5.3% behind, `per-step` in synchronous streaming 6.3% to 5.9% ahead of the deal. The fix of 2026-12-03 to how
auto draws groups predicted at the response cap (docs/benchmarks.md, "How well auto chooses") changed only the
mix, rerun that day: streaming at lag 2 +1.0% +- 2.0% to -0.4% +- 2.2% (the seeds' noise either way),
trainer-following +4.0% to +4.6%. Rerun 2026-12-05, after auto began timing its candidates on engines that
refill as verl routes them (every sample a request at submission, not a group whole to whichever server frees
first), with the heavy-tailed draws there; only the mix moved: streaming at lag 2 -0.4% +- 2.2% to +1.1% +- 1.7%,
and synchronous streaming from level with the best baseline to 8.6% +- 3.0% behind it (below). Every other
figure is as first measured.
Tables as in "Simulated end-to-end time against baselines".
"""

FINDINGS = """\
### What held and what did not

The picture of the math workloads holds on chat: asp is never behind the best equal-footing baseline here
except with `--steps representative` (1.3% and 5.3%), with `per-step` forced in synchronous streaming, and
in synchronous streaming as this simulator routes (8.6%, where auto plans for verl's routing: level with the
best sort as verl routes), each gain with its standard error over the seeds in the tables; 4-22% ahead of it
on the chat + math + reasoning mix with blocking engines; on engines that refill at lag 2 it wins nothing
beyond the seeds' noise (level on chat, +1.1% +- 1.7% on the mix); it loses where it loses on math (steps kept
representative in arrival order).

- **Blocking `continuous` engine** (6 seeds): on chat alone auto is level with the best baseline (it picks
  short-first, +0.0%): chat answers vary within a prompt about as much as between prompts, and the
  true-lengths ceiling is only 0.8% further. On the mix it is 22.1% faster than the best baseline and
  level with the true-lengths ceiling (0.698 against 0.694).
- **Engines that refill** (`streaming`, lag 2): level on chat with the least-pending router fed shortest
  first (auto picks `bands`, the same sort cut into request batches; 2.1% ahead of least-pending on a shuffled stream); on the mix 1.1% +- 1.7% ahead of
  a count-balanced deal of verl's chunks, the best baseline (the seeds' noise; 0.4% +- 2.2% behind before auto
  timed its candidates as verl routes, 1.0% +- 2.0% ahead before the cap fix of 2026-12-03), where every arrangement,
  the true lengths' included, lands within about 3% of the others (before `quick-start`: 0.6% +- 0.5%
  behind). Before the simulator's lag-rule fix asp was 3.3% ahead of least-pending here: most of that
  was least-pending's instances sleeping through publishes.
- **Static padding** (10 seeds, as on the math workloads since 2026-12-02): level on chat alone (+0.4% +- 3.7%
  over the best baseline, a shuffle in asp's sizes; at 4 seeds it read 0.4% behind short-first), 4.4% ahead of
  short-first on the mix (5.4% before the truth's draws of 2026-12-03, 5.6% at 4 seeds; minibatches cut by their padded KV against half the KV cache, the
  static default since 2026-12-02; cut to the whole cache, -1.6% and +2.6%; before the padded cut, -1.6% and
  -0.1%).
- **A trainer that follows the schedule** (no lag bound): level on chat, by taking short-first and its
  arrival-order steps (deviation 0.78 against 0.08); 4.6% ahead on the mix with steps near a shuffle's
  (0.18 against 0.14).
- **`--steps representative` in arrival order**: 1.3% behind on chat; on the mix it takes the shuffle
  (steps 0.25, the shuffle's own) and is 5.3% behind short-first. Judged on one epoch it had taken an order
  whose steps measured 0.43 on the true lengths.
- **Synchronous training on engines that refill** (`--max-lag 0`, the mix at train batch 256): auto is 20%
  faster than a round-robin deal by length-sorted steps (3.01) but **8.6% +- 3.0% behind the least-pending
  router fed longest first** as this simulator routes (whole groups to whichever server frees first). Since
  2026-12-05 auto times synchronous plans on servers as verl routes a step (every sample a request, placed
  at submission), and there it is level with that sort: 0.775 +- 0.017 of verl's default against 0.776 +- 0.013
  for longest-first (`python scripts/bench_sync.py --mode verl --workloads chat-mix-k8-n8-b256 --seeds 4`).
  Before that change auto was level with the sort here too (0.737); the plan it picks now suits verl's routing,
  not a shared queue's. `per-step` is 5.9% faster than the deal with steps near a shuffle's (0.28 against 0.14):
  more than on the math mixes (3-5%), still under the 8% the issue asks for (the true lengths take per-step to
  6.9%).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    if not (args.data / "alpaca_eval_outputs").is_dir():
        print(f"Skipped: {args.data / 'alpaca_eval_outputs'} is not there (evaluation data, read at run time).",
              file=sys.stderr)
        return
    from asp_cli.bench.compare import HELD_OUT
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    tables = []
    for mode, seeds in (("continuous", SUMMARY_SEEDS), ("streaming", OTHER_MODE_SEEDS), ("static", STATIC_SEEDS)):
        print(f"held out: {mode} ...", file=sys.stderr)
        tables.append(seed_summary(args.data, preset, seeds=seeds, mode=mode, names=HELD_OUT)[0])
    print("held out: schedule-following trainer, representative steps ...", file=sys.stderr)
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, trainer="schedule", names=HELD_OUT,
                               max_lag=None, lag_given=True)[0])
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, names=HELD_OUT,
                               steps="representative")[0])
    print("held out: synchronous training on engines that refill ...", file=sys.stderr)
    for arrangement in ("auto", "per-step"):
        tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming",
                                   names=("chat-mix-k8-n8-b256",), max_lag=0, lag_given=True,
                                   arrangement=arrangement, reference="round-robin")[0])
    body = f"{SECTION}\n\n{INTRO}\n" + "\n".join(tables) + "\n" + FINDINGS
    write_section(args.doc, SECTION, body)


if __name__ == "__main__":
    main()
