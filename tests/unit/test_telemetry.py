"""Telemetry (issue 41): the spans and metrics an agent reports, checked with in-memory OpenTelemetry exporters on
asyncio and trio; and that telemetry off costs no import (the OTLP receiver tests are tests/e2e/test_telemetry_otlp.py).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from acp_agent import Agent, RequestError, Session, StopReason, TextContent
from acp_agent.telemetry.otel import OpenTelemetry
from acp_agent.testing import connect_agent
from acp_agent.testing.schema import SchemaValidator
from docs_src.telemetry_agent import Coder

pytestmark = pytest.mark.anyio

TRACEPARENT = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"


class Traced:
    """An in-memory tracer and meter provider, and the `OpenTelemetry` over them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.telemetry = OpenTelemetry(self.tracer_provider, MeterProvider(metric_readers=[self.reader]),
                                       record_commands=True)

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_coding_turn_is_one_trace_of_request_turn_tool_permission_and_terminal() -> None:
    traced = Traced()
    agent = Coder()
    agent.telemetry = traced.telemetry  # type: ignore[misc]
    async with connect_agent(agent, keep_transcript=True) as client:
        await client.initialize()
        sid = await client.new_session()
        view = client.view(sid)
        await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}],
                                                "_meta": {"traceparent": TRACEPARENT}})
        await client.wait_for(lambda: view.idle_count >= 1 and view.background == [])
        await client.wait_for(lambda: len(traced.named("terminal")) == 2)
        sent = [entry.message for entry in client.transcript if entry.direction == "agent->client"]
        assert SchemaValidator().check_transcript(client.transcript) == []  # the injected _meta included

    prompt = traced.one("session/prompt")
    assert prompt.kind == SpanKind.SERVER and format(prompt.context.trace_id, "032x") == "ab" * 16
    assert prompt.parent is not None and prompt.parent.span_id == int("cd" * 8, 16)  # the client's span
    assert prompt.attributes is not None and {**prompt.attributes}.items() >= {
        "rpc.system.name": "jsonrpc", "rpc.method": "session/prompt", "jsonrpc.request.id": "2",
        "acp.session.id": sid}.items()
    assert "acp.principal" not in prompt.attributes  # stdio / in-process: no principal

    turn = traced.one("invoke_agent coder")
    assert _parent(turn) == prompt.context.span_id
    assert {**(turn.attributes or {})}.items() >= {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder", "gen_ai.conversation.id": sid,
        "acp.turn.trigger": "prompt", "acp.stop_reason": "end_turn", "acp.usage.context_used": 1200,
        "acp.usage.context_size": 200_000}.items()

    bash = traced.one("execute_tool bash")
    assert _parent(bash) == turn.context.span_id
    assert {**(bash.attributes or {})}.items() >= {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "acp.tool_call.status": "completed",
        "acp.background": False}.items()
    assert str(bash.attributes["gen_ai.tool.call.id"]).startswith("call_")  # type: ignore[index]

    permission = traced.one("session/request_permission")
    assert permission.kind == SpanKind.CLIENT and _parent(permission) == bash.context.span_id
    [asked] = [m for m in sent if m.get("method") == "session/request_permission"]
    assert asked["params"]["_meta"]["traceparent"] == (
        f"00-{'ab' * 16}-{format(permission.context.span_id, '016x')}-01")

    foreground, background = sorted(traced.named("terminal"), key=lambda s: s.start_time or 0)
    assert _parent(foreground) == bash.context.span_id
    assert {**(foreground.attributes or {})}.items() >= {"process.exit.code": 0, "acp.background": False}.items()
    assert "2 passed" in str(foreground.attributes["process.command_line"])  # type: ignore[index]
    watcher = traced.one("execute_tool watch")
    assert background.context.trace_id != turn.context.trace_id and background.parent is None
    assert [link.context.span_id for link in background.links] == [watcher.context.span_id]
    assert background.attributes is not None and background.attributes["acp.background"] is True

    metrics = traced.metrics()
    for name in ("acp.turn.duration", "acp.turn.time_to_first_update", "gen_ai.execute_tool.duration",
                 "acp.prompt.queue_wait", "acp.sessions.live", "acp.background.items", "acp.wire.bytes",
                 "rpc.server.call.duration"):
        assert name in metrics, name
    tools = {(p.attributes["gen_ai.tool.name"], p.attributes["acp.tool_call.status"])
             for p in metrics["gen_ai.execute_tool.duration"]}
    assert tools == {("bash", "completed"), ("watch", "completed")}
    assert [p.value for p in metrics["acp.background.items"]] == [0]  # the watcher came and went
    assert {p.attributes["network.io.direction"] for p in metrics["acp.wire.bytes"]} == {"receive", "transmit"}


