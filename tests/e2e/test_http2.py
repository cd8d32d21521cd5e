"""HTTP/2, as the RFD asks of Streamable HTTP: the same ASGI app served by hypercorn, driven by httpx over one
HTTP/2 connection (the event stream and the POSTs multiplexed on it), cleartext (h2c, prior knowledge) and over
TLS (ALPN ``h2``, a throwaway self-signed certificate made with ``openssl``). WebSocket works on the same server.
Every agent message is schema-checked.
"""

from __future__ import annotations

import json
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from acp_agent.testing import SchemaValidator
from tests.helpers.remote import ROOT, wait_until

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


def exchange(url: str, validator: SchemaValidator, **client: Any) -> None:
    """initialize, the event stream, a session and an echoed prompt, all on one HTTP/2 connection."""
    methods = {1: "session/new", 2: "session/prompt"}
    messages: queue.Queue[dict[str, Any]] = queue.Queue()
    with httpx.Client(http2=True, timeout=10, **client) as http:
        wait_until(lambda: _reachable(http, url), 20, "hypercorn to listen")
        answer = http.post(url, json=INITIALIZE)
        assert (answer.status_code, answer.http_version) == (200, "HTTP/2")
        assert validator.check(answer.json(), "initialize") == []
        headers = {"acp-connection-id": answer.headers["acp-connection-id"]}

        deleted = threading.Event()

        def read() -> None:
            try:
                with http.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as stream:
                    assert stream.http_version == "HTTP/2"
                    for line in stream.iter_lines():
                        if line.startswith("data: "):
                            messages.put(json.loads(line[6:]))
            except httpx.TransportError:
                if not deleted.is_set():  # the stream may end either way once the connection is deleted
                    raise

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        posted = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}},
                           headers=headers)
        assert (posted.status_code, posted.http_version) == (202, "HTTP/2")

        def next_message() -> dict[str, Any]:
            message = messages.get(timeout=10)
            answered = methods.get(message["id"]) if "method" not in message else None
            assert validator.check(message, answered) == [], message
            return message

        while "result" not in (message := next_message()):
            pass
        sid = message["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hello over h2"}]}}
        assert http.post(url, json=prompt, headers={**headers, "acp-session-id": sid}).status_code == 202
        said = []
        while (update := next_message().get("params", {}).get("update", {})).get("state") != "idle":
            if update.get("sessionUpdate") == "agent_message_chunk":
                said.append(update["content"]["text"])
        assert "".join(said) == "hello over h2"
        deleted.set()
        assert http.delete(url, headers=headers).status_code == 202
        reader.join(10)  # DELETE ends the event stream
        assert not reader.is_alive()


def _reachable(http: httpx.Client, url: str) -> bool:
    try:
        http.get(url)
    except httpx.TransportError:
        return False
    return True


def test_h2c_with_prior_knowledge(validator: SchemaValidator) -> None:
    with hypercorn() as port:
        exchange(f"http://127.0.0.1:{port}/acp", validator, http1=False)
        with connect(f"ws://127.0.0.1:{port}/acp") as ws:  # WebSocket (HTTP/1.1 upgrade) on the same server
            ws.send(json.dumps(INITIALIZE))
            assert json.loads(ws.recv(10))["result"]["protocolVersion"] == 2


def test_h2_over_tls(validator: SchemaValidator, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed (needed to make a throwaway certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    with hypercorn("--certfile", str(cert), "--keyfile", str(key)) as port:
        exchange(f"https://127.0.0.1:{port}/acp", validator, verify=ssl.create_default_context(cafile=str(cert)))
