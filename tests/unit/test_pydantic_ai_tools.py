"""The bridge's tool families offline: the shell-and-files toolset (terminals, diffs, background
commands), background tools with their follow-up turn, subagents, MCP servers from ``session/new``.

Scripted ``FunctionModel``s drive a real pydantic-ai agent; the checked client judges each transcript.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from acp_agent.integrations.pydantic_ai import (
    CodingTools,
    PermissionPolicy,
    PydanticAIAgent,
    background_tool,
    delegate,
)
from acp_agent.testing import HostedMcpRequest, McpErrorAnswer
from acp_agent.testing.client import Client
from tests.helpers.pydantic_ai_models import checked, last_tool_return, scripted

pytestmark = pytest.mark.anyio

ALLOW_ALL = PermissionPolicy(allow={"write_file", "edit_file", "run_command"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


def coding_agent(steps: list[Any], seen: list[list[ModelMessage]], **options: Any) -> PydanticAIAgent:
    tools = CodingTools()
    return PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=tools.toolsets,
                           permission_policy=options.pop("permission_policy", ALLOW_ALL), **options)


def terminal_text(client: Client, sid: str) -> str:
    return "".join(t["output"].decode() for t in client.view(sid).terminals.values())


async def test_files_show_diffs_and_stay_inside_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [
        ("edit_file", {"path": "a.txt", "old_text": "two", "new_text": "TWO"}),
        ("write_file", {"path": "new/b.txt", "content": "hello\n"}),
        ("read_file", {"path": "../outside.txt"}),
        ("search", {"pattern": "TW."}),
        "done",
    ]
    async with checked(coding_agent(steps, seen)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        view = await client.prompt_and_wait(sid, "edit")
        assert (tmp_path / "a.txt").read_text() == "one\nTWO\n"
        assert (tmp_path / "new" / "b.txt").read_text() == "hello\n"
        edit, write, read, search = view.tool_calls.values()
        assert edit["kind"] == "edit" and edit["status"] == "completed"
        assert edit["locations"] == [{"path": str(tmp_path / "a.txt")}]
        diff = edit["content"][0]
        assert diff["type"] == "diff" and diff["changes"] == [
            {"operation": "modify", "path": str(tmp_path / "a.txt"), "fileType": "text",
             "_meta": {"acp-agent/text": {"oldText": "one\ntwo\n", "newText": "one\nTWO\n"}}}]
        assert "-two\n+TWO\n" in diff["patch"]["text"] and diff["patch"]["format"] == "git_patch"
        assert write["content"][0]["changes"][0]["operation"] == "add"
        assert read["status"] == "failed"  # outside the cwd: the model is asked to retry
        assert "outside the project directory" in str(seen[3][-1].parts[0])
        assert search["kind"] == "search" and last_tool_return(seen[4]) == "a.txt:2: TWO"


async def test_the_coding_presenter_shows_the_diff_before_the_user_approves(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    tools = CodingTools()
    steps: list[Any] = [("edit_file", {"path": "a.txt", "old_text": "one", "new_text": "two"}), "done"]
    agent = PydanticAIAgent(PydanticAgent(scripted(steps)), toolsets=tools.toolsets, tool_presenter=tools.presenter)
    async with checked(agent, permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        await client.prompt(sid, "edit")
        await client.wait_for(lambda: bool(client.pending_permissions))
        (tool,) = client.view(sid).tool_calls.values()
        assert (tool["title"], tool["kind"], tool["status"]) == ("Edit a.txt", "edit", "pending")
        assert "-one\n+two\n" in tool["content"][0]["patch"]["text"]
        assert (tmp_path / "a.txt").read_text() == "one\n"  # not yet
        assert client.pending_permissions[0]["params"]["title"] == "Allow Edit a.txt?"
        client.answer_permission(0, "allow_once")
        view = await client.wait_idle(sid)
        (tool,) = view.tool_calls.values()
        assert [c["type"] for c in tool["content"]] == ["diff", "content"]  # the diff made, then the result
        assert (tmp_path / "a.txt").read_text() == "two\n"


async def test_a_command_runs_as_a_terminal_in_its_tool_call(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [("run_command", {"command": "echo out; echo err >&2; exit 3"}), "done"]
    async with checked(coding_agent(steps, seen)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        view = await client.prompt_and_wait(sid, "run")
        (tool,) = view.tool_calls.values()
        (terminal_id,) = view.terminals
        assert tool["kind"] == "execute" and {"type": "terminal", "terminalId": terminal_id} in tool["content"]
        assert view.terminals[terminal_id]["exitStatus"]["exitCode"] == 3
        assert "out" in terminal_text(client, sid)
        result = last_tool_return(seen[1])
        assert result.startswith("exit code 3") and "out" in result and "err" in result
        # The output is shown once, by the terminal: not again as text content or as rawOutput (issue 37).
        assert tool["content"] == [{"type": "terminal", "terminalId": terminal_id}]
        assert "rawOutput" not in tool


async def test_a_command_asks_first_and_a_rejected_one_never_runs(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [("run_command", {"command": "touch ran"}), "ok"]
    agent = coding_agent(steps, seen, permission_policy=PermissionPolicy())
    async with checked(agent, permission_policy=lambda params: {
            "outcome": {"outcome": "selected", "optionId": "reject_once"}}) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        await client.prompt_and_wait(sid, "run")
        assert not (tmp_path / "ran").exists() and client.view(sid).terminals == {}
        assert "rejected" in last_tool_return(seen[1])


async def test_a_background_command_is_listed_stopped_by_the_client_and_reported(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [
        ("run_command", {"command": "echo serving; sleep 30", "background": True, "notify_on_exit": True}),
        "started",
        "the server stopped",  # the follow-up turn after its exit
    ]
    async with checked(coding_agent(steps, seen)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        view = await client.prompt_and_wait(sid, "serve")
        assert "Started in the background as terminal" in last_tool_return(seen[1])
        (terminal_id,) = view.terminals
        assert {"type": "terminal", "terminalId": terminal_id} in (view.background or [])
        await client.wait_for(lambda: "serving" in terminal_text(client, sid))
        await client.cancel_terminal(sid, terminal_id)
        await client.wait_idle(sid, count=2)
        assert view.quiet and view.terminals[terminal_id]["exitStatus"]["signal"] is not None
        assert list(view.messages().values())[-1] == "the server stopped"
        assert seen[-1][-1].parts[0].content.startswith("[background] The command `echo serving; sleep 30`")


async def test_a_background_tool_runs_after_the_turn_and_its_result_comes_back(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    release = anyio.Event()
    agent = PydanticAgent(scripted([("slow_report", {"topic": "tests"}), "working on it", "report received"], seen))

    @agent.tool_plain(metadata=background_tool())
    async def slow_report(topic: str) -> str:
        await release.wait()
        return f"report on {topic}"

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        view = await client.prompt_and_wait(sid, "report")
        (tool_id,) = view.tool_calls
        assert view.background == [{"type": "tool_call", "toolCallId": tool_id}]
        assert view.tool_calls[tool_id]["status"] == "in_progress"
        assert "in the background" in last_tool_return(seen[1])
        release.set()
        await client.wait_idle(sid, count=2)
        assert view.tool_calls[tool_id]["status"] == "completed" and view.quiet
        assert seen[-1][-1].parts[0].content == f"[background] slow_report (tool call {tool_id}) finished: " \
                                                "report on tests"
        assert list(view.messages().values())[-1] == "report received"


async def test_a_delegated_agent_runs_as_a_subagent() -> None:
    researcher = PydanticAgent(scripted(["the answer is 42"]), name="researcher")
    seen: list[list[ModelMessage]] = []
    agent = PydanticAgent(scripted([("research", {"question": "meaning"}), "it is 42"], seen))

    @agent.tool_plain
    async def research(question: str) -> str:
        return await delegate(researcher, question, title="Research")

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "why")
        (child_id,) = view.children
        assert view.children[child_id]["title"] == "Research"
        assert list(client.view(child_id).messages().values()) == ["the answer is 42"]
        assert last_tool_return(seen[1]) == "the answer is 42"


async def test_a_subagent_uses_the_calling_runs_permission_policy() -> None:
    ran: list[str] = []
    researcher = PydanticAgent(scripted([("note", {"text": "x"}), "noted"]), name="researcher")

    @researcher.tool_plain(requires_approval=True)
    def note(text: str) -> str:
        ran.append(text)
        return "ok"

    agent = PydanticAgent(scripted([("research", {"question": "q"}), "done"]))

    @agent.tool_plain
    async def research(question: str) -> str:
        return await delegate(researcher, question)

    served = PydanticAIAgent(agent, permission_policy=PermissionPolicy(allow={"note"}))
    async with checked(served, permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "go")
        assert ran == ["x"] and not client.pending_permissions  # allowed by the parent's policy, not asked
        (child_id,) = client.view(sid).children
        assert [t["status"] for t in client.view(child_id).tool_calls.values()] == ["completed"]


async def test_a_subagent_cancelled_alone_leaves_the_parent_turn_going() -> None:
    async def slow(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "thinking..."
        await anyio.sleep(30)
        yield "never"

    researcher = PydanticAgent(FunctionModel(stream_function=slow), name="researcher")
    seen: list[list[ModelMessage]] = []
    agent = PydanticAgent(scripted([("research", {"question": "q"}), "gave up"], seen))

    @agent.tool_plain
    async def research(question: str) -> str:
        return await delegate(researcher, question)

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt(sid, "why")
        await client.wait_for(lambda: any(client.view(c).messages() for c in client.view(sid).children))
        (child_id,) = client.view(sid).children
        client.cancel(child_id)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "end_turn" and client.view(child_id).stop_reason == "cancelled"
        assert last_tool_return(seen[1]) == "The subagent did not finish (cancelled)."
        assert list(view.messages().values()) == ["gave up"]


async def test_cancel_mid_tool_cancels_its_tool_call_and_the_next_turn_goes_on() -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAgent(scripted([("slow", {}), "after"], seen))

    @agent.tool_plain
    async def slow() -> str:
        await anyio.sleep(30)
        return "never"

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt(sid, "go")
        await client.wait_for(lambda: any(t.get("status") == "in_progress"
                                          for t in client.view(sid).tool_calls.values()))
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        assert [t["status"] for t in view.tool_calls.values()] == ["cancelled"]
        view = await client.prompt_and_wait(sid, "next")  # the open tool call is closed out in the history
        assert view.stop_reason == "end_turn" and list(view.messages().values()) == ["after"]
        assert [m.kind for m in seen[-1]] == ["request", "response", "request"]


async def test_mcp_servers_from_session_new_become_toolsets(tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(MCP_SERVER)
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted([("files_shout", {"text": "hi"}), "done"], seen)))
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path), mcpServers=[
            {"type": "stdio", "name": "files", "command": sys.executable, "args": [str(server)], "env": []}])
        view = await client.prompt_and_wait(sid, "shout")
        (tool,) = view.tool_calls.values()
        assert tool["name"] == "files_shout" and tool["status"] == "completed"
        assert last_tool_return(seen[1]) == "HI"


def shout_server(request: HostedMcpRequest) -> dict[str, Any]:
    """An MCP server the client hosts over ACP: one tool, ``shout``; ``whisper`` reports an error."""
    if request.method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        return {"tools": [{"name": "shout", "description": "Upper-case a text", "inputSchema": schema}]}
    if request.method != "tools/call":
        raise McpErrorAnswer(-32601, f"Method not found: {request.method}")
    return {"content": [{"type": "text", "text": str(request.arguments["text"]).upper()}]}


async def test_mcp_servers_the_client_hosts_over_acp_when_opted_in() -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted([("loud_shout", {"text": "hey"}), "done"], seen)), mcp_acp=True)
    async with checked(agent) as client:
        answer = await client.initialize()
        assert answer["capabilities"]["session"]["mcp"]["acp"] == {}
        sid = await client.new_session(mcpServers=[client.host_mcp_server("loud", shout_server)])
        view = await client.prompt_and_wait(sid, "shout")
        (tool,) = view.tool_calls.values()
        assert (tool["name"], tool["status"]) == ("loud_shout", "completed")
        assert last_tool_return(seen[1]) == "HEY"
        assert [r.method for r in client.mcp.requests] == ["tools/list", "tools/call"]


async def test_mcp_servers_are_not_connected_when_opted_out() -> None:
    agent = PydanticAIAgent(PydanticAgent(scripted(["x"])), mcp=False)
    async with checked(agent) as client:
        answer = await client.initialize()
        assert "mcp" not in answer["capabilities"]["session"]


MCP_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("files")


@server.tool()
def shout(text: str) -> str:
    return text.upper()


server.run()
"""
