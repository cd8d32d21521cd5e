"""Stopping background work from a v1 client: the ``/jobs`` and ``/stop`` commands, and an idle cancel.

v1 has no background list and no per-item cancel, so the bridge offers two slash commands of its
own next to the agent's: ``/jobs`` lists the session's background work (as the last v2
``background`` list named it), ``/stop ID`` or ``/stop all`` stops it with v2 ``tool_call/cancel``
/ ``terminal/cancel`` requests the bridge sends itself. An agent's own command of the same name
wins: the bridge then neither lists its own nor answers the prompt. A v1 ``session/cancel``
arriving while no prompt runs stops all of the session's background work (a v1 client has no
other way to say it). Pure bookkeeping, like the rest of the translator.
"""

from __future__ import annotations

from typing import Any, Final

from .convert import v1_commands
from .messages import Message, key, notify
from .state import BRIDGE_REQUEST, Session, TranslatorState

__all__ = ["BRIDGE_COMMANDS", "command_prompt", "commands_update", "idle_cancel", "stop_requests"]

BRIDGE_COMMANDS: Final = (
    {"name": "jobs", "description": "List this session's background work"},
    {"name": "stop", "description": "Stop background work (an id from /jobs, or all)",
     "input": {"hint": "ID or all"}},
)
"""The commands the bridge offers every v1 session (unless the agent has its own of that name)."""


def _own_names(session: Session) -> set[str]:
    return {str(c.get("name")) for c in session.agent_commands if isinstance(c, dict)}


def commands_update(session: Session) -> Message:
    """An ``available_commands_update`` with the agent's commands and the bridge's (the agent's win)."""
    own = _own_names(session)
    bridge = [c for c in BRIDGE_COMMANDS if c["name"] not in own]
    return notify(session.session_id, {"sessionUpdate": "available_commands_update",
                                       "availableCommands": v1_commands([*session.agent_commands, *bridge])})


def command_prompt(state: TranslatorState, session: Session, prompt: Any) -> tuple[list[Message], list[Message]] | None:
    """``(to runtime, to client)`` for a prompt that is one of the bridge's commands, else ``None``.

    The client part is the answer's updates (the prompt's answer itself is the caller's).
    """
    if not isinstance(prompt, list) or len(prompt) != 1 or not isinstance(prompt[0], dict):
        return None
    text = prompt[0].get("text") if prompt[0].get("type") == "text" else None
    if not isinstance(text, str) or not text.startswith("/"):
        return None
    name, _, argument = text[1:].strip().partition(" ")
    if name not in ("jobs", "stop") or name in _own_names(session):
        return None
    if name == "jobs":
        return [], [_say(session, _listing(session))]
    wanted = argument.strip()
    items = session.background if wanted == "all" else [i for i in session.background if _item_id(i) == wanted]
    if not wanted:
        return [], [_say(session, "Usage: /stop ID (an id from /jobs) or /stop all")]
    if not items:
        return [], [_say(session, f"No background work named {wanted}. " + _listing(session))]
    names = ", ".join(_item_id(i) for i in items)
    return stop_requests(state, session, items), [_say(session, f"Stopping {names}.")]


def idle_cancel(state: TranslatorState, session: Session) -> list[Message]:
    """The runtime requests a ``session/cancel`` of an idle session stands for: stop its background work."""
    if session.prompts or session.waiting or session.turn is not None:
        return []
    return stop_requests(state, session, session.background)


def stop_requests(state: TranslatorState, session: Session, items: list[dict[str, Any]]) -> list[Message]:
    """v2 requests (the bridge's own, their answers dropped) that cancel ``items`` of the background list."""
    out: list[Message] = []
    for item in items:
        kind = item.get("type")
        if kind == "tool_call":
            method, params = "tool_call/cancel", {"toolCallId": item.get("toolCallId")}
        elif kind == "terminal":
            method, params = "terminal/cancel", {"terminalId": item.get("terminalId")}
        elif kind == "subagent":
            out.append({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": item.get("sessionId")}})
            continue
        else:
            continue
        state.own_requests += 1
        request_id = f"acp-agent-v1-{state.own_requests}"
        state.requests[key(request_id)] = (BRIDGE_REQUEST, None)
        out.append({"jsonrpc": "2.0", "id": request_id, "method": method,
                    "params": {"sessionId": session.session_id, **params}})
    return out


def _item_id(item: dict[str, Any]) -> str:
    return str(item.get("toolCallId") or item.get("terminalId") or item.get("sessionId") or "")


def _listing(session: Session) -> str:
    if not session.background:
        return "No background work is running."
    lines = ["Background work (stop one with /stop ID, or /stop all):"]
    for item in session.background:
        item_id = _item_id(item)
        if item.get("type") == "terminal":
            terminal = session.terminals.get(item_id)
            what = terminal.command if terminal is not None and terminal.command else "terminal"
        else:
            tool = session.tools.get(item_id)
            what = tool.title if tool is not None and tool.title else str(item.get("type"))
        lines.append(f"- `{item_id}`: {what}")
    return "\n".join(lines)


def _say(session: Session, text: str) -> Message:
    return notify(session.session_id, {"sessionUpdate": "agent_message_chunk",
                                       "content": {"type": "text", "text": text}})
