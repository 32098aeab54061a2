"""Length files (history, rollout logs, observed lengths): one row per observed sample."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import InputError, SettingsError, counted, shown_id
from asp_cli.reading.json_records import JSON_TAG, untag, untag_value
from asp_cli.reading.options import DEFAULT_READ, OnBadRow, ReadOptions
from asp_cli.reading.places import row_location
from asp_cli.reading.dump_folders import dump_folder_fix, shell_path
from asp_cli.reading.prompts import id_column, id_problem_message
from asp_cli.reading.nested import candidates_inside, with_nested_key
from asp_cli.reading.tables import BAD_ROW_FIX, ReadReport, each_file_once, file_format, find_column, read_table
from asp_cli.settings import whole

# --------------------------------------------------------------------------------------------------------
# Lengths: history, rollout logs, observed lengths


def read_lengths(paths: Sequence[Path], options: ReadOptions = DEFAULT_READ) -> tuple[pl.DataFrame, ReadReport]:
    """Read observed response lengths: one row per sample, or one row per prompt with a list of lengths.

    ``options`` names the id and length columns (``length_id_key``, ``length_key``; found by name otherwise), the
    calling command's flags for them (named in errors) and what to do with a malformed row (``on_bad_row``).

    Returns
    -------
    (frame, report)
        ``frame`` has one row per observed sample: ``prompt_id`` (str), ``response_tokens`` (int64),
        ``truncated`` (bool or null when the file does not say), ``epoch`` (int32 or null).

    Raises
    ------
    InputError
        A missing id or length column, lengths that are negative, missing, fractional or not numbers, or a file
        named twice.
    """
    from asp_cli.reading.history_ids import history_logs, metadata_warning

    report = ReadReport()
    parts = []
    each_file_once(paths, "length file")  # each sample would count twice (the history's spread, a report's counts)
    listed: dict[tuple, Path] = {}  # each log an asp history lists (`_without_shared_logs`): the history it came in first
    histories: set[Path] = set()  # the asp histories among ``paths``: a copy of one has its logs left out above
    named: dict[str, tuple[Path, bool]] = {}  # each log a history's rows name: the first file, and whether it lists logs
    for path in paths:
        path = Path(path)
        if path.is_dir() and (dumps := dump_folder_fix(path, lengths=True)):  # verl's rollout_data_dir as lengths
            raise InputError(dumps)
        fmt, _ = file_format(path)
        frame = read_table(path, on_bad_row=options.on_bad_row, report=report, text_columns=options.text_keys)
        logs = history_logs(path) if fmt == "parquet" else None
        damaged = metadata_warning(path) if fmt == "parquet" else None
        if damaged:
            report.notes.append(damaged)
        if logs and "log" in frame.columns:
            _logs_as_listed(path, frame, logs, report)
            frame = _without_shared_logs(path, frame, logs, listed, report)
            histories.add(path)
        if "log" in frame.columns and frame.schema["log"] == pl.String:
            _logs_named_elsewhere(path, frame, logs, named, report)
        lowered = {c.lower() for c in frame.columns}
        ids = lowered & set(C.ID_KEYS)  # verl's own uid (a trajectory key) and index are no prompt id by themselves
        if options.length_id_key is None and (not ids or ids <= {"uid", "index"} and not lowered & set(C.LENGTH_KEYS)) \
                and ({"input", "output"} <= lowered or "responses" in lowered):
            # A rollout dump of text (verl's rollout_data_dir, OpenRLHF's and slime's input/output logs) or verl's
            # generation output: no ids or counts to read, but `asp observe` matches its text to the prompts.
            raise InputError(f"{path}: holds response text without prompt ids (a verl, OpenRLHF or slime rollout "
                             "dump?); turn it into lengths first: asp observe "
                             f"{shell_path(path)} --dataset PROMPTS -o history.parquet, then pass history.parquet")
        text = next((c for k in C.PROMPT_KEYS for c in frame.columns if c.lower() == k), None)
        # An id inside an object (a slime sample dump's metadata.prompt_id) is E19's path to give, not this.
        nested_id = candidates_inside(frame, C.ID_KEYS, options.length_id_flag)
        # verl's uid (a v1 trainer's trajectory key) and index are no prompt id here either, as for E103 above.
        if options.length_id_key is None and ids <= {"uid", "index"} and text and "output" not in lowered \
                and not nested_id and (options.length_key is not None or lowered & set(C.LENGTH_KEYS)):
            # A MindSpeed-RL newcomer logged each sample's decoded prompt and its token count (compute_verifier_score
            # has both): told "no prompt id column found ... name the right one with --id-key", which it has none of
            # (under 'prompt' or 'question' too, and its own column named: a hostile-input round, 2026-12-07).
            fix = ("log each sample's response text as 'output' beside its input" if text.lower() == "input" else
                   f"log each sample's prompt text as 'input' (not {text!r}) and its response text as 'output'")
            own = next((c for c in frame.columns if c.lower() in ids), None)
            why = "verl's uid keys a trajectory" if own and own.lower() == "uid" else "an index numbers rows"
            named = (f" ({own!r} is read as none: {why}; if it is the prompt id, name it with "
                     f"{options.length_id_flag} {own})" if own else "")
            raise InputError(f"{path}: prompt text ({text!r}) and response lengths without prompt ids{named}: asp "
                             f"matches a log's prompt text to the --dataset prompts only in a dump of input/output text; "
                             f"{fix} (asp observe --dataset counts it), or its prompt id beside its length")
        if options.length_key is None and not lowered & set(C.LENGTH_KEYS) and lowered & set(C.PROMPT_KEYS):
            # A prompt file given as a history was told "no prompt id column found" (an OpenRLHF newcomer's).
            raise InputError(f"{path}: holds prompts but no response lengths (looked for {', '.join(C.LENGTH_KEYS)}); "
                             "give observed lengths, one row per sample: a rollout log (`asp observe` turns one into a "
                             f"history), not the prompts (or name the length column with {options.length_flag})")
        # A dotted key reaches into objects (a slime sample dump's `metadata.prompt_id`), as the prompts' --id-key.
        frame = with_nested_key(with_nested_key(frame, options.length_id_key, path), options.length_key, path)
        id_col = find_column(frame, C.ID_KEYS, options.length_id_key, what="prompt id", flag=options.length_id_flag,
                             path=path)
        length_col = find_column(frame, C.LENGTH_KEYS, options.length_key, what="response length",
                                 flag=options.length_flag,
                                 path=path)
        assert id_col is not None and length_col is not None
        # What else the file held is not read: said (an agent newcomer's `turns` went without a word).
        read_heads = {id_col, length_col, id_col.split(".")[0], length_col.split(".")[0], C.EPOCH, C.TRUNCATED,
                      sample_column(frame)}
        unread = [c for c in frame.columns if c not in read_heads and not c.startswith("\x00") and "." not in c]
        report.columns_used[str(path)] = {"id": id_col, "length": length_col, **({"unread": unread} if unread else {})}
        parts.append(extract_lengths(frame, path, fmt, id_col, length_col, options.on_bad_row, report,
                                     id_flag=options.length_id_flag))
        if parts[-1].height and parts[-1][C.RESPONSE_TOKENS].max() == 0:  # an empty answer is a length; only
            # empty answers is the wrong column, or a rollout that wrote nothing (each file: one beside good ones)
            raise InputError(f"{path}: every one of the {parts[-1].height:,} lengths (column {length_col!r}) is 0: "
                             "the wrong column, or a rollout that wrote nothing; give response lengths in tokens, "
                             f"naming their column with {options.length_flag}")
    if not parts:
        raise InputError("no length files given")
    report.settle()
    # The same bytes under two names (a copy of a log or of a history, or a log an asp history given lists): every
    # sample counts twice if it is a copy, and once each if two logs happen to hold the same samples (greedy decoding,
    # forced lengths): said, as `asp observe` says it, not refused (a hostile-input round found it silent).
    first: dict[str, Path] = {}
    for path in map(Path, paths):
        digest = report.fingerprints.get(str(path))
        if not digest or path in histories:
            continue
        copy = first.setdefault(digest, path)
        history = next((where for (log_print, _), where in listed.items() if log_print == digest), None)
        if copy is not path or (history is not None and history != path):
            report.notes.append(
                f"{path}: holds the same bytes as " + (f"{copy}" if copy is not path else f"a log {history} lists")
                + ": if it is the same log given again, each of its samples counts twice; give it once")
    frame = pl.concat(parts, how="vertical")
    if frame.height == 0:
        names = ", ".join(str(p) for p in paths)
        if report.skipped_rows:
            raise InputError(f"{names}: no usable lengths left after skipping {counted(report.skipped_rows, 'bad row')}; fix "
                             "the length files")
        raise InputError(f"{names}: the files hold no lengths (every row's list of lengths is empty); give at "
                         "least one length")
    report.settle()
    report.rows = frame.height
    return frame, report


def _without_shared_logs(path: Path, frame: pl.DataFrame, logs: list[dict], listed: dict[tuple, Path],
                         report: ReadReport) -> pl.DataFrame:
    """An asp history's rows less those of the logs an earlier history given holds too (the same file, read into
    the same rows: its `fingerprint` and `rows_fingerprint`, epochs included), said in ``report.notes``; ``listed``
    gathers every history's logs. Two histories observed from a shared log each hold its samples (a hostile-input
    round: histories A of logs 1-2 and B of 2-3 counted log 2 twice, in silence). A history's rows name their log
    by its file name only: a shared log whose name is another's too in this history (each epoch's `gen.jsonl`) is
    kept whole and said, since leaving it out by name would drop the others' samples (a review)."""
    from collections import Counter

    entries = [tuple(e.get(k) if isinstance(e.get(k), str) else None for k in ("name", "fingerprint", "rows_fingerprint"))
               for e in logs]  # a damaged entry's are None (`read_history` refuses such a list)
    keys = [(digest, rows) if digest else (f"\x00{path}:{i}", None) for i, (_, digest, rows) in enumerate(entries)]
    names = Counter(name for name, _, _ in entries)
    shared = [(name, listed[key]) for (name, _, _), key in zip(entries, keys) if key in listed]
    dropped = sorted({name for name, _ in shared if name and names[name] == 1})
    kept = sorted({name for name, _ in shared if not name or names[name] > 1}, key=str)
    if dropped:
        firsts = sorted({str(where) for name, where in shared if name in dropped})
        report.notes.append(f"{path}: its samples of {', '.join(dropped[:3])} are in {', '.join(firsts)} already (the "
                            "same log, observed into both histories); left out here, so that none counts twice")
        frame = frame.filter(~pl.col("log").is_in(dropped))
    if kept:
        report.notes.append(f"{path}: holds a log another history given holds too ({', '.join(map(str, kept[:3]))}), "
                            "under a name other logs of it share, so its samples count twice; observe the histories' "
                            "logs into one history instead")
    for key in keys:
        listed.setdefault(key, path)
    return frame


