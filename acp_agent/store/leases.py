"""Session leases in a PostgreSQL store: which process owns a session, proved by an epoch (a fencing token).

Processes sharing one PostgreSQL store (``serve`` replicas, stdio agents) take a *lease* on a session before
it becomes active in them: a row of ``acp_leases`` naming the owner, an *epoch* that grows by one at every
takeover, and when the lease expires. The owner renews its leases every third of their time to live
(`DEFAULT_LEASE_TTL` seconds, or ``ACP_AGENT_LEASE_TTL``, or ``PostgresStore(lease_ttl=...)``) from a thread
of its own, on a connection of its own. Another process takes a session over when its lease

- was given back (the session left its owner, saved),
- expired (the owner is frozen, partitioned from the database, or stopped renewing), or
- belongs to an owner whose lease connection is gone from the database server (the owner process died: the
  server notices at once), provided that owner renewed it since the server last started (after a database
  restart every owner reconnects and renews within a third of the time to live; until then its leases
  hold).

Every save of a session carries the owner's epoch, and the store refuses it when the row no longer names
this owner and epoch (`SessionTakenError`, logged): a stale owner never writes over the new one. The lease
rows live in the database, so a database restart loses none of them. An owner that finds a lease lost (at a
renewal, or when a save is refused) says so on its log and stops saving that session.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..errors import StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["DEFAULT_LEASE_TTL", "LeaseTable", "SessionTakenError"]

logger = logging.getLogger(__name__)

DEFAULT_LEASE_TTL: Final = 10.0
"""Seconds a lease lasts without renewal: the longest a frozen or partitioned owner keeps its sessions."""

TABLE: Final = """CREATE TABLE acp_leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    renewed_at TIMESTAMPTZ NOT NULL,
    owner_pid INTEGER NOT NULL
)"""
"""The lease table (the store's migration 3)."""

_TAKE: Final = """
INSERT INTO acp_leases AS l (session_id, owner, epoch, expires_at, renewed_at, owner_pid)
VALUES (%(sid)s, %(owner)s, 1, now() + %(ttl)s * interval '1 second', now(), pg_backend_pid())
ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,
    expires_at = excluded.expires_at, renewed_at = excluded.renewed_at, owner_pid = excluded.owner_pid
WHERE l.owner = '' OR l.owner = excluded.owner OR l.expires_at < now()
    OR (l.renewed_at > pg_postmaster_start_time()
        AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = l.owner_pid))
RETURNING epoch"""

_RENEW: Final = """
UPDATE acp_leases SET expires_at = now() + %(ttl)s * interval '1 second', renewed_at = now(),
    owner_pid = pg_backend_pid()
WHERE owner = %(owner)s AND session_id = ANY(%(sids)s) RETURNING session_id, epoch"""

_GIVE_BACK: Final = ("UPDATE acp_leases SET owner = '', expires_at = now() "
                     "WHERE session_id = %s AND owner = %s AND epoch = %s")

FENCE: Final = "SELECT 1 FROM acp_leases WHERE session_id = %s AND owner = %s AND epoch = %s FOR SHARE"
"""The predicate every write of a leased session runs first, in its transaction: the row names this owner and
epoch (and stays so until the write commits: a takeover waits for it)."""

_RETRY: Final = 0.5  # seconds between renewal attempts while the database is out of reach


class SessionTakenError(StoreError):
    """A write refused because another process took the session over (its lease has a newer epoch).

    Nothing was written. The session is no longer this process's: it stops saving it, and a client asking this
    process for it is refused ``-32002`` "Session is active in another process".
    """

    def __init__(self, session_id: str, epoch: int) -> None:
        super().__init__(f"session {session_id} was taken over by another process (this process's lease, epoch "
                         f"{epoch}, is lost); its write here is refused")
        self.session_id = session_id
        """The session."""
        self.epoch = epoch
        """The epoch this process held."""


@dataclass
class _Lease:
    epoch: int
    holders: int = 1
    lost: bool = False


class LeaseTable:
    """This process's leases in the database at ``conninfo`` (one per `PostgresStore`)."""

    def __init__(self, conninfo: str, ttl: float, *, connect_timeout: float = 10.0) -> None:
        self.conninfo = conninfo
        self.ttl = ttl
        """Seconds a lease lasts without renewal."""
        self.connect_timeout = connect_timeout
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        """This process's name in the lease rows (unique per table)."""
        self._held: dict[str, _Lease] = {}
        self._db: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()  # one database call at a time on the lease connection
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._down_since: float | None = None  # when renewals began failing (one log line per outage)

    def __repr__(self) -> str:
        return f"LeaseTable(owner={self.owner!r})"  # the conninfo may hold a password

    # -- asked from the event loop ------------------------------------------------------------------

    async def acquire(self, session_id: str) -> bool:
        """Take the lease of ``session_id`` (at once or not at all); ``False`` if another process holds it.
        Each ``True`` is matched by one `release`. Raises `StoreError` if the database cannot be reached."""
        taken: bool = await self._run(self._acquire, session_id)
        return taken

    async def release(self, session_id: str) -> None:
        """Give one hold back; the lease goes back to the table once no holder in this process is left."""
        await self._run(self._release, session_id)

    async def close(self) -> None:
        """Stop renewing and give every lease back (the end of the process's use of the store)."""
        self._stop.set()
        await self._run(self._close)

    def epoch(self, session_id: str) -> int | None:
        """The epoch a write of ``session_id`` must carry (``None``: not leased here, e.g. an agent's own import);
        raises `SessionTakenError` for a lease found lost."""
        lease = self._held.get(session_id)
        if lease is None:
            return None
        if lease.lost:
            raise SessionTakenError(session_id, lease.epoch)
        return lease.epoch

    def lost(self, session_id: str, epoch: int) -> SessionTakenError:
        """Record that a write of ``session_id`` with ``epoch`` was refused; the error to raise."""
        lease = self._held.get(session_id)
        if lease is not None and lease.epoch == epoch and not lease.lost:
            lease.lost = True
            logger.error("acp: session %s was taken over by another process (lease epoch %d lost); this process "
                         "stops saving it", session_id, epoch)
        return SessionTakenError(session_id, epoch)

    async def _run(self, func: Any, *args: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return func(*args)

        with anyio.CancelScope(shield=True):
            return await anyio.to_thread.run_sync(locked)

    # -- in worker threads, under the lock --------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._db is not None and not self._db.closed:
            return self._db
        try:
            self._db = psycopg.connect(self.conninfo, autocommit=True,
                                       connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the session database for the session leases: {exc}") from exc
        return self._db

    def _execute(self, query: str, params: Any) -> list[Any]:
        import psycopg

        db = self._connect()
        try:
            cursor = db.execute(query, params)
            return cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            db.close()
            self._db = None
            raise StoreError(f"session lease query failed: {exc}") from exc

    def _acquire(self, session_id: str) -> bool:
        lease = self._held.get(session_id)
        if lease is not None and not lease.lost:
            lease.holders += 1
            return True
        rows = self._execute(_TAKE, {"sid": session_id, "owner": self.owner, "ttl": self.ttl})
        if not rows:
            return False
        epoch = int(rows[0][0])
        if lease is not None:  # lost here, taken again: the holders still here keep counting
            lease.epoch, lease.lost = epoch, False
            lease.holders += 1
        else:
            self._held[session_id] = _Lease(epoch)
        self._start_heartbeat()
        return True

    def _release(self, session_id: str) -> None:
        lease = self._held.get(session_id)
        if lease is None:
            return
        lease.holders -= 1
        if lease.holders > 0:
            return
        del self._held[session_id]
        if lease.lost:
            return
        try:
            self._execute(_GIVE_BACK, (session_id, self.owner, lease.epoch))
        except StoreError as exc:
            logger.warning("acp: cannot give back the lease of session %s (%s); it expires in %.0f s",
                           session_id, exc, self.ttl)

    def _close(self) -> None:
        for session_id, lease in list(self._held.items()):
            lease.holders = 1
            self._release(session_id)
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # -- the heartbeat ----------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._beat, name="acp-session-leases", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        """Renew every lease held here every third of the time to live (every `_RETRY` seconds while the database
        is out of reach) until `close`."""
        wait = self.ttl / 3
        while not self._stop.wait(wait):
            with self._lock:
                if self._stop.is_set():
                    return
                wait = self._renew()

    def _renew(self) -> float:
        """One renewal round; the seconds until the next."""
        held = {sid: lease for sid, lease in self._held.items() if not lease.lost}
        if not held:
            return self.ttl / 3
        try:
            rows = self._execute(_RENEW, {"ttl": self.ttl, "owner": self.owner, "sids": list(held)})
        except StoreError as exc:
            if self._down_since is None:
                self._down_since = time.monotonic()
                logger.error("acp: cannot renew the session leases (%s); retrying every %.1f s: leases not renewed "
                             "within %.0f s may be taken over by another process", exc, _RETRY, self.ttl)
            return _RETRY
        if self._down_since is not None:
            logger.warning("acp: the session leases are renewed again after %.1f s",
                           time.monotonic() - self._down_since)
            self._down_since = None
        renewed = {str(sid): int(epoch) for sid, epoch in rows}
        for sid, lease in held.items():
            if renewed.get(sid) != lease.epoch:
                lease.lost = True
                logger.error("acp: the lease of session %s (epoch %d) was taken over by another process; this "
                             "process stops saving it", sid, lease.epoch)
        return self.ttl / 3
