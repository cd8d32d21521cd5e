"""Questions to the user for a session: what they do to the foreground state, and who owns them.

`send_question` is the one place that decides this for every kind of question (permission
requests, elicitations): asked by foreground work, the session reports ``requires_action``
while every such question waits and ``running`` again after (R59, R60), and cancelling the
work withdraws the question with ``$/cancel_request`` (R66, R67). Asked on behalf of listed
background work, the state does not change (R61), a snapshot listing the item goes out first
(R110), and ``session/cancel`` leaves the question open (R107) until the item ends or the
session closes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from pydantic import BaseModel

from ..errors import RequestError, SessionNotOpenError
from .core import SessionCore
from .registry import Entity

__all__ = ["send_question"]


async def send_question(
    core: SessionCore,
    method: str,
    params: BaseModel | Mapping[str, Any],
    *,
    on_behalf_of: Entity | None = None,
    sending: Callable[[], None] | None = None,
) -> Any:
    """Send the request ``method`` for ``core``'s session and return the client's result.

    Returns ``None`` when the question was withdrawn (the work that owned it ended or was
    cancelled) or the client answered with an error. ``on_behalf_of`` names the background
    item that owns the question (its ``questions`` set collects the question's cancel scope, so
    the item can withdraw it when it ends). ``sending`` runs right before the request goes out.
    """
    core.sink.check_open()
    if core.sink.holding:
        raise SessionNotOpenError(f"session {core.id} is not known to the client until new_session returns")
    if on_behalf_of is not None and on_behalf_of.detached and not on_behalf_of.final:
        if core.snapshots.list_unsent:
            core.snapshots.repeat()  # R110: the client sees the item listed before the request
        if sending is not None:
            sending()
        return await _owned_by_item(core, method, params, on_behalf_of)
    turns = core.turns
    foreground = turns.in_foreground()
    if foreground:
        turns.blocked += 1
        if turns.blocked == 1 and core.snapshots.foreground == "running":
            core.snapshots.set("requires_action")
    try:
        if sending is not None:
            sending()
        return await core.connection.request(method, params)
    except RequestError:
        return None
    finally:
        if foreground:
            turns.blocked -= 1
            scope = turns.scope
            still_working = scope is not None and not scope.cancel_called
            if turns.blocked == 0 and core.snapshots.foreground == "requires_action" and still_working:
                core.snapshots.set("running")


async def _owned_by_item(core: SessionCore, method: str, params: BaseModel | Mapping[str, Any],
                         owner: Entity) -> Any:
    """A request owned by listed work, not by the task asking: ``session/cancel`` of a
    foreground turn that awaits it leaves it open (R107); it is withdrawn when the work
    ends or the session closes."""
    done = anyio.Event()
    answer: list[Any] = []
    scope = anyio.CancelScope()

    async def send() -> None:
        try:
            with scope, contextlib.suppress(RequestError):
                answer.append(await core.connection.request(method, params))
        finally:
            done.set()

    owner.questions.add(scope)
    core.spawn(send)
    try:
        await done.wait()
    finally:
        if done.is_set():
            owner.questions.discard(scope)
    return answer[0] if answer else None
