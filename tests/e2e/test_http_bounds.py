"""What an unauthenticated or idle peer costs a real server (``python -m acp_agent serve`` on loopback): request
heads bounded before authentication, a head deadline, TCP sockets counted below the descriptor limit, idle
WebSockets closed, repeated failures logged once per episode (issue 27, section 2; acp_agent.http.guard)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import closing, contextmanager
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.helpers.remote import ROOT, ServedAgent, served_agent, wait_until

ECHO = ROOT / "examples" / "echo_agent.py"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}}


def raw_socket(served: ServedAgent, timeout: float = 10.0) -> socket.socket:
    parts = urlsplit(served.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the socket's timeout bounds the wait)."""
    data = b""
    with closing(sock):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def head(*fields: bytes) -> bytes:
    return b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(fields)


def initialize_ok(served: ServedAgent, **headers: str) -> bool:
    answer = httpx.post(served.url, json=INIT, headers={"accept": "application/json, text/event-stream", **headers},
                        timeout=10)
    return answer.status_code == 200


@contextmanager
def echo(*args: str, open_files: int | None = None) -> Iterator[ServedAgent]:
    with served_agent(ECHO, "--store", "memory", *args, open_files=open_files) as served:
        yield served


def test_an_oversized_head_is_refused_431_before_authentication() -> None:
    with echo("--token", "secret") as served:
        sock = raw_socket(served)
        sock.sendall(head(b"X-Big: " + b"a" * 40_000 + b"\r\n"))
        assert status_of(read_all(sock)) == 431
        assert initialize_ok(served, authorization="Bearer secret")  # the server goes on serving


def test_a_head_with_too_many_fields_is_refused_431() -> None:
    with echo("--token", "secret") as served:
        sock = raw_socket(served)
        sock.sendall(head(b"X: y\r\n" * 5000, b"\r\n"))  # 30 KB: under the size limit, over the field count
        assert status_of(read_all(sock)) == 431


def test_a_slow_or_absent_head_is_closed_at_the_head_timeout() -> None:
    with echo("--head-timeout", "0.5") as served:
        slow = raw_socket(served)
        slow.sendall(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and then nothing
        bare = raw_socket(served)  # sends nothing at all
        assert read_all(slow) == b""
        assert read_all(bare) == b""
        assert initialize_ok(served)


def test_tcp_sockets_count_against_max_connections() -> None:
    with echo("--max-connections", "2", "--head-timeout", "60") as served:  # 4 sockets a connection: 8
        held = [raw_socket(served) for _ in range(8)]
        refused = raw_socket(served)
        answer = read_all(refused)
        assert status_of(answer) == 503 and answer.endswith(b"Too many connections")
        held.pop().close()
        wait_until(lambda: initialize_ok(served), 10, "a place for a real client")
        for sock in held:
            sock.close()
        assert served.log().count("acp: refusing a connection") == 1


def test_below_the_descriptor_limit_sockets_are_refused_not_failed() -> None:
    # With few file descriptors, 100 idle sockets used to make accept() fail (EMFILE) and log a traceback each time
    # while real clients timed out; the guard keeps sockets under the limit and answers 503.
    with echo("--head-timeout", "60", open_files=128) as served:
        held = [raw_socket(served) for _ in range(100)]
        for sock in held[-20:]:
            sock.settimeout(5)  # an admitted socket would time out here: the server waits for its head
        assert [status_of(read_all(sock)) for sock in held[-20:]] == [503] * 20  # 128 descriptors: 64 sockets
        for sock in held:
            sock.close()
        wait_until(lambda: initialize_ok(served), 10, "a real client to be served")
        assert "out of system resource" not in served.log()
        assert "Traceback" not in served.log()


def test_a_websocket_with_no_session_is_closed_when_idle() -> None:
    with echo("--idle-timeout", "1") as served, connect(served.ws_url, open_timeout=10) as idle, \
            connect(served.ws_url, open_timeout=10) as busy:
        busy.send(json.dumps(INIT))
        json.loads(busy.recv(10))
        busy.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}))
        session = json.loads(busy.recv(10))["result"]["sessionId"]
        with pytest.raises(ConnectionClosed) as closed:
            idle.recv(10)
        assert closed.value.rcvd is not None and closed.value.rcvd.reason == "Idle timeout"
        # A connection with a live session stays, idle or not.
        busy.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/close", "params": {"sessionId": session}}))
        assert json.loads(busy.recv(10))["id"] == 2


def test_stray_responses_are_logged_once_per_episode() -> None:
    with echo() as served, connect(served.ws_url, open_timeout=10) as ws:
        ws.send(json.dumps(INIT))
        json.loads(ws.recv(10))
        for i in range(2000):
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 100_000 + i, "result": {}}))
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}))
        assert "result" in json.loads(ws.recv(10))
        assert served.log().count("dropping a response for unknown request id") == 1


# -- issue 39, finding 4: bounds no header can switch off, and a body deadline --------------------------------------


def answer_on(sock: socket.socket, request: bytes) -> bytes:
    """Send ``request`` and read one answer whose body has a content-length (the socket stays open)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head_part, _, rest = data.partition(b"\r\n\r\n")
    lines = head_part.lower().split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head_part


@pytest.mark.parametrize("opener", [
    b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\r\n",
    b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2\r\n{}\r\n0\r\n\r\n",
])
def test_no_request_head_switches_the_bounds_off_for_its_socket(opener: bytes) -> None:
    with echo("--token", "secret", "--head-timeout", "1") as served:
        sock = raw_socket(served)
        assert status_of(answer_on(sock, opener)) in (401, 404)  # no token: refused, the socket kept alive
        sock.sendall(head(b"X: y\r\n" * 300, b"\r\n"))  # 300 fields: closed (was 401: the guard had stepped aside)
        assert read_all(sock) == b""  # an answer went out on this socket already: closed without a 431
        trickled = raw_socket(served, timeout=10)
        answer_on(trickled, opener)
        trickled.sendall(b"POST /acp HTTP/1.1\r\n")  # and then nothing: closed at the head timeout (was: never)
        assert read_all(trickled) == b""


def test_a_body_over_the_limit_is_refused_before_authentication() -> None:
    with echo("--token", "secret", "--max-body-bytes", "1000") as served:
        sock = raw_socket(served)
        sock.sendall(head(b"Content-Length: 100000000\r\n", b"\r\n", b"x"))
        assert status_of(read_all(sock)) == 413


def test_trickled_bodies_cannot_lock_real_clients_out() -> None:
    # 8 sockets (--max-connections 2) each announcing a body and sending a byte now and then: they are closed at the
    # body deadline, and a real client gets in (before: 503 for as long as they ran).
    with echo("--max-connections", "2", "--body-timeout", "1", "--head-timeout", "60") as served:
        peers = [raw_socket(served) for _ in range(8)]
        for peer in peers:
            peer.sendall(head(b"Content-Type: application/json\r\n", b"Content-Length: 1000000\r\n", b"\r\n", b"{"))
        wait_until(lambda: initialize_ok(served), 10, "a real client to be served")
        assert all(read_all(peer) == b"" for peer in peers)
