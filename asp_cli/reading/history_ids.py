"""What a history's prompt ids name, and whether a schedule's ids name the same prompts.

A history matches prompts by id alone. Where the ids are row numbers (a file without an id column: verl's
multi-source parquet, whose own index sits in ``extra_info``), they name the same prompts only while the file
keeps its rows: one row dropped or added before the next epoch, and every later row took another prompt's
lengths without a word (a newcomer's three-epoch run, 2026-12-05: predicted against observed Spearman 0.001,
where stable ids gave 0.98). And a history observed by row numbers read beside the file's id column
(`asp schedule --id-key extra_info.index`) matches numbers that name other prompts (a probe's calibration read
gsm8k x4.24 against the true x1.8, unwarned).

So `asp observe` records, with each log it adds, what its ids name (`ids_of`: the schedule's or the dataset's
files, by fingerprint, and their id column or row numbers), and `asp schedule --history` compares that record
with its own input (`id_warnings`). A history made by other tools, or observed without --schedule or --dataset,
has no record, and nothing is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asp_cli.output import as_given
from asp_cli.settings import ScheduleSettings

# How `ReadReport.columns_used` names the id of a file without an id column.
ROW_NUMBER = "(row number)"
HISTORY_METADATA_KEY = b"asp.history"  # where an asp history lists its logs


def ids_of(inputs: list[dict[str, Any]], columns_used: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The record of what ids name: the files (``inputs``: name and fingerprint each) and their id column, the
    column's name or `ROW_NUMBER` (``columns_used``: per file path, as `ReadReport.columns_used` has it; a
    schedule's metadata keeps both). Empty where nothing says."""
    ids = sorted({used["id"] for used in columns_used.values() if isinstance(used.get("id"), str) and used["id"]})
    if not inputs or not ids:
        return {}
    return {"inputs": [{"name": str(i.get("name")), "fingerprint": str(i.get("fingerprint"))} for i in inputs],
            "id": ROW_NUMBER if ROW_NUMBER in ids else ids[0]}


def ids_of_log(used: dict[str, Any] | None) -> dict[str, Any]:
    """The record of a log that names its prompts by a column of its own rows (``used``: its `columns_used`), read
    without --dataset or --schedule: verl's generation output of a probe (`asp probe --format verl`), which keeps
    the dataset's columns. Its id is that column, of no file asp can fingerprint (``of_log``). A verl newcomer's
    probe without --id-key got asp probe's ``prompt_id`` (the dataset's row numbers) and a schedule with ``--id-key
    extra_info.index`` then gave each probed length to another prompt, unwarned (`id_warnings`)."""
    column = (used or {}).get("id")
    # extra_info.prompt_id is asp's copy of whichever id the probe read (`response_text.generation_ids`): no column
    # of the prompts to compare.
    return ({"inputs": [], "id": column, "of_log": True} if isinstance(column, str) and column
            and column != "extra_info.prompt_id" else {})


def schedule_ids(metadata: dict[str, Any]) -> dict[str, Any]:
    """The record of what a schedule's ids name (its metadata's ``inputs`` and ``columns_used``), or {}: what
    `asp observe --schedule` records, and what `asp export` writes into its file's metadata (``schedule_ids``) for
    logs observed against the export alone (`asp_cli.reading.exported.export_ids`)."""
    inputs, used = metadata.get("inputs"), metadata.get("columns_used")
    if not (isinstance(inputs, list) and isinstance(used, dict)):
        return {}
    return ids_of([i for i in inputs if isinstance(i, dict)], {k: v for k, v in used.items() if isinstance(v, dict)})


