"""What an unauthenticated or idle peer costs ``python -m acp_agent serve`` (issue 27, section 2), as figures.

Each scenario starts a fresh server on loopback (``examples/echo_agent.py``, memory store), runs a bounded attack
against it and reports the server's RSS, the sockets it holds, the time until it refused, what a real client got and
how many bytes it logged. ``--root`` serves another checkout's ``acp_agent`` (for before/after figures):

    .venv/bin/python bench/server_bounds.py [--root CHECKOUT] [--only NAME,...]

Bounded in time and count, loopback only; nothing fails on a number.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 2, "info": {"name": "b", "version": "0"}, "capabilities": {}}}


class Server:
    """A served echo agent, its stderr collected."""

    def __init__(self, root: Path, *args: str, open_files: int | None = None) -> None:
        def limit() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_agent", "serve", str(ROOT / "examples/echo_agent.py"), "--port", "0",
             "--store", "memory", *args],
            cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit)
        self.log = bytearray()
        found = threading.Event()
        self.url = ""

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log += line
                match = re.search(rb"at (http://\S+)", line)
                if match and not self.url:
                    self.url = match.group(1).decode()
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(30) or not self.url:
            raise RuntimeError(f"no server: {self.log.decode(errors='replace')}")
        self.host, port = self.url.split("//")[1].split("/")[0].rsplit(":", 1)
        self.port = int(port)
        self.log_at_start = len(self.log)
        self.held: list[Any] = []

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

    def sockets(self) -> int:
        """Established TCP sockets the server holds."""
        count = 0
        for fd in os.listdir(f"/proc/{self.proc.pid}/fd"):
            try:
                if os.readlink(f"/proc/{self.proc.pid}/fd/{fd}").startswith("socket:"):
                    count += 1
            except OSError:
                pass
        return count - 1  # the listening socket

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def raw(self, timeout: float = 5.0) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self.held.append(sock)
        return sock

    def client_ok(self) -> str:
        try:
            answer = httpx.post(self.url, json=INIT, timeout=5,
                                headers={"accept": "application/json, text/event-stream",
                                         "authorization": "Bearer secret"})
            return str(answer.status_code)
        except httpx.HTTPError as exc:
            return type(exc).__name__

    def logged_bytes(self) -> int:
        return len(self.log) - self.log_at_start

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def served(root: Path, *args: str, open_files: int | None = None) -> Iterator[Server]:
    """A fresh server for one scenario, stopped after it; every socket the scenario opened is closed."""
    server = Server(root, *args, open_files=open_files)
    try:
        yield server
    finally:
        for held in server.held:
            held.close()
        server.stop()


def first_answer(sock: socket.socket) -> str:
    try:
        data = sock.recv(200)
    except TimeoutError:
        return "no answer"
    except ConnectionError as exc:
        return type(exc).__name__
    return data.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"


def huge_head(root: Path) -> dict[str, Any]:
    """8 requests with a 64 MiB header, no token."""
    with served(root, "--token", "secret") as server:
        rss = server.rss_mb()
        cpu = server.cpu_seconds()
        started = time.monotonic()
        answers = []
        piece = b"a" * (1 << 20)
        for _ in range(8):
            sock = server.raw(timeout=60)
            sock.sendall(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for _ in range(64):
                    sock.sendall(piece)
                sock.sendall(b"\r\n\r\n")
            answers.append(first_answer(sock))
        return {"answers": sorted(set(answers)), "seconds": round(time.monotonic() - started, 2),
                "server_cpu_s": round(server.cpu_seconds() - cpu, 2),
                "rss_mb": f"{rss:.0f} -> {server.rss_mb():.0f}", "client": server.client_ok()}


def many_fields(root: Path) -> dict[str, Any]:
    """A request with 5,000 header fields, no token."""
    with served(root) as server:
        sock = server.raw()
        sock.sendall(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X: y\r\n" * 5000 + b"Content-Length: "
                     + str(len(json.dumps(INIT))).encode() + b"\r\nContent-Type: application/json\r\n"
                     + b"Accept: application/json, text/event-stream\r\n\r\n" + json.dumps(INIT).encode())
        return {"answer": first_answer(sock)}


def slowloris(root: Path) -> dict[str, Any]:
    """300 sockets sending a partial head, then nothing; held after 15 s?"""
    with served(root) as server:
        for _ in range(300):
            server.raw().sendall(b"POST /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(1)
        held = server.sockets()
        time.sleep(14)
        return {"held_after_1s": held, "held_after_15s": server.sockets(), "client": server.client_ok()}


def few_descriptors(root: Path) -> dict[str, Any]:
    """ulimit -n 256, 300 idle sockets; a real client at 3 s and 15 s, and the log."""
    with served(root, open_files=256) as server:
        with contextlib.suppress(OSError):
            for _ in range(300):
                server.raw(timeout=2)
        time.sleep(3)
        client = server.client_ok()
        time.sleep(12)
        return {"client_3s": client, "client_15s": server.client_ok(), "held": server.sockets(),
                "log_bytes_15s": server.logged_bytes()}


def idle_websockets(root: Path) -> dict[str, Any]:
    """300 WebSockets that do nothing, --idle-timeout 5: how many are open after 10 s."""
    with served(root, "--idle-timeout", "5", "--max-connections", "2000") as server:
        server.held += [connect(server.url.replace("http", "ws", 1), open_timeout=10).socket for _ in range(300)]
        time.sleep(10)
        return {"held_after_10s": server.sockets()}


def stray_responses(root: Path) -> dict[str, Any]:
    """20,000 responses to no request over one WebSocket: bytes logged."""
    with served(root) as server, connect(server.url.replace("http", "ws", 1), open_timeout=10) as ws:
        ws.send(json.dumps(INIT))
        ws.recv(10)
        started = time.monotonic()
        for i in range(20_000):
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 10_000 + i, "result": {}}))
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp"}}))
        ws.recv(30)
        seconds = time.monotonic() - started
        return {"log_bytes": server.logged_bytes(), "seconds": round(seconds, 2)}


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "huge_head": huge_head, "many_fields": many_fields, "slowloris": slowloris,
    "few_descriptors": few_descriptors, "idle_websockets": idle_websockets, "stray_responses": stray_responses,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose acp_agent serves")
    parser.add_argument("--only", default=",".join(SCENARIOS))
    args = parser.parse_args()
    for name in args.only.split(","):
        print(json.dumps({"scenario": name, **SCENARIOS[name](args.root.resolve())}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
