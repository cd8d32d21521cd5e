"""The v1 bridge as complete as a hand-written v1 agent (issue 37, findings 1-6).

Each test names the finding it covers. They drive the bridge the way third-party v1 clients did
(acpx, Toad, Zed): raw v1 JSON-RPC through the in-memory transport, every agent line validated
against the official v1 schemas at the end (`tests.unit.test_v1.v1`), or the translator alone
where a clock or a client quirk has to be reproduced exactly.
"""

from __future__ import annotations

import base64
import logging
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_agent import text_diff
from acp_agent.v1 import V1Translator
from tests.helpers.agents import ScriptedAgent
from tests.unit.test_v1 import new_session, prompt, tool_view, updates, v1

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from background_agent import BackgroundAgent
from login_agent import LoginAgent

pytestmark = pytest.mark.anyio

ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # pydantic-ai runs on asyncio only
STDIO_SERVER = {"name": "files", "command": "/usr/bin/true", "args": [], "env": []}


def _update(session_id: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def _translator(capabilities: dict[str, Any] | None = None) -> V1Translator:
    translator = V1Translator()
    translator.incoming({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    translator.outgoing({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": capabilities or {}}})
    translator.state.session("s")
    return translator


# -- finding 1: stdio MCP servers --------------------------------------------------------------


async def test_stdio_mcp_servers_are_accepted_from_a_v1_client(caplog: pytest.LogCaptureFixture) -> None:
    """Finding 1: the agent does not use stdio MCP servers; v1 says every agent accepts them."""
    with caplog.at_level(logging.WARNING, logger="acp_agent.v1"):
        async with v1(ScriptedAgent()) as (client, _):
            answer = await client.request("session/new", {"cwd": "/tmp", "mcpServers": [STDIO_SERVER]})
            assert isinstance(answer["sessionId"], str)
    [line] = [r for r in caplog.records if "stdio MCP" in r.getMessage()]
    assert "files" in line.getMessage()


def test_stdio_mcp_servers_reach_an_agent_that_uses_them() -> None:
    """Finding 1: an agent that advertised ``mcp.stdio`` gets them, typed ``stdio``."""
    translator = _translator({"session": {"mcp": {"stdio": {}}}})
    [forwarded], _ = translator.incoming({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                          "params": {"cwd": "/tmp", "mcpServers": [STDIO_SERVER]}})
    assert forwarded["params"]["mcpServers"] == [{"type": "stdio", **STDIO_SERVER}]


# -- finding 2: logins -------------------------------------------------------------------------


async def test_authenticate_logs_in_through_a_form() -> None:
    """Finding 2: authMethods in v1 shape, session/new gated, authenticate = auth/login (with its form)."""
    capabilities = {"elicitation": {"form": {}}}
    async with v1(LoginAgent(), capabilities) as (client, answer):
        assert answer["authMethods"] == [{"id": "agent-login", "name": "Log in",
                                          "description": "Sign in to the agent"}]
        assert answer["agentCapabilities"]["auth"] == {"logout": {}}
        with pytest.raises(Exception) as gated:
            await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert getattr(gated.value, "code", None) == -32000
        client.elicitation_policy = lambda params: {"action": "accept", "content": {"name": "Ada"}}
        assert await client.request("authenticate", {"methodId": "agent-login"}) == {}
        [form] = [m for m in client.sent_by_agent() if m.get("method") == "elicitation/create"]
        assert form["params"]["mode"] == "form"
        sid = await new_session(client)
        assert await prompt(client, sid, "hi") == {"stopReason": "end_turn"}
        assert await client.request("logout", {}) == {}
        with pytest.raises(Exception) as again:
            await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert getattr(again.value, "code", None) == -32000


# -- finding 3: diffs --------------------------------------------------------------------------


def test_a_text_diff_reaches_v1_with_its_texts() -> None:
    """Finding 3: `text_diff` keeps the texts; v1 gets ``{type: diff, path, oldText, newText}``."""
    translator = _translator()
    diff = text_diff("/p/a.txt", "one\n", "two\n").model_dump(by_alias=True, exclude_none=True, mode="json")
    [call] = translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t",
                                               "title": "Edit a.txt", "kind": "edit", "content": [diff]}))
    assert call["params"]["update"]["content"] == [
        {"type": "diff", "path": "/p/a.txt", "oldText": "one\n", "newText": "two\n"}]
    new_file = text_diff("/p/b.txt", None, "hi\n").model_dump(by_alias=True, exclude_none=True, mode="json")
    [update] = translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t",
                                                 "content": [new_file]}))
    assert update["params"]["update"]["content"] == [
        {"type": "diff", "path": "/p/b.txt", "oldText": None, "newText": "hi\n"}]


