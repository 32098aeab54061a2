"""Helpers for tests: small prompt files and prediction frames (import as `from util import ...`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
SAMPLE_PROMPTS = REPO / "sample_data" / "prompts.jsonl"
SHARED_DATA = REPO.parent / "shared" / "data"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_prompts(count: int, seed: int = 0) -> list[dict]:
    """Prompts whose text length varies, with ids and a data source."""
    rng = np.random.default_rng(seed)
    words = ["solve", "the", "integral", "of", "x", "prove", "that", "find", "all", "primes", "sum", "$x^2$"]
    rows = []
    for i in range(count):
        size = int(rng.integers(3, 80))
        text = " ".join(words[int(j)] for j in rng.integers(0, len(words), size))
        rows.append({"id": f"p{i}", "question": text, "data_source": ["a", "b"][i % 2]})
    return rows


def make_predictions(count: int, seed: int = 0, cap: int = 8192) -> pl.DataFrame:
    """A predictions frame with long-tailed lengths, as `prediction.predict_lengths` returns."""
    rng = np.random.default_rng(seed)
    mean = np.clip(rng.lognormal(6.5, 1.0, count), 1, cap).astype(np.int64)
    top = np.clip(mean * rng.uniform(1.0, 2.0, count), 1, cap).astype(np.int64)
    return pl.DataFrame(
        {
            "prompt_tokens": rng.integers(20, 400, count).astype(np.int64),
            "predicted_max_tokens": top,
            "predicted_mean_tokens": np.minimum(mean, top),
            "predicted_tokens": top,
            "prediction_source": ["model"] * count,
        }
    )


def prompt_frame(count: int) -> pl.DataFrame:
    return pl.DataFrame({"row": np.arange(count, dtype=np.int64), "prompt_id": [f"p{i}" for i in range(count)]})
