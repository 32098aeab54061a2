"""asp: the Adaptive Scheduling Pipeline, offline rollout schedules for LLM reinforcement-learning training.

Every command has a Python twin, re-exported here (loaded on first use, so ``import asp_cli`` stays light):

========================  =====================================================
``asp schedule``          `schedule` (`asp_cli.arrange.pipeline.arrange` is its pure core)
``asp report``            `report_schedule` (``--check`` thresholds: `CheckLimits`)
``asp simulate``          `simulate_file`
``asp bench``             `run_benchmark`
``asp export``            `export`
``asp observe``           `observe`
``asp probe``             `probe` (settings: `ProbeSettings`)
``asp replay``            `replay_schedule` (settings: `LiveSettings`, `InProcessSettings`)
``asp calibrate``         `calibrate`
``asp predictor fit``     `fit_predictor`
``asp predictor eval``    `evaluate_predictor`
``asp predictor predict`` `predict_file` (``--ray``: `predict_with_ray`)
``asp predictor info``    `predictor_info`
========================  =====================================================

Settings and reading options: `ScheduleSettings`, `ReadOptions`, `ReplayOptions`; a schedule on disk:
`read_schedule`, `open_schedule`. Errors (`asp_cli.errors`, each with the ``exit_code`` the command line exits
with): `AspError` and its kinds `InputError`, `SettingsError`, `PredictorError`, `ScheduleFormatError`,
`OutputError`, `ServerError`, `CheckFailedError`. docs/architecture.md shows how the pieces fit together.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # what a type checker sees of the lazy re-exports below (`__getattr__`): their real types
    from asp_cli.arrange.pipeline import schedule as schedule
    from asp_cli.bench.compare import run_benchmark as run_benchmark
    from asp_cli.bench.simulate import simulate_file as simulate_file
    from asp_cli.integrate.calibrate import calibrate as calibrate
    from asp_cli.integrate.export import export as export
    from asp_cli.integrate.live import LiveSettings as LiveSettings
    from asp_cli.integrate.measure import InProcessSettings as InProcessSettings
    from asp_cli.integrate.measure import replay_schedule as replay_schedule
    from asp_cli.integrate.observe import observe as observe
    from asp_cli.integrate.probe import ProbeSettings as ProbeSettings
    from asp_cli.integrate.probe import probe as probe
    from asp_cli.integrate.replay import open_schedule as open_schedule
    from asp_cli.predict.commands import evaluate_predictor as evaluate_predictor
    from asp_cli.predict.commands import fit_predictor as fit_predictor
    from asp_cli.predict.commands import predict_file as predict_file
    from asp_cli.predict.commands import predictor_info as predictor_info
    from asp_cli.predict.on_ray import predict_with_ray as predict_with_ray
    from asp_cli.reading.options import ReadOptions as ReadOptions
    from asp_cli.report.checks import CheckLimits as CheckLimits
    from asp_cli.report.files import report_schedule as report_schedule
    from asp_cli.schedule_format import read_schedule as read_schedule
    from asp_cli.settings import ScheduleSettings as ScheduleSettings
    from asp_cli.sim.options import ReplayOptions as ReplayOptions
    from asp_cli.errors import AspError as AspError
    from asp_cli.errors import CheckFailed as CheckFailed
    from asp_cli.errors import CheckFailedError as CheckFailedError
    from asp_cli.errors import InputError as InputError
    from asp_cli.errors import OutputError as OutputError
    from asp_cli.errors import PredictorError as PredictorError
    from asp_cli.errors import ScheduleFormatError as ScheduleFormatError
    from asp_cli.errors import ServerError as ServerError
    from asp_cli.errors import SettingsError as SettingsError

_TWINS = {
    "schedule": "asp_cli.arrange.pipeline",
    "report_schedule": "asp_cli.report.files",
    "CheckLimits": "asp_cli.report.checks",
    "simulate_file": "asp_cli.bench.simulate",
    "run_benchmark": "asp_cli.bench.compare",
    "export": "asp_cli.integrate.export",
    "observe": "asp_cli.integrate.observe",
    "probe": "asp_cli.integrate.probe",
    "ProbeSettings": "asp_cli.integrate.probe",
    "replay_schedule": "asp_cli.integrate.measure",
    "LiveSettings": "asp_cli.integrate.live",
    "InProcessSettings": "asp_cli.integrate.measure",
    "calibrate": "asp_cli.integrate.calibrate",
    "fit_predictor": "asp_cli.predict.commands",
    "evaluate_predictor": "asp_cli.predict.commands",
    "predict_file": "asp_cli.predict.commands",
    "predict_with_ray": "asp_cli.predict.on_ray",
    "predictor_info": "asp_cli.predict.commands",
    "ScheduleSettings": "asp_cli.settings",
    "ReadOptions": "asp_cli.reading.options",
    "ReplayOptions": "asp_cli.sim.options",
    "read_schedule": "asp_cli.schedule_format",
    "open_schedule": "asp_cli.integrate.replay",
    "AspError": "asp_cli.errors",
    "CheckFailed": "asp_cli.errors",
    "CheckFailedError": "asp_cli.errors",
    "InputError": "asp_cli.errors",
    "OutputError": "asp_cli.errors",
    "PredictorError": "asp_cli.errors",
    "ScheduleFormatError": "asp_cli.errors",
    "ServerError": "asp_cli.errors",
    "SettingsError": "asp_cli.errors",
}

__all__ = ["__version__", *sorted(_TWINS)]


def __getattr__(name: str) -> Any:
    if name not in _TWINS:
        raise AttributeError(f"module 'asp_cli' has no attribute {name!r}")
    return getattr(import_module(_TWINS[name]), name)


def __dir__() -> list[str]:
    """The twins too, though loaded on first use: what ``dir(asp_cli)`` and completion show."""
    return sorted({*globals(), *__all__})
