"""An independent second opinion on an agent's wire: :class:`WireChecker`.

Feed it every message of one connection, in both directions and in wire order
(:meth:`WireChecker.feed`, or :meth:`WireChecker.feed_transcript` with the entries that
:class:`~acp_agent.testing.client.Client` records), tell it when the client closed its
sending side (:meth:`WireChecker.feed_end`), then call :meth:`WireChecker.finish`.
Each broken rule is reported as a :class:`RuleViolation` whose text reads
``R94 [MUST] <the rule in words>: <what happened>``, followed by the offending messages.
Rule ids ``R1``..``R113`` are the reference's (``ACP-V2-AGENT-REFERENCE.md`` §15); ``S1``,
``S2``, ... are rules this SDK adds where the reference leaves a gap. ``docs/rules.md``
states every one of them in words.
By default the first violation is raised; ``WireChecker(raise_on_violation=False)``
collects them all in :attr:`WireChecker.violations`.

The checker knows nothing about the SDK: it rebuilds what a client can know from the
messages alone (requests in flight both ways, initialization, sessions, foreground
state, background lists, tool calls, terminals, children, permission requests) and
judges only what the wire shows. :data:`RULES` lists every rule it judges with the exact
judgement; SHOULD rules (:data:`SHOULD_RULES`) are reported with ``level == "SHOULD"``
and can be switched off with ``ignore=SHOULD_RULES``.

Wire order matters. A transcript recorded at the client sees its own messages before
the agent can react to them, which is what the judgements assume: an agent message that
precedes a client message on the wire was sent before the agent could have seen it.

Judged with approximations (details in :data:`RULES`):

- R13: only structurally broken params (not an object, a required field missing or of the
  wrong JSON type) answered with a success; ``-32603`` for handler failures is invisible.
- R15 also flags a success answer to a session-scoped request (prompt, set_config_option,
  tool_call/cancel, terminal/cancel) for a session that is not open on the connection.
- R21 is only judged for requests sent while no ``initialize`` is in flight (a request
  pipelined behind ``initialize`` may legitimately be served after it).
- R35: a malformed / unknown non-``_`` ``replayFrom`` accepted, or a ``user_message(_chunk)``
  during a resume without ``replayFrom`` of a session that was not open on the connection.
- R40: a ``user_message(_chunk)`` / full ``agent_message`` / ``agent_thought`` (replay-shaped) after
  the resume snapshot, before the answer, for a session that was not open on the connection
  (live chunks and item updates may legitimately interleave; R113 judges re-announcements).
- R54: an errored prompt whose exact ``prompt`` content was echoed as a ``user_message``
  (outside a resume) under an id no successful prompt answer returned.
- R57: an accepted prompt that arrived while the session was idle, and no ``running`` /
  ``requires_action`` followed (unless the session was closed).
- R59 (the "only when" half): a ``requires_action`` stretch (up to the next other state, or the
  end) during which no request naming the session or one of its children, other than questions for
  listed background work, was pending or sent, and none was answered since the snapshot before it
  (the agent may not have read that answer yet). A stretch that a resume starts is not judged (its
  question may belong to an earlier connection). Whether the whole foreground waits (the "when"
  half) is not visible.
- R60: agent message/thought output while ``requires_action``, or a session left in
  ``requires_action`` at the end although its requests were answered.
- R61: a ``requires_action`` stretch (as for R59) in which the only questions in play named listed
  background work (a permission subject, an elicitation's ``toolCallId``, listed when it was asked),
  or were request-scoped elicitations (``requestId``).
- R62 follows the reference literally: a repeated idle MAY repeat the last stop reason, so
  only a *different* stop reason (or any ``usage``) on a repeated/resume idle is flagged.
- R68: no idle after a ``session/cancel`` of active work; or, after the idle that ends the
  cancelled work, a message chunk/update of a message that work started, or a ``cancelled``
  status for a tool call of that work (announced before the cancel, never listed, not
  covered by a listed terminal, no ``tool_call/cancel``).
- R85: a permission request (or an elicitation naming a ``toolCallId``) that was sent while its
  subject was not listed, still pending, when a ``requires_action`` snapshot starts listing the
  subject (the foreground waits on it). Anything else about "is the foreground waiting on this item"
  is not visible.
- R88: a listed tool call whose content is only ``terminal`` items, all naming terminals
  listed in the same snapshot.
- R90: a listed child whose latest known state (own ``state_update`` or the parent's mirror)
  is ``idle`` with ``background: []``; a child dropped from the list without such a state.
- R92 (SHOULD): at the end, a session (not closed) whose last list still names an item that
  was finalized afterwards.
- R105: ``output`` cleared, or a referencing tool call set to ``cancelled``, after a
  ``terminal/cancel``; an idle ``cancelled`` for work during which only per-item cancels (no
  ``session/cancel``/``close``, no answered permission request) happened. A ``session/close``
  in flight, the end of the client's input (:meth:`WireChecker.feed_end`), a ``session/cancel``
  the client sent while it saw the session idle followed directly by ``running`` (the work may
  have started before the agent read the cancel), or a
  ``session/cancel`` sent after a prompt that is echoed only after it (the agent inserted the
  prompt before reading the cancel), counts as such a cancel.
- R107: a ``$/cancel_request`` sent between a ``session/cancel`` and the idle that ends it,
  for a permission request (sent before the cancel) whose subject was listed at the cancel
  and is still live.
- R110: a permission request, still pending, whose subject gets listed only after it was
  sent (in a snapshot that is not ``requires_action``, which is R85).
- R113: each item of the last snapshot before a successful resume answer needs an entity
  update between the resume request and that snapshot (a replay counts).
- While a replay (``replayFrom``) is in progress, history is re-sent: tool call transitions
  (R20, R71, R74, R97) are not judged and the last write wins; so are live patches that race
  the replay (an agent update sent before it saw the resume request).
- S1: after a terminal's ``exitStatus``, a second ``exitStatus`` (or ``null``), a new ``output``,
  ``command``, ``cwd`` or ``size``, or an output chunk; ``capabilities`` and ``_meta`` may still
  change. Resume windows re-send history and current state, so they are not judged.
- S3 (SHOULD): a message for a new or forked session sent while its ``session/new`` /
  ``session/fork`` request was in flight, before the answer that names it (legal by the reference,
  which this SDK holds stricter: acp-agent holds such updates until right after the answer).
- S2: a message naming a session id sent before the ``session/new`` / ``session/fork`` request
  whose answer returns that id (updates while that request is in flight are legal, §5.1), or
  naming an id that never becomes a session on the connection (judged at finish). Messages
  before ``initialize`` are R22's; children named before their announcement are R79's.

Not judged (not visible on the wire): R4 (byte interleaving shows up as R1/R2), R5, R14,
R18, R19 (R44/R67 judge the visible part), R24, R36, R37, R38, R41 (see R42/R44/R45), R43
(see R8/R45), R48, R56 (holding vs inserting is invisible), R64, R65, R66 (R68 sees an agent that
keeps waiting, R67/R70 the withdrawal), R72,
R76 (shape; use the schema validator), R78, R82 (subjects are applied as tool call patches,
so R71/R97 see them), R86, R96, R98, R99, R108, R109.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .transcript import Direction, TranscriptEntry

__all__ = ["RULES", "SHOULD_RULES", "RuleViolation", "WireChecker", "check_transcript"]

C2A: Direction = "client->agent"
A2C: Direction = "agent->client"

RULES: dict[str, str] = {
    "R1": "an agent line (raw bytes given) is UTF-8, holds exactly one JSON value and no raw CR/LF",
    "R2": "every agent line is a JSON-RPC message (not stray text, not a scalar, not a shapeless object)",
    "R3": 'every agent message carries "jsonrpc": "2.0"',
    "R6": "agent request ids are strings or integers and never reused while pending",
    "R7": "an answer's id equals a received request id with the same JSON type",
    "R8": "every client request is answered exactly once (unanswered at finish, or answered twice)",
    "R9": "arrays from the agent only answer client batches and hold only responses; an empty batch gets -32600",
    "R10": "unparseable client input gets -32700, non-message JSON gets -32600, both with id null",
    "R11": "a client request with id null or a fractional id gets -32600 with id null",
    "R12": "no answer to notifications (id-null result, or id-null error with no invalid input pending); "
           "-32601 has data.method",
    "R13": "a request with structurally invalid params (not an object, required field missing or mistyped) "
           "is not answered with a success",
    "R15": "-32002 has data.sessionId = requested id; no success for session-scoped requests on sessions not open",
    "R16": "a request withdrawn with $/cancel_request is still answered",
    "R17": "no second answer after a $/cancel_request for an answered id; agent $/cancel_request names its own request",
    "R20": "a tool call whose permission was not granted does not start (pending -> in_progress)",
    "R21": "a request sent before initialize (none in flight) is answered -32600",
    "R22": "the agent sends no request or notification before the initialize success answer",
    "R23": "initialize answers a version <= the requested one; -32022 only when none is, with {requested, supported}",
    "R25": "the initialize result has protocolVersion and info.name / info.version",
    "R26": "initialize while one is in flight, after another request, or for a lower version is answered -32600",
    "R27": "with capabilities.session, the baseline session methods are not answered -32601",
    "R28": "advertised optional methods (fork, delete, archive, status, set_title) are not answered -32601",
    "R29": "terminal auth methods are offered only when the client sent capabilities.auth.terminal",
    "R30": "with non-empty authMethods, auth/login and auth/logout are not answered -32601",
    "R31": "session/new and session/fork return a sessionId not used before on the connection",
    "R32": "configOptions / availableCommands in new/resume/fork results are arrays, never null",
    "R33": "session/new/resume/fork with an MCP server of a transport not advertised is not a success",
    "R34": "paths the agent sends (terminal cwd, locations, diff paths, child cwd, listed cwd) are absolute",
    "R35": "malformed or unknown replayFrom is rejected; no user-message replay on a resume without replayFrom",
    "R39": "a successful resume has a state_update for the session between the request and the answer",
    "R40": "resume order: no replayed message of a resumed (not open) session after its snapshot, before the answer",
    "R42": "a close answer never finds the session running / requires_action (idle cancelled first)",
    "R44": "pending permission requests / elicitations of a session are withdrawn before its close answer",
    "R45": "nothing is sent for a session after its close answer (until it is resumed)",
    "R46": "session/close for a session not open is answered {} (not an error)",
    "R47": "session/list results carry a sessions array",
    "R49": "session/delete succeeds only with session.delete advertised; deleted sessions are not listed",
    "R50": "session/set_config_option results carry the configOptions array",
    "R51": "config_option_update / available_commands_update carry complete arrays",
    "R52": "a successful session/prompt answer carries a non-empty messageId",
    "R53": "the messageId of an accepted prompt is echoed as user_message(_chunk) in that session",
    "R54": "a prompt answered with an error was not echoed as a user message",
    "R55": "a prompt made only of text / resource_link blocks is not rejected with -32602",
    "R57": "an accepted prompt on an idle session is followed by running / requires_action",
    "R58": "the idle that ends work carries a stopReason; stopReason error carries an error object",
    "R59": "requires_action only while a question of the session (permission, elicitation) waits on the user",
    "R60": "no agent output while requires_action; not left in requires_action after its requests were answered",
    "R61": "requests only for listed background work, and request-scoped elicitations, do not put the session in "
           "requires_action",
    "R62": "a repeated or resume idle carries no new stop reason and no usage",
    "R63": "state values are running / requires_action / idle / unknown (or _custom)",
    "R67": "foreground permission requests still pending when a cancelled work ends were withdrawn",
    "R68": "after session/cancel of active work an idle follows; the cancelled work sends nothing after it",
    "R69": "the idle ending cancelled work does not say stopReason error",
    "R70": "foreground elicitations still pending when a cancelled work ends were withdrawn",
    "R71": "status: null is never sent for a tool call that has started",
    "R73": "every message update / chunk carries a non-empty messageId",
    "R74": "the first tool_call_update of a tool call has a title",
    "R75": "terminal output data (chunks and snapshots) is valid base64",
    "R77": 'commands are {"type": "command"} with unique names, no leading "/", no whitespace',
    "R79": "a child's announcing subagent_update precedes every message naming the child; a child keeps its parent",
    "R80": "the parent's subagent_update.state mirrors the child's latest own snapshot",
    "R81": "permission requests have a title, >= 1 option with unique optionIds; command subjects an absolute cwd",
    "R83": "elicitation modes are used only when the client advertised them",
    "R84": "unknown methods, update kinds, enum values and item types start with _",
    "R85": "work the foreground waits on (a pending foreground permission request or elicitation) is not listed in "
           "requires_action",
    "R87": "background items are well-formed, unique, and name live entities of this session / its children",
    "R88": "a tool call whose content is only listed terminals is not listed next to them",
    "R89": "a listed pending / paused tool call leaves the list only after a final status",
    "R90": "a child is listed exactly while not idle-with-empty-list; dropped only after such a state",
    "R91": "once a session reported a list, every later state_update carries background",
    "R92": "a listed item that was finalized is followed by a new snapshot (judged at finish)",
    "R93": "an item is listed only after its terminal_update / tool_call_update",
    "R94": "a listed item leaves the list only after its exitStatus / final status",
    "R95": "no removal snapshot idle + [] immediately followed by running",
    "R97": "tool call statuses never go back to pending and never change after a final status",
    "R100": "cancel is not advertised on a final tool call / exited terminal (judged at finish)",
    "R101": "an accepted tool_call/cancel is followed by a final status of that tool call",
    "R102": "tool_call/cancel is never -32601, and not accepted for unknown/final/non-cancellable tool calls",
    "R103": "an accepted terminal/cancel is followed by an exitStatus of that terminal",
    "R104": "terminal/cancel is never -32601, and not accepted for unknown/exited/non-cancellable terminals",
    "R105": "per-item cancels do not end the foreground, cancel referencing tool calls or clear terminal output",
    "R106": "session/cancel does not cancel listed tool calls",
    "R107": "session/cancel does not withdraw permission requests whose subject is listed work",
    "R110": "a permission request for background work is sent only after a snapshot lists that work",
    "R111": "after a parent's close answer nothing is sent for its child sessions",
    "R112": "a fork never lists entities it copied from its source",
    "R113": "every item of the resume snapshot had an entity update between the resume request and the snapshot",
    # SDK-level rules: gaps in the reference that this SDK closes (docs/rules.md, "SDK-level rules").
    "S1": "a terminal reports its exit once: afterwards only capabilities / _meta change and no output follows",
    "S2": "a session id is named only after the request that creates it arrived, and only for a session "
          "that comes to exist on the connection",
    "S3": "nothing for a new or forked session goes out before the answer that gives the client its id "
          "(the reference allows it; a client cannot place it)",
}

SHOULD_RULES: frozenset[str] = frozenset({
    "R44", "R46", "R58", "R59", "R67", "R70", "R74", "R80", "R92", "R95", "R100", "S3",
})

_STATES = frozenset({"running", "requires_action", "idle", "unknown"})
_STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"})
_STATUSES = frozenset({"pending", "in_progress", "paused", "completed", "failed", "cancelled"})
_FINAL = frozenset({"completed", "failed", "cancelled"})
_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})
_AGENT_METHODS = frozenset({
    "session/update", "session/request_permission", "elicitation/create", "elicitation/complete",
    "$/cancel_request", "auth/status_update", "mcp/message",
})
_UPDATES = frozenset({
    "user_message_chunk", "user_message", "agent_message_chunk", "agent_message", "agent_thought_chunk",
    "agent_thought", "state_update", "tool_call_content_chunk", "tool_call_update", "terminal_update",
    "terminal_output_chunk", "plan_update", "available_commands_update", "config_option_update",
    "session_info_update", "usage_update", "notice", "compaction_update", "compaction_summary_chunk",
    "subagent_update", "session_message", "session_message_chunk", "plan_removed",
})
_MESSAGE_KINDS = frozenset({
    "user_message", "user_message_chunk", "agent_message", "agent_message_chunk", "agent_thought",
    "agent_thought_chunk", "session_message", "session_message_chunk",
})
_AGENT_OUTPUT = frozenset({"agent_message", "agent_message_chunk", "agent_thought", "agent_thought_chunk"})
_USER_MESSAGES = frozenset({"user_message", "user_message_chunk"})
# Updates that only a replay sends (live work streams chunks; user messages come only from prompts).
_REPLAY_SHAPED = _USER_MESSAGES | {"agent_message", "agent_thought"}
_ITEM_ID_FIELD = {"terminal": "terminalId", "tool_call": "toolCallId", "subagent": "sessionId"}
_BASELINE = frozenset({"session/new", "session/list", "session/resume", "session/close", "session/prompt"})
_OPTIONAL = {
    "session/fork": "fork", "session/delete": "delete", "session/archive": "archive",
    "session/unarchive": "archive", "session/status": "status", "session/set_title": "title",
}
_SESSION_SCOPED = frozenset({"session/prompt", "session/set_config_option", "tool_call/cancel", "terminal/cancel"})
_REQUIRED: dict[str, dict[str, type]] = {
    "initialize": {"protocolVersion": int},
    "session/new": {"cwd": str},
    "session/resume": {"sessionId": str, "cwd": str},
    "session/close": {"sessionId": str},
    "session/prompt": {"sessionId": str, "prompt": list},
    "session/set_config_option": {"sessionId": str, "configId": str},
    "session/delete": {"sessionId": str},
    "session/fork": {"sessionId": str, "cwd": str},
    "session/list": {},
    "tool_call/cancel": {"sessionId": str, "toolCallId": str},
    "terminal/cancel": {"sessionId": str, "terminalId": str},
    "auth/login": {"methodId": str},
    "auth/logout": {},
}
_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[\\/]|\\\\)")
_UNPARSED = "<unparsed>"
_QUOTE_LIMIT = 300

IdKey = tuple[str, Any]
ItemKey = tuple[str, str]


class RuleViolation(AssertionError):
    """One broken rule: ``rule`` (e.g. ``"R94"``), its ``level`` (MUST/SHOULD), ``statement``
    (the rule in words, from :data:`RULES`), ``text`` (what happened) and the offending ``messages``.

    ``level`` defaults to the rule's own level (SHOULD for :data:`SHOULD_RULES`, else MUST).
    """

    def __init__(self, rule: str, text: str, messages: Sequence[Any] = (), level: str | None = None) -> None:
        self.rule = rule
        self.text = text
        self.level = level if level is not None else ("SHOULD" if rule in SHOULD_RULES else "MUST")
        self.statement = RULES.get(rule, "")
        self.messages: list[Any] = list(messages)
        quoted = "".join(f"\n  > {_quote(m)}" for m in self.messages)
        head = f"{rule} [{self.level}] {self.statement}: {text}" if self.statement else f"{rule} [{self.level}] {text}"
        super().__init__(head + quoted)


def _quote(message: Any) -> str:
    try:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=repr)
    except ValueError:
        text = repr(message)
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "…"


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _id_key(value: Any) -> IdKey:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, float):
        return ("float", value)
    return ("other", repr(value))


def _twin(key: IdKey) -> IdKey | None:
    """The same id value with the other JSON type (``1`` <-> ``"1"``)."""
    kind, value = key
    if kind == "int":
        return ("str", str(value))
    if kind == "str" and re.fullmatch(r"-?\d+", value):
        return ("int", int(value))
    return None


def _is_abs(path: Any) -> bool:
    return isinstance(path, str) and bool(_ABSOLUTE.match(path))


def _is_base64(data: Any) -> bool:
    if not isinstance(data, str):
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _custom(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("_")


def _for_background(req: _Req) -> bool:
    """A question asked on behalf of work that was listed when it was asked (R61, R107)."""
    return bool(req.refs & req.listed_at_send)


def _request_scoped(req: _Req) -> bool:
    """An elicitation scoped to a client request (``requestId``), not to a session."""
    return req.method == "elicitation/create" and req.session_id is None and "requestId" in req.params


def _snapshot(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("sessionUpdate", "_meta")}


def _quiet(state: dict[str, Any] | None) -> bool:
    """A child state that takes it out of its parent's list: idle with an empty own list (R90)."""
    return state is not None and state.get("state") == "idle" and state.get("background") == []


