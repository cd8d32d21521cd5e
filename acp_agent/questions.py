"""Questions to the user: permission requests and elicitations (forms, URL flows), with typed answers.

A permission request (``session/request_permission``) offers options and reads the answer
strictly (R20) into a [`PermissionOutcome`][acp_agent.PermissionOutcome]. An elicitation (``elicitation/create``) asks
for a flat form (``{"type": "object", "properties": {...}, "required": [...]}`` with string, number,
integer, boolean and multi-select properties) or sends the user to a page out of band (sign-in,
secrets: never ask for a secret in a form); it is sent only in a mode the client advertised
(otherwise [`ElicitationUnsupportedError`][acp_agent.ElicitationUnsupportedError], nothing sent) and answered as an
[`ElicitationResult`][acp_agent.ElicitationResult]: ``accept`` with content checked against the schema, ``decline``, or
``cancel`` (also for a withdrawn question, an error answer, an unknown action, or content that does
not fit). What waiting does to the foreground state, and who owns a question, is decided in one
place for both kinds (`acp_agent._session.asking.send_question`); questions scoped to a client request
(``requestId``, e.g. during ``auth/login``) change no state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from ._session.asking import send_question
from ._session.core import SessionCore
from ._session.registry import Entity
from ._util.ids import new_id
from ._wire.connection import CURRENT_REQUEST, RequestId
from .errors import ElicitationUnsupportedError, InvalidArgumentError, RequestError
from .peer import ClientPeer
from .schema import (
    CompleteElicitationNotification,
    CreateElicitationRequest,
    ElicitationSchema,
    PermissionOption,
    RequestPermissionRequest,
    ToolCallPermissionSubject,
)

__all__ = [
    "ALLOW_KINDS",
    "ElicitationResult",
    "ElicitationUnsupportedError",
    "PermissionOutcome",
    "ask_form",
    "ask_url",
    "complete",
    "read_outcome",
    "read_result",
    "request_permission",
]

# -- permission requests -------------------------------------------------------------------

ALLOW_KINDS: Final = frozenset({"allow_once", "allow_always"})
"""Option kinds whose selection means "go ahead"."""


@dataclass(frozen=True, slots=True)
class PermissionOutcome:
    """What the user decided.

    ``option`` is the offered option that was selected, or ``None`` when the request was
    cancelled, dismissed, answered with an error, or answered with anything that was
    not one of the offered options. Only [`allowed`][acp_agent.PermissionOutcome.allowed] grants permission.
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
) -> PermissionOutcome:
    """Send ``session/request_permission`` for a session and read the answer (see
    [`Session.request_permission`][acp_agent.Session.request_permission]).

    What the question does to the foreground state is decided by `send_question`.
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

    result = await send_question(core, "session/request_permission", params, on_behalf_of=on_behalf_of,
                       sending=patch_subject)
    return read_outcome(result, options)


# -- elicitations --------------------------------------------------------------------------

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
    properties = schema.get("properties")
    for name, prop in (properties.items() if isinstance(properties, Mapping) else ()):
        if isinstance(prop, Mapping) and prop.get("format") == "password":
            raise InvalidArgumentError(
                f"R83: a form never asks for a secret, and property {name!r} is a password; nothing was sent. Send "
                "the user to a page of yours with ask_url(...) to enter it (see docs/rules.md#r83)")
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
                   tool_call_id: str | None = None, on_behalf_of: Entity | None = None) -> ElicitationResult:
    """A form for a session (see [`Session.ask`][acp_agent.Session.ask])."""
    _require(peer, "form")
    params = _form_params(message, schema, _session_scope(core, tool_call_id))
    result = await send_question(core, "elicitation/create", params, on_behalf_of=on_behalf_of)
    return read_result(result, schema)


async def ask_url(core: SessionCore, peer: ClientPeer, message: str, url: str, *, elicitation_id: str | None = None,
                  tool_call_id: str | None = None, on_behalf_of: Entity | None = None) -> ElicitationResult:
    """A URL flow for a session (see [`Session.ask_url`][acp_agent.Session.ask_url])."""
    _require(peer, "url")
    params = _url_params(message, url, elicitation_id or new_id("elicit"), _session_scope(core, tool_call_id))
    result = await send_question(core, "elicitation/create", params, on_behalf_of=on_behalf_of)
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
