"""Atomic output: write to a temporary file beside the target, then rename it into place.

A crash, Ctrl-C or SIGKILL at any moment leaves either the old file or the new one, never a partial one.
The temporary file is removed on any exception (KeyboardInterrupt included); only SIGKILL can leave one
behind, and its name (``.NAME.asp-tmp-*``) says what it is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import OutputError

TMP_MARKER = ".asp-tmp-"


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
    if output.exists() and not force:
        raise OutputError(f"{output} exists; pass --force to replace it")
    if output.exists() and output.is_dir():
        raise OutputError(f"{output} is a directory; name a file")
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"folder {parent} does not exist; create it first")


@contextlib.contextmanager
def atomic_path(output: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``output``; rename it onto ``output`` when the block ends cleanly."""
    output = Path(output)
    parent = output.parent if str(output.parent) else Path(".")
    tmp = parent / f".{output.name}{TMP_MARKER}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        yield tmp
        if not tmp.exists():
            raise OutputError(f"nothing was written for {output}")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, output)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_bytes_atomic(output: Path, data: bytes) -> None:
    """Write ``data`` to ``output`` atomically."""
    with atomic_path(output) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(output: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``output`` atomically."""
    write_bytes_atomic(output, text.encode("utf-8"))
