"""OS processes behind agent-owned terminals.

This module starts a command in its own session (and therefore its own process
group), pumps its combined stdout/stderr to an async callback in coalesced
chunks, keeps a bounded tail of the output for snapshots, and tears the whole
process group down on request, on cancellation, and at interpreter exit.  It
knows nothing about JSON-RPC or ACP; ``terminals.py`` builds on top of it.

Platforms: groups, signals and pipes go through `acp_agent._util.portable`. On POSIX the command leads a
new session (its own process group) and is signalled with ``killpg``; on Windows it starts with
``CREATE_NEW_PROCESS_GROUP``, a stop is ``CTRL_BREAK_EVENT`` and a kill ends its process tree, and its
output pipe is read in a worker thread (anyio cannot wait on a Windows pipe), each read delivered at once.

Output path
    The child's stdout and stderr are the write end of one pipe we create
    ourselves (stderr is ``STDOUT``), so bytes keep the order a terminal would
    show.  We read the non-blocking read end with `anyio.wait_readable`
    instead of an anyio byte stream: that way the event loop's subprocess
    machinery holds no pipe of its own, so reaping the child never waits for
    the pipe to close (on asyncio, ``Process.wait()`` otherwise blocks until
    every pipe is closed, which never happens while a grandchild holds stdout),
    and we alone decide when to stop reading.

After a crash
    A process killed by a signal runs no ``atexit`` hook. A watchdog process started with the first
    terminal (`acp_agent._util.watch`, `acp_agent._util.reaper`) kills every recorded group,
    and every process marked with this agent's ``ACP_TERMINAL_OWNER`` (what left its group too), as soon
    as this process ends, however it ends; if the watchdog died with it, the next agent reaps them.

Safety net
    Every process group started here is recorded in a module-level registry
    until it is known to have no live members.  An `atexit` hook sends
    ``SIGKILL`` to every recorded group, so no group started by the SDK
    outlives a normal interpreter exit (return from main, ``sys.exit``, an
    uncaught exception).  ``atexit`` does not run when the agent is killed by a
    signal whose default action is to terminate (``SIGTERM``, ``SIGHUP``...),
    on ``os._exit`` or on a crash; agents that want the same guarantee there
    should turn those signals into a normal exit, or call
    `kill_all_process_groups` from their own handler.  A forked child
    starts with an empty registry so it never kills its parent's groups.

What a child inherits
    One function decides it, `child_environment`: this process's environment without
    any ``ACP_AGENT_*`` variable (the server's token, the store's DSN with its password, and
    every other setting of this SDK) and without the names listed in ``ACP_AGENT_WITHHOLD_ENV``
    (comma-separated; ``NAME*`` withholds every name starting with ``NAME``), then the ``env``
    the caller passed (always given as passed: that is how an author hands a child a value on
    purpose).

Known limits
    Processes that leave the group on purpose (``setsid``, ``setpgid``, shells
    with job control such as ``set -m``) are out of reach of group signals.
    If such a process keeps the output pipe open, `ManagedProcess.terminate`
    stops waiting for end-of-file after a short drain period instead of
    hanging.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from . import environment, portable

__all__ = [
    "DEFAULT_FLUSH_BYTES",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_TAIL_LIMIT",
    "DEFAULT_TERMINATE_GRACE",
    "WITHHELD_PREFIX",
    "WITHHOLD_ENV",
    "ExitStatus",
    "ManagedProcess",
    "OutputCallback",
    "child_environment",
    "kill_all_process_groups",
    "make_non_dumpable",
    "shell_argv",
]

logger = logging.getLogger(__name__)

OutputCallback = Callable[[bytes], Awaitable[None]]
"""Async callable receiving each coalesced output chunk, in order."""

DEFAULT_FLUSH_BYTES: Final = 64 * 1024
"""Default size at which buffered output is handed to the callback."""

DEFAULT_FLUSH_INTERVAL: Final = 0.02
"""Default longest time (seconds) a byte waits in the buffer before delivery."""

DEFAULT_TAIL_LIMIT: Final = 1024 * 1024
"""Default number of trailing output bytes kept for snapshots."""

DEFAULT_TERMINATE_GRACE: Final = 3.0
"""Default seconds between SIGTERM and SIGKILL in `ManagedProcess.terminate`."""

WITHHELD_PREFIX: Final = "ACP_AGENT_"
"""Variables whose name starts with this never reach a child process (see `child_environment`)."""

WITHHOLD_ENV: Final = environment.WITHHOLD.name
"""The variable naming more variables to withhold from child processes (comma-separated; ``NAME*``: a prefix)."""

# Largest single read(2); pipes rarely hold more than this anyway.
_MAX_READ: Final = 256 * 1024
# After SIGKILL: how long to wait for group members to die and the child to be reaped.
_KILL_TIMEOUT: Final = 5.0
# After the group is dead: how long to wait for end-of-file before giving up on the
# pipe (it can only still be open in a process that left the group).
_DRAIN_TIMEOUT: Final = 1.0
# Polling interval bounds while waiting for a group to die.
_POLL_MIN: Final = 0.005
_POLL_MAX: Final = 0.05


# --------------------------------------------------------------------------- registry

_registry_lock = threading.Lock()
_registered_groups: set[int] = set()


def _given(coro: Coroutine[Any, Any, None]) -> Callable[[], Coroutine[Any, Any, None]]:
    """A task function that returns the coroutine ``coro`` made beforehand."""
    return lambda: coro


def _register_group(pgid: int) -> None:
    with _registry_lock:
        _registered_groups.add(pgid)
    from . import watch  # loaded with the first terminal, never at start-up

    watch.started(pgid)


def _unregister_group(pgid: int) -> None:
    with _registry_lock:
        known = pgid in _registered_groups
        _registered_groups.discard(pgid)
    if known:
        from . import watch

        watch.ended(pgid)


def kill_all_process_groups(*, wait: float = 0.0) -> int:
    """Send SIGKILL to every process group this module started that may still be alive.

    Synchronous and best effort, usable from signal handlers, threads and shutdown code
    that cannot await.  With *wait*, block up to that many seconds until the signalled
    groups have no live members (a killed process takes a moment to die), so a caller
    about to exit leaves nothing behind.  Returns how many groups were signalled.  This
    is what the `atexit` safety net calls.
    """
    with _registry_lock:
        groups = sorted(_registered_groups)
    signalled: list[int] = []
    for pgid in groups:
        try:
            portable.signal_group(pgid, portable.KILL)
        except ProcessLookupError:
            _unregister_group(pgid)
        except OSError as exc:
            logger.warning("could not kill process group %d: %s", pgid, exc)
        else:
            signalled.append(pgid)
    deadline = time.monotonic() + wait
    delay = _POLL_MIN
    while signalled and time.monotonic() < deadline:
        if not any(_group_has_live_members(pgid) for pgid in signalled):
            break
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
    return len(signalled)


def _kill_all_at_exit() -> None:
    count = kill_all_process_groups(wait=1.0)
    if count:
        with contextlib.suppress(Exception):  # logging may already be torn down
            logger.warning("killed %d leftover process group(s) at interpreter exit", count)
    watch = sys.modules.get(f"{__package__}.watch")
    if watch is not None:  # a terminal was started
        watch.stop()


def _forget_all_in_child() -> None:
    # The registry lock may have been held by another thread at fork time: replace it.
    global _registry_lock
    _registry_lock = threading.Lock()
    _registered_groups.clear()


atexit.register(_kill_all_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all_in_child)


# --------------------------------------------------------------------------- liveness


def _group_has_live_members(pgid: int) -> bool:
    """Whether process group *pgid* has a member that is not a zombie.

    ``killpg(pgid, 0)`` also succeeds for zombies, which linger until their parent
    (often init, for orphaned grandchildren) reaps them; some inits reap slowly or
    never.  On Linux `acp_agent._util.portable.group_alive` therefore confirms a
    positive answer through ``/proc``.
    """
    return portable.group_alive(pgid)


# --------------------------------------------------------------------------- public API


def child_environment(env: Mapping[str, str] | None = None,
                      parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child process starts with: ``parent`` (default ``os.environ``) without the
    variables named ``ACP_AGENT_*`` or listed in ``$ACP_AGENT_WITHHOLD_ENV``, updated with ``env``."""
    source = os.environ if parent is None else parent
    names = [n.strip() for n in source.get(WITHHOLD_ENV, "").split(",") if n.strip()]
    exact = {n for n in names if not n.endswith("*")}
    prefixes = (WITHHELD_PREFIX, *(n[:-1] for n in names if n.endswith("*")))
    inherited = {k: v for k, v in source.items() if k not in exact and not k.startswith(prefixes)}
    if env is not None:
        inherited.update(env)
    return inherited



