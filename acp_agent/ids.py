"""Opaque ids the agent makes up: messages, tool calls, terminals, sessions."""

from __future__ import annotations

import itertools
from typing import Final

__all__ = ["new_id"]

_ids: Final = itertools.count(1)


def new_id(prefix: str) -> str:
    """A process-unique opaque id such as ``msg_12``."""
    return f"{prefix}_{next(_ids)}"
