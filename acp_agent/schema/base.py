"""The base class shared by every ACP wire model, and the two serialization helpers.

Three rules shape every model in this package:

* **Wire names.** Python attributes are the snake_case form of the wire's camelCase keys
  (``session_id`` <-> ``sessionId``); ``_meta`` is the attribute ``meta``. Models accept
  either spelling on input and always emit the wire spelling.
* **Tri-state fields.** An optional field can be *omitted*, ``null`` or a value, and on
  ``session/update`` upserts the three mean different things. Optional attributes default
  to ``None``, and [`to_wire`][acp_agent.schema.to_wire] / [`to_json`][acp_agent.schema.to_json] serialize with
  ``exclude_unset``: a field the caller never passed is left out, a field passed as ``None`` is sent as ``null``.
  Discriminator constants (``type``, ``sessionUpdate``, ``state``, ...) are the exception:
  they are always sent, see [`WireModel`][acp_agent.schema.WireModel].
* **Never reject the unknown.** Unknown keys are kept (``extra="allow"``) and sent back out
  unchanged; unknown enum values validate as plain strings; unknown union tags land in a
  fallback ``Unknown*`` variant (see [`discriminate_on`][acp_agent.schema.discriminate_on]).
"""

import types
from collections.abc import Collection, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    WrapSerializer,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticUndefined

__all__ = [
    "STOP_REASONS",
    "UNKNOWN_TAG",
    "AbsolutePath",
    "CompactionId",
    "ElicitationId",
    "EmptyIfNull",
    "ForegroundState",
    "KnownStopReason",
    "MediaType",
    "MessageId",
    "Meta",
    "PlanId",
    "ProtocolVersion",
    "RequestId",
    "SessionId",
    "StopReason",
    "TerminalId",
    "ToolCallId",
    "WireModel",
    "WithoutSessionUpdate",
    "discriminate_on",
    "to_json",
    "to_wire",
]

# --------------------------------------------------------------------------- primitives

KnownStopReason: TypeAlias = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"]
"""The stop reasons ACP v2 defines (the one list; ``STOP_REASONS`` is its set)."""

StopReason: TypeAlias = KnownStopReason | str
"""Why foreground work stopped, reported on the idle snapshot that ends it (``_``-prefixed custom ones too)."""

STOP_REASONS: Final[frozenset[str]] = frozenset(get_args(KnownStopReason))
"""The stop reasons ACP v2 defines, as a set."""

ForegroundState: TypeAlias = Literal["idle", "running", "requires_action"]
"""The foreground state a session reports in its ``state_update`` snapshots (``Session.state``)."""


Meta: TypeAlias = Annotated[dict[str, Any] | None, Field(alias="_meta")]
"""The ``_meta`` extension object carried by almost every type. Declare it as ``meta: Meta = None``."""

RequestId: TypeAlias = StrictInt | StrictStr
"""A JSON-RPC request id: an integer or a string (never ``null``; ``1`` and ``"1"`` differ)."""

ProtocolVersion: TypeAlias = Annotated[int, Field(ge=0, le=65535)]
"""An ACP protocol version number (uint16)."""

SessionId: TypeAlias = str
"""A session's id (``sessionId``); this SDK makes ``sess_`` and 16 random characters."""
ToolCallId: TypeAlias = str
"""A tool call's id (``toolCallId``), unique within its session."""
TerminalId: TypeAlias = str
"""A terminal's id (``terminalId``), unique within its session."""
MessageId: TypeAlias = str
"""A message's id (``messageId``): the chunks of one message share it."""
PlanId: TypeAlias = str
"""A plan's id (``planId``); a session may keep several plans."""
CompactionId: TypeAlias = str
"""A context compaction's id (``compactionId``)."""
ElicitationId: TypeAlias = str
"""A URL-mode elicitation's id (``elicitationId``), named again by ``elicitation/complete``."""
MediaType: TypeAlias = str
"""A media (MIME) type, e.g. ``image/png``."""
AbsolutePath: TypeAlias = str
"""An absolute path in the Agent machine's native syntax (not a URI)."""


def _null_as_empty(value: Any) -> Any:
    return [] if value is None else value


