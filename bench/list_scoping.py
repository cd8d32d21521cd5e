"""The cost of principal scoping on ``session/list``: two checkouts, alternating, in one run.

Run: ``.venv/bin/python bench/list_scoping.py BEFORE AFTER [--sessions 2000] [--calls 200] [--reps 5]`` (two
checkout directories).

Each repetition runs, for each checkout in turn (the order flips every repetition), a child process with that
checkout on ``PYTHONPATH`` that fills a store (SQLite file, then memory) with ``--sessions`` sessions and times
``--calls`` first-page ``session/list`` requests through the in-memory test client, then a walk through every
page. It prints each checkout's median per request (µs) and the median AFTER / BEFORE ratio over repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
import anyio
from acp_agent import Agent
from acp_agent.records import SessionRecord
from acp_agent.store import MemoryStore, SqliteStore
from acp_agent.testing.client import connect_agent

class Quiet(Agent):
    name = "quiet"

async def measure(store, sessions, calls):
    for i in range(sessions):
        await store.save(SessionRecord(session_id=f"sess_{i:08d}", cwd="/work",
                                       updated_at=f"2026-12-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"))
    async with connect_agent(Quiet(), store=store) as client:
        await client.initialize()
        for _ in range(10):
            await client.request("session/list", {})
        first = []
        for _ in range(calls):
            start = time.perf_counter()
            await client.request("session/list", {})
            first.append(time.perf_counter() - start)
        start = time.perf_counter()
        params, pages = {}, 0
        while True:
            page = await client.request("session/list", params)
            pages += 1
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        walk = (time.perf_counter() - start) / pages
    first.sort()
    return first[len(first) // 2] * 1e6, walk * 1e6

async def main(sessions, calls):
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await measure(SqliteStore(Path(tmp) / "s.sqlite3"), sessions, calls)
    memory = await measure(MemoryStore(), sessions, calls)
    print(json.dumps({"sqlite_first": sqlite[0], "sqlite_walk": sqlite[1], "memory_first": memory[0],
                      "memory_walk": memory[1]}))

anyio.run(main, int(sys.argv[1]), int(sys.argv[2]))
"""


def run(checkout: Path, sessions: int, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "ACP_AGENT_DATA_DIR": tempfile.gettempdir()}
    done = subprocess.run([sys.executable, "-c", CHILD, str(sessions), str(calls)], cwd=checkout, env=env,
                          capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    checkouts = [args.before.resolve(), args.after.resolve()]
    results: list[list[dict[str, float]]] = [[], []]
    for rep in range(args.reps):
        order = (0, 1) if rep % 2 == 0 else (1, 0)
        for index in order:
            results[index].append(run(checkouts[index], args.sessions, args.calls))
    print(f"session/list with {args.sessions} stored sessions, {args.reps} repetitions (median µs per request)")
    print(f"{'measure':<14} {'before':>10} {'after':>10} {'after/before':>13}")
    for key in ("sqlite_first", "sqlite_walk", "memory_first", "memory_walk"):
        before = statistics.median(r[key] for r in results[0])
        after = statistics.median(r[key] for r in results[1])
        ratio = statistics.median(b[key] / a[key] for a, b in zip(results[0], results[1], strict=True))
        print(f"{key:<14} {before:>10.0f} {after:>10.0f} {ratio:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
