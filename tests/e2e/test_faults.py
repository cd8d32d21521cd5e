"""Faults: the agent process under signals, end of input, misbehaving agent code and children, a stalled client.

Every test runs an agent as a real subprocess over real pipes (``tests/helpers/fault_agent.py``, on the anyio
backend under test) and checks, after the agent exited: exit status 0, every process group it started
gone (children and grandchildren), every request answered, and a clean wire (schema, wire rules,
background-list invariants).
"""

from __future__ import annotations

import base64
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import orjson
import pytest

from acp_agent._wire.framing import Writer
from acp_agent.testing.client import Client, TranscriptEntry
from acp_agent.testing.schema import SchemaValidator
from acp_agent.testing.streams import byte_pipe
from tests.helpers.e2e import (
    FINAL,
    ROOT,
    group_alive,
    listing_problems,
    pid_alive,
    terminal_output,
    updates,
    wire_violations,
)

pytestmark = pytest.mark.anyio

AGENT = ROOT / "tests" / "helpers" / "fault_agent.py"


@dataclass
class Agent:
    """A running fault agent: its process and a checked client on its pipes."""

    process: anyio.abc.Process
    client: Client
    pids: list[int] = field(default_factory=list)
    """Every pid the test learned (children, grandchildren): all must be gone at the end."""

    @property
    def pid(self) -> int:
        return self.process.pid


@asynccontextmanager
async def fault_agent(validator: SchemaValidator, backend: str, *, env: dict[str, str] | None = None,
                      **client_options: Any) -> AsyncIterator[Agent]:
    process = await anyio.open_process([sys.executable, str(AGENT)], stderr=sys.stderr,
                                       env={**os.environ, "ACP_AGENT_BACKEND": backend, **(env or {})})
    assert process.stdout is not None and process.stdin is not None
    client = Client(process.stdout, process.stdin, **client_options)
    agent = Agent(process, client)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.connection.run)
            try:
                yield agent
            finally:
                with anyio.CancelScope(shield=True):
                    with suppress(Exception):
                        await client.close()
                    with anyio.move_on_after(15):
                        await process.wait()
                    client.connection.close()
                tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
        for pid in agent.pids:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    if os.environ.get("FAULTS_DUMP"):
        with open(os.environ["FAULTS_DUMP"], "w") as f:
            for e in client.transcript:
                f.write(f"{e.at:.3f} {e.direction} {str(e.message)[:300]}\n")
    assert process.returncode == 0, f"agent exit status {process.returncode}"
    leftovers = [pid for pid in agent.pids if pid_alive(pid) or group_alive(pid)]
    assert not leftovers, f"processes (groups) outlived the agent: {leftovers}"
    problems = validator.check_transcript(_sample(client.transcript))
    problems += listing_problems(client.transcript)
    problems += wire_violations(client.transcript)
    assert not problems, "\n".join(problems)


async def open_session(agent: Agent) -> str:
    await agent.client.initialize()
    return await agent.client.new_session(str(ROOT))


async def ask(agent: Agent, sid: str, text: str) -> None:
    """Run one prompt to its idle."""
    view = await agent.client.prompt_and_wait(sid, text)
    assert view.stop_reason == "end_turn"


def output_of(agent: Agent, sid: str, terminal_id: str) -> bytes:
    """The terminal's output as the client holds it (kept up to date by its session view)."""
    return bytes(agent.client.view(sid).terminals.get(terminal_id, {}).get("output", b""))


async def pids_of(agent: Agent, sid: str, terminal_id: str, count: int) -> list[int]:
    """The pids a terminal's command printed on its first line (``echo $$ ...``)."""
    await agent.client.wait_for(lambda: b"\n" in output_of(agent, sid, terminal_id))
    pids = [int(w) for w in output_of(agent, sid, terminal_id).split(b"\n")[0].split()]
    assert len(pids) == count
    agent.pids += pids
    return pids


def terminals(agent: Agent, sid: str) -> list[str]:
    return [u["terminalId"] for _, u in updates(agent.client, sid) if u["sessionUpdate"] == "terminal_update"
            and "command" in u]


