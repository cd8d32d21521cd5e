"""The byte streams a remote connection's runtime talks through, and the queues behind SSE streams.

A runtime reads and writes newline-delimited JSON on anyio byte streams, exactly as on stdio.
Over HTTP and WebSocket the transport hands it whole messages instead: `MessageInbox`
turns them into a byte stream (one message a line), `OutputStream` hands the lines the
runtime writes to its connection, and a `Mailbox` holds the lines waiting for the client
that reads one SSE stream.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream

__all__ = ["Mailbox", "MessageInbox", "OutputStream"]


class MessageInbox(ByteReceiveStream):
    """The runtime's input: one JSON message a line, put by the transport, read as bytes.

    A queue of at most ``max_queued`` lines with one reader (the runtime); each ``put`` and
    ``receive`` is a checkpoint, as on an anyio memory object stream, without its per-wait
    bookkeeping (a message or two per turn on every connection).
    """

    def __init__(self, max_queued: int = 64) -> None:
        self._queue: deque[bytes] = deque()
        self._max_queued = max_queued
        self._ended = False  # no more lines will be put
        self._closed = False  # the reader is gone too
        self._data: anyio.Event | None = None  # set when a line arrives or the input ends
        self._room: anyio.Event | None = None  # set when a line was taken or the inbox closed
        self._item = memoryview(b"")

    async def put(self, line: bytes) -> None:
        """Queue one message line (it must end with a newline); waits while the queue is full.

        Raises ``anyio.ClosedResourceError`` once the inbox was closed.
        """
        await anyio.lowlevel.checkpoint()
        while True:
            if self._ended:
                raise anyio.ClosedResourceError
            if len(self._queue) < self._max_queued:
                break
            if self._room is None:
                self._room = anyio.Event()
            await self._room.wait()
        self._queue.append(line)
        if self._data is not None:
            self._data.set()
            self._data = None

    def close(self) -> None:
        """End the input: the runtime reads what was queued, then end of stream."""
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._data is not None:
            self._data.set()
            self._data = None
        if self._room is not None:
            self._room.set()
            self._room = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to ``max_bytes`` of the queued lines; ``anyio.EndOfStream`` once closed and read."""
        if not self._item:
            if self._queue and not self._closed:
                await anyio.lowlevel.checkpoint()
            while not self._queue or self._closed:
                if self._ended or self._closed:
                    raise anyio.EndOfStream
                if self._data is None:
                    self._data = anyio.Event()
                await self._data.wait()
            self._item = memoryview(self._queue.popleft())
            if self._room is not None:
                self._room.set()
                self._room = None
        data, self._item = self._item[:max_bytes], self._item[max_bytes:]
        return bytes(data)

    async def aclose(self) -> None:
        """Close both ends."""
        self._ended = self._closed = True
        self._queue.clear()
        self._wake()


class OutputStream(ByteSendStream):
    """The runtime's output: each chunk it writes is handed to ``write`` as a list of message lines.

    ``write`` routes or sends them (or drops them once the client is gone or too slow)
    and is where the runtime's writer waits while clients are behind.
    """

    def __init__(self, write: Callable[[list[bytes]], Awaitable[None]]) -> None:
        self._write = write

    async def send(self, item: bytes) -> None:
        """Hand the lines of ``item`` over, in order."""
        lines = item.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        await self._write([line for line in lines if line])

    async def aclose(self) -> None:
        """Nothing to release: the connection owns the transport."""


class Mailbox:
    """Messages for one SSE stream, queued until the (single) client reading it takes them.

    ``on_queued`` / ``on_taken`` are told the byte counts, so the connection can count what its
    clients have not read yet.
    """

    def __init__(self, on_queued: Callable[[int], None], on_taken: Callable[[int], None]) -> None:
        self._queue: deque[bytes] = deque()
        self._on_queued = on_queued
        self._on_taken = on_taken
        self._data = anyio.Event()
        self._receiver: object | None = None
        self._finished = False

    @property
    def has_receiver(self) -> bool:
        """Whether a client stream is attached."""
        return self._receiver is not None

    @property
    def queued(self) -> bool:
        """Whether messages wait to be read."""
        return bool(self._queue)

    @property
    def finished(self) -> bool:
        """True once no more messages will come."""
        return self._finished

    def push(self, line: bytes) -> None:
        """Queue one message (its JSON text, no newline)."""
        if self._finished:
            return
        self._queue.append(line)
        self._on_queued(len(line))
        self._data.set()

    def acquire(self) -> object | None:
        """Attach a receiver; ``None`` when one is attached already (or the stream ended)."""
        if self._receiver is not None or self._finished:
            return None
        self._receiver = token = object()
        return token

    def release(self, token: object) -> None:
        """Detach the receiver holding ``token``."""
        if self._receiver is token:
            self._receiver = None
            self._data.set()

    async def take(self, token: object) -> list[bytes] | None:
        """Wait for messages and take all of them; ``None`` once the stream ended (or ``token`` was released)."""
        while not self._queue:
            if self._finished or self._receiver is not token:
                return None
            await self._data.wait()
            self._data = anyio.Event()
        taken = list(self._queue)
        self._queue.clear()
        self._on_taken(sum(len(line) for line in taken))
        return taken

    def finish(self) -> None:
        """No more messages: the receiver gets what is queued, then the stream ends."""
        self._finished = True
        self._data.set()

    def abort(self) -> None:
        """End the stream now, dropping what is queued."""
        self._finished = True
        if self._queue:
            dropped = sum(len(line) for line in self._queue)
            self._queue.clear()
            self._on_taken(dropped)
        self._data.set()
