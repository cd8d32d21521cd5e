"""v1 client requests as v2 calls: one handler per v1 method, each returning what happened.

A handler never raises to report an outcome. It returns one of:

- `Forward`: send the runtime this v2 call (its answer is translated back with ``context``);
- `Answer` / `Refuse`: the bridge answers the client itself, with a result or an
  error (a notification gets nothing);
- `Handle`: the bridge does the job itself (its own slash commands, stopping background work):
  requests of its own for the runtime, updates and an answer for the client;
- `UNCHANGED`: the message goes to the runtime as the client sent it.

Handlers may note what they learn in the translator's state (client capabilities, a session
being loaded); they send nothing themselves.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .async_tasks import running_task
from .commands import command_prompt, idle_cancel
from .convert import mode_option, session_params, text_resources
from .handshake import AIR_CAPABILITY, air_declares, v2_initialize_params
from .messages import Message, obj
from .state import TranslatorState

__all__ = ["HANDLERS", "UNCHANGED", "Answer", "Forward", "Handle", "Handled", "Handler", "Refuse", "Unchanged"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Forward:
    """Send the runtime this v2 call; ``context`` comes back with its answer."""

    method: str
    params: dict[str, Any]
    context: Any = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The bridge answers the client itself with this result (a notification gets nothing)."""

    result: Any


@dataclass(frozen=True, slots=True)
class Refuse:
    """The bridge answers the client itself with this error (a notification gets nothing)."""

    code: int
    message: str
    data: Any = None


@dataclass(frozen=True, slots=True)
class Handle:
    """The bridge does the job itself: ``runtime`` messages of its own, ``client`` updates, then ``result``
    as the answer (``None``: no answer; a notification gets none anyway)."""

    runtime: list[Message] = field(default_factory=list)
    client: list[Message] = field(default_factory=list)
    result: Any = None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """The message goes to the runtime as the client sent it."""


UNCHANGED: Final = Unchanged()
"""The one `Unchanged` outcome."""

Handled = Forward | Answer | Refuse | Handle | Unchanged
"""What a handler decided about a client message."""

Handler = Callable[[TranslatorState, dict[str, Any]], Handled]
"""A handler of one v1 method: the translator's state and the message's params in, the outcome out."""


def _initialize(state: TranslatorState, params: dict[str, Any]) -> Handled:
    capabilities = params.get("clientCapabilities")
    state.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
    state.air = air_declares(state.client_capabilities, AIR_CAPABILITY)
    state.initializing = True
    return Forward("initialize", v2_initialize_params(params, state.client_capabilities))


def _new_session(state: TranslatorState, params: dict[str, Any]) -> Handled:
    return Forward("session/new", _mcp_servers(state, session_params(params, ("cwd", "additionalDirectories"))))


def _mcp_servers(state: TranslatorState, v2: dict[str, Any]) -> dict[str, Any]:
    """v1 makes every agent accept stdio MCP servers: handed on when the agent connects to them (it
    advertised ``mcp.stdio``), else left out with one log line (v2 would refuse the request). Before the
    agent's ``initialize`` answer (the streams hold a session request until it came) they are handed on
    too, unlogged: the runtime, which knows the agent, judges them."""
    servers = v2.get("mcpServers")
    stdio_ok = obj(obj(obj(state.agent_capabilities.get("session")).get("mcp"))).get("stdio") is not None
    if not isinstance(servers, list):
        return v2
    if stdio_ok or not state.initialized:
        return {**v2, "mcpServers": _absolute_commands(servers, str(v2.get("cwd") or ""))}
    kept = [s for s in servers if not (isinstance(s, dict) and s.get("type") == "stdio")]
    if len(kept) < len(servers):
        names = ", ".join(str(s.get("name")) for s in servers if isinstance(s, dict) and s.get("type") == "stdio")
        logger.warning("v1 client: stdio MCP servers left out, this agent does not use them: %s", names)
        v2 = {**v2, "mcpServers": kept}
    return v2


def _absolute_commands(servers: list[Any], cwd: str) -> list[Any]:
    """v1 clients pass a stdio server's ``command`` as configured (acpx: ``"npx"``), v2 wants an absolute
    path: a bare name is looked up on the agent's ``PATH``, a relative path in the session's cwd; an entry
    that resolves to nothing is left out with one log line instead of refusing the session."""
    kept: list[Any] = []
    for server in servers:
        command = server.get("command") if isinstance(server, dict) and server.get("type") == "stdio" else None
        if not isinstance(command, str) or os.path.isabs(command):
            kept.append(server)
            continue
        found = shutil.which(os.path.join(cwd, command) if os.sep in command or "/" in command else command)
        if found is None:
            logger.warning("v1 client: stdio MCP server %s left out, its command %r is not an absolute path "
                           "and was not found", server.get("name"), command)
            continue
        kept.append({**server, "command": os.path.abspath(found)})
    return kept


