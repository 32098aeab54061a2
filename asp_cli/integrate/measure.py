"""The Python twin of `asp replay`: replay a schedule (and baselines of its prompts) on real engines with the
recorded lengths forced, next to what asp's simulator predicts for the same run (docs/replay.md).

`replay_schedule` reads the schedule, the lengths and the prompts, builds one request plan per arrangement,
simulates each, then (unless ``dry_run``) sends them to the servers (`asp_cli.integrate.live`) or to an
in-process vLLM engine (`asp_cli.integrate.offline`), and writes the timeline (`asp_cli.integrate.timings`)
atomically, also when the run was interrupted or a server failed: what was measured is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.errors import ServerError, SettingsError, arguments_named_in_python, expect_kind, named_in_python
from asp_cli.integrate.live import LiveSettings, Progress
from asp_cli.integrate.replay_plan import ASP, RequestPlan, Simulated
from asp_cli.integrate.timings import COLUMNS, figures_by_arrangement, rollout_figures, write_timeline
from asp_cli.reading.options import ReadOptions, paths_of


@named_in_python()
@dataclass(frozen=True)
class InProcessSettings:
    """Replay through vLLM's offline ``LLM`` in this process instead of servers (blocking engine only)."""

    model: str
    tensor_parallel_size: int = 1

    def __post_init__(self) -> None:
        from asp_cli.settings import check_count

        check_count("--tensor-parallel-size", self.tensor_parallel_size, minimum=1)


@dataclass
class ReplayReport:
    """What `replay_schedule` did: the summary document, the timeline, and how the run ended."""

    document: dict[str, Any]
    timeline: pl.DataFrame | None = None
    interrupted: bool = False
    error: ServerError | None = None
    warnings: list[str] = field(default_factory=list)
    # Where the timeline went: the output, or beside it (`partial_path`) for a run cut short over an existing file.
    written: Path | None = None


# `asp replay` names the id and length columns of its --lengths files so.
REPLAY_READ = ReadOptions(length_id_flag="--lengths-id-key", length_flag="--lengths-length-key")


def arrangement_names(baselines: list[str], compare: bool, engine: str = "blocking") -> list[str]:
    """The run order: asp, then the baselines named (with ``compare`` and none named: the equal-footing ones
    for ``engine``)."""
    from asp_cli.integrate.replay_plan import equal_footing_names

    named = list(dict.fromkeys(baselines))
    if compare:
        return [ASP, *[b for b in (named or equal_footing_names(engine)) if b != ASP]]
    return named or [ASP]


