"""Property test: random author operations on background work never break the wire rules.

Hypothesis draws a list of operations; each example replays it against an in-process agent
through the public API only: tool calls started in the foreground or the background, bodies
run, paused, resumed, completed (with follow-up work), failed and cancelled, scheduled
wakeups, terminals with short commands, detaching, client ``tool_call/cancel`` and
``terminal/cancel`` (also for unknown and ended ids), prompts, ``session/cancel``,
resume, fork and close. Illegal moves raise :class:`ToolCallStateError` in the author's code
and are skipped. The judge is the independent :class:`WireChecker` over the whole
transcript (plus the local order judge, ``tests.helpers.background.order_problems``): it sees only the wire.

What the random mix deliberately avoids is listed in ``AVOIDED`` (known library bugs shown by
strict xfails in ``tests/unit/test_background.py``, and two approximations of the checker).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent import RequestError, Session, SessionClosedError, ToolCall, ToolCallStateError
from acp_agent._session.registry import BackgroundRegistry
from acp_agent.schema import BackgroundTerminal, BackgroundToolCall, BackgroundWork
from acp_agent.terminals import Terminal
from acp_agent.testing.checker import WireChecker
from acp_agent.testing.client import Client, connect_agent
from tests.helpers.background import order_problems
from tests.helpers.properties import OPTIONS, SCRIPTS, PropAgent, make_follow_up, noop

AVOIDED = """
- background terminals are started with detach=True: without it a terminal started by background
  work is not detached (strict xfail test_terminal_started_by_background_work_is_background_work);
  the two rarer races shown by test_cancel_while_a_turn_finalizes_sends_one_idle and
  test_follow_up_removal_is_not_folded_into_another_tasks_idle are not avoided, only made rarer
  by that (before it, a stress run of 1400 examples hit the first once and the second twice);
- a terminal is never attached to a tool call that runs a body, nor a body given to a tool call
  that shows a terminal: the checker judges R88 from content alone (a tool call whose content is
  only listed terminals) and cannot see that the body is work of its own;
- session/cancel is sent only while the client sees foreground work: the checker keeps an idle
  session/cancel open until the next snapshot and would blame a later author cancel of a listed
  tool call on it (R106).
