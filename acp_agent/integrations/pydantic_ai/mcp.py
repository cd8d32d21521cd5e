"""The client's MCP servers as pydantic-ai MCP toolsets.

The stdio and HTTP servers of ``session/new`` (or ``session/resume`` / ``session/fork``, which replace
them) become ``MCPToolset``s for each turn: pydantic-ai starts a stdio server with only the environment
the client gave it (plus the MCP SDK's minimal default: never this process's secrets) and this agent's
terminal mark (the watchdog kills it if the agent dies: it never outlives the agent), stops it when the
turn ends, connects an HTTP one with the client's headers, lists their tools and calls them.

A remote client's stdio and HTTP servers never get here unless the operator allowed them
(``HttpOptions.allow_client_mcp``, ``serve --allow-client-mcp``): the runtime refuses them first, since a
stdio entry is a command line the client chooses, run on the server. Each tool is shown as an ACP
tool call like any other. A server's tools are prefixed with its name (``name_tool``) so two servers
cannot clash. `open_mcp_toolsets` connects them before the run: a server that fails to start is left out of
the turn (one log line, and a message tells the user which one) instead of failing the whole turn; the MCP
client library (``fastmcp``, slow to import) is imported once, off the event loop. Servers the client hosts over ACP
(``type: "acp"``) are left to the agent's own code (``session.acp_mcp_servers``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.to_thread
from pydantic_ai import ModelRetry, Tool
from pydantic_ai.toolsets import FunctionToolset

from ..._util import watch
from ..._util.reaper import MARK_ENV
from ...mcp import AcpMcpServer
from ...schema import McpServerHttp, McpServerStdio
from ...session import Session

__all__ = ["acp_mcp_toolsets", "mcp_toolsets", "open_mcp_toolsets", "stdio_mark"]

logger = logging.getLogger("acp_agent.integrations.pydantic_ai")

_imported = False
"""Whether the MCP client library was imported (`open_mcp_toolsets` imports it once, in a worker thread)."""


def _prefix(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)
    return cleaned or "mcp"


def mcp_toolsets(session: Session, mark: str | None = None) -> list[Any]:
    """One pydantic-ai toolset per stdio or HTTP MCP server of the session (none when there are none); ``mark``:
    the agent's terminal mark, given to stdio servers so its watchdog reaps them (`stdio_mark`)."""
    return [toolset for _, toolset in _named_toolsets(session, mark)]


def _servers(session: Session) -> list[McpServerStdio | McpServerHttp]:
    return [s for s in session.mcp_servers if isinstance(s, McpServerStdio | McpServerHttp)]


def _import_mcp() -> None:
    import fastmcp.client.transports  # noqa: F401  (the slow part: the MCP SDK, httpx, pydantic models)
    import pydantic_ai.mcp  # noqa: F401


def _named_toolsets(session: Session, mark: str | None) -> list[tuple[str, Any]]:
    servers = _servers(session)
    if not servers:
        return []
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    toolsets: list[tuple[str, Any]] = []
    for server in servers:
        transport: Any
        if isinstance(server, McpServerStdio):
            env = {v.name: v.value for v in server.env}
            if mark is not None:
                env[MARK_ENV] = mark
            transport = StdioTransport(command=server.command, args=list(server.args), env=env, cwd=session.cwd)
        else:
            transport = StreamableHttpTransport(server.url, headers={h.name: h.value for h in server.headers})
        toolsets.append((server.name,
                         MCPToolset(transport, id=f"mcp-{_prefix(server.name)}").prefixed(_prefix(server.name))))
    return toolsets


async def open_mcp_toolsets(session: Session, stack: AsyncExitStack, mark: str | None = None) -> list[Any]:
    """The session's stdio and HTTP MCP servers as toolsets (like `mcp_toolsets`), each connected now and
    closed with ``stack`` (the run connects them again: they are counted, not restarted). A server that
    fails to connect is left out of the turn, with one log line and a message to the user that names it:
    the turn goes on with the tools that work rather than failing for a server it may not need."""
    global _imported
    if not _servers(session):
        return []
    if not _imported:
        await anyio.to_thread.run_sync(_import_mcp)  # about 2 s the first time: never on the event loop
        _imported = True
    opened: list[Any] = []
    for name, toolset in _named_toolsets(session, mark):
        try:
            await stack.enter_async_context(toolset)
        except Exception as exc:  # a command that is missing or exits, a refused URL, a failed handshake
            reason = f"{type(exc).__name__}: {exc}"[:300]
            logger.warning("acp: MCP server %r of session %s is left out of this turn: %s", name, session.id, reason)
            await session.say(f"The MCP server `{name}` could not be started ({reason}); "
                              "this turn goes on without its tools.")
        else:
            opened.append(toolset)
    return opened


async def stdio_mark(session: Session) -> str | None:
    """The agent's terminal mark when the session has a stdio MCP server (starting the watchdog once)."""
    if not any(isinstance(s, McpServerStdio) for s in session.mcp_servers):
        return None
    return watch.current() or await anyio.to_thread.run_sync(watch.mark)


def _caller(server: AcpMcpServer, name: str) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        result = await server.call_tool(name, arguments)
        if result.is_error:  # the tool's own failure: the model reads it and may try again
            raise ModelRetry(result.text or f"{name} failed")
        return result.text

    return call


async def acp_mcp_toolsets(session: Session) -> list[FunctionToolset[Any]]:
    """[unstable] One toolset per MCP server the client hosts over ACP (``type: "acp"``), tools listed now."""
    toolsets: list[FunctionToolset[Any]] = []
    for name, server in session.acp_mcp_servers.items():
        prefix = _prefix(name)
        tools = [
            Tool.from_schema(_caller(server, tool.name), name=f"{prefix}_{tool.name}",
                             description=tool.description or tool.title,
                             json_schema=tool.input_schema or {"type": "object", "properties": {}})
            for tool in await server.list_tools()
        ]
        toolsets.append(FunctionToolset(tools))
    return toolsets
