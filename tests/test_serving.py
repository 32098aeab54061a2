"""The asyncio HTTP client against a local OpenAI-compatible fake server: streaming and not, forced lengths,
retries, dropped and stale connections, and its error messages."""

from __future__ import annotations

import asyncio

import pytest
from fake_openai import NATURAL_LENGTH, FakeServer, Faults

from asp_cli.errors import ServerError, SettingsError
from asp_cli.integrate.serving import ServerPool, parse_server_url


def body(length: int, *, stream: bool = True, forced: bool = True) -> dict:
    document = {"model": "fake-model", "prompt": list(range(7)), "max_tokens": length, "stream": stream}
    if forced:
        document.update(min_tokens=length, ignore_eos=True)
    if stream:
        document["stream_options"] = {"include_usage": True}
    return document


def run(coroutine):
    return asyncio.run(coroutine)

def complete_once(url, request, label, **options):
    """One request through a fresh pool of ``options``, closed after: what most tests here send."""
    async def main():
        pool = ServerPool(url, **options)
        try:
            return await pool.complete(request, label=label)
        finally:
            await pool.close()

    return run(main())



def test_parse_server_url():
    assert parse_server_url("http://h:8000") == ("http", "h", 8000, "/v1")
    assert parse_server_url("http://h:8000/v1/") == ("http", "h", 8000, "/v1")
    assert parse_server_url("https://h/proxy/v1") == ("https", "h", 443, "/proxy/v1")
    assert parse_server_url("http://[::1]:9/v1") == ("http", "::1", 9, "/v1")
    for bad in ("h:8000", "ftp://h/v1", "http://h:port/v1", "http://[::1", "http://[x]:80/v1"):  # the last two:
        with pytest.raises(SettingsError, match="--servers"):  # ValueError from urllib, exit 70
            parse_server_url(bad)


def test_an_ipv6_host_is_written_in_brackets_in_the_host_header_and_the_hint():
    """The Host header said "::1:8000", which strict front-ends (nginx) answer with 400."""
    from asp_cli.integrate.serving import _bracketed

    assert _bracketed("::1") == "[::1]" and _bracketed("host") == "host"
    assert b"\r\nHost: [::1]:8000\r\n" in ServerPool("http://[::1]:8000/v1")._head("GET", "/v1/models", {}, 0)
    assert b"\r\nHost: h:8000\r\n" in ServerPool("http://h:8000/v1")._head("GET", "/v1/models", {}, 0)


def test_streaming_and_plain_completions_report_times_and_usage():
    async def main(url):
        pool = ServerPool(url)
        streamed = await asyncio.gather(*(pool.complete(body(12), label=f"r{i}", request_id=f"r{i}")
                                          for i in range(6)))
        plain = await pool.complete(body(9, stream=False), label="plain")
        natural = await pool.complete(body(9, forced=False), label="natural")
        await pool.close()
        return streamed, plain, natural

    with FakeServer(time_scale=0.05) as server:
        streamed, plain, natural = run(main(server.url))
        bodies = server.bodies
    for result in streamed:
        assert result.send_s <= result.first_token_s <= result.finish_s
        assert (result.prompt_tokens, result.completion_tokens, result.attempts) == (7, 12, 1)
    assert plain.first_token_s is None and plain.send_s <= plain.finish_s
    assert plain.completion_tokens == 9 and plain.finish_reason == "length"
    # Unforced, the fake stops at its natural length: forcing is what made the others 12 tokens long.
    assert natural.completion_tokens == NATURAL_LENGTH
    assert bodies["r0"]["min_tokens"] == bodies["r0"]["max_tokens"] == 12 and bodies["r0"]["ignore_eos"] is True


def test_5xx_answers_are_retried_until_the_server_recovers():
    async def main(url):
        pool = ServerPool(url, backoff_s=0.001)
        result = await pool.complete(body(5), label="r")
        await pool.close()
        return result

    with FakeServer(faults=Faults(fail_first=2)) as server:
        result = run(main(server.url))
    assert result.attempts == 3 and result.completion_tokens == 5


