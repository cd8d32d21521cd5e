"""The PostgreSQL store's session leases in one process (asyncio and trio): epochs, expiry, fencing of a stale
owner's saves, a dead owner's leases taken over at once; two stores stand for two processes."""

from __future__ import annotations

import anyio
import pytest

from acp_agent.records import SessionRecord
from acp_agent.store.leases import SessionTakenError
from acp_agent.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio


def record(session_id: str, title: str) -> SessionRecord:
    kept = SessionRecord(session_id, "/tmp")
    kept.title = title
    return kept


def freeze(store: PostgresStore) -> None:
    """The owner stops renewing (as a frozen process does)."""
    store.leases._stop.set()


async def test_a_stale_owner_s_save_is_refused_after_a_takeover(postgres_dsn: str) -> None:
    old, new = PostgresStore(postgres_dsn, lease_ttl=0.6), PostgresStore(postgres_dsn, lease_ttl=0.6)
    try:
        assert await old.acquire_session("sess_a")
        assert old.leases.epoch("sess_a") == 1
        await old.save(record("sess_a", "by the first owner"))
        assert not await new.acquire_session("sess_a")  # renewed: held
        await anyio.sleep(1.0)
        assert not await new.acquire_session("sess_a")  # still renewed past its time to live
        freeze(old)
        await anyio.sleep(0.8)
        assert await new.acquire_session("sess_a")  # expired: taken over
        assert new.leases.epoch("sess_a") == 2
        await new.save(record("sess_a", "by the new owner"))
        with pytest.raises(SessionTakenError) as caught:
            await old.save(record("sess_a", "late, by the stale owner"))
        assert caught.value.epoch == 1
        with pytest.raises(SessionTakenError):  # known lost now: refused without asking the database
            old.leases.epoch("sess_a")
        found = await new.find("sess_a")
        assert found is not None and found.title == "by the new owner"
        await new.release_session("sess_a")
        await old.release_session("sess_a")  # a lost lease is not given back (it is not this owner's)
        assert await old.acquire_session("sess_a")  # free again: taken with the next epoch
        assert old.leases.epoch("sess_a") == 3
    finally:
        await old.close()
        await new.close()


async def test_a_dead_owner_s_lease_is_taken_over_at_once(postgres_dsn: str) -> None:
    dead, alive = PostgresStore(postgres_dsn, lease_ttl=60), PostgresStore(postgres_dsn, lease_ttl=60)
    try:
        assert await dead.acquire_session("sess_b")
        assert not await alive.acquire_session("sess_b")
        freeze(dead)
        db = dead.leases._db
        assert db is not None
        psycopg = pytest.importorskip("psycopg")
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:  # its lease connection ends (the process died)
            admin.execute("SELECT pg_terminate_backend(%s)", (db.info.backend_pid,))
        with anyio.fail_after(5):
            while not await alive.acquire_session("sess_b"):
                await anyio.sleep(0.05)
    finally:
        await dead.close()
        await alive.close()


async def test_an_agent_s_own_save_of_a_session_it_does_not_lease_is_not_fenced(postgres_dsn: str) -> None:
    store = PostgresStore(postgres_dsn)
    try:
        await store.save(record("sess_c", "imported"))
        assert store.leases.epoch("sess_c") is None
    finally:
        await store.close()
