"""The process prelude: what every entry point does first, before it serves or inspects anything.

`prepare` checks the ``ACP_AGENT_*`` variables (a bad value: one line each on stderr, exit status 2),
sends logging to stderr in `LOG_FORMAT` at ``ACP_AGENT_LOG_LEVEL`` (unless the program configured logging
already) and logs a never-awaited acp-agent call as one error. ``python -m acp_agent`` (``serve``, ``stdio``,
``dev``), `run_stdio` and `run_http` call it; calling it again is harmless.
"""

from __future__ import annotations

import logging
import sys
from typing import Final

from . import awaiting, environment

__all__ = ["LOG_FORMAT", "prepare"]

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One log line: time, level, logger, message."""


def prepare() -> None:
    """Check the environment (exit status 2 on a bad value), set up logging to stderr, log never-awaited calls."""
    environment.exit_on_bad_environment()  # one line on stderr and exit status 2, before anything is served
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=environment.read(environment.LOG_LEVEL), format=LOG_FORMAT)
    awaiting.log_never_awaited()  # a forgotten `await session.say(...)`: one error naming the call
