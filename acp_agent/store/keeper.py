"""The runtime's side of a store: opening it (or falling back), batched saves, loading for resume.

A :class:`RecordKeeper` serves one connection. Live sessions are objects in memory; the
keeper writes them to its :class:`~acp_agent.store.SessionStore` off the hot path:

- when foreground work ends, before its ``idle`` goes out (through ``SessionCore.persist``; the
  SQLite store commits such a small save on the event loop, without a thread hand-over);
- every :data:`FLUSH_INTERVAL` seconds, for live sessions whose history changed (a long turn,
  background work reporting after the turn);
- when a session is created, forked, closed, and at the end of the connection.

A chunk of a streamed message costs nothing here: the history marks an entry changed once
per save, and a save writes only the changed entries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

import anyio

from ..errors import StoreError, StoreUnusableError
from ..history import finalize_live_items
from ..records import SessionRecord
from .base import SessionStore, StoredSession
from .memory import MemoryStore

__all__ = ["FLUSH_INTERVAL", "RecordKeeper"]

logger = logging.getLogger(__name__)

FLUSH_INTERVAL: Final = 1.0
"""Seconds between saves of a live session whose history changed while no turn ended."""


class RecordKeeper:
    """Keeps one connection's sessions in ``store`` (see the module docstring)."""

    def __init__(self, store: SessionStore, *, terminal_tail: int | None = None) -> None:
        self.store = store
        """The store in use (a fresh :class:`MemoryStore` if the given one could not be opened)."""
        self._terminal_tail = terminal_tail
        self._ready = False
        self._opening: anyio.Event | None = None

    @property
    def durable(self) -> bool:
        """Whether the store outlives the process (and saves are worth making)."""
        return self.store.durable

    async def ready(self) -> SessionStore:
        """The store, opened on first use; an unusable one is replaced by a :class:`MemoryStore`.

        Any other :class:`~acp_agent.errors.StoreError` (a database not reachable now) is raised,
        and the next call tries again.
        """
        while not self._ready:
            if self._opening is not None:
                await self._opening.wait()
                continue
            self._opening = opening = anyio.Event()
            try:
                await self.store.open()
                self._ready = True
            except StoreUnusableError as exc:
                logger.error("acp: the session store cannot be used: %s. This agent keeps serving with its "
                             "sessions in memory only (they are lost when it exits); the store was left as it is.",
                             exc)
                self.store = MemoryStore()
                self._ready = True
            finally:
                self._opening = None
                opening.set()
        return self.store

    async def save(self, record: SessionRecord) -> None:
        """Save ``record``; a failure is logged (the next save of it writes it in full), never raised."""
        try:
            store = await self.ready()
            await store.save(record)
        except StoreError as exc:
            logger.error("acp: %s (retried at the session's next save)", exc)
        except Exception:
            logger.exception("acp: saving session %s failed", record.session_id)

    async def load(self, session_id: str) -> SessionRecord | None:
        """A stored session brought back for ``session/resume``: what was live in it is reported ended.

        The process that ran that work is gone (closed or crashed): see
        :func:`~acp_agent.history.finalize_live_items`.
        """
        store = await self.ready()
        record = await store.load(session_id, terminal_tail=self._terminal_tail)
        if record is not None and store.durable:
            ended = finalize_live_items(record.history)
            if ended:
                logger.info("acp: session %s was cut short (the agent stopped without closing it); "
                            "%d item(s) that were live are reported ended", session_id, ended)
        return record

    async def delete(self, session_id: str, record: SessionRecord | None = None) -> bool:
        """Remove a session from the store; ``record``, its live record if any, is never written again."""
        if record is not None:
            record.deleted = True
        store = await self.ready()
        return await store.delete(session_id)

    async def list(self, cwd: str | None, offset: int, limit: int) -> list[StoredSession]:
        """A page of stored sessions (see :meth:`SessionStore.list`)."""
        store = await self.ready()
        return await store.list_sessions(cwd=cwd, offset=offset, limit=limit)

    async def run(self, live: Mapping[str, SessionRecord], interval: float = FLUSH_INTERVAL) -> None:
        """Every ``interval`` seconds, save the live records whose history changed (until cancelled)."""
        while True:
            await anyio.sleep(interval)
            for record in list(live.values()):
                if record.history.changed and not record.deleted:
                    await self.save(record)
