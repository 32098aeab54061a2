"""The `simulated` section of `asp report --simulate`: the schedule replayed, next to its own expectations.

`asp report` alone shows what the schedule *expects* (its ``expected_*`` columns, from predicted lengths).
With ``--simulate`` it also replays the schedule in `asp_cli.sim` (the same engine model and settings
as `asp simulate`), on the observed lengths of ``--lengths`` when given, else on lengths drawn around the
predictions with the documented noise model, and condenses the replay into the curves and figures the page
draws beside the expected ones. Keys are documented in docs/report.md ("simulated").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from asp_cli.schedule_format import Schedule
from asp_cli.sim.options import ReplayOptions

# Points on the time grid of the simulated curves (as the expected ones in `report`).
_GRID_POINTS = 160
_METRICS = ("end_to_end_s", "rollout_makespan_s", "mean_iteration_s", "trainer_idle_fraction", "padding_fraction",
            "tail_time_fraction", "policy_lag_mean", "policy_lag_max", "queue_groups_cv", "preemptions",
            "lower_bound_end_to_end_s", "ratio_to_lower_bound", "lower_bound_end_to_end_binding")


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


def simulated_section(
    schedule: Schedule,
    samples: pl.DataFrame | None = None,
    *,
    skipped_rows: int = 0,
    options: ReplayOptions | None = None,
) -> dict[str, Any]:
    """Replay ``schedule`` with `asp_cli.bench.simulate.simulate_loaded` (the dispatch and the other settings the
    schedule was made for) on the observed ``samples`` (one row per sample; None samples lengths) and return the report's
    ``simulated`` section. ``options``: the replay's (`asp report --lengths-epoch`'s epoch, in ``lengths.epoch``).

    Raises
    ------
    SettingsError
        As `asp_cli.bench.simulate.simulate_loaded`.
    """
    from asp_cli.bench.simulate import simulate_loaded

    replay = simulate_loaded(schedule, samples, skipped_rows=skipped_rows,
                             options=ReplayOptions() if options is None else options)
    document, result = replay.document, replay.result
    metrics = result.metrics
    n = int(document["samples_per_prompt"])
    rows = result.group_arrival_s.size
    horizon = float(metrics["end_to_end_s"]) or 1.0
    grid = np.linspace(0.0, horizon, _GRID_POINTS)
    arrival = np.sort(result.group_arrival_s)
    consumed_at = np.cumsum(result.step_groups)
    taken = np.searchsorted(result.step_start_s, grid, side="right")
    consumed = np.where(taken > 0, consumed_at[np.clip(taken - 1, 0, None)], 0)
    live = (np.searchsorted(np.sort(result.seq_admit_s), grid, side="right")
            - np.searchsorted(np.sort(result.seq_finish_s), grid, side="right"))
    # Per minibatch (rows are in seq order, N sequences per row): its instance, first admission, last finish.
    frame_minibatch = schedule.frame.sort("seq")["minibatch"].to_numpy()  # the order the replay ran rows in
    change = np.flatnonzero(np.diff(frame_minibatch)) + 1
    starts = np.concatenate(([0], change))
    admit = result.seq_admit_s.reshape(rows, n).min(axis=1)
    finish = result.seq_finish_s.reshape(rows, n).max(axis=1)
    instance = result.seq_instance.reshape(rows, n)[:, 0]
    mb_start = np.minimum.reduceat(admit, starts)
    mb_end = np.maximum.reduceat(finish, starts)
    spans = [
        {"minibatch": int(frame_minibatch[s]), "instance": int(instance[s]), "start_s": _r(mb_start[i], 3),
         "end_s": _r(mb_end[i], 3)}
        for i, s in enumerate(starts)
    ]
    lag = result.group_step - result.group_version
    values, counts = np.unique(lag, return_counts=True)
    stats = result.extras["stats"]
    # Synchronous (max_lag 0), rollout and training take turns: the rollout alone is the time the trainer waits
    # for it, the end-to-end time less the steps and weight syncs (what `trainer_idle_fraction` counts idle),
    # like auto's draws timed as verl routes and the point predictions' `queue.rollout_alone_s`. Otherwise the
    # two overlap and `rollout_makespan_s` (the last group's arrival) is the rollout's figure: null.
    synchronous = document["max_lag"] == 0
    rollout_alone = (float(metrics["end_to_end_s"]) * float(metrics["trainer_idle_fraction"]) if synchronous
                     else None)
    return {
        "lengths": document["lengths"],
        "noise_model": document["noise_model"],
        "preset": document["preset"],
        "mode": document["mode"],
        "dispatch": document["dispatch"],
        "max_lag": document["max_lag"],
        "metrics": {k: (_r(metrics[k]) if isinstance(metrics.get(k), float) else metrics.get(k)) for k in _METRICS},
        "rollout_alone_s": _r(rollout_alone, 3) if rollout_alone is not None else None,
        # On servers that refill, the same lengths replayed as verl routes them (`bench.simulate._as_verl_routes`,
        # as `asp simulate` gives them): what auto's draws timed a plan made with --max-lag 0 against. Since
        # 2026-12-07 (a newcomer was pointed to another command for it).
        "verl_routed_end_to_end_s": (_r(metrics["verl_routed_end_to_end_s"], 3)
                                     if metrics.get("verl_routed_end_to_end_s") is not None else None),
        "verl_routed_rollout_s": (_r(metrics["verl_routed_rollout_s"], 3)
                                  if metrics.get("verl_routed_rollout_s") is not None else None),
        "instance_end_s": [_r(s.end_s, 3) for s in stats],
        "queue": {
            "grid_s": [_r(t, 3) for t in grid],
            "arrived_groups": [int(x) for x in np.searchsorted(arrival, grid, side="right")],
            "consumed_groups": [int(x) for x in consumed],
        },
        "effective_batch": {"grid_s": [_r(t, 3) for t in grid], "live_sequences": [int(x) for x in live]},
        "lag_histogram": [[int(v), int(c)] for v, c in zip(values, counts)],
        "minibatch_spans": spans,
    }


def drawn(arrangement: Any, key: str) -> float | None:
    """What auto's draws expected of the chosen candidate (``key``: `expected_end_to_end_s` or `expected_rollout_s`,
    `ArrangementChoice`), from the schedule's `arrangement` metadata; None for a named arrangement or older records."""
    if not isinstance(arrangement, dict):
        return None
    chosen, cut = arrangement.get("chosen"), arrangement.get("kv_budget")
    return next((c.get(key) for c in arrangement.get("candidates") or []
                 if c.get("name") == chosen and c.get("kv_budget", cut) == cut), None)


