"""Run the ASGI app on uvicorn: bind (loopback by default), report the URL, close connections cleanly.

On SIGINT/SIGTERM the server stops taking connections, closes every ACP connection the way a
stdio agent shuts down (sessions stop their work, their processes are stopped, the last
updates reach clients still reading), then exits with status 0.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string

from .._util import eventloop, prelude
from .._util.episodes import EpisodeFilter
from ..agent import Agent
from ..store import SessionStore
from .app import AcpApp
from .connections import SHUTDOWN_MARGIN
from .guard import Bounds, descriptor_room, guarded_protocol
from .options import HttpOptions
from .security import LOOPBACK_HOSTS, is_loopback

__all__ = [
    "WEBSOCKET_PROTOCOL", "bind_socket", "describe_stack", "exit_quietly_on_signals",
    "guard_bounds", "http_protocol", "run_http", "serve_http",
    "server_url",
]

if TYPE_CHECKING:  # uvicorn's protocols are asyncio's; this module never awaits through asyncio
    import asyncio

logger = logging.getLogger(__name__)


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0 picks a free one), ready for the server.

    The socket names its protocol (``IPPROTO_TCP``): asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) only on accepted sockets whose protocol says TCP, and with it on, a message
    written right after another small one waits for the client's delayed ACK (~40 ms on Linux).
    """
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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


@contextlib.contextmanager
def exit_quietly_on_signals(server: uvicorn.Server) -> Iterator[None]:
    """As uvicorn's ``Server.capture_signals``, without raising the signal again afterwards: SIGINT/SIGTERM
    shut ``server`` down and the process exits 0 (a ``capture_signals`` override returns this)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    originals = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in originals.items():
            signal.signal(sig, handler)


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
        await self._acp.drain()
        await super().shutdown(sockets)

    def capture_signals(self) -> contextlib._GeneratorContextManager[None]:
        return exit_quietly_on_signals(self)


# uvicorn hands this logger to the websockets library, which logs every frame at DEBUG with the start and the end of
# its payload: prompt text, and the headers of ``providers/set`` (API keys).
FRAME_TRACE_LOGGER = "uvicorn.error"


WEBSOCKET_PROTOCOL: Final = "websockets-sansio"
"""uvicorn's WebSocket implementation the server uses (its ``ws`` setting): the ``websockets`` library's
sans-I/O protocol."""

NOISY_FAILURES: Final = (
    ("asyncio", "socket.accept() out of system resource"),
    ("uvicorn.error", "Invalid HTTP request received."),
    # A session database outage: every save, lease and request fails alike until it is back.
    ("acp_agent.store.keeper", "acp: %s (retried at once)"),
    ("acp_agent.store.keeper", "acp: %s (retried at the session's next save)"),
    ("acp_agent.store.keeper", "acp: session %s was closed but could not be saved"),
    ("acp_agent.http.leases", "acp: cannot take the lease of session"),
    ("acp_agent.http.leases", "acp: cannot release the lease of session"),
)
"""Log messages (logger, start of the message) that come once per failing peer or ``accept``: logged once per
episode (`EpisodeFilter`)."""


def http_protocol(setting: str | type[asyncio.Protocol]) -> tuple[type[asyncio.Protocol], str]:
    """uvicorn's HTTP protocol class for its ``http`` setting (``"auto"``, ``"httptools"``, ``"h11"`` or a class),
    resolved as uvicorn resolves it, and the name of the parser that serves."""
    if not isinstance(setting, str):
        return setting, setting.__qualname__
    name = setting
    if name == "auto":
        name = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    protocol: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS[name])
    return protocol, name


def describe_stack(http: str | type[asyncio.Protocol] = "auto", ws: object = WEBSOCKET_PROTOCOL) -> str:
    """Which server path serves, for the start-up line: uvicorn's version, its HTTP parser and WebSocket protocol."""
    shown_ws = ws if isinstance(ws, str) else getattr(ws, "__qualname__", repr(ws))
    return f"uvicorn {uvicorn.__version__}, HTTP: {http_protocol(http)[1]}, WebSocket: {shown_ws}, guarded"


def guard_bounds(settings: HttpOptions) -> Bounds:
    """The server's `Bounds`: four sockets per ``max_connections`` (a Streamable HTTP
    client holds a POST connection and one or more event streams), below the file-descriptor limit, and request
    bodies up to ``max_body_bytes`` (larger ones are refused before the application reads them)."""
    return Bounds(max_sockets=descriptor_room(4 * settings.max_connections), max_body_bytes=settings.max_body_bytes)


@contextlib.contextmanager
def one_line_per_episode() -> Iterator[None]:
    """Log `NOISY_FAILURES` once per episode while the server runs."""
    filters = [(logging.getLogger(name), EpisodeFilter((prefix,))) for name, prefix in NOISY_FAILURES]
    for target, one in filters:
        target.addFilter(one)
    try:
        yield
    finally:
        for target, one in filters:
            target.removeFilter(one)


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
    bounds: Bounds | None = None,
    **options: Any,
) -> None:
    """Serve ``agent`` on uvicorn in the running asyncio loop until a signal (see `run_http`).

    Every connection goes through `acp_agent.http.guard` first (``bounds``, default
    `guard_bounds`); WebSockets are uvicorn's `WEBSOCKET_PROTOCOL` unless
    ``uvicorn_settings`` names another ``ws``."""
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
    config_args.setdefault("ws", WEBSOCKET_PROTOCOL)
    http_setting = config_args.get("http", "auto")
    inner, parser = http_protocol(http_setting)
    bounds = bounds if bounds is not None else guard_bounds(settings)
    config_args["http"] = guarded_protocol(inner, bounds)
    config = uvicorn.Config(app, **config_args)
    if parser == "h11" and "http" not in extra:
        logger.warning("acp: httptools is not installed; uvicorn parses HTTP with h11 (slower)")

    def started() -> None:
        logger.info("acp: serving at %s (%s; at most %d sockets, request heads up to %d bytes and %d fields within "
                    "%.0f s, bodies within %.0f s)", url, describe_stack(http_setting, config_args["ws"]),
                    bounds.max_sockets, bounds.max_head_bytes, bounds.max_header_fields, bounds.head_timeout,
                    bounds.body_timeout)
        if ready is not None:
            ready(url)

    server = _Server(config, app, started)
    try:
        with one_line_per_episode():
            await server.serve(sockets=[sock])
    finally:
        sock.close()


def run_http(agent: Agent | Callable[[], Agent], *, host: str = "127.0.0.1", port: int = 8000,
             uvloop: bool | None = None, **options: Any) -> None:
    """Serve ``agent`` on uvicorn until SIGINT/SIGTERM (see [`acp_agent.http.run_http`][acp_agent.http.run_http]), on
    asyncio (uvloop's loop if ``uvloop=True`` or ``ACP_AGENT_UVLOOP=1``: `acp_agent._util.eventloop`)."""
    prelude.prepare()  # the environment check, logging to stderr, never-awaited calls logged
    eventloop.run(lambda: serve_http(agent, host=host, port=port, **options), backend="asyncio", uvloop=uvloop)
