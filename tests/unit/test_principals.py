"""Principals in-process (asyncio and trio): who a connection is, and which sessions are theirs (issue 27 §1).

Two users with their own tokens share one server and one store. Another user's session id is answered exactly as
an unknown id by every method (no existence oracle), ``session/list`` shows the caller's sessions only, the author
sees ``session.principal`` and ``Login.principal``, a stored session from before principals is ``"default"``'s,
``session/archive`` respects the active-elsewhere guard, a WebSocket's credential is re-checked, and browsers get
CORS and a subprotocol-carried token.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent import ContentBlock, LimitExceededError, Limits, RequestError, Session, StopReason, TextContent
from acp_agent.auth import Login
from acp_agent.http import AcpApp, asgi_app
from acp_agent.http.security import subprotocol_offer, token_table
from acp_agent.http.sessions import ACTIVE_ELSEWHERE
from acp_agent.schema import AuthMethodAgent
from acp_agent.store import MemoryStore, SessionStore, SqliteStore
from tests.unit.test_http_app import INITIALIZE, EchoAgent, Events, request
from tests.unit.test_http_reconnect import HttpClient, serving, texts

pytestmark = pytest.mark.anyio

Message = dict[str, Any]
TOKENS = {"alice": "token-of-alice", "bob": "token-of-bob"}


class PrincipalAgent(EchoAgent):
    """Records the principal of each session it opens; refuses sessions to ``mallory``."""

    seen: list[str] = []

    async def new_session(self, session: Session) -> None:
        PrincipalAgent.seen.append(session.principal)
        if session.principal == "mallory":
            raise RequestError.invalid_request("mallory may not open sessions")


class User(HttpClient):
    """An HTTP client authenticated as one principal."""

    def __init__(self, app: AcpApp, tg: anyio.abc.TaskGroup, name: str) -> None:
        super().__init__(app, tg, {"authorization": f"Bearer {TOKENS.get(name, name)}"})

    async def open(self) -> User:
        await super().open()
        return self

    async def answer(self, method: str, params: Message) -> Message:
        """The answer's ``result`` or ``error`` (without its id)."""
        answer = (await self.call(method, params, params.get("sessionId")))["answer"]
        return {key: answer[key] for key in ("result", "error") if key in answer}

    async def listed(self) -> list[str]:
        result = (await self.call("session/list", {"archived": "include"}))["answer"]["result"]
        return [s["sessionId"] for s in result["sessions"]]


def multi_user_app(store: SessionStore | None = None, **options: Any) -> AcpApp:
    return asgi_app(EchoAgent, store=store if store is not None else MemoryStore(), keepalive=0.2,
                    token=token_table(TOKENS), **options)


PROBES: list[tuple[str, Message]] = [
    ("session/status", {}),
    ("session/resume", {"cwd": "/tmp"}),
    ("session/resume", {"cwd": "/tmp", "replayFrom": {"type": "start"}}),
    ("session/set_title", {"title": "renamed by bob"}),
    ("session/set_title", {"title": "   "}),
    ("session/archive", {}),
    ("session/unarchive", {}),
    ("session/delete", {}),
    ("session/prompt", {"prompt": [{"type": "text", "text": "hello from bob"}]}),
    ("session/close", {}),
    ("session/fork", {"cwd": "/tmp"}),
    ("session/set_config_option", {"configId": "mode", "type": "id", "value": "x"}),
    ("tool_call/cancel", {"toolCallId": "call_1"}),
    ("terminal/cancel", {"terminalId": "term_1"}),
]


def unknown_like(sid: str) -> str:
    """An id of the same shape that names no session."""
    return "sess_" + "z" * (len(sid) - len("sess_"))


def neutral(answer: Message, sid: str) -> str:
    return json.dumps(answer, sort_keys=True).replace(sid, "SID")


