"""acp-agent: write Agent Client Protocol (ACP) v2 agents in Python.

Subclass :class:`Agent`, implement :meth:`Agent.prompt`, and call :func:`run_stdio`.
The SDK owns the protocol: framing, errors, sessions, the prompt lifecycle and every
``state_update``.
"""

from .agent import Agent
from .auth import Login
from .background import BackgroundRegistry
from .elicitation import ElicitationResult
from .errors import (
    AcpAgentError,
    ElicitationUnsupportedError,
    ErrorCode,
    LimitExceededError,
    McpServerError,
    McpTransportError,
    NotInTurnError,
    ProcessStartError,
    RequestError,
    SessionClosedError,
    SessionNotOpenError,
    ToolCallStateError,
    UnknownMcpServerError,
)
from .extensions import extension
from .history import HistoryItem
from .limits import Limits
from .mcp import AcpMcpServer, AcpMcpServers, McpNotification, McpTool, McpToolResult
from .peer import ClientPeer
from .permissions import PermissionOutcome
from .schema import (
    AgentMessage,
    AgentThought,
    AudioContent,
    AuthMethodAgent,
    AuthMethodTerminal,
    AvailableCommand,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    PermissionOption,
    PlanEntry,
    ResourceLink,
    SessionConfigOption,
    SystemPrompt,
    TextContent,
    ToolCallUpdate,
    Usage,
    UserMessage,
)
from .session import MessageStream, Session, StopReason, Subagent, SubagentResult
from .stdio import run_stdio, serve, serve_stdio
from .terminals import ExitStatus, Terminal
from .tool_calls import ToolCall, ToolCallFields

__all__ = [
    "AcpAgentError",
    "AcpMcpServer",
    "AcpMcpServers",
    "Agent",
    "AgentMessage",
    "AgentThought",
    "AudioContent",
    "AuthMethodAgent",
    "AuthMethodTerminal",
    "AvailableCommand",
    "BackgroundRegistry",
    "ClientPeer",
    "ContentBlock",
    "ElicitationResult",
    "ElicitationUnsupportedError",
    "EmbeddedResource",
    "ErrorCode",
    "ExitStatus",
    "HistoryItem",
    "ImageContent",
    "LimitExceededError",
    "Limits",
    "Login",
    "McpNotification",
    "McpServerError",
    "McpTool",
    "McpToolResult",
    "McpTransportError",
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
    "SystemPrompt",
    "Terminal",
    "TextContent",
    "ToolCall",
    "ToolCallFields",
    "ToolCallStateError",
    "ToolCallUpdate",
    "UnknownMcpServerError",
    "Usage",
    "UserMessage",
    "extension",
    "run_stdio",
    "serve",
    "serve_stdio",
]
