"""The public surface, pinned: a name added or removed here is a decision, not an accident."""

from __future__ import annotations

import ast
import os
import pathlib
import pickle
import re
import subprocess
import sys
import typing
import warnings

import pytest

import acp_agent
from acp_agent import AcpMcpServer, Session, Subagent, Terminal, ToolCall

EXPORTS = {
    "AcpAgentError", "Agent", "AgentMessage", "AgentThought", "AudioContent", "AuthMethodAgent", "AuthMethodTerminal",
    "AvailableCommand", "BackgroundRegistry", "ClientPeer", "ContentBlock", "ElicitationResult",
    "ElicitationUnsupportedError", "EmbeddedResource", "EnvironmentVariableError",
    "ErrorCode", "ExitStatus", "HistoryItem", "ImageContent",
    "InvalidArgumentError",
    "LimitExceededError", "Limits", "Login", "MessageStream", "NotInTurnError", "PermissionOption",
    "PermissionOutcome", "PlanEntry", "ProcessStartError", "Provider", "ProviderSettings", "RequestError",
    "ResourceLink", "Session",
    "SessionClosedError", "SessionConfigOption", "SessionNotOpenError", "StopReason", "Subagent", "SubagentResult",
    "SystemPrompt", "Terminal", "TextContent", "ToolCall", "ToolCallFields", "ToolCallStateError", "ToolCallUpdate",
    "Usage", "UserMessage", "extension", "run_stdio", "serve", "serve_stdio", "text_diff",
    # [unstable] MCP over ACP
    "AcpMcpServer", "AcpMcpServers", "McpNotification", "McpServerError", "McpTool", "McpToolResult",
    "McpTransportError", "UnknownMcpServerError",
    "Workspace", "configuring_principal",
}

# What help(Session) shows: the author's API, no runtime internals.
SESSION_API = {
    "additional_directories", "ask", "ask_url", "available_commands", "background", "batch", "client", "closed",
    "closing", "complete_elicitation", "config_options", "cwd", "data", "history", "id", "limits", "message", "meta",
    "notice", "parent", "plan", "principal", "prompt_meta", "request_permission", "say", "schedule", "set_turn_usage",
    "system_prompt", "suggest_prompts",
    "send", "title", "spawn", "spawn_subagent", "start_foreground", "start_terminal", "start_tool_call", "state",
    "task_group", "think", "thought", "tool_call_content", "update_available_commands", "update_config_options",
    "update_info", "update_tool_call", "usage", "wait_idle",
    "acp_mcp_servers", "mcp_servers",
}
TOOL_CALL_API = {
    "abandon", "append", "cancel", "cancellable", "checkpoint", "complete", "detach", "detached", "end_now", "fail",
    "final", "finish_with", "id", "own_scope", "pause", "paused", "request_permission", "resume", "run",
    "set_cancel_handler", "start", "status", "update", "wait", "wake_up",
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
                    "BackgroundRegistry", "HistoryItem", "TerminalOptions"}


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


def test_subagent_lives_in_its_own_module_and_the_old_path_still_imports() -> None:
    """``acp_agent.subagents`` holds the subagent handle again; ``acp_agent.session.Subagent`` is the same object."""
    import acp_agent.session
    import acp_agent.subagents

    assert acp_agent.session.Subagent is acp_agent.subagents.Subagent is acp_agent.Subagent
    assert acp_agent.session.SubagentResult is acp_agent.subagents.SubagentResult is acp_agent.SubagentResult


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


# Modules allowed an ``if TYPE_CHECKING:`` block (names loaded on first use, or only for the type checker).
USES_TYPE_CHECKING = {
    "acp_agent._runtime.bookkeeping", "acp_agent._runtime.children", "acp_agent._runtime.runtime", "acp_agent.auth",
    "acp_agent.http.leases", "acp_agent.http.server", "acp_agent.http.sessions", "acp_agent.mcp",
    "acp_agent.providers", "acp_agent.records", "acp_agent.session", "acp_agent.store.codec", "acp_agent.subagents",
    "acp_agent._wire.dispatch", "acp_agent._wire.templates", "acp_agent._util.watch", "acp_agent._session.core",
    "acp_agent._session.turns",
    "acp_agent.store.leases", "acp_agent.store.postgres", "acp_agent.store.sqlite", "acp_agent.testing.checker",
    "acp_agent.v1.streams",
}


# Packages whose ``if TYPE_CHECKING:`` block is their lazy map (acp_agent._util.lazy).
LAZY_PACKAGES = {"acp_agent", "acp_agent.schema", "acp_agent.v1"}