@dataclass(eq=False)
class _Req:
    """A request in flight (either direction)."""

    key: IdKey
    method: str
    params: dict[str, Any]
    message: Any
    index: int
    session_id: str | None
    expect: tuple[str, int] | None = None  # (rule, code): the answer must be this error
    bad_params: bool = False
    cancel_requested: bool = False
    withdrawn: bool = False  # agent requests: $/cancel_request sent
    refs: frozenset[ItemKey] = frozenset()  # agent requests: items the subject names
    listed_at_send: frozenset[ItemKey] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _ToolCall:
    announced_at: int
    status: str = "pending"
    started: bool = False
    cancel: bool = False
    content: list[Any] = field(default_factory=list)
    final_at: int | None = None
    cancel_requested: bool = False
    denied: bool = False

    def terminals(self) -> set[str]:
        return {c["terminalId"] for c in self.content
                if isinstance(c, dict) and c.get("type") == "terminal" and isinstance(c.get("terminalId"), str)}


@dataclass(eq=False)
class _Terminal:
    announced_at: int
    exited: bool = False
    exited_at: int | None = None
    cancel: bool = False
    cancelled: bool = False  # terminal/cancel accepted


@dataclass(eq=False)
class _Cancel:
    """A ``session/cancel`` not yet ended by an idle."""

    index: int
    message: Any
    was_active: bool
    listed: frozenset[ItemKey]
    message_ids: frozenset[str]


@dataclass(eq=False)
class _Resume:
    """A ``session/resume`` request awaiting its answer."""

    key: IdKey
    index: int
    replay: bool
    was_active: bool
    entity_at: dict[ItemKey, int] = field(default_factory=dict)
    snapshots: list[tuple[int, Any, list[ItemKey] | None]] = field(default_factory=list)
    last_replay: int = -1
    flagged: bool = False


@dataclass(eq=False)
class _Blocked:
    """A ``requires_action`` stretch of a session, judged when the next other state is reported (R59, R61)."""

    message: Any
    asked: bool  # a foreground question naming the session (or one of its children) was in play
    exempt: bool  # started by a resume: questions asked on an earlier connection are not visible
    background: list[Any] = field(default_factory=list)  # questions for listed background work in play
    request_scoped: list[Any] = field(default_factory=list)  # request-scoped elicitations in play


