"""v2 session updates as v1 ones (or nothing, when v1 has no form for them).

`session_update` routes each update of a known session to its translation: messages and
thoughts become one chunk per content block, plans merge into v1's single plan, config options
also drive v1 modes, and the ``idle`` state ends the turn (answering the held ``session/prompt``).
Tool calls, terminals, subagents and AIR tasks have modules of their own. An update of an
unknown session, or of a kind v1 cannot show, is dropped; one of a child session goes to its
parent's tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .async_tasks import project_tasks
from .commands import commands_update
from .convert import mode_option, stop_answer, v1_config_options
from .messages import Message, answer, notify
from .state import Session, TranslatorState
from .subagents import child_update, subagent_update
from .tools import terminal_output, terminal_update, tool_chunk, tool_update

__all__ = ["UPDATES", "UpdateHandler", "options_changed", "session_update"]

UpdateHandler = Callable[[TranslatorState, Session, Message], list[Message]]
"""Translates one update of a known session into what the client gets."""


def session_update(state: TranslatorState, params: dict[str, Any]) -> list[Message]:
    """The v1 notifications for one v2 ``session/update`` (possibly none)."""
    session_id = str(params.get("sessionId"))
    session = state.sessions.get(session_id)
    update = params.get("update")
    if not isinstance(update, dict):
        return []
    if session is None:
        return child_update(state, session_id, update) if session_id in state.children else []
    handler = UPDATES.get(str(update.get("sessionUpdate")))
    if handler is None:
        return []
    return handler(state, session, update)


# messages and thoughts


def _user_message(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    if not session.loading:
        session.turn = str(update.get("messageId"))
        return []  # v1 clients show the prompt they sent; the echo has no v1 form
    return _chunks(session, "user_message_chunk", update.get("content"))


def _user_chunk(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    if not session.loading:
        return []
    return _chunks(session, "user_message_chunk", [update.get("content")])


def _agent_message(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    return _chunks(session, "agent_message_chunk", update.get("content"))


def _agent_chunk(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    return _chunks(session, "agent_message_chunk", [update.get("content")])


def _thought(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    return _chunks(session, "agent_thought_chunk", update.get("content"))


def _thought_chunk(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    return _chunks(session, "agent_thought_chunk", [update.get("content")])


def _chunks(session: Session, kind: str, blocks: Any) -> list[Message]:
    return [notify(session.session_id, {"sessionUpdate": kind, "content": block})
            for block in (blocks or []) if isinstance(block, dict)]


# the session's state: AIR tasks, and the end of a turn


def _state(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    out: list[Message] = []
    background = update.get("background")
    if isinstance(background, list):
        session.background = [item for item in background if isinstance(item, dict)]
        if state.air:
            out.extend(project_tasks(session, background))
    if update.get("state") == "idle" and update.get("stopReason") is not None:
        message_id, session.turn = session.turn, None
        if message_id is not None:
            outcome = stop_answer(update)
            request_id = session.waiting.pop(message_id, None)
            if request_id is None:
                session.ended[message_id] = outcome  # the prompt's answer is not in yet: answered with it
            else:
                out.append(answer(request_id, outcome))
    return out


# plans


def _plan(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    plan = update.get("plan")
    if not isinstance(plan, dict):
        return []
    plan_id = str(plan.get("planId"))
    kind = plan.get("type")
    if kind == "items":
        entries = [e for e in plan.get("entries") or [] if isinstance(e, dict)]
    elif kind == "markdown":
        entries = [{"content": str(plan.get("content", "")), "priority": "medium", "status": "pending"}]
    elif kind == "file":
        entries = [{"content": f"Plan: {plan.get('uri')}", "priority": "medium", "status": "pending"}]
    else:
        return []
    session.plans[plan_id] = [{k: e[k] for k in ("content", "priority", "status") if k in e} for e in entries]
    return [_plan_message(session)]


def _plan_removed(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    if session.plans.pop(str(update.get("planId")), None) is None:
        return []
    return [_plan_message(session)]


def _plan_message(session: Session) -> Message:
    entries = [e for entries in session.plans.values() for e in entries]
    return notify(session.session_id, {"sessionUpdate": "plan", "entries": entries})


# commands, config options and modes, session info, usage


def _available_commands(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    commands = update.get("availableCommands")
    session.agent_commands = commands if isinstance(commands, list) else []
    return [commands_update(session)]


def _config_options(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    options = update.get("configOptions")
    if not isinstance(options, list):
        return []
    return options_changed(session, options, always_mode=False)


def options_changed(session: Session, options: list[dict[str, Any]], *, always_mode: bool,
                    with_options: bool = True) -> list[Message]:
    """Note new config options: a ``config_option_update`` (unless not ``with_options``), and a
    ``current_mode_update`` when the mode option's value changed (or always, with ``always_mode``)."""
    session.config_options = options
    out: list[Message] = []
    if with_options:
        out.append(notify(session.session_id, {"sessionUpdate": "config_option_update",
                                               "configOptions": v1_config_options(options)}))
    option = mode_option(options)
    if option is not None and (always_mode or option.get("currentValue") != session.mode):
        session.mode = option.get("currentValue")
        out.append(notify(session.session_id, {"sessionUpdate": "current_mode_update",
                                               "currentModeId": session.mode}))
    return out


def _session_info(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    fields: dict[str, Any] = {k: update[k] for k in ("title", "updatedAt") if k in update}
    return [notify(session.session_id, {"sessionUpdate": "session_info_update", **fields})]


def _usage(state: TranslatorState, session: Session, update: Message) -> list[Message]:
    fields: dict[str, Any] = {k: update[k] for k in ("used", "size", "cost") if k in update}
    return [notify(session.session_id, {"sessionUpdate": "usage_update", **fields})]


def _gated(capability: str) -> UpdateHandler:
    """An update forwarded unchanged only to a client that advertised ``session.<capability>``."""

    def forward(state: TranslatorState, session: Session, update: Message) -> list[Message]:
        session_caps = state.client_capabilities.get("session")
        if isinstance(session_caps, dict) and session_caps.get(capability) is not None:
            return [notify(session.session_id, dict(update))]
        return []

    return forward


UPDATES: Final[dict[str, UpdateHandler]] = {
    "user_message": _user_message,
    "user_message_chunk": _user_chunk,
    "agent_message": _agent_message,
    "agent_message_chunk": _agent_chunk,
    "agent_thought": _thought,
    "agent_thought_chunk": _thought_chunk,
    "state_update": _state,
    "tool_call_update": tool_update,
    "tool_call_content_chunk": tool_chunk,
    "terminal_update": terminal_update,
    "terminal_output_chunk": terminal_output,
    "subagent_update": subagent_update,
    "plan_update": _plan,
    "plan_removed": _plan_removed,
    "available_commands_update": _available_commands,
    "config_option_update": _config_options,
    "session_info_update": _session_info,
    "usage_update": _usage,
    "notice": _gated("notices"),
    "compaction_update": _gated("compaction"),
    "compaction_summary_chunk": _gated("compaction"),
}
"""The v2 update kinds a v1 client is shown; any other kind is dropped."""
