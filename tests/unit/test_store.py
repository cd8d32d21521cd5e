"""Session stores: the ``SessionStore`` contract (memory, SQLite, PostgreSQL), the history's change
tracking, and the runtime keeping sessions in a store (closed sessions leave memory, restarts)."""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import acp_agent.store.sqlite as sqlite_module
from acp_agent import Agent, AgentMessage, ContentBlock, RequestError, Session, StopReason, ToolCallUpdate, UserMessage
from acp_agent._util.ids import new_session_id
from acp_agent.history import CHILD_GONE, History, finalize_live_items
from acp_agent.records import SessionRecord
from acp_agent.schema import (
    AvailableCommand,
    BackgroundTerminal,
    IdleStateUpdate,
    PlanEntry,
    PlanItems,
    PlanRemoved,
    PlanUpdate,
    RunningStateUpdate,
    SessionCancelCapabilities,
    SubagentSessionCapabilities,
    SubagentUpdate,
    TerminalOutputChunk,
    TerminalUpdate,
    TextContent,
)
from acp_agent.schema.base import to_json
from acp_agent.store import (
    SCHEMA_VERSION,
    MemoryStore,
    SessionStore,
    SqliteStore,
    StoredSession,
    StoreError,
    StoreUnusableError,
    data_dir,
)
from acp_agent.store.codec import encode_info, encode_info_text, encode_state, encode_state_text
from acp_agent.store.journal import Journal, decode_line, encode_line, orphans
from acp_agent.testing.client import connect_agent
from docs_src.import_threads import import_threads as import_site_threads
from docs_src.resume_context import ContextAgent
from tests.helpers.agents import ForkingAgent, ScriptedAgent
from tests.helpers.sqlite_files import committed_texts, journal_lines, journaled_texts, write_locked

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], SessionStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Makes store objects on one place: each call is a new store object (a restarted agent)."""
    if request.param == "memory":
        store = MemoryStore()
        return lambda: store
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "agent.sqlite3")
    dsn = request.getfixturevalue("postgres_dsn")
    from acp_agent.store.postgres import PostgresStore

    return lambda: PostgresStore(dsn)


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[SessionStore]:
    opened = make_store()
    yield opened
    await opened.close()


def dump(history: History) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", by_alias=True, exclude_unset=True) for item in history.replay()]


def sample_record(session_id: str = "sess_sample", cwd: str = "/work") -> SessionRecord:
    record = SessionRecord(session_id=session_id, cwd=cwd, additional_directories=["/extra"], title="Sample",
                           meta={"origin": "test"}, data={"conversation": [{"role": "user", "text": "hi"}], "n": 1},
                           available_commands=[AvailableCommand(name="plan", description="Make a plan")])
    history = record.history
    history.record(UserMessage(message_id="u1", content=[TextContent(text="hi")]))
    for word in ("hello", " ", "there"):
        history.append_text(False, "m1", word)
    history.record(ToolCallUpdate(tool_call_id="t1", title="Run", kind="execute", status="in_progress"))
    history.record(TerminalUpdate(terminal_id="term1", command="ls"))
    history.record(TerminalOutputChunk(terminal_id="term1", data=base64.b64encode(b"a.txt\n").decode()))
    history.record(PlanUpdate(plan=PlanItems(plan_id="p1", entries=[
        PlanEntry(content="look", priority="high", status="pending")])))
    return record


async def test_save_and_load_keep_everything(store: SessionStore) -> None:
    record = sample_record()
    await store.save(record)
    loaded = await store.load("sess_sample")
    assert loaded is not None
    assert dump(loaded.history) == dump(record.history)
    for name in ("cwd", "additional_directories", "title", "meta", "data", "created_at", "updated_at",
                 "available_commands", "config_options"):
        assert getattr(loaded, name) == getattr(record, name), name
    assert await store.load("sess_unknown") is None


async def test_saves_are_incremental_and_follow_every_change(store: SessionStore, make_store: StoreFactory) -> None:
    record = sample_record()
    await store.save(record)
    history = record.history
    history.append_text(False, "m1", "!")  # an entry changed
    history.record(ToolCallUpdate(tool_call_id="t1", status="completed"))
    history.record(AgentMessage(message_id="m2", content=[TextContent(text="second")]))  # a new one
    history.record(PlanUpdate(plan=PlanItems(plan_id="p1", entries=[
        PlanEntry(content="look", priority="high", status="completed")])))  # replaced: moves to the end
    record.title = "Renamed"
    await store.save(record)
    history.record(PlanRemoved(plan_id="p1"))
    await store.save(record)
    again = make_store()  # a restarted agent reads it
    loaded = await again.load("sess_sample")
    assert loaded is not None and loaded.title == "Renamed"
    assert dump(loaded.history) == dump(history)
    assert [type(i).__name__ for i in loaded.history.replay()] == [
        "UserMessage", "AgentMessage", "ToolCallUpdate", "TerminalUpdate", "AgentMessage"]
    # A loaded history goes on from where it was: its next changes are saved on top.
    loaded.history.append_text(False, "m3", "third")
    await again.save(loaded)
    final = await make_store().load("sess_sample")
    assert final is not None and dump(final.history) == dump(loaded.history)
    await again.close()


def at(second: int) -> str:
    """An ``updatedAt`` ``second`` seconds into a fixed minute."""
    return f"2026-12-01T00:{second // 60:02d}:{second % 60:02d}Z"


async def test_list_filters_pages_and_deletes(store: SessionStore) -> None:
    for i in range(7):
        await store.save(SessionRecord(session_id=f"sess_{i}", cwd="/a" if i % 2 else "/b", updated_at=at(i)))
    listed = await store.list_sessions()
    assert [s.session_id for s in listed] == [f"sess_{i}" for i in reversed(range(7))]  # most recently active first
    assert [s.session_id for s in await store.list_sessions(cwd="/a")] == ["sess_5", "sess_3", "sess_1"]
    assert [s.session_id for s in await store.list_sessions(offset=2, limit=3)] == ["sess_4", "sess_3", "sess_2"]
    assert [s.session_id for s in await store.list_sessions(cwd="/b", offset=3)] == ["sess_0"]
    await store.save(SessionRecord(session_id="sess_0", cwd="/b", title="moved up", updated_at=at(30)))
    assert (await store.list_sessions(limit=1))[0].title == "moved up"  # an update moves it to the front
    assert await store.delete("sess_3") is True
    assert await store.delete("sess_3") is False
    assert await store.load("sess_3") is None
    assert "sess_3" not in [s.session_id for s in await store.list_sessions()]


async def test_list_order_ties_pages_and_principals(store: SessionStore) -> None:
    """Issue 28: most recently active first, ties by id (descending), and a page after a key neither repeats
    nor skips a session that did not change, however others change; each principal lists its own."""
    for i in range(6):
        await store.save(SessionRecord(session_id=f"sess_{i}", cwd="/a", updated_at=at(i // 2),
                                       principal="alice" if i < 5 else "bob"))
    alice = await store.list_sessions(principal="alice")
    assert names(alice) == ["sess_4", "sess_3", "sess_2", "sess_1", "sess_0"]
    assert all(s.principal == "alice" for s in alice)
    assert names(await store.list_sessions(principal="bob")) == ["sess_5"]
    assert names(await store.list_sessions(principal="carol")) == []
    first = await store.list_sessions(principal="alice", limit=2)
    # sess_0 becomes the most recent, sess_4 (already listed) too: neither shifts the next page
    await store.save(SessionRecord(session_id="sess_0", cwd="/a", updated_at=at(40), principal="alice"))
    await store.save(SessionRecord(session_id="sess_4", cwd="/a", updated_at=at(41), principal="alice"))
    rest = await store.list_sessions(principal="alice", after=first[-1].key)
    assert names(first) + names(rest) == ["sess_4", "sess_3", "sess_2", "sess_1"]
    found = await store.find("sess_5")
    assert found is not None and found.principal == "bob"
    loaded = await store.load("sess_5")
    assert loaded is not None and loaded.principal == "bob"


def names(page: list[StoredSession]) -> list[str]:
    return [s.session_id for s in page]


async def test_archived_filter_find_and_client_title(store: SessionStore, make_store: StoreFactory) -> None:
    for i in range(7):
        await store.save(SessionRecord(session_id=f"sess_{i}", cwd="/a" if i % 2 else "/b", archived=i % 3 == 0))
    assert names(await store.list_sessions(archived=True)) == ["sess_6", "sess_3", "sess_0"]
    assert names(await store.list_sessions(archived=False, offset=1, limit=2)) == ["sess_4", "sess_2"]
    assert names(await store.list_sessions(archived=True, cwd="/a")) == ["sess_3"]
    assert len(await store.list_sessions(archived=None)) == 7
    found = await store.find("sess_3")
    assert found is not None and found.archived and found.cwd == "/a"
    assert await store.find("sess_unknown") is None
    await store.save(SessionRecord(session_id="sess_t", cwd="/a", title="Mine", client_title=True))
    loaded = await make_store().load("sess_t")
    assert loaded is not None and loaded.client_title and loaded.title == "Mine"
    plain = await make_store().load("sess_1")
    assert plain is not None and not plain.client_title


async def test_data_that_is_not_json_is_warned_about(make_store: StoreFactory,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    store = make_store()
    record = SessionRecord(session_id=new_session_id(), cwd="/", data={"handle": object()})
    with caplog.at_level(logging.WARNING):
        await store.save(record)
    loaded = await store.load(record.session_id)
    assert loaded is not None
    if store.durable:
        assert loaded.data == {} and "not JSON-serializable" in caplog.text
    await store.close()


# -- history change tracking ---------------------------------------------------------------


def test_take_changes_marks_each_entry_once_per_save() -> None:
    history = sample_record().history
    first = history.take_changes()
    assert first.full and len(first.entries) == len(history)
    assert not history.changed
    for i in range(1000):
        history.append_text(False, "m1", f"{i}")
    second = history.take_changes()
    assert not second.full and [seq for seq, _ in second.entries] == [2]
    history.record(PlanRemoved(plan_id="p1"))
    third = history.take_changes()
    assert third.removed == [5] and third.entries == []
    history.unsaved()
    assert history.take_changes().full


def test_finalize_live_items_ends_what_the_gone_process_ran() -> None:
    history = sample_record().history
    history.record(TerminalUpdate(terminal_id="term1", capabilities={"cancel": {}}))
    assert finalize_live_items(history) == 2
    items = {type(i).__name__: i for i in history.replay()}
    assert items["ToolCallUpdate"].status == "failed"
    terminal = items["TerminalUpdate"]
    assert terminal.exit_status is not None and terminal.exit_status.exit_code is None
    assert terminal.capabilities is None
    assert finalize_live_items(history) == 0


def test_finalize_live_items_reports_busy_children_finished() -> None:
    """A child its parent would list (R90: not idle, or its own list non-empty or unreported) is
    reported idle with an empty list and without ``cancel``; a quiet child is left as it is."""
    history = History()
    running = RunningStateUpdate(background=[])
    history.record(SubagentUpdate(session_id="sess_run", title="runs", state=running,
                                  capabilities=SubagentSessionCapabilities(cancel=SessionCancelCapabilities())))
    history.record(SubagentUpdate(session_id="sess_bg", state=IdleStateUpdate(
        stop_reason="end_turn", background=[BackgroundTerminal(terminal_id="term_9")])))
    history.record(SubagentUpdate(session_id="sess_unreported", state=IdleStateUpdate()))
    history.record(SubagentUpdate(session_id="sess_unconfirmed", state=None))
    history.record(SubagentUpdate(session_id="sess_quiet", state=IdleStateUpdate(stop_reason="end_turn",
                                                                                background=[])))
    closed = History()
    closed.record(SubagentUpdate(session_id="sess_run", state=running))
    assert finalize_live_items(history) == 4
    assert finalize_live_items(closed, "cancelled") == 1
    children = {item.session_id: item.model_dump(mode="json", by_alias=True, exclude_unset=True)
                for item in history.replay() if isinstance(item, SubagentUpdate)}
    assert children["sess_run"] == {
        "sessionUpdate": "subagent_update", "sessionId": "sess_run", "title": "runs", "capabilities": None,
        "state": {"state": "idle", "stopReason": "error", "background": [],
                  "error": {"code": -32603, "message": CHILD_GONE}}}
    assert children["sess_bg"]["state"] == {"state": "idle", "stopReason": "end_turn", "background": []}
    assert children["sess_unreported"]["state"] == {"state": "idle", "background": []}
    assert children["sess_unconfirmed"]["state"]["background"] == []
    assert children["sess_quiet"]["state"] == {"state": "idle", "stopReason": "end_turn", "background": []}
    [child] = closed.replay()
    assert isinstance(child, SubagentUpdate) and isinstance(child.state, IdleStateUpdate)
    assert child.state.stop_reason == "cancelled" and child.state.background == []
    assert finalize_live_items(history) == 0


# -- SQLite specifics ----------------------------------------------------------------------


async def test_sqlite_file_is_wal_and_versioned(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "deep" / "dir" / "a.sqlite3")
    await store.save(sample_record())
    await store.close()
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert [r[0] for r in db.execute("SELECT version FROM schema_migrations")] == [1, SCHEMA_VERSION]


async def test_sqlite_refuses_newer_schema_and_corrupt_files(tmp_path: Path) -> None:
    newer = tmp_path / "newer.sqlite3"
    await SqliteStore(newer).open()
    with sqlite3.connect(newer) as db:
        db.execute("INSERT INTO schema_migrations VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreUnusableError, match="newer"):
        await SqliteStore(newer).open()
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(StoreUnusableError, match="not a usable session database"):
        await SqliteStore(corrupt).open()
    assert corrupt.read_bytes() == b"\x00garbage" * 1000


def say(record: SessionRecord, text: str) -> None:
    record.history.record(AgentMessage(message_id=f"m_{text.replace(' ', '_')}", content=[TextContent(text=text)]))


async def test_sqlite_small_saves_are_journaled_then_committed_in_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)  # the committer waits: the journal holds them
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = sample_record()
    threaded: list[str] = []
    real_in_thread = SqliteStore.in_thread

    async def spy(self: SqliteStore, func: Callable[..., Any], *args: Any) -> Any:
        threaded.append(func.__name__)
        return await real_in_thread(self, func, *args)

    monkeypatch.setattr(SqliteStore, "in_thread", spy)
    await store.open()
    threaded.clear()
    for text in ("one", "two", "three"):
        say(record, text)
        await store.save(record)
    assert threaded == []  # no worker thread, no commit on the way to the turn's idle
    assert committed_texts(store.path, record.session_id) == []
    lines = journal_lines(store.path)
    assert len(lines) == 3 and decode_line(lines[0])[1] is not None  # the first names the session row
    assert all(decode_line(line)[1] is None for line in lines[1:])  # unchanged rows are left out
    # This store object reads what it saved: a listing or a load commits the pending saves first.
    assert [s.session_id for s in await store.list_sessions()] == [record.session_id]
    assert committed_texts(store.path, record.session_id)[-3:] == ["one", "two", "three"]
    assert journal_lines(store.path) == []  # committed saves leave the journal
    say(record, "four")
    await store.save(record)
    await store.sync()  # a session leaving memory: committed at once
    assert committed_texts(store.path, record.session_id)[-1] == "four" and journal_lines(store.path) == []
    # A changed row is journaled again, and written.
    record.title = "Renamed"
    await store.save(record)
    assert [s.title for s in await store.list_sessions()] == ["Renamed"]
    await store.close()
    assert list(tmp_path.glob("a.sqlite3.journal-*")) == []  # a clean close leaves no journal file


async def test_sqlite_committer_thread_commits_without_a_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = sample_record()
    say(record, "alone")
    await store.save(record)
    with anyio.fail_after(10):
        while committed_texts(store.path, record.session_id)[-1:] != ["alone"]:
            await anyio.sleep(0.01)
    with anyio.fail_after(10):
        while journal_lines(store.path):
            await anyio.sleep(0.01)
    await store.close()


async def test_sqlite_file_is_opened_by_the_thread_that_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All of one file's SQLite work stays in one thread (one malloc arena): the committer opens it; a failed
    open is raised and leaves no thread behind, and the next open tries again."""
    store = SqliteStore(tmp_path / "a.sqlite3")
    opened_in: list[threading.Thread] = []
    real_open = SqliteStore._open

    def spy(self: SqliteStore) -> None:
        opened_in.append(threading.current_thread())
        real_open(self)

    monkeypatch.setattr(SqliteStore, "_open", spy)
    record = sample_record()
    say(record, "one")
    await store.save(record)  # opens the file on first use
    assert opened_in == [store._committer] and opened_in[0] is not threading.current_thread()
    await store.close()
    broken = SqliteStore(tmp_path / "b.sqlite3")
    broken.path.write_bytes(b"not a database" * 100)
    for _ in range(2):
        with pytest.raises(StoreUnusableError):
            await broken.open()
        assert broken._committer is None


