"""The interrupt path shared by the entry point and `guarded`: one handler, one line, exit 130.

`asp_cli.cli.entry` installs `handle` for `SIGNALS` (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) before anything else
imports. The first signal raises `asp_cli.errors.Interrupted` in the main thread (a BaseException Click does not
catch); `guarded` and the entry point turn it into `announce` (one line on stderr, once) and exit 130. A second
signal while the first is still unwinding exits at once, after removing the temporary files being written.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from asp_cli.errors import INTERRUPT_SIGNALS, Interrupted

# SIGHUP: the session that started asp closed (an ssh connection dropped, a terminal shut): it killed asp on the
# spot, its output's temporary file left beside it (an ops round). `nohup` ignores it, and then so does asp.
# SIGUSR1 and SIGUSR2: what Slurm sends before a job's time runs out; their default killed asp so too.
SIGNALS = tuple(getattr(signal, name) for name in INTERRUPT_SIGNALS if hasattr(signal, name))
INTERRUPTED = 130


class _State:
    """The process's interrupt state (one command at a time)."""

    installed = False
    closing = False  # the process is exiting: a signal is counted, never raised
    received: list[int] = []
    announced = False
    deferring = False  # an import Rust calls back into is running: the first signal waits for its end
    deferred = False  # a signal waited so
    previous_hook = sys.unraisablehook


def handle(signum: int, frame: object) -> None:  # noqa: ARG001 - the signal handler signature
    _State.received.append(signum)
    if _State.closing:
        return
    if len(_State.received) == 1 and _State.deferring:  # raised once the import is done (`import_unbroken`)
        _State.deferred = True
        return
    if len(_State.received) == 1:
        raise Interrupted
    force_exit()  # a second signal: the first is taking too long to unwind


def install() -> None:
    """Handle `SIGNALS` from now on (a signal the parent ignores, as for background jobs, stays ignored)."""
    for signum in SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread: keep Python's defaults
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, handle)
                _State.installed = True
    if _State.installed and sys.unraisablehook is not _unraisable:
        _State.previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable


def import_unbroken(name: str) -> None:
    """Import module ``name`` with the first interrupt held until it is done, then raise it (`Interrupted`) here, in
    Python code. Polars' import runs Rust that calls back into Python's import: the handler's `Interrupted` raised
    there became a Rust panic, its text and backtrace (100 lines) printed above the interrupt's one line. (A signal
    mask would not hold it: the kernel hands a process's signal to any thread that does not block it, and Python
    runs the handler in the main thread all the same.) A second signal still exits at once."""
    import importlib

    _State.deferring = True
    try:
        importlib.import_module(name)
    except BaseException:
        # An import that fails after the signal came: the interrupt is what the user asked for, and a held signal
        # left behind would interrupt the next such import in a process that goes on (a review's).
        if _State.deferred:
            _State.deferred = False
            raise Interrupted from None
        raise
    finally:
        _State.deferring = False
    if _State.deferred:
        _State.deferred = False
        raise Interrupted


def _unraisable(unraisable: object) -> None:
    """An `Interrupted` raised where it cannot propagate (a generator's ``finally`` run by the garbage collector,
    a ``__del__``) was swallowed there, with a traceback, and the command went on: stop now, as a second signal
    would, with the one line and nothing half-written."""
    if isinstance(getattr(unraisable, "exc_value", None), Interrupted):
        force_exit()
    _State.previous_hook(unraisable)  # type: ignore[arg-type]


def close() -> None:
    """The process is about to exit: from now on a signal is only counted (`received`)."""
    _State.closing = True


def installed() -> bool:
    """Whether `install` put the handlers in place in this process."""
    return _State.installed


def received() -> bool:
    """Whether a signal reached `handle` in this process."""
    return bool(_State.received)


def begin_command() -> None:
    """A new command in this process (the library's callers and tests run several): announce again."""
    _State.announced = False


def message() -> str:
    """The one line an interrupted run prints: nothing was written, or which outputs are complete."""
    from asp_cli import output

    done = output.published()
    if done:
        return f"Interrupted after writing {', '.join(str(p) for p in done)} (complete); nothing else was written."
    return "Interrupted; nothing was written."


def said() -> None:
    """The command printed its own interrupt line (`asp replay`: what it measured is written): a signal
    handled after it announces nothing more, so that the run ends on that one line."""
    _State.announced = True


def announce() -> None:
    """Print `message` on stderr, once per process."""
    if _State.announced:
        return
    _State.announced = True
    with contextlib.suppress(Exception):
        sys.stderr.write(message() + "\n")
        sys.stderr.flush()


def force_exit() -> None:
    from asp_cli import output

    output.remove_temporary_files()
    announce()
    os._exit(INTERRUPTED)
