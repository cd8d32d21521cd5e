"""``acp_agent.store.locks``: one lock per session per SQLite file, held by a process and gone with it."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from acp_agent.store.locks import SessionLocks, lock_offset, session_locks

PROBE = """
import sys
from pathlib import Path
from acp_agent.store.locks import session_locks
print(session_locks(Path(sys.argv[1])).acquire(sys.argv[2]))
"""


def other_process_gets(database: Path, session_id: str) -> bool:
    """Whether another process can take the lock of ``session_id`` (it ends at once, letting go)."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(database), session_id], capture_output=True, text=True,
                         check=True, timeout=60)
    return out.stdout.strip() == "True"


def test_a_lock_is_held_per_process_counted_and_released(tmp_path: Path) -> None:
    database = tmp_path / "agent.sqlite3"
    locks = session_locks(database)
    assert session_locks(tmp_path / "." / "agent.sqlite3") is locks  # one object (one descriptor) per file
    assert locks.acquire("sess_a") and locks.acquire("sess_a")  # two holders in this process
    assert not other_process_gets(database, "sess_a")
    assert other_process_gets(database, "sess_b")  # another session is another byte
    locks.release("sess_a")
    assert locks.held("sess_a") and not other_process_gets(database, "sess_a")
    locks.release("sess_a")
    assert not locks.held("sess_a") and other_process_gets(database, "sess_a")
    locks.release("sess_a")  # one too many: nothing happens
    assert stat.S_IMODE(locks.path.stat().st_mode) == 0o600


def test_lock_offsets_are_spread_and_stay_in_range() -> None:
    offsets = {lock_offset(f"sess_{i}") for i in range(1000)}
    assert len(offsets) == 1000
    assert all(0 <= o < 1 << 62 for o in offsets)
    assert SessionLocks(Path("/x/a.sqlite3")).path == Path("/x/a.sqlite3.sessions.lock")
