"""A third-party v1 client, acpx, drives the examples through the v1 bridge as a user would.

acpx (the npm package ``acpx``, pinned in tests/interop/acpx/package.json) is a command-line ACP client nobody here
wrote; it declares Node >= 22.13, which the npm package ``node@22`` installed beside it provides (the system's Node
may be older). ``make test`` runs ``npm ci`` in that folder. Each test runs acpx with ``--format json``, which
prints every JSON-RPC message of both directions; every message the agent wrote is validated against the official
v1 schema. acpx keeps its sessions under ``$HOME/.acpx`` and runs one background "queue owner" per session: each test
gets its own HOME, a short ``--ttl``, and its queue owners are stopped at the end.

The bridge's v1 surface (issue 37) is covered here too: stdio MCP entries, ``authenticate``, diffs with their
text, paced terminal output, and the SDK's ``/jobs`` and ``/stop`` commands.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.interop import INTEROP_DIR, NODE_MODULES, ROOT, AgentTrafficValidator, load_schema

pytestmark = pytest.mark.interop

ACPX_DIR = INTEROP_DIR / "acpx"
NODE22 = ACPX_DIR / "node_modules" / "node" / "bin" / "node"
ACPX_CLI = ACPX_DIR / "node_modules" / "acpx" / "dist" / "cli.js"
V1_SCHEMA = NODE_MODULES / "@agentclientprotocol" / "sdk" / "schema" / "v1" / "schema.unstable.json"
EXAMPLES = ROOT / "examples"
# acpx's exit code when a permission request was denied (EXIT_CODES.PERMISSION_DENIED in acpx's cli).
EXIT_PERMISSION_DENIED = 5
# What the agent may send a client, and what a client may send the agent (v1).
CLIENT_SIDE_METHODS = ("session/update", "session/request_permission", "fs/", "terminal/", "elicitation/")

Message = dict[str, Any]


def _node22() -> Path:
    """Node 22 from tests/interop/acpx/node_modules (the npm package node@22); skip only if it cannot run here."""
    if not ACPX_CLI.is_file() or not NODE22.is_file():
        pytest.skip("tests/interop/acpx/node_modules is missing: run `make test` (it runs `npm ci` there, which "
                    "installs acpx and Node 22 from the npm package node@22)")
    try:
        version = subprocess.run([str(NODE22), "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as exc:
        pytest.skip(f"the Node 22 binary of the npm package node@22 cannot run on this machine: {exc}")
    if not version.startswith("v22."):
        pytest.skip(f"the npm package node@22 gave no Node 22 here (got {version.strip()!r})")
    return NODE22


@dataclass
class Turn:
    """One acpx run: its exit code, text output and the JSON-RPC messages it printed (with --format json)."""

    returncode: int
    stdout: str
    stderr: str
    messages: list[Message]

    def agent_messages(self) -> list[Message]:
        return [m for m, side in _directions(self.messages) if side == "agent"]

    def result_of(self, method: str) -> Any:
        """The result (or error) the agent gave the client's first ``method`` request."""
        ids = [m["id"] for m in self.messages if m.get("method") == method and "id" in m]
        assert ids, f"acpx sent no {method}: {self.stdout}\n{self.stderr}"
        for message, side in _directions(self.messages):
            if side == "agent" and "method" not in message and message.get("id") == ids[0]:
                return message.get("result", message.get("error"))
        raise AssertionError(f"the agent never answered {method}")

    def agent_text(self) -> str:
        return "".join(u["content"]["text"] for u in self.updates("agent_message_chunk")
                       if u["content"]["type"] == "text")

    def updates(self, kind: str | None = None) -> list[Message]:
        found = [m["params"]["update"] for m in self.agent_messages() if m.get("method") == "session/update"]
        return [u for u in found if kind is None or u["sessionUpdate"] == kind]

    def stop_reason(self) -> str:
        return str(self.result_of("session/prompt")["stopReason"])


