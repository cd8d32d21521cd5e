"""The telemetry interface: the few calls the engine makes to report requests, turns, tools and terminals.

Telemetry is optional. The engine holds a `Recorder` (made by a `Telemetry` for each connection) or ``None``
(the default) and checks that one attribute before each call, so an agent without telemetry pays one
``is not None`` test per request or update and imports nothing. The OpenTelemetry implementation is
`acp_agent.telemetry.otel` (the ``otel`` extra); an author may set any `Telemetry` as ``Agent.telemetry``,
for instance to count turns into their own metrics.

Every method must be cheap and must never raise: a telemetry failure never fails an ACP request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Recorder", "Span", "Telemetry"]


class Span(Protocol):
    """One timed operation the engine started (a request, a turn, a request to the client)."""

    @property
    def trace_id(self) -> str:
        """The trace id as 32 hex digits ('' when not recorded): shown next to the turn in the inspector."""
        ...

    def end(self, error: str | None = None, **attributes: Any) -> None:
        """End it, failed with ``error`` (an ``error.type``: a JSON-RPC code or a class of failure) if given;
        ``attributes`` (the stop reason, usage) are set first."""
        ...


class Telemetry(Protocol):
    """Telemetry as configured (``Agent.telemetry``): it makes the `Recorder` of each connection."""

    def bind(self, *, agent_name: str, principal: str | None) -> Recorder:
        """The recorder of one connection serving ``agent_name`` for ``principal`` (``None``: the default one)."""
        ...


class Recorder(Protocol):
    """What the engine reports, for one connection; all methods are called on the event loop."""

    def request(self, method: str, request_id: Any, params: Mapping[str, Any]) -> Span:
        """A request from the client arrived (its ``params._meta`` may carry the caller's trace context).

        The span is current while it is dispatched and while its handler runs (`activate`); it ends with the
        JSON-RPC error code of the answer, if any."""
        ...

    def activate(self, span: Span) -> Any:
        """A context manager making ``span`` the parent of what starts inside it."""
        ...

    def send_request(self, method: str, params: dict[str, Any]) -> tuple[Span, dict[str, Any]]:
        """The agent sends ``method`` to the client: its span and ``params`` with the trace context in ``_meta``."""
        ...

    def capture(self) -> object:
        """The current context and time, kept with held foreground work until it starts (`turn`)."""
        ...

    def turn(self, session_id: str, captured: object, *, prompt: bool, child: bool) -> Span:
        """Foreground work starts (a prompt turn or agent-initiated work, ``child`` for a subagent's) and is current
        until its span ends, in the same task."""
        ...

    def update(self, session_id: str, update: Any, *, detach: bool | None) -> None:
        """A session update went out: tool calls, terminals and usage are followed from these."""
        ...

    def sessions(self, delta: int) -> None:
        """A session opened (+1) or closed (-1) on this connection."""
        ...

    def wire(self, received: int = 0, sent: int = 0) -> None:
        """Bytes read from or written to the connection."""
        ...
