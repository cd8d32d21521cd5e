"""Tool calls and agent terminals as a v1 client sees them.

v1 has no agent-owned terminals, so a terminal's output is shown as a text block inside the
tool calls it belongs to (a terminal of its own gets a made-up tool call named after its
command). `emit` is the one place a tool call reaches the client: the first time as a
``tool_call`` with every field, afterwards as a ``tool_call_update`` with only the fields that
changed, and nothing when nothing did. A tool call handed off to a still-running terminal stays
``in_progress`` until that terminal exits.

v1 content replaces the whole list, so every update of a running terminal resends its output:
output is paced (at most one update per `TERMINAL_INTERVAL` per terminal, the rest held until
`flush_terminals` or the next update; the exit always at once) and a running terminal shows only
its last `LIVE_TAIL` characters.
"""

from __future__ import annotations

from typing import Any, Final

from .async_tasks import task_pause
from .convert import b64, v1_tool_content
from .messages import Message, notify
from .state import TERMINAL_INTERVAL, Session, TerminalShown, Tool, TranslatorState

__all__ = [
    "V1_STATUSES", "emit", "flush_terminals", "terminal_due", "terminal_output", "terminal_update", "tool_chunk",
    "tool_update",
]

V1_STATUSES: Final = frozenset({"pending", "in_progress", "completed", "failed"})
"""The tool call statuses v1 knows."""
_FINAL: Final = ("completed", "failed", "cancelled")