def _directions(messages: list[Message]) -> Iterator[tuple[Message, str]]:
    """Each message with the side that sent it ("agent" or "client"); a response is matched to the open request of
    the other side (both sides count ids from 0, so a reply whose id both have open is told apart by its shape)."""
    open_requests: dict[str, dict[Any, str]] = {"agent": {}, "client": {}}
    for message in messages:
        method = message.get("method")
        if isinstance(method, str):
            side = "agent" if method.startswith(CLIENT_SIDE_METHODS) else "client"
            if "id" in message:
                open_requests[side][message["id"]] = method
            yield message, side
            continue
        request_id = message.get("id")
        by_agent = request_id in open_requests["agent"]
        by_client = request_id in open_requests["client"]
        if by_agent and by_client:  # a prompt's answer has a stopReason; the client's answers never do
            by_agent = not (isinstance(message.get("result"), dict) and "stopReason" in message["result"])
        answering = "agent" if by_agent else "client"  # the side whose request this answers
        open_requests[answering].pop(request_id, None)
        yield message, "client" if answering == "agent" else "agent"


def _validate_v1(turn: Turn) -> None:
    if not V1_SCHEMA.is_file():
        pytest.fail(f"{V1_SCHEMA.relative_to(ROOT)} is missing; run `make test` (it runs `npm ci`)")
    validator = AgentTrafficValidator(load_schema(V1_SCHEMA))
    requests = {json.dumps(m["id"]): m["method"] for m, side in _directions(turn.messages)
                if side == "client" and "method" in m and "id" in m}
    for message in turn.agent_messages():
        validator.validate(message, requests)
    if any(m.get("method") == "initialize" for m in turn.messages):  # a reused queue owner connected earlier
        assert turn.result_of("initialize")["protocolVersion"] == 1


