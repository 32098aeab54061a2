"""The Python twins of `asp predictor fit`, `eval`, `predict` and `info`: files in, results out.

Each command of the ``predictor`` group only parses its options, calls one of these and renders the result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.predict.observations import OBSERVATIONS_READ, read_observations
from asp_cli.predict.prediction import PredictionInfo
from asp_cli.reading.options import DEFAULT_READ, ReadOptions, one_path, paths_of
from asp_cli.errors import InputError, SettingsError, expect_kind
from asp_cli.settings import check_count, check_flags, whole

# The quantiles `predict_file` writes beside the group maximum and mean: (column, quantile of one sample).
QUANTILE_COLUMNS: tuple[tuple[str, float], ...] = (("predicted_p50_tokens", 0.5), ("predicted_p90_tokens", 0.9))


@dataclass
class FitResult:
    """What `fit_predictor` made: the fitted model, its card, and what was skipped."""

    model: Any  # LengthPredictor
    card: dict[str, Any]
    skipped_rows: int
    seconds: float
    output: Path | None = None
    warnings: list[str] = field(default_factory=list)


def fit_predictor(
    inputs: Sequence[Path],
    output: Path | None = None,
    *,
    history: Sequence[Path] = (),
    read: ReadOptions = OBSERVATIONS_READ,
    history_read: ReadOptions = DEFAULT_READ,
    max_response_tokens: int | None = None,
    use_metadata: bool = True,
    char_ngrams: bool = False,
    seed: int = 0,
    force: bool = False,
) -> FitResult:
    """Train a length predictor on observed lengths; write it when ``output`` is given.

    This is what `asp predictor fit` runs. Without ``history``, ``inputs`` hold prompts with their observed
    lengths; with it, ``inputs`` are prompt files (read as `asp schedule` reads them) and ``history`` the
    lengths observed for them (`asp observe`'s output, read with ``history_read``), joined by prompt id.
    ``max_response_tokens`` is the data's generation cap (lengths at or above it count as truncated); ``seed``
    the random state of the cross-fitting folds.

    Raises
    ------
    InputError, SettingsError, OutputError
    """
    from asp_cli.output import atomic_path, check_output_name, check_output_path, check_replaces_own_kind
    from asp_cli.predict import model as P
    from asp_cli.predict.observations import join_lengths

    check_flags(use_metadata=use_metadata, char_ngrams=char_ngrams)  # force: check_output_path
    for name, given in (("read", read), ("history_read", history_read)):
        expect_kind(given, ReadOptions, name)  # a dict was an AttributeError from inside
    seed, max_response_tokens = whole(seed), whole(max_response_tokens)  # NumPy's integers too: the card is JSON
    inputs = paths_of(inputs)
    history = paths_of(history)
    history_read.check_length_keys_used(history, "--history")
    if history and read.length_key is not None:
        raise SettingsError("--length-key names the length column of prompt files that carry their lengths; "
                            "with --history, name the history's column with --history-length-key")
    if output is not None:
        check_output_path(output, [*inputs, *history], force=force)
        check_output_name(output, (".skops",), writer="asp predictor fit", what="a skops model file")
        if force:  # not over a file that is no asp model (E101), as E85 and E94 for asp's Parquet files and presets
            from asp_cli.predict.model_file import not_a_model

            check_replaces_own_kind(Path(output), not_a_model, writer="asp predictor fit", kind="an asp model",
                                    only="an asp model")
    started = time.perf_counter()
    data = join_lengths(inputs, history, read, history_read) if history else read_observations(inputs, read)
    try:
        model = P.LengthPredictor(use_metadata=use_metadata, char_ngrams=char_ngrams, random_state=seed).fit(
            data.prompts, data.lengths, cap=max_response_tokens, tokenizer=read.tokenizer)
    except InputError as exc:  # "only 1 prompts have observed lengths": of which files
        raise InputError(f"{', '.join(p.name for p in [*inputs, *history])}: {exc}") from None
    warnings = [*data.warnings, *_training_warnings([*inputs, *history], data.lengths, max_response_tokens)]
    if not model.vocabulary_:
        warnings.append("no word occurs in enough prompts to learn from (text without spaces between words, such as "
                        "Chinese or Japanese, reads as one word a prompt): the words add nothing to the prediction; "
                        + ("the character n-grams carry the text" if char_ngrams else "pass --char-ngrams"))
    if model.unclamped_log_spread_ is not None:
        warnings.append(f"a prompt's samples differ by {model.unclamped_log_spread_:.2f} in log length (the pooled "
                        f"standard deviation; 0.3 is typical), more than a model file holds: the model uses "
                        f"{P.MAX_LOG_SPREAD:g}, and predicts extreme group maxima; check the length column, or leave "
                        "out failed or runaway generations")
    result = FitResult(model, model.card(), data.skipped_rows, time.perf_counter() - started, warnings=warnings)
    if output is not None:
        with atomic_path(Path(output), replace=force) as tmp:
            P.save(model, tmp)
        result.output = Path(output)
    return result


def _training_warnings(files: list[Path], lengths: Any, cap: int | None) -> list[str]:
    """What is legal in training data but probably not meant: a file given twice, lengths that say nothing."""
    warnings = _same_bytes(files)
    tokens = lengths[C.RESPONSE_TOKENS]
    if tokens.n_unique() == 1:
        warnings.append(f"every sample is {tokens[0]:,} tokens long: the model learns no ranking and predicts that "
                        "length for every prompt")
    elif cap is not None and bool((tokens >= cap).all()):
        warnings.append(f"every sample reached --max-response-tokens ({cap:,}): the model learns only that the "
                        "lengths are above it; raise the cap to the one the lengths were generated with")
    zeros = int((tokens == 0).sum())
    if zeros and 10 * zeros > tokens.len() and tokens.n_unique() > 1:
        # Every length 0 is refused (E82); a share of them is a column that is something else for some rows, or
        # failed generations, and pulled the model down (a hostile-input round: half the samples 0, median 44).
        warnings.append(f"{zeros:,} of the {tokens.len():,} samples are 0 tokens long, which a generation seldom is: "
                        "failed requests, or a column that is not the response length for those rows? They pull "
                        "every prediction down; leave them out of the training file")
    return warnings


def evaluate_predictor(
    inputs: Sequence[Path],
    *,
    model: Path | None = None,
    history: Sequence[Path] = (),
    lengths: Sequence[Path] = (),
    read: ReadOptions = OBSERVATIONS_READ,
    history_read: ReadOptions = DEFAULT_READ,
    lengths_read: ReadOptions = ReadOptions(length_id_flag="--lengths-id-key", length_flag="--lengths-length-key"),
    max_response_tokens: int | None = None,
) -> dict[str, Any]:
    """Score a model file (the bundled one when None) on prompts with observed lengths.

    This is what `asp predictor eval` runs: Kendall tau, Spearman, tail recall, log error and calibration,
    overall and per data source (`asp_cli.predict.evaluate`). Without ``lengths``, ``inputs`` hold prompts with
    the lengths to score against; with it, ``inputs`` are prompt files and ``lengths`` the observed lengths (as
    `asp observe` or a rollout log has them), joined by prompt id. ``history`` folds earlier epochs' lengths
    into the prediction as `asp schedule --history` does, read with ``history_read``.
    """
    from asp_cli.predict.evaluate import evaluate
    from asp_cli.predict.observations import join_lengths
    from asp_cli.reading import read_lengths

    max_response_tokens = whole(max_response_tokens)  # NumPy's integers too
    for name, given in (("read", read), ("history_read", history_read), ("lengths_read", lengths_read)):
        expect_kind(given, ReadOptions, name)  # a dict was an AttributeError from inside
    check_count("--max-response-tokens", max_response_tokens, minimum=1, optional=True)
    history, lengths = paths_of(history), paths_of(lengths)  # one name, not its characters (a hostile-input round)
    history_read.check_length_keys_used(history, "--history")
    lengths_read.check_length_keys_used(lengths, "--lengths")
    if lengths and read.length_key is not None:
        raise SettingsError("--length-key names the length column of prompt files that carry their lengths; "
                            "with --lengths, name that file's column with --lengths-length-key")
    inputs = paths_of(inputs)
    data = join_lengths(inputs, lengths, read, lengths_read) if lengths else read_observations(inputs, read)
    past, read_report = read_lengths(paths_of(history), history_read) if history else (None, None)
    result = evaluate(data.prompts, data.lengths, predictor=model, history=past,
                      max_response_tokens=max_response_tokens, tokenizer=read.tokenizer)
    result["model"] = str(model) if model is not None else "default"
    from asp_cli.reading.history_ids import unmatched_warnings

    from asp_cli.predict.prediction import lost_sources_warning

    # A history id of a prompt without an observed length is a prompt still: said as unscored, not as no prompt.
    unscored = data.unobserved_ids if data.unobserved_ids is not None else pl.Series(C.PROMPT_ID, [], pl.String)
    result["warnings"] = ((read_report.notes if read_report else []) + _skipped(data.skipped_rows) + data.warnings
                          + _same_bytes([*inputs, *lengths])  # counted twice, said as fit says it (a hostile round)
                          + unmatched_warnings(pl.concat([data.prompts[C.PROMPT_ID], unscored]), past)
                          + _unscored_history(unscored, past, lengths)
                          + _history_of_the_answers(data.lengths, past)
                          + lost_sources_warning(model, data.prompts[C.DATA_SOURCE]))
    return result


def _unscored_history(unscored: pl.Series, past: pl.DataFrame | None, lengths: list[Path]) -> list[str]:
    """History ids of prompts that have no observed length to score: they change no score (a hostile-input round
    was told they were not among the prompts, where the prompt file held them)."""
    if past is None or not unscored.len():
        return []
    ids = past[C.PROMPT_ID].unique()
    idle = int(ids.is_in(unscored.implode()).sum())
    if not idle:
        return []
    names = ", ".join(p.name for p in lengths)
    return [f"{idle:,} of the {ids.len():,} prompt ids in --history are prompts with no observed length in {names}, "
            "so nothing of theirs is scored (their history changes no score)"]


def _history_of_the_answers(scored: pl.DataFrame, past: pl.DataFrame | None) -> list[str]:
    """The history holding the very lengths being scored (the same samples of the same prompts: the answer file
    given again as --history, or a history observed from it): the prediction is scored against lengths it was
    given, and every figure flatters it (a hostile-input round: tau 0.54 became 0.75 without a word)."""
    if past is None or not past.height or not scored.height:
        return []
    keys = [C.PROMPT_ID, C.RESPONSE_TOKENS]
    counts = [frame.group_by(keys).len() for frame in (scored.select(keys), past.select(keys))]
    shared = counts[0].join(counts[1], on=keys).select(pl.min_horizontal("len", "len_right").sum()).item()
    # Lengths of a few hundred tokens repeat by chance across epochs; most of the answers repeated is no chance.
    if not shared or 2 * shared < scored.height:
        return []
    return [f"--history holds {shared:,} of the {scored.height:,} lengths being scored (the same lengths of the same "
            "prompts): the prediction is scored against answers it was given, so every figure flatters it; give a "
            "history of earlier rollouts only (another epoch's log), or score without --history"]


def _same_bytes(files: list[Path]) -> list[str]:
    """A file given twice, under another name or as a copy: its samples count twice (`fit` and `eval`)."""
    from asp_cli.fingerprint import file_fingerprint

    warnings = []
    seen: dict[str, Path] = {}
    for path in files:
        print_ = file_fingerprint([path])
        if print_ in seen:
            warnings.append(f"{path} has the same bytes as {seen[print_]}: its samples are counted twice; give each "
                            "file once")
        seen.setdefault(print_, path)
    return warnings


def _skipped(count: int, examples: Sequence[str] = ()) -> list[str]:
    """The rows `--on-bad-row skip` left out, said (asp predictor predict and eval wrote their results without a
    word of the lines they skipped: a hostile-input audit)."""
    if not count:
        return []
    shown = f", e.g. {'; '.join(examples[:3])}" if examples else ""
    return [f"skipped {count:,} bad row{'' if count == 1 else 's'} (--on-bad-row skip){shown}"]


@dataclass
class PredictResult:
    """What `predict_file` made: one row per prompt, and how the predictions were made."""

    table: pl.DataFrame
    info: PredictionInfo
    output: Path | None = None
    warnings: list[str] = field(default_factory=list)


def predict_file(
    inputs: Sequence[Path],
    output: Path | None = None,
    *,
    model: Path | None = None,
    history: Sequence[Path] = (),
    read: ReadOptions = DEFAULT_READ,
    samples_per_prompt: int = 8,
    max_response_tokens: int = 8192,
    plan_with: str = "max",
    force: bool = False,
) -> PredictResult:
    """Per-prompt length predictions of prompt files, as `asp schedule --predictions` takes them.

    This is what `asp predictor predict` runs. The table holds ``prompt_id``, ``prompt_tokens``,
    ``predicted_max_tokens``, ``predicted_mean_tokens``, ``predicted_tokens``, ``prediction_source`` and one
    column per `QUANTILE_COLUMNS` entry; it is written as Parquet when ``output`` is given. The model runs
    once.

    Raises
    ------
    InputError, SettingsError, PredictorError, OutputError
    """
    from asp_cli.fingerprint import file_fingerprint
    from asp_cli.output import atomic_path, check_output_path, check_parquet_name
    from asp_cli.predict.prediction import _check_settings
    from asp_cli.predict.streamed import read_and_predict
    from asp_cli.reading import read_lengths
    from asp_cli.reading.exported import with_export_id_key

    samples_per_prompt, max_response_tokens = whole(samples_per_prompt), whole(max_response_tokens)  # NumPy's too
    expect_kind(read, ReadOptions, "read")  # a dict was an AttributeError from inside
    _check_settings(samples_per_prompt, max_response_tokens, plan_with)
    model = one_path(model, "model") if model is not None else None
    inputs = paths_of(inputs)
    history = paths_of(history)
    read.check_length_keys_used(history, "--history")
    if output is not None:
        check_output_path(output, [*inputs, *history, *([Path(model)] if model else [])], force=force)
        check_parquet_name(output, writer="asp predictor predict")
    past, history_report = read_lengths(history, read) if history else (None, None)
    read = with_export_id_key(read, inputs)  # an `asp export`: its schedule's ids, which `asp schedule` reads
    # Read and predicted a batch at a time (the model is row-wise); the history correction runs once at the end.
    prompts, frame, info, report, distribution = read_and_predict(
        inputs, read, predictor=model, history=past,
        history_fingerprint=file_fingerprint(history) if history else None, samples_per_prompt=samples_per_prompt,
        max_response_tokens=max_response_tokens, plan_with=plan_with, with_distribution=True)
    table = prediction_table(prompts[C.PROMPT_ID], frame, distribution[0], distribution[1], max_response_tokens)
    from asp_cli.reading.history_ids import row_numbered, unmatched_warnings

    from asp_cli.predict.prediction import lost_sources_warning

    unnamed, id_hint = row_numbered(report)
    result = PredictResult(table, info, warnings=(history_report.notes if history_report else [])
                           + _skipped(report.skipped_rows, report.skipped_examples)
                           + unmatched_warnings(prompts[C.PROMPT_ID], past, unnamed=unnamed, id_hint=id_hint)
                           + lost_sources_warning(model, prompts[C.DATA_SOURCE],
                                                  table[C.PREDICTION_SOURCE] == "model"))
    if output is not None:
        with atomic_path(Path(output), replace=force) as tmp:
            table.write_parquet(tmp, compression="zstd", statistics=False)
        result.output = Path(output)
    return result


def prediction_table(prompt_ids: pl.Series, lengths: pl.DataFrame, mu, sigma, max_response_tokens: int) -> pl.DataFrame:
    """The table `predict_file` writes: ids, a `lengths_from_distribution` frame, and the quantile columns.

    Row-wise, so the table of a shard of the prompts is that shard's rows of the whole table (`asp_cli.predict.on_ray`).
    """
    from asp_cli.predict.prediction import quantile_tokens

    quantiles = {name: pl.Series(quantile_tokens(mu, sigma, q, max_response_tokens)) for name, q in QUANTILE_COLUMNS}
    return pl.concat([prompt_ids.alias(C.PROMPT_ID).to_frame(), lengths], how="horizontal").with_columns(**quantiles)


def predictor_info(model: Path | None = None) -> dict[str, Any]:
    """A model file's card (the bundled model when None), with its path and fingerprint.

    This is what `asp predictor info` runs; the file is loaded (and refused when unsafe or newer) like every
    other command loads it.
    """
    from asp_cli.fingerprint import file_fingerprint
    from asp_cli.predict.model import load
    from asp_cli.predict.prediction import DEFAULT_MODEL

    path = one_path(model, "model") if model is not None else DEFAULT_MODEL
    card = load(path).card()
    card["file"] = str(path)
    card["file_fingerprint"] = file_fingerprint(path)
    return card
