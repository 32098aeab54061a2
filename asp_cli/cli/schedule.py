"""`asp schedule`: prompt files in, a Parquet schedule out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from asp_cli.cli.common import NO_LAG_BOUND, emit_json, guarded, lag_option, difficulty_key_option, output_option, say, source_key_option
from asp_cli.arrange.made_for import made_for_line
from asp_cli.errors import counted
from asp_cli.cli.progress import stage_bar
from asp_cli.reading.options import DEFAULT_READ
from asp_cli.settings import PRESET_NAMES, ScheduleSettings

_DEFAULT = ScheduleSettings()  # the CLI's defaults are the library's

_STAGES = ("reading history", "reading prompts and predicting lengths", "packing and interleaving",
           "writing schedule")


def register(app: typer.Typer) -> None:
    app.command("schedule", no_args_is_help=True)(schedule_command)


def schedule_command(
    inputs: list[Path] = typer.Argument(..., metavar="INPUTS", readable=False, help="Prompt files: .jsonl, .json, .parquet or .csv (optionally .gz)."),
    output: Path = output_option("--output", "-o", help="The schedule to write (.parquet)."),
    instances: int = typer.Option(_DEFAULT.instances, "--instances", "-k", help="Rollout instances (engines) K."),
    samples_per_prompt: int = typer.Option(_DEFAULT.samples_per_prompt, "--samples-per-prompt", "-n", help="Samples per prompt (GRPO group size N)."),
    epochs: int = typer.Option(_DEFAULT.epochs, "--epochs", help="Epochs to schedule; each gets a fresh arrangement."),
    train_batch_size: int = typer.Option(_DEFAULT.train_batch_size, "--train-batch-size", help="Prompts (groups) per training step."),
    minibatch_size: int = typer.Option(_DEFAULT.minibatch_size, "--minibatch-size", help="Most prompts per inference minibatch."),
    max_tokens_per_minibatch: Optional[int] = typer.Option(
        _DEFAULT.max_tokens_per_minibatch, "--max-tokens-per-minibatch",
        help="Most KV tokens per minibatch, each group counted as --kv-budget says. Default: the preset's KV cache (half of it with --engine static: HF generate does not preempt).",
    ),
    kv_budget: str = typer.Option(_DEFAULT.kv_budget, "--kv-budget", help="How a group counts against --max-tokens-per-minibatch on blocking engines: 'whole' (N x (prompt + predicted mean response) KV tokens: never overflows the cache when predictions hold), 'peak' (its share of the minibatch's expected peak KV: fuller minibatches of long prompts, a preemption now and then) or 'auto' (where the budget binds, --arrangement auto judges its candidates counted whole (at the peak, one that cannot keep the lag bound whole), its winner also at the peak, and if that is faster by more than the tie margin chooses again among all counted so; else whole. Where the budget does not bind, with a named --arrangement, or when one group alone exceeds it counted whole: peak). The static engine counts each minibatch padded: rows x (longest prompt + longest predicted group maximum)."),
    max_response_tokens: int = typer.Option(_DEFAULT.max_response_tokens, "--max-response-tokens", help="The generation cap in tokens."),
    max_lag: Optional[Any] = lag_option(_DEFAULT.max_lag, help="Hold rollout back so no group is expected more than this many policy versions stale (whole steps, AReaL's rollout.max_head_offpolicyness; a fraction below 1 is verl's staleness_threshold, of its fully asynchronous trainer; with a v1 --verl-trainer the lag is num_warmup_batches, train batches of warm-up); 0: synchronous training, verl's default trainer (give --trainer schedule with it); none (the default): no bound, an asynchronous trainer."),
    seed: int = typer.Option(_DEFAULT.seed, "--seed", help="Seed for tie-breaks and per-epoch variety."),
    plan_with: str = typer.Option(_DEFAULT.plan_with, "--plan-with", help="Plan with the predicted group 'max' or 'mean' length."),
    preset: str = typer.Option(_DEFAULT.preset, "--preset", help=f"Hardware/model preset ({', '.join(PRESET_NAMES)}) or a JSON calibration file (asp calibrate -o)."),
    length_classes: int = typer.Option(_DEFAULT.length_classes, "--length-classes", help="Length classes the interleaver spreads over time."),
    canonical_order: bool = typer.Option(_DEFAULT.canonical_order, "--canonical-order", help="Make the arrangement independent of the input row order (prompts are taken sorted by id)."),
    engine: str = typer.Option(_DEFAULT.engine, "--engine", help="The engine to plan for: 'continuous' (blocking generate() calls, vLLM offline), 'static' (padded HF generate) or 'streaming' (servers that refill freed slots)."),
    dispatch: str = typer.Option(_DEFAULT.dispatch, "--dispatch", help="How the engine takes minibatches: 'free' (the next one in seq order to whichever instance frees first: a shared queue, verl, least-pending servers) or 'planned' (each instance keeps to the schedule's instance column). --arrangement auto judges its candidates so."),
    steps: str = typer.Option(_DEFAULT.steps, "--steps", help="'any' lets --arrangement auto take the fastest candidate; 'representative' only those whose training steps are expected to be about as representative of the epoch as a shuffle's (in the --trainer order)."),
    arrangement: str = typer.Option(_DEFAULT.arrangement, "--arrangement", help="'auto' tries interleave, long-first, short-first, shuffle and per-step (a shuffle's train batches, each planned longest first, or in synchronous training dealt by balanced work), with --engine streaming also quick-start (a train batch of the epoch's shortest prompts, then the rest shuffled) and bands (shortest first by train batch, each batch one band of lengths per instance, sent in request batches of --minibatch-size), in asp's simulator and keeps the fastest; or name one."),
    prompts_per_server: Optional[int] = typer.Option(_DEFAULT.prompts_per_server, "--prompts-per-server", help="With --engine streaming, a lag bound other than 0 and --trainer arrival (asynchronous training on servers, as verl runs it): the prompts verl's fully asynchronous rollouter keeps in flight per server (async_training.concurrent_samples_per_replica, 16 there by default). --arrangement auto times its candidates as verl routes with that many; default: as many as the servers' slots hold (verl's v1 trainer, or a rollouter set that high)."),
    verl_trainer: Optional[str] = typer.Option(_DEFAULT.verl_trainer, "--verl-trainer", help="With --engine streaming and a lag bound other than 0 (the v1 modes need one: their warm-up): which of verl's asynchronous trainers --arrangement auto times its candidates as: 'fully-async' (its fully asynchronous trainer, the default: a prompt submitted whenever a rollouter slot frees), 'colocate-async' or 'separate-async' (main_ppo's trainer.v1.trainer_mode: --max-lag train batches of warm-up, then a train batch a step; colocate-async puts the servers to sleep while it trains and resumes their requests after). With --trainer schedule (asp's replay buffer) auto keeps asp's own replay, and the option names the mode for `asp export --format verl`, which prints that trainer's settings."),
    router: Optional[str] = typer.Option(_DEFAULT.router, "--router", help="With --engine streaming: the router in front of the servers, which --arrangement auto times its candidates with: 'least-pending' (verl's balancer, the default: each sample to the server with the fewest requests in flight, so a group's samples spread over the servers) or 'cache-aware' (sglang-router's default policy, which slime launches: a group's samples share their prompt and follow the first to its server), or 'round-robin' (AReaL's SPMD mode, AREAL_SPMD_MODE=1: each sample to the next server in turn, whatever its load), or 'group-round-robin' (a prompt's samples together, dealt to the servers in turn: OpenRLHF's, a rollout batch at a time, with --trainer schedule and --max-lag 0, or 1 for --train.async_enable; AReaL's default single controller with --trainer arrival and --max-lag rollout.max_head_offpolicyness, 1 or more, or none for a bound larger than the run). Not with --dispatch planned or --verl-trainer (verl's own)."),
    trainer: str = typer.Option(_DEFAULT.trainer, "--trainer", help="How the trainer takes groups: 'arrival' (the next train batch of finished groups) or 'schedule' (the groups train_step assigns: stratified by length; per-step keeps a shuffle's batches, a plain sort its arrival order)."),
    predictor: Optional[Path] = typer.Option(None, "--predictor", readable=False, help="A predictor file (.skops) from `asp predictor fit`; default: the bundled one."),
    predictions: list[Path] = typer.Option([], "--predictions", metavar="<path>", readable=False, help="Per-prompt predicted lengths made elsewhere (as `asp predictor predict` writes them; repeatable), instead of the predictor."),
    history: list[Path] = typer.Option([], "--history", metavar="<path>", readable=False, help="Observed lengths from earlier epochs (repeatable)."),
    history_epochs: Optional[int] = typer.Option(None, "--history-epochs", help="Use only the last N epochs of --history (by its epoch column): for a policy whose lengths grow as training goes on. Default: every epoch, weighed alike."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    source_key: Optional[str] = source_key_option(),
    difficulty_key: Optional[str] = difficulty_key_option(),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The response length column in history files."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' stops at the first bad row; 'skip' skips and counts them."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary on stderr (warnings still are)."),
    progress: bool = typer.Option(False, "--progress", help="Show each stage on stderr even when it is not a terminal (one line per stage)."),
) -> None:
    """Predict response lengths and write a rollout schedule (Parquet) for K instances."""
    with guarded():
        from asp_cli.arrange.pipeline import schedule
        from asp_cli.reading.options import ReadOptions

        read = ReadOptions(prompt_key=prompt_key, id_key=id_key, source_key=source_key, difficulty_key=difficulty_key,
                           length_id_key=history_id_key,
                           length_key=history_length_key, on_bad_row=on_bad_row, tokenizer=tokenizer)  # type: ignore[arg-type]
        settings = ScheduleSettings(
            instances=instances,
            samples_per_prompt=samples_per_prompt,
            epochs=epochs,
            train_batch_size=train_batch_size,
            minibatch_size=minibatch_size,
            max_tokens_per_minibatch=max_tokens_per_minibatch,
            max_response_tokens=max_response_tokens,
            max_lag=None if max_lag == NO_LAG_BOUND else max_lag,
            seed=seed,
            plan_with=plan_with,  # type: ignore[arg-type]
            preset=preset,
            length_classes=length_classes,
            canonical_order=canonical_order,
            engine=engine,
            arrangement=arrangement,
            dispatch=dispatch,
            steps=steps,
            trainer=trainer,
            kv_budget=kv_budget,
            prompts_per_server=prompts_per_server,
            verl_trainer=verl_trainer,
            router=router,
        )
        # Numbered over the stages this run has: history is read only when it is given.
        stages = _STAGES if history else _STAGES[1:]
        bar = stage_bar("asp schedule", stages, quiet=quiet, progress=progress)
        try:
            result = schedule(
                inputs,
                output,
                settings=settings,
                predictor=predictor,
                predictions=predictions,
                history=history,
                read=read,
                command_line=["asp", *sys.argv[1:]],
                force=force,
                progress=bar.step if bar else None,
                history_epochs=history_epochs,
            )
        finally:
            if bar:
                bar.close()
        summary = result.summary
        if not quiet:
            text = _summary_text(summary, output, bundled=predictor is None and not predictions and not history)
            deal = made_for_line(summary.get("made_for"))  # under the "Wrote" line: whose deal, and the others'
            say((text.replace("\n", f"\n{deal}\n", 1) if deal else text) + _columns_line(result.columns))
        for warning in summary.get("warnings", []):  # under --quiet too: a CI log kept none (a newcomer's)
            say(f"Warning: {warning}")
        if json_output:
            emit_json({"output": str(output), **summary, "columns_used": result.columns})


def _lag_line(summary: dict) -> str:
    lag = summary.get("max_lag")
    observed = f"mean {summary['expected_lag_mean']:.2f}, max {summary['expected_lag_max']} steps"
    if lag == 0:
        return (f"  expected policy lag under --max-lag 0 (synchronous training: a step's groups start once the step "
                f"before has trained): {observed}")
    if lag is not None:
        line = f"  expected policy lag under --max-lag {lag} (an asynchronous trainer): {observed}"
        if summary["expected_lag_max"] > lag:
            # The rule bounds what starts ahead of the trainer (AReaL's and verl's count rule), not when a group
            # ends: a newcomer's pipeline gated on `asp report --check --max-lag 1` stopped at epoch 2.
            gate = f"--max-lag {summary['expected_lag_max']}"
            line += ("; a group that finishes late is trained past the bound (the rule holds back the groups started "
                     "ahead, as AReaL's and verl's do), so " + (
                         f"`asp report --check --max-lag {lag}` fails on this schedule: gate on its expected max, "
                         f"{gate}" if float(lag).is_integer() else
                         # a fraction is verl's count rule, no step count a gate takes (it was named, and refused)
                         f"gate `asp report --check` on its expected max, {gate}"))
        return line
    # Without a bound the lag is how far rollout runs ahead of the trainer, and at the point predictions rollout
    # runs 2-3x faster than with the tails the replays draw (105 s against 278 s on the sample data): the figure
    # is an upper end, which `asp simulate` replays (4.0 against 9.5 there; a newcomer's run, 2026-12-05).
    # Their servers refill freed slots: a verl newcomer who followed this on the default blocking engine compared
    # against a verl rollout that 0.7 and later no longer run.
    blocking = (summary.get("arrangement") or {}).get("engine") not in (None, "streaming")
    return (f"  expected policy lag if an asynchronous trainer lets rollout run ahead (no --max-lag): {observed} at "
            "the point predictions, whose rollout leaves out the tails and so runs further ahead than a replay's "
            "(`asp simulate` replays it); a synchronous trainer has none, and is planned with --max-lag 0 --trainer "
            "schedule (verl's, OpenRLHF's and slime's default trainers"
            + (", whose servers refill freed slots: with --engine streaming too" if blocking else "")
            + "); bound an asynchronous one with --max-lag N")


def _replayed_s(summary: dict) -> float | None:
    """What auto's replays expected of the line's makespan: the rollout alone without a lag bound; synchronous
    (rollout and training alternating), the chosen candidate's end-to-end time (an OpenRLHF newcomer read 334 s at
    the point predictions beside 482 s expected, with nothing said of the gap: 2026-12-07)."""
    if summary.get("expected_rollout_s"):
        return summary["expected_rollout_s"]
    choice = summary.get("arrangement") or {}
    if summary.get("max_lag") != 0 or not choice or _scaled_from(summary):  # judged whole only: a sample's is its own
        return None
    mine = [c for c in choice.get("candidates", [])
            if c.get("name") == choice.get("chosen") and c.get("kv_budget") == choice.get("kv_budget")]
    return mine[0].get("expected_end_to_end_s") if mine else None


def _scaled_from(summary: dict) -> str:
    """Where auto's replays were of fewer prompt-epochs than the run: what their rollout was scaled up from."""
    choice = summary.get("arrangement") or {}
    prompts, epochs = choice.get("evaluated_prompts", 0), choice.get("evaluated_epochs") or 1
    if not prompts or prompts * epochs >= summary["prompts"] * summary["epochs"]:
        return ""
    return f", scaled up from their {counted(prompts, 'prompt')} x {counted(epochs, 'epoch')} to the run"


