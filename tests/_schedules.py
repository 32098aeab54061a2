"""Schedules built once per test session for the export, replay, sampler and observe tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from util import make_prompts, write_jsonl

PROMPTS = 120
EPOCHS = 2
INSTANCES = 3
SAMPLES = 4
BATCH = 16  # 120 = 7 x 16 + 8: a trailing partial batch per epoch


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A prompt file and a two-epoch schedule made from it by `asp_cli.arrange.pipeline.schedule`."""
    from asp_cli.arrange.pipeline import schedule
    from asp_cli.settings import ScheduleSettings

    folder = tmp_path_factory.mktemp("built")
    rows = make_prompts(PROMPTS)
    for i, row in enumerate(rows):
        row["answer"] = str(i)
    prompts = write_jsonl(folder / "prompts.jsonl", rows)
    out = folder / "schedule.parquet"
    settings = ScheduleSettings(instances=INSTANCES, samples_per_prompt=SAMPLES, epochs=EPOCHS,
                                train_batch_size=BATCH, minibatch_size=8, max_response_tokens=4096)
    schedule([prompts], out, settings=settings)
    return {"prompts": prompts, "schedule": out, "folder": folder}
