"""Two reports side by side (`asp report --compare`) and thresholds on one (`asp report --check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asp_cli.errors import SettingsError
from asp_cli.report.facts import REPORT_VERSION, rounded


# (key path, label, which way is better) of the facts shown side by side by `--compare`.
HEADLINE: tuple[tuple[str, str, str], ...] = (
    ("size.prompts", "prompts", ""),
    ("size.epochs", "epochs", ""),
    ("size.instances", "instances", ""),
    ("size.minibatches", "minibatches", ""),
    ("size.train_steps", "train steps", ""),
    ("padding.fraction", "predicted padding", "lower"),
    ("instances.tokens_spread", "instance token spread", "lower"),
    ("instances.busy_spread", "instance busy spread", "lower"),
    ("instances.makespan_s", "rollout makespan (s)", "lower"),
    ("instances.finish_spread_s", "instance finish spread (s)", "lower"),
    ("queue.arrival_rate_cv", "arrival rate CV", "lower"),
    ("queue.trainer_idle_fraction", "trainer idle fraction", "lower"),
    ("queue.trainer_end_s", "last step ends (s)", "lower"),
    ("effective_batch.mean_live_sequences_per_instance", "mean live seqs / instance", "higher"),
    ("lag.mean", "mean lag (steps)", "lower"),
    ("lag.max", "max lag (steps)", "lower"),
    ("steps.max_skew", "worst step skew", "lower"),
    ("observed.padding_fraction", "observed padding", "lower"),
    ("observed.spearman", "Spearman (pred vs obs)", "higher"),
)


def fact(report: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a report, or None where a section is missing."""
    node: Any = report
    for key in path.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return None
        node = node[key]
    return node


def headline(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline facts of one report, in display order (missing ones left out)."""
    return [{"fact": path, "label": label, "value": fact(report, path), "better": better}
            for path, label, better in HEADLINE if fact(report, path) is not None]


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two reports side by side: each headline fact for A and B, the change, and which is better.

    Returns
    -------
    dict
        ``{"report_version", "a": name, "b": name, "facts": [{"fact", "label", "a", "b", "change",
        "better"}]}`` where ``better`` is "a", "b", "same" or null (a size, not a quality).
    """
    facts = []
    for path, label, better in HEADLINE:
        va, vb = fact(a, path), fact(b, path)
        if va is None and vb is None:
            continue
        change = rounded(vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        winner = None
        if better and change is not None:
            winner = "same" if change == 0 else ("b" if (change < 0) == (better == "lower") else "a")
        facts.append({"fact": path, "label": label, "a": va, "b": vb, "change": change, "better": winner})
    return {"report_version": REPORT_VERSION, "a": a["schedule"]["name"], "b": b["schedule"]["name"],
            "facts": facts}


@dataclass(frozen=True)
class CheckLimits:
    """Thresholds for `asp report --check`; None means not checked."""

    max_padding: float | None = None
    max_instance_spread: float | None = None
    max_lag: int | None = None
    max_step_skew: float | None = None
    max_trainer_idle: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_padding", "max_instance_spread", "max_lag", "max_step_skew", "max_trainer_idle"):
            value = getattr(self, name)
            flag = _CHECKS[name][0]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                # NaN too: no value would ever pass or break it
                raise SettingsError(f"{flag} must be a number of at least 0 (got {value})")
            if name == "max_lag" and not isinstance(value, int):
                raise SettingsError(f"{flag} must be a whole number of steps (got {value})")

    def any(self) -> bool:
        return any(v is not None for v in (self.max_padding, self.max_instance_spread, self.max_lag,
                                            self.max_step_skew, self.max_trainer_idle))


# limit field -> (command-line flag, fact paths tried in order, what the fact is)
_CHECKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "max_padding": ("--max-padding", ("padding.fraction",), "predicted padding fraction"),
    "max_instance_spread": ("--max-instance-spread", ("instances.busy_spread", "instances.tokens_spread"),
                            "instance spread (max - min) / mean"),
    "max_lag": ("--max-lag", ("lag.max",), "expected policy lag in steps"),
    "max_step_skew": ("--max-step-skew", ("steps.max_skew",), "worst |step mean length / epoch mean - 1|"),
    "max_trainer_idle": ("--max-trainer-idle", ("queue.trainer_idle_fraction",), "trainer idle fraction"),
}


def check_report(report: dict[str, Any], limits: CheckLimits) -> dict[str, Any]:
    """Test a report against thresholds.

    Returns
    -------
    dict
        ``{"passed": bool, "results": [{"check", "flag", "fact", "limit", "value", "passed", "message"}]}``;
        a fact the schedule cannot give (missing columns) fails its check, since it cannot be vouched for.
    """
    results = []
    for name, (flag, paths, what) in _CHECKS.items():
        limit = getattr(limits, name)
        if limit is None:
            continue
        path = next((p for p in paths if fact(report, p) is not None), paths[0])
        value = fact(report, path)
        passed = value is not None and value <= limit
        if value is None:
            message = f"{flag} {limit}: the schedule has no {what} (its expected_* columns are missing)"
        else:
            verdict = "ok" if passed else "broken"
            message = f"{flag} {limit}: {what} is {value} ({verdict})"
        results.append({"check": name, "flag": flag, "fact": path, "limit": limit, "value": value,
                        "passed": passed, "message": message})
    return {"passed": all(r["passed"] for r in results), "results": results}
