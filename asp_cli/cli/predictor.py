"""`asp predictor`: fit, evaluate, apply and describe response-length models.

Each command parses options, calls its Python twin in `asp_cli.predict.commands` and renders the result: text for people on stderr, ``--json`` on stdout, files written atomically.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer

from asp_cli.cli.common import (difficulty_key_option, emit_json, guarded, one_line, output_option, say,
                                source_key_option)
from asp_cli.reading.options import DEFAULT_READ, ReadOptions
from asp_cli.settings import ScheduleSettings

_DEFAULT = ScheduleSettings()  # the CLI's defaults are the library's

predictor_app = typer.Typer(
    name="predictor",
    help="Fit, evaluate, apply and describe response-length predictors.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_DATA_HELP = ("Files of prompts with observed lengths (.jsonl, .json, .parquet, .csv, optionally .gz): one row per "
              "sample, or one row per prompt with a list of lengths.")


def register(app: typer.Typer) -> None:
    """Add the ``predictor`` command group to ``app``."""
    app.add_typer(predictor_app, name="predictor")


@predictor_app.command("fit")
def fit_command(
    inputs: list[Path] = typer.Argument(..., metavar="INPUTS", readable=False, help=_DATA_HELP + " With --history: prompt files, as for `asp schedule`."),
    output: Path = output_option("--output", "-o", help="The model file to write (.skops)."),
    history: list[Path] = typer.Option([], "--history", metavar="<path>", readable=False, help="Observed lengths of the prompts in INPUTS (as `asp observe` writes them; repeatable), joined to them by prompt id."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    source_key: Optional[str] = source_key_option(),
    difficulty_key: Optional[str] = difficulty_key_option(),
    length_key: Optional[str] = typer.Option(None, "--length-key", help="The response length column, if not detected."),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The length column in history files."),
    max_response_tokens: Optional[int] = typer.Option(
        None, "--max-response-tokens", help="The generation cap of the data: lengths at or above it count as truncated."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json for prompt token counts."),
    no_metadata: bool = typer.Option(False, "--no-metadata", help="Ignore data_source and difficulty columns."),
    char_ngrams: bool = typer.Option(
        False, "--char-ngrams", help="Also learn from hashed character 3- and 4-grams (slower to predict; see docs)."),
    seed: int = typer.Option(_DEFAULT.seed, "--seed", help="Random state of the cross-fitting folds."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' or 'skip' bad rows."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print the model card as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Train a length predictor on observed rollouts and write it as a skops file."""
    with guarded():
        from asp_cli.errors import SettingsError
        from asp_cli.predict.commands import fit_predictor

        if no_metadata and (source_key or difficulty_key):  # the key named a column the fit then ignored, silently
            raise SettingsError("--no-metadata leaves the data source and difficulty out of the model: drop it, or "
                                "drop --source-key and --difficulty-key")

        read, history_read = _observation_reads(prompt_key, id_key, (source_key, difficulty_key), length_key,
                                                history_id_key, history_length_key, on_bad_row, tokenizer)
        result = fit_predictor(inputs, output, history=history, read=read, history_read=history_read,
                               max_response_tokens=max_response_tokens, use_metadata=not no_metadata,
                               char_ngrams=char_ngrams, seed=seed, force=force)
        card = result.card
        if result.skipped_rows:  # fit's only word of them: its result.warnings do not hold them (eval's and predict's do)
            from asp_cli.errors import counted

            say(f"skipped {counted(result.skipped_rows, 'bad row')} (--on-bad-row skip)")
        if not quiet:
            say(f"fitted on {card['training']['prompts']:,} prompts ({card['training']['samples']:,} samples) in "
                f"{result.seconds:.1f} s; wrote {output}")
        for warning in result.warnings:
            say(f"Warning: {warning}")
        if json_output:
            emit_json(card)


