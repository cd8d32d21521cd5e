"""The pydantic-ai bridge as a docs-only trial met it (notes/trial-site.md 8): a plain-function command handler, which
failed with "object str can't be used in 'await'" (the client saw -32603) before the fix."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage

from acp_agent.integrations.pydantic_ai import Command, PydanticAIAgent
from tests.helpers.pydantic_ai_models import checked, scripted, user_texts

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


async def test_a_plain_function_command_handler_works() -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted(["hello Ada"], seen)),
                            commands={"greet": Command("Greet someone", lambda session, args: f"Greet {args}.")})
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "/greet Ada")
        assert view.stop_reason == "end_turn"
        assert user_texts(seen[0]) == ["Greet Ada."]
