"""Reconnect in-process (asyncio and trio): every connection of an app keeps its sessions in one store, so a
client resumes its session on a new connection; a session is active on one connection at a time.

The cases: resume with replay after DELETE, after a dropped WebSocket and after a vanished HTTP client (taken
over); a refusal (-32002) while another client still reads the connection that has the session, also for
session/delete; the default store; two apps (two replicas) on one SQLite file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent.http import AcpApp, asgi_app
from acp_agent.http.sessions import ACTIVE_ELSEWHERE
from acp_agent.store import MemoryStore, SqliteStore
from tests.unit.test_http_app import INITIALIZE, EchoAgent, Events, request, running

Message = dict[str, Any]


class HttpClient:
    """One Streamable HTTP connection: POSTs, and its event stream read in a task."""

    def __init__(self, app: AcpApp, tg: anyio.abc.TaskGroup, auth: dict[str, str] | None = None) -> None:
        self.app = app
        self.tg = tg
        self.auth = auth or {}
        """Headers every request carries (an ``Authorization``)."""
        self.cid = ""
        self.events = Events()
        self.next_id = 1

    async def open(self) -> HttpClient:
        status, headers, body = await request(self.app, "POST", self.auth, INITIALIZE)
        assert status == 200, body
        self.cid = headers["acp-connection-id"]
        self.tg.start_soon(self.events.run, self.app, {"acp-connection-id": self.cid, **self.auth})
        return self

    async def call(self, method: str, params: Message, session: str | None = None) -> Message:
        """Send a request; every message up to its answer, the answer last."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        headers = {"acp-connection-id": self.cid, **self.auth, **({"acp-session-id": session} if session else {})}
        status, _, body = await request(self.app, "POST", headers, message)
        assert status == 202, body
        seen = []
        while True:
            seen.append(await self.events.next())
            if seen[-1].get("id") == self.next_id and "method" not in seen[-1]:
                return {"answer": seen[-1], "before": seen[:-1]}

    async def new_session(self) -> str:
        return str((await self.call("session/new", {"cwd": "/tmp"}))["answer"]["result"]["sessionId"])

    async def prompt(self, sid: str, text: str) -> Message:
        return await self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, sid)

    async def resume(self, sid: str, replay: bool = True) -> Message:
        params: Message = {"sessionId": sid, "cwd": "/tmp"}
        if replay:
            params["replayFrom"] = {"type": "start"}
        return await self.call("session/resume", params, sid)

    async def delete(self) -> None:
        assert (await request(self.app, "DELETE", {"acp-connection-id": self.cid, **self.auth}))[0] == 202
        self.events.gone.set()

    def drop(self) -> None:
        """The client vanishes: its event stream is cut, no DELETE."""
        self.events.gone.set()


def texts(messages: list[Message]) -> list[str]:
    """The text of every message chunk among ``messages`` (user and agent)."""
    found = []
    for message in messages:
        update = message.get("params", {}).get("update", {})
        content = update.get("content")
        if isinstance(content, dict) and content.get("type") == "text":
            found.append(content["text"])
        for block in update.get("content", []) if isinstance(update.get("content"), list) else []:
            if block.get("type") == "text":
                found.append(block["text"])
    return found


async def wait_prompted(client: HttpClient, sid: str, text: str) -> None:
    """Prompt and wait for the turn's idle snapshot."""
    await client.prompt(sid, text)
    while True:
        message = await client.events.next()
        update = message.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            return


@asynccontextmanager
async def serving(app: AcpApp) -> AsyncIterator[anyio.abc.TaskGroup]:
    async with running(app), anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()


def connection_of(app: AcpApp, cid: str) -> Any:
    return next(c for c in app.sessions._connections if c.id == cid)


