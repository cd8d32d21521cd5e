"""ACP prompt content as pydantic-ai user content, and the model history kept in the session.

A prompt's text becomes text; images and audio become ``BinaryContent`` (only when the agent accepts
them: the SDK refuses the others before the turn); an embedded resource becomes its text framed with
its URI (or binary content); a resource link becomes a line naming it, so the model may read it with
a tool. The model's message history lives in ``session.data`` as pydantic-ai's own JSON
(``ModelMessagesTypeAdapter``): it is saved with the session's record when a turn ends, so it survives
``session/close``, a restart of the agent (with a durable store), a ``session/fork`` and a resume on
another connection or replica. Background work does not survive the end of its session's life in this process
(a restart, a dropped connection): `note_stopped_background` tells the model so when the session comes back.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)

from ...schema import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from ...session import Session

__all__ = ["HISTORY_KEY", "clear_history", "load_history", "prompt_text", "save_history", "user_content"]

HISTORY_KEY = "pydantic_ai.messages"
"""The ``session.data`` key holding the model's message history (a JSON list)."""


def user_content(blocks: Sequence[ContentBlock]) -> str | list[UserContent]:
    """The prompt's blocks as pydantic-ai user content, in order (one string when all of it is text)."""
    parts: list[UserContent] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(BinaryContent(data=base64.b64decode(block.data), media_type=block.mime_type))
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(f'<resource uri="{resource.uri}">\n{resource.text}\n</resource>')
            elif isinstance(resource, BlobResourceContents):
                parts.append(BinaryContent(data=base64.b64decode(resource.blob),
                                           media_type=resource.mime_type or "application/octet-stream"))
        elif isinstance(block, ResourceLink):
            parts.append(f"[{block.title or block.name}]({block.uri})")
    if all(isinstance(part, str) for part in parts):
        return "\n".join(str(part) for part in parts)
    return parts


def prompt_text(blocks: Sequence[ContentBlock]) -> str:
    """The prompt's text blocks joined (what a slash command is read from)."""
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


def load_history(session: Session) -> list[ModelMessage]:
    """The model's message history kept in the session (empty for a new session)."""
    stored: Any = session.data.get(HISTORY_KEY)
    if not stored:
        return []
    return ModelMessagesTypeAdapter.validate_python(stored)


def save_history(session: Session, messages: Sequence[ModelMessage]) -> None:
    """Keep ``messages`` as the session's model history (saved with the record when the turn ends)."""
    session.data[HISTORY_KEY] = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")


def clear_history(session: Session) -> None:
    """Forget the model's history (``/clear``); the client's transcript stays as it was."""
    session.data[HISTORY_KEY] = []


_STARTED = (re.compile(r"Started (?P<name>\S+) in the background \(tool call (?P<id>[^)\s]+)\)"),
            re.compile(r"Started in the background as terminal (?P<id>[^;\s]+)"))


def _started(part: ToolReturnPart) -> tuple[str, str] | None:
    """``(what, marker)`` of a background start the tool answered, the marker its follow-up message carries."""
    text = part.model_response_str()
    for pattern in _STARTED:
        match = pattern.match(text)
        if match:
            kind = "tool call" if "name" in pattern.groupindex else "terminal"
            what = f"{match['name']} (tool call {match['id']})" if kind == "tool call" else (
                f"{part.tool_name} (terminal {match['id']})")
            return what, f"({kind} {match['id']})"
    return None


def note_stopped_background(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages``, plus a note telling the model which background work it started has stopped without a result
    (the session left this process: a restart, a dropped connection, ``session/close``), so it stops waiting for
    a message that will never come. Work already reported (a ``[background]`` message names it) is left out."""
    started: dict[str, str] = {}
    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if isinstance(part, ToolReturnPart) and (found := _started(part)) is not None:
                started[found[1]] = found[0]
            elif isinstance(part, UserPromptPart) and isinstance(part.content, str) and part.content.startswith(
                    "[background]"):
                for marker in [m for m in started if m in part.content]:
                    del started[marker]
    if not started:
        return list(messages)
    note = ("[background] Stopped without a result: " + "; ".join(started.values()) + ". The session was closed "
            "or the agent restarted, which ends background work; its output is lost. Start it again if needed.")
    return [*messages, ModelRequest(parts=[UserPromptPart(content=note)])]
