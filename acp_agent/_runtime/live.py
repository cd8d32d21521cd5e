"""The live sessions of one store object: which runtime sharing it has each session, and which are busy.

Every `AgentRuntime` joins the `LiveSessions` of its store object
(`live_sessions`) until its connection ends. A close, a resume loading a session or a change of a stored
one marks the session while it runs; the next resume or change waits until it is `settled`,
so it starts from what the last one saved.

The table lives here, one per store object and gone with it, so a [`SessionStore`][acp_agent.store.SessionStore] (and
every third-party store) knows nothing of runtimes or connections.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

import anyio

from ..store import SessionStore

__all__ = ["LiveSessions", "Member", "live_sessions"]


class Member(Protocol):
    """What the table reads of a runtime: the ``sessions`` open on it (children too), the
    ``records`` of those active on it (one being closed keeps its record until it is saved) and
    its ``principal`` (whose sessions they are)."""

    @property
    def sessions(self) -> Mapping[str, object]: ...
    @property
    def records(self) -> Mapping[str, object]: ...
    @property
    def principal(self) -> str: ...


R = TypeVar("R", bound=Member)


class LiveSessions(Generic[R]):
    """The runtimes sharing one store object, and the marks of its sessions (see the module docstring)."""

    def __init__(self) -> None:
        self._members: weakref.WeakSet[R] = weakref.WeakSet()  # one never run goes once unreferenced
        self._busy: dict[str, list[anyio.Event]] = {}
        self._creating: dict[str, int] = {}  # sessions of each principal being created, not yet stored
        self._room_locks: dict[str, anyio.Lock] = {}

    def join(self, member: R) -> None:
        """Count ``member`` in until it leaves."""
        self._members.add(member)

    def leave(self, member: R) -> None:
        """Forget ``member`` (its connection ended)."""
        self._members.discard(member)

    def members(self, first: R | None = None) -> list[R]:
        """The runtimes in the table, ``first`` (if one of them) ahead of the others."""
        others = [m for m in self._members if m is not first]
        return [first, *others] if first is not None and first in self._members else others

    def active(self, session_id: str, first: R | None = None) -> Iterator[R]:
        """The runtimes on which ``session_id`` is active (normally one), ``first`` looked at first."""
        return (m for m in self.members(first) if session_id in m.records)

    def opened(self, session_id: str, first: R | None = None) -> Iterator[R]:
        """The runtimes on which ``session_id`` is open (a child session too), ``first`` looked at first."""
        return (m for m in self.members(first) if session_id in m.sessions)

    @contextlib.asynccontextmanager
    async def changing(self, session_id: str) -> AsyncIterator[None]:
        """Mark ``session_id`` as being closed, loaded or changed while the block runs (however it ends)."""
        marks, done = self._busy.setdefault(session_id, []), anyio.Event()
        marks.append(done)
        try:
            yield
        finally:
            marks.remove(done)
            if not marks:
                del self._busy[session_id]
            done.set()

    async def reserve(self, principal: str, room: Callable[[int], Awaitable[bool]]) -> bool:
        """Count one more session of ``principal`` as being created if ``room(creating)`` (asked with how many are
        being created already, one at a time per principal) says the store has room for it; False if not.

        Check and count are one step, so concurrent creations cannot all pass a quota check made before any
        of them is saved; `unreserve` once the session is saved (or given up)."""
        lock = self._room_locks.setdefault(principal, anyio.Lock())
        async with lock:
            creating = self._creating.get(principal, 0)
            if not await room(creating):
                return False
            self._creating[principal] = creating + 1
            return True

    def unreserve(self, principal: str) -> None:
        """The session `reserve` counted is saved (or given up)."""
        left = self._creating.get(principal, 0) - 1
        if left > 0:
            self._creating[principal] = left
        else:
            self._creating.pop(principal, None)

    async def settled(self, session_id: str) -> None:
        """Return once no close, load or change of ``session_id`` is in progress; at once, without
        yielding, if none is (so what the caller checks next still holds when it acts on it)."""
        while marks := self._busy.get(session_id):
            await marks[0].wait()


_TABLES: dict[int, tuple[weakref.ref[SessionStore], LiveSessions[Any]]] = {}
"""The table of each store object alive, by identity (a store that compares equal to another still has its own)."""


def live_sessions(store: SessionStore) -> LiveSessions[Any]:
    """The live sessions of ``store`` (one table per store object, made on first use, gone with the store)."""
    key = id(store)
    entry = _TABLES.get(key)
    if entry is not None and entry[0]() is store:
        return entry[1]

    def forget(ref: weakref.ref[SessionStore]) -> None:
        if (held := _TABLES.get(key)) is not None and held[0] is ref:
            del _TABLES[key]

    table: LiveSessions[Any] = LiveSessions()
    _TABLES[key] = (weakref.ref(store, forget), table)
    return table
