"""One remote client connection (its own runtime, as on stdio) and the registry of live ones.

A `RemoteConnection` runs an `AgentRuntime` over a
`MessageInbox` and an `OutputStream`.
Over HTTP every line the runtime writes goes, in order, to the connection's event stream: the
RFD's single-stream model, so a client sees exactly the order a stdio client sees (answers, a
session's updates and a subagent's updates interleave as the agent wrote them). The TypeScript
SDK's client also opens one stream per session (``Acp-Session-Id`` on the GET); those are
accepted, one reader each (409 for a second), and carry only keep-alive comments. Over WebSocket
every line goes to the socket. Each connection has its own runtime, live sessions, streams and
routes; what they share is the server's session store (where a session goes when it is closed or
its connection ends, and comes back from on ``session/resume``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, Literal

import anyio
import orjson

from .._runtime.runtime import AgentRuntime
from .._runtime.serve import open_runtime
from .._wire.connection import IdKey, id_key
from .._wire.templates import HEAD_NOTIFY
from ..agent import Agent
from ..errors import RequestError
from ..records import DEFAULT_PRINCIPAL
from ..schema import CloseSessionRequest
from ..store import SessionStore
from .options import HttpOptions
from .sessions import ActiveSessions, active_elsewhere
from .streams import Mailbox, MessageInbox, OutputStream

__all__ = ["RESUMABLE_META", "SHUTDOWN_MARGIN", "ConnectionLimitError", "ConnectionRegistry", "RemoteConnection",
           "Route"]

logger = logging.getLogger(__name__)

_NOT_FOUND_TEXT: Final = "Resource not found"
_NOT_FOUND: Final = b'"Resource not found"'

RESUMABLE_META: Final = "acp-agent/resumableStreams"
"""The ``_meta`` key of the ``initialize`` answer that describes how this connection's streams resume."""

SHUTDOWN_MARGIN: Final = 2.0
"""Seconds past the shutdown timeout before a closing connection's remaining work is cancelled."""

Route = str | None
"""The session a message belongs to (``None``: the connection itself)."""


Transport = Literal["http", "websocket"]


class ConnectionLimitError(Exception):
    """A client went past a connection limit (an over-long id)."""


