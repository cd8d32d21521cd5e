"""acp-agent: write Agent Client Protocol (ACP) v2 agents in Python.

Subclass [`Agent`][acp_agent.Agent], implement [`Agent.prompt`][acp_agent.Agent.prompt], and call
[`run_stdio`][acp_agent.run_stdio]. The SDK owns the protocol: framing, errors, sessions, the prompt lifecycle and every
``state_update``.
"""

from typing import TYPE_CHECKING

from ._util import deprecated
from ._util.lazy import lazy_attributes, lazy_dir, publish
from ._util.processes import ExitStatus
from .agent import Agent
from .auth import Login, Workspace
from .errors import (
    AcpAgentError,
    ElicitationUnsupportedError,
    EnvironmentVariableError,
    ErrorCode,
    InvalidArgumentError,
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
from .limits import Limits
from .mcp import AcpMcpServer, AcpMcpServers, McpNotification, McpTool, McpToolResult
from .peer import ClientPeer
from .providers import Provider, ProviderSettings, configuring_principal
from .schema import (
    AudioContent,
    AuthMethodAgent,
    AuthMethodTerminal,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from .session import MessageStream, Session, StopReason
from .stdio import run_stdio, serve, serve_stdio
from .subagents import Subagent, SubagentResult

# Loaded on first use, under the same names: a stdio agent that never asks the user, runs a process or starts a
# tool call does not import them (tests/unit/test_exports.py). This block is the lazy map: the package's
# __getattr__ reads it from this file on first use (acp_agent._util.lazy); type checkers see plain imports.
if TYPE_CHECKING:
    from ._session.registry import BackgroundRegistry
    from .history import HistoryItem
    from .questions import ElicitationResult, PermissionOutcome
    from .schema import (
        AgentMessage,
        AgentThought,
        AvailableCommand,
        PermissionOption,
        PlanEntry,
        SessionConfigOption,
        SystemPrompt,
        ToolCallUpdate,
        Usage,
        UserMessage,
    )
    from .terminals import Terminal
    from .tool_calls import ToolCall, ToolCallFields, text_diff

__getattr__ = lazy_attributes(__name__, moved=deprecated.attribute)
__dir__ = lazy_dir(__name__)


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
    "EnvironmentVariableError",
    "ErrorCode",
    "ExitStatus",
    "HistoryItem",
    "ImageContent",
    "InvalidArgumentError",
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
    "Provider",
    "ProviderSettings",
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
    "Workspace",
    "configuring_principal",
    "extension",
    "run_stdio",
    "serve",
    "serve_stdio",
    "text_diff",
]

publish(__name__, __all__)
deprecated.install()
