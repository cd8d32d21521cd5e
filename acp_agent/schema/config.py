"""Session configuration options and slash commands, as sent in session results and updates."""

from typing import Annotated, Any, Literal, Self, TypeAlias

from pydantic import Field, StrictBool, Tag, model_validator

from .base import UNKNOWN_TAG, Meta, WireModel, discriminate_on

__all__ = [
    "AvailableCommand",
    "AvailableCommandInput",
    "SessionConfigOption",
    "SessionConfigOptionCategory",
    "SessionConfigOptionType",
    "SessionConfigSelectGroup",
    "SessionConfigSelectOption",
    "SessionConfigSelectOptions",
    "SessionConfigValue",
    "TextCommandInput",
    "UnknownAvailableCommandInput",
]

SessionConfigOptionCategory: TypeAlias = Literal["mode", "model", "model_config", "thought_level"] | str
"""A UX hint about what a config option controls."""

SessionConfigOptionType: TypeAlias = Literal["select", "boolean"] | str
"""The kind of value a config option holds."""

SessionConfigValue: TypeAlias = StrictBool | str | Any
"""A config option value: a value id (``select``), a boolean (``boolean``), anything for unknown kinds."""


class SessionConfigSelectOption(WireModel):
    """One selectable value of a ``select`` option."""

    value: str
    name: str
    description: str | None = None
    meta: Meta = None


class SessionConfigSelectGroup(WireModel):
    """A named group of selectable values."""

    group_id: str
    name: str
    options: Annotated[list[SessionConfigSelectOption], Field(min_length=1)]
    meta: Meta = None


SessionConfigSelectOptions: TypeAlias = (
    Annotated[list[SessionConfigSelectOption], Field(min_length=1)]
    | Annotated[list[SessionConfigSelectGroup], Field(min_length=1)]
)
"""The values of a ``select`` option: a flat list or a list of groups."""


class SessionConfigOption(WireModel):
    """A session setting the Client can show and change with ``session/set_config_option``.

    ``type="select"`` needs a non-empty ``options`` list and, as ``current_value``, one of its
    values (unique across groups, reference §5.7); ``type="boolean"`` needs a boolean
    ``current_value``. Validation (a `ValueError`, pydantic's ``ValidationError``) refuses
    either kind without them where the option is written. Other ``type`` values are kept as received,
    with whatever ``current_value`` they carry.
    """

    config_id: str
    name: str
    description: str | None = None
    category: SessionConfigOptionCategory | None = None
    type: SessionConfigOptionType
    current_value: SessionConfigValue = None
    options: SessionConfigSelectOptions | None = None
    meta: Meta = None

    @model_validator(mode="after")
    def _fits_its_type(self) -> Self:
        if self.type == "select":
            if not isinstance(self.current_value, str):
                raise ValueError('a "select" option needs a string currentValue (a value id)')
            if self.options is None:
                raise ValueError('a "select" option needs options')
            values = [value for entry in self.options
                      for value in ([o.value for o in entry.options] if isinstance(entry, SessionConfigSelectGroup)
                                    else [entry.value])]
            if len(values) != len(set(values)):
                raise ValueError(f'a "select" option lists each value once; {self.config_id!r} has {values!r}')
            if self.current_value not in values:
                raise ValueError(f'the currentValue {self.current_value!r} of {self.config_id!r} is not one of its '
                                 f'option values {values!r}')
        elif self.type == "boolean" and not isinstance(self.current_value, bool):
            raise ValueError('a "boolean" option needs a boolean currentValue')
        return self


# --------------------------------------------------------------------------- commands


class TextCommandInput(WireModel):
    """A command takes free text after its name; ``hint`` is shown while the user types."""

    type: Literal["text"] = "text"
    hint: str
    meta: Meta = None


class UnknownAvailableCommandInput(WireModel):
    """A command input of an unknown ``type``, kept as received."""

    type: str


AvailableCommandInput: TypeAlias = Annotated[
    Annotated[TextCommandInput, Tag("text")] | Annotated[UnknownAvailableCommandInput, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("text",)),
]
"""What a command accepts after its name, tagged by ``type``."""


class AvailableCommand(WireModel):
    """A slash command the user can invoke as ``/name ...`` inside a prompt.

    ``name`` has no leading ``/`` and no whitespace. ``type`` is ``"command"``; other types
    (which must still carry ``name`` and ``description``) are kept as received.
    """

    type: Literal["command"] | str = "command"
    name: str
    description: str
    input: AvailableCommandInput | None = None
    meta: Meta = None
