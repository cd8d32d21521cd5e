"""A forgotten ``await`` on an SDK call: ``session.say("hi")`` without it creates a coroutine that never runs.

Python warns (``RuntimeWarning: coroutine 'Session.say' was never awaited``) when such a coroutine is
dropped, at the line where it was dropped, which is usually the author's. `sdk_call` tells whether a warning
is about one of acp-agent's coroutine functions (looked up by name in the public packages already imported,
so nothing is imported for it); `describe` says it in one line. `log_never_awaited` turns those warnings
into one error log line each for an agent process (``run_stdio``, ``run_http``), and the pytest plugin
fails the test that dropped one, naming the author's file and line.
"""

from __future__ import annotations

import inspect
import logging
import re
import sys
import warnings
from typing import Any, Final, TextIO

__all__ = ["NEVER_AWAITED", "describe", "log_never_awaited", "sdk_call"]

logger = logging.getLogger("acp_agent")

NEVER_AWAITED: Final = re.compile(r"coroutine '([\w.<>]+)' was never awaited")
"""The text of Python's warning for a coroutine dropped without being awaited; group 1 is its qualified name."""

_PACKAGES: Final = ("acp_agent", "acp_agent.testing", "acp_agent.http", "acp_agent.store")


def sdk_call(message: str) -> str | None:
    """The qualified name (``Session.say``) of the acp-agent coroutine function a never-awaited warning
    is about, else ``None``."""
    match = NEVER_AWAITED.match(message)
    if match is None:
        return None
    head, *rest = match[1].split(".")
    for package in _PACKAGES:
        module = sys.modules.get(package)
        obj: Any = getattr(module, head, None) if module is not None else None
        for part in rest:
            obj = getattr(obj, part, None)
        function = inspect.unwrap(obj) if callable(obj) else None
        if (function is not None and inspect.iscoroutinefunction(function)
                and getattr(function, "__module__", "").startswith("acp_agent")):
            return match[1]
    return None


def describe(qualname: str, filename: str, lineno: int) -> str:
    """One line: which call was never awaited, where, what it means and what to write."""
    owner, _, method = qualname.rpartition(".")
    name = owner[:1].lower() + owner[1:] if owner else ""
    call = f"{name}.{method}" if owner else method
    return (f"{filename}:{lineno}: {qualname}(...) was never awaited, so it did nothing (nothing was sent); "
            f"write `await {call}(...)`")


def log_never_awaited() -> None:
    """In an agent process: log each never-awaited acp-agent call as one error on stderr (other warnings are
    shown as before). Python shows such a warning once per place, so each place is logged once."""
    previous = warnings.showwarning

    def showwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    file: TextIO | None = None, line: str | None = None) -> None:
        qualname = sdk_call(str(message)) if issubclass(category, RuntimeWarning) else None
        if qualname is None:
            previous(message, category, filename, lineno, file, line)
        else:
            logger.error("acp: %s", describe(qualname, filename, lineno))

    if getattr(previous, "__name__", "") != showwarning.__name__ or previous.__module__ != __name__:
        warnings.showwarning = showwarning
