"""The in-process background-work test agent and its wire judges, shared by the unit tests.

:class:`BgAgent` runs the scenario registered under the prompt's first word, through the public handle
API only; :func:`opened` connects the in-memory client to it and opens a session. The rest reads one
session's updates: snapshots, listed items, predicates for ``client.wait_for``, :func:`flush` (everything
sent so far has arrived) and two judges, :func:`order_problems` (local, R87-R97) and :func:`wire_violations`
(the ``WireChecker``), combined by :func:`assert_clean`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from acp_agent import Agent, ContentBlock, Session, TextContent
from acp_agent.session import StopReason
from acp_agent.testing.checker import WireChecker
from acp_agent.testing.client import Client, connect_agent

FINAL = frozenset({"completed", "failed", "cancelled"})
Scenario = Callable[[Session, str], Awaitable[StopReason | None]]


class BgAgent(Agent):
    """Runs the scenario registered under the prompt's first word (the rest is its argument).

    Scenarios keep handles in ``self.h``, progress in ``self.log`` and coordinate with the
    test through named events (``self.event(name)``).
    """

    name = "bg-test"

    def __init__(self, **scenarios: Scenario) -> None:
        self.scenarios = dict(scenarios)
        self.sessions: dict[str, Session] = {}
        self.log: list[Any] = []
        self.h: dict[str, Any] = {}
        self._events: dict[str, anyio.Event] = {}

    def event(self, name: str) -> anyio.Event:
        found = self._events.get(name)
        if found is None:
            found = self._events[name] = anyio.Event()
        return found

    async def new_session(self, session: Session) -> None:
        self.sessions[session.id] = session

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason | None:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        word, _, rest = text.partition(" ")
        return await self.scenarios[word](session, rest)


class ForkingBgAgent(BgAgent):
    """Also implements fork (so ``session.fork`` is advertised)."""

    async def fork_session(self, source: Session, session: Session) -> None:
        self.sessions[session.id] = session


@asynccontextmanager
async def opened(agent: BgAgent, **options: Any) -> AsyncIterator[tuple[Client, str, Session]]:
    async with connect_agent(agent, **options) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        yield client, sid, agent.sessions[sid]


def agent_wire(client: Client) -> list[dict[str, Any]]:
    return [e.message for e in client.transcript if e.direction == "agent->client"]


def snapshots(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "state_update"]


def items(snapshot: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for item in snapshot.get("background") or []:
        key = {"terminal": "terminalId", "tool_call": "toolCallId", "subagent": "sessionId"}[item["type"]]
        out.append((item["type"], item[key]))
    return out


def tool_updates(updates: list[dict[str, Any]], tool_call_id: str) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == tool_call_id]


def statuses(updates: list[dict[str, Any]], tool_call_id: str) -> list[str]:
    return [u["status"] for u in tool_updates(updates, tool_call_id) if "status" in u]


def first_index(updates: list[dict[str, Any]], predicate: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, u in enumerate(updates) if predicate(u))


def is_listing(kind: str, item_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda u: u["sessionUpdate"] == "state_update" and (kind, item_id) in items(u)


def is_final(tool_call_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda u: (u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == tool_call_id
                      and u.get("status") in FINAL)


def is_update(tag: str, key: str, item_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda u: u["sessionUpdate"] == tag and u.get(key) == item_id


def is_exit(terminal_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda u: (u["sessionUpdate"] == "terminal_update" and u["terminalId"] == terminal_id
                      and u.get("exitStatus") is not None)


_markers = itertools.count()


async def flush(client: Client, session: Session) -> dict[str, Any]:
    """Send a marker notice and wait for it: everything the agent sent before it has arrived."""
    title = f"marker-{next(_markers)}"
    await session.notice(title)
    view = client.view(session.id)
    await client.wait_for(lambda: any(u.get("title") == title for u in view.updates))
    return next(u for u in view.updates if u.get("title") == title)


def order_problems(updates: list[dict[str, Any]], *, strict_r88: bool = False) -> list[str]:
    """A small wire judge over one session's updates: R87/R88/R89, R91, R93, R94, R97.

    Used as a cross-check inside the rule tests; judged from the wire alone.
    """
    problems: list[str] = []
    tools: dict[str, dict[str, Any]] = {}
    exited: dict[str, bool] = {}
    children: set[str] = set()
    reporting = False
    last: list[tuple[str, str]] = []
    for n, u in enumerate(updates):
        tag = u["sessionUpdate"]
        if tag == "tool_call_update":
            first = u["toolCallId"] not in tools
            tool = tools.setdefault(u["toolCallId"], {"status": "pending", "started": False, "terminals": set()})
            if tool["status"] in FINAL and "status" in u and u["status"] != tool["status"]:
                problems.append(f"R97 #{n}: {u['toolCallId']} went from {tool['status']} to {u['status']}")
            if "status" in u:
                new = u["status"] or "pending"
                if new == "pending" and tool["started"]:
                    problems.append(f"R97 #{n}: {u['toolCallId']} went back to pending")
                if new == "paused" and not tool["started"] and not first:
                    problems.append(f"R97 #{n}: {u['toolCallId']} paused before it started")
                tool["status"] = new
                tool["started"] |= new != "pending"
            if "content" in u:
                tool["terminals"] = {c["terminalId"] for c in u["content"] or [] if c.get("type") == "terminal"}
        elif tag == "tool_call_content_chunk":
            chunked = tools.get(u["toolCallId"])
            if chunked is not None and chunked["status"] in FINAL:
                problems.append(f"R97 #{n}: content appended to final {u['toolCallId']}")
            if chunked is not None and u["content"].get("type") == "terminal":
                chunked["terminals"].add(u["content"]["terminalId"])
        elif tag == "terminal_update":
            if "exitStatus" in u:
                exited[u["terminalId"]] = u["exitStatus"] is not None
            else:
                exited.setdefault(u["terminalId"], False)
        elif tag == "subagent_update":
            children.add(u["sessionId"])
        elif tag == "state_update":
            background = u.get("background")
            if not isinstance(background, list):
                if reporting:
                    problems.append(f"R91 #{n}: snapshot without background after reporting began")
                continue
            reporting = True
            now = items(u)
            if len(set(now)) != len(now):
                problems.append(f"R88 #{n}: an item is listed twice: {now}")
            listed_terminals = {i for k, i in now if k == "terminal"}
            for kind, item_id in now:
                if kind == "tool_call":
                    listed_tool = tools.get(item_id)
                    if listed_tool is None:
                        problems.append(f"R93 #{n}: tool call {item_id} listed before it was announced")
                    elif listed_tool["status"] in FINAL:
                        problems.append(f"R87 #{n}: tool call {item_id} listed after it ended")
                    elif strict_r88 and listed_tool["terminals"] & listed_terminals:
                        problems.append(f"R88 #{n}: tool call {item_id} listed next to its terminal")
                elif kind == "terminal":
                    if item_id not in exited:
                        problems.append(f"R93 #{n}: terminal {item_id} listed before it was announced")
                    elif exited[item_id]:
                        problems.append(f"R87 #{n}: terminal {item_id} listed after it exited")
                elif kind == "subagent" and item_id not in children:
                    problems.append(f"R93 #{n}: child {item_id} listed before it was announced")
            for kind, item_id in last:
                if (kind, item_id) in now:
                    continue
                if kind == "tool_call":
                    tool = tools[item_id]
                    covered = tool["terminals"] & listed_terminals
                    if tool["status"] not in FINAL and not covered:
                        problems.append(f"R94 #{n}: live tool call {item_id} ({tool['status']}) dropped")
                elif kind == "terminal" and not exited.get(item_id):
                    problems.append(f"R94 #{n}: running terminal {item_id} dropped")
            last = now
    return problems


def wire_violations(client: Client) -> list[str]:
    """What the independent wire checker finds in the whole transcript so far."""
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(client.transcript)
    checker.finish()
    return [str(v) for v in checker.violations]


def assert_clean(client: Client, sid: str) -> None:
    """Both judges agree the wire is clean: the local order judge and the WireChecker."""
    problems = order_problems(client.view(sid).updates) + wire_violations(client)
    assert not problems, "\n".join(problems)
