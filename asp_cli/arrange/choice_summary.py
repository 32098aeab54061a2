"""What auto's choice says: the summary line of `asp schedule`, `asp report` and the schedule's metadata, written
from the choice's record (`asp_cli.arrange.choose.ArrangementChoice.to_dict`)."""

from __future__ import annotations

from typing import Any

from asp_cli.arrange.choose import (ORDER_MATTERS_LITTLE, REPRESENTATIVE_COST_SHOWN, TIE_MARGIN, _is, gain_over,
                                    gains_by_draw)


def _against_the_shuffle(choice: dict[str, Any], chosen: dict[str, Any], kv_budget: str) -> str:
    """A line saying what auto's pick is expected to save over the candidate ``shuffle`` (a random order at the
    same concurrency: what a user would run anyway), or, within `ORDER_MATTERS_LITTLE` of it either way, that the
    order matters little. Empty where the pick is the shuffle, or there is no shuffle that keeps the lag bound
    to compare with."""
    slime = ("\n  slime reads the file in its own order unless --rollout-shuffle: `asp simulate SCHEDULE --compare`"
             " judges asp against that order (its `dataset-order` row), as slime's router routes both")
    if chosen.get("name") == "shuffle" and choice.get("router") == "cache-aware":
        # nothing over slime's --rollout-shuffle, and its default, the file's own order, was said nowhere (a slime
        # newcomer's round read only "arrangement: shuffle")
        return "\n  auto kept a shuffle: no saving is expected over slime's --rollout-shuffle" + slime
    shuffle = _the_shuffle(choice, chosen, kv_budget)
    if shuffle is None:
        return ""
    gain = gain_over(chosen["expected_end_to_end_s"], shuffle["expected_end_to_end_s"])  # --json's figure
    by = f"{abs(gain):.1%} {'faster' if gain >= 0 else 'slower'}"
    # Judged as a miniature of a large run (`miniature_of`), the gain is the miniature's: a newcomer's 60k-prompt,
    # 8-instance run read "within 2% ... the order matters little" where `asp simulate --compare` replayed the whole
    # run 10% faster than verl's default (2026-12-05).
    small = (f" in the miniature it was judged in ({_miniature_words(choice)}; the whole run's can differ: `asp "
             "simulate SCHEDULE --compare` replays it)" if choice.get("judged_instances") else "")
    if abs(gain) >= ORDER_MATTERS_LITTLE:
        line = (f"\n  expected {by} than a shuffle at the same concurrency{small} (the candidate `shuffle`, in auto's "
                "draws of lengths around the predictions; `asp simulate --compare` draws its own, and `--lengths` "
                "with your rollout log replays both on real ones; on the benchmark's real lengths the replayed saving "
                "came out up to 5 points below this figure, 9 on chat alone, more where each sample is another "
                "model's answer: docs/benchmarks.md, \"How far the expected gain holds\")")
    elif small:
        line = (f"\n  expected within {ORDER_MATTERS_LITTLE:.0%} of a shuffle at the same concurrency ({by}){small}")
    else:
        line = (f"\n  expected within {ORDER_MATTERS_LITTLE:.0%} of a shuffle at the same concurrency ({by}): "
                "the order matters little here")
    if choice.get("router") == "cache-aware":  # slime's default is the file's own order (a slime newcomer's round)
        line += slime
    return line + _draws_disagree(chosen, shuffle)


def _the_shuffle(choice: dict[str, Any], chosen: dict[str, Any], kv_budget: str) -> dict[str, Any] | None:
    """The candidate ``shuffle`` that auto's pick is measured against (its `expected_gain_over_shuffle`): None where
    the pick is the shuffle, the shuffle cannot keep the lag bound on the whole run, or either has no time."""
    if chosen.get("name") == "shuffle" or "shuffle" in (choice.get("bound_broken_on_input") or []):
        return None
    shuffle = next((c for c in choice["candidates"] if _is(c, "shuffle", kv_budget)), None)
    if shuffle is None or not chosen.get("expected_end_to_end_s") or not shuffle.get("expected_end_to_end_s"):
        return None
    return shuffle


