"""The runtime's answers to translated client requests, in v1 shape.

Only answers to requests `requests` forwarded are changed (the translator remembers their
v1 method and context); any other answer passes unchanged. A ``session/prompt`` answer is held:
v1 answers a prompt with its stop reason, which is known when the turn ends (see
`updates`), so the client gets it then, or at once if the turn already ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .commands import commands_update
from .convert import mode_option, v1_config_options, v1_modes
from .handshake import v1_initialize_result
from .messages import Message, answer, key, obj, result
from .state import BRIDGE_REQUEST, Session, TranslatorState
from .updates import options_changed

__all__ = ["RESULTS", "ResultHandler", "runtime_answer"]

ResultHandler = Callable[[TranslatorState, Any, dict[str, Any], Any], list[Message]]
"""Translates a success: (state, request id, v2 result, the request's context) -> what the client gets."""


def runtime_answer(state: TranslatorState, message: Message) -> list[Message]:
    """What the client gets for one runtime response (possibly nothing yet, for a held prompt)."""
    request_id = message.get("id")
    entry = state.requests.pop(key(request_id), None)
    if entry is None:
        return [message]
    method, context = entry
    if method == BRIDGE_REQUEST:
        return []  # the bridge's own request (stopping background work): the client never asked
    if method == "session/prompt":
        session = state.sessions.get(str(context))
        if session is not None:
            session.prompts = max(0, session.prompts - 1)
    if "error" in message:
        if method == "initialize":
            state.initializing = False
        if method == "session/load" or method == "session/resume":
            state.session(str(context)).loading = False
        if method == "_session/async_task/stop":
            return [result(request_id, {"stopped": False})]
        if method == "session/prompt" and obj(message["error"]).get("code") == -32800:
            # Withdrawn before it started (session/cancel): in v1 a cancelled prompt answers `cancelled`.
            return [result(request_id, {"stopReason": "cancelled"})]
        return [message]
    value = message.get("result")
    value = value if isinstance(value, dict) else {}
    translate = RESULTS.get(method)
    if translate is None:
        return [message]
    return translate(state, request_id, value, context)


def _initialized(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    state.agent_capabilities = obj(value.get("capabilities"))
    state.initializing, state.initialized = False, True
    methods = value.get("authMethods")
    state.auth_methods = [m for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []
    return [result(request_id, v1_initialize_result(value, state.client_capabilities))]


def _session_opened(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    session_id = str(value.get("sessionId", context))
    session = state.session(session_id)
    session.loading = False
    return [result(request_id, _session_result(session, value, with_id=context is None)),
            *_commands(session, value)]


def _session_result(session: Session, value: dict[str, Any], *, with_id: bool) -> dict[str, Any]:
    v1: dict[str, Any] = {"sessionId": session.session_id} if with_id else {}
    options = value.get("configOptions")
    if isinstance(options, list):
        session.config_options = options
        v1["configOptions"] = v1_config_options(options)
    option = mode_option(session.config_options)
    if option is not None:
        v1["modes"] = v1_modes(option)
        session.mode = option.get("currentValue")
    return v1


def _commands(session: Session, value: dict[str, Any]) -> list[Message]:
    commands = value.get("availableCommands")
    session.agent_commands = commands if isinstance(commands, list) else []
    return [commands_update(session)]


def _prompt_answered(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    session = state.session(str(context))
    message_id = str(value.get("messageId"))
    ended = session.ended.pop(message_id, None)
    if ended is not None:
        return [answer(request_id, ended)]
    session.waiting[message_id] = request_id  # answered when the turn ends
    return []


def _config_set(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    if isinstance(context, tuple):  # session/set_mode served by the mode config option
        session = state.session(context[1])
        out: list[Message] = [result(request_id, {})]
        if isinstance(value.get("configOptions"), list):
            out.extend(options_changed(session, value["configOptions"], always_mode=False))
        return out
    session = state.session(str(context))
    v1 = {**value, "configOptions": v1_config_options(value["configOptions"])} if isinstance(
        value.get("configOptions"), list) else value
    out = [result(request_id, v1)]
    if isinstance(value.get("configOptions"), list):
        out.extend(options_changed(session, value["configOptions"], always_mode=False, with_options=False))
    return out


def _closed(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    out = [result(request_id, value)]
    session = state.sessions.pop(str(context), None)
    if session is not None:
        out.extend(answer(rid, {"stopReason": "cancelled"}) for rid in session.waiting.values())
    return out


def _empty(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    return [result(request_id, {})]


def _stop_answered(state: TranslatorState, request_id: Any, value: dict[str, Any], context: Any) -> list[Message]:
    return [result(request_id, {"stopped": True})]


RESULTS: Final[dict[str, ResultHandler]] = {
    "initialize": _initialized,
    "session/new": _session_opened,
    "session/load": _session_opened,
    "session/resume": _session_opened,
    "session/fork": _session_opened,
    "session/prompt": _prompt_answered,
    "session/set_config_option": _config_set,
    "session/set_mode": _config_set,
    "session/close": _closed,
    "authenticate": _empty,
    "logout": _empty,
    "_session/async_task/stop": _stop_answered,
}
"""The v1 methods whose successful answers change shape; keyed by the method the client called."""
