"""Issue 40 over real ``python -m acp_agent serve`` replicas on one PostgreSQL database, behind a round-robin balancer
without affinity (`tests.helpers.balancer`): Streamable HTTP clients reach their prompts whichever replica each request
lands on (finding 4), event streams resume with ``Last-Event-ID`` and a dropped WebSocket's turn keeps running for
its client to reattach (finding 5), and the health, readiness and drain endpoints (finding 7). Every message the
agent sends is schema-checked."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from acp_agent.http.sessions import ACTIVE_ELSEWHERE, ACTIVE_ELSEWHERE_STATUS
from acp_agent.testing import SchemaValidator
from tests.e2e.test_http_faults import ECHO_AGENT, INITIALIZE, EventStream
from tests.helpers.balancer import free_port, round_robin
from tests.helpers.remote import ROOT, ServedAgent, served_agent

Message = dict[str, Any]


@contextmanager
def replicas(count: int, *args: str, agent: Path | None = None) -> Iterator[list[ServedAgent]]:
    """``count`` replicas of the echo agent (or ``agent``), each advertising its URL and listing the others as
    peers."""
    ports = [free_port() for _ in range(count)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    peers = [arg for url in urls for arg in ("--peer", url)]
    with ExitStack() as stack:
        yield [stack.enter_context(served_agent(agent or ECHO_AGENT, "--port", str(port), "--advertise-url", url,
                                                *peers, *args))
               for port, url in zip(ports, urls, strict=True)]


class BalancedClient:
    """One Streamable HTTP connection through the balancer, a new TCP connection for every request (so requests
    spread over the replicas); checks every agent message against the schema."""

    _ids = itertools.count(1)

    def __init__(self, url: str, validator: SchemaValidator) -> None:
        self.url = url
        self.http = httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))
        response = self.http.post(url, json=INITIALIZE)
        assert response.status_code == 200, response.text
        self.cid = response.headers["acp-connection-id"]
        self.events = EventStream(url, {"acp-connection-id": self.cid})
        self.validator = validator
        self.methods: dict[int, str] = {}
        self.timeout = 10.0

    def next(self) -> Message:
        message = self.events.messages.get(timeout=self.timeout)
        answered = self.methods.get(message["id"]) if "method" not in message else None
        assert self.validator.check(message, answered) == [], message
        return message

    def call(self, method: str, params: Message, session: str | None = None) -> Message:
        request_id = next(self._ids)
        self.methods[request_id] = method
        headers = {"acp-connection-id": self.cid, **({"acp-session-id": session} if session else {})}
        response = self.http.post(self.url, json={"jsonrpc": "2.0", "id": request_id, "method": method,
                                                  "params": params}, headers=headers)
        assert response.status_code == 202, (response.status_code, response.text)
        while True:
            message = self.next()
            if message.get("id") == request_id and "method" not in message:
                return message

    def prompt_and_wait(self, sid: str, text: str) -> None:
        answer = self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, sid)
        assert "result" in answer, answer
        while True:
            update = self.next().get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                return

    def close(self) -> None:
        self.http.delete(self.url, headers={"acp-connection-id": self.cid})
        self.events.close()
        self.http.close()


def reach_prompts(url: str, validator: SchemaValidator, clients: int) -> int:
    """How many of ``clients`` concurrent clients (through the balancer at ``url``) open a session and finish a
    prompt."""
    reached: list[bool] = []

    def one() -> None:
        try:
            client = BalancedClient(url, validator)
            try:
                sid = str(client.call("session/new", {"cwd": "/tmp"})["result"]["sessionId"])
                client.prompt_and_wait(sid, "hello through any replica")
                reached.append(True)
            finally:
                client.close()
        except (AssertionError, KeyError, httpx.HTTPError, OSError, queue.Empty):
            reached.append(False)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return sum(reached)


def test_http_clients_reach_their_prompts_through_a_balancer_without_affinity(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    """Finding 4: ``initialize`` on one replica, the event stream and the prompt on others: forwarded."""
    with replicas(3, "--store", f"postgres:{postgres_dsn}") as served:
        backends = [("127.0.0.1", int(s.url.rsplit(":", 1)[1].split("/")[0])) for s in served]
        with round_robin(backends) as balancer:
            assert reach_prompts(balancer.url(), validator, 12) == 12
            assert min(balancer.routed) > 0, balancer.routed


def test_a_database_outage_is_retryable_logged_once_and_not_ready(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    """Finding 7: while the database cannot be reached, a new session is refused "retry" (not a bare -32603), the
    outage is logged a few times rather than once per request, ``/readyz`` says 503 and ``/healthz`` 200; once it is
    back, sessions open again."""
    database = dict(part.split("=", 1) for part in postgres_dsn.split())
    with round_robin([(database["host"], int(database["port"]))]) as link:
        dsn = " ".join(f"{key}={link.port if key == 'port' else value}" for key, value in database.items())
        with served_agent(ECHO_AGENT, "--store", f"postgres:{dsn}") as served, httpx.Client(timeout=20) as http:
            base = served.url.rsplit("/", 1)[0]
            client = ReplicaClient(served.url, validator)
            client.call("session/new", {"cwd": "/tmp"})
            assert http.get(base + "/readyz").status_code == 200
            before = len(served.log().splitlines())
            link.cut()
            refusals, others = [], []
            for _ in range(10):  # new clients: each opens a connection and asks for a session
                others.append(other := ReplicaClient(served.url, validator))
                refusals.append(other.call("session/new", {"cwd": "/tmp"}))
                refusals.append(other.call("session/list", {}))
            errors = [answer["error"] for answer in refusals if "error" in answer]
            assert errors, refusals  # a session may still open in memory; what is refused says "retry"
            for error in errors:
                assert error == {"code": -32603, "message": "Session store unavailable, retry",
                                 "data": {"retryable": True, "retryAfter": 1.0}}, error
            assert http.get(base + "/readyz").status_code == 503
            assert http.get(base + "/healthz").status_code == 200
            logged = [line for line in served.log().splitlines()[before:] if line[:4].isdigit()]  # records
            assert len(logged) <= 8, "\n".join(logged)
            print(f"outage: {len(refusals)} requests, {len(logged)} log lines")
            link.restore()
            for other in others:
                other.close()
            deadline = time.monotonic() + 15
            while "result" not in client.call("session/new", {"cwd": "/tmp"}):
                assert time.monotonic() < deadline, "sessions did not open again after the outage"
                time.sleep(0.2)
            assert http.get(base + "/readyz").status_code == 200
            client.close()


class ReplicaClient(BalancedClient):
    """A `BalancedClient` straight to one replica."""


class NumberedStream:
    """An SSE stream read on a raw socket in a thread, keeping each event's ``id`` (its cursor)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.events: queue.Queue[tuple[int, Message]] = queue.Queue()
        parsed = httpx.URL(url)
        self.sock = socket.create_connection((parsed.host, parsed.port or 80), timeout=10)
        lines = [f"GET {parsed.raw_path.decode()} HTTP/1.1", f"Host: {parsed.host}:{parsed.port}",
                 "Accept: text/event-stream", *(f"{name}: {value}" for name, value in headers.items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            assert chunk, "the server closed the event stream"
            head += chunk
        self.status = int(head.split()[1])
        self.sock.settimeout(None)
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer, number = b"", None
        while True:
            try:
                chunk = self.sock.recv(1)  # one byte at a time: nothing is read ahead of what the test takes
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            if not buffer.endswith(b"\n"):
                continue
            line, buffer = buffer.strip(), b""
            if line.startswith(b"id: "):
                number = int(line[4:])
            elif line.startswith(b"data: "):
                assert number is not None, "an event without an id"
                self.events.put((number, json.loads(line[6:])))

    def reset(self) -> None:
        """The client vanishes: its TCP connection is reset, whatever the kernel still holds unread is lost."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def test_an_event_stream_resumes_with_last_event_id_through_another_replica(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    """Finding 5 (Streamable HTTP): a client whose event stream died mid-turn reconnects (through whichever replica
    the balancer picks) with ``Last-Event-ID`` and gets every message it missed, once, in order."""
    words = [f"w{i}" for i in range(200)]
    with replicas(2, "--store", f"postgres:{postgres_dsn}") as served:
        backends = [("127.0.0.1", int(s.url.rsplit(":", 1)[1].split("/")[0])) for s in served]
        with round_robin(backends) as balancer:
            client = BalancedClient(balancer.url(), validator)
            client.events.close()  # the server may not have noticed yet: a cursor takes the stream over
            stream = NumberedStream(balancer.url(), {"acp-connection-id": client.cid, "last-event-id": "0"})
            assert stream.status == 200
            request = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}
            assert client.http.post(client.url, json=request, headers={"acp-connection-id": client.cid}
                                    ).status_code == 202
            cursor, answer = stream.events.get(timeout=10)
            sid = answer["result"]["sessionId"]
            prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                      "params": {"sessionId": sid, "prompt": [{"type": "text", "text": " ".join(words)}]}}
            assert client.http.post(client.url, json=prompt, headers={"acp-connection-id": client.cid,
                                                                      "acp-session-id": sid}).status_code == 202
            got: list[Message] = []
            for _ in range(5):
                cursor, message = stream.events.get(timeout=10)
                got.append(message)
            time.sleep(0.5)  # the rest of the turn went out on the dead stream
            stream.reset()
            resumed = NumberedStream(balancer.url(), {"acp-connection-id": client.cid, "last-event-id": str(cursor)})
            assert resumed.status == 200
            while True:
                number, message = resumed.events.get(timeout=10)
                assert number == cursor + 1, (number, cursor)
                cursor = number
                assert validator.check(message, "session/prompt" if message.get("id") == 2 else None) == [], message
                got.append(message)
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                    break
            text = "".join(m["params"]["update"]["content"]["text"] for m in got
                           if m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk")
            assert text == " ".join(words)
            too_old = NumberedStream(balancer.url(), {"acp-connection-id": client.cid, "last-event-id": "0"})
            assert too_old.status == 200  # everything is still kept: a full replay
            too_old.reset()
            client.http.delete(client.url, headers={"acp-connection-id": client.cid})
            client.http.close()


TICKER = ROOT / "tests" / "helpers" / "ticker_agent.py"


class Socket:
    """A WebSocket client counting the frames it got (its reattach cursor); every agent message schema-checked."""

    def __init__(self, url: str, validator: SchemaValidator, headers: dict[str, str] | None = None) -> None:
        self.ws = ws_connect(url, additional_headers=headers or {}, open_timeout=10).__enter__()
        self.validator = validator
        self.got = 0
        self.methods: dict[int, str] = {0: "initialize"}

    def send(self, request_id: int, method: str, params: Message) -> None:
        self.methods[request_id] = method
        self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))

    def next(self) -> Message:
        message: Message = json.loads(self.ws.recv(timeout=10))
        self.got += 1
        answered = self.methods.get(message["id"]) if "method" not in message else None
        assert self.validator.check(message, answered) == [], message
        return message

    def answer(self, request_id: int) -> Message:
        while (message := self.next()).get("id") != request_id or "method" in message:
            pass
        return message

    @staticmethod
    def refusal(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """The status and body a WebSocket handshake to ``url`` with ``headers`` is refused with."""
        with pytest.raises(InvalidStatus) as refused:
            ws_connect(url, additional_headers=headers, open_timeout=10).__enter__()
        return refused.value.response.status_code, refused.value.response.body or b""

    def drop(self) -> None:
        """The client vanishes: a TCP reset, no close frame."""
        raw = self.ws.socket
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.close()


def said(messages: list[Message]) -> list[str]:
    """The texts of the agent messages among ``messages``."""
    texts = []
    for message in messages:
        update = message.get("params", {}).get("update", {})
        if update.get("sessionUpdate") in ("agent_message", "agent_message_chunk"):
            content = update["content"]
            texts += [block["text"] for block in (content if isinstance(content, list) else [content])]
    return texts


def test_a_websocket_turn_outlives_its_socket_and_the_client_reattaches(validator: SchemaValidator) -> None:
    """Finding 5 (WebSocket): the socket drops mid-turn; the turn runs on; a new socket with the connection id and
    the count of frames it got receives every frame it missed, then a ``state_update``; without reattaching, a new
    connection's ``session/resume`` takes the session over at once."""
    with served_agent(TICKER, "--turn-grace", "20") as served:
        first = Socket(served.ws_url, validator)
        first.send(0, "initialize", INITIALIZE["params"])
        meta = first.answer(0)["result"]["_meta"]["acp-agent/resumableStreams"]
        cid = meta["connectionId"]
        assert meta["graceSeconds"] == 20 and meta["transport"] == "websocket"
        first.send(1, "session/new", {"cwd": "/tmp"})
        sid = first.answer(1)["result"]["sessionId"]
        first.send(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tick 30"}]})
        seen: list[Message] = []
        while len(said(seen)) < 3:
            seen.append(first.next())
        first.drop()
        time.sleep(0.5)
        second = Socket(served.ws_url, validator, {"acp-connection-id": cid, "last-event-id": str(first.got)})
        states = []
        while True:
            message = second.next()
            seen.append(message)
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "state_update":
                states.append(update)
                if update["state"] == "idle":
                    break
        assert said(seen) == [f"tick {i}" for i in range(1, 31)]  # each once, in order: the turn was not cancelled
        assert states[-1].get("stopReason") == "end_turn", states
        second.drop()
        third = Socket(served.ws_url, validator)  # no reattach: resume on a new connection
        third.send(0, "initialize", INITIALIZE["params"])
        third.answer(0)
        started = time.monotonic()
        third.send(1, "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        answer = third.answer(1)
        assert "result" in answer, answer
        assert time.monotonic() - started < 5
        third.ws.close()


def test_a_websocket_reattaches_through_another_replica_to_its_running_turn(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    """Finding 5 (WebSocket, any replica): the balancer cuts the client's link mid-turn; the client reconnects, lands
    on the other replica, and reattaches with its cursor: that replica proxies the socket to the one holding the
    connection, so the client gets the frames it missed and the turn's end, and a ``session/cancel`` sent over the
    proxied socket stops the next turn."""
    with replicas(2, "--store", f"postgres:{postgres_dsn}", "--turn-grace", "20", agent=TICKER) as served:
        backends = [("127.0.0.1", int(s.url.rsplit(":", 1)[1].split("/")[0])) for s in served]
        with round_robin(backends) as balancer:
            first = Socket(balancer.url(scheme="ws"), validator)
            first.send(0, "initialize", INITIALIZE["params"])
            cid = first.answer(0)["result"]["_meta"]["acp-agent/resumableStreams"]["connectionId"]
            first.send(1, "session/new", {"cwd": "/tmp"})
            sid = first.answer(1)["result"]["sessionId"]
            first.send(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tick 30"}]})
            seen: list[Message] = []
            while len(said(seen)) < 3:
                seen.append(first.next())
            balancer.cut()  # the client's link resets on both sides
            balancer.restore()
            time.sleep(0.5)
            second = Socket(balancer.url(scheme="ws"), validator, {"acp-connection-id": cid,
                                                                     "last-event-id": str(first.got)})
            assert balancer.routed == [1, 1]  # the reattach landed on the replica not holding the connection
            second.methods.update(first.methods)
            end: Message = {}
            while not end:
                message = second.next()
                seen.append(message)
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                    end = update
            assert said(seen) == [f"tick {i}" for i in range(1, 31)]  # each once, in order: the turn ran on
            assert end.get("stopReason") == "end_turn", end
            assert ["result" in m for m in seen if m.get("id") == 2 and "method" not in m] == [True]
            second.send(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "tick 400"}]})
            while said(later := [second.next()]) != ["tick 1"]:
                pass
            started = time.monotonic()
            second.ws.send(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
            while True:
                later.append(message := second.next())
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                    break
            assert update.get("stopReason") == "cancelled", update
            assert time.monotonic() - started < 5, "the cancel did not reach the turn on the other replica"
            assert len(said(later)) < 100
            second.ws.close()
            unknown = Socket.refusal(balancer.url(scheme="ws"), {"acp-connection-id": cid.split(".")[0] + ".nope",
                                                                 "last-event-id": "0"})
            assert unknown == (404, b"Unknown Acp-Connection-Id")


def test_answers_about_a_session_live_on_another_replica_say_so(validator: SchemaValidator, postgres_dsn: str) -> None:
    """Finding 5 (truthful answers): for a session live on replica one, replica two's ``session/status`` says
    ``active_elsewhere`` (not ``saved``), its ``set_title`` is refused rather than lost at the owner's next save, and
    a prompt is refused "Session is active on another connection" (not "Resource not found")."""
    store = ("--store", f"postgres:{postgres_dsn}")
    with served_agent(ECHO_AGENT, *store) as one, served_agent(ECHO_AGENT, *store) as two:
        owner = ReplicaClient(one.url, validator)
        sid = str(owner.call("session/new", {"cwd": "/tmp"})["result"]["sessionId"])
        owner.prompt_and_wait(sid, "live on replica one")
        other = ReplicaClient(two.url, validator)
        assert other.call("session/status", {"sessionId": sid}, sid)["result"] == {"status": ACTIVE_ELSEWHERE_STATUS}
        refused = other.call("session/set_title", {"sessionId": sid, "title": "from replica two"}, sid)
        assert refused["error"] == {"code": -32002, "message": ACTIVE_ELSEWHERE, "data": {"sessionId": sid}}
        refused = other.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}, sid)
        assert refused["error"] == {"code": -32002, "message": ACTIVE_ELSEWHERE, "data": {"sessionId": sid}}
        owner.call("session/set_title", {"sessionId": sid, "title": "from its owner"}, sid)
        owner.close()
        deadline = time.monotonic() + 10
        while (status := other.call("session/status", {"sessionId": sid}, sid)["result"])["status"] != "saved":
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
        listed = other.call("session/list", {})["result"]["sessions"]
        assert [s.get("title") for s in listed if s["sessionId"] == sid] == ["from its owner"]
        other.close()


DOCS_SRC = ROOT / "docs_src"


@contextmanager
def real_balancer(kind: str, backends: list[tuple[str, int]], tmp: Path) -> Iterator[int]:
    """The deployment guide's HAProxy or nginx configuration, pointed at ``backends``, running; yields its port."""
    binary = shutil.which(kind, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if binary is None:
        pytest.skip(f"{kind} is not installed (apt-get install {kind}): the guide's {kind} configuration is untested")
    port = free_port()
    if kind == "haproxy":
        text = (DOCS_SRC / "haproxy.cfg").read_text().replace("bind :8080", f"bind 127.0.0.1:{port}")
        config = tmp / "haproxy.cfg"
        command = [binary, "-db", "-f", str(config)]
    else:
        text = (DOCS_SRC / "nginx-replicas.conf").read_text().replace("listen 8080", f"listen 127.0.0.1:{port}")
        tmp.chmod(0o777)
        text = (f"daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/error.log;\n"
                f"events {{}}\nhttp {{ access_log off; client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;"
                f"\n{text}\n}}\n")
        config = tmp / "nginx.conf"
        command = [binary, "-c", str(config), "-p", str(tmp)]
    for index, (host, backend_port) in enumerate(backends, 1):
        text = text.replace(f"10.0.0.{index}:8000", f"{host}:{backend_port}")
    config.write_text(text)
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"{kind} did not listen"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("kind", ["haproxy", "nginx"])
def test_the_guide_s_balancer_configurations(kind: str, validator: SchemaValidator, postgres_dsn: str,
                                             tmp_path: Path) -> None:
    """docs/guides/deployment.md: its HAProxy and nginx configurations, unchanged but for the addresses, in front of
    two replicas: HTTP clients reach their prompts, HTTP turns take milliseconds (HAProxy's ``http-no-delay``), and a
    WebSocket client works too."""
    with replicas(2, "--store", f"postgres:{postgres_dsn}") as served:
        backends = [("127.0.0.1", int(s.url.rsplit(":", 1)[1].split("/")[0])) for s in served]
        with real_balancer(kind, backends, tmp_path) as port:
            url = f"http://127.0.0.1:{port}/acp"
            client = BalancedClient(url, validator)
            sid = str(client.call("session/new", {"cwd": "/tmp"})["result"]["sessionId"])
            client.prompt_and_wait(sid, "warm up")
            started = time.monotonic()
            for turn in range(10):
                client.prompt_and_wait(sid, f"turn {turn}")
            per_turn = (time.monotonic() - started) / 10
            assert per_turn < 0.1, f"{per_turn * 1000:.0f} ms per HTTP turn through {kind}"
            client.close()
            assert reach_prompts(url, validator, 8) == 8
            socket_client = Socket(f"ws://127.0.0.1:{port}/acp", validator)
            socket_client.send(0, "initialize", INITIALIZE["params"])
            assert "result" in socket_client.answer(0)
            socket_client.ws.close()



def test_sigterm_drains_a_replica_and_its_sessions_resume_on_another(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    """Finding 7 (drain): on SIGTERM ``/readyz`` turns 503 at once (``/healthz`` stays 200) for ``--drain-delay``;
    then the WebSocket is closed 1001 (reconnect elsewhere), the session saved and its lease given back, so another
    replica resumes it at once."""
    store = ("--store", f"postgres:{postgres_dsn}")
    with served_agent(ECHO_AGENT, *store) as survivor, httpx.Client(timeout=10) as http:
        with served_agent(ECHO_AGENT, *store, "--drain-delay", "2") as draining:
            base = draining.url.rsplit("/", 1)[0]
            client = Socket(draining.ws_url, validator)
            client.send(0, "initialize", INITIALIZE["params"])
            client.answer(0)
            client.send(1, "session/new", {"cwd": "/tmp"})
            sid = client.answer(1)["result"]["sessionId"]
            client.send(2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "drained"}]})
            while said(messages := [client.next()]) != ["drained"]:
                pass
            assert http.get(base + "/readyz").text == "ready"
            signalled = time.monotonic()
            draining.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            ready = http.get(base + "/readyz")
            assert (ready.status_code, ready.text) == (503, "draining")
            assert http.get(base + "/healthz").status_code == 200
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    messages.append(client.next())
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
            assert time.monotonic() - signalled >= 2
            assert draining.proc.wait(20) == 0
        other = ReplicaClient(survivor.url, validator)
        answer = other.call("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}, sid)
        assert "result" in answer, answer  # no wait for a lease: the drained replica gave it back
        other.close()
