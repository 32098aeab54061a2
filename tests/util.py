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


class Paused:
    """A child process stopped at a test pause point (`asp_cli.testhooks`): no timing, no polling.

    ``Paused(command, point)`` starts ``command`` and returns once the child has reached ``point`` (it then
    waits there); `resume` lets it go on, `wait` collects it. ``reached`` is False when the child exited
    without reaching the point.
    """

    def __init__(self, command: list[str], point: str, *, hang_guard_s: float = 300.0, **popen) -> None:
        import os
        import select
        import subprocess

        ready_r, ready_w = os.pipe()
        go_r, self._go = os.pipe()
        env = {**os.environ, **popen.pop("env", {}), "ASP_TEST_PAUSE": f"{point}:{ready_w},{go_r}"}
        self.proc = subprocess.Popen(command, env=env, pass_fds=(ready_w, go_r), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
        os.close(ready_w)
        os.close(go_r)
        # The guard only stops a broken child from hanging the suite; no verdict depends on time.
        readable, _, _ = select.select([ready_r], [], [], hang_guard_s)
        self.reached = bool(readable) and os.read(ready_r, 1) == b"!"
        os.close(ready_r)

    def resume(self) -> None:
        import os

        if self._go is not None:
            os.close(self._go)
            self._go = None

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 300.0) -> tuple[int, str, str]:
        stdout, stderr = self.proc.communicate(timeout=timeout)
        self.resume()
        return self.proc.returncode, stdout, stderr


def asp_command(*args: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "asp_cli", *args]
