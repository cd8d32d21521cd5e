"""The ASGI application: ACP's Streamable HTTP and WebSocket transports on one path.

``POST`` carries one client message (``initialize`` is answered ``200`` with the answer and an
``Acp-Connection-Id``; everything else ``202``, its answer coming on an event stream); ``GET``
with ``Accept: text/event-stream`` opens the connection's event stream, or a session's with
``Acp-Session-Id``; ``DELETE`` ends the connection; a WebSocket upgrade gives a full-duplex
connection instead. Statuses and headers follow the TypeScript SDK's server (the reference):
400 for a missing or mismatched header or an over-long id, 404 for an unknown connection, 406,
409 for a stream that already has a reader, 413, 415, and 401/403 for the security checks.

HTTP connections run in the app's task group, which lives as long as the ASGI lifespan (or
[`AcpApp.lifespan`][acp_agent.http.AcpApp.lifespan] when the app is mounted in another one); a WebSocket connection runs
in its own request.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
import orjson
from anyio.abc import TaskGroup

from .._runtime.storage import session_store
from .._wire.connection import id_key
from ..agent import Agent
from ..errors import RequestError, StoreError, StoreUnusableError
from ..limits import limit_error
from ..store import MemoryStore, SessionStore
from ..store.postgres import PostgresStore
from .connections import (
    SHUTDOWN_MARGIN,
    ConnectionLimitError,
    ConnectionRegistry,
    RemoteConnection,
    credential_digest,
)
from .leases import Leases, PostgresLeases
from .options import HttpOptions
from .security import (
    Admitted,
    Refusal,
    check_request,
    cors_headers,
    origin_allowed,
    principal_of,
)
from .sessions import ActiveSessions

__all__ = ["SESSION_SCOPED_METHODS", "AcpApp", "Receive", "Scope", "Send"]

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
"""An ASGI connection scope."""
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
"""An ASGI ``receive`` callable."""
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
"""An ASGI ``send`` callable."""

SESSION_SCOPED_METHODS: Final = frozenset({
    "session/cancel", "session/close", "session/delete", "session/fork", "session/load", "session/prompt",
    "session/resume", "session/set_config_option", "session/set_mode", "session/set_model",
})
"""Client methods whose POST must carry ``Acp-Session-Id``."""

_EVENT_STREAM: Final = "text/event-stream"
_REFUSAL_WAIT: Final = 5.0
"""Seconds a WebSocket refused for a limit waits for its first request, to answer it with the limit's error."""
_JSON: Final = "application/json"
_BATCH_ERROR: Final = orjson.dumps({
    "jsonrpc": "2.0", "id": None,
    "error": RequestError.invalid_request("JSON-RPC batches are not supported").to_dict(),
})
_PARSE_ERROR: Final = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": RequestError.parse_error().to_dict()})
_INVALID_REQUEST: Final = orjson.dumps(
    {"jsonrpc": "2.0", "id": None, "error": RequestError.invalid_request().to_dict()})


class _Disconnected(Exception):
    """The client went away while its request was read."""


@dataclass(slots=True)
class _SocketState:
    client_gone: bool = False
    close: tuple[int, str] | None = None
    initialize_seen: bool = False