def credential_digest(token: str | None) -> bytes | None:
    """A digest of the token a connection was opened with, whichever header carried it (``Authorization`` or a
    WebSocket subprotocol): later requests must present the same token."""
    if token is None:
        return None
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class RemoteConnection:
    """One client connection over HTTP or WebSocket, with its own `AgentRuntime`."""

    def __init__(
        self,
        agent: Agent,
        transport: Transport,
        options: HttpOptions,
        *,
        credential: bytes | None = None,
        send_lines: Callable[[list[bytes]], Awaitable[None]] | None = None,
        store: SessionStore | None = None,
        active: ActiveSessions | None = None,
        principal: str = DEFAULT_PRINCIPAL,
        connection_id: str | None = None,
    ) -> None:
        self.id = connection_id if connection_id is not None else str(uuid.uuid4())
        """The ``Acp-Connection-Id`` (random, unguessable)."""
        self.transport: Transport = transport
        self.options = options
        self.credential = credential
        """Digest of the token the connection was opened with (`credential_digest`)."""
        self._send_lines = send_lines
        self.inbox = MessageInbox()
        self.runtime: AgentRuntime = open_runtime(
            agent, self.inbox, OutputStream(self._write), limits=options.limits, store=store,
            shutdown_timeout=options.shutdown_timeout, principal=principal,
            workspace=options.workspace, client_mcp=options.allow_client_mcp,
        )
        self._active = active
        if active is not None:
            active.attach(self)
        self.initialized = False
        """Whether the ``initialize`` answer went out."""
        self.initial_response: bytes | None = None
        self._initial = anyio.Event()
        # HTTP routing (see the module docstring).
        self.connection_stream = Mailbox(self._queued, self._taken, options.replay_messages)
        self.session_streams: dict[str, Mailbox] = {}
        self.client_response_routes: dict[IdKey, Route] = {}
        """The session of each request the agent sent and the client has not answered yet."""
        self.buffered_bytes = 0
        self._progress = anyio.Event()
        self.receivers = 0
        """SSE streams attached right now."""
        self.last_active = anyio.current_time()
        self.closing = False
        """True once shutdown began; no new requests are taken."""
        self.discarding = False
        """True once the client is gone: output is dropped."""
        self.close_reason: str | None = None
        """Why the server closed the connection (a limit), if it did."""
        self._closing = anyio.Event()
        # WebSocket reattach (see `client_lost` and `reattach`): every frame sent is numbered and the last
        # ``replay_messages`` kept; the client counts the frames it got (its cursor).
        self.frames_sent = 0
        """Frames sent on this WebSocket connection so far (the initialize answer is frame 1)."""
        self._frames: deque[bytes] = deque(maxlen=options.replay_messages)
        self._send_lock = anyio.Lock()
        self.detached = False
        """True while a WebSocket connection's client is gone and its turns run on, waiting for it to reattach."""
        self._detached = anyio.Event()
        self._reattached = anyio.Event()
        self.done = anyio.Event()
        """Set once the runtime has finished (sessions closed, output flushed or dropped)."""

    # -- running and closing ----------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until `shutdown`; its sessions are closed as at the end of a stdio connection."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._enforce_deadline, tg.cancel_scope)
                if self.transport == "websocket":
                    tg.start_soon(self._keep_detached)
                await self.runtime.connection.run()
                tg.cancel_scope.cancel()
        except Exception:
            logger.exception("acp: connection %s failed", self.id)
        finally:
            self.closing = True
            self._initial.set()
            for mailbox in self._mailboxes():
                mailbox.finish()
            if self._active is not None:
                with anyio.CancelScope(shield=True):
                    await self._active.detach(self)
            self.done.set()

    def shutdown(self, *, discard: bool) -> None:
        """Begin closing: the runtime winds its sessions down (their processes are stopped).

        ``discard`` drops the output still to come (the client is gone or asked to end);
        otherwise it is delivered to the streams still open before they end.
        """
        if discard and not self.discarding:
            self.discarding = True
            for mailbox in self._mailboxes():
                mailbox.abort()
        if self.closing:
            return
        self.closing = True
        self._closing.set()
        self.inbox.close()
        self.runtime.connection.close()
        self._wake()

    def fail(self, reason: str) -> None:
        """Close the connection for a broken limit, dropping its output."""
        if self.close_reason is None:
            self.close_reason = reason
            logger.warning("acp: closing connection %s: %s", self.id, reason)
        self.shutdown(discard=True)

    def client_lost(self) -> None:
        """A WebSocket's client went away: with a session active and ``turn_grace`` set, keep the connection (its
        turns run on, its output is numbered and kept) for the client to reattach; otherwise close it."""
        if self.closing or self.options.turn_grace <= 0 or not self.runtime.records:
            self.shutdown(discard=True)
            return
        if not self.detached:
            self.detached = True
            self._reattached = anyio.Event()
            self._detached.set()

    async def _keep_detached(self) -> None:
        """Close the connection once it stayed detached for ``turn_grace`` seconds."""
        while True:
            await self._detached.wait()
            self._detached = anyio.Event()
            with anyio.move_on_after(self.options.turn_grace):
                await self._reattached.wait()
                continue
            if self.detached:
                logger.info("acp: WebSocket connection %s was not reattached within %.0f s; closing it", self.id,
                            self.options.turn_grace)
                self.shutdown(discard=True)
                return

    def can_reattach(self, cursor: int) -> bool:
        """Whether a client that got ``cursor`` frames can reattach now (every frame after it is kept)."""
        return self.detached and not self.closing and 0 <= self.frames_sent - cursor <= len(self._frames)

    async def reattach(self, send_lines: Callable[[list[bytes]], Awaitable[None]], cursor: int) -> bool:
        """Hand a detached WebSocket connection to a new socket: the frames after ``cursor`` (the count the client
        got) are sent again, then a ``state_update`` of every active session, then what comes. ``False`` (nothing
        changed) when frames after ``cursor`` are no longer kept: the client resumes its sessions instead."""
        async with self._send_lock:
            if not self.can_reattach(cursor):
                return False
            missing = self.frames_sent - cursor
            replay = list(self._frames)[len(self._frames) - missing:] if missing else []
            self._send_lines = send_lines
            self.detached = False
            self._reattached.set()
            states = [core.sink.frame(core.snapshots.current()).rstrip(b"\n")
                      for core in list(self.runtime.sessions.values())]
            await self._send_numbered(replay, number=False)
            await self._send_numbered(states)
        return True

    async def _send_numbered(self, lines: list[bytes], *, number: bool = True) -> None:
        """Send ``lines`` on the socket (the lock held), numbering and keeping them unless they were already."""
        if number:
            self.frames_sent += len(lines)
            self._frames.extend(lines)
        if self.detached or not lines:
            return
        assert self._send_lines is not None
        with anyio.move_on_after(self.options.max_output_stall) as scope:
            try:
                await self._send_lines(lines)
            except Exception:  # the server's "client disconnected" errors vary
                self.client_lost()
                return
        if scope.cancelled_caught:
            self.fail(f"output stalled for max_output_stall ({self.options.max_output_stall:g} s)")

    async def _enforce_deadline(self, scope: anyio.CancelScope) -> None:
        await self._closing.wait()
        await anyio.sleep(self.runtime.shutdown_timeout + SHUTDOWN_MARGIN)
        abandoned = self.runtime.connection.abandon_requests()
        logger.warning("acp: connection %s did not finish closing within %.1fs; answered %d request(s) -32800 "
                       "and cancelled what was left", self.id, self.runtime.shutdown_timeout + SHUTDOWN_MARGIN,
                       abandoned)
        self.discarding = True
        scope.cancel()

    async def saved(self, session_id: str) -> None:
        """Wait until ``session_id`` is no longer active here (closed and saved) or the connection finished."""
        while session_id in self.runtime.records and not self.done.is_set():
            with anyio.move_on_after(0.05):
                await self.done.wait()

    async def close_session(self, session_id: str) -> None:
        """Close one session here, as ``session/close`` does (its work stops, it is saved)."""
        route = self.runtime.connection.requests["session/close"]
        assert route.handler is not None
        try:
            await route.handler(CloseSessionRequest(session_id=session_id))
        except RequestError:
            raise active_elsewhere(session_id) from None

    async def wait_initialized(self) -> bytes | None:
        """The first line the runtime wrote (the ``initialize`` answer), or ``None`` if it closed first."""
        await self._initial.wait()
        return self.initial_response

    # -- output ------------------------------------------------------------------------------------

    async def _write(self, lines: list[bytes]) -> None:
        if self.discarding or not lines:
            return
        if not self.initialized:
            self.initialized = True
            lines[0] = self._advertise(lines[0])
            if self.transport == "http":
                self.initial_response = lines.pop(0)
                self._initial.set()
        if self._active is not None:
            lines = [await self._truthful(line) if _NOT_FOUND in line else line for line in lines]
        if self._send_lines is not None:
            await self._send_websocket(lines)
            return
        for line in lines:
            self._route(line)
        # Closed for stalling: its output is dropped from now on, but the runtime's writer keeps
        # running, so producers stay paced by its queue (and cancellable) while the connection closes.
        with contextlib.suppress(anyio.BrokenResourceError):
            await self.wait_for_room()

    async def _send_websocket(self, lines: list[bytes]) -> None:
        async with self._send_lock:
            await self._send_numbered(lines)

    async def _truthful(self, line: bytes) -> bytes:
        """A "Resource not found" answer for a session active on another connection (here or on another replica)
        says so: ``-32002`` "Session is active on another connection", when it is this principal's."""
        assert self._active is not None
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            return line
        error = answer.get("error") if isinstance(answer, dict) else None
        data = error.get("data") if isinstance(error, dict) else None
        session_id = data.get("sessionId") if isinstance(data, dict) else None
        if not (isinstance(session_id, str) and isinstance(error, dict)) or error.get("message") != _NOT_FOUND_TEXT:
            return line
        with anyio.CancelScope(shield=True):
            # Another principal's session stays "not found", byte for byte like an unknown id (R: principals).
            if not await self.runtime.owns(session_id) or not await self._active.elsewhere(self, session_id):
                return line
        answer["error"] = active_elsewhere(session_id).to_dict()
        return orjson.dumps(answer)

    def _advertise(self, line: bytes) -> bytes:
        """The ``initialize`` answer with the resumable streams this connection offers in its ``_meta``."""
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            return line
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict):
            return line
        meta = result.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta[RESUMABLE_META] = {
            "connectionId": self.id, "transport": self.transport, "cursor": "Last-Event-ID",
            "replayMessages": self.options.replay_messages,
            **({"graceSeconds": self.options.turn_grace} if self.transport == "websocket" else {}),
        }
        result["_meta"] = meta
        return orjson.dumps(answer)

    async def wait_for_room(self) -> None:
        """Wait while clients hold ``max_buffered_bytes`` unread; close the connection if they stall."""
        limit = self.options.max_buffered_bytes
        while self.buffered_bytes >= limit and not self.closing:
            progress = self._progress
            with anyio.move_on_after(self.options.max_output_stall):
                await progress.wait()
            if not progress.is_set():
                self.fail(f"output stalled for max_output_stall ({self.options.max_output_stall:g} s)")
                raise anyio.BrokenResourceError

    async def wait_for_writer(self) -> None:
        """Wait while the runtime's own output queue is over its mark (the client is behind)."""
        writer = self.runtime.connection.writer
        if not writer.full():
            return
        with anyio.move_on_after(self.options.max_output_stall) as scope:
            await writer.backpressure()
        if scope.cancelled_caught:
            self.fail(f"output stalled for max_output_stall ({self.options.max_output_stall:g} s)")

    def _queued(self, size: int) -> None:
        self.buffered_bytes += size

    def _taken(self, size: int) -> None:
        self.buffered_bytes -= size
        self._wake()

    def _wake(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    def _route(self, line: bytes) -> None:
        if b'"method"' in line and not line.startswith(HEAD_NOTIFY):
            # A request of the agent: remember its session, so the client's answer can be checked.
            message = orjson.loads(line)
            if isinstance(message, dict) and "id" in message and "method" in message:
                key = id_key(message["id"])
                params = message.get("params")
                session_id = params.get("sessionId") if isinstance(params, dict) else None
                if key is not None:
                    self.client_response_routes[key] = session_id if isinstance(session_id, str) else None
        self.connection_stream.push(line)

    def _mailboxes(self) -> Iterator[Mailbox]:
        yield self.connection_stream
        yield from list(self.session_streams.values())

    # -- HTTP streams --------------------------------------------------------------------------

    def check_id(self, label: str, value: str) -> None:
        """Raise `ConnectionLimitError` for an id over ``max_id_length``."""
        if len(value) > self.options.max_id_length:
            raise ConnectionLimitError(f"{label} exceeds max_id_length ({self.options.max_id_length})")

    def acquire(self, session_id: str | None, *, takeover: bool = False) -> tuple[Mailbox, object] | None:
        """Attach an SSE receiver to the connection stream or a session's (which stays quiet);
        ``None`` if one is attached already (``takeover``: replace it, for a client resuming with a cursor)."""
        if session_id is None:
            mailbox = self.connection_stream
        else:
            self.check_id("Session ID", session_id)
            found = self.session_streams.get(session_id)
            if found is None:
                found = self.session_streams[session_id] = Mailbox(self._queued, self._taken)
            mailbox = found
        token = mailbox.acquire(takeover=takeover)
        if token is None:
            return None
        self.receivers += 1
        self.touch()
        return mailbox, token

    def release(self, session_id: str | None, mailbox: Mailbox, token: object) -> None:
        """Detach an SSE receiver; a session stream is forgotten."""
        mailbox.release(token)
        self.receivers -= 1
        self.touch()
        if session_id is not None and not mailbox.queued and self.session_streams.get(session_id) is mailbox:
            del self.session_streams[session_id]

    def touch(self) -> None:
        """Note activity (for idle expiry)."""
        self.last_active = anyio.current_time()

    def expired(self, timeout: float) -> bool:
        """Whether the connection was idle past ``timeout``: over HTTP with no stream attached, over WebSocket
        with no live session and no message from the client."""
        if self.closing or (self.transport == "websocket" and self.runtime.records):
            return False
        return self.idle_for() > timeout

    def idle_for(self) -> float:
        """Seconds since the last activity, or 0 while a stream is attached."""
        if self.receivers:
            return 0.0
        return anyio.current_time() - self.last_active


class ConnectionRegistry:
    """The live connections of one server, by ``Acp-Connection-Id``."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self._connections: dict[str, RemoteConnection] = {}

    def __len__(self) -> int:
        return len(self._connections)

    def __iter__(self) -> Iterator[RemoteConnection]:
        return iter(list(self._connections.values()))

    def full(self) -> bool:
        """Whether one more connection would go past ``max_connections``."""
        return len(self._connections) >= self.max_connections

    def held_by(self, principal: str) -> int:
        """How many open connections ``principal`` has."""
        return sum(1 for c in self._connections.values() if c.runtime.principal == principal and not c.closing)

    def add(self, connection: RemoteConnection) -> None:
        """Register a new connection."""
        self._connections[connection.id] = connection

    def get(self, connection_id: str, transport: Transport = "http") -> RemoteConnection | None:
        """The open connection with that id and transport, if any."""
        connection = self._connections.get(connection_id)
        if connection is None or connection.closing or connection.transport != transport:
            return None
        return connection

    def remove(self, connection_id: str, transport: Transport = "http") -> RemoteConnection | None:
        """Take a connection out (even one already closing); the caller shuts it down."""
        connection = self._connections.get(connection_id)
        if connection is None or connection.transport != transport:
            return None
        del self._connections[connection_id]
        return connection

    def forget(self, connection: RemoteConnection) -> None:
        """Drop a connection that has finished."""
        if self._connections.get(connection.id) is connection:
            del self._connections[connection.id]
