"""What a replay is told and what it returns: its settings, its result, and per-instance counters."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from asp_cli.errors import SettingsError
from asp_cli.sim.options import Dispatch, Mode, TrainerOrder, check_engine


# vLLM keeps ~1% of KV blocks free when admitting (its `watermark`, Vidur's vLLM scheduler does the same).
KV_WATERMARK = 0.01
# The time share with fewer than this fraction of the minibatch's slots live counts as "tail"
# (rollout-cost-model.md section 6.4).
TAIL_THRESHOLD = 0.25


@dataclass(frozen=True)
class SimulationSettings:
    """How to replay a schedule."""

    samples_per_prompt: int = 8
    train_batch_size: int = 128
    mode: Mode = "continuous"
    dispatch: Dispatch = "planned"
    max_lag: int | float | None = None  # a fraction: verl's staleness_threshold (`asp_cli.settings.check_lag`)
    kv_watermark: float = KV_WATERMARK
    tail_threshold: float = TAIL_THRESHOLD
    trainer: TrainerOrder = "arrival"

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_lag", check_engine(self.mode, self.dispatch, self.max_lag, self.trainer))
        if self.samples_per_prompt < 1 or self.train_batch_size < 1:
            raise SettingsError("samples per prompt and train batch size must be at least 1")


@dataclass
class SimulationResult:
    """What one replay produced: per-sequence, per-group and per-step arrays plus the summary metrics."""

    metrics: dict
    seq_admit_s: np.ndarray
    seq_finish_s: np.ndarray
    seq_instance: np.ndarray
    group_arrival_s: np.ndarray
    group_consumed_s: np.ndarray
    group_step: np.ndarray
    group_version: np.ndarray
    step_start_s: np.ndarray
    step_end_s: np.ndarray
    step_groups: np.ndarray
    extras: dict = field(default_factory=dict)

    def timeseries(self, bins: int = 400) -> dict[str, np.ndarray]:
        """Bin-averaged series over [0, end-to-end]: live sequences, queue occupancy, trainer busy, version."""
        check_bins(bins)
        end = float(self.metrics["end_to_end_s"]) or 1.0
        edges = np.linspace(0.0, end, bins + 1)
        width = np.diff(edges)
        live = np.diff(_interval_area(self.seq_admit_s, self.seq_finish_s, edges)) / width
        queue = np.diff(_interval_area(self.group_arrival_s, self.group_consumed_s, edges)) / width
        busy = np.diff(_interval_area(self.step_start_s, self.step_end_s, edges)) / width
        arrived = np.searchsorted(np.sort(self.group_arrival_s), edges[1:], side="right")
        version = np.searchsorted(np.sort(self.step_end_s), edges[1:], side="right")
        return {
            "time_s": edges[:-1],
            "live_sequences": live,
            "queue_groups": queue,
            "trainer_busy_fraction": busy,
            "groups_arrived": arrived.astype(np.int64),
            "policy_version": version.astype(np.int64),
        }


MAX_BINS = 1_000_000  # time-series rows; more is memory, not resolution


def check_bins(bins: int) -> None:
    """Refuse a time-series bin count outside 1..`MAX_BINS` (``--bins``)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise SettingsError(f"--bins must be a whole number from 1 to {MAX_BINS} (got {bins!r})")


def _interval_area(start: np.ndarray, end: np.ndarray, points: np.ndarray) -> np.ndarray:
    """∫_0^x (number of intervals [start_i, end_i) holding t) dt at each point x."""
    s = np.sort(np.asarray(start, dtype=np.float64))
    e = np.sort(np.asarray(end, dtype=np.float64))
    cs = np.concatenate(([0.0], np.cumsum(s)))
    ce = np.concatenate(([0.0], np.cumsum(e)))
    ks = np.searchsorted(s, points, side="right")
    ke = np.searchsorted(e, points, side="right")
    return (points * ks - cs[ks]) - (points * ke - ce[ke])


@dataclass
class Stats:
    """Per-instance accumulators."""

    busy_s: float = 0.0
    decode_steps: float = 0.0
    live_slot_steps: float = 0.0  # Σ over steps of live sequences (decoded tokens, padding rows excluded)
    target_slot_steps: float = 0.0  # Σ over steps of the minibatch's slot target
    tail_s: float = 0.0
    preemptions: int = 0
    recomputed_tokens: int = 0
    sync_s: float = 0.0
    held_s: float = 0.0  # waiting for the max_lag admission rule
    lag_rule_released: int = 0  # minibatches let go while the lag rule held them (a schedule-following trainer)
    oversize: int = 0  # requests larger than the whole KV cache (run alone, over capacity)
    static_over_capacity: int = 0
    static_batches: int = 0
    peak_kv_tokens: float = 0.0
    end_s: float = 0.0
