"""Principals on a real server (``python -m acp_agent serve --tokens FILE``, uvicorn on loopback): two users see
only their own sessions, another user's session id is answered as an unknown one, a browser-style WebSocket
authenticates with a subprotocol, a CORS preflight from an allowed origin is answered without a credential, and a
tokens file others can read stops the server before it listens."""

from __future__ import annotations

import itertools
import json
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from socket import SO_LINGER, SOL_SOCKET
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from acp_agent.http.security import subprotocol_offer
from tests.helpers.balancer import free_port
from tests.helpers.remote import ROOT, served_agent

ECHO = ROOT / "examples" / "echo_agent.py"
TOKENS = {"alice": "alice-5ecret-token", "bob": "bob-5ecret-token"}
ORIGIN = "https://app.example"
INITIALIZE = {"protocolVersion": 2, "info": {"name": "e2e", "version": "0"}, "capabilities": {}}


class Peer:
    """A WebSocket client that sends requests and reads until each one's answer."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.ids = itertools.count(1)

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self.ids)
        self.socket.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=10))
            if message.get("id") == request_id and "method" not in message:
                return {key: message[key] for key in ("result", "error") if key in message}


@contextmanager
def peer(url: str, **options: Any) -> Iterator[Peer]:
    with connect(url, open_timeout=10, **options) as socket:
        client = Peer(socket)
        assert "result" in client.answer("initialize", INITIALIZE)
        yield client


def tokens_file(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# who may use this agent\n" + "".join(f"{p}:{t}\n" for p, t in TOKENS.items()))
    path.chmod(mode)
    return path


def test_two_users_on_one_server_see_only_their_own_sessions(tmp_path: Path) -> None:
    tokens = tokens_file(tmp_path)
    with served_agent(ECHO, "--tokens", str(tokens), "--store", f"sqlite:{tmp_path}/s.sqlite3",
                      "--allow-origin", ORIGIN) as served:
        ws = served.ws_url
        with peer(ws, additional_headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice:
            sid = alice.answer("session/new", {"cwd": "/tmp"})["result"]["sessionId"]
            assert "result" in alice.answer("session/prompt", {"sessionId": sid,
                                                               "prompt": [{"type": "text", "text": "hi"}]})
            with peer(ws, additional_headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as bob:
                assert bob.answer("session/list", {})["result"]["sessions"] == []
                unknown = "sess_" + "z" * (len(sid) - 5)
                for method, extra in (("session/status", {}), ("session/resume", {"cwd": "/tmp"}),
                                      ("session/set_title", {"title": "bob's now"}), ("session/archive", {})):
                    theirs = bob.answer(method, {"sessionId": sid, **extra})
                    nobody = bob.answer(method, {"sessionId": unknown, **extra})
                    assert json.dumps(theirs).replace(sid, "X") == json.dumps(nobody).replace(unknown, "X")
                    assert theirs["error"]["code"] == -32002
            [listed] = alice.answer("session/list", {})["result"]["sessions"]
            assert listed["sessionId"] == sid and listed.get("title") != "bob's now" and not listed["archived"]
        # A browser's WebSocket: the token as a subprotocol (never in the URL).
        with peer(ws, subprotocols=subprotocol_offer(TOKENS["bob"]), origin=ORIGIN) as browser:  # type: ignore[arg-type]
            assert browser.socket.subprotocol == "acp"
            assert browser.answer("session/list", {})["result"]["sessions"] == []
        with httpx.Client(timeout=10) as http:
            preflight = http.options(served.url, headers={
                "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type"})
            assert preflight.status_code == 204
            assert preflight.headers["access-control-allow-origin"] == ORIGIN
        assert TOKENS["alice"] not in served.log() and TOKENS["bob"] not in served.log()


def test_a_tokens_file_others_can_read_stops_the_server(tmp_path: Path) -> None:
    tokens = tokens_file(tmp_path, 0o640)
    done = subprocess.run([sys.executable, "-m", "acp_agent", "serve", str(ECHO), "--port", "0", "--tokens",
                           str(tokens)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert f"the tokens file {tokens} is accessible to group or others (mode 0640); run: chmod 600" in done.stderr


def test_serve_turns_per_user_quotas_on_and_its_flags_change_them(tmp_path: Path) -> None:
    # Issue 39, finding 6: every quota was off and serve had no flag for one (one token holder stored 11,000-18,000
    # sessions in 20 s). Here the stored-session quota is set by its flag; the others keep serve's defaults.
    tokens = tokens_file(tmp_path)
    with served_agent(ECHO, "--tokens", str(tokens), "--store", f"sqlite:{tmp_path}/s.sqlite3",
                      "--max-user-stored-sessions", "2") as served, \
            peer(served.ws_url, additional_headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice, \
            peer(served.ws_url, additional_headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as bob:
        for _ in range(2):
            assert "result" in alice.answer("session/new", {"cwd": "/tmp"})
        refused = alice.answer("session/new", {"cwd": "/tmp"})["error"]
        assert refused["code"] == -32800 and refused["data"] == {"limit": "max_principal_stored_sessions", "value": 2}
        assert "result" in bob.answer("session/new", {"cwd": "/tmp"})  # per user


def test_a_reattach_through_another_replica_with_another_user_s_token_is_an_unknown_connection(
    tmp_path: Path
) -> None:
    """Issue 40: a WebSocket reattach to alice's detached connection arriving at the replica not holding it is
    proxied there; with bob's token it is refused exactly as a connection that does not exist, with alice's it
    reattaches."""
    tokens = tokens_file(tmp_path)
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    common = ("--tokens", str(tokens), "--store", f"sqlite:{tmp_path}/s.sqlite3", "--turn-grace", "20",
              *(arg for url in urls for arg in ("--peer", url)))
    with served_agent(ECHO, "--port", str(ports[0]), "--advertise-url", urls[0], *common) as one, \
            served_agent(ECHO, "--port", str(ports[1]), "--advertise-url", urls[1], *common) as two:
        alice_auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
        with connect(one.ws_url, open_timeout=10, additional_headers=alice_auth) as socket:
            alice = Peer(socket)
            cid = alice.answer("initialize", INITIALIZE)["result"]["_meta"]["acp-agent/resumableStreams"][
                "connectionId"]
            alice.answer("session/new", {"cwd": "/tmp"})
            got = 2
            socket.socket.setsockopt(SOL_SOCKET, SO_LINGER, struct.pack("ii", 1, 0))
            socket.socket.close()  # alice vanishes: her connection detaches, kept for the grace period
        time.sleep(0.5)

        def refusal(token: str, connection_id: str) -> tuple[int, bytes]:
            headers = {"Authorization": f"Bearer {token}", "Acp-Connection-Id": connection_id,
                       "Last-Event-ID": str(got)}
            with pytest.raises(InvalidStatus) as refused:
                connect(two.ws_url, open_timeout=10, additional_headers=headers).__enter__()
            return refused.value.response.status_code, refused.value.response.body or b""

        unknown = cid.split(".")[0] + ".0" + cid.split(".")[1][1:]
        assert refusal(TOKENS["bob"], cid) == refusal(TOKENS["bob"], unknown) == (404, b"Unknown Acp-Connection-Id")
        with connect(two.ws_url, open_timeout=10, additional_headers={
                **alice_auth, "Acp-Connection-Id": cid, "Last-Event-ID": str(got)}) as back:
            assert "result" in Peer(back).answer("session/list", {})
