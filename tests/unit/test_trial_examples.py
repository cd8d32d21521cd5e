"""examples/background_agent.py as the docs-only trials met it (notes/trial-site.md 10, trial-host.md 10): each test
failed before its fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_agent import Limits
from acp_agent.store import SqliteStore
from acp_agent.testing import connect_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from background_agent import BackgroundAgent

pytestmark = pytest.mark.anyio


async def test_bg_past_the_process_limit_fails_its_tool_call_and_says_why() -> None:
    async with connect_agent(BackgroundAgent(), limits=Limits(max_processes=1)) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/bg sleep 30")
        view = await client.prompt_and_wait(sid, "/bg sleep 31")
        assert view.stop_reason == "end_turn"  # not "error" with -32603
        assert any("max_processes=1" in text for text in view.messages().values())
        failed = [t for t in view.tool_calls.values() if t.get("status") == "failed"]
        assert [t["rawOutput"] for t in failed] == [{"limit": "max_processes", "value": 1}]
        (terminal,) = view.cancellable_terminals()
        await client.cancel_terminal(sid, terminal)
        await client.wait_for(lambda: view.quiet)


async def test_workflow_handles_stay_out_of_session_data(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with connect_agent(BackgroundAgent(), store=SqliteStore(tmp_path / "s.sqlite3")) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/workflow 30")
        view = await client.prompt_and_wait(sid, "/pause")
        assert not any("No running workflow" in text for text in view.messages().values())
        await client.close_session(sid)
    assert "not JSON-serializable" not in caplog.text
