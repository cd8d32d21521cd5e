"""The ASGI application: the entry point, its lifespan, and the routing to ACP's two remote transports on one path.

A request on the ACP path passes the security checks (`acp_agent.http.security`) and, for a browser, CORS; an HTTP
request then goes to Streamable HTTP (`acp_agent.http.streamable`), a WebSocket upgrade to the WebSocket transport
(`acp_agent.http.websocket`). What both share (the agent, the settings, the live connections, the one store) is the
app's `Host` (`acp_agent.http.host`).

HTTP connections run in the app's task group, which lives as long as the ASGI lifespan (or
[`AcpApp.lifespan`][acp_agent.http.AcpApp.lifespan] when the app is mounted in another one); a WebSocket connection runs
in its own request.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any, Final

import anyio

from ..agent import Agent
from ..schema.session_reach import SESSION_METHODS
from ..store import SessionStore
from .asgi import Receive, Scope, Send, request_headers, send_empty, send_text
from .connections import SHUTDOWN_MARGIN, ConnectionRegistry
from .host import Host
from .options import HttpOptions
from .security import check_request, cors_headers, origin_allowed
from .sessions import ActiveSessions
from .streamable import StreamableHttp
from .websocket import WebSocketTransport, deny_socket

__all__ = ["PROBES", "AcpApp", "Receive", "Scope", "Send"]

logger = logging.getLogger(__name__)

PROBES: Final = ("/healthz", "/readyz")
"""The paths of the liveness and readiness probes (no credential needed; they say nothing about sessions)."""


class AcpApp:
    """An ASGI application serving one agent over Streamable HTTP and WebSocket.

    ``agent`` is an [`Agent`][acp_agent.Agent] shared by every connection, or a callable returning a new one
    for each connection. Run it on any ASGI server with lifespan support, or mount it in another
    app and enter [`lifespan`][acp_agent.http.AcpApp.lifespan] from that app's lifespan.

    Every connection keeps its sessions in one ``store`` (default: the agent's ``store``, else its served
    SQLite file, ``NAME.served.sqlite3``, not the stdio one), so a client can resume a session on a new
    connection, or on another server sharing the store; a session is active on one connection at
    a time (see `acp_agent.http.sessions`). The store is closed when the lifespan ends.
    """

    def __init__(self, agent: Agent | Callable[[], Agent], options: HttpOptions | None = None, *,
                 store: SessionStore | None = None) -> None:
        self._host = Host(agent, options if options is not None else HttpOptions(), store)
        self._http = StreamableHttp(self._host)
        self._websocket = WebSocketTransport(self._host)

    @property
    def options(self) -> HttpOptions:
        """The server settings."""
        return self._host.options

    @options.setter
    def options(self, options: HttpOptions) -> None:
        self._host.options = options

    @property
    def registry(self) -> ConnectionRegistry:
        """The live connections."""
        return self._host.registry

    @property
    def sessions(self) -> ActiveSessions:
        """Which connection has each session active."""
        return self._host.sessions

    @property
    def store(self) -> SessionStore | None:
        """The store every connection keeps its sessions in (``None`` until known: an agent factory
        that is not a class is asked on the first connection)."""
        return self._host.store

    # -- lifespan -----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """Host HTTP connections while the context is open; on exit close every connection.

        ``app`` is ignored, so this fits Starlette's ``lifespan=`` directly.
        """
        host = self._host
        async with anyio.create_task_group() as tg:
            host.task_group = tg
            host.closing = False
            tg.start_soon(self._expire_idle)
            if self.options.retention is not None:
                tg.start_soon(self._expire_stored, self.options.retention * 86400)
            try:
                yield
            finally:
                await self.close()
                host.task_group = None
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    try:
                        await host.sessions.leases.close()
                    except Exception:
                        logger.exception("acp: closing the session leases failed")
                    try:
                        await host.close_store()
                    except Exception:
                        logger.exception("acp: closing the session store failed")

    async def close(self) -> None:
        """Close every connection: sessions stop their work, their last output is delivered where a
        client still reads it, then event streams end and sockets close (code 1001)."""
        self._host.closing = True
        with anyio.CancelScope(shield=True):
            connections = list(self.registry)
            for connection in connections:
                connection.shutdown(discard=False)
            with anyio.move_on_after(self.options.shutdown_timeout + 2 * SHUTDOWN_MARGIN):
                for connection in connections:
                    await connection.done.wait()

    async def _expire_stored(self, max_age: float) -> None:
        """Delete stored sessions unused for ``max_age`` seconds: now, then every hour (or sooner for short ages)."""
        while True:
            try:
                await self._host.expire_sessions(max_age)
            except Exception:
                logger.exception("acp: expiring stored sessions failed (tried again later)")
            await anyio.sleep(min(3600.0, max(1.0, max_age / 4)))

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

    # -- routing ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind not in ("http", "websocket"):
            return
        if kind == "http" and scope.get("path") in PROBES and scope.get("method") in ("GET", "HEAD"):
            await self._probe(send, scope["path"])
            return
        headers = request_headers(scope)
        if not self._path_matches(scope):
            if kind == "http":
                await send_text(send, 404, "Not Found")
            else:
                await receive()
                await deny_socket(scope, send, (404, "Not Found"))
            return
        origin = headers.get("origin")
        if kind == "http" and origin is not None and self.options.allowed_origins:
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                await self._preflight(send, origin)  # no credential: a browser sends none on a preflight
                return
            send = _with_cors(send, origin, self.options.allowed_origins)
        admitted = await check_request(headers, self.options, scope.get("server"))
        if kind == "websocket":
            await self._websocket.handle(scope, receive, send, headers, admitted)
        else:
            target = scope.get("raw_path") or scope.get("path", "/").encode()
            query = scope.get("query_string", b"")
            await self._http.handle(receive, send, scope["method"], headers, admitted,
                                    (target + (b"?" + query if query else b"")).decode("latin-1"))

    async def _probe(self, send: Send, path: str) -> None:
        """``/healthz``: 200 while the process serves. ``/readyz``: 200 when new clients should come here (the store
        answers, no shutdown under way), else 503 with the reason."""
        host = self._host
        if path == "/healthz":
            await send_text(send, 200, "ok")
        elif host.draining or host.closing:
            await send_text(send, 503, "draining")
        elif not await host.store_reachable():
            await send_text(send, 503, "session store unreachable")
        else:
            await send_text(send, 200, "ready")

    async def drain(self) -> None:
        """A graceful shutdown: ``/readyz`` answers 503 at once; after ``drain_delay`` seconds (for a balancer to
        take this replica out) every connection is closed as `close` does, its sessions saved and their leases
        given back, so clients reconnect through another replica and resume them there."""
        self._host.draining = True
        if self.options.drain_delay > 0:
            logger.info("acp: draining: closing every connection in %.1f s", self.options.drain_delay)
            await anyio.sleep(self.options.drain_delay)
        await self.close()

    async def _preflight(self, send: Send, origin: str) -> None:
        if not origin_allowed(origin, self.options.allowed_origins):
            await send_text(send, 403, "Forbidden")
            return
        await send_empty(send, 204, cors_headers(origin, preflight=True))

    def _path_matches(self, scope: Scope) -> bool:
        wanted = self.options.path
        if wanted is None:
            return True
        path: str = scope.get("path", "")
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        return (path or "/") == wanted


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


def __getattr__(name: str) -> Any:
    """``SESSION_SCOPED_METHODS``, deprecated: the methods that name a session are one column of the method table."""
    if name == "SESSION_SCOPED_METHODS":
        warnings.warn("acp_agent.http.app.SESSION_SCOPED_METHODS is deprecated and will be removed in the next "
                      "release; use acp_agent.schema.session_reach.SESSION_METHODS", DeprecationWarning, stacklevel=2)
        return SESSION_METHODS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
