"""The router: pairs the agent's answers with the client's requests and routes every event to the judges, in the
order its tables write down.

The `JsonRpcJudge` sees every line and envelope first (framing,
ids, the client's own messages); what goes on reaches the rule families by these tables, each a tuple of judge names
called in that order:

- ``ON_ANSWER[method]``: the agent answered a client request (after its envelope was judged);
- ``AGENT_REQUEST``: the agent sent a request; ``WITHDRAWN``: it withdrew one (``$/cancel_request``);
- ``BEFORE_UPDATE`` then ``ON_UPDATE[kind]``: a ``session/update`` for a session;
- ``AT_END`` (with ``AT_SESSION_END`` for each session at ``EACH_SESSION``): the connection ended.

Violations come out in the order the judges report them, so these orders are part of the checker's behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..transcript import Direction
from .constants import C2A, MESSAGE_KINDS, UNPARSED
from .jsonrpc import JsonRpcJudge
from .judge import Judge
from .model import Answer, CheckerModel, Req, id_key, obj
from .shared import touch_session

# Who judges the agent's answer to a client request, by the request's method (others: the envelope only).
ON_ANSWER: dict[str, tuple[str, ...]] = {
    "initialize": ("sessions",),
    "session/new": ("sessions",),
    "session/fork": ("sessions",),
    "session/resume": ("preview", "sessions"),  # the preview judge still finds the resume window open
    "session/close": ("sessions",),
    "session/prompt": ("preview", "turns"),  # the preview judge marks a keyed retry, which R53/R57 then skip
    "session/list": ("sessions",),
    "session/delete": ("sessions",),
    "session/set_config_option": ("sessions",),
    "tool_call/cancel": ("items",),
    "terminal/cancel": ("items",),
}

# Who takes every request the agent sends (permission requests, elicitations, any other: a question in play).
AGENT_REQUEST: tuple[str, ...] = ("items",)

# Who judges the agent withdrawing one of its pending requests with ``$/cancel_request``.
WITHDRAWN: tuple[str, ...] = ("items",)

# Who sees every ``session/update`` first (its kind, R95, a replay, a state's value; where it falls against a resume's
# ``replay_complete``), whatever its kind.
BEFORE_UPDATE: tuple[str, ...] = ("turns", "preview")

# Who judges a ``session/update``, by its ``sessionUpdate`` kind (after ``BEFORE_UPDATE``).
ON_UPDATE: dict[str, tuple[str, ...]] = {
    **{kind: ("turns",) for kind in sorted(MESSAGE_KINDS)},
    "state_update": ("background", "turns"),  # the list first: the foreground state reads what it left
    "tool_call_update": ("items",),
    "tool_call_content_chunk": ("items",),
    "terminal_update": ("items",),
    "terminal_output_chunk": ("items",),
    "subagent_update": ("background",),
    "available_commands_update": ("turns",),
    "config_option_update": ("turns",),
    "replay_complete": ("preview",),
    "prompt_suggestions_update": ("preview",),
}

EACH_SESSION = "each session"
# What runs when the connection ends, in order; at ``EACH_SESSION`` the judges of ``AT_SESSION_END`` judge each
# session in turn.
AT_END: tuple[str, ...] = ("jsonrpc", "turns", "preview", EACH_SESSION, "items", "sessions")
AT_SESSION_END: tuple[str, ...] = ("turns", "background")


class Router:
    """Routes one connection's messages over ``model`` to the judges (``jsonrpc`` first, then the tables)."""

    def __init__(self, model: CheckerModel, jsonrpc: JsonRpcJudge, judges: Mapping[str, Judge]) -> None:
        self._m = model
        self._jsonrpc = jsonrpc
        self._judges = dict(judges)

    def feed(self, direction: Direction, message: Any, raw: bytes | None) -> None:
        """Route one message (``raw``: its line as written, parsed here when ``message`` is ``None``)."""
        if raw is not None:
            parsed = self._jsonrpc.read_line(direction, raw)
            if message is None:
                message = parsed
        if isinstance(message, dict) and set(message) == {UNPARSED}:
            self._jsonrpc.unparsed(direction, message)
            return
        if isinstance(message, list):
            if direction == C2A:
                self._jsonrpc.client_batch(message)
            else:
                self._agent_batch(message)
            return
        if direction == C2A:
            self._jsonrpc.client_message(message)
        else:
            self._agent_message(message)

    def finish(self) -> None:
        """Call every judge's end hooks in the order of ``AT_END``."""
        for name in AT_END:
            if name == EACH_SESSION:
                for s in self._m.sessions.values():
                    for judge in AT_SESSION_END:
                        self._judges[judge].at_session_end(s)
            else:
                self._judges[name].at_end()

    def _agent_batch(self, batch: list[Any]) -> None:
        if not self._jsonrpc.agent_batch(batch):
            return
        for entry in batch:
            self._jsonrpc.batch_member(entry)
            self._agent_message(entry)

    def _agent_message(self, message: Any) -> None:
        kind = self._jsonrpc.agent_envelope(message)
        if kind is None:
            return
        if kind == "response":
            self._answer(message)
            return
        self._jsonrpc.agent_call(message)
        if kind == "request":
            self._agent_request(message)
        elif message["method"] == "session/update":
            self._update(message)
        elif message["method"] == "$/cancel_request":
            self._withdrawal(message)

    def _agent_request(self, message: dict[str, Any]) -> None:
        key = self._jsonrpc.request_id(message)
        params = obj(message.get("params"))
        sid = params.get("sessionId")
        s = touch_session(self._m, sid, message)
        if s is None and isinstance(sid, str):
            return
        if s is not None:
            s.r95 = None  # another message named the session after its removal snapshot
        req = Req(key or ("none", None), message["method"], params, message, self._m.n,
                  sid if isinstance(sid, str) else None)
        if key is not None:
            self._m.agent_pending[key] = req
            self._m.agent_ids.add(key)
        for name in AGENT_REQUEST:
            self._judges[name].on_request(req)

    def _withdrawal(self, message: dict[str, Any]) -> None:
        key = id_key(obj(message.get("params")).get("requestId"))
        req = self._m.agent_pending.get(key)
        if req is None:
            self._jsonrpc.foreign_cancel(key, message)
            return
        req.withdrawn = True
        for name in WITHDRAWN:
            self._judges[name].on_withdrawn(req, message)

    def _answer(self, message: dict[str, Any]) -> None:
        """Pair an agent answer with the client request it answers, then route it by that request's method."""
        rid = message.get("id")
        if rid is None:
            self._jsonrpc.null_answer(message)
            return
        key = id_key(rid)
        if key in self._m.unjudged_ids:
            return
        req = self._m.client_pending.pop(key, None)
        if req is None:
            req = self._jsonrpc.unmatched(key, message)
            if req is None:
                return
        self._m.client_answered.add(req.key)
        error = obj(message.get("error"))
        answer = Answer(message, "result" in message, obj(message.get("result")),
                        error.get("code") if isinstance(error.get("code"), int) else None, error.get("data"))
        if not self._jsonrpc.answer_goes_on(req, answer):
            return
        for name in ON_ANSWER.get(req.method, ()):
            self._judges[name].on_answer(req, answer)

    def _update(self, message: dict[str, Any]) -> None:
        params = obj(message.get("params"))
        update = params.get("update")
        if not isinstance(update, dict):
            return
        s = touch_session(self._m, params.get("sessionId"), message)
        if s is None:
            return
        kind = update.get("sessionUpdate")
        for name in BEFORE_UPDATE:
            self._judges[name].before_update(s, kind, update, message)
        for name in ON_UPDATE.get(kind, ()) if isinstance(kind, str) else ():
            self._judges[name].on_update(s, kind, update, message)
