"""Initialize, session lifecycle and the prompt lifecycle, through the in-memory client."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_agent import Agent, ContentBlock, RequestError, Session, StopReason, TextContent
from acp_agent.testing.client import Client, connect_agent
from tests.helpers.agents import ForkingAgent, ScriptedAgent

pytestmark = pytest.mark.anyio


def updates_after(client: Client, session_id: str, start: int = 0) -> list[dict[str, Any]]:
    return client.view(session_id).updates[start:]


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    out = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind == "state_update":
            kind = f"state:{u['state']}" + (f":{u['stopReason']}" if "stopReason" in u else "")
        out.append(kind)
    return out


def agent_messages(client: Client) -> list[Any]:
    return client.sent_by_agent()


async def started(agent: Agent | None = None) -> Any:
    return connect_agent(agent or ScriptedAgent())


# -- initialize ----------------------------------------------------------------------------


async def test_initialize_v2() -> None:  # R23, R25, R27, R28
    async with connect_agent(ScriptedAgent()) as client:
        result = await client.initialize(2)
        assert result["protocolVersion"] == 2
        assert result["info"] == {"name": "scripted", "version": "9.9.9"}
        session_caps = result["capabilities"]["session"]
        assert "fork" not in session_caps  # not implemented -> not advertised
        assert "prompt" not in session_caps  # only text and resource links


async def test_fork_advertised_only_when_implemented() -> None:  # R28
    async with connect_agent(ForkingAgent()) as client:
        result = await client.initialize(2)
        assert result["capabilities"]["session"]["fork"] == {}


async def test_initialize_rejects_old_versions_and_accepts_newer() -> None:  # R23, R24
    async with connect_agent(ScriptedAgent()) as client:
        with pytest.raises(RequestError) as info:
            await client.initialize(0)  # 1 is served by the v1 bridge (tests/unit/test_v1.py)
        assert info.value.code == -32022
        assert info.value.data == {"requested": 0, "supported": [1, 2]}
        # a failed first initialize leaves the connection uninitialized
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        assert info.value.code == -32600
        result = await client.initialize(7)
        assert result["protocolVersion"] == 2


async def test_newer_client_params_parsed_leniently() -> None:  # R24
    async with connect_agent(ScriptedAgent()) as client:
        result = await client.request(
            "initialize", {"protocolVersion": 3, "info": "not an object", "capabilities": {"fs": 5}, "extra": 1}
        )
        assert result["protocolVersion"] == 2
        with pytest.raises(RequestError) as info:
            await client.request("initialize", {"protocolVersion": 2, "info": "not an object"})
        assert info.value.code == -32602


async def test_nothing_before_initialize() -> None:  # R21, R22
    async with connect_agent(ScriptedAgent()) as client:
        client.notify("session/cancel", {"sessionId": "x"})
        with pytest.raises(RequestError) as info:
            await client.request("session/list", {})
        assert info.value.code == -32600
        assert client.sent_by_agent()[0]["error"]["code"] == -32600
        await client.initialize()
        # the initialize answer is the first non-error message the agent sent
        assert next(m for m in client.sent_by_agent() if "result" in m)["result"]["protocolVersion"] == 2


async def test_repeat_initialize_rules() -> None:  # R26
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize(3)
        await client.initialize(2)  # a repeat before any other request is fine
        await client.request("session/list", {})
        with pytest.raises(RequestError) as info:
            await client.initialize(2)
        assert info.value.code == -32600


async def test_params_validation_error_is_32602() -> None:  # R13
    async with connect_agent(ScriptedAgent()) as client:
        with pytest.raises(RequestError) as info:
            await client.request("initialize", {"protocolVersion": "two"})
        assert info.value.code == -32602


# -- session/new ---------------------------------------------------------------------------


async def test_new_session_ids_and_paths() -> None:  # R31, R34, R33
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        a, b = await client.new_session("/tmp"), await client.new_session("/tmp")
        assert a != b
        with pytest.raises(RequestError) as info:
            await client.new_session("relative/dir")
        assert info.value.code == -32602
        stdio = {"type": "stdio", "name": "t", "command": "/bin/true", "args": [], "env": []}
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp", mcpServers=[stdio])
        assert info.value.code == -32602
        result = await client.request("session/new", {"cwd": "/tmp"})
        assert [o["configId"] for o in result["configOptions"]] == ["model", "verbose"]
        assert "availableCommands" not in result  # R32: omitted, never null


async def test_mcp_transport_when_advertised() -> None:  # R33
    class McpAgent(ScriptedAgent):
        mcp_stdio = True

    async with connect_agent(McpAgent()) as client:
        caps = (await client.initialize())["capabilities"]["session"]
        assert caps["mcp"] == {"stdio": {}}
        stdio = {"type": "stdio", "name": "t", "command": "/bin/true", "args": [], "env": []}
        await client.new_session("/tmp", mcpServers=[stdio])
        http = {"type": "http", "name": "h", "url": "https://x.invalid", "headers": []}
        for bad in ([http], [{"type": "sse", "name": "s", "url": "u"}], [stdio, stdio]):
            with pytest.raises(RequestError) as info:
                await client.new_session("/tmp", mcpServers=bad)
            assert info.value.code == -32602


# -- the prompt lifecycle ------------------------------------------------------------------


async def test_prompt_lifecycle_order() -> None:  # R52, R53, R57, R58
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        mark = len(client.transcript)
        message_id = await client.prompt(sid, "echo hello")
        view = await client.wait_idle(sid)
        assert kinds(view.updates) == ["user_message", "state:running", "agent_message", "state:idle:end_turn"]
        assert view.updates[0]["messageId"] == message_id
        assert view.updates[0]["content"] == [{"type": "text", "text": "echo hello"}]
        # the response carries the inserted id; the echo is never before insertion
        wire = [e.message for e in client.transcript[mark:] if e.direction == "agent->client"]
        response_at = next(i for i, m in enumerate(wire) if m.get("result", {}).get("messageId") == message_id)
        idle_at = next(i for i, m in enumerate(wire) if m.get("params", {}).get("update", {}).get("state") == "idle")
        assert response_at < idle_at  # answered without waiting for the work to finish


async def test_prompt_answer_does_not_wait_for_work() -> None:  # R52
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        with anyio.fail_after(2):
            await client.prompt(sid, "sleep 30")
        await client.wait_for(lambda: client.view(sid).state == "running")
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"


async def test_rejected_prompts_are_not_echoed() -> None:  # R54, R55
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
        for bad in ([image], [], [{"type": "_custom_block", "x": 1}]):
            with pytest.raises(RequestError) as info:
                await client.prompt(sid, bad)
            assert info.value.code == -32602
        link = [{"type": "resource_link", "name": "a", "uri": "file:///a"}]
        await client.prompt(sid, link)
        view = await client.wait_idle(sid)
        assert [u["sessionUpdate"] for u in view.updates].count("user_message") == 1


async def test_unknown_session() -> None:  # R15
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        with pytest.raises(RequestError) as info:
            await client.prompt("sess_nope", "hi")
        assert info.value.code == -32002 and info.value.data == {"sessionId": "sess_nope"}
        client.cancel("sess_nope")  # a notification for an unknown session is ignored
        await client.close_session("sess_nope")  # R46: closing an unknown session succeeds


async def test_crash_after_insertion_ends_with_error() -> None:  # R54, R58
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        message_id = await client.prompt(sid, "crash")
        view = await client.wait_idle(sid)
        idle = view.updates[-1]
        assert idle["stopReason"] == "error"
        # The exception's text (which may hold paths, tokens, user data) stays in the agent's log.
        assert idle["error"] == {"code": -32603, "message": "Internal error"}
        assert message_id
        # the session keeps working
        view = await client.prompt_and_wait(sid, "echo still here")
        assert view.stop_reason == "end_turn"


async def test_held_prompts_run_in_order() -> None:  # R56
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 0.2")
        ids: list[str] = []
        async with anyio.create_task_group() as tg:
            async def send(text: str) -> None:
                ids.append(await client.prompt(sid, text))
            tg.start_soon(send, "echo one")
            await anyio.sleep(0.02)
            tg.start_soon(send, "echo two")
        view = await client.wait_idle(sid, 3)
        users = [u for u in view.updates if u["sessionUpdate"] == "user_message"]
        assert [u["content"][0]["text"] for u in users] == ["sleep 0.2", "echo one", "echo two"]
        assert ids == [users[1]["messageId"], users[2]["messageId"]]
        assert list(view.messages().values())[1:] == ["echo one", "echo two"]


async def test_cancel_request_withdraws_held_prompt() -> None:  # R56, R16
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 0.3")
        errors: list[int] = []

        async def held() -> None:
            try:
                await client.prompt(sid, "echo withdrawn")
            except RequestError as exc:
                errors.append(exc.code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await anyio.sleep(0.05)
            held_id = client.connection._next_id - 1
            client.notify("$/cancel_request", {"requestId": held_id})
        assert errors == [-32800]
        view = await client.wait_idle(sid)
        await anyio.sleep(0.1)
        texts = [u["content"][0]["text"] for u in view.updates if u["sessionUpdate"] == "user_message"]
        assert texts == ["sleep 0.3"]


async def test_session_cancel() -> None:  # R56, R65, R68
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 30")
        errors: list[int] = []

        async def held() -> None:
            try:
                await client.prompt(sid, "echo held")
            except RequestError as exc:
                errors.append(exc.code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await anyio.sleep(0.05)
            client.cancel(sid)
        assert errors == [-32800]
        view = await client.wait_idle(sid)
        assert view.updates[-1] == {
            "sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled", "background": []
        }
        # a prompt sent after the cancel is not affected by it
        view = await client.prompt_and_wait(sid, "echo after")
        assert view.stop_reason == "end_turn"
        assert "after" in list(view.messages().values())[-1]


async def test_cancellation_turned_into_exception_is_still_cancelled() -> None:  # R69
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "wrapcancel")
        await anyio.sleep(0.05)
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.updates[-1]["stopReason"] == "cancelled"
        assert "error" not in view.updates[-1]


async def test_cancel_when_idle_sends_nothing() -> None:
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo x")
        before = len(client.view(sid).updates)
        client.cancel(sid)
        await anyio.sleep(0.1)
        assert len(client.view(sid).updates) == before


# -- permission ----------------------------------------------------------------------------


async def test_permission_requires_action_then_running() -> None:  # R59, R60, R81
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "ask")
        assert kinds(view.updates) == [
            "user_message", "state:running", "state:requires_action", "state:running",
            "agent_message", "state:idle:end_turn",
        ]
        assert agent.outcomes[0].allowed and agent.outcomes[0].option_id == "allow"
        asked = [m for m in client.sent_by_agent() if m.get("method") == "session/request_permission"]
        assert asked[0]["params"]["title"] == "Run it?" and len(asked[0]["params"]["options"]) == 2


@pytest.mark.parametrize(
    "answer",
    [
        {"outcome": {"outcome": "cancelled"}},
        {"outcome": {"outcome": "selected", "optionId": "not-offered"}},
        {"outcome": {"outcome": "selected", "optionId": "deny"}},
        {"outcome": {"outcome": "_custom_thing"}},
        {"weird": True},
    ],
)
async def test_permission_answers_that_do_not_allow(answer: dict[str, Any]) -> None:  # R20
    agent = ScriptedAgent()
    async with connect_agent(agent, permission_policy=lambda p: answer) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "ask")
        assert not agent.outcomes[0].allowed


async def test_cancel_withdraws_foreground_permission_request() -> None:  # R66, R67, R60
    agent = ScriptedAgent()
    async with connect_agent(agent, permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "ask")
        await client.wait_for(lambda: bool(client.pending_permissions))
        request = next(m for m in client.sent_by_agent() if m.get("method") == "session/request_permission")
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.updates[-1]["stopReason"] == "cancelled"
        cancels = [m for m in client.sent_by_agent() if m.get("method") == "$/cancel_request"]
        assert cancels == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request["id"]}}]
        # the request was withdrawn before the idle
        wire = client.sent_by_agent()
        assert wire.index(cancels[0]) < len(wire) - 1
        # a late answer (if the client still answers) is dropped and does not revive the work (R64)
        if 0 in client.pending_permissions:
            client.answer_permission(0, "allow")
        await anyio.sleep(0.1)
        assert client.view(sid).updates[-1]["stopReason"] == "cancelled"
        assert agent.outcomes == []


# -- close ---------------------------------------------------------------------------------


async def test_close_running_session() -> None:  # R41, R42, R43, R45
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 30")
        errors: list[int] = []

        async def held() -> None:
            try:
                await client.prompt(sid, "echo held")
            except RequestError as exc:
                errors.append(exc.code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await anyio.sleep(0.05)
            await client.close_session(sid)
        assert errors == [-32800]
        wire = client.sent_by_agent()
        close_at = max(i for i, m in enumerate(wire) if m.get("result") == {})
        idle_at = max(
            i for i, m in enumerate(wire)
            if m.get("params", {}).get("update", {}).get("stopReason") == "cancelled"
        )
        assert idle_at < close_at
        after = [m for m in wire[close_at + 1 :] if m.get("params", {}).get("sessionId") == sid]
        assert after == []
        with pytest.raises(RequestError) as info:
            await client.prompt(sid, "echo?")
        assert info.value.code == -32002


async def test_close_with_pending_permission() -> None:  # R44
    async with connect_agent(ScriptedAgent(), permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "ask")
        await client.wait_for(lambda: bool(client.pending_permissions))
        await client.close_session(sid)
        wire = client.sent_by_agent()
        cancel_at = next(i for i, m in enumerate(wire) if m.get("method") == "$/cancel_request")
        close_at = max(i for i, m in enumerate(wire) if m.get("result") == {})
        assert cancel_at < close_at


# -- list / resume / fork / delete / config ------------------------------------------------


async def test_list_sessions() -> None:  # R47, R48
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        assert (await client.request("session/list", {}))["sessions"] == []
        ids = [await client.new_session("/tmp") for _ in range(3)] + [await client.new_session("/var")]
        listed = await client.request("session/list", {"cwd": "/tmp"})
        assert sorted(s["sessionId"] for s in listed["sessions"]) == sorted(ids[:3])
        assert "nextCursor" not in listed
        for s in listed["sessions"]:
            assert s["cwd"] == "/tmp" and s["updatedAt"].endswith("Z")
        with pytest.raises(RequestError) as info:
            await client.request("session/list", {"cursor": "garbage!"})
        assert info.value.code == -32602


async def test_list_pages() -> None:  # R47
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        ids = [await client.new_session("/tmp") for _ in range(120)]
        seen: list[str] = []
        params: dict[str, Any] = {}
        while True:
            page = await client.request("session/list", params)
            seen += [s["sessionId"] for s in page["sessions"]]
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        assert len(seen) == len(ids) and sorted(seen) == sorted(ids)


async def test_list_is_most_recent_first_and_its_cursors_survive_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: ``updatedAt`` descending (ties by id), and paging on while sessions change neither repeats
    nor skips a session that did not change."""
    import time
    import types

    import acp_agent.records as records

    clock = [2_000_000_000]
    monkeypatch.setattr(records, "time", types.SimpleNamespace(time=lambda: clock[0], strftime=time.strftime,
                                                                 gmtime=time.gmtime))
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        made = []
        for i in range(120):
            clock[0] += i % 2  # pairs share a second: ties
            made.append(await client.new_session("/tmp"))
        first = await client.request("session/list", {})
        listed = first["sessions"]
        keys = [(s["updatedAt"], s["sessionId"]) for s in listed]
        assert keys == sorted(keys, reverse=True) and listed[0]["sessionId"] in made[-2:]
        clock[0] += 10
        moved = [made[0], listed[3]["sessionId"]]  # one not listed yet, one already listed
        for sid in moved:
            await client.prompt_and_wait(sid, "echo later")
        seen = [s["sessionId"] for s in listed]
        cursor = first["nextCursor"]
        while cursor:
            page = await client.request("session/list", {"cursor": cursor})
            seen += [s["sessionId"] for s in page["sessions"]]
            cursor = page.get("nextCursor")
        assert len(seen) == len(set(seen))  # nothing twice
        assert set(made) - set(seen) == {made[0]}  # only the session that moved ahead of the cursor is not seen
        again = await client.list_sessions()
        assert [s["sessionId"] for s in again[:2]] == sorted(moved, reverse=True)  # the active ones lead


