"""The ``BackgroundRegistry``: every terminal, tool call and child a session knows.

It sees each entity update before it reaches the wire
([`BackgroundRegistry.observe`][acp_agent.BackgroundRegistry.observe]), refuses illegal moves there (R97), and computes
the ``background`` list from entity state alone ([`BackgroundRegistry.listing`][acp_agent.BackgroundRegistry.listing]).
The session asks it for the list whenever it builds a snapshot, and re-sends its state whenever the list changed.
Because an entity's update is sent before the registry reflects it, and the list is always recomputed from
what was sent, the ordering rules hold by construction:

- announce before listing (R93): only announced entities can be listed;
- finalize before removing (R94): an item leaves the list because its final status or
  ``exitStatus`` was observed (sent) first, or because its work re-attached;
- every snapshot carries the list (R91), and a changed list is re-sent (R92).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from .._util.processes import ExitStatus
from ..errors import ToolCallStateError
from ..schema import (
    BackgroundSubagent,
    BackgroundTerminal,
    BackgroundToolCall,
    BackgroundWork,
    SubagentUpdate,
    Terminal,
    TerminalUpdate,
    ToolCallContentChunk,
    ToolCallUpdate,
)

__all__ = [
    "FINAL_STATUSES", "BackgroundRegistry", "ChildItem", "Entity", "TerminalItem", "ToolCallItem", "ToolCallStateError",
]

FINAL_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})
"""Tool call statuses after which nothing may change (R97)."""

Kind = Literal["tool_call", "terminal", "subagent"]


@runtime_checkable
class ToolCallItem(Protocol):
    """What the session runtime asks of a tool call handle when the work that owns it ends."""

    def abandon(self, status: str = "cancelled") -> None:
        """End the tool call now with ``status`` (if not final) and stop its work."""

    def end_now(self, status: str, **fields: Any) -> None:
        """Send the final ``status`` (with ``fields``) at once."""


@runtime_checkable
class TerminalItem(Protocol):
    """What the session runtime asks of a terminal handle when the work that owns it ends."""

    tool_call_id: str | None
    grace: float

    @property
    def exit_status(self) -> ExitStatus | None:
        """How the process ended, once its exit was reported."""

    async def stop(self) -> None:
        """Stop the process group and wait until its exit was reported."""

    def give_up(self) -> None:
        """Kill the process group and report the exit now (unknown if not reaped)."""


@runtime_checkable
class ChildItem(Protocol):
    """What the session runtime asks of a child session when its parent's work ends."""

    def cancel(self) -> None:
        """Cancel the child's foreground work."""

    async def wait_idle(self) -> None:
        """Wait until the child has no foreground work."""


@dataclass(slots=True, eq=False)
class Entity:
    """What the registry knows about one terminal, tool call or child session."""

    kind: Kind
    id: str
    announced: bool = False
    final: bool = False
    detached: bool = False
    status: str = "pending"
    started: bool = False
    cancel_advertised: bool = False
    terminals: list[str] = field(default_factory=list)
    """Tool calls: terminals their content references (R88)."""
    own_work: bool = False
    """Tool calls: whether something besides referenced terminals keeps them alive."""
    child_state: Any = None
    """Children: the latest mirrored state snapshot (a ``StateUpdate`` model) or ``None``."""
    cancel: Callable[[], Any] | None = None
    """The cancel path offered to the client, if any."""
    handle: ToolCallItem | TerminalItem | ChildItem | None = None
    """The handle behind the item (a ``ToolCall``, a ``Terminal`` or a child session), if the SDK made it."""
    questions: set[Any] = field(default_factory=set)
    """The cancel scopes of questions asked on behalf of the item (withdrawn when it ends, R107)."""

    def withdraw_questions(self) -> None:
        """Withdraw every question still open on behalf of the item (it ended)."""
        for scope in self.questions:
            scope.cancel()