def _logs_as_listed(path: Path, frame: pl.DataFrame, logs: list[dict], report: ReadReport) -> None:
    """Say where an asp history holds another count of a log's samples than its own list of observed logs records: a
    history concatenated with itself (its metadata kept) counted every sample twice, and one cut to its first rows
    planned with a part of them, both without a word (a hostile-input round)."""
    from collections import Counter

    # A name of another kind (a list, an object: a hand edit) is none; it was unhashable, exit 70.
    names = Counter(e.get("name") if isinstance(e.get("name"), str) else None for e in logs)
    held = dict(frame.group_by("log").len().iter_rows())
    for entry in logs:
        # The samples kept of it (`rows_kept`, since 2026-12-06), else those read from it, which ids left out
        # (--unknown-ids skip) made more than the history holds: there only a count above says something.
        kept = entry.get("rows_kept")
        name, rows = entry.get("name"), kept if kept is not None else entry.get("rows")
        if not isinstance(name, str) or names[name] > 1 or not isinstance(rows, int) or isinstance(rows, bool):
            continue
        count = held.get(name, 0)
        if count > rows or (count < rows and kept is not None):
            report.notes.append(
                f"{path}: holds {count:,} samples of log {name} where its list of observed logs records {rows:,}: "
                + ("rows repeated (the history joined to itself?) count twice" if count > rows else
                   "rows left out (the history cut down or filtered?) are missing from the plan")
                + "; rebuild it with asp observe --force from the logs")


