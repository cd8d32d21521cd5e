"""The event loop an agent process runs on (acp_agent/eventloop.py): asyncio's own unless uvloop is asked
for (``uvloop=True`` or ``ACP_AGENT_UVLOOP=1``), the code's choice over the environment's, trio untouched,
and a silent fallback when the environment asks for a missing uvloop. uvloop is imported only when it runs
the loop."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest

import acp_agent.stdio
from acp_agent import Agent, EnvironmentVariableError, run_stdio
from acp_agent._util import eventloop
from acp_agent._util.eventloop import UVLOOP_ENV, backend_options, choose_backend
from acp_agent.testing.client import spawn_agent

uvloop = pytest.importorskip("uvloop")  # a dependency wherever the suite runs (CPython on POSIX)


def loop_name() -> str:
    """The running loop's class, or ``"trio"`` when no asyncio loop runs."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return "trio"
    return "uvloop" if isinstance(loop, uvloop.Loop) else "asyncio"


async def running_loop() -> str:
    return loop_name()


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UVLOOP_ENV, raising=False)
    monkeypatch.delenv(eventloop.BACKEND_ENV, raising=False)


# -- choosing ----------------------------------------------------------------------------------------


def test_asyncio_runs_on_uvloop_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert backend_options("asyncio") == {}
    assert backend_options("asyncio", True) == {"loop_factory": uvloop.new_event_loop}
    assert backend_options("asyncio", False) == {}
    for off in ("0", "off", "False", " no ", ""):
        monkeypatch.setenv(UVLOOP_ENV, off)
        assert backend_options("asyncio") == {}, off
        assert backend_options("asyncio", True) == {"loop_factory": uvloop.new_event_loop}  # the code's choice wins
    for on in ("1", "on", "true", " Yes "):
        monkeypatch.setenv(UVLOOP_ENV, on)
        assert backend_options("asyncio") == {"loop_factory": uvloop.new_event_loop}, on
        assert backend_options("asyncio", False) == {}


def test_an_unknown_setting_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UVLOOP_ENV, "sometimes")
    with pytest.raises(EnvironmentVariableError, match=r"^ACP_AGENT_UVLOOP='sometimes' is not valid: it accepts 1, on"):
        backend_options("asyncio")


def test_trio_is_left_alone() -> None:
    assert backend_options("trio") == {}
    assert backend_options("trio", False) == {}
    with pytest.raises(ValueError, match="asyncio"):
        backend_options("trio", True)


def test_without_uvloop_asyncio_runs_its_own_loop_quietly(monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    monkeypatch.setenv(UVLOOP_ENV, "1")  # asked for by the environment: a quiet fallback
    with caplog.at_level(logging.DEBUG, logger="acp_agent._util.eventloop"):
        assert backend_options("asyncio") == {}
        assert eventloop.run(running_loop) == "asyncio"
    assert {r.levelno for r in caplog.records} == {logging.DEBUG}
    assert "uvloop is not available" in caplog.records[0].getMessage()
    with pytest.raises(ImportError):  # asked for by the code: an error, not a silent fallback
        backend_options("asyncio", True)


def test_the_backend_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_backend(None) == "asyncio"
    monkeypatch.setenv(eventloop.BACKEND_ENV, "trio")
    assert choose_backend(None) == "trio"
    assert choose_backend("asyncio") == "asyncio"


# -- run_stdio and run_http start their loop through it ------------------------------------------------


@pytest.mark.parametrize(("backend", "setting", "env", "expected"), [
    (None, None, None, "asyncio"),
    ("asyncio", None, "1", "uvloop"),
    (None, True, None, "uvloop"),
    (None, False, "1", "asyncio"),
    ("trio", None, "1", "trio"),
])
def test_run_stdio_runs_the_chosen_loop(monkeypatch: pytest.MonkeyPatch, backend: str | None,
                                        setting: bool | None, env: str | None, expected: str) -> None:
    seen: list[str] = []

    async def serve_stdio(agent: Agent, **options: Any) -> None:
        seen.append(loop_name())

    if env is not None:
        monkeypatch.setenv(UVLOOP_ENV, env)
    monkeypatch.setattr(acp_agent.stdio, "serve_stdio", serve_stdio)
    run_stdio(Agent(), backend=backend, uvloop=setting)
    assert seen == [expected]


@pytest.mark.parametrize(("setting", "expected"), [(None, "asyncio"), (True, "uvloop"), (False, "asyncio")])
def test_run_http_runs_the_chosen_loop(monkeypatch: pytest.MonkeyPatch, setting: bool | None,
                                       expected: str) -> None:
    import acp_agent.http
    import acp_agent.http.server

    seen: list[str] = []

    async def serve_http(agent: Agent, **options: Any) -> None:
        seen.append(loop_name())

    monkeypatch.setattr(acp_agent.http.server, "serve_http", serve_http)
    acp_agent.http.run_http(Agent(), uvloop=setting)
    assert seen == [expected]


# -- an agent process --------------------------------------------------------------------------------

REPORTER = """
import asyncio, sys
if "--no-uvloop-installed" in sys.argv:
    sys.modules["uvloop"] = None  # as if it were not installed
from acp_agent import Agent, EnvironmentVariableError, run_stdio

class LoopReporter(Agent):
    name = "loop-reporter"

    async def prompt(self, session, prompt):
        try:
            loop = type(asyncio.get_running_loop()).__module__
        except RuntimeError:
            loop = "trio"
        await session.say(f"{loop} {'uvloop' in sys.modules and sys.modules['uvloop'] is not None}")
        return "end_turn"

run_stdio(LoopReporter(), uvloop=True if "--uvloop" in sys.argv else False if "--no-uvloop" in sys.argv else None)
"""

@pytest.mark.anyio
@pytest.mark.parametrize(("args", "env", "expected"), [
    ([], {}, "asyncio.unix_events False"),
    ([], {UVLOOP_ENV: "1"}, "uvloop True"),
    (["--uvloop"], {}, "uvloop True"),
    (["--no-uvloop"], {UVLOOP_ENV: "1"}, "asyncio.unix_events False"),
    (["--no-uvloop-installed"], {UVLOOP_ENV: "1"}, "asyncio.unix_events False"),
    ([], {"ACP_AGENT_BACKEND": "trio", UVLOOP_ENV: "1"}, "trio False"),
])
async def test_an_agent_process_reports_its_loop(args: list[str], env: dict[str, str], expected: str) -> None:
    async with spawn_agent([sys.executable, "-c", REPORTER, *args], env=env) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "which loop?")
        assert list(view.messages().values()) == [expected]
    assert client.returncode == 0
