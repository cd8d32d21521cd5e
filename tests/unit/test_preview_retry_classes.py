"""The retry classes of the v2 methods (V2-PREVIEW P7, our reading of §7.1): the table in
``docs/reference/raw-exchange.md`` names every method the agent serves, and the runtime behaves as it says, one
test per class, on asyncio and trio."""

from __future__ import annotations

import re

import pytest

from acp_agent.schema.methods import AGENT_METHODS
from acp_agent.testing import connect_agent
from tests.helpers.agents import ScriptedAgent
from tests.helpers.remote import ROOT

pytestmark = pytest.mark.anyio

PAGE = ROOT / "docs" / "reference" / "raw-exchange.md"
CLASSES = ("resend as is", "resend with a key", "never resend")


def documented() -> dict[str, str]:
    """Each method of the retry-class table with its class."""
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("### Retry classes", 1)[1].split("###", 1)[0]
    classes: dict[str, str] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1] in CLASSES:
            for method in re.findall(r"`([a-z_/]+)`", cells[0]):
                classes[method] = cells[1]
    return classes


def test_every_agent_method_has_a_retry_class() -> None:
    classes = documented()
    assert sorted(classes) == sorted(AGENT_METHODS)
    assert classes["session/prompt"] == "resend with a key"
    assert {m for m, c in classes.items() if c == "never resend"} >= {"session/new", "session/fork"}
    assert "our reading" in PAGE.read_text(encoding="utf-8").split("### Retry classes", 1)[1].split("|", 1)[0]


async def test_resend_as_is_changes_nothing() -> None:
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.set_config_option(sid, "model", "smart")
        assert await client.set_config_option(sid, "model", "smart") == first
        listed = await client.list_sessions()
        assert await client.list_sessions() == listed
        await client.resume_session(sid, "/tmp")
        await client.resume_session(sid, "/tmp")  # resuming an active session again: still one session
        assert [s["sessionId"] for s in await client.list_sessions()] == [sid]
        assert await client.request("session/close", {"sessionId": sid}) == {}
        assert await client.request("session/close", {"sessionId": sid}) == {}  # closing twice is closing once
        assert await client.request("session/delete", {"sessionId": sid}) == {}
        assert await client.request("session/delete", {"sessionId": sid}) == {}  # so is deleting
        assert await client.list_sessions() == []


async def test_resend_with_a_key_inserts_once() -> None:
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "echo hi", idempotency_key="one")
        assert await client.prompt(sid, "echo hi", idempotency_key="one") == first
        await client.wait_idle(sid)
        assert await client.prompt(sid, "echo hi") != first  # without a key a resend is a second message
        await client.wait_idle(sid, count=2)


async def test_never_resend_session_new_makes_a_second_session() -> None:
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        one = await client.new_session("/tmp")
        two = await client.new_session("/tmp")
        assert one != two
        assert sorted(s["sessionId"] for s in await client.list_sessions()) == sorted([one, two])
