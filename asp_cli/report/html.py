"""The HTML view of a report: one self-contained page with inline SVG plots drawn here, no plotting library.

The page loads nothing from the network (no scripts, fonts or images), so it opens anywhere, offline, and
can be attached to a ticket. It holds no clock time: the same report gives the same bytes. Like
`report_text`, it only renders the dicts of `asp_cli.report.facts`.
"""

from __future__ import annotations

import html
import math
from string import Template
from typing import Any

from asp_cli.report.simulated import as_verl_routes, draws_words, epoch_words, lengths_source, replay_padding_words

_WIDTH = 860
# Colour-blind-safe palette (Okabe-Ito), then greys; series keep their colour on every plot.
_PREDICTED = "#0072B2"
_OBSERVED = "#E69F00"
_CONSUMED = "#D55E00"
_QUEUE = "#009E73"
_SIMULATED = "#CC79A7"  # the replay of `--simulate`, drawn dashed beside the expectations
_CLASSES = ("#CCE5F6", "#99CBEC", "#66B0E3", "#3396D9", "#0072B2", "#005A8C", "#004266", "#002A40")


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _f(value: float) -> str:
    """Coordinates with one decimal: enough for a screen, stable across platforms."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


_LABEL_PX = 12  # the axis labels' font size (templates/report.html, svg .label)
# Width of a character of the page's sans-serif font in em: wide enough for DejaVu Sans, the widest fallback.
_CHAR_EM = 0.6


def _fitting_font_px(text: str, room_px: float) -> int:
    """The label font size (at most `_LABEL_PX`, at least 8) at which ``text`` fits in ``room_px``."""
    width = len(text) * _CHAR_EM
    return max(8, min(_LABEL_PX, int(room_px / width))) if width else _LABEL_PX


def _label(value: float) -> str:
    if abs(value) >= 10_000:
        return f"{value / 1000:,.0f}k"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


class _Plot:
    """A plot area with linear axes; marks are added as SVG text."""

    def __init__(self, x: tuple[float, float], y: tuple[float, float], *, xlabel: str, ylabel: str,
                 width: int = _WIDTH, height: int = 240, left: int = 64) -> None:
        self.x0, self.x1 = x[0], (x[1] if x[1] > x[0] else x[0] + 1)
        self.y0, self.y1 = y[0], (y[1] if y[1] > y[0] else y[0] + 1)
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = left, 16, 12, 40
        self.xlabel, self.ylabel = xlabel, ylabel
        self.marks: list[str] = []

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * (self.width - self.left - self.right)

    def py(self, y: float) -> float:
        return self.height - self.bottom - (y - self.y0) / (self.y1 - self.y0) * (self.height - self.top - self.bottom)

    def add(self, mark: str) -> None:
        self.marks.append(mark)

    def _axes(self, xticks: list[tuple[float, str]] | None, yticks: list[tuple[float, str]] | None) -> str:
        parts = []
        xticks = xticks if xticks is not None else [(t, _label(t)) for t in _nice_ticks(self.x0, self.x1)]
        yticks = yticks if yticks is not None else [(t, _label(t)) for t in _nice_ticks(self.y0, self.y1, 4)]
        base = self.height - self.bottom
        for value, text in yticks:
            y = self.py(value)
            parts.append(f'<line class="grid" x1="{self.left}" x2="{self.width - self.right}" y1="{_f(y)}" y2="{_f(y)}"/>')
            parts.append(f'<text class="tick" x="{self.left - 6}" y="{_f(y + 4)}" text-anchor="end">{_e(text)}</text>')
        for value, text in xticks:
            x = self.px(value)
            parts.append(f'<line class="axis" x1="{_f(x)}" x2="{_f(x)}" y1="{base}" y2="{base + 4}"/>')
            parts.append(f'<text class="tick" x="{_f(x)}" y="{base + 16}" text-anchor="middle">{_e(text)}</text>')
        parts.append(f'<line class="axis" x1="{self.left}" x2="{self.width - self.right}" y1="{base}" y2="{base}"/>')
        parts.append(f'<line class="axis" x1="{self.left}" x2="{self.left}" y1="{self.top}" y2="{base}"/>')
        parts.append(f'<text class="label" x="{_f((self.left + self.width - self.right) / 2)}" y="{self.height - 6}" '
                     f'text-anchor="middle">{_e(self.xlabel)}</text>')
        middle = (self.top + base) / 2
        size = _fitting_font_px(self.ylabel, 2 * min(middle, self.height - middle) - 4)
        style = "" if size == _LABEL_PX else f' style="font-size:{size}px"'
        parts.append(f'<text class="label"{style} transform="translate(14,{_f(middle)}) rotate(-90)" '
                     f'text-anchor="middle">{_e(self.ylabel)}</text>')
        return "".join(parts)

    def svg(self, title: str, *, xticks: list[tuple[float, str]] | None = None,
            yticks: list[tuple[float, str]] | None = None) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {self.width} {self.height}" '
                f'width="{self.width}" height="{self.height}"><title>{_e(title)}</title>'
                f'{self._axes(xticks, yticks)}{"".join(self.marks)}</svg>')


def _polyline(plot: _Plot, xs: list[float], ys: list[float], colour: str, *, step: bool = False,
              dash: str = "") -> str:
    points = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if step and i:
            points.append(f"{_f(plot.px(x))},{_f(plot.py(ys[i - 1]))}")
        points.append(f"{_f(plot.px(x))},{_f(plot.py(y))}")
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{colour}" stroke-width="2"{extra} points="{" ".join(points)}"/>'


def _area(plot: _Plot, xs: list[float], ys: list[float], colour: str) -> str:
    base = plot.py(plot.y0)
    points = [f"{_f(plot.px(xs[0]))},{_f(base)}"]
    points += [f"{_f(plot.px(x))},{_f(plot.py(y))}" for x, y in zip(xs, ys)]
    points.append(f"{_f(plot.px(xs[-1]))},{_f(base)}")
    return f'<polygon fill="{colour}" fill-opacity="0.35" stroke="{colour}" points="{" ".join(points)}"/>'


def _legend(*items: tuple[str, str]) -> str:
    return '<p class="legend">' + "".join(
        f'<span><i style="background:{colour}"></i>{_e(text)}</span>' for colour, text in items) + "</p>"


# --------------------------------------------------------------------------------------------------------
# The plots


def _length_histogram(report: dict[str, Any]) -> str:
    observed = report.get("observed") or {}
    both = bool(observed.get("histogram"))
    if both:
        hist = observed["histogram"]
        series = [(hist["predicted_counts"], _PREDICTED), (hist["observed_counts"], _OBSERVED)]
    else:
        hist = report["predicted_lengths"]["histogram"]
        series = [(hist["counts"], _PREDICTED)]
    edges = hist["edges"]
    bins = len(edges) - 1
    # Shares, not counts, so that predicted (every scheduled group) and observed (matched prompts) compare.
    shares = [[c / max(sum(counts), 1) for c in counts] for counts, _ in series]
    top = max(max(s) for s in shares) or 1.0
    what = "predicted and observed" if both else "predicted"
    plot = _Plot((0, bins), (0, top * 1.05), xlabel=f"{what} group length, tokens (log scale)",
                 ylabel="share of groups")
    width = 0.9 / len(series)
    for k, ((_, colour), values) in enumerate(zip(series, shares)):
        for i, value in enumerate(values):
            x = plot.px(i + 0.05 + k * width)
            y = plot.py(value)
            w = plot.px(width) - plot.px(0)
            label = "observed" if k else "predicted"
            plot.add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(plot.py(0) - y)}" fill="{colour}">'
                     f'<title>{label} {edges[i]:,}-{edges[i + 1]:,} tokens: {value:.1%}</title></rect>')
    every = max(bins // 8, 1)
    xticks = [(i, _label(edges[i])) for i in range(0, bins + 1, every)]
    yticks = [(t, f"{t:.0%}") for t in _nice_ticks(0, top * 1.05, 4)]
    legend = [(_PREDICTED, "predicted (planned) group length")]
    if both:
        legend.append((_OBSERVED, "observed group maximum (--lengths)"))
    return plot.svg("Distribution of predicted lengths", xticks=xticks, yticks=yticks) + _legend(*legend)


def _gantt(report: dict[str, Any], spans: list[dict[str, Any]] | None = None) -> str:
    """The expected timeline, or with ``spans`` (the simulated minibatch spans) the replayed one."""
    expected = report["minibatch_table"]
    table = expected
    if spans is not None:
        facts = {m["minibatch"]: m for m in expected}
        table = [{**facts[s["minibatch"]], **s} for s in spans if s["minibatch"] in facts]
    k = report["size"]["instances"]
    end = max((m["end_s"] for m in table), default=0.0)
    row = max(min(28, 360 // max(k, 1)), 3)
    when = "simulated" if spans is not None else "expected"
    plot = _Plot((0, end), (0, k), xlabel=f"{when} time, s", ylabel="instance", height=row * k + 52)
    longest = sorted(m["longest_predicted_tokens"] for m in table)
    first_rank = {}
    for rank, value in enumerate(longest):
        first_rank.setdefault(value, rank)
    for m in table:
        if m["length_class"] is not None:
            colour = _CLASSES[min(m["length_class"], len(_CLASSES) - 1)]
        else:  # no class column: colour by the minibatch's rank in predicted length
            rank = first_rank[m["longest_predicted_tokens"]] / max(len(longest) - 1, 1)
            colour = _CLASSES[min(int(rank * len(_CLASSES)), len(_CLASSES) - 1)]
        x0, x1 = plot.px(m["start_s"]), plot.px(m["end_s"])
        y = plot.py(m["instance"] + 0.9)
        plot.add(f'<rect x="{_f(x0)}" y="{_f(y)}" width="{_f(max(x1 - x0, 0.5))}" '
                 f'height="{_f(plot.py(0) - plot.py(0.8))}" fill="{colour}" stroke="#fff" stroke-width="0.5">'
                 f'<title>minibatch {m["minibatch"]} (epoch {m["epoch"]}) on instance {m["instance"]}: '
                 f'{m["start_s"]:,.1f}-{m["end_s"]:,.1f} s, {m["prompts"]} prompts, longest '
                 f'{m["longest_predicted_tokens"]:,} tokens, padding {m["padding"]:.1%}</title></rect>')
    every = max(k // 16, 1)
    yticks = [(i + 0.5, str(i)) for i in range(0, k, every)]
    svg = plot.svg("Per-instance timeline of minibatches" + (" (simulated)" if spans is not None else ""),
                   yticks=yticks)
    return svg + _legend((_CLASSES[1], "short minibatches"), (_CLASSES[4], "medium"),
                         (_CLASSES[7], "long (darker = longer predicted length class)"))


def _time_axis(report: dict[str, Any]) -> float:
    """The right end of the time axis that the queue, queue-depth and effective-batch plots share: the
    latest time any of them (expected or replayed) reaches, so one second sits at one place on all of them."""
    simulated = report.get("simulated") or {}
    ends = [part["grid_s"][-1] for part in (report.get("queue"), report.get("effective_batch"),
                                            simulated.get("queue"), simulated.get("effective_batch"))
            if part and part.get("grid_s")]
    return max(ends, default=0.0)


def _queue_plots(report: dict[str, Any]) -> str:
    queue = report["queue"]
    grid = queue["grid_s"]
    simulated = (report.get("simulated") or {}).get("queue")
    right = _time_axis(report)
    top = max(queue["arrived_groups"][-1], 1)
    plot = _Plot((0, right), (0, top * 1.05), xlabel="time, s", ylabel="groups (cumulative)")
    plot.add(_polyline(plot, grid, queue["arrived_groups"], _PREDICTED))
    legend = [(_PREDICTED, "finished groups reaching the training queue (expected)")]
    parts = []
    if queue.get("consumed_groups"):
        plot.add(_polyline(plot, grid, queue["consumed_groups"], _CONSUMED, step=True))
        legend.append((_CONSUMED, "groups taken by the trainer (expected; one step = one batch)"))
    if simulated:
        plot.add(_polyline(plot, simulated["grid_s"], simulated["arrived_groups"], _SIMULATED, dash="6 3"))
        plot.add(_polyline(plot, simulated["grid_s"], simulated["consumed_groups"], _CONSUMED, step=True,
                           dash="2 3"))
        legend.append((_SIMULATED, "arrivals in the simulated replay (dashed)"))
        legend.append((_CONSUMED, "trainer in the replay (dotted)"))
    parts.append(plot.svg("Arrival versus consumption at the training queue") + _legend(*legend))
    if queue.get("queue_groups"):
        depth = queue["queue_groups"]
        small = _Plot((0, right), (0, max(max(depth), 1) * 1.05), xlabel="expected time, s",
                      ylabel="groups waiting", height=170)
        small.add(_area(small, grid, depth, _QUEUE))
        batch = report["size"].get("train_batch_size")
        if batch and batch <= max(depth) * 1.05:
            y = small.py(batch)
            small.add(f'<line x1="{small.left}" x2="{small.width - small.right}" y1="{_f(y)}" y2="{_f(y)}" '
                      f'stroke="#555" stroke-dasharray="4 3"/>')
        from asp_cli.report.facts import synchronous_queue_words

        waiting = synchronous_queue_words(report)
        parts.append(small.svg("Training queue depth") + _legend(
            (_QUEUE, "groups waiting in the queue" + (f" ({waiting})" if waiting else "")),
            ("#555", "one training batch (dashed)")))
    return "".join(parts)


def _effective_batch(report: dict[str, Any]) -> str:
    batch = report["effective_batch"]
    grid, live = batch["grid_s"], batch["live_sequences"]
    simulated = (report.get("simulated") or {}).get("effective_batch")
    right = _time_axis(report)
    top = max(max(live), max(simulated["live_sequences"]) if simulated else 0, 1)
    plot = _Plot((0, right), (0, top * 1.05), xlabel="time, s", ylabel="live sequences", height=200)
    plot.add(_area(plot, grid, live, _PREDICTED))
    legend = [(_PREDICTED, "expected: sequences decoding at once on all instances (a group counts N until its last "
                           "sample ends)")]
    if simulated:
        plot.add(_polyline(plot, simulated["grid_s"], simulated["live_sequences"], _SIMULATED, dash="6 3"))
        legend.append((_SIMULATED, "simulated replay: sequences decoding at once (dashed)"))
    return plot.svg("Effective batch over time") + _legend(*legend)


def _lag_plots(report: dict[str, Any]) -> str:
    lag = report["lag"]
    hist = lag["histogram"]
    total = sum(c for _, c in hist) or 1
    top = max(c for _, c in hist) / total
    lo, hi = hist[0][0], hist[-1][0]
    plot = _Plot((lo - 0.5, hi + 0.5), (0, top * 1.05), xlabel="expected lag, policy versions",
                 ylabel="share of groups", width=_WIDTH // 2 - 10, height=200)
    for value, count in hist:
        x0, x1 = plot.px(value - 0.4), plot.px(value + 0.4)
        y = plot.py(count / total)
        plot.add(f'<rect x="{_f(x0)}" y="{_f(y)}" width="{_f(x1 - x0)}" height="{_f(plot.py(0) - y)}" '
                 f'fill="{_PREDICTED}"><title>lag {value}: {count:,} groups</title></rect>')
    xticks = [(v, str(v)) for v, _ in hist] if len(hist) <= 16 else None
    yticks = [(t, f"{t:.0%}") for t in _nice_ticks(0, top * 1.05, 4)]
    left = plot.svg("Distribution of expected lag", xticks=xticks, yticks=yticks)
    steps = report["steps"]["table"]
    means = [s["lag_mean"] or 0.0 for s in steps]
    right_plot = _Plot((0, max(len(steps) - 1, 1)), (0, max(max(means, default=0), lag["max"], 1) * 1.1),
                       xlabel="training step", ylabel="mean lag of its groups", width=_WIDTH // 2 - 10, height=200)
    right_plot.add(_polyline(right_plot, list(range(len(steps))), means, _PREDICTED))
    if lag["bound"] is not None:
        y = right_plot.py(lag["bound"])
        right_plot.add(f'<line x1="{right_plot.left}" x2="{right_plot.width - right_plot.right}" y1="{_f(y)}" '
                       f'y2="{_f(y)}" stroke="{_CONSUMED}" stroke-dasharray="4 3"/>')
    right = right_plot.svg("Mean expected lag per training step")
    legend = [(_PREDICTED, "expected lag")]
    if lag["bound"] is not None:
        legend.append((_CONSUMED, f"--max-lag {lag['bound']} (dashed)"))
    return f'<div class="pair">{left}{right}</div>' + _legend(*legend)


def _steps_plot(report: dict[str, Any]) -> str:
    table = report["steps"]["table"]
    ratios = [s["ratio_to_epoch_mean"] for s in table]
    top = max(max(ratios), 1.0) * 1.08
    plot = _Plot((0, len(table)), (0, top), xlabel="training step", ylabel="mean length / epoch mean",
                 height=200)
    for i, s in enumerate(table):
        colour = _PREDICTED if s["epoch"] % 2 == 0 else _QUEUE
        x0, x1 = plot.px(i + 0.1), plot.px(i + 0.9)
        y = plot.py(s["ratio_to_epoch_mean"])
        plot.add(f'<rect x="{_f(x0)}" y="{_f(y)}" width="{_f(max(x1 - x0, 0.5))}" height="{_f(plot.py(0) - y)}" '
                 f'fill="{colour}"><title>step {s["step"]} (epoch {s["epoch"]}): {s["groups"]} groups, mean '
                 f'{s["mean_tokens"]:,.0f} tokens = {s["ratio_to_epoch_mean"]:.2f} x epoch mean, '
                 f'{s["tail_share"]:.0%} from the longest 10%</title></rect>')
    y = plot.py(1.0)
    plot.add(f'<line x1="{plot.left}" x2="{plot.width - plot.right}" y1="{_f(y)}" y2="{_f(y)}" stroke="#222" '
             'stroke-dasharray="4 3"/>')
    return plot.svg("Representativeness of each training step") + _legend(
        (_PREDICTED, "even epochs"), (_QUEUE, "odd epochs"), ("#222", "1.0 = the epoch mean (dashed)"))


def _scatter(observed: dict[str, Any]) -> str:
    points = observed["points"]
    top = max(max(max(p), 1) for p in points)
    lo, hi = 0.0, math.log10(top) * 1.02
    plot = _Plot((lo, hi), (lo, hi), xlabel="predicted group length, tokens (log)",
                 ylabel="observed group max (log)", width=420, height=360)
    for predicted, actual in points:
        plot.add(f'<circle cx="{_f(plot.px(math.log10(max(predicted, 1))))}" '
                 f'cy="{_f(plot.py(math.log10(max(actual, 1))))}" r="2" fill="{_OBSERVED}" fill-opacity="0.5"/>')
    plot.add(f'<line x1="{_f(plot.px(lo))}" y1="{_f(plot.py(lo))}" x2="{_f(plot.px(hi))}" y2="{_f(plot.py(hi))}" '
             'stroke="#222" stroke-dasharray="4 3"/>')
    ticks = [(float(e), _label(10 ** e)) for e in range(0, int(hi) + 1)]
    return plot.svg("Predicted versus observed lengths", xticks=ticks, yticks=ticks)


# --------------------------------------------------------------------------------------------------------
# Tables and the page


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[Any]], *, classes: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _sent_name(report: dict[str, Any]) -> str:
    """What the schedule sends, as `asp schedule`'s summary names it, with the page's own word beside it."""
    from asp_cli.report.formats import sent_unit_name

    engine = (report["provenance"].get("settings") or {}).get("engine")
    name = sent_unit_name(report["size"]["minibatches"], report["size"]["rows"], engine)
    return name if name == "minibatches" else f"{name} (minibatches below)"


def _synchronous_note(report: dict[str, Any]) -> str:
    """A synchronous plan's trainer waits by design: said under the queue's heading as the text says it."""
    from asp_cli.report.facts import synchronous_idle_words

    words = synchronous_idle_words(report)
    return f" {_e(words[0].upper() + words[1:])}." if words else ""


def _unbounded_lag_note(report: dict[str, Any]) -> str:
    """A plan without --max-lag expects an asynchronous trainer's lag: said under the heading as the text says it."""
    from asp_cli.report.facts import UNBOUNDED_LAG_WORDS

    lag = report.get("lag") or {}
    if not lag or lag["bound"] is not None:
        return ""
    return f" Made without --max-lag: the lag expected {_e(UNBOUNDED_LAG_WORDS)}."


