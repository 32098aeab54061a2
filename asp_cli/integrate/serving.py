"""An asyncio HTTP/1.1 client for OpenAI-compatible completion servers (``vllm serve``, SGLang), standard
library only.

One `ServerPool` per server keeps its keep-alive connections (HTTP/1.1 carries one request at a time per
connection, so the pool opens as many as there are requests in flight) and an optional limit on requests in
flight. `ServerPool.complete` posts one ``/v1/completions`` request and returns a `Completion`: when it was
sent, when its first token arrived (streaming only) and when it finished, in seconds from the run's origin on
``time.perf_counter``, and the token counts the server reported.

Connection errors, 5xx and 429 answers are retried with exponential backoff; when the retries are spent, or the
server refuses the request (another 4xx), `ServerError` names the server and the request. A kept-alive
connection the server closed while idle (uvicorn, under vLLM, closes them after 5 s) is replaced at once and
does not count as an attempt, the way urllib3 retries a stale pooled connection.

Each connection parses its answer as the bytes arrive (`asp_cli.integrate.http_wire`): the first-token and
finish times are stamped when the bytes come in, and a request's task wakes once per answer, not once per
token, so one process follows thousands of streams (scripts/bench_replay_client.py measures it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from asp_cli.errors import ServerError, SettingsError
from asp_cli.integrate.http_wire import Answer, Connection, ConnectionBroken, DeadlinePassed, events

DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
DEFAULT_IDLE_TIMEOUT_S = 600.0  # no byte for this long: the request has failed (long generations stream)
# Without --request-timeout an attempt may take the idle timeout plus this per token asked for: a decode rate of 2
# tokens a second, 10 to 50 times below a loaded engine's, so that only a server that never finishes (a stuck engine
# behind a proxy that keeps sending SSE keep-alive comments, an answer trickling a byte at a time) reaches it.
SLOW_TOKEN_S = 0.5
_DEFAULT_MAX_TOKENS = 16  # the OpenAI completions API's default max_tokens
# Reuse an idle connection only if it has been idle for less than this: uvicorn closes at 5 s.
KEEPALIVE_S = 4.0
_ERROR_TEXT = 300  # characters of a server's error message quoted in ours


@dataclass(frozen=True)
class Completion:
    """What one request measured and what the server reported about it."""

    send_s: float
    first_token_s: float | None  # None when not streaming
    finish_s: float
    prompt_tokens: int | None  # None when the server reported no usage
    completion_tokens: int | None
    finish_reason: str | None  # plain answers only
    attempts: int


class _Retry(Exception):
    """A failure worth another attempt: the connection broke, or the server answered 5xx or 429 (``wait_s``: the
    seconds its Retry-After asked for, if any)."""

    def __init__(self, reason: str = "", wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.wait_s = wait_s


class _Stale(_Retry):
    """A reused keep-alive connection was closed before the server answered: reconnect, no attempt spent."""


def parse_server_url(url: str) -> tuple[str, str, int, str]:
    """Split a server's base URL into (scheme, host, port, API path ending in ``/v1``).

    ``http://host:8000`` and ``http://host:8000/v1`` name the same server.

    Raises
    ------
    SettingsError
        For a URL without a host, or of another scheme than http/https.
    """
    try:
        parts = urlsplit(url.strip())
        hostname = parts.hostname
    except ValueError:  # an unclosed IPv6 bracket: "http://[::1"
        raise SettingsError(f"--servers: {url!r} is not a server URL; give one like http://host:8000/v1 "
                            "(an IPv6 host in brackets: http://[::1]:8000/v1)") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise SettingsError(f"--servers: {url!r} is not a server URL; give one like http://host:8000/v1")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise SettingsError(f"--servers: {url!r} has a bad port; give one like http://host:8000/v1") from None
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return parts.scheme, parts.hostname, port, path


def request_deadline_s(body: dict[str, Any], *, idle_timeout_s: float, request_timeout_s: float | None = None) -> float:
    """The seconds one attempt of a completion request may take in all: ``request_timeout_s`` (--request-timeout)
    where given, else the idle timeout plus `SLOW_TOKEN_S` per token the request asks for (``max_tokens``)."""
    if request_timeout_s is not None:
        return request_timeout_s
    asked = body.get("max_tokens")
    asked = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else _DEFAULT_MAX_TOKENS
    return idle_timeout_s + SLOW_TOKEN_S * asked


def _bracketed(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


# The longest wait between two tries of a request (the backoff doubles up to it; a Retry-After is cut to it).
MAX_WAIT_S = 600.0
_sleep = asyncio.sleep  # the waits between tries (a test records them)


class ServerPool:
    """Keep-alive connections to one OpenAI-compatible server, and its in-flight limit.

    Parameters
    ----------
    url
        The server's base URL (``http://host:8000/v1``).
    max_in_flight
        At most this many requests in flight at once (None: no limit).
    retries, backoff_s
        Attempts after the first, and the wait before the first retry (doubled each time).
    idle_timeout_s
        Seconds without a byte from the server after which a request has failed (and is retried).
    request_timeout_s
        Seconds one attempt of a completion may take in all before it has failed (and is retried); None: the
        idle timeout plus `SLOW_TOKEN_S` per token asked for (`request_deadline_s`).
    clock, origin_s
        Times are ``clock() - origin_s``.
    api_key
        Sent as ``Authorization: Bearer`` (vLLM's ``--api-key``).
    """

    def __init__(self, url: str, *, max_in_flight: int | None = None, retries: int = DEFAULT_RETRIES,
                 backoff_s: float = DEFAULT_BACKOFF_S, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 request_timeout_s: float | None = None, clock: Callable[[], float] = time.perf_counter,
                 origin_s: float = 0.0,
                 api_key: str | None = None) -> None:
        self.url = url
        self.scheme, self.host, self.port, self.api_path = parse_server_url(url)
        self.root_path = self.api_path[: -len("/v1")]
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.backoff_s = backoff_s
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.clock = clock
        self.origin_s = origin_s
        self.api_key = api_key
        self._idle: list[tuple[Connection, float]] = []
        self._slots: asyncio.Semaphore | None = None
        self._open: set[Connection] = set()

    def now(self) -> float:
        """Seconds since the run's origin."""
        return self.clock() - self.origin_s

    # ----------------------------------------------------------------------------------------------------
    # Public requests

    async def complete(self, body: dict[str, Any], *, label: str, request_id: str | None = None) -> Completion:
        """POST ``/v1/completions`` and measure it; ``body["stream"]`` chooses streaming.

        Raises
        ------
        ServerError
            When the server refuses the request, or the retries are spent.
        """
        if self._slots is None and self.max_in_flight:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        payload = json.dumps(body, separators=(",", ":")).encode()
        stream = bool(body.get("stream"))
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if request_id:
            headers["X-Request-Id"] = request_id
        deadline_s = request_deadline_s(body, idle_timeout_s=self.idle_timeout_s,
                                        request_timeout_s=self.request_timeout_s)
        async with self._slots if self._slots is not None else contextlib.nullcontext():
            return await self._with_retries(
                lambda: self._completion(payload, headers, stream, label, deadline_s), label=label)

    async def get_json(self, path: str, *, root: bool = False, timeout_s: float | None = None) -> Any:
        """GET ``path`` under the API path (or under the server's root) and parse it as JSON.

        Raises
        ------
        ServerError
        """
        raw = await self.get_bytes(path, root=root, timeout_s=timeout_s)
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ServerError(f"server {self.url}: GET {path} did not answer JSON; is it an OpenAI-compatible "
                              "server?") from None

    async def get_bytes(self, path: str, *, root: bool = False, timeout_s: float | None = None) -> bytes:
        """GET ``path`` under the API path (or the server's root) and return the body; each try must be answered
        in full within ``timeout_s`` (default the idle timeout).

        Raises
        ------
        ServerError
        """
        full = (self.root_path if root else self.api_path) + path
        limit = self.idle_timeout_s if timeout_s is None else timeout_s

        async def once() -> bytes:
            answer, _ = await self._exchange(self._head("GET", full, {}, 0), stream=False, idle_timeout_s=limit,
                                             deadline_s=limit)
            if answer.status >= 500 or answer.status == 429:
                raise _Retry(f"HTTP {answer.status}: {_error_message(answer.body)}", _retry_after(answer))
            if answer.status != 200:
                raise ServerError(f"server {self.url}: GET {full} answered HTTP {answer.status} "
                                  f"({_error_message(answer.body)})")
            return answer.body

        return await self._with_retries(once, label=f"GET {full}")

    async def close(self) -> None:
        """Close every connection."""
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing

    # ----------------------------------------------------------------------------------------------------
    # Retries

    async def _with_retries(self, attempt: Callable[[], Any], *, label: str) -> Any:
        tries = 0
        while True:
            tries += 1
            try:
                result = await self._fresh_on_stale(attempt)
                return dataclasses.replace(result, attempts=tries) if isinstance(result, Completion) else result
            except _Retry as exc:
                if tries > self.retries:
                    raise ServerError(
                        f"server {self.url}: {label} failed after {tries} attempt{'' if tries == 1 else 's'} ({exc}); "
                        "check that the server "
                        f"is up and reachable (curl {self.scheme}://{_bracketed(self.host)}:{self.port}{self.api_path}/models) "
                        "and read its log"
                    ) from None
                # Doubled each time, but never past MAX_WAIT_S (2 ** 1024 overflowed a float: exit 70); a server that
                # says how long to wait (Retry-After) is waited for, up to MAX_WAIT_S: retried after the backoff, a
                # 429 asking for 10 s failed the run after 3.5 s (a hostile-input round).
                wait = min(self.backoff_s * 2.0 ** min(tries - 1, 64), MAX_WAIT_S)
                await _sleep(wait if exc.wait_s is None else max(wait, exc.wait_s))

    async def _fresh_on_stale(self, attempt: Callable[[], Any]) -> Any:
        # A stale pooled connection is replaced without spending an attempt; at most as many times as there
        # were idle connections, then a fresh one must answer.
        for _ in range(len(self._idle) + 1):
            try:
                return await attempt()
            except _Stale:
                continue
        return await attempt()

    # ----------------------------------------------------------------------------------------------------
    # One exchange

    async def _completion(self, payload: bytes, headers: dict[str, str], stream: bool, label: str,
                          deadline_s: float) -> Completion:
        head = self._head("POST", self.api_path + "/completions", headers, len(payload))
        answer, send_s = await self._exchange(head + payload, stream=stream, deadline_s=deadline_s,
                                              late="; a stuck engine behind a proxy? asp replay's --request-timeout "
                                                   "sets the limit")
        if answer.status != 200:
            message = _error_message(answer.body)
            if answer.status >= 500 or answer.status == 429:
                raise _Retry(f"HTTP {answer.status}: {message}", _retry_after(answer))
            # The request is named: the server alone left which prompt was too long to be found in its log.
            raise ServerError(f"server {self.url}: {label} was refused: HTTP {answer.status} ({message}); fix the "
                              "request settings (the model name, --max-response-tokens against the server's "
                              "--max-model-len)")
        finish_s = answer.finished_at - self.origin_s
        if not stream:
            try:
                document = json.loads(answer.body)
            except (ValueError, UnicodeDecodeError):
                raise _Retry("the answer was not JSON") from None
            # JSON that is no completion (a list, an object without choices: a proxy's page) was measured as one.
            choices = document.get("choices") if isinstance(document, dict) else None
            if not isinstance(choices, list) or not choices:
                raise _Retry("the answer was not a completion: JSON without choices")
            return _completion_from(document, send_s, None, finish_s)
        document = _last_usage_event(answer.body)
        if document is None:
            failure = _error_event(answer.body)
            if failure is None and answer.first_token_at is None and _plain_json(answer):
                # Retried, it failed 4 times alike ("no token and no usage"); read as a plain answer, it would have no
                # first-token time in a run asked to stream (which asp calibrate needs): said at once, with the fix.
                raise ServerError(f"server {self.url}: {label} was answered with plain JSON, not a stream (the server "
                                  "ignores \"stream\": true); pass --no-stream (a replay without first-token times, "
                                  "which asp calibrate needs), or serve the model with vLLM or SGLang, which stream")
            if failure is not None or answer.first_token_at is None:
                raise _Retry(f"the stream failed: {failure or 'no token and no usage'}")
            document = {}  # a server that does not report usage in streams: counts unknown
        first_s = None if answer.first_token_at is None else answer.first_token_at - self.origin_s
        return _completion_from(document, send_s, first_s, finish_s)

    def _head(self, method: str, path: str, headers: dict[str, str], length: int) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {_bracketed(self.host)}:{self.port}", "Connection: keep-alive",
                 "User-Agent: asp-replay", f"Content-Length: {length}"]
        if length:
            lines.append("Content-Type: application/json")
        if self.api_key:
            lines.append(f"Authorization: Bearer {self.api_key}")
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _exchange(self, request: bytes, *, stream: bool, idle_timeout_s: float | None = None,
                        deadline_s: float = math.inf, late: str = "") -> tuple[Answer, float]:
        """Send one request on a pooled connection; return the answer and when the request went out (``late``: what
        the message of an answer not complete by ``deadline_s`` adds)."""
        idle = self.idle_timeout_s if idle_timeout_s is None else idle_timeout_s
        connection, reused = await self._connection(idle)
        send_s = self.now()
        try:
            answer = await connection.exchange(request, stream=stream, idle_timeout_s=idle, deadline_s=deadline_s)
        except ConnectionBroken as exc:
            self._discard(connection)
            if reused and not exc.answered:
                raise _Stale() from None
            raise _Retry(str(exc)) from None
        except DeadlinePassed:
            self._discard(connection)
            raise _Retry(f"the answer was not complete after {deadline_s:g} s, though the server kept sending bytes"
                         f"{late}") from None
        except TimeoutError:
            self._discard(connection)
            raise _Retry(f"nothing came from the server for {idle:g} s") from None
        except BaseException:  # cancelled (Ctrl-C): the connection is in an unknown state
            self._discard(connection)
            raise
        if answer.reusable:
            self._idle.append((connection, self.clock()))
        else:
            self._discard(connection)
        return answer, send_s

    async def _connection(self, idle_timeout_s: float) -> tuple[Connection, bool]:
        now = self.clock()
        while self._idle:
            connection, since = self._idle.pop()
            if connection.usable and now - since <= KEEPALIVE_S:
                return connection, True
            self._discard(connection)
        context = ssl.create_default_context() if self.scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(lambda: Connection(self.clock), self.host, self.port, ssl=context),
                min(idle_timeout_s, 60.0))
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
            raise _Retry(f"cannot connect: {_describe(exc, min(idle_timeout_s, 60.0))}") from None
        self._open.add(connection)
        return connection, False

    def _discard(self, connection: Connection) -> None:
        self._open.discard(connection)
        connection.close()


