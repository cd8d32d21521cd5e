"""uvicorn's sans-I/O WebSocket protocol, made cheaper per message for many busy connections.

Under load most of a WebSocket server's own work is per message, not per byte: uvicorn's
protocol writes every frame to the socket on its own (a ``send`` system call each, though an
agent's turn sends several messages at once), frames it through the general ``websockets``
encoder, and pauses reading the socket after every incoming message until the application
takes it (two ``epoll_ctl`` calls a message). `AcpWebSocketProtocol` keeps uvicorn's
protocol (handshake, keepalive pings, closing handshake, limits) and changes only that:

- frames written in one pass of the event loop go to the socket in one write (at most
  ``FLUSH_BYTES`` held at a time, and a close or abort writes what is held first);
- the application sends a batch of messages in one event (the ``acp.websocket.send_texts``
  extension, `WEBSOCKET_SEND_TEXTS`), each framed here directly
  (no extension is negotiated: the server turns per-message deflate off), after the same
  checks as before (the connection is open, the transport has room, else the application waits);
- reading pauses once ``MAX_QUEUED`` messages wait for the application, and resumes when it has
  taken all but ``RESUME_QUEUED`` of them, so a client that floods still stops being read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from .app import WEBSOCKET_SEND_TEXTS

if TYPE_CHECKING:  # uvicorn runs on asyncio; the library itself awaits through anyio only
    import asyncio

__all__ = ["FLUSH_BYTES", "MAX_QUEUED", "RESUME_QUEUED", "AcpWebSocketProtocol", "BatchingTransport"]

FLUSH_BYTES: Final = 64 * 1024
"""Bytes held for one write before they are written at once."""
MAX_QUEUED: Final = 16
"""Incoming messages waiting for the application before the socket stops being read."""
RESUME_QUEUED: Final = 4
"""Reading resumes once no more than this many messages wait."""

_TEXT_SHORT: Final = struct.Struct("!BB")
_TEXT_MEDIUM: Final = struct.Struct("!BBH")
_TEXT_LONG: Final = struct.Struct("!BBQ")


class BatchingTransport:
    """A transport that holds what is written during one pass of the event loop and writes it once.

    Everything but ``write``, ``writelines``, ``close`` and ``abort`` goes to the wrapped transport.
    """

    __slots__ = ("_loop", "_pending", "_scheduled", "_size", "transport")

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport: Any = transport
        """The socket's own transport."""
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0
        self._scheduled = False

    def write(self, data: bytes) -> None:
        """Hold ``data`` for the next write (at once past ``FLUSH_BYTES``)."""
        if not data:
            return
        self._pending.append(data)
        self._size += len(data)
        if self._size >= FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush_soon)

    def writelines(self, chunks: Any) -> None:
        """Hold each chunk, in order."""
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Write what is held now."""
        pending = self._pending
        if not pending:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._size = 0
        self.transport.write(data)

    def _flush_soon(self) -> None:
        self._scheduled = False
        self.flush()

    def close(self) -> None:
        """Write what is held, then close (the transport sends its buffer first)."""
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is held."""
        self._pending.clear()
        self._size = 0
        self.transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def text_frame(payload: bytes) -> tuple[bytes, bytes]:
    """The header and payload of one unmasked, final text frame (a server's)."""
    size = len(payload)
    if size < 126:
        return _TEXT_SHORT.pack(0x81, size), payload
    if size < 65536:
        return _TEXT_MEDIUM.pack(0x81, 126, size), payload
    return _TEXT_LONG.pack(0x81, 127, size), payload


class AcpWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with batched writes, direct text framing and
    reading paused by queue depth (see the module docstring)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Wrap the socket's transport so writes are batched."""
        super().connection_made(BatchingTransport(transport, self.loop))  # type: ignore[arg-type]

    def send_receive_event_to_app(self) -> None:
        """Queue the message as uvicorn does; pause reading only once ``MAX_QUEUED`` wait."""
        paused = self.read_paused
        self.read_paused = True  # the base class pauses reading unless this is set
        try:
            super().send_receive_event_to_app()
        finally:
            self.read_paused = paused
        if not paused and self.queue.qsize() >= MAX_QUEUED and not self.transport.is_closing():
            self.read_paused = True
            self.transport.pause_reading()

    async def receive(self) -> Any:
        """The next event for the application; reading resumes once few messages wait."""
        message = await self.queue.get()
        if self.read_paused and self.queue.qsize() <= RESUME_QUEUED:
            self.read_paused = False
            self.transport.resume_reading()
        return message

    def handle_connect(self, event: Any) -> None:
        """Accept the handshake as uvicorn does, offering the batch send to the application."""
        super().handle_connect(event)
        scope: Any = getattr(self, "scope", None)
        if scope is not None:  # the application has not run yet: its task starts on the next pass of the loop
            scope["extensions"][WEBSOCKET_SEND_TEXTS] = {}

    async def send(self, message: Any) -> None:
        """Send an application event; text messages on an open connection are framed here."""
        kind = message["type"]
        if kind == WEBSOCKET_SEND_TEXTS:
            texts: list[bytes] = message["texts"]
        elif kind == "websocket.send" and message.get("bytes") is None and message.get("text") is not None:
            texts = [message["text"].encode()]
        else:
            await super().send(message)
            return
        await self.writable.wait()
        if self.disconnected:
            raise ClientDisconnected()
        if not self.handshake_complete or self.close_sent or self.initial_response is not None or self.conn.extensions:
            # uvicorn's own path: its errors for a send out of turn, its framing when an extension was negotiated.
            for text in texts:
                await super().send({"type": "websocket.send", "text": text.decode("utf-8", "replace")})
            return
        if self.conn.state is not State.OPEN:
            raise ClientDisconnected()
        write: Callable[[bytes], None] = self.transport.write
        for text in texts:
            if not text.isascii():
                text = text.decode("utf-8", "replace").encode()  # a text frame carries valid UTF-8 only
            header, payload = text_frame(text)
            write(header)
            write(payload)
