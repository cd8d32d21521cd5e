"""[unstable] LLM providers the client configures: ``providers/list``, ``providers/set``, ``providers/disable``.

An agent declares the providers it routes its model calls through ([`Provider`][acp_agent.Provider]: an id, the
API protocols it speaks, whether it is required, the endpoint it uses now) in
`Agent.providers` and implements
`Agent.configure_provider`; the capability ``providers``
is then advertised. The SDK answers ``providers/list`` from the declaration and the endpoint set
since, and checks ``providers/set`` / ``providers/disable`` before the hook runs: an unknown
provider, a protocol the provider does not support, a ``baseUrl`` that is not an absolute URL (or
that carries credentials, ``user:password@``) and disabling a required provider are ``-32602``.

The ``headers`` of ``providers/set`` usually hold credentials. The SDK hands them to the hook in
[`ProviderSettings`][acp_agent.ProviderSettings] (whose ``repr`` leaves them out) and nowhere else: it keeps only the
non-secret ``apiType`` / ``baseUrl`` it reports in ``providers/list``, and never logs or echoes
headers (error messages and data name the provider, never a header or the URL): S7.

What a client configures is its principal's own: each principal (the user a served agent's token stands for) has
its own table of endpoints, and the hook learns whose change it applies from
[`configuring_principal`][acp_agent.configuring_principal], so one user's key never serves another's turns.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel

from . import schema
from ._wire.connection import Method
from .errors import RequestError

if TYPE_CHECKING:  # the wire models load with the routes (an agent without providers never needs them)
    from .schema import (
        DisableProviderRequest,
        DisableProviderResponse,
        ListProvidersRequest,
        ListProvidersResponse,
        ProviderCurrentConfig,
        SetProviderRequest,
        SetProviderResponse,
    )

__all__ = ["Provider", "ProviderSettings", "configuring_principal", "provider_routes"]

_CONFIGURING: contextvars.ContextVar[str] = contextvars.ContextVar("acp_provider_principal", default="default")


def configuring_principal() -> str:
    """[unstable] The principal whose ``providers/set`` or ``providers/disable`` ``Agent.configure_provider`` is
    applying now (``"default"`` over stdio and outside the hook): keep the settings for that principal only."""
    return _CONFIGURING.get()


@dataclass(frozen=True, slots=True)
class Provider:
    """[unstable] A configurable LLM provider, as the agent declares it in ``Agent.providers``.

    ``supported`` lists the API protocols it can speak (``"anthropic"``, ``"openai"``, ``"azure"``,
    ``"vertex"``, ``"bedrock"``, or ``"_custom"`` names). ``required`` providers cannot be disabled.
    ``api_type`` and ``base_url`` are the endpoint it uses before the client configures it (both
    ``None``: it starts disabled). Never put credentials here: this is what ``providers/list`` shows.
    """

    id: str
    supported: Sequence[str]
    required: bool = False
    api_type: str | None = None
    base_url: str | None = None

    def __post_init__(self) -> None:
        if (self.api_type is None) != (self.base_url is None):
            raise ValueError(f"provider {self.id!r}: give both api_type and base_url, or neither (disabled)")
        if isinstance(self.supported, str):
            raise TypeError(f"provider {self.id!r}: supported is a sequence of protocols, not one string")
        # The starting endpoint obeys what providers/set would be held to: providers/list shows it.
        if self.api_type is not None and self.api_type not in self.supported:
            raise ValueError(f"provider {self.id!r}: api_type {self.api_type!r} is not in supported")
        problem = base_url_problem(self.base_url) if self.base_url is not None else None
        if problem is not None:
            raise ValueError(f"provider {self.id!r}: {problem}")


def base_url_problem(base_url: str) -> str | None:
    """Why ``base_url`` cannot be a provider's endpoint (``None`` if it can); the URL itself is never named."""
    url = urlsplit(base_url)
    if not url.scheme or not url.netloc:
        return "baseUrl must be an absolute URL"
    if "@" in url.netloc:
        # providers/list shows the URL: credentials belong in headers.
        return "baseUrl must not carry credentials; send them in headers"
    return None


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """[unstable] The configuration ``providers/set`` gave a provider, for ``Agent.configure_provider``.

    ``headers`` is the complete header map to send with its requests (credentials, routing): keep it
    where your client needs it, and never log it (this object's ``repr`` leaves it out).
    """

    api_type: str
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    meta: dict[str, Any] | None = field(default=None, repr=False)
    """The request's ``_meta``."""


