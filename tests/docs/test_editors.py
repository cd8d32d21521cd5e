"""The launch settings on the Editors page (docs/editors.md) start the agent they name.

The JSON ones (JetBrains' acp.json; Zed's is run by test_guides.py) are started as written, with the script taken
from this checkout; the Emacs and Neovim ones cannot run here, so they are checked to launch the same command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acp_agent.testing import spawn_agent

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "docs_src"
ZED = json.loads((SOURCES / "zed_settings.json").read_text())["agent_servers"]["Echo Agent"]


@pytest.mark.anyio
async def test_jetbrains_acp_json_starts_the_agent() -> None:
    entry = json.loads((SOURCES / "jetbrains_acp.json").read_text())["agent_servers"]["Echo Agent"]
    assert (entry["command"], entry["args"]) == (ZED["command"], ZED["args"])
    script = SOURCES / Path(entry["args"][0]).name  # the same file, in this checkout
    async with spawn_agent([sys.executable, str(script)], env=entry["env"]) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        assert list((await client.prompt_and_wait(sid, "hi")).messages().values()) == ["hi"]


def test_agent_shell_and_codecompanion_launch_the_same_command() -> None:
    elisp = (SOURCES / "agent_shell.el").read_text()
    assert f':command "{ZED["command"]}"' in elisp
    assert f""":command-params '("{ZED["args"][0]}")""" in elisp
    assert elisp.count("(") == elisp.count(")")
    lua = (SOURCES / "codecompanion.lua").read_text()
    assert f'default = {{ "{ZED["command"]}", "{ZED["args"][0]}" }}' in lua
    assert lua.count("{") == lua.count("}")
