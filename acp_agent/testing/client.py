"""A small ACP v2 client for tests, demos and scripted checks of an agent.

It speaks to an [`Agent`][acp_agent.Agent] in the same process over in-memory pipes
([`connect_agent`][acp_agent.testing.connect_agent]) or to an agent subprocess over real pipes
([`spawn_agent`][acp_agent.testing.spawn_agent]), records every message in both directions in
[`Client.transcript`][acp_agent.testing.Client.transcript], and keeps the client's view of each session (its updates and
its latest state). An agent subprocess that dies is reported as
[`AgentExitedError`][acp_agent.testing.AgentExitedError], with its exit status and stderr tail.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from .._runtime.serve import serve
from .._util.portable import KILL
from .._wire.connection import Connection, Method
from ..errors import ErrorCode, RequestError
from ..limits import Limits
from ..store import SessionStore
from .checker import WireChecker
from .mcp import McpHandler, McpHost
from .streams import byte_pipe
from .transcript import Direction, TranscriptEntry

__all__ = [
    "AgentExitedError",
    "Client",
    "PermissionPolicy",
    "SessionView",
    "TranscriptEntry",
    "allow_first",
    "connect_agent",
    "spawn_agent",
]

WAIT_FOR_INTERVAL = 0.02
"""Seconds between checks of a [`Client.wait_for`][acp_agent.testing.Client.wait_for] predicate while no message
arrives."""

STDERR_TAIL_BYTES = 4096
"""How many trailing bytes of an agent subprocess's stderr [`AgentExitedError`][acp_agent.testing.AgentExitedError]
quotes (at most)."""

PermissionPolicy = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Given ``session/request_permission`` params, return the result to send (``None``: wait for a hand answer)."""


