"""``replay_complete`` (V2-PREVIEW P8-P14), in-process on asyncio and trio: one marker per ``session/resume`` with
``replayFrom``, after the history and before the answer (also for no history), one per child the replay announces,
live updates held back until it has gone, none without ``replayFrom``; the v1 bridge's ``session/load`` drops it."""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent import Agent, ContentBlock, Session
from acp_agent.store import MemoryStore
from acp_agent.testing import Client, connect_agent
from tests.helpers.agents import text_of

pytestmark = pytest.mark.anyio

MARKER = {"sessionUpdate": "replay_complete"}


class ReplayAgent(Agent):
    """``spawn`` starts a subagent; anything else is said back. Its resume hook sends a live update."""

    name = "replay"
    version = "1"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> None:
        text = text_of(prompt)
        if text == "spawn":
            child = await session.spawn_subagent("helper")
            self.child = child.id
        await session.say(f"said {text}")

    async def resume_session(self, session: Session) -> None:
        await session.update_info(title="welcome back")  # live output, sent during the resume


def wire_after(client: Client, start: int) -> list[dict[str, Any]]:
    return client.sent_by_agent()[start:]


def kinds(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(sessionId, sessionUpdate)`` of each update, ``("", "answer")`` for an answer."""
    out = []
    for m in messages:
        if m.get("method") == "session/update":
            out.append((m["params"]["sessionId"], m["params"]["update"]["sessionUpdate"]))
        elif "result" in m or "error" in m:
            out.append(("", "answer"))
    return out


async def resume_elsewhere(store: MemoryStore, sid: str, *, replay: bool) -> tuple[Client, list[dict[str, Any]]]:
    async with connect_agent(ReplayAgent(), store=store) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=replay)
        await client.wait_idle(sid, count=0)
    return client, client.sent_by_agent()


async def session_with(store: MemoryStore, *prompts: str) -> tuple[str, str | None]:
    agent = ReplayAgent()
    async with connect_agent(agent, store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        for text in prompts:
            await client.prompt_and_wait(sid, text)
        await client.close_session(sid)
    return sid, getattr(agent, "child", None)


async def test_one_marker_after_the_history_before_the_answer() -> None:  # P8, P10, bar 3a/3b
    store = MemoryStore()
    sid, _ = await session_with(store, "one", "two")
    _, wire = await resume_elsewhere(store, sid, replay=True)
    seen = kinds(wire[1:])  # after the initialize answer
    assert seen.count((sid, "replay_complete")) == 1
    at = seen.index((sid, "replay_complete"))
    history = seen[:at]
    assert (sid, "user_message") in history and (sid, "agent_message") in history
    assert (sid, "session_info_update") not in history  # P11: the hook's live update waited for the marker
    rest = seen[at + 1:]
    assert rest.index((sid, "session_info_update")) < rest.index(("", "answer"))
    assert rest.index((sid, "state_update")) < rest.index(("", "answer"))  # the snapshot is live state (P10)
    marker = next(m for m in wire if m.get("method") == "session/update"
                  and m["params"]["update"]["sessionUpdate"] == "replay_complete")
    assert marker["params"] == {"sessionId": sid, "update": MARKER}


async def test_empty_history_still_gets_its_marker() -> None:  # P9, bar 3e
    store = MemoryStore()
    sid, _ = await session_with(store)
    _, wire = await resume_elsewhere(store, sid, replay=True)
    seen = kinds(wire[1:])
    assert seen.count((sid, "replay_complete")) == 1
    assert seen.index((sid, "replay_complete")) < seen.index(("", "answer"))


async def test_no_marker_without_replay_from() -> None:  # P13, bar 3d
    store = MemoryStore()
    sid, _ = await session_with(store, "one")
    _, wire = await resume_elsewhere(store, sid, replay=False)
    assert all(u != "replay_complete" for _, u in kinds(wire))


async def test_resume_of_an_active_session_replays_with_one_marker() -> None:  # P8 on the same connection
    async with connect_agent(ReplayAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "hello")
        start = len(client.sent_by_agent())
        await client.resume_session(sid, "/tmp", replay=True)
        seen = kinds(wire_after(client, start))
        assert seen.count((sid, "replay_complete")) == 1
        assert seen.index((sid, "replay_complete")) < seen.index(("", "answer"))
        await client.resume_session(sid, "/tmp")
        assert kinds(wire_after(client, start)).count((sid, "replay_complete")) == 1


async def test_each_announced_child_gets_its_own_marker() -> None:  # P12, bar 3c
    store = MemoryStore()
    sid, child = await session_with(store, "spawn")
    assert child is not None
    _, wire = await resume_elsewhere(store, sid, replay=True)
    seen = kinds(wire[1:])
    assert seen.count((child, "replay_complete")) == 1
    announced = next(i for i, m in enumerate(wire[1:]) if m.get("method") == "session/update"
                     and m["params"]["update"].get("sessionId") == child)
    assert announced < seen.index((child, "replay_complete")) < seen.index((sid, "replay_complete"))


async def test_v1_load_gets_no_marker() -> None:  # P14/P16, bar 4b
    async with connect_agent(ReplayAgent(), check=False) as client:
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {},
                                            "clientInfo": {"name": "v1", "version": "0"}})
        sid = (await client.request("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        start = len(client.sent_by_agent())
        await client.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        updates = [m["params"]["update"]["sessionUpdate"] for m in wire_after(client, start)
                   if m.get("method") == "session/update"]
        assert "replay_complete" not in updates and "user_message_chunk" in updates


async def test_session_load_is_unknown_in_v2() -> None:  # P15, bar 4a
    async with connect_agent(ReplayAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        with pytest.raises(Exception) as caught:
            await client.request("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        assert getattr(caught.value, "code", None) == -32601