@arguments_named_in_python
def replay_schedule(
    schedule_path: str | Path,
    datasets: str | Path | Sequence[str | Path] = (),
    *,
    output: Path | None = None,
    live: LiveSettings | None = None,
    in_process: InProcessSettings | None = None,
    lengths: str | Path | Sequence[str | Path] = (),
    read: ReadOptions = REPLAY_READ,
    baselines: str | Sequence[str] = (),
    compare: bool = False,
    synthetic_prompts: bool = False,
    preset: str | None = None,
    seed: int | None = None,
    dry_run: bool = False,
    gpus_per_instance: int = 1,
    progress: Progress | None = None,
    force: bool = False,
    engine: str | None = None,
    lengths_epoch: int | None = None,
) -> ReplayReport:
    """Replay a schedule's arrangements on real engines (or only plan it, with ``dry_run``).

    Parameters
    ----------
    schedule_path, datasets
        The schedule (a file, or one made in memory: `asp_cli.schedule`'s result), and the prompt file(s) it was
        made from (a path or a list of them; or none, with ``synthetic_prompts``).
    output
        Where the timeline goes (not written on a dry run).
    live, in_process
        Servers to send to, or an in-process vLLM engine; one of them unless ``dry_run``.
    lengths
        Observed response lengths, a path or a list of them (`asp_cli.reading.read_lengths` formats); prompts
        without any are sampled around their predictions, as in ``asp simulate``.
    read
        Which columns of the length files and the dataset to read (default: found by name, or as the
        schedule recorded), and what to do with a bad row of a length file.
    baselines, compare
        Which arrangements to run (`arrangement_names`): a baseline's name or a list of them.
    preset
        The simulator's preset for the side-by-side prediction (default: the schedule's).
    force
        Replace an existing ``output``.
    engine
        A dry run's engine without ``live`` or ``in_process``: 'blocking' or 'streaming' (default: streaming for a
        schedule planned for servers, else blocking), as ``live.engine`` is with servers.
    lengths_epoch
        Force only that epoch's samples of ``lengths`` (their ``epoch`` column; -1: those without one, a probe's),
        as `asp simulate --lengths-epoch` replays them (`asp_cli.sim.lengths.epoch_samples`).

    Raises
    ------
    ScheduleFormatError, InputError, SettingsError
        Before anything is sent.
    """
    from asp_cli.integrate.replay_plan import arrangements, build_plans, dataset_prompts, prompt_lengths, \
        simulate_plan
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import schedule_of
    from asp_cli.settings import ScheduleSettings, check_count, check_replay_size, whole
    from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS, epoch_samples, refuse_unmatched

    expect_kind(live, LiveSettings, "live", "servers=[URL, ...]", optional=True)  # a dict: an AttributeError
    expect_kind(in_process, InProcessSettings, "in_process", "model=PATH", optional=True)
    if not dry_run and (live is None) == (in_process is None):
        raise SettingsError("give --servers (one URL per instance) or --in-process MODEL")
    # One path or name as well as a list: a Python user's "prompts.jsonl" was read as the files "p", "r", ...
    datasets, lengths = paths_of(datasets), paths_of(lengths)
    baselines = [baselines] if isinstance(baselines, str) else list(baselines)
    # NumPy's integers too
    seed, gpus_per_instance, lengths_epoch = whole(seed), whole(gpus_per_instance), whole(lengths_epoch)
    if dry_run and not datasets:
        synthetic_prompts = True  # a plan needs no prompt text
    if bool(datasets) == bool(synthetic_prompts):
        raise SettingsError("give the dataset the schedule was made from, or --synthetic-prompts (not both)")
    # The one rule for counts: --seed -1 reached NumPy's generator (exit 70, an internal error), and
    # --gpus-per-instance had no upper bound (a typo printed 9.8e19 GPU-minutes).
    check_count("--gpus-per-instance", gpus_per_instance, minimum=1)
    check_count("--seed", seed, minimum=0, optional=True)
    check_count("--lengths-epoch", lengths_epoch, minimum=-1, maximum=2**31 - 1, optional=True)
    read = ReadOptions.named_as(read, REPLAY_READ)
    read.check_length_keys_used(lengths, "--lengths")
    schedule = schedule_of(schedule_path)
    recorded = schedule.recorded_settings
    frame = schedule.frame.sort("seq")
    k = max(recorded.instances, int(frame["instance"].max()) + 1)
    if live is not None and len(live.servers) != k:
        raise SettingsError(f"the schedule plans {k} instances but --servers names {len(live.servers)}; give one URL "
                            f"per instance, or make the schedule with --instances {len(live.servers)}")
    planned_for = getattr(recorded, "engine", "continuous")
    if engine not in (None, "blocking", "streaming"):
        raise SettingsError(f"--engine must be one of blocking, streaming (got {engine!r})")
    asked = live.engine if live is not None else engine if in_process is None else None
    engine = asked or ("streaming" if planned_for == "streaming" else "blocking")
    if live is not None:
        live = dataclasses.replace(live, engine=engine)
    elif in_process is not None and engine != "blocking":
        raise SettingsError("--in-process replays blocking minibatches only, and this schedule is planned for a "
                            "streaming engine; serve the model and pass --servers")
    names = arrangement_names(list(baselines), compare, engine)
    hardware = schedule.cost_preset(preset)
    observed = None
    warnings: list[str] = []
    if lengths:
        observed, _ = read_lengths(lengths, read)
    observed = epoch_samples(observed, lengths_epoch, lengths)
    # None of their ids the schedule's: every length around the predictions, exit 0 (E76, as asp simulate's)
    refuse_unmatched(observed, frame["prompt_id"], lengths)
    check_replay_size(frame.height, recorded.samples_per_prompt, "asp replay")
    rows, truth, by_epoch, info, clipped = prompt_lengths(
        frame, observed, samples_per_prompt=recorded.samples_per_prompt, seed=recorded.seed if seed is None else seed,
        max_response_tokens=recorded.max_response_tokens, per_epoch=lengths_epoch is None)
    if info.prompts_sampled:
        warnings.append(f"{info.prompts_sampled:,} prompts have no observed length and replay lengths sampled around "
                        "their predictions; give --lengths from an earlier epoch or a probe")
    if info.prompts_over_group:
        warnings.append(info.over_group_warning())
    if clipped:
        warnings.append(f"{clipped:,} observed lengths exceed the schedule's --max-response-tokens "
                        f"({recorded.max_response_tokens:,}) and were cut to it")
    texts = None if synthetic_prompts else dataset_prompts(list(datasets), schedule.metadata,
                                                            prompt_key=read.prompt_key, id_key=read.id_key)
    # Schedules written before the dispatch setting were made for (and replayed with) their instance column.
    # The baselines in asp's sizes are cut as asp's minibatches were: by its budget and its KV accounting.
    settings = ScheduleSettings.from_dict({
        **recorded.to_dict(), "instances": k, "dispatch": (schedule.settings or {}).get("dispatch", "planned"),
        "max_tokens_per_minibatch": schedule.kv_tokens_per_minibatch or recorded.max_tokens_per_minibatch})
    plans = build_plans(arrangements(frame, settings, names, hardware, engine,
                                     kv_cut=None if recorded.engine == "streaming" else schedule.kv_budget), rows,
                        truth, texts, DEFAULT_PROMPT_TOKENS, by_epoch)
    limit = live.max_in_flight if live is not None else None
    if engine == "streaming" and limit is None:
        limit = int(hardware.max_num_seqs)
    simulated = [simulate_plan(p, hardware, engine=engine, instances=k, max_in_flight=limit,
                               train_batch_size=recorded.train_batch_size) for p in plans]
    document: dict[str, Any] = {
        "schedule": str(schedule.path or "the schedule in memory"),
        "instances": k,
        "samples_per_prompt": recorded.samples_per_prompt,
        "engine": engine,
        "max_in_flight": limit,
        "stream": live.stream if live is not None else False,
        "prompts": "synthetic" if synthetic_prompts else "dataset",
        "preset": hardware.name,
        "preset_source": preset or recorded.preset,  # --preset, or the one the schedule recorded (its fields)
        "gpus_per_instance": gpus_per_instance,
        "lengths": {**info.to_dict(), "clipped_to_max_response_tokens": clipped, "epoch": lengths_epoch},
        "dry_run": dry_run,
    }
    if dry_run:
        document["arrangements"] = [_arrangement_entry(p, s, None, None, k, gpus_per_instance)
                                    for p, s in zip(plans, simulated)]
        document["simulated_gpu_minutes_total"] = sum(a["simulated_gpu_minutes"] for a in document["arrangements"])
        return ReplayReport(document, warnings=warnings)
    if live is not None:
        from asp_cli.integrate.live import run_live

        outcome = run_live(plans, live, progress=progress, default_in_flight=int(hardware.max_num_seqs))
        urls = list(live.servers)
        document["servers"] = outcome.servers
        document["model"] = sorted({s["model"] for s in outcome.servers})
    else:
        from asp_cli.integrate.offline import run_in_process

        assert in_process is not None
        outcome = run_in_process(plans, in_process, instances=k, progress=progress)
        urls = [f"in-process:{in_process.model}"] * k
        document["servers"] = [{"url": urls[0], "model": in_process.model, "kv_cache_tokens": None}]
        document["model"] = [in_process.model]
    timeline = timeline_frame(plans, outcome.records, simulated, urls)
    measured = figures_by_arrangement(timeline)
    document["arrangements"] = [
        _arrangement_entry(p, s, r, measured.get(p.name), k, gpus_per_instance)
        for p, s, r in zip(plans, simulated, outcome.records)]
    document["complete"] = not outcome.interrupted and outcome.error is None and all(
        bool(r.done.all()) for r in outcome.records)
    document["interrupted"] = outcome.interrupted
    document["ranking"] = _ranking(document["arrangements"])
    mismatched = int(timeline.filter(pl.col("completion_tokens").is_not_null()
                                     & (pl.col("completion_tokens") != pl.col("forced_tokens"))).height)
    document["length_mismatches"] = mismatched
    uncounted = int(timeline.filter(pl.col("completion_tokens").is_null() & pl.col("finish_s").is_not_null()).height)
    if uncounted:  # nothing to compare: the forced lengths cannot be checked (they read as 0 mismatches)
        warnings.append(f"{uncounted} requests came back without a token count asp could read (no `usage` in the "
                        "answer, or a count that is not a whole number from 0 to 2,147,483,647), so "
                        "their lengths could not be checked against the forced ones; on vLLM and SGLang streaming "
                        "answers carry it with stream_options include_usage, which asp asks for")
    if mismatched:
        warnings.append(f"{mismatched} requests came back with another length than forced; check that the server "
                        "honours ignore_eos and min_tokens (vLLM and SGLang do) and its --max-model-len")
    retried = [(e["arrangement"], e["retried"]) for e in document["arrangements"] if e.get("retried")]
    if retried:  # the wall times hold the failed attempts and the backoff: not the engine's alone
        warnings.append(f"{sum(n for _, n in retried)} requests were retried "
                        f"({', '.join(f'{name}: {n}' for name, n in retried)}); the measured times include their "
                        "failed attempts and the waits between them, so compare arrangements from a run without "
                        "retries")
    document["warnings"] = warnings
    written = None
    cut_short = outcome.interrupted or outcome.error is not None
    # A failed start, or a run interrupted before any request finished, leaves no file (an empty timeline then
    # stood in the way of the next run). A run cut short where a timeline already was (--force) keeps that one:
    # what it measured goes beside it (it replaced a complete timeline of 400 requests by 72: a hostile-input round).
    if output is not None and (timeline.height or not cut_short):
        written = partial_path(Path(output)) if cut_short and Path(output).exists() else Path(output)
        write_timeline(timeline, {**document, "retries": live.retries if live else 0}, written,
                       replace=force or written != Path(output))
    return ReplayReport(document, timeline, outcome.interrupted, outcome.error, warnings, written)


