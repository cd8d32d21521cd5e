"""The author-facing session: what an agent's hooks use to talk to the client and start work.

A [`Session`][acp_agent.Session] is a thin, documented front over the session's runtime parts
(`SessionCore`): every rule (ordering, lists, states) is enforced
there, so nothing here can get the wire wrong. A [`MessageStream`][acp_agent.MessageStream] is one agent message
streamed in chunks. Handles on what a session starts live beside it: tool calls (`tool_calls`), terminals
(`terminals`), children ([`Subagent`][acp_agent.Subagent], `subagents`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import orjson
from anyio.abc import TaskGroup
from pydantic import BaseModel

from . import schema
from ._util import deprecated
from ._util.ids import new_id
from .errors import NotInTurnError
from .limits import Limits
from .mcp import AcpMcpServers
from .peer import ClientPeer
from .schema import ContentBlock, ForegroundState, StopReason
from .subagents import Subagent, SubagentResult

if TYPE_CHECKING:
    # Loaded when first used, not at import: an agent that never asks, runs a process or starts a
    # tool call does not pay for them, and the session's runtime parts and most wire models load after
    # ``initialize`` is answered (``tests/unit/test_exports.py`` pins what a stdio agent loads).
    from ._session.core import SessionCore
    from ._session.registry import BackgroundRegistry
    from .history import HistoryItem
    from .questions import ElicitationResult, PermissionOutcome
    from .schema import (
        PermissionOption,
    )
    from .terminals import Terminal, TerminalOptions
    from .tool_calls import ToolCall, ToolCallExtras, ToolCallFields

__all__ = ["ForegroundState", "MessageStream", "Session", "StopReason", "Subagent", "SubagentResult", "rearm_wakeups",
           "session_of"]

logger = logging.getLogger(__name__)


PromptHandler = Callable[["Session", list[ContentBlock]], Awaitable[StopReason | None]]


class MessageStream:
    """An agent message (or thought) streamed as chunks that share one ``messageId``.

    Create it with [`Session.message`][acp_agent.Session.message] or [`Session.thought`][acp_agent.Session.thought].
    Like every agent message it belongs to foreground work: writing while the session is ``idle`` raises
    [`NotInTurnError`][acp_agent.NotInTurnError].
    """

    def __init__(self, core: SessionCore, *, thought: bool = False, message_id: str | None = None) -> None:
        self._core = core
        self.message_id = message_id or new_id("thought" if thought else "msg")
        """The ``messageId`` every chunk carries."""
        self._thought = thought
        self._chunk = schema.AgentThoughtChunk if thought else schema.AgentMessageChunk
        # The hot path: text chunks go straight to the sink, framed by the writer (same JSON the models produce).
        self._sink = core.sink
        self._state = core.snapshots
        self._frame = core.sink.text_frame(thought, self.message_id)

    async def write(self, content: str | ContentBlock) -> None:
        """Append one piece of text (or one content block) to the message."""
        if self._state.foreground == "idle":
            self._core.check_may_talk()
        if type(content) is str:
            sink = self._sink
            if sink.text(self._frame, self._thought, self.message_id, content):  # the common case skips the coroutine
                await sink.backpressure()
            return
        await self._core.send(self._chunk(message_id=self.message_id, content=content))


class Session:
    """One ACP session: send updates, ask the user, start foreground and background work.

    Agent code receives a ``Session`` in every hook. Updates go out in exactly the order
    they are sent. The session owns its foreground state (``idle``, ``running``,
    ``requires_action``) and reports it itself; agent code never sends ``state_update``.
    Agent messages belong to foreground work (a prompt, or [`start_foreground`][acp_agent.Session.start_foreground]).
    """

    def __init__(self, core: SessionCore, *, prompt_handler: PromptHandler) -> None:
        self._core = core
        core.turns.run_prompt = functools.partial(prompt_handler, self)
        self._acp_mcp = AcpMcpServers(core.client.mcp, core.id)
        core.on_closed.append(self._acp_mcp.close)
        self._mcp_servers: list[Any] = []

    @property
    def mcp_servers(self) -> list[Any]:
        """The MCP servers the client gave this session (``session/new``, ``session/fork``, or the
        latest ``session/resume``, which replaces them): connect to them in your hooks."""
        return self._mcp_servers

    @mcp_servers.setter
    def mcp_servers(self, servers: list[Any]) -> None:
        self._mcp_servers = servers
        self._acp_mcp.replace(servers)

    @property
    def acp_mcp_servers(self) -> AcpMcpServers:
        """[unstable] The client-hosted MCP servers of [`mcp_servers`][acp_agent.Session.mcp_servers] (``type: "acp"``),
        by name, each an [`AcpMcpServer`][acp_agent.AcpMcpServer] to call (``await server.call_tool(name, args)``).

        Empty unless the agent sets [`Agent.mcp_acp`][acp_agent.Agent.mcp_acp]. An unknown name raises
        [`UnknownMcpServerError`][acp_agent.UnknownMcpServerError].
        """
        return self._acp_mcp

    @property
    def parent(self) -> Session | None:
        """The session that owns this one, for a subagent's child session (else ``None``)."""
        parent = self._core.parent
        return session_of(parent) if parent is not None else None

    def __repr__(self) -> str:
        return f"Session({self.id!r}, state={self.state!r})"

    # -- identity ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id."""
        return self._core.id

    @property
    def cwd(self) -> str:
        """The session's absolute working directory."""
        return self._core.record.cwd

    @property
    def principal(self) -> str:
        """Who the session belongs to: the user the transport authenticated (a server's token or tokens
        file), ``"default"`` over stdio and with a single token. Only that principal's connections see it."""
        return self._core.record.principal

    @property
    def additional_directories(self) -> list[str]:
        """Extra workspace roots the client gave this session."""
        return self._core.record.additional_directories

    @property
    def title(self) -> str | None:
        """The session's title: the client's once it set one (``session/set_title``), else the last
        one given to [`update_info`][acp_agent.Session.update_info]."""
        return self._core.record.title

    @property
    def client(self) -> ClientPeer:
        """The client of this session's connection: its info and capabilities (from *its*
        ``initialize``), and its extension methods (``await session.client.request("_vendor/x", {...})``)."""
        return self._core.client

    @property
    def meta(self) -> dict[str, Any] | None:
        """The ``_meta`` of the latest ``session/new``, ``session/resume`` or ``session/fork`` for this session."""
        return self._core.record.request_meta

    @property
    def prompt_meta(self) -> dict[str, Any] | None:
        """During a prompt turn: the ``_meta`` of its ``session/prompt`` (content blocks keep their own ``meta``)."""
        return self._core.turns.prompt_meta

    @property
    def system_prompt(self) -> schema.SystemPrompt | None:
        """[unstable] The client's system prompt for this session (``mode``, ``content``), if it gave one.

        Sent only when the agent declares ``accepts_system_prompt``; fold it into the model's instructions.
        """
        return self._core.record.system_prompt

    @property
    def limits(self) -> Limits:
        """The connection's [`Limits`][acp_agent.Limits] (read-only)."""
        return self._core.limits

    @property
    def state(self) -> ForegroundState:
        """The foreground state last reported to the client."""
        return self._core.snapshots.foreground

    @property
    def closing(self) -> bool:
        """True once ``session/close`` (or the end of the connection) began."""
        return self._core.closing

    @property
    def closed(self) -> bool:
        """True once the session was closed; nothing more can be sent for it."""
        return self._core.closed

    @property
    def background(self) -> BackgroundRegistry:
        """Every tool call, terminal and child of this session, and the ``background`` list (read-only)."""
        return self._core.registry

    @property
    def data(self) -> dict[str, Any]:
        """Free space for agent code to keep per-session state.

        It is kept with the session's record, not the live object: it survives
        ``session/close`` and a later ``session/resume`` (after a restart too, with a durable
        store, if it is JSON-serializable), and a ``session/fork`` starts with a shallow copy
        of its source's. ``session/delete`` drops it.
        """
        return self._core.record.data

    @property
    def history(self) -> list[HistoryItem]:
        """What the client would see replayed: one whole update per message, tool call, terminal,
        child, plan or compaction, in order of first appearance.

        After ``session/resume`` or ``session/fork`` an LLM agent rebuilds its context from it:
        ``UserMessage`` items are the user's prompts, ``AgentMessage`` / ``AgentThought`` what the
        agent said or thought, ``ToolCallUpdate`` the final state of each tool call.
        """
        return list(self._core.record.history.replay())

    @property
    def config_options(self) -> list[schema.SessionConfigOption]:
        """The session's config options (complete list, in priority order).

        Assign them in ``new_session`` (they go into the answer); after that, use
        [`update_config_options`][acp_agent.Session.update_config_options] so the client hears of the change.
        """
        return self._core.record.config_options

    @config_options.setter
    def config_options(self, options: Sequence[schema.SessionConfigOption]) -> None:
        # A copy: the SDK sets currentValue on the session's own options, never on a caller's shared object.
        self._core.record.config_options = [option.model_copy(deep=True) for option in options]

    @property
    def available_commands(self) -> list[schema.AvailableCommand]:
        """The slash commands offered in this session (assign in ``new_session``, like
        [`config_options`][acp_agent.Session.config_options])."""
        return self._core.record.available_commands

    @available_commands.setter
    def available_commands(self, commands: Sequence[schema.AvailableCommand]) -> None:
        self._core.record.available_commands = list(commands)

    # -- sending updates ---------------------------------------------------------------

    async def send(self, update: BaseModel) -> None:
        """Send one ``session/update`` for this session (any variant but ``state_update``).

        Tool call and terminal updates are checked first: an illegal move raises
        [`ToolCallStateError`][acp_agent.ToolCallStateError] and nothing is sent (R97).
        """
        if isinstance(update, _talk()):
            self._core.check_may_talk()
        await self._core.send(update)

    async def say(self, content: str | Sequence[ContentBlock], *, message_id: str | None = None,
                  meta: dict[str, Any] | None = None) -> str:
        """Send a complete agent message (``meta``: its ``_meta``); returns its ``messageId``.

        Raises [`NotInTurnError`][acp_agent.NotInTurnError] (nothing sent) while the session is ``idle``.
        """
        message_id = message_id or new_id("msg")
        await self._core.send_message(schema.AgentMessage, message_id, content, meta)
        return message_id

    async def think(self, content: str | Sequence[ContentBlock], *, message_id: str | None = None,
                    meta: dict[str, Any] | None = None) -> str:
        """Send a complete agent thought; returns its ``messageId`` (only during foreground work, like
        [`say`][acp_agent.Session.say])."""
        message_id = message_id or new_id("thought")
        await self._core.send_message(schema.AgentThought, message_id, content, meta)
        return message_id

    def message(self, *, message_id: str | None = None) -> MessageStream:
        """Start an agent message streamed in chunks (``await stream.write("...")``)."""
        return MessageStream(self._core, message_id=message_id)

    def thought(self, *, message_id: str | None = None) -> MessageStream:
        """Start an agent thought streamed in chunks."""
        return MessageStream(self._core, thought=True, message_id=message_id)

    async def plan(self, entries: Sequence[schema.PlanEntry], *, plan_id: str = "plan",
                   meta: dict[str, Any] | None = None) -> None:
        """Send the complete entry list of a plan (R76)."""
        await self.send(schema.PlanUpdate(plan=schema.PlanItems(plan_id=plan_id, entries=list(entries)), **_meta(meta)))

    async def usage(self, used: int, size: int, **fields: Any) -> None:
        """Report context-window usage (``cost`` may be passed as a keyword)."""
        await self.send(schema.UsageUpdate(used=used, size=size, **fields))

    async def notice(self, title: str, *, severity: str = "info", description: str | None = None,
                     meta: dict[str, Any] | None = None) -> None:
        """Show a live, fire-and-forget notice (never needed for correctness, R78)."""
        fields: dict[str, Any] = {"severity": severity, "title": title, **_meta(meta)}
        if description is not None:
            fields["description"] = description
        await self.send(schema.Notice(**fields))

    async def update_info(self, **fields: Any) -> None:
        """Patch session metadata (``title``, ``updated_at``, ``meta``); omitted fields stay.

        Once the client titled the session (``session/set_title``), its title wins: a ``title``
        passed here is left out (nothing is sent if nothing else is left).
        """
        update = self._core.info_update(fields)
        if update is not None:
            await self.send(update)

    async def update_config_options(self, options: Sequence[schema.SessionConfigOption]) -> None:
        """Replace the session's config options and tell the client (complete list, R51).

        In ``new_session`` / ``fork_session`` assigning [`config_options`][acp_agent.Session.config_options] is enough:
        the answer carries them (called there, this only assigns: the client has not seen the session yet).
        """
        self.config_options = options
        if not self._core.sink.holding:
            await self.send(schema.ConfigOptionUpdate(config_options=list(self.config_options)))

    async def update_available_commands(self, commands: Sequence[schema.AvailableCommand]) -> None:
        """Replace the session's slash commands and tell the client (complete list, R51).

        Like [`update_config_options`][acp_agent.Session.update_config_options], only assigns before the client has seen
        the session.
        """
        self.available_commands = commands
        if not self._core.sink.holding:
            await self.send(schema.AvailableCommandsUpdate(available_commands=list(commands)))

    async def suggest_prompts(self, suggestions: Sequence[str | Sequence[ContentBlock]]) -> bool:
        """[unstable, Preview] Offer follow-up prompts the user may send next, most likely first.

        Each suggestion is a string (one text block) or a list of content blocks the client could send unchanged as
        a prompt. Each call replaces the list the client shows; ``[]`` withdraws it. Suggestions are never part of
        the conversation (a replay leaves them out). Sent only to a client that advertised
        ``capabilities.session.promptSuggestions``: returns whether it was sent. Raises
        [`InvalidArgumentError`][acp_agent.InvalidArgumentError] (nothing sent) for an empty or blank suggestion, or
        a block other than ``text`` / ``resource_link`` that the client did not opt in to.
        """
        from ._session.suggestions import client_suggestions, suggestion_update

        accepts = client_suggestions(self._core.client.initialize)
        update = suggestion_update(suggestions, accepts)
        if accepts is None:
            return False
        sink = self._core.sink
        sink.send(update, record=False)  # P20: not history
        if sink.full():
            await sink.backpressure()
        return True

    async def update_tool_call(self, tool_call_id: str, **fields: Unpack[ToolCallFields]) -> None:
        """Create or patch a tool call by id; only the fields passed are sent (R71).

        Prefer the [`ToolCall`][acp_agent.ToolCall] handle of [`start_tool_call`][acp_agent.Session.start_tool_call];
        this is for tool calls announced by id. A keyword that is not a tool call field raises `TypeError`.
        """
        from .tool_calls import check_fields

        check_fields(dict(fields))
        await self.send(schema.ToolCallUpdate(tool_call_id=tool_call_id, **fields))

    async def tool_call_content(self, tool_call_id: str, content: Any) -> None:
        """Append one content item to a tool call announced by id."""
        await self.send(schema.ToolCallContentChunk(tool_call_id=tool_call_id, content=content))

    # -- asking the user ---------------------------------------------------------------

    async def request_permission(
        self,
        title: str,
        options: Sequence[PermissionOption],
        *,
        subject: Any = None,
        description: str | None = None,
    ) -> PermissionOutcome:
        """Ask the user; returns the typed outcome (only ``outcome.allowed`` permits).

        From foreground work the session reports ``requires_action`` while the answer is
        pending and ``running`` after (R59, R60), and ``session/cancel`` withdraws the
        request with ``$/cancel_request`` so it resolves as not approved (R66, R67). For
        background work, ask through its handle (``ToolCall.request_permission``,
        ``Terminal.request_permission``): the state does not change (R61).
        """
        from .questions import request_permission

        return await request_permission(self._core, title, options, subject=subject, description=description)

    async def ask(self, message: str, schema: Mapping[str, Any], *, tool_call: ToolCall | None = None
                  ) -> ElicitationResult:
        """Ask the user to fill in a form (``elicitation/create``, form mode); returns the typed answer.

        ``schema`` is a flat object schema (``{"type": "object", "properties": {...}, "required": [...]}``).
        Accepted content is checked against it (content that does not fit reads as ``cancel``, with
        ``result.problem`` saying why). Like [`request_permission`][acp_agent.Session.request_permission]: from
        foreground work the session is ``requires_action`` while the question waits and ``session/cancel`` withdraws it;
        with ``tool_call`` the question names that tool call, and for a listed (background) tool call
        it is owned by that work instead. Never ask for a secret in a form: use [`ask_url`][acp_agent.Session.ask_url].

        Raises:
            ElicitationUnsupportedError: The client did not advertise forms. Nothing is sent.
            InvalidArgumentError: A property asks for a secret (``"format": "password"``, R83), or
                ``tool_call`` is another session's. Nothing is sent.
            ValueError: ``schema`` is not a flat object schema. Nothing is sent.
        """
        from .questions import ask_form

        owner = _owner(self._core, tool_call)
        return await ask_form(self._core, self._core.client, message, schema,
                              tool_call_id=tool_call.id if tool_call is not None else None, **owner)

    async def ask_url(self, message: str, url: str, *, elicitation_id: str | None = None,
                      tool_call: ToolCall | None = None) -> ElicitationResult:
        """Send the user to ``url`` out of band (sign-in, a secret); returns whether they agreed to go.

        ``accept`` means only that the user opened the flow: finish it on your side, then call
        [`complete_elicitation`][acp_agent.Session.complete_elicitation] with the same ``elicitation_id`` (one is made
        up if not given; pass your own to recognise the flow when it completes). State and ownership as for
        [`ask`][acp_agent.Session.ask].
        """
        from .questions import ask_url

        owner = _owner(self._core, tool_call)
        return await ask_url(self._core, self._core.client, message, url, elicitation_id=elicitation_id,
                             tool_call_id=tool_call.id if tool_call is not None else None, **owner)

    def complete_elicitation(self, elicitation_id: str) -> None:
        """Tell the client the URL flow ``elicitation_id`` finished (``elicitation/complete``)."""
        from .questions import complete

        complete(self._core.client, elicitation_id)

    def set_turn_usage(self, usage: schema.Usage) -> None:
        """[unstable] Report the current foreground work's token usage: it goes on the idle that ends it."""
        if not self._core.turns.in_foreground():
            raise NotInTurnError("turn usage belongs to foreground work; call it from the turn it describes")
        self._core.turns.usage = usage

    # -- tool calls, terminals, scheduled work, children ------------------------------------

    async def start_tool_call(
        self,
        title: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        status: str = "pending",
        detach: bool | None = None,
        **fields: Unpack[ToolCallExtras],
    ) -> ToolCall:
        """Announce a new tool call (``title``, ``kind``, ``name``: R74) and return its handle.

        Extra keyword fields (``raw_input``, ``content``, ``locations``, ``meta``) go into
        the announcing update. ``detach=True`` makes it background work at once; by default
        a tool call started by foreground work belongs to it, and one started by background
        work is background work.
        """
        from .tool_calls import ToolCall, check_fields

        check_fields(dict(fields))
        announce: dict[str, Any] = {**fields, "title": title, "status": status}
        if kind is not None:
            announce["kind"] = kind
        if name is not None:
            announce["name"] = name
        entity = self._core.announce_tool_call(announce, detach=detach)
        tool = entity.handle = ToolCall(self._core, entity)
        await self._core.sink.backpressure()
        return tool

    async def start_terminal(self, command: str | Sequence[str], **options: Unpack[TerminalOptions]) -> Terminal:
        """Start a process in its own process group and announce it as a terminal.

        A string runs under ``sh -c``; a sequence is an argv. ``cwd`` defaults to the
        session's (it must be absolute, R34); ``env`` is added to the environment the process inherits
        (the agent's, without any ``ACP_AGENT_*`` variable: see the hosting docs, "What a terminal inherits").
        With ``tool_call``, the terminal is added to that tool call's content, and with
        ``ends_tool_call`` the process's exit also ends that tool call (``completed`` on exit
        code 0, else ``failed``) in the same step (see [`ToolCall.finish_with`][acp_agent.ToolCall.finish_with]). Output
        is streamed as it comes; the exit is reported after the last byte, exactly once.
        ``detach=True`` starts it as background work; by default foreground work owns a
        terminal it starts (until [`Terminal.detach`][acp_agent.Terminal.detach]) and one started by background
        work is background work. ``cancellable`` offers ``terminal/cancel`` (SIGTERM, then
        SIGKILL after ``grace`` seconds). ``tail_limit`` is how much output is retained for
        replay (default ``limits.terminal_output_bytes``; older output is dropped from the
        retained tail, never from the live stream).

        The options, each a keyword and each optional, are typed once in ``acp_agent.terminals.TerminalOptions``:
        ``cwd``, ``env``, ``tool_call``, ``ends_tool_call`` (``False``), ``detach``, ``cancellable`` (``True``),
        ``grace`` (3 seconds), ``size`` (``(cols, rows)``), ``tail_limit``, and ``flush_bytes`` / ``flush_interval``
        (output is sent once 64 KiB wait or the oldest waiting byte is 0.02 s old).

        Raises:
            TypeError: A keyword that is not one of these options. Nothing is started.
            InvalidArgumentError: ``cwd`` is not an absolute path, or ``tool_call`` is another
                session's (a `ValueError` too). Nothing is sent.
            ProcessStartError: The process cannot start (a missing command or cwd; a command
                line under ``sh -c`` starts even if its command is missing, and exits 127).
                Nothing is sent and no tool call changed.
            LimitExceededError: ``limits.max_processes`` processes already run on this
                connection, or a new listed item would go past ``limits.max_listed_items``.
                Nothing is sent.
            ToolCallStateError: ``tool_call`` has ended.
            SessionClosedError: The session closed.
        """
        from .terminals import start_terminal

        return await start_terminal(self._core, command, **options)

    async def schedule(
        self,
        delay: float,
        work: Callable[[], Awaitable[StopReason | None]],
        *,
        title: str = "Wake up",
        name: str | None = "schedule_wakeup",
        repeat: float | None = None,
        durable: str | None = None,
        payload: Any = None,
    ) -> ToolCall:
        """Schedule foreground work: a tool call that stays ``pending`` (listed) until it fires.

        One-shot: after ``delay`` seconds the tool call completes and ``work`` starts as new
        foreground work in the same step (R95). With ``repeat``, it fires every ``repeat``
        seconds after the first and stays ``pending`` until cancelled. Either way it offers
        ``tool_call/cancel``.

        A wake-up ends with its session (close, shutdown, a crash): a replay shows it ``cancelled``
        (or ``failed`` after a crash). A **durable** one (``durable=`` a name of your choosing,
        ``payload=`` any JSON value) comes back: its name, payload, due time (wall clock) and
        ``repeat`` are kept with the session in its store, and when the session is loaded again
        (``session/resume``, in this process or after a restart) the SDK calls
        [`Agent.rearm_wakeup`][acp_agent.Agent.rearm_wakeup]``(session, name, payload)`` right after
        [`Agent.resume_session`][acp_agent.Agent.resume_session]; the work it returns is scheduled
        again as a new ``pending`` tool call for the time left (at once if the due time passed). A
        wake-up that fired for good or was cancelled is not kept.

        Raises:
            LimitExceededError: One more listed item would go past ``limits.max_listed_items``.
                Nothing is sent.
            TypeError: ``payload`` is not JSON-serializable (a durable wake-up is stored).
        """
        from .tool_calls import CANCEL_CAPABILITIES

        entry: dict[str, Any] | None = None
        if durable is not None:
            orjson.dumps(payload)  # TypeError before anything is sent: it is stored with the session
            entry = {"name": durable, "payload": payload, "due": time.time() + delay, "repeat": repeat,
                     "title": title}
        tool = await self.start_tool_call(title, kind="other", name=name, detach=True,
                                          capabilities=CANCEL_CAPABILITIES)
        tool.wake_up(delay, work, repeat=repeat, durable=entry)
        return tool

    async def spawn_subagent(
        self,
        title: str,
        *,
        description: str | None = None,
        cancellable: bool = True,
        detach: bool | None = True,
    ) -> Subagent[Session]:
        """Create a child session owned by this one and announce it (R79).

        The child starts ``idle``; give it work with [`Subagent.start`][acp_agent.Subagent.start]. ``cancellable``
        advertises ``capabilities.cancel`` (the client may ``session/cancel`` the child).
        ``detach=False`` keeps it foreground work (unlisted, cancelled with this session's
        foreground work) until [`Subagent.detach`][acp_agent.Subagent.detach].
        """
        child, entity = await self._core.open_child(title, description=description, cancellable=cancellable,
                                                     detach=detach)
        return Subagent(self, session_of(child), entity, engines=(self._core, child))

    # -- foreground and background work ---------------------------------------------------

    def start_foreground(self, work: Callable[[], Awaitable[StopReason | None]], *, now: bool | None = None) -> None:
        """Start agent-initiated foreground work (no prompt); it runs after current work.

        ``work`` returns the stop reason (``None`` means ``end_turn``). The session reports
        ``running`` now if it was idle (so from an exit callback or a finished tool call the
        snapshot that drops the item already says ``running``, R95) and ``idle`` with the stop
        reason when the work ends. Use it to talk to the user after a turn ended.

        Args:
            work: The foreground work to run; its return value is the stop reason.
            now: Deprecated since 0.2.0 and ignored (removed in 0.3.0): ``running`` is always reported at
                once when the session is idle. Passing it emits a `DeprecationWarning`.
        """
        if now is not None:
            deprecated.parameter("Session.start_foreground", "now", "running is always reported at once when the "
                                 "session is idle; call start_foreground(work)")
        self._core.turns.start(work)

    def spawn(self, func: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``func(*args)`` as background work of this session (not foreground work).

        It outlives the turn and ends with the session. A [`SessionClosedError`][acp_agent.SessionClosedError]
        ends it quietly; other exceptions are logged.
        """
        self._core.spawn(func, *args)

    @property
    def task_group(self) -> TaskGroup:
        """The session's task group: work in it outlives turns and ends with the session."""
        return self._core.task_group

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Coalesce the ``background`` list changes made inside the block into at most one snapshot.

        Entity updates still go out at once, in order; only the repeated ``state_update``
        waits until the block ends, so it can never precede an update it depends on. The
        batch belongs to the calling task.
        """
        with self._core.snapshots.batch():
            yield

    async def wait_idle(self) -> None:
        """Wait until the session has no foreground work, running or queued."""
        await self._core.wait_idle()


def session_of(core: SessionCore) -> Session:
    """The [`Session`][acp_agent.Session] over an engine (for the runtime: every engine its factory makes has one)."""
    facade = core.facade
    assert isinstance(facade, Session)
    return facade


@functools.cache
def _talk() -> tuple[type[BaseModel], ...]:
    """The updates that are agent talk (only sent during foreground work)."""
    return (schema.AgentMessage, schema.AgentThought, schema.AgentMessageChunk, schema.AgentThoughtChunk)


def _owner(core: SessionCore, tool_call: ToolCall | None) -> dict[str, Any]:
    """Who owns a question asked for a tool call: listed work owns it (R107), else the asking task."""
    if tool_call is None:
        return {}
    return {"on_behalf_of": core.own_entity("tool_call", tool_call.id, tool_call)}


def _meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    return {"meta": meta} if meta is not None else {}


async def rearm_wakeups(session: Session, agent: Any) -> int:
    """Schedule again the durable wake-ups ``session``'s store kept (see
    [`Session.schedule`][acp_agent.Session.schedule]), asking ``agent.rearm_wakeup`` for each one's work;
    returns how many were re-armed. Called by the SDK when a session is loaded."""
    record = session._core.record
    stored = dict(record.wakeups)
    record.wakeups.clear()
    rearmed = 0
    for entry in stored.values():
        work = await agent.rearm_wakeup(session, entry["name"], entry.get("payload"))
        if work is not None:
            await session.schedule(max(0.0, float(entry["due"]) - time.time()), work, title=entry["title"],
                                   repeat=entry.get("repeat"), durable=entry["name"], payload=entry.get("payload"))
            rearmed += 1
    return rearmed