# --------------------------------------------------------------------------------------------------------
# Parsing


def _parse_head(raw: bytes) -> tuple[int, dict[str, str]]:
    lines = raw.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise _Retry(f"not an HTTP answer ({lines[0][:60]!r})") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers


def _last_usage_event(tail: bytes) -> dict | None:
    """The last event of a stream that carries usage counts (``stream_options.include_usage``)."""
    for data in reversed(events(tail)):
        if data == b"[DONE]" or b"usage" not in data:
            continue
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            document = json.loads(data)
            if isinstance(document, dict) and isinstance(document.get("usage"), dict):
                return document
    return None


def _plain_json(answer: Answer) -> bool:
    """Whether a 200 answer to a request for a stream is a plain JSON document, no event stream: JSON by its
    Content-Type, or an object that is no error (a stream's body holds ``data:`` events)."""
    if events(answer.body):
        return False
    try:
        document = json.loads(answer.body)
    except (ValueError, UnicodeDecodeError):  # a long answer is kept cut to its end: its Content-Type says
        return "json" in answer.headers.get("content-type", "").lower()
    return isinstance(document, dict) and "error" not in document


def _error_event(tail: bytes) -> str | None:
    """The message of an error event in a stream (vLLM sends ``data: {"error": ...}`` when a request fails)."""
    for data in reversed(events(tail)):
        if b"error" in data:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                document = json.loads(data)
                if isinstance(document, dict) and "error" in document:
                    return _error_message(data)
    return None


