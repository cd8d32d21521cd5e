"""What a recorded wire looks like: [`TranscriptEntry`][acp_agent.testing.TranscriptEntry] and the two directions.

The client records these and the checker and the schema validator read them; this module sits below all three so
that none of them has to import another for the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Direction", "TranscriptEntry"]

Direction = Literal["client->agent", "agent->client"]
"""Which way a message travelled: from the client to the agent, or back."""


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One message seen on the wire, with its direction and arrival time."""

    direction: Direction
    message: Any
    at: float
