"""``make bench``: acp-agent side by side with the official SDKs and two hand-written agents.

Every agent under ``bench/agents/`` serves the same workload over stdio (``stream N``, ``echo TEXT``);
this driver is the client. It launches each agent as a subprocess with pipes, checks that it answers
correctly, then measures it in several interleaved rounds (round-robin over the agents, the order
rotated each round) and prints medians with their ratio to the stdlib raw agent measured in the
same rounds. See ``bench/README.md`` for what each number means.

Run: ``make bench`` (sets up ``bench/.venv-anchors`` and ``bench/node_modules``), or directly
``.venv/bin/python bench/run.py [--rounds 5] [--quick]``. Raw data goes to
``bench/results/<timestamp>.jsonl``.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import datetime
import gc
import math
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
ANCHORS_PYTHON = BENCH / ".venv-anchors" / "bin" / "python"
TS_SDK = BENCH / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"

READ_SIZE = 1 << 20
READ_TIMEOUT = 120.0
EXIT_TIMEOUT = 10.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
ANCHOR = "raw-json"
CEILING = "raw-orjson"
FLOOR = "deps-floor"

Message = dict[str, Any]

# Agents run in the environment an editor would give them: the caller's, less the PYTHON* variables that change
# what is measured (PYTHONUNBUFFERED makes every write a syscall, PYTHONDONTWRITEBYTECODE recompiles every module
# at each start-up, PYTHONDEVMODE/PYTHONASYNCIODEBUG/PYTHONTRACEMALLOC slow everything down).
STRIPPED_ENV = sorted(name for name in os.environ if name.startswith("PYTHON"))
AGENT_ENV = {name: value for name, value in os.environ.items() if not name.startswith("PYTHON")}
# acp-agent keeps sessions in a SQLite file (its default store): in a directory of this run, not the user's.
AGENT_ENV["ACP_AGENT_DATA_DIR"] = tempfile.mkdtemp(prefix="acp-bench-data-")
atexit.register(shutil.rmtree, AGENT_ENV["ACP_AGENT_DATA_DIR"], ignore_errors=True)


class BenchError(Exception):
    """An agent misbehaved (wrong answer, early exit, timeout): the run stops, no number is printed for it."""


@dataclass(frozen=True)
class AgentSpec:
    key: str
    label: str
    argv: list[str]
    protocol: int  # 2 for ACP v2 (idle end_turn ends a turn), 1 for v1 (the prompt response ends it)


def this_checkout(argv: list[str]) -> list[str]:
    """``argv`` run with this checkout's ``acp_agent`` first on the path (not whatever the venv installed,
    e.g. another worktree's editable install); ``--baseline`` runs its checkout the same way."""
    return ["env", f"PYTHONPATH={ROOT}", *argv]


def agent_specs(python: str, anchors_python: str, node: str) -> list[AgentSpec]:
    agents = "bench/agents/"
    return [
        AgentSpec("acp-agent", "acp-agent (v2)", this_checkout([python, agents + "sdk_agent.py"]), 2),
        AgentSpec(
            "official-py", "official Python SDK 0.12.1 (v1)", [anchors_python, agents + "official_python_agent.py"], 1
        ),
        AgentSpec("ts-sdk", "TypeScript SDK 2.4.0 (v2)", [node, agents + "ts_agent.mjs"], 2),
        AgentSpec(ANCHOR, "raw stdlib json (anchor)", [python, agents + "raw_json_agent.py"], 2),
        AgentSpec(CEILING, "raw orjson", [python, agents + "raw_orjson_agent.py"], 2),
        AgentSpec(FLOOR, "dependency floor (raw orjson + deps)", [python, agents + "deps_floor_agent.py"], 2),
    ]


# --------------------------------------------------------------------------------------------------
# The client: one agent process over pipes.

RESPONSE_MARKERS = (b'"result"', b'"error"')
V2_TURN_MARKERS = (b'"idle"', b'"result"', b'"error"')


