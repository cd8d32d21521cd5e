"""A hook that blocks the event loop is named on the agent's stderr (a real agent process over pipes)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

AGENT = textwrap.dedent('''
    import time
    from acp_agent import Agent, run_stdio

    class SleepyAgent(Agent):
        name = "sleepy"

        async def prompt(self, session, prompt):
            time.sleep(1.5)  # the mistake: a blocking call in a hook
            await session.say("done")
            return "end_turn"

    run_stdio(SleepyAgent())
''')


def _exchange(agent: Path, env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    process = subprocess.Popen([sys.executable, str(agent)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdin is not None and process.stdout is not None
    seen: list[dict[str, Any]] = []

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()

    def read_until(done: Any) -> dict[str, Any]:
        assert process.stdout is not None
        while True:
            message = json.loads(process.stdout.readline())
            seen.append(message)
            if done(message):
                return message

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 2, "info": {"name": "t", "version": "1"}, "capabilities": {}}})
        read_until(lambda m: m.get("id") == 0)
        send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}})
        sid = read_until(lambda m: m.get("id") == 1)["result"]["sessionId"]
        send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
        read_until(lambda m: m.get("params", {}).get("update", {}).get("state") == "idle")
        _, stderr = process.communicate(timeout=20)  # closes stdin: the agent shuts down
    finally:
        if process.poll() is None:
            process.kill()
    return seen, stderr


def test_a_blocking_hook_is_named_on_stderr(tmp_path: Path) -> None:
    agent = tmp_path / "sleepy_agent.py"
    agent.write_text(AGENT)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    seen, stderr = _exchange(agent, env)
    assert any(m.get("params", {}).get("update", {}).get("stopReason") == "end_turn" for m in seen)
    warnings = [line for line in stderr.splitlines() if "event loop was blocked" in line]
    assert len(warnings) == 1, stderr
    assert "SleepyAgent.prompt" in warnings[0] and "anyio.to_thread.run_sync" in warnings[0]


def test_the_warning_can_be_turned_off(tmp_path: Path) -> None:
    agent = tmp_path / "sleepy_agent.py"
    agent.write_text(AGENT)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "ACP_AGENT_BLOCK_WARNING": "off"}
    _, stderr = _exchange(agent, env)
    assert "event loop was blocked" not in stderr
