"""Shared fixtures (helpers live in util.py)."""

from __future__ import annotations

from pathlib import Path

import os

import pytest
from hypothesis import settings

from util import make_prompts, write_jsonl

# The suite is deterministic: property and fuzz tests draw the same examples on every run, so CI never turns
# red on a draw it had not seen before. To hunt for new failures, run with HYPOTHESIS_PROFILE=explore (fresh
# random draws on every run) and add what it finds as an @example.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "prompts.jsonl", make_prompts(300))
