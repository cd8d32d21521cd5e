"""Where a connection keeps its sessions: the one place the default store is chosen.

Every entry point asks `session_store`; they differ only in ``durable``, which each states:

- ``run_stdio`` / ``serve_stdio`` and the HTTP app (``asgi_app``, ``run_http``, ``acp-agent serve``) pass
  ``durable=True``: a process serving real clients keeps sessions across restarts, in the agent's SQLite file
  under the user data directory (`SqliteStore.for_agent`);
- [`serve`][acp_agent.serve] over streams the caller passes, a bare
  `AgentRuntime` and the in-memory test client pass ``durable=False``: a
  fresh [`MemoryStore`][acp_agent.store.MemoryStore] for that connection, so nothing touches the disk.

A store given explicitly wins, then the agent's own ``store``, then that default.
"""

from __future__ import annotations

from ..agent import Agent
from ..store import MemoryStore, SessionStore, SqliteStore

__all__ = ["session_store"]


def session_store(agent: Agent | type[Agent], store: SessionStore | None = None, *, durable: bool) -> SessionStore:
    """The store a connection of ``agent`` keeps its sessions in: ``store`` if given, else ``agent.store``, else
    the agent's SQLite file (``durable``) or a new [`MemoryStore`][acp_agent.store.MemoryStore] (not ``durable``)."""
    if store is not None:
        return store
    if agent.store is not None:
        return agent.store
    return SqliteStore.for_agent(agent.name) if durable else MemoryStore()
