"""Limits: each one at its edge (N succeeds, N+1 fails precisely, freeing one makes room again)."""

from __future__ import annotations

import base64
import dataclasses
import sys
from typing import Any

import anyio
import pytest

from acp_agent import Agent, LimitExceededError, Limits, RequestError, Session, StopReason, ToolCall
from acp_agent._wire.framing import DEFAULT_MAX_MESSAGE_BYTES
from acp_agent.errors import ProcessStartError
from acp_agent.limits import LIMIT_ERROR_CODE
from acp_agent.schema import ToolCallUpdate
from acp_agent.testing.client import Client, connect_agent
from tests.helpers.agents import ForkingAgent, ScriptedAgent
from tests.helpers.background import BgAgent, ForkingBgAgent, assert_clean, flush, is_exit, items, opened, snapshots

pytestmark = pytest.mark.anyio


def limit_error(info: pytest.ExceptionInfo[RequestError], name: str, value: int) -> None:
    """The precise answer to a client request refused by a limit."""
    assert info.value.code == LIMIT_ERROR_CODE == -32800
    assert f"limit {name}={value} reached" in info.value.message
    assert info.value.data == {"limit": name, "value": value}


def refused(info: pytest.ExceptionInfo[LimitExceededError], name: str, value: int) -> None:
    """The precise exception of an author call refused by a limit."""
    assert (info.value.limit, info.value.value) == (name, value)
    assert f"limit {name}={value} reached" in str(info.value)


def mentions(client: Client, text: str) -> bool:
    """Whether any message the agent sent contains ``text``."""
    return any(text in repr(m) for m in client.sent_by_agent())


# -- the Limits object ------------------------------------------------------------------------------


def test_defaults_are_documented_values() -> None:
    limits = Limits()
    assert limits == Limits(
        max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES,
        max_sessions=256,
        max_listed_items=1000,
        max_processes=64,
        terminal_output_bytes=1024 * 1024,
    )
    assert DEFAULT_MAX_MESSAGE_BYTES == 32 * 1024 * 1024
    assert Agent.limits == limits
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_sessions = 3  # type: ignore[misc]


@pytest.mark.parametrize("field", ["max_message_bytes", "max_sessions", "max_listed_items", "max_processes"])
def test_limits_must_be_positive(field: str) -> None:
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=f"Limits.{field}"):
            Limits(**{field: bad})
    Limits(**{field: 1})


def test_terminal_tail_may_be_zero() -> None:
    assert Limits(terminal_output_bytes=0).terminal_output_bytes == 0
    with pytest.raises(ValueError, match="terminal_output_bytes"):
        Limits(terminal_output_bytes=-1)


async def test_argument_wins_over_the_agent_attribute() -> None:
    class TwoSessions(ScriptedAgent):
        limits = Limits(max_sessions=2)

    async with connect_agent(TwoSessions()) as client:  # the class attribute
        await client.initialize()
        await client.new_session("/tmp")
        await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        limit_error(info, "max_sessions", 2)
    async with connect_agent(TwoSessions(), limits=Limits(max_sessions=3)) as client:  # the argument wins
        await client.initialize()
        for _ in range(3):
            await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        limit_error(info, "max_sessions", 3)


# -- max_message_bytes ----------------------------------------------------------------------------


async def test_max_message_bytes_edge() -> None:  # R14
    limit = 400
    # check=False: the wire checker cannot know this connection's limit, so it would call the
    # -32600 answer (id null) unprompted and the oversized request unanswered.
    async with connect_agent(ScriptedAgent(), limits=Limits(max_message_bytes=limit), check=False) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")

        def line(size: int, request_id: int) -> bytes:
            head = b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"%s",' % (
                request_id, sid.encode())
            head += b'"prompt":[{"type":"text","text":"echo '
            tail = b'"}]}}'
            return head + b"x" * (size - len(head) - len(tail)) + tail

        exact, over = line(limit, 900), line(limit + 1, 901)
        assert (len(exact), len(over)) == (limit, limit + 1)
        await client._send_stream.send(over + b"\n")
        await client._send_stream.send(exact + b"\n")
        await client.wait_for(lambda: any(m.get("id") == 900 for m in client.sent_by_agent()))
        errors = [m for m in client.sent_by_agent() if "error" in m]
        assert len(errors) == 1 and errors[0]["id"] is None
        assert errors[0]["error"]["code"] == -32600
        assert f"{limit}-byte limit (max_message_bytes)" in errors[0]["error"]["message"]
        assert "result" in next(m for m in client.sent_by_agent() if m.get("id") == 900)
        await client.wait_idle(sid)