def _logs_named_elsewhere(path: Path, frame: pl.DataFrame, logs: list[dict] | None,
                          named: dict[str, tuple[Path, bool]], report: ReadReport) -> None:
    """Say where a history's rows name a log another given file's rows name too, one of the two without asp's list of
    observed logs: a history re-saved by Polars or pandas (which drop asp's metadata) given beside the history itself
    counted every sample twice without a word (a hostile-input round). Two asp histories are told apart by their
    lists (`_without_shared_logs`)."""
    listing = bool(logs)
    shared = []
    for name in frame["log"].drop_nulls().unique(maintain_order=True).to_list():
        first = named.setdefault(name, (path, listing))
        if first[0] != path and not (first[1] and listing):
            shared.append((name, first[0]))
    if shared:
        name, other = shared[0]
        report.notes.append(
            f"{path}: its rows name log {name}, as the rows of {other} do" + (f" (and {len(shared) - 1:,} more)"
                                                                            if len(shared) > 1 else "")
            + ": if one is a copy of the other (a history re-saved by Polars or pandas, which drop asp's list of "
            "observed logs), each of those samples counts twice; give one of them")


def extract_lengths(
    frame: pl.DataFrame,
    path: Path,
    fmt: str,
    id_col: str,
    length_col: str,
    on_bad_row: OnBadRow,
    report: ReadReport,
    id_flag: str = "--history-id-key",
) -> pl.DataFrame:
    frame = _mixed_lists_as_text(frame, length_col)
    if C.TRUNCATED in frame.columns:
        frame = _mixed_lists_as_text(frame, C.TRUNCATED)
    dtype = frame.schema[length_col]
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    line = pl.col("\x00line") if "\x00line" in frame.columns else pl.int_range(0, pl.len(), dtype=pl.Int64)
    truncated_col = C.TRUNCATED if C.TRUNCATED in frame.columns else None
    if truncated_col is not None:
        _check_truncated_dtype(frame.schema[truncated_col], listed, path)
    epoch, bad_epoch = _epoch_expr(frame)
    flags_listed = truncated_col is not None and isinstance(frame.schema[truncated_col], pl.List)
    flags, unreadable = _truncated_expr(frame.schema[truncated_col]) if truncated_col else (pl.lit(None, pl.Boolean),
                                                                                          pl.lit(False))
    ids, id_problem = id_column(frame, id_col)
    sample_col = None if listed else sample_column(frame)
    base = frame.select(
        ids.alias(C.PROMPT_ID),
        id_problem.alias("\x00idproblem"),
        pl.col(length_col).alias("\x00len"),
        flags.alias(C.TRUNCATED),
        (pl.lit(False) if flags_listed else unreadable).alias("\x00badflags"),
        unreadable.alias("\x00badflag"),  # a list of them where the flags are listed: one a sample
        (pl.col(C.TRUNCATED).list.eval(pl.element().cast(pl.String)) if flags_listed else pl.lit(None, pl.String))
        .alias("\x00rawflag"),
        epoch.alias(C.EPOCH),
        bad_epoch.alias("\x00badepoch"),
        pl.col(C.EPOCH).alias("\x00rawepoch") if C.EPOCH in frame.columns else pl.lit(None).alias("\x00rawepoch"),
        line.alias("\x00where"),
        (pl.col(sample_col).cast(pl.String).str.strip_prefix(JSON_TAG).str.strip_chars() if sample_col
         else pl.lit(None, pl.String)).alias("\x00sample"),
    )
    if listed:
        if flags_listed:
            # A row whose flags do not match its lengths one to one is a bad row (its flags are dropped). The
            # exploded lists must have equal sizes: no lengths, no flags; missing flags become nulls. An unreadable
            # flag is its own sample's, as an unreadable length in the list is.
            flags, lengths = pl.col(C.TRUNCATED), pl.col("\x00len")
            mismatch = flags.is_not_null() & (flags.list.len() != lengths.list.len().fill_null(0))
            base = base.with_columns(
                *(pl.when(lengths.is_null()).then(None)
                  .when(flags.is_null() | mismatch).then(lengths.list.eval(pl.lit(None, dtype)))
                  .otherwise(pl.col(name)).alias(name)
                  for name, dtype in ((C.TRUNCATED, pl.Boolean), ("\x00badflag", pl.Boolean),
                                      ("\x00rawflag", pl.String))),
                mismatch.alias("\x00badflags"),
            )
            base = base.explode(["\x00len", C.TRUNCATED, "\x00badflag", "\x00rawflag"])
        else:
            base = base.explode("\x00len")
    if inner == pl.String:
        # The reader tags a number among text (a column of mixed kinds); a list's elements are the file's own.
        value = pl.col("\x00len") if listed else pl.col("\x00len").str.strip_prefix(JSON_TAG)
        numeric = value.str.strip_chars().cast(pl.Float64, strict=False)
    elif inner.is_numeric() or inner == pl.Null:
        numeric = pl.col("\x00len").cast(pl.Float64)
    else:
        raise _column_of_another_kind(base, path, fmt, frame, length_col, inner, dtype)
    base = base.with_columns(numeric.alias("\x00num"))
    bad = (
        pl.col(C.PROMPT_ID).is_null()
        | pl.col("\x00idproblem").is_not_null()
        | pl.col("\x00badflags")
        | pl.col("\x00badflag").fill_null(False)
        | pl.col("\x00badepoch")
        | pl.col("\x00num").is_null()
        | pl.col("\x00num").is_nan()
        | (pl.col("\x00num") < 0)
        | (pl.col("\x00num") > C.MAX_TOKEN_COUNT)
        | (pl.col("\x00num") != pl.col("\x00num").floor())
    )
    flagged = base.with_columns(bad.alias("\x00bad"))
    if flagged["\x00bad"].any():
        bad_rows = flagged.filter(pl.col("\x00bad"))
        if on_bad_row == "skip":
            for where in bad_rows["\x00where"].to_list():
                report.skip(_length_location(path, fmt, where, frame))
            flagged = flagged.filter(~pl.col("\x00bad"))
        else:
            first = bad_rows.row(0, named=True)
            where = _length_location(path, fmt, first["\x00where"], frame)
            if first["\x00idproblem"] is not None and first["\x00idproblem"] != "is missing":
                raise InputError(id_problem_message(where, id_col, first["\x00idproblem"], flag=id_flag))
            if first[C.PROMPT_ID] is None:
                reason = f"column {id_col!r} (the prompt id) is missing"
            elif first["\x00badflag"] and flags_listed:
                raw_flag = first["\x00rawflag"]
                # A number among true/false is read as its JSON text (a column of mixed kinds): shown as a number.
                numeric = re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", raw_flag)
                shown_flag = raw_flag if numeric else repr(raw_flag[:40])
                reason = f"column {C.TRUNCATED!r} holds {shown_flag} in its list of flags, not true or false"
            elif first["\x00badflags"] and flags_listed:
                reason = f"column {C.TRUNCATED!r} does not hold one flag per length in {length_col!r}"
            elif first["\x00badflags"]:
                reason = f"column {C.TRUNCATED!r} is not true or false"
            elif first["\x00badepoch"]:
                raw_epoch = untag_value(str(first["\x00rawepoch"]))
                reason = f"column {C.EPOCH!r} is not an epoch number ({raw_epoch}; epochs count 0, 1, 2, ...)"
            else:
                raw = first["\x00len"]
                shown = str(raw) if listed else untag_value(str(raw))  # a list's elements hold no tags
                value = first["\x00num"]
                if raw is None:
                    reason = f"column {length_col!r} is missing"
                elif (value is None or (isinstance(value, float) and math.isnan(value))) and shown.lstrip().startswith(
                        "["):
                    # Within a list of lengths, a list is an element that is no number ([[1, 2]] beside [7] was
                    # said to be "a list where other rows hold one number": a hostile-input audit).
                    reason = (f"column {length_col!r} holds a list inside its list of lengths ({shown[:40]}): each "
                              "element is one sample's token count" if listed else
                              f"column {length_col!r} holds a list where other rows hold one number (one row per "
                              "sample, or a list per prompt: one form in a file)")
                elif shown in ("true", "false"):
                    reason = f"column {length_col!r} holds {shown}, not a token count"
                elif value is None or (isinstance(value, float) and math.isnan(value)):
                    reason = f"column {length_col!r} is not a number"
                elif value < 0:
                    reason = f"column {length_col!r} is negative ({value:g})"
                elif value > C.MAX_TOKEN_COUNT:
                    reason = f"column {length_col!r} is larger than any response ({value:g} > {C.MAX_TOKEN_COUNT:,})"
                else:
                    reason = f"column {length_col!r} is not a whole token count ({value:g})"
            # A row without an id is not "for prompt id 'None'", as it was said.
            subject = "" if first[C.PROMPT_ID] is None else f" for prompt id {shown_id(first[C.PROMPT_ID])}"
            raise InputError(f"{where}: {reason}{subject}; {BAD_ROW_FIX}")
    if sample_col is not None:
        flagged = _without_repeated_samples(flagged, path, fmt, frame, sample_col, on_bad_row, report)
    return flagged.select(
        C.PROMPT_ID,
        pl.col("\x00num").cast(pl.Int64).alias(C.RESPONSE_TOKENS),
        C.TRUNCATED,
        C.EPOCH,
    )