async def test_sqlite_every_call_of_a_store_runs_in_its_committer_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save too big for the journal, loads, listings, finds and deletes run in the committer thread too, not in
    anyio's worker threads: SQLite's memory then stays in one thread's malloc arena (a second arena cost the stdio
    agent almost 1 MB of peak RSS)."""
    store = SqliteStore(tmp_path / "a.sqlite3")
    ran_in: dict[str, set[str]] = {}
    for name in ("_apply", "_load", "_list", "_find", "_delete", "_close"):
        real = getattr(SqliteStore, name)

        def spy(self: SqliteStore, *args: Any, _real: Any = real, _name: str = name) -> Any:
            ran_in.setdefault(_name, set()).add(threading.current_thread().name)
            return _real(self, *args)

        monkeypatch.setattr(SqliteStore, name, spy)
    record = sample_record()
    await store.open()
    say(record, "x" * (sqlite_module.JOURNAL_BYTES + 1))
    await store.save(record)  # commits at once
    assert await store.load(record.session_id) is not None
    assert [s.session_id for s in await store.list_sessions()] == [record.session_id]
    assert await store.find(record.session_id) is not None
    assert await store.delete(record.session_id)
    await store.close()
    assert ran_in == {name: {"acp-store-a.sqlite3"} for name in ("_apply", "_load", "_list", "_find", "_delete",
                                                                 "_close")}


async def test_sqlite_a_big_save_commits_before_it_returns(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = sample_record()
    await store.open()
    say(record, "x" * (sqlite_module.JOURNAL_BYTES + 1))
    await store.save(record)
    assert len(committed_texts(store.path, record.session_id)[-1]) == sqlite_module.JOURNAL_BYTES + 1
    assert journal_lines(store.path) == []
    await store.close()


SAVE_AND_DIE = """
import os, sys, anyio
import acp_agent.store.sqlite as sqlite_module
from acp_agent import AgentMessage, TextContent
from acp_agent.records import SessionRecord
from acp_agent.store import SqliteStore

sqlite_module.COMMIT_DELAY = 3600.0

async def main() -> None:
    store = SqliteStore(sys.argv[1])
    record = SessionRecord(session_id="sess_dies", cwd="/tmp")
    for text in ("before", "the", "kill"):
        record.history.record(AgentMessage(message_id="m_" + text, content=[TextContent(text=text)]))
        await store.save(record)
    os._exit(0)  # no close, no commit: as after SIGKILL

anyio.run(main)
"""


async def test_sqlite_journal_of_a_process_that_died_is_committed_by_the_next(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "a.sqlite3"
    await anyio.to_thread.run_sync(lambda: subprocess.run([sys.executable, "-c", SAVE_AND_DIE, str(path)],
                                                           check=True, timeout=60))
    assert committed_texts(path, "sess_dies") == [] and len(journal_lines(path)) == 3
    store = SqliteStore(path)
    record = await store.load("sess_dies")
    assert record is not None
    assert [i.content[0].text for i in record.history.replay() if isinstance(i, AgentMessage)] == [
        "before", "the", "kill"]
    assert journal_lines(path) == [] and list(tmp_path.glob("a.sqlite3.journal-*")) == [
        f for f in tmp_path.glob("a.sqlite3.journal-*") if store._file is not None and f == store._file.path]
    await store.close()


async def test_sqlite_a_live_journal_is_left_alone_and_a_cut_line_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    path = tmp_path / "a.sqlite3"
    writer, reader = SqliteStore(path), SqliteStore(path)
    record = sample_record()
    say(record, "pending")
    await writer.save(record)
    with orphans(path) as found:
        assert found == []  # a live store's journal is locked: never taken for an ended process's
    assert committed_texts(path, record.session_id) == [] and len(journal_lines(path)) == 1
    # Store objects of one process on one file read what the others saved (committed first).
    assert [s.session_id for s in await reader.list_sessions()] == [record.session_id]
    assert journal_lines(path) == []
    # A file left by a process that died mid-write: whole lines are committed, the cut one is not.
    other = SessionRecord(session_id=new_session_id(), cwd="/elsewhere")
    say(other, "whole")
    whole = encode_line((other.session_id, (other.session_id, "/elsewhere", None, other.created_at,
                                            other.updated_at, 0, "{}", "{}"),
                         False, [(other.session_id, 0, "AgentMessage",
                                  b'{"sessionUpdate":"agent_message","messageId":"m_w",'
                                  b'"content":[{"type":"text","text":"whole"}]}')], []))
    (tmp_path / "a.sqlite3.journal-1-dead-00000001").write_bytes(whole + whole[:20])
    loaded = await reader.load(other.session_id)
    assert loaded is not None and [i.content[0].text for i in loaded.history.replay()  # type: ignore[union-attr]
                                   ] == ["whole"]
    assert not (tmp_path / "a.sqlite3.journal-1-dead-00000001").exists()
    await writer.close()
    await reader.close()


async def test_sqlite_a_failed_batch_stays_in_the_journal_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 0.01)
    monkeypatch.setattr(sqlite_module, "RETRY_DELAY", 0.05)
    store = SqliteStore(tmp_path / "a.sqlite3", busy_timeout=0.05)
    record = sample_record()
    await store.open()
    locker = write_locked(store.path)  # another process holds the write lock
    say(record, "while locked")
    await store.save(record)  # journaled: the turn does not wait for the lock
    with anyio.fail_after(10):
        while "stay in the journal" not in caplog.text:
            await anyio.sleep(0.01)
    assert len(journal_lines(store.path)) == 1
    locker.execute("ROLLBACK")
    locker.close()
    with anyio.fail_after(10):
        while committed_texts(store.path, record.session_id)[-1:] != ["while locked"]:
            await anyio.sleep(0.02)
    await store.close()
    assert list(tmp_path.glob("a.sqlite3.journal-*")) == []


def test_journal_lines_round_trip(tmp_path: Path) -> None:
    save = ("sess_x", ("sess_x", "/tmp", None, "c", "u", 0, "{}", "{}"), True,
            [("sess_x", 3, "AgentMessage", rb'{"a": [1, "\u00e9\n"]}')], [1, 2])
    sid, columns, full, rows, removed = decode_line(encode_line(save))
    assert (sid, columns, full, removed) == (*save[:3], [1, 2])
    assert [(r[0], r[1], r[2], json.loads(r[3])) for r in rows] == [("sess_x", 3, "AgentMessage", {"a": [1, "é\n"]})]
    journal = Journal(tmp_path / "db.sqlite3")
    first, second = journal.start(), journal.start()
    assert first.path.name < second.path.name and not list(tmp_path.glob(".*.new"))
    first.append(b"line\n")
    first.discard()
    second.discard()
    assert list(tmp_path.iterdir()) == []


async def test_sqlite_writes_an_entry_as_it_was_sent(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = sample_record()
    await store.save(record)
    sent = (b'{"sessionUpdate": "agent_message", "messageId": "m_sent", '
            b'"content": [{"type": "text", "text": "as sent"}]}')
    record.history.record(AgentMessage(message_id="m_sent", content=[TextContent(text="as sent")]), sent)
    await store.save(record)
    await store.close()
    with sqlite3.connect(store.path) as db:
        [item] = [bytes(i) for (i,) in db.execute("SELECT item FROM history") if b"m_sent" in bytes(i)]
    assert item == sent  # the wire bytes, not a second serialization (which has no spaces)
    loaded = await SqliteStore(store.path).load(record.session_id)
    assert loaded is not None and any(
        isinstance(i, AgentMessage) and i.message_id == "m_sent" for i in loaded.history.replay())


async def test_sqlite_a_save_behind_one_waiting_in_a_thread_lands_after_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.sqlite3", busy_timeout=5.0)
    record = sample_record()
    await store.save(record)
    other = write_locked(store.path)  # another process writes: the next save waits in a thread
    record.history.record(AgentMessage(message_id="m_first", content=[TextContent(text="first")]))
    record.title = "first"
    order: list[str] = []

    async def first() -> None:
        await store.save(record)
        order.append("first")

    async def release_soon() -> None:
        await anyio.sleep(0.3)
        other.execute("COMMIT")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        record.history.record(AgentMessage(message_id="m_second", content=[TextContent(text="second")]))
        record.title = "second"
        tg.start_soon(release_soon)
        await store.save(record)  # queued behind the first: neither committed ahead of it nor refused
        order.append("second")
    other.close()
    assert order == ["first", "second"]
    await store.close()
    loaded = await SqliteStore(store.path).load(record.session_id)
    assert loaded is not None and loaded.title == "second"
    texts = [i.content[0].text for i in loaded.history.replay() if isinstance(i, AgentMessage)]
    assert texts[-2:] == ["first", "second"]


def test_data_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACP_AGENT_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    assert SqliteStore.for_agent("My Agent/2").path == tmp_path / "My_Agent_2.sqlite3"
    monkeypatch.delenv("ACP_AGENT_DATA_DIR")
    assert data_dir().name == "acp-agent"


# -- the runtime on a store ----------------------------------------------------------------


async def test_sessions_outlive_the_connection_and_closed_ones_leave_memory(make_store: StoreFactory) -> None:
    store = make_store()
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.set_config_option(sid, "model", "smart")
        await client.prompt_and_wait(sid, "extras")
        await client.prompt_and_wait(sid, "echo second")
        await client.resume_session(sid, "/tmp", replay=True)
        live_replay = [u for u in client.view(sid).updates[-7:]]  # the replay, its replay_complete, the snapshot
        closed = await client.new_session("/elsewhere")
        await client.close_session(closed)
    if not store.durable:
        return  # a memory store ends with its process: nothing to restart from
    async with connect_agent(ScriptedAgent(), store=make_store()) as client:
        await client.initialize()
        listed = {s["sessionId"]: s for s in await client.list_sessions()}
        assert set(listed) == {sid, closed}
        assert listed[sid]["title"] == "A title" and listed[sid]["cwd"] == "/tmp"
        answer = await client.resume_session(sid, "/tmp", replay=True)
        assert {o["configId"]: o["currentValue"] for o in answer["configOptions"]} == {"model": "smart",
                                                                                         "verbose": False}
        view = client.view(sid)
        assert view.updates == live_replay
        assert list(view.messages().values()) == ["echo second"]
        await client.prompt_and_wait(sid, "echo third")  # new ids next to the old ones
        assert list(view.messages("user_message").values()) == ["extras", "echo second", "echo third"]
        await client.request("session/delete", {"sessionId": closed})
    async with connect_agent(ScriptedAgent(), store=make_store()) as client:
        await client.initialize()
        assert [s["sessionId"] for s in await client.list_sessions()] == [sid]
        await client.resume_session(sid, "/tmp", replay=True)
        assert list(client.view(sid).messages().values()) == ["echo second", "echo third"]


async def test_list_pages_through_the_store(make_store: StoreFactory) -> None:
    store = make_store()
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        made = []
        for i in range(120):
            made.append(await client.new_session("/a" if i % 3 else "/b"))
            if i % 2:
                await client.close_session(made[-1])
        first = await client.request("session/list", {})
        assert len(first["sessions"]) == 50 and "nextCursor" in first
        listed = await client.list_sessions()
        assert sorted(s["sessionId"] for s in listed) == sorted(made)  # every one once, across three pages
        keys = [(s["updatedAt"], s["sessionId"]) for s in listed]
        assert keys == sorted(keys, reverse=True)  # most recently active first, ties by id
        assert sorted(s["sessionId"] for s in await client.list_sessions("/b")) == sorted(made[::3])


async def test_forks_are_kept(make_store: StoreFactory) -> None:
    store = make_store()
    async with connect_agent(ForkingAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo original")
        fork = await client.fork_session(sid, "/tmp")
        await client.close_session(fork)
        await client.resume_session(fork, "/tmp", replay=True)
        assert list(client.view(fork).messages().values()) == ["echo original"]


async def test_unusable_store_falls_back_to_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "bad.sqlite3"
    path.write_text("not a database")
    with caplog.at_level(logging.ERROR):
        async with connect_agent(ScriptedAgent(), store=SqliteStore(path)) as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            await client.prompt_and_wait(sid, "echo works")
            await client.close_session(sid)
            await client.resume_session(sid, "/tmp", replay=True)
            assert list(client.view(sid).messages().values()) == ["echo works"]
    assert "the session store cannot be used" in caplog.text
    assert path.read_text() == "not a database"


async def test_an_imported_session_is_listed_and_resumed(make_store: StoreFactory) -> None:
    store = make_store()
    record = SessionRecord(session_id="sess_imported_42", cwd="/home/me/project", title="Imported thread")
    record.history.record(UserMessage(message_id="u1", content=[TextContent(text="fix the bug")]))
    record.history.record(AgentMessage(message_id="a1", content=[TextContent(text="Done.")]))
    await store.save(record)
    async with connect_agent(ScriptedAgent(), store=make_store()) as client:
        await client.initialize()
        [listed] = await client.list_sessions("/home/me/project")
        assert listed["sessionId"] == "sess_imported_42" and listed["title"] == "Imported thread"
        await client.resume_session("sess_imported_42", "/home/me/project", replay=True)
        view = client.view("sess_imported_42")
        assert list(view.messages("user_message").values()) == ["fix the bug"]
        assert list(view.messages().values()) == ["Done."]


# -- a save that fails when a session closes -------------------------------------------------


class FaultyStore(SessionStore):
    """A store over ``inner`` whose writes fail while ``failing`` is set (a full disk, a locked file)."""

    durable = True

    def __init__(self, inner: SessionStore) -> None:
        super().__init__()
        self.inner = inner
        self.failing = False
        self.failed_saves = 0

    async def load(self, session_id: str, *, terminal_tail: int | None = None) -> SessionRecord | None:
        return await self.inner.load(session_id, terminal_tail=terminal_tail)

    async def save(self, record: SessionRecord) -> None:
        if self.failing:
            self.failed_saves += 1
            record.history.unsaved()
            raise StoreError(f"could not save session {record.session_id}: disk full")
        await self.inner.save(record)

    async def delete(self, session_id: str) -> bool:
        return await self.inner.delete(session_id)

    async def list_sessions(self, *, cwd: str | None = None, offset: int = 0, limit: int = 50,
                            archived: bool | None = None, principal: str | None = None,
                            after: tuple[str, str] | None = None) -> list[StoredSession]:
        return await self.inner.list_sessions(cwd=cwd, offset=offset, limit=limit, archived=archived,
                                              principal=principal, after=after)


async def stored_messages(store: SessionStore, sid: str) -> list[str]:
    record = await store.load(sid)
    if record is None:
        return []
    return ["".join(getattr(c, "text", "") for c in item.content or [])
            for item in record.history.replay() if isinstance(item, AgentMessage)]


async def test_a_session_whose_save_fails_at_close_stays_in_memory_and_is_saved_later(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Closing answers as always; the session stays listed and resumable from memory, its save is
    retried until it lands, and each step is on stderr."""
    inner = make_store()
    store = FaultyStore(inner)
    with caplog.at_level(logging.WARNING, logger="acp_agent.store.keeper"):
        async with connect_agent(ScriptedAgent(), store=store) as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            await client.prompt_and_wait(sid, "echo before the disk filled")
            store.failing = True
            await client.prompt_and_wait(sid, "echo after the disk filled")
            await client.close_session(sid)  # answered {} like any close
            assert f"session {sid} was closed but could not be saved" in caplog.text
            assert [s["sessionId"] for s in await client.list_sessions()] == [sid]
            await client.resume_session(sid, "/tmp", replay=True)
            assert list(client.view(sid).messages().values())[-1] == "echo after the disk filled"
            await client.prompt_and_wait(sid, "echo resumed from memory")
            await client.close_session(sid)
            store.failing = False
            with anyio.fail_after(20):  # retried every second at first, then less often
                while f"session {sid} is saved now" not in caplog.text:
                    await anyio.sleep(0.05)
            assert (await stored_messages(inner, sid))[-1] == "echo resumed from memory"
    assert store.failed_saves >= 2
    if not inner.durable:
        return
    async with connect_agent(ScriptedAgent(), store=make_store()) as client:  # a restart
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert list(client.view(sid).messages().values()) == [
            "echo before the disk filled", "echo after the disk filled", "echo resumed from memory"]


async def test_a_session_never_saved_is_listed_deleted_and_named_when_lost(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    inner = make_store()
    store = FaultyStore(inner)
    store.failing = True  # from the session's creation on
    deleted: list[str] = []

    class Deleting(ScriptedAgent):
        async def delete_session(self, session_id: str) -> None:
            deleted.append(session_id)

    with caplog.at_level(logging.WARNING, logger="acp_agent.store.keeper"):
        async with connect_agent(Deleting(), store=store) as client:
            await client.initialize()
            kept = await client.new_session("/a")
            gone = await client.new_session("/b")
            for sid in (kept, gone):
                await client.prompt_and_wait(sid, "echo unsaved")
                await client.close_session(sid)
            assert [s["sessionId"] for s in await client.list_sessions()] == [kept, gone]
            assert [s["sessionId"] for s in await client.list_sessions("/b")] == [gone]
            await client.request("session/delete", {"sessionId": gone})
            assert deleted == [gone]
            assert [s["sessionId"] for s in await client.list_sessions()] == [kept]
            with pytest.raises(RequestError) as unknown:
                await client.resume_session(gone, "/b")
            assert unknown.value.code == -32002
    # the connection ended with the store still failing: the loss is named (the deleted one is no loss)
    lost = [r.getMessage() for r in caplog.records if "before the connection ended" in r.getMessage()]
    assert len(lost) == 1 and f"session {kept} could not be saved" in lost[0]
    assert await inner.load(kept) is None and await inner.load(gone) is None


# -- several processes on one SQLite file ----------------------------------------------------


async def test_sqlite_stores_sharing_a_file_open_and_write_concurrently(tmp_path: Path) -> None:
    """Four store objects on one new file (four connections, as four agent processes would have),
    opening at once and then saving and updating sessions at once: one migration, every write
    kept, the file intact."""
    path = tmp_path / "shared.sqlite3"
    stores = [SqliteStore(path) for _ in range(4)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.open)
    records: dict[str, SessionRecord] = {}

    async def writer(n: int, store: SqliteStore) -> None:
        for i in range(25):
            record = sample_record(f"sess_{n}_{i}")
            records[record.session_id] = record
            await store.save(record)
            record.history.append_text(False, "m1", f" from {n}")  # an incremental save on top
            record.title = f"writer {n}"
            await store.save(record)

    async with anyio.create_task_group() as tg:
        for n, store in enumerate(stores):
            tg.start_soon(writer, n, store)
    reader = SqliteStore(path)
    assert len(await reader.list_sessions(limit=1000)) == 100
    for sid, record in records.items():
        loaded = await reader.load(sid)
        assert loaded is not None and loaded.title == record.title
        assert dump(loaded.history) == dump(record.history)
    for store in [*stores, reader]:
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == SCHEMA_VERSION


async def test_agents_starting_together_on_a_new_file_all_open_it(tmp_path: Path) -> None:
    """While one connection creates the file or switches it to WAL, SQLite refuses another's switch at once
    ("database is locked", no busy wait): opening retries it. Before, about one round in ten failed here."""
    for round_ in range(60):
        path = tmp_path / f"new{round_}.sqlite3"
        stores = [SqliteStore(path) for _ in range(4)]
        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(store.open)
        for store in stores:
            await store.close()


# -- the author's side: importing, listing, deleting, reading the history -------------------------


class Rebuilding(ScriptedAgent, ContextAgent):
    """The site's agent (docs_src/resume_context.py): rebuilds a model context from ``session.history`` on
    resume; and remembers the sessions a client deleted."""

    name = "readme-agent"

    def __init__(self) -> None:
        super().__init__()
        ContextAgent.__init__(self)  # ScriptedAgent's __init__ does not pass it on
        self.deleted: list[str] = []

    async def delete_session(self, session_id: str) -> None:
        self.deleted.append(session_id)


async def import_threads(folder: Path) -> None:
    """The site's import (docs_src/import_threads.py), into the file run_stdio would use."""
    store = SqliteStore.for_agent(Rebuilding.name)
    await import_site_threads(folder, store)
    await store.close()


async def test_imported_threads_are_listed_resumed_rebuilt_deleted_and_imported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_AGENT_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "threads"
    folder.mkdir()
    threads = [
        {"id": "1", "cwd": "/home/me/app", "title": "Fix the login",
         "turns": [["why does login fail?", "The token expired."], ["fix it", "Done."]]},
        {"id": "2", "cwd": "/home/me/lib", "title": "Old question", "turns": [["hello", "Hi."]]},
    ]
    for thread in threads:
        (folder / f"{thread['id']}.json").write_text(json.dumps(thread))
    await import_threads(folder)

    agent = Rebuilding()
    async with connect_agent(agent, store=SqliteStore.for_agent(Rebuilding.name)) as client:
        await client.initialize()
        assert sorted((s["sessionId"], s["title"]) for s in await client.list_sessions()) == [
            ("sess_imported_1", "Fix the login"), ("sess_imported_2", "Old question")]
        await client.resume_session("sess_imported_1", "/home/me/app", replay=True)
        assert list(client.view("sess_imported_1").messages().values()) == ["The token expired.", "Done."]
        assert agent.contexts["sess_imported_1"] == [
            {"role": "user", "content": "why does login fail?"}, {"role": "assistant", "content": "The token expired."},
            {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "Done."}]
        await client.prompt_and_wait("sess_imported_1", "echo and now?")
        await client.prompt_and_wait("sess_imported_1", "extras")  # a tool call, among others
        await client.request("session/delete", {"sessionId": "sess_imported_2"})
        assert agent.deleted == ["sess_imported_2"]

    await import_threads(folder)  # the next start imports again: a continued thread keeps its new turns,
    reader = SqliteStore.for_agent(Rebuilding.name)  # and a deleted one comes back (as the README says)
    assert await reader.load("sess_imported_2") is not None
    await reader.close()
    agent = Rebuilding()
    async with connect_agent(agent, store=SqliteStore.for_agent(Rebuilding.name)) as client:
        await client.initialize()
        await client.resume_session("sess_imported_1", "/home/me/app")
        assert agent.contexts["sess_imported_1"][4:] == [
            {"role": "user", "content": "echo and now?"}, {"role": "assistant", "content": "echo and now?"},
            {"role": "user", "content": "extras"}, {"role": "tool", "content": "Read file: completed"}]


def _metadata_variants() -> list[SessionRecord]:
    """A record with nothing set, and one with each of the fields the info and state documents hold."""
    variants = [SessionRecord(session_id="s", cwd="/w")]
    for fields in ({"additional_directories": ["/x"]}, {"meta": {}}, {"meta": {"k": 1}}, {"client_title": True},
                   {"available_commands": [AvailableCommand(name="go", description="Go")]},
                   {"data": {"n": 1}}, {"data": {"bad": object()}}):
        variants.append(SessionRecord(session_id="s", cwd="/w", **fields))
    return variants


@pytest.mark.parametrize("record", _metadata_variants())
def test_the_saved_metadata_text_is_what_the_documents_encode_to(record: SessionRecord) -> None:
    # A session with no metadata set saves constant text; any field set takes the documents' own encoding.
    assert encode_info_text(record) == encode_info(record).decode()
    assert encode_state_text(record) == encode_state(record).decode()


async def test_a_turn_ends_with_the_save_the_store_makes_at_once_or_else_awaits_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A turn's end saves with ``save_now`` when the store can (the SQLite journal: no await), else awaits
    ``save``; either way the turn is saved before its ``idle``, and a failing ``save_now`` is logged, not raised,
    and followed by an awaited ``save`` (a turn whose save failed never ends as if saved)."""
    calls: list[str] = []

    class Spy(SqliteStore):
        mode = "journal"

        def save_now(self, record: SessionRecord) -> bool:
            calls.append(f"now:{self.mode}")
            if self.mode == "raise":
                raise StoreError("disk on fire")
            return False if self.mode == "refuse" else super().save_now(record)

        async def save(self, record: SessionRecord) -> None:
            calls.append("save")
            await super().save(record)

    store = Spy(tmp_path / "s.sqlite3")
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        for mode in ("journal", "refuse", "raise"):
            store.mode = mode
            calls.clear()
            await client.prompt_and_wait(sid, f"echo {mode}")
            said = f"echo {mode}"  # what the agent says back
            kept = [t for t in journaled_texts(store.path) + committed_texts(store.path, sid) if t == said]
            expected = {"journal": (["now:journal"], [said]), "refuse": (["now:refuse", "save"], [said]),
                        "raise": (["now:raise", "save"], [said])}[mode]
            assert (calls, kept) == expected
    assert "disk on fire" in caplog.text


class _StreamingAgent(Agent):
    """Streams ``N`` text chunks (ASCII, then a few that need escapes or are not ASCII) as one message."""

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        count = int(prompt[0].text)  # type: ignore[union-attr]
        stream = session.message()
        for i in range(count):
            await stream.write(f"chunk {i} ")
        for text in ('"quoted"\n', "\x01", "é🙂"):
            await stream.write(text)
        return "end_turn"


@pytest.mark.parametrize("count", [3, 25_000])  # a journaled save, and one too big for the journal
async def test_sqlite_saves_a_streamed_message_as_its_model_serializes_and_resumes_it(
    tmp_path: Path, count: int
) -> None:
    """A streamed message is saved as JSON written without its model: the same bytes as the model's, and a
    restarted agent replays the text the client saw."""
    path = tmp_path / "agent.sqlite3"
    async with connect_agent(_StreamingAgent(), store=SqliteStore(path)) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, str(count))
        [seen] = client.view(sid).messages().values()
    assert seen == "".join(f"chunk {i} " for i in range(count)) + '"quoted"\n\x01é🙂'
    with sqlite3.connect(path) as db:
        [(item,)] = db.execute("SELECT item FROM history WHERE kind = 'AgentMessage'").fetchall()
    saved = AgentMessage.model_validate_json(item)
    assert bytes(item) == to_json(saved) and saved.content == [TextContent(text=seen)]
    async with connect_agent(_StreamingAgent(), store=SqliteStore(path)) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert list(client.view(sid).messages().values()) == [seen]
