"""Property: a ``session/list`` walk by cursor, with sessions changing between its pages, never lists a session twice,
never skips one that did not change during the walk, and lists each page most recently active first; and one
principal's walk lists only that principal's sessions. Checked on the memory and SQLite stores for any interleaving
of page reads and session changes (issue 28's order, issue 27's principals)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_agent.records import SessionRecord
from acp_agent.store import MemoryStore, SessionStore, SqliteStore

PAGE = 3


def at(second: int) -> str:
    return f"2026-12-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


async def walk(store: SessionStore, count: int, steps: list[tuple[int, int]]) -> None:
    owners = {f"sess_{i:03d}": ("alice" if i % 3 else "bob") for i in range(count)}
    clock = 0
    for sid, owner in owners.items():
        clock += 1
        await store.save(SessionRecord(session_id=sid, cwd="/w", updated_at=at(clock // 2), principal=owner))
    seen: list[str] = []
    changed: set[str] = set()
    after = None
    step = iter(steps)
    while True:
        page = await store.list_sessions(principal="alice", limit=PAGE, after=after)
        keys = [s.key for s in page]
        assert keys == sorted(keys, reverse=True)
        assert all(s.principal == "alice" for s in page)
        seen += [s.session_id for s in page]
        if len(page) < PAGE:
            break
        after = page[-1].key
        touches, seconds = next(step, (0, 0))
        for n in range(touches):  # some sessions become active between two pages
            sid = f"sess_{(seconds * 7 + n * 5) % count:03d}"
            clock += 2 * seconds + 1
            await store.save(SessionRecord(session_id=sid, cwd="/w", updated_at=at(clock // 2), principal=owners[sid]))
            changed.add(sid)
    assert len(seen) == len(set(seen)), "a session listed twice"
    mine = {sid for sid, owner in owners.items() if owner == "alice"}
    assert set(seen) <= mine
    assert mine - changed <= set(seen), "a session that did not change was skipped"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.integers(0, 25), steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=10),
       kind=st.sampled_from(["memory", "sqlite"]))
def test_a_cursor_walk_neither_repeats_nor_skips(count: int, steps: list[tuple[int, int]], kind: str) -> None:
    async def main() -> None:
        if kind == "memory":
            await walk(MemoryStore(), count, steps)
            return
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "s.sqlite3")
            try:
                await walk(store, count, steps)
            finally:
                await store.close()

    anyio.run(main)
