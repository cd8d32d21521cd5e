"""The guard in front of uvicorn's protocol (acp_agent.http.guard) against fakes, the episode log
(acp_agent._util.episodes), and the loopback Host check of asgi_app under any server.

The guard also runs under a real uvicorn in tests/e2e/test_http_bounds.py and every other HTTP e2e test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from acp_agent import Agent
from acp_agent._util.episodes import Episode, EpisodeFilter
from acp_agent.http import asgi_app
from acp_agent.http.guard import FLUSH_BYTES, BatchingTransport, Bounds, GuardedProtocol, guarded_protocol


class FakeLoop:
    def __init__(self) -> None:
        self.soon: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.soon.append(callback)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        return FakeTimer()

    def run_once(self) -> None:
        ready, self.soon = self.soon, []
        for callback in ready:
            callback()


class FakeTimer:
    def cancel(self) -> None:
        pass


class FakeTransport:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.protocol: Any = None

    def write(self, data: bytes) -> None:
        self.calls.append(bytes(data))

    def close(self) -> None:
        self.calls.append("close")

    def abort(self) -> None:
        self.calls.append("abort")

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class Inner:
    """Stands for uvicorn's protocol: records what reaches it."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.data: list[bytes] = []
        self.transport: Any = None
        self.lost = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


def batching() -> tuple[BatchingTransport, FakeTransport, FakeLoop]:
    transport, loop = FakeTransport(), FakeLoop()
    return BatchingTransport(transport, None, loop), transport, loop  # type: ignore[arg-type]


# -- batched writes ------------------------------------------------------------------------------------------------


def test_writes_of_one_pass_of_the_loop_go_out_in_one_write() -> None:
    batch, transport, loop = batching()
    batch.write(b"a")
    batch.write(b"")
    batch.writelines([b"b", b"c"])
    assert transport.calls == []
    assert len(loop.soon) == 1  # one flush scheduled, however many writes
    loop.run_once()
    assert transport.calls == [b"abc"]
    batch.write(b"d")
    loop.run_once()
    assert transport.calls == [b"abc", b"d"]


def test_a_large_batch_is_written_without_waiting_for_the_loop() -> None:
    batch, transport, loop = batching()
    batch.write(b"x" * (FLUSH_BYTES - 1))
    assert transport.calls == []
    batch.write(b"y")
    assert transport.calls == [b"x" * (FLUSH_BYTES - 1) + b"y"]
    loop.run_once()
    assert len(transport.calls) == 1


def test_close_writes_what_is_held_first_and_abort_drops_it() -> None:
    batch, transport, loop = batching()
    batch.write(b"last words")
    batch.close()
    assert transport.calls == [b"last words", "close"]
    batch, transport, loop = batching()
    batch.write(b"dropped")
    batch.abort()
    loop.run_once()
    assert transport.calls == ["abort"]


# -- request heads -------------------------------------------------------------------------------------------------


def guarded(monkeypatch: pytest.MonkeyPatch, **bounds: Any) -> tuple[GuardedProtocol, Inner, FakeTransport]:
    loop = FakeLoop()
    monkeypatch.setattr("acp_agent.http.guard.asyncio.get_running_loop", lambda: loop)
    cls = guarded_protocol(Inner, Bounds(**{"max_sockets": 10, **bounds}))  # type: ignore[arg-type]
    protocol = cls(config="passed through")
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    inner = protocol.inner
    assert isinstance(inner, Inner) and inner.kwargs == {"config": "passed through"}
    return protocol, inner, transport


