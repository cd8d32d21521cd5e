"""The method tables: which params / result model belongs to each JSON-RPC method, who handles it, which session
it names.

The models themselves live in their topic modules and are re-exported here and from
[`acp_agent.schema`][acp_agent.schema]. Envelopes (``jsonrpc``, ``id``, ``method``) are not modelled.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from .base import WireModel
from .elicitation import (
    CompleteElicitationNotification,
    CreateElicitationRequest,
    CreateElicitationResponse,
)
from .errors import Error, SessionNotFoundErrorData, UnsupportedProtocolVersionErrorData
from .initialize import (
    AuthStatusRequest,
    AuthStatusResponse,
    AuthStatusUpdateNotification,
    InitializeRequest,
    InitializeResponse,
    LoginAuthRequest,
    LoginAuthResponse,
    LogoutAuthRequest,
    LogoutAuthResponse,
)
from .mcp import MessageMcpNotification, MessageMcpRequest, MessageMcpResponse
from .permissions import RequestPermissionRequest, RequestPermissionResponse
from .prompts import (
    CancelRequestNotification,
    CancelSessionNotification,
    CancelTerminalRequest,
    CancelTerminalResponse,
    CancelToolCallRequest,
    CancelToolCallResponse,
    PromptRequest,
    PromptResponse,
)
from .providers import (
    DisableProviderRequest,
    DisableProviderResponse,
    ListProvidersRequest,
    ListProvidersResponse,
    SetProviderRequest,
    SetProviderResponse,
)
from .sessions import (
    ArchiveSessionRequest,
    ArchiveSessionResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    DeleteSessionRequest,
    DeleteSessionResponse,
    ForkSessionRequest,
    ForkSessionResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    NewSessionRequest,
    NewSessionResponse,
    ResumeSessionRequest,
    ResumeSessionResponse,
    SessionStatusRequest,
    SessionStatusResponse,
    SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
    SetSessionTitleRequest,
    SetSessionTitleResponse,
    UnarchiveSessionRequest,
    UnarchiveSessionResponse,
)
from .updates import UpdateSessionNotification

__all__ = [
    "AGENT_METHODS",
    "CLIENT_METHODS",
    "PROTOCOL_METHODS",
    "SESSION_METHODS",
    "STORED_SESSION_METHODS",
    "ArchiveSessionRequest",
    "ArchiveSessionResponse",
    "AuthStatusRequest",
    "AuthStatusResponse",
    "AuthStatusUpdateNotification",
    "CancelRequestNotification",
    "CancelSessionNotification",
    "CancelTerminalRequest",
    "CancelTerminalResponse",
    "CancelToolCallRequest",
    "CancelToolCallResponse",
    "CloseSessionRequest",
    "CloseSessionResponse",
    "CompleteElicitationNotification",
    "CreateElicitationRequest",
    "CreateElicitationResponse",
    "DeleteSessionRequest",
    "DeleteSessionResponse",
    "DisableProviderRequest",
    "DisableProviderResponse",
    "Error",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "InitializeRequest",
    "InitializeResponse",
    "ListProvidersRequest",
    "ListProvidersResponse",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "LoginAuthRequest",
    "LoginAuthResponse",
    "LogoutAuthRequest",
    "LogoutAuthResponse",
    "MessageMcpNotification",
    "MessageMcpRequest",
    "MessageMcpResponse",
    "MethodSpec",
    "NewSessionRequest",
    "NewSessionResponse",
    "PromptRequest",
    "PromptResponse",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
    "ResumeSessionRequest",
    "ResumeSessionResponse",
    "SessionNotFoundErrorData",
    "SessionReach",
    "SessionStatusRequest",
    "SessionStatusResponse",
    "SetProviderRequest",
    "SetProviderResponse",
    "SetSessionConfigOptionRequest",
    "SetSessionConfigOptionResponse",
    "SetSessionTitleRequest",
    "SetSessionTitleResponse",
    "UnarchiveSessionRequest",
    "UnarchiveSessionResponse",
    "UnsupportedProtocolVersionErrorData",
    "UpdateSessionNotification",
]


SessionReach = Literal["open", "stored"]
"""Which session a method's ``sessionId`` may name: ``"open"``, only one open on the connection that sends it;
``"stored"``, also one active on another connection or only stored (so whose it is must be checked first)."""


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One JSON-RPC method: its params model, its result model (``None`` for notifications), its handler, and
    which session its required ``sessionId`` names (``None``: it names none)."""

    method: str
    params: type[WireModel]
    result: type[WireModel] | None
    handled_by: Literal["agent", "client", "protocol"]
    session: SessionReach | None = None

    @property
    def is_notification(self) -> bool:
        """Whether the method is a notification (no ``id``, never answered)."""
        return self.result is None


