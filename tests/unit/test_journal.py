"""The SQLite store's journal on its failure and concurrency paths: what a SIGKILL, a full disk or a
busy database at the wrong moment must not lose or replay over newer data."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import acp_agent.store.sqlite as sqlite_module
from acp_agent import AgentMessage, TextContent
from acp_agent.records import SessionRecord
from acp_agent.store import SqliteStore, StoreError
from acp_agent.store.journal import Journal, JournalFile, orphans
from tests.helpers.sqlite_files import committed_texts, journaled_texts, write_locked

pytestmark = pytest.mark.anyio

BIG = "x" * (sqlite_module.JOURNAL_BYTES + 1)  # a save this big commits at once instead of being journaled


def say(record: SessionRecord, text: str) -> None:
    record.history.record(AgentMessage(message_id=f"m_{len(list(record.history.replay()))}",
                                       content=[TextContent(text=text)]))


async def saved_store(tmp_path: Path, sid: str) -> tuple[SqliteStore, SessionRecord]:
    """A store on a new file (waiting up to 10 s for the write lock) with session ``sid`` saved and committed."""
    store = SqliteStore(tmp_path / "a.sqlite3", busy_timeout=10.0)
    record = SessionRecord(session_id=sid, cwd="/w")
    await store.save(record)
    await store.sync()
    return store, record


def killed(store: SqliteStore) -> None:
    """Leave ``store`` as a SIGKILL of its process would: journal files in place and unlocked, nothing
    more committed, the connection gone."""
    store._halt.set()
    store._hurry.set()
    store._wake.set()
    if store._committer is not None:
        store._committer.join()
    for file in (*store._stale, store._file, store._spare):
        if file is not None:
            os.close(file.fd)
    store._file = store._spare = store._committer = None
    store._stale, store._pending = [], []
    db, store._db = store._db, None
    if db is not None:
        db.close()


async def test_sync_waits_for_the_commit_the_committer_thread_is_making(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closing session's ``sync`` returns once its saves are committed, even when the committer
    thread had already taken them (another process resuming it must read all of it)."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 0.01)
    store, record = await saved_store(tmp_path, "sess_sync")
    locker = write_locked(store.path)  # another process writes: the committer's commit waits for it
    say(record, "last turn")
    await store.save(record)
    with anyio.fail_after(10):
        while store._pending or not store._thread_lock.locked():  # the committer took the save
            await anyio.sleep(0.005)

    async def release_soon() -> None:
        await anyio.sleep(0.3)
        locker.execute("ROLLBACK")

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_soon)
        await store.sync()
        assert committed_texts(store.path, record.session_id) == ["last turn"]
    locker.close()
    await store.close()


async def test_a_journaled_save_never_overtakes_a_save_still_committing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flush's big save (committed at once) waits for the write lock; the turn ends meanwhile and
    its small save must not return (the ``idle`` goes out) while the big one is neither committed nor
    journaled: a SIGKILL then would lose part of a turn the client saw end."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    store, record = await saved_store(tmp_path, "sess_order")
    locker = write_locked(store.path)

    async def release_soon() -> None:
        await anyio.sleep(0.3)
        locker.execute("ROLLBACK")

    async with anyio.create_task_group() as tg:
        say(record, BIG)
        tg.start_soon(store.save, record)  # the flush: commits at once, waits for the lock in a thread
        with anyio.fail_after(10):
            while not store._thread_lock.locked():
                await anyio.sleep(0.005)
        say(record, "end of turn")
        tg.start_soon(release_soon)
        await store.save(record)  # the turn's save: its idle goes out once this returns
        kept = committed_texts(store.path, record.session_id) + journaled_texts(store.path)
        assert BIG in kept and "end of turn" in kept
    locker.close()
    await store.close()
    loaded = await SqliteStore(store.path).load(record.session_id)
    assert loaded is not None
    assert [i.content[0].text for i in loaded.history.replay()] == [BIG, "end of turn"]  # type: ignore[union-attr]


async def test_a_journal_file_that_fails_during_a_commit_keeps_its_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while a batch commits: the new journal file, holding a save not in that batch, is
    not deleted when the batch commits."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = SessionRecord(session_id="sess_full", cwd="/w")
    await store.open()
    entered, proceed = threading.Event(), threading.Event()
    calls: list[int] = []
    real_apply = SqliteStore._apply

    def apply(self: SqliteStore, db: sqlite3.Connection, saves: Any) -> None:
        calls.append(len(saves))
        if len(calls) == 1:
            entered.set()
            proceed.wait(10)
        elif len(calls) == 2:
            raise StoreError("disk full")
        real_apply(self, db, saves)

    monkeypatch.setattr(SqliteStore, "_apply", apply)
    full = False
    real_append = JournalFile.append

    def append(self: JournalFile, data: bytes) -> None:
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, data)

    monkeypatch.setattr(JournalFile, "append", append)
    say(record, "one")
    await store.save(record)
    failed: list[BaseException] = []

    async def third() -> None:
        try:
            await store.save(record)
        except StoreError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(store.sync)  # commits "one" and moves on to a new journal file
        await anyio.to_thread.run_sync(entered.wait, 10)
        say(record, "two")
        await store.save(record)  # journaled in the new file: its idle goes out
        full = True
        say(record, "three")
        tg.start_soon(third)  # the journal cannot be written: commits at once, after the batch
        with anyio.fail_after(10):
            while not store._stale:
                await anyio.sleep(0.005)
        proceed.set()
    assert failed  # "three" could not be committed, and said so
    assert "two" in journaled_texts(store.path)  # "two" went idle: it must still be on disk
    killed(store)
    monkeypatch.setattr(SqliteStore, "_apply", real_apply)
    loaded = await SqliteStore(store.path).load(record.session_id)
    assert loaded is not None and [i.content[0].text for i in loaded.history.replay()  # type: ignore[union-attr]
                                   ][:2] == ["one", "two"]


async def test_without_a_new_journal_file_committed_saves_leave_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No new journal file can be made (no file descriptors left): the committed saves must not stay in
    the current one, or a restart replays them over what was saved since."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    store = SqliteStore(tmp_path / "a.sqlite3")
    record = SessionRecord(session_id="sess_spare", cwd="/w", title="old")
    await store.open()
    say(record, "one")
    await store.save(record)

    def refuse(self: Journal) -> JournalFile:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Journal, "start", refuse)
    await store.sync()
    assert journaled_texts(store.path) == []
    record.title = "new"
    say(record, BIG)
    await store.save(record)  # commits at once
    killed(store)
    loaded = await SqliteStore(store.path).load(record.session_id)
    assert loaded is not None and loaded.title == "new"
    assert [i.content[0].text for i in loaded.history.replay()] == ["one", BIG]  # type: ignore[union-attr]


async def test_a_journal_is_not_replayed_ahead_of_an_earlier_one_that_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process died with two journal files (a failed commit left the first); the next process's
    commit of the first fails: the second must wait for it, or the first lands over the newer saves."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    path = tmp_path / "a.sqlite3"
    dying = SqliteStore(path)
    record = SessionRecord(session_id="sess_two_files", cwd="/w", title="old")
    await dying.open()
    say(record, "one")
    await dying.save(record)
    real_apply = SqliteStore._apply
    failing = [True]

    def apply(self: SqliteStore, db: sqlite3.Connection, saves: Any) -> None:
        if failing and failing.pop():
            raise StoreError("database is locked")
        real_apply(self, db, saves)

    monkeypatch.setattr(SqliteStore, "_apply", apply)
    with pytest.raises(StoreError):
        await dying.sync()  # "one" stays in the first file; the next saves go to a second one
    record.title = "new"
    say(record, "two")
    await dying.save(record)
    killed(dying)
    assert len(list(tmp_path.glob("a.sqlite3.journal-*"))) == 2
    failing.append(True)
    reader = SqliteStore(path)
    await reader.open()  # replaying the first file fails (another process held the write lock)
    loaded = await reader.load(record.session_id)
    assert loaded is not None and loaded.title == "new"
    assert [i.content[0].text for i in loaded.history.replay()] == ["one", "two"]  # type: ignore[union-attr]
    await reader.close()
    assert list(tmp_path.glob("a.sqlite3.journal-*")) == []


async def test_a_load_waits_for_another_process_replaying_the_journal_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process is replaying a dead process's journal (its commit waits for the write lock):
    a load of a session in that journal waits for the replay instead of reading the session without
    its last turns (which its next saves would then write over)."""
    import time

    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    path = tmp_path / "a.sqlite3"
    dying = SqliteStore(path)
    record = SessionRecord(session_id="sess_replayed", cwd="/w")
    await dying.save(record)
    await dying.sync()
    say(record, "went idle")
    reader = SqliteStore(path)
    await reader.open()  # open before the death: its next read finds the journal
    await dying.save(record)
    killed(dying)
    claimed = threading.Event()

    def other_process() -> None:  # what another process's store does when it opens the file
        replayer = SqliteStore(path)  # never opened: not a sibling the reader would wait for
        db = sqlite3.connect(path, isolation_level=None)
        try:
            with orphans(path) as found:
                claimed.set()
                time.sleep(0.5)  # its commit waits for another writer
                for file, saves in found:
                    replayer._apply(db, saves)
                    file.unlink()
        finally:
            db.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, other_process)
        await anyio.to_thread.run_sync(claimed.wait, 10)
        loaded = await reader.load(record.session_id)
    assert loaded is not None
    assert [i.content[0].text for i in loaded.history.replay()] == ["went idle"]  # type: ignore[union-attr]
    await reader.close()


