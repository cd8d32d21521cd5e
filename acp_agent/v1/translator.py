"""The translator of one v1 connection: client messages to v2 calls, runtime messages to v1 shapes.

Pure bookkeeping, no I/O, one instance per connection: :meth:`V1Translator.incoming` takes a
client message and returns what goes to the runtime and what the bridge answers the client
itself; :meth:`V1Translator.outgoing` takes a runtime message and returns what the client gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .convert import (
    STOP_REASONS,
    b64,
    mode_option,
    session_params,
    stop_answer,
    text_content,
    v1_commands,
    v1_config_options,
    v1_modes,
    v1_tool_content,
)
from .handshake import AIR_CAPABILITY, air_declares, v1_initialize_result, v2_initialize_params
from .messages import Message
from .messages import answer as _answer
from .messages import error as _error
from .messages import key as _key
from .messages import notify as _notify
from .messages import obj as _obj
from .messages import result as _result
from .state import Session, Terminal, Tool

__all__ = ["V1Translator"]

V1_STATUSES: Final = frozenset({"pending", "in_progress", "completed", "failed"})
"""The tool call statuses v1 knows."""

# -- the translator ------------------------------------------------------------------------


class V1Translator:
    """Translates one v1 connection: client messages to v2 calls, runtime messages to v1 shapes.

    Pure bookkeeping (no I/O): :meth:`incoming` returns what goes to the runtime and what the
    bridge answers the client itself; :meth:`outgoing` returns what the client gets.
    """

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.air = False
        """The client declared the JetBrains AIR ``asyncTasks`` extension."""
        self._requests: dict[str, tuple[str, Any]] = {}
        """Client request id (JSON) -> (method, context), for translating the runtime's answer."""
        self._agent_requests: dict[str, tuple[str, Any]] = {}
        """Runtime request id (JSON) -> (method, context), for translating the client's answer."""
        self._synthetic = 0
        self.children: dict[str, str] = {}
        """Child (subagent) session id -> its parent session id: the child is shown as a tool call there."""

    # -- client -> runtime ------------------------------------------------------------------

    def incoming(self, message: Any) -> tuple[list[Message], list[Message]]:
        """Translate one client message: (messages for the runtime, answers for the client)."""
        if isinstance(message, list):
            runtime: list[Message] = []
            client: list[Message] = []
            for entry in message:
                r, c = self.incoming(entry)
                runtime.extend(r)
                client.extend(c)
            return runtime, client
        if not isinstance(message, dict):
            return [message], []
        method = message.get("method")
        if method is None:
            return self._client_response(message)
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(method, str):
            return [message], []
        request_id = message.get("id")
        is_request = "id" in message
        handler = _INCOMING.get(method)
        if handler is None:
            return [message], []
        handled: _Handled = handler(self, params)
        if isinstance(handled, _Unchanged):
            return [message], []
        if isinstance(handled, _Answer):
            return [], [_result(request_id, handled.result)] if is_request else []
        if isinstance(handled, _Refuse):
            return [], [_error(request_id, handled.code, handled.message, handled.data)] if is_request else []
        if is_request:
            self._requests[_key(request_id)] = (method, handled.context)
        out: Message = {"jsonrpc": "2.0", "method": handled.method, "params": handled.params}
        if is_request:
            out["id"] = request_id
        return [out], []

    def _client_response(self, message: Message) -> tuple[list[Message], list[Message]]:
        entry = self._agent_requests.pop(_key(message.get("id")), None)
        client: list[Message] = []
        if entry is not None and entry[0] == "session/request_permission":
            client = self._after_permission(entry[1], message)
        return [message], client

    def _initialize(self, params: dict[str, Any]) -> _Handled:
        capabilities = params.get("clientCapabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.air = air_declares(self.client_capabilities, AIR_CAPABILITY)
        return _Forward("initialize", v2_initialize_params(params, self.client_capabilities))

    def _new_session(self, params: dict[str, Any]) -> _Handled:
        return _Forward("session/new", session_params(params, ("cwd", "additionalDirectories")))

    def _load_session(self, params: dict[str, Any]) -> _Handled:
        v2 = session_params(params, ("sessionId", "cwd", "additionalDirectories"))
        v2["replayFrom"] = {"type": "start"}
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id)
        if session is not None:  # loading an open session: the replay restates everything
            session.tools.clear()
            session.terminals.clear()
            session.plans.clear()
        session = self._session(session_id)
        session.loading = True
        return _Forward("session/resume", v2, session_id)

    def _resume_session(self, params: dict[str, Any]) -> _Handled:
        v2 = session_params(params, ("sessionId", "cwd", "additionalDirectories"))
        self._session(str(params.get("sessionId")))
        return _Forward("session/resume", v2, str(params.get("sessionId")))

    def _prompt(self, params: dict[str, Any]) -> _Handled:
        v2 = {k: v for k, v in params.items() if k in ("sessionId", "prompt", "_meta")}
        return _Forward("session/prompt", v2, str(params.get("sessionId")))

    def _set_config_option(self, params: dict[str, Any]) -> _Handled:
        v2 = {k: v for k, v in params.items() if k in ("sessionId", "configId", "value", "type", "_meta")}
        if "type" not in v2:
            v2["type"] = "boolean" if isinstance(v2.get("value"), bool) else "id"
        return _Forward("session/set_config_option", v2, str(params.get("sessionId")))

    def _set_mode(self, params: dict[str, Any]) -> _Handled:
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id)
        option = mode_option(session.config_options) if session is not None else None
        if option is None:
            return _Refuse(-32602, "Invalid params: this session offers no modes", {"sessionId": session_id})
        v2 = {"sessionId": session_id, "configId": option.get("configId"), "type": "id", "value": params.get("modeId")}
        return _Forward("session/set_config_option", v2, ("set_mode", session_id))

    def _authenticate(self, params: dict[str, Any]) -> _Handled:
        return _Refuse(-32602, "Invalid params: the agent offers no authentication methods",
                       {"methodId": params.get("methodId")})

    def _async_task_stop(self, params: dict[str, Any]) -> _Handled:
        if not self.air:
            return _UNCHANGED  # not negotiated: the runtime answers -32601
        session_id = str(params.get("sessionId"))
        task_id = params.get("asyncTaskId")
        session = self.sessions.get(session_id)
        for (kind, item_id), state in (session.tasks.items() if session is not None else ()):
            if item_id == task_id and state in ("running", "paused"):
                key = "toolCallId" if kind == "tool_call" else "terminalId"
                return _Forward(f"{kind}/cancel", {"sessionId": session_id, key: item_id},
                                ("async_task_stop", session_id))
        return _Answer({"stopped": False})  # unknown or finished task: the bridge answers

    # -- runtime -> client ------------------------------------------------------------------

    def outgoing(self, message: Any) -> list[Message]:
        """Translate one runtime message into what the v1 client gets (possibly nothing)."""
        if not isinstance(message, dict):
            return [message]
        method = message.get("method")
        if method is None:
            return self._runtime_response(message)
        params = _obj(message.get("params"))
        if method == "session/update":
            return self._update(params)
        if method == "session/request_permission" and "id" in message:
            return self._permission(message["id"], params)
        return [message]

    def _runtime_response(self, message: Message) -> list[Message]:
        request_id = message.get("id")
        entry = self._requests.pop(_key(request_id), None)
        if entry is None:
            return [message]
        method, context = entry
        if "error" in message:
            if method == "session/load" or method == "session/resume":
                self._session(str(context)).loading = False
            if method == "_session/async_task/stop":
                return [_result(request_id, {"stopped": False})]
            if method == "session/prompt" and _obj(message["error"]).get("code") == -32800:
                # Withdrawn before it started (session/cancel): in v1 a cancelled prompt answers `cancelled`.
                return [_result(request_id, {"stopReason": "cancelled"})]
            return [message]
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        translate = _OUTGOING_RESULTS.get(method)
        if translate is None:
            return [message]
        translated: list[Message] = translate(self, request_id, result, context)
        return translated

    def _initialized(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        return [_result(request_id, v1_initialize_result(result, self.client_capabilities))]

    def _session_opened(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        session_id = str(result.get("sessionId", context))
        session = self._session(session_id)
        session.loading = False
        return [_result(request_id, self._session_result(session, result, with_id=context is None)),
                *self._commands(session, result)]

    def _session_result(self, session: Session, result: dict[str, Any], *, with_id: bool) -> dict[str, Any]:
        v1: dict[str, Any] = {"sessionId": session.session_id} if with_id else {}
        options = result.get("configOptions")
        if isinstance(options, list):
            session.config_options = options
            v1["configOptions"] = v1_config_options(options)
        option = mode_option(session.config_options)
        if option is not None:
            v1["modes"] = v1_modes(option)
            session.mode = option.get("currentValue")
        return v1

    def _commands(self, session: Session, result: dict[str, Any]) -> list[Message]:
        commands = result.get("availableCommands")
        if not isinstance(commands, list):
            return []
        return [_notify(session.session_id, {"sessionUpdate": "available_commands_update",
                                             "availableCommands": v1_commands(commands)})]

    def _prompt_answered(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        session = self._session(str(context))
        message_id = str(result.get("messageId"))
        ended = session.ended.pop(message_id, None)
        if ended is not None:
            return [_answer(request_id, ended)]
        session.waiting[message_id] = request_id
        return []

    def _config_set(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        if isinstance(context, tuple):  # session/set_mode served by the mode config option
            session = self._session(context[1])
            out: list[Message] = [_result(request_id, {})]
            if isinstance(result.get("configOptions"), list):
                out.extend(self._options_changed(session, result["configOptions"], always_mode=False))
            return out
        session = self._session(str(context))
        v1 = {**result, "configOptions": v1_config_options(result["configOptions"])} if isinstance(
            result.get("configOptions"), list) else result
        out = [_result(request_id, v1)]
        if isinstance(result.get("configOptions"), list):
            out.extend(self._options_changed(session, result["configOptions"], always_mode=False,
                                             with_options=False))
        return out

    def _closed(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        out = [_result(request_id, result)]
        session = self.sessions.pop(str(context), None)
        if session is not None:
            out.extend(_answer(rid, {"stopReason": "cancelled"}) for rid in session.waiting.values())
        return out

    def _stop_answered(self, request_id: Any, result: dict[str, Any], context: Any) -> list[Message]:
        return [_result(request_id, {"stopped": True})]

    # -- session updates ---------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = Session(session_id)
        return session

    def _update(self, params: dict[str, Any]) -> list[Message]:
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id)
        update = params.get("update")
        if not isinstance(update, dict):
            return []
        if session is None:
            return self._child_update(session_id, update) if session_id in self.children else []
        kind = update.get("sessionUpdate")
        handler = _UPDATES.get(str(kind))
        if handler is None:
            return []
        translated: list[Message] = handler(self, session, update)
        return translated

    def _user_message(self, session: Session, update: Message) -> list[Message]:
        if not session.loading:
            session.turn = str(update.get("messageId"))
            return []  # v1 clients show the prompt they sent; the echo has no v1 form
        return self._chunks(session, "user_message_chunk", update.get("content"))

    def _user_chunk(self, session: Session, update: Message) -> list[Message]:
        if not session.loading:
            return []
        return self._chunks(session, "user_message_chunk", [update.get("content")])

    def _agent_message(self, session: Session, update: Message) -> list[Message]:
        return self._chunks(session, "agent_message_chunk", update.get("content"))

    def _agent_chunk(self, session: Session, update: Message) -> list[Message]:
        return self._chunks(session, "agent_message_chunk", [update.get("content")])

    def _thought(self, session: Session, update: Message) -> list[Message]:
        return self._chunks(session, "agent_thought_chunk", update.get("content"))

    def _thought_chunk(self, session: Session, update: Message) -> list[Message]:
        return self._chunks(session, "agent_thought_chunk", [update.get("content")])

    def _chunks(self, session: Session, kind: str, blocks: Any) -> list[Message]:
        return [_notify(session.session_id, {"sessionUpdate": kind, "content": block})
                for block in (blocks or []) if isinstance(block, dict)]

    def _state(self, session: Session, update: Message) -> list[Message]:
        out: list[Message] = []
        background = update.get("background")
        if self.air and isinstance(background, list):
            out.extend(self._project_tasks(session, background))
        if update.get("state") == "idle" and update.get("stopReason") is not None:
            message_id, session.turn = session.turn, None
            if message_id is not None:
                answer = stop_answer(update)
                request_id = session.waiting.pop(message_id, None)
                if request_id is None:
                    session.ended[message_id] = answer
                else:
                    out.append(_answer(request_id, answer))
        return out

    # tool calls and terminals

    def _tool_update(self, session: Session, update: Message) -> list[Message]:
        tool_id = str(update.get("toolCallId"))
        tool = session.tools.get(tool_id)
        if tool is None:
            tool = session.tools[tool_id] = Tool(tool_id)
        was_final = tool.status in ("completed", "failed", "cancelled")
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
                self._add_content(session, tool, item)
        if not was_final and tool.status in ("completed", "failed", "cancelled"):
            tool.handed_off = {t for k, t in tool.content if k == "terminal"
                               and session.terminals.get(t, Terminal(t)).exit is None}
        out = self._emit(session, tool)
        if self.air:
            out.extend(self._task_pause(session, tool))
        return out

    def _tool_chunk(self, session: Session, update: Message) -> list[Message]:
        tool = session.tools.get(str(update.get("toolCallId")))
        if tool is None or not isinstance(update.get("content"), dict):
            return []
        self._add_content(session, tool, update["content"])
        return self._emit(session, tool)

    def _add_content(self, session: Session, tool: Tool, item: Any) -> None:
        if not isinstance(item, dict):
            return
        if item.get("type") == "terminal":
            terminal_id = str(item.get("terminalId"))
            terminal = session.terminals.setdefault(terminal_id, Terminal(terminal_id))
            if tool.tool_call_id not in terminal.tools:
                terminal.tools.append(tool.tool_call_id)
            tool.content.append(("terminal", terminal_id))
            return
        tool.content.extend(("v1", c) for c in v1_tool_content(item))

    def _terminal_update(self, session: Session, update: Message) -> list[Message]:
        terminal_id = str(update.get("terminalId"))
        terminal = session.terminals.setdefault(terminal_id, Terminal(terminal_id))
        if isinstance(update.get("command"), str):
            terminal.command = update["command"]
        output = update.get("output")
        if isinstance(output, dict) and isinstance(output.get("data"), str):
            terminal.text, terminal.truncated = "", bool(output.get("truncated"))
            terminal.append(b64(output["data"]))
        if isinstance(update.get("exitStatus"), dict):
            terminal.exit = update["exitStatus"]
            terminal.append(b"")
            return self._terminal_changed(session, terminal)
        return self._terminal_changed(session, terminal) if output is not None else []

    def _terminal_output(self, session: Session, update: Message) -> list[Message]:
        terminal = session.terminals.setdefault(str(update.get("terminalId")), Terminal(str(update.get("terminalId"))))
        if isinstance(update.get("data"), str):
            terminal.append(b64(update["data"]))
        return self._terminal_changed(session, terminal)

    def _terminal_changed(self, session: Session, terminal: Terminal) -> list[Message]:
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
                out.extend(self._emit(session, linked))
        return out

    def _v1_status(self, session: Session, tool: Tool) -> str:
        status = tool.status
        if status in ("completed", "failed", "cancelled") and tool.handed_off:
            terminals = [session.terminals.get(t) for t in tool.handed_off]
            if any(t is not None and t.exit is None for t in terminals):
                return "in_progress"  # handed off to a process that still runs: its exit decides
            if status == "completed" and any(t is not None and t.failed for t in terminals):
                return "failed"
        if status == "cancelled":
            return "failed"
        return status if status in V1_STATUSES else "in_progress"

    def _emit(self, session: Session, tool: Tool) -> list[Message]:
        fields: dict[str, Any] = {
            "title": tool.title or tool.tool_call_id,
            "status": self._v1_status(session, tool),
            "content": [self._render(session, k, v) for k, v in tool.content],
            **tool.fields,
        }
        if tool.kind is not None:
            fields["kind"] = tool.kind
        if tool.sent is None:
            tool.sent = fields
            return [_notify(session.session_id, {"sessionUpdate": "tool_call", "toolCallId": tool.tool_call_id,
                                                 **fields})]
        changed = {k: v for k, v in fields.items() if tool.sent.get(k) != v}
        for key in tool.sent.keys() - fields.keys():
            changed[key] = None
        tool.sent = fields
        if not changed:
            return []
        return [_notify(session.session_id, {"sessionUpdate": "tool_call_update", "toolCallId": tool.tool_call_id,
                                             **changed})]

    def _render(self, session: Session, kind: str, value: Any) -> dict[str, Any]:
        if kind == "terminal":
            terminal = session.terminals.get(value) or Terminal(value)
            return {"type": "content", "content": {"type": "text", "text": terminal.render()}}
        return dict(value)

    # subagents: a child session is a tool call of its parent; its messages are that tool call's content

    def _subagent(self, session: Session, update: Message) -> list[Message]:
        child_id = str(update.get("sessionId"))
        self.children[child_id] = session.session_id
        tool = session.tools.get(child_id)
        if tool is None:
            tool = session.tools[child_id] = Tool(child_id, kind="other", synthetic=True)
        if isinstance(update.get("title"), str):
            tool.title = update["title"]
        state = _obj(update.get("state"))
        if state.get("state") in ("running", "requires_action"):
            tool.status = "in_progress"
        elif state.get("state") == "idle" and state.get("stopReason") is not None:
            tool.status = "completed" if state["stopReason"] in STOP_REASONS - {"cancelled"} else "failed"
        return self._emit(session, tool)

    def _child_update(self, child_id: str, update: Message) -> list[Message]:
        parent = self.sessions.get(self.children[child_id])
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
        return self._emit(parent, tool)

    # plans and session-level updates

    def _plan(self, session: Session, update: Message) -> list[Message]:
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
        return [self._plan_message(session)]

    def _plan_removed(self, session: Session, update: Message) -> list[Message]:
        if session.plans.pop(str(update.get("planId")), None) is None:
            return []
        return [self._plan_message(session)]

    def _plan_message(self, session: Session) -> Message:
        entries = [e for entries in session.plans.values() for e in entries]
        return _notify(session.session_id, {"sessionUpdate": "plan", "entries": entries})

    def _available_commands(self, session: Session, update: Message) -> list[Message]:
        return [_notify(session.session_id, {"sessionUpdate": "available_commands_update",
                                             "availableCommands": v1_commands(update.get("availableCommands"))})]

    def _config_options(self, session: Session, update: Message) -> list[Message]:
        options = update.get("configOptions")
        if not isinstance(options, list):
            return []
        return self._options_changed(session, options, always_mode=False)

    def _options_changed(self, session: Session, options: list[dict[str, Any]], *, always_mode: bool,
                         with_options: bool = True) -> list[Message]:
        session.config_options = options
        out: list[Message] = []
        if with_options:
            out.append(_notify(session.session_id, {"sessionUpdate": "config_option_update",
                                                    "configOptions": v1_config_options(options)}))
        option = mode_option(options)
        if option is not None and (always_mode or option.get("currentValue") != session.mode):
            session.mode = option.get("currentValue")
            out.append(_notify(session.session_id, {"sessionUpdate": "current_mode_update",
                                                    "currentModeId": session.mode}))
        return out

    def _session_info(self, session: Session, update: Message) -> list[Message]:
        fields: dict[str, Any] = {k: update[k] for k in ("title", "updatedAt") if k in update}
        return [_notify(session.session_id, {"sessionUpdate": "session_info_update", **fields})]

    def _usage(self, session: Session, update: Message) -> list[Message]:
        fields: dict[str, Any] = {k: update[k] for k in ("used", "size", "cost") if k in update}
        return [_notify(session.session_id, {"sessionUpdate": "usage_update", **fields})]

    # permissions

    def _permission(self, request_id: Any, params: dict[str, Any]) -> list[Message]:
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            return [{"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": params}]
        title = str(params.get("title", ""))
        subject = _obj(params.get("subject"))
        out: list[Message] = []
        tool_id: str | None = None
        if subject.get("type") == "tool_call" and isinstance(subject.get("toolCall"), dict):
            tool_id = str(subject["toolCall"].get("toolCallId"))
        elif subject.get("type") == "command" and isinstance(subject.get("toolCallId"), str):
            tool_id = subject["toolCallId"]
        tool = session.tools.get(tool_id) if tool_id is not None else None
        synthetic = tool is None
        if tool is None:
            self._synthetic += 1
            tool = Tool(f"permission_{self._synthetic}", title=title, status="pending", synthetic=True,
                         kind="execute" if subject.get("type") == "command" else "other")
            if isinstance(subject.get("command"), str):
                tool.content.append(("v1", {"type": "content", "content": {"type": "text",
                                                                           "text": subject["command"]}}))
            session.tools[tool.tool_call_id] = tool
        out.extend(self._emit(session, tool))
        self._agent_requests[_key(request_id)] = ("session/request_permission", (session.session_id,
                                                                                  tool.tool_call_id, synthetic))
        v1 = {"sessionId": session.session_id, "toolCall": {"toolCallId": tool.tool_call_id, "title": title},
              "options": params.get("options", [])}
        out.append({"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": v1})
        return out

    def _after_permission(self, context: tuple[str, str, bool], answer: Message) -> list[Message]:
        session_id, tool_id, synthetic = context
        session = self.sessions.get(session_id)
        tool = session.tools.get(tool_id) if session is not None else None
        if session is None or tool is None or tool.sent is None:
            return []
        if synthetic:
            outcome = (answer.get("result") or {}).get("outcome") if isinstance(answer.get("result"), dict) else None
            selected = isinstance(outcome, dict) and outcome.get("outcome") == "selected"
            tool.status = "completed" if selected else "failed"
        else:
            tool.sent = {**tool.sent, "title": None}  # the request showed its question as the title: restore
        return self._emit(session, tool)

    # JetBrains AIR async tasks

    def _project_tasks(self, session: Session, background: list[Any]) -> list[Message]:
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
                out.append(_notify(session.session_id, self._spawned(session, key)))
        for key, state in list(session.tasks.items()):
            if key not in listed and state in ("running", "paused"):
                final = self._final_task_state(session, key)
                session.tasks[key] = final
                out.append(_notify(session.session_id, {"sessionUpdate": "async_task_state_update",
                                                        "asyncTaskId": key[1], "state": final}))
        return out

    def _spawned(self, session: Session, key: tuple[str, str]) -> Message:
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

    def _final_task_state(self, session: Session, key: tuple[str, str]) -> str:
        kind, item_id = key
        if kind == "tool_call":
            status = session.tools[item_id].status if item_id in session.tools else "completed"
            return {"completed": "completed", "failed": "failed"}.get(status, "stopped")
        terminal = session.terminals.get(item_id)
        if terminal is None or terminal.exit is None or terminal.exit.get("signal"):
            return "stopped"
        return "completed" if terminal.exit.get("exitCode") == 0 else "failed"

    def _task_pause(self, session: Session, tool: Tool) -> list[Message]:
        key = ("tool_call", tool.tool_call_id)
        state = session.tasks.get(key)
        wanted = "paused" if tool.status == "paused" else "running" if tool.status == "in_progress" else None
        if state not in ("running", "paused") or wanted is None or wanted == state:
            return []
        session.tasks[key] = wanted
        return [_notify(session.session_id, {"sessionUpdate": "async_task_state_update",
                                             "asyncTaskId": tool.tool_call_id, "state": wanted})]


# -- helpers -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Forward:
    """Send the runtime this v2 call; ``context`` comes back with its answer."""

    method: str
    params: dict[str, Any]
    context: Any = None


@dataclass(frozen=True, slots=True)
class _Answer:
    """The bridge answers the client itself with this result (a notification gets nothing)."""

    result: Any


@dataclass(frozen=True, slots=True)
class _Refuse:
    """The bridge answers the client itself with this error (a notification gets nothing)."""

    code: int
    message: str
    data: Any = None


@dataclass(frozen=True, slots=True)
class _Unchanged:
    """The message goes to the runtime as the client sent it."""


_UNCHANGED: Final = _Unchanged()
_Handled = _Forward | _Answer | _Refuse | _Unchanged
"""What a handler of a client message decided."""

def _gated(capability: str) -> Any:
    """An update forwarded unchanged only to a client that advertised ``session.<capability>``."""

    def forward(self: V1Translator, session: Session, update: Message) -> list[Message]:
        session_caps = self.client_capabilities.get("session")
        if isinstance(session_caps, dict) and session_caps.get(capability) is not None:
            return [_notify(session.session_id, dict(update))]
        return []

    return forward


_INCOMING: dict[str, Any] = {
    "initialize": V1Translator._initialize,
    "session/new": V1Translator._new_session,
    "session/load": V1Translator._load_session,
    "session/resume": V1Translator._resume_session,
    "session/prompt": V1Translator._prompt,
    "session/set_config_option": V1Translator._set_config_option,
    "session/set_mode": V1Translator._set_mode,
    "authenticate": V1Translator._authenticate,
    "session/close": lambda self, p: _Forward("session/close", p, str(p.get("sessionId"))),
    "session/fork": lambda self, p: _Forward(
        "session/fork", session_params(p, ("sessionId", "cwd", "additionalDirectories"))),
    "_session/async_task/stop": V1Translator._async_task_stop,
}

_OUTGOING_RESULTS: dict[str, Any] = {
    "initialize": V1Translator._initialized,
    "session/new": V1Translator._session_opened,
    "session/load": V1Translator._session_opened,
    "session/resume": V1Translator._session_opened,
    "session/fork": V1Translator._session_opened,
    "session/prompt": V1Translator._prompt_answered,
    "session/set_config_option": V1Translator._config_set,
    "session/set_mode": V1Translator._config_set,
    "session/close": V1Translator._closed,
    "_session/async_task/stop": V1Translator._stop_answered,
}

_UPDATES: dict[str, Any] = {
    "user_message": V1Translator._user_message,
    "user_message_chunk": V1Translator._user_chunk,
    "agent_message": V1Translator._agent_message,
    "agent_message_chunk": V1Translator._agent_chunk,
    "agent_thought": V1Translator._thought,
    "agent_thought_chunk": V1Translator._thought_chunk,
    "state_update": V1Translator._state,
    "tool_call_update": V1Translator._tool_update,
    "tool_call_content_chunk": V1Translator._tool_chunk,
    "terminal_update": V1Translator._terminal_update,
    "terminal_output_chunk": V1Translator._terminal_output,
    "subagent_update": V1Translator._subagent,
    "plan_update": V1Translator._plan,
    "plan_removed": V1Translator._plan_removed,
    "available_commands_update": V1Translator._available_commands,
    "config_option_update": V1Translator._config_options,
    "session_info_update": V1Translator._session_info,
    "usage_update": V1Translator._usage,
    "notice": _gated("notices"),
    "compaction_update": _gated("compaction"),
    "compaction_summary_chunk": _gated("compaction"),
}

