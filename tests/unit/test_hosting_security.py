"""A coding agent a team can host (issue 39): the workspace policy on every lifecycle request, client MCP servers
off for remote clients, per-principal provider settings, bounded and confined file tools, a refused command as a
tool result, stopped background work told to the model, a non-dumpable server.

Each test here failed on the code before the issue's fix (what it checked was missing or went the other way).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from acp_agent import Agent, Limits, Provider, ProviderSettings, RequestError, Session, Workspace
from acp_agent._runtime.serve import open_runtime
from acp_agent.integrations.pydantic_ai import (
    CodingTools,
    PermissionPolicy,
    ProviderModels,
    PydanticAIAgent,
    background_tool,
    coding,
)
from acp_agent.integrations.pydantic_ai.coding import MAX_FILE_BYTES
from acp_agent.store import MemoryStore, SessionStore
from acp_agent.testing.client import Client
from acp_agent.testing.streams import byte_pipe
from tests.helpers.pydantic_ai_models import checked, last_tool_return, scripted

pytestmark = pytest.mark.anyio

ALLOW_ALL = PermissionPolicy(allow={"write_file", "edit_file", "run_command", "run_tests"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


@asynccontextmanager
async def connected(agent: Any, *, principal: str = "default", store: SessionStore | None = None,
                    limits: Limits | None = None, **runtime: Any) -> AsyncIterator[Client]:
    """A client of ``agent`` served in this process as a transport serving ``principal`` would
    (``runtime``: ``workspace``, ``client_mcp``)."""
    to_agent_send, to_agent_receive = byte_pipe()
    to_client_send, to_client_receive = byte_pipe()
    client = Client(to_client_receive, to_agent_send)
    async with anyio.create_task_group() as tg:
        done = anyio.Event()

        async def run_agent() -> None:
            try:
                served = open_runtime(agent, to_agent_receive, to_client_send, principal=principal,
                                      store=store if store is not None else MemoryStore(), limits=limits, **runtime)
                await served.connection.run()
            finally:
                await to_client_send.aclose()
                done.set()

        tg.start_soon(run_agent)
        tg.start_soon(client.connection.run)
        try:
            yield client
        finally:
            await client.wind_down(done)
            tg.cancel_scope.cancel()
    client.check()


class Plain(Agent):
    accepts_additional_directories = True

    async def prompt(self, session: Session, prompt: list[Any]) -> Any:
        return "end_turn"

    async def fork_session(self, source: Session, session: Session) -> None:
        pass


async def refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(RequestError) as caught:
        await call
    assert caught.value.code == -32602
    return {"message": caught.value.message, "data": caught.value.data}


# -- finding 2: the workspace policy ----------------------------------------------------------------------------


async def test_the_workspace_is_checked_on_new_fork_and_every_resume(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "alice", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    (home / "out").symlink_to(elsewhere)  # a link inside that leads out
    policy = Workspace(roots={"alice": str(home)})
    async with connected(Plain(), principal="alice", workspace=policy) as client:
        await client.initialize()
        for cwd in ("/", str(elsewhere), str(home / "out")):
            refused = await refusal(client.new_session(cwd=cwd))
            assert refused["data"] == {"field": "cwd", "path": cwd}
        refused = await refusal(client.new_session(cwd=str(home), additionalDirectories=[str(home), "/etc"]))
        assert refused["data"] == {"field": "additionalDirectories[1]", "path": "/etc"}
        sid = await client.new_session(cwd=str(home))
        # an active session may not be moved out by a resume (it used to move there and call no hook)
        assert (await refusal(client.resume_session(sid, cwd="/")))["data"]["field"] == "cwd"
        assert (await refusal(client.fork_session(sid, cwd=str(elsewhere))))["data"]["field"] == "cwd"
        await client.close_session(sid)
        assert (await refusal(client.resume_session(sid, cwd=str(elsewhere))))["data"]["field"] == "cwd"
        await client.resume_session(sid, cwd=str(home / "sub"))  # under the root: fine
    async with connected(Plain(), principal="bob", workspace=policy) as client:  # bob has no root here
        await client.initialize()
        assert (await refusal(client.new_session(cwd=str(home))))["data"]["field"] == "cwd"


async def test_an_agent_s_own_workspace_and_the_stdio_default(tmp_path: Path) -> None:
    class Rooted(Plain):
        workspace = Workspace(allow=lambda principal, path: path.startswith(str(tmp_path)))

    async with connected(Rooted()) as client:
        await client.initialize()
        await client.new_session(cwd=str(tmp_path))
        await refusal(client.new_session(cwd="/usr"))
    async with connected(Plain()) as client:  # no policy (stdio): any absolute path, as before
        await client.initialize()
        await client.new_session(cwd="/")


async def test_file_tools_read_bounded_and_search_does_not_follow_links_out(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "credentials").write_text("aws_secret = hunter2\n")
    (project / "creds").symlink_to(outside / "credentials")
    (project / "code.py").write_text("secret_name = 'x'\n")
    (project / "big.log").write_bytes(b"line\n" * (MAX_FILE_BYTES // 5 + 1000))
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [
        ("search", {"pattern": "secret"}),
        ("list_files", {}),
        ("read_file", {"path": "big.log", "offset": 1, "limit": 2}),
        "done",
    ]
    agent = PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=CodingTools().toolsets,
                            permission_policy=ALLOW_ALL)
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(project))
        await client.prompt_and_wait(sid, "go")
    assert last_tool_return(seen[1]) == "code.py:1: secret_name = 'x'"  # not creds: it leads out
    assert "creds" not in str(last_tool_return(seen[2]))
    assert str(last_tool_return(seen[3])).startswith("line\nline\n(the file is longer")
    # a device never loads whole (it used to read /dev/zero until the server ran out of memory)
    steps = [("read_file", {"path": "/dev/zero"}), "done"]
    seen.clear()
    agent = PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=CodingTools(confine=False).toolsets)
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(project))
        with anyio.fail_after(10):
            await client.prompt_and_wait(sid, "go")
    assert "is not a regular file" in str(seen[1][-1].parts[0])


async def test_a_fifo_in_the_workspace_hangs_no_tool(tmp_path: Path) -> None:
    """A FIFO is not a regular file: read_file and search skip it at once (trial 39: opening one blocked a worker
    thread for good, the turn never ended and ``session/cancel`` could not stop it; 40 of them starve the server's
    thread pool for every user)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "code.py").write_text("needle = 1\n")
    fifo = project / "pipe"
    os.mkfifo(fifo)
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [("read_file", {"path": "pipe"}), ("search", {"pattern": "needle"}),
                        ("search", {"pattern": "needle", "path": "pipe"}), "done"]
    agent = PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=CodingTools().toolsets)
    try:
        async with checked(agent) as client:
            await client.initialize()
            sid = await client.new_session(cwd=str(project))
            with anyio.fail_after(10):
                await client.prompt_and_wait(sid, "go")
    finally:
        with contextlib.suppress(OSError):  # release a reader the old code left blocked in open()
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert "is not a regular file" in str(seen[1][-1].parts[0])
    assert last_tool_return(seen[2]) == "code.py:1: needle = 1"
    assert last_tool_return(seen[3]) == "(no matches)"


