"""The protocol side of one client connection: ACP methods mapped onto an [`Agent`][acp_agent.Agent].

``AgentRuntime`` answers ``initialize`` (version negotiation, capabilities), owns the
sessions active on the connection, keeps sessions in its store (``acp_agent/store``: a
closed session leaves memory for the store and comes back on ``session/resume``), and
routes every session-scoped request to its [`Session`][acp_agent.Session].
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream
from pydantic import ValidationError

from .. import schema
from .._util.ids import new_session_id
from .._wire.connection import Connection, Method, Reply, Routes, describe_validation_error
from ..agent import Agent
from ..auth import Login, Workspace
from ..errors import ErrorCode, RequestError
from ..extensions import extensions_of
from ..limits import Limits, ProcessSlots, limit_error, limit_exceeded
from ..peer import ClientPeer
from ..providers import provider_routes
from ..records import DEFAULT_PRINCIPAL, SessionRecord
from ..schema import (
    AuthStatusRequest,
    AuthStatusResponse,
    ClientCapabilities,
    ContentBlock,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    LoginAuthRequest,
    LogoutAuthRequest,
)
from ..schema.session_reach import STORED_SESSION_METHODS
from ..session import Session, rearm_wakeups
from ..session import session_of as _session
from ..store import SessionStore, StoredSession
from ..store.keeper import RecordKeeper, active_in_another_process
from ..store.opening import session_store
from .bookkeeping import Bookkeeping, archive_filter
from .children import CHILD_MUTATION_REFUSED, child_cancellable
from .live import LiveSessions, live_sessions
from .warmup import warm_up

if TYPE_CHECKING:
    from .._session.core import SessionCore, SessionFactory
    from .._session.registry import Kind
    from .._session.turns import ForegroundJob
    from ..schema import (
        CancelSessionNotification,
        CancelTerminalRequest,
        CancelToolCallRequest,
        CloseSessionRequest,
        DeleteSessionRequest,
        ForkSessionRequest,
        ListSessionsRequest,
        ListSessionsResponse,
        NewSessionRequest,
        PromptRequest,
        PromptResponse,
        ResumeSessionRequest,
        ResumeSessionResponse,
        SessionConfigOption,
        SessionInfo,
        SetSessionConfigOptionRequest,
        SetSessionConfigOptionResponse,
        SystemPrompt,
    )

__all__ = ["PROTOCOL_VERSION", "AgentRuntime"]

logger = logging.getLogger(__name__)

PROTOCOL_VERSION: Final = 2
SUPPORTED_VERSIONS: Final = [2]
LIST_PAGE_SIZE: Final = 50
_GATED: Final = ("session/", "tool_call/", "terminal/")
"""Methods a login gates ([`Agent.require_login`][acp_agent.Agent.require_login])."""
_UNGATED: Final = frozenset({"session/cancel", "session/close"})
"""Stopping work is never gated: after ``auth/logout`` a client can still cancel and close (R68)."""
SHUTDOWN_TIMEOUT: Final = 5.0
"""Default seconds the end of the connection (EOF, SIGTERM, SIGINT) waits for agent code and
processes to stop before it kills what is left and reports it ended (``ACP_AGENT_SHUTDOWN_TIMEOUT``)."""


class AgentRuntime:
    """Serves one [`Agent`][acp_agent.Agent] on one connection, which it makes over ``receive`` / ``send``.

    The runtime hands its method table to its `Connection` (``runtime.connection``)
    when it builds it; run the connection to serve.
    """

    def __init__(self, agent: Agent, receive: ByteReceiveStream, send: ByteSendStream, *,
                 limits: Limits | None = None, store: SessionStore | None = None,
                 principal: str = DEFAULT_PRINCIPAL, workspace: Workspace | None = None,
                 client_mcp: bool = True) -> None:
        self.agent = agent
        self.principal = principal
        """Who the client is (what the transport authenticated): it sees and acts on that principal's sessions only."""
        self.workspace = workspace if workspace is not None else agent.workspace
        """Where this principal's sessions may live (the argument, else ``agent.workspace``; ``None``: any absolute
        path, a stdio agent's default)."""
        self.client_mcp = client_mcp
        """Whether the client may name stdio/HTTP MCP servers for the agent to start or contact (a remote client
        may not unless the operator allows it: such a server runs a command of the client's on this machine)."""
        self.limits = limits if limits is not None else agent.limits
        """The [`Limits`][acp_agent.Limits] of this connection (the argument, else ``agent.limits``)."""
        chosen = session_store(agent, store, durable=False)
        self.keeper = RecordKeeper(chosen, terminal_tail=self.limits.terminal_output_bytes)
        """Where sessions are kept (``store``, else ``agent.store``, else a
        [`MemoryStore`][acp_agent.store.MemoryStore]: `acp_agent.store.opening`)."""
        self.keeper.on_taken = self._taken
        self.live: LiveSessions[AgentRuntime] = live_sessions(chosen)
        """The runtimes sharing the store, and its sessions being closed, loaded or changed (`live`)."""
        self.live.join(self)
        self._handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}  # the scoped methods' own handlers
        self.bookkeeping = Bookkeeping(self)
        """[unstable] Serves ``session/set_title``, ``session/archive``, ``session/unarchive``, ``session/status``."""
        self.connection = Connection(receive, send, self._routes(),
                                     max_message_bytes=self.limits.max_message_bytes)
        """The connection this runtime serves."""
        self.client = ClientPeer(self.connection)
        """The client of this connection."""
        self.client.mcp.client_info = agent.info()
        self.logged_in = False
        """Whether a login succeeded on this connection (see [`Agent.require_login`][acp_agent.Agent.require_login])."""
        shared = self._check_principal_processes if self.limits.max_principal_processes is not None else None
        self.processes = ProcessSlots(self.limits.max_processes, shared=shared)
        """Terminal processes running on this connection (``max_processes``)."""
        self._opening = 0  # sessions being opened (counted against max_sessions)
        self.sessions: dict[str, SessionCore] = {}
        """The engines of the sessions open on this connection (children too), each with its
        [`Session`][acp_agent.Session]."""
        self._factory: SessionFactory | None = None
        self.records: dict[str, SessionRecord] = {}
        """The records of the sessions active on this connection (the others are in the store)."""
        self._flushing = False
        self.protocol_version: int | None = None
        self._initializing = False
        self._other_request_seen = False
        self.shutdown_timeout: float = SHUTDOWN_TIMEOUT
        """Seconds the end of the connection waits for work to stop before giving up on it."""

    def _routes(self) -> Routes:
        requests: dict[str, Method] = {
            "initialize": Method(self._initialize, None, prepare=_parse_initialize),
            "session/new": Method(self._new_session, "NewSessionRequest"),
            "session/prompt": Method(self._await_insertion, "PromptRequest", prepare=self._queue_prompt),
            "session/resume": Method(self._resume, "ResumeSessionRequest"),
            "session/close": Method(self._close, "CloseSessionRequest"),
            "session/list": Method(self._list, "ListSessionsRequest"),
            "session/delete": Method(self._delete, "DeleteSessionRequest"),
            "session/set_config_option": Method(self._set_config_option, "SetSessionConfigOptionRequest"),
            "tool_call/cancel": Method(None, "CancelToolCallRequest", prepare=self._cancel_tool_call),
            "terminal/cancel": Method(None, "CancelTerminalRequest", prepare=self._cancel_terminal),
        }
        if self.agent.implements("fork_session"):
            requests["session/fork"] = Method(self._fork, "ForkSessionRequest")
        requests.update(self.bookkeeping.routes())
        if self.agent.offers_providers():
            requests.update(provider_routes(self.agent, self.agent.providers, self.agent.configure_provider,
                                           self.principal))
        notifications = {"session/cancel": Method(None, "CancelSessionNotification", prepare=self._cancel)}
        if self.agent.mcp_acp:  # the client sends mcp/message only to an agent that advertises session.mcp.acp
            notifications["mcp/message"] = Method(None, "MessageMcpNotification", prepare=self._mcp_message)
        if self.agent.auth_methods:
            requests["auth/login"] = Method(self._login, LoginAuthRequest)
            requests["auth/logout"] = Method(self._logout, LogoutAuthRequest)
        if self.agent.implements("auth_status"):
            requests["auth/status"] = Method(self._auth_status, AuthStatusRequest)
        for ext in extensions_of(self.agent):
            table = notifications if ext.notification else requests
            table[ext.method] = Method(partial(self._extension, ext.attribute), ext.params)
        for name in sorted(STORED_SESSION_METHODS):
            route = requests.get(name)
            if route is not None and route.handler is not None:
                self._handlers[name] = route.handler
                requests[name] = Method(partial(self._scoped, name), route.params, route.prepare)
        return Routes(requests, notifications, guard=self._guard, on_close=[self.close_all])

    # -- principals: one rule for every method that may reach beyond this connection ------------

    async def _scoped(self, name: str, request: Any) -> Any:
        """A method that may reach a session beyond this connection (active on another one, or only stored:
        ``schema.session_reach.STORED_SESSION_METHODS``) first treats a session of another principal exactly as an
        unknown id (`owns`): ``-32002`` with the same message and data, ``{}`` for ``session/delete``. The other
        methods naming a session reach only the sessions open on this connection, which are its principal's;
        ``session/list`` lists that principal's only."""
        session_id: str = request.session_id
        if not await self.owns(session_id):
            if name == "session/delete":
                return {}  # R46: deleting an unknown session succeeds silently
            raise RequestError.session_not_found(session_id)
        return await self._handlers[name](request)

    def intercept(self, name: str, wrap: Callable[[Callable[[Any], Awaitable[Any]]], Callable[[Any], Awaitable[Any]]],
                  ) -> None:
        """Wrap the handler of ``name`` (one of ``schema.session_reach.STORED_SESSION_METHODS``); the wrapper runs
        once the session is known to be this principal's, so it never learns of another's (a transport's guards)."""
        self._handlers[name] = wrap(self._handlers[name])

    async def owns(self, session_id: str) -> bool:
        """Whether ``session_id`` is a session of this connection's principal (``False`` for an unknown one too).

        A session open on this connection is (it was opened or resumed here); otherwise the runtime that has
        it open or active says whose it is, else the store's record does. A session another process has
        active before its record is readable here (its first save still in that process's journal) is let
        through, so the handler answers "active in another process" rather than "not found".
        """
        if session_id in self.sessions:
            return True
        member = next(self.live.opened(session_id), None) or next(self.live.active(session_id), None)
        if member is not None:
            return bool(member.principal == self.principal)
        found = await self.keeper.find(session_id)
        if found is None:
            return await self.keeper.held_elsewhere(session_id)
        return found.principal == self.principal

    def _mcp_message(self, notification: Any) -> None:
        self.client.mcp.deliver(notification)  # in arrival order, before the answer it precedes

    async def _extension(self, attribute: str, params: Any) -> Any:
        return await getattr(self.agent, attribute)(params, self.client)

    # -- authentication ----------------------------------------------------------------------

    async def _login(self, request: LoginAuthRequest) -> dict[str, Any]:
        ids = {m.method_id for m in self.agent.offered_auth_methods(self.client.initialize)}
        if request.method_id not in ids:
            raise RequestError.invalid_params("unknown methodId", {"methodId": request.method_id})
        await self.agent.login(Login(self.client, request.method_id, request.meta, self.principal))
        self.logged_in = True
        return {}

    async def _logout(self, request: LogoutAuthRequest) -> dict[str, Any]:
        await self.agent.logout(Login(self.client, None, request.meta, self.principal))
        self.logged_in = False
        return {}

    async def _auth_status(self, request: AuthStatusRequest) -> AuthStatusResponse:
        return await self.agent.auth_status(self.client)

    # -- initialization (R21-R28) --------------------------------------------------------

    def _guard(self, method: str, is_request: bool) -> None:
        if self.connection.closed:
            # R18: the connection is shutting down; nothing new starts.
            raise RequestError.request_cancelled("the agent is shutting down")
        if method == "initialize":
            if is_request and (self._initializing or self._other_request_seen):
                raise RequestError.invalid_request("initialize is not allowed now")
            return
        if self.protocol_version is None:
            raise RequestError.invalid_request("the connection is not initialized")
        if is_request:
            self._other_request_seen = True
        if self.agent.require_login and not self.logged_in and method.startswith(_GATED) and method not in _UNGATED:
            raise RequestError.auth_required()  # no hook runs before a login (notifications: dropped)

    def _busy(self) -> bool:
        """Whether a turn runs or waits (the warm-up leaves it the event loop)."""
        return not all(core.turns.quiet for core in self.sessions.values())

    async def _initialize(self, request: InitializeRequest) -> InitializeResponse:
        requested = request.protocol_version
        if requested < SUPPORTED_VERSIONS[0]:
            raise RequestError.unsupported_version(requested, SUPPORTED_VERSIONS)
        if self.protocol_version is not None and requested < self.protocol_version:
            raise RequestError.invalid_request("initialize may not lower the protocol version")
        self._initializing = True
        try:
            self.client.initialize = request
            self.agent.client = request
            await self.agent.initialize(request)
        finally:
            self._initializing = False
        self.protocol_version = PROTOCOL_VERSION
        # the session modules and the first turn's models, while the client is quiet
        self.connection.task_group.start_soon(warm_up, self._busy, lambda: self.connection.answering)
        fields: dict[str, Any] = {}
        methods = self.agent.offered_auth_methods(request)
        if methods:
            fields["auth_methods"] = methods
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            info=self.agent.info(),
            capabilities=self._capabilities(),
            **fields,
        )

    def _capabilities(self) -> Any:
        """The agent's capabilities, without the client MCP transports this connection may not use."""
        capabilities = self.agent.capabilities()
        mcp = capabilities.session.mcp if capabilities.session is not None else None
        if self.client_mcp or mcp is None or (mcp.stdio is None and mcp.http is None):
            return capabilities
        session = capabilities.session
        assert session is not None
        fields = {name: getattr(session, name) for name in session.model_fields_set if name != "mcp"}
        if mcp.acp is not None:
            fields["mcp"] = type(mcp)(acp=mcp.acp)
        return capabilities.model_copy(update={"session": type(session)(**fields)})

    def _mcp_allowed(self, kind: Any) -> bool:
        if kind in ("stdio", "http") and not self.client_mcp:
            return False
        return bool((kind == "stdio" and self.agent.mcp_stdio) or (kind == "http" and self.agent.mcp_http) or (
            kind == "acp" and self.agent.mcp_acp))

    # -- lifecycle -----------------------------------------------------------------------

    def _check_paths(self, cwd: str, additional: Iterable[str] | None, mcp_servers: Iterable[Any] | None) -> None:
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params("cwd must be an absolute path", {"cwd": cwd})
        if additional:
            if not self.agent.accepts_additional_directories:
                raise RequestError.invalid_params("additionalDirectories are not supported")
            for path in additional:
                if not os.path.isabs(path):
                    raise RequestError.invalid_params("additionalDirectories must be absolute paths")
        if self.workspace is not None:
            self.workspace.check(self.principal, cwd, additional)
        names: set[str] = set()
        for server in mcp_servers or ():
            kind = getattr(server, "type", None)
            if not self._mcp_allowed(kind):
                data = {"name": getattr(server, "name", None), "type": kind}
                if kind in ("stdio", "http") and not self.client_mcp:
                    raise RequestError.invalid_params(
                        f"MCP transport {kind!r} is not offered to remote clients (the operator has not allowed "
                        "client MCP servers on this server)", data)
                raise RequestError.invalid_params(f"MCP transport {kind!r} is not supported", data)
            command = getattr(server, "command", None)
            if kind == "stdio" and isinstance(command, str) and not os.path.isabs(command):
                raise RequestError.invalid_params("MCP server command must be an absolute path")
            name = getattr(server, "name", None)
            if name in names:
                raise RequestError.invalid_params("duplicate MCP server name", {"name": name})
            names.add(str(name))

    def _check_system_prompt(self, system_prompt: SystemPrompt | None) -> SystemPrompt | None:
        """[unstable] A client system prompt this agent can apply, or ``-32602`` before anything changes."""
        if system_prompt is None:
            return None
        accepts = self.agent.accepts_system_prompt
        modes = {"append", "override"} if accepts == "override" else {"append"} if accepts else set()
        if system_prompt.mode not in modes:
            raise RequestError.invalid_params(f"systemPrompt mode {system_prompt.mode!r} is not supported")
        for block in system_prompt.content:
            block_type = str(getattr(block, "type", ""))
            if not self.agent.accepts_block(block_type):
                raise RequestError.invalid_params(f"systemPrompt content type {block_type!r} is not accepted")
        return system_prompt

    def active_count(self) -> int:
        """Sessions the client has active (or being opened) on this connection, subagent children not counted."""
        return sum(1 for c in self.sessions.values() if c.parent is None) + self._opening

    def _principal_members(self) -> list[AgentRuntime]:
        return [m for m in self.live.members(self) if m.principal == self.principal]

    def _check_session_room(self) -> None:
        """Refuse a request that would open one session more than ``max_sessions`` (or, across the principal's
        connections, ``max_principal_sessions``) allows."""
        limit = self.limits.max_sessions
        active = self.active_count()
        if active >= limit:
            raise limit_error("max_sessions", limit, f"{active} sessions are active on this connection")
        cap = self.limits.max_principal_sessions
        if cap is not None and (held := sum(m.active_count() for m in self._principal_members())) >= cap:
            raise limit_error("max_principal_sessions", cap, f"{held} sessions of this user are active")

    async def _reserve_stored_room(self) -> bool:
        """Refuse a request that would store one session more than ``max_principal_stored_sessions`` allows;
        True if a place was reserved (give it back with ``live.unreserve`` once the session is saved or not).

        The sessions of the principal being created on any connection sharing the store object count too, so
        concurrent ``session/new`` requests cannot all pass the check before any of them is saved."""
        cap = self.limits.max_principal_stored_sessions
        if cap is None:
            return False

        async def room(creating: int) -> bool:
            return creating < cap and not await self.keeper.stores_at_least(cap - creating, self.principal)

        if not await self.live.reserve(self.principal, room):
            raise limit_error("max_principal_stored_sessions", cap, f"{cap} sessions of this user are stored")
        return True

    def _check_principal_processes(self) -> None:
        cap = self.limits.max_principal_processes
        assert cap is not None
        running = sum(len(m.processes) for m in self._principal_members())
        if running >= cap:
            raise limit_exceeded("max_principal_processes", cap, f"{running} terminal processes of this user run")

    def _new_record(self, cwd: str, additional: list[str] | None, **fields: Any) -> SessionRecord:
        from ..history import History

        fields.setdefault("history", History(self.limits.terminal_output_bytes))
        return SessionRecord(session_id=new_session_id(), cwd=cwd, additional_directories=list(additional or []),
                             principal=self.principal, **fields)

    def _sessions(self) -> SessionFactory:
        """The connection's one session factory, made with the first session (its modules load then)."""
        if self._factory is None:
            from .._session.core import SessionFactory

            self._factory = SessionFactory(self.connection, limits=self.limits, processes=self.processes,
                                           client=self.client, wrap=self._wrap, opened=self._opened)
        return self._factory

    def _wrap(self, core: SessionCore) -> Session:
        return Session(core, prompt_handler=self.agent.prompt)

    def _opened(self, core: SessionCore) -> None:
        """Index a running engine (top-level or child) until it closes."""
        self.sessions[core.id] = core

        def forget() -> None:
            if self.sessions.get(core.id) is core:
                del self.sessions[core.id]

        core.on_closed.append(forget)

    async def _open(self, record: SessionRecord, mcp_servers: list[Any] | None, *, new: bool = False,
                    hold: bool = False) -> SessionCore:
        """Make a session live; with ``new``, its output is held until the answer that names it (with ``hold``,
        until its ``sink.release()``)."""
        self._check_session_room()
        # Held before it runs (a store that cannot be reached fails the request here, with nothing started).
        if not await self.keeper.acquire(record.session_id):  # a new id is nobody's: only a resume is refused
            logger.error("acp: session %s is held by another process sharing the store", record.session_id)
        core = self._sessions().make(record, hold=new or hold)
        _session(core).mcp_servers = list(mcp_servers or [])
        self._opening += 1
        try:
            await self.connection.task_group.start(core.serve)
        finally:
            self._opening -= 1
        self._opened(core)
        self.records[record.session_id] = record
        if self.keeper.durable:
            core.persist = partial(self.keeper.save, record)
            core.persist_now = partial(self.keeper.save_now, record)
            if not self._flushing:
                self._flushing = True
                self.connection.task_group.start_soon(self.keeper.run, self.records)
                self.connection.task_group.start_soon(self.keeper.retry_held)
        return core

    async def _new_session(self, request: NewSessionRequest) -> Reply:
        self._check_paths(request.cwd, request.additional_directories, request.mcp_servers)

        def record() -> SessionRecord:
            return self._new_record(request.cwd, request.additional_directories, request_meta=request.meta,
                                    system_prompt=self._check_system_prompt(request.system_prompt))

        core = await self._create(record, request.mcp_servers, self.agent.new_session)
        session = _session(core)
        # What the hook sent for the session goes out right after the answer that names it.
        return Reply(schema.NewSessionResponse(session_id=session.id, **_lists(session)), core.sink.release)

    async def _fork(self, request: ForkSessionRequest) -> Reply:
        from ..history import finalize_live_items  # loaded with the source session

        source_core = self._active(request.session_id)
        source = _session(source_core)
        self._check_paths(request.cwd, request.additional_directories, request.mcp_servers)

        def record() -> SessionRecord:
            forked = self._new_record(
                request.cwd,
                request.additional_directories,
                title=source_core.record.title,
                history=source_core.record.history.copy(without_children=True),
                config_options=[o.model_copy(deep=True) for o in source.config_options],
                available_commands=list(source.available_commands),
                data=dict(source.data),
                request_meta=request.meta,
                system_prompt=self._check_system_prompt(request.system_prompt),
            )
            finalize_live_items(forked.history, "cancelled")  # the fork runs none of its source's live work
            return forked

        core = await self._create(record, request.mcp_servers, partial(self.agent.fork_session, source))
        session = _session(core)
        answer = schema.ForkSessionResponse(session_id=session.id, **_lists(session))
        return Reply(answer, core.sink.release)

    async def _create(self, record: Callable[[], SessionRecord], mcp_servers: list[Any],
                      hook: Callable[[Session], Awaitable[None]]) -> SessionCore:
        """A new session (``session/new``, ``session/fork``): room in the principal's stored quota reserved until it
        is saved, its record made, the session opened, the agent's ``hook`` run (the session discarded if it
        fails), then saved."""
        reserved = await self._reserve_stored_room()
        try:
            made = record()
            core = await self._open(made, mcp_servers, new=True)
            try:
                await hook(_session(core))
            except BaseException:
                await self._discard(core)
                raise
            await self.keeper.save(made)
            return core
        finally:
            if reserved:
                self.live.unreserve(self.principal)

    async def _resume(self, request: ResumeSessionRequest) -> ResumeSessionResponse:
        sid = request.session_id
        if sid in self.sessions:
            self._active(sid)  # children cannot be resumed by the client
        await self.live.settled(sid)  # resumed once a close saved it, or another resume brought it back
        async with self.live.changing(sid):
            await self._acquire(sid)  # before loading: what another process saves last is what loads
            try:
                record = self.records.get(sid) or await self.keeper.load(sid)
                if record is None:
                    raise RequestError.session_not_found(sid)
                return await self._resume_record(request, record)
            finally:
                if sid not in self.records:  # not resumed
                    await self.keeper.release(sid)

    async def _acquire(self, sid: str) -> None:
        """Hold ``sid`` for this connection unless it is active here already (``-32002`` if another process has
        it: `RecordKeeper.acquire_or_refuse`)."""
        if sid not in self.records:
            await self.keeper.acquire_or_refuse(sid)

    async def _resume_record(self, request: ResumeSessionRequest, record: SessionRecord) -> ResumeSessionResponse:
        replay = _replay_mode(request.replay_from)
        self._check_paths(request.cwd, request.additional_directories, request.mcp_servers)
        core = self.sessions.get(request.session_id)
        if core is None:
            self._check_session_room()  # before anything changes
        system_prompt = self._check_system_prompt(request.system_prompt)
        record.cwd = request.cwd
        record.additional_directories = list(request.additional_directories or [])
        record.request_meta, record.system_prompt = request.meta, system_prompt
        if core is None:
            # P11: with a replay, live output (the hook's, re-armed work's) waits until replay_complete has gone.
            core = await self._open(record, request.mcp_servers, hold=replay)
            try:
                await self.agent.resume_session(_session(core))
                if record.wakeups:
                    await rearm_wakeups(_session(core), self.agent)  # durable wake-ups it had pending
            except BaseException:
                core.sink.release()
                raise
        else:
            _session(core).mcp_servers = list(request.mcp_servers or [])
        # R40: replay, then re-announce listed work, then the current snapshot, then the answer.
        if replay:
            _replay(core, record)
        else:
            for kind, item_id in core.registry.listed_ids():
                current = record.history.current(kind, item_id)
                if current is not None:
                    core.sink.resend(current)  # R113: the item's full present state
        core.snapshots.repeat()
        return schema.ResumeSessionResponse(**_lists(_session(core)))

    async def _close(self, request: CloseSessionRequest) -> dict[str, Any]:
        await self.close_session(request.session_id)
        return {}

    async def close_session(self, sid: str) -> None:
        """Close an active session exactly as ``session/close`` does (it stays in the store)."""
        core = self.sessions.get(sid)
        if core is None:
            if sid in self.records:  # being closed here: answered once that close ended, so nothing follows (R45)
                await self.live.settled(sid)
            return
        self._active(sid)  # children cannot be closed by the client
        self.sessions.pop(sid, None)
        async with self.live.changing(sid):
            await self._stop(core)

    async def _stop(self, core: SessionCore, *, finalize: bool = False, keep: bool = True) -> None:
        if finalize:
            await core.close(self.shutdown_timeout, finalize=True)
        else:
            await core.close()
        try:
            await self.agent.close_session(_session(core))
        except Exception:
            logger.exception("acp: close_session hook failed for %s", core.id)
        record = core.record
        if keep:
            await self.keeper.keep(record)  # the closed session leaves memory for the store (held if that fails)
        if core.id not in self.sessions and self.records.get(core.id) is record:
            del self.records[core.id]

    def _taken(self, sid: str) -> None:
        """Another process took ``sid`` over (the store refused this process's stale lease): close it here without
        saving (its client is refused ``-32002`` from now on)."""
        core = self.sessions.get(sid)
        if core is not None and core.parent is None:
            self.connection.task_group.start_soon(self._give_up, core)

    async def _give_up(self, core: SessionCore) -> None:
        if self.sessions.get(core.id) is not core:
            return
        self.sessions.pop(core.id, None)
        async with self.live.changing(core.id):
            await self._stop(core, keep=False)
        await self.keeper.release(core.id)

    async def _discard(self, core: SessionCore) -> None:
        self.sessions.pop(core.id, None)
        record = self.records.pop(core.id, None)
        with anyio.CancelScope(shield=True):
            await core.close()
            if record is not None and self.keeper.durable:
                await self.keeper.delete(core.id, record)  # in case a periodic save wrote it already
            await self.keeper.release(core.id)

    async def _delete(self, request: DeleteSessionRequest) -> dict[str, Any]:
        if request.session_id in self.sessions:
            self._active(request.session_id)  # children cannot be deleted by the client
        await self._acquire(request.session_id)  # released by the delete
        core = self.sessions.pop(request.session_id, None)
        if core is not None:
            await self._stop(core, keep=False)
        record = self.records.pop(request.session_id, None)
        if await self.keeper.delete(request.session_id, record) or record is not None:
            await self.agent.delete_session(request.session_id)
        return {}

    async def _list(self, request: ListSessionsRequest) -> ListSessionsResponse:
        if request.cwd is not None and not os.path.isabs(request.cwd):
            raise RequestError.invalid_params("cwd must be an absolute path", {"cwd": request.cwd})  # R34
        archived = archive_filter(request.archived)  # S5: filtered before paging
        after = _decode_cursor(request.cursor) if request.cursor is not None else None
        page = await self.keeper.list(request.cwd, after, LIST_PAGE_SIZE + 1, archived, self.principal)
        # An active session's record in memory is newer than its last save.
        fields: dict[str, Any] = {"sessions": [_info(self.records.get(s.session_id, s)) for s in page[:LIST_PAGE_SIZE]]}
        if len(page) > LIST_PAGE_SIZE:
            fields["next_cursor"] = _encode_cursor(page[LIST_PAGE_SIZE - 1].key)  # the stored order, not memory's
        else:  # the last page: closed sessions whose save failed and that the store never had
            fields["sessions"] += [_info(s) for s in await self.keeper.unstored(request.cwd, archived)]
        return schema.ListSessionsResponse(**fields)

    async def close_all(self) -> None:
        """Close every active session (connection end: EOF, signal, fatal error).

        Each session first stops its work and reports every unfinished item ended, within
        `shutdown_timeout` seconds (see `SessionCore.wind_down`).
        """
        cores = [c for c in self.sessions.values() if c.parent is None]
        self.sessions.clear()
        async with anyio.create_task_group() as tg:
            for core in cores:
                tg.start_soon(partial(self._stop, core, finalize=True))
        await self.keeper.flush_held()
        self.live.leave(self)  # finished: no other runtime finds it any more

    # -- prompts -------------------------------------------------------------------------

    def _active(self, session_id: str, *, child_cancel: bool = False) -> SessionCore:
        """The engine of a session open here that the client may act on (``-32002`` if none; a child only
        for its advertised cancels)."""
        core = self.sessions.get(session_id)
        if session_id in self.keeper.taken:
            raise active_in_another_process(session_id)  # another process took it over (its lease)
        if core is None:
            raise RequestError.session_not_found(session_id)
        if core.parent is not None and not (child_cancel and child_cancellable(core)):
            raise RequestError.invalid_params(CHILD_MUTATION_REFUSED, {"sessionId": session_id})
        return core

    def _queue_prompt(self, request: PromptRequest) -> tuple[SessionCore, ForegroundJob] | Reply:
        # Runs while the request is dispatched, so prompts queue in arrival order (R56).
        core = self._active(request.session_id)
        self._check_prompt(request.prompt)
        key = request.idempotency_key
        if key is not None:  # P3/P4: a retry gets the first attempt's messageId (or waits with it) and starts nothing
            from .._session.keys import prompt_digest

            digest = prompt_digest(request.prompt)
            keys = core.prompt_keys()
            earlier = keys.find(key, digest)
            if isinstance(earlier, str):
                return Reply({"messageId": earlier})
            if earlier is not None:
                return core, earlier
        cap = self.limits.max_history_bytes
        if cap is not None and (size := core.record.history.size) >= cap:
            raise limit_error("max_history_bytes", cap, f"the session holds {size} bytes of history")
        job = core.turns.enqueue_prompt(list(request.prompt), request.meta)
        if key is not None:
            keys.hold(key, digest, job)
        if job.message_id is not None:
            # An idle session inserts the prompt at once: answer now, and the worker echoes
            # it once the answer is queued (R52, R53). The answer is the dict a PromptResponse
            # with our own id serializes to (no model to build on the reader's step).
            return Reply({"messageId": job.message_id}, job.answered.set)
        return core, job

    async def _await_insertion(self, queued: tuple[SessionCore, ForegroundJob]) -> PromptResponse:
        core, job = queued
        try:
            try:
                await job.inserted.wait()
            except anyio.get_cancelled_exc_class():
                if core.turns.withdraw(job):
                    raise
                # Already inserted: insertion cannot be undone, answer with its id (R16, R54).
            if job.rejected is not None:
                raise job.rejected
            assert job.message_id is not None
            return schema.PromptResponse(message_id=job.message_id)
        finally:
            job.answered.set()

    def _check_prompt(self, prompt: list[ContentBlock]) -> None:
        if not prompt:
            raise RequestError.invalid_params("prompt must not be empty")
        for block in prompt:
            block_type = str(getattr(block, "type", ""))
            if not self.agent.accepts_block(block_type):
                raise RequestError.invalid_params(
                    f"content block type {block_type!r} is not accepted", {"type": block_type}
                )

    def _cancel(self, request: CancelSessionNotification) -> None:
        core = self.sessions.get(request.session_id)
        if core is None:
            return
        if core.parent is not None and not child_cancellable(core):
            logger.warning("acp: ignoring session/cancel for child %s, which does not advertise cancel", core.id)
            return
        core.cancel()

    # -- per-item cancels (R101-R105) -----------------------------------------------------

    def _cancel_tool_call(self, request: CancelToolCallRequest) -> dict[str, Any]:
        # R101/R102: validate, accept with {}, and let the handle confirm with a final status.
        core = self._active(request.session_id, child_cancel=True)
        self._accept_cancel(core, "tool_call", request.tool_call_id, self.agent.cancel_tool_call,
                            "the tool call is unknown, finished or not cancellable", "toolCallId")
        return {}

    def _cancel_terminal(self, request: CancelTerminalRequest) -> dict[str, Any]:
        # R103/R104: validate, accept with {}, and let the terminal confirm with exitStatus.
        core = self._active(request.session_id, child_cancel=True)
        self._accept_cancel(core, "terminal", request.terminal_id, self.agent.cancel_terminal,
                            "the terminal is unknown, exited or not cancellable", "terminalId")
        return {}

    def _accept_cancel(self, core: SessionCore, kind: Kind, item_id: str,
                       hook: Callable[[Session, str], Awaitable[None]], refusal: str, key: str) -> None:
        entity = core.registry.get(kind, item_id)
        hook_name = "cancel_tool_call" if kind == "tool_call" else "cancel_terminal"
        usable = entity is not None and not entity.final and entity.cancel_advertised and (
            entity.cancel is not None or self.agent.implements(hook_name))
        if entity is None or not usable:
            raise RequestError.invalid_params(refusal, {key: item_id})
        if entity.cancel is not None:
            entity.cancel()
        else:
            core.spawn(hook, _session(core), item_id)

    async def _set_config_option(self, request: SetSessionConfigOptionRequest) -> SetSessionConfigOptionResponse:
        if (request.type == "id" and not isinstance(request.value, str)) or (
                request.type == "boolean" and not isinstance(request.value, bool)):
            raise RequestError.invalid_params("value does not fit its type")  # a schema violation: before -32002
        session = _session(self._active(request.session_id))
        option = _find_option(session.config_options, request.config_id)
        value_type = getattr(request, "type", None)
        value = getattr(request, "value", None)
        _check_option_value(option, value_type, value)
        await self.agent.set_config_option(session, request.config_id, value)
        option.current_value = value
        return schema.SetSessionConfigOptionResponse(config_options=list(session.config_options))


