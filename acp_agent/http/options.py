"""The settings of an HTTP/WebSocket agent server, in one frozen object.

Every limit has a default that is safe on an open network; [`asgi_app`][acp_agent.http.asgi_app]
and [`run_http`][acp_agent.http.run_http] take the fields as keyword arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..auth import Workspace
from ..limits import Limits

__all__ = ["DEFAULT_PATH", "HttpOptions", "TokenCheck"]

DEFAULT_PATH: Final = "/acp"
"""The endpoint path the server answers on (the RFD's ``/acp``)."""

TokenCheck = Callable[[str], str | bool | Awaitable[str | bool | None] | None]
"""A callable that decides on a presented bearer token (sync or async): it returns the principal the
token stands for (a non-empty string), or ``None`` (or ``False``) to refuse it; ``True`` means the
principal ``"default"``."""


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How an agent server treats its clients: security checks, limits and timeouts."""

    path: str | None = DEFAULT_PATH
    """The one path served (``None``: every path, for mounting under a prefix)."""
    token: str | TokenCheck | None = None
    """Bearer token every request and upgrade must carry (``Authorization: Bearer ...``; a browser's
    WebSocket: the ``acp.bearer.`` subprotocol), standing for the principal ``"default"``; or a callable
    returning the principal of the presented token (``None``: refused); ``None`` checks nothing."""
    recheck_interval: float = 60.0
    """Seconds between re-checks of an open WebSocket's or event stream's credential with a ``token`` callable: once
    it is refused (or stands for another principal) the connection ends (a socket is closed with code 1008). HTTP
    also checks every request: one whose token now stands for another principal ends its connection (404)."""
    allowed_origins: Sequence[str] = ()
    """Browser origins allowed (``"https://app.example"``; ``"*"`` allows any). A request with an
    ``Origin`` header not listed is refused 403; requests without one (non-browser clients) pass."""
    allowed_hosts: Sequence[str] | None = None
    """Host names the ``Host`` header may carry (any port); ``None`` accepts any. [`run_http`][acp_agent.http.run_http]
    sets the loopback names when it binds to loopback (a guard against DNS rebinding)."""
    max_connections: int = 1000
    """Client connections (HTTP and WebSocket) served at once; one more is refused 503."""
    idle_timeout: float = 300.0
    """Seconds an HTTP connection with no open stream and no request lives on before it is closed."""
    max_body_bytes: int = 16 * 1024 * 1024
    """Largest POST body or WebSocket message, in bytes (larger ones: 413, or close code 1009)."""
    max_buffered_bytes: int = 64 * 1024 * 1024
    """Output held for one connection's clients before the agent's sends wait for them to read."""
    max_output_stall: float = 60.0
    """Seconds a connection may stay over ``max_buffered_bytes`` without its client reading
    anything; then it is closed (the stalled-client policy)."""
    max_id_length: int = 1024
    """Longest session id or string request id accepted in headers and messages."""
    keepalive: float = 15.0
    """Seconds between SSE comments sent on an idle event stream."""
    limits: Limits | None = None
    """Resource limits of each connection's runtime (default: the agent's ``limits``)."""
    shutdown_timeout: float = 5.0
    """Seconds a closing connection gives its sessions to stop their work."""
    extra_headers: Sequence[tuple[str, str]] = field(default=())
    """Headers added to every HTTP answer (for example a ``Set-Cookie`` for load-balancer affinity)."""
    retention: float | None = None
    """Days a stored session is kept after its last use (``updated_at``): older ones are deleted at start-up and
    every hour after (``None``: kept until deleted; ``serve --retention DAYS``)."""
    workspace: Workspace | None = None
    """Where the sessions of remote clients may live (``None``: the agent's ``workspace``; ``serve`` passes the
    directory it was started in, or ``--workspace DIR``, when the agent declares none)."""
    allow_client_mcp: bool = False
    """Let remote clients name stdio and HTTP MCP servers in ``session/new``/``resume``/``fork``. **Risk**: a stdio
    entry is a command line the client chooses, run on this machine as the server's user (remote code execution for
    every token holder), and an HTTP entry makes the server send requests, with headers the client chooses, from its
    own network position (server-side request forgery). Off: neither is advertised, and such an entry is refused
    ``-32602``."""

    advertise_url: str | None = None
    """This replica's own URL on the replicas' network (``http://HOST:PORT``), with ``peers``: connection ids name
    the replica holding them, and a Streamable HTTP request that lands on another replica is forwarded there
    (`acp_agent.http.peers`), so a balancer needs no affinity."""
    peers: Sequence[str] = ()
    """The other replicas' advertised URLs (this one's may be listed too): where requests may be forwarded."""
    turn_grace: float = 30.0
    """Seconds a WebSocket connection that dropped with a turn running is kept, its turn going on and its output
    kept, for the client to reattach (``_acp/reattach``); 0 ends it at once, cancelling the turn."""
    replay_messages: int = 1024
    """Messages kept per stream for a client that reconnects with a cursor (SSE ``Last-Event-ID``, or the
    WebSocket reattach cursor); an older cursor is refused and the client resumes its sessions instead."""
    drain_delay: float = 0.0
    """Seconds between the start of a graceful shutdown (``/readyz`` answers 503 at once) and the closing of the
    connections, for a balancer to stop sending new clients here."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_body_bytes", "max_buffered_bytes", "max_id_length", "replay_messages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"HttpOptions.{name} must be a positive integer, got {value!r}")
        for name in ("idle_timeout", "max_output_stall", "keepalive", "shutdown_timeout", "recheck_interval",
                     "turn_grace", "drain_delay"):
            value = getattr(self, name)
            lowest_ok = 0 if name in ("shutdown_timeout", "turn_grace", "drain_delay") else 1e-9
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= lowest_ok:
                raise ValueError(f"HttpOptions.{name} must be a positive number, got {value!r}")
        for url in (*self.peers, *([self.advertise_url] if self.advertise_url else [])):
            if not (isinstance(url, str) and url.startswith("http://") and len(url) > len("http://")):
                raise ValueError(f"HttpOptions peers and advertise_url must be http://HOST:PORT, got {url!r}")
        if self.retention is not None and (not isinstance(self.retention, (int, float))
                                           or isinstance(self.retention, bool) or not self.retention > 0):
            raise ValueError(f"HttpOptions.retention must be a positive number of days or None, got {self.retention!r}")
        if self.path is not None and not self.path.startswith("/"):
            raise ValueError(f"HttpOptions.path must start with '/', got {self.path!r}")
