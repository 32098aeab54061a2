"""What a history fit taught the predictor, in a few lines for people: `asp schedule`'s summary, `asp report`
(text and HTML) and `asp predictor predict` / `eval` show these (the fit itself: `asp_cli.predict.history`)."""

from __future__ import annotations

from typing import Any

from asp_cli.errors import shown_name


def calibration_lines(calibration: dict[str, Any]) -> list[str]:
    """A history fit (``HistoryFit.as_dict()``, as the schedule's metadata stores it) in a few lines for people."""
    if not calibration or not calibration.get("prompts_seen"):
        return []
    glob = calibration.get("global") or {}
    spread = calibration.get("spread") or {}
    head = (f"calibrated on {calibration['prompts_seen']:,} prompts ({calibration.get('samples_seen', 0):,} samples) "
            f"of history: global x{_factor(glob.get('factor'))}")
    if glob.get("lower_bound"):
        head += " (lower bound)"
    if spread.get("history") is not None:
        head += f"; spread {spread.get('model')} -> {spread.get('history')}"
    parts = []
    sources = calibration.get("sources") or []
    for source in sources[:_SOURCES_SHOWN]:
        name = shown_name(source.get("data_source") or "(no source)")  # a file's text, shown on a terminal
        text = f"{name} x{_factor(source.get('factor'))}"
        if source.get("fitted") == "global":
            text += " (global, no observations)"
        else:
            text += f" ({source.get('prompts')} prompts"
            bound, factor = source.get("bound_factor"), source.get("factor")
            if source.get("lower_bound") and isinstance(bound, (int, float)) and isinstance(factor, (int, float)) \
                    and factor > bound * 1.01:
                # Its own samples prove only the bound; the rest of the factor is the other sources' pull.
                text += f", every sample at the cap: at least x{_factor(bound)}, the rest from the other sources)"
            else:
                text += ", lower bound)" if source.get("lower_bound") else ")"
        parts.append(text)
    lines = [head]
    if parts:  # 3,000 sources made a line of 98,000 characters; the rest are in --json and the metadata
        more = len(sources) - _SOURCES_SHOWN
        lines.append("per source: " + ", ".join(parts) + (f" and {more:,} more (--json has each)" if more > 0 else ""))
    lines.extend(calibration.get("notes") or [])
    return lines


_SOURCES_SHOWN = 12  # sources the summary's calibration line names


def _factor(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "?"
    return f"{value:.3g}"