async def test_a_save_during_close_does_not_leave_the_reopened_store_without_a_committer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save made while ``close`` waits for the committer thread to stop starts one that stops at once;
    once the store opens again, its journaled saves are still committed by a committer thread."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 0.01)
    store, record = await saved_store(tmp_path, "sess_reopen")  # its save started the committer thread
    locker = write_locked(store.path)  # the committer's next commit waits for another writer
    say(record, "before close")
    await store.save(record)
    with anyio.fail_after(10):
        while store._pending or not store._thread_lock.locked():
            await anyio.sleep(0.005)
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.close)
        with anyio.fail_after(10):
            while store._committer is not None:  # close is waiting for the committer thread to stop
                await anyio.sleep(0.005)
        say(record, "during close")
        await store.save(record)
        locker.execute("ROLLBACK")
    locker.close()
    say(record, "after reopening")
    await store.save(record)  # reopens the file; journaled
    with anyio.fail_after(10):
        while committed_texts(store.path, record.session_id)[-1:] != ["after reopening"]:
            await anyio.sleep(0.01)
    await store.close()


async def test_journal_files_stay_beside_a_relative_database_when_the_process_changes_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)
    (tmp_path / "data").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "data")
    store = SqliteStore("a.sqlite3")  # e.g. --store sqlite:a.sqlite3
    record = SessionRecord(session_id="sess_cwd", cwd="/w")
    await store.save(record)
    await store.sync()
    monkeypatch.chdir(tmp_path / "work")  # the agent moves into a session's directory
    say(record, "one")
    await store.save(record)
    await store.sync()  # a new journal file
    say(record, "two")
    await store.save(record)  # journaled: its idle goes out
    killed(store)
    assert list((tmp_path / "work").iterdir()) == []
    loaded = await SqliteStore(tmp_path / "data" / "a.sqlite3").load(record.session_id)
    assert loaded is not None
    assert [i.content[0].text for i in loaded.history.replay()] == ["one", "two"]  # type: ignore[union-attr]


