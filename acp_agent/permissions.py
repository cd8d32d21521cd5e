"""Permission requests: sending them, what they do to the foreground state, and reading the answer (R20).

:func:`request_permission` is the one place that reports ``requires_action`` for a question
to the user; :class:`PermissionOutcome` is the typed answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio

from .background import Entity
from .core import SessionCore
from .errors import RequestError, SessionNotOpenError
from .schema import PermissionOption, RequestPermissionRequest, ToolCallPermissionSubject

__all__ = ["ALLOW_KINDS", "PermissionOutcome", "read_outcome", "request_permission"]

ALLOW_KINDS: Final = frozenset({"allow_once", "allow_always"})
"""Option kinds whose selection means "go ahead"."""


@dataclass(frozen=True, slots=True)
class PermissionOutcome:
    """What the user decided.

    ``option`` is the offered option that was selected, or ``None`` when the request was
    cancelled, dismissed, answered with an error, or answered with anything that was
    not one of the offered options. Only :attr:`allowed` grants permission.
    """

    option: PermissionOption | None

    @property
    def option_id(self) -> str | None:
        """The selected option's id, if a valid option was selected."""
        return self.option.option_id if self.option is not None else None

    @property
    def allowed(self) -> bool:
        """True only when an offered option whose kind means "allow" was selected."""
        return self.option is not None and self.option.kind in ALLOW_KINDS

    @property
    def cancelled(self) -> bool:
        """True when no offered option was selected."""
        return self.option is None


NOT_APPROVED: Final = PermissionOutcome(None)


def read_outcome(result: Any, options: Sequence[PermissionOption]) -> PermissionOutcome:
    """Interpret a ``RequestPermissionResponse`` strictly: anything unexpected is a refusal."""
    if not isinstance(result, dict):
        return NOT_APPROVED
    outcome = result.get("outcome")
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return NOT_APPROVED
    option_id = outcome.get("optionId")
    for option in options:
        if option.option_id == option_id:
            return PermissionOutcome(option)
    return NOT_APPROVED


async def request_permission(
    core: SessionCore,
    title: str,
    options: Sequence[PermissionOption],
    *,
    subject: Any = None,
    description: str | None = None,
    on_behalf_of: Entity | None = None,
    scopes: set[anyio.CancelScope] | None = None,
) -> PermissionOutcome:
    """Send ``session/request_permission`` for a session and read the answer (see :meth:`Session.request_permission`).

    The one place that decides what a question does to the foreground state: asked by
    foreground work, ``requires_action`` while every such question waits and ``running``
    after (R59, R60); asked on behalf of listed background work, no change (R61), a
    snapshot listing the item first (R110), and the question survives ``session/cancel``
    (R107) until the item ends or the session closes.
    """
    if not options:
        raise ValueError("a permission request needs at least one option")
    ids = [o.option_id for o in options]
    if len(set(ids)) != len(ids):
        raise ValueError("permission option ids must be unique")
    core.sink.check_open()
    if core.sink.holding:
        raise SessionNotOpenError(f"session {core.id} is not known to the client until new_session returns")
    fields: dict[str, Any] = {"session_id": core.id, "title": title, "options": list(options)}
    if subject is not None:
        fields["subject"] = subject
    if description is not None:
        fields["description"] = description
    params = RequestPermissionRequest(**fields)
    tool_call = subject.tool_call if isinstance(subject, ToolCallPermissionSubject) else None
    if tool_call is not None:
        core.registry.check(tool_call)
    if on_behalf_of is not None and on_behalf_of.detached and not on_behalf_of.final:
        if core.state.list_unsent:
            core.state.repeat()  # R110: the client sees the item listed before the request
        if tool_call is not None:
            core.registry.observe(tool_call)
        return await _background_request(core, params, options, scopes)
    turns = core.turns
    foreground = turns.in_foreground()
    if foreground:
        turns.blocked += 1
        if turns.blocked == 1 and core.state.state == "running":
            core.state.set("requires_action")
    try:
        if tool_call is not None:
            core.registry.observe(tool_call)  # R82: the subject patches the tool call
        result = await core.connection.request("session/request_permission", params)
    except RequestError:
        return NOT_APPROVED
    finally:
        if foreground:
            turns.blocked -= 1
            scope = turns.scope
            still_working = scope is not None and not scope.cancel_called
            if turns.blocked == 0 and core.state.state == "requires_action" and still_working:
                core.state.set("running")
    return read_outcome(result, options)


async def _background_request(
    core: SessionCore, params: RequestPermissionRequest, options: Sequence[PermissionOption],
    scopes: set[anyio.CancelScope] | None,
) -> PermissionOutcome:
    """A request owned by listed work, not by the task asking: ``session/cancel`` of a
    foreground turn that awaits it leaves it open (R107); it is withdrawn when the work
    ends or the session closes."""
    done = anyio.Event()
    answer: list[Any] = []
    scope = anyio.CancelScope()

    async def ask() -> None:
        try:
            with scope, contextlib.suppress(RequestError):
                answer.append(await core.connection.request("session/request_permission", params))
        finally:
            done.set()

    if scopes is not None:
        scopes.add(scope)
    core.spawn(ask)
    try:
        await done.wait()
    finally:
        if scopes is not None and done.is_set():
            scopes.discard(scope)
    return read_outcome(answer[0], options) if answer else NOT_APPROVED