def ids_observed_against(schedule_metadata: dict[str, Any] | None, dataset_paths: list[Path], dataset_report: Any) -> dict[str, Any]:
    """The record for logs observed against a dataset (``dataset_report``: its `ReadReport`; its ids are those the
    logs' rows were matched to) or else a schedule (its metadata's ``inputs`` and ``columns_used``)."""
    settings = (schedule_metadata or {}).get("settings") or {}
    seed, epochs = settings.get("seed"), settings.get("epochs")
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    # The schedule's epoch count beside its seed: one epoch deals one, so a log of several numbered against it is
    # others' too (`schedule_epochs` counts them)
    dealt = {"schedule_epochs": epochs} if isinstance(epochs, int) and not isinstance(epochs, bool) else {}
    if dataset_paths and dataset_report is not None:
        dataset_report.settle()
        record = ids_of([{"name": p.name, "fingerprint": dataset_report.fingerprints.get(str(p))}
                         for p in dataset_paths], dataset_report.columns_used)
        # Counted against a schedule, the logs replayed it, whatever file matched their text (`framework_dealt`).
        return {**record, "schedule_seed": seed, **dealt} if record and seed is not None else record
    if schedule_metadata:
        record = schedule_ids(schedule_metadata)
        if record:
            if seed is not None:
                # The seed of the schedule the logs replayed: a later schedule made with it deals the same shuffles
                # (`seed_warnings`), whatever the epochs are numbered.
                record.update(schedule_seed=seed, **dealt)
            return record
    return {}


def seed_warnings(history: list[Path], seed: int, unnumbered_run: bool = False) -> list[str]:
    """Where a history was observed against a schedule made with ``seed`` (`asp observe --schedule` records it): a
    schedule for a later epoch made with that seed deals the same shuffles, the same train batches (a constant
    `--seed 42` every epoch escaped the check by epoch numbers). Such logs are judged by this check alone: the check
    by epoch numbers leaves them out (`schedule_epochs`), since another seed deals none of their shuffles.

    ``unnumbered_run``: the history numbers no epoch and matched most of these prompts (an epoch's log; a probe
    covers a few). Where no record names its schedule's seed (a framework's own log, or one observed with
    --dataset) and ``seed`` is the default, nothing tells which seed its rollout's
    schedule had: a slime newcomer's epoch 2, made from the raw epoch-1 log at the default seed, put 89% of the
    prompts in the same train step again without a word. Not where every log is a framework's own dump its
    framework dealt (`framework_dealt`: verl's shuffles, no asp schedule's)."""
    records = [record for path in history for record in recorded_ids(path)]
    for path in history:
        if any(record.get("schedule_seed") == seed for record in recorded_ids(path)):
            return [f"{path}: observed against a schedule made with --seed {seed}, as this one is: it deals that "
                    "schedule's shuffles again (the same train batches); give each epoch its own seed"]
    if all_framework_dealt(history):
        return []
    if unnumbered_run and seed == ScheduleSettings.seed and not any("schedule_seed" in r for r in records):
        return [f"--history numbers no epoch and records no schedule seed, and this schedule has the default "
                f"--seed {seed}: if the rollout it logged replayed a schedule made with --seed {seed} too, this one deals its "
                "shuffles again (the same train batches); give each epoch its own seed, e.g. --seed 1 (the epoch's "
                "number; `asp observe --schedule` records the seed and checks it)"]
    return []


