"""Fuzzing a live agent process over real pipes: the driver, the oracle and the input strategies.

:class:`LiveAgent` keeps one agent subprocess running across many generated inputs. For each input
(:class:`Case`, one or more raw lines) it computes what the agent must answer from the JSON-RPC rules
of the reference (§1.3-§1.5, R8-R14), sends the bytes, collects every answer, checks each against the
expectation, then probes health (``session/new``, a prompt that ends ``idle``/``end_turn``,
``session/close``). Every line the agent writes is parsed and validated against the official schema.
A failure is recorded (with the input) and the agent restarted; the caller asserts at the end.

Params are generated from the official schema's request definitions (``x-method``), so the field
lists are not maintained by hand; whether a params object is valid is judged by ``jsonschema``
against that same definition, independently of the library's pydantic models.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from hypothesis import strategies as st

from acp_agent._runtime.runtime import AgentRuntime
from acp_agent._wire.connection import MAX_NESTING
from acp_agent._wire.framing import DEFAULT_MAX_MESSAGE_BYTES
from acp_agent.testing.schema import SchemaValidator, default_schema_path
from acp_agent.testing.streams import byte_pipe

ROOT = Path(__file__).resolve().parents[2]
AGENTS: dict[str, Path] = {
    "echo": ROOT / "examples" / "echo_agent.py",
    "background": ROOT / "examples" / "background_agent.py",
    "forking": ROOT / "tests" / "helpers" / "fuzz_forking_agent.py",
}

HEALTH_EVERY = int(os.environ.get("ACP_FUZZ_HEALTH_EVERY", "1"))
"""Run the full session health probe after every Nth input; the inputs between get a one-request ping."""

PROGRESS_EVERY = 5000
"""Print running counts every this many inputs (so a long run reports figures as it goes)."""

HANG_TIMEOUT = float(os.environ.get("ACP_FUZZ_HANG_TIMEOUT", "15"))
"""Seconds an expected answer (or a health-probe step) may take before the case counts as a hang."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, CANCELLED, NOT_FOUND, UNSUPPORTED_VERSION = -32603, -32800, -32002, -32022
RESULT = "result"
"""Marker in an expectation's allowed set: a success answer is acceptable."""


# -- which methods the agent accepts, derived from the library itself -------------------------------------


def accepted_methods(agent_name: str) -> tuple[set[str], set[str]]:
    """(request methods, notification methods) an agent registers, read off a real AgentRuntime."""
    if agent_name == "echo":
        sys.path.insert(0, str(ROOT / "examples"))
        from echo_agent import EchoAgent

        agent: Any = EchoAgent()
    elif agent_name == "background":
        sys.path.insert(0, str(ROOT / "examples"))
        from background_agent import BackgroundAgent

        agent = BackgroundAgent()
    else:
        from tests.helpers.agents import ForkingAgent

        agent = ForkingAgent()
    receive_send, receive = byte_pipe()
    send, _ = byte_pipe()
    connection = AgentRuntime(agent, receive, send).connection
    del receive_send
    return set(connection.requests), set(connection.notifications) | {"$/cancel_request"}


# -- the oracle ---------------------------------------------------------------------------------------------


@dataclass
class Expect:
    """One answer the agent owes: its id and the codes (or :data:`RESULT`) it may carry."""

    id: Any
    allowed: frozenset[Any]
    method: str | None = None
    in_batch: bool = False
    note: str = ""


def id_key(value: Any) -> tuple[str, Any]:
    """Ids compare by JSON type and value (1 and "1" differ; 5 and 5.0 are the same number)."""
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("n", None)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("i", value)
    return ("o", json.dumps(value, sort_keys=True))


