"""Atomic output: write to a temporary file beside the target, then rename it into place.

A crash, Ctrl-C or SIGKILL at any moment leaves either the old file or the new one, never a partial one.
The temporary file is removed on any exception (KeyboardInterrupt included); only SIGKILL can leave one
behind, and its name (``.NAME.asp-tmp-*``) says what it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from asp_cli.errors import OutputError, SettingsError

TMP_MARKER = ".asp-tmp-"
PARQUET_SUFFIXES = (".parquet", ".pq")


def check_parquet_name(output: Path, *, writer: str, other: str = "") -> None:
    """Refuse a Parquet output whose name says another format (docs/errors.md E34), for every command.

    A Parquet file named ``.csv`` or ``.jsonl`` is misread by whoever trusts the name, and asp's own readers
    refuse it later (E09). ``writer`` names what writes Parquet (``asp schedule``, ``--format verl``);
    ``other`` adds another way out (" or pass --format jsonl").
    """
    suffix = Path(output).suffix
    if suffix.lower() in PARQUET_SUFFIXES:
        return
    name = f"the name ends in {suffix!r}" if suffix else "the name has no extension"
    raise SettingsError(f"{output}: {writer} writes Parquet, but {name}; name it .parquet{other}")


def check_output_path(output: Path, inputs: Iterable[Path] = (), *, force: bool = False) -> None:
    """Refuse an output that equals an input, or that exists without ``force``.

    Raises
    ------
    OutputError
        With the path and the fix.
    """
    output = Path(output)
    for path in inputs:
        path = Path(path)
        if path.exists() and output.exists() and os.path.samefile(path, output):
            raise OutputError(f"output {output} is also an input; write the output somewhere else")
        if os.path.abspath(path) == os.path.abspath(output):
            raise OutputError(f"output {output} is also an input; write the output somewhere else")
    if output.is_dir():
        raise OutputError(f"{output} is a directory; name a file")
    if output.exists() and not force:
        raise OutputError(f"{output} exists; pass --force to replace it")
    _check_regular(output)
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"folder {parent} does not exist; create it first")
    _probe_writable(_target(output))


def _check_regular(output: Path) -> None:
    """Refuse a device, pipe or socket (``-o /dev/null``): renaming onto it would replace the node itself."""
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise OutputError(f"{output} is not a regular file (a device, pipe or socket); name a file")


def _target(output: Path) -> Path:
    """The file to replace: a symlink's target (the link stays a link), else ``output`` itself."""
    return Path(os.path.realpath(output)) if output.is_symlink() else output


def _tmp_path(output: Path) -> Path:
    parent = output.parent if str(output.parent) else Path(".")
    return parent / f".{output.name}{TMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}"


def _cannot_write(output: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or type(exc).__name__
    return OutputError(f"cannot write {output} ({reason}); check the folder's permissions and free space, "
                       "or write somewhere else")


def _probe_writable(output: Path) -> None:
    """Fail before the work, not after it, when the output's folder cannot take a new file."""
    probe = _tmp_path(output)
    try:
        with open(probe, "xb"):
            pass
    except OSError as exc:
        raise _cannot_write(output, exc) from None
    with contextlib.suppress(OSError):
        probe.unlink()


# Errors of writing the output whatever the path in them; EACCES and friends count only when they name it.
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


@contextlib.contextmanager
def atomic_path(output: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``output``; rename it onto ``output`` when the block ends cleanly."""
    output = Path(output)
    _check_regular(output)
    target = _target(output)
    tmp = _tmp_path(target)
    try:
        yield tmp
        if not tmp.exists():
            raise OutputError(f"nothing was written for {output}")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.errno in _OUTPUT_ERRNOS or str(tmp) in str(exc) or str(target) in str(exc):
            raise _cannot_write(output, exc) from None
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_bytes_atomic(output: Path, data: bytes) -> None:
    """Write ``data`` to ``output`` atomically."""
    with atomic_path(output) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(output: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``output`` atomically."""
    write_bytes_atomic(output, text.encode("utf-8"))