async def test_a_refused_request_records_its_error_code() -> None:
    traced = Traced()
    agent = Coder()
    agent.telemetry = traced.telemetry  # type: ignore[misc]
    async with connect_agent(agent) as client:
        await client.initialize()
        with pytest.raises(RequestError):
            await client.request("session/prompt", {"sessionId": "sess_nope", "prompt": []})
    span = traced.one("session/prompt")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "-32002"
    [errors] = [p for p in traced.metrics()["acp.request.errors"]]
    assert errors.attributes["rpc.response.status_code"] == "-32002" and errors.value == 1


class Delegating(Agent):
    """A turn that hands work to a subagent and schedules a follow-up turn of its own."""

    name = "lead"

    async def prompt(self, session: Session, prompt: list[TextContent]) -> StopReason:
        child = await session.spawn_subagent("explore")

        async def explore(child_session: Session) -> StopReason:
            await child_session.say("found it")
            return "end_turn"

        await child.run(explore)

        async def later() -> StopReason:
            await session.say("and later")
            return "end_turn"

        tool = await session.start_tool_call("Wait", kind="other", name="wait", status="in_progress")
        await tool.complete(follow_up=later)
        return "end_turn"


async def test_a_subagent_is_a_child_span_and_follow_up_work_is_linked() -> None:
    traced = Traced()
    agent = Delegating()
    agent.telemetry = traced.telemetry  # type: ignore[misc]
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt(sid, "go")
        await client.wait_idle(sid, 2)
        await client.wait_for(lambda: len(traced.named("invoke_agent lead")) == 3)
    runs = sorted(traced.named("invoke_agent lead"), key=lambda s: s.start_time or 0)
    turn, child, follow_up = runs
    triggers = [span.attributes["acp.turn.trigger"] for span in runs]  # type: ignore[index]
    assert triggers == ["prompt", "subagent", "agent"]
    assert _parent(child) == turn.context.span_id  # the subagent nests under the turn
    assert child.attributes is not None and child.attributes["gen_ai.conversation.id"] != sid
    assert follow_up.parent is None and follow_up.context.trace_id != turn.context.trace_id
    assert [link.context.trace_id for link in follow_up.links] == [turn.context.trace_id]


class FrameworkTraced(Agent):
    """A turn whose tool runs inside a framework's own ``execute_tool`` span (as pydantic-ai's instrumentation)."""

    name = "framework"
    provider: TracerProvider

    async def prompt(self, session: Session, prompt: list[TextContent]) -> StopReason:
        tracer = self.provider.get_tracer("framework")
        with tracer.start_as_current_span("execute_tool grep",
                                          attributes={"gen_ai.operation.name": "execute_tool"}):
            tool = await session.start_tool_call("grep", kind="search", name="grep")
            await tool.complete()
        return "end_turn"


async def test_a_framework_execute_tool_span_is_not_doubled() -> None:
    traced = Traced()
    agent = FrameworkTraced()
    agent.provider = traced.tracer_provider
    agent.telemetry = traced.telemetry  # type: ignore[misc]
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "go")
    framework = traced.one("execute_tool grep")
    ours = traced.one("acp.tool_call grep")
    assert _parent(framework) == traced.one("invoke_agent framework").context.span_id  # nests under the turn
    assert _parent(ours) == framework.context.span_id
    assert ours.attributes is not None and "gen_ai.operation.name" not in ours.attributes


