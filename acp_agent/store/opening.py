"""Which store a connection keeps its sessions in, and opening it once: the one place both are decided.

Every entry point asks `session_store`; they differ only in ``durable``, which each states:

- ``run_stdio`` / ``serve_stdio`` and the HTTP app (``asgi_app``, ``run_http``, ``acp-agent serve``) pass
  ``durable=True``: a process serving real clients keeps sessions across restarts, in the agent's SQLite file
  under the user data directory (`SqliteStore.for_agent`);
- [`serve`][acp_agent.serve] over streams the caller passes, a bare runtime and the in-memory test client pass
  ``durable=False``: a fresh [`MemoryStore`][acp_agent.store.MemoryStore] for that connection, so nothing touches
  the disk.

A store given explicitly wins, then the agent's own ``store``, then that default.

`StoreOpening` opens it on first use, once however many tasks ask at the same time. A store that
can never be used ([`StoreUnusableError`][acp_agent.store.StoreUnusableError]: not a session database, a newer
schema) is left as it is and replaced by a [`MemoryStore`][acp_agent.store.MemoryStore], with one error on
stderr; any other [`StoreError`][acp_agent.store.StoreError] (a database not reachable now) is raised, and the
next use tries again. A stdio connection's `RecordKeeper` and the HTTP app (one opening for all its connections)
both use it.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from ..errors import StoreUnusableError
from .base import SessionStore
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["StoreOpening", "StoreOwner", "session_store"]

logger = logging.getLogger(__name__)


class StoreOwner(Protocol):
    """What `session_store` reads of an agent (an instance or its class)."""

    @property
    def name(self) -> str:
        """The agent's name (its SQLite file is named after it)."""
        ...

    @property
    def store(self) -> SessionStore | None:
        """The agent's own store, if it sets one."""
        ...


def session_store(agent: StoreOwner, store: SessionStore | None = None, *, durable: bool,
                  served: bool = False) -> SessionStore:
    """The store a connection of ``agent`` keeps its sessions in: ``store`` if given, else ``agent.store``, else
    the agent's SQLite file (``durable``; with ``served``, the file of the agent served over HTTP, not the one
    its stdio runs use) or a new [`MemoryStore`][acp_agent.store.MemoryStore] (not ``durable``)."""
    if store is not None:
        return store
    if agent.store is not None:
        return agent.store
    return SqliteStore.for_agent(agent.name, served=served) if durable else MemoryStore()


class StoreOpening:
    """Opens ``store`` once for everyone who uses it (see the module docstring)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        """The store in use (a fresh [`MemoryStore`][acp_agent.store.MemoryStore] once the given one proved
        unusable)."""
        self._ready = False
        self._opening: anyio.Event | None = None

    @property
    def ready(self) -> bool:
        """Whether the store is open."""
        return self._ready

    async def open(self) -> SessionStore:
        """The store, opened on first use; an unusable one is replaced by a
        [`MemoryStore`][acp_agent.store.MemoryStore]. Any other [`StoreError`][acp_agent.store.StoreError] is
        raised, and the next call tries again."""
        while not self._ready:
            if self._opening is not None:
                await self._opening.wait()
                continue
            self._opening = opening = anyio.Event()
            try:
                await self.store.open()
                self._ready = True
            except StoreUnusableError as exc:
                logger.error("acp: the session store cannot be used: %s. Sessions are kept in memory only (they are "
                             "lost when this process exits); the store was left as it is.", exc)
                self.store = MemoryStore()
                self._ready = True
            finally:
                self._opening = None
                opening.set()
        return self.store

    async def close(self) -> None:
        """Close the store if it was opened (the next `open` opens it again)."""
        if self._ready:
            self._ready = False
            await self.store.close()
