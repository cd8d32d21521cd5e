"""[unstable] Session bookkeeping the SDK serves for every agent: titles, archiving, status.

The SDK owns sessions (in memory while active, in the store otherwise), so it answers these
methods itself and advertises ``session.title``, ``session.archive`` and ``session.status``:

- ``session/set_title``: the title is trimmed (empty: ``-32602``), stored, shown by
  ``session/list``, and wins from then on over titles the agent gives with
  ``session.update_info(title=...)`` (the record's ``client_title``);
- ``session/archive`` / ``session/unarchive``: archiving a session that is active first closes it
  exactly as ``session/close`` does (a server refuses it ``-32002`` "Session is active on another
  connection" while another live connection has it: `acp_agent.http.sessions`), then hides it from the
  default ``session/list``
  (see `archive_filter` for the ``archived`` filter);
- ``session/status``: ``open`` with the current state snapshot for a session in memory, ``saved``
  for one only stored; it never loads, attaches or changes anything.

They work on any session ``session/list`` could return, active on this connection, active on
another connection of this process that shares the store, or only stored (unknown: ``-32002``; a
session of another principal is unknown, checked by the runtime before these run).
A child session (a subagent's) is refused with ``-32602``, as for ``session/close``. The agent
hears of a change, and may refuse it, through `Agent.set_session_title`, `archive_session` and
`unarchive_session`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

from .. import schema
from .._wire.connection import Method
from ..agent import Agent
from ..errors import RequestError
from ..limits import Limits, limit_error
from ..records import SessionRecord
from ..store.keeper import RecordKeeper
from .children import CHILD_MUTATION_REFUSED
from .live import LiveSessions

if TYPE_CHECKING:
    from .._session.core import SessionCore
    from ..schema import (
        ArchiveSessionRequest,
        ArchiveSessionResponse,
        SessionStatusRequest,
        SessionStatusResponse,
        SetSessionTitleRequest,
        SetSessionTitleResponse,
        UnarchiveSessionRequest,
        UnarchiveSessionResponse,
    )

__all__ = ["Bookkeeping", "archive_filter"]


class AgentRuntime(Protocol):
    """What bookkeeping uses of a `AgentRuntime`."""

    agent: Agent
    limits: Limits
    keeper: RecordKeeper
    live: LiveSessions[Any]
    sessions: dict[str, SessionCore]
    records: dict[str, SessionRecord]

    async def close_session(self, session_id: str) -> None:
        """Close an active session exactly as ``session/close`` does."""

_FILTERS: Final[dict[str | None, bool | None]] = {None: False, "exclude": False, "include": None, "only": True}


def archive_filter(value: str | None) -> bool | None:
    """The store filter for ``session/list``'s ``archived``: ``exclude`` (default) keeps the sessions
    not archived (``False``), ``only`` the archived ones (``True``), ``include`` both (``None``);
    any other value is ``-32602``."""
    try:
        return _FILTERS[value]
    except KeyError:
        raise RequestError.invalid_params("unsupported archived filter", {"archived": value}) from None


class Bookkeeping:
    """Serves ``session/set_title``, ``session/archive``, ``session/unarchive`` and ``session/status``
    for one runtime (see the module docstring)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    def routes(self) -> dict[str, Method]:
        """The request methods served here."""
        return {
            "session/set_title": Method(self.set_title, "SetSessionTitleRequest"),
            "session/archive": Method(self.archive, "ArchiveSessionRequest"),
            "session/unarchive": Method(self.unarchive, "UnarchiveSessionRequest"),
            "session/status": Method(self.status, "SessionStatusRequest"),
        }

    # -- finding a session -------------------------------------------------------------------

    def _owner(self, session_id: str) -> AgentRuntime | None:
        """The runtime on which the session is active (``-32602`` for a child session)."""
        opened = next(self.runtime.live.opened(session_id, self.runtime), None)
        if opened is not None and opened.sessions[session_id].parent is not None:
            raise RequestError.invalid_params(CHILD_MUTATION_REFUSED, {"sessionId": session_id})
        return next(self.runtime.live.active(session_id, self.runtime), None)

    async def _change(self, session_id: str, change: Callable[[SessionRecord, AgentRuntime | None], Awaitable[None]],
                      ) -> None:
        """Apply ``change`` to the session's record, live or stored, and store the result."""
        await self.runtime.live.settled(session_id)
        owner = self._owner(session_id)
        if owner is not None:
            await change(owner.records[session_id], owner)
            return
        async with self.runtime.live.changing(session_id):  # a resume waits for the stored change
            keeper = self.runtime.keeper
            await keeper.acquire_or_refuse(session_id)  # not while another process has it active (it would save over)
            try:
                store = await keeper.ready()
                record = await store.load(session_id)
                if record is None:
                    raise RequestError.session_not_found(session_id)
                await change(record, None)
                await store.sync()  # committed before another process may take the session
            finally:
                await keeper.release(session_id)

    # -- the methods -------------------------------------------------------------------------

    async def set_title(self, request: SetSessionTitleRequest) -> SetSessionTitleResponse:
        """``session/set_title``: store the trimmed title; the client's title wins from now on (S4)."""
        title = request.title.strip()
        if not title:
            raise RequestError.invalid_params("title must not be empty")
        cap = self.runtime.limits.max_title_length
        if len(title) > cap:
            raise limit_error("max_title_length", cap, f"the title has {len(title)} characters")
        sid = request.session_id

        async def retitle(record: SessionRecord, owner: AgentRuntime | None) -> None:
            await self.runtime.agent.set_session_title(sid, title)
            record.title, record.client_title = title, True
            if owner is None:
                await (await self.runtime.keeper.ready()).save(record)
                return
            core = owner.sessions.get(sid)
            if core is not None and not core.closing:
                core.emit(schema.SessionInfoUpdate(title=title))  # the connection that has it open sees it too
            await owner.keeper.save(record)

        await self._change(sid, retitle)
        return schema.SetSessionTitleResponse(title=title)

    async def archive(self, request: ArchiveSessionRequest) -> ArchiveSessionResponse:
        """``session/archive``: close the session if it is active (as ``session/close``), then hide it (S5)."""
        await self._mark(request.session_id, True)
        return schema.ArchiveSessionResponse()

    async def unarchive(self, request: UnarchiveSessionRequest) -> UnarchiveSessionResponse:
        """``session/unarchive``: list the session by default again (it stays where it is)."""
        await self._mark(request.session_id, False)
        return schema.UnarchiveSessionResponse()

    async def _mark(self, sid: str, archived: bool) -> None:
        agent = self.runtime.agent
        hook = agent.archive_session if archived else agent.unarchive_session

        async def mark(record: SessionRecord, owner: AgentRuntime | None) -> None:
            if record.archived == archived and owner is None:
                return  # archiving twice succeeds, and changes nothing
            if record.archived != archived:
                await hook(sid)
            record.archived = archived
            if owner is None:
                await (await self.runtime.keeper.ready()).save(record)
            else:
                if archived:
                    await owner.close_session(sid)
                await owner.keeper.save(record)  # also if a close ran (and saved it) while the hook ran

        await self._change(sid, mark)

    async def status(self, request: SessionStatusRequest) -> SessionStatusResponse:
        """``session/status``: ``open`` (with the current state) or ``saved``; no side effects (S6)."""
        sid = request.session_id
        opened = next(self.runtime.live.opened(sid, self.runtime), None)
        if opened is not None:
            fields: dict[str, Any] = {"status": "open", "state": opened.sessions[sid].snapshots.current()}
            return schema.SessionStatusResponse(**fields)
        if next(self.runtime.live.active(sid), None) is not None:  # being closed: saved once its close ends
            return schema.SessionStatusResponse(status="saved")
        if await self.runtime.keeper.find(sid) is None:
            raise RequestError.session_not_found(sid)
        return schema.SessionStatusResponse(status="saved")
