"""The v1 bridge over the in-memory transport: negotiation, turn translation, tool calls, terminals, AIR tasks.

Every test talks raw v1 JSON-RPC to an unchanged v2 agent through :func:`acp_agent.testing.client.connect_agent`
(with the v2 wire checker off: the traffic is v1) and, at the end, validates every agent→client line against the
official v1 schemas from the pinned npm package (AIR ``async_task_*`` updates, an extension outside the schema, are
checked by shape instead).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent import Session
from acp_agent.schema import SessionConfigOption, SessionConfigSelectOption
from acp_agent.testing.client import Client, connect_agent
from acp_agent.v1 import V1Translator, negotiating_streams
from tests.helpers.agents import ForkingAgent, ScriptedAgent
from tests.helpers.interop import NODE_MODULES, AgentTrafficValidator, load_schema

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from background_agent import BackgroundAgent

pytestmark = pytest.mark.anyio

V1_SCHEMAS = [NODE_MODULES / "@agentclientprotocol" / "sdk" / "schema" / "v1" / name
              for name in ("schema.unstable.json", "schema.json")]
AIR = {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": ["asyncTasks"]}}}}
AIR_UPDATES = {"async_task_spawned", "async_task_state_update"}


def _validate(client: Client) -> None:
    agent = client.sent_by_agent()
    requests = {json.dumps(e.message["id"]): e.message["method"] for e in client.transcript
                if e.direction == "client->agent" and "method" in e.message and "id" in e.message}
    plain = []
    for message in agent:
        update = (message.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") in AIR_UPDATES:
            assert isinstance(update.get("asyncTaskId"), str), message
            if update["sessionUpdate"] == "async_task_spawned":
                assert {"name", "taskType", "showInTranscript", "canStop"} <= update.keys(), message
            else:
                assert update["state"] in ("running", "paused", "completed", "failed", "stopped"), message
        else:
            plain.append(message)
    for path in V1_SCHEMAS:
        if not path.is_file():
            pytest.skip("the npm interop packages are missing; `make test` installs them")
        validator = AgentTrafficValidator(load_schema(path))
        for message in plain:
            validator.validate(message, requests)


@asynccontextmanager
async def v1(agent: Any, capabilities: dict[str, Any] | None = None) -> AsyncIterator[tuple[Client, dict[str, Any]]]:
    async with connect_agent(agent, check=False) as client:
        answer = await client.request("initialize", {
            "protocolVersion": 1, "clientCapabilities": capabilities or {},
            "clientInfo": {"name": "v1-test", "version": "0"}})
        yield client, answer
    _validate(client)


def updates(client: Client, session_id: str | None = None, *, commands: bool = False) -> list[dict[str, Any]]:
    """The session updates the client got (the command lists only with ``commands``)."""
    return [m["params"]["update"] for m in client.sent_by_agent()
            if m.get("method") == "session/update" and session_id in (None, m["params"]["sessionId"])
            and (commands or m["params"]["update"]["sessionUpdate"] != "available_commands_update")]


async def new_session(client: Client) -> str:
    answer = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
    return str(answer["sessionId"])


async def prompt(client: Client, session_id: str, text: str) -> dict[str, Any]:
    answer: dict[str, Any] = await client.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
    return answer


def tool_view(client: Client, tool_id: str) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for update in updates(client):
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update") and update["toolCallId"] == tool_id:
            state.update(update)
    return state


class ModeAgent(ScriptedAgent):
    """Offers a ``mode`` config option: v1 clients see it as session modes too."""

    async def new_session(self, session: Session) -> None:
        session.config_options = [SessionConfigOption(
            type="select", config_id="mode", name="Mode", category="mode", current_value="ask",
            options=[SessionConfigSelectOption(value="ask", name="Ask"),
                     SessionConfigSelectOption(value="code", name="Code", description="Edits files")])]


# -- negotiation ---------------------------------------------------------------------------


async def test_initialize_1_answers_in_v1_shapes() -> None:
    async with v1(ScriptedAgent()) as (_, answer):
        assert answer == {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "scripted", "version": "9.9.9"},
        }


async def test_initialize_2_is_untouched_v2() -> None:
    async with connect_agent(ScriptedAgent()) as client:  # the v2 wire checker stays on
        answer = await client.initialize()
        assert answer["protocolVersion"] == 2 and "capabilities" in answer and "agentCapabilities" not in answer
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "hello")
        assert view.stop_reason == "end_turn"
        assert any(u["sessionUpdate"] == "state_update" for u in view.updates)


async def test_negotiation_waits_for_a_valid_initialize() -> None:
    async with connect_agent(ScriptedAgent(), check=False) as client:
        with pytest.raises(Exception, match="not initialized"):
            await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        with pytest.raises(Exception) as refused:
            await client.request("initialize", {"protocolVersion": 0, "info": {"name": "old", "version": "0"}})
        assert getattr(refused.value, "code", None) == -32022
        answer = await client.request("initialize", {"protocolVersion": 1})
        assert answer["protocolVersion"] == 1 and answer["agentInfo"]["name"] == "scripted"
        sid = await new_session(client)
        assert await prompt(client, sid, "hi") == {"stopReason": "end_turn"}


# -- turns ---------------------------------------------------------------------------------


async def test_prompt_answer_waits_for_the_end_of_the_turn() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        assert await prompt(client, sid, "sleep 0.2") == {"stopReason": "end_turn"}
        sent = client.sent_by_agent()
        answer_at = next(i for i, m in enumerate(sent) if m.get("id") == 2 and "result" in m)
        said_at = max(i for i, m in enumerate(sent) if m.get("method") == "session/update")
        assert said_at < answer_at  # everything of the turn came before its answer
        kinds = {u["sessionUpdate"] for u in updates(client)}
        assert kinds == {"agent_message_chunk"}  # no state_update, no user_message echo


async def test_cancel_answers_cancelled() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        async with anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def run() -> None:
                answers.append(await prompt(client, sid, "sleep 30"))

            tg.start_soon(run)
            await client.wait_for(lambda: bool(updates(client)))
            client.notify("session/cancel", {"sessionId": sid})
        assert answers == [{"stopReason": "cancelled"}]


async def test_failed_turn_is_a_json_rpc_error() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        with pytest.raises(Exception) as failed:
            await prompt(client, sid, "crash")
        assert getattr(failed.value, "code", None) is not None
        assert await prompt(client, sid, "echo again") == {"stopReason": "end_turn"}


async def test_agent_initiated_work_flows_after_the_turn_without_an_answer() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        assert await prompt(client, sid, "later soon") == {"stopReason": "end_turn"}
        await client.wait_for(lambda: "follow-up: soon" in [u["content"]["text"] for u in updates(client)])
        responses = [m for m in client.sent_by_agent() if "method" not in m]
        assert len(responses) == 3  # initialize, session/new, the prompt: nothing for the follow-up


async def test_messages_thoughts_plans_and_session_updates() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "thinkplan")
        await prompt(client, sid, "extras")
        got = updates(client, commands=True)
        thoughts = [u["content"]["text"] for u in got if u["sessionUpdate"] == "agent_thought_chunk"]
        assert thoughts == ["hmm", "a", "b"]
        [plan] = [u for u in got if u["sessionUpdate"] == "plan"]
        assert plan["entries"] == [{"content": "look", "priority": "high", "status": "completed"},
                                   {"content": "fix", "priority": "medium", "status": "in_progress"}]
        kinds = [u["sessionUpdate"] for u in got]
        assert "notice" not in kinds  # the client did not advertise session.notices
        assert {"usage_update", "session_info_update", "available_commands_update",
                "config_option_update"} <= set(kinds)
        [options] = [u for u in got if u["sessionUpdate"] == "config_option_update"]
        assert [o["id"] for o in options["configOptions"]] == ["model", "verbose"]
        assert tool_view(client, "call_x") | {"sessionUpdate": None} == {
            "sessionUpdate": None, "toolCallId": "call_x", "title": "Read file", "kind": "read",
            "status": "completed", "rawOutput": {"ok": True},
            "content": [{"type": "content", "content": {"type": "text", "text": "contents"}}]}


async def test_notices_reach_a_client_that_advertises_them() -> None:
    async with v1(ScriptedAgent(), {"session": {"notices": {}}}) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "extras")
        [notice] = [u for u in updates(client) if u["sessionUpdate"] == "notice"]
        assert notice["title"] == "heads up"


# -- tool calls, terminals, permissions ---------------------------------------------------------


async def test_terminal_output_and_exit_show_in_the_tool_call() -> None:
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/run printf 'one\\ntwo\\n'; exit 3")
        [first] = [u for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        assert first["kind"] == "execute" and first["status"] == "in_progress"
        tool = tool_view(client, first["toolCallId"])
        assert tool["status"] == "failed"
        assert tool["content"] == [{"type": "content",
                                    "content": {"type": "text", "text": "```\none\ntwo\n[exit code 3]\n```"}}]


async def test_handed_off_process_keeps_its_tool_call_in_progress_until_it_exits() -> None:
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        assert await prompt(client, sid, "/bg sleep 0.3; echo later; exit 4") == {"stopReason": "end_turn"}
        [first] = [u for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        assert tool_view(client, first["toolCallId"])["status"] == "in_progress"
        await client.wait_for(lambda: tool_view(client, first["toolCallId"])["status"] != "in_progress")
        tool = tool_view(client, first["toolCallId"])
        assert tool["status"] == "failed"  # completed at hand-off, but the process exited 4
        assert "later\n[exit code 4]" in tool["content"][0]["content"]["text"]


async def test_permission_request_in_v1_shape() -> None:
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        assert await prompt(client, sid, "/ask deploy") == {"stopReason": "end_turn"}
        [request] = [m for m in client.sent_by_agent() if m.get("method") == "session/request_permission"]
        tool_id = request["params"]["toolCall"]["toolCallId"]
        # The question stays out of the tool call's title (acpx printed "Allow Allow: deploy?").
        assert request["params"]["toolCall"] == {"toolCallId": tool_id}
        assert [o["optionId"] for o in request["params"]["options"]] == ["allow-once", "reject-once"]
        assert all(u.get("title") != "Allow: deploy?" for u in updates(client))
        tool = tool_view(client, tool_id)
        assert tool["title"] == "Ask: deploy" and tool["status"] == "completed"


async def test_permission_without_a_tool_call_gets_its_own() -> None:
    agent = ScriptedAgent()
    async with v1(agent) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "ask")
        [request] = [m for m in client.sent_by_agent() if m.get("method") == "session/request_permission"]
        tool_id = request["params"]["toolCall"]["toolCallId"]
        announced = [u for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        assert [u["toolCallId"] for u in announced] == [tool_id]
        assert tool_view(client, tool_id)["status"] == "completed"
        assert agent.outcomes[0].allowed


async def test_a_subagent_is_a_tool_call_of_its_parent() -> None:
    async with v1(BackgroundAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/subagent 0.2 child words")
        [announced] = [u for u in updates(client) if u["sessionUpdate"] == "tool_call"]
        child = announced["toolCallId"]
        assert announced["title"] == "Subagent: child words" and announced["status"] == "pending"
        await client.wait_for(lambda: tool_view(client, child).get("status") == "completed")
        assert tool_view(client, child)["content"] == [
            {"type": "content", "content": {"type": "text", "text": "child words"}}]
        # Only the parent session is ever named: the child session stays inside the bridge.
        assert {m["params"]["sessionId"] for m in client.sent_by_agent() if m.get("method") == "session/update"} \
            == {sid}


# -- methods with no v2 twin ------------------------------------------------------------------


async def test_load_replays_the_conversation() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "first words")
        before = len(updates(client))
        assert await client.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}) == {
            "configOptions": [
                {"id": "model", "name": "Model", "type": "select", "currentValue": "fast",
                 "options": [{"value": "fast", "name": "Fast"}, {"value": "smart", "name": "Smart"}]},
                {"id": "verbose", "name": "Verbose", "type": "boolean", "currentValue": False}]}
        replay = updates(client)[before:]
        assert [(u["sessionUpdate"], u["content"]["text"]) for u in replay] == [
            ("user_message_chunk", "first words"), ("agent_message_chunk", "first words")]
        with pytest.raises(Exception) as unknown:
            await client.request("session/load", {"sessionId": "nope", "cwd": "/tmp", "mcpServers": []})
        assert getattr(unknown.value, "code", None) == -32002


async def test_modes_come_from_a_mode_config_option() -> None:
    async with v1(ModeAgent()) as (client, _):
        answer = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert answer["modes"] == {"currentModeId": "ask", "availableModes": [
            {"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code", "description": "Edits files"}]}
        sid = answer["sessionId"]
        assert await client.request("session/set_mode", {"sessionId": sid, "modeId": "code"}) == {}
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "code"} in updates(client)
        with pytest.raises(Exception) as bad:
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "nope"})
        assert getattr(bad.value, "code", None) == -32602


async def test_set_mode_and_authenticate_refused_precisely() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        with pytest.raises(Exception) as no_modes:
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "code"})
        assert getattr(no_modes.value, "code", None) == -32602
        with pytest.raises(Exception) as no_auth:
            await client.request("authenticate", {"methodId": "oauth"})
        assert getattr(no_auth.value, "code", None) == -32602
        assert (await client.request("session/set_config_option",
                                     {"sessionId": sid, "configId": "model", "value": "smart"}))["configOptions"][0][
            "currentValue"] == "smart"


async def test_fork_opens_a_v1_session() -> None:
    async with v1(ForkingAgent()) as (client, answer):
        assert answer["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
        sid = await new_session(client)
        await prompt(client, sid, "before fork")
        forked = await client.request("session/fork", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        assert forked["sessionId"] != sid and forked["configOptions"][0]["id"] == "model"
        assert await prompt(client, forked["sessionId"], "in the fork") == {"stopReason": "end_turn"}
        assert updates(client, forked["sessionId"])[-1]["content"]["text"] == "in the fork"


# -- JetBrains AIR async tasks --------------------------------------------------------------


async def test_air_async_tasks_project_the_background_list() -> None:
    async with v1(BackgroundAgent(), AIR) as (client, answer):
        assert answer["_meta"] == {"jetbrains": {"air": {"version": 1, "capabilities": ["asyncTasks"]}}}
        sid = await new_session(client)
        await prompt(client, sid, "/watch 30")
        [spawned] = [u for u in updates(client) if u["sessionUpdate"] == "async_task_spawned"]
        assert spawned["name"] == "Watch" and spawned["taskType"] == "task" and spawned["canStop"] is True
        assert spawned["toolCallId"] == spawned["asyncTaskId"] and spawned["showInTranscript"] is False
        stop = {"sessionId": sid, "asyncTaskId": spawned["asyncTaskId"]}
        assert await client.request("_session/async_task/stop", stop) == {"stopped": True}
        await client.wait_for(lambda: any(u["sessionUpdate"] == "async_task_state_update" for u in updates(client)))
        [ended] = [u for u in updates(client) if u["sessionUpdate"] == "async_task_state_update"]
        assert ended == {"sessionUpdate": "async_task_state_update", "asyncTaskId": spawned["asyncTaskId"],
                         "state": "stopped"}
        assert await client.request("_session/async_task/stop", stop) == {"stopped": False}


async def test_air_terminal_task_ends_with_its_process() -> None:
    async with v1(BackgroundAgent(), AIR) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/bg sleep 0.2")
        await client.wait_for(lambda: any(u["sessionUpdate"] == "async_task_state_update" for u in updates(client)))
        [spawned] = [u for u in updates(client) if u["sessionUpdate"] == "async_task_spawned"]
        [ended] = [u for u in updates(client) if u["sessionUpdate"] == "async_task_state_update"]
        assert spawned["taskType"] == "shell" and spawned["name"] == "sleep 0.2"
        assert ended["asyncTaskId"] == spawned["asyncTaskId"] and ended["state"] == "completed"


async def test_no_async_tasks_without_the_air_capability() -> None:
    async with v1(BackgroundAgent()) as (client, answer):
        assert "_meta" not in answer
        sid = await new_session(client)
        await prompt(client, sid, "/watch 30")
        assert not [u for u in updates(client) if u["sessionUpdate"] in AIR_UPDATES]
        with pytest.raises(Exception) as unknown:
            await client.request("_session/async_task/stop", {"sessionId": sid, "asyncTaskId": "x"})
        assert getattr(unknown.value, "code", None) == -32601
        client.notify("session/close", {"sessionId": sid})


# -- the translator and streams alone ----------------------------------------------------------


def test_translator_maps_markdown_plans_and_removal() -> None:
    translator = V1Translator()
    translator._session("s")
    out = translator.outgoing({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "plan_update",
                                     "plan": {"type": "markdown", "planId": "p", "content": "1. do it"}}}})
    assert out[0]["params"]["update"] == {"sessionUpdate": "plan", "entries": [
        {"content": "1. do it", "priority": "medium", "status": "pending"}]}
    out = translator.outgoing({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "plan_removed", "planId": "p"}}})
    assert out[0]["params"]["update"] == {"sessionUpdate": "plan", "entries": []}


def test_translator_splits_a_terminal_utf8_character_across_chunks() -> None:
    translator = V1Translator()
    translator.state.clock = iter(range(0, 1000, 10)).__next__  # never paced
    translator._session("s")
    snowman = "☃".encode()

    def chunk(data: bytes) -> list[dict[str, Any]]:
        import base64
        return translator.outgoing({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": "terminal_output_chunk", "terminalId": "t",
                                         "data": base64.b64encode(data).decode()}}})

    chunk(snowman[:1])
    [last] = chunk(snowman[1:])
    assert last["params"]["update"]["content"][0]["content"]["text"] == "```\n☃\n```"


async def test_streams_pass_v2_bytes_through_unchanged() -> None:
    from acp_agent.testing.streams import byte_pipe

    to_send, to_receive = byte_pipe()
    out_send, out_receive = byte_pipe()
    receive, send = negotiating_streams(to_receive, out_send)
    line = (b'{"jsonrpc":"2.0","id":0,"method":"initialize",'
            b'"params":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}\n')
    await to_send.send(line)
    assert await receive.receive() == line
    await send.send(b'{"jsonrpc":"2.0","id":0,"result":{}}\n')
    assert await out_receive.receive() == b'{"jsonrpc":"2.0","id":0,"result":{}}\n'
    await to_send.send(b"anything")
    assert await receive.receive() == b"anything"


async def test_session_close_answers_a_waiting_prompt() -> None:
    async with v1(ScriptedAgent()) as (client, _):
        sid = await new_session(client)
        answers: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                answers.append(await prompt(client, sid, "sleep 30"))

            tg.start_soon(run)
            await client.wait_for(lambda: bool(updates(client)))
            assert await client.request("session/close", {"sessionId": sid}) == {}
        assert answers == [{"stopReason": "cancelled"}]





async def test_streams_translate_lines_split_across_reads() -> None:
    from acp_agent.testing.streams import byte_pipe

    to_send, to_receive = byte_pipe()
    out_send, out_receive = byte_pipe()
    receive, send = negotiating_streams(to_receive, out_send)
    first = b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1,'
    await to_send.send(first)
    await to_send.send(b'"clientInfo":{"name":"zed","version":"1"}}}\n{"jsonrpc":"2.0","method":"x","params":{}}\n')
    got = b""
    while got.count(b"\n") < 2:
        got += await receive.receive()
    initialize, other = (json.loads(line) for line in got.splitlines())
    assert initialize == {"jsonrpc": "2.0", "id": 7, "method": "initialize",
                          "params": {"protocolVersion": 2, "info": {"name": "zed", "version": "1"}}}
    assert other == {"jsonrpc": "2.0", "method": "x", "params": {}}
    # The runtime's answer, written in two pieces, reaches the client once, in v1 form.
    await send.send(b'{"jsonrpc":"2.0","id":7,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"},')
    await send.send(b'"capabilities":{}}}\n')
    answer = json.loads(await out_receive.receive())
    assert answer["result"]["protocolVersion"] == 1 and answer["result"]["agentInfo"] == {"name": "a", "version": "1"}


async def test_air_paused_work_reports_paused_then_running() -> None:
    async with v1(BackgroundAgent(), AIR) as (client, _):
        sid = await new_session(client)
        await prompt(client, sid, "/workflow 30")
        await prompt(client, sid, "/pause")
        await prompt(client, sid, "/resume")
        states = [u["state"] for u in updates(client) if u["sessionUpdate"] == "async_task_state_update"]
        assert states == ["paused", "running"]
        [spawned] = [u for u in updates(client) if u["sessionUpdate"] == "async_task_spawned"]
        tool = tool_view(client, spawned["asyncTaskId"])
        assert tool["status"] == "in_progress"  # v1 has no paused status
        stop = {"sessionId": sid, "asyncTaskId": spawned["asyncTaskId"]}
        assert await client.request("_session/async_task/stop", stop) == {"stopped": True}
        await client.wait_for(lambda: tool_view(client, spawned["asyncTaskId"])["status"] == "failed")
