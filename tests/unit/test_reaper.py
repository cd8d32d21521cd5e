"""``acp_agent._util.reaper``: what a dead agent's terminals leave is killed, and never a process that merely
has a recorded number (a pid used again)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_agent._util import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc (Linux)")


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
        assert reaper.reap_ledgers(tmp_path) == 1
        assert gone_soon(dead)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b" * 32]
        time.sleep(0.2)
        assert alive(live.pid)
    finally:
        os.close(fd)
