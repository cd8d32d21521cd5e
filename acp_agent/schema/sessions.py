"""Session lifecycle methods: new, resume, close, fork, list, delete, config options, and the
[unstable] archive / status / title methods -- with MCP server, system prompt and replay types.
"""

from typing import Annotated, Literal, Self, TypeAlias

from pydantic import Field, Tag, model_validator

from .base import UNKNOWN_TAG, AbsolutePath, EmptyIfNull, Meta, SessionId, WireModel, discriminate_on
from .config import AvailableCommand, SessionConfigOption, SessionConfigValue
from .content import ContentBlock
from .initialize import EnvVariable
from .state import NestedStateUpdate

__all__ = [
    "ArchiveSessionRequest",
    "ArchiveSessionResponse",
    "CloseSessionRequest",
    "CloseSessionResponse",
    "DeleteSessionRequest",
    "DeleteSessionResponse",
    "EnvVariable",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "HttpHeader",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "McpServer",
    "McpServerAcp",
    "McpServerHttp",
    "McpServerStdio",
    "NewSessionRequest",
    "NewSessionResponse",
    "ReplayFrom",
    "ReplayFromStart",
    "ResumeSessionRequest",
    "ResumeSessionResponse",
    "SessionArchiveFilter",
    "SessionInfo",
    "SessionStatus",
    "SessionStatusRequest",
    "SessionStatusResponse",
    "SetSessionConfigOptionRequest",
    "SetSessionConfigOptionResponse",
    "SetSessionTitleRequest",
    "SetSessionTitleResponse",
    "SystemPrompt",
    "SystemPromptMode",
    "UnarchiveSessionRequest",
    "UnarchiveSessionResponse",
    "UnknownMcpServer",
    "UnknownReplayFrom",
]

SystemPromptMode: TypeAlias = Literal["append", "override"] | str
"""[unstable] How a Client system prompt combines with the Agent's own."""

SessionArchiveFilter: TypeAlias = Literal["exclude", "include", "only"] | str
"""[unstable] Which sessions ``session/list`` returns with respect to archiving."""

SessionStatus: TypeAlias = Literal["open", "saved"] | str
"""[unstable] Whether a session is open on this connection or only stored."""


# --------------------------------------------------------------------------- shared pieces


class HttpHeader(WireModel):
    """An HTTP header to send to an HTTP MCP server."""

    name: str
    value: str
    meta: Meta = None


class McpServerStdio(WireModel):
    """An MCP server the Agent launches and talks to over stdio (``command`` is absolute)."""

    type: Literal["stdio"] = "stdio"
    name: str
    command: AbsolutePath
    args: Annotated[list[str], EmptyIfNull] = Field(default_factory=list)
    env: Annotated[list[EnvVariable], EmptyIfNull] = Field(default_factory=list)
    meta: Meta = None


class McpServerHttp(WireModel):
    """An MCP server the Agent reaches over streamable HTTP."""

    type: Literal["http"] = "http"
    name: str
    url: str
    headers: Annotated[list[HttpHeader], EmptyIfNull] = Field(default_factory=list)
    meta: Meta = None


class McpServerAcp(WireModel):
    """[unstable] An MCP server provided by the Client over ACP itself (``mcp/message``)."""

    type: Literal["acp"] = "acp"
    name: str
    server_id: str
    meta: Meta = None


class UnknownMcpServer(WireModel):
    """An MCP server of an unknown transport ``type`` (the Agent must reject it with ``-32602``)."""

    type: str


McpServer: TypeAlias = Annotated[
    Annotated[McpServerStdio, Tag("stdio")]
    | Annotated[McpServerHttp, Tag("http")]
    | Annotated[McpServerAcp, Tag("acp")]
    | Annotated[UnknownMcpServer, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("stdio", "http", "acp")),
]
"""An MCP server the Client asks the Agent to connect to, tagged by ``type``."""

_Directories: TypeAlias = Annotated[list[AbsolutePath], EmptyIfNull]
_McpServers: TypeAlias = Annotated[list[McpServer], EmptyIfNull]


class SystemPrompt(WireModel):
    """[unstable] Client system prompt content (``append`` always allowed, ``override`` if advertised)."""

    mode: SystemPromptMode
    content: list[ContentBlock]
    meta: Meta = None


class ReplayFromStart(WireModel):
    """Replay cursor: replay all retained history."""

    type: Literal["start"] = "start"
    meta: Meta = None


class UnknownReplayFrom(WireModel):
    """A replay cursor of an unknown ``type`` (the Agent must reject it with ``-32602``)."""

    type: str


ReplayFrom: TypeAlias = Annotated[
    Annotated[ReplayFromStart, Tag("start")] | Annotated[UnknownReplayFrom, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("start",)),
]
"""Where ``session/resume`` starts replaying history, tagged by ``type``."""


# --------------------------------------------------------------------------- session/new, resume, fork


class NewSessionRequest(WireModel):
    """Params of ``session/new``."""

    cwd: AbsolutePath
    additional_directories: _Directories = Field(default_factory=list)
    mcp_servers: _McpServers = Field(default_factory=list)
    system_prompt: SystemPrompt | None = None
    meta: Meta = None


