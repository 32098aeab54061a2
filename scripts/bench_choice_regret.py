"""How well does `--arrangement auto` choose? Regenerate docs/benchmarks.md's section "How well auto chooses".

    python scripts/bench_choice_regret.py [--seeds 4] [--modes continuous,static,streaming] [--write-docs]
    python scripts/bench_choice_regret.py --modes streaming --tie-order quick-start,shuffle,interleave,...
    python scripts/bench_choice_regret.py --modes streaming --max-lag none --history-sigma 0.15
    python scripts/bench_choice_regret.py --modes streaming --rank-by central [--trainer-scale 0.25]
    python scripts/bench_choice_regret.py --modes streaming --rank-by expected,central --drift 1.15

For every benchmark workload and seed, auto judges its candidates under lengths drawn from its predictions
(`asp_cli.arrange.choose`); here each candidate is also forced (`--arrangement NAME`) and replayed on the true
lengths, the way the summaries of bench_simulate.py replay asp (same engine, lag bound, free dispatch). The
table says how often auto's pick was the candidate that was fastest on the true lengths, and its regret: its
true end-to-end time over the best candidate's, minus 1 (mean and worst over seeds). Regret is what a better
choice rule could still win with the same candidates; the rest of the distance to the true-lengths ceiling
is the candidates' (and the predictions'). Reads ../shared/data; skipped with a message when it is absent.
About 15 minutes on two cores for the three engines at 4 seeds (with --write-docs, streaming also without a lag bound).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from bench_simulate import write_section

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## How well auto chooses"

FINDINGS = """
What this shows (remeasured 2026-12-03, with the benchmark's groups of 8-16 from AIME's 4 truth samples
completed by draws instead of resampled, and the code of that day, the cap fix below included; the figures of
2026-12-01/02 in git):

- **Engines that refill, remeasured 2026-12-05 late** (the two `streaming` tables; the blocking ones came out
  the same to the digit, but one tie for "most often best" named the other way; these
  tables name ties as that run happened to, the script now the first alphabetically). These tables replay every candidate as asp's simulator routes (each group whole to
  whichever server frees first), while auto now times its candidates as verl routes an asynchronous trainer
  (since 2026-12-05) with heavy-tailed draws (a Student t per sample, since late 2026-12-05: "How well auto
  chooses, as verl routes", which judges the picks the way auto makes them). Judged by the simulator's routing,
  regret summed over the 8 workloads went 3.7% -> 8.8% at each workload's lag bound (mix-k16-n16-b512 0.0% ->
  4.5%: `bands` is the best order there under group routing, and auto no longer picks it, being 12.1% slower
  than a shuffle as verl routes; GSM8K 1.0% -> 1.7%) and 7.7% -> 6.7% without one (mix-k8-n8-b256 4.1% ->
  1.7%, mix-k2-n4 0.7% -> 2.0%). The two changes were not measured apart here. The bullets below that quote
  `streaming` figures are of the tables before (in git).

