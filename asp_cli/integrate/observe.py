"""Observe: ingest what rollouts really produced and append it to a history file for the next schedule.

A rollout log holds a prompt id and a response token count per sample (or a list of counts per prompt), as
JSONL, JSON, Parquet or CSV; the columns are found as `asp_cli.reading.read_lengths` finds them. verl's
generation dumps (``trainer.rollout_data_dir``) are read too when a dataset is given, from both trainers:
the v1 trainer's (``input, output, gts, score, step, uid``, ``uid`` = ``{uuid4}_{session}_{i}``) and the
legacy trainer's (``input, output, gts, score, step`` plus its reward extras). They carry no row id and no
token count: each ``input`` is matched to the dataset prompt whose text it contains, and the ``output`` is
counted with a tokenizer (``--tokenizer``; verl strips special tokens from it, so the count is one token
short, the end-of-sequence token, for a response that stopped by itself) or estimated at 4 bytes per token; a
dump whose rows carry their prompt's id in a column of their own is read with ``--id-key`` naming it, its outputs
counted the same way (`asp_cli.integrate.observe_dumps`).
verl's generation output (``verl.trainer.main_generation_server``: the dataset's rows, with their id, plus
``responses``, the n response texts of each prompt) is read as one sample per text. Which kind each log was
is reported (``log_formats``).

The history is a Parquet file with one row per observed sample: ``prompt_id`` (str), ``response_tokens``
(int64), ``truncated`` (bool or null), ``epoch`` (int32 or null), ``log`` (the log's file name). Its
metadata lists the fingerprints of the logs already ingested, so observing the same log twice adds nothing.
It is what ``asp schedule --history`` and ``asp predictor fit`` read.

Nothing is dropped silently: bad rows (``on_bad_row``) and ids the schedule or dataset do not know
(``unknown_ids``) are counted in the result, with examples; by default a log mostly of unknown ids is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, OutputError, SettingsError, counted, missing_hint, stdin_named
from asp_cli.reading.dump_folders import dump_folder_fix
from asp_cli.reading.exported import export_id_key, export_ids, with_export_id_key
from asp_cli.integrate.history_file import (  # noqa: F401 - the history file, read and written here
    HISTORY_FORMAT_VERSION, HISTORY_SCHEMA, METADATA_KEY, already_observed, grown_log, history_schema, read_history,
    write_history,
)
from asp_cli.integrate.observe_ids import (  # noqa: F401 - UNKNOWN_POLICIES: the policies, named here before
    UNKNOWN_POLICIES, check_unknown_policy, held_to, nothing_to_write, refuse_a_prompt_file,
    refuse_datasets_among_logs, row_number_ids_warning, settle_unknown_ids,
)
from asp_cli.integrate.dump_steps import dump_notes
from asp_cli.integrate.observe_coverage import coverage, epochs_overfull
from asp_cli.integrate.observe_dumps import (
    BYTES_PER_TOKEN, VERL_RESPONSES, Dataset, counts_text, log_format, read_verl_dump, read_verl_generations,
)
from asp_cli.integrate.recorded_dataset import DatasetFromSchedule
from asp_cli.integrate.response_text import responses_column
from asp_cli.reading.json_records import untag
from asp_cli.reading.options import ReadOptions, paths_of
from asp_cli.schedule_format import schedule_of
from asp_cli.settings import check_count, check_flags, whole

# `asp observe` names a log's id and length columns --id-key and --length-key.
OBSERVE_READ = ReadOptions(length_id_flag="--id-key", length_flag="--length-key", id_flag="--dataset-id-key",
                           prompt_flag="--dataset-prompt-key")
LOG_FORMATS = ("rollout_log", "verl_v1_dump", "verl_legacy_dump", "verl_generations")


@dataclass
class ObserveResult:
    """What `observe` did: the rows it added, the whole history, counts and warnings."""

    added: pl.DataFrame
    history: pl.DataFrame
    output: Path | None
    summary: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def observe(
    logs: Sequence[str | Path],
    output: str | Path | None = None,
    *,
    schedule: str | Path | None = None,
    dataset: Sequence[str | Path] = (),
    append: bool = False,
    force: bool = False,
    epoch: int | None = None,
    read: ReadOptions = OBSERVE_READ,
    unknown_ids: str | None = None,
    max_response_tokens: int | None = None,
) -> ObserveResult:
    """Read rollout logs, validate them, and write (or append to) a history file; the twin of `asp observe`.

    Parameters
    ----------
    logs
        Rollout logs (JSONL, JSON, Parquet, CSV; optionally gzipped) or verl generation dumps.
    output
        The history Parquet file; ``None`` only builds the frames.
    schedule
        The schedule the rollouts replayed (a file, or one kept in memory): ids outside it are unknown, and its
        ``max_response_tokens`` marks capped samples as truncated when the log does not say.
    dataset
        The prompt file(s): ids outside them are unknown; needed to match verl dumps to prompt ids.
    append
        Add to an existing history instead of refusing to replace it.
    force
        Replace an existing output (without ``append``).
    epoch
        The epoch to record for every row (default: the log's own ``epoch`` column, else none); where the log's
        column says another, a warning.
    read
        The log's id and length columns when not detected (``length_id_key``, ``length_key``), the dataset's id
        column (``id_key``, `--dataset-id-key`: the ``--id-key`` the schedule was made with) and prompt column
        (``prompt_key``, `--dataset-prompt-key`; both default to the schedule's where ``schedule`` is given), ``on_bad_row``
        (``error`` stops at the first malformed row, naming file and line; ``skip`` skips and counts), and a
        local ``tokenizer.json`` to count verl dump outputs exactly.
    unknown_ids
        ``skip`` (count and leave out), ``keep`` (count and keep) or ``error`` for ids the schedule or dataset
        do not hold; ``None`` (the default) skips them too, but refuses a log more than half of whose rows name
        none of its prompts (a wrong dataset or schedule: ``skip`` keeps only the matched rows on purpose).
    max_response_tokens
        The rollout's generation cap (verl's ``data.max_response_length``): samples at it are truncated (the
        schedule's cap, where none is given), and a tokenizer's count of a verl dump's text below it (this cap only)
        gets back its end-of-sequence token.

    Raises
    ------
    InputError
        Malformed logs (with ``on_bad_row="error"``), unknown ids (with ``unknown_ids="error"``; by default, a log
        mostly of them, or one that leaves no row), a prompt file given as a log, a verl dump
        without a dataset, or an existing history that is not one.
    OutputError
        When the output exists without ``append`` or ``force``, or equals an input.
    """
    from asp_cli.output import check_output_kind, check_output_path, check_parquet_name, locked, refuse_missing

    read = ReadOptions.named_as(read, OBSERVE_READ)  # the flags observe has, whoever built the options
    check_flags(append=append, force=force)
    check_unknown_policy(unknown_ids)
    # Stored as int32; epochs count from 0. True was epoch 1 and '0' a TypeError (a hostile-input round).
    epoch = whole(epoch)  # NumPy's integers too
    check_count("--epoch", epoch, minimum=0, maximum=2**31 - 1, optional=True)
    check_count("--max-response-tokens", max_response_tokens, minimum=1, optional=True)
    logs = paths_of(logs)
    dataset = paths_of(dataset)
    if schedule is not None and not isinstance(schedule, (str, PathLike)):  # kept in memory: was a TypeError
        schedule = schedule_of(schedule)
    if not logs:
        raise InputError("no rollout log given; name at least one log file")
    from asp_cli.reading.tables import each_file_once

    each_file_once(logs, "rollout log")  # taken once in silence, where asp schedule refused it (a hostile round)
    refuse_datasets_among_logs(logs, dataset)  # `--dataset shard0 shard1`: shard1 was read as a log
    if unknown_ids == "error" and schedule is None and not dataset:  # nothing to hold the ids to: it did nothing
        raise SettingsError("--unknown-ids error checks the logs' ids against --schedule or --dataset: give one")
    if read.id_key is not None and not dataset:  # it names a column of the dataset files: alone it did nothing
        raise SettingsError(f"{read.id_flag} names the id column of the --dataset files: give them with --dataset")
    if read.prompt_key is not None and not dataset:
        raise SettingsError(f"{read.prompt_flag} names the prompt column of the --dataset files: give them with "
                            "--dataset")
    if read.tokenizer is not None:  # checked first: else a missing one went unsaid without a verl dump
        from asp_cli.predict.features import tokenizer_path_problem

        if (problem := tokenizer_path_problem(read.tokenizer)) is not None:
            raise InputError(problem)
    check_output_kind(output)
    out = Path(output) if output is not None else None
    if out is not None:
        # A Parquet history named .jsonl was refused later, when `asp schedule --history` read it back.
        check_parquet_name(output, writer="asp observe", kind=b"asp.history", replacing=force)
    if out is not None:
        inputs = [*logs, *dataset, *([Path(schedule)] if isinstance(schedule, (str, PathLike)) and schedule else [])]
        check_output_path(output, inputs, force=True)
        if out.exists() and not (force or append):  # a history is added to more often than replaced (an AReaL
            # newcomer was told only of --force, which dropped the probe's samples)
            refuse_missing(inputs)
            raise OutputError(f"{output} exists; pass --append to add these logs to it, or --force to replace it")
    if out is not None and (append or force and out.exists()):
        if append and out.exists():
            history_schema(out)  # a file that is not a history is refused before its lock file is made
        # Read, add and write under the output's lock: a second appender waits, then adds to this one's rows; a
        # --force that replaced the file while an appender worked was lost under the appender's write (an audit).
        with locked(out):
            return _observe(logs, out, schedule, dataset, append, force, epoch, read, unknown_ids, max_response_tokens)
    return _observe(logs, out, schedule, dataset, append, force, epoch, read, unknown_ids, max_response_tokens)


def _observe(logs: list[Path], out: Path | None, schedule: str | Path | None, dataset: list[Path], append: bool,
             force: bool, epoch: int | None, read: ReadOptions, unknown_ids: str | None,
             given_cap: int | None = None) -> ObserveResult:
    from asp_cli import testhooks

    existing: pl.DataFrame | None = None
    seen: list[dict[str, Any]] = []
    if out is not None and append and out.exists():
        existing, seen = read_history(out)
    testhooks.pause("locked")

    from asp_cli.fingerprint import file_fingerprint

    warnings: list[str] = []
    shared: set[tuple[str, ...]] = set()  # the ids of shared prompt texts whose samples were spread (`coverage`)
    summary: dict[str, Any] = {"logs": len(logs), "logs_already_observed": 0, "rows_read": 0, "bad_rows": 0,
                               "bad_row_examples": [], "estimated_lengths": 0, "eos_short_lengths": 0,
                               "ambiguous_matches": 0, "log_formats": {}, "columns_used": {}}
    from asp_cli.reading.history_ids import ids_observed_against, ids_of_log, reused_seed_warnings
    sched = schedule_of(schedule) if schedule else None  # read once: ids, cap, coverage and the record
    prompts = _read_dataset(dataset, with_export_id_key(_with_schedule_id_key(read, sched), dataset), warnings) \
        if dataset else None
    # A text log without --dataset: the files the schedule was made from, where they are found with its bytes.
    recorded = DatasetFromSchedule(sched.path, sched.metadata, lambda found: _read_dataset(  # its file, if any
        found, _with_schedule_id_key(read, sched), warnings)) if sched is not None and not dataset else None
    known, cap = _known_ids(sched, prompts)
    cap = given_cap if given_cap is not None else cap  # the run's own (verl's data.max_response_length) first
    # An `asp export` as the dataset names prompts by the schedule's ids, not by a column of the original file: the
    # record is the schedule's where given, else none (an OpenRLHF newcomer's history was said to name other prompts).
    exported = bool(dataset) and read.id_key is None and all(export_id_key(p) for p in dataset)
    ids_record = ids_observed_against(sched.metadata if sched is not None else None, [] if exported else dataset,
                                      prompts.report if prompts is not None and not exported else None) or (
        export_ids(dataset) if exported else {})  # the schedule's record, as the export wrote it
    warnings += row_number_ids_warning(prompts.report) if prompts is not None and sched is None and not exported else []
    seen_prints = {entry.get("fingerprint") for entry in seen}
    seen_rows = {entry["rows_fingerprint"]: entry.get("name") for entry in seen if entry.get("rows_fingerprint")}
    parts: list[pl.DataFrame] = []
    ingested: list[dict[str, Any]] = []
    for path in logs:
        if stdin_named(path) is not None:
            raise stdin_named(path)
        if not path.is_file():
            if path.is_dir() and (dumps := dump_folder_fix(path, observing=True)):
                raise InputError(dumps)  # verl's rollout_data_dir named whole (a verl newcomer's round, 2026-12-07)
            what = "is a folder, not a rollout log" if path.is_dir() else "no such rollout log"
            home = "" if path.exists() else missing_hint(path)
            raise InputError(f"{path}: {what}" + (home or "; name a file of prompt ids and response lengths"))
        fingerprint = file_fingerprint([path])
        if fingerprint in seen_prints:
            summary["logs_already_observed"] += 1
            warnings.append(already_observed(path, fingerprint, existing, seen))
            continue
        seen_prints.add(fingerprint)
        part, kind = _read_log(path, prompts if prompts is not None else recorded, read, summary, shared, given_cap)
        if cap is not None and read.tokenizer is None and (kind == "verl_generations" or counts_text(kind, read)):
            # estimated from text at 4 bytes a token: one past the cap is an estimate's error (said cut and longer)
            over = int((part[C.RESPONSE_TOKENS] > cap).sum())
            summary["estimates_over_cap"] = summary.get("estimates_over_cap", 0) + over
            part = part.with_columns(pl.col(C.RESPONSE_TOKENS).clip(upper_bound=cap))
        summary["log_formats"][kind] = summary["log_formats"].get(kind, 0) + 1
        if epoch is not None:
            # Given, it is the log's epoch: a log's own column may number another run's epochs (asp export's
            # metadata says the schedule's, 0 for every one-epoch schedule: a newcomer's two epochs both read 0).
            differ = part.filter(pl.col("epoch").is_not_null() & (pl.col("epoch") != epoch)).height
            if differ:
                warnings.append(f"{path}: its epoch column says otherwise for {counted(differ, 'row')} (e.g. "
                                f"{part.filter(pl.col('epoch') != epoch)['epoch'][0]}); recorded as --epoch {epoch}")
        part = part.with_columns(
            pl.lit(epoch, dtype=pl.Int32).alias("epoch") if epoch is not None else pl.col("epoch"),
            pl.lit(path.name).alias("log"),
        )
        if existing is not None:
            existing, seen, part, said = grown_log(existing, seen, part, path, epoch is not None, kind)
            warnings.extend(said)
        parts.append(part)
        # The same rows saved again (other line endings, keys in another order) have other bytes: said, not
        # dropped, since two real logs may hold the same rows (forced lengths replayed in two epochs).
        rows_print = _rows_fingerprint(part, next((s for p, s in summary.get("\x00steps", []) if p == path), None))
        if rows_print in seen_rows and not (existing is not None and said):  # else `grown_log` said what it is
            warnings.append(f"{path}: its rows are those of {seen_rows[rows_print]}, already in the history, though "
                            "its bytes differ; if it is the same log saved again, its samples now count twice: "
                            "observe again without it")
        seen_rows.setdefault(rows_print, path.name)
        record = ids_record or (ids_of_log(summary["columns_used"].get(path.name)) if kind == "verl_generations" else {})
        ingested.append({"name": path.name, "fingerprint": fingerprint, "rows": part.height, "format": kind,
                         "rows_fingerprint": rows_print, **({"ids": record} if record else {})})
    added = pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=HISTORY_SCHEMA)
    if recorded is not None and recorded.used:  # said under the summary (`asp observe`)
        summary["dataset_from_schedule"] = [str(p) for p in recorded.used]
    warnings.extend(summary.pop("read_notes", []))
    dump_notes(summary, warnings, given_cap is None, epoch, shared, cap, (existing, seen))  # steps twice, epochs, cap
    summary["rows_read"] = added.height + summary["bad_rows"]
    if read.tokenizer is not None and parts and not any(counts_text(e["format"], read) for e in ingested):
        warnings.append(f"--tokenizer {read.tokenizer} was not used: it counts the response text of verl dumps, and "
                        "these logs give token counts; drop it")
    if given_cap is not None and summary["logs_already_observed"]:  # re-observed to mark the cap: nothing changed
        one = summary["logs_already_observed"] == 1
        warnings.append(f"--max-response-tokens does not apply to the {counted(summary['logs_already_observed'], 'log')} "
                        f"already in the history, which {'was' if one else 'were'} not read again; to apply it, rebuild the history: "
                        "observe every log again with --force")

    if cap is not None:
        added = added.with_columns(pl.col("truncated").fill_null(pl.col("response_tokens") >= cap))
        over = int((added["response_tokens"] > cap).sum())
        summary["rows_over_max_response_tokens"] = over
        if over:
            whose = "--max-response-tokens" if given_cap else "the schedule's max_response_tokens"
            warnings.append(f"{counted(over, 'sample')} {'is' if over == 1 else 'are'} longer than {whose} ({cap:,}); kept as observed")
    read_ids = added["prompt_id"].unique() if known is not None and dataset else None  # `coverage`'s left out
    if known is not None:
        added = settle_unknown_ids(added, known, logs, held_to(sched, dataset, added, known), unknown_ids, summary,
                                   warnings)
    else:
        summary.update(unknown_id_rows=0, unknown_ids=0, unknown_id_examples=[], unknown_ids_written_otherwise="")
    kept = dict(added.group_by("log").len().iter_rows()) if added.height else {}
    for entry in ingested:  # what the history holds of each (`read_lengths` checks a history against it)
        entry["rows_kept"] = kept.get(entry["name"], 0)
    if summary["bad_rows"]:
        warnings.append(f"skipped {counted(summary['bad_rows'], 'bad row')} (--on-bad-row skip), e.g. "
                        f"{'; '.join(summary['bad_row_examples'][:3])}")
    if summary["estimated_lengths"]:
        warnings.append(
            f"{summary['estimated_lengths']} response lengths are estimated from text at {BYTES_PER_TOKEN} bytes "
            "per token" + (f" ({summary['estimates_over_cap']:,} estimated past "
                           + ("--max-response-tokens" if given_cap is not None else "the schedule's max_response_tokens")
                           + f", {cap:,}, taken as cut at it)" if summary.get("estimates_over_cap") else "")
            + "; pass --tokenizer tokenizer.json for exact counts")
    if summary["eos_short_lengths"] and summary.get("whole_lengths"):  # text decoded with its special tokens
        warnings.append(
            f"{summary['eos_short_lengths']} response lengths counted from text hold no special token where "
            f"{summary['whole_lengths']:,} others do (decoded with them, as OpenRLHF hands a response to its reward "
            "function, and counted whole): those without one were cut at the generation cap, exact")
    elif summary["eos_short_lengths"]:
        warnings.append(
            f"{summary['eos_short_lengths']} response lengths are counted from text that holds no special token: "
            "as verl dumps it (decoded with skip_special_tokens=True) each is 1 token short (the end-of-sequence "
            "token) for a response that stopped by itself, exact for one cut at the generation cap, and short by "
            "any other special tokens (tool calls) in multi-turn responses; text decoded with them (OpenRLHF's) "
            "holds an end token unless cut at the cap, so there every one of these was cut at it"
        )
    if summary["ambiguous_matches"]:  # which ids, so the user can find the repeated text (a verl newcomer could not)
        first = sorted(shared)[0] if shared else ()
        warnings.append(
            f"{summary['ambiguous_matches']} dump samples match a prompt text that several dataset ids share"
            + (f" ({len(shared)} such text{'s' * (len(shared) > 1)}, e.g. that of ids {', '.join(map(repr, first[:4]))}"
               + (", ..." if len(first) > 4 else "") + ")" if first else "")
            + "; spread over those ids in turn (the same text, the same policy's lengths)")
    if schedule and added.height:
        coverage(sched, added, summary, warnings, shared, read_ids)

    history = added if existing is None else pl.concat([existing, added], how="vertical")
    if sched is not None and existing is not None and existing.height and added.height:
        warnings.extend(epochs_overfull(existing, added, sched.recorded_settings.samples_per_prompt))
    if sched is not None:  # a log of several epochs against one one-epoch schedule, a history or none before it
        warnings.extend(reused_seed_warnings(existing, seen, ids_record, added, sched.recorded_settings.epochs))
    if existing is not None and existing.height and added.height:
        before, now = existing["epoch"].null_count() == existing.height, added["epoch"].null_count() == added.height
        if before != now:  # a MindSpeed newcomer's `--history-epochs 1` then kept one epoch, which nothing had said
            warnings.append(
                ("the history's samples so far have no epoch, these have" if before else
                 "these samples have no epoch, the history's so far have") + ": `asp schedule --history-epochs` "
                "counts those without one as before the first epoch, right for a probe's; where they are an "
                "epoch's, rebuild the history with every epoch's log numbered (the first with --epoch 0 --force, "
                "each later one with --append --epoch E)")
    summary.update(
        appended=existing is not None,  # to a history there before (a log that grew replaced its samples there)
        rows_added=added.height,
        # The epochs the added rows were recorded as (a grown log's next one where --epoch was left out), null last.
        epochs_added=sorted(added["epoch"].unique().to_list(), key=lambda e: (e is None, e or 0)) if added.height else [],
        truncated_samples=int(added["truncated"].sum() or 0) if added.height else 0,
        prompts_observed=added["prompt_id"].n_unique() if added.height else 0,
        history_rows=history.height,
        history_prompts=history["prompt_id"].n_unique() if history.height else 0,
    )
    if out is not None:
        if history.height == 0:
            raise InputError(nothing_to_write(summary, "schedule" if schedule else "dataset"))
        try:
            write_history(history, out, [*seen, *ingested], replace=force or existing is not None)
        except OutputError as exc:  # --append to a new history, which another run wrote meanwhile: --force, as
            if not append or "written while this ran" not in str(exc):  # it said, would replace that run's rows
                raise
            raise OutputError(f"{out} exists (another run wrote it while this one read the logs); run this again "
                              "with --append to add these logs to it (--force would replace its rows)") from None
    return ObserveResult(added=added, history=history, output=out, summary=summary, warnings=warnings)


# --------------------------------------------------------------------------------------------------------
# Reading logs


def _rows_fingerprint(part: pl.DataFrame, steps: pl.DataFrame | None = None) -> str:
    """A digest of a log's rows as read (ids, lengths, epochs, in order), whatever its bytes looked like, and of a
    verl dump's steps (``steps``, `dump_steps`): two steps' dumps of the same ids and lengths (answers of a fixed
    few tokens) were told they might be one log saved again."""
    import hashlib

    columns = [c for c in (C.PROMPT_ID, C.RESPONSE_TOKENS, "epoch") if c in part.columns]
    said = "".join(f"step {s}\n" for s in steps["step"].unique().sort()) if steps is not None else ""
    return "sha256:" + hashlib.sha256((part.select(columns).write_csv() + said).encode("utf-8")).hexdigest()


def _read_log(
    path: Path,
    dataset: Dataset | Callable[[Path], Dataset] | None,  # called where the log needs it (`DatasetFromSchedule`)
    read: ReadOptions,
    summary: dict[str, Any],
    shared: set[tuple[str, ...]],
    cap: int | None = None,
) -> tuple[pl.DataFrame, str]:
    """One log's samples and its kind (`LOG_FORMATS`); ``shared`` is told the ids of each prompt text several share
    whose samples a dump's were spread over (`asp_cli.integrate.observe_coverage`)."""
    from asp_cli.reading import ReadReport, read_lengths, read_table

    # With --on-bad-row skip, lines that are not JSON (a crashed run's half-written last line) are skipped here
    # and counted: on the verl paths from this read, on the others from `read_lengths`' own read of the file.
    malformed = ReadReport()
    frame = read_table(path, on_bad_row=read.on_bad_row, report=malformed, text_columns=read.text_keys)
    malformed.settle()  # the report's fingerprint of the log (unused here) holds its bytes until it is done
    kind = log_format(path, frame, read)
    verl_dump = kind != "verl_generations" and counts_text(kind, read)
    if verl_dump or kind == "verl_generations":
        summary["bad_rows"] += malformed.skipped_rows
        summary["bad_row_examples"].extend(f"{w}: not a JSON object" for w in malformed.skipped_examples)
    if verl_dump:
        keyed = read.length_id_key is not None  # the dump's ids in a column of its own: no prompt text to match
        return read_verl_dump(path, frame, None if keyed else dataset(path) if callable(dataset) else dataset,
                              read.tokenizer, summary, read.on_bad_row, shared, cap, read.length_id_key,
                              read.length_id_flag, kind == "verl_v1_dump"), kind
    if kind == "verl_generations":
        responses = responses_column(frame) or {c.lower(): c for c in frame.columns}[VERL_RESPONSES]
        return read_verl_generations(path, frame, responses, read, summary), kind
    from asp_cli.reading.history_ids import history_logs

    if history_logs(path) is not None:  # taken as a log, its samples were added again without a word (a hostile-
        # input round: 55,000 samples became 110,000), and the logs it lists were not kept from counting twice
        raise InputError(f"{path}: an asp history, not a rollout log; to plan with several histories give each to "
                         "asp schedule --history (a log both hold counts once), or observe the logs it was made from")
    if {"prompt_id", "response_tokens", "log"} <= {c for c in frame.columns if c[:1] != "\x00"} <= set(HISTORY_SCHEMA):
        # The same without its metadata (saved again by Polars or pandas), known by its columns: appended to the
        # history it came from, every sample counted twice, exit 0 (a hostile-input round).
        raise InputError(f"{path}: an asp observe history (its columns; its asp metadata is gone, saved again by "
                         "another tool?), not a rollout log; pass it as --history where it is read (asp schedule, "
                         "asp report --lengths), or observe the rollout log it was made from")
    refuse_a_prompt_file(path, frame, read)  # the probe's prompts, not the log of their generation
    lengths, report = read_lengths([path], read)
    # Which columns were read as the id and the length: detected ones are said (a sample counter, `index`, was
    # taken for the id without a word).
    summary["columns_used"][path.name] = report.columns_used.get(str(path), {})
    summary["bad_rows"] += report.skipped_rows
    summary["bad_row_examples"].extend(report.skipped_examples)
    summary["read_notes"] = summary.get("read_notes", []) + report.notes  # said with the warnings (`_observe`)
    return lengths.select(
        pl.col(C.PROMPT_ID).cast(pl.String),
        pl.col(C.RESPONSE_TOKENS).cast(pl.Int64),
        pl.col(C.TRUNCATED).cast(pl.Boolean),
        pl.col(C.EPOCH).cast(pl.Int32),
    ), kind


def _with_schedule_id_key(read: ReadOptions, schedule: Any) -> ReadOptions:
    """``read`` with the dataset's id and prompt columns the schedule (read, or None) was made with (`asp schedule
    --id-key` and `--prompt-key`, recorded in its metadata), where ``--dataset-id-key`` and
    ``--dataset-prompt-key`` did not name them: the ids the history must use, as `asp export` reads them."""
    if schedule is None:
        return read
    import dataclasses

    from asp_cli.integrate.export import recorded_keys

    recorded_id, recorded_prompt = recorded_keys(schedule.metadata)
    if read.id_key is None and recorded_id is not None:
        read = dataclasses.replace(read, id_key=recorded_id,
                                   id_flag="--dataset-id-key, here the id column the schedule was made with")
    if read.prompt_key is None and recorded_prompt is not None:
        read = dataclasses.replace(read, prompt_key=recorded_prompt,
                                   prompt_flag="--dataset-prompt-key, here the prompt column the schedule was made with")
    return read


def _read_dataset(paths: list[Path], read: ReadOptions, warnings: list[str]) -> Dataset:
    """The dataset's prompts, its ids from ``read.id_key`` where given (`--dataset-id-key`: the ``--id-key`` the
    schedule was made with, e.g. verl's ``extra_info.index``), its prompts from ``read.prompt_key`` likewise, its bad rows handled as ``--on-bad-row`` says (an
    error names the file and line)."""
    from asp_cli.reading import read_prompts

    on_bad_row = read.on_bad_row
    prompts, report = read_prompts(paths, ReadOptions(on_bad_row=on_bad_row, id_key=read.id_key, id_flag=read.id_flag,
                                                      prompt_key=read.prompt_key, prompt_flag=read.prompt_flag))
    if report.skipped_rows:
        warnings.append(f"skipped {counted(report.skipped_rows, 'bad row')} of the dataset (--on-bad-row skip), e.g. "
                        f"{'; '.join(report.skipped_examples[:3])}; log rows naming their ids count as unknown")
    return Dataset(paths, prompts, report, on_bad_row)


def _known_ids(sched: Any, dataset: Dataset | None) -> tuple[set[str] | None, int | None]:
    """Ids a row may name (None: any) and the schedule's generation cap."""
    known: set[str] | None = None
    cap = None
    if sched is not None:
        known = set(sched.frame["prompt_id"].unique().to_list())
        cap = sched.settings.get("max_response_tokens")
    if dataset is not None:
        ids = set(dataset.prompts[C.PROMPT_ID].to_list())
        known = ids if known is None else known & ids
    return known, (int(cap) if cap is not None else None)
