"""One remote connection's echo turn: acp-agent's server next to the TypeScript SDK's ``AcpServer``, interleaved.

For each transport (WebSocket, Streamable HTTP), one connection to each server (``python -m acp_agent serve
bench/agents/sdk_agent.py --store memory`` and ``bench/agents/ts_http_server.mjs``) runs echo turns
(``session/prompt`` sent -> the prompt's answer *and* ``state_update`` ``idle`` received) in blocks of ``--block``
turns, alternating between the servers block by block, so both share the machine's load. The first turn of each
block is left out. Reported per server and transport: p50 and p99 (nearest rank) over all kept turns, and the
median over block pairs of the ratio of acp-agent's block p50 to the TypeScript server's.

The client is the same for both servers: asyncio with the ``websockets`` library's client for WebSocket, and a
small HTTP/1.1 client on asyncio streams for Streamable HTTP (one keep-alive connection for POSTs, one for each
event stream). Not a timed test: bounded in time, nothing fails on a slow number.

    .venv/bin/python bench/remote_latency.py [--blocks 15] [--block 20] [--transports ws,http] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[1]
INIT = {"protocolVersion": 2, "info": {"name": "latency", "version": "0"}, "capabilities": {}}
SERVERS = ("acp-agent", "ts-sdk")


def start(server: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``server`` on a free loopback port; its process and URL."""
    if server == "acp-agent":
        command = [sys.executable, "-m", "acp_agent", "serve", "bench/agents/sdk_agent.py", "--port", "0",
                   "--store", "memory"]
        pattern = re.compile(r"at (http://\S+)")
    else:
        command = ["node", "bench/agents/ts_http_server.mjs"]
        pattern = re.compile(r"listening (http://\S+)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ACP_AGENT_LOG_LEVEL": "INFO"}
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        if server == "acp-agent" and "path" in line and "acp:" in line:
            sys.stderr.write(line)
        match = pattern.search(line)
        if match:
            return proc, match.group(1)
    raise RuntimeError(f"{server} did not start")


def stop(proc: subprocess.Popen[str]) -> None:
    """End a server and wait for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Turns:
    """Matches incoming messages to the request waiting for its answer and to the turn waiting for ``idle``."""

    def __init__(self) -> None:
        self.answers: dict[int, asyncio.Future[Any]] = {}
        self.idle: asyncio.Future[Any] | None = None

    def deliver(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" not in message:
            future = self.answers.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)
            return
        update = (message.get("params") or {}).get("update") or {}
        idle = update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
        if idle and self.idle is not None and not self.idle.done():
            self.idle.set_result(update)

    def expect(self, request_id: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.answers[request_id] = future
        return future

    def expect_idle(self) -> asyncio.Future[Any]:
        self.idle = asyncio.get_running_loop().create_future()
        return self.idle


class Client:
    """One ACP connection: ``call`` sends a request and waits for its answer; ``turn`` runs one echo turn."""

    def __init__(self) -> None:
        self.turns = Turns()
        self.next_id = 0
        self.session_id = ""

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def turn(self, text: str) -> None:
        idle = self.turns.expect_idle()
        answer = await self.call("session/prompt", {"sessionId": self.session_id,
                                                   "prompt": [{"type": "text", "text": text}]})
        if "result" not in answer:
            raise RuntimeError(f"prompt failed: {answer}")
        await idle


class WsClient(Client):
    """One ACP connection over WebSocket."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = re.sub(r"^http", "ws", url)

    async def open(self) -> None:
        self.ws = await connect(self.url, compression=None, max_size=None)
        self.reader = asyncio.create_task(self._read())
        await self.call("initialize", INIT)
        self.session_id = (await self.call("session/new", {"cwd": "/tmp"}))["result"]["sessionId"]

    async def _read(self) -> None:
        async for text in self.ws:
            self.turns.deliver(orjson.loads(text))

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = self.next_id
        self.next_id += 1
        answer = self.turns.expect(request_id)
        await self.ws.send(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                         "params": params}).decode())
        return await answer

    async def close(self) -> None:
        await self.ws.close()
        self.reader.cancel()


