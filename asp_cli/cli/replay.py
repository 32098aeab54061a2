"""`asp replay` (a schedule and its baselines on real engines, lengths forced) and `asp calibrate` (a preset
fitted to the timings)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer

from asp_cli.cli.common import emit_json, guarded, output_option, say, show_progress
from asp_cli.settings import PRESET_NAMES

API_KEY_ENV = "ASP_API_KEY"  # sent as a bearer token (vllm serve --api-key)


def register(app: typer.Typer) -> None:
    app.command("replay", no_args_is_help=True)(replay_command)
    app.command("calibrate", no_args_is_help=True)(calibrate_command)


class _Bar:
    """A tqdm bar on stderr per arrangement (the live driver's progress hook); without one (stderr not a terminal,
    as in a job's log), one line as each arrangement starts, unless ``lines`` is off (--quiet): a replay runs for
    minutes, and a log that says nothing all that time looks hung."""

    def __init__(self, enabled: bool, lines: bool = False) -> None:
        self.enabled = enabled
        self.lines = lines and not enabled
        self.bar: Any = None

    def start(self, name: str, total: int) -> None:
        self.close()
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, unit="req", leave=True, dynamic_ncols=True)
        elif self.lines:
            say(f"replaying {name}: {total:,} requests")

    def advance(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def note(self, text: str) -> None:
        """One line on what the run waits on (a start-up check a server has not answered), unless --quiet."""
        if self.enabled or self.lines:
            say(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _live_settings(servers: str, *, engine: str, max_in_flight: Optional[int], no_stream: bool, model: Optional[str],
                   retries: int, retry_backoff: float, timeout: float, warmup: int,
                   request_timeout: Optional[float] = None):
    from asp_cli.integrate.live import LiveSettings

    urls = tuple(u.strip() for u in servers.split(",") if u.strip())
    return LiveSettings(servers=urls, engine=engine, max_in_flight=max_in_flight, stream=not no_stream, model=model,
                        retries=retries, backoff_s=retry_backoff, idle_timeout_s=timeout, warmup_requests=warmup,
                        request_timeout_s=request_timeout, api_key=os.environ.get(API_KEY_ENV) or None)


def replay_command(
    schedule: Path = typer.Argument(..., metavar="SCHEDULE", readable=False, help="A schedule written by `asp schedule` (.parquet)."),
    datasets: list[Path] = typer.Argument(None, metavar="DATASETS", readable=False, help="The prompt file(s) the schedule was made from (or --synthetic-prompts)."),
    lengths: list[Path] = typer.Option([], "--lengths", metavar="<path>", readable=False, help="Observed response lengths to force (same formats and columns as --history; repeatable). Prompts without any replay lengths sampled around their predictions."),
    lengths_epoch: Optional[int] = typer.Option(None, "--lengths-epoch", metavar="E", help="Force only epoch E's samples of --lengths (by its epoch column, as asp observe --epoch numbered them; -1: the samples without an epoch, a probe's). Default: each prompt's first N samples, oldest epoch first, a probe's left out of the prompts an epoch holds (docs/replay.md)."),
    lengths_id_key: Optional[str] = typer.Option(None, "--lengths-id-key", help="The prompt id column in length files."),
    lengths_length_key: Optional[str] = typer.Option(None, "--lengths-length-key", help="The response length column in length files."),
    on_bad_row: str = typer.Option("error", "--on-bad-row", help="'error' or 'skip' bad rows of --lengths files."),
    servers: Optional[str] = typer.Option(None, "--servers", help="OpenAI-compatible base URLs, comma-separated, one per instance in instance order (http://host:8000/v1)."),
    in_process: Optional[str] = typer.Option(None, "--in-process", help="Replay through vLLM's offline LLM in this process with this model (needs pip install 'asp-cli[vllm]')."),
    tensor_parallel_size: int = typer.Option(1, "--tensor-parallel-size", help="With --in-process: GPUs of the engine."),
    output: Optional[Path] = output_option("--output", "-o", default=None, help="The timeline to write (.parquet), one row per request."),
    engine: Optional[str] = typer.Option(None, "--engine", help="'blocking' (a minibatch at a time per instance) or 'streaming' (each instance's queue kept full up to --max-in-flight); default: streaming for a schedule planned for a streaming engine, else blocking."),
    max_in_flight: Optional[int] = typer.Option(None, "--max-in-flight", help="Most requests in flight per server; streaming default: the preset's max_num_seqs."),
    baseline: list[str] = typer.Option([], "--baseline", help="Replay this baseline arrangement of the same prompts (repeatable); with --compare, the baselines to run after asp."),
    compare: bool = typer.Option(False, "--compare", help="Run asp, then the baselines (those named, or the equal-footing ones for the engine), back to back after one warm-up, and print one table."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and the GPU time the simulator expects; send nothing."),
    synthetic_prompts: bool = typer.Option(False, "--synthetic-prompts", help="Send token-id prompts of the recorded prompt lengths instead of the dataset's text."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column of the dataset (default: as the schedule recorded)."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The id column of the dataset (default: as the schedule recorded)."),
    model: Optional[str] = typer.Option(None, "--model", help="The served model name (default: the first under /v1/models)."),
    no_stream: bool = typer.Option(False, "--no-stream", help="Plain responses: less client work at very high rates, but no first-token times (asp calibrate needs them)."),
    retries: int = typer.Option(3, "--retries", help="Retries of a request after a connection error, 5xx or 429 (at most 100)."),
    retry_backoff: float = typer.Option(0.5, "--retry-backoff", help="Seconds before the first retry (doubled each time, each wait at most 600 s; at most 600)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds without a byte from a server before a request counts as failed."),
    request_timeout: Optional[float] = typer.Option(None, "--request-timeout", help="Seconds one attempt of a request may take in all, bytes coming or not, before it counts as failed; default --timeout + 0.5 s per token it asks for."),
    warmup: int = typer.Option(8, "--warmup", help="Unrecorded warm-up requests per server before the first run."),
    preset: Optional[str] = typer.Option(None, "--preset", help=f"Preset for the simulator's side of the comparison ({', '.join(PRESET_NAMES)}, or a JSON calibration file); default: the schedule's."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for sampled lengths; default: the schedule's."),
    gpus_per_instance: int = typer.Option(1, "--gpus-per-instance", help="GPUs per instance (tensor parallel size), for the GPU-time figures."),
    progress: bool = typer.Option(False, "--progress", help="Draw progress bars even when stderr is not a terminal."),
    force: bool = typer.Option(False, "--force", help="Replace an existing timeline."),
    json_output: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or summary on stderr (warnings still are)."),
) -> None:
    """Replay a schedule (and baselines) on real OpenAI-compatible servers with recorded lengths forced."""
    with guarded():
        import dataclasses

        from asp_cli.errors import ServerError, SettingsError
        from asp_cli.integrate.measure import REPLAY_READ, InProcessSettings, replay_schedule
        from asp_cli.output import check_output_path, check_parquet_name

        read = dataclasses.replace(REPLAY_READ, prompt_key=prompt_key, id_key=id_key, length_id_key=lengths_id_key,
                                   length_key=lengths_length_key, on_bad_row=on_bad_row)  # type: ignore[arg-type]
        datasets = list(datasets or [])
        if output is None and not dry_run:
            raise SettingsError("name the timeline to write with -o timeline.parquet (or pass --dry-run)")
        if output is not None:  # a dry run checks what the run would, writing nothing
            # The path first: a folder is "is a directory" (exit 7), not "name it .parquet" (exit 4).
            check_output_path(output, [schedule, *datasets, *lengths], force=force)
            check_parquet_name(output, writer="asp replay", kind=b"asp.timeline")  # a timeline, not a schedule
        if servers is not None and in_process is not None:
            raise SettingsError("give --servers or --in-process, not both")
        from asp_cli.integrate.live import check_live_options

        check_live_options(engine=engine, max_in_flight=max_in_flight, retries=retries, backoff_s=retry_backoff,
                           idle_timeout_s=timeout, warmup_requests=warmup, request_timeout_s=request_timeout)
        live = None
        if servers is not None:
            live = _live_settings(servers, engine=engine, max_in_flight=max_in_flight, no_stream=no_stream, model=model,
                                  retries=retries, retry_backoff=retry_backoff, timeout=timeout, warmup=warmup,
                                  request_timeout=request_timeout)
        # A dry run plans the engine asked for (--engine; it was ignored without --servers: a hostile-input round);
        # --max-in-flight is the servers' only, and was ignored without them.
        elif engine not in (None, "blocking") and not dry_run:
            raise SettingsError("--in-process replays blocking minibatches only; drop --engine or serve the model")
        elif max_in_flight is not None:
            raise SettingsError("--max-in-flight is the requests in flight per server of --servers; without them the "
                                "replay runs in process: drop it, or give --servers"
                                + (" (a dry run sends nothing)" if dry_run else ""))
        if tensor_parallel_size != 1 and in_process is None:
            raise SettingsError("--tensor-parallel-size is the in-process engine's (--in-process); for servers' GPU "
                                "time give --gpus-per-instance")
        local = InProcessSettings(in_process, tensor_parallel_size) if in_process is not None else None
        if local is not None and not dry_run:
            from asp_cli.integrate.offline import load_vllm

            load_vllm()  # before reading anything: say at once when the extra is missing
        bar = _Bar(show_progress(quiet) or (progress and not quiet), lines=not quiet)
        try:
            report = replay_schedule(
                schedule, datasets, output=None if dry_run else output, live=live, in_process=local,
                lengths=lengths, read=read, baselines=baseline, compare=compare, synthetic_prompts=synthetic_prompts,
                preset=preset, seed=seed, dry_run=dry_run,
                gpus_per_instance=gpus_per_instance, progress=bar, force=force, engine=engine if dry_run else None,
                lengths_epoch=lengths_epoch)
        finally:
            bar.close()
        done = report.timeline.height if report.timeline is not None else 0
        kept = (f" ({output}, which was there before, is as it was)"
                if report.written is not None and report.written != output else "")
        if report.error is not None:
            from asp_cli.integrate.live import LengthsNotForced

            if done:
                when = "" if isinstance(report.error, LengthsNotForced) else " before it"
                raise ServerError(f"{report.error}; the {done} requests measured{when} are in "
                                  f"{report.written}{kept}")
            raise report.error
        if report.interrupted:
            say(f"Interrupted; wrote the {done} requests measured so far to {report.written}{kept}." if done else
                "Interrupted before any request finished; nothing was written.")
            from asp_cli.cli import interrupts

            interrupts.said()
            raise typer.Exit(130)
        if not quiet:
            say(_dry_run_summary(report.document) if dry_run else _summary(report.document, output))
        for warning in report.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if json_output:
            emit_json({**report.document, "warnings": report.warnings})


def _name_width(document: dict) -> int:
    return max([len("arrangement"), *(len(a["arrangement"]) for a in document["arrangements"])])


def _dry_run_summary(document: dict) -> str:
    w = _name_width(document)
    lines = [f"Plan (dry run, nothing sent): {document['instances']} instances, {document['engine']} engine, "
             f"{document['samples_per_prompt']} samples per prompt, simulated on {document['preset']}.",
             f"  {'arrangement':<{w}} {'requests':>9} {'minibatches':>11} {'response tok':>13} {'prompt tok':>12} "
             f"{'simulated s':>12} {'GPU-min':>8}"]
    for a in document["arrangements"]:
        lines.append(f"  {a['arrangement']:<{w}} {a['requests']:>9,} {a['minibatches']:>11,} "
                     f"{a['response_tokens']:>13,} {a['prompt_tokens']:>12,} {a['simulated']['wall_s']:>12,.1f} "
                     f"{a['simulated_gpu_minutes']:>8,.1f}")
    count = len(document["arrangements"])
    lines.append(f"Expected GPU time: {document['simulated_gpu_minutes_total']:,.1f} GPU-minutes for these {count} "
                 f"replay{'s' if count != 1 else ''} (simulated wall time x {document['instances']} instances x "
                 f"{document['gpus_per_instance']} GPU each), plus the warm-up and the servers' start.")
    lines.append("Each is the rollout alone, as `asp replay` sends it: no trainer and no step held for one (a "
                 "synchronous plan's steps are not waited on), so it ranks rollout throughput, not a training run; "
                 "`asp simulate S --compare` replays with the trainer and the schedule's lag bound.")
    return "\n".join(lines + _epochs_line(document))


def _epochs_line(document: dict) -> list[str]:
    """The lengths forced, in `asp simulate`'s words, where a schedule of several epochs was replayed with lengths
    that number theirs: which epoch of them each schedule epoch forced (nothing said that before 2026-12-08)."""
    if not document["lengths"].get("epochs_replayed"):
        return []
    from asp_cli.cli.simulate import lengths_words

    return [f"Forced lengths: {lengths_words(document['lengths'])}."]


def _pair(measured: float | None, simulated: float, fmt: str) -> str:
    left = "-" if measured is None else format(measured, fmt)
    return f"{left}/{format(simulated, fmt)}"


def _summary(document: dict, output: Optional[Path]) -> str:
    models = ", ".join(document.get("model", []))
    w = _name_width(document)
    lines = [f"Replayed {document['arrangements'][0]['requests']:,} requests per arrangement on {document['instances']} "
             f"servers ({document['engine']}, model {models}); wrote {output}.",
             f"  {'arrangement':<{w}} {'measured s':>10} {'simulated s':>11} {'sim error':>9} {'busy m/s':>11} "
             f"{'spread s m/s':>14} {'eff. batch m/s':>15} {'GPU-min':>8}"]
    for a in document["arrangements"]:
        m = a.get("measured") or {}
        s = a["simulated"]
        error = a.get("simulated_wall_error")
        lines.append(
            f"  {a['arrangement']:<{w}} {m.get('wall_s', float('nan')):>10,.1f} {s['wall_s']:>11,.1f} "
            f"{'-' if error is None else format(error, '+.1%'):>9} "
            f"{_pair(m.get('busy_fraction_mean'), s['busy_fraction_mean'], '.2f'):>11} "
            f"{_pair(m.get('finish_spread_s'), s['finish_spread_s'], '.1f'):>14} "
            f"{_pair(m.get('effective_batch'), s['effective_batch'], '.1f'):>15} {a.get('gpu_minutes', 0.0):>8,.1f}")
        if a.get("completed", a["requests"]) < a["requests"]:
            lines.append(f"    ({a['completed']:,} of {a['requests']:,} requests finished)")
    ranking = document.get("ranking") or {}
    if len(ranking.get("measured", [])) > 1:
        same = "the same order" if ranking["same"] else " < ".join(ranking["simulated"])
        lines.append(f"Fastest first, measured: {' < '.join(ranking['measured'])}; simulated: {same}.")
    return "\n".join(lines + _epochs_line(document))


def _untrusted(note: str) -> bool:
    """Whether a fit's note says the preset is not to be trusted (a fit the GPU cannot give, a poor one, or one worse
    than its base): said as a warning, where a pipeline sees it, not a note among the figures."""
    return "trust the preset less" in note or "worse than the base" in note


def calibrate_command(
    timeline: Optional[Path] = typer.Argument(None, metavar="TIMELINE", readable=False, help="A timeline written by `asp replay -o` (or use --servers)."),
    output: Path = output_option("--output", "-o", help="The preset JSON to write (for --preset of asp schedule/simulate)."),
    base: Optional[str] = typer.Option(None, "--base", help=f"The preset the fit starts from and whose hardware figures it keeps ({', '.join(PRESET_NAMES)}, or a JSON file); default: the timeline's."),
    servers: Optional[str] = typer.Option(None, "--servers", help="Measure a short probe run of your own on these servers (comma-separated base URLs) instead of a timeline."),
    model: Optional[str] = typer.Option(None, "--model", help="With --servers: the served model name (default: the first listed)."),
    probe_timeline: Optional[Path] = output_option("--probe-timeline", default=None, help="With --servers: also keep the probe's timeline here (.parquet)."),
    probe_max_batch: Optional[int] = typer.Option(None, "--probe-max-batch", help="With --servers: the largest probe minibatch (requests, at most 4,096; default 256)."),
    probe_tokens: Optional[int] = typer.Option(None, "--probe-tokens", help="With --servers: the longest probe response (tokens; default 256)."),
    kv_cache_tokens: Optional[int] = typer.Option(None, "--kv-cache-tokens", help="The engine's KV cache in tokens (vLLM logs 'GPU KV cache size'); default: what the servers reported."),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="The engine's sequence limit (vllm serve --max-num-seqs); default: observed, else the base's."),
    train_steps: Optional[Path] = typer.Option(None, "--train-steps", readable=False, help="Measured trainer steps (columns tokens, step_s) to fit the trainer's cost too."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output."),
    keep_worse: bool = typer.Option(False, "--keep-worse", help="Write the preset even when it simulates every measured run worse than its base (otherwise exit 1 and nothing written)."),
    json_output: bool = typer.Option(False, "--json", help="Print the fit as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr."),
) -> None:
    """Fit the cost-model preset (decode step, prefill, KV capacity) to measured timings; write a preset JSON."""
    with guarded():
        from asp_cli.errors import SettingsError
        from asp_cli.integrate.calibrate import calibrate
        from asp_cli.output import check_output_name, check_output_path

        inputs = [p for p in (timeline, train_steps) if p is not None]
        if base is not None and Path(base).is_file():  # a calibration file read as the base: an input too
            inputs.append(Path(base))
        check_output_path(output, inputs, force=force)
        check_output_name(output, (".json",), writer="asp calibrate", what="a JSON preset")
        if probe_timeline is not None:
            check_output_path(probe_timeline, inputs, force=force)
        live = None
        if servers is not None:
            live = _live_settings(servers, engine="blocking", max_in_flight=None, no_stream=False, model=model,
                                  retries=3, retry_backoff=0.5, timeout=600.0, warmup=8)
        elif probe_max_batch is not None or probe_tokens is not None:  # ignored without servers (a hostile round)
            raise SettingsError("--probe-max-batch and --probe-tokens shape the probe sent to --servers; without "
                                "them nothing is probed: drop them, or give --servers")
        bar = _Bar(show_progress(quiet), lines=not quiet)
        try:
            report = calibrate(timeline, output, base=base, live=live, probe_timeline=probe_timeline,
                               probe_max_batch=256 if probe_max_batch is None else probe_max_batch,
                               probe_response_tokens=256 if probe_tokens is None else probe_tokens,
                               kv_cache_tokens=kv_cache_tokens, max_num_seqs=max_num_seqs, train_steps=train_steps,
                               progress=bar, force=force, keep_worse=keep_worse)
        finally:
            bar.close()
        if not quiet:
            say(_calibration_summary(report.document))
        for note in (report.document.get("fit") or {}).get("notes", []):  # under --quiet too: a preset not to trust
            if _untrusted(note):
                say(f"Warning: {note}")
        if json_output:
            emit_json(report.document)


def _calibration_summary(document: dict) -> str:
    fit = document["fit"]
    if fit is None:  # no timeline: the trainer fitted and the engine's limits as given, decoding kept as the base's
        train, kv, seqs = document["train"], document["kv_capacity_tokens"], document["max_num_seqs"]
        said = ([f"Fitted the trainer to {document['source']}: {train['train_fixed_s']:.4g} s a step + "
                 f"{train['train_per_token_s']:.4g} s a token"] if train else []) + [
            f"KV capacity {kv['value']:,} tokens ({kv['source']}); max_num_seqs {seqs['value']:,} ({seqs['source']})"
        ] * (not train or "given" in (kv["source"], seqs["source"]))
        return (f"{'; '.join(said)} (decoding as {document['base']}, not measured).\n"
                f"Wrote {document['output']}.\n"
                f"Use it: asp schedule ... --preset {document['output']}; asp simulate ... --preset {document['output']}")
    prefill = "" if fit["prefill_rel_rmse"] is None else (
        f"; prefill wait {fit['prefill_rel_rmse']:.1%} RMS over {fit['prefill_requests']:,} requests")
    lines = [f"Fitted {fit['decode_requests']:,} requests from {document['source']}: decode time error "
             f"{fit['decode_rel_rmse']:.1%} RMS (median {fit['decode_median_abs_error']:.1%}){prefill}.",
             f"Wrote {document['output']} (base {document['base']}).",
             f"  {'parameter':<32} {'base':>11} {'calibrated':>11}"]
    for row in document["parameters"]:
        lines.append(f"  {row['parameter']:<32} {row['base']:>11.4g} {row['calibrated']:>11.4g}")
    if document.get("train"):
        train = document["train"]
        lines.append(f"  trainer (--train-steps): {train['train_fixed_s']:.4g} s a step + "
                     f"{train['train_per_token_s']:.4g} s a token")
    kv, seqs = document["kv_capacity_tokens"], document["max_num_seqs"]
    knee = fit["knee_live"]
    lines.append(f"  KV capacity {kv['value']:,} tokens ({kv['source']}); max_num_seqs {seqs['value']:,} "
                 f"({seqs['source']}); " + ("no step seen compute-bound" if knee is None
                                            else f"compute-bound above {knee:.0f} live sequences"))
    for row in document["check"]:
        lines.append(f"Check, {row['arrangement']}: measured {row['measured_wall_s']:,.2f} s; simulated "
                     f"{row['base_wall_s']:,.2f} s with the base ({row['base_error']:+.1%}), "
                     f"{row['calibrated_wall_s']:,.2f} s calibrated ({row['calibrated_error']:+.1%}).")
    for note in fit["notes"]:
        if not _untrusted(note):  # those are warnings (`calibrate_command`)
            lines.append(f"Note: {note}.")
    lines.append(f"Use it: asp schedule ... --preset {document['output']}; asp simulate ... --preset {document['output']}")
    return "\n".join(lines)
