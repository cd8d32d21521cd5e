"""The agent's side of `acp_agent._util.reaper`: this process's watchdog, its ledger, and its mark.

`mark` is called before a terminal's process starts: the first call starts the watchdog and opens the
ledger (and reaps the ledgers of agents that died with their watchdog, `reap_left_behind`), and every
call returns the mark the process's environment gets (``reaper.MARK_ENV``). `started` and
`ended` record a group in both. A normal exit deletes the ledger and closes the watchdog's pipe (it then
kills what left the groups, e.g. a ``setsid`` daemon, and exits).

Costs, measured by ``bench/terminal_watch.py``: the first terminal of a process pays for starting the
watchdog (one ``fork``/``exec``; its Python starts beside the agent, not in its way); every terminal start
and end then costs two ``write`` calls of about 20 bytes.

Platforms: on Linux the watchdog reads ``/proc`` and runs with ``-I -S``; on macOS and Windows it uses psutil
and runs with ``-I`` only (site packages are where psutil is). Where neither is there
(`acp_agent._util.reaper.available` is false) there is no watchdog: `mark` answers ``None`` and a killed
agent leaves its terminals running. On Windows the watchdog starts in a new process group
(``CREATE_NEW_PROCESS_GROUP``), so a console Ctrl+C aimed at the agent misses it, and there is no ledger
(Windows cannot rename a file that is open): if the watchdog is killed with the agent, nobody reaps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

from . import portable, reaper
from .paths import ledger_dir

# Loaded with the first terminal of a process (``processes`` imports this module then), never at start-up.

__all__ = ["current", "ended", "mark", "reap_left_behind", "started", "stop"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_mark: str | None = None
_watchdog: subprocess.Popen[bytes] | None = None
_ledger: int | None = None
_ledger_path: Path | None = None
_retired: list[subprocess.Popen[bytes]] = []  # watchdogs let go (kept referenced: they end on their own)


def _supported() -> bool:
    return reaper.available()


def reap_left_behind() -> int:
    """Reap the ledgers of agents that died with their watchdog (see `acp_agent._util.reaper`); how many processes
    were signalled."""
    if not _supported() or not portable.locks_available():
        return 0
    killed = reaper.reap_ledgers(ledger_dir(), portable.lock_file, portable.OPEN_FLAGS)
    if killed:
        logger.warning("acp: killed %d process(es) left by terminals of an agent that died", killed)
    return killed


def current() -> str | None:
    """The mark of this process's terminals if the watchdog was started (no waiting, no starting)."""
    return _mark


def mark() -> str | None:
    """The mark of this process's terminals, starting the watchdog and the ledger on first use; ``None`` where
    there is no watchdog (neither ``/proc`` nor psutil: see the module docstring)."""
    global _mark
    if not _supported():
        return None
    with _lock:
        if _mark is None:
            reap_left_behind()
            _mark = secrets.token_hex(16)
            _open_ledger(_mark)
            _start_watchdog(_mark, _ledger_path)
        return _mark


def _open_ledger(name: str) -> None:
    global _ledger, _ledger_path
    if sys.platform == "win32":
        return  # an open file cannot be renamed there: no ledger, the watchdog alone reaps
    directory = ledger_dir()
    temporary, final = directory / f".{name}.new", directory / name
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | portable.OPEN_FLAGS, 0o600)
        if not portable.lock_file(fd):
            os.close(fd)
            raise BlockingIOError("the new ledger is locked by another process")
        os.rename(temporary, final)  # found by others only once locked
    except OSError as exc:
        logger.warning("acp: cannot keep a ledger of terminal processes in %s (%s): if this agent and its "
                       "watchdog are both killed, the next agent cannot reap what they leave", directory, exc)
        return
    _ledger, _ledger_path = fd, final


def _start_watchdog(name: str, ledger: Path | None) -> None:
    global _watchdog
    try:
        _watchdog = subprocess.Popen(
            [sys.executable, *_python_flags(), reaper.__file__, name, *([str(ledger)] if ledger else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True, **portable.new_group_options())
    except OSError as exc:
        logger.warning("acp: cannot start the watchdog of terminal processes (%s): if this agent is killed, "
                       "the next agent reaps what it leaves", exc)


def _python_flags() -> list[str]:
    """Isolated (``-I``); without site packages (``-S``) only where ``/proc`` answers and psutil is not needed."""
    return ["-I", "-S"] if reaper.uses_proc() else ["-I"]


def _record(line: bytes) -> None:
    global _watchdog
    watchdog = _watchdog
    if watchdog is not None and watchdog.stdin is not None:
        try:
            os.write(watchdog.stdin.fileno(), line)
        except OSError as exc:
            logger.warning("acp: the watchdog of terminal processes is gone (%s)", exc)
            _watchdog = None
    if _ledger is not None:
        try:
            os.write(_ledger, line)
        except OSError as exc:
            logger.warning("acp: cannot write the ledger of terminal processes (%s)", exc)


def started(pgid: int) -> None:
    """Record a terminal's new process group (led by ``pgid``)."""
    if _mark is None:
        return
    start = reaper.start_time(pgid)
    if start is not None:
        with _lock:
            _record(f"+{pgid} {start}\n".encode())


def ended(pgid: int) -> None:
    """Record that a group has no live member any more."""
    if _mark is not None:
        with _lock:
            _record(f"-{pgid}\n".encode())


def stop(wait: float = 1.0) -> None:
    """A normal exit (after every group was killed): delete the ledger and let the watchdog finish (waiting up to
    ``wait`` seconds for it to reap what left the groups and exit)."""
    with _lock:
        if _ledger_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(_ledger_path)
        watchdog = _watchdog
        _close()
    if watchdog is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(wait)


def _close() -> None:
    global _mark, _watchdog, _ledger, _ledger_path
    if _ledger is not None:
        with contextlib.suppress(OSError):
            os.close(_ledger)
    if _watchdog is not None and _watchdog.stdin is not None:
        with contextlib.suppress(OSError):
            _watchdog.stdin.close()
        _retired.append(_watchdog)
    _mark, _watchdog, _ledger, _ledger_path = None, None, None, None


def _forget_in_child() -> None:
    """A forked child keeps neither the parent's watchdog pipe (its end would hide the parent's death) nor its
    ledger."""
    global _lock
    _lock = threading.Lock()
    _close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