@dataclass(eq=False)
class _Session:
    id: str
    state: str | None = None  # None: unknown
    state_at: int = -1  # index of its latest state_update
    blocked: _Blocked | None = None
    last_stop_reason: str | None = None
    active: bool = False
    closed: bool = False
    closed_at: int = -1
    parent: str | None = None
    children: set[str] = field(default_factory=set)
    child_state: dict[str, Any] | None = None  # latest known snapshot, from either source
    child_state_at: int = -1
    own_state: dict[str, Any] | None = None  # its own latest state_update (R80)
    mirrored: dict[str, Any] | None = None  # the parent's latest subagent_update.state (R80)
    reporting: bool = False
    last_list: list[ItemKey] | None = None
    list_at: int = -1
    ever_listed: set[ItemKey] = field(default_factory=set)
    tool_calls: dict[str, _ToolCall] = field(default_factory=dict)
    terminals: dict[str, _Terminal] = field(default_factory=dict)
    fork_items: frozenset[ItemKey] = frozenset()
    work_message_ids: set[str] = field(default_factory=set)
    session_cancel_since_work: bool = False
    item_cancel_since_work: bool = False
    permission_answered_since_work: bool = False
    cancel: _Cancel | None = None
    cancelled_message_ids: set[str] = field(default_factory=set)
    cancelled_tool_calls: set[str] = field(default_factory=set)
    resume: _Resume | None = None
    last_active_at: int = -1
    requires_action_at: int = -1
    request_answered_at: int = -1
    user_echo_at: dict[str, int] = field(default_factory=dict)
    cancel_for_next: bool = False  # session/cancel sent while the client saw the session idle
    last_cancel_at: int = -1  # index of the latest session/cancel
    cancelled_prompt_echoed: bool = False  # a prompt sent before that cancel was echoed after it
    early_cancel: bool = False  # the current work started after such a cancel: it may end cancelled
    user_messages: list[tuple[int, str, Any, bool]] = field(default_factory=list)
    prompt_ids: set[str] = field(default_factory=set)
    r95: Any = None


@dataclass(frozen=True)
class _Early:
    """The first agent message naming a session id the client had not learned yet (R79, S2)."""

    index: int
    message: Any
    own: bool  # the message is *for* that session (outer ``sessionId``), not just naming it


@dataclass(frozen=True)
class _Answer:
    message: dict[str, Any]
    ok: bool
    result: dict[str, Any]
    code: int | None
    data: Any


