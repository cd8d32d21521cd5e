"""What the watchdog of terminal processes costs, and how fast it cleans up (issue 27, section 4).

    .venv/bin/python bench/terminal_watch.py [--starts 200] [--kills 10]

Prints medians: one terminal start (``ManagedProcess.start`` of ``true``, to its exit) with the watchdog and
with it switched off, interleaved; the first start's extra cost (starting the watchdog); the watchdog's RSS; and
the time from an agent process's SIGKILL until its terminal's processes (the group and a ``setsid`` one) are gone.
Linux only.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio

from acp_agent._util import watch
from acp_agent._util.processes import ManagedProcess
from acp_agent._util.reaper import start_time


async def _ignore(data: bytes) -> None:
    return None


async def one_start() -> float:
    began = time.perf_counter()
    async with anyio.create_task_group() as tg:
        process = await ManagedProcess.start(["true"], cwd="/", on_output=_ignore, task_group=tg)
        await process.wait()
    return time.perf_counter() - began


async def starts(count: int) -> dict[str, float]:
    first = await one_start()  # starts the watchdog
    on: list[float] = []
    off: list[float] = []
    supported = watch._supported
    for _ in range(count):
        on.append(await one_start())
        watch._supported = lambda: False  # type: ignore[assignment]
        mark, watch._mark = watch._mark, None
        try:
            off.append(await one_start())
        finally:
            watch._supported, watch._mark = supported, mark
    return {"first_start_ms": first * 1e3, "start_with_watchdog_ms": statistics.median(on) * 1e3,
            "start_without_ms": statistics.median(off) * 1e3}


AGENT = textwrap.dedent("""
    import anyio, os, sys
    from acp_agent._util.processes import ManagedProcess

    async def main():
        async def out(data): sys.stdout.buffer.write(data); sys.stdout.flush()
        async with anyio.create_task_group() as tg:
            await ManagedProcess.start_shell(
                "echo $$; setsid sh -c 'echo $$; exec sleep 300' & exec sleep 300", cwd="/", on_output=out,
                task_group=tg)
            await anyio.sleep_forever()

    anyio.run(main)
""")


def alive(pid: int) -> bool:
    return start_time(pid) is not None


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def kills(count: int) -> dict[str, float]:
    times: list[float] = []
    rss: list[int] = []
    for _ in range(count):
        agent = subprocess.Popen([sys.executable, "-c", AGENT], stdout=subprocess.PIPE)
        assert agent.stdout is not None
        pids = [int(agent.stdout.readline()), int(agent.stdout.readline())]
        dogs = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == agent.pid
                and b"reaper.py" in Path(f"/proc/{p}/cmdline").read_bytes()]
        rss += [rss_kib(d) for d in dogs]
        began = time.perf_counter()
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        while any(alive(pid) for pid in pids):
            if time.perf_counter() - began > 10:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                raise SystemExit("the terminal's processes outlived the agent by 10 s")
            time.sleep(0.001)
        times.append(time.perf_counter() - began)
    return {"cleanup_after_sigkill_ms": statistics.median(times) * 1e3,
            "cleanup_after_sigkill_max_ms": max(times) * 1e3,
            "watchdog_rss_kib": statistics.median(rss) if rss else 0.0}


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=200)
    parser.add_argument("--kills", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acp-watch-bench-") as data:
        os.environ["ACP_AGENT_DATA_DIR"] = data
        results = anyio.run(starts, args.starts)
        results.update(kills(args.kills))
    for name, value in results.items():
        print(f"{name:32} {value:10.2f}")


if __name__ == "__main__":
    main()
