"""Sending a replay plan to live servers: one instance per server, blocking or streaming, in schedule order.

* **blocking** (the engines asp schedules for): each instance takes its minibatches in ``seq`` order, sends
  all requests of one together and the next minibatch when every one of them has finished.
* **streaming** (engines that refill freed slots): each instance keeps up to ``max_in_flight`` requests in
  flight, sending the next request in ``seq`` order as soon as one finishes; a minibatch of several groups (the
  streaming arrangement ``bands``, verl's chunks) goes to one server whole, the instance taking the next one
  once every request of it is sent, as the simulator's streaming engine does (docs/simulation.md).

With ``dispatch="free"`` (the count-balance baseline) the next minibatch in ``seq`` order goes to whichever
instance asks first. Each request forces its recorded length: ``max_tokens = min_tokens = L`` and
``ignore_eos`` (vLLM's and SGLang's OpenAI servers take both), one request per sample: the OpenAI ``n``
parameter shares one ``max_tokens`` across the samples, and vLLM fans ``n`` out into separate requests
anyway, so sending N requests costs the engine the same and lets every sample keep its own length.

SIGINT and SIGTERM stop the run cleanly: requests in flight are cancelled and what finished is kept
(`LiveOutcome.interrupted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import re
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from asp_cli.errors import INTERRUPT_SIGNALS, ServerError, SettingsError, named_in_python, shown_id
from asp_cli.integrate.replay_plan import RequestPlan, synthetic_prompt
from asp_cli.integrate.serving import DEFAULT_BACKOFF_S, DEFAULT_IDLE_TIMEOUT_S, DEFAULT_RETRIES, Completion, \
    ServerPool

ENGINES = ("blocking", "streaming")
# The start-up checks (GET /v1/models, the KV-cache size) wait at most this long a try (or --timeout where shorter): a
# server answers them at once, and one hanging on them printed nothing for 4 x 600 s. One still unanswered after
# NOTE_AFTER_S says so in one line.
STARTUP_TIMEOUT_S = 30.0
NOTE_AFTER_S = 5.0
WARMUP_PROMPT_TOKENS = 64
WARMUP_RESPONSE_TOKENS = 16


@named_in_python()
@dataclass(frozen=True)
class LiveSettings:
    """How to talk to the servers (validated here, once)."""

    servers: tuple[str, ...]
    engine: str | None = None  # None: as the schedule was planned (streaming plans stream, others block)
    max_in_flight: int | None = None  # per server; streaming without it: the preset's max_num_seqs
    stream: bool = True  # streaming responses give first-token times (needed by `asp calibrate`)
    model: str | None = None  # None: the first model each server lists under /v1/models
    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_BACKOFF_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    request_timeout_s: float | None = None  # one attempt in all; None: the idle timeout + 0.5 s per token asked
    warmup_requests: int = 8  # per server, before the first measured run
    temperature: float = 1.0
    api_key: str | None = None

    def __post_init__(self) -> None:
        from asp_cli.integrate.serving import parse_server_url

        if not self.servers:
            raise SettingsError("--servers: name at least one server URL (http://host:8000/v1)")
        for url in self.servers:
            parse_server_url(url)
        check_live_options(engine=self.engine, max_in_flight=self.max_in_flight, retries=self.retries,
                           backoff_s=self.backoff_s, idle_timeout_s=self.idle_timeout_s,
                           warmup_requests=self.warmup_requests, request_timeout_s=self.request_timeout_s)


MAX_WARMUP_IN_FLIGHT = 256  # warm-up requests at once per server, to open the connections a run holds
MAX_BACKOFF_S = 600.0  # the first retry's wait (each later one doubles, up to serving.MAX_WAIT_S, the same)
MAX_RETRIES = 100  # at 600 s a wait, 100 retries are most of a day: a server down that long is down


def check_live_options(*, engine: str | None, max_in_flight: int | None, retries: int, backoff_s: float,
                       idle_timeout_s: float, warmup_requests: int, request_timeout_s: float | None = None) -> None:
    """The replay's own options, checked once, with or without servers (a dry run checks them too).

    Raises
    ------
    SettingsError
        Naming the option and the value.
    """
    import math

    from asp_cli.settings import check_count

    if engine is not None and engine not in ENGINES:
        raise SettingsError(f"--engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    # Counts have an upper bound too: --warmup 99999999999 sent warm-up requests for ever.
    check_count("--max-in-flight", max_in_flight, minimum=1, optional=True)
    check_count("--warmup", warmup_requests, minimum=0)
    for flag, value in (("--retries", retries), ("--retry-backoff", backoff_s)):
        if not math.isfinite(value) or value < 0:
            raise SettingsError(f"{flag} must be 0 or more (got {value!r})")
    if backoff_s > MAX_BACKOFF_S:  # 1e308 s waited forever, and hung the replay
        raise SettingsError(f"--retry-backoff must be at most {MAX_BACKOFF_S:g} seconds (got {backoff_s:g})")
    if retries > MAX_RETRIES:
        raise SettingsError(f"--retries must be at most {MAX_RETRIES} (got {retries!r})")
    if not math.isfinite(idle_timeout_s) or idle_timeout_s <= 0:
        raise SettingsError(f"--timeout must be a number of seconds above 0 (got {idle_timeout_s!r})")
    if request_timeout_s is not None and (not math.isfinite(request_timeout_s) or request_timeout_s <= 0):
        raise SettingsError(f"--request-timeout must be a number of seconds above 0 (got {request_timeout_s!r})")


class Progress(Protocol):
    """Where the driver reports progress (the CLI draws a tqdm bar)."""

    def start(self, name: str, total: int) -> None: ...

    def advance(self, count: int) -> None: ...

    # Optional: ``note(text)`` says one line (a start-up check still waiting); a progress without it says nothing.


class RunRecord:
    """What was measured for one plan: per request (``row * N + sample``), filled as requests finish."""

    def __init__(self, requests: int) -> None:
        self.done = np.zeros(requests, dtype=bool)
        self.send_s = np.full(requests, math.nan)
        self.first_token_s = np.full(requests, math.nan)
        self.finish_s = np.full(requests, math.nan)
        self.prompt_tokens = np.full(requests, -1, dtype=np.int64)
        self.completion_tokens = np.full(requests, -1, dtype=np.int64)
        self.attempts = np.zeros(requests, dtype=np.int32)
        self.instance = np.full(requests, -1, dtype=np.int32)

    def store(self, request: int, instance: int, result: Completion) -> None:
        self.send_s[request] = result.send_s
        self.first_token_s[request] = math.nan if result.first_token_s is None else result.first_token_s
        self.finish_s[request] = result.finish_s
        self.prompt_tokens[request] = -1 if result.prompt_tokens is None else result.prompt_tokens
        self.completion_tokens[request] = -1 if result.completion_tokens is None else result.completion_tokens
        self.attempts[request] = result.attempts
        self.instance[request] = instance
        self.done[request] = True


@dataclass
class LiveOutcome:
    """Records per plan, whether the run was stopped, the error that stopped it, and what the servers said."""

    records: list[RunRecord]
    interrupted: bool = False
    error: ServerError | None = None
    servers: list[dict] = field(default_factory=list)


def run_live(plans: list[RequestPlan], settings: LiveSettings, *, progress: Progress | None = None,
             default_in_flight: int = 1024, clock: Callable[[], float] = time.perf_counter,
             limit_option: str = "--max-in-flight") -> LiveOutcome:
    """Warm the servers up, then send every plan in turn (the next when the previous has finished).

    ``default_in_flight`` is the streaming limit when ``settings.max_in_flight`` is None. ``limit_option`` is the
    caller's option that bounds the connections, named when the open-file limit is too low for them.

    Raises
    ------
    SettingsError
        When the process may not open enough connections.
    """
    settings = dataclasses.replace(settings, engine=settings.engine or "blocking")
    _raise_file_limit(_peak_connections(plans, settings, default_in_flight), limit_option)
    return asyncio.run(_run_all(plans, settings, progress, default_in_flight, clock))


async def _run_all(plans: list[RequestPlan], settings: LiveSettings, progress: Progress | None,
                   default_in_flight: int, clock: Callable[[], float]) -> LiveOutcome:
    outcome = LiveOutcome([RunRecord(p.requests) for p in plans])
    pools = [ServerPool(url, max_in_flight=settings.max_in_flight if settings.engine == "blocking" else None,
                        retries=settings.retries, backoff_s=settings.backoff_s,
                        idle_timeout_s=settings.idle_timeout_s, request_timeout_s=settings.request_timeout_s,
                        clock=clock, api_key=settings.api_key)
             for url in settings.servers]
    stop = asyncio.Event()
    restore = _catch_signals(stop)
    try:
        main = asyncio.ensure_future(_measure(plans, outcome, pools, settings, progress, default_in_flight))
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({main, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if main.done():
            waiter.cancel()
            if isinstance(main.exception(), ServerError):
                outcome.error = main.exception()  # type: ignore[assignment]
            else:
                main.result()
        else:
            outcome.interrupted = True
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError, ServerError):
                await main
    finally:
        # The connections close, and their transports' last callbacks run, while a signal still only sets
        # ``stop``: restored first, a SIGTERM during the close raised the command line's interrupt inside an
        # asyncio callback (a logged traceback, and a second "Interrupted" line after the first).
        try:
            await asyncio.gather(*(p.close() for p in pools), return_exceptions=True)
            await asyncio.sleep(0)
        finally:
            restore()
    return outcome


async def _measure(plans: list[RequestPlan], outcome: LiveOutcome, pools: list[ServerPool],
                   settings: LiveSettings, progress: Progress | None, default_in_flight: int) -> None:
    note = getattr(progress, "note", None)
    limit = min(settings.idle_timeout_s, STARTUP_TIMEOUT_S)
    outcome.servers = list(await asyncio.gather(*(_server_info(p, settings.model, limit, note) for p in pools)))
    models = [s["model"] for s in outcome.servers]
    if settings.warmup_requests:
        # At least as many at once as a measured run holds in flight on one server: the first run measured (asp's)
        # opened the connections every later one reused, and on a small server replayed slowest every time (a
        # newcomer's round: its first 32 sends spread over 1 s, the others' over 0.01 s).
        peak = (max((max((end - first for first, end, _ in plan.minibatches()), default=0) * plan.samples_per_prompt
                     for plan in plans), default=0) if settings.engine == "blocking"
                else settings.max_in_flight or default_in_flight)
        count = max(settings.warmup_requests, min(peak, settings.max_in_flight or peak, MAX_WARMUP_IN_FLIGHT))
        await asyncio.gather(*(_warmup(p, m, settings, count) for p, m in zip(pools, models)))
    for plan, record in zip(plans, outcome.records):
        if progress is not None:
            progress.start(plan.name, plan.requests)
        await _run_plan(plan, record, pools, models, settings, progress, default_in_flight)
        failure = lengths_not_forced(plan, record, [p.url for p in pools])
        if failure is not None:  # before the next arrangement: its timings would not compare either
            raise LengthsNotForced(failure)


async def _run_plan(plan: RequestPlan, record: RunRecord, pools: list[ServerPool], models: list[str],
                    settings: LiveSettings, progress: Progress | None, default_in_flight: int) -> None:
    n = plan.samples_per_prompt
    minibatches = plan.minibatches()
    k_all = len(pools)
    if plan.dispatch == "free":
        shared: deque[int] = deque(range(len(minibatches)))
        queues = [shared] * k_all
    else:
        if minibatches and max(mb[2] for mb in minibatches) >= k_all:
            raise SettingsError(f"{plan.name}: the schedule uses more instances than the {k_all} servers given")
        queues = [deque(j for j, mb in enumerate(minibatches) if mb[2] == k) for k in range(k_all)]
    origin = pools[0].clock()
    for pool in pools:
        pool.origin_s = origin

    async def send(request: int, k: int) -> None:
        row, sample = divmod(request, n)
        length = int(plan.lengths[row, sample])
        body = {"model": models[k], "prompt": plan.prompt(row), "max_tokens": length, "min_tokens": length,
                "ignore_eos": True, "temperature": settings.temperature, "n": 1, "stream": settings.stream}
        if settings.stream:
            body["stream_options"] = {"include_usage": True}
        seq = int(plan.seq[row])
        label = f"{plan.name} request seq {seq} sample {sample} (prompt id {shown_id(plan.prompt_id[row])})"
        result = await pools[k].complete(body, label=label, request_id=f"asp-{plan.run}-{seq}-{sample}")
        record.store(request, k, result)
        if progress is not None:
            progress.advance(1)

    def requests_of(j: int) -> range:
        first, end, _ = minibatches[j]
        return range(first * n, end * n)

    async def blocking(k: int) -> None:
        while queues[k]:
            tasks = [asyncio.ensure_future(send(i, k)) for i in requests_of(queues[k].popleft())]
            try:
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()

    async def streaming(k: int) -> None:
        slots = asyncio.Semaphore(settings.max_in_flight or default_in_flight)
        pending: set[asyncio.Future] = set()
        failed: list[BaseException] = []

        def finished(task: asyncio.Future) -> None:
            pending.discard(task)
            slots.release()
            if not task.cancelled() and task.exception() is not None:
                failed.append(task.exception())  # type: ignore[arg-type]

        try:
            while queues[k]:
                for i in requests_of(queues[k].popleft()):
                    await slots.acquire()
                    if failed:
                        raise failed[0]
                    task = asyncio.ensure_future(send(i, k))
                    pending.add(task)
                    task.add_done_callback(finished)
            while pending:
                await asyncio.wait(set(pending))
            if failed:
                raise failed[0]
        finally:
            for task in list(pending):
                task.cancel()

    worker = blocking if settings.engine == "blocking" else streaming
    workers = [asyncio.ensure_future(worker(k)) for k in range(k_all)]
    try:
        done, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


# --------------------------------------------------------------------------------------------------------
# The lengths generated

# A request is off when its reported length differs from the one asked by more than LENGTH_SLACK_TOKENS; an arrangement
# with more than LENGTH_OFF_SHARE of its counted requests off stops the replay (fewer are a warning, `replay_schedule`).
LENGTH_SLACK_TOKENS = 1
LENGTH_OFF_SHARE = 0.01


class LengthsNotForced(ServerError):
    """A server did not generate the lengths asked (it ignores min_tokens and ignore_eos): no comparison holds."""


def lengths_not_forced(plan: RequestPlan, record: RunRecord, urls: list[str]) -> str | None:
    """The message naming the server (the one with the most) whose answers were off the asked lengths, where more
    than `LENGTH_OFF_SHARE` of the arrangement's requests with a reported count were; None otherwise."""
    asked = plan.lengths.reshape(-1).astype(np.int64)
    got = record.completion_tokens
    counted = record.done & (got >= 0)
    off = counted & (np.abs(got - asked) > LENGTH_SLACK_TOKENS)
    total = int(off.sum())
    if total == 0 or total <= LENGTH_OFF_SHARE * int(counted.sum()):
        return None
    per = np.bincount(record.instance[off], minlength=len(urls))
    k = int(per.argmax())
    first = int(np.flatnonzero(off & (record.instance == k))[0])
    row, sample = divmod(first, plan.samples_per_prompt)
    answered = int((counted & (record.instance == k)).sum())
    others = total - int(per[k])
    elsewhere = f", and {others} on other servers" if others else ""
    return (f"server {urls[k]}: {int(per[k])} of the {answered} requests of {plan.name} it answered came back with "
            f"another length than asked (e.g. {plan.name} request seq {int(plan.seq[row])} sample {sample} (prompt id "
            f"{shown_id(plan.prompt_id[row])}): asked {int(asked[first])} tokens, got {int(got[first])}){elsewhere}, "
            "so its timings are not of the lengths replayed and no comparison holds; serve the model with vLLM (vllm "
            "serve) or SGLang (python -m sglang.launch_server), whose OpenAI servers honour min_tokens and ignore_eos "
            "as asp sends them, directly, not through a proxy or another server that drops them, and run again")