async def test_max_message_bytes_keyword_is_folded_in() -> None:
    from acp_agent.limits import resolve_limits

    base = Limits(max_sessions=7)
    assert resolve_limits(base, None, 1000) == Limits(max_sessions=7, max_message_bytes=1000)
    assert resolve_limits(base, Limits(max_sessions=9), None) == Limits(max_sessions=9)
    assert resolve_limits(base) is base


# -- max_sessions -----------------------------------------------------------------------------------


async def test_max_sessions_edge_new_fork_resume() -> None:
    async with connect_agent(ForkingAgent(), limits=Limits(max_sessions=2)) as client:
        await client.initialize()
        a = await client.new_session("/tmp")
        b = await client.new_session("/tmp")  # exactly N
        for attempt in (
            lambda: client.new_session("/tmp"),
            lambda: client.fork_session(a, "/tmp"),
        ):
            with pytest.raises(RequestError) as info:
                await attempt()
            limit_error(info, "max_sessions", 2)
        assert len(await client.list_sessions()) == 2  # nothing was created
        await client.resume_session(a, "/tmp")  # an active session takes no new slot
        await client.close_session(b)  # free one
        c = await client.new_session("/tmp")
        # b is held by the process but inactive: resuming it needs a slot
        with pytest.raises(RequestError) as info:
            await client.resume_session(b, "/var")
        limit_error(info, "max_sessions", 2)
        assert {s["sessionId"]: s["cwd"] for s in await client.list_sessions()}[b] == "/tmp"  # unchanged
        await client.close_session(c)
        await client.resume_session(b, "/tmp")
        await client.close_session(b)
        fork = await client.fork_session(a, "/tmp")
        assert fork not in (a, b, c)
        view = await client.prompt_and_wait(fork, "echo works")
        assert "works" in "".join(view.messages().values())


async def test_max_sessions_counts_only_client_sessions() -> None:
    async def spawn(session: Session, _: str) -> None:
        for n in range(3):
            child = await session.spawn_subagent(f"child {n}")
            agent.h.setdefault("children", []).append(child)

    agent = BgAgent(spawn=spawn)
    async with opened(agent, limits=Limits(max_sessions=1)) as (client, sid, _):
        await client.prompt_and_wait(sid, "spawn")
        assert len(agent.h["children"]) == 3
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        limit_error(info, "max_sessions", 1)


async def test_concurrent_session_new_cannot_overshoot() -> None:
    class SlowNew(ScriptedAgent):
        async def new_session(self, session: Session) -> None:
            await anyio.sleep(0.05)

    async with connect_agent(SlowNew(), limits=Limits(max_sessions=2)) as client:
        await client.initialize()
        results: list[Any] = []

        async def one() -> None:
            try:
                results.append(await client.new_session("/tmp"))
            except RequestError as exc:
                results.append(exc)

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one)
        assert sum(isinstance(r, str) for r in results) == 2
        assert [r.data for r in results if isinstance(r, RequestError)] == [{"limit": "max_sessions", "value": 2}] * 2


