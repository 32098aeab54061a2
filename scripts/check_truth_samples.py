"""How faithful are the benchmark's true lengths where a group is larger than the real samples of its prompt?

    python scripts/check_truth_samples.py [--data ../shared/data] [--seeds 20]

AIME R1-distill has 8 real samples per prompt; the benchmark keeps samples 0-3 as history and 4-7 as the
truth, so a group of 8 (mix-k8-n8, the b256 workloads) has 4 real samples and 4 more made up
(`asp_cli.bench.compare._samples`). Here the 4 truth samples are completed to 8 the benchmark's way and, for
comparison, by drawing with replacement from the 4 (the benchmark's way before 2026-12-03), and both are set
against all 8 real samples of the same prompts: the mean group maximum (what the padding and the tail cost)
and the mean within-group sd of log length. Prints a table; about 5 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
CAP = 16_000
GROUP = 8
DRAWN = "the 4 truth samples and 4 drawn (the benchmark)"
RESAMPLED = "8 resampled from the 4 truth samples (before 2026-12-03)"


def completed(truth: list[list[int]], how: str, seed: int) -> np.ndarray:
    from asp_cli.bench.compare import _samples

    rng = np.random.default_rng(seed)
    if how == DRAWN:
        return np.clip(_samples(truth, ["aime"] * len(truth), GROUP, rng), 1, CAP)
    return np.array([np.asarray(v)[rng.integers(0, len(v), GROUP)] for v in truth])


def row(name: str, groups: list[np.ndarray]) -> str:
    top = np.mean([g.max(axis=1).mean() for g in groups])
    sd = np.mean([np.log(g).std(axis=1, ddof=1).mean() for g in groups])
    return f"| {name} | {top:,.0f} | {sd:.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    path = args.data / "aime_r1distill1.5b_lengths" / "generations.csv"
    if not path.is_file():
        print(f"Skipped: {path} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    gens = pl.read_csv(path).filter(pl.col("run") == "A").sort(["aime_id", "gen_index"])
    real = np.array(gens.group_by("aime_id", maintain_order=True).agg(pl.col("completion_tokens"))
                    ["completion_tokens"].to_list(), dtype=np.float64)
    truth = [[int(v) for v in r[4:]] for r in real]
    print(f"AIME R1-distill, {real.shape[0]} prompts, groups of {GROUP} (mean over {args.seeds} seeds)\n")
    print("| group of 8 | mean group maximum, tokens | within-group sd of log length |")
    print("|---|---:|---:|")
    print(row("all 8 real samples", [real]))
    for how in (DRAWN, RESAMPLED):
        print(row(how, [completed(truth, how, s).astype(np.float64) for s in range(args.seeds)]))


if __name__ == "__main__":
    main()