def _cards(report: dict[str, Any]) -> str:
    size, inst, queue, lag = report["size"], report["instances"], report.get("queue") or {}, report.get("lag") or {}
    from asp_cli.report.headline import headline_cards

    cards = [
        *headline_cards(report),
        ("prompts x epochs", f"{size['prompts']:,} x {size['epochs']}"),
        (f"{_sent_name(report)} / instances", f"{size['minibatches']:,} / {size['instances']}"),
        ("training steps", f"{size['train_steps']:,}"),
        ("predicted padding", _pct(report["padding"]["fraction"])),
        ("instance busy spread", _pct(inst.get("busy_spread") if inst.get("busy_spread") is not None
                                      else inst.get("tokens_spread"))),
        ("last rollout ends", f"{_num(inst.get('makespan_s'))} s"),
        # the waits between steps over the steps' span (--max-trainer-idle's figure), not the share of the whole run
        # that the Simulated replay table gives: the card says which
        ("trainer idle between steps (of the steps' span)", _pct(queue.get("trainer_idle_fraction"))),
        ("lag mean / max", f"{_num(lag.get('mean'), 2)} / {_num(lag.get('max'))}"),
        ("worst step skew", _pct(report["steps"]["max_skew"])),
    ]
    from asp_cli.report.formats import instances_words

    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for k, v in cards) + "</div>" + (
        f'<p class="intro">P{_e(instances_words(size["instances"])[1:])}.</p>')


