"""Memory of an agent that keeps many closed sessions: RSS of the echo agent over real pipes.

Run: ``.venv/bin/python bench/store_rss.py [--sessions 2000] [--prompts 3] [--agent PATH]``.

The driver launches ``examples/echo_agent.py`` (its default SQLite store, in a fresh
``ACP_AGENT_DATA_DIR``; ``PYTHONPATH`` is this checkout, so running the script of another
checkout measures that one) and speaks v2 with a lean blocking client: for each session
``session/new``, N prompts (each waited to its ``idle``), ``session/close``. It prints the
agent's ``VmRSS`` after a warm-up of 100 sessions and at the end, and the growth. Closed
sessions live in the store, so the growth should stay small (the target of issue 14: < 5 MB
over 2,000 sessions).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]


class Peer:
    """A blocking JSON-lines client over the agent's pipes."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.out = process.stdin
        self.inp = process.stdout
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.out.write(orjson.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
                       + b"\n")
        self.out.flush()
        return self.next_id

    def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self.send(method, params)
        while True:
            message = orjson.loads(self.inp.readline())
            if message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def prompt(self, session_id: str, text: str) -> None:
        request_id = self.send("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        answered = idle = False
        while not (answered and idle):
            message = orjson.loads(self.inp.readline())
            if message.get("id") == request_id:
                answered = True
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                idle = True


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--agent", default=str(ROOT / "examples" / "echo_agent.py"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acp-rss-") as data:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["ACP_AGENT_DATA_DIR"] = data
        env["PYTHONPATH"] = str(ROOT)
        process = subprocess.Popen([sys.executable, args.agent], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=env)
        peer = Peer(process)
        peer.call("initialize", {"protocolVersion": 2, "info": {"name": "rss", "version": "1"}, "capabilities": {}})
        began = time.monotonic()
        start_rss = 0.0
        for i in range(args.sessions):
            if i == args.warmup:
                start_rss = rss_mb(process.pid)
            sid = peer.call("session/new", {"cwd": "/tmp"})["sessionId"]
            for j in range(args.prompts):
                peer.prompt(sid, f"prompt {j} of session {i}: a few words to echo back")
            peer.call("session/close", {"sessionId": sid})
        end_rss = rss_mb(process.pid)
        listed = peer.call("session/list", {})
        elapsed = time.monotonic() - began
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(30)
        files = sum(p.stat().st_size for p in Path(data).glob("*"))
    print(f"sessions: {args.sessions} x {args.prompts} prompts, then closed ({elapsed:.1f} s)")
    growth = end_rss - start_rss
    per_session = growth * 1e3 / max(1, args.sessions - args.warmup)
    print(f"RSS after {args.warmup} sessions: {start_rss:.1f} MB; after {args.sessions}: {end_rss:.1f} MB; "
          f"growth {growth:+.1f} MB ({per_session:.2f} KB per session)")
    print(f"first page of session/list: {len(listed['sessions'])} sessions; data dir: {files / 1e6:.1f} MB on disk")


if __name__ == "__main__":
    main()
