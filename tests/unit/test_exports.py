"""The public surface, pinned: a name added or removed here is a decision, not an accident."""

from __future__ import annotations

import subprocess
import sys

import acp_agent
from acp_agent import AcpMcpServer, Session, Subagent, Terminal, ToolCall

EXPORTS = {
    "AcpAgentError", "Agent", "AgentMessage", "AgentThought", "AudioContent", "AuthMethodAgent", "AuthMethodTerminal",
    "AvailableCommand", "BackgroundRegistry", "ClientPeer", "ContentBlock", "ElicitationResult",
    "ElicitationUnsupportedError", "EmbeddedResource", "ErrorCode", "ExitStatus", "HistoryItem", "ImageContent",
    "LimitExceededError", "Limits", "Login", "MessageStream", "NotInTurnError", "PermissionOption",
    "PermissionOutcome", "PlanEntry", "ProcessStartError", "RequestError", "ResourceLink", "Session",
    "SessionClosedError", "SessionConfigOption", "SessionNotOpenError", "StopReason", "Subagent", "SubagentResult",
    "SystemPrompt", "Terminal", "TextContent", "ToolCall", "ToolCallFields", "ToolCallStateError", "ToolCallUpdate",
    "Usage", "UserMessage", "extension", "run_stdio", "serve", "serve_stdio",
    # [unstable] MCP over ACP
    "AcpMcpServer", "AcpMcpServers", "McpNotification", "McpServerError", "McpTool", "McpToolResult",
    "McpTransportError", "UnknownMcpServerError",
}

# What help(Session) shows: the author's API, no runtime internals.
SESSION_API = {
    "additional_directories", "ask", "ask_url", "available_commands", "background", "batch", "client", "closed",
    "closing", "complete_elicitation", "config_options", "cwd", "data", "history", "id", "limits", "message", "meta",
    "notice", "plan", "prompt_meta", "request_permission", "say", "schedule", "set_turn_usage", "system_prompt",
    "send", "spawn", "spawn_subagent", "start_foreground", "start_terminal", "start_tool_call", "state",
    "task_group", "think", "thought", "tool_call_content", "update_available_commands", "update_config_options",
    "update_info", "update_tool_call", "usage", "wait_idle",
    "acp_mcp_servers", "mcp_servers",
}
TOOL_CALL_API = {
    "abandon", "append", "cancel", "cancellable", "checkpoint", "complete", "detach", "detached", "end_now", "fail",
    "final", "finish_with", "id", "own_scope", "pause", "paused", "request_permission", "resume", "run",
    "set_cancel_handler", "start", "status", "update", "wait",
}
TERMINAL_API = {
    "cancel", "detach", "detached", "exit_status", "give_up", "id", "on_exit", "request_permission", "stop", "tail",
    "wait",
}
MCP_SERVER_API = {"call_tool", "config", "list_tools", "name", "request", "server_id"}
SUBAGENT_API = {"cancel", "cancellable", "detach", "detached", "id", "result", "run", "start", "tell", "update",
                "wait_idle"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_package_exports() -> None:
    assert set(acp_agent.__all__) == EXPORTS
    for name in EXPORTS:
        assert getattr(acp_agent, name) is not None


def test_handles_show_the_author_api_only() -> None:
    assert public(Session) == SESSION_API
    assert public(ToolCall) == TOOL_CALL_API
    assert public(Terminal) == TERMINAL_API
    assert public(Subagent) == SUBAGENT_API
    assert public(AcpMcpServer) == MCP_SERVER_API


def test_every_public_name_has_a_docstring() -> None:
    for cls in (Session, ToolCall, Terminal, Subagent, AcpMcpServer):
        for name in public(cls):
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"


def test_one_error_root() -> None:
    errors = [getattr(acp_agent, n) for n in EXPORTS if n.endswith("Error") and n != "AcpAgentError"]
    assert errors and all(issubclass(e, acp_agent.AcpAgentError) for e in errors)
    for error in errors:
        doc = error.__doc__ or ""
        assert "sent" in doc or "answer" in doc, f"{error.__name__} does not say whether anything was sent"


def test_no_import_cycles() -> None:
    """Every library module imports on its own, first, in a fresh interpreter (a cycle would fail one)."""
    import pkgutil

    names = [m.name for m in pkgutil.walk_packages(acp_agent.__path__, "acp_agent.")
             if not m.name.startswith("acp_agent.testing") and m.name != "acp_agent.demo"]
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n" \
           "    for m in [k for k in sys.modules if k.startswith('acp_agent')]: del sys.modules[m]\n" \
           "    importlib.import_module(n)\n"
    subprocess.run([sys.executable, "-c", code, *names], check=True)


def test_no_cycles_hidden_under_type_checking() -> None:
    import pathlib

    root = pathlib.Path(acp_agent.__file__).parent
    for path in root.glob("*.py"):
        assert "TYPE_CHECKING" not in path.read_text(), f"{path.name} hides an import under TYPE_CHECKING"
