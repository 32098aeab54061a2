"""`asp export` and `asp observe`: the commands that connect a schedule to a training pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from asp_cli.cli.common import emit_json, guarded, output_option, say
from asp_cli.errors import counted
from asp_cli.output import as_given


def register(app: typer.Typer) -> None:
    app.command("export", no_args_is_help=True)(export_command)
    app.command("observe", no_args_is_help=True)(observe_command)


def _refuse_swapped_files(schedule: Path, dataset: list[Path], output: Path) -> None:
    """`asp export train.parquet schedule.parquet -o ...` (the files in the wrong order) was told only that the
    prompt file is no asp schedule (E22): say which file is the schedule and the order the command takes."""
    import pyarrow.parquet as pq

    from asp_cli.errors import ScheduleFormatError
    from asp_cli.schedule_format import METADATA_KEY

    def is_schedule(path: Path) -> bool:
        try:
            return path.is_file() and METADATA_KEY in (pq.read_schema(as_given(path)).metadata or {})
        except Exception:  # noqa: BLE001 - not Parquet, or not readable: export's own checks say what it is
            return False

    swapped = next((p for p in dataset if is_schedule(p)), None)
    if swapped is not None and not is_schedule(schedule):
        import shlex

        files = " ".join(shlex.quote(str(p)) for p in [swapped, schedule, *(p for p in dataset if p != swapped)])
        raise ScheduleFormatError(f"{schedule}: not an asp schedule, and {swapped} is one: the files are in the wrong "
                                  f"order; give the schedule first: asp export {files} -o {shlex.quote(str(output))}, "
                                  "with the same options")


def export_command(
    schedule: Path = typer.Argument(..., metavar="SCHEDULE", readable=False, help="The schedule (.parquet) `asp schedule` wrote."),
    dataset: list[Path] = typer.Argument(..., metavar="DATASET", readable=False, help="The prompt file(s) the schedule was made from, in the same order."),
    output: Path = output_option("--output", "-o", help="The ordered dataset to write (.parquet or .jsonl)."),
    format: Optional[str] = typer.Option(None, "--format", "-f", help="parquet or jsonl (default: by the output's name, .jsonl or .ndjson for jsonl), or verl (Parquet in verl's RLHFDataset layout)."),  # noqa: A002
    epoch: Optional[int] = typer.Option(None, "--epoch", help="Export one epoch (0-based); default all, one after the other."),
    order: Optional[str] = typer.Option(None, "--order", help="'dispatch' (the schedule's seq) or 'train' (by training step, batches balanced across workers). Default: train for verl, dispatch otherwise."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Contiguous chunks per training batch for --order train (verl: actor_rollout_ref.rollout.agent.num_workers); default verl's 8 for --format verl, 1 for a schedule made with --router cache-aware or group-round-robin (slime and OpenRLHF take a batch whole), the schedule's instances otherwise."),
    verl_version: Optional[str] = typer.Option(None, "--verl-version", help="How verl cuts a batch across workers, for --format verl or --order train: 0.9 (the default; its default trainer: the prompts, TensorDict.chunk) or 0.7 (its trainer, and 0.9's trainer.use_v1=False: the n-times repeated batch)."),
    verl_trainer: str = typer.Option("auto", "--verl-trainer", help="With --format verl: ppo (verl's default trainer, verl.trainer.main_ppo, synchronous), colocate-async or separate-async (the same trainer's asynchronous modes, trainer.v1.trainer_mode, running --max-lag batches ahead), fully-async (verl.experimental.fully_async_policy: the file in dispatch order, its own settings), or auto: the one the schedule was made for (asp schedule --verl-trainer); else fully-async for a schedule made with --engine streaming, a lag bound other than 0 and --trainer arrival; colocate-async for one made with --engine streaming, a lag bound above 0 and --trainer schedule; else ppo."),
    prefix: str = typer.Option("", "--prefix", help="Prefix for asp's added columns, e.g. asp_ when the dataset has its own 'epoch'."),
    route: str = typer.Option("none", "--route", help="none; planned: add a 'priority' column carrying each row's planned instance; length: its predicted response tokens per sample instead (each request to the server with the fewest predicted tokens in flight); both for verl 0.9's rollout router asp_cli.integrate.verl_router.ScheduleRouter (docs/integrations.md, Option D)."),
    metadata_key: Optional[str] = typer.Option(None, "--metadata-key", help="Put asp's columns and the schedule's prompt_id into this object field of each row (merged with the row's own), not beside the dataset's columns: slime keeps only the prompt, the label and its --metadata-key (default 'metadata') of a row. With --format jsonl or parquet."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not the one the schedule recorded."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not the one the schedule recorded."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Write the dataset's own rows in the schedule's order, with asp's columns, for a trainer to replay."""
    with guarded():
        from asp_cli.integrate.export import export

        # By the output's name, as `asp probe` does (a newcomer's `-o x.jsonl` was refused for parquet); a name of
        # neither kind was told "--format parquet writes Parquet" where no --format was given (a hostile round).
        if format is None and output.suffix.lower() not in ("", ".jsonl", ".ndjson", ".parquet", ".pq"):
            from asp_cli.errors import SettingsError

            raise SettingsError(f"{output}: an export is written as JSON lines (.jsonl) or Parquet (.parquet), chosen "
                                f"by the name; name it {output.stem}.jsonl or {output.stem}.parquet")
        format = format or ("jsonl" if output.suffix.lower() in (".jsonl", ".ndjson") else "parquet")  # noqa: A001
        _refuse_swapped_files(schedule, dataset, output)
        result = export(schedule, dataset, output, format=format, epoch=epoch, order=order, workers=workers,
                        verl_version=verl_version, prefix=prefix, prompt_key=prompt_key, id_key=id_key, force=force,
                        route=route, verl_trainer=verl_trainer, metadata_key=metadata_key)
        if not quiet:
            summary = result.summary
            say(
                f"Wrote {output}: {counted(summary['rows'], 'row')} ({format}, {result.order} order), "
                + (f"the schedule's epoch {summary['epochs'][0]} (numbered from 0)" if len(summary["epochs"]) == 1 else
                   f"epochs {', '.join(map(str, summary['epochs']))}")
                + f"; {counted(summary['full_batches'], 'batch', 'batches')} of "
                f"{summary['train_batch_size']}" + (f" + {counted(summary['trailing_rows'], 'row')}" if summary["trailing_rows"] else "")
            )
            # slime and OpenRLHF submit a batch from one loop (a schedule for their routers is exported so)
            if summary.get("workers") == 1 and format != "verl" and summary.get("router") in ("cache-aware",
                                                                                           "group-round-robin"):
                # group-round-robin with --trainer arrival is AReaL's controller, which deals the file's rows over
                # the run: the instance is each row's server in the dispatch order only (router_owner).
                areal = summary["router"] == "group-round-robin" and summary.get("schedule_trainer") == "arrival"
                say("  each batch in the schedule's own order, as one loop submits it ("
                    + ("AReaL's controller deals the file's rows to its servers in turn: the schedule's instance is "
                       "each row's server in the dispatch order, not in this one)" if areal else
                       "OpenRLHF deals it to its engines in turn: the schedule's instance is each row's engine)"
                       if summary["router"] == "group-round-robin" else "slime's rollout, through its router)"))
            elif "workers" in summary:
                how = (f"{summary['workers']} workers ({summary['chunking']} chunking)" if format == "verl" else
                       f"{summary['workers']} contiguous chunk{'s' if summary['workers'] != 1 else ''}, one per "
                       "rollout worker")
                say(f"  each batch laid out for {how}: {_per_worker(summary['worker_prompts'])}")
            if result.trainer_settings:
                trainer_name = {"fully-async": " (fully asynchronous trainer)",
                                "colocate-async": " (main_ppo, asynchronous: colocate_async)",
                                "separate-async": " (main_ppo, asynchronous: separate_async)"}.get(
                                    summary.get("verl_trainer"), "")
                say(f"  set in verl {summary['verl_version']}{trainer_name}: "
                    + " ".join(f"{k}={_hydra(v)}" for k, v in result.trainer_settings.items()))
            elif format == "jsonl":
                say(_file_order_settings({**summary, "output": str(output)}, result.order))
            elif format == "parquet":
                # slime, OpenRLHF and AReaL read Parquet too: a slime newcomer's Parquet export, of a schedule made
                # for slime's router, was given MindSpeed-RL's settings alone.
                say(_file_order_settings({**summary, "output": str(output)}, result.order))
                say(_mindspeed_settings({**summary, "output": str(output)}, result.order))
        for warning in result.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if json_output:  # the settings also as the command line's words, ready for a launcher (a pipeline's ask)
            emit_json({"output": str(output), **result.summary, "trainer_settings": result.trainer_settings,
                       **({"trainer_overrides": " ".join(f"{k}={_hydra(v)}" for k, v in
                                                         result.trainer_settings.items())}
                          if result.trainer_settings else {}),
                       "warnings": result.warnings})


