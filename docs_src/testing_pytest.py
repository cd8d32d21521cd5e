import pytest

from acp_agent.testing import Client
from docs_src.first_agent import EchoAgent

pytestmark = pytest.mark.anyio  # anyio runs each test on every backend installed (asyncio, trio)


@pytest.mark.acp_agent(agent=EchoAgent)
async def test_echo(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    view = await acp_client.prompt_and_wait(sid, "hello")
    assert list(view.messages().values()) == ["hello"]
    assert view.stop_reason == "end_turn"
