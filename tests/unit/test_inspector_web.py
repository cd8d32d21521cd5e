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


OWN = {"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:9999"}


def test_no_cookie_carries_the_secret_and_the_page_holds_none(client: TestClient) -> None:
    # Issue 39, finding 8: cookies ignore ports, so the old per-run cookie reached every other 127.0.0.1 server the
    # browser visited. The page and its files are served without a secret and set no cookie.
    for answer in (client.get("/"), client.get("/", params={"token": SECRET})):
        assert answer.status_code == 200 and "acp-agent inspector" in answer.text
        assert "set-cookie" not in answer.headers and SECRET not in answer.text
        assert "default-src 'self'" in answer.headers["content-security-policy"]
    for name in STATIC_FILES:
        answer = client.get(f"/static/{name}")
        assert answer.status_code == 200 and "set-cookie" not in answer.headers


def test_another_host_is_refused(client: TestClient) -> None:
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host.
    assert client.get("/", headers={"host": "evil.example:9999"}).status_code == 421
    assert client.get("/static/app.js", headers={"host": "evil.example:9999"}).status_code == 421
    with pytest.raises(WebSocketDisconnect), client.websocket_connect(
            "/ws", headers={"origin": "http://evil.example:9999", "host": "evil.example:9999"}):
        pass


def test_unknown_static_file(client: TestClient) -> None:
    assert client.get("/static/secret.txt").status_code == 404
    assert client.get("/static/..%2Flink.py").status_code == 404


def test_the_socket_wants_its_own_origin_and_the_secret_as_first_message(client: TestClient) -> None:
    for origin in ("http://evil.example", "null", "", "http://127.0.0.1:1"):
        with pytest.raises(WebSocketDisconnect), client.websocket_connect(
                "/ws", headers={"origin": origin, "host": "127.0.0.1:9999"}) as socket:
            socket.send_json({"type": "auth", "token": SECRET})
            socket.receive_json()
    client.cookies.set(COOKIE, SECRET)  # the old cookie opens nothing any more
    for first in ({"op": "request", "rid": 1, "method": "session/new", "params": {}},
                  {"type": "auth", "token": "guess"}, {"type": "auth", "token": 7}):
        with client.websocket_connect("/ws", headers=OWN) as socket:
            socket.send_json(first)
            assert socket.receive_json() == {"type": "refused"}
            with pytest.raises(WebSocketDisconnect):
                socket.receive_json()
    with client.websocket_connect("/ws", headers=OWN) as socket:
        socket.send_json({"type": "auth", "token": SECRET})
        hello = socket.receive_json()
        assert hello["type"] == "hello" and hello["replay"] is True
        assert hello["events"][0]["msg"]["method"] == "initialize"
        socket.send_json({"op": "request", "rid": 7, "method": "session/new", "params": {}})
        answer = socket.receive_json()
        assert answer["rid"] == 7 and "replay" in answer["error"]["message"]


def test_the_browser_is_opened_on_a_private_launcher_and_records_are_private(tmp_path: Path) -> None:
    from acp_agent.dev.command import open_private, write_launcher

    url = "http://127.0.0.1:9999/#token=" + SECRET
    launcher = write_launcher(url)
    try:
        assert launcher.stat().st_mode & 0o777 == 0o600 and launcher.parent.stat().st_mode & 0o777 == 0o700
        assert url in launcher.read_text() and SECRET not in launcher.as_uri()  # what the browser's argv holds
    finally:
        launcher.unlink()
        launcher.parent.rmdir()
    existing = tmp_path / "old.jsonl"
    existing.write_text("x")
    existing.chmod(0o644)
    with open_private(str(existing)) as record:
        record.write(b"{}")
    assert existing.stat().st_mode & 0o777 == 0o600 and existing.read_bytes() == b"{}"


def test_dev_prints_the_secret_in_a_fragment_and_records_0600(tmp_path: Path) -> None:
    from tests.helpers.inspector import running_inspector

    record = tmp_path / "run.jsonl"
    root = Path(__file__).resolve().parents[2]
    with running_inspector(str(root / "examples" / "echo_agent.py"), "--record", str(record)) as inspector:
        assert "/#token=" in inspector.url and "?token" not in inspector.url
        assert record.stat().st_mode & 0o777 == 0o600  # was 0644: prompts and provider keys readable by all


def test_the_page_shows_trace_ids_when_telemetry_is_on(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """With OTLP export configured the page is told so, sends a traceparent with each prompt and shows its trace id
    next to the turn (``app.js``, ``view.js``)."""
    own = {"origin": "http://127.0.0.1:9999", "host": "127.0.0.1:9999"}
    for endpoint, on in (("", False), ("http://127.0.0.1:4318", True)):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        with client.websocket_connect("/ws", headers=own) as socket:
            socket.send_json({"type": "auth", "token": SECRET})
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
