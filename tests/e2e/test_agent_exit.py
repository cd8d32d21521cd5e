"""A subprocess agent that dies is explained: exit status and the tail of its stderr, not "connection closed"."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from acp_agent.errors import ErrorCode, RequestError
from acp_agent.testing import AgentExitedError, spawn_agent
from acp_agent.testing.client import STDERR_TAIL_BYTES

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.anyio
ECHO = Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"

# Answers initialize, then dies on the first other request (or on a ``_die`` notification).
DIES_LATER = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            answer = {"protocolVersion": 2, "agentCapabilities": {}, "info": {"name": "dies-later", "version": "0"}}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\\n")
            sys.stdout.flush()
        elif "id" in message or method == "_die":
            sys.stderr.write(f"dying on {method}\\n")
            sys.exit(3)
    """
)


async def test_missing_agent_file_says_the_process_exited(tmp_path: Path) -> None:
    missing = tmp_path / "missing.py"
    with pytest.raises(AgentExitedError) as info:
        async with spawn_agent([sys.executable, str(missing)]) as client:
            await client.initialize()
    error = info.value
    assert error.returncode == 2 and error.method == "initialize"
    assert "No such file" in error.stderr_tail and str(missing) in error.stderr_tail
    assert str(error).startswith("agent process exited with status 2 before answering initialize; stderr tail:")
    assert "No such file" in str(error)
    assert client.returncode == 2


async def test_agent_that_prints_and_exits_3(capfd: pytest.CaptureFixture[str]) -> None:
    script = "import sys; sys.stderr.write('giving up: no model configured\\n'); sys.exit(3)"
    with pytest.raises(AgentExitedError, match=r"exited with status 3 before answering initialize") as info:
        async with spawn_agent([sys.executable, "-c", script]) as client:
            await client.initialize()
    assert info.value.returncode == 3
    assert info.value.stderr_tail == "giving up: no model configured\n"
    assert "giving up: no model configured" in str(info.value)
    # The agent's stderr still reaches the test's stderr, as it always did.
    assert "giving up: no model configured" in capfd.readouterr().err


async def test_agent_dying_while_a_request_is_pending() -> None:
    with pytest.raises(AgentExitedError, match="exited with status 3 before answering session/new") as info:
        async with spawn_agent([sys.executable, "-c", DIES_LATER], check=False) as client:
            await client.initialize()
            await client.new_session("/tmp")
    assert info.value.stderr_tail == "dying on session/new\n"
    # Still a cancelled request for code that handles those: the answer never came.
    assert isinstance(info.value, RequestError) and info.value.code == ErrorCode.REQUEST_CANCELLED


async def test_wait_for_explains_a_dead_agent_instead_of_timing_out() -> None:
    with pytest.raises(AgentExitedError, match="exited with status 3 while the client waited") as info:
        async with spawn_agent([sys.executable, "-c", DIES_LATER], check=False) as client:
            await client.initialize()
            client.notify("_die", {})
            await client.wait_for(lambda: False, timeout=60)
    assert info.value.method is None and info.value.stderr_tail == "dying on _die\n"


async def test_stderr_tail_is_bounded(capfd: pytest.CaptureFixture[str]) -> None:
    script = "import sys\nfor i in range(5000): sys.stderr.write(f'noise line {i:05d}\\n')\nsys.exit(1)"
    with pytest.raises(AgentExitedError) as info:
        async with spawn_agent([sys.executable, "-c", script]) as client:
            await client.initialize()
    tail = info.value.stderr_tail
    assert tail.startswith("...\nnoise line ") and tail.endswith("noise line 04999\n")
    assert len(tail.encode()) <= STDERR_TAIL_BYTES + len("...\n")
    assert all(len(line) == len("noise line 04999") for line in tail.splitlines()[1:])  # whole lines only
    assert len(str(info.value)) < 4500
    forwarded = capfd.readouterr().err  # all of it still went to the test's stderr
    assert "noise line 00000" in forwarded and "noise line 04999" in forwarded


async def test_stderr_tail_of_one_long_line_never_splits_a_character() -> None:
    # 2 * 10000 + 1 bytes, no newline: the kept last 4096 bytes start inside an "é".
    script = "import sys; sys.stderr.write('\u00e9' * 10000 + '!'); sys.exit(1)"
    with pytest.raises(AgentExitedError) as info:
        async with spawn_agent([sys.executable, "-c", script], env={"PYTHONIOENCODING": "utf-8"}) as client:
            await client.initialize()
    tail = info.value.stderr_tail
    assert tail.startswith("...\u00e9") and tail.endswith("\u00e9!") and set(tail[3:-1]) == {"\u00e9"}
    assert len(tail.encode()) <= STDERR_TAIL_BYTES + len("...")


async def test_signal_death_is_named() -> None:
    script = "import os, signal, sys; sys.stderr.write('about to be killed\\n'); sys.stderr.flush(); " \
             "os.kill(os.getpid(), signal.SIGKILL)"
    with pytest.raises(AgentExitedError, match=r"killed by SIGKILL before answering initialize") as info:
        async with spawn_agent([sys.executable, "-c", script]) as client:
            await client.initialize()
    assert info.value.returncode == -9


async def test_healthy_agent_stderr_still_reaches_the_test(capfd: pytest.CaptureFixture[str]) -> None:
    script = (f"import runpy, sys; sys.stderr.write('echo agent starting\\n'); sys.stderr.flush(); "
              f"runpy.run_path({str(ECHO)!r}, run_name='__main__')")
    async with spawn_agent([sys.executable, "-c", script]) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "still fine")
        assert list(view.messages().values()) == ["still fine"]
    assert client.returncode == 0
    assert "echo agent starting" in capfd.readouterr().err


async def test_acp_connect_fixture_explains_a_missing_agent(acp_connect: Any, tmp_path: Path) -> None:
    with pytest.raises(AgentExitedError, match=r"(?s)status 2 before answering initialize.*No such file"):
        async with acp_connect([sys.executable, str(tmp_path / "missing.py")]) as client:
            await client.initialize()


def test_acp_client_fixture_explains_a_missing_agent(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
        """
    )
    pytester.makepyfile(
        f"""
        import sys
        import pytest

        @pytest.mark.anyio
        @pytest.mark.acp_agent(agent=[sys.executable, {str(pytester.path / "missing.py")!r}])
        async def test_uses_missing_agent(acp_client):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "E *.AgentExitedError: agent process exited with status 2 before answering initialize; stderr tail:",
        "E *missing.py*No such file or directory",
    ])
    result.stdout.no_fnmatch_line("*Request cancelled: connection closed*")