def _column_of_another_kind(base: pl.DataFrame, path: Path, fmt: str, frame: pl.DataFrame, length_col: str,
                            inner: pl.DataType, dtype: pl.DataType) -> InputError:
    """A length column whose every value is of another kind (true/false, objects), named at its first row and value
    as E18 names one such value among numbers (it was said as the Polars type, "holds Boolean", with no line)."""
    present = base.filter(pl.col("\x00len").is_not_null())
    if not present.height:
        return InputError(f"{path}: length column {length_col!r} holds {dtype}; give whole token counts")
    first = present.row(0, named=True)
    raw = first["\x00len"]
    shown = ("true" if raw else "false") if isinstance(raw, bool) else json.dumps(raw, default=str)[:40]
    kind = "true or false" if inner == pl.Boolean else "an object" if isinstance(inner, pl.Struct) else str(inner)
    subject = "" if first[C.PROMPT_ID] is None else f" for prompt id {shown_id(first[C.PROMPT_ID])}"
    where = _length_location(path, fmt, first["\x00where"], frame)
    return InputError(f"{where}: column {length_col!r} holds {shown}, not a token count{subject}; every value of it "
                      f"is {kind}: give response lengths in tokens, or name the length column")


def sample_column(frame: pl.DataFrame) -> str | None:
    """The column numbering each prompt's samples (`C.SAMPLE_KEYS`, as asp's own probe and emulated rollouts write
    it), or None."""
    by_lower = {c.lower(): c for c in frame.columns}
    name = next((by_lower[key] for key in C.SAMPLE_KEYS if key in by_lower), None)
    if name is None or frame.schema[name].is_integer():
        return name
    # Numbers only: a column of that name holding each response's text repeats itself under greedy decoding.
    values = pl.col(name).cast(pl.String).str.strip_prefix(JSON_TAG)
    numbers = frame.select(values.is_null() | values.str.contains(r"^\s*\d+(\.0*)?\s*$")).to_series()
    return name if frame.schema[name] in (pl.String, pl.Null) and numbers.all() else None


