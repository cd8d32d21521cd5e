"""The pydantic-ai bridge (``acp_agent.integrations.pydantic_ai``) driven offline through the checked client.

Every test runs a real pydantic-ai agent on ``FunctionModel`` (a scripted model: no network) behind
``PydanticAIAgent`` and talks to it with ``acp_agent.testing``'s client, whose WireChecker and schema
check judge every transcript when the connection ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponseOrigin,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.usage import UsageLimits

from acp_agent import Agent, ContentBlock, Session, StopReason
from acp_agent.integrations.pydantic_ai import PermissionPolicy, PydanticAIAgent, TurnBridge, current_tool
from acp_agent.store import MemoryStore
from acp_agent.testing.client import Client
from tests.helpers.pydantic_ai_models import checked

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    """pydantic-ai runs on asyncio only (its runs start asyncio tasks), so the bridge does too."""
    return "asyncio"

Stream = Callable[[list[ModelMessage], AgentInfo], AsyncIterator[Any]]


def last_request(messages: list[ModelMessage]) -> ModelRequest:
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    return request


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for p in last_request(messages).parts if isinstance(p, ToolReturnPart)]


def user_texts(messages: list[ModelMessage]) -> list[str]:
    return [str(p.content) for m in messages if isinstance(m, ModelRequest)
            for p in m.parts if isinstance(p, UserPromptPart)]


def updates(client: Client, sid: str, kind: str) -> list[dict[str, Any]]:
    return [u for u in client.view(sid).updates if u.get("sessionUpdate") == kind]


def writer_agent(ran: list[str]) -> PydanticAgent[None, str]:
    """A model that calls ``write_file`` (needs approval) once, then reports what the tool said."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        returns = tool_returns(messages)
        if returns:
            yield f"tool said: {returns[0].content}"
            return
        yield {0: DeltaToolCall(name="write_file", json_args='{"path": "a.txt", "text": "hi"}')}

    agent = PydanticAgent(FunctionModel(stream_function=stream))

    @agent.tool_plain(requires_approval=True)
    def write_file(path: str, text: str) -> str:
        ran.append(path)
        return f"wrote {len(text)} bytes to {path}"

    return agent


# -- streaming ------------------------------------------------------------------------------------


async def test_text_and_thinking_stream_in_order_as_chunks() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        yield {0: DeltaThinkingPart(content="Let me ")}
        yield {0: DeltaThinkingPart(content="think.")}
        yield "Hello"
        yield ", world"

    agent = PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)))
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")
        chunks = [(u["sessionUpdate"], u["content"]["text"]) for u in view.updates
                  if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")]
        assert chunks == [("agent_thought_chunk", "Let me "), ("agent_thought_chunk", "think."),
                          ("agent_message_chunk", "Hello"), ("agent_message_chunk", ", world")]
        assert list(view.messages().values()) == ["Hello, world"]
        assert list(view.messages("agent_thought").values()) == ["Let me think."]
        assert view.stop_reason == "end_turn"
        idle = [u for u in view.updates if u.get("sessionUpdate") == "state_update" and u["state"] == "idle"][-1]
        assert idle["usage"]["inputTokens"] > 0 and idle["usage"]["outputTokens"] > 0


async def test_the_context_window_is_reported_when_the_model_knows_it() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        yield "hello"

    model = FunctionModel(stream_function=stream, profile={"context_window": 200_000})
    async with checked(PydanticAIAgent(PydanticAgent(model))) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")
        (usage,) = updates(client, sid, "usage_update")
        assert usage["size"] == 200_000 and 0 < usage["used"] < 200_000
    async with checked(PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)))) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")  # a window nobody knows: no usage_update
        assert updates(client, sid, "usage_update") == [] and view.stop_reason == "end_turn"


async def test_tool_call_shown_with_title_kind_and_result() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if tool_returns(messages):
            yield "done"
            return
        yield {0: DeltaToolCall(name="read_file", json_args='{"path": "src/a.py"}')}

    agent = PydanticAgent(FunctionModel(stream_function=stream))
    seen: list[str] = []

    @agent.tool_plain
    async def read_file(path: str) -> str:
        seen.append(current_tool().tool_call.status)
        return "print('hi')"

    async with checked(PydanticAIAgent(agent)) as client:
        await client.initialize()
        sid = await client.new_session(cwd="/home/me/project")
        view = await client.prompt_and_wait(sid, "read it")
        assert seen == ["in_progress"]
        (tool,) = view.tool_calls.values()
        assert tool["title"] == "read_file: src/a.py" and tool["kind"] == "read" and tool["name"] == "read_file"
        assert tool["locations"] == [{"path": "/home/me/project/src/a.py"}]
        assert tool["status"] == "completed" and "rawOutput" not in tool  # the content carries it (issue 37)
        statuses = [u.get("status") for u in updates(client, sid, "tool_call_update") if "status" in u]
        assert statuses == ["pending", "in_progress", "completed"]
        assert list(view.messages().values()) == ["done"]


