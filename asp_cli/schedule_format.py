"""The schedule file: a public, versioned Parquet contract (docs/schedule-format.md).

One row per (epoch, prompt), sorted by ``seq``. The Parquet key/value metadata holds one JSON document under
``asp.schedule`` with the format version, the asp version, every setting, the input and predictor
fingerprints and the command line. Writing is deterministic (fixed writer options, sorted JSON) and atomic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import polars as pl

from asp_cli import limits
from asp_cli.errors import InputError, ScheduleFormatError, SettingsError, missing_hint, shown_id, stdin_named
from asp_cli.output import as_given, atomic_path
from asp_cli.settings import KV_CUTS, MAX_SCHEDULE_ROWS, MAX_SETTING

FORMAT_NAME = "asp.schedule"
# Major bumps when a reader of the previous major would misread a file (a required column removed, renamed,
# retyped or given a new meaning); minor bumps for compatible additions (a new optional column or key).
FORMAT_VERSION = "1.2"  # the newest version this asp writes and reads
# A file is written at the oldest version that describes it (as model files are), so a schedule that uses nothing
# newer is still the 1.0 file it always was, byte for byte. 1.1 adds the optional `predictor.calibration` key (what
# history taught the predictor), the `arrangement` key, and the `prediction_source` value "file" (lengths from
# `asp schedule --predictions`). 1.2 adds the `arrangement.kv_budget` value "padded" (a static schedule's minibatches
# cut by their padded KV).
_VERSION_KEYS: tuple[tuple[str, str, str], ...] = (("1.1", "predictor", "calibration"), ("1.1", "arrangement", "chosen"))
_VERSION_METADATA_VALUES: tuple[tuple[str, str, str, str], ...] = (("1.2", "arrangement", "kv_budget", "padded"),)
_VERSION_VALUES: tuple[tuple[str, str, str], ...] = (("1.1", "prediction_source", "file"),)
METADATA_KEY = b"asp.schedule"

# Required columns, in file order, with their types.
REQUIRED_COLUMNS: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "instance": pl.Int32(),
    "minibatch": pl.Int64(),
    "epoch": pl.Int32(),
    "row": pl.Int64(),
    "prompt_id": pl.String(),
    "predicted_tokens": pl.Int64(),
    "train_step": pl.Int64(),
}

# Optional columns asp writes today (readers must ignore columns they do not know).
OPTIONAL_COLUMNS: dict[str, pl.DataType] = {
    "predicted_max_tokens": pl.Int64(),
    "predicted_mean_tokens": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "prediction_source": pl.String(),
    "length_class": pl.Int32(),
    "position_in_minibatch": pl.Int32(),
    "expected_start_s": pl.Float64(),
    "expected_finish_s": pl.Float64(),
    "expected_minibatch_end_s": pl.Float64(),
    "expected_policy_version": pl.Int64(),
    "expected_lag": pl.Int64(),
}


@dataclass(frozen=True)
class Schedule:
    """A schedule read back from disk: the rows (sorted by ``seq``) and the metadata document."""

    frame: pl.DataFrame
    metadata: dict[str, Any]
    path: Path | None = None
    # Whether `read_schedule` checked these very rows; a copy with other rows (`dataclasses.replace`) is checked
    # again where a command takes it (`schedule_of`).
    checked: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def settings(self) -> dict[str, Any]:
        return self.metadata.get("settings") or {}  # absent, or null in an edited file

    @property
    def instances(self) -> int:
        return int(self.settings.get("instances", int(self.frame["instance"].max()) + 1))

    @property
    def recorded_settings(self):
        """The settings it was made with (`asp_cli.settings.ScheduleSettings`, checked when it was read); a field
        an edited file lacks takes asp's default, as `asp schedule` would have run, except what its rows say: the
        instance count (`instances`) and the train batch size (the most rows any `train_step` holds). Every
        command that reads its group size or train batch size takes it from here, so that they agree on such a
        file (`asp replay` took the whole epoch as one train batch where `asp simulate` took 128)."""
        from asp_cli.settings import ScheduleSettings

        from_rows: dict[str, Any] = {"instances": self.instances}
        if "train_batch_size" not in self.settings and self.frame.height:
            # By step alone: a step the end of one epoch shares with the start of the next is one train batch.
            from_rows["train_batch_size"] = int(self.frame.group_by("train_step").len()["len"].max())
        return ScheduleSettings.from_dict({**from_rows, **self.settings})

    def rows_changed(self) -> str:
        """A sentence where the rows are not the plan's as it was made (its metadata's ``summary.rows``, and the
        settings' epochs): an epoch filtered out, rows dropped or two schedules joined keep the planned columns (the
        times, the lag, the steps) of the plan they came from, which `asp report` took as the rows' own without a
        word (a hostile-input round); "" where they are."""
        summary = self.metadata.get("summary")
        rows = summary.get("rows") if isinstance(summary, dict) else None
        epochs, held = self.settings.get("epochs"), sorted(self.frame["epoch"].unique().to_list())
        if isinstance(rows, int) and not isinstance(rows, bool) and rows != self.frame.height:
            which = (f" (epoch{'s' if len(held) > 1 else ''} {', '.join(map(str, held))} of {epochs})"
                     if isinstance(epochs, int) and len(held) < epochs else "")
            return (f"holds {self.frame.height:,} rows{which} where the plan held {rows:,} when it was made: rows "
                    f"were {'removed' if self.frame.height < rows else 'added'} since (by hand?), and its planned "
                    "columns (times, lag, steps) are still the whole plan's")
        return ""

    @property
    def samples_per_prompt(self) -> int:
        """Samples per prompt (the GRPO group size) it was made for (`recorded_settings`)."""
        return self.recorded_settings.samples_per_prompt

    def cost_preset(self, override: str | None = None):
        """The cost model to replay with: ``override`` (a `--preset`) when given, else the one the schedule was
        made with (`asp_cli.costmodel.recorded_preset`)."""
        from asp_cli.costmodel import DEFAULT_PRESET, load_preset, recorded_preset

        if override is not None:
            return load_preset(override)
        return recorded_preset(str(self.settings.get("preset") or DEFAULT_PRESET), self.metadata.get("preset"))

    @property
    def kv_tokens_per_minibatch(self) -> int | None:
        """The KV-token budget its minibatches were cut by (metadata ``max_tokens_per_minibatch_used``; None in
        files without it, or where it is no setting one could give, as above `settings.MAX_SETTING` for a
        preset's huge cache): what the baselines in its sizes are cut by, on whatever preset they are replayed."""
        from asp_cli.settings import MAX_SETTING

        used = self.metadata.get("max_tokens_per_minibatch_used")
        return used if isinstance(used, int) and not isinstance(used, bool) and 1 <= used <= MAX_SETTING else None

    @property
    def kv_budget(self) -> str:
        """How its minibatches were cut against the KV budget (`settings.KV_CUTS`: "peak", "whole" or, static
        schedules since 2026-12-02, "padded"): what the baselines in its sizes are cut by. Schedules written
        before the peak accounting, and static ones before the padded one, counted whole groups."""
        chosen = (self.metadata.get("arrangement") or {}).get("kv_budget")
        if chosen not in KV_CUTS or (chosen == "peak" and self.settings.get("engine") == "static"):
            return "whole"
        return chosen


# A format version is text "MAJOR.MINOR": two decimal integers of at most 9 digits, no sign, space, leading
# zero or other character ("1.0", "1.12"). A number (1.0), "1", "1.0.0", "01.0", " 1.0" or "1_0.0" is not a
# version: such a file is a damaged schedule.
_VERSION = re.compile(r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")


def parse_version(value: object) -> tuple[int, int] | None:
    """(major, minor) of a format version, or None when ``value`` is not one (see `_VERSION`)."""
    if not isinstance(value, str):
        return None
    match = _VERSION.fullmatch(value)
    return (int(match.group(1)), int(match.group(2))) if match else None


def format_version_problem(value: object) -> str | None:
    """What is wrong with a file's ``format_version`` (not `parse_version`'s text "MAJOR.MINOR"), as a message says
    it, or None where it is version text: one rule for schedules and histories (a history's "1.0.0" was read)."""
    if parse_version(value) is not None:
        return None
    shown = repr(value)
    return (f"format_version {shown if len(shown) <= 40 else shown[:40] + '...'} is not text \"MAJOR.MINOR\" of two "
            "whole numbers")


def format_version_for(metadata: dict[str, Any], frame: pl.DataFrame | None = None) -> str:
    """The oldest format version whose keys and values cover ``metadata`` and whose column values cover ``frame``:
    "1.0"; "1.1" with ``predictor.calibration``, ``arrangement`` or a ``prediction_source`` of "file"; "1.2" with
    an ``arrangement.kv_budget`` of "padded"."""
    version = "1.0"
    for newer, section, key in _VERSION_KEYS:
        part = metadata.get(section)
        if isinstance(part, dict) and key in part:
            version = max(version, newer, key=parse_version)
    for newer, section, key, value in _VERSION_METADATA_VALUES:
        part = metadata.get(section)
        if isinstance(part, dict) and part.get(key) == value:
            version = max(version, newer, key=parse_version)
    for newer, column, value in _VERSION_VALUES if frame is not None else ():
        if column in frame.columns and bool((frame[column] == value).any()):
            version = max(version, newer, key=parse_version)
    return version


# Rows per Parquet row group (and per piece converted to Arrow while writing).
ROW_GROUP_ROWS = 1 << 17


def write_schedule(frame: pl.DataFrame, metadata: dict[str, Any], output: Path, *, force: bool = False) -> None:
    """Validate and write a schedule atomically, byte-for-byte deterministic for the same inputs.

    An existing ``output`` is replaced only with ``force`` (`asp_cli.output.atomic_path`), even when another
    run creates it while this one works.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    validate_frame(frame, where=str(output))
    ordered = [*REQUIRED_COLUMNS, *[c for c in OPTIONAL_COLUMNS if c in frame.columns]]
    extra = [c for c in frame.columns if c not in ordered]
    frame = frame.select([*ordered, *extra]).sort("seq")
    document = {"format": FORMAT_NAME, **metadata, "format_version": format_version_for(metadata, frame)}
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    # Arrow's large_string becomes string for the widest reader support.
    schema = pa.schema(
        [
            pa.field(name, pa.string() if pa.types.is_large_string(kind) else kind, nullable=True)
            for name, kind in zip(frame.columns, frame.head(0).to_arrow().schema.types)
        ],
        metadata={METADATA_KEY: encoded},
    )
    with atomic_path(output, replace=force) as tmp:
        # Row groups of ROW_GROUP_ROWS rows, each converted to Arrow only when it is written: the schedule
        # is never held twice (as Polars and as Arrow) at once.
        with pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=3, use_dictionary=True,
                              write_statistics=True) as writer:
            for offset in range(0, frame.height, ROW_GROUP_ROWS):
                piece = frame.slice(offset, ROW_GROUP_ROWS).to_arrow().cast(schema)
                writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)


_NON_NEGATIVE = ("seq", "instance", "minibatch", "epoch", "row", "predicted_tokens", "train_step")
_TOKEN_COLUMNS = ("predicted_tokens", "predicted_max_tokens", "predicted_mean_tokens", "prompt_tokens")


def _check_settings(metadata: dict[str, Any], path: Path) -> None:
    """The recorded settings must be settings asp could have run with (commands rebuild them from here)."""
    from asp_cli.errors import SettingsError
    from asp_cli.settings import ScheduleSettings

    if "settings" not in metadata and "created_by" in metadata:
        # `asp schedule` records them, and every command rebuilds the run from them: defaults would be another run
        # (an audit's edited file replayed 400 sequences of a 200-sequence schedule, and export printed n=8 for 4).
        raise ScheduleFormatError(f"{path}: damaged asp schedule metadata (no settings); write the schedule again")
    preset = metadata.get("preset")
    if preset is not None and not isinstance(preset, dict):  # `asp report` crashed on a preset replaced by text
        raise ScheduleFormatError(f"{path}: damaged asp schedule metadata (preset: not an object); write the "
                                  "schedule again")
    settings = metadata.get("settings", {})
    if settings is not None:
        try:
            if not isinstance(settings, dict):
                raise TypeError("not an object")
            ScheduleSettings.from_dict(settings)
        except (SettingsError, TypeError) as exc:
            raise ScheduleFormatError(
                f"{path}: damaged asp schedule metadata (settings: {exc}); write the schedule again"
            ) from None
    # How the minibatches were cut (what the baselines in its sizes are cut by): absent in older files. A file of a
    # newer minor version may hold a value this asp does not know (the format's rule: compatible), read as
    # "whole" (`Schedule.kv_budget`); in a file of this version or older any other value is damage.
    arrangement = metadata.get("arrangement")
    budget = arrangement.get("kv_budget", "whole") if isinstance(arrangement, dict) else "whole"
    newer = (parse_version(metadata.get("format_version")) or (0, 0)) > (parse_version(FORMAT_VERSION) or (0, 0))
    if (arrangement is not None and not isinstance(arrangement, dict)) or (
            budget not in KV_CUTS and not (newer and isinstance(budget, str))):
        shown = arrangement if not isinstance(arrangement, dict) else budget
        raise ScheduleFormatError(
            f"{path}: damaged asp schedule metadata (arrangement.kv_budget {shown!r} is not one of "
            f"{', '.join(KV_CUTS)}); write the schedule again"
        )


def _first_line(exc: BaseException) -> str:
    """The first line of a reader's error, for a one-line message (PyArrow's run over several)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]


