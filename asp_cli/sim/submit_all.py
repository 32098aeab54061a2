"""Synchronous rollout as verl 0.7-0.9 runs it: every sample its own request, a whole train batch submitted at once,
each request routed when it is submitted, then each server refilling freed slots from its own queue.

`asp_cli.sim.run` routes a *group* to whichever instance frees a slot first (a shared queue). verl 0.9.1 does
neither (read from its source, ``verl/experimental/agent_loop/agent_loop.py``, ``verl/trainer/ppo/v1/
agent_loop_tq.py`` and ``verl/workers/rollout/router.py``): the batch is split into ``agent.num_workers`` contiguous
chunks (8 by default; the default v1 trainer cuts the prompts and starts each prompt's ``n`` sessions together, the
legacy one cuts the batch repeated ``n`` times, copies adjacent), each worker starts all its samples at once, and
every one asks the global load balancer for a server before it sends its request. All of a step's requests are therefore
routed within the first moments of the step, before any finishes: the balancer's least-in-flight choice (ties
broken at random) deals them out evenly by count, whatever their lengths, and a group's samples land on different
servers. Each server (vLLM) admits its requests first come, first served, in the order they reached it, the
workers' chunks interleaved; with ``rollout.scheduling_policy=priority`` in the order of their ``priority``: the
sample's position in the batch on the legacy trainer (``trainer.use_v1=False``), none at all on the v1 trainer
(`AgentLoopManagerTQ` sets none: fcfs) unless the dataset carries asp's ``priority`` column (+data.asp_route).

This module replays that: per train batch (consecutive rows in ``seq`` order, as verl's dataloader takes them: a
schedule's own ``train_step`` where it is given, each epoch ending in its own short step, as verl trains a schedule
exported one epoch at a time or with a train batch that divides the epoch),
route every sample at submission (``routing``), order each server's queue (``serving``), run each server's
continuous-batching engine (`asp_cli.sim.engine.Engine`) to empty, then train and sync the weights. A step's rollout
is its slowest server's.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from asp_cli.costmodel import HardwarePreset
from asp_cli.errors import SettingsError
from asp_cli.sim.engine import Engine
from asp_cli.sim.records import SimulationSettings, Stats

# How a request finds its server: verl's own balancer (fewest requests in flight, chosen at submission), asp's
# router plug-in (each group to its planned instance), a plug-in that sends each request to the server with the
# fewest predicted tokens routed to it so far, or sglang-router's `cache_aware` policy, which slime launches by
# default (each group's samples share their prompt, so they follow the first to its server: `route`), or AReaL's
# SPMD mode's round-robin (each sample its own request id, to the next server in turn, whatever its load), or
# group-round-robin (OpenRLHF 0.11.2's: a prompt's samples together, a batch's prompts dealt to the engines in turn;
# AReaL's default controller deals whole groups in turn too, over the run: `asp_cli.sim.verl_async`).
ROUTINGS = ("least-pending", "planned", "length-aware", "cache-aware", "round-robin", "group-round-robin")
# sglang-router's cache_aware policy leaves its cache for the least-loaded server only where the loads (requests in
# flight) differ by more than this many AND the largest is above the smallest times `CACHE_AWARE_BALANCE_REL`:
# slime v0.3.1's settings of them (--router-balance-abs-threshold 10 and --router-balance-rel-threshold 1.2,
# `slime/backends/sglang_utils/arguments.py:43`; sglang-router 0.2-0.3's own defaults are 64 and 1.5).
CACHE_AWARE_BALANCE_ABS = 10
CACHE_AWARE_BALANCE_REL = 1.2
# How a server orders its queue: arrival order (vLLM's default, fcfs) or the batch position (priority).
SERVINGS = ("fcfs", "priority")
# How a trainer cuts a batch across rollout workers (`chunk_capacities`): ``v1`` is verl 0.9's default trainer
# (the prompts, cut by TensorDict.chunk); ``legacy`` is verl 0.7's trainer, also 0.8's main_ppo and 0.9's
# trainer.use_v1=False (the batch repeated n times, cut by DataProto.chunk).
CHUNKING = ("v1", "legacy")
# verl's default actor_rollout_ref.rollout.agent.num_workers: AgentLoopConfig.num_workers in
# verl/workers/config/rollout.py:73 (0.9.1) and rollout.yaml's agent.num_workers (0.7.1 and 0.9.1).
VERL_AGENT_WORKERS = 8


@dataclass(frozen=True)
class SubmitAllResult:
    end_to_end_s: float
    rollout_s: np.ndarray  # per step: its slowest server
    train_s: np.ndarray  # per step: training and the weight sync after it
    server_busy_s: np.ndarray  # (steps, servers): when each server emptied its queue
    requests_per_server: np.ndarray  # (steps, servers)


def one_step_off_end_to_end_s(rollout_s: np.ndarray, train_s: np.ndarray, weight_sync_s: float) -> float:
    """The run's end-to-end time when each step's rollout is generated while the step before trains, as slime's
    `train_async.py` runs (slime v0.3.1, lines 32-70, with its default ``--update-weights-interval 1``): rollout 0
    alone; then, step by step, the trainer trains on rollout k while rollout k+1 runs on the servers, waits for
    both, and syncs the weights before rollout k+2 starts. So each step after the first rollout takes the longer
    of its training and the next rollout, plus the sync; each rollout still starts on empty servers (as
    `replay_submit_all` replays it). ``train_s`` per step includes the sync, as `SubmitAllResult.train_s`.
    A larger ``--update-weights-interval`` waits for rollout k+1 at the top of the next step instead of before a
    sync, so rollout k+2 starts at the same moment less the sync: the same time as here, less ``weight_sync_s`` at
    every step that skips it, alike for every arrangement."""
    rollout, train = np.asarray(rollout_s, dtype=np.float64), np.asarray(train_s, dtype=np.float64) - weight_sync_s
    if rollout.size == 0:
        return 0.0
    return float(rollout[0] + np.maximum(train[:-1], rollout[1:]).sum() + train[-1] + weight_sync_s * rollout.size)


def chunk_capacities(prompts: int, samples_per_prompt: int, workers: int, *, rule: str = "v1") -> np.ndarray:
    """Prompts per worker when a batch of ``prompts`` groups is cut into contiguous chunks as verl cuts it.

    ``v1`` (verl 0.9's trainer, ``AgentLoopManagerTQ.generate_sequences`` in
    verl/trainer/ppo/v1/agent_loop_tq.py): the prompts themselves go through ``TensorDict.chunk(workers)``,
    which follows ``torch.chunk``: chunks of ``c = ceil(prompts / workers)``, as many as ``ceil(prompts / c)``
    (maybe fewer than ``workers``), the last one smaller; workers past the last chunk get nothing.

    ``legacy`` (verl 0.7's trainer, and ``trainer.use_v1=False`` since): the batch is repeated
    ``samples_per_prompt`` times (each group's samples adjacent) and cut by ``DataProto.chunk``, which needs
    the sample count to divide by ``workers``; a prompt counts toward the chunk its first sample lands in
    (the rule ``torch.chunk`` gives when the count does not divide).

    Returns
    -------
    np.ndarray
        ``workers`` counts summing to ``prompts``.
    """
    if rule not in CHUNKING:
        raise ValueError(f"unknown chunking rule {rule!r}")
    if workers < 1 or prompts < 0:  # a bare ZeroDivisionError for a Python user's 0 workers
        raise SettingsError(f"chunk_capacities needs workers >= 1 and prompts >= 0 (got workers={workers}, "
                            f"prompts={prompts})")
    if prompts == 0:
        return np.zeros(workers, dtype=np.int64)
    if rule == "v1":
        size = math.ceil(prompts / workers)
        count = math.ceil(prompts / size)
        capacities = np.zeros(workers, dtype=np.int64)
        capacities[:count] = size
        capacities[count - 1] = prompts - size * (count - 1)
        return capacities
    samples = prompts * samples_per_prompt
    per_chunk = math.ceil(samples / workers)
    first_sample = np.arange(prompts, dtype=np.int64) * samples_per_prompt
    chunk = first_sample // per_chunk
    return np.bincount(chunk, minlength=workers)[:workers].astype(np.int64)


def acquisition_order(prompts: int, samples_per_prompt: int, workers: int, rule: str = "v1") -> np.ndarray:
    """The order a batch's requests (batch positions: prompt ``p``'s samples are ``p*n .. p*n+n-1``) reach the
    balancer, cut across ``workers`` as verl cuts it (`chunk_capacities`) and the workers taking turns: under
    ``v1`` each turn is one prompt's ``n`` sessions, under ``legacy`` one sample of the repeated batch. (Which worker
    goes first is a matter of timing in verl; the model fixes it.)"""
    n = samples_per_prompt
    if prompts < 1 or n < 1 or workers < 1:
        raise SettingsError(f"need a prompt, a sample and a worker (got {prompts}, {n} and {workers})")
    if rule == "v1":
        capacities = chunk_capacities(prompts, n, workers, rule="v1")
        units, size = np.arange(prompts, dtype=np.int64), n
    else:
        total = prompts * n
        capacities = np.array([c.size for c in np.array_split(np.arange(total), min(workers, total))])
        units, size = np.arange(total, dtype=np.int64), 1
    starts = np.concatenate(([0], np.cumsum(capacities)))
    depth = int(capacities.max())
    grid = np.full((depth, capacities.size), -1, dtype=np.int64)
    for w in range(capacities.size):
        grid[:capacities[w], w] = units[starts[w]:starts[w + 1]]
    turns = grid.reshape(-1)
    turns = turns[turns >= 0]
    return (turns[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)


def route(order: np.ndarray, *, routing: str, instances: int, rng: np.random.Generator,
          planned: np.ndarray | None = None, predicted: np.ndarray | None = None,
          samples_per_prompt: int = 1, router: CacheAwareRouter | None = None, prompts: np.ndarray | None = None,
          prompt_tokens: np.ndarray | None = None) -> np.ndarray:
    """The server of each request, indexed by batch position; ``order`` is the acquisition order.

    ``least-pending``: nothing finishes while a step is submitted, so the fewest-in-flight choice with random ties
    gives every server one request of each round of ``instances`` in acquisition order, in a random permutation.
    ``planned``: ``planned[position]``. ``length-aware``: the server with the fewest ``predicted`` tokens routed so
    far (ties: the fewest requests, then the lowest index), as `asp_cli.integrate.verl_router.ScheduleRouter` routes
    ``+data.asp_route=length``. ``cache-aware``: sglang-router's default policy (``router``, a
    `CacheAwareRouter` kept over the run; a new one where None), the ``samples_per_prompt`` samples of a prompt
    (positions ``p*n .. p*n+n-1``) sharing its text, ``prompts`` naming each position's prompt over the run
    (default: its group) and ``prompt_tokens`` its length (default 1). ``round-robin``:
    AReaL v1.0.4's in its SPMD mode (`RemoteInfEngine.choose_server`, remote_inf_engine.py:700-715), the next server
    in turn.
    ``group-round-robin``: OpenRLHF 0.11.2's (`SamplesGenerator._dispatch_prompts_to_vllm`,
    openrlhf/trainer/ppo_utils/samples_generator.py:211-221): one snapshot of each engine's unfinished requests, then
    the batch's prompts, each with its ``samples_per_prompt`` samples, to the least loaded engine by that count plus
    what this batch gave it (ties: the lowest index); every rollout batch starts on idle engines (its generator waits
    for the whole batch), so the j-th prompt of the batch goes to engine j mod ``instances``.
    """
    server = np.empty(order.size, dtype=np.int64)
    if routing == "least-pending":
        rounds = -(-order.size // instances)
        deal = rng.permuted(np.tile(np.arange(instances, dtype=np.int64), (rounds, 1)), axis=1).reshape(-1)
        server[order] = deal[:order.size]
    elif routing == "planned":
        if planned is None:
            raise SettingsError("planned routing needs each request's planned instance")
        server[:] = np.asarray(planned, dtype=np.int64) % instances
    elif routing == "length-aware":
        if predicted is None:
            raise SettingsError("length-aware routing needs each request's predicted tokens")
        heap = [(0.0, 0, k) for k in range(instances)]
        for p in order.tolist():
            load, count, k = heapq.heappop(heap)
            server[p] = k
            heapq.heappush(heap, (load + float(predicted[p]), count + 1, k))
    elif routing == "round-robin":
        server[order] = np.arange(order.size, dtype=np.int64) % instances
    elif routing == "group-round-robin":  # positions p*n .. p*n+n-1 are prompt p's samples
        server[:] = (np.arange(order.size, dtype=np.int64) // max(samples_per_prompt, 1)) % instances
    elif routing == "cache-aware":
        router = router if router is not None else CacheAwareRouter(instances, rng)
        loads = [0] * instances  # nothing finishes while a step is submitted
        for p in order.tolist():
            k = router.pick(loads, int(prompts[p]) if prompts is not None else p // samples_per_prompt,
                            float(prompt_tokens[p]) if prompt_tokens is not None else 1.0)
            server[p] = k
            loads[k] += 1
    else:
        raise SettingsError(f"routing must be one of {', '.join(ROUTINGS)} (got {routing!r})")
    return server


class CacheAwareRouter:
    """sglang-router's ``cache_aware`` policy over a whole run, as slime v0.3.1 launches it (the idea read from
    sglang-router's source, `policies/cache_aware`, written here anew). A request goes to the server whose cache
    tree matches more than its `cache_threshold` (0.3) of its text: for a GRPO group's later samples, and for a
    prompt seen in an earlier step or epoch (the tree is never cleared: a run's prompts fit its size), the server
    that cached the prompt first. A prompt it has not seen goes to the server whose tree holds the least text (its
    "smallest tenant"; here the fewest prompt tokens cached). Either way, where the servers' loads are out of
    balance (`CACHE_AWARE_BALANCE_ABS` and `CACHE_AWARE_BALANCE_REL`), the least-loaded server instead (ties at
    random). Left out: prompts sharing 30% of their text (a long common system prompt), which the tree would match
    to one server until the loads part, and the tree's eviction."""

    def __init__(self, instances: int, rng: np.random.Generator) -> None:
        self.home: dict[int, int] = {}  # a prompt's server: the one that cached it first
        self.cached = np.zeros(instances, dtype=np.float64)  # prompt tokens in each server's tree
        self.rng = rng

    def _least(self, values) -> int:
        low = min(values)
        ties = [k for k in range(len(values)) if values[k] == low]
        return ties[0] if len(ties) == 1 else ties[int(self.rng.integers(len(ties)))]

    def pick(self, loads, prompt: int, prompt_tokens: float) -> int:
        """The server for a request of ``prompt`` (a key that names it over the run), ``loads`` the servers'
        requests in flight."""
        low, high = min(loads), max(loads)
        if high - low > CACHE_AWARE_BALANCE_ABS and high > low * CACHE_AWARE_BALANCE_REL:
            k = self._least(loads)
        else:
            k = self.home[prompt] if prompt in self.home else self._least(self.cached.tolist())
        if prompt not in self.home:
            self.home[prompt] = k
            self.cached[k] += prompt_tokens
        return k


def replay_submit_all(
    preset: HardwarePreset,
    *,
    instances: int,
    train_batch_size: int,
    response_tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    routing: str = "least-pending",
    serving: str = "fcfs",
    row_instance: np.ndarray | None = None,
    row_predicted_tokens: np.ndarray | None = None,
    row_step: np.ndarray | None = None,
    row_prompt: np.ndarray | None = None,
    workers: int | None = None,
    chunking: str = "v1",
    seed: int = 0,
    one_step_off: bool = False,
) -> SubmitAllResult:
    """Replay rows (in ``seq`` order; ``response_tokens`` is ``(rows, samples per prompt)``) as verl's synchronous
    trainer generates them, one train batch of ``train_batch_size`` consecutive rows per step, or each run of equal
    ``row_step`` (non-decreasing: a schedule's ``train_step`` in ``seq`` order) where given.

    ``row_instance`` (planned routing), ``row_predicted_tokens`` (length-aware routing, per sample) and
    ``row_prompt`` (cache-aware routing: which prompt a row is, over the run's epochs; default the row) are per row;
    ``chunking`` is verl's trainer (`CHUNKING`: ``v1``, 0.9's default, or ``legacy``). ``one_step_off``: each
    step's rollout overlaps the training of the step before (slime's `train_async.py`:
    `one_step_off_end_to_end_s`), not run after it. Deterministic for a given ``seed`` (the balancer's random ties).
    """
    if chunking not in CHUNKING:
        raise SettingsError(f"chunking must be one of {', '.join(CHUNKING)} (got {chunking!r})")
    if serving not in SERVINGS:
        raise SettingsError(f"serving must be one of {', '.join(SERVINGS)} (got {serving!r})")
    if instances < 1 or train_batch_size < 1:
        raise SettingsError(f"need at least one instance and a train batch (got {instances} and {train_batch_size})")
    lengths = np.maximum(np.asarray(response_tokens, dtype=np.int64), 1)
    if lengths.ndim != 2 or lengths.shape[0] == 0:
        raise SettingsError("response_tokens must be (rows, samples per prompt) with at least one row")
    rows, n = lengths.shape
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    rng = np.random.default_rng([seed, 0x5B])
    settings = SimulationSettings(samples_per_prompt=n, train_batch_size=train_batch_size, mode="streaming")
    if row_step is None:
        bounds = [*range(0, rows, train_batch_size), rows]
    else:
        steps = np.asarray(row_step)
        if steps.shape != (rows,) or (np.diff(steps) < 0).any():
            raise SettingsError("row_step must give every row a step, non-decreasing in seq order")
        bounds = [0, *(np.flatnonzero(np.diff(steps)) + 1).tolist(), rows]
    # slime submits a rollout's groups in order from one loop (`generate_rollout_async` of slime v0.3.1), verl from
    # its agent-loop workers.
    # OpenRLHF dispatches a batch from one loop too (`_dispatch_prompts_to_vllm`).
    workers = workers if workers is not None else 1 if routing in ("cache-aware", "group-round-robin") \
        else VERL_AGENT_WORKERS
    rollout, train, busy, counts = [], [], [], []
    router = CacheAwareRouter(instances, rng) if routing == "cache-aware" else None  # its cache lasts the run
    keys = np.arange(rows) if row_prompt is None else np.asarray(row_prompt)
    for r0, r1 in zip(bounds[:-1], bounds[1:]):
        step_lengths = lengths[r0:r1].reshape(-1)  # batch position p is row r0 + p // n (adjacent copies)
        step_prompts = np.repeat(prompts[r0:r1], n)
        order = acquisition_order(r1 - r0, n, workers, chunking)
        planned = None if row_instance is None else np.repeat(np.asarray(row_instance)[r0:r1], n)
        predicted = None if row_predicted_tokens is None else np.repeat(np.asarray(row_predicted_tokens)[r0:r1], n)
        server = route(order, routing=routing, instances=instances, rng=rng, planned=planned, predicted=predicted,
                       samples_per_prompt=n, router=router, prompts=np.repeat(keys[r0:r1], n),
                       prompt_tokens=step_prompts)
        queue_order = order if serving == "fcfs" else np.arange(step_lengths.size, dtype=np.int64)
        finish = np.zeros(step_lengths.size, dtype=np.float64)
        admit = np.zeros(step_lengths.size, dtype=np.float64)
        ends = np.zeros(instances, dtype=np.float64)
        for k in range(instances):
            mine = queue_order[server[queue_order] == k]
            if mine.size == 0:
                continue
            engine = Engine(preset, settings, Stats(), finish, admit)
            engine.feed(mine.tolist(), step_lengths[mine].tolist(), step_prompts[mine].tolist())
            engine.run(drain=True)
            ends[k] = engine.t
        tokens = float(prompts[r0:r1].sum()) * n + float(step_lengths.sum())
        rollout.append(float(ends.max()))
        train.append(float(preset.train_step_seconds(tokens)) + preset.weight_sync_s)
        busy.append(ends)
        counts.append(np.bincount(server, minlength=instances))
    rollout_s, train_s = np.asarray(rollout), np.asarray(train)
    end_to_end_s = (one_step_off_end_to_end_s(rollout_s, train_s, preset.weight_sync_s) if one_step_off
                    else float(rollout_s.sum() + train_s.sum()))
    return SubmitAllResult(end_to_end_s=end_to_end_s, rollout_s=rollout_s, train_s=train_s,
                           server_busy_s=np.vstack(busy), requests_per_server=np.vstack(counts))


def replay_frame(frame, lengths: np.ndarray, preset: HardwarePreset, *, instances: int, train_batch_size: int,
                 dispatch: str = "free", routing: str | None = None, serving: str = "fcfs", chunking: str = "v1",
                 predicted_tokens: np.ndarray | None = None, seed: int = 0,
                 one_step_off: bool = False) -> SubmitAllResult:
    """A schedule frame (sorted by ``seq``; ``lengths`` its rows' true lengths, ``(rows, n)``, and
    ``predicted_tokens`` their predicted tokens per sample, for length-aware routing) replayed as verl 0.9's
    synchronous trainer rolls it out: its rows read in the order verl reads an export (by ``train_step``), every
    sample routed at submission by verl's balancer (``dispatch`` free) or kept to its planned instance by asp's
    router plug-in (``dispatch`` planned), unless ``routing`` names another (`ROUTINGS`; ``cache-aware``: as slime
    submits a rollout, its groups in order, through sglang-router); ``one_step_off``: each step's rollout while the
    step before trains (slime's `train_async.py`)."""
    from asp_cli.sim.lengths import DEFAULT_PROMPT_TOKENS

    order = np.lexsort((frame["seq"].to_numpy(), frame["train_step"].to_numpy()))
    prompts = (frame["prompt_tokens"].fill_null(DEFAULT_PROMPT_TOKENS).to_numpy() if "prompt_tokens" in frame.columns
               else np.full(frame.height, DEFAULT_PROMPT_TOKENS))
    routing = routing or ("planned" if dispatch == "planned" else "least-pending")
    return replay_submit_all(preset, instances=instances, train_batch_size=train_batch_size,
                             response_tokens=np.asarray(lengths)[order], prompt_tokens=prompts[order].astype(np.int64),
                             routing=routing, serving=serving, chunking=chunking,
                             row_instance=frame["instance"].to_numpy()[order],
                             row_prompt=frame["row"].to_numpy()[order] if "row" in frame.columns else None,
                             row_predicted_tokens=None if predicted_tokens is None
                             else np.asarray(predicted_tokens)[order],
                             row_step=frame["train_step"].to_numpy()[order], seed=seed, one_step_off=one_step_off)