def valid_id(value: Any) -> bool:
    """R6: a string or an int64 (an integral float only where it is exact)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, float) and value.is_integer() and abs(value) <= 2**53


def depth(value: Any) -> int:
    """Nesting depth of objects/arrays (a scalar is 0), iteratively."""
    best = 0
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        best = max(best, level)
        stack.extend((child, level + 1) for child in children)
    return best


class Oracle:
    """Decides, per incoming message, which answer (if any) the agent owes (reference §1.3-§1.5)."""

    def __init__(self, requests: set[str], notifications: set[str], schema: SchemaValidator) -> None:
        self.requests = requests
        self.notifications = notifications
        self.schema = schema
        self.initialized = True
        """A successful ``initialize`` happened: other requests are served."""
        self.locked = True
        """Another request was received after initialization: ``initialize`` is refused (-32600)."""
        self._validators: dict[str, Any] = {}
        self.request_defs: dict[str, str] = {}
        self.notification_defs: dict[str, str] = {}
        for name, definition in schema.schema["$defs"].items():
            method, side = definition.get("x-method"), definition.get("x-side")
            if method is None or side not in ("agent", "protocol"):
                continue
            if name.endswith("Request"):
                self.request_defs[method] = name
            elif name.endswith("Notification"):
                self.notification_defs[method] = name

    def params_valid(self, method: str, params: Any) -> bool:
        """Whether ``params`` fit the official schema's definition for ``method``."""
        name = self.request_defs.get(method) or self.notification_defs.get(method)
        if name is None:
            return False
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            validator = self._validators[name] = Draft202012Validator(
                {"$ref": f"#/$defs/{name}", "$defs": self.schema.schema["$defs"]}
            )
        return bool(validator.is_valid(params))

    def leniently_valid(self, method: str, params: Any) -> bool:
        """Whether every schema error is one the schema itself lets a reader forgive.

        Fields marked ``x-deserialize-default-on-null`` / ``-on-error`` and arrays marked
        ``x-deserialize-skip-invalid-items`` are read leniently by the official SDKs; an agent may
        accept such params (or refuse them with -32602).
        """
        name = self.request_defs.get(method) or self.notification_defs.get(method)
        if name is None or self.params_valid(method, params):
            return False
        self._current = name
        return all(self._forgiven(error) for error in self._validators[name].iter_errors(params))

    def line(self, raw: bytes, cancelled_ids: set[tuple[str, Any]], seen: set[tuple[str, Any]]
             ) -> tuple[list[Expect], bool]:
        """Expectations for one line as LineReader yields it, and whether they arrive as one array."""
        if not raw.strip():
            return [], False
        if len(raw) > DEFAULT_MAX_MESSAGE_BYTES:
            return [Expect(None, frozenset({INVALID_REQUEST}), note="oversized line")], False
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return [Expect(None, frozenset({PARSE_ERROR}), note="not JSON")], False
        if isinstance(message, list):
            if not message:
                return [Expect(None, frozenset({INVALID_REQUEST}), note="empty batch")], False
            out: list[Expect] = []
            for entry in message:
                expect = self._with_duplicates(self.message(entry, cancelled_ids), seen)
                if expect is not None:
                    expect.in_batch = True
                    out.append(expect)
            return out, bool(out)
        expect = self._with_duplicates(self.message(message, cancelled_ids), seen)
        return ([expect] if expect is not None else []), False

    @staticmethod
    def _with_duplicates(expect: Expect | None, seen: set[tuple[str, Any]]) -> Expect | None:
        # A second request with an id still in flight is refused -32600 (with that id); whether the
        # first one is still in flight when the second arrives depends on what it was.
        if expect is None or expect.id is None:
            return expect
        key = id_key(expect.id)
        if key in seen:
            expect.allowed = expect.allowed | {INVALID_REQUEST}
        seen.add(key)
        return expect

    def message(self, message: Any, cancelled_ids: set[tuple[str, Any]]) -> Expect | None:
        """The answer owed to one message (``None``: a notification or a response, never answered)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return Expect(None, frozenset({INVALID_REQUEST}), note="not a JSON-RPC object")
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                return None  # a response: matched against our requests, or dropped
            return Expect(None, frozenset({INVALID_REQUEST}), note="neither request nor response")
        if not isinstance(method, str):
            return Expect(None, frozenset({INVALID_REQUEST}), note="method is not a string")
        if "id" not in message:
            return None
        request_id = message["id"]
        if not valid_id(request_id):
            return Expect(None, frozenset({INVALID_REQUEST}), method, note="invalid id")
        params = message.get("params", {})
        allowed: set[Any] = set()
        if id_key(request_id) in cancelled_ids:
            allowed.add(CANCELLED)
        if not isinstance(params, (dict, list)):
            return Expect(request_id, frozenset({INVALID_REQUEST}), method, note="params not structured")
        if not self.initialized and method != "initialize":
            return Expect(request_id, frozenset({INVALID_REQUEST}), method, note="before initialize")
        if method == "initialize" and self.locked:
            return Expect(request_id, frozenset({INVALID_REQUEST}), method, note="initialize after other requests")
        if method not in self.requests:
            return Expect(request_id, frozenset({METHOD_NOT_FOUND, *allowed}), method, note="unknown method")
        if depth(message) > MAX_NESTING:
            return Expect(request_id, frozenset({INVALID_PARAMS, *allowed}), method, note="nested too deeply")
        if isinstance(params, list) or not self.params_valid(method, params):
            allowed.add(INVALID_PARAMS)
            if isinstance(params, dict) and self.leniently_valid(method, params):
                allowed |= {RESULT, NOT_FOUND}
            if method == "session/prompt" and isinstance(params, dict) and params.get("prompt") == [] and \
                    self.params_valid(method, {**params, "prompt": [{"type": "text", "text": "x"}]}):
                allowed |= {RESULT, NOT_FOUND}  # an empty prompt MAY be rejected (§ session/prompt), or run
            if method == "initialize" and isinstance(params, dict):
                version = params.get("protocolVersion")
                if isinstance(version, int) and not isinstance(version, bool) and 2 < version <= 65535:
                    allowed.add(RESULT)  # R24: a newer client's params are read leniently
            return Expect(request_id, frozenset(allowed), method, note="params fail the schema")
        # Schema-valid params: success, or a semantic refusal. Never internal errors or the wrong kind.
        allowed |= {RESULT, INVALID_PARAMS, NOT_FOUND}
        if method == "initialize":
            allowed.add(UNSUPPORTED_VERSION)
        return Expect(request_id, frozenset(allowed), method, note="valid params")

    def _forgiven(self, error: Any) -> bool:
        defs = self.schema.schema["$defs"]
        node: Any = defs[self._current]
        for key in error.absolute_schema_path:
            if self._forgives(node, error, key):
                return True
            if key == "$ref" and isinstance(node, dict) and "$ref" in node:
                node = defs[node["$ref"].rsplit("/", 1)[1]]
                continue
            while isinstance(node, dict) and key not in node and "$ref" in node:
                node = defs[node["$ref"].rsplit("/", 1)[1]]
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError):
                return False
        if self._forgives(node, error, None):
            return True
        return bool(error.context) and any(self._forgiven(sub) for sub in error.context)


    @staticmethod
    def _forgives(node: Any, error: Any, next_key: Any) -> bool:
        if not isinstance(node, dict):
            return False
        if node.get("x-deserialize-default-on-error"):
            return True
        if node.get("x-deserialize-skip-invalid-items") and next_key == "items":
            return True
        return bool(node.get("x-deserialize-default-on-null")) and error.instance is None


_LENIENT: Final = frozenset({"x-deserialize-default-on-null", "x-deserialize-default-on-error",
                             "x-deserialize-skip-invalid-items"})


# -- the live agent -----------------------------------------------------------------------------------------


@dataclass
class Stats:
    """What one fuzz run did."""

    inputs: int = 0
    lines: int = 0
    messages: int = 0
    answers: int = 0
    agent_lines: int = 0
    crashes: int = 0
    hangs: int = 0
    wrong: int = 0
    restarts: int = 0
    failures: list[str] = field(default_factory=list)

    def save(self, directory: str, label: str) -> None:
        """Write the counts to ``directory`` (``make fuzz`` runs several processes and adds them up)."""
        counts = {k: v for k, v in vars(self).items() if k != "failures"}
        counts["failures"] = len(self.failures)
        name = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")
        Path(directory, f"{name}-{os.getpid()}-{time.monotonic_ns()}.json").write_text(json.dumps(counts))

    def summary(self, label: str) -> str:
        """The one-line report printed at the end of a run."""
        return (f"fuzz[{label}]: {self.inputs} inputs sent ({self.lines} lines, {self.messages} JSON-RPC messages), "
                f"{self.answers} answers checked, {self.agent_lines} agent lines validated; "
                f"{self.crashes} crashes, {self.hangs} hangs, {self.wrong} wrong answers, {self.restarts} restarts")


class Failure(Exception):
    """A case went wrong: kind is ``crash``, ``hang`` or ``wrong``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


