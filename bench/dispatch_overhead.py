"""What jsonrpcserver costs per incoming request, and the echo round trip over real pipes.

Run: ``.venv/bin/python bench/dispatch_overhead.py``. Prints medians of several interleaved
rounds (these machines are noisy; compare ratios, not absolute numbers):

- ``direct``: our binder called straight from a dict lookup (the floor);
- ``dispatch.call``: the connection's hot path (``acp_agent._wire.dispatch.call``);
- ``jsonrpcserver``: the same binder dispatched through jsonrpcserver's public pipeline
  (``acp_agent._wire.dispatch.dispatch``: unknown methods and by-position params take it);
- ``echo round trip``: one ``session/prompt`` to the idle ``end_turn`` of
  ``examples/echo_agent.py`` over real pipes (median and p99 of 200 sequential prompts).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from acp_agent._wire import dispatch
from acp_agent._wire.connection import Method, _binder, _Call
from acp_agent.schema import PromptRequest
from acp_agent.testing.client import spawn_agent

ROOT = Path(__file__).resolve().parents[1]
MESSAGE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "session/prompt",
    "params": {"sessionId": "sess_1", "prompt": [{"type": "text", "text": "hello"}]},
}


async def _handler(params: Any) -> Any:
    return params


BINDER = _binder(Method(_handler, PromptRequest))
TABLE = {"session/prompt": BINDER}


def _direct(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call = _Call()
        TABLE[MESSAGE["method"]](call, **MESSAGE["params"])
    return (time.perf_counter() - start) / n


def _hot(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call = _Call()
        dispatch.call(TABLE[MESSAGE["method"]], call, MESSAGE["method"], MESSAGE["params"])
    return (time.perf_counter() - start) / n


def _through(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call = _Call()
        dispatch.dispatch(MESSAGE, TABLE, call, MESSAGE["method"])
    return (time.perf_counter() - start) / n


async def _echo_round_trips(count: int) -> list[float]:
    times: list[float] = []
    async with spawn_agent([sys.executable, str(ROOT / "examples" / "echo_agent.py")]) as client:
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        for i in range(count):
            start = time.perf_counter()
            await client.prompt_and_wait(sid, f"echo {i}")
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    rounds, n = 7, 5000
    results: dict[str, list[float]] = {"direct": [], "dispatch.call": [], "jsonrpcserver": []}
    for _ in range(rounds):
        results["direct"].append(_direct(n))
        results["dispatch.call"].append(_hot(n))
        results["jsonrpcserver"].append(_through(n))
    floor = statistics.median(results["direct"])
    print(f"per-request dispatch cost, median of {rounds} rounds x {n} calls")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"  {name:<26} {med * 1e6:8.2f} us   {med / floor:5.2f}x direct   (+{(med - floor) * 1e6:.2f} us)")
    times = anyio.run(_echo_round_trips, 200)
    times.sort()
    print("echo round trip over real pipes (prompt -> idle end_turn), 200 sequential prompts")
    print(f"  median {statistics.median(times) * 1e3:.3f} ms   p99 {times[int(len(times) * 0.99) - 1] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