def reused_seed_warnings(existing: Any, seen: list[dict[str, Any]], record: dict[str, Any], added: Any,
                         schedule_epochs_count: int) -> list[str]:
    """Where logs added against a one-epoch schedule of seed S (``record``, as `ids_observed_against` made it;
    ``schedule_epochs_count``: the schedule's ``--epochs``) are numbered other epochs than those the history
    (``existing`` rows, ``seen`` logs, as `read_history` returns them) holds from logs observed against a schedule
    of seed S. Such a schedule deals the shuffles of S's epoch 0 whatever the run's epoch, so either these samples
    were counted against another schedule than the one their run replayed, and the record now names a wrong seed
    (slime's hook appends every epoch to one log, observed with `--schedule` each time: given epoch 0's again, it
    was taken without a word, and `asp schedule --history` then checked --seed against that seed), or the run
    trained those epochs' batches again. Said too where the logs added hold several epochs themselves (``existing``
    None or empty: a fresh history), of which the same is true. A schedule of several epochs deals each its own
    ([S, epoch]): none said."""
    import polars as pl

    seed = record.get("schedule_seed") if isinstance(record, dict) else None
    if not isinstance(seed, int) or schedule_epochs_count != 1 or added is None or not added.height:
        return []
    new = sorted(int(e) for e in added["epoch"].drop_nulls().unique())
    earlier: set[int] = set()
    for name in sorted({str(e.get("name")) for e in seen} if existing is not None and existing.height else ()):
        entries = [e for e in seen if str(e.get("name")) == name]
        epochs = existing.filter(pl.col("log") == name)["epoch"]
        kept = [e.get("rows_kept") for e in entries]
        # A log appended over several epochs is listed once per append, its rows in that order: each its own share.
        exact = all(isinstance(k, int) for k in kept) and sum(kept) == epochs.len()  # type: ignore[arg-type]
        start = 0
        for entry, count in zip(entries, kept):
            rows = epochs.slice(start, count) if exact else epochs
            start += count if exact else 0
            if isinstance(entry.get("ids"), dict) and entry["ids"].get("schedule_seed") == seed:
                earlier.update(int(e) for e in rows.drop_nulls().unique())
    earlier -= set(new)
    if len(new) > 1 and not earlier:
        # One log of several epochs (slime's hook's, grown over the run, observed once at its end) counted against one
        # one-epoch schedule: the record named that seed for every epoch, and `asp schedule --history` then let a
        # schedule of an earlier epoch's seed deal its shuffles again without a word (a hostile review, 2026-12-07).
        held = (f"{new[0]} to {new[-1]}" if len(new) > 3 and new[-1] - new[0] == len(new) - 1 else
                ", ".join(map(str, new[:5])) + ", ..." if len(new) > 6
                else f"{', '.join(map(str, new[:-1]))} and {new[-1]}")
        return [f"these samples hold epochs {held}, all counted against one "
                f"one-epoch schedule made with --seed {seed}, and such a schedule deals the same train batches every "
                "epoch: if each epoch's run replayed its own schedule, observe each epoch's log against that one "
                "(asp observe LOG --schedule ITS-SCHEDULE --epoch E) into a new history (the seed recorded here, for "
                "every epoch, is what `asp schedule --history` checks --seed against); if not, those epochs trained "
                "the same batches again: give each epoch's schedule its own --seed"]
    if not new or not earlier:
        return []
    shown = ", ".join(str(e) for e in sorted(earlier)[:5]) + (", ..." if len(earlier) > 5 else "")
    return [f"these samples (epoch {', '.join(map(str, new))}) are counted against a one-epoch schedule made with "
            f"--seed {seed}, as the history's samples of epoch {shown} were, and such a schedule deals the same train "
            "batches every epoch: if their run replayed another schedule (the one its export was made from), observe "
            "them against that one into the history as it was before this append (the seed recorded here is what "
            "`asp schedule --history` checks --seed against); if not, that epoch trained an earlier one's batches "
            "again: give each epoch's schedule its own --seed"]


# The formats `asp observe` records for a framework's own rollout dumps (verl's `trainer.rollout_data_dir`: text,
# no prompt id), as `asp_cli.integrate.observe.LOG_FORMATS` names them.
FRAMEWORK_DUMP_FORMATS = ("verl_v1_dump", "verl_legacy_dump")


def framework_dealt(entry: dict[str, Any]) -> bool:
    """Whether a history's log (``entry``, as `asp observe` lists it) holds epochs its framework dealt, not an asp
    schedule: a framework's own dump (`FRAMEWORK_DUMP_FORMATS`) observed against a --dataset that is not an asp
    export, without --schedule (its record names the dataset's files and no schedule seed). verl then read that
    dataset itself, and its sampler shuffled each epoch; a dump matched to an export (no record, or the schedule's)
    or counted against a schedule (its seed recorded) may be an asp schedule's replay, and a log of ids and counts
    (OpenRLHF's, slime's length logs) may be one whatever it was observed against."""
    record = entry.get("ids")
    return (entry.get("format") in FRAMEWORK_DUMP_FORMATS and isinstance(record, dict)
            and bool(record.get("inputs")) and "schedule_seed" not in record)


def seed_recorded(entry: dict[str, Any]) -> bool:
    """Whether a history's log (``entry``, as `asp observe` lists it) records the seed of the schedule it replayed
    (`asp observe --schedule`: its record's ``schedule_seed``). Its shuffles were drawn from that seed
    (``numpy.random.default_rng([seed, epoch])``), so only a schedule of the same seed deals them again, which the
    exact check (`seed_warnings`) says, whatever the epochs are numbered."""
    record = entry.get("ids")
    return isinstance(record, dict) and isinstance(record.get("schedule_seed"), int)