async def test_a_backtracking_search_pattern_does_not_freeze_the_server(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``search`` needs no approval; with ``re``, ``(A+)+B`` against a line of 24 ``A`` backtracked 2**24 times with
    the GIL held (26 froze a served agent ~9 s for every user). Matching now releases the GIL and stops at
    ``SEARCH_SECONDS``; ``(A|AA)+B`` backtracks in any engine, so it is the one that must end with a note."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("A" * 60 + "\n")
    monkeypatch.setattr(coding, "SEARCH_SECONDS", 1.0)
    steps: list[Any] = [("search", {"pattern": "(A+)+B"}), ("search", {"pattern": "(A|AA)+B"}), "done"]
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=CodingTools().toolsets)
    gaps: list[float] = []

    async def tick(done: anyio.Event) -> None:
        last = anyio.current_time()
        while not done.is_set():
            await anyio.sleep(0.02)
            now = anyio.current_time()
            gaps.append(now - last)
            last = now

    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(project))
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick, done)
            with anyio.fail_after(60):
                await client.prompt_and_wait(sid, "go")
            done.set()
    assert max(gaps) < 0.5, f"the event loop stood still {max(gaps):.1f} s"
    assert last_tool_return(seen[1]) == "(no matches)"  # regex gives up on (A+)+B at once
    assert "search stopped after 1 s" in str(last_tool_return(seen[2]))


