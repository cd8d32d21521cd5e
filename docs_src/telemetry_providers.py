"""The Telemetry guide: an agent reporting to OpenTelemetry providers you configured yourself."""

from opentelemetry import metrics, trace

from acp_agent import Agent, ContentBlock, Session, StopReason
from acp_agent.telemetry.otel import OpenTelemetry


class MyAgent(Agent):
    """Reports its requests, turns, tool calls and terminals to the global providers set up by your code."""

    name = "my-agent"
    telemetry = OpenTelemetry(trace.get_tracer_provider(), metrics.get_meter_provider())

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say("Hello.")
        return "end_turn"
