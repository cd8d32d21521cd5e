"""``make demo``: drive the echo agent over real pipes and print a readable timeline.

Usage: ``python -m acp_agent.demo [--agent PATH]``. One line per message: time, direction
(``→`` client to agent, ``←`` agent to client), the method or update kind, and the
essentials of its content.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from .testing.client import Client, TranscriptEntry, spawn_agent

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Timeline:
    """Formats transcript entries as one line each."""

    def __init__(self) -> None:
        self._start: float | None = None
        self._methods: dict[tuple[str, Any], str] = {}

    def __call__(self, entry: TranscriptEntry) -> None:
        if self._start is None:
            self._start = entry.at
        line = self.describe(entry)
        if line:
            print(f"{entry.at - self._start:7.3f}s  {line}", flush=True)

    def describe(self, entry: TranscriptEntry) -> str:
        """One line for one message."""
        msg = entry.message
        arrow = "→" if entry.direction == "client->agent" else "←"
        if isinstance(msg, list):
            return f"{arrow} batch of {len(msg)}"
        if not isinstance(msg, dict):
            return f"{arrow} {msg!r}"
        method = msg.get("method")
        if method is not None:
            if "id" in msg:
                self._methods[(entry.direction, msg["id"])] = method
            return f"{arrow} {method:<28} {_params(method, msg.get('params') or {})}"
        sender = "agent->client" if entry.direction == "client->agent" else "client->agent"
        asked = self._methods.pop((sender, msg.get("id")), "?")
        if "error" in msg:
            err = msg["error"]
            return f"{arrow} {asked + ' (error)':<28} {err.get('code')} {err.get('message')}"
        return f"{arrow} {asked + ' (result)':<28} {_result(asked, msg.get('result') or {})}"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(_text(c) for c in content)
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text", ""))
        return f"[{content.get('type')}]"
    return ""


def _short(text: str, limit: int = 60) -> str:
    text = text.replace("\n", "⏎")
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _params(method: str, params: dict[str, Any]) -> str:
    if method == "session/update":
        update = params.get("update") or {}
        kind = update.get("sessionUpdate", "?")
        if kind == "state_update":
            extra = " ".join(
                f"{k}={update[k]}" for k in ("stopReason", "background") if k in update
            )
            return f"{kind:<22} {update.get('state')} {extra}".rstrip()
        if "content" in update and "messageId" in update:
            return f"{kind:<22} {update['messageId']} {_short(_text(update['content']))}"
        ident = next((update[k] for k in ("toolCallId", "terminalId", "planId") if k in update), "")
        return f"{kind:<22} {ident}".rstrip()
    if method == "initialize":
        return f"protocolVersion={params.get('protocolVersion')}"
    if method == "session/prompt":
        return f"{params.get('sessionId')} {_short(_text(params.get('prompt')))}"
    if method == "session/new":
        return f"cwd={params.get('cwd')}"
    return " ".join(f"{k}={v}" for k, v in params.items() if k != "_meta")


def _result(method: str, result: dict[str, Any]) -> str:
    if method == "initialize":
        info = result.get("info") or {}
        return f"protocolVersion={result.get('protocolVersion')} agent={info.get('name')} {info.get('version')}"
    return " ".join(f"{k}={v}" for k, v in result.items()) or "{}"


async def run_demo(agent_path: Path) -> int:
    """Run the scripted conversation against the agent at ``agent_path``."""
    timeline = Timeline()
    print(f"acp-agent demo: launching {agent_path.name} over stdio\n", flush=True)
    async with spawn_agent([sys.executable, str(agent_path)], on_message=timeline) as client:
        await _conversation(client)
    print(f"\nagent exited with status {client.returncode}", flush=True)
    return 0 if client.returncode == 0 else 1


async def _conversation(client: Client) -> None:
    await client.initialize()
    session_id = await client.new_session(os.getcwd())
    await client.prompt_and_wait(session_id, "Hello, ACP v2!")
    await client.prompt_and_wait(
        session_id,
        [
            {"type": "text", "text": "Echo this too"},
            {"type": "resource_link", "name": "README.md", "uri": f"file://{os.getcwd()}/README.md"},
        ],
    )
    await client.close_session(session_id)


def main() -> None:
    """Entry point of ``python -m acp_agent.demo``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agent", type=Path, default=EXAMPLES / "echo_agent.py", help="agent script to run")
    args = parser.parse_args()
    sys.exit(anyio.run(run_demo, args.agent))


if __name__ == "__main__":
    main()