def _draws_disagree(chosen: dict[str, Any], shuffle: dict[str, Any]) -> str:
    """A line where the chosen candidate's draws disagree about the shuffle: at least one draw of lengths has it
    `ORDER_MATTERS_LITTLE` faster than the shuffle and another as much slower. Its expected gain is then a bet
    on lengths nobody knows in advance (on engines that refill, with long reasoning and a trainer that keeps up,
    the same plan's replays scatter by 5-10% on the true lengths: docs/benchmarks.md, "With a trainer that does
    not bind"). Empty where the draws agree, or the schedule predates `end_to_end_s_by_draw`."""
    gains = gains_by_draw(chosen, shuffle)  # --json's gain_over_shuffle_by_draw
    if not gains or max(gains) < ORDER_MATTERS_LITTLE or min(gains) > -ORDER_MATTERS_LITTLE:
        return ""
    return (f"\n  but its {len(gains)} draws of lengths disagree: from {max(gains):.1%} faster than the "
            f"shuffle to {-min(gains):.1%} slower, so the expected gain is a bet on lengths not known "
            "in advance")


def _miniature_words(choice: dict[str, Any]) -> str:
    """The shape a sample was judged in (`miniature_of`), e.g. "1 instance, train batch 33"."""
    k = choice["judged_instances"]
    return f"{k} instance{'s' if k != 1 else ''}, train batch {choice.get('judged_train_batch_size', 0):,}"


def _same_plan(candidate: dict[str, Any], before: list[dict[str, Any]]) -> str:
    """`` (the same plan as X)`` where an earlier candidate took exactly the same time under every draw (`bands`
    is the short-first sort where each train batch fits one request batch per instance: a newcomer read two
    candidates where there was one)."""
    mine = candidate.get("end_to_end_s_by_draw")
    same = next((c["name"] for c in before if mine and c.get("end_to_end_s_by_draw") == mine
                 and c.get("kv_budget") == candidate.get("kv_budget")), None)
    return f" (the same plan as {same})" if same else ""


# What each rollout holds in a plan for slime's train_async.py or OpenRLHF's asynchronous trainer
# (`ArrangementChoice.step_layout`).
_LAYOUT_WORDS = {"batches": "one consecutive train batch of the order",
                 "finish": "the groups expected to finish in its step under the lag bound, long ones spread over "
                           "the rollouts"}


