"""Two reports side by side (`asp report --compare`) and thresholds on one (`asp report --check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asp_cli.errors import SettingsError, named_in_python
from asp_cli.report.facts import REPORT_VERSION, rounded
from asp_cli.settings import whole_fields


# (key path, label, which way is better, kind) of the facts shown side by side by `--compare`. The kind says how
# the fact is shown (`FACT_DIGITS`): a change that rounds to zero there is "same", whatever the raw difference.
HEADLINE: tuple[tuple[str, str, str, str], ...] = (
    ("size.prompts", "prompts", "", "count"),
    ("size.epochs", "epochs", "", "count"),
    ("size.instances", "instances", "", "count"),
    ("size.minibatches", "minibatches", "", "count"),
    ("size.train_steps", "train steps", "", "count"),
    ("padding.fraction", "predicted padding", "lower", "percent"),
    ("instances.tokens_spread", "instance token spread", "lower", "percent"),
    ("instances.busy_spread", "instance busy spread", "lower", "percent"),
    ("instances.makespan_s", "last rollout ends (s)", "lower", "seconds"),
    ("instances.finish_spread_s", "instance finish spread (s)", "lower", "seconds"),
    ("queue.arrival_rate_cv", "arrival rate CV", "lower", "number"),
    ("queue.trainer_idle_fraction", "trainer idle fraction", "lower", "percent"),
    ("queue.trainer_end_s", "last step ends (s)", "lower", "seconds"),
    ("effective_batch.mean_live_sequences_per_instance", "mean live seqs / instance", "higher", "number"),
    ("lag.mean", "mean lag (steps)", "lower", "number"),
    ("lag.max", "max lag (steps)", "lower", "count"),
    ("steps.max_skew", "worst step skew", "lower", "percent"),
    ("observed.padding_fraction", "observed padding", "lower", "percent"),
    ("observed.spearman", "Spearman (pred vs obs)", "higher", "number"),
)
# Decimal places of a fact's kind as both renderers show it (percent: of the fraction, so 0.1%).
FACT_DIGITS = {"count": 0, "percent": 3, "seconds": 1, "number": 2}
# Facts that matter only through the end of training: when the last step ends at the same time in both,
# ending rollout sooner (or its instances closer together) bought nothing, so neither is "better".
# The note of a fact given no verdict since the two schedules were made with different predictions; the renderers
# say it once, under the table (`predictions_differ`).
PREDICTIONS_DIFFER_NOTE = "each under its own predictions: replay both on the same lengths"
_MEANS_TO_THE_END = {"instances.makespan_s": "queue.trainer_end_s",
                     "instances.finish_spread_s": "queue.trainer_end_s"}


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
    return [{"fact": path, "label": label, "value": fact(report, path), "better": better, "kind": kind}
            for path, label, better, kind in HEADLINE if fact(report, path) is not None]


def shown_change(va: Any, vb: Any, kind: str) -> float | None:
    """B - A as the renderers show it: the difference of the two values as they are shown (rounded to the kind's
    digits; rounding the exact difference instead printed 2.0% and 2.2% with a change of +0.1%), or None when
    either is not a number."""
    if not (isinstance(va, (int, float)) and isinstance(vb, (int, float))):
        return None
    digits = FACT_DIGITS[kind]
    return round(round(vb, digits) - round(va, digits), digits) + 0.0  # + 0.0 turns -0.0 into 0.0


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two reports side by side: each headline fact for A and B, the change, and which is better.

    A change that rounds to zero where it is shown is "same" (a -0.0% difference is no difference), and the
    facts that matter only through the end of training (rollout makespan, instance finish spread) get no
    verdict when both schedules' last steps end at the same time; ``note`` says why.

    Returns
    -------
    dict
        ``{"report_version", "a": name, "b": name, "facts": [{"fact", "label", "kind", "a", "b", "change",
        "better", "note"}]}`` where ``kind`` is "count", "percent" (a fraction of 1), "seconds" or "number",
        ``better`` is "a", "b", "same" or null (a size, not a quality; or no verdict, see ``note``).
    """
    # Each schedule's facts are under its own predictions: made with different ones, a shorter predicted makespan
    # may be a more optimistic predictor, not a better plan (a newcomer read "better a" that way, and a probe
    # newcomer "better b" of a schedule made without the probe's history, 105.8 s against 2,251 s): then only the
    # facts of lengths observed get a verdict.
    printed = [(r.get("provenance") or {}).get("predictor") or {} for r in (a, b)]
    keys = [(p.get("fingerprint"), p.get("history_fingerprint")) for p in printed]
    predictions_differ = keys[0] != keys[1] and all(k[0] for k in keys)
    ends = dict.fromkeys(_MEANS_TO_THE_END.values())
    for path in ends:
        kind = next(k for p, _, _, k in HEADLINE if p == path)
        ends[path] = shown_change(fact(a, path), fact(b, path), kind)
    facts = []
    for path, label, better, kind in HEADLINE:
        va, vb = fact(a, path), fact(b, path)
        if va is None and vb is None:
            continue
        change = rounded(vb - va) if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        shown = shown_change(va, vb, kind)
        winner, note = None, None
        if better and shown is not None:
            winner = "same" if shown == 0 else ("b" if (shown < 0) == (better == "lower") else "a")
            end = _MEANS_TO_THE_END.get(path)
            if winner in ("a", "b") and end is not None and ends[end] == 0:
                winner, note = None, "the last steps end at the same time, so this gains nothing"
            elif predictions_differ and not path.startswith("observed."):
                winner, note = None, PREDICTIONS_DIFFER_NOTE
        facts.append({"fact": path, "label": label, "kind": kind, "a": va, "b": vb, "change": change,
                      "better": winner, "note": note})
    return {"report_version": REPORT_VERSION, "a": a["schedule"]["name"], "b": b["schedule"]["name"],
            "facts": facts, "predictions_differ": predictions_differ}


