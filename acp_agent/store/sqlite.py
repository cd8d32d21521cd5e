"""``SqliteStore``: sessions in one SQLite file per agent, the default of ``run_stdio``.

stdlib :mod:`sqlite3`, so it works on asyncio and trio. The file is in WAL mode with
``synchronous=NORMAL``: a committed save survives the agent process being killed (SIGKILL); a
power loss may lose the last saves but never corrupts the file. Several processes may share a
file: writers wait for each other (``busy_timeout``) and every save is one transaction.

Where the calls run: opening, loading, listing and deleting run in anyio worker threads (one
call at a time per store). A save is usually small (the end of a turn: a few history rows), and
in WAL mode with ``synchronous=NORMAL`` its commit is a few writes to the WAL file and no
``fsync``, so it is made right on the event loop (:data:`INLINE_ROWS` rows and
:data:`INLINE_BYTES` bytes at most): a worker thread's hand-over costs more than the commit
(`make bench`, bench/README.md). The inline commit never waits: the connection's busy timeout
is 0 outside worker threads, and a file locked by another process, a bigger save or a save
while a thread call runs goes to a worker thread as before. WAL checkpoints (which ``fsync``)
never run inline: automatic checkpoints are off on the loop, and after
:data:`INLINE_CHECKPOINT` inline saves the next save goes to a thread, which checkpoints.

The schema is versioned: ``schema_migrations`` lists the migrations applied, and opening a
file applies the missing ones in one transaction. A file whose newest migration is above
:data:`SCHEMA_VERSION` (a newer acp-agent wrote it), or that is not a readable SQLite
database, is refused with :class:`~acp_agent.errors.StoreUnusableError` and left untouched.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from ..errors import StoreError, StoreUnusableError
from ..records import SessionRecord, now_text
from .base import SessionStore, StoredSession
from .codec import encode_changes, encode_info, encode_state, listing_filters, record_from

if TYPE_CHECKING:
    import sqlite3

__all__ = ["DATA_DIR_ENV", "INLINE_BYTES", "INLINE_CHECKPOINT", "INLINE_ROWS", "SCHEMA_VERSION", "SqliteStore",
           "data_dir"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DATA_DIR_ENV: Final = "ACP_AGENT_DATA_DIR"
"""The environment variable that overrides where agents keep their session files."""

_MIGRATIONS: Final[list[tuple[int, list[str]]]] = [
    (1, [
        """CREATE TABLE sessions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL UNIQUE,
            cwd TEXT NOT NULL,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            archived INTEGER NOT NULL DEFAULT 0,
            info TEXT NOT NULL,
            state TEXT NOT NULL
        )""",
        "CREATE INDEX sessions_by_cwd ON sessions (cwd, seq)",
        """CREATE TABLE history (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            item BLOB NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID""",
    ]),
]
SCHEMA_VERSION: Final = _MIGRATIONS[-1][0]
"""The newest schema version this acp-agent reads and writes."""

_COLUMNS: Final = "session_id, cwd, title, created_at, updated_at, archived, info, state"
_LISTED: Final = "session_id, cwd, title, created_at, updated_at, archived, info"  # what a listing reads
_UPSERT: Final = (
    f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) "
    "DO UPDATE SET cwd = excluded.cwd, title = excluded.title, updated_at = excluded.updated_at, "
    "archived = excluded.archived, info = excluded.info, state = excluded.state"
)

INLINE_ROWS: Final = 64
"""Most history rows a save may write on the event loop (more go to a worker thread)."""
INLINE_BYTES: Final = 256 * 1024
"""Most bytes of history rows a save may write on the event loop (more go to a worker thread)."""
INLINE_CHECKPOINT: Final = 200
"""Inline saves after which the next save runs in a worker thread, where the WAL is checkpointed."""


def data_dir() -> Path:
    """Where agents keep their session files: ``$ACP_AGENT_DATA_DIR``, else the user data directory
    (``~/.local/share/acp-agent`` on Linux, via ``platformdirs``)."""
    chosen = os.environ.get(DATA_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser()
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / "acp-agent"
    return Path(platformdirs.user_data_dir("acp-agent", appauthor=False))


class SqliteStore(SessionStore):
    """Sessions in the SQLite file ``path`` (created with its directory on first use)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0) -> None:
        super().__init__()
        self.path = Path(path)
        """The database file."""
        self.busy_timeout = busy_timeout
        """Seconds a write waits for another process's write before it fails."""
        self._db: sqlite3.Connection | None = None
        self._inline_saves = 0  # inline commits since the last commit in a thread (which checkpoints)
        # The metadata row last written per session: a save whose metadata did not change (most
        # saves: ``updatedAt`` has whole seconds) writes only history rows, half the cost.
        self._written: dict[str, tuple[Any, ...]] = {}

    @classmethod
    def for_agent(cls, name: str) -> SqliteStore:
        """The store of the agent named ``name``: ``<data_dir()>/<name>.sqlite3``."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "agent"
        return cls(data_dir() / f"{safe}.sqlite3")

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- opening -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, switch it to WAL and apply missing migrations (refusing a newer schema)."""
        if self._db is None:
            await self.in_thread(self._open)

    def _open(self) -> None:
        import sqlite3  # here: its import costs start-up time an agent without sessions need not pay

        if self._db is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnusableError(f"cannot create {self.path.parent}: {exc}") from exc
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnusableError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._switch_to_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            self._migrate(db)
            db.execute("PRAGMA busy_timeout = 0")  # never wait on the event loop (see _patient)
            db.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints (fsync) run in threads only
        except StoreUnusableError:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise StoreUnusableError(f"{self.path} is not a usable session database: {exc}") from exc
        self._db = db

    def _switch_to_wal(self, db: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, retried for up to ``busy_timeout`` seconds: while another connection
        creates the file or switches it to WAL, SQLite answers "database is locked" at once, without
        waiting in its busy handler (agents starting together on a new file)."""
        import sqlite3
        import time

        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, db: sqlite3.Connection) -> None:
        if self._version(db) == SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then see it done
        try:
            db.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                       "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
            current = self._version(db)
            for version, statements in _MIGRATIONS:
                if version > current:
                    for statement in statements:
                        db.execute(statement)
                    db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, now_text()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _version(self, db: sqlite3.Connection) -> int:
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'").fetchone()[0]
        if not tables:
            return 0
        version = int(db.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreUnusableError(
                f"{self.path} has schema version {version}, newer than {SCHEMA_VERSION} (the newest this "
                "acp-agent knows): it was written by a newer acp-agent")
        return version

    async def close(self) -> None:
        """Close the file (it opens again on next use)."""
        if self._db is not None:
            await self.in_thread(self._close)

    def _close(self) -> None:
        self._written.clear()
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._open()
        assert self._db is not None
        return self._db

    async def in_thread(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` in a worker thread, where the connection waits for other
        processes' writes (``busy_timeout``) and checkpoints; on the event loop it never waits."""
        return await super().in_thread(self._patient, func, *args)

    def _patient(self, func: Callable[..., T], *args: Any) -> T:
        db = self._db
        if db is not None:
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            db.execute("PRAGMA wal_autocheckpoint = 1000")
        try:
            return func(*args)
        finally:
            db = self._db
            if db is not None:
                db.execute("PRAGMA busy_timeout = 0")
                db.execute("PRAGMA wal_autocheckpoint = 0")

    # -- records -----------------------------------------------------------------------------

    async def save(self, record: SessionRecord) -> None:
        """Write the metadata and the history entries changed since the last save, in one transaction.

        A small save commits right here, on the event loop, when it can do so without waiting (see
        the module docstring); otherwise it runs in a worker thread.
        """
        await self.open()
        held = self._loop_lock
        if held is not None and held[1].locked():
            async with self.lock():  # an earlier save is in a worker thread: this one lands after it
                await self._save_record(record, locked=True)
        else:
            await self._save_record(record, locked=False)

    async def _save_record(self, record: SessionRecord, *, locked: bool) -> None:
        """The body of :meth:`save`. Unless ``locked``, no save was in progress when it was called: it
        takes the store lock only if it must wait for a worker thread (and awaits nothing before that)."""
        if record.deleted:
            return
        changes = record.history.take_changes()
        try:
            sid = record.session_id
            rows = [(sid, seq, kind, data) for seq, kind, data in encode_changes(changes)]
            columns = (sid, record.cwd, record.title, record.created_at, record.updated_at, int(record.archived),
                       encode_info(record).decode(), encode_state(record).decode())
            if self._save_inline(columns, changes.full, rows, changes.removed):
                return
            if locked:
                await self.in_thread(self._save, columns, changes.full, rows, changes.removed)
                return
            lock = self.lock()
            lock.acquire_nowait()  # free: it was when save() looked, and nothing has awaited since
            try:
                await self.in_thread(self._save, columns, changes.full, rows, changes.removed)
            finally:
                lock.release()
        except BaseException:
            record.history.unsaved()
            raise

    def _save_inline(self, columns: tuple[Any, ...], full: bool, rows: list[tuple[str, int, str, bytes]],
                     removed: list[int]) -> bool:
        """Commit a small save on the calling (event loop) thread if that needs no waiting; ``False`` if not."""
        import sqlite3

        db = self._db
        if (db is None or self._inline_saves >= INLINE_CHECKPOINT or len(rows) > INLINE_ROWS
                or sum(len(row[3]) for row in rows) > INLINE_BYTES):
            return False
        if not self._thread_lock.acquire(blocking=False):
            return False  # a worker thread uses the connection now
        try:
            try:
                db.execute("BEGIN IMMEDIATE")  # busy timeout 0: fails at once if another process writes
            except sqlite3.OperationalError:
                return False
            self._write(db, columns, full, rows, removed)
            self._inline_saves += 1
            return True
        finally:
            self._thread_lock.release()

    def _save(self, columns: tuple[Any, ...], full: bool, rows: list[tuple[str, int, str, bytes]],
              removed: list[int]) -> None:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        self._write(db, columns, full, rows, removed)
        if self._inline_saves:
            self._inline_saves = 0
            try:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except Exception:  # pragma: no cover - a checkpoint is an optimisation; the next one retries
                logger.debug("acp: WAL checkpoint of %s failed", self.path, exc_info=True)

    def _write(self, db: sqlite3.Connection, columns: tuple[Any, ...], full: bool,
               rows: list[tuple[str, int, str, bytes]], removed: list[int]) -> None:
        """The body of a save, in the transaction ``BEGIN IMMEDIATE`` opened; commits or rolls back."""
        import sqlite3

        sid = columns[0]
        try:
            try:
                if full or self._written.get(sid) != columns:
                    db.execute(_UPSERT, columns)
                if full:
                    db.execute("DELETE FROM history WHERE session_id = ?", (sid,))
                elif removed:
                    db.executemany("DELETE FROM history WHERE session_id = ? AND seq = ?",
                                   [(sid, seq) for seq in removed])
                db.executemany("INSERT OR REPLACE INTO history (session_id, seq, kind, item) VALUES (?, ?, ?, ?)",
                               rows)
                db.execute("COMMIT")
            except BaseException:
                self._written.pop(sid, None)
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"could not save session {sid} to {self.path}: {exc}") from exc
        self._written[sid] = columns

    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        """The stored session, rebuilt (history included), or ``None``."""
        await self.open()
        return await self.in_thread(self._load, session_id, terminal_tail)

    def _load(self, session_id: str, terminal_tail: int | None) -> SessionRecord | None:
        import sqlite3

        db = self._conn()
        try:
            db.execute("BEGIN")
            try:
                row = db.execute(f"SELECT {_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
                entries = db.execute("SELECT seq, kind, item FROM history WHERE session_id = ? ORDER BY seq",
                                     (session_id,)).fetchall() if row is not None else []
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"could not load session {session_id} from {self.path}: {exc}") from exc
        if row is None:
            return None
        columns = dict(zip(_COLUMNS.split(", "), row, strict=True))
        return record_from(columns, columns["info"], columns["state"], entries, terminal_tail=terminal_tail)

    async def delete(self, session_id: str) -> bool:
        """Remove the session and its history."""
        await self.open()
        async with self.lock():
            return await self.in_thread(self._delete, session_id)

    def _delete(self, session_id: str) -> bool:
        import sqlite3

        self._written.pop(session_id, None)
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM history WHERE session_id = ?", (session_id,))
                gone = db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"could not delete session {session_id} from {self.path}: {exc}") from exc
        return gone > 0

    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None) -> list[StoredSession]:
        """Stored sessions in creation order."""
        await self.open()
        return await self.in_thread(self._list, cwd, offset, limit, archived)

    def _list(self, cwd: str | None, offset: int, limit: int, archived: bool | None) -> list[StoredSession]:
        import sqlite3

        db = self._conn()
        conditions, params = listing_filters(cwd, archived, "?")
        try:
            rows = db.execute(f"SELECT {_LISTED} FROM sessions {conditions} ORDER BY seq LIMIT ? OFFSET ?",
                              [*params, limit, offset]).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"could not list sessions of {self.path}: {exc}") from exc
        return [_stored(*row) for row in rows]

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of one stored session (its history is not read)."""
        await self.open()
        return await self.in_thread(self._find, session_id)

    def _find(self, session_id: str) -> StoredSession | None:
        import sqlite3

        try:
            row = self._conn().execute(f"SELECT {_LISTED} FROM sessions WHERE session_id = ?",
                                       (session_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read session {session_id} from {self.path}: {exc}") from exc
        return _stored(*row) if row is not None else None


def _stored(session_id: str, cwd: str, title: str | None, created_at: str, updated_at: str, archived: int,
            info: str) -> StoredSession:
    doc = orjson.loads(info)
    return StoredSession(session_id, cwd, updated_at, created_at, title, list(doc.get("additionalDirectories") or []),
                         bool(archived), doc.get("meta"))
