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

    Every message gets the next number of the stream (its SSE ``id``), and the last ``keep`` messages taken stay in
    a ring, so a client that lost its stream reconnects with ``Last-Event-ID`` and `rewind` queues again what
    followed (per-stream cursors). ``on_queued`` / ``on_taken`` are told the byte counts, so the connection can count
    what its clients have not read yet.
    """

    def __init__(self, on_queued: Callable[[int], None], on_taken: Callable[[int], None], keep: int = 0) -> None:
        self._queue: deque[tuple[int, bytes]] = deque()
        self._sent: deque[tuple[int, bytes]] = deque(maxlen=keep)
        self._next = 1
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
        """Queue one message (its JSON text, no newline) under the stream's next number."""
        if self._finished:
            return
        self._queue.append((self._next, line))
        self._next += 1
        self._on_queued(len(line))
        self._data.set()

    def acquire(self, *, takeover: bool = False) -> object | None:
        """Attach a receiver; ``None`` when one is attached already (unless ``takeover``: a client reconnecting
        with ``Last-Event-ID`` replaces a stream the server has not yet noticed is dead) or the stream ended."""
        if (self._receiver is not None and not takeover) or self._finished:
            return None
        self._receiver = token = object()
        self._data.set()  # a replaced receiver's take() returns
        return token

    def release(self, token: object) -> None:
        """Detach the receiver holding ``token``."""
        if self._receiver is token:
            self._receiver = None
            self._data.set()

    def rewind(self, cursor: int) -> bool:
        """Queue again the messages numbered after ``cursor`` (the last one the client got); ``False`` if some of
        them are no longer kept (the client resumes its sessions instead)."""
        while self._queue and self._queue[0][0] <= cursor:  # queued again earlier, and got since
            self._on_taken(len(self._queue.popleft()[1]))
        taken = self._sent
        last_taken = taken[-1][0] if taken else (self._queue[0][0] - 1 if self._queue else self._next - 1)
        if cursor >= last_taken:
            return cursor < self._next
        if not taken or cursor < taken[0][0] - 1:
            return False
        again: list[tuple[int, bytes]] = []
        while taken and taken[-1][0] > cursor:
            again.append(taken.pop())
        for item in again:  # newest first: each goes to the front
            self._queue.appendleft(item)
            self._on_queued(len(item[1]))
        self._data.set()
        return True

    async def take(self, token: object) -> list[tuple[int, bytes]] | None:
        """Wait for messages and take all of them, with their numbers; ``None`` once the stream ended (or ``token``
        was released or replaced)."""
        while not self._queue or self._receiver is not token:
            if self._finished or self._receiver is not token:
                return None
            await self._data.wait()
            self._data = anyio.Event()
        taken = list(self._queue)
        self._queue.clear()
        self._sent.extend(taken)
        self._on_taken(sum(len(line) for _, line in taken))
        return taken

    def finish(self) -> None:
        """No more messages: the receiver gets what is queued, then the stream ends."""
        self._finished = True
        self._data.set()

    def abort(self) -> None:
        """End the stream now, dropping what is queued."""
        self._finished = True
        if self._queue:
            dropped = sum(len(line) for _, line in self._queue)
            self._queue.clear()
            self._on_taken(dropped)
        self._sent.clear()
        self._data.set()