- Where the candidates differ by more than the seed noise, auto picks the best one or one within 0.4% of it:
  on `continuous` on every workload but GSM8K (4 of 4 on four of them), on `static` on six of eight, on
  engines that refill (each workload's lag bound) on five of eight.
- **Groups predicted at the response cap** (2026-12-03): the draws read each prompt's spread back from its
  predicted maximum and mean, and a maximum clipped at the cap made that spread 0.05-0.1, so every drawn sample
  of a long-reasoning prompt predicted near the cap sat at the cap, where real groups spread (some samples end
  far below it). Such a group now gets at least the median spread of the groups below the cap
  (`choose.sample_sigma`). Measured over the same 4 seeds, before -> after, regret summed over the 8
  workloads: `continuous` 5.4% -> 5.4%; `static` 7.0% -> 6.0% (mix-k8-n8 1.0% -> 0.0%: long-first, the true
  best, now picked on every seed); engines that refill at each workload's lag bound 2.9% -> 3.7%
  (mix-k8-n8-b256 0.9% -> 1.6%, mix-k2-n4 0.4% -> 0.5%), without one 5.5% -> 7.7% (aime-k8-n8-b256 0.7% ->
  2.2%, mix-k8-n8-b256 3.3% -> 4.1%). With a trainer four times cheaper (rollout-bound), on aime-k8-n8-b256
  at lag 2 asp went from 18.3% +- 6.0% behind the length-aware router to 10.5% +- 4.4% (docs/benchmarks.md,
  "With a trainer that does not bind"). Kept for that: the largest loss measured shrank by 8 points, where
  the streaming cells that grew are the noisiest of these tables (single draws scatter by 3-5% there).
- On engines that refill, `bands` (verl's chunks of a sorted epoch) is the true best on every seed of
  mix-k16-n16-b512 and aime-k8-n8-b256 at lag 2, yet on some seeds the draws put it within the 0.5% tie
  margin of others, which won the tie though 1-6% slower on the true lengths. So it comes first in the tie
  order there (2026-12-03). Measured before the cap fix over the same 4 seeds, each engine's picks remade with
  either order (`--tie-order`): regret summed over the 8 workloads 3.6% -> 2.9% at each workload's lag bound
  (aime-k8-n8-b256 0.8% -> 0.0%, mix-k8-n8 0.3% -> 0.4%), 6.1% -> 5.5% without one (aime-k8-n4 1.0% -> 0.0%,
  mix-k16-n16-b512 0.7% -> 0.4%; mix-k8-n8 0.0% -> 0.3%, mix-k2-n4 0.4% -> 0.8%). With `--dispatch planned`
  on mix-k16-n16-b512 (seeds 0-1) the draws had `bands` 0.5% ahead and kept `short-first` and `quick-start`
  by the tie rule, 5.8% and 2.9% slower than `bands` on the true lengths (a one-off diagnostic, not a shipped
  script: `asp_cli.arrange.pipeline.plan` with `--dispatch planned`, then every candidate forced and replayed
  with `asp_cli.bench.compare.compare` on the workload's true lengths). A wider per-prompt sigma for history
  prompts (0.5 for 0.25, `--history-sigma 0.5`, nearer the benchmark's own error: its ZeroEval truths are
  other models than its history) was worse on six of eight workloads at lag 2 (summed 3.6% -> 11.6%).
- **A wider tie margin on `static`** (tried 2026-12-06, not adopted): on mix-k8-n8-b256, where long-first is the
  true best on every seed and auto keeps `interleave`, the draws expected `interleave` 1-6% faster than long-first
  where it was 1.5% slower (its time underestimated by 11%, long-first's by 4%). Keeping long-first, first in the
  `static` order, whenever it is within 2%, 4% or 7% of the fastest (`--rank-by expected:0.02,...`) fixed that
  workload (1.7% -> 1.1%, 0.4%, 0.0%) and cost others as much (mix-k16-n16-b512 0.0% -> 1.9% at 4%): regret
  summed over the 8 workloads 6.0% -> 6.4%, 6.0% and 6.2%, and the picks' steps less representative (p90 step
  deviation, mean over the workloads, 1.03 -> 1.08, 1.32 and 1.65) (`python scripts/bench_choice_regret.py --seeds 4
  --modes static --rank-by expected,expected:0.02,expected:0.04,expected:0.07`).
- **Heavy-tailed, repeated draws on `static`** (tried 2026-12-07, not adopted): the draws auto uses where it times
  verl's asynchronous trainers (each sample's deviation a Student t of 4 degrees of freedom, `SAMPLE_TAIL_DF`), drawn
  eight times over at each scale node, given to `static` too. On mix-k8-n8-b256 the picks spread over long-first,
  interleave and per-step (regret 1.7% -> 0.9%), but the draws' own scatter, as large as the candidates' 1-2%
  differences, cost the others more: regret summed over the 8 workloads 6.0% -> 14.5% (mix-k8-n8 0.0% -> 5.1%,
  mix-k16-n16 0.1% -> 1.9%, mix-k16-n16-b512 0.0% -> 1.4%, GSM8K 3.2% -> 4.2%; `python scripts/bench_choice_regret.py
  --seeds 4 --modes static` with the two settings patched into `choose_arrangement`, a one-off not kept in the code).
- On `continuous`, where the minibatch KV budget binds, the candidates are the five arrangements with groups
  counted whole, the winner at its wave's peak, and, where that was faster, all five at the peak
  (`--kv-budget auto`; "name/whole", "name/peak" above).
  How that rule was chosen over judging all ten at once: docs/benchmarks.md, "The KV budget".
- Its wrong picks cost most on GSM8K (regret 5.0% on `continuous`, worst 9.7%; 3.2% on `static`, worst
  8.3%): heavy tails the predictive draws do not have (docs/benchmarks.md, "Other engines"; heavier-tailed
  draws were tried and broke the mixes). Next: `static` on mix-k8-n8-b256 (1.7%, worst 2.5%: long-first the
  true best on every seed, and auto's pick within 2.5% of it), and on engines that refill mix-k8-n8-b256
  (1.6%, worst 3.6%) and GSM8K (1.0%, worst 2.9%), where every candidate is within a few percent of the others.
- The `static` losses to long-first (mix-k8-n8 1.4%, mix-k8-n8-b256 1.7% over 10 seeds, "What the arrangement
  wins") are auto picking `interleave`, on 5 and 10 seeds of 10, expected 0.5-5.5% faster than long-first and
  0.3-4.5% slower on the true lengths (2026-12-05). On one seed (mix-k8-n8-b256, seed 9), with the true group
  means and the spreads the draws read from the predicted group maximum, `interleave` wins by 6%; with each
  group's own spread, long-first wins by 1.7% (a one-off diagnostic: both replayed with
  `asp_cli.sim.run.simulate_schedule` on lengths rebuilt by hand). The predicted maximum misses a group's true
  log-sd by 0.27-0.52 on the log scale beyond sampling noise. Drawing each group's spread with that uncertainty
  (`--spread-sigma 0.35`, a what-if) made `static` picks worse, not better: regret summed 6.0% -> 10.9%
  (mix-k8-n8 0.0% -> 2.8%, GSM8K 3.2% -> 5.4%, mix-k8-n8-b256 1.7% -> 1.2%); on `continuous` it changed
  nothing beyond the seeds' noise (5.4% -> 5.2%). Not adopted.
- Judged on one epoch, the 2-epoch mixes were chosen badly on engines that refill (regret 7.1% on
  mix-k8-n8-b256, 3.9% on mix-k16-n16-b512, measured 2026-12-01): how one epoch's tail meets the next one's
  head decides the order there, so an input that fits the sample is judged over two epochs.
- Without a lag bound on engines that refill (the last table above; `--modes streaming --max-lag none`
  alone), auto's mean regret is within 0.4% on five of eight workloads. On mix-k8-n8-b256 (4.1%, worst 7.1%;
  3.3% before the cap fix) `bands` is the true best on three seeds of four, and auto picks it on one (two
  before): single draws scatter a
  candidate's time by 3-5% there (seed 1: `bands` 0.92-1.00 of the shuffle over six draws at the central
  scale, `short-first` 0.93-1.06), and at the upper scale node (every length 1.19x) one draw had `bands` 26%
  behind the shuffle, where the same draw at 1.20x had it 2.6% behind and at 1.7x 32% behind: its replays are
  knife-edged once the long bands' request batches, sent whole, overflow their servers' cache, and the
  expected time weighs that (a one-off diagnostic, not a shipped script: `choose`'s draws rebuilt by hand,
  each candidate replayed with `asp_cli.sim.run.simulate_schedule`). Before `bands`, with three times the draws (9 replays a candidate instead of 3,
  mix-k8-n8-b256) the regret was 2.9% against 3.3% (an earlier version of the drawn truth): little of it is
  the draws' noise, most is where the predictive distribution differs from the truth (short-first's replays
  under it are bimodal: "Room for an order on engines that refill"). A narrower per-prompt sigma for history prompts (0.15 for 0.25,
  `--history-sigma 0.15`) helped there and hurt elsewhere (measured on the old truth: summed over 8 workloads
  4.5% to 3.8% without a bound, 3.9% either way at lag 2): not adopted.
