"""The library's exceptions and the exit codes the CLI maps them to.

One base class, subclasses named after the condition (the scikit-learn and httpie way). Messages name the
file, line or row, column or id, and the fix; they never echo prompt text.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
from collections.abc import Callable, Iterator
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


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
    INTERRUPTED = 130  # Ctrl-C, SIGTERM, SIGHUP, SIGUSR1 or SIGUSR2; nothing was written


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

    Its messages name the command line's options (``--max-lag``). Raised by a settings class's checks outside a
    command (`asp_cli.ScheduleSettings(...)` from Python), each option that is one of that class's keywords is said
    with its Python name too, once, at the end (`named_in_python`): a library user was told ``--max-lag`` and had
    no such flag (a newcomer round)."""

    exit_code = ExitCode.BAD_SETTINGS

    def __init__(self, message: object = "", *args: object) -> None:
        names = _PYTHON_NAMES.get(_VALIDATING.get() or "", {})
        if isinstance(message, str) and names and not _ON_THE_COMMAND_LINE.get():
            message += _in_python(message, names)
        super().__init__(message, *args)


# Whether the code running is an `asp` command's (`asp_cli.cli.common.guarded` sets it); which settings class is
# checking its values (`named_in_python`), and the Python keyword of each command-line option of each such class
# (``max_lag`` for ``--max-lag``). An error raised elsewhere (a function's own check) says the options only: the
# same option is another keyword in another function (`asp observe --id-key` is `ReadOptions.length_id_key`).
_ON_THE_COMMAND_LINE: contextvars.ContextVar[bool] = contextvars.ContextVar("asp_on_the_command_line", default=False)
_VALIDATING: contextvars.ContextVar[str | None] = contextvars.ContextVar("asp_validating", default=None)
_PYTHON_NAMES: dict[str, dict[str, str]] = {}
_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def named_in_python(also: dict[str, str] | None = None) -> Callable[[type[T]], type[T]]:
    """A settings dataclass's decorator: the errors its checks raise (``__post_init__``) from Python name each of its
    fields beside the option, ``--name-with-dashes`` for ``name_with_dashes`` (``also``: options named otherwise,
    e.g. ``{"--engine": "mode"}``)."""
    def decorate(cls: type[T]) -> type[T]:
        import dataclasses

        names = {"--" + f.name.replace("_", "-"): f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        _PYTHON_NAMES[cls.__name__] = {**names, **(also or {})}
        checks = cls.__post_init__  # type: ignore[attr-defined]

        @functools.wraps(checks)
        def post_init(self: Any, *args: Any, **kwargs: Any) -> None:
            token = _VALIDATING.set(cls.__name__)
            try:
                checks(self, *args, **kwargs)
            finally:
                _VALIDATING.reset(token)

        cls.__post_init__ = post_init  # type: ignore[attr-defined]
        return cls
    return decorate


def arguments_named_in_python(function: F) -> F:
    """`named_in_python` for a twin's own keyword arguments: the errors raised while it runs, from Python, name each
    of its arguments beside the option (``lengths_epoch`` for ``--lengths-epoch``), as its settings classes' do."""
    import inspect

    owner = f"{function.__module__}.{function.__qualname__}"
    _PYTHON_NAMES[owner] = {"--" + name.replace("_", "-"): name for name in inspect.signature(function).parameters}

    @functools.wraps(function)
    def named(*args: Any, **kwargs: Any) -> Any:
        token = _VALIDATING.set(owner)
        try:
            return function(*args, **kwargs)
        finally:
            _VALIDATING.reset(token)

    return named  # type: ignore[return-value]


@contextlib.contextmanager
def on_the_command_line() -> Iterator[None]:
    """Within: messages name the command line's options only (an `asp` command runs)."""
    token = _ON_THE_COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _ON_THE_COMMAND_LINE.reset(token)


def _in_python(message: str, names: dict[str, str]) -> str:
    named: dict[str, str] = {}  # keyword -> the first option said for it (--engine and --mode are both `mode`)
    for option in (f"--{m}" for m in _OPTION.findall(message)):
        if option in names:
            named.setdefault(names[option], option)
    return " (in Python: " + ", ".join(f"{k} for {o}" for k, o in named.items()) + ")" if named else ""


def expect_kind(value: T, kind: type, name: str, example: str = "...", *, optional: bool = False) -> T:
    """``value``, where it is a ``kind`` (or None, when ``optional``); else a `SettingsError` naming the class to give.
    A twin's options given as a dict were an AttributeError from inside ("'dict' object has no attribute
    'named_as'": a library newcomer's round)."""
    if isinstance(value, kind) or (optional and value is None):
        return value
    article = "an" if kind.__name__[0] in "AEIOU" else "a"
    raise SettingsError(f"{name} must be {article} {kind.__name__} (asp_cli.{kind.__name__}({example}))"
                        + (" or None" if optional else "") + f", not {type(value).__name__}")


def expect_callable(value: T, name: str) -> T:
    """``value``, where it is a function (anything callable) or None; else a `SettingsError` naming it.
    ``schedule(P, None, progress=5)`` was a TypeError "'int' object is not callable" from inside the pipeline (a
    library newcomer's round)."""
    if value is None or callable(value):
        return value
    raise SettingsError(f"{name} must be a function taking one line of text (e.g. print) or None, not "
                        f"{printable(repr(value))[:60]}")


def quoted_home(path: object) -> str:
    """``"; ..."`` for a name not found that starts with a ``~`` the shell left as it is (quoted, or read from a
    config file), where no folder of that name is in the working directory; else ``""``. asp takes names as given:
    ``--history "~/runs/h.parquet"`` was "no such file" of a file the user could see (a Slurm user's round, E125),
    and ``-o "~/runs/s.parquet"`` was told to create a folder ~/runs, which made one named ~ (E126)."""
    text = str(path)
    head = text.split("/", 1)[0].split(os.sep, 1)[0]
    if not head.startswith("~") or head == text or os.path.lexists(head):
        return ""  # a file's own name starting with ~ (`~data.jsonl`) names no folder: no quoting to blame
    expanded = os.path.expanduser(text)
    if expanded == text:  # ~nouser/...: the shell leaves it as it is too, so the quotes are not the fault
        return ""
    return (f"; the shell expands ~ only outside quotes, and asp takes the name as given (a folder named {head}): "
            f"write {expanded}, or leave the ~ outside the quotes")


def removed_directory(path: object) -> str:
    """``"; ..."`` for a relative name where the working directory was removed after the shell entered it (a cleanup,
    or ``rm -rf run && mkdir run`` from another shell: the folder is there, the process's is not); else ``""``.
    Inputs said only "no such file" of a file the user could list; outputs say it too (E26)."""
    if Path(str(path)).is_absolute():
        return ""
    try:
        os.getcwd()
    except FileNotFoundError:
        return ("; the working directory was removed after this shell entered it: cd into the folder again, or give "
                "its full path")
    return ""


def missing_hint(path: object) -> str:
    """What to add to "no such file" of an input ``path``: a quoted ``~`` (E125), a removed working directory (E11)."""
    return quoted_home(path) or removed_directory(path)


STDIN_NAMES = ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")


def stdin_said(path: object) -> str | None:
    """What to say of an input named as standard input (E129), else None: `stdin_named`'s line, which a preset,
    model, tokenizer or timeline file says under its own error class (exit code)."""
    if str(path) not in STDIN_NAMES:
        return None
    return (f"{path}: asp reads its inputs from files, not standard input (it reads each more than once); write it "
            "to a file first and name that")


def stdin_named(path: object) -> InputError | None:
    """The error of an input named as standard input (``cat p.jsonl | asp schedule - ...``: E129), else None. It
    was told to name "-" .jsonl, or that no rollout log "-" exists (an ops round)."""
    said = stdin_said(path)
    return InputError(said) if said else None


def no_such_file(path: object) -> InputError:
    """The one-line error of an input ``path`` that is not there; a name holding a shell pattern (``*``, ``?``, ``[``)
    says that asp reads named files: a quoted glob (``--history 'dump/*.jsonl'``) was "no such file" without a word
    (a verl newcomer's)."""
    stdin = stdin_named(path)  # `--predictions -` was "-: no such file", where prompts and logs say E129
    if stdin is not None:
        return stdin
    pattern = any(mark in Path(str(path)).name for mark in "*?[")
    home = missing_hint(path)
    if home:
        return InputError(f"{path}: no such file{home}")
    return InputError(f"{path}: no such file" + ("; it is a pattern, and asp reads files by name: leave out the quotes "
                                                 "so that the shell expands it, or name each file" if pattern else ""))


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


# The signals that stop a command cleanly (exit 130, nothing half-written): Ctrl-C, SIGTERM, SIGHUP (the session
# closed) and SIGUSR1/SIGUSR2 (Slurm's warning before a job's time limit, `sbatch --signal=USR1@60`); one the parent
# ignores (`nohup`) stays ignored. `asp_cli.cli.interrupts` and `asp replay`'s measurement take them alike.
INTERRUPT_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")


class Interrupted(BaseException):
    """One of `INTERRUPT_SIGNALS` under the ``asp`` entry point (`asp_cli.cli.entry`): unwind, then exit with 130.

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


_COLUMNS_SHOWN = 30  # column names a message lists


def shown_columns(names: object) -> str:
    """A file's column names as a message lists them: the first 30, each cut as `shown_name` cuts, then how many
    more. A file of 5,000 columns made a message of 44 KB, and one column named with 200,000 characters one of
    200 KB (a hostile-input round, 2026-12-07)."""
    names = [str(n) for n in names]  # type: ignore[union-attr]
    shown = ", ".join(shown_name(n) for n in names[:_COLUMNS_SHOWN])
    return shown + (f", ... and {len(names) - _COLUMNS_SHOWN:,} more" if len(names) > _COLUMNS_SHOWN else "")


def shown_id(prompt_id: object) -> str:
    """An id as a message shows it: quoted, cut after 80 characters (a whole prompt used as its id; an id of
    200,000 characters made a message of 200 KB)."""
    prompt_id = str(prompt_id)
    if len(prompt_id) <= _ID_SHOWN:
        return repr(prompt_id)
    return f"{prompt_id[:_ID_SHOWN]!r}... ({len(prompt_id):,} characters)"


def counted(count: int, word: str, words: str | None = None) -> str:
    """A count and its noun, singular for 1: "1 bad row", "3 bad rows" ("skipped 1 bad rows", "the schedule's 1
    epoch(s)" read so). Here, below every stage, so that the readers and the integrations say counts as the report
    does (`asp_cli.report.formats` uses this one)."""
    return f"{count:,} {word if count == 1 else words or word + 's'}"