def _file_order_settings(summary: dict, order: str) -> str:
    """What slime, OpenRLHF and AReaL set to read a JSON-lines export in file order, and which order each wants: an
    OpenRLHF newcomer was sent to the docs for what verl users are given here, and an AReaL newcomer exported the
    training order that AReaL, which submits rows in file order and trains them as they finish, does not run."""
    g, n = summary["train_batch_size"], summary["samples_per_prompt"]
    full, trailing = summary["full_batches"], summary["trailing_rows"]
    # slime wraps a short last batch into the file's start (slime/rollout/data_source.py, get_samples) and
    # --num-epoch runs rows // batch rollouts (slime/ray/rollout.py, get_num_rollout_per_epoch).
    last = f"the last {trailing:,} rows are" if trailing != 1 else "the last row is"
    rollouts = (f"--num-rollout {full}" + (f" (as --num-epoch 1: {last} left out; one rollout "
                                           f"more would take {counted(g - trailing, 'row')} from the file's start)"
                                           if trailing else "")) if full else (
        f"--num-rollout 1 (the file holds {counted(trailing, 'row')}, less than one batch: slime takes the other "
        f"{g - trailing:,} from the file's start again; --num-epoch 1 runs none)")
    epochs = summary.get("epochs") or []
    if len(epochs) == 1 and epochs[0] > 0 and full:  # one run per epoch, resumed: slime counts from its first rollout
        rollouts += (f" for this file alone; a run resumed from epoch {epochs[0] - 1}'s checkpoint counts from its first "
                     f"rollout: --num-rollout {(epochs[0] + 1) * full}, with the checkpoint's dataset state moved aside "
                     "(docs/integrations.md, slime, one run per epoch)")
    elif epochs == [0] and full and summary.get("planned_from_history"):  # one schedule per epoch: each file's is 0
        # A slime newcomer's epoch-1 file, planned on epoch 0's history, was told --num-rollout of that file alone.
        rollouts += (" for this file alone; a run resumed from an earlier epoch's checkpoint counts from its first "
                     f"rollout: epoch E's run sets --num-rollout (E+1) x {full}, with the checkpoint's dataset state "
                     "moved aside (docs/integrations.md, slime, one run per epoch)")
    lag = summary.get("schedule_max_lag")
    steps = summary.get("schedule_trainer") == "schedule"  # a trainer that takes the schedule's own steps
    # slime's --input-key defaults to `input`, and --global-batch-size must equal rollout batch x n over
    # --num-steps-per-rollout where both are set (slime v0.3.1 arguments.py:648, 1907-1915): a slime newcomer's run
    # scripts set the latter.
    # A chat list reaches slime's prompt as the list itself unless --apply-chat-template (slime v0.3.1
    # utils/data.py, Dataset): the OpenRLHF line said its flag and slime's did not (a slime newcomer's round).
    label = summary.get("label_column")  # a top-level label column of a common name (`LABEL_KEYS`), else None
    keys = (f" --input-key {summary['prompt_column']}" if summary.get("prompt_column") else "") + (
        f" --label-key {label or 'LABEL'}") + (
        " --apply-chat-template" if summary.get("prompt_is_chat") else "") + (
        f" --metadata-key {summary['metadata_key']}" if summary.get("metadata_key") else "")
    lines = [
        # the file itself, as OpenRLHF's line names it: a slime newcomer kept the original file's --prompt-data
        f"    slime: --prompt-data {summary.get('output', 'FILE')} --rollout-batch-size {g} --n-samples-per-prompt {n} --global-batch-size {g * n} (or "
        f"--num-steps-per-rollout 1 in its place){keys} {rollouts}, no --rollout-shuffle" + ("; the schedule was timed as verl's balancer routes, each group spread over the "
                               "servers, where slime's router keeps it on one: make it with --router cache-aware"
                               if summary.get("schedule_router") == "least-pending" else
                               "; the schedule was timed for another router: make it with --router cache-aware "
                               "(slime's)" if summary.get("schedule_router") not in (None, "cache-aware") else
                               "; train.py, synchronous steps, as the schedule was timed"
                               if summary.get("schedule_router") == "cache-aware" and lag == 0 else
                               "; train_async.py, each rollout generated while the step before trains, as the schedule "
                               "was timed" if summary.get("schedule_router") == "cache-aware" and lag == 1 and steps
                               else "")
        # slime's --label-key defaults to none, and every sample's label is then None (slime v0.3.1 utils/data.py,
        # Dataset): the line left it out in silence where the label was nested (a slime newcomer's round).
        + ("" if label else "; LABEL your label column, a top-level one: slime reads data[LABEL] (without "
           "--label-key every sample's label is None), so a nested label such as verl's reward_model.ground_truth "
           "must be lifted out first")
        # slime keeps only a row's prompt, label and --metadata-key object (slime v0.3.1 utils/data.py): exported
        # without one, no sample carries its prompt_id, and examples/slime_length_log.py logs nothing, in silence.
        + ("" if summary.get("metadata_key") else "; for its length log export with --metadata-key metadata (slime "
           "keeps a row's prompt, label and that object only: each sample then carries its prompt_id)"),
        f"    OpenRLHF: --data.prompt_dataset {summary.get('output', 'FILE')}"
        + (f" --data.input_key {summary['prompt_column']}" if summary.get("prompt_column") else "")
        # chat messages go through the tokenizer's chat template only with it (prompts_dataset.py:26-39, 0.11.2)
        + (" --data.apply_chat_template" if summary.get("prompt_is_chat") else "")
        + f" --data.label_key {label or 'LABEL'} --rollout.batch_size {g} --rollout.n_samples_per_prompt {n}"
        + (f" --vllm.num_engines {summary['instances']}" if summary.get("instances") else "")
        + (" --train.async_enable --train.async_queue_size 1" if lag == 1 and steps else
           " (synchronous, its default)" if lag == 0 else
           " (the schedule's --max-lag is no lag OpenRLHF runs: it is synchronous, --max-lag 0, or with "
           "--train.async_enable one batch ahead, --max-lag 1 --trainer schedule)")
        + (f" ({label}: the dataset's label column, which OpenRLHF hands the reward function; name another if yours "
           "reads another" if label else
           " (LABEL your label column, a top-level one: OpenRLHF reads data[LABEL], so a nested label such as "
           "verl's reward_model.ground_truth must be lifted out first")
        + "; no --rollout.vllm_generate_batch_size, which deals several batches at once), "
        "its dataloader's hard-coded shuffle patched off (or asp's ScheduleSampler on the original file, not this one: "
        "docs/integrations.md)"
        + ("; the schedule was not made for OpenRLHF's deal: make it with --engine streaming --router "
           "group-round-robin --trainer schedule" if summary.get("router") != "group-round-robin" else "")
        # one episode over a file of several epochs: its batches straddle them where they do not divide an epoch
        + (f"; the file's {len(epochs)} epochs of {summary['rows'] // len(epochs):,} rows do not divide into batches of "
           f"{g}, so OpenRLHF's batches would straddle them: export one epoch at a time (--epoch E), one run each"
           if len(epochs) > 1 and (summary["rows"] // len(epochs)) % g else ""),
        # consumer_batch_size is the batch of AReaL's staleness rule (default 1: cli_args.py:2030-2032 of v1.0.4), and
        # max_concurrent_rollouts its groups in flight (default consumer_batch_size): an AReaL newcomer's round.
        f"    AReaL: train_dataset.shuffle=false train_dataset.batch_size={g} rollout.consumer_batch_size={g} "
        f"gconfig.n_samples={n}"
        + (f" rollout.max_head_offpolicyness={lag}" if isinstance(lag, int) else
           " (the schedule has no lag bound; AReaL always has one, 0 by default: make the schedule with --max-lag "
           "equal to rollout.max_head_offpolicyness)" if lag is None else
           f" (the schedule's --max-lag {lag} is a fraction; AReaL's bound is a whole number of steps: make the "
           "schedule with --max-lag equal to rollout.max_head_offpolicyness)")
        + ("" if lag == 0 else  # at 0 the staleness rule admits one batch at a time, which the default allows
           f" rollout.max_concurrent_rollouts={summary['prompts_per_server'] * summary['instances']}"
           if summary.get("prompts_per_server") and summary.get("instances") else
           f" rollout.max_concurrent_rollouts={summary['slot_groups']} (the servers' slots, as the schedule was "
           f"timed; for another cap make the schedule with --prompts-per-server that cap over the "
           f"{summary.get('instances') or 1} servers)" if summary.get("slot_groups") else "")
        # RLVRWorkflow reads the chat list under `messages` and passes each row to the reward function by name, after
        # the prompt text (rlvr.py:45-46, 101-107), where AReaL's example reward functions name it `prompt` (an AReaL
        # newcomer's round: KeyError, then "multiple values for argument 'prompt'").
        + (f" (AReaL's RLVRWorkflow reads the chat list under 'messages' and passes each row's columns to the "
           f"reward function by name, whose first parameter AReaL's examples name 'prompt': rename {summary['prompt_column']!r} to "
           "'messages', or read it in your own workflow)"
           if summary.get("prompt_column") and summary["prompt_column"] != "messages" else "")
        + (f" total_train_epochs=1 (the file holds {len(epochs)} epochs)" if len(epochs) > 1 else "")
        + " (load the file in your script: docs/integrations.md)"
        + _areal_deal_note(summary, lag, steps),
    ]
    lines = _framework_first(lines, summary, lag, steps)
    if order == "dispatch" and steps and not summary.get("steps_in_dispatch_order"):
        lines.append("  slime and OpenRLHF train each batch of consecutive rows, which this schedule's steps are in "
                     "--order train (dispatch order's batches mix training steps)")
    elif order == "train" and not steps:
        lines.append("  this schedule's trainer takes groups as they finish (--trainer arrival): AReaL, which "
                     "submits rows in file order and trains them so, runs the dispatch order (leave out --order "
                     "train)")
    return "\n".join(lines)


def _mindspeed_settings(summary: dict, order: str) -> str:
    """What MindSpeed-RL (v2.3.0), which preprocesses a Parquet file into its own indexed dataset, sets to train it in
    file order: a MindSpeed-RL newcomer's Parquet export printed nothing, where verl's and the JSON-lines frameworks'
    print theirs, and its example configs shuffle (no_shuffle: false) and deal each batch to the rollout replicas at
    random (guarantee_order: false). Keys as its config classes name them (docs/integrations.md, MindSpeed-RL)."""
    g, n, k = summary["train_batch_size"], summary["samples_per_prompt"], summary.get("instances") or 1
    full, trailing = summary["full_batches"], summary["trailing_rows"]
    epochs = summary.get("epochs") or []
    iters = (f"train_iters: {full}" + (f" (the last {counted(trailing, 'row') if trailing != 1 else 'row'} left out; "
                                       f"one step more would fill {'their' if trailing != 1 else 'its'} batch "
                                       "from the file's start)" if trailing else "")) if full else (
        f"train_iters: 1 (the file holds {counted(trailing, 'row')}, less than one batch: MindSpeed-RL takes the other "
        f"{g - trailing:,} from its start again)")
    if len(epochs) == 1 and epochs[0] > 0 and full:  # resumed from the last epoch's checkpoint: it counts on
        # and skips the batches it trained from the new file's start, going through it again (cli/train_grpo.py:165)
        iters += (f" for this file alone (a run that loads epoch {epochs[0] - 1}'s checkpoint with finetune: true "
                  f"counts from 0); resumed from it (finetune: false) it counts on, "
                  f"train_iters: {(epochs[0] + 1) * full}, and skips the {epochs[0] * full} batches it trained from "
                  "this file's start, " + (f"which with {trailing:,} rows over a batch lands mid-file, off the "
                                           "schedule's steps: make it with a --train-batch-size that divides the "
                                           "prompts" if trailing else "whole passes of it"))
    share, minibatch = g // k, summary.get("schedule_minibatch_size") or g
    dispatch = (f", actor_rollout_dispatch_size: {minibatch * n} (--minibatch-size {minibatch} groups a vLLM call, "
                f"where its default is a replica's whole share, {share})"
                if g % k == 0 and minibatch < share and share % minibatch == 0 else "")
    made = ("" if summary.get("schedule_max_lag") == 0 and summary.get("schedule_trainer") == "schedule"
            and summary.get("schedule_engine") in (None, "continuous") else
            "; the schedule was not made for its synchronous trainer and blocking vLLM calls: make it with --engine "
            "continuous --max-lag 0 --trainer schedule")
    # Said as a condition: every Parquet export prints it, and a verl or AReaL user read "MindSpeed-RL: preprocess"
    # as a step of their own.
    return ("  if you train with MindSpeed-RL: preprocess " + summary.get("output", "FILE") + " (its data config's input, your handler "
            f"and map_keys), then megatron_training: no_shuffle: true, global_batch_size: {g}, {iters}; rl_config: "
            f"n_samples_per_prompt: {n}, guarantee_order: true (each of its {k} rollout replicas then takes its own "
            + ("chunk of a batch, as laid out here" if order == "train" else
               "contiguous chunk of a batch, which --order train lays out for them")
            + f"; actor_resource.num_npus / generate_config.infer_tensor_parallel_size = {k}){dispatch}, "
            "max_prompt_length above your longest prompt in tokens (longer ones are dropped as training loads them, "
            "which shifts every later row); generate_config.sampling_config.max_tokens: "
            f"{summary.get('schedule_max_response_tokens')} (the schedule's --max-response-tokens)"
            + (f"; global_batch_size {g} is not a multiple of the {k} replicas, which MindSpeed-RL refuses: make the "
               "schedule with a --train-batch-size that is" if g % k else "")
            + ("; it trains batches of consecutive rows, which are this schedule's steps in --order train (dispatch "
               "order's batches mix training steps)" if order == "dispatch" and not summary.get("steps_in_dispatch_order")
               else "")
            + made)


def _framework_first(lines: list[str], summary: dict, lag: Any, steps: bool) -> list[str]:
    """slime's, OpenRLHF's and AReaL's lines (in that order), those of the framework(s) whose deal the schedule was
    made for first, under a heading that says so, the others after it under one that says they were not timed: an
    OpenRLHF newcomer's schedule (--router group-round-robin --trainer schedule) was printed slime's line first,
    "the schedule was timed for another router", as if it applied. A schedule made for none of them (verl's
    balancer, a named arrangement) keeps the three under one heading."""
    router = summary.get("router")
    made = (["slime"] if router == "cache-aware" else
            (["OpenRLHF", "AReaL"] if lag == 0 else ["OpenRLHF"]) if router == "group-round-robin" and steps else
            ["AReaL"] if router == "group-round-robin" else [])
    if not made:
        return ["  read it in file order, unshuffled:", *lines]
    named = dict(zip(("slime", "OpenRLHF", "AReaL"), lines))
    how = f"--router {router} --trainer {summary.get('schedule_trainer') or 'arrival'}" + (
        f" --max-lag {lag}" if lag is not None else "")
    return [f"  read it in file order, unshuffled, in {' or '.join(made)}, whose deal the schedule was made for "
            f"({how}):", *(named[m] for m in made),
            "  in another framework, whose deal the schedule was not timed for (its line says how to make one for it):",
            *(line for name, line in named.items() if name not in made)]


def _areal_deal_note(summary: dict, lag: Any, steps: bool) -> str:
    """Whether the schedule was made for AReaL's controller, which deals each group whole to the next server in
    turn over the run: `--router group-round-robin` with `--trainer arrival`, or at lag 0 (each batch trained
    whole) with `--trainer schedule`, whose per-batch deal is the controller's where the batch is a multiple of the
    servers (a review: the lag-0 schedule the docs name was told to use a setting asp refuses there)."""
    router, k, g = summary.get("router"), summary.get("instances") or 0, summary["train_batch_size"]
    if router == "round-robin" or (router == "group-round-robin" and not steps):
        return ""
    if router == "group-round-robin" and lag == 0:
        return ("" if not k or g % k == 0 else
                f"; AReaL's controller deals over the run, not batch by batch: its servers match the schedule's only "
                f"where the train batch ({g}) is a multiple of the servers ({k})")
    return ("; the schedule was not made for AReaL's controller, which deals each group whole to the next server in "
            "turn: make it with --engine streaming --router group-round-robin --trainer arrival (at "
            "rollout.max_head_offpolicyness 0: --max-lag 0 --trainer schedule)")


def observe_command(
    logs: list[Path] = typer.Argument(..., metavar="LOGS", readable=False, help="Rollout logs: prompt id + response token count per sample (.jsonl, .json, .parquet, .csv), or verl generation dumps."),
    output: Path = output_option("--output", "-o", help="The history file (.parquet) to write or append to."),
    schedule: Optional[Path] = typer.Option(None, "--schedule", readable=False, help="The schedule the rollouts replayed: ids outside it are unknown."),
    dataset: list[Path] = typer.Option([], "--dataset", metavar="<path>", readable=False, help="The prompt file(s): ids outside them are unknown (see --unknown-ids); needed for verl's rollout dumps (input/output text), not for its generation output (repeatable)."),
    append: bool = typer.Option(False, "--append", help="Add to an existing history (a log already in it is not added twice)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing history (without --append)."),
    epoch: Optional[int] = typer.Option(None, "--epoch", help="The epoch to record for every row (0-based; a log's own 'epoch' column that says another is overridden, with a warning); default: the log's 'epoch' column, else none."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The log's prompt id column, if not detected."),
    dataset_id_key: Optional[str] = typer.Option(None, "--dataset-id-key", help="The --dataset files' id column, as asp schedule --id-key named it (verl's extra_info.index), if not detected."),
    length_key: Optional[str] = typer.Option(None, "--length-key", help="The log's response token count column, if not detected."),
    dataset_prompt_key: Optional[str] = typer.Option(None, "--dataset-prompt-key", help="The --dataset files' prompt column, as asp schedule --prompt-key named it, if not detected (default: the schedule's)."),
    on_bad_row: str = typer.Option("error", "--on-bad-row", help="'error' stops at the first bad row; 'skip' skips and counts them."),
    unknown_ids: Optional[str] = typer.Option(None, "--unknown-ids", help="Rows whose id the schedule/dataset lacks: 'skip' (counted, left out), 'keep' (counted, kept) or 'error'. Default: skip, but a log more than half of whose rows match no prompt is refused (exit 3: a wrong --dataset or --schedule); name skip to keep only the matched rows."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json to count verl dump outputs exactly."),
    max_response_tokens: Optional[int] = typer.Option(None, "--max-response-tokens", help="The rollout's generation cap (verl's data.max_response_length): samples at it are recorded as truncated (with --schedule, its cap does that by default), and --tokenizer counts of a verl dump's text below it get back the end-of-sequence token verl's decode dropped (given here only)."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Ingest rollout logs (observed response lengths) into a history file for `asp schedule --history`."""
    with guarded():
        import dataclasses

        from asp_cli.integrate.observe import OBSERVE_READ, observe

        read = dataclasses.replace(OBSERVE_READ, length_id_key=id_key, length_key=length_key, on_bad_row=on_bad_row,
                                   tokenizer=tokenizer, id_key=dataset_id_key, prompt_key=dataset_prompt_key)
        result = observe(logs, output, schedule=schedule, dataset=dataset, append=append, force=force, epoch=epoch,
                         read=read, unknown_ids=unknown_ids, max_response_tokens=max_response_tokens)
        summary = result.summary
        if not quiet:
            # A new file is written, not added to; a log that grew replaces its own samples (fewer rows than added).
            appended = summary.get("appended", False)
            say(
                f"{'Appended to' if appended else 'Wrote'} {output}: {counted(summary['rows_added'], 'sample')} of "
                f"{counted(summary['prompts_observed'], 'prompt')} from "
                f"{counted(summary['logs'] - summary['logs_already_observed'], 'log')}; history now "
                f"{counted(summary['history_rows'], 'sample')} of {counted(summary['history_prompts'], 'prompt')}"
                + (f"; {summary['truncated_samples']:,} of the samples added "
                   f"{'was' if summary['truncated_samples'] == 1 else 'were'} cut off at the response cap (read "
                   "as at least that long)" if summary.get("truncated_samples") else "")
            )
            if summary["log_formats"]:
                say("  read as: " + ", ".join(f"{count} {_LOG_NAMES[kind]}{'s' if count > 1 else ''}"
                                              for kind, count in sorted(summary["log_formats"].items())))
            made_from = summary.get("dataset_from_schedule")
            if made_from:  # a text log matched without --dataset: which prompts it was matched to
                say(f"  matched to the prompts of {', '.join(made_from)}, the file{'s' if len(made_from) > 1 else ''} "
                    "the schedule was made from (found with the bytes it recorded; --dataset names others)")
            used = summary.get("columns_used") or {}
            if used:
                shown = list(used.items())[:3]
                say("  columns: " + "; ".join(f"{name}: ids '{c.get('id')}', lengths '{c.get('length')}'"
                                               + (f" (other columns, not needed: {', '.join(c['unread'][:5])}"
                                                  + (", ..." if len(c["unread"]) > 5 else "") + ")"
                                                  if c.get("unread") else "")
                                               for name, c in shown)
                    + (f" (and {len(used) - 3} more logs)" if len(used) > 3 else "")
                    + ("" if id_key and length_key else "; name others with --id-key and --length-key"))
        for warning in result.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if json_output:
            emit_json({"output": str(output), **summary, "warnings": result.warnings})


_LOG_NAMES = {"rollout_log": "rollout log", "verl_v1_dump": "verl v1-trainer dump",
              "verl_legacy_dump": "input/output text dump",
              "verl_generations": "verl generation output"}


def _per_worker(prompts: list[int]) -> str:
    """Prompts per worker, one number per worker when they are few, else how many workers get each count."""
    if len(prompts) <= 16:
        return f"{', '.join(map(str, prompts))} prompts per worker"
    counts: dict[int, int] = {}
    for value in prompts:
        counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{workers:,} workers get {value} prompt{'' if value == 1 else 's'}" for value, workers in
                     sorted(counts.items(), reverse=True))


def _hydra(value: object) -> str:
    """A value as a Hydra override writes it (False, 64)."""
    return str(value)
