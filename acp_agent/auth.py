"""Authentication: what an agent offers (``authMethods``), and the login a client asks for.

An agent lists its [`Agent.auth_methods`][acp_agent.Agent.auth_methods] (``AuthMethodAgent``: the agent runs the login
itself when the client calls ``auth/login``; ``AuthMethodTerminal``: the client re-runs the
agent's command interactively, offered only to clients that advertised ``auth.terminal``;
``_``-prefixed custom types are kept as given). With any method declared, the SDK serves
``auth/login`` (an unknown ``methodId`` is ``-32602``) and ``auth/logout``, and calls
[`Agent.login`][acp_agent.Agent.login] / [`Agent.logout`][acp_agent.Agent.logout] with a [`Login`][acp_agent.Login].
With [`Agent.require_login`][acp_agent.Agent.require_login], every session method answers ``-32000`` (authentication
required) without calling any hook until a login succeeded on that connection, and again after logout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .peer import ClientPeer
from .records import DEFAULT_PRINCIPAL

if TYPE_CHECKING:
    from .questions import ElicitationResult

__all__ = ["Login"]


class Login:
    """One ``auth/login`` (or ``auth/logout``) being handled, on one connection."""

    def __init__(self, client: ClientPeer, method_id: str | None, meta: dict[str, Any] | None,
                 principal: str = DEFAULT_PRINCIPAL) -> None:
        self.client = client
        """The client asking (its info and capabilities from this connection's ``initialize``)."""
        self.method_id = method_id
        """The auth method the client chose (``None`` for a logout)."""
        self.meta = meta
        """The request's ``_meta``."""
        self.principal = principal
        """Who the connection authenticated as with the transport (``"default"`` over stdio and with a
        single token); a login hook may refuse a principal by raising."""

    async def ask(self, message: str, schema: Mapping[str, Any]) -> ElicitationResult:
        """A form scoped to this request (no session needed; changes no session state).

        Never for a secret: use [`ask_url`][acp_agent.Login.ask_url]. Raises
        [`ElicitationUnsupportedError`][acp_agent.ElicitationUnsupportedError] if the client has no forms.
        """
        from .questions import ask_for_request  # loaded on first use (most logins ask nothing)

        return await ask_for_request(self.client, message, schema=schema)

    async def ask_url(self, message: str, url: str, *, elicitation_id: str | None = None) -> ElicitationResult:
        """Send the user to ``url`` (an OAuth page, say), scoped to this request."""
        from .questions import ask_for_request

        return await ask_for_request(self.client, message, url=url, elicitation_id=elicitation_id)