def tool_update(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    """A v2 ``tool_call_update``: merged into the tool call, then emitted (and its AIR task paused or resumed)."""
    tool_id = str(update.get("toolCallId"))
    tool = session.tools.get(tool_id)
    if tool is None:
        tool = session.tools[tool_id] = Tool(tool_id)
    was_final = tool.status in _FINAL
    for key in ("title", "kind"):
        if isinstance(update.get(key), str):
            setattr(tool, key, update[key])
    if isinstance(update.get("status"), str):
        tool.status = update["status"]
    for key in ("locations", "rawInput", "rawOutput"):
        if key in update:
            if update[key] is None:
                tool.fields.pop(key, None)
            else:
                tool.fields[key] = update[key]
    if "content" in update:
        tool.content = []
        for item in update.get("content") or []:
            _add_content(session, tool, item)
    if not was_final and tool.status in _FINAL:
        tool.handed_off = {t for k, t in tool.content if k == "terminal"
                           and session.terminals.get(t, TerminalShown(t)).exit is None}
    out = emit(session, tool)
    if state.air:
        out.extend(task_pause(session, tool))
    return out


def tool_chunk(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    """A v2 ``tool_call_content_chunk``: appended, and the whole content list emitted (v1 replaces content)."""
    tool = session.tools.get(str(update.get("toolCallId")))
    if tool is None or not isinstance(update.get("content"), dict):
        return []
    _add_content(session, tool, update["content"])
    return emit(session, tool)


def _add_content(session: Session, tool: Tool, item: Any) -> None:
    if not isinstance(item, dict):
        return
    if item.get("type") == "terminal":
        terminal_id = str(item.get("terminalId"))
        terminal = session.terminals.setdefault(terminal_id, TerminalShown(terminal_id))
        if tool.tool_call_id not in terminal.tools:
            terminal.tools.append(tool.tool_call_id)
        tool.content.append(("terminal", terminal_id))
        return
    tool.content.extend(("v1", c) for c in v1_tool_content(item))


def terminal_update(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    """A v2 ``terminal_update`` (command, output snapshot, exit): the tool calls showing it are emitted."""
    terminal_id = str(update.get("terminalId"))
    terminal = session.terminals.setdefault(terminal_id, TerminalShown(terminal_id))
    if isinstance(update.get("command"), str):
        terminal.command = update["command"]
    output = update.get("output")
    if isinstance(output, dict) and isinstance(output.get("data"), str):
        terminal.text, terminal.truncated = "", bool(output.get("truncated"))
        terminal.append(b64(output["data"]))
    if isinstance(update.get("exitStatus"), dict):
        terminal.exit = update["exitStatus"]
        terminal.append(b"")
        return _terminal_changed(state, session, terminal)
    return _paced(state, session, terminal) if output is not None else []


def terminal_output(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    """A v2 ``terminal_output_chunk``: appended, and the tool calls showing the terminal emitted (paced)."""
    terminal = session.terminals.setdefault(str(update.get("terminalId")), TerminalShown(str(update.get("terminalId"))))
    if isinstance(update.get("data"), str):
        terminal.append(b64(update["data"]))
    return _paced(state, session, terminal)


def _paced(state: TranslatorState, session: Session, terminal: TerminalShown) -> list[Message]:
    """New output of a running terminal: shown now, or held until `TERMINAL_INTERVAL` after the last showing."""
    if terminal.shown_at is not None and state.clock() - terminal.shown_at < TERMINAL_INTERVAL:
        terminal.pending = True
        return []
    return _terminal_changed(state, session, terminal)


def terminal_due(state: TranslatorState) -> float | None:
    """When held terminal output is next due (the clock's seconds), or ``None`` when none is held."""
    due = [t.shown_at + TERMINAL_INTERVAL for s in state.sessions.values() for t in s.terminals.values()
           if t.pending and t.shown_at is not None]
    return min(due) if due else None


def flush_terminals(state: TranslatorState) -> list[Message]:
    """The updates of every terminal whose held output is due."""
    now = state.clock()
    out: list[Message] = []
    for session in list(state.sessions.values()):
        for terminal in list(session.terminals.values()):
            if terminal.pending and (terminal.shown_at is None or now - terminal.shown_at >= TERMINAL_INTERVAL):
                out.extend(_terminal_changed(state, session, terminal))
    return out


def _terminal_changed(state: TranslatorState, session: Session, terminal: TerminalShown) -> list[Message]:
    if not terminal.tools:  # a terminal of its own: shown as a tool call named after its command
        tool = Tool(terminal.terminal_id, title=terminal.command or "Terminal", kind="execute",
                    status="in_progress", synthetic=True)
        tool.content.append(("terminal", terminal.terminal_id))
        session.tools.setdefault(tool.tool_call_id, tool)
        terminal.tools.append(tool.tool_call_id)
    out: list[Message] = []
    for tool_id in terminal.tools:
        linked = session.tools.get(tool_id)
        if linked is not None:
            if linked.synthetic and terminal.exit is not None:
                linked.status = "failed" if terminal.failed else "completed"
            out.extend(emit(session, linked))
    terminal.shown_at = state.clock()
    return out


def _v1_status(session: Session, tool: Tool) -> str:
    status = tool.status
    if status in _FINAL and tool.handed_off:
        terminals = [session.terminals.get(t) for t in tool.handed_off]
        if any(t is not None and t.exit is None for t in terminals):
            return "in_progress"  # handed off to a process that still runs: its exit decides
        if status == "completed" and any(t is not None and t.failed for t in terminals):
            return "failed"
    if status == "cancelled":
        return "failed"
    return status if status in V1_STATUSES else "in_progress"


def emit(session: Session, tool: Tool) -> list[Message]:
    """What the client gets for the tool call's current state: ``tool_call`` first, then only what changed."""
    fields: dict[str, Any] = {
        "title": tool.title or tool.tool_call_id,
        "status": _v1_status(session, tool),
        "content": [item for k, v in tool.content if (item := _render(session, k, v)) is not None],
        **tool.fields,
    }
    if tool.kind is not None:
        fields["kind"] = tool.kind
    if tool.sent is None:
        tool.sent = fields
        return [notify(session.session_id, {"sessionUpdate": "tool_call", "toolCallId": tool.tool_call_id,
                                            **fields})]
    changed = {k: v for k, v in fields.items() if tool.sent.get(k) != v}
    for key in tool.sent.keys() - fields.keys():
        changed[key] = None
    tool.sent = fields
    if not changed:
        return []
    return [notify(session.session_id, {"sessionUpdate": "tool_call_update", "toolCallId": tool.tool_call_id,
                                        **changed})]


def _render(session: Session, kind: str, value: Any) -> dict[str, Any] | None:
    """One content item as v1 shows it; ``None`` for a terminal with nothing to show yet (no empty block)."""
    if kind == "terminal":
        terminal = session.terminals.get(value) or TerminalShown(value)
        terminal.pending = False  # what is held is in this update
        text = terminal.render()
        return {"type": "content", "content": {"type": "text", "text": text}} if text else None
    return dict(value)
