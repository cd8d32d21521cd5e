"""Tests for acp_agent._util.processes (run on both the asyncio and trio backends)."""

from __future__ import annotations

import gc
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from acp_agent._util import processes
from acp_agent._util.processes import ExitStatus, ManagedProcess, shell_argv

pytestmark = pytest.mark.anyio

TIMEOUT = 10


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Collector:
    """on_output callback that records every chunk."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.changed = anyio.Event()

    async def __call__(self, data: bytes) -> None:
        assert data, "empty chunks must never be delivered"
        self.chunks.append(data)
        self.changed.set()
        self.changed = anyio.Event()

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    async def wait_for(self, needle: bytes) -> None:
        while needle not in self.data:
            await self.changed.wait()


async def wait_until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await anyio.sleep(0.01)


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_group_gone(pgid: int) -> None:
    # terminate() guarantees no *live* member is left; orphaned grandchildren may stay
    # zombies until init reaps them, and killpg(pgid, 0) still succeeds for zombies.
    while group_exists(pgid):
        await anyio.sleep(0.02)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def live_members(pgid: int) -> list[int]:
    """Non-zombie processes in group pgid (Linux /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


async def start_shell(
    tg: anyio.abc.TaskGroup, command: str, cwd: Path, collector: Collector, **kwargs: object
) -> ManagedProcess:
    return await ManagedProcess.start_shell(
        command,
        cwd=str(cwd),
        on_output=collector,
        task_group=tg,
        **kwargs,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- output


async def test_bulk_output_is_exact_ordered_and_coalesced(tmp_path: Path) -> None:
    writes, size = 5000, 1000
    script = textwrap.dedent(
        f"""
        import sys
        out = sys.stdout.buffer
        for i in range({writes}):
            out.write(b"%09d|" % i + bytes([65 + i % 26]) * {size - 10})
            out.flush()
        """
    )
    expected = b"".join(b"%09d|" % i + bytes([65 + i % 26]) * (size - 10) for i in range(writes))
    collector = Collector()
    flush_bytes = 64 * 1024
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(
                [sys.executable, "-c", script],
                cwd=str(tmp_path),
                on_output=collector,
                task_group=tg,
                flush_bytes=flush_bytes,
            )
            status = await proc.wait()
    assert status == ExitStatus(exit_code=0, signal=None)
    assert len(collector.data) == writes * size
    assert collector.data == expected
    assert proc.total_bytes == writes * size
    assert max(len(c) for c in collector.chunks) <= flush_bytes
    assert len(collector.chunks) < writes // 10, len(collector.chunks)
    assert proc.finished and proc.exited and proc.returncode == 0


async def test_head_c_output_with_small_flush_bytes(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(
                ["head", "-c", "300000", "/dev/zero"],
                cwd=str(tmp_path),
                on_output=collector,
                task_group=tg,
                flush_bytes=4096,
            )
            assert await proc.wait() == ExitStatus(0, None)
    assert collector.data == bytes(300000)
    assert max(len(c) for c in collector.chunks) <= 4096


async def test_slow_consumer_applies_back_pressure(tmp_path: Path) -> None:
    release = anyio.Event()
    got_first = anyio.Event()
    chunks: list[bytes] = []

    async def slow(data: bytes) -> None:
        chunks.append(data)
        got_first.set()
        await release.wait()

    total = 4 * 1024 * 1024
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(
                ["head", "-c", str(total), "/dev/zero"],
                cwd=str(tmp_path),
                on_output=slow,
                task_group=tg,
            )
            await got_first.wait()
            await anyio.sleep(0.5)
            # Nobody reads while the consumer is busy: the writer is stuck on a full pipe.
            assert not proc.exited
            assert len(chunks) == 1
            release.set()
            assert await proc.wait() == ExitStatus(0, None)
    assert b"".join(chunks) == bytes(total)


async def test_time_based_flush_delivers_before_exit(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "printf hello; sleep 30", tmp_path, collector)
            await collector.wait_for(b"hello")
            assert not proc.exited
            assert collector.data == b"hello"
            await proc.terminate(grace=0.3)
            status = await proc.wait()
    assert status == ExitStatus(exit_code=None, signal="SIGTERM")


async def test_stderr_is_merged_in_order(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(
                tg, "echo out1; echo err1 >&2; echo out2; echo err2 >&2", tmp_path, collector
            )
            await proc.wait()
    assert collector.data == b"out1\nerr1\nout2\nerr2\n"


async def test_tail_keeps_only_last_bytes(tmp_path: Path) -> None:
    collector = Collector()
    script = "import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(10000)))"
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(
                [sys.executable, "-c", script],
                cwd=str(tmp_path),
                on_output=collector,
                task_group=tg,
                tail_limit=1000,
                flush_bytes=700,
            )
            await proc.wait()
    expected = bytes(i % 251 for i in range(10000))
    assert collector.data == expected
    assert proc.tail() == expected[-1000:]
    assert proc.total_bytes == 10000
    assert proc.tail_limit == 1000


async def test_tail_shorter_than_limit_and_zero_limit(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            a = await start_shell(tg, "printf abc", tmp_path, Collector())
            b = await start_shell(tg, "printf abc", tmp_path, Collector(), tail_limit=0)
            await a.wait()
            await b.wait()
    assert a.tail() == b"abc"
    assert b.tail() == b""
    assert b.total_bytes == 3


# --------------------------------------------------------------------------- exit status


@pytest.mark.parametrize("code", [0, 3])
async def test_exit_code(tmp_path: Path, code: int) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, f"exit {code}", tmp_path, Collector())
            status = await proc.wait()
    assert status == ExitStatus(exit_code=code, signal=None)
    assert proc.exit_status == status
    assert proc.returncode == code


def test_exit_status_from_returncode() -> None:
    assert ExitStatus.from_returncode(0) == ExitStatus(0, None)
    assert ExitStatus.from_returncode(-signal.SIGKILL) == ExitStatus(None, "SIGKILL")
    assert ExitStatus.from_returncode(-200) == ExitStatus(None, "SIG200")


async def test_missing_executable_raises(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        with pytest.raises(FileNotFoundError):
            await ManagedProcess.start(
                [str(tmp_path / "does-not-exist")], cwd=str(tmp_path), on_output=Collector(), task_group=tg
            )


# --------------------------------------------------------------------------- termination


async def test_terminate_reports_sigterm(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(
                ["sleep", "30"], cwd=str(tmp_path), on_output=Collector(), task_group=tg
            )
            assert proc.pgid == proc.pid == os.getpgid(proc.pid)
            assert os.getsid(proc.pid) == proc.pid
            await proc.terminate()
            assert proc.finished
            status = await proc.wait()
    assert status == ExitStatus(exit_code=None, signal="SIGTERM")
    await wait_group_gone(proc.pgid)


async def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, 'trap "" TERM; echo ready; sleep 30', tmp_path, collector)
            await collector.wait_for(b"ready")
            await proc.terminate(grace=0.3)
            status = await proc.wait()
    assert status == ExitStatus(exit_code=None, signal="SIGKILL")
    assert live_members(proc.pgid) == []
    await wait_group_gone(proc.pgid)


async def test_terminate_kills_grandchildren(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30 & echo ready; sleep 30", tmp_path, collector)
            await collector.wait_for(b"ready")
            await wait_until(lambda: len(live_members(proc.pgid)) >= 3)
            await proc.terminate(grace=0.3)
            assert live_members(proc.pgid) == []
            assert (await proc.wait()).signal == "SIGTERM"
    await wait_group_gone(proc.pgid)


async def test_terminate_when_child_exited_but_grandchild_holds_stdout(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30 & echo started; exit 5", tmp_path, collector)
            await collector.wait_for(b"started")
            await wait_until(lambda: proc.exited)
            assert proc.exit_status == ExitStatus(5, None)
            # The grandchild still holds the pipe: wait() keeps waiting for the output.
            with anyio.move_on_after(0.3) as scope:
                await proc.wait()
            assert scope.cancelled_caught, "wait() returned although the pipe is still open"
            assert live_members(proc.pgid)
            await proc.terminate(grace=0.3)
            assert proc.finished
            status = await proc.wait()
    assert status == ExitStatus(5, None)
    assert collector.data == b"started\n"
    await wait_group_gone(proc.pgid)


async def test_terminate_gives_up_on_pipe_held_outside_group(tmp_path: Path) -> None:
    collector = Collector()
    escaped_pid = 0
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                proc = await start_shell(tg, "setsid sleep 30 & echo $!; sleep 30", tmp_path, collector)
                await collector.wait_for(b"\n")
                escaped_pid = int(collector.data.split()[0])
                await proc.terminate(grace=0.3)
                status = await proc.wait()
        assert status == ExitStatus(None, "SIGTERM")
        assert live_members(proc.pgid) == []
        os.kill(escaped_pid, 0)  # out of reach of group signals, by design
    finally:
        if escaped_pid:
            os.kill(escaped_pid, signal.SIGKILL)


async def test_terminate_is_idempotent_and_safe_after_exit(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30", tmp_path, Collector())
            async with anyio.create_task_group() as callers:
                for _ in range(3):
                    callers.start_soon(proc.terminate, 0.3)
            await proc.terminate()
            assert (await proc.wait()).signal == "SIGTERM"

            done = await start_shell(tg, "exit 0", tmp_path, Collector())
            assert await done.wait() == ExitStatus(0, None)
            await done.terminate()
            await done.terminate()
            done.kill_now()
            assert await done.wait() == ExitStatus(0, None)


async def test_kill_now(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30 & sleep 30", tmp_path, Collector())
            await wait_until(lambda: len(live_members(proc.pgid)) >= 3)
            proc.kill_now()
            status = await proc.wait()
    assert status == ExitStatus(None, "SIGKILL")
    await wait_group_gone(proc.pgid)


# --------------------------------------------------------------------------- cancellation


async def test_cancelling_task_group_kills_group(tmp_path: Path) -> None:
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30 & sleep 30", tmp_path, Collector())
            await wait_until(lambda: len(live_members(proc.pgid)) >= 3)
            tg.cancel_scope.cancel()
        assert proc.exit_status == ExitStatus(None, "SIGKILL")
        # SIGKILL went to the whole group; a loaded machine may take a moment to finish them off.
        await wait_until(lambda: live_members(proc.pgid) == [])
        await wait_group_gone(proc.pgid)


async def test_cancelling_after_child_exit_kills_grandchildren(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "sleep 30 & echo started", tmp_path, collector)
            await collector.wait_for(b"started")
            await wait_until(lambda: proc.exited)
            assert live_members(proc.pgid)
            tg.cancel_scope.cancel()
        await wait_until(lambda: live_members(proc.pgid) == [])
        await wait_group_gone(proc.pgid)


async def test_on_output_error_propagates_and_kills_group(tmp_path: Path) -> None:
    async def broken(data: bytes) -> None:
        raise RuntimeError("consumer failed")

    proc: ManagedProcess | None = None
    with anyio.fail_after(TIMEOUT), pytest.raises(BaseExceptionGroup) as info:
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start_shell(
                "echo hi; sleep 30 & sleep 30", cwd=str(tmp_path), on_output=broken, task_group=tg
            )
    assert info.group_contains(RuntimeError, match="consumer failed")
    assert proc is not None
    with anyio.fail_after(TIMEOUT):
        await wait_until(lambda: live_members(proc.pgid) == [])
    await wait_group_gone(proc.pgid)


# --------------------------------------------------------------------------- arguments / environment


async def test_relative_cwd_rejected(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        with pytest.raises(ValueError, match="absolute"):
            await ManagedProcess.start(["true"], cwd="relative/dir", on_output=Collector(), task_group=tg)
        with pytest.raises(ValueError):
            await ManagedProcess.start([], cwd=str(tmp_path), on_output=Collector(), task_group=tg)
        with pytest.raises(TypeError):
            await ManagedProcess.start("true", cwd=str(tmp_path), on_output=Collector(), task_group=tg)


async def test_cwd_is_used(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await ManagedProcess.start(["pwd", "-P"], cwd=tmp_path, on_output=collector, task_group=tg)
            await proc.wait()
    assert collector.data == str(tmp_path.resolve()).encode() + b"\n"


async def test_env_is_passed_and_parent_env_inherited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_TEST_PARENT", "from-parent")
    monkeypatch.setenv("ACP_TEST_OVERRIDE", "parent-value")
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(
                tg,
                'printf "%s|%s|%s" "$ACP_TEST_PARENT" "$ACP_TEST_CHILD" "$ACP_TEST_OVERRIDE"',
                tmp_path,
                collector,
                env={"ACP_TEST_CHILD": "from-caller", "ACP_TEST_OVERRIDE": "caller-value"},
            )
            await proc.wait()
    assert collector.data == b"from-parent|from-caller|caller-value"
    assert "ACP_TEST_CHILD" not in os.environ


async def test_stdin_is_devnull(tmp_path: Path) -> None:
    collector = Collector()
    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as tg:
            proc = await start_shell(tg, "cat; echo done", tmp_path, collector)
            await proc.wait()
    assert collector.data == b"done\n"


def test_shell_argv() -> None:
    assert shell_argv("echo hi") == ["/bin/sh", "-c", "echo hi"]
    assert shell_argv("x", shell="/bin/bash") == ["/bin/bash", "-c", "x"]


# --------------------------------------------------------------------------- atexit safety net


async def test_atexit_kills_leftover_groups(tmp_path: Path, anyio_backend: str) -> None:
    package_root = str(Path(processes.__file__).parents[2])  # the folder holding acp_agent/
    script = textwrap.dedent(
        f"""
        import threading, anyio
        from acp_agent._util.processes import ManagedProcess

        started = threading.Event()
        holder = []

        async def noop(data):
            pass

        async def main():
            async with anyio.create_task_group() as tg:
                holder.append(await ManagedProcess.start_shell(
                    "sleep 30 & sleep 30", cwd={str(tmp_path)!r}, on_output=noop, task_group=tg))
                started.set()
                await anyio.sleep_forever()

        # The event loop runs in a daemon thread that is simply abandoned at exit, so
        # no cancellation cleanup runs: only the atexit hook can kill the group.
        threading.Thread(
            target=anyio.run, args=(main,), kwargs={{"backend": {anyio_backend!r}}}, daemon=True
        ).start()
        started.wait(5)
        print(holder[0].pgid, flush=True)
        """
    )
    with anyio.fail_after(TIMEOUT):
        result = await anyio.run_process(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONPATH": package_root},
        )
        pgid = int(result.stdout.split()[0])
        await wait_until(lambda: live_members(pgid) == [])
        await wait_group_gone(pgid)


async def test_start_into_a_closed_task_group_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session shutting down while a process spawns: the start fails, and the process is
    killed and reaped there (no zombie, no registered group), since no task will reap it."""
    async with anyio.create_task_group() as tg:
        pass  # closed: it takes no new tasks

    async def ignore(data: bytes) -> None:
        pass

    started: list[int] = []
    register = processes._register_group
    monkeypatch.setattr(processes, "_register_group", lambda pgid: (started.append(pgid), register(pgid)))
    with pytest.raises(RuntimeError):
        await ManagedProcess.start(["sleep", "30"], cwd=tmp_path, on_output=ignore, task_group=tg)
    [pid] = started
    assert pid not in processes._registered_groups
    with pytest.raises(ChildProcessError):  # already reaped: not even a zombie is left
        os.waitpid(pid, os.WNOHANG)


class RefusingTaskGroup:
    """A task group in the step where it is closing: it makes the task's coroutine, then refuses
    the task (what anyio does on trio once the nursery has closed but the group is still active)."""

    def __init__(self) -> None:
        self.made: list[Any] = []

    def start_soon(self, func: Callable[..., Any], *args: Any, name: object = None) -> None:
        self.made.append(func(*args))
        raise RuntimeError("Nursery is closed to new arrivals")


def leaks(caught: list[warnings.WarningMessage]) -> list[str]:
    """Coroutines never awaited, processes never reaped and pipes never closed among ``caught``."""
    return [str(w.message) for w in caught
            if any(sign in str(w.message) for sign in ("never awaited", "is still running", "unclosed file"))]


async def test_a_task_refused_after_its_coroutine_was_made_leaves_no_coroutine_behind(tmp_path: Path) -> None:
    """The refused pump's coroutine is closed (no "coroutine ... was never awaited" warning), its pipe
    is closed, and the process is reaped and forgotten."""

    async def ignore(data: bytes) -> None:
        pass

    group = RefusingTaskGroup()
    fds_before = set(os.listdir("/proc/self/fd"))
    gc.collect()  # what earlier tests left behind is not ours to judge
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="closed to new arrivals"):
            await ManagedProcess.start(["sleep", "30"], cwd=tmp_path, on_output=ignore,
                                       task_group=group)  # type: ignore[arg-type]
        [made] = group.made
        assert made.cr_frame is None  # closed, never started
        del made
        group.made.clear()
        gc.collect()
    assert leaks(caught) == []
    assert set(os.listdir("/proc/self/fd")) <= fds_before  # the pipe's read end is closed


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_a_process_started_as_its_task_group_closes_leaves_no_coroutine_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real race (trio): the spawn returns in the scheduling step where the task group's last
    task has ended and its nursery has closed. Trio runs the two in either order, so it is tried
    until the start hits that step; nothing may be left unawaited or unreaped either way."""
    real_open = anyio.open_process
    outcomes: set[str] = set()

    async def ignore(data: bytes) -> None:
        pass

    async def attempt() -> None:
        gate = anyio.Event()

        async def open_late(*args: Any, **kwargs: Any) -> Any:
            process = await real_open(*args, **kwargs)
            await gate.wait()  # returns together with the group's last task ending
            return process

        monkeypatch.setattr(anyio, "open_process", open_late)
        group: list[anyio.abc.TaskGroup] = []
        entered = anyio.Event()

        async def closing_group() -> None:
            async with anyio.create_task_group() as tg:
                group.append(tg)
                entered.set()

                async def last_task() -> None:
                    await anyio.sleep(0.02)
                    gate.set()

                tg.start_soon(last_task)

        async def starter() -> None:
            await entered.wait()
            try:
                proc = await ManagedProcess.start(["true"], cwd=tmp_path, on_output=ignore, task_group=group[0])
            except RuntimeError as exc:
                outcomes.add(str(exc))
            else:  # pragma: no cover - trio never lets a closed nursery take a task
                outcomes.add(f"started {proc.pid}")

        async with anyio.create_task_group() as outer:
            outer.start_soon(closing_group)
            outer.start_soon(starter)

    gc.collect()  # what earlier tests left behind is not ours to judge
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(60):
            await attempt()
            if "Nursery is closed to new arrivals" in outcomes:
                break
        gc.collect()
    assert "Nursery is closed to new arrivals" in outcomes
    assert leaks(caught) == []


def test_child_environment_withholds_the_sdk_variables_and_the_listed_names() -> None:
    parent = {"PATH": "/bin", "ACP_AGENT_TOKEN": "t", "ACP_AGENT_STORE": "postgres://u:p@h/d",
              "ACP_AGENT_WITHHOLD_ENV": " API_KEY , AWS_* ,", "API_KEY": "k", "AWS_SECRET": "s",
              "API_KEY_HINT": "kept"}
    assert processes.child_environment(parent=parent) == {"PATH": "/bin", "API_KEY_HINT": "kept"}
    # What the caller passes is given as passed, even a withheld name.
    given = processes.child_environment({"API_KEY": "chosen", "X": "1"}, parent=parent)
    assert given == {"PATH": "/bin", "API_KEY_HINT": "kept", "API_KEY": "chosen", "X": "1"}
    assert processes.child_environment(parent={"ACP_AGENT_DATA_DIR": "/d", "HOME": "/h"}) == {"HOME": "/h"}