def unfinished(agent: Agent, sid: str) -> list[str]:
    """Items of ``sid`` never reported ended, and a last snapshot that is not idle with an empty list."""
    problems: list[str] = []
    tools: dict[str, bool] = {}
    terms: dict[str, bool] = {}
    last: dict[str, Any] | None = None
    for _, u in updates(agent.client, sid):
        kind = u["sessionUpdate"]
        if kind == "tool_call_update":
            tools[u["toolCallId"]] = tools.get(u["toolCallId"], False) or u.get("status") in FINAL
        elif kind == "terminal_update":
            terms[u["terminalId"]] = terms.get(u["terminalId"], False) or u.get("exitStatus") is not None
        elif kind == "state_update":
            last = u
    problems += [f"tool call {k} has no final status" for k, done in tools.items() if not done]
    problems += [f"terminal {k} has no exitStatus" for k, done in terms.items() if not done]
    if last is None or last["state"] != "idle" or last["background"]:
        problems.append(f"last snapshot: {last}")
    return problems


def answer(agent: Agent, request_id: int) -> dict[str, Any]:
    [found] = [e.message for e in agent.client.transcript if e.direction == "agent->client"
               and "method" not in e.message and e.message.get("id") == request_id]
    return found


# A short shutdown deadline keeps tests with processes that ignore SIGTERM quick (their grace is cut to fit).
SHORT_DEADLINE = {"ACP_AGENT_SHUTDOWN_TIMEOUT": "1"}

# A command that ignores SIGTERM, forks a grandchild that ignores it too, then prints both pids.
STUBBORN_TREE = "trap '' TERM; sleep 300 & echo $$ $!; echo ready; wait"


async def busy_agent(agent: Agent) -> tuple[str, dict[str, int]]:
    """A session with every kind of work in flight; returns its id and the ids of pending client requests."""
    client = agent.client
    sid = await open_session(agent)
    await ask(agent, sid, f"bg {STUBBORN_TREE}")
    [bg] = terminals(agent, sid)
    await pids_of(agent, sid, bg, 2)
    await ask(agent, sid, "tool")
    await ask(agent, sid, "bgask")
    await client.wait_for(lambda: len(client.pending_permissions) == 1)
    await client.prompt(sid, f"run {STUBBORN_TREE}")
    await client.wait_for(lambda: len(terminals(agent, sid)) == 2)
    await pids_of(agent, sid, terminals(agent, sid)[1], 2)
    return sid, {"held": await _send_prompt(agent, sid, "echo held")}


async def _send_request(agent: Agent, method: str, params: dict[str, Any]) -> int:
    """Send a request without waiting for its answer; returns its id once it is on the wire."""
    client = agent.client

    async def send() -> None:
        with suppress(Exception):
            await client.request(method, params)

    client.connection.task_group.start_soon(send)
    sent: list[int] = []

    def on_wire() -> bool:
        sent[:] = [e.message["id"] for e in client.transcript if e.direction == "client->agent"
                   and e.message.get("method") == method and e.message.get("params") == params]
        return bool(sent)

    await client.wait_for(on_wire)
    await client.connection.writer.drain()
    return sent[-1]


async def _send_prompt(agent: Agent, sid: str, text: str) -> int:
    """Send a prompt without waiting for its answer; returns its request id once it is on the wire."""
    return await _send_request(agent, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "EOF"])
async def test_shutdown_with_everything_running(validator: SchemaValidator, anyio_backend: str, how: str) -> None:
    async with fault_agent(validator, anyio_backend, permission_policy=None) as agent:
        sid, pending = await busy_agent(agent)
        if how == "EOF":
            await agent.client.connection.writer.drain()  # the held prompt is in the pipe, not in our queue
            await agent.client.close()
        else:
            agent.process.send_signal(getattr(signal, how))
        with anyio.fail_after(12):
            await agent.process.wait()
    held = answer(agent, pending["held"])
    assert held["error"]["code"] == -32800
    assert unfinished(agent, sid) == []


# -- signals at any point of a turn ----------------------------------------------------------------

# A turn that streams output from a foreground process tree (TERM ignored) while it runs.
STREAMING = "trap '' TERM; sleep 300 & echo $$ $!; while :; do echo tick; sleep 0.01; done"


