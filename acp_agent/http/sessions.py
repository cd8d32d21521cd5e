"""One session, one connection: which connection of a server has each session active.

Every connection of an [`AcpApp`][acp_agent.http.AcpApp] keeps its sessions in the app's one store,
so a client that lost its connection can ``initialize`` again and ``session/resume`` its session
on a new one (on any replica sharing the store). A session is active on one connection at a
time; a ``session/resume`` (or ``session/delete``, or ``session/archive``, which closes the session)
naming a session active on another connection of this server is handled so:

- the other connection is closing (DELETE, a dropped WebSocket, idle expiry, a broken limit): the
  request waits until that connection has saved the session, then goes ahead;
- the other connection is an HTTP connection nobody reads any more (no event stream attached: the
  client that opened it is gone, it just has not sent DELETE) and was opened with the same
  credential: the session is closed there, as ``session/close`` would (its work stops, it is
  saved), then the request goes ahead: the new connection takes the session over;
- otherwise (a client still reads the other connection, and it is not found gone within
  `LET_GO_GRACE` seconds: a client reconnecting at once may be ahead of the server noticing
  that its old connection dropped): the request is refused ``-32002`` with
  the message "Session is active on another connection" and ``data: {"sessionId": ...}``, so two
  live clients never run one session side by side. The client closes it there first, or retries
  once the other connection is gone.

Across processes (replicas sharing a PostgreSQL store) the process that has a session active holds
its lease (`acp_agent.http.leases`): another process's ``session/resume`` or ``session/delete``
waits up to `LET_GO_GRACE` seconds for it, then is refused the same way. A process holds
the lease from the moment a session becomes active on one of its connections (``session/new``,
``session/fork``, ``session/resume``) until no connection of it has the session any more (closed,
deleted, or its connection ended: always after the session was saved).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import anyio

from .._runtime.runtime import AgentRuntime
from .._wire.connection import Method, Reply
from ..errors import ErrorCode, RequestError
from ..schema import SessionStatusResponse
from .leases import Leases

__all__ = ["ACTIVE_ELSEWHERE", "ACTIVE_ELSEWHERE_STATUS", "LET_GO_GRACE", "ActiveSessions", "Holder",
           "active_elsewhere"]

logger = logging.getLogger(__name__)

ACTIVE_ELSEWHERE: Final = "Session is active on another connection"
"""The error message of a request refused because another live connection has the session."""

LET_GO_GRACE: Final = 1.0
"""Seconds a request waits for a connection still read to be found gone before it is refused."""

_GUARDED: Final = ("session/resume", "session/delete", "session/archive")
_OPENING: Final = ("session/new", "session/fork")
_TRUTHFUL: Final = ("session/status", "session/set_title", "session/unarchive")

ACTIVE_ELSEWHERE_STATUS: Final = "active_elsewhere"
"""The ``session/status`` of a session another replica has active (its stored state is behind)."""


def active_elsewhere(session_id: str) -> RequestError:
    """The ``-32002`` answer for a session another live connection has active."""
    return RequestError(ErrorCode.RESOURCE_NOT_FOUND, ACTIVE_ELSEWHERE, {"sessionId": session_id})


class Holder(Protocol):
    """What `ActiveSessions` uses of a connection that may have sessions active
    (`Holder`, which imports this module, not the reverse)."""

    @property
    def id(self) -> str:
        """The ``Acp-Connection-Id``."""
    @property
    def transport(self) -> str:
        """``"http"`` or ``"websocket"``."""
    @property
    def credential(self) -> bytes | None:
        """Digest of the ``Authorization`` header the connection was opened with."""
    @property
    def runtime(self) -> AgentRuntime:
        """The connection's runtime."""
    @property
    def closing(self) -> bool:
        """Whether its shutdown began."""
    @property
    def detached(self) -> bool:
        """Whether a WebSocket connection's client is gone (its turns running on for it to reattach)."""
    @property
    def receivers(self) -> int:
        """Event streams attached right now."""

    async def saved(self, session_id: str) -> None:
        """Return once ``session_id`` is no longer active there (saved)."""

    async def close_session(self, session_id: str) -> None:
        """Close ``session_id`` there as ``session/close`` would."""


