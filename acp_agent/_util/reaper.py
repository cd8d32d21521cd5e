"""Killing what an agent's terminals leave behind when the agent dies without stopping them.

An agent killed by SIGKILL (or the OOM killer) runs no clean-up, so the process groups of its terminals
would live on (a dev server keeping its port). Two parts of `acp_agent._util.processes` use this
module, both from the same records, lines of text:

- ``+PGID START``: a terminal's process group, led by the process ``PGID`` that started at ``START``
  (clock ticks after boot, ``/proc/PID/stat``: a pid used again later has another start time);
- ``-PGID``: that group is gone.

The **watchdog** is one small process per agent process, started with its first terminal, in a session of its
own (group signals aimed at the agent miss it). It reads those lines on its stdin, a pipe only the agent
holds; when the pipe ends (the agent ended, however) it kills what is left (`reap`) and exits. It runs
this file as a script (``python -I -S reaper.py MARK LEDGER``: no site packages, nothing of acp-agent
imported), and deletes the ledger once it reaped.

The **ledger** is the same lines in a file, ``<data dir>/processes/<MARK>``, locked (``flock``) by the agent
while it lives. If the watchdog died too, the next agent to start a terminal or a connection finds ledgers
nobody locks (`reap_ledgers`), reaps them, and deletes them.

What is killed: each recorded group whose leader is still the process recorded (same pid, same start time;
never a group that merely has the number), and every process whose environment holds ``MARK_ENV=MARK``
(each terminal gets it, and its descendants inherit it, also one that left the group with ``setsid``).
``MARK`` is 128 random bits, so it names this agent's processes and nobody else's.

Where the answers come from: on Linux, ``/proc`` (start times in clock ticks after boot, environments, group
ids), with no third-party module, so the watchdog runs with ``-S`` (no site packages). Elsewhere (macOS,
Windows, Linux without ``/proc``), ``psutil``: start times are its creation times (in milliseconds), marked
processes are found through its ``environ()`` (processes of other users, which it may not read, are skipped:
a terminal's processes are the agent's user's); the watchdog then runs with site packages, where psutil is
installed. Without psutil there (it is a dependency of acp-agent off Linux) `available` is false: no
watchdog, and a killed agent's terminals live on. A group is killed with ``SIGKILL`` to the group (POSIX) or,
on Windows, by ending the recorded process and its descendants (psutil).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

__all__ = ["MARK_ENV", "apply", "available", "parse", "read_proc", "reap", "reap_ledgers", "start_time",
           "stat_fields", "uses_proc"]

MARK_ENV = "ACP_TERMINAL_OWNER"
"""The variable every terminal's process gets: the mark of the agent process that started it."""

_ROUNDS = 5  # scans for marked processes (one may fork while the previous scan kills)

_USE_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
"""Whether answers come from ``/proc`` (Linux) rather than psutil (elsewhere; tests switch it off on Linux)."""

_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # SIGTERM on Windows: os.kill then ends it at once


def uses_proc() -> bool:
    """Whether answers come from ``/proc`` (then the watchdog needs no site packages)."""
    return _USE_PROC


def available() -> bool:
    """Whether processes can be told apart and found here: ``/proc``, or else psutil (see the module docstring)."""
    if _USE_PROC:
        return True
    try:
        import psutil  # noqa: F401
    except ImportError:
        return False
    return True


