"""One front door: one parser for every command, the loader and the prelude once, ``ACP_AGENT_*`` read in one place."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent.testing import spawn_agent

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "acp_agent"
ECHO = ROOT / "examples" / "echo_agent.py"

# A read of an ACP_AGENT_* variable past the environment table: os.environ[...], .get(...), os.getenv(...).
ENVIRONMENT_READ = re.compile(r"""(?:environ\s*(?:\[|\.get\s*\()|getenv\s*\()\s*["']ACP_AGENT_""")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_only_the_environment_table_reads_acp_agent_variables() -> None:
    assert ENVIRONMENT_READ.search('os.environ.get("ACP_AGENT_TOKEN") or None')  # what dev/command.py used to do
    assert ENVIRONMENT_READ.search("os.getenv('ACP_AGENT_LOG_LEVEL')") and ENVIRONMENT_READ.search(
        'os.environ["ACP_AGENT_STORE"]')
    table = PACKAGE / "_util" / "environment.py"
    readers = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
               for path in sorted(PACKAGE.rglob("*.py")) if path != table
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if ENVIRONMENT_READ.search(line)]
    assert readers == [], "read ACP_AGENT_* through acp_agent._util.environment.read:\n" + "\n".join(readers)


def test_the_parser_loads_no_command() -> None:
    code = ("import sys\nfrom acp_agent.cli import parser\nparser.build_parser().parse_args(['dev', '--replay', 'x'])\n"
            "print(' '.join(sorted(sys.modules)))")
    done = run("-c", code)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert not loaded & {"uvicorn", "starlette", "acp_agent.dev", "acp_agent.demo", "acp_agent.testing",
                         "acp_agent.http", "acp_agent.cli.serve", "acp_agent.cli.stdio"}


def test_help_lists_every_command_and_each_command_has_its_help() -> None:
    done = run("-m", "acp_agent", "--help")
    assert done.returncode == 0 and "{serve,stdio,dev,demo}" in done.stdout
    for command in ("serve", "stdio", "dev", "demo"):
        done = run("-m", "acp_agent", command, "--help")
        assert done.returncode == 0 and f"usage: python -m acp_agent {command}" in done.stdout, done.stderr
    done = run("-m", "acp_agent.demo", "--help")  # the older spelling of demo forwards to the one parser
    assert done.returncode == 0 and "usage: python -m acp_agent demo" in done.stdout, done.stderr


def test_the_loader_names_stay_importable_from_the_cli() -> None:
    import acp_agent.cli as cli
    import acp_agent.loader as loader

    for name in ("AgentSource", "LoadError", "affinity_header", "load_agent", "load_tokens", "parse_store"):
        assert getattr(cli, name) is getattr(loader, name)


def test_main_is_three_lines() -> None:
    code = [line for line in (PACKAGE / "__main__.py").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith('"""')]
    assert len(code) == 3, code


@pytest.mark.parametrize("command", [["stdio", str(ECHO)], ["serve", str(ECHO), "--port", "0"],
                                     ["dev", "--replay", "x"]])
def test_every_command_refuses_a_bad_environment_value_before_serving(command: list[str]) -> None:
    done = run("-m", "acp_agent", *command, env={"ACP_AGENT_LOG_LEVEL": "loud"})
    assert done.returncode == 2
    assert done.stderr == ("acp: ACP_AGENT_LOG_LEVEL='loud' is not valid: it accepts DEBUG, INFO, WARNING, ERROR or "
                           "CRITICAL\n")


def test_stdio_names_a_missing_agent() -> None:
    done = run("-m", "acp_agent", "stdio", "missing_agent.py")
    assert (done.returncode, done.stderr) == (2, "acp: no such file: missing_agent.py\n")


@pytest.mark.anyio
@pytest.mark.parametrize("module", [["acp_agent", "stdio"], ["acp_agent.dev.child"]])
async def test_stdio_serves_the_agent_file(module: list[str]) -> None:
    async with spawn_agent([sys.executable, "-m", *module, str(ECHO)]) as client:
        await client.initialize()
        session_id = await client.new_session()
        await client.prompt_and_wait(session_id, "hello")
        assert any("hello" in text for text in client.view(session_id).messages().values())
