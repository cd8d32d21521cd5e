"""The runtime side of a session: the small interface handles and the runtime work with.

A `SessionCore` ties together the parts of one session: its `SessionSink`
(the one path to the wire), its [`BackgroundRegistry`][acp_agent.BackgroundRegistry], its
`StatePublisher` (snapshots) and its `Turns`
(foreground work). Entity updates pass `SessionCore.emit`, which checks them against the
registry before anything is sent (R97, ``max_listed_items``) and re-sends the state when the
list changed after they went out. Closing and winding down (the end of the connection) live
here too, since they end every kind of item. The author-facing [`Session`][acp_agent.Session]
wraps a core and adds nothing to these rules.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from .._util.ids import new_id
from .._util.processes import DEFAULT_TERMINATE_GRACE
from .._wire.connection import Connection
from ..errors import InvalidArgumentError, NotInTurnError, SessionClosedError
from ..history import finalize_live_items
from ..limits import Limits, ProcessSlots, limit_exceeded
from ..peer import ClientPeer
from ..records import SessionRecord
from ..schema import (
    AgentMessage,
    AgentThought,
    ContentBlock,
    Error,
    IdleStateUpdate,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    SessionCancelCapabilities,
    SessionInfoUpdate,
    SessionMessage,
    SubagentSessionCapabilities,
    SubagentUpdate,
    Terminal,
    TerminalExitStatus,
    TerminalUpdate,
    TextContent,
    ToolCallCancelCapabilities,
    ToolCallCapabilities,
    ToolCallContentChunk,
    ToolCallUpdate,
)
from .registry import FINAL_STATUSES, BackgroundRegistry, ChildItem, Entity, Kind, TerminalItem, ToolCallItem
from .sink import SessionSink
from .snapshots import BATCHING, StatePublisher
from .turns import FOREGROUND, ForegroundJob, StopReason, Turns

if TYPE_CHECKING:
    from .keys import PromptKeys

__all__ = ["TOOL_CALL_CANCEL", "SessionCore", "SessionFactory", "as_blocks"]

logger = logging.getLogger(__name__)

_ENTITY_UPDATES: Final = (ToolCallUpdate, ToolCallContentChunk, TerminalUpdate, SubagentUpdate)
_STATE_UPDATES: Final = (RunningStateUpdate, RequiresActionStateUpdate, IdleStateUpdate)

TOOL_CALL_CANCEL: Final = ToolCallCapabilities(cancel=ToolCallCancelCapabilities())
"""A tool call's ``capabilities`` offering ``tool_call/cancel``."""


