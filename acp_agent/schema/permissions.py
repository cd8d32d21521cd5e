"""``session/request_permission`` (Agent -> Client): subjects, options and outcomes."""

from typing import Annotated, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    UNKNOWN_TAG,
    AbsolutePath,
    Meta,
    SessionId,
    TerminalId,
    ToolCallId,
    WireModel,
    WithoutSessionUpdate,
    discriminate_on,
)
from .tool_calls import ToolCallUpdate

__all__ = [
    "CancelledPermissionOutcome",
    "CommandPermissionSubject",
    "PermissionOption",
    "PermissionOptionKind",
    "RequestPermissionOutcome",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "RequestPermissionSubject",
    "SelectedPermissionOutcome",
    "ToolCallPermissionSubject",
    "UnknownPermissionOutcome",
    "UnknownRequestPermissionSubject",
]

PermissionOptionKind: TypeAlias = Literal["allow_once", "allow_always", "reject_once", "reject_always"] | str
"""What choosing a permission option means (a UI hint)."""


class PermissionOption(WireModel):
    """One answer the user can pick; ``option_id`` is unique within the request."""

    option_id: str
    name: str
    kind: PermissionOptionKind
    meta: Meta = None


# --------------------------------------------------------------------------- subjects


class ToolCallPermissionSubject(WireModel):
    """Subject: a tool call. The Client applies ``tool_call`` exactly like a ``tool_call_update`` first.

    Include only the fields you mean to change: ``ToolCallUpdate(tool_call_id="c1")`` patches
    nothing. The nested object is sent without its ``sessionUpdate`` key.
    """

    type: Literal["tool_call"] = "tool_call"
    tool_call: Annotated[ToolCallUpdate, WithoutSessionUpdate]
    meta: Meta = None


class CommandPermissionSubject(WireModel):
    """Subject: a command the Agent wants to run in ``cwd`` (ids only link it to displayed state)."""

    type: Literal["command"] = "command"
    command: str
    cwd: AbsolutePath
    tool_call_id: ToolCallId | None = None
    terminal_id: TerminalId | None = None
    meta: Meta = None


class UnknownRequestPermissionSubject(WireModel):
    """A permission subject of an unknown ``type``, kept as received."""

    type: str


RequestPermissionSubject: TypeAlias = Annotated[
    Annotated[ToolCallPermissionSubject, Tag("tool_call")]
    | Annotated[CommandPermissionSubject, Tag("command")]
    | Annotated[UnknownRequestPermissionSubject, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("tool_call", "command")),
]
"""What a permission request is about, tagged by ``type``."""


class RequestPermissionRequest(WireModel):
    """Params of ``session/request_permission``: ask the user to pick one of ``options`` (at least one)."""

    session_id: SessionId
    title: str
    description: str | None = None
    subject: RequestPermissionSubject | None = None
    options: Annotated[list[PermissionOption], Field(min_length=1)]
    meta: Meta = None


# --------------------------------------------------------------------------- outcomes


class SelectedPermissionOutcome(WireModel):
    """Outcome: the user picked ``option_id`` (approve only if it was offered and means "allow")."""

    outcome: Literal["selected"] = "selected"
    option_id: str
    meta: Meta = None


class CancelledPermissionOutcome(WireModel):
    """Outcome: the request was cancelled or dismissed -- not approved."""

    outcome: Literal["cancelled"] = "cancelled"
    meta: Meta = None


class UnknownPermissionOutcome(WireModel):
    """An outcome this SDK does not know, kept as received -- always treated as not approved."""

    outcome: str


RequestPermissionOutcome: TypeAlias = Annotated[
    Annotated[SelectedPermissionOutcome, Tag("selected")]
    | Annotated[CancelledPermissionOutcome, Tag("cancelled")]
    | Annotated[UnknownPermissionOutcome, Tag(UNKNOWN_TAG)],
    discriminate_on("outcome", ("selected", "cancelled")),
]
"""The user's answer to a permission request, tagged by ``outcome``."""


class RequestPermissionResponse(WireModel):
    """Result of ``session/request_permission``."""

    outcome: RequestPermissionOutcome
    meta: Meta = None
