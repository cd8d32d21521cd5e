"""The ``Agent`` base class that agent authors subclass.

The SDK owns the protocol; the subclass owns the behaviour. Override [`Agent.prompt`][acp_agent.Agent.prompt]
(required) and any of the optional hooks. The capabilities sent in the ``initialize``
answer are derived from the class: a surface is advertised only when the subclass
implements it or declares it (R28).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from ._util.telemetry import Telemetry
from .auth import Login, Workspace
from .errors import RequestError
from .limits import DEFAULT_LIMITS, Limits
from .peer import ClientPeer
from .providers import Provider, ProviderSettings
from .schema import (
    AgentCapabilities,
    AuthMethodAgent,
    AuthMethodTerminal,
    AuthStatusResponse,
    ContentBlock,
    Implementation,
    InitializeRequest,
    McpCapabilities,
    PromptCapabilities,
    SessionCapabilities,
    UnknownAuthMethod,
)
from .session import Session, StopReason
from .store import SessionStore

__all__ = ["Agent"]


class Agent:
    """Base class for an ACP v2 agent.

    Class attributes describe the agent: ``name``, ``title`` and ``version`` fill the
    ``info`` of the ``initialize`` answer; the ``accepts_*`` flags declare which prompt
    content beyond text and resource links the agent understands; ``mcp_stdio`` /
    ``mcp_http`` declare the MCP transports it can connect to (``mcp_acp``, unstable: MCP
    servers the client hosts, called through ``session.acp_mcp_servers``). ``limits`` holds the
    resource limits of each connection (a ``limits=`` argument to [`run_stdio`][acp_agent.run_stdio]
    wins over it). ``store`` is where sessions are kept (a ``store=`` argument wins over it;
    by default ``run_stdio`` uses a SQLite file per agent and the in-memory test client a
    [`MemoryStore`][acp_agent.store.MemoryStore]).
    """

    name: ClassVar[str] = "acp-agent"
    title: ClassVar[str | None] = None
    version: ClassVar[str] = "0.1.0"

    accepts_image: ClassVar[bool] = False
    accepts_audio: ClassVar[bool] = False
    accepts_embedded_context: ClassVar[bool] = False
    mcp_stdio: ClassVar[bool] = False
    mcp_http: ClassVar[bool] = False
    mcp_acp: ClassVar[bool] = False
    """[unstable] Accept ``type: "acp"`` MCP servers (``session.mcp.acp``): servers the client hosts,
    called over the ACP connection through [`Session.acp_mcp_servers`][acp_agent.Session.acp_mcp_servers]."""
    accepts_additional_directories: ClassVar[bool] = False
    accepts_system_prompt: ClassVar[bool | str] = False
    """[unstable] ``True`` accepts a client ``systemPrompt`` in ``append`` mode on new/resume/fork
    (``session.system_prompt``); ``"override"`` accepts ``override`` too."""
    limits: ClassVar[Limits] = DEFAULT_LIMITS
    store: ClassVar[SessionStore | None] = None
    workspace: ClassVar[Workspace | None] = None
    """Where sessions may live ([`Workspace`][acp_agent.Workspace]): checked on every request carrying a
    ``cwd`` or ``additionalDirectories``. ``None``: over stdio any absolute path; served over HTTP, the transport's
    default (``serve``: the directory it was started in, or ``--workspace DIR``)."""
    telemetry: ClassVar[Telemetry | None] = None
    """Where requests, turns, tool calls and terminals are reported (e.g. ``OpenTelemetry()`` from
    `acp_agent.telemetry.otel`); ``None`` uses the ``OTEL_*`` environment variables, and is off without them."""

    auth_methods: ClassVar[Sequence[AuthMethodAgent | AuthMethodTerminal | UnknownAuthMethod]] = ()
    """How a client can log in (``initialize``'s ``authMethods``); implement [`login`][acp_agent.Agent.login] with
    them."""
    require_login: ClassVar[bool] = False
    """Answer every session method ``-32000`` until a login succeeded on the connection."""

    providers: ClassVar[Sequence[Provider]] = ()
    """[unstable] LLM providers the client may configure (``providers/list|set|disable``); with
    [`configure_provider`][acp_agent.Agent.configure_provider] implemented, declaring any advertises ``providers``."""

    client: InitializeRequest | None = None
    """The latest ``initialize`` request on any connection (prefer ``session.client``, which is per connection)."""

    # -- hooks -------------------------------------------------------------------------

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason | None:
        """Handle one inserted user prompt as foreground work; return the stop reason.

        Returning ``None`` means ``end_turn``. Raising ends the work with ``error``: a
        [`RequestError`][acp_agent.RequestError] reaches the client with its code, message and data;
        any other exception as ``-32603`` "Internal error" (its text stays in the log on
        stderr). Cancellation (``session/cancel``, ``session/close``) ends it with ``cancelled``.
        Blocking calls (``time.sleep``, blocking I/O) freeze every session of the connection:
        run them with ``await anyio.to_thread.run_sync(...)``.
        """
        raise NotImplementedError("Agent subclasses must implement prompt()")

    async def login(self, login: Login) -> None:
        """Log the client in with ``login.method_id`` (one of [`auth_methods`][acp_agent.Agent.auth_methods]); return to
        accept.

        Raise [`RequestError`][acp_agent.RequestError] to refuse (``RequestError.auth_required()`` or your
        own code). ``login.ask`` / ``login.ask_url`` ask the user for input scoped to this request.
        """
        raise RequestError.auth_required()

    async def logout(self, login: Login) -> None:
        """Forget the client's credentials (``auth/logout``); sessions then need a new login."""

    async def auth_status(self, client: ClientPeer) -> AuthStatusResponse:
        """[unstable] The agent's login state (``auth/status``); implementing it advertises ``auth.status``."""
        raise NotImplementedError

    async def initialize(self, request: InitializeRequest) -> None:
        """Called on ``initialize`` before the answer; ``self.client`` is already set."""

    async def new_session(self, session: Session) -> None:
        """Called for ``session/new`` before the answer.

        Assign ``session.config_options`` and ``session.available_commands`` here: the answer
        carries them. Updates sent from here are held and go out right after the answer (the
        client cannot place them earlier); asking the user is not possible yet.
        """

    async def resume_session(self, session: Session) -> None:
        """Called when a session that is not active here is brought back by ``session/resume``."""

    async def rearm_wakeup(self, session: Session, name: str, payload: Any
                           ) -> Callable[[], Awaitable[StopReason | None]] | None:
        """Called when a session is loaded again (after [`resume_session`][acp_agent.Agent.resume_session]) for
        each durable wake-up it had pending (``session.schedule(..., durable=name, payload=payload)``):
        return the work to run when it fires, and the SDK schedules it again for the time left as a new
        ``pending`` tool call; return ``None`` (the default) to let it go.
        """
        return None

    async def fork_session(self, source: Session, session: Session) -> None:
        """Called for ``session/fork``; ``session`` already holds a copy of the source's history,
        config options, commands and a shallow copy of its ``data`` (never its live work, R112).

        Overriding this hook advertises ``session.fork``. As in [`new_session`][acp_agent.Agent.new_session], updates
        sent from here go out right after the answer.
        """

    async def set_config_option(self, session: Session, config_id: str, value: Any) -> None:
        """Called after the SDK validated a ``session/set_config_option`` request.

        The SDK updates ``currentValue`` afterwards; raise
        [`RequestError`][acp_agent.RequestError] to refuse (the options then stay unchanged).
        """

    async def close_session(self, session: Session) -> None:
        """Called once a session's work has been stopped by ``session/close``."""

    async def delete_session(self, session_id: str) -> None:
        """Called when ``session/delete`` removes a session from this agent's store."""

    async def set_session_title(self, session_id: str, title: str) -> None:
        """[unstable] Called for ``session/set_title`` (``title`` is trimmed, never empty) before the SDK
        stores it. Raise [`RequestError`][acp_agent.RequestError] to refuse; the title then stays as it was.

        The session may be active or only stored. Once the client set a title, it wins over
        ``session.update_info(title=...)``.
        """

    async def archive_session(self, session_id: str) -> None:
        """[unstable] Called for ``session/archive`` of a session not yet archived, before anything
        changes; raise [`RequestError`][acp_agent.RequestError] to refuse. An active session is then closed
        ([`close_session`][acp_agent.Agent.close_session] runs) and hidden from the default ``session/list``."""

    async def unarchive_session(self, session_id: str) -> None:
        """[unstable] Called for ``session/unarchive`` of an archived session, before anything changes;
        raise [`RequestError`][acp_agent.RequestError] to refuse."""

    async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
        """[unstable] Use ``settings`` for one of [`providers`][acp_agent.Agent.providers] from now on
        (``providers/set``), or stop using it (``None``: ``providers/disable``).

        The SDK has already checked the provider, its protocol and its URL. ``settings.headers``
        usually holds credentials: never log them. Raise [`RequestError`][acp_agent.RequestError] to refuse;
        ``providers/list`` then still shows the previous endpoint. The change is one principal's
        ([`configuring_principal`][acp_agent.configuring_principal]): an agent served to several users
        keeps it for that principal's sessions only (``session.principal``).
        """
        raise NotImplementedError

    async def cancel_tool_call(self, session: Session, tool_call_id: str) -> None:
        """Stop a tool call that advertises ``cancel`` but has no handle-level cancel path.

        Handles created with [`Session.start_tool_call`][acp_agent.Session.start_tool_call] route ``tool_call/cancel``
        themselves; this hook serves tool calls the agent announced with raw updates. It
        runs after the SDK accepted the request (answered ``{}``); confirm with a final status.
        """
        raise NotImplementedError

    async def cancel_terminal(self, session: Session, terminal_id: str) -> None:
        """Stop a terminal that advertises ``cancel`` but was not started by the SDK; report its exit."""
        raise NotImplementedError

    # -- description ---------------------------------------------------------------------

    def info(self) -> Implementation:
        """The ``info`` sent in the ``initialize`` answer."""
        fields: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            fields["title"] = self.title
        return Implementation(**fields)

    def capabilities(self) -> AgentCapabilities:
        """Capabilities derived from this class (only what it really implements)."""
        prompt: dict[str, Any] = {}
        if self.accepts_image:
            prompt["image"] = {}
        if self.accepts_audio:
            prompt["audio"] = {}
        if self.accepts_embedded_context:
            prompt["embedded_context"] = {}
        mcp: dict[str, Any] = {}
        if self.mcp_stdio:
            mcp["stdio"] = {}
        if self.mcp_http:
            mcp["http"] = {}
        if self.mcp_acp:
            mcp["acp"] = {}
        session: dict[str, Any] = {"delete": {}}
        if prompt:
            session["prompt"] = PromptCapabilities(**prompt)
        if mcp:
            session["mcp"] = McpCapabilities(**mcp)
        if self.accepts_additional_directories:
            session["additional_directories"] = {}
        if self.implements("fork_session"):
            session["fork"] = {}
        if self.accepts_system_prompt:
            session["system_prompt"] = {"mode": {"override": {}}} if self.accepts_system_prompt == "override" else {}
        session.update(title={}, archive={}, status={})  # [unstable] served by the SDK (bookkeeping.py)
        fields: dict[str, Any] = {"session": SessionCapabilities(**session)}
        if self.implements("auth_status"):
            fields["auth"] = {"status": {}}
        if self.offers_providers():
            fields["providers"] = {}
        return AgentCapabilities(**fields)

    def offered_auth_methods(self, client: InitializeRequest | None) -> list[Any]:
        """The ``authMethods`` for this client: terminal methods only if it advertised ``auth.terminal``."""
        terminal_ok = client is not None and client.capabilities.auth is not None and \
            client.capabilities.auth.terminal is not None
        return [m for m in self.auth_methods if not isinstance(m, AuthMethodTerminal) or terminal_ok]

    def offers_providers(self) -> bool:
        """[unstable] Whether ``providers/*`` is served: [`providers`][acp_agent.Agent.providers] declared and
        [`configure_provider`][acp_agent.Agent.configure_provider] implemented."""
        return bool(self.providers) and self.implements("configure_provider")

    def implements(self, hook: str) -> bool:
        """Whether this subclass overrides the named optional hook."""
        return getattr(type(self), hook) is not getattr(Agent, hook)

    def accepts_block(self, block_type: str) -> bool:
        """Whether a prompt content block of this type is accepted (R55)."""
        if block_type in ("text", "resource_link"):
            return True
        return {
            "image": self.accepts_image,
            "audio": self.accepts_audio,
            "resource": self.accepts_embedded_context,
        }.get(block_type, False)