@pytest.mark.parametrize("alice_state", ["active", "stored"])
async def test_another_principal_s_session_is_answered_as_an_unknown_id(alice_state: str) -> None:
    app = multi_user_app()
    async with serving(app) as tg:
        alice = await User(app, tg, "alice").open()
        sid = await alice.new_session()
        await alice.prompt(sid, "hello from alice")
        if alice_state == "stored":
            await alice.call("session/close", {"sessionId": sid}, sid)
        bob = await User(app, tg, "bob").open()
        assert await bob.listed() == []
        unknown = unknown_like(sid)
        for method, extra in PROBES:
            theirs = await bob.answer(method, {"sessionId": sid, **extra})
            nobody = await bob.answer(method, {"sessionId": unknown, **extra})
            assert neutral(theirs, sid) == neutral(nobody, unknown), (method, theirs, nobody)
        # Nothing bob did reached alice's session, or her connection.
        await anyio.sleep(0.1)
        pending = []
        while True:
            try:
                pending.append(alice.events.receive_stream.receive_nowait())
            except anyio.WouldBlock:
                break
        assert "bob" not in json.dumps(pending)
        assert await alice.listed() == [sid]
        status = await alice.answer("session/status", {"sessionId": sid})
        assert status["result"]["status"] == ("open" if alice_state == "active" else "saved")
        listing = (await alice.call("session/list", {}))["answer"]["result"]["sessions"]
        assert listing[0].get("title") != "renamed by bob" and listing[0]["archived"] is False
        if alice_state == "stored":
            await alice.resume(sid)
        prompted = await alice.prompt(sid, "still mine")
        assert "result" in prompted["answer"]
        # Each lists their own only.
        bobs = await bob.new_session()
        assert await bob.listed() == [bobs]
        assert await alice.listed() == [sid]
        await alice.delete()
        await bob.delete()


async def test_the_author_sees_the_principal_and_a_hook_refuses_one() -> None:
    PrincipalAgent.seen.clear()
    tokens = token_table({**TOKENS, "mallory": "token-of-mallory"})
    app = asgi_app(PrincipalAgent, store=MemoryStore(), keepalive=0.2, token=tokens)
    async with serving(app) as tg:
        alice = await User(app, tg, "alice").open()
        await alice.new_session()
        mallory = await User(app, tg, "token-of-mallory").open()
        refused = await mallory.answer("session/new", {"cwd": "/tmp"})
        assert refused["error"]["message"].endswith("mallory may not open sessions")
        assert PrincipalAgent.seen == ["alice", "mallory"]
        await alice.delete()
        await mallory.delete()


async def test_a_plain_token_and_no_token_mean_the_default_principal() -> None:
    for options in ({"token": "s3cret"}, {}):
        PrincipalAgent.seen.clear()
        app = asgi_app(PrincipalAgent, store=MemoryStore(), keepalive=0.2, **options)
        async with serving(app) as tg:
            user = await User(app, tg, "s3cret").open()
            await user.new_session()
            assert PrincipalAgent.seen == ["default"]
            await user.delete()


class LoginAgent(EchoAgent):
    auth_methods = [AuthMethodAgent(method_id="sso", name="SSO")]
    logins: list[str] = []

    async def login(self, login: Login) -> None:
        LoginAgent.logins.append(login.principal)
        if login.principal != "alice":
            raise RequestError.auth_required()


async def test_login_sees_the_principal() -> None:
    LoginAgent.logins.clear()
    app = asgi_app(LoginAgent, store=MemoryStore(), keepalive=0.2, token=token_table(TOKENS))
    async with serving(app) as tg:
        alice = await User(app, tg, "alice").open()
        bob = await User(app, tg, "bob").open()
        assert "result" in await alice.answer("auth/login", {"methodId": "sso"})
        assert (await bob.answer("auth/login", {"methodId": "sso"}))["error"]["code"] == -32000
        assert LoginAgent.logins == ["alice", "bob"]
        await alice.delete()
        await bob.delete()