def _provenance(report: dict[str, Any]) -> str:
    from asp_cli.report.formats import made_by_text

    prov = report["provenance"]
    rows = [["schedule", report["schedule"]["name"]], ["format version", report["schedule"]["format_version"]],
            ["made by", made_by_text(prov)]]
    if prov.get("command_line"):
        rows.append(["command", prov["command_line"]])
    settings = prov.get("settings") or {}
    rows.append(["settings", ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))])
    if prov.get("preset"):
        rows.append(["preset", f"{prov['preset']['name']}: {prov['preset'].get('description') or ''}"])
    for entry in prov.get("inputs") or []:
        rows.append(["input", f"{entry.get('name')} {entry.get('fingerprint')}"])
    if prov.get("input_fingerprint"):
        rows.append(["all inputs", prov["input_fingerprint"]])
    predictor = prov.get("predictor") or {}
    if predictor:
        rows.append(["predictor", f"{predictor.get('name')} {predictor.get('fingerprint')}"])
        if predictor.get("history_fingerprint"):
            rows.append(["history", predictor["history_fingerprint"]])
        from asp_cli.predict.calibration_text import calibration_lines

        for i, line in enumerate(calibration_lines(predictor.get("calibration") or {})):
            rows.append(["calibration" if i == 0 else "", line])
    if isinstance(prov.get("arrangement"), dict):
        from asp_cli.arrange.choice_summary import arrangement_line

        # with the run's epochs: the line then says where auto judged fewer (as `asp schedule`'s summary says it)
        lines = arrangement_line(prov["arrangement"], report["size"]["epochs"]).removeprefix("arrangement: ")
        for i, line in enumerate(lines.split("\n")):
            rows.append(["arrangement" if i == 0 else "", line.strip()])
    if prov.get("made_for"):
        from asp_cli.arrange.made_for import made_for_line

        rows.append(["made for", made_for_line(prov["made_for"]).strip().removeprefix("made for ")])
    body = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _instances_table(report: dict[str, Any]) -> str:
    inst = report["instances"]
    rows = []
    for k in range(len(inst["minibatches"])):
        rows.append([k, _num(inst["minibatches"][k]), _num(inst["predicted_tokens"][k]),
                     _num(inst["busy_s"][k] if inst["busy_s"] else None),
                     _num(inst["end_s"][k] if inst["end_s"] else None)])
    rows.append(["spread", "", _pct(inst["tokens_spread"]), _pct(inst["busy_spread"]),
                 f"{_num(inst['finish_spread_s'])} s"])
    return _table(["instance", "minibatches", "predicted tokens", "busy s", "ends at s"], rows, classes="num")


