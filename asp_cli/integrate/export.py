"""Export: a schedule plus the dataset it was made from, written as the dataset's own rows in the schedule's
order, ready for a trainer that reads files in order.

Formats:

- ``parquet`` / ``jsonl``: the user's rows unchanged, plus asp's columns (``epoch``, ``instance``,
  ``minibatch``, ``seq``, ``train_step``, ``predicted_tokens``). JSONL suits OpenRLHF and slime.
- ``verl``: Parquet with the five columns verl's ``RLHFDataset`` reads (``data_source``, ``prompt`` as a chat
  list, ``ability``, ``reward_model``, ``extra_info``), the user's values kept where present and defaults
  filled in otherwise, plus the user's other columns and asp's.

Orders: ``dispatch`` (the schedule's global ``seq``) or ``train`` (`Replay.trainer_order`: by training
step, batches of ``train_batch_size`` consecutive rows, each batch laid out for balanced contiguous
chunking across rollout workers, cut the way the chosen verl version cuts it). ``verl`` defaults to
``train``, the others to ``dispatch``.

Nothing here prints; warnings and the trainer settings to use come back in the `ExportResult`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import __version__
from asp_cli.arrange.advice import dividing_example
from asp_cli.columns import LABEL_KEYS
from asp_cli.errors import InputError, SettingsError, counted, shown_id
from asp_cli.integrate.dataset_rows import (SHADOWED, mixed_kinds_warning, nest_columns, non_finite_notes, object_fields,
                                             read_rows, write_rows)
from asp_cli.integrate.export_match import misplaced_id_error, reexport_error
from asp_cli.integrate.export_options import (ASP_COLUMNS, VERL_CHUNKING, chat_text_note, check_format,
                                              check_options, dealt_workers_note, mindspeed_label_note,
                                              mixed_chat_note, mixed_label_note, object_label_note)
from asp_cli.integrate.replay import VERL_AGENT_WORKERS, Replay, chunk_capacities
from asp_cli.integrate.verl_fully_async import (VERL_TRAINERS, async_export_hint, fully_async_settings,
                                                resolve_trainer, sync_steps)
from asp_cli.integrate.verl_ppo import (V1_ASYNC_MODES, check_some_batch, chunking_notes, ppo_settings,
                                       v1_async_settings)
from asp_cli.integrate.verl_layout import to_verl
from asp_cli.integrate.verl_router import other_router_note, route_priorities, unrouted_agents_note
from asp_cli.reading.exported import EXPORT_REPEATS, METADATA_KEY
from asp_cli.reading.history_ids import schedule_ids
from asp_cli.reading.options import paths_of
from asp_cli.reading.tables import SOURCE_JSON
from asp_cli.settings import whole

# verl's default data.max_prompt_length (its trainer config; tests/verl/ checks the installed verl says so).
VERL_DEFAULT_MAX_PROMPT_TOKENS = 512
# How much longer a prompt may be than the schedule's count says (bytes / 4 against text at 3.1 characters a
# token: `asp_cli.predict.features`).
PROMPT_TOKENS_MARGIN = 1.3
# Measured by scripts/bench_verl_async.py (docs/benchmarks.md, "As verl routes an asynchronous trainer"): asp's plan
# for --dispatch planned kept to its instances by the router plug-in, against verl's own balancer on a shuffle.
ASYNC_PLANNED_LOSS = ("2.5-4.0% faster in asp's replay of verl's asynchronous trainers at a lag bound of 2 with a "
                      "trainer that keeps up and as many prompts in flight as the servers hold (with verl's default "
                      "16 prompts per server the route was 1.0-4.0% faster, and with a trainer that binds and "
                      "no lag bound 1.5-6.6% faster: measure)")


@dataclass
class ExportResult:
    """What `export` wrote: the rows, counts for people and scripts, warnings, and trainer settings."""

    frame: pl.DataFrame
    output: Path | None
    format: str
    order: str
    summary: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    trainer_settings: dict[str, Any] = field(default_factory=dict)


_SUFFIXES = {"parquet": (".parquet", ".pq"), "verl": (".parquet", ".pq"), "jsonl": (".jsonl", ".ndjson")}


def check_output_suffix(output: Path, format: str, kind: bytes = METADATA_KEY) -> None:  # noqa: A002 - the option's name
    """A Parquet file named .jsonl (or .csv) is read wrongly by whoever trusts the name: refuse the mismatch, and a
    Parquet output over a file another asp command wrote (``kind``: what this one writes, an export by default)."""
    from asp_cli.output import _name_fix, _name_problem, check_parquet_name

    if format != "jsonl":
        other = " or pass --format jsonl" if output.suffix.lower() in _SUFFIXES["jsonl"] else ""
        check_parquet_name(output, writer=f"--format {format}", other=other, kind=kind)  # the rule of every Parquet output
        return
    if output.suffix.lower() in _SUFFIXES[format]:
        return
    writes = "JSON lines"
    other = " or pass --format parquet" if output.suffix.lower() in _SUFFIXES["parquet"] else ""
    raise SettingsError(
        f"{output}: --format {format} writes {writes}, but {_name_problem(Path(output))}; "
        f"{_name_fix(Path(output), _SUFFIXES[format][0])}{other}"
    )


def export(
    schedule: str | Path | Replay,
    datasets: Sequence[str | Path],
    output: str | Path | None = None,
    *,
    format: str = "parquet",  # noqa: A002 - the CLI's word
    epoch: int | None = None,
    order: str | None = None,
    workers: int | None = None,
    verl_version: str | None = None,
    prefix: str = "",
    prompt_key: str | None = None,
    id_key: str | None = None,
    force: bool = False,
    route: str = "none",
    verl_trainer: str = "auto",
    metadata_key: str | None = None,
) -> ExportResult:
    """Write the dataset's rows in the schedule's order; the Python twin of `asp export`.

    Parameters
    ----------
    schedule
        A schedule file or an opened `Replay`.
    datasets
        The prompt file(s) the schedule was made from, in the same order.
    output
        Where to write (atomically); ``None`` only builds the frame.
    format
        ``parquet``, ``jsonl`` or ``verl``.
    epoch, order
        Export one epoch (default all, one after the other); ``dispatch`` or ``train`` (default for verl) order.
    workers
        Contiguous chunks per training batch for the ``train`` order (verl:
        ``actor_rollout_ref.rollout.agent.num_workers``); default verl's 8 for ``verl``, 1 for a schedule
        made with ``--router cache-aware`` or ``group-round-robin``, the schedule's instances otherwise.
    verl_version
        ``0.9`` (its default trainer cuts the batch's prompts with ``TensorDict.chunk``) or ``0.7`` (its
        trainer, and 0.9's ``trainer.use_v1=False``, cut the n-times repeated batch with ``DataProto.chunk``).
    prefix
        Put before asp's column names (``asp_`` when the dataset has its own ``epoch``, ``seq``...).
    prompt_key, id_key
        The dataset's prompt and id columns when not those recorded in the schedule. ``force``: replace the output.
    route
        ``none``, ``planned`` or ``length``: every row also carries its planned instance (or its predicted tokens
        per sample) in a ``priority`` column, which verl 0.9's single-turn agent loop passes to the rollout router
        `asp_cli.integrate.verl_router.ScheduleRouter` (docs/integrations.md, Option D; its tool agent loop does
        not: said), ordered by the row's position in the file.
    verl_trainer
        With ``verl``: ``ppo`` (verl's default trainer, ``verl.trainer.main_ppo``, synchronous),
        ``colocate-async`` or ``separate-async`` (that trainer's asynchronous modes, ``trainer.v1.trainer_mode``:
        `asp_cli.integrate.verl_ppo.v1_async_settings`), ``fully-async`` (its fully asynchronous trainer,
        `asp_cli.integrate.verl_fully_async`: the file in dispatch order, read one prompt at a time) or ``auto``:
        the one the schedule was made for (``asp schedule --verl-trainer``), else ``fully-async`` for a schedule
        planned for an asynchronous trainer on servers taking groups as they finish (``--engine streaming``, a lag
        bound other than 0, ``--trainer arrival``), ``colocate-async`` for one on servers with a lag bound above 0
        whose steps the trainer follows (``--trainer schedule``), else ``ppo``. Refused with another format.
    metadata_key
        With ``jsonl`` or ``parquet``: put asp's columns and the schedule's ``prompt_id`` into this object of each
        row (merged with its own) instead of beside the dataset's columns: how the ids reach slime's records.

    Raises
    ------
    InputError
        When the dataset does not match the schedule (naming the row and id), or cannot be read.
    ScheduleFormatError
        When the schedule is not one.
    SettingsError
        For an unknown format or order, or an epoch the schedule lacks.
    OutputError
        When the output exists (without ``force``) or equals an input.
    """
    from asp_cli.output import check_output_path

    check_format(format)
    epoch, workers = whole(epoch), whole(workers)  # NumPy's integers as ints: they reach the JSON summary
    if verl_trainer not in VERL_TRAINERS:
        spelled = str(verl_trainer).replace("_", "-")  # verl's own spelling, trainer.v1.trainer_mode=colocate_async
        hint = (f"; did you mean {spelled}?" if spelled in VERL_TRAINERS else
                "; verl's synchronous trainer is --verl-trainer ppo" if verl_trainer == "sync" else "")
        raise SettingsError(f"--verl-trainer must be one of {', '.join(VERL_TRAINERS)} (got {verl_trainer!r})" + hint)
    if verl_trainer != "auto" and format != "verl":  # it names the trainer whose settings are printed: none are
        raise SettingsError(f"--verl-trainer {verl_trainer} names the trainer whose settings --format verl prints "
                            f"(got --format {format}): add --format verl, or drop it")
    replay = schedule if isinstance(schedule, Replay) else Replay.open(schedule)
    verl_trainer = resolve_trainer(verl_trainer, replay.schedule.recorded_settings) if format == "verl" else "ppo"
    # verl's fully asynchronous rollouter reads one prompt at a time, in file order: the dispatch order.
    order = order or ("train" if format == "verl" and verl_trainer != "fully-async" else "dispatch")
    verl_version = check_options(format, order, workers, verl_version, prefix, route, metadata_key, verl_trainer)
    dealt_note = dealt_workers_note(replay.schedule.recorded_settings.router, workers, order, format)
    if workers is None and format == "verl":
        workers = VERL_AGENT_WORKERS
    elif workers is None and replay.schedule.recorded_settings.router in ("cache-aware", "group-round-robin"):
        workers = 1  # slime submits a rollout's rows in file order (its order, as `asp simulate` replays it: a slime
        # newcomer's --order train had 8 chunks), and OpenRLHF deals them to its engines in that order
    datasets = paths_of(datasets)
    if not datasets:
        raise InputError("no dataset given; name the prompt file(s) the schedule was made from")
    if output is not None:
        inputs = [*datasets, *([replay.schedule.path] if replay.schedule.path else [])]
        check_output_path(output, inputs, force=force)
        check_output_suffix(Path(output), format)

    chunking = VERL_CHUNKING[verl_version]
    if order == "train":
        rows = replay.trainer_order(epoch=epoch, workers=workers, chunking=chunking)
    else:
        rows = replay.rows(epoch=epoch)
    # JSON lines keep every row as the dataset holds it (`read_rows`'s sources); verl's layout reads the
    # reader's tags to tell a chat list from text in a prompt column of mixed kinds (`to_verl`).
    as_text: list[str] = []  # columns the reader gave as JSON text (objects of differing kinds: `object_fields`)
    kinds: dict[str, list[str | None]] = {}  # their kind of value in each row (`read_rows`)
    raw, warnings = _matched_dataset(replay, datasets, rows, prompt_key=prompt_key, id_key=id_key,
                                     sources=format == "jsonl", untag=format != "verl", as_text=as_text, kinds=kinds)
    if format == "verl":
        # extra_info.prompt_id is the schedule's id of each dataset row, which the rollout logs fed back
        # (`asp observe`) must carry (docs/integrations.md, "Feeding the lengths back").
        ids = raw.select("\x00row").join(rows.select(pl.col("row").alias("\x00row"), "prompt_id")
                                         .unique("\x00row", keep="first", maintain_order=True),
                                         on="\x00row", how="left", maintain_order="left")["prompt_id"]
        raw, verl_notes = to_verl(raw, ids, where=", ".join(str(d) for d in datasets),
                                  prompt_column=prompt_key or recorded_keys(replay.schedule.metadata)[1],
                                  source_column=_recorded(replay.schedule.metadata, "source"))
        warnings.extend(verl_notes)
        if verl_trainer != "fully-async":  # it reads one prompt at a time, no batches (E146)
            check_some_batch(rows.height, 1 if epoch is not None else len(replay.epochs), replay.train_batch_size,
                             epoch, replay.schedule.path.name if replay.schedule.path else "the schedule")
    # asp's columns: beside the dataset's, or with --metadata-key inside that object, the schedule's id with them.
    names = [f"{prefix}{c}" for c in (("prompt_id",) if metadata_key else ()) + ASP_COLUMNS]
    taken = object_fields(raw, metadata_key, ", ".join(map(str, datasets)), as_text) if metadata_key else raw.columns
    clashes = [n for n in names if n in taken]
    if clashes:
        raise InputError(
            f"the dataset already has {counted(len(clashes), 'field' if metadata_key else 'column')[2:]} "
            f"{', '.join(map(repr, clashes))}"
            f"{f' in its {metadata_key!r} objects' if metadata_key else ''}, which asp adds; "
            + ("pass --prefix asp_ to name asp's columns asp_epoch, asp_seq, ..." if not prefix else
               f"pass another --prefix than {prefix!r} (asp's columns would be {prefix}epoch, {prefix}seq, ...)"))
    if route != "none" and "priority" in raw.columns:
        raise InputError(f"the dataset already has a column 'priority', which --route {route} sets for verl's "
                         "router; rename or drop it")
    warnings.extend(filter(None, [unrouted_agents_note(raw["agent_name"].to_list() if "agent_name" in raw.columns
                                                       else None, route)]))
    picked, used = raw.select(pl.all().gather(rows["row"].to_numpy())), replay.schedule.metadata.get("columns_used")
    # Text only: a hand-edited list there was unhashable, exit 70 (a hostile-input round, 2026-12-07).
    id_columns = ({u.get("id") for u in used.values() if isinstance(u, dict) and isinstance(u.get("id"), str)}
                  if isinstance(used, dict) else set())
    if format != "verl" and not metadata_key and "prompt_id" not in picked.columns and any(
            c == "(row number)" or (isinstance(c, str) and "." in c and c not in picked.columns) for c in id_columns):
        # Row numbers are lost once the rows are reordered, and an id inside an object (verl's extra_info.index)
        # is where a log keeping top-level fields misses it: the rollout logs fed back need the id itself.
        picked = picked.with_columns(rows["prompt_id"].cast(pl.String).alias("prompt_id"))
        if "(row number)" in id_columns:
            warnings.append("the dataset has no id column, so the export adds `prompt_id` (the row-number id of the "
                            "schedule); keep it in the rollout log so `asp observe` can match the samples (where no "
                            "field of the row reaches the log, as in OpenRLHF, log each sample's prompt and response "
                            "text: `asp observe LOG --dataset` matches them by text)")
    asp = rows.select(([pl.col("prompt_id").cast(pl.String).alias(f"{prefix}prompt_id")] if metadata_key else [])
                      + [pl.col(c).alias(f"{prefix}{c}") for c in ASP_COLUMNS])
    if route != "none":  # the planned instance or predicted length, ordered by position in the file (`verl_router`)
        asp = asp.with_columns(pl.Series("priority", route_priorities(rows, route), dtype=pl.Int64))
    if metadata_key:  # the dataset's own top-level columns of those names stay, beside the object (`nest_columns`)
        picked = picked.rename({c: f"{SHADOWED}{c}" for c in picked.columns if c in names})
    frame = pl.concat([picked.drop("\x00row"), asp], how="horizontal")
    # asp's columns, written after the user's own
    added = [c for c in frame.columns if c not in raw.columns and not c.startswith(SHADOWED)]

    summary, trainer, notes = _facts(replay, rows, format=format, order=order, epoch=epoch, workers=workers,
                                     verl_version=verl_version, route=route, verl_trainer=verl_trainer)
    summary.update(prompt_column=prompt_key or next((u.get("prompt") for u in used.values() if isinstance(u, dict)),
                                                    None) if isinstance(used, dict) else prompt_key,
                   metadata_key=metadata_key)  # for slime's --input-key and --metadata-key
    column = summary["prompt_column"]  # chat messages want the trainer's chat template (OpenRLHF's is off by default)
    chat, mixed = mixed_chat_note(column, frame[column].to_list(), format) if column in as_text else (False, None)
    summary["prompt_is_chat"] = column in frame.columns and (isinstance(frame.schema[column], pl.List) or chat)
    summary["label_column"] = label = next((c for c in LABEL_KEYS if c in raw.columns and c != column), None)
    scalars = label in kinds and not {"object", "list"} & set(kinds[label])  # numbers beside text, say
    if format != "verl" and label and scalars:
        warnings.extend(filter(None, [mixed_label_note(label, kinds[label], format)]))
    elif format != "verl" and label and (isinstance(raw.schema[label], (pl.Struct, pl.List)) or label in as_text):
        warnings.append(object_label_note(label))  # slime's --rm-type rules take text or a number
    if format == "parquet" and label:  # MindSpeed-RL's preprocessing drops a number's row
        warnings.extend(filter(None, [mindspeed_label_note(label, raw[label])]))
    warnings.extend([mixed] if mixed else [])  # chat lists in some rows, text in others
    if column in frame.columns and frame.schema[column] == pl.String and column not in as_text:
        warnings.extend(filter(None, [chat_text_note(column, frame[column].head(20).to_list(), format)]))
    warnings.extend([*notes, *([dealt_note] if dealt_note else [])])
    if output is not None:
        document = {
            "format": "asp.export",
            "asp_version": __version__,
            "export_format": format,
            "order": order,
            "epoch": epoch,
            "workers": summary.get("workers"),
            "verl_version": verl_version if format == "verl" else None,
            "verl_trainer": verl_trainer if format == "verl" else None,
            "route": route,
            "metadata_key": metadata_key,
            "prefix": prefix,  # before asp's column names: the id's real name under --metadata-key (reading.exported)
            "schedule": replay.schedule.path.name if replay.schedule.path else None,
            "schedule_settings": replay.settings,
            "schedule_ids": schedule_ids(replay.schedule.metadata),  # what its ids name, for `asp observe --dataset`
            "trainer_settings": trainer,
        }
        if format == "jsonl":
            warnings.extend(non_finite_notes(frame))
        write_rows(frame, Path(output), format, document, METADATA_KEY, replace=force, added=added,
                   nest=(metadata_key, names) if metadata_key else None,
                   source=", ".join(Path(d).name for d in datasets))
    if metadata_key:
        frame = nest_columns(frame, names, metadata_key)
    return ExportResult(frame=frame.drop(SOURCE_JSON, strict=False), output=Path(output) if output else None,
                        format=format, order=order,
                        summary=summary, warnings=warnings, trainer_settings=trainer)


# --------------------------------------------------------------------------------------------------------
# Matching the dataset to the schedule


def check_dataset(replay: Replay, datasets: Sequence[str | Path]) -> tuple[int, list[str]]:
    """Check that ``datasets`` hold the schedule's prompts at its rows, as `export` does.

    Returns
    -------
    (rows, warnings)
        The files' row count (inputs concatenated) and warnings for people.

    Raises
    ------
    InputError
        When a scheduled row is missing or holds another prompt id (naming the row and id).
    """
    raw, warnings = _matched_dataset(replay, paths_of(datasets), replay.frame, prompt_key=None, id_key=None,
                                     sources=False, untag=True)
    return raw.height, warnings


def _matched_dataset(
    replay: Replay,
    datasets: list[Path],
    rows: pl.DataFrame,
    *,
    prompt_key: str | None,
    id_key: str | None,
    sources: bool,
    untag: bool,
    as_text: list[str] | None = None,
    kinds: dict[str, list[str | None]] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """Read the dataset's raw rows and check that every scheduled (row, prompt_id) is where the schedule says
    (``sources``, ``untag`` and ``as_text`` as `read_rows` takes them)."""
    from asp_cli.fingerprint import file_fingerprint, recorded_order
    from asp_cli.reading import ReadOptions, ReadReport, read_prompts

    warnings: list[str] = []
    recorded_id, recorded_prompt = recorded_keys(replay.schedule.metadata)
    recorded = {flag: f"(from {flag})" for flag, given in (("--prompt-key", prompt_key), ("--id-key", id_key))
                if given is None}  # the keys the schedule's metadata names, not the user
    read = ReadOptions(prompt_key=prompt_key or recorded_prompt, id_key=id_key or recorded_id, on_bad_row="skip")
    try:
        prompts, read_report = read_prompts(datasets, read)
    except InputError as exc:
        repeats = str(exc).startswith("duplicate") or EXPORT_REPEATS in str(exc)  # the reader's word, said here
        reexport = reexport_error(datasets, replay.schedule.metadata) if repeats else None
        if reexport is not None:  # an export of several epochs: its ids repeat (it names the schedule's own file)
            raise reexport from exc
        for flag, origin in recorded.items():
            if origin in str(exc):  # say whose key it was, and how to name another
                what = "prompt" if flag == "--prompt-key" else "id"
                raise InputError(str(exc).replace(origin, f"(the {what} column the schedule was made with; pass "
                                                          f"{flag} if this dataset names it otherwise)")) from exc
        raise
    unreadable = ReadReport()
    heights: list[int] = []
    mixed: list[str] = []
    differing: list[str] = []
    raw = read_rows(datasets, report=unreadable, heights=heights, mixed=mixed, sources=sources, untag=untag,
                    differing=differing, as_text=as_text, kinds=kinds)
    if not sources:  # with the sources, JSON lines give every row's own values back
        warnings.extend([*differing, *([mixed_kinds_warning(mixed)] if mixed else [])])
    starts = np.cumsum([0, *heights])

    def file_of(row: int) -> int:
        """Which dataset file holds row ``row`` (0-based over all inputs; past the end: the last)."""
        return min(max(int(np.searchsorted(starts, row, side="right")) - 1, 0), len(datasets) - 1)

    def place(row: int) -> str:
        """Where dataset row ``row`` is: its file and its row there, from 1 (rows: the file's readable records,
        as `asp schedule` numbered them; a skipped line takes no number)."""
        k = file_of(row)
        return f"{datasets[k]} row {row - int(starts[k]) + 1}"

    if unreadable.skipped_rows:
        # Lines that are not JSON objects take no row number (as in `asp schedule --on-bad-row skip`), so the
        # rows after them still line up with the schedule's.
        warnings.append(f"skipped {counted(unreadable.skipped_rows, 'unreadable line')} of the dataset, e.g. "
                        f"{'; '.join(unreadable.skipped_examples[:3])}; they are not exported")

    wanted = rows.select("row", "prompt_id").unique("row").sort("row")
    joined = wanted.join(prompts.select("row", pl.col("prompt_id").alias("dataset_id")), on="row", how="left")
    missing = joined.filter(pl.col("dataset_id").is_null())
    wrong = joined.filter(pl.col("prompt_id") != pl.col("dataset_id"))
    # The first row that does not match is said, whichever way it fails: another file, shorter than the schedule's,
    # was blamed for a row past its end (row 72) where its row 1 already held another id (a newcomer round).
    if missing.height and not (wrong.height and wrong["row"][0] < missing["row"][0]):
        first = missing.row(0, named=True)
        where = place(first["row"])  # past the end: the last file, counted on past its rows
        # Why the row may be unusable (a line that is not UTF-8, a prompt that is not text): the reader says, of the
        # row's own file. Its first bad line need not be this row (schedules skip bad rows on purpose), so it is
        # shown as the file's, not as the row's.
        try:
            read_prompts([datasets[file_of(first["row"])]], dataclasses.replace(read, on_bad_row="error"))
            reason = ""
        except InputError as exc:
            reason = f" (that file's first unreadable line: {_without_skip_hint(exc)})"
        raise InputError(
            f"{where}: the schedule expects prompt id {shown_id(first['prompt_id'])} there, but the dataset "
            f"({counted(raw.height, 'readable row')}) has no usable prompt there{reason}; export with the file(s) the schedule "
            "was made from"
        )
    if wrong.height:  # the right ids in another order (an earlier export) are told the file the schedule records
        first = wrong.row(0, named=True)
        raise misplaced_id_error(place(first["row"]), first["dataset_id"], first["prompt_id"], wrong.height,
                                 prompts["prompt_id"].to_list(), wanted["prompt_id"].to_list(), datasets,
                                 replay.schedule.metadata)
    per_epoch = replay.frame.group_by("epoch").len().sort("epoch")
    counts = per_epoch["len"].to_list()
    epochs = replay.schedule.settings.get("epochs")
    if len(set(counts)) > 1:
        low = int(per_epoch["len"].arg_min())  # type: ignore[arg-type]
        warnings.append(f"epoch {per_epoch['epoch'][low]} holds {counts[low]:,} prompts where epoch "
                        f"{per_epoch['epoch'][int(per_epoch['len'].arg_max())]} holds {max(counts):,}: rows were "
                        "removed from the schedule (cut or edited); the missing ones are not exported")
    elif isinstance(epochs, int) and not isinstance(epochs, bool) and per_epoch.height < epochs:
        warnings.append(f"the schedule's settings name {epochs} epochs but its rows hold {per_epoch.height} (epoch"
                        f"{'s' if per_epoch.height > 1 else ''} {', '.join(map(str, per_epoch['epoch'].to_list()))}): "
                        "rows were removed from the schedule (cut or edited); only those are exported")
    scheduled = replay.frame["row"].n_unique()
    if raw.height > scheduled:
        warnings.append(
            f"{counted(raw.height - scheduled, 'dataset row')} {'is' if raw.height - scheduled == 1 else 'are'} not in "
            "the schedule (skipped as bad rows when scheduling?) and "
            + ("is" if raw.height - scheduled == 1 else "are") + " not exported"
        )
    recorded = replay.schedule.metadata.get("input_fingerprint")
    numbered = any(used.get("id") == "(row number)" for used in read_report.columns_used.values())
    if recorded and recorded != file_fingerprint(datasets) and numbered:
        # Row-number ids match any file of as many rows: they prove nothing (a shuffled copy was exported with
        # the schedule applied to the wrong prompts, exit 0). An earlier export of one epoch is named (scheduling
        # it, as said below, is refused: E102).
        exported = reexport_error(datasets, replay.schedule.metadata, repeats=False)
        if exported is not None:
            raise exported
        ordered = recorded_order(replay.schedule.metadata.get("inputs"), datasets)
        if ordered is not None:  # the same files, listed in another order: it said their bytes differ
            raise InputError(f"{', '.join(map(str, datasets))}: the files the schedule was made from, in another order; "
                             f"give them in the order the schedule was made from: {' '.join(map(str, ordered))}")
        raise InputError(
            f"{', '.join(map(str, datasets))}: not the file(s) the schedule was made from (their bytes differ), and "
            "the schedule's ids are row numbers, which match any file of as many rows; give the file it was made "
            "from, or schedule this one (with an id column, an edited copy can be matched by id)")
    if recorded and recorded != file_fingerprint(datasets):
        warnings.append(
            "the dataset's bytes differ from the file(s) the schedule was made from; ids match row by row, "
            "so exporting anyway"
        )
    return raw, warnings


def _without_skip_hint(exc: InputError) -> str:
    """A reader's error without its "pass --on-bad-row skip" advice, which `asp export` does not take."""
    from asp_cli.reading.tables import BAD_ROW_FIX

    return str(exc).replace(f"; {BAD_ROW_FIX}", "")


def _recorded(metadata: dict[str, Any], what: str) -> str | None:
    """The column `asp schedule` read as ``what`` (its first input's `columns_used`), or None (a damaged entry:
    detect the columns again)."""
    used = metadata.get("columns_used") or {}
    first = next(iter(used.values()), {}) if isinstance(used, dict) else {}
    value = first.get(what) if isinstance(first, dict) else None
    return value if isinstance(value, str) and value else None


def recorded_keys(metadata: dict[str, Any]) -> tuple[str | None, str | None]:
    """The id and prompt columns `asp schedule` used (first input), or None for row numbers / detection (`asp export`
    and `asp observe --schedule --dataset` read the dataset with them unless told otherwise)."""
    id_col = _recorded(metadata, "id")
    return (None if id_col == "(row number)" else id_col), _recorded(metadata, "prompt")


# --------------------------------------------------------------------------------------------------------
# Facts, warnings and trainer settings


def batches_repeating_a_prompt(rows: pl.DataFrame) -> list[int]:
    """The training batches (``trainer_batch``) that hold some dataset ``row`` more than once, in order."""
    extra = rows.group_by("trainer_batch").agg((pl.len() - pl.col("row").n_unique()).alias("extra"))
    return extra.filter(pl.col("extra") > 0).sort("trainer_batch")["trainer_batch"].to_list()


def _facts(
    replay: Replay,
    rows: pl.DataFrame,
    *,
    format: str,  # noqa: A002
    order: str,
    epoch: int | None,
    workers: int | None,
    verl_version: str,
    route: str = "none",
    verl_trainer: str = "ppo",
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    size = replay.train_batch_size
    n = replay.samples_per_prompt
    n_rows = rows.height
    full, trailing = divmod(n_rows, size)
    epochs = [epoch] if epoch is not None else replay.epochs
    workers = int(workers if workers is not None else replay.instances)
    notes: list[str] = []
    recorded = replay.schedule.recorded_settings
    steps = replay.frame.sort("seq")["train_step"]  # in dispatch order: whether batches of rows mix steps there
    summary: dict[str, Any] = {
        "rows": n_rows, "epochs": epochs, "format": format, "order": order, "train_batch_size": size,
        "full_batches": full, "trailing_rows": trailing, "samples_per_prompt": n,
        "schedule_trainer": recorded.trainer,  # which file order a trainer wants
        "schedule_max_lag": recorded.max_lag, "router": recorded.router, "instances": replay.instances,
        "steps_in_dispatch_order": bool(steps.diff().drop_nulls().min() >= 0) if steps.len() > 1 else True,
        "schedule_router": recorded.timed_router, "prompts_per_server": recorded.prompts_per_server,  # how auto timed it
        # what a trainer's rollout settings must match (MindSpeed-RL's, printed for a Parquet export)
        "schedule_engine": recorded.engine, "schedule_minibatch_size": recorded.minibatch_size,
        "schedule_max_response_tokens": recorded.max_response_tokens,
        "slot_groups": replay.instances * replay.schedule.cost_preset().max_num_seqs // max(n, 1),
        "planned_from_history": _calibrated_by_history(replay.schedule.metadata)}  # a later epoch's, likely
    trainer: dict[str, Any] = {}
    # What a train batch size must divide for every batch to be whole: an epoch's prompts (so that no batch spans
    # two epochs either), or the rows of a one-epoch file.
    per_epoch = replay.rows(epoch=epochs[0]).height
    divides = f"{per_epoch:,}{dividing_example(per_epoch, size)}"
    if order == "train":
        batches = rows.group_by("trainer_batch").agg(pl.col("train_step").n_unique().alias("steps"))
        misaligned = int((batches["steps"] > 1).sum())
        summary["workers"] = workers
        summary["chunking"] = VERL_CHUNKING[verl_version]
        summary["worker_prompts"] = chunk_capacities(size, n, workers, rule=VERL_CHUNKING[verl_version]).tolist()
        summary["batches_spanning_steps"] = misaligned
        # A schedule for a trainer that takes groups as they finish lets one epoch's late groups share a step with
        # the next epoch's early ones: a batch then holds a prompt twice.
        repeated = batches_repeating_a_prompt(rows)
        summary["batches_repeating_a_prompt"] = len(repeated)
        # verl's asynchronous modes are run as one run over every epoch (`v1_async_settings`): no file per epoch.
        one_run = format == "verl" and verl_trainer in V1_ASYNC_MODES
        if repeated:
            recorded = replay.schedule.recorded_settings
            if per_epoch % size:
                cause = (f"an epoch's {per_epoch:,} prompts do not fill whole batches of {size}, so a batch spans "
                         f"two epochs; schedule with a --train-batch-size that divides {divides}"
                         + ("" if one_run else ", or export one epoch at a time (--epoch)"))
            elif recorded.max_lag == 0 and recorded.trainer == "schedule":
                cause = "the schedule's steps span epochs; export one epoch at a time (--epoch)"
            else:
                cause = ("the schedule lets epochs overlap, as a trainer that takes groups as they finish would; for "
                         "a synchronous trainer (verl's default) make the schedule with --max-lag 0 --trainer schedule")
            notes.append(f"{len(repeated)} training batch(es) hold a prompt twice (the first: batch {repeated[0]}): "
                         f"{cause}")
        if misaligned:
            advice = (f"; an epoch's {per_epoch:,} prompts end in a partial step, which shifts every later batch: "
                      + ("" if one_run else "export one epoch at a time (--epoch), or ")
                      + "schedule with a --train-batch-size that divides "
                      f"{divides}" if len(epochs) > 1 and per_epoch % size else "")
            notes.append(
                f"{misaligned} training batch(es) of {size} rows mix rows the schedule expects in different "
                f"steps (an epoch cut mid-step, or a partial step); the order is kept, only the cut moves{advice}"
            )
    if format == "verl" and verl_trainer == "fully-async":
        summary["verl_version"] = verl_version
        summary["verl_trainer"] = verl_trainer
        trainer, async_notes = fully_async_settings(replay.schedule.recorded_settings, n_rows, n, route=route)
        notes.extend(async_notes)
        if order == "train":
            notes.append("verl's fully asynchronous rollouter reads the file one prompt at a time and starts each "
                         "as a slot frees: export in dispatch order (leave out --order train)")
    elif format == "verl":
        summary["verl_version"] = verl_version
        summary["verl_trainer"] = verl_trainer
        trainer = ppo_settings(replay.schedule.recorded_settings, size, workers if order == "train" else None,
                               route=route, epoch=epoch, steps=full, epochs=len(replay.epochs), notes=notes,
                               from_history=_calibrated_by_history(replay.schedule.metadata),
                               command_line=replay.schedule.metadata.get("command_line"),
                               mini_batch=size // sync_steps(size) if verl_trainer == "separate-async"
                               else None)
        if verl_trainer in V1_ASYNC_MODES:
            path = replay.schedule.path
            trainer.update(v1_async_settings(replay.schedule.recorded_settings, size, trainer=verl_trainer,
                                             schedule_path=str(Path(path).resolve()) if path else None, order=order,
                                             epoch=epoch, notes=notes))
        if trailing:
            notes.append(
                f"the last batch has {trailing} rows, fewer than data.train_batch_size={size}: verl "
                + ("drops it (drop_last=True)" if verl_trainer == "ppo" else "trains whole batches only")
                + f", so those {trailing} prompts are not trained; schedule with a "
                "--train-batch-size that divides " + (
                    f"an epoch's {per_epoch:,} prompts{dividing_example(per_epoch, size)}" if len(epochs) > 1
                    else f"its {n_rows:,} rows{dividing_example(n_rows, size)}") + " to avoid it (verl also needs "
                "data.train_batch_size x rollout.n divisible by its GPUs, trainer.n_gpus_per_node x nnodes: "
                "pick one that is)"
            )
    if format == "verl":
        engine = replay.schedule.recorded_settings.engine
        if engine != "streaming":
            # verl 0.7-0.9 roll out on servers (rollout.mode async): every sample its own request, to the server
            # with the fewest in flight. A plan for blocking generate() calls was judged for another engine (a
            # newcomer's verl run, 2026-12-05, read it from verl's agent loop).
            notes.append(
                f"the schedule was planned for the {engine} engine (blocking generate() calls), but verl 0.7-0.9 "
                "roll out on vLLM/SGLang servers that refill freed slots (actor_rollout_ref.rollout.mode=async), each "
                "sample a request to the server with the fewest in flight: make the schedule with --engine streaming "
                "(and --instances the rollout replicas), so that its estimates and auto's choice are for verl's "
                "engine; for verl's default trainer, which trains each batch as it is generated, also --max-lag 0 "
                "--trainer schedule (with --engine streaming alone the schedule is for an asynchronous trainer and "
                "exports for verl's fully asynchronous one)")
        recorded = replay.schedule.recorded_settings
        if verl_trainer == "ppo" and recorded.max_lag != 0:
            # A plan for rollout running ahead of the trainer, replayed as synchronous training, is another plan's
            # time (on blocking engines 804 s against 614 s for the one made for it, on the sample data: README).
            notes.append(
                "the schedule was planned for an asynchronous trainer (--max-lag "
                f"{'none' if recorded.max_lag is None else recorded.max_lag}), but verl's default trainer "
                "(verl.trainer.main_ppo, trainer.v1.trainer_mode=sync) generates and trains each batch in turn: make "
                "the schedule with --max-lag 0 --trainer schedule, for which its steps and auto's choice are planned"
                + async_export_hint(recorded))  # not a v1 mode where it refuses the lag (E81)
        if route != "none":  # the column routes nothing until verl loads asp's router
            notes.append(f"--route {route}: verl routes by the priority column only through asp's router: set "
                         "actor_rollout_ref.rollout.router_config_path to a YAML holding router_class: "
                         "asp_cli.integrate.verl_router.ScheduleRouter (docs/integrations.md, Option D)"
                         + ("; the schedule was planned for free dispatch, so its instance column was not planned to "
                            "be kept to: make it with --dispatch planned" if route == "planned"
                            and replay.schedule.recorded_settings.dispatch != "planned" else ""))
        notes.extend(filter(None, [other_router_note(replay.schedule.recorded_settings)]))
        if route == "planned":  # one server per group was slower in asp's replays of verl's balancer, either trainer
            synchronous = replay.schedule.recorded_settings.max_lag == 0
            notes.append("--route planned keeps each group on one server, but verl's balancer spreads every group's "
                         "samples over the servers, which was " + ("1.9-4.1% faster in asp's replay of verl's "
                                                                   "synchronous trainer" if synchronous else
                                                                   ASYNC_PLANNED_LOSS)
                         + " (docs/benchmarks.md, \"As verl routes\"): export without --route")
        if order == "train" and verl_trainer != "fully-async":
            notes.extend(chunking_notes(size, n, workers, verl_version))
            if workers != replay.instances and engine != "streaming":
                # verl generates each batch in `workers` chunks, one per agent-loop worker: not the schedule's
                # minibatches on its instances, which is what its estimates and `asp simulate` replay.
                notes.append(
                    f"the batches are laid out for {workers} agent-loop workers (actor_rollout_ref.rollout.agent."
                    f"num_workers), but the schedule was planned for {replay.instances} instances: verl will "
                    f"generate each batch in {workers} chunks of about {-(-size // workers)} prompts, not in the "
                    f"schedule's minibatches, so its estimates and `asp simulate` describe another plan; pass "
                    f"--workers {replay.instances} (and set num_workers to it), or make the schedule with "
                    f"--instances {workers}")
        longest = int(rows["prompt_tokens"].max()) if "prompt_tokens" in rows.columns and rows.height else 0
        # The schedule's count is bytes / 4 unless `asp schedule` had a tokenizer, and math or code text runs up
        # to 30% more tokens than that (3.1 characters a token), before the chat template: the note comes early.
        needed = math.ceil(longest * PROMPT_TOKENS_MARGIN)
        if needed > VERL_DEFAULT_MAX_PROMPT_TOKENS:
            # verl 0.9's agent loop cuts the start off a prompt over rollout.prompt_length (data.max_prompt_length
            # by default: AgentLoopWorker._cap_text_prompt_length), and filtering such prompts out instead
            # (data.filter_overlong_prompts=True) would shift every later batch.
            notes.append(
                f"the longest prompt has about {longest:,} tokens by the schedule's count (4 bytes a token unless "
                f"asp schedule had --tokenizer; math and code text run up to 30% more, before the chat template), "
                f"near or past verl's default data.max_prompt_length={VERL_DEFAULT_MAX_PROMPT_TOKENS}, past which "
                f"verl cuts the start of a prompt at rollout: set data.max_prompt_length to at least {needed:,} (in "
                "the printed settings, --json's trainer_settings); keep data.filter_overlong_prompts=False, which would drop those prompts and "
                "shift every later batch"
            )
            if trainer:
                trainer["data.max_prompt_length"] = needed
    elif trailing:
        notes.append(
            f"the last batch has {counted(trailing, 'row')}, fewer than the train batch size {size}; a trainer with "
            f"drop_last drops {'them' if trailing != 1 else 'it'}"
        )
    return summary, trainer, notes


def _calibrated_by_history(metadata: dict[str, Any]) -> bool:
    """Whether the schedule's predictions were calibrated by observed lengths (its metadata's
    ``predictor.calibration.prompts_seen``); a record edited out of shape says no (it ended in an internal error: a
    hostile-input round)."""
    predictor = metadata.get("predictor")
    calibration = predictor.get("calibration") if isinstance(predictor, dict) else None
    return isinstance(calibration, dict) and bool(calibration.get("prompts_seen"))
