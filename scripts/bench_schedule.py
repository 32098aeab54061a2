"""Speed and memory of `asp schedule` at scale, next to a bare Polars read plus Parquet write of the same file.

Generates N prompts by varying the sample prompts (new ids, the numbers in each problem redrawn, a random
amount of the text repeated so lengths spread), writes them as JSONL, then runs each measured command in its
own process and reads its wall time and peak resident memory from the kernel (os.wait4).

Usage:
    python scripts/bench_schedule.py --prompts 1000000            # the issue's 1M figure
    python scripts/bench_schedule.py --prompts 10000000 --epochs 1 # the 10M scale run
    python scripts/bench_schedule.py ... --write-docs              # also update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "prompts.jsonl"


def make_prompts(count: int, path: Path, seed: int = 0) -> None:
    """Write ``count`` prompts varied from the sample prompts, in chunks to bound memory."""
    base = pl.read_ndjson(SAMPLE)
    texts = base.select(pl.col("prompt").list.first().struct.field("content")).to_series()
    sources = base["data_source"]
    rng = np.random.default_rng(seed)
    chunk = 500_000
    with open(path, "wb") as handle:
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            pick = rng.integers(0, base.height, size)
            number = rng.integers(2, 10_000, size)
            repeat = rng.integers(0, 3, size)
            frame = pl.DataFrame(
                {
                    "id": pl.Series(np.arange(start, start + size)).cast(pl.String).str.pad_start(9, "0"),
                    "text": texts.gather(pick),
                    "data_source": sources.gather(pick),
                    "number": number.astype(str),
                    "repeat": repeat,
                }
            ).with_columns(
                pl.col("text").str.replace_all(r"\d+", pl.col("number"), literal=False),
            ).with_columns(
                (pl.col("text") + pl.lit(" Also consider the case ") + pl.col("number")
                 + pl.lit(".").repeat_by(pl.col("repeat")).list.join("")).alias("text")
            )
            out = frame.select(
                "id",
                "data_source",
                pl.concat_list(pl.struct(pl.lit("user").alias("role"), pl.col("text").alias("content"))).alias("prompt"),
            )
            out.write_ndjson(handle)


def measure(command: list[str]) -> tuple[float, float, int]:
    """Run a command; return (wall seconds, peak RSS in GiB, exit code)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode() if process.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(stderr)
    return wall, usage.ru_maxrss / 1024 / 1024, code


BARE = (
    "import polars as pl, sys; "
    "pl.read_ndjson(sys.argv[1]).write_parquet(sys.argv[2])"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--workdir", type=Path, default=None, help="Where to write the generated files.")
    parser.add_argument("--keep", action="store_true", help="Keep the generated files.")
    parser.add_argument("--write-docs", action="store_true", help="Update the table in docs/benchmarks.md.")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="asp-bench-", dir=args.workdir))
    try:
        prompts = workdir / "prompts.jsonl"
        t0 = time.perf_counter()
        make_prompts(args.prompts, prompts)
        size_mb = prompts.stat().st_size / 1e6
        print(f"generated {args.prompts:,} prompts ({size_mb:,.0f} MB) in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        bare = measure([sys.executable, "-c", BARE, str(prompts), str(workdir / "bare.parquet")])
        asp_cmd = [sys.executable, "-m", "asp_cli", "schedule", str(prompts), "-o",
                   str(workdir / "schedule.parquet"), "--quiet", "--instances", str(args.instances),
                   "--epochs", str(args.epochs)]
        ours = measure(asp_cmd)
        if ours[2] != 0:
            raise SystemExit(f"asp schedule failed with exit code {ours[2]}")
        rows = [
            ("bare Polars read_ndjson + write_parquet", bare),
            (f"asp schedule (K={args.instances}, {args.epochs} epoch(s))", ours),
        ]
        table = [
            "| command | wall s | peak RSS GiB |",
            "|---|---|---|",
            *[f"| {name} | {wall:.1f} | {rss:.2f} |" for name, (wall, rss, _) in rows],
            f"| ratio asp / bare | {ours[0] / bare[0]:.2f}x | {ours[1] / bare[1]:.2f}x |",
        ]
        text = "\n".join(table)
        print(f"{args.prompts:,} prompts, {size_mb:,.0f} MB of JSONL, {os.cpu_count()} cores\n")
        print(text)
        if args.write_docs:
            heading = f"### {args.prompts:,} prompts"
            body = (
                f"{heading}\n\n{args.prompts:,} prompts ({size_mb:,.0f} MB of JSONL), {os.cpu_count()} cores, "
                f"measured {time.strftime('%Y-%m-%d')}:\n\n{text}\n\n"
                f"Reproduce: `python scripts/bench_schedule.py --prompts {args.prompts} --epochs {args.epochs} "
                f"--instances {args.instances}`\n"
            )
            _update_docs(heading, body)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir}", file=sys.stderr)


def _update_docs(heading: str, body: str) -> None:
    """Replace (or add) one `### N prompts` block inside the scheduler speed section of docs/benchmarks.md."""
    path = REPO / "docs" / "benchmarks.md"
    section = "## Scheduler speed and scale"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if section not in text:
        text = text.rstrip() + f"\n\n{section}\n\n"
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    end = len(text) if end == -1 else end
    part = text[start:end]
    if heading in part:
        h = part.index(heading)
        nxt = part.find("\n### ", h + len(heading))
        nxt = len(part) if nxt == -1 else nxt + 1
        part = part[:h] + body + ("\n" if nxt < len(part) else "") + part[nxt:]
    else:
        part = part.rstrip() + "\n\n" + body
    path.write_text(text[:start] + part.rstrip() + "\n" + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
