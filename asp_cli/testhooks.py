"""Pause points for tests, so that races and interrupts are tested without timing.

A test sets ``ASP_TEST_PAUSE=POINT:READY_FD,GO_FD`` (two pipe ends it passes to the child). When the process
first reaches ``pause(POINT)``, it writes one byte to ``READY_FD`` and blocks reading ``GO_FD`` until the test
writes a byte or closes its end, or a signal interrupts the wait. Without the variable (every real run),
``pause`` returns at once. The wait is no timing: it ends when the test says so, or at a signal. Points: ``entry`` (signal handlers installed, nothing else imported yet),
``callback`` (inside the command line parser, before the command), ``publish`` (the output's temporary file
is complete, not yet in place), ``published`` (the output is in place), ``lock-wait`` (about to wait for an
output's lock) and ``locked`` (holding it, the old output read).
"""

from __future__ import annotations

import os
import select

ENV = "ASP_TEST_PAUSE"
_SLICE_S = 0.05
_fired: set[str] = set()


def pause(point: str) -> None:
    """Block at ``point`` when a test asked to (see the module docstring); otherwise return at once."""
    spec = os.environ.get(ENV)
    if not spec or point in _fired:
        return
    name, _, fds = spec.partition(":")
    if name != point:
        return
    _fired.add(point)
    ready, go = (int(fd) for fd in fds.split(","))
    os.write(ready, b"!")
    # Wait in short slices: a signal the kernel hands to another thread (Polars' and PyArrow's pools run
    # beside the main one) does not interrupt a blocking read, and Python runs handlers between slices.
    while not select.select([go], [], [], _SLICE_S)[0]:
        pass
    os.read(go, 1)
