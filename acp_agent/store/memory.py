"""``MemoryStore``: sessions kept in the agent process only (the test client's default)."""

from __future__ import annotations

from operator import attrgetter
from typing import ClassVar, Final

from ..records import SessionRecord
from .base import ListingKey, SessionStore, StoredSession

__all__ = ["MemoryStore"]


class MemoryStore(SessionStore):
    """Keeps the record objects themselves: nothing is copied or serialized, nothing outlives the process.

    A closed session stays in memory (so it can be resumed), exactly as a record in the
    store; ``session/delete`` drops it.
    """

    durable: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._records: dict[str, SessionRecord] = {}

    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        """The record itself (not a copy)."""
        return self._records.get(session_id)

    async def save(self, record: SessionRecord) -> None:
        """Keep ``record`` (the object, from now on)."""
        if not record.deleted:
            self._records[record.session_id] = record

    async def delete(self, session_id: str) -> bool:
        """Drop the record."""
        return self._records.pop(session_id, None) is not None

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of the record, if kept."""
        record = self._records.get(session_id)
        return StoredSession.of(record) if record is not None else None

    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None, principal: str | None = None,
                            after: ListingKey | None = None) -> list[StoredSession]:
        """Records most recently active first (see
        [`SessionStore.list_sessions`][acp_agent.store.SessionStore.list_sessions])."""
        chosen = [
            record for record in self._records.values()
            if (cwd is None or record.cwd == cwd) and (archived is None or record.archived == archived)
            and (principal is None or record.principal == principal)
            and (after is None or (record.updated_at, record.session_id) < after)
        ]
        chosen.sort(key=_LISTING_KEY, reverse=True)
        return [StoredSession.of(record) for record in chosen[offset:offset + limit]]


_LISTING_KEY: Final = attrgetter("updated_at", "session_id")
