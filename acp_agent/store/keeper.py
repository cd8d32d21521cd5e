"""The runtime's side of a store: batched saves, loading for resume (opening it: `acp_agent.store.opening`).

A `RecordKeeper` serves one connection. Live sessions are objects in memory; the
keeper writes them to its [`SessionStore`][acp_agent.store.SessionStore] off the hot path:

- when foreground work ends, before its ``idle`` goes out (through ``SessionCore.persist_now``, or
  ``SessionCore.persist`` awaited when the store cannot save at once; the SQLite store journals such a
  small save with one write, with no await, and commits it in a batch shortly after);
- every `FLUSH_INTERVAL` seconds, for live sessions whose history changed (a long turn,
  background work reporting after the turn);
- when a session is created, forked, closed, and at the end of the connection.

A session whose save fails when it closes (disk full, a database locked too long, a store
exception) does not leave memory: the keeper *holds* it, logs an error on stderr, and retries
the save (`RecordKeeper.retry_held`) until it succeeds. Meanwhile this connection still
lists it, resumes it from memory and deletes it; a last attempt is made at the end of the
connection, and if that fails too the error says what is lost.

A turn whose save fails (a full disk) is not answered with an ``idle`` that reads as saved: ``persist``
reports the failure and the turn ends ``error`` (``acp_agent._session.turns.unsaved_error``); the store logs the
cause with the file's path. The turn stays in memory and the next save that succeeds writes it.

A session another process took over (a PostgreSQL store refused a save carrying this process's stale lease
epoch: `acp_agent.store.leases`) is given up here: the save fails (the turn is not answered as saved), the
store logged the takeover, `RecordKeeper.taken` names it from then on (requests for it are refused ``-32002``
"Session is active in another process"), ``on_taken`` lets the runtime close it without saving, and it is never
held or written again.

A chunk of a streamed message costs nothing here: the history marks an entry changed once
per save, and a save writes only the changed entries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

import anyio

from ..errors import ErrorCode, RequestError, StoreError
from ..records import SessionRecord
from .base import ListingKey, SessionStore, StoredSession
from .leases import SessionTakenError
from .opening import StoreOpening

__all__ = ["ACTIVE_IN_ANOTHER_PROCESS", "FLUSH_INTERVAL", "HELD_RETRY_MAX", "RecordKeeper", "active_in_another_process"]

logger = logging.getLogger(__name__)

FLUSH_INTERVAL: Final = 1.0
"""Seconds between saves of a live session whose history changed while no turn ended."""

HELD_RETRY_MAX: Final = 60.0
"""Seconds between retries of a held session's save, at most (the wait doubles from `FLUSH_INTERVAL`)."""


ACTIVE_IN_ANOTHER_PROCESS: Final = "Session is active in another process"
"""The message of the ``-32002`` answer to a request for a session another process sharing the store has active."""


def active_in_another_process(session_id: str) -> RequestError:
    """The ``-32002`` answer for a session another process sharing the store has active."""
    return RequestError(ErrorCode.RESOURCE_NOT_FOUND, ACTIVE_IN_ANOTHER_PROCESS, {"sessionId": session_id})


