"""HTTP/2, as the RFD asks of Streamable HTTP: the same ASGI app served by hypercorn, driven by httpx over one
HTTP/2 connection (the event stream and the POSTs multiplexed on it), cleartext (h2c, prior knowledge) and over
TLS (ALPN ``h2``, a throwaway self-signed certificate made with ``openssl``). WebSocket works on the same server.
Every agent message is schema-checked.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.sync.client import connect

from acp_agent.testing import SchemaValidator
from tests.helpers.remote import ROOT

pytestmark = pytest.mark.anyio

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 2, "info": {"name": "h2-test", "version": "0"}, "capabilities": {}}}


@contextmanager
def hypercorn(*args: str) -> Iterator[int]:
    """hypercorn serving ``tests/helpers/h2_app.py`` on a loopback socket it inherits; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hypercorn", "--bind", f"fd://{sock.fileno()}", *args, "tests.helpers.h2_app:app"],
        cwd=ROOT, pass_fds=[sock.fileno()], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    sock.close()
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        log = proc.stderr.read()
        assert "Traceback" not in log, log


async def exchange(url: str, validator: SchemaValidator, **client: Any) -> None:
    """initialize, the event stream, a session and an echoed prompt, all on one HTTP/2 connection.

    httpx's async client on anyio tasks: the event stream is read by one task while the POSTs go out from
    another (the sync client shares one HTTP/2 connection between threads badly: a reading thread could stall
    the others' requests until its read timed out)."""
    methods = {1: "session/new", 2: "session/prompt"}
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](1000)
    async with httpx.AsyncClient(http2=True, timeout=10, **client) as http:
        with anyio.fail_after(20):
            while not await _reachable(http, url):
                await anyio.sleep(0.05)
        answer = await http.post(url, json=INITIALIZE)
        assert (answer.status_code, answer.http_version) == (200, "HTTP/2")
        assert validator.check(answer.json(), "initialize") == []
        headers = {"acp-connection-id": answer.headers["acp-connection-id"]}
        deleted, finished = anyio.Event(), anyio.Event()

        async def read() -> None:
            try:
                async with http.stream("GET", url, headers={**headers, "accept": "text/event-stream"},
                                       timeout=httpx.Timeout(10, read=None)) as stream:
                    assert stream.http_version == "HTTP/2"
                    async for line in stream.aiter_lines():
                        if line.startswith("data: "):
                            await send.send(json.loads(line[6:]))
            except httpx.TransportError:
                if not deleted.is_set():  # the stream may end either way once the connection is deleted
                    raise
            finally:
                finished.set()

        async def next_message() -> dict[str, Any]:
            with anyio.fail_after(10):
                message = await receive.receive()
            answered = methods.get(message["id"]) if "method" not in message else None
            assert validator.check(message, answered) == [], message
            return message

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            posted = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                                "params": {"cwd": "/tmp"}}, headers=headers)
            assert (posted.status_code, posted.http_version) == (202, "HTTP/2")
            while "result" not in (message := await next_message()):
                pass
            sid = message["result"]["sessionId"]
            prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                      "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hello over h2"}]}}
            assert (await http.post(url, json=prompt, headers={**headers, "acp-session-id": sid})).status_code == 202
            said = []
            while (update := (await next_message()).get("params", {}).get("update", {})).get("state") != "idle":
                if update.get("sessionUpdate") == "agent_message_chunk":
                    said.append(update["content"]["text"])
            assert "".join(said) == "hello over h2"
            deleted.set()
            assert (await http.delete(url, headers=headers)).status_code == 202
            with anyio.fail_after(10):  # DELETE ends the event stream, so the reading task ends
                await finished.wait()


async def _reachable(http: httpx.AsyncClient, url: str) -> bool:
    try:
        await http.get(url)
    except httpx.TransportError:
        return False
    return True


async def test_h2c_with_prior_knowledge(validator: SchemaValidator) -> None:
    with hypercorn() as port:
        await exchange(f"http://127.0.0.1:{port}/acp", validator, http1=False)
        with connect(f"ws://127.0.0.1:{port}/acp") as ws:  # WebSocket (HTTP/1.1 upgrade) on the same server
            ws.send(json.dumps(INITIALIZE))
            assert json.loads(ws.recv(10))["result"]["protocolVersion"] == 2


async def test_h2_over_tls(validator: SchemaValidator, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed (needed to make a throwaway certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    with hypercorn("--certfile", str(cert), "--keyfile", str(key)) as port:
        await exchange(f"https://127.0.0.1:{port}/acp", validator, verify=ssl.create_default_context(cafile=str(cert)))