async def test_resume_active_session_with_replay() -> None:  # R35, R36, R39, R40
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo first")
        await client.prompt_and_wait(sid, "thinkplan")
        original = list(client.view(sid).updates)
        mark = len(original)
        result = await client.request(
            "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}
        )
        assert result["configOptions"]
        replayed = client.view(sid).updates[mark:]
        assert kinds(replayed) == [
            "user_message", "agent_message", "user_message", "agent_thought", "agent_thought", "replay_complete",
            "state:idle",
        ]  # Preview P10: the marker ends the history; the snapshot after it is live state
        live_ids = [u["messageId"] for u in original if u["sessionUpdate"] == "user_message"]
        assert [u["messageId"] for u in replayed if u["sessionUpdate"] == "user_message"] == live_ids
        assert replayed[-3]["content"] == [{"type": "text", "text": "ab"}]  # chunks folded
        assert "stopReason" not in replayed[-1]  # R62: a resume snapshot is not a completion
        # the snapshot comes before the answer
        wire = client.sent_by_agent()
        answer_at = next(i for i, m in enumerate(wire) if m.get("result") == result)
        assert wire[answer_at - 1]["params"]["update"]["sessionUpdate"] == "state_update"


async def test_resume_without_replay_and_bad_cursor() -> None:  # R35, R39
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo first")
        mark = len(client.view(sid).updates)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        assert kinds(client.view(sid).updates[mark:]) == ["state:idle"]
        with pytest.raises(RequestError) as info:
            await client.request(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "_since", "at": 3}}
            )
        assert info.value.code == -32602
        mark = len(client.transcript)
        with pytest.raises(RequestError) as info:
            await client.request("session/resume", {"sessionId": "sess_unknown", "cwd": "/tmp"})
        assert info.value.code == -32002
        assert not any(e.message.get("method") == "session/update" for e in client.transcript[mark:])


