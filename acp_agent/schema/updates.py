"""``session/update``: the notification, the ``SessionUpdate`` union and the variants defined here.

Variants that live in their own topic module (tool calls, terminals, plans, state snapshots)
are re-exported from here as well, so this module lists the whole union.

Every variant class carries its ``session_update`` constant as a default, so a variant is
constructed without naming it: ``AgentMessageChunk(message_id="m1", content=TextContent(text="hi"))``.
"""

from typing import Annotated, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    UNKNOWN_TAG,
    AbsolutePath,
    CompactionId,
    MessageId,
    Meta,
    SessionId,
    WireModel,
    discriminate_on,
)
from .capabilities import SubagentSessionCapabilities
from .config import AvailableCommand, SessionConfigOption
from .content import ContentBlock
from .plans import PlanRemoved, PlanUpdate
from .state import (
    IdleStateUpdate,
    NestedStateUpdate,
    OtherStateUpdate,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    StateUpdate,
    UnknownStateUpdate,
)
from .terminals import TerminalOutputChunk, TerminalUpdate
from .tool_calls import ToolCallContentChunk, ToolCallUpdate

__all__ = [
    "AgentMessage",
    "AgentMessageChunk",
    "AgentThought",
    "AgentThoughtChunk",
    "AvailableCommandsUpdate",
    "CompactionStatus",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOptionUpdate",
    "Cost",
    "IdleStateUpdate",
    "Notice",
    "NoticeSeverity",
    "OtherStateUpdate",
    "PlanRemoved",
    "PlanUpdate",
    "PromptSuggestion",
    "PromptSuggestionsUpdate",
    "ReplayComplete",
    "RequiresActionStateUpdate",
    "RunningStateUpdate",
    "SessionInfoUpdate",
    "SessionMessage",
    "SessionMessageChunk",
    "SessionUpdate",
    "StateUpdate",
    "SubagentUpdate",
    "TerminalOutputChunk",
    "TerminalUpdate",
    "ToolCallContentChunk",
    "ToolCallUpdate",
    "UnknownSessionUpdate",
    "UnknownStateUpdate",
    "UpdateSessionNotification",
    "UsageUpdate",
    "UserMessage",
    "UserMessageChunk",
]

NoticeSeverity: TypeAlias = Literal["info", "warning", "error"] | str
"""How a notice should be presented (a hint only; it changes no state)."""

CompactionStatus: TypeAlias = Literal["in_progress", "completed", "failed", "cancelled"] | str
"""Progress of a context compaction."""


# --------------------------------------------------------------------------- messages


class UserMessage(WireModel):
    """``user_message``: a user message (an inserted prompt or a replayed turn); ``content`` replaces."""

    session_update: Literal["user_message"] = "user_message"
    message_id: MessageId
    content: list[ContentBlock] | None = None
    meta: Meta = None


class AgentMessage(WireModel):
    """``agent_message``: a whole Agent message, or a correction; ``content`` replaces what was streamed."""

    session_update: Literal["agent_message"] = "agent_message"
    message_id: MessageId
    content: list[ContentBlock] | None = None
    meta: Meta = None


class AgentThought(WireModel):
    """``agent_thought``: a whole reasoning message; ``content`` replaces what was streamed."""

    session_update: Literal["agent_thought"] = "agent_thought"
    message_id: MessageId
    content: list[ContentBlock] | None = None
    meta: Meta = None


class UserMessageChunk(WireModel):
    """``user_message_chunk``: append one block to a user message."""

    session_update: Literal["user_message_chunk"] = "user_message_chunk"
    message_id: MessageId
    content: ContentBlock
    meta: Meta = None


class AgentMessageChunk(WireModel):
    """``agent_message_chunk``: append one block to an Agent message (the streaming path)."""

    session_update: Literal["agent_message_chunk"] = "agent_message_chunk"
    message_id: MessageId
    content: ContentBlock
    meta: Meta = None


