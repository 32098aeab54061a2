"""The Python twin of `asp report`: a schedule (and lengths, a second schedule, thresholds) in, one result out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli.errors import SettingsError, counted, shown_id
from asp_cli.reading.options import ReadOptions, paths_of
from asp_cli.report.checks import CheckLimits, check_report, compare_reports
from asp_cli.report.facts import build_report, padded_overflow
from asp_cli.report.observed import EpochRows, observed_by_epoch, observed_from_samples

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
    warnings: list[str] = field(default_factory=list)  # legal but probably not what the user meant

    @property
    def document(self) -> dict[str, Any]:
        """The JSON document of `asp report --json`: the report plus ``checks`` and ``comparison`` (or null);
        ``comparison`` holds the facts side by side and, under ``other``, the other schedule's full report. An
        attribute, as every other result's ``document`` (before 2026-12-06 a method)."""
        comparison = None if self.comparison is None else {**self.comparison, "other": self.other}
        return {**self.report, "checks": self.checks, "comparison": comparison, "warnings": self.warnings}

    def text(self, *, width: int = 100) -> str:
        """The report as `asp report` prints it (the comparison after it, where there is one), without colour."""
        from asp_cli.report.text import render_compare_text, render_text

        text = render_text(self.report, checks=self.checks, width=width)
        return text + ("\n" + render_compare_text(self.comparison, width=width) if self.comparison is not None else "")