class Peer:
    """An agent subprocess and the client end of its pipes."""

    def __init__(self, spec: AgentSpec, stderr: IO[bytes]) -> None:
        self.spec = spec
        self.stderr = stderr
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            spec.argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, bufsize=0, env=AGENT_ENV
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.pid = self.proc.pid
        self._wfd = self.proc.stdin.fileno()
        self._rfd = self.proc.stdout.fileno()
        self._pending = b""
        self._next_id = 0
        self.bytes_read = 0

    def read(self) -> bytes:
        """One read of whatever the agent wrote (up to 1 MiB)."""
        if not select.select([self._rfd], [], [], READ_TIMEOUT)[0]:
            raise BenchError(f"no output for {READ_TIMEOUT:.0f} s")
        data = os.read(self._rfd, READ_SIZE)
        if not data:
            raise BenchError("the agent closed its stdout")
        return data

    def request(self, method: str, params: Message) -> int:
        self._next_id += 1
        line = orjson.dumps({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}) + b"\n"
        os.write(self._wfd, line)
        return self._next_id

    def collect(
        self, is_end: Callable[[list[Message], int], bool], markers: Sequence[bytes]
    ) -> tuple[list[Message], float]:
        """Read and parse messages until ``is_end`` says so; returns them and the arrival time of the last read.

        The hot loop: big reads, one split per read, ``orjson.loads`` per line. ``is_end`` looks at the new
        messages of a read only when one of ``markers`` occurs in its bytes.
        """
        messages: list[Message] = []
        extend = messages.extend
        loads = orjson.loads
        read = self.read
        pending = self._pending
        while True:
            data = read()
            self.bytes_read += len(data)
            buffer = pending + data if pending else data
            cut = buffer.rfind(b"\n")
            if cut < 0:
                pending = buffer
                continue
            complete = buffer[:cut]
            pending = buffer[cut + 1 :]
            start = len(messages)
            try:
                extend(map(loads, complete.split(b"\n")))
            except orjson.JSONDecodeError as exc:
                raise BenchError(f"the agent wrote a line that is not JSON: {exc}") from None
            for marker in markers:
                if marker in complete:
                    if is_end(messages, start):
                        self._pending = pending
                        return messages, time.perf_counter()
                    break

    def call(self, method: str, params: Message) -> tuple[Message, list[Message], float]:
        """Send a request and read until its response; returns the result, everything read, the arrival time."""
        request_id = self.request(method, params)
        end = TurnEnd(request_id, protocol=1)
        messages, arrived = self.collect(end, RESPONSE_MARKERS)
        assert end.response is not None
        return end.response["result"], messages, arrived

    def prompt(self, session_id: str, text: str) -> tuple[TurnEnd, list[Message], float, float]:
        """One prompt turn: returns its end, the messages, the send time and the time the turn ended."""
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        sent = time.perf_counter()
        request_id = self.request("session/prompt", params)
        end = TurnEnd(request_id, self.spec.protocol)
        messages, ended = self.collect(end, V2_TURN_MARKERS if self.spec.protocol == 2 else RESPONSE_MARKERS)
        return end, messages, sent, ended

    def close(self) -> int:
        """Close the agent's stdin and wait for it to exit; returns its exit code."""
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            code = self.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError(f"did not exit within {EXIT_TIMEOUT:.0f} s of its stdin closing") from None
        self.proc.stdout.close()  # type: ignore[union-attr]
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:]


class TurnEnd:
    """Decides when a turn is over: the response to ``request_id`` (and, in v2, an idle state_update with a
    stop reason) has arrived. Both orders are allowed; an error response fails the run."""

    def __init__(self, request_id: int, protocol: int) -> None:
        self.request_id = request_id
        self.protocol = protocol
        self.response: Message | None = None
        self.idle: Message | None = None

    def __call__(self, messages: list[Message], start: int) -> bool:
        for index in range(start, len(messages)):
            message = messages[index]
            if "method" not in message:
                if message.get("id") != self.request_id:
                    raise BenchError(f"a response to a request that was not sent: {message}")
                if "error" in message:
                    raise BenchError(f"error response: {message['error']}")
                self.response = message
            elif self.protocol == 2 and message["method"] == "session/update":
                update = message["params"]["update"]
                if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle" \
                        and update.get("stopReason") is not None:
                    self.idle = message
        return self.response is not None and (self.protocol == 1 or self.idle is not None)


def initialize_params(protocol: int) -> Message:
    if protocol == 1:
        return {"protocolVersion": 1, "clientCapabilities": {},
                "clientInfo": {"name": "acp-agent-bench", "version": "0.0.0"}}
    return {"protocolVersion": 2, "info": {"name": "acp-agent-bench", "version": "0.0.0"}, "capabilities": {}}


def new_session_params(protocol: int) -> Message:
    return {"cwd": str(ROOT), "mcpServers": []} if protocol == 1 else {"cwd": str(ROOT)}


# --------------------------------------------------------------------------------------------------
# Checks (outside every timed region).


def updates_of(messages: list[Message], session_id: str) -> list[Message]:
    updates = []
    for message in messages:
        if message.get("method") == "session/update":
            if message["params"].get("sessionId") != session_id:
                raise BenchError(f"update for another session: {message}")
            updates.append(message["params"]["update"])
        elif "method" in message:
            raise BenchError(f"unexpected message from the agent: {message}")
    return updates


def check_turn(spec: AgentSpec, end: TurnEnd, messages: list[Message], session_id: str, prompt: str) -> list[Message]:
    """Checks the turn's frame (v2: messageId answer, user_message echo, running, idle end_turn last) and
    returns its agent-message updates."""
    assert end.response is not None
    result = end.response["result"]
    updates = updates_of(messages, session_id)
    if spec.protocol == 1:
        if result.get("stopReason") != "end_turn":
            raise BenchError(f"prompt response {result}, expected stopReason end_turn")
        return [u for u in updates if u.get("sessionUpdate") in ("agent_message_chunk", "agent_message")]
    user_id = result.get("messageId")
    if not isinstance(user_id, str) or not user_id:
        raise BenchError(f"prompt response {result}, expected a messageId")
    echoes = [u for u in updates if u.get("sessionUpdate") == "user_message"]
    if len(echoes) != 1 or echoes[0].get("messageId") != user_id or echoes[0].get("content") != [
        {"type": "text", "text": prompt}
    ]:
        raise BenchError(f"expected one user_message echo with messageId {user_id!r}: {echoes}")
    states = [u for u in updates if u.get("sessionUpdate") == "state_update"]
    if not states or states[0].get("state") != "running":
        raise BenchError(f"no running state_update before the reply: {states}")
    last = updates[-1]
    if (last.get("sessionUpdate"), last.get("state"), last.get("stopReason")) != ("state_update", "idle", "end_turn"):
        raise BenchError(f"the turn did not end with idle end_turn: {last}")
    return [u for u in updates if u.get("sessionUpdate") in ("agent_message_chunk", "agent_message")]


