"""[unstable] LLM provider configuration: ``providers/list``, ``providers/set``, ``providers/disable``."""

from typing import Literal, TypeAlias

from pydantic import Field

from .base import Meta, WireModel

__all__ = [
    "DisableProviderRequest",
    "DisableProviderResponse",
    "ListProvidersRequest",
    "ListProvidersResponse",
    "LlmProtocol",
    "ProviderCurrentConfig",
    "ProviderInfo",
    "SetProviderRequest",
    "SetProviderResponse",
]

LlmProtocol: TypeAlias = Literal["anthropic", "openai", "azure", "vertex", "bedrock"] | str
"""[unstable] The API dialect spoken by an LLM endpoint."""


class ProviderCurrentConfig(WireModel):
    """[unstable] The endpoint a provider currently uses."""

    api_type: LlmProtocol
    base_url: str
    meta: Meta = None


class ProviderInfo(WireModel):
    """[unstable] A configurable provider: its protocols, whether it is required, its current endpoint."""

    provider_id: str
    supported: list[LlmProtocol]
    required: bool
    current: ProviderCurrentConfig | None = None
    meta: Meta = None


class ListProvidersRequest(WireModel):
    """[unstable] Params of ``providers/list`` (``{}``)."""

    meta: Meta = None


class ListProvidersResponse(WireModel):
    """[unstable] Result of ``providers/list``."""

    providers: list[ProviderInfo]
    meta: Meta = None


class SetProviderRequest(WireModel):
    """[unstable] Params of ``providers/set``: replace a provider's endpoint configuration."""

    provider_id: str
    api_type: LlmProtocol
    base_url: str
    headers: dict[str, str] = Field(default_factory=dict)
    meta: Meta = None


class SetProviderResponse(WireModel):
    """[unstable] Result of ``providers/set`` (``{}``)."""

    meta: Meta = None


class DisableProviderRequest(WireModel):
    """[unstable] Params of ``providers/disable``."""

    provider_id: str
    meta: Meta = None


class DisableProviderResponse(WireModel):
    """[unstable] Result of ``providers/disable`` (``{}``)."""

    meta: Meta = None
