"""asp_cli.cli.interrupts: the interrupt path's pieces on their own (the end-to-end runs are E29's rows in
tests/test_errors_table.py)."""

from __future__ import annotations

import builtins
import importlib
import signal
import sys

import pytest

from asp_cli.cli import interrupts
from asp_cli.errors import Interrupted


def _interrupted_by_sigusr1(load, name: str) -> None:
    """``load(name)`` with asp's handler on SIGUSR1, which the module sends itself: it must raise `Interrupted`."""
    previous = signal.signal(signal.SIGUSR1, interrupts.handle)
    try:
        with pytest.raises(Interrupted):
            load(name)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_signal_during_an_unbroken_import_is_raised_after_it(tmp_path, monkeypatch):
    """Polars' import runs Rust that calls back into Python's import; the handler's `Interrupted` raised there (SIGTERM
    0.5 s into `asp schedule`) became a Rust panic, a 100-line backtrace above the interrupt's line. `import_unbroken`
    holds the first signal until the import is done and raises it then, in Python code; without it the handler
    raised inside the module being imported."""
    monkeypatch.setattr(interrupts._State, "received", [])
    monkeypatch.setattr(interrupts._State, "closing", False)
    monkeypatch.setattr(builtins, "asp_module_done", False, raising=False)
    (tmp_path / "asp_slow_import.py").write_text(
        "import builtins, os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "for _ in range(200):\n"
        "    time.sleep(0.001)\n"
        "builtins.asp_module_done = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "asp_slow_import", raising=False)
    _interrupted_by_sigusr1(interrupts.import_unbroken, "asp_slow_import")
    assert builtins.asp_module_done and "asp_slow_import" in sys.modules
    assert interrupts._State.received == [signal.SIGUSR1] and not interrupts._State.deferred
    # The same import, not held: the handler raises inside the module, which never finishes.
    monkeypatch.setattr(interrupts._State, "received", [])
    monkeypatch.setattr(builtins, "asp_module_done", False)
    del sys.modules["asp_slow_import"]
    _interrupted_by_sigusr1(importlib.import_module, "asp_slow_import")
    assert not builtins.asp_module_done


def test_a_signal_held_through_an_import_that_fails_is_raised_not_left_held(tmp_path, monkeypatch):
    """A signal held by `import_unbroken` through an import that then failed was neither raised nor cleared: the
    import's error stood for the user's interrupt, and the held flag interrupted the next held import of the same
    process, no signal sent."""
    monkeypatch.setattr(interrupts._State, "received", [])
    monkeypatch.setattr(interrupts._State, "closing", False)
    monkeypatch.setattr(interrupts._State, "deferred", False)
    (tmp_path / "asp_failing_import.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGUSR1)\nraise ImportError('broken')\n")
    (tmp_path / "asp_fine_import.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("asp_failing_import", "asp_fine_import"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    _interrupted_by_sigusr1(interrupts.import_unbroken, "asp_failing_import")
    assert not interrupts._State.deferred and not interrupts._State.deferring
    monkeypatch.setattr(interrupts._State, "received", [])
    interrupts.import_unbroken("asp_fine_import")  # nothing held: no interrupt