def check_stream(spec: AgentSpec, end: TurnEnd, messages: list[Message], session_id: str, count: int) -> None:
    replies = check_turn(spec, end, messages, session_id, f"stream {count}")
    chunks = [u for u in replies if u.get("sessionUpdate") == "agent_message_chunk"]
    if len(chunks) != count or len(replies) != count:
        raise BenchError(f"stream {count}: got {len(chunks)} agent_message_chunk updates ({len(replies)} replies)")
    ids = {u.get("messageId") for u in chunks}
    if len(ids) != 1 or None in ids:
        raise BenchError(f"stream {count}: the chunks do not share one messageId: {sorted(map(str, ids))[:5]}")
    for i, update in enumerate(chunks):
        if update.get("content") != {"type": "text", "text": f"chunk {i} "}:
            raise BenchError(f"stream {count}: chunk {i} is {update.get('content')}")


def check_echo(spec: AgentSpec, end: TurnEnd, messages: list[Message], session_id: str, text: str) -> None:
    replies = check_turn(spec, end, messages, session_id, f"echo {text}")
    if len({u.get("messageId") for u in replies}) != 1:
        raise BenchError(f"echo: expected one agent message, got {replies}")
    said = ""
    for update in replies:
        content = update.get("content")
        for block in content if isinstance(content, list) else [content]:
            said += block.get("text", "") if isinstance(block, dict) else ""
    if said != text:
        raise BenchError(f"echo: the agent said {said!r}, expected {text!r}")


# --------------------------------------------------------------------------------------------------
# /proc readings.


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all threads), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of the process, in MB (10^6 bytes)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    raise BenchError("no VmHWM in /proc/<pid>/status")


# --------------------------------------------------------------------------------------------------
# Workloads.


@dataclass
class Config:
    rounds: int
    stream_n: int
    echo_n: int
    startups: int  # extra spawn -> initialize samples per agent and round, besides the full run's own
    terminal_mb: int = 0  # MB of terminal output through this driver per round (0: none)