def _quantile_table(report: dict[str, Any]) -> str:
    from asp_cli.report.facts import QUANTILE_NAMES, length_quantile_rows

    formats = {"tokens": _num, "ratio": lambda v: _num(v, 2), "percent": _pct}
    rows = [[label, *[formats[kind](q.get(n)) for n in QUANTILE_NAMES]]
            for label, q, kind in length_quantile_rows(report)]
    return _table(["", *QUANTILE_NAMES], rows, classes="num")


def _padding_line(report: dict[str, Any]) -> str:
    """The predicted padding, what it means for this plan, as the text says it under the same table."""
    from asp_cli.report.facts import padding_words

    return (f"<p>Predicted padding (static-batch slot waste over all minibatches): "
            f"<b>{_pct(report['padding']['fraction'])}</b> ({_e(padding_words(report))}).</p>")


def _observed_section(observed: dict[str, Any], predicted_padding: float) -> str:
    from asp_cli.report.observed import epochs_compared_words

    facts = [
        ["files", ", ".join(observed["files"])],
        *([["epoch (--lengths-epoch)", epoch_words(observed["epoch"])]] if observed.get("epoch") is not None else []),
        *([["epochs compared", epochs_compared_words(observed).removeprefix("compared: ")]]
          if epochs_compared_words(observed) else []),
        ["samples / prompts observed", f"{observed['samples']:,} / {observed['prompts_observed']:,}"],
        ["scheduled prompts matched / not observed",
         f"{observed['prompts_matched']:,} / {observed['prompts_unmatched']:,}"],
        ["observed prompts not in the schedule", f"{observed['observed_not_in_schedule']:,}"],
        ["truncated samples", _pct(observed["truncated_fraction"])],
        ["Spearman (predicted vs observed group max)", _num(observed.get("spearman"), 3)],
        ["median |log error|", _num(observed.get("median_abs_log_error"), 3)],
        ["recall of the longest 10%", _pct(observed.get("tail_recall"))],
        ["padding with observed lengths (predicted)",
         f"{_pct(observed.get('padding_fraction'))} ({_pct(predicted_padding)})"],
        ["instance token spread with observed lengths", _pct(observed.get("instance_tokens_spread"))],
    ]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    scatter = _scatter(observed) if observed.get("points") else "<p>No scheduled prompt was observed.</p>"
    return f'<div class="pair"><table class="kv">{body}</table>{scatter}</div>'


