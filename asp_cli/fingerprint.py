"""Fingerprints of files: SHA-256 of their bytes, which schedules, histories and exports record.

Names are left out, so a moved or renamed file keeps its fingerprint; several files in order combine into one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from asp_cli.errors import InputError, no_such_file

_CHUNK_BYTES = 1 << 22


def bytes_fingerprint(data: bytes) -> str:
    """``sha256:`` and the hex digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_fingerprint(paths: Path | str | Sequence[Path | str]) -> str:
    """The fingerprint of one file's bytes, or of several files' in order (`combine_fingerprints` of theirs).

    Raises
    ------
    InputError
        A file that is missing or cannot be read (every file fingerprinted is an input).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    prints = []
    for path in paths:
        digest = hashlib.sha256()
        try:
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(_CHUNK_BYTES), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            raise no_such_file(path) from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory; name a file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__}); check the file's "
                             "permissions") from None
        prints.append("sha256:" + digest.hexdigest())
    return combine_fingerprints(prints)


def combine_fingerprints(prints: Sequence[str]) -> str:
    """One fingerprint for several files: the file's own for one, else SHA-256 over theirs joined by newlines."""
    if len(prints) == 1:
        return prints[0]
    return "sha256:" + hashlib.sha256("\n".join(prints).encode()).hexdigest()


def recorded_order(inputs: object, paths: Sequence[Path | str]) -> list[Path] | None:
    """``paths`` in the order a schedule's metadata ``inputs`` (each ``{"name", "fingerprint"}``) records them, where
    they are those files given in another order (a Hugging Face dataset's shards, listed the other way round), else
    None."""
    if not isinstance(inputs, list) or len(inputs) != len(paths) or len(paths) < 2:
        return None
    recorded = [entry.get("fingerprint") if isinstance(entry, dict) else None for entry in inputs]
    given = {file_fingerprint(path): Path(path) for path in paths}
    if len(given) != len(paths) or set(given) != set(recorded):
        return None
    ordered = [given[fingerprint] for fingerprint in recorded]  # type: ignore[index]
    return None if ordered == [Path(p) for p in paths] else ordered