class WireChecker:
    """Judges one connection's messages against the rules in :data:`RULES`.

    ``ignore`` names rules not to report (e.g. ``SHOULD_RULES``).
    """

    def __init__(self, *, raise_on_violation: bool = True, ignore: Collection[str] = ()) -> None:
        self.raise_on_violation = raise_on_violation
        self.ignore = frozenset(ignore)
        self.violations: list[RuleViolation] = []
        self._n = 0
        self._finished = False
        # requests in flight
        self._client_pending: dict[IdKey, _Req] = {}
        self._client_answered: set[IdKey] = set()
        self._cancel_after_answer: set[IdKey] = set()
        self._unjudged_ids: set[IdKey] = set()
        self._agent_pending: dict[IdKey, _Req] = {}
        self._agent_ids: set[IdKey] = set()
        self._null_expected: list[tuple[str, int, Any, bool]] = []
        self._batches_waiting = 0
        # initialization
        self._initialized = False
        self._init_pending = 0
        self._request_since_init = False
        self._negotiated: int | None = None
        self._agent_caps: dict[str, Any] = {}
        self._client_caps: dict[str, Any] = {}
        self._auth_methods: list[Any] = []
        # sessions
        self._sessions: dict[str, _Session] = {}
        self._issued: set[str] = set()
        self._known: set[str] = set()
        self._early: dict[str, _Early] = {}
        self._deleted: set[str] = set()
        self._prompts: list[tuple[_Req, str]] = []
        self._failed_prompts: list[_Req] = []
        self._accepted_cancels: list[tuple[_Req, str, str, str]] = []
        self._client_ended = False  # the client closed its sending side (the agent winds down)
        self._answer_handlers: dict[str, Callable[[_Req, _Answer], None]] = {
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

    # -- public API ----------------------------------------------------------------------

    @property
    def rules(self) -> set[str]:
        """The rules broken so far."""
        return {v.rule for v in self.violations}

    def feed(self, direction: Direction, message: Any, raw: bytes | None = None) -> None:
        """Judge one message (the next on the wire).

        ``raw`` is the exact line as written (with or without its ``\\n``); it enables R1
        and, when ``message`` is ``None``, is parsed here. A line that is not JSON is
        passed as ``raw`` alone, or as the client's ``{"<unparsed>": text}`` marker.
        """
        if direction not in (C2A, A2C):
            raise ValueError(f"unknown direction {direction!r}")
        if raw is not None:
            parsed = self._r1_line(direction, raw)
            if message is None:
                message = parsed
        if isinstance(message, dict) and set(message) == {_UNPARSED}:
            self._n += 1
            if direction == A2C:
                self._flag("R2", "the agent wrote a line that is not JSON", message)
            else:
                self._expect_null("R10", -32700, message)
            return
        if isinstance(message, list):
            if direction == C2A:
                self._client_batch(message)
            else:
                self._r9_agent_batch(message)
            return
        if direction == C2A:
            self._client_message(message)
        else:
            self._agent_message(message)

    def feed_line(self, direction: Direction, raw: bytes) -> None:
        """Judge one raw line (parsed here)."""
        self.feed(direction, None, raw)

    def feed_end(self, direction: Direction) -> None:
        """The stream in ``direction`` ended (after every message it carried was fed).

        ``"client->agent"``: the client closed its sending side, so the agent winds down and
        every session's work may end ``cancelled`` from here on, as under ``session/close``
        (R105 does not blame such an end on an earlier per-item cancel).
        """
        if direction not in (C2A, A2C):
            raise ValueError(f"unknown direction {direction!r}")
        if direction == C2A:
            self._client_ended = True

    def feed_transcript(self, entries: Iterable[TranscriptEntry], *, end_at: int | None = None) -> None:
        """Judge recorded :class:`~acp_agent.testing.client.TranscriptEntry` items, in order.

        ``end_at``: the client closed its sending side after that many entries
        (:attr:`Client.closed_at <acp_agent.testing.client.Client.closed_at>`, see :meth:`feed_end`).
        """
        for n, entry in enumerate(entries):
            if n == end_at:
                self.feed_end(C2A)
            self.feed(entry.direction, entry.message)
        if end_at is not None:
            self.feed_end(C2A)  # closed after the last entry (a second call changes nothing)

    def finish(self) -> None:
        """End-of-connection checks (unanswered requests, promised follow-ups)."""
        if self._finished:
            return
        self._finished = True
        self._r8_unanswered()
        self._r10_unanswered_invalid()
        self._r53_echoes()
        self._r54_rejected_echoes()
        self._r57_prompt_work()
        for s in self._sessions.values():
            self._r59_r61_blocked_ends(s, None)
            self._r60_stuck(s)
            self._r68_no_idle(s)
            self._r92_stale_list(s)
            self._r100_cancel_after_end(s)
            self._r80_mirror(s)
        self._r101_r103_confirmations()
        self._s2_never_created()

    # -- reporting -----------------------------------------------------------------------

    def _flag(self, rule: str, text: str, *messages: Any) -> None:
        if rule in self.ignore:
            return
        violation = RuleViolation(rule, text, messages)
        self.violations.append(violation)
        if self.raise_on_violation:
            raise violation

    # -- framing -------------------------------------------------------------------------

    def _r1_line(self, direction: Direction, raw: bytes) -> Any:
        """R1: one UTF-8 JSON value per line, no raw line breaks (agent lines only)."""
        line = raw[:-1] if raw.endswith(b"\n") else raw
        quoted = {_UNPARSED: line.decode("utf-8", "replace")}
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

    @staticmethod
    def _classify(message: Any) -> str:
        if not isinstance(message, dict):
            return "invalid"
        if "method" in message:
            if not isinstance(message["method"], str):
                return "invalid"
            return "request" if "id" in message else "notification"
        if "id" in message and (("result" in message) != ("error" in message)):
            return "response"
        return "invalid"

    def _expect_null(self, rule: str, code: int, message: Any, optional: bool = False) -> None:
        self._null_expected.append((rule, code, message, optional))

    def _client_batch(self, batch: list[Any]) -> None:
        if not batch:
            self._n += 1
            self._expect_null("R9", -32600, batch)
            return
        wants_reply = False
        for entry in batch:
            kind = self._classify(entry)
            if kind in ("request", "invalid") or _obj(entry).get("jsonrpc") != "2.0":
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

    # -- client -> agent -----------------------------------------------------------------

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
            elif not _is_id(rid):
                self._expect_null("R10", -32600, message)
            else:
                self._client_request(message)
        elif kind == "notification":
            self._client_notification(message)
        else:
            self._client_response(message)

    def _client_request(self, message: dict[str, Any]) -> None:
        key = _id_key(message["id"])
        if key in self._client_pending:
            return  # the client reused a pending id: its own bug, not judged
        self._client_answered.discard(key)
        self._cancel_after_answer.discard(key)
        method: str = message["method"]
        params = message.get("params", {})
        sid = _obj(params).get("sessionId")
        req = _Req(key, method, _obj(params), message, self._n, sid if isinstance(sid, str) else None)
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

    def _request_snapshots(self, req: _Req) -> None:
        """Remember what the checker knew when a request arrived (judged at its answer)."""
        s = self._sessions.get(req.session_id or "")
        if req.method == "tool_call/cancel" and s is not None:
            tc = s.tool_calls.get(str(req.params.get("toolCallId")))
            req.extra["item"] = None if tc is None else (tc.status in _FINAL, tc.cancel)
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
            s.resume = _Resume(req.key, self._n, replay, s.active and not s.closed)

    def _r21_r26_expectations(self, req: _Req) -> None:
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
        required = _REQUIRED.get(method)
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
        params = _obj(message.get("params"))
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
        if not _is_id(rid):
            return
        key = _id_key(rid)
        if key in self._client_pending:
            self._client_pending[key].cancel_requested = True
        elif key in self._client_answered:
            self._cancel_after_answer.add(key)

    def _session_cancel(self, s: _Session, message: Any) -> None:
        was_active = s.state is not None and s.state != "idle"
        listed = frozenset(self._covered(s, s.last_list or []))
        s.cancel = _Cancel(self._n, message, was_active, listed, frozenset(s.work_message_ids))
        s.session_cancel_since_work = True
        # Sent while the client saw the session idle: if the next snapshot says ``running``, that work
        # may have started before the agent read this cancel (its prompt, or agent-initiated work), so
        # the agent may apply the cancel to it. The wire cannot tell; the judgement gives it the benefit.
        s.cancel_for_next = not was_active
        s.last_cancel_at = self._n

    def _client_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if not _is_id(rid):
            return
        req = self._agent_pending.pop(_id_key(rid), None)
        if req is None:
            return
        s = self._sessions.get(req.session_id or "")
        if s is not None:
            s.request_answered_at = self._n
            if req.method == "session/request_permission":
                s.permission_answered_since_work = True
        if req.method == "session/request_permission":
            self._r20_record_outcome(req, message)

    def _r20_record_outcome(self, req: _Req, message: dict[str, Any]) -> None:
        """R20: remember tool calls whose permission was not granted."""
        s = self._sessions.get(req.session_id or "")
        if s is None:
            return
        outcome = _obj(_obj(message.get("result")).get("outcome"))
        options = {o.get("optionId"): o.get("kind") for o in req.params.get("options") or [] if isinstance(o, dict)}
        allowed: bool | None = False
        if not req.withdrawn and "error" not in message and outcome.get("outcome") == "selected":
            kind = options.get(outcome.get("optionId"), "reject")
            allowed = None if _custom(kind) else str(kind).startswith("allow_")
        for kind_, tid in req.refs:
            tc = s.tool_calls.get(tid) if kind_ == "tool_call" else None
            if tc is not None and allowed is not None:
                tc.denied = not allowed

    # -- agent -> client -----------------------------------------------------------------

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
        if method not in _AGENT_METHODS and not method.startswith(("_", "$/")):
            self._flag("R84", f"unknown method {method!r} without the _ prefix", message)

    def _session_touch(self, sid: Any, message: Any) -> _Session | None:
        """Common checks for an agent message naming a session (R45, R111, R79 early uses)."""
        if not isinstance(sid, str):
            return None
        s = self._session(sid)
        parent = self._sessions.get(s.parent) if s.parent else None
        if parent is not None and parent.closed and parent.resume is None:
            self._flag("R111", f"message for child {sid!r} after its parent's close answer", message)
            return None
        if s.closed and s.resume is None:
            self._flag("R45", f"message for session {sid!r} after its close answer", message)
            return None
        self._note_early(sid, message, own=True)
        s.r95 = None
        return s

    def _note_early(self, sid: Any, message: Any, own: bool = False) -> None:
        """Remember the first message naming a session id the client has not learned yet.

        The client learns an id from its own request naming it (resume, prompt, ...), from the
        answer that creates it (new, fork: S2) or from a child's announcing ``subagent_update``
        (R79); each of those settles the entry. Before ``initialize`` everything is R22's.
        """
        if not isinstance(sid, str) or sid in self._known or not self._initialized:
            return
        early = self._early.get(sid)
        if early is None or (own and not early.own):
            self._early[sid] = _Early(self._n, message, own or (early is not None and early.own))

    def _session(self, sid: str) -> _Session:
        s = self._sessions.get(sid)
        if s is None:
            s = self._sessions[sid] = _Session(sid)
        return s

    def _agent_request(self, message: dict[str, Any]) -> None:
        key = self._r6_request_id(message)
        params = _obj(message.get("params"))
        sid = params.get("sessionId")
        s = self._session_touch(sid, message)
        if s is None and isinstance(sid, str):
            return
        req = _Req(key or ("none", None), message["method"], params, message, self._n,
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

    def _note_question(self, req: _Req) -> None:
        """A request the agent sent is in play for the ``requires_action`` stretches it can explain."""
        if req.session_id is not None:
            for sid in self._lineage(req.session_id):
                blocked = self._sessions[sid].blocked if sid in self._sessions else None
                if blocked is None:
                    continue
                if _for_background(req):
                    blocked.background.append(req.message)
                else:
                    blocked.asked = True
        elif _request_scoped(req):
            for s in self._sessions.values():
                if s.blocked is not None:
                    s.blocked.request_scoped.append(req.message)

    def _r6_request_id(self, message: dict[str, Any]) -> IdKey | None:
        """R6: agent request ids are strings/integers, not reused while pending."""
        rid = message["id"]
        if not _is_id(rid):
            self._flag("R6", "request id must be a string or an integer", message)
            return None
        key = _id_key(rid)
        if key in self._agent_pending:
            self._flag("R6", "request id reused while the earlier request is pending",
                       self._agent_pending[key].message, message)
        return key

    def _r83_elicitation_mode(self, req: _Req) -> None:
        """R83: only elicitation modes the client advertised."""
        mode = req.params.get("mode")
        caps = _obj(self._client_caps.get("elicitation"))
        if mode in ("form", "url") and not isinstance(caps.get(mode), dict):
            self._flag("R83", f"elicitation mode {mode!r} was not advertised by the client", req.message)

    def _permission_request(self, s: _Session, req: _Req) -> None:
        self._r81_permission_shape(req)
        subject = _obj(req.params.get("subject"))
        refs: set[ItemKey] = set()
        if subject.get("type") == "tool_call":
            patch = _obj(subject.get("toolCall"))
            if isinstance(patch.get("toolCallId"), str):
                refs.add(("tool_call", patch["toolCallId"]))
                self._tool_patch(s, patch, req.message, from_subject=True)
        elif subject.get("type") == "command":
            if isinstance(subject.get("toolCallId"), str):
                refs.add(("tool_call", subject["toolCallId"]))
            if isinstance(subject.get("terminalId"), str):
                refs.add(("terminal", subject["terminalId"]))
        req.refs = frozenset(refs)
        req.listed_at_send = frozenset(refs & self._covered(s, s.last_list or []))

    def _r81_permission_shape(self, req: _Req) -> None:
        """R81: a title, >= 1 option with unique optionIds, command subjects with command and absolute cwd."""
        params = req.params
        if not isinstance(params.get("title"), str) or not params["title"]:
            self._flag("R81", "permission request without a title", req.message)
        options = params.get("options")
        if not isinstance(options, list) or not options:
            self._flag("R81", "permission request without options", req.message)
            return
        ids = [_obj(o).get("optionId") for o in options]
        if any(not isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
            self._flag("R81", "permission options need unique string optionIds", req.message)
        subject = _obj(params.get("subject"))
        if subject.get("type") == "command" and (
            not isinstance(subject.get("command"), str) or not _is_abs(subject.get("cwd"))
        ):
            self._flag("R81", "a command subject needs a command and an absolute cwd", req.message)

    def _agent_cancel_request(self, message: dict[str, Any]) -> None:
        rid = _obj(message.get("params")).get("requestId")
        key = _id_key(rid)
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

    def _r107_kept_open(self, req: _Req, message: Any) -> None:
        """R107: session/cancel leaves permission requests for listed work open."""
        s = self._sessions.get(req.session_id or "")
        if s is None or s.cancel is None or req.method != "session/request_permission" or req.index > s.cancel.index:
            return
        live = {k for k in req.refs & s.cancel.listed if self._live(s, k)}
        if live:
            self._flag("R107", f"request for listed work {sorted(live)} withdrawn after session/cancel",
                       req.message, s.cancel.message, message)

    def _ended(self, s: _Session, key: ItemKey, after: int) -> bool:
        """The item was reported ended (final status, exitStatus, quiet child) after message ``after``."""
        kind, item = key
        if kind == "subagent":
            child = self._sessions.get(item)
            return child is not None and _quiet(child.child_state) and child.child_state_at > after
        if kind == "tool_call":
            tc = s.tool_calls.get(item)
            return tc is not None and tc.status in _FINAL and (tc.final_at or -1) > after
        terminal = s.terminals.get(item)
        return terminal is not None and terminal.exited and (terminal.exited_at or -1) > after

    def _live(self, s: _Session, key: ItemKey) -> bool:
        kind, item = key
        if kind == "tool_call":
            tc = s.tool_calls.get(item)
            return tc is not None and tc.status not in _FINAL
        if kind == "terminal":
            term = s.terminals.get(item)
            return term is not None and not term.exited
        return True

    # -- answers to client requests --------------------------------------------------------

    def _agent_response(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if rid is None:
            self._r12_null_answer(message)
            return
        key = _id_key(rid)
        if key in self._unjudged_ids:
            return
        req = self._client_pending.pop(key, None)
        if req is None:
            req = self._r7_r8_r17_unmatched(key, message)
            if req is None:
                return
        self._client_answered.add(req.key)
        error = message.get("error")
        answer = _Answer(message, "result" in message, _obj(message.get("result")),
                         _obj(error).get("code") if isinstance(_obj(error).get("code"), int) else None,
                         _obj(error).get("data"))
        self._on_answer(req, answer)

    def _r12_null_answer(self, message: dict[str, Any]) -> None:
        """R10 / R11 / R12: an ``id: null`` answer must match invalid client input."""
        if "result" in message:
            self._flag("R12", "a result with id null answers no request (a notification?)", message)
            return
        code = _obj(message.get("error")).get("code")
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

    def _r7_r8_r17_unmatched(self, key: IdKey, message: dict[str, Any]) -> _Req | None:
        """R7 / R8 / R17: an answer that matches no pending request."""
        twin = _twin(key)
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

    def _on_answer(self, req: _Req, answer: _Answer) -> None:
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

    def _r12_method_not_found(self, req: _Req, answer: _Answer) -> None:
        """R12: ``-32601`` carries ``data.method`` naming the request's method."""
        if _obj(answer.data).get("method") != req.method:
            self._flag("R12", "-32601 must carry data.method with the request's method", req.message, answer.message)

    def _r27_r28_r30_implemented(self, req: _Req, answer: _Answer) -> None:
        """R27 / R28 / R30 / R102 / R104: methods the agent committed to are not -32601."""
        session = self._agent_caps.get("session")
        if req.method in _BASELINE and isinstance(session, dict):
            self._flag("R27", f"{req.method} is baseline with capabilities.session", req.message, answer.message)
        elif req.method in _OPTIONAL and isinstance(_obj(session).get(_OPTIONAL[req.method]), dict):
            self._flag("R28", f"{req.method} was advertised", req.message, answer.message)
        elif req.method in ("auth/login", "auth/logout") and self._auth_methods:
            self._flag("R30", f"{req.method} is required with authMethods", req.message, answer.message)
        elif req.method == "tool_call/cancel":
            self._flag("R102", "tool_call/cancel must be -32602, never -32601", req.message, answer.message)
        elif req.method == "terminal/cancel":
            self._flag("R104", "terminal/cancel must be -32602, never -32601", req.message, answer.message)

    def _r15_not_found_data(self, req: _Req, answer: _Answer) -> None:
        """R15: ``-32002`` carries ``data.sessionId`` = the requested session id."""
        if req.session_id is None or _obj(answer.data).get("sessionId") != req.session_id:
            self._flag("R15", "-32002 must carry data.sessionId with the requested id", req.message, answer.message)

    def _r15_success_on_closed(self, req: _Req, answer: _Answer) -> bool:
        """R15: session-scoped requests for sessions not open on the connection are not a success."""
        if answer.ok and req.method in _SESSION_SCOPED and req.extra.get("active") is not True:
            self._flag("R15", f"success for session {req.session_id!r}, which is not open on this connection",
                       req.message, answer.message)
            return True
        return False

    # initialize ------------------------------------------------------------------------

    def _answered_initialize(self, req: _Req, answer: _Answer) -> None:
        if answer.ok:
            self._r23_version(req, answer)
            self._r25_info(req, answer)
            self._r29_terminal_auth(req, answer)
            version = answer.result.get("protocolVersion")
            self._initialized = True
            self._request_since_init = False
            self._negotiated = version if isinstance(version, int) else self._negotiated
            self._agent_caps = _obj(answer.result.get("capabilities"))
            methods = answer.result.get("authMethods")
            self._auth_methods = methods if isinstance(methods, list) else []
            self._client_caps = _obj(req.params.get("capabilities"))
        elif answer.code == -32022:
            self._r23_unsupported(req, answer)

    def _r23_version(self, req: _Req, answer: _Answer) -> None:
        """R23: the selected version is an integer <= the requested one."""
        requested = req.params.get("protocolVersion")
        version = answer.result.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or (
            isinstance(requested, int) and version > requested
        ):
            self._flag("R23", "initialize must select a version <= the requested one", req.message, answer.message)

    def _r23_unsupported(self, req: _Req, answer: _Answer) -> None:
        """R23: ``-32022`` only when no supported version is <= the request, with ``{requested, supported}``."""
        requested = req.params.get("protocolVersion")
        data = _obj(answer.data)
        supported = data.get("supported")
        if (
            data.get("requested") != requested
            or not isinstance(supported, list)
            or not all(isinstance(v, int) for v in supported)
            or (isinstance(requested, int) and any(v <= requested for v in supported))
        ):
            self._flag("R23", "-32022 needs data {requested, supported} and no supported version <= requested",
                       req.message, answer.message)

    def _r25_info(self, req: _Req, answer: _Answer) -> None:
        """R25: the result carries ``info.name`` and ``info.version``."""
        info = _obj(answer.result.get("info"))
        if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
            self._flag("R25", "the initialize result needs info.name and info.version", answer.message)

    def _r29_terminal_auth(self, req: _Req, answer: _Answer) -> None:
        """R29: ``terminal`` auth methods only when the client sent ``capabilities.auth.terminal``."""
        methods = answer.result.get("authMethods")
        offered = any(_obj(m).get("type") == "terminal" for m in methods) if isinstance(methods, list) else False
        client = _obj(_obj(req.params.get("capabilities")).get("auth")).get("terminal")
        if offered and not isinstance(client, dict):
            self._flag("R29", "terminal auth offered to a client without capabilities.auth.terminal",
                       req.message, answer.message)

    # session lifecycle -----------------------------------------------------------------

    def _answered_new(self, req: _Req, answer: _Answer) -> None:
        if answer.ok:
            self._new_session(req, answer)

    def _answered_fork(self, req: _Req, answer: _Answer) -> None:
        if not answer.ok:
            return
        s = self._new_session(req, answer)
        source = self._sessions.get(req.session_id or "")
        if s is not None and source is not None:
            s.fork_items = frozenset(
                [("tool_call", t) for t in source.tool_calls]
                + [("terminal", t) for t in source.terminals]
                + [("subagent", c) for c in source.children]
            )

    def _new_session(self, req: _Req, answer: _Answer) -> _Session | None:
        sid = answer.result.get("sessionId")
        self._r31_fresh_id(req, answer, sid)
        self._r32_lists(req, answer)
        self._r33_mcp(req, answer)
        if not isinstance(sid, str):
            return None
        self._issued.add(sid)
        self._known.add(sid)
        self._s2_named_before_request(req, answer, sid)
        s = self._session(sid)
        s.active = True
        if s.state is None:
            s.state = "idle"
        return s

    def _s2_named_before_request(self, req: _Req, answer: _Answer, sid: str) -> None:
        """S2: the new id was not named before the request that creates it (while it is in flight is fine)."""
        early = self._early.pop(sid, None)
        if early is not None and early.own and early.index < req.index:
            self._flag("S2", f"session {sid!r} was named before the {req.method} request that created it",
                       early.message, req.message, answer.message)
        elif early is not None and early.own:
            self._flag("S3", f"session {sid!r} was named before the {req.method} answer that gave its id",
                       early.message, answer.message)

    def _r31_fresh_id(self, req: _Req, answer: _Answer, sid: Any) -> None:
        """R31: a fresh, unique ``sessionId``."""
        if not isinstance(sid, str) or not sid:
            self._flag("R31", f"{req.method} must return a sessionId", answer.message)
        elif sid in self._issued or (sid in self._sessions and self._sessions[sid].parent is not None):
            self._flag("R31", f"session id {sid!r} was already used on this connection", answer.message)

    def _r32_lists(self, req: _Req, answer: _Answer) -> None:
        """R32: ``configOptions`` / ``availableCommands`` are arrays or omitted, never null."""
        for name in ("configOptions", "availableCommands"):
            if name in answer.result and not isinstance(answer.result[name], list):
                self._flag("R32", f"{name} must be an array or omitted", answer.message)
        if isinstance(answer.result.get("availableCommands"), list):
            self._r77_commands(answer.result["availableCommands"], answer.message)

    def _r33_mcp(self, req: _Req, answer: _Answer) -> None:
        """R33: MCP servers of transports not advertised are rejected."""
        mcp = _obj(_obj(self._agent_caps.get("session")).get("mcp"))
        servers = req.params.get("mcpServers")
        for server in servers if isinstance(servers, list) else []:
            kind = _obj(server).get("type")
            if not isinstance(kind, str) or not isinstance(mcp.get(kind), dict):
                self._flag("R33", f"MCP transport {kind!r} is not advertised but was accepted",
                           req.message, answer.message)
                return

    def _answered_resume(self, req: _Req, answer: _Answer) -> None:
        s = self._session(req.session_id) if req.session_id is not None else None
        window = s.resume if s is not None and s.resume is not None and s.resume.key == req.key else None
        if s is not None and window is not None:
            s.resume = None
        if not answer.ok or s is None:
            return
        self._r32_lists(req, answer)
        self._r33_mcp(req, answer)
        self._r35_cursor(req, answer)
        if window is not None:
            self._r39_snapshot(req, answer, window)
            self._r40_order(req, answer, window)
            self._r113_reannounced(s, req, answer, window)
        s.active = True
        s.closed = False
        self._issued.add(s.id)
        self._known.add(s.id)

    def _r35_cursor(self, req: _Req, answer: _Answer) -> None:
        """R35: a malformed or unknown (non-``_``) ``replayFrom`` is rejected."""
        cursor = req.params.get("replayFrom")
        if cursor is None:
            return
        kind = _obj(cursor).get("type")
        if not isinstance(cursor, dict) or not isinstance(kind, str) or (kind != "start" and not _custom(kind)):
            self._flag("R35", "a malformed or unknown replayFrom was accepted", req.message, answer.message)

    def _r35_unrequested_replay(self, s: _Session, window: _Resume, message: Any) -> None:
        """R35: no message replay without ``replayFrom`` (session not open before the resume)."""
        if not window.replay and not window.was_active and not window.flagged:
            window.flagged = True
            self._flag("R35", "messages replayed on a resume without replayFrom", message)

    def _r39_snapshot(self, req: _Req, answer: _Answer, window: _Resume) -> None:
        """R39: a successful resume sends a ``state_update`` before its answer."""
        if not window.snapshots:
            self._flag("R39", "no state_update between the resume request and its answer", req.message,
                       answer.message)

    def _r40_order(self, req: _Req, answer: _Answer, window: _Resume) -> None:
        """R40: replay and re-announcements come before the snapshot (session not open before)."""
        if window.snapshots and not window.was_active and window.last_replay > window.snapshots[-1][0]:
            self._flag("R40", "a replayed message came after the resume snapshot, before the answer",
                       window.snapshots[-1][1], answer.message)

    def _r113_reannounced(self, s: _Session, req: _Req, answer: _Answer, window: _Resume) -> None:
        """R113: each item of the resume snapshot got an entity update in the resume window."""
        if not window.snapshots:
            return
        at, snapshot, keys = window.snapshots[-1]
        missing = [k for k in keys or [] if window.entity_at.get(k, at + 1) > at]
        if missing:
            self._flag("R113", f"listed items {missing} were not re-announced before the resume snapshot",
                       req.message, snapshot)

    def _answered_close(self, req: _Req, answer: _Answer) -> None:
        s = self._sessions.get(req.session_id or "")
        if not answer.ok:
            self._r46_close_error(req, answer)
            return
        if s is None:
            return
        self._r42_idle_first(s, req, answer)
        self._r44_requests_withdrawn(s, req, answer)
        self._mark_closed(s)

    def _mark_closed(self, s: _Session) -> None:
        """A closed session and, with it, all its children (closing a parent ends them)."""
        s.closed = True
        s.active = False
        s.closed_at = self._n
        s.cancel = None
        s.r95 = None
        s.state = "idle"
        if s.last_list is not None:
            s.last_list = []
        for child_id in s.children:
            child = self._sessions.get(child_id)
            if child is not None and not child.closed:
                self._mark_closed(child)

    def _r42_idle_first(self, s: _Session, req: _Req, answer: _Answer) -> None:
        """R42: close ends active work with an idle ``cancelled`` before its answer."""
        if s.state in ("running", "requires_action"):
            self._flag("R42", f"session closed while {s.state} (idle cancelled must come first)",
                       req.message, answer.message)

    def _r44_requests_withdrawn(self, s: _Session, req: _Req, answer: _Answer) -> None:
        """R44: pending permission requests / elicitations are withdrawn before the close answer."""
        for pending in self._pending_of(s):
            self._flag("R44", "request still pending (not withdrawn) at the close answer", pending.message,
                       answer.message)

    def _r46_close_error(self, req: _Req, answer: _Answer) -> None:
        """R46: closing a session that is not open succeeds with ``{}``."""
        if req.extra.get("active") is not True and not req.bad_params:
            self._flag("R46", "session/close for a session not open should answer {}", req.message, answer.message)

    def _answered_list(self, req: _Req, answer: _Answer) -> None:
        if not answer.ok:
            return
        sessions = answer.result.get("sessions")
        self._r47_sessions_array(answer, sessions)
        for info in sessions if isinstance(sessions, list) else []:
            self._r49_not_deleted(answer, _obj(info).get("sessionId"))
            self._r34_path(_obj(info).get("cwd"), answer.message, "session cwd")

    def _r47_sessions_array(self, answer: _Answer, sessions: Any) -> None:
        """R47: ``session/list`` always returns a ``sessions`` array."""
        if not isinstance(sessions, list):
            self._flag("R47", "session/list must return a sessions array", answer.message)

    def _r49_not_deleted(self, answer: _Answer, sid: Any) -> None:
        """R49: deleted sessions are no longer listed."""
        if sid in self._deleted:
            self._flag("R49", f"deleted session {sid!r} is still listed", answer.message)

    def _answered_delete(self, req: _Req, answer: _Answer) -> None:
        if not answer.ok:
            return
        self._r49_delete_advertised(req, answer)
        if req.session_id is not None:
            self._deleted.add(req.session_id)

    def _r49_delete_advertised(self, req: _Req, answer: _Answer) -> None:
        """R49: ``session/delete`` is served only with ``session.delete`` advertised."""
        if not isinstance(_obj(self._agent_caps.get("session")).get("delete"), dict):
            self._flag("R49", "session/delete succeeded without session.delete advertised", req.message,
                       answer.message)

    def _answered_set_config_option(self, req: _Req, answer: _Answer) -> None:
        self._r50_config_result(req, answer)

    def _r50_config_result(self, req: _Req, answer: _Answer) -> None:
        """R50: a successful ``set_config_option`` returns the full ``configOptions`` list."""
        if answer.ok and not isinstance(answer.result.get("configOptions"), list):
            self._flag("R50", "set_config_option must return the configOptions array", answer.message)

    # prompts ---------------------------------------------------------------------------

    def _answered_prompt(self, req: _Req, answer: _Answer) -> None:
        if answer.ok:
            mid = self._r52_message_id(req, answer)
            if mid is not None:
                self._prompts.append((req, mid))
                s = self._sessions.get(req.session_id or "")
                if s is not None:
                    s.prompt_ids.add(mid)
        else:
            self._failed_prompts.append(req)
            self._r55_baseline_blocks(req, answer)

    def _r52_message_id(self, req: _Req, answer: _Answer) -> str | None:
        """R52: the prompt answer carries the inserted message's ``messageId``."""
        mid = answer.result.get("messageId")
        if not isinstance(mid, str) or not mid:
            self._flag("R52", "session/prompt must be answered with a messageId", req.message, answer.message)
            return None
        return mid

    def _r55_baseline_blocks(self, req: _Req, answer: _Answer) -> None:
        """R55: ``text`` and ``resource_link`` blocks are always accepted."""
        prompt = req.params.get("prompt")
        if answer.code != -32602 or not isinstance(prompt, list) or not prompt:
            return
        target = self._sessions.get(req.session_id or "")
        if target is not None and target.parent is not None:
            return  # a child session refuses client prompts (§11.15)
        for block in prompt:
            b = _obj(block)
            text_ok = b.get("type") == "text" and isinstance(b.get("text"), str)
            link_ok = b.get("type") == "resource_link" and isinstance(b.get("name"), str) and isinstance(
                b.get("uri"), str)
            if not (text_ok or link_ok):
                return
        self._flag("R55", "a prompt of text/resource_link blocks was rejected with -32602", req.message,
                   answer.message)

    def _r53_echoes(self) -> None:
        """R53: every accepted prompt's ``messageId`` is echoed as a user message in its session."""
        for req, mid in self._prompts:
            s = self._sessions.get(req.session_id or "")
            if s is None or s.user_echo_at.get(mid, -1) < req.index:
                self._flag("R53", f"prompt accepted as {mid!r} but never echoed as user_message", req.message)

    def _r54_rejected_echoes(self) -> None:
        """R54: a prompt answered with an error produced no user message."""
        for req in self._failed_prompts:
            s = self._sessions.get(req.session_id or "")
            if s is None:
                continue
            content = req.params.get("prompt")
            for at, mid, echoed, in_resume in s.user_messages:
                if at > req.index and not in_resume and mid not in s.prompt_ids and echoed == content:
                    self._flag("R54", f"an errored prompt was echoed as user message {mid!r}", req.message)
                    break

    def _r57_prompt_work(self) -> None:
        """R57: an accepted prompt on an idle session starts foreground work (running/requires_action)."""
        for req, mid in self._prompts:
            s = self._sessions.get(req.session_id or "")
            if s is None or req.extra.get("state") != "idle":
                continue
            if s.last_active_at < req.index and s.closed_at < req.index:
                self._flag("R57", f"prompt {mid!r} accepted but no running/requires_action followed", req.message)

    # per-item cancels ------------------------------------------------------------------

    def _answered_tool_call_cancel(self, req: _Req, answer: _Answer) -> None:
        s = self._sessions.get(req.session_id or "")
        tid = str(req.params.get("toolCallId"))
        if not answer.ok or s is None:
            return
        if self._r102_accept(req, answer):
            self._accepted_cancels.append((req, "tool_call", s.id, tid))
        s.item_cancel_since_work = True
        if tid in s.tool_calls:
            s.tool_calls[tid].cancel_requested = True

    def _r102_accept(self, req: _Req, answer: _Answer) -> bool:
        """R102: ``tool_call/cancel`` is not accepted for unknown, final or non-cancellable tool calls."""
        item = req.extra.get("item")
        if item is None or item[0] or not item[1]:
            self._flag("R102", "tool_call/cancel accepted for an unknown, final or non-cancellable tool call",
                       req.message, answer.message)
            return False
        return True

    def _answered_terminal_cancel(self, req: _Req, answer: _Answer) -> None:
        s = self._sessions.get(req.session_id or "")
        tid = str(req.params.get("terminalId"))
        if s is not None and not answer.ok and tid in s.terminals:
            s.terminals[tid].cancelled = False  # rejected: nothing was cancelled
        if not answer.ok or s is None:
            return
        if self._r104_accept(req, answer):
            self._accepted_cancels.append((req, "terminal", s.id, tid))
        s.item_cancel_since_work = True
        if tid in s.terminals:
            s.terminals[tid].cancelled = True

    def _r104_accept(self, req: _Req, answer: _Answer) -> bool:
        """R104: ``terminal/cancel`` is not accepted for unknown, exited or non-cancellable terminals."""
        item = req.extra.get("item")
        if item is None or item[0] or not item[1]:
            self._flag("R104", "terminal/cancel accepted for an unknown, exited or non-cancellable terminal",
                       req.message, answer.message)
            return False
        return True

    def _r101_r103_confirmations(self) -> None:
        """R101 / R103: an accepted per-item cancel is confirmed by a final status / ``exitStatus``."""
        for req, kind, sid, item in self._accepted_cancels:
            s = self._sessions[sid]
            if s.closed_at > req.index:
                continue
            if kind == "tool_call":
                tc = s.tool_calls.get(item)
                if tc is None or tc.final_at is None or tc.final_at < req.index:
                    self._flag("R101", f"tool_call/cancel accepted but {item!r} never got a final status",
                               req.message)
            else:
                term = s.terminals.get(item)
                if term is None or term.exited_at is None or term.exited_at < req.index:
                    self._flag("R103", f"terminal/cancel accepted but {item!r} never reported exitStatus",
                               req.message)

    # -- session/update ------------------------------------------------------------------

    def _on_update(self, message: dict[str, Any]) -> None:
        params = _obj(message.get("params"))
        update = params.get("update")
        sid = params.get("sessionId")
        if not isinstance(update, dict):
            return
        candidate = self._sessions[sid].r95 if isinstance(sid, str) and sid in self._sessions else None
        s = self._session_touch(sid, message)
        if s is None:
            return
        kind = update.get("sessionUpdate")
        if kind not in _UPDATES and not _custom(kind):
            self._flag("R84", f"unknown sessionUpdate {kind!r} without the _ prefix", message)
        self._r95_quiet_then_running(candidate, update, message)
        window = s.resume
        if window is not None and kind in _REPLAY_SHAPED:
            window.last_replay = self._n
            if kind in _USER_MESSAGES:
                self._r35_unrequested_replay(s, window, message)
        if kind in _MESSAGE_KINDS:
            self._message_update(s, kind, update, message)
        elif kind == "state_update":
            self._state_update(s, update, message)
        elif kind == "tool_call_update":
            self._tool_patch(s, update, message)
        elif kind == "tool_call_content_chunk":
            self._tool_chunk(s, update, message)
        elif kind in ("terminal_update", "terminal_output_chunk"):
            self._terminal_update(s, kind, update, message)
        elif kind == "subagent_update":
            self._subagent_update(s, update, message)
        elif kind == "available_commands_update":
            self._r51_complete(update, "availableCommands", message)
        elif kind == "config_option_update":
            self._r51_complete(update, "configOptions", message)

    def _r51_complete(self, update: dict[str, Any], name: str, message: Any) -> None:
        """R51: list updates carry the complete array."""
        value = update.get(name)
        if not isinstance(value, list):
            self._flag("R51", f"{update.get('sessionUpdate')} must carry the complete {name} array", message)
        elif name == "availableCommands":
            self._r77_commands(value, message)

    def _r77_commands(self, commands: list[Any], message: Any) -> None:
        """R77: ``{"type": "command"}`` entries with unique names, no leading ``/``, no whitespace."""
        names: set[str] = set()
        for command in commands:
            c = _obj(command)
            if _custom(c.get("type")):
                continue
            name = c.get("name")
            if (
                c.get("type") != "command" or not isinstance(name, str) or not name or name.startswith("/")
                or any(ch.isspace() for ch in name) or name in names
            ):
                self._flag("R77", f"bad or duplicate command {_quote(command)}", message)
                return
            names.add(name)

    def _r95_quiet_then_running(self, candidate: Any, update: dict[str, Any], message: Any) -> None:
        """R95: a removal snapshot ``idle`` + ``[]`` is not followed at once by ``running``."""
        if candidate is not None and update.get("sessionUpdate") == "state_update" and update.get(
                "state") == "running":
            self._flag("R95", "idle + [] removal immediately followed by running (say running in the removal)",
                       candidate, message)

    def _message_update(self, s: _Session, kind: str, update: dict[str, Any], message: Any) -> None:
        mid = self._r73_message_id(update.get("messageId"), message)
        if mid is None:
            return
        for field_ in ("senderSessionId", "recipientSessionId"):
            self._note_early(update.get(field_), message)
        in_resume = s.resume is not None
        if kind.startswith("user_message"):
            s.user_echo_at[mid] = self._n
            if any(m == mid and req.session_id == s.id and req.index < s.last_cancel_at for req, m in self._prompts):
                # Sent before a session/cancel, inserted after it: the cancel may end this prompt's turn.
                s.cancelled_prompt_echoed = True
            if kind == "user_message":
                s.user_messages.append((self._n, mid, update.get("content"), in_resume))
        elif kind in _AGENT_OUTPUT and not in_resume:
            self._r68_after_cancel_message(s, mid, message)
            self._r60_output_while_blocked(s, message)
            if s.state not in (None, "idle"):
                s.work_message_ids.add(mid)

    def _r73_message_id(self, mid: Any, message: Any) -> str | None:
        """R73: every message update / chunk carries a ``messageId``."""
        if not isinstance(mid, str) or not mid:
            self._flag("R73", "message update without a messageId", message)
            return None
        return mid

    def _r68_after_cancel_message(self, s: _Session, mid: str, message: Any) -> None:
        """R68: a message of the cancelled work continues after the idle that ended it."""
        if mid in s.cancelled_message_ids:
            self._flag("R68", f"message {mid!r} of cancelled work continues after its idle", message)

    def _r60_output_while_blocked(self, s: _Session, message: Any) -> None:
        """R60: work that continues after ``requires_action`` reports ``running`` first."""
        if s.state == "requires_action":
            self._flag("R60", "agent output while requires_action (report running once work continues)", message)

    # state_update ----------------------------------------------------------------------

    def _state_update(self, s: _Session, update: dict[str, Any], message: Any) -> None:
        state = update.get("state")
        self._r63_state_value(state, message)
        keys = self._background(s, update, message, state)
        prev = s.state
        if isinstance(state, str) and state != "requires_action" and s.blocked is not None:
            self._r59_r61_blocked_ends(s, message)
        if state == "idle":
            self._idle(s, update, message, prev)
        elif isinstance(state, str):
            if prev in (None, "idle"):
                s.work_message_ids = set()
                s.session_cancel_since_work = s.item_cancel_since_work = False
                s.permission_answered_since_work = False
                s.early_cancel = s.cancel_for_next or s.cancelled_prompt_echoed
                s.cancel_for_next = s.cancelled_prompt_echoed = False
            s.last_active_at = self._n
            if state == "requires_action" and prev != "requires_action":
                s.requires_action_at = self._n
                s.blocked = self._blocked_starts(s, message)
        if isinstance(state, str):
            s.state = state
        s.state_at = self._n
        s.cancel_for_next = False  # only the very next snapshot can show work the cancel reached
        if s.cancel is not None and not s.cancel.was_active:
            s.cancel = None
        s.own_state = _snapshot(update)
        if s.parent is not None:
            s.child_state = s.own_state
            s.child_state_at = self._n
        if s.resume is not None:
            s.resume.snapshots.append((self._n, message, keys))

    def _lineage(self, sid: str) -> list[str]:
        """``sid`` and the sessions it is a child of, innermost first."""
        out = [sid]
        while (s := self._sessions.get(out[-1])) is not None and s.parent is not None and s.parent not in out:
            out.append(s.parent)
        return out

    def _blocked_starts(self, s: _Session, message: Any) -> _Blocked:
        """A ``requires_action`` stretch starts: note the questions already in play (R59, R61).

        A question answered since the session's previous snapshot counts too: the agent may have
        reported ``requires_action`` before it read that answer (wire order is the client's).
        """
        pending = [r for r in self._agent_pending.values() if not r.withdrawn]
        mine = [r for r in pending if r.session_id is not None and s.id in self._lineage(r.session_id)]
        asked = s.request_answered_at > s.state_at or any(not _for_background(r) for r in mine)
        return _Blocked(message, asked, s.resume is not None, [r.message for r in mine if _for_background(r)],
                        [r.message for r in pending if _request_scoped(r)])

    def _r59_r61_blocked_ends(self, s: _Session, message: Any) -> None:
        """R59 / R61: a ``requires_action`` stretch had a question of the session waiting on the user."""
        blocked, s.blocked = s.blocked, None
        if blocked is None or blocked.asked or blocked.exempt:
            return
        ending = () if message is None else (message,)
        if blocked.background:
            self._flag("R61", "requires_action while only questions for listed background work waited",
                       *blocked.background, blocked.message, *ending)
        elif blocked.request_scoped:
            self._flag("R61", "requires_action while only a request-scoped elicitation waited on the user",
                       *blocked.request_scoped, blocked.message, *ending)
        else:
            self._flag("R59", "requires_action while no question of the session waited on the user",
                       blocked.message, *ending)

    def _r63_state_value(self, state: Any, message: Any) -> None:
        """R63: standard states (or ``_custom``)."""
        if not isinstance(state, str) or (state not in _STATES and not _custom(state)):
            self._flag("R63", f"unknown state {state!r}", message)

    def _idle(self, s: _Session, update: dict[str, Any], message: Any, prev: str | None) -> None:
        reason = update.get("stopReason")
        self._r84_stop_reason(reason, message)
        if s.resume is not None or prev == "idle":
            self._r62_repeated_idle(s, update, message, prev)
        elif prev is not None:
            self._r58_stop_reason(update, message)
            if isinstance(reason, str):
                s.last_stop_reason = reason
            if s.cancel is not None and s.cancel.was_active:
                self._cancelled_work_ends(s, reason, message)
            self._r105_foreground_kept(s, reason, message)
        s.cancel = None
        s.early_cancel = False

    def _r84_stop_reason(self, reason: Any, message: Any) -> None:
        """R84: stop reasons are standard or ``_custom``."""
        if reason is not None and (not isinstance(reason, str) or (reason not in _STOP_REASONS and not _custom(
                reason))):
            self._flag("R84", f"unknown stopReason {reason!r} without the _ prefix", message)

    def _r62_repeated_idle(self, s: _Session, update: dict[str, Any], message: Any, prev: str | None) -> None:
        """R62: a repeated / resume idle presents no new completion and no usage."""
        if update.get("usage") is not None:
            self._flag("R62", "usage on a repeated or resume idle", message)
        reason = update.get("stopReason")
        if prev == "idle" and reason is not None and reason != s.last_stop_reason:
            self._flag("R62", f"repeated idle presents a new stop reason {reason!r}", message)

    def _r58_stop_reason(self, update: dict[str, Any], message: Any) -> None:
        """R58: the idle that ends work carries a stop reason (and ``error`` for ``"error"``)."""
        reason = update.get("stopReason")
        if reason is None:
            self._flag("R58", "the idle that ends work has no stopReason", message)
        elif reason == "error" and not isinstance(update.get("error"), dict):
            self._flag("R58", "stopReason error without an error object", message)

    def _cancelled_work_ends(self, s: _Session, reason: Any, message: Any) -> None:
        cancel = s.cancel
        assert cancel is not None
        self._r69_not_error(cancel, reason, message)
        self._r67_r70_withdrawn(s, cancel, message)
        s.cancelled_message_ids |= cancel.message_ids
        covered = self._covered(s, [k for k in s.ever_listed if k[0] == "terminal"])
        s.cancelled_tool_calls |= {
            tid for tid, tc in s.tool_calls.items()
            if tc.announced_at < cancel.index and tc.status not in _FINAL and not tc.cancel_requested
            and ("tool_call", tid) not in s.ever_listed and ("tool_call", tid) not in covered
        }

    def _r69_not_error(self, cancel: _Cancel, reason: Any, message: Any) -> None:
        """R69: cancelled work ends ``cancelled``, never ``error``."""
        if reason == "error":
            self._flag("R69", "work cancelled by session/cancel ended with stopReason error", cancel.message,
                       message)

    def _r67_r70_withdrawn(self, s: _Session, cancel: _Cancel, message: Any) -> None:
        """R67 / R70: the cancelled work's pending requests were withdrawn with ``$/cancel_request``."""
        for req in self._pending_of(s):
            if req.index < cancel.index and not (req.refs & cancel.listed):
                rule = "R70" if req.method == "elicitation/create" else "R67"
                self._flag(rule, "request of cancelled work still pending (not withdrawn) at its idle",
                           req.message, message)

    def _r105_foreground_kept(self, s: _Session, reason: Any, message: Any) -> None:
        """R105: per-item cancels alone do not end the foreground work as ``cancelled``."""
        if (reason == "cancelled" and s.item_cancel_since_work and not s.session_cancel_since_work
                and not s.permission_answered_since_work and not self._closing(s) and not s.early_cancel):
            self._flag("R105", "foreground ended cancelled after a per-item cancel only", message)

    def _closing(self, s: _Session) -> bool:
        """Whether a ``session/close`` of ``s`` is in flight (it cancels the work, R42), or the
        client's input ended (the end of the connection cancels every session's work)."""
        if self._client_ended:
            return True
        return any(r.method == "session/close" and r.session_id == s.id for r in self._client_pending.values())

    def _pending_of(self, s: _Session) -> list[_Req]:
        return [r for r in self._agent_pending.values()
                if r.session_id == s.id and not r.withdrawn
                and r.method in ("session/request_permission", "elicitation/create")]

    # background list -------------------------------------------------------------------

    def _background(self, s: _Session, update: dict[str, Any], message: Any, state: Any) -> list[ItemKey] | None:
        value = update.get("background")
        if value is None:
            self._r91_keeps_reporting(s, message)
            return None
        if not isinstance(value, list):
            self._flag("R87", "background must be an array", message)
            return None
        s.reporting = True
        keys = self._list_items(s, value, message)
        in_resume = s.resume is not None
        for key in keys:
            self._check_listed(s, key, message, in_resume)
        self._r88_once(s, keys, message)
        self._removals(s, keys, message)
        self._new_listings(s, keys, message, state)
        if state == "idle" and not value and s.last_list:
            s.r95 = message
        s.last_list = keys
        s.list_at = self._n
        s.ever_listed.update(keys)
        return keys

    def _r91_keeps_reporting(self, s: _Session, message: Any) -> None:
        """R91: once a list was reported, every ``state_update`` carries ``background``."""
        if s.reporting:
            self._flag("R91", "state_update without background after a list was reported", message)

    def _list_items(self, s: _Session, items: list[Any], message: Any) -> list[ItemKey]:
        """R87 / R84: well-formed, unique items; unknown types start with ``_``."""
        keys: list[ItemKey] = []
        for item in items:
            kind = _obj(item).get("type")
            if not isinstance(kind, str):
                self._flag("R87", f"malformed background item {_quote(item)}", message)
                continue
            if kind not in _ITEM_ID_FIELD:
                if not _custom(kind):
                    self._flag("R84", f"unknown background item type {kind!r} without the _ prefix", message)
                continue
            ident = _obj(item).get(_ITEM_ID_FIELD[kind])
            if not isinstance(ident, str):
                self._flag("R87", f"{kind} item without {_ITEM_ID_FIELD[kind]}", message)
                continue
            if (kind, ident) in keys:
                self._flag("R87", f"{kind} {ident!r} listed twice", message)
                continue
            keys.append((kind, ident))
        return keys

    def _check_listed(self, s: _Session, key: ItemKey, message: Any, in_resume: bool) -> None:
        if key in s.fork_items:
            self._r112_fork(key, message)
            return
        kind, ident = key
        if kind == "subagent":
            self._r87_r90_child(s, ident, message, in_resume)
        elif not self._has_entity(s, key):
            self._r87_r93_unknown(s, key, message, in_resume)
        elif not self._live(s, key):
            self._flag("R87", f"{kind} {ident!r} is listed although it ended (final status / exitStatus)", message)

    def _r112_fork(self, key: ItemKey, message: Any) -> None:
        """R112: a fork never lists work copied from its source."""
        self._flag("R112", f"fork lists {key} from its source session", message)

    def _r87_r93_unknown(self, s: _Session, key: ItemKey, message: Any, in_resume: bool) -> None:
        """R87 / R93: items name entities this session announced before (other sessions': R87)."""
        kind, ident = key
        elsewhere = any(self._has_entity(o, key) for o in self._sessions.values() if o is not s)
        if elsewhere:
            self._flag("R87", f"{kind} {ident!r} belongs to another session", message)
        elif not in_resume:  # judged by R113 at the resume answer
            self._flag("R93", f"{kind} {ident!r} is listed before its entity update", message)

    def _r87_r90_child(self, s: _Session, ident: str, message: Any, in_resume: bool) -> None:
        """R79 / R87 / R90: listed children are announced children of this session, not quiet."""
        child = self._sessions.get(ident)
        if child is None or child.parent is None:
            if not in_resume:
                self._flag("R79", f"child {ident!r} is listed before its announcing subagent_update", message)
        elif child.parent != s.id:
            self._flag("R87", f"child {ident!r} belongs to session {child.parent!r}", message)
        elif _quiet(child.child_state):
            self._flag("R90", f"child {ident!r} is idle with an empty list but still listed", message)

    def _r88_once(self, s: _Session, keys: list[ItemKey], message: Any) -> None:
        """R88: a tool call whose content is only listed terminals is not listed besides them."""
        terminals = {ident for kind, ident in keys if kind == "terminal"}
        for kind, ident in keys:
            tc = s.tool_calls.get(ident) if kind == "tool_call" else None
            if tc is None or not tc.content:
                continue
            if all(_obj(c).get("type") == "terminal" for c in tc.content) and tc.terminals() <= terminals:
                self._flag("R88", f"tool call {ident!r} is listed besides the terminal(s) it only shows", message)

    def _removals(self, s: _Session, keys: list[ItemKey], message: Any) -> None:
        """R89 / R90 / R94: items leave the list only after they were reported ended."""
        if s.last_list is None:
            return
        now = set(keys)
        covered = self._covered(s, [k for k in keys if k[0] == "terminal"])
        for key in s.last_list:
            if key in now:
                continue
            kind, ident = key
            if kind == "subagent":
                child = self._sessions.get(ident)
                if child is not None and not _quiet(child.child_state):
                    self._flag("R90", f"child {ident!r} dropped before it reported idle with an empty list",
                               message)
            elif kind == "terminal":
                term = s.terminals.get(ident)
                if term is not None and not term.exited:
                    self._flag("R94", f"terminal {ident!r} dropped from the list without exitStatus", message)
            else:
                tc = s.tool_calls.get(ident)
                if tc is None or tc.status in _FINAL or key in covered:
                    continue
                rule = "R89" if tc.status in ("pending", "paused") else "R94"
                self._flag(rule, f"tool call {ident!r} ({tc.status}) dropped from the list without a final status",
                           message)

    def _new_listings(self, s: _Session, keys: list[ItemKey], message: Any, state: Any) -> None:
        """R85 / R110: pending questions (R110: permission requests) whose subject only now gets listed."""
        new = set(keys) - set(s.last_list or [])
        if not new:
            return
        for req in self._pending_of(s):
            hit = req.refs & new
            if not hit or hit & req.listed_at_send:
                continue
            if state == "requires_action":
                what = "permission" if req.method == "session/request_permission" else "elicitation"
                self._flag("R85", f"{sorted(hit)} listed while the foreground waits on its {what}",
                           req.message, message)
            elif req.method == "session/request_permission":
                self._flag("R110", f"permission request for {sorted(hit)} sent before a snapshot listed it",
                           req.message, message)

    @staticmethod
    def _has_entity(s: _Session, key: ItemKey) -> bool:
        kind, ident = key
        return ident in s.tool_calls if kind == "tool_call" else ident in s.terminals

    def _covered(self, s: _Session, keys: Iterable[ItemKey]) -> set[ItemKey]:
        """The listed keys plus the tool calls that reference a listed terminal."""
        out = set(keys)
        terminals = {ident for kind, ident in out if kind == "terminal"}
        if terminals:
            out |= {("tool_call", tid) for tid, tc in s.tool_calls.items() if tc.terminals() & terminals}
        return out

    # tool calls ------------------------------------------------------------------------

    def _tool_patch(self, s: _Session, patch: dict[str, Any], message: Any, from_subject: bool = False) -> None:
        tid = patch.get("toolCallId")
        if not isinstance(tid, str):
            return
        tc = s.tool_calls.get(tid)
        if tc is None:
            tc = s.tool_calls[tid] = _ToolCall(self._n)
            if not from_subject and not self._replaying(s):
                self._r74_title(patch, message)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("tool_call", tid), self._n)
        if patch.get("kind") is not None and patch["kind"] not in _KINDS and not _custom(patch["kind"]):
            self._flag("R84", f"unknown tool kind {patch['kind']!r} without the _ prefix", message)
        if "status" in patch:
            self._tool_status(s, tid, tc, patch["status"], message)
        if "capabilities" in patch:
            tc.cancel = isinstance(_obj(patch["capabilities"]).get("cancel"), dict)
        if "content" in patch:
            tc.content = list(patch["content"]) if isinstance(patch["content"], list) else []
            self._r34_content_paths(patch["content"], message)
        locations = patch.get("locations")
        for location in locations if isinstance(locations, list) else []:
            self._r34_path(_obj(location).get("path"), message, "location path")

    def _r74_title(self, patch: dict[str, Any], message: Any) -> None:
        """R74: the first ``tool_call_update`` of a tool call has a ``title``."""
        if not isinstance(patch.get("title"), str):
            self._flag("R74", "the first tool_call_update has no title", message)

    @staticmethod
    def _replaying(s: _Session) -> bool:
        """A replay is in progress: history is re-sent, so transitions are not judged (last write wins)."""
        return s.resume is not None and s.resume.replay

    def _tool_status(self, s: _Session, tid: str, tc: _ToolCall, status: Any, message: Any) -> None:
        if status is not None and not isinstance(status, str):
            return
        if status is not None and status not in _STATUSES and not _custom(status):
            self._flag("R84", f"unknown tool call status {status!r} without the _ prefix", message)
        if self._replaying(s):
            tc.status = status or "pending"
            tc.started = tc.started or tc.status != "pending"
            if tc.status in _FINAL and tc.final_at is None:
                tc.final_at = self._n
            return
        if status is None:
            self._r71_null_status(tc, message)
            status = "pending"
        else:
            self._r97_transition(tc, status, message)
        if status != tc.status:
            self._r20_denied_started(tc, status, message)
            if status == "cancelled" and s.resume is None:
                self._r68_after_cancel_tool(s, tid, message)
                self._r106_listed_kept(s, tid, tc, message)
                self._r105_tool_kept(s, tc, message)
        tc.status = status
        if status != "pending":
            tc.started = True
        if status in _FINAL and tc.final_at is None:
            tc.final_at = self._n

    def _r71_null_status(self, tc: _ToolCall, message: Any) -> None:
        """R71: ``status: null`` (reset to pending) is never sent once a tool call started."""
        if tc.started:
            self._flag("R71", "status: null resets a started tool call to pending", message)

    def _r97_transition(self, tc: _ToolCall, status: str, message: Any) -> None:
        """R97: no way back to ``pending``, no change after a final status."""
        if status == tc.status:
            return
        if tc.status in _FINAL:
            self._flag("R97", f"status changed from final {tc.status!r} to {status!r}", message)
        elif status == "pending" and tc.started:
            self._flag("R97", f"status went back from {tc.status!r} to pending", message)

    def _r20_denied_started(self, tc: _ToolCall, status: str, message: Any) -> None:
        """R20: a tool call whose permission was refused does not start."""
        if tc.denied and tc.status == "pending" and status == "in_progress":
            self._flag("R20", "tool call started although its permission was not granted", message)

    def _r68_after_cancel_tool(self, s: _Session, tid: str, message: Any) -> None:
        """R68: final statuses of the cancelled work precede its idle."""
        if tid in s.cancelled_tool_calls:
            self._flag("R68", f"tool call {tid!r} of cancelled work reported cancelled after its idle", message)

    def _r106_listed_kept(self, s: _Session, tid: str, tc: _ToolCall, message: Any) -> None:
        """R106: ``session/cancel`` leaves listed tool calls running."""
        if s.cancel is not None and ("tool_call", tid) in s.cancel.listed and not tc.cancel_requested:
            self._flag("R106", f"listed tool call {tid!r} cancelled by session/cancel", s.cancel.message, message)

    def _r105_tool_kept(self, s: _Session, tc: _ToolCall, message: Any) -> None:
        """R105: ``terminal/cancel`` does not change the status of a referencing tool call."""
        cancelled = {t for t in tc.terminals() if t in s.terminals and s.terminals[t].cancelled}
        if (cancelled and not tc.cancel_requested and s.cancel is None and not s.early_cancel
                and not self._closing(s)):
            self._flag("R105", f"tool call cancelled because terminal(s) {sorted(cancelled)} were cancelled",
                       message)

    def _tool_chunk(self, s: _Session, update: dict[str, Any], message: Any) -> None:
        tid = update.get("toolCallId")
        if not isinstance(tid, str):
            return
        tc = s.tool_calls.get(tid)
        if tc is None:
            tc = s.tool_calls[tid] = _ToolCall(self._n)
        tc.content.append(update.get("content"))
        self._r34_content_paths([update.get("content")], message)

    def _r34_content_paths(self, content: Any, message: Any) -> None:
        """R34: diff paths in tool call content are absolute."""
        for item in content if isinstance(content, list) else []:
            if _obj(item).get("type") != "diff":
                continue
            changes = _obj(item).get("changes")
            for change in changes if isinstance(changes, list) else []:
                for name in ("path", "oldPath"):
                    if name in _obj(change):
                        self._r34_path(_obj(change)[name], message, f"diff {name}")

    def _r34_path(self, path: Any, message: Any, what: str) -> None:
        """R34: paths are absolute."""
        if path is not None and not _is_abs(path):
            self._flag("R34", f"{what} {path!r} is not absolute", message)

    # terminals -------------------------------------------------------------------------

    def _terminal_update(self, s: _Session, kind: str, update: dict[str, Any], message: Any) -> None:
        tid = update.get("terminalId")
        if not isinstance(tid, str):
            return
        term = s.terminals.get(tid)
        if kind == "terminal_output_chunk":
            self._r75_base64(update.get("data"), message)
            if term is not None:
                self._s1_after_exit(s, tid, term, update, message)
            return
        if term is None:
            term = s.terminals[tid] = _Terminal(self._n)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("terminal", tid), self._n)
        self._s1_after_exit(s, tid, term, update, message)
        if "exitStatus" in update:
            if isinstance(update["exitStatus"], dict):
                if not term.exited:
                    term.exited_at = self._n
                term.exited = True
            elif update["exitStatus"] is None:
                term.exited = False
        if "capabilities" in update:
            term.cancel = isinstance(_obj(update["capabilities"]).get("cancel"), dict)
        if update.get("cwd") is not None:
            self._r34_path(update["cwd"], message, "terminal cwd")
        if "output" in update:
            output = update["output"]
            self._r105_output_kept(term, output, message)
            if isinstance(output, dict):
                self._r75_base64(output.get("data"), message)

    def _s1_after_exit(self, s: _Session, tid: str, term: _Terminal, update: dict[str, Any], message: Any) -> None:
        """S1: once exited, a terminal reports no second exit, no output and no other change.

        ``capabilities`` (clearing ``cancel``, R100) and ``_meta`` may follow. A resume window
        re-sends history (replay) and current state (re-announcement), so it is not judged.
        """
        if not term.exited or s.resume is not None:
            return
        if update.get("sessionUpdate") == "terminal_output_chunk":
            what = "got an output chunk after its exit"
        elif "exitStatus" in update:
            what = ("reported exitStatus a second time" if update["exitStatus"] is not None
                    else "was un-exited (exitStatus: null) after its exit")
        else:
            changed = sorted(set(update) - {"sessionUpdate", "terminalId", "capabilities", "_meta"})
            if not changed:
                return
            what = f"changed {', '.join(changed)} after its exit"
        self._flag("S1", f"terminal {tid!r} {what}", message)

    def _r75_base64(self, data: Any, message: Any) -> None:
        """R75: terminal bytes are base64-encoded (each chunk on its own)."""
        if not _is_base64(data):
            self._flag("R75", "terminal data is not valid base64", message)

    def _r105_output_kept(self, term: _Terminal, output: Any, message: Any) -> None:
        """R105: ``terminal/cancel`` keeps the terminal's retained output."""
        if term.cancelled and (output is None or _obj(output).get("data") == ""):
            self._flag("R105", "terminal output cleared after terminal/cancel", message)

    # children --------------------------------------------------------------------------

    def _subagent_update(self, s: _Session, update: dict[str, Any], message: Any) -> None:
        cid = update.get("sessionId")
        if not isinstance(cid, str):
            return
        child = self._session(cid)
        if child.parent is None:
            child.parent = s.id
            s.children.add(cid)
            self._known.add(cid)
            self._r79_announced_first(cid, message)
        elif child.parent != s.id:
            self._flag("R79", f"child {cid!r} of {child.parent!r} announced again by {s.id!r}", message)
        if s.resume is not None:
            s.resume.entity_at.setdefault(("subagent", cid), self._n)
        if "state" in update:
            state = update["state"]
            child.mirrored = _snapshot(state) if isinstance(state, dict) else None
            child.child_state = child.mirrored
            child.child_state_at = self._n
        if update.get("cwd") is not None:
            self._r34_path(update["cwd"], message, "child cwd")
        directories = update.get("additionalDirectories")
        for directory in directories if isinstance(directories, list) else []:
            self._r34_path(directory, message, "child directory")

    def _r79_announced_first(self, cid: str, message: Any) -> None:
        """R79: the announcing ``subagent_update`` precedes every message naming the child."""
        early = self._early.pop(cid, None)
        if early is not None:
            self._flag("R79", f"child {cid!r} was named before its announcing subagent_update", early.message,
                       message)

    # -- end-of-connection checks -------------------------------------------------------

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

    def _r60_stuck(self, s: _Session) -> None:
        """R60: not left in ``requires_action`` after the user answered."""
        if (s.state == "requires_action" and not s.closed and not self._pending_of(s)
                and s.request_answered_at > s.requires_action_at):
            self._flag("R60", f"session {s.id!r} left in requires_action after its requests were answered")

    def _r68_no_idle(self, s: _Session) -> None:
        """R68: ``session/cancel`` of active work ends with an idle."""
        if s.cancel is not None and s.cancel.was_active and not s.closed:
            self._flag("R68", f"no idle after session/cancel of active work in {s.id!r}", s.cancel.message)

    def _r92_stale_list(self, s: _Session) -> None:
        """R92: a list naming finalized items is re-sent."""
        if s.closed or not s.last_list:
            return
        ended = [k for k in s.last_list if self._ended(s, k, after=s.list_at)]
        if ended:
            self._flag("R92", f"{s.id!r}: {ended} ended but no snapshot re-sent the list")

    def _r100_cancel_after_end(self, s: _Session) -> None:
        """R100: ``cancel`` is no longer advertised on ended items."""
        for tid, tc in s.tool_calls.items():
            if tc.cancel and tc.status in _FINAL:
                self._flag("R100", f"{s.id!r}: final tool call {tid!r} still advertises cancel")
        for tid, term in s.terminals.items():
            if term.cancel and term.exited:
                self._flag("R100", f"{s.id!r}: exited terminal {tid!r} still advertises cancel")

    def _s2_never_created(self) -> None:
        """S2: every session the agent sent something for came to exist on the connection."""
        for sid, early in self._early.items():
            if not early.own:
                continue
            if sid in self._known:  # the client referred to it later (a resume, a prompt, ...)
                self._flag("S2", f"session {sid!r} was named before the client referred to it", early.message)
            else:
                self._flag("S2", f"session {sid!r} was named but never became a session on this connection "
                                 "(a failed session/new or fork?)", early.message)

    def _r80_mirror(self, s: _Session) -> None:
        """R80: the parent's ``subagent_update.state`` mirrors the child's own snapshot."""
        if s.parent is None or s.own_state is None or self._session(s.parent).closed:
            return
        if s.closed and s.child_state_at > s.closed_at:
            return  # a closed child reports nothing itself: its parent's replay reports how it ended
        if s.mirrored != s.own_state:
            self._flag("R80", f"parent's mirror of child {s.id!r} is {s.mirrored!r}, child says {s.own_state!r}")


def check_transcript(entries: Iterable[TranscriptEntry], *, ignore: Collection[str] = (),
                     end_at: int | None = None) -> list[RuleViolation]:
    """Judge a whole recorded transcript and return every violation (``end_at``: see
    :meth:`WireChecker.feed_transcript`)."""
    checker = WireChecker(raise_on_violation=False, ignore=ignore)
    checker.feed_transcript(entries, end_at=end_at)
    checker.finish()
    return checker.violations