def schedule_epochs(history: list[Path], frame: Any) -> int | None:
    """The latest epoch of the history an asp schedule of an unknown seed may have dealt, for the check of
    ``--seed`` by epoch numbers (`epoch_seed_warnings`); None where there is none.

    The rule: an epoch counts unless every log holding it is known to be a framework's own dump (`framework_dealt`:
    verl's ``rollout_data_dir`` observed with --dataset; the 2026-12-07 false alarm told a verl user whose epochs
    verl shuffled that they were dealt by asp schedules of seeds 0..N) or records the seed of the schedule it
    replayed (`seed_recorded`: the exact check `seed_warnings` judges it; replays of seeds 10-12 over epochs 0-2
    told --seed 1 that it dealt an earlier epoch's shuffles again). Only asp histories list their logs; where any
    file given is not one (another tool's lengths, a log given as it is), nothing tells whose its epochs are, and
    every epoch of ``frame`` (the history as read) counts, as before."""
    import polars as pl

    def known(entry: dict[str, Any]) -> bool:
        return framework_dealt(entry) or seed_recorded(entry)

    latest: int | None = None
    for path in history:
        logs = history_logs(Path(path))
        if not logs:
            epochs = frame["epoch"].drop_nulls() if frame is not None and "epoch" in frame.columns else None
            return int(epochs.max()) if epochs is not None and epochs.len() else None  # type: ignore[arg-type]
        judged = {str(e.get("name")) for e in logs if known(e)} - {
            str(e.get("name")) for e in logs if not known(e)}  # a name two logs share: any unknown counts
        columns = pl.read_parquet_schema(as_given(Path(path)))
        if "epoch" not in columns:
            continue  # no epoch numbered
        rows = pl.read_parquet(as_given(Path(path)), columns=["epoch", *(["log"] if "log" in columns else [])])
        if "log" in rows.columns:  # else no row says its log: every one counts
            rows = pl.concat([rows.filter(~pl.col("log").is_in(sorted(judged))).select("epoch"),
                              *(_several_against_one(rows, logs, name) for name in sorted(judged))])
        epochs = rows["epoch"].drop_nulls()
        if epochs.len():
            latest = max(latest if latest is not None else -1, int(epochs.max()))  # type: ignore[arg-type]
    return latest


def _several_against_one(rows: Any, logs: list[dict[str, Any]], name: str) -> Any:
    """The ``epoch`` rows of the log ``name`` (``rows``: the history's ``epoch`` and ``log``) that one append counted
    against a one-epoch schedule while numbering several epochs (`reused_seed_warnings` says so at the observe): such
    a schedule dealt one of them at most, so its seed record says nothing of the others (a log of epochs 0-2 against
    seed 2's schedule let --seed 1 through, a hostile review 2026-12-07). Each append its own share by ``rows_kept``."""
    import polars as pl

    entries = [e for e in logs if str(e.get("name")) == name]
    epochs = rows.filter(pl.col("log") == name).select("epoch")
    kept = [e.get("rows_kept") for e in entries]
    exact = all(isinstance(k, int) for k in kept) and sum(kept) == epochs.height  # type: ignore[arg-type]
    parts, start = [], 0
    for entry, count in zip(entries, kept):
        share = epochs.slice(start, count) if exact else epochs
        start += count if exact else 0
        if (seed_recorded(entry) and entry["ids"].get("schedule_epochs") == 1
                and share["epoch"].drop_nulls().n_unique() > 1):
            parts.append(share)
    return pl.concat(parts) if parts else epochs.clear()


def all_framework_dealt(history: list[Path]) -> bool:
    """Whether every file of ``history`` is an asp history whose every log is `framework_dealt`."""
    listed = [history_logs(Path(path)) for path in history]
    return bool(listed) and all(listed) and all(framework_dealt(e) for logs in listed for e in logs or [])