class AgentThoughtChunk(WireModel):
    """``agent_thought_chunk``: append one block to a reasoning message."""

    session_update: Literal["agent_thought_chunk"] = "agent_thought_chunk"
    message_id: MessageId
    content: ContentBlock
    meta: Meta = None


class SessionMessage(WireModel):
    """[unstable] ``session_message``: a message between sessions (e.g. parent to child), upserted by id."""

    session_update: Literal["session_message"] = "session_message"
    message_id: MessageId
    sender_session_id: SessionId | None = None
    recipient_session_id: SessionId | None = None
    sender_message_id: MessageId | None = None
    recipient_message_id: MessageId | None = None
    content: list[ContentBlock] | None = None
    meta: Meta = None


class SessionMessageChunk(WireModel):
    """[unstable] ``session_message_chunk``: append one block to a session message."""

    session_update: Literal["session_message_chunk"] = "session_message_chunk"
    message_id: MessageId
    content: ContentBlock
    meta: Meta = None


# --------------------------------------------------------------------------- session metadata


class AvailableCommandsUpdate(WireModel):
    """``available_commands_update``: the complete list of slash commands (replaces the previous one)."""

    session_update: Literal["available_commands_update"] = "available_commands_update"
    available_commands: list[AvailableCommand]
    meta: Meta = None


class ConfigOptionUpdate(WireModel):
    """``config_option_update``: the complete list of config options, after the Agent changed them itself."""

    session_update: Literal["config_option_update"] = "config_option_update"
    config_options: list[SessionConfigOption]
    meta: Meta = None


class SessionInfoUpdate(WireModel):
    """``session_info_update``: patch the session's title and last-update time (RFC 3339)."""

    session_update: Literal["session_info_update"] = "session_info_update"
    title: str | None = None
    updated_at: str | None = None
    meta: Meta = None


class Cost(WireModel):
    """A monetary (or other unit) cost: ``currency`` is an ISO 4217 code or e.g. ``"credits"``."""

    amount: float
    currency: str
    meta: Meta = None


class UsageUpdate(WireModel):
    """``usage_update``: tokens used in, and the size of, the current context window."""

    session_update: Literal["usage_update"] = "usage_update"
    used: Annotated[int, Field(ge=0)]
    size: Annotated[int, Field(ge=0)]
    cost: Cost | None = None
    meta: Meta = None


class Notice(WireModel):
    """``notice``: a live, fire-and-forget message for the user; never needed for correctness."""

    session_update: Literal["notice"] = "notice"
    severity: NoticeSeverity
    title: Annotated[str, Field(min_length=1)]
    description: str | None = None
    meta: Meta = None


class CompactionUpdate(WireModel):
    """``compaction_update``: create or patch a context compaction (the first update fixes its position)."""

    session_update: Literal["compaction_update"] = "compaction_update"
    compaction_id: CompactionId
    status: CompactionStatus
    summary: list[ContentBlock] | None = None
    error: str | None = None
    meta: Meta = None


class CompactionSummaryChunk(WireModel):
    """``compaction_summary_chunk``: append one block to a compaction's summary."""

    session_update: Literal["compaction_summary_chunk"] = "compaction_summary_chunk"
    compaction_id: CompactionId
    content: ContentBlock
    meta: Meta = None


class SubagentUpdate(WireModel):
    """[unstable] ``subagent_update``, sent on the parent: announce or patch a child session.

    ``state`` mirrors the child's own ``state_update`` snapshot (``None`` = unconfirmed);
    ``capabilities`` lists the Client mutations allowed on the child.
    """

    session_update: Literal["subagent_update"] = "subagent_update"
    session_id: SessionId
    title: str | None = None
    description: str | None = None
    capabilities: SubagentSessionCapabilities | None = None
    state: NestedStateUpdate | None = None
    cwd: AbsolutePath | None = None
    additional_directories: list[AbsolutePath] | None = None
    meta: Meta = None


class ReplayComplete(WireModel):
    """[Preview] ``replay_complete``: the replay a ``session/resume`` with ``replayFrom`` asked for is all sent;
    what follows is live."""

    session_update: Literal["replay_complete"] = "replay_complete"
    meta: Meta = None


