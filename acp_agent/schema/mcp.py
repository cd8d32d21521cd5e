"""[unstable] MCP-over-ACP: ``mcp/message`` carries MCP traffic for ``type: "acp"`` MCP servers.

The Agent sends MCP requests to the Client as ``mcp/message`` requests; the Client forwards MCP
notifications to the Agent as ``mcp/message`` notifications.
"""

from typing import Any, Self

from pydantic import model_validator

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
    """[unstable] Result of an ``mcp/message`` request: the inner MCP outcome, ``result`` or ``error``.

    ``result`` is opaque and counts once passed, even as ``None`` (sent as ``null``); ``error``
    counts only when it is an [`McpError`][acp_agent.schema.McpError]. One of the two is required. A sender includes
    exactly one; a response carrying both still validates, and receivers prefer ``result``.
    """

    result: Any = None
    error: McpError | None = None
    meta: Meta = None

    @model_validator(mode="after")
    def _has_an_outcome(self) -> Self:
        if "result" not in self.model_fields_set and self.error is None:
            raise ValueError("an mcp/message response needs result (null allowed) or a non-null error")
        return self
