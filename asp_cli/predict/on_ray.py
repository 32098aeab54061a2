"""The row-wise work on Ray: read and predict prompt files as a Ray Data pipeline, one predictions file per input.

`predict_with_ray` is what `asp predictor predict --ray` runs. The inputs become a Ray dataset of shards (one
per input file, in the order given); an actor pool maps them, each actor holding the model, which the driver
loads and checks once and ships once through Ray's object store (`ray.put`). Each shard is read with the
streamed reader (`asp_cli.reading.stream`: bounded memory per worker, whatever the file's size) and predicted
batch by batch, and its predictions are written as ``predictions-NNNNN.parquet`` (NNNNN: the input's place in
the list), exactly the rows `predict_file` writes for that file's prompts. `asp schedule INPUTS --predictions
DIR/predictions-*.parquet` plans from them.

Ray is an optional extra (``pip install 'asp-cli[ray]'``), imported only here and only when called. The
prediction files are written by the workers: on a cluster, inputs and the output folder must be on a file
system every node mounts at the same path (docs/benchmarks.md, "The row-wise work on Ray").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from asp_cli import columns as C
from asp_cli.errors import AspError, InputError, SettingsError
from asp_cli.predict.prediction import PredictionInfo
from asp_cli.reading.options import DEFAULT_READ, ReadOptions, paths_of
from asp_cli.reading.prompts import duplicate_id_error

MISSING_RAY = ("--ray needs Ray Data, which is not installed here; pip install 'asp-cli[ray]' "
               "(on every node of the cluster), or drop --ray")
SHARD_NAME = "predictions-{:05d}.parquet"
_ROW_IDS = "(row number)"


@dataclass
class RayPredictResult:
    """What `predict_with_ray` made: one predictions file per input, and how the predictions were made."""

    files: list[Path]
    prompts: int
    skipped_rows: int
    info: PredictionInfo
    shards: list[dict[str, Any]] = field(default_factory=list)


def import_ray():
    """``ray`` and ``ray.data``, or a `SettingsError` with the install hint."""
    try:
        import ray
        import ray.data  # noqa: F401 - the extra's own check: Ray without its data library is not enough
    except ImportError:
        raise SettingsError(MISSING_RAY) from None
    return ray


def predict_with_ray(
    inputs: Sequence[Path],
    output_dir: Path,
    *,
    model: Path | None = None,
    read: ReadOptions = DEFAULT_READ,
    samples_per_prompt: int = 8,
    max_response_tokens: int = 8192,
    plan_with: str = "max",
    workers: int | None = None,
    address: str | None = None,
    force: bool = False,
) -> RayPredictResult:
    """Predict every input on Ray, writing ``output_dir/predictions-NNNNN.parquet`` for input NNNNN.

    Parameters
    ----------
    inputs, model, read, samples_per_prompt, max_response_tokens, plan_with
        As for `predict_file` (no history: its correction is pooled over every prompt; give the history to
        `asp predictor predict` without Ray).
    output_dir
        The folder of the predictions files (created if missing); on a cluster, one every node can write.
    workers
        The actor pool's size: models in memory at once (default: one per input, at most the cluster's CPUs).
    address
        The Ray cluster to join (``ray.init(address=...)``; "auto" for the one this node belongs to); None
        uses the running Ray, or starts a local one.

    Raises
    ------
    SettingsError
        Ray is not installed, or bad settings.
    InputError, PredictorError, OutputError
        As `predict_file`; an input's error names its file and line as there.
    """
    from asp_cli.fingerprint import file_fingerprint
    from asp_cli.output import check_output_path
    from asp_cli.predict.prediction import DEFAULT_MODEL, _check_settings, load_predictor

    _check_settings(samples_per_prompt, max_response_tokens, plan_with)
    inputs = paths_of(inputs)
    if not inputs:
        raise InputError("no input files given; name at least one prompt file")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SettingsError(f"--workers must be a whole number of at least 1 (got {workers!r})")
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise SettingsError(f"{output_dir} is a file; with --ray, -o names a folder for the predictions files")
    files = [output_dir / SHARD_NAME.format(i) for i in range(len(inputs))]
    # Ray and the model first: a run refused for either made the output folder and left it empty.
    ray = import_ray()
    loaded = load_predictor(model)  # checked here once (trusted types only), then shipped to the workers
    output_dir.mkdir(parents=True, exist_ok=True)
    for path in files:
        check_output_path(path, [*inputs, *([Path(model)] if model else [])], force=force)
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     **({} if address else {"num_cpus": workers}))
        except ConnectionError as exc:
            reason = (str(exc).strip().splitlines() or ["cannot connect"])[0][:160]
            raise SettingsError(f"--ray-address {address}: no Ray cluster found there ({reason}); start one "
                                "(ray start --head) or drop --ray-address to run on a local Ray") from None
    _quiet(ray)
    model_ref = ray.put(loaded)
    settings = {"read": read, "samples_per_prompt": samples_per_prompt, "max_response_tokens": max_response_tokens,
                "plan_with": plan_with, "predictor": Path(model) if model is not None else None, "force": force}
    shards = ray.data.from_items(
        [{"shard": i, "path": str(p.resolve()), "output": str(f.resolve())} for i, (p, f) in enumerate(zip(inputs, files))],
        override_num_blocks=len(inputs))
    cpus = int(ray.cluster_resources().get("CPU", 1))
    pool = min(workers or len(inputs), len(inputs), max(cpus, 1))
    done = shards.map_batches(
        _ShardPredictor, batch_size=1, batch_format="pyarrow", compute=ray.data.ActorPoolStrategy(size=pool), num_cpus=1,
        fn_constructor_kwargs={"model": [model_ref], "settings": settings},
    ).take_all()
    summaries = sorted(done, key=lambda row: row["shard"])
    for summary in summaries:
        if summary["error"]:
            raise _error(summary)
    _number_rows(summaries, files)
    _check_unique(files, inputs)
    path = Path(model) if model is not None else DEFAULT_MODEL
    info = PredictionInfo(
        predictor_name="default" if model is None else path.name,
        predictor_fingerprint=file_fingerprint(path),
        prompts_from_model=sum(s["prompts"] for s in summaries),
        details={"samples_per_prompt": int(samples_per_prompt), "plan_with": plan_with,
                 "log_spread": round(float(loaded.log_spread_), 4), "ray_workers": pool},
    )
    return RayPredictResult(files=files, prompts=info.prompts_from_model,
                            skipped_rows=sum(s["skipped"] for s in summaries), info=info,
                            shards=[{k: s[k] for k in ("shard", "path", "output", "prompts", "skipped")}
                                    for s in summaries])


def _quiet(ray) -> None:
    """Ray Data's progress lines would drown asp's own messages on stderr: keep its warnings only."""
    import logging

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    for name in ("ray.data", "ray"):
        logging.getLogger(name).setLevel(logging.WARNING)


def predict_shard(path: Path, output: Path, model, *, read: ReadOptions, samples_per_prompt: int,
                  max_response_tokens: int, plan_with: str, predictor: Path | None = None,
                  force: bool = False) -> dict[str, Any]:
    """Read one input a batch at a time, predict it, write its predictions: what each Ray worker runs.

    Without an id column the ids are row numbers, which count from the first row of all inputs: they are
    written from 0 here and shifted once every shard's rows are known (`_number_rows`).
    """
    from asp_cli.output import atomic_path
    from asp_cli.predict.commands import prediction_table
    from asp_cli.predict.prediction import check_finite, lengths_frame
    from asp_cli.reading.stream import read_prompts_streamed

    def keep(batch: pl.DataFrame) -> pl.DataFrame:
        mu, sigma, tokens = model.predict_log(batch, tokenizer=read.tokenizer)
        check_finite(mu, sigma, batch[C.PROMPT_ID], predictor)
        lengths = lengths_frame(mu, sigma, tokens, _zeros(len(mu)), samples_per_prompt=samples_per_prompt,
                                max_response_tokens=max_response_tokens, plan_with=plan_with)
        return prediction_table(batch[C.PROMPT_ID], lengths, mu, sigma, max_response_tokens).drop(C.PROMPT_ID)

    prompts, report = read_prompts_streamed([path], read, keep=keep)
    table = prompts.drop(C.ROW, C.DATA_SOURCE, C.DIFFICULTY)
    with atomic_path(output, replace=force) as tmp:
        table.write_parquet(tmp, compression="zstd", statistics=False)
    return {"prompts": prompts.height, "skipped": report.skipped_rows, "rows": report.file_rows[str(path)],
            "row_ids": report.columns_used.get(str(path), {}).get("id") == _ROW_IDS}


def _zeros(n: int):
    import numpy as np

    return np.zeros(n, dtype=np.int64)


class _ShardPredictor:
    """A Ray Data actor: the model, fetched once from the object store, applied to one shard per call."""

    def __init__(self, model: list, settings: dict[str, Any]) -> None:
        import ray

        self.model = ray.get(model[0])
        self.settings = settings

    def __call__(self, batch):
        import pyarrow as pa

        rows = batch.to_pylist()
        out = []
        for row in rows:
            summary = {"shard": row["shard"], "path": row["path"], "output": row["output"], "prompts": 0,
                       "skipped": 0, "rows": 0, "row_ids": False, "error": "", "error_class": ""}
            try:
                summary.update(predict_shard(Path(row["path"]), Path(row["output"]), self.model, **self.settings))
            except AspError as exc:  # handed back to the driver, which raises it as the command's error
                summary.update(error=str(exc), error_class=type(exc).__name__)
            out.append(summary)
        return pa.Table.from_pylist(out)


def _error(summary: dict[str, Any]) -> AspError:
    import asp_cli.errors as errors

    kind = getattr(errors, summary["error_class"], AspError)
    return kind(summary["error"]) if isinstance(kind, type) and issubclass(kind, AspError) else AspError(summary["error"])


def _number_rows(summaries: list[dict[str, Any]], files: list[Path]) -> None:
    """Shift the row-number ids of shards after the first by the rows of the shards before them."""
    from asp_cli.output import atomic_path

    offset = 0
    for summary, path in zip(summaries, files, strict=True):
        if summary["row_ids"] and offset:
            table = pl.read_parquet(path).with_columns(
                (pl.col(C.PROMPT_ID).cast(pl.Int64) + offset).cast(pl.String).alias(C.PROMPT_ID))
            with atomic_path(path, replace=True) as tmp:  # this run's own file, its ids shifted
                table.write_parquet(tmp, compression="zstd", statistics=False)
        offset += summary["rows"]


def _check_unique(files: list[Path], inputs: list[Path]) -> None:
    """Ids must be unique over all inputs, as `read_prompts` requires of one read."""
    ids = pl.concat([pl.read_parquet(f, columns=[C.PROMPT_ID]).with_columns(pl.lit(i, pl.UInt32).alias("f"))
                     for i, f in enumerate(files)])
    repeated = ids.filter(pl.col(C.PROMPT_ID).is_duplicated())
    if repeated.height:
        first = repeated[C.PROMPT_ID][0]
        where = sorted({str(inputs[i]) for i in repeated.filter(pl.col(C.PROMPT_ID) == first)["f"]})
        raise duplicate_id_error(first, ", ".join(where), repeated[C.PROMPT_ID].n_unique())
