"""acp-agent: write Agent Client Protocol (ACP) v2 agents in Python.

Subclass :class:`Agent`, implement :meth:`Agent.prompt`, and call :func:`run_stdio`.
The SDK owns the protocol: framing, errors, sessions, the prompt lifecycle and every
``state_update``.
"""

from .agent import Agent
from .errors import ErrorCode, RequestError, SessionClosedError
from .permissions import PermissionOutcome
from .schema import (
    AudioContent,
    AvailableCommand,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    PermissionOption,
    PlanEntry,
    ResourceLink,
    SessionConfigOption,
    TextContent,
    ToolCallUpdate,
)
from .session import MessageStream, Session, StopReason
from .stdio import run_stdio, serve, serve_stdio

__all__ = [
    "Agent",
    "AudioContent",
    "AvailableCommand",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorCode",
    "ImageContent",
    "MessageStream",
    "PermissionOption",
    "PermissionOutcome",
    "PlanEntry",
    "RequestError",
    "ResourceLink",
    "Session",
    "SessionClosedError",
    "SessionConfigOption",
    "StopReason",
    "TextContent",
    "ToolCallUpdate",
    "run_stdio",
    "serve",
    "serve_stdio",
]
