"""Synchronous training (each train batch generated, then trained): asp's plans against the equal-footing
baselines, every row replayed with the trainer following the schedule's steps at --max-lag 0, on blocking
`generate()` calls (`continuous`, vLLM offline; `static`, HF generate) or on servers that refill freed slots
(`--mode streaming`: verl 0.7-0.9's rollout, whose default trainer is synchronous).

    python scripts/bench_sync.py --seeds 4            # about 12 minutes on 2 cores; reads ../shared/data
    python scripts/bench_sync.py --seeds 4 --mode static   # the padded engine (HF generate)
    python scripts/bench_sync.py --seeds 4 --mode streaming   # servers that refill (verl), about 13 minutes
    python scripts/bench_sync.py --seeds 4 --mode verl   # the same, routed as verl 0.9.1 routes, about 15 minutes
    python scripts/bench_sync.py --seeds 4 --mode verl --verl-trainer legacy   # verl's legacy trainer's cut
    python scripts/bench_sync.py --seeds 4 --mode slime   # as slime routes (sglang-router), about 20 minutes
    python scripts/bench_sync.py --seeds 4 --mode slime-async [--trainer-scale 0.25]   # slime's train_async.py
    python scripts/bench_sync.py --seeds 4 --mode openrlhf[-async] [--trainer-scale 0.25]   # OpenRLHF 0.11.2

Prints a Markdown table (docs/benchmarks.md, "Synchronous training on blocking engines" and "... on engines that
refill"): per workload, each row's end-to-end time over the engine's reference (blocking: a shuffle in asp's
slots, `random (asp sizes)`; streaming: verl's default, a shuffle routed to the least-pending server), mean +-
sd over the seeds, and the 90th-percentile step deviation (|step mean length / epoch mean - 1|) of the
reference and of `asp per-step`.
`--mode verl` replays the same plans as verl 0.9.1 rolls out (`asp_cli.sim.submit_all`): every sample its own
request, a whole train batch (each plan's own steps, an epoch ending in a short one) submitted at once and routed
as it is submitted (verl's balancer: fewest requests in flight, which deals them out evenly by count; or a router
plug-in), each server refilling from its own queue; figures are over verl's default (a shuffle), mean +- sd.
`--mode slime-async` replays as slime's `train_async.py` runs (one step off the policy: each rollout generated
while the step before trains, `asp_cli.sim.submit_all.one_step_off_end_to_end_s`), asp's plans made with
`--max-lag 1 --trainer schedule`; `--trainer-scale` multiplies the training step's cost (0.25: rollout-bound).
`--mode openrlhf` replays as OpenRLHF 0.11.2 rolls out a batch (each prompt's samples together, the batch's prompts
dealt to the engines in turn: `--router group-round-robin`), synchronously; `--mode openrlhf-async` as its
`--train.async_enable` runs (queue size 1: one step off, as slime's train_async.py).
asp cuts each synchronous step either way, whichever its predictions say ends sooner: dealt into minibatches of
balanced work, or cut consecutively longest first (`asp_cli.arrange.packing.cut_per_step`). `per-step, cut
longest first` is the per-step plan as it was before 2026-12-04 (every step cut), `per-step, always dealt` as
it was from then to 2026-12-05 (every step dealt), kept to show what each change did. The sorts in asp's sizes
are cut train batch by train batch (since 2026-12-05; before, their minibatches crossed steps and ran at a lag
of 1 against the bound of 0).
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

WORKLOADS = ("gsm8k-k4-n8", "mix-k8-n8", "mix-k16-n16", "mix-k8-n8-b256", "mix-k16-n16-b512", "aime-k8-n8-b256")
# Per engine: the baselines, the first the reference every figure is over (blocking: a shuffle in asp's slots;
# engines that refill: verl's own default, a shuffle routed to the server with the fewest requests in flight).
BASELINES = {"blocking": ("random (asp sizes)", "verl-default", "short-first (asp sizes)", "long-first (asp sizes)"),
             "streaming": ("least-pending", "round-robin", "length-aware", "short-first (least-pending)",
                           "long-first (least-pending)")}
# asp's rows: (label, arrangement, steps rule, how each step is cut: None as asp does, "dealt" always dealt as
# 2026-12-04, "cut" cut longest first as before that; the last two on blocking engines only)
ASP_ROWS = (("asp (auto)", "auto", "any", None), ("asp (auto, --steps representative)", "auto", "representative", None),
            ("asp long-first", "long-first", "any", None), ("asp per-step", "per-step", "any", None),
            ("per-step, always dealt", "per-step", "any", "dealt"),
            ("per-step, cut longest first", "per-step", "any", "cut"))


# On engines that refill, also asp planned for servers that keep to its plan (verl with asp's router plug-in,
# docs/integrations.md, Option D), as the length-aware router is: `--dispatch planned`.
PLANNED_ROWS = (("asp (auto, --steps representative, --dispatch planned)", "auto", "representative", None),)


# --mode verl: (label, frame, routing, serving). Frames: the shuffle and the longest-first sort of the baselines
# (verl's default and sorting the dataset), or asp's plan with these settings; routing as
# `asp_cli.sim.submit_all.ROUTINGS`; serving "priority" is rollout.scheduling_policy=priority (Option D sets it).
VERL_ROWS = (("verl default", "least-pending", "least-pending", "fcfs"),
             ("long-first sort", "long-first (least-pending)", "least-pending", "fcfs"),
             ("length-aware plug-in", "least-pending", "length-aware", "fcfs"),
             ("asp (auto)", {}, "least-pending", "fcfs"),
             ("asp (auto), priority", {}, "least-pending", "priority"),
             ("asp (auto, --steps representative)", {"steps": "representative"}, "least-pending", "fcfs"),
             ("asp (auto, --steps representative, --dispatch planned), router plug-in",
              {"steps": "representative", "dispatch": "planned"}, "planned", "priority"),
             ("asp (auto, --steps representative), length-aware plug-in", {"steps": "representative"},
              "length-aware", "fcfs"))

# --mode slime: slime's synchronous rollout (a rollout's groups submitted in order, all at once) through
# sglang-router's cache_aware policy, which slime launches by default: each group's samples on the server its first
# went to (`asp_cli.sim.submit_all.cache_aware_server`). Every row is routed so; the frames as above, the reference a
# shuffle (slime's --rollout-shuffle), and asp's plans timed as verl routes (auto's default) or as slime's router
# does (`--router cache-aware`).
SLIME_ROWS = (("shuffle", "least-pending", "cache-aware", "fcfs"),
              ("file order", "dataset-order", "cache-aware", "fcfs"),
              ("long-first sort", "long-first (least-pending)", "cache-aware", "fcfs"),
              ("short-first sort", "short-first (least-pending)", "cache-aware", "fcfs"),
              ("asp (auto)", {}, "cache-aware", "fcfs"),
              ("asp (auto, --router cache-aware)", {"router": "cache-aware"}, "cache-aware", "fcfs"),
              ("asp (auto, --steps representative)", {"steps": "representative"}, "cache-aware", "fcfs"),
              ("asp (auto, --steps representative, --router cache-aware)",
               {"steps": "representative", "router": "cache-aware"}, "cache-aware", "fcfs"),
              ("asp per-step", {"arrangement": "per-step"}, "cache-aware", "fcfs"))
# --mode slime-async: the same rows (and the shuffle the reference), replayed as slime's train_async.py runs them.
SLIME_ASYNC_ROWS = tuple(r for r in SLIME_ROWS if r[0] != "asp per-step")
# --mode openrlhf: OpenRLHF 0.11.2's rollout (`_dispatch_prompts_to_vllm`): a batch's prompts dealt to the engines in
# turn, each prompt's samples together, the generator waiting for the whole batch. Its default is a shuffle (its
# prompt dataloader's hard-coded shuffle=True); asp's plans timed as verl routes (auto's default) or as OpenRLHF
# deals (`--router group-round-robin`). --mode openrlhf-async: the same, one step off (--train.async_enable).
_DEAL = "group-round-robin"
OPENRLHF_ROWS = (("shuffle", "least-pending", _DEAL, "fcfs"),
                 ("long-first sort", "long-first (least-pending)", _DEAL, "fcfs"),
                 ("short-first sort", "short-first (least-pending)", _DEAL, "fcfs"),
                 ("asp (auto, --router group-round-robin)", {"router": _DEAL}, _DEAL, "fcfs"),
                 ("asp (auto, --steps representative, --router group-round-robin)",
                  {"steps": "representative", "router": _DEAL}, _DEAL, "fcfs"),
                 # A shuffle's train batches, each laid out for the deal (`streaming.dealt_in_turn`): the layout alone.
                 ("asp per-step, --router group-round-robin", {"arrangement": "per-step", "router": _DEAL}, _DEAL,
                  "fcfs"))
# Each mode's rows (`run_verl`) and the row whose step deviation the table shows beside the reference's.
ROUTED_PLANS = {"slime": SLIME_ROWS, "slime-async": SLIME_ASYNC_ROWS, "openrlhf": OPENRLHF_ROWS,
                "openrlhf-async": OPENRLHF_ROWS}
STEADY_ROW = {"slime": "asp (auto, --steps representative, --router cache-aware)",
              "openrlhf": "asp (auto, --steps representative, --router group-round-robin)"}


def arranged(workload, settings, preset, kind: str | dict, cache: dict[str, tuple]) -> tuple:
    """A baseline's arrangement (``kind`` its name) or asp's plan with ``settings`` changed by ``kind`` (a dict),
    sorted by ``seq``, and each of its rows' position among the workload's prompts; made once per kind (``cache``,
    which also keeps asp's choice of arrangement, or None, as the third item)."""
    import asp_cli.columns as C
    from asp_cli.arrange.pipeline import plan
    from asp_cli.bench.baselines import BASELINES as KINDS

    key = kind if isinstance(kind, str) else repr(sorted(kind.items()))
    if key not in cache:
        frame, choice = ((KINDS[kind].arrange(workload.prompts, workload.predictions, settings, preset, None), None)
                         if isinstance(kind, str) else
                         plan(workload.prompts, workload.predictions, dataclasses.replace(settings, **kind),
                              preset=preset))
        frame = frame.sort("seq")
        position = dict(zip(workload.prompts[C.ROW].to_list(), range(workload.prompts.height)))
        index = np.fromiter((position[r] for r in frame[C.ROW].to_list()), dtype=np.int64, count=frame.height)
        cache[key] = (frame, index, choice)
    return cache[key][:2]


def run_verl(names: tuple[str, ...], seeds: int, data: Path, chunking: str = "v1",
             plans: tuple = VERL_ROWS, one_step_off: bool = False,
             trainer_scale: float = 1.0) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Every plan of ``plans`` (`VERL_ROWS`, `SLIME_ROWS` or `SLIME_ASYNC_ROWS`) replayed as verl's synchronous
    trainer (``chunking``: `asp_cli.sim.submit_all.CHUNKING`) or slime's rolls it out, with ``one_step_off`` as
    slime's train_async.py (asp's plans made for it: --max-lag 1); ratios over the first row. ``trainer_scale``
    multiplies the training step's cost."""
    import asp_cli.columns as C
    from asp_cli.bench.compare import WORKLOADS as SPECS
    from asp_cli.bench.compare import build_workload
    from asp_cli.costmodel import load_preset
    from asp_cli.sim.submit_all import replay_frame

    from bench_rollout_bound import scaled_preset

    preset = scaled_preset(load_preset("h100-qwen2.5-7b"), trainer_scale)
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for name in names:
        spec = SPECS[name]
        rows: dict[str, list[tuple[float, float]]] = {}
        for seed in range(seeds):
            settings = dataclasses.replace(spec.settings(seed), trainer="schedule", engine="streaming",
                                           max_lag=1 if one_step_off else 0)
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            predicted = workload.predictions[C.PREDICTED_MEAN_TOKENS].to_numpy()
            frames: dict[str, tuple] = {}
            seconds = {}
            for label, kind, routing, serving in plans:
                frame, index = arranged(workload, settings, preset, kind, frames)
                result = replay_frame(frame, workload.truth[index], preset, instances=settings.instances,
                                      train_batch_size=settings.train_batch_size, routing=routing, serving=serving,
                                      chunking=chunking, predicted_tokens=predicted[index], seed=seed,
                                      one_step_off=one_step_off)
                means = workload.truth[index].mean(axis=1)
                # Each step's groups wherever they lie in dispatch order (a plan under a lag bound interleaves
                # steps there: read as runs of seq order, its steps came out a curriculum they are not).
                step = np.unique(frame["train_step"].to_numpy(), return_inverse=True)[1]
                step_means = np.bincount(step, weights=means) / np.bincount(step)
                seconds[label] = (result.end_to_end_s, float(np.quantile(np.abs(step_means / means.mean() - 1), 0.9)))
            reference = seconds[plans[0][0]][0]
            for label, (total, deviation) in seconds.items():
                rows.setdefault(label, []).append((total / reference, deviation))
            print(f"{name} seed {seed} done", file=sys.stderr, flush=True)
        results[name] = rows
    return results


