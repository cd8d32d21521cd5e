"""The SQLite store's journal: a turn's save is on disk before its SQLite commit.

A save (the end of a turn, before its ``idle``) appends one line to a journal file with one
``write`` and returns; the SQLite commit follows in a background thread, a batch of saves in one
transaction. A line handed to the kernel survives the agent process being killed (SIGKILL), as a
WAL commit with ``synchronous=NORMAL`` does, so the crash contract holds without a commit on the
turn's path.

Each store object writes its own files, named ``<database file>.journal-<owner>-<n>``, and holds an
exclusive lock on each (``flock``; no journal on Windows: see `available`) for as long as it may need it (the lock
goes with the process). Once
the saves of a file are committed, the file is deleted: a journal only ever holds saves that may
not be in the database yet. A file nobody holds a lock on belongs to a process that ended without
committing it; `orphans` finds those, the store replays them in order and deletes them.
Processes looking for orphans take turns (an ``flock`` on ``<database file>.journal.lock``), so a
file found locked is its live owner's, never one another process is replaying right then.
A last line cut short by the kill (never answered with ``idle``) is ignored.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._util import portable

__all__ = ["Journal", "JournalFile", "Save", "decode_line", "encode_line", "orphans", "private_file"]

Save = tuple[str, "tuple[Any, ...] | None", bool, list[tuple[str, int, str, bytes]], list[int]]
"""One save: session id, the ``sessions`` row (``None``: unchanged), whether the history is written
in full, the history rows ``(session id, seq, kind, JSON)`` and the sequence numbers removed."""



def private_file(path: Path) -> None:
    """Make ``path`` (``0600``) and its directory (``0700``) where they do not exist yet; existing ones are left
    as they are."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | portable.OPEN_FLAGS, 0o600))


def available() -> bool:
    """Whether journals can be used here: files can be locked (`acp_agent._util.portable.locks_available`) and an
    open file renamed and deleted (not on Windows, whose open files cannot be). Where not, the store commits
    every save at once."""
    return sys.platform != "win32" and portable.locks_available()


def encode_line(save: Save) -> bytes:
    """One journal line (history items embedded as the JSON they are)."""
    sid, columns, full, rows, removed = save
    items = [[seq, kind, orjson.Fragment(data)] for _, seq, kind, data in rows]
    return orjson.dumps([sid, columns, full, removed, items], option=orjson.OPT_APPEND_NEWLINE)


def decode_line(line: bytes) -> Save:
    """A save from a journal line (``ValueError`` if it is not one: a line cut short by a kill)."""
    sid, columns, full, removed, rows = orjson.loads(line)
    return (sid, tuple(columns) if columns is not None else None, bool(full),
            [(sid, seq, kind, orjson.dumps(item)) for seq, kind, item in rows], list(removed))


@dataclass
class JournalFile:
    """One journal file, open for appending and locked by this process."""

    path: Path
    fd: int

    def append(self, data: bytes) -> None:
        """Write ``data`` at the end of the file (``OSError`` if it could not be written whole)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def discard(self) -> None:
        """Delete the file (its saves are committed) and release it."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)


class Journal:
    """Makes the journal files of one store object (see the module docstring)."""

    def __init__(self, database: Path) -> None:
        self.prefix = f"{database.name}.journal-"
        self.directory = database.parent
        self.owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._count = 0

    def start(self) -> JournalFile:
        """A new, empty, locked file (created under a name `orphans` ignores, then renamed)."""
        self._count += 1
        final = self.directory / f"{self.prefix}{self.owner}-{self._count:08d}"
        temporary = self.directory / f".{final.name}.new"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | portable.OPEN_FLAGS, 0o600)
        try:
            if not portable.lock_file(fd):
                raise BlockingIOError("a new journal file is locked by another process")
            os.rename(temporary, final)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return JournalFile(final, fd)


def _order(path: Path) -> tuple[str, int]:
    owner, _, count = path.name.rpartition("-")
    return owner, int(count) if count.isdigit() else 0


@contextlib.contextmanager
def _claimed(path: Path) -> Iterator[int | None]:
    """The file's descriptor if no live process holds it and it is still in place, else ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | portable.OPEN_FLAGS)
    except OSError:
        yield None  # gone meanwhile (replayed by another process)
        return
    try:
        if not portable.lock_file(fd):
            yield None  # its process is alive (or another one is replaying it now)
            return
        yield fd if os.fstat(fd).st_nlink else None  # unlinked after replay by the one that held it
    finally:
        os.close(fd)


@contextlib.contextmanager
def _recovering(database: Path) -> Iterator[None]:
    """Held while looking for orphans: the processes doing so take turns, so a journal locked meanwhile
    is its live owner's, never one another process is replaying (a read must wait for that replay)."""
    try:
        fd = os.open(database.parent / f"{database.name}.journal.lock",
                     os.O_RDWR | os.O_CREAT | portable.OPEN_FLAGS, 0o600)
    except OSError:
        yield
        return
    try:
        portable.lock_file(fd, wait=True)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def orphans(database: Path) -> Iterator[list[tuple[Path, list[Save]]]]:
    """The journal files of ``database`` left by processes that ended, with their saves, in the order
    they were written; held (locked) until the block ends. Delete each file once its saves are committed."""
    if not portable.locks_available():
        yield []
        return
    prefix = f"{database.name}.journal-"
    try:
        names = sorted((database.parent / n for n in os.listdir(database.parent) if n.startswith(prefix)), key=_order)
    except OSError:
        names = []
    with contextlib.ExitStack() as held:
        if names:
            held.enter_context(_recovering(database))
        found: list[tuple[Path, list[Save]]] = []
        for path in names:
            fd = held.enter_context(_claimed(path))
            if fd is None:
                continue
            with os.fdopen(os.dup(fd), "rb") as file:
                saves: list[Save] = []
                for line in file:
                    try:
                        saves.append(decode_line(line))
                    except (ValueError, TypeError):
                        break  # the last line, cut short by the kill: its turn never went idle
            found.append((path, saves))
        yield found
