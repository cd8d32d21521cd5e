"""Scale-out on PostgreSQL: ``serve`` replicas sharing one database, under concurrent WebSocket clients.

Two sections (``--only store,scale``):

- **store**: one replica, clients straight to it, the PostgreSQL store against the SQLite store in the same run
  (``--rounds`` alternations): echo turns per second and turn latency p50/p99, and PostgreSQL's share of SQLite.
- **scale**: 1 to 3 replicas on one PostgreSQL behind a round-robin proxy without affinity (HAProxy when
  installed, with ``option http-no-delay``; else a small Python TCP proxy): turns/s and p50/p99 under steady
  load; with two or more replicas, the failover time after SIGKILL of a replica and after SIGSTOP of another
  (frozen ``--stop-seconds``): from the signal to each cut-off client's first acknowledged turn after it
  reconnected through the proxy and resumed its session on a replica that would take it; and the acknowledged
  turns lost, which must be 0: each client records the ``messageId`` of every turn whose ``idle`` came back
  ``end_turn``, and at the end the database must hold every one of them.

Clients: ``--clients`` asyncio WebSocket connections in this process, each one session, echo turns back to back
(a turn is acknowledged by its ``idle``). WebSocket only: Streamable HTTP needs sticky routing until any-replica
routing lands (issue 40, finding 4). PostgreSQL is a throwaway server (``tests/helpers/postgres.py``, fsync on
unless ``--no-fsync``). Not a timed test: a slow machine gives smaller numbers, nothing fails on them; the run
fails (exit 1) only if an acknowledged turn is missing.

    .venv/bin/python bench/scale.py [--only store,scale] [--clients 40] [--seconds 5] [--replicas 1,2,3]
        [--stop-seconds 3] [--rounds 2] [--proxy auto|haproxy|python] [--code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.helpers.postgres import find_bindir, fresh_database, throwaway_server  # noqa: E402

AGENT = ROOT / "bench" / "agents" / "sdk_agent.py"
URL_LINE = re.compile(r"acp: serving .* at (http://\S+)")
INIT = {"protocolVersion": 2, "info": {"name": "scale-bench", "version": "0"}, "capabilities": {}}
CWD = tempfile.mkdtemp(prefix="acp-scale-workspace-")  # the sessions' cwd and the replicas' workspace (empty)
BUSY = -32002  # the session is active elsewhere (the replica that had it has not let it go yet)


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- processes ---------------------------------------------------------------------------------------------------


@dataclass
class Replica:
    """One ``serve`` process on a fixed port (a restarted replica comes back on the same one)."""

    store: str
    port: int
    code: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    def start(self) -> None:
        command = [sys.executable, "-m", "acp_agent", "serve", str(AGENT), "--port", str(self.port), "--workspace",
                   CWD, "--max-connections", "5000", "--store", self.store]
        env = {**os.environ, "PYTHONPATH": str(self.code)}
        self.proc = subprocess.Popen(command, cwd=CWD, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        assert self.proc.stderr is not None
        said = []
        for line in self.proc.stderr:
            said.append(line.decode(errors="replace"))
            if URL_LINE.search(said[-1]):
                break
        else:
            raise RuntimeError(f"serve --store {self.store.split(':')[0]} did not start:\n{''.join(said)[-2000:]}")
        # Keep reading its stderr (a full pipe would stop it); show what it logs above INFO.
        threading_drain(self.proc)

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signum)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()


def threading_drain(proc: subprocess.Popen[bytes]) -> None:
    import threading

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            text = line.decode(errors="replace").rstrip()
            if " ERROR " in text or "Traceback" in text:
                print(f"  [replica {proc.pid}] {text}", file=sys.stderr)

    threading.Thread(target=drain, daemon=True).start()


@contextlib.contextmanager
def proxy(kind: str, backends: list[int]) -> Iterator[tuple[str, str]]:
    """A round-robin proxy to ``backends`` without affinity; yields its ws:// URL and what it is."""
    port = free_port()
    haproxy = shutil.which("haproxy") if kind in ("auto", "haproxy") else None
    if kind == "haproxy" and haproxy is None:
        raise SystemExit("--proxy haproxy: haproxy is not installed")
    with tempfile.TemporaryDirectory(prefix="acp-scale-") as tmp:
        if haproxy is not None:
            servers = "\n".join(f"    server r{i} 127.0.0.1:{p} check inter 200 fall 1 rise 1"
                                for i, p in enumerate(backends))
            config = Path(tmp) / "haproxy.cfg"
            config.write_text(f"""global
    maxconn 4000
defaults
    mode http
    option http-no-delay
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
frontend acp
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    retries 3
    option redispatch
{servers}
""")
            command = [haproxy, "-db", "-f", str(config)]
            what = "HAProxy (mode http, option http-no-delay, balance roundrobin)"
        else:
            command = [sys.executable, __file__, "--serve-proxy", str(port), *map(str, backends)]
            what = "Python TCP proxy (round robin, next backend on a refused connection)"
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the proxy did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.05)
            yield f"ws://127.0.0.1:{port}/acp", what
        finally:
            proc.terminate()
            proc.wait(10)


