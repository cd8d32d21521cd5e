"""What the agent process keeps about a session, active or not: the base of list and resume."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import schema

if TYPE_CHECKING:
    from .history import History

__all__ = ["DEFAULT_PRINCIPAL", "SessionRecord", "now_text"]

DEFAULT_PRINCIPAL = "default"
"""The principal of stdio connections, of a server with one plain token (or none), and of records stored
before principals existed."""


_last_second: list[Any] = [None, ""]  # the last second formatted, and its text (every prompt touches its session)


def now_text() -> str:
    """The current UTC time as ACP writes it (``2026-12-01T17:14:16Z``)."""
    second = int(time.time())
    if second != _last_second[0]:
        _last_second[1] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        _last_second[0] = second
    return str(_last_second[1])


def _new_history() -> History:
    from .history import History  # with the first session, not at import (it needs the update models)

    return History()


@dataclass(slots=True)
class SessionRecord:
    """A session's metadata and replayable history (what ``session/list`` and ``session/resume`` read)."""

    session_id: str
    cwd: str
    additional_directories: list[str] = field(default_factory=list)
    title: str | None = None
    updated_at: str = field(default_factory=now_text)
    created_at: str = field(default_factory=now_text)
    archived: bool = False
    """[unstable] Hidden from the default ``session/list`` (``session/archive``)."""
    client_title: bool = False
    """[unstable] The client set the title (``session/set_title``): the agent's own titles no longer replace it."""
    meta: dict[str, Any] | None = None
    """The session's ``_meta`` as last set with ``session.update_info(meta=...)``."""
    history: History = field(default_factory=_new_history)
    config_options: list[schema.SessionConfigOption] = field(default_factory=list)
    available_commands: list[schema.AvailableCommand] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    """The author's ``Session.data``."""
    wakeups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Durable wake-ups still pending (``Session.schedule(..., durable=...)``), by tool call id:
    ``{"name", "payload", "due" (seconds since the epoch), "repeat", "title"}``; re-armed when the session
    is loaded again."""
    request_meta: dict[str, Any] | None = None
    """The ``_meta`` of the latest ``session/new``, ``session/resume`` or ``session/fork`` for the session."""
    system_prompt: schema.SystemPrompt | None = None
    """[unstable] The client's system prompt for the session, if it gave one."""
    deleted: bool = False
    """Set once ``session/delete`` removed the session: stores no longer write it."""
    prompt_keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The ``idempotencyKey``s of the prompts inserted into the session, oldest first:
    ``{"messageId", "digest" (of the prompt), "at" (seconds since the epoch)}`` each (``acp_agent._session.keys``)."""
    principal: str = DEFAULT_PRINCIPAL
    """Who the session belongs to (the authenticated user of the connection that created it); only
    that principal's connections list it or act on it."""

    def touch(self) -> None:
        """Note activity now (``updatedAt``)."""
        self.updated_at = now_text()
