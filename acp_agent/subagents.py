"""Subagents: child sessions a session creates and owns.

``sub = await session.spawn_subagent("Explore auth module")`` announces the child with a
``subagent_update`` on the parent before anything names it (R79) and returns a
:class:`~acp_agent.session.Subagent` (defined beside :class:`~acp_agent.Session`, since a child
is itself a session). ``sub.session`` is an ordinary session: its messages, tool calls,
terminals and own background work flow under the child's id, and each of its
``state_update`` snapshots is mirrored into the parent's ``subagent_update.state`` (R80).
The parent lists a detached child while it is busy (not ``idle``, or with its own list
non-empty or unreported: R90); an idle child stays associated and can be given more work.
``await sub.run(work)`` gives it work and returns how it ended and what it said.

Children are the agent's, not the client's: the only client mutation they accept is
``session/cancel`` (with per-item cancels), and only when the child advertises ``cancel``;
anything else is refused with ``-32602``. This module holds those rules for the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .session import Subagent, SubagentResult

if TYPE_CHECKING:
    from .core import SessionCore

__all__ = ["CHILD_MUTATION_REFUSED", "Subagent", "SubagentResult", "child_cancellable"]

CHILD_MUTATION_REFUSED = "client mutations on a subagent session are not allowed (only session/cancel, when advertised)"
"""The ``-32602`` message for client requests a child session does not accept."""


def child_cancellable(child: SessionCore) -> bool:
    """Whether the client may ``session/cancel`` this child (it advertised ``capabilities.cancel``)."""
    parent = child.parent
    entity = parent.registry.get("subagent", child.id) if parent is not None else None
    return entity is not None and entity.cancel_advertised
