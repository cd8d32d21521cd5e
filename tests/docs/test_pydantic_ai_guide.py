"""The examples of the guide "Bring your pydantic-ai agent" (docs/guides/pydantic-ai.md), run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acp_agent.testing import spawn_agent
from docs_src.pydantic_ai_test import test_deploy_asks_first

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["test_deploy_asks_first"]  # the guide's own test, run here


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


async def test_zed_settings_start_the_pydantic_ai_agent(tmp_path: Path) -> None:
    settings = json.loads((ROOT / "docs_src" / "zed_pydantic_ai.json").read_text())
    entry = settings["agent_servers"]["My pydantic-ai agent"]
    assert entry["type"] == "custom"
    assert Path(entry["args"][0]).name == "pydantic_ai_agent.py"
    script = ROOT / "docs_src" / "pydantic_ai_agent.py"  # the same file, in this checkout
    env = {**entry["env"], "MY_AGENT_MODEL": "test"}  # pydantic-ai's TestModel: no network, no key used
    async with spawn_agent([sys.executable, str(script)], env=env) as client:
        answer = await client.initialize()
        assert answer["info"]["name"] == "my-agent"
        sid = await client.new_session(str(tmp_path))
        assert (client.view(sid).config_options or [])[0]["currentValue"] == "default"
        view = await client.prompt_and_wait(sid, "hello")
        assert view.stop_reason == "end_turn"
        (tool,) = view.tool_calls.values()  # TestModel calls every tool once: deploy asked, the client allowed it
        assert (tool["name"], tool["status"]) == ("deploy", "completed")