def report_schedule(
    schedule: str | Path,
    *,
    lengths: str | Path | Sequence[str | Path] = (),
    read: ReadOptions = REPORT_READ,
    compare: str | Path | None = None,
    limits: CheckLimits | None = None,
    simulate: bool = False,
    lengths_epoch: int | None = None,
) -> ReportResult:
    """Read a schedule (and optionally observed lengths and a second schedule) and report on it.

    This is what `asp report` runs. With ``simulate``, the schedule is also replayed in the simulator (on the
    observed lengths when given) and the report's ``simulated`` section holds the replay
    (`asp_cli.report.simulated.simulated_section`). ``lengths_epoch`` (`asp report --lengths-epoch`) compares and
    replays one epoch of the lengths only, as `asp simulate --lengths-epoch` replays it
    (`asp_cli.sim.lengths.epoch_samples`; -1: the samples without an epoch, a probe's); None: every sample, a
    probe's left out of the prompts an epoch holds. Each file is read once.

    Raises
    ------
    ScheduleFormatError
        When a file is not an asp schedule or is of a newer format version.
    InputError
        When a lengths file is unreadable.
    SettingsError
        When ``lengths_epoch`` is not a whole number from -1 up, is given without lengths, or names an epoch the
        lengths do not hold (E110, as `asp simulate`'s).
    """
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import schedule_of
    from asp_cli.sim.lengths import epoch_samples, refuse_unmatched
    from asp_cli.sim.options import ReplayOptions

    lengths = paths_of(lengths)
    # Validated where `asp simulate` validates it, and replayed with it (`simulated_section`).
    replay = ReplayOptions(lengths_epoch=lengths_epoch)
    if limits is not None and not isinstance(limits, CheckLimits):  # a dict was an AttributeError from inside
        raise SettingsError(f"limits must be a CheckLimits (asp_cli.CheckLimits(max_padding=0.1, ...)) or None, not "
                            f"{type(limits).__name__}")
    read = ReadOptions.named_as(read, REPORT_READ)
    read.check_length_keys_used(lengths, "--lengths")
    observed = None
    samples = None
    skipped = 0
    warnings: list[str] = []
    if lengths:
        samples, report = read_lengths(lengths, read)
        skipped = report.skipped_rows
        warnings.extend(report.notes)
    # The epoch compared is the one checked, as `asp simulate` picks it before it matches the ids.
    samples = epoch_samples(samples, replay.lengths_epoch, lengths)
    # Two files of the same name (before/s.parquet, after/s.parquet) are told apart by their paths.
    loaded = schedule_of(schedule)
    other = schedule_of(compare, "compare") if compare is not None else None
    same_name = other is not None and loaded.path is not None and other.path is not None and \
        loaded.path.name == other.path.name
    probe_left_out = 0  # prompts whose probe samples `_check_samples` leaves out, said in `simulated.lengths`
    replayed = None
    if samples is not None:
        from asp_cli.sim.lengths import without_probe_samples

        refuse_unmatched(samples, loaded.frame["prompt_id"], lengths)
        probe_left_out = without_probe_samples(samples)[1]
        # The replay takes them whole, as `asp simulate` does: a schedule of several epochs replays each epoch the
        # lengths number with that epoch's samples, which the comparison's first N of each prompt left out.
        replayed = samples
        samples, by_epoch = _check_samples(samples, loaded, warnings, replay.lengths_epoch)
        observed = observed_from_samples(samples, lengths, epoch=replay.lengths_epoch, by_epoch=by_epoch)
    main = build_report(loaded, observed=observed, name=str(loaded.path) if same_name else None)
    changed = loaded.rows_changed()
    if changed:
        warnings.append(f"{loaded.path or 'the schedule'} {changed}: the figures below read them as they are")
    damaged = main["provenance"].get("damaged_metadata")
    if damaged:
        warnings.append(f"the schedule's metadata holds {', '.join(damaged)} not as asp wrote {'it' if len(damaged) == 1 else 'them'} "
                        "(edited by hand?): left out of this report; its rows and settings are read as they are")
    overflow = padded_overflow(loaded)
    if overflow and overflow[0]:
        warnings.append(f"{overflow[0]:,} of {overflow[1]:,} minibatches hold more padded KV at the predicted lengths "
                        f"than the {loaded.kv_tokens_per_minibatch:,} tokens they were cut by: this static schedule "
                        "was cut before asp counted padded batches (format 1.1); HF generate would run out of memory "
                        "on them. Make the schedule again with this asp")
    warnings.extend(_oversized_batch(loaded))
    if simulate:
        from asp_cli.report.simulated import expected_by_draws, simulated_section

        main["simulated"] = simulated_section(loaded, replayed, skipped_rows=skipped, options=replay)
        main["simulated"]["lengths"]["prompts_with_probe_samples_left_out"] = probe_left_out
        main["simulated"]["expected_by_draws"] = expected_by_draws(
            main["provenance"].get("arrangement"), synchronous=main["simulated"]["rollout_alone_s"] is not None,
            run_epochs=main["size"]["epochs"])
    result = ReportResult(report=main, skipped_rows=skipped, warnings=warnings)
    if other is not None:
        result.other = build_report(other, observed=_observed_of(other, replayed, observed),
                                    name=str(other.path) if same_name else None)
        result.comparison = compare_reports(main, result.other)
        _check_like_for_like(loaded, other, other.path or "the schedule compared", warnings)
    if limits is not None and limits.any():
        result.checks = check_report(main, limits)
    return result


def _oversized_batch(schedule: Any) -> list[str]:
    """`asp schedule`'s and `asp simulate`'s warning where the train batch is larger than an epoch's prompts
    (`advice.oversized_batch_warning`): every step is the epoch's only, partial batch, which verl's dataloader never
    trains. `asp report` of such a schedule (80 prompts at 128) showed its one step of "up to 128 groups" unsaid."""
    from asp_cli.arrange.advice import oversized_batch_warning

    frame = schedule.frame
    if not frame.height:
        return []
    first = frame.filter(pl.col("epoch") == frame["epoch"].min()).height
    said = oversized_batch_warning(schedule.recorded_settings, first)
    return [said] if said else []


