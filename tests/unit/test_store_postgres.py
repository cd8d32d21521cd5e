"""``PostgresStore``'s group commit: saves of many sessions due together share one transaction, each still
returns only once its changes committed, and a save that fails in a batch fails alone."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_agent import AgentMessage, UserMessage
from acp_agent.records import SessionRecord
from acp_agent.schema import TextContent
from acp_agent.store import StoreError
from acp_agent.store.postgres import PostgresStore  # psycopg is imported when it opens (postgres_dsn skips without)

pytestmark = pytest.mark.anyio


def transactions_so_far(dsn: str) -> int:
    """The database's transaction counter (each write transaction takes one id; so does this call)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute("SELECT txid_current()").fetchone()
        assert row is not None
        return int(row[0])


def turn(record: SessionRecord, text: str) -> None:
    """A turn's worth of history: the user's message and the answer."""
    record.history.record(UserMessage(message_id=f"u-{text}", content=[TextContent(text=text)]))
    record.history.record(AgentMessage(message_id=f"a-{text}", content=[TextContent(text=f"echo {text}")]))


def texts(record: SessionRecord | None) -> list[str]:
    assert record is not None
    found: list[str] = []
    for item in record.history.replay():
        content: Any = getattr(item, "content", None)
        found += [block.text for block in content or [] if isinstance(block, TextContent)]
    return found


