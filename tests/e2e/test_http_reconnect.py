"""Reconnect against real ``python -m acp_agent serve`` processes: a client whose connection died (TCP reset of
its event stream, or DELETE) initializes again and resumes its session with replay; two replicas on one
PostgreSQL database list and resume each other's sessions, never one that is active on the other (its lease),
and resume a crashed replica's sessions. Every message the agent sends is schema-checked.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

import httpx

from acp_agent.http.sessions import ACTIVE_ELSEWHERE
from acp_agent.testing import SchemaValidator
from tests.e2e.test_http_faults import ECHO_AGENT, EventStream, initialize
from tests.helpers.remote import ROOT, URL_LINE, ServedAgent, served_agent, wait_until

Message = dict[str, Any]


class Client:
    """One Streamable HTTP connection to a served agent; checks every agent message against the schema."""

    _ids = itertools.count(1)

    def __init__(self, served: ServedAgent, validator: SchemaValidator) -> None:
        self.url = served.url
        self.http = httpx.Client(timeout=10)
        self.cid = initialize(self.http, self.url)
        self.events = EventStream(self.url, {"acp-connection-id": self.cid})
        self.validator = validator
        self.methods: dict[int, str] = {}

    def _next(self) -> Message:
        message = self.events.messages.get(timeout=10)
        answered = self.methods.get(message["id"]) if "method" not in message else None
        assert self.validator.check(message, answered) == [], message
        return message

    def call(self, method: str, params: Message, session: str | None = None) -> tuple[Message, list[Message]]:
        """The answer to a request and the messages before it."""
        request_id = next(self._ids)
        self.methods[request_id] = method
        headers = {"acp-connection-id": self.cid, **({"acp-session-id": session} if session else {})}
        response = self.http.post(self.url, json={"jsonrpc": "2.0", "id": request_id, "method": method,
                                                  "params": params}, headers=headers)
        assert response.status_code == 202, response.text
        before = []
        while True:
            message = self._next()
            if message.get("id") == request_id and "method" not in message:
                return message, before
            before.append(message)

    def new_session(self) -> str:
        answer, _ = self.call("session/new", {"cwd": "/tmp"})
        return str(answer["result"]["sessionId"])

    def prompt_and_wait(self, sid: str, text: str) -> None:
        self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, sid)
        while True:
            update = self._next().get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                return

    def resume(self, sid: str) -> tuple[Message, list[Message]]:
        return self.call("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}, sid)

    def listed(self) -> list[str]:
        answer, _ = self.call("session/list", {})
        return [s["sessionId"] for s in answer["result"]["sessions"]]

    def reset(self) -> None:
        """The client vanishes: its event stream's TCP connection is reset, no DELETE."""
        raw = self.events._sock
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.shutdown(socket.SHUT_RD)  # wakes the reading thread without sending anything
        self.events._thread.join(5)
        raw.close()  # linger 0: a reset
        self.http.close()

    def delete(self) -> None:
        assert self.http.delete(self.url, headers={"acp-connection-id": self.cid}).status_code == 202
        self.events.close()
        self.http.close()


def replayed_texts(messages: list[Message]) -> list[str]:
    texts = []
    for message in messages:
        content = message.get("params", {}).get("update", {}).get("content")
        blocks = content if isinstance(content, list) else [content] if isinstance(content, dict) else []
        texts += [block["text"] for block in blocks if block.get("type") == "text"]
    return texts


def test_resume_after_a_tcp_reset_and_after_delete(validator: SchemaValidator) -> None:
    with served_agent(ECHO_AGENT) as served:
        first = Client(served, validator)
        sid = first.new_session()
        first.prompt_and_wait(sid, "said before the reset")
        first.reset()
        second = Client(served, validator)
        answer, before = second.resume(sid)
        assert "result" in answer, answer
        assert "said before the reset" in " ".join(replayed_texts(before))
        second.prompt_and_wait(sid, "said before the delete")
        second.delete()
        third = Client(served, validator)
        answer, before = third.resume(sid)
        assert "result" in answer, answer
        assert "said before the delete" in " ".join(replayed_texts(before))
        # A client still reading its connection keeps its session.
        fourth = Client(served, validator)
        refused, _ = fourth.resume(sid)
        assert refused["error"]["code"] == -32002 and refused["error"]["data"] == {"sessionId": sid}
        third.delete()
        fourth.delete()


