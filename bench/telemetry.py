"""Telemetry's cost: an echo turn with telemetry off and on, and a stdio agent's start-up with and without ``OTEL_*``.

Per turn: the same echo agent served in-process (``connect_agent``), ``--turns`` prompts one after another, the
median time per turn with telemetry off (the default) and with ``OpenTelemetry`` over an SDK tracer provider
(a batch span processor into an in-memory exporter) and meter provider (spans and metrics recorded, nothing sent).
Start-up: ``examples/echo_agent.py`` until it answers ``initialize``, without ``OTEL_*`` variables and with an
OTLP endpoint set (the exporter loads; nothing listens there).

Run: ``.venv/bin/python bench/telemetry.py [--turns 400] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio

from acp_agent import Agent, Session, StopReason, TextContent
from acp_agent.testing import connect_agent

ROOT = Path(__file__).resolve().parents[1]
INITIALIZE = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}\n'


class Echo(Agent):
    """Says the prompt back."""

    name = "echo"

    async def prompt(self, session: Session, prompt: list[TextContent]) -> StopReason:
        await session.say(prompt[0].text)
        return "end_turn"


def traced_echo() -> Echo:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from acp_agent.telemetry.otel import OpenTelemetry

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
    agent = Echo()
    agent.telemetry = OpenTelemetry(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))  # type: ignore[misc]
    return agent


async def per_turn(agent: Echo, turns: int) -> float:
    async with connect_agent(agent, check=False) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        for _ in range(20):  # warm up
            await client.prompt_and_wait(sid, "hello")
        began = time.perf_counter()
        for _ in range(turns):
            await client.prompt_and_wait(sid, "hello")
        return (time.perf_counter() - began) / turns


def startup(env: dict[str, str]) -> float:
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, str(ROOT / "examples" / "echo_agent.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    process.stdout.readline()
    elapsed = time.perf_counter() - began
    process.stdin.close()
    process.wait(10)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.rounds):  # interleaved, so both see the same machine
        off.append(anyio.run(per_turn, Echo(), args.turns))
        on.append(anyio.run(per_turn, traced_echo(), args.turns))
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    exporting = {**plain, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    start_off = [startup(plain) for _ in range(args.rounds)]
    start_on = [startup(exporting) for _ in range(args.rounds)]
    off_us, on_us = statistics.median(off) * 1e6, statistics.median(on) * 1e6
    print(f"echo turn, in-process: telemetry off {off_us:.0f} us, on {on_us:.0f} us "
          f"(+{on_us - off_us:.0f} us per turn, x{on_us / off_us:.2f})")
    print(f"stdio start-up to initialize: no OTEL_* {statistics.median(start_off) * 1e3:.0f} ms, "
          f"OTEL_EXPORTER_OTLP_ENDPOINT set {statistics.median(start_on) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