def _completion_from(document: Any, send_s: float, first_s: float | None, finish_s: float) -> Completion:
    usage = document.get("usage") if isinstance(document, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    choices = document.get("choices") if isinstance(document, dict) else None
    reason = None
    if isinstance(choices, list) and choices and isinstance(choices[-1], dict):
        reason = choices[-1].get("finish_reason")
    return Completion(send_s=send_s, first_token_s=first_s, finish_s=finish_s,
                      prompt_tokens=_count(usage.get("prompt_tokens")),
                      completion_tokens=_count(usage.get("completion_tokens")),
                      finish_reason=reason if isinstance(reason, str) else None, attempts=1)


def _count(value: Any) -> int | None:
    """A token count the server reported, or None where it reported none a timeline can hold (an audit's server
    said 1e30 as an integer, which overflowed the timeline's int64 column: exit 70, the measurements lost; 10**15 was
    written, and the timeline's reader refused it, E92)."""
    from asp_cli.columns import MAX_TOKEN_COUNT

    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT else None


def _retry_after(answer: Answer) -> float | None:
    """The seconds a 429 or 503 answer's ``Retry-After`` asks to wait (its HTTP-date form is not read), at most
    `MAX_WAIT_S`."""
    text = answer.headers.get("retry-after", "").strip()
    if answer.status not in (429, 503) or not text.isdigit():
        return None
    return min(float(text), MAX_WAIT_S)


def _error_message(raw: bytes) -> str:
    """A server's error text: OpenAI's ``{"error": {"message": ...}}``, vLLM's ``{"message": ...}``, or raw."""
    text = raw.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        document = json.loads(text)
        if isinstance(document, dict):
            inner = document.get("error", document)
            if isinstance(inner, dict) and isinstance(inner.get("message"), str):
                text = inner["message"]
            elif isinstance(inner, str):
                text = inner
    text = " ".join(text.split())
    return text[:_ERROR_TEXT] or "no message"


def _describe(exc: BaseException, waited_s: float) -> str:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):  # said with its seconds, as the idle timeout is
        return f"no connection within {waited_s:g} s"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
