import pytest

from acp_agent.testing import connect_agent
from docs_src.providers import RoutedAgent

pytestmark = pytest.mark.anyio  # every test on each anyio backend installed


async def test_a_gateway_replaces_the_endpoint() -> None:
    async with connect_agent(RoutedAgent()) as client:
        assert "providers" in (await client.initialize())["capabilities"]
        await client.request("providers/set", {"providerId": "main", "apiType": "openai",
                                               "baseUrl": "https://gateway.example/v1",
                                               "headers": {"Authorization": "Bearer sk-..."}})
        await client.request("providers/disable", {"providerId": "embeddings"})
        [main, embeddings] = (await client.request("providers/list", {}))["providers"]
        assert main["current"] == {"apiType": "openai", "baseUrl": "https://gateway.example/v1"}
        assert "current" not in embeddings  # disabled