def _load_session(state: TranslatorState, params: dict[str, Any]) -> Handled:
    v2 = _mcp_servers(state, session_params(params, ("sessionId", "cwd", "additionalDirectories")))
    v2["replayFrom"] = {"type": "start"}
    session_id = str(params.get("sessionId"))
    session = state.sessions.get(session_id)
    if session is not None:  # loading an open session: the replay restates everything
        session.tools.clear()
        session.terminals.clear()
        session.plans.clear()
    session = state.session(session_id)
    session.loading = True
    return Forward("session/resume", v2, session_id)


def _resume_session(state: TranslatorState, params: dict[str, Any]) -> Handled:
    v2 = _mcp_servers(state, session_params(params, ("sessionId", "cwd", "additionalDirectories")))
    state.session(str(params.get("sessionId")))
    return Forward("session/resume", v2, str(params.get("sessionId")))


def _prompt(state: TranslatorState, params: dict[str, Any]) -> Handled:
    session_id = str(params.get("sessionId"))
    session = state.sessions.get(session_id)
    if session is not None:
        handled = command_prompt(state, session, params.get("prompt"))
        if handled is not None:
            return Handle(handled[0], handled[1], {"stopReason": "end_turn"})
    v2 = {k: v for k, v in params.items() if k in ("sessionId", "prompt", "_meta")}
    prompt_caps = obj(obj(state.agent_capabilities.get("session")).get("prompt"))
    if isinstance(v2.get("prompt"), list) and prompt_caps.get("embeddedContext") is None:
        blocks, changed = text_resources(v2["prompt"])
        if changed:  # Toad sends @file as a resource to any agent: be liberal, give it as text
            logger.warning("v1 client sent %d embedded resource(s) the agent did not advertise: given as text",
                           changed)
            v2["prompt"] = blocks
    if session is not None:
        session.prompts += 1
    return Forward("session/prompt", v2, session_id)


def _cancel(state: TranslatorState, params: dict[str, Any]) -> Handled:
    session = state.sessions.get(str(params.get("sessionId")))
    if session is None:
        return UNCHANGED
    stops = idle_cancel(state, session)
    return Handle(stops) if stops else UNCHANGED  # a turn runs (or nothing to stop): the runtime cancels it


def _set_config_option(state: TranslatorState, params: dict[str, Any]) -> Handled:
    v2 = {k: v for k, v in params.items() if k in ("sessionId", "configId", "value", "type", "_meta")}
    if "type" not in v2:
        v2["type"] = "boolean" if isinstance(v2.get("value"), bool) else "id"
    return Forward("session/set_config_option", v2, str(params.get("sessionId")))


def _set_mode(state: TranslatorState, params: dict[str, Any]) -> Handled:
    session_id = str(params.get("sessionId"))
    session = state.sessions.get(session_id)
    option = mode_option(session.config_options) if session is not None else None
    if option is None:
        return Refuse(-32602, "Invalid params: this session offers no modes", {"sessionId": session_id})
    v2 = {"sessionId": session_id, "configId": option.get("configId"), "type": "id", "value": params.get("modeId")}
    return Forward("session/set_config_option", v2, ("set_mode", session_id))


def _authenticate(state: TranslatorState, params: dict[str, Any]) -> Handled:
    if not state.auth_methods:
        return Refuse(-32602, "Invalid params: the agent offers no authentication methods",
                      {"methodId": params.get("methodId")})
    return Forward("auth/login", {k: params[k] for k in ("methodId", "_meta") if params.get(k) is not None})


def _logout(state: TranslatorState, params: dict[str, Any]) -> Handled:
    if not state.auth_methods:
        return UNCHANGED  # nothing to log out of: the runtime answers -32601
    return Forward("auth/logout", {k: params[k] for k in ("_meta",) if params.get(k) is not None})


def _close_session(state: TranslatorState, params: dict[str, Any]) -> Handled:
    return Forward("session/close", params, str(params.get("sessionId")))


def _fork_session(state: TranslatorState, params: dict[str, Any]) -> Handled:
    return Forward("session/fork", session_params(params, ("sessionId", "cwd", "additionalDirectories")))


def _stop_async_task(state: TranslatorState, params: dict[str, Any]) -> Handled:
    if not state.air:
        return UNCHANGED  # not negotiated: the runtime answers -32601
    session_id = str(params.get("sessionId"))
    session = state.sessions.get(session_id)
    task = running_task(session, params.get("asyncTaskId")) if session is not None else None
    if task is None:
        return Answer({"stopped": False})  # unknown or finished: nothing to cancel
    kind, item_id = task
    target = "toolCallId" if kind == "tool_call" else "terminalId"
    return Forward(f"{kind}/cancel", {"sessionId": session_id, target: item_id}, ("async_task_stop", session_id))


HANDLERS: Final[dict[str, Handler]] = {
    "initialize": _initialize,
    "session/new": _new_session,
    "session/load": _load_session,
    "session/resume": _resume_session,
    "session/prompt": _prompt,
    "session/set_config_option": _set_config_option,
    "session/set_mode": _set_mode,
    "session/cancel": _cancel,
    "authenticate": _authenticate,
    "logout": _logout,
    "session/close": _close_session,
    "session/fork": _fork_session,
    "_session/async_task/stop": _stop_async_task,
}
"""The v1 methods the bridge translates; any other message goes to the runtime unchanged."""
