"""``acp_agent._util.portable`` and the Windows paths of its users, run here with POSIX answers switched off:
pipes read and written in worker threads (stdio and terminals), the Windows shell, file locks between processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from acp_agent import stdio
from acp_agent._util import portable, processes
from acp_agent._util.processes import ManagedProcess, shell_argv

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def blocking_pipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on Windows: no descriptor can be made non-blocking, so its users read and write in threads."""
    monkeypatch.setattr(portable, "set_nonblocking", lambda fd: False)


def test_posix_answers() -> None:
    assert portable.KILL == signal.SIGKILL
    assert portable.new_group_options() == {"start_new_session": True}
    assert portable.locks_available()
    read_fd, write_fd = os.pipe()
    try:
        assert portable.set_nonblocking(read_fd) is True and not os.get_blocking(read_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


@pytest.mark.usefixtures("blocking_pipes")
async def test_stdio_streams_read_and_write_in_threads() -> None:
    read_fd, write_fd = os.pipe()
    out_read, out_write = os.pipe()
    receive, send = stdio.FdReceiveStream(read_fd), stdio.FdSendStream(out_write)
    try:
        assert os.get_blocking(read_fd) and os.get_blocking(out_write)
        assert send.write_now(b"x") == 0  # a write that may block is never made on the event loop
        os.write(write_fd, b"hello")
        assert await receive.receive() == b"hello"
        await send.send(b"world")
        assert os.read(out_read, 10) == b"world"
        os.close(write_fd)
        with pytest.raises(anyio.EndOfStream):
            await receive.receive()
    finally:
        for fd in (read_fd, out_read):
            os.close(fd)
        await send.aclose()


@pytest.mark.usefixtures("blocking_pipes")
async def test_terminal_output_is_read_in_a_thread(tmp_path: Path) -> None:
    chunks: list[bytes] = []

    async def collect(data: bytes) -> None:
        chunks.append(data)

    async with anyio.create_task_group() as tg:
        proc = await ManagedProcess.start_shell("printf one; sleep 0.2; printf two", cwd=str(tmp_path),
                                                on_output=collect, task_group=tg)
        with anyio.fail_after(10):
            status = await proc.wait()
    assert status.exit_code == 0
    assert b"".join(chunks) == b"onetwo"
    assert len(chunks) == 2  # each read delivered at once (nothing waits in the buffer for a read that blocks)


@pytest.mark.usefixtures("blocking_pipes")
async def test_terminate_ends_a_thread_read_even_if_a_process_keeps_the_pipe(tmp_path: Path) -> None:
    """A process that left the group keeps the pipe open: the thread read is abandoned, terminate returns."""
    async def ignore(data: bytes) -> None:
        pass

    script = textwrap.dedent("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"], start_new_session=True)
        print("ready", flush=True)
        import time; time.sleep(30)
    """)
    async with anyio.create_task_group() as tg:
        proc = await ManagedProcess.start([sys.executable, "-c", script], cwd=str(tmp_path), on_output=ignore,
                                          task_group=tg)
        await anyio.sleep(0.5)
        with anyio.fail_after(10):
            await proc.terminate(grace=1)
        assert proc.finished


def test_the_windows_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    assert shell_argv("ls") == ["/bin/sh", "-c", "ls"]
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("COMSPEC", "C:\\Windows\\system32\\cmd.exe")
    assert processes.shell_argv("dir") == ["C:\\Windows\\system32\\cmd.exe", "/c", "dir"]
    assert shell_argv("ls", shell="/bin/bash") == ["/bin/bash", "-c", "ls"]


def test_file_locks_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, sys
            from acp_agent._util import portable
            fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)
            assert portable.lock_file(fd) and portable.lock_byte(os.open({str(path)!r}, os.O_RDWR), 7)
            print("held", flush=True)
            sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline() == b"held\n"
        fd = os.open(path, os.O_RDWR)
        try:
            assert not portable.lock_file(fd)
            assert not portable.lock_byte(fd, 7)
            assert portable.lock_byte(fd, 8)
            portable.unlock_byte(fd, 8)
        finally:
            os.close(fd)
    finally:
        holder.stdin.close()
        holder.wait(10)
    fd = os.open(path, os.O_RDWR)
    try:
        assert portable.lock_file(fd) and portable.lock_byte(fd, 7)  # the holder's locks went with it
    finally:
        os.close(fd)


def test_without_lock_modules_every_lock_is_granted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "fcntl", None)
    portable.locks_available.cache_clear()
    try:
        assert not portable.locks_available()
        fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
        try:
            assert portable.lock_file(fd) and portable.lock_byte(fd, 3)
            portable.unlock_byte(fd, 3)
        finally:
            os.close(fd)
    finally:
        portable.locks_available.cache_clear()
