"""Issue 27, sections 3 and 4, over real agent processes: what a terminal inherits, the modes of the
store's files, a full disk, two processes on one SQLite file, and the processes of a killed agent."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from acp_agent import RequestError
from acp_agent._session.turns import NOT_SAVED
from acp_agent._util.reaper import start_time
from acp_agent.store.keeper import ACTIVE_IN_ANOTHER_PROCESS
from acp_agent.testing.client import Client, spawn_agent
from tests.e2e.test_store_e2e import STORE_AGENT, kill
from tests.helpers.remote import children_of, is_watchdog

pytestmark = pytest.mark.anyio


async def terminal_output(client: Client, sid: str, command: str) -> bytes:
    """Run ``command`` as a listed terminal of ``sid`` and return its whole output once it exited."""
    view = await client.prompt_and_wait(sid, f"bgwait {command}")
    await client.wait_for(lambda: any("exitStatus" in t for t in view.terminals.values()))
    (terminal,) = view.terminals.values()
    return bytes(terminal["output"])


async def test_a_terminal_inherits_no_acp_agent_variable(tmp_path: Path) -> None:
    secrets = {
        "ACP_AGENT_TOKEN": "planted-token-0001",
        "ACP_AGENT_STORE": "postgres://alice:planted-password-0002@db/acp",
        "ACP_AGENT_SOMETHING_NEW": "planted-value-0003",
        "ACP_AGENT_WITHHOLD_ENV": "MY_API_KEY,CLOUD_*",
        "MY_API_KEY": "planted-key-0004",
        "CLOUD_SECRET": "planted-secret-0005",
        "HARMLESS_SETTING": "kept-0006",
    }
    async with spawn_agent(STORE_AGENT, env=secrets) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        output = await terminal_output(client, sid, "env")
    assert b"HARMLESS_SETTING=kept-0006" in output  # the environment is there: only the secrets are not
    assert b"PATH=" in output
    for name, value in secrets.items():
        if name != "HARMLESS_SETTING":
            assert value.encode() not in output, name
    assert b"ACP_AGENT_" not in output


async def test_store_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    command = ["sh", "-c", 'umask 022 && exec "$0" "$@"', *STORE_AGENT]  # the usual umask: 0644 files
    async with spawn_agent(command, env={"ACP_AGENT_DATA_DIR": str(data)}) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt_and_wait(sid, "hello")
        names = {p.name.removeprefix("store-test-agent.sqlite3") for p in data.iterdir()}
        assert {"", "-wal", "-shm"} <= names, names
        assert any(name.startswith(".journal-") for name in names), names
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir() if p.is_file()}
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert modes and set(modes.values()) == {0o600}, modes


@contextlib.asynccontextmanager
async def small_file_system(path: Path, size_kib: int) -> AsyncIterator[tuple[list[str], Path]]:
    """A tmpfs of ``size_kib`` KiB at ``path``, mounted in a mount namespace of its own (kept by a holder
    process while the block runs, so agents can die and restart on it). Yields the argv prefix that runs a
    command in that namespace, and where this process reaches the file system (``/proc/<holder>/root/...``)."""
    path.mkdir(parents=True, exist_ok=True)
    script = f'mount -t tmpfs -o size={size_kib}k,mode=0700 tmpfs "$0" && echo ready && exec sleep 600'
    ways = ((["--user", "--map-root-user", "--mount"], ["--user", "--preserve-credentials"]), (["--mount"], []))
    for namespaces, joining in ways:
        holder = await anyio.open_process(["unshare", *namespaces, "sh", "-c", script, str(path)],
                                          stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert holder.stdout is not None
        with anyio.fail_after(10):
            ready = b""
            with contextlib.suppress(anyio.EndOfStream):
                while b"\n" not in ready:
                    ready += await holder.stdout.receive()
        if ready.startswith(b"ready"):
            enter = joining
            break
        await holder.wait()
    else:
        pytest.skip("cannot mount a small file system here (needs user namespaces, or root)")
    try:
        yield ["nsenter", f"--target={holder.pid}", *enter, "--mount"], Path(f"/proc/{holder.pid}/root{path}")
    finally:
        holder.kill()
        await holder.wait()


def fill(directory: Path) -> None:
    """Write a file in ``directory`` until its file system is full."""
    with open(directory / "filler", "wb", buffering=0) as file, contextlib.suppress(OSError):
        while True:
            file.write(b"\0" * 4096)


async def test_a_full_disk_ends_the_turn_with_an_error_and_loses_no_idle_turn(tmp_path: Path) -> None:
    data = tmp_path / "small"
    async with small_file_system(data, 1024) as (enter, reached):
        agent = [*enter, *STORE_AGENT]
        env = {"ACP_AGENT_DATA_DIR": str(data)}
        big = "y" * 30_000
        async with spawn_agent(agent, env=env, check=False) as first:
            await first.initialize()
            sid = await first.new_session(str(tmp_path))
            assert (await first.prompt_and_wait(sid, "before")).stop_reason == "end_turn"
            fill(reached)
            view = await first.prompt_and_wait(sid, big)
            assert view.updates[-1]["stopReason"] == "error"
            assert view.updates[-1]["error"]["message"] == NOT_SAVED
            assert first._agent_process is not None
            log = first._agent_process.stderr_tail()
            assert "disk full" in log and str(data / "store-test-agent.sqlite3") in log, log
            assert "cannot rollback" not in log
            (reached / "filler").unlink()
            assert (await first.prompt_and_wait(sid, "after")).stop_reason == "end_turn"
            kill(first)
            await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())
        async with spawn_agent(agent, env=env) as second:
            await second.initialize()
            await second.resume_session(sid, str(tmp_path), replay=True)
            assert list(second.view(sid).messages().values()) == ["before", big, "after"]


async def test_a_session_active_in_one_process_is_refused_in_another(tmp_path: Path) -> None:
    """Two agents on one SQLite file (two editor windows): a session active in one is refused in the other
    until the first closes it or dies; every turn a client saw end is kept."""
    cwd = str(tmp_path)

    async def refused(client: Client, method: str, sid: str) -> None:
        params: dict[str, str] = {"sessionId": sid, **({"cwd": cwd} if method == "session/resume" else {}),
                                  **({"title": "t"} if method == "session/set_title" else {})}
        with pytest.raises(RequestError) as caught:
            await client.request(method, params)
        assert (caught.value.code, caught.value.message) == (-32002, ACTIVE_IN_ANOTHER_PROCESS)
        assert caught.value.data == {"sessionId": sid}

    async with spawn_agent(STORE_AGENT) as first, spawn_agent(STORE_AGENT, check=False) as second:
        await first.initialize()
        await second.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "one")
        await refused(second, "session/resume", sid)
        await refused(second, "session/delete", sid)
        await refused(second, "session/archive", sid)  # a stored change would be saved over by the first
        await refused(second, "session/set_title", sid)
        await first.prompt_and_wait(sid, "two")
        await first.close_session(sid)  # saved, then let go
        await second.resume_session(sid, cwd)
        await second.prompt_and_wait(sid, "three")
        await refused(first, "session/resume", sid)
        kill(second)  # its lock goes with it
        await second.wait_for(lambda: second._agent_process is not None and second._agent_process.gone())
        await first.resume_session(sid, cwd, replay=True)
        assert list(first.view(sid).messages().values())[-3:] == ["one", "two", "three"]


# A terminal whose group leader sleeps, with a process that left the group (``setsid``): each writes its pid.
ORPHANS = ("sh -c 'echo $$ >> pids; setsid sh -c \"echo \\$\\$ >> pids; exec sleep 300\" & "
           "exec sleep 300' </dev/null >/dev/null 2>&1")


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    return start_time(pid) is not None


@contextlib.contextmanager
def killed_at_end(pids: list[int]) -> Iterator[None]:
    """Whatever the test's outcome, kill ``pids`` at the end of the block (a failed test leaves nothing)."""
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


