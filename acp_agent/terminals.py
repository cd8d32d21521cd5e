"""Agent-owned terminals backed by real processes.

`start_terminal` (behind [`Session.start_terminal`][acp_agent.Session.start_terminal]) starts the process in its own
process group first, so a process that cannot start is known before anything is sent
([`ProcessStartError`][acp_agent.ProcessStartError]); then it announces the terminal (``command``,
``cwd`` and ``capabilities.cancel``), streams its output as base64 ``terminal_output_chunk``
updates (coalesced, never dropped, with back-pressure on the pipe), and reports
``exitStatus`` after the last byte of output, exactly once. While foreground work awaits the
process it is not listed; [`Terminal.detach`][acp_agent.Terminal.detach] (or ``detach=True``) makes it background
work, listed until it exits (R85, R88, R96).

``terminal/cancel`` stops the process group (SIGTERM, then SIGKILL after a grace period);
the terminal and its output are kept, and no tool call changes because of it (R103, R105).
"""

from __future__ import annotations

import inspect
import logging
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypedDict, Unpack

import anyio

from ._session.core import SessionCore
from ._session.registry import Entity
from ._util.processes import (
    DEFAULT_FLUSH_BYTES,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_TERMINATE_GRACE,
    ExitStatus,
    ManagedProcess,
)
from .errors import ProcessStartError, SessionClosedError, ToolCallStateError
from .questions import PermissionOutcome, request_permission
from .schema import (
    CommandPermissionSubject,
    PermissionOption,
    TerminalCancelCapabilities,
    TerminalCapabilities,
    TerminalExitStatus,
    TerminalSize,
    TerminalUpdate,
)
from .tool_calls import ToolCall

__all__ = ["CANCEL_CAPABILITIES", "DEFAULT_GRACE", "ExitStatus", "Terminal", "TerminalOptions", "command_text",
           "start_terminal"]

logger = logging.getLogger(__name__)

CANCEL_CAPABILITIES: Final = TerminalCapabilities(cancel=TerminalCancelCapabilities())
"""``capabilities`` offering ``terminal/cancel``."""
DEFAULT_GRACE: Final = DEFAULT_TERMINATE_GRACE
"""Seconds between SIGTERM and SIGKILL when a terminal is cancelled."""


class TerminalOptions(TypedDict, total=False):
    """The keyword options of [`Session.start_terminal`][acp_agent.Session.start_terminal], each optional (its
    default in brackets); a misspelled one is a type error (mypy) and a `TypeError` at run time."""

    cwd: str | None
    """The process's working directory, absolute (R34) [the session's]."""
    env: Mapping[str, str] | None
    """Variables added to the environment the process inherits [none]."""
    tool_call: ToolCall | None
    """The tool call whose content shows the terminal [none]."""
    ends_tool_call: bool
    """End ``tool_call`` when the process exits (``completed`` on exit code 0, else ``failed``) [``False``]."""
    detach: bool | None
    """``True``: background work at once; ``False``: owned by foreground work [as the caller's work is]."""
    cancellable: bool
    """Offer ``terminal/cancel`` [``True``]."""
    grace: float
    """Seconds between SIGTERM and SIGKILL when cancelled [3]."""
    size: tuple[int, int] | None
    """The terminal size announced, ``(cols, rows)`` [none]."""
    tail_limit: int | None
    """Bytes of output retained for replay [``limits.terminal_output_bytes``]."""
    flush_bytes: int
    """Output is sent once this many bytes are waiting [64 KiB]..."""
    flush_interval: float
    """... or once the oldest waiting byte is this many seconds old [0.02]."""


