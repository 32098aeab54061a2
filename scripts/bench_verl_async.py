#!/usr/bin/env python3
"""Asynchronous training on engines that refill, routed as verl 0.9.1's fully asynchronous trainer routes it: each
prompt submitted when one of the rollouter's slots frees, its samples placed one by one at submission by verl's
balancer (fewest requests in flight) or a router plug-in (`asp_cli.sim.verl_async`).

    python scripts/bench_verl_async.py --seeds 4                       # lag 2 and no bound, trainer x1 and x0.25
    python scripts/bench_verl_async.py --seeds 4 --prompts-per-server 16   # verl's default rollouter slots
    python scripts/bench_verl_async.py --seeds 4 --v1 colocate_async --lags 1   # main_ppo's asynchronous modes
    python scripts/bench_verl_async.py --seeds 4 --areal --lags 1   # as AReaL's controller deals, about 75 min
    python scripts/bench_verl_async.py --seeds 4 --areal-spmd --lags 1   # as AReaL's SPMD mode routes (round-robin)

The streaming tables of docs/benchmarks.md (bench_simulate.py, bench_rollout_bound.py) route each group whole to
whichever instance frees a slot first; this replays the same plans as verl routes them. Per workload (the three
large ones), lag bound and trainer scale (1: the benchmark preset's trainer, which binds; 0.25: four times the
trainer GPUs, rollout-bound), each row's end-to-end time over verl's default (a shuffle through its balancer),
mean +- sd over the seeds. Rows: a round-robin deal kept to its instances by asp's router plug-in, the dataset
sorted longest and shortest first, the length-aware plug-in (`+data.asp_route=length`) on a shuffle, asp's default
plan through verl's balancer and through the length-aware plug-in, and asp planned for `--dispatch planned` kept to
its instances by the router plug-in. Reads ../shared/data; exits with a message when it is absent. About 45
minutes on 2 cores at 4 seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from asp_cli.settings import check_lag  # noqa: E402

WORKLOADS = ("mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")
DEVIATION = " step dev"
# (label, frame, routing): frames are a baseline's arrangement (by name) or asp's plan with these settings.
ROWS = (("verl default", "least-pending", "least-pending"),
        ("round-robin deal, router plug-in", "round-robin", "planned"),
        ("long-first sort", "long-first (least-pending)", "least-pending"),
        ("short-first sort", "short-first (least-pending)", "least-pending"),
        ("length-aware plug-in", "least-pending", "length-aware"),
        ("asp (auto)", {}, "least-pending"),
        ("asp (auto), length-aware plug-in", {}, "length-aware"),
        ("asp (auto, --dispatch planned), router plug-in", {"dispatch": "planned"}, "planned"))
# With --representative: asp's plan among the candidates whose steps are expected about as representative as a
# shuffle's, as verl routes (`--steps representative`), and its step deviation.
REPRESENTATIVE = ("asp (auto, --steps representative)", {"steps": "representative"}, "least-pending")
# --areal: every row routed as AReaL v1.0.4's single controller (its default) deals it: each group whole to the next
# worker's server in turn (`RolloutController._choose_worker`), prompts started in the file's order as the slots and
# the lag bound (rollout.max_head_offpolicyness) allow; asp's plan timed as verl routes (auto's default) or as AReaL
# deals (`--router group-round-robin`, laid out for the deal: `streaming.dealt_in_turn`).
_GROUP_DEAL = "group-round-robin"
AREAL_ROWS = (("shuffle", "least-pending", _GROUP_DEAL),
              ("long-first sort", "long-first (least-pending)", _GROUP_DEAL),
              ("short-first sort", "short-first (least-pending)", _GROUP_DEAL),
              ("asp (auto)", {}, _GROUP_DEAL),
              ("asp (auto, --router group-round-robin)", {"router": _GROUP_DEAL}, _GROUP_DEAL),
              ("asp (auto, --steps representative, --router group-round-robin)",
               {"steps": "representative", "router": _GROUP_DEAL}, _GROUP_DEAL),
              # A shuffle's train batches, each laid out for the deal: what the layout alone does.
              ("asp per-step, --router group-round-robin", {"arrangement": "per-step", "router": _GROUP_DEAL},
               _GROUP_DEAL))
# --areal-spmd: as AReaL routes with AREAL_SPMD_MODE=1 (each sample its own request, to the next server in turn:
# `RemoteInfEngine.choose_server`); asp's plan timed as verl routes or with `--router round-robin`.
AREAL_SPMD_ROWS = (("shuffle", "least-pending", "round-robin"),
                   ("long-first sort", "long-first (least-pending)", "round-robin"),
                   ("short-first sort", "short-first (least-pending)", "round-robin"),
                   ("asp (auto)", {}, "round-robin"),
                   ("asp (auto, --router round-robin)", {"router": "round-robin"}, "round-robin"),
                   ("asp (auto, --steps representative, --router round-robin)",
                    {"steps": "representative", "router": "round-robin"}, "round-robin"))


def run(names: tuple[str, ...], seeds: int, data: Path, max_lag: int | None, trainer_scale: float,
        prompts_per_server: int | None, rows_run: tuple = ROWS,
        v1_mode: str | None = None) -> dict[str, dict[str, list[float]]]:
    """Each row's end-to-end time over verl's default, per workload and seed; with ``v1_mode`` replayed as verl's
    v1 trainer runs that asynchronous mode (`asp_cli.sim.verl_async.replay_async`), asp's plan judged by auto in that
    mode (`--verl-trainer`; before 2026-12-06 as the fully asynchronous trainer routes)."""
    import asp_cli.columns as C
    from asp_cli.bench.compare import WORKLOADS as SPECS
    from asp_cli.bench.compare import build_workload
    from asp_cli.costmodel import load_preset
    from asp_cli.sim.verl_async import replay_async_frame
    from bench_rollout_bound import scaled_preset
    from bench_sync import arranged

    preset = scaled_preset(load_preset("h100-qwen2.5-7b"), trainer_scale)
    results: dict[str, dict[str, list[float]]] = {}
    for name in names:
        spec = SPECS[name]
        rows: dict[str, list[float]] = {}
        for seed in range(seeds):
            # asp's plan is judged as verl routes with the same rollouter limit (`--prompts-per-server`).
            settings = dataclasses.replace(spec.settings(seed), engine="streaming", max_lag=max_lag,
                                           prompts_per_server=prompts_per_server if max_lag != 0 else None,
                                           verl_trainer=v1_mode.replace("_", "-") if v1_mode else None)
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            predicted = workload.predictions[C.PREDICTED_MEAN_TOKENS].to_numpy()
            frames: dict[str, tuple] = {}
            seconds, deviation = {}, {}
            for label, kind, routing in rows_run:
                frame, index = arranged(workload, settings, preset, kind, frames)
                in_flight = None if prompts_per_server is None else prompts_per_server * settings.instances
                result = replay_async_frame(frame, workload.truth[index], preset, instances=settings.instances,
                                            train_batch_size=settings.train_batch_size, max_lag=max_lag,
                                            routing=routing, predicted_tokens=predicted[index],
                                            prompts_in_flight=in_flight, seed=seed, v1_mode=v1_mode)
                means = workload.truth[index].mean(axis=1)[np.argsort(frame["seq"].to_numpy(), kind="stable")]
                step_means = (np.bincount(result.group_step, weights=means)
                              / np.bincount(result.group_step))
                deviation[label] = float(np.quantile(np.abs(step_means / means.mean() - 1), 0.9))
                seconds[label] = result.end_to_end_s
            for label, total in seconds.items():
                rows.setdefault(label, []).append(total / seconds[rows_run[0][0]])
                rows.setdefault(label + DEVIATION, []).append(deviation[label])
            choice = frames[repr([])][2]
            print(f"{name} lag {max_lag} x{trainer_scale:g} seed {seed} done: auto picked {choice.chosen}",
                  file=sys.stderr, flush=True)
        results[name] = rows
    return results


def table(results: dict[str, dict[str, list[float]]], rows_run: tuple = ROWS) -> str:
    """Each row's ratio (mean +- sd over the seeds) per workload, and the step deviation of verl's default and of
    asp's default plan (the 90th percentile of |step mean length / epoch mean - 1|, steps as the trainer takes
    the groups, in arrival order)."""
    from bench_sync import mean_sd

    labels = [r[0] for r in rows_run[1:]]
    representative = next((r[0] for r in rows_run if "--steps representative" in r[0]), None)
    reference = rows_run[0][0]
    lines = ["| workload | " + " | ".join(labels) + f" | step dev p90: {reference} / asp (auto)"
             + (f" / {representative}" if representative else "") + " |",
             "|---|" + "---:|" * (len(labels) + 1)]
    for name, rows in results.items():
        cells = [mean_sd(rows[label]) for label in labels]
        cells.append(f"{np.mean(rows[reference + DEVIATION]):.2f} / {np.mean(rows['asp (auto)' + DEVIATION]):.2f}"
                     + (f" / {np.mean(rows[representative + DEVIATION]):.2f}" if representative else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--lags", default="2,none", help="lag bounds to run, 'none' for no bound; a fraction is verl's "
                        "staleness_threshold (0.1 by default there)")
    parser.add_argument("--trainer-scales", default="1,0.25", help="training step cost multipliers to run")
    parser.add_argument("--prompts-per-server", type=int, default=None,
                        help="verl's async_training.concurrent_samples_per_replica (its default is 16); by default "
                        "as many prompts as the servers' slots hold, so the servers' own limits bind")
    parser.add_argument("--v1", choices=("colocate_async", "separate_async"), default=None,
                        help="replay as verl's v1 trainer (main_ppo) runs this asynchronous mode: the lag bound's "
                        "warm-up batches, then a train batch a step (needs a lag bound above 0)")
    parser.add_argument("--representative", action="store_true",
                        help="also asp's plan with --steps representative (its own column and step deviation)")
    parser.add_argument("--areal", action="store_true",
                        help="every row routed as AReaL's single controller deals it (each group whole to the next "
                        "server in turn), over a shuffle so routed; asp's plan timed as verl routes and with --router "
                        "group-round-robin")
    parser.add_argument("--areal-spmd", action="store_true",
                        help="every row routed as AReaL routes in its SPMD mode (each sample to the next server in "
                        "turn); asp's plan timed as verl routes and with --router round-robin")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.prompts_per_server is not None and args.prompts_per_server < 1:
        parser.error("--prompts-per-server must be at least 1")
    if not (args.data / "README.md").exists():
        print(f"bench_verl_async: {args.data} not found (the project's shared data); nothing measured",
              file=sys.stderr)
        return 3
    names = tuple(n for n in args.workloads.split(",") if n)
    if args.v1 and args.prompts_per_server is not None:
        parser.error("--v1 replays verl's v1 trainer, which submits a train batch at a time: drop --prompts-per-server")
    if args.v1 and any(s in ("none", "0") for s in args.lags.split(",")):
        parser.error("--v1 needs lag bounds above 0 (verl's warm-up batches): give --lags 1 or 2")
    slots = ("the servers' slots" if args.prompts_per_server is None
             else f"{args.prompts_per_server} prompts per server")
    for scale in (float(s) for s in args.trainer_scales.split(",")):
        # A fraction is verl's staleness_threshold (its default 0.1: `asp_cli.settings.check_lag`).
        for lag in (None if s == "none" else check_lag(float(s)) for s in args.lags.split(",")):
            rows_run = (AREAL_ROWS if args.areal else AREAL_SPMD_ROWS if args.areal_spmd
                        else ROWS + ((REPRESENTATIVE,) if args.representative else ()))
            results = run(names, args.seeds, args.data, lag, scale, args.prompts_per_server, rows_run, args.v1)
            print(f"Trainer step cost x{scale:g}, max_lag {lag if lag is not None else 'none'}, "
                  + (f"verl's v1 trainer in {args.v1} ({lag} warm-up batches, then a train batch a step)"
                     if args.v1 else f"rollouter slots: {slots}")
                  + f"; {args.seeds} seeds; end-to-end over "
                  + ("a shuffle, every row dealt as AReaL's controller deals it" if args.areal else
                     "a shuffle, every row routed as AReaL's SPMD mode routes" if args.areal_spmd else
                     "verl default (a shuffle through verl's balancer)") + ", mean +- sd.\n")
            print(table(results, rows_run) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
