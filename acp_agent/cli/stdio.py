"""``python -m acp_agent stdio FILE_OR_MODULE[:ATTR]``: one agent on stdin/stdout, as `run_stdio` serves it.

What an editor launches for an agent file that has no ``run_stdio`` line of its own, and how the inspector
(``dev``) runs a Python agent: as a process of its own, so a crash, an exit or a stray ``print`` shows as it
would in an editor, and Restart starts it afresh.
"""

from __future__ import annotations

import argparse
import sys

from ..agent import Agent
from ..loader import LoadError, load_agent
from ..stdio import run_stdio

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Load the agent ``args.agent`` names and serve it on stdin/stdout; returns the exit status.

    `run_stdio` runs the process prelude after the agent's module is imported, as it does for ``python
    agent.py``: logging the module configures itself stays as it configured it.
    """
    try:
        source, _ = load_agent(args.agent)
    except LoadError as exc:
        sys.stderr.write(f"acp: {exc}\n")
        return 2
    run_stdio(source if isinstance(source, Agent) else source())
    return 0