async def test_resume_closed_session() -> None:  # R39
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo kept")
        await client.close_session(sid)
        mark = len(client.view(sid).updates)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        assert kinds(client.view(sid).updates[mark:]) == ["user_message", "agent_message", "replay_complete",
                                                          "state:idle"]
        view = await client.prompt_and_wait(sid, "echo again")
        assert view.stop_reason == "end_turn"


async def test_fork() -> None:  # R31
    async with connect_agent(ForkingAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo original")
        fork = (await client.request("session/fork", {"sessionId": sid, "cwd": "/tmp"}))["sessionId"]
        assert fork != sid
        await client.request("session/resume", {"sessionId": fork, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        assert list(client.view(fork).messages().values()) == ["echo original"]
        view = await client.prompt_and_wait(fork, "echo in fork")
        assert view.stop_reason == "end_turn"
        assert len(client.view(sid).messages()) == 1  # the source is untouched


async def test_fork_not_offered_without_hook() -> None:
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.request("session/fork", {"sessionId": sid, "cwd": "/tmp"})
        assert info.value.code == -32601


async def test_delete() -> None:  # R49, R46
    async with connect_agent(ScriptedAgent()) as client:
        caps = (await client.initialize())["capabilities"]["session"]
        assert caps["delete"] == {}
        sid = await client.new_session("/tmp")
        assert await client.request("session/delete", {"sessionId": sid}) == {}
        assert (await client.request("session/list", {}))["sessions"] == []
        assert await client.request("session/delete", {"sessionId": sid}) == {}


async def test_set_config_option() -> None:  # R50
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        result = await client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "type": "id", "value": "smart"}
        )
        assert [o["currentValue"] for o in result["configOptions"]] == ["smart", False]
        for bad in (
            {"configId": "nope", "type": "id", "value": "smart"},
            {"configId": "model", "type": "id", "value": "huge"},
            {"configId": "model", "type": "boolean", "value": True},
            {"configId": "verbose", "type": "id", "value": "fast"},
        ):
            with pytest.raises(RequestError) as info:
                await client.request("session/set_config_option", {"sessionId": sid, **bad})
            assert info.value.code == -32602
        result = await client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "verbose", "type": "boolean", "value": True}
        )
        assert [o["currentValue"] for o in result["configOptions"]] == ["smart", True]
        assert agent.config_calls == [("model", "smart"), ("verbose", True)]


