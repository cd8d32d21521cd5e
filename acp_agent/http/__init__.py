"""Serve an agent to remote clients over ACP's Streamable HTTP and WebSocket transport.

``asgi_app(agent)`` is an ASGI application for any ASGI server or for mounting in an existing
Starlette/FastAPI app; ``run_http(agent)`` serves it on uvicorn (the ``acp-agent-sdk[http]`` extra).
Each client connection gets its own runtime, exactly as a stdio connection; all of them keep their
sessions in one store, so a client resumes its session on a new connection (or on another replica
sharing a PostgreSQL store), and a session is active on one connection at a time
(`acp_agent.http.sessions`). Nothing here is imported by ``import acp_agent`` or by a stdio agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._util.lazy import publish
from ..agent import Agent
from ..store import SessionStore
from .app import AcpApp
from .guard import Bounds
from .options import DEFAULT_PATH, HttpOptions, TokenCheck

__all__ = ["DEFAULT_PATH", "AcpApp", "Bounds", "HttpOptions", "TokenCheck", "asgi_app", "run_http", "serve_http"]


def asgi_app(agent: Agent | Callable[[], Agent], *, store: SessionStore | None = None, **options: Any) -> AcpApp:
    """The ASGI application serving ``agent`` (an instance shared by all connections, or a factory
    called once per connection); ``options`` are the fields of [`HttpOptions`][acp_agent.http.HttpOptions].

    ``store`` keeps the sessions of every connection (default: ``agent.store``, else the agent's served
    SQLite file, ``NAME.served.sqlite3``, never the one [`run_stdio`][acp_agent.run_stdio] uses): a client can resume
    its session on a new connection, and servers sharing a PostgreSQL store resume each other's sessions.
    """
    return AcpApp(agent, HttpOptions(**options), store=store)


def run_http(agent: Agent | Callable[[], Agent], *, host: str = "127.0.0.1", port: int = 8000,
             uvloop: bool | None = None, **options: Any) -> None:
    """Serve ``agent`` at ``http://host:port/acp`` on uvicorn until SIGINT/SIGTERM (loopback by default).

    ``options`` are the fields of [`HttpOptions`][acp_agent.http.HttpOptions], plus ``store`` (as for
    [`asgi_app`][acp_agent.http.asgi_app]), ``ready`` (called with the URL once the server listens),
    ``bounds`` (a [`Bounds`][acp_agent.http.Bounds]: what a peer may cost before the app sees its request;
    default: 4 sockets per ``max_connections``, below the descriptor limit) and
    ``uvicorn_settings`` (a dict of extra ``uvicorn.Config`` settings, e.g. ``ssl_certfile``). It runs on asyncio, on
    uvloop's event loop if ``uvloop=True`` or ``ACP_AGENT_UVLOOP=1`` (as for [`run_stdio`][acp_agent.run_stdio]).
    Logging goes to stderr. Needs the ``http`` extra (``pip install 'acp-agent-sdk[http]'``).
    """
    from .server import run_http as _run

    _run(agent, host=host, port=port, uvloop=uvloop, **options)


async def serve_http(agent: Agent | Callable[[], Agent], *, host: str = "127.0.0.1", port: int = 8000,
                     **options: Any) -> None:
    """Like [`run_http`][acp_agent.http.run_http], inside an already running asyncio event loop."""
    from .server import serve_http as _serve

    await _serve(agent, host=host, port=port, **options)


publish(__name__, __all__)
