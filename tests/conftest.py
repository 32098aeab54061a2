"""Shared fixtures (helpers live in util.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from util import make_prompts, write_jsonl


@pytest.fixture
def prompts_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "prompts.jsonl", make_prompts(300))
