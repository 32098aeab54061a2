"""The options of a replay that the command line sets, validated once, here; light to import (no NumPy), so the
command line reads its defaults from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from asp_cli.errors import SettingsError, named_in_python
from asp_cli.settings import DISPATCHES, MAX_INSTANCES, TRAINER_ORDERS, check_count, check_lag, whole_fields

Mode = Literal["continuous", "static", "streaming"]
Dispatch = Literal["planned", "free"]
MODES: tuple[str, ...] = ("continuous", "static", "streaming")
# The trainer takes the next train batch of finished groups in arrival order (most frameworks), or exactly the
# groups the schedule's `train_step` assigns to each step (a replay buffer that follows the schedule).
TrainerOrder = Literal["arrival", "schedule"]


@named_in_python({"--engine": "mode"})
@dataclass(frozen=True)
class ReplayOptions:
    """How `asp simulate` replays a schedule; None takes what the schedule recorded. Validated once, here.

    ``use_schedule_max_lag=False`` replays without a lag bound unless ``max_lag`` is given (the benchmark's
    free-running rows).
    """

    preset: str | None = None
    mode: Mode | None = None  # None: the engine the schedule was planned for
    dispatch: Dispatch | None = None  # None: the dispatch the schedule was planned for (planned before 1.2)
    max_lag: int | float | None = None
    use_schedule_max_lag: bool = True
    instances: int | None = None
    seed: int | None = None
    trainer: TrainerOrder | None = None
    # verl's asynchronous rollouter's prompts in flight per server, for the "as verl routes" line (None: the
    # schedule's `ScheduleSettings.prompts_per_server`).
    prompts_per_server: int | None = None
    # The epoch of the observed lengths to replay (`asp_cli.sim.lengths.epoch_samples`; -1: the samples without an
    # epoch, a probe's); None: every sample, a probe's left out of the prompts an epoch holds.
    lengths_epoch: int | None = None

    def __post_init__(self) -> None:
        whole_fields(self, ("max_lag", "instances", "seed", "prompts_per_server", "lengths_epoch"))  # NumPy's ints
        object.__setattr__(self, "max_lag", check_engine(self.mode or "continuous", self.dispatch or "planned",
                                                         self.max_lag, self.trainer or "arrival"))
        if self.instances is not None and not (_whole(self.instances) and 1 <= self.instances <= MAX_INSTANCES):
            raise SettingsError(f"--instances must be a whole number from 1 to {MAX_INSTANCES} (got {self.instances!r})")
        check_count("--seed", self.seed, minimum=0, optional=True)
        check_count("--prompts-per-server", self.prompts_per_server, minimum=1, optional=True)
        check_count("--lengths-epoch", self.lengths_epoch, minimum=-1, maximum=2**31 - 1, optional=True)
        if self.prompts_per_server is not None and (self.mode not in (None, "streaming") or self.max_lag == 0):
            raise SettingsError("--prompts-per-server is verl's asynchronous rollouter's limit: it applies to "
                                "--engine streaming with a --max-lag other than 0; drop it")

def check_engine(mode: str, dispatch: str, max_lag: int | float | None,
                 trainer: str = "arrival") -> int | float | None:
    """Refuse an unknown engine mode, dispatch or trainer order, or a lag bound that is not a number of steps from
    0 up (every replay's check); return the lag bound as `asp_cli.settings.check_lag` keeps it (2.0 as 2)."""
    if mode not in MODES:
        raise SettingsError(f"--engine (--mode) must be one of {', '.join(MODES)} (got {mode!r})")
    if dispatch not in DISPATCHES:
        raise SettingsError(f"--dispatch must be one of {', '.join(DISPATCHES)} (got {dispatch!r})")
    max_lag = check_lag(max_lag)
    if trainer not in TRAINER_ORDERS:
        raise SettingsError(f"--trainer must be one of {', '.join(TRAINER_ORDERS)} (got {trainer!r})")
    return max_lag

def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