def read_proc(name: str) -> Iterator[tuple[int, bytes]]:
    """``(pid, contents of /proc/PID/<name>)`` for every process whose file can be read (``OSError`` without
    ``/proc``)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            yield int(entry), data


def stat_fields(stat: bytes) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the name: state, ppid, pgrp, ... (the name may hold spaces and
    parentheses)."""
    return stat[stat.rfind(b")") + 2:].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot from ``/proc``, or psutil's creation time in milliseconds),
    or ``None`` if no such process runs (a zombie does not; nor is there an answer without either)."""
    if not _USE_PROC:
        return _psutil_start_time(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = stat_fields(f.read())
    except OSError:
        return None
    try:
        return None if fields[0] in (b"Z", b"X") else int(fields[19])
    except (IndexError, ValueError):
        return None


def _psutil_start_time(pid: int) -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return round(process.create_time() * 1000)
    except psutil.Error:
        return None


def apply(groups: dict[int, int], line: bytes) -> None:
    """Apply one record (``+PGID START`` or ``-PGID``) to ``groups`` (``{pgid: start}``); a line cut short by a
    kill is ignored."""
    parts = line.split()
    try:
        if len(parts) == 2 and parts[0].startswith(b"+"):
            groups[int(parts[0][1:])] = int(parts[1])
        elif len(parts) == 1 and parts[0].startswith(b"-"):
            groups.pop(int(parts[0][1:]), None)
    except ValueError:
        return


def parse(lines: Iterable[bytes]) -> dict[int, int]:
    """The groups still recorded after ``lines``, as ``{pgid: start}``."""
    groups: dict[int, int] = {}
    for line in lines:
        apply(groups, line)
    return groups


def _marked(mark: str) -> list[int]:
    """The processes whose environment holds ``MARK_ENV=mark``."""
    me = os.getpid()
    if not _USE_PROC:
        return _psutil_marked(mark, me)
    needle = f"{MARK_ENV}={mark}".encode()
    try:
        return [pid for pid, environ in read_proc("environ") if pid != me and needle in environ.split(b"\0")]
    except OSError:
        return []


def _psutil_marked(mark: str, me: int) -> list[int]:
    try:
        import psutil
    except ImportError:
        return []
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != me and process.environ().get(MARK_ENV) == mark:
                found.append(process.pid)
        except psutil.Error:
            continue  # gone, or another user's
    return found


def _kill_group(pgid: int) -> None:
    """SIGKILL the group (POSIX); on Windows end the recorded process and its descendants."""
    if sys.platform == "win32":
        import psutil

        try:
            root = psutil.Process(pgid)
            family = [*root.children(recursive=True), root]
        except psutil.NoSuchProcess:
            raise ProcessLookupError(pgid) from None
        for process in family:
            with contextlib.suppress(psutil.Error):
                process.kill()
    else:
        os.killpg(pgid, _KILL)


def reap(groups: dict[int, int], mark: str | None) -> int:
    """SIGKILL each group of ``groups`` whose leader is the process recorded, and every process marked ``mark``;
    how many were signalled."""
    killed: set[int] = set()
    for pgid, started in groups.items():
        if start_time(pgid) == started:
            with contextlib.suppress(OSError):
                _kill_group(pgid)
                killed.add(pgid)
    for _ in range(_ROUNDS if mark else 0):
        pids = [pid for pid in _marked(mark or "") if pid not in killed]  # a killed one may linger as a zombie
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, _KILL)
                killed.add(pid)
    return len(killed)


def reap_ledgers(directory: Path, lock_file: Callable[[int], bool], open_flags: int = 0) -> int:
    """Reap the ledgers in ``directory`` that no live process locks, then delete them; how many processes
    were signalled. ``lock_file(fd)`` takes a file's lock without waiting (`acp_agent._util.portable.lock_file`,
    handed in by the agent's side: this file imports nothing of acp-agent, it runs as a script)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    killed = 0
    for name in names:
        if name.startswith("."):
            continue  # one being made
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | open_flags)
        except OSError:
            continue
        try:
            if not lock_file(fd):
                continue  # its agent is alive
            with os.fdopen(os.dup(fd), "rb") as file:
                groups = parse(file)
            killed += reap(groups, name)
            with contextlib.suppress(OSError):
                os.unlink(path)
        finally:
            os.close(fd)
    return killed


def main(mark: str, ledger: str | None = None) -> None:
    """The watchdog: read records on stdin until it ends, then reap them and delete the ``ledger`` (see the
    module docstring)."""
    for name in ("SIGINT", "SIGHUP", "SIGPIPE", "SIGBREAK"):  # those that exist here
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    groups: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for line in sys.stdin.buffer:
            apply(groups, line)
    reap(groups, mark)
    if ledger:
        with contextlib.suppress(OSError):
            os.unlink(ledger)


if __name__ == "__main__":
    main(*sys.argv[1:3])
