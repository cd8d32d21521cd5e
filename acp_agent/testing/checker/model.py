"""The client-side model of one connection: state only, which the router and every judge read and update.

It holds what a client can know from the messages alone (requests in flight both ways, initialization,
sessions, foreground state, background lists, tool calls, terminals, children, permission requests), the
violations reported so far, and queries over that state. It judges no rule: the judges do.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from .constants import (
    ABSOLUTE,
    FINAL,
)
from .rules import (
    RuleViolation,
)

IdKey = tuple[str, Any]
ItemKey = tuple[str, str]


def obj(value: Any) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def is_id(value: Any) -> bool:
    """Whether the value is a legal JSON-RPC id (a string or an integer, not a boolean)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def id_key(value: Any) -> IdKey:
    """A hashable key for an id that keeps its JSON type apart (``1`` and ``"1"`` differ)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, float):
        return ("float", value)
    return ("other", repr(value))


def id_twin(key: IdKey) -> IdKey | None:
    """The same id value with the other JSON type (``1`` <-> ``"1"``)."""
    kind, value = key
    if kind == "int":
        return ("str", str(value))
    if kind == "str" and re.fullmatch(r"-?\d+", value):
        return ("int", int(value))
    return None


def is_abs(path: Any) -> bool:
    """Whether the value is an absolute path (POSIX, Windows drive or UNC)."""
    return isinstance(path, str) and bool(ABSOLUTE.match(path))


def is_base64(data: Any) -> bool:
    """Whether the value is a string of valid base64."""
    if not isinstance(data, str):
        return False
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def custom(value: Any) -> bool:
    """Whether the value is a custom (``_``-prefixed) name."""
    return isinstance(value, str) and value.startswith("_")


def for_background(req: Req) -> bool:
    """A question asked on behalf of work that was listed when it was asked (R61, R107)."""
    return bool(req.refs & req.listed_at_send)


def is_request_scoped(req: Req) -> bool:
    """An elicitation scoped to a client request (``requestId``), not to a session."""
    return req.method == "elicitation/create" and req.session_id is None and "requestId" in req.params


def state_snapshot(state: dict[str, Any]) -> dict[str, Any]:
    """A ``state_update`` without its discriminator and ``_meta``, as a child mirror compares it."""
    return {k: v for k, v in state.items() if k not in ("sessionUpdate", "_meta")}


def is_quiet(state: dict[str, Any] | None) -> bool:
    """A child state that takes it out of its parent's list: idle with an empty own list (R90)."""
    return state is not None and state.get("state") == "idle" and state.get("background") == []


@dataclass(eq=False)
class Req:
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
class ToolCallModel:
    """What the client knows of one tool call."""

    announced_at: int
    status: str = "pending"
    started: bool = False
    cancel: bool = False
    content: list[Any] = field(default_factory=list)
    final_at: int | None = None
    cancel_requested: bool = False
    denied: bool = False

    def terminals(self) -> set[str]:
        """The terminal ids its content names."""
        return {c["terminalId"] for c in self.content
                if isinstance(c, dict) and c.get("type") == "terminal" and isinstance(c.get("terminalId"), str)}


@dataclass(eq=False)
class TerminalModel:
    """What the client knows of one terminal."""

    announced_at: int
    exited: bool = False
    exited_at: int | None = None
    cancel: bool = False
    cancelled: bool = False  # terminal/cancel accepted


@dataclass(eq=False)
class Cancel:
    """A ``session/cancel`` not yet ended by an idle."""

    index: int
    message: Any
    was_active: bool
    listed: frozenset[ItemKey]
    message_ids: frozenset[str]


@dataclass(eq=False)
class Resume:
    """A ``session/resume`` request awaiting its answer."""

    key: IdKey
    index: int
    replay: bool
    was_active: bool
    entity_at: dict[ItemKey, int] = field(default_factory=dict)
    snapshots: list[tuple[int, Any, list[ItemKey] | None]] = field(default_factory=list)
    last_replay: int = -1
    flagged: bool = False
    # Preview (the preview judge): the session's own replay_complete markers, its last replayed message, the
    # markers of the children announced in the window (child id -> index), rules already reported for the window, and
    # the (rule, text, message) of live updates that came before the marker (reported when it comes: without a
    # marker, P8/P9 say what went wrong).
    markers: list[int] = field(default_factory=list)
    history_at: int = -1
    child_markers: dict[str, int] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    early: list[tuple[str, str, Any]] = field(default_factory=list)  # live updates before the marker, judged at it


@dataclass(eq=False)
class PromptKey:
    """An ``idempotencyKey`` of a session (Preview P3, P4): every attempt answered so far, and the first success."""

    attempts: list[Req] = field(default_factory=list)
    first: Req | None = None  # the first attempt answered with a messageId
    message_id: str | None = None  # the messageId that answer gave
    answered_at: int = -1
    reported: bool = False  # an attempt was answered with another messageId (its second message is reported)