# Above this predicted padding the summary says which arrangement mixes lengths in its minibatches, and why.
MIXED_PADDING = 0.25
_MIXING = {"per-step": "packs each of a shuffle's train batches, whose lengths are mixed",
           "shuffle": "deals prompts at random"}


def _drawn_padding(summary: dict) -> str:
    """The same padding under auto's draws of lengths, where they were made (`choice_summary.drawn_padding`)."""
    from asp_cli.arrange.choice_summary import drawn_padding

    drawn, shuffle = drawn_padding(summary.get("arrangement"))
    if drawn is None:
        return ""
    return (f", a floor: {drawn:.1%} under auto's draws of lengths, which spread them as the predictions do"
            + (f", a shuffle's {shuffle:.1%}" if shuffle is not None else ""))


def _padding_note(summary: dict) -> str:
    """Why a packer's own schedule pads so much: auto took an arrangement that mixes lengths in a minibatch."""
    choice = summary.get("arrangement") or {}
    why = _MIXING.get(choice.get("chosen", ""))
    if summary["predicted_padding_fraction"] <= MIXED_PADDING or why is None:
        return ""
    return (f"; high because {choice['chosen']} {why}" + (", and auto expected it to be the fastest all the same"
                                                          if choice.get("setting") == "auto" else ""))


