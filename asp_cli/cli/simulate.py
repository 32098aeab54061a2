"""`asp simulate` (replay a schedule on simulated instances and a trainer) and `asp bench` (the benchmark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from asp_cli.cli.common import NO_LAG_BOUND, emit_json, guarded, lag_option, output_option, say
from asp_cli.reading.options import DEFAULT_READ
from asp_cli.settings import PRESET_NAMES
from asp_cli.sim.options import ReplayOptions

_DEFAULT = ReplayOptions()  # the CLI's defaults are the library's


def register(app: typer.Typer) -> None:
    app.command("simulate", no_args_is_help=True)(simulate_command)
    app.command("bench")(bench_command)


def simulate_command(
    schedule: Path = typer.Argument(..., metavar="SCHEDULE", readable=False, help="A schedule written by `asp schedule` (.parquet)."),
    lengths: list[Path] = typer.Option([], "--lengths", metavar="<path>", readable=False, help="Observed response lengths (same formats and columns as --history; repeatable). Without them lengths are sampled around the predictions."),
    lengths_id_key: Optional[str] = typer.Option(None, "--lengths-id-key", help="The prompt id column in length files."),
    lengths_length_key: Optional[str] = typer.Option(None, "--lengths-length-key", help="The response length column in length files."),
    lengths_epoch: Optional[int] = typer.Option(None, "--lengths-epoch", metavar="E", help="Replay only epoch E's samples of --lengths (by its epoch column, as asp observe --epoch numbered them; -1: the samples without an epoch, a probe's). Default: each schedule epoch replays the lengths' samples of its own epoch number where they hold it (a schedule of several epochs); else each prompt's first N samples, oldest epoch first; a probe's left out of the prompts an epoch holds (docs/replay.md)."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' or 'skip' bad rows of --lengths files."),
    preset: Optional[str] = typer.Option(None, "--preset", help=f"Hardware/model preset ({', '.join(PRESET_NAMES)}) or JSON calibration file; default: the one the schedule was made with (every field it recorded, wherever its calibration file is now)."),
    mode: Optional[str] = typer.Option(None, "--mode", "--engine", help="Engine (--engine is the same option, as asp schedule names it): 'continuous' (blocking generate() calls, vLLM offline), 'static' (HF generate, padded) or 'streaming' (servers that refill freed slots); default: the engine the schedule was planned for (asp schedule --engine)."),
    trainer: Optional[str] = typer.Option(None, "--trainer", help="'arrival' (the trainer takes the next train batch of finished groups) or 'schedule' (exactly the groups train_step assigns); default: the schedule's."),
    dispatch: str = typer.Option(_DEFAULT.dispatch, "--dispatch", help="'planned' follows the schedule's instance column; 'free' hands minibatches in seq order to whichever instance is free; default: the dispatch the schedule was made for (asp schedule --dispatch; planned for files that do not record one)."),
    max_lag: Optional[Any] = lag_option(None, help="Hold rollout back (AReaL admission rule) so groups stay at most this many versions stale; default: the schedule's setting; none: no bound, whatever the schedule recorded."),
    instances: Optional[int] = typer.Option(None, "--instances", "-k", help="Simulated instances; default: the schedule's."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for sampled lengths; default: the schedule's."),
    prompts_per_server: Optional[int] = typer.Option(None, "--prompts-per-server", help="With --engine streaming and a lag bound other than 0: the prompts verl's fully asynchronous rollouter keeps in flight per server (async_training.concurrent_samples_per_replica, 16 there by default), for the 'as verl routes' line; default: the schedule's (asp schedule --prompts-per-server), else as many as the servers' slots hold."),
    compare: bool = typer.Option(False, "--compare", help="Also replay today's arrangements of the same prompts on the same lengths, and print one table."),
    wide: bool = typer.Option(False, "--wide", help="With --compare: every column of the table (the default shows the main ones; --json has every figure)."),
    timeseries: Optional[Path] = output_option("--timeseries", default=None, help="Write a binned time series (.csv or .parquet) for plotting."),
    bins: int = typer.Option(400, "--bins", help="Time bins in --timeseries."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --timeseries file."),
    json_output: bool = typer.Option(False, "--json", help="Print the metrics as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or summary on stderr (warnings still are)."),
    progress: bool = typer.Option(False, "--progress", help="Show each stage on stderr even when it is not a terminal (one line per stage)."),
) -> None:
    """Replay a schedule on K simulated rollout instances and a trainer; report time, bubbles and lag."""
    with guarded():
        import dataclasses

        from asp_cli.errors import SettingsError
        from asp_cli.output import check_output_path, check_parquet_name
        from asp_cli.bench.simulate import SIMULATE_READ, simulate_file
        from asp_cli.cli.progress import stage_bar
        from asp_cli.sim.records import check_bins

        if wide and not compare:  # it would do nothing, silently
            raise SettingsError("--wide widens --compare's table: add --compare, or drop --wide")
        options = ReplayOptions(preset=preset, mode=mode, dispatch=dispatch,  # type: ignore[arg-type]
                                max_lag=None if max_lag == NO_LAG_BOUND else max_lag,
                                use_schedule_max_lag=max_lag != NO_LAG_BOUND, trainer=trainer,  # type: ignore[arg-type]
                                instances=instances, seed=seed, prompts_per_server=prompts_per_server,
                                lengths_epoch=lengths_epoch)
        read = dataclasses.replace(SIMULATE_READ, length_id_key=lengths_id_key, length_key=lengths_length_key,
                                   on_bad_row=on_bad_row)  # type: ignore[arg-type]
        check_bins(bins)
        if timeseries is not None:
            if timeseries.suffix.lower() not in (".csv", ".parquet", ".pq"):
                raise SettingsError(f"--timeseries {timeseries}: give a .csv or .parquet file name")
            check_output_path(timeseries, [schedule, *lengths], force=force)
            if timeseries.suffix.lower() != ".csv":  # not over a file another asp command wrote (E85)
                check_parquet_name(timeseries, writer="--timeseries", writes="a time series")
        bar = stage_bar("asp simulate", quiet=quiet, progress=progress)  # unnumbered: --compare adds stages
        try:
            report = simulate_file(schedule, lengths, options=options, read=read, compare=compare,
                                   progress=bar.step if bar else None)
        finally:
            if bar:
                bar.close()
        if timeseries is not None:
            _write_timeseries(report.result.timeseries(bins), timeseries, replace=force)
        if not quiet:
            say(_summary(report.document))
        for warning in report.document["warnings"]:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if not quiet:
            if report.comparison:
                say("")
                say(report.table(wide=wide))
                verdict = report.verdict()
                if verdict:
                    say(verdict)
                routed = (report.document.get("metrics") or {}).get("routed_by")
                # What the rows are, for trainers other than verl too (an OpenRLHF and a MindSpeed newcomer could not
                # tell which row was their own default).
                say("  verl-default: a shuffle (the default order of verl, OpenRLHF and MindSpeed-RL) in verl's chunks of "
                    "a train batch, each chunk kept to one instance; dataset-order: the same in the file's own order "
                    "(slime's order without --rollout-shuffle; slime routes through its router, not in chunks)"
                    # The least-pending row is on engines that refill only (a newcomer read its legend under a
                    # blocking engine's table, which has no such row).
                    + ("; least-pending: a shuffle, each group to the least loaded instance (as verl's servers route"
                       + ("" if routed == "group-round-robin" else
                          "; OpenRLHF and AReaL deal prompts to the servers in turn: make their schedules with "
                          "--router group-round-robin")
                       # a slime newcomer who left out --router cache-aware read only the other frameworks' fix here
                       + ("" if routed == "cache-aware" else "; slime's sglang-router keeps each group on one "
                          "server: make its schedule with --router cache-aware") + ")"
                       if any(r["arrangement"] == "least-pending" for r in report.comparison) else "")
                    + ("; asp (true lengths): asp's own choice knowing every length, a yardstick, not a bound (it can be "
                       "slower than asp: docs/simulation.md)"
                       if any(r["arrangement"] == "asp (true lengths)" for r in report.comparison) else "")
                    + "; vs: end-to-end time "
                    "over the best equal-footing row and over verl-default"
                    + _padding_legend(report.comparison)
                    + ("" if wide else "; --wide shows every column, --json every figure"))
                compared = report.document.get("compared_as_verl_trainer")
                if compared:  # `compare._as_verl_routes`
                    say(f"  (as verl s: each row as verl's v1 trainer runs {compared.replace('-', '_')}, the mode the "
                        "schedule was made for)")
        if json_output:
            emit_json(report.document)


def _write_timeseries(series: dict, path: Path, *, replace: bool) -> None:
    import polars as pl

    from asp_cli.output import atomic_path

    frame = pl.DataFrame(series)
    with atomic_path(path, replace=replace) as tmp:
        if path.suffix.lower() == ".csv":
            frame.write_csv(tmp)
        else:
            frame.write_parquet(tmp)


def _padding_legend(rows: list[dict]) -> str:
    """Where the rows are cut into calls of different sizes, what their padding counts: each request's empty slots
    against its own sequences, so a chunk of a train batch and one group differ on it by their cut, not only their
    order (a verl newcomer read 0.88 for verl's chunks beside 0.10 for per-group rows on the same lengths)."""
    calls = [r["prompts_per_call"] for r in rows if r.get("prompts_per_call")]
    if not calls or max(calls) < 1.5 * min(calls):
        return ""
    return ("; padding: empty slots against each call's own sequences, so rows of different prompts/call differ on "
            "it by how they are cut, not only by their order: compare their end-to-end times")


def lengths_words(lengths: dict) -> str:
    """Where a replay's lengths came from, in the words `asp simulate` and `asp replay` print (their document's
    ``lengths``): the prompts observed, drawn and sampled, and, on a schedule of several epochs, which epoch of the
    lengths each schedule epoch replayed."""
    observed = lengths["prompts_with_observed_lengths"]
    source = f"{observed:,} prompt{'' if observed == 1 else 's'} with observed lengths"
    if lengths.get("prompts_with_drawn_samples"):
        source += (f" ({lengths['prompts_with_drawn_samples']:,} observed fewer times than the group size: the rest "
                   "of each group drawn around their samples)")
    source += f", {lengths['prompts_with_sampled_lengths']:,} sampled around predictions"
    if lengths.get("epochs_replayed"):  # a schedule of several epochs, lengths of numbered epochs
        from asp_cli.sim.lengths import epochs_replayed_text

        source += f" ({epochs_replayed_text(lengths['epochs_replayed'])})"
    if lengths.get("skipped_rows"):
        from asp_cli.errors import counted

        source += f" (skipped {counted(lengths['skipped_rows'], 'bad row')}, --on-bad-row skip)"
    return source


def _summary(document: dict) -> str:
    m = document["metrics"]
    source = lengths_words(document["lengths"])
    return "\n".join([
        f"Simulated {m['sequences']:,} sequence{'' if m['sequences'] == 1 else 's'} ({m['groups']:,} "
        f"group{'' if m['groups'] == 1 else 's'}) on {document['instances']} x "
        f"{document['preset']} ({document['mode']}, {document['dispatch']} dispatch); {source}.",
        f"  end-to-end       {m['end_to_end_s']:,.1f} s over {m['train_steps']} "
        f"step{'' if m['train_steps'] == 1 else 's'} "
        f"(mean iteration {m['mean_iteration_s']:,.1f} s)",
        f"  lower bound      {m['lower_bound_end_to_end_s']:,.1f} s (ratio {m['ratio_to_lower_bound']:.3f}; "
        f"binds: {m['lower_bound_end_to_end_binding']})",
        f"  rollout          {m['rollout_makespan_s']:,.1f} s (ratio {m['rollout_ratio_to_lower_bound']:.3f}; "
        f"binds: {m['lower_bound_rollout_binding']}"
        + ("; under the lag bound it includes waiting for the trainer, which the bound leaves out"
           if document.get("max_lag") is not None else "") + ")",
        f"  bubbles          empty sequence slots {m['padding_fraction']:.1%} of each minibatch's slot-steps (replayed "
        f"lengths, tail included; not the schedule's predicted padding), tail {m['tail_time_fraction']:.1%} "
        f"of busy time, instance finish spread {m['instance_finish_spread_s']:,.1f} s",
        f"  trainer          idle {m['trainer_idle_fraction']:.1%}, queue mean {m['queue_groups_mean']:.1f} groups "
        f"(CV {m['queue_groups_cv']:.2f})",
        f"  policy lag       mean {m['policy_lag_mean']:.2f}, max {m['policy_lag_max']}; step length vs mean "
        f"{m['step_length_ratio_min']:.2f}-{m['step_length_ratio_max']:.2f}" + _released(m, document),
        _kv_line(m),
        *([_routed_line(m, document)] if "verl_routed_end_to_end_s" in m else []),
        *([f"  verl v1 async    colocate_async {m['verl_v1_colocate_async_end_to_end_s']:,.1f} s, separate_async "
           f"{m['verl_v1_separate_async_end_to_end_s']:,.1f} s end-to-end (verl 0.9's main_ppo with "
           f"trainer.v1.trainer_mode: --max-lag warm-up batches, then a train batch a step, every sample routed at "
           f"submission; colocate_async stops the rollout while it trains, the resumed requests prefilled again; "
           + ("each step the groups the schedule assigns it, asp's replay buffer" if document.get("trainer") ==
              "schedule" else "each step the oldest finished groups, verl's own buffer") + ")"
           + (f"; the schedule was made for {document['verl_trainer'].replace('-', '_')} (asp schedule --verl-trainer)"
              if document.get("verl_trainer") not in (None, "fully-async") else "")]
          if "verl_v1_colocate_async_end_to_end_s" in m else []),
    ])


def _released(m: dict, document: dict) -> str:
    """Where the trainer follows the schedule and its order cannot keep the lag bound (a minibatch of a later step
    ahead of an earlier step's groups), the replay lets such minibatches go past it rather than wait forever: say
    how many, so that a lag above the bound is not read as the bound failing. The way out names the trainer too:
    a schedule made with the same ``--max-lag`` for a trainer in arrival order (the default) is held to the bound
    in arrival order, and its order can still break it for a trainer that follows it. Where nothing was let go and
    a group still trained past the bound (a trainer in arrival order), say why and how many."""
    if document.get("max_lag") is None:
        return ""
    if not m.get("lag_rule_released"):
        # In arrival order a group that finishes late is trained past the bound, which holds back the groups
        # started ahead: an AReaL-deal schedule at --max-lag 1 said max 1 (its summary, asp report, at the point
        # predictions) and this replay max 2 (a review).
        bound = document["max_lag"]
        late = sum(count for lag, count in (m.get("policy_lag_histogram") or {}).items() if float(lag) > bound)
        if m.get("policy_lag_max", 0) <= bound or not late:
            return ""
        return (f"\n                   {late:,} group(s) trained past --max-lag {bound}: the bound holds back the groups "
                "started ahead of the trainer (AReaL's and verl's count rule), not a group that finishes late, trained "
                "in a later step; the schedule's expected lag (its summary, asp report) is figured at the point "
                "predictions, this replay's on its lengths")
    return (f"\n                   {m['lag_rule_released']:,} minibatch(es) let go past --max-lag "
            f"{document['max_lag']}: this schedule's order cannot keep that bound with a trainer that follows it "
            f"(make the schedule with --trainer schedule --max-lag {document['max_lag']}: docs/simulation.md)")


def _routed_line(m: dict, document: dict) -> str:
    """The replay as verl 0.9 routes it (or, for a schedule made with another --router, as that router does: slime's
    sglang-router, AReaL's round-robin, OpenRLHF's deal), in one line."""
    overlapped = bool(m.get("one_step_off"))  # slime's train_async.py: by rollout, as a synchronous step
    synchronous = document.get("max_lag") == 0 or overlapped
    slime, areal = m.get("routed_by") == "cache-aware", m.get("routed_by") == "round-robin"
    dealt = m.get("routed_by") == "group-round-robin"  # OpenRLHF's deal, or AReaL's controller's
    openrlhf, areal_deal = dealt and m.get("routed_as") != "AReaL", dealt and m.get("routed_as") == "AReaL"
    how = (("OpenRLHF's asynchronous trainer (the schedule's --router, --max-lag 1 and --trainer schedule): each "
            "rollout batch generated while the step before trains, " if overlapped else
            "OpenRLHF's synchronous trainer (the schedule's --router): a rollout batch, then its training, ")
           + "a prompt's samples together, the batch's prompts dealt to the engines in turn, " if openrlhf else
           (("slime's train_async.py through sglang-router's cache_aware policy (the schedule's --router, --max-lag 1 "
            "and --trainer schedule): each rollout generated while the step before trains, every sample a request, "
            "a rollout's groups submitted in order, " if overlapped else
            "slime's synchronous rollout through sglang-router's cache_aware policy (the schedule's --router): every "
            "sample a request, a rollout's groups submitted in order, " if synchronous else
            "prompts started as slots free, as verl 0.9's fully asynchronous trainer starts them, each request routed "
            "by sglang-router's cache_aware policy (the schedule's --router), ") if slime else
           (("a synchronous step" if synchronous else "prompts started as slots free")
            + ", every sample its own request to the next server in turn, as AReaL's SPMD mode routes (the schedule's "
              "--router), ") if areal else
           (("a train batch at a time, each group whole to the next server in turn (AReaL's single controller at a "
             "bound of 0, where the batch is a multiple of the servers; the schedule's --router), ") if synchronous else
            "prompts started in the file's order as slots and the lag bound allow, each whole to the next server in "
            "turn, as AReaL's single controller deals them (the schedule's --router" + (
                " and --trainer arrival), " if document.get("trainer") == "arrival" else
                "; its trainer takes groups as they finish: a warning below), "))
           if areal_deal else
           ("verl 0.9's synchronous trainer: every sample a request, a train batch routed as it is submitted, "
            if synchronous else
            "verl 0.9's fully asynchronous trainer: a prompt started as a slot frees ("
            + (f"{m['verl_prompts_per_server']} per server" if "verl_prompts_per_server" in m else
               "as many as the servers' slots hold")
            + "), each of its samples routed as it starts (the v1 trainer's asynchronous modes: the next line), ")))
    where = ("each group's samples on one engine" if openrlhf or areal_deal else
             "each group's samples on the server its first went to" if slime else
             "each group's samples dealt over the servers" if areal else
             "each group kept to its planned instance by asp's router plug-in" if document["dispatch"] == "planned"
             else "each group's samples spread over the servers")
    label = f"as {'sglang' if slime else 'AReaL' if areal or areal_deal else 'OpenRLHF' if openrlhf else 'verl'} routes"
    return (f"  {label:<17} {m['verl_routed_end_to_end_s']:,.1f} s end-to-end, rollout "
            f"{m['verl_routed_rollout_s']:,.1f} s"
            + (" summed over its steps (the training " + ("beside" if overlapped else "between") + " them left out)"
               if synchronous
               else " to the last sample's finish")
            + f" ({how}{where}; the lines above route each group whole to whichever server frees first: "
            "docs/simulation.md)")


def _kv_line(m: dict) -> str:
    if m.get("static_batches"):  # padded batches are not preempted: over the cache, HF generate runs out of memory
        return (f"  KV cache         {m['static_batches_over_kv_capacity']:,} of {m['static_batches']:,} padded "
                f"batch{'' if m['static_batches'] == 1 else 'es'} over the cache (they would run out of memory), peak "
                f"{m['peak_kv_utilization']:.0%}")
    return (f"  KV cache         {m['preemptions']:,} preemption{'' if m['preemptions'] == 1 else 's'}, peak "
            f"{m['peak_kv_utilization']:.0%}")


def bench_command(
    data: Optional[Path] = typer.Option(None, "--data", readable=False, help="A folder of real length data for the workloads whose data does not ship (AIME: its aime_r1distill1.5b_lengths/ folder, docs/simulation.md); default: only what ships, which runs gsm8k-k4-n8 alone (the MATH level 5 workloads are mixes with AIME)."),
    preset: str = typer.Option("h100-qwen2.5-7b", "--preset", help=f"Hardware/model preset ({', '.join(PRESET_NAMES)}) or JSON calibration file."),
    mode: str = typer.Option("continuous", "--mode", "--engine", help="Engine for every row (--engine is the same option): 'continuous', 'static' or 'streaming'."),
    max_lag: Optional[Any] = lag_option(None, help="Lag bound applied to every arrangement (default: each workload's; none: no bound)."),
    only: list[str] = typer.Option([], "--workload", help="Run only these workloads (repeatable)."),
    markdown: Optional[Path] = output_option("--markdown", default=None, help="Write the tables as Markdown to this file."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --markdown file."),
    json_output: bool = typer.Option(False, "--json", help="Print every row as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress, tables or warnings on stderr."),
) -> None:
    """Compare asp with today's arrangements and the lower bound on workloads built from real lengths."""
    with guarded():
        from asp_cli.bench.compare import WORKLOADS, benchmark_markdown, format_table, run_benchmark
        from asp_cli.bench.data import check_data_folder, unavailable_text, unavailable_workloads
        from asp_cli.costmodel import load_preset
        from asp_cli.errors import SettingsError
        from asp_cli.output import check_output_name, check_output_path, write_text_atomic

        unknown = [w for w in only if w not in WORKLOADS]
        if unknown:
            raise SettingsError(f"unknown --workload {unknown[0]!r}; choose from {', '.join(WORKLOADS)}")
        if markdown is not None:
            check_output_path(markdown, force=force)
            check_output_name(markdown, (".md", ".markdown"), writer="--markdown", what="Markdown")
        check_data_folder(data)
        from asp_cli.bench.data import data_folder_warning
        from asp_cli.settings import check_lag
        from asp_cli.sim.options import check_engine

        # Every setting before anything is said or built (the engine, the preset and the lag bound were checked
        # after "Skipped: ..." and "building ...": a hostile-input round).
        check_engine(mode, "free", None)  # the engine's one check, every replay's
        hardware = load_preset(preset)
        if max_lag not in (None, NO_LAG_BOUND):
            check_lag(max_lag)
        names = tuple(only) or None
        unavailable = unavailable_workloads(WORKLOADS, names, data)
        if not quiet and data_folder_warning(data) and len(unavailable) < len(names or WORKLOADS):  # else the error
            say(f"Warning: {data_folder_warning(data)}")
        if not quiet and unavailable and len(unavailable) < len(names or WORKLOADS):
            say(f"Skipped: {unavailable_text(unavailable, data)}.")
        results = run_benchmark(data, hardware, names=names, mode=mode, max_lag=max_lag,
                                progress=None if quiet else say)
        from asp_cli.bench.verdict import verdict

        for spec, _workload, rows in results if not quiet else ():
            say(f"\n{spec.name}: {spec.title}")
            say(format_table(rows, markdown=False))
            # The answer, as simulate --compare gives it (a newcomer: a loss went unsaid), with the engine (a blocking
            # one's verl-default is verl's shuffle as calls verl 0.7 and later do not run).
            said = verdict(rows, mode=mode)
            if said:
                say(said)
        if markdown is not None:
            write_text_atomic(markdown, benchmark_markdown(results, command="asp bench" + (
                f" --data {data}" if data is not None else "")), replace=force)
        if json_output:
            emit_json({spec.name: rows for spec, _, rows in results})
