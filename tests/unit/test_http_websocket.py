"""The remote transport's per-message plumbing: the runtime's inbox, and the WebSocket protocol's batched writes and
direct text framing (acp_agent.http.streams, acp_agent.http.websocket).

The protocol itself runs under a real uvicorn in the e2e tests (tests/e2e/test_http_*.py); here its pieces are checked
against fakes and against the ``websockets`` encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from websockets.frames import Frame, Opcode

from acp_agent.http.streams import MessageInbox
from acp_agent.http.websocket import FLUSH_BYTES, BatchingTransport, text_frame

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