async def test_concurrent_session_new_cannot_overshoot_the_stored_quota() -> None:
    # Issue 39, finding 6: the stored-session quota was checked before the save, so 4 connections x 5 concurrent
    # session/new stored 10-13 sessions against a cap of 5; the check and the count are now one step.
    from acp_agent.store import MemoryStore

    class SlowNew(ScriptedAgent):
        async def new_session(self, session: Session) -> None:
            await anyio.sleep(0.05)

    store = MemoryStore()
    limits = Limits(max_principal_stored_sessions=5)
    results: list[Any] = []

    async def connection() -> None:
        async with connect_agent(SlowNew(), limits=limits, store=store) as client:
            await client.initialize()

            async def one() -> None:
                try:
                    results.append(await client.new_session("/tmp"))
                except RequestError as exc:
                    results.append(exc.data)

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(connection)
    assert sum(isinstance(r, str) for r in results) == 5
    assert len(await store.list_sessions(limit=100)) == 5
    refused = {"limit": "max_principal_stored_sessions", "value": 5}
    assert [r for r in results if not isinstance(r, str)] == [refused] * 15


# -- max_listed_items -------------------------------------------------------------------------------


async def test_max_listed_items_edge_start_tool_call() -> None:
    async def fill(session: Session, arg: str) -> None:
        tools = [await session.start_tool_call(f"job {n}", detach=True) for n in range(2)]  # exactly N
        agent.h["tools"] = tools
        with pytest.raises(LimitExceededError) as info:
            await session.start_tool_call("over-1", detach=True)
        refused(info, "max_listed_items", 2)
        with pytest.raises(LimitExceededError):
            await session.schedule(60, lambda: anyio.sleep(0))  # a pending wake-up is listed too
        foreground = await session.start_tool_call("fg", kind="read")  # foreground work is not listed
        await foreground.complete()
        await tools[0].complete()  # free one
        agent.h["again"] = await session.start_tool_call("again", detach=True)

    agent = BgAgent(fill=fill)
    async with opened(agent, limits=Limits(max_listed_items=2)) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "fill")
        assert view.stop_reason == "end_turn"
        assert not mentions(client, "over-1") and not mentions(client, "Wake up")
        assert sorted(items(snapshots(view.updates)[-1])) == sorted(
            [("tool_call", agent.h["tools"][1].id), ("tool_call", agent.h["again"].id)])
        assert max(len(s.get("background") or []) for s in snapshots(view.updates)) == 2
        assert_clean(client, sid)


async def test_max_listed_items_edge_detach_run_terminal_raw() -> None:
    async def fill(session: Session, arg: str) -> None:
        first = await session.start_tool_call("first", detach=True)
        held = await session.start_tool_call("held", status="in_progress")  # foreground: unlisted
        term = await session.start_terminal(["sleep", "30"], detach=True)  # the second listed item
        mark = len(client.transcript)
        with pytest.raises(LimitExceededError):
            held.detach()
        with pytest.raises(LimitExceededError):
            held.run(lambda tool: anyio.sleep(30))
        with pytest.raises(LimitExceededError):
            await session.start_terminal(["echo", "over-term"], detach=True)
        await session.start_terminal(["echo", "fg-term"], detach=False)  # foreground terminals are fine

        async def raw() -> None:  # background work announcing a raw tool call: listed, so refused
            with pytest.raises(LimitExceededError):
                await session.send(ToolCallUpdate(tool_call_id="raw_over", title="over-raw", status="pending"))
            agent.event("raw done").set()

        session.spawn(raw)
        await agent.event("raw done").wait()
        await flush(client, session)
        sent = [m for m in client.sent_by_agent()[mark:] if m.get("method") == "session/update"]
        assert all("over" not in repr(m) for m in sent), sent
        assert not held.detached and held.status == "in_progress"
        await term.cancel(grace=0)
        await term.wait()  # free one
        held.detach()  # now fits
        await held.complete()
        await first.complete()

    agent = BgAgent(fill=fill)
    async with opened(agent, limits=Limits(max_listed_items=2)) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "fill")
        assert view.stop_reason == "end_turn", view.updates
        assert max(len(s.get("background") or []) for s in snapshots(view.updates)) == 2
        assert view.background == []
        assert_clean(client, sid)


