"""The history file `asp observe` writes and appends to: one row per observed sample (`HISTORY_SCHEMA`), and in
its Parquet metadata the logs already ingested, whose fingerprints keep `--append` from adding a log twice.

Read back for `--append`, it is checked as `asp schedule --history` checks it (`asp_cli.reading.read_lengths`): a
hand-edited history of fractional or out-of-range lengths was appended to, its 12.7 written back as 12, which the
schedule then took (a hostile-input audit, 2026-12-05). A history with columns asp does not write, of a newer
format, or whose list of logs is missing is refused rather than rewritten without them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import __version__
from asp_cli.errors import InputError, counted, shown_id
from asp_cli.output import as_given
from asp_cli.reading.history_ids import FRAMEWORK_DUMP_FORMATS, HISTORY_METADATA_KEY, metadata_problem

HISTORY_SCHEMA: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "response_tokens": pl.Int64(),
    "truncated": pl.Boolean(),
    "epoch": pl.Int32(),
    "log": pl.String(),
}
METADATA_KEY = HISTORY_METADATA_KEY
HISTORY_FORMAT_VERSION = "1.0"


def history_schema(path: Path) -> Any:
    """The Arrow schema of a history file, read from its footer alone.

    Raises
    ------
    InputError
        When the file is not Parquet or lacks the history columns.
    """
    import pyarrow.parquet as pq

    from asp_cli import limits

    source = as_given(path)  # a name PyArrow cannot take is said as such (E127), not as a damaged history
    try:
        schema = pq.read_schema(source)
    except Exception as exc:  # noqa: BLE001 - not Parquet, or damaged
        if limits.PARQUET_TOO_DEEP in str(exc):
            raise limits.parquet_depth_error(str(path), InputError) from None
        with open(path, "rb") as handle:  # Parquet's magic: a history cut short, not another file to keep
            parquet = handle.read(4) == b"PAR1"
        raise InputError(f"{path}: not a Parquet history file" + (" (damaged or cut short?)" if parquet else "")
                         + "; --append needs a history `asp observe` wrote"
                         + (": rebuild it with --force from every log" if parquet else
                            ": name a new output, or that history")) from None
    missing = [c for c in ("prompt_id", "response_tokens") if c not in schema.names]
    if missing:
        raise InputError(f"{path}: not an asp history (no column {shown_id(missing[0])}); write to a new file instead")
    limits.check_parquet_depth(schema, str(path), InputError)
    return schema


def read_history(path: str | Path) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
    """Read a history file written by `observe`: its rows and the list of logs ingested so far.

    Raises
    ------
    InputError
        When the file is not Parquet, lacks the history columns or holds others, holds a row `asp schedule
        --history` refuses, is of a newer format, or its list of logs is damaged or missing.
    """
    from asp_cli import limits
    from asp_cli.reading import read_lengths

    path = Path(path)
    schema = history_schema(path)
    try:
        read_lengths([path])  # every row as `asp schedule --history` checks it (its error names the row)
    except InputError as exc:
        said = str(exc).split("; fix the row")[0]
        raise InputError(f"{said}; a damaged history is not appended to: fix it, or observe into a new file") from None
    extra = [name for name in schema.names if name not in HISTORY_SCHEMA]
    if extra:
        raise InputError(f"{path}: holds columns an asp history does not ({', '.join(extra[:3])}), which appending would "
                         "drop; observe the new logs into a history of their own and pass both to --history")
    try:
        frame = pl.read_parquet(as_given(path))  # history_schema said what of the name PyArrow cannot take
        for name, dtype in HISTORY_SCHEMA.items():
            if name not in frame.columns:
                frame = frame.with_columns(pl.lit(None, dtype).alias(name))
        frame = frame.select([pl.col(n).cast(t) for n, t in HISTORY_SCHEMA.items()])
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError) as exc:  # damaged pages
        raise InputError(f"{path}: not an asp history ({(str(exc).splitlines() or [''])[0][:160]}); write to a new file "
                         "instead") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    logs: list[dict[str, Any]] = []
    if raw:
        # The list of ingested logs is what keeps `--append` from adding a log twice: damaged, it is refused
        # (read as empty, appending the logs already in it again doubled their samples without a word). A
        # history without the list (made by other tools) has none to keep.
        limits.check_json_depth(raw, f"{path}: asp history metadata", InputError)
        problem = metadata_problem(raw)
        if problem and problem.startswith("newer: "):
            raise InputError(f"{path}: an asp history of {problem.removeprefix('newer: ')}, newer than this asp's "
                             f"{HISTORY_FORMAT_VERSION}; append with the asp that wrote it, or observe into a new file")
        # Each entry's fingerprint is text (a list there crashed the append: "unhashable type"; none at all, or a
        # float format_version, was appended to as if sound: a hostile-input round).
        if problem:
            said = "" if problem.startswith("no list") else f": {problem}"
            raise InputError(f"{path}: damaged asp history metadata (its list of the logs already observed{said}), "
                             "so appending could add a log twice; write a new history from the logs (asp observe "
                             "LOGS... -o new.parquet)")
        listed = json.loads(raw)["logs"]
        logs = listed
    elif "log" in frame.columns and frame["log"].drop_nulls().len():
        # Rows asp observed (each names its log) without the list that keeps a log from being added twice: the
        # metadata was lost, as when a history is saved again by Polars or pandas (a hostile-input round appended a
        # log it held a second time, exit 0).
        raise InputError(f"{path}: an asp history's rows without its list of the logs already observed (its Parquet "
                         "metadata is gone: saved again by another tool?), so appending could add a log twice; write "
                         "a new history from the logs (asp observe LOGS... -o new.parquet), or give this one to "
                         "--history as it is")
    return frame, logs


def write_history(frame: pl.DataFrame, output: Path, logs: list[dict[str, Any]], *, replace: bool = False) -> None:
    """Write a history file atomically with fixed Parquet options and the ingested-log list in metadata.

    An existing ``output`` is replaced only with ``replace`` (`asp_cli.output.atomic_path`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from asp_cli.output import atomic_path

    frame = frame.select([pl.col(n).cast(t) for n, t in HISTORY_SCHEMA.items()])
    document = {"format": "asp.history", "format_version": HISTORY_FORMAT_VERSION, "asp_version": __version__,
                "logs": logs}
    table = frame.to_arrow()
    table = table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type)
                                  for f in table.schema]))
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(document, sort_keys=True).encode()})
    with atomic_path(output, replace=replace) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=3, write_statistics=True,
                       row_group_size=1 << 20)


