"""Scale: a large prompt set goes through `asp schedule` without per-prompt Python objects piling up.

Not a timing test (speed lives in scripts/bench_schedule.py and docs/benchmarks.md): it checks that the peak
memory of a 200k-prompt run stays a small multiple of the input file, which breaks if a stage starts
holding prompts as Python objects or keeps whole-run intermediates alive.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from asp_cli.schedule_format import read_schedule

from util import REPO


@pytest.mark.slow
def test_200k_prompts_stay_columnar(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_schedule import make_prompts

    source = tmp_path / "prompts.jsonl"
    make_prompts(200_000, source)
    out = tmp_path / "schedule.parquet"
    # Linux folds the resident size a process had when it was forked into its peak (ru_maxrss survives exec),
    # so a child forked straight from this test process would report pytest's own memory. A fresh, small
    # interpreter forks the measured command and reports its peak instead.
    shim = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE); "
            "_, status, usage = os.wait4(p.pid, 0); err = p.stderr.read().decode(); "
            "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss); sys.stderr.write(err)")
    done = subprocess.run([sys.executable, "-c", shim, sys.executable, "-m", "asp_cli", "schedule", str(source),
                           "-o", str(out), "--quiet", "--instances", "8", "--epochs", "2"],
                          capture_output=True, text=True, check=True)
    code, maxrss_kib = (int(x) for x in done.stdout.split())
    assert code == 0, done.stderr
    peak_bytes = maxrss_kib * 1024
    file_bytes = source.stat().st_size
    # Measured: about 0.7 GB (8x) for this 86 MB file, two epochs (1M prompts, one epoch: 1.5 GB for 431 MB).
    assert peak_bytes < 12 * file_bytes, (peak_bytes, file_bytes)
    schedule = read_schedule(out)
    assert schedule.frame.height == 400_000
    assert schedule.frame.filter(schedule.frame["epoch"] == 1)["prompt_id"].n_unique() == 200_000
