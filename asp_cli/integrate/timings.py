"""The measured timeline of `asp replay`: its columns, its Parquet file, and the figures read from it.

One row per request (one sample of one prompt of one schedule row), in run order then ``seq`` then
``sample``. Times are seconds from the start of that arrangement's run, on the client's
``time.perf_counter``. The Parquet key/value metadata holds one JSON document under ``asp.timeline``: the
format version, how the run was made (servers, engine mode, model, preset), whether it completed, and the
measured and simulated figures of every arrangement (docs/replay.md, "The timeline file").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.errors import InputError, stdin_said
from asp_cli.output import as_given, atomic_path

FORMAT_NAME = "asp.timeline"
FORMAT_VERSION = "1.0"
METADATA_KEY = b"asp.timeline"

COLUMNS: dict[str, pl.DataType] = {
    "arrangement": pl.String(),  # "asp" or a baseline's name
    "run": pl.Int32(),  # position of the arrangement in the run order (0 first)
    "seq": pl.Int64(),  # the row's seq in that arrangement's schedule frame
    "epoch": pl.Int32(),
    "prompt_id": pl.String(),
    "sample": pl.Int32(),  # 0..samples_per_prompt-1
    "instance": pl.Int32(),  # the instance (server position in --servers) that ran it
    "server": pl.String(),
    "minibatch": pl.Int64(),
    "forced_tokens": pl.Int64(),  # the response length asked for (max_tokens = min_tokens)
    "planned_prompt_tokens": pl.Int64(),  # the prompt length the schedule recorded (synthetic prompts: exact)
    "send_s": pl.Float64(),
    "first_token_s": pl.Float64(),  # null without streaming
    "finish_s": pl.Float64(),
    "prompt_tokens": pl.Int64(),  # as the server reported (null if it did not)
    "completion_tokens": pl.Int64(),
    "attempts": pl.Int32(),
    "simulated_send_s": pl.Float64(),  # the simulator's prediction for the same request
    "simulated_finish_s": pl.Float64(),
}
_REQUIRED = ("instance", "send_s", "finish_s", "forced_tokens", "planned_prompt_tokens", "arrangement", "run", "seq",
             "sample")


@dataclass(frozen=True)
class Timeline:
    """A timeline read back: the rows and the metadata document."""

    frame: pl.DataFrame
    metadata: dict[str, Any]
    path: Path | None = None


def empty_timeline() -> pl.DataFrame:
    """A timeline frame without rows."""
    return pl.DataFrame(schema=COLUMNS)


def write_timeline(frame: pl.DataFrame, metadata: dict[str, Any], output: Path, *, replace: bool = False) -> None:
    """Write a timeline atomically, with fixed writer options and sorted JSON metadata (an existing ``output``
    is replaced only with ``replace``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = frame.select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])
    frame = frame.sort(["run", "seq", "sample"])
    document = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **metadata}
    table = frame.to_arrow()
    schema = pa.schema([pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type)
                        for f in table.schema])
    table = table.cast(schema).replace_schema_metadata(
        {METADATA_KEY: json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()})
    with atomic_path(output, replace=replace) as tmp:
        pq.write_table(table, tmp, compression="zstd", compression_level=3, write_statistics=True)