def test_a_dropped_connection_is_retried_then_named_in_one_clear_error():
    def main(url):
        return complete_once(url, body(5), "asp request seq 3 sample 1 (prompt id 'p7')", retries=2, backoff_s=0.001)

    with FakeServer(faults=Faults(drop_after=0)) as server:
        with pytest.raises(ServerError) as caught:
            main(server.url)
        attempts = server.completions
    message = str(caught.value)
    assert message.startswith(f"server {server.url}: asp request seq 3 sample 1 (prompt id 'p7') failed after 3 "
                              "attempts (")
    assert "curl" in message and "\n" not in message
    assert attempts == 3


def test_a_refused_request_is_not_retried_and_is_named():
    """A 4xx refusal named the server alone, not the request or its prompt id (a hostile-input round)."""
    async def main(url):
        pool = ServerPool(url, backoff_s=0.001)
        try:
            await pool.complete({**body(5), "model": "other"}, label="asp request seq 3 sample 1 (prompt id 'p7')")
        finally:
            await pool.close()

    with FakeServer() as server:
        with pytest.raises(ServerError) as caught:
            run(main(server.url))
        assert server.completions == 1
    assert str(caught.value).startswith(f"server {server.url}: asp request seq 3 sample 1 (prompt id 'p7') was "
                                        "refused: HTTP 404 (model 'other' does not exist); fix the request settings")


def _recorded_waits(monkeypatch) -> list[float]:
    import asp_cli.integrate.serving as serving

    waits: list[float] = []
    real = asyncio.sleep

    async def wait(seconds: float) -> None:
        waits.append(seconds)
        await real(0)

    monkeypatch.setattr(serving, "_sleep", wait)
    return waits


@pytest.mark.parametrize("status, header, expected", [(429, "7", 7.0), (503, "7", 7.0), (429, "100000", 600.0),
                                                      (429, "Wed, 21 Oct 2015 07:28:00 GMT", 0.001),
                                                      (500, "7", 0.001)])
def test_a_retry_waits_as_long_as_retry_after_says(monkeypatch, status, header, expected):
    """A 429 (or 503) with Retry-After was retried after --retry-backoff alone (0.5 s, doubling): a server that asked
    for 10 s failed the run after 3.5 s (a hostile-input round). Its seconds are waited, at most 600; a date, or the
    header on another status, keeps the backoff."""
    waits = _recorded_waits(monkeypatch)

    async def main(url):
        pool = ServerPool(url, backoff_s=0.001)
        result = await pool.complete(body(5), label="r")
        await pool.close()
        return result

    with FakeServer(faults=Faults(fail_first=1, fail_status=status, retry_after=header)) as server:
        result = run(main(server.url))
    assert result.attempts == 2 and waits == [expected]


@pytest.mark.parametrize("answer", [b"[1, 2]", b'{"usage": {"prompt_tokens": 7, "completion_tokens": 5}}',
                                    b'{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5}}', b'"x"'])
def test_a_plain_answer_that_is_no_completion_is_not_taken_for_one(answer):
    """A 200 answer of JSON that is no completion (a list, an object without choices) was measured as a finished
    request (a hostile-input round): it is retried as an answer that is not JSON is, then named."""
    def main(url):
        return complete_once(url, body(5, stream=False), "r", retries=1, backoff_s=0.001)

    with FakeServer(faults=Faults(body=answer)) as server:
        with pytest.raises(ServerError, match=r"r failed after 2 attempts \(the answer was not a completion"):
            main(server.url)
        assert server.completions == 2


def test_a_server_that_sends_nothing_is_said_to_for_how_long():
    """The idle timeout was said as "no answer within the idle timeout", without its seconds (600 by default, and four
    attempts of it before a replay stops)."""
    def main(url):
        return complete_once(url, body(5), "r", retries=0, idle_timeout_s=1.0)

    with FakeServer(faults=Faults(hold=lambda rid: True)) as server:
        with pytest.raises(ServerError, match=r"\(nothing came from the server for 1 s\)"):
            main(server.url)


