"""Regenerate docs/benchmarks.md's section "Simulated end-to-end time against baselines".

    python scripts/bench_simulate.py [--data ../shared/data] [--doc docs/benchmarks.md]

Builds the workloads of `asp_cli.bench.compare.WORKLOADS` from the real length data (evaluation only, read at run
time; skipped with a message when absent), replays every arrangement on the same true lengths, and rewrites
only this section of the document: a summary over seeds, the findings, and every table for seed 0.
Takes about an hour and a quarter on two cores (most of it the streaming and representative-steps summaries);
on one core shared with other work, over an hour for the tables after the streaming summary alone (2026-12-07).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import headline_matrix

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Simulated end-to-end time against baselines"
COMMAND = "python scripts/bench_simulate.py"

INTRO = """\
Every table replays, on the same prompts and the same true lengths, asp's schedule (made with a real
prediction: the bundled model with history from an earlier epoch, never the lengths it is judged on) and the
baselines, **at equal footing**: the same engine, concurrency, lag rule (AReaL's admission rule, max_lag 2)
and lengths; only the order differs (docs/simulation.md, "--compare"). On blocking engines the reference is a
shuffle cut into asp's own minibatch sizes; on engines that refill freed slots it is verl's server mode
(least-pending routing of a shuffled stream). "asp (auto)" is `asp schedule`'s default: the fastest of its
candidate arrangements in its own simulator under `--dispatch free` (the next minibatch in `seq` order to
whichever instance frees first, as the baselines in asp's sizes and least-pending routing are replayed; the
round-robin and length-aware routers keep to the instances they deal; the true-lengths row and the random deal
into asp's slots are replayed as asp's own row), replayed so; "asp, planned instances" is the
same schedule with each minibatch kept on its planned instance (`--dispatch planned` engines). The gain over
verl's default from bigger generate() calls is a column of its own, not part of asp's gain; on engines that
refill, where a call's size does not limit what is in flight, verl's chunked rows are equal-footing baselines
like the others. For scale: the
ASP paper reports 10.9% shorter mean iterations from scheduling alone. Each gain carries its standard error
over the seeds (paired: asp and the baseline replay the same lengths on every seed): a gain within two of
them of zero is the seeds' noise, not a win or a loss. Two caveats: the baselines in asp's sizes are cut by
the KV accounting auto chose for asp (so a poor choice of cut is paid by both and shows as no loss), and
auto's own constants (the tie margin, the static engine's candidate order, the KV rule) were set on these
very workloads and seeds: these tables are in-sample, and the held-out chat tables below are the check on
data none of them saw. Where a group is larger than its prompt's real truth samples (AIME has 4, the groups
8-16), the rest of the group is drawn around them (since 2026-12-03; resampled from the 4 before, the
groups of 8 had a mean maximum 11% short of 8 real samples' and too little spread; `python
scripts/check_truth_samples.py`), so every table here was remeasured that day.
"""


FINDINGS = """\
### What the arrangement wins, and where it does not

- **`--arrangement auto` against the plain sorts** (blocking `continuous` engine, 6 seeds): level with or
  ahead of the best equal-footing baseline on every workload (GSM8K -0.9% +- 2.0% in the rerun of 2026-12-03,
  +1.1% before it: the seeds' noise, one pick of six); where a sort is best (AIME, two instances,
  trainer-bound mixes) auto picks that very sort (its `long-first` and `short-first` candidates cut the very
  minibatches of the baselines' sorts; only the order inside a minibatch, longest first, and the train steps,
  from estimated finish times, differ, which an audit measured at 0.1% on mix-k8-n8) and is level (0.0%). These tables are of `--kv-budget auto` (2026-12-02): on
  the long-reasoning mixes asp's minibatches count each group at its share of its wave's expected peak, 3.6-9.1%
  faster in seconds than counting it whole, and the baselines in asp's sizes are cut the same way and gain as
  much or more ("The KV budget" below), so asp's margins over them (6 seeds) moved from 11.3% to 8.8% (mix-k8-n8; 9.3% in the rerun of 2026-12-03,
  8.9% on the drawn truth of that day), 20.4% to 19.8% (mix-k8-n8-b256; 20.1% on the drawn truth) and 0.7% to
  level (aime-k8-n8-b256). On engines that refill freed slots
  ("Other engines" below) asp wins little, routed as this simulator routes (whole groups): since auto judges
  its candidates as verl routes (2026-12-05), at lag 2 it is level on five workloads, 0.9% +- 0.4% ahead on
  aime-k8-n8-b256 and behind on two, mix-k16-n16-b512 by 2.5% +- 0.2% (it keeps verl's shuffle, which is 12%
  faster there as verl routes) and GSM8K by 1.5% +- 0.9% (4 seeds, rerun 2026-12-05); with the earlier picks
  (10 seeds) it was level or up to 1.5% +- 0.2% ahead on all eight; without a lag bound, rerun the same day,
  it is behind on five (up to 2.3% +- 1.8%, mix-k8-n8-b256), and with the earlier picks it was behind on three
  without a lag bound (up to 4.8% +- 1.8%, mix-k8-n8-b256; 4.0% before the rerun of 2026-12-04); the 0.2-4.0% it read ahead before
  an audit of 2026-12-02 was its shortest-first candidate against tables that lacked that sort.
  The streaming tables are of the simulator fixed on 2026-12-01 (docs/simulation.md): before, an instance held
  by the lag rule with a few long sequences left slept through the publish, which handicapped least-pending
  routing by up to 7%, and these
  tables had asp up to 7.3% ahead of it. On the `static`
  engine (10 seeds: its replays are cheap and its GSM8K spread wide) it is 1.4% +- 0.6% (1.8% +- 0.6% before the cap fix of 2026-12-03) behind long-first on
  mix-k8-n8 and 1.7% +- 0.3% on mix-k8-n8-b256 (0.7% and 0.3% on the old truth), level on four (GSM8K -0.6% +-
  1.6%: at 4 seeds the same table read -1.9%, the seeds' noise; AIME-n4 +0.2%) and 2-14% ahead on two (the static table is of 2026-12-02,
  with minibatches cut by their padded KV against half the cache: docs/algorithms.md, section 3). There
  long-first wins a near-tie (the padded engine's robust order): before, the interleaving won two ties in 32
  seeded runs and lost 0.5% (AIME) and 1.1% (mix-k8-n8) on the true lengths. Heavier-tailed draws for the
  static engine alone (one sample in a hundred 2-6x longer) were tried on 10 seeds: GSM8K +0.4%, mix-k8-n8
  -0.2%, mix-k16-n16 +4.4% (from +5.3%), every change within the noise; not kept. Nor a wider tie margin
  for long-first there (5% instead of 0.5%): it made the two losses ties (0.0%) but cost the two wins 0.7 and
  2.4 points and held-out chat 2.9 points (-2.5% +- 2.4% against +0.4% +- 3.7%, 10 seeds).
- **Mixed sources on blocking engines, rollout-bound** (mix-k8-n8, mix-k8-n8-b256): asp is 9-20% faster
  than the best equal-footing baseline and 25-28% faster than a shuffle in its own sizes. The "true lengths"
  column is asp's own choice given the true lengths, judged with the draws of a model prediction and replayed
  with asp's free dispatch: 1.5% ahead of asp on mix-k8-n8 (0.741 against 0.752) and level on
  mix-k8-n8-b256 (0.721 against 0.719). A yardstick of asp's own choosing, not a bound. (Until an audit of
  2026-12-02 this row was replayed on planned instances while asp's was free, which read it level or behind
  on both.)
- **Trainer-bound runs and long reasoning alone** (mix-k16-n16, mix-k16-n16-b512, gsm8k-k4-n8, AIME): the
  lower bound is within 5-7% of a shuffle, or the lengths within a source are hard to tell apart; asp is level
  with the best baseline or a little ahead (0-1.3%). The ASP paper's 10.9% is a rollout-bound figure.
- **Planned instances lose where predictions are noisy.** Replayed with its planned `instance` column, the
  same schedule is 2.5-11% slower than free dispatch on GSM8K (11%), mix-k8-n8 (10.5%) and AIME (2.5%), within 2%
  on four others and 1.4% faster on mix-k16-n16 (1.6-16% slower on `static`, on all eight): a minibatch lasts as long as its longest
  group, and an engine that keeps to the plan cannot absorb the error. So `asp schedule` plans for free
  dispatch by default; `--dispatch planned` plans for engines that keep to the column.
- **Verl's chunking is a separate cost.** verl's default splits each train batch into one chunk per worker
  before the minibatch cap, so its calls hold 4-31 prompts where asp's hold 8-32, and each chunk stays on its
  worker's instance: that chunking costs verl 0-67% on these workloads (9-67% on four of them) (the "verl
  calls" column), before any arrangement. It is not only the calls' size: on gsm8k-k4-n8 and mix-k8-n8-b256
  verl's calls are as large as asp's or larger (16/16, 30/28) and still 6-9% slower, from keeping each fixed
  chunk to one instance where asp's sizes are dispatched to whichever frees first.
- **Representative steps need a trainer that follows the schedule.** In arrival order asp's homogeneous
  minibatches arrive whole, and auto picks plain sorts where they are faster, so the 90th-percentile step
  deviation is 0.1-3.5 against 0.06-0.5 for a shuffle. With `--trainer schedule` (asp's verl replay buffer)
  and no lag bound, auto picks `per-step` (a shuffle's train batches, each packed longest first) on the
  mixes: steps nearly as representative as a shuffle's (0.14-0.21 against 0.12-0.22) and 3-12% faster than
  the best baseline. On GSM8K it picks short-first, level with the baseline sort, whose steps are the sort's
  arrival order (0.40 against 0.06: a sort keeps its arrival steps whatever the trainer, since stratifying a
  sorted order keeps the trainer waiting for the last length class; before, it did, and auto was 4% slower
  there); `--steps representative` keeps `per-step` there. Under `--max-lag 2` the replay now holds a schedule-following
  trainer to the bound (before, it applied no rule there, so that table was not on equal footing): asp is
  from 0.4% behind to 19% ahead, with `per-step`'s representative steps on mix-k8-n8-b256, and plain sorts (steps far
  from representative) where they are faster. Finer strata for the stratified steps (per-group predicted
  length, about four groups of each per step) were tried: steps beat the shuffle (0.03-0.07) but each waits
  for its long groups, 20-29% slower on the 8-instance mixes, so they are not used.
- **`--steps representative`** (the last three tables) keeps auto to candidates whose steps are expected to
  be about a shuffle's. With a trainer that follows the schedule it changes nothing on the mixes (auto already
  takes `per-step` there) and costs 4.1% +- 1.5% on GSM8K, where it takes `per-step` (steps 0.07 off the epoch
  mean against the shuffle's 0.06) instead of the sort; in synchronous streaming it takes `per-step`, or since 2026-12-07 the shuffle where no candidate is expected faster than it by more than the tie margin (0.6-2.0% over round-robin, rerun 2026-12-07, instead of 10-23% on the mixes).
  In arrival order it is costly: mostly the shuffle is left (now the random baseline itself), level or
  ahead on the mixes of 256-512 and on GSM8K (-1.3% +- 2.8% in the rerun of 2026-12-07, -2.2% +- 2.5% on 2026-12-03, +0.5% before it: the seeds' noise) (judged over two epochs it takes the shuffle on mix-k8-n8-b256),
  0.2-1% behind on AIME, 2-16% behind the best sort on mix-k16-n16 and mix-k8-n8 (mix-k8-n8 16.4% +- 1.4% in the
  rerun of 2026-12-04, where the shuffle is left on every seed; 10.3% +- 4.8% before) and twice the long-first
  time on two instances (mix-k2-n4). Representative steps
  in arrival order cost the packing; prefer a trainer that follows the schedule.
"""

OTHER_ENGINES = """\
### Other engines

- **Engines that refill freed slots** (`streaming`: vLLM/SGLang servers, verl's agent loop, OpenRLHF's
  engines, each batch's prompts dealt to them in turn since 0.9.1, a contiguous share each before: "As OpenRLHF
  deals" below times that deal): the engine removes padding and tail bubbles itself, and every
  arrangement, asp's and the true-lengths ceiling included, lands within a few percent of least-pending
  routing. **Here asp wins little: with a lag bound, in the rerun of 2026-12-05 (4 seeds, the first table) with
  auto judging its candidates as verl routes, it is level with the best of thirteen baselines on five workloads,
  0.9% +- 0.4% ahead on aime-k8-n8-b256 and behind on two in this group routing: mix-k16-n16-b512 by 2.5% +-
  0.2%, where it keeps verl's shuffle (12% faster there than the `bands` it picked before, as verl routes), and
  GSM8K by 1.5% +- 0.9%, to the file's order; without a bound (rerun the same day, 4 seeds) level or ahead on
  three and behind on five, by 2.3% +- 1.8% (mix-k8-n8-b256), 2.0% +- 1.7% (aime-k8-n8-b256), 1.9% +- 0.9%
  (mix-k2-n4), 0.9% +- 0.5% (mix-k16-n16-b512) and 0.3% +- 0.2% (mix-k8-n8), mostly to shortest-first sorts;
  planned for servers that keep to its plan (`--dispatch planned`, the second table, rerun 2026-12-06 the same
  way) within 0.6% or ahead on five and behind on three, GSM8K by 2.4% +- 1.7%, mix-k16-n16-b512 by 2.2% +- 0.2%
  and aime-k8-n8-b256 by 1.2% +- 0.8%.** What
  follows describes the tables as measured with auto's earlier picks (the three reruns' tables replace theirs). Since an audit of 2026-12-02 these tables
  hold thirteen baselines: the three routers, the plain sorts behind least-pending and length-aware routing
  (the shortest-first ones were missing), and verl's chunked orders, each chunk kept to one server, which on
  these engines hold as much in flight as asp and so are on equal footing. With the lag bound (10 seeds, rerun 2026-12-03 with the `bands` candidate: the epoch sorted shortest first,
  each train batch cut into one band of lengths per instance, sent in request batches; first in the tie order
  since the same day, "How well auto chooses"; rerun 2026-12-04 with the cap fix) asp is level or ahead on all
  eight workloads: from 0.1% behind (aime-k8-n4, mix-k8-n8 and mix-k2-n4, the seeds' noise) to 1.5% +- 0.2%
  ahead on mix-k16-n16-b512 and 0.7% +- 0.5% on aime-k8-n8-b256 (1.3% +- 0.1% before the cap fix; 1.0% +- 0.2%
  with `bands` last in the tie order; the tables as rerun after the lag rule's fix for request batches, below). The same day's table without `bands` had it behind on
  two: mix-k16-n16-b512 by 3.0% +- 0.2% and aime-k8-n8-b256 by 0.4% +- 0.6%. The row that beat it there,
  verl's chunks of an epoch sorted shortest first, is `bands` row for row; auto now picks it on every seed of
  mix-k16-n16-b512 ("verl calls" column: 15 prompts per request batch, as verl's chunks) and on most of
  aime-k8-n8-b256, and keeps away from it on mix-k8-n8-b256, where it is 18% behind a shuffle. What `bands`
  does that a plain sort fed one group at a time does not: each server works on one band of lengths, and those
  on short bands run ahead (as far as the lag bound lets them) while those on long bands finish theirs, so
  finished groups keep reaching the trainer; the same sort fed one group at a time to whichever server frees
  sends every server the same lengths at once and is 8% slower than a shuffle on mix-k16-n16-b512 (seed 0:
  `asp bench --data ../shared/data --engine streaming --workload mix-k16-n16-b512 --json` gives `short-first
  (least-pending)` 4,407 s, `least-pending` 4,068 s, `asp` (auto: `bands`) 3,876 s). Against the
  issue's yardstick, a random round-robin deal on the large workloads (the third streaming table, 4 seeds), asp
  is 2.8% faster on mix-k8-n8-b256, 0.1% on mix-k16-n16-b512 and 1.3% on aime-k8-n8-b256 (rerun at the end of
  2026-12-05 with auto judging as verl routes, which keeps verl's shuffle on mix-k16-n16-b512; with its earlier
  picks 2.8%, 4.3% and 1.6%; 3.4%, 4.3% and 1.7% before the cap fix; 3.4%, 0.4% and -0.7% before `bands`; 0.9% on
  AIME with `bands` last in the tie order): not the 8% asked. The fastest of 44 orders fed one group at a time, picked after the fact on
  the very lengths it is judged on, was 5.6%, 1.2% and 1.3% faster than the deal ("Room for an order on engines
  that refill" below: these runs are trainer-bound, and orders differ mostly in how the pipeline fills and
  drains); request batches by band reach past that on mix-k16-n16-b512. Before the audit of 2026-12-02 the
  same runs read 0.2-4.0% ahead: those "wins" were auto's shortest-first candidate against tables that lacked
  that sort. Without a lag bound (4 seeds, rerun 2026-12-03 with `bands` first in the tie order, and 2026-12-04
  with the cap fix) it is within 0.5% or ahead on five and behind on three: mix-k8-n8-b256 4.8% +- 1.8% (4.0% +- 1.8%
  before the cap fix, 4.3% +- 1.9% with `bands` last in the tie order, 4.7% +- 1.4% before `bands`),
  aime-k8-n8-b256 2.3% +- 0.8% (0.8% +- 0.5% before the cap fix, 1.2% before `bands`) and mix-k2-n4 0.6% +- 0.2%
  (0.7% +- 0.3%; 0.4% +- 0.3% before `bands`); mix-k16-n16-b512 is 0.5% +- 0.3% behind (0.9% +- 0.5% before
  `bands`). On mix-k8-n8-b256 the best
  row is verl's chunks sorted shortest first, each chunk kept to its server, and asp's plan replayed on its
  planned instances comes closer (0.960 against 0.976 with free dispatch): part of the gap is auto's choice (its `short-first` candidate,
  routed least-pending, was 2.7% faster than auto's pick before `bands`; "How well auto chooses"), part routing.
  (The table before these reruns read 8.4% +- 5.0% there, one bad seed of four.) The best row changes from workload to workload and is the fastest of thirteen
  noisy means picked after the fact, which flatters the baselines a little; no one baseline beats asp
  everywhere, and the gains asp has here are a few percent at most. Planned for
  servers that keep to its `instance` column (`--dispatch planned`, the second table before its rerun of 2026-12-06, 4 seeds; "best equal"
  there among the rows that keep to their servers too), it is within 0.5% or ahead on five and behind on three
  (aime-k8-n8-b256 1.9% +- 0.3%, 1.6% +- 0.6% before the cap fix; GSM8K 0.8% +- 1.1%; aime-k8-n4 0.6% +- 0.6%;
  rerun 2026-12-03 with `bands` first in the tie order, and 2026-12-04 with the cap fix). mix-k16-n16-b512 went from 2.8% +- 0.5% behind to level (-0.0% +- 0.8%): the draws
  had `bands` within the tie margin of `short-first` and `quick-start`, which won the tie with `bands` last in
  the order and were 3-6% slower on the true lengths (4.0% +- 0.9% behind before `bands`). The tables with the lag bound are the simulator's after the fix of
  2026-12-01 (docs/simulation.md): before it, busy instances held by the lag rule slept through publishes.
  **Synchronous training** (`--max-lag 0`, the last two streaming tables) is where the room is: every step
  waits for its slowest instance. There auto is 23% and 10% faster than a random round-robin deal on the 8-
  and 16-instance mixes at train batches 256 and 512, level with the least-pending router fed longest first,
  but by ordering the epoch longest first, so each step holds prompts of one length (step deviation 2.9-3.1 against 0.1-0.2): a length curriculum, not a neutral schedule; on AIME it is 1.3% +- 1.1% behind a count-balanced deal (since 2026-12-07 keeping the shuffle there unless a candidate is expected faster by more than the tie margin; 1.8% +- 0.8% before that and 0.4% +- 0.5% before the rerun of 2026-12-07: the seeds' noise around a structural edge of the deal in this routing, verl's chunks each sent whole to the first free server, 1.5% +- 0.4% faster than least-pending routing of the same shuffle over 12 seeds (`python scripts/bench_candidates.py aime-k8-n8-b256 --max-lag 0 --seeds 12`, 3 minutes); as verl routes, auto keeps verl's shuffle there and is level with verl's default). `--arrangement per-step` keeps a shuffle's steps (0.12-0.19 against 0.03-0.18) and is 3-5% faster
  than the round-robin deal: less than the 8% the issue asks for, and the true lengths themselves take
  per-step only to 4.4-6.1% (0.939-0.956): with a shuffle's steps, each step holds its share of the longest
  prompts and waits for its longest sequence. Composing each step by strata of predicted length instead of a
  shuffle (tried, 2 seeds) moved asp's row by 0.2%; not kept.
- **Static padding** (`static`: HF `generate`, 10 seeds): long-first in asp's sizes is the best baseline
  almost everywhere; asp (auto) is 1.4% +- 0.6% and 1.7% +- 0.3% behind it on mix-k8-n8 and mix-k8-n8-b256
  (the table rerun 2026-12-04 with the cap fix of 2026-12-03; 1.8% +- 0.6% and 1.7% +- 0.3% before it, 0.7% and
  0.3% on the old truth), level on four workloads (GSM8K -0.6% +- 1.6%, AIME-n4
  +0.3%), and ahead on mix-k16-n16 (2.2%; 5.3% on the old truth) and mix-k16-n16-b512 (14%; 18%).
  Measured 2026-12-02 with every minibatch, asp's and the baselines' in its sizes, cut so that its padded KV
  (rows x (longest prompt + longest predicted maximum)) fits half the KV cache, the static default since
  that day (HF `generate` does not preempt, and at the whole cache a replay left most padded batches over
  it): the calls got smaller (13 prompts against 25 on mix-k8-n8, 4 against 13 on aime-k8-n8-b256) and every
  row slower against the same random reference. Earlier tables of the same day, cut to the whole cache,
  said level on four and 1.4-28% ahead on three; before that, with groups summed as N x (prompt + predicted
  mean), 0.9-29% ahead. verl's own chunking (the "verl calls" column) is cut by no KV budget: its larger calls
  (aime-k8-n8-b256: 0.703, faster than any row in asp's sizes) would run past the cache on HF `generate`
  (`asp simulate --compare` counts such batches in its "over cache" column).
"""


SUMMARY_SEEDS = 6
OTHER_MODE_SEEDS = 4
# The static engine's replays are cheap (seconds a seed) and its GSM8K spread wide (sd 0.06 of a shuffle's
# time): at 4 seeds it read asp 1.9% behind long-first, at 10 seeds 0.1% (2026-12-02). So it gets more seeds.
STATIC_SEEDS = 10
# The lag-2 streaming summary: at 4 seeds aime-k8-n8-b256 read 2.5% +- 2.6% behind on one bad seed; at 10,
# 1.3% +- 1.1% (2026-12-02). Since auto judges its candidates as verl routes (2026-12-05) each seed costs several
# times more, and the table in docs/benchmarks.md is of 4 seeds (its 10-seed table of the earlier picks is in
# git): 4 here, so that the script reproduces the table the document shows (a skeptic's rerun found 10).
STREAMING_SEEDS = 4
VERL_CALLS_BLOCKING = ("\"verl calls\" is verl's default with its own smaller generate() calls (prompts per call in "
                       "brackets, asp's after the slash): what bigger calls alone are worth, apart from the "
                       "arrangement.")
# On engines that refill a call's size does not limit what is in flight: verl's chunks are an order and a routing.
VERL_CALLS_STREAMING = ("\"verl calls\" is verl's default, each chunk of a train batch kept to one server (prompts per "
                        "chunk in brackets, asp's per request after the slash): on these engines an order and a "
                        "routing, on equal footing with asp and among the baselines \"best equal\" is chosen from.")
REFERENCE = {"continuous": "random (asp sizes)", "static": "random (asp sizes)", "streaming": "least-pending"}


def seed_summary(data: Path, preset, seeds: int = SUMMARY_SEEDS, mode: str = "continuous",
                 trainer: str = "arrival", names: tuple[str, ...] | None = None, max_lag: int | None = None,
                 lag_given: bool = False, arrangement: str = "auto", reference: str | None = None,
                 steps: str = "any", dispatch: str = "free") -> tuple[str, dict]:
    """Equal-footing summary over workload seeds: every row over the reference arrangement of its engine
    (a shuffle in asp's own sizes, or verl's least-pending router), mean +- standard deviation; asp's rows
    with ``arrangement`` (auto by default)."""
    import dataclasses

    import numpy as np

    from asp_cli.bench.compare import ASP, ASP_PINNED, ASP_TRUE, LOWER_BOUND, WORKLOADS, build_workload, compare

    reference = reference or REFERENCE[mode]
    asp_name = "asp (auto)" if arrangement == "auto" else f"asp (`--arrangement {arrangement}`)"
    if steps != "any":
        asp_name = f"asp (auto, `--steps {steps}`)"
    if dispatch != "free":
        asp_name = f"asp (auto, `--dispatch {dispatch}`)"
    lines = [
        f"Engine `{mode}`" + (f", asp planned for and replayed with `--dispatch {dispatch}` (\"best equal\" among the "
                              f"baselines that keep to their planned instances too)" if dispatch != "free" else "")
        + f", trainer taking groups in {'arrival order' if trainer == 'arrival' else 'the order train_step assigns'}"
        + (f", max_lag {max_lag if max_lag is not None else 'none'}" if lag_given else ", max_lag 2") + ", "
        f"{seeds} workload seeds (each redraws the samples and the arrangement). Every figure is end-to-end time "
        f"over **{reference}** (the same concurrency as asp, in a random order), mean +- sd; below 1 is faster. "
        f"\"best equal\" is the fastest equal-footing baseline (docs/simulation.md); \"gain\" is {asp_name} "
        "against it, negative where asp loses, +- its standard error over the seeds (paired: each seed replays "
        "both on the same lengths; a gain within two standard errors of zero is the seeds' noise). "
        + (VERL_CALLS_STREAMING if mode == "streaming" else VERL_CALLS_BLOCKING)
        + " Step deviation: the 90th percentile of |step mean length / epoch mean - 1|.",
        "",
        f"| workload | best equal | {asp_name} | gain | asp, planned instances | asp, true lengths | lower bound | "
        "verl calls | step dev p90 asp / reference |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    found = {}
    for name, spec in WORKLOADS.items():
        if (names is not None and name not in names) or (names is None and spec.held_out):
            continue
        ratios: dict[str, list[float]] = {}
        deviation: dict[str, list[float]] = {}
        calls: dict[str, list[float]] = {}
        for seed in range(seeds):
            lag = max_lag if lag_given else spec.max_lag
            settings = dataclasses.replace(spec.settings(), seed=seed, trainer=trainer, max_lag=lag,
                                           arrangement=arrangement, steps=steps, dispatch=dispatch)
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            rows = compare(workload.prompts, workload.predictions, workload.truth, settings, preset,
                           max_lag=lag, mode=mode)
            ref = next(r["end_to_end_s"] for r in rows if r["arrangement"] == reference)
            if dispatch == "planned":  # asp's own row already keeps to the planned instances
                rows = rows + [dict(next(r for r in rows if r["arrangement"] == ASP), arrangement=ASP_PINNED)]
            for row in rows:
                ratios.setdefault(row["arrangement"], []).append(row["end_to_end_s"] / ref)
                deviation.setdefault(row["arrangement"], []).append(row.get("step_length_deviation_p90", np.nan))
                calls.setdefault(row["arrangement"], []).append(row.get("prompts_per_call", np.nan))
        from asp_cli.bench.baselines import BASELINES

        # With planned dispatch asp is judged against the baselines that keep to their planned instances too.
        footing = {k: v for k, v in ratios.items() if k in BASELINES and BASELINES[k].equal_footing_on(mode)
                   and mode in BASELINES[k].modes and (dispatch == "free" or BASELINES[k].dispatch == dispatch)}
        best = min(footing, key=lambda k: np.mean(footing[k]))

        def cell(values: list[float]) -> str:
            return f"{np.mean(values):.3f} +- {np.std(values):.3f}"

        gain = 1.0 - np.mean(ratios[ASP]) / np.mean(footing[best])
        # The seeds' noise on the gain: each seed replays asp and the baseline on the same lengths, so the
        # per-seed gains are paired, and their spread over sqrt(seeds) is the standard error of their mean.
        paired = 1.0 - np.asarray(ratios[ASP]) / np.asarray(footing[best])
        error = float(np.std(paired, ddof=1) / np.sqrt(paired.size)) if paired.size > 1 else float("nan")
        verl = (f"{np.mean(ratios['verl-default']):.3f} ({np.mean(calls['verl-default']):.0f}/"
                f"{np.mean(calls[ASP]):.0f})" if "verl-default" in ratios else "")
        lines.append(
            f"| {name} | {best} {cell(footing[best])} | {cell(ratios[ASP])} | {gain:+.1%} +- {error:.1%} | "
            f"{cell(ratios[ASP_PINNED])} | {cell(ratios[ASP_TRUE])} | {cell(ratios[LOWER_BOUND])} | {verl} | "
            f"{np.nanmean(deviation[ASP]):.2f} / {np.nanmean(deviation[reference]):.2f} |"
        )
        found[name] = {"best": best, "best_ratio": float(np.mean(footing[best])), "asp": float(np.mean(ratios[ASP])),
                       "asp_pinned": float(np.mean(ratios[ASP_PINNED])), "gain": float(gain),
                       "gain_error": error}
    return "\n".join(lines) + "\n", found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--seeds", type=int, default=SUMMARY_SEEDS,
                        help=f"workload seeds in the continuous-engine summary (default {SUMMARY_SEEDS})")
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"Skipped: {args.data} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    from asp_cli.bench.compare import benchmark_markdown, run_benchmark
    from asp_cli.costmodel import load_preset

    results = run_benchmark(args.data, load_preset("h100-qwen2.5-7b"),
                            progress=lambda m: print(m, file=sys.stderr))
    preset = load_preset("h100-qwen2.5-7b")
    tables = []
    for mode, seeds in (("continuous", args.seeds), ("streaming", STREAMING_SEEDS), ("static", STATIC_SEEDS)):
        print(f"summary: {mode} ...", file=sys.stderr)
        tables.append(seed_summary(args.data, preset, seeds=seeds, mode=mode)[0])
    print("summary: streaming, planned for planned instances ...", file=sys.stderr)
    # Beside the free-dispatch streaming table: the same engine, asp planned for servers that keep to the plan.
    tables.insert(2, seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming", dispatch="planned")[0])
    print("summary: streaming against a round-robin deal ...", file=sys.stderr)
    # The issue's own yardstick on the large workloads (8+ instances, train batches of 256+): a random round-robin
    # deal, under the same lag bound.
    tables.insert(3, seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming",
                                  names=("mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256"),
                                  reference="round-robin")[0])
    print("summary: streaming without a lag bound ...", file=sys.stderr)
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming", max_lag=None,
                               lag_given=True)[0])
    print("summary: schedule-following trainer ...", file=sys.stderr)
    mixed = ("mix-k8-n8", "mix-k8-n8-b256", "mix-k16-n16-b512", "gsm8k-k4-n8")
    for trainer_lag in (None, 2):
        tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, trainer="schedule", names=mixed,
                                   max_lag=trainer_lag, lag_given=True)[0])
    print("summary: synchronous training on engines that refill ...", file=sys.stderr)
    large = ("mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")
    for arrangement in ("auto", "per-step"):
        tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming", names=large,
                                   max_lag=0, lag_given=True, arrangement=arrangement, reference="round-robin")[0])
    print("summary: auto limited to representative steps ...", file=sys.stderr)
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, steps="representative")[0])
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, trainer="schedule", names=mixed,
                               max_lag=None, lag_given=True, steps="representative")[0])
    tables.append(seed_summary(args.data, preset, seeds=OTHER_MODE_SEEDS, mode="streaming", names=large,
                               max_lag=0, lag_given=True, reference="round-robin", steps="representative")[0])
    write_section(args.doc, SECTION, section_body(tables, benchmark_markdown(results, command=COMMAND)))
    try:  # the page's lead is laid out from these tables (scripts/headline_matrix.py)
        headline_matrix.rewrite(args.doc)
    except SystemExit as missing:  # a run of some of the tables: the lead keeps its figures, and says which
        print(f"the headline matrix was not rewritten: {missing}", file=sys.stderr)


def section_body(tables: list[str], one_seed: str) -> str:
    """The section: the continuous summary, what it shows, the other engines' tables, one seed in full."""
    summary, *others = tables
    return (f"{SECTION}\n\n{INTRO}\n{summary}\n{FINDINGS}\n{OTHER_ENGINES}\n" + "\n".join(others) +
            f"\n### One seed in full\n\n{one_seed}")


def write_section(doc: Path, section: str, body: str) -> None:
    """Replace the ``section`` heading's part of ``doc`` (up to the next ``## `` heading) with ``body``, or
    append it; the rest of the document stays as it is. The heading is matched as a whole line: "## How well auto
    chooses" had matched inside "### How well auto chooses, as verl routes" and overwritten that section."""
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n\n"
    heading = re.search(f"^{re.escape(section)}$", text, flags=re.MULTILINE)
    if heading is not None:
        head, rest = text[:heading.start()], text[heading.end():]
        following = rest.find("\n## ")
        tail = rest[following + 1:] if following >= 0 else ""
        text = head + body + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + body
    doc.write_text(text, encoding="utf-8")
    print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