_NORMALIZE = re.compile(rb'"(?:sess|msg|msg_user|tc|term|wake|sub)_[0-9A-Za-z_]+"|"updatedAt":"[^"]*"|"id":[0-9]+')


class LiveAgent:
    """One agent subprocess, fed fuzz cases over real pipes and probed for health after each."""

    def __init__(self, name: str, stats: Stats, *, initialize: bool = True) -> None:
        self.name = name
        self._initialize = initialize
        self.stats = stats
        if not default_schema_path().exists():
            raise RuntimeError("the official schema is missing: run `make test` (npm ci in tests/interop)")
        self.schema = SchemaValidator()
        requests, notifications = accepted_methods(name)
        self.oracle = Oracle(requests, notifications, self.schema)
        self.session_ids: list[str] = []
        self._valid_lines: set[bytes] = set()
        self._probe = 0
        self._start()

    # -- process management --------------------------------------------------------------------------------

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the agent
        self._stderr_pos = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(AGENTS[self.name])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, cwd=str(ROOT), bufsize=1 << 16,
        )
        self._queue: queue.Queue[Any] = queue.Queue()
        self._asked: dict[tuple[str, Any], str] = {}
        self._reader = threading.Thread(target=self._read, args=(self.proc, self._queue), daemon=True)
        self._reader.start()
        self.oracle.initialized = self.oracle.locked = False
        if self._initialize:
            self._handshake()
            self.session_ids = [self.call("session/new", {"cwd": str(ROOT)})["result"]["sessionId"]
                                for _ in range(2)]

    def _handshake(self) -> None:
        answer = self.call("initialize", {"protocolVersion": 2, "info": {"name": "fuzz", "version": "1"}})
        if "result" not in answer:
            raise Failure("wrong", f"initialize failed: {answer}")
        self.oracle.initialized = self.oracle.locked = True

    def _read(self, proc: subprocess.Popen[bytes], out: queue.Queue[Any]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            out.put(raw)
        out.put(None)

    def restart(self, why: str) -> None:
        """Kill the agent and start a fresh one (itself a failure, counted by the caller)."""
        self.stats.restarts += 1
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._start()

    def stderr_tail(self, size: int = 3000) -> str:
        """The end of the agent's log."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-size:]

    def _new_log(self) -> str:
        self._stderr.seek(self._stderr_pos)
        text = self._stderr.read().decode(errors="replace")
        self._stderr_pos = self._stderr.tell()
        return text

    def finish(self) -> list[str]:
        """Close stdin; the agent must exit 0 and leave no child process behind."""
        problems: list[str] = []
        children = _descendants(self.proc.pid)
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            problems.append("the agent did not exit within 30 s of stdin closing")
        if code != 0:
            problems.append(f"the agent exited {code}:\n{self.stderr_tail()}")
        deadline = time.monotonic() + 10
        alive = [pid for pid in children if _alive(pid)]
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if _alive(pid)]
        if alive:
            problems.append(f"child processes left behind: {alive}")
        self._reader.join(5)
        while True:  # what the agent wrote while shutting down is checked too
            try:
                raw = self._queue.get_nowait()
            except queue.Empty:
                break
            if raw is not None:
                try:
                    self._check_line(raw)
                except Failure as exc:
                    problems.append(str(exc))
        self._stderr.close()
        return problems

    # -- wire ----------------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send raw bytes to the agent's stdin."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise Failure("crash", f"writing to the agent failed: {exc!r}") from None

    def _next(self, deadline: float) -> list[dict[str, Any]] | None:
        """The messages of the next line the agent wrote (checked), or ``None`` at the deadline."""
        remaining = deadline - time.monotonic()
        try:
            raw = self._queue.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            return None
        if raw is None:
            self._queue.put(None)
            raise Failure("crash", f"the agent closed stdout (exit {self.proc.poll()}):\n{self.stderr_tail()}")
        return self._check_line(raw)

    def _check_line(self, raw: bytes) -> list[dict[str, Any]]:
        self.stats.agent_lines += 1
        if not raw.endswith(b"\n"):
            raise Failure("wrong", f"unterminated output line {raw[:200]!r}")
        try:
            text = raw.decode("utf-8")
            value = json.loads(text, parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            raise Failure("wrong", f"stdout line is not JSON ({exc}): {raw[:300]!r}") from None
        batch = isinstance(value, list)
        messages = value if batch else [value]
        if batch and (not messages or not all(isinstance(m, dict) and "method" not in m for m in messages)):
            raise Failure("wrong", f"the agent sent an array that is not a batch answer: {raw[:300]!r}")
        for message in messages:
            if not isinstance(message, dict):
                raise Failure("wrong", f"stdout line is not a JSON object: {raw[:300]!r}")
            method = None
            if "method" not in message and "id" in message:
                method = self._asked.pop(id_key(message["id"]), None)
            key = _NORMALIZE.sub(b'"~"', raw) if not batch else None
            if key is not None and key in self._valid_lines:
                continue
            problems = self.schema.check(message, method)
            if problems:
                raise Failure("wrong", f"schema: {problems[:3]} in {raw[:400]!r}")
            if key is not None and len(self._valid_lines) < 50_000:
                self._valid_lines.add(key)
        if batch:
            for message in messages:
                message["__batch__"] = True
        return messages

    def call(self, method: str, params: dict[str, Any], timeout: float = HANG_TIMEOUT) -> dict[str, Any]:
        """Send one request and return its answer (other traffic is checked and handled on the way)."""
        self._probe += 1
        request_id = f"~probe-{self._probe}"
        self._asked[id_key(request_id)] = method
        self.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n")
        deadline = time.monotonic() + timeout
        while True:
            messages = self._next(deadline)
            if messages is None:
                raise Failure("hang", f"no answer to {method} within {timeout} s")
            for message in messages:
                if message.get("id") == request_id and "method" not in message:
                    return message
                self._other(message, probe=True)

    def _other(self, message: dict[str, Any], probe: bool) -> None:
        if "method" in message and "id" in message:  # the agent asks something: refuse politely
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
            if message["method"] == "session/request_permission":
                answer["result"] = {"outcome": {"outcome": "cancelled"}}
            else:
                answer["error"] = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
            self.write(orjson.dumps(answer) + b"\n")
        elif "method" not in message:
            raise Failure("wrong", f"unexpected answer {json.dumps(message)[:300]}")

    def wait_answer(self, request_id: Any, timeout: float = HANG_TIMEOUT) -> dict[str, Any]:
        """The next answer carrying ``request_id`` (notifications on the way are checked and skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            messages = self._next(deadline)
            if messages is None:
                raise Failure("hang", f"no answer for id {request_id!r} within {timeout} s")
            for message in messages:
                if "method" not in message and id_key(message.get("id")) == id_key(request_id):
                    return message
                self._other(message, probe=True)

    def health(self) -> None:
        """A normal session still works: session/new, a prompt that ends idle/end_turn, session/close."""
        if not self.oracle.locked:
            self._handshake()  # "initialize if needed", as a client would
        created = self.call("session/new", {"cwd": str(ROOT)})
        if "result" not in created:
            raise Failure("wrong", f"health: session/new failed: {created}")
        sid = created["result"]["sessionId"]
        prompted = self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "ok"}]})
        if "result" not in prompted:
            raise Failure("wrong", f"health: session/prompt failed: {prompted}")
        deadline = time.monotonic() + HANG_TIMEOUT
        while True:
            messages = self._next(deadline)
            if messages is None:
                raise Failure("hang", "health: the prompt did not end idle within the timeout")
            done = False
            for message in messages:
                update = message.get("params", {}).get("update", {}) if message.get("method") else {}
                if (message.get("method") == "session/update" and message["params"].get("sessionId") == sid
                        and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"):
                    if update.get("stopReason") != "end_turn":
                        raise Failure("wrong", f"health: prompt ended {update.get('stopReason')!r}")
                    done = True
                elif "method" not in message:
                    self._other(message, probe=True)
                else:
                    self._other(message, probe=True)
            if done:
                break
        closed = self.call("session/close", {"sessionId": sid})
        if closed.get("result") != {}:
            raise Failure("wrong", f"health: session/close answered {closed}")

    # -- one case ------------------------------------------------------------------------------------------

    def run_case(self, case: Case, *, health: bool = True) -> None:
        """Send one case, check every answer against the oracle, then probe health; record failures."""
        self.stats.inputs += 1
        if self.stats.inputs % PROGRESS_EVERY == 0:
            sys.__stderr__.write(self.stats.summary(f"{self.name}, progress") + "\n")
            sys.__stderr__.flush()
        try:
            self._run_case(case, health)
        except Failure as exc:
            if exc.kind == "hang":
                self.stats.hangs += 1
            elif exc.kind == "crash" or self.proc.poll() is not None:
                self.stats.crashes += 1
            else:
                self.stats.wrong += 1
            self.stats.failures.append(f"{exc}\n  input: {case.describe()}")
            sys.__stderr__.write(f"FUZZ FAILURE [{self.name}] {self.stats.failures[-1][:4000]}\n")
            sys.__stderr__.flush()
            self.restart(str(exc))
            return
        log = self._new_log()
        if "Traceback" in log or " ERROR " in log:
            self.stats.wrong += 1
            self.stats.failures.append(f"wrong: the agent logged an error\n{log[-2000:]}\n  input: {case.describe()}")

    def _run_case(self, case: Case, health: bool) -> None:
        expects: list[Expect] = []
        arrays = 0
        cancelled = case.cancelled_ids()
        seen: set[tuple[str, Any]] = set()
        for raw in case.lines():
            self.stats.lines += 1
            got, is_array = self.oracle.line(raw, cancelled, seen)
            expects += got
            arrays += is_array
        self.stats.messages += case.message_count
        self.write(case.data)
        matched: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + HANG_TIMEOUT
        arrays_seen = 0
        while len(matched) < len(expects):
            messages = self._next(deadline)
            if messages is None:
                missing = [(e.id, e.note) for i, e in enumerate(expects) if i not in matched]
                raise Failure("hang", f"missing answers after {HANG_TIMEOUT} s: {missing}")
            if messages and messages[0].get("__batch__"):
                arrays_seen += 1
            for message in messages:
                if "method" in message:
                    self._other(message, probe=False)
                    continue
                self._match(message, expects, matched)
        if arrays_seen != arrays:
            raise Failure("wrong", f"expected {arrays} batch answer arrays, got {arrays_seen}")
        if health and (self.stats.inputs % HEALTH_EVERY == 0 or not self.oracle.locked):
            self.health()
        elif health:
            self.ping()

    def ping(self) -> None:
        """The cheapest liveness check: a request for a method nobody has must come back -32601."""
        answer = self.call("~ping", {})
        if answer.get("error", {}).get("code") != METHOD_NOT_FOUND:
            raise Failure("wrong", f"ping answered {answer}")

    def _match(self, message: dict[str, Any], expects: list[Expect], matched: dict[int, dict[str, Any]]) -> None:
        """Pair an answer with an expectation, re-pairing earlier answers if needed (answers to
        requests sharing an id arrive in any order, so a greedy choice could be wrong)."""
        self.stats.answers += 1
        if "error" not in message and "result" not in message:
            raise Failure("wrong", f"an answer with neither result nor error: {message}")
        key = id_key(message.get("id"))
        in_batch = bool(message.get("__batch__"))
        candidates = [i for i, e in enumerate(expects) if id_key(e.id) == key and e.in_batch == in_batch]
        if not candidates:
            raise Failure("wrong", f"an answer nobody asked for: {json.dumps(message)[:300]}")

        def augment(answer: dict[str, Any], seen: set[int]) -> bool:
            for index in candidates:
                if index in seen or not _fits(answer, expects[index]):
                    continue
                seen.add(index)
                if index not in matched or augment(matched[index], seen):
                    matched[index] = answer
                    return True
            return False

        if not augment(message, set()):
            raise Failure("wrong", f"answer {json.dumps(message)[:300]} but expected one of "
                                   f"{[(sorted(map(str, expects[i].allowed)), expects[i].note) for i in candidates]}")


def _fits(answer: dict[str, Any], expect: Expect) -> bool:
    code = answer["error"].get("code") if "error" in answer else RESULT
    if code not in expect.allowed:
        return False
    return code != METHOD_NOT_FOUND or answer["error"].get("data") == {"method": expect.method}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# -- inputs -------------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One generated input: the exact bytes sent, and how many JSON-RPC messages they hold."""

    data: bytes
    message_count: int = 1

    def lines(self) -> Iterator[bytes]:
        """The lines the agent's LineReader will see (blank ones are skipped there and here)."""
        for raw in self.data.split(b"\n"):
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if line.strip():
                yield line

    def cancelled_ids(self) -> set[tuple[str, Any]]:
        """Ids a ``$/cancel_request`` in this input names: their requests may end ``-32800``."""
        found: set[tuple[str, Any]] = set()
        for line in self.lines():
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            for entry in value if isinstance(value, list) else [value]:
                if isinstance(entry, dict) and entry.get("method") == "$/cancel_request" and "id" not in entry:
                    params = entry.get("params")
                    if isinstance(params, dict) and "requestId" in params:
                        found.add(id_key(params["requestId"]))
        return found

    def describe(self) -> str:
        """A bounded repr for failure reports."""
        text = repr(self.data)
        return text if len(text) < 1500 else f"{text[:1200]} ... ({len(self.data)} bytes)"


_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
)


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values, kept small and two levels deep (cheap to generate by the 100,000)."""
    if max_leaves <= 2:
        return _SCALARS
    flat = st.lists(_SCALARS, max_size=3) | st.dictionaries(st.text(max_size=6), _SCALARS, max_size=3)
    return _SCALARS | flat | st.dictionaries(st.text(max_size=6), flat, max_size=2) | st.lists(flat, max_size=2)


TYPE_SAMPLES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=10),
    "int": st.integers(-1000, 1000),
    "float": st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()),
    "negative": st.integers(max_value=-1),
    "huge": st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**30, 1e300, -1e300]),
    "null": st.none(),
    "bool": st.booleans(),
    "object": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
    "array": st.lists(st.integers() | st.text(max_size=5), max_size=3),
}
"""One strategy per JSON type (and the awkward numbers): what a field is replaced with."""

IDS: st.SearchStrategy[Any] = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.text(max_size=12), st.sampled_from(list(TYPE_SAMPLES)).flatmap(
        lambda kind: TYPE_SAMPLES[kind]),
    st.floats(allow_nan=False, allow_infinity=False),
)
"""Request ids of every JSON type: valid (string, int64, exact integral float) and not."""


class SchemaStrategies:
    """Hypothesis strategies for a definition of the official schema (params of each method)."""

    def __init__(self, schema: dict[str, Any], session_ids: list[str]) -> None:
        self.defs: dict[str, Any] = schema["$defs"]
        self.session_ids = session_ids

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """Merge ``$ref`` and ``allOf`` into one flat schema node."""
        merged: dict[str, Any] = {}
        todo = [node]
        while todo:
            part = todo.pop()
            if "$ref" in part:
                todo.append(self.defs[part["$ref"].rsplit("/", 1)[1]])
            for sub in part.get("allOf", []):
                todo.append(sub)
            for key, value in part.items():
                if key in ("$ref", "allOf"):
                    continue
                if key == "properties":
                    merged.setdefault("properties", {}).update(value)
                elif key == "required":
                    merged["required"] = sorted({*merged.get("required", []), *value})
                else:
                    merged.setdefault(key, value)
        return merged

    def of(self, node: dict[str, Any], name: str = "", budget: int = 3) -> st.SearchStrategy[Any]:
        """Values for ``node`` (mostly valid; the oracle judges them anyway)."""
        if name == "sessionId" and self.session_ids:
            return st.sampled_from(self.session_ids) | st.text(max_size=8)
        if name in ("cwd", "path") or name == "additionalDirectories_item":
            return st.sampled_from([str(ROOT), "/", "/tmp"]) | st.text(max_size=8)
        if budget <= 0:
            return json_values(2)
        node = self.resolve(node)
        if "const" in node:
            return st.just(node["const"])
        if "enum" in node:
            return st.sampled_from(node["enum"])
        alternatives = node.get("anyOf") or node.get("oneOf")
        if alternatives:
            base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            return st.one_of([self.of({**base, "allOf": [alt]}, name, budget) for alt in alternatives])
        kind = node.get("type")
        if isinstance(kind, list):
            return st.one_of([self.of({**node, "type": k}, name, budget) for k in kind])
        if kind == "object" or "properties" in node:
            props = node.get("properties", {})
            required = set(node.get("required", []))
            return st.fixed_dictionaries(
                {k: self.of(v, k, budget - 1) for k, v in props.items() if k in required},
                optional={k: self.of(v, k, budget - 1) for k, v in props.items() if k not in required},
            )
        if kind == "array":
            items = node.get("items", {})
            return st.lists(self.of(items, f"{name}_item", budget - 1), min_size=node.get("minItems", 0),
                            max_size=max(node.get("minItems", 0), 3))
        if kind == "string":
            return st.text(max_size=16)
        if kind == "integer":
            return st.integers(node.get("minimum", -(2**31)), node.get("maximum", 2**31))
        if kind == "number":
            return st.floats(allow_nan=False, allow_infinity=False)
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        return json_values(3)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location inside a JSON value (the root excluded)."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*prefix, index)
            yield from paths(child, (*prefix, index))


def replace(value: Any, path: tuple[Any, ...], new: Any, delete: bool = False) -> Any:
    """A copy of ``value`` with the location ``path`` set to ``new`` (or removed)."""
    if not path:
        return new
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if len(path) == 1 and delete:
        del copy[path[0]]
    else:
        copy[path[0]] = replace(copy[path[0]], path[1:], new, delete)
    return copy


def deep_value(levels: int, kind: str = "array") -> bytes:
    """JSON nested ``levels`` deep, built as bytes (never as a Python structure)."""
    if kind == "array":
        return b"[" * levels + b"1" + b"]" * levels
    return b'{"a":' * levels + b"1" + b"}" * levels



def dumps(value: Any) -> bytes:
    """Serialize like a client would (stdlib json: big integers survive, unlike orjson)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