async def test_a_replaced_response_is_cleared_and_its_late_events_dropped() -> None:
    """A response another attempt replaced (``ModelResponseOrigin.supersedes``: a hook that restarts the stream,
    a durable retry) is cleared on the client; its late events are dropped."""
    first, second = (ModelResponseOrigin(run_id="r", run_step=1, attempt=n) for n in (1, 2))

    class Replaying(Agent):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            bridge = TurnBridge(session)
            ctx: Any = None  # on_event does not read the run context
            await bridge.on_event(ctx, event=PartStartEvent(index=0, part=TextPart("abandoned "), origin=first))
            await bridge.on_event(ctx, event=PartStartEvent(index=0, part=TextPart("kept"), origin=second))
            await bridge.on_event(ctx, event=PartDeltaEvent(index=0, delta=TextPartDelta("late"), origin=first))
            await bridge.on_event(ctx, event=PartDeltaEvent(index=0, delta=TextPartDelta(" answer"), origin=second))
            return "end_turn"

    async with checked(Replaying()) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")
        assert [text for text in view.messages().values() if text] == ["kept answer"]
        cleared = [u for u in view.updates if u["sessionUpdate"] == "agent_message"]
        assert [u["content"] for u in cleared] == [[]]


# -- approval -------------------------------------------------------------------------------------


async def asked(client: Client, *, initialize: bool = True) -> str:
    """A new session whose prompt "write" waits for the user's answer to a permission request."""
    if initialize:
        await client.initialize()
    sid = await client.new_session()
    await client.prompt(sid, "write")
    await client.wait_for(lambda: any(p["params"]["sessionId"] == sid for p in client.pending_permissions.values()))
    return sid


async def test_approval_asked_before_the_body_runs_and_allow_runs_it() -> None:
    ran: list[str] = []
    async with checked(PydanticAIAgent(writer_agent(ran)), permission_policy=None) as client:
        sid = await asked(client)
        assert ran == []
        (tool,) = client.view(sid).tool_calls.values()
        assert tool["status"] == "pending"
        assert client.view(sid).state == "requires_action"
        params = client.pending_permissions[0]["params"]
        assert [o["kind"] for o in params["options"]] == ["allow_once", "allow_always", "reject_once",
                                                          "reject_always"]
        client.answer_permission(0, "allow_once")
        view = await client.wait_idle(sid)
        assert ran == ["a.txt"]
        assert view.tool_calls[next(iter(view.tool_calls))]["status"] == "completed"
        assert list(view.messages().values()) == ["tool said: wrote 2 bytes to a.txt"]


async def test_rejected_tool_never_runs_and_the_model_is_told() -> None:
    ran: list[str] = []
    async with checked(PydanticAIAgent(writer_agent(ran)), permission_policy=None) as client:
        sid = await asked(client)
        client.answer_permission(0, "reject_once")
        view = await client.wait_idle(sid)
        assert ran == []
        (tool,) = view.tool_calls.values()
        assert tool["status"] == "failed"
        (message,) = view.messages().values()
        assert message.startswith("tool said: The user rejected this tool call")


async def test_always_is_remembered_per_session_for_the_same_call() -> None:
    ran: list[str] = []
    async with checked(PydanticAIAgent(writer_agent(ran)), permission_policy=None) as client:
        sid = await asked(client)
        client.answer_permission(0, "allow_always")
        await client.wait_idle(sid)
        await client.prompt_and_wait(sid, "again")  # same tool, same arguments: not asked again
        assert ran == ["a.txt", "a.txt"]
        assert not client.pending_permissions
        other = await asked(client, initialize=False)  # another session asks again
        client.answer_permission(1, "reject_always")
        await client.wait_idle(other)
        await client.prompt_and_wait(other, "again")  # rejected without asking
        assert ran == ["a.txt", "a.txt"]
        assert not client.pending_permissions


async def test_policy_decides_without_asking() -> None:
    ran: list[str] = []
    agent = PydanticAIAgent(writer_agent(ran), permission_policy=PermissionPolicy(allow={"write_file"}))
    async with checked(agent, permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "write")
        assert ran == ["a.txt"] and not client.pending_permissions