class RecordKeeper:
    """Keeps one connection's sessions in ``store`` (see the module docstring)."""

    def __init__(self, store: SessionStore, *, terminal_tail: int | None = None) -> None:
        self._opening = StoreOpening(store)
        self._terminal_tail = terminal_tail
        self._held: dict[str, SessionRecord] = {}  # closed sessions whose save failed (retried)
        self._acquired: set[str] = set()  # sessions this connection holds in the store (acquire_session)
        self.taken: set[str] = set()
        """Sessions another process took over while they were active here (see the module docstring)."""
        self.on_taken: Callable[[str], None] | None = None
        """Called once for each session found taken over (the runtime closes it without saving)."""

    @property
    def store(self) -> SessionStore:
        """The store in use (a fresh [`MemoryStore`][acp_agent.store.MemoryStore] if the given one could not be
        opened)."""
        return self._opening.store

    @property
    def durable(self) -> bool:
        """Whether the store outlives the process (and saves are worth making)."""
        return self.store.durable

    async def ready(self) -> SessionStore:
        """The store, opened on first use ([`StoreOpening.open`][acp_agent.store.opening.StoreOpening.open]): an
        unusable one is replaced by a [`MemoryStore`][acp_agent.store.MemoryStore]. Any other
        [`StoreError`][acp_agent.store.StoreError] (a database not reachable now) is raised, and the next call tries
        again."""
        return await self._opening.open()

    async def save(self, record: SessionRecord) -> bool:
        """Save ``record``; whether it was saved. A failure is logged (the next save of it writes it in full),
        never raised."""
        return await self.write(record)

    def save_now(self, record: SessionRecord) -> bool:
        """`save` without awaiting, where the store can
        ([`SessionStore.save_now`][acp_agent.store.SessionStore.save_now]); ``False`` if `save` must be awaited instead,
        also when this attempt failed (logged, never raised)."""
        if not self._opening.ready:
            return False
        try:
            return self.store.save_now(record)
        except StoreError as exc:
            logger.error("acp: %s (retried at once)", exc)
        except Exception:
            logger.exception("acp: saving session %s failed", record.session_id)
        return False

    async def write(self, record: SessionRecord, *, sync: bool = False) -> bool:
        """Save ``record`` (and with ``sync``, commit it where other processes see it:
        [`SessionStore.sync`][acp_agent.store.SessionStore.sync]); whether it was written (a failure is logged, never
        raised)."""
        try:
            store = self.store if self._opening.ready else await self.ready()
            await store.save(record)
            if sync:
                await store.sync()
        except SessionTakenError:
            self._taken(record.session_id)  # the store logged it
        except StoreError as exc:
            logger.error("acp: %s (retried at the session's next save)", exc)
        except Exception:
            logger.exception("acp: saving session %s failed", record.session_id)
        else:
            return True
        return False

    def _taken(self, session_id: str) -> None:
        if session_id in self.taken:
            return
        self.taken.add(session_id)
        if self.on_taken is not None:
            self.on_taken(session_id)

    # -- which process has a session ----------------------------------------------------------

    async def acquire(self, session_id: str) -> bool:
        """Hold ``session_id`` for this connection before it becomes active here (once however often asked);
        ``False`` if another process has it active
        ([`SessionStore.acquire_session`][acp_agent.store.SessionStore.acquire_session])."""
        if session_id in self._acquired:
            return True
        store = await self.ready()
        if not await store.acquire_session(session_id):
            return False
        self._acquired.add(session_id)
        return True

    async def acquire_or_refuse(self, session_id: str) -> None:
        """`acquire`, or raise ``-32002`` "Session is active in another process" (`active_in_another_process`)."""
        if not await self.acquire(session_id):
            raise active_in_another_process(session_id)
        self.taken.discard(session_id)  # this process has it again

    async def held_elsewhere(self, session_id: str) -> bool:
        """Whether another process has ``session_id`` active (a probe: nothing stays held here)."""
        if session_id in self._acquired:
            return False
        store = await self.ready()
        if not await store.acquire_session(session_id):
            return True
        await store.release_session(session_id)
        return False

    async def release(self, session_id: str) -> None:
        """Give the hold back (the session left this connection, saved, or never became active)."""
        if session_id in self._acquired and session_id not in self._held:
            self._acquired.discard(session_id)
            await self.store.release_session(session_id)

    async def release_all(self) -> None:
        """The end of the connection: give back every hold left."""
        for session_id in list(self._acquired):
            self._held.pop(session_id, None)
            await self.release(session_id)

    # -- sessions leaving memory ------------------------------------------------------------

    async def keep(self, record: SessionRecord) -> None:
        """Save a closed session, which then leaves memory; if that fails, hold it (see the module docstring).
        Once saved, another process may have it (`release`); a held one stays this process's."""
        if await self.write(record, sync=True) or record.deleted or record.session_id in self.taken:
            await self.release(record.session_id)
            return
        self._held[record.session_id] = record
        logger.error("acp: session %s was closed but could not be saved; it stays in this agent's memory (listed "
                     "and resumable on this connection) and its save is retried", record.session_id)

    async def retry_held(self, interval: float = FLUSH_INTERVAL) -> None:
        """Until cancelled: retry the saves of held sessions, every ``interval`` seconds at first and
        twice as long after each round that saved none of them (up to `HELD_RETRY_MAX`)."""
        wait = interval
        while True:
            await anyio.sleep(wait)
            if not self._held:
                wait = interval
                continue
            wait = interval if await self._retry_round() else min(wait * 2, HELD_RETRY_MAX)

    async def _retry_round(self) -> bool:
        """One attempt for each held session; whether one was saved."""
        saved = False
        for record in list(self._held.values()):
            sid = record.session_id
            if self._held.get(sid) is not record:
                continue  # resumed or deleted meanwhile
            if (await self.write(record, sync=True) or sid in self.taken) and self._held.get(sid) is record:
                del self._held[sid]
                await self.release(sid)
                saved = True
                logger.warning("acp: session %s is saved now (it stayed in memory since its close)", sid)
        return saved

    async def flush_held(self) -> None:
        """The end of the connection: a last attempt for each held session (an error names each one lost)."""
        for record in list(self._held.values()):
            if self._held.get(record.session_id) is not record:
                continue
            if not await self.write(record, sync=True):
                logger.error("acp: session %s could not be saved before the connection ended: what changed in it "
                             "since its last successful save (all of it, if it was never saved) is lost",
                             record.session_id)
            self._held.pop(record.session_id, None)
        await self.release_all()

    async def load(self, session_id: str) -> SessionRecord | None:
        """A stored session brought back for ``session/resume``: what was live in it is reported ended.

        The process that ran that work is gone (closed or crashed): see
        `finalize_live_items`.
        """
        held = self._held.pop(session_id, None)
        if held is not None:
            return held  # closed, so already finalized; its save is retried once it is closed again
        store = await self.ready()
        record = await store.load(session_id, terminal_tail=self._terminal_tail)
        if record is not None and store.durable:
            from ..history import finalize_live_items  # the record holds a History, so it is loaded

            ended = finalize_live_items(record.history)
            if ended:
                logger.info("acp: session %s was cut short (the agent stopped without closing it); "
                            "%d item(s) that were live are reported ended", session_id, ended)
        return record

    async def delete(self, session_id: str, record: SessionRecord | None = None) -> bool:
        """Remove a session from the store; ``record``, its live record if any, is never written again."""
        held = self._held.pop(session_id, None)
        for gone in (record, held):
            if gone is not None:
                gone.deleted = True
        store = await self.ready()
        try:
            return await store.delete(session_id) or held is not None
        finally:
            await self.release(session_id)

    async def unstored(self, cwd: str | None, archived: bool | None = None) -> list[StoredSession]:
        """Held sessions the store has no version of (they go after the last stored one in a listing)."""
        found: list[StoredSession] = []
        for record in list(self._held.values()):
            if cwd not in (None, record.cwd) or archived not in (None, record.archived):
                continue
            try:
                known = await self.store.find(record.session_id)
            except StoreError:
                known = None
            if known is None:
                found.append(StoredSession.of(record))
        return found

    async def list(self, cwd: str | None, after: ListingKey | None, limit: int, archived: bool | None = None,
                   principal: str | None = None) -> list[StoredSession]:
        """A page of stored sessions (see
        [`SessionStore.list_sessions`][acp_agent.store.SessionStore.list_sessions])."""
        store = await self.ready()
        page = await store.list_sessions(cwd=cwd, limit=limit, archived=archived, principal=principal, after=after)
        if not self._held:
            return page
        return [StoredSession.of(self._held[s.session_id]) if s.session_id in self._held else s for s in page]

    async def stores_at_least(self, count: int, principal: str) -> bool:
        """Whether ``principal`` has ``count`` or more sessions stored (one row read, not ``count``)."""
        store = await self.ready()
        return bool(await store.list_sessions(principal=principal, offset=count - 1, limit=1))

    async def find(self, session_id: str) -> StoredSession | None:
        """The listing of one stored session, without loading it (see
        [`SessionStore.find`][acp_agent.store.SessionStore.find])."""
        held = self._held.get(session_id)
        if held is not None:
            return StoredSession.of(held)
        store = await self.ready()
        return await store.find(session_id)

    async def run(self, live: Mapping[str, SessionRecord], interval: float = FLUSH_INTERVAL) -> None:
        """Every ``interval`` seconds, save the live records whose history changed (until cancelled)."""
        while True:
            await anyio.sleep(interval)
            for record in list(live.values()):
                if record.history.changed and not record.deleted and record.session_id not in self.taken:
                    await self.save(record)
