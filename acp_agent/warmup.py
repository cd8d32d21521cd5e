"""Building the wire models of a session's first turn before the client asks for one.

Wire models build their validators and serializers on first use (``defer_build``), which keeps
start-up short but made a fresh agent's first prompt pay for them (about 25 ms). An editor starts
an agent, sends ``initialize`` and ``session/new``, and the user types a prompt seconds later; so
once ``initialize`` is answered the runtime builds the models of ``session/new`` and of a plain turn
in that pause (:func:`warm_up`), one model per event-loop pass, so a request arriving meanwhile
waits for one model's build at most. It runs once per process; a model already built is skipped.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio
import anyio.lowlevel
from pydantic import BaseModel

__all__ = ["WARM_UP_DELAY", "warm_up"]

logger = logging.getLogger(__name__)

WARM_UP_DELAY: Final = 0.02
"""Seconds after ``initialize`` before the first model is built (the answer is written by then)."""

_done = False


def _first_turn_models() -> list[type[BaseModel]]:
    from .schema import (
        AgentMessage,
        AgentMessageChunk,
        AgentThought,
        AgentThoughtChunk,
        IdleStateUpdate,
        NewSessionRequest,
        NewSessionResponse,
        PromptRequest,
        RunningStateUpdate,
        TextContent,
        UserMessage,
    )

    return [NewSessionRequest, NewSessionResponse, PromptRequest, TextContent, UserMessage, AgentMessage,
            AgentMessageChunk, AgentThought, AgentThoughtChunk, RunningStateUpdate, IdleStateUpdate]


async def warm_up() -> None:
    """Build the first turn's models not built yet, one per event-loop pass (once per process)."""
    global _done
    if _done:
        return
    _done = True
    await anyio.sleep(WARM_UP_DELAY)
    for model in _first_turn_models():
        if model.__pydantic_complete__:
            continue
        try:
            model.model_rebuild()
        except Exception:  # never fatal: the model is built on first use instead
            logger.debug("acp: building %s ahead of its first use failed", model.__name__, exc_info=True)
        await anyio.lowlevel.checkpoint()
