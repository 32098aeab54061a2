"""How much room an offline order has on engines that refill: the best of many orders, picked on the true lengths.

    python scripts/bench_streaming_room.py [--data ../shared/data] [--seeds 4] [--shuffles 16] [--max-lag 2]

On the large workloads (8+ instances, train batches of 256+), engine `streaming`, free dispatch (verl's
least-pending router fed the order), the trainer taking groups in arrival order. For each workload seed it
replays, on the true lengths:

* a random round-robin deal (the issue's yardstick), least-pending routing of a shuffle, verl's chunks sorted
  shortest first (each train batch cut into one chunk per server, each chunk kept to its server: the best
  baseline of several tables in docs/benchmarks.md, and a routing as well as an order) and asp's own schedule
  (`--arrangement auto`, planned on predictions, as in docs/benchmarks.md);
* every streaming candidate of `asp_cli.arrange.streaming` planned on the *true* group maxima and again on the
  predicted ones (the orders auto chooses among, each forced), ``--shuffles`` more random shuffles, and the
  shapes tried while looking for room: the run's last train batch made of its shortest groups (a cheap final
  step after the rollout drains), every epoch closed by them (an epoch is not a whole number of train batches,
  so only the run's end lines up with a step), and long groups pulled forward (a bias toward the head).

"best order, picked after" is the fastest of all of these (asp's own schedule and least-pending routing of a
shuffle included; verl's chunks, a routing, not) on each seed, chosen after the fact on the very lengths it is
judged on: no plan made before the rollout can count on it, so it is an optimistic mark for an order under
least-pending routing, not a result. It prints three tables: end-to-end time over the round-robin deal (mean +- sd over the seeds;
below 1 is faster), with the trainer-bound lower bound for scale; where the trainer waits; and what a short
final train batch is worth.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LARGE = ("mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")


def replay_settings(settings, max_lag, dispatch: str):
    """The simulator's settings for a streaming replay of the workload under ``max_lag`` and ``dispatch``."""
    from asp_cli.sim.records import SimulationSettings

    return SimulationSettings(samples_per_prompt=settings.samples_per_prompt,
                              train_batch_size=settings.train_batch_size, mode="streaming", dispatch=dispatch,
                              max_lag=max_lag)


def replay(preset, settings, max_lag, truth: np.ndarray, prompt_tokens: np.ndarray,
           orders: list[np.ndarray]) -> float:
    """End-to-end seconds of the epochs' orders (positions into the workload's prompts), free dispatch."""
    from asp_cli.sim.run import simulate_arrays

    order = np.concatenate(orders)
    result = simulate_arrays(preset, replay_settings(settings, max_lag, "free"), instances=settings.instances, row_minibatch=np.arange(order.size),
                             row_instance=np.zeros(order.size, dtype=np.int64), response_tokens=truth[order],
                             prompt_tokens=prompt_tokens[order])
    return float(result.metrics["end_to_end_s"])


def frames_to_replay(workload, settings, max_lag, preset) -> list[tuple[str, object, str]]:
    """(name, schedule frame, dispatch) of the round-robin deal, least-pending routing, verl's chunks sorted
    shortest first (each train batch's chunk kept to one server: a routing, not only an order) and asp's own schedule
    (`--arrangement auto` for this engine and lag bound, as docs/benchmarks.md replays it)."""
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.baselines import BASELINES
    from asp_cli.bench.compare import ASP

    planned = dataclasses.replace(settings, max_lag=max_lag)
    frames = [(name, BASELINES[name].arrange(workload.prompts, workload.predictions, planned, preset),
               BASELINES[name].dispatch) for name in ("round-robin", "least-pending", "short-first")]
    frames.append((ASP, plan(workload.prompts, workload.predictions, planned, preset=preset)[0], planned.dispatch))
    return frames


def replay_frame(preset, settings, max_lag, workload, frame, dispatch):
    """One schedule frame replayed on the workload's true lengths (the simulator's result, lower bound included)."""
    from asp_cli import columns as C
    from asp_cli.sim.run import simulate_schedule

    frame = frame.sort("seq")
    position = dict(zip(workload.prompts[C.ROW].to_list(), range(workload.prompts.height)))
    index = np.fromiter((position[r] for r in frame[C.ROW].to_list()), dtype=np.int64, count=frame.height)
    return simulate_schedule(frame, np.asarray(workload.truth)[index], preset,
                             replay_settings(settings, max_lag, dispatch), instances=settings.instances)


