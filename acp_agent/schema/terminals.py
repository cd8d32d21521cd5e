"""Agent-owned display terminals: the ``terminal_update`` upsert and ``terminal_output_chunk``."""

from typing import Annotated, Literal

from pydantic import Field

from .base import AbsolutePath, Meta, TerminalId, WireModel
from .capabilities import TerminalCapabilities

__all__ = [
    "TerminalExitStatus",
    "TerminalOutput",
    "TerminalOutputChunk",
    "TerminalSize",
    "TerminalUpdate",
]


class TerminalOutput(WireModel):
    """A replacement snapshot of every retained output byte of a terminal (base64)."""

    data: str
    meta: Meta = None


class TerminalExitStatus(WireModel):
    """How a terminal's process ended. Any object (even ``{}``) marks the terminal as exited."""

    exit_code: int | None = None
    signal: str | None = None
    meta: Meta = None


class TerminalSize(WireModel):
    """Terminal dimensions in character cells (1-65535 each)."""

    cols: Annotated[int, Field(ge=1, le=65535)]
    rows: Annotated[int, Field(ge=1, le=65535)]
    meta: Meta = None


class TerminalUpdate(WireModel):
    """``terminal_update``: create a terminal (first id seen) or patch it.

    Fields are tri-state: omitted keeps, ``None`` clears (``exit_status=None`` un-exits the
    terminal, ``capabilities=None`` removes all controls), a value replaces.
    """

    session_update: Literal["terminal_update"] = "terminal_update"
    terminal_id: TerminalId
    command: str | None = None
    cwd: AbsolutePath | None = None
    output: TerminalOutput | None = None
    exit_status: TerminalExitStatus | None = None
    size: TerminalSize | None = None
    capabilities: TerminalCapabilities | None = None
    meta: Meta = None


class TerminalOutputChunk(WireModel):
    """``terminal_output_chunk``: append bytes (base64, encoded per chunk) to a terminal's output."""

    session_update: Literal["terminal_output_chunk"] = "terminal_output_chunk"
    terminal_id: TerminalId
    data: str
    meta: Meta = None