def epoch_seed_warnings(history: list[Path], frame: Any, seed: int, max_seed: int) -> list[str]:
    """Where a schedule's ``seed`` is at most the latest epoch an asp schedule of an unknown seed may have dealt
    (`schedule_epochs`; logs that record their schedule's seed are `seed_warnings`' to judge):
    an OpenRLHF newcomer's epoch-by-epoch loop kept the default seed, every epoch the same train batches. Said
    with a seed to take (the epoch's number, or any the history's epochs were not made with at ``max_seed``)."""
    latest = schedule_epochs(history, frame)
    if latest is None or seed > latest:
        return []
    return [f"the history holds epochs up to {latest}, and this schedule has --seed {seed}: a schedule made with an "
            "earlier epoch's seed deals that epoch's shuffles again (the same train batches every epoch); give each "
            "epoch its own seed, " + (f"e.g. --seed {latest + 1} (the epoch's number)" if latest < max_seed
                                      else "one no epoch of the history was made with")]


def history_logs(path: Path) -> list[dict[str, Any]] | None:
    """The logs an asp history lists as observed (`asp observe`'s entries: name, fingerprint, rows, ...), or None for
    a file that is not an asp history (not Parquet, or another tool's lengths)."""
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(as_given(path)).metadata or {}).get(HISTORY_METADATA_KEY)
        logs = json.loads(raw).get("logs", []) if raw else None
    except Exception:  # noqa: BLE001 - not Parquet, or other metadata: a lengths file of another tool
        return None
    return [e for e in logs if isinstance(e, dict)] if isinstance(logs, list) else None if logs is None else []


KNOWN_FORMAT_MAJOR = 1  # the history format this asp writes (`asp_cli.integrate.history_file.HISTORY_FORMAT_VERSION`)


def metadata_problem(raw: bytes | None) -> str | None:
    """What is wrong with an asp history's metadata (``raw``, the value of `HISTORY_METADATA_KEY`), or None where it
    is sound or absent: not JSON, a ``format_version`` that is not a version text of this asp's format (``"1.0"``,
    ``"MAJOR.MINOR"`` as the schedule reader's `parse_version` reads it; a float 1.0 or ``"1.0.0"`` is a hand edit;
    ``"9.0"`` names a newer format: "newer"), or a list of logs whose entries lack a
    fingerprint (text) or hold a name or rows fingerprint that is not text. Its list of logs is what keeps a log
    from counting twice (`asp observe --append` refuses it, E65/E78; `asp schedule --history` warns that the
    double-count checks are off): a hand-edited ``[{"path": 5}]`` was appended to, exit 0 (a hostile-input round)."""
    if not raw:
        return None
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not JSON"
    if not isinstance(document, dict):
        return "not a JSON object"
    if "format_version" in document:  # none: read as this format, as before (hand-made metadata)
        from asp_cli.schedule_format import format_version_problem, parse_version

        # The schedule reader's rule, "MAJOR.MINOR" (a "1.0.0" or "1" was read as format 1).
        version, parsed = document["format_version"], parse_version(document["format_version"])
        if parsed is None:
            return format_version_problem(version)
        if parsed[0] > KNOWN_FORMAT_MAJOR:
            return f"newer: format {version}"
        if parsed[0] != KNOWN_FORMAT_MAJOR:
            return f"format {version}, which no asp writes"
    logs = document.get("logs")
    if not isinstance(logs, list):
        return "no list of the logs observed"
    for i, entry in enumerate(logs):
        if not (isinstance(entry, dict) and isinstance(entry.get("fingerprint"), str)
                and all(isinstance(entry.get(key), (str, type(None))) for key in ("rows_fingerprint", "name"))):
            return f"log entry {i} has no fingerprint (text) or a name that is not text: {json.dumps(entry)[:60]}"
    return None


def metadata_warning(path: Path) -> str | None:
    """What a reader of lengths (`asp schedule --history`, `asp report --lengths`) says of an asp history whose
    metadata is damaged or of an unknown format (`metadata_problem`): its rows are read, but the checks that keep a
    log from counting twice, which need its list of logs, are off (before, they were skipped in silence)."""
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(as_given(path)).metadata or {}).get(HISTORY_METADATA_KEY)
    except Exception:  # noqa: BLE001 - not Parquet: no asp history
        return None
    problem = metadata_problem(raw)
    if problem is None:
        return None
    said = (f"an asp history of {problem.removeprefix('newer: ')}, newer than this asp reads" if
            problem.startswith("newer: ") else f"damaged asp history metadata ({problem})")
    return (f"{path}: {said}, so the checks that keep a log from counting twice are off for it; write the history "
            "again from its logs (asp observe LOGS... -o new.parquet) if another file given may hold the same samples")


