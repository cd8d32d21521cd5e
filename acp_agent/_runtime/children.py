"""What a client may do to a subagent's session: only ``session/cancel`` (and per-item cancels), when advertised.

Children are the agent's, not the client's. The runtime refuses every other client mutation of a
child session (prompt, close, delete, fork, resume, config, titles, archiving) with ``-32602`` and
`CHILD_MUTATION_REFUSED`; `child_cancellable` says whether the cancels are allowed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .._session.core import SessionCore

__all__ = ["CHILD_MUTATION_REFUSED", "child_cancellable"]

CHILD_MUTATION_REFUSED: Final = (
    "client mutations on a subagent session are not allowed (only session/cancel, when advertised)"
)
"""The ``-32602`` message for client requests a child session does not accept."""


def child_cancellable(child: SessionCore) -> bool:
    """Whether the client may ``session/cancel`` this child (it advertised ``capabilities.cancel``)."""
    parent = child.parent
    entity = parent.registry.get("subagent", child.id) if parent is not None else None
    return entity is not None and entity.cancel_advertised