def lockstep(peers: list[Peer], turns: int, block: int = 1) -> list[tuple[float, float]]:
    """Initialize each peer, open a session and warm it up, then run ``turns`` echo turns on all of them in
    lockstep, one peer after the other; (p50 ms, CPU ms per turn) per peer. Closes the peers.

    The order rotates every pass (``0 1 2``, ``1 2 0``, ``2 0 1``, ...): with three or more peers none serves two
    passes' turns in a row, so each pass's first turn follows another peer's for every peer alike (two peers
    alternate ``0 1``, ``1 0``: each follows itself at every other switch, both equally). With ``block`` > 1 each
    peer serves ``block`` turns back to back before the next one takes over, and the first turn of each block, the
    one that starts cold, is left out of the p50: the back-to-back turns ``bench/run.py`` times, with the
    machine's load still hitting every peer alike. Each peer serves ``turns`` rounded up to whole blocks."""
    try:
        sessions = []
        for peer in peers:
            peer.call("initialize", initialize_params(peer.spec.protocol))
            sessions.append(peer.call("session/new", new_session_params(peer.spec.protocol))[0]["sessionId"])
            for _ in range(50):
                peer.prompt(sessions[-1], "echo warm")
        times: list[list[float]] = [[] for _ in peers]
        start = [cpu_seconds(peer.pid) for peer in peers]
        order = list(range(len(peers)))
        passes = max(1, -(-turns // block))
        for i in range(passes):
            shift = i % len(order)
            for k in order[shift:] + order[:shift]:
                for j in range(block):
                    _, _, sent, ended = peers[k].prompt(sessions[k], f"echo ping {i}")
                    if j or block == 1:
                        times[k].append(ended - sent)
        spent = [cpu_seconds(peer.pid) - s for peer, s in zip(peers, start, strict=True)]
        for k, peer in enumerate(peers):  # checked outside the timed turns
            end, messages, _, _ = peer.prompt(sessions[k], "echo check")
            check_echo(peer.spec, end, messages, sessions[k], "check")
    finally:
        for peer in peers:
            peer.close()
    served = passes * block
    return [(statistics.median(t) * 1e3, s / served * 1e3) for t, s in zip(times, spent, strict=True)]


INTERLEAVED_BLOCK = 20
"""Echo turns each agent serves back to back in the interleaved comparison (the first of each block left out)."""
OFFICIAL = ("official-py", "ts-sdk")


def lockstep_agents(specs: list[AgentSpec], turns: int, block: int = 1) -> dict[str, tuple[float, float]]:
    """Start the agents of ``specs`` and run :func:`lockstep` on them; (p50 ms, CPU ms per turn) per agent key.

    ``make bench`` uses it for the interleaved echo comparison (``block`` :data:`INTERLEAVED_BLOCK`): the rounds
    time each agent's echoes seconds apart, so a load change between two agents' echo phases moves their ratio by
    tens of percent; here the load hits every agent alike, block by block."""
    with contextlib.ExitStack() as files:
        peers: list[Peer] = []
        try:
            for spec in specs:
                peers.append(Peer(spec, files.enter_context(tempfile.TemporaryFile())))
        except BaseException:
            for peer in peers:
                peer.kill()
            raise
        results = lockstep(peers, turns, block)
    return {spec.key: result for spec, result in zip(specs, results, strict=True)}


def full_run(spec: AgentSpec, config: Config) -> Message:
    """One agent process: start-up, warm-up, the stream workload, the echo workload, clean exit."""
    with tempfile.TemporaryFile() as stderr:
        peer = Peer(spec, stderr)
        try:
            result, _, arrived = peer.call("initialize", initialize_params(spec.protocol))
            startup_ms = (arrived - peer.spawned) * 1e3
            if result.get("protocolVersion") != spec.protocol:
                raise BenchError(f"initialize answered {result}")
            session, _, _ = peer.call("session/new", new_session_params(spec.protocol))
            session_id = session["sessionId"]

            # Warm-up (lazily built validators, JIT): the first prompt is reported, not compared.
            end, messages, sent, ended = peer.prompt(session_id, "echo warm-up")
            check_echo(spec, end, messages, session_id, "warm-up")
            first_prompt_ms = (ended - sent) * 1e3
            end, messages, _, _ = peer.prompt(session_id, "stream 1000")
            check_stream(spec, end, messages, session_id, 1000)

            bytes_before = peer.bytes_read
            cpu_before = cpu_seconds(peer.pid)
            end, messages, sent, ended = peer.prompt(session_id, f"stream {config.stream_n}")
            cpu_after = cpu_seconds(peer.pid)
            rss_mb = peak_rss_mb(peer.pid)
            check_stream(spec, end, messages, session_id, config.stream_n)
            stream_s = ended - sent
            stream_bytes = peer.bytes_read - bytes_before

            echoes: list[float] = []
            echo_cpu_before = cpu_seconds(peer.pid)
            for i in range(config.echo_n):
                text = f"ping {i}"
                end, messages, sent, ended = peer.prompt(session_id, f"echo {text}")
                echoes.append(ended - sent)
                check_echo(spec, end, messages, session_id, text)
            echo_cpu = cpu_seconds(peer.pid) - echo_cpu_before
            peak_mb = peak_rss_mb(peer.pid)  # the whole run's peak: a session's history grows with every turn
            exit_code = peer.close()
            if exit_code != 0:
                raise BenchError(f"exit code {exit_code}")
        except BaseException as exc:
            peer.kill()
            if isinstance(exc, BenchError | OSError):
                raise BenchError(f"{spec.key}: {exc}\n--- agent stderr ---\n{peer.stderr_tail()}") from None
            raise
    echoes.sort()
    return {
        "startup_ms": startup_ms,
        "first_prompt_ms": first_prompt_ms,
        "stream_n": config.stream_n,
        "stream_s": stream_s,
        "stream_notif_per_s": config.stream_n / stream_s,
        "stream_bytes": stream_bytes,
        "stream_cpu_s": cpu_after - cpu_before,
        "cpu_us_per_notif": (cpu_after - cpu_before) / config.stream_n * 1e6,
        "peak_rss_mb": peak_mb,
        "rss_after_stream_mb": rss_mb,
        "echo_n": config.echo_n,
        "echo_p50_ms": statistics.median(echoes) * 1e3,
        "echo_p99_ms": percentile(echoes, 99) * 1e3,
        "echo_cpu_ms_per_prompt": echo_cpu / config.echo_n * 1e3,
        "echo_ms": [round(t * 1e3, 4) for t in echoes],
    }


def startup_only(spec: AgentSpec) -> float:
    """Spawn -> initialize response, in ms; then a clean exit."""
    with tempfile.TemporaryFile() as stderr:
        peer = Peer(spec, stderr)
        try:
            _, _, arrived = peer.call("initialize", initialize_params(spec.protocol))
            code = peer.close()
            if code != 0:
                raise BenchError(f"exit code {code}")
        except BaseException as exc:
            peer.kill()
            if isinstance(exc, BenchError | OSError):
                raise BenchError(f"{spec.key}: {exc}\n--- agent stderr ---\n{peer.stderr_tail()}") from None
            raise
    return (arrived - peer.spawned) * 1e3


class TerminalEnd:
    """The end of a ``/bg`` command: the ``terminal_update`` that carries its ``exitStatus``."""

    def __call__(self, messages: list[Message], start: int) -> bool:
        for index in range(start, len(messages)):
            message = messages[index]
            if "error" in message:
                raise BenchError(f"error response: {message['error']}")
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") == "terminal_update" and "exitStatus" in update:
                return True
        return False


def terminal_run(python: str, megabytes: int) -> Message:
    """Terminal output through this driver: ``examples/background_agent.py`` runs ``/bg head -c N /dev/zero``;
    MB/s from the prompt to the ``exitStatus`` update, chunks, the agent's CPU; every byte is checked after."""
    spec = AgentSpec("background-agent", "examples/background_agent.py",
                     this_checkout([python, "examples/background_agent.py"]), 2)
    size = megabytes * 1_000_000
    with tempfile.TemporaryFile() as stderr:
        peer = Peer(spec, stderr)
        try:
            peer.call("initialize", initialize_params(2))
            session, _, _ = peer.call("session/new", new_session_params(2))
            session_id = session["sessionId"]

            def command(text: str) -> tuple[list[Message], float, float]:
                params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
                sent = time.perf_counter()
                peer.request("session/prompt", params)
                messages, ended = peer.collect(TerminalEnd(), (b'"exitStatus"', b'"error"'))
                return messages, sent, ended

            command("/bg head -c 1000000 /dev/zero")  # warm-up
            cpu_before = cpu_seconds(peer.pid)
            messages, sent, ended = command(f"/bg head -c {size} /dev/zero")
            cpu = cpu_seconds(peer.pid) - cpu_before
            peer.close()
        except BaseException as exc:
            peer.kill()
            if isinstance(exc, BenchError | OSError):
                raise BenchError(f"{spec.key}: {exc}\n--- agent stderr ---\n{peer.stderr_tail()}") from None
            raise
    received = chunks = 0
    for message in messages:
        update = (message.get("params") or {}).get("update") or {}
        if update.get("sessionUpdate") == "terminal_output_chunk":
            received += len(base64.b64decode(update["data"]))
            chunks += 1
    if received != size:
        raise BenchError(f"terminal output: {received} bytes arrived, expected {size}")
    seconds = ended - sent
    return {"mb": megabytes, "seconds": seconds, "mb_per_s": size / 1e6 / seconds, "chunks": chunks,
            "agent_cpu_s": cpu}


def client_ceiling(count: int) -> float:
    """Notifications/s of the client loop alone: ``count`` pre-made chunk lines parsed from memory, fed in
    64 KiB reads (a pipe's buffer) through the same ``Peer.collect``."""
    lines = [
        orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess_1", "update": {
            "sessionUpdate": "agent_message_chunk", "messageId": "msg_3",
            "content": {"type": "text", "text": f"chunk {i} "}}}})
        for i in range(count)
    ]
    lines.append(orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess_1",
                 "update": {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}}}))
    lines.append(orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"messageId": "msg_user_2"}}))
    data = b"\n".join(lines) + b"\n"
    peer = MemoryPeer([data[i : i + 65536] for i in range(0, len(data), 65536)])
    start = time.perf_counter()
    messages, ended = peer.collect(TurnEnd(1, protocol=2), V2_TURN_MARKERS)
    if len(messages) != count + 2:
        raise BenchError(f"client ceiling: parsed {len(messages)} messages, expected {count + 2}")
    return count / (ended - start)