def request(body: bytes = b"{}", *fields: bytes) -> bytes:
    return (b"POST /acp HTTP/1.1\r\nHost: x\r\n" + b"".join(fields)
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_pipelined_requests_split_anywhere_pass_through_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, transport = guarded(monkeypatch, max_head_bytes=200)
    body = b"\r\n\r\n" * 10  # a body that looks like head ends is skipped by its length
    stream = request(body) * 3
    for i in range(0, len(stream), 7):
        protocol.data_received(stream[i : i + 7])
    assert b"".join(inner.data) == stream
    assert transport.calls == []


def test_each_head_is_bounded_on_a_kept_alive_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, transport = guarded(monkeypatch, max_head_bytes=200)
    protocol.data_received(request())
    inner.transport.write(b"HTTP/1.1 202 Accepted\r\n\r\n")
    protocol.data_received(request(b"{}", b"X-Big: " + b"a" * 300 + b"\r\n"))
    assert inner.data == [request()]
    assert transport.calls == ["abort"]  # an answer was under way on this connection: no 431 in the middle of it
    protocol.data_received(request())
    assert inner.data == [request()]  # nothing more reaches uvicorn


def test_too_many_fields_get_431(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, transport = guarded(monkeypatch, max_header_fields=3)
    protocol.data_received(request(b"{}", b"A: 1\r\n", b"B: 2\r\n", b"C: 3\r\n"))
    assert inner.data == []
    assert transport.calls[0].startswith(b"HTTP/1.1 431 ") and transport.calls[1] == "close"


def test_after_an_upgrade_the_guard_steps_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, _ = guarded(monkeypatch, max_head_bytes=100)
    upgrade = b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    protocol.data_received(upgrade)
    frames = Inner()
    inner.transport.set_protocol(frames)  # what uvicorn does once the handshake is accepted
    protocol.data_received(b"\x81" + b"a" * 500)
    assert frames.data == [b"\x81" + b"a" * 500]
    assert inner.transport.get_protocol() is frames
    protocol.connection_lost(None)
    assert frames.lost


def test_sockets_past_the_limit_get_503_and_free_places_are_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = FakeLoop()
    monkeypatch.setattr("acp_agent.http.guard.asyncio.get_running_loop", lambda: loop)
    cls = guarded_protocol(Inner, Bounds(max_sockets=2))  # type: ignore[arg-type]
    first, second, third = cls(), cls(), cls()
    transports = [FakeTransport() for _ in range(3)]
    for protocol, transport in zip((first, second, third), transports, strict=True):
        protocol.connection_made(transport)  # type: ignore[arg-type]
    assert transports[2].calls[0].startswith(b"HTTP/1.1 503 ") and transports[2].calls[1] == "close"
    third.connection_lost(None)  # the refused one never held a place
    first.connection_lost(None)
    fourth = cls()
    fourth.connection_made(FakeTransport())  # type: ignore[arg-type]
    assert isinstance(fourth.inner, Inner) and fourth.inner.transport is not None


# -- one log line per episode --------------------------------------------------------------------------------------


def test_an_episode_logs_its_first_occurrence_and_counts_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr("acp_agent._util.episodes.time.monotonic", lambda: now[0])
    episode = Episode(quiet=10, report_every=60)
    logged = []
    for step in range(1000):
        now[0] = step * 0.01
        logged.append(episode.occur())
    assert logged[0] == (True, 0) and sum(flag for flag, _ in logged) == 1
    now[0] = 30.0  # after a quiet gap: a new episode, saying how many the last one held back
    assert episode.occur() == (True, 999)


def test_the_filter_keeps_one_record_without_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.episodes")
    one = EpisodeFilter(("accept failed",))
    log.addFilter(one)
    try:
        with caplog.at_level(logging.ERROR, logger="test.episodes"):
            for _ in range(500):
                try:
                    raise OSError(24, "Too many open files")
                except OSError:
                    log.exception("accept failed on %s", "socket")
            log.error("something else")
    finally:
        log.removeFilter(one)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and messages[0].startswith("accept failed on socket (repeats within")
    assert caplog.records[0].exc_info is None


# -- asgi_app on loopback checks Host under any server -------------------------------------------------------------


@pytest.mark.anyio
async def test_asgi_app_on_loopback_refuses_a_foreign_host() -> None:
    app = asgi_app(Agent())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        foreign = await client.get("/acp", headers={"host": "rebound.example", "accept": "text/event-stream"})
        local = await client.get("/acp", headers={"host": "localhost:8000", "accept": "text/event-stream"})
    assert foreign.status_code == 403
    assert local.status_code == 400  # past the Host check: no Acp-Connection-Id
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://10.0.0.5") as client:
        elsewhere = await client.get("/acp", headers={"host": "agent.example", "accept": "text/event-stream"})
    assert elsewhere.status_code == 400  # not served on loopback: allowed_hosts decides, and it is unset


class PausableTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def pause_reading(self) -> None:
        self.calls.append("pause")
        self.reading = False

    def resume_reading(self) -> None:
        self.calls.append("resume")
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading


def test_a_pause_undone_within_the_pass_costs_nothing_and_one_kept_takes_effect() -> None:
    transport, loop = PausableTransport(), FakeLoop()
    batch = BatchingTransport(transport, None, loop)  # type: ignore[arg-type]
    batch.pause_reading()
    assert not batch.is_reading()
    batch.resume_reading()
    loop.run_once()
    assert transport.calls == [] and batch.is_reading()
    batch.pause_reading()
    loop.run_once()
    assert transport.calls == ["pause"] and not batch.is_reading()
    batch.resume_reading()
    assert transport.calls == ["pause", "resume"] and batch.is_reading()


def test_heads_with_bare_lf_line_ends_are_followed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # HTTP/1.1 parsers accept a bare LF as a line end: such a head must not wait for a CRLF that never comes.
    protocol, inner, transport = guarded(monkeypatch, max_head_bytes=200, max_header_fields=2)
    first = b"POST /acp HTTP/1.1\nHost: x\nContent-Length: 4\n\n\n\n\n\n"
    protocol.data_received(first + first)
    assert b"".join(inner.data) == first + first and transport.calls == []
    protocol.data_received(b"GET /acp HTTP/1.1\nA: 1\nB: 2\nC: 3\n\n")
    assert transport.calls[0].startswith(b"HTTP/1.1 431 ")


# -- issue 39, finding 4: no header switches the bounds off ------------------------------------------------------


class UpgradingInner(Inner):
    """Stands for uvicorn's HTTP protocol: hands the socket to a WebSocket protocol on a real upgrade head only."""

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if b"connection: upgrade" in data.lower():
            self.transport.set_protocol(Inner())


def test_a_head_naming_upgrade_without_an_upgrade_keeps_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, _, transport = guarded(monkeypatch, max_header_fields=3)
    protocol.data_received(b"GET /nowhere HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")  # served as a plain 404
    protocol.data_received(request(b"{}", b"A: 1\r\n", b"B: 2\r\n", b"C: 3\r\n"))
    assert transport.calls[0].startswith(b"HTTP/1.1 431 ")


def test_a_real_upgrade_in_the_same_read_as_its_frames_hands_them_over(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = FakeLoop()
    monkeypatch.setattr("acp_agent.http.guard.asyncio.get_running_loop", lambda: loop)
    protocol = guarded_protocol(UpgradingInner, Bounds(max_sockets=10, max_head_bytes=100))()  # type: ignore[arg-type]
    protocol.connection_made(FakeTransport())  # type: ignore[arg-type]
    upgrade = b"GET /acp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    protocol.data_received(upgrade + b"\x81" + b"a" * 500)  # frames past the head size: not a head
    http = protocol.inner
    assert isinstance(http, Inner) and not isinstance(http, UpgradingInner)
    assert http.data == [b"\x81" + b"a" * 500]


def chunked(*chunks: bytes) -> bytes:
    body = b"".join(f"{len(c):x};ext=1\r\n".encode() + c + b"\r\n" for c in chunks) + b"0\r\nX-Trailer: t\r\n\r\n"
    return b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body


def test_chunked_bodies_are_followed_and_the_next_head_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, transport = guarded(monkeypatch, max_head_bytes=200, max_header_fields=3)
    stream = chunked(b"\r\n\r\n" * 3, b"x" * 300) + request() + chunked(b"{}")
    for i in range(0, len(stream), 5):
        protocol.data_received(stream[i : i + 5])
    assert b"".join(inner.data) == stream and transport.calls == []
    protocol.data_received(request(b"{}", b"A: 1\r\n", b"B: 2\r\n", b"C: 3\r\n"))
    assert transport.calls[0].startswith(b"HTTP/1.1 431 ")


def test_bodies_over_the_limit_or_of_unknown_length_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    protocol, inner, transport = guarded(monkeypatch, max_body_bytes=10)
    protocol.data_received(request(b"x" * 11))
    assert inner.data == [] and transport.calls[0].startswith(b"HTTP/1.1 413 ")
    protocol, inner, transport = guarded(monkeypatch, max_body_bytes=10)
    protocol.data_received(chunked(b"x" * 6, b"y" * 6))
    assert inner.data == [] and transport.calls[0].startswith(b"HTTP/1.1 413 ")
    protocol, inner, transport = guarded(monkeypatch)
    protocol.data_received(b"POST /acp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")
    assert inner.data == [] and transport.calls[0].startswith(b"HTTP/1.1 400 ")


def test_a_body_has_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    timers: list[tuple[float, Callable[[], None]]] = []

    class Timers(FakeLoop):
        def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
            timers.append((delay, callback))
            return FakeTimer()

    loop = Timers()
    monkeypatch.setattr("acp_agent.http.guard.asyncio.get_running_loop", lambda: loop)
    protocol = guarded_protocol(Inner, Bounds(max_sockets=10, head_timeout=5, body_timeout=7))()  # type: ignore[arg-type]
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.data_received(b"POST /acp HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nab")
    assert [delay for delay, _ in timers] == [5, 7]  # the head's deadline, then the body's
    timers[-1][1]()
    assert transport.calls == ["abort"]
