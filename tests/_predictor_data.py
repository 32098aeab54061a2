"""Tiny synthetic training data shared by the predictor tests (lengths grow with words and 'prove')."""

from __future__ import annotations

import numpy as np
import polars as pl

from asp_cli import columns as C

WORDS = ("find", "the", "value", "of", "sum", "integer", "triangle", "prove", "that", "each")


def make_data(n_prompts: int = 80, samples: int = 4, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    texts, ids, rows = [], [], []
    for i in range(n_prompts):
        n_words = int(rng.integers(3, 40))
        words = rng.choice(WORDS, n_words).tolist()
        texts.append(" ".join(words) + f" $x^{i % 7}$")
        ids.append(f"p{i}")
        base = 50 + 10 * n_words + 200 * words.count("prove")
        for _ in range(samples):
            rows.append((f"p{i}", int(base * np.exp(rng.normal(0, 0.2)))))
    prompts = pl.DataFrame({
        C.PROMPT_ID: ids, C.PROMPT_TEXT: texts,
        C.N_MESSAGES: pl.Series([1] * n_prompts, dtype=pl.Int32),
        C.DATA_SOURCE: pl.Series([None] * n_prompts, dtype=pl.String),
        C.DIFFICULTY: pl.Series([None] * n_prompts, dtype=pl.Float64),
    })
    lengths = pl.DataFrame({
        C.PROMPT_ID: [r[0] for r in rows], C.RESPONSE_TOKENS: [r[1] for r in rows],
        C.TRUNCATED: pl.Series([None] * len(rows), dtype=pl.Boolean),
        C.EPOCH: pl.Series([None] * len(rows), dtype=pl.Int32),
    })
    return prompts, lengths


def write_jsonl(path, prompts: pl.DataFrame, lengths: pl.DataFrame) -> None:
    """One row per sample: id, prompt, response_tokens."""
    lengths.join(prompts, on=C.PROMPT_ID).select(
        pl.col(C.PROMPT_ID).alias("id"), pl.col(C.PROMPT_TEXT).alias("prompt"), C.RESPONSE_TOKENS
    ).write_ndjson(path)