class Terminal:
    """A handle on one process-backed terminal. Create it with
    [`Session.start_terminal`][acp_agent.Session.start_terminal]."""

    def __init__(self, core: SessionCore, entity: Entity, command: str, cwd: str, grace: float,
                 tail_limit: int) -> None:
        self._core = core
        self._entity = entity
        self.command = command
        """The command line as shown to the client."""
        self.cwd = cwd
        """The process's working directory."""
        self.grace = grace
        """Seconds between SIGTERM and SIGKILL when the terminal is cancelled."""
        self.process: ManagedProcess | None = None
        """The running process (``None`` until it started)."""
        self.tail_limit = tail_limit
        """Bytes of output retained for replay."""
        self.tool_call_id: str | None = None
        """The tool call whose content shows this terminal, if any."""
        self._announced = anyio.Event()  # output and the exit wait for the announcement
        self._live = False  # announced; False for a process started but never announced
        self._exited = anyio.Event()
        self._exit: ExitStatus | None = None
        self._exit_callbacks: list[Callable[[ExitStatus], Awaitable[None] | None]] = []
        self._output_head = core.sink.output_head(entity.id)

    @property
    def id(self) -> str:
        """The ``terminalId``."""
        return self._entity.id

    @property
    def exit_status(self) -> ExitStatus | None:
        """How the process ended, once its exit was reported."""
        return self._exit

    @property
    def detached(self) -> bool:
        """True while the terminal is background work."""
        return self._entity.detached

    def __repr__(self) -> str:
        return f"Terminal({self.id!r}, {self.command!r}, exit={self._exit})"

    def tail(self) -> bytes:
        """The retained tail of the output (what a resume snapshot sends)."""
        return self._core.sink.history.output(self.id)

    async def wait(self) -> ExitStatus:
        """Wait until the process exited and its exit was reported."""
        await self._exited.wait()
        assert self._exit is not None
        return self._exit

    def on_exit(self, callback: Callable[[ExitStatus], Awaitable[None] | None]) -> None:
        """Call ``callback(status)`` right after the exit is reported, in the same snapshot batch
        (at once if the exit was already reported).

        Anything a plain callback does is part of the exit's step: ``session.start_foreground(report)``
        there makes the snapshot that drops the terminal already say ``running`` (R95). An ``async``
        callback (or one that returns an awaitable) is awaited as background work of the session,
        right after that step; like any background work it cannot send agent messages (start
        foreground work from a plain callback for that), and an exception it raises is logged.
        """
        if self._exit is not None and self._exited.is_set():
            self._call_exit_callback(callback, self._exit)
        else:
            self._exit_callbacks.append(callback)

    def _call_exit_callback(self, callback: Callable[[ExitStatus], Awaitable[None] | None], status: ExitStatus
                            ) -> None:
        result = callback(status)
        if inspect.isawaitable(result):
            self._core.spawn(_await, result)

    def detach(self) -> None:
        """Hand the process to the background: it is listed until it exits.

        A tool call that launched it and is still live stays unlisted (the terminal
        stands for the work, R88).
        """
        self._core.set_detached(self._entity, True, also_tool_call=self.tool_call_id)

    async def cancel(self, grace: float | None = None) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        if self.process is not None:
            await self.process.terminate(self.grace if grace is None else grace)

    async def stop(self) -> None:
        """Stop the process group and wait until its exit was reported."""
        await self.cancel()
        await self.wait()

    def _request_cancel(self) -> None:
        self._core.spawn(self.cancel)

    async def request_permission(
        self, title: str, options: Sequence[PermissionOption], *, description: str | None = None
    ) -> PermissionOutcome:
        """Ask the user on behalf of this terminal's work; the subject names it (R109, R110)."""
        fields: dict[str, Any] = {"command": self.command, "cwd": self.cwd, "terminal_id": self.id}
        if self.tool_call_id is not None:
            fields["tool_call_id"] = self.tool_call_id
        return await request_permission(
            self._core, title, options, subject=CommandPermissionSubject(**fields), description=description,
            on_behalf_of=self._entity,
        )

    # -- running -----------------------------------------------------------------------

    async def _spawn(self, argv: Sequence[str] | None, env: Mapping[str, str] | None,
                     flush_bytes: int, flush_interval: float) -> None:
        options: dict[str, Any] = {
            "cwd": self.cwd,
            "env": env,
            "on_output": self._on_output,
            "task_group": self._core.task_group,
            "tail_limit": 0,  # the session history keeps the tail; the process need not
            "flush_bytes": flush_bytes,
            "flush_interval": flush_interval,
        }
        try:
            if argv is None:
                self.process = await ManagedProcess.start_shell(self.command, **options)
            else:
                self.process = await ManagedProcess.start(argv, **options)
        except OSError as exc:
            raise ProcessStartError(exc.errno, f"cannot start {self.command!r}: {exc.strerror or exc}",
                                    exc.filename) from exc
        except RuntimeError as exc:
            if self._core.closing:
                # The session closed while the process was spawning: it was killed and reaped.
                raise SessionClosedError(f"session {self._core.id} closed while the process started") from exc
            raise
        self._core.spawn(self._watch_exit)

    def _announce_done(self, live: bool) -> None:
        """The announcement went out (``live``) or never will (the process is killed unseen)."""
        self._live = live
        self._announced.set()
        if not live and self.process is not None:
            self.process.kill_now()

    async def _on_output(self, data: bytes) -> None:
        if not self._announced.is_set():
            await self._announced.wait()
        core = self._core
        if not self._live or core.closing:
            return
        core.sink.output(self._output_head, self.id, data, self.tail_limit)
        if core.sink.full():
            await core.sink.backpressure()

    async def _watch_exit(self) -> None:
        assert self.process is not None
        try:
            status = await self.process.wait()
            await self._announced.wait()
        finally:
            self._core.processes.release(self.id)  # the process no longer counts (max_processes)
        self._report_exit(status)

    def give_up(self) -> None:
        """Shutdown deadline passed: kill the group and report the exit now (unknown if not reaped)."""
        if self._exited.is_set():
            return
        status = ExitStatus(exit_code=None, signal=None)
        if self.process is not None:
            self.process.kill_now()
            status = self.process.exit_status or status
        logger.warning("acp: terminal %s did not end in time; reporting %s", self.id, status)
        self._report_exit(status)

    def _report_exit(self, status: ExitStatus) -> None:
        """Report the exit: once, ever, and only for a terminal the client was told about."""
        self._core.processes.release(self.id)
        if self._exited.is_set():
            return
        self._exit = status
        self._entity.cancel = None
        core = self._core
        if self._live and not core.closing:
            exit_status = TerminalExitStatus(exit_code=status.exit_code, signal=status.signal)
            core.report_exit(self._entity, exit_status, then=lambda: self._exit_step(status))
        self._exited.set()
        self._entity.withdraw_questions()


    def _exit_step(self, status: ExitStatus) -> None:
        """What the step that reports the exit does besides (`SessionCore.report_exit`): the exit callbacks."""
        self._exited.set()
        for callback in self._exit_callbacks:
            self._call_exit_callback(callback, status)