class PromptSuggestion(WireModel):
    """[unstable, Preview] One follow-up prompt the Client may offer: blocks it could send as a ``session/prompt``."""

    prompt: Annotated[list[ContentBlock], Field(min_length=1)]
    meta: Meta = None


class PromptSuggestionsUpdate(WireModel):
    """[unstable, Preview] ``prompt_suggestions_update``: the session's suggested prompts, most likely first; each
    update replaces the list (``[]`` withdraws them). Sent only to Clients advertising
    ``capabilities.session.promptSuggestions``; never part of the history."""

    session_update: Literal["prompt_suggestions_update"] = "prompt_suggestions_update"
    suggestions: list[PromptSuggestion]
    meta: Meta = None


class UnknownSessionUpdate(WireModel):
    """A ``session/update`` of a kind this SDK does not know (``_custom`` or future), kept as received."""

    session_update: str


# --------------------------------------------------------------------------- the union


SessionUpdate: TypeAlias = Annotated[
    Annotated[UserMessageChunk, Tag("user_message_chunk")]
    | Annotated[UserMessage, Tag("user_message")]
    | Annotated[AgentMessageChunk, Tag("agent_message_chunk")]
    | Annotated[AgentMessage, Tag("agent_message")]
    | Annotated[AgentThoughtChunk, Tag("agent_thought_chunk")]
    | Annotated[AgentThought, Tag("agent_thought")]
    | Annotated[StateUpdate, Tag("state_update")]
    | Annotated[ToolCallContentChunk, Tag("tool_call_content_chunk")]
    | Annotated[ToolCallUpdate, Tag("tool_call_update")]
    | Annotated[TerminalUpdate, Tag("terminal_update")]
    | Annotated[TerminalOutputChunk, Tag("terminal_output_chunk")]
    | Annotated[PlanUpdate, Tag("plan_update")]
    | Annotated[PlanRemoved, Tag("plan_removed")]
    | Annotated[AvailableCommandsUpdate, Tag("available_commands_update")]
    | Annotated[ConfigOptionUpdate, Tag("config_option_update")]
    | Annotated[SessionInfoUpdate, Tag("session_info_update")]
    | Annotated[UsageUpdate, Tag("usage_update")]
    | Annotated[Notice, Tag("notice")]
    | Annotated[CompactionUpdate, Tag("compaction_update")]
    | Annotated[CompactionSummaryChunk, Tag("compaction_summary_chunk")]
    | Annotated[SubagentUpdate, Tag("subagent_update")]
    | Annotated[SessionMessage, Tag("session_message")]
    | Annotated[SessionMessageChunk, Tag("session_message_chunk")]
    | Annotated[ReplayComplete, Tag("replay_complete")]
    | Annotated[PromptSuggestionsUpdate, Tag("prompt_suggestions_update")]
    | Annotated[UnknownSessionUpdate, Tag(UNKNOWN_TAG)],
    discriminate_on(
        "sessionUpdate",
        (
            "user_message_chunk",
            "user_message",
            "agent_message_chunk",
            "agent_message",
            "agent_thought_chunk",
            "agent_thought",
            "state_update",
            "tool_call_content_chunk",
            "tool_call_update",
            "terminal_update",
            "terminal_output_chunk",
            "plan_update",
            "plan_removed",
            "available_commands_update",
            "config_option_update",
            "session_info_update",
            "usage_update",
            "notice",
            "compaction_update",
            "compaction_summary_chunk",
            "subagent_update",
            "session_message",
            "session_message_chunk",
            "replay_complete",
            "prompt_suggestions_update",
        ),
        attr="session_update",
    ),
]
"""Anything a ``session/update`` can carry, tagged by ``sessionUpdate``."""


class UpdateSessionNotification(WireModel):
    """Params of the ``session/update`` notification (Agent -> Client)."""

    session_id: SessionId
    update: SessionUpdate
    meta: Meta = None
