"""The ASGI app in-process (asyncio and trio), the CLI's agent loading, and that stdio never imports the HTTP stack.

A tiny ASGI driver plays the server: lifespan, POST/GET/DELETE with the ACP headers, an SSE stream read chunk by
chunk, and a WebSocket session, so the app's own code runs on both backends without uvicorn.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent
from acp_agent.cli import LoadError, load_agent
from acp_agent.http import AcpApp, HttpOptions, asgi_app

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}}


class EchoAgent(Agent):
    name = "echo"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say(" ".join(b.text for b in prompt if isinstance(b, TextContent)))
        return "end_turn"


@asynccontextmanager
async def running(app: AcpApp) -> AsyncIterator[None]:
    """Run the app's ASGI lifespan for the block."""
    to_app, app_inbox = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_outbox, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)

    async def receive() -> dict[str, Any]:
        return await app_inbox.receive()

    async def send(message: dict[str, Any]) -> None:
        await app_outbox.send(message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan"}, receive, send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        yield
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


async def request(app: AcpApp, method: str, headers: dict[str, str], body: Any = None,
                  path: str = "/acp", root_path: str = "") -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP exchange."""
    raw = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        headers = {"content-type": "application/json", **headers}
    scope = {"type": "http", "method": method, "path": path, "root_path": root_path,
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    sent = [{"type": "http.request", "body": raw, "more_body": False}]
    done = anyio.Event()
    answer: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if sent:
            return sent.pop()
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        answer.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
    start = answer[0]
    return (start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
            b"".join(m.get("body", b"") for m in answer[1:]))


class Events:
    """An SSE GET kept open in a task; ``next()`` returns the next message."""

    def __init__(self) -> None:
        self.send_stream, self.receive_stream = anyio.create_memory_object_stream[dict[str, Any]](1000)
        self.gone = anyio.Event()
        self.status = 0

    async def run(self, app: AcpApp, headers: dict[str, str]) -> None:
        scope = {"type": "http", "method": "GET", "path": "/acp",
                 "headers": [(k.encode(), v.encode()) for k, v in {"accept": "text/event-stream", **headers}.items()]}
        pending = b""

        async def receive() -> dict[str, Any]:
            await self.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal pending
            if message["type"] == "http.response.start":
                self.status = message["status"]
                return
            pending += message.get("body", b"")
            *events, pending = pending.split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):  # an "id: N" line comes first
                    if line.startswith(b"data: "):
                        await self.send_stream.send(json.loads(line[6:]))

        await app(scope, receive, send)
        self.send_stream.close()

    async def next(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            return await self.receive_stream.receive()


@pytest.mark.anyio
async def test_streamable_http_round_trip_in_process() -> None:
    app = asgi_app(EchoAgent, keepalive=0.2)
    async with running(app), anyio.create_task_group() as tg:
        status, headers, body = await request(app, "POST", {}, INITIALIZE)
        assert status == 200 and json.loads(body)["result"]["protocolVersion"] == 2
        cid = headers["acp-connection-id"]
        events = Events()
        tg.start_soon(events.run, app, {"acp-connection-id": cid})
        status, _, _ = await request(app, "POST", {"acp-connection-id": cid},
                                     {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}})
        assert status == 202
        new = await events.next()
        sid = new["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}
        assert (await request(app, "POST", {"acp-connection-id": cid}, prompt))[0] == 400
        assert (await request(app, "POST", {"acp-connection-id": cid, "acp-session-id": sid}, prompt))[0] == 202
        seen = []
        while not any(m.get("params", {}).get("update", {}).get("stopReason") for m in seen[-1:]):
            seen.append(await events.next())
        assert any(m.get("id") == 2 for m in seen)
        assert len(app.registry) == 1
        assert (await request(app, "DELETE", {"acp-connection-id": cid}))[0] == 202
        with anyio.fail_after(5):
            while True:  # the stream ends once the connection is gone
                try:
                    await events.receive_stream.receive()
                except anyio.EndOfStream:
                    break
        assert (await request(app, "DELETE", {"acp-connection-id": cid}))[0] == 404
        assert (await request(app, "GET", {"acp-connection-id": cid, "accept": "text/event-stream"}))[0] == 404


@pytest.mark.anyio
async def test_websocket_round_trip_in_process() -> None:
    app = AcpApp(EchoAgent(), HttpOptions())
    to_app, inbox = anyio.create_memory_object_stream[dict[str, Any]](10)
    outbox, from_app = anyio.create_memory_object_stream[dict[str, Any]](100)
    scope = {"type": "websocket", "path": "/acp", "headers": []}
    async with running(app), anyio.create_task_group() as tg:
        tg.start_soon(app, scope, inbox.receive, outbox.send)
        await to_app.send({"type": "websocket.connect"})
        accept = await from_app.receive()
        assert accept["type"] == "websocket.accept"
        assert dict(accept["headers"])[b"acp-connection-id"]
        await to_app.send({"type": "websocket.receive", "text": json.dumps(INITIALIZE)})
        assert json.loads((await from_app.receive())["text"])["result"]["protocolVersion"] == 2
        await to_app.send({"type": "websocket.receive", "text": "[]"})
        assert json.loads((await from_app.receive())["text"])["error"]["code"] == -32600
        await to_app.send({"type": "websocket.disconnect", "code": 1000})
    assert len(app.registry) == 0


@pytest.mark.anyio
async def test_lifespan_less_mount_refuses_http_initialize_clearly() -> None:
    app = asgi_app(EchoAgent)
    status, _, body = await request(app, "POST", {}, INITIALIZE)
    assert (status, body) == (503, b"Service Unavailable")


@pytest.mark.anyio
async def test_mounted_app_serves_under_its_prefix() -> None:
    app = asgi_app(EchoAgent, path="/")
    async with running(app):
        status, headers, _ = await request(app, "POST", {}, INITIALIZE, path="/agents/echo", root_path="/agents/echo")
        assert status == 200
        assert (await request(app, "DELETE", {"acp-connection-id": headers["acp-connection-id"]},
                              path="/agents/echo/", root_path="/agents/echo"))[0] == 202


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        HttpOptions(max_connections=0)
    with pytest.raises(ValueError, match="path"):
        HttpOptions(path="acp")


def test_stdio_agents_never_import_the_http_stack() -> None:
    code = textwrap.dedent("""
        import sys
        import acp_agent, acp_agent.stdio
        heavy = {"uvicorn", "starlette", "websockets", "httpx", "h11", "httptools", "wsproto"}
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy or m.startswith("acp_agent.http")
                        or m == "acp_agent.cli")
        print(loaded)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_load_agent_finds_the_one_agent(tmp_path: Path) -> None:
    one_class = tmp_path / "one_class.py"
    one_class.write_text("from acp_agent import Agent\nclass A(Agent):\n    pass\n")
    source, _ = load_agent(str(one_class))
    assert isinstance(source, type) and source.__name__ == "A"

    with_instance = tmp_path / "with_instance.py"
    with_instance.write_text("from acp_agent import Agent\nclass A(Agent):\n    pass\nagent = A()\n")
    source, description = load_agent(str(with_instance))
    assert not isinstance(source, type) and "agent" in description

    two = tmp_path / "two.py"
    two.write_text("from acp_agent import Agent\nclass A(Agent):\n    pass\nclass B(Agent):\n    pass\n")
    with pytest.raises(LoadError, match=r"several agents \(A, B\)"):
        load_agent(str(two))
    source, _ = load_agent(f"{two}:B")
    assert isinstance(source, type) and source.__name__ == "B"
    with pytest.raises(LoadError, match="no attribute"):
        load_agent(f"{two}:C")
    with pytest.raises(LoadError, match="no such file"):
        load_agent(str(tmp_path / "missing.py"))
    source, _ = load_agent(str(ROOT / "examples" / "echo_agent.py"))
    assert isinstance(source, type) and source.__name__ == "EchoAgent"


def test_the_session_column_is_the_methods_whose_params_require_a_session_id() -> None:
    # One column says which methods name a session; HTTP requires Acp-Session-Id on them, the runtime checks the
    # principal first on the "stored" ones. It must agree with the params models.
    from acp_agent.schema.methods import AGENT_METHODS
    from acp_agent.schema.session_reach import SESSION_METHODS, STORED_SESSION_METHODS

    requiring = {name for name, spec in AGENT_METHODS.items()
                 if (field := spec.params.model_fields.get("session_id")) is not None and field.is_required()}
    assert SESSION_METHODS == requiring == {name for name, spec in AGENT_METHODS.items() if spec.session}
    assert {name for name, spec in AGENT_METHODS.items() if spec.session == "stored"} == STORED_SESSION_METHODS