@named_in_python()
@dataclass(frozen=True)
class CheckLimits:
    """Thresholds for `asp report --check`; None means not checked."""

    max_padding: float | None = None
    max_instance_spread: float | None = None
    max_lag: int | None = None
    max_step_skew: float | None = None
    max_trainer_idle: float | None = None

    def __post_init__(self) -> None:
        names = ("max_padding", "max_instance_spread", "max_lag", "max_step_skew", "max_trainer_idle")
        whole_fields(self, names)  # NumPy's integers as ints
        for name in names:
            value = getattr(self, name)
            flag = _CHECKS[name][0]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                # NaN too: no value would ever pass or break it
                raise SettingsError(f"{flag} must be a number of at least 0 (got {value!r})")
            if name == "max_lag" and not isinstance(value, int):
                raise SettingsError(f"{flag} must be a whole number of steps (got {value!r})")
            if name in ("max_padding", "max_trainer_idle") and value > 1:
                # A fraction: above 1 the check could never fail.
                raise SettingsError(f"{flag} is a fraction from 0 to 1, e.g. 0.1 for 10% (got {value!r})")

    def any(self) -> bool:
        return any(v is not None for v in (self.max_padding, self.max_instance_spread, self.max_lag,
                                            self.max_step_skew, self.max_trainer_idle))


# limit field -> (command-line flag, fact paths tried in order, what the fact is)
_CHECKS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # With --lengths, the padding those lengths give: the predicted one can be far off (a newcomer's schedule
    # predicted 5.9% and its rollouts gave 73.7%, and the gate passed on the 5.9%).
    "max_padding": ("--max-padding", ("observed.padding_fraction", "padding.fraction"), "padding fraction"),
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
        path = next((p for p in paths if fact(report, p) is not None), paths[-1])
        value = fact(report, path)
        if name == "max_padding":
            what = ("observed padding fraction (at the --lengths)" if path.startswith("observed.")
                    else "predicted padding fraction")
        passed = value is not None and value <= limit
        if value is None:
            message = f"{flag} {limit}: the schedule has no {what} (its expected_* columns are missing)"
        else:
            verdict = "ok" if passed else "broken"
            message = f"{flag} {limit}: {what} is {value} ({verdict})"
            if name == "max_instance_spread" and not passed:
                message += _advisory_instances(report)
        results.append({"check": name, "flag": flag, "fact": path, "limit": limit, "value": value,
                        "passed": passed, "message": message})
    return {"passed": all(r["passed"] for r in results), "results": results}


def _advisory_instances(report: dict[str, Any]) -> str:
    """Why a broken instance spread may not matter: on servers behind a router that places each request itself
    (slime's sglang-router, verl's balancer, a per-sample round-robin), the schedule's instances are advisory, and
    docs/pipelines.md gates such a plan on what its trainer sees. A slime newcomer gated on the spread (pipelines.md
    step 2's example) and read only 'broken'. "" where the engine keeps to them (blocking engines, asp's router plug-in
    under --dispatch planned, OpenRLHF's and AReaL's deals in file order: --router group-round-robin)."""
    settings = (report.get("provenance") or {}).get("settings") or {}
    router = settings.get("router") or "least-pending"
    if settings.get("engine") != "streaming" or settings.get("dispatch") == "planned" or router == "group-round-robin":
        return ""
    return (f"; behind a router that places each request itself (this schedule's --router {router}) the planned "
            "instances are advisory: gate such a schedule on what its trainer sees instead (--max-padding, --max-lag, "
            "--max-step-skew; docs/pipelines.md, step 2)")
