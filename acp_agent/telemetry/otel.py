"""OpenTelemetry traces and metrics of an agent: the one module of the library that imports ``opentelemetry``.

`OpenTelemetry` implements the engine's `Telemetry` interface with the OpenTelemetry API. It is loaded only when
the environment configures an OTLP exporter (`from_environment`) or an author sets ``Agent.telemetry``. Span and
attribute names follow the OpenTelemetry GenAI agent conventions (``invoke_agent``, ``execute_tool``) and the
JSON-RPC ones (``rpc.*``, ``jsonrpc.request.id``); both are "Development" upstream, and the guide
(docs/guides/telemetry.md) lists what is emitted.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from .._util.episodes import Episode
from .._util.telemetry import Recorder, Span

__all__ = ["OpenTelemetry", "from_environment"]

logger = logging.getLogger(__name__)

SCOPE: Final = "acp_agent"
"""The instrumentation scope name of every span and metric."""
_FINAL: Final = frozenset({"completed", "failed", "cancelled"})


class _Span:
    """A started OpenTelemetry span and what to record when it ends."""

    __slots__ = ("_done", "_on_end", "_token", "span", "start")

    def __init__(self, span: trace.Span, on_end: Any = None, token: object = None) -> None:
        self.span = span
        self.start = time.monotonic()
        self._on_end = on_end
        self._token = token
        self._done = False

    @property
    def trace_id(self) -> str:
        ctx = self.span.get_span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else ""

    def end(self, error: str | None = None, **attributes: Any) -> None:
        if self._done:
            return
        self._done = True
        span = self.span
        for key, value in attributes.items():
            if value is not None:
                span.set_attribute(key, value)
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR))
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
        span.end()
        if self._on_end is not None:
            self._on_end(self, error)


@dataclass(slots=True)
class _Item:
    span: _Span
    name: str
    background: bool


@dataclass(slots=True)
class _Pending:
    """A terminal just announced: its span starts (back-dated) once it is known whether a tool call holds it."""

    terminal_id: str
    attributes: dict[str, Any]
    start_ns: int
    background: bool
    context: otel_context.Context


@dataclass(slots=True)
class _SessionState:
    turn: _Span | None = None
    first_update: bool = False
    items: dict[str, _Item] = field(default_factory=dict)
    pending: _Pending | None = None


class OpenTelemetry:
    """Reports requests, turns, tool calls and terminals as OpenTelemetry spans and metrics.

    ``tracer_provider`` and ``meter_provider`` default to the global ones (``opentelemetry.trace`` and
    ``opentelemetry.metrics``): configure OpenTelemetry yourself and set ``Agent.telemetry = OpenTelemetry()``,
    or let `from_environment` set up OTLP export from the ``OTEL_*`` variables. ``record_commands`` puts each
    terminal's command line on its span (off by default: commands may hold secrets; also
    ``ACP_AGENT_TELEMETRY_COMMANDS=1``).
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None, *, record_commands: bool = False) -> None:
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.record_commands = record_commands
        self.turn_duration = meter.create_histogram("acp.turn.duration", "s", "Duration of foreground work")
        self.first_update = meter.create_histogram("acp.turn.time_to_first_update", "s",
                                                   "Time from a turn's start to its first session update")
        self.tool_duration = meter.create_histogram("gen_ai.execute_tool.duration", "s",
                                                    "Duration of a tool call, by name and final status")
        self.queue_wait = meter.create_histogram("acp.prompt.queue_wait", "s",
                                                 "Time a prompt was held before its turn started")
        self.request_duration = meter.create_histogram("rpc.server.call.duration", "s",
                                                       "Duration of a handled JSON-RPC request")
        self.live_sessions = meter.create_up_down_counter("acp.sessions.live", "{session}", "Sessions open")
        self.background = meter.create_up_down_counter("acp.background.items", "{item}",
                                                       "Tool calls and terminals running as background work")
        self.errors = meter.create_counter("acp.request.errors", "{request}", "Requests answered with an error")
        self.received = self.sent = 0  # summed on the hot path, read by the meter when it collects
        meter.create_observable_counter("acp.wire.bytes", [self._observe_wire], "By",
                                        "Bytes read from and written to the client")

    def _observe_wire(self, options: metrics.CallbackOptions) -> list[metrics.Observation]:
        return [metrics.Observation(self.received, {"network.io.direction": "receive"}),
                metrics.Observation(self.sent, {"network.io.direction": "transmit"})]

    def bind(self, *, agent_name: str, principal: str | None) -> Recorder:
        """The recorder of one connection."""
        return _Connection(self, agent_name, principal)