def _table(
    handled_by: Literal["agent", "client", "protocol"],
    *specs: tuple[str, type[WireModel], type[WireModel] | None]
    | tuple[str, type[WireModel], type[WireModel] | None, SessionReach],
) -> Mapping[str, MethodSpec]:
    return MappingProxyType(
        {spec[0]: MethodSpec(spec[0], spec[1], spec[2], handled_by, spec[3] if len(spec) == 4 else None)
         for spec in specs}
    )


AGENT_METHODS: Mapping[str, MethodSpec] = _table(
    "agent",
    ("initialize", InitializeRequest, InitializeResponse),
    ("auth/login", LoginAuthRequest, LoginAuthResponse),
    ("auth/logout", LogoutAuthRequest, LogoutAuthResponse),
    ("auth/status", AuthStatusRequest, AuthStatusResponse),
    ("session/new", NewSessionRequest, NewSessionResponse),
    ("session/list", ListSessionsRequest, ListSessionsResponse),
    ("session/resume", ResumeSessionRequest, ResumeSessionResponse, "stored"),
    ("session/close", CloseSessionRequest, CloseSessionResponse, "open"),
    ("session/fork", ForkSessionRequest, ForkSessionResponse, "open"),
    ("session/delete", DeleteSessionRequest, DeleteSessionResponse, "stored"),
    ("session/archive", ArchiveSessionRequest, ArchiveSessionResponse, "stored"),
    ("session/unarchive", UnarchiveSessionRequest, UnarchiveSessionResponse, "stored"),
    ("session/status", SessionStatusRequest, SessionStatusResponse, "stored"),
    ("session/set_title", SetSessionTitleRequest, SetSessionTitleResponse, "stored"),
    ("session/set_config_option", SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, "open"),
    ("session/prompt", PromptRequest, PromptResponse, "open"),
    ("session/cancel", CancelSessionNotification, None, "open"),
    ("tool_call/cancel", CancelToolCallRequest, CancelToolCallResponse, "open"),
    ("terminal/cancel", CancelTerminalRequest, CancelTerminalResponse, "open"),
    ("providers/list", ListProvidersRequest, ListProvidersResponse),
    ("providers/set", SetProviderRequest, SetProviderResponse),
    ("providers/disable", DisableProviderRequest, DisableProviderResponse),
    ("mcp/message", MessageMcpNotification, None),
)
"""Methods the Agent handles (the Client sends them), by method name."""

CLIENT_METHODS: Mapping[str, MethodSpec] = _table(
    "client",
    ("session/update", UpdateSessionNotification, None, "open"),
    ("session/request_permission", RequestPermissionRequest, RequestPermissionResponse, "open"),
    ("elicitation/create", CreateElicitationRequest, CreateElicitationResponse),
    ("elicitation/complete", CompleteElicitationNotification, None),
    ("auth/status_update", AuthStatusUpdateNotification, None),
    ("mcp/message", MessageMcpRequest, MessageMcpResponse),
)
"""Methods the Client handles (the Agent sends them), by method name."""

PROTOCOL_METHODS: Mapping[str, MethodSpec] = _table(
    "protocol",
    ("$/cancel_request", CancelRequestNotification, None),
)
"""Methods either side may send and handle."""


SESSION_METHODS: Final = frozenset(name for name, spec in AGENT_METHODS.items() if spec.session is not None)
"""The methods a client sends that name a session (their ``sessionId`` is required): the HTTP transport requires
``Acp-Session-Id`` on them."""

STORED_SESSION_METHODS: Final = frozenset(name for name, spec in AGENT_METHODS.items() if spec.session == "stored")
"""The methods a client sends that may reach a session beyond its connection (active on another one, or only
stored): the runtime first treats a session of another principal exactly as an unknown id."""
