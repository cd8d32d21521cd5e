"""One pydantic-ai run seen by the client: the capability that turns the run's events into ACP updates.

[`TurnBridge`][acp_agent.integrations.pydantic_ai.bridge.TurnBridge] is a pydantic-ai capability added
to each run (``agent.iter(..., capabilities=[bridge])``), so it works with any agent, through public
hooks only:

- ``on_event``: text and thinking parts stream as agent message and thought chunks, in the order the
  model produced them (one ACP message per part); a function tool call is announced as an ACP tool
  call (``pending``, with the presenter's title, kind, locations and content, such as a diff to approve)
  and ended by its result
  (``completed``, or ``failed`` for a failure, a retry or a rejection);
- ``wrap_tool_execute``: right before a tool's body runs its tool call goes ``in_progress``, and the
  body can reach the ACP session and its tool call ([`current_tool`][acp_agent.integrations.pydantic_ai.current_tool]);
  a tool marked as background is handed off instead (listed, cancellable; its result comes back to the
  model in a follow-up turn);
- ``handle_deferred_tool_calls``: a tool that needs approval asks ``session/request_permission``
  (the tool call stays ``pending`` meanwhile) unless the policy or a remembered "always" decides; a
  rejected call never runs, and the model is told it was rejected.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelResponseOrigin,
    ModelResponsePart,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDefinition, ToolDenied

from ...schema import AgentMessage, AgentThought, Content, TextContent, ToolCallLocation
from ...session import MessageStream, Session
from ...tool_calls import ToolCall
from .permissions import PERMISSION_OPTIONS, PermissionPolicy, remember, remembered
from .presenter import ToolPresentation, ToolPresenter, present_tool

__all__ = ["BACKGROUND_METADATA_KEY", "FollowUp", "ToolContext", "TurnBridge", "background_tool", "current_tool"]

BACKGROUND_METADATA_KEY = "acp_background"
"""A tool whose ``metadata`` has this key set to true runs as background work (see ``background_tool``)."""

CHUNK_CHARS = 8192
"""The longest text sent in one message chunk (a longer delta is split)."""

RESULT_CHARS = 4000
"""How much of a tool's result is shown in its tool call (the model gets all of it)."""

REJECTED = "The user rejected this tool call; it did not run. Do not retry it unless asked."


FollowUp = Callable[[str], Awaitable[Any]]
"""Runs the model on a text the agent gives it (a turn no user prompted)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool can reach of ACP: the session and its own tool call."""

    session: Session
    tool_call: ToolCall
    run_follow_up: FollowUp | None = None
    presenter: ToolPresenter | None = None
    """The run's tool presenter (a subagent started with ``delegate`` uses it too)."""
    policy: PermissionPolicy | None = None
    """The run's permission policy (a subagent started with ``delegate`` uses it too)."""
    shown: set[str] = field(default_factory=set)
    """Tool calls whose output the tool showed itself (see `output_shown`)."""

    def output_shown(self) -> None:
        """Say the tool call already shows the tool's output (a terminal does): its return text is then not
        appended to the tool call (the user would read it twice). A tool's output is never sent as ``rawOutput``
        too: the text content carries it, and clients that show both (acpx) would print it twice."""
        self.shown.add(self.tool_call.id)

    def follow_up_work(self, text: str) -> Callable[[], Awaitable[Any]] | None:
        """The foreground work of a follow-up turn on ``text`` (``None`` when the agent offers none):
        pass it to ``ToolCall.complete(follow_up=...)`` so the turn starts in the step that ends the call."""
        run = self.run_follow_up
        if run is None:
            return None

        async def work() -> None:
            await run(text)

        return work

    def follow_up(self, text: str) -> None:
        """Start a turn of the model on ``text`` after the current work (e.g. when a background job
        ends); a no-op when the agent offers no follow-up turns. Call it in the step that ends the
        work it reports (an exit callback is such a step)."""
        work = self.follow_up_work(text)
        if work is not None and not self.session.closed:
            self.session.start_foreground(work)


_CURRENT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar("acp_tool_context", default=None)


def current_tool() -> ToolContext:
    """The ACP session and tool call of the tool running now (call it from a tool's body).

    Raises `RuntimeError` outside a tool served by a `PydanticAIAgent`.
    """
    context = _CURRENT.get()
    if context is None:
        raise RuntimeError("current_tool() is only available inside a tool run by a PydanticAIAgent")
    return context


def _args(part: ToolCallPart) -> dict[str, Any]:
    try:
        return part.args_as_dict()
    except ValueError:  # the model sent arguments that are not JSON: show them as they are
        return {"args": part.args}


