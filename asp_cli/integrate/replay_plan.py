"""What `asp replay` sends: the arrangements of a schedule's prompts, each flattened into requests with forced
lengths and prompts, and the simulator's prediction for the same run.

Every arrangement (asp's schedule and the baselines rebuilt from its prompts and predictions) replays the
same true lengths per prompt and epoch, like ``asp simulate --compare``: a prompt's N samples have the same
lengths in every arrangement; each epoch of a schedule of several forces its own (`prompt_lengths`). `arrangements` is the only function that knows
`asp_cli.bench.baselines`; `simulate_plan` the only one that runs the simulator.
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import InputError, SettingsError, shown_id
from asp_cli.settings import ScheduleSettings

ASP = "asp"
# Synthetic prompts are token ids drawn from this range, which every current tokenizer's vocabulary holds
# (Llama-2 has 32,000 ids, Qwen2.5 151,646) and which avoids the low ids where special tokens live.
SYNTHETIC_TOKEN_IDS = (1000, 30000)


@dataclass(frozen=True)
class Arrangement:
    """One order of the prompts: a schedule frame (sorted by ``seq``) and how minibatches are dispatched."""

    name: str
    frame: pl.DataFrame
    dispatch: str  # "planned" (the frame's instance column) or "free" (the next minibatch to a free instance)


def _mode(engine: str) -> str:
    """The simulator's engine mode a replay engine corresponds to."""
    return "continuous" if engine == "blocking" else "streaming"


def baseline_names(engine: str = "blocking") -> tuple[str, ...]:
    """The baselines this asp can rebuild for ``engine`` (their set and names follow `asp_cli.bench.baselines`)."""
    from asp_cli.bench.baselines import BASELINES, RANDOM_IN_ASP_SLOTS

    names = [name for name, b in BASELINES.items() if _mode(engine) in b.modes]
    return (*names, RANDOM_IN_ASP_SLOTS) if engine == "blocking" else tuple(names)


def equal_footing_names(engine: str = "blocking") -> tuple[str, ...]:
    """The baselines on equal footing with asp for ``engine``: what ``--compare`` runs unless told otherwise.

    On engines that refill, verl's chunked rows are on equal footing too (`Baseline.equal_footing_on`: `asp
    simulate --compare` counts them), but they are left out here to keep a replay on real servers short: name
    them with ``--baseline``."""
    from asp_cli.bench.baselines import BASELINES, RANDOM_IN_ASP_SLOTS

    names = [name for name, b in BASELINES.items() if b.equal_footing and _mode(engine) in b.modes]
    return (*names, RANDOM_IN_ASP_SLOTS) if engine == "blocking" else tuple(names)


def arrangements(frame: pl.DataFrame, settings: ScheduleSettings, names: list[str], preset: HardwarePreset,
                 engine: str = "blocking", kv_cut: str | None = None) -> list[Arrangement]:
    """The schedule itself (``"asp"``) and baselines of its prompts, in the order of ``names``; the ones in
    asp's sizes cut as ``kv_cut`` says (how the schedule was: `schedule_format.Schedule.kv_budget`).

    This is the one place that knows `asp_cli.bench.baselines`.

    Raises
    ------
    SettingsError
        For a name that is neither ``asp`` nor a baseline made for ``engine``.
    """
    from asp_cli.bench.baselines import BASELINES, RANDOM_IN_ASP_SLOTS, arrange_baseline, random_in_asp_slots
    from asp_cli.bench.simulate import schedule_prompts

    out = []
    prompts = predictions = None
    frame = frame.sort("seq")
    known = baseline_names(engine)
    for name in names:
        if name == ASP:
            out.append(Arrangement(ASP, frame, settings.dispatch))  # the way it was made to be dispatched
            continue
        if name not in known:
            other = [n for n in baseline_names("streaming" if engine == "blocking" else "blocking") if n not in known]
            why = f" is made for the other engine (--engine {'streaming' if engine == 'blocking' else 'blocking'})" \
                if name in other else ": no such baseline"
            raise SettingsError(f"--baseline {name!r}{why}; with --engine {engine} choose from {', '.join(known)}")
        if name == RANDOM_IN_ASP_SLOTS:
            out.append(Arrangement(name, random_in_asp_slots(frame, settings.seed).sort("seq"), "planned"))
            continue
        if prompts is None:
            prompts, predictions = schedule_prompts(frame)
        baseline = arrange_baseline(name, prompts, predictions, settings, preset, kv_cut).sort("seq")
        out.append(Arrangement(name, baseline, BASELINES[name].dispatch))
    return out