def test_a_diff_with_only_a_patch_is_a_fenced_diff_block() -> None:
    """Finding 3: no texts, a patch: the patch as a ```diff block, not the bare path."""
    translator = _translator()
    patch = "diff --git /p/a /p/a\n--- /p/a\n+++ /p/a\n@@ -1 +1 @@\n-a\n+b\n"
    [call] = translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [
        {"type": "diff", "changes": [{"operation": "modify", "path": "/p/a"}],
         "patch": {"format": "git_patch", "text": patch}}]}))
    assert call["params"]["update"]["content"] == [
        {"type": "content", "content": {"type": "text", "text": f"```diff\n{patch}```"}}]


@ASYNCIO_ONLY
async def test_an_approved_coding_edit_reaches_v1_as_a_diff_with_its_text(tmp_path: Path) -> None:
    """Finding 3, end to end: the coding example's edit, approved by the user, is a v1 diff with both texts."""
    import coding_agent

    (tmp_path / "a.txt").write_text("one\ntwo\n")
    async with v1(coding_agent.agent) as (client, _):
        answer = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = str(answer["sessionId"])
        assert await prompt(client, sid, "edit a.txt: two => TWO") == {"stopReason": "end_turn"}
        [request] = [m for m in client.sent_by_agent() if m.get("method") == "session/request_permission"]
        tool = tool_view(client, request["params"]["toolCall"]["toolCallId"])
        assert tool["status"] == "completed"
        assert {"type": "diff", "path": str(tmp_path / "a.txt"), "oldText": "one\ntwo\n",
                "newText": "one\nTWO\n"} in tool["content"]
        assert (tmp_path / "a.txt").read_text() == "one\nTWO\n"


def test_terminal_login_methods_in_v1_shape() -> None:
    """Finding 2: a terminal method for a client with ``auth.terminal: true``, in v1 shape."""
    translator = V1Translator()
    [forwarded], _ = translator.incoming({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}})
    assert forwarded["params"]["capabilities"] == {"auth": {"terminal": {}}}
    [answer] = translator.outgoing({"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": {}, "authMethods": [
            {"type": "terminal", "methodId": "tui", "name": "Log in", "args": ["--login"],
             "env": [{"name": "MODE", "value": "tui"}]}]}})
    assert answer["result"]["authMethods"] == [
        {"id": "tui", "name": "Log in", "type": "terminal", "args": ["--login"], "env": {"MODE": "tui"}}]


@ASYNCIO_ONLY
async def test_the_coding_example_takes_an_image_from_a_v1_client() -> None:
    """Finding 5: a prompt with an image reaches the coding example's offline model, which answers it."""
    import coding_agent

    async with v1(coding_agent.agent) as (client, answer):
        assert answer["agentCapabilities"]["promptCapabilities"]["image"] is True
        sid = await new_session(client)
        image = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"\x89PNG").decode()}
        got = await client.request("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "what is this"}, image]})
        assert got == {"stopReason": "end_turn"}
        said = "".join(u["content"]["text"] for u in updates(client) if u["sessionUpdate"] == "agent_message_chunk")
        assert "You said: what is this [image]" in said


# -- finding 4: terminal output paced ---------------------------------------------------------


def build_on_the_v1_wire(lines: int = 3000, seconds: float = 1.5) -> tuple[int, int, int]:
    """(output bytes, v1 bytes, v1 updates) of a build printing ``lines`` lines, one chunk each, over
    ``seconds`` on the translator's clock, then exiting 0."""
    translator = _translator()
    now = [0.0]
    translator.state.clock = lambda: now[0]
    sent: list[dict[str, Any]] = []
    sent += translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t",
                                              "title": "make", "kind": "execute", "status": "in_progress",
                                              "content": [{"type": "terminal", "terminalId": "term"}]}))
    output = 0
    for index in range(lines):
        data = f"[{index:04d}/3000] compiling module_{index:04d}.c\n".encode()
        output += len(data)
        now[0] = seconds * index / lines
        due = translator.due()
        if due is not None and due <= now[0]:
            sent += translator.flush()
        sent += translator.outgoing(_update("s", {"sessionUpdate": "terminal_output_chunk", "terminalId": "term",
                                                  "data": base64.b64encode(data).decode()}))
    sent += translator.outgoing(_update("s", {"sessionUpdate": "terminal_update", "terminalId": "term",
                                              "exitStatus": {"exitCode": 0}}))
    sent += translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t",
                                              "status": "completed"}))
    import orjson

    return output, sum(len(orjson.dumps(m)) + 1 for m in sent), len(sent)