# Modules that import each other, one side only for the type checker (its names appear in annotations only).
TYPE_ONLY_CYCLES: set[tuple[str, str]] = set()  # none left (tests/unit/test_layers.py finds every cycle)


def _library_sources() -> dict[str, pathlib.Path]:
    root = pathlib.Path(acp_agent.__file__).parent
    sources = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        sources[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return sources


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names, seen from ``module``."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, node.module] if node.module else base)


def _is_deferred(node: ast.stmt) -> bool:
    """``if TYPE_CHECKING:``: imports not executed when the module loads (a lazy package's lazy map, or names for
    the type checker only)."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def test_no_cycles_hidden_under_type_checking() -> None:
    """``if TYPE_CHECKING:`` only names what a module loads on first use (lazily, for
    start-up), never a module that imports it back at import time (a cycle that would fail at run time)."""
    sources = _library_sources()
    trees = {name: ast.parse(path.read_text()) for name, path in sources.items()}

    def top_level_imports(name: str) -> set[str]:
        is_package = sources[name].name == "__init__.py"
        found = set()
        for node in trees[name].body:
            if isinstance(node, ast.ImportFrom):
                target = _absolute(name, is_package, node)
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        return found

    cycles: list[str] = []
    for name, tree in trees.items():
        is_package = sources[name].name == "__init__.py"
        for node in tree.body:
            if _is_deferred(node):
                assert name in USES_TYPE_CHECKING | LAZY_PACKAGES, f"{name} uses TYPE_CHECKING"
                for hidden in node.body:
                    assert isinstance(hidden, (ast.ImportFrom, ast.Import)), f"{name}: only imports are deferred"
                    if not isinstance(hidden, ast.ImportFrom) or hidden.level == 0:
                        continue  # a third-party module, for the type checker only
                    target = _absolute(name, is_package, hidden)
                    assert target in sources, f"{name} defers an import of {target}, which does not exist"
                    if name in top_level_imports(target) and (name, target) not in TYPE_ONLY_CYCLES:
                        cycles.append(f"{name} hides an import cycle with {target} under TYPE_CHECKING")
            else:
                assert "id='TYPE_CHECKING'" not in ast.dump(node) or name in USES_TYPE_CHECKING | LAZY_PACKAGES, (
                    f"{name} uses TYPE_CHECKING")
    assert not cycles, cycles


def test_each_lazy_name_comes_from_the_module_its_block_names() -> None:
    """The ``if TYPE_CHECKING:`` block is the lazy map: each name it imports is that module's object, once loaded,
    and the map read at run time (the block alone) is the block the whole file's syntax tree shows."""
    import importlib

    from acp_agent._util.lazy import lazy_map

    sources = _library_sources()
    for package_name in sorted(LAZY_PACKAGES):
        package = importlib.import_module(package_name)
        source = sources[package_name].read_text()
        modules = lazy_map(source)
        blocks = [node for node in ast.parse(source).body if _is_deferred(node)]
        assert len(blocks) == 1, f"{package_name}: one TYPE_CHECKING block, the lazy map"
        written = {alias.name: node.module for node in ast.walk(blocks[0]) if isinstance(node, ast.ImportFrom)
                   for alias in node.names}
        assert modules and modules == written
        assert set(modules) <= set(package.__all__)
        for name, module in modules.items():
            assert getattr(package, name) is getattr(importlib.import_module(f"{package_name}.{module}"), name)


def test_string_named_params_are_schema_exports() -> None:
    """A route's ``Method.params`` given as a name resolves through ``acp_agent.schema``'s lazy map."""
    import acp_agent.schema

    named = {name for path in _library_sources().values()
             for name in re.findall(r"Method\([^,()]+, \"(\w+)\"", path.read_text())}
    assert named and named <= set(acp_agent.schema.__all__), sorted(named - set(acp_agent.schema.__all__))


def _imports_in_functions(node: ast.AST, function: str = "",
                          ) -> typing.Iterator[tuple[str, ast.Import | ast.ImportFrom]]:
    """Each import statement under ``node`` inside a function, with the innermost function's name."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _imports_in_functions(child, child.name)
        elif isinstance(child, (ast.Import, ast.ImportFrom)) and function:
            yield function, child
        else:
            yield from _imports_in_functions(child, function)


def _function_level_imports() -> list[tuple[str, str, str]]:
    """Every import statement inside a function of the library: (module, function, imported module); ``from . import
    x`` names the submodule ``x`` when there is one."""
    sources = _library_sources()
    found: list[tuple[str, str, str]] = []
    for name, path in sources.items():
        for function, node in _imports_in_functions(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.extend((name, function, alias.name) for alias in node.names)
                continue
            target = _absolute(name, path.name == "__init__.py", node)
            found.extend((name, function, f"{target}.{alias.name}" if f"{target}.{alias.name}" in sources else target)
                         for alias in node.names)
    return found


def test_every_function_level_import_is_a_written_deferral() -> None:
    """Lazy behind one boundary (acp_agent._util.lazy): a function imports one of our modules only if ``DEFERRED``
    lists it, an outside module only if ``DEFERRED_OUTSIDE`` does; the command line imports the chosen command."""
    from acp_agent._util.lazy import DEFERRED, DEFERRED_OUTSIDE

    stray = []
    used_inside, used_outside = set(), set()
    for module, function, target in _function_level_imports():
        if module.startswith("acp_agent.cli") and function in {"main", "run"}:
            continue  # the chosen command's module, after parsing
        if target.partition(".")[0] == "acp_agent":
            if target in DEFERRED:
                used_inside.add(target)
                continue
        elif target.partition(".")[0] in DEFERRED_OUTSIDE:
            used_outside.add(target.partition(".")[0])
            continue
        stray.append(f"{module}.{function} imports {target}")
    assert not stray, stray
    assert used_inside == set(DEFERRED), sorted(set(DEFERRED) - used_inside)  # no stale entry
    assert used_outside == set(DEFERRED_OUTSIDE), sorted(set(DEFERRED_OUTSIDE) - used_outside)
    # a module deferred for start-up (not for an optional extra) is one the start-up tests pin unloaded
    for module, why in DEFERRED.items():
        if "extra" not in why:
            assert module in LAZY_FOR_A_TALKING_AGENT | LOADED_WITH_THE_FIRST_SESSION, module


def test_no_import_time_magic() -> None:
    """No module of ours swaps ``builtins.__import__`` or rewrites annotations: laziness is a module ``__getattr__``
    over a TYPE_CHECKING block, and ``__module__`` a plain attribute set."""
    for name, path in _library_sources().items():
        text = path.read_text()
        assert not re.search(r"__import__\s*=(?!=)|setattr\(builtins", text), f"{name} swaps builtins.__import__"
        assert "ForwardRef(" not in text, f"{name} builds annotations"


def test_annotations_read_as_written() -> None:
    """``inspect.get_annotations`` of an exported class returns the strings its module wrote."""
    import importlib
    import inspect

    assert inspect.get_annotations(acp_agent.Limits)["max_sessions"] == "int"
    for package_name in PUBLIC_PACKAGES:
        package = importlib.import_module(package_name)
        for name in package.__all__:
            value = getattr(package, name)
            if isinstance(value, type) and not typing.is_typeddict(value):  # typing stores a TypedDict's as ForwardRefs
                hints = inspect.get_annotations(value)
                assert not any(isinstance(hint, typing.ForwardRef) for hint in hints.values()), name


# What a stdio agent that only talks (no tool calls, terminals, questions, v1 client) loads: the modules
# of those features are imported on first use. ``python -X importtime`` and bench/README.md say why.
LAZY_FOR_A_TALKING_AGENT = {
    "acp_agent._session.asking", "acp_agent._session.suggestions", "acp_agent._session.keys",
    "acp_agent.telemetry", "acp_agent.questions", "acp_agent.terminals",
    "acp_agent.tool_calls",
    "acp_agent.schema.elicitation", "acp_agent.schema.permissions", "acp_agent.schema.methods",
    "acp_agent.schema.mcp", "acp_agent.schema.providers", "acp_agent.v1.translator", "acp_agent.http",
    "acp_agent.store.postgres", "acp_agent.testing", "psycopg", "starlette", "uvicorn", "uvloop",
    "acp_agent._util.watch", "acp_agent._util.reaper", "jsonrpcserver", "platformdirs", "sqlite3",
}


# What loads with the first session, not before ``initialize`` is answered: the session's runtime parts and the
# wire models only sessions use (the warm-up after ``initialize`` imports them while the client is quiet).
LOADED_WITH_THE_FIRST_SESSION = {
    "acp_agent._session.core", "acp_agent.history", "acp_agent._session.sink", "acp_agent._session.snapshots",
    "acp_agent._session.turns", "acp_agent._session.registry", "acp_agent.schema.config", "acp_agent.schema.state",
    "acp_agent.schema.sessions",
    "acp_agent.schema.prompts", "acp_agent.schema.plans", "acp_agent.schema.terminals",
    "acp_agent.schema.tool_calls", "acp_agent.schema.updates",
}


def test_a_session_without_keys_or_telemetry_loads_neither() -> None:
    """A session's keyless prompts load no idempotency-key code, and telemetry that is off loads no telemetry
    setup (bench/README.md: the stdio agent's peak RSS); a keyed prompt loads the keys."""
    code = (
        "import sys, anyio\n"
        "from acp_agent import Agent\n"
        "from acp_agent.testing import connect_agent\n"
        "class Echo(Agent):\n"
        "    name = 'echo'\n"
        "    async def prompt(self, session, prompt):\n"
        "        await session.say('hi')\n"
        "async def main():\n"
        "    async with connect_agent(Echo()) as client:\n"
        "        await client.initialize()\n"
        "        sid = await client.new_session('/tmp')\n"
        "        await client.prompt(sid, 'hello')\n"
        "        await client.wait_idle(sid)\n"
        "        print(' '.join(sorted(sys.modules)))\n"
        "        await client.prompt(sid, 'again', idempotency_key='k-1')\n"
        "        await client.wait_idle(sid)\n"
        "        print(' '.join(sorted(sys.modules)))\n"
        "anyio.run(main)\n"
    )
    environment = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    before, after = (set(line.split()) for line in subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=environment).stdout.splitlines())
    assert not before & {"acp_agent._session.keys", "acp_agent.telemetry"}, sorted(before)
    assert "acp_agent._session.keys" in after and "acp_agent.telemetry" not in after


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

    assert {PermissionOption.__module__, ToolCallFields.__module__, BackgroundRegistry.__module__,
            ToolCallUpdate.__module__} == {"acp_agent"}
    # classes with string annotations keep the module that resolves them (test_public_names_carry_their_public_module)
    assert {ElicitationResult.__module__, PermissionOutcome.__module__} == {"acp_agent.questions"}
    assert V1Translator.__module__ == "acp_agent.v1"
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


# Public packages whose classes and functions say where to import them from (``__module__``), as httpx does.
PUBLIC_PACKAGES = ("acp_agent", "acp_agent.schema", "acp_agent.v1", "acp_agent.testing", "acp_agent.http",
                   "acp_agent.store")


@pytest.mark.parametrize("package_name", PUBLIC_PACKAGES)
def test_public_names_carry_their_public_module(package_name: str) -> None:
    """A class or function exported by a package names that package (the shortest one exporting it) as its module,
    lazily loaded names too, so reprs, docs and tracebacks show the path to import -- except a class with string
    annotations, which keeps its own (typing and pydantic resolve those in the module ``__module__`` names)."""
    import importlib

    package = importlib.import_module(package_name)
    checked = 0
    for name in package.__all__:
        value = getattr(package, name)
        if not isinstance(value, type) and not callable(getattr(value, "__code__", None)):
            continue  # constants and type aliases keep their own
        if not getattr(value, "__module__", "").startswith("acp_agent"):
            continue  # a builtin under a schema name (``AbsolutePath = str``)
        expected = "acp_agent" if package_name != "acp_agent" and name in acp_agent.__all__ else package_name
        if isinstance(value, type) and any(isinstance(h, str) for h in vars(value).get("__annotations__", {}).values()):
            # string annotations resolve in sys.modules[cls.__module__]: such a class keeps the module that wrote them
            assert value.__module__.startswith(package_name + ".") or value.__module__.startswith("acp_agent.")
            assert typing.get_type_hints(value) is not None
            continue
        assert value.__module__ == expected, f"{package_name}.{name}: {value.__module__}"
        checked += 1
    assert checked


def test_public_modules_keep_pickling_and_type_hints_working() -> None:
    from acp_agent import SubagentResult, TextContent
    from acp_agent.schema import PromptRequest

    block = TextContent(text="hi")
    assert pickle.loads(pickle.dumps(block)) == block
    assert pickle.loads(pickle.dumps(acp_agent.Session)) is acp_agent.Session  # by reference: acp_agent.Session
    # string annotations still resolve in the module that wrote them, not in ``acp_agent``
    assert typing.get_type_hints(SubagentResult)
    assert typing.get_type_hints(acp_agent.Agent)["limits"] == typing.ClassVar[acp_agent.Limits]
    PromptRequest.model_rebuild(force=True)
    assert PromptRequest.__pydantic_complete__


def _moved() -> dict[str, str]:
    from acp_agent._util.deprecated import MOVED

    return {old: moved.new for old, moved in MOVED.items()}


@pytest.mark.parametrize(("old", "new"), sorted(_moved().items()))
def test_old_module_paths_import_with_a_deprecation_warning(old: str, new: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An old path imports the new module itself, warned once, by ``import`` and by attribute access."""
    import importlib

    from acp_agent._util.deprecated import warning

    short = old.rpartition(".")[2]
    monkeypatch.delitem(sys.modules, old, raising=False)
    monkeypatch.delitem(vars(acp_agent), short, raising=False)  # not delattr: hasattr would import the alias
    with pytest.warns(DeprecationWarning, match=f"^{re.escape(warning(old))}$"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old)
    monkeypatch.delitem(vars(acp_agent), short)
    with pytest.warns(DeprecationWarning, match=f"^{re.escape(warning(old))}$"):
        assert getattr(acp_agent, short) is module  # attribute access, no import statement


_PUBLIC_MODULES = ("acp_agent", "acp_agent.testing", "acp_agent.http", "acp_agent.store", "acp_agent.schema",
                   "acp_agent.v1")


@pytest.mark.parametrize("old", sorted(_moved()))
def test_deprecation_warnings_name_only_public_homes(old: str) -> None:
    """Each warning names no module path with a ``_`` component, and every dotted ``acp_agent`` name it gives
    is a public name (in the ``__all__`` of a public module, or an attribute of one) that exists today."""
    import importlib

    from acp_agent._util.deprecated import warning

    message = warning(old)
    assert message.startswith(f"{old} is deprecated and will be removed in the next release; ")
    named = re.findall(r"\bacp_agent(?:\.\w+)*", message.removeprefix(old))
    assert not [name for name in named if any(part.startswith("_") for part in name.split("."))], message
    for name in named:
        # the longest public module the name starts with, then a name in its __all__, then attributes
        module = max((m for m in _PUBLIC_MODULES if name.startswith(m + ".")), key=len)
        top, *attributes = name.removeprefix(module + ".").split(".")
        assert top in importlib.import_module(module).__all__, name
        obj = getattr(importlib.import_module(module), top)
        for attribute in attributes:
            obj = getattr(obj, attribute)  # e.g. acp_agent.Session.request_permission exists
    assert "use " in message or "no public names" in message


def test_old_paths_give_the_same_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    for old in ("acp_agent.core", "acp_agent.permissions", "acp_agent.elicitation", "acp_agent.background"):
        monkeypatch.delitem(sys.modules, old, raising=False)
        monkeypatch.delitem(vars(acp_agent), old.rpartition(".")[2], raising=False)
    from acp_agent._session.core import SessionCore
    from acp_agent._session.registry import BackgroundRegistry
    from acp_agent._util.deprecated import warning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from acp_agent.background import BackgroundRegistry as OldBackgroundRegistry  # type: ignore[import-not-found]
        from acp_agent.core import SessionCore as OldSessionCore  # type: ignore[import-not-found]
        from acp_agent.elicitation import ElicitationResult  # type: ignore[import-not-found]
        from acp_agent.permissions import PermissionOutcome  # type: ignore[import-not-found]
    assert OldSessionCore is SessionCore and OldBackgroundRegistry is BackgroundRegistry
    assert PermissionOutcome is acp_agent.PermissionOutcome and ElicitationResult is acp_agent.ElicitationResult
    assert [str(w.message) for w in caught] == [warning(old) for old in (
        "acp_agent.background", "acp_agent.core", "acp_agent.elicitation", "acp_agent.permissions")]
    assert all(w.category is DeprecationWarning and w.filename == __file__ for w in caught)


def test_the_library_never_imports_an_old_path() -> None:
    """Every library module imported: none of the deprecated aliases is touched (no warning for users)."""
    code = (
        "import importlib, pkgutil, sys, warnings\n"
        "warnings.filterwarnings('error', 'acp_agent', DeprecationWarning)\n"
        "import acp_agent\n"
        "from acp_agent._util.deprecated import MOVED\n"
        "for m in pkgutil.walk_packages(acp_agent.__path__, 'acp_agent.'):\n"
        "    if m.name != 'acp_agent.demo' and not m.name.startswith(('acp_agent.http', 'acp_agent.store.postgres')):\n"
        "        importlib.import_module(m.name)\n"
        "print(' '.join(sorted(set(MOVED) & set(sys.modules))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []
