"""A session's ``state_update`` snapshots: built in one place, sent in one place.

`StatePublisher.snapshot` is the only builder of a session's snapshots, and every
snapshot carries the complete ``background`` list computed by the registry from what was
already sent (R91), so it can only name announced, live items (R93, R94). A changed list is
re-sent as a repeated snapshot without a stop reason (R62, R92); `StatePublisher.batch`
coalesces the list changes one task makes into at most one such snapshot, sent after the
entity updates it depends on. A child session's snapshots are mirrored into its parent's
``subagent_update`` (R80) by the ``mirror`` callback.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Final

from pydantic import BaseModel

from .._wire.templates import UPDATE_TAIL, empty_list_snapshot
from ..schema import Error, ForegroundState, IdleStateUpdate, RequiresActionStateUpdate, RunningStateUpdate, Usage
from .registry import BackgroundRegistry
from .sink import SessionSink

__all__ = ["BATCHING", "StatePublisher"]

BATCHING: Final[contextvars.ContextVar[tuple[StatePublisher, ...]]] = contextvars.ContextVar(
    "acp_batching", default=()
)
"""The publishers whose list changes the current task is batching (a batch never spans tasks)."""


_LINES_KEPT: Final = 16  # snapshot lines a publisher keeps (custom stop reasons are unbounded)


class StatePublisher:
    """Owns one session's reported foreground state and sends its snapshots."""

    __slots__ = ("_dirty", "_last_version", "_lines", "_mirror", "_registry", "_sink", "foreground")

    def __init__(
        self,
        registry: BackgroundRegistry,
        sink: SessionSink,
        mirror: Callable[[BaseModel], None] | None = None,
    ) -> None:
        self._registry = registry
        self._sink = sink
        self._mirror = mirror
        self.foreground: ForegroundState = "idle"
        """The foreground state last reported."""
        self._last_version = -1  # registry version of the last snapshot sent
        self._dirty = False
        # Framed lines of the snapshots with an empty list (the same bytes every turn): built once.
        self._lines: dict[tuple[ForegroundState, str | None], bytes] = {}

    def snapshot(self, state: ForegroundState, stop_reason: str | None = None, error: Error | None = None,
                 usage: Usage | None = None) -> BaseModel:
        """Build a snapshot of ``state`` with the current list (and note the list as sent)."""
        self._last_version = self._registry.version
        self._dirty = False
        return self._build(state, stop_reason, error, usage)

    def current(self) -> BaseModel:
        """[unstable] The current state as a snapshot, without a stop reason, for an answer
        (``session/status``, S6): nothing is noted or sent."""
        return self._build(self.foreground)

    def _build(self, state: ForegroundState, stop_reason: str | None = None, error: Error | None = None,
               usage: Usage | None = None) -> BaseModel:
        listing = self._registry.listing()
        if state == "running":
            return RunningStateUpdate(background=listing)
        if state == "requires_action":
            return RequiresActionStateUpdate(background=listing)
        fields: dict[str, Any] = {"background": listing}
        if stop_reason is not None:
            fields["stop_reason"] = stop_reason
        if error is not None:
            fields["error"] = error
        if usage is not None:
            fields["usage"] = usage  # only on the idle that ends work, never on a repeat (R62)
        return IdleStateUpdate(**fields)

    def set(self, state: ForegroundState, stop_reason: str | None = None, error: Error | None = None,
            usage: Usage | None = None) -> None:
        """Record and report a foreground transition."""
        self.foreground = state
        if error is None and usage is None and self._mirror is None and not self._registry.listed_count:
            # The common case (nothing in the background, nothing to mirror): the snapshot's bytes, written
            # once per session, so a turn's ``running`` and ``idle`` build and serialize no model.
            line = self._lines.get((state, stop_reason))
            if line is None:
                body = empty_list_snapshot(state, stop_reason)
                line = self._sink.prefix + body + UPDATE_TAIL if body is not None else self._sink.frame(
                    self._build(state, stop_reason))
                if len(self._lines) < _LINES_KEPT:
                    self._lines[(state, stop_reason)] = line
            self._last_version = self._registry.version
            self._dirty = False
            self._sink.resend_line(line)
            return
        self._publish(self.snapshot(state, stop_reason, error, usage))

    def repeat(self) -> None:
        """Re-send the current state without a stop reason (R62: not a new completion)."""
        self._publish(self.snapshot(self.foreground))

    @property
    def list_unsent(self) -> bool:
        """True if the list changed since the last snapshot was sent."""
        return self._registry.version != self._last_version

    def _publish(self, snapshot: BaseModel) -> None:
        self._sink.resend(snapshot)
        if self._mirror is not None:
            self._mirror(snapshot)

    def list_changed(self) -> None:
        """Entity state changed: re-send the state if the list differs from the last one sent (R92)."""
        if self in BATCHING.get():
            self._dirty = True
        elif self.list_unsent:
            self.repeat()

    def mark_dirty(self, changed: bool) -> None:
        """Note a list change made inside `batch` (sent when the batch ends)."""
        self._dirty |= changed

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Coalesce list changes this task makes inside the block into at most one snapshot."""
        outer = BATCHING.get()
        if self in outer:
            yield
            return
        token = BATCHING.set((*outer, self))
        try:
            yield
        finally:
            BATCHING.reset(token)
            if self._dirty:
                self._dirty = False
                self.list_changed()

