"""The inspector's side of the agent: one run of the agent at a time, and the event log the page reads.

An `Inspection` starts the agent (a subprocess on pipes, or a remote agent through
[`connect_remote`][acp_agent.testing.connect_remote]), drives it with the checked test
[`Client`][acp_agent.testing.Client] (permission requests and elicitations held for the page to
answer) and turns everything it sees into *events*, plain JSON objects the page renders:

- ``wire``: one message (``dir`` ``"out"`` client to agent, ``"in"`` agent to client), its time, and the
  ``problems`` found on it: every schema error and every WireChecker violation whose latest offending
  message it is, with the rule's words and level; a line that was not JSON has ``unparsed``.
- ``stderr``: text the agent wrote on its stderr.
- ``status``: the run's state (``starting``, ``running``, ``exited``), its exit status and stderr tail.

Every event is kept (a page that connects later gets them all), sent to each connected page, and
written to the ``--record`` file; ``--replay`` loads such a file instead of running an agent.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import os
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import orjson
from anyio.abc import TaskGroup

from ..testing import Client, SchemaValidator, TranscriptEntry, connect_remote
from ..testing.remote import RemoteTransport

__all__ = ["AgentTarget", "Event", "Inspection", "load_recording"]

logger = logging.getLogger(__name__)

Event = dict[str, Any]
"""One thing the page shows: ``{"type": "wire" | "stderr" | "status", ...}``."""

STDERR_TAIL_CHARS = 4000
"""How much of the agent's stderr an exit status quotes."""

INITIALIZE_TIMEOUT = 30.0
"""Seconds the inspector waits for the ``initialize`` answer before it shows the agent as running anyway."""

DEFAULT_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
"""What the inspector advertises at ``initialize`` until the page changes it."""


@dataclass(slots=True)
class AgentTarget:
    """Which agent to inspect: a command on pipes, or a remote endpoint."""

    command: Sequence[str] | None = None
    url: str | None = None
    transport: RemoteTransport = "websocket"
    token: str | None = None
    description: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """Added to (and overriding) the inspector's environment for an agent process."""
    cwd: str | None = None
    """The agent process's working directory and the ``cwd`` the page sends (default: the inspector's)."""


def load_recording(path: Path) -> list[Event]:
    """The events of a ``--record`` file (one JSON object a line)."""
    events: list[Event] = []
    with path.open("rb") as file:
        for line in file:
            if line.strip():
                events.append(orjson.loads(line))
    return events


