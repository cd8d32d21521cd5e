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
    "PermissionOutcome", "PlanEntry", "ProcessStartError", "Provider", "ProviderSettings", "RequestError",
    "ResourceLink", "Session",
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
    "send", "title", "spawn", "spawn_subagent", "start_foreground", "start_terminal", "start_tool_call", "state",
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


# Names a public signature may use that stay unresolved at run time until their feature is used (TYPE_CHECKING
# imports of lazily loaded modules); every wire model in a signature resolves (written ``schema.X``).
UNRESOLVED_HINTS = {"SessionCore", "Entity", "ToolCall", "ToolCallExtras", "ToolCallFields", "PermissionOption",
                    "BackgroundRegistry", "HistoryItem"}


def test_run_time_type_hints_resolve_but_for_lazily_loaded_features() -> None:
    import inspect
    import typing

    from acp_agent import Agent, MessageStream, SubagentResult

    for cls in (Session, MessageStream, Subagent, SubagentResult, AcpMcpServer, Agent):
        typing.get_type_hints(cls)
        for name, member in inspect.getmembers(cls):
            function = member.fget if isinstance(member, property) else member
            if (name.startswith("_") and name != "__init__") or not callable(function):
                continue
            try:
                typing.get_type_hints(function)
            except NameError as exc:
                assert exc.name in UNRESOLVED_HINTS, f"{cls.__name__}.{name}: {exc}"


