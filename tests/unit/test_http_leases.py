"""Session leases across processes: PostgreSQL advisory locks, one holder at a time (asyncio and trio)."""

from __future__ import annotations

import anyio
import pytest

from acp_agent.http.leases import Leases, PostgresLeases, lease_key


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
