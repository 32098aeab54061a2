"""The terminal view of a report: rich tables and sparklines, rendered to a string (never printed here).

Only renders the dicts of `asp_cli.report.facts`; computes nothing new, so the terminal, the JSON and the HTML page
always agree.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from asp_cli.report.simulated import (as_verl_routes, draws_words, epoch_words, lengths_source,
                                      replay_padding_words)

_BLOCKS = "▁▂▃▄▅▆▇█"
_SPARK_WIDTH = 48
_LIST_ITEMS = 12  # items of a list shown inline; the rest is summarised, never dropped silently


def sparkline(values: Any, top: float | None = None) -> str:
    """One character per value, ``▁`` (zero) to ``█`` (``top``, by default the largest value)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return ""
    top = float(values.max()) if top is None else float(top)
    if top <= 0:
        return " " * values.size
    levels = np.clip(np.round(values / top * (len(_BLOCKS) - 1)), 0, len(_BLOCKS) - 1).astype(int)
    return "".join(" " if v <= 0 else _BLOCKS[level] for v, level in zip(values, levels))


def _per_bin(cumulative: list[int], width: int) -> np.ndarray:
    """Counts per bin from a cumulative curve on an even grid, regrouped into ``width`` bins."""
    cumulative = np.asarray(cumulative, dtype=np.float64)
    points = np.linspace(0, cumulative.size - 1, width + 1).round().astype(int)
    return np.diff(cumulative[points])


def _resample(values: list[int], width: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    edges = np.linspace(0, values.size, width + 1).round().astype(int)
    return np.array([values[a:b].mean() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:])])


def _cut(items: list[str], limit: int, *, what: str, rest: list[tuple[Any, int]], unit: str) -> str:
    """The first ``limit`` items, then what was left out: "..., and 26 more lags (12-37: 1,204 groups)"."""
    if len(items) <= limit:
        return ", ".join(items)
    left = sum(count for _, count in rest)
    return (", ".join(items[:limit]) + f", ... and {len(items) - limit} more {what} ({rest[0][0]}-{rest[-1][0]}: "
            f"{left:,} {unit}; --json has them all)")


def _short(fingerprint: Any) -> str:
    if not isinstance(fingerprint, str):
        return "-"
    algo, _, digest = fingerprint.partition(":")
    return f"{algo}:{digest[:12]}" if digest else fingerprint


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _console(width: int, color: bool):
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=color, color_system="standard" if color else None,
                   highlight=False, emoji=False, legacy_windows=False)


def _shown(value: object) -> str:
    """What the schedule's file or metadata holds (a file name, the recorded command line), as the report prints
    it: control characters as escapes and rich's markup brackets escaped. A name with a newline forged a report
    line, and escape sequences reached the terminal (a hostile-input audit, 2026-12-05)."""
    from rich.markup import escape

    from asp_cli.errors import printable

    return escape(printable(value))


def _trimmed(text: str) -> str:
    """Drop the spaces rich pads lines with, so that piped output diffs cleanly."""
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def lengths_source_text(predictor: dict) -> str:
    """Where the schedule's planned lengths came from, as the header's predictor line ends: the split between
    the history and the model only where the schedule was made with a ``--history`` (its recorded
    ``history_fingerprint``); without one every length is the model's, and "from history for 0" read as if a
    history had matched nothing. A predictions file records no split (both counts 0): nothing is said."""
    from_history, from_model = predictor.get("prompts_from_history"), predictor.get("prompts_from_model")
    if from_history is None:
        return ""
    if predictor.get("history_fingerprint"):
        return f"; lengths from history for {from_history}, from the model for {from_model} prompts"
    return f"; lengths from the model for {from_model} prompts" if from_model else ""


