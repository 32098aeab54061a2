#!/usr/bin/env python3
"""Does the epoch feedback loop pay? Simulated end-to-end time of epoch 2 planned with epoch 1's observed
lengths, against epoch 1 (and epoch 2) planned from the prompt text alone.

Data: ../shared/data/aime_r1distill1.5b_lengths (596 AIME problems, 8 real DeepSeek-R1-Distill-Qwen-1.5B
samples each, temperature 0.6, cap 16,000 tokens). Evaluation only: the data carries no license and is read
at run time, never shipped. Samples 0-3 are what epoch 1's rollouts produce; samples 4-7, independent draws
of the same model on the same prompts, are epoch 2's. So the history never contains a sample it is judged on.

The loop, as a pipeline runs it:

1. epoch 1: `asp` plans from the bundled predictor alone; the schedule is simulated on samples 0-3;
2. those samples go through `asp_cli.integrate.observe.observe` into a history file (as a rollout log would);
3. epoch 2: `asp` plans with that history (`asp schedule --history`); simulated on samples 4-7.

Controls on epoch 2's lengths: the same epoch planned without history, asp given the true lengths (the
scheduling ceiling), verl's default arrangement, and the lower bound. Every row is a simulation with
`asp_cli.sim` (continuous batching, H100 + Qwen2.5-7B preset), averaged over arrangement seeds.

    python scripts/bench_history_loop.py [--seeds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli import columns as C
from asp_cli.bench.compare import ASP, ASP_PINNED, ASP_TRUE, LOWER_BOUND, compare, load_aime
from asp_cli.costmodel import load_preset
from asp_cli.integrate.observe import observe
from asp_cli.predict.prediction import predict_lengths
from asp_cli.reading import read_lengths
from asp_cli.settings import ScheduleSettings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ROWS = (
    # "asp" is replayed with free dispatch (the schedule's default); "planned" rows keep each minibatch on its
    # planned instance.
    ("epoch 1, no history, planned instances", "e1", ASP_PINNED),
    ("epoch 2, no history (control), planned", "e2_model", ASP_PINNED),
    ("epoch 2, with epoch-1 history, planned", "e2_history", ASP_PINNED),
    ("epoch 1, no history, free dispatch", "e1", ASP),
    ("epoch 2, no history, free dispatch", "e2_model", ASP),
    ("epoch 2, with history, free dispatch", "e2_history", ASP),
    ("epoch 2, no history, plan with mean", "e2_model_mean", ASP),
    ("epoch 2, with history, plan with mean", "e2_history_mean", ASP),
    ("epoch 2, true lengths (ceiling)", "e2_history", ASP_TRUE),
    ("epoch 2, verl default", "e2_history", "verl-default"),
    ("epoch 2, lower bound", "e2_history", LOWER_BOUND),
)


def _matrix(frame: pl.DataFrame, ids: list[str]) -> np.ndarray:
    """(prompts, samples) lengths from a one-row-per-sample frame, aligned with ``ids``."""
    grouped = frame.group_by(C.PROMPT_ID, maintain_order=True).agg(pl.col(C.RESPONSE_TOKENS))
    lookup = dict(zip(grouped[C.PROMPT_ID].to_list(), grouped[C.RESPONSE_TOKENS].to_list(), strict=True))
    return np.array([lookup[i] for i in ids], dtype=np.int64)


def run(seeds: int, instances: int, batch: int) -> dict:
    prompts, epoch1_log, epoch2_truth = load_aime(DATA)
    ids = prompts[C.PROMPT_ID].to_list()
    n = 4
    truth = {"e1": _matrix(epoch1_log, ids), "e2": np.array(epoch2_truth, dtype=np.int64)}
    cap = 16_000
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "rollouts.e1.parquet"
        epoch1_log.with_columns(pl.lit(0, pl.Int32).alias(C.EPOCH)).write_parquet(log)
        observed = observe([log], Path(folder) / "history.parquet", dataset=(), epoch=0)
        history, _ = read_lengths([Path(folder) / "history.parquet"])
    results: dict[str, list[dict]] = {}
    for seed in range(seeds):
        settings = ScheduleSettings(instances=instances, samples_per_prompt=n, train_batch_size=batch,
                                    max_response_tokens=cap, seed=seed)
        preset = load_preset(settings.preset)
        model_only, _ = predict_lengths(prompts, samples_per_prompt=n, max_response_tokens=cap)
        with_history, info = predict_lengths(prompts, history=history, samples_per_prompt=n, max_response_tokens=cap)
        mean_settings = dataclasses.replace(settings, plan_with="mean")
        model_mean, _ = predict_lengths(prompts, samples_per_prompt=n, max_response_tokens=cap, plan_with="mean")
        history_mean, _ = predict_lengths(prompts, history=history, samples_per_prompt=n, max_response_tokens=cap,
                                          plan_with="mean")
        plans = {"e1": (model_only, truth["e1"], settings), "e2_model": (model_only, truth["e2"], settings),
                 "e2_history": (with_history, truth["e2"], settings),
                 "e2_model_mean": (model_mean, truth["e2"], mean_settings),
                 "e2_history_mean": (history_mean, truth["e2"], mean_settings)}
        for key, (predictions, lengths, chosen) in plans.items():
            include = (ASP, ASP_PINNED, ASP_TRUE, "verl-default") if key == "e2_history" else (ASP, ASP_PINNED)
            for row in compare(prompts, predictions, lengths, chosen, preset, include=include):
                results.setdefault(f"{key}/{row['arrangement']}", []).append(row)
    table = []
    for label, key, arrangement in ROWS:
        rows = results[f"{key}/{arrangement}"]
        mean = {k: float(np.mean([r[k] for r in rows])) for k in
                ("end_to_end_s", "rollout_makespan_s", "ratio_to_lower_bound") if rows[0].get(k) is not None}
        extra = {k: float(np.mean([r[k] for r in rows])) for k in ("padding_fraction", "trainer_idle_fraction")
                 if rows[0].get(k) is not None}
        table.append({"row": label, **mean, **extra, "seeds": len(rows)})
    return {
        "data": "aime_r1distill1.5b_lengths run A: 596 prompts; epoch 1 = samples 0-3, epoch 2 = samples 4-7",
        "settings": {"instances": instances, "samples_per_prompt": n, "train_batch_size": batch,
                     "max_response_tokens": cap, "preset": "h100-qwen2.5-7b", "seeds": seeds},
        "history_rows": observed.summary["history_rows"],
        "prompts_from_history": info.prompts_from_history,
        "table": table,
    }


def run_mixes(seeds: int) -> list[dict]:
    """The loop on the mixed-source workloads of `asp bench` (GSM8K + MATH-L5 + AIME, real lengths).

    Epoch 1 plans from the bundled model alone; epoch 2 plans with the history the workload carries (AIME:
    samples 0-3; ZeroEval: four generators disjoint from those judged); both are judged on the same true
    lengths (AIME samples 4-7; the other ZeroEval generators), so the difference is the planning alone.
    """
    from asp_cli.bench.compare import WORKLOADS, build_workload

    rows = []
    for name in ("mix-k8-n8", "mix-k2-n4", "mix-k16-n16"):
        spec = WORKLOADS[name]
        times: dict[str, list[float]] = {}
        for seed in range(seeds):
            settings = dataclasses.replace(spec.settings(), seed=seed)
            workload = build_workload(name, DATA, spec.sources, settings, seed=seed)
            model_only, _ = predict_lengths(workload.prompts, samples_per_prompt=settings.samples_per_prompt,
                                            max_response_tokens=settings.max_response_tokens)
            preset = load_preset(settings.preset)
            for key, predictions in (("epoch 1", model_only), ("epoch 2", workload.predictions)):
                include = (ASP, ASP_PINNED, "verl-default") if key == "epoch 2" else (ASP, ASP_PINNED)
                for row in compare(workload.prompts, predictions, workload.truth, settings, preset,
                                   max_lag=spec.max_lag, include=include):
                    times.setdefault(f"{key}/{row['arrangement']}", []).append(row["end_to_end_s"])
        mean = {k: float(np.mean(v)) for k, v in times.items()}
        rows.append({"workload": name, **mean})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--train-batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args(argv)
    if not (DATA / "aime_r1distill1.5b_lengths").is_dir():
        print(f"Error: {DATA}/aime_r1distill1.5b_lengths not found; this benchmark reads ../shared/data",
              file=sys.stderr)
        return 3
    result = run(args.seeds, args.instances, args.train_batch_size)
    first = result["table"][0]["end_to_end_s"]
    print(f"| {'':40} | end-to-end s | vs epoch 1 | vs lower bound | rollout s | padding | trainer idle |")
    print(f"|{'-' * 42}|-------------:|-----------:|---------------:|----------:|--------:|-------------:|")
    for row in result["table"]:
        print(f"| {row['row']:40} | {row['end_to_end_s']:12,.0f} | {row['end_to_end_s'] / first:10.3f} | "
              f"{row.get('ratio_to_lower_bound', 1.0):14.3f} | {row.get('rollout_makespan_s', float('nan')):9,.0f} | "
              f"{row.get('padding_fraction', float('nan')):7.3f} | {row.get('trainer_idle_fraction', float('nan')):12.3f} |")
    mixes = run_mixes(args.seeds)
    result["mixes"] = mixes
    print()
    print("| workload | epoch 1, planned | epoch 2, with history, planned | change | epoch 1, free dispatch | "
          "epoch 2, free dispatch | change | verl default |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in mixes:
        e1, e2 = row[f"epoch 1/{ASP_PINNED}"], row[f"epoch 2/{ASP_PINNED}"]
        f1, f2 = row[f"epoch 1/{ASP}"], row[f"epoch 2/{ASP}"]
        print(f"| {row['workload']} | {e1:,.0f} | {e2:,.0f} | {e2 / e1 - 1:+.1%} | {f1:,.0f} | {f2:,.0f} | "
              f"{f2 / f1 - 1:+.1%} | {row['epoch 2/verl-default']:,.0f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
