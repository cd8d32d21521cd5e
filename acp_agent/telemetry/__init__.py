"""Telemetry of an agent: the interface the engine reports to, and how it is chosen.

Off by default and free when off. It is on when ``Agent.telemetry`` is set (any `Telemetry`, for instance
``OpenTelemetry()`` from `acp_agent.telemetry.otel` over providers you configured), or when the environment
configures an OTLP exporter (``OTEL_EXPORTER_OTLP_ENDPOINT`` or its traces/metrics variants; ``OTEL_SDK_DISABLED=true``
turns it off): then `acp_agent.telemetry.otel` (the ``otel`` extra) exports traces and metrics over OTLP/HTTP.
Nothing here imports ``opentelemetry`` until then. See the "Telemetry" guide.
"""

from __future__ import annotations

from .._util import environment
from .._util.telemetry import Recorder, Span, Telemetry

__all__ = ["Recorder", "Span", "Telemetry", "for_connection", "from_environment"]

_from_environment: list[Telemetry | None] = []


def from_environment() -> Telemetry | None:
    """OTLP export set up from the ``OTEL_*`` variables, made once per process; ``None`` when they set none.

    Raises `ImportError` naming the extra when they do and the ``otel`` extra is not installed.
    """
    if not _from_environment:
        telemetry: Telemetry | None = None
        if environment.otel_configured():
            try:
                from . import otel
            except ImportError as exc:
                raise ImportError("OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
                                  "pip install 'acp-agent-sdk[otel]'") from exc
            telemetry = otel.from_environment(record_commands=environment.read(environment.TELEMETRY_COMMANDS))
        _from_environment.append(telemetry)
    return _from_environment[0]


def for_connection(configured: Telemetry | None, *, agent_name: str, principal: str | None) -> Recorder | None:
    """The recorder of one connection: ``configured`` (``Agent.telemetry``), else `from_environment`, bound to
    the agent's name and the connection's principal; ``None`` when telemetry is off."""
    chosen = configured if configured is not None else from_environment()
    if chosen is None:
        return None
    return chosen.bind(agent_name=agent_name, principal=principal)
