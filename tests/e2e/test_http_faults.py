"""Faults against ``python -m acp_agent serve``: wrong headers, malformed frames, oversize bodies, security checks,
limits, a client that vanishes mid-turn, DELETE during a turn and idle expiry.

Each case checks the precise HTTP status or JSON-RPC error, that the server keeps serving other clients, and,
where the dropped connection ran a terminal, that its process is gone.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.helpers.remote import ROOT, ServedAgent, alive, served_agent, wait_until

ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
BACKGROUND_AGENT = ROOT / "examples" / "background_agent.py"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": 2, "info": {"name": "fault-test", "version": "0"}, "capabilities": {}}}
JSON = {"content-type": "application/json"}
EVENTS = {"accept": "text/event-stream"}

Message = dict[str, Any]


def initialize(client: httpx.Client, url: str, **headers: str) -> str:
    response = client.post(url, json=INITIALIZE, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == 2
    return response.headers["acp-connection-id"]


class EventStream:
    """Reads one SSE stream (a raw socket, so closing it really drops the TCP connection) in a thread."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.messages: queue.Queue[Message] = queue.Queue()
        parsed = httpx.URL(url)
        self._sock = socket.create_connection((parsed.host, parsed.port or 80), timeout=10)
        lines = [f"GET {parsed.raw_path.decode()} HTTP/1.1", f"Host: {parsed.host}:{parsed.port}",
                 "Accept: text/event-stream", *(f"{name}: {value}" for name, value in headers.items())]
        self._sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self._sock.settimeout(None)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._sock.recv(4096)
            assert chunk, "the server closed the event stream"
            head += chunk
        status_line, _, rest = head.partition(b"\r\n")
        assert status_line.split()[1] == b"200", head
        self._rest = rest.partition(b"\r\n\r\n")[2]
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer = self._rest
        while True:
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                if line.startswith(b"data: "):
                    self.messages.put(json.loads(line[6:]))
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk

    def next(self, match: Callable[[Message], bool], timeout: float = 10) -> Message:
        while True:
            message = self.messages.get(timeout=timeout)
            if match(message):
                return message

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def open_session(client: httpx.Client, url: str, cid: str, events: EventStream) -> str:
    response = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}},
                           headers={"acp-connection-id": cid})
    assert response.status_code == 202
    answer = events.next(lambda m: m.get("id") == 1)
    return str(answer["result"]["sessionId"])


def prompt(client: httpx.Client, url: str, cid: str, sid: str, text: str, request_id: int = 2) -> httpx.Response:
    return client.post(url, json={"jsonrpc": "2.0", "id": request_id, "method": "session/prompt",
                                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}},
                       headers={"acp-connection-id": cid, "acp-session-id": sid})


@pytest.fixture(scope="module")
def echo() -> Iterator[ServedAgent]:
    with served_agent(ECHO_AGENT, "--max-body-bytes", "4096", "--max-connections", "4") as served:
        yield served


