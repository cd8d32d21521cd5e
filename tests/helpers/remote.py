"""Serving an agent over HTTP/WebSocket for a test: ``python -m acp_agent serve`` as a real process.

:func:`served_agent` starts the server on a free port, waits for the URL it prints on stderr, and on
exit stops it with SIGTERM and checks that it exited 0 and left no child process running.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"acp: serving .* at (http://\S+)")


@dataclass
class PrintedUrl:
    """A running process (started by `printing_process`), the URL it printed and its stderr so far."""

    proc: subprocess.Popen[str]
    url: str
    stderr: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "".join(self.stderr)


@dataclass
class ServedAgent(PrintedUrl):
    """A running ``python -m acp_agent serve`` process."""

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http"):]

    def children(self) -> set[int]:
        """Processes whose parent is the server: the terminals its sessions started (not the watchdog that kills
        them if the server is killed, ``acp_agent._util.reaper``, which lives as long as the server)."""
        return {pid for pid in children_of(self.proc.pid) if not is_watchdog(pid)}


def is_watchdog(pid: int) -> bool:
    """Whether ``pid`` is a terminal watchdog (it runs ``acp_agent/_util/reaper.py``)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(arg.endswith(b"reaper.py") for arg in argv)


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (zombies excluded)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(condition: object, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition()`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def printing_process(command: list[str], url_line: re.Pattern[str], what: str,
                     env: dict[str, str] | None = None, open_files: int | None = None,
                     ) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """Run ``command`` (in its own process group, from the repository root) until it prints a line matching
    ``url_line`` on stderr; yield the process, the URL (group 1) and the stderr lines so far (kept growing).
    ``open_files``: the process's file-descriptor limit, as ``ulimit -n`` sets it.

    On exit: SIGTERM, an exit status 0 within 20 s, and none of its children left running.
    """

    def limit_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    # ROOT first; a PYTHONPATH already set (make test's run on the lowest uvicorn supported) stays after it.
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    full_env = {**os.environ, "PYTHONPATH": python_path, **(env or {})}
    proc = subprocess.Popen(command, cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=limit_files if open_files is not None else None)
    assert proc.stderr is not None
    lines: list[str] = []
    url: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = url_line.search(line)
            if match and not url:
                url.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not ready.wait(30) or not url:
            raise AssertionError(f"the {what} printed no URL:\n{''.join(lines)}")
        yield proc, url[0], lines
        children = children_of(proc.pid)  # the watchdog too: it ends with the server
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the {what} did not exit within 20s of SIGTERM:\n{''.join(lines)}") from None
        assert code == 0, f"the {what} exited {code}:\n{''.join(lines)}"
        wait_until(lambda: not any(alive(pid) for pid in children), 10, f"the {what}'s children to be gone")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(5)


@contextmanager
def served_agent(agent: Path | str, *args: str, env: dict[str, str] | None = None,
                 open_files: int | None = None) -> Iterator[ServedAgent]:
    """Serve ``agent`` (a file or module spec) on a free loopback port for the duration of the block
    (``open_files``: the server's file-descriptor limit, as ``ulimit -n`` sets it). Sessions may live anywhere but
    ``/`` itself (``--workspace /``, unless ``args`` names one): the tests' ``cwd`` is ``/tmp``, ``tmp_path`` or the
    repository; tests/e2e/test_hosting_e2e.py checks the workspace itself."""
    workspace = [] if "--workspace" in args else ["--workspace", "/"]
    command = [sys.executable, "-m", "acp_agent", "serve", str(agent), "--port", "0", *workspace, *args]
    with printing_process(command, URL_LINE, "server", env, open_files) as (proc, url, lines):
        yield ServedAgent(proc, url, lines)
