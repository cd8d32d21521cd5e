"""``SqliteStore``: sessions in one SQLite file per agent, the default of ``run_stdio``.

stdlib `sqlite3`, so it works on asyncio and trio. The file is in WAL mode with
``synchronous=NORMAL``: a committed save survives the agent process being killed (SIGKILL); a
power loss may lose the last saves but never corrupts the file. Several processes may share a
file: writers wait for each other (``busy_timeout``) and every commit is one transaction.

Where the calls run: every SQLite call runs in the store's own committer thread (opening the file, batched
saves, big saves, loads, listings, finds, deletes, closing; an anyio worker thread only while no committer thread
runs), one at a time per store, so nothing waits for the database on the event loop and all of its SQLite memory is
in one thread's malloc arena (a second arena cost the stdio agent almost 1 MB of peak RSS). A
small save (up to `JOURNAL_BYTES` of history, as after a typical turn) is written to the store's journal
(`acp_agent.store.journal`: one ``write``, which survives SIGKILL) and committed with the
saves that follow it within `COMMIT_DELAY` seconds, in one transaction, by the committer
thread; so the end of a turn does not wait for a commit and the crash contract holds. A bigger
save, or any save where journals cannot be used (no ``flock``, a journal that could not be
written), commits at once (in the committer thread too, before ``save`` returns), and so does a save
behind such a save still uncommitted (a journaled one would land first after a kill). Everything this store
object saved is committed before it loads, lists, finds or deletes (so it reads what it wrote), and by
[`SqliteStore.sync`][acp_agent.store.SqliteStore.sync] and [`SqliteStore.close`][acp_agent.store.SqliteStore.close];
journals left by a process that ended are replayed on those reads and when the file is opened.

Two processes on one file never have one session active at once: a process locks each session it has active
([`SqliteStore.acquire_session`][acp_agent.store.SqliteStore.acquire_session], `acp_agent.store.locks`), and the lock
ends with the process.

File modes: the directory the store makes is ``0700`` and the database file is created ``0600``,
so SQLite makes its ``-wal`` and ``-shm`` files with the same mode, as the journal files are. A file or
directory that exists already keeps its mode.

The schema is versioned: ``schema_migrations`` lists the migrations applied, and opening a
file applies the missing ones in one transaction. A file whose newest migration is above
[`SCHEMA_VERSION`][acp_agent.store.SCHEMA_VERSION] (a newer acp-agent wrote it), or that is not a readable SQLite
database, is refused with [`StoreUnusableError`][acp_agent.store.StoreUnusableError] and left untouched.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import os
import re
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.to_thread
import orjson

from .._util.paths import DATA_DIR_ENV, data_dir
from ..errors import StoreError, StoreUnusableError
from ..records import DEFAULT_PRINCIPAL, SessionRecord, now_text
from .base import ListingKey, SessionStore, StoredSession
from .codec import LISTING_ORDER, encode_info_text, encode_state_text, listing_filters, record_from
from .journal import Journal, JournalFile, Save, available, encode_line, orphans, private_file
from .locks import session_locks

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

__all__ = ["COMMIT_DELAY", "DATA_DIR_ENV", "JOURNAL_BYTES", "SCHEMA_VERSION", "SqliteStore", "data_dir"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

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
    (2, [  # principals: whose each session is (earlier sessions: "default"); listings most recently active first
        "ALTER TABLE sessions ADD COLUMN principal TEXT NOT NULL DEFAULT 'default'",
        "CREATE INDEX sessions_by_principal ON sessions (principal, updated_at, session_id)",
    ]),
]
SCHEMA_VERSION: Final = _MIGRATIONS[-1][0]
"""The newest schema version this acp-agent reads and writes."""

_COLUMNS: Final = "session_id, cwd, title, created_at, updated_at, archived, info, state, principal"
_LISTED: Final = "session_id, cwd, title, created_at, updated_at, archived, info, principal"  # what a listing reads
_UPSERT: Final = (
    f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) "
    "DO UPDATE SET cwd = excluded.cwd, title = excluded.title, updated_at = excluded.updated_at, "
    "archived = excluded.archived, info = excluded.info, state = excluded.state"
)

JOURNAL_BYTES: Final = 256 * 1024
"""Most bytes of history rows a journaled save may hold; a bigger one commits before ``save`` returns."""
COMMIT_DELAY: Final = 0.1
"""Seconds the committer thread gathers journaled saves before committing them in one transaction."""
RETRY_DELAY: Final = 1.0
"""Seconds before the committer thread retries a commit that failed (doubling up to a minute)."""


_siblings: Final[dict[str, weakref.WeakSet[SqliteStore]]] = {}  # the store objects of this process, by file


class SqliteStore(SessionStore):
    """Sessions in the SQLite file ``path`` (created with its directory on first use)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 10.0) -> None:
        super().__init__()
        self.path = Path(path).absolute()
        """The database file (absolute: its journal files are made beside it whatever the process's directory then)."""
        self.busy_timeout = busy_timeout
        """Seconds a write waits for another process's write before it fails."""
        self._db: sqlite3.Connection | None = None
        # Saves not committed yet, in order. Each journaled one has its line in ``_file`` (or, after
        # a failed commit, in a ``_stale`` file): both change only under ``_pending_lock``.
        self._pending: list[Save] = []
        self._pending_lock = threading.Lock()
        self._journal: Journal | None = None
        self._file: JournalFile | None = None  # where saves are journaled now (None: they commit at once)
        self._file_used = False  # whether ``_file`` holds lines
        self._spare: JournalFile | None = None  # the next ``_file``, made outside the lock
        self._stale: list[JournalFile] = []  # earlier files whose saves a failed commit left pending
        self._loose = 0  # pending saves (or being committed) in no journal file: while any, none is journaled
        self._journaled: dict[str, tuple[Any, ...]] = {}  # the row last journaled per session, in this file
        self._committer: threading.Thread | None = None
        self._wake = threading.Event()  # saves are pending
        self._halt = threading.Event()  # the committer stops
        self._hurry = threading.Event()  # a call is queued, or the committer stops: no gathering of saves
        # Blocking calls queued for the committer thread, and whether one is there to run them (``_calls_lock``).
        self._calls: collections.deque[tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]]] = (
            collections.deque())
        self._calls_lock = threading.Lock()
        self._accepting = False
        self._siblings = _siblings.setdefault(str(self.path), weakref.WeakSet())
        self._siblings.add(self)

    @classmethod
    def for_agent(cls, name: str, *, served: bool = False) -> SqliteStore:
        """The store of the agent named ``name``: ``<data_dir()>/<name>.sqlite3``; with ``served``, the store of the
        agent served over HTTP (``<name>.served.sqlite3``), so remote users never open the sessions an editor
        keeps in the first file."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "agent"
        return cls(data_dir() / f"{safe}{'.served' if served else ''}.sqlite3")

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- opening -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the file, switch it to WAL and apply missing migrations (refusing a newer schema)."""
        if self._db is None and self._committer is None:
            # Opened by the committer thread it starts, as its first work: SQLite's memory for this file (the
            # connection, its schema and page cache, a commit's copies) is then in one thread's malloc arena, not
            # spread over an anyio worker's and the committer's.
            opened: concurrent.futures.Future[None] = concurrent.futures.Future()
            committer = self._committer = self._start_committer(opened)
            try:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(opened.result)
            except BaseException:
                if self._committer is committer:  # it ended: the next open starts another
                    self._committer = None
                raise
        elif self._db is None:
            await self.in_thread(self._open)

    def _open(self) -> None:
        import sqlite3  # here: its import costs start-up time an agent without sessions need not pay

        if self._db is not None:
            return
        try:
            private_file(self.path)
        except OSError as exc:
            raise StoreUnusableError(f"cannot create {self.path}: {exc}") from exc
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                 check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreUnusableError(f"cannot open {self.path}: {exc}") from exc
        try:
            self._switch_to_wal(db)
            db.execute("PRAGMA synchronous=NORMAL")
            self._migrate(db)
        except StoreUnusableError:
            db.close()
            raise
        except sqlite3.Error as exc:
            db.close()
            raise StoreUnusableError(f"{self.path} is not a usable session database: {exc}") from exc
        self._db = db
        self._recover(db)  # if another process holds the write lock too long, the next read tries again
        if available():
            self._journal = Journal(self.path)
            self._file = self._new_file()

    def _switch_to_wal(self, db: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, retried for up to ``busy_timeout`` seconds: while another connection
        creates the file or switches it to WAL, SQLite answers "database is locked" at once, without
        waiting in its busy handler (agents starting together on a new file)."""
        import sqlite3

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
            _rollback(db)
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
        """Commit what is pending and close the file (it opens again on next use)."""
        with anyio.CancelScope(shield=True):  # never left half-closed
            committer, self._committer = self._committer, None
            if committer is not None:
                closing = self._submit(self._close) if self._db is not None else None  # its last work, in its arena
                self._halt.set()
                self._hurry.set()
                self._wake.set()
                await anyio.to_thread.run_sync(committer.join)
                self._halt.clear()
                if closing is not None:
                    closing.result()
            if self._db is not None:
                await self.in_thread(self._close)

    def _close(self) -> None:
        db = self._db
        try:
            if db is not None:
                self._commit_pending(db)
        except StoreError as exc:
            logger.error("acp: %s; those saves stay in %s's journal and are committed when it is next opened",
                         exc, self.path.name)
        with self._pending_lock:
            files = [*self._stale, *(f for f in (self._file, self._spare) if f is not None)]
            kept = bool(self._pending)
            self._pending, self._stale, self._file, self._spare, self._file_used = [], [], None, None, False
            self._loose = 0
        for file in files:
            if kept:
                os.close(file.fd)  # unlocked: the next open replays it
            else:
                file.discard()
        self._journaled.clear()
        self._db = None
        if db is not None:
            db.close()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._open()
        assert self._db is not None
        return self._db

    # -- which process has a session --------------------------------------------------------------

    async def acquire_session(self, session_id: str) -> bool:
        """Lock ``session_id`` for this process (`acp_agent.store.locks`); ``False`` if another has it."""
        return session_locks(self.path).acquire(session_id)

    async def release_session(self, session_id: str) -> None:
        """Unlock ``session_id`` once no holder in this process is left."""
        session_locks(self.path).release(session_id)

    # -- saving --------------------------------------------------------------------------------

    async def save(self, record: SessionRecord) -> None:
        """Write the metadata and the history entries changed since the last save.

        A small save is journaled and committed shortly after, in a batch; a bigger one commits
        before this returns (see the module docstring). Raises
        [`StoreError`][acp_agent.store.StoreError] if a save committed at once failed (it stays queued
        and is committed with a later save).
        """
        if self._db is None:
            await self.open()
        if not self._stage(record):
            await self.in_thread(self._commit_open)  # from here on the save is queued: a failure retries it later

    def save_now(self, record: SessionRecord) -> bool:
        """A save journaled at once (see [`SessionStore.save_now`][acp_agent.store.SessionStore.save_now]); ``False``
        when the file is not open, journals cannot be used, or the save is too big for the journal (then queued:
        [`save`][acp_agent.store.SqliteStore.save] commits it)."""
        if self._db is None or self._file is None or self._loose:
            return False  # nothing taken: save() opens the file, or commits at once behind a save in no journal
        return self._stage(record)

    def _stage(self, record: SessionRecord) -> bool:
        """Take ``record``'s changes and journal them (``True``: saved until the commit), else queue them to be
        committed at once (``False``)."""
        if record.deleted:
            return True
        changes = record.history.take_changes()
        try:
            sid = record.session_id
            rows = [(sid, seq, kind, data) for seq, kind, data in changes.encoded_entries()]
            columns = (sid, record.cwd, record.title, record.created_at, record.updated_at, int(record.archived),
                       encode_info_text(record), encode_state_text(record), record.principal)
        except BaseException:
            record.history.unsaved()
            raise
        save: Save = (sid, columns, changes.full, rows, changes.removed)
        if self._journal_save(save):
            return True
        with self._pending_lock:
            self._pending.append(save)
            self._loose += 1
        return False

    async def sync(self) -> None:
        """Commit the saves still in the journal (a session leaving this process: others see it at once)."""
        if self._db is not None:  # also when pending is empty: the committer thread may be committing them
            await self.in_thread(self._commit_open)

    async def _read_prepared(self) -> None:
        """Before a read: open the file, and commit what the other store objects of this process saved
        to it (this one's saves are committed in the read's thread,
        [`_settle`][acp_agent.store.SqliteStore._settle])."""
        await self.open()
        for sibling in list(self._siblings):
            if sibling is not self and sibling._db is not None:
                await sibling.in_thread(sibling._commit_open)  # also waits for a commit its thread is making

    def _journal_save(self, save: Save) -> bool:
        """Append ``save`` to the journal and queue its commit; ``False`` if it must commit at once."""
        sid, columns, full, rows, removed = save
        if columns is None or self._file is None or sum([len(row[3]) for row in rows]) > JOURNAL_BYTES:
            return False
        line = encode_line((sid, None, full, rows, removed) if self._journaled.get(sid) == columns else save)
        with self._pending_lock:
            file = self._file
            if file is None or self._loose:  # an earlier save is in no journal: this one must not land before it
                return False
            try:
                file.append(line)
            except OSError as exc:  # e.g. a full disk: this file ends here; its saves commit as they are
                logger.warning("acp: could not write to the journal of %s (%s); saves commit at once until a new "
                               "journal file can be made", self.path, exc)
                self._stale.append(file)
                self._file, self._file_used = None, False
                return False
            self._pending.append(save)
            self._file_used = True
        self._journaled[sid] = columns
        if not self._wake.is_set():
            self._wake.set()
        if self._committer is None or not self._committer.is_alive():  # one started during close stopped at once
            self._committer = self._start_committer()
        return True

    def _start_committer(self, opening: concurrent.futures.Future[None] | None = None) -> threading.Thread:
        thread = threading.Thread(target=self._commit_loop, args=(opening,), name=f"acp-store-{self.path.name}",
                                  daemon=True)
        with self._calls_lock:
            self._accepting = True
        thread.start()
        return thread

    async def in_thread(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` in the committer thread, one call at a time, never cancelled once started:
        every SQLite call of this store is then made in one thread (one malloc arena). Without a committer thread
        (closing), in a worker thread, as [`SessionStore.in_thread`][acp_agent.store.SessionStore.in_thread]."""
        call = self._submit(func, *args)
        if call is None:
            return await super().in_thread(func, *args)
        with anyio.CancelScope(shield=True):
            result: T = await anyio.to_thread.run_sync(call.result)
        return result

    def _submit(self, func: Callable[..., T], *args: Any) -> concurrent.futures.Future[T] | None:
        """Queue ``func(*args)`` for the committer thread; ``None`` if none is there to run it."""
        call: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._calls_lock:
            if not self._accepting:
                return None
            self._calls.append((func, args, call))
        self._hurry.set()
        self._wake.set()
        return call

    def _run_calls(self) -> None:
        """Run the queued calls, in order (in the committer thread)."""
        while True:
            with self._calls_lock:
                if not self._calls:
                    return
                func, args, call = self._calls.popleft()
            if not call.set_running_or_notify_cancel():
                continue
            try:
                with self._thread_lock:
                    result = func(*args)
            except BaseException as exc:
                call.set_exception(exc)
            else:
                call.set_result(result)

    def _commit_loop(self, opening: concurrent.futures.Future[None] | None = None) -> None:
        """The committer thread: open the file first if ``opening`` waits for it (its outcome set there; a failure
        ends the thread), then run the queued calls at once and commit what is pending every `COMMIT_DELAY` seconds
        while there is some. The calls queued when it ends are run before it ends."""
        try:
            self._serve(opening)
        finally:
            with self._calls_lock:
                self._accepting = False  # queued from now on: run in a worker thread
            self._run_calls()

    def _serve(self, opening: concurrent.futures.Future[None] | None) -> None:
        if opening is not None:
            try:
                with self._thread_lock:
                    self._open()
            except BaseException as exc:
                opening.set_exception(exc)
                return
            opening.set_result(None)
        delay = RETRY_DELAY
        while True:
            self._wake.wait()
            if self._gather(COMMIT_DELAY):
                return
            self._wake.clear()
            if self._halt.is_set():  # close's wake-up (halt, then wake) just cleared: it must not be lost
                return
            if self._calls:  # queued after the gathering ran the calls: its wake-up just cleared
                self._wake.set()
            try:
                with self._thread_lock:
                    self._commit_open()
            except Exception as exc:
                logger.error("acp: %s; those saves stay in the journal, retried in %g s", exc, delay)
                if self._gather(delay):
                    return
                delay = min(delay * 2, 60.0)
                self._wake.set()
            else:
                delay = RETRY_DELAY

    def _gather(self, seconds: float) -> bool:
        """Wait ``seconds`` (saves gather, or a failed commit waits), running the calls queued meanwhile at once;
        ``True`` if the committer thread is to stop."""
        until = time.monotonic() + seconds
        while True:
            self._hurry.clear()
            self._run_calls()
            if self._halt.is_set():
                return True
            left = until - time.monotonic()
            if left <= 0:
                return False
            self._hurry.wait(left)

    def _commit_open(self) -> None:
        db = self._db
        if db is not None:  # closed: nothing is pending
            self._commit_pending(db)

    def _new_file(self) -> JournalFile | None:
        if self._journal is None:
            return None
        try:
            return self._journal.start()
        except OSError as exc:
            logger.warning("acp: cannot make a journal file beside %s (%s); saves commit at once", self.path, exc)
            return None

    def _commit_pending(self, db: sqlite3.Connection) -> None:
        """Commit every pending save in one transaction (called with the thread lock held)."""
        if not self._pending:
            return  # then the journal file holds no line either
        spare = self._spare or self._new_file()
        with self._pending_lock:
            batch, self._pending = self._pending, []
            loose = self._loose  # all in the batch; they count until committed
            stale, self._stale = self._stale, []  # files that fail from now on hold saves not in this batch
            rotated: JournalFile | None = None
            if self._file_used or self._file is None:  # without a spare, saves commit at once until one is made
                rotated, self._file, self._file_used, spare = self._file, spare, False, None
                self._journaled.clear()  # a new file names each session's row again (memory stays bounded)
        self._spare = spare
        try:
            self._apply(db, batch)
        except BaseException:
            with self._pending_lock:
                self._pending[:0] = batch
                self._stale[:0] = stale
                if rotated is not None:
                    self._stale.append(rotated)
            raise
        with self._pending_lock:
            self._loose -= loose
        for file in (*stale, *([rotated] if rotated is not None else [])):
            file.discard()

    def _apply(self, db: sqlite3.Connection, saves: list[Save]) -> None:
        """Write ``saves`` in order, in one transaction."""
        import sqlite3

        try:
            db.execute("BEGIN IMMEDIATE")
            written: dict[str, tuple[Any, ...]] = {}  # a batch writes each session's row once unless it changed
            try:
                for sid, columns, full, rows, removed in saves:
                    if columns is not None and len(columns) == 8:  # journaled before principals: "default"
                        columns = (*columns, DEFAULT_PRINCIPAL)
                    if columns is not None and (full or written.get(sid) != columns):
                        db.execute(_UPSERT, columns)
                        written[sid] = columns
                    if full:
                        db.execute("DELETE FROM history WHERE session_id = ?", (sid,))
                    elif removed:
                        db.executemany("DELETE FROM history WHERE session_id = ? AND seq = ?",
                                       [(sid, seq) for seq in removed])
                    db.executemany("INSERT OR REPLACE INTO history (session_id, seq, kind, item) VALUES (?, ?, ?, ?)",
                                   rows)
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        except sqlite3.Error as exc:
            sessions = ", ".join(dict.fromkeys(save[0] for save in saves))
            raise StoreError(f"could not save session {sessions} to {self.path}: {_cause(exc)}") from exc

    def _recover(self, db: sqlite3.Connection, needed: str | bool = False) -> None:
        """Commit the journals of processes that ended before committing them, then delete those files.

        A commit that fails raises only if ``needed`` (``True``: always; a session id: if it concerns that
        session); otherwise the file is left for a later read.
        """
        failed: dict[str, StoreError] = {}  # owners a file of which failed: their later files wait for it
        with orphans(self.path) as found:
            for path, saves in found:
                owner = path.name.rpartition("-")[0]
                if saves:
                    try:
                        if owner in failed:
                            raise failed[owner]
                        self._apply(db, saves)
                    except StoreError as exc:
                        if _concerns(saves, needed):
                            raise
                        if owner not in failed:
                            logger.warning("acp: %s (saves left by an agent process that stopped; retried later)",
                                           exc)
                        failed[owner] = exc
                        continue
                    logger.info("acp: committed %d save(s) an agent process left in the journal %s", len(saves),
                                path.name)
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def _settle(self, needed: str | bool = False) -> sqlite3.Connection:
        """The connection, once this store's saves and any left by ended processes are committed.

        A read goes on with what is committed if those commits fail (another process holds the write
        lock past ``busy_timeout``), unless it needs them: ``needed`` is ``True`` (always) or the id
        of the session it reads.
        """
        db = self._conn()
        pending = list(self._pending)
        try:
            self._commit_pending(db)
        except StoreError as exc:
            if _concerns(pending, needed):
                raise
            logger.debug("acp: reading %s without its latest saves: %s", self.path.name, exc)
        self._recover(db, needed)
        return db

    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        """The stored session, rebuilt (history included), or ``None``."""
        await self._read_prepared()
        return await self.in_thread(self._load, session_id, terminal_tail)

    def _load(self, session_id: str, terminal_tail: int | None) -> SessionRecord | None:
        import sqlite3

        db = self._settle(session_id)
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
        await self._read_prepared()
        self._journaled.pop(session_id, None)
        async with self.lock():
            return await self.in_thread(self._delete, session_id)

    def _delete(self, session_id: str) -> bool:
        import sqlite3

        db = self._settle(True)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM history WHERE session_id = ?", (session_id,))
                gone = db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,)).rowcount
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"could not delete session {session_id} from {self.path}: {_cause(exc)}") from exc
        return gone > 0

    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None, principal: str | None = None,
                            after: ListingKey | None = None) -> list[StoredSession]:
        """Stored sessions, most recently active first (see
        [`SessionStore.list_sessions`][acp_agent.store.SessionStore.list_sessions])."""
        await self._read_prepared()
        return await self.in_thread(self._list, cwd, offset, limit, archived, principal, after)

    def _list(self, cwd: str | None, offset: int, limit: int, archived: bool | None, principal: str | None,
              after: ListingKey | None) -> list[StoredSession]:
        import sqlite3

        db = self._settle()
        conditions, params = listing_filters(cwd, archived, "?", principal, after)
        try:
            rows = db.execute(f"SELECT {_LISTED} FROM sessions {conditions} {LISTING_ORDER} LIMIT ? OFFSET ?",
                              [*params, limit, offset]).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"could not list sessions of {self.path}: {exc}") from exc
        return [_stored(*row) for row in rows]

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of one stored session (its history is not read)."""
        await self._read_prepared()
        return await self.in_thread(self._find, session_id)

    def _find(self, session_id: str) -> StoredSession | None:
        import sqlite3

        try:
            row = self._settle().execute(f"SELECT {_LISTED} FROM sessions WHERE session_id = ?",
                                       (session_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"could not read session {session_id} from {self.path}: {exc}") from exc
        return _stored(*row) if row is not None else None


def _rollback(db: sqlite3.Connection) -> None:
    """Undo the transaction under way, if SQLite has not already: on a full disk (``SQLITE_FULL``) or an I/O
    error it rolls back by itself, and a ``ROLLBACK`` then fails ("no transaction is active") and would hide
    the error that led here."""
    if db.in_transaction:
        with contextlib.suppress(Exception):
            db.execute("ROLLBACK")


def _cause(exc: Exception) -> str:
    """What went wrong, in words an operator reads: a full disk is named so."""
    import sqlite3

    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return f"disk full ({exc})"
    return str(exc)


def _concerns(saves: list[Save], needed: str | bool) -> bool:
    return needed is True or (isinstance(needed, str) and any(save[0] == needed for save in saves))


def _stored(session_id: str, cwd: str, title: str | None, created_at: str, updated_at: str, archived: int,
            info: str, principal: str) -> StoredSession:
    doc = orjson.loads(info)
    return StoredSession(session_id, cwd, updated_at, created_at, title, list(doc.get("additionalDirectories") or []),
                         bool(archived), doc.get("meta"), principal)
