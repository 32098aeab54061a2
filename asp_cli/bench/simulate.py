"""The Python twin of `asp simulate`: read a schedule and lengths, replay it, compare it with the baselines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli.errors import SettingsError, expect_callable
from asp_cli.reading.options import ReadOptions, paths_of
from asp_cli.schedule_format import Schedule
from asp_cli.settings import check_flags, check_replay_size
from asp_cli.bench.compare import ASP, ASP_TRUE, compare_names
from asp_cli.bench.partial import partial_step, partial_steps, routed_partial_step
from asp_cli.bench.compare import compare as run_compare
from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS, PROMPT_SIGMA, SAMPLE_SIGMA, lengths_for_schedule
from asp_cli.sim.options import ReplayOptions
from asp_cli.sim.records import SimulationResult, SimulationSettings
from asp_cli.sim.run import simulate_schedule


@dataclass
class SimulationReport:
    """What `simulate_file` produced: the summary document, the replay, and the comparison rows."""

    document: dict
    result: SimulationResult
    comparison: list[dict] | None = None

    @property
    def warnings(self) -> list[str]:
        """The document's ``warnings``: where every other result keeps them (a library user looked in four places)."""
        return self.document.get("warnings", [])

    def table(self, *, markdown: bool = False, wide: bool = False) -> str:
        """The comparison as `asp simulate --compare` prints it (``wide``: every column, as its ``--wide``; a
        Markdown table with ``markdown``): a library user found it only in the command's code. `SettingsError`
        for a report made without ``compare=True`` (it was "", which read as a comparison that printed nothing)."""
        from asp_cli.bench.compare import format_table

        self._compared("table")
        return format_table(self.comparison, markdown=markdown, compact=not wide) if self.comparison else ""

    def verdict(self) -> str:
        """The comparison's answer as `asp simulate --compare` prints it under the table: asp against the fastest
        row on equal footing (the instance-hours saved or lost) and against verl's default (a library user found
        it only in the command's code). `SettingsError` for a report made without ``compare=True``."""
        from asp_cli.bench.verdict import verdict

        self._compared("verdict")
        return (verdict(self.comparison, self.document.get("instances"), self.document.get("mode"))
                if self.comparison else "")

    def _compared(self, method: str) -> None:
        if self.comparison is None:
            raise SettingsError(f"{method}() shows the comparison with the baselines, which this report has not: "
                                f"make it with simulate_file(..., compare=True) (asp simulate --compare)")


