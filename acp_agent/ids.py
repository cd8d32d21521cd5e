"""Opaque ids the agent makes up: messages, tool calls, terminals, sessions.

Ids must not repeat across restarts: a session's history outlives the process (it is kept in
a store), and a resumed session keeps adding messages and tool calls next to the old ones.
They must not tell one client anything about another either: one process serves many
connections (``acp_agent.http``), so an id built from a process-wide counter would let a client
count what the others do between two of its own ids. So every id is random as a whole: 64 bits
for an item id (unique next to the ids of any session, with odds of a repeat far below one in a
billion even for a million ids in one session), 80 bits for a session id (it names a stored
record, possibly shared by several machines).
"""

from __future__ import annotations

import base64
import secrets

__all__ = ["new_id", "new_session_id"]


def _random_text(n_bytes: int) -> str:
    return base64.b32encode(secrets.token_bytes(n_bytes)).decode().rstrip("=").lower()


def new_id(prefix: str) -> str:
    """A random opaque id such as ``msg_3f9c0a7d12e4b865`` (64 random bits after the prefix)."""
    if prefix == "sess":
        return new_session_id()
    return f"{prefix}_{secrets.token_bytes(8).hex()}"


def new_session_id() -> str:
    """A random session id such as ``sess_mfrggzdfmztwq2lk`` (80 random bits)."""
    return f"sess_{_random_text(10)}"