class BackgroundRegistry:
    """Entity state of one session and the ``background`` list computed from it."""

    def __init__(self) -> None:
        self.entities: dict[tuple[Kind, str], Entity] = {}
        self._members: dict[tuple[Kind, str], BackgroundWork] = {}
        self._refs: dict[str, set[str]] = {}  # terminal id -> tool calls whose content names it
        self.version = 0
        """Incremented whenever the list changes (the session re-sends its state then, R92)."""

    def get(self, kind: Kind, entity_id: str) -> Entity | None:
        """The entity of that kind and id, if known."""
        return self.entities.get((kind, entity_id))

    def entity(self, kind: Kind, entity_id: str) -> Entity:
        """The entity of that kind and id, created (unannounced) if new."""
        key = (kind, entity_id)
        found = self.entities.get(key)
        if found is None:
            found = self.entities[key] = Entity(kind, entity_id)
        return found

    def forget(self, kind: Kind, entity_id: str) -> None:
        """Drop an entity that was never announced (its item never reached the client)."""
        found = self.entities.get((kind, entity_id))
        if found is not None and not found.announced:
            del self.entities[(kind, entity_id)]

    def clear(self) -> None:
        """Forget everything (the session was closed)."""
        self.entities.clear()
        self._members.clear()
        self._refs.clear()
        self.version += 1

    # -- the gate every entity update passes --------------------------------------------

    def check(self, update: BaseModel) -> None:
        """Raise [`ToolCallStateError`][acp_agent.ToolCallStateError] if sending ``update`` would break R97 / R71."""
        if isinstance(update, ToolCallUpdate):
            self._check_tool_call(update)
        elif isinstance(update, ToolCallContentChunk):
            found = self.get("tool_call", update.tool_call_id)
            if found is not None and found.final:
                raise ToolCallStateError(f"tool call {update.tool_call_id} has ended; its content is final")
        elif isinstance(update, TerminalUpdate):
            found = self.get("terminal", update.terminal_id)
            fields = update.model_fields_set
            if found is not None and found.final and "exit_status" in fields:
                raise ToolCallStateError(f"terminal {update.terminal_id} has exited; its exit is reported once, ever")

    def _check_tool_call(self, update: ToolCallUpdate) -> None:
        found = self.get("tool_call", update.tool_call_id)
        fields = update.model_fields_set - {"session_update", "tool_call_id"}
        if found is None or not fields:
            return
        if found.final:
            raise ToolCallStateError(
                f"tool call {update.tool_call_id} is {found.status}; a final status never changes (R97)"
            )
        if "status" in fields:
            new = update.status
            if new is None or new == "pending":
                if found.started:
                    raise ToolCallStateError(
                        f"tool call {update.tool_call_id} has started; its status never goes back to pending (R97)"
                    )
            elif new == "paused" and not found.started:
                raise ToolCallStateError(f"tool call {update.tool_call_id} never started; it cannot be paused")

    def observe(self, update: BaseModel, *, foreground: bool = False, detach: bool | None = None) -> bool:
        """Apply an update that is being sent; returns True if the list changed.

        An item first seen here is background work when created outside foreground work,
        unless ``detach`` says otherwise.
        """
        is_new = self._entity_of(update) is None
        self._apply(update)
        entity = self._entity_of(update)
        if entity is None:
            return False
        if detach is not None:
            entity.detached = detach
        elif is_new:
            entity.detached = not foreground
        return self.refresh(entity)

    def _entity_of(self, update: BaseModel) -> Entity | None:
        if isinstance(update, (ToolCallUpdate, ToolCallContentChunk)):
            return self.get("tool_call", update.tool_call_id)
        if isinstance(update, TerminalUpdate):
            return self.get("terminal", update.terminal_id)
        if isinstance(update, SubagentUpdate):
            return self.get("subagent", update.session_id)
        return None

    def _apply(self, update: BaseModel) -> bool:
        if isinstance(update, ToolCallUpdate):
            return self._observe_tool_call(update.tool_call_id, update)
        if isinstance(update, ToolCallContentChunk):
            content = update.content
            if isinstance(content, Terminal):
                found = self.entity("tool_call", update.tool_call_id)
                self._set_terminals(found, [*found.terminals, content.terminal_id])
                return found.announced
            return False
        if isinstance(update, TerminalUpdate):
            found = self.entity("terminal", update.terminal_id)
            fields = update.model_fields_set
            changed = not found.announced
            found.announced = True
            if "exit_status" in fields:
                changed |= found.final != (update.exit_status is not None)
                found.final = update.exit_status is not None
            if "capabilities" in fields:
                found.cancel_advertised = bool(update.capabilities and update.capabilities.cancel is not None)
            return changed
        if isinstance(update, SubagentUpdate):
            found = self.entity("subagent", update.session_id)
            found.announced = True
            if "state" in update.model_fields_set:
                found.child_state = update.state
            if "capabilities" in update.model_fields_set:
                found.cancel_advertised = bool(update.capabilities and update.capabilities.cancel is not None)
            return True
        return False

    def _set_terminals(self, tool_call: Entity, terminals: list[str]) -> None:
        for terminal_id in tool_call.terminals:
            self._refs.get(terminal_id, set()).discard(tool_call.id)
        tool_call.terminals = terminals
        for terminal_id in terminals:
            self._refs.setdefault(terminal_id, set()).add(tool_call.id)

    def _observe_tool_call(self, tool_call_id: str, update: ToolCallUpdate) -> bool:
        found = self.entity("tool_call", tool_call_id)
        fields = update.model_fields_set
        changed = not found.announced
        found.announced = True
        if "status" in fields:
            status = update.status or "pending"
            changed |= found.status != status
            found.status = status
            if status not in ("pending",):
                found.started = True
            found.final = status in FINAL_STATUSES
        if "content" in fields:
            self._set_terminals(found, [c.terminal_id for c in update.content or [] if isinstance(c, Terminal)])
            changed = True
        if "capabilities" in fields:
            found.cancel_advertised = bool(update.capabilities and update.capabilities.cancel is not None)
        return changed

    # -- the list -----------------------------------------------------------------------

    def set_detached(self, entity: Entity, detached: bool) -> bool:
        """Move an item between foreground and background work; True if the list changed."""
        entity.detached = detached
        return self.refresh(entity)

    def set_own_work(self, entity: Entity, own_work: bool = True) -> bool:
        """Record that a tool call has work of its own besides its terminals (R88)."""
        entity.own_work = own_work
        return self.refresh(entity)

    def refresh(self, entity: Entity) -> bool:
        """Recompute whether ``entity`` is listed; True (and a new [`version`][acp_agent.BackgroundRegistry.version]) if
        that changed."""
        key = (entity.kind, entity.id)
        member = self._is_member(entity)
        if member == (key in self._members):
            return False
        if member:
            self._members[key] = _item(entity)
        else:
            del self._members[key]
        self.version += 1
        if entity.kind == "terminal":
            for tool_call_id in list(self._refs.get(entity.id, ())):
                tool_call = self.get("tool_call", tool_call_id)
                if tool_call is not None:
                    self.refresh(tool_call)
        return True

    def _is_member(self, entity: Entity, terminal_listed: Callable[[str], bool] | None = None) -> bool:
        if not (entity.announced and entity.detached) or entity.final:
            return False
        if entity.kind == "subagent":
            return _child_busy(entity.child_state)
        if entity.kind == "tool_call" and not entity.own_work:
            # R88: one shell is one task; the listed terminal stands for this tool call.
            if terminal_listed is None:
                return not any(("terminal", t) in self._members for t in entity.terminals)
            return not any(terminal_listed(t) for t in entity.terminals)
        return True

    def size_after(self, changes: Mapping[Entity, Mapping[str, Any]], new: Sequence[Entity] = ()) -> int:
        """How many items the list would hold with ``changes`` applied and ``new`` entities added.

        Nothing is changed: ``changes`` maps entities to field values (``detached``,
        ``own_work``, ``terminals``, ``child_state``...) on shadow copies, and the list size is
        recomputed for them and for every tool call whose listing depends on a changed
        terminal (R88). Used to refuse a change that would go past a list limit before
        anything is sent.
        """
        shadows: dict[tuple[Kind, str], Entity] = {}
        for entity, fields in changes.items():
            shadows[(entity.kind, entity.id)] = dataclasses.replace(entity, **fields)
        for entity in new:
            shadows[(entity.kind, entity.id)] = entity
        for kind, entity_id in list(shadows):
            if kind == "terminal":
                for tool_call_id in self._refs.get(entity_id, ()):
                    tool_call = self.get("tool_call", tool_call_id)
                    if tool_call is not None and ("tool_call", tool_call_id) not in shadows:
                        shadows[("tool_call", tool_call_id)] = tool_call

        def terminal_listed(terminal_id: str) -> bool:
            shadow = shadows.get(("terminal", terminal_id))
            if shadow is None:
                return ("terminal", terminal_id) in self._members
            return self._is_member(shadow, terminal_listed)

        size = len(self._members)
        for key, shadow in shadows.items():
            size += int(self._is_member(shadow, terminal_listed)) - int(key in self._members)
        return size

    def listing(self) -> list[BackgroundWork]:
        """The ``background`` list: detached, announced, live work, each piece once."""
        return list(self._members.values())

    @property
    def listed_count(self) -> int:
        """How many items the list holds now."""
        return len(self._members)

    def listed_ids(self) -> list[tuple[Kind, str]]:
        """``(kind, id)`` of every item in the current list."""
        return list(self._members)


def _item(entity: Entity) -> BackgroundWork:
    if entity.kind == "terminal":
        return BackgroundTerminal(terminal_id=entity.id)
    if entity.kind == "tool_call":
        return BackgroundToolCall(tool_call_id=entity.id)
    return BackgroundSubagent(session_id=entity.id)


def _child_busy(state: Any) -> bool:
    """R90: a child is listed while not idle, or while its own list is non-empty or unreported."""
    if state is None:
        return True
    if getattr(state, "state", None) != "idle":
        return True
    background = getattr(state, "background", None)
    return background is None or len(background) > 0
