"""acp-agent without the modules only POSIX has: every module imports, and agents run over stdio end to end.

A ``sitecustomize.py`` in the child's ``PYTHONPATH`` makes ``fcntl``, ``termios``, ``resource``, ``pwd``, ``grp``,
... unimportable (``sys.modules[name] = None``), as on Windows. What this proves for Windows and what it does not
is the support table in ``docs/platforms.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_agent.testing.client import spawn_agent
from acp_agent.testing.schema import SchemaValidator

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "examples" / "echo_agent.py"
FAULT = ROOT / "tests" / "helpers" / "fault_agent.py"
BLOCKED = ("fcntl", "termios", "resource", "pwd", "grp", "tty", "pty", "syslog", "readline", "curses")

IMPORT_ALL = """
import importlib, pkgutil, sys
import acp_agent
assert all(sys.modules[name] is None for name in sys.argv[1:]), "the shim is not in effect"
failed = []
for module in pkgutil.walk_packages(acp_agent.__path__, "acp_agent."):
    try:
        importlib.import_module(module.name)
    except BaseException as exc:
        failed.append(f"{module.name}: {exc!r}")
print("\\n".join(failed))
from acp_agent import run_stdio  # the line that failed on Windows
"""


@pytest.fixture
def shim_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a Python without the POSIX-only modules (and with this checkout's acp_agent)."""
    (tmp_path / "sitecustomize.py").write_text(
        f"import sys\nfor name in {BLOCKED!r}:\n    sys.modules[name] = None\n")
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


def test_every_module_imports_without_posix_only_modules(shim_env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, "-c", IMPORT_ALL, *BLOCKED], capture_output=True, text=True,
                            env={**os.environ, **shim_env}, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"modules that did not import:\n{result.stdout}"


async def test_echo_agent_over_stdio_without_fcntl(shim_env: dict[str, str], validator: SchemaValidator,
                                                   tmp_path: Path) -> None:
    env = {**shim_env, "ACP_AGENT_DATA_DIR": str(tmp_path / "data")}
    async with spawn_agent([sys.executable, str(ECHO)], env=env) as client:
        init = await client.initialize()
        assert init["info"]["name"] == "echo-agent"
        sid = await client.new_session(str(ROOT))
        view = await client.prompt_and_wait(sid, "hello without fcntl")
        assert list(view.messages().values()) == ["hello without fcntl"]
        await client.request("session/list", {})
        await client.request("session/resume", {"sessionId": sid, "cwd": str(ROOT), "replayFrom": {"type": "start"}})
        await client.close_session(sid)
    problems = validator.check_transcript(client.transcript)
    assert not problems, "\n".join(problems)
    assert client.returncode == 0


async def test_a_terminal_runs_without_fcntl(shim_env: dict[str, str], validator: SchemaValidator,
                                             tmp_path: Path) -> None:
    """Terminals, their process groups and the watchdog's ledger work with file locks unavailable."""
    env = {**shim_env, "ACP_AGENT_DATA_DIR": str(tmp_path / "data")}
    async with spawn_agent([sys.executable, str(FAULT)], env=env) as client:
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        view = await client.prompt_and_wait(sid, "run echo from-a-terminal")
        assert view.stop_reason == "end_turn"
        outputs = [bytes(t.get("output", b"")) for t in view.terminals.values()]
        assert any(b"from-a-terminal" in output for output in outputs), outputs
    problems = validator.check_transcript(client.transcript)
    assert not problems, "\n".join(problems)
    assert client.returncode == 0