# --------------------------------------------------------------------------------------------------------
# Before the measurement: which model, how much KV cache, a warm-up


async def _noted(work: Awaitable[Any], note: Callable[[str], None] | None, what: str, limits: str) -> Any:
    """Await ``work``; if it is not done within `NOTE_AFTER_S`, say so (one line: ``what`` it waits on, and its
    ``limits``) through ``note``."""
    task = asyncio.ensure_future(work)
    try:
        if note is not None:
            done, _ = await asyncio.wait({task}, timeout=NOTE_AFTER_S)
            if not done:
                note(f"{what}: no answer yet after {NOTE_AFTER_S:g} s ({limits})")
        return await task
    finally:
        task.cancel()


async def _server_info(pool: ServerPool, model: str | None, limit_s: float = STARTUP_TIMEOUT_S,
                       note: Callable[[str], None] | None = None) -> dict:
    tries = pool.retries + 1
    listed = await _noted(pool.get_json("/models", timeout_s=limit_s), note,
                          f"waiting for {pool.url} to answer GET /v1/models",
                          f"each try waits at most {limit_s:g} s, {tries} tr{'y' if tries == 1 else 'ies'}")
    names = [m.get("id") for m in listed.get("data", [])] if isinstance(listed, dict) else []
    names = [n for n in names if isinstance(n, str)]
    if model is None:
        if not names:
            raise ServerError(f"server {pool.url}: /v1/models lists no model; pass --model NAME")
        model = names[0]
    elif names and model not in names:
        raise ServerError(f"server {pool.url} serves {', '.join(names)}, not {model!r}; pass --model "
                          f"{names[0]}")
    return {"url": pool.url, "model": model, "kv_cache_tokens": await kv_cache_tokens(pool, limit_s, note)}


