"""Agent-owned terminals backed by real processes.

:meth:`Session.start_terminal` announces the terminal (``command``, ``cwd``, and
``capabilities.cancel``), starts the process in its own process group, streams its output
as base64 ``terminal_output_chunk`` updates (coalesced, never dropped, with back-pressure
on the pipe), and reports ``exitStatus`` after the last byte of output. While foreground
work awaits the process it is not listed; :meth:`Terminal.detach` (or ``detach=True``)
makes it background work, listed until it exits (R85, R88, R96).

``terminal/cancel`` stops the process group (SIGTERM, then SIGKILL after a grace period);
the terminal and its output are kept, and no tool call changes because of it (R103, R105).
"""

from __future__ import annotations

import base64
import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from .background import Entity
from .errors import SessionClosedError
from .processes import DEFAULT_TERMINATE_GRACE, ExitStatus, ManagedProcess
from .schema import (
    CommandPermissionSubject,
    PermissionOption,
    TerminalCancelCapabilities,
    TerminalCapabilities,
    TerminalExitStatus,
    TerminalUpdate,
)

if TYPE_CHECKING:
    from .permissions import PermissionOutcome
    from .session import Session

__all__ = ["ExitStatus", "Terminal"]

logger = logging.getLogger(__name__)


class Terminal:
    """A handle on one process-backed terminal. Create it with :meth:`Session.start_terminal`."""

    def __init__(self, session: Session, entity: Entity, command: str, cwd: str, grace: float) -> None:
        self.session = session
        self._entity = entity
        self.command = command
        self.cwd = cwd
        self.grace = grace
        self.process: ManagedProcess | None = None
        self.tail_limit = 1024 * 1024
        self.tool_call_id: str | None = None
        self._exited = anyio.Event()
        self._exit: ExitStatus | None = None
        self._exit_callbacks: list[Callable[[ExitStatus], None]] = []
        self._request_scopes: set[anyio.CancelScope] = set()
        self._chunk_head = (
            session._prefix
            + b'{"sessionUpdate":"terminal_output_chunk","terminalId":'
            + orjson.dumps(entity.id)
            + b',"data":"'
        )

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
        return self.session.record.history.output(self.id)

    async def wait(self) -> ExitStatus:
        """Wait until the process exited and its exit was reported."""
        await self._exited.wait()
        assert self._exit is not None
        return self._exit

    def on_exit(self, callback: Callable[[ExitStatus], None]) -> None:
        """Call ``callback(status)`` right after the exit is reported, in the same snapshot batch
        (at once if the exit was already reported)."""
        if self._exit is not None and self._exited.is_set():
            callback(self._exit)
        else:
            self._exit_callbacks.append(callback)

    def detach(self) -> None:
        """Hand the process to the background: it is listed until it exits.

        A tool call that launched it and is still live stays unlisted (the terminal
        stands for the work, R88).
        """
        self.session.set_detached(self._entity, True, also_tool_call=self.tool_call_id)

    async def cancel(self, grace: float | None = None) -> None:
        """Stop the process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        if self.process is not None:
            await self.process.terminate(self.grace if grace is None else grace)

    def _request_cancel(self) -> None:
        self.session.spawn(self.cancel)

    async def request_permission(
        self, title: str, options: Sequence[PermissionOption], *, description: str | None = None
    ) -> PermissionOutcome:
        """Ask the user on behalf of this terminal's work; the subject names it (R109, R110)."""
        fields: dict[str, Any] = {"command": self.command, "cwd": self.cwd, "terminal_id": self.id}
        if self.tool_call_id is not None:
            fields["tool_call_id"] = self.tool_call_id
        return await self.session.request_permission(
            title, options, subject=CommandPermissionSubject(**fields), description=description,
            on_behalf_of=self._entity, scopes=self._request_scopes,
        )

    # -- running -----------------------------------------------------------------------

    async def _start(self, argv: Sequence[str] | None, env: Mapping[str, str] | None, tail_limit: int,
                     flush_bytes: int, flush_interval: float) -> None:
        self.tail_limit = tail_limit
        options: dict[str, Any] = {
            "cwd": self.cwd,
            "env": env,
            "on_output": self._on_output,
            "task_group": self.session.task_group,
            "tail_limit": 0,  # the session history keeps the tail; the process need not
            "flush_bytes": flush_bytes,
            "flush_interval": flush_interval,
        }
        try:
            if argv is None:
                self.process = await ManagedProcess.start_shell(self.command, **options)
            else:
                self.process = await ManagedProcess.start(argv, **options)
        except RuntimeError as exc:
            if self.session.closing:
                # The session closed while the process was spawning: it was killed and reaped.
                raise SessionClosedError(f"session {self.session.id} closed while the process started") from exc
            raise
        self.session.spawn(self._watch_exit)

    async def _on_output(self, data: bytes) -> None:
        session = self.session
        if session.closing or session.closed:
            return
        session.record.history.append_output(self.id, data, limit=self.tail_limit)  # raw bytes, no decoding
        # The hot path: each chunk is framed straight to bytes (base64 needs no JSON escaping);
        # this is exactly what TerminalOutputChunk(terminal_id=..., data=...) serializes to.
        writer = session._conn.writer
        writer.send_nowait(self._chunk_head + base64.b64encode(data) + b'"}}}\n')
        await writer.backpressure()

    async def _watch_exit(self) -> None:
        assert self.process is not None
        try:
            status = await self.process.wait()
        finally:
            self.session._processes.release(self.id)  # the process no longer counts (max_processes)
        self._report_exit(status)

    def _give_up(self) -> None:
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
        self.session._processes.release(self.id)
        if self._exited.is_set():
            return
        self._exit = status
        self._entity.cancel = None
        if not self.session.closing:
            fields: dict[str, Any] = {
                "exit_status": TerminalExitStatus(exit_code=status.exit_code, signal=status.signal)
            }
            if self._entity.cancel_advertised:
                fields["capabilities"] = None  # R100
            with self.session.batch():
                self.session.emit(TerminalUpdate(terminal_id=self.id, **fields))
                self._exited.set()
                for callback in self._exit_callbacks:
                    callback(status)
        self._exited.set()
        for scope in self._request_scopes:
            scope.cancel()


def command_text(command: str | Sequence[str]) -> tuple[str, list[str] | None]:
    """The display command and, for an argv, the argv itself (a string runs under ``sh -c``)."""
    if isinstance(command, str):
        return command, None
    argv = list(command)
    return shlex.join(argv), argv


CANCEL_CAPABILITIES = TerminalCapabilities(cancel=TerminalCancelCapabilities())
DEFAULT_GRACE = DEFAULT_TERMINATE_GRACE