@dataclass(slots=True)
class SessionView:
    """The client's view of one session, built from the updates it received."""

    session_id: str
    updates: list[dict[str, Any]] = field(default_factory=list)
    state: str = "idle"
    stop_reason: str | None = None
    idle_count: int = 0
    error: dict[str, Any] | None = None
    """The ``error`` (``{"code", "message", ...}``) of the last ``idle`` that ended work with ``stopReason:
    "error"``, ``None`` when the last work ended otherwise."""
    background: list[dict[str, Any]] | None = None
    """The latest ``background`` list, or ``None`` while it is not reported (unknown)."""
    tool_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each tool call's patched state (upserts applied per R71/R72, content chunks appended)."""
    terminals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each terminal's patched state; ``output`` (a ``bytearray``) holds the decoded bytes received."""
    children: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each announced child session's patched ``subagent_update`` state."""
    config_options: list[dict[str, Any]] | None = None
    """The latest complete config option list (from the session's answer or a ``config_option_update``)."""
    available_commands: list[dict[str, Any]] | None = None
    """The latest complete slash command list (from the session's answer or an ``available_commands_update``)."""

    @property
    def quiet(self) -> bool:
        """Idle with an empty background list: nothing runs and nothing is scheduled."""
        return self.state == "idle" and self.background == []

    def cancellable_tool_calls(self) -> set[str]:
        """Tool calls that currently advertise ``capabilities.cancel``."""
        return {i for i, t in self.tool_calls.items() if _cancellable(t)}

    def cancellable_terminals(self) -> set[str]:
        """Terminals that currently advertise ``capabilities.cancel``."""
        return {i for i, t in self.terminals.items() if _cancellable(t)}

    def _lists(self, fields: dict[str, Any]) -> None:
        if "configOptions" in fields:
            self.config_options = fields["configOptions"]
        if "availableCommands" in fields:
            self.available_commands = fields["availableCommands"]

    def _apply(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "tool_call_update":
            _patch(self.tool_calls.setdefault(str(update.get("toolCallId")), {}), update)
        elif kind == "tool_call_content_chunk":
            entry = self.tool_calls.setdefault(str(update.get("toolCallId")), {})
            entry["content"] = [*(entry.get("content") or []), update.get("content")]
        elif kind == "terminal_update":
            entry = self.terminals.setdefault(str(update.get("terminalId")), {"output": bytearray()})
            output = update.get("output")
            _patch(entry, {k: v for k, v in update.items() if k != "output"})
            if "output" in update:
                data = base64.b64decode(output["data"]) if isinstance(output, dict) else b""
                entry["output"] = bytearray(data)
        elif kind == "terminal_output_chunk":
            entry = self.terminals.setdefault(str(update.get("terminalId")), {"output": bytearray()})
            entry["output"] += base64.b64decode(str(update.get("data", "")))  # bytearray: amortized append
        elif kind == "subagent_update":
            _patch(self.children.setdefault(str(update.get("sessionId")), {}), update)
        elif kind in ("config_option_update", "available_commands_update"):
            self._lists(update)

    def messages(self, kind: str = "agent_message") -> dict[str, str]:
        """Text of each message of ``kind`` (``agent_message``, ``agent_thought``, ``user_message``) by id."""
        texts: dict[str, str] = {}
        for update in self.updates:
            tag = update.get("sessionUpdate")
            if tag == kind:
                texts[update["messageId"]] = "".join(
                    b.get("text", "") for b in update.get("content") or [] if isinstance(b, dict)
                )
            elif tag == f"{kind}_chunk":
                block = update.get("content") or {}
                texts[update["messageId"]] = texts.get(update["messageId"], "") + block.get("text", "")
        return texts


def _patch(entity: dict[str, Any], update: dict[str, Any]) -> None:
    """Apply an upsert: omitted keeps, a value replaces (``null`` included); ``_meta`` per key."""
    for key, value in update.items():
        if key == "_meta" and isinstance(value, dict) and isinstance(entity.get("_meta"), dict):
            merged = dict(entity["_meta"])
            for meta_key, meta_value in value.items():
                if meta_value is None:
                    merged.pop(meta_key, None)
                else:
                    merged[meta_key] = meta_value
            entity["_meta"] = merged
        else:
            entity[key] = value


def _cancellable(entity: dict[str, Any]) -> bool:
    capabilities = entity.get("capabilities")
    return isinstance(capabilities, dict) and isinstance(capabilities.get("cancel"), dict)


def allow_first(params: dict[str, Any]) -> dict[str, Any]:
    """Permission policy: select the first ``allow_*`` option (or cancel if none)."""
    for option in params.get("options", []):
        if str(option.get("kind", "")).startswith("allow"):
            return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    return {"outcome": {"outcome": "cancelled"}}


class AgentExitedError(RequestError):
    """The agent subprocess of [`spawn_agent`][acp_agent.testing.spawn_agent] exited while the client still needed it.

    Raised instead of a bare "connection closed" by a client request whose answer never came
    (``method`` names it) and by [`Client.wait_for`][acp_agent.testing.Client.wait_for] when no more messages can arrive
    (``method`` is ``None``). It carries the exit status (``returncode``, negative for a signal)
    and the last `STDERR_TAIL_BYTES` bytes of the agent's stderr (``stderr_tail``). It is a
    [`RequestError`][acp_agent.RequestError] with code ``-32800``, like the cancellation it replaces.
    """

    def __init__(self, returncode: int, stderr_tail: str, method: str | None = None) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.method = method
        if returncode < 0:
            try:
                status = f"was killed by {signal.Signals(-returncode).name}"
            except ValueError:
                status = f"was killed by signal {-returncode}"
        else:
            status = f"exited with status {returncode}"
        when = f"before answering {method}" if method is not None else "while the client waited for more messages"
        tail = f"stderr tail:\n{stderr_tail}" if stderr_tail else "its stderr was empty"
        super().__init__(ErrorCode.REQUEST_CANCELLED, f"agent process {status} {when}; {tail}")


class _AgentProcess:
    """Watches an agent subprocess: copies its stderr to ours, keeps the tail, notes its exit."""

    def __init__(self, process: Process, client: Client) -> None:
        self.process = process
        self.client = client
        self.exited = anyio.Event()
        self.stderr_done = anyio.Event()
        self._tail = bytearray()
        self._cut = False

    async def pump_stderr(self) -> None:
        """Forward the agent's stderr to ``sys.stderr`` (where tests capture it), keeping a bounded tail."""
        stream = self.process.stderr
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            if stream is not None:
                async for chunk in stream:
                    self._tail += chunk
                    if len(self._tail) > STDERR_TAIL_BYTES:
                        del self._tail[:-STDERR_TAIL_BYTES]
                        self._cut = True
                    _forward(decoder.decode(chunk))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            _forward(decoder.decode(b"", final=True))
            self.stderr_done.set()
            self.client._notify_change()

    async def watch_exit(self) -> None:
        """Record the exit status as soon as the process ends."""
        await self.process.wait()
        self.client.returncode = self.process.returncode
        self.exited.set()
        self.client._notify_change()

    def stderr_tail(self) -> str:
        """The kept end of the agent's stderr, decoded; ``...`` marks where earlier output was dropped."""
        data = bytes(self._tail)
        if not self._cut:
            return data.decode("utf-8", "replace")
        # Start at a line boundary when there is one, and never inside a UTF-8 character.
        newline = data.find(b"\n", 0, len(data) - 1)
        if newline >= 0:
            return "...\n" + data[newline + 1:].decode("utf-8", "replace")
        return "..." + data.lstrip(bytes(range(0x80, 0xC0))).decode("utf-8", "replace")

    def gone(self) -> bool:
        """True when the process exited and every message it wrote has been read."""
        return self.exited.is_set() and self.client._input_ended

    async def explain(self, method: str | None, timeout: float = 5.0) -> AgentExitedError | None:
        """The error for a connection that closed under the client, or ``None`` if the agent is still running."""
        with anyio.move_on_after(timeout):
            await self.exited.wait()
        returncode = self.process.returncode
        if returncode is None:
            return None
        with anyio.move_on_after(1.0):  # a grandchild may hold stderr open: quote what arrived
            await self.stderr_done.wait()
        return AgentExitedError(returncode, self.stderr_tail(), method)


def _forward(text: str) -> None:
    stream = sys.stderr
    if not text or stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # closed or unusable stderr: the tail is still kept
        pass


class _Tap:
    """Splits a byte stream into JSON lines and records them in the transcript."""

    def __init__(self, client: Client, direction: Direction) -> None:
        self._client = client
        self._direction = direction
        self._partial = b""
        self._ended = False

    def feed(self, data: bytes) -> None:
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        for line in lines:
            if line.strip():
                try:
                    message = orjson.loads(line)
                except orjson.JSONDecodeError:
                    message = {"<unparsed>": line.decode("utf-8", "replace")}
                self._client._record(self._direction, message)

    def closed(self) -> None:
        """The client closed this (sending) stream: the agent's input ended here (for the checker)."""
        if self._ended:
            return
        self._ended = True
        client = self._client
        client.closed_at = len(client.transcript)
        if client.checker is not None:
            client.checker.feed_end(self._direction)

    def end(self) -> None:
        """The stream ended: everything it carried has been recorded."""
        self._client._input_ended = True
        self._client._notify_change()


class _TappedReceive(ByteReceiveStream):
    def __init__(self, inner: ByteReceiveStream, tap: _Tap) -> None:
        self._inner = inner
        self._tap = tap

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._inner.receive(max_bytes)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._tap.end()
            raise
        self._tap.feed(data)
        return data

    async def aclose(self) -> None:
        await self._inner.aclose()


class _TappedSend(ByteSendStream):
    def __init__(self, inner: ByteSendStream, tap: _Tap) -> None:
        self._inner = inner
        self._tap = tap
        self._closed = False

    async def send(self, item: bytes) -> None:
        if self._closed:  # the client ended its side on purpose: what is left to say (e.g. the
            return        # answer to a question still held) is dropped, not reported as a failed stream
        self._tap.feed(item)
        await self._inner.send(item)

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._tap.closed()
        await self._inner.aclose()


class _Sent:
    """Returned by the notification helpers: already sent, so awaiting it (optional) does nothing."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


_SENT: Final = _Sent()


class Client:
    """An ACP v2 client driving one agent connection.

    Use it inside [`connect_agent`][acp_agent.testing.connect_agent] or [`spawn_agent`][acp_agent.testing.spawn_agent].
    Every request helper raises [`RequestError`][acp_agent.RequestError] when the agent answers with an error.

    Attributes:
        transcript: Every message in both directions, in wire order (`TranscriptEntry` items).
        sessions: The client's view of each session, by id (`SessionView`; also `view(session_id)`).
        pending_permissions: Permission requests held for a hand answer (``permission_policy=None``), by
            arrival number (0, 1, 2, ...): ``{"params": <the request's params>, "done": <event>}``. Read
            ``["params"]``; answer with `answer_permission`, which also removes the entry.
        pending_elicitations: Questions held for a hand answer (no ``elicitation_policy``, or it returned
            ``None``), shaped and numbered the same way; answer with `answer_elicitation`.
        returncode: The exit code of an agent subprocess once it ended, else ``None``.
        checker: The wire-rule checker fed with every message (``None`` with ``check=False``).
    """

    def __init__(
        self,
        receive: ByteReceiveStream,
        send: ByteSendStream,
        *,
        permission_policy: PermissionPolicy | None = allow_first,
        elicitation_policy: PermissionPolicy | None = None,
        on_message: Callable[[TranscriptEntry], None] | None = None,
        keep_transcript: bool = True,
        check: bool = True,
    ) -> None:
        self.transcript: list[TranscriptEntry] = []
        """Every message in both directions, in wire order (unless ``keep_transcript`` is off)."""
        self.keep_transcript = keep_transcript
        """Whether [`transcript`][acp_agent.testing.Client.transcript] records messages (turn off for bulk
        benchmarks)."""
        self.checker: WireChecker | None = WireChecker(raise_on_violation=False) if check else None
        """The wire-rule checker fed with every message (``check=False`` turns it off)."""
        self.on_message = on_message
        self._send_stream = _TappedSend(send, _Tap(self, "client->agent"))
        self.connection = Connection(_TappedReceive(receive, _Tap(self, "agent->client")), self._send_stream)
        self.connection.notifications["session/update"] = Method(self._on_update)
        self.connection.requests["session/request_permission"] = Method(
            self._on_permission, prepare=self._hold_permission
        )
        self.connection.requests["elicitation/create"] = Method(self._on_elicitation, prepare=self._hold_elicitation)
        self.mcp = McpHost(self.connection)
        """[unstable] The MCP servers this client hosts for the agent (see
        [`host_mcp_server`][acp_agent.testing.Client.host_mcp_server]) and the requests they received
        (``client.mcp.requests``)."""
        self.connection.requests["mcp/message"] = Method(self.mcp.serve, prepare=self.mcp.accept)
        self.elicitation_policy = elicitation_policy
        """Called with each ``elicitation/create``'s params: a returned result (e.g. ``{"action": "accept",
        "content": {...}}``) answers at once; ``None`` (or no policy) holds the question in
        [`pending_elicitations`][acp_agent.testing.Client.pending_elicitations] for
        [`answer_elicitation`][acp_agent.testing.Client.answer_elicitation]."""
        self.pending_elicitations: dict[int, dict[str, Any]] = {}
        """Elicitations waiting for a hand answer: arrival number (0, 1, 2, ...) -> ``{"params": <the request's
        params>, "done": <an event the answer sets>}``; read ``["params"]``, answer with
        [`answer_elicitation`][acp_agent.testing.Client.answer_elicitation]."""
        self._elicitation_count = 0
        self.permission_policy = permission_policy
        self.sessions: dict[str, SessionView] = {}
        self.pending_permissions: dict[Any, dict[str, Any]] = {}
        """Permission requests waiting for a hand answer, by arrival number (0, 1, 2, ...): ``{"params": <the
        request's params>, "done": <an event the answer sets>}``; read ``["params"]``, answer with
        [`answer_permission`][acp_agent.testing.Client.answer_permission]."""
        self._permission_count = 0
        self.returncode: int | None = None
        """Exit code of an agent subprocess, once it ended (see [`spawn_agent`][acp_agent.testing.spawn_agent])."""
        self._agent_process: _AgentProcess | None = None
        self._input_ended = False
        self.closed_at: int | None = None
        """How many [`transcript`][acp_agent.testing.Client.transcript] entries came before the client closed its
        sending side (the agent's end of input), once it did; pass it on with ``WireChecker.feed_transcript(...,
        end_at=)``."""
        self._changed = anyio.Event()
        self._clock = anyio.current_time

    # -- plumbing --------------------------------------------------------------------------

    def _record(self, direction: Direction, message: Any) -> None:
        entry = TranscriptEntry(direction, message, self._clock())
        if self.keep_transcript:
            self.transcript.append(entry)
        if self.checker is not None:
            self.checker.feed(direction, message)
        if direction == "agent->client":
            self._apply(message)
        if self.on_message is not None:
            self.on_message(entry)
        self._notify_change()

    def _notify_change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _apply(self, message: Any) -> None:
        # Session views are updated from the raw transcript, in arrival order.
        if not isinstance(message, dict) or message.get("method") != "session/update":
            return
        params = message.get("params") or {}
        view = self.view(params.get("sessionId", ""))
        update = params.get("update") or {}
        view.updates.append(update)
        view._apply(update)
        if update.get("sessionUpdate") == "state_update":
            view.state = update.get("state", "unknown")
            background = update.get("background")
            view.background = background if isinstance(background, list) else None
            if view.state == "idle" and update.get("stopReason") is not None:
                view.stop_reason = update["stopReason"]
                error = update.get("error")
                view.error = error if isinstance(error, dict) else None
                view.idle_count += 1

    async def _on_update(self, params: dict[str, Any]) -> None:
        return None  # already applied by the tap, in wire order

    def _hold_permission(self, params: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        # Runs as the request arrives, so hand-answer keys follow wire order on every backend.
        policy = self.permission_policy
        if policy is not None:
            answer = policy(params)
            if answer is not None:
                return answer, None
        key = self._permission_count
        self._permission_count += 1
        self.pending_permissions[key] = {"params": params, "done": anyio.Event()}
        self._notify_change()
        return params, key

    async def _on_permission(self, held: tuple[dict[str, Any], Any]) -> dict[str, Any]:
        answer, key = held
        if key is None:
            return answer
        slot = self.pending_permissions[key]
        done: anyio.Event = slot["done"]
        try:
            await done.wait()
        finally:
            self.pending_permissions.pop(key, None)
        result: dict[str, Any] = slot["result"]
        return result

    def _hold_elicitation(self, params: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        policy = self.elicitation_policy
        if policy is not None:
            answer = policy(params)
            if answer is not None:
                return answer, None
        key = self._elicitation_count
        self._elicitation_count += 1
        self.pending_elicitations[key] = {"params": params, "done": anyio.Event()}
        self._notify_change()
        return params, key

    async def _on_elicitation(self, held: tuple[dict[str, Any], int | None]) -> dict[str, Any]:
        answer, key = held
        if key is None:
            return answer
        slot = self.pending_elicitations[key]
        try:
            await slot["done"].wait()
        finally:
            self.pending_elicitations.pop(key, None)
        result: dict[str, Any] = slot["result"]
        return result

    def answer_elicitation(self, index: int, action: str, content: dict[str, Any] | None = None) -> None:
        """Answer a held elicitation: ``accept`` (with ``content``), ``decline`` or ``cancel``.

        ``index`` is the question's arrival number on this connection (0 for the first question held,
        1 for the second, ...): its key in [`pending_elicitations`][acp_agent.testing.Client.pending_elicitations], not
        a position in it.
        """
        slot = self.pending_elicitations[index]
        slot["result"] = {"action": action, **({"content": content} if content is not None else {})}
        slot["done"].set()

    def answer_permission(self, index: int, option_id: str | None) -> None:
        """Answer a permission request held for a hand answer (``None`` = cancelled)."""
        slot = self.pending_permissions[index]
        if option_id is None:
            slot["result"] = {"outcome": {"outcome": "cancelled"}}
        else:
            slot["result"] = {"outcome": {"outcome": "selected", "optionId": option_id}}
        slot["done"].set()

    def host_mcp_server(self, name: str, handler: McpHandler, *, server_id: str | None = None) -> dict[str, Any]:
        """[unstable] Host an MCP server for the agent, reached over ACP (``mcp/message``).

        ``handler`` (a plain or ``async`` function) gets each [`HostedMcpRequest`][acp_agent.testing.HostedMcpRequest]
        and returns its MCP result (or raises [`McpErrorAnswer`][acp_agent.testing.McpErrorAnswer]). Returns the
        ``{"type": "acp", "name", "serverId"}`` entry to pass in ``mcpServers``.
        """
        return self.mcp.add(name, handler, server_id)

    def view(self, session_id: str) -> SessionView:
        """The client's view of a session (created on first use)."""
        view = self.sessions.get(session_id)
        if view is None:
            view = self.sessions[session_id] = SessionView(session_id)
        return view

    @property
    def agent_pid(self) -> int | None:
        """The process id of the agent subprocess ([`spawn_agent`][acp_agent.testing.spawn_agent]); ``None`` for an
        agent in this process."""
        return self._agent_process.process.pid if self._agent_process is not None else None

    async def kill_agent(self, sig: signal.Signals = KILL) -> int:
        """Send ``sig`` to the agent subprocess (default SIGKILL: no shutdown, no last save, as in a crash)
        and wait until it has ended; returns its exit status ([`returncode`][acp_agent.testing.Client.returncode]: minus
        the signal).

        For crash tests: start the agent again with another [`spawn_agent`][acp_agent.testing.spawn_agent] on the same
        data directory and check what it kept. Raises ``RuntimeError`` for an agent served in this process
        ([`connect_agent`][acp_agent.testing.connect_agent]), which has no process of its own.
        """
        agent = self._agent_process
        if agent is None:
            raise RuntimeError("the agent runs in this process (connect_agent): there is no process to kill")
        if not agent.exited.is_set():
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                agent.process.send_signal(sig)
        await agent.exited.wait()
        assert self.returncode is not None
        return self.returncode

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, *,
                       interval: float = WAIT_FOR_INTERVAL) -> None:
        """Wait until ``predicate()`` holds, or time out (`TimeoutError`, whose message quotes the error of every
        session whose last work ended ``stopReason: "error"``: often the reason the condition never came).

        The predicate is checked after every message from the agent and every ``interval`` seconds
        besides, so it may look at the agent's own state too (``lambda: agent.done``), not only at
        what the client saw.

        Raises [`AgentExitedError`][acp_agent.testing.AgentExitedError] when an agent subprocess exited with it still
        false.
        """
        try:
            with anyio.fail_after(timeout):
                while not predicate():
                    agent = self._agent_process
                    if agent is not None and agent.gone():
                        exited = await agent.explain(None)
                        if exited is not None:
                            raise exited
                    with anyio.move_on_after(interval):
                        await self._changed.wait()
        except TimeoutError:
            failed = [f"{sid} ended its last work with stopReason error: {view.error.get('code')} "
                      f"{view.error.get('message')}" for sid, view in self.sessions.items() if view.error]
            if not failed:
                raise
            raise TimeoutError(f"the condition did not hold within {timeout} s; " + "; ".join(failed)) from None

    # -- requests ---------------------------------------------------------------------------

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send any request and return its result.

        Raises [`AgentExitedError`][acp_agent.testing.AgentExitedError] when an agent subprocess exited before
        answering.
        """
        try:
            return await self.connection.request(method, params)
        except RequestError as error:
            agent = self._agent_process
            if agent is None or error.code != ErrorCode.REQUEST_CANCELLED or not self.connection.closed:
                raise
            exited = await agent.explain(method)
            if exited is None:
                raise
            raise exited from None  # the bare "connection closed" it replaces adds nothing

    def notify(self, method: str, params: Mapping[str, Any]) -> Awaitable[None]:
        """Send any notification, at once (a notification has no answer to wait for).

        Call it plainly or ``await`` it, as you like: the returned object only lets ``await`` work like it does for
        the request helpers.
        """
        self.connection.notify(method, params)
        return _SENT

    async def initialize(self, protocol_version: int = 2, **params: Any) -> dict[str, Any]:
        """Run ``initialize`` and return the agent's answer."""
        body = {"protocolVersion": protocol_version, "info": {"name": "acp-agent-testing", "version": "0"}}
        body.update(params)
        result: dict[str, Any] = await self.request("initialize", body)
        return result

    async def new_session(self, cwd: str | None = None, **params: Any) -> str:
        """Create a session and return its id."""
        result = await self.request("session/new", {"cwd": cwd or os.getcwd(), **params})
        session_id: str = result["sessionId"]
        self.view(session_id)._lists(result)
        return session_id

    async def prompt(self, session_id: str, prompt: str | Sequence[dict[str, Any]], *,
                     idempotency_key: str | None = None) -> str:
        """Send a prompt and return its ``messageId`` (the answer arrives at insertion).

        ``idempotency_key`` [Preview] names the submission: send the same key on every attempt of one prompt
        and the agent inserts it once (every attempt gets the first one's ``messageId``).
        """
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        params: dict[str, Any] = {"sessionId": session_id, "prompt": blocks}
        if idempotency_key is not None:
            params["idempotencyKey"] = idempotency_key
        result = await self.request("session/prompt", params)
        message_id: str = result["messageId"]
        return message_id

    async def wait_idle(self, session_id: str, count: int = 1, timeout: float = 10.0) -> SessionView:
        """Wait until the session has ended ``count`` pieces of foreground work in total."""
        view = self.view(session_id)
        await self.wait_for(lambda: view.idle_count >= count, timeout)
        return view

    async def prompt_and_wait(self, session_id: str, prompt: str | Sequence[dict[str, Any]],
                              timeout: float = 10.0) -> SessionView:
        """Send a prompt and wait for the foreground work it started to end."""
        view = self.view(session_id)
        before = view.idle_count
        await self.prompt(session_id, prompt)
        return await self.wait_idle(session_id, before + 1, timeout)

    def cancel(self, session_id: str) -> Awaitable[None]:
        """Send ``session/cancel`` (a notification, sent at once; ``await client.cancel(sid)`` works too)."""
        return self.notify("session/cancel", {"sessionId": session_id})

    async def resume_session(self, session_id: str, cwd: str | None = None, *, replay: bool = False,
                             **params: Any) -> dict[str, Any]:
        """``session/resume`` (``replay=True`` asks for the whole retained history)."""
        body: dict[str, Any] = {"sessionId": session_id, "cwd": cwd or os.getcwd(), **params}
        if replay:
            body["replayFrom"] = {"type": "start"}
        result: dict[str, Any] = await self.request("session/resume", body)
        return result

    async def fork_session(self, session_id: str, cwd: str | None = None, **params: Any) -> str:
        """``session/fork``; returns the new session's id."""
        result = await self.request("session/fork", {"sessionId": session_id, "cwd": cwd or os.getcwd(), **params})
        fork_id: str = result["sessionId"]
        self.view(fork_id)._lists(result)
        return fork_id

    async def set_config_option(self, session_id: str, config_id: str, value: str | bool) -> list[dict[str, Any]]:
        """``session/set_config_option`` (``type`` ``"boolean"`` for a bool, ``"id"`` for a select value);
        returns the complete option list the agent answered with (also in
        [`SessionView.config_options`][acp_agent.testing.SessionView.config_options])."""
        kind = "boolean" if isinstance(value, bool) else "id"
        result = await self.request("session/set_config_option",
                                    {"sessionId": session_id, "configId": config_id, "type": kind, "value": value})
        self.view(session_id)._lists(result)
        options: list[dict[str, Any]] = result["configOptions"]
        return options

    async def list_sessions(self, cwd: str | None = None, *, archived: str | None = None) -> list[dict[str, Any]]:
        """Every session ``session/list`` reports (all pages); ``archived`` (unstable) is its filter:
        ``"exclude"`` (the agent's default), ``"include"`` or ``"only"``."""
        sessions: list[dict[str, Any]] = []
        params: dict[str, Any] = {} if cwd is None else {"cwd": cwd}
        if archived is not None:
            params["archived"] = archived
        while True:
            page = await self.request("session/list", params)
            sessions += page["sessions"]
            if page.get("nextCursor") is None:
                return sessions
            params = {**params, "cursor": page["nextCursor"]}

    async def cancel_tool_call(self, session_id: str, tool_call_id: str) -> None:
        """``tool_call/cancel`` (answered once the agent accepted; the final status follows)."""
        await self.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": tool_call_id})

    async def cancel_terminal(self, session_id: str, terminal_id: str) -> None:
        """``terminal/cancel`` (answered once accepted; the ``exitStatus`` follows)."""
        await self.request("terminal/cancel", {"sessionId": session_id, "terminalId": terminal_id})

    def cancel_request(self, request_id: int) -> Awaitable[None]:
        """Withdraw one of this client's pending requests with ``$/cancel_request`` (a notification, sent at once;
        awaiting it works too)."""
        return self.notify("$/cancel_request", {"requestId": request_id})

    @property
    def last_request_id(self) -> int:
        """The id of the most recent request this client sent."""
        return self.connection.next_request_id - 1

    async def close_session(self, session_id: str) -> None:
        """Send ``session/close`` and wait for the answer."""
        await self.request("session/close", {"sessionId": session_id})

    async def close(self) -> None:
        """Close the client's sending side (the agent sees end of input)."""
        await self._send_stream.aclose()

    async def wind_down(self, peer_done: anyio.Event, timeout: float = 10.0) -> None:
        """End the connection politely: [`close`][acp_agent.testing.Client.close], wait up to ``timeout`` seconds for
        ``peer_done`` (the agent, or the transport carrying it, has finished), then stop reading."""
        await self.close()
        with anyio.move_on_after(timeout):
            await peer_done.wait()
        self.connection.close()

    def check(self) -> None:
        """Raise ``AssertionError`` listing every wire-rule violation seen (end of connection)."""
        if self.checker is None:
            return
        self.checker.finish()
        if self.checker.violations:
            details = "\n".join(str(v) for v in self.checker.violations)
            raise AssertionError(f"the agent broke {len(self.checker.violations)} wire rule(s):\n{details}")

    def sent_by_agent(self) -> list[Any]:
        """Every message the agent sent, in order."""
        return [e.message for e in self.transcript if e.direction == "agent->client"]