def recorded_ids(path: Path) -> list[dict[str, Any]]:
    """The distinct records of an asp history's logs (`ids_of`, as `asp observe` wrote them), in their order;
    none for a file that is not an asp history or whose logs have no record."""
    logs = history_logs(path) or []
    records: list[dict[str, Any]] = []
    for entry in logs:
        record = entry.get("ids") if isinstance(entry, dict) else None
        # Each input a record names is an object (name, fingerprint): a hand-edited `[1]` was an internal error
        # (AttributeError, exit 70) in `asp schedule --history`; such a record says nothing, as none does.
        if (isinstance(record, dict) and isinstance(record.get("inputs"), list)
                and all(isinstance(i, dict) for i in record["inputs"]) and record not in records):
            records.append(record)
    return records


def id_warnings(history: list[Path], fingerprints: dict[str, str], columns_used: dict[str, dict[str, str]]) -> list[str]:
    """Where a history's recorded ids (`recorded_ids`) name other prompts than this input's ids do: row numbers of
    another version of the file, row numbers read against an id column, or an id column read against row
    numbers. ``fingerprints`` and ``columns_used`` are this input's, per file (`ReadReport`)."""
    mine = {str(used.get("id")) for used in columns_used.values() if used.get("id")}
    if not mine:
        return []
    numbered = ROW_NUMBER in mine
    columns = sorted(mine - {ROW_NUMBER})
    prints = set(fingerprints.values())
    warnings = []
    for path in history:
        for record in recorded_ids(path):
            names = ", ".join(sorted({str(i.get("name")) for i in record["inputs"]})[:3])
            theirs = record.get("id")
            if record.get("of_log"):  # a column of the log's own rows (`ids_of_log`): only its name is known
                if columns and theirs not in columns:
                    warnings.append(
                        f"{path}: its lengths name prompts by the column {theirs} of the log itself (verl's generation "
                        f"output of a probe, as observed), and these prompts' ids are the column {columns[0]}: the "
                        "two name other prompts" + (
                            " (asp probe adds prompt_id, the dataset's row number, where the dataset has no id "
                            f"column): make the probe with asp probe --id-key {columns[0]} and generate and observe it "
                            "again, or schedule without --id-key" if theirs == "prompt_id" else
                            f": pass --id-key {theirs} where these prompts hold that column, or observe the log again "
                            "with --dataset naming these prompts' own files"))
                continue
            same_files = {str(i.get("fingerprint")) for i in record["inputs"]} == prints
            if theirs == ROW_NUMBER and not numbered:
                warnings.append(
                    f"{path}: its lengths name prompts by row number (of {names}, as observed), and these prompts' "
                    f"ids are the column {columns[0]}: the numbers name other prompts; observe again against the "
                    f"file these prompts come from, with --dataset-id-key {columns[0]} (or --schedule of a schedule "
                    f"made with --id-key {columns[0]})"
                    + ("" if same_files else f"; the history was observed against other files ({names}), which may "
                       f"not have that column"))
            elif theirs == ROW_NUMBER and not same_files:
                warnings.append(
                    f"{path}: its lengths name prompts by row number of another version of {names} (other bytes), "
                    "and these prompts' ids are row numbers too: if rows were added, removed or reordered since, "
                    "each row after the change has another prompt's lengths; give the file an id column and name it "
                    "with --id-key, or observe by prompt text (asp observe LOG --dataset THIS-FILE)")
            elif theirs == ROW_NUMBER and numbered and [str(i.get("fingerprint")) for i in record["inputs"]] != [
                    str(f) for f in fingerprints.values()]:  # the same files listed in another order (a dataset's
                # shards given the other way round): numbered on, every row of the later files had another's lengths
                warnings.append(
                    f"{path}: its lengths name prompts by row number of the same files in another order "
                    f"({', '.join(str(i.get('name')) for i in record['inputs'])}, as observed; here "
                    f"{', '.join(Path(name).name for name in fingerprints)}): the numbers name other prompts; give the "
                    "files in the order observed, or observe the log again with --dataset in this order")
            elif theirs not in (None, ROW_NUMBER) and numbered and not columns and same_files:
                warnings.append(
                    f"{path}: its lengths name prompts by the column {theirs} (of {names}, as observed), and these "
                    f"prompts' ids are row numbers: the ids name other prompts; pass --id-key {theirs}")
            elif theirs not in (None, ROW_NUMBER) and numbered and not columns:
                # Other files: these prompts may not have that column (a newcomer observed the probe log against
                # `asp probe`'s output, whose added prompt_id is the dataset's row number, and was told to pass
                # --id-key prompt_id, which the dataset then refused).
                warnings.append(
                    f"{path}: its lengths name prompts by the column {theirs} of other files ({names}, as observed), "
                    "and these prompts' ids are row numbers, so nothing says the ids name these prompts; observe the "
                    "log again with --dataset naming these prompts' own files"
                    + (" (`asp probe`'s output is not the dataset: the prompt_id it adds is the dataset's row number)"
                       if theirs == "prompt_id" else f", or pass --id-key {theirs} where they hold that column"))
    return warnings


