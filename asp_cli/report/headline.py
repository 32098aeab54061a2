"""The report's headline: the run's expected end-to-end time by auto's draws of the chosen candidate, and its
expected gain over a shuffle, as `asp schedule`'s summary says them (docs/report.md, "headline").

`headline_facts` makes the report's ``headline`` section from the schedule's ``arrangement`` record, once;
`headline_cards` words it for both renderers: the page's first cards and the terminal's first lines (the terminal
had none: a team lead found the two figures only in the provenance table's long arrangement row).
"""

from __future__ import annotations

import math
from typing import Any

from asp_cli.report.simulated import expected_by_draws


def _figure(value: Any, digits: int) -> float | None:
    """A recorded figure as the report gives it: rounded, None where it is not a finite number (an edited file)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return round(float(value), digits) + 0.0


def headline_facts(arrangement: Any, run_epochs: int) -> dict[str, Any] | None:
    """The ``headline`` section: None where the schedule records no auto choice (a named arrangement, an older
    file, a record edited out of shape). ``expected_end_to_end_s`` (auto's draws of the chosen candidate, tails
    included), ``whole_run`` and ``epochs_judged`` (as `simulated.expected_by_draws`: false where those times are of
    the part auto judged), ``expected_gain_over_shuffle`` (1 - chosen / shuffle in auto's draws; None where auto
    kept the shuffle or the record has none), ``order_matters_little`` (the gain within `ORDER_MATTERS_LITTLE` either
    way, as the summary words it) and ``judged_in_miniature`` (the draws were of a miniature of the run)."""
    from asp_cli.arrange.choose import ORDER_MATTERS_LITTLE

    if not isinstance(arrangement, dict):
        return None
    draws = expected_by_draws(arrangement, synchronous=False, run_epochs=run_epochs)
    gain = None if arrangement.get("chosen") == "shuffle" else _figure(arrangement.get("expected_gain_over_shuffle"), 4)
    return {
        "expected_end_to_end_s": _figure(draws["end_to_end_s"], 3),
        "whole_run": draws["whole_run"],
        "epochs_judged": draws["epochs_judged"],
        "expected_gain_over_shuffle": gain,
        "order_matters_little": None if gain is None else abs(gain) < ORDER_MATTERS_LITTLE,
        "judged_in_miniature": bool(arrangement.get("judged_instances")),
    }


def headline_cards(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The headline as (label, value) pairs, for the page's cards and the terminal's first lines; empty where the
    report has none. "expected", in auto's draws; within 2% "the order matters little"; the gain with the summary's
    caveat that a replay on real lengths can save less."""
    from asp_cli.arrange.choose import ORDER_MATTERS_LITTLE

    headline = report.get("headline")
    if not headline:
        return []
    cards = []
    if headline["expected_end_to_end_s"] is not None:
        judged, run = headline["epochs_judged"] or 1, report["size"]["epochs"]
        part = ("" if headline["whole_run"] else f"; over the {judged} of the run's {run} epochs judged, not the whole "
                "run" if judged < run else "; over the sample of prompts judged, not the whole run")
        cards.append((f"expected end-to-end, by auto's draws (tails included{part})",
                      f"{headline['expected_end_to_end_s']:,.1f} s"))
    gain = headline["expected_gain_over_shuffle"]
    if gain is not None:
        small = ", in the miniature judged" if headline["judged_in_miniature"] else ""
        by = f"{abs(gain):.1%} {'faster' if gain >= 0 else 'slower'}"
        cards.append((f"expected over a shuffle, in auto's draws{small} (a replay on real lengths can save less)",
                      f"within {ORDER_MATTERS_LITTLE:.0%} ({by})" if headline["order_matters_little"] else by))
    return cards
