"""Serve an agent over the process's stdin/stdout.

Protocol output goes to a private duplicate of file descriptor 1; fd 1 and
``sys.stdout`` are pointed at stderr while the agent runs, so a stray ``print()`` in agent
code lands in the log instead of corrupting the protocol stream (R2). The descriptors are
used non-blocking through anyio, so the same code runs on asyncio and trio, whether
stdout is a pipe, a file or a socket.

[`serve`][acp_agent.serve] and `open_runtime` (any pair of byte streams, any transport) live in
`acp_agent._runtime.serve`; they are re-exported here, where they were first published.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream

from ._runtime.runtime import SHUTDOWN_TIMEOUT
from ._runtime.serve import open_runtime, serve
from ._util import environment, eventloop, portable, prelude
from ._util.loop_monitor import watch_event_loop
from ._util.processes import kill_all_process_groups
from ._wire.connection import Connection
from .agent import Agent
from .limits import Limits
from .store import SessionStore
from .store.opening import session_store

__all__ = [
    "EXIT_MARGIN", "SHUTDOWN_TIMEOUT", "FdReceiveStream", "FdSendStream", "open_runtime", "run_stdio", "serve",
    "serve_stdio",
]

logger = logging.getLogger(__name__)

EXIT_MARGIN: Final = 2.0
"""Seconds after the shutdown timeout before the process gives up on agent code that ignores
cancellation, then at most as long again to flush its last messages. A watchdog thread ends
the process one second after that if the event loop itself is blocked."""


class FdReceiveStream(ByteReceiveStream):
    """Non-blocking reads from a file descriptor, awaited through anyio (on Windows, where anyio cannot wait on
    a pipe, blocking reads in a worker thread)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._threaded = not portable.set_nonblocking(fd)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Read up to ``max_bytes``; raises ``anyio.EndOfStream`` at end of input.

        It lets other tasks run first: what the last input started (a prompt's turn) goes ahead of
        the read that most often finds nothing and registers the descriptor with the event loop
        (about 45 µs of an echo round trip, ``bench/README.md`` "Performance round 4").
        """
        await anyio.lowlevel.checkpoint()
        while True:
            try:
                if self._threaded:
                    data = await anyio.to_thread.run_sync(os.read, self._fd, max_bytes, abandon_on_cancel=True)
                else:
                    data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError as exc:
                if exc.errno in (errno.EBADF, errno.EIO):
                    raise anyio.EndOfStream from exc
                raise
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        """Nothing to release: the descriptor belongs to the process."""


class FdSendStream(ByteSendStream):
    """Non-blocking writes to a file descriptor, awaited through anyio (on Windows, blocking writes in a worker
    thread)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._threaded = not portable.set_nonblocking(fd)

    async def send(self, item: bytes) -> None:
        """Write all of ``item``, waiting whenever the descriptor is full."""
        view = memoryview(item)
        while view:
            try:
                if self._threaded:
                    written = await anyio.to_thread.run_sync(os.write, self._fd, view)
                else:
                    written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc
            view = view[written:]

    def write_now(self, item: bytes) -> int:
        """Write what the descriptor takes of ``item`` without waiting; the number of bytes written
        (the direct writes of `Writer.flush_now`; always ``0`` on Windows, whose writes may block)."""
        if self._threaded:
            return 0
        try:
            return os.write(self._fd, item)
        except BlockingIOError:
            return 0
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """Close the descriptor."""
        with contextlib.suppress(OSError):
            os.close(self._fd)


@contextmanager
def _protocol_stdout() -> Iterator[int]:
    """Give the protocol a private copy of fd 1 and point fd 1 / sys.stdout at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        yield protocol_fd
    finally:
        sys.stdout = saved_stdout
        with contextlib.suppress(OSError):
            os.dup2(protocol_fd, 1)


async def serve_stdio(
    agent: Agent,
    *,
    limits: Limits | None = None,
    max_message_bytes: int | None = None,
    shutdown_timeout: float | None = None,
    store: SessionStore | None = None,
) -> None:
    """Serve ``agent`` on stdin/stdout until EOF, SIGTERM or SIGINT, then shut down cleanly.

    ``limits`` and ``max_message_bytes`` as for [`serve`][acp_agent.serve]. The shutdown is the same
    for all three: requests still in flight are answered ``-32800``, every session stops
    its work and reports each unfinished item ended, the process groups it started are
    stopped, and the output is flushed. It takes at most ``shutdown_timeout`` seconds
    (default `SHUTDOWN_TIMEOUT`, or the ``ACP_AGENT_SHUTDOWN_TIMEOUT`` environment
    variable) plus `EXIT_MARGIN`: then the process kills whatever it started and
    exits with status 0 even if agent code ignores cancellation or the client stopped
    reading (see the site's "Errors, limits and shutdown" page). While it serves, agent code that blocks the event
    loop for longer than ``ACP_AGENT_BLOCK_WARNING`` seconds (0.5 by default; ``off``
    disables it) gets a warning on stderr naming the function (`acp_agent._util.loop_monitor`).
    ``store`` keeps the sessions (default: ``agent.store``, else the agent's SQLite file,
    `SqliteStore.for_agent`: `acp_agent.store.opening`);
    it is closed at the end.
    """
    timeout = _shutdown_timeout(shutdown_timeout)
    kept = session_store(agent, store, durable=True)
    with _protocol_stdout() as out_fd:
        stdin_fd = os.dup(0)
        receive = FdReceiveStream(stdin_fd)
        send = FdSendStream(out_fd)
        runtime = open_runtime(agent, receive, send, limits=limits, max_message_bytes=max_message_bytes,
                               store=kept, shutdown_timeout=timeout)
        connection = runtime.connection
        began = anyio.Event()
        # A thread, for agent code that blocks the event loop itself past every deadline.
        watchdog = threading.Timer(timeout + 2 * EXIT_MARGIN + 1.0, _exit_now)
        watchdog.daemon = True

        async def shutdown_began() -> None:
            began.set()
            watchdog.start()

        connection.on_close.insert(0, shutdown_began)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_close_on_signal, connection)
                tg.start_soon(_enforce_deadline, connection, began, timeout)
                tg.start_soon(watch_event_loop)  # a warning on stderr when agent code blocks the loop
                await connection.run()
                # Still under the deadline and the watchdog: a store that cannot finish closing
                # (a database that stopped answering) must not keep the process alive.
                with anyio.CancelScope(shield=True):
                    await runtime.keeper.store.close()
                tg.cancel_scope.cancel()
        finally:
            watchdog.cancel()
        os.close(stdin_fd)
        await send.aclose()


def _shutdown_timeout(value: float | None) -> float:
    if value is None:
        value = environment.read(environment.SHUTDOWN_TIMEOUT)
    if not value >= 0:
        raise ValueError("shutdown_timeout must be >= 0")
    return value


async def _close_on_signal(connection: Connection) -> None:
    # Kept open for the whole run: a second signal during shutdown is ignored rather than
    # falling back to the default action (which would skip the cleanup).
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if connection.closed:
                logger.info("acp: received %s, already shutting down", name)
            else:
                logger.info("acp: received %s, shutting down", name)
                connection.close()


async def _enforce_deadline(connection: Connection, began: anyio.Event, timeout: float) -> None:
    """Once shutdown began, give it ``timeout + EXIT_MARGIN`` seconds; then exit regardless."""
    await began.wait()
    await anyio.sleep(timeout + EXIT_MARGIN)
    # Still running: agent code ignores cancellation, or the client stopped reading.
    abandoned = connection.abandon_requests()
    killed = kill_all_process_groups(wait=1.0)
    logger.warning(
        "acp: shutdown did not finish within %.1fs; answered %d request(s) -32800, killed %d process "
        "group(s), exiting", timeout + EXIT_MARGIN, abandoned, killed,
    )
    connection.writer.close()
    with anyio.move_on_after(EXIT_MARGIN):
        await connection.writer.drain()
    _flush_logs()
    os._exit(0)


def _exit_now() -> None:
    """Watchdog thread: the event loop itself is blocked; kill the process groups and exit."""
    killed = kill_all_process_groups(wait=1.0)
    with contextlib.suppress(Exception):
        logger.error("acp: the event loop is blocked past the shutdown deadline; killed %d process "
                     "group(s), exiting", killed)
    _flush_logs()
    os._exit(0)


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()


def run_stdio(agent: Agent, *, backend: str | None = None, uvloop: bool | None = None, **options: Any) -> None:
    """Run ``agent`` as an ACP agent process on stdin/stdout (the usual ``main``).

    ``backend`` is ``"asyncio"`` (default) or ``"trio"``; the ``ACP_AGENT_BACKEND``
    environment variable can choose it too. On asyncio the event loop is asyncio's own unless
    ``uvloop=True`` or ``ACP_AGENT_UVLOOP=1`` asks for uvloop's (the ``uvloop`` extra;
    `acp_agent._util.eventloop`). ``limits=Limits(...)`` sets the connection's
    resource limits (default: ``agent.limits``); ``store=`` where sessions are kept (default:
    ``agent.store``, else a SQLite file per agent under ``$ACP_AGENT_DATA_DIR`` or the user data
    directory). Logging goes to stderr.
    """
    prelude.prepare()  # the environment check, logging to stderr, never-awaited calls logged
    eventloop.run(lambda: serve_stdio(agent, **options), backend=backend, uvloop=uvloop)
