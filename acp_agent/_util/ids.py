"""Opaque ids the agent makes up: messages, tool calls, terminals, sessions.

Ids must not repeat across restarts: a session's history outlives the process (it is kept in
a store), and a resumed session keeps adding messages and tool calls next to the old ones.
They must not tell one client anything about another either: one process serves many
connections (``acp_agent.http``), so an id built from a process-wide counter would let a client
count what the others do between two of its own ids. So every id is random as a whole: 64 bits
for an item id (unique next to the ids of any session, with odds of a repeat far below one in a
billion even for a million ids in one session), 80 bits for a session id (it names a stored
record, possibly shared by several machines).

Item ids take their bits from a pool drawn from the OS 256 ids at a time (an echo turn makes two ids:
one system call per 128 turns instead of two per turn). The pool is emptied in a forked child, so a
child never repeats its parent's ids; ``list.pop`` hands each piece out once, even across threads.
"""

from __future__ import annotations

import base64
import os
import secrets
from typing import Final

__all__ = ["new_id", "new_session_id"]


def _random_text(n_bytes: int) -> str:
    return base64.b32encode(secrets.token_bytes(n_bytes)).decode().rstrip("=").lower()


_POOL_IDS: Final = 256
_pool: list[str] = []  # hex text of 64 random bits each, handed out by pop()


def _refill() -> None:
    data = secrets.token_bytes(8 * _POOL_IDS).hex()
    _pool.extend(data[i : i + 16] for i in range(0, len(data), 16))


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_pool.clear)


def new_id(prefix: str) -> str:
    """A random opaque id such as ``msg_3f9c0a7d12e4b865`` (64 random bits after the prefix)."""
    if prefix == "sess":
        return new_session_id()
    while True:
        try:
            return f"{prefix}_{_pool.pop()}"
        except IndexError:
            _refill()


def new_session_id() -> str:
    """A random session id such as ``sess_mfrggzdfmztwq2lk`` (80 random bits)."""
    return f"sess_{_random_text(10)}"
