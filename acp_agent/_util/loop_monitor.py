"""Warn when agent code blocks the event loop.

Every session of a connection shares one event loop. A hook that calls ``time.sleep(3)``,
``requests.get(...)`` or a long computation without awaiting freezes all of them: other
sessions' prompts wait, and a ``session/cancel`` cannot take effect until it returns.
[`monitor_event_loop`][acp_agent.testing.monitor_event_loop] (or `watch_event_loop`, the same as a task) notices such a
stall and logs one warning on the ``acp_agent._util.loop_monitor`` logger naming the function that
blocked and for how long, much like asyncio's debug-mode slow-callback warning, but on
asyncio and trio alike and cheap enough to stay on::

    async with monitor_event_loop():  # or, in a task group: tg.start_soon(watch_event_loop)
        await serve(agent, receive, send)

How it works: a heartbeat task sleeps ``interval`` seconds in a loop and measures how late it
wakes. A daemon thread watches the heartbeat (sleeping while it cannot yet be overdue, then
every ``interval``); once it is ``threshold / 2`` old the thread samples the event-loop
thread's stack (``sys._current_frames()``). When the heartbeat wakes ``threshold`` seconds
late or more, the warning names the frame of the agent's own code seen most often in those
samples: the innermost frame of the blocked task that is not in the standard library, an
installed package or acp_agent (for an agent that is itself an installed package, the
outermost such frame of the task, i.e. its hook); with only library frames, the innermost
frame. The duration is exact within half an ``interval``. A loop still blocked after
``still_blocked_after`` seconds is reported once more, from the thread, so a hook that never
returns is not silent either. A pause of the whole process (SIGSTOP, a suspended VM) is not
reported: the samples show the loop waiting for events and its thread used no CPU.

Cost, measured idle on a 2-core machine (``time.process_time()`` over 5 s): with the default
threshold (0.5 s, interval 0.1 s) about 3 ms of CPU per second on asyncio and 4.5 ms on trio
(0.3-0.45 % of one core: ten heartbeats and four to ten thread checks a second), against
0.05-0.1 ms without the monitor; a threshold of 1 s halves that. A busy loop pays ten
heartbeats a second, which is lost in the noise.

Environment: ``ACP_AGENT_BLOCK_WARNING`` sets the threshold in seconds when the code gives
none (default 0.5); ``0`` or ``off`` turns the monitor off.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import sys
import sysconfig
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import Enum
from importlib.util import find_spec
from types import FrameType
from typing import Final, NamedTuple

import anyio
from anyio.abc import TaskStatus

from . import environment

__all__ = [
    "BLOCK_WARNING_ENV", "DEFAULT_THRESHOLD", "THREAD_NAME", "BlockReport", "Frame", "log_block",
    "monitor_event_loop", "watch_event_loop",
]

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD: Final = 0.5
"""Seconds the event loop may be blocked before a warning (a delay a person notices)."""
BLOCK_WARNING_ENV: Final = environment.BLOCK_WARNING.name
"""Environment variable: the threshold in seconds, or ``0`` / ``off`` to turn the monitor off."""
THREAD_NAME: Final = "acp-loop-monitor"
"""Name of the monitor's daemon thread."""

_MAX_DEPTH: Final = 256
_MAX_SAMPLES: Final = 64
_JOIN_TIMEOUT: Final = 1.0
_BUSY: Final = 0.25
"""Share of a stretch of time a thread must have computed to count as running, not paused (low: on a
loaded machine a thread that keeps the GIL gets only part of a core)."""
_ADVICE: Final = "run blocking code with `await anyio.to_thread.run_sync(...)`"


class Frame(NamedTuple):
    """One frame of a sampled stack: function (qualified name), file and line."""

    function: str
    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.function} ({_display_path(self.filename)}:{self.lineno})"


@dataclass(frozen=True, slots=True)
class BlockReport:
    """One episode of a blocked event loop, as given to ``on_block``."""

    duration: float
    """Seconds the loop did not run (within half an ``interval``)."""
    location: Frame | None
    """The frame to blame (see the module docs); ``None`` if no stack could be sampled."""
    innermost: Frame | None = None
    """The innermost frame of the same sample (where the call actually waited or computed)."""
    elsewhere: tuple[Frame, ...] = ()
    """Other places blamed by some samples of the same episode, most frequent first."""
    stack: tuple[Frame, ...] = ()
    """The blocked task's stack in that sample, outermost first."""
    samples: int = 0
    """How many stack samples the episode got."""