def _timed_words(choice: dict) -> str:
    """How the candidates' expected times were replayed (`ArrangementChoice.timed_as`, `router`, `verl_trainer`,
    `prompts_per_server`), as the summary's words after "expected end-to-end"."""
    timed, router = choice.get("timed_as"), choice.get("router")
    per_server = (f"{choice['prompts_per_server']} prompts in flight per server)" if choice.get("prompts_per_server")
                  else "as many prompts in flight as the servers' slots hold)")
    if router == "cache-aware" and timed == "verl":
        return (" as slime's rollout runs a synchronous step through sglang-router's cache_aware policy (--router "
                "cache-aware: every sample at submission, a group's samples on one server)")
    if router == "group-round-robin" and timed == "verl":
        return (" as OpenRLHF's synchronous trainer rolls out a batch (--router group-round-robin: a prompt's samples "
                "together, the batch's prompts dealt to the engines in turn)")
    if timed in ("slime-async", "openrlhf-async"):
        other = choice.get("other_layout") or {}
        how = ("slime's train_async.py runs through sglang-router's cache_aware policy (--router cache-aware "
               "--max-lag 1 --trainer schedule: each rollout generated while the step before trains, a group's "
               "samples on one server)" if timed == "slime-async" else
               "OpenRLHF's asynchronous trainer runs (--router group-round-robin --max-lag 1 --trainer schedule: "
               "--train.async_enable, each rollout batch generated while the step before trains, a prompt's samples "
               "together, the batch's prompts dealt to the engines in turn)")
        return (f" as {how}, each rollout " + _LAYOUT_WORDS.get(choice.get("step_layout"), "")
                + (f" (laid out the other way, each rollout {_LAYOUT_WORDS[other['step_layout']]}, its best, "
                   f"{other['name']}, {other['expected_end_to_end_s']:,.0f} s):" if other.get("step_layout") in
                   _LAYOUT_WORDS and other.get("expected_end_to_end_s") else ":"))
    if router == "cache-aware" and timed == "verl-async":
        return (" as sglang-router's cache_aware policy routes an asynchronous trainer (--router cache-aware: a "
                "prompt started as a slot frees, its samples on one server, " + per_server)
    if router == "group-round-robin" and timed == "verl-async":
        return (" as AReaL's controller deals an asynchronous trainer's rollouts (--router group-round-robin --trainer "
                "arrival: a prompt started as the staleness bound and a slot allow, its samples together, dealt to the "
                "servers in turn in the file's order, " + per_server)
    if router == "round-robin" and timed:
        return (" as AReaL's SPMD mode routes " + ("a synchronous step (--router round-robin: every sample at "
                                                  "submission, each to the next server in turn)" if timed == "verl"
                                                  else "an asynchronous trainer (--router round-robin: a prompt "
                                                  "started as a slot frees, each sample to the next server in turn)"))
    if router:
        return (f" in asp's own replay, each group whole to whichever server frees first (--router {router} is "
                "modelled for synchronous steps, for a trainer that takes groups as they finish"
                + (" and for slime's train_async.py (--max-lag 1)" if router == "cache-aware" else "")
                + "; for one that follows the schedule under this lag bound this replay is the nearest)")
    if timed == "verl":
        return " as verl routes a synchronous step (every sample at submission)"
    if timed == "verl-async" and choice.get("verl_trainer"):
        return (f" as verl's v1 trainer runs {choice['verl_trainer'].replace('-', '_')} (--verl-trainer: a train "
                "batch a step after --max-lag of warm-up, every sample routed at submission"
                + (", the servers asleep while it trains)" if choice["verl_trainer"] == "colocate-async" else ")"))
    if timed == "verl-async":
        return (" as verl routes an asynchronous trainer (every sample at submission, "
                + (per_server if choice.get("prompts_per_server") else
                   "as many prompts in flight as the servers' slots hold; if you run verl's fully asynchronous "
                   "trainer, its rollouter keeps 16 per server by default: --prompts-per-server 16)"))
    return ""


def _judged(choice: dict[str, Any]) -> str:
    """The prompts and epochs auto judged on, singular for 1 (it read 'on 1 prompts x 1 epoch(s)')."""
    prompts, epochs = choice["evaluated_prompts"], choice.get("evaluated_epochs") or 1
    return f"{prompts:,} prompt{'' if prompts == 1 else 's'} x {epochs} epoch{'' if epochs == 1 else 's'}"


