"""Which session each method a client sends names: the session column of the method table, loading no model.

``AGENT_METHODS[name].session`` reads it (`acp_agent.schema.methods`), and so do the runtime (which methods check
whose session it is first) and the HTTP transport (which ``POST`` must carry ``Acp-Session-Id``), without loading
the wire models the method table names. A method not here names no session.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

__all__ = ["SESSION_METHODS", "SESSION_REACH", "STORED_SESSION_METHODS", "SessionReach"]

SessionReach = Literal["open", "stored"]
"""Which session a method's required ``sessionId`` may name: ``"open"``, only one open on the connection that sends
it; ``"stored"``, also one active on another connection or only stored (so whose it is must be checked first)."""

SESSION_REACH: Final[Mapping[str, SessionReach]] = MappingProxyType({
    "session/resume": "stored",
    "session/close": "open",
    "session/fork": "open",
    "session/delete": "stored",
    "session/archive": "stored",
    "session/unarchive": "stored",
    "session/status": "stored",
    "session/set_title": "stored",
    "session/set_config_option": "open",
    "session/prompt": "open",
    "session/cancel": "open",
    "tool_call/cancel": "open",
    "terminal/cancel": "open",
})
"""Each method a client sends that names a session, and which session it may name."""

SESSION_METHODS: Final = frozenset(SESSION_REACH)
"""The methods a client sends that name a session: the HTTP transport requires ``Acp-Session-Id`` on them."""

STORED_SESSION_METHODS: Final = frozenset(name for name, reach in SESSION_REACH.items() if reach == "stored")
"""The methods a client sends that may reach a session beyond its connection (active on another one, or only
stored): the runtime first treats a session of another principal exactly as an unknown id."""
