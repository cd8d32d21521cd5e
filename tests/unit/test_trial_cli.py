"""The command line as the docs-only trials met it (notes/trial-host.md 1, 2 and 7): each test failed before its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent import cli
from tests.helpers.inspector import running_inspector
from tests.helpers.remote import ROOT, served_agent, wait_until


def help_of(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "acp_agent", *args, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_help_lists_dev_beside_serve() -> None:
    text = help_of()
    assert "{serve,stdio,dev,demo}" in text
    assert "inspector" in text.split("{serve,stdio,dev,demo}", 1)[1]


def test_dev_help_says_the_transport_default_plainly() -> None:
    text = " ".join(help_of("dev").split())
    assert "default: websocket for a ws:// or wss:// URL, else Streamable HTTP" in text


def test_cli_main_runs_dev_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev"]) == 2  # one parser: dev is a command like the others, no longer refused here
    assert "name exactly one agent" in capsys.readouterr().err


def test_dev_with_a_missing_command_says_so_on_stderr() -> None:
    with running_inspector("--", "/nonexistent/agent") as inspector:
        wait_until(lambda: "cannot run /nonexistent/agent" in inspector.log(), 20, "the failure on stderr")
        assert "FileNotFoundError" in inspector.log()


def test_serve_tokens_warns_of_short_tokens_and_an_ignored_token_variable(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alice:short\nbob:8f2e7a4c1b9d4f03a6e5c2d8b1f0a374\n")
    tokens.chmod(0o600)
    with served_agent(ROOT / "examples" / "echo_agent.py", "--tokens", str(tokens), "--store", "memory",
                      env={"ACP_AGENT_TOKEN": "from-the-environment"}) as served:
        log = served.log()
    assert "the token of 'alice' is short (5 characters)" in log and "secrets.token_hex" in log
    assert "'bob'" not in log
    assert "$ACP_AGENT_TOKEN is ignored: --tokens names every user's token" in log
