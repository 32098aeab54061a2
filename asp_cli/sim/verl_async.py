"""Asynchronous rollout as verl 0.9.1's fully asynchronous trainer runs it: each prompt submitted when a slot frees,
its ``n`` sessions routed one by one at submission, each server refilling freed slots from its own queue.

`asp_cli.sim.run`'s ``streaming`` mode sends a whole *group* to whichever instance frees a slot first (a shared
queue). verl's asynchronous trainer does not (read from its source, ``verl/experimental/fully_async_policy/
fully_async_rollouter.py`` and ``detach_utils.py``, ``verl/experimental/agent_loop/agent_loop.py``,
``verl/workers/rollout/router.py``): the rollouter takes the dataset's prompts in order and starts one as a task
whenever fewer than ``max_concurrent_samples`` are active (``async_training.concurrent_samples_per_replica``, 16 by
default, times the servers); the task repeats the prompt ``n`` times and hands it to an agent-loop worker, which
starts the ``n`` sessions at once, each asking the global load balancer for a server before it sends its request.
The balancer picks the server with the fewest requests in flight (ties at random), so a group's samples are spread
over the servers and every request is placed by count when it is submitted, whatever its length; a server (vLLM)
admits them first come, first served. A prompt's task ends, and frees its slot, when the last of its sessions does.
The rollouter pauses while the prompts it started since the last weight sync, counted from those then in flight
or queued, reach ``(staleness_threshold + 1)`` train batches: outstanding work is at most ``max_lag + 1`` train
batches, AReaL's count rule that `asp_cli.sim.run` applies (``started <= (max_lag + v + 1) * train_batch``), with
``staleness_threshold`` as ``max_lag``.

This module replays that, with the engine (`asp_cli.sim.engine.Engine`), trainer (`asp_cli.sim.trainer.Trainer`,
groups in arrival order) and weight-sync rule of `asp_cli.sim.run`. The servers run side by side: the one furthest
behind in simulated time runs to its next completion, or to ``quantum_s`` past the next one, so a submission can
reach a server up to ``quantum_s`` (plus one decode step) after the completion that freed its slot. At the default
(0.1 s, a few decode steps) the times have converged: with routing that has no random ties, a twentieth of it
moves the end-to-end time by under 0.1% (tests/test_verl_async.py); with verl's balancer any change of the quantum
reshuffles its random ties and moves a replay by up to 2%, as a change of seed does.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import SettingsError
from asp_cli.sim.engine import Engine
from asp_cli.sim.records import SimulationSettings, Stats
from asp_cli.sim.run import load_newest
from asp_cli.sim.submit_all import ROUTINGS, CacheAwareRouter
from asp_cli.sim.trainer import Trainer

# verl's async_training.concurrent_samples_per_replica default (fully_async_rollouter.py, 0.9.1): prompts in flight
# per server.
VERL_PROMPTS_PER_SERVER = 16
# How far (simulated seconds) a server may run past the one furthest behind before the others catch up.
QUANTUM_S = 0.1


@dataclass(frozen=True)
class AsyncResult:
    end_to_end_s: float
    rollout_end_s: float  # the last sample's finish
    group_submit_s: np.ndarray  # per row: when the rollouter started it
    group_arrival_s: np.ndarray  # per row: its last sample's finish
    group_step: np.ndarray  # per row: the train step that took it (arrival order)
    step_start_s: np.ndarray
    step_end_s: np.ndarray
    publish_s: np.ndarray  # per step: when its weights are live (the step's end and the sync)
    requests_per_server: np.ndarray
    sample_server: np.ndarray  # per sample (row * n + j): the server its request went to
    server_busy_s: np.ndarray  # per server: decoding and prefill time
    sync_s: float  # weight loads, all servers
    recomputed_tokens: int = 0  # contexts prefilled again, all servers (preempted, or resumed in colocate_async)


def replay_async(
    preset: HardwarePreset,
    *,
    instances: int,
    train_batch_size: int,
    max_lag: int | None,
    response_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    routing: str = "least-pending",
    row_instance: np.ndarray | None = None,
    row_predicted_tokens: np.ndarray | None = None,
    prompts_in_flight: int | None = None,
    quantum_s: float = QUANTUM_S,
    seed: int = 0,
    colocated: bool = False,
    row_train_step: np.ndarray | None = None,
    row_key: np.ndarray | None = None,
) -> AsyncResult:
    """Replay rows (in ``seq`` order, ``response_tokens`` ``(rows, samples per prompt)``) as verl's asynchronous
    trainer generates them.

    ``routing`` (`asp_cli.sim.submit_all.ROUTINGS`): ``least-pending`` is verl's balancer (fewest requests in
    flight, random ties); ``planned`` keeps each row's samples to ``row_instance`` (asp's router plug-in);
    ``length-aware`` sends each request to the server with the fewest predicted tokens in flight
    (``row_predicted_tokens``, per sample; the plug-in's ``+data.asp_route=length``), released when it finishes;
    ``cache-aware`` is sglang-router's default policy, slime's (`asp_cli.sim.submit_all.CacheAwareRouter`, which
    knows a prompt by ``row_key``, the same over the run's epochs; default the row); ``round-robin`` AReaL's in its
    SPMD mode, each sample to the next server in turn; ``group-round-robin`` AReaL's default (its single controller,
    `RolloutController._choose_worker`, areal/infra/controller/rollout_controller.py:707-720 and 777-813 of v1.0.4):
    each group whole to the next worker's server in turn, the first to server 0.
    ``prompts_in_flight``: verl's ``max_concurrent_samples`` (None: as many as the servers' slots hold,
    ``instances * max_num_seqs // n``, so that the servers' own limits bind). Deterministic for a ``seed``.

    verl's v1 trainer in its asynchronous modes (`replay_v1_async`) is this replay with no limit on prompts in
    flight (``prompts_in_flight`` = the rows): it submits ``max_lag`` train batches of warm-up, then one a step, each
    whole at once, so the count rule admits exactly those. ``colocated`` (``colocate_async``): the servers share the
    trainer's GPUs and stop while it trains (verl aborts the requests in flight and resumes them after): a server
    whose clock falls in a training step moves to its end and prefills its live sequences' contexts again (the
    sleep drops the KV cache; the aborted requests resume with their partial outputs), and a server may run up to ``quantum_s`` into a step before the step is known. ``row_train_step``: the trainer takes the
    groups each step is assigned (asp's replay buffer) instead of finished ones in arrival order, and asks for a
    step's groups that the count rule has not admitted yet (the buffer's refills), so that no step waits forever.
    """
    if routing not in ROUTINGS:
        raise SettingsError(f"routing must be one of {', '.join(ROUTINGS)} (got {routing!r})")
    if instances < 1 or train_batch_size < 1:
        raise SettingsError(f"need at least one instance and a train batch (got {instances} and {train_batch_size})")
    if not quantum_s > 0:
        raise SettingsError(f"quantum_s must be above 0 (got {quantum_s!r})")
    lengths = np.maximum(np.asarray(response_tokens, dtype=np.int64), 1)
    if lengths.ndim != 2 or lengths.shape[0] == 0:
        raise SettingsError("response_tokens must be (rows, samples per prompt) with at least one row")
    rows, n = lengths.shape
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    cap = prompts_in_flight if prompts_in_flight is not None else max(1, instances * preset.max_num_seqs // n)
    if cap < 1:
        raise SettingsError(f"prompts_in_flight must be at least 1 (got {cap!r})")
    planned = None
    if routing == "planned":
        if row_instance is None:
            raise SettingsError("planned routing needs each row's planned instance")
        planned = (np.asarray(row_instance, dtype=np.int64) % instances).tolist()
    predicted = None
    if routing == "length-aware":
        if row_predicted_tokens is None:
            raise SettingsError("length-aware routing needs each row's predicted tokens")
        predicted = np.asarray(row_predicted_tokens, dtype=np.float64).tolist()
    rng = np.random.default_rng([seed, 0xA5])
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=train_batch_size, mode="streaming")
    finish = np.zeros(rows * n, dtype=np.float64)
    admit = np.zeros(rows * n, dtype=np.float64)
    stats = [Stats() for _ in range(instances)]
    engines = [Engine(preset, settings, stats[k], finish, admit) for k in range(instances)]
    # The steps renumbered 0, 1, ... (a schedule exported one epoch at a time starts past 0), as `asp_cli.sim.run`.
    assigned = None if row_train_step is None else np.unique(np.asarray(row_train_step), return_inverse=True)[1]
    trainer = Trainer(preset, train_batch_size, prompts * n + lengths.sum(axis=1), assigned)
    in_flight = [0] * instances  # requests routed and not finished, per server
    tokens_in_flight = [0.0] * instances
    requests = [0] * instances
    loaded = [0] * instances
    remaining = np.full(rows, n, dtype=np.int64)
    server_of = np.full(rows * n, -1, dtype=np.int64)
    submitted = np.zeros(rows, dtype=np.float64)
    seq_lengths = lengths.reshape(-1).tolist()
    row_prompt = prompts.tolist()
    started = active = 0
    now = 0.0

    turn = [0]  # AReaL's round-robin: the next server's turn
    # sglang-router's cache, over the run: a prompt of an earlier epoch goes back to its server, loads allowing.
    router = CacheAwareRouter(instances, rng) if routing == "cache-aware" else None
    keys = np.arange(rows) if row_key is None else np.asarray(row_key)

    def pick(r: int) -> int:
        if planned is not None:
            return planned[r]
        if routing == "group-round-robin":  # a group's samples on one worker: its turn is taken once, by its first
            if server_of[r * n] < 0:
                server_of[r * n] = turn[0] % instances
                turn[0] += 1
            return int(server_of[r * n])
        if routing == "round-robin":
            turn[0] += 1
            return (turn[0] - 1) % instances
        if predicted is not None:  # the fewest predicted tokens; ties: the fewest requests, then the lowest index
            return min(range(instances), key=lambda i: (tokens_in_flight[i], in_flight[i], i))
        low = min(in_flight)
        ties = [i for i in range(instances) if in_flight[i] == low]
        return ties[0] if len(ties) == 1 else ties[int(rng.integers(len(ties)))]

    def submit(r: int) -> list[int]:
        submitted[r] = now
        fed: dict[int, list[int]] = {}
        for j in range(n):
            k = router.pick(in_flight, int(keys[r]), float(row_prompt[r])) if router is not None else pick(r)
            in_flight[k] += 1
            requests[k] += 1
            if predicted is not None:
                tokens_in_flight[k] += predicted[r]
            server_of[r * n + j] = k
            fed.setdefault(k, []).append(r * n + j)
        for k, gids in fed.items():
            engine = engines[k]
            load_newest(engine, now, trainer, loaded, k)
            engine.feed(gids, [seq_lengths[g] for g in gids], [row_prompt[r]] * len(gids))
        return list(fed)

    # With the schedule's steps followed (asp's replay buffer), a step whose groups the count rule has not let in
    # yet asks for them (the buffer's refill_fn: docs/integrations.md, Option C): rows up to its last are admitted.
    needed = None
    if assigned is not None:
        last_row = np.full(int(assigned.max()) + 1, -1, dtype=np.int64)
        np.maximum.at(last_row, assigned, np.arange(rows))
        needed = (np.maximum.accumulate(last_row) + 1).tolist()

    def lag_blocked() -> bool:
        if max_lag is None or started == 0:
            return False
        version = trainer.version_at(now)
        limit = (max_lag + version + 1) * train_batch_size
        if needed is not None and version < len(needed):
            limit = max(limit, needed[version])
        return started + 1 > limit

    busy: set[int] = set()  # servers with requests live or queued
    while True:
        while started < rows and active < cap and not lag_blocked():
            busy.update(submit(started))
            started += 1
            active += 1
        if not busy:
            if started == rows:
                break
            before = trainer.version_at(now)
            trainer.advance(math.inf)  # nothing in flight: every arrival is known
            if trainer.version_at(now) > before:  # a step it decided was published by now: look again
                continue
            publish = trainer.next_publish_after(now)
            if publish == math.inf:
                raise AssertionError("replay deadlock: the lag rule holds every prompt and nothing will train")
            now = publish
            continue
        # The server furthest behind (ties: the lowest index) runs; the next furthest bounds how far.
        k, first, second = -1, math.inf, math.inf
        for i in busy:
            clock = engines[i].t
            if clock < first or (clock == first and i < k):
                k, first, second = i, clock, first
            elif clock < second:
                second = clock
        engine = engines[k]
        if colocated:  # a server asleep while the trainer trains wakes at the step's end
            step = bisect_right(trainer.step_start, engine.t) - 1
            if step >= 0 and engine.t < trainer.step_end[step]:
                engine.stats.held_s += trainer.step_end[step] - engine.t
                engine.t = trainer.step_end[step]
                # Asleep, the server dropped its KV cache (verl 0.9.1's on_sample_end: abort, then sleep_replicas);
                # the aborted requests resume with their partial outputs (partial rollout), so every live
                # sequence's context, prompt and tokens so far, is prefilled again, as `Engine._admit` prices it.
                context = engine.sum_c + engine.live * engine.step
                if context > 0:
                    engine.stats.recomputed_tokens += int(context)
                    engine.stats.busy_s += engine.c_tok * float(context)
                    engine.t += engine.c_tok * float(context)
                continue
        until = second + quantum_s
        if started < rows and lag_blocked():
            publish = trainer.next_publish_after(now)
            if engine.t < publish < until:
                until = publish
        engine.run(drain=True, one_finish=True, until=until)
        for gid in engine.finished:
            r = gid // n
            in_flight[k] -= 1
            if predicted is not None:
                tokens_in_flight[k] -= predicted[r]
            remaining[r] -= 1
            if remaining[r] == 0:
                trainer.arrive(float(finish[r * n:(r + 1) * n].max()), r)
                active -= 1
        engine.finished.clear()
        if engine.idle:
            busy.discard(k)
        now = engine.t
        # Every later finish or submission is at or after the clock the furthest-behind server ran from.
        trainer.advance(first)
    trainer.advance(math.inf)
    assert trainer.consumed == rows, "every group is trained exactly once"
    step_end = np.asarray(trainer.step_end)
    return AsyncResult(
        end_to_end_s=float(step_end.max()),  # as `asp_cli.sim.metrics`: the last step's end
        rollout_end_s=float(finish.max()),
        group_submit_s=submitted,
        group_arrival_s=finish.reshape(rows, n).max(axis=1),
        group_step=trainer.group_step.copy(),
        step_start_s=np.asarray(trainer.step_start),
        step_end_s=step_end,
        publish_s=np.asarray(trainer.published),
        requests_per_server=np.asarray(requests, dtype=np.int64),
        sample_server=server_of,
        server_busy_s=np.array([s.busy_s for s in stats]),
        sync_s=float(sum(s.sync_s for s in stats)),
        recomputed_tokens=int(sum(s.recomputed_tokens for s in stats)),
    )


def replay_async_frame(frame, lengths: np.ndarray, preset: HardwarePreset, *, instances: int, train_batch_size: int,
                       max_lag: int | None, dispatch: str = "free", routing: str | None = None,
                       predicted_tokens: np.ndarray | None = None, prompts_in_flight: int | None = None,
                       seed: int = 0, v1_mode: str | None = None, follow_steps: bool = False) -> AsyncResult:
    """A schedule frame (sorted by ``seq``; ``lengths`` its rows' true lengths, ``(rows, n)``, and
    ``predicted_tokens`` their predicted tokens per sample, for length-aware routing) replayed as verl's
    asynchronous trainer rolls it out: rows in ``seq`` order, every sample routed at submission by verl's balancer
    (``dispatch`` free) or kept to its planned instance by asp's router plug-in (``dispatch`` planned), unless
    ``routing`` names another (`asp_cli.sim.submit_all.ROUTINGS`). ``v1_mode`` (``colocate_async`` or
    ``separate_async``): as verl's v1 trainer runs it instead (`replay_async`); ``follow_steps``: its trainer takes
    each step's groups by the frame's ``train_step`` (asp's replay buffer), not the finished ones in arrival order."""
    from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS

    order = np.argsort(frame["seq"].to_numpy(), kind="stable")
    prompts = (frame["prompt_tokens"].fill_null(DEFAULT_PROMPT_TOKENS).to_numpy() if "prompt_tokens" in frame.columns
               else np.full(frame.height, DEFAULT_PROMPT_TOKENS))
    return replay_async(preset, instances=instances, train_batch_size=train_batch_size, max_lag=max_lag,
                        response_tokens=np.asarray(lengths)[order], prompt_tokens=prompts[order].astype(np.int64),
                        routing=routing or ("planned" if dispatch == "planned" else "least-pending"),
                        row_instance=frame["instance"].to_numpy()[order],
                        row_predicted_tokens=None if predicted_tokens is None
                        else np.asarray(predicted_tokens)[order],
                        prompts_in_flight=frame.height if v1_mode else prompts_in_flight, seed=seed,
                        colocated=v1_mode == "colocate_async",
                        row_key=frame["row"].to_numpy()[order] if "row" in frame.columns else None,
                        row_train_step=frame["train_step"].to_numpy()[order] if follow_steps else None)