class Inspection:
    """The agent being inspected, run after run, and every event seen so far."""

    def __init__(self, target: AgentTarget | None, *, record: IO[bytes] | None = None,
                 events: list[Event] | None = None) -> None:
        self.target = target
        self.events: list[Event] = list(events or [])
        self.listeners: set[Callable[[Event], None]] = set()
        self.capabilities: dict[str, Any] = dict(DEFAULT_CAPABILITIES)
        self.client: Client | None = None
        self.run_number = max((e.get("run", 0) for e in self.events), default=0)
        self._record = record
        self._validator: SchemaValidator | None = None
        self._tg: TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._run_done: anyio.Event | None = None
        self._questions: dict[str, list[str]] = {}
        self._asked: dict[str, str] = {}  # the client's request ids -> methods, for the schema of answers
        self._message_events: dict[int, Event] = {}  # id() of a transcript message -> its wire event
        self._violations_seen = 0
        self._stderr = ""  # the last STDERR_TAIL_CHARS characters of the agent's stderr

    @property
    def replay(self) -> bool:
        """Whether this inspection only shows a recording (no agent)."""
        return self.target is None

    # -- events -----------------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        """Keep ``event``, write it to the recording and hand it to every listener."""
        event["seq"] = len(self.events)
        self.events.append(event)
        if self._record is not None:
            self._record.write(orjson.dumps(event, default=repr) + b"\n")
            self._record.flush()
        for listener in list(self.listeners):
            listener(event)

    def _status(self, state: str, **fields: Any) -> None:
        assert self.target is not None
        self.emit({"type": "status", "run": self.run_number, "state": state, "agent": self.target.description,
                   "capabilities": self.capabilities, "cwd": self.target.cwd or os.getcwd(), **fields})

    # -- running the agent ------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run the agent (restarted on request) until cancelled; a replay only waits."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.target is not None:
                self.restart()
            await anyio.sleep_forever()

    def restart(self, capabilities: dict[str, Any] | None = None) -> None:
        """Stop the current run (if any) and start the agent again, advertising ``capabilities``."""
        if self.target is None or self._tg is None:
            raise RuntimeError("a replay has no agent to start")
        if capabilities is not None:
            self.capabilities = capabilities
        previous, stop = self._run_done, self._stop
        if stop is not None:
            stop.set()
        self._tg.start_soon(self._run, previous)

    async def _run(self, previous: anyio.Event | None) -> None:
        if previous is not None:
            await previous.wait()
        self._stop, self._run_done = anyio.Event(), anyio.Event()
        stop, done = self._stop, self._run_done
        self.run_number += 1
        self._questions = {"permission": [], "elicitation": []}
        self._status("starting")
        try:
            async with self._connect() as (client, exited):
                self.client = client
                with anyio.CancelScope() as scope:
                    with anyio.move_on_after(INITIALIZE_TIMEOUT):  # a hung agent still gets a page
                        await self._initialize(client)
                    self._status("running")

                    async def on_stop() -> None:
                        await stop.wait()
                        scope.cancel()

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(on_stop)
                        await exited.wait()
                        tg.cancel_scope.cancel()
        except Exception as exc:  # the agent could not be started or reached
            logger.debug("inspector: run failed", exc_info=True)
            # The page shows it too; the terminal that started `dev` should not show only the URL.
            logger.warning("inspector: cannot run %s: %s: %s (the page can restart it)",
                           self.target.description if self.target else "the agent", type(exc).__name__, exc)
            self._status("exited", returncode=None, error=f"{type(exc).__name__}: {exc}",
                         stderrTail=self._stderr_tail())
        finally:
            self.client = None
            done.set()

    async def _initialize(self, client: Client) -> None:
        with contextlib.suppress(Exception):  # the answer (or error) is on the wire for the page
            await client.initialize(capabilities=self.capabilities, info={"name": "acp-agent inspector",
                                                                           "version": "0"})

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Client, anyio.Event]]:
        target = self.target
        assert target is not None
        options: dict[str, Any] = {"permission_policy": None, "elicitation_policy": None,
                                   "on_message": self._on_message}
        if target.url is not None:
            exited = anyio.Event()
            try:
                async with connect_remote(target.url, transport=target.transport, token=target.token,
                                          **options) as client:
                    self._watch_remote(client, exited)
                    yield client, exited
            except AssertionError:  # the checker's summary at the end: each violation was shown already
                if client.checker is None or not client.checker.violations:
                    raise
            self._finish_checks(client)
            self._status("exited", returncode=None, stderrTail="")
            return
        assert target.command is not None
        process = await anyio.open_process(list(target.command), stderr=subprocess.PIPE,
                                           env={**os.environ, **target.env}, cwd=target.cwd)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        client = Client(process.stdout, process.stdin, **options)
        exited = anyio.Event()
        self._stderr = ""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump_stderr, process.stderr)
            tg.start_soon(client.connection.run)

            async def wait_exit() -> None:
                await process.wait()
                exited.set()

            tg.start_soon(wait_exit)
            try:
                yield client, exited
            finally:
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(Exception):
                        await client.close()
                    with anyio.move_on_after(3):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                    with contextlib.suppress(Exception):  # closed, or given up after a second
                        await client.wait_for(lambda: client.connection.closed, timeout=1)
                    client.connection.close()
                tg.cancel_scope.cancel()
        self._finish_checks(client)
        self._status("exited", returncode=process.returncode, stderrTail=self._stderr_tail())

    def _watch_remote(self, client: Client, exited: anyio.Event) -> None:
        async def watch() -> None:
            await client.wait_for(lambda: client.connection.closed, timeout=float("inf"))
            exited.set()

        assert self._tg is not None
        self._tg.start_soon(watch)

    async def _pump_stderr(self, stream: Any) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character split between reads stays whole
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in stream:
                text = decoder.decode(chunk)
                if text:
                    self._stderr = (self._stderr + text)[-STDERR_TAIL_CHARS:]
                    self.emit({"type": "stderr", "run": self.run_number, "t": self._now(), "text": text})

    def _stderr_tail(self) -> str:
        return self._stderr

    @staticmethod
    def _now() -> float:
        return round(time.time(), 4)

    # -- what the client sees ---------------------------------------------------------------------

    def _on_message(self, entry: TranscriptEntry) -> None:
        client = self.client
        message = entry.message
        unparsed = isinstance(message, dict) and set(message) == {"<unparsed>"}
        event: Event = {"type": "wire", "run": self.run_number, "t": self._now(),
                        "dir": "out" if entry.direction == "client->agent" else "in", "msg": message,
                        "problems": []}
        if unparsed:
            event["unparsed"] = True
        if entry.direction == "agent->client" and not unparsed:
            event["problems"] += [{"rule": "schema", "level": "MUST", "text": p} for p in self._schema(message)]
            self._hold_question(message)
        elif entry.direction == "client->agent" and isinstance(message, dict) and "id" in message \
                and "method" in message:
            self._asked[_key(message["id"])] = message["method"]
        checker = client.checker if client is not None else None
        self._message_events[id(message)] = event
        if checker is not None:
            self._attach(checker.violations, event)
        self.emit(event)

    def _schema(self, message: Any) -> list[str]:
        if self._validator is None:
            self._validator = SchemaValidator()
        answered = None
        if isinstance(message, dict) and "method" not in message and "id" in message:
            answered = self._asked.pop(_key(message["id"]), None)
        return self._validator.check(message, answered)

    def _attach(self, violations: list[Any], current: Event | None, *, ended: bool = False) -> None:
        """Show each violation not yet shown on the event of its latest offending message: added to
        ``current`` (not yet sent) directly, announced as a ``problem`` event for one already sent.
        ``ended``: the run is over, so an unanswered request (R8) was in flight when the agent went away."""
        for violation in violations[self._violations_seen:]:
            owner = current
            for message in reversed(violation.messages):
                found = self._message_events.get(id(message))
                if found is not None:
                    owner = found
                    break
            if owner is None:
                continue
            text = violation.text
            if ended and violation.rule == "R8":
                text += ": the agent exited with it in flight (expected after a crash)"
            problem = {"rule": violation.rule, "level": violation.level, "text": text,
                       "statement": violation.statement}
            if "seq" not in owner:
                owner["problems"].append(problem)
            else:
                self.emit({"type": "problem", "run": self.run_number, "at": owner["seq"], "problem": problem})
        self._violations_seen = len(violations)

    def _finish_checks(self, client: Client) -> None:
        """End-of-connection rules (unanswered requests, promised follow-ups), once the run ended."""
        checker = client.checker
        if checker is None:
            return
        with contextlib.suppress(AssertionError):
            checker.finish()
        last = next((e for e in reversed(self.events) if e["type"] == "wire" and e["run"] == self.run_number), None)
        self._attach(checker.violations, last, ended=True)
        self._violations_seen = 0
        self._message_events.clear()
        self._asked.clear()

    # -- questions the page answers ---------------------------------------------------------------

    def _hold_question(self, message: Any) -> None:
        if not isinstance(message, dict) or "id" not in message:
            return
        kind = {"session/request_permission": "permission", "elicitation/create": "elicitation"}.get(
            str(message.get("method")))
        if kind is not None:
            self._questions.setdefault(kind, []).append(_key(message["id"]))

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        """Answer the agent's held permission request or elicitation ``request_id`` with ``result``."""
        client = self.client
        if client is None:
            raise LookupError("the agent is not running")
        key = _key(request_id)
        if key in self._questions.get("permission", []):
            index = self._questions["permission"].index(key)
            outcome = result.get("outcome") or {}
            option = outcome.get("optionId") if outcome.get("outcome") == "selected" else None
            client.answer_permission(index, option)
        elif key in self._questions.get("elicitation", []):
            index = self._questions["elicitation"].index(key)
            client.answer_elicitation(index, str(result.get("action", "cancel")), result.get("content"))
        else:
            raise LookupError(f"no question {request_id!r} is waiting")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request of the page's to the agent and return its result."""
        client = self.client
        if client is None:
            raise LookupError("the agent is not running")
        return await client.request(method, params)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification of the page's to the agent."""
        client = self.client
        if client is None:
            raise LookupError("the agent is not running")
        client.notify(method, params)

    async def stop(self) -> None:
        """End the current run (the agent's stdin is closed; it is killed if it lingers)."""
        if self._stop is not None:
            self._stop.set()
        if self._run_done is not None:
            await self._run_done.wait()


def _key(request_id: Any) -> str:
    return json.dumps(request_id)