def expected_by_draws(arrangement: Any, *, synchronous: bool, run_epochs: int) -> dict[str, Any]:
    """The replay's figures as auto's draws expected them of the chosen candidate (tails included, unlike the point
    predictions): ``end_to_end_s`` and ``rollout_s``, the rollout to read beside the replay's (a synchronous plan's
    rollout alone, which the draws have only where they timed it as verl routes a step: from asp's simulator theirs
    ran to the last arrival, training included; else the rollout to the last group's arrival), each None where the
    schedule records no such figure; ``timed_as`` (`verl` or None). The text and the page both read it (a newcomer
    read 456.9 s expected beside a replay's 839.8 s on the page, where the text said auto's draws expected 674.2 s).
    ``whole_run``: whether those times are the run's; False where auto judged fewer epochs than ``run_epochs`` or a
    sample of the prompts and did not scale its times up (they rank the candidates; a 3-epoch plan's 1,348 s were
    of 2 epochs, read beside a replay of 3); ``epochs_judged``, the epochs auto judged."""
    choice = arrangement if isinstance(arrangement, dict) else {}
    timed_as = choice.get("timed_as")
    rollout = (drawn(arrangement, "expected_rollout_s") if not synchronous or timed_as == "verl" else None)
    judged = int(choice.get("evaluated_epochs") or 1)
    whole = bool(choice.get("run_prompt_epochs")) or (not choice.get("sampled") and judged >= run_epochs)
    return {"end_to_end_s": drawn(arrangement, "expected_end_to_end_s"), "rollout_s": rollout,
            "timed_as": timed_as, "whole_run": whole if choice else None, "epochs_judged": judged if choice else None}