# -- agent-initiated work and guard rails ----------------------------------------------------


async def test_agent_initiated_foreground_work() -> None:  # R57
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "later done")
        view = await client.wait_idle(sid, 2)
        assert kinds(view.updates) == [
            "user_message", "state:running", "agent_message", "state:idle:end_turn",
            "state:running", "agent_message", "state:idle:end_turn",
        ]
        assert list(view.messages().values())[-1] == "follow-up: done"


async def test_agent_code_cannot_send_state_update() -> None:
    from acp_agent.schema import RunningStateUpdate

    class Sneaky(ScriptedAgent):
        async def prompt(self, session: Session, prompt: Any) -> Any:
            await session.send(RunningStateUpdate())

    async with connect_agent(Sneaky()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "x")
        assert view.stop_reason == "error"
        assert kinds(view.updates).count("state:running") == 1


async def test_eof_cancels_running_work_and_answers() -> None:  # R18
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 30")
        await client.close()
        view = await client.wait_idle(sid, timeout=5)
        assert view.stop_reason == "cancelled"


# -- prompts inserted at dispatch (an idle session answers at once) ----------------------------------


async def _raw_session(agent: Agent) -> Any:
    """Serve ``agent`` over memory pipes; yield a raw peer with an initialized session id."""
    from acp_agent.stdio import serve
    from acp_agent.testing.checker import A2C, C2A, WireChecker
    from acp_agent.testing.streams import byte_pipe
    from tests.helpers.rawpeer import RawPeer

    class CheckedPeer(RawPeer):
        checker = WireChecker()

        async def send_bytes(self, data: bytes) -> None:
            for line in data.splitlines():
                self.checker.feed_line(C2A, line)
            await super().send_bytes(data)

        async def recv(self, timeout: float = 5.0) -> Any:
            message = await super().recv(timeout)
            self.checker.feed(A2C, message)
            return message

    in_send, in_receive = byte_pipe()
    out_send, out_receive = byte_pipe()
    peer = CheckedPeer(in_send, out_receive)
    return peer, lambda: serve(agent, in_receive, out_send)


