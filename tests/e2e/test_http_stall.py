"""Stalled clients against a real ``python -m acp_agent serve``: a client stops reading its SSE stream or its
WebSocket while the agent streams 200 MiB at it.

The per-connection output limit applies (``--max-buffered-bytes 1 MiB``, ``--max-output-stall 3``): the agent's
writes wait while the client is behind, then the connection is closed and its work cancelled; the server's
memory stays bounded (its RSS grows by far less than the flood); other clients are served all along.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.e2e.test_http_faults import EVENTS, INITIALIZE, initialize
from tests.helpers.remote import ROOT, ServedAgent, served_agent, wait_until

FLOOD_AGENT = ROOT / "tests" / "helpers" / "flood_agent.py"
FLOOD_MIB = 200
RSS_GROWTH_LIMIT = 60 * 1024 * 1024  # far below the 200 MiB flood

Message = dict[str, Any]


def rss(pid: int) -> int:
    """Resident memory of ``pid`` in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """Samples a process's RSS in a thread; ``peak`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, rss(self.pid))
            except OSError:
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


@pytest.fixture(scope="module")
def flood() -> Iterator[ServedAgent]:
    with served_agent(FLOOD_AGENT, "--store", "memory", "--max-buffered-bytes", str(1024 * 1024),
                      "--max-output-stall", "3") as served:
        yield served


def small_socket(host: str, port: int) -> socket.socket:
    """A TCP socket whose receive buffer is small, so the server's writes back up soon."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, port))
    return sock


class StalledEvents:
    """An SSE stream read only until ``read_until`` stops: then nothing more is read from it."""

    def __init__(self, url: str, cid: str) -> None:
        parsed = httpx.URL(url)
        self.sock = small_socket(parsed.host, parsed.port or 80)
        self.sock.settimeout(10)
        self.sock.sendall((f"GET {parsed.raw_path.decode()} HTTP/1.1\r\nHost: {parsed.host}:{parsed.port}\r\n"
                           f"Accept: text/event-stream\r\nAcp-Connection-Id: {cid}\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        assert head.split()[1] == b"200", head

    def read_until(self, request_id: int) -> Message:
        while True:
            for line in self.buffer.split(b"\n"):
                if line.startswith(b"data: ") and b'"id":%d' % request_id in line:
                    message: Message = json.loads(line[6:])
                    if "method" not in message:
                        self.buffer = b""
                        return message
            self.buffer += self.sock.recv(4096)

    def close(self) -> None:
        self.sock.close()


def echo_round_trip(served: ServedAgent, text: str) -> None:
    """Another client, over WebSocket: a session and an echoed prompt, within a few seconds."""
    with connect(served.ws_url, open_timeout=10) as ws:
        _call(ws, INITIALIZE)
        sid = _call(ws, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}})
        sid = sid["result"]["sessionId"]
        answer = _call(ws, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})
        assert "result" in answer, answer


def _call(ws: ClientConnection, message: Message) -> Message:
    ws.send(json.dumps(message))
    deadline = time.monotonic() + 10
    while True:
        answer: Message = json.loads(ws.recv(max(0.1, deadline - time.monotonic())))
        if answer.get("id") == message["id"] and "method" not in answer:
            return answer


# A terminal's output (replay keeps its tail only) and an agent message (kept whole in the history: a producer
# that went on writing once its connection was closed for stalling would grow the history by the whole flood).
KINDS = ["flood", "message"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_that_stops_reading_its_event_stream(flood: ServedAgent, kind: str) -> None:
    echo_round_trip(flood, "warm up")
    peak = PeakRss(flood.proc.pid)
    baseline = rss(flood.proc.pid)
    with httpx.Client(timeout=10) as client:
        cid = initialize(client, flood.url)
        events = StalledEvents(flood.url, cid)
        headers = {"acp-connection-id": cid}
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}
        assert client.post(flood.url, json=new, headers=headers).status_code == 202
        sid = events.read_until(1)["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"{kind} {FLOOD_MIB}"}]}}
        assert client.post(flood.url, json=prompt, headers={**headers, "acp-session-id": sid}).status_code == 202
        # The client reads nothing more. Others are served meanwhile.
        for i in range(3):
            echo_round_trip(flood, f"while the stream is stalled {i}")
        # The stalled connection is closed by the output-stall policy.
        wait_until(lambda: client.get(flood.url, headers={**EVENTS, **headers}).status_code == 404, 20,
                   "the stalled connection to be closed")
        events.close()
    growth = peak.stop() - baseline
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / 2**20:.1f} MiB"
    assert "output stalled for max_output_stall (3 s)" in flood.log()
    assert "did not finish closing" not in flood.log()  # the flood was cancelled at once
    echo_round_trip(flood, "after")


@pytest.mark.parametrize("kind", KINDS)
def test_a_client_that_stops_reading_its_websocket(flood: ServedAgent, kind: str) -> None:
    echo_round_trip(flood, "warm up")
    peak = PeakRss(flood.proc.pid)
    baseline = rss(flood.proc.pid)
    parsed = httpx.URL(flood.url)
    before = flood.log().count("output stalled")
    # max_queue=1: the client library stops reading the socket once one frame waits unread.
    with connect(flood.ws_url, sock=small_socket(parsed.host, parsed.port or 80), max_queue=1) as ws:
        _call(ws, INITIALIZE)
        sid = _call(ws, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}})
        sid = sid["result"]["sessionId"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": f"{kind} {FLOOD_MIB}"}]}}))
        for i in range(3):
            echo_round_trip(flood, f"while the socket is stalled {i}")
        wait_until(lambda: flood.log().count("output stalled") > before, 20, "the stalled socket to be closed")
    growth = peak.stop() - baseline
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew {growth / 2**20:.1f} MiB"
    echo_round_trip(flood, "after")