def _parse_initialize(params: dict[str, Any]) -> InitializeRequest:
    """Validate ``initialize`` params; for versions above 2, leniently (R24).

    A newer client's params may not parse as v2: fields that do not are dropped, and a
    missing or malformed ``info`` becomes ``{"name": "unknown", "version": "unknown"}``.
    """
    try:
        return InitializeRequest.model_validate(params, strict=True)  # no lax coercion: false is not 0
    except ValidationError as exc:
        version = params.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or not PROTOCOL_VERSION < version <= 65535:
            raise RequestError.invalid_params(describe_validation_error(exc)) from None
    lenient: dict[str, Any] = {"protocolVersion": version, "info": {"name": "unknown", "version": "unknown"}}
    for key, model in (("info", Implementation), ("capabilities", ClientCapabilities)):
        if key in params:
            with contextlib.suppress(ValidationError):
                lenient[key] = model.model_validate(params[key])
    return InitializeRequest.model_validate(lenient)


def _lists(session: Session) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if session.config_options:
        fields["config_options"] = list(session.config_options)
    if session.available_commands:
        fields["available_commands"] = list(session.available_commands)
    return fields


def _info(record: SessionRecord | StoredSession) -> SessionInfo:
    fields: dict[str, Any] = {"session_id": record.session_id, "cwd": record.cwd, "updated_at": record.updated_at,
                              "archived": record.archived}
    if record.additional_directories:
        fields["additional_directories"] = list(record.additional_directories)
    if record.title is not None:
        fields["title"] = record.title
    if record.meta is not None:
        fields["meta"] = record.meta
    return schema.SessionInfo(**fields)