async def test_terminal_standing_for_a_listed_tool_call_takes_no_extra_slot() -> None:  # R88
    async def fill(session: Session, arg: str) -> None:
        tool = await session.start_tool_call("server", kind="execute", status="in_progress", detach=True)
        await session.start_tool_call("other", detach=True)
        # the list is full, but the terminal replaces its tool call in the list
        term = await session.start_terminal(["sleep", "30"], tool_call=tool, ends_tool_call=True, detach=True)
        agent.h.update(term=term, tool=tool)
        with pytest.raises(LimitExceededError):
            tool.own_scope()  # work of its own would list the tool call next to its terminal

    agent = BgAgent(fill=fill)
    async with opened(agent, limits=Limits(max_listed_items=2)) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "fill")
        assert view.stop_reason == "end_turn"
        assert ("terminal", agent.h["term"].id) in items(snapshots(view.updates)[-1])
        assert len(view.background or []) == 2
        await client.cancel_terminal(sid, agent.h["term"].id)
        term_id = agent.h["term"].id
        await client.wait_for(lambda: any(is_exit(term_id)(u) for u in view.updates))
        assert agent.h["tool"].status == "failed"  # ended with its process (SIGTERM)
        assert_clean(client, sid)


async def test_max_listed_items_edge_subagent_start() -> None:
    async def fill(session: Session, arg: str) -> None:
        children = [await session.spawn_subagent(f"child {n}") for n in range(3)]  # idle children: unlisted
        release = agent.event("release")

        async def busy(child: Session) -> StopReason:
            await release.wait()
            return "end_turn"

        children[0].start(busy)
        children[1].start(busy)  # exactly N busy children
        with pytest.raises(LimitExceededError) as info:
            children[2].start(busy)
        refused(info, "max_listed_items", 2)
        children[1].start(busy)  # already listed: more work for it takes no new slot
        agent.h["children"] = children

    agent = BgAgent(fill=fill)
    async with opened(agent, limits=Limits(max_listed_items=2)) as (client, sid, _):
        await client.prompt_and_wait(sid, "fill")
        children = agent.h["children"]
        assert children[2].session.state == "idle"
        agent.event("release").set()
        await client.wait_for(lambda: client.view(sid).background == [])
        children[2].start(lambda child: anyio.sleep(0))  # room again
        await client.wait_for(lambda: client.view(children[2].id).idle_count == 1)
        assert_clean(client, sid)


# -- max_processes ------------------------------------------------------------------------------------


async def test_max_processes_edge_across_sessions() -> None:
    async def start(session: Session, arg: str) -> None:
        agent.h.setdefault("terms", []).append(await session.start_terminal(["sleep", "30"], detach=True))

    async def over(session: Session, arg: str) -> None:
        with pytest.raises(LimitExceededError) as info:
            await session.start_terminal(["echo", "over-limit"], detach=True)
        refused(info, "max_processes", 2)
        missing = "/nonexistent/acp-agent-test"
        with pytest.raises(LimitExceededError):
            await session.start_terminal([missing])
        agent.h["refused"] = True

    async def again(session: Session, arg: str) -> None:
        with pytest.raises(ProcessStartError):
            await session.start_terminal(["/nonexistent/acp-agent-test"])  # a failed start frees its slot
        terminal = await session.start_terminal(["echo", "fits"])
        agent.h["status"] = await terminal.wait()

    agent = BgAgent(start=start, over=over, again=again)
    async with opened(agent, limits=Limits(max_processes=2)) as (client, a, _):
        b = await client.new_session("/tmp")
        await client.prompt_and_wait(a, "start")
        await client.prompt_and_wait(b, "start")  # exactly N, in two sessions
        view = await client.prompt_and_wait(b, "over")
        assert agent.h["refused"] and view.stop_reason == "end_turn"
        assert not mentions(client, "over-limit")
        first = agent.h["terms"][0]
        await client.cancel_terminal(a, first.id)  # free one
        await client.wait_for(lambda: any(is_exit(first.id)(u) for u in client.view(a).updates))
        view = await client.prompt_and_wait(b, "again")
        assert agent.h["status"].exit_code == 0
        assert b"fits" in next(bytes(t["output"]) for t in view.terminals.values() if t.get("command") == "echo fits")
        await client.close_session(b)  # closing a session frees its processes
        await client.prompt_and_wait(a, "start")
        await client.prompt_and_wait(a, "start")
        view = await client.prompt_and_wait(a, "over")
        assert view.stop_reason == "end_turn"
        for sid in (a,):
            assert_clean(client, sid)