@pytest.mark.parametrize("moment", ["prompt_sent", "turn_running", "output_streaming", "twice"])
async def test_signal_at_any_point_of_a_turn(validator: SchemaValidator, anyio_backend: str, moment: str) -> None:
    async with fault_agent(validator, anyio_backend, env=SHORT_DEADLINE) as agent:
        client = agent.client
        sid = await open_session(agent)
        await ask(agent, sid, f"bg {STUBBORN_TREE}")
        await pids_of(agent, sid, terminals(agent, sid)[0], 2)
        prompt_id = await _send_prompt(agent, sid, f"run {STREAMING}")
        if moment != "prompt_sent":
            await client.wait_for(lambda: client.view(sid).state == "running")
        if moment in ("output_streaming", "twice"):
            await client.wait_for(lambda: len(terminals(agent, sid)) == 2)
            fg = terminals(agent, sid)[1]
            await pids_of(agent, sid, fg, 2)
            await client.wait_for(lambda: output_of(agent, sid, fg).count(b"tick") >= 3)
        agent.process.send_signal(signal.SIGTERM)
        if moment == "twice":
            await anyio.sleep(0.05)
            agent.process.send_signal(signal.SIGINT)  # a second signal during shutdown changes nothing
        with anyio.fail_after(12):
            await agent.process.wait()
    # answered once: with its messageId if it was inserted before the signal, else -32800
    prompt_answer = answer(agent, prompt_id)
    assert "result" in prompt_answer or prompt_answer["error"]["code"] == -32800
    assert unfinished(agent, sid) == []


async def test_pending_foreground_permission_at_sigterm(validator: SchemaValidator, anyio_backend: str) -> None:
    async with fault_agent(validator, anyio_backend, permission_policy=None) as agent:
        client = agent.client
        sid = await open_session(agent)
        await client.prompt(sid, "ask")
        await client.wait_for(lambda: client.view(sid).state == "requires_action" and client.pending_permissions)
        agent.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(12):
            await agent.process.wait()
    # the agent withdrew its request (R19) and ended the turn cancelled
    [request] = [e.message for e in client.transcript if e.direction == "agent->client"
                 and e.message.get("method") == "session/request_permission"]
    assert any(e.message.get("method") == "$/cancel_request" and e.message["params"]["requestId"] == request["id"]
               for e in client.transcript if e.direction == "agent->client")
    assert client.view(sid).stop_reason == "cancelled"
    assert unfinished(agent, sid) == []


# -- agent code that misbehaves during shutdown ----------------------------------------------------

@pytest.mark.parametrize("fault", ["stubborn", "thread 30", "raise_on_cancel", "block 30"])
async def test_shutdown_deadline_with_misbehaving_work(validator: SchemaValidator, anyio_backend: str,
                                                       fault: str) -> None:
    async with fault_agent(validator, anyio_backend, env=SHORT_DEADLINE) as agent:
        client = agent.client
        sid = await open_session(agent)
        await ask(agent, sid, f"bg {STUBBORN_TREE}")
        await pids_of(agent, sid, terminals(agent, sid)[0], 2)
        await ask(agent, sid, fault)
        await ask(agent, sid, "crash")  # a body that raises at once: failed, the agent carries on
        # A blocked event loop cannot answer anything: the watchdog thread only kills and exits.
        blocked = fault == "block 30"
        if not blocked:  # dispatched before the next request is read, so in flight once that one is answered
            hanging = await _send_request(agent, "session/new", {"cwd": f"{ROOT}/stubborn"})
        second = await client.new_session(str(ROOT))
        await client.prompt(second, "stubborn_turn")  # a turn that swallows its cancellation
        await client.wait_for(lambda: client.view(second).messages() != {})
        agent.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(12):
            await agent.process.wait()
    if not blocked:  # a request in flight whose handler ignores cancellation is still answered
        assert answer(agent, hanging)["error"] == {"code": -32800, "message": "Request cancelled"}
    tools = {u["title"]: u["toolCallId"] for _, u in updates(client, sid) if "title" in u}
    final = {u["toolCallId"]: u["status"] for _, u in updates(client, sid) if u.get("status") in FINAL}
    assert final[tools["crash"]] == "failed"
    if not blocked:
        assert final[tools[fault.split()[0]]] == "cancelled"
        assert unfinished(agent, sid) == []
        assert unfinished(agent, second) == []
        assert client.view(second).stop_reason == "cancelled"


async def test_a_store_that_never_closes_does_not_keep_the_agent_alive(validator: SchemaValidator,
                                                                         anyio_backend: str) -> None:
    """Closing the session store is part of the shutdown: it ends by the deadline, with status 0."""
    async with fault_agent(validator, anyio_backend, env={**SHORT_DEADLINE, "FAULT_AGENT_STORE": "hangs"}) as agent:
        sid = await open_session(agent)
        await ask(agent, sid, "echo hello")
        await ask(agent, sid, "tool")
        agent.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(12):
            await agent.process.wait()
    assert unfinished(agent, sid) == []


