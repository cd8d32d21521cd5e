"""The event loop an agent process runs on: the anyio backend, and uvloop under asyncio.

[`run_stdio`][acp_agent.run_stdio] and [`run_http`][acp_agent.http.run_http] start their loop with `run`.
The backend is ``asyncio`` unless the code or ``ACP_AGENT_BACKEND`` says ``trio``. On asyncio the
loop is asyncio's own unless uvloop is asked for: ``uvloop=True`` in the code, or ``ACP_AGENT_UVLOOP=1``
(``on``/``true``/``yes``), with the ``uvloop`` extra installed. uvloop takes about 8 % less of the
agent's CPU per echo turn, but a stdio agent starts about 30 ms later, answers its first prompt
later and peaks about 2 MB higher, and echo latency did not change (``bench/README.md``, "Performance
round 5"): worth it for a busy server, not for an agent an editor starts per window. uvloop is
imported only when it will run the loop; asked for by the environment but not importable, asyncio's
own loop runs and a DEBUG message says why.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio

from . import environment

__all__ = ["BACKEND_ENV", "UVLOOP_ENV", "backend_options", "choose_backend", "run"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

BACKEND_ENV: Final = environment.BACKEND.name
"""Environment variable naming the anyio backend (``asyncio`` or ``trio``) when the code names none."""

UVLOOP_ENV: Final = environment.UVLOOP.name
"""Environment variable: ``1``, ``on``, ``true`` or ``yes`` runs asyncio on uvloop when the code does not choose."""

def choose_backend(backend: str | None) -> str:
    """The anyio backend to run: ``backend``, else ``$ACP_AGENT_BACKEND``, else ``"asyncio"``."""
    return backend or environment.read(environment.BACKEND)


def backend_options(backend: str, uvloop: bool | None = None) -> dict[str, Any]:
    """``anyio.run``'s ``backend_options`` for ``backend``: uvloop's loop factory on asyncio when it is wanted.

    ``uvloop=None`` follows ``$ACP_AGENT_UVLOOP`` (uvloop, if it imports, when that says yes);
    ``True`` requires uvloop (``ImportError`` without it; ``ValueError`` on trio); ``False`` never uses it.
    """
    if backend != "asyncio":
        if uvloop:
            raise ValueError(f"uvloop runs only under the asyncio backend, not {backend!r}")
        return {}
    if uvloop is False or (uvloop is None and not _wanted_by_environment()):
        return {}
    try:
        import uvloop as module
    except ImportError as exc:
        if uvloop:
            raise
        logger.debug("acp: uvloop is not available (%s); running on asyncio's own event loop", exc)
        return {}
    return {"loop_factory": module.new_event_loop}


def run(main: Callable[[], Awaitable[T]], *, backend: str | None = None, uvloop: bool | None = None) -> T:
    """Run ``main`` to completion on a new event loop: the backend of `choose_backend`, with uvloop
    on asyncio as `backend_options` decides."""
    chosen = choose_backend(backend)
    return anyio.run(main, backend=chosen, backend_options=backend_options(chosen, uvloop))


def _wanted_by_environment() -> bool:
    return environment.read(environment.UVLOOP)
