"""A real browser (the browser tests' headless Chromium) against a real server (``serve --tokens --allow-origin``):
a page from an allowed origin POSTs ``initialize`` with a bearer token (the browser sends a CORS preflight first) and
opens a WebSocket that carries its token as a subprotocol (``docs_src/browser_socket.js``); a socket offering
another user's token lists none of the first user's sessions, and one offering no token never opens."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.helpers.remote import ROOT, served_agent

ECHO = ROOT / "examples" / "echo_agent.py"
TOKENS = {"alice": "alice-br0wser-token", "bob": "bob-br0wser-token"}

PAGE = """<!doctype html><html><body><script>
%(socket)s
const AGENT = %(agent)s, WS = %(ws)s, TOKENS = %(tokens)s;
const INIT = {protocolVersion: 2, info: {name: "browser", version: "0"}, capabilities: {}};

function talk(ws) {
  let next = 0;
  const waiting = new Map();
  ws.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (waiting.has(message.id) && !("method" in message)) { waiting.get(message.id)(message); }
  };
  return (method, params) => new Promise((resolve) => {
    const id = ++next;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({jsonrpc: "2.0", id, method, params}));
  });
}

function opened(ws) {
  return new Promise((resolve) => {
    ws.onopen = () => resolve(true);
    ws.onerror = () => resolve(false);
    ws.onclose = () => resolve(false);
  });
}

async function run() {
  const out = {};
  const answer = await fetch(AGENT, {method: "POST", body: JSON.stringify({jsonrpc: "2.0", id: 0,
    method: "initialize", params: INIT}), headers: {"Authorization": "Bearer " + TOKENS.alice,
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}});
  out.postStatus = answer.status;
  out.connectionIdVisible = answer.headers.get("acp-connection-id") !== null;
  out.postVersion = (await answer.json()).result.protocolVersion;

  const alice = acpSocket(WS, TOKENS.alice);
  out.aliceOpened = await opened(alice);
  out.aliceProtocol = alice.protocol;
  const ask = talk(alice);
  await ask("initialize", INIT);
  const made = await ask("session/new", {cwd: "/tmp"});
  out.aliceListed = (await ask("session/list", {})).result.sessions.map((s) => s.sessionId === made.result.sessionId);

  const bob = acpSocket(WS, TOKENS.bob);
  out.bobOpened = await opened(bob);
  const bobAsk = talk(bob);
  await bobAsk("initialize", INIT);
  out.bobListed = (await bobAsk("session/list", {})).result.sessions.length;
  out.bobStatus = (await bobAsk("session/status", {sessionId: made.result.sessionId})).error.code;

  out.anonymousOpened = await opened(new WebSocket(WS, ["acp"]));
  return out;
}
run().catch((error) => ({failed: String(error)})).then((out) =>
  fetch("/result", {method: "POST", body: JSON.stringify(out)}));
</script></body></html>
"""


@contextmanager
def page_server(body: list[bytes], results: queue.Queue[bytes]) -> Iterator[str]:
    """Serve ``body[0]`` as the one page of a loopback origin, and put what it POSTs to ``/result`` in
    ``results``; yields the origin."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body[0])))
            self.end_headers()
            self.wfile.write(body[0])

        def do_POST(self) -> None:
            results.put(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_browser_authenticates_over_cors_and_a_websocket_subprotocol(browser: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{p}:{t}\n" for p, t in TOKENS.items()))
    tokens.chmod(0o600)
    body: list[bytes] = [b""]
    results: queue.Queue[bytes] = queue.Queue()
    with page_server(body, results) as origin, served_agent(ECHO, "--tokens", str(tokens), "--allow-origin",
                                                            origin) as served:
        body[0] = (PAGE % {"socket": (ROOT / "docs_src" / "browser_socket.js").read_text(),
                           "agent": json.dumps(served.url), "ws": json.dumps(served.ws_url),
                           "tokens": json.dumps(TOKENS)}).encode()
        browser.get(origin + "/")
        out = json.loads(results.get(timeout=60))
        assert out == {"postStatus": 200, "connectionIdVisible": True, "postVersion": 2, "aliceOpened": True,
                       "aliceProtocol": "acp", "aliceListed": [True], "bobOpened": True, "bobListed": 0,
                       "bobStatus": -32002, "anonymousOpened": False}
        assert "?token" not in served.log() and TOKENS["alice"] not in served.log()
