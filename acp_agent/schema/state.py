"""Session state snapshots (``state_update``) and the background-work list they carry.

The state classes carry ``session_update = "state_update"`` (always emitted) so they serialize
as a complete ``session/update`` variant. The same snapshots also appear embedded, without
the tag, as ``SubagentUpdate.state`` and ``SessionStatusResponse.state``: those fields are
typed [`NestedStateUpdate`][acp_agent.schema.NestedStateUpdate], which drops it.
"""

from typing import Annotated, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    STOP_REASONS,
    UNKNOWN_TAG,
    KnownStopReason,
    Meta,
    SessionId,
    StopReason,
    TerminalId,
    ToolCallId,
    WireModel,
    WithoutSessionUpdate,
    discriminate_on,
)
from .errors import Error

__all__ = [
    "STOP_REASONS",
    "BackgroundSubagent",
    "BackgroundTerminal",
    "BackgroundToolCall",
    "BackgroundWork",
    "IdleStateUpdate",
    "KnownStopReason",
    "NestedStateUpdate",
    "OtherStateUpdate",
    "RequiresActionStateUpdate",
    "RunningStateUpdate",
    "SessionState",
    "StateUpdate",
    "StopReason",
    "UnknownBackgroundWork",
    "UnknownStateUpdate",
    "Usage",
]

SessionState: TypeAlias = Literal["running", "requires_action", "idle", "unknown"] | str
"""The foreground state of a session (the ``state`` discriminator of a snapshot)."""


# --------------------------------------------------------------------------- background work


class BackgroundTerminal(WireModel):
    """Background item: an Agent-owned terminal whose process keeps running."""

    type: Literal["terminal"] = "terminal"
    terminal_id: TerminalId
    meta: Meta = None


class BackgroundToolCall(WireModel):
    """Background item: a live tool call with no process of its own (watcher, wakeup, workflow)."""

    type: Literal["tool_call"] = "tool_call"
    tool_call_id: ToolCallId
    meta: Meta = None


class BackgroundSubagent(WireModel):
    """[unstable] Background item: a detached subagent child session."""

    type: Literal["subagent"] = "subagent"
    session_id: SessionId
    meta: Meta = None


class UnknownBackgroundWork(WireModel):
    """A background item of an unknown ``type``; Clients count it as running work."""

    type: str


BackgroundWork: TypeAlias = Annotated[
    Annotated[BackgroundTerminal, Tag("terminal")]
    | Annotated[BackgroundToolCall, Tag("tool_call")]
    | Annotated[BackgroundSubagent, Tag("subagent")]
    | Annotated[UnknownBackgroundWork, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("terminal", "tool_call", "subagent")),
]
"""One item of a ``background`` list, tagged by ``type``."""


# --------------------------------------------------------------------------- usage


_Tokens: TypeAlias = Annotated[int, Field(ge=0)]


class Usage(WireModel):
    """[unstable] Token usage of the foreground work that just ended (on its idle snapshot)."""

    total_tokens: _Tokens
    input_tokens: _Tokens
    output_tokens: _Tokens
    thought_tokens: _Tokens | None = None
    cached_read_tokens: _Tokens | None = None
    cached_write_tokens: _Tokens | None = None
    meta: Meta = None


# --------------------------------------------------------------------------- snapshots


class RunningStateUpdate(WireModel):
    """``state_update`` snapshot: foreground work is in progress."""

    session_update: Literal["state_update"] = "state_update"
    state: Literal["running"] = "running"
    background: list[BackgroundWork] | None = None
    meta: Meta = None


class RequiresActionStateUpdate(WireModel):
    """``state_update`` snapshot: all foreground work waits for the user."""

    session_update: Literal["state_update"] = "state_update"
    state: Literal["requires_action"] = "requires_action"
    background: list[BackgroundWork] | None = None
    meta: Meta = None


class IdleStateUpdate(WireModel):
    """``state_update`` snapshot: no foreground work; ``stop_reason`` tells why work ended (if it just did).

    ``error`` accompanies ``stop_reason="error"``; ``usage`` [unstable] belongs only on the idle
    that ends the work, never on repeated or resume snapshots.
    """

    session_update: Literal["state_update"] = "state_update"
    state: Literal["idle"] = "idle"
    stop_reason: StopReason | None = None
    error: Error | None = None
    usage: Usage | None = None
    background: list[BackgroundWork] | None = None
    meta: Meta = None


class UnknownStateUpdate(WireModel):
    """[unstable] ``state_update`` snapshot with ``state: "unknown"``: foreground activity is unobservable.

    This is the protocol's ``unknown`` state, not a fallback; states this SDK does not know
    (``_custom`` or future ones) validate as [`OtherStateUpdate`][acp_agent.schema.OtherStateUpdate].
    """

    session_update: Literal["state_update"] = "state_update"
    state: Literal["unknown"] = "unknown"
    background: list[BackgroundWork] | None = None
    meta: Meta = None


class OtherStateUpdate(WireModel):
    """A ``state_update`` with a state this SDK does not know (``_custom`` or future), kept as received."""

    session_update: Literal["state_update"] = "state_update"
    state: str


StateUpdate: TypeAlias = Annotated[
    Annotated[RunningStateUpdate, Tag("running")]
    | Annotated[RequiresActionStateUpdate, Tag("requires_action")]
    | Annotated[IdleStateUpdate, Tag("idle")]
    | Annotated[UnknownStateUpdate, Tag("unknown")]
    | Annotated[OtherStateUpdate, Tag(UNKNOWN_TAG)],
    discriminate_on("state", ("running", "requires_action", "idle", "unknown")),
]
"""A foreground-state snapshot, tagged by ``state``."""


NestedStateUpdate: TypeAlias = Annotated[StateUpdate, WithoutSessionUpdate]
"""A state snapshot embedded in another object (``SubagentUpdate.state``, ``SessionStatusResponse.state``),
serialized without the ``sessionUpdate`` key."""