_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{([^}]*)\}", re.M)


async def kv_cache_tokens(pool: ServerPool, limit_s: float = STARTUP_TIMEOUT_S,
                          note: Callable[[str], None] | None = None) -> int | None:
    """The server's KV-cache size in tokens, where it says: vLLM's ``/metrics`` (``cache_config_info``:
    ``num_gpu_blocks`` x ``block_size``) or SGLang's ``/get_server_info`` (``max_total_num_tokens``); one try of
    each, of at most ``limit_s`` (a try still unanswered after `NOTE_AFTER_S` is said through ``note``)."""
    saved = pool.retries
    pool.retries = 0
    limits = f"one try of at most {limit_s:g} s, then the size goes unrecorded"
    try:
        with contextlib.suppress(ServerError):
            raw = await _noted(pool.get_bytes("/metrics", root=True, timeout_s=limit_s), note,
                               f"waiting for {pool.url} to answer GET /metrics (its KV-cache size)", limits)
            match = _CACHE_INFO.search(raw.decode("utf-8", "replace"))
            if match:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
                with contextlib.suppress(KeyError, ValueError):
                    return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
        with contextlib.suppress(ServerError):
            info = await _noted(pool.get_json("/get_server_info", root=True, timeout_s=limit_s), note,
                                f"waiting for {pool.url} to answer GET /get_server_info (its KV-cache size)", limits)
            value = info.get("max_total_num_tokens") if isinstance(info, dict) else None
            if isinstance(value, int) and value > 0:
                return value
    finally:
        pool.retries = saved
    return None


