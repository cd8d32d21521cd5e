"""Subagents: child sessions a session creates, owns and gives work to.

``sub = await session.spawn_subagent("Explore auth module")`` announces the child with a ``subagent_update`` on
the parent before anything names it (R79) and returns a [`Subagent`][acp_agent.Subagent]. ``sub.session`` is an
ordinary [`Session`][acp_agent.Session]: its messages, tool calls, terminals and own background work flow under
the child's id, and its every ``state_update`` is mirrored into the parent's ``subagent_update.state`` (R80). The
parent lists a detached child while it is busy (R90); ``await sub.run(work)`` gives it work and returns how it
ended and what it said ([`SubagentResult`][acp_agent.SubagentResult]). The client may only cancel a child, when
it advertises it.

A child is itself a session, and the module that defines `Session` hands out these handles, so this one names the
session type only as the handle's type parameter: ``session.spawn_subagent(...)`` returns a
``Subagent[Session]``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from . import schema
from .schema import ContentBlock, Error, StopReason, TextContent

if TYPE_CHECKING:
    # Loaded with the first session (tests/unit/test_exports.py pins what a stdio agent loads before that).
    from ._session.core import SessionCore
    from ._session.registry import Entity

__all__ = ["SessionT", "Subagent", "SubagentResult"]

SessionT = TypeVar("SessionT", default=Any)
"""The type of a [`Subagent`][acp_agent.Subagent]'s parent and child: a [`Session`][acp_agent.Session]."""


@dataclass(frozen=True, slots=True)
class SubagentResult:
    """How a child's last piece of work ended and what it said."""

    stop_reason: StopReason
    """The stop reason of the child's last finished foreground work."""
    messages: list[schema.AgentMessage]
    """The agent messages the child sent during that work, in order."""
    error: Error | None = None
    """For ``stop_reason == "error"``: the error its idle snapshot carried (code, message, data)."""

    @property
    def text(self) -> str:
        """The text of [`messages`][acp_agent.SubagentResult.messages], one message per paragraph."""
        return "\n\n".join(
            "".join(block.text for block in message.content or [] if isinstance(block, TextContent))
            for message in self.messages
        )


class Subagent(Generic[SessionT]):
    """A handle on a child session. Create it with [`Session.spawn_subagent`][acp_agent.Session.spawn_subagent].

    ``sub.session`` is an ordinary [`Session`][acp_agent.Session]: its messages, tool calls, terminals and
    background work flow under the child's id, and its state is mirrored into the parent (R80).
    """

    def __init__(self, parent: SessionT, child: SessionT, entity: Entity, *, engines: tuple[SessionCore, SessionCore]
                 ) -> None:
        self.parent = parent
        """The session that spawned the child."""
        self.session = child
        """The child session."""
        self._entity = entity
        self._parent, self._child = engines

    @property
    def id(self) -> str:
        """The child's ``sessionId``."""
        return self._child.id

    @property
    def cancellable(self) -> bool:
        """Whether the client may send ``session/cancel`` for the child."""
        return self._entity.cancel_advertised

    @property
    def detached(self) -> bool:
        """True while the child is background work of the parent (listed while busy)."""
        return self._entity.detached

    def __repr__(self) -> str:
        return f"Subagent({self.id!r}, state={self._child.snapshots.foreground!r})"

    def start(self, work: Callable[[SessionT], Awaitable[StopReason | None]]) -> None:
        """Give the child a piece of foreground work: ``work(child_session)``.

        The child reports ``running`` (and the parent lists it) before this returns. If the
        parent's list is full, [`LimitExceededError`][acp_agent.LimitExceededError] is raised first.
        """
        child = self.session
        self._parent.start_child(self._entity, self._child, lambda: work(child))

    async def run(self, work: Callable[[SessionT], Awaitable[StopReason | None]]) -> SubagentResult:
        """[`start`][acp_agent.Subagent.start] the work, wait until the child is idle, and return its
        [`result`][acp_agent.Subagent.result]."""
        self.start(work)
        return await self.result()

    async def result(self) -> SubagentResult:
        """Wait until the child is idle; then how its last work ended and what it said."""
        await self._child.wait_idle()
        return SubagentResult(*self._child.last_work())

    def cancel(self) -> None:
        """Cancel the child's current work (the child session stays)."""
        self._child.cancel()

    def detach(self) -> None:
        """Make the child background work of the parent (it was started attached)."""
        self._parent.set_detached(self._entity, True)

    async def update(self, **fields: Any) -> None:
        """Patch the child's ``title`` / ``description`` / ``meta`` on the parent."""
        await self._parent.send(schema.SubagentUpdate(session_id=self.id, **fields))

    async def tell(self, content: str | Sequence[ContentBlock]) -> str:
        """Send a message from the parent to the child; returns the child's copy's ``messageId``.

        The parent's transcript gets the outgoing copy and the child's the incoming one,
        each naming the other (``session_message``).
        """
        return await self._parent.tell_child(self._child, content)

    async def wait_idle(self) -> None:
        """Wait until the child has no foreground work (queued or running)."""
        await self._child.wait_idle()