def draws_words(report: dict[str, Any]) -> str:
    """How auto's draws timed the plan, after "expected by auto's draws", for both renderers: as verl routes, and
    where their times are not the run's, of what part ("" otherwise)."""
    draws = report["simulated"].get("expected_by_draws") or {}
    words = " as verl routes" if draws.get("timed_as") == "verl" else ""
    if draws.get("whole_run") is False:  # their times rank the candidates; they do not predict the run
        judged, run = draws.get("epochs_judged") or 1, report["size"]["epochs"]
        words += (f" over the {judged} of the run's {run} epochs judged, not the whole run" if judged < run
                  else " over the sample of prompts judged, not the whole run")
    return words


def epoch_words(epoch: int | None) -> str:
    """The epoch of the observed lengths `--lengths-epoch` picked, in words for both renderers ("" without it)."""
    if epoch is None:
        return ""
    return "epoch " + str(epoch) if epoch >= 0 else "the samples without an epoch (a probe's)"


def lengths_source(simulated: dict[str, Any]) -> str:
    """What lengths the replay ran on, in words, for both renderers."""
    lengths = simulated["lengths"]
    observed, sampled = lengths["prompts_with_observed_lengths"], lengths["prompts_with_sampled_lengths"]
    if not observed:
        return "lengths sampled around the predictions"
    from asp_cli.sim.lengths import epochs_replayed_text

    epoch = epoch_words(lengths.get("epoch"))
    replayed = epochs_replayed_text(lengths.get("epochs_replayed") or [])  # absent in reports of 1.3
    return (f"observed lengths{f' ({epoch})' if epoch else ''} for {observed:,} prompts"
            + (f", sampled for {sampled:,}" if sampled else "") + (f" ({replayed})" if replayed else ""))


def as_verl_routes(report: dict[str, Any]) -> str:
    """For a plan auto timed as verl routes a synchronous step (`timed_as: verl`), in words for both renderers: the
    replay routes otherwise, and which command replays it as verl routes."""
    files = (report.get("observed") or {}).get("files") or []
    observed = report["simulated"]["lengths"]["prompts_with_observed_lengths"]
    lengths = "".join(f" --lengths {name}" for name in files) if observed else ""
    simulated = report["simulated"]
    routed = simulated.get("verl_routed_end_to_end_s")
    same = (f"; replayed on the same lengths as verl routes, end-to-end {routed:,.1f} s (rollout alone "
            f"{simulated['verl_routed_rollout_s']:,.1f} s)" if routed is not None else "")
    return ("auto's draws timed this plan as verl routes a synchronous step (every sample a request, each group's "
            "samples spread over the servers); this replay routes as asp's simulator does (each group whole to "
            f"whichever server frees first), so its times differ from those by routing too{same}: "
            f"`asp simulate {report['schedule']['name']} --compare{lengths}` sets verl's own arrangements beside it "
            "(its \"as verl routes\" line, and the \"as verl s\" column)")


# What a replay's padding counts on each engine (`asp_cli.sim.metrics`: 1 - live / target slot-steps, docs/simulation.md),
# said beside the figure: "padding (idle slot-steps)" of a plan on servers that refill freed slots read as a static
# batch's waste, which those servers do not have (a review's, 2026-12-07).
_REPLAY_PADDING = {
    "streaming": ("idle slot-steps: each decode step's slots below the sequences of the requests last sent to that "
                  "server (at most its max_num_seqs), left empty because no request waited to refill them, as a "
                  "step's or the run's last requests drain or --max-lag holds the server"),
    "continuous": ("idle slot-steps: each decode step's slots below its minibatch's sequences (at most max_num_seqs), "
                   "left by sequences that ended before the minibatch's longest"),
    "static": "idle slot-steps: padded rows, each row of a batch stepping until the batch's longest ends",
}


def replay_padding_words(simulated: dict[str, Any]) -> str:
    """What the replay's ``padding_fraction`` counts, for its engine, in words for both renderers."""
    return _REPLAY_PADDING.get(simulated.get("mode"), "idle slot-steps (docs/simulation.md)")