"""

# -- operations ------------------------------------------------------------------------------

IDX = st.integers(0, 7)
MAYBE_UNKNOWN = st.integers(-1, 7)  # -1: an id the agent never used
MOVES = ["start", "pause", "resume", "complete", "fail", "cancel", "pending", "null", "append", "title",
         "follow_up"]

ARGUMENTS: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "bg_tool": st.tuples(st.sampled_from(["pending", "in_progress"]), st.sampled_from([None, True, False])),
    "run": st.tuples(IDX, st.sampled_from(["ok", "raise", "forever"]), st.booleans()),
    "move": st.tuples(IDX, st.sampled_from(MOVES)),
    "workflow": st.tuples(st.booleans()),
    "detach_tool": st.tuples(IDX),
    "handler": st.tuples(IDX, st.booleans()),
    "sched": st.tuples(st.sampled_from([0.005, 0.02, 0.05]), st.sampled_from([None, 0.03])),
    "bg_term": st.tuples(st.sampled_from(["echo", "sleep"]), st.booleans(), MAYBE_UNKNOWN, st.booleans()),
    "term_detach": st.tuples(IDX),
    "tc_cancel": st.tuples(MAYBE_UNKNOWN),
    "term_cancel": st.tuples(MAYBE_UNKNOWN),
    "perm": st.tuples(IDX),
    "prompt": st.tuples(st.sampled_from(sorted(SCRIPTS)), st.booleans()),
    "cancel": st.tuples(),
    "wait": st.tuples(st.sampled_from([0.0, 0.01, 0.03])),
    "resume": st.tuples(st.booleans()),
    "fork": st.tuples(),
}
WEIGHTS = {"move": 6, "bg_tool": 2, "workflow": 2, "run": 2, "prompt": 3, "tc_cancel": 2, "term_cancel": 2, "wait": 2}
KINDS = [kind for kind in ARGUMENTS for _ in range(WEIGHTS.get(kind, 1))]
OPERATION = st.sampled_from(KINDS).flatmap(lambda kind: ARGUMENTS[kind].map(lambda args: (kind, *args)))
Operation = tuple[Any, ...]
CLIENT_OPS = frozenset({"tc_cancel", "term_cancel", "prompt", "cancel", "resume", "fork", "close"})


class Driver:
    """Replays one operation list against one connection."""

    def __init__(self, client: Client, agent: PropAgent, sid: str) -> None:
        self.client = client
        self.agent = agent
        self.sid = sid
        self.sessions = [sid]
        self.illegal = 0
        self.refused: list[int] = []

    @property
    def session(self) -> Session:
        return self.agent.sessions[self.sid]

    def tool(self, i: int) -> ToolCall | None:
        tools = self.agent.tools
        return tools[i % len(tools)] if tools else None

    def term(self, i: int) -> Terminal | None:
        terms = self.agent.terms
        return terms[i % len(terms)] if terms else None

    def seen(self, key: str) -> set[Any]:
        """Ids (under ``key``: ``toolCallId`` / ``terminalId``) of the items the client got an update about.

        Client operations pick among these: a client only knows the ids it received. The agent's
        handles include items a turn or a follow-up announced after the last flush, still on their
        way; a cancel naming one would reach the wire before its announcement, and the judge could
        only call it a cancel for an unknown item (R102 / R104) that the agent rightly accepted.
        """
        return {u.get(key) for u in self.client.view(self.sid).updates}

    async def flush(self) -> None:
        """Let the client read everything the agent sent so far (a marker notice round trip).

        A client only acts on what it has seen: without this, a client request could be
        recorded ahead of agent updates that were already on their way.
        """
        session = self.session
        if session.closing:
            return
        title = f"marker-{next(_counter)}"
        await session.notice(title)
        view = self.client.view(self.sid)
        await self.client.wait_for(lambda: any(u.get("title") == title for u in view.updates))

    async def run(self, ops: list[Operation]) -> None:
        for op in ops:
            try:
                if op[0] in CLIENT_OPS:
                    await self.flush()
                await getattr(self, "op_" + op[0])(*op[1:])
            except ToolCallStateError:
                self.illegal += 1  # refused before anything was sent (the judge checks the wire)
            except (SessionClosedError, RuntimeError):
                pass  # the session is closed, or run() on a tool call that has work / ended
            except RequestError as exc:
                assert exc.code in (-32602, -32002), exc
                self.refused.append(exc.code)
        await anyio.sleep(0.08)
        with contextlib.suppress(SessionClosedError):
            await self.flush()
        for sid in self.sessions:
            await self.client.close_session(sid)

    # background author operations (the test task is not foreground work) -------------------

    async def op_bg_tool(self, status: str, detach: bool | None) -> None:
        # detach=None: background work starts background work (listed); False keeps it unlisted
        tool = await self.session.start_tool_call("job", kind="other", status=status, detach=detach)
        self.agent.tools.append(tool)

    async def op_workflow(self, pause: bool) -> None:
        """A listed workflow that started and (maybe) paused: paused work stays listed (R89)."""
        tool = await self.session.start_tool_call("workflow", kind="other", status="pending")
        self.agent.tools.append(tool)
        await tool.start()
        if pause:
            await tool.pause()

    async def op_run(self, i: int, mode: str, cancellable: bool) -> None:
        tool = self.tool(i)
        if tool is not None and tool.id not in self.agent.launchers:
            self.agent.busy.add(tool.id)
            tool.run(self.agent.body(mode), cancellable=cancellable)

    async def op_move(self, i: int, move: str) -> None:
        tool = self.tool(i)
        if tool is None:
            return
        if move == "pending":
            await tool.update(status="pending")
        elif move == "null":
            await tool.update(status=None)
        elif move == "append":
            await tool.append("progress")
        elif move == "title":
            await tool.update(title="renamed")
        elif move == "follow_up":
            await tool.complete(follow_up=make_follow_up(self.session))
        else:
            await getattr(tool, move)()

    async def op_detach_tool(self, i: int) -> None:
        tool = self.tool(i)
        if tool is not None and not tool.final:
            tool.detach()

    async def op_handler(self, i: int, on: bool) -> None:
        tool = self.tool(i)
        if tool is not None:
            await tool.set_cancel_handler(noop if on else None)

    async def op_sched(self, delay: float, repeat: float | None) -> None:
        tool = await self.session.schedule(delay, make_follow_up(self.session), repeat=repeat)
        self.agent.busy.add(tool.id)  # a timer is work of its own
        self.agent.tools.append(tool)


    async def op_bg_term(self, command: str, cancellable: bool, attach: int, ends_tool_call: bool) -> None:
        argv = ["echo", "x"] if command == "echo" else ["sleep", "0.05"]
        tool = self.tool(attach) if attach >= 0 else None
        if tool is not None and tool.id in self.agent.busy:
            tool = None
        if tool is not None:
            self.agent.launchers.add(tool.id)
        term = await self.session.start_terminal(argv, cancellable=cancellable, tool_call=tool, detach=True,
                                                 ends_tool_call=ends_tool_call and tool is not None)
        self.agent.terms.append(term)

    async def op_term_detach(self, i: int) -> None:
        term = self.term(i)
        if term is not None and term.exit_status is None and not self.session.closing:
            term.detach()

    async def op_perm(self, i: int) -> None:
        tool = self.tool(i)
        if tool is not None and tool.detached and not tool.final:
            await tool.request_permission("Go on?", OPTIONS)

    # client operations --------------------------------------------------------------------

    async def op_tc_cancel(self, i: int) -> None:
        seen = self.seen("toolCallId")
        tools = [tool for tool in self.agent.tools if tool.id in seen]
        tool = tools[i % len(tools)] if tools and i >= 0 else None
        await self.client.request("tool_call/cancel", {"sessionId": self.sid,
                                                       "toolCallId": tool.id if tool else "call_never"})

    async def op_term_cancel(self, i: int) -> None:
        seen = self.seen("terminalId")
        terms = [term for term in self.agent.terms if term.id in seen]
        term = terms[i % len(terms)] if terms and i >= 0 else None
        await self.client.request("terminal/cancel", {"sessionId": self.sid,
                                                      "terminalId": term.id if term else "term_never"})

    async def op_prompt(self, word: str, wait: bool) -> None:
        view = self.client.view(self.sid)
        before = view.idle_count
        await self.client.prompt(self.sid, word)
        if wait:
            await self.client.wait_idle(self.sid, before + 1)

    async def op_cancel(self) -> None:
        if self.client.view(self.sid).state == "idle":
            # Nothing to cancel. (The WireChecker keeps an idle session/cancel open until the next
            # snapshot, so a later author cancel of a listed item would be blamed on it: R106.)
            return
        self.client.cancel(self.sid)
        # let the cancelled work end before the next author move (so the judge can tell an author's
        # own cancel from one caused by session/cancel)
        await self.client.wait_for(lambda: self.session.state == "idle" and self.client.view(self.sid).state == "idle")

    async def op_wait(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    async def op_resume(self, replay: bool) -> None:
        params: dict[str, Any] = {"sessionId": self.sid, "cwd": "/tmp"}
        if replay:
            params["replayFrom"] = {"type": "start"}
        await self.client.request("session/resume", params)

    async def op_fork(self) -> None:
        fork = (await self.client.request("session/fork", {"sessionId": self.sid, "cwd": "/tmp"}))["sessionId"]
        self.sessions.append(fork)
        await self.client.prompt_and_wait(fork, "say")

    async def op_close(self) -> None:
        await self.client.close_session(self.sid)


# -- the judge -------------------------------------------------------------------------------


def judge(client: Client, sessions: list[str]) -> list[tuple[str, str]]:
    """Every rule the wire breaks, as ``(rule, explanation)``: the WireChecker's findings plus
    the local order judge's (``tests.helpers.background.order_problems``)."""
    # R74 is left out: with a replaying resume racing live updates, the checker (which forgets
    # every tool call at the resume request) takes a live patch sent just before the replay for
    # a first announcement without a title. start_tool_call always sends a title.
    checker = WireChecker(raise_on_violation=False, ignore={"R74"})
    checker.feed_transcript(client.transcript)
    checker.finish()
    problems = [(v.rule, str(v)) for v in checker.violations]
    for sid in sessions:
        for lifetime in lifetimes(client, sid):
            problems += [(p.split(" ", 1)[0], f"{sid}: {p}") for p in order_problems(lifetime)]
    return problems