async def serve_proxy(port: int, backends: list[int]) -> None:
    """The Python proxy: each connection to the next backend in turn (the one after, if that refuses)."""
    turn = itertools.cycle(range(len(backends)))

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError, ConnectionError):
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in backends:
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", backends[next(turn)]), 1)
            except (OSError, TimeoutError):
                continue
            for sock in (writer.get_extra_info("socket"), up_writer.get_extra_info("socket")):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            return
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


# -- clients -----------------------------------------------------------------------------------------------------


class Broken(Exception):
    """The connection failed, timed out or was refused: reconnect."""


class Connection:
    """One ACP connection over WebSocket: requests by id, turn ends by their ``idle``."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count()
        self.answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.idle: asyncio.Future[dict[str, Any]] | None = None
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str, timeout: float) -> Connection:
        try:
            ws = await connect(url, open_timeout=timeout, max_size=None, compression=None, ping_interval=None)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise Broken(str(exc)) from exc
        return cls(ws)

    async def _read(self) -> None:
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                message = orjson.loads(raw)
                if "id" in message and "method" not in message:
                    future = self.answers.pop(message["id"], None)
                    if future is not None and not future.done():
                        future.set_result(message)
                    continue
                update = message.get("params", {}).get("update", {})
                if (update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
                        and "stopReason" in update and self.idle is not None and not self.idle.done()):
                    self.idle.set_result(update)
        for future in [*self.answers.values(), self.idle]:
            if future is not None and not future.done():
                future.set_exception(Broken("connection closed"))
                future.exception()  # retrieved here too: no warning if nobody awaits it any more

    async def call(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        request_id = next(self.ids)
        future = self.answers[request_id] = asyncio.get_running_loop().create_future()
        try:
            request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            await self.ws.send(orjson.dumps(request).decode())  # a text frame
            return await asyncio.wait_for(future, timeout)
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise Broken(f"{method}: {exc!r}") from exc

    async def turn(self, sid: str, text: str, timeout: float) -> tuple[str, str]:
        """One prompt to its ``idle``: the user message's id and the stop reason."""
        self.idle = asyncio.get_running_loop().create_future()
        answer = await self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
                                 timeout)
        if "error" in answer:
            raise Broken(f"prompt: {answer['error']}")
        try:
            idle = await asyncio.wait_for(self.idle, timeout)
        except TimeoutError as exc:
            raise Broken("no idle") from exc
        return str(answer["result"]["messageId"]), str(idle["stopReason"])

    async def close(self) -> None:
        self.reader.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), 0.5)


@dataclass
class Load:
    """What the clients measured: each acknowledged turn (when, how long, which message) and each break."""

    acked: list[tuple[float, float, str, str]] = field(default_factory=list)  # (end, latency, session, messageId)
    breaks: list[tuple[int, float]] = field(default_factory=list)  # (client, when its connection broke)
    resumed: list[tuple[int, float]] = field(default_factory=list)  # (client, first ack after a break)
    errors: int = 0  # turns that ended with another stop reason than end_turn

    def window(self, start: float, end: float) -> tuple[float, float, float, int]:
        """turns/s, p50 and p99 in ms of the turns that ended in [start, end), and how many."""
        lat = sorted(latency for at, latency, _, _ in self.acked if start <= at < end)
        if not lat:
            return 0.0, float("nan"), float("nan"), 0
        return len(lat) / (end - start), lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3, len(lat)

    def failover(self, at: float, within: float) -> tuple[list[float], int]:
        """For each client cut off at most ``within`` s after ``at`` that got a turn through again: seconds from
        ``at`` to its next ack; and how many clients were cut off."""
        times, cut = [], 0
        for client, broke in self.breaks:
            if at <= broke < at + within:
                cut += 1
                later = [t for c, t in self.resumed if c == client and t > broke]
                if later:
                    times.append(min(later) - at)
        return times, cut