def _at(frame: pl.DataFrame, mask: pl.Series | pl.Expr) -> str:
    """Where the first row of ``mask`` is: its row in the file (from 1), its ``seq`` and prompt id where readable."""
    index = frame.select(pl.arg_where(mask).first() if isinstance(mask, pl.Expr) else pl.lit(mask.arg_true()[0]))
    row = int(index.item())
    details = [f"{name} {shown_id(frame[name][row])}" if name == "prompt_id" else f"{name} {frame[name][row]}"
               for name in ("seq", "prompt_id") if name in frame.columns and frame[name][row] is not None]
    return f"row {row + 1}" + (f" ({', '.join(details)})" if details else "")


def validate_frame(frame: pl.DataFrame, *, where: str) -> None:
    """Check the required columns, their types and the ordering invariants of a schedule.

    Each message names the first row that breaks a rule: its row in the file (from 1), its ``seq`` and id.

    Raises
    ------
    ScheduleFormatError
        Naming the column or invariant that fails.
    """
    for name, dtype in REQUIRED_COLUMNS.items():
        # Each message says what to do, as the others here do (these three said only what was wrong).
        if name not in frame.columns:
            raise ScheduleFormatError(f"{where}: required column {name!r} is missing; write the schedule again")
        if frame.schema[name] != dtype:
            # A round trip through CSV or pandas widens a column (Int32 to Int64): cast back, said (a hostile round).
            cast = (f"cast it back to {dtype} (a CSV or pandas round trip widens it), or "
                    if dtype.is_integer() and frame.schema[name].is_integer() else "")
            raise ScheduleFormatError(f"{where}: column {name!r} is {frame.schema[name]}, expected {dtype}; {cast}"
                                      "write the schedule again")
    if frame.height == 0:
        raise ScheduleFormatError(f"{where}: the schedule has no rows; write the schedule again")
    for name in REQUIRED_COLUMNS:
        missing = frame[name].null_count()
        if missing:
            raise ScheduleFormatError(f"{where}: column {name!r} has {missing} missing values, the first at "
                                      f"{_at(frame, pl.col(name).is_null())}; write the schedule again")
    for name in _NON_NEGATIVE:
        if frame[name].min() < 0:  # type: ignore[operator]
            raise ScheduleFormatError(
                f"{where}: column {name!r} has a negative value ({frame[name].min()}) at "
                f"{_at(frame, pl.col(name) < 0)}; write the schedule again"
            )
    for name in _TOKEN_COLUMNS:
        # Token counts: none below 0 and none past the largest a setting may hold (a cap or a budget), where an
        # edit would make a replay of quadrillions of GPU-minutes or a lower bound above the simulated time.
        if name not in frame.columns or frame.schema[name] != pl.Int64:
            continue
        column = frame[name]
        # A predicted response is a token at least (asp writes none shorter): a hand-edited 0 was planned and
        # simulated as a response of no tokens (a hostile-input round).
        least = 1 if name.startswith("predicted_") else 0
        odd = (column < least) | (column > MAX_SETTING)
        if odd.any():
            what = "a response length" if least else "a token count"
            raise ScheduleFormatError(
                f"{where}: column {name!r} holds {column.filter(odd)[0]} at {_at(frame, odd.fill_null(False))}, not "
                f"{what} ({least} to {MAX_SETTING:,}); write the schedule again"
            )
    for name in ("train_step", "minibatch"):
        # Each step and each minibatch holds a row at least, and no schedule has more than MAX_SCHEDULE_ROWS
        # rows, so no number reaches it: a larger one is an edit, and readers that count per step (asp report)
        # would allocate by it. (Not the file's own row count: a schedule cut to its first rows keeps its
        # numbers, and is read.)
        past = frame[name] >= MAX_SCHEDULE_ROWS
        if past.any():
            raise ScheduleFormatError(
                f"{where}: column {name!r} holds {frame[name].filter(past)[0]} at {_at(frame, past)}, more than any "
                f"schedule's rows can number ({MAX_SCHEDULE_ROWS:,} at most; each {name} holds a row); write the "
                "schedule again"
            )
    for name, dtype in OPTIONAL_COLUMNS.items():
        # Optional, but when present a consumer relies on it: the documented type, no gaps, finite numbers.
        if name not in frame.columns:
            continue
        if frame.schema[name] != dtype:
            raise ScheduleFormatError(
                f"{where}: column {name!r} is {frame.schema[name]}, expected {dtype}; drop the column or write the "
                "schedule again"
            )
        column = frame[name]
        broken = column.is_null() | (~column.is_finite() if dtype == pl.Float64 else False)
        bad = int(broken.sum())
        if bad:
            raise ScheduleFormatError(
                f"{where}: column {name!r} has {bad} missing or non-finite values, the first at "
                f"{_at(frame, broken.fill_null(True))}; drop the column or write the schedule again"
            )
        if name.endswith("_s") and column.min() < 0:  # type: ignore[operator]  # a time before the run starts
            raise ScheduleFormatError(f"{where}: column {name!r} holds {column.min()} at {_at(frame, column < 0)}, "
                                      "a time before the run starts; drop the column or write the schedule again")
        if dtype in (pl.Int32, pl.Int64) and name not in _TOKEN_COLUMNS:
            # Steps, classes and positions count from 0, and none reaches a schedule's most rows: a hand-edited lag
            # of 2**62 made `asp report --html` divide by zero, exit 70 (a hostile-input round, 2026-12-07).
            odd = (column < 0) | (column >= MAX_SCHEDULE_ROWS)
            if odd.any():
                raise ScheduleFormatError(f"{where}: column {name!r} holds {column.filter(odd)[0]} at {_at(frame, odd)}, "
                                          f"not a count from 0 to {MAX_SCHEDULE_ROWS - 1:,}; drop the column or write "
                                          "the schedule again")
    seq = frame["seq"]
    if seq.null_count() or seq.min() != 0 or seq.max() != frame.height - 1 or seq.n_unique() != frame.height:
        outside = seq >= frame.height
        if outside.any():
            row = int(outside.arg_true()[0])
            which = f"row {row + 1} holds seq {seq[row]}, outside it"
        else:
            value = seq.filter(seq.is_duplicated())[0]
            first, second = (int(i) + 1 for i in (seq == value).arg_true()[:2])
            which = f"rows {first} and {second} both hold seq {value}"
        raise ScheduleFormatError(f"{where}: column 'seq' is not a permutation of 0..rows-1 ({which}); write the "
                                  "schedule again")
    spans = frame.group_by("minibatch").agg(
        pl.col("instance").n_unique().alias("instances"),
        (pl.col("seq").max() - pl.col("seq").min() + 1 - pl.len()).alias("gaps"),
    ).sort("minibatch")
    split = spans.filter(pl.col("instances") > 1)
    if split.height:
        minibatch = split["minibatch"][0]
        instances = frame.filter(pl.col("minibatch") == minibatch)["instance"].unique().sort().to_list()
        raise ScheduleFormatError(f"{where}: a minibatch spans several instances (minibatch {minibatch}: instances "
                                  f"{', '.join(map(str, instances[:5]))}); write the schedule again")
    gapped = spans.filter(pl.col("gaps") != 0)
    if gapped.height:
        raise ScheduleFormatError(f"{where}: a minibatch's rows are not contiguous in 'seq' (minibatch "
                                  f"{gapped['minibatch'][0]}); write the schedule again")
    # Distinct ids per epoch, counted on 64-bit hashes of the ids first (a tenth of the memory of hashing the
    # strings, and of a duplicate mask of (epoch, prompt_id) structs); only when two hashes agree are the ids
    # themselves compared, so a hash collision never fails a valid schedule.
    def repeated(ids: pl.Expr) -> bool:
        per_epoch = frame.group_by("epoch").agg(ids.n_unique().alias("ids"), pl.len().alias("rows"))
        return bool((per_epoch["ids"] != per_epoch["rows"]).any())

    if repeated(pl.col("prompt_id").hash(seed=0)) and repeated(pl.col("prompt_id")):
        twice = frame.select(pl.struct("epoch", "prompt_id").is_duplicated()).to_series()
        first = frame.filter(twice).row(0, named=True)
        raise ScheduleFormatError(f"{where}: a prompt appears twice in one epoch (prompt id {shown_id(first['prompt_id'])} "
                                  f"in epoch {first['epoch']}, first at {_at(frame, twice)}); write the schedule again")
    # One row per prompt and one prompt per row, in every epoch: export and the replays take a prompt from the
    # dataset by its row (an edited row, holding another prompt's number in one epoch, exported that prompt twice
    # and dropped one, silently: a hostile-input audit, 2026-12-05). Hashes first, the ids themselves only then.
    if not _rows_and_ids_agree(frame["row"].to_numpy(), frame["prompt_id"].hash(seed=0).to_numpy()):
        pairs = frame.select("row", "prompt_id").unique(maintain_order=True)
        for column, other in (("row", "prompt_id"), ("prompt_id", "row")):
            shared = pairs.filter(pl.col(column).is_duplicated())
            if shared.height:
                value = shared[column][0]
                held = shared.filter(pl.col(column) == value)[other].to_list()[:2]
                what = (f"row {value} holds prompt ids {shown_id(held[0])} and {shown_id(held[1])}" if column == "row"
                        else f"prompt id {shown_id(value)} is at rows {held[0]} and {held[1]}")
                raise ScheduleFormatError(f"{where}: columns 'row' and 'prompt_id' disagree ({what}, in different "
                                          "epochs or rows); write the schedule again")


