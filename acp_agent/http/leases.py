"""Which server process has a session active, for replicas sharing one PostgreSQL store.

Within one process `ActiveSessions` keeps a session on one connection at a time. Across
processes, `StoreLeases` holds the store's lease of each session this process has active
([`SessionStore.acquire_session`][acp_agent.store.SessionStore.acquire_session]; for PostgreSQL a lease row with an
epoch, renewed and fenced: `acp_agent.store.leases`): another replica's ``session/resume`` of it
is refused while it is held. A crashed replica's leases are taken over at once, a frozen or
partitioned one's once they expire, and a database restart loses none.

`PostgresLeases` (advisory locks on a connection, lost when the database restarts) is what
servers used before; it is kept for one release and no longer used.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ..errors import StoreError

if TYPE_CHECKING:
    import psycopg

    from ..store import SessionStore

__all__ = ["RETAKE_WAIT", "Leases", "PostgresLeases", "StoreLeases", "lease_key"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

RETAKE_WAIT = 5.0
"""Seconds a reconnected lease connection waits for each lock its lost connection held (the server
ends that database session, and frees its locks, shortly after the connection drops)."""


def lease_key(session_id: str) -> int:
    """The advisory-lock key of a session: 64 bits of a hash of its id, as a signed bigint."""
    return int.from_bytes(hashlib.blake2b(b"acp-session:" + session_id.encode(), digest_size=8).digest(), "big",
                          signed=True)


class Leases:
    """Leases held nowhere but in this process (a store not shared with other processes)."""

    async def acquire(self, session_id: str) -> bool:
        """Take the lease of ``session_id`` for this process; ``False`` if another process holds it."""
        return True

    async def release(self, session_id: str) -> None:
        """Give the lease of ``session_id`` back."""

    async def close(self) -> None:
        """Give every lease back."""


class StoreLeases(Leases):
    """This process's leases in ``store``: one hold per session however often asked, given back once."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._held: set[str] = set()

    async def acquire(self, session_id: str) -> bool:
        """Take the session's lease in the store (at once or not at all). A database that cannot be reached does
        not stop the request here: it is logged, and the runtime's own hold fails with the store's error."""
        if session_id in self._held:
            return True
        try:
            if not await self.store.acquire_session(session_id):
                return False
        except StoreError as exc:
            logger.error("acp: cannot take the lease of session %s (%s)", session_id, exc)
            return True
        self._held.add(session_id)
        return True

    async def release(self, session_id: str) -> None:
        """Give the session's lease back (if this process holds it here)."""
        if session_id in self._held:
            self._held.discard(session_id)
            try:
                await self.store.release_session(session_id)
            except StoreError as exc:
                logger.error("acp: cannot give back the lease of session %s (%s)", session_id, exc)

    async def close(self) -> None:
        """Give every lease back."""
        for session_id in list(self._held):
            await self.release(session_id)


class PostgresLeases(Leases):
    """Session leases as PostgreSQL advisory locks on the database at ``conninfo`` (deprecated: servers use
    `StoreLeases` now; kept for one release)."""

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0) -> None:
        warnings.warn("acp_agent.http.leases.PostgresLeases is deprecated (its locks are lost when the database "
                      "restarts): use StoreLeases(PostgresStore(...)), the store's epoch-fenced leases",
                      DeprecationWarning, stacklevel=2)
        self.conninfo = conninfo
        self.connect_timeout = connect_timeout
        self._db: psycopg.Connection[Any] | None = None
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "PostgresLeases(...)"  # the conninfo may hold a password

    async def acquire(self, session_id: str) -> bool:
        """Take the session's advisory lock (at once or not at all). A database that cannot be
        reached does not stop the request: it is logged, and the lease counts as taken."""
        key = lease_key(session_id)
        try:
            return await self._run(self._acquire, key)
        except Exception as exc:
            logger.error("acp: cannot take the lease of session %s in the session database (%s); going ahead "
                         "without it", session_id, exc)
            return True

    async def release(self, session_id: str) -> None:
        """Release the session's advisory lock (if this process holds it)."""
        try:
            await self._run(self._release, lease_key(session_id))
        except Exception as exc:
            logger.error("acp: cannot release the lease of session %s (%s)", session_id, exc)

    async def close(self) -> None:
        """Close the lease connection: the database releases every lock it held."""
        await self._run(self._close)

    async def _run(self, func: Callable[..., T], *args: Any) -> T:
        def locked() -> T:
            with self._lock:
                return func(*args)

        with anyio.CancelScope(shield=True):
            result = await anyio.to_thread.run_sync(locked)
        return result

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._db is not None and not self._db.closed:
            return self._db
        db = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)))
        if self._held:
            # A new database session takes the locks again. The old one may not have ended on the server
            # yet (its backend still holds them for a moment), so wait for each up to RETAKE_WAIT seconds.
            db.execute(f"SET lock_timeout = '{int(RETAKE_WAIT * 1000)}ms'")
            for key in list(self._held):
                try:
                    db.execute("SELECT pg_advisory_lock(%s)", (key,))
                except psycopg.errors.LockNotAvailable:
                    self._held.discard(key)
                    logger.error("acp: lost the lease of a session while reconnecting to the session database; "
                                 "another replica may have resumed it")
            db.execute("SET lock_timeout = 0")
        self._db = db
        return db

    def _execute(self, query: str, key: int) -> bool:
        import psycopg

        for attempt in (1, 2):
            db = self._connect()
            try:
                row = db.execute(query, (key,)).fetchone()
                return bool(row is not None and row[0])
            except psycopg.OperationalError:
                db.close()
                self._db = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _acquire(self, key: int) -> bool:
        if key in self._held:
            return True
        if self._execute("SELECT pg_try_advisory_lock(%s)", key):
            self._held.add(key)
            return True
        return False

    def _release(self, key: int) -> None:
        if key in self._held:
            self._held.discard(key)
            self._execute("SELECT pg_advisory_unlock(%s)", key)

    def _close(self) -> None:
        db, self._db = self._db, None
        self._held.clear()
        if db is not None:
            db.close()
