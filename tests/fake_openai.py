"""A local OpenAI-compatible completion server for the replay tests, and the engine model it runs.

`FakeServer` serves ``POST /v1/completions`` (streaming or not, ``max_tokens``, ``min_tokens``,
``ignore_eos``, usage counts), ``GET /v1/models`` and vLLM's ``/metrics`` line that states the KV-cache size,
on 127.0.0.1 and a free port, from a thread. Behind it a `StepEngine` batches continuously, the way the
cost model says an engine does: FIFO admission up to ``max_num_seqs``, every step each live request gains one
token and costs ``t_o + max(t_w, c*b) + kv*sum(context) + c*prefill tokens`` seconds (multiplied by
``time_scale``, 0 for no sleeping at all). Without ``ignore_eos`` (and ``min_tokens`` below ``max_tokens``) a
request stops at its "natural" length, so a test can tell whether lengths were forced.

`virtual_timeline` runs the same engine on a virtual clock, step by step, so the calibration tests get exact,
deterministic timings from known parameters. The server logs every arrival and finish in one ordered list
(a finish is logged before its last bytes are written, so the log's order is causal) and can fail requests
(HTTP 500), drop connections, or hold a request until the test lets it go.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NATURAL_LENGTH = 3  # where a request stops when its length is not forced


@dataclass(frozen=True)
class StepModel:
    """Step time: t_o + max(t_w, c*b) + kv*context + c*prefill (the asp cost model's shape)."""

    overhead_s: float = 2e-4
    weight_read_s: float = 5e-3
    compute_s_per_token: float = 5e-5
    kv_s_per_token: float = 1e-7
    max_num_seqs: int = 1024

    def step_s(self, live: int, context_tokens: float, prefill_tokens: float) -> float:
        return (self.overhead_s + max(self.weight_read_s, self.compute_s_per_token * live)
                + self.kv_s_per_token * context_tokens + self.compute_s_per_token * prefill_tokens)


@dataclass
class _Job:
    prompt_tokens: int
    length: int
    generated: int = 0
    done: bool = False


class StepEngine:
    """Continuous batching in real time (sleeping ``time_scale`` x each step's model time), in a thread."""

    def __init__(self, model: StepModel, time_scale: float) -> None:
        self.model = model
        self.time_scale = time_scale
        self.cond = threading.Condition()
        self.waiting: deque[_Job] = deque()
        self.live: list[_Job] = []
        self.stopped = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def submit(self, prompt_tokens: int, length: int) -> _Job:
        job = _Job(prompt_tokens, length)
        with self.cond:
            self.waiting.append(job)
            self.cond.notify_all()
        return job

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.stopped and not self.waiting and not self.live:
                    self.cond.wait()
                if self.stopped:
                    return
                prefill = 0
                while self.waiting and len(self.live) < self.model.max_num_seqs:
                    job = self.waiting.popleft()
                    prefill += job.prompt_tokens
                    self.live.append(job)
                context = sum(j.prompt_tokens + j.generated for j in self.live)
                dt = self.model.step_s(len(self.live), context, prefill)
            if self.time_scale > 0:
                time.sleep(dt * self.time_scale)
            with self.cond:
                for job in self.live:
                    job.generated += 1
                    job.done = job.generated >= job.length
                self.live = [j for j in self.live if not j.done]
                self.cond.notify_all()


@dataclass
class Faults:
    """What to break or control.

    The first ``fail_first`` completion requests answer 500; completion requests after the first
    ``drop_after`` have their connection closed unanswered; with ``close_idle`` the server closes each
    connection after answering without saying so (a keep-alive timeout); a request whose id ``hold`` accepts
    waits until ``release``; the first ``gate`` requests wait until ``gate`` requests have arrived; with ``no_usage``
    no answer carries token counts.
    """

    fail_first: int = 0
    drop_after: int | None = None
    close_idle: bool = False
    hold: object = None  # callable(request id) -> bool
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    gate: int = 0
    gate_open: threading.Event = field(default_factory=threading.Event)
    no_usage: bool = False  # answers without token counts (a server that leaves `usage` out)
    fail_status: int = 500  # the status of the first ``fail_first`` answers
    retry_after: str | None = None  # sent with them as Retry-After
    # not None: the completion_tokens every answer reports (a broken server); a callable: of the length asked
    reported_tokens: object = None
    body: bytes | None = None  # not None: every plain completion answers 200 with this body
    # Not None: every completion answers 200 and then sends a byte every ``trickle_s`` seconds for ever (a plain
    # answer of Content-Length 100000; a stream of SSE keep-alive comments, as a proxy in front of a stuck engine)
    trickle_s: float | None = None
    ignore_stream: bool = False  # answer a request for a stream with a plain JSON completion
    hang_paths: tuple[str, ...] = ()  # GET paths (/v1/models, /metrics) answered never (until the server closes)


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's 5 dropped connections of a replay's burst while the accept thread waited on
    # the GIL behind trickling answers, and the client's retried SYN came a second later ("cannot connect: no
    # connection within 1 s", 1 run in 10 of test_cli_replay's request-deadline test on a loaded machine).
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:  # a client that hung up is not an error here
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class FakeServer:
    """One fake inference server (one instance) on 127.0.0.1:<free port>."""

    def __init__(self, model: StepModel | None = None, *, time_scale: float = 0.0, name: str = "fake-model",
                 kv_cache_tokens: int | None = 123_456, faults: Faults | None = None) -> None:
        self.model = model or StepModel()
        self.name = name
        self.kv_cache_tokens = kv_cache_tokens
        self.faults = faults or Faults()
        self.engine = StepEngine(self.model, time_scale)
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []  # ("arrive" | "finish", request id), in order
        self.bodies: dict[str, dict] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.completions = 0
        self.httpd = _Quiet(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.faults.release.set()
        self.engine.stop()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: FakeServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, document: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path in server.faults.hang_paths:
                server.faults.release.wait()
                self.close_connection = True
                return
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
            elif self.path == "/metrics" and server.kv_cache_tokens:
                text = (f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",num_gpu_blocks='
                        f'"{server.kv_cache_tokens // 16}"}} 1.0\n').encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
            else:
                self._json(404, {"object": "error", "message": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            rid = self.headers.get("X-Request-Id", "")
            if self.path != "/v1/completions":
                return self._json(404, {"object": "error", "message": "no route"})
            with server.lock:
                server.completions += 1
                number = server.completions
            faults = server.faults
            if faults.drop_after is not None and number > faults.drop_after:
                self.close_connection = True
                return None
            if faults.close_idle:
                self.close_connection = True
            if number <= faults.fail_first:
                return self._json(faults.fail_status, {"object": "error", "message": "engine hiccup"},
                                  {"Retry-After": faults.retry_after} if faults.retry_after else None)
            if body.get("model") != server.name:
                return self._json(404, {"object": "error", "message": f"model {body.get('model')!r} does not exist"})
            prompt = body.get("prompt")
            prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
            max_tokens = int(body.get("max_tokens", 16))
            forced = body.get("ignore_eos") or int(body.get("min_tokens", 0)) >= max_tokens
            length = max_tokens if forced else min(max(int(body.get("min_tokens", 0)), NATURAL_LENGTH), max_tokens)
            with server.lock:
                server.log.append(("arrive", rid))
                server.bodies[rid] = body
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            if faults.trickle_s is not None:
                return self._trickle(bool(body.get("stream")), faults.trickle_s)
            if number >= faults.gate:
                faults.gate_open.set()
            faults.gate_open.wait(30)
            if callable(faults.hold) and faults.hold(rid):
                faults.held.set()
                faults.release.wait()
            job = server.engine.submit(prompt_tokens, length)
            usage = None if faults.no_usage else {"prompt_tokens": prompt_tokens, "completion_tokens": length,
                                                  "total_tokens": prompt_tokens + length}
            if usage is not None and faults.reported_tokens is not None:
                usage["completion_tokens"] = (faults.reported_tokens(length) if callable(faults.reported_tokens)
                                              else faults.reported_tokens)
            if not body.get("stream") or faults.ignore_stream:
                with server.engine.cond:
                    server.engine.cond.wait_for(lambda: job.done)
                self._finished(rid)
                if faults.body is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(faults.body)))
                    self.end_headers()
                    self.wfile.write(faults.body)
                    return None
                return self._json(200, {"id": rid, "object": "text_completion", "model": server.name,
                                        "choices": [{"index": 0, "text": " x" * length, "finish_reason": "length"}],
                                        "usage": usage})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            while sent < length:
                with server.engine.cond:
                    server.engine.cond.wait_for(lambda: job.generated > sent)
                    now = job.generated
                for token in range(sent, now):
                    last = token == length - 1
                    if last:
                        self._finished(rid)
                    self._chunk({"id": rid, "object": "text_completion", "model": server.name, "usage": None,
                                 "choices": [{"index": 0, "text": " x", "logprobs": None,
                                              "finish_reason": "length" if last else None}]})
                sent = now
            if (body.get("stream_options") or {}).get("include_usage") and usage is not None:
                self._chunk({"id": rid, "object": "text_completion", "model": server.name, "choices": [],
                             "usage": usage})
            self._raw(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return None

        def _trickle(self, stream: bool, every_s: float) -> None:
            self.send_response(200)
            if stream:
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", "100000")
            self.end_headers()
            while not server.engine.stopped:
                if stream:
                    self._raw(b": keep-alive\n\n")
                else:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                time.sleep(every_s)
            self.close_connection = True

        def _finished(self, rid: str) -> None:
            with server.lock:
                server.log.append(("finish", rid))
                server.in_flight -= 1

        def _chunk(self, document: dict) -> None:
            self._raw(b"data: " + json.dumps(document).encode() + b"\n\n")

        def _raw(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


# --------------------------------------------------------------------------------------------------------
# The same engine on a virtual clock


def virtual_timeline(model: StepModel, arrivals: list[tuple[float, int, int]], *, blocking_groups: list[int]
                     | None = None, in_flight: int | None = None, step_jitter: float = 0.0,
                     seed: int = 0) -> list[tuple[float, float, float]]:
    """Run one server's requests on a virtual clock; return (send, first token, finish) per request.

    ``arrivals`` are (unused, prompt tokens, length) in sending order. With ``blocking_groups`` (sizes of
    consecutive minibatches) a minibatch is sent when the previous one has finished; with ``in_flight`` the
    next request is sent as soon as fewer than that many are in flight (streaming). ``step_jitter`` makes
    each step's time vary by that relative standard deviation (seeded), as a real GPU's do.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    n = len(arrivals)
    send = [0.0] * n
    first = [0.0] * n
    finish = [0.0] * n
    generated = [0] * n
    if blocking_groups is not None:
        bounds = []
        start = 0
        for size in blocking_groups:
            bounds.append((start, start + size))
            start += size
    t = 0.0
    next_send = 0
    waiting: deque[int] = deque()
    live: list[int] = []
    group = 0
    while next_send < n or waiting or live:
        # The client sends what it may send at time t.
        if blocking_groups is not None:
            if not waiting and not live and group < len(bounds):
                for i in range(*bounds[group]):
                    send[i] = t
                    waiting.append(i)
                next_send = bounds[group][1]
                group += 1
        else:
            limit = in_flight or n
            while next_send < n and len(waiting) + len(live) < limit:
                send[next_send] = t
                waiting.append(next_send)
                next_send += 1
        prefill = 0
        admitted = []
        while waiting and len(live) < model.max_num_seqs:
            i = waiting.popleft()
            prefill += arrivals[i][1]
            live.append(i)
            admitted.append(i)
        context = sum(arrivals[i][1] + generated[i] for i in live)
        dt = model.step_s(len(live), context, prefill)
        t += dt * (1.0 + step_jitter * float(rng.standard_normal())) if step_jitter else dt
        for i in live:
            generated[i] += 1
            if generated[i] == 1:
                first[i] = t
            if generated[i] >= arrivals[i][2]:
                finish[i] = t
        live = [i for i in live if generated[i] < arrivals[i][2]]
    return list(zip(send, first, finish))