def _rows_and_ids_agree(rows: Any, ids: Any) -> bool:
    """Whether each row holds one id hash and each id hash one row: two sorts (the unique (row, hash) pairs of a 1M-row
    schedule took about 0.1 GiB more, the peak of `asp schedule`). A hash collision reads as a disagreement, which
    the caller then checks on the ids themselves."""
    import numpy as np

    for key, value in ((rows, ids), (ids, rows)):
        order = np.argsort(key, kind="stable")
        keys, values = key[order], value[order]
        same = keys[1:] == keys[:-1]
        if bool((values[1:][same] != values[:-1][same]).any()):
            return False
    return True


def check_epochs(frame: pl.DataFrame, settings: dict[str, Any], *, where: str) -> None:
    """No row lies outside the epochs the settings name (an edited `epoch` that export would silently drop),
    nor on an instance outside the settings' fleet (an edited `instance` that a replay would run on a server
    that is not there).

    Raises
    ------
    ScheduleFormatError
        Naming the first row outside them.
    """
    instances = settings.get("instances")
    if isinstance(instances, int) and not isinstance(instances, bool):
        outside = frame["instance"] >= instances
        if outside.any():
            raise ScheduleFormatError(
                f"{where}: column 'instance' holds {frame['instance'].filter(outside)[0]} at {_at(frame, outside)}, "
                f"but the schedule's settings have instances {instances} (0 to {instances - 1}); write the schedule "
                "again"
            )
    def whole(key: str) -> int | None:
        value = settings.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    # A hand-edited length past the cap, or a step of more groups than a train batch, was read as written (a
    # hostile-input round: `asp report` showed a group of 1,000,000 tokens under a cap of 8,192, and export said
    # "batches of 100" of a step holding 101).
    cap = whole("max_response_tokens")
    for name in ("predicted_tokens", "predicted_max_tokens", "predicted_mean_tokens") if cap else ():
        if name in frame.columns and frame.schema[name] == pl.Int64 and frame[name].max() > cap:  # type: ignore[operator]
            over = frame[name] > cap
            raise ScheduleFormatError(f"{where}: column {name!r} holds {frame[name].filter(over)[0]} at "
                                      f"{_at(frame, over)}, past the schedule's max_response_tokens {cap}; write the "
                                      "schedule again")
    batch = whole("train_batch_size")
    if batch:
        sizes = frame.group_by("train_step").len().filter(pl.col("len") > batch)
        if sizes.height:
            step = sizes.sort("train_step")["train_step"][0]
            raise ScheduleFormatError(f"{where}: train step {step} holds {sizes.sort('train_step')['len'][0]} groups, "
                                      f"more than the schedule's train_batch_size {batch}; write the schedule again")
    epochs = whole("epochs")
    if epochs is None:
        return
    outside = frame["epoch"] >= epochs
    if outside.any():
        raise ScheduleFormatError(
            f"{where}: column 'epoch' holds {frame['epoch'].filter(outside)[0]} at {_at(frame, outside)}, but the "
            f"schedule's settings have epochs {epochs} (0 to {epochs - 1}); write the schedule again"
        )


