"""What `asp replay`'s HTTP client adds to each request at thousands of concurrent streams (docs/replay.md).

    python scripts/bench_replay_client.py [--concurrent 100 1000 2000] [--tokens 50] [--step-ms 100]

A paced streaming server runs in its own process (asyncio, standard library): like an engine, it emits one
token to every live request each ``--step-ms`` and records, on the shared monotonic clock, when it read each
request and when it wrote its last byte. The client (`asp_cli.integrate.serving.ServerPool`, one pool) sends
``--concurrent`` streaming requests at once. The overhead is the client's send time to the server's read (the
request's way in) plus the server's last write to the client's finish time (the answer's way out), per
request; the client's CPU time per token shows how much headroom is left. The ``raw`` rows are the floor: a
bare asyncio protocol on the same sockets that only looks for the end of each answer and parses nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asp_cli.integrate.serving import ServerPool  # noqa: E402


def _server(port_out, log_path: str, step_s: float) -> None:
    times: dict[str, list[float]] = {}
    live: list[tuple[asyncio.StreamWriter, list[int], asyncio.Future]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            start = time.monotonic()
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            body = json.loads(await reader.readexactly(length))
            rid = next(line.split(b":")[1].strip().decode() for line in head.split(b"\r\n")
                       if line.lower().startswith(b"x-request-id"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            done = asyncio.get_running_loop().create_future()
            live.append((writer, [body["max_tokens"]], done))
            await done
            usage = json.dumps({"choices": [], "usage": {"prompt_tokens": 1,
                                                         "completion_tokens": body["max_tokens"]}}).encode()
            for event in (b"data: " + usage + b"\n\n", b"data: [DONE]\n\n"):
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            times[rid] = [start, time.monotonic()]

    async def engine() -> None:
        token = b'data: {"choices":[{"index":0,"text":" x","finish_reason":null}],"usage":null}\n\n'
        chunk = b"%x\r\n%s\r\n" % (len(token), token)
        while True:
            await asyncio.sleep(step_s)
            for writer, left, done in list(live):
                writer.write(chunk)
                left[0] -= 1
                if left[0] == 0:
                    live.remove((writer, left, done))
                    done.set_result(None)

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=1 << 16, backlog=4096)
        port_out.put(server.sockets[0].getsockname()[1])
        task = asyncio.ensure_future(engine())
        while True:
            await asyncio.sleep(0.5)
            Path(log_path).write_text(json.dumps(times))
        task.cancel()

    asyncio.run(main())


class _Raw(asyncio.Protocol):
    """The floor: one request per connection, the answer's end found by its last bytes, nothing parsed."""

    def __init__(self, done: asyncio.Future) -> None:
        self.done = done
        self.tail = b""

    def data_received(self, data: bytes) -> None:
        self.tail = (self.tail + data)[-5:]
        if self.tail == b"0\r\n\r\n" and not self.done.done():
            self.done.set_result(time.monotonic())


async def _raw_client(url: str, concurrent: int, tokens: int) -> tuple[list, float]:
    from types import SimpleNamespace

    port = int(url.rsplit(":", 1)[1].split("/")[0])
    loop = asyncio.get_running_loop()
    body = json.dumps({"model": "m", "prompt": [1, 2, 3], "max_tokens": tokens, "stream": True}).encode()

    async def one(i: int):
        done = loop.create_future()
        transport, _ = await loop.create_connection(lambda: _Raw(done), "127.0.0.1", port)
        send = time.monotonic()
        transport.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: r%d\r\nContent-Length: %d\r\n\r\n%s"
                        % (i, len(body), body))
        finish = await done
        transport.close()
        return SimpleNamespace(send_s=send, finish_s=finish)

    cpu0 = time.process_time()
    results = await asyncio.gather(*(one(i) for i in range(concurrent)))
    return results, time.process_time() - cpu0


async def _client(url: str, concurrent: int, tokens: int) -> tuple[list, float]:
    pool = ServerPool(url, clock=time.monotonic, idle_timeout_s=120)
    body = {"model": "m", "prompt": [1, 2, 3], "max_tokens": tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    cpu0 = time.process_time()
    results = await asyncio.gather(*(pool.complete(body, label=f"r{i}", request_id=f"r{i}")
                                     for i in range(concurrent)))
    cpu = time.process_time() - cpu0
    await pool.close()
    return results, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, nargs="+", default=[100, 1000, 2000])
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--step-ms", type=float, default=100.0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * max(args.concurrent) + 64)), hard))
    print("| client | concurrent | tokens each | way in, median / p99 ms | way out, median / p99 ms | "
          "client CPU per token us |")
    print("|---|---|---|---|---|---|")
    for n, kind in [(n, kind) for n in args.concurrent for kind in ("asp", "raw")]:
        log = Path(f"/tmp/asp-bench-client-{kind}-{n}.json")
        ports: multiprocessing.Queue = multiprocessing.Queue()
        proc = multiprocessing.Process(target=_server, args=(ports, str(log), args.step_ms / 1000.0), daemon=True)
        proc.start()
        url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
        results, cpu = asyncio.run((_client if kind == "asp" else _raw_client)(url, n, args.tokens))
        time.sleep(1.2)
        server = json.loads(log.read_text())
        proc.terminate()
        way_in = sorted((server[f"r{i}"][0] - r.send_s) * 1e3 for i, r in enumerate(results))
        way_out = sorted((r.finish_s - server[f"r{i}"][1]) * 1e3 for i, r in enumerate(results))

        def pick(values: list[float], q: float) -> float:
            return values[min(int(q * len(values)), len(values) - 1)]

        print(f"| {kind} | {n:,} | {args.tokens} | {pick(way_in, 0.5):.2f} / {pick(way_in, 0.99):.2f} | "
              f"{pick(way_out, 0.5):.2f} / {pick(way_out, 0.99):.2f} | {cpu / (n * args.tokens) * 1e6:.1f} |")


if __name__ == "__main__":
    main()
