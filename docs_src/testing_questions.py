import pytest

from acp_agent.testing import connect_agent
from docs_src.asking import MigrationAgent
from docs_src.login_agent import LoginAgent

pytestmark = pytest.mark.anyio


async def test_login_asks_for_a_name() -> None:
    answer = {"action": "accept", "content": {"name": "Ada"}}
    async with connect_agent(LoginAgent(), elicitation_policy=lambda params: answer) as client:
        await client.initialize(capabilities={"elicitation": {"form": {}, "url": {}}})  # forms and URLs
        await client.request("auth/login", {"methodId": "agent-login"})
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "hi")
        assert list(view.messages().values()) == ["Hello, Ada."]


async def test_answer_a_question_by_hand() -> None:
    async with connect_agent(MigrationAgent()) as client:  # no elicitation_policy: questions are held
        await client.initialize(capabilities={"elicitation": {"form": {}}})
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "migrate")  # returns at insertion; the turn waits for the answer
        await client.wait_for(lambda: 0 in client.pending_elicitations)
        client.answer_elicitation(0, "accept", {"db": "staging"})
        view = await client.wait_idle(sid)
        assert list(view.messages().values()) == ["Migrating staging."]