def schedule_of(value: object, what: str = "the schedule") -> Schedule:
    """The schedule ``value`` names: a file (text or a `Path`, read with `read_schedule`), a `Schedule`, or one made in
    memory (`asp_cli.schedule(..., None)`'s result: its rows and metadata, as a file of them would read). Each twin
    that takes a schedule takes any of them: a schedule kept in memory was a TypeError in all of them but one (a
    library newcomer's round).

    Raises
    ------
    SettingsError
        A value that is none of them (``what`` names the parameter).
    """
    import os

    if isinstance(value, Schedule):
        if not value.checked:
            _check_in_memory(value.frame, value.metadata, value.path)
        return value
    frame, metadata = getattr(value, "frame", None), getattr(value, "metadata", None)
    if isinstance(frame, pl.DataFrame) and isinstance(metadata, dict) and "settings" in metadata:
        _check_in_memory(frame, metadata, getattr(value, "output", None))
        return Schedule(frame.sort("seq"), {"format": FORMAT_NAME, **metadata}, getattr(value, "output", None))
    if not isinstance(value, (str, os.PathLike)):
        raise SettingsError(f"{what} must be a schedule file's path, or a schedule made in memory (asp_cli.schedule's "
                            f"result), not {type(value).__name__}")
    return read_schedule(value)


