"""``initialize`` and authentication: ``auth/login``, ``auth/logout`` and [unstable] ``auth/status``."""

from typing import Annotated, Literal, TypeAlias

from pydantic import Field, Tag

from .base import UNKNOWN_TAG, EmptyIfNull, Meta, ProtocolVersion, WireModel, discriminate_on
from .capabilities import AgentCapabilities, ClientCapabilities

__all__ = [
    "AuthAccount",
    "AuthMethod",
    "AuthMethodAgent",
    "AuthMethodTerminal",
    "AuthState",
    "AuthStatusRequest",
    "AuthStatusResponse",
    "AuthStatusUpdateNotification",
    "EnvVariable",
    "Implementation",
    "InitializeRequest",
    "InitializeResponse",
    "LoginAuthRequest",
    "LoginAuthResponse",
    "LogoutAuthRequest",
    "LogoutAuthResponse",
    "UnknownAuthMethod",
]

AuthState: TypeAlias = Literal["authenticated", "unauthenticated", "not_required", "unknown"] | str
"""[unstable] Whether the Agent currently holds valid credentials."""


class EnvVariable(WireModel):
    """An environment variable to set for a launched process."""

    name: str
    value: str
    meta: Meta = None


class Implementation(WireModel):
    """Name and version of a Client or Agent implementation (``title`` is the display name)."""

    name: str
    title: str | None = None
    version: str
    meta: Meta = None


# --------------------------------------------------------------------------- auth methods


class AuthMethodAgent(WireModel):
    """Auth method the Agent runs itself when the Client calls ``auth/login``."""

    type: Literal["agent"] = "agent"
    method_id: str
    name: str
    description: str | None = None
    meta: Meta = None


class AuthMethodTerminal(WireModel):
    """Auth method the Client runs by re-launching the Agent's command (plus ``args``/``env``) itself.

    Offer it only when the Client advertised ``capabilities.auth.terminal``.
    """

    type: Literal["terminal"] = "terminal"
    method_id: str
    name: str
    description: str | None = None
    args: Annotated[list[str], EmptyIfNull] = Field(default_factory=list)
    env: Annotated[list[EnvVariable], EmptyIfNull] = Field(default_factory=list)
    meta: Meta = None


class UnknownAuthMethod(WireModel):
    """An auth method of an unknown ``type``, kept as received."""

    type: str
    method_id: str
    name: str


AuthMethod: TypeAlias = Annotated[
    Annotated[AuthMethodAgent, Tag("agent")]
    | Annotated[AuthMethodTerminal, Tag("terminal")]
    | Annotated[UnknownAuthMethod, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("agent", "terminal")),
]
"""A way to authenticate, tagged by ``type``."""


# --------------------------------------------------------------------------- initialize


class InitializeRequest(WireModel):
    """Params of ``initialize``: the newest protocol version the Client speaks, and its capabilities."""

    protocol_version: ProtocolVersion
    info: Implementation
    capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    meta: Meta = None


class InitializeResponse(WireModel):
    """Result of ``initialize``: the selected version, the Agent's identity, capabilities and auth methods."""

    protocol_version: ProtocolVersion
    info: Implementation
    capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    auth_methods: list[AuthMethod] = Field(default_factory=list)
    meta: Meta = None


# --------------------------------------------------------------------------- auth/*


class LoginAuthRequest(WireModel):
    """Params of ``auth/login``: the id of an advertised auth method."""

    method_id: str
    meta: Meta = None


class LoginAuthResponse(WireModel):
    """Result of ``auth/login`` (``{}``)."""

    meta: Meta = None


class LogoutAuthRequest(WireModel):
    """Params of ``auth/logout`` (``{}``)."""

    meta: Meta = None


class LogoutAuthResponse(WireModel):
    """Result of ``auth/logout`` (``{}``)."""

    meta: Meta = None


class AuthAccount(WireModel):
    """[unstable] An account the Agent is (or could be) signed in with."""

    label: str
    active: bool | None = None
    name: str | None = None
    email: str | None = None
    organization: str | None = None
    meta: Meta = None


class AuthStatusRequest(WireModel):
    """[unstable] Params of ``auth/status`` (``{}``)."""

    meta: Meta = None


class AuthStatusResponse(WireModel):
    """[unstable] Result of ``auth/status``: the current auth state and known accounts."""

    state: AuthState
    accounts: list[AuthAccount] = Field(default_factory=list)
    meta: Meta = None


class AuthStatusUpdateNotification(WireModel):
    """[unstable] Params of ``auth/status_update`` (Agent -> Client): the auth state changed."""

    state: AuthState
    accounts: list[AuthAccount] = Field(default_factory=list)
    meta: Meta = None
