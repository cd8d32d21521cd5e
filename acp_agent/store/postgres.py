"""``PostgresStore``: sessions in a PostgreSQL database shared by several agent processes.

For agents that run as several replicas (behind a load balancer): a session created and
closed on one replica is listed and resumed, with replay, on another. psycopg 3 (the
``postgres`` extra: ``pip install 'acp-agent-sdk[postgres]'``) is imported when the store opens,
never by an agent that does not use it; its blocking connections are driven from anyio worker
threads, so the store works on asyncio and trio: one connection for reads and deletes (one call at a time), and
up to ``writers`` more, opened when needed, for saves.

Saves are **pooled and group-committed**: up to ``writers`` (2) transactions of saves run side by side, each on a
connection of its own, and the saves of several sessions that become due while every writer is busy (the ends of
turns of many connections of one ``serve`` replica) are written together in the next free writer's transaction,
each statement once for all of them. Every ``save`` still returns only once the transaction holding its changes
committed (a turn's ``idle`` goes out after that, as the crash contract asks); the saves of one session commit in
the order they were made (a batch waits for a transaction under way that writes one of its sessions); a save that
fails in a batch is tried again alone, so one bad session does not fail the others.

Tables: ``acp_sessions``, ``acp_history`` and ``acp_schema_migrations`` (the same schema and
migration scheme as the SQLite store), and ``acp_leases`` (migration 3): which process owns each
active session, with an epoch every save is checked against (`acp_agent.store.leases`). A database
whose newest migration is above this module's ``SCHEMA_VERSION`` is refused. Migrations run under
an advisory lock, so replicas that start together apply them once. A lost connection fails the
call (``StoreError``) and is reopened on the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel
import anyio.to_thread
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


_Save = tuple[tuple[Any, ...], bool, list[tuple[str, int, str, str]], list[int], tuple[str, str, int] | None]
"""One session's save as `_save` takes it: the session's columns, whether its history is written in full, the
history rows to write, the sequence numbers removed, and its lease ``(session_id, owner, epoch)`` if leased."""


@dataclass(slots=True, eq=False)
class _Batch:
    """The saves due for the next transaction: each record once, in the order they became due."""

    records: dict[int, SessionRecord] = field(default_factory=dict)  # id(record) -> record
    errors: dict[int, StoreError] = field(default_factory=dict)  # id(record) -> why its save failed
    started: bool = False  # a writer took it (no save joins it any more)
    finished: anyio.Event | None = None  # set once its transaction ended (committed, or failed for ``errors``)

    def writes(self, session_ids: set[str]) -> bool:
        """Whether one of ``session_ids`` is saved in this batch."""
        return any(record.session_id in session_ids for record in self.records.values())


class PostgresStore(SessionStore):
    """Sessions in the PostgreSQL database at ``conninfo`` (a ``postgresql://`` URL or key=value string)."""

    def __init__(self, conninfo: str, *, connect_timeout: float = 10.0, lease_ttl: float | None = None,
                 writers: int = 2) -> None:
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
        self.writers = max(1, writers)
        """How many transactions of saves may run at once (each on a connection of its own, opened when needed)."""
        self._db: psycopg.Connection[Any] | None = None  # reads, deletes and migrations
        self._migrated = False
        self._due: _Batch | None = None  # the saves waiting for a free writer
        self._writing: list[_Batch] = []  # batches whose changes were taken and are being written
        self._idle: list[psycopg.Connection[Any]] = []  # writers' connections not in use
        self._slots: tuple[anyio.lowlevel.EventLoopToken, anyio.Semaphore] | None = None

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
        db = self._connect()
        try:
            return _transaction(db, what, func, *args)
        finally:
            if db.closed:
                self._db = None  # reconnect next time

    async def close(self) -> None:
        """Give the session leases back and close the connections (they reconnect on next use)."""
        await self.leases.close()
        if self._db is not None or self._idle:
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
        idle, self._idle = self._idle, []
        for connection in [db, *idle]:
            if connection is not None:
                connection.close()

    # -- records -----------------------------------------------------------------------------

    async def save(self, record: SessionRecord) -> None:
        """Write the metadata and the history entries changed since the last save; return once committed.

        Saves due together are written in one transaction (see the module docstring): this one joins the batch
        waiting for a writer, and the first of its saves that gets a writer writes that whole batch.
        """
        await self.open()
        batch = self._due
        if batch is None:
            batch = self._due = _Batch()
        batch.records.setdefault(id(record), record)
        if not batch.started:
            async with self._writer_slots():  # a save cancelled meanwhile leaves its changes untaken (or joined)
                if not batch.started:
                    batch.started = True
                    if self._due is batch:
                        self._due = None  # later saves start the next batch
                    with anyio.CancelScope(shield=True):  # its other saves wait for it
                        await self._write(batch)
        if batch.finished is not None:
            await batch.finished.wait()
        error = batch.errors.get(id(record))
        if error is not None:
            raise error

    def _writer_slots(self) -> anyio.Semaphore:
        token = anyio.lowlevel.current_token()
        if self._slots is None or self._slots[0] != token:
            self._slots = (token, anyio.Semaphore(self.writers, fast_acquire=True))
        return self._slots[1]

    async def _settled(self, session_ids: set[str]) -> None:
        """Wait until no transaction under way writes one of ``session_ids``."""
        while busy := [b for b in self._writing if b.writes(session_ids)]:
            for batch in busy:
                assert batch.finished is not None
                await batch.finished.wait()

    async def _write(self, batch: _Batch) -> None:
        """Take the changes of ``batch``'s records and write them in one transaction, once no transaction under
        way writes one of its sessions (so a session's saves commit in order).

        A save cancelled while it waited leaves its record in the batch: it is written all the same, or, if no
        save comes after it, its changes are still untaken and the next save writes them.
        """
        finished = batch.finished = anyio.Event()
        records: list[SessionRecord] = []
        failed: dict[int, StoreError] = {}
        try:
            await self._settled({record.session_id for record in batch.records.values()})
            self._writing.append(batch)
            saves: list[_Save] = []
            for record in batch.records.values():
                if record.deleted:
                    continue
                changes = record.history.take_changes()
                try:
                    sid = record.session_id
                    epoch = self.leases.epoch(sid)  # a lease found lost refuses the write at once
                    rows = [(sid, seq, kind, data.decode()) for seq, kind, data in changes.encoded_entries()]
                    columns = (sid, record.cwd, record.title, record.created_at, record.updated_at, record.archived,
                               encode_info_text(record), encode_state_text(record), record.principal)
                except Exception as exc:
                    record.history.unsaved()
                    batch.errors[id(record)] = (exc if isinstance(exc, StoreError) else
                                                StoreError(f"could not save session {record.session_id}: {exc}"))
                    continue
                records.append(record)
                fence = (sid, self.leases.owner, epoch) if epoch is not None else None
                saves.append((columns, changes.full, rows, changes.removed, fence))
            if saves:
                db = self._idle.pop() if self._idle else None
                db, failed, fenced = await anyio.to_thread.run_sync(self._save_batch, db, saves)
                if db is not None:
                    self._idle.append(db)
                for index in fenced:
                    sid, _, epoch = saves[index][4] or ("", "", 0)
                    failed[index] = self.leases.lost(sid, epoch)
        except BaseException as exc:  # not expected: every save of the batch fails with it
            failed = {i: StoreError(f"could not save session {r.session_id}: {exc}") for i, r in enumerate(records)}
            raise
        finally:
            for index, error in failed.items():
                records[index].history.unsaved()
                batch.errors[id(records[index])] = error
            if batch in self._writing:
                self._writing.remove(batch)
            finished.set()

    def _save_batch(self, db: psycopg.Connection[Any] | None, saves: list[_Save],
                    ) -> tuple[psycopg.Connection[Any] | None, dict[int, StoreError], list[int]]:
        """In a worker thread, on a writer's connection (``None``: a new one): write ``saves`` in one
        transaction; if that fails while the connection still works, each alone (in its own transaction, in
        order). The connection if it still works, the saves that failed and those refused because their
        session's lease is no longer this process's, by index."""
        import psycopg

        if db is None or db.closed:
            try:
                db = psycopg.connect(self.conninfo, connect_timeout=max(1, int(self.connect_timeout)))
            except psycopg.Error as exc:
                return None, {i: _failed(save, exc) for i, save in enumerate(saves)}, []
        pending = list(range(len(saves)))
        fenced: list[int] = []  # saves refused: their session's lease is no longer this process's
        while len(pending) > 1:
            try:
                _transaction(db, f"save {len(pending)} sessions", _save_all, [saves[i] for i in pending],
                             pipelined=True)
                return db, {}, fenced
            except _Fenced as exc:  # nothing was written: the others again, without them
                lost = {pending[i] for i in exc.indexes}
                fenced += sorted(lost)
                pending = [i for i in pending if i not in lost]
            except Exception as exc:
                if db.closed:  # the connection was lost: none of them was written
                    return None, {i: _failed(saves[i], exc) for i in pending}, fenced
                break
        failed: dict[int, StoreError] = {}
        for index in pending:
            try:
                _transaction(db, f"save session {saves[index][0][0]}", _save, *saves[index], pipelined=True)
            except _Fenced:
                fenced.append(index)
            except Exception as exc:
                failed[index] = exc if isinstance(exc, StoreError) else _failed(saves[index], exc)
        return (None if db.closed else db), failed, fenced

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
        await self._settled({session_id})  # a save under way does not bring it back after the delete
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


# A save's statements; a batch runs each once for all its sessions (``executemany``, pipelined by psycopg).
_UPSERT_SESSION: Final = (
    f"INSERT INTO acp_sessions ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id) "
    "DO UPDATE SET cwd = excluded.cwd, title = excluded.title, updated_at = excluded.updated_at, "
    "archived = excluded.archived, info = excluded.info, state = excluded.state")
_FENCED_UPSERT_SESSION: Final = (
    f"INSERT INTO acp_sessions ({_COLUMNS}) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s WHERE EXISTS ({FENCE}) "
    "ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd, title = excluded.title, "
    "updated_at = excluded.updated_at, archived = excluded.archived, info = excluded.info, state = excluded.state "
    "RETURNING 1")
"""A leased session's row, written only while `FENCE` holds (its lease row stays locked until the commit): one
statement, its one returned row the proof; none: the lease is gone and nothing was written."""
_FENCED_UPSERT_SESSIONS: Final = (
    f"INSERT INTO acp_sessions ({_COLUMNS}) SELECT {_COLUMNS} FROM unnest(%s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::text[], %s::boolean[], %s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[]) "
    f"AS v({_COLUMNS}, owner, epoch) WHERE EXISTS (SELECT 1 FROM acp_leases l WHERE l.session_id = v.session_id "
    "AND l.owner = v.owner AND l.epoch = v.epoch FOR SHARE OF l) "
    "ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd, title = excluded.title, "
    "updated_at = excluded.updated_at, archived = excluded.archived, info = excluded.info, state = excluded.state "
    "RETURNING session_id")
"""`_FENCED_UPSERT_SESSION` for many sessions in one statement (a column array each): the sessions written."""
_UPSERT_HISTORIES: Final = (
    "INSERT INTO acp_history (session_id, seq, kind, item) SELECT * FROM unnest(%s::text[], %s::integer[], "
    "%s::text[], %s::text[]) ON CONFLICT (session_id, seq) DO UPDATE SET kind = excluded.kind, item = excluded.item")
"""`_UPSERT_HISTORY` for many rows in one statement (a column array each)."""
_DELETE_HISTORIES: Final = "DELETE FROM acp_history WHERE session_id = ANY(%s)"
_DELETE_REMOVED: Final = "DELETE FROM acp_history WHERE session_id = %s AND seq = ANY(%s)"
_UPSERT_HISTORY: Final = (
    "INSERT INTO acp_history (session_id, seq, kind, item) VALUES (%s, %s, %s, %s) "
    "ON CONFLICT (session_id, seq) DO UPDATE SET kind = excluded.kind, item = excluded.item")


def _save(db: psycopg.Connection[Any], columns: tuple[Any, ...], full: bool, rows: list[tuple[str, int, str, str]],
          removed: list[int], fence: tuple[str, str, int] | None) -> None:
    """Write a session; raises `_Fenced` (the caller's transaction then rolls back) if ``fence``, its
    ``(session_id, owner, epoch)``, is no longer the session's lease."""
    _save_all(db, [(columns, full, rows, removed, fence)])


class _Fenced(Exception):
    """Saves of a batch whose session's lease is no longer this process's (their indexes); nothing was written."""

    def __init__(self, indexes: list[int]) -> None:
        super().__init__(indexes)
        self.indexes = indexes


def _transaction(db: psycopg.Connection[Any], what: str, func: Any, *args: Any, pipelined: bool = False) -> Any:
    """``func(db, *args)`` in one transaction of ``db``; a failure becomes a `StoreError` (and a lost connection
    is closed). ``pipelined``: in psycopg's pipeline mode (statements are sent without waiting for each result:
    one round trip for the transaction; a statement's results are there once fetched or the pipeline synced)."""
    import psycopg

    try:
        if pipelined and psycopg.Pipeline.is_supported():
            with db.pipeline(), db.transaction():
                return func(db, *args)
        with db.transaction():
            return func(db, *args)
    except psycopg.Error as exc:
        if db.closed or isinstance(exc, psycopg.OperationalError):
            db.close()
        raise StoreError(f"could not {what}: {exc}") from exc


def _failed(save: _Save, exc: Exception) -> StoreError:
    error = StoreError(f"could not save session {save[0][0]}: {exc}")
    error.__cause__ = exc
    return error


def _save_all(db: psycopg.Connection[Any], saves: list[_Save]) -> None:
    """Write ``saves`` (one per session) in the transaction under way, each statement once for all of them; a
    leased session's row only while its lease holds (`_FENCED_UPSERT_SESSION`, first in the transaction, its
    answers read last: in pipeline mode one round trip); raises `_Fenced` (the caller's transaction then rolls
    back) for those whose lease is gone."""
    fenced: list[int] = []  # the indexes of leased sessions' saves
    params: list[tuple[Any, ...]] = []
    for index, save in enumerate(saves):
        if save[4] is not None:
            fenced.append(index)
            params.append(save[0] + save[4])
    with db.cursor() as proofs, db.cursor() as cursor:
        if len(params) == 1:
            proofs.execute(_FENCED_UPSERT_SESSION, params[0])
        elif params:  # one statement, a column array each: far less work per session than one execute each
            columns = [list(column) for column in zip(*params, strict=True)]
            del columns[9]  # the lease's session id: the session's own
            proofs.execute(_FENCED_UPSERT_SESSIONS, columns)
        cleared = [save[0][0] for save in saves if save[1]]
        removed = [(save[0][0], save[3]) for save in saves if save[3] and not save[1]]
        rows = [row for save in saves for row in save[2]]
        if cleared:
            cursor.execute(_DELETE_HISTORIES, (cleared,))
        for statement, many in ((_UPSERT_SESSION, [save[0] for save in saves if save[4] is None]),
                                (_DELETE_REMOVED, removed)):
            if len(many) == 1:
                cursor.execute(statement, many[0])
            elif many:
                cursor.executemany(statement, many)
        if len(rows) == 1:
            cursor.execute(_UPSERT_HISTORY, rows[0])
        elif rows:
            cursor.execute(_UPSERT_HISTORIES, [list(column) for column in zip(*rows, strict=True)])
        if len(params) == 1:
            lost = [] if proofs.fetchone() is not None else fenced
        elif params:
            written = {row[0] for row in proofs.fetchall()}
            lost = [index for index in fenced if saves[index][0][0] not in written]
        else:
            lost = []
        if lost:
            raise _Fenced(lost)  # the transaction is rolled back: nothing of the batch is written


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