def schedule_prompts(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The prompts and predictions a schedule was made from (first occurrence of each row)."""
    first = frame.sort("seq").unique("row", keep="first", maintain_order=True).sort("row")
    predicted = pl.col("predicted_tokens")
    prompts = first.select("row", "prompt_id")
    predictions = first.select(
        (pl.col("prompt_tokens") if "prompt_tokens" in first.columns else pl.lit(DEFAULT_PROMPT_TOKENS))
        .cast(pl.Int64).alias("prompt_tokens"),
        (pl.col("predicted_max_tokens") if "predicted_max_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_max_tokens"),
        (pl.col("predicted_mean_tokens") if "predicted_mean_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_mean_tokens"),
        predicted.cast(pl.Int64).alias("predicted_tokens"),
        (pl.col("prediction_source") if "prediction_source" in first.columns else pl.lit("model"))
        .cast(pl.String).alias("prediction_source"),
    )
    return prompts, predictions


# `asp simulate` names the id and length columns of its --lengths files so.
SIMULATE_READ = ReadOptions(length_id_flag="--lengths-id-key", length_flag="--lengths-length-key")
# What `simulate_file` tells its ``progress`` callback, in order (the comparison adds one line per arrangement).
STAGES = ("reading the schedule", "reading lengths", "replaying the schedule", "arranging the baselines")


def simulate_file(
    schedule_path: str | Path,
    lengths: str | Path | Sequence[str | Path] = (),
    *,
    options: ReplayOptions | None = ReplayOptions(),
    read: ReadOptions = SIMULATE_READ,
    compare: bool = False,
    progress: Callable[[str], None] | None = None,
    lengths_paths: str | Path | Sequence[str | Path] | None = None,
) -> SimulationReport:
    """Read a schedule (and observed lengths), replay it, and optionally compare it with the baselines.

    This is what `asp simulate` runs. ``lengths`` are its ``--lengths`` files (a path or a list; second
    argument or ``lengths=``, as `report_schedule`, `replay_schedule` and `evaluate_predictor` name them;
    ``lengths_paths=``, its former name, still works with a `DeprecationWarning`). Settings the schedule recorded
    (instances, N, train batch size, cap, preset, max_lag, seed) are used unless ``options`` gives them.
    ``progress`` is told each stage as it starts (`STAGES`, then one "replaying i/n: NAME" per compared
    arrangement).

    Raises
    ------
    ScheduleFormatError, InputError, SettingsError
    """
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import schedule_of
    from asp_cli.sim.lengths import epoch_samples, refuse_unmatched

    check_flags(compare=compare)
    options = ReplayOptions() if options is None else options
    if not isinstance(options, ReplayOptions):  # a dict was an AttributeError from inside (a newcomer's round)
        raise SettingsError(f"options must be a ReplayOptions (asp_cli.ReplayOptions(instances=8, ...)) or None, not "
                            f"{type(options).__name__}")
    if lengths_paths is not None:  # the name before 2026-12-07 (every other twin says lengths=)
        if lengths:
            raise SettingsError("give the lengths files once: lengths= (lengths_paths= is its former name)")
        import warnings

        warnings.warn("simulate_file(lengths_paths=...) is now simulate_file(lengths=...), as the other twins name "
                      "it", DeprecationWarning, stacklevel=2)
        lengths = lengths_paths
    length_files = paths_of(lengths)
    read = ReadOptions.named_as(read, SIMULATE_READ)
    read.check_length_keys_used(length_files, "--lengths")
    note = expect_callable(progress, "progress") or (lambda _stage: None)
    note(STAGES[0])
    schedule = schedule_of(schedule_path)
    observed = None
    skipped = 0
    if length_files:
        note(STAGES[1])
        observed, report = read_lengths(length_files, read)
        # The epoch replayed is the one checked: a probe of these prompts beside another dataset's epochs passed
        # on the whole file and replayed none of the epoch picked (`simulate_loaded` picks it again, as it was).
        observed = epoch_samples(observed, options.lengths_epoch, length_files)
        refuse_unmatched(observed, schedule.frame["prompt_id"], length_files)
        skipped = report.skipped_rows
    result = simulate_loaded(schedule, observed, options=options, compare=compare, skipped_rows=skipped,
                             name=str(schedule.path or "the schedule in memory"), progress=progress,
                             sources=length_files)
    if length_files:  # what the read left out or counted twice (`ReadReport.notes`)
        result.document["warnings"][:0] = report.notes
    return result


def replayed_lengths_per_epoch(frame: pl.DataFrame, lengths: np.ndarray,
                               prompts: pl.DataFrame) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The main replay's lengths laid out for `asp_cli.bench.compare.compare`: aligned with ``prompts``, each
    prompt's lengths where it first runs, and per epoch (so the asp row of ``--compare`` is the main replay). `asp
    replay` lays its forced lengths out so (`asp_cli.integrate.replay_plan.prompt_lengths`)."""
    position = dict(zip(prompts["row"].to_list(), range(prompts.height)))
    index = np.fromiter((position[r] for r in frame["row"].to_list()), dtype=np.int64, count=frame.height)
    first = np.empty((prompts.height, lengths.shape[1]), dtype=lengths.dtype)
    first[index[::-1]] = lengths[::-1]  # the last write wins: each prompt's first row in seq order
    epochs = frame["epoch"].to_numpy()
    by_epoch = {}
    for epoch in np.unique(epochs):
        rows = epochs == epoch
        per = first.copy()
        per[index[rows]] = lengths[rows]
        by_epoch[int(epoch)] = per
    return first, by_epoch


def _dispatch_warnings(schedule: Schedule, dispatch: str, instances: int) -> list[str]:
    """With planned dispatch each minibatch runs on its planned instance: more instances than planned stay idle.
    Any other count than planned is a what-if: the plan was made for the schedule's own."""
    planned = schedule.instances
    if dispatch == "planned" and instances > planned:
        return [f"--instances {instances} with planned dispatch: the schedule plans {planned} instances, so "
                f"{instances - planned} of them get no work; replay with --dispatch free, or make the schedule "
                f"with --instances {instances}"]
    if instances != planned:  # a what-if, said as one (an OpenRLHF newcomer replayed an 8-engine deal on 4)
        laid = (f", each train batch laid out over {planned} engines for its --router's deal"
                if schedule.recorded_settings.router in ("group-round-robin", "cache-aware") else "")
        return [f"replayed on {instances} instances; the schedule was planned for {planned}: its order was chosen "
                f"for those{laid}; make the schedule with --instances {instances} to compare a plan made for these"]
    return []


def _lag_warnings(planned: int | float | None, lag: int | float | None, options: ReplayOptions) -> list[str]:
    """A replay under another lag bound than the schedule was planned for: a what-if, said as one (an AReaL
    newcomer replayed at --max-lag 2 a plan made for 4, read it faster, and nothing said the plan was not made so)."""
    given = options.max_lag is not None or not options.use_schedule_max_lag
    if not given or lag == planned:
        return []
    def said(value: int | float | None) -> str:
        return "none" if value is None else str(int(value)) if float(value).is_integer() else str(value)
    return [f"replayed at --max-lag {said(lag)}; the schedule was planned for --max-lag {said(planned)}: its order "
            f"was chosen for that bound; make the schedule with --max-lag {said(lag)} to compare a plan made for this "
            "one"]


def _trainer_warnings(metrics: dict, lag: int | float | None, trainer: str) -> list[str]:
    """A trainer that follows the schedule, where the line replaying another router takes groups as they finish
    (under a lag bound other than 0, not one step off: `replay_async_frame` as AReaL's controller or verl's fully
    asynchronous trainer runs): said, since the figure is the same as with --trainer arrival (a review: `asp
    simulate --max-lag 2` of an OpenRLHF-deal schedule ignored its --trainer schedule silently)."""
    owner = metrics.get("routed_as")
    if trainer != "schedule" or not metrics.get("routed_by") or lag == 0 or metrics.get("one_step_off"):
        return []
    whose = {"sglang": "verl 0.9's fully asynchronous trainer (as it starts prompts)"}.get(owner, f"{owner}'s trainer")
    return [f"--trainer schedule is not modelled in the 'as {owner} routes' line (nor --compare's 'as {owner} s' "
            f"column): it replays {whose}, which takes groups as they finish, as --trainer arrival does; the lines "
            "above it follow the schedule's steps"]


def _tail_warnings(schedule: Schedule, frame: pl.DataFrame, result: SimulationResult, comparison: list[dict] | None,
                   lag: int | float | None, trainer: str) -> list[str]:
    """`asp schedule`'s warnings about the rows past an epoch's last whole train batch (`advice.tail_warnings`), led
    by what they are to this replay: it runs them, and --compare each row's own, which a dataloader that drops a
    partial last batch (verl's) never does; with the time the partial step takes where a synchronous trainer
    follows the steps (a verl newcomer's comparison of a `bands` plan included its 468 longest prompts, unsaid), and
    as verl routes it where that replay takes the steps in turn; for a one-epoch replay, or one of several epochs each
    ending in a short step of its own."""
    from asp_cli.arrange.advice import tail_warnings

    recorded = schedule.recorded_settings
    size = recorded.train_batch_size
    epochs = frame["epoch"].n_unique()
    # Several epochs: a file of them all is read across the epochs' ends (`asp schedule` says what each epoch
    # exported alone leaves out); said where each epoch ends in a short step of its own, which verl drops from each
    # epoch exported alone (asp export --epoch) and the replay runs (since 2026-12-07; one epoch alone before).
    said = tail_warnings(frame, None, recorded) if epochs == 1 or partial_steps(frame, size).size else []
    if not said:
        return []
    left = frame.filter(pl.col("epoch") == frame["epoch"].min()).height % size
    m = result.metrics
    step = result.metrics.get("partial_step_s")
    routed = m.get("verl_routed_partial_step_s")
    whose = m.get("routed_as") or "verl"
    # An epoch smaller than one train batch holds no whole batch for its rows to be past ("past its whole train
    # batches of 8" of 4 prompts, a round's own report): all its rows are the short step's.
    whole = left < frame.filter(pl.col("epoch") == frame["epoch"].min()).height
    last = "last " if whole else ""
    lead = (f"this replay runs the epoch's {last}{left:,} row{'' if left == 1 else 's'}" if epochs == 1 else
            f"this replay runs each epoch's {last}{left:,} row{'' if left == 1 else 's'} ({left * epochs:,} over its "
            f"{epochs} epochs)")
    lead += ((f", past its whole train batches of {size}" if whole else
              f", which fill{'s' if left == 1 else ''} no whole train batch of {size}")
             + (f" (their step{'s' if epochs > 1 else ''}: {step:,.0f} s of the {m['end_to_end_s']:,.0f} s "
                f"end-to-end, for {left * epochs / frame.height:.0%} of the prompts"
                + (f"; as {whose} routes {routed:,.0f} s of {m['verl_routed_end_to_end_s']:,.0f} s"
                   if routed is not None else "") + ")" if step is not None else
                f" (their step{'s' if epochs > 1 else ''} as {whose} routes: {routed:,.0f} s of the "
                f"{m['verl_routed_end_to_end_s']:,.0f} s end-to-end, for {left * epochs / frame.height:.0%} of the "
                "prompts)" if routed is not None else ""))
    if comparison:
        shares = {r["arrangement"]: r["partial_step_s"] / r["end_to_end_s"] for r in comparison
                  if r.get("partial_step_s") is not None and r["end_to_end_s"]}
        lead += (f", and --compare each row's own last {left:,}{'' if epochs == 1 else ' of each epoch'}: a sort's "
                 "longest or shortest prompts, a shuffle's average ones"
                 + (f" ({'that step is' if epochs == 1 else 'those steps are'} {shares[ASP]:.0%} of asp's end-to-end, {shares['verl-default']:.0%} of "
                    "verl-default's, a shuffle's; each row's in --json: partial_step_s"
                    + (", and verl_routed_partial_step_s as verl routes"
                       if any(r.get("verl_routed_partial_step_s") is not None for r in comparison) else "") + ")"
                    if ASP in shares and "verl-default" in shares else ""))
    return [f"{lead}, so the times are not those of a run that leaves them out: {said[0]}", *said[1:]]


def _as_verl_routes(frame: pl.DataFrame, lengths: np.ndarray, hardware, instances: int, train_batch_size: int,
                    dispatch: str, seed: int, max_lag: int | None,
                    prompts_per_server: int | None = None, router: str | None = None,
                    trainer: str = "arrival") -> dict[str, float]:
    """A plan on servers that refill, replayed as verl 0.9 routes it: at ``max_lag`` 0 as its synchronous trainer
    does (`asp_cli.sim.submit_all.replay_frame`: the rollout summed over the steps), otherwise as its fully
    asynchronous one does (`asp_cli.sim.verl_async.replay_async_frame`: the rollout's last finish), its rollouter
    keeping ``prompts_per_server`` prompts per server in flight (None: as many as the servers' slots hold); with
    ``router`` ``cache-aware``, ``round-robin`` or ``group-round-robin`` (the schedule's `--router`), each request
    placed as sglang-router's cache_aware policy (slime's), AReaL's round-robin or OpenRLHF's deal places it, recorded
    as ``routed_by``; at ``max_lag`` 1 with cache-aware or group-round-robin and a ``trainer`` that follows the
    schedule, as slime's train_async.py or OpenRLHF's asynchronous trainer runs (`asp_cli.settings.one_step_off`:
    each rollout while the step before trains), recorded as ``one_step_off``."""
    from asp_cli.settings import one_step_off, replayed_owner

    routing = router if router not in (None, "least-pending") else None
    overlapped = one_step_off(router, max_lag, trainer)
    # Replayed asynchronously (below), a deal of whole groups in turn is AReaL's controller's whatever the trainer:
    # OpenRLHF's trainer is synchronous or one step off (a schedule for it replayed at --max-lag 2 was said as
    # "OpenRLHF's synchronous trainer").
    owner = replayed_owner(router, max_lag, trainer)
    said = {"routed_by": router, "routed_as": owner} if routing else {}
    if max_lag == 0 or overlapped:
        from asp_cli.sim.submit_all import replay_frame

        verl = replay_frame(frame, lengths, hardware, instances=instances, train_batch_size=train_batch_size,
                            dispatch=dispatch, seed=seed, routing=routing, one_step_off=overlapped)
        return {"verl_routed_end_to_end_s": verl.end_to_end_s, "verl_routed_rollout_s": float(verl.rollout_s.sum()),
                **routed_partial_step(verl, frame, train_batch_size, hardware.weight_sync_s, overlapped),
                **said, **({"one_step_off": True} if overlapped else {})}
    from asp_cli.sim.verl_async import replay_async_frame

    verl = replay_async_frame(frame, lengths, hardware, instances=instances, train_batch_size=train_batch_size,
                              max_lag=max_lag, dispatch=dispatch, seed=seed, routing=routing,
                              prompts_in_flight=None if prompts_per_server is None else prompts_per_server * instances)
    return {"verl_routed_end_to_end_s": verl.end_to_end_s, "verl_routed_rollout_s": verl.rollout_end_s,
            **({"verl_prompts_per_server": prompts_per_server} if prompts_per_server is not None else {}), **said}


def _as_verl_v1_async(frame: pl.DataFrame, lengths: np.ndarray, hardware, instances: int, train_batch_size: int,
                      dispatch: str, seed: int, max_lag: int | float, *, follow_steps: bool) -> dict[str, float]:
    """A plan replayed as verl 0.9's v1 trainer runs its asynchronous modes (`asp_cli.sim.verl_async.replay_async`):
    ``max_lag`` warm-up batches, then a train batch a step, every sample routed at submission; ``colocate_async``
    with the rollout stopped while the trainer trains, ``separate_async`` with the two side by side; the trainer
    following the schedule's steps (asp's replay buffer) where ``follow_steps``."""
    from asp_cli.sim.verl_async import replay_async_frame

    return {f"verl_v1_{mode}_end_to_end_s": replay_async_frame(
        frame, lengths, hardware, instances=instances, train_batch_size=train_batch_size, max_lag=max_lag,
        dispatch=dispatch, seed=seed, v1_mode=mode, follow_steps=follow_steps).end_to_end_s
        for mode in ("colocate_async", "separate_async")}


def simulate_loaded(
    schedule: Schedule,
    observed: pl.DataFrame | None = None,
    *,
    options: ReplayOptions = ReplayOptions(),
    compare: bool = False,
    skipped_rows: int = 0,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    sources: Sequence[str | Path] = (),
) -> SimulationReport:
    """`simulate_file` on a schedule and observed lengths already read (one row per sample, as
    `asp_cli.reading.read_lengths` returns them; ``sources``: the files they came from, named in the errors)."""
    from asp_cli.sim.lengths import epoch_samples

    recorded = schedule.recorded_settings
    n = recorded.samples_per_prompt
    k = options.instances if options.instances is not None else max(
        recorded.instances, int(schedule.frame["instance"].max()) + 1)
    lag = options.max_lag if options.max_lag is not None else (
        recorded.max_lag if options.use_schedule_max_lag else None)
    seed = recorded.seed if options.seed is None else options.seed
    hardware = schedule.cost_preset(options.preset)
    frame = schedule.frame.sort("seq")
    check_replay_size(frame.height, n, "asp simulate")
    observed = epoch_samples(observed, options.lengths_epoch, sources)
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=n, seed=seed,
                                         max_response_tokens=recorded.max_response_tokens,
                                         per_epoch=options.lengths_epoch is None)
    trainer = options.trainer or recorded.trainer
    mode = options.mode or recorded.engine
    # Schedules written before the dispatch setting were planned for (and replayed with) their instance column.
    dispatch = options.dispatch or (schedule.settings or {}).get("dispatch", "planned")
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=recorded.train_batch_size,
                                  mode=mode, dispatch=dispatch, max_lag=lag,
                                  trainer=trainer)  # type: ignore[arg-type]
    if progress is not None:
        progress(STAGES[2])
    if options.prompts_per_server is not None and mode != "streaming":
        raise SettingsError(f"--prompts-per-server is verl's asynchronous rollouter's limit: this replay's engine is "
                            f"{mode}; drop it, or give --engine streaming")
    if options.prompts_per_server is not None and trainer == "schedule":  # asp schedule refuses the same
        raise SettingsError("--prompts-per-server is verl's asynchronous rollouter's limit, whose trainer takes groups "
                            "as they finish: this replay's trainer follows the schedule (--trainer schedule), which "
                            "has no such limit; drop it, or give --trainer arrival")
    if dispatch == "planned" and k <= int(frame["instance"].max()):  # a minibatch on an instance the replay lacks
        planned = schedule.instances
        raise SettingsError(f"the schedule was made for {planned} instances (0 to {planned - 1}) and the replay has "
                            f"{k}, and planned dispatch keeps each minibatch on its instance; pass --instances "
                            f"{planned}, or --dispatch free")
    result = simulate_schedule(frame, lengths, hardware, settings, instances=k)
    # The epochs' partial last steps, which the tail warning gives too (the metrics lacked it, 2026-12-07).
    result.metrics.update(partial_step(result, frame, recorded.train_batch_size, lag, trainer))
    if mode == "streaming":
        per_server = options.prompts_per_server or recorded.prompts_per_server
        if options.prompts_per_server is not None and lag == 0:
            raise SettingsError("--prompts-per-server is verl's asynchronous rollouter's limit: this replay has "
                                "--max-lag 0 (a synchronous step submits its whole batch); drop it, or give a "
                                "--max-lag other than 0")
        result.metrics.update(_as_verl_routes(frame, lengths, hardware, k, recorded.train_batch_size, dispatch, seed,
                                              lag, per_server if lag != 0 else None, router=recorded.router,
                                              trainer=trainer))
        # A bound above 0: verl's v1 trainer runs that many warm-up batches ahead in its asynchronous modes (which
        # route through verl's balancer: not for a schedule made for sglang-router).
        if lag and recorded.router in (None, "least-pending"):
            result.metrics.update(_as_verl_v1_async(frame, lengths, hardware, k, recorded.train_batch_size, dispatch,
                                                    seed, lag, follow_steps=trainer == "schedule"))
    document = {
        "schedule": name if name is not None else str(schedule.path),
        "preset": hardware.name,
        "mode": mode,
        "dispatch": dispatch,
        "instances": k,
        "samples_per_prompt": n,
        "train_batch_size": recorded.train_batch_size,
        "max_lag": lag,
        "trainer": trainer,
        # The verl trainer the schedule was timed for (`ScheduleSettings.verl_trainer`), where it was given.
        **({"verl_trainer": recorded.verl_trainer} if recorded.verl_trainer else {}),
        "lengths": {**info.to_dict(), "skipped_rows": skipped_rows, "epoch": options.lengths_epoch},
        "warnings": (info.warnings(recorded.max_response_tokens) + _dispatch_warnings(schedule, dispatch, k)
                     + _lag_warnings(recorded.max_lag, lag, options) + _trainer_warnings(result.metrics, lag, trainer)),
        "noise_model": None if info.prompts_sampled == 0 else {
            "prompt_sigma": PROMPT_SIGMA, "sample_sigma": SAMPLE_SIGMA, "seed": seed},
        "metrics": result.metrics,
    }
    comparison = None
    if compare:
        prompts, predictions = schedule_prompts(frame)
        truth, by_epoch = replayed_lengths_per_epoch(frame, lengths, prompts)
        # The true-lengths ceiling needs every prompt's lengths observed; with sampled ones it would be judged
        # on the very lengths it was arranged with.
        include = None if info.prompts_sampled == 0 else tuple(
            name for name in compare_names() if name != ASP_TRUE)
        # Every row is replayed as the main replay was: its instances, lag bound, trainer and (asp's row) dispatch.
        # The baselines in asp's sizes are cut by the very budget asp's minibatches were (not by the cache of
        # another --preset they are replayed on), and the way they were (`kv_cut`); a plan for engines that
        # refill cut no minibatches, so on a blocking --mode they are cut as asp would cut for that engine.
        # verl's rollouter limit only where this replay is asynchronous on servers (a schedule that recorded it,
        # compared at --max-lag 0 or on another engine, was refused for a --prompts-per-server not given).
        recorded_k = recorded.replayed_as(
            instances=k, max_lag=lag, dispatch=dispatch, trainer=trainer,
            max_tokens_per_minibatch=schedule.kv_tokens_per_minibatch or recorded.max_tokens_per_minibatch,
            prompts_per_server=(options.prompts_per_server or recorded.prompts_per_server)
            if mode == "streaming" and lag != 0 else None)
        if progress is not None:
            progress(STAGES[3])
        # The verl trainer the comparison's "as verl" column replays each row as (`compare._as_verl_routes`): the
        # schedule's v1 mode where it still applies to this replay (not beside --prompts-per-server, say).
        compared = recorded_k.replayed_as(engine=mode).verl_v1_mode
        if compared and mode == "streaming":
            document["compared_as_verl_trainer"] = compared
        # Every row routed by the schedule's --router, as the main replay's line routes (`recorded_k` drops it where
        # this replay's --max-lag or --trainer make a combination `asp schedule` refuses for it: the line said "as
        # AReaL routes" over a table headed "as verl s", a review).
        comparison = run_compare(prompts, predictions, truth, recorded_k, hardware, mode=mode, max_lag=lag,
                                 asp_frame=frame, include=include, progress=progress, truth_by_epoch=by_epoch,
                                 kv_cut=None if recorded.engine == "streaming" else schedule.kv_budget,
                                 router=recorded.other_router if mode == "streaming" else None)
        document["comparison"] = comparison
        # The ceiling plans with one length per prompt (`truth`: where it first runs): epochs replaying others (the
        # lengths' own epoch since 2026-12-07, or a group's rest drawn afresh) are not known to it (a hostile review).
        other = [e for e, per in sorted(by_epoch.items()) if not np.array_equal(per, truth)]
        if other and any(r["arrangement"] == ASP_TRUE for r in comparison):
            document["warnings"].append(
                f"'{ASP_TRUE}' plans every epoch with each prompt's lengths of the first epoch it runs in, and epoch"
                f"{'s' if len(other) > 1 else ''} {', '.join(map(str, other[:-1]))}{' and ' if len(other) > 1 else ''}"
                f"{other[-1]} replay{'' if len(other) > 1 else 's'} "
                "other lengths (the lengths' own epoch, or the rest of a group drawn afresh), which it does not know: "
                "it is no ceiling there; for one, replay a single epoch's lengths in every epoch with --lengths-epoch E")
        if info.prompts_observed == 0:
            # Said: a verl newcomer, comparing before any rollout, read 7.3% over verl's shuffle where the same plan
            # on lengths emulated from real answers gave 5.5% (README: 6% against 1.7% for a representative plan).
            document["warnings"].append(
                "no observed lengths (--lengths): every length is drawn around the schedule's own predictions, which "
                "asp's plan and the sorts were made from and a shuffle was not, so the rows' leads over the shuffles "
                "are at lengths ranked as the plan expected them (on the sample data, as verl routes, a --steps "
                "representative plan read 6% faster than verl's shuffle so, 1.7% on lengths emulated from real "
                "answers: README, \"Wire it into training\"); replay your rollout log with --lengths before "
                "trusting a lead")
        if recorded.engine != mode and "streaming" in (recorded.engine, mode):
            # A plan for engines that refill sends one group per request; a blocking engine runs each request as
            # a generate() call, so asp's row runs calls of one prompt against the baselines' dozens.
            document["warnings"].append(
                f"the schedule was made for --engine {recorded.engine} and is compared on --engine {mode}: its "
                "requests are not that engine's calls, so its row is not on equal footing with the baselines; "
                f"make the schedule with --engine {mode} to compare on that engine")
        mine = next((r for r in comparison if r["arrangement"] == ASP), None)
        # Said unless the user asked for no bound (`--max-lag none`): then it is what they meant.
        if lag is None and options.use_schedule_max_lag and mine is not None and mine.get("policy_lag_mean", 0.0) > 1.0:
            document["warnings"].append(
                f"no lag bound: every row lets rollout run ahead of the trainer (asp's groups are "
                f"{mine['policy_lag_mean']:.1f} steps stale on average), as an asynchronous trainer does; verl's "
                "default trainer is synchronous: compare with --max-lag 0 --trainer schedule (and make the "
                "schedule so" + ("" if recorded.engine == "streaming" else ", with --engine streaming: verl 0.7 and "
                                 "later generate on servers that refill, not in blocking calls") + ")")
        planned = int(frame["instance"].max()) + 1  # the rows left out where the instance column names more
        if k < planned:
            document["warnings"].append(
                f"--instances {k} is fewer than the {planned} the schedule plans: the rows that keep to its planned "
                "instances, 'asp, planned instances' (and, under planned dispatch, 'random (asp slots)') are left out "
                "of the comparison")
    document["warnings"].extend(_tail_warnings(schedule, frame, result, comparison, lag, trainer))
    if comparison is None and recorded.engine != mode and "streaming" in (recorded.engine, mode):  # as compared
        document["warnings"].append(
            f"the schedule was made for --engine {recorded.engine} and is replayed on --engine {mode}: "
            + ("its groups were planned as requests to servers that refill, not as that engine's minibatches"
               if recorded.engine == "streaming" else "its minibatches were planned for a blocking engine, not as "
               "requests to servers that refill")
            + f", so the figures are of a plan made for another engine; make the schedule with --engine {mode} to see "
            "a plan for it")
    return SimulationReport(document, result, comparison)