def _checks_section(checks: dict[str, Any]) -> str:
    verdict = "passed" if checks["passed"] else "FAILED"
    rows = [["ok" if r["passed"] else "FAIL", r["flag"], r["limit"], "-" if r["value"] is None else r["value"],
             r["fact"]] for r in checks["results"]]
    return (f'<p class="verdict {"ok" if checks["passed"] else "fail"}">Checks {verdict}</p>'
            + _table(["", "threshold", "limit", "value", "fact"], rows))


def _comparison_section(comparison: dict[str, Any]) -> str:
    from asp_cli.report.checks import PREDICTIONS_DIFFER_NOTE, shown_change
    from asp_cli.report.formats import change_text, fact_text, verdict_text

    rows = []
    for row in comparison["facts"]:
        kind = row.get("kind", "number")
        rows.append([row["label"], fact_text(kind, row["a"]), fact_text(kind, row["b"]),
                     change_text(kind, shown_change(row["a"], row["b"], kind)), verdict_text(row)])
    notes = "".join(f"<p class=\"intro\">{_e(row['label'])}: no verdict; {_e(row['note'])}.</p>"
                    for row in comparison["facts"] if row.get("note") and row["note"] != PREDICTIONS_DIFFER_NOTE)
    if comparison.get("predictions_differ"):
        notes += ("<p class=\"intro\">The two schedules were made with different predictions (predictor or history): "
                  "each fact is under its own, and none but the observed ones gets a verdict; replay both on the same "
                  "lengths to compare plans (<code>asp simulate A --lengths L</code>, then B).</p>")
    return (f"<p>A = <code>{_e(comparison['a'])}</code>, B = <code>{_e(comparison['b'])}</code></p>"
            + _table(["", "A", "B", "B - A", "better"], rows, classes="num") + notes)