def _jsonable(value: Any) -> Any:
    try:
        return orjson.loads(orjson.dumps(value, default=str))
    except TypeError:
        return str(value)


def _text_content(text: str) -> list[Any]:
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f"\n… ({len(text) - RESULT_CHARS} more characters)"
    return [Content(content=TextContent(text=text))] if text else []


@dataclass(eq=False)
class TurnBridge(AbstractCapability[Any]):
    """The per-run capability that shows a pydantic-ai run in an ACP session (see the module docstring)."""

    session: Session
    presenter: ToolPresenter | None = None
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    background_tools: Collection[str] = ()
    follow_up: FollowUp | None = None
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)
    """Tool calls whose output their tool showed itself (`ToolContext.output_shown`)."""
    model: Model | None = None
    """The model of the run's latest request (for its context window)."""
    _stream: MessageStream | None = None
    _origins: dict[tuple[str, int], ModelResponseOrigin] = field(default_factory=dict)
    """The latest attempt seen at each request step of the run (``(run_id, run_step)``)."""
    _streamed: dict[Any, list[tuple[str, bool]]] = field(default_factory=dict)
    """The messages and thoughts each response streamed, to clear when another attempt replaces it."""
    _response: Any = None

    # -- the event stream ---------------------------------------------------------------------

    async def on_event(self, ctx: RunContext[Any], *, event: AgentStreamEvent) -> None:
        """Show one event of the run (text, thinking, tool calls and their results)."""
        if isinstance(event, PartStartEvent | PartDeltaEvent) and not await self._current(event.origin):
            return
        if ctx is not None and isinstance(ctx.model, Model):
            self.model = ctx.model
        if isinstance(event, PartStartEvent):
            await self._start_part(event.part)
        elif isinstance(event, PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextPartDelta):
                await self._write(delta.content_delta, thought=False)
            elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                await self._write(delta.content_delta, thought=True)
        elif isinstance(event, FunctionToolCallEvent):
            self._stream = None
            await self.announce(event.part)
        elif isinstance(event, FunctionToolResultEvent):
            await self._result(event.part)

    async def _current(self, origin: ModelResponseOrigin | None) -> bool:
        """Whether an event of the response ``origin`` is shown: a response that another attempt replaced
        (a retry, a fallback model) is dropped, and what it had streamed is cleared on the client."""
        if origin is None:
            return True
        key = (origin.run_id, origin.run_step)
        latest = self._origins.get(key)
        if latest is not None and latest.supersedes(origin):
            return False
        if latest is None or origin.supersedes(latest):
            self._origins[key] = origin
            self._stream = None
            for message_id, thought in self._streamed.pop(key, []):
                kind = AgentThought if thought else AgentMessage
                await self.session.send(kind(message_id=message_id, content=[]))
        self._response = key
        return True

    async def _start_part(self, part: ModelResponsePart) -> None:
        self._stream = None  # every text or thinking part is its own message
        if isinstance(part, TextPart):
            self._stream = self.session.message()
            await self._write(part.content, thought=False)
        elif isinstance(part, ThinkingPart):
            self._stream = self.session.thought()
            await self._write(part.content, thought=True)

    async def _write(self, text: str, *, thought: bool) -> None:
        if not text:
            return
        stream = self._stream
        if stream is None:
            stream = self._stream = self.session.thought() if thought else self.session.message()
        streamed = self._streamed.setdefault(self._response, [])
        if not streamed or streamed[-1][0] != stream.message_id:
            streamed.append((stream.message_id, thought))
        for start in range(0, len(text), CHUNK_CHARS):
            await stream.write(text[start:start + CHUNK_CHARS])

    # -- tool calls ---------------------------------------------------------------------------

    async def present(self, tool_name: str, args: dict[str, Any]) -> ToolPresentation:
        """The presenter's presentation of a call (awaited if it is async), else the default one."""
        presentation: Any = None
        if self.presenter is not None:
            presentation = self.presenter(tool_name, args, self.session)
            if inspect.isawaitable(presentation):
                presentation = await presentation
        if presentation is None:
            presentation = present_tool(tool_name, args, self.session)
        return cast(ToolPresentation, presentation)

    async def announce(self, part: ToolCallPart) -> ToolCall:
        """The ACP tool call of a pydantic-ai tool call, announced ``pending`` the first time."""
        tool = self.tool_calls.get(part.tool_call_id)
        if tool is not None:
            return tool
        args = _args(part)
        presentation = await self.present(part.tool_name, args)
        extras: dict[str, Any] = {"raw_input": _jsonable(args)}
        if presentation.locations:
            extras["locations"] = [ToolCallLocation(path=path) for path in presentation.locations]
        if presentation.content:
            extras["content"] = list(presentation.content)
        tool = await self.session.start_tool_call(presentation.title, kind=presentation.kind,
                                                  name=part.tool_name, **extras)
        self.tool_calls[part.tool_call_id] = tool
        self.titles[part.tool_call_id] = presentation.title
        return tool

    async def _result(self, part: Any) -> None:
        tool = self.tool_calls.get(part.tool_call_id)
        if tool is None or tool.final or tool.detached:
            return  # handed off to background work, which ends it itself
        # The result is appended: content the tool showed itself (a diff, a terminal) stays.
        if isinstance(part, ToolReturnPart):
            shown = tool.id in self.shown
            self.shown.discard(tool.id)
            outcome = part.outcome
            if not shown:
                for item in _text_content(part.model_response_str()):
                    await tool.append(item)
            if outcome == "success":  # the text content carries the output, once: no rawOutput repeats it
                await tool.complete()
            elif outcome == "interrupted":
                await tool.cancel()
            else:
                await tool.fail(raw_output={"outcome": outcome})
        else:  # RetryPromptPart: invalid arguments or ModelRetry; the model tries again
            for item in _text_content(part.model_response()):
                await tool.append(item)
            await tool.fail()

    def _is_background(self, tool_def: ToolDefinition) -> bool:
        metadata = tool_def.metadata or {}
        return tool_def.name in self.background_tools or bool(metadata.get(BACKGROUND_METADATA_KEY))

    async def wrap_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition,
                                args: Any, handler: Any) -> Any:
        """Mark the tool call ``in_progress`` as its body starts; hand background tools off."""
        tool = await self.announce(call)
        if tool.status == "pending":
            await tool.start()
        if self._is_background(tool_def):
            return await self._hand_off(call, tool, args, handler)
        token = _CURRENT.set(self._context(tool))
        try:
            return await handler(args)
        finally:
            _CURRENT.reset(token)

    def _context(self, tool: ToolCall) -> ToolContext:
        return ToolContext(self.session, tool, self.follow_up, self.presenter, self.policy, self.shown)

    async def _hand_off(self, call: ToolCallPart, tool: ToolCall, args: Any, handler: Any) -> str:
        context = self._context(tool)
        name = call.tool_name

        async def body(tool: ToolCall) -> None:
            token = _CURRENT.set(context)
            try:
                result = await handler(args)
            except Exception as exc:  # the follow-up turn tells the model; the tool call says failed
                text = f"{type(exc).__name__}: {exc}"
                with self.session.batch():  # one step: the call ends and the follow-up turn starts
                    await tool.fail(content=_text_content(text))
                    context.follow_up(f"[background] {name} (tool call {tool.id}) failed: {text}")
            else:
                await tool.complete(content=_text_content(str(result)),
                                    follow_up=context.follow_up_work(
                                        f"[background] {name} (tool call {tool.id}) finished: {result}"))
            finally:
                _CURRENT.reset(token)

        tool.run(body)  # listed and cancellable from now on; it outlives the turn
        return (f"Started {name} in the background (tool call {tool.id}); its result will arrive "
                "in a later message. Do not wait for it.")

    # -- approvals ----------------------------------------------------------------------------

    async def handle_deferred_tool_calls(self, ctx: RunContext[Any], *,
                                         requests: DeferredToolRequests) -> DeferredToolResults | None:
        """Decide each call that needs approval: policy, remembered answer, or the user."""
        if not requests.approvals:
            return None
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in requests.approvals:
            approvals[call.tool_call_id] = await self._approve(call, requests.validated_args.get(call.tool_call_id))
        return DeferredToolResults(approvals=approvals)

    async def _approve(self, call: ToolCallPart, validated: Any) -> bool | ToolDenied:
        args = validated if isinstance(validated, dict) else _args(call)
        session = self.session
        decision = self.policy.decide(call.tool_name, args, session)
        key = self.policy.scope(call.tool_name, args)
        if decision == "ask":
            decision = remembered(session, key)
        if decision == "ask":
            tool = await self.announce(call)
            title = self.titles.get(call.tool_call_id, call.tool_name)
            outcome = await tool.request_permission(f"Allow {title}?", PERMISSION_OPTIONS)
            if outcome.option_id in ("allow_always", "reject_always"):
                remember(session, key, "allow" if outcome.allowed else "reject")
            decision = "allow" if outcome.allowed else "reject"
        return True if decision == "allow" else ToolDenied(REJECTED)


def background_tool(metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Tool ``metadata`` that makes a tool run as background work:
    ``@agent.tool_plain(metadata=background_tool())``."""
    return {**(metadata or {}), BACKGROUND_METADATA_KEY: True}