def read_timeline(path: Path) -> Timeline:
    """Read a timeline written by `asp replay` (or any Parquet file with its required columns).

    Raises
    ------
    InputError
        When the file is missing, not Parquet, or lacks the columns asp needs; when its metadata document is
        damaged (a field asp reads of another kind or out of range, E91) or a row is (a time below 0 or past
        `MAX_TIME_S`, a token count past `asp_cli.columns.MAX_TOKEN_COUNT`, an instance the run had not, E92).
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if stdin_said(path):  # `asp calibrate -` was "no such timeline file" (E129)
        raise InputError(stdin_said(path))
    if not path.is_file():  # a folder was "no such timeline file", which sent people looking for a typo
        what = ("is a folder, not a timeline file" if path.is_dir() else
                "is not a regular file (a pipe or a device)" if path.exists() else "no such timeline file")
        raise InputError(f"{path}: {what}; give the file `asp replay -o` wrote")
    source = as_given(path)  # a name PyArrow cannot take is said as such (E127), not as a damaged file
    try:
        schema = pq.read_schema(source)
        frame = pl.read_parquet(source)
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - any unreadable file (a panic too)
        raise InputError(f"{path}: not a readable Parquet timeline ({str(exc).splitlines()[0][:120]}); give the "
                         "file `asp replay -o` wrote") from None
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: not an asp replay timeline (no column {missing[0]!r}); give the file "
                         "`asp replay -o` wrote")
    raw = (schema.metadata or {}).get(METADATA_KEY)
    metadata = {} if raw is None else _checked_metadata(raw, path)
    for name, dtype in COLUMNS.items():
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype).alias(name))
    frame = frame.select([pl.col(n).cast(d, strict=False) for n, d in COLUMNS.items()])
    bad = frame.filter(pl.col("send_s").is_null() | pl.col("finish_s").is_null()
                       | ~pl.col("send_s").is_finite() | ~pl.col("finish_s").is_finite()
                       | (pl.col("finish_s") < pl.col("send_s")))
    if bad.height:
        one = bad.height == 1
        raise InputError(f"{path}: {bad.height:,} {'row has' if one else 'rows have'} a missing or non-finite (NaN, "
                         f"infinite) send or finish time, or finish{'es' if one else ''} before {'it is' if one else 'they are'} "
                         "sent; give the file `asp replay -o` wrote")
    odd = frame.filter(pl.col("first_token_s").is_not_null()
                       & (~pl.col("first_token_s").is_finite() | (pl.col("first_token_s") < pl.col("send_s"))
                          | (pl.col("first_token_s") > pl.col("finish_s"))))
    if odd.height:
        one = odd.height == 1
        raise InputError(f"{path}: {odd.height:,} {'row has' if one else 'rows have'} a first-token time that is not "
                         f"finite or not between {'its' if one else 'their'} send and finish times; give the file "
                         "`asp replay -o` wrote")
    _check_ranges(frame, path, metadata.get("instances"))
    twice = frame.filter(pl.struct("run", "seq", "sample").is_duplicated())
    if twice.height:  # each request once: doubled rows doubled the fitted eta_flops, halved the KV bytes (a hostile round)
        first = twice.row(0, named=True)
        raise InputError(f"{path}: {twice.height} rows repeat a request (run {first['run']!r}, seq {first['seq']}, "
                         f"sample {first['sample']} is there more than once): a timeline written twice into one file? "
                         "give the file `asp replay -o` wrote")
    if frame.height and float(frame["finish_s"].max()) <= float(frame["send_s"].min()):  # type: ignore[arg-type]
        raise InputError(f"{path}: no time passes in it (every request finishes when the first is sent); give the "
                         "file `asp replay -o` wrote")
    return Timeline(frame=frame, metadata=metadata, path=path)


# The latest time a timeline may hold, in seconds from its run's start: 10^9 s is 31 years, past any replay. Times of
# 1e300 s (a hostile-input round) overflowed the fit's squares: "SVD did not converge", exit 70.
MAX_TIME_S = 1e9
_AGAIN = "record the timeline again with asp replay -o"


def _checked_metadata(raw: bytes, path: Path) -> dict[str, Any]:
    """The ``asp.timeline`` document, each field asp reads from it checked here, once: its kind and range (a list
    for the document, text for ``instances``, 1.5 for ``max_in_flight`` reached the fit and the simulator as
    AttributeError, ValueError or TypeError, exit 70, or were taken as given: a hostile-input round)."""
    from asp_cli import limits
    from asp_cli.settings import DISPATCHES, MAX_INSTANCES, MAX_REPLAY_SEQUENCES, MAX_SETTING

    def damaged(problem: str) -> InputError:
        return InputError(f"{path}: damaged asp timeline metadata ({problem}); {_AGAIN}")

    document = limits.loads(raw, str(path), InputError,
                            invalid=f"{path}: damaged asp timeline metadata (not valid JSON); {_AGAIN}")
    if not isinstance(document, dict):
        raise damaged(f"{_kind(document)}, where a JSON object of the run's settings belongs")
    from asp_cli.schedule_format import format_version_problem, parse_version

    # The schedule and history readers' rule, "MAJOR.MINOR": "1.0.0", "1" or a number 1.0 was read as format 1 (the
    # part before the first dot). None: read as 1.0, as before (hand-made metadata).
    problem = format_version_problem(document["format_version"]) if "format_version" in document else None
    if problem is not None:
        raise damaged(problem)
    version = parse_version(document.get("format_version", FORMAT_VERSION))
    if version is None or version[0] != int(FORMAT_VERSION.partition(".")[0]):
        raise InputError(f"{path}: timeline format {document.get('format_version')} is not the one this asp "
                         f"reads ({FORMAT_VERSION}); use the asp that wrote it")

    def check(where: str, value: Any, ok: bool, what: str) -> None:
        if value is not None and not ok:
            raise damaged(f"{where} must be {what}, not {_shown(value)}")

    def whole(where: str, value: Any, low: int, high: int) -> None:
        check(where, value, isinstance(value, int) and not isinstance(value, bool) and low <= value <= high,
              f"a whole number from {low:,} to {high:,}")

    whole("field 'instances'", document.get("instances"), 1, MAX_INSTANCES)
    whole("field 'max_in_flight'", document.get("max_in_flight"), 1, MAX_SETTING)
    engine = document.get("engine")
    check("field 'engine'", engine, engine in ("blocking", "streaming"), "'blocking' or 'streaming'")
    for key in ("preset", "preset_source"):
        check(f"field {key!r}", document.get(key), isinstance(document.get(key), str), "text")
    check("field 'complete'", document.get("complete"), isinstance(document.get("complete"), bool), "true or false")
    for key in ("servers", "arrangements"):
        entries = document.get(key)
        check(f"field {key!r}", entries, isinstance(entries, list), "a list of objects")
        for i, entry in enumerate(entries or []):
            check(f"{key}[{i}]", entry, isinstance(entry, dict), "an object")
    for i, server in enumerate(document.get("servers") or []):
        whole(f"servers[{i}].kv_cache_tokens", server.get("kv_cache_tokens"), 0, MAX_SETTING)
    for i, entry in enumerate(document.get("arrangements") or []):
        check(f"arrangements[{i}].arrangement", entry.get("arrangement"), isinstance(entry.get("arrangement"), str),
              "text")
        check(f"arrangements[{i}].dispatch", entry.get("dispatch"), entry.get("dispatch") in DISPATCHES,
              " or ".join(repr(d) for d in DISPATCHES))
        whole(f"arrangements[{i}].requests", entry.get("requests"), 0, MAX_REPLAY_SEQUENCES)
    return document


def _kind(value: Any) -> str:
    """What a JSON value is, in words."""
    return {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}.get(
        type(value), "a number")


def _shown(value: Any) -> str:
    """A value as a message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_ranges(frame: pl.DataFrame, path: Path, instances: int | None) -> None:
    """Refuse a time below 0 or past `MAX_TIME_S`, a token count past any response (`MAX_TOKEN_COUNT`), and an
    instance outside those the run had: a send at -30 s dropped most requests from the fit without a word, a
    completion of 2**62 tokens wrote a preset, instance 99 of 2 was told to pass --instances (a hostile-input
    round)."""
    from asp_cli.columns import MAX_TOKEN_COUNT
    from asp_cli.settings import MAX_INSTANCES, MAX_SAMPLES_PER_PROMPT

    times = f"times are seconds from 0 (the run's start) to {MAX_TIME_S:.0e}"
    tokens = f"token counts are whole numbers from 0 to {MAX_TOKEN_COUNT:,}"
    last = (instances or MAX_INSTANCES) - 1
    numbered = (f"the timeline's metadata records {instances:,} instances, numbered 0 to {last:,}" if instances
                else f"instances are numbered 0 to {last:,}")
    numbers = f"a request is numbered by its run and seq (from 0) and sample (0 to {MAX_SAMPLES_PER_PROMPT - 1:,})"
    rules: list[tuple[str, pl.Expr, str]] = [
        (name, pl.col(name).is_null() | (pl.col(name) < 0), numbers) for name in ("run", "seq", "sample")] + [
        ("sample", pl.col("sample") >= MAX_SAMPLES_PER_PROMPT, numbers),
        ("arrangement", pl.col("arrangement").is_null(), "each request names the arrangement it was replayed in"),
        ("send_s", pl.col("send_s") < 0, times), ("finish_s", pl.col("finish_s") > MAX_TIME_S, times),
        ("instance", pl.col("instance").is_null() | (pl.col("instance") < 0) | (pl.col("instance") > last), numbered)]
    for name in ("forced_tokens", "planned_prompt_tokens", "prompt_tokens", "completion_tokens"):
        out = (pl.col(name) < 0) | (pl.col(name) > MAX_TOKEN_COUNT)
        rules.append((name, out | pl.col(name).is_null() if name in _REQUIRED else out, tokens))
    index = "\x00row"  # asp's own hidden column (a NUL first: no file's)
    numbered_rows = frame.with_row_index(index, offset=1)  # counted from 1, as lines are
    for name, bad, what in rules:
        rows = numbered_rows.filter(bad.fill_null(False))
        if rows.height:
            first = rows.row(0, named=True)
            value = first[name]
            shown = ("missing" if value is None else f"{value:,}" if isinstance(value, int) else
                     f"{value:g}" if isinstance(value, float) else repr(value))
            raise InputError(f"{path}: row {first[index]:,}: column {name!r} is {shown} (run {first['run']!r}, "
                             f"seq {first['seq']!r}, sample {first['sample']!r})"
                             + (f", and {rows.height - 1:,} more rows like it" if rows.height > 1 else "")
                             + f": {what}; {_AGAIN}")


