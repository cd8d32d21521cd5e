"""The remote transport's per-message plumbing: the runtime's inbox, and the WebSocket protocol's batched writes and
direct text framing (acp_agent.http.streams, acp_agent.http.websocket).

The protocol also runs under a real uvicorn in the e2e tests (tests/e2e/test_http_*.py); here it is driven by a
``websockets`` client protocol over a fake transport, and its pieces are checked against fakes and the ``websockets``
encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
import uvicorn
from uvicorn.server import ServerState
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Frame, Opcode
from websockets.uri import parse_uri

from acp_agent.http.app import WEBSOCKET_SEND_TEXTS
from acp_agent.http.streams import MessageInbox
from acp_agent.http.websocket import (
    FLUSH_BYTES,
    MAX_QUEUED,
    RESUME_QUEUED,
    AcpWebSocketProtocol,
    BatchingTransport,
    text_frame,
)

pytestmark = pytest.mark.anyio


# -- MessageInbox ----------------------------------------------------------------------------------


async def test_inbox_hands_lines_over_in_order_and_in_pieces() -> None:
    inbox = MessageInbox()
    await inbox.put(b'{"a":1}\n')
    await inbox.put(b'{"b":2}\n')
    assert await inbox.receive(3) == b'{"a'
    assert await inbox.receive() == b'":1}\n'
    assert await inbox.receive() == b'{"b":2}\n'


async def test_inbox_reader_waits_for_a_line() -> None:
    inbox = MessageInbox()
    got: list[bytes] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            got.append(await inbox.receive())

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        await inbox.put(b"x\n")
    assert got == [b"x\n"]


async def test_closed_inbox_gives_what_was_queued_then_ends() -> None:
    inbox = MessageInbox()
    await inbox.put(b"1\n")
    inbox.close()
    with pytest.raises(anyio.ClosedResourceError):
        await inbox.put(b"2\n")
    assert await inbox.receive() == b"1\n"
    with pytest.raises(anyio.EndOfStream):
        await inbox.receive()


async def test_close_wakes_a_waiting_reader() -> None:
    inbox = MessageInbox()
    ended = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            with pytest.raises(anyio.EndOfStream):
                await inbox.receive()
            ended.set()

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        inbox.close()
    assert ended.is_set()


async def test_full_inbox_holds_the_writer_until_a_line_is_read() -> None:
    inbox = MessageInbox(max_queued=2)
    await inbox.put(b"1\n")
    await inbox.put(b"2\n")
    put: list[bytes] = []
    async with anyio.create_task_group() as tg:

        async def write() -> None:
            await inbox.put(b"3\n")
            put.append(b"3\n")

        tg.start_soon(write)
        await anyio.wait_all_tasks_blocked()
        assert put == []  # waiting for room
        assert await inbox.receive() == b"1\n"
    assert put == [b"3\n"]
    assert [await inbox.receive(), await inbox.receive()] == [b"2\n", b"3\n"]


@pytest.mark.parametrize("close", ["close", "aclose"])
async def test_closing_the_inbox_releases_a_waiting_writer(close: str) -> None:
    inbox = MessageInbox(max_queued=1)
    await inbox.put(b"1\n")
    refused = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def write() -> None:
            with pytest.raises(anyio.ClosedResourceError):
                await inbox.put(b"2\n")
            refused.set()

        tg.start_soon(write)
        await anyio.wait_all_tasks_blocked()
        if close == "close":
            inbox.close()
        else:
            await inbox.aclose()
    assert refused.is_set()
    if close == "aclose":  # the reader is gone too: nothing more is handed over
        with pytest.raises(anyio.EndOfStream):
            await inbox.receive()


async def test_a_cancelled_read_loses_nothing() -> None:
    inbox = MessageInbox()
    with anyio.move_on_after(0.01):
        await inbox.receive()
    await inbox.put(b"after\n")
    assert await inbox.receive() == b"after\n"


# -- batched writes --------------------------------------------------------------------------------


class FakeLoop:
    def __init__(self) -> None:
        self.soon: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.soon.append(callback)

    def run_once(self) -> None:
        ready, self.soon = self.soon, []
        for callback in ready:
            callback()


class FakeTransport:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def write(self, data: bytes) -> None:
        self.calls.append(bytes(data))

    def close(self) -> None:
        self.calls.append("close")

    def abort(self) -> None:
        self.calls.append("abort")

    def is_closing(self) -> bool:
        return False


def batching() -> tuple[BatchingTransport, FakeTransport, FakeLoop]:
    transport, loop = FakeTransport(), FakeLoop()
    return BatchingTransport(transport, loop), transport, loop  # type: ignore[arg-type]


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
    loop.run_once()
    assert transport.calls == [b"abc", b"d"]


def test_a_large_batch_is_written_without_waiting_for_the_loop() -> None:
    batch, transport, loop = batching()
    batch.write(b"x" * (FLUSH_BYTES - 1))
    assert transport.calls == []
    batch.write(b"y")
    assert transport.calls == [b"x" * (FLUSH_BYTES - 1) + b"y"]
    loop.run_once()  # the scheduled flush finds nothing held
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


def test_other_calls_reach_the_transport() -> None:
    batch, transport, _ = batching()
    assert batch.is_closing() is False
    assert batch.transport is transport


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 70000])
def test_text_frames_match_the_websockets_encoder(size: int) -> None:
    payload = ("é" * size).encode()[:size]
    header, body = text_frame(payload)
    assert header + body == Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])


# -- the protocol, driven by a websockets client over a fake transport (uvicorn runs on asyncio only) ------------


class RecordingTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.pauses = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False

    def set_protocol(self, protocol: Any) -> None:
        pass


async def _serve_one(app: Any, *, deflate: bool) -> tuple[Any, RecordingTransport, Any]:
    """An AcpWebSocketProtocol running ``app`` past a websockets client's handshake: (protocol, transport, client)."""
    config = uvicorn.Config(app, ws=AcpWebSocketProtocol, ws_per_message_deflate=deflate, lifespan="off",
                            log_config=None)
    config.load()
    protocol = AcpWebSocketProtocol(config=config, server_state=ServerState(), app_state={})
    transport = RecordingTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    client = ClientProtocol(parse_uri("ws://127.0.0.1:8000/acp"),
                            extensions=[ClientPerMessageDeflateFactory()] if deflate else None)
    client.send_request(client.connect())
    protocol.data_received(b"".join(client.data_to_send()))
    for _ in range(20):
        await anyio.sleep(0)
    return protocol, transport, client


