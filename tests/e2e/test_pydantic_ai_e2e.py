"""The pydantic-ai coding agent example (``examples/coding_agent.py``, offline model) as a real process:
the model's history survives an agent restart (stdio, SQLite) and a resume over WebSocket on another
connection, and the client's replay matches what it saw. Every transcript is judged by the WireChecker
(the client's) and the official schema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from acp_agent.testing.checker import WireChecker
from acp_agent.testing.client import spawn_agent
from acp_agent.testing.schema import SchemaValidator
from tests.helpers.e2e import ROOT
from tests.helpers.remote import served_agent

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "coding_agent.py"
NO_KEYS = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}  # the offline model only, whatever this machine has


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_history_survives_an_agent_restart(tmp_path: Path, validator: SchemaValidator) -> None:
    cwd = str(tmp_path)
    async with spawn_agent([sys.executable, str(EXAMPLE)], env=NO_KEYS) as first:
        await first.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "remember the tea")
        await first.prompt_and_wait(sid, "and the biscuits")
        seen = dict(first.view(sid).messages())
    assert validator.check_transcript(first.transcript) == []

    async with spawn_agent([sys.executable, str(EXAMPLE)], env=NO_KEYS) as second:
        await second.initialize()
        await second.resume_session(sid, cwd, replay=True)
        view = second.view(sid)
        assert dict(view.messages()) == seen  # the replay is what the first client saw
        await second.prompt_and_wait(sid, "what now")
        assert list(view.messages().values())[-1] == \
            "(offline model) You said: what now. Prompts so far: 3."
    assert validator.check_transcript(second.transcript) == []


class WsClient:
    """A bare JSON-RPC client over one WebSocket: answers permission requests, checks every message."""

    def __init__(self, ws: ClientConnection, checker: WireChecker, validator: SchemaValidator) -> None:
        self.ws, self.checker, self.validator = ws, checker, validator
        self.next_id = 0
        self.received: list[dict[str, Any]] = []

    def _receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.ws.recv(timeout=20))
        self.checker.feed("agent->client", message)
        assert self.validator.check(message) == [], message
        self.received.append(message)
        return message

    def _send(self, message: dict[str, Any]) -> None:
        self.checker.feed("client->agent", message)
        self.ws.send(json.dumps(message))

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            message = self._receive()
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message
                return message["result"]

    def wait_idle(self, sid: str) -> None:
        while True:
            update = self._receive().get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle" \
                    and "stopReason" in update:
                return

    def said(self) -> list[str]:
        texts: dict[str, str] = {}
        for message in self.received:
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") in ("agent_message_chunk", "agent_message"):
                content = update["content"]
                text = content["text"] if isinstance(content, dict) else "".join(b["text"] for b in content)
                texts[update["messageId"]] = texts.get(update["messageId"], "") + text
        return list(texts.values())


HELLO = {"protocolVersion": 2, "info": {"name": "ws-test", "version": "0"}, "capabilities": {}}


def test_history_resumes_over_websocket_on_another_connection(tmp_path: Path, validator: SchemaValidator) -> None:
    cwd = str(tmp_path)
    store = f"sqlite:{tmp_path / 'sessions.sqlite3'}"
    with served_agent(EXAMPLE, "--store", store, env=NO_KEYS) as served:
        checker = WireChecker(raise_on_violation=False)
        with connect(served.ws_url) as ws:
            client = WsClient(ws, checker, validator)
            client.request("initialize", HELLO)
            sid = client.request("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]
            client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "first"}]})
            client.wait_idle(sid)
        checker.finish()
        assert checker.violations == []
        checker = WireChecker(raise_on_violation=False)
        with connect(served.ws_url) as ws:
            client = WsClient(ws, checker, validator)
            client.request("initialize", HELLO)
            client.request("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
            client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "second"}]})
            client.wait_idle(sid)
            assert client.said()[-1] == "(offline model) You said: second. Prompts so far: 2."
        checker.finish()
        assert checker.violations == []