def _auto_parts(choice: dict[str, Any], run_epochs: int | None) -> dict[str, Any]:
    """The pieces of auto's summary (`arrangement_line`, `arrangement_block`): ``both`` (both KV cuts judged),
    ``budget_note``, ``among`` (the --steps representative words), ``how`` (how the times were replayed, the words
    after "expected end-to-end") and ``over`` (the draws, the prompts judged and how the times scale)."""
    kv_budget = choice.get("kv_budget")
    # The KV cut is said where auto chose it (both cuts judged: the budget binds); elsewhere it shaped nothing
    # or was the user's, and the settings say it.
    both = len({c.get("kv_budget") for c in choice.get("candidates", [])}) > 1
    budget_note = f" and the {kv_budget} KV budget" if both else ""
    if both and kv_budget == "whole" and not choice.get("bound_broken_on_input"):
        budget_note += f" (kept unless the peak one is faster by more than the {TIE_MARGIN:.1%} tie margin)"
    among = ""
    if choice.get("steps") == "representative":
        mine = next((c for c in choice["candidates"] if _is(c, choice["chosen"], choice.get("kv_budget"))), {})
        among = (", among those with steps about as representative as a random arrangement's (p90 step deviation "
                 f"at most {choice.get('step_deviation_bound', 0):.2f})" if mine.get("representative_steps", True)
                 else f", none with steps about as representative as a random arrangement's (p90 step deviation at "
                 f"most {choice.get('step_deviation_bound', 0):.2f}): the one with the most representative steps")
    how = (_timed_words(choice)
           + (" of the judged sample" if choice.get("sampled") and not choice.get("run_prompt_epochs") else ""))
    over = (f"over {choice['draws']} draws of lengths (the predictions' spread, every length also "
            "scaled by one common factor below, at and above 1, which weighs a run longer than predicted: "
            f"`asp simulate` draws without it, so replays shorter) on {_judged(choice)}"
            + (f", judged as a miniature of the run ({_miniature_words(choice)}) and scaled up to its "
               f"{choice['run_prompt_epochs']:,} prompt-epochs" if choice.get("judged_instances") else
               f", scaled up to the run's {choice['run_prompt_epochs']:,} prompt-epochs" if choice.get(
                "run_prompt_epochs") else
               ": the sample's own times, which rank the candidates; the whole run takes longer, as `asp simulate` "
               "says" if choice.get("sampled") else
               f": those epochs' own times, which rank the candidates; the run's {run_epochs} take longer, as `asp "
               "simulate` says" if run_epochs and run_epochs > (choice.get("evaluated_epochs") or 1) else ""))
    return {"both": both, "budget_note": budget_note, "among": among, "how": how, "over": over}


def _named_line(choice: dict[str, Any]) -> str:
    """The summary of a named arrangement: which, for which engine, and how its groups counted against the
    minibatch KV budget (`--kv-budget`: auto cuts a named one at the peak)."""
    counted = {"peak": ", groups counted at their peak against the KV budget",
               "whole": ", groups counted whole against the KV budget",
               "padded": ", minibatches counted padded against the KV budget"}
    said = counted.get(choice.get("kv_budget") or "", "") if choice["engine"] != "streaming" else ""
    return (f"arrangement: {choice['chosen']} (--arrangement {choice['chosen']}, for the {choice['engine']} "
            f"engine{said})")


def arrangement_line(choice: dict[str, Any], run_epochs: int | None = None) -> str:
    """Which arrangement was used, and, for auto, what every candidate was expected to take (one line, then a line
    per note): the summary of `asp report` (`asp schedule` prints `arrangement_block`, the same facts laid out to
    scan). ``run_epochs``, the run's epochs where known, says when the candidates' times are of fewer epochs than
    it."""
    if choice["setting"] != "auto":
        return _named_line(choice)
    parts = _auto_parts(choice, run_epochs)
    candidates = ", ".join(f"{c['name']}{'/' + c['kv_budget'] if parts['both'] else ''} "
                           f"{c['expected_end_to_end_s']:,.0f} s"
                           + (" (steps not representative)" if c.get("representative_steps") is False else "")
                           + _same_plan(c, choice["candidates"][:i])
                           for i, c in enumerate(choice["candidates"]))
    line = (f"arrangement: {choice['chosen']} (auto{parts['among']}, for the {choice['engine']} engine with "
            f"{choice.get('dispatch', 'planned')} dispatch{parts['budget_note']}; expected end-to-end{parts['how']} "
            f"{candidates}, {parts['over']})")
    return line + _notes(choice, parts["both"])