def lifetimes(client: Client, sid: str) -> list[list[dict[str, Any]]]:
    """The session's updates, split at each close answer (a closed session's list is void)."""
    out: list[list[dict[str, Any]]] = [[]]
    closing: set[Any] = set()
    for entry in client.transcript:
        message = entry.message
        if entry.direction == "client->agent":
            if message.get("method") == "session/close" and message["params"].get("sessionId") == sid:
                closing.add(message["id"])
        elif message.get("method") == "session/update" and message["params"]["sessionId"] == sid:
            out[-1].append(message["params"]["update"])
        elif "method" not in message and message.get("id") in closing:
            closing.discard(message["id"])
            out.append([])
    return out


def explain(problems: list[tuple[str, str]]) -> str:
    return "\n".join(text for _, text in problems)


# The judge below is the authority here (it leaves out R74, see ``judge``): the client's own
# end-of-connection check, where the client has one, is switched off.
_UNCHECKED: dict[str, Any] = {"check": False} if "check" in inspect.signature(Client.__init__).parameters else {}


async def replay(ops: list[Operation]) -> tuple[Client, Driver]:
    agent = PropAgent()
    async with connect_agent(agent, **_UNCHECKED) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        driver = Driver(client, agent, sid)
        with anyio.fail_after(30):
            await driver.run(ops)
    # close stopped everything: bodies cancelled, processes gone (R111)
    assert agent.forever_stopped == agent.forever_started
    for term in agent.terms:
        assert term.process is None or term.process.exited
        if term.process is not None:
            with pytest.raises(ProcessLookupError):
                os.kill(term.process.pid, 0)
    return client, driver


