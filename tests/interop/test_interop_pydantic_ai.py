"""Interop: the official TypeScript SDK client drives examples/coding_agent.py (a pydantic-ai agent served by
``acp_agent.integrations.pydantic_ai``, on its offline model) over stdio: streaming, approval (allowed and
rejected) with a diff, a subagent, the model option and slash commands, history. Every agent message is
validated against the official schema and both directions are judged by the WireChecker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.interop import INTEROP_DIR, ROOT, run_official_client

pytestmark = pytest.mark.interop

CLIENT_SCRIPT = INTEROP_DIR / "coding_client.mjs"
CODING_AGENT = ROOT / "examples" / "coding_agent.py"


def test_official_typescript_client_drives_the_pydantic_ai_coding_agent(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    env = {"ACP_INTEROP_CWD": str(project), "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}
    summary = run_official_client(tmp_path, CLIENT_SCRIPT, CODING_AGENT, wire=True, env=env).summary
    assert summary["agent"]["name"] == "coding-agent"
    assert summary["models"] == ["offline"]
    assert summary["hello"] == ["(offline model) You said: hello. Prompts so far: 1."]
    assert summary["edit"]["said"] == ["edit_file: edited a.txt"]
    assert summary["edit"]["states"] == ["running", "requires_action", "running", "idle"]
    assert summary["edit"]["locations"] == [{"path": str(project / "a.txt")}]
    assert (project / "a.txt").read_text() == "two\n"
    assert summary["rejected"]["status"] == "failed"
    assert summary["rejected"]["said"][0].startswith("run_command: The user rejected this tool call")
    assert not (project / "ran").exists()
    assert summary["research"]["children"] == 1
    assert summary["research"]["said"] == ["research: search: a.txt:1: two"]
    assert summary["model"] == ["Model: offline."]
    assert summary["last"] == ["(offline model) You said: how many. Prompts so far: 5."]
    assert summary["agentExitCode"] == 0