def test_wrong_and_missing_headers_get_the_reference_statuses(echo: ServedAgent) -> None:
    url = echo.url
    with httpx.Client(timeout=10) as client:
        cid = initialize(client, url)
        headers = {"acp-connection-id": cid}
        ping = {"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}}
        # Content negotiation (415, 406) and methods (405), other paths (404).
        text_body = {"content-type": "text/plain", **headers}
        assert client.post(url, content=json.dumps(ping), headers=text_body).status_code == 415
        assert client.get(url, headers=headers).status_code == 406
        assert client.put(url, json=ping, headers=headers).status_code == 405
        assert client.post(url.replace("/acp", "/other"), json=ping, headers=headers).status_code == 404
        # Connection ids: missing 400, unknown 404 (POST, GET, DELETE).
        assert client.post(url, json=ping).status_code == 400
        assert client.get(url, headers=EVENTS).status_code == 400
        assert client.delete(url).status_code == 400
        unknown = {"acp-connection-id": "no-such-connection"}
        assert client.post(url, json=ping, headers=unknown).status_code == 404
        assert client.get(url, headers={**EVENTS, **unknown}).status_code == 404
        assert client.delete(url, headers=unknown).status_code == 404
        # Bodies that are not one JSON-RPC object.
        bad = client.post(url, content=b"{not json", headers={**JSON, **headers})
        assert (bad.status_code, bad.text) == (400, "Invalid JSON")
        batch = client.post(url, json=[ping, ping], headers=headers)
        assert batch.status_code == 400
        assert batch.json()["id"] is None and batch.json()["error"]["code"] == -32600
        assert client.post(url, json=42, headers=headers).status_code == 400
        # initialize on an existing connection; session methods without / with a mismatched Acp-Session-Id.
        assert client.post(url, json=INITIALIZE, headers=headers).status_code == 400
        no_id = {**INITIALIZE, "id": None}
        assert client.post(url, json=no_id).status_code == 400
        prompt_body = {"jsonrpc": "2.0", "id": 6, "method": "session/prompt",
                       "params": {"sessionId": "sess_x", "prompt": []}}
        missing = client.post(url, json=prompt_body, headers=headers)
        assert (missing.status_code, missing.text) == (400, "Missing Acp-Session-Id")
        mismatched = client.post(url, json=prompt_body, headers={**headers, "acp-session-id": "sess_y"})
        assert (mismatched.status_code, mismatched.text) == (400, "Mismatched Acp-Session-Id")
        long_id = client.post(url, json={**ping, "id": "x" * 2000}, headers=headers)
        assert long_id.status_code == 400
        # Oversize body (the server runs with --max-body-bytes 4096).
        big = {**ping, "params": {"pad": "x" * 5000}}
        assert client.post(url, json=big, headers=headers).status_code == 413
        # One reader per stream: a second GET of the same stream is 409.
        events = EventStream(url, headers)
        try:
            assert client.get(url, headers={**EVENTS, **headers}).status_code == 409
            # The connection still works: a request is answered on the stream.
            assert client.post(url, json=ping, headers=headers).status_code == 202
            assert events.next(lambda m: m.get("id") == 5)["result"] == {"sessions": []}
        finally:
            events.close()
        assert client.delete(url, headers=headers).status_code == 202
        assert client.post(url, json=ping, headers=headers).status_code == 404
        assert client.delete(url, headers=headers).status_code == 404
        # The server keeps serving.
        assert client.delete(url, headers={"acp-connection-id": initialize(client, url)}).status_code == 202


def test_malformed_websocket_frames(echo: ServedAgent) -> None:
    with connect(echo.ws_url) as ws:
        assert ws.response is not None and ws.response.headers.get("acp-connection-id")
        ws.send("{not json")
        assert json.loads(ws.recv(10)) == {"jsonrpc": "2.0", "id": None,
                                          "error": {"code": -32700, "message": "Parse error"}}
        ws.send("[1, 2]")
        assert json.loads(ws.recv(10))["error"]["code"] == -32600
        ws.send("3")
        assert json.loads(ws.recv(10))["error"]["code"] == -32600
        ws.send(b"\x00binary frames are ignored")
        ws.send(json.dumps(INITIALIZE))
        assert json.loads(ws.recv(10))["result"]["protocolVersion"] == 2
        ws.send(json.dumps(INITIALIZE | {"id": 1}))
        assert json.loads(ws.recv(10))["error"]["code"] == -32600
        ws.send("x" * 5000)  # over --max-body-bytes: the socket is closed 1009
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    with connect(echo.ws_url) as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1002
    with httpx.Client(timeout=10) as client:
        client.delete(echo.url, headers={"acp-connection-id": initialize(client, echo.url)})


def test_websocket_burst_is_read_in_full_and_answered(echo: ServedAgent) -> None:
    # Many messages in a few TCP reads: the server queues them, stops reading the socket past its queue depth and
    # resumes as the connection takes them; none is lost. The answers leave in batches, each a well-formed frame.
    with connect(echo.ws_url) as ws:
        _ws_call(ws, INITIALIZE)
        burst = 200
        for n in range(1, burst + 1):
            ws.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "_fault_test/unknown", "params": {"n": n}}))
        answers = [json.loads(ws.recv(10)) for _ in range(burst)]
        assert sorted(answer["id"] for answer in answers) == list(range(1, burst + 1))
        assert {answer["error"]["code"] for answer in answers} == {-32601}


def test_connection_limit(echo: ServedAgent) -> None:
    with httpx.Client(timeout=10) as client:
        ids = [initialize(client, echo.url) for _ in range(4)]
        assert client.post(echo.url, json=INITIALIZE).status_code == 503
        with pytest.raises(InvalidStatus) as refused:
            connect(echo.ws_url).close()
        assert refused.value.response.status_code == 503
        client.delete(echo.url, headers={"acp-connection-id": ids.pop()})
        ids.append(initialize(client, echo.url))
        for cid in ids:
            assert client.delete(echo.url, headers={"acp-connection-id": cid}).status_code == 202


