"""Traps a newcomer's trial agent found (issue 28, B1, B2, T1-T5, M1): each test failed on the code before its fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from acp_agent import (
    AcpAgentError,
    Agent,
    ContentBlock,
    ExitStatus,
    InvalidArgumentError,
    Session,
    SessionConfigOption,
    StopReason,
)
from acp_agent._util import environment
from acp_agent.schema import SessionConfigSelectGroup, SessionConfigSelectOption
from acp_agent.store import SqliteStore
from acp_agent.testing import WireChecker, connect_agent
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


# -- T1: an async exit callback ----------------------------------------------------------------------------------


class AsyncExitAgent(Agent):
    name = "async-exit"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        terminal = await session.start_terminal([sys.executable, "-c", "raise SystemExit(3)"], detach=True)

        async def exited(status: ExitStatus) -> None:  # async: before the fix it never ran
            await anyio.sleep(0)
            await session.notice(f"exit {status.exit_code}")  # background work may send notices

        terminal.on_exit(exited)
        return "end_turn"


async def test_t1_an_async_exit_callback_runs() -> None:
    async with connect_agent(AsyncExitAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "go")
        await client.wait_for(lambda: any(u.get("title") == "exit 3" for u in view.updates))


# -- T2: a forgotten await ---------------------------------------------------------------------------------------

FORGETFUL = '''
from acp_agent import Agent, ContentBlock, Session, StopReason, run_stdio


class ForgetfulAgent(Agent):
    name = "forgetful"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        session.say("never sent")
        return "end_turn"


if __name__ == "__main__":
    run_stdio(ForgetfulAgent())
'''

FORGETFUL_TEST = '''
import pytest

from acp_agent.testing import connect_agent
from forgetful_agent import ForgetfulAgent


@pytest.mark.anyio
async def test_it_answers() -> None:
    async with connect_agent(ForgetfulAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "hi")  # passes the wire checks: an empty turn is legal
'''


async def test_t2_at_run_time_one_error_names_the_call_and_the_line(tmp_path: Path) -> None:
    agent_file = tmp_path / "forgetful_agent.py"
    agent_file.write_text(FORGETFUL)
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as sink:
        process = subprocess.Popen([sys.executable, str(agent_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=sink, text=True)
        lines = [
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"capabilities":{},'
            '"info":{"name":"t","version":"1"}}}',
            '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp"}}',
        ]
        assert process.stdin is not None and process.stdout is not None
        for line in lines:
            process.stdin.write(line + "\n")
            process.stdin.flush()
            answer = process.stdout.readline()
        sid = json.loads(answer)["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}
        for _ in range(2):  # twice: Python warns once per place, so it is logged once
            process.stdin.write(json.dumps(prompt) + "\n")
            process.stdin.flush()
            while '"stopReason"' not in process.stdout.readline():
                pass
            prompt["id"] = 3
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    errors = [line for line in stderr.read_text().splitlines() if "never awaited" in line]
    assert len(errors) == 1, stderr.read_text()
    assert f"acp: {agent_file}:9: Session.say(...) was never awaited, so it did nothing" in errors[0]
    assert "write `await session.say(...)`" in errors[0]


def test_t2_in_a_test_it_fails_the_test_at_the_authors_line(tmp_path: Path) -> None:
    (tmp_path / "forgetful_agent.py").write_text(FORGETFUL)
    (tmp_path / "test_forgetful.py").write_text(FORGETFUL_TEST)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_forgetful.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 1, done.stdout
    assert " failed" in done.stdout and " passed" not in done.stdout
    assert f"{tmp_path / 'forgetful_agent.py'}:9: Session.say(...) was never awaited" in done.stdout


# -- T3: a secret asked in a form --------------------------------------------------------------------------------

API_KEY_FORM = {"type": "object", "properties": {"api_key": {"type": "string", "format": "password"}},
                "required": ["api_key"]}


class SecretFormAgent(Agent):
    name = "secret-form"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        try:
            await session.ask("Your API key?", API_KEY_FORM)
        except InvalidArgumentError as exc:
            self.refused = str(exc)
        return "end_turn"


async def test_t3_a_password_property_is_refused_naming_the_rule() -> None:
    agent = SecretFormAgent()
    async with connect_agent(agent, elicitation_policy=lambda params: {"action": "decline"}) as client:
        await client.initialize(capabilities={"elicitation": {"form": {}}})
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        assert not [m for m in client.sent_by_agent() if m.get("method") == "elicitation/create"]  # nothing sent
    assert agent.refused.startswith("R83: a form never asks for a secret, and property 'api_key' is a password")
    assert "ask_url" in agent.refused


def test_t3_the_checker_flags_a_password_in_a_form() -> None:
    checker = WireChecker(raise_on_violation=False)
    checker.feed("client->agent", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": 2, "capabilities": {"elicitation": {"form": {}}}}})
    checker.feed("agent->client", {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": {}}})
    checker.feed("agent->client", {"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {
        "requestId": 0, "mode": "form", "message": "Key?", "requestedSchema": API_KEY_FORM}})
    assert "R83" in checker.rules


# -- T4: Client.wait_for on the agent's own state ----------------------------------------------------------------


class QuietWorkAgent(Agent):
    """Background work that changes the agent's state and sends nothing."""

    name = "quiet-work"
    done = False

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        async def work() -> None:
            await anyio.sleep(0.2)
            self.done = True

        session.spawn(work)
        return "end_turn"


