"""The sessions judge: initialize and the session lifecycle answers (new, fork, resume, close, list, delete,
config)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .judge import BaseJudge
from .model import (
    Answer,
    CheckerModel,
    Req,
    Resume,
    SessionModel,
    custom,
    obj,
)
from .shared import check_commands, check_config_values, check_path


class SessionsJudge(BaseJudge):
    """Judges initialize and the session lifecycle answers (new, fork, resume, close, list, delete, config)."""

    def __init__(self, model: CheckerModel) -> None:
        super().__init__(model)
        self._answered: dict[str, Callable[[Req, Answer], None]] = {
            "initialize": self._answered_initialize,
            "session/new": self._answered_new,
            "session/fork": self._answered_fork,
            "session/resume": self._answered_resume,
            "session/close": self._answered_close,
            "session/list": self._answered_list,
            "session/delete": self._answered_delete,
            "session/set_config_option": self._answered_set_config_option,
        }

    def on_answer(self, req: Req, answer: Answer) -> None:
        """Judge the answer to ``initialize`` or a session lifecycle request, by its method."""
        judge = self._answered.get(req.method)
        if judge is not None:
            judge(req, answer)

    def at_end(self) -> None:
        """Judge the sessions named that never came to exist (S2)."""
        self._s2_never_created()

    def _answered_initialize(self, req: Req, answer: Answer) -> None:
        """Judge the ``initialize`` answer and take the negotiated version and capabilities."""
        if answer.ok:
            self._r23_version(req, answer)
            self._r25_info(req, answer)
            self._r29_terminal_auth(req, answer)
            version = answer.result.get("protocolVersion")
            self._m.initialized = True
            self._m.request_since_init = False
            self._m.negotiated = version if isinstance(version, int) else self._m.negotiated
            self._m.agent_caps = obj(answer.result.get("capabilities"))
            methods = answer.result.get("authMethods")
            self._m.auth_methods = methods if isinstance(methods, list) else []
            self._m.client_caps = obj(req.params.get("capabilities"))
        elif answer.code == -32022:
            self._r23_unsupported(req, answer)

    def _r23_version(self, req: Req, answer: Answer) -> None:
        """R23: the selected version is an integer <= the requested one."""
        requested = req.params.get("protocolVersion")
        version = answer.result.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or (
            isinstance(requested, int) and version > requested
        ):
            self._m.flag("R23", "initialize must select a version <= the requested one", req.message, answer.message)

    def _r23_unsupported(self, req: Req, answer: Answer) -> None:
        """R23: ``-32022`` only when no supported version is <= the request, with ``{requested, supported}``."""
        requested = req.params.get("protocolVersion")
        data = obj(answer.data)
        supported = data.get("supported")
        if (
            data.get("requested") != requested
            or not isinstance(supported, list)
            or not all(isinstance(v, int) for v in supported)
            or (isinstance(requested, int) and any(v <= requested for v in supported))
        ):
            self._m.flag("R23", "-32022 needs data {requested, supported} and no supported version <= requested",
                         req.message, answer.message)

    def _r25_info(self, req: Req, answer: Answer) -> None:
        """R25: the result carries ``info.name`` and ``info.version``."""
        info = obj(answer.result.get("info"))
        if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
            self._m.flag("R25", "the initialize result needs info.name and info.version", answer.message)

    def _r29_terminal_auth(self, req: Req, answer: Answer) -> None:
        """R29: ``terminal`` auth methods only when the client sent ``capabilities.auth.terminal``."""
        methods = answer.result.get("authMethods")
        offered = any(obj(m).get("type") == "terminal" for m in methods) if isinstance(methods, list) else False
        client = obj(obj(req.params.get("capabilities")).get("auth")).get("terminal")
        if offered and not isinstance(client, dict):
            self._m.flag("R29", "terminal auth offered to a client without capabilities.auth.terminal",
                         req.message, answer.message)

    def _answered_new(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/new`` answer and open the session it names."""
        if answer.ok:
            self._new_session(req, answer)

    def _answered_fork(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/fork`` answer and open the forked session."""
        if not answer.ok:
            return
        s = self._new_session(req, answer)
        source = self._m.sessions.get(req.session_id or "")
        if s is not None and source is not None:
            s.fork_items = frozenset(
                [("tool_call", t) for t in source.tool_calls]
                + [("terminal", t) for t in source.terminals]
                + [("subagent", c) for c in source.children]
            )

    def _new_session(self, req: Req, answer: Answer) -> SessionModel | None:
        sid = answer.result.get("sessionId")
        self._r31_fresh_id(req, answer, sid)
        self._r32_lists(req, answer)
        self._r33_mcp(req, answer)
        if not isinstance(sid, str):
            return None
        self._m.issued.add(sid)
        self._m.known.add(sid)
        self._s2_named_before_request(req, answer, sid)
        s = self._m.session(sid)
        s.active = True
        if s.state is None:
            s.state = "idle"
        return s

    def _s2_named_before_request(self, req: Req, answer: Answer, sid: str) -> None:
        """S2: the new id was not named before the request that creates it (while it is in flight is fine)."""
        early = self._m.early.pop(sid, None)
        if early is not None and early.own and early.index < req.index:
            self._m.flag("S2", f"session {sid!r} was named before the {req.method} request that created it",
                         early.message, req.message, answer.message)
        elif early is not None and early.own:
            self._m.flag("S3", f"session {sid!r} was named before the {req.method} answer that gave its id",
                         early.message, answer.message)

    def _r31_fresh_id(self, req: Req, answer: Answer, sid: Any) -> None:
        """R31: a fresh, unique ``sessionId``."""
        if not isinstance(sid, str) or not sid:
            self._m.flag("R31", f"{req.method} must return a sessionId", answer.message)
        elif sid in self._m.issued or (sid in self._m.sessions and self._m.sessions[sid].parent is not None):
            self._m.flag("R31", f"session id {sid!r} was already used on this connection", answer.message)

    def _r32_lists(self, req: Req, answer: Answer) -> None:
        """R32: ``configOptions`` / ``availableCommands`` are arrays or omitted, never null."""
        for name in ("configOptions", "availableCommands"):
            if name in answer.result and not isinstance(answer.result[name], list):
                self._m.flag("R32", f"{name} must be an array or omitted", answer.message)
        if isinstance(answer.result.get("availableCommands"), list):
            check_commands(self._m, answer.result["availableCommands"], answer.message)
        if isinstance(answer.result.get("configOptions"), list):
            check_config_values(self._m, answer.result["configOptions"], answer.message)

    def _r33_mcp(self, req: Req, answer: Answer) -> None:
        """R33: MCP servers of transports not advertised are rejected."""
        mcp = obj(obj(self._m.agent_caps.get("session")).get("mcp"))
        servers = req.params.get("mcpServers")
        for server in servers if isinstance(servers, list) else []:
            kind = obj(server).get("type")
            if not isinstance(kind, str) or not isinstance(mcp.get(kind), dict):
                self._m.flag("R33", f"MCP transport {kind!r} is not advertised but was accepted",
                             req.message, answer.message)
                return

    def _answered_resume(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/resume`` answer against what the resume window showed."""
        s = self._m.session(req.session_id) if req.session_id is not None else None
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
        self._m.issued.add(s.id)
        self._m.known.add(s.id)

    def _r35_cursor(self, req: Req, answer: Answer) -> None:
        """R35: a malformed or unknown (non-``_``) ``replayFrom`` is rejected."""
        cursor = req.params.get("replayFrom")
        if cursor is None:
            return
        kind = obj(cursor).get("type")
        if not isinstance(cursor, dict) or not isinstance(kind, str) or (kind != "start" and not custom(kind)):
            self._m.flag("R35", "a malformed or unknown replayFrom was accepted", req.message, answer.message)

    def _r39_snapshot(self, req: Req, answer: Answer, window: Resume) -> None:
        """R39: a successful resume sends a ``state_update`` before its answer."""
        if not window.snapshots:
            self._m.flag("R39", "no state_update between the resume request and its answer", req.message,
                         answer.message)

    def _r40_order(self, req: Req, answer: Answer, window: Resume) -> None:
        """R40: replay and re-announcements come before the snapshot (session not open before)."""
        if window.snapshots and not window.was_active and window.last_replay > window.snapshots[-1][0]:
            self._m.flag("R40", "a replayed message came after the resume snapshot, before the answer",
                         window.snapshots[-1][1], answer.message)

    def _r113_reannounced(self, s: SessionModel, req: Req, answer: Answer, window: Resume) -> None:
        """R113: each item of the resume snapshot got an entity update in the resume window."""
        if not window.snapshots:
            return
        at, snapshot, keys = window.snapshots[-1]
        missing = [k for k in keys or [] if window.entity_at.get(k, at + 1) > at]
        if missing:
            self._m.flag("R113", f"listed items {missing} were not re-announced before the resume snapshot",
                         req.message, snapshot)

    def _answered_close(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/close`` answer and close the session."""
        s = self._m.sessions.get(req.session_id or "")
        if not answer.ok:
            self._r46_close_error(req, answer)
            return
        if s is None:
            return
        self._r42_idle_first(s, req, answer)
        self._r44_requests_withdrawn(s, req, answer)
        self._m.mark_closed(s)

    def _r42_idle_first(self, s: SessionModel, req: Req, answer: Answer) -> None:
        """R42: close ends active work with an idle ``cancelled`` before its answer."""
        if s.state in ("running", "requires_action"):
            self._m.flag("R42", f"session closed while {s.state} (idle cancelled must come first)",
                         req.message, answer.message)

    def _r44_requests_withdrawn(self, s: SessionModel, req: Req, answer: Answer) -> None:
        """R44: pending permission requests / elicitations are withdrawn before the close answer."""
        for pending in self._m.pending_of(s):
            self._m.flag("R44", "request still pending (not withdrawn) at the close answer", pending.message,
                         answer.message)

    def _r46_close_error(self, req: Req, answer: Answer) -> None:
        """R46: closing a session that is not open succeeds with ``{}``."""
        if req.extra.get("active") is not True and not req.bad_params:
            self._m.flag("R46", "session/close for a session not open should answer {}", req.message, answer.message)

    def _answered_list(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/list`` answer."""
        if not answer.ok:
            return
        sessions = answer.result.get("sessions")
        self._r47_sessions_array(answer, sessions)
        for info in sessions if isinstance(sessions, list) else []:
            self._r49_not_deleted(answer, obj(info).get("sessionId"))
            check_path(self._m, obj(info).get("cwd"), answer.message, "session cwd")

    def _r47_sessions_array(self, answer: Answer, sessions: Any) -> None:
        """R47: ``session/list`` always returns a ``sessions`` array."""
        if not isinstance(sessions, list):
            self._m.flag("R47", "session/list must return a sessions array", answer.message)

    def _r49_not_deleted(self, answer: Answer, sid: Any) -> None:
        """R49: deleted sessions are no longer listed."""
        if sid in self._m.deleted:
            self._m.flag("R49", f"deleted session {sid!r} is still listed", answer.message)

    def _answered_delete(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/delete`` answer and mark the session deleted."""
        if not answer.ok:
            return
        self._r49_delete_advertised(req, answer)
        if req.session_id is not None:
            self._m.deleted.add(req.session_id)

    def _r49_delete_advertised(self, req: Req, answer: Answer) -> None:
        """R49: ``session/delete`` is served only with ``session.delete`` advertised."""
        if not isinstance(obj(self._m.agent_caps.get("session")).get("delete"), dict):
            self._m.flag("R49", "session/delete succeeded without session.delete advertised", req.message,
                         answer.message)

    def _answered_set_config_option(self, req: Req, answer: Answer) -> None:
        """Judge a ``session/set_config_option`` answer."""
        self._r50_config_result(req, answer)

    def _r50_config_result(self, req: Req, answer: Answer) -> None:
        """R50: a successful ``set_config_option`` returns the full ``configOptions`` list."""
        if answer.ok and not isinstance(answer.result.get("configOptions"), list):
            self._m.flag("R50", "set_config_option must return the configOptions array", answer.message)
        elif answer.ok:
            check_config_values(self._m, answer.result["configOptions"], answer.message)

    def _s2_never_created(self) -> None:
        """S2: every session the agent sent something for came to exist on the connection."""
        for sid, early in self._m.early.items():
            if not early.own:
                continue
            if sid in self._m.known:  # the client referred to it later (a resume, a prompt, ...)
                self._m.flag("S2", f"session {sid!r} was named before the client referred to it", early.message)
            else:
                self._m.flag("S2", f"session {sid!r} was named but never became a session on this connection "
                                 "(a failed session/new or fork?)", early.message)
