"""How the report's renderers write a fact of a given kind, so the terminal and the HTML page show the same text.

The kinds are those of `asp_cli.report.checks.HEADLINE`: ``count`` (3,540), ``percent`` (a fraction of 1, shown
as 5.9%), ``seconds`` (105.8) and ``number`` (0.42). The digits are `checks.FACT_DIGITS`, which also decide when
a change is "same".
"""

from __future__ import annotations

from typing import Any

from asp_cli.errors import counted  # also `asp schedule`'s summary's (`cli/schedule.py`)
from asp_cli.report.checks import FACT_DIGITS


def fact_text(kind: str, value: Any) -> str:
    """A fact's value as both renderers show it; "-" when it is missing."""
    if value is None:
        return "-"
    if kind == "count":
        return f"{int(round(value)):,}"
    if kind == "percent":
        return f"{value:.1%}"
    return f"{value:,.{FACT_DIGITS[kind]}f}"


def change_text(kind: str, change: Any) -> str:
    """B - A with its sign, rounded as the values are; a change that rounds to zero is written without one."""
    if change is None:
        return "-"
    shown = round(float(change), FACT_DIGITS[kind]) + 0.0
    if shown == 0:
        return fact_text(kind, 0)
    if kind == "count":
        return f"{int(shown):+,}"
    if kind == "percent":
        return f"{shown:+.1%}"
    return f"{shown:+,.{FACT_DIGITS[kind]}f}"


def verdict_text(row: dict[str, Any]) -> str:
    """The "better" cell: a, b, same, blank for a size, or "-" when a note says why there is no verdict."""
    if row.get("better"):
        return row["better"]
    return "-" if row.get("note") else ""


def made_by_text(provenance: dict[str, Any]) -> str:
    """Who made the schedule, as both renderers say it: ``created_by``, else ``asp`` and ``asp_version``, else (a
    file whose metadata holds neither, say only its format_version) an unknown asp version, not "asp None"."""
    if provenance.get("created_by"):
        return str(provenance["created_by"])
    if provenance.get("asp_version"):
        return f"asp {provenance['asp_version']}"
    return "an unknown asp version"


def sent_units(count: int, rows: int, engine: str | None) -> str:
    """What a schedule sends to its instances, counted, as `asp schedule`'s summary says it: minibatches, or on
    engines that refill its requests (an OpenRLHF newcomer could not parse "request batches (minibatches: each
    sent ...)"; a team lead read `asp report`'s "3,540 minibatches" of a schedule whose summary said requests)."""
    if engine != "streaming":
        return counted(count, "minibatch", "minibatches")
    if count == rows:
        return f"{counted(count, 'request')} of one prompt " + ("(its group of samples)" if count == 1 else
                                                                 "each (its group of samples)")
    return f"{counted(count, 'request batch', 'request batches')} (a few prompts sent to the servers at once)"


def sent_unit_name(count: int, rows: int, engine: str | None) -> str:
    """The name of what `sent_units` counts, for a table's column or a card."""
    if engine != "streaming":
        return "minibatches"
    return "requests" if count == rows else "request batches"


def instances_words(instances: int) -> str:
    """Which server count a schedule was made for, and that another needs a new schedule: a team lead with 8
    servers read a schedule of the default 4 with nothing to say its times and its choices were of 4."""
    return (f"planned for {instances} instances: its times, the arrangement chosen and each minibatch's instance are "
            f"for that many; on another count of servers, make a new schedule with `asp schedule --instances N`")
