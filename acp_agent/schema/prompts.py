"""``session/prompt`` and the cancellation messages: ``session/cancel``, ``$/cancel_request``,
``tool_call/cancel`` and ``terminal/cancel``.
"""

from typing import Annotated, TypeAlias

from pydantic import Field

from .base import MessageId, Meta, RequestId, SessionId, TerminalId, ToolCallId, WireModel
from .content import ContentBlock

__all__ = [
    "CancelRequestNotification",
    "CancelSessionNotification",
    "CancelTerminalRequest",
    "CancelTerminalResponse",
    "CancelToolCallRequest",
    "CancelToolCallResponse",
    "IdempotencyKey",
    "PromptRequest",
    "PromptResponse",
]


IdempotencyKey: TypeAlias = Annotated[str, Field(min_length=1, max_length=255)]
"""[Preview] A client-chosen name of one prompt submission: 1-255 characters, compared exactly, never interpreted."""


class PromptRequest(WireModel):
    """Params of ``session/prompt``: the user's message as content blocks.

    The schema requires at least one block; an empty list still validates here so the Agent
    can decide whether to reject it (MAY, ``-32602``). ``idempotency_key`` [Preview] names the submission:
    every attempt carrying it is answered with the first one's ``messageId``.
    """

    session_id: SessionId
    prompt: list[ContentBlock]
    idempotency_key: IdempotencyKey | None = None
    meta: Meta = None


class PromptResponse(WireModel):
    """Result of ``session/prompt``, sent once the message is inserted: the user message's id."""

    message_id: MessageId
    meta: Meta = None


class CancelSessionNotification(WireModel):
    """Params of ``session/cancel``: stop the session's foreground work and its not-yet-inserted prompts."""

    session_id: SessionId
    meta: Meta = None


class CancelRequestNotification(WireModel):
    """Params of ``$/cancel_request``: the sender withdraws one of its own pending requests."""

    request_id: RequestId
    meta: Meta = None


class CancelToolCallRequest(WireModel):
    """Params of ``tool_call/cancel``: stop one tool call that advertises ``capabilities.cancel``."""

    session_id: SessionId
    tool_call_id: ToolCallId
    meta: Meta = None


class CancelToolCallResponse(WireModel):
    """Result of ``tool_call/cancel`` (``{}``): the cancellation was accepted, not yet completed."""

    meta: Meta = None


class CancelTerminalRequest(WireModel):
    """Params of ``terminal/cancel``: stop a terminal's process (it advertises ``capabilities.cancel``)."""

    session_id: SessionId
    terminal_id: TerminalId
    meta: Meta = None


class CancelTerminalResponse(WireModel):
    """Result of ``terminal/cancel`` (``{}``): the cancellation was accepted, not yet completed."""

    meta: Meta = None