def test_a_connection_the_server_closed_while_idle_is_replaced_without_spending_an_attempt():
    async def main(url):
        pool = ServerPool(url, retries=0)
        results = [await pool.complete(body(3), label=f"r{i}") for i in range(4)]
        await pool.close()
        return results

    with FakeServer(faults=Faults(close_idle=True)) as server:
        results = run(main(server.url))
    assert [r.attempts for r in results] == [1, 1, 1, 1]


def test_the_in_flight_limit_holds():
    async def main(url):
        pool = ServerPool(url, max_in_flight=2)
        await asyncio.gather(*(pool.complete(body(6), label=f"r{i}") for i in range(8)))
        await pool.close()

    with FakeServer(time_scale=0.05) as server:
        run(main(server.url))
        assert server.max_in_flight <= 2 and server.completions == 8


def test_unreachable_server_says_how_to_check_it():
    async def main():
        pool = ServerPool("http://127.0.0.1:9/v1", retries=1, backoff_s=0.001)
        await pool.get_json("/models")

    with pytest.raises(ServerError, match=r"GET /v1/models failed after 2 attempts \(cannot connect"):
        run(main())


def test_a_token_count_no_timeline_can_hold_is_read_as_none():
    """An audit's server reported completion_tokens 1e30 (as an integer): it overflowed the timeline's column,
    exit 70 with the measurements lost. Such a count, a negative one or a non-number, is no count."""
    from asp_cli.integrate.serving import _count

    assert _count(12) == 12 and _count(0) == 0 and _count(2**31 - 1) == 2**31 - 1
    # 2**31 and more: the timeline's reader (asp calibrate) refuses them, E92; replay wrote them (a hostile round).
    assert [_count(v) for v in (10**30, 2**31, 10**15, -5, 3.5, "7", True, None)] == [None] * 8


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_that_keeps_sending_bytes_is_stopped_by_the_request_deadline(stream):
    """A 200 answer trickling a byte every 0.3 s (a plain one of Content-Length 100000; a stream of SSE keep-alive
    comments, a proxy in front of a stuck engine) never went silent for --timeout, so the request never failed: a
    replay ran on for ever (a hostile-server round). Each attempt has a deadline for the whole answer too."""
    import time

    def main(url):
        return complete_once(url, body(5, stream=stream), "asp request seq 3 sample 1 (prompt id 'p7')", retries=1,
                             backoff_s=0.001, idle_timeout_s=1.0, request_timeout_s=1.5)

    with FakeServer(faults=Faults(trickle_s=0.02)) as server:
        start = time.perf_counter()
        with pytest.raises(ServerError) as caught:
            main(server.url)
        took = time.perf_counter() - start
        assert server.completions == 2
    assert took < 8.0  # two attempts of 1.5 s, not for ever (idle timeouts of a second: a loaded machine's jitter)
    assert str(caught.value).startswith(
        f"server {server.url}: asp request seq 3 sample 1 (prompt id 'p7') failed after 2 attempts (the answer was "
        "not complete after 1.5 s")


def test_the_default_request_deadline_grows_with_the_forced_length():
    """Without --request-timeout an attempt may take --timeout plus 0.5 s per token asked for (a decode rate of 2
    tokens a second, far below a loaded engine's)."""
    from asp_cli.integrate.serving import SLOW_TOKEN_S, request_deadline_s

    assert SLOW_TOKEN_S == 0.5
    assert request_deadline_s({"max_tokens": 1000}, idle_timeout_s=600.0) == 1100.0
    assert request_deadline_s({"max_tokens": 1000}, idle_timeout_s=600.0, request_timeout_s=30.0) == 30.0
    assert request_deadline_s({}, idle_timeout_s=2.0) == 2.0 + SLOW_TOKEN_S * 16  # the servers' default max_tokens

    def main(url):
        return complete_once(url, body(1, stream=False), "r", retries=0, idle_timeout_s=1.0)

    with FakeServer(faults=Faults(trickle_s=0.02)) as server:
        with pytest.raises(ServerError, match=r"r failed after 1 attempt \(the answer was not complete after 1.5 s"):
            main(server.url)


