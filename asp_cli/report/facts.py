"""The facts of a schedule: what it was made from and what it is expected to do (docs/report.md).

`build_report` turns a `Schedule` into one JSON-ready dict with a stable structure (``report_version``);
`compare_reports` puts two of them side by side; `check_report` tests thresholds. The terminal view
(`report_text`) and the HTML page (`report_html`) only render these dicts, so the three outputs of
`asp report` always say the same thing.

Everything is computed from the schedule file alone: the required columns give sizes, balance in tokens,
padding and step representativeness; the optional ``expected_*`` columns (written by `asp schedule`) add
busy time, the training-queue curves, the effective batch and lag. A section whose columns are missing is
``null`` rather than guessed. Floats are rounded so that the output is byte-for-byte deterministic.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl

from asp_cli.arrange.timeline import busy_seconds, group_tokens, run_steps
from asp_cli.costmodel import HardwarePreset, load_preset
from asp_cli.output import json_finite
from asp_cli.report.numbers import TAIL_QUANTILE, histogram, log_edges, quantiles, rounded, spread
from asp_cli.report.observed import ObservedLengths, observed_section
from asp_cli.schedule_format import Schedule


# Bump the major when a key is removed, renamed or changes meaning; the minor for added keys.
REPORT_VERSION = "1.7"

# Points on the time grid of the queue and effective-batch curves: smooth enough for a plot, small in JSON.
_GRID_POINTS = 160
_TIMING_COLUMNS = ("expected_start_s", "expected_finish_s", "expected_minibatch_end_s")


# --------------------------------------------------------------------------------------------------------
# The report


def build_report(schedule: Schedule, *, observed: ObservedLengths | None = None,
                 name: str | None = None) -> dict[str, Any]:
    """Compute every fact `asp report` shows about one schedule.

    Parameters
    ----------
    schedule
        As `schedule_format.read_schedule` returns it.
    observed
        Observed lengths to put next to the predictions (`observed_from_samples`), or None.
    name
        How to name the schedule in the output; by default its file name.

    Returns
    -------
    dict
        JSON-ready, keys documented in docs/report.md: ``report_version``, ``schedule``, ``provenance``,
        ``headline`` (null without auto's choice), ``size``, ``instances``, ``predicted_lengths``,
        ``minibatches``, ``padding``, ``queue``, ``effective_batch``, ``lag``, ``steps``, ``observed`` (null without observed lengths), ``simulated``
        (null here; `report_schedule` fills it with ``simulate=True``) and ``minibatch_table`` (one entry per
        minibatch, for timelines).
    """
    frame = schedule.frame
    meta = schedule.metadata
    settings = meta.get("settings", {}) or {}
    n = schedule.samples_per_prompt
    timed = all(c in frame.columns for c in _TIMING_COLUMNS)
    per_mb = _per_minibatch(frame, timed)
    instances = max(int(settings.get("instances", 0) or 0), int(frame["instance"].max()) + 1)
    report: dict[str, Any] = {
        "report_version": REPORT_VERSION,
        "schedule": {
            "name": name or (schedule.path.name if schedule.path else "the schedule in memory"),
            "format_version": meta.get("format_version"),
            "timing_columns": timed,
        },
        # whose deal the plan was made for (the "made for ..." line `asp schedule` printed), from its settings, so
        # that files made before the summary recorded it say it too; absent where it names no framework's deal
        "provenance": {**_provenance(meta), **_made_for(schedule)},
        "size": {
            "prompts": int(frame.filter(pl.col("epoch") == frame["epoch"].min()).height),
            "epochs": int(frame["epoch"].n_unique()),
            "rows": frame.height,
            "instances": instances,
            "samples_per_prompt": n,
            "train_batch_size": schedule.recorded_settings.train_batch_size,
            "minibatches": per_mb.height,
            "train_steps": int(frame["train_step"].max()) + 1,
            # Steps holding fewer groups than the train batch (the run's last, and each epoch's last where the
            # schedule keeps epochs' own steps).
            "short_steps": int((frame.group_by("train_step").len()["len"]
                                < schedule.recorded_settings.train_batch_size).sum()),
        },
        "instances": _instances(per_mb, instances, timed),
        "predicted_lengths": _predicted_lengths(frame),
        "minibatches": {**_minibatch_lengths(per_mb), "kv_fill": _kv_fill(schedule, n)},
        "padding": _padding(per_mb),
        "queue": _queue(frame, meta, n) if timed else None,
        "effective_batch": _effective_batch(frame, n, instances) if timed else None,
        "lag": _lag(frame, settings),
        "steps": _steps(frame),
        "observed": observed_section(frame, per_mb, observed, instances) if observed is not None else None,
        "simulated": None,  # filled by `report_schedule(..., simulate=True)` (report_simulated)
        "minibatch_table": _minibatch_table(per_mb, timed),
    }
    # auto's draws' padding and the headline from the arrangement record as read (left out where it was edited out
    # of shape)
    report["padding"].update(_drawn_padding(report["provenance"]["arrangement"]))
    from asp_cli.report.headline import headline_facts

    report["headline"] = headline_facts(report["provenance"]["arrangement"], report["size"]["epochs"])
    return report


def _provenance(meta: dict[str, Any]) -> dict[str, Any]:
    meta = json_finite(meta)
    preset = meta.get("preset") or {}
    command, inputs, predictor, arrangement, damaged = _readable_records(meta)
    return {
        "asp_version": meta.get("asp_version"),
        "created_by": meta.get("created_by"),
        "command_line": " ".join(command) if isinstance(command, list) else command,
        "settings": meta.get("settings", {}),
        "preset": {"name": preset.get("name"), "description": preset.get("description")} if preset else None,
        "max_tokens_per_minibatch_used": meta.get("max_tokens_per_minibatch_used"),
        "inputs": inputs,
        "input_fingerprint": meta.get("input_fingerprint"),
        "predictor": predictor,
        "arrangement": arrangement,
        **({"damaged_metadata": damaged} if damaged else {}),
    }


def _made_for(schedule: Schedule) -> dict[str, Any]:
    from asp_cli.arrange.made_for import made_for

    deal = made_for(schedule.recorded_settings)
    return {"made_for": deal} if deal else {}


def _readable_records(meta: dict[str, Any]) -> tuple[Any, list, dict | None, dict | None, list[str]]:
    """The schedule's informational records (its command line, inputs, predictor and arrangement) where they read as
    asp wrote them, and the names of those that do not, left out: a hand edit (the bulky candidate list stripped with
    jq, a list of numbers for the command line) ended `asp report` in an internal error (a hostile-input round). Each
    is only said; the rows and the settings, which the report is of, were checked when the schedule was read."""
    from asp_cli.arrange.choice_summary import arrangement_line
    from asp_cli.predict.calibration_text import calibration_lines

    damaged = []
    command = meta.get("command_line")
    if command is not None and not (isinstance(command, str) or (
            isinstance(command, list) and all(isinstance(word, str) for word in command))):
        command = damaged.append("command_line")
    inputs = meta.get("inputs", [])
    if not (isinstance(inputs, list) and all(isinstance(entry, dict) for entry in inputs)):
        inputs = damaged.append("inputs") or []
    predictor = meta.get("predictor")
    if predictor is not None and not isinstance(predictor, dict):
        predictor = damaged.append("predictor")
    elif predictor and not _renders(calibration_lines, predictor.get("calibration") or {}):
        damaged.append("predictor.calibration")
        predictor = {key: value for key, value in predictor.items() if key != "calibration"}
    arrangement = meta.get("arrangement")
    if isinstance(arrangement, dict) and not _renders(arrangement_line, arrangement):
        arrangement = damaged.append("arrangement")
    return command, inputs, predictor, arrangement, damaged


def _renders(line: Any, record: Any) -> bool:
    """Whether ``line(record)`` renders an informational record; a record edited out of shape fails on the key or
    type it lacks."""
    try:
        line(record)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return False
    return True


def _per_minibatch(frame: pl.DataFrame, timed: bool) -> pl.DataFrame:
    aggs = [
        pl.col("instance").first(),
        pl.col("epoch").first(),
        pl.col("seq").min().alias("first_seq"),
        pl.len().alias("prompts"),
        pl.col("predicted_tokens").max().alias("longest"),
        pl.col("predicted_tokens").min().alias("shortest"),
        pl.col("predicted_tokens").sum().alias("tokens"),
    ]
    if "length_class" in frame.columns:
        aggs.append(pl.col("length_class").first())
    if timed:
        aggs += [pl.col("expected_start_s").min().alias("start_s"),
                 pl.col("expected_minibatch_end_s").max().alias("end_s")]
    per_mb = frame.group_by("minibatch").agg(aggs).sort("first_seq")
    return per_mb.with_columns(
        (1.0 - pl.col("tokens") / (pl.col("longest") * pl.col("prompts")).clip(lower_bound=1)).alias("padding")
    )


def _instances(per_mb: pl.DataFrame, instances: int, timed: bool) -> dict[str, Any]:
    idx = per_mb["instance"].to_numpy()
    minibatches = np.bincount(idx, minlength=instances)
    tokens = np.bincount(idx, weights=per_mb["tokens"].to_numpy().astype(np.float64), minlength=instances)
    out: dict[str, Any] = {
        "minibatches": [int(x) for x in minibatches],
        "predicted_tokens": [int(x) for x in tokens],
        "tokens_spread": spread(tokens),
        "busy_s": None,
        "end_s": None,
        "busy_spread": None,
        "finish_spread_s": None,
    }
    if timed:
        busy = busy_seconds(idx, per_mb["start_s"].to_numpy(), per_mb["end_s"].to_numpy(), instances)
        end = np.zeros(instances)
        np.maximum.at(end, idx, per_mb["end_s"].to_numpy())
        out.update(
            busy_s=[rounded(x, 3) for x in busy],
            end_s=[rounded(x, 3) for x in end],
            busy_spread=spread(busy),
            finish_spread_s=rounded(end.max() - end.min(), 3),
            makespan_s=rounded(end.max(), 3),
        )
    return out


def _predicted_lengths(frame: pl.DataFrame) -> dict[str, Any]:
    values = frame["predicted_tokens"].to_numpy()
    edges = log_edges(values.min(), values.max())
    out: dict[str, Any] = {
        "column": "predicted_tokens",
        "quantiles": quantiles(values),
        "histogram": {"edges": [int(e) for e in edges], "counts": histogram(values, edges)},
        "sources": None,
    }
    if "prediction_source" in frame.columns:
        counts = frame.group_by("prediction_source").len().sort("prediction_source")
        out["sources"] = {str(k): int(v) for k, v in zip(counts["prediction_source"], counts["len"])}
    return out


def _minibatch_lengths(per_mb: pl.DataFrame) -> dict[str, Any]:
    longest = per_mb["longest"].to_numpy().astype(np.float64)
    shortest = per_mb["shortest"].to_numpy().astype(np.float64)
    return {
        "prompts": quantiles(per_mb["prompts"].to_numpy()),
        "longest_predicted_tokens": quantiles(longest),
        "mean_predicted_tokens": quantiles(per_mb["tokens"].to_numpy() / per_mb["prompts"].to_numpy()),
        # How tight the packing is: shortest / longest predicted length inside a minibatch (1 = uniform).
        "shortest_to_longest": quantiles(shortest / np.maximum(longest, 1.0), 3),
    }


def _kv_fill(schedule: Schedule, n: int) -> dict[str, Any] | None:
    """Quantiles over minibatches of their KV tokens, counted as the schedule's cut counted them
    (`Schedule.kv_budget`: a group's share of the peak, whole groups, or the padded minibatch), over the budget
    they were cut by: how full the cut left them. None for a plan for engines that refill (no minibatches to
    cut) or a file without the budget or the length columns."""
    frame = schedule.frame
    budget = schedule.kv_tokens_per_minibatch
    needed = ("prompt_tokens", "predicted_max_tokens", "predicted_mean_tokens")
    if budget is None or schedule.settings.get("engine") == "streaming" or not all(c in frame.columns for c in needed):
        return None
    tokens = _minibatch_kv(frame, n, schedule.kv_budget)
    return {"counted": schedule.kv_budget, "budget_tokens": budget, "quantiles": quantiles(tokens / budget, 4)}


def _minibatch_kv(frame: pl.DataFrame, n: int, cut: str) -> np.ndarray:
    """Each minibatch's KV tokens at the predicted lengths, counted as ``cut`` (`settings.KV_CUTS`) counts them."""
    from asp_cli.arrange.packing import PaddedTokens, padded_tokens_of
    from asp_cli.arrange.pipeline import kv_footprint

    counted = kv_footprint(frame["prompt_tokens"].to_numpy().astype(np.float64),
                           frame["predicted_max_tokens"].to_numpy().astype(np.float64),
                           frame["predicted_mean_tokens"].to_numpy().astype(np.float64), n, cut)
    _, minibatch = np.unique(frame["minibatch"].to_numpy(), return_inverse=True)
    return (padded_tokens_of(minibatch, counted) if isinstance(counted, PaddedTokens)
            else np.bincount(minibatch, weights=counted.astype(np.float64)))


def padded_overflow(schedule: Schedule) -> tuple[int, int] | None:
    """(minibatches whose padded KV exceeds the budget they were cut by, minibatches) for a static schedule cut
    before the padded count (its `Schedule.kv_budget` is not "padded"), where that can be told; else None."""
    frame = schedule.frame
    budget = schedule.kv_tokens_per_minibatch
    needed = ("prompt_tokens", "predicted_max_tokens", "predicted_mean_tokens")
    if (schedule.settings.get("engine") != "static" or schedule.kv_budget == "padded" or budget is None
            or not all(c in frame.columns for c in needed)):
        return None
    tokens = _minibatch_kv(frame, schedule.samples_per_prompt, "padded")
    return int((tokens > budget).sum()), int(tokens.size)


def _padding(per_mb: pl.DataFrame) -> dict[str, Any]:
    slots = float((per_mb["longest"] * per_mb["prompts"]).sum())
    fraction = 1.0 - float(per_mb["tokens"].sum()) / slots if slots else 0.0
    return {
        "fraction": rounded(fraction),
        "per_minibatch": quantiles(per_mb["padding"].to_numpy(), 4),
    }


def _drawn_padding(arrangement: Any) -> dict[str, Any]:
    """The padding under auto's draws of lengths, of the pick and of a shuffle (`choice_summary.drawn_padding`):
    the point predictions' is a floor, as `asp schedule`'s summary says beside it."""
    from asp_cli.arrange.choice_summary import drawn_padding

    drawn, shuffle = drawn_padding(arrangement)
    return {"drawn_fraction": drawn, "shuffle_drawn_fraction": shuffle}


def padding_words(report: dict[str, Any]) -> str:
    """What the predicted padding means for this plan, in words for both renderers: on servers that refill freed
    slots a static batch's padding is not what they idle; elsewhere it is a floor, with auto's draws' figure where
    the schedule records one (a newcomer read 2.0% predicted beside 74.4% at the observed lengths, unexplained)."""
    padding = report["padding"]
    if ((report["provenance"].get("settings") or {}).get("engine")) == "streaming":
        return ("servers that refill freed slots (--engine streaming) give a freed slot the next request, so this "
                "static-batch figure is not what they idle; `asp simulate` counts that")
    floor = "a floor: at the point predictions a minibatch's groups look alike"
    if padding.get("drawn_fraction") is None:
        return floor + "; lengths that spread as real ones do pad more (--lengths, --simulate)"
    shuffle = padding.get("shuffle_drawn_fraction")
    return (f"{floor}; {padding['drawn_fraction']:.1%} under auto's draws of lengths, which spread them as the "
            "predictions do" + (f", a shuffle's {shuffle:.1%}" if shuffle is not None else ""))


# A plan made without --max-lag expects the lag of an asynchronous trainer that lets rollout run ahead; `asp
# schedule`'s summary says so beside the figure, and a team lead running verl's synchronous trainer read the
# report's "max 19" bare.
UNBOUNDED_LAG_WORDS = ("if an asynchronous trainer lets rollout run that far ahead; a synchronous trainer (verl's, "
                       "OpenRLHF's and slime's default) has none, and is planned with --max-lag 0 --trainer schedule")


def synchronous_idle_words(report: dict[str, Any]) -> str:
    """Why a synchronous plan's trainer waits (`--max-lag 0`: rollout and training take turns, so the trainer waits
    out each step's rollout by design), in words for both renderers; "" for any other plan or without timing (a
    team lead read "30.9% idle" of verl's synchronous trainer as a fault to fix)."""
    queue = report.get("queue") or {}
    if (report.get("lag") or {}).get("bound") != 0 or queue.get("rollout_alone_s") is None:
        return ""
    return (f"synchronous (--max-lag 0): the trainer waits out each step's rollout, {queue['rollout_alone_s']:,.1f} s "
            "in all with the wait before its first step, as the rollout waits out each training step: by design, "
            "not a fault; an order shortens it by shortening the steps' rollouts (the arrangement line's figures)")


def synchronous_queue_words(report: dict[str, Any]) -> str:
    """Why a synchronous plan's queue depth has no peak worth reading (`--max-lag 0`: a step's groups wait there for
    its last one, and the trainer takes them all at once, so the depth fills to about one train batch and empties
    every step), for both renderers; "" for any other plan (a team lead read "peak 30 groups" of such a plan)."""
    if ((report["provenance"].get("settings") or {}).get("max_lag")) != 0:
        return ""
    return (f"synchronous (--max-lag 0): each step's groups wait here for its last, and the trainer takes them at "
            f"once, so the depth fills to one train batch ({report['size'].get('train_batch_size') or '?'} groups) "
            "and empties every step")


def _step_end_times(frame: pl.DataFrame, meta: dict[str, Any], n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Each training step's start and end (after the weight sync), from the recorded preset's trainer cost."""
    trainer = _recorded_trainer(meta)
    if trainer is None:
        return None
    tokens = frame["predicted_mean_tokens"] if "predicted_mean_tokens" in frame.columns else frame["predicted_tokens"]
    prompt = frame["prompt_tokens"] if "prompt_tokens" in frame.columns else pl.Series([0] * frame.height)
    step = frame["train_step"].to_numpy()
    steps = int(step.max()) + 1
    ready = np.zeros(steps)
    np.maximum.at(ready, step, frame["expected_finish_s"].to_numpy())
    step_tokens = np.bincount(step, weights=group_tokens(n, prompt.to_numpy(), tokens.to_numpy()), minlength=steps)
    return run_steps(ready, trainer.train_step_seconds(step_tokens) + trainer.weight_sync_s)


def _recorded_trainer(meta: dict[str, Any]) -> HardwarePreset | None:
    """The trainer terms of the preset a schedule recorded (an older or edited file may lack the optional two)."""
    recorded = meta.get("preset") or {}
    if "train_fixed_s" not in recorded:
        return None
    return dataclasses.replace(load_preset(), train_fixed_s=float(recorded["train_fixed_s"]),
                               train_per_token_s=float(recorded.get("train_per_token_s", 0.0)),
                               weight_sync_s=float(recorded.get("weight_sync_s", 0.0)))


def _queue(frame: pl.DataFrame, meta: dict[str, Any], n: int) -> dict[str, Any]:
    """Finished groups reaching the trainer's queue against the groups the trainer takes, over time."""
    arrival = np.sort(frame["expected_finish_s"].to_numpy())
    step = frame["train_step"].to_numpy()
    groups_per_step = np.bincount(step)
    timing = _step_end_times(frame, meta, n)
    synchronous = (meta.get("settings") or {}).get("max_lag") == 0
    horizon = float(arrival[-1]) if arrival.size else 0.0
    if timing is not None:
        horizon = max(horizon, float(timing[1][-1]))
    grid = np.linspace(0.0, horizon, _GRID_POINTS)
    arrived = np.searchsorted(arrival, grid, side="right")
    out: dict[str, Any] = {
        "grid_s": [rounded(t, 3) for t in grid],
        "arrived_groups": [int(x) for x in arrived],
        "consumed_groups": None,
        "queue_groups": None,
        "arrival_rate_cv": None,
        "trainer_first_start_s": None,
        "trainer_idle_s": None,
        "trainer_idle_fraction": None,
        "trainer_idle_of_run_fraction": None,
        "trainer_end_s": None,
        "rollout_alone_s": None,
    }
    # How steady the flow is: coefficient of variation of groups arriving per 1/40 of the rollout span.
    bins = np.histogram(arrival, bins=40, range=(0.0, max(float(arrival[-1]), 1e-9)))[0] if arrival.size else []
    if len(bins) and np.mean(bins) > 0:
        out["arrival_rate_cv"] = rounded(np.std(bins) / np.mean(bins))
    if timing is not None:
        start, end = timing
        consumed_at = np.cumsum(groups_per_step)
        taken = np.searchsorted(start, grid, side="right")
        consumed = np.where(taken > 0, consumed_at[np.clip(taken - 1, 0, None)], 0)
        # Idle: the trainer waits for data between steps (the wait before the first step is reported apart).
        waits = np.maximum(start[1:] - end[:-1], 0.0)
        span = float(end[-1] - start[0])
        out.update(
            consumed_groups=[int(x) for x in consumed],
            queue_groups=[int(a - c) for a, c in zip(arrived, consumed)],
            trainer_first_start_s=rounded(start[0], 3),
            trainer_idle_s=rounded(waits.sum(), 3),
            trainer_idle_fraction=rounded(waits.sum() / span if span > 0 else 0.0),
            # As a replay counts it (`asp_cli.sim.metrics`): the share of the whole run, from 0 to the last step's
            # end, that the trainer is not training, the wait before its first step included.
            trainer_idle_of_run_fraction=rounded((start[0] + waits.sum()) / end[-1] if end[-1] > 0 else 0.0),
            trainer_end_s=rounded(end[-1], 3),
            # Synchronous, rollout and training take turns: the rollout alone is what the trainer waits, before
            # its first step and between steps (the summary's rollout share; a replay's `rollout_alone_s`).
            rollout_alone_s=rounded(start[0] + waits.sum(), 3) if synchronous else None,
            step_start_s=[rounded(x, 3) for x in start],
            step_end_s=[rounded(x, 3) for x in end],
        )
    return out


def _effective_batch(frame: pl.DataFrame, n: int, instances: int) -> dict[str, Any]:
    """Live sequences over time, all instances together.

    A group counts N sequences from its minibatch's start until its last sample ends (its expected
    finish): an upper bound, since the group's other samples may end earlier.
    """
    start = np.sort(frame["expected_start_s"].to_numpy())
    finish = np.sort(frame["expected_finish_s"].to_numpy())
    horizon = float(finish[-1]) if finish.size else 0.0
    grid = np.linspace(0.0, horizon, _GRID_POINTS)
    live = n * (np.searchsorted(start, grid, side="right") - np.searchsorted(finish, grid, side="right"))
    busy_mean = float(live[grid < horizon].mean()) if (grid < horizon).any() else 0.0
    return {
        "grid_s": [rounded(t, 3) for t in grid],
        "live_sequences": [int(x) for x in live],
        "mean_live_sequences_per_instance": rounded(busy_mean / max(instances, 1), 1),
        "peak_live_sequences": int(live.max()) if live.size else 0,
    }


def _lag(frame: pl.DataFrame, settings: dict[str, Any]) -> dict[str, Any] | None:
    if "expected_lag" not in frame.columns:
        return None
    lag = frame["expected_lag"].to_numpy()
    values, counts = np.unique(lag, return_counts=True)
    return {
        "mean": rounded(lag.mean(), 3),
        "max": int(lag.max()),
        "bound": settings.get("max_lag"),
        "histogram": [[int(v), int(c)] for v, c in zip(values, counts)],
    }


def _steps(frame: pl.DataFrame) -> dict[str, Any]:
    """How representative each training step is of its epoch.

    A step's ratio is its groups' mean predicted length over the mean of the epochs they come from
    (1.0 = a typical step); its tail share is the fraction of its groups in the epoch's longest 10%.
    """
    column = "predicted_mean_tokens" if "predicted_mean_tokens" in frame.columns else "predicted_tokens"
    length = pl.col(column).cast(pl.Float64)
    rows = frame.with_columns(
        length.mean().over("epoch").alias("epoch_mean"),
        (length > length.quantile(TAIL_QUANTILE, "nearest").over("epoch")).alias("tail"),
    )
    aggs = [
        pl.len().alias("groups"),
        length.mean().alias("mean_tokens"),
        pl.col("epoch_mean").mean(),
        pl.col("tail").mean().alias("tail_share"),
        pl.col("epoch").min().alias("epoch"),
    ]
    if "expected_lag" in frame.columns:
        aggs.append(pl.col("expected_lag").mean().alias("lag_mean"))
    per_step = rows.group_by("train_step").agg(aggs).sort("train_step")
    ratio = (per_step["mean_tokens"] / per_step["epoch_mean"]).to_numpy()
    full = per_step["groups"].to_numpy() == per_step["groups"].max()
    skew = np.abs(ratio - 1.0)
    table = []
    for i, s in enumerate(per_step.iter_rows(named=True)):
        table.append({
            "step": int(s["train_step"]),
            "epoch": int(s["epoch"]),
            "groups": int(s["groups"]),
            "mean_tokens": rounded(s["mean_tokens"], 1),
            "ratio_to_epoch_mean": rounded(ratio[i]),
            "tail_share": rounded(s["tail_share"]),
            "lag_mean": rounded(s.get("lag_mean"), 3) if "lag_mean" in s else None,
        })
    return {
        "length_column": column,
        "ratio": quantiles(ratio, 4),
        # The last step of a run may be a partial batch; skew counts full steps only when there are any.
        "max_skew": rounded(skew[full].max() if full.any() else skew.max()),
        "tail_share_expected": rounded(1.0 - TAIL_QUANTILE),
        "table": table,
    }


def _minibatch_table(per_mb: pl.DataFrame, timed: bool) -> list[dict[str, Any]]:
    table = []
    has_class = "length_class" in per_mb.columns
    for m in per_mb.iter_rows(named=True):
        entry = {
            "minibatch": int(m["minibatch"]),
            "instance": int(m["instance"]),
            "epoch": int(m["epoch"]),
            "prompts": int(m["prompts"]),
            "longest_predicted_tokens": int(m["longest"]),
            "mean_predicted_tokens": rounded(m["tokens"] / m["prompts"], 1),
            "padding": rounded(m["padding"]),
            "length_class": int(m["length_class"]) if has_class and m["length_class"] is not None else None,
            "start_s": rounded(m["start_s"], 3) if timed else None,
            "end_s": rounded(m["end_s"], 3) if timed else None,
        }
        table.append(entry)
    return table


QUANTILE_NAMES = ("p0", "p10", "p50", "p90", "p100", "mean")


def length_quantile_rows(report: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """The rows of the length and padding quantile table both renderers draw: (label, quantiles, kind).

    ``kind`` is "tokens", "ratio" or "percent": how the renderer formats the values.
    """
    mbs = report["minibatches"]
    rows = [
        ("group length (planned)", report["predicted_lengths"]["quantiles"], "tokens"),
        ("minibatch: prompts", mbs["prompts"], "tokens"),
        ("minibatch: longest", mbs["longest_predicted_tokens"], "tokens"),
        ("minibatch: mean", mbs["mean_predicted_tokens"], "tokens"),
        ("minibatch: shortest / longest", mbs["shortest_to_longest"], "ratio"),
        ("minibatch: padding", report["padding"]["per_minibatch"], "percent"),
    ]
    if mbs.get("kv_fill"):
        rows.append((f"minibatch: KV / budget ({mbs['kv_fill']['counted']})", mbs["kv_fill"]["quantiles"], "percent"))
    if (report.get("observed") or {}).get("quantiles"):
        rows.insert(1, ("observed group max", report["observed"]["quantiles"], "tokens"))
    return rows