# -- finding 1: client MCP servers off for remote clients ---------------------------------------------------------


async def test_a_remote_client_s_stdio_mcp_server_is_neither_offered_nor_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    entry = {"type": "stdio", "name": "evil", "command": "/bin/sh", "args": ["-c", f"touch {marker}"], "env": []}
    agent = PydanticAIAgent(PydanticAgent(scripted(["hello"])))
    async with connected(agent, client_mcp=False) as client:
        answer = await client.initialize()
        assert "mcp" not in answer["capabilities"]["session"]
        refused = await refusal(client.new_session(cwd=str(tmp_path), mcpServers=[entry]))
        assert refused["data"] == {"name": "evil", "type": "stdio"} and "remote clients" in refused["message"]
        http = {"type": "http", "name": "ssrf", "url": "http://169.254.169.254/", "headers": []}
        await refusal(client.new_session(cwd=str(tmp_path), mcpServers=[http]))
        sid = await client.new_session(cwd=str(tmp_path))
        await refusal(client.resume_session(sid, cwd=str(tmp_path), mcpServers=[entry]))
        await client.prompt_and_wait(sid, "hi")
    assert not marker.exists()
    async with connected(agent) as client:  # stdio (the client is the user): offered as before
        answer = await client.initialize()
        assert answer["capabilities"]["session"]["mcp"] == {"stdio": {}, "http": {}}


# -- finding 3: per-principal agent state -------------------------------------------------------------------------


async def test_one_principal_s_provider_never_serves_another_s_turns() -> None:
    made: list[tuple[str, str]] = []

    def models(settings: ProviderSettings) -> dict[str, Any]:
        key = settings.headers["Authorization"]
        made.append((settings.base_url, key))
        return {"gateway": scripted([f"answered with {key}"] * 5)}

    agent = PydanticAIAgent(PydanticAgent(scripted(["the operator's model"] * 5)),
                            providers=[ProviderModels(Provider("gateway", supported=["openai"]), models)])
    store = MemoryStore()
    async with connected(agent, principal="alice", store=store) as alice, \
            connected(agent, principal="bob", store=store) as bob:
        await alice.initialize()
        await bob.initialize()
        await alice.request("providers/set", {"providerId": "gateway", "apiType": "openai",
                                              "baseUrl": "https://alice.example/v1",
                                              "headers": {"Authorization": "alice-key"}})
        listed = await bob.request("providers/list", {})
        assert "current" not in listed["providers"][0]  # bob does not see alice's endpoint
        bob_sid = await bob.new_session(cwd="/tmp")
        view = await bob.prompt_and_wait(bob_sid, "hi")
        assert list(view.messages().values()) == ["the operator's model"]  # not on alice's key
        assert not any(o["value"] == "gateway" for o in (view.config_options or [{"options": []}])[0]["options"])
        alice_sid = await alice.new_session(cwd="/tmp")
        view = await alice.prompt_and_wait(alice_sid, "hi")
        assert list(view.messages().values()) == ["answered with alice-key"]
    assert agent.models_for("bob") == {} and list(agent.models_for("alice")) == ["gateway"]


# -- finding 9: the bridge's tools --------------------------------------------------------------------------------


