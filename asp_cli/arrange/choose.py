"""`--arrangement auto`: try each candidate arrangement in asp's own simulator and keep the fastest.

The scheduler's closed-form estimates (`timeline`) price a plan under its point predictions; the real run
sees lengths spread around them, and a plan that wins on points can lose once a mispredicted long group lands
late. So each candidate is arranged and replayed (`asp_cli.sim.run.simulate_schedule`, the settings' engine,
lag bound and trainer order, the planned instances) on ``draws`` sets of lengths drawn from the predictive
distribution: per prompt a log-normal factor around the predicted mean (sigma `MODEL_SIGMA` for model
predictions, `HISTORY_SIGMA` for prompts seen in history) and per sample a log-normal spread whose sigma is
the prompt's own, read back from its predicted group maximum and mean (`sample_sigma`). The candidate with the lowest mean simulated end-to-end time wins,
except that an earlier candidate (interleave first: steadier arrival, steps closer to representative) within
`TIE_MARGIN` of it is kept, since a difference that small is inside the draws' own noise. Large inputs are judged on a seeded sample of prompts (`SAMPLE_PROMPTS`) and
one epoch, which keeps the cost a fixed few seconds; the winner is then arranged on everything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import SettingsError
from asp_cli.settings import ScheduleSettings

BLOCKING_CANDIDATES: tuple[str, ...] = ("interleave", "long-first", "short-first", "shuffle")
STREAMING_CANDIDATES: tuple[str, ...] = ("interleave", "long-first", "short-first", "shuffle")
SAMPLE_PROMPTS = 4096
DRAWS = 2
TIE_MARGIN = 0.01
# Prediction error on log length: the bundled model's typical error on unseen prompts (docs/predictor.md), and
# what is left once a prompt's own samples are known (the per-prompt mean correlates ~0.9 across epochs).
MODEL_SIGMA = 0.5
HISTORY_SIGMA = 0.25
DEFAULT_SAMPLE_SIGMA = 0.3  # the median within-group CV of 0.28 in the AIME R1-distill data


@dataclass
class ArrangementChoice:
    """Which arrangement was used, and what each candidate was expected to take."""

    setting: str  # what the user asked for: auto or a name
    chosen: str
    engine: str
    candidates: list[dict[str, Any]] = field(default_factory=list)  # name, expected_end_to_end_s, step dev
    evaluated_prompts: int = 0
    draws: int = 0

    def to_dict(self) -> dict[str, Any]:
        document = dataclasses.asdict(self)
        chosen = next((c["expected_end_to_end_s"] for c in self.candidates if c["name"] == self.chosen), None)
        others = [c["expected_end_to_end_s"] for c in self.candidates if c["name"] != self.chosen]
        # How much faster the chosen arrangement is expected to be than the best of the others (negative when
        # a candidate within the tie margin was faster).
        document["expected_gain_over_next"] = (round(min(others) / chosen - 1.0, 4)
                                               if chosen and others else None)
        return document


def sample_sigma(predicted_max: np.ndarray, predicted_mean: np.ndarray, samples: int) -> np.ndarray:
    """The within-group sigma of log length that the predicted group maximum and mean imply.

    The prediction is log-normal: ``max = exp(mu + sigma e_N)`` and ``mean = exp(mu + sigma^2 / 2)`` with
    ``e_N`` the expected maximum of N standard normals, so ``log(max / mean) = sigma e_N - sigma^2 / 2``; the
    smaller root is sigma. One sample per group says nothing about the spread: `DEFAULT_SAMPLE_SIGMA` then.
    """
    from asp_cli.predict.targets import expected_max_z

    if samples < 2:
        return np.full(np.asarray(predicted_max).size, DEFAULT_SAMPLE_SIGMA)
    e = float(expected_max_z(samples))
    ratio = np.log(np.maximum(np.asarray(predicted_max, dtype=np.float64), 1.0)
                   / np.maximum(np.asarray(predicted_mean, dtype=np.float64), 1.0))
    sigma = e - np.sqrt(np.maximum(e * e - 2.0 * np.maximum(ratio, 0.0), 0.0))
    return np.clip(sigma, 0.05, 2.0)


def candidates_for(engine: str) -> tuple[str, ...]:
    return STREAMING_CANDIDATES if engine == "streaming" else BLOCKING_CANDIDATES


def choose_arrangement(
    arrange: Callable[[pl.DataFrame, pl.DataFrame, ScheduleSettings, HardwarePreset], pl.DataFrame],
    prompts: pl.DataFrame,
    predictions: pl.DataFrame,
    settings: ScheduleSettings,
    preset: HardwarePreset,
) -> ArrangementChoice:
    """Evaluate every candidate of the settings' engine under lengths drawn from the predictions.

    ``arrange(prompts, predictions, settings, preset)`` makes one candidate's frame (the caller's
    `asp_cli.arrange.pipeline.arrange`, passed in so that this module stays below it).
    """
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_schedule

    if prompts.height > SAMPLE_PROMPTS:
        keep = np.sort(np.random.default_rng([settings.seed, 29]).choice(prompts.height, SAMPLE_PROMPTS,
                                                                         replace=False))
        prompts, predictions = prompts[keep], predictions[keep]
    trial = dataclasses.replace(settings, epochs=1)
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    from_history = (predictions[C.PREDICTION_SOURCE] == "history").to_numpy()
    sim = SimulationSettings(samples_per_prompt=settings.samples_per_prompt,
                             train_batch_size=settings.train_batch_size, mode=settings.engine,  # type: ignore[arg-type]
                             dispatch="planned", max_lag=settings.max_lag,
                             trainer=settings.trainer)  # type: ignore[arg-type]
    top = predictions[C.PREDICTED_MAX_TOKENS].to_numpy().astype(np.float64)
    n = settings.samples_per_prompt
    spread = sample_sigma(top, mean, n)
    prompt_sigma = np.where(from_history, HISTORY_SIGMA, MODEL_SIGMA)
    draws = []
    for d in range(DRAWS):
        rng = np.random.default_rng([settings.seed, 31, d])
        prompt_factor = np.exp(rng.normal(0.0, prompt_sigma) - prompt_sigma**2 / 2)
        sample_factor = np.exp(rng.normal(0.0, 1.0, (mean.size, n)) * spread[:, None] - spread[:, None] ** 2 / 2)
        lengths = np.maximum(mean, 1.0)[:, None] * prompt_factor[:, None] * sample_factor
        draws.append(np.clip(np.rint(lengths), 1, settings.max_response_tokens).astype(np.int64))
    position_of_row = {r: i for i, r in enumerate(prompts[C.ROW].to_list())}
    results = []
    refused: list[SettingsError] = []
    for name in candidates_for(settings.engine):
        try:
            frame = arrange(prompts, predictions, dataclasses.replace(trial, arrangement=name), preset).sort("seq")
        except SettingsError as exc:  # this order cannot keep the lag bound: not a candidate
            refused.append(exc)
            continue
        index = np.fromiter((position_of_row[r] for r in frame[C.ROW].to_list()), dtype=np.int64,
                            count=frame.height)
        times, deviations, free_times = [], [], []
        free = dataclasses.replace(sim, dispatch="free")
        for truth in draws:
            metrics = simulate_schedule(frame, truth[index], preset, sim, instances=settings.instances).metrics
            times.append(metrics["end_to_end_s"])
            deviations.append(metrics["step_length_deviation_p90"])
            # The same order handed to whichever instance frees first: what an engine that ignores the
            # `instance` column gets (it absorbs prediction error the fixed plan cannot).
            free_times.append(simulate_schedule(frame, truth[index], preset, free,
                                                instances=settings.instances).metrics["end_to_end_s"])
        results.append({"name": name, "expected_end_to_end_s": round(float(np.mean(times)), 3),
                        "expected_end_to_end_s_free_dispatch": round(float(np.mean(free_times)), 3),
                        "expected_step_deviation_p90": round(float(np.mean(deviations)), 4)})
    if not results:
        raise refused[0]
    fastest = min(r["expected_end_to_end_s"] for r in results)
    chosen = next(r["name"] for r in results if r["expected_end_to_end_s"] <= fastest * (1.0 + TIE_MARGIN))
    return ArrangementChoice("auto", chosen, settings.engine, results, prompts.height, DRAWS)
