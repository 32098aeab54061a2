"""A small schedule, its dataset and short observed lengths for the replay and calibration tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from util import make_prompts, write_jsonl

PROMPTS = 24
SAMPLES = 2
INSTANCES = 2


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """24 prompts, 2 instances, 2 samples, minibatches of 4 prompts; lengths of 4 to 39 tokens per sample.
    Made for planned dispatch, so each instance keeps to its own queue (what the order tests check)."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    folder = tmp_path_factory.mktemp("replay")
    rows = make_prompts(PROMPTS, seed=3)
    prompts = write_jsonl(folder / "prompts.jsonl", rows)
    out = folder / "schedule.parquet"
    schedule([prompts], out, settings=ScheduleSettings(instances=INSTANCES, samples_per_prompt=SAMPLES,
                                                       train_batch_size=8, minibatch_size=4,
                                                       max_response_tokens=64, dispatch="planned"))
    rng = np.random.default_rng(0)
    lengths = write_jsonl(folder / "lengths.jsonl", [
        {"prompt_id": r["id"], "response_tokens": int(rng.integers(4, 40))} for r in rows for _ in range(SAMPLES)])
    return {"prompts": prompts, "schedule": out, "lengths": lengths, "folder": folder}


def forced_lengths(lengths: Path) -> dict[str, list[int]]:
    """The observed lengths per prompt id, in file order (what replay forces for samples 0, 1, ...)."""
    frame = pl.read_ndjson(lengths)
    out: dict[str, list[int]] = {}
    for pid, n in zip(frame["prompt_id"].to_list(), frame["response_tokens"].to_list()):
        out.setdefault(pid, []).append(n)
    return out
