"""End-to-end: the ``/subagent``, ``/ask`` and ``/bgask`` rows of examples/background_agent.py over real pipes.

Every test drives the example agent as a subprocess (on the anyio backend under test, chosen
through ``ACP_AGENT_BACKEND``) and checks exact wire facts. Afterwards every message the agent
wrote is validated against the official unstable v2 schema, the client's WireChecker judges
the whole exchange (``spawn_agent`` raises on a violation), and the agent must exit with 0.

- ``/subagent SECS TEXT``: a ``subagent_update`` announcing a child, idle ``end_turn``; the child streams
  TEXT over SECS, then idles; the parent lists it while it runs; ``session/cancel`` on its id stops it.
- ``/ask TEXT``: ``session/request_permission`` about a tool call of the turn, ``requires_action`` meanwhile;
  allowed, rejected, or withdrawn by ``session/cancel``.
- ``/bgask``: idle ``end_turn``; a listed tool call asks permission; ``session/cancel`` leaves the request open.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent.errors import RequestError
from acp_agent.testing.client import Client, spawn_agent
from acp_agent.testing.schema import SchemaValidator

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "background_agent.py"
OPTIONS = [{"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
           {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}]
Message = dict[str, Any]


@asynccontextmanager
async def agent_process(validator: SchemaValidator, backend: str, **options: Any) -> AsyncIterator[Client]:
    """The example agent as a subprocess; schema, wire rules (WireChecker) and exit code judged at the end."""
    async with spawn_agent([sys.executable, str(AGENT)], env={"ACP_AGENT_BACKEND": backend}, **options) as client:
        init = await client.initialize()
        assert init["info"]["name"] == "background-agent"
        yield client
    problems = validator.check_transcript(client.transcript)
    assert not problems, "\n".join(problems)
    assert client.returncode == 0


# -- reading the wire ----------------------------------------------------------------------------


def agent_wire(client: Client, start: int = 0) -> list[tuple[int, Message]]:
    return [(i, e.message) for i, e in enumerate(client.transcript)
            if i >= start and e.direction == "agent->client" and isinstance(e.message, dict)]


def updates(client: Client, sid: str, start: int = 0) -> list[tuple[int, Message]]:
    return [(i, m["params"]["update"]) for i, m in agent_wire(client, start)
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid]


def snapshots(client: Client, sid: str, start: int = 0) -> list[tuple[int, Message]]:
    return [(i, u) for i, u in updates(client, sid, start) if u["sessionUpdate"] == "state_update"]


def listed(snapshot: Message) -> list[tuple[str, str]]:
    keys = {"terminal": "terminalId", "tool_call": "toolCallId", "subagent": "sessionId"}
    assert isinstance(snapshot.get("background"), list), f"snapshot without a background list: {snapshot}"
    return [(item["type"], item[keys[item["type"]]]) for item in snapshot["background"]]


def now_listed(client: Client, sid: str) -> list[tuple[str, str]]:
    shots = snapshots(client, sid)
    return listed(shots[-1][1]) if shots else []


def requests(client: Client, start: int = 0) -> list[tuple[int, Message]]:
    return [(i, m) for i, m in agent_wire(client, start) if m.get("method") == "session/request_permission"]


def withdrawals(client: Client, start: int = 0) -> list[tuple[int, Any]]:
    return [(i, m["params"]["requestId"]) for i, m in agent_wire(client, start)
            if m.get("method") == "$/cancel_request"]


def idle_ends(client: Client, sid: str, start: int = 0) -> list[tuple[int, str]]:
    return [(i, u["stopReason"]) for i, u in snapshots(client, sid, start)
            if u["state"] == "idle" and "stopReason" in u]


async def wait_update(client: Client, sid: str, predicate: Callable[[Message], bool], *, since: int = 0,
                      timeout: float = 10.0) -> tuple[int, Message]:
    """The first update of ``sid`` at or after transcript index ``since`` that matches (waiting for it)."""
    found: list[tuple[int, Message]] = []

    def check() -> bool:
        found[:] = [(i, u) for i, u in updates(client, sid, since) if predicate(u)][:1]
        return bool(found)

    await client.wait_for(check, timeout)
    return found[0]


async def turn(client: Client, sid: str, text: str) -> tuple[int, int, list[tuple[int, Message]]]:
    """Send a prompt and wait for the idle that ends its work; returns ``(start, end, updates of the turn)``."""
    start = len(client.transcript)
    await client.prompt_and_wait(sid, text)
    end = idle_ends(client, sid, start)[0][0]
    return start, end, [(i, u) for i, u in updates(client, sid, start) if i <= end]


def is_tool(tool_call_id: str, **fields: Any) -> Callable[[Message], bool]:
    return lambda u: u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == tool_call_id and all(
        u.get(k) == v for k, v in fields.items())


async def quiet_period(client: Client, seconds: float = 0.3) -> None:
    """Let the agent act on what it received (a subprocess offers no marker to wait for)."""
    await anyio.sleep(seconds)


# -- /subagent SECS TEXT -----------------------------------------------------------------------------


async def test_subagent_streams_its_text_and_is_listed_while_it_runs(validator: SchemaValidator,
                                                                     anyio_backend: str) -> None:
    text = "hello from the child"
    async with agent_process(validator, anyio_backend) as client:
        sid = await client.new_session(str(ROOT))
        start, end, turn_updates = await turn(client, sid, f"/subagent 1 {text}")
        announce_at, announce = next((i, u) for i, u in turn_updates if u["sessionUpdate"] == "subagent_update")
        child = announce["sessionId"]
        assert announce == {"sessionUpdate": "subagent_update", "sessionId": child, "title": f"Subagent: {text}",
                            "description": "streams a message", "capabilities": {"cancel": {}},
                            "state": {"state": "idle", "background": []}}
        assert child != sid
        assert next(u["state"] for _, u in snapshots(client, sid, start) if _ <= end) == "running"
        assert idle_ends(client, sid, start)[0][1] == "end_turn"

        child_end, _ = await wait_update(client, child, lambda u: u.get("stopReason") is not None, timeout=10)
        await wait_update(client, sid, lambda u: u["sessionUpdate"] == "state_update" and not listed(u),
                          since=child_end)
        # R79: the announcement precedes everything that names the child
        naming = [i for i, m in agent_wire(client) if child in str(m)]
        assert naming[0] == announce_at
        # the child: running, its text in chunks of one message, idle end_turn
        child_updates = updates(client, child)
        assert [u["sessionUpdate"] for _, u in child_updates] == (
            ["state_update"] + ["agent_message_chunk"] * len(text.split()) + ["state_update"])
        chunks = [(i, u) for i, u in child_updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert len({u["messageId"] for _, u in chunks}) == 1
        assert "".join(u["content"]["text"] for _, u in chunks) == text
        assert [u for _, u in snapshots(client, child)] == [
            {"sessionUpdate": "state_update", "state": "running", "background": []},
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": []}]
        # streamed over SECS, not at once
        running_at = child_updates[0][0]
        assert client.transcript[chunks[-1][0]].at - client.transcript[chunks[0][0]].at > 0.4
        assert client.transcript[child_end].at - client.transcript[running_at].at > 0.8
        # R80: each child snapshot mirrored into the parent
        mirrored = [u["state"] for _, u in updates(client, sid) if u["sessionUpdate"] == "subagent_update"
                    and u["sessionId"] == child and "state" in u]
        assert mirrored == [{"state": "idle", "background": []}] + [
            {k: v for k, v in u.items() if k != "sessionUpdate"} for _, u in snapshots(client, child)]
        # R90: listed from the child's running until its quiet idle, and not before or after
        parent_shots = snapshots(client, sid)
        child_running_mirror = next(i for i, u in updates(client, sid) if u["sessionUpdate"] == "subagent_update"
                                    and (u.get("state") or {}).get("state") == "running")
        child_idle_mirror = next(i for i, u in updates(client, sid) if u["sessionUpdate"] == "subagent_update"
                                 and (u.get("state") or {}).get("stopReason") == "end_turn")
        for i, u in parent_shots:
            expected = [("subagent", child)] if child_running_mirror < i < child_idle_mirror else []
            assert listed(u) == expected, (i, u)
        assert any(listed(u) for _, u in parent_shots)
        assert listed(parent_shots[-1][1]) == []


async def test_subagent_cancel_on_the_childs_id_stops_only_the_child(validator: SchemaValidator,
                                                                     anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await client.new_session(str(ROOT))
        _, _end, turn_updates = await turn(client, sid, "/subagent 3 one two three four five six")
        child = next(u["sessionId"] for _, u in turn_updates if u["sessionUpdate"] == "subagent_update")
        _first_chunk, _ = await wait_update(client, child, lambda u: u["sessionUpdate"] == "agent_message_chunk")
        assert ("subagent", child) in now_listed(client, sid)
        parent_ends = len(idle_ends(client, sid))
        mark = len(client.transcript)
        client.cancel(child)
        cancelled_at, cancelled = await wait_update(client, child, lambda u: u.get("stopReason") is not None,
                                                    since=mark, timeout=3)
        assert cancelled == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled",
                             "background": []}
        assert client.transcript[cancelled_at].at - client.transcript[mark].at < 1.5  # not at the end of 3 s
        await wait_update(client, sid, lambda u: u["sessionUpdate"] == "state_update" and not listed(u), since=mark)
        await quiet_period(client, 0.8)  # past the next word's time: the stream stopped
        assert [u for i, u in updates(client, child) if i > cancelled_at] == []
        assert len(idle_ends(client, sid)) == parent_ends  # the parent's foreground is untouched
        # the child session remains: still associated and refusing client mutations (-32602, not -32002)
        with pytest.raises(RequestError) as caught:
            await client.request("session/close", {"sessionId": child})
        assert caught.value.code == -32602 and caught.value.data == {"sessionId": child}
        t2 = await turn(client, sid, "echo still here")
        assert idle_ends(client, sid, t2[0])[0][1] == "end_turn"


# -- /ask TEXT ------------------------------------------------------------------------------------------


async def _ask(client: Client, sid: str, text: str) -> tuple[int, Message, str]:
    """Start ``/ask TEXT`` and wait for its request; returns ``(request index, request, tool call id)``."""
    start = len(client.transcript)
    await client.prompt(sid, f"/ask {text}")
    await client.wait_for(lambda: bool(requests(client, start)) and bool(client.pending_permissions))
    index, request = requests(client, start)[0]
    call_at, call = next((i, u) for i, u in updates(client, sid, start) if u["sessionUpdate"] == "tool_call_update")
    assert call == {"sessionUpdate": "tool_call_update", "toolCallId": call["toolCallId"], "title": f"Ask: {text}",
                    "kind": "other", "name": "ask", "status": "pending"}
    assert call_at < index
    assert request["params"] == {"sessionId": sid, "title": f"Allow: {text}?",
                                 "subject": {"type": "tool_call", "toolCall": {"toolCallId": call["toolCallId"]}},
                                 "options": OPTIONS}
    await wait_update(client, sid, lambda u: u.get("state") == "requires_action", since=start)
    assert [u["state"] for _, u in snapshots(client, sid, start)] == ["running", "requires_action"]
    assert all(listed(u) == [] for _, u in snapshots(client, sid, start))  # R85: the turn waits on it
    return index, request, call["toolCallId"]


@pytest.mark.parametrize(("option", "said", "status"), [("allow-once", "allowed", "completed"),
                                                          ("reject-once", "rejected", "failed")])
async def test_ask_answered(validator: SchemaValidator, anyio_backend: str, option: str, said: str,
                            status: str) -> None:
    async with agent_process(validator, anyio_backend, permission_policy=None) as client:
        sid = await client.new_session(str(ROOT))
        request_at, _, call_id = await _ask(client, sid, "deploy to prod")
        client.answer_permission(0, option)
        await client.wait_idle(sid)
        after = [u for i, u in updates(client, sid) if i > request_at]
        messages = [u for u in after if u["sessionUpdate"] == "agent_message"]
        assert [u["content"] for u in messages] == [[{"type": "text", "text": f"{said}: deploy to prod"}]]
        assert [u["sessionUpdate"] if u["sessionUpdate"] != "state_update" else u["state"] for u in after] == [
            "running", "tool_call_update", "agent_message", "idle"]
        assert next(u for u in after if u["sessionUpdate"] == "tool_call_update") == {
            "sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
        assert after[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn",
                             "background": []}
        assert withdrawals(client) == []


async def test_ask_cancelled_while_waiting(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend, permission_policy=None) as client:
        sid = await client.new_session(str(ROOT))
        request_at, request, call_id = await _ask(client, sid, "drop the table")
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        # R67: the request is withdrawn with $/cancel_request, before the idle that ends the work (R68)
        (withdrawn_at, request_id), = withdrawals(client)
        assert request_id == request["id"]
        idle_at = idle_ends(client, sid)[-1][0]
        assert request_at < withdrawn_at < idle_at
        after = [u for i, u in updates(client, sid) if i > request_at]
        assert after == [
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "cancelled"},
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled", "background": []}]
        await client.wait_for(lambda: not client.pending_permissions)  # the client's handler was withdrawn too
        # R66: not approved, nothing more happens; the session takes the next prompt
        _start, _, turn_updates = await turn(client, sid, "echo next")
        assert [u["content"] for _, u in turn_updates if u["sessionUpdate"] == "agent_message"] == [
            [{"type": "text", "text": "next"}]]


# -- /bgask -----------------------------------------------------------------------------------------------


async def test_bgask_request_survives_session_cancel_and_its_answer_reaches_the_tool_call(
        validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend, permission_policy=None) as client:
        sid = await client.new_session(str(ROOT))
        _start, end, turn_updates = await turn(client, sid, "/bgask")
        call_at, call = next((i, u) for i, u in turn_updates if u["sessionUpdate"] == "tool_call_update")
        call_id = call["toolCallId"]
        assert call == {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "title": "Background job",
                        "kind": "other", "name": "bgask", "status": "pending"}
        await client.wait_for(lambda: bool(client.pending_permissions))
        (request_at, request), = requests(client)
        assert request["params"] == {"sessionId": sid, "title": "Allow the background job to continue?",
                                     "subject": {"type": "tool_call", "toolCall": {"toolCallId": call_id}},
                                     "options": OPTIONS}
        # R110: a snapshot listing the tool call precedes the request; R61: the state never waits on it
        listing_at = min(i for i, u in snapshots(client, sid) if ("tool_call", call_id) in listed(u))
        assert call_at < listing_at < request_at
        assert all(u["state"] != "requires_action" for _, u in snapshots(client, sid))
        assert idle_ends(client, sid) == [(end, "end_turn")]
        assert ("tool_call", call_id) in now_listed(client, sid)

        mark = len(client.transcript)
        client.cancel(sid)
        await quiet_period(client)
        # R107: the request stays open; nothing was running in the foreground, so nothing is sent at all
        assert agent_wire(client, mark) == []
        assert [p["params"]["subject"]["toolCall"]["toolCallId"] for p in client.pending_permissions.values()] == [
            call_id]

        client.answer_permission(0, "allow-once")
        final_at, final = await wait_update(client, sid, is_tool(call_id, status="completed"), since=mark)
        assert final == {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
                         "capabilities": None}
        content = [u["content"] for i, u in updates(client, sid, mark) if u["sessionUpdate"] ==
                   "tool_call_content_chunk" and u["toolCallId"] == call_id]
        assert content == [{"type": "content", "content": {"type": "text", "text": "allowed"}}]
        _dropped_at, dropped = await wait_update(client, sid, lambda u: u["sessionUpdate"] == "state_update",
                                                since=final_at)
        assert dropped == {"sessionUpdate": "state_update", "state": "idle", "background": []}
        assert withdrawals(client) == []
