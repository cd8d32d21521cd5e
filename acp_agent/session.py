"""A session: the author's handle for sending updates, and the owner of its foreground state.

Every ``state_update`` of a session is built by :meth:`Session._snapshot` and sent by
:meth:`Session._set_state`; nothing else writes one. Foreground work (an inserted prompt,
or work the agent starts itself) runs one job at a time in the session's worker task, so
the ``running`` … ``idle`` bracket, ``requires_action`` while the work waits on the user,
and the ``cancelled`` / ``error`` endings are decided in one place.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import orjson
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from .background import FINAL_STATUSES, BackgroundRegistry, Entity, Kind, ToolCallStateError
from .errors import RequestError, SessionClosedError
from .history import History
from .limits import DEFAULT_LIMITS, Limits, ProcessSlots, limit_exceeded
from .permissions import NOT_APPROVED, PermissionOutcome, read_outcome
from .schema import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    AvailableCommand,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    ContentBlock,
    Error,
    IdleStateUpdate,
    Notice,
    PermissionOption,
    PlanEntry,
    PlanItems,
    PlanUpdate,
    RequestPermissionRequest,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    SessionCancelCapabilities,
    SessionConfigOption,
    SessionInfoUpdate,
    SubagentSessionCapabilities,
    SubagentUpdate,
    TerminalExitStatus,
    TerminalSize,
    TerminalUpdate,
    TextContent,
    ToolCallContentChunk,
    ToolCallPermissionSubject,
    ToolCallUpdate,
    UsageUpdate,
    UserMessage,
)
from .schema import (
    Terminal as TerminalContent,
)
from .subagents import Subagent
from .terminals import CANCEL_CAPABILITIES as TERMINAL_CANCEL
from .terminals import DEFAULT_GRACE, Terminal, command_text
from .tool_calls import _CANCEL as TOOL_CALL_CANCEL
from .tool_calls import ToolCall

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["ForegroundState", "MessageStream", "Session", "StopReason"]

logger = logging.getLogger(__name__)

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"] | str
"""Why foreground work ended (``_``-prefixed custom reasons are allowed)."""

ForegroundState = Literal["idle", "running", "requires_action"]

_FOREGROUND: Final[contextvars.ContextVar[Session | None]] = contextvars.ContextVar(
    "acp_foreground", default=None
)
_BATCHING: Final[contextvars.ContextVar[tuple[Session, ...]]] = contextvars.ContextVar(
    "acp_batching", default=()
)
_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A process-unique opaque id such as ``msg_12``."""
    return f"{prefix}_{next(_ids)}"


@dataclass(slots=True)
class SessionRecord:
    """What the agent process keeps about a session, active or not (for list and resume)."""

    session_id: str
    cwd: str
    additional_directories: list[str] = field(default_factory=list)
    title: str | None = None
    updated_at: str = field(default_factory=lambda: _now())
    history: History = field(default_factory=History)
    config_options: list[SessionConfigOption] = field(default_factory=list)
    available_commands: list[AvailableCommand] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True, eq=False)
class ForegroundJob:
    """One unit of foreground work (a held prompt or agent-initiated work) waiting for the worker."""

    run: Callable[[], Awaitable[StopReason | None]] | None = None
    prompt: list[ContentBlock] | None = None
    inserted: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)
    rejected: RequestError | None = None
    cancelled: bool = False  # session/cancel arrived after insertion, before the worker started it
    echo: UserMessage | None = None  # set at insertion: the user_message, sent after the answer

    @property
    def message_id(self) -> str | None:
        """The prompt's ``messageId`` once inserted, else ``None``."""
        return self.echo.message_id if self.echo is not None else None


class MessageStream:
    """An agent message (or thought) streamed as chunks that share one ``messageId``."""

    def __init__(self, session: Session, *, thought: bool = False, message_id: str | None = None) -> None:
        self.session = session
        self.message_id = message_id or new_id("thought" if thought else "msg")
        self._thought = thought
        self._chunk = AgentThoughtChunk if thought else AgentMessageChunk
        # The hot path: text chunks are framed straight to bytes (same JSON the models produce).
        self._head = (
            session._prefix
            + (b'{"sessionUpdate":"agent_thought_chunk","messageId":' if thought
               else b'{"sessionUpdate":"agent_message_chunk","messageId":')
            + orjson.dumps(self.message_id)
            + b',"content":{"type":"text","text":'
        )

    async def write(self, content: str | ContentBlock) -> None:
        """Append one piece of text (or one content block) to the message."""
        session = self.session
        if type(content) is not str:
            await session.send(self._chunk(message_id=self.message_id, content=content))
            return
        if session._closed:
            raise SessionClosedError(f"session {session.id} is closed")
        session.record.history.append_text(self._thought, self.message_id, content)
        writer = session._conn.writer
        writer.send_nowait(self._head + orjson.dumps(content) + b"}}}}\n")
        if writer.full():  # the common case skips the coroutine
            await writer.backpressure()