def _line(message: Any) -> bytes:
    import orjson

    return orjson.dumps(message) + b"\n"


async def _until_idle(peer: Any) -> list[Any]:
    got: list[Any] = []
    while True:
        message = await peer.recv()
        got.append(message)
        if not isinstance(message, dict):
            continue  # a batch answer
        update = message.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            return got


@pytest.mark.parametrize("batched", [False, True])
async def test_prompt_and_cancel_in_one_read_echo_then_end_cancelled(batched: bool) -> None:  # R52, R53, R68
    peer, serve_agent = await _raw_session(ScriptedAgent())
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_agent)
        await peer.send_bytes(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"protocolVersion": 2, "clientCapabilities": {},
                                                "info": {"name": "raw", "version": "0"}}}))
        initialized = await peer.recv()
        assert "result" in initialized, initialized
        await peer.send_bytes(_line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                     "params": {"cwd": "/tmp", "mcpServers": []}}))
        got = [await peer.recv()]
        while "id" not in got[-1]:
            got.append(await peer.recv())
        assert "result" in got[-1], got
        sid = got[-1]["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "echo never said"}]}}
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        # Both arrive in one read: the idle session inserts the prompt at dispatch, then the
        # cancel comes before the worker has started it.
        data = _line([prompt, cancel]) if batched else _line(prompt) + _line(cancel)
        await peer.send_bytes(data)
        got = await _until_idle(peer)
        answer = got[0][0] if batched else got[0]
        assert answer["id"] == 3 and "messageId" in answer["result"]
        kinds = [m["params"]["update"]["sessionUpdate"] for m in got[1:]]
        assert kinds[0] == "user_message"
        assert got[1]["params"]["update"]["messageId"] == answer["result"]["messageId"]
        assert "agent_message_chunk" not in kinds and "agent_message" not in kinds  # the handler never ran
        assert got[-1]["params"]["update"]["stopReason"] == "cancelled"
        # The session keeps serving.
        await peer.send_bytes(_line({**prompt, "id": 4, "params": {**prompt["params"],
                                     "prompt": [{"type": "text", "text": "echo again"}]}}))
        got = await _until_idle(peer)
        assert got[-1]["params"]["update"]["stopReason"] == "end_turn"
        await peer.eof()
    peer.checker.finish()
    assert peer.checker.violations == []


async def test_two_closes_in_flight_both_answer_after_the_session_ended() -> None:  # R42, R45
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 5")
        await client.wait_for(lambda: client.view(sid).state == "running")
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.close_session, sid)
            tg.start_soon(client.close_session, sid)
        close_ids = {e.message["id"] for e in client.transcript
                     if e.direction == "client->agent" and e.message.get("method") == "session/close"}
        first_answer = next(i for i, e in enumerate(client.transcript)
                            if e.direction == "agent->client" and e.message.get("id") in close_ids)
        idle = next(i for i, e in enumerate(client.transcript)
                    if e.message.get("params", {}).get("update", {}).get("state") == "idle")
        assert idle < first_answer  # the cancelled turn's idle precedes both answers