def trainer_waits(result, max_lag) -> tuple[float, float, float, float, int]:
    """The trainer's idle seconds before its first third of steps, in the middle and before its last
    ``max_lag + 1`` steps (the last one without a bound), the run's end-to-end seconds and its train steps."""
    start, end = result.step_start_s, result.step_end_s
    gaps = np.concatenate(([start[0]], start[1:] - end[:-1]))
    steps = gaps.size
    first = max(steps // 3, 1)
    last = max(steps - ((max_lag or 0) + 1), first)
    return (float(gaps[:first].sum()), float(gaps[first:last].sum()), float(gaps[last:].sum()),
            float(result.metrics["end_to_end_s"]), steps)


def candidate_orders(top: np.ndarray, settings, seed: int) -> dict[str, list[np.ndarray]]:
    """Every streaming candidate of `asp_cli.arrange.streaming` ordered by the group maxima ``top``, by name: one
    array of positions per epoch. All but `bands`, which sends request batches of several groups, each to one
    server: an order and a routing, where this study feeds every order one group at a time to the least-pending
    router (its replays are asp's own row and the baselines' in docs/benchmarks.md, "Other engines")."""
    from asp_cli.arrange.streaming import STREAMING_ORDERS, streaming_order

    return {name: [streaming_order(name, top, top, settings.instances, settings.length_classes,
                                   np.random.default_rng([seed, epoch, 5]), settings.train_batch_size)[0]
                   for epoch in range(settings.epochs)]
            for name in STREAMING_ORDERS if name != "bands"}


def orders_to_try(top: np.ndarray, settings, seed: int, shuffles: int) -> dict[str, list[np.ndarray]]:
    """Every order to replay, by name: one array of positions per epoch."""
    size, batch, epochs = top.size, settings.train_batch_size, settings.epochs
    tried = candidate_orders(top, settings, seed)
    for k in range(shuffles):
        tried[f"shuffle #{k}"] = [np.random.default_rng([seed, epoch, 100 + k]).permutation(size)
                                  for epoch in range(epochs)]
    shortest = np.lexsort((np.arange(size), top))[:batch]
    last = np.zeros(size, dtype=bool)
    last[shortest] = True
    rank = np.empty(size)
    rank[np.lexsort((np.arange(size), top))] = np.arange(size) / size  # 0 = shortest
    for k in range(min(shuffles, 4)):
        perms = tried[f"shuffle #{k}"]
        closed = [np.concatenate([perm[~last[perm]], shortest]) for perm in perms]
        tried[f"shortest batch last #{k}"] = perms[:-1] + closed[-1:]
        tried[f"shortest batch closing every epoch #{k}"] = closed
        for bias in (0.1, 0.25):
            tried[f"long pulled forward {bias} #{k}"] = [
                np.argsort(np.argsort(p) / size - bias * rank, kind="stable") for p in perms]
    return tried


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--shuffles", type=int, default=16)
    parser.add_argument("--max-lag", default="2", help="an integer, or 'none'")
    parser.add_argument("--workloads", default=",".join(LARGE))
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"Skipped: {args.data} is not there (the real length data is read at run time).", file=sys.stderr)
        return
    from asp_cli.bench.compare import ASP, WORKLOADS, build_workload
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    max_lag = None if args.max_lag == "none" else int(args.max_lag)
    print(f"Engine `streaming`, free dispatch, trainer in arrival order, max_lag {args.max_lag}, "
          f"{args.seeds} workload seeds; end-to-end time over a random round-robin deal, mean +- sd.\n")
    print("| workload | asp (auto) | shuffle (least-pending) | verl chunks, shortest first | best order, picked after "
          "| its picks | lower bound |")
    print("|---|---:|---:|---:|---:|---|---:|")
    tables = []
    shapes: dict[tuple[str, str], list[float]] = {}
    for name in args.workloads.split(","):
        spec = WORKLOADS[name]
        ratios: dict[str, list[float]] = {"asp": [], "shuffle": [], "chunks": [], "picked": [], "bound": []}
        picks = []
        waits: dict[str, list[tuple[float, ...]]] = {"round-robin": [], ASP: []}
        for seed in range(args.seeds):
            settings = dataclasses.replace(spec.settings(seed), engine="streaming")
            workload = build_workload(name, args.data, spec.sources, settings, seed=seed)
            truth = np.asarray(workload.truth)
            prompt_tokens = workload.predictions["prompt_tokens"].to_numpy().astype(np.int64)
            rows = {name_: replay_frame(preset, settings, max_lag, workload, frame, dispatch)
                    for name_, frame, dispatch in frames_to_replay(workload, settings, max_lag, preset)}
            deal = rows["round-robin"].metrics["end_to_end_s"]
            for name_ in ("round-robin", ASP):
                waits[name_].append(trainer_waits(rows[name_], max_lag))
            times = {label: replay(preset, settings, max_lag, truth, prompt_tokens, orders)
                     for label, orders in orders_to_try(truth.max(axis=1).astype(np.float64), settings, seed,
                                                        args.shuffles).items()}
            # The candidates ordered by the predictions too: a sort by predicted length is not a sort by the true
            # maximum, and on these runs can be the faster of the two (a noisy sort spreads the longest groups).
            predicted = workload.predictions["predicted_max_tokens"].to_numpy().astype(np.float64)
            for label, orders in candidate_orders(predicted, settings, seed).items():
                times[f"{label} (predictions)"] = replay(preset, settings, max_lag, truth, prompt_tokens, orders)
            # asp's own schedule and least-pending routing of a shuffle are orders for the same router: in the pick
            # too (verl's chunks are a routing, and stay out).
            times["asp (auto, predictions)"] = rows[ASP].metrics["end_to_end_s"]
            times["least-pending shuffle"] = rows["least-pending"].metrics["end_to_end_s"]
            best = min(times, key=lambda k: times[k])
            picks.append(best.split(" #")[0])
            ratios["asp"].append(rows[ASP].metrics["end_to_end_s"] / deal)
            ratios["shuffle"].append(rows["least-pending"].metrics["end_to_end_s"] / deal)
            ratios["chunks"].append(rows["short-first"].metrics["end_to_end_s"] / deal)
            ratios["picked"].append(times[best] / deal)
            for shape in ("shortest batch last", "shortest batch closing every epoch"):
                shapes.setdefault((name, shape), []).append(np.mean(
                    [times[f"{shape} #{k}"] / times[f"shuffle #{k}"] for k in range(min(args.shuffles, 4))]))
            ratios["bound"].append(rows[ASP].metrics["lower_bound_end_to_end_s"] / deal)
            print(f"  {name} seed {seed}: best {best} {times[best]:.0f} s, deal {deal:.0f} s", file=sys.stderr)
        cell = {k: f"{np.mean(v):.3f} +- {np.std(v):.3f}" for k, v in ratios.items()}
        print(f"| {name} | {cell['asp']} | {cell['shuffle']} | {cell['chunks']} | {cell['picked']} | {', '.join(picks)} | "
              f"{cell['bound']} |", flush=True)
        tables.append((name, {k: np.mean(v, axis=0) for k, v in waits.items()}))
    last = "its last step" if max_lag is None else f"its last {max_lag + 1} steps (max_lag + 1)"
    print("\nWhere the trainer waits (seconds idle, mean over the seeds): before its first third of steps (the "
          f"pipeline filling), in the middle, and before {last} (the rollout draining), with the run's end-to-end "
          "time and the run's train steps.\n")
    print("| workload | arrangement | filling | middle | draining | end-to-end | steps |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, waits_of in tables:
        for label, (fill, middle, drain, end, steps) in waits_of.items():
            print(f"| {name} | {label} | {fill:.0f} | {middle:.0f} | {drain:.0f} | {end:.0f} | {steps:.0f} |")
    print("\nA short final train batch, end-to-end time over the shuffle it is made from (mean over the seeds of "
          "the mean over four shuffles): at the run's end only, and closing every epoch (what a plan that cannot "
          "tell its last epoch from the others would do).\n")
    print("| workload | shortest batch last | shortest batch closing every epoch |")
    print("|---|---:|---:|")
    for name in args.workloads.split(","):
        print(f"| {name} | {np.mean(shapes[(name, 'shortest batch last')]):.3f} | "
              f"{np.mean(shapes[(name, 'shortest batch closing every epoch')]):.3f} |")


if __name__ == "__main__":
    main()
