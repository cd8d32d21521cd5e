"""Serve ACP v1 clients (today's editors) from the same v2 agent code.

The bridge sits between the wire and the connection: :func:`negotiating_streams` wraps the
byte streams a :class:`~acp_agent.connection.Connection` reads and writes. Until the client's
``initialize`` it only watches; ``initialize`` with ``protocolVersion: 1`` switches the whole
connection to v1, any other version leaves it a plain pass-through (v2, unchanged bytes).

In v1 mode every line is translated by :class:`V1Translator`: v1 requests become v2 calls of
the unchanged runtime, and what the runtime sends becomes v1 shapes (or is dropped). Every
ordering rule stays enforced by the v2 runtime; the bridge only re-encodes. What maps to what
is listed in ``docs/v1-bridge.md``.

The modules: ``streams`` (the wrapped byte streams), ``negotiation`` (what a client's line says
about the version it wants), ``translator`` (:class:`V1Translator`), ``messages`` (the JSON-RPC
envelopes).
"""

from __future__ import annotations

from .negotiation import V1_PROTOCOL_VERSION
from .streams import negotiating_streams
from .translator import V1Translator

__all__ = ["V1_PROTOCOL_VERSION", "V1Translator", "negotiating_streams"]
