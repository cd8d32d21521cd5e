"""Building the wire models of a session's first turn before the client asks for one.

Wire models build their validators and serializers on first use (``defer_build``), which keeps
start-up short but made a fresh agent's first prompt pay for them (about 25 ms). An editor starts
an agent, sends ``initialize`` and ``session/new``, and the user types a prompt seconds later; so
once ``initialize`` is answered the runtime builds the models of a plain turn and of ``session/new``
in that pause (:func:`warm_up`), the turn's first. It builds one model per event-loop pass, so a
request arriving meanwhile waits for one model's build at most (``session/new`` mostly waits for the
store's thread anyway), and it stops once a turn runs or waits: a turn builds what it needs itself, and
a build between two prompts would delay the second. It runs once per process; a model already built
is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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
    """The models to build: what ``session/new`` and every text turn (plain or streamed) build on first use.

    A text prompt's echo, ``say()`` of text and the snapshots of a turn without background work are framed
    without their models (``SessionSink.record_plain``, ``StatePublisher.set``); the message and snapshot models
    are built when something else first needs them.
    """
    from .schema import AgentMessageChunk, NewSessionRequest, NewSessionResponse, PromptRequest, TextContent

    return [PromptRequest, TextContent, NewSessionRequest, NewSessionResponse, AgentMessageChunk]


async def warm_up(busy: Callable[[], bool] | None = None) -> None:
    """Build the first turn's models not built yet, one per event-loop pass (once per process).

    ``busy`` says whether a turn runs or waits now; then the warm-up ends.
    """
    global _done
    if _done:
        return
    _done = True
    await anyio.sleep(WARM_UP_DELAY)
    for model in _first_turn_models():
        if model.__pydantic_complete__:
            continue
        if busy is not None and busy():
            return
        try:
            model.model_rebuild()
        except Exception:  # never fatal: the model is built on first use instead
            logger.debug("acp: building %s ahead of its first use failed", model.__name__, exc_info=True)
        await anyio.lowlevel.checkpoint()
