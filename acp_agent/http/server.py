"""Run the ASGI app on uvicorn: bind (loopback by default), report the URL, close connections cleanly.

On SIGINT/SIGTERM the server stops taking connections, closes every ACP connection the way a
stdio agent shuts down (sessions stop their work, their processes are stopped, the last
updates reach clients still reading), then exits with status 0.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import uvicorn

from .._util import awaiting, environment, eventloop
from ..agent import Agent
from ..store import SessionStore
from .app import AcpApp
from .connections import SHUTDOWN_MARGIN
from .options import HttpOptions
from .security import LOOPBACK_HOSTS, is_loopback

__all__ = ["bind_socket", "run_http", "serve_http", "server_url"]

logger = logging.getLogger(__name__)


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0 picks a free one), ready for the server."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def server_url(host: str, port: int, path: str | None, *, tls: bool = False) -> str:
    """The URL clients connect to."""
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return f"{'https' if tls else 'http'}://{shown}:{port}{path or '/'}"


class _Server(uvicorn.Server):
    """uvicorn, closing the ACP connections first when it shuts down and exiting 0 on a signal."""

    def __init__(self, config: uvicorn.Config, app: AcpApp, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._acp = app
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._on_started()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self._acp.close()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # As uvicorn's, without raising the signal again afterwards: a clean shutdown exits 0.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


# uvicorn hands this logger to the websockets library, which logs every frame at DEBUG with the start and the end of
# its payload: prompt text, and the headers of ``providers/set`` (API keys).
FRAME_TRACE_LOGGER = "uvicorn.error"


TESTED_UVICORN: Final = ((0, 54), (0, 54))
"""The uvicorn releases (lowest and highest ``(major, minor)``) whose sans-I/O WebSocket protocol
`AcpWebSocketProtocol` was tested on: it uses that class's internals."""


def websocket_protocol() -> type | str:
    """uvicorn's WebSocket protocol for the server: `AcpWebSocketProtocol`
    on a uvicorn in `TESTED_UVICORN`, else ``"auto"`` (uvicorn's own choice: the same wire, slower
    with many busy connections)."""
    try:
        version = tuple(int(part) for part in uvicorn.__version__.split(".")[:2])
    except ValueError:
        version = (0, 0)
    low, high = TESTED_UVICORN
    if not low <= version <= high:
        logger.info("acp: uvicorn %s is not one AcpWebSocketProtocol was tested on; using uvicorn's own WebSocket "
                    "protocol", uvicorn.__version__)
        return "auto"
    try:
        from .websocket import AcpWebSocketProtocol
    except ImportError:
        return "auto"
    return AcpWebSocketProtocol


def quiet_frame_trace() -> None:
    """Keep uvicorn's WebSocket frame trace out of a DEBUG log, unless the application set that logger's level."""
    frames = logging.getLogger(FRAME_TRACE_LOGGER)
    if frames.level == logging.NOTSET and frames.getEffectiveLevel() < logging.INFO:
        frames.setLevel(logging.INFO)


async def serve_http(
    agent: Agent | Callable[[], Agent],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: Callable[[str], None] | None = None,
    uvicorn_settings: dict[str, Any] | None = None,
    store: SessionStore | None = None,
    **options: Any,
) -> None:
    """Serve ``agent`` on uvicorn in the running asyncio loop until a signal (see `run_http`)."""
    if "allowed_hosts" not in options and is_loopback(host):
        options["allowed_hosts"] = LOOPBACK_HOSTS
    settings = HttpOptions(**options)
    quiet_frame_trace()
    app = AcpApp(agent, settings, store=store)
    extra = dict(uvicorn_settings or {})
    sock = bind_socket(host, port)
    bound_port = sock.getsockname()[1]
    url = server_url(host, bound_port, settings.path, tls=bool(extra.get("ssl_certfile")))
    config_args: dict[str, Any] = {
        "lifespan": "on",
        "log_config": None,
        "access_log": False,
        "ws_max_size": settings.max_body_bytes,
        "ws_per_message_deflate": False,
        # Longer than clients keep idle connections (undici: 4 s), so a client never reuses a socket the server is
        # closing (a POST would fail with a reset under load).
        "timeout_keep_alive": 65,
        "timeout_graceful_shutdown": int(settings.shutdown_timeout + 2 * SHUTDOWN_MARGIN) + 1,
        **extra,
    }
    if "ws" not in config_args:
        config_args["ws"] = websocket_protocol()
    config = uvicorn.Config(app, **config_args)

    def started() -> None:
        logger.info("acp: serving at %s", url)
        if ready is not None:
            ready(url)

    server = _Server(config, app, started)
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()


def run_http(agent: Agent | Callable[[], Agent], *, host: str = "127.0.0.1", port: int = 8000,
             uvloop: bool | None = None, **options: Any) -> None:
    """Serve ``agent`` on uvicorn until SIGINT/SIGTERM (see [`acp_agent.http.run_http`][acp_agent.http.run_http]), on
    asyncio (uvloop's loop if ``uvloop=True`` or ``ACP_AGENT_UVLOOP=1``: `acp_agent._util.eventloop`)."""
    environment.exit_on_bad_environment()  # one line on stderr and exit status 2, before anything is served
    if not logging.getLogger().handlers:
        logging.basicConfig(
            stream=sys.stderr,
            level=environment.read(environment.LOG_LEVEL),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    awaiting.log_never_awaited()  # a forgotten `await session.say(...)`: one error naming the call
    eventloop.run(lambda: serve_http(agent, host=host, port=port, **options), backend="asyncio", uvloop=uvloop)
