"""The Python twin of `asp simulate`: read a schedule and lengths, replay it, compare it with the baselines."""

from __future__ import annotations

from dataclasses import dataclass

from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS, PROMPT_SIGMA, SAMPLE_SIGMA, lengths_for_schedule
from asp_cli.sim.records import Dispatch, Mode, SimulationResult, SimulationSettings
from asp_cli.sim.run import simulate_schedule


@dataclass
class SimulationReport:
    """What `simulate_file` produced: the summary document, the replay, and the comparison rows."""

    document: dict
    result: SimulationResult
    comparison: list[dict] | None = None


def schedule_prompts(frame):  # pl.DataFrame -> (prompts, predictions), one row per prompt
    """The prompts and predictions a schedule was made from (first occurrence of each row)."""
    import polars as pl

    first = frame.sort("seq").unique("row", keep="first", maintain_order=True).sort("row")
    predicted = pl.col("predicted_tokens")
    prompts = first.select("row", "prompt_id")
    predictions = first.select(
        (pl.col("prompt_tokens") if "prompt_tokens" in first.columns else pl.lit(DEFAULT_PROMPT_TOKENS))
        .cast(pl.Int64).alias("prompt_tokens"),
        (pl.col("predicted_max_tokens") if "predicted_max_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_max_tokens"),
        (pl.col("predicted_mean_tokens") if "predicted_mean_tokens" in first.columns else predicted)
        .cast(pl.Int64).alias("predicted_mean_tokens"),
        predicted.cast(pl.Int64).alias("predicted_tokens"),
        (pl.col("prediction_source") if "prediction_source" in first.columns else pl.lit("model"))
        .cast(pl.String).alias("prediction_source"),
    )
    return prompts, predictions


def simulate_file(
    schedule_path,
    lengths_paths=(),
    *,
    preset: str | None = None,
    mode: Mode = "continuous",
    dispatch: Dispatch = "planned",
    max_lag: int | None = None,
    use_schedule_max_lag: bool = True,
    instances: int | None = None,
    seed: int | None = None,
    lengths_id_key: str | None = None,
    lengths_length_key: str | None = None,
    compare: bool = False,
    on_bad_row: str = "error",
) -> SimulationReport:
    """Read a schedule (and observed lengths), replay it, and optionally compare it with the baselines.

    Settings the schedule recorded (instances, N, train batch size, cap, preset, max_lag, seed) are used
    unless given here.

    Raises
    ------
    ScheduleFormatError, InputError, SettingsError
    """
    from pathlib import Path

    from asp_cli.costmodel import load_preset
    from asp_cli.reading import read_lengths
    from asp_cli.schedule_format import read_schedule
    from asp_cli.settings import ScheduleSettings

    schedule = read_schedule(Path(schedule_path))
    recorded = ScheduleSettings.from_dict(schedule.settings) if schedule.settings else ScheduleSettings(
        instances=schedule.instances)
    n = recorded.samples_per_prompt
    k = instances if instances is not None else max(recorded.instances, int(schedule.frame["instance"].max()) + 1)
    lag = max_lag if max_lag is not None else (recorded.max_lag if use_schedule_max_lag else None)
    seed = recorded.seed if seed is None else seed
    hardware = load_preset(preset or recorded.preset)
    observed = None
    skipped = 0
    if lengths_paths:
        observed, read = read_lengths([Path(p) for p in lengths_paths], id_key=lengths_id_key,
                                      length_key=lengths_length_key, on_bad_row=on_bad_row,  # type: ignore[arg-type]
                                      id_flag="--lengths-id-key", length_flag="--lengths-length-key")
        skipped = read.skipped_rows
    frame = schedule.frame.sort("seq")
    lengths, info = lengths_for_schedule(frame, observed, samples_per_prompt=n, seed=seed,
                                         max_response_tokens=recorded.max_response_tokens)
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=recorded.train_batch_size, mode=mode,
                                  dispatch=dispatch, max_lag=lag)
    result = simulate_schedule(frame, lengths, hardware, settings, instances=k)
    document = {
        "schedule": str(schedule_path),
        "preset": hardware.name,
        "mode": mode,
        "dispatch": dispatch,
        "instances": k,
        "samples_per_prompt": n,
        "train_batch_size": recorded.train_batch_size,
        "max_lag": lag,
        "lengths": {**info.to_dict(), "skipped_rows": skipped},
        "noise_model": None if info.prompts_sampled == 0 else {
            "prompt_sigma": PROMPT_SIGMA, "sample_sigma": SAMPLE_SIGMA, "seed": seed},
        "metrics": result.metrics,
    }
    comparison = None
    if compare:
        import dataclasses

        import polars as pl

        from asp_cli.sim.bench import compare as run_compare

        prompts, predictions = schedule_prompts(frame)
        truth, _ = lengths_for_schedule(pl.concat([prompts, predictions], how="horizontal"), observed,
                                        samples_per_prompt=n, seed=seed,
                                        max_response_tokens=recorded.max_response_tokens)
        include = None if info.prompts_sampled == 0 else tuple(
            name for name in _COMPARE_ALL if name != "asp (true lengths)")
        recorded_k = dataclasses.replace(recorded, instances=k, max_lag=lag)
        comparison = run_compare(prompts, predictions, truth, recorded_k, hardware, mode=mode, max_lag=lag,
                                 asp_frame=frame, include=include)
        document["comparison"] = comparison
    return SimulationReport(document, result, comparison)


_COMPARE_ALL = ("verl-default", "dataset-order", "short-first", "long-first", "count-balance",
                "rollpacker-tail", "asp", "asp, free dispatch", "asp (true lengths)")