def _encode_cursor(key: tuple[str, str]) -> str:
    """A ``session/list`` cursor: the place of the last session listed (sessions that change meanwhile move
    to the front, so the pages after it neither repeat nor skip one that did not change)."""
    return base64.urlsafe_b64encode(b"k:" + orjson.dumps(key)).decode()


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        text = base64.urlsafe_b64decode(cursor.encode())
        if not text.startswith(b"k:"):
            raise ValueError(cursor)
        key = orjson.loads(text[2:])
        if not (isinstance(key, list) and len(key) == 2 and all(isinstance(part, str) for part in key)):
            raise ValueError(cursor)
        return key[0], key[1]
    except (ValueError, binascii.Error):
        raise RequestError.invalid_params("unknown cursor") from None


def _replay(core: SessionCore, record: SessionRecord) -> None:
    """Send the session's history, then one ``replay_complete`` per child the history announced and one for the
    session itself (P8, P9, P12), then let the live output held meanwhile go (P11). Nothing awaits in between, so no
    live update of the session can come between the history and its marker; a replay cut short (the session
    closed) sends no marker (P13)."""
    children: dict[str, None] = {}
    for update in record.history.replay():
        core.sink.replay(update)
        if isinstance(update, schema.SubagentUpdate):
            children[update.session_id] = None
    marker = schema.ReplayComplete()
    for child in children:
        core.sink.replay(marker, child)
    core.sink.replay(marker)
    core.sink.release()