def arrangement_block(choice: dict[str, Any], run_epochs: int | None = None) -> str:
    """`arrangement_line`'s facts laid out to scan in a terminal (`asp schedule`'s summary): the pick, its expected
    time and its gain over a shuffle first, then a short line per candidate (its expected time, its difference from
    the pick, and where its steps are not representative), then how the times were replayed, then the notes. Two
    newcomers (verl, slime) read the one line of about 900 characters as a wall, the pick's gain lines below it."""
    if choice["setting"] != "auto":
        return _named_line(choice)
    parts = _auto_parts(choice, run_epochs)
    kv_budget = choice.get("kv_budget") or "peak"
    chosen = next((c for c in choice["candidates"] if _is(c, choice["chosen"], kv_budget)), {})
    mine = chosen.get("expected_end_to_end_s")
    head = f"arrangement: {choice['chosen']}{'/' + kv_budget if parts['both'] else ''} (auto)"
    if mine:
        head += f", expected {mine:,.0f} s end-to-end"
        shuffle = _the_shuffle(choice, chosen, kv_budget)
        if shuffle is not None:
            gain = gain_over(mine, shuffle["expected_end_to_end_s"])
            head += (f", {abs(gain):.1%} {'faster' if gain >= 0 else 'slower'} than a shuffle "
                     f"({shuffle['expected_end_to_end_s']:,.0f} s)")
    names = [f"{c['name']}{'/' + c['kv_budget'] if parts['both'] else ''}" for c in choice["candidates"]]
    times = [f"{c['expected_end_to_end_s']:,.0f} s" for c in choice["candidates"]]
    wide, long = max(map(len, names)), max(map(len, times))
    rows = []
    for i, (c, name, time) in enumerate(zip(choice["candidates"], names, times)):
        if c is chosen:
            against = "the pick"
        elif mine:
            # The pick's gain over it as the headline's over a shuffle (`gain_over`): the shuffle's row read 3.9%
            # under a headline of 3.8% where the difference was a share of the pick's time.
            diff, gain = c["expected_end_to_end_s"] - mine, gain_over(mine, c["expected_end_to_end_s"])
            against = (f"{'+' if diff >= 0 else '-'}{abs(diff):,.0f} s (the pick {abs(gain):.1%} "
                       f"{'faster' if gain >= 0 else 'slower'})")
        else:
            against = ""
        marks = ("  steps not representative" if c.get("representative_steps") is False else "") + \
            _same_plan(c, choice["candidates"][:i])
        rows.append(f"\n    {name:<{wide}}  {time:>{long}}  {against}{marks}".rstrip())
    timed = parts["how"].rstrip(":")
    how = (f"\n  (auto{parts['among']}, for the {choice['engine']} engine with {choice.get('dispatch', 'planned')} "
           f"dispatch{parts['budget_note']}; expected end-to-end{timed}, {parts['over']})")
    return head + "".join(rows) + how + _notes(choice, parts["both"])