class MemoryPeer(Peer):
    """``Peer.collect`` fed from pre-cut reads in memory instead of a pipe."""

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = iter(reads)
        self._pending = b""
        self.bytes_read = 0

    def read(self) -> bytes:
        data = next(self._reads, b"")
        if not data:
            raise BenchError("client ceiling: out of data")
        return data


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


# --------------------------------------------------------------------------------------------------
# The other bench scripts.

TERMINAL_RE = re.compile(r"terminal output: (\d+) MB in ([\d.]+) s = ([\d.]+) MB/s, (\d+) chunks")


def run_script(python: str, args: list[str]) -> str:
    completed = subprocess.run(this_checkout([python, *args]), cwd=ROOT, capture_output=True, text=True,
                               timeout=1200, env=AGENT_ENV)
    if completed.returncode != 0:
        raise BenchError(f"{' '.join(args)} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}")
    return completed.stdout


# --------------------------------------------------------------------------------------------------
# Reporting.


def command_output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "?"


def machine_info(python: str, anchors_python: str, node: str) -> Message:
    model = "?"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": command_output(["nproc"]),
        "machine": platform.machine(),
        "cpu": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "anchors_python": command_output([anchors_python, "-c", "import platform; print(platform.python_version())"]),
        "node": command_output([node, "--version"]),
        "loadavg_start": os.getloadavg(),
        "stripped_env": STRIPPED_ENV,
        "git": command_output(["git", "-C", str(ROOT), "describe", "--always", "--dirty"]),
    }


def ratio(value: float, anchor: float) -> float:
    return value / anchor if anchor else float("nan")


def summarize(specs: list[AgentSpec], runs: list[Message], startups: list[Message]) -> dict[str, Message]:
    """Per agent: medians of the rounds, and the median of the per-round ratios to the anchor."""
    rounds = sorted({run["round"] for run in runs})
    by: dict[tuple[str, int], Message] = {(run["agent"], run["round"]): run for run in runs}
    startup_by: dict[tuple[str, int], list[float]] = {}
    for sample in startups:
        startup_by.setdefault((sample["agent"], sample["round"]), []).append(sample["startup_ms"])

    def per_round(key: str, metric: str) -> list[float]:
        if metric == "startup_ms":
            return [statistics.median(startup_by[key, r]) for r in rounds]
        return [by[key, r][metric] for r in rounds]

    summary: dict[str, Message] = {}
    metrics = ["startup_ms", "stream_notif_per_s", "cpu_us_per_notif", "echo_p50_ms", "echo_p99_ms", "peak_rss_mb",
               "first_prompt_ms", "echo_cpu_ms_per_prompt"]
    for spec in specs:
        row: Message = {"label": spec.label}
        for metric in metrics:
            values = per_round(spec.key, metric)
            anchors = per_round(ANCHOR, metric)
            row[metric] = statistics.median(values)
            row[metric + "_ratio"] = statistics.median(ratio(v, a) for v, a in zip(values, anchors, strict=True))
        summary[spec.key] = row
    return summary


def cross_ratio(runs: list[Message], metric: str, key: str, other: str) -> float:
    by = {(run["agent"], run["round"]): run[metric] for run in runs}
    rounds = sorted({run["round"] for run in runs})
    return statistics.median(ratio(by[key, r], by[other, r]) for r in rounds)


def startup_ratio(startups: list[Message], key: str, other: str) -> float:
    per: dict[tuple[str, int], list[float]] = {}
    for sample in startups:
        per.setdefault((sample["agent"], sample["round"]), []).append(sample["startup_ms"])
    rounds = sorted({r for _, r in per})
    return statistics.median(ratio(statistics.median(per[key, r]), statistics.median(per[other, r])) for r in rounds)


COLUMNS = [
    ("start-up ms", "startup_ms", "{:.1f}"),
    ("stream notif/s", "stream_notif_per_s", "{:,.0f}"),
    ("CPU µs/notif", "cpu_us_per_notif", "{:.2f}"),
    ("echo p50 ms", "echo_p50_ms", "{:.3f}"),
    ("echo p99 ms", "echo_p99_ms", "{:.3f}"),
    ("peak RSS MB", "peak_rss_mb", "{:.1f}"),
]


