"""The JSON-RPC judge: framing, ids, requests, notifications and answers (and what the client side tells the model).

The router hands it every raw line and envelope first: it judges R1..R30's framing rules, takes the client's messages
(requests, notifications, answers to the agent's requests) into the model, and tells the router whether an agent
message or answer goes on to the rule families.
"""

from __future__ import annotations

import json
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
from .judge import BaseJudge
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


class JsonRpcJudge(BaseJudge):
    """Judges JSON-RPC framing, ids, requests, notifications and answers; takes the client's messages into the model.

    Besides the `Judge` hooks, the router calls its envelope methods (each
    named for the step of the router it serves).
    """

    def at_end(self) -> None:
        """Judge the requests never answered (R8, R16) and invalid input never answered (R9, R10, R11)."""
        self._r8_unanswered()
        self._r10_unanswered_invalid()

    def read_line(self, direction: Direction, raw: bytes) -> Any:
        """R1: one UTF-8 JSON value per line, no raw line breaks (agent lines only)."""
        line = raw[:-1] if raw.endswith(b"\n") else raw
        quoted = {UNPARSED: line.decode("utf-8", "replace")}
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            if direction == A2C:
                self._m.flag("R1", "the line is not valid UTF-8", quoted)
            return quoted
        if direction == A2C and ("\n" in text or "\r" in text):
            self._m.flag("R1", "the message contains a raw line break", quoted)
        try:
            return json.loads(text, strict=False)
        except ValueError:
            pass
        try:
            first, _ = json.JSONDecoder(strict=False).raw_decode(text.lstrip())
        except ValueError:
            return quoted
        if direction == A2C:
            self._m.flag("R1", "trailing data after the JSON value on one line", quoted)
        return first

    def unparsed(self, direction: Direction, message: Any) -> None:
        """A line that is not JSON: R2 from the agent; from the client it expects a -32700 (R10)."""
        self._m.n += 1
        if direction == A2C:
            self._m.flag("R2", "the agent wrote a line that is not JSON", message)
        else:
            self._m.expect_null("R10", -32700, message)

    def client_batch(self, batch: list[Any]) -> None:
        """Take a client batch: note what each member expects (R9, R10)."""
        if not batch:
            self._m.n += 1
            self._m.expect_null("R9", -32600, batch)
            return
        wants_reply = False
        for entry in batch:
            kind = self._m.classify(entry)
            if kind in ("request", "invalid") or obj(entry).get("jsonrpc") != "2.0":
                wants_reply = True
            self.client_message(entry)
        if wants_reply:
            self._m.batches_waiting += 1

    def agent_batch(self, batch: list[Any]) -> bool:
        """R9: the agent sends arrays only as the answer to a client batch (``False``: it answers none)."""
        if not batch or self._m.batches_waiting == 0:
            self._m.n += 1
            self._m.flag("R9", "the agent sent an array that answers no client batch", batch)
            return False
        self._m.batches_waiting -= 1
        return True

    def batch_member(self, entry: Any) -> None:
        """R9: an array from the agent holds only responses."""
        if self._m.classify(entry) != "response":
            self._m.flag("R9", "an array from the agent holds a non-response", entry)

    def client_message(self, message: Any) -> None:
        """Take one client message and route it as a request, notification or answer."""
        self._m.n += 1
        kind = self._m.classify(message)
        if kind == "invalid" or message.get("jsonrpc") != "2.0":
            self._m.expect_null("R10", -32600, message)
            return
        if kind == "request":
            rid = message["id"]
            if rid is None or isinstance(rid, float):
                integral = isinstance(rid, float) and rid.is_integer()
                if isinstance(rid, float) and integral:
                    self._m.unjudged_ids |= {("int", int(rid)), ("float", rid)}
                self._m.expect_null("R11", -32600, message, optional=integral)
            elif not is_id(rid):
                self._m.expect_null("R10", -32600, message)
            else:
                self._client_request(message)
        elif kind == "notification":
            self._client_notification(message)
        else:
            self._client_response(message)

    def _client_request(self, message: dict[str, Any]) -> None:
        key = id_key(message["id"])
        if key in self._m.client_pending:
            return  # the client reused a pending id: its own bug, not judged
        self._m.client_answered.discard(key)
        self._m.cancel_after_answer.discard(key)
        method: str = message["method"]
        params = message.get("params", {})
        sid = obj(params).get("sessionId")
        req = Req(key, method, obj(params), message, self._m.n, sid if isinstance(sid, str) else None)
        self._m.client_pending[key] = req
        self._r21_r26_expectations(req)
        req.bad_params = self._r13_params_broken(method, message)
        if req.session_id is not None:
            self._m.known.add(req.session_id)
            s = self._m.sessions.get(req.session_id)
            if s is not None:
                s.r95 = None
                req.extra["active"] = s.active or s.parent is not None
                req.extra["state"] = s.state
        if req.expect is None:
            self._request_snapshots(req)

    def _request_snapshots(self, req: Req) -> None:
        """Remember what the checker knew when a request arrived (judged at its answer)."""
        s = self._m.sessions.get(req.session_id or "")
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
            s = self._m.session(req.session_id)
            replay = req.params.get("replayFrom") is not None
            s.resume = Resume(req.key, self._m.n, replay, s.active and not s.closed)

    def _r21_r26_expectations(self, req: Req) -> None:
        """R21 / R26: requests that must be answered -32600 because of the initialization state."""
        if req.method == "initialize":
            version = req.params.get("protocolVersion")
            lower = isinstance(version, int) and self._m.negotiated is not None and version < self._m.negotiated
            if self._m.init_pending or (self._m.initialized and (self._m.request_since_init or lower)):
                req.expect = ("R26", -32600)
            self._m.init_pending += 1
        elif not self._m.initialized:
            if self._m.init_pending == 0:
                req.expect = ("R21", -32600)
        else:
            self._m.request_since_init = True

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
        s = self._m.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            return
        s.r95 = None
        if method == "session/cancel" and self._m.initialized:
            self._session_cancel(s, message)

    def _r16_r17_client_cancel(self, params: dict[str, Any]) -> None:
        """R16 / R17: remember withdrawn requests (must still be answered, exactly once)."""
        rid = params.get("requestId")
        if not is_id(rid):
            return
        key = id_key(rid)
        if key in self._m.client_pending:
            self._m.client_pending[key].cancel_requested = True
        elif key in self._m.client_answered:
            self._m.cancel_after_answer.add(key)

    def _session_cancel(self, s: SessionModel, message: Any) -> None:
        was_active = s.state is not None and s.state != "idle"
        listed = frozenset(self._m.covered(s, s.last_list or []))
        s.cancel = Cancel(self._m.n, message, was_active, listed, frozenset(s.work_message_ids))
        s.session_cancel_since_work = True
        # Sent while the client saw the session idle: if the next snapshot says ``running``, that work
        # may have started before the agent read this cancel (its prompt, or agent-initiated work), so
        # the agent may apply the cancel to it. The wire cannot tell; the judgement gives it the benefit.
        s.cancel_for_next = not was_active
        s.last_cancel_at = self._m.n

    def _client_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if not is_id(rid):
            return
        req = self._m.agent_pending.pop(id_key(rid), None)
        if req is None:
            return
        s = self._m.sessions.get(req.session_id or "")
        if s is not None:
            s.request_answered_at = self._m.n
            if req.method == "session/request_permission":
                s.permission_answered_since_work = True
        if req.method == "session/request_permission":
            self._m.record_outcome(req, message)

    def agent_envelope(self, message: Any) -> str | None:
        """Count an agent message and judge its envelope (R2, R3); its kind, or ``None`` if it goes no further."""
        self._m.n += 1
        if not isinstance(message, dict):
            self._m.flag("R2", "the agent wrote JSON that is not a message object", message)
            return None
        self._r3_jsonrpc(message)
        kind = self._m.classify(message)
        if kind == "invalid":
            self._m.flag("R2", "the agent wrote an object that is neither request, notification nor response", message)
            return None
        return kind

    def agent_call(self, message: dict[str, Any]) -> None:
        """An agent request or notification: not before initialize (R22), invented methods start with ``_`` (R84)."""
        self._r22_before_initialize(message)
        self._r84_method(message)

    def _r3_jsonrpc(self, message: dict[str, Any]) -> None:
        """R3: every message carries ``"jsonrpc": "2.0"``."""
        if message.get("jsonrpc") != "2.0":
            self._m.flag("R3", 'the message lacks "jsonrpc": "2.0"', message)

    def _r22_before_initialize(self, message: dict[str, Any]) -> None:
        """R22: no request or notification before the initialize success answer."""
        if not self._m.initialized:
            self._m.flag("R22", "the agent sent a request/notification before its initialize answer", message)

    def _r84_method(self, message: dict[str, Any]) -> None:
        """R84: methods the agent invents start with ``_``."""
        method = message["method"]
        if method not in agent_methods() and not method.startswith(("_", "$/")):
            self._m.flag("R84", f"unknown method {method!r} without the _ prefix", message)

    def request_id(self, message: dict[str, Any]) -> IdKey | None:
        """R6: agent request ids are strings/integers, not reused while pending."""
        rid = message["id"]
        if not is_id(rid):
            self._m.flag("R6", "request id must be a string or an integer", message)
            return None
        key = id_key(rid)
        if key in self._m.agent_pending:
            self._m.flag("R6", "request id reused while the earlier request is pending",
                         self._m.agent_pending[key].message, message)
        return key

    def foreign_cancel(self, key: IdKey, message: Any) -> None:
        """R17: the agent's ``$/cancel_request`` names a request the agent sent."""
        if key not in self._m.agent_ids:
            self._m.flag("R17", "$/cancel_request names no request the agent sent", message)

    def null_answer(self, message: dict[str, Any]) -> None:
        """R10 / R11 / R12: an ``id: null`` answer must match invalid client input."""
        if "result" in message:
            self._m.flag("R12", "a result with id null answers no request (a notification?)", message)
            return
        code = obj(message.get("error")).get("code")
        for i, expected in enumerate(self._m.null_expected):
            if expected[1] == code:
                del self._m.null_expected[i]
                return
        if self._m.null_expected:
            rule, want, bad, _ = self._m.null_expected.pop(0)
            self._m.flag(rule, f"invalid input must be answered {want} with id null", bad, message)
            return
        self._m.flag("R12", "an error with id null while no invalid input awaits one (answer to a notification?)",
                     message)

    def unmatched(self, key: IdKey, message: dict[str, Any]) -> Req | None:
        """R7 / R8 / R17: an answer that matches no pending request."""
        twin = id_twin(key)
        if twin is not None and twin in self._m.client_pending:
            req = self._m.client_pending.pop(twin)
            self._m.flag("R7", "the answer's id has another JSON type than the request's", req.message, message)
            return req
        if key in self._m.client_answered:
            rule = "R17" if key in self._m.cancel_after_answer else "R8"
            self._m.flag(rule, "a request was answered twice", message)
        else:
            self._m.flag("R7", "the answer's id matches no request the client sent", message)
        return None

    def answer_goes_on(self, req: Req, answer: Answer) -> bool:
        """Judge an answer's envelope (R12, R13, R15, R21, R26..R30, R102, R104); whether the families judge it."""
        if req.method == "initialize":
            self._m.init_pending = max(0, self._m.init_pending - 1)
        if req.expect is not None:
            rule, code = req.expect
            if answer.code != code:
                self._m.flag(rule, f"{req.method} must be answered with error {code} here", req.message, answer.message)
            return False
        if req.bad_params and answer.ok:
            self._m.flag("R13", "a request with invalid params was answered with a success", req.message,
                         answer.message)
            return False
        if answer.code == -32601:
            self._r12_method_not_found(req, answer)
            self._r27_r28_r30_implemented(req, answer)
        if answer.code == -32002:
            self._r15_not_found_data(req, answer)
        return not self._r15_success_on_closed(req, answer)

    def _r12_method_not_found(self, req: Req, answer: Answer) -> None:
        """R12: ``-32601`` carries ``data.method`` naming the request's method."""
        if obj(answer.data).get("method") != req.method:
            self._m.flag("R12", "-32601 must carry data.method with the request's method", req.message, answer.message)

    def _r27_r28_r30_implemented(self, req: Req, answer: Answer) -> None:
        """R27 / R28 / R30 / R102 / R104: methods the agent committed to are not -32601."""
        session = self._m.agent_caps.get("session")
        if req.method in BASELINE and isinstance(session, dict):
            self._m.flag("R27", f"{req.method} is baseline with capabilities.session", req.message, answer.message)
        elif req.method in OPTIONAL and isinstance(obj(session).get(OPTIONAL[req.method]), dict):
            self._m.flag("R28", f"{req.method} was advertised", req.message, answer.message)
        elif req.method in ("auth/login", "auth/logout") and self._m.auth_methods:
            self._m.flag("R30", f"{req.method} is required with authMethods", req.message, answer.message)
        elif req.method == "tool_call/cancel":
            self._m.flag("R102", "tool_call/cancel must be -32602, never -32601", req.message, answer.message)
        elif req.method == "terminal/cancel":
            self._m.flag("R104", "terminal/cancel must be -32602, never -32601", req.message, answer.message)

    def _r15_not_found_data(self, req: Req, answer: Answer) -> None:
        """R15: ``-32002`` carries ``data.sessionId`` = the requested session id."""
        if req.session_id is None or obj(answer.data).get("sessionId") != req.session_id:
            self._m.flag("R15", "-32002 must carry data.sessionId with the requested id", req.message, answer.message)

    def _r15_success_on_closed(self, req: Req, answer: Answer) -> bool:
        """R15: session-scoped requests for sessions not open on the connection are not a success."""
        if answer.ok and req.method in SESSION_SCOPED and req.extra.get("active") is not True:
            self._m.flag("R15", f"success for session {req.session_id!r}, which is not open on this connection",
                         req.message, answer.message)
            return True
        return False

    def _r8_unanswered(self) -> None:
        """R8 / R16: every client request was answered."""
        for req in self._m.client_pending.values():
            if req.cancel_requested:
                self._m.flag("R16", "request withdrawn with $/cancel_request was never answered", req.message)
            else:
                self._m.flag("R8", "request never answered", req.message)

    def _r10_unanswered_invalid(self) -> None:
        """R9 / R10 / R11: invalid client input got its ``id: null`` error."""
        for rule, code, message, optional in self._m.null_expected:
            if not optional:
                self._m.flag(rule, f"invalid input never answered with {code} and id null", message)