def _observed_of(other: Any, samples: pl.DataFrame | None, observed: Any) -> Any:
    """The observed lengths of the --compare schedule: its own epochs matched as `_check_samples` matches this one's,
    where the lengths number them (each schedule's epochs are its own); else the same as this one's."""
    from asp_cli.sim.lengths import in_replay_order

    n = (other.settings or {}).get("samples_per_prompt")
    if observed is None or samples is None or observed.epoch is not None or not (
            isinstance(n, int) and not isinstance(n, bool) and n > 0):
        return observed
    ordered = in_replay_order(samples)[0]
    cap = (other.settings or {}).get("max_response_tokens")
    if isinstance(cap, int) and not isinstance(cap, bool):
        ordered = ordered.with_columns(pl.col("truncated").fill_null(pl.col("response_tokens") >= cap))
    by_epoch = observed_by_epoch(ordered, other.frame, n)
    if by_epoch is None and observed.by_epoch is None:
        return observed
    if by_epoch is None:  # this one's were matched by epoch, uncut: the other's are each prompt's first N
        ordered = ordered.filter(pl.int_range(pl.len()).over("prompt_id") < n)
    return observed_from_samples(ordered, observed.files, by_epoch=by_epoch)


def _check_samples(samples: pl.DataFrame, schedule: Any, warnings: list[str],
                   epoch: int | None = None) -> tuple[pl.DataFrame, EpochRows | None]:
    """Warn about observed lengths of other prompts or above the schedule's cap, and keep the first N samples of a
    prompt that has more; mark samples at the cap truncated where the file does not say (docs/predictor.md: a sample
    that reached the cap was cut there). A probe's samples (no epoch) of prompts an epoch holds are left out, as
    `asp simulate` leaves them out, and each prompt's taken oldest epoch first (`asp_cli.sim.lengths.in_replay_order`).
    ``epoch``: the one `--lengths-epoch` kept, where it was given (more samples than N are then not several epochs').
    Where a schedule of several epochs meets lengths that number them (and no ``epoch`` was picked), each schedule
    epoch's rows get their own epoch's samples as a replay matches them (`observed_by_epoch`, returned beside the
    samples, which are then not cut: each row takes its first N), and a prompt is over the group where a row's are."""
    from asp_cli.sim.lengths import in_replay_order

    samples = in_replay_order(samples)[0]
    n = (schedule.settings or {}).get("samples_per_prompt")
    whole_n = isinstance(n, int) and not isinstance(n, bool) and n > 0
    cap = (schedule.settings or {}).get("max_response_tokens")
    if isinstance(cap, int) and not isinstance(cap, bool):
        samples = samples.with_columns(pl.col("truncated").fill_null(pl.col("response_tokens") >= cap))
    by_epoch = observed_by_epoch(samples, schedule.frame, n) if whole_n and epoch is None else None
    scheduled = schedule.frame["prompt_id"].unique()
    ids = samples["prompt_id"].unique(maintain_order=True)
    strays = ids.filter(~ids.is_in(scheduled.implode()))
    if strays.len():  # none at all was refused before (sim.lengths.refuse_unmatched)
        from asp_cli.reading.id_forms import near_misses

        near = near_misses(strays, scheduled)
        one = strays.len() == 1
        warnings.append(f"{strays.len():,} of the {counted(ids.len(), 'prompt id')} of --lengths "
                        f"{'is' if one else 'are'} not in the schedule ({'' if one else 'e.g. '}"
                        f"{shown_id(strays[0])}); {'its' if one else 'their'} samples are left out of the comparison "
                        "with the predictions"
                        + (near.clause("in --lengths", "in the schedule") if near else ""))
    if whole_n:
        # More samples of a prompt than a group holds (a log of two epochs, a file given twice): the first N of each,
        # in the files' order, as `asp simulate` replays them; they were pooled, a group maximum over 16 samples.
        # Matched by epoch, the rows compared are judged by their own epoch's samples, as a replay judges them.
        compared = [entry["schedule_epoch"] for entry in by_epoch.compared] if by_epoch else []
        counts = (samples.filter(pl.col("prompt_id").is_in(scheduled.implode())).group_by("prompt_id").len()
                  if by_epoch is None else by_epoch.rows.filter(pl.col("epoch").is_in(compared))
                  .group_by("prompt_id").agg(pl.col("judged").max().alias("len")))
        per_prompt = counts["len"]
        extra = int((per_prompt > n).sum())
        if extra:
            from asp_cli.sim.lengths import epochs_within, more_samples_fix

            # The epochs of the prompts over the group alone, as `asp simulate` judges them: a probe of others hid
            # that each epoch held a group, and rollout.n was blamed.
            over = counts.filter(pl.col("len") > n)["prompt_id"].implode()
            epochs = epochs_within(samples.filter(pl.col("prompt_id").is_in(over)), n) if by_epoch is None else 0
            if by_epoch is None:
                samples = samples.filter(pl.int_range(pl.len()).over("prompt_id") < n)
            each = per_prompt.unique()
            from asp_cli.report.simulated import epoch_words

            # --lengths-epoch named, as asp simulate's warning names it (a slime newcomer's history of 3 epochs).
            cause, fix = (("several epochs, or a file given twice?", "give one epoch's lengths to compare that one (or "
                           "pick it with --lengths-epoch E; of a history of several epochs, the oldest is compared)")
                          if epoch is None and by_epoch is None else
                          ("within one epoch: a file given twice?", "give each file once") if epoch is None else
                          (f"of {epoch_words(epoch)} alone: a file given twice?", "give each file once"))
            taken = "of each epoch's, as --simulate replays them" if by_epoch else "of each, oldest epoch first"
            warnings.append(f"{counted(extra, 'prompt')} {'has' if extra == 1 else 'have'} more than the schedule's "
                            f"{n} samples per prompt in --lengths "
                            f"({cause}); the first {n} {taken}, are compared; {fix}"
                            + more_samples_fix(n, int(each[0]) if each.len() == 1 else 0, epochs))
    if isinstance(cap, int) and not isinstance(cap, bool):
        over = int((samples["response_tokens"] > cap).sum())
        if over:
            warnings.append(f"{counted(over, 'sample')} of --lengths {'is' if over == 1 else 'are'} longer than the "
                            f"schedule's max_response_tokens ({cap:,}); {'was it' if over == 1 else 'were they'} "
                            "generated with a larger cap?")
    return samples, by_epoch


