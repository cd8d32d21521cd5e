"""``acp_agent._util.reaper``: what a dead agent's terminals leave is killed, and never a process that merely
has a recorded number (a pid used again).

Each test runs twice: with ``/proc`` (Linux) and with psutil (what macOS and Windows use, ``/proc`` switched
off here)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_agent._util import portable, reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="these tests use fcntl and sleep(1)")


@pytest.fixture(autouse=True, params=["proc", "psutil"])
def source(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the reaper's answers come from: ``/proc``, or psutil as on macOS and Windows."""
    monkeypatch.setattr(reaper, "_USE_PROC", request.param == "proc")
    assert reaper.available()
    return str(request.param)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (not a zombie)."""
    return reaper.start_time(pid) is not None


def gone_soon(process: subprocess.Popen[bytes]) -> bool:
    """Whether ``process`` ends within 5 seconds (reaped here)."""
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        return False
    return True


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def sleeper(sleepers: list[subprocess.Popen[bytes]], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(["sleep", "60"], start_new_session=True, env={**os.environ, **(env or {})})
    sleepers.append(process)
    return process


def test_records_apply_in_order_and_a_cut_line_is_ignored() -> None:
    assert reaper.parse([b"+10 500\n", b"+11 600\n", b"-10\n", b"+12 7", b"+1x 3\n"]) == {11: 600, 12: 7}
    assert reaper.start_time(os.getpid()) == reaper.start_time(os.getpid()) is not None
    assert reaper.start_time(2**22 + 12345) is None


def test_a_group_is_killed_only_if_its_leader_is_the_one_recorded(sleepers: list[subprocess.Popen[bytes]]) -> None:
    ours, reused = sleeper(sleepers), sleeper(sleepers)
    ours_start = reaper.start_time(ours.pid)
    reused_start = reaper.start_time(reused.pid)
    assert ours_start is not None and reused_start is not None
    # ``reused`` stands for a process that got a recorded number later: its start time is not the one recorded.
    assert reaper.reap({ours.pid: ours_start, reused.pid: reused_start - 1}, None) == 1
    assert gone_soon(ours)
    time.sleep(0.2)
    assert alive(reused.pid)


def test_marked_processes_are_killed_and_no_other(sleepers: list[subprocess.Popen[bytes]]) -> None:
    marked = sleeper(sleepers, {reaper.MARK_ENV: "m" * 32})
    other_mark = sleeper(sleepers, {reaper.MARK_ENV: "n" * 32})
    unmarked = sleeper(sleepers)
    assert reaper.reap({}, "m" * 32) == 1
    assert gone_soon(marked)
    time.sleep(0.2)
    assert alive(other_mark.pid) and alive(unmarked.pid)


def test_only_ledgers_nobody_locks_are_reaped_and_deleted(tmp_path: Path,
                                                          sleepers: list[subprocess.Popen[bytes]]) -> None:
    dead, live = sleeper(sleepers), sleeper(sleepers)
    (tmp_path / ("a" * 32)).write_text(f"+{dead.pid} {reaper.start_time(dead.pid)}\n")
    held = tmp_path / ("b" * 32)
    held.write_text(f"+{live.pid} {reaper.start_time(live.pid)}\n")
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # its agent is alive
        assert reaper.reap_ledgers(tmp_path, portable.lock_file) == 1
        assert gone_soon(dead)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b" * 32]
        time.sleep(0.2)
        assert alive(live.pid)
    finally:
        os.close(fd)


def test_the_watchdog_kills_recorded_groups_and_marked_processes(tmp_path: Path, source: str,
                                                                  sleepers: list[subprocess.Popen[bytes]]) -> None:
    """The watchdog, as on Linux and as on macOS (psutil, with site packages): when its stdin ends it kills what is
    recorded and marked, and deletes the ledger."""
    group, left_group = sleeper(sleepers), sleeper(sleepers, {reaper.MARK_ENV: "c" * 32})
    ledger = tmp_path / ("c" * 32)
    ledger.write_text("")
    script = (f"import sys; sys.path.insert(0, sys.argv[1]); import reaper; reaper._USE_PROC = {source == 'proc'}; "
              "reaper.main(sys.argv[2], sys.argv[3])")
    watchdog = subprocess.Popen([sys.executable, "-I", "-c", script, str(Path(reaper.__file__).parent), "c" * 32,
                                 str(ledger)], stdin=subprocess.PIPE)
    assert watchdog.stdin is not None
    watchdog.stdin.write(f"+{group.pid} {reaper.start_time(group.pid)}\n".encode())
    watchdog.stdin.close()
    assert watchdog.wait(10) == 0
    assert gone_soon(group) and gone_soon(left_group)
    assert not ledger.exists()
