"""Where acp-agent's time goes: profiles of ``bench/agents/sdk_agent.py`` under the bench workloads.

Run: ``.venv/bin/python bench/profile_sdk.py [--py-spy PATH/TO/py-spy] [--stream 20000] [--repeat 3]``.

- start-up: ``-X importtime`` of the agent (the imports by cumulative and by own time), and a cProfile of
  spawn -> ``initialize`` answered -> exit;
- stream: a cProfile of the agent serving ``stream N`` ``--repeat`` times after a warm-up (start-up is in
  the profile too, but small next to the stream), top functions by own time and by cumulative time;
- echo: a cProfile of the agent serving ``--echo`` sequential ``echo`` prompts;
- with ``--py-spy``: a py-spy sampling profile (1000 Hz, attached after the warm-up) of the same stream
  and echo workloads, as leaf functions and as the innermost ``acp_agent`` frame of each sample. Idle samples
  (the event loop waiting in ``epoll``) are left out by py-spy.

Profiles are written to ``bench/results/profile-*``; the tables go to stdout. cProfile inflates the cost
of many small calls, so read its numbers as shares, not as absolute times.
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import (  # bench/ is not a package: imported from the path above
    AGENT_ENV,
    RESULTS,
    ROOT,
    AgentSpec,
    BenchError,
    Peer,
    check_echo,
    check_stream,
    initialize_params,
    new_session_params,
)

AGENT = "bench/agents/sdk_agent.py"


def drive(argv: list[str], stream: int, repeat: int, sampler: list[str] | None = None, echo: int = 0) -> float:
    """Initialize, then (if ``stream`` or ``echo``) a warm-up and ``repeat`` stream prompts or ``echo`` echo
    prompts; returns the seconds spent in them.

    ``sampler``: a profiler command line that gets ``--pid <agent pid>`` appended and is started after the
    warm-up; it must stop by itself when the agent exits.
    """
    spec = AgentSpec("acp-agent", "acp-agent", argv, 2)
    attached: subprocess.Popen[bytes] | None = None
    with tempfile.TemporaryFile() as stderr:
        peer = Peer(spec, stderr)
        try:
            peer.call("initialize", initialize_params(2))
            seconds = 0.0
            if stream or echo:
                session, _, _ = peer.call("session/new", new_session_params(2))
                sid = session["sessionId"]
                peer.prompt(sid, "stream 200")
                if sampler:
                    attached = subprocess.Popen([*sampler, "--pid", str(peer.pid)], stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL)
                    time.sleep(1.0)  # let it attach
                for _ in range(repeat if stream else 0):
                    end, messages, sent, ended = peer.prompt(sid, f"stream {stream}")
                    check_stream(spec, end, messages, sid, stream)
                    seconds += ended - sent
                for i in range(echo):
                    end, messages, sent, ended = peer.prompt(sid, f"echo ping {i}")
                    check_echo(spec, end, messages, sid, f"ping {i}")
                    seconds += ended - sent
            peer.close()
            if attached is not None:
                attached.wait(60)
        except BaseException:
            peer.kill()
            if attached is not None:
                attached.kill()
                attached.wait()
            print(peer.stderr_tail(), file=sys.stderr)
            raise
    return seconds


def where(filename: str) -> str:
    for marker in ("/acp_agent/", "/site-packages/", "/lib/python3."):
        index = filename.find(marker)
        if index >= 0:
            rest = filename[index + len(marker) :]
            return ("acp_agent/" + rest) if marker == "/acp_agent/" else rest.split("/", 1)[-1] \
                if marker == "/lib/python3." else rest
    return filename


def top_functions(path: Path, sort: str, limit: int) -> None:
    stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = tottime if sort == "tottime" else cumtime
        rows.append((key, calls, tottime, cumtime, f"{where(filename)}:{line}:{name}"))
    rows.sort(reverse=True)
    print(f"  {'own s':>8} {'own %':>6} {'cum s':>8} {'cum %':>6} {'calls':>9}  function   (total {total:.2f} s)")
    for _key, calls, tottime, cumtime, label in rows[:limit]:
        print(f"  {tottime:8.3f} {tottime / total * 100:5.1f}% {cumtime:8.3f} {cumtime / total * 100:5.1f}% "
              f"{calls:9d}  {label}")


def importtime(python: str) -> None:
    completed = subprocess.run([python, "-X", "importtime", "-c", "import runpy, sys; sys.argv=['x']; "
                                "import importlib; importlib.import_module('acp_agent')"],
                               cwd=ROOT, capture_output=True, text=True, check=True, env=AGENT_ENV)
    entries = []
    for line in completed.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if match:
            entries.append((int(match[1]), int(match[2]), len(match[3]) // 2, match[4]))
    total = max(cumulative for _, cumulative, _, _ in entries)
    print(f"  import acp_agent: {total / 1e3:.0f} ms in total; the imports it triggers, by cumulative time:")
    children = [e for e in entries if e[2] == 1 or (e[2] == 0 and e[3] != "acp_agent")]
    for own, cumulative, _, name in sorted(children, key=lambda e: -e[1])[:12]:
        print(f"    {cumulative / 1e3:7.1f} ms cumulative {own / 1e3:6.1f} ms own  {name}")
    by_package: collections.Counter[str] = collections.Counter()
    for own, _, _, name in entries:
        by_package[name.split(".")[0]] += own
    print("  own import time by top-level package:")
    for name, own in by_package.most_common(10):
        print(f"    {own / 1e3:7.1f} ms  {name}")


def py_spy(py_spy_path: str, python: str, stream: int, repeat: int, echo: int = 0) -> None:
    out = RESULTS / f"profile-{'echo' if echo else 'stream'}-pyspy.txt"
    sampler = [py_spy_path, "record", "--format", "raw", "--rate", "1000", "--output", str(out)]
    drive([python, AGENT], stream, repeat, sampler, echo)
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [function_of(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    print(f"  py-spy: {total} samples, written to {out.relative_to(ROOT)}")
    print("  own time by function (native code such as pydantic-core counts for the Python function calling it):")
    for frame, count in own.most_common(15):
        print(f"    {count / total * 100:5.1f}%  {frame}")
    print("  inclusive time of the acp_agent functions (share of samples with the function on the stack):")
    for frame, count in [(f, c) for f, c in inclusive.most_common() if f.startswith("acp_agent/")][:20]:
        print(f"    {count / total * 100:5.1f}%  {frame}")


def function_of(frame: str) -> str:
    """``name (file:line)`` from py-spy -> ``file:name`` (lines of one function merged)."""
    match = re.match(r"(.*) \((.*):(\d+)\)", frame)
    if not match:
        return frame or "(unknown)"
    return f"{where(match[2])}:{match[1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--echo", type=int, default=3000)
    parser.add_argument("--py-spy", dest="py_spy", help="path to a py-spy binary (optional)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    python = sys.executable
    RESULTS.mkdir(parents=True, exist_ok=True)

    drive([python, AGENT], 0, 0)  # writes the .pyc files, warms the page cache
    print("== start-up: imports")
    importtime(python)

    print("\n== start-up: cProfile of spawn -> initialize answered -> exit")
    out = RESULTS / "profile-startup.prof"
    started = time.perf_counter()
    drive([python, "-m", "cProfile", "-o", str(out), AGENT], 0, 0)
    print(f"  (wall {time.perf_counter() - started:.2f} s under cProfile; written to {out.relative_to(ROOT)})")
    top_functions(out, "cumtime", args.top)

    print(f"\n== stream: cProfile of {args.repeat} x stream {args.stream} (after a warm-up)")
    out = RESULTS / "profile-stream.prof"
    seconds = drive([python, "-m", "cProfile", "-o", str(out), AGENT], args.stream, args.repeat)
    print(f"  ({args.repeat * args.stream / seconds:,.0f} notif/s under cProfile; written to {out.relative_to(ROOT)})")
    print("  by own time:")
    top_functions(out, "tottime", args.top)
    print("  by cumulative time:")
    top_functions(out, "cumtime", args.top)

    print(f"\n== echo: cProfile of {args.echo} sequential echo prompts (after a warm-up)")
    out = RESULTS / "profile-echo.prof"
    seconds = drive([python, "-m", "cProfile", "-o", str(out), AGENT], 0, 0, echo=args.echo)
    print(f"  ({seconds / args.echo * 1e3:.3f} ms per round trip under cProfile; written to {out.relative_to(ROOT)})")
    print("  by own time:")
    top_functions(out, "tottime", args.top)

    if args.py_spy:
        if os.geteuid() != 0:
            print("  (py-spy may need root or ptrace permission)")
        print(f"\n== stream: py-spy of {args.repeat} x stream {args.stream}")
        py_spy(args.py_spy, python, args.stream, args.repeat)
        print(f"\n== echo: py-spy of {args.echo} sequential echo prompts")
        py_spy(args.py_spy, python, 0, 0, args.echo)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