def _replay_mode(replay_from: Any) -> bool:
    if replay_from is None:
        return False
    if getattr(replay_from, "type", None) == "start":
        return True
    raise RequestError.invalid_params("unsupported replayFrom cursor")


def _find_option(options: list[SessionConfigOption], config_id: str) -> Any:
    for option in options:
        if option.config_id == config_id:
            return option
    raise RequestError.invalid_params("unknown configId", {"configId": config_id})


def _check_option_value(option: Any, value_type: Any, value: Any) -> None:
    kind = getattr(option, "type", None)
    if kind == "boolean":
        if value_type != "boolean" or not isinstance(value, bool):
            raise RequestError.invalid_params('this option takes a boolean value (type "boolean")')
        return
    if kind == "select":
        if value_type != "id" or not isinstance(value, str):
            raise RequestError.invalid_params('this option takes a value id (type "id")')
        if value not in set(_select_values(option.options)):
            raise RequestError.invalid_params("value is not one of the option's values", {"value": value})
        return
    raise RequestError(ErrorCode.INVALID_PARAMS, "Invalid params: unsupported option type")


def _select_values(options: Any) -> Iterable[str]:
    for item in options or []:
        nested = getattr(item, "options", None)
        if nested is not None and not hasattr(item, "value"):
            yield from (o.value for o in nested)
        else:
            yield item.value