async def test_sessions_stored_before_principals_are_the_default_principal_s(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:  # a file written by acp-agent 0.1 (schema version 1)
        db.executescript("""
            CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
            INSERT INTO schema_migrations VALUES (1, '2026-01-01T00:00:00Z');
            CREATE TABLE sessions (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL UNIQUE,
                cwd TEXT NOT NULL, title TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
                archived INTEGER NOT NULL DEFAULT 0, info TEXT NOT NULL, state TEXT NOT NULL);
            CREATE INDEX sessions_by_cwd ON sessions (cwd, seq);
            CREATE TABLE history (session_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                item BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
            INSERT INTO sessions (session_id, cwd, title, created_at, updated_at, archived, info, state) VALUES
                ('sess_old', '/tmp', 'Before', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 0,
                 '{"additionalDirectories": [], "meta": null}',
                 '{"configOptions": [], "availableCommands": [], "data": {}}');
        """)
    store = SqliteStore(path)
    [old] = await store.list_sessions(principal="default")
    assert old.session_id == "sess_old" and old.principal == "default"
    assert await store.list_sessions(principal="alice") == []
    loaded = await store.load("sess_old")
    assert loaded is not None and loaded.principal == "default"
    await store.close()


async def test_archive_respects_the_active_elsewhere_guard() -> None:
    app = multi_user_app()
    async with serving(app) as tg:
        first = await User(app, tg, "alice").open()
        sid = await first.new_session()
        second = await User(app, tg, "alice").open()  # the same user, another window
        refused = await second.answer("session/archive", {"sessionId": sid})
        assert refused["error"]["message"] == ACTIVE_ELSEWHERE
        assert refused["error"]["data"] == {"sessionId": sid}
        assert "result" in (await first.prompt(sid, "still running here"))["answer"]
        assert (await first.answer("session/status", {"sessionId": sid}))["result"]["status"] == "open"
        assert "result" in await first.answer("session/archive", {"sessionId": sid})  # its own connection may
        await first.delete()
        await second.delete()


class Socket:
    """A WebSocket driven in-process."""

    def __init__(self, app: AcpApp, headers: dict[str, str]) -> None:
        self.app = app
        self.scope = {"type": "websocket", "path": "/acp", "headers": [(k.encode(), v.encode())
                                                                        for k, v in headers.items()],
                      "extensions": {"websocket.http.response": {}}}
        self.to_app, self.inbox = anyio.create_memory_object_stream[dict[str, Any]](10)
        self.outbox, self.from_app = anyio.create_memory_object_stream[dict[str, Any]](100)

    async def run(self) -> None:
        await self.app(self.scope, self.inbox.receive, self.outbox.send)

    async def next(self, timeout: float = 5) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            return await self.from_app.receive()


async def test_a_websocket_closes_once_its_credential_is_refused() -> None:
    valid = {"token-of-alice"}

    def check(presented: str) -> str | None:
        return "alice" if presented in valid else None

    app = asgi_app(EchoAgent, store=MemoryStore(), token=check, recheck_interval=0.2)
    async with serving(app) as tg:
        socket = Socket(app, {"authorization": "Bearer token-of-alice"})
        tg.start_soon(socket.run)
        await socket.to_app.send({"type": "websocket.connect"})
        assert (await socket.next())["type"] == "websocket.accept"
        await socket.to_app.send({"type": "websocket.receive", "text": json.dumps(INITIALIZE)})
        assert "result" in json.loads((await socket.next())["text"])
        await anyio.sleep(0.5)
        assert len(app.registry) == 1  # still accepted: re-checked and kept
        valid.clear()  # the token is revoked
        with anyio.fail_after(3):
            closed = await socket.next()
        assert closed == {"type": "websocket.close", "code": 1008, "reason": "Credential no longer accepted"}
        await socket.to_app.send({"type": "websocket.disconnect", "code": 1008})


async def test_a_browser_websocket_authenticates_with_a_subprotocol() -> None:
    app = multi_user_app()
    async with serving(app) as tg:
        offer = ", ".join(subprotocol_offer("token-of-bob"))
        socket = Socket(app, {"sec-websocket-protocol": offer, "origin": "https://app.example"})
        app.options = type(app.options)(**{**{f: getattr(app.options, f) for f in app.options.__dataclass_fields__},
                                           "allowed_origins": ("https://app.example",)})
        tg.start_soon(socket.run)
        await socket.to_app.send({"type": "websocket.connect"})
        accepted = await socket.next()
        assert accepted["type"] == "websocket.accept" and accepted["subprotocol"] == "acp"
        await socket.to_app.send({"type": "websocket.disconnect", "code": 1000})
        # A wrong token in the subprotocol, or a token subprotocol without "acp", is refused like a missing one.
        encoded = base64.urlsafe_b64encode(b"token-of-nobody").decode().rstrip("=")
        for offered in (f"acp, acp.bearer.{encoded}", subprotocol_offer("token-of-bob")[1]):
            refused = Socket(app, {"sec-websocket-protocol": offered})
            tg.start_soon(refused.run)
            await refused.to_app.send({"type": "websocket.connect"})
            answer = await refused.next()
            assert answer["type"] == "websocket.http.response.start" and answer["status"] == 401


async def test_cors_preflight_and_answers_for_an_allowed_origin() -> None:
    app = multi_user_app(allowed_origins=("https://app.example",))
    preflight = {"origin": "https://app.example", "access-control-request-method": "POST",
                 "access-control-request-headers": "authorization, content-type"}
    async with serving(app):
        status, headers, _ = await request(app, "OPTIONS", preflight)
        assert status == 204  # no credential on a preflight: not 401
        assert headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in headers["access-control-allow-headers"]
        assert "POST" in headers["access-control-allow-methods"]
        status, _, _ = await request(app, "OPTIONS", {**preflight, "origin": "https://evil.example"})
        assert status == 403
        status, headers, _ = await request(app, "POST", {"origin": "https://app.example",
                                                         "authorization": "Bearer token-of-alice"}, INITIALIZE)
        assert status == 200
        assert headers["access-control-allow-origin"] == "https://app.example"
        assert headers["access-control-expose-headers"] == "acp-connection-id"
        await request(app, "DELETE", {"acp-connection-id": headers["acp-connection-id"],
                                      "authorization": "Bearer token-of-alice"})
        status, headers, _ = await request(app, "POST", {"origin": "https://app.example"}, INITIALIZE)
        assert status == 401 and headers["access-control-allow-origin"] == "https://app.example"


def test_tokens_file_is_refused_when_others_can_read_it_or_a_principal_repeats(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from acp_agent.cli import load_tokens, main

    echo = str(Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py")
    tokens = tmp_path / "tokens"
    tokens.write_text("# users\nalice:token-of-alice\n\nbob: token-of-bob\n")
    os.chmod(tokens, 0o644)
    assert main(["serve", echo, "--port", "0", "--tokens", str(tokens)]) == 2
    assert re.search(r"accessible to group or others \(mode 0644\); run: chmod 600", capsys.readouterr().err)
    os.chmod(tokens, 0o600)
    assert load_tokens(str(tokens)) == TOKENS
    for bad, why in (("alice:a\nalice:b\n", "principal 'alice' appears twice"),
                     ("alice:a\nbob:a\n", "the token of 'bob' is another principal's too"),
                     ("alice\n", "expected 'principal:token'"), ("# nobody\n", "names no principal")):
        tokens.write_text(bad)
        assert main(["serve", echo, "--port", "0", "--tokens", str(tokens)]) == 2
        assert why in capsys.readouterr().err
    assert main(["serve", echo, "--port", "0", "--tokens", str(tmp_path / "missing")]) == 2
    assert "cannot read the tokens file" in capsys.readouterr().err


def test_a_token_table_finds_each_principal() -> None:
    check = token_table(TOKENS)
    assert check("token-of-alice") == "alice" and check("token-of-bob") == "bob"
    assert check("token-of-") is None and check("") is None


class ProcessAgent(EchoAgent):
    """``run`` starts a terminal (a long sleep) and says whether a limit refused it."""

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        if text != "run":
            return await super().prompt(session, prompt)
        try:
            await session.start_terminal(["sleep", "30"], detach=True)
        except LimitExceededError as exc:
            await session.say(f"refused: {exc.limit}")
        else:
            await session.say("started")
        return "end_turn"


async def turn(user: User, sid: str, text: str) -> list[str]:
    """Prompt and read until the turn's idle snapshot: the texts said (the prompt's echo included)."""
    seen = (await user.prompt(sid, text))["before"]
    while True:
        seen.append(await user.events.next())
        update = seen[-1].get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            return texts(seen)


async def test_per_principal_quotas_each_refused_with_a_precise_error() -> None:
    limits = Limits(max_principal_connections=2, max_principal_sessions=2, max_principal_stored_sessions=3,
                    max_title_length=10, max_history_bytes=3000, max_principal_processes=1)
    app = asgi_app(ProcessAgent, store=MemoryStore(), keepalive=0.2, token=token_table(TOKENS), limits=limits,
                   shutdown_timeout=1)

    def refused(answer: Message, limit: str, value: int) -> None:
        assert answer["error"]["code"] == -32800, answer
        assert answer["error"]["data"] == {"limit": limit, "value": value}
        assert limit in answer["error"]["message"]

    async with serving(app) as tg:
        first = await User(app, tg, "alice").open()
        second = await User(app, tg, "alice").open()
        status, _, body = await request(app, "POST", first.auth, INITIALIZE)  # a third connection
        assert status == 429
        refused(json.loads(body), "max_principal_connections", 2)
        socket = Socket(app, first.auth)  # a third one over WebSocket: its initialize gets the same error
        tg.start_soon(socket.run)
        await socket.to_app.send({"type": "websocket.connect"})
        assert (await socket.next())["type"] == "websocket.accept"
        await socket.to_app.send({"type": "websocket.receive", "text": json.dumps(INITIALIZE)})
        answer = json.loads((await socket.next())["text"])
        assert answer["id"] == INITIALIZE["id"]
        refused(answer, "max_principal_connections", 2)
        closed = await socket.next()
        assert closed["type"] == "websocket.close" and closed["code"] == 1008
        bob = await User(app, tg, "bob").open()  # another user is not held back
        # Live sessions across alice's two connections, then the sessions she keeps in the store.
        one = await first.new_session()
        two = await second.new_session()
        refused(await first.answer("session/new", {"cwd": "/tmp"}), "max_principal_sessions", 2)
        assert "result" in await bob.answer("session/new", {"cwd": "/tmp"})
        await first.call("session/close", {"sessionId": one}, one)
        three = await first.new_session()
        await first.call("session/close", {"sessionId": three}, three)
        refused(await first.answer("session/new", {"cwd": "/tmp"}), "max_principal_stored_sessions", 3)
        await first.call("session/delete", {"sessionId": three}, three)
        four = await first.new_session()  # deleting made room
        # Title length.
        refused(await first.answer("session/set_title", {"sessionId": four, "title": "x" * 11}),
                "max_title_length", 10)
        assert await first.answer("session/set_title", {"sessionId": four, "title": "x" * 10}) == {
            "result": {"title": "x" * 10}}
        # History bytes per session: the prompt that reaches the limit is the last one taken.
        assert "result" in (await first.prompt(four, "y" * 2000))["answer"]
        refused((await first.prompt(four, "one more"))["answer"], "max_history_bytes", 3000)
        # Processes across alice's connections.
        assert await turn(second, two, "run") == ["run", "started"]
        bobs = await bob.new_session()
        assert await turn(bob, bobs, "run") == ["run", "started"]  # bob's own count
        await first.call("session/close", {"sessionId": four}, four)
        await first.resume(one, replay=False)
        assert await turn(first, one, "run") == ["run", "refused: max_principal_processes"]
        await first.delete()
        await second.delete()
        await bob.delete()


# -- issue 39, finding 7: the connection is bound to the principal whatever carries the credential -------------------


def carried_by_subprotocol(token: str) -> dict[str, str]:
    return {"sec-websocket-protocol": ", ".join(subprotocol_offer(token))}


async def test_an_http_connection_opened_with_a_subprotocol_credential_is_bound_to_it() -> None:
    # Plain HTTP accepts the WebSocket subprotocol credential; the connection used to be bound to the Authorization
    # header only (absent here), so bob read alice's event stream with her connection id.
    app = multi_user_app()
    async with serving(app):
        status, headers, _ = await request(app, "POST", carried_by_subprotocol("token-of-alice"), INITIALIZE)
        assert status == 200
        cid = headers["acp-connection-id"]
        stream = {"acp-connection-id": cid, "accept": "text/event-stream"}
        for bob in (carried_by_subprotocol("token-of-bob"), {"authorization": "Bearer token-of-bob"}):
            with anyio.fail_after(5):  # (was: alice's event stream opened for bob, 200)
                assert (await request(app, "GET", {**stream, **bob}))[0] == 404
                assert (await request(app, "DELETE", {"acp-connection-id": cid, **bob}))[0] == 404
        # alice, with her token in either carrier, still reaches it
        assert (await request(app, "DELETE", {"acp-connection-id": cid,
                                              "authorization": "Bearer token-of-alice"}))[0] == 202


async def test_an_http_connection_ends_once_its_token_stands_for_another_principal() -> None:
    owner = {"shared-token": "alice"}

    def check(presented: str) -> str | None:
        return owner.get(presented)

    app = asgi_app(EchoAgent, store=MemoryStore(), token=check, keepalive=0.2, recheck_interval=0.2)
    session_new = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}
    async with serving(app):
        auth = {"authorization": "Bearer shared-token"}
        _, headers, _ = await request(app, "POST", auth, INITIALIZE)
        cid = headers["acp-connection-id"]
        assert (await request(app, "POST", {"acp-connection-id": cid, **auth}, session_new))[0] == 202
        owner["shared-token"] = "bob"  # the token now maps to another user
        assert (await request(app, "POST", {"acp-connection-id": cid, **auth}, session_new))[0] == 404
        assert len(app.registry) == 0  # ended, as a WebSocket is closed 1008; was: kept acting as alice


async def test_an_open_event_stream_ends_once_its_token_stands_for_another_principal() -> None:
    owner = {"shared-token": "alice"}

    def check(presented: str) -> str | None:
        return owner.get(presented)

    app = asgi_app(EchoAgent, store=MemoryStore(), token=check, keepalive=0.2, recheck_interval=0.2)
    async with serving(app) as tg:
        auth = {"authorization": "Bearer shared-token"}
        _, headers, _ = await request(app, "POST", auth, INITIALIZE)
        events = Events()
        tg.start_soon(events.run, app, {"acp-connection-id": headers["acp-connection-id"], **auth})
        await anyio.sleep(0.5)
        assert len(app.registry) == 1
        owner["shared-token"] = "bob"
        with anyio.fail_after(3):
            while True:  # the stream ends at the next re-check
                try:
                    await events.receive_stream.receive()
                except anyio.EndOfStream:
                    break
        assert len(app.registry) == 0