def _run(backend: str, ops: list[Operation]) -> tuple[Client, Driver]:
    result: list[tuple[Client, Driver]] = []

    async def main() -> None:
        result.append(await replay(ops))

    anyio.run(main, backend=backend)
    return result[0]


_stats = {"examples": 0, "ops": 0, "illegal": 0, "refused": 0, "messages": 0}
"""Totals over the examples run (handy when tuning the operation mix)."""
_counter = itertools.count()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPERATION, min_size=8, max_size=30), close_at=st.none() | st.integers(0, 30))
def test_random_background_work_keeps_the_wire_rules(backend: str, ops: list[Operation],
                                                     close_at: int | None) -> None:
    if close_at is not None:  # session/close mid-way; later operations meet a closed session (or resume it)
        ops = [*ops[:close_at], ("close",), *ops[close_at:]]
    client, driver = _run(backend, ops)
    problems = judge(client, driver.sessions)
    assert not problems, explain(problems)
    _stats["examples"] += 1
    _stats["illegal"] += driver.illegal
    _stats["refused"] += len(driver.refused)
    _stats["messages"] += len(client.transcript)
    _stats["ops"] += len(ops)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_client_cancels_name_only_items_the_client_has_seen(backend: str) -> None:
    """A terminal and a tool call announced by another task (as a turn or a follow-up would) that the
    client has not read yet: the client's cancels cannot name them (it does not know their ids), and
    once it has read them (the flush before every client operation), it cancels them and the agent
    accepts. Picking among the agent's handles instead sent a cancel ahead of the announcement, which
    the judge can only call R104 / R102 (an unknown item)."""

    async def main() -> None:
        agent = PropAgent()
        async with connect_agent(agent, **_UNCHECKED) as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            driver = Driver(client, agent, sid)
            session = agent.sessions[sid]

            async def cancel_unseen(op: str, key: str, item_id: str) -> None:
                assert item_id not in driver.seen(key)  # the announcement is still on its way
                with pytest.raises(RequestError) as refused:
                    await getattr(driver, "op_" + op)(0)
                assert refused.value.code == -32602  # it named "..._never", not the unseen item

            term = await session.start_terminal(["sleep", "30"], detach=True)
            agent.terms.append(term)
            await cancel_unseen("term_cancel", "terminalId", term.id)
            tool = await session.start_tool_call("job", kind="other", status="in_progress", detach=True)
            await tool.set_cancel_handler(noop)
            agent.tools.append(tool)
            await cancel_unseen("tc_cancel", "toolCallId", tool.id)
            await driver.run([("term_cancel", 0), ("tc_cancel", 0)])  # flushed first: both accepted
            assert driver.refused == []
        problems = judge(client, driver.sessions)
        assert not problems, explain(problems)
        assert term.exit_status is not None and term.exit_status.signal == "SIGTERM"

    anyio.run(main, backend=backend)


