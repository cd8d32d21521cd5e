"""Idempotency keys of ``session/prompt`` (V2-PREVIEW P1-P7), in-process on asyncio and trio: a retry gets the
first attempt's ``messageId`` and starts nothing, whenever it arrives; keys are per session, exact, bounded,
kept with the session's record (memory, SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from acp_agent import Agent, ContentBlock, Limits, Session
from acp_agent._session.keys import KEY_MISMATCH
from acp_agent.errors import RequestError
from acp_agent.store import MemoryStore, SqliteStore
from acp_agent.testing import Client, check_transcript, connect_agent
from tests.helpers.agents import text_of

pytestmark = pytest.mark.anyio


class CountingAgent(Agent):
    """Says what it was asked; ``sleep N`` first sleeps N seconds. ``runs`` lists every prompt it ran."""

    name = "counting"
    version = "1"

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> None:
        text = text_of(prompt)
        self.runs.append(text)
        if text.startswith("sleep"):
            await anyio.sleep(float(text.split()[1]))
        await session.say(f"ran {text}")


def user_messages(client: Client, sid: str) -> list[str]:
    return [u["params"]["update"]["messageId"] for u in client.sent_by_agent()
            if u.get("method") == "session/update" and u["params"]["sessionId"] == sid
            and u["params"]["update"]["sessionUpdate"] == "user_message"]


async def test_retry_after_the_answer_gets_the_same_message_and_runs_nothing() -> None:  # P3, bar 1a/1b
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "hello", idempotency_key="k-1")
        await client.wait_idle(sid)
        again = await client.prompt(sid, "hello", idempotency_key="k-1")
        await anyio.sleep(0.05)
        assert again == first
        assert agent.runs == ["hello"]
        assert user_messages(client, sid) == [first]
        assert client.view(sid).idle_count == 1


async def test_retry_while_the_turn_runs() -> None:  # P4, bar 2a
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "sleep 0.3", idempotency_key="k")
        assert await client.prompt(sid, "sleep 0.3", idempotency_key="k") == first
        await client.wait_idle(sid)
        await anyio.sleep(0.1)
        assert agent.runs == ["sleep 0.3"]
        assert user_messages(client, sid) == [first]


async def test_duplicate_before_the_first_is_answered_is_not_queued_twice() -> None:  # P4, bar 2b/2c
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 0.3")  # the session is busy: the keyed prompt is held, not answered
        answers: list[str] = []

        async def send() -> None:
            answers.append(await client.prompt(sid, "next", idempotency_key="held"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(send)
            tg.start_soon(send)
            tg.start_soon(send)
        await client.wait_idle(sid, count=2)
        await anyio.sleep(0.1)
        assert len(set(answers)) == 1 and len(answers) == 3
        assert agent.runs == ["sleep 0.3", "next"]
        assert client.view(sid).idle_count == 2


async def test_no_key_and_other_keys_are_new_messages() -> None:  # P5, bar 1c
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        ids = [await client.prompt(sid, "same"), await client.prompt(sid, "same"),
               await client.prompt(sid, "same", idempotency_key="a"), await client.prompt(sid, "same",
                                                                                         idempotency_key="A")]
        await client.wait_idle(sid, count=4)
        assert len(set(ids)) == 4  # case matters (P2)
        assert agent.runs == ["same"] * 4


async def test_keys_are_per_session() -> None:  # P2, bar 1d
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        one, two = await client.new_session("/tmp"), await client.new_session("/tmp")
        first = await client.prompt(one, "x", idempotency_key="shared")
        second = await client.prompt(two, "x", idempotency_key="shared")
        await client.wait_idle(one)
        await client.wait_idle(two)
        assert first != second and agent.runs == ["x", "x"]


@pytest.mark.parametrize("key", ["", "k" * 256])
async def test_invalid_key_is_refused(key: str) -> None:  # P2, §7.5
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        with pytest.raises(RequestError) as caught:
            await client.prompt(sid, "x", idempotency_key=key)
        assert caught.value.code == -32602
        assert await client.prompt(sid, "x", idempotency_key="k" * 255)  # 255 characters is fine
        await client.wait_idle(sid)
        assert agent.runs == ["x"]


async def test_same_key_other_prompt_is_refused_naming_the_key() -> None:  # §7.2
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "one", idempotency_key="k")
        with pytest.raises(RequestError) as caught:
            await client.prompt(sid, "two", idempotency_key="k")
        assert caught.value.code == -32602 and caught.value.message.endswith(KEY_MISMATCH)
        assert caught.value.data == {"idempotencyKey": "k"}
        await client.wait_idle(sid)
        assert agent.runs == ["one"]


async def test_withdrawn_prompt_leaves_its_key_free() -> None:  # §7.4
    agent = CountingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 5")
        async with anyio.create_task_group() as tg:

            async def held() -> None:
                with pytest.raises(RequestError):
                    await client.prompt(sid, "again", idempotency_key="k")

            tg.start_soon(held)
            await anyio.sleep(0.05)
            await client.cancel(sid)  # withdraws the held prompt (-32800) and cancels the running turn
        await client.wait_idle(sid)
        message = await client.prompt(sid, "again", idempotency_key="k")
        await client.wait_idle(sid, count=2)
        assert agent.runs == ["sleep 5", "again"] and user_messages(client, sid)[-1] == message


async def test_keys_survive_close_and_resume_and_are_bounded() -> None:  # P3 across resume; bounds
    agent = CountingAgent()
    store = MemoryStore()
    limits = Limits(idempotency_keys=2)
    async with connect_agent(agent, store=store, limits=limits) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        ids = {}
        for key in ("a", "b", "c"):
            ids[key] = await client.prompt(sid, key, idempotency_key=key)
            await client.wait_idle(sid, count=len(ids))
        await client.close_session(sid)
    async with connect_agent(agent, store=store, limits=limits) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert await client.prompt(sid, "c", idempotency_key="c") == ids["c"]
        assert await client.prompt(sid, "b", idempotency_key="b") == ids["b"]
        assert await client.prompt(sid, "a", idempotency_key="a") != ids["a"]  # the oldest key was dropped
        await client.wait_idle(sid)
    assert agent.runs == ["a", "b", "c", "a"]


async def test_keys_expire() -> None:
    agent = CountingAgent()
    async with connect_agent(agent, limits=Limits(idempotency_key_age=0.2), check=False) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "x", idempotency_key="k")
        await client.wait_idle(sid)
        await anyio.sleep(0.3)
        assert await client.prompt(sid, "x", idempotency_key="k") != first
        await client.wait_idle(sid, count=2)
    # Past the agent's key age a retry is a new submission; the wire does not show that bound, so the checker's P3
    # sees a retry answered with a new messageId. Every other rule still holds.
    assert [v.rule for v in check_transcript(client.transcript)] == ["P3"]


async def test_keys_survive_a_restart_in_sqlite(tmp_path: Path) -> None:
    agent = CountingAgent()
    path = tmp_path / "sessions.db"
    async with connect_agent(agent, store=SqliteStore(path)) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "x", idempotency_key="k")
        await client.wait_idle(sid)
    record = await SqliteStore(path).load(sid)
    assert record is not None and record.prompt_keys["k"]["messageId"] == first
    assert record.prompt_keys["k"]["at"] <= time.time()
    async with connect_agent(agent, store=SqliteStore(path)) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert await client.prompt(sid, "x", idempotency_key="k") == first
    assert agent.runs == ["x"]


async def test_keys_survive_a_restart_in_postgres(postgres_dsn: str) -> None:
    from acp_agent.store.postgres import PostgresStore

    agent = CountingAgent()
    async with connect_agent(agent, store=PostgresStore(postgres_dsn)) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        first = await client.prompt(sid, "x", idempotency_key="k")
        await client.wait_idle(sid)
    async with connect_agent(agent, store=PostgresStore(postgres_dsn)) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert await client.prompt(sid, "x", idempotency_key="k") == first
    assert agent.runs == ["x"]


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Limits(idempotency_keys=0)
    with pytest.raises(ValueError):
        Limits(idempotency_key_age=-1)