class AcpApp:
    """An ASGI application serving one agent over Streamable HTTP and WebSocket.

    ``agent`` is an [`Agent`][acp_agent.Agent] shared by every connection, or a callable returning a new one
    for each connection. Run it on any ASGI server with lifespan support, or mount it in another
    app and enter [`lifespan`][acp_agent.http.AcpApp.lifespan] from that app's lifespan.

    Every connection keeps its sessions in one ``store`` (default: the agent's ``store``, else its
    SQLite file, as [`run_stdio`][acp_agent.run_stdio] does), so a client can resume a session on a new
    connection, or on another server sharing the store; a session is active on one connection at
    a time (see `acp_agent.http.sessions`). The store is closed when the lifespan ends.
    """

    def __init__(self, agent: Agent | Callable[[], Agent], options: HttpOptions | None = None, *,
                 store: SessionStore | None = None) -> None:
        self._agent = agent
        self.options = options if options is not None else HttpOptions()
        """The server settings."""
        self.registry = ConnectionRegistry(self.options.max_connections)
        """The live connections."""
        self.sessions = ActiveSessions(self.options.shutdown_timeout + 2 * SHUTDOWN_MARGIN)
        """Which connection has each session active."""
        self._store = store
        self._store_ready = False
        self._store_opening: anyio.Event | None = None
        self._tg: TaskGroup | None = None
        self._closing = False

    @property
    def store(self) -> SessionStore | None:
        """The store every connection keeps its sessions in (``None`` until known: an agent factory
        that is not a class is asked on the first connection)."""
        if self._store is None:
            source = self._agent
            if isinstance(source, Agent) or (isinstance(source, type) and issubclass(source, Agent)):
                self._store = session_store(source, durable=True)
        return self._store

    async def _shared_store(self, agent: Agent) -> SessionStore:
        """The store, opened once for all connections (an unusable one is replaced by one
        [`MemoryStore`][acp_agent.store.MemoryStore] for the whole server, never one per connection)."""
        if self.store is None:
            self._store = session_store(agent, durable=True)
        store = self._store
        assert store is not None
        if isinstance(store, PostgresStore) and type(self.sessions.leases) is Leases:
            # Replicas share this database: a session active here is leased, so no other replica resumes it.
            self.sessions.leases = PostgresLeases(store.conninfo, connect_timeout=store.connect_timeout)
        while not self._store_ready:
            if self._store_opening is not None:
                await self._store_opening.wait()
                continue
            self._store_opening = opening = anyio.Event()
            try:
                await store.open()
                self._store_ready = True
            except StoreUnusableError as exc:
                logger.error("acp: the session store cannot be used: %s. This server keeps its sessions in memory "
                             "only (they are lost when it exits); the store was left as it is.", exc)
                self._store = store = MemoryStore()
                self._store_ready = True
            except StoreError as exc:
                logger.error("acp: the session store cannot be opened now: %s (retried on the next use)", exc)
                break
            finally:
                self._store_opening = None
                opening.set()
        return store

    # -- lifespan -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Host HTTP connections while the context is open; on exit close every connection.

        ``app`` is ignored, so this fits Starlette's ``lifespan=`` directly.
        """
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._closing = False
            tg.start_soon(self._expire_idle)
            try:
                yield
            finally:
                await self.close()
                self._tg = None
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    try:
                        await self.sessions.leases.close()
                    except Exception:
                        logger.exception("acp: closing the session leases failed")
                if self._store is not None and self._store_ready:
                    with anyio.CancelScope(shield=True):
                        try:
                            await self._store.close()
                        except Exception:
                            logger.exception("acp: closing the session store failed")
                    self._store_ready = False

    async def close(self) -> None:
        """Close every connection: sessions stop their work, their last output is delivered where a
        client still reads it, then event streams end and sockets close (code 1001)."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            connections = list(self.registry)
            for connection in connections:
                connection.shutdown(discard=False)
            with anyio.move_on_after(self.options.shutdown_timeout + 2 * SHUTDOWN_MARGIN):
                for connection in connections:
                    await connection.done.wait()

    async def _expire_idle(self) -> None:
        timeout = self.options.idle_timeout
        while True:
            await anyio.sleep(min(5.0, timeout / 4))
            for connection in self.registry:
                if connection.expired(timeout):
                    logger.info("acp: closing idle connection %s", connection.id)
                    if connection.transport == "http":
                        self.registry.remove(connection.id)
                    else:
                        connection.close_reason = "Idle timeout"
                    connection.shutdown(discard=True)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception as exc:
            logger.exception("acp: lifespan failed")
            await send({"type": "lifespan.startup.failed", "message": type(exc).__name__})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # -- dispatch -----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind not in ("http", "websocket"):
            return
        headers = _headers(scope)
        if not self._path_matches(scope):
            if kind == "http":
                await _text(send, 404, "Not Found")
            else:
                await receive()
                await _deny_socket(scope, send, (404, "Not Found"))
            return
        origin = headers.get("origin")
        if kind == "http" and origin is not None and self.options.allowed_origins:
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                await self._preflight(send, origin)  # no credential: a browser sends none on a preflight
                return
            send = _with_cors(send, origin, self.options.allowed_origins)
        admitted = await check_request(headers, self.options, scope.get("server"))
        if kind == "websocket":
            await self._websocket(scope, receive, send, headers, admitted)
            return
        if not isinstance(admitted, Admitted):
            await _refuse(send, admitted)
            return
        method = scope["method"]
        try:
            if method == "POST":
                await self._post(receive, send, headers, admitted.principal)
            elif method == "GET":
                await self._get(receive, send, headers)
            elif method == "DELETE":
                await self._delete(send, headers)
            else:
                await _text(send, 405, "Method Not Allowed", [(b"allow", b"GET, POST, DELETE")])
        except _Disconnected:
            pass

    async def _preflight(self, send: Send, origin: str) -> None:
        if not origin_allowed(origin, self.options.allowed_origins):
            await _text(send, 403, "Forbidden")
            return
        await _empty(send, 204, cors_headers(origin, preflight=True))

    def _path_matches(self, scope: Scope) -> bool:
        wanted = self.options.path
        if wanted is None:
            return True
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        return (path or "/") == wanted

    def _new_agent(self) -> Agent:
        return self._agent if isinstance(self._agent, Agent) else self._agent()

    def _lookup(self, connection_id: str, headers: dict[str, str]) -> RemoteConnection | None:
        connection = self.registry.get(connection_id)
        if connection is None:
            return None
        if self.options.token is not None and connection.credential != credential_digest(headers.get("authorization")):
            return None  # another client's connection: as if it did not exist
        return connection

    async def _run_connection(self, connection: RemoteConnection) -> None:
        try:
            await connection.run()
        finally:
            self.registry.forget(connection)

    # -- POST ---------------------------------------------------------------------------------

    async def _post(self, receive: Receive, send: Send, headers: dict[str, str], principal: str) -> None:
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != _JSON:
            await _text(send, 415, "Unsupported Media Type")
            return
        body = await _read_body(receive, headers, self.options.max_body_bytes)
        if body is None:
            await _text(send, 413, f"Request body exceeds {self.options.max_body_bytes} bytes")
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            await _text(send, 400, "Invalid JSON")
            return
        if isinstance(message, list):
            await _json(send, 400, _BATCH_ERROR)
            return
        if not isinstance(message, dict):
            await _text(send, 400, "Invalid JSON-RPC message")
            return
        line = _one_line(body)
        connection_id = headers.get("acp-connection-id")
        if _is_initialize(message):
            if connection_id:
                await _text(send, 400, "Initialize not allowed on existing connection")
            else:
                await self._initialize(receive, send, headers, message, line, principal)
            return
        if not connection_id:
            await _text(send, 400, "Missing Acp-Connection-Id")
            return
        connection = self._lookup(connection_id, headers)
        if connection is None:
            await _text(send, 404, "Unknown Acp-Connection-Id")
            return
        try:
            problem = await self._forward(connection, message, headers, line)
        except ConnectionLimitError as exc:
            problem = str(exc)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await _text(send, 404, "Unknown Acp-Connection-Id")
            return
        if problem is not None:
            await _text(send, 400, problem)
        else:
            await _empty(send, 202, self._extra_headers())

    async def _forward(
        self, connection: RemoteConnection, message: dict[str, Any], headers: dict[str, str], line: bytes
    ) -> str | None:
        """Check the headers against the message and hand it to the runtime; the 400 text if refused."""
        header_session = headers.get("acp-session-id")
        method = message.get("method")
        if method is None:
            # An answer to a request of the agent: a session header, if sent, must name that request's session.
            key = id_key(message.get("id"))
            route = connection.client_response_routes.get(key) if key is not None else None
            if header_session and route is not None and header_session != route:
                return "Mismatched Acp-Session-Id"
            if key is not None:
                connection.client_response_routes.pop(key, None)
        else:
            params = message.get("params")
            params_session = params.get("sessionId") if isinstance(params, dict) else None
            if not isinstance(params_session, str):
                params_session = None
            if (method in SESSION_SCOPED_METHODS or params_session is not None) and not header_session:
                return "Missing Acp-Session-Id"
            if header_session and params_session is not None and header_session != params_session:
                return "Mismatched Acp-Session-Id"
            if header_session:
                connection.check_id("Session ID", header_session)
            if "id" in message:
                request_id = message["id"]
                if isinstance(request_id, str):
                    connection.check_id("Request ID", request_id)
                # An answer adds output: wait until the clients have read enough to make room.
                await connection.wait_for_room()
                await connection.wait_for_writer()
        connection.touch()
        if connection.closing:
            raise anyio.ClosedResourceError
        await connection.inbox.put(line)
        return None

    async def _initialize(
        self, receive: Receive, send: Send, headers: dict[str, str], message: dict[str, Any], line: bytes,
        principal: str,
    ) -> None:
        if message.get("id") is None:
            await _text(send, 400, "Initialize request must include an ID")
            return
        if self._tg is None or self._closing:
            logger.error("acp: an HTTP initialize arrived while the app's lifespan is not running; mount the app "
                         "with lifespan=app.lifespan (or run it on a server with lifespan support)")
            await _text(send, 503, "Service Unavailable")
            return
        if self.registry.full():
            await _text(send, 503, "Too many connections")
            return
        agent = self._new_agent()
        refusal = self._principal_full(agent, principal)
        if refusal is not None:
            await _json(send, 429, orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": refusal.to_dict()}))
            return
        connection = RemoteConnection(
            agent, "http", self.options, credential=credential_digest(headers.get("authorization")),
            store=await self._shared_store(agent), active=self.sessions, principal=principal,
        )
        self.registry.add(connection)
        self._tg.start_soon(self._run_connection, connection)
        await connection.inbox.put(line)
        answer: bytes | None = None
        disconnected = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal disconnected
                while (await receive())["type"] != "http.disconnect":
                    pass
                disconnected = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            answer = await connection.wait_initialized()
            tg.cancel_scope.cancel()
        if disconnected or answer is None or not _answers(answer, message["id"]):
            self.registry.remove(connection.id)
            connection.shutdown(discard=True)
            if disconnected:
                return
            failure = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "Initialize failed"}}
            await _json(send, 500, orjson.dumps(failure))
            return
        connection.touch()
        await _json(send, 200, answer, [(b"acp-connection-id", connection.id.encode()), *self._extra_headers()])

    # -- GET: event streams -------------------------------------------------------------------

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        if headers.get("upgrade", "").lower() == "websocket":
            await _text(send, 426, "WebSocket upgrade is not available on this server")
            return
        if _EVENT_STREAM not in headers.get("accept", "").lower():
            await _text(send, 406, "Not Acceptable")
            return
        connection_id = headers.get("acp-connection-id")
        if not connection_id:
            await _text(send, 400, "Missing Acp-Connection-Id")
            return
        connection = self._lookup(connection_id, headers)
        if connection is None:
            await _text(send, 404, "Unknown Acp-Connection-Id")
            return
        session_id = headers.get("acp-session-id") or None
        try:
            lease = connection.acquire(session_id)
        except ConnectionLimitError as exc:
            await _text(send, 400, str(exc))
            return
        if lease is None:
            await _text(send, 409, "Outbound stream already has an active receiver")
            return
        mailbox, token = lease
        try:
            await send({
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no"), *self._extra_headers()],
            })
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
                keepalive = self.options.keepalive
                while True:
                    with anyio.move_on_after(keepalive) as timer:
                        lines = await mailbox.take(token)
                    if timer.cancelled_caught:
                        body = b":\n\n"
                    elif lines is None:
                        break
                    else:
                        parts: list[bytes] = []
                        for item in lines:
                            parts += (b"data: ", item, b"\n\n")
                        body = b"".join(parts)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            connection.release(session_id, mailbox, token)

    # -- DELETE -------------------------------------------------------------------------------

    async def _delete(self, send: Send, headers: dict[str, str]) -> None:
        connection_id = headers.get("acp-connection-id")
        if not connection_id:
            await _text(send, 400, "Missing Acp-Connection-Id")
            return
        if self._lookup(connection_id, headers) is None:
            await _text(send, 404, "Unknown Acp-Connection-Id")
            return
        connection = self.registry.remove(connection_id)
        if connection is not None:
            connection.shutdown(discard=True)
        await _empty(send, 202, self._extra_headers())

    def _principal_full(self, agent: Agent, principal: str) -> RequestError | None:
        """The refusal of one more connection for ``principal`` past ``max_principal_connections``, if any."""
        cap = (self.options.limits or agent.limits).max_principal_connections
        if cap is None or (held := self.registry.held_by(principal)) < cap:
            return None
        return limit_error("max_principal_connections", cap, f"{held} connections of this user are open")

    def _extra_headers(self) -> list[tuple[bytes, bytes]]:
        return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in self.options.extra_headers]

    # -- WebSocket ----------------------------------------------------------------------------

    async def _websocket(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str], admitted: Admitted | Refusal
    ) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        if not isinstance(admitted, Admitted):
            await _deny_socket(scope, send, admitted)
            return
        if self.registry.full() or self._closing:
            await _deny_socket(scope, send, (503, "Too many connections" if not self._closing else "Shutting down"))
            return

        async def send_lines(lines: list[bytes]) -> None:
            for line in lines:
                await send({"type": "websocket.send", "text": line.decode("utf-8", "replace")})

        agent = self._new_agent()
        refusal = self._principal_full(agent, admitted.principal)
        if refusal is not None:
            await _refuse_socket(receive, send, admitted.subprotocol, refusal)
            return
        connection = RemoteConnection(
            agent, "websocket", self.options, credential=credential_digest(headers.get("authorization")),
            send_lines=send_lines, store=await self._shared_store(agent), active=self.sessions,
            principal=admitted.principal,
        )
        self.registry.add(connection)
        state = _SocketState()
        try:
            accept: dict[str, Any] = {"type": "websocket.accept", "headers": [
                (b"acp-connection-id", connection.id.encode()), *self._extra_headers()]}
            if admitted.subprotocol is not None:
                accept["subprotocol"] = admitted.subprotocol
            await send(accept)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._run_socket, connection, send, state)
                if admitted.token is not None and not isinstance(self.options.token, str):
                    tg.start_soon(self._recheck, connection, state, admitted)
                await self._read_frames(connection, receive, state)
        finally:
            self.registry.forget(connection)
            connection.shutdown(discard=True)

    async def _recheck(self, connection: RemoteConnection, state: _SocketState, admitted: Admitted) -> None:
        """Ask the token callable again every ``recheck_interval`` seconds; close the socket once it refuses
        the credential or names another principal."""
        token = self.options.token
        assert token is not None and admitted.token is not None
        while True:
            with anyio.move_on_after(self.options.recheck_interval):
                await connection.done.wait()
                return
            try:
                principal = await principal_of(token, admitted.token)
            except Exception:
                logger.exception("acp: re-checking the credential of connection %s failed", connection.id)
                principal = None
            if principal != admitted.principal:
                self._close_socket(connection, state, 1008, "Credential no longer accepted")
                return

    async def _run_socket(self, connection: RemoteConnection, send: Send, state: _SocketState) -> None:
        try:
            await connection.run()
        finally:
            self.registry.forget(connection)
            if not state.client_gone:
                if state.close is not None:
                    code, reason = state.close
                elif connection.close_reason is not None:
                    code, reason = 1008, connection.close_reason[:120]
                elif self._closing:
                    code, reason = 1001, "Server shutting down"
                else:
                    code, reason = 1000, ""
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": code, "reason": reason})

    async def _read_frames(self, connection: RemoteConnection, receive: Receive, state: _SocketState) -> None:
        limit = self.options.max_body_bytes
        while True:
            event = await receive()
            kind = event["type"]
            if kind == "websocket.disconnect":
                state.client_gone = True
                connection.shutdown(discard=True)
                return
            if kind != "websocket.receive" or connection.closing:
                continue
            connection.touch()
            text = event.get("text")
            if text is None:
                logger.debug("acp: ignoring a binary WebSocket frame on connection %s", connection.id)
                continue
            data = text.encode("utf-8", "surrogatepass")
            if len(data) > limit:
                self._close_socket(connection, state, 1009, f"Message exceeds {limit} bytes")
                return
            try:
                message = orjson.loads(data)
            except orjson.JSONDecodeError:
                connection.runtime.connection.send_raw(_PARSE_ERROR + b"\n")
                continue
            if isinstance(message, list):
                connection.runtime.connection.send_raw(_BATCH_ERROR + b"\n")
                continue
            if not isinstance(message, dict):
                connection.runtime.connection.send_raw(_INVALID_REQUEST + b"\n")
                continue
            if not state.initialize_seen:
                if "method" not in message and ("id" in message or "result" in message or "error" in message):
                    continue  # a stray response before initialize: ignored
                if not _is_initialize(message):
                    self._close_socket(connection, state, 1002, "First message must be initialize")
                    return
                if message.get("id") is None:
                    self._close_socket(connection, state, 1002, "Initialize request must include an ID")
                    return
                state.initialize_seen = True
            elif _is_initialize(message):
                refusal = RequestError.invalid_request("Initialize not allowed on existing connection")
                connection.runtime.connection.send_raw(
                    orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": refusal.to_dict()}) + b"\n")
                continue
            if "method" in message and "id" in message:
                request_id = message["id"]
                if isinstance(request_id, str) and len(request_id) > self.options.max_id_length:
                    self._close_socket(connection, state, 1008,
                                       f"Request ID exceeds max_id_length ({self.options.max_id_length})")
                    return
                await connection.wait_for_writer()
            try:
                await connection.inbox.put(_one_line(data))
            except anyio.ClosedResourceError:
                continue

    @staticmethod
    def _close_socket(connection: RemoteConnection, state: _SocketState, code: int, reason: str) -> None:
        logger.warning("acp: closing WebSocket connection %s: %s", connection.id, reason)
        state.close = (code, reason)
        connection.shutdown(discard=True)


# -- helpers --------------------------------------------------------------------------------------


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


def _is_initialize(message: dict[str, Any]) -> bool:
    return message.get("jsonrpc") == "2.0" and "id" in message and message.get("method") == "initialize"


def _answers(line: bytes, request_id: Any) -> bool:
    try:
        answer = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(answer, dict) and "method" not in answer and id_key(answer.get("id")) == id_key(request_id)


def _one_line(body: bytes) -> bytes:
    # Valid JSON holds raw line breaks only as whitespace between tokens, so blanking them keeps the message.
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    return body + b"\n"


async def _read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes | None:
    length = headers.get("content-length", "").strip()
    if length.isdigit() and int(length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _text(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await _json(send, status, text.encode(), [(b"content-type", b"text/plain; charset=utf-8"), *(headers or [])])


async def _json(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    fields = headers or []
    if not any(name == b"content-type" for name, _ in fields):
        fields = [(b"content-type", b"application/json"), *fields]
    await send({"type": "http.response.start", "status": status,
                "headers": [*fields, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _empty(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str, allowed: tuple[str, ...] | Any) -> Send:
    """``send`` adding the CORS headers to the answer if ``origin`` is allowed (the checks refuse it otherwise)."""
    if not origin_allowed(origin, allowed):
        return send
    extra = cors_headers(origin)

    async def cors_send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return cors_send


async def _refuse(send: Send, refusal: Refusal) -> None:
    status, text = refusal
    extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    await _text(send, status, text, extra)


async def _refuse_socket(receive: Receive, send: Send, subprotocol: str | None, error: RequestError) -> None:
    """Accept a WebSocket only to answer its first request with ``error`` (a limit, as JSON-RPC), then close it
    (1008); a client that sends nothing within `_REFUSAL_WAIT` seconds gets the close alone."""
    accept: dict[str, Any] = {"type": "websocket.accept"}
    if subprotocol is not None:
        accept["subprotocol"] = subprotocol
    await send(accept)
    request_id: Any = None
    with anyio.move_on_after(_REFUSAL_WAIT):
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            if event["type"] == "websocket.receive" and event.get("text") is not None:
                with contextlib.suppress(orjson.JSONDecodeError):
                    message = orjson.loads(event["text"])
                    request_id = message.get("id") if isinstance(message, dict) else None
                break
    with contextlib.suppress(Exception):  # the client may be gone
        if request_id is not None:
            answer = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})
            await send({"type": "websocket.send", "text": answer.decode()})
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})


async def _deny_socket(scope: Scope, send: Send, refusal: Refusal) -> None:
    status, text = refusal
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": text.encode()})
    else:
        await send({"type": "websocket.close", "code": 1008})
