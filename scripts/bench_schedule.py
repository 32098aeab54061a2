"""Speed and memory of `asp schedule` at scale, next to a bare Polars read plus Parquet write of the same file.

Generates N prompts by varying the sample prompts (new ids, the numbers in each problem redrawn, a random
amount of the text repeated so lengths spread), writes them as JSONL (``--shards S``: as S files of N/S), then
runs each measured command in its own process and reads its wall time and peak resident memory: the kernel's
(os.wait4) for one process, and with ``--ray`` the peak of the summed resident memory of the whole process
tree (Ray's driver, raylet, object store and workers), sampled every 0.1 s.

Usage:
    python scripts/bench_schedule.py --prompts 1000000            # the issue's 1M figure
    python scripts/bench_schedule.py --prompts 10000000 --epochs 1 # the 10M scale run
    python scripts/bench_schedule.py --prompts 1000000 --shards 4 --ray  # also the Ray path (pip install '.[ray]')
    python scripts/bench_schedule.py --prompts 1000000 --shards 4 --engine streaming --no-bare  # a plan for servers
    python scripts/bench_schedule.py ... --write-docs              # also update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "prompts.jsonl"


def make_prompts(count: int, path: Path, seed: int = 0, first_id: int = 0) -> None:
    """Write ``count`` prompts varied from the sample prompts, in chunks to bound memory; ids from ``first_id``."""
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
                    "id": pl.Series(np.arange(first_id + start, first_id + start + size)).cast(pl.String)
                    .str.pad_start(9, "0"),
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


# A small interpreter forks and execs the command and reports its peak. Linux counts the resident memory a
# process had when it forked in the child's ru_maxrss, so a child of this (large) process would report this
# process's memory whenever its own peak is lower.
_LAUNCHER = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execvp(sys.argv[1], sys.argv[1:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "sys.stderr.write(f'\\nasp-bench-peak-kib={usage.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
_PEAK_TAG = "asp-bench-peak-kib="


def measure(command: list[str]) -> tuple[float, float, int]:
    """Run a command; return (wall seconds, peak RSS in GiB, exit code).

    The peak is the larger of the kernel's figure for the command's process (os.wait4, in a small launcher)
    and the sampled sum over its process tree (what counts for Ray, whose workers are other processes).
    """
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", _LAUNCHER, *command], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, executable=sys.executable)
    sampled = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            sampled[0] = max(sampled[0], _tree_rss_kib(process.pid, skip_root=True))
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr = process.stderr.read().decode() if process.stderr else ""
    code = process.wait()
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    if code != 0:
        sys.stderr.write(stderr)
    kernel = max((int(line.split("=", 1)[1]) for line in stderr.splitlines() if line.startswith(_PEAK_TAG)), default=0)
    return wall, max(kernel, sampled[0]) / 1024 / 1024, code


def _tree_rss_kib(root: int, *, skip_root: bool = False) -> int:
    """The summed VmRSS of ``root`` (unless ``skip_root``: the launcher) and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if skip_root and pid == root:
            continue
        try:
            with open(f"/proc/{pid}/status") as handle:
                total += next((int(line.split()[1]) for line in handle if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


BARE = (
    "import polars as pl, sys; "
    "pl.concat([pl.read_ndjson(p) for p in sys.argv[1:-1]]).write_parquet(sys.argv[-1])"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--engine", default=None, help="Pass --engine to asp schedule (default: asp's own default, "
                        "continuous); streaming plans replay every group in the simulator for their expected times.")
    parser.add_argument("--shards", type=int, default=1, help="Write the prompts as this many JSONL files.")
    parser.add_argument("--ray", action="store_true", help="Also measure asp predictor predict --ray, then "
                        "asp schedule --predictions (needs pip install '.[ray]').")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (with --ray).")
    parser.add_argument("--no-bare", action="store_true", help="Skip the bare Polars read + write.")
    parser.add_argument("--workdir", type=Path, default=None, help="Where to write the generated files.")
    parser.add_argument("--keep", action="store_true", help="Keep the generated files.")
    parser.add_argument("--write-docs", action="store_true", help="Update the table in docs/benchmarks.md.")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="asp-bench-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        shards = _generate(workdir, args.prompts, args.shards)
        size_mb = sum(p.stat().st_size for p in shards) / 1e6
        print(f"generated {args.prompts:,} prompts ({size_mb:,.0f} MB in {len(shards)} file(s)) in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        rows = []
        if not args.no_bare:
            bare = measure([sys.executable, "-c", BARE, *map(str, shards), str(workdir / "bare.parquet")])
            rows.append(("bare Polars read_ndjson + write_parquet", bare))
        asp = [sys.executable, "-m", "asp_cli"]
        settings = ["--quiet", "--instances", str(args.instances), "--epochs", str(args.epochs)]
        if args.engine:
            settings += ["--engine", args.engine]
        engine = f", --engine {args.engine}" if args.engine else ""
        ours = measure([*asp, "schedule", *map(str, shards), "-o", str(workdir / "schedule.parquet"), *settings])
        if ours[2] != 0:
            raise SystemExit(f"asp schedule failed with exit code {ours[2]}")
        rows.append((f"asp schedule, streamed (K={args.instances}, {args.epochs} epoch(s){engine})", ours))
        read_only = measure([*asp, "predictor", "predict", *map(str, shards), "-o", str(workdir / "p.parquet")])
        if read_only[2] != 0:
            raise SystemExit(f"asp predictor predict failed with exit code {read_only[2]}")
        rows.append(("asp predictor predict, streamed (reading and the predictor alone)", read_only))
        if args.ray:
            out = workdir / "predictions"
            predicted = measure([*asp, "predictor", "predict", *map(str, shards), "-o", str(out), "--ray",
                                 "--workers", str(args.workers)])
            if predicted[2] != 0:
                raise SystemExit(f"asp predictor predict --ray failed with exit code {predicted[2]}")
            files = sorted(out.glob("predictions-*.parquet"))
            planned = measure([*asp, "schedule", *map(str, shards), "-o", str(workdir / "schedule-ray.parquet"),
                               *settings, *[a for f in files for a in ("--predictions", str(f))]])
            if planned[2] != 0:
                raise SystemExit(f"asp schedule --predictions failed with exit code {planned[2]}")
            rows.append((f"asp predictor predict --ray ({args.workers} workers, {len(shards)} shards)", predicted))
            rows.append(("asp schedule --predictions (the Ray files)", planned))
        table = [
            "| command | wall s | peak RSS GiB |",
            "|---|---|---|",
            *[f"| {name} | {wall:.1f} | {rss:.2f} |" for name, (wall, rss, _) in rows],
        ]
        if not args.no_bare:
            table.append(f"| ratio asp / bare | {ours[0] / bare[0]:.2f}x | {ours[1] / bare[1]:.2f}x |")
        text = "\n".join(table)
        print(f"{args.prompts:,} prompts, {size_mb:,.0f} MB of JSONL, {os.cpu_count()} cores\n")
        print(text)
        if args.write_docs:
            heading = f"### {args.prompts:,} prompts"
            flags = (f" --shards {args.shards}" if args.shards > 1 else "") + \
                (f" --engine {args.engine}" if args.engine else "") + (" --ray" if args.ray else "") + \
                (" --no-bare" if args.no_bare else "")
            body = (
                f"{heading}\n\n{args.prompts:,} prompts ({size_mb:,.0f} MB of JSONL in {len(shards)} file(s)), "
                f"{os.cpu_count()} cores, measured {time.strftime('%Y-%m-%d')}:\n\n{text}\n\n"
                f"Reproduce: `python scripts/bench_schedule.py --prompts {args.prompts} --epochs {args.epochs} "
                f"--instances {args.instances}{flags}`\n"
            )
            _update_docs(heading, body)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept {workdir}", file=sys.stderr)


def _generate(workdir: Path, count: int, shards: int) -> list[Path]:
    """``count`` prompts as ``shards`` JSONL files (the ids run on across files), generated once per size.

    Each file is generated in a child process: Linux keeps a process's peak memory across fork and exec, so
    a measured command started by a parent that had grown while generating would report the parent's peak.
    """
    paths = []
    per = -(-count // shards)
    code = "import sys; from bench_schedule import make_prompts; from pathlib import Path; " \
           "make_prompts(int(sys.argv[1]), Path(sys.argv[2]), seed=int(sys.argv[3]), first_id=int(sys.argv[4]))"
    for index in range(shards):
        size = min(per, count - index * per)
        path = workdir / (f"prompts-{index:03d}.jsonl" if shards > 1 else "prompts.jsonl")
        subprocess.run([sys.executable, "-c", code, str(size), str(path), str(index), str(index * per)],
                       check=True, cwd=Path(__file__).resolve().parent)
        paths.append(path)
    return paths


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