def render_text(report: dict[str, Any], *, checks: dict[str, Any] | None = None, width: int = 100,
                color: bool = False) -> str:
    """Render one report (and optional check results) for a terminal.

    Parameters
    ----------
    report
        From `report.build_report`.
    checks
        From `report.check_report`, or None.
    width
        Columns of the terminal.
    color
        Emit ANSI colours.
    """
    from rich.table import Table

    from asp_cli.report.formats import made_by_text

    console = _console(width, color)
    out = console.print
    size = report["size"]
    prov = report["provenance"]
    name = _shown(report["schedule"]["name"] or "schedule")
    out(f"[bold]asp report: {name}[/bold]  (schedule format {report['schedule']['format_version']}, "
        f"made by {_shown(made_by_text(prov))})")
    from asp_cli.report.headline import headline_cards

    # The page's headline cards, first here too: the two figures a reader opens the report for.
    for label, value in headline_cards(report):
        out(f"{label}: [bold]{value}[/bold]")

    made = Table.grid(padding=(0, 2))
    made.add_column(style="dim")
    made.add_column(overflow="fold")
    if prov.get("command_line"):
        made.add_row("command", _shown(prov["command_line"]))
    settings = prov.get("settings") or {}
    made.add_row("settings", _shown(", ".join(f"{k}={v}" for k, v in sorted(settings.items()))))
    if prov.get("preset"):
        made.add_row("preset", _shown(f"{prov['preset']['name']} ({prov['preset'].get('description') or ''})"))
    for entry in prov.get("inputs") or []:
        made.add_row("input", _shown(f"{entry.get('name')}  {_short(entry.get('fingerprint'))}"))
    predictor = prov.get("predictor") or {}
    if predictor:
        text = f"{predictor.get('name')}  {_short(predictor.get('fingerprint'))}"
        if predictor.get("history_fingerprint"):
            text += f"; history {_short(predictor['history_fingerprint'])}"
        text += lengths_source_text(predictor)
        made.add_row("predictor", _shown(text))
        from asp_cli.predict.calibration_text import calibration_lines

        for i, line in enumerate(calibration_lines(predictor.get("calibration") or {})):
            made.add_row("calibration" if i == 0 else "", _shown(line))
    if isinstance(prov.get("arrangement"), dict):
        from asp_cli.arrange.choice_summary import arrangement_line

        # with the run's epochs: the line then says where auto judged fewer (as `asp schedule`'s summary says it)
        lines = arrangement_line(prov["arrangement"], report["size"]["epochs"]).removeprefix("arrangement: ")
        for i, line in enumerate(lines.split("\n")):
            made.add_row("arrangement" if i == 0 else "", _shown(line.strip()))
    if prov.get("made_for"):
        from asp_cli.arrange.made_for import made_for_line

        made.add_row("made for", _shown(made_for_line(prov["made_for"]).strip().removeprefix("made for ")))
    out(made)
    from asp_cli.report.formats import counted, sent_units

    engine = (prov.get("settings") or {}).get("engine")
    sent = sent_units(size["minibatches"], size["rows"], engine)
    # On servers the report's "minibatch" rows and plots count what the summary calls requests: said once, here.
    sent += ", below called minibatches," if engine == "streaming" else ""
    out(f"{counted(size['prompts'], 'prompt')} x {counted(size['epochs'], 'epoch')} = "
        f"{counted(size['rows'], 'group')} of {size['samples_per_prompt']}; {sent} on "
        f"{counted(size['instances'], 'instance')} (rollout engine replicas, --instances); "
        f"{counted(size['train_steps'], 'training step')} of {'up to ' if size.get('short_steps') else ''}"
        f"{size.get('train_batch_size') or '?'} groups")
    from asp_cli.report.formats import instances_words

    out(instances_words(size["instances"]))
    out()

    inst = report["instances"]
    table = Table(title="Instances", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("instance", justify="right")
    table.add_column("minibatches", justify="right")
    table.add_column("predicted tokens", justify="right")
    table.add_column("busy s", justify="right")
    table.add_column("ends at s", justify="right")
    for k in range(len(inst["minibatches"])):
        table.add_row(str(k), _num(inst["minibatches"][k]), _num(inst["predicted_tokens"][k]),
                      _num(inst["busy_s"][k] if inst["busy_s"] else None),
                      _num(inst["end_s"][k] if inst["end_s"] else None))
    table.add_row("spread", "", _pct(inst["tokens_spread"]), _pct(inst["busy_spread"]),
                  _num(inst["finish_spread_s"]), style="bold")
    out(table)
    out("[dim]spread = (max - min) / mean; for end times, max - min in seconds[/dim]")
    out()

    lengths = Table(title="Predicted lengths (tokens) and padding", title_justify="left", show_edge=False,
                    pad_edge=False)
    lengths.add_column("")
    from asp_cli.report.facts import QUANTILE_NAMES, length_quantile_rows

    for q in QUANTILE_NAMES:
        lengths.add_column(q, justify="right")
    formats = {"tokens": _num, "ratio": lambda v: _num(v, 2), "percent": _pct}
    for label, quantiles, kind in length_quantile_rows(report):
        lengths.add_row(label, *[formats[kind](quantiles.get(q)) for q in QUANTILE_NAMES])
    out(lengths)
    from asp_cli.report.facts import padding_words

    out(f"predicted padding (static-batch slot waste over all minibatches): [bold]{_pct(report['padding']['fraction'])}"
        f"[/bold] ({padding_words(report)})")
    out()

    _render_queue(out, report)
    _render_lag_and_steps(out, report)
    if report.get("observed"):
        _render_observed(out, report["observed"], report["padding"]["fraction"])
    if report.get("simulated"):
        _render_simulated(out, report)
    if checks:
        _render_checks(out, checks)
    return _trimmed(console.file.getvalue())


def _render_queue(out: Any, report: dict[str, Any]) -> None:
    queue = report.get("queue")
    out("[bold]Training queue[/bold]")
    if not queue:
        out("  not available: the schedule has no expected_* timing columns")
        out()
        return
    width = _SPARK_WIDTH
    arrived = _per_bin(queue["arrived_groups"], width)
    horizon = queue["grid_s"][-1]
    if queue.get("consumed_groups"):
        consumed = _per_bin(queue["consumed_groups"], width)
        top = max(arrived.max(), consumed.max())
        out(f"  groups finishing  {sparkline(arrived, top)}")
        out(f"  groups trained    {sparkline(consumed, top)}")
        from asp_cli.report.facts import synchronous_queue_words

        # A synchronous plan's depth fills to a batch and empties every step: no peak to read, the reason instead.
        depth = synchronous_queue_words(report) or f"peak {max(queue['queue_groups']):,} groups"
        out(f"  queue depth       {sparkline(_resample(queue['queue_groups'], width))}  ({depth})")
        out(f"  {'':16}  0 s{'':{max(width - 10, 1)}}{horizon:,.0f} s")
        out(f"  trainer: steps run {queue['trainer_first_start_s']:,.1f}-{queue['trainer_end_s']:,.1f} s, "
            f"waiting for data {queue['trainer_idle_s']:,.1f} s in between "
            f"([bold]{_pct(queue['trainer_idle_fraction'])}[/bold] of the steps' span idle)")
        from asp_cli.report.facts import synchronous_idle_words

        if synchronous_idle_words(report):
            out(f"  ({synchronous_idle_words(report)})")
        if ((report["provenance"].get("settings") or {}).get("verl_trainer")) == "colocate-async":
            # This timeline lets rollout run on while the trainer trains; verl's colocated mode does not.
            out("  (made for verl's colocate_async, whose servers sleep while the trainer trains: this timeline "
                "lets rollout run on; `asp simulate`'s 'verl v1 async' line replays it that way)")
    else:
        out(f"  groups finishing  {sparkline(arrived)}")
    out(f"  arrival rate variation (CV over 40 slices of rollout): {_num(queue['arrival_rate_cv'], 2)}")
    batch = report.get("effective_batch")
    if batch:
        out(f"  live sequences    {sparkline(_resample(batch['live_sequences'], width))}  "
            f"(peak {batch['peak_live_sequences']:,}; mean {batch['mean_live_sequences_per_instance']} per instance)")
    out()


def _render_lag_and_steps(out: Any, report: dict[str, Any]) -> None:
    lag = report.get("lag")
    if lag:
        bound = "none" if lag["bound"] is None else str(lag["bound"])
        spread = _cut([f"{v}: {c:,}" for v, c in lag["histogram"]], _LIST_ITEMS, what="lags",
                      rest=lag["histogram"][_LIST_ITEMS:], unit="groups")
        # Unbounded, the lag is how far rollout runs ahead at the point predictions (no tails): an upper end.
        from asp_cli.report.facts import UNBOUNDED_LAG_WORDS

        upper = ("; at the point predictions, whose rollout runs further ahead than a replay's (--simulate), "
                 + UNBOUNDED_LAG_WORDS if lag["bound"] is None else "")
        out(f"[bold]Expected policy lag[/bold]: mean {_num(lag['mean'], 2)} steps, max [bold]{lag['max']}[/bold] "
            f"(bound --max-lag {bound}{upper}); groups per lag: {spread}")
    else:
        out("[bold]Expected policy lag[/bold]: not available (no expected_lag column)")
    steps = report["steps"]
    ratios = [s["ratio_to_epoch_mean"] for s in steps["table"]]
    q = steps["ratio"]
    out(f"[bold]Step representativeness[/bold] (step mean {steps['length_column']} / epoch mean): "
        f"p10 {q['p10']:.2f}, p50 {q['p50']:.2f}, p90 {q['p90']:.2f}; worst skew [bold]{_pct(steps['max_skew'])}"
        "[/bold]")
    if ratios:
        out(f"  per step  {sparkline(_resample(ratios, min(len(ratios), _SPARK_WIDTH)), max(ratios))}  "
            f"(full block = {max(ratios):.2f}x)")
        # The steps here are the schedule's, at the point predictions; real lengths spread and move groups
        # between steps, so a replay's steps are less representative than these.
        out("  at the predicted lengths and the schedule's steps; replayed with lengths spread around them "
            "(`asp simulate`: step_length_deviation_p90) steps are further from the mean")
    out()


def _render_observed(out: Any, observed: dict[str, Any], predicted_padding: float) -> None:
    from asp_cli.report.formats import counted

    epoch = epoch_words(observed.get("epoch"))
    out(f"[bold]Observed lengths[/bold] ({_shown(', '.join(observed['files']))}{'; ' + epoch if epoch else ''}): "
        f"{counted(observed['samples'], 'sample')} for "
        f"{counted(observed['prompts_observed'], 'prompt')}; "
        f"{counted(observed['prompts_matched'], 'scheduled prompt')} matched, "
        f"{observed['prompts_unmatched']:,} not observed, "
        f"{counted(observed['observed_not_in_schedule'], 'observed prompt')} not in the schedule")
    from asp_cli.report.observed import epochs_compared_words

    if epochs_compared_words(observed):  # which schedule epoch took which lengths (a schedule of several)
        out(f"  {epochs_compared_words(observed)}")
    if observed.get("quantiles"):
        q = observed["quantiles"]
        out(f"  observed group max: p10 {_num(q['p10'])}, p50 {_num(q['p50'])}, p90 {_num(q['p90'])}, "
            f"p100 {_num(q['p100'])}; truncated samples {_pct(observed['truncated_fraction'])}")
        out(f"  prediction vs observed: Spearman {_num(observed['spearman'], 3)}, median |log error| "
            f"{_num(observed['median_abs_log_error'], 3)}, longest-10% recall {_pct(observed['tail_recall'])}")
        out(f"  with observed lengths: padding {_pct(observed['padding_fraction'])} (predicted "
            f"{_pct(predicted_padding)}), instance token spread "
            f"{_pct(observed['instance_tokens_spread'])}")
    out()


def _beside(drawn: float | None, point: Any, routed: str) -> str:
    """A replayed figure's expectations: auto's draws (tails included) and the point predictions (none)."""
    if drawn is None:
        return f"{_num(point)} s at the point predictions, which leave out the tails"
    return f"{_num(drawn)} s expected by auto's draws{routed}, {_num(point)} s at the point predictions"


def _render_simulated(out: Any, report: dict[str, Any]) -> None:
    simulated = report["simulated"]
    metrics = simulated["metrics"]
    source = lengths_source(simulated)
    queue = report.get("queue") or {}
    ends = simulated["instance_end_s"]
    out(f"[bold]Simulated replay[/bold] (--simulate: {source}; {simulated['mode']} engine, preset "
        f"{_shown(simulated['preset'])}, {simulated['dispatch']} dispatch)")
    # Each replayed figure beside the same figure expected: end-to-end with end-to-end, rollout with rollout (a
    # newcomer read a synchronous replay's rollout beside the point predictions' makespan, training included, and
    # beside auto's rollout alone). The point predictions leave out every tail; auto's draws (the chosen
    # candidate's replays, scaled to the run) do not, and are the expectation to read a replay against.
    draws = simulated.get("expected_by_draws") or {}  # absent in reports before 1.5
    timed_as = draws.get("timed_as")
    routed = draws_words(report)
    alone = simulated.get("rollout_alone_s")
    if alone is not None:
        # Synchronous: the rollout alone, each step's summed (auto's draws have it only where timed as verl routes).
        rollout = (f"rollout alone {_num(alone)} s (the steps' rollouts summed, the training between them left "
                   f"out; {_beside(draws.get('rollout_s'), queue.get('rollout_alone_s'), routed)})")
    else:
        rollout = (f"rollout to the last group's arrival {_num(metrics['rollout_makespan_s'])} s "
                   f"({_beside(draws.get('rollout_s'), report['instances'].get('makespan_s'), routed)})")
    end_to_end = _beside(draws.get("end_to_end_s"), queue.get("trainer_end_s"), routed)
    out(f"  end-to-end {_num(metrics['end_to_end_s'])} s ({end_to_end}); {rollout}; "
        f"{_num(metrics['ratio_to_lower_bound'], 3)}x the lower bound ({metrics['lower_bound_end_to_end_binding']})")
    if timed_as == "verl":
        out(f"  {as_verl_routes(report)}")
    out(f"  instance finish spread {max(ends) - min(ends):,.1f} s (expected "
        f"{_num(report['instances'].get('finish_spread_s'))} s); trainer idle "
        f"{_pct(metrics['trainer_idle_fraction'])} of the run (expected "
        f"{_pct(queue.get('trainer_idle_of_run_fraction'))}, the wait before its first step included); "
        f"padding {_pct(metrics['padding_fraction'])} ({replay_padding_words(simulated)}); lag mean {_num(metrics['policy_lag_mean'], 2)}, "
        f"max {metrics['policy_lag_max']}")
    if queue.get("grid_s"):
        sim = simulated["queue"]
        width = _SPARK_WIDTH
        top = max(_per_bin(sim["arrived_groups"], width).max(), 1)
        out(f"  groups finishing  {sparkline(_per_bin(sim['arrived_groups'], width), top)}  (replay)")
        out(f"  groups trained    {sparkline(_per_bin(sim['consumed_groups'], width), top)}  (replay)")
    out()


def _render_checks(out: Any, checks: dict[str, Any]) -> None:
    verdict = "[green]passed[/green]" if checks["passed"] else "[red]FAILED[/red]"
    out(f"[bold]Checks[/bold]: {verdict}")
    for result in checks["results"]:
        mark = "ok  " if result["passed"] else "FAIL"
        out(f"  {mark} {result['message']}")
    out()


def render_compare_text(comparison: dict[str, Any], *, width: int = 100, color: bool = False) -> str:
    """Render `report.compare_reports` output as one side-by-side table, with the reasons for any missing verdict."""
    from rich.table import Table

    from asp_cli.report.checks import PREDICTIONS_DIFFER_NOTE, shown_change
    from asp_cli.report.formats import change_text, fact_text, verdict_text

    console = _console(width, color)
    table = Table(title=f"A = {_shown(comparison['a'])}   B = {_shown(comparison['b'])}", title_justify="left", show_edge=False,
                  pad_edge=False)
    table.add_column("")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("B - A", justify="right")
    table.add_column("better", justify="center")
    for row in comparison["facts"]:
        kind = row.get("kind", "number")
        table.add_row(row["label"], fact_text(kind, row["a"]), fact_text(kind, row["b"]),
                      change_text(kind, shown_change(row["a"], row["b"], kind)), verdict_text(row))
    console.print(table)
    for row in comparison["facts"]:
        if row.get("note") and row["note"] != PREDICTIONS_DIFFER_NOTE:
            console.print(f"{row['label']}: no verdict; {row['note']}")
    if comparison.get("predictions_differ"):
        console.print("The two schedules were made with different predictions (predictor or history): each fact is "
                      "under its own, so a time can differ because one predictor expects shorter answers, and none "
                      "but the observed ones gets a verdict; replay both on the same lengths to compare plans (asp "
                      "simulate A --lengths L, then B).")
    return _trimmed(console.file.getvalue())
