"""Scripted pydantic-ai models for the bridge's tests (no network): each model response is the next step."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from acp_agent.testing import connect_agent
from acp_agent.testing.client import Client
from acp_agent.testing.schema import SchemaValidator

Step = str | tuple[str, dict[str, Any]]
"""Text to stream, or a tool call ``(tool name, arguments)``."""


def scripted(steps: Iterable[Step], seen: list[list[ModelMessage]] | None = None) -> FunctionModel:
    """A model that answers each request with the next step (``seen`` collects what each request saw)."""
    remaining = iter(list(steps))

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if seen is not None:
            seen.append(list(messages))
        step = next(remaining, "(script ended)")
        if isinstance(step, str):
            yield step
        else:
            name, args = step
            yield {0: DeltaToolCall(name=name, json_args=orjson.dumps(args).decode())}

    return FunctionModel(stream_function=stream)


def last_tool_return(messages: list[ModelMessage]) -> str:
    """The content of the last tool return the model was sent."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    return str(part.content)
    raise AssertionError("no tool return in the history")


def user_texts(messages: list[ModelMessage]) -> list[str]:
    """Every user prompt the history holds, in order."""
    return [str(p.content) for m in messages if isinstance(m, ModelRequest)
            for p in m.parts if isinstance(p, UserPromptPart)]


_VALIDATOR: list[SchemaValidator] = []


@asynccontextmanager
async def checked(agent: Any, **options: Any) -> AsyncIterator[Client]:
    """``connect_agent`` whose transcript is also checked against the official schema at the end
    (the WireChecker judges it too, as ``connect_agent`` always does)."""
    if not _VALIDATOR:
        _VALIDATOR.append(SchemaValidator())
    async with connect_agent(agent, **options) as client:
        yield client
    problems = _VALIDATOR[0].check_transcript(client.transcript)
    assert problems == [], "\n".join(problems)
