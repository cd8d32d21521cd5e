"""Capability objects: what each side supports, and the per-item controls on tool calls and terminals.

A capability is supported when its key holds an object (usually ``{}``) and unsupported when
the key is omitted or ``null``; booleans are never used as markers. The empty marker
classes below therefore only carry ``_meta``.
"""

from .base import Meta, WireModel

__all__ = [
    "AgentAuthCapabilities",
    "AgentCapabilities",
    "AuthStatusCapabilities",
    "ClientAuthCapabilities",
    "ClientCapabilities",
    "ClientCommandsCapabilities",
    "ClientSessionCapabilities",
    "ElicitationCapabilities",
    "ElicitationFormCapabilities",
    "ElicitationUrlCapabilities",
    "McpAcpCapabilities",
    "McpCapabilities",
    "McpHttpCapabilities",
    "McpStdioCapabilities",
    "PromptAudioCapabilities",
    "PromptCapabilities",
    "PromptEmbeddedContextCapabilities",
    "PromptImageCapabilities",
    "PromptSuggestionsCapabilities",
    "ProvidersCapabilities",
    "SessionAdditionalDirectoriesCapabilities",
    "SessionArchiveCapabilities",
    "SessionCancelCapabilities",
    "SessionCapabilities",
    "SessionDeleteCapabilities",
    "SessionForkCapabilities",
    "SessionStatusCapabilities",
    "SessionSystemPromptCapabilities",
    "SessionSystemPromptModeCapabilities",
    "SessionSystemPromptOverrideCapabilities",
    "SessionTitleCapabilities",
    "SubagentSessionCapabilities",
    "TerminalAuthCapabilities",
    "TerminalCancelCapabilities",
    "TerminalCapabilities",
    "ToolCallCancelCapabilities",
    "ToolCallCapabilities",
]


# --------------------------------------------------------------------------- Client capabilities


class TerminalAuthCapabilities(WireModel):
    """Marker: the Client can run ``terminal`` auth methods (re-launching the Agent interactively)."""

    meta: Meta = None


class ClientAuthCapabilities(WireModel):
    """Authentication features of the Client."""

    terminal: TerminalAuthCapabilities | None = None
    meta: Meta = None


class ElicitationFormCapabilities(WireModel):
    """Marker: the Client accepts form-mode elicitations."""

    meta: Meta = None


class ElicitationUrlCapabilities(WireModel):
    """Marker: the Client accepts URL-mode elicitations."""

    meta: Meta = None


class ElicitationCapabilities(WireModel):
    """Which elicitation modes the Client accepts (``{}`` with neither key means none)."""

    form: ElicitationFormCapabilities | None = None
    url: ElicitationUrlCapabilities | None = None
    meta: Meta = None


class PromptImageCapabilities(WireModel):
    """Marker: prompts may contain ``image`` blocks."""

    meta: Meta = None


class PromptAudioCapabilities(WireModel):
    """Marker: prompts may contain ``audio`` blocks."""

    meta: Meta = None


class PromptEmbeddedContextCapabilities(WireModel):
    """Marker: prompts may contain embedded ``resource`` blocks."""

    meta: Meta = None


class PromptSuggestionsCapabilities(WireModel):
    """[unstable, Preview] The Client shows ``prompt_suggestions_update``: ``{}`` takes text and
    ``resource_link`` blocks; ``image``, ``audio`` and ``embedded_context`` opt in to more."""

    image: PromptImageCapabilities | None = None
    audio: PromptAudioCapabilities | None = None
    embedded_context: PromptEmbeddedContextCapabilities | None = None
    meta: Meta = None


class ClientCommandsCapabilities(WireModel):
    """[unstable, Preview] Marker: the Client handles the session's available commands."""

    meta: Meta = None


class ClientSessionCapabilities(WireModel):
    """[unstable, Preview] What the Client handles of a session beyond the baseline."""

    prompt_suggestions: PromptSuggestionsCapabilities | None = None
    commands: ClientCommandsCapabilities | None = None
    meta: Meta = None


class ClientCapabilities(WireModel):
    """Everything the Client advertises in ``initialize``."""

    auth: ClientAuthCapabilities | None = None
    elicitation: ElicitationCapabilities | None = None
    session: ClientSessionCapabilities | None = None
    """[unstable, Preview] ``promptSuggestions`` and ``commands``."""
    meta: Meta = None


# --------------------------------------------------------------------------- Agent capabilities


class PromptCapabilities(WireModel):
    """Optional block types the Agent accepts in prompts (``text`` and ``resource_link`` always are)."""

    image: PromptImageCapabilities | None = None
    audio: PromptAudioCapabilities | None = None
    embedded_context: PromptEmbeddedContextCapabilities | None = None
    meta: Meta = None


