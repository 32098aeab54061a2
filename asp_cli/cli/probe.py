"""`asp probe`: a small stratified set of prompts to generate with the user's own policy before training."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from asp_cli.cli.common import emit_json, guarded, difficulty_key_option, output_option, say, source_key_option
from asp_cli.errors import printable
from asp_cli.reading.options import DEFAULT_READ
from asp_cli.settings import ScheduleSettings

_DEFAULT = ScheduleSettings()


def register(app: typer.Typer) -> None:
    app.command("probe", no_args_is_help=True)(probe_command)


def probe_command(
    inputs: list[Path] = typer.Argument(..., metavar="INPUTS", readable=False, help="Prompt files, as for `asp schedule`."),
    output: Path = output_option("--output", "-o", help="The probe to write: .jsonl or .parquet (the input's own rows)."),
    fraction: Optional[float] = typer.Option(None, "--fraction", help="Share of the prompts to probe, in (0, 1]; default 0.02."),
    prompts: Optional[int] = typer.Option(None, "--prompts", help="Probe exactly this many prompts (instead of --fraction)."),
    min_per_source: int = typer.Option(4, "--min-per-source", help="At least this many prompts of each data_source (all of a smaller one)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw within each stratum."),
    format: Optional[str] = typer.Option(None, "--format", "-f", help="jsonl or parquet (default: by the output's name), or verl (Parquet in verl's RLHFDataset layout, as `asp export`)."),  # noqa: A002
    predictor: Optional[Path] = typer.Option(None, "--predictor", readable=False, help="The model whose predicted lengths stratify the draw; default: the bundled one."),
    samples_per_prompt: int = typer.Option(_DEFAULT.samples_per_prompt, "--samples-per-prompt", "-n", help="The training run's group size N, for the cost in the summary."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    source_key: Optional[str] = source_key_option(),
    difficulty_key: Optional[str] = difficulty_key_option(),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' stops at the first bad row; 'skip' skips and counts them."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Pick a small stratified set of prompts to generate once with your policy; feed it back with --history."""
    with guarded():
        from asp_cli.integrate.probe import ProbeSettings, probe
        from asp_cli.reading.options import ReadOptions

        read = ReadOptions(prompt_key=prompt_key, id_key=id_key, source_key=source_key, difficulty_key=difficulty_key,
                           on_bad_row=on_bad_row,
                           tokenizer=tokenizer)  # type: ignore[arg-type]
        settings = ProbeSettings(fraction=fraction, prompts=prompts, min_per_source=min_per_source, seed=seed)
        result = probe(inputs, output, settings=settings, predictor=predictor, format=format, read=read,
                       samples_per_prompt=samples_per_prompt, force=force)
        summary = result.summary
        if not quiet:
            say(f"Wrote {output}: {summary['probe_prompts']:,} of {summary['prompts']:,} prompts "
                f"({summary['fraction']:.2%}, {result.format}), stratified over {len(summary['sources'])} source(s) "
                "and predicted length")
            for source in summary["sources"]:
                low, high = source["predicted_tokens_range"]
                picked = source.get("probe_predicted_tokens_range")
                say(f"  {printable(source['data_source'] or '(no source)')}: {source['probe_prompts']:,} of {source['prompts']:,} "
                    f"prompts; the model's median predicted {low:,.0f}-{high:,.0f} tokens over the source"
                    + (f", {picked[0]:,.0f}-{picked[1]:,.0f} over those probed" if picked else ""))
            say(f"  cost: one sample of every probed prompt is {summary['epoch_cost_per_probe_sample']:.3%} of one "
                f"epoch's rollout at {summary['samples_per_prompt']} samples per prompt (-n: your group size), counted "
                "in samples; it holds the predicted long tail, so its share of tokens is larger")
            dataset = " ".join(shlex.quote(str(i)) for i in inputs)
            # The history's ids must be the ones the schedule reads (reading.history_ids warns otherwise).
            keyed = (f" --dataset-id-key {shlex.quote(id_key)}" if id_key else "") + (
                f" --dataset-prompt-key {shlex.quote(prompt_key)}" if prompt_key else "")
            read = (f" --id-key {shlex.quote(id_key)}" if id_key else "") + (
                f" --prompt-key {shlex.quote(prompt_key)}" if prompt_key else "") + (
                f" --source-key {shlex.quote(source_key)}" if source_key else "") + (
                f" --difficulty-key {shlex.quote(difficulty_key)}" if difficulty_key else "")
            say("  next: generate it with your policy at the training run's response cap (docs/probe.md), then `asp "
                f"observe LOG -o history.parquet --dataset {dataset}{keyed}` and `asp schedule {dataset}"
                f"{read} ... --history "
                "history.parquet --max-response-tokens CAP` (the same cap: samples cut off there are read as "
                "censored)")
        for warning in result.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if json_output:
            emit_json({"output": str(output), **summary, "warnings": result.warnings})
