"""Newline-delimited JSON framing: a size-limited line reader and the one ordered writer.

The reader never buffers more than ``max_bytes`` of a single line: an oversized line is
discarded as it streams past and reported once, and reading resumes after its newline.
The writer is the only place bytes leave the process; everything it is handed goes out
in exactly the order it was handed over, batched into few large writes.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Final

import anyio
import anyio.lowlevel
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream

__all__ = [
    "DEFAULT_HIGH_WATER_BYTES", "DEFAULT_MAX_MESSAGE_BYTES", "OVERSIZED", "LineReader", "Oversized", "TextFrame",
    "Writer",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES: Final = 32 * 1024 * 1024
"""Default limit for one incoming message (32 MiB, as in the TypeScript SDK)."""

DIRECT_WRITE_BYTES: Final = 64 * 1024
"""Most queued bytes `Writer.flush_now` writes itself (a pipe's default buffer): more is left to the
writer task, so a client slow to read never makes it copy big remainders."""

DEFAULT_HIGH_WATER_BYTES: Final = 4 * 1024 * 1024
"""Default number of queued output bytes above which `Writer.backpressure` waits."""

_READ_SIZE: Final = 256 * 1024
_SEPARATOR: Final = "\x80"
"""Joins a run of ASCII texts into one string to encode: its UTF-8 bytes (``\\xc2\\x80``) never occur in the
JSON of ASCII text, so they mark exactly where each text's JSON string ends."""
_SEPARATOR_BYTES: Final = _SEPARATOR.encode()


class _Lines(bytes):
    """A sealed run of texts: the lines of ``messages`` messages in one queued item (each counts toward the mark)."""

    messages: int


class TextFrame:
    """The framing of one stream of text messages: the bytes before a text's JSON string and after it.

    `Writer.send_text` queues a text with its frame and leaves the framing to the batch: a run
    of texts of one frame is encoded in one call, to exactly the lines framing each text would give.
    """

    __slots__ = ("between", "head", "size", "tail")

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head = head
        """The bytes before the text's JSON string."""
        self.tail = tail
        """The bytes after it (ending with the newline)."""
        self.between = b'"' + tail + head + b'"'  # from the end of one text's JSON string to the start of the next
        self.size = len(head) + len(tail) + 2  # a line's bytes besides its text's (counted while queued)


class Oversized:
    """Marker yielded by `LineReader` in place of a line that exceeded the limit."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OVERSIZED"


OVERSIZED: Final = Oversized()


class LineReader:
    """Split a byte stream into lines, enforcing a per-line size limit.

    Yields each non-blank line without its terminator (``\\n`` or ``\\r\\n``), or
    `OVERSIZED` for a line longer than ``max_bytes``. A final line without a
    newline is still yielded at end of stream.
    """

    def __init__(self, stream: ByteReceiveStream, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._stream = stream
        self._max = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes | Oversized]:
        buf = bytearray()
        scan = 0  # bytes of ``buf`` already known to hold no newline
        discarding = False
        while True:
            try:
                data = await self._stream.receive(_READ_SIZE)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            if discarding:
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                discarding = False
                data = data[nl + 1 :]
            elif not buf and data.find(b"\n") == len(data) - 1 and len(data) <= self._max:
                # The usual read: exactly one whole line. Yielded from ``data`` without the buffer's copies.
                line = _clean(data[:-1])
                if line:
                    yield line
                continue
            buf += data
            start = 0
            while True:
                nl = buf.find(b"\n", max(start, scan))
                if nl < 0:
                    break
                if nl - start > self._max:
                    yield OVERSIZED
                else:
                    line = _clean(bytes(buf[start:nl]))
                    if line:
                        yield line
                start = nl + 1
                scan = start
            if start:
                del buf[:start]
                scan = 0
            scan = len(buf)
            if len(buf) > self._max:
                # The line is already too long: drop what we have and skip to its end.
                buf.clear()
                scan = 0
                discarding = True
                yield OVERSIZED
        if not discarding:
            line = _clean(bytes(buf))
            if line:
                yield line


_WHITESPACE: Final = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips


def _clean(line: bytes) -> bytes:
    if line.endswith(b"\r"):
        line = line[:-1]
    if line and line[0] not in _WHITESPACE:
        return line  # a message starts with "{" or "[": no copy to find it is not blank
    return line if line.strip() else b""


class Writer:
    """The single, ordered exit for every message the process sends.

    `send_nowait` enqueues synchronously, so the order of calls is the order on
    the wire no matter which task makes them. `send` additionally waits while
    more than ``high_water`` messages or ``high_water_bytes`` bytes are queued, which
    pushes back on producers when the peer stops reading (a stalled client therefore
    holds at most about ``high_water_bytes`` plus one message per producer here).
    `run` drains the queue, joining queued messages into one write, and lets
    producers go on as soon as it has taken a batch, so producing and writing overlap.
    A stream that can write without waiting (``write_now``) lets the queue skip the
    writer task: `flush_now` at the end of a turn, and a producer over the mark
    first writing its batch itself (`backpressure`). A streamed text (`send_text`) joins the
    open run of texts of its frame, framed when the run is sealed: by the next other message, a batch or a flush.
    The small message mark (256) is what makes a fast producer hand over to the writer
    often enough for that overlap; with thousands queued before each write, the client
    waited on the agent and the agent on the pipe in turn (`make bench`: 0.5x vs 1.0x of
    the raw orjson agent's stream rate).
    """

    def __init__(self, stream: ByteSendStream, *, high_water: int = 256,
                 high_water_bytes: int = DEFAULT_HIGH_WATER_BYTES, batch_bytes: int = 1 << 20) -> None:
        self._stream = stream
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        # The open run of ASCII texts sharing one frame, after everything in the queue (see send_text).
        self._run: list[str] = []
        self._run_frame: TextFrame | None = None
        # The open run's bytes as counted (escapes are known only once it is framed, up to 6x an ASCII text's
        # length): a run is framed once it counts an eighth of the byte mark, so the queue stays within it.
        self._run_bytes = 0
        self._run_bytes_max = high_water_bytes // 8
        self._extra = 0  # messages queued beyond len(_queue): sealed runs count as their texts (_Lines.messages)
        self._high_water = high_water
        self._high_water_bytes = high_water_bytes
        self._batch_bytes = batch_bytes
        self._data = anyio.Event()
        self._space = anyio.Event()
        self._space_waiters = 0  # producers waiting in backpressure(): only then is _space set and renewed
        self._drained: anyio.Event | None = None  # made by drain(), only when someone waits
        self._event: Callable[[], anyio.Event] = anyio.Event  # the running backend's Event class, once run() runs
        self._closing = False
        self._sending = False  # a chunk taken off the queue is being written
        self._broken = False
        self.on_sent: Callable[[int], None] | None = None
        """Told the size of each chunk written (telemetry's bytes on the wire), if set."""

    @property
    def broken(self) -> bool:
        """True once a write failed; later messages are dropped."""
        return self._broken

    def send_nowait(self, data: bytes) -> bool:
        """Queue one serialized message (it must end with a newline); returns `full`, so a
        producer knows in the same call whether to await `backpressure`."""
        if self._broken:
            return False
        if self._run:
            self._seal()  # the texts before it go first
        queue = self._queue
        queue.append(data)
        queued = self._queued_bytes = self._queued_bytes + len(data)
        size = len(queue)
        if size == 1:
            # The queue was empty: wake the writer. (With more queued, it was woken already,
            # or it is writing and looks at the queue again before it waits.)
            self._data.set()
        return size + self._extra > self._high_water or queued > self._high_water_bytes

    def send_text(self, frame: TextFrame, text: str) -> bool:
        """Queue the line ``frame.head + JSON string of text + frame.tail`` for an ASCII ``text``; returns
        `full`, as `send_nowait` does.

        The hot path of a streamed message: the text joins the open run of its frame and the run is
        framed in one go when it is sealed (the wire bytes are those of framing each text alone).
        Non-ASCII text must be framed by the caller and given to `send_nowait`.
        """
        run = self._run
        if (not run or frame is not self._run_frame) and not self._open_run(frame):
            return False
        run.append(text)
        size = frame.size + len(text)
        queued = self._queued_bytes = self._queued_bytes + size
        self._run_bytes += size
        if self._run_bytes > self._run_bytes_max:
            self._seal()  # its escapes counted now
            queued = self._queued_bytes
        return len(run) + len(self._queue) + self._extra > self._high_water or queued > self._high_water_bytes

    def _open_run(self, frame: TextFrame) -> bool:
        """Make the open run one of ``frame`` (sealing another's); false if output is dropped (broken)."""
        if self._broken:
            return False
        if self._run:
            self._seal()
        elif not self._queue:
            self._data.set()  # nothing was queued: wake the writer
        self._run_frame = frame
        return True

    def _seal(self) -> None:
        """Frame the open run of texts into one queued item (the lines of all its texts)."""
        run, frame = self._run, self._run_frame
        assert frame is not None
        joined = _SEPARATOR.join(run)
        data = _Lines(frame.head + orjson.dumps(joined).replace(_SEPARATOR_BYTES, frame.between) + frame.tail)
        data.messages = len(run)
        self._queue.append(data)
        self._extra += len(run) - 1
        # send_text counted each text at its length; the JSON adds quotes (counted) and escapes (not).
        self._queued_bytes += len(data) - (len(run) * frame.size + len(joined) - len(run) + 1)
        run.clear()
        self._run_bytes = 0

    async def send(self, data: bytes) -> None:
        """Queue one serialized message, then wait while the queue is over its high-water mark."""
        self.send_nowait(data)
        await self.backpressure()

    @property
    def queued_bytes(self) -> int:
        """Bytes queued and not yet handed to the stream."""
        return self._queued_bytes

    def full(self) -> bool:
        """Whether the queue is over a high-water mark (a producer should await `backpressure`)."""
        return ((len(self._queue) + self._extra + len(self._run) > self._high_water
                 or self._queued_bytes > self._high_water_bytes) and not self._broken)

    async def backpressure(self) -> None:
        """Wait while the queue is over its high-water marks (the peer is not reading).

        One wait per call: every producer woken when room appears goes on, in wake order,
        even if a faster one refilled the queue first (no producer is starved; the queue
        exceeds its mark by at most one message per producer).
        """
        if self.full():
            self.flush_now()  # a stream that takes the batch at once spares the hand-over to the writer task
            if not self.full():
                await anyio.lowlevel.checkpoint()  # still one pass of the loop: other tasks (a cancel) run
                return
            self._space_waiters += 1
            try:
                await self._space.wait()
            finally:
                self._space_waiters -= 1

    def flush_now(self) -> None:
        """Write what is queued at once, on the caller's step, if the stream can take it without waiting.

        For the end of a turn: the ``idle`` goes out now instead of when the writer task next runs
        (an event-loop pass later). Only a stream with a non-blocking ``write_now(data) -> int``
        (bytes taken, ``0`` if it would block) can, such as `FdSendStream`;
        with others, or while the writer task is writing, this does nothing. What the stream does
        not take stays queued for the writer task, in order.
        """
        queue = self._queue
        if self._sending or self._broken or self._queued_bytes > DIRECT_WRITE_BYTES:
            return
        write_now = getattr(self._stream, "write_now", None)
        if write_now is None:
            return
        if self._run:
            self._seal()
            if self._queued_bytes > DIRECT_WRITE_BYTES:  # the run's escapes made it bigger than it was counted
                return
        if not queue:
            return
        chunk = queue[0] if len(queue) == 1 else b"".join(queue)
        try:
            written = write_now(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return  # the writer task meets the same failure and handles it
        if not isinstance(written, int) or written <= 0:
            return
        queue.clear()
        self._extra = 0
        if written < len(chunk):
            queue.append(chunk[written:])  # counts as one message, as any remainder
        self._queued_bytes = len(chunk) - written
        self._wake_producers()
        if not queue and self._drained is not None:
            self._drained.set()
            self._drained = None

    async def drain(self) -> None:
        """Wait until everything queued so far has been written (or the stream broke)."""
        while (self._queue or self._run or self._sending) and not self._broken:
            if self._drained is None:
                self._drained = self._event()
            await self._drained.wait()

    def close(self) -> None:
        """Ask `run` to finish once the queue is empty."""
        self._closing = True
        self._data.set()

    async def run(self) -> None:
        """Write queued messages until `close` is called and the queue is empty."""
        queue = self._queue
        # Made once: anyio.Event() looks the backend up at every call, and the writer renews
        # its wake-up event at every pass.
        new_event = self._event = type(anyio.Event())
        while True:
            if self._run:
                self._seal()
            if not queue:
                if self._drained is not None:
                    self._drained.set()
                    self._drained = None
                if self._closing:
                    return
                await self._data.wait()
                self._data = new_event()
                continue
            if len(queue) == 1 or len(queue[0]) >= self._batch_bytes:
                chunk = queue.popleft()
                if type(chunk) is _Lines:
                    self._extra -= chunk.messages - 1
            elif self._queued_bytes <= self._batch_bytes:
                chunk = b"".join(queue)  # all of it fits one write
                queue.clear()
                self._extra = 0
            else:
                parts: list[bytes] = []
                size = 0
                while queue and size < self._batch_bytes:
                    part = queue.popleft()
                    if type(part) is _Lines:
                        self._extra -= part.messages - 1
                    parts.append(part)
                    size += len(part)
                chunk = b"".join(parts)
            self._queued_bytes -= len(chunk)
            self._wake_producers()  # room again: producers fill the queue while this chunk is written
            self._sending = True
            try:
                await self._stream.send(chunk)
                if self.on_sent is not None:
                    self.on_sent(len(chunk))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                logger.warning("acp: output stream failed (%r); dropping further output", exc)
                self._broken = True
                queue.clear()
                self._run.clear()
                self._queued_bytes = self._extra = self._run_bytes = 0
                self._space.set()
                if self._drained is not None:
                    self._drained.set()
                return
            finally:
                self._sending = False

    def _wake_producers(self) -> None:
        if (self._space_waiters and len(self._queue) + self._extra + len(self._run) <= self._high_water // 2
                and self._queued_bytes <= self._high_water_bytes // 2):
            self._space.set()
            self._space = self._event()
