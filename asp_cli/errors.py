"""The library's exceptions and the exit codes the CLI maps them to.

One base class, subclasses named after the condition (the scikit-learn and httpie way). Messages name the
file, line or row, column or id, and the fix; they never echo prompt text.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterable, Iterator
from enum import IntEnum


class ExitCode(IntEnum):
    """Documented exit codes of every ``asp`` command (see docs/errors.md)."""

    OK = 0
    CHECK_FAILED = 1  # `asp report --check`: a threshold was broken; `asp calibrate`: the fit predicts worse
    USAGE = 2  # the command line itself is wrong (unknown option, missing argument)
    BAD_INPUT = 3  # an input file is unreadable, malformed or inconsistent
    BAD_SETTINGS = 4  # the settings make no sense (zero instances, a budget below one prompt, ...)
    PREDICTOR = 5  # a predictor file is missing, of another format, or not safe to load
    SCHEDULE_FORMAT = 6  # a file is not an asp schedule, or of a newer format version
    OUTPUT = 7  # the output exists (no --force), equals an input, or cannot be written
    SERVER = 8  # `asp replay` / `asp calibrate`: an inference server refused a request or kept failing
    INTERNAL = 70  # a bug in asp: please report it with --traceback output
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; nothing was written


class AspError(Exception):
    """Base class of every error asp raises on purpose."""

    exit_code: ExitCode = ExitCode.INTERNAL


class CheckFailed(AspError):
    """A `--check` threshold was broken; the message lists which. (The library's `report_schedule` returns its
    checks, `passed` false; the CLI raises this on them.)"""

    exit_code = ExitCode.CHECK_FAILED


class CheckFailedError(CheckFailed):
    """A check the command makes failed: `asp calibrate`'s fit predicts the measured runs worse than its base.
    A `CheckFailed`, so that one ``except CheckFailed`` catches both (a Python user's missed it)."""

    exit_code = ExitCode.CHECK_FAILED


class InputError(AspError):
    """An input file (prompts, history, lengths, dataset) is unreadable or malformed."""

    exit_code = ExitCode.BAD_INPUT


class SettingsError(AspError):
    """A setting or a combination of settings makes no sense.

    Its messages name the command line's options (``--max-lag``). Raised outside a command (`asp_cli`'s functions
    and settings classes called from Python), each option that is a keyword of the library's settings
    (`python_names`) is said with its Python name too, once, at the end: a library user was told ``--max-lag``
    and had no such flag (a newcomer round)."""

    exit_code = ExitCode.BAD_SETTINGS

    def __init__(self, message: object = "", *args: object) -> None:
        if isinstance(message, str) and not _ON_THE_COMMAND_LINE.get():
            said = _in_python(message)
            message += "" if message.endswith(said) else said  # said once, also when unpickled (Ray)
        super().__init__(message, *args)


# Whether the code running is an `asp` command's (`asp_cli.cli.common.guarded` sets it), and the Python keyword of
# each command-line option the library's settings take: the settings classes register their fields
# (``max_lag`` for ``--max-lag``, `python_names`).
_ON_THE_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar("asp_on_the_command_line", default=False)
_PYTHON_NAMES: dict[str, str] = {}
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def python_names(fields: Iterable[str]) -> None:
    """Register keywords of the library's settings (dataclass fields) whose option is ``--`` and the name with
    ``-`` for ``_``."""
    for name in fields:
        if not name.startswith("_"):
            _PYTHON_NAMES["--" + name.replace("_", "-")] = name


@contextlib.contextmanager
def on_the_command_line() -> Iterator[None]:
    """Within: messages name the command line's options only (an `asp` command runs)."""
    token = _ON_THE_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_THE_COMMAND_LINE.reset(token)


def _in_python(message: str) -> str:
    named = [f"--{m}" for m in dict.fromkeys(_OPTION.findall(message)) if f"--{m}" in _PYTHON_NAMES]
    if not named:
        return ""
    return " (in Python: " + ", ".join(f"{_PYTHON_NAMES[o]} for {o}" for o in named) + ")"


class LagBoundError(SettingsError):
    """An arrangement cannot keep ``--max-lag`` (auto then tries its next candidate: `arrange.pipeline.plan`)."""


class PredictorError(AspError):
    """A predictor file cannot be used."""

    exit_code = ExitCode.PREDICTOR


class UnsafePredictorError(PredictorError):
    """A predictor file asks to load a type that is not on asp's trusted list."""


class ScheduleFormatError(AspError):
    """A file is not an asp schedule, or was written by a newer format version."""

    exit_code = ExitCode.SCHEDULE_FORMAT


class OutputError(AspError):
    """The output cannot be written where asked."""

    exit_code = ExitCode.OUTPUT


class ServerError(AspError):
    """An inference server could not be reached, refused a request, or kept failing after retries."""

    exit_code = ExitCode.SERVER


class Interrupted(BaseException):
    """SIGINT or SIGTERM under the ``asp`` entry point (`asp_cli.cli.entry`): unwind, then exit with 130.

    A BaseException, like KeyboardInterrupt, so no ``except Exception`` swallows it; not a KeyboardInterrupt,
    so Click does not turn it into "Aborted!" and exit 1. Code that keeps partial work on Ctrl-C catches both.
    """


_ID_SHOWN = 80  # characters of an id a message shows


def printable(text: object) -> str:
    """``text`` with its control characters written as escapes (``\\n``, ``\\x1b``; tabs kept): what a file
    holds, shown on a terminal. A file name or recorded command line with a newline forged a line of `asp
    report`, and one with an escape sequence reached the terminal as one (a hostile-input audit, 2026-12-05)."""
    return "".join(ch if ch == "\t" or ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


_NAME_SHOWN = 60  # characters of a data source's name a line shows


def shown_name(name: object) -> str:
    """A name from a file (a data source) as a summary line shows it: `printable`, cut after 60 characters (a
    hostile-input audit's source of 5,000 characters, or holding a newline, broke the one-line rule)."""
    text = printable(name)
    return text if len(text) <= _NAME_SHOWN else f"{text[:_NAME_SHOWN]}... ({len(str(name)):,} characters)"


def shown_id(prompt_id: object) -> str:
    """An id as a message shows it: quoted, cut after 80 characters (a whole prompt used as its id; an id of
    200,000 characters made a message of 200 KB)."""
    prompt_id = str(prompt_id)
    if len(prompt_id) <= _ID_SHOWN:
        return repr(prompt_id)
    return f"{prompt_id[:_ID_SHOWN]!r}... ({len(prompt_id):,} characters)"
