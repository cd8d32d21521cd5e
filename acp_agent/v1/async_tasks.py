"""JetBrains AIR async tasks: the v2 ``background`` list projected onto AIR's task updates.

Only for a client that declared AIR's ``asyncTasks`` (the callers check). Each ``tool_call`` or
``terminal`` item is announced once with ``async_task_spawned`` when it enters the list, and
gets exactly one final ``async_task_state_update`` when it leaves it; a tool call going to
``paused`` and back sends ``paused`` / ``running`` in between. Task id = tool call id or
terminal id. The format is summarised in ``docs/v1-bridge.md``.
"""

from __future__ import annotations

from typing import Any

from .messages import Message, notify
from .state import Session, Tool

__all__ = ["project_tasks", "running_task", "task_pause"]

_LIVE = ("running", "paused")
"""Task states that have not ended (a stop request reaches them)."""


def running_task(session: Session, task_id: Any) -> tuple[str, str] | None:
    """The (kind, id) of the live task ``task_id`` names in the session, if any."""
    for (kind, item_id), state in session.tasks.items():
        if item_id == task_id and state in _LIVE:
            return kind, item_id
    return None


def project_tasks(session: Session, background: list[Any]) -> list[Message]:
    """Updates for a new ``background`` list: tasks spawned for new items, final states for items gone."""
    listed: list[tuple[str, str]] = []
    for item in background:
        if not isinstance(item, dict) or item.get("type") not in ("tool_call", "terminal"):
            continue
        kind = str(item["type"])
        listed.append((kind, str(item.get("toolCallId") if kind == "tool_call" else item.get("terminalId"))))
    out: list[Message] = []
    for key in listed:
        if key not in session.tasks:
            session.tasks[key] = "running"
            out.append(notify(session.session_id, _spawned(session, key)))
    for key, state in list(session.tasks.items()):
        if key not in listed and state in _LIVE:
            final = _final_state(session, key)
            session.tasks[key] = final
            out.append(notify(session.session_id, {"sessionUpdate": "async_task_state_update",
                                                   "asyncTaskId": key[1], "state": final}))
    return out


def task_pause(session: Session, tool: Tool) -> list[Message]:
    """A ``paused`` / ``running`` state update when a live task's tool call was paused or resumed."""
    key = ("tool_call", tool.tool_call_id)
    state = session.tasks.get(key)
    wanted = "paused" if tool.status == "paused" else "running" if tool.status == "in_progress" else None
    if state not in _LIVE or wanted is None or wanted == state:
        return []
    session.tasks[key] = wanted
    return [notify(session.session_id, {"sessionUpdate": "async_task_state_update",
                                        "asyncTaskId": tool.tool_call_id, "state": wanted})]


def _spawned(session: Session, key: tuple[str, str]) -> Message:
    kind, item_id = key
    update: Message = {"sessionUpdate": "async_task_spawned", "asyncTaskId": item_id, "showInTranscript": False,
                       "canStop": True}
    if kind == "tool_call":
        tool = session.tools.get(item_id)
        update["name"] = (tool.title if tool is not None and tool.title else item_id)
        update["taskType"] = "shell" if tool is not None and tool.kind == "execute" else "task"
        update["toolCallId"] = item_id
    else:
        terminal = session.terminals.get(item_id)
        update["name"] = terminal.command if terminal is not None and terminal.command else item_id
        update["taskType"] = "shell"
        if terminal is not None and terminal.tools:
            update["toolCallId"] = terminal.tools[0]
    update["description"] = update["name"]
    return update


def _final_state(session: Session, key: tuple[str, str]) -> str:
    kind, item_id = key
    if kind == "tool_call":
        status = session.tools[item_id].status if item_id in session.tools else "completed"
        return {"completed": "completed", "failed": "failed"}.get(status, "stopped")
    terminal = session.terminals.get(item_id)
    if terminal is None or terminal.exit is None or terminal.exit.get("signal"):
        return "stopped"
    return "completed" if terminal.exit.get("exitCode") == 0 else "failed"