# -- children that misbehave -------------------------------------------------------------------------

CHILDREN = {
    "ignores_term": "trap '' TERM; echo $$; while :; do sleep 1; done",
    "term_ignoring_grandchildren": "trap '' TERM; sleep 300 & sleep 300 & echo $$ $!; wait",
    "closes_stdout": "echo $$; exec >&- 2>&-; trap '' TERM; sleep 300",
    "floods": "echo $$; yes",
}


async def start_children(agent: Agent, sid: str) -> dict[str, tuple[str, list[int]]]:
    """Start every misbehaving child as a listed terminal: name -> (terminal id, pids it printed)."""
    started: dict[str, tuple[str, list[int]]] = {}
    for name, command in CHILDREN.items():
        await ask(agent, sid, f"bg {command}")
        term = terminals(agent, sid)[-1]
        started[name] = term, await pids_of(agent, sid, term, 2 if name == "term_ignoring_grandchildren" else 1)
    return started


async def test_terminal_cancel_ends_misbehaving_children(validator: SchemaValidator, anyio_backend: str) -> None:
    async with fault_agent(validator, anyio_backend) as agent:
        client = agent.client
        sid = await open_session(agent)
        started = await start_children(agent, sid)
        flood, _ = started["floods"]
        view = client.view(sid)
        await client.wait_for(lambda: len(view.terminals[flood]["output"]) > 256 * 1024)
        async with anyio.create_task_group() as tg:
            for term, _ in started.values():
                tg.start_soon(client.cancel_terminal, sid, term)
        await client.wait_for(lambda: view.quiet and all(t.get("exitStatus") for t in view.terminals.values()))
        assert unfinished(agent, sid) == []
        for name, (term, pids) in started.items():
            for pid in pids:
                assert not pid_alive(pid) and not group_alive(pid), (name, pid)
            [exit_update] = [u for _, u in updates(client, sid) if u.get("terminalId") == term and u.get("exitStatus")]
            expected = {"SIGTERM", "SIGPIPE"} if name == "floods" else {"SIGKILL"}
            assert exit_update["exitStatus"]["signal"] in expected, (name, exit_update)
        # the flood's output came coalesced and complete, its exit after its last chunk
        flood_updates = [(i, u) for i, u in updates(client, sid) if u.get("terminalId") == flood]
        chunks = [i for i, u in flood_updates if u["sessionUpdate"] == "terminal_output_chunk"]
        [exit_index] = [i for i, u in flood_updates if u.get("exitStatus")]
        assert max(chunks) < exit_index
        output = terminal_output(client, sid, flood)
        assert not output.split(b"\n", 1)[1].translate(None, b"y\n")
        assert len(chunks) < len(output) // 4096  # coalesced, not a message per write


async def test_shutdown_ends_misbehaving_children(validator: SchemaValidator, anyio_backend: str) -> None:
    async with fault_agent(validator, anyio_backend, env=SHORT_DEADLINE) as agent:
        sid = await open_session(agent)
        await start_children(agent, sid)
        agent.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(12):
            await agent.process.wait()
    assert unfinished(agent, sid) == []


# -- a client that stops reading -------------------------------------------------------------------


async def test_writer_pushes_back_on_bytes_not_only_messages() -> None:
    """A handful of large messages behind a peer that does not read makes producers wait, and
    ``drain`` waits for the chunk being written, not only for the queue."""
    send, receive = byte_pipe(buffer=0)  # nothing is taken until the peer reads
    writer = Writer(send, high_water=4096, high_water_bytes=1 << 20, batch_bytes=1 << 20)
    message = b"x" * (256 * 1024 - 1) + b"\n"
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        blocked = anyio.Event()
        sent = 0

        async def produce() -> None:
            nonlocal sent
            for _ in range(64):
                await writer.send(message)
                sent += 1
            blocked.set()

        tg.start_soon(produce)
        with anyio.move_on_after(0.5):
            await blocked.wait()
        assert not blocked.is_set() and sent <= 8  # held back at about 1 MiB, far below 64 messages
        assert writer.queued_bytes <= (1 << 20) + len(message)
        received = 0
        drained = anyio.Event()

        async def drain() -> None:
            await blocked.wait()
            await writer.drain()
            drained.set()

        tg.start_soon(drain)
        while received < 64 * len(message):
            if blocked.is_set() and writer.queued_bytes == 0:
                # the last chunk is off the queue but not written yet: drain() must still wait
                for _ in range(20):
                    await anyio.lowlevel.checkpoint()
                assert not drained.is_set()
            received += len(await receive.receive(1 << 30))  # one whole write at a time
        with anyio.fail_after(5):
            await drained.wait()
        writer.close()



