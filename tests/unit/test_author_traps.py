"""Traps agent authors fell into (issue 11): each test failed before its fix.

The one exception is ``test_start_foreground_is_how_to_talk_after_the_turn``, the positive
control beside the refusal test: it pins the way to speak after a turn that the refusal's
error message teaches.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

import anyio
import pytest

import acp_agent
from acp_agent import (
    Agent,
    ContentBlock,
    NotInTurnError,
    ProcessStartError,
    RequestError,
    Session,
    SessionConfigOption,
    StopReason,
    Subagent,
    TextContent,
    ToolCall,
    ToolCallStateError,
)
from acp_agent.schema import TerminalExitStatus, TerminalUpdate
from acp_agent.testing.client import Client, connect_agent

pytestmark = pytest.mark.anyio


def text_of(prompt: list[ContentBlock]) -> str:
    return " ".join(b.text for b in prompt if isinstance(b, TextContent))


def updates(client: Client, sid: str, kind: str) -> list[dict[str, Any]]:
    return [u for u in client.view(sid).updates if u["sessionUpdate"] == kind]


class Hooks(Agent):
    """Runs whatever the test put in ``self.work`` as the prompt hook."""

    name = "hooks"

    def __init__(self) -> None:
        self.h: dict[str, Any] = {}
        self.work: Any = None

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason | None:
        result: StopReason | None = await self.work(session, text_of(prompt))
        return result


# -- a process that cannot start --------------------------------------------------------------


async def test_missing_command_is_known_before_anything_is_sent() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("run it", kind="execute", status="in_progress")
        agent.h["tool"] = tool
        try:
            await session.start_terminal(["no-such-cmd-acp"], tool_call=tool, ends_tool_call=True, detach=True)
        except ProcessStartError as exc:
            agent.h["error"] = exc
        await tool.fail()

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        error = agent.h["error"]
        assert isinstance(error, OSError) and error.errno == errno.ENOENT
        assert isinstance(error.__cause__, FileNotFoundError)
        assert updates(client, sid, "terminal_update") == []  # never announced
        tool_updates = updates(client, sid, "tool_call_update")
        assert [u.get("status") for u in tool_updates] == ["in_progress", "failed"]  # the author's own end
        assert client.view(sid).background == []
    # the connection ended: still no terminal, and no "did not end in time" exit either
    assert updates(client, sid, "terminal_update") == []


async def test_missing_cwd_is_a_process_start_error() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        with pytest.raises(ProcessStartError):
            await session.start_terminal([sys.executable, "-c", "pass"], cwd="/no/such/dir/acp")
        agent.h["ok"] = True

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        assert agent.h["ok"] and updates(client, sid, "terminal_update") == []


async def test_a_misspelled_terminal_option_is_a_type_error() -> None:
    """``start_terminal``'s options are one TypedDict (``TerminalOptions``): an unknown keyword still raises, and
    nothing starts or is sent."""
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        with pytest.raises(TypeError, match="cwdd"):
            await session.start_terminal([sys.executable, "-c", "pass"], cwdd="/tmp")  # type: ignore[call-arg]
        agent.h["ok"] = True

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        assert agent.h["ok"] and updates(client, sid, "terminal_update") == []


async def test_a_terminal_reports_its_exit_once_ever() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        term = await session.start_terminal([sys.executable, "-c", "pass"])
        await term.wait()
        with pytest.raises(ToolCallStateError):
            await session.send(TerminalUpdate(terminal_id=term.id,
                                              exit_status=TerminalExitStatus(exit_code=0, signal=None)))
        agent.h["ok"] = True

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        assert agent.h["ok"]
        assert len([u for u in updates(client, sid, "terminal_update") if "exitStatus" in u]) == 1


# -- a report after an exit --------------------------------------------------------------------


async def test_report_after_exit_just_works() -> None:  # R95, judged by the client's WireChecker
    agent = Hooks()

    async def report() -> StopReason:
        await agent.h["session"].say("the tests passed")
        return "end_turn"

    async def work(session: Session, _: str) -> None:
        agent.h["session"] = session
        term = await session.start_terminal([sys.executable, "-c", "import time; time.sleep(0.2)"], detach=True)
        term.on_exit(lambda status: session.start_foreground(report))

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "go")
        await client.wait_idle(sid, count=2)
        exit_at = next(i for i, u in enumerate(client.view(sid).updates) if "exitStatus" in u)
        following = client.view(sid).updates[exit_at + 1]
        assert following["sessionUpdate"] == "state_update" and following["state"] == "running"
        assert following["background"] == []
        assert client.view(sid).messages() != {}


# -- nothing for a session before the answer that names it ------------------------------------------


OPTION = SessionConfigOption.model_validate({
    "type": "select", "configId": "mode", "name": "Mode", "currentValue": "ask",
    "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
})


class EagerAgent(Agent):
    """Sends updates from new_session / fork_session, as the docstrings used to invite."""

    name = "eager"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        return "end_turn"

    async def new_session(self, session: Session) -> None:
        await session.update_config_options([OPTION])
        await session.notice("hello")

    async def fork_session(self, source: Session, session: Session) -> None:
        await session.notice("forked")


def _answer_index(client: Client, method: str) -> int:
    request_ids = {e.message["id"] for e in client.transcript
                   if e.direction == "client->agent" and e.message.get("method") == method}
    sent = client.sent_by_agent()
    return next(i for i, m in enumerate(sent) if m.get("id") in request_ids and "result" in m)


async def test_updates_from_new_session_follow_its_answer() -> None:
    async with connect_agent(EagerAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.wait_for(lambda: len(client.view(sid).updates) == 1)  # the notice
        assert client.view(sid).config_options is not None  # the update call folded into the answer
        sent = client.sent_by_agent()
        answer = _answer_index(client, "session/new")
        first_update = next(i for i, m in enumerate(sent) if m.get("method") == "session/update")
        assert first_update > answer
        fork = await client.fork_session(sid)
        await client.wait_for(lambda: len(client.view(fork).updates) == 1)
        sent = client.sent_by_agent()
        fork_answer = _answer_index(client, "session/fork")
        assert all(i > fork_answer for i, m in enumerate(sent)
                   if m.get("method") == "session/update" and m["params"]["sessionId"] == fork)


async def test_a_question_before_the_session_exists_is_refused() -> None:
    class Asker(EagerAgent):
        async def new_session(self, session: Session) -> None:
            from acp_agent import PermissionOption, SessionNotOpenError

            with pytest.raises(SessionNotOpenError):
                await session.request_permission("now?", [PermissionOption(option_id="y", name="Yes",
                                                                           kind="allow_once")])

    async with connect_agent(Asker()) as client:
        await client.initialize()
        await client.new_session("/tmp")
        assert not any(m.get("method") == "session/request_permission" for m in client.sent_by_agent())


# -- work after the turn -------------------------------------------------------------------------


async def test_a_message_after_the_turn_is_refused_with_a_clear_error() -> None:
    agent = Hooks()
    done = anyio.Event()

    async def late(session: Session) -> None:
        await session.wait_idle()
        try:
            await session.say("late")
        except NotInTurnError as exc:
            agent.h["error"] = exc
        try:
            await session.message().write("late")
        except NotInTurnError as exc:
            agent.h["stream error"] = exc
        done.set()

    async def work(session: Session, _: str) -> None:
        session.spawn(late, session)

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        with anyio.fail_after(5):
            await done.wait()
        assert "start_foreground" in str(agent.h["error"])
        assert isinstance(agent.h["stream error"], NotInTurnError)
        assert client.view(sid).messages() == {}


async def test_start_foreground_is_how_to_talk_after_the_turn() -> None:
    agent = Hooks()

    async def late(session: Session) -> None:
        await session.wait_idle()

        async def speak() -> None:
            await session.say("late but bracketed")

        session.start_foreground(speak)

    async def work(session: Session, _: str) -> None:
        session.spawn(late, session)

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "go")
        await client.wait_idle(sid, count=2)
        assert list(client.view(sid).messages().values()) == ["late but bracketed"]


# -- what a client sees of an exception -----------------------------------------------------------


async def test_a_request_error_keeps_its_code_message_and_data() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        raise RequestError(-32042, "Quota exceeded", {"retryAfter": 30})

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "go")
        idle = view.updates[-1]
        assert idle["stopReason"] == "error"
        assert idle["error"] == {"code": -32042, "message": "Quota exceeded", "data": {"retryAfter": 30}}


async def test_auth_required_from_a_turn_is_minus_32000() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        raise RequestError.auth_required()

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "go")
        assert view.updates[-1]["error"]["code"] == -32000


async def test_any_other_exception_shows_no_text_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        raise RuntimeError("token=sk-secret in /home/alice/.config")

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "go")
        assert view.updates[-1]["error"] == {"code": -32603, "message": "Internal error"}
        assert "sk-secret" not in str(client.sent_by_agent())
    assert any("sk-secret" in (r.exc_text or "") or r.exc_info for r in caplog.records)


# -- typed tool call patches -----------------------------------------------------------------------


async def test_a_misspelled_tool_call_field_is_an_error_and_sends_nothing() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("edit", kind="edit")
        with pytest.raises(TypeError, match="stauts"):
            await tool.update(stauts="completed")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="stauts"):
            await session.update_tool_call(tool.id, stauts="completed")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="titel"):
            await session.start_tool_call("x", titel="y")  # type: ignore[call-arg]
        await tool.complete()

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        assert not any("stauts" in u for u in updates(client, sid, "tool_call_update"))
        assert len(updates(client, sid, "tool_call_update")) == 2


# -- a cooperative pause point ---------------------------------------------------------------------


async def test_checkpoint_waits_while_paused() -> None:
    agent = Hooks()
    steps: list[int] = []

    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("workflow", kind="other")
        agent.h["tool"] = tool
        gate = agent.h["gate"] = anyio.Event()

        async def body(t: ToolCall) -> None:
            for step in range(3):
                await gate.wait() if step == 1 else None
                await t.checkpoint()
                steps.append(step)
                await t.append(f"step {step}")

        tool.run(body)

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        await client.wait_for(lambda: steps == [0])
        tool: ToolCall = agent.h["tool"]
        await tool.pause()
        agent.h["gate"].set()
        await anyio.sleep(0.2)
        assert steps == [0] and tool.paused
        await tool.resume()
        await tool.wait()
        assert steps == [0, 1, 2] and tool.status == "completed"


# -- what a subagent did ----------------------------------------------------------------------------


async def test_a_subagent_gives_its_result() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        sub: Subagent = await session.spawn_subagent("helper")

        async def child_work(child: Session) -> StopReason:
            await child.say("found 3 files")
            stream = child.message()
            await stream.write("all ")
            await stream.write("good")
            return "max_tokens"

        result = await sub.run(child_work)
        agent.h["result"] = result

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        result = agent.h["result"]
        assert result.stop_reason == "max_tokens"
        assert result.text == "found 3 files\n\nall good"
        assert len(result.messages) == 2


# -- data and history across close, resume and fork -------------------------------------------------


class Keeper(Agent):
    name = "keeper"

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        session.data.setdefault("prompts", []).append(text_of(prompt))
        await session.say(f"ok {text_of(prompt)}")
        self.sessions[session.id] = session
        return "end_turn"

    async def resume_session(self, session: Session) -> None:
        self.sessions[session.id] = session

    async def fork_session(self, source: Session, session: Session) -> None:
        self.sessions[session.id] = session


async def test_data_and_history_survive_close_resume_and_fork() -> None:
    agent = Keeper()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "one")
        fork = await client.fork_session(sid)
        await client.close_session(sid)
        await client.resume_session(sid)
        resumed = agent.sessions[sid]
        assert resumed.data == {"prompts": ["one"]}
        history = resumed.history
        kinds = [type(item).__name__ for item in history]
        assert kinds == ["UserMessage", "AgentMessage"]
        forked = agent.sessions[fork]
        assert forked.data == {"prompts": ["one"]}  # a copy of the source's at the fork
        forked.data["prompts"] = []
        assert resumed.data == {"prompts": ["one"]}
        assert [type(item).__name__ for item in forked.history] == kinds


async def test_a_child_spawned_in_new_session_waits_for_the_answer_too() -> None:
    class Spawner(Agent):
        name = "spawner"

        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            return "end_turn"

        async def new_session(self, session: Session) -> None:
            sub = await session.spawn_subagent("warm-up")

            async def warm(child: Session) -> StopReason:
                await child.say("ready")
                return "end_turn"

            sub.start(warm)
            await sub.wait_idle()  # the child's whole turn happens before the answer

    async with connect_agent(Spawner()) as client:  # R79 and S3 judged by the client's checker
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.wait_for(lambda: any(m.get("method") == "session/update" and m["params"]["sessionId"] != sid
                                          for m in client.sent_by_agent()))
        sent = client.sent_by_agent()
        answer = _answer_index(client, "session/new")
        assert all(i > answer for i, m in enumerate(sent) if m.get("method") == "session/update")


# -- found by a newcomer trial -------------------------------------------------------------------


class Configured(Agent):
    """Assigns one shared option object to every session, as the README's example does."""

    name = "configured"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        return "end_turn"

    async def new_session(self, session: Session) -> None:
        session.config_options = [OPTION]
        await session.update_config_options([OPTION])  # the common mistake: sends nothing extra now