class NewSessionResponse(WireModel):
    """Result of ``session/new``: the fresh session id plus initial options and commands."""

    session_id: SessionId
    config_options: list[SessionConfigOption] = Field(default_factory=list)
    available_commands: list[AvailableCommand] = Field(default_factory=list)
    meta: Meta = None


class ResumeSessionRequest(WireModel):
    """Params of ``session/resume``: restore a session, replaying history only if ``replay_from`` says so."""

    session_id: SessionId
    cwd: AbsolutePath
    additional_directories: _Directories = Field(default_factory=list)
    mcp_servers: _McpServers = Field(default_factory=list)
    replay_from: ReplayFrom | None = None
    system_prompt: SystemPrompt | None = None
    meta: Meta = None


class ResumeSessionResponse(WireModel):
    """Result of ``session/resume``."""

    config_options: list[SessionConfigOption] = Field(default_factory=list)
    available_commands: list[AvailableCommand] = Field(default_factory=list)
    meta: Meta = None


class ForkSessionRequest(WireModel):
    """[unstable] Params of ``session/fork``: copy a session's conversation into a new session."""

    session_id: SessionId
    cwd: AbsolutePath
    additional_directories: _Directories = Field(default_factory=list)
    mcp_servers: _McpServers = Field(default_factory=list)
    system_prompt: SystemPrompt | None = None
    meta: Meta = None


class ForkSessionResponse(WireModel):
    """[unstable] Result of ``session/fork``: the new session's id plus its options and commands."""

    session_id: SessionId
    config_options: list[SessionConfigOption] = Field(default_factory=list)
    available_commands: list[AvailableCommand] = Field(default_factory=list)
    meta: Meta = None


# --------------------------------------------------------------------------- close, delete, list


class CloseSessionRequest(WireModel):
    """Params of ``session/close``."""

    session_id: SessionId
    meta: Meta = None


class CloseSessionResponse(WireModel):
    """Result of ``session/close`` (``{}``)."""

    meta: Meta = None


class DeleteSessionRequest(WireModel):
    """Params of ``session/delete``."""

    session_id: SessionId
    meta: Meta = None


class DeleteSessionResponse(WireModel):
    """Result of ``session/delete`` (``{}``)."""

    meta: Meta = None


class ListSessionsRequest(WireModel):
    """Params of ``session/list``: optional exact-``cwd`` filter and pagination cursor."""

    cwd: AbsolutePath | None = None
    cursor: str | None = None
    archived: SessionArchiveFilter | None = None
    meta: Meta = None


class SessionInfo(WireModel):
    """One entry of ``session/list``."""

    session_id: SessionId
    cwd: AbsolutePath
    additional_directories: _Directories = Field(default_factory=list)
    title: str | None = None
    updated_at: str | None = None
    archived: bool | None = None
    meta: Meta = None


class ListSessionsResponse(WireModel):
    """Result of ``session/list``; ``next_cursor`` omitted or ``None`` means no more pages."""

    sessions: list[SessionInfo]
    next_cursor: str | None = None
    meta: Meta = None


# --------------------------------------------------------------------------- config options


class SetSessionConfigOptionRequest(WireModel):
    """Params of ``session/set_config_option``: ``type="id"`` + a value id, or ``type="boolean"`` + a bool.

    A ``value`` that does not fit a known ``type`` fails validation, as it does against the
    schema; other ``type`` values take any ``value``.
    """

    session_id: SessionId
    config_id: str
    type: Literal["id", "boolean"] | str
    value: SessionConfigValue
    meta: Meta = None

    @model_validator(mode="after")
    def _value_fits_type(self) -> Self:
        if self.type == "id" and not isinstance(self.value, str):
            raise ValueError('type "id" takes a string value (a value id)')
        if self.type == "boolean" and not isinstance(self.value, bool):
            raise ValueError('type "boolean" takes a boolean value')
        return self


class SetSessionConfigOptionResponse(WireModel):
    """Result of ``session/set_config_option``: the complete current option list."""

    config_options: list[SessionConfigOption]
    meta: Meta = None


# ------------------------------------------------------------------ [unstable] archive, status, title


class ArchiveSessionRequest(WireModel):
    """[unstable] Params of ``session/archive``."""

    session_id: SessionId
    meta: Meta = None


class ArchiveSessionResponse(WireModel):
    """[unstable] Result of ``session/archive`` (``{}``)."""

    meta: Meta = None


class UnarchiveSessionRequest(WireModel):
    """[unstable] Params of ``session/unarchive``."""

    session_id: SessionId
    meta: Meta = None


class UnarchiveSessionResponse(WireModel):
    """[unstable] Result of ``session/unarchive`` (``{}``)."""

    meta: Meta = None


class SessionStatusRequest(WireModel):
    """[unstable] Params of ``session/status`` (read-only)."""

    session_id: SessionId
    meta: Meta = None


class SessionStatusResponse(WireModel):
    """[unstable] Result of ``session/status``; include ``state`` when the session is ``open``."""

    status: SessionStatus
    state: NestedStateUpdate | None = None
    meta: Meta = None


class SetSessionTitleRequest(WireModel):
    """[unstable] Params of ``session/set_title``."""

    session_id: SessionId
    title: str
    meta: Meta = None


class SetSessionTitleResponse(WireModel):
    """[unstable] Result of ``session/set_title``: the title as stored (possibly normalized)."""

    title: str
    meta: Meta = None