def memory_kib(pid: int) -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if line.startswith(("VmHWM", "VmRSS")))
    return {k: int(v.split()[0]) for k, v in fields.items()}


class RawClient:
    """A client on an agent's pipes that reads only when told to (so it can stall the agent)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.transcript: list[TranscriptEntry] = []
        self._buffer = b""
        self._next_id = 0

    async def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = self._next_id
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.transcript.append(TranscriptEntry("client->agent", message, anyio.current_time()))
        assert self.process.stdin is not None
        await self.process.stdin.send(orjson.dumps(message) + b"\n")
        return request_id

    async def read_until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10) -> dict[str, Any]:
        """Read (recording everything) until a message matches; returns it."""
        assert self.process.stdout is not None
        with anyio.fail_after(timeout):
            while True:
                while b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    message = orjson.loads(line)
                    self.transcript.append(TranscriptEntry("agent->client", message, anyio.current_time()))
                    if predicate(message):
                        return message
                self._buffer += await self.process.stdout.receive(1 << 20)

    async def read_to_end(self, timeout: float = 10) -> None:
        with anyio.fail_after(timeout), suppress(anyio.EndOfStream):
            await self.read_until(lambda m: False, timeout)

    async def answer(self, request_id: int, timeout: float = 10) -> dict[str, Any]:
        return await self.read_until(lambda m: "method" not in m and m.get("id") == request_id, timeout)


def _sample(transcript: list[TranscriptEntry], per_kind: int = 100) -> list[TranscriptEntry]:
    """Every message but the bulk of the repeated chunks (the first ``per_kind`` of each kind stay).

    The schema check costs milliseconds a message; thousands of same-shaped chunks add nothing.
    """
    counts: dict[str, int] = {}
    sample: list[TranscriptEntry] = []
    for entry in transcript:
        kind = _update(entry.message).get("sessionUpdate", "")
        if kind.endswith("_chunk"):
            counts[kind] = counts.get(kind, 0) + 1
            if counts[kind] > per_kind:
                continue
        sample.append(entry)
    return sample


def _update(m: dict[str, Any]) -> dict[str, Any]:
    update: dict[str, Any] = m.get("params", {}).get("update", {}) if m.get("method") == "session/update" else {}
    return update


def _stop_reason(m: dict[str, Any]) -> Any:
    """The ``stopReason`` of a snapshot that ends foreground work (``None`` for any other message)."""
    update = _update(m)
    return update.get("stopReason") if update.get("sessionUpdate") == "state_update" else None


def _stop_reasons(transcript: list[TranscriptEntry]) -> list[Any]:
    """How each foreground work the agent reported ended, in order."""
    return [stop for e in transcript if (stop := _stop_reason(e.message)) is not None]


async def test_stalled_client_keeps_memory_bounded(validator: SchemaValidator, anyio_backend: str) -> None:
    """A flooding process and a chatty tool call behind a client that stops reading: the agent's peak
    RSS stays bounded, and once the client reads again it gets the exit, the cancel and a final list."""
    stall = float(os.environ.get("FAULTS_STALL_SECONDS", "4"))
    process = await anyio.open_process([sys.executable, str(AGENT)], stderr=sys.stderr,
                                       env={**os.environ, "ACP_AGENT_BACKEND": anyio_backend})
    raw = RawClient(process)
    try:
        # The first answer waits for the agent process to start (imports): seconds on a loaded machine.
        await raw.answer(await raw.send("initialize", {"protocolVersion": 2, "info": {"name": "t", "version": "0"}}),
                         timeout=60)
        sid = (await raw.answer(await raw.send("session/new", {"cwd": str(ROOT)})))["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "chatty"}]}
        await raw.answer(await raw.send("session/prompt", prompt))
        tool = (await raw.read_until(lambda m: "title" in _update(m)))["params"]["update"]["toolCallId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "bg yes"}]}
        await raw.answer(await raw.send("session/prompt", prompt))
        term = (await raw.read_until(lambda m: "command" in _update(m)))["params"]["update"]["terminalId"]
        await raw.read_until(lambda m: _update(m).get("terminalId") == term and "data" in _update(m))
        before = memory_kib(process.pid)
        # The client stops reading: the pipe fills, then the agent must hold back.
        peak = 0
        deadline = anyio.current_time() + stall
        while anyio.current_time() < deadline:
            peak = max(peak, memory_kib(process.pid)["VmHWM"])
            await anyio.sleep(0.2)
        peak = max(peak, memory_kib(process.pid)["VmHWM"])
        print(f"\nagent peak RSS (VmHWM) {peak / 1024:.1f} MiB after {stall:.0f} s of a stalled client "
              f"(RSS before the stall {before['VmRSS'] / 1024:.1f} MiB, {anyio_backend})")
        assert peak < 150 * 1024, f"agent peak RSS {peak} KiB under a stalled client"
        # Still stalled: ask for both to stop, then read again.
        cancel_term = await raw.send("terminal/cancel", {"sessionId": sid, "terminalId": term})
        cancel_tool = await raw.send("tool_call/cancel", {"sessionId": sid, "toolCallId": tool})
        expected = {
            "terminal/cancel answered": lambda m: m.get("id") == cancel_term and "result" in m,
            "tool_call/cancel answered": lambda m: m.get("id") == cancel_tool and "result" in m,
            "exit reported": lambda m: _update(m).get("terminalId") == term and "exitStatus" in _update(m),
            "tool call ended": lambda m: _update(m).get("toolCallId") == tool and _update(m).get("status") in FINAL,
            "empty list": lambda m: _update(m).get("sessionUpdate") == "state_update" and not _update(m)["background"],
            # The "bg" turn may still wait for the client to catch up: it ends on its own, before the
            # input closes (closing it first would wind the turn down, cancelled).
            "turn ended": lambda m: _stop_reason(m) is not None,
        }
        seen: set[str] = set()
        if len(_stop_reasons(raw.transcript)) == 2:
            seen.add("turn ended")  # it ended before the stall

        def all_seen(m: dict[str, Any]) -> bool:
            seen.update(name for name, check in expected.items() if check(m))
            return len(seen) == len(expected)

        await raw.read_until(all_seen)
        assert process.stdin is not None
        await process.stdin.aclose()
        await raw.read_to_end()
        with anyio.fail_after(10):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
    output = b"".join(base64.b64decode(_update(e.message)["data"]) for e in raw.transcript
                      if _update(e.message).get("terminalId") == term and "data" in _update(e.message))
    assert output and not output.translate(None, b"y\n")
    [exit_update] = [_update(e.message) for e in raw.transcript if "exitStatus" in _update(e.message)]
    assert exit_update["exitStatus"]["signal"] in ("SIGTERM", "SIGPIPE")
    status = [_update(e.message)["status"] for e in raw.transcript
              if _update(e.message).get("toolCallId") == tool and "status" in _update(e.message)]
    assert status[-1] == "cancelled"
    assert _stop_reasons(raw.transcript) == ["end_turn", "end_turn"]  # no per-item cancel ended a turn (R105)
    problems = validator.check_transcript(_sample(raw.transcript)) + listing_problems(raw.transcript)
    problems += wire_violations(raw.transcript)
    assert not problems, "\n".join(problems[:20])


async def test_a_fast_producer_does_not_starve_a_slow_one() -> None:
    """Two producers behind a slow reader: the one sending a single message gets it out although
    the other refills the queue the moment there is room (each woken producer goes on)."""
    send, receive = byte_pipe(buffer=0)
    writer = Writer(send, high_water=8, high_water_bytes=1 << 20, batch_bytes=1024)
    line = b"c" * 99 + b"\n"
    with anyio.fail_after(10):
        await _single_gets_through(writer, receive, line)


async def _single_gets_through(writer: Writer, receive: Any, line: bytes) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)

        async def chatty() -> None:
            while True:
                await writer.send(line)

        tg.start_soon(chatty)
        await anyio.sleep(0.05)  # the queue is full and the chatty producer waits
        single_sent = anyio.Event()

        async def single() -> None:
            await writer.send(b"single\n")
            single_sent.set()

        tg.start_soon(single)
        got = b""
        with anyio.fail_after(5):
            while b"single\n" not in got:
                got += await receive.receive()
                await anyio.sleep(0.001)  # a slow reader
        await single_sent.wait()
        tg.cancel_scope.cancel()