async def _await(awaitable: Awaitable[None]) -> None:
    await awaitable


async def start_terminal(core: SessionCore, command: str | Sequence[str], **options: Unpack[TerminalOptions]
                         ) -> Terminal:
    """Start a process and announce it as a terminal of ``core``'s session (see
    [`Session.start_terminal`][acp_agent.Session.start_terminal])."""
    unknown = options.keys() - TerminalOptions.__optional_keys__
    if unknown:
        raise TypeError(f"start_terminal() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    tool_call = options.get("tool_call")
    cancellable = options.get("cancellable", True)
    tool_entity = core.own_entity("tool_call", tool_call.id, tool_call) if tool_call is not None else None
    if tool_call is not None and tool_call.final:
        raise ToolCallStateError(f"tool call {tool_call.id} has ended; it cannot take a terminal")
    text, argv = command_text(command)
    entity, cwd, detach = core.reserve_terminal(options.get("cwd"), detach=options.get("detach"),
                                                tool_entity=tool_entity)
    terminal_id = entity.id
    tail_limit = options.get("tail_limit")
    terminal = Terminal(core, entity, text, cwd, options.get("grace", DEFAULT_TERMINATE_GRACE),
                        core.limits.terminal_output_bytes if tail_limit is None else tail_limit)
    entity.handle = terminal
    try:
        # nothing is sent before it started
        await terminal._spawn(argv, options.get("env"), options.get("flush_bytes", DEFAULT_FLUSH_BYTES),
                              options.get("flush_interval", DEFAULT_FLUSH_INTERVAL))
        core.sink.check_open()  # closed while it spawned
        if tool_call is not None and tool_call.final:
            raise ToolCallStateError(f"tool call {tool_call.id} ended while its terminal started")
        # the list may have grown meanwhile
        core.check_terminal_room(terminal_id, detach=detach, tool_entity=tool_entity)
        announce: dict[str, Any] = {"command": text, "cwd": cwd}
        if cancellable:
            announce["capabilities"] = CANCEL_CAPABILITIES
        size = options.get("size")
        if size is not None:
            announce["size"] = TerminalSize(cols=size[0], rows=size[1])
        if tool_call is not None:
            terminal.tool_call_id = tool_call.id
        core.announce_terminal(TerminalUpdate(terminal_id=terminal_id, **announce), detach=detach,
                               tool_entity=tool_entity)
        if tool_call is not None and options.get("ends_tool_call", False):
            tool_call.finish_with(terminal)
    except BaseException:
        if entity.announced:  # it is the client's now: it runs and reports its exit as any other
            terminal._announce_done(live=True)
            raise
        core.release_terminal(entity)
        terminal._announce_done(live=False)  # a process nobody was told about is killed
        raise
    terminal._announce_done(live=True)
    if cancellable:
        entity.cancel = terminal._request_cancel
    await core.sink.backpressure()
    return terminal


def command_text(command: str | Sequence[str]) -> tuple[str, list[str] | None]:
    """The display command and, for an argv, the argv itself (a string runs under ``sh -c``)."""
    if isinstance(command, str):
        return command, None
    argv = list(command)
    return shlex.join(argv), argv