def row_numbered(report: Any) -> tuple[list[str], str | None]:
    """The prompt files a read (``report``: its `ReadReport`) numbered by row, having no id column, and the first
    field their rows hold that looks like an id (`reading.prompts.NESTED_ID_KEYS`), for `unmatched_warnings`: of a
    single file only (`id_hint`)."""
    names = [Path(name).name for name, used in report.columns_used.items() if used.get("id") == ROW_NUMBER]
    hint = next((c["id_hint"] for c in id_hints(report).values() if c.get("id_hint")), None)
    return names, hint


def id_hints(report: Any) -> dict[str, dict[str, Any]]:
    """``report.metadata_columns`` with its id hints kept only where one file was read: each is unique within its
    file, and verl numbers each source's `extra_info.index` from 0, so over two files the hint named ids that
    repeat, which `--id-key` then refused (an agent newcomer's round)."""
    single = len(report.columns_used) == 1
    return {name: {k: v for k, v in used.items() if k != "id_hint" or single}
            for name, used in report.metadata_columns.items()}


def unmatched_warnings(prompt_ids: Any, history: Any, flag: str = "--history-id-key",
                       unnamed: list[str] | None = None, id_hint: str | None = None) -> list[str]:
    """What a history (a length frame with ``prompt_id``) holds for no prompt of ``prompt_ids`` (a Polars Series):
    every id (its lengths change nothing), or some (their samples ignored). One rule for `asp schedule`, `asp
    predictor predict` and `asp predictor eval` (the two were silent: a history of another dataset read "0 from
    history" without a word).

    ``unnamed``: the prompt files read without an id column (their ids are row numbers), with ``id_hint`` a field
    their rows hold that looks like one (`reading.prompts.NESTED_ID_KEYS`): where no id matched, the likely fix
    is the prompts' --id-key, and it is said first (a slime newcomer was told to check --history-id-key)."""
    import polars as pl

    if history is None or not history.height:
        return []
    from asp_cli.reading.id_forms import near_misses

    ids = history["prompt_id"].unique(maintain_order=True)
    prompt_ids = pl.Series(prompt_ids)
    strays = ids.filter(~ids.is_in(prompt_ids.implode()))
    unknown = strays.len()
    # Ids written another way (spaces, a number's form) match nothing, and the fix is the files, not a flag.
    near = near_misses(strays, prompt_ids) if unknown and not unnamed else None  # row numbers: --id-key's fix
    alike = near.clause("in --history") if near else ""
    if unknown == ids.len() and unnamed and not near:
        return [f"none of the {ids.len():,} prompt ids in --history is among the prompts, so every length comes from "
                f"the model: {', '.join(unnamed[:3])} {'has' if len(unnamed) == 1 else 'have'} no id column, so "
                "each prompt's id is its row number; name the prompts' id column with --id-key"
                + (f" (e.g. --id-key {id_hint}, which the rows hold)" if id_hint else "")
                + f", or check {flag}"]
    if unknown == ids.len():
        return [f"none of the {ids.len():,} prompt ids in --history is among the prompts, so every length comes from "
                "the model" + (alike if near else f"; check {flag}, or that the history is of this dataset")]
    if unknown:
        return [f"{unknown:,} of the {ids.len():,} prompt ids in --history are not among the prompts (their samples "
                "are ignored)" + alike]
    return []