async def test_t4_wait_for_rechecks_a_condition_on_the_agents_state() -> None:
    agent = QuietWorkAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        await client.wait_for(lambda: agent.done, timeout=5)  # no message follows: before the fix, a timeout


# -- M1: wake-ups across a restart -------------------------------------------------------------------------------


class DeployAgent(Agent):
    """Schedules a durable deploy check; re-arms it when the session is loaded again."""

    name = "deploy-agent"

    def __init__(self) -> None:
        self.rearmed: list[tuple[str, Any]] = []

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        async def check() -> StopReason:
            await session.say("deploy check (first process)")
            return "end_turn"

        await session.schedule(0.3, check, title="Check the deploy", durable="deploy-check", payload={"env": "prod"})
        return "end_turn"

    async def rearm_wakeup(self, session: Session, name: str, payload: Any
                           ) -> Callable[[], Awaitable[StopReason | None]] | None:
        self.rearmed.append((name, payload))

        async def check() -> StopReason:
            await session.say(f"deploy check on {payload['env']}")
            return "end_turn"

        return check


async def test_m1_a_durable_wakeup_comes_back_after_a_restart(tmp_path: Path) -> None:
    store_file = tmp_path / "agent.sqlite3"
    first = SqliteStore(store_file)
    async with connect_agent(DeployAgent(), store=first) as client:  # the first process
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "deploy")
        [pending] = view.background or []
        assert view.tool_calls[pending["toolCallId"]]["status"] == "pending"
    await first.close()  # the process ended before the wake-up fired: it was reported cancelled

    agent = DeployAgent()
    second = SqliteStore(store_file)
    async with connect_agent(agent, store=second) as client:  # after the restart
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        view = client.view(sid)
        assert agent.rearmed == [("deploy-check", {"env": "prod"})]
        [again] = view.background or []  # pending again, as a new tool call
        assert again["toolCallId"] != pending["toolCallId"]
        assert view.tool_calls[again["toolCallId"]]["status"] == "pending"
        assert view.tool_calls[pending["toolCallId"]]["status"] == "cancelled"
        await client.wait_for(lambda: "deploy check on prod" in view.messages().values())
    await second.close()

    third = SqliteStore(store_file)  # fired for good: not kept
    record = await third.load(sid)
    assert record is not None and record.wakeups == {}
    await third.close()


async def test_m1_a_cancelled_durable_wakeup_is_not_rearmed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "agent.sqlite3")
    agent = DeployAgent()
    async with connect_agent(agent, store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "deploy")
        [pending] = view.background or []
        await client.cancel_tool_call(sid, pending["toolCallId"])
        await client.wait_for(lambda: view.background == [])
        await client.close_session(sid)
        await client.resume_session(sid, "/tmp")
        assert agent.rearmed == []
    await store.close()


# -- the doc gaps ------------------------------------------------------------------------------------------------


def test_doc_gaps_are_closed() -> None:
    from acp_agent.testing import Client, spawn_agent

    root = Path(__file__).resolve().parents[2]
    site = {p.name: p.read_text() for p in (root / "docs").rglob("*.md")}
    # MODE_OPTION is built on the site, with configId
    config = (root / "docs_src" / "config_options.py").read_text()
    assert "MODE_OPTION = SessionConfigOption(" in config and 'config_id="mode"' in config
    # a diff example, and how v2's diff differs from v1's
    assert '--8<-- "docs_src/diff_edit.py"' in site["talking-to-the-client.md"]
    assert "oldText" in site["talking-to-the-client.md"]
    # help(Client) lists the held questions and their shape
    doc = Client.__doc__ or ""
    assert "pending_permissions" in doc and "pending_elicitations" in doc and '{"params"' in doc
    # the raw exchange shows what say() sends
    raw = (root / "docs_src" / "raw_exchange.txt").read_text()
    assert '"sessionUpdate":"agent_message"' in raw and "agent_message_chunk" not in raw
    # spawn_agent says whether it checks the transcript at the end
    assert "When the block ends normally, the whole transcript is judged" in (spawn_agent.__doc__ or "")
