"""Access: who a client is (the login it asks for) and what its sessions may reach (the workspace).

An agent lists its [`Agent.auth_methods`][acp_agent.Agent.auth_methods] (``AuthMethodAgent``: the agent runs the login
itself when the client calls ``auth/login``; ``AuthMethodTerminal``: the client re-runs the
agent's command interactively, offered only to clients that advertised ``auth.terminal``;
``_``-prefixed custom types are kept as given). With any method declared, the SDK serves
``auth/login`` (an unknown ``methodId`` is ``-32602``) and ``auth/logout``, and calls
[`Agent.login`][acp_agent.Agent.login] / [`Agent.logout`][acp_agent.Agent.logout] with a [`Login`][acp_agent.Login].
With [`Agent.require_login`][acp_agent.Agent.require_login], every session method answers ``-32000`` (authentication
required) without calling any hook until a login succeeded on that connection, and again after logout.

A [`Workspace`][acp_agent.Workspace] says which directories a principal's sessions may use as ``cwd`` or
``additionalDirectories``: one root for everyone, one root per principal, or a callable deciding
``(principal, path)``. The runtime checks it on ``session/new``, ``session/resume`` (an already active session too)
and ``session/fork``, before anything changes; a refused path is answered ``-32602`` with ``data`` naming the
field. Paths are compared after resolving symlinks, so a link inside the root that points out of it is refused
too. An agent declares its own (``Agent.workspace``); a served agent without one gets the directory ``serve`` was
started in (``--workspace DIR``); a stdio agent without one accepts any absolute path, as before (its client is
its user).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import RequestError
from .peer import ClientPeer
from .records import DEFAULT_PRINCIPAL

if TYPE_CHECKING:
    from .questions import ElicitationResult

__all__ = ["Login", "Workspace", "WorkspaceCheck", "inside"]


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


WorkspaceCheck = Callable[[str, str], bool]
"""``(principal, path) -> allowed``: a path (absolute, symlinks resolved) a principal's session may use."""


def inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or under it, both compared with symlinks resolved."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([base, real]) == base


@dataclass(frozen=True, slots=True)
class Workspace:
    """A workspace policy: the directories each principal's sessions may use.

    ``root``: one directory every principal's sessions live under. ``roots``: a directory per principal (a
    principal not listed is refused unless ``root`` or ``allow`` lets it in). ``allow``: a callable
    ``(principal, path) -> bool`` for any other rule (it sees the path with symlinks resolved). A path is
    allowed when any of them allows it. ``allow_filesystem_root``: accept ``/`` itself as a ``cwd`` (off:
    a session rooted at ``/`` reaches every file the server can read).
    """

    root: str | None = None
    roots: Mapping[str, str] = field(default_factory=dict)
    allow: WorkspaceCheck | None = None
    allow_filesystem_root: bool = False

    def __post_init__(self) -> None:
        for directory in [self.root, *self.roots.values()]:
            if directory is not None and not os.path.isabs(directory):
                raise ValueError(f"a workspace root must be an absolute path, got {directory!r}")

    def root_of(self, principal: str) -> str | None:
        """The directory ``principal``'s sessions live under (``None`` when only ``allow`` decides)."""
        return self.roots.get(principal, self.root)

    def allows(self, principal: str, path: str) -> bool:
        """Whether a session of ``principal`` may use ``path`` (an absolute path)."""
        real = os.path.realpath(path)
        if real == os.sep and not self.allow_filesystem_root:
            return False
        for root in (self.roots.get(principal), self.root):
            if root is not None and inside(real, root):
                return True
        return self.allow is not None and bool(self.allow(principal, real))

    def check(self, principal: str, cwd: str | None, additional: Iterable[str] | None = None) -> None:
        """Raise ``-32602`` (``data``: the field, the path refused) unless every path is allowed."""
        if cwd is not None and not self.allows(principal, cwd):
            raise RequestError.invalid_params(self._refusal("cwd"), {"field": "cwd", "path": cwd})
        for index, path in enumerate(additional or ()):
            if not self.allows(principal, path):
                raise RequestError.invalid_params(self._refusal("additionalDirectories"),
                                                  {"field": f"additionalDirectories[{index}]", "path": path})

    def _refusal(self, name: str) -> str:
        return f"{name} is outside the workspace this agent serves sessions in"
