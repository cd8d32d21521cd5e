"""The inspector page with a 10,000-message session: load time, JS heap and how fast the wire log answers.

    .venv/bin/python bench/inspector_page.py [--messages 10000] [--rounds 3] [--recording FILE.jsonl]

It records a real session first (examples/echo_agent.py driven through the inspector's own agent link until the
recording holds ``--messages`` wire messages; kept in ``bench/results/`` unless ``--recording`` names one), then
serves it with ``python -m acp_agent dev --replay`` and opens it in headless Chromium (Debian's ``chromium`` and
``chromium-driver``), ``--rounds`` times, each in a fresh browser profile. Per round: the time from navigation to
the page showing every message (the wire log's count), the JS heap after a forced garbage collection, the number
of DOM elements, and the time the wire log takes to filter all messages and to jump to the middle and paint.
Prints the median of each and writes them as one JSON line to ``bench/results/inspector-page.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acp_agent.dev.link import AgentTarget, Inspection  # noqa: E402
from tests.helpers.inspector import Page, chromium, css, running_inspector  # noqa: E402

RESULTS = ROOT / "bench" / "results"
WORDS = " ".join(f"word{i}" for i in range(40))


async def record(path: Path, messages: int) -> int:
    """Drive the echo agent through an Inspection until ``messages`` wire messages are recorded."""
    command = [sys.executable, "-m", "acp_agent.dev.child", str(ROOT / "examples" / "echo_agent.py")]
    with path.open("wb") as file:
        inspection = Inspection(AgentTarget(command=command, description="examples/echo_agent.py"), record=file)
        async with anyio.create_task_group() as tg:
            tg.start_soon(inspection.serve)
            with anyio.fail_after(30):
                while not any(e["type"] == "status" and e["state"] == "running" for e in inspection.events):
                    await anyio.sleep(0.05)
            client = inspection.client
            assert client is not None
            session = (await inspection.request("session/new", {"cwd": os.getcwd()}))["sessionId"]
            view = client.view(session)
            while sum(e["type"] == "wire" for e in inspection.events) < messages:
                before = view.idle_count
                await inspection.request("session/prompt", {"sessionId": session,
                                                            "prompt": [{"type": "text", "text": WORDS}]})
                await client.wait_for(lambda b=before: view.idle_count > b, 30)
            await inspection.stop()
            tg.cancel_scope.cancel()
    return sum(1 for line in path.open("rb") if b'"type":"wire"' in line)


def measure(recording: Path, wire: int) -> dict[str, float]:
    with running_inspector("--replay", str(recording)) as replay, chromium(["--js-flags=--expose-gc",
                                                                           "--enable-precise-memory-info"]) as driver:
        start = time.perf_counter()
        page = Page(driver, replay.url)
        page.wait_for(lambda: page.text("wire-count") == f"{wire} / {wire}", 120, "every message")
        wall = time.perf_counter() - start
        loaded = page.js("return performance.now()")
        page.js("gc()")
        heap = page.js("return performance.memory.usedJSHeapSize")
        elements = page.js("return document.getElementsByTagName('*').length")
        filtered = page.js("""
            const t = performance.now();
            acpInspector.wirelog.setFilter({text: 'session/prompt'});
            acpInspector.wirelog.setFilter({text: ''});
            return performance.now() - t;""")
        jump = page.js("""
            const log = acpInspector.wirelog, t = performance.now();
            log.box.scrollTop = log.rows.length * 11; log.paint();
            return performance.now() - t;""")
        rows = len(page.all(css("wire-entry")))
    return {"load_ms": loaded, "wall_s": wall, "heap_mb": heap / 2**20, "elements": elements,
            "filter_twice_ms": filtered, "jump_paint_ms": jump, "rows_in_dom": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--recording", type=Path, default=None)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    recording = args.recording or RESULTS / f"inspector-{args.messages}.jsonl"
    if not recording.exists():
        started = time.perf_counter()
        wire = anyio.run(record, recording, args.messages)
        print(f"recorded {wire} wire messages in {time.perf_counter() - started:.1f} s -> {recording}")
    wire = sum(1 for line in recording.open("rb") if b'"type":"wire"' in line)
    rounds = [measure(recording, wire) for _ in range(args.rounds)]
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    size = recording.stat().st_size / 2**20
    print(f"{wire} messages ({size:.1f} MiB recording), median of {args.rounds} rounds:")
    for key, value in medians.items():
        print(f"  {key:16} {value:10.1f}")
    with (RESULTS / "inspector-page.jsonl").open("a") as out:
        out.write(json.dumps({"messages": wire, "recording_mib": size, "rounds": rounds, "median": medians}) + "\n")


if __name__ == "__main__":
    main()
