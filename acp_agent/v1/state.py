"""What the translator remembers about one v1 connection.

Plain data and no I/O: the connection-wide `TranslatorState` (client capabilities, the
requests in flight both ways, the sessions) and, per session, the turn in progress, each tool
call as last sent, each terminal's output tail, the live plans, the config options and the AIR
async tasks announced. The translator's modules read and change it; nothing else does.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .messages import Message

__all__ = [
    "BRIDGE_REQUEST", "LIVE_TAIL", "TERMINAL_INTERVAL", "TERMINAL_TAIL", "Session", "TerminalShown", "Tool",
    "TranslatorState",
]

TERMINAL_TAIL: Final = 64 * 1024
"""Characters of a terminal's output kept for the tool call content shown to a v1 client (once it exited)."""

BRIDGE_REQUEST: Final = "_acp_agent/v1_bridge"
"""How the bridge files a request it sent the runtime itself: its answer is not the client's business."""

LIVE_TAIL: Final = 8 * 1024
"""Characters of a running terminal's output shown: v1 content replaces the list, so each update resends it."""

TERMINAL_INTERVAL: Final = 0.3
"""Seconds between two updates of a running terminal's output (its exit is sent at once)."""


@dataclass
class TerminalShown:
    """An agent-owned terminal: its command, output tail and exit, shown inside tool calls."""

    terminal_id: str
    command: str | None = None
    text: str = ""
    truncated: bool = False
    dropped_lines: int = 0
    """Lines cut from the start of `text` (a snapshot the runtime had already cut adds none it can count)."""
    exit: dict[str, Any] | None = None
    tools: list[str] = field(default_factory=list)
    """The tool calls whose content shows this terminal."""
    shown_at: float | None = None
    """When its output was last sent (monotonic seconds); ``None``: not yet."""
    pending: bool = False
    """Output arrived since it was last sent (sent when `TERMINAL_INTERVAL` has passed)."""
    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))

    def append(self, data: bytes) -> None:
        """Add output bytes (UTF-8 decoded across calls), keeping at most the last `TERMINAL_TAIL` characters,
        from a line start when one is in reach."""
        self.text += self.decoder.decode(data)
        if len(self.text) > TERMINAL_TAIL:
            cut = _line_start(self.text, len(self.text) - TERMINAL_TAIL)
            self.dropped_lines += self.text.count("\n", 0, cut)
            self.text = self.text[cut:]
            self.truncated = True

    def render(self) -> str:
        """The output as a fenced block (``""`` while there is nothing to show), the exit as its last line.

        While the process runs only the last `LIVE_TAIL` characters are shown. A cut output starts at a
        line start under a first line that says how many lines were left out.
        """
        text, truncated, dropped = self.text, self.truncated, self.dropped_lines
        if self.exit is None and len(text) > LIVE_TAIL:
            cut = _line_start(text, len(text) - LIVE_TAIL)
            text, truncated, dropped = text[cut:], True, dropped + text.count("\n", 0, cut)
        if truncated:
            text = _left_out(dropped) + text
        if self.exit is not None:
            if text and not text.endswith("\n"):
                text += "\n"
            text += _exit_line(self.exit)
        if not text:
            return ""
        if not text.endswith("\n"):
            text += "\n"
        return f"```\n{text}```"

    @property
    def failed(self) -> bool:
        """The process exited non-zero or by a signal."""
        return self.exit is not None and (self.exit.get("exitCode") not in (0, None) or bool(self.exit.get("signal")))


def _line_start(text: str, cut: int) -> int:
    """The first line start at or after ``cut`` (``cut`` itself when no line starts after it)."""
    if cut <= 0 or text[cut - 1] == "\n":
        return max(cut, 0)
    newline = text.find("\n", cut)
    return newline + 1 if 0 <= newline < len(text) - 1 else cut


def _left_out(lines: int) -> str:
    if lines <= 0:
        return "… earlier output not shown\n"
    return f"… {lines} earlier line{'' if lines == 1 else 's'} not shown\n"


