"""Permission requests: sending them and reading the answer strictly (R20).

:func:`request_permission` builds ``session/request_permission``; :func:`~acp_agent.asks.ask`
decides what waiting for it does to the foreground state; :class:`PermissionOutcome` is the
typed answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio

from .asks import ask
from .background import Entity
from .core import SessionCore
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

    What the question does to the foreground state is decided by :func:`~acp_agent.asks.ask`.
    A subject naming a tool call patches that tool call (R82), checked before anything is sent.
    """
    if not options:
        raise ValueError("a permission request needs at least one option")
    ids = [o.option_id for o in options]
    if len(set(ids)) != len(ids):
        raise ValueError("permission option ids must be unique")
    core.sink.check_open()
    fields: dict[str, Any] = {"session_id": core.id, "title": title, "options": list(options)}
    if subject is not None:
        fields["subject"] = subject
    if description is not None:
        fields["description"] = description
    params = RequestPermissionRequest(**fields)
    tool_call = subject.tool_call if isinstance(subject, ToolCallPermissionSubject) else None
    if tool_call is not None:
        core.registry.check(tool_call)

    def patch_subject() -> None:
        if tool_call is not None:
            core.registry.observe(tool_call)  # R82: the subject patches the tool call as it is sent

    result = await ask(core, "session/request_permission", params, on_behalf_of=on_behalf_of, scopes=scopes,
                       sending=patch_subject)
    return read_outcome(result, options)
