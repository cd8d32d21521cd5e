"""``python -m acp_agent.dev.child FILE_OR_MODULE[:ATTR]``: run that agent on stdio for the inspector.

The inspector runs every agent as a process of its own, so a crash, an exit or a stray ``print``
shows as it would in an editor, and Restart starts it afresh.
"""

from __future__ import annotations

import sys

from ..agent import Agent
from ..cli import LoadError, load_agent
from ..stdio import run_stdio


def main(argv: list[str]) -> int:
    """Load the agent named by ``argv[0]`` and serve it on stdin/stdout."""
    try:
        source, _ = load_agent(argv[0])
    except LoadError as exc:
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    run_stdio(source if isinstance(source, Agent) else source())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
