"""The remote transport's per-message plumbing: the runtime's inbox (acp_agent.http.streams)."""

from __future__ import annotations

import anyio
import pytest

from acp_agent.http.streams import MessageInbox

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
