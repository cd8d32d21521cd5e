"""What a peer costs before the application sees it: sockets, request heads, and batched writes.

uvicorn serves each TCP connection with an asyncio protocol of the class its ``http`` setting names
(a documented setting that takes a class). `guarded_protocol` makes such a class: it wraps the
protocol uvicorn would have used (its own ``auto``/``httptools``/``h11``, created with the arguments
uvicorn passes) and keeps it behind two thin layers, using only asyncio's public protocol and
transport interfaces and no uvicorn internals:

- **Sockets are counted** against `Bounds.max_sockets` from the moment they are accepted;
  one more gets ``503`` and is closed at once, so idle or half-open TCP sockets cannot take the
  file descriptors real clients need (the limit stays below the process's descriptor limit).
- **Request heads are bounded** before authentication: a head larger than
  `Bounds.max_head_bytes` or with more than `Bounds.max_header_fields` fields gets
  ``431``, and a head not complete within `Bounds.head_timeout` of its first byte (or of the
  connection, for the first request) closes the connection.
- **Request bodies are bounded** before authentication: a ``Content-Length`` (or a chunked body) over
  `Bounds.max_body_bytes` gets ``413`` (on a socket with no answer yet; past one, the application answers
  ``413`` itself), and a body not complete within `Bounds.body_timeout` of its
  head closes the connection, so peers trickling a byte at a time cannot hold sockets forever.
  The layer follows request boundaries through ``Content-Length`` and chunked bodies alike, on every
  request of a kept-alive socket; it steps aside only once uvicorn has actually handed the socket to
  its WebSocket protocol (a head merely naming ``Upgrade`` or ``Transfer-Encoding`` changes nothing).
- **Writes are batched**: what the server writes during one pass of the event loop goes to the
  socket in one write (a turn's several WebSocket frames or SSE events: one system call), and a
  pause of reading takes effect at the end of the pass, so one undone within it costs nothing.

Refusals are logged once per episode (`acp_agent._util.episodes`), never once per peer.
This module is an asyncio protocol because uvicorn's transports are asyncio's; it never awaits.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from .._util.episodes import Episode

__all__ = ["FLUSH_BYTES", "BatchingTransport", "Bounds", "GuardedProtocol", "descriptor_room", "guarded_protocol"]

logger = logging.getLogger(__name__)

FLUSH_BYTES: Final = 64 * 1024
"""Bytes held for one write before they are written at once."""
DESCRIPTOR_RESERVE: Final = 64
"""File descriptors kept free of client sockets (store, logs, pipes of the agent's processes)."""



def _answer(status: str, text: str) -> bytes:
    return f"HTTP/1.1 {status}\r\ncontent-length: {len(text)}\r\nconnection: close\r\n\r\n{text}".encode()


_TOO_MANY: Final = _answer("503 Service Unavailable", "Too many connections")
_HEAD_TOO_LARGE: Final = _answer("431 Request Header Fields Too Large", "Request Header Fields Too Large")
_BODY_TOO_LARGE: Final = _answer("413 Content Too Large", "Content Too Large")
_BAD_FRAMING: Final = _answer("400 Bad Request", "Bad Request")
_CHUNK_LINE_MAX: Final = 1024  # a chunk-size line (hex size and extensions)
_HEAD_END: Final = re.compile(rb"\r?\n\r?\n")  # CRLF, or the bare LF that HTTP/1.1 parsers also accept


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a server run by [`run_http`][acp_agent.http.run_http] allows a peer before the application sees its
    request (``run_http(agent, bounds=Bounds(max_sockets=..., ...))``; ``serve`` sets ``max_sockets`` from
    ``--max-connections`` and ``head_timeout`` from ``--head-timeout``)."""

    max_sockets: int
    """TCP connections open at once (HTTP, event streams and WebSockets alike)."""
    max_head_bytes: int = 32 * 1024
    """Largest request head (request line and header fields)."""
    max_header_fields: int = 100
    """Most header fields in one request."""
    head_timeout: float = 10.0
    """Seconds a request head may take from its first byte (from the connection, for the first request)."""
    max_body_bytes: int | None = None
    """Largest request body announced or sent (``Content-Length`` or chunked; ``None``: not checked here)."""
    body_timeout: float = 60.0
    """Seconds a request body may take from the end of its head (``serve --body-timeout``)."""


def descriptor_room(wanted: int) -> int:
    """``wanted``, lowered to what the process's file-descriptor limit leaves for client sockets (``wanted`` on
    Windows, which has no such limit for sockets)."""
    if sys.platform == "win32":
        return wanted
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - DESCRIPTOR_RESERVE))


class _ServerState:
    """What every connection of one server shares."""

    def __init__(self, inner: type[asyncio.Protocol], bounds: Bounds) -> None:
        self.inner = inner
        self.bounds = bounds
        self.sockets = 0
        self.over_limit = Episode()
        self.bad_heads = Episode()


class BatchingTransport:
    """The socket's transport as the wrapped protocol sees it: writes of one loop pass go out as one,
    and ``set_protocol`` (an upgrade) replaces the protocol behind the guard, not the guard."""

    __slots__ = ("_guard", "_loop", "_pause_due", "_paused", "_pending", "_scheduled", "_size", "_want_paused",
                 "transport", "written")

    def __init__(self, transport: asyncio.Transport, guard: GuardedProtocol, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._guard = guard
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0
        self._scheduled = False
        self._want_paused = self._paused = self._pause_due = False
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold ``data`` for the write at the end of this pass of the loop (at once past ``FLUSH_BYTES``)."""
        if not data:
            return
        self._pending.append(bytes(data))
        self._size += len(data)
        self.written += len(data)
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
        if not self.transport.is_closing():
            self.transport.write(data)

    def _flush_soon(self) -> None:
        self._scheduled = False
        self.flush()

    def write_eof(self) -> None:
        """Write what is held, then half-close."""
        self.flush()
        self.transport.write_eof()

    def close(self) -> None:
        """Write what is held, then close (the transport sends its buffer first)."""
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        """Close at once, dropping what is held."""
        self._pending.clear()
        self._size = 0
        self.transport.abort()

    def pause_reading(self) -> None:
        """Stop reading at the end of this pass of the loop, unless reading resumes first.

        uvicorn pauses reading after each WebSocket message until the application takes it, usually in the
        next pass: deferred, the pause and its resume cost no system call then.
        """
        self._want_paused = True
        if not self._pause_due:
            self._pause_due = True
            self._loop.call_soon(self._pause_now)

    def resume_reading(self) -> None:
        """Read again (at once if reading was paused)."""
        self._want_paused = False
        if self._paused:
            self._paused = False
            self.transport.resume_reading()

    def is_reading(self) -> bool:
        """Whether reading goes on (not paused, nor about to be)."""
        return not self._want_paused and bool(self.transport.is_reading())

    def _pause_now(self) -> None:
        self._pause_due = False
        if self._want_paused and not self._paused and not self.transport.is_closing():
            self._paused = True
            self.transport.pause_reading()

    def get_write_buffer_size(self) -> int:
        """Bytes not yet written to the socket, held here or in the transport."""
        return self._size + self.transport.get_write_buffer_size()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """Hand the connection to ``protocol`` (uvicorn's WebSocket protocol after an upgrade)."""
        self._guard.replace_inner(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        """The protocol serving the connection behind the guard."""
        return self._guard.inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class GuardedProtocol(asyncio.Protocol):
    """Counts the socket, bounds request heads and bodies and batches writes in front of uvicorn's protocol.

    A subclass made by `guarded_protocol` is given to uvicorn as its ``http`` class; uvicorn
    calls it with the arguments of its own protocols, which go to the wrapped protocol unchanged.
    """

    _server: ClassVar[_ServerState]

    def __init__(self, **kwargs: Any) -> None:
        self.inner: asyncio.BaseProtocol = self._server.inner(**kwargs)
        """The protocol serving the connection (uvicorn's HTTP protocol, then its WebSocket protocol)."""
        self._transport: BatchingTransport | None = None
        self._admitted = False
        self._refused = False  # closed by the guard: nothing more reaches the wrapped protocol
        self._watching = True  # False once uvicorn hands the socket to its WebSocket protocol
        self._head = bytearray()
        self._body_left = 0  # bytes of the current body (or chunk, with its CRLF) still to come
        self._chunked = False  # inside a chunked body: between chunks, reading size lines or trailers
        self._trailer = False  # past the last chunk: reading trailer fields up to an empty line
        self._line = bytearray()  # the chunk-size line or trailer field being read
        self._chunked_bytes = 0  # data bytes of the current chunked body so far (trailers included)
        self._deadline: asyncio.TimerHandle | None = None

    # -- asyncio protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Admit the socket if there is room; then the wrapped protocol takes it."""
        server = self._server
        raw: Any = transport
        if server.sockets >= server.bounds.max_sockets:
            server.over_limit.log(logger, logging.WARNING, "acp: refusing a connection: %d sockets open "
                                  "(the limit; --max-connections and the descriptor limit set it)", server.sockets)
            raw.write(_TOO_MANY)
            raw.close()
            return
        server.sockets += 1
        self._admitted = True
        loop = asyncio.get_running_loop()
        self._transport = BatchingTransport(raw, self, loop)
        self._deadline = loop.call_later(server.bounds.head_timeout, self._late)
        self.inner.connection_made(self._transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        """Check request heads in ``data``, then pass it on."""
        if not self._admitted or self._refused:
            return
        if not self._watching:
            self.inner.data_received(data)  # type: ignore[attr-defined]
            return
        view = memoryview(data)
        while view:
            stop = self._scan(view)
            if stop < 0:
                return
            if stop == len(data):
                self.inner.data_received(data)  # type: ignore[attr-defined]
                return
            # A head naming Upgrade ends at ``stop``: uvicorn sees it alone, then either upgrades (the guard steps
            # aside) or serves it as a plain request (the guard goes on counting).
            self.inner.data_received(bytes(view[:stop]))  # type: ignore[attr-defined]
            view = view[stop:]
            if self._refused:
                return
            if self._stepped_aside():
                if view:
                    self.inner.data_received(bytes(view))  # type: ignore[attr-defined]
                return
            data = bytes(view)
            view = memoryview(data)

    def _stepped_aside(self) -> bool:
        """Whether the socket now belongs to another protocol (uvicorn upgraded it): nothing is checked any more."""
        return not self._watching

    def eof_received(self) -> bool | None:
        """The peer half-closed."""
        if not self._admitted:
            return None
        result: bool | None = self.inner.eof_received()  # type: ignore[attr-defined]
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        """Free the socket's place."""
        if not self._admitted:
            return
        self._admitted = False
        self._server.sockets -= 1
        self._stop_deadline()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        """The socket's buffer is full."""
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        """The socket's buffer drained."""
        self.inner.resume_writing()

    def replace_inner(self, protocol: asyncio.BaseProtocol) -> None:
        """Serve the connection with ``protocol`` from now on (after an upgrade): heads are no longer checked."""
        self.inner = protocol
        self._watching = False
        self._stop_deadline()

    # -- request heads ------------------------------------------------------------------------------

    def _scan(self, data: memoryview) -> int:
        """Follow request boundaries through ``data``: -1 if the connection was refused, else where to stop (the
        length of ``data``, or the end of a head naming ``Upgrade``)."""
        view = data
        while view:
            if self._body_left:
                taken = min(self._body_left, len(view))
                self._body_left -= taken
                view = view[taken:]
                if not self._body_left and not self._chunked:
                    self._stop_deadline()  # the body is complete
                continue
            if self._chunked:
                view = self._chunk_line(view)
                if self._refused:
                    return -1
                continue
            bounds = self._server.bounds
            prior = len(self._head)  # bytes of this head that came before ``view``
            if not prior and self._deadline is None:
                self._deadline = asyncio.get_running_loop().call_later(bounds.head_timeout, self._late)
            self._head += view[: bounds.max_head_bytes + 4 - prior]
            found = _HEAD_END.search(self._head, max(0, prior - 3))
            end = found.end() if found is not None else -1
            if end < 0 or end > bounds.max_head_bytes + 4:
                if len(self._head) > bounds.max_head_bytes:
                    self._refuse_head(f"larger than {bounds.max_head_bytes} bytes")
                    return -1
                return len(data)
            head = bytes(self._head[:end])
            view = view[end - prior :]
            self._head.clear()
            self._stop_deadline()
            upgrade = self._head_done(head)
            if upgrade is None:
                return -1
            if upgrade:
                return len(data) - len(view)
        return len(data)

    def _head_done(self, head: bytes) -> bool | None:
        """Check one complete head and learn where its body ends: ``None`` if refused, else whether it names
        ``Upgrade``."""
        bounds = self._server.bounds
        fields = head.rstrip(b"\r\n").split(b"\n")[1:]
        if len(fields) > bounds.max_header_fields:
            self._refuse_head(f"with more than {bounds.max_header_fields} header fields")
            return None
        length = 0
        codings: list[bytes] = []
        upgrade = False
        for line in fields:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    length = 0  # the HTTP parser answers 400
            elif name == b"transfer-encoding":
                codings += [coding.strip().lower() for coding in value.split(b",") if coding.strip()]
            elif name == b"upgrade":
                upgrade = True
        if codings:
            if codings[-1] != b"chunked":  # no way to find where such a body ends: refuse it
                self._refuse(_BAD_FRAMING, "with a body of unknown length (a transfer coding other than chunked)")
                return None
            self._chunked, self._trailer, self._chunked_bytes = True, False, 0
            self._line.clear()
            length = 0
        elif bounds.max_body_bytes is not None and length > bounds.max_body_bytes and self._unanswered():
            self._refuse(_BODY_TOO_LARGE, f"with a body over {bounds.max_body_bytes} bytes")
            return None
        self._body_left = max(0, length)
        if self._body_left or self._chunked:
            self._deadline = asyncio.get_running_loop().call_later(bounds.body_timeout, self._late)
        return upgrade

    def _chunk_line(self, view: memoryview) -> memoryview:
        """Read (part of) a chunk-size line or a trailer field of a chunked body; returns what follows it."""
        bounds = self._server.bounds
        newline = bytes(view[: _CHUNK_LINE_MAX + 1]).find(b"\n")
        taken = view[: newline + 1] if newline >= 0 else view
        self._line += taken
        view = view[len(taken):]
        if self._trailer:
            self._chunked_bytes += len(taken)
            if self._chunked_bytes > bounds.max_head_bytes:
                self._refuse(_HEAD_TOO_LARGE, f"with trailers larger than {bounds.max_head_bytes} bytes")
                return view
        elif len(self._line) > _CHUNK_LINE_MAX:
            self._refuse(_BAD_FRAMING, "with a chunk-size line too long")
            return view
        if newline < 0:
            return view
        line = bytes(self._line).strip()
        self._line.clear()
        if self._trailer:
            if not line:  # the empty line ends the body
                self._chunked = self._trailer = False
                self._stop_deadline()
            return view
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            self._refuse(_BAD_FRAMING, "with a malformed chunk size")
            return view
        if size == 0:
            self._trailer, self._chunked_bytes = True, 0
            return view
        self._chunked_bytes += size
        if bounds.max_body_bytes is not None and self._chunked_bytes > bounds.max_body_bytes and self._unanswered():
            self._refuse(_BODY_TOO_LARGE, f"with a body over {bounds.max_body_bytes} bytes")
            return view
        self._body_left = size + 2  # the chunk's data and its CRLF
        return view

    def _unanswered(self) -> bool:
        """Whether nothing was written on the socket yet, so a refusal can be answered rather than cut short. Past a
        first answer a body over the limit goes on to the application, which answers ``413`` in turn (the body
        deadline still bounds it)."""
        return self._transport is not None and not self._transport.written

    def _refuse_head(self, why: str) -> None:
        self._refuse(_HEAD_TOO_LARGE, f"head {why}")

    def _refuse(self, answer: bytes, why: str) -> None:
        self._server.bad_heads.log(logger, logging.WARNING, "acp: refusing a request %s", why)
        self._close(answer)

    def _late(self) -> None:
        self._deadline = None
        if self._admitted and self._watching:
            bounds = self._server.bounds
            if self._body_left or self._chunked:
                self._server.bad_heads.log(logger, logging.INFO, "acp: closing a connection whose request body took "
                                           "longer than %.0f s", bounds.body_timeout)
            else:
                self._server.bad_heads.log(logger, logging.INFO, "acp: closing a connection whose request head took "
                                           "longer than %.0f s", bounds.head_timeout)
            self._close(None)

    def _close(self, answer: bytes | None) -> None:
        """Close the socket (with ``answer`` first, if nothing was written on it yet)."""
        transport = self._transport
        if transport is None:
            return
        self._refused = True
        self._watching = False
        self._stop_deadline()
        if answer is not None and not transport.written:
            transport.write(answer)
            transport.close()
        else:
            transport.abort()

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def guarded_protocol(inner: type[asyncio.Protocol], bounds: Bounds) -> type[GuardedProtocol]:
    """A protocol class for uvicorn's ``http`` setting: ``inner`` behind the guard, with ``bounds``."""
    return type("AcpGuardedProtocol", (GuardedProtocol,), {"_server": _ServerState(inner, bounds)})