def test_a_server_that_answers_json_to_a_stream_request_fails_at_once():
    """A server that ignores "stream": true and answers a plain completion failed after 4 pointless attempts with
    "the stream failed: no token and no usage" (a hostile-server round). It is said at once, with the fix."""
    def main(url):
        return complete_once(url, body(5), "asp request seq 3 sample 1 (prompt id 'p7')", backoff_s=0.001)

    with FakeServer(faults=Faults(ignore_stream=True)) as server:
        with pytest.raises(ServerError) as caught:
            main(server.url)
        assert server.completions == 1
    assert str(caught.value) == (
        f"server {server.url}: asp request seq 3 sample 1 (prompt id 'p7') was answered with plain JSON, not a "
        "stream (the server ignores \"stream\": true); pass --no-stream (a replay without first-token times, which "
        "asp calibrate needs), or serve the model with vLLM or SGLang, which stream")


class _Transport:
    """Enough of an asyncio transport for a `Connection` fed by hand."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


@pytest.mark.parametrize("stream", [True, False])
def test_a_huge_chunk_is_parsed_as_it_arrives_not_buffered_whole(stream):
    """A chunked answer announcing one chunk of 4 GiB was buffered whole before anything was read from it: the
    streamed tail's limit (and a plain answer's size limit) applied only once the chunk was complete (read in a
    hostile-server round). Its bytes are taken as they arrive."""
    import json

    from asp_cli.integrate.http_wire import _MAX_BODY, TAIL_BYTES, Connection, ConnectionBroken

    async def main():
        connection = Connection(lambda: 0.0)
        connection.connection_made(_Transport())
        future = connection.exchange(b"GET", stream=stream, idle_timeout_s=60)
        connection.data_received(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100000000\r\n")
        event = b"data: " + json.dumps({"choices": [{"index": 0, "text": " x"}]}).encode() + b"\n\n"
        piece = event * ((1 << 20) // len(event))
        for _ in range(80):  # 80 MiB, past a plain answer's limit too
            connection.data_received(piece)
            if future.done():
                break
            assert len(connection.buffer) < 2 * len(piece)
            assert connection.kept <= 2 * TAIL_BYTES + len(piece) or not stream
        return connection, future

    connection, future = run(main())
    if stream:
        assert not future.done() and connection.first_at == 0.0
    else:
        with pytest.raises(ConnectionBroken, match="the answer is too large"):
            future.result()
        assert connection.kept > _MAX_BODY


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_the_first_token_is_found_after_keep_alive_comments_and_an_event_split_in_two(newline):
    """Events before the first token are read once each (a stream of keep-alive comments was parsed whole on every
    piece), and a token event split across reads is still found when it completes."""
    from asp_cli.integrate.http_wire import Connection

    ticks = iter(range(100))

    async def main():
        connection = Connection(lambda: float(next(ticks)))
        connection.connection_made(_Transport())
        connection.exchange(b"GET", stream=True, idle_timeout_s=60)
        connection.data_received(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        end = newline * 2
        for piece in [b": keep-alive" + end] * 3 + [b'data: {"choices": [], "usage": {}}' + end, b'data: {"choi',
                                                    b'ces": [{"index": 0, "text": " x"}]}' + newline]:
            connection.data_received(piece)
            assert connection.first_at is None
        connection.data_received(newline)
        return connection

    connection = run(main())
    skipped = 3 * len(b": keep-alive") + len(b'data: {"choices": [], "usage": {}}') + 4 * 2 * len(newline)
    assert connection.first_at == 0.0 and connection.scanned == skipped
    assert connection.parts[0].startswith(b": keep-alive")


def test_a_connection_not_made_in_time_is_said_with_its_seconds():
    """A connect that timed out was said as "no answer within the idle timeout" (the phrase the idle timeout had
    before it said its seconds): a loaded test machine's replay read that where it had waited 0.2 s."""
    from asp_cli.integrate.serving import _describe

    assert _describe(TimeoutError(), 60.0) == "no connection within 60 s"
    assert _describe(TimeoutError(), 0.5) == "no connection within 0.5 s"
    assert _describe(ConnectionRefusedError(111, "Connection refused"), 60.0) == "Connection refused"
