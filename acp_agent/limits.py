"""Resource limits of one agent connection, configured once in a [`Limits`][acp_agent.Limits] object.

Pass it to [`run_stdio`][acp_agent.run_stdio] (``run_stdio(agent, limits=Limits(max_sessions=8))``)
or set it as the ``limits`` class attribute of your [`Agent`][acp_agent.Agent]; the argument
wins over the attribute. The same keyword is accepted by [`serve`][acp_agent.serve],
[`serve_stdio`][acp_agent.serve_stdio] and the in-memory test client
([`connect_agent`][acp_agent.testing.connect_agent]).

What happens at a limit:

- a *client request* that would go past one (``session/new``, ``session/fork`` or
  ``session/resume`` past ``max_sessions``) is answered ``-32800`` (the reference's code for
  requests abandoned because of resource limits, R18) with a message naming the limit and
  ``data: {"limit": <name>, "value": <limit>}``; nothing else happens;
- an *author call* that would go past one (``start_terminal`` past ``max_processes``, a new
  listed item past ``max_listed_items``) raises [`LimitExceededError`][acp_agent.LimitExceededError]
  and sends nothing;
- terminal output past ``terminal_output_bytes`` is dropped from the *retained* tail (what
  ``session/resume`` replays and [`Terminal.tail`][acp_agent.Terminal.tail] returns), oldest bytes first; the
  live stream of ``terminal_output_chunk`` updates always carries every byte;
- an incoming line over ``max_message_bytes`` is skipped without buffering it and answered
  ``-32600`` with ``id: null`` (R14).

The ``max_principal_*`` limits count what one principal (one user of a server with a tokens file; over
stdio the one client) has across its connections to this process, and answer the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from ._util.processes import DEFAULT_TAIL_LIMIT
from ._wire.framing import DEFAULT_MAX_MESSAGE_BYTES
from .errors import ErrorCode, LimitExceededError, RequestError

__all__ = ["DEFAULT_LIMITS", "LIMIT_ERROR_CODE", "Limits", "ProcessSlots", "limit_error", "limit_exceeded",
           "resolve_limits"]

LIMIT_ERROR_CODE: Final = ErrorCode.REQUEST_CANCELLED
"""The JSON-RPC code of a client request refused because of a limit (``-32800``)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Every resource limit an agent enforces (frozen; build a new one to change a value).

    Most apply to one connection; the ``max_principal_*`` ones apply to one principal (one user of a
    server, see ``serve --tokens``) across all of its connections to this process. Set them with
    ``run_stdio(agent, limits=...)``, ``run_http(..., limits=...)`` or a ``limits`` class attribute of your
    [`Agent`][acp_agent.Agent] subclass (``serve`` starts from it and turns the per-principal quotas on; its
    ``--max-user-...`` flags change them).

    All values must be positive integers (``terminal_output_bytes`` may be 0: keep no tail).
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest incoming JSON-RPC line, in bytes (32 MiB, as the TypeScript SDK)."""
    max_sessions: int = 256
    """Sessions the client may have active on one connection at once (subagent children not counted)."""
    max_listed_items: int = 1000
    """Items one session's ``background`` list may hold at once."""
    max_processes: int = 64
    """Terminal processes running at once on one connection, across its sessions."""
    terminal_output_bytes: int = DEFAULT_TAIL_LIMIT
    """Output retained per terminal for replay and [`Terminal.tail`][acp_agent.Terminal.tail] (the newest bytes)."""
    max_title_length: int = 1024
    """Longest title a client may give a session with ``session/set_title``, in characters."""
    max_history_bytes: int | None = None
    """Bytes of history one session may hold (about: the updates recorded, as sent); a session at it
    takes no more prompts (``None``: no limit)."""
    max_principal_connections: int | None = None
    """Connections one principal (one user of a server) may have open at once (HTTP/WebSocket; ``None``: no
    limit besides the server's ``max_connections``)."""
    max_principal_sessions: int | None = None
    """Sessions one principal may have active at once, across its connections to this process."""
    max_principal_stored_sessions: int | None = None
    """Sessions one principal may keep in the store (``session/new`` and ``session/fork`` past it are
    refused; deleting sessions makes room)."""
    max_principal_processes: int | None = None
    """Terminal processes one principal's sessions may run at once, across its connections to this process."""
    idempotency_keys: int = 1000
    """``idempotencyKey``s of ``session/prompt`` one session remembers (the newest; an older key's retry is a new
    message). Kept with the session's record, so they survive what the session survives."""
    idempotency_key_age: float = 7 * 24 * 3600.0
    """Seconds a session remembers an ``idempotencyKey`` after the message it put in (7 days)."""

    def __post_init__(self) -> None:
        for name in ("max_message_bytes", "max_sessions", "max_listed_items", "max_processes", "max_title_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer, got {value!r}")
        for name in ("max_history_bytes", "max_principal_connections", "max_principal_sessions",
                     "max_principal_stored_sessions", "max_principal_processes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"Limits.{name} must be a positive integer or None, got {value!r}")
        for name in ("idempotency_keys", "idempotency_key_age"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")
        tail = self.terminal_output_bytes
        if not isinstance(tail, int) or isinstance(tail, bool) or tail < 0:
            raise ValueError(f"Limits.terminal_output_bytes must be an integer >= 0, got {tail!r}")


DEFAULT_LIMITS: Final = Limits()
"""The limits used when none are given."""


def resolve_limits(default: Limits, limits: Limits | None = None, max_message_bytes: int | None = None) -> Limits:
    """The limits in force: ``limits`` if given, else ``default`` (the agent's), with an
    explicit ``max_message_bytes`` (the older keyword) folded in."""
    chosen = limits if limits is not None else default
    if max_message_bytes is not None and max_message_bytes != chosen.max_message_bytes:
        chosen = replace(chosen, max_message_bytes=max_message_bytes)
    return chosen


def limit_error(name: str, value: int, what: str) -> RequestError:
    """The error answer to a client request that would go past limit ``name``."""
    return RequestError(
        LIMIT_ERROR_CODE,
        f"Request cancelled: limit {name}={value} reached ({what})",
        {"limit": name, "value": value},
    )


def limit_exceeded(name: str, value: int, what: str) -> LimitExceededError:
    """The exception for an author call that would go past limit ``name``."""
    return LimitExceededError(name, value, f"limit {name}={value} reached ({what}); nothing was sent")


@dataclass(slots=True)
class ProcessSlots:
    """The terminal processes running on one connection, counted against ``max_processes`` (and, with
    ``shared``, a check of the principal's processes across its connections: ``max_principal_processes``)."""

    limit: int
    holders: set[str] = field(default_factory=set)
    shared: Callable[[], None] | None = None

    def acquire(self, holder: str) -> None:
        """Take a slot for ``holder`` (a terminal id) or raise [`LimitExceededError`][acp_agent.LimitExceededError]
        (nothing taken)."""
        if holder in self.holders:
            return
        if len(self.holders) >= self.limit:
            raise limit_exceeded("max_processes", self.limit, "terminal processes running on this connection")
        if self.shared is not None:
            self.shared()
        self.holders.add(holder)

    def release(self, holder: str) -> None:
        """Give ``holder``'s slot back (no-op if it holds none)."""
        self.holders.discard(holder)

    def __len__(self) -> int:
        return len(self.holders)
