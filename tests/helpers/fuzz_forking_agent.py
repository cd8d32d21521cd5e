"""Runs :class:`tests.helpers.agents.ForkingAgent` on stdio, so the fuzz suite also reaches ``session/fork``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent import run_stdio
from tests.helpers.agents import ForkingAgent

if __name__ == "__main__":
    run_stdio(ForkingAgent())
