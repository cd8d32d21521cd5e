"""Durable sessions across agent processes: the SQLite store of ``run_stdio``.

The crash contract (README, "Sessions on disk"): after SIGKILL, every turn that reached
``idle`` is replayable after a restart; a turn cut mid-stream replays what was sent up to one
flush interval (1 s) before the kill and the resumed session is idle; items live at the crash
come back finalized (a tool call ``failed``, a terminal exited with an unknown status) and are
never listed. Also: bad files, and two processes on one file.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acp_agent import RequestError
from acp_agent.history import CHILD_GONE
from acp_agent.store import SqliteStore
from acp_agent.testing.client import Client, spawn_agent
from tests.helpers.e2e import ROOT

pytestmark = pytest.mark.anyio

ECHO = [sys.executable, str(ROOT / "examples" / "echo_agent.py")]
STORE_AGENT = [sys.executable, str(ROOT / "tests" / "helpers" / "store_agent.py")]


def kill(client: Client) -> None:
    """SIGKILL the agent process behind ``client`` (no shutdown, no last save)."""
    process = client._agent_process
    assert process is not None
    os.kill(process.process.pid, signal.SIGKILL)


async def replayed(client: Client, sid: str, cwd: str) -> Any:
    """Resume ``sid`` with replay from the start; the client's view of it afterwards."""
    await client.initialize()
    await client.resume_session(sid, cwd, replay=True)
    return client.view(sid)


async def test_echo_agent_turn_survives_sigkill(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    async with spawn_agent(ECHO, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "hello durable world")
        kill(first)
        await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())
    assert first.returncode == -signal.SIGKILL

    async with spawn_agent(ECHO) as second:
        await second.initialize()
        listed = await second.list_sessions()
        assert [s["sessionId"] for s in listed] == [sid]
        assert listed[0]["cwd"] == cwd
        await second.resume_session(sid, cwd, replay=True)
        view = second.view(sid)
        assert list(view.messages("user_message").values()) == ["hello durable world"]
        assert list(view.messages().values()) == ["hello durable world"]
        assert view.state == "idle"
        # The resumed session goes on with new ids next to the old ones.
        await second.prompt_and_wait(sid, "again")
        assert list(view.messages().values()) == ["hello durable world", "again"]
        new = await second.new_session(cwd)
        assert new != sid


