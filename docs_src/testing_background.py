import sys

import pytest

from acp_agent.testing import Client

pytestmark = pytest.mark.anyio


@pytest.mark.acp_agent(agent=[sys.executable, "examples/background_agent.py"])
async def test_watch_is_listed_then_cancelled(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    await acp_client.prompt_and_wait(sid, "/watch 30")
    view = acp_client.view(sid)
    [item] = view.background or []
    assert item["type"] == "tool_call"
    await acp_client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": item["toolCallId"]})
    await acp_client.wait_for(lambda: view.background == [])