class _Talker(Agent):
    """Says and thinks plain text (framed without models) and what needs a model."""

    name = "talker"
    version = "1"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say("plain")
        await session.think("thinking", message_id="t1")
        await session.say("with meta", meta={"k": 1})
        await session.say([TextContent(text="a"), TextContent(text="b", annotations={"priority": 1})])
        return "end_turn"


async def test_plain_text_messages_and_the_rest_reach_the_wire_alike() -> None:  # R52, R53
    async with connect_agent(_Talker()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, [{"type": "text", "text": "hi"}, {"type": "text", "text": "2"}])
        echo, running, plain, thought, meta, blocks, idle = view.updates
        assert echo["sessionUpdate"] == "user_message" and echo["messageId"].startswith("msg_user")
        assert echo["content"] == [{"type": "text", "text": "hi"}, {"type": "text", "text": "2"}]
        assert (running["state"], idle["state"]) == ("running", "idle")
        assert plain["sessionUpdate"] == "agent_message" and plain["messageId"].startswith("msg_")
        assert plain["content"] == [{"type": "text", "text": "plain"}]
        assert thought == {"sessionUpdate": "agent_thought", "messageId": "t1",
                           "content": [{"type": "text", "text": "thinking"}]}
        assert meta["_meta"] == {"k": 1} and meta["content"] == [{"type": "text", "text": "with meta"}]
        assert blocks["content"] == [{"type": "text", "text": "a"},
                                     {"type": "text", "text": "b", "annotations": {"priority": 1}}]
        annotated = [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}]
        view = await client.prompt_and_wait(sid, annotated)  # not plain: the echo is the model's
        assert view.updates[7]["content"] == annotated


# -- handles belong to their session ------------------------------------------------------------


class HandleSwapAgent(Agent):
    """Starts a tool call in the first session, then hands it to the second session's calls."""

    name = "handle-swap"

    def __init__(self) -> None:
        self.first: Any = None
        self.refusals: list[str] = []

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        if self.first is None:
            self.first = await session.start_tool_call("mine", detach=True)
            return "end_turn"
        for attempt in (
            lambda: session.start_terminal("true", tool_call=self.first),
            lambda: session.ask("name?", {"type": "object", "properties": {}}, tool_call=self.first),
        ):
            with pytest.raises(ValueError, match="belongs to another session") as info:
                await attempt()
            self.refusals.append(str(info.value))
        return "end_turn"


async def test_a_tool_call_of_another_session_is_refused() -> None:
    agent = HandleSwapAgent()
    async with connect_agent(agent) as client:
        await client.initialize(2, capabilities={"elicitation": {"form": {}}})
        a, b = await client.new_session("/tmp"), await client.new_session("/tmp")
        await client.prompt_and_wait(a, "start")
        await client.prompt_and_wait(b, "swap")
    assert agent.refusals == ["that tool call belongs to another session"] * 2