_PR_SET_DUMPABLE: Final = 4


def make_non_dumpable() -> bool:
    """Mark this process non-dumpable (Linux ``prctl(PR_SET_DUMPABLE, 0)``): another process of the same user, a
    terminal this server started included, can then neither read its ``/proc/PID/environ`` or memory nor attach
    a debugger to it, and it writes no core file. Returns whether it could (``False`` elsewhere). Root (or
    ``CAP_SYS_PTRACE``) still reads everything: a server holding secrets runs as a user its terminals are not."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a process ended: an exit code, or the name of the signal that killed it."""

    exit_code: int | None
    signal: str | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        """Build from a ``subprocess``-style return code (negative means killed by a signal)."""
        if returncode >= 0:
            return cls(exit_code=returncode, signal=None)
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"SIG{-returncode}"
        return cls(exit_code=None, signal=name)


def shell_argv(command: str, *, shell: str | None = None) -> list[str]:
    """Return the argv that runs *command* through ``shell -c`` (default ``/bin/sh``; on Windows, where the
    default is ``%COMSPEC%`` (``cmd.exe``), ``shell /c``)."""
    if shell is None and sys.platform == "win32":
        return [os.environ.get("COMSPEC", "cmd.exe"), "/c", command]
    return [shell or "/bin/sh", "-c", command]