def partial_path(output: Path) -> Path:
    """Where a replay cut short (Ctrl-C, a failing server) writes what it measured when ``output`` already holds a
    timeline, which it leaves as it was: ``t.partial.parquet`` beside ``t.parquet``."""
    return output.with_name(f"{output.stem}.partial{output.suffix}")


def timeline_frame(plans: list[RequestPlan], records: list, simulated: list[Simulated],
                   urls: list[str]) -> pl.DataFrame:
    """One timeline row per finished request of every plan (`asp_cli.integrate.timings` columns)."""
    parts = []
    for plan, record, sim in zip(plans, records, simulated):
        done = np.flatnonzero(record.done)
        row, sample = np.divmod(done, plan.samples_per_prompt)
        instance = record.instance[done]

        def counts(values: np.ndarray) -> pl.Series:  # -1 (not reported) becomes null
            series = pl.Series(values[done], dtype=pl.Int64)
            return series.to_frame().select(pl.when(series >= 0).then(series)).to_series()

        parts.append(pl.DataFrame({
            "arrangement": [plan.name] * done.size,
            "run": np.full(done.size, plan.run, dtype=np.int32),
            "seq": plan.seq[row].astype(np.int64),
            "epoch": plan.epoch[row].astype(np.int32),
            "prompt_id": [plan.prompt_id[r] for r in row.tolist()],
            "sample": sample.astype(np.int32),
            "instance": instance.astype(np.int32),
            "server": [urls[i] for i in instance.tolist()],
            "minibatch": plan.minibatch[row].astype(np.int64),
            "forced_tokens": plan.lengths[row, sample].astype(np.int64),
            "planned_prompt_tokens": plan.prompt_tokens[row].astype(np.int64),
            "send_s": record.send_s[done],
            "first_token_s": pl.Series(record.first_token_s[done], dtype=pl.Float64).fill_nan(None),
            "finish_s": record.finish_s[done],
            "prompt_tokens": counts(record.prompt_tokens),
            "completion_tokens": counts(record.completion_tokens),
            "attempts": record.attempts[done],
            "simulated_send_s": sim.send_s[done],
            "simulated_finish_s": sim.finish_s[done],
        }, schema=COLUMNS))
    return pl.concat(parts) if parts else pl.DataFrame(schema=COLUMNS)