def already_observed(path: Path, fingerprint: str, history: pl.DataFrame | None, logs: list[dict[str, Any]]) -> str:
    """What `asp observe --append` says of a log the history lists already (the same bytes): not added again, and where
    the history holds fewer of its samples than it kept of them (``rows_kept``: cut down or filtered since), that
    appending cannot restore them (a hostile-input round found a cut history kept as it was, in silence)."""
    entry = next((e for e in logs if e.get("fingerprint") == fingerprint), {})
    kept, name = entry.get("rows_kept"), entry.get("name")
    held = history.filter(pl.col("log") == name).height if history is not None and name else None
    said = f"{path}: already in the history (same bytes); not added again"
    if isinstance(kept, int) and held is not None and held < kept and sum(e.get("name") == name for e in logs) == 1:
        said += (f", though the history holds {held:,} of the {kept:,} samples it took from it (cut down or filtered "
                 "since?): rebuild the history with --force from every log")
    return said


def grown_log(existing: pl.DataFrame, seen: list[dict[str, Any]], part: pl.DataFrame, path: Path,
              epoch_given: bool = False, kind: str = "rollout_log",
              ) -> tuple[pl.DataFrame, list[dict[str, Any]], pl.DataFrame, list[str]]:
    """The history and ``part`` (the log of ``path``'s name read now, its epochs set) where the history took samples
    from an earlier log of that name, with what to say of it.

    Where ``part``'s first rows are those samples, in order (prompt ids and lengths), the log was appended to since:
    slime_length_log.py and openrlhf_length_log.py append every epoch to one file (a slime newcomer's epoch 1 re-added
    epoch 0's 28,320 samples), and a probe resumed writes its new samples after the old. Only the rows after them
    are added, as a log entry of their own beside the earlier ones (whose record names the schedule seed their epoch
    replayed). Without --epoch (``epoch_given``) and an epoch column of the log's own, where the earlier samples carry
    an epoch, the new rows are the next epoch, said: an append that forgot --epoch took them without one, and
    where no earlier sample had an epoch either the log counted as rewritten, its earlier samples and their
    schedule's seed record replaced by the grown log's (a review, 2026-12-07).

    Where ``part`` holds every earlier sample of the same epochs and more in another order (a log rewritten whole as
    it grew), the earlier samples and their log entries are replaced, said. Any other log of that name (another
    epoch's or run's, written over the last; or the log changed) is added whole beside them, said unless it numbers
    only epochs the earlier samples do not have (another epoch's log, as --epoch says) or is a verl rollout dump
    (``kind``, `FRAMEWORK_DUMP_FORMATS`: named by its step, it is that step's, which `dump_steps` says is held twice)."""
    keys = ["prompt_id", "response_tokens", "epoch"]
    before = existing.filter(pl.col("log") == path.name)
    if not before.height:
        return existing, seen, part, []
    had = before["epoch"].unique(maintain_order=True).to_list()
    numbers = [str(e) for e in had if e is not None]
    epochs = (f"epoch{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}" if numbers else "no epoch") + (
        ", some without one" if numbers and None in had else "")
    taken = f"{counted(before.height, 'sample')} ({epochs}) the history took from a log of this name"
    # The log's rows read before: those the history keeps of it and those it left out, of ids the schedule or dataset
    # lacks (the entries' rows count them, rows_kept does not): compared with the history's rows alone, a grown log
    # whose first rows held such an id was added whole, its earlier samples counted again (a review, 2026-12-07).
    listed = [e.get("rows") for e in seen if e.get("name") == path.name]
    read = sum(listed) if all(type(n) is int for n in listed) and sum(listed) >= before.height else before.height
    head = part.head(read)
    if read > before.height:  # the rows left out were those of ids the history holds no row of
        head = head.filter(pl.col("prompt_id").is_in(before["prompt_id"].unique().implode()))
    if part.height > read and head.select(keys[:2]).equals(before.select(keys[:2])):
        new = part.slice(read)
        grew = f"{path} grew by {counted(new.height, 'sample')} since it was observed, after the {taken}"
        numbered = before["epoch"].drop_nulls()
        if epoch_given or new["epoch"].null_count() < new.height:
            how = "as --epoch " + str(new["epoch"][0]) if epoch_given else "with the log's own epochs"
            return existing, seen, new, [f"{grew}: only those are added, {how}"]
        if numbered.len():
            following = int(numbered.max()) + 1  # type: ignore[arg-type]
            return existing, seen, new.with_columns(pl.lit(following, pl.Int32).alias("epoch")), [
                f"{grew}: recorded them as epoch {following}; pass --epoch to number them yourself"]
        return existing, seen, new, [f"{grew}: only those are added, without an epoch as the earlier ones; if they "
                                     "are a later epoch's, pass --epoch E to each append (--epoch 0 where a log is "
                                     "first observed)"]
    count = lambda frame: frame.with_columns(pl.col("epoch").fill_null(-1)).group_by(keys).len()  # noqa: E731
    missing = count(before).join(count(part), on=keys, how="left").filter(
        pl.col("len_right").fill_null(0) < pl.col("len"))
    if part.height > before.height and not missing.height:
        return (existing.filter(pl.col("log") != path.name), [e for e in seen if e.get("name") != path.name], part,
                [f"{path}: holds the {taken} and {part.height - before.height:,} more, in another order (a log "
                 "rewritten as it grew, as a probe run again with --resume rewrites it): the earlier ones replaced, "
                 "not counted twice"])
    if part.height == read and head.select(keys[:2]).equals(before.select(keys[:2])):
        return existing, seen, part, [f"{path}: its rows are those of {path.name}, already in the history, though its "
                                      "bytes differ; if it is the same log saved again, its samples now count twice: "
                                      "observe again without it"]
    now = set(part["epoch"].to_list())
    if None not in now and not now & set(had) or kind in FRAMEWORK_DUMP_FORMATS:
        return existing, seen, part, []  # another epoch's log of the same name, numbered as one; a step's dump
    return existing, seen, part, [
        f"{path}: its rows do not begin with the {taken} (a log written over, or changed?): all {counted(part.height, 'sample')} "
        "added beside those, none replaced; if it is that log rewritten, rebuild the history with --force from "
        "every log, or give each epoch's log its own --epoch"]