def test_a_3000_line_build_is_paced_and_bounded_on_the_v1_wire() -> None:
    """Finding 4: at most a few updates a second per terminal plus the final one; bytes bounded."""
    output, wire, count = build_on_the_v1_wire()
    assert count <= 60, count
    assert wire <= 10 * output, (wire, output)


def test_held_terminal_output_is_sent_when_due() -> None:
    """Finding 4: output held back by the pacing is not lost when nothing else happens."""
    translator = _translator()
    now = [0.0]
    translator.state.clock = lambda: now[0]
    translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": "x",
                                      "content": [{"type": "terminal", "terminalId": "term"}]}))

    def chunk(text: str) -> list[dict[str, Any]]:
        return translator.outgoing(_update("s", {"sessionUpdate": "terminal_output_chunk", "terminalId": "term",
                                                 "data": base64.b64encode(text.encode()).decode()}))

    assert chunk("a\n") and not chunk("b\n")
    assert translator.due() is not None
    now[0] = 1.0
    [flushed] = translator.flush()
    assert flushed["params"]["update"]["content"][0]["content"]["text"] == "```\na\nb\n```"
    assert translator.due() is None


async def test_a_real_build_stays_within_the_bounds() -> None:
    """Finding 4, end to end: a 1,000-line build (a line a millisecond) through the background example's /run."""
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        script = "import time\nfor i in range(1000):\n print(f'[{i:04d}] cc -c mod_{i:04d}.c', flush=True)\n " \
                 "time.sleep(0.001)"
        await prompt(client, sid, f"/run {sys.executable} -c {shlex.quote(script)}")
        [tool_id] = [u["toolCallId"] for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        tool_lines = [m for m in client.sent_by_agent() if m.get("method") == "session/update"
                      and m["params"]["update"].get("toolCallId") == tool_id]
        import orjson

        wire = sum(len(orjson.dumps(m)) + 1 for m in tool_lines)
        assert len(tool_lines) <= 30 and wire <= 10 * 1000 * 24, (len(tool_lines), wire)
        assert "[0999] cc -c mod_0999.c\n[exit code 0]" in tool_view(client, tool_id)["content"][0]["content"]["text"]


# -- finding 5: the smaller ones -----------------------------------------------------------------


async def test_the_background_example_advertises_its_commands() -> None:
    """Finding 5: Toad's own menu replaced /run because the agent listed no commands."""
    async with v1(BackgroundAgent()) as (client, _):
        await new_session(client)
        [listed] = [u for u in updates(client, commands=True) if u["sessionUpdate"] == "available_commands_update"]
        names = [c["name"] for c in listed["availableCommands"]]
        assert {"run", "bg", "ask", "jobs", "stop"} <= set(names)


async def test_toads_unadvertised_embedded_resource_is_given_as_text(caplog: pytest.LogCaptureFixture) -> None:
    """Finding 5: Toad sends @file as a ``resource`` to any agent; the prompt is not refused."""
    toad_prompt = [{"type": "text", "text": "explain "},
                   {"type": "resource", "resource": {"uri": "file:///p/a.py", "mimeType": "text/x-python",
                                                     "text": "print(1)"}}]
    agent = ScriptedAgent()
    with caplog.at_level(logging.WARNING, logger="acp_agent.v1"):
        async with v1(agent) as (client, answer):
            assert answer["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is False
            sid = await new_session(client)
            got = await client.request("session/prompt", {"sessionId": sid, "prompt": toad_prompt})
            assert got == {"stopReason": "end_turn"}
    assert len([r for r in caplog.records if "embedded resource" in r.getMessage()]) == 1


async def test_the_coding_examples_offline_model_takes_an_image() -> None:
    """Finding 5: the offline model answered nothing to a prompt that carried an image."""
    import coding_agent
    from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart
    from pydantic_ai.models.function import AgentInfo

    messages = [ModelRequest(parts=[UserPromptPart(content=["what is this",
                                                            BinaryContent(data=b"\x89PNG", media_type="image/png")])])]
    info = AgentInfo(function_tools=[], allow_text_output=True, output_tools=[], model_settings=None,
                     model_request_parameters=None, instructions=None)  # type: ignore[arg-type]
    said = "".join([str(part) async for part in coding_agent.offline(messages, info)])
    assert "You said: what is this [image]" in said


# -- finding 6: stopping background work -------------------------------------------------------


async def test_jobs_and_stop_commands_stop_background_work() -> None:
    """Finding 6: /jobs lists the session's background work, /stop ID stops it."""
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/bg sleep 30")
        [tool_id] = [u["toolCallId"] for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        assert await prompt(client, sid, "/jobs") == {"stopReason": "end_turn"}
        said = [u["content"]["text"] for u in updates(client) if u["sessionUpdate"] == "agent_message_chunk"]
        listing = said[-1]
        assert "sleep 30" in listing
        terminal_id = listing.split("`")[1]
        assert await prompt(client, sid, f"/stop {terminal_id}") == {"stopReason": "end_turn"}
        await client.wait_for(lambda: tool_view(client, tool_id)["status"] == "failed")
        assert "[terminated by" in tool_view(client, tool_id)["content"][0]["content"]["text"]
        assert await prompt(client, sid, "/jobs") == {"stopReason": "end_turn"}
        said = [u["content"]["text"] for u in updates(client) if u["sessionUpdate"] == "agent_message_chunk"]
        assert said[-1] == "No background work is running."


async def test_cancel_while_idle_stops_the_sessions_background_work() -> None:
    """Finding 6: Zed's stop button sends session/cancel; with no prompt running it stops background work."""
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/bg sleep 30")
        await prompt(client, sid, "/workflow 30")
        tools = [u["toolCallId"] for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        await client.notify("session/cancel", {"sessionId": sid})
        await client.wait_for(lambda: all(tool_view(client, t)["status"] == "failed" for t in tools))


def test_an_agents_own_stop_command_wins() -> None:
    """Finding 6: an agent with its own /stop gets the prompt; the bridge lists only its /jobs."""
    translator = _translator()
    [listed] = translator.outgoing(_update("s", {"sessionUpdate": "available_commands_update", "availableCommands": [
        {"name": "stop", "description": "Stop the robot"}]}))
    assert listed["params"]["update"]["availableCommands"] == [
        {"name": "stop", "description": "Stop the robot"},
        {"name": "jobs", "description": "List this session's background work"}]
    [forwarded], answers = translator.incoming({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
        "sessionId": "s", "prompt": [{"type": "text", "text": "/stop now"}]}})
    assert forwarded["method"] == "session/prompt" and answers == []


async def test_cancel_during_a_turn_leaves_background_work_running() -> None:
    """Finding 6: a cancel while a prompt runs is the v2 cancel of that turn only."""
    agent = BackgroundAgent()
    async with v1(agent) as (client, _):
        sid: str = await new_session(client)
        await prompt(client, sid, "/bg sleep 30")
        [tool_id] = [u["toolCallId"] for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        translator_view = tool_view(client, tool_id)
        assert translator_view["status"] == "in_progress"
        import anyio

        async with anyio.create_task_group() as tg:
            answers: list[Any] = []

            async def run() -> None:
                answers.append(await prompt(client, sid, "/run sleep 30"))

            tg.start_soon(run)
            await client.wait_for(lambda: len([u for u in updates(client) if u["sessionUpdate"] == "tool_call"]) == 2)
            await client.notify("session/cancel", {"sessionId": sid})
        assert answers == [{"stopReason": "cancelled"}]
        assert tool_view(client, tool_id)["status"] == "in_progress"