class SessionCore:
    """One session's runtime parts, and the operations on them that keep the rules."""

    def __init__(
        self,
        connection: Connection,
        record: SessionRecord,
        *,
        limits: Limits,
        processes: ProcessSlots,
        client: ClientPeer,
        factory: SessionFactory,
        parent: SessionCore | None = None,
        hold: bool = False,
    ) -> None:
        self.connection = connection
        self.factory = factory
        """The factory that made this session; it makes its children too."""
        self.facade: object = None
        """The author-facing object over this engine (a [`Session`][acp_agent.Session]), set by the factory's
        ``wrap``; the engine never looks at it."""
        self.client = client
        """The client of the connection the session lives on."""
        self.record = record
        self.limits = limits
        self.processes = processes
        """Terminal processes running on the connection (``max_processes``)."""
        self.parent = parent
        self.children: list[SessionCore] = []
        self.sink: SessionSink = SessionSink(connection.writer, record.session_id, record.history, hold=hold,
                                             parent=parent.sink if parent is not None else None)
        self.registry = BackgroundRegistry()
        self.snapshots = StatePublisher(self.registry, self.sink, self._mirror if parent is not None else None)
        self.turns = Turns(record.session_id, self.snapshots, self.sink, end_items=self._end_foreground_items,
                           end_now=self._end_foreground_now,
                           touched=record.touch)
        self.telemetry = connection.telemetry
        """Where this session's turns, tool calls and terminals are reported (the connection's; ``None``: off)."""
        if self.telemetry is not None:
            self.turns.telemetry, self.turns.child = self.telemetry, parent is not None
        self.on_closed: list[Callable[[], None]] = []
        """Called once the session closed."""
        self.persist: Callable[[], Awaitable[bool]] | None = None
        """Saves the session's record (whether it was saved); awaited when foreground work ends, before its
        ``idle``."""
        self.persist_now: Callable[[], bool] | None = None
        """Saves the session's record at once if the store can (``False``: `persist` must be awaited)."""
        self._tg: TaskGroup | None = None
        self._stopped = anyio.Event()
        self.closing = False
        """True once ``session/close`` (or the end of the connection) began."""

    @property
    def id(self) -> str:
        """The session id."""
        return self.record.session_id

    @property
    def closed(self) -> bool:
        """True once nothing more can be sent for the session."""
        return self.sink.closed

    def prompt_keys(self) -> PromptKeys[ForegroundJob]:
        """The session's idempotency keys, made on the first keyed prompt (a session never sent one does without:
        the spent keys are in ``record.prompt_keys`` either way)."""
        keys = self.turns.keys
        if keys is None:
            from .keys import PromptKeys

            keys = self.turns.keys = PromptKeys[ForegroundJob](self.record, limit=self.limits.idempotency_keys,
                                                               age=self.limits.idempotency_key_age)
        return keys

    # -- tasks -----------------------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None]) -> None:
        """Run the session's task group and foreground worker until the session closes."""
        FOREGROUND.set(None)
        BATCHING.set(())
        telemetry = self.telemetry
        if telemetry is not None:
            telemetry.sessions(1)
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._work, tg)
                task_status.started()
        finally:
            if telemetry is not None:
                telemetry.sessions(-1)

    async def _work(self, tg: TaskGroup) -> None:
        try:
            await self.turns.run(tg)
        finally:
            self._stopped.set()

    @property
    def task_group(self) -> TaskGroup:
        """The session's task group: work in it outlives turns and ends with the session."""
        if self._tg is None:
            raise SessionClosedError(f"session {self.id} is not running")
        return self._tg

    def spawn(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``func(*args)`` in the session's task group, as background work (not foreground)."""

        async def background() -> None:
            FOREGROUND.set(None)
            BATCHING.set(())  # a batch never spans tasks
            try:
                await func(*args)
            except SessionClosedError:
                pass
            except Exception:
                logger.exception("acp: background task of session %s failed", self.id)

        self.task_group.start_soon(background)

    # -- children --------------------------------------------------------------------------

    async def open_child(self, title: str, *, description: str | None = None, cancellable: bool = True,
                         detach: bool | None = True) -> tuple[SessionCore, Entity]:
        """Create a child session, announce it on this one (R79) and start it ``idle``.

        The child shares this session's connection, limits and client, and starts in this session's
        task group (it ends with it). ``cancellable`` advertises ``capabilities.cancel`` (the client may
        ``session/cancel`` the child); ``detach=False`` keeps it foreground work until it is detached.
        Returns the child's engine and its entity in this session's registry.
        """
        record = SessionRecord(session_id=new_id("sess"), cwd=self.record.cwd,
                               additional_directories=list(self.record.additional_directories),
                               principal=self.record.principal)
        child = self.factory.make(record, parent=self)
        announce: dict[str, Any] = {"session_id": child.id, "title": title, "state": child.snapshots.snapshot("idle")}
        if description is not None:
            announce["description"] = description
        if cancellable:
            announce["capabilities"] = SubagentSessionCapabilities(cancel=SessionCancelCapabilities())
        self.emit(SubagentUpdate(**announce), detach=detach)
        entity = self.registry.entity("subagent", child.id)
        entity.handle = child
        if cancellable:
            entity.cancel = child.cancel
        await self.task_group.start(child.serve)
        self.children.append(child)
        self.factory.opened(child)
        await self.sink.backpressure()
        return child, entity

    # -- sending ---------------------------------------------------------------------------

    def emit(self, update: BaseModel, *, detach: bool | None = None, record: bool = True) -> None:
        """Queue one update now (no waiting), after the checks it needs.

        Entity updates are checked against the registry first (R97, ``max_listed_items``) and
        nothing is sent if a check fails. ``detach`` sets whether a tool call / terminal this
        update creates is background work; ``record=False`` leaves it out of the history.
        """
        self.sink.check_open()
        if isinstance(update, _STATE_UPDATES) or getattr(update, "session_update", None) == "state_update":
            raise InvalidArgumentError("the session reports its own state; agent code never sends state_update")
        entity_update = isinstance(update, _ENTITY_UPDATES)
        if entity_update:
            self.registry.check(update)
            self._check_new_item(update, detach)
        self.sink.send(update, record=record)
        if self.telemetry is not None:
            self.telemetry.update(self.id, update, detach=detach if detach is not None else
                                  (None if self.turns.in_foreground() else True))
        if entity_update and self.registry.observe(update, foreground=self.turns.in_foreground(), detach=detach):
            self.snapshots.list_changed()

    async def send(self, update: BaseModel) -> None:
        """`emit`, then wait while the client is behind on reading."""
        self.emit(update)
        if self.sink.full():
            await self.sink.backpressure()

    def info_update(self, fields: dict[str, Any]) -> SessionInfoUpdate | None:
        """The ``session_info_update`` for an author's patch (``title``, ``updated_at``, ``meta``), noted on the
        record; ``None`` if nothing is left to send.

        Once the client titled the session (``session/set_title``), its title wins (S4): a ``title`` in the
        patch is left out.
        """
        record = self.record
        if "title" in fields and record.client_title:  # S4
            logger.debug("acp: session %s keeps the title the client set; update_info(title=...) ignored", self.id)
            fields = {k: v for k, v in fields.items() if k != "title"}
            if not fields:
                return None
        if "title" in fields:
            record.title = fields["title"]
        if fields.get("updated_at"):
            record.updated_at = fields["updated_at"]
        return SessionInfoUpdate(**fields)

    def check_may_talk(self) -> None:
        """Raise [`NotInTurnError`][acp_agent.NotInTurnError] unless foreground work runs (messages need a turn)."""
        if self.snapshots.foreground == "idle":
            raise NotInTurnError(
                f"session {self.id} is idle: an agent message needs foreground work around it; "
                "use session.start_foreground(work) to speak after the turn"
            )

    def _mirror(self, snapshot: BaseModel) -> None:
        """A child's snapshot, mirrored into the parent's ``subagent_update.state`` (R80)."""
        parent = self.parent
        if parent is not None and not parent.closing and not self.closed:
            parent.emit(SubagentUpdate(session_id=self.id, state=snapshot))

    # -- the list --------------------------------------------------------------------------

    def own_entity(self, kind: Kind, item_id: str, handle: object) -> Entity:
        """The registry entity behind ``handle``, an item of this session; `InvalidArgumentError` (a
        `ValueError`) for another session's handle."""
        entity = self.registry.get(kind, item_id)
        if entity is None or entity.handle is not handle:
            raise InvalidArgumentError(f"that {kind.replace('_', ' ')} belongs to another session")
        return entity

    def _check_new_item(self, update: BaseModel, detach: bool | None) -> None:
        """Refuse a raw update announcing a new tool call / terminal that would overflow the list.

        Only entities the registry has never seen are checked here; the handle APIs check
        their own changes first.
        """
        if isinstance(update, ToolCallUpdate):
            kind: Kind = "tool_call"
            item_id = update.tool_call_id
        elif isinstance(update, TerminalUpdate):
            kind, item_id = "terminal", update.terminal_id
        else:
            return
        if self.registry.get(kind, item_id) is not None:
            return
        detached = detach if detach is not None else not self.turns.in_foreground()
        if not detached:
            return
        shadow = Entity(kind, item_id, announced=True, detached=True)
        fields = update.model_fields_set
        if kind == "tool_call":
            shadow.final = "status" in fields and getattr(update, "status", None) in FINAL_STATUSES
            content = getattr(update, "content", None) or []
            shadow.terminals = [c.terminal_id for c in content if isinstance(c, Terminal)]
        else:
            shadow.final = "exit_status" in fields and getattr(update, "exit_status", None) is not None
        self.check_list_room({}, [shadow])

    def check_list_room(self, changes: Mapping[Entity, Mapping[str, Any]], new: Sequence[Entity] = ()) -> None:
        """Raise [`LimitExceededError`][acp_agent.LimitExceededError] if these entity changes would
        grow the ``background`` list past ``limits.max_listed_items`` (nothing is changed)."""
        limit = self.limits.max_listed_items
        size = self.registry.size_after(changes, new)
        listed = self.registry.listed_count
        if size > limit and size > listed:
            raise limit_exceeded("max_listed_items", limit, f"session {self.id} lists {listed} items")
        parent = self.parent
        if parent is not None and listed == 0 and size > 0:
            # R90: a child with background work of its own is busy, so its parent lists it.
            entity = parent.registry.get("subagent", self.id)
            if entity is not None:
                parent.check_list_room({entity: {"child_state": None}})

    def set_detached(self, entity: Entity, detached: bool, *, also_tool_call: str | None = None) -> None:
        """Move an item between foreground and background work (and re-send the list).

        Raises [`LimitExceededError`][acp_agent.LimitExceededError] (changing nothing) if that would
        grow the list past ``limits.max_listed_items``.
        """
        tool = self.registry.get("tool_call", also_tool_call) if also_tool_call is not None else None
        if tool is not None and tool.final:
            tool = None
        if detached:
            changes: dict[Entity, dict[str, Any]] = {entity: {"detached": True}}
            if tool is not None:
                changes[tool] = {"detached": True}
            self.check_list_room(changes)
        with self.snapshots.batch():
            self.snapshots.mark_dirty(self.registry.set_detached(entity, detached))
            if tool is not None:
                self.snapshots.mark_dirty(self.registry.set_detached(tool, detached))

    # -- the handles' steps: each sequence of engine calls that is a rule, in one method --------------------

    def announce_tool_call(self, fields: dict[str, Any], *, detach: bool | None) -> Entity:
        """Announce a new tool call with ``fields`` (``title``, ``kind``, ``name``: R74) and return its entity."""
        tool_call_id = new_id("call")
        self.emit(ToolCallUpdate(tool_call_id=tool_call_id, **fields), detach=detach)
        return self.registry.entity("tool_call", tool_call_id)

    def claim_work(self, entity: Entity, cancel: Callable[[], None] | None, *, detach: bool = False) -> None:
        """``entity`` runs work of its own, stopped by ``cancel`` (its cancel path, R98); checked against
        ``max_listed_items`` first (with ``detach``: as background work), changing nothing if it has no room."""
        changes: dict[str, Any] = {"own_work": True}
        if detach:
            changes["detached"] = True
        self.check_list_room({entity: changes})
        entity.cancel = cancel
        self.registry.set_own_work(entity)

    def start_tool_call_work(self, entity: Entity, cancel: Callable[[], None] | None, *, detach: bool) -> None:
        """A tool call's work starts (`claim_work`): ``in_progress``, ``capabilities.cancel`` offered while it has a
        cancel path (R98), and with ``detach`` listed as background work, all in one snapshot."""
        self.claim_work(entity, cancel, detach=detach)
        with self.snapshots.batch():
            fields: dict[str, Any] = {}
            if entity.status != "in_progress":
                fields["status"] = "in_progress"
            if cancel is not None and not entity.cancel_advertised:
                fields["capabilities"] = TOOL_CALL_CANCEL
            if fields:
                self.emit(ToolCallUpdate(tool_call_id=entity.id, **fields))
            if detach:
                self.set_detached(entity, True)

    async def update_tool_call(self, entity: Entity, fields: Mapping[str, Any]) -> None:
        """Patch a tool call; once it is final it has no cancel path and its questions are withdrawn."""
        await self.send(ToolCallUpdate(tool_call_id=entity.id, **fields))
        if entity.final:
            self._ended(entity)

    def end_tool_call(self, entity: Entity, status: str, fields: Mapping[str, Any], *,
                      follow_up: Callable[[], Awaitable[StopReason | None]] | None = None) -> None:
        """End a tool call now with ``status``: ``capabilities`` cleared in that same update when cancel was offered
        (R100), its questions withdrawn, and ``follow_up`` started as foreground work in the same step, so the
        snapshot that drops the tool call already says ``running`` (R95)."""
        if entity.cancel_advertised and "capabilities" not in fields:
            fields = {**fields, "capabilities": None}
        with self.snapshots.batch():
            self.emit(ToolCallUpdate(tool_call_id=entity.id, status=status, **fields))
            self._ended(entity)
            if follow_up is not None:
                self.turns.start(follow_up)

    @staticmethod
    def _ended(entity: Entity) -> None:
        entity.cancel = None
        entity.withdraw_questions()  # questions on behalf of ended work are withdrawn

    def start_wakeup(self, entity: Entity, scope: anyio.CancelScope, delay: float,
                     work: Callable[[], Awaitable[StopReason | None]], *, repeat: float | None,
                     durable: dict[str, Any] | None,
                     end: Callable[[str, Callable[[], Awaitable[StopReason | None]] | None], Awaitable[None]]) -> None:
        """Run a wake-up timer for a ``pending`` tool call under ``scope`` (its cancel path).

        After ``delay`` it ends with ``end("completed", work)`` (``work`` starts in the same step, R95); with
        ``repeat`` it starts ``work`` every ``repeat`` seconds instead; cancelled, it ends ``end("cancelled", None)``.
        ``durable`` (the stored entry) is kept in the record while pending, its ``due`` moved at each repeat, and
        dropped when the timer ends, but not when the session ends (it is re-armed when loaded).
        """
        wakeups = self.record.wakeups
        if durable is not None:
            wakeups[entity.id] = durable

        async def timer() -> None:
            with scope:
                await anyio.sleep(delay)
                while repeat is not None:
                    if durable is not None:
                        durable["due"] = time.time() + repeat
                    self.turns.start(work)
                    await anyio.sleep(repeat)
            if self.closing or self.turns.refusing is not None:
                return  # the session is ending: a durable entry stays for the next load
            wakeups.pop(entity.id, None)
            if entity.final:
                return
            if scope.cancel_called:
                await end("cancelled", None)
            else:
                await end("completed", work)

        self.spawn(timer)

    def reserve_terminal(self, cwd: str | None, *, detach: bool | None, tool_entity: Entity | None
                         ) -> tuple[Entity, str, bool]:
        """Reserve a new terminal before its process starts: its entity (unannounced), its working directory (the
        session's by default; absolute, R34) and whether it is background work (by default: when started by
        background work). Checked first, nothing sent: the session is open, the list has room, and a process slot
        is free (``max_processes``). Undo with `release_terminal` if it is never announced."""
        cwd = cwd or self.record.cwd
        if not os.path.isabs(cwd):
            raise InvalidArgumentError(f"a terminal's cwd must be an absolute path, got {cwd!r}")
        self.sink.check_open()
        terminal_id = new_id("term")
        if detach is None:
            detach = not self.turns.in_foreground()  # started by background work: background work
        self.check_terminal_room(terminal_id, detach=detach, tool_entity=tool_entity)
        self.processes.acquire(terminal_id)  # raises at max_processes, before anything is sent
        return self.registry.entity("terminal", terminal_id), cwd, detach

    def release_terminal(self, entity: Entity) -> None:
        """Give back what `reserve_terminal` took, for a terminal that was never announced."""
        self.processes.release(entity.id)
        self.registry.forget("terminal", entity.id)

    def check_terminal_room(self, terminal_id: str, *, detach: bool, tool_entity: Entity | None) -> None:
        """Refuse (``LimitExceededError``) a detached terminal the list has no room for, with the live tool call
        whose content it joins (listed with it, R88)."""
        if not detach:
            return
        shadow = Entity("terminal", terminal_id, announced=True, detached=True)
        changes: dict[Entity, dict[str, Any]] = {}
        if tool_entity is not None:
            changes[tool_entity] = {"terminals": [*tool_entity.terminals, terminal_id]}
            if not tool_entity.final:
                changes[tool_entity]["detached"] = True
        self.check_list_room(changes, [shadow])

    def announce_terminal(self, update: TerminalUpdate, *, detach: bool, tool_entity: Entity | None) -> Entity:
        """Announce a started process's terminal and return its entity. With a tool call, the terminal joins its
        content, and a terminal that is background work takes the live tool call with it (R88), in one snapshot."""
        with self.snapshots.batch():  # never held across an await: other tasks' list changes must not wait on it
            self.emit(update, detach=detach)
            entity = self.registry.entity("terminal", update.terminal_id)
            if tool_entity is not None:
                content = Terminal(terminal_id=update.terminal_id)
                self.emit(ToolCallContentChunk(tool_call_id=tool_entity.id, content=content))
                if entity.detached and not tool_entity.final:
                    self.set_detached(tool_entity, True)
        return entity

    def report_exit(self, entity: Entity, exit_status: TerminalExitStatus, then: Callable[[], None]) -> None:
        """Report a terminal's exit, ``capabilities`` cleared in that same update when cancel was offered (R100);
        ``then`` runs in the same snapshot batch (what an exit callback starts is part of the exit's step, R95)."""
        fields: dict[str, Any] = {"exit_status": exit_status}
        if entity.cancel_advertised:
            fields["capabilities"] = None
        with self.snapshots.batch():
            self.emit(TerminalUpdate(terminal_id=entity.id, **fields))
            then()

    def start_child(self, entity: Entity, child: SessionCore, work: Callable[[], Awaitable[StopReason | None]]
                    ) -> None:
        """Give a child foreground work: it reports ``running`` at once, and this session lists a busy detached
        child (R90), so the list's room is checked first (nothing starts without it)."""
        self.check_list_room({entity: {"child_state": None}})  # None: busy (R90)
        child.turns.start(work)

    def last_work(self) -> tuple[StopReason, list[AgentMessage], Error | None]:
        """How the last finished foreground work ended: its stop reason, the agent messages it sent, and the error
        its ``idle`` carried."""
        turns = self.turns
        messages = [item for item in self.record.history.replay(turns.last_start) if isinstance(item, AgentMessage)]
        return turns.last_stop or "end_turn", messages, turns.last_error

    async def tell_child(self, child: SessionCore, content: str | Sequence[ContentBlock]) -> str:
        """Send a message from this session to ``child``: this transcript gets the outgoing copy and the child's the
        incoming one, each naming the other (``session_message``). Returns the incoming copy's ``messageId``."""
        outgoing, incoming = new_id("smsg"), new_id("smsg")
        common: dict[str, Any] = {"sender_session_id": self.id, "recipient_session_id": child.id,
                                  "content": as_blocks(content)}
        await self.send(SessionMessage(message_id=outgoing, recipient_message_id=incoming, **common))
        await child.send(SessionMessage(message_id=incoming, sender_message_id=outgoing, **common))
        return incoming

    async def send_message(self, kind: type[AgentMessage | AgentThought], message_id: str,
                           content: str | Sequence[ContentBlock], meta: dict[str, Any] | None) -> None:
        """Send a complete agent message or thought; only foreground work talks (`check_may_talk`). Plain text
        is framed without building the model (``SessionSink.send_plain``)."""
        blocks = as_blocks(content)
        self.check_may_talk()
        sink = self.sink
        if meta is None and sink.send_plain(kind, message_id, blocks):
            if sink.full():
                await sink.backpressure()
            return
        await self.send(kind(message_id=message_id, content=blocks, **({"meta": meta} if meta is not None else {})))

    # -- ending work -----------------------------------------------------------------------

    def cancel(self) -> None:
        """``session/cancel``: answer held prompts ``-32800`` and cancel the foreground work."""
        self.turns.cancel()

    async def wait_idle(self) -> None:
        """Wait until the session has no foreground work, running or queued."""
        await self.turns.wait_idle()

    def _end_foreground_now(self, stop: StopReason) -> bool:
        """The end of foreground work made at once when it needs no waiting: no item that may need ending
        (`_end_foreground_items`) and the save made without an await (`persist_now`). ``False``:
        `_end_foreground_items` must be awaited."""
        if self.registry.entities:
            return False
        if self.persist is None:
            return True
        return self.persist_now is not None and self.persist_now()

    async def _end_foreground_items(self, stop: StopReason) -> bool:
        """Finalize what ended foreground work left unfinished (R68, R108), then save; whether the save landed.

        Detached (listed) work is untouched. Unfinished foreground tool calls get a final
        status, foreground processes are stopped and report their exit, all before ``idle``.
        """
        status = "failed" if stop == "error" else "cancelled"
        terminals: list[TerminalItem] = []
        children: list[ChildItem] = []
        for entity in list(self.registry.entities.values()):
            if entity.detached or entity.final or not entity.announced:
                continue
            handle = entity.handle
            if entity.kind == "tool_call" and isinstance(handle, ToolCallItem):
                handle.abandon(status)  # stops its work too
            elif entity.kind == "tool_call":
                self._end_raw_tool_call(entity, status)
            elif entity.kind == "terminal" and isinstance(handle, TerminalItem):
                terminals.append(handle)
            elif entity.kind == "subagent" and isinstance(handle, ChildItem):
                children.append(handle)  # a child this work waited on is cancelled with it
        if terminals or children:
            with anyio.move_on_after(DEFAULT_TERMINATE_GRACE + 2):
                async with anyio.create_task_group() as tg:
                    for terminal in terminals:
                        tg.start_soon(terminal.stop)
                    for child in children:
                        child.cancel()
                        tg.start_soon(child.wait_idle)  # its final updates precede our idle (R68)
        if self.persist is not None:
            return await self.persist()  # a turn the client saw end is kept (the store's crash contract)
        return True

    def _end_raw_tool_call(self, entity: Entity, status: str) -> None:
        fields: dict[str, Any] = {"status": status}
        if entity.cancel_advertised:
            fields["capabilities"] = None  # R100
        self.emit(ToolCallUpdate(tool_call_id=entity.id, **fields))

    def _terminals(self) -> list[tuple[Entity, TerminalItem]]:
        return [(e, e.handle) for e in list(self.registry.entities.values())
                if e.kind == "terminal" and isinstance(e.handle, TerminalItem)]

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
        self.turns.refusing = self.turns.refusing or "winding_down"
        for child in list(self.children):
            await child.wind_down(deadline)
        grace = max(0.0, min(DEFAULT_TERMINATE_GRACE, (deadline - anyio.current_time()) / 2))
        running: list[TerminalItem] = []
        backed: dict[str, list[TerminalItem]] = {}  # tool call id -> the terminals it started
        for entity, terminal in self._terminals():
            if terminal.tool_call_id is not None:
                backed.setdefault(terminal.tool_call_id, []).append(terminal)
            if not entity.final and entity.announced:
                terminal.grace = min(terminal.grace, grace)
                running.append(terminal)
        with self.snapshots.batch():
            self.cancel()
            self._end_tool_calls(backed, waiting=True)
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time()), shield=True):
            async with anyio.create_task_group() as tg:
                for terminal in running:
                    tg.start_soon(terminal.stop)
                tg.start_soon(self.turns.wait_drained)
        with self.snapshots.batch():
            for entity, terminal in self._terminals():  # started meanwhile too
                if entity.announced:
                    terminal.give_up()
            self._end_tool_calls(backed, waiting=False)
            self.turns.finish_now()

    def _end_tool_calls(self, backed: dict[str, list[TerminalItem]], *, waiting: bool) -> None:
        """Report unfinished tool calls ended: ``cancelled``, or by their process's exit when a
        terminal stands for them (as any other exit would end them). With ``waiting``, those
        whose process still runs are left for after it stopped."""
        for entity in list(self.registry.entities.values()):
            if entity.final or not entity.announced or entity.kind != "tool_call":
                continue
            ends = [t.exit_status for t in backed.get(entity.id, ())]
            if any(status is None for status in ends) and waiting:
                continue
            exits = [status for status in ends if status is not None]
            handle = entity.handle
            if exits and isinstance(handle, ToolCallItem):
                status = exits[-1]
                handle.end_now("completed" if status.exit_code == 0 else "failed",
                               raw_output={"exitCode": status.exit_code, "signal": status.signal})
            elif isinstance(handle, ToolCallItem):
                handle.abandon("cancelled")
            else:
                self._end_raw_tool_call(entity, "cancelled")

    async def close(self, timeout: float = 5.0, *, finalize: bool = False) -> None:
        """Stop everything the session runs; afterwards nothing more is sent for it (R41-R45).

        Held prompts are answered ``-32800``; foreground work is cancelled and its
        ``idle`` / ``cancelled`` snapshot goes out; pending requests of the session are
        withdrawn with ``$/cancel_request`` as their tasks are cancelled. With ``finalize``
        (the end of the connection) every unfinished item is first stopped and reported
        ended (see `wind_down`), all within ``timeout`` seconds.
        """
        if self.closing:
            await self._stopped.wait()
            return
        if finalize:
            deadline = anyio.current_time() + timeout
            await self.wind_down(deadline)
            timeout = max(0.0, deadline - anyio.current_time())
        self.closing = True
        self.turns.refusing = "closing"
        for child in list(self.children):
            # Closing a parent ends its children without further notifications (§11.15).
            child.sink.closed = True
            await child.close(timeout)
        self.cancel()
        with anyio.move_on_after(timeout, shield=True):
            await self.turns.wait_done()
            await self.wait_idle()  # inserted prompts still get their echo and end cancelled
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            with anyio.move_on_after(timeout, shield=True):
                await self._stopped.wait()
        self.sink.closed = True
        for entity in self.registry.entities.values():
            if entity.kind == "terminal":
                self.processes.release(entity.id)  # its process group was stopped with the task group
        finalize_live_items(self.sink.history, "cancelled")  # stopped unseen: what a replay will say of them
        self.registry.clear()
        if self.parent is not None and self in self.parent.children:
            self.parent.children.remove(self)
        for callback in self.on_closed:
            callback()