class ActiveSessions:
    """The connections of one server that are not finished, and the sessions they are taking up (which
    runtime has a session active is the store's `LiveSessions`)."""

    def __init__(self, wait_limit: float, leases: Leases | None = None) -> None:
        self._connections: set[Holder] = set()
        self._claims: dict[str, tuple[Holder, int]] = {}  # sessions being resumed / deleted
        self._wait_limit = wait_limit
        self.leases = leases if leases is not None else Leases()
        """The leases of the sessions active in this process (another process's are refused)."""
        self._leased: dict[Holder, set[str]] = {}  # the sessions leased for each connection

    def attach(self, connection: Holder) -> None:
        """Track ``connection`` and guard its ``session/resume``, ``session/delete`` and ``session/archive``."""
        self._connections.add(connection)
        requests = connection.runtime.connection.requests
        for method in _GUARDED:
            if method in requests:  # inside the runtime's principal check: another user's session stays unknown
                connection.runtime.intercept(method, lambda handler: self._guarded(connection, handler))
        if type(self.leases) is Leases:
            return  # no other process shares the store: nothing more to track
        for method in _OPENING:
            route = requests.get(method)
            if route is not None and route.handler is not None:
                requests[method] = Method(self._opening(connection, route.handler), route.params, route.prepare)
        route = requests.get("session/close")
        if route is not None and route.handler is not None:
            requests["session/close"] = Method(self._closing(connection, route.handler), route.params, route.prepare)
        for method in _TRUTHFUL:
            if method in requests:
                connection.runtime.intercept(method, functools.partial(self._truthful, method))

    async def in_another_process(self, session_id: str) -> bool:
        """Whether another process (a replica sharing the store) has ``session_id`` active: it holds the lease."""
        if type(self.leases) is Leases or any(session_id in held for held in self._leased.values()):
            return False
        if await self.leases.acquire(session_id):
            await self.leases.release(session_id)
            return False
        return True

    async def elsewhere(self, connection: Holder, session_id: str) -> bool:
        """Whether ``session_id`` is active on another connection: of this process, or of another one."""
        if any(c is not connection for c in self._holders(session_id, connection)):
            return True
        return await self.in_another_process(session_id)

    def _truthful(self, method: str,
                  handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """``session/status`` says ``active_elsewhere`` for a session another replica has active (not ``saved``:
        what is stored is behind); ``session/set_title`` and ``session/unarchive`` of such a session are refused
        ``-32002`` (as over SQLite), since that replica's next save would write over the change."""
        async def truthful(request: Any) -> Any:
            session_id: str = request.session_id
            if method == "session/status":
                result = await handler(request)
                if getattr(result, "status", None) == "saved" and await self.in_another_process(session_id):
                    return SessionStatusResponse(status=ACTIVE_ELSEWHERE_STATUS)
                return result
            if await self.in_another_process(session_id):
                raise active_elsewhere(session_id)
            return await handler(request)

        return truthful

    async def detach(self, connection: Holder) -> None:
        """Forget a finished connection (its sessions were saved) and give back the leases it alone held."""
        self._connections.discard(connection)
        for session_id in self._leased.pop(connection, ()):
            await self._unlease_if_free(connection, session_id)

    def owner(self, session_id: str, asking: Holder) -> Holder | None:
        """The other connection that has ``session_id`` active or is bringing it up, if any."""
        claim = self._claims.get(session_id)
        if claim is not None and claim[0] is not asking:
            return claim[0]
        return next((c for c in self._holders(session_id, asking) if c is not asking), None)

    def _holders(self, session_id: str, connection: Holder) -> list[Holder]:
        """The connections here on which ``session_id`` is active (known to the store of ``connection``)."""
        active = set(connection.runtime.live.active(session_id))
        return [c for c in self._connections if c.runtime in active]

    def _guarded(self, connection: Holder,
                 handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def guarded(request: Any) -> Any:
            session_id: str = request.session_id
            await self._claim(connection, session_id)
            try:
                return await handler(request)
            finally:
                self._release(connection, session_id)
                with anyio.CancelScope(shield=True):
                    await self._unlease_if_free(connection, session_id)  # a failed resume, a delete

        return guarded

    def _opening(self, connection: Holder,
                 handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def opening(request: Any) -> Any:
            result = await handler(request)
            answer = result.result if isinstance(result, Reply) else result
            session_id = getattr(answer, "session_id", None)
            if isinstance(session_id, str):
                with anyio.CancelScope(shield=True):
                    if not await self._lease(connection, session_id):
                        logger.error("acp: the lease of new session %s is held by another process", session_id)
            return result

        return opening

    def _closing(self, connection: Holder,
                 handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def closing(request: Any) -> Any:
            try:
                return await handler(request)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._unlease_if_free(connection, request.session_id)

        return closing

    async def _lease(self, connection: Holder, session_id: str, wait: float = 0.0) -> bool:
        """Take the lease of ``session_id`` for this process (waiting up to ``wait`` seconds for another
        process to give it back); ``False`` if it did not."""
        if type(self.leases) is Leases:
            return True
        with anyio.move_on_after(wait):
            while not await self.leases.acquire(session_id):
                if wait <= 0:
                    return False
                await anyio.sleep(0.1)
            self._leased.setdefault(connection, set()).add(session_id)
            return True
        return False

    async def _unlease_if_free(self, connection: Holder, session_id: str) -> None:
        """Give the lease of ``session_id`` back once no connection of this process has it."""
        if type(self.leases) is Leases or session_id in self._claims or self._holders(session_id, connection):
            return
        await self.leases.release(session_id)

    async def _claim(self, connection: Holder, session_id: str) -> None:
        with anyio.move_on_after(self._wait_limit) as waited:
            while (owner := self.owner(session_id, connection)) is not None:
                claim = self._claims.get(session_id)
                if claim is not None and claim[0] is owner:
                    raise active_elsewhere(session_id)  # being resumed or deleted there right now
                session = owner.runtime.sessions.get(session_id)
                if owner.closing or session is None:
                    await owner.saved(session_id)  # its close is under way: wait for the save
                elif session.parent is None and self._abandoned(owner, connection):
                    logger.info("acp: connection %s takes session %s over from connection %s, which nobody "
                                "reads", connection.id, session_id, owner.id)
                    await owner.close_session(session_id)
                elif not await self._let_go(owner, connection):
                    raise active_elsewhere(session_id)
        if waited.cancelled_caught:
            raise active_elsewhere(session_id)  # the other connection did not let go in time
        held = self._claims.get(session_id)
        self._claims[session_id] = (connection, held[1] + 1 if held is not None else 1)
        if held is None and not await self._lease(connection, session_id, LET_GO_GRACE):
            self._release(connection, session_id)
            raise active_elsewhere(session_id)  # active in another process

    async def _let_go(self, owner: Holder, asking: Holder) -> bool:
        """Whether ``owner`` starts closing or loses its last reader within `LET_GO_GRACE` seconds
        (a client that reconnects at once may be ahead of the server noticing its old connection drop)."""
        with anyio.move_on_after(LET_GO_GRACE):
            while not (owner.closing or self._abandoned(owner, asking)):
                await anyio.sleep(0.02)
            return True
        return False

    @staticmethod
    def _abandoned(owner: Holder, asking: Holder) -> bool:
        """Whether nobody reads ``owner`` (an HTTP connection with no event stream, or a WebSocket connection
        whose client is gone, waiting for it to reattach) and ``asking`` was opened with the same credential."""
        unread = owner.receivers == 0 if owner.transport == "http" else owner.detached
        return unread and owner.credential == asking.credential

    def _release(self, connection: Holder, session_id: str) -> None:
        held = self._claims.get(session_id)
        if held is None or held[0] is not connection:
            return
        if held[1] > 1:
            self._claims[session_id] = (connection, held[1] - 1)
        else:
            del self._claims[session_id]
