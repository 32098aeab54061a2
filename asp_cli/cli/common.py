"""What every command shares: error-to-exit-code mapping, stderr messages, JSON on stdout, progress bars.

Library code never prints and never exits; commands call the library inside `guarded`, which turns an
`AspError` into one ``Error: ...`` line on stderr and its documented exit code (see docs/errors.md).
``--traceback`` or ``ASP_TRACEBACK=1`` shows the traceback as well.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import signal
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import typer

from asp_cli.errors import AspError, ExitCode, on_the_command_line
from asp_cli.settings import NO_LAG_BOUND  # re-exported: the CLI modules import it from here

_state = {"traceback": False}


def set_traceback(enabled: bool) -> None:
    _state["traceback"] = enabled


def traceback_enabled() -> bool:
    # ASP_TRACEBACK=false or no meant off, as 0 does (a hostile-input round found them turning it on).
    return _state["traceback"] or os.environ.get("ASP_TRACEBACK", "").strip().lower() not in ("", "0", "false",
                                                                                            "no", "off")


def say(message: str) -> None:
    """A message for people: stderr, never stdout; each line's control characters written as escapes (tabs kept).
    Summaries quote what files hold: `asp simulate` printed a schedule's recorded preset name, and an escape
    sequence there reached the terminal as one (a hostile-input audit, 2026-12-07)."""
    from asp_cli.errors import printable

    typer.echo("\n".join(printable(line) for line in message.split("\n")), err=True)


def one_line(message: str) -> str:
    """An error message as one line: control characters written as escapes (``\\n``, ``\\x1b``). Messages
    quote what files hold (column names, a server's answer): a JSON key with a newline split the line in two,
    and one with an escape sequence reached the terminal as one."""
    from asp_cli.errors import printable

    return printable(message)


def write_stdout(text: str) -> None:
    """Data on stdout, flushed; a stdout that cannot take it (a full disk, a closed pipe) is exit 7."""
    from asp_cli.errors import OutputError

    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError) as exc:  # ValueError: stdout already closed
        from asp_cli import output

        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        done = output.published()  # the command's files are in place: say so, so that nobody makes them again
        written = f" ({', '.join(str(p) for p in done)} written in full)" if done else ""
        raise OutputError(f"cannot write to stdout ({reason}){written}; {stdout_fix(exc)}") from None


def stdout_fix(exc: BaseException) -> str:
    """What to do about a stdout that refused data: one closed when asp started (`>&-`) has no space to free."""
    if isinstance(exc, OSError) and exc.errno == errno.EBADF:
        return "send it to a file or /dev/null"
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:  # `| head`: no space to free either
        return "the program it was piped to stopped reading before the end (head?): let it read all, or send it to a file"
    return "free space where it goes, or send it elsewhere"


JSON_SIGNIFICANT_DIGITS = 6  # a --json number's precision: `asp simulate` printed 316.1459198875969 s beside 348.938


def emit_json(document: Any) -> None:
    """Machine-readable output: one JSON document on stdout, keys sorted for stable diffs, every number that is not
    whole given to `JSON_SIGNIFICANT_DIGITS` significant digits, its whole part always whole (the library's own
    results keep theirs)."""
    write_stdout(json.dumps(_short_floats(document), indent=2, sort_keys=True, allow_nan=False) + "\n")


def _short_floats(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value) or value.is_integer():
            return value
        whole = len(str(int(abs(value)))) if abs(value) >= 1 else 0
        if whole:  # never the whole part: 1234567.891 is 1234568.0, not 1234570.0
            return round(value, max(0, JSON_SIGNIFICANT_DIGITS - whole)) + 0.0
        return float(f"{value:.{JSON_SIGNIFICANT_DIGITS}g}") + 0.0
    if isinstance(value, dict):
        return {k: _short_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_short_floats(v) for v in value]
    return value


def output_option(*names: str, default: Any = ..., help: str) -> Any:  # noqa: A002 - Typer's own name
    """A Typer option for a file asp writes: it keeps the text given, so ``out.parquet/`` can be refused; an empty
    one is a usage error (exit 2) naming the option."""
    return typer.Option(default, *names, help=help, parser=_output_text, metavar="<path>")


def _output_text(text: str) -> Any:
    """Parse an output option (`asp_cli.output.output_path`). An empty path (``-o ""``, an unset shell variable)
    read as the current folder: "Error: . is a directory", exit 7, or a refused name ".", exit 4."""
    from asp_cli.output import output_path

    if not text.strip():
        raise typer.BadParameter(f"the path is empty{' (only blanks)' if text else ''}; name the file to write")
    return output_path(text)



def lag_bound(text: str) -> int | float | str:
    """Parse ``--max-lag``: a number of steps (a fraction is verl's ``staleness_threshold``), or ``none`` for no
    bound (`NO_LAG_BOUND`), which overrides a bound recorded in a schedule or set by a workload. The number's range
    is checked where the settings are (`asp_cli.settings.check_lag`)."""
    if text.strip().lower() == NO_LAG_BOUND:
        return NO_LAG_BOUND
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"give a number of training steps (0, 2, or a fraction such as verl's "
                                 f"staleness_threshold 0.1), or {NO_LAG_BOUND} for no bound (got {text!r})") from None


def source_key_option() -> Any:
    """``--source-key``: the prompts' data source column where it is not found by its usual names."""
    return typer.Option(None, "--source-key", help="The data source column, if not detected (data_source, source, "
                        "dataset, ... or data_source inside metadata or extra_info); a dotted path reaches into an "
                        "object (metadata.task). The history's correction and the probe group prompts by it.")


def difficulty_key_option() -> Any:
    """``--difficulty-key``: the prompts' difficulty column where it is not found by its usual names."""
    return typer.Option(None, "--difficulty-key", help="The difficulty column, if not detected (difficulty, level); "
                        "a dotted path reaches into an object. A number, or text holding one ('Level 5'): the "
                        "history's correction is fitted per difficulty within a source where it tells them apart.")


def lag_option(default: Any, help: str) -> Any:  # noqa: A002 - Typer's own name
    """A Typer option for ``--max-lag`` that also takes ``none`` (`lag_bound`)."""
    return typer.Option(default, "--max-lag", help=help, parser=lag_bound, metavar="<steps|fraction|none>")


def _raise_interrupt(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def _interrupt_in_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a Rust panic (pyo3's PanicException) of an interrupt raised in Python code that Rust called:
    a Ctrl-C or SIGTERM that landed while Polars imported (its startup registration calls Python's import) panicked
    there, and the run said "internal error ...; this is a bug in asp" above its "Interrupted" line."""
    text = str(exc)
    return type(exc).__name__ == "PanicException" and any(
        f"<class '{name}'>" in text for name in ("asp_cli.errors.Interrupted", "KeyboardInterrupt"))


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Run a command body, mapping failures to one stderr line and a documented exit code.

    Interrupts (Ctrl-C, SIGTERM) print `asp_cli.cli.interrupts.message` once and exit 130. Under the ``asp``
    entry point its handlers are already installed; otherwise (the library's own callers, tests) SIGTERM is
    routed to KeyboardInterrupt for the command's duration.
    """
    from asp_cli import output
    from asp_cli.cli import interrupts

    output.begin_command()
    interrupts.begin_command()
    command_line = on_the_command_line()
    command_line.__enter__()
    own = not interrupts.installed()
    previous = signal.getsignal(signal.SIGTERM)
    if own:
        with contextlib.suppress(ValueError):  # not in the main thread (tests): keep the default
            signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if not own and "polars" not in sys.modules:  # a signal in its import panicked in Rust (`import_unbroken`)
            interrupts.import_unbroken("polars")
        yield
    except AspError as exc:
        if traceback_enabled():
            traceback.print_exc()
        say(f"Error: {one_line(str(exc))}")
        raise typer.Exit(int(exc.exit_code)) from None
    except (KeyboardInterrupt, interrupts.Interrupted):
        interrupts.announce()
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except typer.Exit:
        raise
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the last line of defence: a bug, reported as one (a Rust panic in
        # Polars or PyArrow is a BaseException, pyo3's PanicException: it printed a traceback and exited 1)
        if traceback_enabled():
            traceback.print_exc()
        if _interrupt_in_panic(exc):
            interrupts.announce()
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG and exc.filename:
            # An input named past the file system's limit (255 bytes a part) cannot exist; every reader's
            # first look (Path.is_file, is_dir) raised it: exit 70, "a bug". Outputs are refused before
            # (`asp_cli.output.check_output_path`, exit 7).
            say(f"Error: {one_line(str(exc.filename))}: the name is too long for the file system, so no such "
                "file exists; give the file's real path")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        say(
            f"Error: internal error ({type(exc).__name__}: {one_line(str(exc))}); this is a bug in asp. "
            "Rerun as 'asp --traceback <command> ...' and report it."
        )
        raise typer.Exit(int(ExitCode.INTERNAL)) from None
    finally:
        command_line.__exit__(None, None, None)
        if own:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, previous)


def show_progress(quiet: bool) -> bool:
    """Progress bars only when stderr is a terminal and the user did not ask for quiet."""
    return not quiet and sys.stderr.isatty()
