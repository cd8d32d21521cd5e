"""The live sessions of a store (``acp_agent._runtime.live``): which runtime sharing it has each session, and
the closes, loads and changes a resume or a bookkeeping change waits for."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.lowlevel import checkpoint

from acp_agent import Agent, RequestError, Session
from acp_agent._runtime.live import LiveSessions, Member, live_sessions
from acp_agent._runtime.runtime import AgentRuntime
from acp_agent.store import MemoryStore
from acp_agent.testing.client import Client, connect_agent
from acp_agent.testing.streams import byte_pipe
from tests.helpers.agents import ScriptedAgent

pytestmark = pytest.mark.anyio


class SlowClose(ScriptedAgent):
    """Its ``close_session`` hook waits for ``release``, then notes the close in the session's data;
    ``resume_session`` keeps the data it finds."""

    def __init__(self) -> None:
        super().__init__()
        self.release = anyio.Event()
        self.closing = anyio.Event()
        self.resumed = anyio.Event()
        self.found: dict[str, Any] = {}

    async def close_session(self, session: Session) -> None:
        self.closing.set()
        await self.release.wait()
        session.data["closed"] = True

    async def resume_session(self, session: Session) -> None:
        self.found = dict(session.data)
        self.resumed.set()


@asynccontextmanager
async def two_clients(agent: Agent, first: MemoryStore, second: MemoryStore) -> AsyncIterator[tuple[Client, Client]]:
    """Two initialized in-memory connections to ``agent``, keeping sessions in ``first`` and ``second``."""
    async with connect_agent(agent, store=first) as one, connect_agent(agent, store=second) as two:
        await one.initialize()
        await two.initialize()
        yield one, two


async def hold(directory: LiveSessions[Member], release: anyio.Event | None = None) -> None:
    """Mark session ``s`` until ``release`` is set (for ever without one)."""
    async with directory.changing("s"):
        await (release.wait() if release is not None else anyio.sleep_forever())


async def note_settled(directory: LiveSessions[Member], settled: anyio.Event) -> None:
    await directory.settled("s")
    settled.set()


async def test_runtimes_on_one_store_see_each_others_sessions() -> None:
    store = MemoryStore()
    async with two_clients(ScriptedAgent(), store, store) as (one, two):
        sid = await one.new_session("/tmp")
        directory: LiveSessions[AgentRuntime] = live_sessions(store)
        assert len(directory.members()) == 2
        [holder] = directory.active(sid)
        assert list(directory.opened(sid)) == [holder] and sid in holder.records
        other = next(r for r in directory.members() if r is not holder)
        assert directory.members(other)[0] is other and list(directory.active(sid, other)) == [holder]
        assert (await two.request("session/status", {"sessionId": sid}))["status"] == "open"


async def test_runtimes_on_other_stores_do_not_see_each_other() -> None:
    first, second = MemoryStore(), MemoryStore()
    async with two_clients(ScriptedAgent(), first, second) as (one, two):
        sid = await one.new_session("/tmp")
        assert len(live_sessions(first).members()) == 1 and len(live_sessions(second).members()) == 1
        assert list(live_sessions(second).active(sid)) == [] and list(live_sessions(second).opened(sid)) == []
        with pytest.raises(RequestError) as info:
            await two.request("session/status", {"sessionId": sid})
        assert info.value.code == -32002


async def test_a_runtime_that_finished_is_forgotten() -> None:
    store = MemoryStore()
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        await client.new_session("/tmp")
        assert len(live_sessions(store).members()) == 1
    assert live_sessions(store).members() == []
    send, receive = byte_pipe()
    runtime = AgentRuntime(ScriptedAgent(), receive, send, store=store)  # never run
    assert live_sessions(store).members() == [runtime]
    del runtime
    gc.collect()
    assert live_sessions(store).members() == []


async def test_settled_waits_for_every_mark_and_returns_when_a_close_ends() -> None:
    directory: LiveSessions[Member] = LiveSessions()
    first, second, settled = anyio.Event(), anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(hold, directory, first)
        tg.start_soon(hold, directory, second)
        await wait_all_tasks_blocked()
        tg.start_soon(note_settled, directory, settled)
        await wait_all_tasks_blocked()
        first.set()
        await wait_all_tasks_blocked()
        assert not settled.is_set()  # the other mark is still there
        await directory.settled("other")  # another session is not held up
        second.set()
        await settled.wait()
    assert directory._busy == {}


async def test_settled_returns_when_the_marked_work_is_cancelled() -> None:
    directory: LiveSessions[Member] = LiveSessions()
    settled = anyio.Event()
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as work:
            work.start_soon(hold, directory)
            await wait_all_tasks_blocked()
            tg.start_soon(note_settled, directory, settled)
            await wait_all_tasks_blocked()
            assert not settled.is_set()
            work.cancel_scope.cancel()
        await settled.wait()


async def test_settled_does_not_yield_when_nothing_is_in_progress() -> None:
    """What a caller checks after ``settled`` is still true when it acts: no other task ran between."""
    directory: LiveSessions[Member] = LiveSessions()
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await directory.settled("s")  # a checkpoint here would raise the pending cancellation
        reached = True
        await checkpoint()
    assert reached and scope.cancelled_caught


async def test_a_resume_on_another_runtime_waits_for_the_close_to_save_the_session() -> None:
    store = MemoryStore()
    agent = SlowClose()
    async with two_clients(agent, store, store) as (one, two):
        sid = await one.new_session("/tmp")
        async with anyio.create_task_group() as tg:
            try:
                tg.start_soon(one.close_session, sid)
                await agent.closing.wait()
                tg.start_soon(two.resume_session, sid, "/tmp")
                await wait_all_tasks_blocked()
                assert not agent.resumed.is_set()  # waits while the session is being closed elsewhere
            finally:
                agent.release.set()
        assert agent.found == {"closed": True}  # brought back as the close saved it
        [holder] = live_sessions(store).active(sid)  # the runtime it was resumed on (the other one closed it)
        assert list(live_sessions(store).opened(sid)) == [holder]


def test_a_store_knows_nothing_of_runtimes() -> None:
    """The table is kept beside the store, one per store object (even stores that compare equal), and goes with it."""
    store = MemoryStore()
    assert not hasattr(store, "runtimes")
    table = live_sessions(store)
    assert live_sessions(store) is table and live_sessions(MemoryStore()) is not table

    class Equal(MemoryStore):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, Equal)

        __hash__ = None  # type: ignore[assignment]

    one, two = Equal(), Equal()
    assert live_sessions(one) is not live_sessions(two)
    from acp_agent._runtime import live

    before = len(live._TABLES)
    del one, two, store, table
    gc.collect()
    assert len(live._TABLES) < before
