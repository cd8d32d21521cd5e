"""The client at the other end of a connection: who it is, what it can do, and calls to it.

One [`ClientPeer`][acp_agent.ClientPeer] per connection (``session.client`` in a hook; ``login.client`` in
[`Agent.login`][acp_agent.Agent.login]). Its info and capabilities are those of *this* connection's
``initialize``, so an agent serving several clients at once (HTTP, WebSocket) never mixes
them up. Extension methods of the client (``_vendor/...``) are called through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
from pydantic import BaseModel

from ._wire.connection import Connection
from .errors import RequestError
from .mcp import McpRouter
from .schema import AuthStatusUpdateNotification, ClientCapabilities, Implementation, InitializeRequest

__all__ = ["ClientPeer"]


class ClientPeer:
    """The client of one connection (see the module docstring)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        """The JSON-RPC connection to the client (the SDK's; agent code uses the methods below)."""
        self.initialize: InitializeRequest | None = None
        """The client's ``initialize`` request on this connection, once received."""
        self.mcp = McpRouter(connection)
        """[unstable] This connection's MCP-over-ACP traffic (agent code uses ``session.acp_mcp_servers``)."""

    @property
    def info(self) -> Implementation | None:
        """The client's name and version, once it initialized."""
        return self.initialize.info if self.initialize is not None else None

    @property
    def capabilities(self) -> ClientCapabilities:
        """What the client advertised (empty before ``initialize``)."""
        return self.initialize.capabilities if self.initialize is not None else ClientCapabilities()

    @property
    def accepts_forms(self) -> bool:
        """Whether the client advertised form-mode elicitation (``capabilities.elicitation.form`` in ``initialize``)."""
        elicitation = self.capabilities.elicitation
        return elicitation is not None and elicitation.form is not None

    @property
    def accepts_urls(self) -> bool:
        """Whether the client advertised URL-mode elicitation (``capabilities.elicitation.url`` in ``initialize``)."""
        elicitation = self.capabilities.elicitation
        return elicitation is not None and elicitation.url is not None

    async def request(self, method: str, params: BaseModel | Mapping[str, Any] | None = None, *,
                      timeout: float | None = None) -> Any:
        """Call one of the client's extension methods (``_vendor/...``) and return its result.

        Raises [`RequestError`][acp_agent.RequestError] with the client's error (``-32601`` if it
        has no such method), or ``-32800`` after ``timeout`` seconds; a cancelled or timed-out
        call is withdrawn with ``$/cancel_request``.
        """
        _check_extension(method)
        with anyio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
            return await self.connection.request(method, params if params is not None else {})
        if scope.cancelled_caught:
            raise RequestError.request_cancelled(f"no answer to {method} within {timeout} s")
        raise AssertionError("unreachable")  # pragma: no cover

    def notify(self, method: str, params: BaseModel | Mapping[str, Any] | None = None) -> None:
        """Send one of the client's extension notifications (``_vendor/...``)."""
        _check_extension(method)
        self.connection.notify(method, params if params is not None else {})

    def report_auth_status(self, status: AuthStatusUpdateNotification) -> None:
        """[unstable] Tell the client the agent's login state changed (``auth/status_update``)."""
        self.connection.notify("auth/status_update", status)


def _check_extension(method: str) -> None:
    if not method.startswith("_"):
        raise ValueError(f"{method!r} is not an extension method: extension methods start with '_'")