- **Ranking by the central draw alone** (2026-12-04, a what-if, not adopted: `--rank-by central`, the picks
  remade from each candidate's time under the draw whose common scale factor is at its centre, from the same
  replays). Regret summed over the 8 workloads, 4 seeds, auto's rule -> central: `continuous` 5.4% -> 5.6%,
  `static` 6.0% -> 6.6%; engines that refill at each workload's lag bound 3.6% -> 3.0%, without one 7.8% ->
  5.2% (mix-k8-n8-b256 4.1% -> 1.7%, aime-k8-n8-b256 2.2% -> 1.2%); the same with the training step four times
  cheaper (`--trainer-scale 0.25`, rollout-bound) 11.6% -> 11.4% at the lag bound and 24.8% -> 21.7% without
  one. On engines that refill the candidates' order flips between the outer scale nodes (every length 19%
  shorter or longer, for prompts with history) and the centre (the bullet above: long bands' request batches
  overflowing their servers' cache at the long node):
  `bands` on mix-k8-n8-b256 without a lag bound (seed 0) is 8% faster than the shuffle at the centre and 20%
  slower at the long node, and over the four seeds 4.6% faster on the true lengths (`python
  scripts/bench_candidates.py mix-k8-n8-b256 --max-lag none`). Better on all four streaming configurations and worse on
  both blocking engines. **Not adopted, since it breaks where the policy's lengths grow**, which is what the
  outer nodes stand for: replayed on every true length times 0.85 or 1.15 (the policy writing 15% less or more
  than its history: `--rank-by expected,central --drift 1.15`, both rules judged on the same replays, 4 seeds,
  2026-12-04), regret summed over the 8 workloads at each workload's lag bound, auto's rule -> central: x0.85
  1.8% -> 1.3%, x1.15 8.3% -> 7.6%; without a lag bound x0.85 6.8% -> 3.1%, but x1.15 11.8% -> 21.8%
  (mix-k8-n8-b256 4.8% -> 12.5%: the central draw picks `bands` there, whose long request batches overflow their
  servers' cache once the lengths grow; mix-k2-n4 4.7% -> 6.4%). RL policies' responses tend to lengthen as
  training goes on, so auto keeps weighing the outer nodes. Three more rules read from the same per-draw times,
  judged on the same six settings (each workload's lag bound and none, x0.85, x1 and x1.15; a one-off
  diagnostic: every candidate forced and replayed as above, the picks remade offline), summed over the six:
  auto's 40.1%, the central draw 42.0%, the long node weighed 1/3 and the short one 0 40.3%, each draw's time
  over that draw's fastest candidate averaged 41.0%, and the smallest worst such ratio (minimax) 40.1% (5.2%
  where auto's has 11.8%, without a bound at x1.15, but 4.1-10.0% where auto's has 1.8-8.3%, at the lag bound):
  no rule beats auto's over all six. Nor is the loss under growth the history's staleness: with the predictions
  scaled by the same 1.15 (the plan knowing the growth; a one-off diagnostic, the same replays) auto's summed
  regret is 11.5% at the lag bound and 10.3% without one, against 8.3% and 11.8% not knowing it: longer lengths
  make the candidates harder to tell apart, whatever the plan expects.
- **Representative steps winning auto's ties** (2026-12-05, a what-if, not adopted: `--rank-by
  expected,representative-ties`: where auto's pick under `--steps any` has steps less representative than a random
  arrangement's and another candidate within the tie margin has steps within `--steps representative`'s bound,
  the earliest such one). 4 seeds, the 8 workloads, the same replays: it changed 2 picks of 32 on `continuous`
  (regret summed 5.4% -> 5.4%; the picks' step deviation p90 on the true lengths, mean over the workloads, 1.047
  -> 1.034), 1 on `static` (6.0% -> 6.2%, aime-k8-n4 0.4% -> 0.7%; 1.028 -> 1.020), none on engines that refill at
  each workload's lag bound (8.8%), and 2 without a bound (6.7% -> 8.3%, mix-k16-n16-b512 0.7% -> 2.4%, worst seed
  4.4%; 1.973 -> 1.864). Ties are rare and the steps they gain few; where it moved picks it cost time on two
  workloads of four. Not adopted: `--steps representative` is how to ask for representative steps, and the
  summary says what they would cost (`representative_alternative`). (Its `--trainer-scale 0.25` runs were stopped
  unfinished.)
"""


LAG_OF_WORKLOAD = "workload"


def regret_rows(data: Path, preset, mode: str, seeds: int, names: tuple[str, ...] | None = None,
                tie_order: tuple[str, ...] | None = None, max_lag: int | None | str = LAG_OF_WORKLOAD,
                history_sigma: float | None = None, rank_by: str = "expected", drift: float = 1.0,
                spread_sigma: float | None = None) -> list[dict]:
    """`rule_rows` for one pick rule."""
    return rule_rows(data, preset, mode, seeds, names, tie_order, max_lag, history_sigma, (rank_by,), drift,
                     spread_sigma)[rank_by]


def drifted(truth: np.ndarray, drift: float, cap: int) -> np.ndarray:
    """The true lengths of a policy that writes ``drift`` times what its history showed (whole tokens, 1..cap)."""
    return np.clip(np.rint(truth * drift), 1, cap).astype(truth.dtype)


def rule_rows(data: Path, preset, mode: str, seeds: int, names: tuple[str, ...] | None = None,
              tie_order: tuple[str, ...] | None = None, max_lag: int | None | str = LAG_OF_WORKLOAD,
              history_sigma: float | None = None, rules: tuple[str, ...] = ("expected",),
              drift: float = 1.0, spread_sigma: float | None = None) -> dict[str, list[dict]]:
    """One row per workload: picks that were the true best, and the regret over seeds. With ``tie_order``, the
    pick is remade from the same expected times with that order breaking the near-ties (the earliest within
    `asp_cli.arrange.choose.TIE_MARGIN` of the fastest) instead of the engine's own order. ``max_lag`` is the
    lag bound of every workload (by default each its own); ``history_sigma``, a what-if, replaces auto's
    per-prompt sigma for prompts seen in history (`asp_cli.arrange.choose.HISTORY_SIGMA`) while it judges.
    A rule ``"central"``, a what-if, remakes each pick from the candidates' times under the central draw alone
    (the common scale factor at its centre: `end_to_end_s_by_draw`) instead of their expected times (``"expected"``,
    auto's rule); ``"expected:M"`` is auto's rule with a tie margin of M instead of `TIE_MARGIN` (the earliest
    candidate in the engine's order within M of the fastest); every rule is judged on the same replays. ``drift``, a what-if, replays on every true length
    times that factor (`drifted`): the policy's lengths moved since the history the predictions come from.
    ``spread_sigma``, a what-if, draws each group's spread with that uncertainty while auto judges
    (`asp_cli.arrange.choose.SPREAD_SIGMA`, off by default)."""
    from asp_cli.arrange import choose
    from asp_cli.arrange.choose import TIE_MARGIN
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.compare import ASP, WORKLOADS, build_workload, compare

    rows: dict[str, list[dict]] = {rule: [] for rule in rules}
    for name, spec in WORKLOADS.items():
        if (names is not None and name not in names) or (names is None and spec.held_out):
            continue
        hits = dict.fromkeys(rules, 0)
        regrets: dict[str, list[float]] = {rule: [] for rule in rules}
        step_devs: dict[str, list[float]] = {rule: [] for rule in rules}
        changed = dict.fromkeys(rules, 0)
        best_names = []
        for seed in range(seeds):
            lag = spec.max_lag if max_lag == LAG_OF_WORKLOAD else max_lag
            settings = dataclasses.replace(spec.settings(), seed=seed, engine=mode, max_lag=lag)
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            truth = drifted(workload.truth, drift, settings.max_response_tokens) if drift != 1.0 else workload.truth
            kept = choose.HISTORY_SIGMA, choose.SPREAD_SIGMA
            choose.HISTORY_SIGMA = kept[0] if history_sigma is None else history_sigma
            choose.SPREAD_SIGMA = kept[1] if spread_sigma is None else spread_sigma
            try:
                _, choice = plan(workload.prompts, workload.predictions, settings, preset=preset)
            finally:
                choose.HISTORY_SIGMA, choose.SPREAD_SIGMA = kept
            true, steps = {}, {}
            # A candidate is an arrangement cut under a KV accounting (both where auto judged both).
            label = lambda name, kv: name if len({c["kv_budget"] for c in choice.candidates}) == 1 \
                else f"{name}/{kv}"  # noqa: E731
            for candidate in choice.candidates:
                forced = dataclasses.replace(settings, arrangement=candidate["name"]).with_kv_cut(candidate["kv_budget"])
                replay = compare(workload.prompts, workload.predictions, truth, forced, preset,
                                 max_lag=lag, mode=mode, include=(ASP,))
                true[label(candidate["name"], candidate["kv_budget"])] = replay[0]["end_to_end_s"]
                steps[label(candidate["name"], candidate["kv_budget"])] = replay[0]["step_length_deviation_p90"]
            best = min(true, key=true.get)
            best_names.append(best)
            for rule in rules:
                mine = label(choice.chosen, choice.kv_budget)
                if rule == "representative-ties":
                    mine = label(representative_tie(choice), choice.kv_budget)
                elif tie_order is not None or rule != "expected":
                    central = len(choice.candidates[0]["end_to_end_s_by_draw"]) // 2
                    base, _, margin = rule.partition(":")
                    expected = {c["name"]: (c["expected_end_to_end_s"] if base == "expected"
                                            else c["end_to_end_s_by_draw"][central])
                                for c in choice.candidates if c["kv_budget"] == choice.kv_budget}
                    order_given = tie_order or tuple(expected)  # the engine's own order, as judged
                    fastest = min(expected.values())
                    order = list(order_given) + [n for n in expected if n not in order_given]
                    tie = float(margin) if margin else TIE_MARGIN
                    pick = next(n for n in order if expected.get(n, float("inf")) <= fastest * (1 + tie))
                    mine = label(pick, choice.kv_budget)
                hits[rule] += true[mine] <= true[best] * (1.0 + 1e-9)
                regrets[rule].append(true[mine] / true[best] - 1.0)
                step_devs[rule].append(steps[mine])
                changed[rule] += mine != label(choice.chosen, choice.kv_budget)
        common = max(sorted(set(best_names)), key=best_names.count)  # ties: the first name, every run
        for rule in rules:
            rows[rule].append({"workload": name, "hits": hits[rule], "seeds": seeds,
                               "mean": float(np.mean(regrets[rule])), "worst": float(np.max(regrets[rule])),
                               "best": common, "best_count": best_names.count(common),
                               "step_deviation_p90": float(np.mean(step_devs[rule])), "changed": changed[rule]})
    return rows


def representative_tie(choice) -> str:
    """The pick remade under a what-if rule (`--rank-by representative-ties`): where auto's pick (`--steps any`)
    has steps less representative than a random arrangement's and a candidate within the tie margin of the fastest
    (same KV cut) has steps within `--steps representative`'s bound, the earliest such candidate in the engine's
    order; otherwise auto's pick."""
    from asp_cli.arrange.choose import TIE_MARGIN

    alternative = choice.representative_alternative
    if not alternative:
        return choice.chosen
    judged = [c for c in choice.candidates if c["kv_budget"] == choice.kv_budget]
    fastest = min(c["expected_end_to_end_s"] for c in judged)
    return next((c["name"] for c in judged if c["expected_end_to_end_s"] <= fastest * (1.0 + TIE_MARGIN)
                 and c["expected_step_deviation_p90"] <= alternative["step_deviation_bound"]), choice.chosen)


def table(mode: str, rows: list[dict], lag: str = "each workload's lag bound") -> str:
    lines = [f"Engine `{mode}`, trainer in arrival order, {lag}, free dispatch:", "",
             "| workload | auto picked the true best | regret, mean | regret, worst | most often best |",
             "|---|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['hits']} of {r['seeds']} | {r['mean']:.1%} | {r['worst']:.1%} | "
                     f"{r['best']} ({r['best_count']} of {r['seeds']}) |")
    return "\n".join(lines) + "\n"


def _rule_ok(rule: str) -> bool:
    """A pick rule `--rank-by` takes: 'expected', 'central', 'representative-ties' or 'expected:M' with a tie margin M
    in [0, 0.5]."""
    if rule in ("expected", "central", "representative-ties"):
        return True
    base, _, margin = rule.partition(":")
    try:
        return base == "expected" and 0.0 <= float(margin) <= 0.5
    except ValueError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--modes", default="continuous,static,streaming")
    parser.add_argument("--write-docs", action="store_true", help="rewrite the section in --doc")
    parser.add_argument("--tie-order", default=None,
                        help="comma-separated candidates: remake each pick with this order breaking near-ties "
                             "(a what-if; not with --write-docs)")
    parser.add_argument("--max-lag", default=None,
                        help="an integer, or 'none', for every workload (default: each workload's own bound)")
    parser.add_argument("--history-sigma", type=float, default=None,
                        help="auto's per-prompt sigma of log length for prompts seen in history (a what-if; "
                             "not with --write-docs)")
    parser.add_argument("--rank-by", default="expected",
                        help="remake each pick from the expected times (auto's rule, 'expected') or from the central "
                             "draw's alone ('central'), or auto's with another tie margin ('expected:0.02'), or auto's with "
                             "representative steps winning its ties ('representative-ties'); several, "
                             "comma-separated, judges each on the same replays (a what-if; not with --write-docs)")
    parser.add_argument("--drift", type=float, default=1.0,
                        help="replay on every true length times this: the policy's lengths moved since the history "
                             "(a what-if; not with --write-docs)")
    parser.add_argument("--spread-sigma", type=float, default=None,
                        help="draw each group's spread with this log-normal uncertainty while auto judges (a what-if; "
                             "not with --write-docs)")
    parser.add_argument("--trainer-scale", type=float, default=1.0,
                        help="multiply the training step's cost by this, as bench_rollout_bound.py does (a what-if; "
                             "not with --write-docs)")
    args = parser.parse_args()
    if args.write_docs and (args.tie_order or args.history_sigma is not None or args.max_lag is not None
                            or args.rank_by != "expected" or args.trainer_scale != 1.0 or args.drift != 1.0
                            or args.spread_sigma is not None):
        parser.error("--tie-order, --history-sigma, --spread-sigma, --max-lag, --rank-by, --trainer-scale and --drift "
                     "are what-ifs; they do not rewrite the docs")
    if args.spread_sigma is not None and not 0 <= args.spread_sigma <= 2:
        parser.error("--spread-sigma must be from 0 to 2")
    rules = tuple(args.rank_by.split(","))
    if not rules or any(not _rule_ok(rule) for rule in rules) or len(set(rules)) < len(rules):
        parser.error(f"--rank-by takes 'expected', 'central', 'representative-ties' or 'expected:M' (a tie margin M "
                     f"from 0 to 0.5), "
                     f"comma-separated, each once (got {args.rank_by!r})")
    if not args.drift > 0:
        parser.error("--drift must be above 0")
    if not args.trainer_scale > 0:
        parser.error("--trainer-scale must be above 0")
    if not args.data.is_dir():
        print(f"Skipped: {args.data} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    if args.trainer_scale != 1.0:
        from bench_rollout_bound import scaled_preset

        preset = scaled_preset(preset, args.trainer_scale)
    tables = []
    tie_order = tuple(args.tie_order.split(",")) if args.tie_order else None
    max_lag = (LAG_OF_WORKLOAD if args.max_lag is None
               else None if args.max_lag == "none" else int(args.max_lag))
    lag = "each workload's lag bound" if args.max_lag is None else f"max_lag {args.max_lag}"
    for mode in args.modes.split(","):
        print(f"{mode} ...", file=sys.stderr)
        by_rule = rule_rows(args.data, preset, mode, args.seeds, tie_order=tie_order, max_lag=max_lag,
                            history_sigma=args.history_sigma, rules=rules, drift=args.drift,
                            spread_sigma=args.spread_sigma)
        for rule, rows in by_rule.items():
            what = (f"{lag}" + (f", picks by the {rule} rule" if len(rules) > 1 or rule != "expected" else "")
                    + (f", true lengths x{args.drift:g}" if args.drift != 1.0 else "")
                    + (f", spreads drawn with sigma {args.spread_sigma:g}" if args.spread_sigma else ""))
            tables.append(table(mode, rows, what) + f"\nRegret summed over the workloads: "
                          f"{sum(r['mean'] for r in rows):.1%}"
                          + (f"; the picks' step deviation p90 on the true lengths, mean over the workloads "
                             f"{np.mean([r['step_deviation_p90'] for r in rows]):.3f}; picks changed from auto's "
                             f"{sum(r['changed'] for r in rows)}" if len(rules) > 1 else "") + "\n")
    if args.write_docs and "streaming" in args.modes.split(","):
        # Engines that refill without a lag bound too: the section's last table (its findings refer to it).
        print("streaming without a lag bound ...", file=sys.stderr)
        tables.append(table("streaming", regret_rows(args.data, preset, "streaming", args.seeds, max_lag=None),
                            "no lag bound"))
    text = "\n".join(tables)
    print(text)
    if args.write_docs:
        command = f"python scripts/bench_choice_regret.py --seeds {args.seeds} --modes {args.modes} --write-docs"
        intro = (f"Reproduce: `{command}`. For each workload and seed every candidate is also forced and replayed "
                 "on the true lengths (same engine, lag bound and free dispatch as asp's row in the summaries "
                 "above). \"Regret\" is auto's true end-to-end time over the best candidate's, minus 1: what a "
                 "better choice among the same candidates could still win. The rest of the distance to the "
                 "true-lengths ceiling is the candidates' and the predictions'.\n")
        write_section(args.doc, SECTION, f"{SECTION}\n\n{intro}\n{text}{FINDINGS}")


if __name__ == "__main__":
    main()
