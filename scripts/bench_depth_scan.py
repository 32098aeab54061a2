"""Cost of the nesting-depth check (asp_cli.limits) next to reading the same file, as docs/errors.md cites.

    python scripts/bench_depth_scan.py                  # the 3,540-prompt sample and 1M generated prompts
    python scripts/bench_depth_scan.py --prompts 200000 # a smaller generated file

The generated file is made as scripts/bench_schedule.py makes its inputs (the sample's prompts varied). Each
figure is the best of a few runs in this process: the depth check alone (JSON lines: the cheap bound, and
the exact scan where a line could exceed the limit), the same file checked as one document (the exact scan
everywhere: what a .json array costs), `read_table` (bytes to a frame: the check plus PyArrow's parse) and
`read_prompts` (what `asp schedule` reads).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from asp_cli.limits import json_depth_violations  # noqa: E402
from asp_cli.reading import read_prompts  # noqa: E402
from asp_cli.reading.tables import read_table  # noqa: E402


def best(call, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _exact_everywhere(data: bytes) -> None:
    """The exact scan over every chunk, as a .json document or a chunk with a suspect line gets it."""
    import numpy as np

    from asp_cli import limits

    buffer = np.frombuffer(data, dtype=np.uint8)
    state = limits._ScanState()
    for start in range(0, buffer.size, limits._CHUNK_BYTES):
        limits._exact(buffer[start:start + limits._CHUNK_BYTES], state, False, len(data))


def measure(path: Path) -> None:
    data = path.read_bytes()
    runs = 5 if len(data) < 100_000_000 else 3
    scan = best(lambda: json_depth_violations(data, per_line=True), runs)
    exact = best(lambda: _exact_everywhere(data), runs)
    table = best(lambda: read_table(path), runs)
    prompts = best(lambda: read_prompts([path]), runs)
    import numpy as np

    buffer = np.frombuffer(data, dtype=np.uint8)
    opens = np.flatnonzero((buffer | 0x20) == ord("{"))  # '[' and '{'
    per_line = np.bincount(np.searchsorted(np.flatnonzero(buffer == ord("\n")), opens)).max(initial=0)
    print(f"{path.name}: {len(data) / 1e6:.1f} MB, at most {per_line} opening brackets in a line; "
          f"depth check {scan * 1e3:.1f} ms "
          f"({scan / table:.0%} of read_table {table * 1e3:.0f} ms, {scan / prompts:.0%} of read_prompts "
          f"{prompts * 1e3:.0f} ms); exact scan of the whole file {exact * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1_000_000, help="prompts in the generated file")
    args = parser.parse_args()
    from bench_schedule import make_prompts

    measure(ROOT / "sample_data" / "prompts.jsonl")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"prompts-{args.prompts}.jsonl"
        make_prompts(args.prompts, path)
        measure(path)


if __name__ == "__main__":
    main()