@dataclass(eq=False)
class Blocked:
    """A ``requires_action`` stretch of a session, judged when the next other state is reported (R59, R61)."""

    message: Any
    asked: bool  # a foreground question naming the session (or one of its children) was in play
    exempt: bool  # started by a resume: questions asked on an earlier connection are not visible
    background: list[Any] = field(default_factory=list)  # questions for listed background work in play
    request_scoped: list[Any] = field(default_factory=list)  # request-scoped elicitations in play


@dataclass(eq=False)
class SessionModel:
    """What the client knows of one session: its state, lists, items, children and pending cancels."""

    id: str
    state: str | None = None  # None: unknown
    state_at: int = -1  # index of its latest state_update
    blocked: Blocked | None = None
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
    tool_calls: dict[str, ToolCallModel] = field(default_factory=dict)
    terminals: dict[str, TerminalModel] = field(default_factory=dict)
    fork_items: frozenset[ItemKey] = frozenset()
    work_message_ids: set[str] = field(default_factory=set)
    session_cancel_since_work: bool = False
    item_cancel_since_work: bool = False
    permission_answered_since_work: bool = False
    cancel: Cancel | None = None
    cancelled_message_ids: set[str] = field(default_factory=set)
    cancelled_tool_calls: set[str] = field(default_factory=set)
    resume: Resume | None = None
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
    # Preview (the preview judge): idempotency keys, the messageIds prompt answers returned (-> the key, or None for
    # an unkeyed prompt), and whether the last resume with replayFrom was answered without its replay_complete.
    keys: dict[str, PromptKey] = field(default_factory=dict)
    answered_ids: dict[str, str | None] = field(default_factory=dict)
    marker_owed: bool = False


@dataclass(frozen=True)
class Early:
    """The first agent message naming a session id the client had not learned yet (R79, S2)."""

    index: int
    message: Any
    own: bool  # the message is *for* that session (outer ``sessionId``), not just naming it


@dataclass(frozen=True)
class Answer:
    """An agent answer to a client request, taken apart."""

    message: dict[str, Any]
    ok: bool
    result: dict[str, Any]
    code: int | None
    data: Any


