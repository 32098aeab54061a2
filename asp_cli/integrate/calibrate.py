"""The Python twin of `asp calibrate`: fit the cost-model preset to a replay's timeline (or to a short probe
run of its own against the servers), write it as a preset JSON, and check it by simulating the same runs
again with the base and the calibrated preset (docs/replay.md, "Calibrate").

The estimator is `asp_cli.integrate.costfit.fit_timeline`; the file it writes is what
`asp_cli.costmodel.load_preset` reads, so ``asp schedule --preset`` and ``asp simulate --preset`` take it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from asp_cli.costmodel import DEFAULT_PRESET, PRESETS, HardwarePreset, load_preset, preset_from_document
from asp_cli.errors import CheckFailedError, InputError, ServerError, SettingsError, expect_kind
from asp_cli.integrate.costfit import Fit, fit_timeline, fit_train_steps, preset_document
from asp_cli.integrate.live import LiveSettings, Progress
from asp_cli.integrate.replay_plan import RequestPlan, simulate_plan
from asp_cli.integrate.timings import read_timeline, rollout_figures, write_timeline

PROBE_PROMPT_TOKENS = (128, 1024)  # two prompt lengths, so prefill and context cost separate
# The largest probe minibatch, well above the sequences an engine runs at once (vLLM's max_num_seqs defaults to 256
# or 1024), so a larger one measures nothing new. The plan holds about twice this many requests a server, each a
# connection while its minibatch runs: --probe-max-batch 9999999999 filled the memory before anything was sent.
MAX_PROBE_BATCH = 4096


@dataclass
class CalibrationReport:
    """What `calibrate` wrote and found."""

    preset: dict[str, Any]  # the JSON document written
    fit: Fit | None  # None where no timeline was fitted (--train-steps, --kv-cache-tokens, --max-num-seqs alone)
    document: dict[str, Any]  # the summary (for --json)


def calibrate(
    timeline: Path | None,
    output: Path,
    *,
    base: str | None = None,
    live: LiveSettings | None = None,
    probe_timeline: Path | None = None,
    probe_max_batch: int = 256,
    probe_response_tokens: int = 256,
    kv_cache_tokens: int | None = None,
    max_num_seqs: int | None = None,
    train_steps: Path | None = None,
    progress: Progress | None = None,
    force: bool = False,
    keep_worse: bool = False,
) -> CalibrationReport:
    """Fit a preset to measured timings and write it to ``output`` (atomically).

    Parameters
    ----------
    timeline
        A timeline written by ``asp replay -o``; or None with ``live`` to measure a probe run first.
    base
        The preset whose hardware and model figures the fit starts from and keeps (a name or a calibration
        file; default: the one the timeline's simulation used).
    probe_timeline
        Where to keep the probe run's timeline (optional).
    kv_cache_tokens, max_num_seqs
        Engine limits to write (default: what the servers reported and the timeline shows, else the base's).
    train_steps
        Measured trainer steps (columns ``tokens``, ``step_s``) to fit ``train_fixed_s`` and
        ``train_per_token_s``.
    force
        Replace existing outputs (``output``, ``probe_timeline``).
    keep_worse
        Write the preset even when it simulates every measured run worse than the base does (otherwise that is
        a `CheckFailedError` and nothing is written: a pipeline would go on with a worse cost model).

    Raises
    ------
    InputError, SettingsError, ServerError, OutputError
    CheckFailedError
        When the calibrated preset simulates every measured run worse than the base (without ``keep_worse``).
    """
    from asp_cli.output import write_text_atomic
    from asp_cli.settings import check_count, check_flags

    check_flags(force=force, keep_worse=keep_worse)
    expect_kind(live, LiveSettings, "live", "servers=[URL, ...]", optional=True)  # a dict: an AttributeError
    if force:
        _check_replaces_a_preset(Path(output), "asp calibrate")
    # Checked here, not in the preset they end up in: --max-num-seqs 99999999999999 was refused as a bad field of
    # "the calibration file", which the user never wrote.
    check_count("--kv-cache-tokens", kv_cache_tokens, minimum=1, optional=True)
    check_count("--max-num-seqs", max_num_seqs, minimum=1, optional=True)
    if timeline is None and live is None and (train_steps is not None or kv_cache_tokens or max_num_seqs):
        return _calibrate_offline(train_steps, output, base=base, kv_cache_tokens=kv_cache_tokens,
                                  max_num_seqs=max_num_seqs, force=force)
    if (timeline is None) == (live is None):
        raise SettingsError("give a TIMELINE from asp replay, or --servers to measure a probe run"
                            + (", not both" if timeline is not None else "")
                            + ("" if timeline is not None else " (or --train-steps alone to fit the trainer only, "
                               "--kv-cache-tokens and --max-num-seqs alone to give the engine's limits)"))
    if live is not None:
        frame, metadata = _probe(live, base or DEFAULT_PRESET, probe_max_batch, probe_response_tokens, progress)
        if probe_timeline is not None:
            write_timeline(frame, metadata, probe_timeline, replace=force)
        source = "a probe run of " + ", ".join(live.servers)
    else:
        read = read_timeline(Path(timeline))  # type: ignore[arg-type]
        frame, metadata = read.frame, read.metadata
        source = str(timeline)
    base_name = base or _recorded_base(metadata, source)
    base_preset, base_document = _base(base_name)
    try:
        fit = fit_timeline(frame, base_preset)
    except InputError as exc:  # "the timeline has ...": named, as every input error names its file
        raise InputError(f"{source}: {exc}") from None
    # Each checked where the timeline is read (`timings.read_timeline`): null or a whole number; 0 said nothing.
    reported = [s["kv_cache_tokens"] for s in metadata.get("servers") or [] if s.get("kv_cache_tokens")]
    capacity = kv_cache_tokens or (min(reported) if reported else None)
    train = None
    if train_steps is not None:
        train = fit_train_steps(_train_steps_table(train_steps), str(train_steps))
    preset = preset_document(
        base_preset, base_document, fit, kv_cache_tokens=capacity, max_num_seqs=max_num_seqs, train=train,
        name=f"{base_preset.name}+calibrated",
        description=(f"calibrated by asp calibrate from {source} ({fit.decode_requests} requests, decode step "
                     f"error {fit.decode_rel_rmse:.1%} RMS)"))
    # Checked as `--preset` will read it before it is written: a fit that makes no valid preset (an option that
    # leaves no KV cache, a timeline's figures out of range) writes nothing.
    calibrated = preset_from_document(preset, f"the calibrated preset (not written to {output})")
    check = _check(frame, metadata, base_preset, calibrated)
    if metadata.get("complete") is False:
        # An arrangement replayed whole before the stop is checked as any other (it said "no arrangement" before).
        whole = [r["arrangement"] for r in check]
        fit.notes.append(f"the timeline is of an interrupted replay ({frame.height:,} requests measured before it "
                         "stopped): the fit uses them, but " + (
                             f"only the arrangement(s) replayed whole before it ({', '.join(whole)}) are checked"
                             if whole else "no arrangement can be checked whole"))
    document = {
        "output": str(output),
        "source": source,
        "base": base_preset.name,
        "fit": fit.to_dict(),
        "parameters": _parameters(base_preset, calibrated, fit),
        "kv_capacity_tokens": {"value": calibrated.kv_capacity_tokens, "source": "given" if kv_cache_tokens else (
            "reported by the servers" if reported else "base")},
        "max_num_seqs": {"value": calibrated.max_num_seqs, "source": "given" if max_num_seqs else (
            "observed" if fit.max_num_seqs else "base")},
        "train": None if train is None else {"train_fixed_s": calibrated.train_fixed_s,
                                             "train_per_token_s": calibrated.train_per_token_s},
        "check": check,
    }
    worse = [r for r in document["check"] if r["base_error"] is not None
             and abs(r["calibrated_error"]) > abs(r["base_error"]) + WORSE_MARGIN]
    if worse and len(worse) == len(document["check"]):
        errors = "; ".join(f"{r['arrangement']}: {r['calibrated_error']:+.1%} calibrated against {r['base_error']:+.1%} "
                           "with the base" for r in worse[:3])
        if not keep_worse:
            raise CheckFailedError(
                f"{output}: not written: the calibrated preset simulates every measured run worse than its base "
                f"{base_preset.name} does ({errors}); keep --preset {base_name}, replay again on idle servers "
                "(streaming, larger minibatches) for a cleaner fit, or pass --keep-worse to write it anyway")
        fit.notes.append("the calibrated preset predicts these runs worse than the base one; keep the base preset "
                         "until a cleaner replay (idle servers, streaming, larger minibatches) fits better")
        document["fit"] = fit.to_dict()
    write_text_atomic(output, json.dumps(preset, indent=2, sort_keys=True) + "\n", replace=force)
    return CalibrationReport(preset, fit, document)


def _calibrate_offline(train_steps: Path | None, output: Path, *, base: str | None, kv_cache_tokens: int | None,
                       max_num_seqs: int | None, force: bool) -> CalibrationReport:
    """The base preset with what was measured without servers: the trainer's cost fitted to measured steps, and the
    engine's limits as given (its log's KV cache size, its max_num_seqs); its decoding kept. A MindSpeed newcomer had
    step timings but no servers to replay on (a preset written by hand worked); another gave the KV cache of their
    vLLM (gpu_memory_utilization 0.4 beside the trainer) with --train-steps, and it was dropped without a word."""
    from asp_cli.output import write_text_atomic

    base_preset, base_document = _base(base or DEFAULT_PRESET)
    preset = dict(base_document)
    if train_steps is not None:
        fixed, per_token = fit_train_steps(_train_steps_table(train_steps), str(train_steps))
        preset.update(train_fixed_s=max(fixed, 0.0), train_per_token_s=max(per_token, 0.0))
    if kv_cache_tokens:  # the memory that holds that many tokens beside the weights, as a fitted preset keeps it
        preset["hbm_bytes"] = ((kv_cache_tokens + 0.5) * base_preset.kv_bytes_per_token + base_preset.weights_bytes
                               + base_preset.activation_reserve_bytes) / base_preset.gpu_memory_utilization
    if max_num_seqs:
        preset["max_num_seqs"] = int(max_num_seqs)
    given = [what for what, there in (("trainer", train_steps is not None), ("engine", kv_cache_tokens or max_num_seqs))
             if there]
    name = base_preset.name
    for what in given:  # each part once, however often a preset is calibrated again from its file
        name = name if what in name.split("+")[1:] else f"{name}+{what}"
    source = str(train_steps) if train_steps is not None else "the engine limits given"
    limits = [what for what, value in (("KV cache", kv_cache_tokens), ("max_num_seqs", max_num_seqs)) if value]
    said = ([f"the trainer fitted by asp calibrate to {Path(train_steps).name}"] if train_steps is not None else []) + (
        [f"engine limits given to asp calibrate ({', '.join(limits)})"] if limits else [])
    preset.update(name=name, description=f"{'; '.join(said)}; decoding as {base_preset.name}")
    calibrated = preset_from_document(preset, f"the calibrated preset (not written to {output})")
    fields = (["train_fixed_s", "train_per_token_s"] if train_steps is not None else []) + (
        ["kv_capacity_tokens"] if kv_cache_tokens else []) + (["max_num_seqs"] if max_num_seqs else [])
    document = {
        "output": str(output), "source": source, "base": base_preset.name, "fit": None,
        "parameters": [{"parameter": name, "base": getattr(base_preset, name), "calibrated": getattr(calibrated, name)}
                       for name in fields],
        "train": None if train_steps is None else {"train_fixed_s": calibrated.train_fixed_s,
                                                   "train_per_token_s": calibrated.train_per_token_s},
        "kv_capacity_tokens": {"value": calibrated.kv_capacity_tokens, "source": "given" if kv_cache_tokens else "base"},
        "max_num_seqs": {"value": calibrated.max_num_seqs, "source": "given" if max_num_seqs else "base"},
        "check": [],
    }
    write_text_atomic(output, json.dumps(preset, indent=2, sort_keys=True) + "\n", replace=force)
    return CalibrationReport(preset, None, document)


# How much further off than the base a calibrated preset may simulate a measured run before it counts as worse
# (relative wall-time error, absolute): a refit on its own output, or a base that already fits, differs by noise.
WORSE_MARGIN = 0.01


def _recorded_base(metadata: dict[str, Any], source: str) -> str:
    """The preset the replay simulated with (the default where the timeline records none); one this machine cannot
    load is refused, naming ``--base``, as a schedule's recorded preset that no longer loads is: the fit fell back
    to the default's hardware without a word (a hostile-input round)."""
    recorded = [c for c in (metadata.get("preset_source"), metadata.get("preset")) if c is not None]
    for candidate in recorded:  # text, each (`timings.read_timeline`)
        if candidate in PRESETS or _is_file(candidate):
            return candidate
    if not recorded:
        return DEFAULT_PRESET
    names = " (from " + repr(recorded[0]) + ")" if len(recorded) > 1 else ""
    raise SettingsError(f"{source}: the replay simulated with preset {recorded[-1]!r}{names}, which is neither a "
                        "preset of this asp nor a file here; pass --base with its calibration file, or the preset to "
                        f"fit from ({', '.join(PRESETS)})")


def _is_file(name: str) -> bool:
    """Whether ``name`` is a file here (a name too long for the file system is none)."""
    try:
        return Path(name).is_file()
    except OSError:
        return False


# The most bytes an asp preset file holds (one is about 1 kB): a larger file is something else, and is not read.
_PRESET_MAX_BYTES = 1 << 20


def _check_replaces_a_preset(output: Path, writer: str) -> None:
    """Refuse ``--force`` over an existing file that is not an asp cost preset (a JSON object of preset fields and
    ``base``; `asp_cli.output.check_replaces_own_kind`, E94)."""
    from asp_cli.output import check_replaces_own_kind

    def what_it_is(path: Path) -> str | None:
        size = path.stat().st_size
        if size > _PRESET_MAX_BYTES:
            return f"{size:,} bytes, where a preset is about a kilobyte"
        return _not_a_preset(path.read_bytes(), str(path))

    check_replaces_own_kind(output, what_it_is, writer=writer, kind="an asp cost preset", only="a preset")


def _not_a_preset(raw: bytes, where: str) -> str | None:
    """What a file's bytes are, where they are not an asp cost preset; None where they are one."""
    from asp_cli import limits
    from asp_cli.costmodel import HardwarePreset
    from asp_cli.errors import OutputError

    try:
        document = limits.loads(raw, where, OutputError)
    except OutputError:
        return "not JSON"
    if not isinstance(document, dict):
        return "a JSON value that is not an object"
    foreign = sorted(set(document) - {f.name for f in dataclasses.fields(HardwarePreset)} - {"base"})
    if not foreign:
        return None
    kind = "a Hugging Face tokenizer: " if {"model", "added_tokens"} <= set(document) else "a JSON object with "
    return f"{kind}key {foreign[0]!r}, which no preset has"


def _train_steps_table(path: Path) -> Any:
    """The --train-steps file's rows; a bad row's fix without `--on-bad-row`, which asp calibrate has not."""
    from asp_cli.reading import read_table
    from asp_cli.reading.tables import BAD_ROW_FIX

    try:
        return read_table(Path(path))
    except InputError as exc:
        raise InputError(str(exc).replace(BAD_ROW_FIX, "fix the row or drop it")) from None


def _base(name: str) -> tuple[HardwarePreset, dict[str, Any]]:
    """The base preset and the JSON fields the output starts from (a calibration file's own fields kept); its
    errors name --base (they named --preset, which asp calibrate has not)."""
    try:
        preset = load_preset(name)
    except (InputError, SettingsError) as exc:
        raise type(exc)(str(exc).replace("--preset", "--base")) from None
    if name in PRESETS:
        return preset, {"base": name}
    document = json.loads(Path(name).read_text(encoding="utf-8"))
    return preset, {"base": document.get("base", DEFAULT_PRESET), **{k: v for k, v in document.items() if k != "base"}}


def _parameters(base: HardwarePreset, calibrated: HardwarePreset, fit: Fit) -> list[dict[str, Any]]:
    rows = []
    for name, unit in (("step_overhead_s", "s"), ("weight_read_s", "s"), ("compute_s_per_token", "s/token"),
                       ("kv_s_per_token", "s/token")):
        rows.append({"parameter": name, "unit": unit, "base": getattr(base, name),
                     "calibrated": getattr(calibrated, name)})
    rows.append({"parameter": "prefill_s_per_token (measured)", "unit": "s/token", "base": base.compute_s_per_token,
                 "calibrated": fit.prefill_s_per_token})
    return rows


# --------------------------------------------------------------------------------------------------------
# The check: the same runs simulated again


def plans_from_timeline(frame: pl.DataFrame, metadata: dict[str, Any]) -> list[RequestPlan]:
    """Request plans rebuilt from a timeline's complete arrangements (every sample of every row measured)."""
    # Each entry and field checked where the timeline is read (`timings.read_timeline`); null is "not recorded".
    entries = {e.get("arrangement"): e for e in metadata.get("arrangements") or []}
    plans = []
    for name in frame.sort("run")["arrangement"].unique(maintain_order=True).to_list():
        part = frame.filter(pl.col("arrangement") == name).sort(["seq", "sample"])
        n = int(part["sample"].max()) + 1
        per_row = part.group_by("seq", maintain_order=True).agg(
            pl.len().alias("samples"), pl.col("instance").first(), pl.col("minibatch").first(),
            pl.col("epoch").first(), pl.col("prompt_id").first(), pl.col("planned_prompt_tokens").first(),
            pl.col("forced_tokens"))
        expected = entries.get(name, {}).get("requests")
        expected = per_row.height * n if expected is None else expected
        if (per_row["samples"] != n).any() or part.height != expected:
            continue  # an interrupted arrangement: its simulation would not be the same run
        ids = per_row["prompt_id"].to_list()
        order = {p: i for i, p in enumerate(dict.fromkeys(ids))}
        sim_frame = pl.DataFrame({
            "seq": np.arange(per_row.height, dtype=np.int64), "instance": per_row["instance"].cast(pl.Int32),
            "minibatch": per_row["minibatch"], "epoch": per_row["epoch"],
            "row": np.array([order[p] for p in ids], dtype=np.int64), "prompt_id": ids})
        plans.append(RequestPlan(
            name=name, dispatch=entries.get(name, {}).get("dispatch") or "planned", run=len(plans),
            seq=per_row["seq"].to_numpy(), epoch=per_row["epoch"].to_numpy(), prompt_id=ids,
            minibatch=per_row["minibatch"].to_numpy(), instance=per_row["instance"].to_numpy(),
            prompt_tokens=per_row["planned_prompt_tokens"].to_numpy().astype(np.int64),
            lengths=np.vstack(per_row["forced_tokens"].to_list()).astype(np.int64), prompts=None, frame=sim_frame))
    return plans


def _check(frame: pl.DataFrame, metadata: dict[str, Any], base: HardwarePreset,
           calibrated: HardwarePreset) -> list[dict[str, Any]]:
    """Measured wall time of every complete arrangement against the simulator's, with each preset."""
    engine = metadata.get("engine") or "blocking"
    limit = metadata.get("max_in_flight")
    k = int(metadata.get("instances") or int(frame["instance"].max()) + 1)
    rows = []
    for plan in plans_from_timeline(frame, metadata):
        part = frame.filter(pl.col("arrangement") == plan.name)
        measured = rollout_figures(part["send_s"].to_numpy(), part["finish_s"].to_numpy(),
                                   part["instance"].to_numpy())["wall_s"]
        row: dict[str, Any] = {"arrangement": plan.name, "measured_wall_s": measured}
        for label, preset in (("base", base), ("calibrated", calibrated)):
            sim = simulate_plan(plan, preset, engine=engine, instances=k, max_in_flight=limit, train_batch_size=1)
            wall = rollout_figures(sim.send_s, sim.finish_s, sim.instance)["wall_s"]
            row[f"{label}_wall_s"] = wall
            row[f"{label}_error"] = wall / measured - 1.0 if measured > 0 else None
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------------------
# A probe run of its own


def probe_plan(instances: int, *, max_batch: int, response_tokens: int, seed: int = 0) -> RequestPlan:
    """Blocking minibatches of 1, 2, 4, ... up to ``max_batch`` requests per instance, prompts of 128 and 1024
    tokens, lengths spread over [response_tokens/8, response_tokens] so the live count falls within each.

    Raises
    ------
    SettingsError
        For a batch outside 1..`MAX_PROBE_BATCH`, or a length below 2 or above 2,147,483,647.
    """
    from asp_cli.settings import check_count

    check_count("--probe-max-batch", max_batch, minimum=1, maximum=MAX_PROBE_BATCH)
    check_count("--probe-tokens", response_tokens, minimum=2)  # beyond int64 it was exit 70
    rng = np.random.default_rng(seed)
    sizes = [1 << i for i in range(max_batch.bit_length()) if 1 << i <= max_batch]
    if sizes[-1] != max_batch:
        sizes.append(max_batch)
    prompts, lengths, minibatch, instance = [], [], [], []
    mb = 0
    for size in sizes:
        for k in range(instances):
            prompts += rng.choice(PROBE_PROMPT_TOKENS, size).tolist()
            lengths += rng.integers(max(response_tokens // 8, 1), response_tokens + 1, size).tolist()
            minibatch += [mb] * size
            instance += [k] * size
            mb += 1
    rows = len(prompts)
    ids = [f"probe-{i}" for i in range(rows)]
    frame = pl.DataFrame({"seq": np.arange(rows, dtype=np.int64), "instance": np.array(instance, dtype=np.int32),
                          "minibatch": np.array(minibatch, dtype=np.int64), "epoch": np.zeros(rows, dtype=np.int32),
                          "row": np.arange(rows, dtype=np.int64), "prompt_id": ids})
    return RequestPlan(name="probe", dispatch="planned", run=0, seq=np.arange(rows), epoch=np.zeros(rows, np.int64),
                       prompt_id=ids, minibatch=np.array(minibatch), instance=np.array(instance),
                       prompt_tokens=np.array(prompts, dtype=np.int64),
                       lengths=np.array(lengths, dtype=np.int64)[:, None],
                       prompts=None, frame=frame)


def _probe(live: LiveSettings, base: str, max_batch: int, response_tokens: int,
           progress: Progress | None) -> tuple[pl.DataFrame, dict[str, Any]]:
    from asp_cli.integrate.live import run_live
    from asp_cli.integrate.measure import timeline_frame

    if live.engine not in (None, "blocking"):
        raise SettingsError("the probe run sends blocking minibatches; drop --engine")
    live = dataclasses.replace(live, engine="blocking")
    preset = load_preset(base)
    k = len(live.servers)
    plan = probe_plan(k, max_batch=max_batch, response_tokens=response_tokens)
    # calibrate has no --max-in-flight: the probe's largest minibatch is what bounds its connections.
    outcome = run_live([plan], live, progress=progress, limit_option="--probe-max-batch")
    if outcome.error is not None:
        raise outcome.error
    if outcome.interrupted:
        raise KeyboardInterrupt
    sim = simulate_plan(plan, preset, engine="blocking", instances=k, max_in_flight=live.max_in_flight,
                        train_batch_size=1)
    frame = timeline_frame([plan], outcome.records, [sim], list(live.servers))
    metadata = {"engine": "blocking", "max_in_flight": live.max_in_flight, "instances": k, "preset": preset.name,
                "preset_source": base, "servers": outcome.servers, "complete": True,
                "arrangements": [{"arrangement": "probe", "dispatch": "planned", "requests": plan.requests}]}
    if frame.height == 0:
        raise ServerError("the probe run measured nothing")
    return frame, metadata

