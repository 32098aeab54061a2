"""One HTTP/1.1 keep-alive connection as an asyncio ``Protocol`` that parses its answer as the bytes arrive.

The event loop hands each socket read straight to `Connection.data_received`, which decodes the framing
(``Content-Length``, chunked, or until close) in place, stamps the first generated token and the last byte
on the clock right there, and wakes the waiting request only once, when the answer is complete. A streamed
answer of L tokens thus costs L small callbacks and one task switch, not L task switches through a
``StreamReader`` (which is what lets one process follow thousands of streams). Of a streamed answer only the
first events (until a token shows) and the last few kilobytes (where the usage event is) are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass

TAIL_BYTES = 16384  # the end of a stream kept to find its usage event
_MAX_HEAD = 65536
_MAX_BODY = 64 << 20  # a plain answer larger than this is not a completion


@dataclass(frozen=True)
class Answer:
    """One complete answer: its status, headers and body, and when its first token and last byte came."""

    status: int
    headers: dict[str, str]
    body: bytes  # the whole body; of a streamed 200 answer, its last TAIL_BYTES
    first_token_at: float | None  # clock() at the first event with a generated choice (streamed 200 only)
    finished_at: float
    reusable: bool


class DeadlinePassed(TimeoutError):
    """The answer was not complete by the request's deadline, though bytes kept coming."""


class ConnectionBroken(Exception):
    """The connection closed or failed before the answer was complete."""

    def __init__(self, reason: str, *, answered: bool) -> None:
        super().__init__(reason)
        self.answered = answered  # whether any byte of the answer had arrived