def verl_table(results: dict[str, dict[str, list[tuple[float, float]]]], plans: tuple = VERL_ROWS) -> str:
    steady = ("asp (auto, --steps representative)" if plans is VERL_ROWS
              else STEADY_ROW["openrlhf" if plans is OPENRLHF_ROWS else "slime"])
    return _markdown(results, [r[0] for r in plans[1:]], plans[0][0], steady, f"{plans[0][0]} / representative")


def rows_for(mode: str) -> tuple[tuple[str, ...], tuple[tuple[str, str, str, str | None], ...]]:
    """The baselines and asp's rows replayed on engine ``mode``."""
    if mode == "streaming":
        return BASELINES["streaming"], (*(r for r in ASP_ROWS if r[3] is None), *PLANNED_ROWS)
    return BASELINES["blocking"], ASP_ROWS


def run(names: tuple[str, ...], seeds: int, data: Path,
        mode: str = "continuous") -> dict[str, dict[str, list[tuple[float, float]]]]:
    import asp_cli.arrange.pipeline as pipeline
    from asp_cli.bench.compare import WORKLOADS as SPECS
    from asp_cli.bench.compare import build_workload, compare
    from asp_cli.costmodel import load_preset

    preset = load_preset("h100-qwen2.5-7b")
    own = pipeline.cut_per_step
    baselines, asp_rows = rows_for(mode)
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for name in names:
        spec = SPECS[name]
        rows: dict[str, list[tuple[float, float]]] = {}
        for seed in range(seeds):
            settings = dataclasses.replace(spec.settings(seed), trainer="schedule")
            workload = build_workload(name, data, spec.sources, settings, seed=seed)
            base = {r["arrangement"]: r for r in compare(workload.prompts, workload.predictions, workload.truth,
                                                         settings, preset, mode=mode, max_lag=0,
                                                         include=baselines)}
            reference = base[baselines[0]]["end_to_end_s"]
            for label in baselines:
                rows.setdefault(label, []).append((base[label]["end_to_end_s"] / reference,
                                                   base[label]["step_length_deviation_p90"]))
            for label, arrangement, steps, variant in asp_rows:
                if variant == "cut":  # the cut of before 2026-12-04: each step's groups in order, longest first
                    pipeline.cut_per_step = lambda *a, **k: own(*a[:5])
                elif variant == "dealt":  # every step dealt, as from 2026-12-04 to 2026-12-05
                    pipeline.cut_per_step = lambda *a, **k: own(*a)
                try:
                    planned = {"dispatch": "planned"} if "--dispatch planned" in label else {}
                    asp = compare(workload.prompts, workload.predictions, workload.truth,
                                  dataclasses.replace(settings, arrangement=arrangement, steps=steps, **planned),
                                  preset, mode=mode, max_lag=0, include=("asp",))[0]
                finally:
                    pipeline.cut_per_step = own
                rows.setdefault(label, []).append((asp["end_to_end_s"] / reference,
                                                   asp["step_length_deviation_p90"]))
            print(f"{name} seed {seed} done", file=sys.stderr, flush=True)
        results[name] = rows
    return results