# -- cancellation, errors, history ----------------------------------------------------------------


async def test_cancel_mid_stream_ends_the_turn_and_keeps_what_was_said() -> None:
    seen: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        seen.append(user_texts(messages))
        yield "partial"
        if len(seen) == 1:
            await anyio.sleep(30)
        yield " answer"

    async with checked(PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)))) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt(sid, "first")
        await client.wait_for(lambda: bool(client.view(sid).messages()))
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        await client.prompt_and_wait(sid, "second")
        assert seen[-1] == ["first", "second"]


async def test_model_error_is_the_turns_error_without_the_providers_body() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        raise ModelHTTPError(401, "test-model", body={"error": "bad key sk-secret-123"})
        yield ""

    async with checked(PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)))) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")
        assert view.stop_reason == "error"
        error = view.updates[-1]["error"]
        assert error["message"] == "The model test-model answered HTTP 401"
        assert error["data"] == {"error": "ModelHTTPError", "model": "test-model", "status": 401}
        assert "sk-secret" not in repr(client.transcript)


async def test_usage_limits_end_the_turn_with_an_error() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        yield "x"

    agent = PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)),
                            usage_limits=UsageLimits(request_limit=0))
    assert (await turn_error(agent))["message"].startswith("Usage limit exceeded")


async def turn_error(agent: PydanticAIAgent) -> dict[str, Any]:
    """The error on the idle that ends the first turn of a new session with ``agent`` (which must end ``error``)."""
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "hi")
        assert view.stop_reason == "error"
        error: dict[str, Any] = view.updates[-1]["error"]
        return error


async def test_history_across_turns_resume_and_fork() -> None:
    seen: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        seen.append(user_texts(messages))
        yield f"reply {len(seen)}"

    agent = PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream)))
    store = MemoryStore()
    async with checked(agent, store=store) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "one")
        await client.prompt_and_wait(sid, "two")
        assert seen[-1] == ["one", "two"]
        forked = await client.fork_session(sid)
        await client.prompt_and_wait(forked, "fork")
        assert seen[-1] == ["one", "two", "fork"]
    async with checked(agent, store=store) as client:  # another connection: resume from the store
        await client.initialize()
        await client.resume_session(sid)
        await client.prompt_and_wait(sid, "three")
        assert seen[-1] == ["one", "two", "three"]


async def test_clear_and_model_commands() -> None:
    seen: list[str] = []

    def model(name: str) -> FunctionModel:
        async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
            seen.append(name)
            yield f"{name} with {len(user_texts(messages))} prompts"
        return FunctionModel(stream_function=stream)

    agent = PydanticAIAgent(PydanticAgent(model("default")), models={"fast": model("fast"), "smart": model("smart")})
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        view = client.view(sid)
        assert [c["name"] for c in view.available_commands or []] == ["clear", "model"]
        assert (view.config_options or [])[0]["currentValue"] == "fast"
        await client.prompt_and_wait(sid, "one")
        await client.set_config_option(sid, "model", "smart")
        await client.prompt_and_wait(sid, "two")
        await client.prompt_and_wait(sid, "/model fast")
        assert (client.view(sid).config_options or [])[0]["currentValue"] == "fast"
        await client.prompt_and_wait(sid, "/clear")
        view = await client.prompt_and_wait(sid, "three")
        assert seen == ["fast", "smart", "fast"]
        assert list(view.messages().values())[-1] == "fast with 1 prompts"


def test_an_agent_without_the_bridge_never_imports_it() -> None:
    code = textwrap.dedent("""
        import sys
        import anyio
        import acp_agent, acp_agent.stdio
        from acp_agent.testing import connect_agent
        sys.path.insert(0, "examples")
        from echo_agent import EchoAgent

        async def main():
            async with connect_agent(EchoAgent()) as client:
                await client.initialize()
                sid = await client.new_session()
                await client.prompt_and_wait(sid, "hi")

        anyio.run(main)
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic_ai", "fastmcp", "mcp")
                     or m.startswith("acp_agent.integrations")))
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(ROOT), "ACP_AGENT_DATA_DIR": os.environ["ACP_AGENT_DATA_DIR"]})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_a_run_under_trio_is_refused_with_a_clear_error() -> None:
    agent = PydanticAIAgent(PydanticAgent(FunctionModel(stream_function=stream_nothing)))
    assert (await turn_error(agent))["message"].startswith("pydantic-ai runs on asyncio only")


async def stream_nothing(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    yield "never"