async def test_turns_only_in_the_journal_survive_sigkill(tmp_path: Path, agent_data_dir: str) -> None:
    """The end-of-turn save is a journal line; its SQLite commit comes later. Killed before any commit,
    every turn that went idle is still replayed after a restart (the next process commits the journal)."""
    cwd = str(tmp_path)
    path = Path(agent_data_dir) / "store-test-agent.sqlite3"
    async with spawn_agent(STORE_AGENT, env={"ACP_TEST_COMMIT_DELAY": "3600"}, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        for text in ("first", "second", "third"):
            await first.prompt_and_wait(sid, text)
        assert first.agent_pid is not None
        assert await first.kill_agent() == -signal.SIGKILL
    assert await stored_text(path, sid) == ""  # nothing of it was committed to the database
    assert len(list(Path(agent_data_dir).glob("store-test-agent.sqlite3.journal-*"))) >= 1
    async with spawn_agent(STORE_AGENT) as second:
        view = await replayed(second, sid, cwd)
        assert list(view.messages().values()) == ["first", "second", "third"]
        assert view.state == "idle"
    assert "third" in await stored_text(path, sid)


async def test_cut_turn_replays_up_to_the_flush_bound_and_ends(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    async with spawn_agent(STORE_AGENT, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "done turn")
        view = first.view(sid)
        await first.prompt(sid, "slow 400")  # 20 s of chunks, 20 a second
        await first.wait_for(lambda: len(streamed(view)) >= 10)
        seen_early = streamed(view)
        await anyio.sleep(2.5)  # more than the flush interval (1 s) after seen_early
        seen_at_kill = streamed(view)
        kill(first)
        await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())

    async with spawn_agent(STORE_AGENT) as second:
        view = await replayed(second, sid, cwd)
        messages = list(view.messages().values())
        assert messages[0] == "done turn"  # the turn that reached idle, whole
        cut = messages[1]
        assert cut.startswith(seen_early) and seen_at_kill.startswith(cut)
        assert view.state == "idle" and view.background == []
        assert len(view.messages("user_message")) == 2
        await second.prompt_and_wait(sid, "after the crash")  # the session works on


def streamed(view: Any) -> str:
    texts = [t for t in view.messages().values() if t.startswith("c0 ")]
    return texts[0] if texts else ""


async def test_live_items_come_back_finalized_never_listed(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    async with spawn_agent(STORE_AGENT, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        view = await first.prompt_and_wait(sid, "bgwait sleep 3")
        assert len(view.background or []) == 1  # the terminal stands for its tool call
        kill(first)
        await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())

    async with spawn_agent(STORE_AGENT) as second:
        view = await replayed(second, sid, cwd)
        [tool] = view.tool_calls.values()
        [terminal] = view.terminals.values()
        assert tool["status"] == "failed" and not tool.get("capabilities")
        assert terminal["exitStatus"] == {"exitCode": None, "signal": None}
        assert view.background == [] and view.state == "idle"


async def test_busy_children_come_back_finished_never_listed(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    async with spawn_agent(STORE_AGENT, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        view = await first.prompt_and_wait(sid, "child")
        await first.wait_for(lambda: len(view.background or []) == 1)
        [(child_id, child)] = view.children.items()
        assert child["state"]["state"] == "running" and child["capabilities"] == {"cancel": {}}
        kill(first)
        await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())

    async with spawn_agent(STORE_AGENT) as second:
        view = await replayed(second, sid, cwd)
        assert list(view.children) == [child_id]
        child = view.children[child_id]
        assert child["title"] == "worker" and not child.get("capabilities")
        assert child["state"] == {"state": "idle", "stopReason": "error", "background": [],
                                  "error": {"code": -32603, "message": CHILD_GONE}}
        assert view.background == [] and view.state == "idle"
        with pytest.raises(RequestError) as gone:  # the child went with its process
            await second.request("session/resume", {"sessionId": child_id, "cwd": cwd})
        assert gone.value.code == -32002


async def test_clean_exit_keeps_everything_and_closed_sessions_resume(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    async with spawn_agent(STORE_AGENT) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "title My thread")
        other = await first.new_session("/")
        await first.close_session(other)
    async with spawn_agent(STORE_AGENT) as second:
        await second.initialize()
        assert {s["sessionId"]: s.get("title") for s in await second.list_sessions()} == {
            sid: "My thread", other: None}
        assert [s["sessionId"] for s in await second.list_sessions(cwd)] == [sid]
        await second.request("session/delete", {"sessionId": other})
        await second.resume_session(sid, cwd, replay=True)
        view = second.view(sid)
        assert list(view.messages().values()) == ["titled"]
    async with spawn_agent(STORE_AGENT) as third:
        await third.initialize()
        assert [s["sessionId"] for s in await third.list_sessions()] == [sid]


async def test_corrupt_file_logs_and_serves_from_memory(tmp_path: Path, agent_data_dir: str,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    path = Path(agent_data_dir) / "store-test-agent.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    async with spawn_agent(STORE_AGENT) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt_and_wait(sid, "still works")
        assert [s["sessionId"] for s in await client.list_sessions()] == [sid]
    assert client.returncode == 0
    err = capfd.readouterr().err
    assert "the session store cannot be used" in err and "not a usable session database" in err
    assert path.read_bytes() == b"this is not a database" * 100  # left as it was


async def test_newer_schema_logs_and_serves_from_memory(tmp_path: Path, agent_data_dir: str,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    path = Path(agent_data_dir) / "store-test-agent.sqlite3"
    await SqliteStore(path).open()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_migrations VALUES (99, 'later')")
    async with spawn_agent(STORE_AGENT) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt_and_wait(sid, "still works")
    err = capfd.readouterr().err
    assert "schema version 99" in err and "newer" in err
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


async def test_two_processes_share_one_file(tmp_path: Path, agent_data_dir: str,
                                            capfd: pytest.CaptureFixture[str]) -> None:
    """Two agents start on one new file at once and write to it side by side: both use it (no
    fallback to memory), every session is kept whole, and the file is intact."""
    cwd = str(tmp_path)
    sids: dict[str, list[str]] = {"a": [], "b": []}

    async def work(name: str) -> None:
        async with spawn_agent(STORE_AGENT) as client:
            await client.initialize()
            for i in range(15):
                sid = await client.new_session(cwd)
                await client.prompt_and_wait(sid, f"{name} {i}")
                await client.close_session(sid)
                sids[name].append(sid)

    async with anyio.create_task_group() as tg:
        tg.start_soon(work, "a")
        tg.start_soon(work, "b")
    async with spawn_agent(STORE_AGENT) as client:
        await client.initialize()
        listed = {s["sessionId"] for s in await client.list_sessions()}
        assert listed == set(sids["a"]) | set(sids["b"]) and len(listed) == 30
        await client.resume_session(sids["b"][7], cwd, replay=True)
        view = client.view(sids["b"][7])
        assert list(view.messages().values()) == ["b 7"]
    assert "cannot be used" not in capfd.readouterr().err
    path = Path(agent_data_dir) / "store-test-agent.sqlite3"
    store = SqliteStore(path)
    for name, made in sids.items():
        for i, sid in enumerate(made):
            record = await store.load(sid)
            assert record is not None
            said = [(type(item).__name__, item.content[0].text)  # type: ignore[union-attr]
                    for item in record.history.replay()]
            assert said == [("UserMessage", f"{name} {i}"), ("AgentMessage", f"{name} {i}")]
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_a_close_on_a_locked_file_keeps_the_session_until_the_lock_goes(
    tmp_path: Path, agent_data_dir: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """Another process holds the file's write lock past the save's wait: the close is answered, the
    error is on stderr, the session stays listed, and once the lock goes the retry saves it (it is
    there after a SIGKILL and a restart)."""
    cwd = str(tmp_path)
    path = Path(agent_data_dir) / "store-test-agent.sqlite3"
    env = {"ACP_TEST_BUSY_TIMEOUT": "0.2"}
    async with spawn_agent(STORE_AGENT, env=env, check=False) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "title Before the lock")
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")  # the write lock, held
        try:
            await first.prompt_and_wait(sid, "said while the file was locked")  # its save fails too
            await first.close_session(sid)
            assert [s["sessionId"] for s in await first.list_sessions(cwd)] == [sid]
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        err = ""
        with anyio.fail_after(20):  # retried every second at first
            while f"session {sid} is saved now" not in err:
                await anyio.sleep(0.1)
                err += capfd.readouterr().err
        assert "said while the file was locked" in await stored_text(path, sid)
        kill(first)
        await first.wait_for(lambda: first._agent_process is not None and first._agent_process.gone())
    assert f"session {sid} was closed but could not be saved" in err and "database is locked" in err
    async with spawn_agent(STORE_AGENT) as second:
        view = await replayed(second, sid, cwd)
        assert list(view.messages().values()) == ["titled", "said while the file was locked"]


async def stored_text(path: Path, sid: str) -> str:
    """Every history entry of ``sid`` in the file, as text."""
    def read() -> str:
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT item FROM history WHERE session_id = ?", (sid,)).fetchall()
        return " ".join(bytes(row[0]).decode() for row in rows)

    return await anyio.to_thread.run_sync(read)


async def test_postgres_session_moves_between_processes(tmp_path: Path, postgres_dsn: str) -> None:
    cwd = str(tmp_path)
    env = {"ACP_TEST_PG_DSN": postgres_dsn}
    async with spawn_agent(STORE_AGENT, env=env) as a, spawn_agent(STORE_AGENT, env=env) as b:
        await a.initialize()
        await b.initialize()
        sid = await a.new_session(cwd)
        await a.prompt_and_wait(sid, "title Made on A")
        await a.prompt_and_wait(sid, "hello from A")
        await a.close_session(sid)
        listed = await b.list_sessions(cwd)
        assert [(s["sessionId"], s.get("title")) for s in listed] == [(sid, "Made on A")]
        await b.resume_session(sid, cwd, replay=True)
        view = b.view(sid)
        assert list(view.messages().values()) == ["titled", "hello from A"]
        await b.prompt_and_wait(sid, "hello from B")
        await b.close_session(sid)
        await a.resume_session(sid, cwd, replay=True)
        assert list(a.view(sid).messages().values())[-1] == "hello from B"
