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
  connection, for the first request) closes the connection. The layer finds request boundaries
  from ``Content-Length``; after a chunked body or an upgrade (WebSocket) it steps aside.
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
    """Counts the socket, bounds request heads and batches writes in front of uvicorn's protocol.

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
        self._watching = True  # False once an upgrade or a chunked body makes request boundaries unknown
        self._head = bytearray()
        self._body_left = 0
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
        self._deadline = loop.call_later(server.bounds.head_timeout, self._head_late)
        self.inner.connection_made(self._transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        """Check request heads in ``data``, then pass it on."""
        if not self._admitted or self._refused:
            return
        if self._watching and not self._scan(data):
            return
        self.inner.data_received(data)  # type: ignore[attr-defined]

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

    def _scan(self, data: bytes) -> bool:
        """Follow request boundaries through ``data``; False if the connection was refused."""
        view = memoryview(data)
        while view:
            if self._body_left:
                taken = min(self._body_left, len(view))
                self._body_left -= taken
                view = view[taken:]
                continue
            bounds = self._server.bounds
            prior = len(self._head)  # bytes of this head that came before ``view``
            if not prior and self._deadline is None:
                self._deadline = asyncio.get_running_loop().call_later(bounds.head_timeout, self._head_late)
            self._head += view[: bounds.max_head_bytes + 4 - prior]
            found = _HEAD_END.search(self._head, max(0, prior - 3))
            end = found.end() if found is not None else -1
            if end < 0 or end > bounds.max_head_bytes + 4:
                if len(self._head) > bounds.max_head_bytes:
                    self._refuse_head(f"larger than {bounds.max_head_bytes} bytes")
                    return False
                return True
            head = bytes(self._head[:end])
            view = view[end - prior :]
            self._head.clear()
            self._stop_deadline()
            if not self._head_done(head):
                return False
        return True

    def _head_done(self, head: bytes) -> bool:
        """Check one complete head and learn where its body ends; False if refused."""
        fields = head.rstrip(b"\r\n").split(b"\n")[1:]
        if len(fields) > self._server.bounds.max_header_fields:
            self._refuse_head(f"with more than {self._server.bounds.max_header_fields} header fields")
            return False
        length = 0
        for line in fields:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    length = 0  # the HTTP parser answers 400
            elif name in (b"transfer-encoding", b"upgrade"):
                self._watching = False  # a chunked body or another protocol: boundaries unknown from here on
        self._body_left = max(0, length)
        return True

    def _refuse_head(self, why: str) -> None:
        self._server.bad_heads.log(logger, logging.WARNING, "acp: refusing a request head %s", why)
        self._close(_HEAD_TOO_LARGE)

    def _head_late(self) -> None:
        self._deadline = None
        if self._admitted and self._watching:
            self._server.bad_heads.log(logger, logging.INFO, "acp: closing a connection whose request head took "
                                       "longer than %.0f s", self._server.bounds.head_timeout)
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
