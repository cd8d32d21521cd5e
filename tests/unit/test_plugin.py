"""The pytest plugin's fixtures, used the way an agent author would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_agent import Agent, ContentBlock, ErrorCode, RequestError, Session, StopReason
from acp_agent.testing import Client
from tests.helpers.agents import ScriptedAgent

pytestmark = pytest.mark.anyio
ECHO = Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"


@pytest.mark.acp_agent(agent=ScriptedAgent)
async def test_acp_client_in_process(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    view = await acp_client.prompt_and_wait(sid, "echo plugin")
    assert list(view.messages().values()) == ["echo plugin"]


@pytest.mark.acp_agent([sys.executable, str(ECHO)])
async def test_acp_client_subprocess(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    view = await acp_client.prompt_and_wait(sid, "over pipes")
    assert view.stop_reason == "end_turn"


async def test_acp_connect_yields_an_uninitialized_client(acp_connect: Any) -> None:
    async with acp_connect(ScriptedAgent()) as client:
        assert client.transcript == []  # nothing sent yet: initialize is the test's to send
        assert (await client.initialize())["protocolVersion"] == 2


@pytest.mark.acp_agent(agent=ScriptedAgent)
async def test_acp_client_is_already_initialized(acp_client: Client) -> None:
    request, answer = (entry.message for entry in acp_client.transcript[:2])
    assert request["method"] == "initialize" and request["params"]["protocolVersion"] == 2
    assert answer["id"] == request["id"] and answer["result"]["protocolVersion"] == 2


async def test_acp_connect_reports_protocol_breakage(acp_connect: Any) -> None:
    class Broken(Agent):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            # Writing a raw, schema-invalid update behind the SDK's back.
            session._core.connection.writer.send_nowait(
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":'
                b'{"sessionUpdate":"agent_message_chunk"}}}\n' % session.id.encode()
            )
            return "end_turn"

    with pytest.raises(pytest.fail.Exception, match="broke the protocol"):
        async with acp_connect(Broken()) as client:
            await client.initialize()
            sid = await client.new_session("/tmp")
            await client.prompt_and_wait(sid, "x")


BACKGROUND = Path(__file__).resolve().parents[2] / "examples" / "background_agent.py"


@pytest.mark.acp_agent(agent=[sys.executable, str(BACKGROUND)])
async def test_client_view_tracks_entities_and_helpers(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    view = acp_client.view(sid)
    assert view.quiet is False  # nothing reported yet: the list is unknown
    await acp_client.prompt_and_wait(sid, "/bg echo hello; sleep 30")
    [terminal_id] = list(view.terminals)
    await acp_client.wait_for(lambda: view.terminals[terminal_id]["output"] == b"hello\n")
    assert view.cancellable_terminals() == {terminal_id}
    [tool_id] = list(view.tool_calls)
    assert view.tool_calls[tool_id]["status"] == "completed" and not view.cancellable_tool_calls()
    await acp_client.cancel_terminal(sid, terminal_id)
    await acp_client.wait_for(lambda: view.quiet)
    assert view.terminals[terminal_id]["exitStatus"]["signal"] == "SIGTERM"
    assert view.terminals[terminal_id]["capabilities"] is None
    await acp_client.prompt_and_wait(sid, "/subagent 0.2 hi there")
    await acp_client.wait_for(lambda: view.quiet and any(
        (c.get("state") or {}).get("state") == "idle" for c in view.children.values()))
    await acp_client.resume_session(sid, "/tmp", replay=True)
    assert [s["sessionId"] for s in await acp_client.list_sessions()] == [sid]


async def test_command_agents_keep_sessions_under_the_tests_tmp_path(
    acp_connect: Any, tmp_path: Path, agent_data_dir: str,
) -> None:
    # The suite's own conftest points ACP_AGENT_DATA_DIR elsewhere; the plugin's directory wins, as it
    # wins over a user's real data directory.
    async with acp_connect([sys.executable, str(ECHO)]) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "stored")
    data = tmp_path / "acp-agent-data"
    assert data.is_dir() and any(data.iterdir())
    assert not any(Path(agent_data_dir).iterdir())


async def test_env_in_acp_connect_chooses_the_data_dir(acp_connect: Any, tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    async with acp_connect([sys.executable, str(ECHO)], env={"ACP_AGENT_DATA_DIR": str(chosen)}) as client:
        await client.initialize()
        await client.new_session("/tmp")
    assert any(chosen.iterdir())
    assert not (tmp_path / "acp-agent-data").exists()


@pytest.mark.acp_agent(agent=ScriptedAgent)
async def test_notification_helpers_can_be_awaited_or_not(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    await acp_client.cancel(sid)  # awaitable, like cancel_tool_call and cancel_terminal
    acp_client.cancel(sid)  # and still usable as a plain call, as before
    await acp_client.notify("session/cancel", {"sessionId": sid})
    await acp_client.cancel_request(acp_client.last_request_id)

    def sent() -> list[str]:
        return [e.message["method"] for e in acp_client.transcript
                if e.direction == "client->agent" and "id" not in e.message]

    await acp_client.wait_for(lambda: len(sent()) == 4)
    assert sent() == ["session/cancel"] * 3 + ["$/cancel_request"]


async def test_wait_for_timeout_quotes_the_error_that_ended_the_work(acp_connect: Any) -> None:
    class Refusing(Agent):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            raise RequestError(ErrorCode.INTERNAL_ERROR, "this agent runs on asyncio only")

    async with acp_connect(Refusing()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "ask me something")
        with pytest.raises(TimeoutError, match="this agent runs on asyncio only"):
            await client.wait_for(lambda: bool(client.pending_permissions), timeout=1)
        assert client.view(sid).error == {"code": -32603, "message": "this agent runs on asyncio only"}