@predictor_app.command("eval")
def eval_command(
    inputs: list[Path] = typer.Argument(..., metavar="INPUTS", readable=False, help=_DATA_HELP + " With --lengths: prompt files, as for `asp schedule`."),
    model: Optional[Path] = typer.Option(None, "--model", readable=False, help="A model file; default: the bundled one."),
    lengths: list[Path] = typer.Option([], "--lengths", metavar="<path>", readable=False, help="The observed lengths to score against, for prompt files in INPUTS (a rollout log or `asp observe`'s history; repeatable), joined by prompt id."),
    lengths_id_key: Optional[str] = typer.Option(None, "--lengths-id-key", help="The prompt id column in --lengths files."),
    lengths_length_key: Optional[str] = typer.Option(None, "--lengths-length-key", help="The length column in --lengths files."),
    history: list[Path] = typer.Option([], "--history", metavar="<path>", readable=False, help="Observed lengths from earlier epochs, folded into the prediction as `asp schedule --history` does (repeatable)."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    source_key: Optional[str] = source_key_option(),
    difficulty_key: Optional[str] = difficulty_key_option(),
    length_key: Optional[str] = typer.Option(None, "--length-key", help="The response length column, if not detected."),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The length column in history files."),
    max_response_tokens: Optional[int] = typer.Option(
        None, "--max-response-tokens", help="The generation cap of the data: lengths at or above it count as truncated."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' or 'skip' bad rows."),
    json_output: bool = typer.Option(False, "--json", help="Print all metrics as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No report on stderr (warnings still are): with --json."),
) -> None:
    """Score a predictor on observed lengths: Kendall tau, Spearman, tail recall, log error, calibration."""
    with guarded():
        from asp_cli.predict.commands import evaluate_predictor
        from asp_cli.predict.evaluate import format_report

        read, history_read = _observation_reads(prompt_key, id_key, (source_key, difficulty_key), length_key,
                                                history_id_key, history_length_key, on_bad_row, tokenizer)
        lengths_read = ReadOptions(length_id_key=lengths_id_key, length_key=lengths_length_key, on_bad_row=on_bad_row,
                                   length_id_flag="--lengths-id-key", length_flag="--lengths-length-key")  # type: ignore[arg-type]
        result = evaluate_predictor(inputs, model=model, history=history, lengths=lengths, read=read,
                                    history_read=history_read, lengths_read=lengths_read,
                                    max_response_tokens=max_response_tokens)
        if not quiet:
            say(format_report(result, f"model {result['model']}: {result['overall']['prompts']:,} prompts, "
                                      f"{result['samples']:,} samples"))
            _say_calibration(result.get("history"))
        for warning in result["warnings"]:
            say(f"Warning: {warning}")
        if json_output:
            emit_json(result)


@predictor_app.command("predict")
def predict_command(
    inputs: list[Path] = typer.Argument(..., metavar="INPUTS", readable=False, help="Prompt files, as for `asp schedule`."),
    output: Path = output_option("--output", "-o", help="The predictions to write (.parquet)."),
    model: Optional[Path] = typer.Option(None, "--model", readable=False, help="A model file; default: the bundled one."),
    history: list[Path] = typer.Option([], "--history", metavar="<path>", readable=False, help="Observed lengths from earlier epochs (repeatable)."),
    samples_per_prompt: int = typer.Option(_DEFAULT.samples_per_prompt, "--samples-per-prompt", "-n", help="Samples per prompt (GRPO group size N)."),
    max_response_tokens: int = typer.Option(_DEFAULT.max_response_tokens, "--max-response-tokens", help="The generation cap in tokens."),
    plan_with: str = typer.Option(_DEFAULT.plan_with, "--plan-with", help="predicted_tokens is the group 'max' or the 'mean'."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    source_key: Optional[str] = source_key_option(),
    difficulty_key: Optional[str] = difficulty_key_option(),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The length column in history files."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", readable=False, help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option(DEFAULT_READ.on_bad_row, "--on-bad-row", help="'error' or 'skip' bad rows."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
    ray: bool = typer.Option(False, "--ray", help="Read and predict on Ray Data, one predictions file per input in the folder -o (needs pip install 'asp-cli[ray]')."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="With --ray: the cluster to join ('auto', or HOST:PORT); default: a local Ray."),
    workers: Optional[int] = typer.Option(None, "--workers", help="With --ray: actors (models in memory) at once; default: one per input, at most the CPUs."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Write per-prompt length predictions (prompt_id, predicted_tokens, quantiles) to Parquet."""
    with guarded():
        from asp_cli.predict.commands import predict_file

        read = ReadOptions(prompt_key=prompt_key, id_key=id_key, source_key=source_key, difficulty_key=difficulty_key,
                           length_id_key=history_id_key,
                           length_key=history_length_key, on_bad_row=on_bad_row, tokenizer=tokenizer)  # type: ignore[arg-type]
        if ray or ray_address is not None or workers is not None:
            _predict_on_ray(inputs, output, model=model, history=history, read=read, ray=ray,
                            ray_address=ray_address, workers=workers, samples_per_prompt=samples_per_prompt,
                            max_response_tokens=max_response_tokens, plan_with=plan_with, force=force,
                            json_output=json_output, quiet=quiet)
            return
        result = predict_file(inputs, output, model=model, history=history, read=read,
                              samples_per_prompt=samples_per_prompt, max_response_tokens=max_response_tokens,
                              plan_with=plan_with, force=force)
        info = result.info
        if not quiet:
            from asp_cli.errors import counted

            say(f"wrote {counted(result.table.height, 'prediction')} to {output} ({info.prompts_from_history:,} from history, "
                f"{info.prompts_from_model:,} from the model"
                + (", corrected by the history)" if info.prompts_from_history else ")"))
            _say_calibration(info.details.get("history"))
        for warning in result.warnings:  # under --quiet too (a CI log kept none)
            say(f"Warning: {warning}")
        if json_output:
            emit_json({"output": str(output), "prompts": result.table.height, "predictor": info.predictor_name,
                       "predictor_fingerprint": info.predictor_fingerprint,
                       "prompts_from_history": info.prompts_from_history,
                       "prompts_from_model": info.prompts_from_model, "details": info.details,
                       "warnings": result.warnings})


def _predict_on_ray(inputs, output, *, model, history, read, ray, ray_address, workers, samples_per_prompt,
                    max_response_tokens, plan_with, force, json_output, quiet=False) -> None:
    from asp_cli.errors import SettingsError
    from asp_cli.predict.on_ray import predict_with_ray

    if not ray:
        raise SettingsError("--ray-address and --workers go with --ray; add --ray or drop them")
    if history:
        raise SettingsError("--history cannot go with --ray: the history correction is pooled over every prompt; "
                            "predict without --ray, or give the history to asp schedule (without --predictions)")
    result = predict_with_ray(inputs, output, model=model, read=read, samples_per_prompt=samples_per_prompt,
                              max_response_tokens=max_response_tokens, plan_with=plan_with, workers=workers,
                              address=ray_address, force=force)
    if not quiet:
        from asp_cli.errors import counted

        say(f"wrote {counted(result.prompts, 'prediction')} to {counted(len(result.files), 'file')} in {output} "
            f"({result.info.details['ray_workers']} Ray workers); plan from them with "
            f"asp schedule INPUTS --predictions {output}/predictions-*.parquet")
    if json_output:
        emit_json({"output": str(output), "files": [str(f) for f in result.files], "prompts": result.prompts,
                   "skipped_rows": result.skipped_rows, "predictor": result.info.predictor_name,
                   "predictor_fingerprint": result.info.predictor_fingerprint, "shards": result.shards,
                   "details": result.info.details})


def _say_calibration(calibration: dict | None) -> None:
    from asp_cli.predict.calibration_text import calibration_lines

    for line in calibration_lines(calibration or {}):
        say(f"  {line}")


@predictor_app.command("info")
def info_command(
    model: Optional[Path] = typer.Argument(None, metavar="MODEL", readable=False, help="A model file; default: the bundled one."),
    json_output: bool = typer.Option(False, "--json", help="Print the model card as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr (warnings still are)."),
) -> None:
    """Show a model file's card: feature set, training data, library versions, evaluation figures."""
    with guarded():
        from asp_cli.predict.commands import predictor_info

        card = predictor_info(model)
        path = card["file"]
        training = card["training"]
        if not quiet:
            say(f"{path}\n  format version {card['format_version']}, features {card['feature_set']} "
                f"({len(card['features'])} dense + {card['vocabulary_size']} words"
                + (f" + 2^{card['char_ngrams']['hash_bits']} hashed character n-grams" if "char_ngrams" in card else "")
                + ")\n"
                f"  trained on {training['prompts']:,} prompts, {training['samples']:,} samples (training data "
                f"{training['fingerprint']})\n  file {card['file_fingerprint']} (what asp report shows as the predictor)\n"
                f"  versions: " + ", ".join(f"{one_line(str(k))} {one_line(str(v))}" for k, v in card["versions"].items()))
            evaluation = card.get("evaluation")
            if isinstance(evaluation, dict):  # a file's own text, escaped: an OSC sequence there reached the terminal
                say("  evaluation: " + ", ".join(f"{one_line(str(k))} {one_line(str(v))}"
                                                 for k, v in evaluation.items()))
            elif "evaluation" in card:  # hand-edited into text or a list: shown as it is (it was exit 70)
                say(f"  evaluation: {one_line(str(evaluation))}")
        if json_output:
            emit_json(card)


def _observation_reads(prompt_key: str | None, id_key: str | None, metadata_keys: tuple[str | None, str | None],
                       length_key: str | None,
                       history_id_key: str | None, history_length_key: str | None, on_bad_row: str,
                       tokenizer: Path | None) -> tuple[ReadOptions, ReadOptions]:
    """The reading options of `fit` and `eval`: for the prompt-and-length files, and for --history files."""
    from asp_cli.predict.observations import OBSERVATIONS_READ

    read = dataclasses.replace(OBSERVATIONS_READ, prompt_key=prompt_key, id_key=id_key, source_key=metadata_keys[0],
                               difficulty_key=metadata_keys[1],
                               length_key=length_key,
                               on_bad_row=on_bad_row, tokenizer=tokenizer)  # type: ignore[arg-type]
    history_read = ReadOptions(length_id_key=history_id_key, length_key=history_length_key,
                               on_bad_row=on_bad_row)  # type: ignore[arg-type]
    return read, history_read
