"""A full disk under the SQLite store: the real cause is logged, and a turn whose save failed ends with an
error the client reads instead of an ``idle`` that reads as saved (issue 27, section 4).

The disk is made full in this process: the journal's writes fail with ``ENOSPC`` and the database may not grow
(``PRAGMA max_page_count``), which SQLite reports as ``SQLITE_FULL`` exactly as for a full file system.
``tests/e2e/test_hosting_durability.py`` does the same on a real full file system.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from acp_agent._session.turns import NOT_SAVED
from acp_agent.store import SqliteStore, StoreError
from acp_agent.store.journal import JournalFile
from acp_agent.testing.client import connect_agent
from tests.helpers.agents import ScriptedAgent

pytestmark = pytest.mark.anyio


class Disk:
    """Makes ``store``'s disk full (and free again)."""

    def __init__(self, store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.monkeypatch = monkeypatch

    async def _limit(self, pages: int | None) -> None:
        def limit() -> None:
            db = self.store._db
            assert db is not None
            count = db.execute("PRAGMA page_count").fetchone()[0]
            db.execute(f"PRAGMA max_page_count = {pages if pages is not None else count}")

        await self.store.in_thread(limit)

    async def fill(self) -> None:
        def no_space(file: JournalFile, data: bytes) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        self.monkeypatch.setattr(JournalFile, "append", no_space)
        await self._limit(None)

    async def free(self) -> None:
        self.monkeypatch.undo()
        await self._limit(1 << 30)


async def test_a_turn_not_saved_ends_with_an_error_and_the_cause_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    store = SqliteStore(tmp_path / "agent.sqlite3")
    disk = Disk(store, monkeypatch)
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        view = await client.prompt_and_wait(sid, "echo saved before")
        assert view.stop_reason == "end_turn"
        await disk.fill()
        big = "x" * 20_000
        view = await client.prompt_and_wait(sid, f"echo {big}")
        ended: dict[str, Any] = view.updates[-1]
        assert ended["state"] == "idle" and ended["stopReason"] == "error", ended
        assert ended["error"]["message"] == NOT_SAVED
        assert ended["error"]["data"] == {"sessionId": sid, "saved": False}
        assert "disk full" in caplog.text and str(store.path) in caplog.text
        assert "cannot rollback" not in caplog.text
        await disk.free()
        view = await client.prompt_and_wait(sid, "echo after")  # its save writes the turn before it too
        assert view.updates[-1]["stopReason"] == "end_turn"
    await store.close()
    async with connect_agent(ScriptedAgent(), store=SqliteStore(store.path)) as client:
        await client.initialize()
        await client.resume_session(sid, str(tmp_path), replay=True)
        assert list(client.view(sid).messages().values()) == ["echo saved before", f"echo {big}", "echo after"]


async def test_a_cancelled_turn_not_saved_still_ends_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R69 wins: a cancellation never ends ``error``; the log says the save failed."""
    store = SqliteStore(tmp_path / "agent.sqlite3")
    async with connect_agent(ScriptedAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt_and_wait(sid, "echo saved before")
        await Disk(store, monkeypatch).fill()

        def full(self: SqliteStore, db: Any, saves: Any) -> None:  # the database has free pages left: fill them
            raise StoreError(f"could not save session {sid} to {self.path}: disk full (database or disk is full)")

        monkeypatch.setattr(SqliteStore, "_apply", full)
        view = client.view(sid)
        await client.prompt(sid, "sleep 30")
        await client.wait_for(lambda: "sleeping" in view.messages().values())
        client.cancel(sid)
        await client.wait_idle(sid, 2)
        assert view.updates[-1]["stopReason"] == "cancelled" and "error" not in view.updates[-1]
        assert "disk full" in caplog.text
        monkeypatch.undo()
    await store.close()
