"""``PostgresStore``: sessions in a PostgreSQL database shared by several agent processes.

For agents that run as several replicas (behind a load balancer): a session created and
closed on one replica is listed and resumed, with replay, on another. psycopg 3 (the
``postgres`` extra: ``pip install 'acp-agent-sdk[postgres]'``) is imported when the store opens,
never by an agent that does not use it; its blocking connection is driven from anyio worker
threads (one call at a time per store), so the store works on asyncio and trio.

Tables: ``acp_sessions``, ``acp_history`` and ``acp_schema_migrations`` (the same schema and
migration scheme as the SQLite store), and ``acp_leases`` (migration 3): which process owns each
active session, with an epoch every save is checked against (`acp_agent.store.leases`). A database
whose newest migration is above this module's ``SCHEMA_VERSION`` is refused. Migrations run under
an advisory lock, so replicas that start together apply them once. A lost connection fails the
call (``StoreError``) and is reopened on the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import orjson

from .._util.environment import LEASE_TTL, read
from ..errors import StoreError, StoreUnusableError
from ..records import SessionRecord, now_text
from .base import ListingKey, SessionStore, StoredSession
from .codec import LISTING_ORDER, encode_info_text, encode_state_text, listing_filters, record_from
from .leases import FENCE, LeaseTable
from .leases import TABLE as LEASE_TABLE

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

_MIGRATIONS: Final[list[tuple[int, list[str]]]] = [
    (1, [
        """CREATE TABLE acp_sessions (
            seq BIGSERIAL NOT NULL UNIQUE,
            session_id TEXT PRIMARY KEY,
            cwd TEXT NOT NULL,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            archived BOOLEAN NOT NULL DEFAULT FALSE,
            info TEXT NOT NULL,
            state TEXT NOT NULL
        )""",
        "CREATE INDEX acp_sessions_by_cwd ON acp_sessions (cwd, seq)",
        """CREATE TABLE acp_history (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            item TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
    ]),
    (2, [  # principals: whose each session is (earlier sessions: "default"); listings most recently active first
        "ALTER TABLE acp_sessions ADD COLUMN principal TEXT NOT NULL DEFAULT 'default'",
        "CREATE INDEX acp_sessions_by_principal ON acp_sessions (principal, updated_at, session_id)",
    ]),
    (3, [LEASE_TABLE]),  # session leases: owner, epoch (fencing token), expiry (`acp_agent.store.leases`)
]
SCHEMA_VERSION: Final = _MIGRATIONS[-1][0]
"""The newest schema version this acp-agent reads and writes."""

_LOCK_KEY: Final = 0x6163705F  # advisory lock held while migrating ("acp_")
_COLUMNS: Final = "session_id, cwd, title, created_at, updated_at, archived, info, state, principal"
_LISTED: Final = "session_id, cwd, title, created_at, updated_at, archived, info, principal"  # what a listing reads


