"""Elicitation (Agent -> Client): ``elicitation/create`` (form or URL mode) and ``elicitation/complete``."""

from typing import Annotated, Any, Literal, Self, TypeAlias

from pydantic import Discriminator, Field, Tag, model_validator

from .base import (
    UNKNOWN_TAG,
    ElicitationId,
    Meta,
    RequestId,
    SessionId,
    ToolCallId,
    WireModel,
    discriminate_on,
)

__all__ = [
    "BooleanPropertySchema",
    "CompleteElicitationNotification",
    "CreateElicitationRequest",
    "CreateElicitationResponse",
    "ElicitationAction",
    "ElicitationContentValue",
    "ElicitationMode",
    "ElicitationPropertySchema",
    "ElicitationSchema",
    "EnumOption",
    "IntegerPropertySchema",
    "MultiSelectItems",
    "MultiSelectPropertySchema",
    "NumberPropertySchema",
    "StringFormat",
    "StringMultiSelectItems",
    "StringPropertySchema",
    "TitledMultiSelectItems",
    "UnknownElicitationPropertySchema",
    "UnknownMultiSelectItems",
]

ElicitationMode: TypeAlias = Literal["form", "url"] | str
"""How the Client collects the input: an in-app form, or an out-of-band URL flow."""

ElicitationAction: TypeAlias = Literal["accept", "decline", "cancel"] | str
"""The user's answer to an elicitation; unknown actions mean ``cancel``."""

StringFormat: TypeAlias = Literal["email", "uri", "date", "date-time"] | str
"""A format constraint on a string property."""

ElicitationContentValue: TypeAlias = Any
"""A submitted form value: string, integer, number, boolean or list of strings."""


# --------------------------------------------------------------------------- form schema


class EnumOption(WireModel):
    """A selectable value with a display title."""

    const: str
    title: str
    description: str | None = None
    meta: Meta = None


class StringPropertySchema(WireModel):
    """A string form field; ``enum`` or ``one_of`` make it a single-select."""

    type: Literal["string"] = "string"
    title: str | None = None
    description: str | None = None
    min_length: Annotated[int, Field(ge=0)] | None = None
    max_length: Annotated[int, Field(ge=0)] | None = None
    pattern: str | None = None
    format: StringFormat | None = None
    default: str | None = None
    enum: Annotated[list[str], Field(min_length=1)] | None = None
    one_of: Annotated[list[EnumOption], Field(min_length=1)] | None = None
    meta: Meta = None


class NumberPropertySchema(WireModel):
    """A floating-point form field."""

    type: Literal["number"] = "number"
    title: str | None = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    default: float | None = None
    meta: Meta = None


class IntegerPropertySchema(WireModel):
    """An integer form field."""

    type: Literal["integer"] = "integer"
    title: str | None = None
    description: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    default: int | None = None
    meta: Meta = None


class BooleanPropertySchema(WireModel):
    """A checkbox form field."""

    type: Literal["boolean"] = "boolean"
    title: str | None = None
    description: str | None = None
    default: bool | None = None
    meta: Meta = None


class StringMultiSelectItems(WireModel):
    """Multi-select choices given as plain strings."""

    type: Literal["string"] = "string"
    enum: Annotated[list[str], Field(min_length=1)]
    meta: Meta = None


class TitledMultiSelectItems(WireModel):
    """Multi-select choices with display titles (no ``type`` key on the wire)."""

    any_of: Annotated[list[EnumOption], Field(min_length=1)]
    meta: Meta = None


class UnknownMultiSelectItems(WireModel):
    """Multi-select choices of an unknown ``type``, kept as received."""

    type: str


def _multi_select_items_tag(value: Any) -> str | None:
    """Tag of a multi-select ``items`` object: by ``type`` if present, else titled if it has ``anyOf``."""
    if isinstance(value, dict):
        kind = value.get("type")
        if kind is None:
            return "titled" if ("anyOf" in value or "any_of" in value) else None
    elif isinstance(value, TitledMultiSelectItems):
        return "titled"
    else:
        kind = getattr(value, "type", None)
    if isinstance(kind, str):
        return "string" if kind == "string" else UNKNOWN_TAG
    return None