async def start_orphans(client: Client, cwd: Path) -> list[int]:
    """In a new session of ``client``, start ORPHANS as a listed terminal; the pids of its two processes once
    both run."""
    await client.initialize()
    sid = await client.new_session(str(cwd))
    await client.prompt_and_wait(sid, f"bgwait {ORPHANS}")
    written = cwd / "pids"
    with anyio.fail_after(10):
        while len(pids := [int(p) for p in written.read_text().split()] if written.exists() else []) < 2:
            await anyio.sleep(0.02)
    assert all(alive(pid) for pid in pids)
    return pids


async def wait_gone(pids: list[int], seconds: float) -> float:
    """Wait until none of ``pids`` runs (at most ``seconds``); how long that took."""
    began = anyio.current_time()
    with anyio.fail_after(seconds):
        while any(alive(pid) for pid in pids):
            await anyio.sleep(0.01)
    return anyio.current_time() - began


def watchdog_of(agent_pid: int) -> int:
    """The pid of the watchdog the agent ``agent_pid`` started (its child running ``reaper.py``)."""
    (watchdog,) = [pid for pid in children_of(agent_pid) if is_watchdog(pid)]
    return watchdog


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watchdog needs /proc (Linux)")
async def test_a_killed_agents_terminals_are_gone_within_seconds(tmp_path: Path) -> None:
    async with spawn_agent(STORE_AGENT, check=False) as client:
        pids = await start_orphans(client, tmp_path)
        with killed_at_end(pids):
            kill(client)
            print(f"terminal processes gone {await wait_gone(pids, 5):.3f} s after the agent's SIGKILL")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the ledger needs /proc (Linux)")
async def test_the_next_agent_reaps_what_a_killed_agent_and_watchdog_left(tmp_path: Path) -> None:
    async with spawn_agent(STORE_AGENT, check=False) as client:
        pids = await start_orphans(client, tmp_path)
        assert client._agent_process is not None
        agent = client._agent_process.process.pid
        os.kill(watchdog_of(agent), signal.SIGKILL)  # both die: nothing cleans up now
        await anyio.sleep(0.2)
        kill(client)
        await client.wait_for(lambda: client._agent_process is not None and client._agent_process.gone())
    with killed_at_end(pids):
        await anyio.sleep(0.5)
        assert all(alive(pid) for pid in pids)  # left behind
        async with spawn_agent(STORE_AGENT) as second:
            await second.initialize()  # its warm-up reaps them
            await wait_gone(pids, 5)