async def test_save_now_journals_a_small_save_and_leaves_the_rest_to_save(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a turn saves with ``save_now`` (no await): a small save is journaled at once; before the
    file is open, or for a save too big for the journal, it answers ``False`` and the awaited ``save``
    commits what it left, in order."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 3600.0)  # nothing is committed behind the test's back
    unopened = SqliteStore(tmp_path / "b.sqlite3")
    fresh = SessionRecord(session_id="sess_unopened", cwd="/w")
    say(fresh, "kept for save")
    assert unopened.save_now(fresh) is False
    assert fresh.history.changed  # nothing was taken: save() writes it
    await unopened.close()

    store, record = await saved_store(tmp_path, "sess_now")
    say(record, "small")
    assert store.save_now(record) is True
    assert journaled_texts(store.path) == ["small"] and committed_texts(store.path, record.session_id) == []
    say(record, BIG)
    assert store.save_now(record) is False  # queued to commit at once: save() must be awaited
    say(record, "after")
    assert store.save_now(record) is False  # behind a save in no journal: nothing taken
    await store.save(record)
    assert committed_texts(store.path, record.session_id) == ["small", BIG, "after"]
    await store.close()


@pytest.mark.parametrize("step", range(5))
async def test_close_stops_the_committer_whichever_step_of_its_loop_the_signal_lands_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    """``close`` signals the committer thread (halt, then wake) and joins it. The thread must end
    wherever in its loop the signal lands: once, a wake-up cleared just after the signal left it
    waiting for ever, and the agent's exit waited with it."""
    monkeypatch.setattr(sqlite_module, "COMMIT_DELAY", 0.01)
    store = SqliteStore(tmp_path / "a.sqlite3")
    calls = 0
    signalled = threading.Event()

    def signal() -> None:  # what close does before joining the thread
        threading.Event.set(store._halt)
        threading.Event.set(store._wake)
        signalled.set()

    def before_call() -> None:
        nonlocal calls
        if threading.current_thread().name.startswith("acp-store-"):
            if calls == step:
                signal()
            calls += 1

    class Stepped(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            before_call()
            return super().wait(timeout)

        def clear(self) -> None:
            before_call()
            super().clear()

    store._wake, store._halt = Stepped(), Stepped()
    record = SessionRecord(session_id="sess_step", cwd="/w")
    await store.save(record)  # journaled: starts the committer thread
    committer = store._committer
    assert committer is not None
    if not await anyio.to_thread.run_sync(signalled.wait, 2.0):
        signal()  # the loop blocked before reaching this step: the signal lands while it waits
    await anyio.to_thread.run_sync(committer.join, 5.0)
    assert not committer.is_alive(), f"the committer thread missed close's signal before call {step}"
    await store.close()  # commits the journaled save the thread left
    reopened = SqliteStore(tmp_path / "a.sqlite3")
    assert (await reopened.load("sess_step")) is not None
    await reopened.close()
