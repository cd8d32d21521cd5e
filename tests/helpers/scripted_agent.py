"""Runs :class:`tests.agents.ScriptedAgent` on stdio (for end-to-end tests)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from acp_agent import run_stdio
from tests.agents import ScriptedAgent

if __name__ == "__main__":
    run_stdio(ScriptedAgent())