def _without_repeated_samples(flagged: pl.DataFrame, path: Path, fmt: str, frame: pl.DataFrame, sample_col: str,
                              on_bad_row: OnBadRow, report: ReadReport) -> pl.DataFrame:
    """``flagged`` (good rows only) without a row that repeats an earlier one's prompt id, epoch, sample number and
    length: the same sample logged twice (a log written again onto its own end, a resumed run appending what it had
    written before) would count twice in the history's spread and a report's counts, kept without a word (a
    hostile-input round). A bad row: refused, or with ``--on-bad-row skip`` the first of each kept. A sample number
    repeated with another length is another sample (several epochs logged without an epoch column, a review): kept,
    and said."""
    numbered = pl.col("\x00sample").is_not_null()
    keys = [C.PROMPT_ID, C.EPOCH, "\x00sample"]
    same = pl.struct([*keys, "\x00num", C.TRUNCATED])
    repeated = flagged.filter(numbered & same.is_duplicated() & ~same.is_first_distinct())
    if repeated.height and on_bad_row == "skip":
        for where in repeated["\x00where"].to_list():
            report.skip(_length_location(path, fmt, where, frame))
        flagged = flagged.filter(~numbered | same.is_first_distinct())
    elif repeated.height:
        row = repeated.row(0, named=True)
        first = flagged.filter(pl.col(C.PROMPT_ID) == row[C.PROMPT_ID], pl.col("\x00sample") == row["\x00sample"],
                               pl.col(C.EPOCH).eq_missing(row[C.EPOCH])).row(0, named=True)
        where = _length_location(path, fmt, row["\x00where"], frame)
        earlier = _length_location(path, fmt, first["\x00where"], frame)[len(str(path)):].lstrip(": ")
        earlier = f"line {earlier}" if earlier.isdigit() else earlier
        epoch = "" if row[C.EPOCH] is None else f" of epoch {row[C.EPOCH]}"
        sample = untag_value(row["\x00sample"])
        raise InputError(
            f"{where}: prompt id {shown_id(row[C.PROMPT_ID])} sample {sample}{epoch} again, "
            f"of the same length (column {sample_col!r}; first at {earlier}), {repeated.height:,} such "
            f"{'repeat' if repeated.height == 1 else 'repeats'} in all: the same samples logged twice would count "
            "twice; keep each once, or pass --on-bad-row skip to keep the first of each")
    others = flagged.filter(numbered & pl.struct(keys).is_duplicated())
    if others.height:
        report.notes.append(
            f"{path}: {others.height:,} rows share a prompt id and sample number (column {sample_col!r}) "
            + ("" if others[C.EPOCH].null_count() else "and epoch ")
            + "with other lengths: read as samples of their own; if they are several epochs' (a log without an epoch "
            "column), observe each epoch's log with --epoch")
    return flagged


