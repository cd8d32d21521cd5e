"""``python -m acp_agent dev``: an inspector in the browser for any ACP agent.

It runs the agent (a Python file or module, any stdio command after ``--``, or a remote agent with
``--connect URL``), drives it as a checked client ([`link`][acp_agent.dev.link]) and serves a page
([`web`][acp_agent.dev.web], files in ``static/``) with the chat, the background work, the questions,
the client capabilities and the wire log, every schema error and wire-rule violation on the message
that caused it. ``--record`` keeps the transcript; ``--replay`` shows one without an agent.

Needs the ``inspector`` extra. A stdio agent never imports this package.
"""

from __future__ import annotations

from .command import run

__all__ = ["run"]