def test_token_origin_and_host_checks() -> None:
    with served_agent(ECHO_AGENT, "--allow-origin", "https://ide.example", env={"ACP_AGENT_TOKEN": "s3cret"}) as served:
        url = served.url
        good = {"authorization": "Bearer s3cret"}
        with httpx.Client(timeout=10) as client:
            missing = client.post(url, json=INITIALIZE)
            wrong = client.post(url, json=INITIALIZE, headers={"authorization": "Bearer nope"})
            assert missing.status_code == wrong.status_code == 401
            assert missing.text == wrong.text == "Unauthorized"  # nothing says which part failed
            assert missing.headers["www-authenticate"] == "Bearer"
            cid = initialize(client, url, **good)
            # Every request needs the token, not just initialize.
            assert client.delete(url, headers={"acp-connection-id": cid}).status_code == 401
            # Browser origins: only the configured one.
            evil = {**good, "origin": "https://evil.example"}
            assert client.post(url, json=INITIALIZE, headers=evil).status_code == 403
            initialize(client, url, **good, origin="https://ide.example")
            # Loopback server: a foreign Host (DNS rebinding) is refused.
            assert client.post(url, json=INITIALIZE, headers={**good, "host": "evil.example"}).status_code == 403
            assert client.delete(url, headers={**good, "acp-connection-id": cid}).status_code == 202
        with pytest.raises(InvalidStatus) as refused:
            connect(served.ws_url).close()
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused:
            connect(served.ws_url, additional_headers=good, origin="https://evil.example").close()  # type: ignore[arg-type]
        assert refused.value.response.status_code == 403
        with connect(served.ws_url, additional_headers=good) as ws:
            ws.send(json.dumps(INITIALIZE))
            assert json.loads(ws.recv(10))["result"]["protocolVersion"] == 2


@pytest.fixture(scope="module")
def background() -> Iterator[ServedAgent]:
    with served_agent(BACKGROUND_AGENT, "--idle-timeout", "1", "--turn-grace", "2") as served:
        yield served


def _start_sleep(client: httpx.Client, served: ServedAgent) -> tuple[str, str, EventStream, set[int]]:
    cid = initialize(client, served.url)
    events = EventStream(served.url, {"acp-connection-id": cid})
    sid = open_session(client, served.url, cid, events)
    before = served.children()
    assert prompt(client, served.url, cid, sid, "/bg sleep 30").status_code == 202
    wait_until(lambda: served.children() - before, 10, "the terminal process")
    return cid, sid, events, served.children() - before


def test_delete_during_a_turn_stops_the_connections_processes(background: ServedAgent) -> None:
    with httpx.Client(timeout=10) as client:
        cid, sid, events, started = _start_sleep(client, background)
        assert prompt(client, background.url, cid, sid, "/watch 30", 3).status_code == 202
        assert client.delete(background.url, headers={"acp-connection-id": cid}).status_code == 202
        wait_until(lambda: not any(alive(pid) for pid in started), 10, "the terminal to be stopped")
        assert prompt(client, background.url, cid, sid, "hello", 4).status_code == 404
        events.close()
        # Others are served.
        other = initialize(client, background.url)
        assert client.delete(background.url, headers={"acp-connection-id": other}).status_code == 202


def test_http_client_that_vanishes_is_expired_and_its_processes_stopped(background: ServedAgent) -> None:
    with httpx.Client(timeout=10) as client:
        cid, _sid, events, started = _start_sleep(client, background)
        events.close()  # the client stops reading and never comes back (no DELETE)
        wait_until(lambda: not any(alive(pid) for pid in started), 15, "the idle connection's terminal to be stopped")
        assert client.get(background.url, headers={**EVENTS, "acp-connection-id": cid}).status_code == 404


def _ws_call(ws: ClientConnection, message: Message) -> Message:
    ws.send(json.dumps(message))
    while True:
        answer = json.loads(ws.recv(10))
        if answer.get("id") == message["id"] and "method" not in answer:
            return answer


def test_websocket_client_reset_mid_turn_stops_its_processes_after_the_grace_period(background: ServedAgent) -> None:
    """The turn outlives its socket for ``--turn-grace`` seconds (for the client to reattach), then is stopped."""
    before = background.children()
    with connect(background.ws_url) as ws:
        _ws_call(ws, INITIALIZE)
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}
        sid = _ws_call(ws, new)["result"]["sessionId"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "/bg sleep 30"}]}}))
        wait_until(lambda: background.children() - before, 10, "the terminal process")
        started = background.children() - before
        # A TCP reset: no close frame, no FIN.
        raw: socket.socket = ws.socket
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.close()
    dropped = time.monotonic()
    time.sleep(1)
    assert all(alive(pid) for pid in started)  # still running, for the client to come back
    wait_until(lambda: not any(alive(pid) for pid in started), 10, "the dropped connection's terminal to be stopped")
    assert time.monotonic() - dropped >= 2
    with connect(background.ws_url) as other:
        assert _ws_call(other, INITIALIZE)["result"]["protocolVersion"] == 2


def test_cli_reports_a_missing_agent(tmp_path: Path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    result = subprocess.run([sys.executable, "-m", "acp_agent", "serve", str(empty), "--port", "0"],
                            cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "defines no Agent subclass or instance" in result.stderr
