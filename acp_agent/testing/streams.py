"""In-memory byte pipes, for connecting a client and an agent inside one process."""

from __future__ import annotations

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["MemoryByteReceiveStream", "MemoryByteSendStream", "byte_pipe"]


class MemoryByteSendStream(ByteSendStream):
    """The writing end of [`byte_pipe`][acp_agent.testing.byte_pipe]."""

    def __init__(self, send: MemoryObjectSendStream[bytes]) -> None:
        self._send = send

    async def send(self, item: bytes) -> None:
        """Send bytes to the reading end."""
        await self._send.send(bytes(item))

    async def send_eof(self) -> None:
        """Close the pipe for writing."""
        await self._send.aclose()

    async def aclose(self) -> None:
        """Close the pipe for writing."""
        await self._send.aclose()


class MemoryByteReceiveStream(ByteReceiveStream):
    """The reading end of [`byte_pipe`][acp_agent.testing.byte_pipe]."""

    def __init__(self, receive: MemoryObjectReceiveStream[bytes]) -> None:
        self._receive = receive
        self._pending = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Receive up to ``max_bytes`` bytes; raises ``EndOfStream`` when the writer closed."""
        if not self._pending:
            self._pending = await self._receive.receive()
        data, self._pending = self._pending[:max_bytes], self._pending[max_bytes:]
        return data

    async def aclose(self) -> None:
        """Close the reading end."""
        await self._receive.aclose()


def byte_pipe(buffer: int = 256) -> tuple[MemoryByteSendStream, MemoryByteReceiveStream]:
    """A one-way in-memory byte pipe (``buffer`` writes may be pending before send waits)."""
    send, receive = anyio.create_memory_object_stream[bytes](buffer)
    return MemoryByteSendStream(send), MemoryByteReceiveStream(receive)
