"""The first turn's wire models are built after ``initialize`` is answered, before the first prompt
(acp_agent/warmup.py), so a fresh agent's first prompt does not pay for building them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

import acp_agent._runtime.warmup as warmup
from acp_agent.testing import spawn_agent

pytestmark = pytest.mark.anyio

REPORTER = """
from acp_agent import Agent, run_stdio
from acp_agent._runtime.warmup import _first_turn_models

class Reporter(Agent):
    name = "warm-up-reporter"

    async def new_session(self, session):
        session.data["built"] = sorted(m.__name__ for m in _first_turn_models() if m.__pydantic_complete__)

    async def prompt(self, session, prompt):
        await session.say(",".join(session.data["built"]))
        return "end_turn"

run_stdio(Reporter())
"""


async def test_a_fresh_agent_builds_the_first_turns_models_while_the_client_is_quiet(tmp_path: Path) -> None:
    async with spawn_agent([sys.executable, "-c", REPORTER], env={"ACP_AGENT_DATA_DIR": str(tmp_path)}) as client:
        await client.initialize()
        await anyio.sleep(1.0)  # the user has not typed yet
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "which?")
    built = next(iter(view.messages().values())).split(",")
    assert built == sorted(m.__name__ for m in warmup._first_turn_models())


async def test_warm_up_runs_once_per_process_and_skips_built_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmup, "WARM_UP_DELAY", 0.0)
    monkeypatch.setattr(warmup, "_done", False)
    rebuilt: list[str] = []
    models = warmup._first_turn_models()
    for model in models:

        def spy(*args: object, _name: str = model.__name__, **kwargs: object) -> None:
            rebuilt.append(_name)

        monkeypatch.setattr(model, "model_rebuild", spy)
    await warmup.warm_up()
    assert rebuilt == [m.__name__ for m in models if not m.__pydantic_complete__]
    rebuilt.clear()
    monkeypatch.setattr(model, "__pydantic_complete__", False)  # even an unbuilt model: the second call does nothing
    await warmup.warm_up()
    assert rebuilt == []


def _recorded_steps(monkeypatch: pytest.MonkeyPatch, *, load: bool = True) -> list[str]:
    """A fresh warm-up with no delay whose steps are recorded instead of done: ``"load"`` for the module
    imports (if ``load``), then each unbuilt model's name."""
    monkeypatch.setattr(warmup, "WARM_UP_DELAY", 0.0)
    monkeypatch.setattr(warmup, "HOLD_POLL", 0.0)
    monkeypatch.setattr(warmup, "_done", False)
    steps: list[str] = []
    if load:
        monkeypatch.setattr(warmup, "_load_session_modules", lambda: steps.append("load"))
    for model in warmup._first_turn_models():
        monkeypatch.setattr(model, "__pydantic_complete__", False)

        def spy(*args: object, _name: str = model.__name__, **kwargs: object) -> None:
            steps.append(_name)

        monkeypatch.setattr(model, "model_rebuild", spy)
    return steps


async def test_warm_up_ends_once_a_turn_runs_or_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt = _recorded_steps(monkeypatch, load=False)
    models = warmup._first_turn_models()
    await warmup.warm_up(lambda: len(rebuilt) >= 2)  # a prompt arrives after two models were built
    assert rebuilt == [m.__name__ for m in models[:2]]  # the rest is built on first use, not between prompts


async def test_warm_up_waits_while_a_request_is_answered_then_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``session/new`` sent with ``initialize`` is answered first: no warm-up step runs while it is handled."""
    steps = _recorded_steps(monkeypatch)
    answering = True
    async with anyio.create_task_group() as tg:
        tg.start_soon(warmup.warm_up, None, lambda: answering)
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert steps == []
        answering = False
    assert steps == ["load", *(m.__name__ for m in warmup._first_turn_models())]


async def test_warm_up_waits_for_a_long_request_only_so_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request waiting on the user (a login, a question) holds the warm-up for ``HOLD_LIMIT`` at most."""
    steps = _recorded_steps(monkeypatch)
    monkeypatch.setattr(warmup, "HOLD_POLL", 0.01)
    monkeypatch.setattr(warmup, "HOLD_LIMIT", 0.2)
    with anyio.fail_after(5):
        await warmup.warm_up(None, lambda: True)  # answering for ever
    assert steps == ["load", *(m.__name__ for m in warmup._first_turn_models())]


async def test_a_turn_starting_while_the_warm_up_waits_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _recorded_steps(monkeypatch)
    polls = 0

    def answering() -> bool:
        nonlocal polls
        polls += 1
        return True

    with anyio.fail_after(5):
        await warmup.warm_up(lambda: polls >= 3, answering)  # the prompt was queued while session/new was answered
    assert steps == []


async def test_a_warm_up_cancelled_with_its_connection_runs_again_on_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _recorded_steps(monkeypatch)
    with anyio.move_on_after(0.05):
        await warmup.warm_up(None, lambda: True)  # the first (HTTP) connection closes while it waits
    assert steps == []
    await warmup.warm_up()  # the next connection's initialize
    assert steps == ["load", *(m.__name__ for m in warmup._first_turn_models())]


LOADS = """
import sys
import anyio
import acp_agent, acp_agent.stdio, acp_agent._runtime.runtime
import acp_agent._runtime.warmup as warmup
from acp_agent._wire import dispatch
warmup.WARM_UP_DELAY = 0.0
anyio.run(warmup.warm_up)
unknown = dispatch.dispatch({"jsonrpc": "2.0", "id": 1, "method": "x/y", "params": {}}, {}, None, "x/y")
print("jsonrpcserver" in sys.modules, unknown["code"])
dispatch.dispatch({"jsonrpc": "2.0", "id": 2, "method": "m", "params": [1]}, {"m": lambda c, **p: None}, None, "m")
print("jsonrpcserver" in sys.modules)
"""


def test_jsonrpcserver_loads_only_for_a_call_with_by_position_params() -> None:
    # Importing jsonrpcserver costs 100-350 ms and 9 MB of RSS (jsonschema): initialize, the warm-up and an unknown
    # method do without it.
    out = subprocess.run([sys.executable, "-c", LOADS], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == ["False", "-32601", "True"]