INVALID_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
                b"\xed\xa0\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]
"""Byte sequences that are not UTF-8 (stray continuation, overlong, surrogate, 5-byte forms)."""


def _request(request_id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


@st.composite
def _mutated(draw: Any, params: st.SearchStrategy[Any]) -> Any:
    return Inputs.mutate(draw(params), _Drawer(draw))


class _Drawer:
    """Adapts a composite's ``draw`` to the ``data.draw`` spelling."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw


class Inputs:
    """The hypothesis strategies for fuzz cases against one live agent."""

    def __init__(self, agent: LiveAgent) -> None:
        self.oracle = agent.oracle
        self.schema = SchemaStrategies(agent.schema.schema, agent.session_ids)
        methods = sorted(self.oracle.request_defs)
        self.fuzzed_methods = sorted({*methods, *self.oracle.requests})
        self.notification_methods = sorted({*self.oracle.notification_defs, *self.oracle.notifications})
        self._params = {m: self._params_for(m) for m in {*self.fuzzed_methods, *self.notification_methods}}
        self._mutated: dict[str, st.SearchStrategy[Any]] = {}
        self._requests = st.one_of([
            st.builds(_request, IDS, st.just(m), self.params(m) | st.sampled_from([[], [1, "x"], 0, "s", None, True]))
            for m in self.fuzzed_methods
        ])

    def _params_for(self, method: str) -> st.SearchStrategy[Any]:
        name = self.oracle.request_defs.get(method) or self.oracle.notification_defs.get(method)
        if name is None:
            return st.dictionaries(st.text(max_size=6), json_values(4), max_size=3)
        return self.schema.of({"$ref": f"#/$defs/{name}"})

    # -- pieces ---------------------------------------------------------------------------------------------

    def params(self, method: str) -> st.SearchStrategy[Any]:
        """Params for ``method``: generated from its schema, then often one field given a wrong type."""
        cached = self._mutated.get(method)
        if cached is None:
            cached = self._mutated[method] = _mutated(self._params[method])
        return cached

    @staticmethod
    def mutate(params: Any, data: Any) -> Any:
        """Keep ``params``, or give one location a value of another JSON type, delete it, or add a key."""
        action = data.draw(st.sampled_from(["keep", "retype", "retype", "retype", "delete", "extra"]))
        locations = list(paths(params))
        if action == "keep" or (action != "extra" and not locations):
            return params
        if action == "extra":
            if isinstance(params, dict):
                return {**params, data.draw(st.text(max_size=8)): data.draw(json_values(3))}
            return params
        path = data.draw(st.sampled_from(locations))
        if action == "delete":
            return replace(params, path, None, delete=True)
        kind = data.draw(st.sampled_from(sorted(TYPE_SAMPLES)))
        return replace(params, path, data.draw(TYPE_SAMPLES[kind]))

    def request(self) -> st.SearchStrategy[dict[str, Any]]:
        """A request for any schema or agent method, valid or not, with an id of any JSON type."""
        return self._requests

    def notification(self) -> st.SearchStrategy[dict[str, Any]]:
        """A notification (known, unknown or ``$/…``); never answered."""
        method = st.sampled_from(self.notification_methods) | st.text(max_size=12) | st.sampled_from(
            ["$/unknown", "$/progress", "_vendor/ping", "session/update", "initialized"])
        return method.flatmap(lambda m: st.builds(
            lambda params: {"jsonrpc": "2.0", "method": m, "params": params},
            self._params.get(m, json_values(4)) if m in self._params else json_values(4),
        ))

    def unknown_request(self) -> st.SearchStrategy[dict[str, Any]]:
        """A request for a method nobody implements."""
        return st.builds(
            lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p},
            IDS, st.text(max_size=16) | st.sampled_from(["$/x", "_vendor/do", "session/nope", "auth/login"]),
            st.dictionaries(st.text(max_size=4), json_values(3), max_size=2),
        )

    def response(self) -> st.SearchStrategy[dict[str, Any]]:
        """A response to a request the agent never sent."""
        body = st.builds(lambda r: {"result": r}, json_values(4)) | st.builds(
            lambda c, m: {"error": {"code": c, "message": m}}, st.integers(-40000, 0), st.text(max_size=8))
        return st.builds(lambda i, b: {"jsonrpc": "2.0", "id": i, **b}, IDS | st.integers(0, 50), body)

    def envelope_junk(self) -> st.SearchStrategy[Any]:
        """Objects that are almost messages, and JSON values that are not messages at all."""
        broken = st.builds(
            lambda base, key, value: {**base, key: value},
            st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": IDS, "method": st.sampled_from(
                self.fuzzed_methods)}),
            st.sampled_from(["jsonrpc", "method", "params", "id"]), json_values(3),
        )
        return broken | json_values(5) | st.builds(
            lambda m: {k: v for k, v in m.items() if k != "jsonrpc"}, self.request())

    def message(self) -> st.SearchStrategy[Any]:
        """Any one JSON-RPC entry (what goes on a line or in a batch)."""
        return st.one_of(self.request(), self.request(), self.notification(), self.unknown_request(),
                         self.response(), self.envelope_junk())

    # -- whole cases ----------------------------------------------------------------------------------------

    def cases(self) -> st.SearchStrategy[Case]:
        """Every kind of input, mixed."""
        return st.one_of(
            self.single(), self.single(), self.single(), self.batch(), self.multi_line(),
            self.raw_bytes(), self.truncated(), self.invalid_utf8(), self.deep(), self.huge(),
        )

    def single(self) -> st.SearchStrategy[Case]:
        """One message on one line."""
        return self.message().map(lambda m: Case(dumps(m) + b"\n"))

    def batch(self) -> st.SearchStrategy[Case]:
        """A JSON-RPC batch (possibly empty) mixing every kind of entry."""
        return st.lists(self.message(), min_size=0, max_size=8).map(lambda ms: Case(dumps(ms) + b"\n", len(ms)))

    def multi_line(self) -> st.SearchStrategy[Case]:
        """Several lines in one write, with CRLF and blank lines between."""
        line = self.message().map(dumps) | self.raw_line()
        sep = st.sampled_from([b"\n", b"\r\n", b"\n\n", b"\n  \n"])
        return st.lists(st.tuples(line, sep), min_size=2, max_size=5).map(
            lambda parts: Case(b"".join(a + b for a, b in parts), len(parts)))

    def raw_line(self) -> st.SearchStrategy[bytes]:
        """Random bytes without a newline."""
        return st.binary(max_size=64).map(lambda b: b.replace(b"\n", b" "))

    def raw_bytes(self) -> st.SearchStrategy[Case]:
        """Random bytes (newlines included)."""
        return st.binary(max_size=300).map(lambda b: Case(b + b"\n", max(b.count(b"\n"), 1)))

    def truncated(self) -> st.SearchStrategy[Case]:
        """A message cut short anywhere."""
        return st.tuples(self.message().map(dumps), st.data()).map(
            lambda pair: Case(pair[0][: pair[1].draw(st.integers(0, max(len(pair[0]) - 1, 0)))] + b"\n"))

    def invalid_utf8(self) -> st.SearchStrategy[Case]:
        """A message with bytes that are not UTF-8 put inside a string."""
        def corrupt(line: bytes, data: st.DataObject) -> Case:
            quotes = [i for i, c in enumerate(line) if c == ord('"')] or [0]
            at = data.draw(st.sampled_from(quotes)) + 1
            return Case(line[:at] + data.draw(st.sampled_from(INVALID_UTF8)) + line[at:] + b"\n")

        return st.tuples(self.message().map(dumps), st.data()).map(lambda pair: corrupt(*pair))

    def deep(self) -> st.SearchStrategy[Case]:
        """Nesting around the limit and far beyond it (100k levels), in every position."""
        levels = st.integers(MAX_NESTING - 8, MAX_NESTING + 8) | st.sampled_from([300, 1000, 1025, 5000, 100_000])

        def build(n: int, kind: str, where: str, method: str, sid: str) -> Case:
            value = deep_value(n, kind)
            if where == "line":
                return Case(value + b"\n")
            if where == "id":
                return Case(b'{"jsonrpc":"2.0","id":' + value + b',"method":"session/list","params":{}}\n')
            if where == "notification":
                return Case(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"%s","_meta":%s}}\n'
                            % (sid.encode(), value))
            if where == "response":
                return Case(b'{"jsonrpc":"2.0","id":0,"result":' + value + b"}\n")
            if where == "prompt":
                return Case(b'{"jsonrpc":"2.0","id":"deep","method":"session/prompt","params":{"sessionId":"%s",'
                            b'"prompt":[{"type":"text","text":"x","_meta":{"k":%s}}]}}\n' % (sid.encode(), value))
            return Case(b'{"jsonrpc":"2.0","id":"deep","method":"%s","params":{"_meta":%s}}\n'
                        % (method.encode(), value))

        return st.builds(build, levels, st.sampled_from(["array", "object"]),
                         st.sampled_from(["line", "id", "params", "prompt", "notification", "response"]),
                         st.sampled_from(self.fuzzed_methods), st.sampled_from(self.schema.session_ids or ["s"]))

    def huge(self) -> st.SearchStrategy[Case]:
        """Huge strings, method names, arrays and batches (up to about 1 MB)."""
        sizes = st.sampled_from([10_000, 100_000, 1_000_000])

        def build(size: int, what: str, sid: str) -> Case:
            if what == "string":
                text = "x" * size
                return Case(dumps({"jsonrpc": "2.0", "id": "huge", "method": "session/prompt", "params": {
                    "sessionId": sid, "prompt": [{"type": "text", "text": text}]}}) + b"\n")
            if what == "method":
                return Case(dumps({"jsonrpc": "2.0", "id": "huge", "method": "m" * size, "params": {}}) + b"\n")
            if what == "array":
                return Case(dumps({"jsonrpc": "2.0", "id": "huge", "method": "session/new", "params": {
                    "cwd": str(ROOT), "additionalDirectories": ["/tmp"] * (size // 10)}}) + b"\n")
            if what == "batch":
                entry = b'{"jsonrpc":"2.0","method":"$/nothing","params":{}}'
                return Case(b"[" + b",".join([entry] * (size // 1000)) + b"]\n", size // 1000)
            return Case(b'{"jsonrpc":"2.0","id":"huge","method":"session/list","params":{"_meta":{"a":['
                        + b",".join([b"1"] * (size // 10)) + b"]}}}\n")

        return st.builds(build, sizes, st.sampled_from(["string", "method", "array", "batch", "meta"]),
                         st.sampled_from(self.schema.session_ids or ["s"]))


def main(directory: str) -> int:
    """Add up the counts saved by the processes of one ``make fuzz`` run and print them."""
    total = Stats()
    files = sorted(Path(directory).glob("*.json"))
    for path in files:
        counts = json.loads(path.read_text())
        for key, value in counts.items():
            if key != "failures":
                setattr(total, key, getattr(total, key) + value)
    print(total.summary(f"make fuzz, {len(files)} runs"))
    return 0 if total.crashes == total.hangs == total.wrong == total.restarts == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
