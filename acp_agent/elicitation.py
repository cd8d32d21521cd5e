"""Structured questions to the user (``elicitation/create``): forms and URL flows, typed answers.

A form asks for a flat object (``{"type": "object", "properties": {...}, "required": [...]}``
with string, number, integer, boolean and multi-select properties); a URL flow sends the user
to a page out of band (sign-in, secrets: never ask for a secret in a form). Questions are
sent only in a mode the client advertised: otherwise :class:`ElicitationUnsupportedError` is
raised and nothing is sent. Questions for a session follow :func:`~acp_agent.asks.ask` (the
foreground waits in ``requires_action``; cancelling the work withdraws them); questions
scoped to a client request (``requestId``, e.g. during ``auth/login``) change no state.

The answer is an :class:`ElicitationResult`: ``accept`` with content that was checked against
the requested schema, ``decline``, or ``cancel`` (also for a withdrawn question, an error
answer, an unknown future action, or accepted content that does not fit the schema).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio
from pydantic import ValidationError

from .asks import ask
from .background import Entity
from .connection import CURRENT_REQUEST, RequestId
from .core import SessionCore
from .errors import ElicitationUnsupportedError, RequestError
from .ids import new_id
from .peer import ClientPeer
from .schema import CompleteElicitationNotification, CreateElicitationRequest, ElicitationSchema

__all__ = ["ElicitationResult", "ElicitationUnsupportedError", "ask_form", "ask_url", "complete", "read_result"]

_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})


@dataclass(frozen=True, slots=True)
class ElicitationResult:
    """The user's answer to a question."""

    action: str
    """``accept``, ``decline`` or ``cancel`` (anything else the client sent reads as ``cancel``)."""
    content: dict[str, Any] | None = None
    """For an accepted form: the submitted values, checked against the requested schema."""
    problem: str | None = None
    """Why an answer reads as ``cancel`` although the client said something else, if it does."""

    @property
    def accepted(self) -> bool:
        """The user submitted the form (or agreed to open the URL)."""
        return self.action == "accept"

    @property
    def declined(self) -> bool:
        """The user said no."""
        return self.action == "decline"

    @property
    def cancelled(self) -> bool:
        """No answer: dismissed, withdrawn, failed, or an answer that could not be used."""
        return self.action == "cancel"


_CANCELLED: Final = ElicitationResult("cancel")


def read_result(result: Any, schema: Mapping[str, Any] | None) -> ElicitationResult:
    """Interpret a ``CreateElicitationResponse`` strictly (``schema``: the form's, to check content)."""
    if not isinstance(result, dict):
        return _CANCELLED
    action = result.get("action")
    if action not in _ACTIONS:
        return ElicitationResult("cancel", problem=f"unknown action {action!r}" if action is not None else None)
    if action != "accept":
        return ElicitationResult(action)
    content = result.get("content")
    if schema is None:
        return ElicitationResult("accept")
    if not isinstance(content, dict):
        return ElicitationResult("cancel", problem="accepted without content")
    from jsonschema import Draft202012Validator  # jsonrpcserver's dependency; loaded on first use

    errors = sorted(Draft202012Validator(dict(schema)).iter_errors(content), key=lambda e: list(e.path))
    if errors:
        where = ".".join(str(p) for p in errors[0].path) or "content"
        return ElicitationResult("cancel", problem=f"{where}: {errors[0].message}")
    return ElicitationResult("accept", content)


def _checked_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    try:
        ElicitationSchema.model_validate(dict(schema))
    except ValidationError as exc:
        raise ValueError(f"not a form schema (a flat object of primitive properties): {exc}") from None
    return dict(schema)


def _form_params(message: str, schema: Mapping[str, Any], scope: dict[str, Any]) -> CreateElicitationRequest:
    return CreateElicitationRequest.model_validate(
        {**scope, "mode": "form", "message": message, "requestedSchema": _checked_schema(schema)})


def _url_params(message: str, url: str, elicitation_id: str, scope: dict[str, Any]) -> CreateElicitationRequest:
    return CreateElicitationRequest.model_validate(
        {**scope, "mode": "url", "message": message, "url": url, "elicitationId": elicitation_id})


def _require(peer: ClientPeer, mode: str) -> None:
    supported = peer.accepts_forms if mode == "form" else peer.accepts_urls
    if not supported:
        raise ElicitationUnsupportedError(f"the client did not advertise {mode}-mode elicitation; nothing was sent")


def _session_scope(core: SessionCore, tool_call_id: str | None) -> dict[str, Any]:
    scope: dict[str, Any] = {"sessionId": core.id}
    if tool_call_id is not None:
        scope["toolCallId"] = tool_call_id
    return scope


async def ask_form(core: SessionCore, peer: ClientPeer, message: str, schema: Mapping[str, Any], *,
                   tool_call_id: str | None = None, on_behalf_of: Entity | None = None,
                   scopes: set[anyio.CancelScope] | None = None) -> ElicitationResult:
    """A form for a session (see :meth:`Session.ask`)."""
    _require(peer, "form")
    params = _form_params(message, schema, _session_scope(core, tool_call_id))
    result = await ask(core, "elicitation/create", params, on_behalf_of=on_behalf_of, scopes=scopes)
    return read_result(result, schema)


async def ask_url(core: SessionCore, peer: ClientPeer, message: str, url: str, *, elicitation_id: str | None = None,
                  tool_call_id: str | None = None, on_behalf_of: Entity | None = None,
                  scopes: set[anyio.CancelScope] | None = None) -> ElicitationResult:
    """A URL flow for a session (see :meth:`Session.ask_url`)."""
    _require(peer, "url")
    params = _url_params(message, url, elicitation_id or new_id("elicit"), _session_scope(core, tool_call_id))
    result = await ask(core, "elicitation/create", params, on_behalf_of=on_behalf_of, scopes=scopes)
    return read_result(result, None)


async def ask_for_request(peer: ClientPeer, message: str, *, schema: Mapping[str, Any] | None = None,
                          url: str | None = None, elicitation_id: str | None = None,
                          request_id: RequestId | None = None) -> ElicitationResult:
    """A question scoped to the client request being handled (no session; no state changes, R61)."""
    request_id = request_id if request_id is not None else CURRENT_REQUEST.get()
    if request_id is None:
        raise RuntimeError("a request-scoped question needs a client request being handled (e.g. in login)")
    scope = {"requestId": request_id}
    if (schema is None) == (url is None):
        raise ValueError("give exactly one of schema (a form) or url (a URL flow)")
    if schema is not None:
        _require(peer, "form")
        params = _form_params(message, schema, scope)
    else:
        assert url is not None
        _require(peer, "url")
        params = _url_params(message, url, elicitation_id or new_id("elicit"), scope)
    try:
        result = await peer.connection.request("elicitation/create", params)
    except RequestError:
        return _CANCELLED
    return read_result(result, schema)


def complete(peer: ClientPeer, elicitation_id: str) -> None:
    """Tell the client a URL flow finished out of band (``elicitation/complete``; not a state change)."""
    peer.connection.notify("elicitation/complete", CompleteElicitationNotification(elicitation_id=elicitation_id))
