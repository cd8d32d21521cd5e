"""acp-agent: write Agent Client Protocol (ACP) v2 agents in Python.

Subclass :class:`Agent`, implement :meth:`Agent.prompt`, and call :func:`run_stdio`.
The SDK owns the protocol: framing, errors, sessions, the prompt lifecycle and every
``state_update``.
"""

from .agent import Agent
from .background import BackgroundRegistry, ToolCallStateError
from .errors import ErrorCode, LimitExceededError, RequestError, SessionClosedError
from .limits import Limits
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
from .terminals import ExitStatus, Terminal
from .tool_calls import ToolCall

__all__ = [
    "Agent",
    "AudioContent",
    "AvailableCommand",
    "BackgroundRegistry",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorCode",
    "ExitStatus",
    "ImageContent",
    "LimitExceededError",
    "Limits",
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
    "Terminal",
    "TextContent",
    "ToolCall",
    "ToolCallStateError",
    "ToolCallUpdate",
    "run_stdio",
    "serve",
    "serve_stdio",
]
