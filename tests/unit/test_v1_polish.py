"""What a user trial of the v1 bridge with acpx 0.19.1 still found after issue 37 (its leftovers).

A tool's output shown once; the final terminal view cut at a line start with a count of what was left
out, and no empty block before the first output; the login example's ``/ask`` advertised; a broken MCP
server named and left out of the turn; ``fastmcp`` imported off the event loop; ``session/new`` sent
before the ``initialize`` answer translated with the agent's capabilities.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage

from acp_agent.integrations.pydantic_ai import PydanticAIAgent
from acp_agent.integrations.pydantic_ai import mcp as mcp_module
from acp_agent.v1 import negotiating_streams
from acp_agent.v1.state import TERMINAL_TAIL
from tests.helpers.pydantic_ai_models import checked, scripted
from tests.unit.test_v1 import new_session, updates, v1
from tests.unit.test_v1_surface import _translator, _update

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from login_agent import LoginAgent

pytestmark = pytest.mark.anyio

ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # pydantic-ai runs on asyncio only


# -- 1: a tool's output once --------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_a_tools_result_is_shown_once_as_content_not_again_as_raw_output() -> None:
    agent = PydanticAgent(scripted([("edit_file", {"path": "app.py"}), "done"]))

    @agent.tool_plain
    async def edit_file(path: str) -> str:
        return f"edited {path}"

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "edit")
        (tool,) = view.tool_calls.values()
        assert tool["status"] == "completed" and "rawOutput" not in tool
        assert json.dumps(tool["content"]).count("edited app.py") == 1


# -- 2: terminal output in the v1 view ------------------------------------------------------------


def _terminal_texts(lines: list[bytes], *, exit_code: int | None = 0) -> list[dict[str, Any]]:
    translator = _translator()
    now = [0.0]
    translator.state.clock = lambda: now[0]
    sent = translator.outgoing(_update("s", {"sessionUpdate": "tool_call_update", "toolCallId": "t", "title": "make",
                                             "content": [{"type": "terminal", "terminalId": "term"}]}))
    for index, data in enumerate(lines):
        now[0] = float(index)  # every chunk is due: each one is shown
        sent += translator.outgoing(_update("s", {"sessionUpdate": "terminal_output_chunk", "terminalId": "term",
                                                  "data": base64.b64encode(data).decode()}))
    if exit_code is not None:
        sent += translator.outgoing(_update("s", {"sessionUpdate": "terminal_update", "terminalId": "term",
                                                  "exitStatus": {"exitCode": exit_code}}))
    return [m["params"]["update"] for m in sent]


def test_the_final_view_of_long_output_starts_at_a_line_and_counts_what_it_left_out() -> None:
    line = b"x" * 99 + b"\n"  # 100 bytes a line; 2,000 lines is 200 KB, over the 64 KiB kept
    [*_, final] = _terminal_texts([line * 1000, line * 1000])
    text = final["content"][0]["content"]["text"]
    body = text.removeprefix("```\n").removesuffix("```")
    first, *kept = body.splitlines()
    assert kept[-1] == "[exit code 0]"
    assert all(k == "x" * 99 for k in kept[:-1])  # no line starts mid-way
    assert first == f"… {2000 - len(kept[:-1])} earlier lines not shown"
    assert len(body) <= TERMINAL_TAIL + 100


def test_no_empty_block_before_the_first_output() -> None:
    first, *_ = _terminal_texts([b"hello\n"], exit_code=None)
    assert first["sessionUpdate"] == "tool_call" and first["content"] == []
    updates = _terminal_texts([], exit_code=0)
    assert [u["content"][0]["content"]["text"] for u in updates if u.get("content")] == ["```\n[exit code 0]\n```"]


# -- 3: the login example's commands ----------------------------------------------------------------


async def test_the_login_example_advertises_ask() -> None:
    async with v1(LoginAgent()) as (client, _):
        assert await client.request("authenticate", {"methodId": "agent-login"}) == {}
        await new_session(client)
        [listed] = [u for u in updates(client, commands=True) if u["sessionUpdate"] == "available_commands_update"]
        assert "ask" in [c["name"] for c in listed["availableCommands"]]


# -- 4 and 5: MCP servers ---------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_a_broken_mcp_server_is_named_and_left_out_of_the_turn(caplog: pytest.LogCaptureFixture,
                                                                     tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted(["fine without it"], seen)))
    with caplog.at_level(logging.WARNING, logger="acp_agent.integrations.pydantic_ai"):
        async with checked(agent) as client:
            await client.initialize()
            sid = await client.new_session(cwd=str(tmp_path), mcpServers=[
                {"type": "stdio", "name": "broken", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"],
                 "env": []}])
            view = await client.prompt_and_wait(sid, "hi")
            assert view.stop_reason == "end_turn"
            said = list(view.messages().values())
            assert said[-1] == "fine without it"
            assert any("`broken`" in text and "without its tools" in text for text in said)
    [line] = [r for r in caplog.records if "MCP server" in r.getMessage()]
    assert "'broken'" in line.getMessage()


@ASYNCIO_ONLY
async def test_the_mcp_client_library_is_imported_off_the_event_loop(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    threads: list[str] = []
    real = mcp_module._import_mcp

    def spy() -> None:
        threads.append(threading.current_thread().name)
        real()

    monkeypatch.setattr(mcp_module, "_import_mcp", spy)
    monkeypatch.setattr(mcp_module, "_imported", False)
    agent = PydanticAIAgent(PydanticAgent(scripted(["a", "b"])))
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path), mcpServers=[
            {"type": "stdio", "name": "gone", "command": sys.executable, "args": ["-c", "pass"], "env": []}])
        await client.prompt_and_wait(sid, "one")
        await client.prompt_and_wait(sid, "two")
    assert len(threads) == 1 and threads[0] != threading.main_thread().name  # once, in a worker thread


# -- 6: session/new before the initialize answer ------------------------------------------------------


async def test_session_new_before_the_initialize_answer_waits_for_the_agents_capabilities(
        caplog: pytest.LogCaptureFixture) -> None:
    from acp_agent.testing.streams import byte_pipe

    to_send, to_receive = byte_pipe()
    out_send, out_receive = byte_pipe()
    receive, send = negotiating_streams(to_receive, out_send)
    server = {"name": "files", "command": sys.executable, "args": [], "env": []}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": 1, "clientCapabilities": {}}}
    new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": [server]}}
    with caplog.at_level(logging.WARNING, logger="acp_agent.v1"):
        await to_send.send(json.dumps(initialize).encode() + b"\n" + json.dumps(new).encode() + b"\n")
        [first] = (await receive.receive()).splitlines()  # the runtime gets the initialize alone first
        assert json.loads(first)["method"] == "initialize"
        await send.send(json.dumps({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": 2, "info": {"name": "a", "version": "1"},
            "capabilities": {"session": {"mcp": {"stdio": {}}}}}}).encode() + b"\n")
        await out_receive.receive()
        forwarded = json.loads(await receive.receive())
    assert forwarded["method"] == "session/new"
    assert forwarded["params"]["mcpServers"] == [{"type": "stdio", **server}]
    assert not [r for r in caplog.records if "stdio MCP" in r.getMessage()]