def _refuse_export(path: Path) -> None:
    """Name an `asp export` given as a schedule as one (it was told only that it is no asp schedule, E22)."""
    from asp_cli.reading.exported import export_not_schedule

    refused = export_not_schedule(path)
    if refused is not None:
        raise refused


def _check_in_memory(frame: pl.DataFrame, metadata: dict[str, Any], path: Path | None) -> None:
    """The checks a schedule file gets when it is read, for one a library user holds in memory (or changed after
    reading it): a frame concatenated with itself was exported with every prompt twice, and a dropped column ended
    in a Polars error (a hostile-input round)."""
    from asp_cli.costmodel import check_recorded_preset

    where = f"{path} (as changed in memory)" if path else "the schedule in memory"
    _check_settings(metadata, where)  # type: ignore[arg-type]
    validate_frame(frame, where=where)
    check_epochs(frame, metadata.get("settings") or {}, where=where)
    check_recorded_preset(metadata.get("preset"), where)


def read_schedule(path: str | Path) -> Schedule:
    """Read and check a schedule file.

    Raises
    ------
    InputError
        When there is no such file (or it is a folder).
    ScheduleFormatError
        When the file is not Parquet, not an asp schedule, of a newer major format version, or breaks the
        format's invariants.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if stdin_named(path) is not None:
        raise stdin_named(path)
    if not path.is_file():
        # A missing file is a bad input (exit 3) whatever it was meant to hold, as for every other input.
        what = ("is a directory, not a schedule file" if path.is_dir() else
                "is not a regular file (a pipe or a device)" if path.exists() else "no such file")
        home = "" if path.exists() else missing_hint(path)
        raise InputError(f"{path}: {what}" + (home or "; give the schedule `asp schedule -o` wrote"))
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as exc:  # no read permission: a bad input too, not a bug (it was exit 70)
        raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); check the file's "
                         "permissions, or give the schedule `asp schedule -o` wrote") from None
    if magic != b"PAR1":
        _refuse_export(path)
        raise ScheduleFormatError(f"{path}: not a Parquet file, so not an asp schedule; give the file `asp schedule -o` wrote")
    source = as_given(path)  # a name PyArrow cannot take is said as such (E127), not as a damaged file
    try:
        schema = pq.read_schema(source)
    except Exception as exc:  # noqa: BLE001 - a damaged file
        if limits.PARQUET_TOO_DEEP in str(exc):
            raise limits.parquet_depth_error(str(path), ScheduleFormatError) from None
        first = _first_line(exc)
        raise ScheduleFormatError(f"{path}: unreadable Parquet file ({first}); write the schedule again") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        _refuse_export(path)
        names = set(schema.names)
        kind = ("an asp observe history (observed lengths), not a schedule; a history goes to --history or "
                "--lengths; give" if {"prompt_id", "response_tokens"} <= names else
                # A schedule re-saved by Polars or pandas, which drop a file's metadata (a hostile-input round).
                "it has a schedule's columns but not asp's metadata, which Polars and pandas drop when they write a "
                "file: write edited rows with pyarrow, keeping the original's (table.replace_schema_metadata("
                "pyarrow.parquet.read_schema(original).metadata)), or give" if set(REQUIRED_COLUMNS) <= names else
                "it is not an asp schedule; give")
        raise ScheduleFormatError(f"{path}: a Parquet file without asp schedule metadata: {kind} the schedule "
                                  "`asp schedule -o` wrote")
    metadata = limits.loads(raw, f"{path}: asp schedule metadata", ScheduleFormatError,
                            fix=f"asp reads at most {limits.MAX_NESTING_DEPTH} levels; write the schedule again",
                            invalid=f"{path}: damaged asp schedule metadata; write the schedule again")
    if not isinstance(metadata, dict):
        raise ScheduleFormatError(f"{path}: damaged asp schedule metadata; write the schedule again")
    version = parse_version(metadata.get("format_version"))
    if version is None:
        raise ScheduleFormatError(f"{path}: damaged asp schedule metadata "
                                  f"({format_version_problem(metadata.get('format_version'))}); write the schedule again")
    supported = parse_version(FORMAT_VERSION)
    assert supported is not None
    if version[0] > supported[0]:
        raise ScheduleFormatError(
            f"{path}: schedule format {metadata['format_version']} is newer than this asp reads "
            f"({FORMAT_VERSION}); upgrade asp (pip install -U asp-cli)"
        )
    if version[0] < supported[0]:
        raise ScheduleFormatError(
            f"{path}: schedule format {metadata['format_version']} is older than this asp reads "
            f"({FORMAT_VERSION}); make the schedule again with this asp"
        )
    limits.check_parquet_depth(schema, str(path), ScheduleFormatError)
    _check_settings(metadata, path)
    names = list(schema.names)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ScheduleFormatError(f"{path}: damaged asp schedule (column {repeated[0]!r} appears more than once); "
                                  "write the schedule again")
    try:
        # PyArrow reads the pages: on damaged ones it raises where Polars' own reader can panic, printing a Rust
        # backtrace (and the panic, a BaseException, escaped as a traceback).
        frame = pl.from_arrow(pq.read_table(source))
        assert isinstance(frame, pl.DataFrame)
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001 - damaged pages: the file's fault
        first = _first_line(exc)
        raise ScheduleFormatError(f"{path}: damaged asp schedule ({first}); write the schedule again") from None
    validate_frame(frame, where=str(path))
    check_epochs(frame, metadata.get("settings") or {}, where=str(path))
    from asp_cli.costmodel import check_recorded_preset

    check_recorded_preset(metadata.get("preset"), str(path))
    read = Schedule(frame=frame.sort("seq"), metadata=metadata, path=path)
    object.__setattr__(read, "checked", True)  # frozen: set once, here
    return read


# The schedule's provenance: options that change where or how output goes, never the schedule, are not recorded.
_NOT_RECORDED = {"--force", "--json", "--quiet", "-q", "--traceback", "--progress", "--no-progress"}
_VALUE_NOT_RECORDED = {"-o", "--output"}


def recorded_command_line(argv: Sequence[str] | None) -> list[str] | None:
    """The command line, without options that change where or how output goes but not the schedule.

    The output path is written as OUT so that the same schedule made to two paths is byte-identical.
    """
    if argv is None:
        return None
    # A string is a sequence of characters: "asp schedule p.jsonl" was recorded as 20 one-letter words.
    words = list(argv) if isinstance(argv, (list, tuple)) else None
    if words is None or not all(isinstance(arg, str) for arg in words):
        raise SettingsError("command_line takes the command's words as a list of strings, as sys.argv holds them "
                            f"(e.g. ['asp', 'schedule', 'p.jsonl', '-o', 'OUT']), or None (got {str(argv)[:80]!r})")
    recorded: list[str] = []
    skip_next = False
    for arg in words:
        if skip_next:
            recorded.append("OUT")
            skip_next = False
            continue
        if arg in _NOT_RECORDED:
            continue
        if arg in _VALUE_NOT_RECORDED:
            recorded.append(arg)
            skip_next = True
            continue
        # The output in a cluster of short options (-qo FILE, -qoFILE; -q is asp's only short flag without a
        # value) or with its value attached (-oFILE, --output=FILE) is written as OUT too.
        cluster = _SHORT_OUTPUT.fullmatch(arg)
        if cluster is not None:  # recorded as -o alone: -q is not recorded either
            recorded.append("-oOUT" if cluster.group(2) else "-o")
            skip_next = not cluster.group(2)
            continue
        recorded.append("--output=OUT" if arg.startswith("--output=") else arg)
    return recorded


_SHORT_OUTPUT = re.compile(r"-(q*)o(.*)", re.S)
