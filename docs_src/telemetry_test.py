import pytest

from acp_agent.testing import connect_agent
from docs_src.telemetry_agent import traced

pytestmark = pytest.mark.anyio


async def test_the_turn_is_traced() -> None:
    agent, exporter = traced()  # Coder with OpenTelemetry over an in-memory exporter
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "run the tests")
    names = {span.name for span in exporter.get_finished_spans()}
    assert {"session/prompt", "invoke_agent coder", "execute_tool bash", "session/request_permission",
            "terminal"} <= names

