"""[unstable] MCP servers hosted by the test client, for agents that call them over ACP (``mcp/message``).

[`Client.host_mcp_server`][acp_agent.testing.Client.host_mcp_server] registers a handler under a fresh ``serverId`` and
returns the ``mcpServers`` entry to pass to ``session/new``. The host plays the client's side of the
MCP-over-ACP binding: an unknown ``serverId`` is answered ``-33001``, a duplicate active
``requestId`` ``-32602``, an inner request without the MCP version and capabilities in its
``_meta`` gets an inner MCP ``-32602`` (another version: ``-32022``), and a request the agent
withdraws with ``$/cancel_request`` cancels its handler (``request.withdrawn`` then holds).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._util.ids import new_id
from .._wire.connection import Connection
from ..errors import RequestError
from ..mcp import MCP_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

__all__ = ["HostedMcpRequest", "McpErrorAnswer", "McpHandler", "McpHost"]

_SERVER_UNAVAILABLE = -33001


class McpErrorAnswer(Exception):
    """Raise from a hosted MCP handler to answer with this inner MCP error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(slots=True)
class HostedMcpRequest:
    """One MCP request the agent sent to a hosted server."""

    server_id: str
    request_id: str
    method: str
    params: dict[str, Any] | None
    connection: Connection
    withdrawn: bool = False
    """Set when the agent withdrew the request (``$/cancel_request``) while its handler ran."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set once the handler finished (answered, failed or withdrawn)."""
    started: anyio.Event = field(default_factory=anyio.Event)
    """Set once the handler started."""

    @property
    def arguments(self) -> dict[str, Any]:
        """The ``arguments`` of a ``tools/call`` (empty when absent)."""
        value = (self.params or {}).get("arguments")
        return value if isinstance(value, dict) else {}

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send an MCP notification about this request (an ``mcp/message`` notification), while it runs."""
        if self.done.is_set():
            return
        body: dict[str, Any] = {"serverId": self.server_id, "requestId": self.request_id, "method": method}
        if params is not None:
            body["params"] = dict(params)
        self.connection.notify("mcp/message", body)


McpHandler = Callable[[HostedMcpRequest], Awaitable[Any] | Any]
"""Serves one hosted MCP request (a plain or ``async`` function): returns the MCP result, or raises
[`McpErrorAnswer`][acp_agent.testing.McpErrorAnswer]."""


class McpHost:
    """The client's MCP-over-ACP side: hosted servers by ``serverId`` and the requests they got."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.servers: dict[str, McpHandler] = {}
        """Hosted handlers by ``serverId``."""
        self.requests: list[HostedMcpRequest] = []
        """Every request accepted, in arrival order."""
        self._active: set[tuple[str, str]] = set()

    def add(self, name: str, handler: McpHandler, server_id: str | None = None) -> dict[str, Any]:
        """Host ``handler`` as a server named ``name``; returns its ``mcpServers`` entry."""
        server_id = server_id if server_id is not None else new_id(f"mcpsrv-{name}")
        self.servers[server_id] = handler
        return {"type": "acp", "name": name, "serverId": server_id}

    def accept(self, params: dict[str, Any]) -> HostedMcpRequest:
        """Check one ``mcp/message`` request as it arrives (binding errors answer at once)."""
        server_id, request_id, method = params.get("serverId"), params.get("requestId"), params.get("method")
        inner = params.get("params")
        if not (isinstance(server_id, str) and isinstance(request_id, str) and isinstance(method, str)) or not (
                inner is None or isinstance(inner, dict)):
            raise RequestError.invalid_params("malformed mcp/message envelope")
        if server_id not in self.servers:
            raise RequestError(_SERVER_UNAVAILABLE, "MCP server registration unavailable", {"serverId": server_id})
        if (server_id, request_id) in self._active:
            raise RequestError.invalid_params("duplicate active MCP request ID",
                                              {"serverId": server_id, "requestId": request_id})
        self._active.add((server_id, request_id))
        request = HostedMcpRequest(server_id, request_id, method, inner, self._connection)
        self.requests.append(request)
        return request

    async def serve(self, request: HostedMcpRequest) -> dict[str, Any]:
        """Run the hosted handler for one accepted request and wrap its outcome in the carrier."""
        request.started.set()
        try:
            problem = _meta_problem(request.params)
            if problem is not None:
                return {"error": problem}
            try:
                result = self.servers[request.server_id](request)
                if inspect.isawaitable(result):
                    result = await result
                return {"result": result}
            except McpErrorAnswer as answer:
                error: dict[str, Any] = {"code": answer.code, "message": answer.message}
                if answer.data is not None:
                    error["data"] = answer.data
                return {"error": error}
        except anyio.get_cancelled_exc_class():
            request.withdrawn = True
            raise
        finally:
            self._active.discard((request.server_id, request.request_id))
            request.done.set()


def _meta_problem(params: dict[str, Any] | None) -> dict[str, Any] | None:
    meta = (params or {}).get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    version = meta.get(META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        return {"code": -32602, "message": f"Invalid params: missing {META_PROTOCOL_VERSION} in params._meta"}
    if version != MCP_PROTOCOL_VERSION:
        return {"code": -32022, "message": "Unsupported protocol version",
                "data": {"supported": [MCP_PROTOCOL_VERSION], "requested": version}}
    if not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
        return {"code": -32602, "message": f"Invalid params: missing {META_CLIENT_CAPABILITIES} in params._meta"}
    return None