def log_block(report: BlockReport) -> None:
    """The default ``on_block``: one warning on ``acp_agent._util.loop_monitor`` (the stack at DEBUG)."""
    logger.warning("acp: the event loop was blocked for %.1f s %s: every session of this connection waited "
                   "meanwhile, cancellation included; %s", report.duration, _describe(report), _ADVICE,
                   extra={"block_report": report})
    if report.stack and logger.isEnabledFor(logging.DEBUG):
        logger.debug("acp: stack of the blocked event loop, outermost first:\n%s", _format_stack(report.stack))


@asynccontextmanager
async def monitor_event_loop(
    threshold: float | None = None,
    *,
    interval: float | None = None,
    still_blocked_after: float | None = None,
    on_block: Callable[[BlockReport], object] | None = None,
) -> AsyncIterator[None]:
    """Watch the running event loop for blocking calls while the block runs.

    ``threshold``: seconds of blocking worth a warning (``None``: ``ACP_AGENT_BLOCK_WARNING``,
    else 0.5; ``0`` turns the monitor off). ``interval``: heartbeat and check period (default
    ``threshold / 5``, at most ``threshold / 4``). ``still_blocked_after``: when a loop still
    blocked is reported from the thread (default ``max(5, 10 * threshold)``; ``math.inf``:
    never). ``on_block`` receives each `BlockReport` in the event loop (default
    `log_block`); what it raises is logged. Exceptions of the block pass through as
    they are (never wrapped in an ``ExceptionGroup``).
    """
    monitor = _Monitor.create(threshold, interval, still_blocked_after, on_block)
    if monitor is None:
        yield
        return
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(monitor.run)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        error = group.exceptions[0]  # the block's own exception: the monitor task never raises
        context = error.__context__
        try:
            raise error  # re-raised as it was, its context restored below
        finally:
            error.__context__ = context
            del error, group


