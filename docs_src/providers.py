from collections.abc import Mapping

from acp_agent import Agent, Provider, ProviderSettings


def make_client(api_type: str, base_url: str, headers: Mapping[str, str]) -> object:
    """Your own LLM client factory (here: just the settings)."""
    return (api_type, base_url, dict(headers))


class RoutedAgent(Agent):
    name = "routed-agent"
    providers = (
        Provider("main", supported=("anthropic", "openai"), required=True,
                 api_type="anthropic", base_url="https://api.anthropic.com"),  # what it uses now
        Provider("embeddings", supported=("openai",)),  # starts disabled
    )

    def __init__(self) -> None:
        self.clients: dict[str, object] = {}

    async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
        if settings is None:  # providers/disable
            self.clients.pop(provider_id, None)
        else:  # providers/set: the full new configuration
            self.clients[provider_id] = make_client(settings.api_type, settings.base_url, settings.headers)