async def test_max_processes_is_per_connection() -> None:
    async def start(session: Session, arg: str) -> None:
        agent.h.setdefault("terms", []).append(await session.start_terminal(["sleep", "30"], detach=True))

    agent = BgAgent(start=start)
    async with opened(agent, limits=Limits(max_processes=1)) as (first, a, _):
        await first.prompt_and_wait(a, "start")
        async with opened(agent, limits=Limits(max_processes=1)) as (second, b, _):
            view = await second.prompt_and_wait(b, "start")  # another connection has its own slots
            assert view.stop_reason == "end_turn"
    assert len(agent.h["terms"]) == 2


# -- terminal_output_bytes ----------------------------------------------------------------------------


def writer(size: int) -> list[str]:
    script = f"import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range({size})))"
    return [sys.executable, "-c", script]


async def test_terminal_output_bytes_edge() -> None:
    limit = 1000

    async def run(session: Session, arg: str) -> None:
        terminal = await session.start_terminal(writer(int(arg)), flush_bytes=64)
        await terminal.wait()
        agent.h[int(arg)] = terminal

    agent = BgAgent(run=run)
    async with opened(agent, limits=Limits(terminal_output_bytes=limit)) as (client, sid, _):
        for size in (limit, limit + 1, 5 * limit):
            view = await client.prompt_and_wait(sid, f"run {size}")
            expected = bytes(i % 251 for i in range(size))
            terminal = agent.h[size]
            assert bytes(view.terminals[terminal.id]["output"]) == expected  # the live stream has every byte
            assert terminal.tail() == expected[-limit:]  # the retained tail keeps the newest bytes
        mark = len(client.view(sid).updates)
        await client.resume_session(sid, "/tmp", replay=True)
        replayed = {u["terminalId"]: base64.b64decode(u["output"]["data"])
                    for u in client.view(sid).updates[mark:] if u["sessionUpdate"] == "terminal_update"}
        assert replayed[agent.h[limit].id] == bytes(i % 251 for i in range(limit))
        assert replayed[agent.h[limit + 1].id] == bytes(i % 251 for i in range(limit + 1))[1:]
        assert len(replayed[agent.h[5 * limit].id]) == limit
        assert_clean(client, sid)


async def test_tail_limit_argument_overrides_the_default() -> None:
    async def run(session: Session, arg: str) -> None:
        terminal = await session.start_terminal(writer(300), tail_limit=100)
        await terminal.wait()
        agent.h["tail"] = terminal.tail()

    agent = BgAgent(run=run)
    async with opened(agent) as (client, sid, _):
        await client.prompt_and_wait(sid, "run")
        assert agent.h["tail"] == bytes(i % 251 for i in range(300))[-100:]


async def test_fork_keeps_the_tail_limit() -> None:
    async def run(session: Session, arg: str) -> None:
        await (await session.start_terminal(writer(300))).wait()

    agent = ForkingBgAgent(run=run)
    async with opened(agent, limits=Limits(terminal_output_bytes=50)) as (client, sid, _):
        await client.prompt_and_wait(sid, "run")
        fork = await client.fork_session(sid, "/tmp")
        await client.resume_session(fork, "/tmp", replay=True)
        [replayed] = [u for u in client.view(fork).updates if u["sessionUpdate"] == "terminal_update"]
        assert base64.b64decode(replayed["output"]["data"]) == bytes(i % 251 for i in range(300))[-50:]


