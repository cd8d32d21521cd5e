"""Runs :class:`tests.helpers.agents.ScriptedAgent` on stdio (for end-to-end tests)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent import run_stdio
from tests.helpers.agents import ScriptedAgent

if __name__ == "__main__":
    run_stdio(ScriptedAgent())