async def _warmup(pool: ServerPool, model: str, settings: LiveSettings, count: int) -> None:
    body = {"model": model, "max_tokens": WARMUP_RESPONSE_TOKENS, "min_tokens": WARMUP_RESPONSE_TOKENS,
            "ignore_eos": True, "temperature": settings.temperature, "n": 1, "stream": False}
    await asyncio.gather(*(
        pool.complete({**body, "prompt": synthetic_prompt(str(i), WARMUP_PROMPT_TOKENS, "warmup")},
                      label=f"warm-up request {i}")
        for i in range(count)))


# --------------------------------------------------------------------------------------------------------
# Process limits and signals


def _peak_connections(plans: list[RequestPlan], settings: LiveSettings, default_in_flight: int) -> int:
    """The most connections the run may hold at once (one per request in flight)."""
    k = len(settings.servers)
    if settings.engine == "streaming":
        return k * (settings.max_in_flight or default_in_flight)
    largest = 0
    for plan in plans:
        sizes = [(b - a) * plan.samples_per_prompt for a, b, _ in plan.minibatches()]
        largest = max(largest, max(sizes, default=0))
    if settings.max_in_flight is not None:
        largest = min(largest, settings.max_in_flight)
    return k * largest


def _raise_file_limit(connections: int, limit_option: str = "--max-in-flight") -> None:
    """Raise the open-file soft limit to what the connections need, or say how."""
    try:
        import resource
    except ImportError:  # not Unix
        return
    needed = connections + 64  # the interpreter's own files
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    if soft < needed:
        raise SettingsError(f"the replay holds up to {connections} connections but this process may open {soft} "
                            f"files; raise the limit (ulimit -n {needed}) or lower {limit_option}")


def _catch_signals(stop: asyncio.Event) -> Callable[[], None]:
    """Make `INTERRUPT_SIGNALS` (one the parent ignores, as `nohup` does SIGHUP, stays ignored) set ``stop``
    during the run; return what restores the previous handlers."""
    loop = asyncio.get_running_loop()
    previous = {}
    for sig in (getattr(signal, name) for name in INTERRUPT_SIGNALS if hasattr(signal, name)):
        try:
            previous[sig] = signal.getsignal(sig)
            if previous[sig] is signal.SIG_IGN:
                del previous[sig]
                continue
            loop.add_signal_handler(sig, stop.set)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or not Unix
            previous.pop(sig, None)

    def restore() -> None:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)

    return restore
