"""acp-agent: write Agent Client Protocol (ACP) v2 agents in Python.

Subclass :class:`Agent`, implement :meth:`Agent.prompt`, and call :func:`run_stdio`.
The SDK owns the protocol: framing, errors, sessions, the prompt lifecycle and every
``state_update``.
"""

from .agent import Agent
from .background import BackgroundRegistry
from .errors import (
    AcpAgentError,
    ErrorCode,
    LimitExceededError,
    NotInTurnError,
    ProcessStartError,
    RequestError,
    SessionClosedError,
    SessionNotOpenError,
    ToolCallStateError,
)
from .history import HistoryItem
from .limits import Limits
from .permissions import PermissionOutcome
from .schema import (
    AgentMessage,
    AgentThought,
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
    UserMessage,
)
from .session import MessageStream, Session, StopReason, Subagent, SubagentResult
from .stdio import run_stdio, serve, serve_stdio
from .terminals import ExitStatus, Terminal
from .tool_calls import ToolCall, ToolCallFields

__all__ = [
    "AcpAgentError",
    "Agent",
    "AgentMessage",
    "AgentThought",
    "AudioContent",
    "AvailableCommand",
    "BackgroundRegistry",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorCode",
    "ExitStatus",
    "HistoryItem",
    "ImageContent",
    "LimitExceededError",
    "Limits",
    "MessageStream",
    "NotInTurnError",
    "PermissionOption",
    "PermissionOutcome",
    "PlanEntry",
    "ProcessStartError",
    "RequestError",
    "ResourceLink",
    "Session",
    "SessionClosedError",
    "SessionConfigOption",
    "SessionNotOpenError",
    "StopReason",
    "Subagent",
    "SubagentResult",
    "Terminal",
    "TextContent",
    "ToolCall",
    "ToolCallFields",
    "ToolCallStateError",
    "ToolCallUpdate",
    "UserMessage",
    "run_stdio",
    "serve",
    "serve_stdio",
]