async def watch_event_loop(
    threshold: float | None = None,
    *,
    interval: float | None = None,
    still_blocked_after: float | None = None,
    on_block: Callable[[BlockReport], object] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Watch the running event loop until cancelled: the task form of
    [`monitor_event_loop`][acp_agent.testing.monitor_event_loop].

    Start it in a task group that is cancelled when serving ends
    (``tg.start_soon(watch_event_loop)``); it returns at once if the monitor is turned off.
    Arguments as for [`monitor_event_loop`][acp_agent.testing.monitor_event_loop].
    """
    monitor = _Monitor.create(threshold, interval, still_blocked_after, on_block)
    if monitor is None:
        task_status.started()
        return
    await monitor.run(task_status=task_status)


def _resolve_threshold(threshold: float | None) -> float | None:
    """The threshold in seconds, or ``None`` when the monitor is off."""
    if threshold is None:
        return environment.read(environment.BLOCK_WARNING)
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError("threshold must be a finite number of seconds >= 0")
    return threshold or None


class _Sample(NamedTuple):
    location: Frame
    innermost: Frame
    stack: tuple[Frame, ...]


class _Monitor:
    """A heartbeat task in the loop and a thread that samples the loop's stack when it is late."""

    def __init__(self, threshold: float, interval: float, still_blocked_after: float,
                 on_block: Callable[[BlockReport], object]) -> None:
        self._threshold = threshold
        self._interval = interval
        self._sample_after = threshold / 2  # at least two intervals: a normal beat is never this late
        self._still_blocked_after = still_blocked_after
        self._on_block = on_block
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        self._beat_cpu = time.thread_time()
        self._reported = math.nan  # the beat whose lateness was judged already
        self._stop = threading.Event()
        self._lock = threading.Lock()  # guards the episode fields below, shared with the thread
        self._episode = math.nan  # the beat the samples belong to
        self._samples: list[_Sample] = []
        self._told_still_blocked = False
        self._paused = math.nan  # a beat during which the whole process was paused

    @classmethod
    def create(cls, threshold: float | None, interval: float | None, still_blocked_after: float | None,
               on_block: Callable[[BlockReport], object] | None) -> _Monitor | None:
        """Validate the arguments; ``None`` when the monitor is off."""
        limit = _resolve_threshold(threshold)
        if limit is None:
            return None
        period = limit / 5 if interval is None else interval
        if not (0 < period <= limit / 4):  # so the thread samples a blocked loop at least once
            raise ValueError("interval must be > 0 and at most threshold / 4")
        later = max(5.0, 10 * limit) if still_blocked_after is None else still_blocked_after
        if not later >= limit:
            raise ValueError("still_blocked_after must be >= threshold")
        return cls(limit, period, later, on_block or log_block)

    # -- in the event loop --------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Beat until cancelled, then stop and join the thread."""
        thread = threading.Thread(target=self._watch, name=THREAD_NAME, daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread can be started: serve without the monitor
            logger.warning("acp: cannot start the event-loop monitor thread", exc_info=True)
            task_status.started()
            return
        try:
            task_status.started()
            while True:
                self._beat_cpu = time.thread_time()
                self._beat = time.monotonic()
                await anyio.sleep(self._interval)
                self._end_beat()
        finally:
            self._end_beat()  # a block just before the monitor stops is reported too
            self._stop.set()
            thread.join(_JOIN_TIMEOUT)
            if thread.is_alive():
                logger.debug("acp: the event-loop monitor thread did not stop within %.1f s", _JOIN_TIMEOUT)

    def _end_beat(self) -> None:
        """Judge how late the heartbeat woke; report the episode if it was long enough."""
        try:
            beat = self._beat
            # The block began within the interval before the beat was due: count half of it.
            late = time.monotonic() - beat - self._interval / 2
            if late < self._threshold or beat == self._reported:
                return
            self._reported = beat
            cpu = time.thread_time() - self._beat_cpu
            with self._lock:
                samples = list(self._samples) if self._episode == beat else []
                paused = self._paused == beat
            if paused:
                logger.debug("acp: the event loop resumed %.1f s late after the process was paused", late)
                return
            report = self._judge(late, cpu, samples)
            if report is not None:
                self._on_block(report)
        except Exception:
            logger.exception("acp: the event-loop monitor failed to report a blocked loop")

    def _judge(self, late: float, cpu: float, samples: list[_Sample]) -> BlockReport | None:
        if samples:
            ranked = [location for location, _ in Counter(s.location for s in samples).most_common()]
            first = next(s for s in samples if s.location == ranked[0])
            return BlockReport(late, first.location, first.innermost, tuple(ranked[1:3]), first.stack,
                               len(samples))
        if cpu >= late * _BUSY:  # busy in a call that kept the GIL, so the thread could not sample it
            return BlockReport(late, None)
        logger.debug("acp: the event loop resumed %.1f s late without having run code "
                     "(the process was paused or the machine overloaded)", late)
        return None

    # -- in the monitor thread ----------------------------------------------------------

    def _watch(self) -> None:
        wait = self._interval
        while True:
            due, cpu = time.monotonic() + wait, time.process_time()
            if self._stop.wait(wait):
                return
            try:
                late = time.monotonic() - due
                if late >= self._threshold / 2 and time.process_time() - cpu < late * _BUSY:
                    # This thread overslept while the process hardly ran: the whole process was
                    # paused (SIGSTOP, a suspended VM), so the loop's lateness is nobody's fault.
                    with self._lock:
                        self._paused = self._beat
                wait = self._check()
            except Exception:  # never let the thread die over a report
                logger.debug("acp: event-loop monitor check failed", exc_info=True)
                wait = self._interval

    def _check(self) -> float:
        """Sample the loop if the heartbeat is overdue; return how long to wait until the next check."""
        beat = self._beat
        age = time.monotonic() - beat
        if age < self._sample_after:  # cannot be overdue before then: sleep until it could
            return max(self._interval, self._sample_after - age)
        full = self._episode == beat and len(self._samples) >= _MAX_SAMPLES
        sample = None if full else _sample_stack(self._loop_thread)
        report: BlockReport | None = None
        with self._lock:
            if self._episode != beat:
                self._episode, self._samples, self._told_still_blocked = beat, [], False
            if sample is not None:
                self._samples.append(sample)
            tell = (age >= self._still_blocked_after and not self._told_still_blocked and bool(self._samples)
                    and self._paused != beat)
            if tell:
                self._told_still_blocked = True
                report = self._judge(age, 0.0, list(self._samples))
        if report is not None:
            logger.warning("acp: the event loop has been blocked for %.1f s so far %s: every session of this "
                           "connection is frozen until it returns; %s", age, _describe(report), _ADVICE,
                           extra={"block_report": report})
        return self._interval


# -- stacks ---------------------------------------------------------------------------


class _Kind(Enum):
    OWN = "own"  # the agent author's code
    INSTALLED = "installed"  # an installed package (maybe the agent itself)
    FRAMEWORK = "framework"  # acp_agent and the async libraries under it
    STDLIB = "stdlib"


def _package_dir(name: str) -> str | None:
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(os.path.abspath(next(iter(spec.submodule_search_locations))), "")


_FRAMEWORK_DIRS: Final = tuple(
    d for d in [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ""),  # acp_agent/
                *map(_package_dir, ("anyio", "sniffio", "trio", "outcome", "exceptiongroup"))]
    if d is not None
)
_STDLIB_DIRS: Final = tuple({
    os.path.join(os.path.abspath(p), "")
    for p in (sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib"),
              os.path.dirname(os.__file__))
    if p
})
_kinds: dict[str, _Kind] = {}


def _kind(filename: str) -> _Kind:
    kind = _kinds.get(filename)
    if kind is None:
        kind = _classify(filename)
        if len(_kinds) < 4096:
            _kinds[filename] = kind
    return kind


def _classify(filename: str) -> _Kind:
    if filename.startswith(("<frozen ", "<string>")):  # the import system; code made by exec (dataclasses)
        return _Kind.STDLIB
    if filename.startswith("<"):  # <stdin>, a notebook cell
        return _Kind.OWN
    path = os.path.abspath(filename)
    if path.startswith(_FRAMEWORK_DIRS):
        return _Kind.FRAMEWORK
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:  # before stdlib: a venv's lib holds both
        return _Kind.INSTALLED
    if path.startswith(_STDLIB_DIRS):
        return _Kind.STDLIB
    return _Kind.OWN


def _is_waiting_for_events(stack: Sequence[Frame]) -> bool:
    """Whether the loop's own iteration waits for I/O here (innermost first): the loop is idle.

    The caller must be the loop itself: a hook that waits in ``selectors`` (``subprocess.run``
    with ``capture_output``) blocks the loop. A loop written in C (uvloop) runs no Python code while
    it waits: the innermost frame is the one that called its ``run_until_complete``.
    """
    if stack and stack[0].filename.replace(os.sep, "/").endswith("/asyncio/runners.py"):
        return True
    if len(stack) < 2:
        return False
    wait, caller = (frame.filename.replace(os.sep, "/") for frame in stack[:2])
    if wait.endswith("/selectors.py"):  # asyncio's selector loops
        return caller.endswith("/asyncio/base_events.py") and stack[1].function.endswith("._run_once")
    return "/trio/_core/_io_" in wait and caller.endswith("/trio/_core/_run.py")


def _sample_stack(thread_id: int) -> _Sample | None:
    """Where the given thread is now (``None``: gone, or idle in the event loop's wait)."""
    frame: FrameType | None = sys._current_frames().get(thread_id)
    stack: list[Frame] = []  # innermost first
    root = -1  # index of the outermost coroutine frame: the blocked task's first frame
    try:
        while frame is not None and len(stack) < _MAX_DEPTH:
            code = frame.f_code
            if code.co_flags & inspect.CO_COROUTINE:
                root = len(stack)
            stack.append(Frame(code.co_qualname, code.co_filename, frame.f_lineno or 0))
            frame = frame.f_back
    finally:
        del frame
    if not stack or _is_waiting_for_events(stack):
        return None
    task = stack if root < 0 else stack[: root + 1]
    return _Sample(_blame(task), stack[0], tuple(reversed(task)))


def _blame(task: Sequence[Frame]) -> Frame:
    """The frame to name, from a task's stack (innermost first): see the module docs."""
    for frame in task:
        if _kind(frame.filename) is _Kind.OWN:
            return frame
    for frame in reversed(task):
        if _kind(frame.filename) is _Kind.INSTALLED:
            return frame
    return task[0]


def _describe(report: BlockReport) -> str:
    if report.location is None:
        return "in a call that kept the interpreter lock (no stack could be sampled)"
    text = f"in {report.location}"
    if report.innermost is not None and report.innermost != report.location:
        text += f" [innermost: {report.innermost}]"
    if report.elsewhere:
        text += " (also seen in " + ", ".join(map(str, report.elsewhere)) + ")"
    return text


def _format_stack(stack: Sequence[Frame]) -> str:
    return "\n".join(f"  {frame}" for frame in stack)


def _display_path(filename: str) -> str:
    """``filename`` relative to the working directory when it is under it."""
    try:
        cwd = os.path.join(os.getcwd(), "")
    except OSError:
        return filename
    return filename[len(cwd):] if filename.startswith(cwd) else filename
