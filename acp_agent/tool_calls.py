"""Tool call handles: the author's side of a tool call's whole life.

A [`ToolCall`][acp_agent.ToolCall] is created announced (``title``, ``kind``, ``name``: R74) and then moves
through ``pending`` → ``in_progress`` (⇄ ``paused``) → ``completed`` / ``failed`` /
``cancelled``. Its status never moves backwards and never changes once final (the registry
refuses such updates before they are sent). A tool call can outlive the prompt that started
it: [`ToolCall.run`][acp_agent.ToolCall.run] runs a body in the session's task group (it survives the end of the
turn and ``session/cancel``), and [`ToolCall.detach`][acp_agent.ToolCall.detach] lists it as background work.
``capabilities.cancel`` is advertised exactly while the tool call has a cancel path, and
cleared in the update that reports its end (R98-R100). A body pauses cooperatively: it
awaits [`ToolCall.checkpoint`][acp_agent.ToolCall.checkpoint] between steps, which waits while the tool call is
``paused``.

[`text_diff`][acp_agent.text_diff] builds a file change's ``diff`` content from the path and both texts
(the v2 change and its ``git_patch``, the texts kept for v1 clients, which show a diff only from them).

Patches are typed: [`ToolCallFields`][acp_agent.ToolCallFields] names every field a tool call update may carry,
so a misspelled keyword is a type error (mypy) and a `TypeError` at run time, never a
silent extra field on the wire.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol, TypedDict, Unpack

import anyio

from ._session.core import TOOL_CALL_CANCEL, SessionCore
from ._session.registry import Entity
from ._session.turns import StopReason
from ._util.processes import ExitStatus
from .questions import PermissionOutcome, request_permission
from .schema import (
    Content,
    ContentBlock,
    Diff,
    DiffPatch,
    DiffPathChange,
    PermissionOption,
    Terminal,
    TextContent,
    ToolCallCapabilities,
    ToolCallContent,
    ToolCallContentChunk,
    ToolCallLocation,
    ToolCallPermissionSubject,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UnknownToolCallContent,
)

__all__ = [
    "CANCEL_CAPABILITIES", "DIFF_TEXT_META", "Exits", "ToolCall", "ToolCallBody", "ToolCallExtras", "ToolCallFields",
    "check_fields", "patch_text", "text_diff",
]

DIFF_TEXT_META: Final = "acp-agent/text"
"""The ``_meta`` key of a diff change carrying ``oldText`` / ``newText`` (read by the v1 bridge)."""


def patch_text(path: str, old: str | None, new: str) -> str:
    """A ``git_patch`` of one file (absolute path, no ``a/``/``b/``), ``old=None`` for a new file."""
    before = (old or "").splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    lines = difflib.unified_diff(before, after, fromfile=path if old is not None else "/dev/null", tofile=path)
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return f"diff --git {path} {path}\n{body}"


def text_diff(path: str, old: str | None, new: str) -> Diff:
    """The ``diff`` content of a text file going from ``old`` (``None``: a new file) to ``new``.

    ``path`` is absolute. The content is the v2 change (``add`` or ``modify``) with a ``git_patch``; both
    texts ride along in the change's ``_meta`` so a v1 client is shown a real diff. Pass it in a tool
    call's ``content`` (or [`ToolCall.append`][acp_agent.ToolCall.append] it).
    """
    texts = {"oldText": old, "newText": new}
    change = DiffPathChange(operation="add" if old is None else "modify", path=path, file_type="text",
                            meta={DIFF_TEXT_META: texts})
    return Diff(changes=[change], patch=DiffPatch(format="git_patch", text=patch_text(path, old, new)))


logger = logging.getLogger(__name__)

ToolCallBody = Callable[["ToolCall"], Awaitable[Any]]
"""The work behind a tool call: ``async def body(tool) -> raw_output | None``."""

class Exits(Protocol):
    """Something whose end can be waited for by callback (a [`Terminal`][acp_agent.Terminal])."""

    def on_exit(self, callback: Callable[[ExitStatus], None]) -> None:
        """Call ``callback(status)`` in the step that reports the exit."""


CANCEL_CAPABILITIES: Final = TOOL_CALL_CANCEL
"""``capabilities`` offering ``tool_call/cancel``."""


class ToolCallExtras(TypedDict, total=False):
    """The fields of a tool call besides its title, kind, name and status (see
    [`ToolCallFields`][acp_agent.ToolCallFields])."""

    content: list[ToolCallContent] | None
    locations: list[ToolCallLocation] | None
    raw_input: Any
    raw_output: Any
    capabilities: ToolCallCapabilities | None
    meta: dict[str, Any] | None


class ToolCallFields(ToolCallExtras, total=False):
    """The fields of a tool call patch: pass only those that change (``None`` clears one)."""

    title: str | None
    kind: ToolKind | None
    name: str | None
    status: ToolCallStatus | None


_FIELD_NAMES: Final = frozenset(ToolCallFields.__optional_keys__)


def check_fields(fields: dict[str, Any]) -> None:
    """Raise `TypeError` for a keyword that is not a tool call field (nothing is sent)."""
    unknown = fields.keys() - _FIELD_NAMES
    if unknown:
        known = ", ".join(sorted(_FIELD_NAMES))
        raise TypeError(f"not a tool call field: {', '.join(sorted(unknown))} (fields: {known})")


class ToolCall:
    """A handle on one tool call of a session. Create it with
    [`Session.start_tool_call`][acp_agent.Session.start_tool_call]."""

    def __init__(self, core: SessionCore, entity: Entity) -> None:
        self._core = core
        self._entity = entity
        self._done = anyio.Event()
        self._resumed = anyio.Event()
        self._resumed.set()
        self._scope: anyio.CancelScope | None = None
        self._cancel_handler: Callable[[], Awaitable[None]] | None = None

    @property
    def id(self) -> str:
        """The ``toolCallId``."""
        return self._entity.id

    @property
    def status(self) -> str:
        """The status last sent to the client."""
        return self._entity.status

    @property
    def final(self) -> bool:
        """True once the tool call reached ``completed``, ``failed`` or ``cancelled``."""
        return self._entity.final

    @property
    def detached(self) -> bool:
        """True while the tool call is background work (listed unless its terminal is)."""
        return self._entity.detached

    @property
    def cancellable(self) -> bool:
        """True while the client may send ``tool_call/cancel`` for it."""
        return self._entity.cancel_advertised

    def __repr__(self) -> str:
        return f"ToolCall({self.id!r}, status={self.status!r})"

    # -- updates -------------------------------------------------------------------------

    async def update(self, **fields: Unpack[ToolCallFields]) -> None:
        """Patch the tool call: exactly the fields passed are sent (``None`` clears a field)."""
        check_fields(dict(fields))
        await self._core.update_tool_call(self._entity, fields)
        self._status_changed()

    def _status_changed(self) -> None:
        if self._entity.final:
            self._stop_work()
        elif self._entity.status == "paused":
            if self._resumed.is_set():
                self._resumed = anyio.Event()
        else:
            self._resumed.set()

    async def append(self, content: str | ContentBlock | ToolCallContent) -> None:
        """Append one content item (a string becomes text content)."""
        if isinstance(content, str):
            content = Content(content=TextContent(text=content))
        elif not isinstance(content, (Content, Diff, Terminal, UnknownToolCallContent)):
            content = Content(content=content)  # a bare content block
        await self._core.send(ToolCallContentChunk(tool_call_id=self.id, content=content))

    async def start(self, **fields: Unpack[ToolCallFields]) -> None:
        """Report ``in_progress`` (the work began)."""
        fields["status"] = "in_progress"
        await self.update(**fields)

    async def pause(self, **fields: Unpack[ToolCallFields]) -> None:
        """Report ``paused``: started, suspended until [`resume`][acp_agent.ToolCall.resume] (still listed if detached).

        A body running the work stops at its next [`checkpoint`][acp_agent.ToolCall.checkpoint] until
        [`resume`][acp_agent.ToolCall.resume].
        """
        fields["status"] = "paused"
        await self.update(**fields)

    async def resume(self, **fields: Unpack[ToolCallFields]) -> None:
        """Report ``in_progress`` again after [`pause`][acp_agent.ToolCall.pause] (and let
        [`checkpoint`][acp_agent.ToolCall.checkpoint] return)."""
        fields["status"] = "in_progress"
        await self.update(**fields)

    @property
    def paused(self) -> bool:
        """True while the status last sent is ``paused``."""
        return self._entity.status == "paused"

    async def checkpoint(self) -> None:
        """The cooperative pause point of a body: returns at once unless the tool call is paused,
        in which case it waits for [`resume`][acp_agent.ToolCall.resume] (or for the tool call to end, when the body's
        work is cancelled with it). Await it between steps so ``pause()`` really stops progress."""
        while not self._resumed.is_set():
            await self._resumed.wait()
        await anyio.lowlevel.checkpoint()

    async def complete(self, *, follow_up: Callable[[], Awaitable[StopReason | None]] | None = None,
                       **fields: Unpack[ToolCallFields]) -> None:
        """Report ``completed``.

        ``follow_up`` starts new foreground work in the same step: the snapshot that drops
        this tool call from the list already says ``running`` (R95).
        """
        await self._end("completed", follow_up, dict(fields))

    async def fail(self, **fields: Unpack[ToolCallFields]) -> None:
        """Report ``failed``."""
        await self._end("failed", None, dict(fields))

    async def cancel(self, **fields: Unpack[ToolCallFields]) -> None:
        """Report ``cancelled`` (the work was stopped or discarded)."""
        await self._end("cancelled", None, dict(fields))

    async def _end(self, status: str, follow_up: Callable[[], Awaitable[StopReason | None]] | None,
                   fields: dict[str, Any] | None = None) -> None:
        fields = fields or {}
        check_fields(fields)
        self._core.end_tool_call(self._entity, status, fields, follow_up=follow_up)
        self._stop_work()
        await self._core.sink.backpressure()

    def end_now(self, status: str, **fields: Any) -> None:
        """Send the final status at once, without waiting (for use inside ``session.batch()``)."""
        self._core.end_tool_call(self._entity, status, fields)
        self._stop_work()

    def _stop_work(self) -> None:
        if self._scope is not None:
            self._scope.cancel()  # the work behind a tool call ends with it
        self._resumed.set()
        self._done.set()

    def abandon(self, status: str = "cancelled") -> None:
        """End the tool call now with ``status`` and stop whatever work it runs."""
        if not self.final:
            self.end_now(status)

    def wake_up(self, delay: float, work: Callable[[], Awaitable[StopReason | None]], *,
                repeat: float | None = None, durable: dict[str, Any] | None = None) -> None:
        """Make this (``pending``, listed) tool call a wake-up timer (see
        [`Session.schedule`][acp_agent.Session.schedule]).

        After ``delay`` seconds it completes and ``work`` starts as new foreground work in the same
        step (R95); with ``repeat`` it starts ``work`` every ``repeat`` seconds instead and stays
        ``pending``. Cancelled (``tool_call/cancel``), it reports ``cancelled``. ``durable`` is the
        stored entry of a durable wake-up: kept in the session's record while the timer is pending
        (its ``due`` moved at each repeat), dropped when it fires for good, is cancelled or ends; the
        end of the session (close, shutdown) keeps it, to be re-armed when the session is loaded.
        """
        scope = self.own_scope()
        self._core.start_wakeup(self._entity, scope, delay, work, repeat=repeat, durable=durable, end=self._end)

    def own_scope(self) -> anyio.CancelScope:
        """A cancel scope for work that belongs to this tool call; it is its cancel path.

        The scope is cancelled by ``tool_call/cancel`` and when the tool call ends.
        """
        scope = self._new_scope()
        self._core.claim_work(self._entity, scope.cancel)  # max_listed_items
        self._scope = scope
        return scope

    def _new_scope(self) -> anyio.CancelScope:
        if self._scope is not None:
            raise RuntimeError(f"tool call {self.id} already has work")
        return anyio.CancelScope()

    async def wait(self) -> None:
        """Wait until the tool call reached a final status."""
        await self._done.wait()

    # -- background ------------------------------------------------------------------------

    def detach(self) -> None:
        """Make this tool call background work: listed until it ends (R85, R89), unless a
        listed terminal is all it runs (R88)."""
        self._core.set_detached(self._entity, True)

    async def set_cancel_handler(self, handler: Callable[[], Awaitable[None]] | None) -> None:
        """Offer ``tool_call/cancel`` with ``handler`` as the way to stop the work (or withdraw it).

        The handler runs in the session's task group once the client's cancel is accepted;
        if the tool call is still not final when it returns, it is reported ``cancelled``.
        """
        self._cancel_handler = handler
        self._entity.cancel = self._request_cancel if handler is not None else None
        if self.final:
            return
        want = handler is not None
        if want != self._entity.cancel_advertised:
            await self.update(capabilities=CANCEL_CAPABILITIES if want else None)

    def _request_cancel(self) -> None:
        if self._cancel_handler is not None:
            self._core.spawn(self._run_cancel_handler)
        elif self._scope is not None:
            self._scope.cancel()

    async def _run_cancel_handler(self) -> None:
        assert self._cancel_handler is not None
        try:
            await self._cancel_handler()
        except Exception:
            logger.exception("acp: cancel handler of tool call %s failed", self.id)
        if not self.final:
            await self.cancel()

    def run(self, body: ToolCallBody, *, detach: bool = True, cancellable: bool = True) -> None:
        """Run ``body(self)`` as this tool call's work, in the session's task group.

        The work survives the end of the turn and ``session/cancel``. It reports
        ``in_progress`` when it starts, ``completed`` (with the body's return value as
        ``rawOutput``) when it returns, ``failed`` if it raises and ``cancelled`` if a
        ``tool_call/cancel`` stops it. ``detach`` lists it as background work at once.
        """
        if self.final:
            raise RuntimeError(f"tool call {self.id} has ended")
        scope = self._new_scope()
        self._core.start_tool_call_work(self._entity, self._request_cancel if cancellable else None, detach=detach)
        self._scope = scope
        self._status_changed()
        self._core.spawn(self._run_body, body)

    async def _run_body(self, body: ToolCallBody) -> None:
        scope = self._scope
        assert scope is not None
        result: Any = None
        failed: BaseException | None = None
        with scope:
            try:
                result = await body(self)
            except Exception as exc:
                failed = exc
        if self.final or self._core.closing:
            return
        if scope.cancelled_caught or scope.cancel_called:
            await self.cancel()
        elif failed is not None:
            logger.warning("acp: tool call %s failed: %r", self.id, failed)
            await self.fail(raw_output={"error": str(failed)[:500]})
        else:
            await self.complete(**({"raw_output": result} if result is not None else {}))

    def finish_with(self, terminal: Exits) -> None:
        """End this tool call when ``terminal``'s process exits: ``completed`` on exit code 0,
        ``failed`` otherwise (``rawOutput`` holds the exit), in the same step as the exit.

        Until then the tool call stays live but is never listed next to its terminal: the
        terminal stands for the work (R88).
        """

        def on_exit(status: ExitStatus) -> None:
            if not self.final and not self._core.closing:
                output = {"exitCode": status.exit_code, "signal": status.signal}
                self.end_now("completed" if status.exit_code == 0 else "failed", raw_output=output)

        terminal.on_exit(on_exit)

    async def request_permission(
        self, title: str, options: Sequence[PermissionOption], *, description: str | None = None
    ) -> PermissionOutcome:
        """Ask the user on behalf of this tool call; the subject references it (R109).

        For a listed tool call the request does not change the foreground state (R61), is
        sent only after a snapshot listing it (R110), and survives ``session/cancel`` (R107).
        """
        subject = ToolCallPermissionSubject(tool_call=ToolCallUpdate(tool_call_id=self.id))
        return await request_permission(
            self._core, title, options, subject=subject, description=description, on_behalf_of=self._entity,
        )

