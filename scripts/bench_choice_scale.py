"""Does `--arrangement auto`'s sample rank the candidates as the whole run would? A benchmark workload's prompts
(real predictions, real lengths) are repeated `--tiles` times under new ids, so the input is larger than auto's
4,096-prompt sample; auto chooses as it does on any large input, and every candidate is then arranged on the
whole input and replayed, on one draw from auto's own predictive distribution and on the true lengths.

    python scripts/bench_choice_scale.py --workload mix-k8-n8-b256 --tiles 12 --engine streaming

One epoch (the sample is judged on one). Needs the real lengths in ../shared/data (or --data).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
import polars as pl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mix-k8-n8-b256")
    parser.add_argument("--tiles", type=int, default=12)
    parser.add_argument("--engine", default="streaming", choices=("continuous", "streaming", "static"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()

    from asp_cli import columns as C
    from asp_cli.arrange.choose import HISTORY_SIGMA, MODEL_SIGMA, sample_sigma
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.compare import WORKLOADS, build_workload
    from asp_cli.costmodel import load_preset
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_schedule

    spec = WORKLOADS[args.workload]
    settings = dataclasses.replace(spec.settings(args.seed), epochs=1, engine=args.engine)
    workload = build_workload(args.workload, args.data, spec.sources, settings, seed=args.seed)
    tiles = [workload.prompts.with_columns((pl.col(C.PROMPT_ID) + f"#{t}").alias(C.PROMPT_ID),
                                           (pl.col(C.ROW) + t * workload.prompts.height).alias(C.ROW))
             for t in range(args.tiles)]
    prompts = pl.concat(tiles)
    predictions = pl.concat([workload.predictions] * args.tiles)
    truth = np.concatenate([workload.truth] * args.tiles)
    preset = load_preset()
    started = time.process_time()
    _, choice = plan(prompts, predictions, dataclasses.replace(settings, arrangement="auto"), preset=preset)
    print(f"{args.workload} x {args.tiles} = {prompts.height:,} prompts, {args.engine} engine, seed {args.seed}: "
          f"auto chose {choice.chosen} ({time.process_time() - started:.1f} s CPU, judged on "
          f"{choice.evaluated_prompts:,} prompts)")

    # One draw over the whole input, as auto draws (a prompt factor and a per-sample spread; the middle node
    # of the common scale).
    n = settings.samples_per_prompt
    mean = predictions[C.PREDICTED_MEAN_TOKENS].to_numpy().astype(np.float64)
    from_history = (predictions[C.PREDICTION_SOURCE] == "history").to_numpy()
    prompt_sigma = np.where(from_history, HISTORY_SIGMA, MODEL_SIGMA)
    spread = sample_sigma(predictions[C.PREDICTED_MAX_TOKENS].to_numpy(), mean, n, cap=settings.max_response_tokens)
    rng = np.random.default_rng([args.seed, 99])
    factor = np.exp(rng.normal(0.0, prompt_sigma) - prompt_sigma**2 / 2)
    noise = np.exp(rng.normal(0.0, 1.0, (mean.size, n)) * spread[:, None] - spread[:, None] ** 2 / 2)
    draw = np.clip(np.rint(np.maximum(mean, 1.0)[:, None] * factor[:, None] * noise), 1,
                   settings.max_response_tokens).astype(np.int64)

    sim = SimulationSettings(samples_per_prompt=n, train_batch_size=settings.train_batch_size, mode=args.engine,
                             dispatch=settings.dispatch, max_lag=settings.max_lag, trainer=settings.trainer)
    position = {r: i for i, r in enumerate(prompts[C.ROW].to_list())}
    both = len({c["kv_budget"] for c in choice.candidates}) > 1  # each KV accounting auto judged: its own rows
    sampled = {(c["name"], c["kv_budget"]): c["expected_end_to_end_s"] for c in choice.candidates}
    rows = {}
    for name, kv_budget in sampled:
        frame = plan(prompts, predictions, dataclasses.replace(settings, arrangement=name).with_kv_cut(kv_budget),
                     preset=preset)[0]
        frame = frame.sort("seq")
        index = np.fromiter((position[r] for r in frame[C.ROW].to_list()), dtype=np.int64, count=frame.height)
        rows[(name, kv_budget)] = (sampled[(name, kv_budget)],
                      simulate_schedule(frame, draw[index], preset, sim, instances=settings.instances)
                      .metrics["end_to_end_s"],
                      simulate_schedule(frame, truth[index], preset, sim, instances=settings.instances)
                      .metrics["end_to_end_s"])
    best = [min(v[i] for v in rows.values()) for i in range(3)]
    print("| candidate | auto's sample, s | vs its best | whole input, a draw, s | vs its best | whole input, "
          "true lengths, s | vs its best |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, kv_budget), values in rows.items():
        cells = " | ".join(f"{v:,.0f} | {v / b:.3f}" for v, b in zip(values, best, strict=True))
        mark = " (chosen)" if (name, kv_budget) == (choice.chosen, choice.kv_budget) else ""
        print(f"| {name}{'/' + kv_budget if both else ''}{mark} | {cells} |")


if __name__ == "__main__":
    main()
