"""The ``SessionStore`` interface: where sessions live when they are not active.

A store holds what ``session/list``, ``session/resume`` and replay need: each session's
metadata (`SessionRecord` without its live parts) and its compact
history. Every method is async (anyio): stores backed by blocking drivers run them in worker
threads, so they work on asyncio and trio alike.

Saving is incremental: [`SessionStore.save`][acp_agent.store.SessionStore.save] writes the metadata and only the history
entries that changed since the record was last saved (``History.take_changes``). Stores
backed by blocking drivers run them with [`SessionStore.in_thread`][acp_agent.store.SessionStore.in_thread] under
[`SessionStore.lock`][acp_agent.store.SessionStore.lock] (or, as the SQLite store does, queue them in order), so saves
land in the order their changes were taken.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import anyio
import anyio.lowlevel

from ..records import DEFAULT_PRINCIPAL, SessionRecord

__all__ = ["ListingKey", "SessionStore", "StoredSession"]

ListingKey = tuple[str, str]
"""Where a listing stands: the ``(updated_at, session_id)`` of the last session of the previous page."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One session as ``session/list`` shows it (no history)."""

    session_id: str
    cwd: str
    updated_at: str
    created_at: str
    title: str | None = None
    additional_directories: list[str] = field(default_factory=list)
    archived: bool = False
    meta: dict[str, Any] | None = None
    principal: str = DEFAULT_PRINCIPAL

    @classmethod
    def of(cls, record: SessionRecord) -> StoredSession:
        """The listing of ``record``."""
        return cls(record.session_id, record.cwd, record.updated_at, record.created_at, record.title,
                   list(record.additional_directories), record.archived, record.meta, record.principal)

    @property
    def key(self) -> ListingKey:
        """Its place in a listing (most recently active first; see
        [`SessionStore.list_sessions`][acp_agent.store.SessionStore.list_sessions])."""
        return (self.updated_at, self.session_id)


class SessionStore(ABC):
    """Where sessions are kept between their active spells (and across restarts, if durable).

    Subclass it to keep sessions elsewhere; [`MemoryStore`][acp_agent.store.MemoryStore],
    [`SqliteStore`][acp_agent.store.SqliteStore] and ``acp_agent.store.postgres.PostgresStore`` are
    the stores that come with acp-agent. Session ids are unique, so one store can be shared
    by every connection (and, for a shared database, every process) of an agent; a session
    is active in one process at a time.
    """

    durable: ClassVar[bool] = True
    """Whether records outlive the process (a durable store is saved to at the end of each turn)."""

    def __init__(self) -> None:
        self._thread_lock = threading.Lock()  # one blocking call at a time (a driver connection)
        self._loop_lock: tuple[anyio.lowlevel.EventLoopToken, anyio.Lock] | None = None

    async def open(self) -> None:
        """Make the store ready (create or migrate its schema); called before first use, idempotent.

        Raises [`StoreUnusableError`][acp_agent.store.StoreUnusableError] for a store that must not be used.
        """
        return None

    async def close(self) -> None:
        """Release what the store holds open (it opens again on next use)."""
        return None

    @abstractmethod
    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        """The stored session ``session_id`` (a new record object), or ``None`` if there is none.

        ``terminal_tail`` is how many bytes of output each terminal of its history keeps.
        """

    @abstractmethod
    async def save(self, record: SessionRecord) -> None:
        """Write ``record``: its metadata, its ``data`` if JSON-serializable, and its history's changes.

        Also how an agent adds sessions of its own (e.g. imported from another tool's history):
        build a `SessionRecord`, record its items into its history, and
        save it; ``session/list`` then offers it and ``session/resume`` replays it.
        Raises [`StoreError`][acp_agent.store.StoreError] if it could not be written.
        """

    def save_now(self, record: SessionRecord) -> bool:
        """Save ``record`` at once, without awaiting anything, if this store can; ``False`` if it could not finish
        the save so: [`save`][acp_agent.store.SessionStore.save] must then be awaited (it writes whatever this call
        left).

        The end of a turn tries this first, so a store that can (``SqliteStore`` appends a small save to its
        journal) saves a turn with no await and no cancel scope around it. The default returns ``False``: a
        store that does not override this is saved with [`save`][acp_agent.store.SessionStore.save]. Raises like
        [`save`][acp_agent.store.SessionStore.save].
        """
        return False

    async def sync(self) -> None:
        """Make every save so far visible to other processes sharing the store (a store that writes
        saves to a journal first commits them now; the others have nothing to do).

        Called when a session leaves memory. Raises [`StoreError`][acp_agent.store.StoreError] if that failed.
        """
        return None

    async def acquire_session(self, session_id: str) -> bool:
        """Take this process's hold on ``session_id`` before it becomes active here; ``False`` if another
        process sharing the store has it active (the request is then refused ``-32002``).

        Every ``True`` is matched by one [`release_session`][acp_agent.store.SessionStore.release_session], once the
        session left this process (saved). The default grants every hold: a store one process uses, or one whose
        processes are kept apart otherwise (the HTTP server's leases for ``PostgresStore``). ``SqliteStore`` holds a
        lock per session that ends with its process (`acp_agent.store.locks`).
        """
        return True

    async def release_session(self, session_id: str) -> None:
        """Give back a hold taken with [`acquire_session`][acp_agent.store.SessionStore.acquire_session]."""
        return None

    @abstractmethod
    async def delete(self, session_id: str) -> bool:
        """Remove a session and its history; ``False`` if there was none."""

    @abstractmethod
    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None, principal: str | None = None,
                            after: ListingKey | None = None) -> list[StoredSession]:
        """Stored sessions, most recently active first: ``updated_at`` descending, then ``session_id``
        descending (a total order, so pages never repeat or skip a session that did not change).

        Filters, applied before ``offset`` and ``limit``: ``cwd``; ``archived`` keeps only archived
        sessions (``True``) or only the others (``False``); ``principal`` keeps only that principal's
        sessions (a store must apply it: it is what keeps users apart); ``after`` keeps only the sessions
        ordered after that key (the [`StoredSession.key`][acp_agent.store.StoredSession.key] of the last session of the
        previous page).
        """

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of one stored session, or ``None`` (without its history where the store can).

        The default loads the whole record; the stores of acp-agent read the metadata only.
        """
        record = await self.load(session_id)
        return StoredSession.of(record) if record is not None else None

    # -- for stores backed by blocking drivers -------------------------------------------------

    def lock(self) -> anyio.Lock:
        """The store's lock on the running event loop: hold it from taking a record's changes to
        writing them, so a later save of a record never lands before an earlier one (FIFO)."""
        token = anyio.lowlevel.current_token()
        if self._loop_lock is None or self._loop_lock[0] != token:
            self._loop_lock = (token, anyio.Lock(fast_acquire=True))  # the store may outlive an event loop (tests)
        return self._loop_lock[1]

    async def in_thread(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` in a worker thread, one call at a time; never cancelled
        once started (a write is never left half-done)."""

        def locked() -> T:
            with self._thread_lock:
                return func(*args)

        with anyio.CancelScope(shield=True):
            result = await anyio.to_thread.run_sync(locked)
        return result