async def client(number: int, url: str, stop: asyncio.Event, load: Load, timeout: float) -> None:
    sid: str | None = None
    broke: float | None = None
    serial = itertools.count()
    while not stop.is_set():
        conn: Connection | None = None
        try:
            conn = await Connection.open(url, timeout)
            await conn.call("initialize", INIT, timeout)
            if sid is None:
                sid = str((await conn.call("session/new", {"cwd": CWD}, timeout))["result"]["sessionId"])
            else:
                answer = await conn.call("session/resume", {"sessionId": sid, "cwd": CWD}, timeout)
                if "error" in answer:
                    raise Broken(f"resume: {answer['error'].get('code')}")
            while not stop.is_set():
                began = time.perf_counter()
                message_id, stop_reason = await conn.turn(sid, f"echo c{number}-{next(serial)}", timeout)
                ended = time.perf_counter()
                if stop_reason != "end_turn":
                    load.errors += 1
                    continue
                load.acked.append((ended, ended - began, sid, message_id))
                if broke is not None:
                    load.resumed.append((number, ended))
                    broke = None
        except Broken:
            if broke is None and sid is not None:
                broke = time.perf_counter()
                load.breaks.append((number, broke))
            await asyncio.sleep(0.02)
        finally:
            if conn is not None:
                await conn.close()


async def run_load(url: str, clients: int, timeout: float, script: list[tuple[float, Any]]) -> tuple[Load, float]:
    """Run ``clients`` against ``url`` while ``script`` runs: (delay, action) pairs, each action called (in a
    thread) after its delay; returns the load and the start time."""
    load, stop = Load(), asyncio.Event()
    tasks = [asyncio.create_task(client(i, url, stop, load, timeout)) for i in range(clients)]
    start = time.perf_counter()
    for delay, action in script:
        await asyncio.sleep(delay)
        if action is not None:
            await asyncio.to_thread(action)  # off the clients' event loop (a restart blocks a while)
    stop.set()
    await asyncio.wait(tasks, timeout=timeout * 3 + 5)
    return load, start


def lost_turns(dsn: str, load: Load) -> tuple[int, int]:
    """How many acknowledged turns the database misses, and how many were acknowledged."""
    import psycopg

    with psycopg.connect(dsn) as db:
        stored = {(sid, orjson.loads(item).get("messageId")) for sid, item in
                  db.execute("SELECT session_id, item FROM acp_history WHERE kind = 'UserMessage'")}
    acked = {(sid, mid) for _, _, sid, mid in load.acked}
    return len(acked - stored), len(acked)


# -- the sections ------------------------------------------------------------------------------------------------


