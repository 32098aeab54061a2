"""`asp report`: what a schedule will do, as a terminal summary, JSON, an HTML page, or a pipeline gate."""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer

from asp_cli.cli.common import emit_json, guarded, lag_bound, output_option, say, write_stdout
from asp_cli.settings import NO_LAG_BOUND
from asp_cli.reading.options import DEFAULT_READ


def register(app: typer.Typer) -> None:
    app.command("report", no_args_is_help=True)(report_command)


def report_command(
    schedule: Path = typer.Argument(..., metavar="SCHEDULE", readable=False, help="A schedule file written by `asp schedule`."),
    json_output: bool = typer.Option(False, "--json", help="Print the report as one JSON document on stdout."),
    html: Optional[Path] = output_option("--html", default=None, help="Write a self-contained HTML page with plots here."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --html file."),
    lengths: list[Path] = typer.Option(
        [], "--lengths", readable=False,
        help="Observed response lengths (rollout logs; repeatable), shown next to the predictions.",
    ),
    lengths_id_key: Optional[str] = typer.Option(None, "--lengths-id-key", help="The prompt id column in --lengths files."),
    lengths_length_key: Optional[str] = typer.Option(
        None, "--lengths-length-key", help="The response length column in --lengths files."
    ),
    lengths_epoch: Optional[int] = typer.Option(None, "--lengths-epoch", metavar="E", help="Compare (and with --simulate replay) only epoch E's samples of --lengths (by its epoch column, as asp observe --epoch numbered them; -1: the samples without an epoch, a probe's), as asp simulate --lengths-epoch does. Default: each epoch of a schedule of several compared (and with --simulate replayed) with the lengths' own epoch of that number, where they hold it, else with each prompt's first N samples, oldest epoch first; a probe's left out of the prompts an epoch holds (docs/replay.md)."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' or 'skip' bad rows of --lengths files."),
    simulate: bool = typer.Option(
        False, "--simulate",
        help="Also replay the schedule in the simulator (on the --lengths when given, else on sampled lengths) "
             "and show the replay next to the expectations.",
    ),
    compare: Optional[Path] = typer.Option(None, "--compare", readable=False, help="A second schedule to show side by side (B)."),
    check: bool = typer.Option(False, "--check", help="Exit with code 1 when a threshold below is broken."),
    max_padding: Optional[float] = typer.Option(None, "--max-padding", help="Most padding fraction (0-1): of the plan at its predicted lengths (a static batch of each minibatch; a floor, which a plan of sorted minibatches keeps low by construction), and with --lengths of the observed lengths too, the one to gate a run on."),
    max_instance_spread: Optional[float] = typer.Option(
        None, "--max-instance-spread", help="Most (max - min) / mean of per-instance busy time (tokens without timing)."
    ),
    max_lag: Optional[str] = typer.Option(None, "--max-lag", metavar="<steps|none>", parser=lag_bound, help="Most expected policy lag, in whole training steps; none: no limit (a gate fed the schedule's own --max-lag)."),
    max_step_skew: Optional[float] = typer.Option(
        None, "--max-step-skew", help="Most |step mean length / epoch mean - 1| over full training steps."
    ),
    max_trainer_idle: Optional[float] = typer.Option(
        None, "--max-trainer-idle", help="Most fraction of time the trainer waits for data between steps."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal summary (errors, check failures and warnings still show)."),
) -> None:
    """Show what a schedule will do: balance, padding, queue flow, lag; gate a pipeline with --check."""
    with guarded():
        import dataclasses

        from asp_cli.errors import CheckFailed, SettingsError
        from asp_cli.output import check_output_name, check_output_path, write_text_atomic
        from asp_cli.report.checks import CheckLimits
        from asp_cli.report.files import REPORT_READ, report_schedule

        read = dataclasses.replace(REPORT_READ, length_id_key=lengths_id_key, length_key=lengths_length_key,
                                   on_bad_row=on_bad_row)  # type: ignore[arg-type]
        # Read as a number and checked by the library (a whole number of steps), where Typer's own parser answered
        # 0.5 with "Input should be a valid integer", exit 2.
        unbounded = max_lag == NO_LAG_BOUND  # no limit: a gate fed a schedule's own bound, which may be none
        max_lag = None if unbounded else max_lag  # type: ignore[assignment]
        whole = (int(max_lag) if isinstance(max_lag, float) and math.isfinite(max_lag) and max_lag.is_integer()
                 else max_lag)
        limits = CheckLimits(max_padding=max_padding, max_instance_spread=max_instance_spread, max_lag=whole,
                             max_step_skew=max_step_skew, max_trainer_idle=max_trainer_idle)
        if check and not limits.any() and not unbounded:
            raise SettingsError("--check needs at least one threshold, for example --max-padding 0.1")
        if limits.any() and not check:
            raise SettingsError("thresholds are only tested with --check; add --check")
        if html is not None:
            check_output_path(html, [schedule, *lengths, *([compare] if compare else [])], force=force)
            check_output_name(html, (".html", ".htm"), writer="--html", what="an HTML page")
        result = report_schedule(schedule, lengths=lengths, read=read, compare=compare,
                                 limits=limits if check else None, simulate=simulate, lengths_epoch=lengths_epoch)
        if result.skipped_rows:
            from asp_cli.errors import counted

            say(f"skipped {counted(result.skipped_rows, 'bad row')} of --lengths files (--on-bad-row skip)")
        if check and unbounded and not limits.any():
            result.warnings.append("--max-lag none sets no limit, and no other threshold was given: nothing was "
                                   "checked")
        for warning in result.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if html is not None:
            from asp_cli.report.html import render_html

            write_text_atomic(html, render_html(result.report, checks=result.checks, comparison=result.comparison),
                              replace=force)
            if not quiet:
                say(f"Wrote {html}")
        if json_output:
            emit_json(result.document)
        elif not quiet:
            from asp_cli.report.text import render_compare_text, render_text

            terminal = sys.stdout.isatty()
            color = styled(sys.stdout)
            width = min(shutil.get_terminal_size((100, 24)).columns, 120) if terminal else 100
            text = render_text(result.report, checks=result.checks, width=width, color=color)
            if result.comparison is not None:
                text += "\n" + render_compare_text(result.comparison, width=width, color=color)
            write_stdout(text)
        if result.checks is not None and not result.checks["passed"]:
            broken = [r["message"] for r in result.checks["results"] if not r["passed"]]
            from asp_cli.errors import counted

            raise CheckFailed(f"{counted(len(broken), 'check')} broken: " + "; ".join(broken))


def styled(stream) -> bool:
    """Whether the report on ``stream`` gets styles: on a terminal, unless the user asks for none
    (https://no-color.org) or the terminal cannot show them (bold and dim escapes reached a NO_COLOR terminal: a
    pipeline newcomer's round)."""
    return bool(stream.isatty()) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
