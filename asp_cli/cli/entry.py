"""The `asp` entry point: signal handlers first, then the command line, then one exit path.

This module imports nothing heavy, so Ctrl-C or SIGTERM is handled from the first moment asp's own code
runs: while Typer and the commands import, while options are parsed, while a command works, and while the
process exits. Whenever a signal arrives, asp prints one line (``Interrupted; nothing was written.``, or
which outputs were already complete) and exits with 130; nothing waits on a worker thread. A second signal
while the first is still unwinding exits at once, after removing any temporary output file.

How: the handler raises `Interrupted` once (a BaseException that Click does not catch, so it does not
print ``Aborted!`` and exit 1); `asp_cli.cli.common.guarded` and `main` turn it into 130. Before the
process exits, the interrupt signals (`SIGNALS`) are blocked and any signal that arrived is still counted, so no signal
can land in the interpreter's shutdown (where Python would die of it, -2, or print a traceback).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys

from asp_cli import testhooks
from asp_cli.cli import interrupts
from asp_cli.cli.allocators import lean_allocators
from asp_cli.cli.interrupts import INTERRUPTED, SIGNALS, Interrupted, announce, install


class ClosedStdout(io.TextIOBase):
    """stdout where the process started with it closed (`>&-`): writing to it fails as a full one does (exit 7,
    E52), where ``sys.stdout`` was None and the write an AttributeError, exit 70."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")


def _open_closed_streams() -> None:
    """Open /dev/null on each standard stream the process started without (`<&-`, `>&-`, `2>&-`: a daemon, a
    scheduler's prolog). Python leaves ``sys.stderr`` None there, and every command died of it (exit 70, said
    nowhere); and the descriptor would go to the next file opened, an output's temporary file, for a library's
    own messages to land in. stdin and stderr then read and write nothing; stdout refuses data (`ClosedStdout`)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if fd == 1:
            sys.stdout = ClosedStdout()
        else:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",
                                    closefd=False))


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{value}\n")
    return 1


def _run() -> int:
    testhooks.pause("entry")
    from asp_cli.cli.main import app  # Typer and every command group: imported under the handler

    try:
        app(prog_name="asp")
    except SystemExit as exc:
        return _exit_code(exc.code)
    except OSError as exc:  # Click's own output (--help, --version, usage) to a full disk or a closed pipe
        from asp_cli.cli.common import stdout_fix
        from asp_cli.errors import ExitCode

        with contextlib.suppress(Exception):
            sys.stderr.write(f"Error: cannot write to stdout ({exc.strerror or type(exc).__name__}); {stdout_fix(exc)}\n")
        return int(ExitCode.OUTPUT)
    return 0


def _block() -> bool:
    """Block the interrupt signals (`SIGNALS`), then ignore them; whether one arrived at any time (handled, or pending then).

    Blocking covers the main thread only: a signal can still reach a thread of a library (Polars', Arrow's),
    and Python's own shutdown puts SIG_DFL back in place of a Python handler, so a Ctrl-C there killed the
    process (-2, no message) after its output was complete. Handlers that only count (`interrupts.close`), then
    SIG_IGN (which shutdown leaves alone), close that window.
    """
    interrupts.close()
    arrived = interrupts.received()
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no pthread_sigmask on this platform
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        arrived = arrived or bool(signal.sigpending() & set(SIGNALS))
    for signum in SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_IGN)
    return arrived or interrupts.received()


def _flush() -> None:
    """Flush stdout and stderr now; a stream that cannot take its data goes to /dev/null, so that the
    interpreter's own flush at exit cannot fail (Python would print a traceback and exit 120)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a full disk or a closed pipe; the command already reported it
            with contextlib.suppress(Exception):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())


def main() -> None:
    """Console-script entry point (`asp`, `python -m asp_cli`)."""
    _open_closed_streams()
    install()
    lean_allocators()
    try:
        code = _run()
        interrupted = _block()
    except (Interrupted, KeyboardInterrupt):
        interrupted = _block() or True
        code = INTERRUPTED
    if interrupted:
        code = INTERRUPTED
        announce()
    _flush()
    sys.exit(code)