def _simulated_section(report: dict[str, Any]) -> str:
    simulated = report["simulated"]
    metrics = simulated["metrics"]
    queue = report.get("queue") or {}
    lag = report.get("lag") or {}
    ends = simulated["instance_end_s"]
    expected_ends = report["instances"].get("end_s") or []
    source = lengths_source(simulated)

    def spread(values: list[Any]) -> str:
        values = [v for v in values if v is not None]
        return f"{max(values) - min(values):,.1f} s" if values else "-"

    synchronous = simulated.get("rollout_alone_s") is not None
    draws = simulated.get("expected_by_draws") or {}
    rollout_drawn = draws.get("rollout_s")
    rows = [
        ["trainer's last step ends, s", _num(draws.get("end_to_end_s")), _num(queue.get("trainer_end_s")),
         _num(metrics["end_to_end_s"])],
        ["rollout makespan (to the last group's arrival), s", "-" if synchronous else _num(rollout_drawn),
         _num(report["instances"].get("makespan_s")), _num(metrics["rollout_makespan_s"])],
        # Synchronous, the rollout makespan holds the training between steps: the rollout alone beside it.
        *([["rollout alone (the steps' rollouts summed, training left out), s", _num(rollout_drawn),
            _num(queue.get("rollout_alone_s")), _num(simulated["rollout_alone_s"])]] if synchronous else []),
        ["instance finish spread", "-", spread(expected_ends), spread(ends)],
        ["trainer idle (waiting for data), share of the whole run (the wait before the first step included)", "-",
         _pct(queue.get("trainer_idle_of_run_fraction")), _pct(metrics["trainer_idle_fraction"])],
        ["policy lag: mean / max", "-", f"{_num(lag.get('mean'), 2)} / {lag.get('max', '-')}",
         f"{_num(metrics['policy_lag_mean'], 2)} / {metrics['policy_lag_max']}"],
        [f"padding ({replay_padding_words(simulated)})", "-", "-", _pct(metrics["padding_fraction"])],
        ["end-to-end over the lower bound", "-", "-", f"{_num(metrics['ratio_to_lower_bound'], 3)} "
         f"(binds: {_e(metrics['lower_bound_end_to_end_binding'])})"],
    ]
    # Auto's draws (the chosen candidate's replays, tails included) are the expectation to read a replay against;
    # the point predictions leave every tail out. The column is left out where auto judged no candidates.
    routed = draws_words(report)
    header = ["", f"expected by auto's draws{routed} (tails included)", "expected at the point predictions (no tails)",
              "simulated replay"]
    if draws.get("end_to_end_s") is None:
        rows, header = [[row[0], *row[2:]] for row in rows], [header[0], *header[2:]]
    table = _table(header, rows)
    note = (f"<p>Replayed with {_e(source)} on preset <code>{_e(simulated['preset'])}</code>, "
            f"{_e(simulated['mode'])} engine, {_e(simulated['dispatch'])} dispatch"
            + (f", max_lag {simulated['max_lag']}" if simulated["max_lag"] is not None else "") + ".</p>")
    arrangement = report["provenance"].get("arrangement")
    if isinstance(arrangement, dict) and arrangement.get("timed_as") == "verl":
        note += f"<p>{_e(as_verl_routes(report))}.</p>"
    gantt = _gantt(report, simulated["minibatch_spans"]) if report["schedule"]["timing_columns"] else ""
    return note + table + gantt


