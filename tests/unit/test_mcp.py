"""[unstable] MCP over ACP (issue 13 §3): client-hosted MCP servers (``type: "acp"``) called through
``session.acp_mcp_servers``, with the in-memory client hosting them (``client.host_mcp_server``).

Every transcript is judged by the client's wire checker and every agent message validated against the
official unstable schema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from acp_agent import (
    AcpAgentError,
    AcpMcpServer,
    Agent,
    ContentBlock,
    McpNotification,
    McpServerError,
    McpTransportError,
    RequestError,
    Session,
    SessionClosedError,
    StopReason,
    UnknownMcpServerError,
)
from acp_agent._wire.connection import Method
from acp_agent.mcp import MCP_PROTOCOL_VERSION
from acp_agent.testing import Client, HostedMcpRequest, McpErrorAnswer, SchemaValidator, connect_agent

pytestmark = pytest.mark.anyio

Script = Callable[[Session], Awaitable[StopReason | None]]

ADD_TOOL = {"name": "add", "description": "Adds two numbers",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}


class McpAgent(Agent):
    """Runs whatever script the test gives it as its prompt turn; records what the script raised."""

    name = "mcp-agent"
    version = "1.2.3"
    mcp_acp = True

    def __init__(self) -> None:
        self.script: Script | None = None
        self.raised: BaseException | None = None
        self.session: Session | None = None

    async def new_session(self, session: Session) -> None:
        self.session = session

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason | None:
        assert self.script is not None
        try:
            return await self.script(session)
        except AcpAgentError as exc:
            self.raised = exc
            await session.say(f"{type(exc).__name__}")
            return "end_turn"


class Tools:
    """A hosted MCP server with an ``add`` tool, a tool that fails, one that never answers, and progress."""

    def __init__(self) -> None:
        self.release = anyio.Event()

    async def __call__(self, request: HostedMcpRequest) -> Any:
        if request.method == "tools/list":
            cursor = (request.params or {}).get("cursor")
            if cursor is None:
                return {"tools": [ADD_TOOL], "nextCursor": "page-2"}
            return {"tools": [{"name": "slow", "inputSchema": {"type": "object"}}]}
        if request.method != "tools/call":
            raise McpErrorAnswer(-32601, f"Method not found: {request.method}")
        name = (request.params or {}).get("name")
        args = request.arguments
        if name == "add":
            for step in (1, 2):
                request.notify("notifications/progress", {"progressToken": "t", "progress": step})
            total = args["a"] + args["b"]
            return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}
        if name == "broken":
            return {"content": [{"type": "text", "text": "disk full"}], "isError": True}
        if name == "slow":
            await self.release.wait()
            return {"content": []}
        raise McpErrorAnswer(-32602, f"Unknown tool: {name}", {"tool": name})


def validate(client: Client) -> None:
    problems = SchemaValidator().check_transcript(client.transcript)
    assert not problems, "\n".join(problems)


def mcp_requests(client: Client) -> list[dict[str, Any]]:
    return [m for m in client.sent_by_agent() if m.get("method") == "mcp/message"]


def withdrawals(client: Client) -> list[Any]:
    return [m["params"]["requestId"] for m in client.sent_by_agent() if m.get("method") == "$/cancel_request"]


async def open_session(client: Client, *servers: dict[str, Any]) -> str:
    caps = (await client.initialize())["capabilities"]["session"]
    assert caps["mcp"] == {"acp": {}}
    return await client.new_session("/tmp", mcpServers=list(servers))


async def run(client: Client, agent: McpAgent, sid: str, script: Script) -> list[str]:
    agent.raised = None
    agent.script = script
    view = await client.prompt_and_wait(sid, "go")
    return [u["content"][0]["text"] for u in view.updates[-3:] if u.get("sessionUpdate") == "agent_message"]


async def start_a_turn_waiting_on_the_slow_tool(client: Client, agent: McpAgent) -> str:
    """A session whose turn waits on the ``slow`` tool of the hosted ``tools`` server; its id."""
    sid = await open_session(client, client.host_mcp_server("tools", Tools()))

    async def script(session: Session) -> None:
        await session.acp_mcp_servers["tools"].call_tool("slow")

    agent.script = script
    await client.prompt(sid, "go")
    await client.wait_for(lambda: len(client.mcp.requests) == 1)
    return sid


async def test_the_capability_is_advertised_only_on_opt_in() -> None:
    class Plain(Agent):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            return "end_turn"

    async with connect_agent(Plain()) as client:
        caps = (await client.initialize())["capabilities"]["session"]
        assert "mcp" not in caps
        with pytest.raises(RequestError) as refused:  # R33
            await client.new_session("/tmp", mcpServers=[client.host_mcp_server("tools", Tools())])
        assert refused.value.code == -32602
    async with connect_agent(McpAgent()) as client:
        await open_session(client, client.host_mcp_server("tools", Tools()))


async def test_a_tool_call_round_trip() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        entry = client.host_mcp_server("tools", Tools())
        sid = await open_session(client, entry)
        assert agent.session is not None
        servers = agent.session.acp_mcp_servers
        assert list(servers) == ["tools"] and len(servers) == 1
        assert isinstance(servers["tools"], AcpMcpServer) and servers["tools"].server_id == entry["serverId"]

        async def script(session: Session) -> None:
            server = session.acp_mcp_servers["tools"]
            tools = await server.list_tools()
            result = await server.call_tool("add", {"a": 2, "b": 3})
            await session.say(f"{[t.name for t in tools]} {tools[0].input_schema['type']} "
                              f"{result.text} {result.structured_content} {result.is_error}")

        assert await run(client, agent, sid, script) == ["['add', 'slow'] object 5 {'sum': 5} False"]

        sent = mcp_requests(client)
        assert [m["params"]["method"] for m in sent] == ["tools/list", "tools/list", "tools/call"]
        call = sent[-1]["params"]
        assert call["serverId"] == entry["serverId"]
        assert call["params"]["name"] == "add" and call["params"]["arguments"] == {"a": 2, "b": 3}
        assert call["params"]["_meta"] == {
            "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "mcp-agent", "version": "1.2.3"},
        }
        assert sent[1]["params"]["params"]["cursor"] == "page-2"
        assert len({m["params"]["requestId"] for m in sent}) == 3  # a fresh inner id per request
    validate(client)


async def test_generic_requests_keep_the_callers_meta() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        seen: list[dict[str, Any]] = []

        async def echo(request: HostedMcpRequest) -> Any:
            seen.append(request.params or {})
            return None  # a null result is a result

        sid = await open_session(client, client.host_mcp_server("echo", echo))

        async def script(session: Session) -> None:
            server = session.acp_mcp_servers["echo"]
            mine = {"_meta": {"io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL_VERSION, "x": 1}, "uri": "a"}
            result = await server.request("resources/read", mine)
            await session.say(repr(result))

        assert await run(client, agent, sid, script) == ["None"]
        assert seen[0]["uri"] == "a" and seen[0]["_meta"]["x"] == 1
        assert seen[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {}
    validate(client)


async def test_a_hosted_handler_may_be_a_plain_function() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        def calc(request: HostedMcpRequest) -> dict[str, Any]:
            if request.arguments.get("a") is None:
                raise McpErrorAnswer(-32602, "a is required")
            return {"content": [{"type": "text", "text": str(request.arguments["a"] * 2)}]}

        sid = await open_session(client, client.host_mcp_server("calc", calc))

        async def script(session: Session) -> None:
            server = session.acp_mcp_servers["calc"]
            await session.say((await server.call_tool("double", {"a": 21})).text)
            with pytest.raises(McpServerError) as refused:
                await server.call_tool("double", {})
            await session.say(refused.value.message)

        assert await run(client, agent, sid, script) == ["42", "a is required"]
    validate(client)


async def test_notifications_reach_the_request_they_are_about() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await open_session(client, client.host_mcp_server("tools", Tools()))
        got: list[McpNotification] = []

        async def on_async(note: McpNotification) -> None:
            await anyio.sleep(0)
            got.append(note)

        async def script(session: Session) -> None:
            server = session.acp_mcp_servers["tools"]
            first = await server.call_tool("add", {"a": 1, "b": 1}, on_notification=on_async)
            second = await server.call_tool("add", {"a": 2, "b": 2}, on_notification=got.append)  # a plain callback
            await session.say(f"{first.text} {second.text}")

        # A notification for no request in flight is dropped.
        client.notify("mcp/message", {"serverId": "nope", "requestId": "nope", "method": "notifications/progress"})
        assert await run(client, agent, sid, script) == ["2 4"]
        assert [(n.method, n.params["progress"] if n.params else None) for n in got] == [
            ("notifications/progress", 1), ("notifications/progress", 2),
            ("notifications/progress", 1), ("notifications/progress", 2)]
    validate(client)


async def test_a_failing_notification_callback_ends_the_request() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        class Boom(Exception):
            pass

        def fail(note: McpNotification) -> None:
            raise Boom(note.method)

        async def slow_with_progress(request: HostedMcpRequest) -> Any:
            request.notify("notifications/progress", {"progress": 1})
            await anyio.sleep_forever()

        sid = await open_session(client, client.host_mcp_server("slow", slow_with_progress))

        async def script(session: Session) -> None:
            try:
                await session.acp_mcp_servers["slow"].request("tools/call", {"name": "x"}, on_notification=fail)
            except Boom as boom:
                await session.say(f"boom {boom}")

        assert await run(client, agent, sid, script) == ["boom notifications/progress"]
        hosted = client.mcp.requests[-1]
        await hosted.done.wait()
        assert hosted.withdrawn
        assert withdrawals(client) == [mcp_requests(client)[-1]["id"]]
    validate(client)


async def test_failures_with_a_notification_callback_are_not_wrapped() -> None:
    """With ``on_notification`` the call runs a helper task; its failures still arrive as themselves."""
    agent = McpAgent()
    async with connect_agent(agent) as client:
        entry = client.host_mcp_server("tools", Tools())
        sid = await open_session(client, entry)
        got: list[McpNotification] = []

        async def timeout(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("slow", timeout=0.05, on_notification=got.append)

        assert await run(client, agent, sid, timeout) == ["McpTransportError"]
        assert isinstance(agent.raised, McpTransportError) and agent.raised.code == -32800

        async def inner_error(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("nope", on_notification=got.append)

        assert await run(client, agent, sid, inner_error) == ["McpServerError"]

        del client.mcp.servers[entry["serverId"]]
        assert await run(client, agent, sid, inner_error) == ["McpTransportError"]
        assert isinstance(agent.raised, McpTransportError) and agent.raised.code == -33001

        client.host_mcp_server("tools", Tools(), server_id=entry["serverId"])  # back again

        async def wait(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("slow", on_notification=got.append)

        agent.script = wait
        await client.prompt(sid, "go")
        await client.wait_for(lambda: len(client.mcp.requests) == 3)
        await client.mcp.requests[-1].started.wait()
        client.cancel(sid)
        assert (await client.wait_idle(sid, 4)).stop_reason == "cancelled"
        await client.mcp.requests[-1].done.wait()
        assert client.mcp.requests[-1].withdrawn and got == []
    validate(client)


async def test_errors_from_the_server() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await open_session(client, client.host_mcp_server("tools", Tools()))

        async def unknown_tool(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("nope")

        assert await run(client, agent, sid, unknown_tool) == ["McpServerError"]
        error = agent.raised
        assert isinstance(error, McpServerError) and not isinstance(error, RequestError)
        assert (error.server, error.code, error.message, error.data) == (
            "tools", -32602, "Unknown tool: nope", {"tool": "nope"})

        async def tool_failure(session: Session) -> None:
            result = await session.acp_mcp_servers["tools"].call_tool("broken", {})
            await session.say(f"{result.is_error} {result.text}")

        assert await run(client, agent, sid, tool_failure) == ["True disk full"]

        async def unknown_method(session: Session) -> None:
            await session.acp_mcp_servers["tools"].request("prompts/list")

        assert await run(client, agent, sid, unknown_method) == ["McpServerError"]
        assert isinstance(agent.raised, McpServerError) and agent.raised.code == -32601
    validate(client)


async def test_a_malformed_answer_is_a_transport_error() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await open_session(client, {"type": "acp", "name": "odd", "serverId": "odd-1"})
        answers: list[Any] = [{}, {"error": {"code": "x", "message": "m"}}, {"result": {"tools": "no"}}]

        async def odd(params: dict[str, Any]) -> Any:
            return answers.pop(0)

        client.connection.requests["mcp/message"] = Method(odd)  # a client that breaks the binding

        async def script(session: Session) -> None:
            server = session.acp_mcp_servers["odd"]
            for _ in range(2):
                with pytest.raises(McpTransportError) as bad:
                    await server.request("ping")
                assert bad.value.code == McpTransportError.BACKEND_FAILED and bad.value.server == "odd"
            with pytest.raises(McpServerError, match="malformed result"):
                await server.list_tools()
            await session.say("checked")

        assert await run(client, agent, sid, script) == ["checked"]


async def test_cancelling_the_turn_withdraws_the_request() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await start_a_turn_waiting_on_the_slow_tool(client, agent)
        hosted = client.mcp.requests[0]
        await hosted.started.wait()
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        await hosted.done.wait()
        assert hosted.withdrawn  # the client's handler was cancelled by $/cancel_request
        assert withdrawals(client) == [mcp_requests(client)[0]["id"]]
    validate(client)


async def test_a_timeout_withdraws_the_request() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await open_session(client, client.host_mcp_server("tools", Tools()))

        async def script(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("slow", timeout=0.05)

        assert await run(client, agent, sid, script) == ["McpTransportError"]
        assert isinstance(agent.raised, McpTransportError) and agent.raised.code == -32800
        assert "within 0.05 s" in agent.raised.message
        await client.mcp.requests[0].done.wait()
        assert client.mcp.requests[0].withdrawn
        assert withdrawals(client) == [mcp_requests(client)[0]["id"]]
    validate(client)


async def test_unknown_servers() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        entry = client.host_mcp_server("tools", Tools())
        sid = await open_session(client, entry)
        assert agent.session is not None
        with pytest.raises(UnknownMcpServerError) as missing:
            agent.session.acp_mcp_servers["nope"]
        assert isinstance(missing.value, KeyError) and isinstance(missing.value, AcpAgentError)
        assert str(missing.value) == "MCP server 'nope' is not given to this session"
        assert "nope" not in agent.session.acp_mcp_servers

        del client.mcp.servers[entry["serverId"]]  # the client disposed of the server: -33001

        async def script(session: Session) -> None:
            await session.acp_mcp_servers["tools"].call_tool("add", {"a": 1, "b": 2})

        assert await run(client, agent, sid, script) == ["McpTransportError"]
        error = agent.raised
        assert isinstance(error, McpTransportError) and isinstance(error, RequestError)
        assert error.code == McpTransportError.SERVER_UNAVAILABLE == -33001
        assert error.data == {"serverId": entry["serverId"]}
    validate(client)


async def test_a_client_without_mcp_over_acp() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        del client.connection.requests["mcp/message"]
        sid = await open_session(client, {"type": "acp", "name": "ghost", "serverId": "g"})

        async def script(session: Session) -> None:
            await session.acp_mcp_servers["ghost"].list_tools()

        assert await run(client, agent, sid, script) == ["McpTransportError"]
        assert isinstance(agent.raised, McpTransportError) and agent.raised.code == -32601


async def test_closing_the_session_ends_waiting_requests() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await open_session(client, client.host_mcp_server("tools", Tools()))
        assert agent.session is not None
        server = agent.session.acp_mcp_servers["tools"]
        outcome: list[BaseException] = []

        async def call_from_outside() -> None:  # a task the session does not own
            try:
                await server.call_tool("slow")
            except SessionClosedError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_from_outside)
            await client.wait_for(lambda: len(client.mcp.requests) == 1)
            await client.close_session(sid)
        assert len(outcome) == 1 and sid in str(outcome[0])
        await client.mcp.requests[0].done.wait()
        assert client.mcp.requests[0].withdrawn
        assert withdrawals(client) == [mcp_requests(client)[0]["id"]]

        before = len(mcp_requests(client))
        with pytest.raises(SessionClosedError):
            await server.list_tools()  # nothing is sent for a closed session
        assert len(mcp_requests(client)) == before
    validate(client)


async def test_closing_the_session_cancels_a_turn_waiting_on_a_tool() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        sid = await start_a_turn_waiting_on_the_slow_tool(client, agent)
        await client.close_session(sid)
        assert client.view(sid).stop_reason == "cancelled"
        await client.mcp.requests[0].done.wait()
        assert client.mcp.requests[0].withdrawn
        assert withdrawals(client) == [mcp_requests(client)[0]["id"]]
    validate(client)


async def test_resume_replaces_the_servers() -> None:
    agent = McpAgent()
    async with connect_agent(agent) as client:
        tools, other = Tools(), Tools()
        kept = client.host_mcp_server("tools", tools)
        dropped = client.host_mcp_server("old", other)
        sid = await open_session(client, kept, dropped)
        assert agent.session is not None
        servers = agent.session.acp_mcp_servers
        handle, old = servers["tools"], servers["old"]
        outcome: list[BaseException] = []

        async def waiting_on_old() -> None:
            try:
                await old.call_tool("slow")
            except UnknownMcpServerError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting_on_old)
            await client.wait_for(lambda: len(client.mcp.requests) == 1)
            added = client.host_mcp_server("new", Tools())
            await client.resume_session(sid, mcpServers=[kept, added])
        assert agent.session.acp_mcp_servers["tools"] is handle  # same server id: the same handle
        assert sorted(agent.session.acp_mcp_servers) == ["new", "tools"]
        assert len(outcome) == 1 and "no longer given" in str(outcome[0])
        with pytest.raises(UnknownMcpServerError):
            await old.list_tools()

        async def script(session: Session) -> None:
            result = await session.acp_mcp_servers["new"].call_tool("add", {"a": 4, "b": 4})
            await session.say(result.text)

        assert await run(client, agent, sid, script) == ["8"]
    validate(client)


async def test_the_host_checks_the_mcp_meta() -> None:
    """The test host plays the binding: a raw request without the MCP _meta gets an inner -32602."""
    agent = McpAgent()
    async with connect_agent(agent) as client:
        entry = client.host_mcp_server("tools", Tools())
        sid = await open_session(client, entry)
        assert agent.session is not None
        conn = agent.session.client.connection
        bare = await conn.request("mcp/message", {"serverId": entry["serverId"], "requestId": "r1",
                                                  "method": "tools/list"})
        assert bare["error"]["code"] == -32602
        old = await conn.request("mcp/message", {"serverId": entry["serverId"], "requestId": "r2",
                                                 "method": "tools/list",
                                                 "params": {"_meta": {
                                                     "io.modelcontextprotocol/protocolVersion": "2025-06-18",
                                                     "io.modelcontextprotocol/clientCapabilities": {}}}})
        assert old["error"]["code"] == -32022
        assert sid