def as_blocks(content: str | Sequence[ContentBlock]) -> list[ContentBlock]:
    """Message content as a list of blocks: a string is one text block."""
    if isinstance(content, str):
        return [TextContent(text=content)]
    return list(content)


class SessionFactory:
    """Makes every session engine of one connection, top-level and child alike: the one place a
    `SessionCore` is built.

    ``wrap`` puts the author-facing object over a new engine (the runtime passes one that makes a
    [`Session`][acp_agent.Session]); ``opened`` is told of each engine once it runs, and the runtime's index
    of live sessions is kept from it (an engine removes itself through its ``on_closed`` callbacks).
    """

    def __init__(self, connection: Connection, *, limits: Limits, processes: ProcessSlots, client: ClientPeer,
                 wrap: Callable[[SessionCore], object], opened: Callable[[SessionCore], None]) -> None:
        self.connection = connection
        self.limits = limits
        self.processes = processes
        self.client = client
        self._wrap = wrap
        self.opened = opened
        """Called with each engine once it runs (children too)."""

    def make(self, record: SessionRecord, *, parent: SessionCore | None = None, hold: bool = False) -> SessionCore:
        """A new engine for ``record`` with its façade, not yet running (``hold``: output waits for the answer
        that names the session)."""
        core = SessionCore(self.connection, record, limits=self.limits, processes=self.processes,
                           client=self.client, factory=self, parent=parent, hold=hold)
        core.facade = self._wrap(core)
        return core
