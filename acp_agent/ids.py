"""Opaque ids the agent makes up: messages, tool calls, terminals, sessions.

Ids must not repeat across restarts: a session's history outlives the process (it is kept in
a store), and a resumed session keeps adding messages and tool calls next to the old ones.
So every id carries randomness: a session id is random as a whole (it names a stored
record, possibly on several machines), and other ids join a per-process random token to a
counter (short, and unique next to those of any other process).
"""

from __future__ import annotations

import base64
import itertools
import secrets
from typing import Final

__all__ = ["new_id", "new_session_id"]

_ids: Final = itertools.count(1)


def _random_text(n_bytes: int) -> str:
    return base64.b32encode(secrets.token_bytes(n_bytes)).decode().rstrip("=").lower()


_PROCESS_TOKEN: Final = _random_text(5)  # 8 characters, 40 bits


def new_id(prefix: str) -> str:
    """An opaque id unique across processes, such as ``msg_q3vx7k2a_12``."""
    if prefix == "sess":
        return new_session_id()
    return f"{prefix}_{_PROCESS_TOKEN}_{next(_ids)}"


def new_session_id() -> str:
    """A random session id such as ``sess_mfrggzdfmztwq2lk`` (80 random bits)."""
    return f"sess_{_random_text(10)}"
