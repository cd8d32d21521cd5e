"""What a build's terminal output costs on the v1 wire (issue 37): bytes per output byte, updates per second.

    .venv/bin/python bench/v1_terminal.py [--lines 3000] [--delay 0.001] [--json]

Starts ``examples/background_agent.py`` over stdio as a v1 client would (``protocolVersion: 1``), runs a
build that prints ``--lines`` short lines in the foreground (``/run``), one every ``--delay`` seconds, and
counts the ``session/update`` lines of its tool call until the prompt is answered: their bytes against the
build's output bytes, how many, and how many per second of the turn. Goals: at most 10x the output bytes and 60 updates.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
LINE = "[{i:04d}] cc -c mod_{i:04d}.c"


def _send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    pipe.write(json.dumps(message).encode() + b"\n")
    pipe.flush()


def _answer(out: IO[bytes], request_id: int, lines: list[bytes]) -> dict[str, Any]:
    """Read lines (kept in ``lines``) until the answer to ``request_id``."""
    while True:
        raw = out.readline()
        if not raw:
            raise RuntimeError("the agent exited")
        lines.append(raw)
        message = json.loads(raw)
        if message.get("id") == request_id and "method" not in message:
            return dict(message)


def measure(lines: int, delay: float) -> dict[str, Any]:
    """One build through the v1 bridge: output bytes, v1 bytes and updates of its tool call, turn seconds."""
    env = {**os.environ, "ACP_AGENT_DATA_DIR": os.environ.get("ACP_AGENT_DATA_DIR", "/tmp/acp-bench-v1")}
    agent = subprocess.Popen([sys.executable, str(ROOT / "examples" / "background_agent.py")], cwd=ROOT, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert agent.stdin is not None and agent.stdout is not None
    seen: list[bytes] = []
    try:
        _send(agent.stdin, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
        _answer(agent.stdout, 0, seen)
        _send(agent.stdin, {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                            "params": {"cwd": str(ROOT), "mcpServers": []}})
        session_id = _answer(agent.stdout, 1, seen)["result"]["sessionId"]
        script = (f"import time\nfor i in range({lines}):\n print('{LINE}'.format(i=i), flush=True)\n"
                  f" time.sleep({delay})")
        output = sum(len(LINE.format(i=i)) + 1 for i in range(lines))
        seen.clear()
        began = time.perf_counter()
        command = f"/run {sys.executable} -c {shlex.quote(script)}"
        _send(agent.stdin, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": session_id, "prompt": [{"type": "text", "text": command}]}})
        _answer(agent.stdout, 2, seen)
        seconds = time.perf_counter() - began
    finally:
        agent.stdin.close()
        agent.wait(timeout=30)
    tool_lines = [raw for raw in seen if b'"sessionUpdate":"tool_call' in raw]
    wire = sum(len(raw) for raw in tool_lines)
    if b"[exit code 0]" not in b"".join(tool_lines):
        raise RuntimeError("the build did not exit 0")
    return {"lines": lines, "output_bytes": output, "v1_bytes": wire, "ratio": wire / output,
            "updates": len(tool_lines), "seconds": seconds, "updates_per_s": len(tool_lines) / seconds}


def main() -> None:
    """Print the figure (or one JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--delay", type=float, default=0.001, help="seconds between two lines of the build")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    row = measure(args.lines, args.delay)
    if args.json:
        print(json.dumps(row))
        return
    print(f"v1 terminal: {row['lines']} lines, {row['output_bytes'] / 1e3:.1f} KB of output -> "
          f"{row['v1_bytes'] / 1e3:.1f} KB on the v1 wire ({row['ratio']:.1f}x) in {row['updates']} tool call updates "
          f"({row['updates_per_s']:.1f}/s over {row['seconds']:.2f} s); goals <= 10x and <= 60 updates")


if __name__ == "__main__":
    main()