def _arrangement_entry(plan: RequestPlan, sim: Simulated, record, measured: dict | None, instances: int,
                       gpus_per_instance: int) -> dict[str, Any]:
    n = plan.samples_per_prompt
    predicted = rollout_figures(sim.send_s, sim.finish_s, sim.instance, plan.lengths.reshape(-1))
    entry: dict[str, Any] = {
        "arrangement": plan.name,
        "dispatch": plan.dispatch,
        "run": plan.run,
        "requests": plan.requests,
        "minibatches": len(plan.minibatches()),
        "samples_per_prompt": n,
        "response_tokens": int(plan.lengths.sum()),
        "prompt_tokens": int(plan.prompt_tokens.sum() * n),
        "simulated": predicted,
        "simulated_gpu_minutes": predicted["wall_s"] * instances * gpus_per_instance / 60.0,
    }
    if record is not None:
        entry["completed"] = int(record.done.sum())
        entry["retried"] = int(np.sum(record.attempts > 1))
        entry["measured"] = measured
        if measured and measured["wall_s"] > 0:
            entry["gpu_minutes"] = measured["wall_s"] * instances * gpus_per_instance / 60.0
            entry["simulated_wall_error"] = predicted["wall_s"] / measured["wall_s"] - 1.0
    return entry


def _ranking(entries: list[dict]) -> dict[str, Any]:
    """Arrangements from fastest to slowest, measured and simulated, over the complete runs."""
    complete = [e for e in entries if e.get("measured") and e.get("completed") == e["requests"]]
    measured = [e["arrangement"] for e in sorted(complete, key=lambda e: e["measured"]["wall_s"])]
    simulated = [e["arrangement"] for e in sorted(complete, key=lambda e: e["simulated"]["wall_s"])]
    return {"measured": measured, "simulated": simulated, "same": measured == simulated}