class _Connection:
    """`OpenTelemetry` bound to one connection: its agent, its principal, its sessions' open spans."""

    def __init__(self, otel: OpenTelemetry, agent_name: str, principal: str | None) -> None:
        self.otel = otel
        self.agent_name = agent_name
        self.principal = principal
        self.states: dict[str, _SessionState] = {}

    # -- requests ----------------------------------------------------------------------------

    def request(self, method: str, request_id: Any, params: Mapping[str, Any]) -> Span:
        meta = params.get("_meta")
        parent = propagate.extract(meta) if isinstance(meta, dict) else None
        attributes: dict[str, Any] = {"rpc.system.name": "jsonrpc", "rpc.method": method,
                                      "jsonrpc.request.id": str(request_id), "jsonrpc.protocol.version": "2.0"}
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            attributes["acp.session.id"] = session_id
        if self.principal is not None:
            attributes["acp.principal"] = self.principal
        span = self.otel.tracer.start_span(method, parent, SpanKind.SERVER, attributes)
        return _Span(span, self._answered)

    def _answered(self, span: _Span, error: str | None) -> None:
        method = span.span.attributes.get("rpc.method", "") if hasattr(span.span, "attributes") else ""
        labels: dict[str, Any] = {"rpc.method": str(method)}
        if error is not None:
            labels["rpc.response.status_code"] = error
            self.otel.errors.add(1, labels)
        self.otel.request_duration.record(time.monotonic() - span.start, labels)

    def activate(self, span: Span) -> Any:
        assert isinstance(span, _Span)
        return trace.use_span(span.span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def send_request(self, method: str, params: dict[str, Any]) -> tuple[Span, dict[str, Any]]:
        attributes: dict[str, Any] = {"rpc.system.name": "jsonrpc", "rpc.method": method}
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            attributes["acp.session.id"] = session_id
        parent = None
        tool = self._tool_of(params)
        if tool is not None:  # a question on behalf of a tool call: part of that tool call
            parent = trace.set_span_in_context(tool.span.span)
        span = self.otel.tracer.start_span(method, parent, SpanKind.CLIENT, attributes)
        meta = dict(params.get("_meta") or {})
        propagate.inject(meta, context=trace.set_span_in_context(span))
        return _Span(span), {**params, "_meta": meta}

    def _tool_of(self, params: dict[str, Any]) -> _Item | None:
        subject = params.get("subject")
        state = self.states.get(params.get("sessionId", ""))
        if state is None or not isinstance(subject, dict) or not isinstance(subject.get("toolCall"), dict):
            return None
        return state.items.get("tool:" + str(subject["toolCall"].get("toolCallId")))

    # -- turns -------------------------------------------------------------------------------

    def capture(self) -> object:
        return otel_context.get_current(), time.monotonic()

    def turn(self, session_id: str, captured: object, *, prompt: bool, child: bool) -> Span:
        context, queued = captured if isinstance(captured, tuple) else (None, None)
        links = None
        if prompt and queued is not None:
            self.otel.queue_wait.record(time.monotonic() - queued)
        if not (prompt or child) and context is not None:
            # Agent-initiated work (a wake-up, a follow-up) outlives what started it: its own trace, linked.
            started_by = trace.get_current_span(context).get_span_context()
            links = [Link(started_by)] if started_by.is_valid else None
            context = otel_context.Context()
        trigger = "prompt" if prompt else "subagent" if child else "agent"
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent_name,
                      "gen_ai.conversation.id": session_id, "acp.session.id": session_id, "acp.turn.trigger": trigger}
        if self.principal is not None:
            attributes["acp.principal"] = self.principal
        span = self.otel.tracer.start_span(f"invoke_agent {self.agent_name}", context, SpanKind.INTERNAL,
                                           attributes, links)
        token = otel_context.attach(trace.set_span_in_context(span))
        state = self.states.setdefault(session_id, _SessionState())
        turn = state.turn = _Span(span, self._turn_ended, token)
        state.first_update = False
        return turn

    def _turn_ended(self, span: _Span, error: str | None) -> None:
        self.otel.turn_duration.record(time.monotonic() - span.start, {"gen_ai.agent.name": self.agent_name})
        for state in self.states.values():
            if state.turn is span:
                state.turn = None

    # -- updates: tool calls, terminals, usage ------------------------------------------------------

    def update(self, session_id: str, update: Any, *, detach: bool | None) -> None:
        state = self.states.setdefault(session_id, _SessionState())
        if state.turn is not None and not state.first_update:
            state.first_update = True
            self.otel.first_update.record(time.monotonic() - state.turn.start)
        kind = getattr(update, "session_update", None)
        pending = state.pending
        if pending is not None:
            state.pending = None
            holder = None
            if kind == "tool_call_content_chunk" and getattr(update.content, "terminal_id", None) == \
                    pending.terminal_id:
                holder = state.items.get("tool:" + update.tool_call_id)
            self._start_terminal(state, pending, holder)
        if kind == "tool_call_update":
            self._tool_call(session_id, state, update, detach)
        elif kind == "terminal_update":
            self._terminal(session_id, state, update, detach)
        elif kind == "usage_update" and state.turn is not None:
            span = state.turn.span
            span.set_attribute("acp.usage.context_used", update.used)
            span.set_attribute("acp.usage.context_size", update.size)
            if update.cost is not None:
                span.set_attribute("acp.usage.cost.amount", update.cost.amount)
                span.set_attribute("acp.usage.cost.currency", update.cost.currency)

    def _start_item(self, state: _SessionState, key: str, name: str, attributes: dict[str, Any],
                    background: bool, context: otel_context.Context | None = None, start_ns: int | None = None
                    ) -> _Span:
        links = None
        if background:  # background work outlives the turn that started it: its own trace, linked to the turn
            current = trace.get_current_span(context).get_span_context()
            links = [Link(current)] if current.is_valid else None
            context = otel_context.Context()
            self.otel.background.add(1)
        attributes["acp.background"] = background
        if self.principal is not None:
            attributes["acp.principal"] = self.principal
        span = _Span(self.otel.tracer.start_span(name, context, SpanKind.INTERNAL, attributes, links, start_ns))
        state.items[key] = _Item(span, name, background)
        return span

    def _end_item(self, state: _SessionState, key: str) -> _Item | None:
        item = state.items.pop(key, None)
        if item is not None and item.background:
            self.otel.background.add(-1)
        return item

    def _tool_call(self, session_id: str, state: _SessionState, update: Any, detach: bool | None) -> None:
        key = "tool:" + update.tool_call_id
        item = state.items.get(key)
        if item is None:
            name = update.name or update.kind or "tool"
            operation = "acp.tool_call" if _framework_traces_tools() else "execute_tool"
            attributes = {"gen_ai.tool.name": name, "gen_ai.tool.call.id": update.tool_call_id,
                          "acp.session.id": session_id, "gen_ai.conversation.id": session_id}
            if operation == "execute_tool":
                attributes["gen_ai.operation.name"] = "execute_tool"
            self._start_item(state, key, f"{operation} {name}", attributes, bool(detach))
            state.items[key].name = name
            item = state.items[key]
        status = update.status
        if status in _FINAL:
            self._end_item(state, key)
            item.span.end("tool_call_" + status if status != "completed" else None,
                          **{"acp.tool_call.status": status})
            self.otel.tool_duration.record(time.monotonic() - item.span.start,
                                           {"gen_ai.tool.name": item.name, "acp.tool_call.status": status})

    def _terminal(self, session_id: str, state: _SessionState, update: Any, detach: bool | None) -> None:
        key = "terminal:" + update.terminal_id
        if key not in state.items:
            attributes: dict[str, Any] = {"acp.terminal.id": update.terminal_id, "acp.session.id": session_id}
            if self.otel.record_commands and update.command:
                attributes["process.command_line"] = update.command
            state.pending = _Pending(update.terminal_id, attributes, time.time_ns(), bool(detach),
                                     otel_context.get_current())
            if update.exit_status is None:
                return
            self._start_terminal(state, state.pending, None)
            state.pending = None
        item = state.items[key]
        exit_status = update.exit_status
        if exit_status is not None:
            self._end_item(state, key)
            code, signal = exit_status.exit_code, exit_status.signal
            failed = "signal" if signal else ("exit_code" if code not in (0, None) else None)
            item.span.end(failed, **{"process.exit.code": code, "acp.terminal.signal": signal})

    def _start_terminal(self, state: _SessionState, pending: _Pending, holder: _Item | None) -> None:
        context = pending.context
        if holder is not None:  # the terminal of a tool call: part of it
            context = trace.set_span_in_context(holder.span.span, context)
        span = self._start_item(state, "terminal:" + pending.terminal_id, "terminal", pending.attributes,
                                pending.background, context, pending.start_ns)
        span.start = time.monotonic() - (time.time_ns() - pending.start_ns) / 1e9

    # -- gauges and counters -----------------------------------------------------------------

    def sessions(self, delta: int) -> None:
        self.otel.live_sessions.add(delta)

    def wire(self, received: int = 0, sent: int = 0) -> None:
        otel = self.otel
        otel.received += received
        otel.sent += sent


