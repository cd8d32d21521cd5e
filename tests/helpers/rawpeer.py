"""A raw JSON-lines peer for connection tests: write exact bytes, read parsed lines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson

from acp_agent._wire.connection import Connection
from acp_agent.testing.streams import MemoryByteReceiveStream, MemoryByteSendStream, byte_pipe


class RawPeer:
    """The far end of a :class:`Connection`, speaking raw bytes."""

    def __init__(self, send: MemoryByteSendStream, receive: MemoryByteReceiveStream) -> None:
        self._send = send
        self._receive = receive
        self._buffer = b""

    async def send_bytes(self, data: bytes) -> None:
        await self._send.send(data)

    async def send(self, message: Any) -> None:
        await self._send.send(orjson.dumps(message) + b"\n")

    async def eof(self) -> None:
        await self._send.aclose()

    async def recv(self, timeout: float = 5.0) -> Any:
        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                self._buffer += await self._receive.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return orjson.loads(line)

    async def nothing(self, delay: float = 0.1) -> None:
        """Assert that nothing arrives within ``delay`` seconds."""
        with anyio.move_on_after(delay):
            got = await self.recv(delay * 2)
            raise AssertionError(f"unexpected message: {got!r}")


@asynccontextmanager
async def connected(
    setup: Callable[[Connection], None] | None = None, **options: Any
) -> AsyncIterator[tuple[RawPeer, Connection]]:
    """A running :class:`Connection` and the raw peer on its other end."""
    in_send, in_receive = byte_pipe()
    out_send, out_receive = byte_pipe()
    connection = Connection(in_receive, out_send, **options)
    if setup is not None:
        setup(connection)
    peer = RawPeer(in_send, out_receive)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        yield peer, connection
        connection.close()