def _section(anchor: str, title: str, intro: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2><p class="intro">{intro}</p>{body}</section>'


def _nav(sections: list[str]) -> str:
    """One link per section on the page, in page order, named by its title: the bar can never miss one."""
    import re

    links = re.findall(r'<section id="([^"]+)"><h2>([^<]+)</h2>', "".join(sections))
    return "<nav>" + "".join(f'<a href="#{anchor}">{title.lower()}</a>' for anchor, title in links) + "</nav>"


def render_html(report: dict[str, Any], *, checks: dict[str, Any] | None = None,
                comparison: dict[str, Any] | None = None) -> str:
    """Render a report as one self-contained HTML page.

    Parameters
    ----------
    report
        From `report.build_report`.
    checks
        From `report.check_report`, or None.
    comparison
        From `report.compare_reports`, or None.
    """
    from importlib.resources import files

    from asp_cli.report.formats import made_by_text

    sections = [_section("made", "How it was made", "The settings, inputs and predictor recorded in the "
                         "schedule file; fingerprints are SHA-256 of the file bytes.", _provenance(report))]
    if checks:
        sections.append(_section("checks", "Checks", "Thresholds given with <code>--check</code>.",
                                 _checks_section(checks)))
    if comparison:
        sections.append(_section("compare", "Comparison", "Headline facts of two schedules; "
                                 "<em>better</em> names the schedule with the better value.",
                                 _comparison_section(comparison)))
    intro = "Predicted response length of each group (the length the scheduler planned with)."
    if (report.get("observed") or {}).get("histogram"):
        intro += " Observed group maxima from <code>--lengths</code> are drawn beside them."
    sections.append(_section("lengths", "Predicted lengths", intro,
                             _length_histogram(report) + _quantile_table(report) + _padding_line(report)))
    timed = report["schedule"]["timing_columns"]
    if timed:
        sections.append(_section(
            "timeline", "Timeline", "Each bar is one inference minibatch on one instance, at its expected start "
            "and end. Hover a bar for its facts.", _gantt(report) + _instances_table(report)))
        sections.append(_section(
            "queue", "Training queue", "Finished groups reach the trainer's queue (blue); the trainer takes one "
            "batch per step (red). A steady blue slope and a queue that never empties mean no sorting bubbles."
            + _synchronous_note(report), _queue_plots(report)))
        sections.append(_section(
            "batch", "Effective batch", "How many sequences the instances decode at once; a long thin tail "
            "is a skewness bubble.", _effective_batch(report)))
    else:
        sections.append(_section("timeline", "Timeline", "This schedule has no <code>expected_*</code> timing "
                                 "columns, so there is no timeline, queue or effective-batch plot.",
                                 _instances_table(report)))
    if report.get("lag"):
        sections.append(_section(
            "lag", "Policy lag", "Lag = the policy version a group is trained at minus the version it was "
            "generated with." + _unbounded_lag_note(report), _lag_plots(report)))
    sections.append(_section(
        "steps", "Training steps", "Each step's mean predicted length over its epoch's mean. Bars far from 1.0 "
        "are steps that see mostly short or mostly long responses.", _steps_plot(report)))
    if report.get("observed"):
        sections.append(_section("observed", "Observed lengths", "Lengths from <code>--lengths</code>, matched "
                                 "to the schedule by prompt id.",
                                 _observed_section(report["observed"], report["padding"]["fraction"])))
    if report.get("simulated"):
        sections.append(_section(
            "simulated", "Simulated replay", "The schedule replayed in <code>asp simulate</code>'s engine model "
            "(<code>--simulate</code>), next to what the schedule expects from its predicted lengths. The queue "
            "and effective-batch plots above draw the replay dashed.", _simulated_section(report)))
    template = Template(files("asp_cli").joinpath("templates/report.html").read_text(encoding="utf-8"))
    name = report["schedule"]["name"] or "schedule"
    return template.substitute(
        title=_e(f"asp report: {name}"),
        heading=_e(name),
        nav=_nav(sections),
        cards=_cards(report),
        sections="\n".join(sections),
        footer=_e(f"report_version {report['report_version']}; schedule made by {made_by_text(report['provenance'])}"),
    )