def store_section(args: argparse.Namespace, conninfo: str, tmp: Path) -> None:
    print(f"\n## One replica: PostgreSQL store against SQLite store ({args.clients} WebSocket clients, "
          f"{args.seconds:g} s per run, {args.rounds} rounds)\n")
    print("| round | store | turns/s | p50 ms | p99 ms | turns | replica CPU ms/turn | lost |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    totals: dict[str, list[float]] = {"postgres": [], "sqlite": []}
    for round_ in range(1, args.rounds + 1):
        for kind in ("postgres", "sqlite"):
            dsn = fresh_database(conninfo, f"store_{round_}_{os.getpid()}") if kind == "postgres" else ""
            store = f"postgres:{dsn}" if kind == "postgres" else f"sqlite:{tmp / f'store-{round_}.sqlite3'}"
            replica = Replica(store, free_port(), args.code)
            replica.start()
            assert replica.proc is not None
            try:
                before = cpu_seconds(replica.proc.pid)
                load, start = asyncio.run(run_load(replica.url, args.clients, args.timeout,
                                                   [(args.warmup + args.seconds, None)]))
                cpu = cpu_seconds(replica.proc.pid) - before
            finally:
                replica.stop()
            rate, p50, p99, count = load.window(start + args.warmup, start + args.warmup + args.seconds)
            lost = lost_turns(dsn, load)[0] if kind == "postgres" else 0
            totals[kind].append(rate)
            per_turn = cpu / len(load.acked) * 1e3 if load.acked else float("nan")
            print(f"| {round_} | {kind} | {rate:,.0f} | {p50:.1f} | {p99:.1f} | {count:,} | {per_turn:.2f} | {lost} |",
                  flush=True)
            args.lost += lost
    pg, lite = statistics.mean(totals["postgres"]), statistics.mean(totals["sqlite"])
    if lite:
        print(f"\nmean: PostgreSQL {pg:,.0f} turns/s, SQLite {lite:,.0f} turns/s: PostgreSQL/SQLite = "
              f"{pg / lite:.2f}")


def failover_run(args: argparse.Namespace, conninfo: str, count: int) -> tuple[Any, ...]:
    """``count`` replicas behind the proxy: steady load, then (two or more) a SIGKILL and a SIGSTOP."""
    dsn = fresh_database(conninfo, f"scale_{count}_{os.getpid()}")
    replicas = [Replica(f"postgres:{dsn}", free_port(), args.code) for _ in range(count)]
    marks: dict[str, float] = {}

    def kill() -> None:
        marks["kill"] = time.perf_counter()
        replicas[0].signal(signal.SIGKILL)

    def restart() -> None:  # back on its port, so the next phase has as many replicas
        assert replicas[0].proc is not None
        replicas[0].proc.wait()
        replicas[0].start()

    def freeze() -> None:
        marks["stop"] = time.perf_counter()
        replicas[1].signal(signal.SIGSTOP)

    def thaw() -> None:
        replicas[1].signal(signal.SIGCONT)

    script: list[tuple[float, Any]] = [(args.warmup + args.seconds, None)]
    if count >= 2:
        script += [(0, kill), (args.stop_seconds + 3.0, restart), (1.0, freeze), (args.stop_seconds, thaw),
                   (6.0, None)]
    for replica in replicas:
        replica.start()
    try:
        with proxy(args.proxy, [r.port for r in replicas]) as (url, what):
            load, start = asyncio.run(run_load(url, args.clients, args.timeout, script))
    finally:
        for replica in replicas:
            replica.stop()
    rate, p50, p99, _ = load.window(start + args.warmup, start + args.warmup + args.seconds)
    killed = load.failover(marks["kill"], 1.0) if "kill" in marks else ([], 0)
    stopped = load.failover(marks["stop"], args.timeout + 1.0) if "stop" in marks else ([], 0)
    lost, acked = lost_turns(dsn, load)
    args.lost += lost
    return what, count, rate, p50, p99, killed, stopped, lost, acked


def scale_section(args: argparse.Namespace, conninfo: str) -> None:
    print(f"\n## Replicas on one PostgreSQL behind a round-robin proxy ({args.clients} WebSocket clients; "
          f"steady {args.seconds:g} s; SIGSTOP held {args.stop_seconds:g} s)\n")
    rows = [failover_run(args, conninfo, count) for count in args.replicas]
    print(f"proxy: {rows[0][0]}\n")
    print("| replicas | turns/s | p50 ms | p99 ms | failover after SIGKILL: median / max s (back / cut off) "
          "| after SIGSTOP | lost / acknowledged |")
    print("|---:|---:|---:|---:|---|---|---|")

    def failover(result: tuple[list[float], int]) -> str:
        times, cut = result
        if not cut:
            return "—"
        return f"{statistics.median(times):.2f} / {max(times):.2f} ({len(times)} / {cut})" if times else f"(0 / {cut})"

    for _, count, rate, p50, p99, killed, stopped, lost, acked in rows:
        print(f"| {count} | {rate:,.0f} | {p50:.1f} | {p99:.1f} | {failover(killed)} | {failover(stopped)} "
              f"| {lost} / {acked:,} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="store,scale", help="sections to run: store, scale")
    parser.add_argument("--clients", type=int, default=40, help="concurrent WebSocket clients")
    parser.add_argument("--seconds", type=float, default=5.0, help="steady load measured, per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring")
    parser.add_argument("--rounds", type=int, default=2, help="store section: PostgreSQL/SQLite alternations")
    parser.add_argument("--replicas", default="1,2,3", help="scale section: replica counts")
    parser.add_argument("--stop-seconds", type=float, default=3.0, help="how long a replica stays frozen")
    parser.add_argument("--timeout", type=float, default=1.0, help="a client gives up on a silent replica after")
    parser.add_argument("--proxy", default="auto", choices=["auto", "haproxy", "python"])
    parser.add_argument("--no-fsync", action="store_true", help="PostgreSQL with fsync=off (as the tests run it)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the acp-agent checkout the replicas run")
    parser.add_argument("--serve-proxy", nargs="+", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        asyncio.run(serve_proxy(args.serve_proxy[0], args.serve_proxy[1:]))
        return 0
    args.replicas = [int(n) for n in args.replicas.split(",")]
    args.code = args.code.resolve()
    args.lost = 0
    bindir = find_bindir()
    if bindir is None:
        print("bench/scale.py: no PostgreSQL server binaries (install the postgresql package); skipped")
        return 0
    settings = {"fsync": "off"} if args.no_fsync else {"fsync": "on"}
    with throwaway_server(bindir, settings=settings) as conninfo, \
            tempfile.TemporaryDirectory(prefix="acp-scale-") as tmp:
        version = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True).stdout
        print(f"{version.strip()}, fsync={settings['fsync']}; {os.cpu_count()} cores; replicas run {args.code.name}")
        sections = args.only.split(",")
        if "store" in sections:
            store_section(args, conninfo, Path(tmp))
        if "scale" in sections:
            scale_section(args, conninfo)
    if args.lost:
        print(f"\nFAILED: {args.lost} acknowledged turn(s) missing from the database", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    finally:
        shutil.rmtree(CWD, ignore_errors=True)