async def test_a_command_past_the_process_quota_is_a_tool_result_and_nothing_stays_listed(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [("run_command", {"command": "sleep 30", "background": True}),
                        ("run_command", {"command": "true"}),
                        ("run_command", {"command": "sleep 30", "background": True}), "done"]
    agent = PydanticAIAgent(PydanticAgent(scripted(steps, seen)), toolsets=CodingTools().toolsets,
                            permission_policy=ALLOW_ALL)
    async with checked(agent, limits=Limits(max_processes=1)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        view = await client.prompt_and_wait(sid, "run")
        assert view.stop_reason == "end_turn"  # it used to end the turn with stopReason "error"
        assert [t["status"] for t in view.tool_calls.values()][1:] == ["failed", "failed"]
        (running,) = view.terminals  # the first command's: the refused ones left nothing listed
        refused = list(view.tool_calls)[1:]
        assert not set(refused) & view.cancellable_tool_calls()  # it used to stay listed, in_progress, uncancellable
        await client.cancel_terminal(sid, running)
    for step in (2, 3):
        text = str(last_tool_return(seen[step]))
        assert "did not start" in text and "max_processes=1" in text


async def test_background_work_stopped_by_a_restart_is_told_to_the_model(tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []
    steps: list[Any] = [("slow", {}), "started", "after the restart"]
    pydantic_agent = PydanticAgent(scripted(steps, seen))

    @pydantic_agent.tool_plain(metadata=background_tool())
    async def slow() -> str:
        await anyio.sleep(60)
        return "never"

    store = MemoryStore()
    async with checked(PydanticAIAgent(pydantic_agent), store=store) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        await client.prompt_and_wait(sid, "go")
    # a new process (a restart), the same store: the work is gone, and the model is told so
    async with checked(PydanticAIAgent(pydantic_agent), store=store) as client:
        await client.initialize()
        await client.resume_session(sid, cwd=str(tmp_path))
        await client.prompt_and_wait(sid, "what happened?")
    prompts = [p.content for m in seen[-1] if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, UserPromptPart) and isinstance(p.content, str)]
    notes = [text for text in prompts if "Stopped without a result" in text]
    assert len(notes) == 1 and "slow (tool call" in notes[0]


# -- finding 5: secrets --------------------------------------------------------------------------------------------


def test_serve_marks_itself_non_dumpable() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl is Linux only")
    script = (
        "import ctypes, sys, acp_agent.http as http\n"
        "http.run_http = lambda *a, **k: print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"  # PR_GET_DUMPABLE
        "from acp_agent.cli import main\n"
        "sys.exit(main(['serve', 'examples/echo_agent.py', '--store', 'memory']))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"  # not dumpable: a child cannot read /proc/$PPID/environ (non-root server)


async def test_the_coding_example_runs_tests_through_an_approved_sdk_terminal(tmp_path: Path) -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("coding_example", root / "examples" / "coding_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    os.environ["CODING_AGENT_TEST_COMMAND"] = "echo ran; env"
    os.environ["ACP_AGENT_TEST_SECRET"] = "s3cret"
    try:
        spec.loader.exec_module(module)
        async with checked(module.agent, permission_policy=None) as client:
            await client.initialize()
            sid = await client.new_session(cwd=str(tmp_path))
            await client.set_config_option(sid, "model", "offline")
            await client.prompt(sid, "test")
            await client.wait_for(lambda: bool(client.pending_permissions))  # it asks first now
            client.answer_permission(0, "allow_once")
            await client.wait_for(lambda: any("exited" in m for m in client.view(sid).messages().values()), 20)
            view = client.view(sid)
            output = "".join(t["output"].decode() for t in view.terminals.values())
            assert "ran" in output and "s3cret" not in output  # an SDK terminal, with the filtered environment
    finally:
        os.environ.pop("CODING_AGENT_TEST_COMMAND", None)
        os.environ.pop("ACP_AGENT_TEST_SECRET", None)
