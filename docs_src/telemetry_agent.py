"""The Telemetry guide's example: a small coding agent whose turn has a tool, a permission, a terminal and a
background watcher, traced into an in-memory exporter (tests/docs and tests/unit/test_telemetry.py run it)."""

from __future__ import annotations

import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from acp_agent import Agent, ContentBlock, PermissionOption, Session, StopReason, run_stdio
from acp_agent.telemetry.otel import OpenTelemetry

ASK = [PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
       PermissionOption(option_id="deny", name="Reject", kind="reject_once")]


class Coder(Agent):
    """Runs the tests after asking, then leaves a watcher running in the background."""

    name = "coder"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say("Running the tests.")
        tool = await session.start_tool_call("Run the tests", kind="execute", name="bash", status="in_progress")
        outcome = await tool.request_permission("Run the tests?", ASK)
        if not outcome.allowed:
            await tool.fail()
            return "end_turn"
        terminal = await session.start_terminal([sys.executable, "-c", "print('2 passed')"], tool_call=tool)
        await terminal.wait()
        await tool.complete()
        watcher = await session.start_tool_call("Watch the files", kind="other", name="watch", status="in_progress")
        watch = await session.start_terminal([sys.executable, "-c", "import time; time.sleep(0.2)"],
                                             tool_call=watcher, detach=True)
        watcher.finish_with(watch)
        await session.usage(1200, 200_000)
        return "end_turn"


def traced() -> tuple[Coder, InMemorySpanExporter]:
    """A `Coder` reporting its spans to an in-memory exporter (as a test or a notebook would)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Coder()
    agent.telemetry = OpenTelemetry(provider, record_commands=True)  # type: ignore[misc]
    return agent, exporter


if __name__ == "__main__":
    run_stdio(Coder())  # with OTEL_EXPORTER_OTLP_ENDPOINT set, it exports over OTLP/HTTP