class PostgresStore(SessionStore):
    """Sessions in the PostgreSQL database at ``conninfo`` (a ``postgresql://`` URL or key=value string)."""

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0, lease_ttl: float | None = None) -> None:
        super().__init__()
        self.conninfo = conninfo
        """Where the database is."""
        self.connect_timeout = connect_timeout
        """Seconds to wait for a connection."""
        ttl = read(LEASE_TTL) if lease_ttl is None else lease_ttl
        self.leases = LeaseTable(conninfo, ttl, connect_timeout=connect_timeout)
        """This process's session leases (`acp_agent.store.leases`): ``lease_ttl`` seconds each without renewal
        (default ``ACP_AGENT_LEASE_TTL``, else
        [`DEFAULT_LEASE_TTL`][acp_agent.store.leases.DEFAULT_LEASE_TTL])."""
        self._db: psycopg.Connection[Any] | None = None
        self._migrated = False

    def __repr__(self) -> str:
        return "PostgresStore(...)"  # the conninfo may hold a password

    # -- connection ------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and apply missing migrations (refusing a newer schema)."""
        if self._db is None or not self._migrated:
            await self.in_thread(self._connect)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            import psycopg
        except ImportError as exc:
            raise StoreUnusableError("PostgresStore needs psycopg 3: pip install 'acp-agent-sdk[postgres]'") from exc
        if self._db is not None and not self._db.closed:
            return self._db
        try:
            db = psycopg.connect(self.conninfo, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the session database: {exc}") from exc
        try:
            if not self._migrated:
                self._migrate(db)
                self._migrated = True
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    def _migrate(self, db: psycopg.Connection[Any]) -> None:
        import psycopg

        try:
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                db.execute("CREATE TABLE IF NOT EXISTS acp_schema_migrations "
                           "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
                row = db.execute("SELECT coalesce(max(version), 0) FROM acp_schema_migrations").fetchone()
                current = int(row[0]) if row is not None else 0
                if current > SCHEMA_VERSION:
                    raise StoreUnusableError(
                        f"the session database has schema version {current}, newer than {SCHEMA_VERSION} (the "
                        "newest this acp-agent knows): it was written by a newer acp-agent")
                for version, statements in _MIGRATIONS:
                    if version > current:
                        for statement in statements:
                            db.execute(statement)
                        db.execute("INSERT INTO acp_schema_migrations VALUES (%s, %s)", (version, now_text()))
        except psycopg.Error as exc:
            raise StoreUnusableError(f"cannot prepare the session database: {exc}") from exc

    def _call(self, what: str, func: Any, *args: Any) -> Any:
        """Run ``func(db, *args)`` in one transaction; a failure becomes [`StoreError`][acp_agent.store.StoreError]."""
        import psycopg

        db = self._connect()
        try:
            with db.transaction():
                return func(db, *args)
        except psycopg.Error as exc:
            if db.closed or isinstance(exc, psycopg.OperationalError):
                db.close()
                self._db = None  # reconnect next time
            raise StoreError(f"could not {what}: {exc}") from exc

    async def close(self) -> None:
        """Give the session leases back and close the connection (it reconnects on next use)."""
        await self.leases.close()
        if self._db is not None:
            await self.in_thread(self._close)

    # -- which process has a session -----------------------------------------------------------

    async def acquire_session(self, session_id: str) -> bool:
        """Take this process's lease of ``session_id`` (`acp_agent.store.leases`); ``False`` if another process
        holds it. Raises [`StoreError`][acp_agent.store.StoreError] if the database cannot be reached."""
        await self.open()
        return await self.leases.acquire(session_id)

    async def release_session(self, session_id: str) -> None:
        """Give back a hold taken with [`acquire_session`][acp_agent.store.postgres.PostgresStore.acquire_session]."""
        await self.leases.release(session_id)

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    # -- records -----------------------------------------------------------------------------

    async def save(self, record: SessionRecord) -> None:
        """Write the metadata and the history entries changed since the last save, in one transaction."""
        await self.open()
        async with self.lock():
            if record.deleted:
                return
            changes = record.history.take_changes()
            try:
                sid = record.session_id
                epoch = self.leases.epoch(sid)  # a lease found lost refuses the write at once
                rows = [(sid, seq, kind, data.decode()) for seq, kind, data in changes.encoded_entries()]
                columns = (record.session_id, record.cwd, record.title, record.created_at, record.updated_at,
                           record.archived, encode_info_text(record), encode_state_text(record), record.principal)
                fence = (sid, self.leases.owner, epoch) if epoch is not None else None
                if not await self.in_thread(self._call, f"save session {record.session_id}", _save, columns,
                                            changes.full, rows, changes.removed, fence):
                    raise self.leases.lost(sid, epoch or 0)
            except BaseException:
                record.history.unsaved()
                raise

    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        """The stored session, rebuilt (history included), or ``None``."""
        await self.open()
        found = await self.in_thread(self._call, f"load session {session_id}", _load, session_id)
        if found is None:
            return None
        row, entries = found
        columns = dict(zip(_COLUMNS.split(", "), row, strict=True))
        return record_from(columns, columns["info"], columns["state"], entries, terminal_tail=terminal_tail)

    async def delete(self, session_id: str) -> bool:
        """Remove the session and its history."""
        await self.open()
        async with self.lock():
            gone: bool = await self.in_thread(self._call, f"delete session {session_id}", _delete, session_id)
            return gone

    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None, principal: str | None = None,
                            after: ListingKey | None = None) -> list[StoredSession]:
        """Stored sessions, most recently active first (see
        [`SessionStore.list_sessions`][acp_agent.store.SessionStore.list_sessions])."""
        await self.open()
        rows = await self.in_thread(self._call, "list sessions", _list, cwd, offset, limit, archived, principal, after)
        return [_stored(*row) for row in rows]

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of one stored session (its history is not read)."""
        await self.open()
        row = await self.in_thread(self._call, f"read session {session_id}", _find, session_id)
        return _stored(*row) if row is not None else None


def _stored(session_id: str, cwd: str, title: str | None, created_at: str, updated_at: str, archived: bool,
            info: str, principal: str) -> StoredSession:
    doc = orjson.loads(info)
    return StoredSession(session_id, cwd, updated_at, created_at, title, list(doc.get("additionalDirectories") or []),
                         bool(archived), doc.get("meta"), principal)


def _save(db: psycopg.Connection[Any], columns: tuple[Any, ...], full: bool, rows: list[tuple[str, int, str, str]],
          removed: list[int], fence: tuple[str, str, int] | None) -> bool:
    """Write a session; ``False`` (nothing written) if ``fence``, its ``(session_id, owner, epoch)``, is no longer
    the session's lease."""
    sid = columns[0]
    if fence is not None and db.execute(FENCE, fence).fetchone() is None:
        return False
    db.execute(
        f"INSERT INTO acp_sessions ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) "
        "DO UPDATE SET cwd = excluded.cwd, title = excluded.title, updated_at = excluded.updated_at, "
        "archived = excluded.archived, info = excluded.info, state = excluded.state", columns)
    if full:
        db.execute("DELETE FROM acp_history WHERE session_id = %s", (sid,))
    elif removed:
        db.execute("DELETE FROM acp_history WHERE session_id = %s AND seq = ANY(%s)", (sid, removed))
    if rows:
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO acp_history (session_id, seq, kind, item) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (session_id, seq) DO UPDATE SET kind = excluded.kind, item = excluded.item", rows)
    return True


def _load(db: psycopg.Connection[Any], session_id: str) -> tuple[tuple[Any, ...], list[Any]] | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM acp_sessions WHERE session_id = %s", (session_id,)).fetchone()
    if row is None:
        return None
    entries = db.execute("SELECT seq, kind, item FROM acp_history WHERE session_id = %s ORDER BY seq",
                         (session_id,)).fetchall()
    return tuple(row), list(entries)


def _delete(db: psycopg.Connection[Any], session_id: str) -> bool:
    db.execute("DELETE FROM acp_history WHERE session_id = %s", (session_id,))
    return db.execute("DELETE FROM acp_sessions WHERE session_id = %s", (session_id,)).rowcount > 0


def _list(db: psycopg.Connection[Any], cwd: str | None, offset: int, limit: int, archived: bool | None,
          principal: str | None, after: ListingKey | None) -> list[Any]:
    where, params = listing_filters(cwd, archived, "%s", principal, after)
    return db.execute(f"SELECT {_LISTED} FROM acp_sessions {where} {LISTING_ORDER} LIMIT %s OFFSET %s",
                      [*params, limit, offset]).fetchall()


def _find(db: psycopg.Connection[Any], session_id: str) -> Any:
    return db.execute(f"SELECT {_LISTED} FROM acp_sessions WHERE session_id = %s", (session_id,)).fetchone()