class McpStdioCapabilities(WireModel):
    """Marker: the Client may pass stdio MCP servers."""

    meta: Meta = None


class McpHttpCapabilities(WireModel):
    """Marker: the Client may pass HTTP MCP servers."""

    meta: Meta = None


class McpAcpCapabilities(WireModel):
    """[unstable] Marker: the Client may pass MCP-over-ACP servers (``type: "acp"``)."""

    meta: Meta = None


class McpCapabilities(WireModel):
    """MCP server transports the Agent can connect to."""

    stdio: McpStdioCapabilities | None = None
    http: McpHttpCapabilities | None = None
    acp: McpAcpCapabilities | None = None
    meta: Meta = None


class SessionDeleteCapabilities(WireModel):
    """Marker: ``session/delete`` is implemented."""

    meta: Meta = None


class SessionAdditionalDirectoriesCapabilities(WireModel):
    """Marker: ``additionalDirectories`` is accepted on session lifecycle requests."""

    meta: Meta = None


class SessionForkCapabilities(WireModel):
    """[unstable] Marker: ``session/fork`` is implemented."""

    meta: Meta = None


class SessionSystemPromptOverrideCapabilities(WireModel):
    """[unstable] Marker: a system prompt may replace (not only extend) the Agent's own."""

    meta: Meta = None


class SessionSystemPromptModeCapabilities(WireModel):
    """[unstable] Which system-prompt modes beyond ``append`` are accepted."""

    override: SessionSystemPromptOverrideCapabilities | None = None
    meta: Meta = None


class SessionSystemPromptCapabilities(WireModel):
    """[unstable] ``systemPrompt`` is accepted on new / resume / fork."""

    mode: SessionSystemPromptModeCapabilities | None = None
    meta: Meta = None


class SessionArchiveCapabilities(WireModel):
    """[unstable] Marker: ``session/archive``, ``session/unarchive`` and the ``archived`` filter exist."""

    meta: Meta = None


class SessionStatusCapabilities(WireModel):
    """[unstable] Marker: ``session/status`` is implemented."""

    meta: Meta = None


class SessionTitleCapabilities(WireModel):
    """[unstable] Marker: ``session/set_title`` is implemented."""

    meta: Meta = None


class SessionCapabilities(WireModel):
    """The session surface. Present (even ``{}``) = the baseline session methods are implemented."""

    prompt: PromptCapabilities | None = None
    mcp: McpCapabilities | None = None
    delete: SessionDeleteCapabilities | None = None
    additional_directories: SessionAdditionalDirectoriesCapabilities | None = None
    system_prompt: SessionSystemPromptCapabilities | None = None
    fork: SessionForkCapabilities | None = None
    archive: SessionArchiveCapabilities | None = None
    status: SessionStatusCapabilities | None = None
    title: SessionTitleCapabilities | None = None
    meta: Meta = None


class AuthStatusCapabilities(WireModel):
    """[unstable] Marker: ``auth/status`` and ``auth/status_update`` are implemented."""

    meta: Meta = None


class AgentAuthCapabilities(WireModel):
    """Auth-related extensions of the Agent (not ``auth/login`` itself, which ``authMethods`` implies)."""

    status: AuthStatusCapabilities | None = None
    meta: Meta = None


class ProvidersCapabilities(WireModel):
    """[unstable] Marker: ``providers/list``, ``providers/set`` and ``providers/disable`` are implemented."""

    meta: Meta = None


class AgentCapabilities(WireModel):
    """Everything the Agent advertises in its ``initialize`` result."""

    session: SessionCapabilities | None = None
    auth: AgentAuthCapabilities | None = None
    providers: ProvidersCapabilities | None = None
    meta: Meta = None


# --------------------------------------------------------------------------- per-item controls


class ToolCallCancelCapabilities(WireModel):
    """Marker on a tool call: the Client may send ``tool_call/cancel`` for it."""

    meta: Meta = None


class ToolCallCapabilities(WireModel):
    """Client controls offered for one tool call; replaced whole on every update that carries it."""

    cancel: ToolCallCancelCapabilities | None = None
    meta: Meta = None


class TerminalCancelCapabilities(WireModel):
    """Marker on a terminal: the Client may send ``terminal/cancel`` for it."""

    meta: Meta = None


class TerminalCapabilities(WireModel):
    """Client controls offered for one terminal; replaced whole on every update that carries it."""

    cancel: TerminalCancelCapabilities | None = None
    meta: Meta = None


class SessionCancelCapabilities(WireModel):
    """[unstable] Marker on a subagent child: the Client may send ``session/cancel`` for it."""

    meta: Meta = None


class SubagentSessionCapabilities(WireModel):
    """[unstable] Client mutations allowed on a subagent child session (only ``cancel`` exists)."""

    cancel: SessionCancelCapabilities | None = None
    meta: Meta = None