def _units(summary: dict) -> str:
    """What the schedule sends (`asp_cli.report.formats.sent_units`, which `asp report` says too)."""
    from asp_cli.report.formats import sent_units

    return sent_units(summary["minibatches"], summary["rows"], (summary.get("arrangement") or {}).get("engine"))


def _seconds(value: float) -> str:
    """Seconds as the summary's other lines give them, to one decimal (the same rollout reads the same on the
    makespan line), with two significant digits below 0.1 s: whole seconds read "about 3 s against 0 s of rollout"
    on a short run, and one decimal reads 0.0."""
    return f"{value:,.1f}" if value == 0 or abs(value) >= 0.095 else f"{value:.2g}"


def _summary_text(summary: dict, output: Path, *, bundled: bool = False) -> str:
    busy = summary["predicted_instance_busy_s"]
    lines = [
        f"Wrote {output}: {counted(summary['prompts'], 'prompt')} x {counted(summary['epochs'], 'epoch')} = "
        f"{counted(summary['rows'], 'row')}, " + _units(summary)
        + f" on {counted(summary['instances'], 'instance')}, {counted(summary['train_steps'], 'train step')}.",
        f"  predicted padding: {summary['predicted_padding_fraction']:.1%} (slots a static batch of each minibatch would "
        "leave idle at the predicted group lengths" + _drawn_padding(summary) + "; `asp simulate` reports the empty "
        "slots of a replay, tail included)" + _padding_note(summary),
        # Synchronous, the figure is named and rounded alike here and in the "synchronous steps" line below, and
        # auto's figure beside it named for what it is: its end-to-end time holds the last step's training, which
        # the makespan does not (a newcomer read "makespan of rollout and training alternating ... 442.5 s" here
        # and "the 443 s makespan (training included)" there).
        ("  predicted makespan (synchronous steps: rollout and training alternate; it ends with the last step's "
         "rollout, the training of every step before it included): "
         if summary.get("max_lag") == 0 else "  predicted rollout makespan"
         + (" (waits for the trainer included)" if summary.get("max_lag") is not None else "") + ": ")
        + f"{summary['predicted_rollout_makespan_s']:,.1f} s at the point predictions"
        + ((f" ({_replayed_s(summary):,.1f} s end-to-end, the last step's training included, in auto's replays, "
            if summary.get("max_lag") == 0 and not summary.get("expected_rollout_s")
            else f" ({_replayed_s(summary):,.1f} s in auto's replays, ")
           + f"which draw lengths with the predictions' spread{_scaled_from(summary)})" if _replayed_s(summary) else "")
        + f"; per-instance busy {min(busy):,.1f}-{max(busy):,.1f} s (imbalance "
        f"{summary['predicted_instance_imbalance']:.3f}, finish spread "
        f"{summary['predicted_instance_finish_spread_s']:,.1f} s)",
        _lag_line(summary),
    ]
    choice = summary.get("arrangement")
    if choice:
        from asp_cli.arrange.choice_summary import arrangement_block

        # The headline first: what was chosen and what it is expected to gain, under the "Wrote" line (and the
        # "made for" line `schedule` puts there), then the figures at the point predictions, then the notes; it stood
        # fifth, under the padding, makespan and lag lines (a newcomer's "wall of lines", 2026-12-07). A line per
        # candidate under it: the one line of every candidate's time ran to about 900 characters (two newcomers).
        lines.insert(1, "  " + arrangement_block(choice, summary.get("epochs")))
    if summary.get("verl_trainer") == "colocate-async":
        # verl's colocated mode stops the servers while the trainer trains: nothing binds, the two add (a newcomer
        # read "the trainer binds" beside a replay that paused rollout for every step). Auto's expected times count
        # it only where it timed its candidates so (`--trainer arrival`, not a named arrangement).
        timed_so = (choice or {}).get("verl_trainer") == "colocate-async"
        lines.append(
            f"  in colocate_async the servers sleep while the trainer trains (its steps about "
            f"{_seconds(summary['predicted_trainer_busy_s'])} s in all): rollout and training take turns rather than "
            "overlap; " + ("the expected end-to-end above counts that, the makespan and lag figures let rollout run "
                           "on" if timed_so else "the figures above let rollout run on (`asp simulate`'s 'verl v1 "
                           "async' line replays the plan that way)") + " (calibrate the trainer: asp calibrate --train-steps STEPS.csv -o P.json, then --preset P.json)")
    elif summary.get("trainer_bound") and summary.get("max_lag") != 0:
        lag = summary.get("max_lag")
        hold = (f"--max-lag {lag} holds rollout back so that no group is expected more than {lag} steps stale"
                if lag is not None else "with --max-lag none, groups queue and the lag grows")
        lines.append(
            f"  the trainer binds: its steps need about {_seconds(summary['predicted_trainer_busy_s'])} s against "
            f"{_seconds(summary.get('expected_rollout_s') or summary['predicted_rollout_makespan_s'])} s of rollout; "
            f"{hold} (calibrate the trainer: asp calibrate --train-steps STEPS.csv -o P.json, then --preset P.json)"
        )
    elif summary.get("max_lag") is not None and max(busy) < 0.8 * summary["predicted_rollout_makespan_s"]:
        # Under a lag bound the makespan includes the waits for the trainer's steps.
        lines.append(
            (f"  synchronous steps: rollout and training alternate, and each step's rollout lasts as long as its "
             f"slowest instance; the instances are busy at most {max(busy):,.1f} s of the "
             f"{summary['predicted_rollout_makespan_s']:,.1f} s predicted makespan (the training between steps "
             f"included), the trainer's steps about {summary['predicted_trainer_busy_s']:,.1f} s (the last one after "
             "the makespan" + ("; the trainer takes the larger share)" if summary.get("trainer_bound") else ")")
             if summary["max_lag"] == 0 else
             f"  rollout waits for the trainer under --max-lag {summary['max_lag']}: the instances are busy at most "
             f"{max(busy):,.1f} s of its {summary['predicted_rollout_makespan_s']:,.1f} s predicted makespan; the "
             f"trainer's steps need about {summary['predicted_trainer_busy_s']:,.1f} s") + " (calibrate the trainer: asp calibrate --train-steps STEPS.csv -o P.json, then --preset P.json)")
    if summary.get("prompts_from_history"):
        rest = summary["prompts"] - summary["prompts_from_history"]
        lines.append(f"  lengths from history for {summary['prompts_from_history']:,} prompts" + (
            f"; the other {rest:,} from the model, corrected by the history" if rest else " (all of them)"))
    if summary.get("calibration"):
        from asp_cli.predict.calibration_text import calibration_lines

        lines.extend(f"  {line}" for line in calibration_lines(summary["calibration"]))
    if bundled:
        # A newcomer's reasoning policy wrote about 6 times what the bundled model predicted, and nothing said so.
        lines.append("  lengths from the bundled model, which learned how other models answer, not yours (a "
                     "reasoning model writes 10-50 times more than a chat model on the same problem): the times "
                     "above are in its units; a probe of 2% of the prompts, generated once by your policy, calibrates "
                     "it (`asp probe`, docs/probe.md)")
    return "\n".join(lines)


def _columns_line(columns: dict[str, dict[str, str | None]]) -> str:
    """``  columns: p.parquet: prompt 'problem', id 'uid', no data source (--source-key names one), ...``: what each
    input was read by (a MindSpeed newcomer's `task` column went unused without a word until the second epoch)."""
    def said(used: dict[str, str | None]) -> str:
        source, difficulty = used.get("source"), used.get("difficulty")
        return (f"prompt {used.get('prompt')!r}, id " + (repr(used["id"]) if used.get("id") != "(row number)" else
                                                          "the row number" + (f" (--id-key {used['id_hint']} names "
                                                                              "the rows' own)" if used.get("id_hint")
                                                                              else ""))
                + (f", data source {source!r}" if source else ", no data source (--source-key names one)")
                + (f", difficulty {difficulty!r}" if difficulty else ""))

    by_reading: dict[str, list[str]] = {}
    for name, used in columns.items():
        by_reading.setdefault(said(used), []).append(Path(name).name)
    parts = [", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") + f": {text}"
             for text, names in by_reading.items()]
    return "\n  columns: " + "; ".join(parts) if parts else ""


