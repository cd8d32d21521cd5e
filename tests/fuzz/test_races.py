"""Property test: client cancels, session cancels, closes, background completions and author
operations racing each other never break the wire rules, never lose a final status, and never
send anything for a session after its close answer.

Unlike ``test_background_properties`` (one operation at a time, the client acting only on what it
has seen), each example here is a list of *bursts*: the operations of a burst start together in
one task group, each after a random number of scheduling points (``anyio.lowlevel.checkpoint``),
so the client's requests, the author's moves and the ends of background work interleave in
orders the sequential test never produces. Runs on both anyio backends; judged from the wire by
the :class:`WireChecker` plus three end-state checks.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent import RequestError, SessionClosedError, ToolCallStateError
from acp_agent._util import processes
from acp_agent.records import SessionRecord
from acp_agent.schema import TerminalUpdate, ToolCallUpdate
from acp_agent.store import SessionStore, SqliteStore
from acp_agent.testing.checker import WireChecker
from acp_agent.testing.client import Client, connect_agent
from tests.helpers.properties import PropAgent

FINAL = frozenset({"completed", "failed", "cancelled"})

# Foreground scripts whose work always ends by itself (bodies and processes are short).
WORDS = ["say", "slow", "fg_complete", "fg_term", "fg_leave", "bg_body", "launch", "sched", "detach_mid", "crash"]
IDX = st.integers(0, 5)
OPERATION = st.one_of(
    st.tuples(st.just("prompt"), st.sampled_from(WORDS)),
    st.tuples(st.just("cancel")),
    st.tuples(st.just("tc_cancel"), IDX),
    st.tuples(st.just("term_cancel"), IDX),
    st.tuples(st.just("end"), IDX, st.sampled_from(["complete", "fail"])),
    st.tuples(st.just("bg"), st.sampled_from(["body", "raise", "term"])),
    st.tuples(st.just("close")),
)
# (scheduling points before the operation starts, the operation)
TIMED = st.tuples(st.integers(0, 6), OPERATION)
BURSTS = st.lists(st.lists(TIMED, min_size=1, max_size=4), min_size=2, max_size=7)


class RaceDriver:
    """Runs bursts of concurrent operations against one session."""

    def __init__(self, client: Client, agent: PropAgent, sid: str) -> None:
        self.client = client
        self.agent = agent
        self.sid = sid
        self.closed = False

    async def run(self, bursts: list[list[tuple[int, tuple[Any, ...]]]]) -> None:
        for burst in bursts:
            async with anyio.create_task_group() as tg:
                for points, op in burst:
                    tg.start_soon(self.one, points, op)

    async def one(self, points: int, op: tuple[Any, ...]) -> None:
        for _ in range(points):
            await anyio.lowlevel.checkpoint()
        try:
            await getattr(self, "op_" + op[0])(*op[1:])
        except (ToolCallStateError, SessionClosedError, RuntimeError):
            pass  # an illegal or late author move: refused in the author's code, nothing sent
        except RequestError as exc:
            # The client named something that ended, was never cancellable, or a closed session;
            # or the session closed while the request was in flight (-32800).
            assert exc.code in (-32602, -32002, -32800), exc

    @property
    def session(self) -> Any:
        return self.agent.sessions[self.sid]

    async def op_prompt(self, word: str) -> None:
        await self.client.prompt(self.sid, word)

    async def op_cancel(self) -> None:
        self.client.cancel(self.sid)

    # A client names only what it has seen on the wire (ids from its own view of the session).

    async def op_tc_cancel(self, i: int) -> None:
        seen = list(self.client.view(self.sid).tool_calls)
        if seen:
            await self.client.cancel_tool_call(self.sid, seen[i % len(seen)])

    async def op_term_cancel(self, i: int) -> None:
        seen = list(self.client.view(self.sid).terminals)
        if seen:
            await self.client.cancel_terminal(self.sid, seen[i % len(seen)])

    async def op_end(self, i: int, how: str) -> None:
        tools = [t for t in self.agent.tools if t.id not in self.agent.launchers]
        if tools:
            tool = tools[i % len(tools)]
            await (tool.complete() if how == "complete" else tool.fail())

    async def op_bg(self, what: str) -> None:
        session = self.session
        if what == "term":
            self.agent.terms.append(await session.start_terminal(["sleep", "0.03"], detach=True))
            return
        tool = await session.start_tool_call("background step", kind="other", detach=True)
        self.agent.tools.append(tool)
        self.agent.busy.add(tool.id)
        tool.run(self.agent.body("ok" if what == "body" else "raise"))

    async def op_close(self) -> None:
        self.closed = True
        await self.client.close_session(self.sid)


def dump(record: SessionRecord) -> list[Any]:
    """What a resume would show of ``record``: its metadata and its replay."""
    return [record.title, record.updated_at, record.data,
            *(item.model_dump(mode="json", by_alias=True, exclude_unset=True) for item in record.history.replay())]


def after_close(client: Client, sid: str) -> list[Any]:
    """Messages the agent sent about ``sid`` after answering its ``session/close``."""
    close_ids: set[Any] = set()
    closed = False
    late: list[Any] = []
    for entry in client.transcript:
        message = entry.message
        if not isinstance(message, dict):
            continue
        if entry.direction == "client->agent":
            if message.get("method") == "session/close" and message.get("params", {}).get("sessionId") == sid:
                close_ids.add(message.get("id"))
            continue
        if "method" not in message and message.get("id") in close_ids and "result" in message:
            closed = True
        elif closed and message.get("params", {}).get("sessionId") == sid:
            late.append(message)
    return late


async def race(bursts: list[list[tuple[int, tuple[Any, ...]]]], store: SessionStore | None = None) -> list[str]:
    """Run one example; return every problem found (empty when the wire is right).

    With a durable ``store``, the session it kept must also show every item ended.
    """
    problems: list[str] = []
    agent = PropAgent()
    sid = ""
    with anyio.fail_after(60):  # a hang anywhere, shutdown included, fails the example
        async with connect_agent(agent, check=False, store=store) as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            driver = RaceDriver(client, agent, sid)
            await driver.run(bursts)
            view = client.view(sid)
            if not driver.closed:
                # Everything the example started ends by itself: wait for the client to see it.
                # (A session that never had background work has never reported a list.)
                await client.wait_for(lambda: agent.sessions[sid].state == "idle" and view.state == "idle" and (
                    view.quiet or (view.background is None and not view.tool_calls and not view.terminals)),
                    timeout=20)
                # No lost final status: every tool call and terminal the client saw has ended.
                for tool_id, tool in view.tool_calls.items():
                    if tool.get("status") not in FINAL:
                        problems.append(f"tool call {tool_id} never got a final status: {tool}")
                for term_id, term in view.terminals.items():
                    if not term.get("exitStatus"):
                        problems.append(f"terminal {term_id} never reported its exit: {term}")
                await client.close_session(sid)
            await anyio.sleep(0.05)  # anything sent late would arrive now
    for process in (t.process for t in agent.terms if t.process is not None):
        if not process.exited:
            problems.append(f"process {process.pid} still running after close")
    left = []
    for pgid in sorted(processes._registered_groups):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, 0)  # succeeds for a live member and for an unreaped (zombie) one
            left.append(pgid)
    if left:
        problems.append(f"process groups left behind after the connection closed: {left}")
    problems += [f"sent after the close answer: {m}" for m in after_close(client, sid)]
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(client.transcript)
    checker.finish()
    problems += [str(v) for v in checker.violations]
    if store is not None:
        record = await store.load(sid)
        if record is None:
            problems.append("the closed session is not in the store")
        else:
            live = agent.sessions[sid]._core.record  # the record as the session left it
            if dump(record) != dump(live):
                problems.append(f"the stored session differs from the one closed: {dump(record)} != {dump(live)}")
            for item in record.history.replay():
                if isinstance(item, ToolCallUpdate) and item.status not in FINAL:
                    problems.append(f"stored tool call {item.tool_call_id} is not final: {item.status}")
                if isinstance(item, TerminalUpdate) and item.exit_status is None:
                    problems.append(f"stored terminal {item.terminal_id} has no exit status")
    return problems


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=int(os.environ.get("ACP_RACE_EXAMPLES", "40")), deadline=None, derandomize=True,
          database=None, suppress_health_check=[HealthCheck.too_slow])
@given(bursts=BURSTS)
def test_racing_cancels_closes_and_completions_keep_the_wire_rules(
    backend: str, bursts: list[list[tuple[int, tuple[Any, ...]]]]
) -> None:
    found: list[list[str]] = []

    async def main() -> None:
        found.append(await race(bursts))

    anyio.run(main, backend=backend)
    assert not found[0], "\n".join(found[0])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=int(os.environ.get("ACP_RACE_STORE_EXAMPLES", "12")), deadline=None, derandomize=True,
          database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(bursts=BURSTS)
def test_races_on_a_sqlite_store_keep_it_consistent(
    backend: str, tmp_path: Path, bursts: list[list[tuple[int, tuple[Any, ...]]]]
) -> None:
    found: list[list[str]] = []
    store = SqliteStore(tmp_path / "races.sqlite3")  # one file for every example: sessions pile up

    async def main() -> None:
        found.append(await race(bursts, store))
        await store.close()
        with sqlite3.connect(store.path) as db:
            if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                found[0].append(f"{store.path} is damaged")

    anyio.run(main, backend=backend)
    assert not found[0], "\n".join(found[0])


def test_the_race_judge_sees_a_message_after_close() -> None:
    """The after-close check has teeth: an update sent after the close answer is reported."""

    class Entry:
        def __init__(self, direction: str, message: Any) -> None:
            self.direction = direction
            self.message = message

    class Recorded:
        transcript = [
            Entry("client->agent", {"jsonrpc": "2.0", "id": 7, "method": "session/close",
                                    "params": {"sessionId": "s1"}}),
            Entry("agent->client", {"jsonrpc": "2.0", "id": 7, "result": {}}),
            Entry("agent->client", {"jsonrpc": "2.0", "method": "session/update",
                                    "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message"}}}),
        ]

    assert len(after_close(Recorded(), "s1")) == 1  # type: ignore[arg-type]
