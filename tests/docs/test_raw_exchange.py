"""The raw v2 exchange on the site (docs_src/raw_exchange.txt) is what the first agent really writes.

Each ``>>`` line is sent to ``python docs_src/first_agent.py`` over its stdin, and the ``<<`` lines that follow
it must be exactly the lines the agent writes before the next request, once random ids are numbered in order
of appearance (``sess_…``, ``msg_…``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXCHANGE = ROOT / "docs_src" / "raw_exchange.txt"
ID = re.compile(r'"((?:sess|msg_user|msg)_[A-Za-z0-9_-]+)"')


def numbered(lines: list[str]) -> list[str]:
    """The lines with each distinct random id replaced by its kind and order of first appearance."""
    seen: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        value = match[1]
        kind = value.rsplit("_", 1)[0]
        seen.setdefault(value, f"{kind}#{sum(k.startswith(kind + '#') for k in seen.values())}")
        return f'"{seen[value]}"'

    return [ID.sub(name, json.dumps(json.loads(line), sort_keys=True)) for line in lines]


def test_the_documented_exchange_is_the_real_one(tmp_path: Path) -> None:
    steps: list[tuple[str, list[str]]] = []
    for line in EXCHANGE.read_text().splitlines():
        if line.startswith(">> "):
            steps.append((line[3:], []))
        elif line.startswith("<< "):
            steps[-1][1].append(line[3:])
    assert steps, "no exchange found"
    env = {**os.environ, "ACP_AGENT_DATA_DIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, str(ROOT / "docs_src" / "first_agent.py")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    timer = threading.Timer(20, process.kill)  # a hung agent fails the test instead of hanging it
    timer.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        expected: list[str] = []
        got: list[str] = []
        session_id = ""
        for request, answers in steps:
            sid = session_id
            process.stdin.write(ID.sub(lambda m, sid=sid: f'"{sid}"' if m[1].startswith("sess_") else m[0], request)
                                + "\n")
            process.stdin.flush()
            for _ in answers:
                line = process.stdout.readline()
                assert line, "the agent ended early"
                got.append(line)
                session_id = json.loads(line).get("result", {}).get("sessionId", session_id)
            expected += answers
        process.stdin.close()
        assert process.stdout.read() == ""  # nothing more after the last request
        assert numbered(got) == numbered(expected)
    finally:
        timer.cancel()
        process.kill()
        process.wait()
