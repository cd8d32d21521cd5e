"""Loading and building what a session's first turn needs before the client asks for one.

Only what ``initialize`` needs is imported before its answer: the session's runtime parts
(`acp_agent._session.core` and what it imports) and most wire models load on first use, and the wire
models build their validators and serializers on first use (``defer_build``). That keeps start-up
short, but would make a fresh agent's first ``session/new`` and first prompt pay for them (about
25 ms each). An editor starts an agent, sends ``initialize`` and ``session/new``, and the user types a
prompt seconds later; so once ``initialize`` is answered the runtime does that work in the pause
(`warm_up`): it imports the session modules, then builds the models of ``session/new`` and of a
plain turn. It takes one step per event-loop pass, so a request arriving meanwhile waits for one step
at most (the first, the imports, is the longest: 25-45 ms), and no step starts while a request is being
answered (a ``session/new`` sent with ``initialize`` goes first; for `HOLD_LIMIT` at most). It stops
once a turn runs or waits: a turn loads and builds what it needs itself, and a build between two prompts
would delay the second. It runs once per process (again if its connection closed before it ended); a
model already built is skipped. Its first step reaps what the terminals of an agent that died (with its
watchdog) left running (`acp_agent._util.watch.reap_left_behind`: a look at one directory, usually empty).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Final

import anyio
import anyio.lowlevel
from pydantic import BaseModel

from .. import schema
from .._util.paths import ledger_dir

__all__ = ["HOLD_LIMIT", "HOLD_POLL", "WARM_UP_DELAY", "warm_up"]

logger = logging.getLogger(__name__)

WARM_UP_DELAY: Final = 0.02
"""Seconds after ``initialize`` before the first step (the answer is written by then)."""

HOLD_POLL: Final = 0.05
"""Seconds between looks at whether a request is still being answered, while the warm-up waits for it."""

HOLD_LIMIT: Final = 1.0
"""Seconds the warm-up waits for requests being answered, in all: a request that takes longer is waiting on
something else (the user answering a question, a login), so the warm-up goes on beside it."""

_done = False


def _reap_left_behind() -> None:
    """Reap what terminals of agents that died left running: a look at a directory that is usually absent or empty
    (the reaping loads only if it is not)."""
    with contextlib.suppress(OSError):
        if os.listdir(ledger_dir()):
            from .._util.watch import reap_left_behind

            reap_left_behind()


def _load_session_modules() -> None:
    """Import the session's runtime parts (and with them the update, state and tool call models)."""
    from .._session import core  # noqa: F401  (an import statement, so ``python -X importtime`` shows it)


def _first_turn_models() -> list[type[BaseModel]]:
    """The models to build: what ``session/new`` and every text turn (plain or streamed) build on first use.

    A text prompt's echo, ``say()`` of text and the snapshots of a turn without background work are framed
    without their models (``SessionSink.record_plain``, ``StatePublisher.set``); the message and snapshot models
    are built when something else first needs them.
    """
    return [schema.PromptRequest, schema.TextContent, schema.NewSessionRequest, schema.NewSessionResponse,
            schema.AgentMessageChunk]


async def warm_up(busy: Callable[[], bool] | None = None, hold: Callable[[], bool] | None = None) -> None:
    """Import the session modules, then build the first turn's models not built yet, one step per
    event-loop pass (once per process).

    ``busy`` says whether a turn runs or waits now; then the warm-up ends. ``hold`` says whether to wait
    before the next step (a request is being answered, such as ``session/new``: its answer goes first), for
    `HOLD_LIMIT` seconds at most in all.
    """
    global _done
    if _done:
        return
    _done = True
    try:
        await anyio.sleep(WARM_UP_DELAY)
        hold_until = anyio.current_time() + HOLD_LIMIT
        await _step(_reap_left_behind, None, hold, hold_until)  # also when a turn runs: it is short
        if not await _step(_load_session_modules, busy, hold, hold_until):
            return
        for model in _first_turn_models():
            if not model.__pydantic_complete__ and not await _step(model.model_rebuild, busy, hold, hold_until):
                return
    except anyio.get_cancelled_exc_class():
        _done = False  # its connection closed first: the next connection's initialize runs it (HTTP)
        raise


async def _step(work: Callable[[], object], busy: Callable[[], bool] | None, hold: Callable[[], bool] | None,
                hold_until: float) -> bool:
    """Do one step of the warm-up once ``hold`` allows (or ``hold_until`` passed), then yield the loop; ``False``
    (nothing done) if ``busy``."""
    while hold is not None and hold() and anyio.current_time() < hold_until:
        if busy is not None and busy():
            return False
        await anyio.sleep(HOLD_POLL)
    if busy is not None and busy():
        return False
    try:
        work()
    except Exception:  # never fatal: what failed is loaded or built on first use instead
        logger.debug("acp: a warm-up step (%r) failed", work, exc_info=True)
    await anyio.lowlevel.checkpoint()
    return True