class ManagedProcess:
    """A command running in its own session whose merged output is pumped to a callback.

    Create instances with `start` or `start_shell`.  Two tasks run in the
    task group given at start: an output pump and a reaper.  If that task group is
    cancelled while either task is still running, the whole process group is killed.
    """

    def __init__(
        self,
        *,
        process: anyio.abc.Process,
        argv: Sequence[str],
        read_fd: int,
        on_output: OutputCallback,
        flush_bytes: int,
        flush_interval: float,
        tail_limit: int,
    ) -> None:
        """Wrap an already started process; use `start` instead of calling this."""
        self._process = process
        self._pid = process.pid
        self._pgid = process.pid  # start_new_session: the child leads its session and group
        self._argv = tuple(argv)
        self._fd = read_fd
        self._on_output = on_output
        self._flush_bytes = flush_bytes
        self._flush_interval = flush_interval
        self._tail_limit = tail_limit
        self._tail = bytearray()
        self._total_bytes = 0
        self._pump_done = anyio.Event()
        self._reaped = anyio.Event()
        self._status: ExitStatus | None = None
        self._group_gone = False
        self._abandoned = False
        self._read_scope: anyio.CancelScope | None = None
        self._terminate_done: anyio.Event | None = None
        self._thread_reads = False  # Windows: the pipe is blocking and read in a worker thread

    # ------------------------------------------------------------------ construction

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback,
        task_group: anyio.abc.TaskGroup,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        tail_limit: int = DEFAULT_TAIL_LIMIT,
    ) -> ManagedProcess:
        """Spawn *argv* (no shell) in a new session and start pumping its output.

        *cwd* must be absolute.  The child's environment is `child_environment`
        of *env* (this process's, without the SDK's own settings and secrets, plus *env*).
        stdin is ``/dev/null``; stderr is merged into stdout.  Output is delivered to
        *on_output* in order, in chunks of at most *flush_bytes*, each sent once
        *flush_bytes* are buffered or *flush_interval* seconds after its first byte arrived.  Spawn errors (for
        example `FileNotFoundError` for a missing executable or cwd) propagate.
        """
        if isinstance(argv, str | bytes):
            raise TypeError("argv must be a sequence of strings; use start_shell() for a command line")
        argv = [os.fspath(arg) for arg in argv]
        if not argv:
            raise ValueError("argv must not be empty")
        cwd = os.fspath(cwd)
        if not os.path.isabs(cwd):
            raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
        if flush_bytes < 1:
            raise ValueError("flush_bytes must be at least 1")
        if not flush_interval >= 0:
            raise ValueError("flush_interval must be >= 0")
        if tail_limit < 0:
            raise ValueError("tail_limit must be >= 0")
        full_env = child_environment(env)
        from . import watch
        from .reaper import MARK_ENV

        owner = watch.current() or await anyio.to_thread.run_sync(watch.mark)  # starts the watchdog once
        if owner is not None:
            full_env[MARK_ENV] = owner  # how the watchdog finds what leaves the group (reaper)

        read_fd, write_fd = os.pipe()  # both ends are close-on-exec in this process
        try:
            # Shielded so a cancellation cannot land between fork and registration.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=write_fd,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=full_env,
                    **portable.new_group_options(),
                )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # only the child (and its descendants) may hold the write end
        _register_group(process.pid)
        nonblocking = portable.set_nonblocking(read_fd)
        proc = cls(
            process=process,
            argv=argv,
            read_fd=read_fd,
            on_output=on_output,
            flush_bytes=flush_bytes,
            flush_interval=flush_interval,
            tail_limit=tail_limit,
        )
        proc._thread_reads = not nonblocking
        logger.debug("started pid %d in %s: %r", proc.pid, cwd, argv)
        # The coroutines are made here, not by the task group, so that one the group refuses can
        # be closed: a group that is shutting down may create the coroutine and then refuse the
        # task (anyio on trio, in the step where the nursery has closed but the task group is
        # still active), which would leave it never awaited.
        pump, reap = proc._pump_output(), proc._reap()
        pump_started = False
        try:
            task_group.start_soon(_given(pump), name=f"output pump for pid {proc.pid}")
            pump_started = True
            task_group.start_soon(_given(reap), name=f"reaper for pid {proc.pid}")
        except BaseException:
            # The task group no longer takes tasks (it is shutting down): nobody will pump or
            # reap this process, so kill its group and reap the child here.
            reap.close()
            if not pump_started:
                pump.close()
                os.close(read_fd)
            proc.kill_now()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_TIMEOUT):
                await process.aclose()  # reaps it (SIGKILL cannot be ignored) and releases its handle
            if not _group_has_live_members(proc.pid):
                _unregister_group(proc.pid)
            raise
        return proc

    @classmethod
    async def start_shell(
        cls,
        command: str,
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback,
        task_group: anyio.abc.TaskGroup,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        tail_limit: int = DEFAULT_TAIL_LIMIT,
        shell: str | None = None,
    ) -> ManagedProcess:
        """Like `start`, running the command line *command* with ``shell -c``."""
        return await cls.start(
            shell_argv(command, shell=shell),
            cwd=cwd,
            env=env,
            on_output=on_output,
            task_group=task_group,
            flush_bytes=flush_bytes,
            flush_interval=flush_interval,
            tail_limit=tail_limit,
        )

    # ------------------------------------------------------------------ properties

    @property
    def pid(self) -> int:
        """Process id of the direct child."""
        return self._pid

    @property
    def pgid(self) -> int:
        """Process group id (equal to `pid`, since the child leads a new session)."""
        return self._pgid

    @property
    def argv(self) -> tuple[str, ...]:
        """The argv the child was started with."""
        return self._argv

    @property
    def returncode(self) -> int | None:
        """Raw return code of the direct child once reaped (negative: killed by that signal)."""
        return self._process.returncode

    @property
    def exited(self) -> bool:
        """Whether the direct child has exited and been reaped (output may still be pending)."""
        return self.returncode is not None

    @property
    def exit_status(self) -> ExitStatus | None:
        """The direct child's [`ExitStatus`][acp_agent.ExitStatus], or ``None`` while it runs."""
        returncode = self.returncode
        return None if returncode is None else ExitStatus.from_returncode(returncode)

    @property
    def finished(self) -> bool:
        """Whether all output has been delivered and the child reaped (``wait()`` won't block)."""
        return self._pump_done.is_set() and self._reaped.is_set()

    @property
    def total_bytes(self) -> int:
        """Number of output bytes handed to ``on_output`` so far."""
        return self._total_bytes

    @property
    def tail_limit(self) -> int:
        """Maximum number of bytes `tail` returns."""
        return self._tail_limit

    def tail(self) -> bytes:
        """The last ``tail_limit`` bytes handed to ``on_output``.

        A chunk is counted here (and in `total_bytes`) just before ``on_output``
        is awaited with it, so a snapshot is always a suffix of the concatenation of
        the chunks delivered so far, the chunk in flight included.
        """
        return bytes(self._tail)

    def __repr__(self) -> str:
        """Debug representation with pid and state."""
        state = "finished" if self.finished else ("exited" if self.exited else "running")
        return f"<ManagedProcess pid={self._pid} {state} argv={list(self._argv)!r}>"

    # ------------------------------------------------------------------ waiting / killing

    async def wait(self) -> ExitStatus:
        """Wait until the output has been fully delivered and the child reaped.

        Without `terminate` this waits for end-of-file on the output, which a
        background grandchild can hold open after the child exits.  Once
        `terminate` has been called it returns within a bounded time, unless
        ``on_output`` itself blocks.
        """
        await self._pump_done.wait()
        await self._reaped.wait()
        if self._status is None:  # pragma: no cover - only if the child could not be reaped
            return ExitStatus(exit_code=None, signal=None)
        return self._status

    async def terminate(self, grace: float = DEFAULT_TERMINATE_GRACE) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after *grace* seconds.

        Safe to call at any time and any number of times; concurrent callers share one
        shutdown.  The group is signalled even if the direct child already exited (its
        descendants may live on).  On return the group has no live members (bounded
        wait), the child is reaped and the output pump has finished, so `wait`
        returns immediately.  If this call is cancelled, the group is killed with
        SIGKILL on the way out.
        """
        if not grace >= 0:
            raise ValueError("grace must be >= 0")
        if self._terminate_done is not None:
            await self._terminate_done.wait()
            return
        self._terminate_done = done = anyio.Event()
        completed = False
        try:
            await self._terminate(grace)
            completed = True
        finally:
            if not completed:
                self.kill_now()
                self._abandon_output()
            done.set()

    def kill_now(self) -> None:
        """Best-effort synchronous SIGKILL of the whole process group.

        For shutdown paths that cannot await.  Safe from any thread and if the group is
        already gone.  The pump and reaper tasks notice the death by themselves.
        """
        self._signal_group(portable.KILL)

    # ------------------------------------------------------------------ internals

    def _signal_group(self, sig: signal.Signals) -> bool:
        """Signal the group; False if it is known to be gone or could not be signalled."""
        if self._group_gone:
            return False
        try:
            portable.signal_group(self._pgid, sig)
        except ProcessLookupError:
            self._mark_group_gone()
            return False
        except OSError as exc:
            logger.warning("could not send %s to process group %d: %s", sig.name, self._pgid, exc)
            return False
        return True

    def _mark_group_gone(self) -> None:
        self._group_gone = True
        _unregister_group(self._pgid)

    def _group_alive(self) -> bool:
        if self._group_gone:
            return False
        if _group_has_live_members(self._pgid):
            return True
        # Only zombies (or nothing) remain: nothing can join the group again.
        self._mark_group_gone()
        return False

    def _maybe_release(self) -> None:
        """Drop the group from the registry once the child is reaped, output done, group dead."""
        if self._pump_done.is_set() and self._reaped.is_set():
            self._group_alive()

    def _abandon_output(self) -> None:
        """Make the pump stop once the pipe is momentarily empty instead of waiting for EOF."""
        self._abandoned = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    async def _wait_group_dead(self, timeout: float) -> bool:
        deadline = anyio.current_time() + timeout
        delay = _POLL_MIN
        while self._group_alive():
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                return False
            await anyio.sleep(min(delay, remaining))
            delay = min(delay * 2, _POLL_MAX)
        return True

    async def _terminate(self, grace: float) -> None:
        if self._signal_group(signal.SIGTERM):
            logger.debug("sent SIGTERM to process group %d", self._pgid)
            if not await self._wait_group_dead(grace):
                logger.info(
                    "process group %d still alive %.1fs after SIGTERM; sending SIGKILL", self._pgid, grace
                )
                self._signal_group(portable.KILL)
                if not await self._wait_group_dead(_KILL_TIMEOUT):
                    logger.warning(
                        "process group %d still alive %.1fs after SIGKILL", self._pgid, _KILL_TIMEOUT
                    )
        with anyio.move_on_after(_KILL_TIMEOUT):
            await self._reaped.wait()
        if not self._reaped.is_set():
            logger.warning("pid %d was not reaped %.1fs after being killed", self._pid, _KILL_TIMEOUT)
        with anyio.move_on_after(_DRAIN_TIMEOUT):
            await self._pump_done.wait()
        if not self._pump_done.is_set():
            logger.warning(
                "output pipe of pid %d is held open outside its process group; no longer waiting for EOF",
                self._pid,
            )
            self._abandon_output()
            await self._pump_done.wait()

    async def _deliver(self, chunk: bytes) -> None:
        self._total_bytes += len(chunk)
        if self._tail_limit:
            self._tail += chunk
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]
        await self._on_output(chunk)

    async def _pump_output(self) -> None:
        """Read the pipe and hand coalesced chunks to ``on_output`` until EOF.

        Reading only happens while no ``on_output`` call is in progress, so a slow
        consumer leaves data in the kernel pipe, whose writers then block: memory use
        is bounded by ``flush_bytes`` plus one pipe buffer.
        """
        fd = self._fd
        buf = bytearray()
        first_at = 0.0  # when the oldest buffered byte was read
        clean = False
        try:
            while True:
                try:
                    if self._thread_reads:
                        read = await self._thread_read(fd, min(_MAX_READ, self._flush_bytes - len(buf)))
                        if read is None:
                            break  # abandoned
                        data = read
                    else:
                        data = os.read(fd, min(_MAX_READ, self._flush_bytes - len(buf)))
                except BlockingIOError:
                    if self._abandoned:
                        break
                    deadline = math.inf
                    if buf:
                        deadline = first_at + self._flush_interval
                        if anyio.current_time() >= deadline:
                            chunk = bytes(buf)
                            buf.clear()
                            await self._deliver(chunk)
                            continue
                    with anyio.CancelScope(deadline=deadline) as scope:
                        self._read_scope = scope
                        await anyio.wait_readable(fd)
                    self._read_scope = None
                    continue
                except OSError as exc:
                    logger.warning("reading output of pid %d failed: %s", self._pid, exc)
                    break
                if not data:
                    break  # EOF: every writer closed its end
                now = anyio.current_time()
                if not buf:
                    first_at = now
                buf += data
                if self._thread_reads or len(buf) >= self._flush_bytes or now - first_at >= self._flush_interval:
                    chunk = bytes(buf)
                    buf.clear()
                    await self._deliver(chunk)
                else:
                    await anyio.lowlevel.checkpoint()
            if buf:
                chunk = bytes(buf)
                buf.clear()
                await self._deliver(chunk)
            clean = True
        finally:
            self._read_scope = None
            if not clean:
                # Cancelled, or on_output raised: nobody will read the pipe any more.
                logger.debug("output pump for pid %d stopped early; killing its group", self._pid)
                self.kill_now()
            with contextlib.suppress(Exception):
                anyio.notify_closing(fd)
            os.close(fd)
            self._pump_done.set()
            self._maybe_release()

    async def _thread_read(self, fd: int, size: int) -> bytes | None:
        """One blocking read in a worker thread (Windows pipes); ``None`` once the output is abandoned (the
        thread then ends with the pipe's last writer)."""
        if self._abandoned:
            return None
        with anyio.CancelScope() as scope:
            self._read_scope = scope
            return await anyio.to_thread.run_sync(os.read, fd, size, abandon_on_cancel=True)
        self._read_scope = None
        return None

    async def _reap(self) -> None:
        """Wait for the direct child; on cancellation kill the group and reap it shielded."""
        try:
            await self._process.wait()
        finally:
            if self._process.returncode is None:
                self.kill_now()
                with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_TIMEOUT):
                    await self._process.wait()
                if self._process.returncode is None:
                    logger.error("pid %d could not be reaped after SIGKILL", self._pid)
            returncode = self._process.returncode
            if returncode is not None:
                self._status = ExitStatus.from_returncode(returncode)
                logger.debug("pid %d exited: %s", self._pid, self._status)
            self._reaped.set()
            self._maybe_release()