MultiSelectItems: TypeAlias = Annotated[
    Annotated[StringMultiSelectItems, Tag("string")]
    | Annotated[TitledMultiSelectItems, Tag("titled")]
    | Annotated[UnknownMultiSelectItems, Tag(UNKNOWN_TAG)],
    Discriminator(
        _multi_select_items_tag,
        custom_error_type="missing_discriminator",
        custom_error_message="Input should be an object with a string 'type' field or an 'anyOf' list",
    ),
]
"""The choices of a multi-select field."""


class MultiSelectPropertySchema(WireModel):
    """A multi-select form field (a JSON Schema ``array`` of strings)."""

    type: Literal["array"] = "array"
    title: str | None = None
    description: str | None = None
    min_items: Annotated[int, Field(ge=0)] | None = None
    max_items: Annotated[int, Field(ge=0)] | None = None
    items: MultiSelectItems
    default: list[str] | None = None
    meta: Meta = None


class UnknownElicitationPropertySchema(WireModel):
    """A form field of an unknown ``type``, kept as received."""

    type: str


ElicitationPropertySchema: TypeAlias = Annotated[
    Annotated[StringPropertySchema, Tag("string")]
    | Annotated[NumberPropertySchema, Tag("number")]
    | Annotated[IntegerPropertySchema, Tag("integer")]
    | Annotated[BooleanPropertySchema, Tag("boolean")]
    | Annotated[MultiSelectPropertySchema, Tag("array")]
    | Annotated[UnknownElicitationPropertySchema, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("string", "number", "integer", "boolean", "array")),
]
"""One field of a form, tagged by its JSON Schema ``type``."""


class ElicitationSchema(WireModel):
    """A flat object schema describing a form: primitive ``properties`` and the ``required`` names."""

    type: Literal["object"] = "object"
    title: str | None = None
    properties: dict[str, ElicitationPropertySchema]
    required: list[str] | None = None
    description: str | None = None
    meta: Meta = None


# --------------------------------------------------------------------------- methods


class CreateElicitationRequest(WireModel):
    """Params of ``elicitation/create``: ask the user for structured input.

    Scope: ``session_id`` (optionally with ``tool_call_id``) for session work, or ``request_id``
    (a pending Client request) for work outside a session -- exactly one of the two is non-null.
    Mode: ``mode="form"`` with ``requested_schema``, or ``mode="url"`` with ``elicitation_id``
    and ``url``; other (future or ``_``-prefixed) modes only need a scope. Validation refuses
    any other combination, as the schema does. Use only modes the Client advertised; never a
    form for secrets.

    ``tool_call_id`` only means something next to ``session_id``. The schema does not forbid it
    beside ``request_id`` (it is then an unknown key), so neither does this model.
    """

    session_id: SessionId | None = None
    tool_call_id: ToolCallId | None = None
    request_id: RequestId | None = None
    mode: ElicitationMode
    message: str
    requested_schema: ElicitationSchema | None = None
    elicitation_id: ElicitationId | None = None
    url: str | None = None
    meta: Meta = None

    @model_validator(mode="after")
    def _mode_fields_and_one_scope(self) -> Self:
        # Null counts as absent everywhere: the schema types these keys as non-null.
        if self.mode == "form" and self.requested_schema is None:
            raise ValueError("a form-mode elicitation needs requestedSchema")
        if self.mode == "url":
            missing = [
                key for key, value in (("elicitationId", self.elicitation_id), ("url", self.url)) if value is None
            ]
            if missing:
                raise ValueError(f"a url-mode elicitation needs {' and '.join(missing)}")
        if (self.session_id is None) == (self.request_id is None):
            raise ValueError(
                "an elicitation needs exactly one scope: sessionId (session scope) or requestId (request scope)"
            )
        return self


class CreateElicitationResponse(WireModel):
    """Result of ``elicitation/create``: ``accept`` (with form ``content``), ``decline`` or ``cancel``."""

    action: ElicitationAction
    content: dict[str, ElicitationContentValue] | None = None
    meta: Meta = None


class CompleteElicitationNotification(WireModel):
    """Params of ``elicitation/complete``: a URL-mode elicitation finished out of band."""

    elicitation_id: ElicitationId
    meta: Meta = None
