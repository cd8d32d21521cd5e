"""What a SQLite session file and its journal hold, read from outside the store (as another process would)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from acp_agent.store.journal import decode_line


def write_locked(path: Path) -> sqlite3.Connection:
    """Another connection, as another process would have, holding the file's write lock (``BEGIN
    IMMEDIATE``): end its transaction (``COMMIT``/``ROLLBACK``) to let writers through, then close it."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


def committed_texts(path: Path, sid: str) -> list[str]:
    """The agent messages of ``sid`` committed to the file, read by another connection."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT item FROM history WHERE session_id = ? AND kind = 'AgentMessage' ORDER BY seq",
                          (sid,)).fetchall()
    return [json.loads(bytes(item))["content"][0]["text"] for (item,) in rows]


def journal_lines(path: Path) -> list[bytes]:
    """Every line of every journal file of the database ``path``."""
    return [line for file in sorted(path.parent.glob(f"{path.name}.journal-*"))
            for line in file.read_bytes().splitlines()]


def journaled_texts(path: Path) -> list[str]:
    """The agent messages in every journal file of ``path`` (saves not committed yet, or replayed later)."""
    return [json.loads(data)["content"][0]["text"] for line in journal_lines(path)
            for _, _, kind, data in decode_line(line)[3] if kind == "AgentMessage"]
