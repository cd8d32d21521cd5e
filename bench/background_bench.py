"""Background work costs: terminal output throughput and the price of one snapshot.

Run: ``.venv/bin/python bench/background_bench.py [--mb 100]``.

- terminal throughput: ``examples/background_agent.py`` runs ``/bg head -c N /dev/zero`` over
  real pipes; the client decodes every ``terminal_output_chunk``. Reported: MB/s from the
  prompt to the ``exitStatus`` update, the number of chunks, and that no byte was lost.
- snapshot cost: a session with 1, 100, 1,000 and 10,000 listed tool calls; the time to
  build and serialize one ``state_update`` carrying the whole list (median of repeats),
  plus the time it took to announce the items (entity updates and list maintenance).
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from acp_agent import Agent, ContentBlock, Limits, Session, StopReason
from acp_agent.testing.client import connect_agent, spawn_agent

ROOT = Path(__file__).resolve().parents[1]


async def terminal_throughput(megabytes: int) -> dict[str, Any]:
    size = megabytes * 1_000_000
    received = 0
    chunks = 0
    exited = anyio.Event()
    start = 0.0
    end = 0.0

    def on_message(entry: Any) -> None:
        nonlocal received, chunks, end
        update = (entry.message.get("params") or {}).get("update") or {} if isinstance(entry.message, dict) else {}
        kind = update.get("sessionUpdate")
        if kind == "terminal_output_chunk":
            received += len(base64.b64decode(update["data"]))
            chunks += 1
        elif kind == "terminal_update" and "exitStatus" in update:
            end = time.perf_counter()
            exited.set()

    command = [sys.executable, str(ROOT / "examples" / "background_agent.py")]
    async with spawn_agent(command, on_message=on_message, keep_transcript=False, check=False) as client:
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        start = time.perf_counter()
        await client.prompt(sid, f"/bg head -c {size} /dev/zero")
        with anyio.fail_after(600):
            await exited.wait()
    seconds = end - start
    return {"bytes": received, "expected": size, "chunks": chunks, "seconds": seconds,
            "mb_per_s": received / 1e6 / seconds}


class ManyItems(Agent):
    """Lists N detached tool calls, then times snapshots."""

    limits = Limits(max_listed_items=100_000)  # the bench lists up to 10000 items
    results: dict[int, dict[str, float]] = {}

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        count = int(getattr(prompt[0], "text", "1"))
        started = time.perf_counter()
        with session.batch():
            for i in range(count):
                await session.start_tool_call(f"job {i}", kind="other", detach=True)
        announce = time.perf_counter() - started
        samples = []
        for _ in range(15):
            t0 = time.perf_counter()
            core = session._core  # the engine behind the session (a bench may look inside)
            core.sink.frame(core.snapshots.snapshot("running"))
            samples.append(time.perf_counter() - t0)
        self.results[count] = {"snapshot_ms": statistics.median(samples) * 1e3,
                               "announce_us_per_item": announce / count * 1e6}
        return "end_turn"


async def snapshot_cost(counts: list[int]) -> dict[int, dict[str, float]]:
    agent = ManyItems()
    async with connect_agent(agent) as client:
        await client.initialize()
        for count in counts:
            sid = await client.new_session(str(ROOT))
            await client.prompt_and_wait(sid, str(count), timeout=300)
            await client.close_session(sid)
    return agent.results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args()
    result = anyio.run(terminal_throughput, args.mb)
    ok = "all bytes delivered" if result["bytes"] == result["expected"] else "BYTES MISSING"
    print(f"terminal output: {result['bytes'] / 1e6:.0f} MB in {result['seconds']:.2f} s = "
          f"{result['mb_per_s']:.1f} MB/s, {result['chunks']} chunks "
          f"({result['bytes'] / max(result['chunks'], 1) / 1024:.0f} KiB avg), {ok}")
    costs = anyio.run(snapshot_cost, [1, 100, 1000, 10000])
    print("snapshot cost (build + serialize one state_update with the whole list), median of 15:")
    for count, row in costs.items():
        print(f"  {count:>6} listed items: {row['snapshot_ms']:8.3f} ms   "
              f"(announcing cost {row['announce_us_per_item']:.1f} us/item)")


if __name__ == "__main__":
    main()
