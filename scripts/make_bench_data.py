"""Rebuild asp_cli/bench/data/ (the benchmark data that may ship) from ../shared/data.

Usage: python scripts/make_bench_data.py [--shared ../shared/data]

Only the ZeroEval folder may ship (Apache-2.0 outputs of GSM8K-test and MATH level-5 problems, both MIT), and
only what `asp bench` reads from it: the problems' dataset, id and text, and one row per (dataset, prompt,
generator) output length in characters, for the generators that answered every prompt of their dataset (the
others never enter a workload), in the source file's row order so that a workload built from the copy is the
workload built from ../shared/data, row for row. See asp_cli/bench/data/README.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "asp_cli" / "bench" / "data"
FOLDER = "zeroeval_math_gsm_outputs"
# The generators `asp_cli.bench.compare` leaves out (o1's hidden reasoning is not in its stored length).
EXCLUDED = ("openai/o1-mini-2024-09-12", "openai/o1-preview-2024-09-12")


def build(shared: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    folder = shared / FOLDER
    problems = pl.read_ndjson(folder / "problems.jsonl").select("dataset", "id", "problem")
    lengths = pl.read_csv(folder / "lengths.csv.gz", schema_overrides={"id": pl.String})
    lengths = lengths.filter(~pl.col("generator").is_in(EXCLUDED))
    prompts = problems.group_by("dataset").len().rename({"len": "prompts"})
    complete = (
        lengths.group_by("dataset", "generator").agg(pl.col("id").n_unique().alias("answered"))
        .join(prompts, on="dataset").filter(pl.col("answered") == pl.col("prompts")).select("dataset", "generator")
    )
    lengths = lengths.join(complete, on=["dataset", "generator"], how="semi", maintain_order="left")
    return problems, lengths.select("dataset", "id", "generator", pl.col("output_chars").cast(pl.Int32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    problems, lengths = build(args.shared)
    OUT.mkdir(parents=True, exist_ok=True)
    # Fixed writer options, so the same source gives the same bytes.
    options = {"compression": "zstd", "compression_level": 19, "statistics": False}
    problems.write_parquet(OUT / "zeroeval_problems.parquet", **options)
    lengths.write_parquet(OUT / "zeroeval_lengths.parquet", **options)
    for name in ("zeroeval_problems.parquet", "zeroeval_lengths.parquet"):
        print(f"{OUT / name}: {(OUT / name).stat().st_size:,} bytes")
    print(f"{problems.height:,} problems, {lengths.height:,} output lengths")


if __name__ == "__main__":
    main()
