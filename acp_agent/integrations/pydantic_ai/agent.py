"""Any pydantic-ai agent served as an ACP v2 agent (`PydanticAIAgent`).

It is an [`Agent`][acp_agent.Agent], so everything that serves an agent serves it unchanged
(``run_stdio``, ``python -m acp_agent serve|dev module:attr``, ``asgi_app``, the v1 bridge,
``acp_agent.testing``). Each prompt is one pydantic-ai run (``agent.iter``) with the session's model
history, the session's deps and toolsets, the client's MCP servers and a
[`TurnBridge`][acp_agent.integrations.pydantic_ai.bridge.TurnBridge] that shows the run to the client.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UnexpectedModelBehavior, UsageLimitExceeded, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, UserContent
from pydantic_ai.models import Model
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage, UsageLimits

from ...agent import Agent
from ...errors import ErrorCode, RequestError
from ...providers import Provider, ProviderSettings, configuring_principal
from ...schema import (
    AvailableCommand,
    ContentBlock,
    SessionConfigOption,
    SessionConfigSelectOption,
    TextCommandInput,
    TextContent,
    Usage,
)
from ...session import Session, StopReason
from ...store import SessionStore
from .bridge import TurnBridge
from .content import clear_history, load_history, note_stopped_background, prompt_text, save_history, user_content
from .mcp import acp_mcp_toolsets, open_mcp_toolsets, stdio_mark
from .permissions import PermissionPolicy
from .presenter import ToolPresenter

__all__ = ["Command", "PydanticAIAgent", "model_error"]

logger = logging.getLogger(__name__)

MODEL_OPTION = "model"
"""The config option id of the model choice."""


@dataclass(frozen=True, slots=True)
class ProviderModels:
    """[unstable] A provider the client may configure (``providers/set``) and the models its settings make.

    ``models(settings)`` builds pydantic-ai models from the client's ``api_type``, ``base_url`` and
    ``headers`` (e.g. an ``OpenAIChatModel`` on an ``OpenAIProvider(base_url=..., http_client=...)``); they
    join the ``model`` option under their names, and ``providers/disable`` removes them again. The headers
    usually hold credentials: keep them in the model's HTTP client, never in a name or a log.
    """

    provider: Provider
    models: Callable[[ProviderSettings], Mapping[str, Model]]


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command of the agent: ``/name args``.

    ``handler(session, args)`` runs it (``args``: the text after ``/name ``); a returned string is sent to
    the model as the prompt (a prompt template), ``None`` means the command did all there was to do. Write
    it as ``async def handler(session, args) -> str | None``; a plain function (a ``lambda``) works too.
    """

    description: str
    handler: Callable[[Session, str], Awaitable[str | None] | str | None]
    hint: str | None = None


SessionFactory = Callable[[Session], Any]
"""Called with the session at the start of each turn; may return an awaitable."""


async def _call(factory: SessionFactory | None, session: Session, default: Any) -> Any:
    if factory is None:
        return default
    value = factory(session)
    return await value if inspect.isawaitable(value) else value


def _on_trio() -> bool:
    trio = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def model_error(exc: BaseException) -> RequestError:
    """The turn's error for a failed run, saying what failed and never what the provider sent back
    (a provider's error body or headers may echo credentials)."""
    data: dict[str, Any] = {"error": type(exc).__name__}
    if isinstance(exc, UsageLimitExceeded):
        message = f"Usage limit exceeded: {exc.message}"
    elif isinstance(exc, ModelHTTPError):
        message = f"The model {exc.model_name} answered HTTP {exc.status_code}"
        data.update(model=exc.model_name, status=exc.status_code)
    elif isinstance(exc, ModelAPIError):
        message = f"The request to the model {exc.model_name} failed ({type(exc).__name__})"
        data["model"] = exc.model_name
    elif isinstance(exc, UnexpectedModelBehavior):
        message = f"The model behaved unexpectedly: {exc.message}"
    elif isinstance(exc, UserError):
        message = f"The agent is misconfigured: {exc.message}"
    else:
        message = f"The agent run failed ({type(exc).__name__})"
    return RequestError(ErrorCode.INTERNAL_ERROR, message, data)


