"""How well `asp calibrate` recovers known step-model parameters (docs/replay.md, "How good the fit is").

    python scripts/bench_calibrate.py

Runs the probe workload of `asp calibrate --servers` (2 instances, blocking minibatches of 1 to 256
requests) on the test suite's fake engine (tests/fake_openai.py) on a virtual clock, with known parameters,
in four cases: exact timings; an engine capped at 128 sequences (no step is compute bound); a streaming run
kept at 120 in flight; and every step 5% slower or faster at random with every event seen up to a few ms
late. Prints the relative error of each fitted parameter, the fit's own error, and the wall time the
simulator then predicts for the same run against the measured one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import StepModel  # noqa: E402
from test_calibrate import BASE, TRUTH, metadata, virtual_frame  # noqa: E402

from asp_cli.integrate.calibrate import calibrate  # noqa: E402
from asp_cli.integrate.timings import write_timeline  # noqa: E402

CASES = [
    ("exact, blocking", TRUTH, {}),
    ("engine capped at 128 sequences", StepModel(**{**TRUTH.__dict__, "max_num_seqs": 128}), {}),
    ("streaming, 120 in flight", TRUTH, {"streaming": 120}),
    ("5% step jitter, 1 ms observation noise", TRUTH, {"jitter": 0.05, "observe_noise_s": 0.001}),
]


def main() -> None:
    print("| case | weight read | compute/token | KV/token | prefill/token | knee | decode fit RMS | "
          "simulated wall vs measured: base preset / calibrated |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for case, (name, model, options) in enumerate(CASES):
            frame = virtual_frame(model, **options)
            timeline = Path(folder) / f"t{case}.parquet"  # a file each: write_timeline does not replace
            engine = "streaming" if options.get("streaming") else "blocking"
            write_timeline(frame, metadata(frame, engine, options.get("streaming")), timeline)
            report = calibrate(timeline, Path(folder) / f"{case}.json", base=BASE.name)
            fit = report.fit
            truth_knee = model.weight_read_s / model.compute_s_per_token
            knee = "none" if fit.knee_live is None else f"{fit.knee_live / truth_knee - 1:+.1%}"
            check = report.document["check"][0]
            print(f"| {name} | {fit.weight_read_s / model.weight_read_s - 1:+.1%} | "
                  f"{fit.compute_s_per_token / model.compute_s_per_token - 1:+.1%} | "
                  f"{fit.kv_s_per_token / model.kv_s_per_token - 1:+.1%} | "
                  f"{fit.prefill_s_per_token / model.compute_s_per_token - 1:+.1%} | {knee} | "
                  f"{fit.decode_rel_rmse:.2%} | {check['base_error']:+.1%} / {check['calibrated_error']:+.1%} |")


if __name__ == "__main__":
    main()
