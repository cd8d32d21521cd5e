"""Subagents as a v1 client sees them: a child session is a tool call of its parent.

The tool call's id is the child session id and its title the subagent's; it is ``in_progress``
while the child works and ``completed`` / ``failed`` when it ends. The child's messages are that
tool call's text content (one item per message, chunks joined). Everything else the child
sends (its own tool calls, terminals, state) stays inside: a v1 client never sees the child
session id as a session.
"""

from __future__ import annotations

from .convert import STOP_REASONS, text_content
from .messages import Message, obj
from .state import Session, Tool, TranslatorState
from .tools import emit

__all__ = ["child_update", "subagent_update"]


def subagent_update(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    """A v2 ``subagent_update`` in the parent: the child's tool call, made on first sight, emitted."""
    child_id = str(update.get("sessionId"))
    state.children[child_id] = session.session_id
    tool = session.tools.get(child_id)
    if tool is None:
        tool = session.tools[child_id] = Tool(child_id, kind="other", synthetic=True)
    if isinstance(update.get("title"), str):
        tool.title = update["title"]
    child = obj(update.get("state"))
    if child.get("state") in ("running", "requires_action"):
        tool.status = "in_progress"
    elif child.get("state") == "idle" and child.get("stopReason") is not None:
        tool.status = "completed" if child["stopReason"] in STOP_REASONS - {"cancelled"} else "failed"
    return emit(session, tool)


def child_update(state: TranslatorState, child_id: str, update: Message) -> list[Message]:
    """An update of a known child session: its agent messages become its tool call's content, the rest is dropped."""
    parent = state.sessions.get(state.children[child_id])
    tool = parent.tools.get(child_id) if parent is not None else None
    if parent is None or tool is None:
        return []
    kind = update.get("sessionUpdate")
    if kind == "agent_message":
        blocks = update.get("content") or []
    elif kind == "agent_message_chunk":
        blocks = [update.get("content")]
    else:
        return []  # the child's own tool calls, terminals and state stay inside it
    text = "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    message_id = str(update.get("messageId"))
    if tool.last_message == message_id and tool.content and tool.content[-1][0] == "v1":
        previous = tool.content[-1][1]["content"]["text"]
        text = (previous + text) if kind == "agent_message_chunk" else text
        tool.content[-1] = ("v1", text_content(text))
    else:
        tool.content.append(("v1", text_content(text)))
    tool.last_message = message_id
    return emit(parent, tool)