async def test_saves_due_together_are_committed_in_one_transaction(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    await store.open()
    records = [SessionRecord(session_id=f"sess_{i}", cwd="/work") for i in range(40)]
    for number, record in enumerate(records):
        turn(record, f"first {number}")
    before = transactions_so_far(postgres_dsn)
    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(store.save, record)
    spent = transactions_so_far(postgres_dsn) - before - 1
    # One transaction per writer that found nothing to wait for, then the rest in batches (one at a time before: 40).
    assert spent <= store.writers + 4, f"{len(records)} saves took {spent} transactions"
    for number, record in enumerate(records):  # a second turn each, one record saved twice in a batch
        turn(record, f"second {number}")
    async with anyio.create_task_group() as tg:
        for record in [*records, records[0]]:
            tg.start_soon(store.save, record)
    await store.close()
    again = PostgresStore(postgres_dsn)  # a restarted replica reads every turn
    for number in range(len(records)):
        assert texts(await again.load(f"sess_{number}")) == [
            f"first {number}", f"echo first {number}", f"second {number}", f"echo second {number}"]
    await again.close()


async def test_a_save_that_fails_in_a_batch_fails_alone(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    await store.open()
    records = [SessionRecord(session_id=f"sess_{i}", cwd="/work") for i in range(6)]
    for record in records:
        turn(record, record.session_id)
    records[3].title = "bad\x00title"  # PostgreSQL refuses a NUL in text
    outcomes: dict[str, BaseException | None] = {}

    async def save(record: SessionRecord) -> None:
        try:
            await store.save(record)
            outcomes[record.session_id] = None
        except StoreError as exc:
            outcomes[record.session_id] = exc

    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(save, record)
    assert [sid for sid, error in outcomes.items() if error is not None] == ["sess_3"]
    assert "could not save session sess_3" in str(outcomes["sess_3"])
    records[3].title = "fixed"
    await store.save(records[3])  # the failed save's changes are written by the next one
    for record in records:
        assert texts(await store.load(record.session_id)) == [record.session_id, f"echo {record.session_id}"]
    await store.close()


async def test_a_save_cancelled_while_it_waited_is_written_by_the_next(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn, writers=1)
    await store.open()
    waiting, later = (SessionRecord(session_id=f"sess_{name}", cwd="/work") for name in ("b", "c"))
    for record in (waiting, later):
        turn(record, record.session_id)
    held, done = anyio.Event(), anyio.Event()

    async def hold() -> None:  # the writer busy with a batch
        async with store._writer_slots():
            held.set()
            await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await held.wait()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await store.save(waiting)  # joins the next batch, then gives up waiting
        done.set()
    assert waiting.history.changed  # its changes were not taken
    await store.save(later)  # the batch it waits in holds ``waiting`` too
    assert not waiting.history.changed
    again = PostgresStore(postgres_dsn)
    assert texts(await again.load("sess_b")) == ["sess_b", "echo sess_b"]
    await again.close()
    await store.close()


async def test_one_session_s_saves_commit_in_order_across_writers(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn, writers=4)
    await store.open()
    record = SessionRecord(session_id="sess_one", cwd="/work")
    others = [SessionRecord(session_id=f"sess_other_{i}", cwd="/work") for i in range(8)]

    async def change_and_save(number: int) -> None:
        turn(record, f"t{number}")
        record.title = f"after t{number}"
        for other in others:
            turn(other, f"{other.session_id} t{number}")
        async with anyio.create_task_group() as tg:
            for saved in (record, *others):
                tg.start_soon(store.save, saved)

    async with anyio.create_task_group() as tg:
        for number in range(20):
            tg.start_soon(change_and_save, number)
            await anyio.sleep(0)
    await store.close()
    again = PostgresStore(postgres_dsn)
    loaded = await again.load("sess_one")
    assert loaded is not None and loaded.title == record.title  # the last save committed last
    assert texts(loaded) == texts(record)
    for other in others:
        assert texts(await again.load(other.session_id)) == texts(other)
    await again.close()


async def test_a_delete_waits_for_a_save_under_way(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    await store.open()
    record = SessionRecord(session_id="sess_gone", cwd="/work")
    turn(record, "doomed")
    async with anyio.create_task_group() as tg:
        tg.start_soon(store.save, record)
        await anyio.sleep(0)
        record.deleted = True  # as the keeper marks it before deleting
        await store.delete("sess_gone")
    assert await store.load("sess_gone") is None
    await store.close()


async def test_a_save_whose_lease_was_taken_fails_alone_in_its_batch(postgres_dsn: str) -> None:
    from acp_agent.store.leases import SessionTakenError

    store = PostgresStore(postgres_dsn, writers=1)
    await store.open()
    records = [SessionRecord(session_id=f"sess_{i}", cwd="/work") for i in range(5)]
    for record in records:
        assert await store.acquire_session(record.session_id)
        turn(record, record.session_id)
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as db:  # another process took sess_2 over
        db.execute("UPDATE acp_leases SET owner = 'elsewhere', epoch = epoch + 1 WHERE session_id = 'sess_2'")
    outcomes: dict[str, BaseException | None] = {}

    async def save(record: SessionRecord) -> None:
        try:
            await store.save(record)
            outcomes[record.session_id] = None
        except StoreError as exc:
            outcomes[record.session_id] = exc

    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(save, record)
    assert [sid for sid, error in outcomes.items() if error is not None] == ["sess_2"]
    assert isinstance(outcomes["sess_2"], SessionTakenError)
    for record in records:
        loaded = await store.load(record.session_id)
        assert (loaded is None) == (record.session_id == "sess_2")
    await store.close()


async def test_a_batch_of_leased_sessions_is_a_few_statements(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch,
                                                              ) -> None:
    """A batch writes its leased sessions' rows (fence included) in one statement, clears their history in one
    and writes their history rows in one, however many sessions it holds (before: a fence query, a session
    upsert, a history delete per session and a history upsert per row: 100 for these 20 new sessions)."""
    import psycopg

    store = PostgresStore(postgres_dsn, writers=1)
    await store.open()
    records = [SessionRecord(session_id=f"sess_{i}", cwd="/work") for i in range(20)]
    for record in records:
        assert await store.acquire_session(record.session_id)
        turn(record, record.session_id)
    sent: list[str] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(cursor, query, params, **kwargs)

    def counted_many(cursor: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params_seq = list(params_seq)
        sent.extend(str(query) for _ in params_seq)
        return executemany(cursor, query, params_seq, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    monkeypatch.setattr(psycopg.Cursor, "executemany", counted_many)
    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(store.save, record)
    monkeypatch.undo()
    # The first save alone (nothing to join yet), the other 19 in one batch: three statements each.
    assert len(sent) <= 6, sent
    for record in records:
        assert texts(await store.load(record.session_id)) == [record.session_id, f"echo {record.session_id}"]
    await store.close()