def table(results: dict[str, dict[str, list[tuple[float, float]]]], mode: str = "continuous") -> str:
    baselines, asp_rows = rows_for(mode)
    return _markdown(results, [*baselines[1:], *(r[0] for r in asp_rows)], baselines[0], "asp per-step",
                     f"{baselines[0]} / per-step")


def mean_sd(values: list[float]) -> str:
    """A table cell: the mean and the sample standard deviation over the seeds (0 for one seed)."""
    ratios = np.asarray(values)
    return f"{ratios.mean():.3f} +- {ratios.std(ddof=1) if ratios.size > 1 else 0.0:.3f}"


def _markdown(results: dict[str, dict[str, list[tuple[float, float]]]], labels: list[str], reference: str,
              steady: str, deviation_label: str) -> str:
    """Each label's ratio (mean +- sd over the seeds) per workload, and the step deviation of two rows."""
    lines = ["| workload | " + " | ".join(labels) + f" | step dev p90: {deviation_label} |",
             "|---|" + "---:|" * (len(labels) + 1)]
    for name, rows in results.items():
        cells = []
        cells.extend(mean_sd([r for r, _ in rows[label]]) for label in labels)
        dev = (np.mean([d for _, d in rows[reference]]), np.mean([d for _, d in rows[steady]]))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {dev[0]:.2f} / {dev[1]:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--mode", default="continuous",
                        choices=("continuous", "static", "streaming", "verl", "slime", "slime-async", "openrlhf",
                                 "openrlhf-async"),
                        help="the engine: blocking continuous batching (vLLM offline generate()), padded (HF "
                        "generate), servers that refill freed slots (vLLM/SGLang servers: verl 0.7-0.9), those "
                        "servers with each train batch routed as verl 0.9.1 routes it, at submission, or as slime "
                        "v0.3.1 routes a rollout through sglang-router's cache_aware policy, synchronously or as its "
                        "train_async.py runs (each rollout while the step before trains), or as OpenRLHF 0.11.2 "
                        "deals a batch to its engines, synchronously or with --train.async_enable")
    parser.add_argument("--trainer-scale", type=float, default=1.0,
                        help="with --mode verl, slime or slime-async: the training step's cost multiplied by this "
                        "(0.25: four times the trainer GPUs, rollout-bound)")
    parser.add_argument("--verl-trainer", default="v1", choices=("v1", "legacy"),
                        help="with --mode verl: how verl cuts a batch across its agent-loop workers: the v1 trainer "
                        "(0.9's default: the prompts, each prompt's sessions started together) or the legacy one "
                        "(trainer.use_v1=False, and verl 0.7: the batch repeated n times)")
    args = parser.parse_args(argv)
    if args.mode.startswith(("slime", "openrlhf")) and args.verl_trainer != "v1":
        parser.error("--verl-trainer is how verl cuts a batch; slime and OpenRLHF submit a rollout's groups in "
                     "order: drop it")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.trainer_scale != 1.0 and args.mode not in ("verl", *ROUTED_PLANS):
        parser.error("--trainer-scale is for --mode verl, slime, slime-async, openrlhf or openrlhf-async")
    if not args.trainer_scale > 0:
        parser.error("--trainer-scale must be above 0")
    if not args.data.is_dir():
        print(f"{args.data}: no such folder; this benchmark reads ../shared/data (--data)", file=sys.stderr)
        return 3
    names = tuple(n for n in args.workloads.split(",") if n)
    if args.mode in ("verl", *ROUTED_PLANS):
        plans = ROUTED_PLANS.get(args.mode, VERL_ROWS)
        print(verl_table(run_verl(names, args.seeds, args.data, args.verl_trainer, plans,
                                  one_step_off=args.mode.endswith("-async"), trainer_scale=args.trainer_scale), plans))
    else:
        print(table(run(names, args.seeds, args.data, args.mode), args.mode))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