def _check_like_for_like(schedule: Any, other: Any, where: Path, warnings: list[str]) -> None:
    """Warn when `--compare` names a schedule of other prompts: its facts would differ for that reason alone."""
    mine = schedule.frame["prompt_id"].unique()
    theirs = other.frame["prompt_id"].unique()
    shared = int(mine.is_in(theirs.implode()).sum())
    if shared < max(mine.len(), theirs.len()):
        warnings.append(f"{where} schedules other prompts ({shared:,} in common; {mine.len():,} prompts here, "
                        f"{theirs.len():,} there): the comparison is not like for like")
    # Settings of the run, not of the arrangement: two schedules apart in them differ for that reason too (a
    # hostile-input round: 3 epochs on `static` against 1 streaming, B called "better" on its last step's end).
    here, there = schedule.settings or {}, other.settings or {}
    apart = [f"--{key.replace('_', '-')} {_shown_setting(here.get(key))} here, {_shown_setting(there.get(key))} there"
             for key in _RUN_SETTINGS if here.get(key) != there.get(key)
             and (key in here and key in there or key in _LEFT_OUT_WHEN_NONE)]
    if apart:
        warnings.append(f"{where} was made for another run ({'; '.join(apart)}): its facts differ for that reason "
                        "too, not only by the arrangement; compare schedules made alike but for what you are "
                        "weighing")


# The settings that describe the run a schedule is for (the engine, the trainer, the sizes), as opposed to how it
# is arranged (--arrangement, --seed, --steps, ...), which is what `asp report --compare` weighs.
_RUN_SETTINGS = ("epochs", "engine", "instances", "samples_per_prompt", "train_batch_size", "max_lag", "trainer",
                 "max_response_tokens", "preset", "router", "dispatch")


_LEFT_OUT_WHEN_NONE = ("router",)  # `ScheduleSettings.to_dict` records it only when set


def _shown_setting(value: Any) -> str:
    return "none" if value is None else str(value)
