"""Permission requests in v1 shape, and what the client's answer changes.

A v1 request names a tool call, so the bridge makes sure the client has seen one first: the
subject's tool call, or one made up for a request about no tool call (or a command), ``pending``
while asked and ``completed`` (allowed) or ``failed`` once answered. The question is the title only
of a made-up tool call: a real one keeps its own title (clients print "Allow" before it, so the
question there read "Allow Allow: ..."). The client's answer itself goes to the runtime unchanged.
"""

from __future__ import annotations

from typing import Any, Final

from .messages import Message, key, obj
from .state import Tool, TranslatorState
from .tools import emit

__all__ = ["REQUEST_PERMISSION", "permission_answered", "permission_request"]

REQUEST_PERMISSION: Final = "session/request_permission"
"""The method of a permission request, the same in v1 and v2."""


def permission_request(state: TranslatorState, request_id: Any, params: dict[str, Any]) -> list[Message]:
    """The runtime's request: the tool call it is about (emitted first), then the v1 request."""
    session = state.sessions.get(str(params.get("sessionId")))
    if session is None:
        return [{"jsonrpc": "2.0", "id": request_id, "method": REQUEST_PERMISSION, "params": params}]
    title = str(params.get("title", ""))
    subject = obj(params.get("subject"))
    out: list[Message] = []
    tool_id: str | None = None
    if subject.get("type") == "tool_call" and isinstance(subject.get("toolCall"), dict):
        tool_id = str(subject["toolCall"].get("toolCallId"))
    elif subject.get("type") == "command" and isinstance(subject.get("toolCallId"), str):
        tool_id = subject["toolCallId"]
    tool = session.tools.get(tool_id) if tool_id is not None else None
    synthetic = tool is None
    if tool is None:
        state.synthetic += 1
        tool = Tool(f"permission_{state.synthetic}", title=title, status="pending", synthetic=True,
                    kind="execute" if subject.get("type") == "command" else "other")
        if isinstance(subject.get("command"), str):
            tool.content.append(("v1", {"type": "content", "content": {"type": "text",
                                                                       "text": subject["command"]}}))
        session.tools[tool.tool_call_id] = tool
    out.extend(emit(session, tool))
    state.agent_requests[key(request_id)] = (REQUEST_PERMISSION, (session.session_id, tool.tool_call_id, synthetic))
    tool_call: dict[str, Any] = {"toolCallId": tool.tool_call_id}
    if synthetic:
        tool_call["title"] = title
    v1 = {"sessionId": session.session_id, "toolCall": tool_call, "options": params.get("options", [])}
    out.append({"jsonrpc": "2.0", "id": request_id, "method": REQUEST_PERMISSION, "params": v1})
    return out


def permission_answered(state: TranslatorState, context: tuple[str, str, bool], answer: Message) -> list[Message]:
    """The client answered: a made-up tool call ends by the outcome (a real one is the agent's to update)."""
    session_id, tool_id, synthetic = context
    session = state.sessions.get(session_id)
    tool = session.tools.get(tool_id) if session is not None else None
    if session is None or tool is None or tool.sent is None or not synthetic:
        return []
    outcome = (answer.get("result") or {}).get("outcome") if isinstance(answer.get("result"), dict) else None
    selected = isinstance(outcome, dict) and outcome.get("outcome") == "selected"
    tool.status = "completed" if selected else "failed"
    return emit(session, tool)