def _notes(choice: dict[str, Any], both: bool) -> str:
    """The lines under auto's summary, each "\\n  ...": candidates refused or broken on the whole run, the other
    dispatch or router where clearly faster, a pick kept in a tie, the gain over a shuffle, a curriculum, and what
    representative steps cost."""
    kv_budget = choice.get("kv_budget")
    line = ""
    skipped = choice.get("refused") or []
    if skipped:  # refused while judged: they cannot keep the lag bound (`choose_arrangement`)
        line += (f"\n  {', '.join(skipped)} cannot keep the lag bound here and "
                 + ("was not a candidate" if len(skipped) == 1 else "were not candidates"))
    broken = choice.get("bound_broken_on_input") or []
    if broken:
        line += (f"\n  {', '.join(broken)} kept the lag bound on the {_judged(choice)} judged but not on the whole "
                 "run: "
                 f"{choice['chosen']} is the fastest other candidate that keeps it")
    chosen = next((c for c in choice["candidates"] if _is(c, choice["chosen"], kv_budget or "peak")), {})
    dispatch = choice.get("dispatch", "planned")
    mine, other = chosen.get("expected_end_to_end_s"), chosen.get(
        f"expected_end_to_end_s_{'planned' if dispatch == 'free' else 'free'}_dispatch")
    if mine and other and other < mine * 0.97:
        # Timed as verl routes (`timed_as`), the planned times are verl's with asp's router plug-in and the free
        # ones verl's own balancer's.
        timed = bool(choice.get("timed_as"))
        line += ("\n  " + (f"verl with asp's router plug-in keeping each group on its planned instance is expected to "
                           f"take {other:,.0f} s instead of {mine:,.0f} s (--dispatch planned plans for it: "
                           "docs/integrations.md, Option D)" if timed and dispatch == "free" else
                           f"verl's own balancer, spreading each group's samples over the servers as they are "
                           f"submitted, is expected to take {other:,.0f} s instead of {mine:,.0f} s with asp's router "
                           "plug-in keeping each group on its planned instance (--dispatch free plans for it)"
                           if timed else
                           f"an engine that keeps each minibatch on its planned instance is expected to take {other:,.0f} s "
                           f"instead of {mine:,.0f} s (--dispatch planned plans for it"
                           + ("; not on verl, whose balancer spreads each group's samples over the servers, which "
                              "was faster than keeping to a plan as verl routes: docs/benchmarks.md, \"As verl "
                              "routes\")" if choice["engine"] == "streaming" else ")")
                           if dispatch == "free" else
                           f"an engine that takes the next minibatch in seq order when an instance frees (ignoring "
                           f"the instance column) is expected to take {other:,.0f} s instead of {mine:,.0f} s "
                           "(--dispatch free plans for it)"))
    routed = chosen.get("expected_end_to_end_s_length_aware_route")
    if mine and routed and routed < mine * (1.0 - ORDER_MATTERS_LITTLE):
        line += (f"\n  verl with asp's length-aware router plug-in (+data.asp_route=length: each request to the server "
                 f"with the fewest predicted tokens in flight) is expected to take {routed:,.0f} s instead of "
                 f"{mine:,.0f} s (docs/integrations.md, Option D)")
    # The fastest other candidate the rule could have taken (under --steps representative, one within its bound).
    eligible = [c for c in choice["candidates"] if c is not chosen and c.get("expected_end_to_end_s")
                and (choice.get("steps") != "representative" or c.get("representative_steps") is not False)]
    faster = min(eligible, key=lambda c: c["expected_end_to_end_s"], default=None) if mine else None
    if faster is not None and mine * (1.0 - TIE_MARGIN) <= faster["expected_end_to_end_s"] < mine and not broken:
        # A library newcomer read "bands 674 s ... long-first 671 s" and found no reason for the pick; another read
        # "kept over long-first, expected 0.4% faster" as the pick's lead.
        line += (f"\n  kept over {faster['name']}{'/' + faster['kv_budget'] if both else ''}, which is expected {1 - faster['expected_end_to_end_s'] / mine:.1%} faster than the pick: "
                 f"within the {TIE_MARGIN:.1%} tie margin (the draws' noise), where auto keeps the candidate first in "
                 "its tie order (docs/algorithms.md)")
    line += _against_the_shuffle(choice, chosen, kv_budget or "peak") + _curriculum(choice, chosen)
    if choice.get("steps") == "representative" and mine:
        # What `--steps representative` is expected to cost, said where the cost is more than the draws' noise.
        fastest = min((c for c in choice["candidates"] if c.get("representative_steps") is False),
                      key=lambda c: c["expected_end_to_end_s"], default=None)
        if fastest is not None and fastest["expected_end_to_end_s"] < mine * (1.0 - REPRESENTATIVE_COST_SHOWN):
            line += (f"\n  representative steps are expected to cost {mine / fastest['expected_end_to_end_s'] - 1:.0%} "
                     f"here: {fastest['name']} (steps not representative) is expected to take "
                     f"{fastest['expected_end_to_end_s']:,.0f} s instead of {mine:,.0f} s")
    return line