@dataclass
class RequestPlan:
    """One arrangement flattened: its rows in ``seq`` order, N requests each (request ``row * N + sample``)."""

    name: str
    dispatch: str
    run: int
    seq: np.ndarray
    epoch: np.ndarray
    prompt_id: list[str]
    minibatch: np.ndarray
    instance: np.ndarray  # planned instance per row
    prompt_tokens: np.ndarray  # per row: the recorded (or synthetic, exact) prompt length
    lengths: np.ndarray  # (rows, N) forced response lengths
    prompts: list[str] | None  # per row; None: synthetic token ids of the row's prompt_tokens, made when sent
    frame: pl.DataFrame  # the arrangement's schedule frame (for the simulator)

    def prompt(self, row: int) -> str | list[int]:
        """What row ``row``'s requests send as their prompt (a run and epoch's own, see `build_plans`)."""
        if self.prompts is not None:
            return self.prompts[row]
        return synthetic_prompt(self.prompt_id[row], int(self.prompt_tokens[row]), f"{self.run}.{int(self.epoch[row])}")

    @property
    def samples_per_prompt(self) -> int:
        return int(self.lengths.shape[1])

    @property
    def requests(self) -> int:
        return int(self.lengths.size)

    def minibatches(self) -> list[tuple[int, int, int]]:
        """(first row, end row, planned instance) of every minibatch, in ``seq`` order."""
        change = np.flatnonzero(np.diff(self.minibatch)) + 1
        starts = np.concatenate(([0], change)).astype(np.int64)
        ends = np.concatenate((change, [self.minibatch.size])).astype(np.int64)
        return [(int(a), int(b), int(self.instance[a])) for a, b in zip(starts, ends)]


def prompt_lengths(frame: pl.DataFrame, observed: pl.DataFrame | None, *, samples_per_prompt: int, seed: int,
                   max_response_tokens: int, per_epoch: bool = True):
    """True lengths per prompt, ``(prompts, N)`` aligned with the schedule's rows 0..P-1, and per schedule epoch,
    where they came from: `asp simulate`'s (`asp_cli.sim.lengths.lengths_for_schedule` on every row of every epoch),
    so each epoch of a schedule of several forces the lengths' own epoch of its number where they hold it, and
    draws its sampled lengths afresh. ``per_epoch`` False: ``observed`` is one epoch picked for all (`--lengths-epoch
    E`). Each prompt replayed its oldest epoch's samples in every epoch before 2026-12-08, where `asp simulate`
    replays each epoch's own (a 2-epoch schedule with a log of 2 epochs forced epoch 0's lengths in epoch 1).

    Returns
    -------
    (row ids, lengths, lengths by epoch, info, clipped)
        ``lengths``: each prompt's in its first epoch; ``lengths by epoch``: each schedule epoch's, aligned the same
        way (`asp_cli.bench.simulate.replayed_lengths_per_epoch`). ``clipped`` counts observed samples above
        ``max_response_tokens`` that were cut to it, each once (`LengthInfo.samples_over_cap`).
    """
    from asp_cli.bench.simulate import replayed_lengths_per_epoch, schedule_prompts
    from asp_cli.sim.lengths import lengths_for_schedule

    prompts, predictions = schedule_prompts(frame)
    # Every row of every epoch, epoch by epoch and each in row order (one epoch: the prompts' own order, so a
    # one-epoch schedule's lengths are what they were), with the predictions of each prompt's first row.
    every = frame.select("row", "epoch").sort(["epoch", "row"]).join(
        pl.concat([prompts, predictions], how="horizontal"), on="row", how="left", maintain_order="left")
    truth, info = lengths_for_schedule(every.select(*prompts.columns, *predictions.columns, "epoch"), observed,
                                       samples_per_prompt=samples_per_prompt, seed=seed,
                                       max_response_tokens=max_response_tokens, per_epoch=per_epoch)
    first, by_epoch = replayed_lengths_per_epoch(every, np.clip(truth, 1, max_response_tokens), prompts)
    return prompts["row"].to_numpy(), first, by_epoch, info, info.samples_over_cap


def dataset_prompts(datasets: list[Path], metadata: dict, *, prompt_key: str | None,
                    id_key: str | None) -> dict[str, str]:
    """Prompt text by id, read from the dataset(s) the schedule was made from (ids as `asp schedule` found them)."""
    from asp_cli.integrate.export import recorded_keys
    from asp_cli.reading import read_prompts
    from asp_cli.reading.options import ReadOptions

    # The keys as `asp export` reads them: a damaged entry ({"prompt": 5}) was exit 70 here.
    recorded_id, recorded_prompt = recorded_keys(metadata)
    options = ReadOptions(prompt_key=prompt_key or recorded_prompt, id_key=id_key or recorded_id, on_bad_row="skip")
    frame, _ = read_prompts(datasets, options)
    return dict(zip(frame["prompt_id"].to_list(), frame["prompt_text"].to_list()))


def synthetic_prompt(prompt_id: str, tokens: int, salt: str) -> list[int]:
    """``tokens`` token ids, the same for the same prompt id and salt (the N samples share them)."""
    seed = zlib.crc32(f"{salt}\x00{prompt_id}".encode())
    low, high = SYNTHETIC_TOKEN_IDS
    return np.random.default_rng(seed).integers(low, high, max(int(tokens), 1)).tolist()


