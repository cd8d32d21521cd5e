"""Testing a pydantic-ai agent offline: a scripted ``FunctionModel`` behind ``PydanticAIAgent``."""

from collections.abc import AsyncIterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from acp_agent.integrations.pydantic_ai import PydanticAIAgent
from acp_agent.testing import connect_agent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    last = messages[-1]
    if isinstance(last, ModelRequest) and isinstance(last.parts[0], ToolReturnPart):
        yield f"Done: {last.parts[0].content}"  # the model saw the tool's answer
    else:
        yield {0: DeltaToolCall(name="deploy", json_args='{"environment": "staging"}')}


async def test_deploy_asks_first() -> None:
    assistant = Agent(FunctionModel(stream_function=model))

    @assistant.tool_plain(requires_approval=True)
    def deploy(environment: str) -> str:
        return f"deployed to {environment}"

    async with connect_agent(PydanticAIAgent(assistant), permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "ship it")
        await client.wait_for(lambda: bool(client.pending_permissions))  # the tool has not run yet
        client.answer_permission(0, "allow_once")
        view = await client.wait_idle(sid)
        (tool,) = view.tool_calls.values()
        assert (tool["title"], tool["kind"], tool["status"]) == ("deploy", "other", "completed")
        assert list(view.messages().values()) == ["Done: deployed to staging"]