@asynccontextmanager
async def connect_agent(agent: Any, *, limits: Limits | None = None, store: SessionStore | None = None,
                        **client_options: Any) -> AsyncIterator[Client]:
    """Serve ``agent`` in this process and yield a [`Client`][acp_agent.testing.Client] connected to it.

    ``limits`` and ``store`` are passed to [`serve`][acp_agent.serve] (defaults: ``agent.limits``;
    ``agent.store``, else a fresh in-memory store).

    When the block ends normally, the transcript is judged by the client's
    [`WireChecker`][acp_agent.testing.WireChecker] (pass ``check=False`` to skip).
    """
    to_agent_send, to_agent_receive = byte_pipe()
    to_client_send, to_client_receive = byte_pipe()
    client = Client(to_client_receive, to_agent_send, **client_options)
    async with anyio.create_task_group() as tg:
        agent_done = anyio.Event()

        async def run_agent() -> None:
            try:
                await serve(agent, to_agent_receive, to_client_send, limits=limits, store=store)
            finally:
                await to_client_send.aclose()
                agent_done.set()

        tg.start_soon(run_agent)
        tg.start_soon(client.connection.run)
        try:
            yield client
        finally:
            await client.wind_down(agent_done)
            tg.cancel_scope.cancel()
    client.check()