def build_plans(arranged: list[Arrangement], rows: np.ndarray, truth: np.ndarray,
                texts: dict[str, str] | None, default_prompt_tokens: int,
                truth_by_epoch: dict[int, np.ndarray] | None = None) -> list[RequestPlan]:
    """Flatten each arrangement into requests: forced lengths from ``truth`` (aligned with ``rows``; each epoch's
    from ``truth_by_epoch`` where it holds that epoch, as `asp simulate --compare` lays them:
    `asp_cli.bench.compare.epoch_lengths`), prompts from ``texts`` (by prompt id) or synthetic token ids of the
    recorded prompt length.

    Every (run, epoch) gets its own prompts (a salt: a tag before the text, or other token ids), so no run
    reuses another's prefix cache, as in training, where the cache is dropped when the weights change.

    Raises
    ------
    InputError
        When the dataset lacks a scheduled prompt id.
    """
    from asp_cli.bench.compare import epoch_lengths

    position = {int(r): i for i, r in enumerate(rows.tolist())}
    plans = []
    for run, arrangement in enumerate(arranged):
        frame = arrangement.frame
        index = np.fromiter((position[int(r)] for r in frame["row"].to_list()), dtype=np.int64, count=frame.height)
        if "prompt_tokens" in frame.columns:
            prompt_tokens = frame["prompt_tokens"].fill_null(default_prompt_tokens).to_numpy().astype(np.int64)
        else:
            prompt_tokens = np.full(frame.height, default_prompt_tokens, dtype=np.int64)
        ids = frame["prompt_id"].to_list()
        epochs = frame["epoch"].to_numpy()
        if texts is not None:
            missing = [i for i in ids if i not in texts]
            if missing:
                raise InputError(f"the dataset has no prompt with id {shown_id(missing[0])} ({len(set(missing))} scheduled ids "
                                 "are missing); give the file(s) the schedule was made from, or --synthetic-prompts")
            prompts: list[str] | None = [f"[run {run}.{e}] {texts[i]}" for i, e in zip(ids, epochs)]
        else:
            prompts = None  # made per request when sent (`RequestPlan.prompt`): nothing held in memory
            prompt_tokens = np.maximum(prompt_tokens, 1)
        plans.append(RequestPlan(
            name=arrangement.name, dispatch=arrangement.dispatch, run=run, seq=frame["seq"].to_numpy(),
            epoch=epochs, prompt_id=ids, minibatch=frame["minibatch"].to_numpy(),
            instance=frame["instance"].to_numpy(), prompt_tokens=prompt_tokens, lengths=epoch_lengths(frame, index, truth, truth_by_epoch),
            prompts=prompts, frame=frame))
    return plans


# --------------------------------------------------------------------------------------------------------
# The simulator's prediction for a replay


@dataclass(frozen=True)
class Simulated:
    """The simulator's prediction per request (``row * N + sample``) and the instance it ran on."""

    send_s: np.ndarray
    finish_s: np.ndarray
    instance: np.ndarray


def replay_preset(preset: HardwarePreset, max_in_flight: int | None) -> HardwarePreset:
    """The preset for simulating a replay: no trainer (a replay only generates), and the client's in-flight
    limit as the engine's sequence limit."""
    seqs = preset.max_num_seqs if max_in_flight is None else min(preset.max_num_seqs, max_in_flight)
    return dataclasses.replace(preset, train_fixed_s=0.0, train_per_token_s=0.0, weight_sync_s=0.0,
                               max_num_seqs=int(seqs))


def simulate_plan(plan: RequestPlan, preset: HardwarePreset, *, engine: str, instances: int,
                  max_in_flight: int | None, train_batch_size: int) -> Simulated:
    """Replay the plan in asp's simulator, the way `asp replay` sends it.

    ``engine="blocking"`` is the simulator's ``continuous`` mode (one minibatch at a time per instance,
    continuous batching inside); ``"streaming"`` its ``streaming`` mode. A blocking request counts as sent when
    its minibatch starts (the first admission in it), a streaming one when it is admitted.
    """
    from asp_cli.sim.records import SimulationSettings
    from asp_cli.sim.run import simulate_schedule

    n = plan.samples_per_prompt
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=train_batch_size,
                                  mode="continuous" if engine == "blocking" else "streaming",  # type: ignore[arg-type]
                                  dispatch=plan.dispatch, max_lag=None)  # type: ignore[arg-type]
    frame = plan.frame.with_columns(pl.Series("prompt_tokens", plan.prompt_tokens, dtype=pl.Int64))
    result = simulate_schedule(frame, plan.lengths, replay_preset(preset, max_in_flight), settings,
                               instances=instances)
    admit = np.asarray(result.seq_admit_s, dtype=np.float64)
    if engine == "blocking":
        starts = np.array([a for a, _, _ in plan.minibatches()], dtype=np.int64)
        row_first = admit.reshape(-1, n).min(axis=1)
        mb_first = np.minimum.reduceat(row_first, starts)
        sizes = np.diff(np.append(starts, row_first.size))
        admit = np.repeat(np.repeat(mb_first, sizes), n)
    return Simulated(send_s=admit, finish_s=np.asarray(result.seq_finish_s, dtype=np.float64),
                     instance=np.asarray(result.seq_instance, dtype=np.int64))
