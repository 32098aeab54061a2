"""Shared fixtures (helpers live in util.py)."""

from __future__ import annotations

from pathlib import Path

import os
import signal

import pytest
from hypothesis import settings

from util import make_prompts, write_jsonl

# The suite is deterministic: property and fuzz tests draw the same examples on every run, so CI never turns
# red on a draw it had not seen before. To hunt for new failures, run with HYPOTHESIS_PROFILE=explore (fresh
# random draws on every run) and add what it finds as an @example.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The interrupt tests send SIGINT and SIGTERM to asp children, and asp leaves a signal ignored when its parent
# ignores it (a background job: `pytest &` in a script starts with SIGINT ignored, and the children inherit
# that): the child never stopped and the test hung until its 300 s guard. A handler here (not an ignore) is
# reset to the default in every child at exec, so the children start as they would from a terminal.
for _signum, _handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
    if signal.getsignal(_signum) is signal.SIG_IGN:
        signal.signal(_signum, _handler)


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "prompts.jsonl", make_prompts(300))