def table(specs: list[AgentSpec], summary: dict[str, Message]) -> str:
    header = "| agent | " + " | ".join(name for name, _, _ in COLUMNS) + " |"
    lines = [header, "|---|" + "---:|" * len(COLUMNS)]
    for spec in specs:
        row = summary[spec.key]
        cells = [f"{fmt.format(row[metric])} ({row[metric + '_ratio']:.2f}x)" for _, metric, fmt in COLUMNS]
        lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


# --------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--stream", type=int, default=20000, help="chunks in the stream workload (default 20000)")
    parser.add_argument("--echo", type=int, default=300, help="sequential echo prompts per round (default 300)")
    parser.add_argument("--startups", type=int, default=2,
                        help="extra spawn->initialize samples per agent and round (default 2)")
    parser.add_argument("--bg-runs", type=int, default=3, help="runs of background_bench.py (default 3)")
    parser.add_argument("--mb", type=int, default=100,
                        help="MB of terminal output, per round through this driver and for background_bench.py")
    parser.add_argument("--echo-reps", type=int, default=3,
                        help="repetitions of the interleaved echo comparison of acp-agent and the official SDKs, "
                             "--echo x2 turns each (default 3; 0 skips it)")
    parser.add_argument("--remote-blocks", type=int, default=15,
                        help="blocks of 20 echo turns per server and transport for bench/remote_latency.py (default "
                             "15; 0 skips it)")
    parser.add_argument("--only", help="comma-separated agent keys (the anchor is always included)")
    parser.add_argument("--skip-scripts", action="store_true",
                        help="do not run dispatch_overhead.py, background_bench.py, v1_terminal.py and "
                             "remote_latency.py")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 rounds, small workloads, no scripts, no interleaved echo comparison")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also run acp-agent from another checkout (e.g. `git worktree add /tmp/base main`) in "
                             "the same rounds, as `acp-agent-baseline`: a before/after comparison under equal noise")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.stream, args.echo, args.startups, args.skip_scripts, args.mb = 2, 2000, 30, 0, True, 10
        args.echo_reps = 0

    python = sys.executable
    node = shutil.which("node") or "node"
    missing = []
    if not ANCHORS_PYTHON.exists():
        missing.append(f"{ANCHORS_PYTHON.relative_to(ROOT)} (run `make bench`, which creates it)")
    if not TS_SDK.exists():
        missing.append("bench/node_modules (run `make bench`, which runs `npm ci` in bench/)")
    if missing:
        print("missing: " + "; ".join(missing), file=sys.stderr)
        return 2
    specs = agent_specs(python, str(ANCHORS_PYTHON), node)
    if args.baseline:
        base = Path(args.baseline).resolve()
        specs.insert(1, AgentSpec("acp-agent-baseline", f"acp-agent (v2) at {base.name}",
                                  ["env", f"PYTHONPATH={base}", python, str(base / "bench/agents/sdk_agent.py")], 2))
    if args.only:
        wanted = set(args.only.split(",")) | {ANCHOR}
        specs = [spec for spec in specs if spec.key in wanted]
    config = Config(rounds=args.rounds, stream_n=args.stream, echo_n=args.echo, startups=args.startups,
                    terminal_mb=args.mb if "acp-agent" in {spec.key for spec in specs} else 0)

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_path = RESULTS / f"{stamp}.jsonl"
    records: list[Message] = []
    machine = machine_info(python, str(ANCHORS_PYTHON), node)
    records.append({"kind": "meta", **machine, "config": vars(config),
                    "agents": {spec.key: {"label": spec.label, "argv": spec.argv, "protocol": spec.protocol}
                               for spec in specs}})
    print(f"acp-agent bench, {machine['date']}: {machine['nproc']} cores {machine['machine']} ({machine['cpu']}), "
          f"Python {machine['python']}, Node {machine['node']}")
    print(f"{config.rounds} interleaved rounds; stream {config.stream_n}, echo x{config.echo_n}, "
          f"start-up {1 + config.startups} samples per agent and round")
    if STRIPPED_ENV:
        print(f"agents run without {', '.join(STRIPPED_ENV)} (set in this environment)")

    # The driver keeps every message of a workload for the checks: no cyclic GC passes over them while timing
    # (everything is freed by reference counting; a collection runs between agents).
    gc.disable()
    try:
        # Correctness first (and warm caches: .pyc files, the page cache).
        print("checking each agent ...", end="", flush=True)
        quick = Config(rounds=1, stream_n=1000, echo_n=5, startups=0)
        for spec in specs:
            full_run(spec, quick)
            print(f" {spec.key} ok", end="", flush=True)
        print()

        runs: list[Message] = []
        startups: list[Message] = []
        ceilings: list[float] = []
        terminals: list[Message] = []
        for round_index in range(config.rounds):
            shift = round_index % len(specs)
            order = specs[shift:] + specs[:shift]
            for spec in order:
                gc.collect()
                run = {"kind": "run", "round": round_index, "agent": spec.key, **full_run(spec, config)}
                runs.append(run)
                records.append(run)
                startups.append({"kind": "startup", "round": round_index, "agent": spec.key,
                                 "startup_ms": run["startup_ms"]})
            for _ in range(config.startups):
                for spec in order:
                    sample = {"kind": "startup", "round": round_index, "agent": spec.key,
                              "startup_ms": startup_only(spec)}
                    startups.append(sample)
            if config.terminal_mb:
                gc.collect()
                terminal = terminal_run(python, config.terminal_mb)
                terminals.append(terminal)
                records.append({"kind": "terminal", "round": round_index, **terminal})
            gc.collect()
            ceiling = client_ceiling(config.stream_n)
            ceilings.append(ceiling)
            records.extend(s for s in startups if s["round"] == round_index)
            records.append({"kind": "client_ceiling", "round": round_index, "notif_per_s": ceiling})
            print(f"  round {round_index + 1}/{config.rounds}: " + ", ".join(
                f"{run['agent']} {run['stream_notif_per_s']:,.0f}/s" for run in runs if run["round"] == round_index))
        compared = [spec for spec in specs if spec.key == "acp-agent" or spec.key in OFFICIAL]
        interleaved: list[dict[str, tuple[float, float]]] = []
        if args.echo_reps > 0 and config.echo_n > 0 and len(compared) > 1 and "acp-agent" in {s.key for s in compared}:
            for rep in range(args.echo_reps):
                gc.collect()
                interleaved.append(lockstep_agents(compared, 2 * config.echo_n, INTERLEAVED_BLOCK))
                records.append({"kind": "echo_interleaved", "rep": rep, "block": INTERLEAVED_BLOCK,
                                "turns": 2 * config.echo_n, "agents": interleaved[-1]})
                print(f"  interleaved echo {rep + 1}/{args.echo_reps}: " + ", ".join(
                    f"{key} p50 {p50:.3f} ms" for key, (p50, _) in interleaved[-1].items()))
    except BenchError as exc:
        gc.enable()
        print(f"\nFAILED: {exc}", file=sys.stderr)
        records.append({"kind": "failure", "error": str(exc)})
        write_records(out_path, records)
        return 1

    gc.enable()
    summary = summarize(specs, runs, startups)
    records.append({"kind": "summary", "agents": summary, "client_ceiling_notif_per_s": statistics.median(ceilings)})
    print()
    print(f"Medians of {config.rounds} interleaved rounds; (x) = median per-round ratio to the raw stdlib json agent.")
    print(table(specs, summary))
    print(f"client-only ceiling: the driver parses {statistics.median(ceilings):,.0f} notif/s from memory "
          f"({config.stream_n} pre-made chunk lines); a stream rate near it is capped by the client, not the agent")
    first = ", ".join(f"{spec.key} {summary[spec.key]['first_prompt_ms']:.1f}" for spec in specs)
    print(f"first prompt after start-up (echo, not in the table), ms: {first}")
    echo_cpu = ", ".join(f"{spec.key} {summary[spec.key]['echo_cpu_ms_per_prompt']:.3f}" for spec in specs)
    print(f"agent CPU per echo round trip (not in the table), ms: {echo_cpu}")

    if terminals:
        mb_s = statistics.median(t["mb_per_s"] for t in terminals)
        cpu_per_mb = statistics.median(t["agent_cpu_s"] / t["mb"] * 1e3 for t in terminals)
        chunk_kib = statistics.median(t["mb"] * 1e6 / t["chunks"] / 1024 for t in terminals)
        print(f"terminal output through this driver (examples/background_agent.py, /bg head -c {config.terminal_mb} MB,"
              f" median of {len(terminals)}): {mb_s:.1f} MB/s, {chunk_kib:.0f} KiB per chunk, "
              f"agent CPU {cpu_per_mb:.1f} ms/MB")

    targets: list[Message] = []
    keys = {spec.key for spec in specs}
    if interleaved:
        others = [key for key in interleaved[0] if key != "acp-agent"]
        cells = [f"acp-agent {statistics.median(r['acp-agent'][0] for r in interleaved):.3f}"]
        for key in others:
            p50 = statistics.median(r[key][0] for r in interleaved)
            ratio = statistics.median(r["acp-agent"][0] / r[key][0] for r in interleaved)
            cells.append(f"{key} {p50:.3f} (acp-agent / it {ratio:.2f}x)")
        print(f"echo p50, interleaved ({len(interleaved)} x {2 * config.echo_n} turns, blocks of {INTERLEAVED_BLOCK} "
              f"back to back, the first of each left out), ms: " + ", ".join(cells))
        r = statistics.median(rep["acp-agent"][0] / min(rep[key][0] for key in others) for rep in interleaved)
        against = "the faster official SDK" if set(others) == set(OFFICIAL) else {
            "official-py": "official Python SDK", "ts-sdk": "TypeScript SDK"}[others[0]]
        targets.append({"target": f"echo p50 <= {against} (interleaved)", "value": r, "ok": r <= 1.0})
    if "acp-agent" in keys:
        if CEILING in keys:
            r = cross_ratio(runs, "stream_notif_per_s", "acp-agent", CEILING)
            targets.append({"target": "stream notif/s >= 0.6x raw orjson", "value": r, "ok": r >= 0.6})
        if "ts-sdk" in keys:
            r = cross_ratio(runs, "stream_notif_per_s", "acp-agent", "ts-sdk")
            targets.append({"target": "stream notif/s >= 3x TypeScript SDK", "value": r, "ok": r >= 3})
        r = startup_ratio(startups, "acp-agent", ANCHOR)
        targets.append({"target": "start-up <= 3x raw stdlib json", "value": r, "ok": r <= 3})
        r = cross_ratio(runs, "echo_p50_ms", "acp-agent", ANCHOR)
        targets.append({"target": "echo p50 <= 1.2x raw stdlib json", "value": r, "ok": r <= 1.2})
        rss = summary["acp-agent"]["peak_rss_mb"]
        targets.append({"target": "peak RSS <= 35 MB (stream workload)", "value": rss, "ok": rss <= 35})
        if "ts-sdk" in keys:
            r = startup_ratio(startups, "acp-agent", "ts-sdk")
            targets.append({"target": "start-up <= 1.0x TypeScript SDK (issue 31)", "value": r, "ok": r <= 1.0})
        if "official-py" in keys:
            over = rss - summary["official-py"]["peak_rss_mb"]
            targets.append({"target": "peak RSS - official Python SDK <= 2 MB (issue 31)", "value": over,
                            "ok": over <= 2.0})
        if FLOOR in keys:
            floor_startup = startup_ratio(startups, FLOOR, ANCHOR)
            floor_rss = summary[FLOOR]["peak_rss_mb"]
            print(f"dependency floor (raw orjson agent that imports anyio, pydantic, jsonrpcserver): start-up "
                  f"{floor_startup:.2f}x raw stdlib json, peak RSS {floor_rss:.1f} MB; acp-agent is "
                  f"{startup_ratio(startups, 'acp-agent', FLOOR):.2f}x the floor's start-up and "
                  f"{rss - floor_rss:+.1f} MB over its RSS")
    if terminals:
        targets.append({"target": "terminal output >= 100 MB/s (this driver)", "value": mb_s, "ok": mb_s >= 100})
        targets.append({"target": "terminal KiB per chunk >= 16 (this driver)", "value": chunk_kib,
                        "ok": chunk_kib >= 16})

    if not args.skip_scripts:
        print()
        print("$ .venv/bin/python bench/dispatch_overhead.py")
        output = run_script(python, ["bench/dispatch_overhead.py"])
        print(output, end="")
        records.append({"kind": "script", "script": "dispatch_overhead.py", "output": output})
        bg_terminals: list[Message] = []
        for run_index in range(args.bg_runs):
            print(f"$ .venv/bin/python bench/background_bench.py --mb {args.mb}   # run {run_index + 1}/{args.bg_runs}")
            output = run_script(python, ["bench/background_bench.py", "--mb", str(args.mb)])
            print(output, end="")
            match = TERMINAL_RE.search(output)
            record: Message = {"kind": "script", "script": "background_bench.py", "run": run_index, "output": output}
            if match:
                record["terminal"] = {"mb": int(match[1]), "seconds": float(match[2]), "mb_per_s": float(match[3]),
                                      "chunks": int(match[4])}
                bg_terminals.append(record["terminal"])
            records.append(record)
        if bg_terminals:
            bg_mb_s = statistics.median(t["mb_per_s"] for t in bg_terminals)
            per_chunk_kib = statistics.median(t["mb"] * 1e6 / t["chunks"] / 1024 for t in bg_terminals)
            print(f"background_bench terminal output, median of {len(bg_terminals)} runs: {bg_mb_s:.1f} MB/s, "
                  f"{per_chunk_kib:.0f} KiB per chunk on average (its Python test client reads and decodes)")
            targets.append({"target": "terminal output >= 100 MB/s (background_bench)", "value": bg_mb_s,
                            "ok": bg_mb_s >= 100})
            targets.append({"target": "terminal KiB per chunk >= 16 (background_bench)", "value": per_chunk_kib,
                            "ok": per_chunk_kib >= 16})

    if not args.skip_scripts:
        print()
        print("$ .venv/bin/python bench/v1_terminal.py --json   # a 3,000-line build on the v1 wire (issue 37)")
        row = orjson.loads(run_script(python, ["bench/v1_terminal.py", "--json"]).splitlines()[-1])
        records.append({"kind": "v1_terminal", **row})
        print(f"  {row['output_bytes'] / 1e3:.1f} KB of output -> {row['v1_bytes'] / 1e3:.1f} KB on the v1 wire "
              f"({row['ratio']:.1f}x) in {row['updates']} updates ({row['updates_per_s']:.1f}/s)")
        targets.append({"target": "v1 wire bytes per terminal output byte <= 10 (v1_terminal)", "value": row["ratio"],
                        "ok": row["ratio"] <= 10})
        targets.append({"target": "v1 updates for a 3,000-line build <= 60 (v1_terminal)", "value": row["updates"],
                        "ok": row["updates"] <= 60})

    if not args.skip_scripts and args.remote_blocks:
        command = ["bench/remote_latency.py", "--blocks", str(args.remote_blocks), "--json"]
        print()
        print(f"$ .venv/bin/python {' '.join(command)}   # one connection's echo turn, next to the TS AcpServer")
        output = run_script(python, command)
        rows = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
        for row in rows:
            records.append({"kind": "remote_latency", **row})
            ours, theirs = row["acp-agent"], row["ts-sdk"]
            print(f"  {row['transport']:<5} acp-agent p50 {ours['p50']:.3f} ms p99 {ours['p99']:.3f} ms | TS AcpServer "
                  f"p50 {theirs['p50']:.3f} ms p99 {theirs['p99']:.3f} ms | p50 ratio {row['ratio_p50']:.2f}x")
            targets.append({"target": f"one {row['transport']} connection's echo p50 <= 1.0x TS AcpServer",
                            "value": row["ratio_p50"], "ok": row["ratio_p50"] <= 1.0})

    if targets:
        print()
        print("targets (acp-agent):")
        for target in targets:
            print(f"  {target['target']:<48} {target['value']:8.2f}   {verdict(target['ok'])}")
        records.append({"kind": "targets", "targets": targets})
    write_records(out_path, records)
    print(f"\nraw data: {out_path.relative_to(ROOT)}")
    return 0


def write_records(path: Path, records: list[Message]) -> None:
    with open(path, "wb") as out:
        for record in records:
            out.write(orjson.dumps(record) + b"\n")


if __name__ == "__main__":
    sys.exit(main())