class _Table:
    """One agent's providers: the declaration and the endpoint each uses now."""

    def __init__(self, declared: Sequence[Provider]) -> None:
        self.declared = {p.id: p for p in declared}
        self.current: dict[str, ProviderCurrentConfig | None] = {
            p.id: schema.ProviderCurrentConfig(api_type=p.api_type, base_url=p.base_url)
            if p.api_type is not None and p.base_url is not None else None
            for p in declared
        }
        self._lock: tuple[anyio.lowlevel.EventLoopToken, anyio.Lock] | None = None

    def lock(self) -> anyio.Lock:
        """Changes one at a time, so what ``providers/list`` shows is what the last hook call was given."""
        token = anyio.lowlevel.current_token()
        if self._lock is None or self._lock[0] != token:
            self._lock = (token, anyio.Lock())  # the agent may outlive an event loop (tests)
        return self._lock[1]

    def find(self, provider_id: str) -> Provider:
        provider = self.declared.get(provider_id)
        if provider is None:
            raise RequestError.invalid_params("unknown provider", {"providerId": provider_id})
        return provider


Configure = Callable[[str, ProviderSettings | None], Awaitable[None]]
"""``Agent.configure_provider``."""

_tables: dict[tuple[int, str], _Table] = {}
"""Each agent's table per principal, by ``(id(agent), principal)`` (an agent class may be unhashable); dropped with
the agent."""


def provider_routes(owner: Any, providers: Sequence[Provider], configure: Configure,
                    principal: str = "default") -> dict[str, Method]:
    """The ``providers/*`` methods for ``providers``, configured through ``configure``.

    ``owner`` (the agent) holds the endpoints ``principal`` set: every connection of that principal sees the same,
    another principal's connections never do (``configure`` runs with
    [`configuring_principal`][acp_agent.configuring_principal] set to it).
    """
    def _table() -> _Table:
        key = (id(owner), principal)
        table = _tables.get(key)
        if table is None:
            table = _tables[key] = _Table(providers)
            weakref.finalize(owner, _tables.pop, key, None)
        return table

    async def apply(provider_id: str, settings: ProviderSettings | None) -> None:
        token = _CONFIGURING.set(principal)
        try:
            await configure(provider_id, settings)
        finally:
            _CONFIGURING.reset(token)

    async def list_providers(request: ListProvidersRequest) -> ListProvidersResponse:
        table = _table()
        infos = []
        for provider in table.declared.values():
            fields: dict[str, Any] = {"provider_id": provider.id, "supported": list(provider.supported),
                                      "required": provider.required}
            current = table.current[provider.id]
            if current is not None:
                fields["current"] = current
            infos.append(schema.ProviderInfo(**fields))
        return schema.ListProvidersResponse(providers=infos)

    async def set_provider(request: SetProviderRequest) -> SetProviderResponse:
        table = _table()
        provider = table.find(request.provider_id)
        if request.api_type not in provider.supported:
            raise RequestError.invalid_params("the provider does not support this apiType",
                                              {"providerId": provider.id, "apiType": request.api_type})
        problem = base_url_problem(request.base_url)
        if problem is not None:
            raise RequestError.invalid_params(problem, {"providerId": provider.id})
        settings = ProviderSettings(request.api_type, request.base_url, dict(request.headers), request.meta)
        async with table.lock():
            await apply(provider.id, settings)
            table.current[provider.id] = schema.ProviderCurrentConfig(api_type=request.api_type,
                                                                      base_url=request.base_url)
        return schema.SetProviderResponse()

    async def disable_provider(request: DisableProviderRequest) -> DisableProviderResponse:
        table = _table()
        provider = table.find(request.provider_id)
        if provider.required:
            raise RequestError.invalid_params("a required provider cannot be disabled", {"providerId": provider.id})
        async with table.lock():
            await apply(provider.id, None)
            table.current[provider.id] = None
        return schema.DisableProviderResponse()

    return {
        "providers/list": Method(list_providers, "ListProvidersRequest"),
        "providers/set": Method(set_provider, "SetProviderRequest"),
        "providers/disable": Method(disable_provider, "DisableProviderRequest"),
    }
