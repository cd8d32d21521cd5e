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
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import orjson
from anyio.abc import TaskGroup
from pydantic import BaseModel

from .errors import RequestError, SessionClosedError
from .history import History
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
    SessionConfigOption,
    SessionInfoUpdate,
    TextContent,
    ToolCallContentChunk,
    ToolCallUpdate,
    UsageUpdate,
    UserMessage,
)

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
class _Job:
    """One unit of foreground work waiting for the worker."""

    run: Callable[[], Awaitable[StopReason | None]] | None = None
    prompt: list[ContentBlock] | None = None
    inserted: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)
    message_id: str | None = None
    rejected: RequestError | None = None


class MessageStream:
    """An agent message (or thought) streamed as chunks that share one ``messageId``."""

    def __init__(self, session: Session, *, thought: bool = False, message_id: str | None = None) -> None:
        self.session = session
        self.message_id = message_id or new_id("thought" if thought else "msg")
        self._chunk = AgentThoughtChunk if thought else AgentMessageChunk

    async def write(self, content: str | ContentBlock) -> None:
        """Append one piece of text (or one content block) to the message."""
        block = TextContent(text=content) if isinstance(content, str) else content
        await self.session.send(self._chunk(message_id=self.message_id, content=block))


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
    ) -> None:
        self._conn = connection
        self.record = record
        self._prompt_handler = prompt_handler
        self._state: ForegroundState = "idle"
        self._blocked = 0  # foreground permission requests in flight
        self._jobs: deque[_Job] = deque()
        self._job_ready = anyio.Event()
        self._fg_scope: anyio.CancelScope | None = None
        self._fg_done = anyio.Event()
        self._fg_done.set()
        self._tg: TaskGroup | None = None
        self._stopped = anyio.Event()
        self._closing = False
        self._closed = False
        self._prefix = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + orjson.dumps(record.session_id)
            + b',"update":'
        )
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
        """Send one ``session/update`` for this session (any variant but ``state_update``)."""
        self._check_sendable(update)
        self.record.history.record(update)
        await self._conn.writer.send(self._frame(update))

    def _frame(self, update: BaseModel) -> bytes:
        return (
            self._prefix
            + update.__pydantic_serializer__.to_json(update, by_alias=True, exclude_unset=True)
            + b"}}\n"
        )

    def _check_sendable(self, update: BaseModel) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id} is closed")
        if getattr(update, "session_update", None) == "state_update":
            raise ValueError("the session reports its own state; agent code never sends state_update")

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
    ) -> PermissionOutcome:
        """Ask the user; returns the typed outcome (only ``outcome.allowed`` permits).

        Called from foreground work, the session reports ``requires_action`` while the
        answer is pending and ``running`` after (R59, R60); ``session/cancel`` withdraws
        the request with ``$/cancel_request`` and it resolves as not approved (R66, R67).
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
        foreground = _FOREGROUND.get() is self
        if foreground:
            self._blocked += 1
            if self._blocked == 1 and self._state == "running":
                self._set_state("requires_action")
        try:
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

    # -- foreground state ----------------------------------------------------------

    def _snapshot(self, state: ForegroundState, stop_reason: StopReason | None, error: Error | None) -> BaseModel:
        """The one builder of this session's ``state_update`` snapshots."""
        if state == "running":
            return RunningStateUpdate()
        if state == "requires_action":
            return RequiresActionStateUpdate()
        fields: dict[str, Any] = {}
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
        self._send_nowait(self._snapshot(state, stop_reason, error))

    def repeat_state(self) -> None:
        """Re-send the current state without a stop reason (R62: not a new completion)."""
        self._send_nowait(self._snapshot(self._state, None, None))

    # -- foreground work -------------------------------------------------------------

    def start_foreground(self, work: Callable[[], Awaitable[StopReason | None]]) -> None:
        """Queue agent-initiated foreground work (no prompt); it runs after current work.

        ``work`` returns the stop reason (``None`` means ``end_turn``). The session reports
        ``running`` when it starts and ``idle`` with the stop reason when it ends.
        """
        if self._closing:
            raise SessionClosedError(f"session {self.id} is closed")
        self._enqueue(_Job(run=work))

    def enqueue_prompt(self, prompt: list[ContentBlock]) -> _Job:
        """Hold a prompt until the worker inserts it (arrival order, R56)."""
        if self._closing:
            raise RequestError.session_not_found(self.id)
        job = _Job(prompt=prompt)
        self._enqueue(job)
        return job

    def _enqueue(self, job: _Job) -> None:
        self._jobs.append(job)
        self._job_ready.set()

    def withdraw(self, job: _Job, error: RequestError | None = None) -> bool:
        """Take a held prompt back before insertion; returns False if it was already inserted."""
        if job.message_id is not None:
            return False
        with contextlib.suppress(ValueError):
            self._jobs.remove(job)
        job.rejected = error or RequestError.request_cancelled()
        job.inserted.set()
        return True

    def cancel(self) -> None:
        """``session/cancel``: answer held prompts ``-32800`` and cancel the foreground work."""
        for job in list(self._jobs):
            if job.prompt is not None:
                self.withdraw(job)
        self._jobs.clear()  # queued agent-initiated work has not started: drop it too
        if self._fg_scope is not None:
            self._fg_scope.cancel()

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

    async def _run_job(self, job: _Job) -> None:
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
                    if job.prompt is not None:
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
        except BaseException:
            stop = "cancelled"  # the session itself is being torn down
            raise
        finally:
            _FOREGROUND.reset(token)
            self._fg_scope = None
            self._blocked = 0
            self._set_state("idle", stop or "end_turn", error)
            self._fg_done.set()

    async def _insert(self, job: _Job) -> None:
        """Insert a held prompt: give it an id, let its request answer, then echo it (R52, R53)."""
        assert job.prompt is not None
        job.message_id = new_id("msg_user")
        self.record.updated_at = _now()
        update = UserMessage(message_id=job.message_id, content=job.prompt)
        self.record.history.record(update)
        job.inserted.set()
        # The request answers the moment its handler returns; waiting for that keeps the
        # wire order fixed: answer, user_message, running.
        with anyio.CancelScope(shield=True):
            await job.answered.wait()
        self._send_nowait(update)

    # -- closing -------------------------------------------------------------------

    async def close(self, timeout: float = 5.0) -> None:
        """Stop everything the session runs; afterwards nothing more is sent for it (R41-R45).

        Held prompts are answered ``-32800``; foreground work is cancelled and its
        ``idle`` / ``cancelled`` snapshot goes out; pending requests of the session are
        withdrawn with ``$/cancel_request`` as their tasks are cancelled.
        """
        if self._closing:
            await self._stopped.wait()
            return
        self._closing = True
        self.cancel()
        with anyio.move_on_after(timeout, shield=True):
            await self._fg_done.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            with anyio.move_on_after(timeout, shield=True):
                await self._stopped.wait()
        self._closed = True


def _blocks(content: str | Sequence[ContentBlock]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    return list(content)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