def test_export_errors_are_logged_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    """A collector that is down fails every export: the log gets the first failure of the episode, not each one."""
    from acp_agent.telemetry.otel import _OnePerEpisode

    root = logging.getLogger("opentelemetry")
    handler, propagate = _OnePerEpisode(), root.propagate
    root.addHandler(handler)
    root.propagate = False  # as from_environment sets it: the handler passes records on to the root's handlers
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(5):
                logging.getLogger("opentelemetry.exporter.test").error("Failed to export span batch, code: 503")
    finally:
        root.removeHandler(handler)
        root.propagate = propagate
    [logged] = [r for r in caplog.records if r.name == "opentelemetry.exporter.test"]
    assert "repeats within" in logged.getMessage()


_TALKING_AGENT = """
import sys, anyio
from acp_agent import Agent, Session, TextContent
from acp_agent.testing import connect_agent

class Echo(Agent):
    async def prompt(self, session: Session, prompt: list[TextContent]) -> str:
        await session.say("hi")
        return "end_turn"

async def main() -> None:
    async with connect_agent(Echo()) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "hello")

anyio.run(main)
print(' '.join(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'acp_agent.telemetry')))))
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_telemetry_off_imports_none_of_opentelemetry() -> None:
    """Without ``OTEL_*`` endpoint variables (or ``OTEL_SDK_DISABLED=true``) a talking agent loads no OpenTelemetry."""
    for extra in ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}):
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | extra
        loaded = subprocess.run([sys.executable, "-c", _TALKING_AGENT], check=True, capture_output=True, text=True,
                                env=env).stdout.split()
        assert loaded == [], loaded  # neither the otel module nor acp_agent.telemetry (imported when telemetry is on)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_unreachable_collector_never_fails_a_request() -> None:
    """With an endpoint nobody listens on, the agent answers as usual, the export error is a log line on stderr, and
    the process's exit waits at most ``EXIT_FLUSH_SECONDS`` for it (not the exporter's retries)."""
    code = _TALKING_AGENT.replace("anyio.run(main)", "anyio.run(main)\nprint('served')")
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_SCHEDULE_DELAY": "10"}
    began = anyio.current_time()
    with anyio.fail_after(60):
        result = await anyio.run_process([sys.executable, "-c", code], env=env, check=True)
    out = result.stdout.decode()
    assert out.startswith("served") and "opentelemetry.sdk" in out  # loaded, and the turn still answered
    assert anyio.current_time() - began < 9  # the exporter alone would retry for 10 s


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # pydantic-ai runs on asyncio only
async def test_pydantic_ai_spans_nest_under_the_turn_and_its_tools_are_not_doubled() -> None:
    """The bridge runs a pydantic-ai agent with its instrumentation on: pydantic-ai's run, model requests and
    ``execute_tool`` nest under the turn's ``invoke_agent``; the ACP tool call is ``acp.tool_call``, not a second
    ``execute_tool``."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    from acp_agent.integrations.pydantic_ai import PydanticAIAgent

    traced = Traced()
    settings = InstrumentationSettings(tracer_provider=traced.tracer_provider)
    framework = PydanticAgent(TestModel(), capabilities=[Instrumentation(settings=settings)])

    @framework.tool_plain
    def lookup(word: str) -> str:
        """Look a word up."""
        return "found " + word

    agent = PydanticAIAgent(framework)
    agent.telemetry = traced.telemetry  # type: ignore[misc]
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt_and_wait(sid, "hi")
    [turn] = [s for s in traced.spans if s.name.startswith("invoke_agent") and s.instrumentation_scope is not None
              and s.instrumentation_scope.name == "acp_agent"]
    by_id = {span.context.span_id: span for span in traced.spans}

    def under_turn(span: ReadableSpan) -> bool:
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            if span is turn:
                return True
        return False

    others = [s for s in traced.spans if s.instrumentation_scope is not None
              and s.instrumentation_scope.name != "acp_agent"]
    assert others and all(under_turn(span) for span in others)
    assert [s.name for s in traced.spans if s.name.startswith("execute_tool")] == ["execute_tool lookup"]
    assert traced.one("acp.tool_call lookup").attributes["acp.tool_call.status"] == "completed"  # type: ignore[index]
