"""Which process has a session of a SQLite file active: one lock per session, gone with its process.

Two editor windows (or two ``serve`` processes) on one SQLite file must never run the same session side by
side: the last save would win, and turns a client saw end would be lost. So a process holds a lock on a
session from the moment the session is active in it until it is saved and leaves it, and another process
asking for that session is refused (``-32002`` "Session is active in another process", as replicas sharing a
PostgreSQL store are with their leases).

The locks are record locks (``fcntl.lockf`` on POSIX, ``msvcrt.locking`` on Windows: see
`acp_agent._util.portable`) on one byte each of one file beside the database,
``<database>.sessions.lock`` (``0600``): the byte at a 62-bit hash of the session id. The kernel drops a
process's locks when it ends, however it ends (SIGKILL, OOM), so a session whose process died can be resumed
at once. Record locks belong to a process, not to a file descriptor, and closing *any* descriptor of the file
drops all of them: so each process opens the file once (`session_locks` keeps one
`SessionLocks` per file) and counts the holders of each session within itself.
Where neither exists every lock is granted (one process per file is then the user's care).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Final

from .._util import portable

__all__ = ["LOCK_SUFFIX", "SessionLocks", "lock_offset", "session_locks"]

LOCK_SUFFIX: Final = ".sessions.lock"
"""Appended to the database file's name: the file whose bytes are the sessions' locks."""


def lock_offset(session_id: str) -> int:
    """The byte of the lock file that stands for ``session_id`` (a 62-bit hash: far below ``off_t``'s limit)."""
    digest = hashlib.blake2b(b"acp-session:" + session_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


class SessionLocks:
    """The session locks of one database file, in this process (use `session_locks`)."""

    def __init__(self, database: Path) -> None:
        self.path = database.parent / f"{database.name}{LOCK_SUFFIX}"
        """The lock file."""
        self._fd: int | None = None
        self._held: dict[str, int] = {}  # session id -> holders in this process
        self._lock = threading.Lock()

    def acquire(self, session_id: str) -> bool:
        """Take the session's lock for this process (at once or not at all); ``False`` if another process holds
        it. Each ``True`` is matched by one `release`."""
        with self._lock:
            if session_id in self._held:
                self._held[session_id] += 1
                return True
            if portable.locks_available() and not portable.lock_byte(self._file(), lock_offset(session_id)):
                return False
            self._held[session_id] = 1
            return True

    def release(self, session_id: str) -> None:
        """Give one hold of the session back; the lock goes once no holder in this process is left."""
        with self._lock:
            count = self._held.get(session_id, 0)
            if count > 1:
                self._held[session_id] = count - 1
                return
            if not count:
                return
            del self._held[session_id]
            if self._fd is not None:
                portable.unlock_byte(self._fd, lock_offset(session_id))

    def held(self, session_id: str) -> bool:
        """Whether this process holds the session's lock."""
        return session_id in self._held

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | portable.OPEN_FLAGS, 0o600)
        return self._fd


_by_file: Final[dict[str, SessionLocks]] = {}
_by_file_lock = threading.Lock()


def session_locks(database: Path) -> SessionLocks:
    """The one `SessionLocks` of ``database`` in this process (made on first use, kept for its life)."""
    key = str(database.absolute())
    with _by_file_lock:
        locks = _by_file.get(key)
        if locks is None:
            locks = _by_file[key] = SessionLocks(Path(key))
        return locks


def _forget_in_child() -> None:
    """A forked child holds none of its parent's locks (record locks are not inherited)."""
    global _by_file_lock
    _by_file_lock = threading.Lock()
    _by_file.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
