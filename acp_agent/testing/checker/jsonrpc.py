"""Judges of JSON-RPC framing, ids, requests, notifications and answers; routes each message on.

:class:`JsonRpcRules` is one layer of :class:`~acp_agent.testing.checker.WireChecker`; it may call the judges of
the layers below it (:class:`SessionRules` and its bases), never those above.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from ..transcript import Direction
from .constants import (
    A2C,
    BASELINE,
    FINAL,
    OPTIONAL,
    REQUIRED,
    SESSION_SCOPED,
    UNPARSED,
    agent_methods,
)
from .model import (
    Answer,
    Cancel,
    IdKey,
    Req,
    Resume,
    SessionModel,
    id_key,
    id_twin,
    is_id,
    obj,
)
from .sessions import SessionRules


class JsonRpcRules(SessionRules):
    """Judges of JSON-RPC framing, ids, requests, notifications and answers; routes each message on."""

    def __init__(self, *, raise_on_violation: bool = True, ignore: Collection[str] = ()) -> None:
        super().__init__(raise_on_violation=raise_on_violation, ignore=ignore)
        self._answer_handlers: dict[str, Callable[[Req, Answer], None]] = {
            "initialize": self._answered_initialize,
            "session/new": self._answered_new,
            "session/fork": self._answered_fork,
            "session/resume": self._answered_resume,
            "session/close": self._answered_close,
            "session/prompt": self._answered_prompt,
            "session/list": self._answered_list,
            "session/delete": self._answered_delete,
            "session/set_config_option": self._answered_set_config_option,
            "tool_call/cancel": self._answered_tool_call_cancel,
            "terminal/cancel": self._answered_terminal_cancel,
        }

    def _r1_line(self, direction: Direction, raw: bytes) -> Any:
        """R1: one UTF-8 JSON value per line, no raw line breaks (agent lines only)."""
        line = raw[:-1] if raw.endswith(b"\n") else raw
        quoted = {UNPARSED: line.decode("utf-8", "replace")}
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if direction == A2C:
                self._flag("R1", "the line is not valid UTF-8", quoted)
            return quoted
        if direction == A2C and ("\n" in text or "\r" in text):
            self._flag("R1", "the message contains a raw line break", quoted)
        try:
            return json.loads(text, strict=False)
        except ValueError:
            pass
        try:
            first, _ = json.JSONDecoder(strict=False).raw_decode(text.lstrip())
        except ValueError:
            return quoted
        if direction == A2C:
            self._flag("R1", "trailing data after the JSON value on one line", quoted)
        return first

    def _client_batch(self, batch: list[Any]) -> None:
        if not batch:
            self._n += 1
            self._expect_null("R9", -32600, batch)
            return
        wants_reply = False
        for entry in batch:
            kind = self._classify(entry)
            if kind in ("request", "invalid") or obj(entry).get("jsonrpc") != "2.0":
                wants_reply = True
            self._client_message(entry)
        if wants_reply:
            self._batches_waiting += 1

    def _r9_agent_batch(self, batch: list[Any]) -> None:
        """R9: the agent sends arrays only as the answer to a client batch, holding only responses."""
        if not batch or self._batches_waiting == 0:
            self._n += 1
            self._flag("R9", "the agent sent an array that answers no client batch", batch)
            return
        self._batches_waiting -= 1
        for entry in batch:
            if self._classify(entry) != "response":
                self._flag("R9", "an array from the agent holds a non-response", entry)
            self._agent_message(entry)

    def _client_message(self, message: Any) -> None:
        self._n += 1
        kind = self._classify(message)
        if kind == "invalid" or message.get("jsonrpc") != "2.0":
            self._expect_null("R10", -32600, message)
            return
        if kind == "request":
            rid = message["id"]
            if rid is None or isinstance(rid, float):
                integral = isinstance(rid, float) and rid.is_integer()
                if isinstance(rid, float) and integral:
                    self._unjudged_ids |= {("int", int(rid)), ("float", rid)}
                self._expect_null("R11", -32600, message, optional=integral)
            elif not is_id(rid):
                self._expect_null("R10", -32600, message)
            else:
                self._client_request(message)
        elif kind == "notification":
            self._client_notification(message)
        else:
            self._client_response(message)

    def _client_request(self, message: dict[str, Any]) -> None:
        key = id_key(message["id"])
        if key in self._client_pending:
            return  # the client reused a pending id: its own bug, not judged
        self._client_answered.discard(key)
        self._cancel_after_answer.discard(key)
        method: str = message["method"]
        params = message.get("params", {})
        sid = obj(params).get("sessionId")
        req = Req(key, method, obj(params), message, self._n, sid if isinstance(sid, str) else None)
        self._client_pending[key] = req
        self._r21_r26_expectations(req)
        req.bad_params = self._r13_params_broken(method, message)
        if req.session_id is not None:
            self._known.add(req.session_id)
            s = self._sessions.get(req.session_id)
            if s is not None:
                s.r95 = None
                req.extra["active"] = s.active or s.parent is not None
                req.extra["state"] = s.state
        if req.expect is None:
            self._request_snapshots(req)

    def _request_snapshots(self, req: Req) -> None:
        """Remember what the checker knew when a request arrived (judged at its answer)."""
        s = self._sessions.get(req.session_id or "")
        if req.method == "tool_call/cancel" and s is not None:
            tc = s.tool_calls.get(str(req.params.get("toolCallId")))
            req.extra["item"] = None if tc is None else (tc.status in FINAL, tc.cancel)
            if tc is not None:  # its final status may come before the answer
                tc.cancel_requested = True
        elif req.method == "terminal/cancel" and s is not None:
            term = s.terminals.get(str(req.params.get("terminalId")))
            req.extra["item"] = None if term is None else (term.exited, term.cancel)
            if term is not None:
                term.cancelled = True
        elif req.method == "session/resume" and req.session_id is not None and not req.bad_params:
            s = self._session(req.session_id)
            replay = req.params.get("replayFrom") is not None
            s.resume = Resume(req.key, self._n, replay, s.active and not s.closed)

    def _r21_r26_expectations(self, req: Req) -> None:
        """R21 / R26: requests that must be answered -32600 because of the initialization state."""
        if req.method == "initialize":
            version = req.params.get("protocolVersion")
            lower = isinstance(version, int) and self._negotiated is not None and version < self._negotiated
            if self._init_pending or (self._initialized and (self._request_since_init or lower)):
                req.expect = ("R26", -32600)
            self._init_pending += 1
        elif not self._initialized:
            if self._init_pending == 0:
                req.expect = ("R21", -32600)
        else:
            self._request_since_init = True

    def _r13_params_broken(self, method: str, message: dict[str, Any]) -> bool:
        """R13: structurally invalid params of a known method (judged when the answer is a success)."""
        required = REQUIRED.get(method)
        if required is None:
            return False
        if "params" not in message:
            return bool(required)
        params = message["params"]
        if not isinstance(params, dict):
            return True
        for name, kind in required.items():
            value = params.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                return True
        return False

    def _client_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = obj(message.get("params"))
        if method == "$/cancel_request":
            self._r16_r17_client_cancel(params)
            return
        sid = params.get("sessionId")
        s = self._sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            return
        s.r95 = None
        if method == "session/cancel" and self._initialized:
            self._session_cancel(s, message)

    def _r16_r17_client_cancel(self, params: dict[str, Any]) -> None:
        """R16 / R17: remember withdrawn requests (must still be answered, exactly once)."""
        rid = params.get("requestId")
        if not is_id(rid):
            return
        key = id_key(rid)
        if key in self._client_pending:
            self._client_pending[key].cancel_requested = True
        elif key in self._client_answered:
            self._cancel_after_answer.add(key)

    def _session_cancel(self, s: SessionModel, message: Any) -> None:
        was_active = s.state is not None and s.state != "idle"
        listed = frozenset(self._covered(s, s.last_list or []))
        s.cancel = Cancel(self._n, message, was_active, listed, frozenset(s.work_message_ids))
        s.session_cancel_since_work = True
        # Sent while the client saw the session idle: if the next snapshot says ``running``, that work
        # may have started before the agent read this cancel (its prompt, or agent-initiated work), so
        # the agent may apply the cancel to it. The wire cannot tell; the judgement gives it the benefit.
        s.cancel_for_next = not was_active
        s.last_cancel_at = self._n

    def _client_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if not is_id(rid):
            return
        req = self._agent_pending.pop(id_key(rid), None)
        if req is None:
            return
        s = self._sessions.get(req.session_id or "")
        if s is not None:
            s.request_answered_at = self._n
            if req.method == "session/request_permission":
                s.permission_answered_since_work = True
        if req.method == "session/request_permission":
            self._r20_record_outcome(req, message)

    def _agent_message(self, message: Any) -> None:
        self._n += 1
        if not isinstance(message, dict):
            self._flag("R2", "the agent wrote JSON that is not a message object", message)
            return
        self._r3_jsonrpc(message)
        kind = self._classify(message)
        if kind == "invalid":
            self._flag("R2", "the agent wrote an object that is neither request, notification nor response", message)
            return
        if kind == "response":
            self._agent_response(message)
            return
        self._r22_before_initialize(message)
        self._r84_method(message)
        if kind == "request":
            self._agent_request(message)
        elif message["method"] == "session/update":
            self._on_update(message)
        elif message["method"] == "$/cancel_request":
            self._agent_cancel_request(message)

    def _r3_jsonrpc(self, message: dict[str, Any]) -> None:
        """R3: every message carries ``"jsonrpc": "2.0"``."""
        if message.get("jsonrpc") != "2.0":
            self._flag("R3", 'the message lacks "jsonrpc": "2.0"', message)

    def _r22_before_initialize(self, message: dict[str, Any]) -> None:
        """R22: no request or notification before the initialize success answer."""
        if not self._initialized:
            self._flag("R22", "the agent sent a request/notification before its initialize answer", message)

    def _r84_method(self, message: dict[str, Any]) -> None:
        """R84: methods the agent invents start with ``_``."""
        method = message["method"]
        if method not in agent_methods() and not method.startswith(("_", "$/")):
            self._flag("R84", f"unknown method {method!r} without the _ prefix", message)

    def _agent_request(self, message: dict[str, Any]) -> None:
        key = self._r6_request_id(message)
        params = obj(message.get("params"))
        sid = params.get("sessionId")
        s = self._session_touch(sid, message)
        if s is None and isinstance(sid, str):
            return
        req = Req(key or ("none", None), message["method"], params, message, self._n,
                   sid if isinstance(sid, str) else None)
        if key is not None:
            self._agent_pending[key] = req
            self._agent_ids.add(key)
        if req.method == "session/request_permission" and s is not None:
            self._permission_request(s, req)
        elif req.method == "elicitation/create":
            self._r83_elicitation_mode(req)
            tool = params.get("toolCallId")
            req.refs = frozenset({("tool_call", tool)} if isinstance(tool, str) else ())
            if s is not None:
                req.listed_at_send = frozenset(req.refs & self._covered(s, s.last_list or []))
        self._note_question(req)

    def _r6_request_id(self, message: dict[str, Any]) -> IdKey | None:
        """R6: agent request ids are strings/integers, not reused while pending."""
        rid = message["id"]
        if not is_id(rid):
            self._flag("R6", "request id must be a string or an integer", message)
            return None
        key = id_key(rid)
        if key in self._agent_pending:
            self._flag("R6", "request id reused while the earlier request is pending",
                       self._agent_pending[key].message, message)
        return key

    def _agent_cancel_request(self, message: dict[str, Any]) -> None:
        rid = obj(message.get("params")).get("requestId")
        key = id_key(rid)
        req = self._agent_pending.get(key)
        if req is None:
            self._r17_foreign_cancel(key, message)
            return
        req.withdrawn = True
        self._r107_kept_open(req, message)

    def _r17_foreign_cancel(self, key: IdKey, message: Any) -> None:
        """R17: the agent's ``$/cancel_request`` names a request the agent sent."""
        if key not in self._agent_ids:
            self._flag("R17", "$/cancel_request names no request the agent sent", message)

    def _agent_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if rid is None:
            self._r12_null_answer(message)
            return
        key = id_key(rid)
        if key in self._unjudged_ids:
            return
        req = self._client_pending.pop(key, None)
        if req is None:
            req = self._r7_r8_r17_unmatched(key, message)
            if req is None:
                return
        self._client_answered.add(req.key)
        error = message.get("error")
        answer = Answer(message, "result" in message, obj(message.get("result")),
                         obj(error).get("code") if isinstance(obj(error).get("code"), int) else None,
                         obj(error).get("data"))
        self._on_answer(req, answer)

    def _r12_null_answer(self, message: dict[str, Any]) -> None:
        """R10 / R11 / R12: an ``id: null`` answer must match invalid client input."""
        if "result" in message:
            self._flag("R12", "a result with id null answers no request (a notification?)", message)
            return
        code = obj(message.get("error")).get("code")
        for i, expected in enumerate(self._null_expected):
            if expected[1] == code:
                del self._null_expected[i]
                return
        if self._null_expected:
            rule, want, bad, _ = self._null_expected.pop(0)
            self._flag(rule, f"invalid input must be answered {want} with id null", bad, message)
            return
        self._flag("R12", "an error with id null while no invalid input awaits one (answer to a notification?)",
                   message)

    def _r7_r8_r17_unmatched(self, key: IdKey, message: dict[str, Any]) -> Req | None:
        """R7 / R8 / R17: an answer that matches no pending request."""
        twin = id_twin(key)
        if twin is not None and twin in self._client_pending:
            req = self._client_pending.pop(twin)
            self._flag("R7", "the answer's id has another JSON type than the request's", req.message, message)
            return req
        if key in self._client_answered:
            rule = "R17" if key in self._cancel_after_answer else "R8"
            self._flag(rule, "a request was answered twice", message)
        else:
            self._flag("R7", "the answer's id matches no request the client sent", message)
        return None

    def _on_answer(self, req: Req, answer: Answer) -> None:
        if req.method == "initialize":
            self._init_pending = max(0, self._init_pending - 1)
        if req.expect is not None:
            rule, code = req.expect
            if answer.code != code:
                self._flag(rule, f"{req.method} must be answered with error {code} here", req.message, answer.message)
            return
        if req.bad_params and answer.ok:
            self._flag("R13", "a request with invalid params was answered with a success", req.message,
                       answer.message)
            return
        if answer.code == -32601:
            self._r12_method_not_found(req, answer)
            self._r27_r28_r30_implemented(req, answer)
        if answer.code == -32002:
            self._r15_not_found_data(req, answer)
        if self._r15_success_on_closed(req, answer):
            return
        handler = self._answer_handlers.get(req.method)
        if handler is not None:
            handler(req, answer)

    def _r12_method_not_found(self, req: Req, answer: Answer) -> None:
        """R12: ``-32601`` carries ``data.method`` naming the request's method."""
        if obj(answer.data).get("method") != req.method:
            self._flag("R12", "-32601 must carry data.method with the request's method", req.message, answer.message)

    def _r27_r28_r30_implemented(self, req: Req, answer: Answer) -> None:
        """R27 / R28 / R30 / R102 / R104: methods the agent committed to are not -32601."""
        session = self._agent_caps.get("session")
        if req.method in BASELINE and isinstance(session, dict):
            self._flag("R27", f"{req.method} is baseline with capabilities.session", req.message, answer.message)
        elif req.method in OPTIONAL and isinstance(obj(session).get(OPTIONAL[req.method]), dict):
            self._flag("R28", f"{req.method} was advertised", req.message, answer.message)
        elif req.method in ("auth/login", "auth/logout") and self._auth_methods:
            self._flag("R30", f"{req.method} is required with authMethods", req.message, answer.message)
        elif req.method == "tool_call/cancel":
            self._flag("R102", "tool_call/cancel must be -32602, never -32601", req.message, answer.message)
        elif req.method == "terminal/cancel":
            self._flag("R104", "terminal/cancel must be -32602, never -32601", req.message, answer.message)

    def _r15_not_found_data(self, req: Req, answer: Answer) -> None:
        """R15: ``-32002`` carries ``data.sessionId`` = the requested session id."""
        if req.session_id is None or obj(answer.data).get("sessionId") != req.session_id:
            self._flag("R15", "-32002 must carry data.sessionId with the requested id", req.message, answer.message)

    def _r15_success_on_closed(self, req: Req, answer: Answer) -> bool:
        """R15: session-scoped requests for sessions not open on the connection are not a success."""
        if answer.ok and req.method in SESSION_SCOPED and req.extra.get("active") is not True:
            self._flag("R15", f"success for session {req.session_id!r}, which is not open on this connection",
                       req.message, answer.message)
            return True
        return False

    def _r8_unanswered(self) -> None:
        """R8 / R16: every client request was answered."""
        for req in self._client_pending.values():
            if req.cancel_requested:
                self._flag("R16", "request withdrawn with $/cancel_request was never answered", req.message)
            else:
                self._flag("R8", "request never answered", req.message)

    def _r10_unanswered_invalid(self) -> None:
        """R9 / R10 / R11: invalid client input got its ``id: null`` error."""
        for rule, code, message, optional in self._null_expected:
            if not optional:
                self._flag(rule, f"invalid input never answered with {code} and id null", message)
