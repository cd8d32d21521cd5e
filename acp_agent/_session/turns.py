"""Foreground work of one session: the job queue and the turn lifecycle.

Foreground work (an inserted prompt, or work the agent starts itself) runs one job at a
time in the session's worker task, so the ``running`` … ``idle`` bracket, ``requires_action``
while the work waits on the user, and the ``cancelled`` / ``error`` endings are decided here
and nowhere else. Prompts are inserted in arrival order (R56): answered with their
``messageId``, then echoed as ``user_message``, then reported ``running`` (R52, R53).
When a job ends, whatever it left unfinished is finalized before its ``idle`` (R68).

What the client sees when a hook raises: a [`RequestError`][acp_agent.RequestError] keeps its
code, message and data; any other exception becomes ``-32603`` "Internal error" (its text
may hold paths, tokens or user data), and its traceback is logged on stderr.

A turn whose save failed (a full disk: the store logs the cause with the file's path) never ends with an
``idle`` that reads as saved: it ends ``error`` with `unsaved_error`, whatever it would have ended with, except a
cancelled turn, which ends ``cancelled`` as a cancellation always does (R69; the log tells). The turn stays in
memory and is written by the session's next save that succeeds.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from .._util.ids import new_id
from .._util.telemetry import Recorder, Span
from ..errors import ErrorCode, RequestError, SessionClosedError
from ..schema import ContentBlock, Error, Usage, UserMessage
from ..schema.state import STOP_REASONS, StopReason
from .sink import SessionSink
from .snapshots import StatePublisher

if TYPE_CHECKING:
    from .keys import PromptKeys

__all__ = ["FOREGROUND", "NOT_SAVED", "STOP_REASONS", "ForegroundJob", "Signal", "StopReason", "Turns", "unsaved_error"]

logger = logging.getLogger(__name__)


FOREGROUND: Final[contextvars.ContextVar[Turns | None]] = contextvars.ContextVar("acp_foreground", default=None)
"""The `Turns` whose foreground work the current task is running, if any."""

Work = Callable[[], Awaitable["StopReason | None"]]


class Signal:
    """A one-shot flag to wait on; its event is made only if someone has to wait (most never do)."""

    __slots__ = ("_event", "_set")

    def __init__(self, raised: bool = False) -> None:
        self._set = raised
        self._event: anyio.Event | None = None

    def set(self) -> None:
        """Raise the flag and wake the waiters."""
        self._set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        """Whether the flag is raised."""
        return self._set

    async def wait(self) -> None:
        """Wait until the flag is raised (at once, with no checkpoint, if it is)."""
        if not self._set:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


@dataclass(slots=True, eq=False)
class ForegroundJob:
    """One unit of foreground work (a held prompt or agent-initiated work) waiting for the worker."""

    run: Work | None = None
    prompt: list[ContentBlock] | None = None
    meta: dict[str, Any] | None = None  # the prompt request's _meta
    inserted: Signal = field(default_factory=Signal)
    answered: Signal = field(default_factory=Signal)
    rejected: RequestError | None = None
    cancelled: bool = False  # session/cancel arrived after insertion, before the worker started it
    message_id: str | None = None  # set at insertion: the prompt's messageId (its user_message goes after the answer)
    echo_line: bytes = b""  # the user_message's framed line
    key: str | None = None  # the prompt's idempotencyKey, if it has one
    digest: str = ""  # the prompt's digest (with a key)
    trace: object = None  # telemetry's context where the job was queued (Telemetry.capture), when telemetry is on


class Turns:
    """The foreground job queue and worker of one session."""

    def __init__(
        self,
        session_id: str,
        state: StatePublisher,
        sink: SessionSink,
        *,
        end_items: Callable[[StopReason], Awaitable[bool]],
        end_now: Callable[[StopReason], bool] | None = None,
        touched: Callable[[], None],
    ) -> None:
        self._session_id = session_id
        self._state = state
        self._sink = sink
        self.run_prompt: Callable[[list[ContentBlock]], Awaitable[StopReason | None]] | None = None
        """Runs one inserted prompt (the agent's ``prompt`` hook, bound to the session)."""
        self._end_items = end_items  # ends a job's items and saves it: whether the save landed
        self._end_now = end_now  # ends a job at once when it can (True), else end_items is awaited
        self._touched = touched
        self._jobs: deque[ForegroundJob] = deque()
        # Made by the worker when it runs out of jobs, set (and dropped) by the next enqueue: the event is
        # made after a turn's end, not on its way from the request to the worker.
        self._job_ready: anyio.Event | None = None
        # The backend's CancelScope class, once run() runs: anyio.CancelScope() looks the backend up at every call.
        self._scope: Callable[..., anyio.CancelScope] = anyio.CancelScope
        self.scope: anyio.CancelScope | None = None
        """The cancel scope of the foreground work running now."""
        # Flags, not events: renewed at every job, and rarely waited on (closing, wind-down).
        self._done = Signal(True)
        self.active = False
        """True while a job is between its start and its ``idle``."""
        self._cancelled_late = False  # session/cancel arrived while that job was finishing up
        self._idle = Signal(True)
        self.blocked = 0
        """Foreground requests to the user in flight (``requires_action`` while > 0)."""
        self.refusing: str | None = None
        """Why new work is refused (``"closing"`` or ``"winding_down"``), or ``None``."""
        self.tg: TaskGroup | None = None
        self.last_stop: StopReason | None = None
        """How the last finished job ended."""
        self.last_error: Error | None = None
        """The error the last finished job ended with, if any."""
        self.prompt_meta: dict[str, Any] | None = None
        """The ``_meta`` of the prompt the running job handles (``None`` for agent-initiated work)."""
        self.usage: Usage | None = None
        """Usage the running job reported for itself, sent on the idle that ends it."""
        self.last_start = 0
        """History length when the last job started (what it said comes after)."""
        self.keys: PromptKeys[ForegroundJob] | None = None
        """The session's idempotency keys (told when a keyed prompt is inserted or withdrawn)."""
        self.telemetry: Recorder | None = None
        """Where each job's span is reported (``None``: nowhere)."""
        self.child = False
        """Whether this is a subagent's session (its work is a child span of the parent's)."""
        self.trace_id = ""
        """The trace id of the running or last job, when telemetry records it."""

    # -- queries ---------------------------------------------------------------------------

    def in_foreground(self) -> bool:
        """Whether the calling task runs this session's foreground work."""
        return FOREGROUND.get() is self

    @property
    def quiet(self) -> bool:
        """No foreground work runs or waits."""
        return self._state.foreground == "idle" and not self._jobs

    async def wait_idle(self) -> None:
        """Wait until no foreground work runs or waits."""
        while not self.quiet:
            await _wait(self._idle)

    async def wait_done(self) -> None:
        """Wait until the running job (if any) has reported its ``idle``."""
        await _wait(self._done)

    async def wait_drained(self) -> None:
        """Wait until no job is active or queued."""
        while self.active or self._jobs:
            await _wait(self._done)
            await anyio.sleep(0)

    # -- state -----------------------------------------------------------------------------

    def set_state(self, state: Literal["idle", "running"], stop: StopReason | None = None,
                  error: Error | None = None, usage: Usage | None = None) -> None:
        """Report a transition that may change whether the session is quiet."""
        self._state.set(state, stop, error, usage)
        self._update_idle()

    def _update_idle(self) -> None:
        quiet = self.quiet
        if quiet and not self._idle.is_set():
            self._idle.set()
        elif not quiet and self._idle.is_set():
            self._idle = Signal()

    # -- queueing --------------------------------------------------------------------------

    def start(self, work: Work) -> None:
        """Queue agent-initiated foreground work; ``running`` is reported now if the session was idle.

        Reporting at once keeps the wire right wherever this is called from: in the step that
        ends background work (an exit callback, ``tool.complete(follow_up=...)``) the snapshot
        that drops the item already says ``running`` (R95).
        """
        if self.refusing is not None:
            raise SessionClosedError(f"session {self._session_id} is closed")
        job = ForegroundJob(run=work)
        if self.telemetry is not None:
            job.trace = self.telemetry.capture()
        self._enqueue(job)
        if self._state.foreground == "idle":
            self.set_state("running")

    def enqueue_prompt(self, prompt: list[ContentBlock], meta: dict[str, Any] | None = None) -> ForegroundJob:
        """Hold a prompt until the worker inserts it (arrival order, R56)."""
        if self.refusing == "closing":
            raise RequestError.session_not_found(self._session_id)
        if self.refusing is not None:
            raise RequestError.request_cancelled("the connection is shutting down")
        job = ForegroundJob(prompt=prompt, meta=meta)
        if self.telemetry is not None:
            job.trace = self.telemetry.capture()
        if self._state.foreground == "idle" and not self._jobs and not self.active and self.tg is not None:
            self._assign(job)  # nothing runs before it: inserted now, so it can be answered at once
        self._enqueue(job)
        return job

    def _enqueue(self, job: ForegroundJob) -> None:
        self._jobs.append(job)
        ready = self._job_ready
        if ready is not None:
            self._job_ready = None
            ready.set()
        self._update_idle()

    def withdraw(self, job: ForegroundJob, error: RequestError | None = None) -> bool:
        """Take a held prompt back before insertion; returns False if it was already inserted."""
        if job.message_id is not None:
            return False
        with contextlib.suppress(ValueError):
            self._jobs.remove(job)
        self._update_idle()
        job.rejected = error or RequestError.request_cancelled()
        if job.key is not None and self.keys is not None:
            self.keys.dropped(job)
        job.inserted.set()
        return True

    def cancel(self) -> None:
        """``session/cancel``: answer held prompts ``-32800`` and cancel the foreground work."""
        for job in list(self._jobs):
            if job.prompt is not None:
                self.withdraw(job)
        # Inserted prompts (already answered with their id) still get their echo and end
        # cancelled; queued agent-initiated work has not started and is dropped.
        inserted = [job for job in self._jobs if job.message_id is not None]
        dropped = len(inserted) != len(self._jobs)
        for job in inserted:
            job.cancelled = True
        self._jobs = deque(inserted)
        self._update_idle()
        if self.scope is not None:
            self.scope.cancel()
        elif self.active:
            self._cancelled_late = True  # the job is finishing up: it ends as cancelled (R68)
        elif dropped and self._state.foreground != "idle":
            # Follow-up work already reported `running` but never started: it ends here.
            self.set_state("idle", "cancelled")

    # -- the worker ------------------------------------------------------------------------

    async def run(self, task_group: TaskGroup) -> None:
        """The session's worker: runs queued foreground jobs one at a time until cancelled."""
        self.tg = task_group
        # Made once: anyio.Event() looks the backend up at every call, and every job renews events.
        new_event = type(anyio.Event())
        self._scope = type(anyio.CancelScope())
        while True:
            while not self._jobs:
                ready = self._job_ready = new_event()
                await ready.wait()
            await self._run_job(self._jobs.popleft())

    async def _run_job(self, job: ForegroundJob) -> None:
        self.active = True
        self._cancelled_late = False
        self._done = Signal()
        self.last_start = len(self._sink.history)
        self.prompt_meta, self.usage = job.meta, None
        scope = self.scope = self._scope()
        span = None
        if self.telemetry is not None:
            span = self.telemetry.turn(self._session_id, job.trace, prompt=job.prompt is not None, child=self.child)
            self.trace_id = span.trace_id
        token = FOREGROUND.set(self)
        stop: StopReason | None = None
        error: Error | None = None
        try:
            if job.prompt is not None:
                if job.message_id is not None and job.answered.is_set():
                    self._sink.resend_line(job.echo_line)  # inserted and answered already: no wait
                else:
                    await self._insert(job)
            if self._state.foreground != "running":
                self.set_state("running")
            with scope:
                try:
                    if job.cancelled:
                        stop = "cancelled"
                    elif job.prompt is not None and self.run_prompt is not None:
                        stop = await self.run_prompt(job.prompt)
                    elif job.run is not None:
                        stop = await job.run()
                except Exception as exc:
                    if scope.cancel_called:
                        stop = "cancelled"  # R69: aborting is a cancellation, never an error
                    else:
                        stop, error = "error", _turn_error(exc, self._session_id)
            if scope.cancel_called:
                stop = "cancelled"
            stop = _checked_stop_reason(stop)
        except BaseException:
            stop = "cancelled"  # the session itself is being torn down
            raise
        finally:
            FOREGROUND.reset(token)
            self.scope = None
            self.blocked = 0
            ending = stop or "cancelled"
            saved = True
            if self._end_now is None or not self._end_now(ending):
                with self._scope(shield=True):  # ending items and the save are never cut short
                    saved = await self._end_items(ending)
            if self._cancelled_late:
                stop, error = "cancelled", None
            if not saved and stop != "cancelled":  # the client learns the turn is not kept (a cancellation
                stop, error = "error", unsaved_error(self._session_id)  # stays cancelled: R69)
            self.last_stop, self.last_error = stop or "end_turn", error
            self.set_state("idle", self.last_stop, error, self.usage)
            self._sink.flush()  # the client sees the turn end now, not one event-loop pass later
            if span is not None:
                _end_turn_span(span, self.last_stop, error, self.usage)
            self.prompt_meta, self.usage = None, None
            self.active = False
            self._done.set()

    def _assign(self, job: ForegroundJob) -> None:
        """Insert a prompt: give it its id and record it (the echo goes out after the answer)."""
        assert job.prompt is not None
        self._touched()
        message_id = job.message_id = new_id("msg_user")
        line = self._sink.record_plain(UserMessage, message_id, job.prompt)  # a text prompt: no model to build
        job.echo_line = line or self._sink.record(UserMessage(message_id=message_id, content=job.prompt))
        if job.key is not None and self.keys is not None:
            self.keys.inserted(job)
        job.inserted.set()

    async def _insert(self, job: ForegroundJob) -> None:
        """Insert a held prompt if not yet done, let its request answer, then echo it (R52, R53)."""
        if job.message_id is None:
            self._assign(job)
        # The request answers the moment its handler returns; waiting for that keeps the
        # wire order fixed: answer, user_message, running.
        if not job.answered.is_set():
            with anyio.CancelScope(shield=True):
                await job.answered.wait()
        self._sink.resend_line(job.echo_line)

    def finish_now(self) -> None:
        """The shutdown deadline passed: report ``idle`` / ``cancelled`` for work that ignored its cancel."""
        if self.active and self._state.foreground != "idle":
            logger.warning("acp: foreground work of session %s ignored its cancellation", self._session_id)
            self.set_state("idle", "cancelled")


async def _wait(flag: Signal) -> None:
    """Wait for ``flag``, with a checkpoint even if it is raised (as ``anyio.Event.wait`` has)."""
    if flag.is_set():
        await anyio.lowlevel.checkpoint()
    else:
        await flag.wait()


def _checked_stop_reason(stop: Any) -> StopReason | None:
    """A hook's return value as a stop reason: known values and ``_custom`` ones (R84) only."""
    if stop is None or (isinstance(stop, str) and (stop in STOP_REASONS or stop.startswith("_"))):
        return stop
    logger.warning("acp: %r is not a stop reason (known values or _custom); reporting end_turn", stop)
    return "end_turn"


NOT_SAVED: Final = ("The session could not be saved: this turn is kept in the agent's memory only, until a later "
                   "save succeeds")
"""The message of the ``error`` that ends a turn whose save failed (a full disk, a database out of reach)."""


def _end_turn_span(span: Span, stop: StopReason | None, error: Error | None, usage: Usage | None) -> None:
    tokens = {"gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens
              } if usage is not None else {}
    span.end(str(error.code) if error is not None else None, **{"acp.stop_reason": stop}, **tokens)


def unsaved_error(session_id: str) -> Error:
    """The ``error`` of a turn's ``idle`` when its save failed: ``-32603`` with `NOT_SAVED` (the cause, with
    the file's path, is in the agent's log, never sent to the client)."""
    return Error(code=ErrorCode.INTERNAL_ERROR, message=NOT_SAVED, data={"sessionId": session_id, "saved": False})


def _turn_error(exc: Exception, session_id: str) -> Error:
    """What the client sees of an exception that ended a turn (see the module docstring)."""
    if isinstance(exc, RequestError):
        logger.info("acp: foreground work of session %s ended with %r", session_id, exc)
        fields: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            fields["data"] = exc.data
        return Error(**fields)
    logger.exception("acp: foreground work of session %s failed", session_id)
    return Error(code=ErrorCode.INTERNAL_ERROR, message="Internal error")