class CheckerModel:
    """What a client can know from the messages alone: requests in flight, initialization, sessions and
    their items; the violations reported so far; and the queries every judge uses to read and update it."""

    def __init__(self, *, raise_on_violation: bool = True, ignore: Collection[str] = ()) -> None:
        self.raise_on_violation = raise_on_violation
        self.ignore = frozenset(ignore)
        self.violations: list[RuleViolation] = []
        self.n = 0
        self.finished = False
        # requests in flight
        self.client_pending: dict[IdKey, Req] = {}
        self.client_answered: set[IdKey] = set()
        self.cancel_after_answer: set[IdKey] = set()
        self.unjudged_ids: set[IdKey] = set()
        self.agent_pending: dict[IdKey, Req] = {}
        self.agent_ids: set[IdKey] = set()
        self.null_expected: list[tuple[str, int, Any, bool]] = []
        self.batches_waiting = 0
        # initialization
        self.initialized = False
        self.init_pending = 0
        self.request_since_init = False
        self.negotiated: int | None = None
        self.agent_caps: dict[str, Any] = {}
        self.client_caps: dict[str, Any] = {}
        self.auth_methods: list[Any] = []
        # sessions
        self.sessions: dict[str, SessionModel] = {}
        self.issued: set[str] = set()
        self.known: set[str] = set()
        self.early: dict[str, Early] = {}
        self.deleted: set[str] = set()
        self.prompts: list[tuple[Req, str]] = []
        self.failed_prompts: list[Req] = []
        self.accepted_cancels: list[tuple[Req, str, str, str]] = []
        self.client_ended = False  # the client closed its sending side (the agent winds down)

    def flag(self, rule: str, text: str, *messages: Any) -> None:
        """Report a broken rule (unless ignored); raise it when the checker raises."""
        if rule in self.ignore:
            return
        violation = RuleViolation(rule, text, messages)
        self.violations.append(violation)
        if self.raise_on_violation:
            raise violation

    def record_outcome(self, req: Req, message: dict[str, Any]) -> None:
        """The client answered a permission request: remember the tool calls it did not grant (judged by R20)."""
        s = self.sessions.get(req.session_id or "")
        if s is None:
            return
        outcome = obj(obj(message.get("result")).get("outcome"))
        options = {o.get("optionId"): o.get("kind") for o in req.params.get("options") or [] if isinstance(o, dict)}
        allowed: bool | None = False
        if not req.withdrawn and "error" not in message and outcome.get("outcome") == "selected":
            kind = options.get(outcome.get("optionId"), "reject")
            allowed = None if custom(kind) else str(kind).startswith("allow_")
        for kind_, tid in req.refs:
            tc = s.tool_calls.get(tid) if kind_ == "tool_call" else None
            if tc is not None and allowed is not None:
                tc.denied = not allowed

    @staticmethod
    def classify(message: Any) -> str:
        """The shape of a JSON-RPC message: ``request``, ``notification``, ``response`` or ``invalid``."""
        if not isinstance(message, dict):
            return "invalid"
        if "method" in message:
            if not isinstance(message["method"], str):
                return "invalid"
            return "request" if "id" in message else "notification"
        if "id" in message and (("result" in message) != ("error" in message)):
            return "response"
        return "invalid"

    def expect_null(self, rule: str, code: int, message: Any, optional: bool = False) -> None:
        """Expect an id-null error answer with ``code`` for invalid client input (judged when answers come)."""
        self.null_expected.append((rule, code, message, optional))

    def note_early(self, sid: Any, message: Any, own: bool = False) -> None:
        """Remember the first message naming a session id the client has not learned yet.

        The client learns an id from its own request naming it (resume, prompt, ...), from the
        answer that creates it (new, fork: S2) or from a child's announcing ``subagent_update``
        (R79); each of those settles the entry. Before ``initialize`` everything is R22's.
        """
        if not isinstance(sid, str) or sid in self.known or not self.initialized:
            return
        early = self.early.get(sid)
        if early is None or (own and not early.own):
            self.early[sid] = Early(self.n, message, own or (early is not None and early.own))

    def session(self, sid: str) -> SessionModel:
        """The model of a session id, created on first use."""
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = SessionModel(sid)
        return s

    def ended(self, s: SessionModel, key: ItemKey, after: int) -> bool:
        """The item was reported ended (final status, exitStatus, quiet child) after message ``after``."""
        kind, item = key
        if kind == "subagent":
            child = self.sessions.get(item)
            return child is not None and is_quiet(child.child_state) and child.child_state_at > after
        if kind == "tool_call":
            tc = s.tool_calls.get(item)
            return tc is not None and tc.status in FINAL and (tc.final_at or -1) > after
        terminal = s.terminals.get(item)
        return terminal is not None and terminal.exited and (terminal.exited_at or -1) > after

    def live(self, s: SessionModel, key: ItemKey) -> bool:
        """Whether a tool call or terminal is known and not yet final or exited (children always count as live)."""
        kind, item = key
        if kind == "tool_call":
            tc = s.tool_calls.get(item)
            return tc is not None and tc.status not in FINAL
        if kind == "terminal":
            term = s.terminals.get(item)
            return term is not None and not term.exited
        return True

    def mark_closed(self, s: SessionModel) -> None:
        """A closed session and, with it, all its children (closing a parent ends them)."""
        s.closed = True
        s.active = False
        s.closed_at = self.n
        s.cancel = None
        s.r95 = None
        s.state = "idle"
        if s.last_list is not None:
            s.last_list = []
        for child_id in s.children:
            child = self.sessions.get(child_id)
            if child is not None and not child.closed:
                self.mark_closed(child)

    def lineage(self, sid: str) -> list[str]:
        """``sid`` and the sessions it is a child of, innermost first."""
        out = [sid]
        while (s := self.sessions.get(out[-1])) is not None and s.parent is not None and s.parent not in out:
            out.append(s.parent)
        return out

    def closing(self, s: SessionModel) -> bool:
        """Whether a ``session/close`` of ``s`` is in flight (it cancels the work, R42), or the
        client's input ended (the end of the connection cancels every session's work)."""
        if self.client_ended:
            return True
        return any(r.method == "session/close" and r.session_id == s.id for r in self.client_pending.values())

    def pending_of(self, s: SessionModel) -> list[Req]:
        """The permission requests and elicitations naming the session that are pending and not withdrawn."""
        return [r for r in self.agent_pending.values()
                if r.session_id == s.id and not r.withdrawn
                and r.method in ("session/request_permission", "elicitation/create")]

    @staticmethod
    def has_entity(s: SessionModel, key: ItemKey) -> bool:
        """Whether the session has announced the tool call or terminal (children are not entities here)."""
        kind, ident = key
        return ident in s.tool_calls if kind == "tool_call" else ident in s.terminals

    def covered(self, s: SessionModel, keys: Iterable[ItemKey]) -> set[ItemKey]:
        """The listed keys plus the tool calls that reference a listed terminal."""
        out = set(keys)
        terminals = {ident for kind, ident in out if kind == "terminal"}
        if terminals:
            out |= {("tool_call", tid) for tid, tc in s.tool_calls.items() if tc.terminals() & terminals}
        return out

    @staticmethod
    def replaying(s: SessionModel) -> bool:
        """A replay is in progress: history is re-sent, so transitions are not judged (last write wins)."""
        return s.resume is not None and s.resume.replay