def _usage(usage: RunUsage) -> Usage:
    fields: dict[str, Any] = {
        "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        fields["cached_read_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        fields["cached_write_tokens"] = usage.cache_write_tokens
    return Usage(**fields)


async def _report_context(session: Session, bridge: TurnBridge, messages: Sequence[ModelMessage]) -> None:
    """``usage_update``: the tokens of the last model request and its answer against the model's context
    window, when the model's profile knows its window."""
    window = bridge.model.context_window if bridge.model is not None else None
    last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    if window and last is not None:
        used = last.usage.input_tokens + last.usage.output_tokens
        await session.usage(min(used, window), window)


class PydanticAIAgent(Agent):
    """An ACP agent that serves the pydantic-ai ``agent`` (see the module docstring).

    Options:

    - ``name``, ``title``, ``version``: the ``initialize`` answer's ``info`` (default: the agent's name).
    - ``deps(session)``: the run's deps for a session (the session gives ``cwd``, ``mcp_servers``,
      ``client.capabilities``); ``toolsets(session)``: extra toolsets for a session. Both may be async.
    - ``models``: names to pydantic-ai models (or model ids) offered as the ``model`` config option and
      the ``/model`` command; the first is the default (none: the agent's own model).
    - ``permission_policy``: which approval-needing tools run without asking
      ([`PermissionPolicy`][acp_agent.integrations.pydantic_ai.PermissionPolicy]).
    - ``tool_presenter``: a tool call's title, kind and locations
      ([`ToolPresenter`][acp_agent.integrations.pydantic_ai.ToolPresenter]).
    - ``usage_limits``: pydantic-ai ``UsageLimits`` for each turn; ``model_settings`` likewise.
    - ``commands``: slash commands by name ([`Command`][acp_agent.integrations.pydantic_ai.Command]);
      ``/clear`` (forget the model's history) and ``/model`` (with ``models``) are built in.
    - ``mcp``: connect the stdio/HTTP MCP servers the client offers as pydantic-ai MCP toolsets
      (default ``True``; ``False`` neither advertises nor connects them; served over HTTP, only when the
      operator allows client MCP servers: ``HttpOptions.allow_client_mcp``); ``mcp_acp``: [unstable] also the
      servers the client hosts over ACP (``mcp/message``; default ``False``).
    - ``accept_system_prompt``: accept the client's ``systemPrompt`` (append mode) as run instructions.
    - ``accepts_image``, ``accepts_audio``, ``accepts_embedded_context``: prompt capabilities (off by
      default, as the model may not take them).
    - ``background_tools``: names of tools that run as background tool calls (or mark a tool with
      ``background_tool``); the result reaches the model in a follow-up turn.
    - ``providers``: [unstable] providers the client configures with ``providers/set``
      ([`ProviderModels`][acp_agent.integrations.pydantic_ai.ProviderModels]); their models join ``models``.
    - ``store``: where sessions (and with them the model history) are kept.

    One instance may serve many users: what a client changes live is kept per principal (the providers it
    configures and the models they bring: [`models_for`][acp_agent.integrations.pydantic_ai.PydanticAIAgent.models_for])
    or per session (the model choice, remembered approvals, the history), never on the instance. Options given
    here are the operator's and shared by all.

    pydantic-ai runs on asyncio: serve it with the asyncio backend (the default). A synchronous tool
    runs in a worker thread, which ``session/cancel`` cannot stop (the turn ends; the thread finishes
    its call): write long tools as ``async def``.
    """

    def __init__(
        self,
        agent: PydanticAgent[Any, Any],
        *,
        name: str | None = None,
        title: str | None = None,
        version: str | None = None,
        deps: SessionFactory | None = None,
        toolsets: SessionFactory | None = None,
        models: Mapping[str, Model | str] | None = None,
        permission_policy: PermissionPolicy | None = None,
        tool_presenter: ToolPresenter | None = None,
        usage_limits: UsageLimits | None = None,
        model_settings: Any = None,
        commands: Mapping[str, Command] | None = None,
        mcp: bool = True,
        mcp_acp: bool = False,
        accept_system_prompt: bool = False,
        accepts_image: bool = False,
        accepts_audio: bool = False,
        accepts_embedded_context: bool = False,
        background_tools: Collection[str] = (),
        providers: Sequence[ProviderModels] = (),
        store: SessionStore | None = None,
    ) -> None:
        self.agent = agent
        """The pydantic-ai agent served."""
        self.deps = deps
        self.toolsets = toolsets
        self.models: dict[str, Model | str] = dict(models or {})
        self.permission_policy = permission_policy or PermissionPolicy()
        self.tool_presenter = tool_presenter
        self.usage_limits = usage_limits
        self.model_settings = model_settings
        self.commands: dict[str, Command] = dict(commands or {})
        self.background_tools = frozenset(background_tools)
        self.provider_models = {entry.provider.id: entry for entry in providers}
        self._provider_models: dict[str, dict[str, dict[str, Model | str]]] = {}
        # principal -> provider id -> the models its providers/set made: one user's endpoint and key never
        # serve another's turns (an instance served to many users shares nothing a client can change)
        # The Agent's class-level description, per instance (the base class reads these attributes).
        described: dict[str, Any] = {
            "name": name or agent.name or "pydantic-ai-agent", "mcp_stdio": mcp, "mcp_http": mcp, "mcp_acp": mcp_acp,
            "accepts_system_prompt": accept_system_prompt, "accepts_image": accepts_image,
            "accepts_audio": accepts_audio, "accepts_embedded_context": accepts_embedded_context,
        }
        if title is not None:
            described["title"] = title
        if version is not None:
            described["version"] = version
        if store is not None:
            described["store"] = store
        if providers:
            described["providers"] = tuple(entry.provider for entry in providers)
        for attribute, value in described.items():
            setattr(self, attribute, value)
        self.connect_mcp = mcp
        self.connect_acp_mcp = mcp_acp

    # -- sessions -----------------------------------------------------------------------------

    def models_for(self, principal: str) -> dict[str, Model | str]:
        """The models ``principal``'s sessions may use: ``models`` and those of the providers that principal
        configured (``providers/set`` is per principal: another user's provider is never offered or used)."""
        chosen = dict(self.models)
        for made in self._provider_models.get(principal, {}).values():
            chosen.update(made)
        return chosen

    def _config_options(self, principal: str, current: str | None = None) -> list[SessionConfigOption]:
        models = self.models_for(principal)
        if not models:
            return []
        names = list(models)
        return [SessionConfigOption(
            config_id=MODEL_OPTION, name="Model", category="model", type="select",
            current_value=current if current in models else names[0],
            options=[SessionConfigSelectOption(value=model, name=model) for model in names],
        )]

    def _available_commands(self, principal: str) -> list[AvailableCommand]:
        commands = [AvailableCommand(name="clear", description="Forget the conversation so far (the model's context)")]
        models = self.models_for(principal)
        if models:
            commands.append(AvailableCommand(name="model", description="Show or switch the model",
                                             input=TextCommandInput(hint=" | ".join(models))))
        for name, command in self.commands.items():
            fields: dict[str, Any] = {}
            if command.hint is not None:
                fields["input"] = TextCommandInput(hint=command.hint)
            commands.append(AvailableCommand(name=name, description=command.description, **fields))
        return commands

    async def new_session(self, session: Session) -> None:
        """Offer the model choice and the slash commands."""
        session.config_options = self._config_options(session.principal)
        session.available_commands = self._available_commands(session.principal)

    async def resume_session(self, session: Session) -> None:
        """A session back from the store: background work it had running stopped with it, so the model's history
        gets a note saying so (instead of waiting for a result that will never come)."""
        history = load_history(session)
        noted = note_stopped_background(history)
        if len(noted) != len(history):
            save_history(session, noted)

    async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
        """Offer the models of a provider the client configured (or stop offering them), to the sessions of the
        principal who configured it ([`configuring_principal`][acp_agent.configuring_principal]) only."""
        entry = self.provider_models.get(provider_id)
        if entry is None:
            raise RequestError.invalid_params("unknown provider", {"providerId": provider_id})
        mine = self._provider_models.setdefault(configuring_principal(), {})
        mine.pop(provider_id, None)
        if settings is not None:
            mine[provider_id] = dict(entry.models(settings))

    async def fork_session(self, source: Session, session: Session) -> None:
        """A fork continues from the source's model history (``data`` is copied; each side then
        replaces its history, never mutates the shared one)."""

    async def set_config_option(self, session: Session, config_id: str, value: Any) -> None:
        """Accept a model the agent offers (the SDK checked the value against the options)."""
        if config_id != MODEL_OPTION or value not in self.models_for(session.principal):
            raise RequestError(ErrorCode.INVALID_PARAMS, f"unknown config option value: {config_id}={value}")

    def current_model(self, session: Session) -> Model | str | None:
        """The model the session's turns use: the ``model`` option's choice, else the agent's own."""
        for option in session.config_options:
            if option.config_id == MODEL_OPTION and isinstance(option.current_value, str):
                return self.models_for(session.principal).get(option.current_value)
        return None

    # -- turns --------------------------------------------------------------------------------

    async def _sync_options(self, session: Session) -> None:
        """Show the models offered now (a provider may have been configured since the session began)."""
        offered = next((o for o in session.config_options if o.config_id == MODEL_OPTION), None)
        choices = offered.options or [] if offered is not None else []
        names = [item.value for item in choices if isinstance(item, SessionConfigSelectOption)]
        if names == list(self.models_for(session.principal)):
            return
        current = offered.current_value if offered is not None and isinstance(offered.current_value, str) else None
        others = [o for o in session.config_options if o.config_id != MODEL_OPTION]
        await session.update_config_options([*self._config_options(session.principal, current), *others])
        await session.update_available_commands(self._available_commands(session.principal))

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        """Run a slash command, or one pydantic-ai run on the prompt."""
        await self._sync_options(session)
        text = prompt_text(prompt).strip()
        content: str | Sequence[UserContent] = user_content(prompt)
        if text.startswith("/"):
            name, _, args = text[1:].partition(" ")
            handled, replacement = await self._command(session, name, args.strip())
            if handled and replacement is None:
                return "end_turn"
            if replacement is not None:
                content = replacement
        return await self.run_turn(session, content)

    async def _command(self, session: Session, name: str, args: str) -> tuple[bool, str | None]:
        if name == "clear":
            clear_history(session)
            await session.say("Cleared the conversation: the model starts afresh.")
            return True, None
        if name == "model" and self.models_for(session.principal):
            await self._switch_model(session, args)
            return True, None
        command = self.commands.get(name)
        if command is None:
            return False, None
        answer = command.handler(session, args)
        return True, await answer if inspect.isawaitable(answer) else answer

    async def _switch_model(self, session: Session, choice: str) -> None:
        current = next((o.current_value for o in session.config_options if o.config_id == MODEL_OPTION), None)
        models = self.models_for(session.principal)
        if not choice:
            await session.say(f"Model: {current}. Available: {', '.join(models)}.")
            return
        if choice not in models:
            await session.say(f"Unknown model {choice!r}. Available: {', '.join(models)}.")
            return
        others = [o for o in session.config_options if o.config_id != MODEL_OPTION]
        await session.update_config_options([*self._config_options(session.principal, choice), *others])
        await session.say(f"Model: {choice}.")

    async def run_turn(self, session: Session, content: Sequence[UserContent] | str) -> StopReason:
        """One pydantic-ai run on ``content`` with the session's history; the history is saved even when
        the run is cancelled or fails (what the model had said so far stays its context)."""
        if _on_trio():
            raise RequestError(ErrorCode.INTERNAL_ERROR, "pydantic-ai runs on asyncio only: serve this agent "
                               "with the asyncio backend (the default)")
        bridge = TurnBridge(session, presenter=self.tool_presenter, policy=self.permission_policy,
                            background_tools=self.background_tools,
                            follow_up=lambda text: self.follow_up(session, text))
        async with AsyncExitStack() as stack:  # the client's MCP servers stay connected for the run
            toolsets: list[AbstractToolset[Any]] = list(await _call(self.toolsets, session, []))
            if self.connect_mcp:
                toolsets.extend(await open_mcp_toolsets(session, stack, await stdio_mark(session)))
            if self.connect_acp_mcp:
                toolsets.extend(await acp_mcp_toolsets(session))
            return await self._run(session, content, bridge, toolsets)

    async def _run(self, session: Session, content: Sequence[UserContent] | str, bridge: TurnBridge,
                   toolsets: list[AbstractToolset[Any]]) -> StopReason:
        history = load_history(session)
        options: dict[str, Any] = {
            "message_history": history, "deps": await _call(self.deps, session, None), "toolsets": toolsets,
            "usage_limits": self.usage_limits, "model_settings": self.model_settings, "capabilities": [bridge],
        }
        model = self.current_model(session)
        if model is not None:
            options["model"] = model
        system_prompt = session.system_prompt
        if system_prompt is not None:
            options["instructions"] = prompt_text(system_prompt.content) or None
        messages = history
        try:
            async with self.agent.iter(content, **options) as run:
                try:
                    async for _ in run:
                        pass
                finally:
                    messages = run.all_messages()
        except RequestError:
            raise
        except Exception as exc:  # the turn's error says what failed; the traceback goes to the log
            logger.warning("acp: pydantic-ai run of session %s failed", session.id, exc_info=True)
            raise model_error(exc) from exc
        finally:
            save_history(session, messages)
        result = run.result
        if result is None:
            return "end_turn"
        session.set_turn_usage(_usage(run.usage))
        await _report_context(session, bridge, messages)
        if not isinstance(result.output, str):
            # Structured output (an output type): the text parts were streamed; show the value too.
            await session.say([TextContent(text=orjson.dumps(result.output, default=str).decode())])
        return "end_turn"

    async def follow_up(self, session: Session, text: str) -> StopReason:
        """A turn the agent starts itself (no user prompt): ``text`` goes to the model as the prompt."""
        return await self.run_turn(session, text)
