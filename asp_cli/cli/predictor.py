"""`asp predictor`: fit, evaluate, apply and describe response-length models.

Each command parses options, calls one library function (``predictor``, ``predictor_eval``, ``prediction``)
and renders the result: text for people on stderr, ``--json`` on stdout, files written atomically.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from asp_cli.cli.common import emit_json, guarded, say

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


def _check_on_bad_row(value: str) -> None:
    from asp_cli.reading import check_on_bad_row

    check_on_bad_row(value)


def _check_cap(max_response_tokens: int | None) -> None:
    """fit and eval take the data's generation cap: a whole number of tokens, like `asp schedule`'s."""
    from asp_cli.errors import SettingsError
    from asp_cli.settings import MAX_SETTING

    if max_response_tokens is not None and not 1 <= max_response_tokens <= MAX_SETTING:
        raise SettingsError(f"--max-response-tokens must be a whole number from 1 to {MAX_SETTING} "
                            f"(got {max_response_tokens})")


@predictor_app.command("fit")
def fit_command(
    inputs: list[Path] = typer.Argument(..., help=_DATA_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="The model file to write (.skops)."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    length_key: Optional[str] = typer.Option(None, "--length-key", help="The response length column, if not detected."),
    max_response_tokens: Optional[int] = typer.Option(
        None, "--max-response-tokens", help="The generation cap of the data: lengths at or above it count as truncated."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="A local tokenizer.json for prompt token counts."),
    no_metadata: bool = typer.Option(False, "--no-metadata", help="Ignore data_source and difficulty columns."),
    char_ngrams: bool = typer.Option(
        False, "--char-ngrams", help="Also learn from hashed character 3- and 4-grams (slower to predict; see docs)."),
    seed: int = typer.Option(0, "--seed", help="Random state of the cross-fitting folds."),
    on_bad_row: str = typer.Option("error", "--on-bad-row", help="'error' or 'skip' bad rows."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print the model card as JSON on stdout."),
) -> None:
    """Train a length predictor on observed rollouts and write it as a skops file."""
    with guarded():
        from asp_cli.predict import model as P
        from asp_cli.output import atomic_path, check_output_path

        _check_on_bad_row(on_bad_row)
        _check_cap(max_response_tokens)
        if not 0 <= seed <= 2**32 - 1:  # scikit-learn's random_state range
            from asp_cli.errors import SettingsError

            raise SettingsError(f"--seed must be a whole number from 0 to {2**32 - 1} (got {seed})")
        check_output_path(output, inputs, force=force)
        started = time.time()
        data = P.read_observations(inputs, prompt_key=prompt_key, id_key=id_key, length_key=length_key,
                                   on_bad_row=on_bad_row)
        model = P.LengthPredictor(use_metadata=not no_metadata, char_ngrams=char_ngrams, random_state=seed).fit(
            data.prompts, data.lengths, cap=max_response_tokens, tokenizer=tokenizer)
        with atomic_path(output) as tmp:
            P.save(model, tmp)
        card = model.card()
        if data.skipped_rows:
            say(f"skipped {data.skipped_rows} bad rows")
        say(f"fitted on {card['training']['prompts']} prompts ({card['training']['samples']} samples) in "
            f"{time.time() - started:.1f} s; wrote {output}")
        if json_output:
            emit_json(card)


@predictor_app.command("eval")
def eval_command(
    inputs: list[Path] = typer.Argument(..., help=_DATA_HELP),
    model: Optional[Path] = typer.Option(None, "--model", help="A model file; default: the bundled one."),
    history: list[Path] = typer.Option([], "--history", help="Observed lengths from earlier epochs (repeatable)."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    length_key: Optional[str] = typer.Option(None, "--length-key", help="The response length column, if not detected."),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The length column in history files."),
    max_response_tokens: Optional[int] = typer.Option(
        None, "--max-response-tokens", help="The generation cap of the data: lengths at or above it count as truncated."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option("error", "--on-bad-row", help="'error' or 'skip' bad rows."),
    json_output: bool = typer.Option(False, "--json", help="Print all metrics as JSON on stdout."),
) -> None:
    """Score a predictor on observed lengths: Kendall tau, Spearman, tail recall, log error, calibration."""
    with guarded():
        from asp_cli.predict import model as P
        from asp_cli.predict.evaluate import evaluate, format_report
        from asp_cli.reading import read_lengths

        _check_on_bad_row(on_bad_row)
        _check_cap(max_response_tokens)
        data = P.read_observations(inputs, prompt_key=prompt_key, id_key=id_key, length_key=length_key,
                                   on_bad_row=on_bad_row)
        past = read_lengths(history, id_key=history_id_key, length_key=history_length_key,  # type: ignore[arg-type]
                            on_bad_row=on_bad_row)[0] if history else None
        result = evaluate(data.prompts, data.lengths, predictor=model, history=past,
                          max_response_tokens=max_response_tokens, tokenizer=tokenizer)
        result["model"] = str(model) if model is not None else "default"
        say(format_report(result, f"model {result['model']}: {result['overall']['prompts']} prompts, "
                                  f"{result['samples']} samples"))
        if json_output:
            emit_json(result)


@predictor_app.command("predict")
def predict_command(
    inputs: list[Path] = typer.Argument(..., help="Prompt files, as for `asp schedule`."),
    output: Path = typer.Option(..., "--output", "-o", help="The predictions to write (.parquet)."),
    model: Optional[Path] = typer.Option(None, "--model", help="A model file; default: the bundled one."),
    history: list[Path] = typer.Option([], "--history", help="Observed lengths from earlier epochs (repeatable)."),
    samples_per_prompt: int = typer.Option(8, "--samples-per-prompt", "-n", help="Samples per prompt (GRPO group size N)."),
    max_response_tokens: int = typer.Option(8192, "--max-response-tokens", help="The generation cap in tokens."),
    plan_with: str = typer.Option("max", "--plan-with", help="predicted_tokens is the group 'max' or the 'mean'."),
    prompt_key: Optional[str] = typer.Option(None, "--prompt-key", help="The prompt column, if not detected."),
    id_key: Optional[str] = typer.Option(None, "--id-key", help="The prompt id column, if not detected."),
    history_id_key: Optional[str] = typer.Option(None, "--history-id-key", help="The prompt id column in history files."),
    history_length_key: Optional[str] = typer.Option(None, "--history-length-key", help="The length column in history files."),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="A local tokenizer.json for prompt token counts."),
    on_bad_row: str = typer.Option("error", "--on-bad-row", help="'error' or 'skip' bad rows."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    json_output: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout."),
) -> None:
    """Write per-prompt length predictions (prompt_id, predicted_tokens, quantiles) to Parquet."""
    with guarded():
        import numpy as np
        import polars as pl

        from asp_cli import columns as C
        from asp_cli.output import atomic_path, check_output_path
        from asp_cli.predict.prediction import predict_distribution, predict_lengths
        from asp_cli.reading import read_lengths, read_prompts

        _check_on_bad_row(on_bad_row)
        check_output_path(output, [*inputs, *history], force=force)
        prompts, _ = read_prompts(inputs, prompt_key=prompt_key, id_key=id_key, on_bad_row=on_bad_row)  # type: ignore[arg-type]
        past = None
        if history:
            past, _ = read_lengths(history, id_key=history_id_key, length_key=history_length_key,
                                   on_bad_row=on_bad_row)  # type: ignore[arg-type]
        frame, info = predict_lengths(prompts, predictor=model, history=past, samples_per_prompt=samples_per_prompt,
                                      max_response_tokens=max_response_tokens, plan_with=plan_with, tokenizer=tokenizer)
        mu, sigma, *_ = predict_distribution(prompts, predictor=model, history=past,
                                             max_response_tokens=max_response_tokens, tokenizer=tokenizer)
        quantiles = {}
        for name, z in (("predicted_p50_tokens", 0.0), ("predicted_p90_tokens", 1.2815515655446004)):
            quantiles[name] = pl.Series(np.clip(np.rint(np.exp(np.minimum(mu + z * sigma, 60.0))), 1,
                                                max_response_tokens).astype(np.int64))
        table = pl.concat([prompts.select(C.PROMPT_ID), frame], how="horizontal").with_columns(**quantiles)
        with atomic_path(output) as tmp:
            table.write_parquet(tmp, compression="zstd", statistics=False)
        say(f"wrote {table.height} predictions to {output} ({info.prompts_from_history} from history, "
            f"{info.prompts_from_model} from the model)")
        if json_output:
            emit_json({"output": str(output), "prompts": table.height, "predictor": info.predictor_name,
                       "predictor_fingerprint": info.predictor_fingerprint,
                       "prompts_from_history": info.prompts_from_history,
                       "prompts_from_model": info.prompts_from_model, "details": info.details})


@predictor_app.command("info")
def info_command(
    model: Optional[Path] = typer.Argument(None, help="A model file; default: the bundled one."),
    json_output: bool = typer.Option(False, "--json", help="Print the model card as JSON on stdout."),
) -> None:
    """Show a model file's card: feature set, training data, library versions, evaluation figures."""
    with guarded():
        from asp_cli.predict.prediction import DEFAULT_MODEL
        from asp_cli.predict.model import file_fingerprint, load

        path = model if model is not None else DEFAULT_MODEL
        loaded = load(path)  # refuses unsafe or newer files, like every other command
        card = loaded.card()
        card["file"] = str(path)
        card["file_fingerprint"] = file_fingerprint(path)
        training = card["training"]
        say(f"{path}\n  format version {card['format_version']}, features {card['feature_set']} "
            f"({len(card['features'])} dense + {card['vocabulary_size']} words"
            + (f" + 2^{card['char_ngrams']['hash_bits']} hashed character n-grams" if "char_ngrams" in card else "")
            + ")\n"
            f"  trained on {training['prompts']} prompts, {training['samples']} samples; {training['fingerprint']}\n"
            f"  versions: " + ", ".join(f"{k} {v}" for k, v in card["versions"].items()))
        if "evaluation" in card:
            say("  evaluation: " + ", ".join(f"{k} {v}" for k, v in card["evaluation"].items()))
        if json_output:
            emit_json(card)
