"""Traps a newcomer's trial agent found (issue 28, B1, B2, T1-T5, M1): each test failed on the code before its fix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from acp_agent import (
    AcpAgentError,
    Agent,
    ContentBlock,
    InvalidArgumentError,
    Session,
    SessionConfigOption,
    StopReason,
)
from acp_agent._util import environment
from acp_agent.schema import SessionConfigSelectGroup, SessionConfigSelectOption
from acp_agent.testing import WireChecker
from tests.helpers.agents import one_turn

pytestmark = pytest.mark.anyio

ASK_OR_CODE = [SessionConfigSelectOption(value="ask", name="Ask"), SessionConfigSelectOption(value="code", name="Code")]


# -- B1: a select option whose currentValue is not one of its options ----------------------------------------


def test_b1_a_select_option_refuses_a_current_value_it_does_not_offer() -> None:
    with pytest.raises(ValueError, match=r"currentValue 'fast' of 'mode' is not one of its option values"):
        SessionConfigOption(config_id="mode", name="Mode", type="select", current_value="fast", options=ASK_OR_CODE)
    groups = [SessionConfigSelectGroup(group_id="g1", name="G1", options=ASK_OR_CODE[:1]),
              SessionConfigSelectGroup(group_id="g2", name="G2", options=ASK_OR_CODE)]
    with pytest.raises(ValidationError, match="lists each value once"):  # "ask" in two groups
        SessionConfigOption(config_id="mode", name="Mode", type="select", current_value="ask", options=groups)
    ok = SessionConfigOption(config_id="mode", name="Mode", type="select", current_value="code", options=ASK_OR_CODE)
    assert ok.current_value == "code"


def test_b1_the_checker_flags_such_an_option_on_the_wire() -> None:
    checker = WireChecker(raise_on_violation=False)
    option = {"configId": "mode", "name": "Mode", "type": "select", "currentValue": "fast",
              "options": [{"value": "ask", "name": "Ask"}]}
    checker.feed("client->agent", {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                   "params": {"protocolVersion": 2, "capabilities": {}}})
    checker.feed("agent->client", {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": {}}})
    checker.feed("client->agent", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p"}})
    checker.feed("agent->client", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1", "configOptions": [option]}})
    assert checker.rules == {"S8"}
    assert "(see docs/rules.md#s8)" in str(checker.violations[0])


# -- T5: a relative terminal cwd -------------------------------------------------------------------------------


class RelativeCwdAgent(Agent):
    name = "relative-cwd"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        try:
            await session.start_terminal(["true"], cwd="relative")
        except Exception as exc:  # the test looks at what was raised
            self.raised = exc
        return "end_turn"


async def test_t5_a_relative_cwd_is_an_sdk_error_and_a_value_error() -> None:
    agent = RelativeCwdAgent()
    view = await one_turn(agent)
    assert view.terminals == {}  # nothing was announced
    assert isinstance(agent.raised, InvalidArgumentError)
    assert isinstance(agent.raised, AcpAgentError) and isinstance(agent.raised, ValueError)
    assert "'relative'" in str(agent.raised)
    doc = Session.start_terminal.__doc__ or ""
    assert "Raises:" in doc and "InvalidArgumentError" in doc


async def test_b1_a_stored_option_from_0_1_that_is_not_valid_is_dropped_on_load(caplog: pytest.LogCaptureFixture
                                                                                 ) -> None:
    from acp_agent.store.codec import record_from

    bad = {"configId": "mode", "name": "Mode", "type": "select", "currentValue": "fast",
           "options": [{"value": "ask", "name": "Ask"}]}
    good = {"configId": "on", "name": "On", "type": "boolean", "currentValue": True}
    columns = {"session_id": "sess_x", "cwd": "/p", "updated_at": "t", "created_at": "t"}
    record = record_from(columns, {}, {"configOptions": [bad, good]}, [], terminal_tail=None)
    assert [o.config_id for o in record.config_options] == ["on"]
    assert "sess_x: dropping a stored config option" in caplog.text


# -- B2: a bad ACP_AGENT_* value ---------------------------------------------------------------------------------

FIRST_AGENT = Path(__file__).resolve().parents[2] / "docs_src" / "first_agent.py"


@pytest.mark.parametrize(("name", "value"), [
    ("ACP_AGENT_BACKEND", "tokio"),
    ("ACP_AGENT_LOG_LEVEL", "LOUD"),
    ("ACP_AGENT_SHUTDOWN_TIMEOUT", "-1"),
    ("ACP_AGENT_BLOCK_WARNING", "soon"),
    ("ACP_AGENT_UVLOOP", "sometimes"),
])
def test_b2_a_bad_variable_is_one_line_naming_it_and_exit_status_2(name: str, value: str) -> None:
    done = subprocess.run([sys.executable, str(FIRST_AGENT)], input="", capture_output=True, text=True,
                          timeout=60, env={**os.environ, name: value})
    assert done.returncode == 2
    assert done.stdout == ""  # nothing on the protocol stream
    [line] = done.stderr.splitlines()
    variable = next(v for v in environment.VARIABLES if v.name == name)
    assert line == f"acp: {name}={value!r} is not valid: it accepts {variable.accepts}"


def test_b2_serve_refuses_the_same_way() -> None:
    done = subprocess.run([sys.executable, "-m", "acp_agent", "serve", str(FIRST_AGENT), "--port", "0"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "ACP_AGENT_LOG_LEVEL": "LOUD"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "acp: ACP_AGENT_LOG_LEVEL='LOUD' is not valid: it accepts DEBUG, INFO, WARNING, ERROR or CRITICAL"]


def test_b2_the_environment_page_lists_every_variable() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "environment.md").read_text()
    for variable in environment.VARIABLES:
        assert f"| `{variable.name}` | {variable.accepts} |" in page, variable.name
    used = set(re.findall(r"ACP_AGENT_[A-Z_]+", "\n".join(
        p.read_text() for p in (Path(environment.__file__).resolve().parents[1]).rglob("*.py"))))
    assert used == {v.name for v in environment.VARIABLES}  # the SDK reads no variable outside the table