def test_two_replicas_on_one_postgres_database(validator: SchemaValidator, postgres_dsn: str) -> None:
    store = ("--store", f"postgres:{postgres_dsn}")
    with served_agent(ECHO_AGENT, *store) as one, served_agent(ECHO_AGENT, *store) as two:
        first = Client(one, validator)
        sid = first.new_session()
        first.prompt_and_wait(sid, "kept on replica one")
        first.delete()
        second = Client(two, validator)
        wait_until(lambda: sid in second.listed(), 10, "the session to be listed on replica two")
        answer, before = second.resume(sid)
        assert "result" in answer, answer
        assert "kept on replica one" in " ".join(replayed_texts(before))
        second.prompt_and_wait(sid, "continued on replica two")
        second.delete()
        third = Client(one, validator)
        answer, before = third.resume(sid)
        assert "continued on replica two" in " ".join(replayed_texts(before))
        third.delete()


def test_affinity_cookie_is_set() -> None:
    with served_agent(ECHO_AGENT, "--affinity-cookie", "acp_replica=r1") as served, httpx.Client(timeout=10) as http:
        response = http.post(served.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}})
        assert response.headers["set-cookie"] == "acp_replica=r1; Path=/; HttpOnly"
        assert http.delete(served.url, headers={"acp-connection-id": response.headers["acp-connection-id"]}
                           ).status_code == 202


def resume_when_free(client: Client, sid: str, timeout: float = 10.0) -> tuple[Message, list[Message]]:
    """Resume, retrying while the session is still active elsewhere (a close under way on another replica)."""
    deadline = time.monotonic() + timeout
    while True:
        answer, before = client.resume(sid)
        if "result" in answer or time.monotonic() > deadline:
            return answer, before
        assert answer["error"]["message"] == ACTIVE_ELSEWHERE, answer
        time.sleep(0.2)


def test_a_session_active_on_one_replica_is_not_resumed_on_another(
    validator: SchemaValidator, postgres_dsn: str
) -> None:
    store = ("--store", f"postgres:{postgres_dsn}")
    with served_agent(ECHO_AGENT, *store) as one:
        first = Client(one, validator)
        sid = first.new_session()
        first.prompt_and_wait(sid, "live on replica one")
        with served_agent(ECHO_AGENT, *store) as two:
            second = Client(two, validator)
            refused, _ = second.resume(sid)  # replica one holds its lease: refused after a second's wait
            assert refused["error"] == {"code": -32002, "message": ACTIVE_ELSEWHERE, "data": {"sessionId": sid}}
            refused, _ = second.call("session/delete", {"sessionId": sid}, sid)
            assert refused["error"]["message"] == ACTIVE_ELSEWHERE
            first.prompt_and_wait(sid, "still live on replica one")
            first.delete()  # its close saves the session and gives the lease back
            answer, before = resume_when_free(second, sid)
            assert "result" in answer, answer
            assert "still live on replica one" in " ".join(replayed_texts(before))
            second.prompt_and_wait(sid, "now on replica two")
            second.delete()
        # A closed replica gave its leases back too.
        third = Client(one, validator)
        answer, before = resume_when_free(third, sid)
        assert "now on replica two" in " ".join(replayed_texts(before))
        third.delete()


def test_a_crashed_replica_s_sessions_are_resumed_elsewhere(validator: SchemaValidator, postgres_dsn: str) -> None:
    store = ("--store", f"postgres:{postgres_dsn}")
    with served_agent(ECHO_AGENT, *store) as survivor:
        command = [sys.executable, "-m", "acp_agent", "serve", str(ECHO_AGENT), "--port", "0", "--workspace", "/",
                   *store]
        doomed = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, start_new_session=True)
        try:
            assert doomed.stderr is not None
            match = None
            while match is None:
                line = doomed.stderr.readline()
                assert line, "the replica printed no URL"
                match = URL_LINE.search(line)
            crashed = ServedAgent(doomed, match.group(1))
            first = Client(crashed, validator)
            sid = first.new_session()
            first.prompt_and_wait(sid, "said just before the crash")
            os.killpg(doomed.pid, signal.SIGKILL)  # no close, no save at the end: the periodic saves are what is left
            doomed.wait(10)
            second = Client(survivor, validator)
            answer, before = resume_when_free(second, sid)  # the database dropped the dead replica's locks
            assert "result" in answer, answer
            assert "said just before the crash" in " ".join(replayed_texts(before))
            second.delete()
        finally:
            if doomed.poll() is None:
                os.killpg(doomed.pid, signal.SIGKILL)
                doomed.wait()
