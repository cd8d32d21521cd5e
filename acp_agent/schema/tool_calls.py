"""Tool calls: the ``tool_call_update`` upsert, its content items and the content chunk."""

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    UNKNOWN_TAG,
    AbsolutePath,
    MediaType,
    Meta,
    TerminalId,
    ToolCallId,
    WireModel,
    discriminate_on,
)
from .capabilities import ToolCallCapabilities
from .content import ContentBlock

__all__ = [
    "Content",
    "Diff",
    "DiffChange",
    "DiffFileType",
    "DiffPatch",
    "DiffPatchFormat",
    "DiffPathChange",
    "DiffPathPairChange",
    "Terminal",
    "ToolCallContent",
    "ToolCallContentChunk",
    "ToolCallLocation",
    "ToolCallStatus",
    "ToolCallUpdate",
    "ToolKind",
    "UnknownDiffChange",
    "UnknownToolCallContent",
]

ToolKind: TypeAlias = (
    Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
    | str
)
"""What a tool call does (a UI hint). A new tool call starts as ``"other"``."""

ToolCallStatus: TypeAlias = (
    Literal["pending", "in_progress", "paused", "completed", "failed", "cancelled"] | str
)
"""Lifecycle of a tool call; ``completed`` / ``failed`` / ``cancelled`` are final. Unknown = still running."""

DiffFileType: TypeAlias = Literal["text", "binary", "directory", "symlink"] | str
"""The kind of filesystem entry a diff change touches."""

DiffPatchFormat: TypeAlias = Literal["git_patch"] | str
"""The format of ``DiffPatch.text``."""


class ToolCallLocation(WireModel):
    """A file (and optionally a 1-based line) a tool call is working on."""

    path: AbsolutePath
    line: Annotated[int, Field(ge=1)] | None = None
    meta: Meta = None


# --------------------------------------------------------------------------- diffs


class DiffPathChange(WireModel):
    """A diff change on one path: ``add``, ``delete`` or ``modify``."""

    operation: Literal["add", "delete", "modify"]
    path: AbsolutePath
    file_type: DiffFileType | None = None
    mime_type: MediaType | None = None
    meta: Meta = None


class DiffPathPairChange(WireModel):
    """A diff change from one path to another: ``move`` or ``copy``."""

    operation: Literal["move", "copy"]
    old_path: AbsolutePath
    path: AbsolutePath
    file_type: DiffFileType | None = None
    mime_type: MediaType | None = None
    meta: Meta = None


class UnknownDiffChange(WireModel):
    """A diff change with an unknown ``operation``, kept as received."""

    operation: str


DiffChange: TypeAlias = Annotated[
    Annotated[DiffPathChange, Tag("path")]
    | Annotated[DiffPathPairChange, Tag("path_pair")]
    | Annotated[UnknownDiffChange, Tag(UNKNOWN_TAG)],
    discriminate_on(
        "operation",
        {"add": "path", "delete": "path", "modify": "path", "move": "path_pair", "copy": "path_pair"},
    ),
]
"""One file-level change of a diff, tagged by ``operation``."""


class DiffPatch(WireModel):
    """A textual patch agreeing with ``Diff.changes`` (absolute paths, no ``a/`` / ``b/`` prefixes)."""

    format: DiffPatchFormat
    text: str
    meta: Meta = None


# --------------------------------------------------------------------------- content items


class Content(WireModel):
    """Tool call content item wrapping an ordinary content block."""

    type: Literal["content"] = "content"
    content: ContentBlock
    meta: Meta = None


class Diff(WireModel):
    """Tool call content item describing file changes; ``changes`` is authoritative."""

    type: Literal["diff"] = "diff"
    changes: list[DiffChange]
    patch: DiffPatch | None = None
    meta: Meta = None


class Terminal(WireModel):
    """Tool call content item that shows an Agent-owned terminal (display only, grants no control)."""

    type: Literal["terminal"] = "terminal"
    terminal_id: TerminalId
    meta: Meta = None


class UnknownToolCallContent(WireModel):
    """A tool call content item of an unknown ``type``, kept as received."""

    type: str


ToolCallContent: TypeAlias = Annotated[
    Annotated[Content, Tag("content")]
    | Annotated[Diff, Tag("diff")]
    | Annotated[Terminal, Tag("terminal")]
    | Annotated[UnknownToolCallContent, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("content", "diff", "terminal")),
]
"""One item of a tool call's content, tagged by ``type``."""


# --------------------------------------------------------------------------- updates


class ToolCallUpdate(WireModel):
    """``tool_call_update``: create a tool call (first id seen) or patch it.

    Every field except ``tool_call_id`` is tri-state: omit it to keep the stored value, pass
    ``None`` to clear it (``status=None`` resets to ``pending`` -- never do that once started),
    or pass a value to replace it. The same object is the ``toolCall`` of a permission subject,
    which drops the ``sessionUpdate`` key.
    """

    session_update: Literal["tool_call_update"] = "tool_call_update"
    tool_call_id: ToolCallId
    name: str | None = None
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None
    capabilities: ToolCallCapabilities | None = None
    meta: Meta = None


class ToolCallContentChunk(WireModel):
    """``tool_call_content_chunk``: append one content item to a tool call."""

    session_update: Literal["tool_call_content_chunk"] = "tool_call_content_chunk"
    tool_call_id: ToolCallId
    content: ToolCallContent
    meta: Meta = None