class Acpx:
    """acpx with a HOME and a project folder of its own; ``run`` returns the parsed output."""

    def __init__(self, tmp_path: Path) -> None:
        self.node = _node22()
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "project"
        self.home.mkdir()
        self.cwd.mkdir()
        self.env = {**os.environ, "HOME": str(self.home), "ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "",
                    "PYTHONWARNINGS": "ignore::DeprecationWarning"}
        self.env.pop("NODE_OPTIONS", None)
        self.ttl = "1"  # seconds an idle queue owner (and its agent process) stays for the next acpx call

    @staticmethod
    def agent(example: str) -> list[str]:
        return ["--agent", shlex.join([sys.executable, str(EXAMPLES / example)])]

    def command(self, example: str, *args: str) -> list[str]:
        return [str(self.node), str(ACPX_CLI), "--cwd", str(self.cwd), "--ttl", self.ttl, *self.agent(example), *args]

    def run(self, example: str, *args: str, json_output: bool = True, env: dict[str, str] | None = None,
            timeout: float = 60) -> Turn:
        flags = ["--format", "json"] if json_output else []
        proc = subprocess.run(self.command(example, *flags, *args), cwd=self.cwd, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")] if json_output \
            else []
        turn = Turn(proc.returncode, proc.stdout, proc.stderr, messages)
        if messages:
            _validate_v1(turn)
        return turn

    def owners(self) -> list[int]:
        """The pids of this HOME's running acpx queue owners (from their lock files)."""
        pids = []
        for lock in (self.home / ".acpx" / "queues").glob("*.lock"):
            try:
                pids.append(int(json.loads(lock.read_text())["pid"]))
            except (OSError, ValueError, KeyError):
                continue
        return [pid for pid in pids if _alive(pid)]

    def wait_for_owners_to_exit(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while self.owners():
            assert time.monotonic() < deadline, "acpx's queue owner did not exit after its --ttl"
            time.sleep(0.1)

    def stop_owners(self) -> None:
        for pid in self.owners():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"__queue-owner" not in f.read():
                        continue
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@pytest.fixture
def acpx(tmp_path: Path) -> Iterator[Acpx]:
    client = Acpx(tmp_path)
    yield client
    client.stop_owners()


def test_exec_streams_the_echo_agents_reply(acpx: Acpx) -> None:
    turn = acpx.run("echo_agent.py", "exec", "hello from acpx")
    assert turn.returncode == 0, turn.stderr
    assert turn.result_of("initialize")["agentInfo"]["name"] == "echo-agent"
    assert turn.agent_text() == "hello from acpx"
    assert turn.stop_reason() == "end_turn"
    quiet = acpx.run("echo_agent.py", "--format", "quiet", "exec", "just the text", json_output=False)
    assert (quiet.returncode, quiet.stdout.strip()) == (0, "just the text"), quiet.stderr


@pytest.mark.parametrize(("flag", "said", "status", "exit_code"), [
    ("--approve-all", "allowed: deploy", "completed", 0),
    ("--deny-all", "rejected: deploy", "failed", EXIT_PERMISSION_DENIED),
], ids=["approve", "deny"])
def test_a_permission_request_approved_and_denied(acpx: Acpx, flag: str, said: str, status: str,
                                                  exit_code: int) -> None:
    turn = acpx.run("background_agent.py", flag, "exec", "/ask deploy")
    assert turn.returncode == exit_code, turn.stderr
    [asked] = [m for m in turn.agent_messages() if m.get("method") == "session/request_permission"]
    assert [o["kind"] for o in asked["params"]["options"]] == ["allow_once", "reject_once"]
    assert turn.agent_text() == said
    assert [u["status"] for u in turn.updates("tool_call_update") if "status" in u] == [status]
    assert turn.stop_reason() == "end_turn"


def test_cancel_stops_the_running_prompt(acpx: Acpx, tmp_path: Path) -> None:
    new = acpx.run("background_agent.py", "sessions", "new", json_output=False)
    assert new.returncode == 0, new.stderr
    out = tmp_path / "prompt.jsonl"
    with out.open("w") as stdout:
        prompt = subprocess.Popen(acpx.command("background_agent.py", "--format", "json", "prompt", "/run sleep 30"),
                                  cwd=acpx.cwd, env=acpx.env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while '"tool_call"' not in out.read_text():  # the command is running
            assert prompt.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        started = time.monotonic()
        cancel = acpx.run("background_agent.py", "cancel", json_output=False)
        assert (cancel.returncode, cancel.stdout.strip()) == (0, "cancel requested"), cancel.stderr
        assert prompt.wait(timeout=20) == 0
        assert time.monotonic() - started < 10  # not the 30 s of the command
    finally:
        if prompt.poll() is None:
            prompt.kill()
            prompt.wait()
    messages = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    turn = Turn(0, "", "", messages)
    _validate_v1(turn)
    assert any(m.get("method") == "session/cancel" for m in messages)
    assert turn.stop_reason() == "cancelled"
    assert [u["status"] for u in turn.updates("tool_call_update") if "status" in u] == ["failed"]


def test_sessions_list_and_resume_after_the_agent_restarts(acpx: Acpx) -> None:
    new = acpx.run("coding_agent.py", "sessions", "new", json_output=False)
    assert new.returncode == 0, new.stderr
    session_id = new.stdout.strip()
    first = acpx.run("coding_agent.py", "prompt", "hello")
    assert first.agent_text() == "(offline model) You said: hello. Prompts so far: 1."
    acpx.wait_for_owners_to_exit()  # --ttl 1: the queue owner and its agent process are gone
    listed = acpx.run("coding_agent.py", "sessions", "list", json_output=False)
    assert listed.returncode == 0, listed.stderr
    assert [line.split("\t")[:3] for line in listed.stdout.splitlines()] == [[session_id, "-", str(acpx.cwd)]]
    again = acpx.run("coding_agent.py", "prompt", "again")
    # A fresh agent process resumes the stored session: the conversation goes on where it was.
    assert [m["params"]["sessionId"] for m in again.messages if m.get("method") == "session/resume"] == [session_id]
    assert again.agent_text() == "(offline model) You said: again. Prompts so far: 2."


def test_a_login_agent_refuses_sessions_until_authenticated(acpx: Acpx) -> None:
    turn = acpx.run("login_agent.py", "exec", "hello")
    assert turn.returncode != 0
    assert turn.result_of("session/new")["code"] == -32000


def test_authenticate_with_acpx_auth_env_var(acpx: Acpx) -> None:
    turn = acpx.run("login_agent.py", "exec", "hello after login", env={"ACPX_AUTH_AGENT_LOGIN": "1"})
    methods = turn.result_of("initialize")["authMethods"]
    assert methods == [{"id": "agent-login", "name": "Log in", "description": "Sign in to the agent"}]
    assert turn.result_of("authenticate") == {}
    assert turn.returncode == 0, turn.stderr
    assert turn.agent_text() == "hello after login"


def test_a_stdio_mcp_server_in_the_config_is_accepted(acpx: Acpx) -> None:
    config = acpx.cwd / "mcp.json"
    server = {"name": "tools", "command": sys.executable, "args": ["-c", "pass"], "env": []}
    config.write_text(json.dumps({"mcpServers": [server]}))
    turn = acpx.run("echo_agent.py", "--mcp-config", str(config), "exec", "hello with mcp")
    assert [m["params"]["mcpServers"] for m in turn.messages if m.get("method") == "session/new"] == [[server]]
    assert turn.returncode == 0, turn.stderr
    assert turn.agent_text() == "hello with mcp"


def test_an_approved_edit_shows_its_diff_with_the_text(acpx: Acpx) -> None:
    target = acpx.cwd / "a.txt"
    target.write_text("one\n")
    turn = acpx.run("coding_agent.py", "--approve-all", "exec", "edit a.txt: one => two")
    assert turn.returncode == 0, turn.stderr
    assert target.read_text() == "two\n"
    assert turn.agent_text() == "edit_file: edited a.txt"
    # The tool's result reaches acpx once, as content: a rawOutput with it too was printed twice.
    results = [json.dumps(u) for u in turn.updates() if u["sessionUpdate"].startswith("tool_call")]
    assert sum(r.count("edited a.txt") for r in results) == 1 and not any("rawOutput" in r for r in results)
    # The diff is on screen when the user is asked: in the tool call's content before the permission request.
    shown: list[Message] = []
    for message in turn.agent_messages():
        if message.get("method") == "session/request_permission":
            break
        update = message.get("params", {}).get("update", {})
        shown += [c for c in update.get("content") or [] if c["type"] == "diff"]
    assert shown, "no v1 diff before the permission request"
    assert {d["path"] for d in shown} == {str(target)}
    assert "one" in shown[-1]["oldText"] and "two" in shown[-1]["newText"]


BUILD = """import sys, time
for i in range(3000):
    print(f"compiling unit {i:04d} of the build")
    if i % 20 == 19:
        sys.stdout.flush()
        time.sleep(0.01)
"""


def test_terminal_output_of_a_long_build_is_coalesced(acpx: Acpx) -> None:
    (acpx.cwd / "build.py").write_text(BUILD)
    output_bytes = 3000 * len("compiling unit 0000 of the build\n")
    turn = acpx.run("background_agent.py", "exec", f"/run {shlex.quote(sys.executable)} build.py")
    assert turn.returncode == 0, turn.stderr
    updates = turn.updates("tool_call_update")
    wire_bytes = sum(len(json.dumps(u)) for u in updates)
    assert wire_bytes <= 10 * output_bytes, wire_bytes / output_bytes
    assert len(updates) <= 60, len(updates)
    texts = [c["content"]["text"] for u in updates for c in u.get("content") or [] if c["type"] == "content"]
    assert texts and "compiling unit 2999 of the build" in texts[-1]
    assert "```\n```" not in texts  # no empty block before the first output
    # Over 64 KiB: the final view says what it left out and starts at a line start.
    _, left_out, first_kept, *_ = texts[-1].splitlines()
    assert left_out.startswith("… ") and left_out.endswith(" earlier lines not shown"), left_out
    assert first_kept.startswith("compiling unit "), first_kept


def test_jobs_lists_and_stop_ends_background_work(acpx: Acpx) -> None:
    acpx.ttl = "120"  # one agent process for the whole test: its background work lives there
    new = acpx.run("background_agent.py", "sessions", "new", json_output=False)
    assert new.returncode == 0, new.stderr
    started = acpx.run("background_agent.py", "prompt", "/bg sleep 29.25")
    names = {c["name"] for u in started.updates("available_commands_update") for c in u["availableCommands"]}
    assert {"jobs", "stop"} <= names
    assert _sleepers("29.25"), "the background command is not running"
    jobs = acpx.run("background_agent.py", "prompt", "/jobs")
    assert "sleep 29.25" in jobs.agent_text()
    stopped = acpx.run("background_agent.py", "prompt", "/stop all")
    assert stopped.stop_reason() == "end_turn"
    deadline = time.monotonic() + 10
    while _sleepers("29.25"):
        assert time.monotonic() < deadline, "/stop all left the background command running"
        time.sleep(0.1)


def _sleepers(duration: str) -> list[int]:
    """Pids of running ``sleep DURATION`` processes (a duration no other test uses)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", duration.encode()]:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