class Session:
    """One ACP session: send updates, ask permission, run foreground work.

    Agent code receives a ``Session`` in every hook. Updates go out in exactly the order
    they are sent. The session owns its foreground state (``idle``, ``running``,
    ``requires_action``) and reports it itself; agent code never sends ``state_update``.
    """

    def __init__(
        self,
        connection: Connection,
        record: SessionRecord,
        *,
        prompt_handler: Callable[[Session, list[ContentBlock]], Awaitable[StopReason | None]],
        index: dict[str, Session] | None = None,
        parent: Session | None = None,
        limits: Limits = DEFAULT_LIMITS,
        processes: ProcessSlots | None = None,
    ) -> None:
        self._conn = connection
        self.limits = limits
        """The connection's :class:`~acp_agent.Limits` (read-only)."""
        self._processes = processes if processes is not None else ProcessSlots(limits.max_processes)
        self._index = index if index is not None else {}
        self.parent = parent
        """The session that owns this one, for a subagent child session."""
        self.children: list[Session] = []
        self.record = record
        self._prompt_handler = prompt_handler
        self._state: ForegroundState = "idle"
        self._blocked = 0  # foreground permission requests in flight
        self._jobs: deque[ForegroundJob] = deque()
        self._job_ready = anyio.Event()
        self._fg_scope: anyio.CancelScope | None = None
        self._fg_done = anyio.Event()
        self._fg_done.set()
        self._job_active = False  # a foreground job is between its start and its idle
        self._cancelled_late = False  # session/cancel arrived while that job was finishing up
        self._idle = anyio.Event()
        self._idle.set()
        self._tg: TaskGroup | None = None
        self._stopped = anyio.Event()
        self._closing = False
        self._closed = False
        self._winding_down = False  # the connection is ending: no new foreground work
        self._prefix = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + orjson.dumps(record.session_id)
            + b',"update":'
        )
        self.background = BackgroundRegistry()
        """Every tool call, terminal and child of this session, and the ``background`` list."""
        self._last_version = -1  # registry version of the last snapshot sent
        self._list_dirty = False
        self.mcp_servers: list[Any] = []
        self.data: dict[str, Any] = {}
        """Free space for agent code to keep per-session state."""

    # -- identity ----------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self.record.session_id

    @property
    def cwd(self) -> str:
        """The session's absolute working directory."""
        return self.record.cwd

    @property
    def additional_directories(self) -> list[str]:
        """Extra workspace roots the client gave this session."""
        return self.record.additional_directories

    @property
    def state(self) -> ForegroundState:
        """The foreground state last reported to the client."""
        return self._state

    @property
    def closed(self) -> bool:
        """True once the session was closed; nothing more can be sent for it."""
        return self._closed

    @property
    def config_options(self) -> list[SessionConfigOption]:
        """The session's config options (complete list, in priority order)."""
        return self.record.config_options

    @config_options.setter
    def config_options(self, options: Sequence[SessionConfigOption]) -> None:
        self.record.config_options = list(options)

    @property
    def available_commands(self) -> list[AvailableCommand]:
        """The slash commands offered in this session."""
        return self.record.available_commands

    @available_commands.setter
    def available_commands(self, commands: Sequence[AvailableCommand]) -> None:
        self.record.available_commands = list(commands)

    # -- sending updates ---------------------------------------------------------------

    async def send(self, update: BaseModel) -> None:
        """Send one ``session/update`` for this session (any variant but ``state_update``).

        Tool call and terminal updates are checked first: an illegal move raises
        :class:`~acp_agent.background.ToolCallStateError` and nothing is sent (R97).
        """
        self.emit(update)
        await self.drain_backpressure()

    def emit(self, update: BaseModel, *, detach: bool | None = None, record: bool = True) -> None:
        """Queue one update now (no waiting); see :meth:`send`.

        ``detach`` sets whether a tool call / terminal this update creates is background work;
        ``record=False`` leaves it out of the replayable history (the caller recorded it).
        """
        self._check_sendable(update)
        entity_update = isinstance(update, _ENTITY_UPDATES)
        if entity_update:
            self.background.check(update)
            self._check_new_item(update, detach)
        if record:
            self.record.history.record(update)
        self._conn.writer.send_nowait(self._frame(update))
        if entity_update and self.background.observe(update, foreground=_FOREGROUND.get() is self, detach=detach):
            self._list_changed()

    async def drain_backpressure(self) -> None:
        """Wait while the client is behind on reading (bounded output queue)."""
        await self._conn.writer.backpressure()

    def _frame(self, update: BaseModel) -> bytes:
        return (
            self._prefix
            + update.__pydantic_serializer__.to_json(update, by_alias=True, exclude_unset=True)
            + b"}}\n"
        )

    def _check_new_item(self, update: BaseModel, detach: bool | None) -> None:
        """Refuse a raw update announcing a new tool call / terminal that would overflow the list.

        Only entities the registry has never seen are checked here; the handle APIs
        (:meth:`start_terminal`, :meth:`set_detached`, ...) check their own changes first.
        """
        if isinstance(update, ToolCallUpdate):
            kind: Kind = "tool_call"
            item_id = update.tool_call_id
        elif isinstance(update, TerminalUpdate):
            kind, item_id = "terminal", update.terminal_id
        else:
            return
        if self.background.get(kind, item_id) is not None:
            return
        detached = detach if detach is not None else _FOREGROUND.get() is not self
        if not detached:
            return
        shadow = Entity(kind, item_id, announced=True, detached=True)
        fields = update.model_fields_set
        if kind == "tool_call":
            shadow.final = "status" in fields and getattr(update, "status", None) in FINAL_STATUSES
            content = getattr(update, "content", None) or []
            shadow.terminals = [c.terminal_id for c in content if isinstance(c, TerminalContent)]
        else:
            shadow.final = "exit_status" in fields and getattr(update, "exit_status", None) is not None
        self.check_list_room({}, [shadow])

    def check_list_room(self, changes: Mapping[Entity, Mapping[str, Any]], new: Sequence[Entity] = ()) -> None:
        """Raise :class:`~acp_agent.errors.LimitExceededError` if these entity changes would
        grow the ``background`` list past ``limits.max_listed_items`` (nothing is changed)."""
        limit = self.limits.max_listed_items
        size = self.background.size_after(changes, new)
        listed = self.background.listed_count
        if size > limit and size > listed:
            raise limit_exceeded("max_listed_items", limit, f"session {self.id} lists {listed} items")
        parent = self.parent
        if parent is not None and listed == 0 and size > 0:
            # R90: a child with background work of its own is busy, so its parent lists it.
            entity = parent.background.get("subagent", self.id)
            if entity is not None:
                parent.check_list_room({entity: {"child_state": None}})

    def _check_sendable(self, update: BaseModel) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")
        if isinstance(update, _STATE_UPDATES) or getattr(update, "session_update", None) == "state_update":
            raise ValueError("the session reports its own state; agent code never sends state_update")

    def resend(self, update: BaseModel) -> None:
        """Send an update that is already history (replay, re-announcement) without recording it again."""
        self._send_nowait(update)

    def _send_nowait(self, update: BaseModel) -> None:
        if self._closed:
            return
        self._conn.writer.send_nowait(self._frame(update))

    async def say(self, content: str | Sequence[ContentBlock], *, message_id: str | None = None) -> str:
        """Send a complete agent message; returns its ``messageId``."""
        message_id = message_id or new_id("msg")
        await self.send(AgentMessage(message_id=message_id, content=_blocks(content)))
        return message_id

    async def think(self, content: str | Sequence[ContentBlock], *, message_id: str | None = None) -> str:
        """Send a complete agent thought; returns its ``messageId``."""
        message_id = message_id or new_id("thought")
        await self.send(AgentThought(message_id=message_id, content=_blocks(content)))
        return message_id

    def message(self, *, message_id: str | None = None) -> MessageStream:
        """Start an agent message streamed in chunks (``await stream.write("...")``)."""
        return MessageStream(self, message_id=message_id)

    def thought(self, *, message_id: str | None = None) -> MessageStream:
        """Start an agent thought streamed in chunks."""
        return MessageStream(self, thought=True, message_id=message_id)

    async def plan(self, entries: Sequence[PlanEntry], *, plan_id: str = "plan") -> None:
        """Send the complete entry list of a plan (R76)."""
        await self.send(PlanUpdate(plan=PlanItems(plan_id=plan_id, entries=list(entries))))

    async def usage(self, used: int, size: int, **fields: Any) -> None:
        """Report context-window usage (``cost`` may be passed as a keyword)."""
        await self.send(UsageUpdate(used=used, size=size, **fields))

    async def notice(self, title: str, *, severity: str = "info", description: str | None = None) -> None:
        """Show a live, fire-and-forget notice (never needed for correctness, R78)."""
        fields: dict[str, Any] = {"severity": severity, "title": title}
        if description is not None:
            fields["description"] = description
        await self.send(Notice(**fields))

    async def update_info(self, **fields: Any) -> None:
        """Patch session metadata (``title``, ``updated_at``, ``meta``); omitted fields stay."""
        if "title" in fields:
            self.record.title = fields["title"]
        if fields.get("updated_at"):
            self.record.updated_at = fields["updated_at"]
        await self.send(SessionInfoUpdate(**fields))

    async def update_config_options(self, options: Sequence[SessionConfigOption]) -> None:
        """Replace the session's config options and tell the client (complete list, R51)."""
        self.config_options = options
        await self.send(ConfigOptionUpdate(config_options=list(options)))

    async def update_available_commands(self, commands: Sequence[AvailableCommand]) -> None:
        """Replace the session's slash commands and tell the client (complete list, R51)."""
        self.available_commands = commands
        await self.send(AvailableCommandsUpdate(available_commands=list(commands)))

    async def update_tool_call(self, tool_call_id: str, **fields: Any) -> None:
        """Create or patch a tool call; only the fields passed are sent (R71)."""
        await self.send(ToolCallUpdate(tool_call_id=tool_call_id, **fields))

    async def tool_call_content(self, tool_call_id: str, content: Any) -> None:
        """Append one content item to a tool call."""
        await self.send(ToolCallContentChunk(tool_call_id=tool_call_id, content=content))

    # -- permission ------------------------------------------------------------------

    async def request_permission(
        self,
        title: str,
        options: Sequence[PermissionOption],
        *,
        subject: Any = None,
        description: str | None = None,
        on_behalf_of: Entity | None = None,
        scopes: set[anyio.CancelScope] | None = None,
    ) -> PermissionOutcome:
        """Ask the user; returns the typed outcome (only ``outcome.allowed`` permits).

        From foreground work the session reports ``requires_action`` while the answer is
        pending and ``running`` after (R59, R60), and ``session/cancel`` withdraws the
        request with ``$/cancel_request`` so it resolves as not approved (R66, R67).
        On behalf of listed background work (``ToolCall.request_permission``,
        ``Terminal.request_permission``) the state does not change (R61) and a snapshot
        listing the item goes out first (R110).
        """
        if not options:
            raise ValueError("a permission request needs at least one option")
        ids = [o.option_id for o in options]
        if len(set(ids)) != len(ids):
            raise ValueError("permission option ids must be unique")
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")
        fields: dict[str, Any] = {"session_id": self.id, "title": title, "options": list(options)}
        if subject is not None:
            fields["subject"] = subject
        if description is not None:
            fields["description"] = description
        params = RequestPermissionRequest(**fields)
        if isinstance(subject, ToolCallPermissionSubject):
            self.background.check(subject.tool_call)
        background = on_behalf_of is not None and on_behalf_of.detached and not on_behalf_of.final
        if background and self.background.version != self._last_version:
            self.repeat_state()  # R110: the client sees the item listed before the request
        if background:
            if isinstance(subject, ToolCallPermissionSubject):
                self.background.observe(subject.tool_call)
            return await self._background_request(params, options, scopes)
        foreground = not background and _FOREGROUND.get() is self
        if foreground:
            self._blocked += 1
            if self._blocked == 1 and self._state == "running":
                self._set_state("requires_action")
        try:
            if isinstance(subject, ToolCallPermissionSubject):
                self.background.observe(subject.tool_call)  # R82: the subject patches the tool call
            result = await self._conn.request("session/request_permission", params)
        except RequestError:
            return NOT_APPROVED
        finally:
            if foreground:
                self._blocked -= 1
                scope = self._fg_scope
                still_working = scope is not None and not scope.cancel_called
                if self._blocked == 0 and self._state == "requires_action" and still_working:
                    self._set_state("running")
        return read_outcome(result, options)

    async def _background_request(
        self, params: RequestPermissionRequest, options: Sequence[PermissionOption],
        scopes: set[anyio.CancelScope] | None,
    ) -> PermissionOutcome:
        """A request owned by listed work, not by the task asking: ``session/cancel`` of a
        foreground turn that awaits it leaves it open (R107); it is withdrawn when the work
        ends or the session closes."""
        done = anyio.Event()
        answer: list[Any] = []
        scope = anyio.CancelScope()

        async def ask() -> None:
            try:
                with scope, contextlib.suppress(RequestError):
                    answer.append(await self._conn.request("session/request_permission", params))
            finally:
                done.set()

        if scopes is not None:
            scopes.add(scope)
        self.spawn(ask)
        try:
            await done.wait()
        finally:
            if scopes is not None and done.is_set():
                scopes.discard(scope)
        return read_outcome(answer[0], options) if answer else NOT_APPROVED

    # -- tool calls, terminals, scheduled work --------------------------------------------

    async def start_tool_call(
        self,
        title: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        status: str = "pending",
        detach: bool | None = None,
        **fields: Any,
    ) -> ToolCall:
        """Announce a new tool call (``title``, ``kind``, ``name``: R74) and return its handle.

        Extra keyword fields (``raw_input``, ``content``, ``locations``, ``meta``) go into
        the announcing update. ``detach=True`` makes it background work at once; by default
        a tool call started by foreground work belongs to it, and one started by background
        work is background work.
        """
        announce: dict[str, Any] = {"title": title, "status": status, **fields}
        if kind is not None:
            announce["kind"] = kind
        if name is not None:
            announce["name"] = name
        tool_call_id = new_id("call")
        self.emit(ToolCallUpdate(tool_call_id=tool_call_id, **announce), detach=detach)
        entity = self.background.entity("tool_call", tool_call_id)
        tool = entity.handle = ToolCall(self, entity)
        await self.drain_backpressure()
        return tool

    async def start_terminal(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        tool_call: ToolCall | None = None,
        ends_tool_call: bool = False,
        detach: bool | None = None,
        cancellable: bool = True,
        grace: float = DEFAULT_GRACE,
        size: tuple[int, int] | None = None,
        tail_limit: int | None = None,
        flush_bytes: int = 64 * 1024,
        flush_interval: float = 0.02,
    ) -> Terminal:
        """Start a process in its own process group and announce it as a terminal.

        A string runs under ``sh -c``; a sequence is an argv. ``cwd`` defaults to the
        session's (it must be absolute, R34); ``env`` is added to the agent's environment.
        With ``tool_call``, the terminal is added to that tool call's content, and with
        ``ends_tool_call`` the process's exit also ends that tool call (``completed`` on exit
        code 0, else ``failed``) in the same step (see :meth:`ToolCall.finish_with`). Output is
        streamed as it comes; the exit is reported after the last byte. ``detach=True``
        starts it as background work; by default foreground work owns a terminal it starts
        (until :meth:`Terminal.detach`) and one started by background work is background work.
        ``cancellable`` offers ``terminal/cancel`` (SIGTERM, then
        SIGKILL after ``grace`` seconds). ``tail_limit`` is how much output is retained for
        replay (default ``limits.terminal_output_bytes``; older output is dropped from the
        retained tail, never from the live stream).

        Raises :class:`~acp_agent.errors.LimitExceededError`, before anything is sent or
        started, when ``limits.max_processes`` processes already run on this connection or
        a new listed item would go past ``limits.max_listed_items``.
        """
        if tool_call is not None and tool_call.session is not self:
            raise ValueError("that tool call belongs to another session")
        if tool_call is not None and tool_call.final:
            raise ToolCallStateError(f"tool call {tool_call.id} has ended; it cannot take a terminal")
        text, argv = command_text(command)
        cwd = cwd or self.cwd
        if not os.path.isabs(cwd):
            raise ValueError("a terminal's cwd must be an absolute path")
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")
        if tail_limit is None:
            tail_limit = self.limits.terminal_output_bytes
        terminal_id = new_id("term")
        if detach is None:
            detach = _FOREGROUND.get() is not self  # started by background work: background work
        if detach:
            shadow = Entity("terminal", terminal_id, announced=True, detached=True)
            changes: dict[Entity, dict[str, Any]] = {}
            if tool_call is not None:
                changes[tool_call._entity] = {"terminals": [*tool_call._entity.terminals, terminal_id]}
                if not tool_call.final:
                    changes[tool_call._entity]["detached"] = True
            self.check_list_room(changes, [shadow])
        announce: dict[str, Any] = {"command": text, "cwd": cwd}
        if cancellable:
            announce["capabilities"] = TERMINAL_CANCEL
        if size is not None:
            announce["size"] = TerminalSize(cols=size[0], rows=size[1])
        self._processes.acquire(terminal_id)  # raises at max_processes, before anything is sent
        entity = self.background.entity("terminal", terminal_id)
        terminal = Terminal(self, entity, text, cwd, grace)
        entity.handle = terminal
        if tool_call is not None:
            terminal.tool_call_id = tool_call.id
            if ends_tool_call:
                tool_call.finish_with(terminal)  # registered before the process can exit
        try:
            with self.batch():  # never held across an await: other tasks' list changes must not wait on it
                self.emit(TerminalUpdate(terminal_id=terminal_id, **announce), detach=detach)
                if tool_call is not None:
                    self.emit(ToolCallContentChunk(tool_call_id=tool_call.id, content=TerminalContent(
                        terminal_id=terminal_id)))
                    if entity.detached and not tool_call.final:
                        self.set_detached(tool_call._entity, True)
        except BaseException:
            self._processes.release(terminal_id)  # nothing was started
            raise
        try:
            await terminal._start(argv, env, tail_limit, flush_bytes, flush_interval)
        except BaseException:
            self._processes.release(terminal_id)
            self.emit(TerminalUpdate(terminal_id=terminal_id, exit_status=TerminalExitStatus(
                exit_code=None, signal=None), **({"capabilities": None} if cancellable else {})))
            raise
        if cancellable:
            entity.cancel = terminal._request_cancel
        await self.drain_backpressure()
        return terminal

    async def schedule(
        self,
        delay: float,
        work: Callable[[], Awaitable[StopReason | None]],
        *,
        title: str = "Wake up",
        name: str | None = "schedule_wakeup",
        repeat: float | None = None,
    ) -> ToolCall:
        """Schedule foreground work: a tool call that stays ``pending`` (listed) until it fires.

        One-shot: after ``delay`` seconds the tool call completes and ``work`` starts as new
        foreground work in the same step (R95). With ``repeat``, it fires every ``repeat``
        seconds after the first and stays ``pending`` until cancelled. Either way it offers
        ``tool_call/cancel``.
        """
        tool = await self.start_tool_call(title, kind="other", name=name, detach=True,
                                          capabilities=TOOL_CALL_CANCEL)
        scope = tool.own_scope()

        async def timer() -> None:
            with scope:
                await anyio.sleep(delay)
                while repeat is not None:
                    self.start_foreground(work, now=True)
                    await anyio.sleep(repeat)
            if self._closing or tool.final:
                return
            if scope.cancel_called:
                await tool.cancel()
            else:
                await tool.complete(follow_up=work)

        self.spawn(timer)
        return tool

    async def spawn_subagent(
        self,
        title: str,
        *,
        description: str | None = None,
        cancellable: bool = True,
        detach: bool | None = True,
    ) -> Subagent:
        """Create a child session owned by this one and announce it (R79).

        The child starts ``idle``; give it work with :meth:`Subagent.start`. ``cancellable``
        advertises ``capabilities.cancel`` (the client may ``session/cancel`` the child).
        ``detach=False`` keeps it foreground work (unlisted, cancelled with this session's
        foreground work) until :meth:`Subagent.detach`.
        """
        record = SessionRecord(session_id=new_id("sess"), cwd=self.cwd,
                               additional_directories=list(self.additional_directories))
        child = Session(self._conn, record, prompt_handler=self._prompt_handler, index=self._index, parent=self,
                        limits=self.limits, processes=self._processes)
        announce: dict[str, Any] = {"session_id": child.id, "title": title,
                                    "state": child._snapshot("idle", None, None)}
        if description is not None:
            announce["description"] = description
        if cancellable:
            announce["capabilities"] = SubagentSessionCapabilities(cancel=SessionCancelCapabilities())
        self.emit(SubagentUpdate(**announce), detach=detach)
        entity = self.background.entity("subagent", child.id)
        entity.handle = child
        if cancellable:
            entity.cancel = child.cancel
        await self.task_group.start(child._serve)
        self.children.append(child)
        self._index[child.id] = child
        await self.drain_backpressure()
        return Subagent(self, child, entity)

    async def _serve(self, *, task_status: TaskStatus[None]) -> None:
        _FOREGROUND.set(None)
        _BATCHING.set(())
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run, tg)
            task_status.started()

    # -- tasks ---------------------------------------------------------------------------

    @property
    def task_group(self) -> TaskGroup:
        """The session's task group: work in it outlives turns and ends with the session."""
        if self._tg is None:
            raise SessionClosedError(f"session {self.id} is not running")
        return self._tg

    @property
    def closing(self) -> bool:
        """True once ``session/close`` (or the end of the connection) began."""
        return self._closing

    def spawn(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``func(*args)`` as background work of this session (not foreground work)."""

        async def background() -> None:
            _FOREGROUND.set(None)
            _BATCHING.set(())  # a batch never spans tasks
            try:
                await func(*args)
            except SessionClosedError:
                pass
            except Exception:
                logger.exception("acp: background task of session %s failed", self.id)

        self.task_group.start_soon(background)

    # -- foreground state ----------------------------------------------------------

    def _snapshot(self, state: ForegroundState, stop_reason: StopReason | None, error: Error | None) -> BaseModel:
        """The one builder of this session's ``state_update`` snapshots.

        Every snapshot carries the complete ``background`` list computed from what was
        already sent (R91), so it can only name announced, live items (R93, R94).
        """
        listing = self.background.listing()
        self._last_version = self.background.version
        self._list_dirty = False
        if state == "running":
            return RunningStateUpdate(background=listing)
        if state == "requires_action":
            return RequiresActionStateUpdate(background=listing)
        fields: dict[str, Any] = {"background": listing}
        if stop_reason is not None:
            fields["stop_reason"] = stop_reason
        if error is not None:
            fields["error"] = error
        return IdleStateUpdate(**fields)

    def _set_state(
        self, state: ForegroundState, stop_reason: StopReason | None = None, error: Error | None = None
    ) -> None:
        """Record and report a foreground transition (the only sender of ``state_update``)."""
        self._state = state
        self._publish(self._snapshot(state, stop_reason, error))
        self._update_idle()

    def _update_idle(self) -> None:
        quiet = self._state == "idle" and not self._jobs
        if quiet and not self._idle.is_set():
            self._idle.set()
        elif not quiet and self._idle.is_set():
            self._idle = anyio.Event()

    def repeat_state(self) -> None:
        """Re-send the current state without a stop reason (R62: not a new completion)."""
        self._publish(self._snapshot(self._state, None, None))

    def _publish(self, snapshot: BaseModel) -> None:
        """Send a snapshot, and mirror it into the parent's ``subagent_update`` for a child (R80)."""
        self._send_nowait(snapshot)
        parent = self.parent
        if parent is not None and not parent._closing and not self._closed:
            parent.emit(SubagentUpdate(session_id=self.id, state=snapshot))

    async def wait_idle(self) -> None:
        """Wait until the session has no foreground work, running or queued."""
        while not (self._state == "idle" and not self._jobs):
            await self._idle.wait()

    def _list_changed(self) -> None:
        """Entity state changed: re-send the state if the list differs from the last one sent (R92)."""
        if self in _BATCHING.get():
            self._list_dirty = True
        elif self.background.version != self._last_version:
            self.repeat_state()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Coalesce list changes this task makes inside the block into at most one snapshot.

        Entity updates still go out at once, in order; only the repeated ``state_update``
        waits until the block ends, so it can never precede an update it depends on. The
        batch belongs to the calling task: list changes made by other tasks meanwhile are
        re-sent as usual.
        """
        outer = _BATCHING.get()
        if self in outer:
            yield
            return
        token = _BATCHING.set((*outer, self))
        try:
            yield
        finally:
            _BATCHING.reset(token)
            if self._list_dirty:
                self._list_dirty = False
                self._list_changed()

    def set_detached(self, entity: Entity, detached: bool, *, also_tool_call: str | None = None) -> None:
        """Move an item between foreground and background work (and re-send the list).

        Raises :class:`~acp_agent.errors.LimitExceededError` (changing nothing) if that would
        grow the list past ``limits.max_listed_items``.
        """
        if detached:
            changes: dict[Entity, dict[str, Any]] = {entity: {"detached": True}}
            if also_tool_call is not None:
                tool = self.background.get("tool_call", also_tool_call)
                if tool is not None and not tool.final:
                    changes[tool] = {"detached": True}
            self.check_list_room(changes)
        with self.batch():
            self._list_dirty |= self.background.set_detached(entity, detached)
            if also_tool_call is not None:
                tool = self.background.get("tool_call", also_tool_call)
                if tool is not None and not tool.final:
                    self._list_dirty |= self.background.set_detached(tool, detached)

    # -- foreground work -------------------------------------------------------------

    def start_foreground(self, work: Callable[[], Awaitable[StopReason | None]], *, now: bool = False) -> None:
        """Queue agent-initiated foreground work (no prompt); it runs after current work.

        ``work`` returns the stop reason (``None`` means ``end_turn``). The session reports
        ``running`` when it starts and ``idle`` with the stop reason when it ends. With
        ``now``, ``running`` is reported immediately (in the current snapshot batch).
        """
        if self._closing or self._winding_down:
            raise SessionClosedError(f"session {self.id} is closed")
        self._enqueue(ForegroundJob(run=work))
        if now and self._state == "idle":
            self._set_state("running")

    def enqueue_prompt(self, prompt: list[ContentBlock]) -> ForegroundJob:
        """Hold a prompt until the worker inserts it (arrival order, R56)."""
        if self._closing:
            raise RequestError.session_not_found(self.id)
        if self._winding_down:
            raise RequestError.request_cancelled("the connection is shutting down")
        job = ForegroundJob(prompt=prompt)
        if self._state == "idle" and not self._jobs and not self._job_active and self._tg is not None:
            self._assign(job)  # nothing runs before it: inserted now, so it can be answered at once
        self._enqueue(job)
        return job

    def _enqueue(self, job: ForegroundJob) -> None:
        self._jobs.append(job)
        self._job_ready.set()
        self._update_idle()

    def withdraw(self, job: ForegroundJob, error: RequestError | None = None) -> bool:
        """Take a held prompt back before insertion; returns False if it was already inserted."""
        if job.message_id is not None:
            return False
        with contextlib.suppress(ValueError):
            self._jobs.remove(job)
        self._update_idle()
        job.rejected = error or RequestError.request_cancelled()
        job.inserted.set()
        return True

    def cancel(self) -> None:
        """``session/cancel``: answer held prompts ``-32800`` and cancel the foreground work."""
        for job in list(self._jobs):
            if job.prompt is not None:
                self.withdraw(job)
        # Inserted prompts (already answered with their id) still get their echo and end
        # cancelled; queued agent-initiated work has not started and is dropped.
        inserted = [job for job in self._jobs if job.message_id is not None]
        dropped = len(inserted) != len(self._jobs)
        for job in inserted:
            job.cancelled = True
        self._jobs = deque(inserted)
        self._update_idle()
        if self._fg_scope is not None:
            self._fg_scope.cancel()
        elif self._job_active:
            self._cancelled_late = True  # the job is finishing up: it ends as cancelled (R68)
        elif dropped and self._state != "idle":
            # Follow-up work already reported `running` but never started: it ends here.
            self._set_state("idle", "cancelled")

    async def run(self, task_group: TaskGroup) -> None:
        """The session's worker: runs queued foreground jobs one at a time until closed."""
        self._tg = task_group
        try:
            while True:
                while not self._jobs:
                    await self._job_ready.wait()
                    self._job_ready = anyio.Event()
                job = self._jobs.popleft()
                await self._run_job(job)
        finally:
            self._stopped.set()

    async def _run_job(self, job: ForegroundJob) -> None:
        self._job_active = True
        self._cancelled_late = False
        self._fg_done = anyio.Event()
        scope = anyio.CancelScope()
        self._fg_scope = scope
        token = _FOREGROUND.set(self)
        stop: StopReason | None = None
        error: Error | None = None
        try:
            if job.prompt is not None:
                await self._insert(job)
            if self._state != "running":
                self._set_state("running")
            with scope:
                try:
                    if job.cancelled:
                        stop = "cancelled"
                    elif job.prompt is not None:
                        stop = await self._prompt_handler(self, job.prompt)
                    elif job.run is not None:
                        stop = await job.run()
                except Exception as exc:
                    if scope.cancel_called:
                        stop = "cancelled"  # R69: aborting is a cancellation, never an error
                    else:
                        logger.exception("acp: foreground work of session %s failed", self.id)
                        stop = "error"
                        error = Error(code=-32603, message=_short(exc))
            if scope.cancel_called:
                stop = "cancelled"
            stop = _checked_stop_reason(stop)
        except BaseException:
            stop = "cancelled"  # the session itself is being torn down
            raise
        finally:
            _FOREGROUND.reset(token)
            self._fg_scope = None
            self._blocked = 0
            with anyio.CancelScope(shield=True):
                await self._end_foreground_items(stop or "cancelled")
            if self._cancelled_late:
                stop, error = "cancelled", None
            self._set_state("idle", stop or "end_turn", error)
            self._job_active = False
            self._fg_done.set()

    async def _end_foreground_items(self, stop: StopReason) -> None:
        """Finalize what the ended foreground work left unfinished (R68, R108).

        Detached (listed) work is untouched. Unfinished foreground tool calls get a final
        status, foreground processes are stopped and report their exit, all before ``idle``.
        """
        status = "failed" if stop == "error" else "cancelled"
        terminals: list[Terminal] = []
        children: list[Session] = []
        for entity in list(self.background.entities.values()):
            if entity.detached or entity.final or not entity.announced:
                continue
            if entity.kind == "tool_call" and isinstance(entity.handle, ToolCall):
                entity.handle.abandon(status)  # stops its work too
            elif entity.kind == "tool_call":
                fields: dict[str, Any] = {"status": status}
                if entity.cancel_advertised:
                    fields["capabilities"] = None
                self.emit(ToolCallUpdate(tool_call_id=entity.id, **fields))
            elif entity.kind == "terminal" and isinstance(entity.handle, Terminal):
                terminals.append(entity.handle)
            elif entity.kind == "subagent" and isinstance(entity.handle, Session):
                children.append(entity.handle)  # a child this work waited on is cancelled with it
        if terminals or children:
            with anyio.move_on_after(DEFAULT_GRACE + 2):
                async with anyio.create_task_group() as tg:
                    for terminal in terminals:
                        tg.start_soon(_stop_and_wait, terminal)
                    for child in children:
                        child.cancel()
                        tg.start_soon(child.wait_idle)  # its final updates precede our idle (R68)

    def _assign(self, job: ForegroundJob) -> None:
        """Insert a prompt: give it its id and record it (the echo goes out after the answer)."""
        assert job.prompt is not None
        self.record.updated_at = _now()
        job.echo = UserMessage(message_id=new_id("msg_user"), content=job.prompt)
        self.record.history.record(job.echo)
        job.inserted.set()

    async def _insert(self, job: ForegroundJob) -> None:
        """Insert a held prompt if not yet done, let its request answer, then echo it (R52, R53)."""
        assert job.prompt is not None
        if job.echo is None:
            self._assign(job)
        assert job.echo is not None
        # The request answers the moment its handler returns; waiting for that keeps the
        # wire order fixed: answer, user_message, running.
        if not job.answered.is_set():
            with anyio.CancelScope(shield=True):
                await job.answered.wait()
        self._send_nowait(job.echo)

    # -- closing -------------------------------------------------------------------

    async def wind_down(self, deadline: float) -> None:
        """Stop all work and report a final status for every unfinished item, by ``deadline``.

        For the end of the connection: foreground work is cancelled as by ``session/cancel``,
        unfinished tool calls are reported ``cancelled`` (their work is cancelled with them),
        every process is stopped (SIGTERM, then SIGKILL after its grace, shortened to fit
        the deadline) and its terminal reports its ``exitStatus``. Whatever has not ended by
        ``deadline`` (agent code that ignores cancellation, a process whose output the client
        is not reading) is reported ended anyway: processes are killed, a terminal whose exit
        is unknown reports ``{"exitCode": null, "signal": null}``, and foreground work still
        running gets its ``idle`` / ``cancelled`` snapshot. The session stays open.
        """
        self._winding_down = True
        for child in list(self.children):
            await child.wind_down(deadline)
        grace = max(0.0, min(DEFAULT_GRACE, (deadline - anyio.current_time()) / 2))
        terminals: list[Terminal] = []
        backed: dict[str, list[Terminal]] = {}  # tool call id -> the terminals it started
        for entity in list(self.background.entities.values()):
            if entity.kind == "terminal" and isinstance(entity.handle, Terminal):
                terminal = entity.handle
                if terminal.tool_call_id is not None:
                    backed.setdefault(terminal.tool_call_id, []).append(terminal)
                if not entity.final and entity.announced:
                    terminal.grace = min(terminal.grace, grace)
                    terminals.append(terminal)
        with self.batch():
            self.cancel()
            self._end_tool_calls(backed, waiting=True)
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time()), shield=True):
            async with anyio.create_task_group() as tg:
                for terminal in terminals:
                    tg.start_soon(_stop_and_wait, terminal)
                tg.start_soon(self._foreground_done)
        with self.batch():
            for entity in list(self.background.entities.values()):  # started meanwhile too
                if entity.kind == "terminal" and isinstance(entity.handle, Terminal) and entity.announced:
                    entity.handle._give_up()
            self._end_tool_calls(backed, waiting=False)
            if self._job_active and self._state != "idle":
                logger.warning("acp: foreground work of session %s ignored its cancellation", self.id)
                self._set_state("idle", "cancelled")

    def _end_tool_calls(self, backed: dict[str, list[Terminal]], *, waiting: bool) -> None:
        """Report unfinished tool calls ended: ``cancelled``, or by their process's exit when a
        terminal stands for them (as any other exit would end them). With ``waiting``, those
        whose process still runs are left for after it stopped."""
        for entity in list(self.background.entities.values()):
            if entity.final or not entity.announced or entity.kind != "tool_call":
                continue
            ends = [t.exit_status for t in backed.get(entity.id, ())]
            if any(status is None for status in ends) and waiting:
                continue
            exits = [status for status in ends if status is not None]
            if exits and isinstance(entity.handle, ToolCall):
                status = exits[-1]
                entity.handle.end_now("completed" if status.exit_code == 0 else "failed",
                                      raw_output={"exitCode": status.exit_code, "signal": status.signal})
            elif isinstance(entity.handle, ToolCall):
                entity.handle.abandon("cancelled")
            else:
                fields: dict[str, Any] = {"status": "cancelled"}
                if entity.cancel_advertised:
                    fields["capabilities"] = None
                self.emit(ToolCallUpdate(tool_call_id=entity.id, **fields))

    async def _foreground_done(self) -> None:
        while self._job_active or self._jobs:
            await self._fg_done.wait()
            await anyio.sleep(0)

    async def close(self, timeout: float = 5.0, *, finalize: bool = False) -> None:
        """Stop everything the session runs; afterwards nothing more is sent for it (R41-R45).

        Held prompts are answered ``-32800``; foreground work is cancelled and its
        ``idle`` / ``cancelled`` snapshot goes out; pending requests of the session are
        withdrawn with ``$/cancel_request`` as their tasks are cancelled. With ``finalize``
        (the end of the connection) every unfinished item is first stopped and reported
        ended (see :meth:`wind_down`), all within ``timeout`` seconds.
        """
        if self._closing:
            await self._stopped.wait()
            return
        if finalize:
            deadline = anyio.current_time() + timeout
            await self.wind_down(deadline)
            timeout = max(0.0, deadline - anyio.current_time())
        self._closing = True
        for child in list(self.children):
            # Closing a parent ends its children without further notifications (§11.15).
            child._closed = True
            await child.close(timeout)
        self.cancel()
        with anyio.move_on_after(timeout, shield=True):
            await self._fg_done.wait()
            await self.wait_idle()  # inserted prompts still get their echo and end cancelled
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            with anyio.move_on_after(timeout, shield=True):
                await self._stopped.wait()
        self._closed = True
        for entity in self.background.entities.values():
            if entity.kind == "terminal":
                self._processes.release(entity.id)  # its process group was stopped with the task group
        self._winding_down = True
        self.background.clear()
        self._index.pop(self.id, None)
        if self.parent is not None and self in self.parent.children:
            self.parent.children.remove(self)


_ENTITY_UPDATES: Final = (ToolCallUpdate, ToolCallContentChunk, TerminalUpdate, SubagentUpdate)
_STATE_UPDATES: Final = (RunningStateUpdate, RequiresActionStateUpdate, IdleStateUpdate)

_STOP_REASONS: Final = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"})


def _checked_stop_reason(stop: Any) -> StopReason | None:
    """A hook's return value as a stop reason: known values and ``_custom`` ones (R84) only."""
    if stop is None or (isinstance(stop, str) and (stop in _STOP_REASONS or stop.startswith("_"))):
        return stop
    logger.warning("acp: %r is not a stop reason (known values or _custom); reporting end_turn", stop)
    return "end_turn"


async def _stop_and_wait(terminal: Terminal) -> None:
    await terminal.cancel()
    await terminal.wait()


def _blocks(content: str | Sequence[ContentBlock]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    return list(content)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
