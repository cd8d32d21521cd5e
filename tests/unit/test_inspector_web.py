"""The inspector's web app refuses what is not this machine's browser with this run's token."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from acp_agent.dev.link import Inspection
from acp_agent.dev.web import COOKIE, STATIC_FILES, build_app

SECRET = "the-secret"


@pytest.fixture
def client() -> TestClient:
    recorded = [{"type": "wire", "run": 1, "seq": 0, "t": 0.0, "dir": "out", "problems": [],
                 "msg": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}}]
    app = build_app(Inspection(None, events=recorded), SECRET)
    return TestClient(app, base_url="http://127.0.0.1:9999", follow_redirects=False)


def test_the_token_becomes_a_cookie(client: TestClient) -> None:
    answer = client.get("/", params={"token": SECRET})
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    cookie = answer.headers["set-cookie"]
    assert f"{COOKIE}={SECRET}" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = client.get("/")
    assert page.status_code == 200 and "acp-agent inspector" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in STATIC_FILES:
        assert client.get(f"/static/{name}").status_code == 200


def test_no_token_no_page(client: TestClient) -> None:
    assert client.get("/").status_code == 403
    assert client.get("/", params={"token": "guess"}).status_code == 403
    assert client.get("/static/app.js").status_code == 403


def test_another_host_is_refused(client: TestClient) -> None:
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host.
    answer = client.get("/", params={"token": SECRET}, headers={"host": "evil.example:9999"})
    assert answer.status_code == 421
    client.cookies.set(COOKIE, SECRET)
    assert client.get("/static/app.js", headers={"host": "evil.example:9999"}).status_code == 403


def test_unknown_static_file(client: TestClient) -> None:
    client.cookies.set(COOKIE, SECRET)
    assert client.get("/static/secret.txt").status_code == 404
    assert client.get("/static/..%2Flink.py").status_code == 404


def test_the_socket_wants_cookie_and_own_origin(client: TestClient) -> None:
    with pytest.raises(WebSocketDisconnect), client.websocket_connect(
            "/ws", headers={"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:9999"}):
        pass
    client.cookies.set(COOKIE, SECRET)
    for origin in ("http://evil.example", "null", "", "http://127.0.0.1:1"):
        with pytest.raises(WebSocketDisconnect), client.websocket_connect(
                "/ws", headers={"origin": origin, "host": "127.0.0.1:9999"}):
            pass
    own = {"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:9999"}
    with client.websocket_connect("/ws", headers=own) as socket:
        hello = socket.receive_json()
        assert hello["type"] == "hello" and hello["replay"] is True
        assert hello["events"][0]["msg"]["method"] == "initialize"
        socket.send_json({"op": "request", "rid": 7, "method": "session/new", "params": {}})
        answer = socket.receive_json()
        assert answer["rid"] == 7 and "replay" in answer["error"]["message"]


def test_the_page_shows_trace_ids_when_telemetry_is_on(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """With OTLP export configured the page is told so, sends a traceparent with each prompt and shows its trace id
    next to the turn (``app.js``, ``view.js``)."""
    client.cookies.set(COOKIE, SECRET)
    own = {"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:9999"}
    for endpoint, on in (("", False), ("http://127.0.0.1:4318", True)):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with client.websocket_connect("/ws", headers=own) as socket:
            assert socket.receive_json()["telemetry"] is on
    static = files("acp_agent.dev") / "static"
    assert "traceparent: `00-${traceId}-" in (static / "app.js").read_text()
    assert '"data-testid": "trace-id"' in (static / "view.js").read_text()


def test_a_stdio_agent_imports_no_inspector() -> None:
    code = ("import sys, acp_agent, acp_agent.stdio, acp_agent.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'httpx_ws', 'selenium') "
            "or m.startswith('acp_agent.dev')))")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