def _mixed_lists_as_text(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """A column of lists the reader kept as JSON text because their elements mix kinds (``[10, true, 30]``:
    `json_records.records_to_frame`) as lists of each element's JSON text (``"10"``, ``"true"``, ``"30"``), so each
    element is judged as a length (or a flag) of its own: a true among lengths is a bad row, not a 1."""
    if frame.schema[column] != pl.String:
        return frame
    col = pl.col(column)
    lists = col.str.starts_with(JSON_TAG + "[")
    if not frame.select(lists.any()).item():
        return frame
    # Lists beside single values (one row a prompt's samples, another one sample): each single value is read as a
    # list of one. Judged as one number a row, the lists were the bad rows: --on-bad-row skip kept 12 rows of 300
    # and dropped the 288 lists, and without it the error named line 1, a good row (a hostile-input round).
    # Flags are read so only where every one is a list, and lengths only where no flag column says otherwise (its
    # flags one a row beside lists of lengths stay the bad rows they were).
    if not frame.select((col.is_null() | lists).all()).item() and (column == C.TRUNCATED or C.TRUNCATED in frame.columns):
        return frame

    def elements(raw: str | None) -> list[str | None] | None:
        if raw is None:
            return None
        if not raw.startswith(JSON_TAG + "["):  # one value: one sample
            return [raw[len(JSON_TAG):] if raw.startswith(JSON_TAG) else raw]
        return [v if v is None or isinstance(v, str) else json.dumps(v) for v in json.loads(raw[len(JSON_TAG):])]

    decoded = [elements(v) for v in frame[column].to_list()]
    return frame.with_columns(pl.Series(column, decoded, dtype=pl.List(pl.String)))


def _epoch_expr(frame: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """(the ``epoch`` column as int32, null where absent; true where a value is there but is no epoch number)."""
    if C.EPOCH not in frame.columns:
        return pl.lit(None, pl.Int32), pl.lit(False)
    dtype = frame.schema[C.EPOCH]
    raw = pl.col(C.EPOCH)
    if dtype == pl.String:
        number = raw.str.strip_prefix("\x00json:").str.strip_chars().cast(pl.Float64, strict=False)
    elif dtype.is_numeric() or dtype == pl.Null:
        number = raw.cast(pl.Float64)
    else:  # a list, an object: no epoch number
        number = pl.lit(None, pl.Float64)
    bad = raw.is_not_null() & (number.is_null() | number.is_nan() | (number < 0) | (number > C.MAX_TOKEN_COUNT)
                               | (number != number.floor()))
    return pl.when(bad).then(None).otherwise(number).cast(pl.Int32), bad


def _check_truncated_dtype(dtype: pl.DataType, lengths_listed: bool, path: Path) -> None:
    """The ``truncated`` flags must be scalars beside scalar lengths, or lists beside lists of lengths."""
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    castable = inner == pl.Boolean or inner == pl.String or inner == pl.Null or inner.is_numeric()
    if not castable or (listed and not lengths_listed):
        shape = "a list of true/false, one per length" if lengths_listed else "true or false"
        raise InputError(f"{path}: column {C.TRUNCATED!r} holds {dtype}; give {shape} per row")


def _truncated_expr(dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """The ``truncated`` column as booleans (lists of them stay lists), and whether a row's flag (each element of its
    list) is there but unreadable, a bad row (sample): text "true"/"false"/"1"/"0" and the numbers 1 and 0 count; any
    other value is none (a list's 5 was read as "unknown" in silence, where a single flag of 5 was a bad row)."""
    listed = isinstance(dtype, pl.List)
    inner = dtype.inner if listed else dtype  # type: ignore[union-attr]
    # A scalar true among text flags is the reader's tagged JSON text (a list's elements are the file's own).
    value = pl.element() if listed else untag(pl.col(C.TRUNCATED)) if inner == pl.String else pl.col(C.TRUNCATED)
    if inner == pl.String:
        word = value.str.strip_chars().str.to_lowercase()
        flag = pl.when(word.is_in(["true", "1", "yes"])).then(True).when(word.is_in(["false", "0", "no"])).then(False)
        flag = flag.otherwise(None)
    elif inner == pl.Boolean or inner == pl.Null:
        flag = value.cast(pl.Boolean, strict=False)
    else:  # a number is a flag as 1 or 0, as text is; 5, 1.5 and NaN read as true before (a hostile-input round)
        flag = pl.when(value == 1).then(True).when(value == 0).then(False).otherwise(None)
    if listed:
        return pl.col(C.TRUNCATED).list.eval(flag), pl.col(C.TRUNCATED).list.eval(value.is_not_null() & flag.is_null())
    return flag, pl.col(C.TRUNCATED).is_not_null() & flag.is_null()


def _length_location(path: Path, fmt: str, where: int, frame: pl.DataFrame) -> str:
    """``where`` is the line itself where the line-by-line parser read the file, else the row."""
    if "\x00line" in frame.columns:
        return f"{path}:{where}"
    return row_location(path, frame, where, fmt)


def check_history_epochs(epochs: object) -> int | None:
    """``--history-epochs``: None, or a whole number of at least 1, NumPy's too (from Python "1" was a TypeError from
    a comparison deep in the history's reading, and True was taken as 1)."""
    epochs = whole(epochs)
    if epochs is not None and (not isinstance(epochs, int) or isinstance(epochs, bool)):
        raise SettingsError(f"--history-epochs must be a whole number of epochs, at least 1 (got {epochs!r}); leave "
                            "it out to use every epoch")
    if epochs is not None and epochs < 1:
        raise SettingsError(f"--history-epochs must be at least 1 (got {epochs!r}); leave it out to use every epoch")
    return epochs


def latest_epochs(frame: pl.DataFrame, epochs: int, paths: Sequence[Path]) -> pl.DataFrame:
    """The samples of the history's last ``epochs`` epochs (by its ``epoch`` column): `asp schedule --history-epochs`,
    for a policy whose lengths move as training goes on (a newcomer's run whose lengths grew 1.4x an epoch had its
    third epoch predicted at 0.68x, every epoch of history weighed alike).

    Samples without an epoch beside numbered ones count as epoch -1, before the first: a probe observed before
    training (docs/probe.md), which an OpenRLHF newcomer's `--history-epochs 1` refused beside two epochs' logs.

    Raises
    ------
    SettingsError
        ``epochs`` below 1, or no history row with an epoch (nothing says which epoch is the latest).
    """
    epochs = check_history_epochs(epochs)
    if not frame.height:
        return frame
    if frame[C.EPOCH].null_count() == frame.height:
        names = ", ".join(str(p) for p in paths)
        raise SettingsError(f"--history-epochs {epochs}: no sample of {names} says its epoch, so the latest cannot "
                            "be told; observe each log with --epoch E (asp observe), or leave --history-epochs out")
    last = int(frame[C.EPOCH].max())  # type: ignore[arg-type]
    return frame.filter(pl.col(C.EPOCH).fill_null(-1) > last - epochs)
