import sys
from pathlib import Path

import pytest

from acp_agent.testing import Client

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).resolve().parents[1] / "examples" / "background_agent.py"  # found from any directory


@pytest.mark.acp_agent(agent=[sys.executable, str(AGENT)])
async def test_watch_is_listed_then_cancelled(acp_client: Client) -> None:
    sid = await acp_client.new_session("/tmp")
    await acp_client.prompt_and_wait(sid, "/watch 30")
    view = acp_client.view(sid)
    [item] = view.background or []  # wire dicts, camelCase keys as on the wire
    assert item["type"] == "tool_call"
    await acp_client.cancel_tool_call(sid, item["toolCallId"])
    await acp_client.wait_for(lambda: view.background == [])
