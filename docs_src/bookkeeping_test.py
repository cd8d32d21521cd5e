import pytest

from acp_agent.testing import connect_agent
from docs_src.first_agent import EchoAgent as MyAgent

pytestmark = pytest.mark.anyio  # every test on each anyio backend installed


async def test_title_archive_status() -> None:
    async with connect_agent(MyAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        answer = await client.request("session/set_title", {"sessionId": sid, "title": " Fix login "})
        assert answer == {"title": "Fix login"}
        infos = [u for u in client.view(sid).updates if u["sessionUpdate"] == "session_info_update"]
        assert infos[-1]["title"] == "Fix login"  # the open session was told
        assert (await client.request("session/status", {"sessionId": sid}))["status"] == "open"
        await client.request("session/archive", {"sessionId": sid})  # closed, hidden from the default list
        assert [s["sessionId"] for s in await client.list_sessions(archived="only")] == [sid]
        assert (await client.request("session/status", {"sessionId": sid})) == {"status": "saved"}
        await client.request("session/unarchive", {"sessionId": sid})
