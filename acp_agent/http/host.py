"""What both transports of one app share: the agent, the settings, the live connections, the one store.

[`AcpApp`][acp_agent.http.AcpApp] owns one `Host` and hands it to its Streamable HTTP
(`acp_agent.http.streamable`) and WebSocket (`acp_agent.http.websocket`) transports, so neither reaches into
the app or into the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup

from .._util.episodes import Episode
from ..agent import Agent
from ..errors import RequestError, StoreError
from ..limits import limit_error
from ..store import SessionStore
from ..store.opening import StoreOpening, session_store
from ..store.postgres import PostgresStore
from .connections import SHUTDOWN_MARGIN, ConnectionRegistry
from .leases import Leases, StoreLeases
from .options import HttpOptions
from .peers import Peers
from .sessions import ActiveSessions

__all__ = ["Host"]

logger = logging.getLogger(__name__)


class Host:
    """The state every connection of one app shares, whichever transport carries it."""

    def __init__(self, agent: Agent | Callable[[], Agent], options: HttpOptions, store: SessionStore | None) -> None:
        self.agent = agent
        """The agent shared by every connection, or the factory called once per connection."""
        self.options = options
        """The server settings."""
        self.registry = ConnectionRegistry(options.max_connections)
        """The live connections."""
        self.sessions = ActiveSessions(options.shutdown_timeout + 2 * SHUTDOWN_MARGIN)
        """Which connection has each session active."""
        self.task_group: TaskGroup | None = None
        """Where HTTP connections run: the app's lifespan (``None`` outside it)."""
        self.closing = False
        """Whether the app is closing (no new connection is taken)."""
        self.draining = False
        """Whether a graceful shutdown began (``/readyz`` answers 503; connections close after ``drain_delay``)."""
        self.peers = Peers(options.advertise_url, options.peers)
        """The replicas Streamable HTTP requests for connections held elsewhere are forwarded to."""
        self._store = store
        self._opening: StoreOpening | None = None
        self._store_down = Episode()

    @property
    def store(self) -> SessionStore | None:
        """The store every connection keeps its sessions in (``None`` until known: an agent factory that is not a
        class is asked on the first connection)."""
        if self._opening is not None:
            return self._opening.store
        if self._store is None:
            source = self.agent
            if isinstance(source, Agent) or (isinstance(source, type) and issubclass(source, Agent)):
                self._store = session_store(source, durable=True, served=True)
        return self._store

    @property
    def extra_headers(self) -> list[tuple[bytes, bytes]]:
        """``options.extra_headers`` as ASGI headers, added to every answer that opens or serves a connection."""
        return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in self.options.extra_headers]

    def new_agent(self) -> Agent:
        """The agent of a new connection."""
        return self.agent if isinstance(self.agent, Agent) else self.agent()

    async def shared_store(self, agent: Agent) -> SessionStore:
        """The store, opened once for all connections (an unusable one is replaced by one
        [`MemoryStore`][acp_agent.store.MemoryStore] for the whole server, never one per connection; one not
        reachable now is logged, handed out unopened, and opened again on the next connection)."""
        if self._opening is None:
            store = self.store
            if store is None:
                store = self._store = session_store(agent, durable=True, served=True)
            self._opening = StoreOpening(store)
        store = self._opening.store
        if isinstance(store, PostgresStore) and type(self.sessions.leases) is Leases:
            # Replicas share this database: a session active here is leased, so no other replica resumes it.
            self.sessions.leases = StoreLeases(store)
        try:
            return await self._opening.open()
        except StoreError as exc:
            self._store_down.log(logger, logging.ERROR, "acp: the session store cannot be opened now: %s (retried on "
                                 "the next use)", exc)
            return store

    async def store_reachable(self, timeout: float = 2.0) -> bool:
        """Whether the store answers a lookup within ``timeout`` seconds (a readiness probe)."""
        store = self.store
        if store is None:
            return True  # not known until the first connection: nothing to wait for
        with anyio.move_on_after(timeout):
            try:
                if self._opening is None:
                    self._opening = StoreOpening(store)
                opened = await self._opening.open()
                await opened.find("acp-readiness-probe")
            except Exception as exc:
                self._store_down.log(logger, logging.WARNING, "acp: readiness: the session store does not answer: %s",
                                     exc)
                return False
            return True
        return False

    async def expire_sessions(self, max_age: float) -> int:
        """Delete the stored sessions nobody used for ``max_age`` seconds (``updated_at`` older), except those
        active on a connection of this app; how many were deleted. A store not known yet (an agent factory not
        asked) or not reachable now is left for the next sweep."""
        store = self.store
        if store is None:
            return 0
        if self._opening is None:
            self._opening = StoreOpening(store)
        try:
            store = await self._opening.open()
        except StoreError as exc:
            logger.error("acp: the session store cannot be opened now: %s (stored sessions expire later)", exc)
            return 0
        cutoff = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - max_age))
        after: tuple[str, str] = (cutoff, "")
        deleted = 0
        while page := await store.list_sessions(after=after, limit=200):
            active = {sid for connection in self.registry for sid in connection.runtime.records}
            for stored in page:
                if stored.session_id not in active and await store.delete(stored.session_id):
                    deleted += 1
            after = page[-1].key
        if deleted:
            logger.info("acp: %d stored sessions expired (unused for %.0f days)", deleted, max_age / 86400)
        return deleted

    async def close_store(self) -> None:
        """Close the store if it was opened (the end of the lifespan)."""
        if self._opening is not None:
            await self._opening.close()

    def principal_full(self, agent: Agent, principal: str) -> RequestError | None:
        """The refusal of one more connection for ``principal`` past ``max_principal_connections``, if any."""
        cap = (self.options.limits or agent.limits).max_principal_connections
        if cap is None or (held := self.registry.held_by(principal)) < cap:
            return None
        return limit_error("max_principal_connections", cap, f"{held} connections of this user are open")
