"""Reading and judging the wire of agents run as subprocesses, shared by the end-to-end tests (``tests/e2e``).

Transcript readers (updates of one session, listed items, terminal output, turns), predicates for
``client.wait_for``, two judges over a whole transcript (:func:`wire_violations`, the ``WireChecker``;
:func:`listing_problems`, the background-list invariants) and checks on processes and process groups.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent.errors import RequestError
from acp_agent.testing.client import Client, SessionView, TranscriptEntry

ROOT = Path(__file__).resolve().parents[2]
FINAL = {"completed", "failed", "cancelled"}

Update = dict[str, Any]
Key = tuple[str, str]  # ("terminal", terminalId) or ("tool_call", toolCallId)


# -- judges -----------------------------------------------------------------------------------


def wire_violations(transcript: list[TranscriptEntry]) -> list[str]:
    """Violations found by ``acp_agent.testing.checker`` when it exists (it is optional here)."""
    try:
        from acp_agent.testing.checker import WireChecker
    except ImportError:
        return []
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(transcript)
    checker.finish()
    return [str(v) for v in checker.violations]


def listing_problems(transcript: list[TranscriptEntry]) -> list[str]:
    """Background-list invariants over a whole transcript, per session.

    R91: every snapshot carries a list; R93: listed items were announced first; R87/R94: an
    ended item is never listed, and an item leaves the list only after its end was reported;
    each item appears once.
    """
    problems: list[str] = []
    seen: dict[str, dict[str, Any]] = {}
    for index, update, session_id in _all_updates(transcript):
        s = seen.setdefault(session_id, {"announced": set(), "ended": set(), "listed": None})
        kind = update.get("sessionUpdate")
        if kind == "tool_call_update":
            s["announced"].add(("tool_call", update["toolCallId"]))
            if update.get("status") in FINAL:
                s["ended"].add(("tool_call", update["toolCallId"]))
        elif kind == "terminal_update":
            s["announced"].add(("terminal", update["terminalId"]))
            if update.get("exitStatus") is not None:
                s["ended"].add(("terminal", update["terminalId"]))
        elif kind == "state_update":
            background = update.get("background")
            if not isinstance(background, list):
                problems.append(f"#{index} {session_id}: state_update without a background list (R91): {update}")
                continue
            now = [_key(item) for item in background]
            if len(set(now)) != len(now):
                problems.append(f"#{index} {session_id}: an item is listed twice: {background}")
            for key in set(now) - s["announced"]:
                problems.append(f"#{index} {session_id}: {key} listed before it was announced (R93)")
            for key in set(now) & s["ended"]:
                problems.append(f"#{index} {session_id}: {key} listed after it ended (R87, R94)")
            for key in (s["listed"] or set()) - set(now) - s["ended"]:
                problems.append(f"#{index} {session_id}: {key} left the list without a final status/exit (R94)")
            s["listed"] = set(now)
    return problems


# -- reading the wire ------------------------------------------------------------------------


def _all_updates(transcript: list[TranscriptEntry], start: int = 0) -> Iterator[tuple[int, Update, str]]:
    for index in range(start, len(transcript)):
        entry = transcript[index]
        message = entry.message
        if entry.direction == "agent->client" and isinstance(message, dict) \
                and message.get("method") == "session/update":
            yield index, message["params"]["update"], message["params"]["sessionId"]


def updates(client: Client, sid: str, start: int = 0, stop: int | None = None) -> list[tuple[int, Update]]:
    """``(transcript index, update)`` of every update of session ``sid`` in ``[start, stop)``."""
    return [(i, u) for i, u, s in _all_updates(client.transcript, start) if s == sid and (stop is None or i < stop)]


def _key(item: dict[str, Any]) -> Key:
    return item["type"], item.get("terminalId") or item.get("toolCallId") or item.get("sessionId") or "?"


def listed(update: Update) -> set[Key]:
    """The items of a snapshot's ``background`` list (which must be there, R91)."""
    assert isinstance(update.get("background"), list), f"snapshot without a background list: {update}"
    return {_key(item) for item in update["background"]}


def is_state(update: Update) -> bool:
    return update.get("sessionUpdate") == "state_update"


def is_tool(tool_call_id: str, **fields: Any) -> Callable[[Update], bool]:
    return lambda u: u.get("sessionUpdate") == "tool_call_update" and u["toolCallId"] == tool_call_id and all(
        u.get(k) == v for k, v in fields.items())


def is_exit(terminal_id: str) -> Callable[[Update], bool]:
    return lambda u: u.get("sessionUpdate") == "terminal_update" and u["terminalId"] == terminal_id \
        and u.get("exitStatus") is not None


def not_listing(key: Key) -> Callable[[Update], bool]:
    return lambda u: is_state(u) and key not in listed(u)


async def wait_update(client: Client, sid: str, predicate: Callable[[Update], bool], *, since: int = 0,
                      timeout: float = 10.0) -> tuple[int, Update]:
    """The first update of ``sid`` at or after transcript index ``since`` that matches (waiting for it)."""
    found: list[tuple[int, Update]] = []

    def check() -> bool:
        found[:] = [(i, u) for i, u in updates(client, sid, since) if predicate(u)][:1]
        return bool(found)

    await client.wait_for(check, timeout)
    return found[0]


