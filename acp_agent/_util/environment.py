"""The ``ACP_AGENT_*`` environment variables: one table, one way to read them, one behaviour for a bad value.

Every variable the SDK reads is a `Variable` in `VARIABLES` (the site's "Environment variables" page is
checked against it). `read` returns a variable's value, its default when it is unset or empty, and raises
`EnvironmentVariableError` (naming the variable, the value and what it accepts) for anything else. The
process entry points (`run_stdio`, `run_http`, ``python -m acp_agent``) check them first (`prelude.prepare`):
a bad value there is one line on stderr and exit status 2, before ``initialize``.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, NoReturn, TypeVar

from .base_error import AcpAgentError

__all__ = ["EXIT_STATUS", "VARIABLES", "EnvironmentVariableError", "Variable", "check", "exit_on_bad_environment",
           "otel_configured", "read"]

T = TypeVar("T")

EXIT_STATUS: Final = 2
"""The exit status of a process entry point given a bad ``ACP_AGENT_*`` value (as for a bad command line)."""


class EnvironmentVariableError(AcpAgentError, ValueError):
    """An ``ACP_AGENT_*`` environment variable holds a value the SDK does not accept.

    Its message is one line naming the variable, the value and what it accepts. The process entry points
    (``run_stdio``, ``run_http``, ``python -m acp_agent serve``) write it on stderr and exit with status 2
    before anything is served; nothing was sent.
    """


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One ``ACP_AGENT_*`` variable: what it accepts, what it does, its default and how it is read."""

    name: str
    accepts: str
    """What it accepts, in words (quoted in the error)."""
    does: str
    """What it sets, in words."""
    default: T
    parse: Callable[[str], T]
    """Reads a stripped, non-empty value; raises `ValueError` for one it does not accept."""


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError(text)
        return text.lower()
    return parse


_ON: Final = frozenset({"1", "on", "true", "yes"})
_OFF: Final = frozenset({"0", "off", "false", "no"})


def _switch(text: str) -> bool:
    if text.lower() in _ON:
        return True
    if text.lower() in _OFF:
        return False
    raise ValueError(text)


def _seconds(text: str) -> float:
    value = float(text)  # ValueError for "soon"
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(text)
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not value:
        raise ValueError(text)
    return value


def _seconds_or_off(text: str) -> float | None:
    if text.lower() in _OFF or text.lower() in ("none", "disable", "disabled"):
        return None
    return _seconds(text) or None


def _level(text: str) -> str:
    if text.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError(text)
    return text.upper()


def _text(text: str) -> str:
    return text


BACKEND: Final = Variable("ACP_AGENT_BACKEND", "asyncio or trio", "the event loop library, when the code names none",
                          "asyncio", _choice("asyncio", "trio"))
UVLOOP: Final = Variable("ACP_AGENT_UVLOOP", "1, on, true, yes, or 0, off, false, no",
                         "run asyncio on uvloop's event loop (if uvloop is installed), when the code does not choose",
                         False, _switch)
LOG_LEVEL: Final = Variable("ACP_AGENT_LOG_LEVEL", "DEBUG, INFO, WARNING, ERROR or CRITICAL",
                            "the root logger's level, set by run_stdio, run_http and python -m acp_agent", "WARNING",
                            _level)
SHUTDOWN_TIMEOUT: Final = Variable("ACP_AGENT_SHUTDOWN_TIMEOUT", "a number of seconds >= 0",
                                   "how long sessions get to stop at shutdown, when the code gives none", 5.0,
                                   _seconds)
BLOCK_WARNING: Final = Variable[float | None]("ACP_AGENT_BLOCK_WARNING", "a number of seconds >= 0, or 0 / off",
                                "how long agent code may block the event loop before a warning (off: no watch)", 0.5,
                                _seconds_or_off)
DATA_DIR: Final = Variable[str | None]("ACP_AGENT_DATA_DIR", "a directory path",
                           "where the default SQLite session files are kept (else the user data directory)", None,
                           _text)
STORE: Final = Variable[str | None]("ACP_AGENT_STORE", "sqlite:PATH, postgres:DSN or memory",
                        "python -m acp_agent serve: where every connection keeps its sessions (--store wins)", None,
                        _text)
TOKEN: Final = Variable[str | None]("ACP_AGENT_TOKEN", "any text",
                        "python -m acp_agent serve: the bearer token every request must carry, and the one "
                        "dev --connect sends (--token wins)", None,
                        _text)
LEASE_TTL: Final = Variable("ACP_AGENT_LEASE_TTL", "a number of seconds > 0",
                            "PostgreSQL stores: how long a session's lease lasts unrenewed (how soon a frozen or "
                            "partitioned process loses its sessions)", 10.0, _positive_seconds)

WITHHOLD: Final = Variable[str | None]("ACP_AGENT_WITHHOLD_ENV", "comma-separated variable names, NAME* for a prefix",
                                       "more variables that never reach a terminal's process (ACP_AGENT_* never do)",
                                       None, _text)

TELEMETRY_COMMANDS: Final = Variable("ACP_AGENT_TELEMETRY_COMMANDS", "1, on, true, yes, or 0, off, false, no",
                                     "put each terminal's command line on its telemetry span (they may hold secrets)",
                                     False, _switch)

VARIABLES: Final[tuple[Variable[Any], ...]] = (BACKEND, UVLOOP, LOG_LEVEL, SHUTDOWN_TIMEOUT, BLOCK_WARNING, DATA_DIR,
                                               STORE, TOKEN, LEASE_TTL, WITHHOLD, TELEMETRY_COMMANDS)
"""Every ``ACP_AGENT_*`` variable the SDK reads."""


OTEL_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                          "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
"""The standard OpenTelemetry variables that turn telemetry on (the SDK reads the other ``OTEL_*`` ones itself)."""


def otel_configured() -> bool:
    """Whether the environment asks for OTLP export: an endpoint is set and ``OTEL_SDK_DISABLED`` is not true."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name, "").strip() for name in OTEL_ENDPOINTS)


def read(variable: Variable[T]) -> T:
    """``variable``'s value: its default when unset or empty; `EnvironmentVariableError` when not accepted."""
    text = os.environ.get(variable.name, "").strip()
    if not text:
        return variable.default
    try:
        return variable.parse(text)
    except ValueError:
        raise EnvironmentVariableError(f"{variable.name}={text!r} is not valid: it accepts {variable.accepts}"
                                       ) from None


def check(variables: tuple[Variable[Any], ...] = VARIABLES) -> list[str]:
    """The error line of each variable in ``variables`` whose value is not accepted (empty: all fine)."""
    problems = []
    for variable in variables:
        try:
            read(variable)
        except EnvironmentVariableError as exc:
            problems.append(str(exc))
    return problems


def exit_on_bad_environment(variables: tuple[Variable[Any], ...] = VARIABLES) -> None:
    """For a process entry point: with a bad value, one line per bad variable on stderr, then exit status 2."""
    problems = check(variables)
    if problems:
        _exit(problems)


def _exit(problems: list[str]) -> NoReturn:
    for problem in problems:
        sys.stderr.write(f"acp: {problem}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_STATUS)