EmptyIfNull: Final = BeforeValidator(_null_as_empty)
"""Reads ``null`` as ``[]`` on list fields the schema marks ``x-deserialize-default-on-null``."""


# --------------------------------------------------------------------------- base model


def _is_constant(annotation: Any, default: Any) -> bool:
    """Whether a field is a discriminator constant: typed with a ``Literal`` and a non-null default."""
    if default is None or default is PydanticUndefined:
        return False
    origin = get_origin(annotation)
    if origin is Literal:
        return True
    if origin is Union or origin is types.UnionType:
        return any(get_origin(arg) is Literal for arg in get_args(annotation))
    return False


class WireModel(BaseModel):
    """Base of every ACP wire model: camelCase aliases, unknown keys kept, constants always emitted.

    Fields annotated with a ``Literal`` that have a default (``type: Literal["text"] = "text"``,
    ``session_update: Literal["notice"] = "notice"``, ...) are discriminators. The caller need
    not pass them, yet the receiver needs them, so every instance marks them as *set* right
    after construction and ``exclude_unset`` serialization still emits them. The names are
    collected once per class into the ``_wire_constants`` frozenset.

    A ``session/update`` variant therefore serializes standalone with its ``sessionUpdate``
    tag; the few places that embed a variant without the tag use
    [`WithoutSessionUpdate`][acp_agent.schema.WithoutSessionUpdate].
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        defer_build=True,  # validators and serializers are built on first use, not at import
    )

    _wire_constants: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._wire_constants = frozenset(
            name for name, field in cls.model_fields.items() if _is_constant(field.annotation, field.default)
        )

    def model_post_init(self, context: Any, /) -> None:
        constants = self._wire_constants
        if constants:
            self.__pydantic_fields_set__.update(constants)


# --------------------------------------------------------------------------- serialization


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The JSON-compatible wire dict of ``model``: camelCase keys, unset fields omitted, ``None`` as null."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def to_json(model: BaseModel) -> bytes:
    """Compact UTF-8 JSON bytes of ``model``; the same content as [`to_wire`][acp_agent.schema.to_wire], serialized in
    Rust."""
    return model.__pydantic_serializer__.to_json(model, by_alias=True, exclude_unset=True)


def _without_session_update(value: Any, handler: SerializerFunctionWrapHandler) -> Any:
    data = handler(value)
    if isinstance(data, dict):
        data.pop("sessionUpdate", None)
        data.pop("session_update", None)
    return data


WithoutSessionUpdate: Final = WrapSerializer(_without_session_update)
"""Serializer for a ``session/update`` variant embedded in another object, where it has no
``sessionUpdate`` key (``ToolCallPermissionSubject.toolCall``, ``SubagentUpdate.state``)."""


# --------------------------------------------------------------------------- tagged unions

UNKNOWN_TAG: Final = "__unknown__"
"""The pydantic ``Tag`` of the fallback variant of every tagged union."""


def discriminate_on(
    key: str,
    tags: Collection[str] | Mapping[str, str],
    *,
    attr: str | None = None,
) -> Discriminator:
    """A pydantic ``Discriminator`` for an extensible union tagged by the wire key ``key``.

    ``tags`` lists the known wire values (or maps several wire values onto one pydantic tag).
    A known value selects its variant, any other string selects the ``UNKNOWN_TAG`` fallback
    variant, and a missing or non-string discriminator fails validation. ``attr`` is the
    Python attribute holding the tag on model instances when it differs from ``key``.
    """
    table: dict[str, str] = dict(tags) if isinstance(tags, Mapping) else {tag: tag for tag in tags}
    attr_name = attr or key

    def discriminator(value: Any) -> str | None:
        if isinstance(value, dict):
            tag = value.get(key)
            if tag is None and attr_name != key:
                tag = value.get(attr_name)
        else:
            tag = getattr(value, attr_name, None)
        if isinstance(tag, str):
            return table.get(tag, UNKNOWN_TAG)
        return None

    discriminator.__name__ = discriminator.__qualname__ = f"discriminate_on_{key}"
    return Discriminator(
        discriminator,
        custom_error_type="missing_discriminator",
        custom_error_message=f"Input should be an object with a string '{key}' field",
    )
