"""Peak memory of the streamed read (and the predictor) against the batch size, each size in its own process.

Generates N prompts as `bench_schedule.py` does, then for each batch size runs `read_and_predict` (the
streamed read with the predictor per batch, what `asp schedule` does before arranging) and, with
``--no-predict``, the streamed read alone, and prints each process's peak resident memory and its resident
memory after reading (from /proc and getrusage inside the process).

Usage:
    python scripts/bench_stream_batches.py --prompts 1000000 --batch-mb 4 8 16 32

Each child runs with the allocator settings of the `asp` command line (``lean``: asp_cli/cli/allocators.py) and
with the libraries' defaults (``default``, what the Python library gets), unless ``--allocators`` names one.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import resource, sys
if sys.argv[4] == "lean":
    from asp_cli.cli.allocators import lean_allocators
    lean_allocators()
import asp_cli.reading.stream as stream
stream.BATCH_BYTES = int(sys.argv[2]) << 20
if sys.argv[3] == "predict":
    from asp_cli.predict.streamed import read_and_predict
    read_and_predict([sys.argv[1]])
else:
    stream.read_prompts_streamed([sys.argv[1]])
resident = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**30
print(f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} {resident:.2f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000)
    parser.add_argument("--batch-mb", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--no-predict", action="store_true", help="Also measure the read without the predictor.")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--allocators", nargs="+", choices=("lean", "default"), default=["lean", "default"])
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="asp-batches-", dir=args.workdir))
    try:
        path = workdir / "prompts.jsonl"
        # In a child process: Linux keeps a process's peak memory across fork and exec, so the measured children
        # of a parent that had grown while generating would report the parent's peak.
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from bench_schedule import "
                        "make_prompts; make_prompts(int(sys.argv[1]), Path(sys.argv[2]))", str(args.prompts),
                        str(path)], check=True, cwd=Path(__file__).resolve().parent)
        print(f"{args.prompts:,} prompts ({path.stat().st_size / 1e6:,.0f} MB of JSONL)\n")
        print("| allocators | batch MB | what | peak RSS GiB | resident after reading GiB |\n|---|---|---|---|---|")
        for allocators in args.allocators:
            for what in ("predict", *(("read",) if args.no_predict else ())):
                for size in args.batch_mb:
                    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(size), what, allocators],
                                         check=True, capture_output=True, text=True).stdout.split()
                    label = "read and predict" if what == "predict" else "read only"
                    print(f"| {allocators} | {size} | {label} | {out[0]} | {out[1]} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