class Connection(asyncio.Protocol):
    """A keep-alive connection carrying one exchange at a time."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.future: asyncio.Future | None = None
        self.buffer = bytearray()
        self._timer: asyncio.TimerHandle | None = None

    # ----------------------------------------------------------------------------------------------------
    # Use

    @property
    def usable(self) -> bool:
        return not self.closed and self.future is None and self.transport is not None \
            and not self.transport.is_closing()

    def exchange(self, request: bytes, *, stream: bool, idle_timeout_s: float,
                 deadline_s: float = math.inf) -> asyncio.Future:
        """Write ``request``; the future resolves to its `Answer` (or fails with `ConnectionBroken`, with
        ``TimeoutError()`` when nothing arrives for ``idle_timeout_s``, or with `DeadlinePassed` when the answer is
        not complete ``deadline_s`` after the request was written: a server that keeps sending bytes, keep-alive
        comments in front of a stuck engine, is never silent)."""
        loop = asyncio.get_running_loop()
        self.future = loop.create_future()
        self.stream = stream
        self.phase = "head"
        self.status = 0
        self.headers: dict[str, str] = {}
        self.left = 0
        self.got_bytes = False
        self.first_at: float | None = None
        self.head_events = b""
        self.scanned = 0  # of head_events, the bytes whose complete events held no token
        self.parts: list[bytes] = []
        self.kept = 0
        self.last = loop.time()
        self.idle_timeout_s = idle_timeout_s
        self.deadline = self.last + deadline_s
        self._timer = loop.call_later(min(idle_timeout_s, deadline_s), self._check_idle)
        assert self.transport is not None
        self.transport.write(request)
        return self.future

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self.transport is not None:
            self.transport.close()

    # ----------------------------------------------------------------------------------------------------
    # Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.future is None or self.future.done():
            self._fail("the server sent bytes nobody asked for")
            self.close()
            return
        self.got_bytes = True
        self.last = self.future.get_loop().time()
        self.buffer += data
        try:
            self._parse()
        except ValueError as exc:
            self._fail(f"a malformed answer ({exc})")
            self.close()

    def eof_received(self) -> bool:
        if self.future is not None and not self.future.done() and self.phase == "until-close":
            self._finish(reusable=False)
        self._fail("the server closed the connection mid-answer" if self.got_bytes
                   else "the server closed the connection")
        self.closed = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(f"the connection was lost ({exc.__class__.__name__})" if exc else "the connection was closed")

    # ----------------------------------------------------------------------------------------------------
    # Parsing

    def _parse(self) -> None:
        buffer = self.buffer
        while self.future is not None and not self.future.done():
            if self.phase == "head":
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(buffer) > _MAX_HEAD:
                        raise ValueError("the header is too long")
                    return
                self._head(bytes(buffer[:end]))
                del buffer[: end + 4]
            elif self.phase == "size":
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                size = int(bytes(buffer[:end]).split(b";")[0].strip() or b"x", 16)
                del buffer[: end + 2]
                self.phase, self.left = ("trailer", 0) if size == 0 else ("chunk", size)
            elif self.phase == "chunk":  # taken as it arrives: a chunk may announce any size (4 GiB)
                take = min(self.left, len(buffer))
                if take:
                    self._piece(bytes(buffer[:take]))
                    del buffer[:take]
                    self.left -= take
                if self.left:
                    return
                self.phase = "chunk-end"
            elif self.phase == "chunk-end":  # the CRLF after a chunk's data
                if len(buffer) < 2:
                    return
                del buffer[:2]
                self.phase = "size"
            elif self.phase == "trailer":
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                del buffer[: end + 2]
                if end == 0:
                    self._finish(reusable=not buffer)
            elif self.phase == "sized":
                take = min(self.left, len(buffer))
                if take:
                    self._piece(bytes(buffer[:take]))
                    del buffer[:take]
                    self.left -= take
                if self.left == 0:
                    self._finish(reusable=not buffer)
                return
            else:  # until-close: the body ends with the connection (eof_received)
                if buffer:
                    self._piece(bytes(buffer))
                    buffer.clear()
                return

    def _head(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ValueError(f"not an HTTP status line: {lines[0][:60]!r}")
        self.status = int(parts[1])
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                self.headers[name.strip().lower()] = value.strip()
        self.keep_alive = self.headers.get("connection", "").lower() != "close"
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self.phase = "size"
        elif "content-length" in self.headers:
            self.phase, self.left = "sized", int(self.headers["content-length"])
        else:
            self.phase = "until-close"

    def _piece(self, piece: bytes) -> None:
        if self.stream and self.status == 200:
            if self.first_at is None:
                self.head_events += piece
                unread = self.head_events[self.scanned:]
                if has_token(unread):
                    self.first_at = self.clock()
                    self.parts, self.kept = [self.head_events], len(self.head_events)
                    self.head_events = b""
                    return
                if len(self.head_events) > _MAX_BODY:  # a stream of megabytes and no token is not a completion
                    raise ValueError("the answer is too large")
                # The complete events read held no token: read only what follows them next time (a stream of
                # keep-alive comments was parsed whole on every piece).
                ends = [at + size for at, size in ((unread.rfind(b"\n\n"), 2), (unread.rfind(b"\r\n\r\n"), 4))
                        if at >= 0]
                self.scanned += max(ends, default=0)
                return
            self.parts.append(piece)
            self.kept += len(piece)
            if self.kept > 2 * TAIL_BYTES:
                joined = b"".join(self.parts)[-TAIL_BYTES:]
                self.parts, self.kept = [joined], len(joined)
            return
        self.parts.append(piece)
        self.kept += len(piece)
        if self.kept > _MAX_BODY:
            raise ValueError("the answer is too large")

    def _finish(self, *, reusable: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
        body = b"".join(self.parts) if self.first_at is not None or not self.stream or self.status != 200 \
            else self.head_events
        if self.stream and self.status == 200:
            body = body[-TAIL_BYTES:]
        future, self.future = self.future, None
        assert future is not None
        future.set_result(Answer(self.status, self.headers, body, self.first_at, self.clock(),
                                 reusable and self.keep_alive))

    def _fail(self, reason: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
        future, self.future = self.future, None
        if future is not None and not future.done():
            future.set_exception(ConnectionBroken(reason, answered=self.got_bytes))

    def _check_idle(self) -> None:
        future = self.future
        if future is None or future.done():
            return
        now = future.get_loop().time()
        left = min(self.last + self.idle_timeout_s, self.deadline) - now
        if left > 0:
            self._timer = future.get_loop().call_later(left, self._check_idle)
            return
        self.future = None
        silent = now >= self.last + self.idle_timeout_s  # silence is said as such, where both are due
        future.set_exception(TimeoutError() if silent else DeadlinePassed())
        self.close()


# --------------------------------------------------------------------------------------------------------
# Server-sent events


def events(buffer: bytes) -> list[bytes]:
    """The ``data:`` payloads of the complete server-sent events in ``buffer``."""
    out = []
    for event in buffer.replace(b"\r\n", b"\n").split(b"\n\n"):
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                out.append(line[5:].strip())
    return out


def has_token(buffer: bytes) -> bool:
    """Whether the stream so far holds an event with a generated choice (not only usage, not [DONE])."""
    normal = buffer.replace(b"\r\n", b"\n")
    if b"\n\n" not in normal:
        return False
    for data in events(normal.rsplit(b"\n\n", 1)[0]):
        if data == b"[DONE]":
            continue
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            document = json.loads(data)
            if isinstance(document, dict) and document.get("choices"):
                return True
    return False