# --------------------------------------------------------------------------------------------------------
# Figures of a run, measured or simulated (the same definitions on both sides)


def rollout_figures(send_s: np.ndarray, finish_s: np.ndarray, instance: np.ndarray,
                    response_tokens: np.ndarray | None = None) -> dict[str, Any]:
    """Wall time, per-instance busy time and finish spread, and effective batch of one run.

    Parameters
    ----------
    send_s, finish_s
        Per request: when it was handed to its instance and when it finished.
    instance
        Per request: the instance that ran it.
    response_tokens
        Per request (optional): adds ``response_tokens_per_s`` over the wall time.

    Returns
    -------
    dict
        ``wall_s`` (last finish minus first send); ``busy_fraction_mean`` / ``busy_fraction_min`` (time with at
        least one request in flight on an instance, over the wall time); ``finish_spread_s`` (last finish of
        the latest instance minus that of the earliest, over instances that ran something), with each
        instance's busy and last finish times (``instance_busy_s``, ``instance_finish_s``);
        ``effective_batch`` (mean requests in flight while an instance is busy: the sum of request lifetimes
        over the sum of busy time).
    """
    send = np.asarray(send_s, dtype=np.float64)
    finish = np.asarray(finish_s, dtype=np.float64)
    inst = np.asarray(instance, dtype=np.int64)
    if send.size == 0:
        return {"requests": 0, "wall_s": 0.0, "instance_busy_s": [], "instance_finish_s": [],
                "busy_fraction_mean": 0.0, "busy_fraction_min": 0.0, "finish_spread_s": 0.0, "effective_batch": 0.0}
    start = float(send.min())
    wall = float(finish.max()) - start
    busy = []
    ends = []
    for k in np.unique(inst):
        mine = inst == k
        busy.append(_union_length(send[mine], finish[mine]))
        ends.append(float(finish[mine].max()))
    busy_arr = np.asarray(busy)
    total_busy = float(busy_arr.sum())
    figures: dict[str, Any] = {
        "requests": int(send.size),
        "wall_s": wall,
        "instance_busy_s": [float(b) for b in busy],  # per instance that ran something, in instance order
        "instance_finish_s": ends,
        "busy_fraction_mean": float(busy_arr.mean() / wall) if wall > 0 else 0.0,
        "busy_fraction_min": float(busy_arr.min() / wall) if wall > 0 else 0.0,
        "finish_spread_s": float(max(ends) - min(ends)),
        "effective_batch": float(np.sum(finish - send) / total_busy) if total_busy > 0 else 0.0,
    }
    if response_tokens is not None:
        tokens = float(np.sum(np.asarray(response_tokens, dtype=np.float64)))
        figures["response_tokens"] = int(tokens)
        figures["response_tokens_per_s"] = tokens / wall if wall > 0 else 0.0
    return figures


def _union_length(start: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of intervals [start_i, end_i]."""
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    # A new block starts where an interval begins after every earlier one has ended.
    new = np.concatenate(([True], s[1:] > e[:-1]))
    block = np.cumsum(new) - 1
    block_start = s[new]
    block_end = np.zeros(block_start.size)
    np.maximum.at(block_end, block, e)
    return float(np.sum(block_end - block_start))


def figures_by_arrangement(frame: pl.DataFrame, *, simulated: bool = False) -> dict[str, dict[str, Any]]:
    """`rollout_figures` of every arrangement in a timeline, measured (or, with ``simulated``, predicted)."""
    out: dict[str, dict[str, float]] = {}
    send, finish = ("simulated_send_s", "simulated_finish_s") if simulated else ("send_s", "finish_s")
    for name in frame.sort("run")["arrangement"].unique(maintain_order=True).to_list():
        part = frame.filter(pl.col("arrangement") == name).drop_nulls([send, finish])
        out[name] = rollout_figures(part[send].to_numpy(), part[finish].to_numpy(), part["instance"].to_numpy(),
                                    part["forced_tokens"].to_numpy())
    return out