def _curriculum(choice: dict[str, Any], chosen: dict[str, Any]) -> str:
    """A line where auto took, under `--steps any`, a candidate whose training steps are not about as representative
    as a random arrangement's (most often a sort: each step one band of lengths, which changes the order the policy
    trains on, not only the speed): how far off they are expected, and the fastest candidate whose steps are about a
    random arrangement's with what it is expected to cost (`ArrangementChoice.representative_alternative`). Where
    the choice has none (older schedules; no candidate within the bound), only a step deviation far above the
    shuffle's (or per-step's) is said. Empty otherwise."""
    if choice.get("setting") != "auto" or choice.get("steps") == "representative":
        return ""
    own = chosen.get("expected_step_deviation_p90")
    alternative = choice.get("representative_alternative") or {}
    other = next((c for c in choice["candidates"]
                  if _is(c, alternative.get("name", ""), alternative.get("kv_budget", ""))), None)
    mine = chosen.get("expected_end_to_end_s")
    if own is not None and other is not None and mine:
        bound = alternative["step_deviation_bound"]
        cost = other["expected_end_to_end_s"] / mine - 1.0
        return ("\n  its training steps are expected "
                + ("to be a length curriculum, so the order the policy trains on changes, not only the speed"
                   if own > 2 * bound else "less representative of the epoch than a random arrangement's")
                + f": a step's mean length {own:.0%} off the epoch mean at the 90th percentile, where a random "
                f"arrangement's are within about {bound:.0%}; of the candidates whose steps are about that, the fastest within the tie margin, {other['name']}, "
                f"is expected to take {other['expected_end_to_end_s']:,.0f} s ({abs(cost):.1%} "
                f"{'slower' if cost >= 0 else 'faster'}): --steps representative takes it"
                + (f" (a difference within the {TIE_MARGIN:.1%} auto counts as a tie, inside its draws' noise, which "
                   "it breaks by a fixed order of candidates: docs/algorithms.md)" if cost < 0 else ""))
    # A newcomer's verl run took long-first (steps 3.9 times the epoch's mean at p90) and nothing said so.
    references = [c["expected_step_deviation_p90"] for c in choice["candidates"]
                  if c["name"] in ("shuffle", "per-step") and "expected_step_deviation_p90" in c]
    if own is None or not references or own <= 2 * min(references) + 0.1:
        return ""
    return (f"\n  its training steps are a length curriculum: a step's mean length is expected up to {own:.0%} off "
            f"the epoch's (90th percentile; a shuffle's {min(references):.0%}), so the order the policy trains on "
            "changes, not only the speed (--steps representative keeps steps about a random arrangement's)")


def drawn_padding(choice: Any) -> tuple[float | None, float | None]:
    """The predicted padding under auto's draws of lengths, of the chosen candidate and of the candidate
    ``shuffle`` (None where the pick is the shuffle): at the point predictions a minibatch's groups look alike,
    so its padding there is a floor (a newcomer read 5.9% there and 74% on emulated real lengths). Both None for
    a named arrangement, an older record, or the streaming engine, whose servers refill freed slots: a static
    batch's padding costs it no time, and auto did not weigh it."""
    if not isinstance(choice, dict) or choice.get("engine") == "streaming":
        return None, None
    kv_budget = choice.get("kv_budget", "peak")
    candidates = choice.get("candidates") or []
    mine = next((c.get("expected_padding_fraction") for c in candidates
                 if _is(c, choice.get("chosen", ""), kv_budget)), None)
    shuffle = next((c.get("expected_padding_fraction") for c in candidates if _is(c, "shuffle", kv_budget)), None)
    if mine is None:
        return None, None
    return mine, (shuffle if choice.get("chosen") != "shuffle" else None)