def test_limit_exceeded_error_is_exported() -> None:
    import acp_agent

    assert acp_agent.LimitExceededError is LimitExceededError and acp_agent.Limits is Limits
    assert issubclass(LimitExceededError, RuntimeError)
    assert ToolCall is acp_agent.ToolCall


# -- the testing factories ------------------------------------------------------------------------------


@pytest.mark.acp_agent(agent=ScriptedAgent, limits=Limits(max_sessions=1))
async def test_plugin_marker_passes_limits(acp_client: Client) -> None:
    await acp_client.new_session("/tmp")
    with pytest.raises(RequestError) as info:
        await acp_client.new_session("/tmp")
    limit_error(info, "max_sessions", 1)


async def test_acp_connect_passes_limits(acp_connect: Any) -> None:
    async with acp_connect(ScriptedAgent(), limits=Limits(max_sessions=1)) as client:
        await client.initialize()
        await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        limit_error(info, "max_sessions", 1)


async def test_spawn_agent_refuses_limits_it_cannot_apply() -> None:
    from acp_agent.testing.client import spawn_agent

    with pytest.raises(TypeError, match="run_stdio"):
        async with spawn_agent([sys.executable, "-c", "pass"], limits=Limits()):
            pass


RUN_STDIO_AGENT = """
from acp_agent import Agent, Limits, run_stdio

class Echo(Agent):
    async def prompt(self, session, prompt):
        await session.say("hi")
        return "end_turn"

run_stdio(Echo(), limits=Limits(max_sessions=1))
"""


async def test_run_stdio_takes_limits() -> None:
    from acp_agent.testing.client import spawn_agent

    async with spawn_agent([sys.executable, "-c", RUN_STDIO_AGENT]) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.new_session("/tmp")
        limit_error(info, "max_sessions", 1)
        await client.close_session(sid)
        await client.new_session("/tmp")
    assert client.returncode == 0


async def test_child_work_that_would_list_the_child_counts_in_the_parent() -> None:  # R90
    async def fill(session: Session, arg: str) -> None:
        child = await session.spawn_subagent("child")  # idle, nothing listed: not in the parent's list
        await session.start_tool_call("parent job", detach=True)  # the parent's list is full
        with pytest.raises(LimitExceededError) as info:
            await child.session.start_tool_call("over-child", detach=True)  # would make the child busy
        refused(info, "max_listed_items", 1)
        agent.h["child"] = child

    agent = BgAgent(fill=fill)
    async with opened(agent, limits=Limits(max_listed_items=1)) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "fill")
        assert view.stop_reason == "end_turn"
        assert not mentions(client, "over-child")
        assert len(view.background or []) == 1
        assert_clean(client, sid)


async def test_terminal_output_bytes_applies_to_raw_terminals_too() -> None:
    from acp_agent.schema import TerminalOutputChunk, TerminalUpdate

    async def raw(session: Session, arg: str) -> None:
        await session.send(TerminalUpdate(terminal_id="term_raw", command="remote", cwd="/tmp"))
        for piece in (b"a" * 6, b"b" * 5):
            await session.send(TerminalOutputChunk(terminal_id="term_raw", data=base64.b64encode(piece).decode()))
        await session.send(TerminalUpdate(terminal_id="term_raw", exit_status={"exitCode": 0}))

    agent = BgAgent(raw=raw)
    async with opened(agent, limits=Limits(terminal_output_bytes=10)) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "raw")
        assert bytes(view.terminals["term_raw"]["output"]) == b"aaaaaabbbbb"  # live: every byte
        mark = len(view.updates)
        await client.resume_session(sid, "/tmp", replay=True)
        [replayed] = [u for u in view.updates[mark:] if u["sessionUpdate"] == "terminal_update"]
        assert base64.b64decode(replayed["output"]["data"]) == b"aaaaabbbbb"  # retained: the newest 10
