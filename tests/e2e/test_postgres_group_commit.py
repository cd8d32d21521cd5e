"""Issue 40, finding 6, over a real ``serve`` process on a real PostgreSQL: the saves of many sessions whose turns
end together are committed in shared transactions (not one each), and still every turn whose ``idle`` a client
received is in the database, whole, when the server is killed with SIGKILL right after the last ``idle``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import anyio
from websockets.sync.client import connect

from acp_agent.schema import TextContent
from acp_agent.store.postgres import PostgresStore
from acp_agent.testing import SchemaValidator
from tests.helpers.remote import ROOT, URL_LINE

AGENT = ROOT / "bench" / "agents" / "sdk_agent.py"  # "echo TEXT" answers TEXT in one message
CLIENTS = 16
TURNS = 6


def transactions_so_far(dsn: str) -> int:
    """The database's transaction counter (each write transaction takes one id; so does this call)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        row = db.execute("SELECT txid_current()").fetchone()
        assert row is not None
        return int(row[0])


class WsClient:
    """One WebSocket connection: requests answered in order, every agent message schema-checked."""

    def __init__(self, url: str, validator: SchemaValidator, stack: contextlib.ExitStack) -> None:
        self.ws = stack.enter_context(connect(url, open_timeout=10))
        self.validator = validator
        self.methods: dict[int, str] = {}
        self.next_id = 0

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.ws.recv(timeout=30))
        answered = self.methods.get(message["id"]) if "method" not in message else None
        assert self.validator.check(message, answered) == [], message
        return message

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.methods[request_id] = method
        self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        while True:
            message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                assert "result" in message, message
                return message

    def turn(self, sid: str, text: str) -> str:
        """A prompt to its ``idle``; the user message's id (the turn ended ``end_turn``)."""
        answer = self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        while True:
            update = self.receive().get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                assert update["stopReason"] == "end_turn", update
                return str(answer["result"]["messageId"])


def test_turns_ending_together_share_transactions_and_survive_sigkill(
        validator: SchemaValidator, postgres_dsn: str) -> None:
    command = [sys.executable, "-m", "acp_agent", "serve", str(AGENT), "--port", "0", "--workspace", "/",
               "--store", f"postgres:{postgres_dsn}"]
    server = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert server.stderr is not None
        match = None
        while match is None:
            line = server.stderr.readline()
            assert line, "the server printed no URL"
            match = URL_LINE.search(line)
        threading.Thread(target=server.stderr.read, daemon=True).start()  # keep its stderr pipe drained
        url = "ws" + match.group(1)[len("http"):]
        stack = contextlib.ExitStack()
        clients = [WsClient(url, validator, stack) for _ in range(CLIENTS)]
        sessions = []
        for client in clients:
            client.call("initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"},
                                       "capabilities": {}})
            sessions.append(str(client.call("session/new", {"cwd": "/tmp"})["result"]["sessionId"]))
        before = transactions_so_far(postgres_dsn)
        acknowledged: dict[str, list[tuple[str, str]]] = {sid: [] for sid in sessions}
        go = threading.Barrier(CLIENTS + 1)
        failures: list[BaseException] = []

        def run(client: WsClient, sid: str, number: int) -> None:
            try:
                for turn in range(TURNS):
                    go.wait(30)
                    text = f"echo client {number} turn {turn}"
                    acknowledged[sid].append((client.turn(sid, text), text.removeprefix("echo ")))
                    go.wait(30)  # the round is over
            except BaseException as exc:
                failures.append(exc)
                go.abort()

        threads = [threading.Thread(target=run, args=(client, sid, number))
                   for number, (client, sid) in enumerate(zip(clients, sessions, strict=True))]
        for thread in threads:
            thread.start()
        import psycopg  # the postgres_dsn fixture skipped the test if it is not installed

        with psycopg.connect(postgres_dsn) as db:
            for _ in range(TURNS):
                # Every client's turn ends while the sessions table is locked: the saves become due together.
                with db.transaction():
                    db.execute("LOCK TABLE acp_sessions IN SHARE MODE")
                    go.wait(30)
                    time.sleep(0.5)
                go.wait(30)  # every turn of the round acknowledged
        for thread in threads:
            thread.join(60)
        os.killpg(server.pid, signal.SIGKILL)  # right after the last idle: no close, no save at the end
        server.wait(10)
        stack.close()
        assert not failures, failures
        spent = transactions_so_far(postgres_dsn) - before - 1
        turns = CLIENTS * TURNS
        assert sum(len(turns) for turns in acknowledged.values()) == turns
        # One transaction per turn before (96, and periodic saves and lease renewals); about one per writer and one
        # batch per round of turns now (18 of them, and the lease renewals).
        assert spent <= turns // 2, f"{turns} turns took {spent} transactions"
        print(f"{turns} turns of {CLIENTS} sessions took {spent} transactions")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

    async def stored() -> dict[str, list[tuple[str, str]]]:
        store = PostgresStore(postgres_dsn)
        found: dict[str, list[tuple[str, str]]] = {}
        for sid in sessions:
            record = await store.load(sid)
            assert record is not None, sid
            items = list(record.history.replay())
            users = [item for item in items if type(item).__name__ == "UserMessage"]
            answers = [item for item in items if type(item).__name__ == "AgentMessage"]
            found[sid] = [(str(getattr(user, "message_id", "")), _text(answer))
                          for user, answer in zip(users, answers, strict=True)]
        await store.close()
        return found

    assert anyio.run(stored) == acknowledged  # every acknowledged turn, its prompt and its answer


def _text(item: Any) -> str:
    content = item.content if isinstance(item.content, list) else [item.content]
    return "".join(block.text for block in content if isinstance(block, TextContent))
