"""[unstable] MCP-over-ACP: ``mcp/message`` carries MCP traffic for ``type: "acp"`` MCP servers.

The Agent sends MCP requests to the Client as ``mcp/message`` requests; the Client forwards MCP
notifications to the Agent as ``mcp/message`` notifications.
"""

from typing import Any

from .base import Meta, WireModel

__all__ = [
    "McpError",
    "MessageMcpNotification",
    "MessageMcpRequest",
    "MessageMcpResponse",
]


class MessageMcpRequest(WireModel):
    """[unstable] Params of the ``mcp/message`` request (Agent -> Client): one MCP request."""

    server_id: str
    request_id: str
    method: str
    params: dict[str, Any] | None = None
    meta: Meta = None


class MessageMcpNotification(WireModel):
    """[unstable] Params of the ``mcp/message`` notification (Client -> Agent): one MCP notification."""

    server_id: str
    request_id: str
    method: str
    params: dict[str, Any] | None = None
    meta: Meta = None


class McpError(WireModel):
    """[unstable] An MCP error object."""

    code: int
    message: str
    data: Any = None


class MessageMcpResponse(WireModel):
    """[unstable] Result of an ``mcp/message`` request: exactly one of ``result`` or ``error``."""

    result: Any = None
    error: McpError | None = None
    meta: Meta = None
