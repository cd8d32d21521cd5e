"""End-to-end: agent processes over real pipes, every message checked against the official schema."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from acp_agent.testing.client import Client, spawn_agent
from acp_agent.testing.schema import SchemaValidator

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "examples" / "echo_agent.py"
SCRIPTED = ROOT / "tests" / "helpers" / "scripted_agent.py"


@asynccontextmanager
async def agent_process(script: Path, validator: SchemaValidator, backend: str, **options: Any
                        ) -> AsyncIterator[Client]:
    async with spawn_agent([sys.executable, str(script)], env={"ACP_AGENT_BACKEND": backend},
                           **options) as client:
        yield client
    problems = validator.check_transcript(client.transcript)
    assert not problems, "\n".join(problems)
    assert client.returncode == 0


async def test_echo_agent(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(ECHO, validator, anyio_backend) as client:
        init = await client.initialize()
        assert init["info"]["name"] == "echo-agent"
        sid = await client.new_session(str(ROOT))
        view = await client.prompt_and_wait(sid, "hello over real pipes")
        assert list(view.messages().values()) == ["hello over real pipes"]
        chunks = [u for u in view.updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert len(chunks) == 4 and len({c["messageId"] for c in chunks}) == 1
        await client.request("session/list", {})
        await client.request("session/resume", {"sessionId": sid, "cwd": str(ROOT), "replayFrom": {"type": "start"}})
        await client.close_session(sid)


async def test_scripted_agent_full_tour(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(SCRIPTED, validator, anyio_backend, permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        await client.prompt_and_wait(sid, "print")  # a stray print() in a hook
        await client.prompt_and_wait(sid, "crash")
        await client.prompt_and_wait(sid, "thinkplan")
        view = await client.prompt_and_wait(sid, "extras")
        kinds = [u["sessionUpdate"] for u in view.updates[-12:]]
        for kind in ("plan_update", "usage_update", "notice", "session_info_update", "available_commands_update",
                     "config_option_update", "tool_call_update", "tool_call_content_chunk"):
            assert kind in kinds
        await client.prompt(sid, "ask")
        await client.wait_for(lambda: bool(client.pending_permissions))
        client.answer_permission(0, "allow")
        await client.wait_idle(sid, 5)
        await client.prompt(sid, "sleep 30")
        client.cancel(sid)
        await client.wait_idle(sid, 6)
        await client.request("session/set_config_option",
                             {"sessionId": sid, "configId": "model", "type": "id", "value": "smart"})
        await client.request("session/resume", {"sessionId": sid, "cwd": str(ROOT), "replayFrom": {"type": "start"}})
        await client.close_session(sid)
        stops = [u.get("stopReason") for u in client.view(sid).updates if u.get("state") == "idle"]
        assert stops[:6] == ["end_turn", "error", "end_turn", "end_turn", "end_turn", "cancelled"]


async def test_bad_input_over_pipes(validator: SchemaValidator, anyio_backend: str) -> None:  # R8-R14
    async with agent_process(SCRIPTED, validator, anyio_backend) as client:
        writer = client.connection.writer
        for line in (b"not json", b"[]", b"42", b'{"jsonrpc":"2.0","id":null,"method":"x"}',
                     b'{"jsonrpc":"2.0","id":1.5,"method":"x"}'):
            writer.send_nowait(line + b"\n")
        await client.wait_for(lambda: len(client.sent_by_agent()) >= 5)
        codes = [m["error"]["code"] for m in client.sent_by_agent()]
        assert codes == [-32700, -32600, -32600, -32600, -32600]
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        view = await client.prompt_and_wait(sid, "echo still serving")
        assert view.stop_reason == "end_turn"


async def test_eof_mid_turn_exits_cleanly(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(SCRIPTED, validator, anyio_backend) as client:
        await client.initialize()
        sid = await client.new_session(str(ROOT))
        await client.prompt(sid, "sleep 30")
    assert client.view(sid).stop_reason == "cancelled"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signal_mid_turn(signum: int, anyio_backend: str) -> None:
    process = await anyio.open_process([sys.executable, str(SCRIPTED)], env={**os.environ,
                                       "ACP_AGENT_BACKEND": anyio_backend})
    assert process.stdin and process.stdout
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2,
                                                                      "info": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(ROOT)}},
    ]
    buffer = b""

    async def read_until(pred: Any) -> list[Any]:
        nonlocal buffer
        got: list[Any] = []
        with anyio.fail_after(10):
            while True:
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    got.append(orjson.loads(line))
                    if pred(got[-1]):
                        return got
                buffer += await process.stdout.receive()  # type: ignore[union-attr]

    for i, line in enumerate(lines):
        await process.stdin.send(orjson.dumps(line) + b"\n")
        answer = (await read_until(lambda m, i=i: m.get("id") == i))[-1]
    sid = answer["result"]["sessionId"]
    prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
              "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "sleep 30"}]}}
    held = {**prompt, "id": 3}
    await process.stdin.send(orjson.dumps(prompt) + b"\n" + orjson.dumps(held) + b"\n")
    await read_until(lambda m: m.get("id") == 2)
    process.send_signal(signum)
    rest: list[Any] = []
    with anyio.fail_after(10):
        try:
            while True:
                buffer += await process.stdout.receive()
        except anyio.EndOfStream:
            pass
        rest = [orjson.loads(line) for line in buffer.splitlines() if line.strip()]
        assert await process.wait() == 0
    await process.aclose()
    held_answer = next(m for m in rest if m.get("id") == 3)
    assert held_answer["error"]["code"] == -32800
    idles = [m for m in rest if m.get("params", {}).get("update", {}).get("state") == "idle"]
    assert idles[-1]["params"]["update"]["stopReason"] == "cancelled"


def _requests(sid_holder: list[str] | None = None) -> bytes:
    msgs = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": 2, "info": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}},
    ]
    return b"".join(orjson.dumps(m) + b"\n" for m in msgs)


def _check_output(data: bytes) -> None:
    lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0]["id"] == 0
    assert lines[0]["result"]["protocolVersion"] == 2


def test_stdout_to_a_file(tmp_path: Path) -> None:  # R2, works when stdout is a file
    (tmp_path / "in").write_bytes(_requests())
    with open(tmp_path / "in", "rb") as stdin, open(tmp_path / "out", "wb") as stdout:
        proc = subprocess.run([sys.executable, str(SCRIPTED)], stdin=stdin, stdout=stdout,
                              stderr=subprocess.PIPE, timeout=30)
    assert proc.returncode == 0
    _check_output((tmp_path / "out").read_bytes())


def test_stdout_to_a_socket() -> None:
    parent, child = socket.socketpair()
    with parent, child:
        proc = subprocess.Popen([sys.executable, str(SCRIPTED)], stdin=child.fileno(), stdout=child.fileno(),
                                stderr=subprocess.DEVNULL)
        child.close()
        parent.sendall(_requests())
        parent.shutdown(socket.SHUT_WR)
        data = b""
        parent.settimeout(30)
        while chunk := parent.recv(65536):
            data += chunk
        assert proc.wait(timeout=30) == 0
    _check_output(data)