def _framework_traces_tools() -> bool:
    """Whether the current span is a GenAI span another instrumentation made (pydantic-ai's agent run or tool):
    that framework emits ``execute_tool`` for the tools it runs, so the ACP tool call is not a second one."""
    current = trace.get_current_span()
    scope = getattr(current, "instrumentation_scope", None)
    if scope is None or getattr(scope, "name", SCOPE) == SCOPE:
        return False
    return "gen_ai.operation.name" in (getattr(current, "attributes", None) or {})


class _OnePerEpisode(logging.Handler):
    """Passes the OpenTelemetry SDK's warnings and errors (a collector that is down) on to the root logger's
    handlers once per episode (`acp_agent._util.episodes`), never to stdout."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.episode = Episode()

    def emit(self, record: logging.LogRecord) -> None:
        logged, suppressed = self.episode.occur()
        if not logged:
            return
        record.msg = record.getMessage() + self.episode.note(suppressed)
        record.args = None
        record.exc_info = None
        record.exc_text = None
        for handler in logging.getLogger().handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


def from_environment(*, record_commands: bool = False) -> OpenTelemetry:
    """OTLP/HTTP export of traces and metrics configured by the standard ``OTEL_*`` variables.

    Sets the global tracer and meter providers when none is set yet (so a framework's own spans, pydantic-ai's,
    nest under the turn), and sends the SDK's export errors to the log once per episode.
    """
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    quiet = logging.getLogger("opentelemetry")
    if not any(isinstance(h, _OnePerEpisode) for h in quiet.handlers):
        quiet.addHandler(_OnePerEpisode())
        quiet.propagate = False
    resource = Resource.create({"service.name": "acp-agent"} if _no_service_name() else {})
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter())
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    atexit.register(_flush_at_exit, tracer_provider, meter_provider)
    trace.set_tracer_provider(tracer_provider)  # ignored (with a warning) when one is set already
    metrics.set_meter_provider(meter_provider)
    return OpenTelemetry(tracer_provider, meter_provider, record_commands=record_commands)


EXIT_FLUSH_SECONDS: Final = 2.0
"""How long the process's exit waits for the last spans and metrics to go out (a collector that is down would
otherwise hold the exit for the exporter's retries)."""


def _flush_at_exit(*providers: Any) -> None:
    def shut_down() -> None:
        for provider in providers:
            with contextlib.suppress(Exception):
                provider.shutdown()

    thread = threading.Thread(target=shut_down, name="acp-telemetry-exit", daemon=True)
    thread.start()
    thread.join(EXIT_FLUSH_SECONDS)


def _no_service_name() -> bool:
    return not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
