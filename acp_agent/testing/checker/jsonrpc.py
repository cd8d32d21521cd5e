"""Judges of JSON-RPC framing, ids, requests, notifications and answers; routes each message on.

`JsonRpcRules` is one layer of [`WireChecker`][acp_agent.testing.WireChecker]; it may call the judges of
the layers below it (`SessionRules` and its bases), never those above.
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
            "initialize": self.answered_initialize,
            "session/new": self.answered_new,
            "session/fork": self.answered_fork,
            "session/resume": self.answered_resume,
            "session/close": self.answered_close,
            "session/prompt": self.answered_prompt,
            "session/list": self.answered_list,
            "session/delete": self.answered_delete,
            "session/set_config_option": self.answered_set_config_option,
            "tool_call/cancel": self.answered_tool_call_cancel,
            "terminal/cancel": self.answered_terminal_cancel,
        }

    def r1_line(self, direction: Direction, raw: bytes) -> Any:
        """R1: one UTF-8 JSON value per line, no raw line breaks (agent lines only)."""
        line = raw[:-1] if raw.endswith(b"\n") else raw
        quoted = {UNPARSED: line.decode("utf-8", "replace")}
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if direction == A2C:
                self.flag("R1", "the line is not valid UTF-8", quoted)
            return quoted
        if direction == A2C and ("\n" in text or "\r" in text):
            self.flag("R1", "the message contains a raw line break", quoted)
        try:
            return json.loads(text, strict=False)
        except ValueError:
            pass
        try:
            first, _ = json.JSONDecoder(strict=False).raw_decode(text.lstrip())
        except ValueError:
            return quoted
        if direction == A2C:
            self.flag("R1", "trailing data after the JSON value on one line", quoted)
        return first

    def client_batch(self, batch: list[Any]) -> None:
        """Take a client batch: note what each member expects (R9, R10)."""
        if not batch:
            self.n += 1
            self.expect_null("R9", -32600, batch)
            return
        wants_reply = False
        for entry in batch:
            kind = self.classify(entry)
            if kind in ("request", "invalid") or obj(entry).get("jsonrpc") != "2.0":
                wants_reply = True
            self.client_message(entry)
        if wants_reply:
            self.batches_waiting += 1

    def r9_agent_batch(self, batch: list[Any]) -> None:
        """R9: the agent sends arrays only as the answer to a client batch, holding only responses."""
        if not batch or self.batches_waiting == 0:
            self.n += 1
            self.flag("R9", "the agent sent an array that answers no client batch", batch)
            return
        self.batches_waiting -= 1
        for entry in batch:
            if self.classify(entry) != "response":
                self.flag("R9", "an array from the agent holds a non-response", entry)
            self.agent_message(entry)

    def client_message(self, message: Any) -> None:
        """Take one client message and route it as a request, notification or answer."""
        self.n += 1
        kind = self.classify(message)
        if kind == "invalid" or message.get("jsonrpc") != "2.0":
            self.expect_null("R10", -32600, message)
            return
        if kind == "request":
            rid = message["id"]
            if rid is None or isinstance(rid, float):
                integral = isinstance(rid, float) and rid.is_integer()
                if isinstance(rid, float) and integral:
                    self.unjudged_ids |= {("int", int(rid)), ("float", rid)}
                self.expect_null("R11", -32600, message, optional=integral)
            elif not is_id(rid):
                self.expect_null("R10", -32600, message)
            else:
                self._client_request(message)
        elif kind == "notification":
            self._client_notification(message)
        else:
            self._client_response(message)

    def _client_request(self, message: dict[str, Any]) -> None:
        key = id_key(message["id"])
        if key in self.client_pending:
            return  # the client reused a pending id: its own bug, not judged
        self.client_answered.discard(key)
        self.cancel_after_answer.discard(key)
        method: str = message["method"]
        params = message.get("params", {})
        sid = obj(params).get("sessionId")
        req = Req(key, method, obj(params), message, self.n, sid if isinstance(sid, str) else None)
        self.client_pending[key] = req
        self._r21_r26_expectations(req)
        req.bad_params = self._r13_params_broken(method, message)
        if req.session_id is not None:
            self.known.add(req.session_id)
            s = self.sessions.get(req.session_id)
            if s is not None:
                s.r95 = None
                req.extra["active"] = s.active or s.parent is not None
                req.extra["state"] = s.state
        if req.expect is None:
            self._request_snapshots(req)

    def _request_snapshots(self, req: Req) -> None:
        """Remember what the checker knew when a request arrived (judged at its answer)."""
        s = self.sessions.get(req.session_id or "")
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
            s = self.session(req.session_id)
            replay = req.params.get("replayFrom") is not None
            s.resume = Resume(req.key, self.n, replay, s.active and not s.closed)

    def _r21_r26_expectations(self, req: Req) -> None:
        """R21 / R26: requests that must be answered -32600 because of the initialization state."""
        if req.method == "initialize":
            version = req.params.get("protocolVersion")
            lower = isinstance(version, int) and self.negotiated is not None and version < self.negotiated
            if self.init_pending or (self.initialized and (self.request_since_init or lower)):
                req.expect = ("R26", -32600)
            self.init_pending += 1
        elif not self.initialized:
            if self.init_pending == 0:
                req.expect = ("R21", -32600)
        else:
            self.request_since_init = True

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
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            return
        s.r95 = None
        if method == "session/cancel" and self.initialized:
            self._session_cancel(s, message)

    def _r16_r17_client_cancel(self, params: dict[str, Any]) -> None:
        """R16 / R17: remember withdrawn requests (must still be answered, exactly once)."""
        rid = params.get("requestId")
        if not is_id(rid):
            return
        key = id_key(rid)
        if key in self.client_pending:
            self.client_pending[key].cancel_requested = True
        elif key in self.client_answered:
            self.cancel_after_answer.add(key)

    def _session_cancel(self, s: SessionModel, message: Any) -> None:
        was_active = s.state is not None and s.state != "idle"
        listed = frozenset(self.covered(s, s.last_list or []))
        s.cancel = Cancel(self.n, message, was_active, listed, frozenset(s.work_message_ids))
        s.session_cancel_since_work = True
        # Sent while the client saw the session idle: if the next snapshot says ``running``, that work
        # may have started before the agent read this cancel (its prompt, or agent-initiated work), so
        # the agent may apply the cancel to it. The wire cannot tell; the judgement gives it the benefit.
        s.cancel_for_next = not was_active
        s.last_cancel_at = self.n

    def _client_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if not is_id(rid):
            return
        req = self.agent_pending.pop(id_key(rid), None)
        if req is None:
            return
        s = self.sessions.get(req.session_id or "")
        if s is not None:
            s.request_answered_at = self.n
            if req.method == "session/request_permission":
                s.permission_answered_since_work = True
        if req.method == "session/request_permission":
            self.r20_record_outcome(req, message)

    def agent_message(self, message: Any) -> None:
        """Take one agent message, judge its envelope (R2, R3, R22) and route it on."""
        self.n += 1
        if not isinstance(message, dict):
            self.flag("R2", "the agent wrote JSON that is not a message object", message)
            return
        self._r3_jsonrpc(message)
        kind = self.classify(message)
        if kind == "invalid":
            self.flag("R2", "the agent wrote an object that is neither request, notification nor response", message)
            return
        if kind == "response":
            self._agent_response(message)
            return
        self._r22_before_initialize(message)
        self._r84_method(message)
        if kind == "request":
            self._agent_request(message)
        elif message["method"] == "session/update":
            self.on_update(message)
        elif message["method"] == "$/cancel_request":
            self._agent_cancel_request(message)

    def _r3_jsonrpc(self, message: dict[str, Any]) -> None:
        """R3: every message carries ``"jsonrpc": "2.0"``."""
        if message.get("jsonrpc") != "2.0":
            self.flag("R3", 'the message lacks "jsonrpc": "2.0"', message)

    def _r22_before_initialize(self, message: dict[str, Any]) -> None:
        """R22: no request or notification before the initialize success answer."""
        if not self.initialized:
            self.flag("R22", "the agent sent a request/notification before its initialize answer", message)

    def _r84_method(self, message: dict[str, Any]) -> None:
        """R84: methods the agent invents start with ``_``."""
        method = message["method"]
        if method not in agent_methods() and not method.startswith(("_", "$/")):
            self.flag("R84", f"unknown method {method!r} without the _ prefix", message)

    def _agent_request(self, message: dict[str, Any]) -> None:
        key = self._r6_request_id(message)
        params = obj(message.get("params"))
        sid = params.get("sessionId")
        s = self.session_touch(sid, message)
        if s is None and isinstance(sid, str):
            return
        req = Req(key or ("none", None), message["method"], params, message, self.n,
                   sid if isinstance(sid, str) else None)
        if key is not None:
            self.agent_pending[key] = req
            self.agent_ids.add(key)
        if req.method == "session/request_permission" and s is not None:
            self.permission_request(s, req)
        elif req.method == "elicitation/create":
            self.r83_elicitation_mode(req)
            tool = params.get("toolCallId")
            req.refs = frozenset({("tool_call", tool)} if isinstance(tool, str) else ())
            if s is not None:
                req.listed_at_send = frozenset(req.refs & self.covered(s, s.last_list or []))
        self.note_question(req)

    def _r6_request_id(self, message: dict[str, Any]) -> IdKey | None:
        """R6: agent request ids are strings/integers, not reused while pending."""
        rid = message["id"]
        if not is_id(rid):
            self.flag("R6", "request id must be a string or an integer", message)
            return None
        key = id_key(rid)
        if key in self.agent_pending:
            self.flag("R6", "request id reused while the earlier request is pending",
                       self.agent_pending[key].message, message)
        return key

    def _agent_cancel_request(self, message: dict[str, Any]) -> None:
        rid = obj(message.get("params")).get("requestId")
        key = id_key(rid)
        req = self.agent_pending.get(key)
        if req is None:
            self._r17_foreign_cancel(key, message)
            return
        req.withdrawn = True
        self.r107_kept_open(req, message)

    def _r17_foreign_cancel(self, key: IdKey, message: Any) -> None:
        """R17: the agent's ``$/cancel_request`` names a request the agent sent."""
        if key not in self.agent_ids:
            self.flag("R17", "$/cancel_request names no request the agent sent", message)

    def _agent_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if rid is None:
            self._r12_null_answer(message)
            return
        key = id_key(rid)
        if key in self.unjudged_ids:
            return
        req = self.client_pending.pop(key, None)
        if req is None:
            req = self._r7_r8_r17_unmatched(key, message)
            if req is None:
                return
        self.client_answered.add(req.key)
        error = message.get("error")
        answer = Answer(message, "result" in message, obj(message.get("result")),
                         obj(error).get("code") if isinstance(obj(error).get("code"), int) else None,
                         obj(error).get("data"))
        self._on_answer(req, answer)

    def _r12_null_answer(self, message: dict[str, Any]) -> None:
        """R10 / R11 / R12: an ``id: null`` answer must match invalid client input."""
        if "result" in message:
            self.flag("R12", "a result with id null answers no request (a notification?)", message)
            return
        code = obj(message.get("error")).get("code")
        for i, expected in enumerate(self.null_expected):
            if expected[1] == code:
                del self.null_expected[i]
                return
        if self.null_expected:
            rule, want, bad, _ = self.null_expected.pop(0)
            self.flag(rule, f"invalid input must be answered {want} with id null", bad, message)
            return
        self.flag("R12", "an error with id null while no invalid input awaits one (answer to a notification?)",
                   message)

    def _r7_r8_r17_unmatched(self, key: IdKey, message: dict[str, Any]) -> Req | None:
        """R7 / R8 / R17: an answer that matches no pending request."""
        twin = id_twin(key)
        if twin is not None and twin in self.client_pending:
            req = self.client_pending.pop(twin)
            self.flag("R7", "the answer's id has another JSON type than the request's", req.message, message)
            return req
        if key in self.client_answered:
            rule = "R17" if key in self.cancel_after_answer else "R8"
            self.flag(rule, "a request was answered twice", message)
        else:
            self.flag("R7", "the answer's id matches no request the client sent", message)
        return None

    def _on_answer(self, req: Req, answer: Answer) -> None:
        if req.method == "initialize":
            self.init_pending = max(0, self.init_pending - 1)
        if req.expect is not None:
            rule, code = req.expect
            if answer.code != code:
                self.flag(rule, f"{req.method} must be answered with error {code} here", req.message, answer.message)
            return
        if req.bad_params and answer.ok:
            self.flag("R13", "a request with invalid params was answered with a success", req.message,
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
            self.flag("R12", "-32601 must carry data.method with the request's method", req.message, answer.message)

    def _r27_r28_r30_implemented(self, req: Req, answer: Answer) -> None:
        """R27 / R28 / R30 / R102 / R104: methods the agent committed to are not -32601."""
        session = self.agent_caps.get("session")
        if req.method in BASELINE and isinstance(session, dict):
            self.flag("R27", f"{req.method} is baseline with capabilities.session", req.message, answer.message)
        elif req.method in OPTIONAL and isinstance(obj(session).get(OPTIONAL[req.method]), dict):
            self.flag("R28", f"{req.method} was advertised", req.message, answer.message)
        elif req.method in ("auth/login", "auth/logout") and self.auth_methods:
            self.flag("R30", f"{req.method} is required with authMethods", req.message, answer.message)
        elif req.method == "tool_call/cancel":
            self.flag("R102", "tool_call/cancel must be -32602, never -32601", req.message, answer.message)
        elif req.method == "terminal/cancel":
            self.flag("R104", "terminal/cancel must be -32602, never -32601", req.message, answer.message)

    def _r15_not_found_data(self, req: Req, answer: Answer) -> None:
        """R15: ``-32002`` carries ``data.sessionId`` = the requested session id."""
        if req.session_id is None or obj(answer.data).get("sessionId") != req.session_id:
            self.flag("R15", "-32002 must carry data.sessionId with the requested id", req.message, answer.message)

    def _r15_success_on_closed(self, req: Req, answer: Answer) -> bool:
        """R15: session-scoped requests for sessions not open on the connection are not a success."""
        if answer.ok and req.method in SESSION_SCOPED and req.extra.get("active") is not True:
            self.flag("R15", f"success for session {req.session_id!r}, which is not open on this connection",
                       req.message, answer.message)
            return True
        return False

    def r8_unanswered(self) -> None:
        """R8 / R16: every client request was answered."""
        for req in self.client_pending.values():
            if req.cancel_requested:
                self.flag("R16", "request withdrawn with $/cancel_request was never answered", req.message)
            else:
                self.flag("R8", "request never answered", req.message)

    def r10_unanswered_invalid(self) -> None:
        """R9 / R10 / R11: invalid client input got its ``id: null`` error."""
        for rule, code, message, optional in self.null_expected:
            if not optional:
                self.flag(rule, f"invalid input never answered with {code} and id null", message)