def terminal_output(client: Client, sid: str, terminal_id: str) -> bytes:
    """The terminal's bytes as a client would hold them (snapshots replace, chunks append)."""
    data = b""
    for _, u in updates(client, sid):
        if u.get("terminalId") != terminal_id:
            continue
        if u["sessionUpdate"] == "terminal_output_chunk":
            data += base64.b64decode(u["data"])
        elif u["sessionUpdate"] == "terminal_update" and "output" in u:
            data = base64.b64decode((u["output"] or {}).get("data", ""))
    return data


def tool_texts(client: Client, sid: str, tool_call_id: str, start: int = 0) -> list[tuple[int, str]]:
    """``(index, text)`` of the text content chunks appended to a tool call."""
    return [(i, u["content"]["content"]["text"]) for i, u in updates(client, sid, start)
            if u["sessionUpdate"] == "tool_call_content_chunk" and u["toolCallId"] == tool_call_id
            and u["content"].get("type") == "content"]


def statuses(pairs: list[tuple[int, Update]], tool_call_id: str) -> list[str]:
    """The statuses a tool call was given in these updates, in order."""
    return [u["status"] for _, u in pairs if is_tool(tool_call_id)(u) and "status" in u]


def capabilities(client: Client, sid: str, key: Key, stop: int | None = None) -> Any:
    """An item's ``capabilities`` as a client holds them after the updates before ``stop`` (replace-whole, R98)."""
    kind, item_id = key
    field = "terminalId" if kind == "terminal" else "toolCallId"
    value = None
    for _, u in updates(client, sid, 0, stop):
        if u["sessionUpdate"] == f"{kind}_update" and u[field] == item_id and "capabilities" in u:
            value = u["capabilities"]
    return value


def answer_index(client: Client, method: str, params: dict[str, Any]) -> int:
    """Transcript index of the agent's answer to the last ``method`` request sent with ``params``."""
    request_id = next(e.message["id"] for e in reversed(client.transcript) if e.direction == "client->agent"
                      and e.message.get("method") == method and e.message.get("params") == params)
    return next(i for i, e in enumerate(client.transcript) if e.direction == "agent->client"
                and "method" not in e.message and e.message.get("id") == request_id)


async def error_code(client: Client, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(RequestError) as caught:
        await client.request(method, params)
    return caught.value.code


@dataclass
class Turn:
    """One prompt turn: its updates from the prompt request up to its idle snapshot with a stop reason."""

    start: int
    end: int
    updates: list[tuple[int, Update]]

    @property
    def stop(self) -> Update:
        return self.updates[-1][1]

    def tool_call(self) -> Update:
        """The announcing update of the (first) tool call this turn created."""
        return next(u for _, u in self.updates if u["sessionUpdate"] == "tool_call_update" and "title" in u)

    def terminal(self) -> Update:
        """The announcing update of the (first) terminal this turn started."""
        return next(u for _, u in self.updates if u["sessionUpdate"] == "terminal_update" and "command" in u)

    def agent_texts(self) -> list[str]:
        return list(SessionView("", [u for _, u in self.updates]).messages().values())


async def turn(client: Client, sid: str, text: str, *, timeout: float = 10.0) -> Turn:
    """Send a prompt, wait for the idle that ends its work and check the turn's shape: running … idle end_turn."""
    start = len(client.transcript)
    await client.prompt_and_wait(sid, text, timeout)
    seen = updates(client, sid, start)
    end = next(i for i, u in seen if is_state(u) and u["state"] == "idle" and u.get("stopReason") is not None)
    seen = [(i, u) for i, u in seen if i <= end]
    states = [u for _, u in seen if is_state(u)]
    assert states[0]["state"] == "running", states
    assert states[-1]["stopReason"] == "end_turn", states
    assert any(u["sessionUpdate"] == "user_message" for _, u in seen)
    return Turn(start, end, seen)


def snapshots_between(client: Client, sid: str, start: int, stop: int | None = None) -> list[tuple[int, Update]]:
    return [(i, u) for i, u in updates(client, sid, start, stop) if is_state(u)]


# -- processes ---------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process from /proc, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[2])


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a member that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[1] == pgid and stat[0] not in ("Z", "X"):
                return True
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    if not os.path.isdir("/proc"):
        return True
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


async def wait_gone(alive: Callable[[int], bool], pid: int, timeout: float = 5.0) -> None:
    with anyio.move_on_after(timeout):
        while alive(pid):
            await anyio.sleep(0.05)
    assert not alive(pid), f"process (group) {pid} is still alive {timeout} s later"


async def start_pid_process(client: Client, sid: str, prompt: str, groups: list[int]) -> tuple[Turn, str, list[int]]:
    """Run a prompt whose command prints ``$$`` (and maybe more pids) first; returns the turn, terminal, pids."""
    t = await turn(client, sid, prompt)
    terminal_id = t.terminal()["terminalId"]
    await client.wait_for(lambda: b"\n" in terminal_output(client, sid, terminal_id))
    pids = [int(word) for word in terminal_output(client, sid, terminal_id).split(b"\n")[0].split()]
    groups.append(pids[0])
    assert group_alive(pids[0])
    return t, terminal_id, pids
