"""Subagents: child sessions a session creates and owns.

``child = await session.spawn_subagent("Explore auth module")`` announces the child with a
``subagent_update`` on the parent before anything names it (R79) and returns a
:class:`Subagent`. ``child.session`` is an ordinary :class:`Session`: its messages, tool
calls, terminals and own background work flow under the child's id, and each of its
``state_update`` snapshots is mirrored into the parent's ``subagent_update.state`` (R80).
The parent lists a detached child while it is busy (not ``idle``, or with its own list
non-empty or unreported: R90); an idle child stays associated and can be given more work.

Children are the agent's, not the client's: the only client mutation they accept is
``session/cancel`` (with per-item cancels), and only when the child advertises ``cancel``;
anything else is refused with ``-32602``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .schema import ContentBlock, SessionMessage, SubagentUpdate, TextContent

if TYPE_CHECKING:
    from .background import Entity
    from .session import Session, StopReason

__all__ = ["CHILD_MUTATION_REFUSED", "Subagent"]

CHILD_MUTATION_REFUSED = "client mutations on a subagent session are not allowed (only session/cancel, when advertised)"
"""The ``-32602`` message for client requests a child session does not accept."""


class Subagent:
    """A handle on a child session. Create it with :meth:`Session.spawn_subagent`."""

    def __init__(self, parent: Session, child: Session, entity: Entity) -> None:
        self.parent = parent
        self.session = child
        self._entity = entity

    @property
    def id(self) -> str:
        """The child's ``sessionId``."""
        return self.session.id

    @property
    def cancellable(self) -> bool:
        """Whether the client may send ``session/cancel`` for the child."""
        return self._entity.cancel_advertised

    @property
    def detached(self) -> bool:
        """True while the child is background work of the parent (listed while busy)."""
        return self._entity.detached

    def __repr__(self) -> str:
        return f"Subagent({self.id!r}, state={self.session.state!r})"

    def start(self, work: Callable[[Session], Awaitable[StopReason | None]]) -> None:
        """Give the child a piece of foreground work: ``work(child_session)``.

        A detached child is listed by the parent while busy: if it is not listed now and the
        parent's list is full, :class:`~acp_agent.errors.LimitExceededError` is raised first.
        """
        child = self.session
        self.parent.check_list_room({self._entity: {"child_state": None}})  # None: busy (R90)
        # now=True: the child reports `running` (and the parent lists it) before start() returns,
        # so the list limit above is checked against what the client sees.
        child.start_foreground(lambda: work(child), now=True)

    def cancel(self) -> None:
        """Cancel the child's current work (the child session stays)."""
        self.session.cancel()

    def detach(self) -> None:
        """Make the child background work of the parent (it was started attached)."""
        self.parent.set_detached(self._entity, True)

    async def update(self, **fields: Any) -> None:
        """Patch the child's ``title`` / ``description`` / ``meta`` on the parent."""
        await self.parent.send(SubagentUpdate(session_id=self.id, **fields))

    async def tell(self, content: str | Sequence[ContentBlock]) -> str:
        """Send a message from the parent to the child; returns the child's copy's ``messageId``.

        The parent's transcript gets the outgoing copy and the child's the incoming one,
        each naming the other (``session_message``).
        """
        from .session import new_id

        blocks: list[ContentBlock] = [TextContent(text=content)] if isinstance(content, str) else list(content)
        outgoing, incoming = new_id("smsg"), new_id("smsg")
        common = {"sender_session_id": self.parent.id, "recipient_session_id": self.id, "content": blocks}
        await self.parent.send(SessionMessage(message_id=outgoing, recipient_message_id=incoming, **common))
        await self.session.send(SessionMessage(message_id=incoming, sender_message_id=outgoing, **common))
        return incoming

    async def wait_idle(self) -> None:
        """Wait until the child has no foreground work (queued or running)."""
        await self.session.wait_idle()
