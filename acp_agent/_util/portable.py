"""What Linux, macOS and Windows do differently with process groups, pipes and file locks, in one module.

Everything else in acp-agent calls these functions instead of ``os.killpg``, ``fcntl`` or ``msvcrt``, and
nothing here imports a module that only one OS has at import time (each is imported inside the function that
needs it), so every module of the package imports on every platform. The fallbacks, one per concept:

Process groups (`new_group_options`, `signal_group`, `group_alive`)
    POSIX: the child leads a new session, so its group id is its pid; signals go to the whole group
    (``killpg``); a group is alive while a member that is not a zombie is in it (Linux confirms through
    ``/proc``, macOS trusts ``killpg(pgid, 0)``, so a zombie member counts as alive until it is reaped).
    Windows has no process groups in this sense: the child is started with ``CREATE_NEW_PROCESS_GROUP``; a
    polite stop is ``CTRL_BREAK_EVENT`` to that group, a kill ends the child and every descendant
    (``psutil``, or ``taskkill /T /F`` where psutil is missing); the "group" is alive while the child is.
Non-blocking pipes (`set_nonblocking`)
    POSIX: ``O_NONBLOCK`` and the event loop's readiness waits. Windows: anyio cannot wait on a pipe there,
    so the descriptor stays blocking and its reads and writes run in worker threads (the callers check the
    answer of `set_nonblocking`).
File locks (`locks_available`, `lock_file`, `lock_byte`, `unlock_byte`)
    POSIX: ``flock`` for a whole file, ``lockf`` record locks for one byte. Windows: ``msvcrt.locking`` of
    one byte (a whole file is the byte at `WHOLE_FILE_BYTE`, far past any data, since Windows locks are
    mandatory: a locked byte cannot be read by others). Both kinds go with the process however it ends. A
    Python with neither module grants every lock (`locks_available` is then false: one process per file is
    the user's care).
Signals (`KILL`)
    ``SIGKILL`` where it exists; ``SIGTERM`` on Windows, where ``os.kill`` with it ends the process at once
    (``TerminateProcess``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from functools import cache
from typing import Any, Final

__all__ = [
    "KILL", "OPEN_FLAGS", "WHOLE_FILE_BYTE", "group_alive", "kill_tree", "lock_byte", "lock_file", "locks_available",
    "new_group_options", "set_nonblocking", "signal_group", "unlock_byte",
]

KILL: Final[signal.Signals] = getattr(signal, "SIGKILL", signal.SIGTERM)
"""The signal that ends a process without asking: ``SIGKILL``, or ``SIGTERM`` on Windows (``TerminateProcess``)."""

OPEN_FLAGS: Final[int] = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
"""Added to every ``os.open`` of ours: close-on-exec (POSIX; Windows descriptors are not inherited anyway) and
binary (Windows, where ``os.open`` otherwise writes ``\\r\\n`` for ``\\n``)."""

WHOLE_FILE_BYTE: Final = 1 << 62
"""Where a whole-file lock sits on Windows: one byte past any data a lock file or journal will hold."""


# --------------------------------------------------------------------------- process groups


def new_group_options() -> dict[str, Any]:
    """The ``subprocess``/``anyio.open_process`` keyword arguments that start a child in a group of its own."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def kill_tree(pid: int) -> None:
    """End ``pid`` and every descendant of it at once (Windows; ``ProcessLookupError`` if ``pid`` is gone)."""
    try:
        import psutil
    except ImportError:  # psutil is a dependency off Linux; without it, Windows' own tool
        result = subprocess.run(["taskkill", "/T", "/F", "/PID", str(pid)], capture_output=True, check=False)
        if result.returncode:
            raise ProcessLookupError(pid) from None
        return
    try:
        root = psutil.Process(pid)
        family = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        raise ProcessLookupError(pid) from None
    for process in family:
        with contextlib.suppress(psutil.Error):
            process.kill()


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the group led by ``pgid`` (``ProcessLookupError`` if it is gone; see the module docstring
    for Windows, where `KILL` ends the whole tree and any other signal is a ``CTRL_BREAK_EVENT``)."""
    if sys.platform == "win32":
        if sig == KILL:
            kill_tree(pgid)
        else:
            os.kill(pgid, signal.CTRL_BREAK_EVENT)
    else:
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether the group led by ``pgid`` has a member that is not a zombie (see the module docstring)."""
    if sys.platform == "win32":
        try:
            import psutil
        except ImportError:
            return _pid_listed(pgid)
        try:
            return bool(psutil.Process(pgid).status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False
        except psutil.Error:
            return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True  # macOS: a zombie member counts until its parent reaps it
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return True
    for entry in entries:  # the fields of /proc/PID/stat after the name: state, ppid, pgrp, ...
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) >= 3 and fields[2] == b"%d" % pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _pid_listed(pid: int) -> bool:
    """Windows without psutil: whether ``tasklist`` lists ``pid``."""
    result = subprocess.run(["tasklist", "/FI", f"PID eq {pid}", "/NH"], capture_output=True, check=False)
    return str(pid).encode() in result.stdout


# --------------------------------------------------------------------------- pipes


def set_nonblocking(fd: int) -> bool:
    """Make ``fd`` non-blocking; ``False`` where that cannot be waited on (Windows pipes: use worker threads)."""
    if sys.platform == "win32":
        return False
    with contextlib.suppress(OSError):  # an exotic descriptor stays as it is
        os.set_blocking(fd, False)
    return True


# --------------------------------------------------------------------------- file locks


@cache
def locks_available() -> bool:
    """Whether this Python can lock files (``fcntl`` on POSIX, ``msvcrt`` on Windows)."""
    try:
        if sys.platform == "win32":
            import msvcrt  # noqa: F401
        else:
            import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def lock_file(fd: int, *, wait: bool = False) -> bool:
    """Lock the whole file of ``fd`` for this process (``flock``, exclusive); ``False`` if another holds it
    (never with ``wait``, which waits for it). Granted where `locks_available` is false."""
    if not locks_available():
        return True
    if sys.platform == "win32":
        return _windows_lock(fd, WHOLE_FILE_BYTE, wait=wait)
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except OSError:
        if wait:
            raise
        return False
    return True


def lock_byte(fd: int, offset: int) -> bool:
    """Lock the byte at ``offset`` of ``fd``'s file for this process, without waiting (a POSIX record lock:
    closing *any* descriptor of the file in this process drops them all); ``False`` if another holds it."""
    if not locks_available():
        return True
    if sys.platform == "win32":
        return _windows_lock(fd, offset, wait=False)
    import fcntl

    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except (BlockingIOError, PermissionError):
        return False
    return True


def unlock_byte(fd: int, offset: int) -> None:
    """Release the byte lock `lock_byte` took."""
    if not locks_available():
        return
    if sys.platform == "win32":
        import msvcrt

        with _at(fd, offset):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


@contextlib.contextmanager
def _at(fd: int, offset: int) -> Any:
    """The file position at ``offset`` for the block (``msvcrt.locking`` locks from there), then back."""
    saved = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, offset, os.SEEK_SET)
    try:
        yield
    finally:
        os.lseek(fd, saved, os.SEEK_SET)


def _windows_lock(fd: int, offset: int, *, wait: bool) -> bool:
    """Lock one byte with ``msvcrt.locking`` (its own waiting gives up after ten seconds: we wait on)."""
    if sys.platform != "win32":  # pragma: no cover - only called on Windows
        raise NotImplementedError
    import msvcrt

    with _at(fd, offset):
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError:
                if not wait:
                    return False
                time.sleep(0.05)
                continue
            return True