def _received(transport: RecordingTransport, client: Any) -> list[str]:
    client.receive_data(b"".join(call for call in transport.calls if isinstance(call, bytes)))
    transport.calls.clear()
    return [event.data.decode() for event in client.events_received() if getattr(event, "opcode", None) is Opcode.TEXT]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("deflate", [False, True])
async def test_protocol_offers_the_batch_send_and_frames_it(deflate: bool) -> None:
    offered: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        offered.append(WEBSOCKET_SEND_TEXTS in scope["extensions"])
        await send({"type": "websocket.accept"})
        await send({"type": WEBSOCKET_SEND_TEXTS, "texts": [b'{"a":1}', "é".encode(), b"bad \xff", b"x" * 70000]})
        await send({"type": "websocket.send", "text": "one"})
        while (await receive())["type"] != "websocket.disconnect":
            pass

    protocol, transport, client = await _serve_one(app, deflate=deflate)
    assert offered == [True]
    # The handshake answer, then every frame of the batch; with deflate negotiated uvicorn frames (and compresses) them.
    assert _received(transport, client) == ['{"a":1}', "é", "bad \ufffd", "x" * 70000, "one"]
    assert bool(protocol.conn.extensions) is deflate
    protocol.connection_lost(None)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_protocol_pauses_reading_only_when_messages_pile_up() -> None:
    taken: list[str] = []
    go = anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        await go.wait()
        while (event := await receive())["type"] == "websocket.receive":
            taken.append(event["text"])

    protocol, transport, client = await _serve_one(app, deflate=False)
    assert _received(transport, client) == []  # the handshake answer
    for n in range(MAX_QUEUED - 1):
        client.send_text(str(n).encode())
    protocol.data_received(b"".join(client.data_to_send()))
    assert not transport.paused  # fewer than MAX_QUEUED wait: the socket is still read
    for n in range(MAX_QUEUED - 1, 40):
        client.send_text(str(n).encode())
    protocol.data_received(b"".join(client.data_to_send()))
    assert transport.paused and transport.pauses == 1
    go.set()
    while len(taken) < 40 - RESUME_QUEUED:
        await anyio.sleep(0)
    assert not transport.paused
    protocol.connection_lost(None)
    for _ in range(5):
        await anyio.sleep(0)
    assert taken == [str(n) for n in range(40)]


def test_the_batching_protocol_is_used_only_on_the_uvicorn_it_was_tested_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from acp_agent.http.server import TESTED_UVICORN, websocket_protocol
    from acp_agent.http.websocket import AcpWebSocketProtocol

    low, high = TESTED_UVICORN
    monkeypatch.setattr(uvicorn, "__version__", f"{low[0]}.{low[1]}.0")
    assert websocket_protocol() is AcpWebSocketProtocol
    monkeypatch.setattr(uvicorn, "__version__", f"{high[0]}.{high[1] + 1}.0")
    assert websocket_protocol() == "auto"  # its internals may have moved: uvicorn's own protocol
    monkeypatch.setattr(uvicorn, "__version__", "0.29.0")
    assert websocket_protocol() == "auto"
