"""The root of the SDK's exception tree, at the bottom layer so that every layer can raise under it.

`acp_agent.errors` re-exports it as `AcpAgentError`, with the rest of the tree."""

from __future__ import annotations

__all__ = ["AcpAgentError"]


class AcpAgentError(Exception):
    """The root of every exception acp-agent raises on purpose."""
