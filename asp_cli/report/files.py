"""The Python twin of `asp report`: a schedule (and lengths, a second schedule, thresholds) in, one result out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asp_cli.reading.options import ReadOptions
from asp_cli.report.checks import CheckLimits, check_report, compare_reports
from asp_cli.report.facts import build_report, observed_from_samples

# `asp report` names the id and length columns of its --lengths files so.
REPORT_READ = ReadOptions(length_id_flag="--lengths-id-key", length_flag="--lengths-length-key")



@dataclass
class ReportResult:
    """What `report_schedule` found: the report, and the comparison and check results when asked for."""

    report: dict[str, Any]
    other: dict[str, Any] | None = None
    comparison: dict[str, Any] | None = None
    checks: dict[str, Any] | None = None
    skipped_rows: int = 0  # bad rows of the --lengths files skipped with on_bad_row="skip"

    def document(self) -> dict[str, Any]:
        """The JSON document of `asp report --json`: the report plus ``checks`` and ``comparison`` (or null);
        ``comparison`` holds the facts side by side and, under ``other``, the other schedule's full report."""
        comparison = None if self.comparison is None else {**self.comparison, "other": self.other}
        return {**self.report, "checks": self.checks, "comparison": comparison}


def report_schedule(
    schedule: Path,
    *,
    lengths: Sequence[Path] = (),
    read: ReadOptions = REPORT_READ,
    compare: Path | None = None,
    limits: CheckLimits | None = None,
    simulate: bool = False,
) -> ReportResult:
    """Read a schedule (and optionally observed lengths and a second schedule) and report on it.

    This is what `asp report` runs. With ``simulate``, the schedule is also replayed in the simulator (on the
    observed lengths when given) and the report's ``simulated`` section holds the replay
    (`asp_cli.report.simulated.simulated_section`). Each file is read once.

    Raises
    ------
    ScheduleFormatError
        When a file is not an asp schedule or is of a newer format version.
    InputError
        When a lengths file is unreadable.
    """
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import read_schedule

    observed = None
    samples = None
    skipped = 0
    if lengths:
        samples, report = read_lengths([Path(p) for p in lengths], read)
        skipped = report.skipped_rows
        observed = observed_from_samples(samples, lengths)
    # Two files of the same name (before/s.parquet, after/s.parquet) are told apart by their paths.
    same_name = compare is not None and Path(compare).name == Path(schedule).name
    loaded = read_schedule(Path(schedule))
    main = build_report(loaded, observed=observed, name=str(schedule) if same_name else None)
    if simulate:
        from asp_cli.report.simulated import simulated_section

        main["simulated"] = simulated_section(loaded, samples, skipped_rows=skipped)
    result = ReportResult(report=main, skipped_rows=skipped)
    if compare is not None:
        result.other = build_report(read_schedule(Path(compare)), observed=observed,
                                    name=str(compare) if same_name else None)
        result.comparison = compare_reports(main, result.other)
    if limits is not None and limits.any():
        result.checks = check_report(main, limits)
    return result
