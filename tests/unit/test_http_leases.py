"""Session leases across processes (asyncio and trio): the store's leases as the server holds them
(`StoreLeases`), and the deprecated advisory locks (`PostgresLeases`)."""

from __future__ import annotations

import anyio
import pytest

from acp_agent.http.leases import Leases, PostgresLeases, StoreLeases, lease_key
from acp_agent.store.postgres import PostgresStore

pytestmark = pytest.mark.filterwarnings("ignore:acp_agent.http.leases.PostgresLeases is deprecated")


def test_lease_keys_are_stable_signed_64_bit_numbers() -> None:
    keys = {lease_key(f"sess_{i}") for i in range(10000)}
    assert len(keys) == 10000
    assert all(-(2**63) <= key < 2**63 for key in keys)
    assert lease_key("sess_a") == lease_key("sess_a") != lease_key("sess_b")


@pytest.mark.anyio
async def test_local_leases_are_always_granted() -> None:
    leases = Leases()
    assert await leases.acquire("sess_a") and await leases.acquire("sess_a")
    await leases.release("sess_a")
    await leases.close()


@pytest.mark.anyio
async def test_one_process_holds_a_lease_at_a_time(postgres_dsn: str) -> None:
    one, two = PostgresLeases(postgres_dsn), PostgresLeases(postgres_dsn)
    try:
        assert await one.acquire("sess_a")
        assert await one.acquire("sess_a")  # already held here: granted again, still one lock
        assert not await two.acquire("sess_a")
        assert await two.acquire("sess_b")
        await one.release("sess_a")
        assert await two.acquire("sess_a")
        await one.release("sess_b")  # not held by one: nothing happens
        assert not await one.acquire("sess_b")
        # Closing gives every lease back (as a process that dies does: its database session ends).
        await two.close()
        # The server ends two's database session (and frees its locks) just after the connection closes.
        with anyio.fail_after(5):
            while not await one.acquire("sess_a"):
                await anyio.sleep(0.05)
        assert await one.acquire("sess_b")
        # A lost lease connection reconnects and takes its locks again.
        assert one._db is not None
        one._db.close()
        assert await one.acquire("sess_c")
        assert not await two.acquire("sess_a")
    finally:
        await one.close()
        await two.close()


@pytest.mark.anyio
async def test_an_unreachable_database_does_not_block_sessions() -> None:
    leases = PostgresLeases("postgresql://nobody@127.0.0.1:1/none", connect_timeout=1)
    assert await leases.acquire("sess_a")  # logged; the request goes ahead
    await leases.release("sess_a")
    await leases.close()


def test_postgres_leases_are_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="StoreLeases"):
        PostgresLeases("postgresql://nobody@127.0.0.1:1/none")


@pytest.mark.anyio
async def test_store_leases_hold_each_session_once_per_process(postgres_dsn: str) -> None:
    one, two = PostgresStore(postgres_dsn, lease_ttl=30), PostgresStore(postgres_dsn, lease_ttl=30)
    mine, theirs = StoreLeases(one), StoreLeases(two)
    try:
        assert await mine.acquire("sess_a") and await mine.acquire("sess_a")  # one hold however often asked
        assert not await theirs.acquire("sess_a")
        assert await one.acquire_session("sess_a")  # a connection's own hold (the keeper's) counts apart
        await mine.release("sess_a")
        await mine.release("sess_a")  # given back once
        assert not await theirs.acquire("sess_a")  # the keeper's hold remains
        await one.release_session("sess_a")
        assert await theirs.acquire("sess_a")
        await theirs.close()
        assert await mine.acquire("sess_a")
    finally:
        await one.close()
        await two.close()