class HttpClient(Client):
    """One ACP connection over Streamable HTTP: POSTs on one keep-alive socket, event streams on their own."""

    def __init__(self, url: str) -> None:
        super().__init__()
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self.connection_id = ""
        self.streams: list[tuple[asyncio.StreamWriter, asyncio.Task[None]]] = []

    def _head(self, method: str, headers: dict[str, str], body: bytes = b"") -> bytes:
        lines = [f"{method} {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if method == "POST":
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    @staticmethod
    async def _response_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return int(status_line.split()[1]), headers

    async def _response(self) -> tuple[int, dict[str, str], bytes]:
        status, headers = await self._response_head(self.reader)
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            body = b""
        return status, headers, body

    def _headers(self, session: bool) -> dict[str, str]:
        headers = {"Acp-Connection-Id": self.connection_id} if self.connection_id else {}
        if session and self.session_id:
            headers["Acp-Session-Id"] = self.session_id
        return headers

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        body = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        self.writer.write(self._head("POST", {"Accept": "application/json, text/event-stream"}, body))
        status, headers, _ = await self._response()
        if status != 200:
            raise RuntimeError(f"initialize: {status}")
        self.connection_id = headers["acp-connection-id"]
        self.next_id = 1
        await self._listen(session=False)
        self.session_id = (await self.call("session/new", {"cwd": "/tmp"}, session=False))["result"]["sessionId"]
        await self._listen(session=True)

    async def _listen(self, *, session: bool) -> None:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.write(self._head("GET", {"Accept": "text/event-stream", **self._headers(session)}))
        status, headers = await self._response_head(reader)
        if status != 200:
            raise RuntimeError(f"GET: {status}")
        chunked = headers.get("transfer-encoding") == "chunked"
        self.streams.append((writer, asyncio.create_task(self._events(reader, chunked))))

    async def _events(self, reader: asyncio.StreamReader, chunked: bool) -> None:
        pending = b""
        while True:
            if chunked:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                data = await reader.readexactly(size + 2)
                if size == 0:
                    return
                pending += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return
                pending += data
            *events, pending = pending.split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        self.turns.deliver(orjson.loads(line[5:]))

    async def call(self, method: str, params: dict[str, Any], *, session: bool = True) -> Any:
        request_id = self.next_id
        self.next_id += 1
        answer = self.turns.expect(request_id)
        body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        self.writer.write(self._head("POST", {"Accept": "application/json, text/event-stream",
                                              **self._headers(session)}, body))
        status, _, _ = await self._response()
        if status != 202:
            raise RuntimeError(f"POST {method}: {status}")
        return await answer

    async def close(self) -> None:
        self.writer.write(self._head("DELETE", self._headers(False)))
        with_timeout = asyncio.wait_for(self._response(), 5)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            await with_timeout
        self.writer.close()
        for writer, task in self.streams:
            task.cancel()
            writer.close()


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))]


async def measure(transport: str, urls: dict[str, str], blocks: int, block: int) -> dict[str, Any]:
    """Interleaved blocks of echo turns on one connection per server; latencies in ms."""
    make: Callable[[str], Client] = WsClient if transport == "ws" else HttpClient
    clients = {name: make(url) for name, url in urls.items()}
    for client in clients.values():
        await client.open()
        for _ in range(5):  # warm-up
            await client.turn("echo warm")
    kept: dict[str, list[float]] = {name: [] for name in clients}
    ratios: list[float] = []
    order = list(clients)
    for index in range(blocks):
        block_p50: dict[str, float] = {}
        for name in order if index % 2 == 0 else reversed(order):
            client = clients[name]
            times = []
            for turn in range(block):
                started = time.perf_counter()
                await client.turn(f"echo hello {turn}")
                times.append((time.perf_counter() - started) * 1000)
            kept[name] += times[1:]
            block_p50[name] = statistics.median(times[1:])
        if len(block_p50) == 2:
            ratios.append(block_p50[SERVERS[0]] / block_p50[SERVERS[1]])
    for client in clients.values():
        await client.close()
    result: dict[str, Any] = {"transport": transport, "turns_per_server": blocks * (block - 1)}
    for name, values in kept.items():
        result[name] = {"p50": statistics.median(values), "p99": nearest_rank(values, 0.99)}
    if ratios:
        result["ratio_p50"] = statistics.median(ratios)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=15, help="blocks per server and transport")
    parser.add_argument("--block", type=int, default=20, help="turns per block (the first is left out)")
    parser.add_argument("--transports", default="ws,http")
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--json", action="store_true", help="print one JSON line per transport")
    args = parser.parse_args()
    procs: dict[str, subprocess.Popen[str]] = {}
    urls: dict[str, str] = {}
    try:
        for server in args.servers.split(","):
            procs[server], urls[server] = start(server)
        rows = [asyncio.run(measure(t, urls, args.blocks, args.block)) for t in args.transports.split(",")]
    finally:
        for proc in procs.values():
            stop(proc)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print("| transport | server | p50 ms | p99 ms | p50 ratio acp-agent / TS (median of block pairs) |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        for name in urls:
            ratio = f"{row['ratio_p50']:.2f}x" if name == SERVERS[0] and "ratio_p50" in row else ""
            print(f"| {row['transport']} | {name} | {row[name]['p50']:.3f} | {row[name]['p99']:.3f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
