"""The wire checker: one minimal transcript per rule that breaks exactly that rule, and good
transcripts (the reference's worked examples and near misses) that pass."""

# Transcripts are built as ``PREFIX + [steps...]``; unpacking would make them harder to read.
# ruff: noqa: RUF005

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from acp_agent.testing import checker as checker_module
from acp_agent.testing.checker import RULES, SHOULD_RULES, RuleViolation, WireChecker, check_transcript
from acp_agent.testing.client import TranscriptEntry

Direction = Literal["client->agent", "agent->client"]
C: Direction = "client->agent"
A: Direction = "agent->client"
SID = "sess_abc123"


@dataclass(frozen=True)
class Raw:
    """A raw line as written on the wire (exercises R1 / R2)."""

    direction: Direction
    data: bytes


Step = tuple[Direction, Any] | Raw


# -- message builders -------------------------------------------------------------------------


def rq(rid: Any, method: str, /, **params: Any) -> Step:
    """Client request."""
    return (C, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def nt(method: str, /, **params: Any) -> Step:
    """Client notification."""
    return (C, {"jsonrpc": "2.0", "method": method, "params": params})


def ok(rid: Any, result: Any = None) -> Step:
    """Agent success answer."""
    return (A, {"jsonrpc": "2.0", "id": rid, "result": {} if result is None else result})


def err(rid: Any, code: int, data: Any = None) -> Step:
    """Agent error answer."""
    error: dict[str, Any] = {"code": code, "message": "error"}
    if data is not None:
        error["data"] = data
    return (A, {"jsonrpc": "2.0", "id": rid, "error": error})


def areq(rid: Any, method: str, /, **params: Any) -> Step:
    """Agent request."""
    return (A, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def anote(method: str, /, **params: Any) -> Step:
    """Agent notification."""
    return (A, {"jsonrpc": "2.0", "method": method, "params": params})


def cans(rid: Any, result: Any) -> Step:
    """Client answer to an agent request."""
    return (C, {"jsonrpc": "2.0", "id": rid, "result": result})


def up(update_kind: str, sid: str = SID, /, **fields: Any) -> Step:
    """Agent ``session/update``."""
    return anote("session/update", sessionId=sid, update={"sessionUpdate": update_kind, **fields})


def st(state: str, sid: str = SID, /, **fields: Any) -> Step:
    return up("state_update", sid, state=state, **fields)


def tool(tid: str, sid: str = SID, /, **fields: Any) -> Step:
    return up("tool_call_update", sid, toolCallId=tid, **fields)


def term(tid: str, sid: str = SID, /, **fields: Any) -> Step:
    return up("terminal_update", sid, terminalId=tid, **fields)


def T(tid: str) -> dict[str, str]:  # background items, short names on purpose
    return {"type": "tool_call", "toolCallId": tid}


def X(tid: str) -> dict[str, str]:
    return {"type": "terminal", "terminalId": tid}


def K(sid: str) -> dict[str, str]:
    return {"type": "subagent", "sessionId": sid}


TEXT = [{"type": "text", "text": "hi"}]
CHILD = "sess_child"
OPTIONS = [{"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
           {"optionId": "deny", "name": "Reject", "kind": "reject_once"}]
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow"}}
DENY = {"outcome": {"outcome": "selected", "optionId": "deny"}}
CANCELLED = {"outcome": {"outcome": "cancelled"}}
CANCEL: dict[str, Any] = {"cancel": {}}


def perm(rid: Any, sid: str = SID, /, **params: Any) -> Step:
    return areq(rid, "session/request_permission", sessionId=sid, title="Allow?", options=OPTIONS, **params)


def tc_subject(tid: str) -> dict[str, Any]:
    return {"type": "tool_call", "toolCall": {"toolCallId": tid}}


def init(caps: Any = None, client_caps: Any = None, **result: Any) -> list[Step]:
    params: dict[str, Any] = {"protocolVersion": 2, "info": {"name": "client", "version": "1"}}
    if client_caps is not None:
        params["capabilities"] = client_caps
    body = {"protocolVersion": 2, "info": {"name": "agent", "version": "1"},
            "capabilities": {"session": {}} if caps is None else caps, **result}
    return [rq(0, "initialize", **params), ok(0, body)]


def new(sid: str = SID, rid: Any = 1) -> list[Step]:
    return [rq(rid, "session/new", cwd="/home/user/project"), ok(rid, {"sessionId": sid})]


OPEN = init() + new()


def run(steps: list[Step], **options: Any) -> WireChecker:
    checker = WireChecker(raise_on_violation=False, **options)
    for step in steps:
        if isinstance(step, Raw):
            checker.feed_line(step.direction, step.data)
        else:
            checker.feed(step[0], step[1])
    checker.finish()
    return checker


def broken(steps: list[Step]) -> set[str]:
    return run(steps).rules


# -- good transcripts -------------------------------------------------------------------------

WORKED_EXAMPLE = OPEN + [  # §11.16, verbatim
    st("running", background=[]),
    tool("call_010", name="bash", title="npm run dev (background)", kind="execute", status="in_progress",
         content=[X("term_003")]),
    term("term_003", command="npm run dev", cwd="/home/user/project", capabilities=CANCEL),
    tool("call_010", status="completed"),
    tool("call_012", name="schedule_wakeup", title="Check the deploy in 10 minutes", kind="other",
         status="pending", capabilities=CANCEL),
    st("running", background=[X("term_003"), T("call_012")]),
    st("idle", stopReason="end_turn", background=[X("term_003"), T("call_012")]),
    up("terminal_output_chunk", terminalId="term_003", data="R0VUIC8gMjAwDQo="),
    rq(8, "terminal/cancel", sessionId=SID, terminalId="term_003"),
    ok(8),
    term("term_003", exitStatus={"signal": "SIGTERM"}, capabilities=None),
    st("idle", background=[T("call_012")]),
    tool("call_012", status="completed", capabilities=None),
    st("running", background=[]),
    up("agent_message", messageId="msg_a9", content=[{"type": "text", "text": "Deploy check: all healthy."}]),
    st("idle", stopReason="end_turn", background=[]),
]

PROMPT_TURN = OPEN + [  # §6.4, verbatim, with the prompt request and its answer
    rq(2, "session/prompt", sessionId=SID, prompt=[{"type": "text", "text": "Why does test_login fail?"}]),
    up("user_message", messageId="msg_u1", content=[{"type": "text", "text": "Why does test_login fail?"}]),
    ok(2, {"messageId": "msg_u1"}),
    up("agent_message_chunk", messageId="msg_a1", content={"type": "text", "text": "Let me run the test first."}),
    tool("call_001", name="bash", title="Run pytest tests/test_login.py", kind="execute", status="pending",
         rawInput={"command": "pytest tests/test_login.py"}),
    perm("perm-1", subject={"type": "command", "command": "pytest tests/test_login.py", "cwd": "/home/user/project",
                            "toolCallId": "call_001"}),
    st("requires_action"),
    cans("perm-1", ALLOW),
    st("running"),
    tool("call_001", status="in_progress", content=[X("term_001")]),
    term("term_001", command="pytest tests/test_login.py", cwd="/home/user/project", size={"cols": 120, "rows": 40}),
    up("terminal_output_chunk", terminalId="term_001", data="MSBmYWlsZWQsIDEyIHBhc3NlZA0K"),
    term("term_001", exitStatus={"exitCode": 1}),
    tool("call_001", status="completed", rawOutput={"exitCode": 1}),
    up("agent_message", messageId="msg_a2", content=[{"type": "text", "text": "The fixture sets an expired token."}]),
    st("idle", stopReason="end_turn"),
]

RESUME = init() + [  # §11.14, a session this connection never saw, resumed without replay
    rq(21, "session/resume", sessionId=SID, cwd="/home/user/project"),
    tool("call_012", title="Check the deploy in 10 minutes", kind="other", status="pending", capabilities=CANCEL),
    term("term_003", command="npm run dev", cwd="/home/user/project",
         output={"data": "VklURSByZWFkeSBpbiAzMTIgbXMNCg=="}, capabilities=CANCEL),
    st("idle", background=[X("term_003"), T("call_012")]),
    ok(21),
    rq(22, "tool_call/cancel", sessionId=SID, toolCallId="call_012"),
    tool("call_012", status="cancelled", capabilities=None),  # may come before the answer (§11.5)
    ok(22),
    st("idle", background=[X("term_003")]),
    rq(23, "session/close", sessionId=SID),
    ok(23),
]

REPLAY = OPEN + [  # a turn, then a resume of the open session with full replay
    rq(2, "session/prompt", sessionId=SID, prompt=TEXT),
    ok(2, {"messageId": "u1"}),
    up("user_message", messageId="u1", content=TEXT),
    st("running", background=[]),
    tool("t1", title="watch", status="in_progress"),
    up("agent_message_chunk", messageId="a1", content={"type": "text", "text": "wat"}),
    up("agent_message_chunk", messageId="a1", content={"type": "text", "text": "ching"}),
    st("running", background=[T("t1")]),
    st("idle", stopReason="end_turn", background=[T("t1")]),
    tool("t2", title="grep", status="in_progress"),  # unlisted leftover of the turn
    rq(3, "session/resume", sessionId=SID, cwd="/home/user/project", replayFrom={"type": "start"}),
    tool("t2", status="completed"),  # live patch the agent sent before it saw the resume request
    up("user_message", messageId="u1", content=TEXT),
    tool("t1", title="watch", status="pending"),  # history replayed from the start...
    tool("t1", status="in_progress"),
    tool("t2", title="grep", status="pending"),
    tool("t2", status="in_progress"),
    tool("t2", status="completed"),
    up("agent_message", messageId="a1", content=[{"type": "text", "text": "watching"}]),
    up("replay_complete"),  # the history ends (P8)...
    tool("t1", title="watch", status="in_progress"),  # ...and the re-announcement
    st("idle", stopReason="end_turn", background=[T("t1")]),  # repeats the last stop reason: allowed (R62)
    ok(3, {"configOptions": []}),
    tool("t1", status="completed"),
    st("idle", background=[]),
]

NEAR_MISSES = init(caps={"session": {"fork": {}, "delete": {}}}, client_caps={"elicitation": {"form": {}}}) + new() + [
    # a batch and its answer array; ids 1 and "1" are different requests
    (C, [{"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}},
         {"jsonrpc": "2.0", "method": "_ping", "params": {}}]),
    (A, [{"jsonrpc": "2.0", "id": 7, "result": {"sessions": []}}]),
    rq(10, "session/list"), rq("10", "session/list"),
    ok("10", {"sessions": []}), ok(10, {"sessions": []}),
    # invalid input answered with id null
    (C, {"<unparsed>": "{oops"}), err(None, -32700),
    (C, {"jsonrpc": "2.0", "id": None, "method": "session/list"}), err(None, -32600),
    (C, []), err(None, -32600),
    rq(11, "_vendor/thing"), err(11, -32601, {"method": "_vendor/thing"}),
    rq(12, "session/prompt", sessionId="nope", prompt=TEXT), err(12, -32002, {"sessionId": "nope"}),
    rq(13, "session/close", sessionId="nope"), ok(13),
    # a turn whose shell is listed through its terminal; its tool call is covered by it (R88)
    st("running", background=[]),
    tool("t1", title="dev server", status="in_progress", content=[X("x1")]),
    term("x1", command="npm run dev", cwd="/p", capabilities=CANCEL),
    st("running", background=[X("x1")]),
    tool("t2", title="workflow", status="in_progress", content=[X("x1"), {"type": "content", "content": TEXT[0]}]),
    st("running", background=[X("x1"), T("t2")]),  # t2 has more than the terminal: it may be listed
    tool("t2", status="paused"),
    st("idle", stopReason="end_turn", background=[X("x1"), T("t2")]),
    st("idle", stopReason="end_turn", background=[X("x1"), T("t2")]),  # same stop reason repeated: fine
    # a background permission request after the listing; a foreground one withdrawn on session/cancel
    perm("p1", subject=tc_subject("t2")),
    rq(14, "session/prompt", sessionId=SID, prompt=TEXT),
    ok(14, {"messageId": "u2"}),
    up("user_message", messageId="u2", content=TEXT),
    st("running", background=[X("x1"), T("t2")]),
    tool("t3", title="edit", status="pending"),
    perm("p2", subject=tc_subject("t3")),
    st("requires_action", background=[X("x1"), T("t2")]),
    nt("session/cancel", sessionId=SID),
    anote("$/cancel_request", requestId="p2"),
    cans("p2", CANCELLED),
    tool("t3", status="cancelled"),
    st("idle", stopReason="cancelled", background=[X("x1"), T("t2")]),
    cans("p1", DENY),
    # the process exits, then its tool call ends: removal after finalization
    term("x1", exitStatus={"exitCode": 0}, capabilities=None),
    tool("t1", status="completed"),
    st("idle", background=[T("t2")]),
    # a detached child: listed while running, dropped once idle with an empty list
    up("subagent_update", sessionId="kid", title="explore", capabilities=CANCEL),
    st("running", "kid", background=[]),
    up("subagent_update", sessionId="kid", state={"state": "running", "background": []}),
    st("idle", background=[T("t2"), K("kid")]),
    st("idle", "kid", stopReason="end_turn", background=[]),
    up("subagent_update", sessionId="kid", state={"state": "idle", "stopReason": "end_turn", "background": []}),
    st("idle", background=[T("t2")]),
    # a fork starts empty and lists only its own work
    rq(15, "session/fork", sessionId=SID, cwd="/p"),
    ok(15, {"sessionId": "fork1"}),
    st("idle", "fork1", background=[]),
    tool("t9", "fork1", title="own", status="pending"),
    st("idle", "fork1", background=[T("t9")]),
    # an elicitation the client advertised, answered
    areq("e1", "elicitation/create", sessionId=SID, mode="form", message="db?",
         requestedSchema={"type": "object", "properties": {}}),
    cans("e1", {"action": "decline"}),
    # finished background work starts foreground work in the removing snapshot (R95)
    tool("t2", status="completed"),
    st("running", background=[]),
    st("idle", stopReason="end_turn", background=[]),
    # delete, then list without it
    rq(16, "session/delete", sessionId="fork1"), ok(16),
    rq(17, "session/list"), ok(17, {"sessions": [{"sessionId": SID, "cwd": "/p"}]}),
    # close a running session: cancelled idle and withdrawn requests before the answer
    rq(18, "session/prompt", sessionId=SID, prompt=TEXT),
    ok(18, {"messageId": "u3"}),
    up("user_message", messageId="u3", content=TEXT),
    st("running", background=[]),
    perm("p3"),
    st("requires_action", background=[]),
    rq(19, "session/close", sessionId=SID),
    anote("$/cancel_request", requestId="p3"),
    st("idle", stopReason="cancelled", background=[]),
    ok(19),
    cans("p3", CANCELLED),
]

HELD_AND_CLOSE = OPEN + [
    rq(2, "session/prompt", sessionId=SID, prompt=TEXT), ok(2, {"messageId": "u1"}),
    up("user_message", messageId="u1", content=TEXT), st("running", background=[]),
    rq(3, "session/prompt", sessionId=SID, prompt=TEXT),  # held...
    nt("$/cancel_request", requestId=3), err(3, -32800),  # ...and withdrawn
    rq(4, "session/prompt", sessionId=SID, prompt=TEXT),  # held...
    nt("session/cancel", sessionId=SID), err(4, -32800),  # ...and cancelled with the work
    st("idle", stopReason="cancelled", background=[]),
    nt("$/cancel_request", requestId=2),  # already answered: ignored, no second answer
    tool("t1", title="wake", status="pending", capabilities=CANCEL),
    st("idle", background=[T("t1")]),
    tool("t1", status="completed", capabilities=None),
    st("idle", background=[]),
    rq(5, "session/prompt", sessionId=SID, prompt=TEXT),  # the client speaks in between: no R95
    ok(5, {"messageId": "u5"}), up("user_message", messageId="u5", content=TEXT),
    st("running", background=[]),
    st("idle", stopReason="end_turn", background=[]),
    rq(6, "session/prompt", sessionId=SID, prompt=TEXT),
    up("user_message", messageId="u6", content=TEXT), st("running", background=[]),
    rq(7, "session/close", sessionId=SID),
    st("idle", stopReason="cancelled", background=[]),
    ok(7),
    ok(6, {"messageId": "u6"}),  # inserted before the close, answered after it (R43)
    rq(8, "session/resume", sessionId=SID, cwd="/p"),  # a closed session can be resumed
    st("idle", background=[]),
    ok(8),
    up("session_info_update", title="again"),
]

RAW_LINES = [
    Raw(C, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,'
           b'"info":{"name":"c","version":"1"}}}\n'),
    Raw(A, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}\n'),
    Raw(C, b"not json at all\n"),
    Raw(A, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: \\n escaped is fine"}}\n'),
]

# A per-item cancel, then session/close of the running turn: the close cancels the foreground (R42),
# so the idle says cancelled although no session/cancel was sent (not an R105 break).
ITEM_CANCEL_THEN_CLOSE: list[Step] = OPEN + [
    st("running"), tool("t1", title="x", status="in_progress", capabilities=CANCEL),
    rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"), ok(5),
    rq(6, "session/close", sessionId=SID),
    tool("t1", status="cancelled", capabilities=None), st("idle", stopReason="cancelled"), ok(6),
]
# The same with the client cancelling the turn's terminal while the close is in flight (R105).
TERMINAL_CANCEL_THEN_CLOSE: list[Step] = OPEN + [
    st("running"), tool("t1", title="sh", status="in_progress", content=[X("x1")]),
    term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
    rq(6, "session/close", sessionId=SID),
    rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5),
    tool("t1", status="cancelled"), term("x1", exitStatus={"signal": "SIGTERM"}, capabilities=None),
    st("idle", stopReason="cancelled"), ok(6),
]

# session/cancel sent before the client saw its prompt's turn start: the agent applies it to that turn,
# so the turn's tool call and its idle end cancelled although the client also cancelled the terminal.
CANCEL_BEFORE_RUNNING: list[Step] = OPEN + [
    rq(2, "session/prompt", sessionId=SID, prompt=TEXT),
    nt("session/cancel", sessionId=SID),
    ok(2, {"messageId": "u1"}), up("user_message", messageId="u1", content=TEXT), st("running"),
    tool("t1", title="sh", status="in_progress", content=[X("x1")]),
    term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
    rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5),
    tool("t1", status="cancelled"), term("x1", exitStatus={"signal": "SIGTERM"}, capabilities=None),
    st("idle", stopReason="cancelled"),
]

# A prompt sent just before session/cancel: the current turn ended before the agent read the cancel,
# the agent had already inserted the prompt, so the cancel ends the prompt's turn (with a per-item
# cancel during it, R105 must not blame that).
CANCEL_REACHES_NEXT_PROMPT: list[Step] = OPEN + [
    rq(2, "session/prompt", sessionId=SID, prompt=TEXT), ok(2, {"messageId": "u1"}),
    up("user_message", messageId="u1", content=TEXT), st("running"),
    rq(3, "session/prompt", sessionId=SID, prompt=TEXT),
    nt("session/cancel", sessionId=SID),
    st("idle", stopReason="end_turn"),
    ok(3, {"messageId": "u3"}), up("user_message", messageId="u3", content=TEXT), st("running"),
    tool("t1", title="sh", status="in_progress", content=[X("x1")]),
    term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
    rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5),
    tool("t1", status="cancelled"), term("x1", exitStatus={"signal": "SIGTERM"}, capabilities=None),
    st("idle", stopReason="cancelled"),
]

# S1 near misses: what may follow a terminal's exit. The exit may come with the last output snapshot and
# the cleared cancel; capabilities / _meta may change later; another terminal exits on its own; a resume
# re-sends the terminal's history (replay) and current state (re-announcement), exit included.
EXIT_ONCE: list[Step] = OPEN + [
    st("running", background=[]),
    term("x1", command="make", cwd="/p", capabilities=CANCEL),
    up("terminal_output_chunk", terminalId="x1", data="b2sK"),
    term("x1", exitStatus={"exitCode": 0}, output={"data": "b2sK"}),
    term("x1", capabilities=None, _meta={"note": "done"}),
    term("x2", command="make test", cwd="/p"),
    term("x2", exitStatus={"exitCode": 1}, size={"cols": 80, "rows": 24}),
    st("idle", stopReason="end_turn", background=[]),
    rq(5, "session/resume", sessionId=SID, cwd="/p", replayFrom={"type": "start"}),
    term("x1", command="make", cwd="/p", output={"data": "b2sK"}, exitStatus={"exitCode": 0}),
    term("x2", command="make test", cwd="/p", exitStatus={"exitCode": 1}),
    up("replay_complete"),
    st("idle", stopReason="end_turn", background=[]),
    ok(5),
    rq(6, "session/resume", sessionId=SID, cwd="/p"),
    term("x1", exitStatus={"exitCode": 0}),  # current state again, without replay
    st("idle", background=[]),
    ok(6),
]

# S2 near misses: updates (and agent requests) for a new or forked session may precede its answer once
# the creating request was sent (§5.1, NewSessionResponse: "updates may arrive before or after"); after
# the answer they are ordinary. A resume replays before its answer.
BEFORE_THE_ANSWER: list[Step] = init(caps={"session": {"fork": {}}}) + [
    rq(1, "session/new", cwd="/home/user/project"),
    up("available_commands_update", "s1", availableCommands=[{"type": "command", "name": "test", "description": "t"}]),
    up("config_option_update", "s1", configOptions=[]),
    st("running", "s1"),  # agent-initiated work may start before the answer
    ok(1, {"sessionId": "s1"}),
    st("idle", "s1", stopReason="end_turn"),
    up("config_option_update", "s1", configOptions=[]),
    rq(2, "session/fork", sessionId="s1", cwd="/p"),
    up("config_option_update", "f1", configOptions=[]),
    ok(2, {"sessionId": "f1"}),
]
"""Legal by the reference (no MUST broken); this SDK's S3 (a SHOULD) reports each early session."""

CREATED_FIRST: list[Step] = init(caps={"session": {"fork": {}}}) + [
    rq(1, "session/new", cwd="/home/user/project"),
    ok(1, {"sessionId": "s1"}),
    up("config_option_update", "s1", configOptions=[]),
    st("running", "s1"),
    st("idle", "s1", stopReason="end_turn"),
    rq(2, "session/fork", sessionId="s1", cwd="/p"),
    ok(2, {"sessionId": "f1"}),
    up("available_commands_update", "f1", availableCommands=[]),
    rq(3, "session/new", cwd="/p"),
    ok(3, {"sessionId": "s3"}),
    up("session_info_update", "s3", title="after the answer"),
    rq(4, "session/resume", sessionId="old", cwd="/p", replayFrom={"type": "start"}),
    up("user_message", "old", messageId="u0", content=TEXT),
    up("replay_complete", "old"),
    st("idle", "old", background=[]),
    ok(4),
]

FORM = {"mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
URL = {"mode": "url", "message": "Sign in", "url": "https://example.com/sign-in"}
ASKS = init(client_caps={"elicitation": {"form": {}, "url": {}}},
            authMethods=[{"type": "agent", "methodId": "agent-login", "name": "Log in"}]) + [
    # a login that asks a request-scoped form first: no session, no state
    rq(1, "auth/login", methodId="agent-login"),
    areq("e0", "elicitation/create", requestId=1, **FORM),
    cans("e0", {"action": "accept", "content": {"name": "ada"}}),
    ok(1),
] + new(rid=2) + [
    # a form the foreground waits on: requires_action (announced before the request), running after
    rq(3, "session/prompt", sessionId=SID, prompt=TEXT), ok(3, {"messageId": "u1"}),
    up("user_message", messageId="u1", content=TEXT), st("running", background=[]),
    st("requires_action", background=[]),
    areq("e1", "elicitation/create", sessionId=SID, **FORM),
    cans("e1", {"action": "accept", "content": {"name": "Ada"}}),
    st("running", background=[]),
    up("agent_message", messageId="a1", content=[{"type": "text", "text": "Hello, Ada"}]),
    st("idle", stopReason="end_turn", background=[]),
    # a url flow, completed out of band
    rq(4, "session/prompt", sessionId=SID, prompt=TEXT), ok(4, {"messageId": "u2"}),
    up("user_message", messageId="u2", content=TEXT), st("running", background=[]),
    areq("e2", "elicitation/create", sessionId=SID, elicitationId="flow-1", **URL),
    cans("e2", {"action": "accept"}),
    st("requires_action", background=[]),  # sent before the agent read the answer
    st("running", background=[]),
    anote("elicitation/complete", elicitationId="flow-1"),
    st("idle", stopReason="end_turn", background=[]),
    # a question for listed background work stays open on session/cancel; the foreground one is withdrawn
    rq(5, "session/prompt", sessionId=SID, prompt=TEXT), ok(5, {"messageId": "u3"}),
    up("user_message", messageId="u3", content=TEXT), st("running", background=[]),
    tool("t1", title="watch", status="in_progress"), st("running", background=[T("t1")]),
    areq("e3", "elicitation/create", sessionId=SID, toolCallId="t1", **FORM),
    st("running", background=[T("t1")]),  # the foreground goes on: no requires_action for e3 (R61)
    st("requires_action", background=[T("t1")]),
    areq("e4", "elicitation/create", sessionId=SID, **FORM),
    nt("session/cancel", sessionId=SID),
    anote("$/cancel_request", requestId="e4"),
    st("idle", stopReason="cancelled", background=[T("t1")]),
    cans("e4", {"action": "cancel"}),
    cans("e3", {"action": "decline"}),
    tool("t1", status="completed"), st("idle", background=[]),
    # a child's question blocks the parent's whole foreground
    rq(6, "session/prompt", sessionId=SID, prompt=TEXT), ok(6, {"messageId": "u4"}),
    up("user_message", messageId="u4", content=TEXT), st("running", background=[]),
    up("subagent_update", sessionId=CHILD, title="explore"),
    st("running", CHILD), up("subagent_update", sessionId=CHILD, state={"state": "running"}),
    st("requires_action", CHILD), up("subagent_update", sessionId=CHILD, state={"state": "requires_action"}),
    st("requires_action", background=[]),
    areq("e5", "elicitation/create", sessionId=CHILD, **FORM),
    cans("e5", {"action": "decline"}),
    st("running", CHILD), up("subagent_update", sessionId=CHILD, state={"state": "running"}),
    st("running", background=[]),
    st("idle", CHILD, stopReason="end_turn"),
    up("subagent_update", sessionId=CHILD, state={"state": "idle", "stopReason": "end_turn"}),
    st("idle", stopReason="end_turn", background=[]),
    # a session resumed while it waits on a question asked on an earlier connection
    rq(7, "session/resume", sessionId="s9", cwd="/p"),
    st("requires_action", "s9", background=[]),
    ok(7),
    st("running", "s9", background=[]),
    st("idle", "s9", stopReason="cancelled", background=[]),
]

GOOD = {
    "worked-example-11.16": WORKED_EXAMPLE,
    "questions": ASKS,
    "terminal-exit-once": EXIT_ONCE,
    "created-before-named": CREATED_FIRST,
    "cancel-reaches-next-prompt": CANCEL_REACHES_NEXT_PROMPT,
    "cancel-before-running": CANCEL_BEFORE_RUNNING,
    "item-cancel-then-close": ITEM_CANCEL_THEN_CLOSE,
    "terminal-cancel-then-close": TERMINAL_CANCEL_THEN_CLOSE,
    "prompt-turn-6.4": PROMPT_TURN,
    "resume-11.14": RESUME,
    "resume-with-replay": REPLAY,
    "near-misses": NEAR_MISSES,
    "held-prompts-and-close": HELD_AND_CLOSE,
    "raw-lines": RAW_LINES,
}


@pytest.mark.parametrize("steps", list(GOOD.values()), ids=list(GOOD))
def test_good_transcripts_pass(steps: list[Step]) -> None:
    checker = run(steps)
    assert checker.violations == []


# A per-item cancel, then the client closes its input while the turn runs: the end of the connection
# cancels the foreground (the agent winds down), so that idle is not an R105 break.
ITEM_CANCEL_THEN_END: list[Step] = OPEN + [
    st("running"), tool("t1", title="x", status="in_progress", capabilities=CANCEL),
    rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"), ok(5),
    tool("t1", status="cancelled", capabilities=None),
]
AFTER_THE_END: list[Step] = [st("idle", stopReason="cancelled")]


def test_an_end_of_input_excuses_a_cancelled_idle_after_a_per_item_cancel() -> None:
    checker = run(ITEM_CANCEL_THEN_END + AFTER_THE_END)
    assert checker.rules == {"R105"}  # without the end, the idle is blamed on the tool_call/cancel
    checker = WireChecker(raise_on_violation=False)
    for step in ITEM_CANCEL_THEN_END:
        assert not isinstance(step, Raw)
        checker.feed(*step)
    checker.feed_end(A)  # the agent's output ending changes nothing
    checker.feed_end(C)
    for step in AFTER_THE_END:
        assert not isinstance(step, Raw)
        checker.feed(*step)
    checker.finish()
    assert checker.violations == []
    with pytest.raises(ValueError, match="direction"):
        checker.feed_end("sideways")  # type: ignore[arg-type]
    # the same from a recorded transcript: the end comes after that many entries (Client.closed_at)
    entries = [TranscriptEntry(d, m, 0.0) for d, m in ITEM_CANCEL_THEN_END + AFTER_THE_END if isinstance(m, dict)]
    assert check_transcript(entries, end_at=len(ITEM_CANCEL_THEN_END)) == []
    assert {v.rule for v in check_transcript(entries, end_at=len(entries))} == {"R105"}  # it ended after the idle


def test_updates_before_the_answer_break_only_the_sdk_should() -> None:
    checker = run(BEFORE_THE_ANSWER)
    assert [(v.rule, v.level) for v in checker.violations] == [("S3", "SHOULD"), ("S3", "SHOULD")]
    assert run(BEFORE_THE_ANSWER, ignore=SHOULD_RULES).violations == []


# -- one broken transcript per rule -------------------------------------------------------------

MSG = {"messageId": "m1", "content": [{"type": "text", "text": "x"}]}
CHUNK = {"messageId": "m1", "content": {"type": "text", "text": "x"}}
ELICIT = {"mode": "form", "message": "db?", "requestedSchema": {"type": "object", "properties": {}}}
FORMS = init(client_caps={"elicitation": {"form": {}, "url": {}}}) + new()
STDIO = {"type": "stdio", "name": "m", "command": "/bin/m", "args": [], "env": []}

BAD: list[Any] = [
    # transport and JSON-RPC
    ("R1", OPEN + [Raw(A, b'{"jsonrpc":"2.0","method":"session/update",\n"params":{"sessionId":"sess_abc123",'
                          b'"update":{"sessionUpdate":"agent_message","messageId":"m1"}}}\n')], "raw-newline"),
    ("R1", OPEN + [Raw(A, b'{"jsonrpc":"2.0","method":"$/ping","params":{}} {"x":1}\n')], "two-values"),
    ("R2", OPEN + [Raw(A, b"hello from a stray print()\n")], "stray-text"),
    ("R2", OPEN + [(A, {"<unparsed>": "oops"})], "transcript-marker"),
    ("R2", OPEN + [(A, 42)], "scalar"),
    ("R3", OPEN + [(A, {"jsonrpc": "1.0", "method": "session/update",
                        "params": {"sessionId": SID, "update": {"sessionUpdate": "agent_message", **MSG}}})], "v1"),
    ("R6", OPEN + [perm(None)], "null-id"),
    ("R6", OPEN + [perm("p1"), perm("p1")], "reused-id"),
    ("R7", OPEN + [rq(5, "session/list"), ok("5", {"sessions": []})], "type-changed"),
    ("R7", OPEN + [ok(99, {})], "unknown-id"),
    ("R8", OPEN + [rq(5, "session/list")], "unanswered"),
    ("R8", OPEN + [rq(5, "session/list"), ok(5, {"sessions": []}), ok(5, {"sessions": []})], "twice"),
    ("R9", OPEN + [(A, [{"jsonrpc": "2.0", "id": 7, "result": {}}])], "unasked-array"),
    ("R9", OPEN + [(C, [])], "empty-batch-unanswered"),
    ("R10", OPEN + [(C, {"<unparsed>": "{oops"})], "parse-error-unanswered"),
    ("R10", OPEN + [(C, {"<unparsed>": "{oops"}), err(None, -32600)], "wrong-code"),
    ("R10", OPEN + [(C, {"jsonrpc": "2.0", "params": {}})], "shapeless"),
    ("R11", OPEN + [(C, {"jsonrpc": "2.0", "id": None, "method": "session/list", "params": {}})], "null-id"),
    ("R11", OPEN + [(C, {"jsonrpc": "2.0", "id": 1.5, "method": "session/list", "params": {}})], "fractional-id"),
    ("R12", OPEN + [(A, {"jsonrpc": "2.0", "id": None, "result": {}})], "null-id-result"),
    ("R12", OPEN + [rq(5, "_x/y"), err(5, -32601)], "no-data-method"),
    ("R12", OPEN + [nt("_vendor/event"), err(None, -32601, {"method": "_vendor/event"})], "answered-notification"),
    ("R13", init() + [rq(1, "session/new"), ok(1, {"sessionId": SID})], "missing-cwd"),
    ("R13", OPEN + [(C, {"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": [1]}),
                    ok(5, {"sessions": []})], "params-array"),
    # errors and request cancellation
    ("R15", OPEN + [rq(5, "session/prompt", sessionId="nope", prompt=TEXT),
                    err(5, -32002, {"sessionId": "other"})], "wrong-data"),
    ("R15", OPEN + [rq(5, "session/set_config_option", sessionId="nope", configId="m", type="id", value="x"),
                    ok(5, {"configOptions": []})], "success-on-unknown"),
    ("R15", OPEN + [rq(5, "session/close", sessionId=SID), ok(5),
                    rq(6, "session/prompt", sessionId=SID, prompt=TEXT), ok(6, {"messageId": "u"})],
     "success-after-close"),
    ("R16", OPEN + [rq(5, "session/list"), nt("$/cancel_request", requestId=5)], "withdrawn-unanswered"),
    ("R17", OPEN + [anote("$/cancel_request", requestId="never-sent")], "foreign-id"),
    ("R17", OPEN + [rq(5, "session/list"), ok(5, {"sessions": []}), nt("$/cancel_request", requestId=5),
                    ok(5, {"sessions": []})], "answered-after-cancel"),
    ("R20", OPEN + [st("running"), tool("t1", title="rm", status="pending"), perm("p1", subject=tc_subject("t1")),
                    st("requires_action"), cans("p1", DENY), st("running"), tool("t1", status="in_progress"),
                    tool("t1", status="completed"), st("idle", stopReason="end_turn")], "ran-after-deny"),
    # initialization
    ("R21", [rq(1, "session/list"), ok(1, {"sessions": []})], "served-before-initialize"),
    ("R22", [rq(0, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             up("agent_message", **MSG), ok(0, {"protocolVersion": 2, "info": {"name": "a", "version": "1"}})],
     "update-before-answer"),
    ("R23", [rq(0, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             ok(0, {"protocolVersion": 3, "info": {"name": "a", "version": "1"}})], "higher-version"),
    ("R23", [rq(0, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             err(0, -32022, {"requested": 2, "supported": [2]})], "refused-supported"),
    ("R25", [rq(0, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             ok(0, {"protocolVersion": 2, "info": {"name": "a"}})], "no-version"),
    ("R26", OPEN + [rq(2, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
                    ok(2, {"protocolVersion": 2, "info": {"name": "a", "version": "1"}})], "after-other-request"),
    ("R26", [rq(0, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             rq(1, "initialize", protocolVersion=2, info={"name": "c", "version": "1"}),
             ok(0, {"protocolVersion": 2, "info": {"name": "a", "version": "1"}}),
             ok(1, {"protocolVersion": 2, "info": {"name": "a", "version": "1"}})], "while-in-flight"),
    ("R27", OPEN + [rq(5, "session/list"), err(5, -32601, {"method": "session/list"})], "baseline-missing"),
    ("R28", init(caps={"session": {"fork": {}}}) + new() + [
        rq(5, "session/fork", sessionId=SID, cwd="/p"), err(5, -32601, {"method": "session/fork"})], "fork"),
    ("R29", init(authMethods=[{"type": "terminal", "methodId": "t", "name": "Terminal login"}]), "terminal-auth"),
    ("R30", init(authMethods=[{"type": "agent", "methodId": "a", "name": "Login"}]) + [
        rq(2, "auth/login", methodId="a"), err(2, -32601, {"method": "auth/login"})], "login-missing"),
    # session lifecycle
    ("R31", OPEN + new(rid=2), "duplicate-id"),
    ("R32", init() + [rq(1, "session/new", cwd="/p"), ok(1, {"sessionId": SID, "configOptions": None})], "null"),
    ("R33", init() + [rq(1, "session/new", cwd="/p", mcpServers=[STDIO]), ok(1, {"sessionId": SID})], "stdio"),
    ("R34", OPEN + [term("x1", command="ls", cwd="relative/dir")], "terminal-cwd"),
    ("R34", OPEN + [tool("t1", title="edit", locations=[{"path": "src/a.py"}])], "location"),
    ("R35", OPEN + [rq(5, "session/resume", sessionId=SID, cwd="/p", replayFrom="start"), st("idle"), ok(5)],
     "malformed-cursor"),
    ("R35", init() + [rq(5, "session/resume", sessionId="s9", cwd="/p"),
                      up("user_message", "s9", messageId="u1", content=TEXT), st("idle", "s9"), ok(5)],
     "unrequested-replay"),
    ("R39", OPEN + [rq(5, "session/resume", sessionId=SID, cwd="/p"), ok(5)], "no-snapshot"),
    ("R40", init() + [rq(5, "session/resume", sessionId="s9", cwd="/p"),  # with replayFrom it would be P8/P10's too
                      st("idle", "s9"), up("agent_message", "s9", **MSG), ok(5)], "update-after-snapshot"),
    ("R42", OPEN + [st("running"), rq(5, "session/close", sessionId=SID), ok(5)], "closed-while-running"),
    ("R44", OPEN + [perm("p1"), rq(5, "session/close", sessionId=SID), ok(5), cans("p1", CANCELLED)],
     "request-left-open"),
    ("R45", OPEN + [rq(5, "session/close", sessionId=SID), ok(5), up("agent_message", **MSG)], "update-after-close"),
    ("R46", OPEN + [rq(5, "session/close", sessionId="nope"), err(5, -32002, {"sessionId": "nope"})], "error"),
    ("R47", OPEN + [rq(5, "session/list"), ok(5, {})], "no-sessions"),
    ("R49", OPEN + [rq(5, "session/delete", sessionId=SID), ok(5)], "not-advertised"),
    ("R49", init(caps={"session": {"delete": {}}}) + new() + [
        rq(5, "session/delete", sessionId=SID), ok(5),
        rq(6, "session/list"), ok(6, {"sessions": [{"sessionId": SID, "cwd": "/p"}]})], "still-listed"),
    ("R50", OPEN + [rq(5, "session/set_config_option", sessionId=SID, configId="m", type="id", value="x"), ok(5)],
     "no-options"),
    ("R51", OPEN + [up("config_option_update")], "config"),
    ("R51", OPEN + [up("available_commands_update", availableCommands=None)], "commands"),
    # prompt and session state
    ("R52", OPEN + [rq(5, "session/prompt", sessionId=SID, prompt=TEXT), ok(5)], "no-message-id"),
    ("R53", OPEN + [rq(5, "session/prompt", sessionId=SID, prompt=TEXT), ok(5, {"messageId": "u1"}),
                    st("running"), up("agent_message", **MSG), st("idle", stopReason="end_turn")], "no-echo"),
    ("R54", OPEN + [rq(5, "session/prompt", sessionId=SID, prompt=TEXT),
                    up("user_message", messageId="u1", content=TEXT), err(5, -32603)], "echoed-then-error"),
    ("R55", OPEN + [rq(5, "session/prompt", sessionId=SID, prompt=TEXT), err(5, -32602)], "text-rejected"),
    ("R57", OPEN + [rq(5, "session/prompt", sessionId=SID, prompt=TEXT), ok(5, {"messageId": "u1"}),
                    up("user_message", messageId="u1", content=TEXT)], "never-running"),
    ("R58", OPEN + [st("running"), st("idle")], "no-stop-reason"),
    ("R58", OPEN + [st("running"), st("idle", stopReason="error")], "error-without-object"),
    ("R60", OPEN + [st("running"), perm("p1"), st("requires_action"), cans("p1", ALLOW),
                    up("agent_message_chunk", **CHUNK), st("running"), st("idle", stopReason="end_turn")],
     "output-while-blocked"),
    ("R60", OPEN + [st("running"), perm("p1"), st("requires_action"), cans("p1", ALLOW)], "left-blocked"),
    ("R60", FORMS + [st("running"), st("requires_action"), areq("e1", "elicitation/create", sessionId=SID, **ELICIT),
                     up("agent_message_chunk", **CHUNK), cans("e1", {"action": "decline"}), st("running"),
                     st("idle", stopReason="end_turn")], "output-while-form-waits"),
    ("R60", FORMS + [st("running"), st("requires_action"), areq("e1", "elicitation/create", sessionId=SID, **ELICIT),
                     cans("e1", {"action": "accept", "content": {}})], "left-blocked-after-form"),
    ("R59", OPEN + [st("running"), st("requires_action"), st("running"), st("idle", stopReason="end_turn")],
     "nothing-asked"),
    ("R59", OPEN + [st("running"), st("requires_action")], "nothing-asked-at-the-end"),
    ("R59", FORMS + [st("running"), areq("e1", "elicitation/create", sessionId=SID, **ELICIT),
                     cans("e1", {"action": "decline"}), st("running"), st("requires_action"), st("running"),
                     st("idle", stopReason="end_turn")], "after-the-answer-was-seen"),
    ("R59", FORMS + new("other", rid=2) + [st("running"), areq("e1", "elicitation/create", sessionId="other",
                                                               **ELICIT),
                                           st("requires_action"), cans("e1", {"action": "decline"}), st("running"),
                                           st("idle", stopReason="end_turn")], "another-sessions-question"),
    ("R61", OPEN + [tool("t1", title="watch", status="in_progress"), st("idle", background=[T("t1")]),
                    perm("p1", subject=tc_subject("t1")), st("requires_action", background=[T("t1")])],
     "background-request"),
    ("R61", FORMS + [tool("t1", title="watch", status="in_progress"), st("idle", background=[T("t1")]),
                     areq("e1", "elicitation/create", sessionId=SID, toolCallId="t1", **ELICIT),
                     st("requires_action", background=[T("t1")])], "background-elicitation"),
    ("R61", FORMS + [st("running"), rq(5, "auth/login", methodId="m"),
                     areq("e1", "elicitation/create", requestId=5, **ELICIT), st("requires_action"),
                     cans("e1", {"action": "decline"}), err(5, -32000), st("running"),
                     st("idle", stopReason="end_turn")], "request-scoped-elicitation"),
    ("R62", OPEN + [st("running"), st("idle", stopReason="end_turn"), st("idle", stopReason="cancelled")],
     "new-stop-reason"),
    ("R62", OPEN + [st("idle", stopReason="end_turn")], "completion-without-work"),
    ("R62", OPEN + [st("running"), st("idle", stopReason="end_turn"),
                    st("idle", usage={"totalTokens": 1, "inputTokens": 1, "outputTokens": 0})], "usage-repeated"),
    ("R63", OPEN + [st("busy")], "invented-state"),
    ("R67", OPEN + [st("running"), perm("p1"), st("requires_action"), nt("session/cancel", sessionId=SID),
                    st("idle", stopReason="cancelled"), cans("p1", CANCELLED)], "not-withdrawn"),
    ("R68", OPEN + [st("running"), up("agent_message_chunk", **CHUNK), nt("session/cancel", sessionId=SID),
                    st("idle", stopReason="cancelled"), up("agent_message_chunk", **CHUNK)], "message-after-idle"),
    ("R68", OPEN + [st("running"), tool("t1", title="grep", status="in_progress"),
                    nt("session/cancel", sessionId=SID), st("idle", stopReason="cancelled"),
                    tool("t1", status="cancelled")], "status-after-idle"),
    ("R68", OPEN + [st("running"), nt("session/cancel", sessionId=SID)], "no-idle"),
    ("R69", OPEN + [st("running"), nt("session/cancel", sessionId=SID),
                    st("idle", stopReason="error", error={"code": -32603, "message": "aborted"})], "error"),
    ("R70", init(client_caps={"elicitation": {"form": {}}}) + new() + [
        st("running"), areq("e1", "elicitation/create", sessionId=SID, **ELICIT), st("requires_action"),
        nt("session/cancel", sessionId=SID), st("idle", stopReason="cancelled"), cans("e1", {"action": "cancel"})],
     "elicitation-not-withdrawn"),
    ("R70", FORMS + [st("running"), st("requires_action"),
                     areq("e1", "elicitation/create", sessionId=SID, elicitationId="f1", mode="url", message="Sign in",
                          url="https://example.com/sign-in"),
                     nt("session/cancel", sessionId=SID), st("idle", stopReason="cancelled")],
     "url-flow-not-withdrawn"),
    ("R44", FORMS + [st("running"), st("requires_action"), areq("e1", "elicitation/create", sessionId=SID, **ELICIT),
                     rq(5, "session/close", sessionId=SID), st("idle", stopReason="cancelled"), ok(5),
                     cans("e1", {"action": "cancel"})], "elicitation-left-open"),
    # updates
    ("R71", OPEN + [tool("t1", title="x", status="in_progress"), tool("t1", status=None)], "null-status"),
    ("R73", OPEN + [up("agent_message_chunk", content={"type": "text", "text": "x"})], "no-message-id"),
    ("R74", OPEN + [tool("t1", status="pending")], "no-title"),
    ("R75", OPEN + [up("terminal_output_chunk", terminalId="x1", data="not base64!")], "chunk"),
    ("R77", OPEN + [up("available_commands_update",
                       availableCommands=[{"type": "command", "name": "/web", "description": "d"}])], "slash"),
    ("R79", OPEN + [up("agent_message", CHILD, **MSG), up("subagent_update", sessionId=CHILD)], "update-first"),
    ("R79", OPEN + [st("idle", background=[K(CHILD)])], "listed-first"),
    ("R80", OPEN + [up("subagent_update", sessionId=CHILD, title="c"), st("running", CHILD)], "not-mirrored"),
    ("R81", OPEN + [areq("p1", "session/request_permission", sessionId=SID, title="Allow?", options=[])],
     "no-options"),
    ("R81", OPEN + [perm("p1", subject={"type": "command", "command": "ls", "cwd": "."})], "relative-cwd"),
    ("R81", OPEN + [areq("p1", "session/request_permission", sessionId=SID, title="Allow?",
                         options=[OPTIONS[0], OPTIONS[0]])], "duplicate-option"),
    ("R83", OPEN + [areq("e1", "elicitation/create", sessionId=SID, **ELICIT)], "form-not-advertised"),
    ("R84", OPEN + [up("tool_call", toolCallId="t1")], "v1-update"),
    ("R84", OPEN + [areq(3, "fs/read_text_file", sessionId=SID, path="/a")], "v1-method"),
    ("R84", OPEN + [tool("t1", title="x", status="scheduled")], "status"),
    # background work
    ("R85", OPEN + [st("running"), tool("t1", title="deploy", status="pending"), perm("p1", subject=tc_subject("t1")),
                    st("requires_action", background=[T("t1")])], "awaited-item-listed"),
    ("R85", FORMS + [st("running"), tool("t1", title="deploy", status="pending"),
                     areq("e1", "elicitation/create", sessionId=SID, toolCallId="t1", **ELICIT),
                     st("requires_action", background=[T("t1")])], "awaited-item-of-a-form-listed"),
    ("R87", OPEN + [st("idle", background=[{"type": "terminal"}])], "malformed"),
    ("R87", OPEN + [tool("t1", title="x", status="completed"), st("idle", background=[T("t1")])], "final-listed"),
    ("R87", OPEN + new("other", rid=2) + [term("x1", "other", command="ls", cwd="/p"),
                                          st("idle", background=[X("x1")])], "other-session"),
    ("R87", OPEN + [tool("t1", title="x", status="in_progress"), st("idle", background=[T("t1"), T("t1")])],
     "duplicate"),
    ("R88", OPEN + [tool("t1", title="sh", status="in_progress", content=[X("x1")]),
                    term("x1", command="sleep 9", cwd="/p"),
                    st("running", background=[X("x1"), T("t1")])], "listed-twice"),
    ("R89", OPEN + [tool("t1", title="wake", status="pending"), st("idle", background=[T("t1")]),
                    st("idle", background=[])], "pending-dropped"),
    ("R90", OPEN + [up("subagent_update", sessionId=CHILD, state={"state": "idle", "background": []}),
                    st("idle", background=[K(CHILD)])], "quiet-child-listed"),
    ("R90", OPEN + [up("subagent_update", sessionId=CHILD, state={"state": "running", "background": []}),
                    st("running", background=[K(CHILD)]), st("running", background=[])], "busy-child-dropped"),
    ("R91", OPEN + [st("idle", background=[]), st("running")], "stopped-reporting"),
    ("R92", OPEN + [tool("t1", title="wake", status="pending"), st("idle", background=[T("t1")]),
                    tool("t1", status="completed")], "stale-list"),
    ("R93", OPEN + [st("idle", background=[X("x1")])], "unannounced"),
    ("R94", OPEN + [tool("t1", title="watch", status="in_progress"), st("idle", background=[T("t1")]),
                    st("idle", background=[])], "tool-dropped"),
    ("R94", OPEN + [term("x1", command="sleep 9", cwd="/p"), st("idle", background=[X("x1")]),
                    st("idle", background=[])], "terminal-dropped"),
    ("R95", OPEN + [tool("t1", title="wake", status="pending"), st("idle", background=[T("t1")]),
                    tool("t1", status="completed"), st("idle", background=[]), st("running", background=[])],
     "quiet-then-running"),
    ("R97", OPEN + [tool("t1", title="x", status="in_progress"), tool("t1", status="completed"),
                    tool("t1", status="in_progress")], "after-final"),
    ("R97", OPEN + [tool("t1", title="x", status="in_progress"), tool("t1", status="pending")], "back-to-pending"),
    ("R100", OPEN + [tool("t1", title="x", status="in_progress", capabilities=CANCEL),
                     tool("t1", status="completed")], "cancel-kept"),
    ("R101", OPEN + [tool("t1", title="x", status="in_progress", capabilities=CANCEL),
                     rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"), ok(5)], "never-final"),
    ("R102", OPEN + [rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"),
                     err(5, -32601, {"method": "tool_call/cancel"})], "method-not-found"),
    ("R102", OPEN + [tool("t1", title="x", status="completed"),
                     rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"), ok(5)], "accepted-final"),
    ("R103", OPEN + [term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
                     rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5)], "never-exits"),
    ("R104", OPEN + [rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"),
                     err(5, -32601, {"method": "terminal/cancel"})], "method-not-found"),
    ("R104", OPEN + [term("x1", command="sleep 9", cwd="/p"),
                     rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5)], "not-cancellable"),
    ("R105", OPEN + [st("running"), tool("t1", title="x", status="in_progress", capabilities=CANCEL),
                     rq(5, "tool_call/cancel", sessionId=SID, toolCallId="t1"), ok(5),
                     tool("t1", status="cancelled", capabilities=None), st("idle", stopReason="cancelled")],
     "foreground-ended"),
    ("R105", OPEN + [term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
                     rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5),
                     term("x1", exitStatus={"signal": "SIGTERM"}, capabilities=None, output=None)], "output-cleared"),
    ("R105", OPEN + [tool("t1", title="sh", status="in_progress", content=[X("x1")]),
                     term("x1", command="sleep 9", cwd="/p", capabilities=CANCEL),
                     rq(5, "terminal/cancel", sessionId=SID, terminalId="x1"), ok(5),
                     term("x1", exitStatus={"signal": "SIGTERM"}, capabilities=None), tool("t1", status="cancelled")],
     "tool-call-cancelled"),
    ("R106", OPEN + [tool("t1", title="wake", status="pending"), st("running", background=[T("t1")]),
                     nt("session/cancel", sessionId=SID), tool("t1", status="cancelled"),
                     st("idle", stopReason="cancelled", background=[])], "listed-cancelled"),
    ("R107", OPEN + [tool("t1", title="watch", status="in_progress"), st("idle", background=[T("t1")]),
                     perm("p1", subject=tc_subject("t1")), st("running", background=[T("t1")]),
                     nt("session/cancel", sessionId=SID), anote("$/cancel_request", requestId="p1"),
                     st("idle", stopReason="cancelled", background=[T("t1")]), cans("p1", CANCELLED)],
     "background-request-withdrawn"),
    ("R110", OPEN + [tool("t1", title="watch", status="in_progress"), perm("p1", subject=tc_subject("t1")),
                     st("idle", background=[T("t1")])], "asked-before-listing"),
    ("R111", OPEN + [up("subagent_update", sessionId=CHILD, title="c"), rq(5, "session/close", sessionId=SID),
                     ok(5), up("agent_message", CHILD, **MSG)], "child-after-close"),
    ("R112", init(caps={"session": {"fork": {}}}) + new() + [
        tool("t1", title="wake", status="pending"), st("idle", background=[T("t1")]),
        rq(5, "session/fork", sessionId=SID, cwd="/p"), ok(5, {"sessionId": "fork1"}),
        st("idle", "fork1", background=[T("t1")])], "copied-work-listed"),
    ("R113", OPEN + [tool("t1", title="wake", status="pending"), st("idle", background=[T("t1")]),
                     rq(5, "session/resume", sessionId=SID, cwd="/p"), st("idle", background=[T("t1")]), ok(5)],
     "not-reannounced"),
    # SDK-level rules
    ("S1", OPEN + [term("x1", command="make", cwd="/p"), term("x1", exitStatus={"exitCode": 0}),
                   term("x1", exitStatus={"exitCode": 0})], "exit-reported-twice"),
    ("S1", OPEN + [term("x1", command="make", cwd="/p"), term("x1", exitStatus={"exitCode": 0}),
                   term("x1", exitStatus={"signal": "SIGTERM"})], "exit-changed"),
    ("S1", OPEN + [term("x1", command="make", cwd="/p"), term("x1", exitStatus={"exitCode": 0}),
                   term("x1", exitStatus=None)], "un-exited"),
    ("S1", OPEN + [term("x1", command="make", cwd="/p"), term("x1", exitStatus={"exitCode": 0}),
                   up("terminal_output_chunk", terminalId="x1", data="b2sK")], "chunk-after-exit"),
    ("S1", OPEN + [term("x1", command="make", cwd="/p"), term("x1", exitStatus={"exitCode": 0}),
                   term("x1", output={"data": "b2sK"})], "output-after-exit"),
    ("S2", init() + [up("config_option_update", "s1", configOptions=[]),
                     rq(1, "session/new", cwd="/p"), ok(1, {"sessionId": "s1"})], "update-before-new"),
    ("S2", init(caps={"session": {"fork": {}}}) + new() + [
        up("config_option_update", "f1", configOptions=[]),
        rq(5, "session/fork", sessionId=SID, cwd="/p"), ok(5, {"sessionId": "f1"})], "update-before-fork"),
    ("S2", init() + [perm("p1", "s1"), rq(1, "session/new", cwd="/p"), ok(1, {"sessionId": "s1"}),
                     cans("p1", CANCELLED)], "request-before-new"),
    ("S2", OPEN + [rq(5, "session/new", cwd="/p"), up("config_option_update", "s2", configOptions=[]),
                   err(5, -32000)], "new-failed"),
    ("S2", OPEN + [up("agent_message", "ghost", **MSG)], "never-created"),
    ("S3", OPEN + [rq(5, "session/new", cwd="/p"), up("config_option_update", "s2", configOptions=[]),
                   ok(5, {"sessionId": "s2"})], "update-before-new-answer"),
    ("S3", init(caps={"session": {"fork": {}}}) + new() + [
        rq(5, "session/fork", sessionId=SID, cwd="/p"), up("config_option_update", "f1", configOptions=[]),
        ok(5, {"sessionId": "f1"})], "update-before-fork-answer"),
    ("S2", OPEN + [up("agent_message", "s9", **MSG), rq(5, "session/resume", sessionId="s9", cwd="/p"),
                   st("idle", "s9"), ok(5)], "update-before-resume"),
    ("S8", OPEN + [rq(5, "session/new", cwd="/p"), ok(5, {"sessionId": "s2", "configOptions": [
        {"configId": "mode", "name": "Mode", "type": "select", "currentValue": "fast",
         "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}]}]})], "not-an-option"),
    ("S8", OPEN + [up("config_option_update", configOptions=[
        {"configId": "model", "name": "Model", "type": "select", "currentValue": "a",
         "options": [{"groupId": "g1", "name": "G1", "options": [{"value": "a", "name": "A"}]},
                     {"groupId": "g2", "name": "G2", "options": [{"value": "a", "name": "A again"}]}]}])],
     "value-twice"),
]


@pytest.mark.parametrize(("rule", "steps"), [pytest.param(r, s, id=f"{r}-{i}") for r, s, i in BAD])
def test_each_rule_is_caught(rule: str, steps: list[Step]) -> None:
    checker = run(steps)
    assert checker.rules == {rule}, [str(v) for v in checker.violations]
    for violation in checker.violations:
        assert violation.level == ("SHOULD" if rule in SHOULD_RULES else "MUST")
        assert violation.statement == RULES[rule]
        # "R94 [MUST] <the rule in words>: <what happened>"
        assert str(violation).startswith(f"{rule} [{violation.level}] {RULES[rule]}: {violation.text}")


def test_every_judged_rule_has_a_breaking_transcript() -> None:
    # The Preview rules (P...) have theirs in test_checker_preview.py.
    assert {rule for rule, _, _ in BAD} == {rule for rule in RULES if not rule.startswith("P")}
    assert set(RULES) >= SHOULD_RULES


def _rule_ids_in_checker_code() -> set[str]:
    """Every rule id literal in the checker package's modules outside the RULES / SHOULD_RULES tables.

    This catches ``_flag("R94", ...)`` as well as ids chosen indirectly (``rule = "R89" if ...``,
    ``req.expect = ("R26", -32600)``, ``self._expect_null("R10", ...)``).
    """
    package = Path(checker_module.__file__).resolve().parent
    nodes = [node for module in sorted(package.glob("*.py")) for node in ast.parse(module.read_text("utf-8")).body]
    ids: set[str] = set()
    for node in nodes:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id in ("RULES", "SHOULD_RULES") for t in targets):
            continue
        ids |= {n.value for n in ast.walk(node)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"[RSP]\d+", n.value)}
    return ids


def test_every_rule_the_checker_can_flag_is_stated_in_rules() -> None:
    flagged = _rule_ids_in_checker_code()
    assert {"R1", "R26", "R89", "R94", "S1", "S2"} <= flagged  # the scan sees direct and indirect ids
    assert flagged - set(RULES) == set(), "rule ids flagged without a RULES entry"
    assert set(RULES) - flagged == set(), "RULES entries the checker never flags"
    assert all(RULES.values())


def test_a_rule_without_an_entry_still_reports_readably() -> None:
    violation = RuleViolation("R999", "something happened")
    assert str(violation) == "R999 [MUST] something happened" and violation.statement == ""
    assert RuleViolation("R58", "no stopReason").level == "SHOULD"


# -- docs/rules.md --------------------------------------------------------------------------------

RULES_DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
_ENTRY = re.compile(r"^- (?:<span id=\"[rsp]\d+\"></span>)?\*\*([RSP]\d+)\*\* · (MUST|SHOULD|MAY) · ", re.MULTILINE)


def _doc_entries() -> list[tuple[str, str, str]]:
    """(rule id, level, entry text) for each entry of docs/rules.md."""
    text = RULES_DOC.read_text(encoding="utf-8")
    starts = list(_ENTRY.finditer(text))
    return [(m.group(1), m.group(2), text[m.start():starts[i + 1].start() if i + 1 < len(starts) else len(text)])
            for i, m in enumerate(starts)]


def test_rules_doc_states_every_rule_once_with_the_checkers_level() -> None:
    entries = _doc_entries()
    ids = [rule for rule, _, _ in entries]
    assert len(ids) == len(set(ids)), "a rule is stated twice"
    assert set(RULES) - set(ids) == set(), "docs/rules.md misses rules the checker judges"
    assert {f"R{n}" for n in range(1, 114)} - set(ids) == set(), "docs/rules.md misses reference rules"
    levels = {rule: level for rule, level, _ in entries}
    for rule in RULES:
        assert levels[rule] == ("SHOULD" if rule in SHOULD_RULES else "MUST"), rule


def test_rules_doc_names_modules_that_exist() -> None:
    package = Path(checker_module.__file__).resolve().parents[2]
    for rule, _, entry in _doc_entries():
        for name in re.findall(r"`([a-z_/0-9]+\.py)`", entry):
            path = package.parent / name if name.startswith("tests/") else package / name
            assert path.is_file(), f"docs/rules.md, {rule}: no module {path.relative_to(package.parent)}"


# -- API behaviour ------------------------------------------------------------------------------


def test_raises_by_default_and_quotes_the_message() -> None:
    checker = WireChecker()
    for step in OPEN:
        assert not isinstance(step, Raw)
        checker.feed(step[0], step[1])
    bad = {"jsonrpc": "2.0", "method": "session/update",
           "params": {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk", "content": {}}}}
    with pytest.raises(RuleViolation) as info:
        checker.feed(A, bad)
    assert info.value.rule == "R73" and info.value.messages == [bad]
    assert '"sessionUpdate":"agent_message_chunk"' in str(info.value)
    assert isinstance(info.value, AssertionError)


def test_long_messages_are_truncated_in_the_report() -> None:
    huge = {"jsonrpc": "1.0", "method": "_x", "params": {"blob": "a" * 10_000}}
    checker = run(OPEN + [(A, huge)])
    text = str(checker.violations[0])
    assert checker.rules == {"R3"} and len(text) < 600 and text.endswith("…")


def test_ignore_should_rules() -> None:
    steps = OPEN + [st("running"), st("idle"), tool("t1", status="pending")]
    assert run(steps).rules == {"R58", "R74"}
    assert run(steps, ignore=SHOULD_RULES).violations == []


def test_check_transcript_helper_and_finish_is_idempotent() -> None:
    from acp_agent.testing.client import TranscriptEntry

    entries = [TranscriptEntry(s[0], s[1], 0.0) for s in OPEN + [rq(5, "session/list")] if not isinstance(s, Raw)]
    assert [v.rule for v in check_transcript(entries)] == ["R8"]
    checker = run(OPEN + [rq(5, "session/list")])
    checker.finish()
    assert len(checker.violations) == 1


def test_unknown_direction_is_refused() -> None:
    with pytest.raises(ValueError):
        WireChecker().feed("sideways", {})  # type: ignore[arg-type]


# -- a real conversation with the SDK ------------------------------------------------------------


@pytest.mark.anyio
async def test_real_sdk_conversation_has_no_violations() -> None:
    connect_agent = pytest.importorskip("acp_agent.testing.client").connect_agent
    from tests.helpers.agents import ScriptedAgent

    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo hi")
        await client.prompt_and_wait(sid, "ask")
        await client.prompt(sid, "sleep 30")
        await client.wait_for(lambda: client.view(sid).state == "running")
        client.cancel(sid)
        await client.wait_idle(sid, 3)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        await client.close_session(sid)
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(client.transcript)
    checker.finish()
    assert checker.violations == [], [str(v) for v in checker.violations]
    assert len(client.transcript) > 20


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["permission", "elicitation"])
async def test_real_sdk_foreground_question_while_a_background_one_waits(kind: str) -> None:
    """The SDK reports ``requires_action`` right before it sends the foreground question; a question for
    listed work is already open then. Neither R61 (judged over the whole stretch) nor R59 may fire."""
    from acp_agent import Agent, ContentBlock, PermissionOption, Session, StopReason, ToolCall
    from acp_agent.testing import connect_agent

    options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
               PermissionOption(option_id="deny", name="Reject", kind="reject_once")]
    form = {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]}
    clients: list[Any] = []

    def open_questions() -> dict[Any, Any]:
        client = clients[0]
        return client.pending_permissions if kind == "permission" else client.pending_elicitations  # type: ignore[no-any-return]

    class Asker(Agent):
        name = "asker"

        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            async def watch(tool: ToolCall) -> None:
                if kind == "permission":
                    await tool.request_permission("Keep watching?", options)
                else:
                    await session.ask("Keep watching?", form, tool_call=tool)

            tool = await session.start_tool_call("watch", kind="other")
            tool.run(watch)  # listed at once; its question is owned by that work
            while not open_questions():  # the background question is on the wire first
                await anyio.sleep(0.01)
            if kind == "permission":
                await session.request_permission("Go on?", options)
            else:
                await session.ask("Go on?", form)
            await session.say("done")
            return "end_turn"

    async with connect_agent(Asker(), permission_policy=None, elicitation_policy=None) as client:
        clients.append(client)
        await client.initialize(capabilities={"elicitation": {"form": {}}})
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "go")
        await client.wait_for(lambda: len(open_questions()) == 2)
        assert client.view(sid).state == "requires_action"
        first, second = open_questions()
        if kind == "permission":
            client.answer_permission(second, "allow")
        else:
            client.answer_elicitation(second, "accept", {"go": True})
        await client.wait_idle(sid)
        if kind == "permission":
            client.answer_permission(first, "deny")
        else:
            client.answer_elicitation(first, "decline")
        await client.wait_for(lambda: client.view(sid).background == [])
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(client.transcript)
    checker.finish()
    assert checker.violations == [], [str(v) for v in checker.violations]


def test_vocabulary_derived_from_the_schema_matches_the_reference() -> None:
    from acp_agent.testing.checker import constants

    assert constants.foreground_states() == {"running", "requires_action", "idle", "unknown"}
    assert constants.tool_call_statuses() == {"pending", "in_progress", "paused", "completed", "failed", "cancelled"}
    assert constants.tool_call_statuses() >= constants.FINAL
    assert constants.tool_kinds() == {"read", "edit", "delete", "move", "search", "execute", "think", "fetch",
                                      "switch_mode", "other"}
    assert constants.agent_methods() == {"session/update", "session/request_permission", "elicitation/create",
                                         "elicitation/complete", "$/cancel_request", "auth/status_update",
                                         "mcp/message"}
    assert constants.update_kinds() == {
        "user_message_chunk", "user_message", "agent_message_chunk", "agent_message", "agent_thought_chunk",
        "agent_thought", "state_update", "tool_call_content_chunk", "tool_call_update", "terminal_update",
        "terminal_output_chunk", "plan_update", "available_commands_update", "config_option_update",
        "session_info_update", "usage_update", "notice", "compaction_update", "compaction_summary_chunk",
        "subagent_update", "session_message", "session_message_chunk", "plan_removed",
        "replay_complete", "prompt_suggestions_update",  # the Preview shapes (schemas/preview)
    }
    assert constants.update_kinds() >= constants.MESSAGE_KINDS and constants.update_kinds() >= constants.REPLAY_SHAPED
