"""The bench workload as a pydantic-ai agent (a ``FunctionModel`` that streams the answer: no network).

    stream N   -> the model streams N text deltas ("chunk 0 ", "chunk 1 ", ...), each one message chunk
    echo TEXT  -> the model answers TEXT in one delta

``BENCH_PYDANTIC_AI=bridge`` (default) serves it with ``PydanticAIAgent`` (the bridge: events as ACP updates,
tool calls, the model history saved with the session); ``BENCH_PYDANTIC_AI=minimal`` with a plain ``Agent``
whose ``prompt`` runs ``agent.run_stream_events`` and writes each text delta itself (pydantic-ai's own cost
with the least ACP around it, no history). Run: ``.venv/bin/python bench/agents/pydantic_ai_agent.py``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta
from pydantic_ai.models.function import AgentInfo, FunctionModel

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent, run_stdio
from acp_agent.integrations.pydantic_ai import PydanticAIAgent


async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    prompt = messages[-1].parts[-1].content  # type: ignore[union-attr]
    command, _, argument = str(prompt).partition(" ")
    if command == "stream":
        for i in range(int(argument)):
            yield f"chunk {i} "
    else:
        yield argument


pydantic_agent = PydanticAgent(FunctionModel(stream_function=model))


class MinimalAgent(Agent):
    """pydantic-ai with the least ACP around it: text deltas written as they come."""

    name = "bench-pydantic-ai-minimal"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent))
        stream = session.message()
        async for event in pydantic_agent.run_stream_events(text):
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart) and event.part.content:
                await stream.write(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                await stream.write(event.delta.content_delta)
        return "end_turn"


if __name__ == "__main__":
    mode = os.environ.get("BENCH_PYDANTIC_AI", "bridge")
    run_stdio(MinimalAgent() if mode == "minimal" else PydanticAIAgent(pydantic_agent, name="bench-pydantic-ai"))