@asynccontextmanager
async def spawn_agent(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, limits: Limits | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """Launch an agent subprocess and yield a [`Client`][acp_agent.testing.Client] talking to it over its pipes.

    ``env`` adds to (and overrides) this process's environment for the agent.

    The agent's stderr is copied to this process's ``sys.stderr`` (so pytest shows it with the
    test). If the agent exits while a request waits for its answer, that request raises
    [`AgentExitedError`][acp_agent.testing.AgentExitedError] (exit status and stderr tail) rather than a bare
    cancellation; so does [`Client.wait_for`][acp_agent.testing.Client.wait_for], and the error leaves this block as
    itself, not wrapped in an exception group.

    On exit the client closes the agent's stdin and waits for the process to end
    (killing it after 10 seconds); its exit code is then in ``client.returncode``.
    ``limits`` cannot reach another process: the agent's own ``run_stdio(agent, limits=...)``
    (or its ``Agent.limits``) sets them, so passing one raises ``TypeError``.

    When the block ends normally, the whole transcript is judged by the client's
    [`WireChecker`][acp_agent.testing.WireChecker], as for [`connect_agent`][acp_agent.testing.connect_agent]: a
    broken rule raises `AssertionError` listing every violation (``check=False`` skips it). Validation
    against the official JSON Schema is not done here; the pytest fixtures (``acp_client``,
    ``acp_connect``) do both.
    """
    if limits is not None:
        raise TypeError("an agent subprocess sets its own limits (run_stdio(agent, limits=...)); "
                        "limits= applies to connect_agent")
    process = await anyio.open_process(
        list(command), env={**os.environ, **(env or {})}, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    client = Client(process.stdout, process.stdin, **client_options)
    watch = client._agent_process = _AgentProcess(process, client)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.pump_stderr)
            tg.start_soon(watch.watch_exit)
            tg.start_soon(client.connection.run)
            try:
                yield client
            finally:
                with anyio.CancelScope(shield=True):
                    await client.close()
                    with anyio.move_on_after(10):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                    client.returncode = process.returncode
                    with anyio.move_on_after(1):  # let its last stderr lines through
                        await watch.stderr_done.wait()
                    client.connection.close()
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The body's own AgentExitedError (the watcher tasks never fail) reads best unwrapped.
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], AgentExitedError):
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.stderr.aclose()
    client.check()