def test_dir_lists_the_lazily_loaded_names_too() -> None:
    import acp_agent.schema
    import acp_agent.v1

    for package in (acp_agent, acp_agent.schema, acp_agent.v1):
        assert set(dir(package)) >= set(package.__all__), sorted(set(package.__all__) - set(dir(package)))


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
    """``if TYPE_CHECKING:`` only names what a module loads on first use (lazily, for start-up), never a
    module that imports it back at import time (a cycle that would fail at run time)."""
    import ast
    import pathlib

    root = pathlib.Path(acp_agent.__file__).parent

    def top_level_imports(path: pathlib.Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {node.module or "" for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1}

    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for hidden in node.body:
                    assert isinstance(hidden, ast.ImportFrom) and hidden.level == 1 and hidden.module
                    target = root / f"{hidden.module}.py"
                    if not target.exists():
                        target = root / hidden.module / "__init__.py"
                    assert path.stem not in top_level_imports(target), (
                        f"{path.name} hides an import cycle with {hidden.module} under TYPE_CHECKING")
            elif path.stem not in ("__init__", "session", "auth", "providers", "mcp", "records", "runtime",
                                   "bookkeeping", "subagents"):
                assert "TYPE_CHECKING" not in ast.dump(node), f"{path.name} uses TYPE_CHECKING"


# What a stdio agent that only talks (no tool calls, terminals, questions, v1 client) loads: the modules
# of those features are imported on first use. ``python -X importtime`` and bench/README.md say why.
LAZY_FOR_A_TALKING_AGENT = {
    "acp_agent._session.asking", "acp_agent.questions", "acp_agent.terminals", "acp_agent.tool_calls",
    "acp_agent.schema.elicitation", "acp_agent.schema.permissions", "acp_agent.schema.methods",
    "acp_agent.schema.mcp", "acp_agent.schema.providers", "acp_agent.v1.translator", "acp_agent.http",
    "acp_agent.store.postgres", "acp_agent.testing", "psycopg", "starlette", "uvicorn", "uvloop",
}


# What loads with the first session, not before ``initialize`` is answered: the session's runtime parts and the
# wire models only sessions use (the warm-up after ``initialize`` imports them while the client is quiet).
LOADED_WITH_THE_FIRST_SESSION = {
    "acp_agent._session.core", "acp_agent.history", "acp_agent._session.sink", "acp_agent._session.snapshots", "acp_agent._session.turns",
    "acp_agent._session.registry", "acp_agent.schema.config", "acp_agent.schema.state", "acp_agent.schema.sessions",
    "acp_agent.schema.prompts", "acp_agent.schema.plans", "acp_agent.schema.terminals",
    "acp_agent.schema.tool_calls", "acp_agent.schema.updates",
}


def test_a_talking_stdio_agent_loads_only_what_it_uses() -> None:
    code = (
        "import sys\n"
        "from acp_agent import Agent, Session, StopReason, TextContent, run_stdio\n"
        "import acp_agent.stdio, acp_agent._runtime.runtime\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert "acp_agent.session" in loaded and "acp_agent.schema.initialize" in loaded
    lazy = LAZY_FOR_A_TALKING_AGENT | LOADED_WITH_THE_FIRST_SESSION
    assert not loaded & lazy, sorted(loaded & lazy)
    # ... and every lazily loaded public name is still there, under the same name.
    from acp_agent import (
        BackgroundRegistry,
        ElicitationResult,
        HistoryItem,
        PermissionOption,
        PermissionOutcome,
        ToolCallFields,
        ToolCallUpdate,
    )
    from acp_agent.v1 import V1Translator

    assert {ElicitationResult.__module__, PermissionOption.__module__, PermissionOutcome.__module__,
            ToolCallFields.__module__, V1Translator.__module__, BackgroundRegistry.__module__,
            ToolCallUpdate.__module__} == {
        "acp_agent.elicitation", "acp_agent.schema.permissions", "acp_agent.permissions", "acp_agent.tool_calls",
        "acp_agent.v1.translator", "acp_agent._session.registry", "acp_agent.schema.tool_calls"}
    assert ToolCallUpdate in HistoryItem.__args__


_INITIALIZE_THEN_SESSION = """
import sys
import anyio
from acp_agent import Agent, Session, TextContent
from acp_agent.testing import connect_agent

class Echo(Agent):
    async def prompt(self, session: Session, prompt: list[TextContent]) -> str:
        await session.say("hi")
        return "end_turn"

def loaded() -> str:
    return " ".join(sorted(k for k in sys.modules if k.startswith("acp_agent")))

async def main() -> None:
    async with connect_agent(Echo(), check=False) as client:
        await client.initialize()
        print(loaded())
        session_id = await client.new_session()
        print(loaded())
        await client.prompt_and_wait(session_id, "hello")
        print(loaded())

anyio.run(main)
"""


def test_initialize_is_answered_before_the_session_modules_load() -> None:
    """``initialize`` is answered with only its own models loaded; the first session and prompt load the rest."""
    out = subprocess.run([sys.executable, "-c", _INITIALIZE_THEN_SESSION], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    at_initialize, at_session, at_prompt = (set(line.split()) for line in out)
    assert not at_initialize & LOADED_WITH_THE_FIRST_SESSION, sorted(at_initialize & LOADED_WITH_THE_FIRST_SESSION)
    assert {"acp_agent._session.core", "acp_agent.history", "acp_agent.schema.sessions"} <= at_session
    assert at_prompt >= LOADED_WITH_THE_FIRST_SESSION, sorted(LOADED_WITH_THE_FIRST_SESSION - at_prompt)


def test_the_warm_up_loads_the_session_modules() -> None:
    """After ``initialize`` the warm-up imports the session's runtime parts and builds the first turn's models."""
    code = (
        "import sys, anyio\n"
        "import acp_agent._runtime.warmup as w\n"
        "anyio.run(w.warm_up)\n"
        "from acp_agent.schema import PromptRequest\n"
        "print(PromptRequest.__pydantic_complete__, ' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert out[0] == "True"
    assert set(out[1:]) >= LOADED_WITH_THE_FIRST_SESSION, sorted(LOADED_WITH_THE_FIRST_SESSION - set(out[1:]))


def test_python_x_importtime_shows_the_lazily_loaded_modules() -> None:
    """The README sends authors to ``python -X importtime``: a module loaded by a lazy name shows there too."""
    code = "import acp_agent, acp_agent.v1\nacp_agent.PlanEntry\nacp_agent.v1.V1Translator\n"
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code], check=True, capture_output=True,
                            text=True)
    assert "acp_agent.schema.plans" in result.stderr and "acp_agent.v1.translator" in result.stderr