@pytest.mark.anyio
async def test_resume_with_replay_on_a_new_connection_after_delete() -> None:
    app = asgi_app(EchoAgent, store=MemoryStore(), keepalive=0.2)
    async with serving(app) as tg:
        first = await HttpClient(app, tg).open()
        sid = await first.new_session()
        await wait_prompted(first, sid, "remember me")
        await first.delete()
        second = await HttpClient(app, tg).open()
        resumed = await second.resume(sid)
        assert "result" in resumed["answer"], resumed
        assert "remember me" in texts(resumed["before"])  # the replay came before the answer
        listed = (await second.call("session/list", {}))["answer"]["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [sid]
        await wait_prompted(second, sid, "still here")
        await second.delete()


@pytest.mark.anyio
async def test_a_session_read_on_a_live_connection_is_not_resumed_elsewhere() -> None:
    app = asgi_app(EchoAgent, store=MemoryStore(), keepalive=0.2)
    async with serving(app) as tg:
        first = await HttpClient(app, tg).open()
        sid = await first.new_session()
        await wait_prompted(first, sid, "mine")
        second = await HttpClient(app, tg).open()
        refused = (await second.resume(sid))["answer"]
        assert refused["error"] == {"code": -32002, "message": ACTIVE_ELSEWHERE, "data": {"sessionId": sid}}
        refused = (await second.call("session/delete", {"sessionId": sid}, sid))["answer"]
        assert refused["error"]["message"] == ACTIVE_ELSEWHERE
        # The first connection still has it, untouched.
        await wait_prompted(first, sid, "still mine")
        # Closed there, it can be resumed here.
        assert "result" in (await first.call("session/close", {"sessionId": sid}, sid))["answer"]
        assert "result" in (await second.resume(sid))["answer"]
        refused = (await first.resume(sid))["answer"]
        assert refused["error"]["message"] == ACTIVE_ELSEWHERE
        await first.delete()
        await second.delete()


@pytest.mark.anyio
async def test_a_vanished_http_client_s_session_is_taken_over() -> None:
    app = asgi_app(EchoAgent, store=MemoryStore(), keepalive=0.2)
    async with serving(app) as tg:
        first = await HttpClient(app, tg).open()
        sid = await first.new_session()
        await wait_prompted(first, sid, "before the drop")
        old = connection_of(app, first.cid)
        first.drop()  # no DELETE: the connection lives on (until idle expiry), nobody reads it
        with anyio.fail_after(5):
            while old.receivers:
                await anyio.sleep(0.01)
        second = await HttpClient(app, tg).open()
        resumed = await second.resume(sid)
        assert "result" in resumed["answer"], resumed
        assert "before the drop" in texts(resumed["before"])
        assert sid not in old.runtime.sessions and not old.closing  # closed there, the connection itself kept
        await wait_prompted(second, sid, "after the drop")
        await second.delete()
        assert (await request(app, "DELETE", {"acp-connection-id": first.cid}))[0] == 202


@pytest.mark.anyio
async def test_resume_after_a_dropped_websocket() -> None:
    app = asgi_app(EchoAgent, store=MemoryStore(), keepalive=0.2)
    to_app, inbox = anyio.create_memory_object_stream[Message](10)
    outbox, from_app = anyio.create_memory_object_stream[Message](100)

    async def ws_call(message: Message) -> Message:
        await to_app.send({"type": "websocket.receive", "text": json.dumps(message)})
        while True:
            answer = json.loads((await from_app.receive())["text"])
            if answer.get("id") == message["id"] and "method" not in answer:
                return answer

    async with serving(app) as tg:
        tg.start_soon(app, {"type": "websocket", "path": "/acp", "headers": []}, inbox.receive, outbox.send)
        await to_app.send({"type": "websocket.connect"})
        assert (await from_app.receive())["type"] == "websocket.accept"
        await ws_call(INITIALIZE)
        sid = (await ws_call({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}))
        sid = sid["result"]["sessionId"]
        await ws_call({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                       "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "over the socket"}]}})
        await to_app.send({"type": "websocket.disconnect", "code": 1006})  # gone, mid-nothing
        http = await HttpClient(app, tg).open()  # resumed at once: waits for the close to save it
        resumed = await http.resume(sid)
        assert "result" in resumed["answer"], resumed
        assert "over the socket" in texts(resumed["before"])
        await http.delete()


def test_the_default_store_is_the_agent_s_own() -> None:
    class Kept(EchoAgent):
        store = MemoryStore()

    assert asgi_app(Kept).store is Kept.store
    assert asgi_app(Kept()).store is Kept.store
    default = asgi_app(EchoAgent).store
    assert isinstance(default, SqliteStore) and default.path.name == "echo.served.sqlite3"
    given = MemoryStore()
    assert asgi_app(EchoAgent, store=given).store is given


@pytest.mark.anyio
async def test_two_apps_on_one_sqlite_file_resume_each_other_s_sessions(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    one, two = asgi_app(EchoAgent, store=SqliteStore(path)), asgi_app(EchoAgent, store=SqliteStore(path))
    async with serving(one) as tg1, serving(two) as tg2:
        first = await HttpClient(one, tg1).open()
        sid = await first.new_session()
        await wait_prompted(first, sid, "on replica one")
        await first.delete()
        second = await HttpClient(two, tg2).open()
        with anyio.fail_after(5):  # the close saves it
            while not (await second.call("session/list", {}))["answer"]["result"]["sessions"]:
                await anyio.sleep(0.05)
        resumed = await second.resume(sid)
        assert "on replica one" in texts(resumed["before"])
        await second.delete()


@pytest.mark.anyio
async def test_a_vanished_client_s_session_is_not_taken_over_with_another_credential() -> None:
    app = asgi_app(EchoAgent, store=MemoryStore(), keepalive=0.2, token=lambda presented: presented in ("a", "b"))
    async with serving(app) as tg:
        first = HttpClient(app, tg)
        first_auth = {"authorization": "Bearer a"}
        status, headers, _ = await request(app, "POST", first_auth, INITIALIZE)
        assert status == 200
        first.cid = headers["acp-connection-id"]
        tg.start_soon(first.events.run, app, {"acp-connection-id": first.cid, **first_auth})
        new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}
        assert (await request(app, "POST", {"acp-connection-id": first.cid, **first_auth}, new))[0] == 202
        sid = (await first.events.next())["result"]["sessionId"]
        first.drop()
        old = connection_of(app, first.cid)
        with anyio.fail_after(5):
            while old.receivers:
                await anyio.sleep(0.01)
        other_auth = {"authorization": "Bearer b"}
        status, headers, _ = await request(app, "POST", other_auth, INITIALIZE)
        cid = headers["acp-connection-id"]
        events = Events()
        tg.start_soon(events.run, app, {"acp-connection-id": cid, **other_auth})
        resume = {"jsonrpc": "2.0", "id": 1, "method": "session/resume", "params": {"sessionId": sid, "cwd": "/tmp"}}
        assert (await request(app, "POST", {"acp-connection-id": cid, "acp-session-id": sid, **other_auth},
                              resume))[0] == 202
        refused = await events.next()
        assert refused["error"]["message"] == ACTIVE_ELSEWHERE
        assert sid in old.runtime.sessions  # untouched
        events.gone.set()


def test_cli_store_and_cookie_specs(tmp_path: Path) -> None:
    from acp_agent.cli import LoadError, affinity_header, parse_store
    from acp_agent.store.postgres import PostgresStore

    assert isinstance(parse_store("memory"), MemoryStore)
    sqlite = parse_store(f"sqlite:{tmp_path}/s.db")
    assert isinstance(sqlite, SqliteStore) and sqlite.path == tmp_path / "s.db"
    for spec in ("postgres:dbname=acp host=/tmp", "postgresql://u@h/db"):
        store = parse_store(spec)
        assert isinstance(store, PostgresStore) and store.conninfo == spec.removeprefix("postgres:")
    with pytest.raises(LoadError, match="unknown store"):
        parse_store("redis://x")
    assert affinity_header("acp_replica=r1") == ("Set-Cookie", "acp_replica=r1; Path=/; HttpOnly")
    with pytest.raises(LoadError):
        affinity_header("no-value")
    with pytest.raises(LoadError):
        affinity_header("a=b; Domain=evil")


def test_cli_refuses_settings_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    from acp_agent.cli import main

    echo = str(Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py")
    assert main(["serve", echo, "--port", "0", "--max-output-stall", "0"]) == 2
    assert "max_output_stall must be a positive number" in capsys.readouterr().err
    assert main(["serve", echo, "--port", "0", "--store", "nowhere"]) == 2
    assert "unknown store 'nowhere'" in capsys.readouterr().err