# -- the judge has teeth ----------------------------------------------------------------------


FIXED_SCRIPT: list[Operation] = [
    ("bg_tool", "in_progress", True),  # tool 0: listed
    ("bg_tool", "in_progress", None),  # tool 1: listed (background work starts background work), given a body
    ("run", 1, "forever", True),
    ("prompt", "fg_leave", True),      # tool 2: foreground (never listed), finalized at the end of its turn
    ("move", 0, "pause"),              # paused work stays listed ...
    ("bg_term", "sleep", True, -1, False),  # ... in the snapshot this new terminal triggers
    ("sched", 0.05, None),             # tool 3: pending, listed until it fires
    ("wait", 0.15),                    # the terminal exits, the wakeup fires (its follow-up turn runs)
    ("tc_cancel", 1),                  # the body is cancelled: final, then dropped
    ("move", 0, "complete"),
    ("wait", 0.02),
]


def _broken_listings() -> dict[str, Callable[[BackgroundRegistry], list[BackgroundWork]]]:
    def everything(self: BackgroundRegistry) -> list[BackgroundWork]:
        """Lists every terminal and tool call it knows: foreground, unannounced and ended ones too."""
        out: list[BackgroundWork] = []
        for entity in self.entities.values():
            if entity.kind == "terminal":
                out.append(BackgroundTerminal(terminal_id=entity.id))
            elif entity.kind == "tool_call":
                out.append(BackgroundToolCall(tool_call_id=entity.id))
        return out

    def forgetful(self: BackgroundRegistry) -> list[BackgroundWork]:
        """Drops paused and pending tool calls (live work vanishes without a final status)."""
        return [item for item in original(self) if not (
            isinstance(item, BackgroundToolCall)
            and (entity := self.get("tool_call", item.tool_call_id)) is not None
            and entity.status in ("pending", "paused"))]

    def forgets_exits(self: BackgroundRegistry) -> list[BackgroundWork]:
        """Keeps listing exited terminals and ended tool calls that were ever listed (never removes)."""
        seen: list[BackgroundWork] = self.__dict__.setdefault("_ever", [])
        for item in original(self):
            if item not in seen:
                seen.append(item)
        return list(seen)

    def phantom(self: BackgroundRegistry) -> list[BackgroundWork]:
        """Names a tool call that was never announced."""
        return [*original(self), BackgroundToolCall(tool_call_id="call_phantom")]

    original = BackgroundRegistry.listing
    return {"everything": everything, "forgetful": forgetful, "forgets_exits": forgets_exits, "phantom": phantom}


@pytest.mark.parametrize(("variant", "expected"), [
    ("everything", {"R87"}),        # foreground and ended tool calls listed
    ("forgetful", {"R89", "R94"}),  # a paused tool call dropped without a final status
    ("forgets_exits", {"R87"}),     # an exited terminal and ended tool calls kept in the list
    ("phantom", {"R93"}),           # an item listed that was never announced
])
def test_the_judge_catches_a_broken_registry(monkeypatch: pytest.MonkeyPatch, variant: str,
                                             expected: set[str]) -> None:
    client, driver = _run("asyncio", FIXED_SCRIPT)
    assert judge(client, driver.sessions) == []  # the real registry passes the fixed script
    monkeypatch.setattr(BackgroundRegistry, "listing", _broken_listings()[variant])
    client, driver = _run("asyncio", FIXED_SCRIPT)
    problems = judge(client, driver.sessions)
    assert expected <= {rule for rule, _ in problems}, explain(problems)