async def test_config_options_are_per_session_and_folded_into_the_answer() -> None:
    async with connect_agent(Configured()) as client:
        await client.initialize()
        first = await client.new_session("/tmp")
        second = await client.new_session("/tmp")
        assert client.view(first).config_options is not None
        options = await client.set_config_option(first, "mode", "code")
        assert options[0]["currentValue"] == "code"
        assert client.view(first).config_options == options
        assert OPTION.current_value == "ask"  # the agent's shared object is untouched
        fresh = await client.new_session("/tmp")
        assert client.view(fresh).config_options[0]["currentValue"] == "ask"  # type: ignore[index]
        # in new_session the update call only assigned: no config_option_update follows the answer
        assert updates(client, first, "config_option_update") == []
        assert updates(client, second, "config_option_update") == []
        with pytest.raises(RequestError, match='type "id"'):
            await client.request("session/set_config_option",
                                 {"sessionId": first, "configId": "mode", "type": "boolean", "value": True})


async def test_work_stopped_by_close_replays_as_ended_and_a_fork_runs_none_of_it() -> None:
    agent = Keeper()
    started = anyio.Event()

    class Worker(Keeper):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            self.sessions[session.id] = session
            tool = await session.start_tool_call("long job", kind="other")

            async def body(t: ToolCall) -> None:
                started.set()
                await anyio.sleep_forever()

            tool.run(body)
            return "end_turn"

    agent = Worker()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        with anyio.fail_after(5):
            await started.wait()
        fork = await client.fork_session(sid)
        fork_calls = [i for i in agent.sessions[fork].history if isinstance(i, acp_agent.ToolCallUpdate)]
        assert [c.status for c in fork_calls] == ["cancelled"]  # copied, not run: never left live
        await client.close_session(sid)
        await client.resume_session(sid)
        calls = [i for i in agent.sessions[sid].history if isinstance(i, acp_agent.ToolCallUpdate)]
        assert [c.status for c in calls] == ["cancelled"]
        assert client.view(sid).background == []


async def test_a_subagent_result_carries_its_error() -> None:
    agent = Hooks()

    async def work(session: Session, _: str) -> None:
        sub = await session.spawn_subagent("helper")

        async def fail(child: Session) -> StopReason:
            raise RequestError(-32050, "ran out of ideas")

        agent.h["result"] = await sub.run(fail)

    agent.work = work
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "go")
        result = agent.h["result"]
        assert result.stop_reason == "error"
        assert result.error is not None and (result.error.code, result.error.message) == (-32050, "ran out of ideas")
