"""Serve ACP v1 clients (today's editors) from the same v2 agent code.

The bridge sits between the wire and the connection: `negotiating_streams` wraps the
byte streams a `Connection` reads and writes. Until the client's
``initialize`` it only watches; ``initialize`` with ``protocolVersion: 1`` switches the whole
connection to v1, any other version leaves it a plain pass-through (v2, unchanged bytes).

In v1 mode every line is translated by `V1Translator`: v1 requests become v2 calls of
the unchanged runtime, and what the runtime sends becomes v1 shapes (or is dropped). Every
ordering rule stays enforced by the v2 runtime; the bridge only re-encodes. What maps to what
is listed in ``docs/v1-bridge.md``.

The modules, from the wire inwards:

- ``streams``: the wrapped byte streams (watch, pass through, or translate line by line);
- ``negotiation``: what a client's line says about the version it wants;
- ``translator``: `V1Translator`, routing each message to the module below that owns it;
- ``requests``: v1 client requests as v2 calls (handlers return forward / answer / refuse);
- ``answers``: the runtime's answers to those requests in v1 shape (held prompt answers);
- ``updates``: v2 session updates as v1 ones (messages, turn end, plans, config and modes);
- ``tools``, ``subagents``, ``permissions``, ``async_tasks``: tool calls and terminals (output
  paced), child sessions, permission requests, JetBrains AIR async tasks;
- ``commands``: the bridge's own ``/jobs`` and ``/stop``, and a ``session/cancel`` while no prompt
  runs (stopping background work, which v1 has no other way to ask for);
- ``handshake``, ``convert``, ``messages``: pure shape conversions (``initialize``, content,
  commands, config options) and the JSON-RPC envelopes;
- ``state``: what the translator remembers per connection and per session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_attributes, lazy_dir, publish
from .negotiation import V1_PROTOCOL_VERSION
from .streams import negotiating_streams

# Loaded on first use (a v2 client never loads the translation): this block is the lazy map (acp_agent._util.lazy).
if TYPE_CHECKING:
    from .translator import V1Translator

__all__ = ["V1_PROTOCOL_VERSION", "V1Translator", "negotiating_streams"]

__getattr__ = lazy_attributes(__name__)
__dir__ = lazy_dir(__name__)
publish(__name__, __all__)
