"""The probe: a small, stratified set of prompts to generate once with the user's own policy before training.

The bundled model knows how *other* models answer; a few dozen generations of the user's policy reveal its
scale per source, and `--history` then corrects every prompt (`asp_cli.predict.history`). `probe` picks them:

- **over sources**: each ``data_source`` gets a share proportional to its size (largest remainders), but at
  least ``min_per_source`` prompts (all of a smaller source), because the correction is fitted per source;
- **over predicted length**: within a source, the prompts sorted by the model's predicted length (ties by
  id) are cut into as many equal-count strata as the source has probe prompts, and one prompt is drawn at
  random from each stratum, except the top one, which gives its longest-predicted prompt. So the predicted
  long tail (each source's longest prompt) is always in the probe, and the probe spans each source's whole
  range (stratified sampling: a lower-variance estimate of a source's mean residual than a simple random
  sample of the same size).

The draw is seeded (``numpy.random.default_rng([seed, source index])``, sources sorted by name, nulls first), so
the same inputs, settings and seed pick the same prompts. The output is the input's own rows, every column
kept, the id column under its own name (a ``prompt_id`` column is added when the input has none, holding the
row-number id that `asp schedule` uses), as JSON lines or Parquet by the output's name, or verl's
``RLHFDataset`` layout (`asp_cli.integrate.verl_layout.to_verl`, the same code as `asp export --format verl`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli import __version__
from asp_cli import columns as C
from asp_cli.errors import SettingsError, counted, expect_kind, named_in_python
from asp_cli.reading.options import DEFAULT_READ, ReadOptions, paths_of
from asp_cli.settings import MAX_SAMPLES_PER_PROMPT, check_count, whole, whole_fields

DEFAULT_FRACTION = 0.02
DEFAULT_MIN_PER_SOURCE = 4
FORMATS = ("jsonl", "parquet", "verl")
METADATA_KEY = b"asp.probe"
_MAX_SEED = 2**32 - 1


@named_in_python()
@dataclass(frozen=True)
class ProbeSettings:
    """How many prompts to probe and how to draw them; validated here, once.

    ``fraction`` of the prompts (default 0.02 when neither is given) or exactly ``prompts`` of them, at least
    ``min_per_source`` per data source, drawn with ``seed``.

    Raises
    ------
    SettingsError
        A fraction outside (0, 1], a count below 1, both given, a negative minimum or a bad seed.
    """

    fraction: float | None = None
    prompts: int | None = None
    min_per_source: int = DEFAULT_MIN_PER_SOURCE
    seed: int = 0

    def __post_init__(self) -> None:
        whole_fields(self, ("fraction", "prompts", "min_per_source", "seed"))  # NumPy's integers as ints
        if self.fraction is not None and self.prompts is not None:
            raise SettingsError("give --fraction or --prompts, not both")
        if self.fraction is not None:
            if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)) or not (
                    math.isfinite(self.fraction) and 0.0 < self.fraction <= 1.0):
                raise SettingsError(f"--fraction must be a share of the prompts in (0, 1], e.g. 0.02 (got {self.fraction!r})")
        check_count("--prompts", self.prompts, minimum=1, optional=True)
        check_count("--min-per-source", self.min_per_source, minimum=0)
        check_count("--seed", self.seed, minimum=0)
        if self.seed > _MAX_SEED:
            raise SettingsError(f"--seed must be a whole number from 0 to {_MAX_SEED} (got {self.seed!r})")

    def target(self, available: int) -> int:
        """The number of prompts asked for, out of ``available``.

        Raises
        ------
        SettingsError
            ``prompts`` above ``available``.
        """
        if self.prompts is not None:
            if self.prompts > available:
                raise SettingsError(f"--prompts {self.prompts} is more than the {available:,} prompts of the input; "
                                    f"give at most {available:,}, or --fraction")
            return self.prompts
        fraction = DEFAULT_FRACTION if self.fraction is None else float(self.fraction)
        return max(1, min(available, math.ceil(fraction * available - 1e-9)))


def allocate(sizes: np.ndarray, count: int, minimum: int) -> np.ndarray:
    """Probe prompts per source: proportional to ``sizes`` (largest remainders, ties to the earlier source), each
    at least ``min(minimum, size)`` and at most its size. The total is ``count``, or more when the minimums
    need more."""
    sizes = np.asarray(sizes, dtype=np.int64)
    floor = np.minimum(sizes, minimum)
    if floor.sum() >= count or sizes.sum() == 0:
        return floor
    share = count * sizes / sizes.sum()
    alloc = np.floor(share).astype(np.int64)
    order = np.lexsort((np.arange(sizes.size), -(share - alloc)))
    for i in order[: count - int(alloc.sum())]:
        alloc[i] += 1
    alloc = np.minimum(np.maximum(alloc, floor), sizes)
    # Raising the small sources to their minimum took prompts from nobody: give them back from the sources with
    # the most above their minimum; capping at a size left prompts over: give them to those with room.
    while alloc.sum() > count:
        spare = alloc - floor
        alloc[int(np.argmax(spare))] -= 1
    while alloc.sum() < count:
        room = np.where(alloc < sizes, share - alloc, -np.inf)
        alloc[int(np.argmax(room))] += 1
    return alloc


def choose(source_code: np.ndarray, predicted: np.ndarray, ids: Sequence[str], allocation: np.ndarray,
           seed: int) -> np.ndarray:
    """Positions of the probe: per source, one prompt from each of ``allocation[s]`` equal-count strata of
    ``predicted`` (ties by id), drawn at random except in the top stratum, which gives its longest-predicted
    prompt. Sorted ascending; deterministic for a seed."""
    ids = np.asarray(ids, dtype=object)
    picked = []
    for s, m in enumerate(allocation.tolist()):
        if m <= 0:
            continue
        members = np.flatnonzero(source_code == s)
        order = members[np.lexsort((ids[members].astype(str), predicted[members]))]
        rng = np.random.default_rng([seed, s])
        strata = np.array_split(order, m)
        for stratum in strata[:-1]:
            picked.append(int(stratum[rng.integers(0, stratum.size)]))
        picked.append(int(strata[-1][-1]))  # the top stratum gives its longest: the tail is always in
    return np.sort(np.asarray(picked, dtype=np.int64))


@dataclass
class ProbeResult:
    """What `probe` chose: the rows to generate, their prompt ids, counts for people and scripts, warnings."""

    frame: pl.DataFrame
    prompt_ids: list[str]
    output: Path | None
    format: str
    summary: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _output_format(output: Path | None, format: str | None) -> str:  # noqa: A002
    from asp_cli.integrate.export import check_output_suffix

    if format is not None and format not in FORMATS:
        raise SettingsError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})")
    if output is None:
        return format or "jsonl"
    suffix = output.suffix.lower()
    chosen = format or ("parquet" if suffix in (".parquet", ".pq") else "jsonl" if suffix in (".jsonl", ".ndjson")
                        else None)
    if chosen is None:
        raise SettingsError(f"{output}: a probe is written as JSON lines (.jsonl) or Parquet (.parquet), chosen by "
                            f"the name; name it probe.jsonl or probe.parquet")
    check_output_suffix(output, chosen, kind=METADATA_KEY)
    return chosen


def probe(
    inputs: Sequence[str | Path],
    output: str | Path | None = None,
    *,
    settings: ProbeSettings | None = None,
    predictor: Path | None = None,
    format: str | None = None,  # noqa: A002 - the CLI's word
    read: ReadOptions = DEFAULT_READ,
    samples_per_prompt: int = 8,
    force: bool = False,
) -> ProbeResult:
    """Pick the probe prompts of prompt files and write their rows; the Python twin of `asp probe`.

    Parameters
    ----------
    inputs
        Prompt files, as `asp schedule` reads them.
    output
        ``.jsonl`` or ``.parquet`` (by the name), or Parquet in verl's layout with ``format="verl"``; None only
        chooses.
    settings
        How many prompts, the per-source minimum and the seed (`ProbeSettings`).
    predictor
        The model whose predicted lengths stratify the draw; None for the bundled one.
    samples_per_prompt
        N of the training run, only for the cost in the summary (a probe of p prompts with one sample each costs
        p / (prompts x N) of one epoch's rollout).

    Raises
    ------
    InputError, SettingsError, PredictorError, OutputError
    """
    from asp_cli.integrate.dataset_rows import mixed_kinds_warning, read_rows, write_rows
    from asp_cli.reading.tables import SOURCE_JSON
    from asp_cli.integrate.verl_layout import generation_server_note, to_verl
    from asp_cli.output import check_output_kind, check_output_path
    from asp_cli.predict.prediction import predict_distribution
    from asp_cli.reading import ReadReport, read_prompts
    from asp_cli.reading.exported import refuse_exports_as_prompts

    settings = expect_kind(settings, ProbeSettings, "settings", "fraction=0.02", optional=True) or ProbeSettings()
    expect_kind(read, ReadOptions, "read")  # a dict was an AttributeError from inside
    samples_per_prompt = whole(samples_per_prompt)
    check_count("--samples-per-prompt", samples_per_prompt, minimum=1, maximum=MAX_SAMPLES_PER_PROMPT)
    inputs = paths_of(inputs)
    check_output_kind(output)  # 5 was a TypeError from pathlib
    out = Path(output) if output is not None else None
    fmt = _output_format(out, format)
    if out is not None:
        check_output_path(output, [*inputs, *([Path(predictor)] if predictor else [])], force=force)
    refuse_exports_as_prompts(inputs)  # a probe of asp's own output: its rows with asp's columns, written again (E102)
    prompts, report = read_prompts(inputs, read)
    count = settings.target(prompts.height)
    mu, _sigma, _tokens, _seen, _model, _fit = predict_distribution(prompts, predictor=predictor,
                                                                   tokenizer=read.tokenizer)
    sources = prompts[C.DATA_SOURCE].cast(pl.String)
    names = sources.unique().sort(nulls_last=False).to_list()
    lookup = {name: i for i, name in enumerate(names)}
    code = np.fromiter((lookup[v] for v in sources.to_list()), dtype=np.int64, count=prompts.height)
    sizes = np.bincount(code, minlength=len(names))
    allocation = allocate(sizes, count, settings.min_per_source)
    chosen = choose(code, mu, prompts[C.PROMPT_ID].to_list(), allocation, settings.seed)
    warnings: list[str] = []
    if int(allocation.sum()) > count:
        warnings.append(f"the per-source minimum ({settings.min_per_source}) over {len(names)} sources raised the "
                        f"probe from {count} to {int(allocation.sum())} prompts; lower --min-per-source to keep {count}")

    unprobed = [str(name) if name is not None else "(no source)" for name, k in zip(names, allocation, strict=True)
                if k == 0]
    if unprobed:
        warnings.append(f"{len(unprobed)} data sources get no probe prompt ({', '.join(unprobed[:3])}): their "
                        "lengths stay the model's guess; raise --prompts or --min-per-source")
    if report.skipped_rows:
        warnings.append(f"skipped {counted(report.skipped_rows, 'bad row')} (--on-bad-row skip), e.g. "
                        f"{'; '.join(report.skipped_examples[:3])}; they are not in the probe")
    picked = prompts[chosen]
    mixed: list[str] = []
    differing: list[str] = []
    # JSON lines keep each probed row as the input holds it; verl's layout reads the reader's tags (`read_rows`).
    raw = read_rows(inputs, on_bad_row=read.on_bad_row, report=ReadReport(), mixed=mixed,  # skipped: read_prompts's
                    sources=fmt == "jsonl", untag=fmt != "verl", differing=differing)
    if fmt != "jsonl":
        warnings.extend([*differing, *([mixed_kinds_warning(mixed)] if mixed else [])])
    own_columns = set(raw.columns)
    rows = raw.join(picked.select(pl.col(C.ROW).alias("\x00row"), pl.col(C.PROMPT_ID).alias("\x00id")),
                    on="\x00row", how="inner", maintain_order="right")
    no_id = any(used.get("id") == "(row number)" for used in report.columns_used.values())
    if no_id and C.PROMPT_ID not in rows.columns:
        rows = rows.with_columns(pl.col("\x00id").alias(C.PROMPT_ID))
        warnings.append("the input has no id column, so the probe adds `prompt_id` (the row-number id `asp schedule` "
                        "uses); keep it in the generation log so `asp observe` can match the samples")
    if fmt == "verl":
        # extra_info.prompt_id: asp's id of each probed prompt
        # The prompt column the reader took (as export takes the schedule's): a chat list under `question` was sent
        # as its JSON text, and one in every row refused (a hostile-input round).
        taken = read.prompt_key or next((u.get("prompt") for u in report.columns_used.values()
                                         if isinstance(u, dict) and u.get("prompt")), None)
        rows, notes = to_verl(rows, rows["\x00id"], where=", ".join(str(p) for p in inputs),
                              prompt_column=taken, source_column=read.source_key)
        warnings.extend([*notes, *filter(None, [generation_server_note(rows["prompt"])])])
    rows = rows.drop("\x00id")
    rows = rows.drop("\x00row")

    per_source = []
    for i, name in enumerate(names):
        members = code == i
        in_probe = chosen[code[chosen] == i]
        per_source.append({
            "data_source": name, "prompts": int(sizes[i]), "probe_prompts": int(allocation[i]),
            "predicted_tokens_range": [round(float(np.exp(mu[members].min())), 1),
                                       round(float(np.exp(mu[members].max())), 1)],
            "probe_predicted_tokens_range": ([round(float(np.exp(mu[in_probe].min())), 1),
                                              round(float(np.exp(mu[in_probe].max())), 1)] if in_probe.size else None),
        })
    share = chosen.size / prompts.height
    summary = {
        "prompts": prompts.height,
        "probe_prompts": int(chosen.size),
        "fraction": round(share, 6),
        "requested_prompts": count,
        "min_per_source": settings.min_per_source,
        "seed": settings.seed,
        "format": fmt,
        "sources": per_source,
        "samples_per_prompt": samples_per_prompt,
        "skipped_rows": report.skipped_rows,
        # One sample per probe prompt against N samples of every prompt in an epoch.
        "epoch_cost_per_probe_sample": round(share / samples_per_prompt, 6),
    }
    if out is not None:
        from asp_cli.fingerprint import file_fingerprint
        from asp_cli.integrate.dataset_rows import non_finite_notes

        if fmt == "jsonl":  # as `asp export --format jsonl` says it (the probe wrote them as null without a word)
            warnings.extend(non_finite_notes(rows))

        document = {"format": "asp.probe", "asp_version": __version__, "probe_format": fmt,
                    "settings": {"fraction": settings.fraction, "prompts": settings.prompts,
                                 "min_per_source": settings.min_per_source, "seed": settings.seed},
                    "inputs": [p.name for p in inputs], "input_fingerprint": file_fingerprint(inputs),
                    "probe_prompts": int(chosen.size)}
        write_rows(rows, out, "jsonl" if fmt == "jsonl" else "parquet", document, key=METADATA_KEY, replace=force,
                   added=[c for c in rows.columns if c not in own_columns], source=", ".join(p.name for p in inputs))
    return ProbeResult(frame=rows.drop(SOURCE_JSON, strict=False), prompt_ids=picked[C.PROMPT_ID].to_list(),
                       output=out, format=fmt,
                       summary=summary, warnings=warnings)