def _exit_line(exit_status: dict[str, Any]) -> str:
    signal = exit_status.get("signal")
    if signal:
        return f"[terminated by {signal}]"
    code = exit_status.get("exitCode")
    return f"[exit code {code}]" if code is not None else "[exited]"


@dataclass
class Tool:
    """A tool call as the v1 client sees it, including those the bridge makes up (terminals, subagents, permissions)."""

    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str = "pending"
    fields: dict[str, Any] = field(default_factory=dict)
    """Pass-through v1 fields (locations, rawInput, rawOutput)."""
    content: list[tuple[str, Any]] = field(default_factory=list)
    """("v1", v1 content item) or ("terminal", terminal id)."""
    handed_off: set[str] = field(default_factory=set)
    """Terminals still running when the tool call reached a final status: their exit decides the v1 status."""
    sent: dict[str, Any] | None = None
    """The v1 fields last sent (None: the client has not seen the tool call)."""
    synthetic: bool = False
    """Made up by the bridge (no v2 tool call of that id): the bridge decides its status."""
    last_message: str | None = None
    """For a subagent's tool call: the child message its last text item shows."""


@dataclass
class Session:
    """The translator's books for one v1 session."""

    session_id: str
    turn: str | None = None
    """The message id of the prompt whose turn is in progress."""
    waiting: dict[str, Any] = field(default_factory=dict)
    """Prompt message id -> the v1 request id to answer when its turn ends."""
    ended: dict[str, Message] = field(default_factory=dict)
    """Prompt message id -> its outcome, for a turn that ended before the runtime answered the prompt."""
    tools: dict[str, Tool] = field(default_factory=dict)
    terminals: dict[str, TerminalShown] = field(default_factory=dict)
    plans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Plan id -> its v1 entries (v1 shows one plan: all of them)."""
    config_options: list[dict[str, Any]] = field(default_factory=list)
    mode: str | None = None
    """The current value of the mode config option as last sent."""
    loading: bool = False
    """A ``session/load`` replay is in progress (the user's messages are shown)."""
    tasks: dict[tuple[str, str], str] = field(default_factory=dict)
    """AIR async tasks announced: (kind, id) -> last state sent."""
    background: list[dict[str, Any]] = field(default_factory=list)
    """The session's background work as last listed (v2 ``background`` items)."""
    agent_commands: list[Any] = field(default_factory=list)
    """The agent's own available commands (v2 shape) as last sent; the bridge adds its own to them."""
    prompts: int = 0
    """Prompts sent to the runtime and not answered yet (a ``session/cancel`` then cancels a turn)."""


@dataclass
class TranslatorState:
    """The connection-wide books: the client, the requests in flight both ways, the sessions."""

    sessions: dict[str, Session] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    air: bool = False
    """The client declared the JetBrains AIR ``asyncTasks`` extension."""
    requests: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Client request id (JSON) -> (method, context), for translating the runtime's answer."""
    agent_requests: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Runtime request id (JSON) -> (method, context), for translating the client's answer."""
    synthetic: int = 0
    """Tool calls made up for permission requests so far (numbers their ids)."""
    children: dict[str, str] = field(default_factory=dict)
    """Child (subagent) session id -> its parent session id: the child is shown as a tool call there."""
    agent_capabilities: dict[str, Any] = field(default_factory=dict)
    """The agent's v2 capabilities from its ``initialize`` answer."""
    initializing: bool = False
    """An ``initialize`` went to the runtime and its answer has not come back yet."""
    initialized: bool = False
    """The agent's ``initialize`` answer came back: `agent_capabilities` are known."""
    auth_methods: list[dict[str, Any]] = field(default_factory=list)
    """The agent's v2 ``authMethods`` from its ``initialize`` answer."""
    own_requests: int = 0
    """Requests the bridge itself sent the runtime so far (numbers their ids)."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds (paces terminal output); a test may replace it."""

    def session(self, session_id: str) -> Session:
        """The books of a session, opened on first use."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = Session(session_id)
        return session
