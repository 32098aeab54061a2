"""Memory allocators for one large batch job: give freed memory back to the system instead of keeping it.

`asp` reads prompt files a batch at a time, so the memory it really holds grows with the number of prompts,
not with the bytes of text; but the allocators of the libraries it uses keep what a batch freed for the next
one, and by default keep it long: Arrow's mimalloc pool, Polars' jemalloc (dirty pages decay over seconds)
and glibc's malloc (one arena per thread, trimmed only above 128 kB of free top). At 1M prompts that retention
was about half of `asp predictor predict`'s peak (0.53 of it against 0.36 GiB with the settings below; the
figures are in docs/benchmarks.md, "Memory: where it goes now").

So the command line, before it imports Polars or PyArrow, asks for:

- Arrow's system pool (``ARROW_DEFAULT_MEMORY_POOL=system``: plain malloc/free, so glibc's trimming applies);
- jemalloc pages given back as soon as they are free (``_RJEM_MALLOC_CONF``, the prefixed ``MALLOC_CONF`` of
  the jemalloc Polars links; read when Polars first allocates);
- glibc: at most two malloc arenas and a 1 MiB trim threshold (``mallopt``, the runtime form of
  ``MALLOC_ARENA_MAX`` and ``MALLOC_TRIM_THRESHOLD_``).

Each is left alone when the user set it in the environment (Polars' own jemalloc defaults, which a parent
process that imported Polars passes on, do not count), and ``ASP_LEAN_MEMORY=0`` keeps every library's
default (faster by up to a fifth at 1M prompts on 2 cores, for about 0.15 GiB more). The Python library
(``import asp_cli``) never changes allocators: only the `asp` process does, for itself and its children.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

OPT_OUT = "ASP_LEAN_MEMORY"
ENVIRONMENT = {
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0",
}
# What a parent process that imported Polars leaves in the environment (Polars writes its own defaults there
# when it starts): not the user's choice, so asp's settings still apply (appended; later options win).
_INHERITED = {"_RJEM_MALLOC_CONF": ("dirty_decay_ms:500,muzzy_decay_ms:1000",
                                    "dirty_decay_ms:500,muzzy_decay_ms:1000,thp:always,metadata_thp:always")}
# glibc's mallopt parameters (malloc.h) and the environment variables that would set them at start-up.
_M_TRIM_THRESHOLD, _M_ARENA_MAX = -1, -8
MALLOPT = {"MALLOC_TRIM_THRESHOLD_": (_M_TRIM_THRESHOLD, 1 << 20), "MALLOC_ARENA_MAX": (_M_ARENA_MAX, 2)}


def lean_allocators() -> dict[str, str]:
    """Apply the settings above that the environment does not override; return what was set (for tests)."""
    if os.environ.get(OPT_OUT, "1").strip() in ("0", "false", "no", "off"):
        return {}
    applied: dict[str, str] = {}
    if "polars" not in sys.modules and "pyarrow" not in sys.modules:  # too late once they allocated
        for name, value in ENVIRONMENT.items():
            current = os.environ.get(name)
            if current is None or current in _INHERITED.get(name, ()):
                # jemalloc reads its options left to right, the last one winning.
                os.environ[name] = f"{current},{value}" if current else value
                applied[name] = os.environ[name]
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc (musl): nothing to tune
            mallopt = ctypes.CDLL(None).mallopt
            for name, (parameter, value) in MALLOPT.items():
                if name not in os.environ and mallopt(parameter, value) == 1:
                    applied[name] = str(value)
    return applied
