"""The method tables: which params / result model belongs to each JSON-RPC method, who handles it, which session
it names (`acp_agent.schema.session_reach`).

The models themselves live in their topic modules and are re-exported here and from
[`acp_agent.schema`][acp_agent.schema]. Envelopes (``jsonrpc``, ``id``, ``method``) are not modelled.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

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
from .session_reach import SESSION_REACH, SessionReach
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


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One JSON-RPC method: its params model, its result model (``None`` for notifications), its handler, and for
    a method the agent handles, which session its ``sessionId`` names (``None``: none; the column is
    `acp_agent.schema.session_reach`)."""

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
    *specs: tuple[str, type[WireModel], type[WireModel] | None],
) -> Mapping[str, MethodSpec]:
    return MappingProxyType(
        {name: MethodSpec(name, params, result, handled_by, SESSION_REACH.get(name) if handled_by == "agent" else None)
         for name, params, result in specs}
    )


AGENT_METHODS: Mapping[str, MethodSpec] = _table(
    "agent",
    ("initialize", InitializeRequest, InitializeResponse),
    ("auth/login", LoginAuthRequest, LoginAuthResponse),
    ("auth/logout", LogoutAuthRequest, LogoutAuthResponse),
    ("auth/status", AuthStatusRequest, AuthStatusResponse),
    ("session/new", NewSessionRequest, NewSessionResponse),
    ("session/list", ListSessionsRequest, ListSessionsResponse),
    ("session/resume", ResumeSessionRequest, ResumeSessionResponse),
    ("session/close", CloseSessionRequest, CloseSessionResponse),
    ("session/fork", ForkSessionRequest, ForkSessionResponse),
    ("session/delete", DeleteSessionRequest, DeleteSessionResponse),
    ("session/archive", ArchiveSessionRequest, ArchiveSessionResponse),
    ("session/unarchive", UnarchiveSessionRequest, UnarchiveSessionResponse),
    ("session/status", SessionStatusRequest, SessionStatusResponse),
    ("session/set_title", SetSessionTitleRequest, SetSessionTitleResponse),
    ("session/set_config_option", SetSessionConfigOptionRequest, SetSessionConfigOptionResponse),
    ("session/prompt", PromptRequest, PromptResponse),
    ("session/cancel", CancelSessionNotification, None),
    ("tool_call/cancel", CancelToolCallRequest, CancelToolCallResponse),
    ("terminal/cancel", CancelTerminalRequest, CancelTerminalResponse),
    ("providers/list", ListProvidersRequest, ListProvidersResponse),
    ("providers/set", SetProviderRequest, SetProviderResponse),
    ("providers/disable", DisableProviderRequest, DisableProviderResponse),
    ("mcp/message", MessageMcpNotification, None),
)
"""Methods the Agent handles (the Client sends them), by method name."""

CLIENT_METHODS: Mapping[str, MethodSpec] = _table(
    "client",
    ("session/update", UpdateSessionNotification, None),
    ("session/request_permission", RequestPermissionRequest, RequestPermissionResponse),
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
