"""Every example of the site's guides (docs_src/), run: agents driven by the checked test client, and the
guides' own test examples collected here as tests (imported test functions are collected by pytest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from acp_agent import Agent, Limits, RequestError
from acp_agent.store import MemoryStore, SqliteStore
from acp_agent.testing import connect_agent, spawn_agent
from docs_src.after_the_turn import TestRunnerAgent
from docs_src.asking import MigrationAgent, SignInAgent
from docs_src.background_work import DevAgent
from docs_src.bookkeeping_test import test_title_archive_status
from docs_src.config_options import MODE_OPTION, ModalAgent
from docs_src.diff_edit import EditingAgent
from docs_src.durable_wakeup import DeployWatcher
from docs_src.extensions import IndexingAgent
from docs_src.first_agent import EchoAgent
from docs_src.import_threads import import_threads
from docs_src.limits import MyAgent as BoundedAgent
from docs_src.login_agent import LoginAgent
from docs_src.mcp_tools_test import test_add
from docs_src.providers_test import test_a_gateway_replaces_the_endpoint
from docs_src.resume_context import ContextAgent
from docs_src.subagents import LeadAgent
from docs_src.talking import ChattyAgent
from docs_src.telemetry_agent import Coder
from docs_src.telemetry_providers import MyAgent
from docs_src.telemetry_test import test_the_turn_is_traced
from docs_src.testing_background import test_watch_is_listed_then_cancelled
from docs_src.testing_pytest import test_echo
from docs_src.testing_questions import test_answer_a_question_by_hand, test_login_asks_for_a_name

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

__all__ = [  # the guides' own tests, run here
    "test_a_gateway_replaces_the_endpoint",
    "test_add",
    "test_answer_a_question_by_hand",
    "test_echo",
    "test_login_asks_for_a_name",
    "test_the_turn_is_traced",
    "test_title_archive_status",
    "test_watch_is_listed_then_cancelled",
]


async def said(agent: Agent, prompt: str, capabilities: dict[str, Any] | None = None, **options: Any) -> list[str]:
    """The agent messages of one turn of a new session with ``agent``, served in-process by the checked client."""
    async with connect_agent(agent, **options) as client:
        await client.initialize(capabilities=capabilities or {})
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, prompt)
        assert view.stop_reason == "end_turn"
        return list(view.messages().values())


async def test_first_agent_in_process() -> None:
    assert await said(EchoAgent(), "hello there") == ["hello there"]


async def test_first_agent_over_stdio() -> None:
    async with spawn_agent([sys.executable, str(ROOT / "docs_src" / "first_agent.py")]) as client:
        answer = await client.initialize()
        assert answer["info"]["name"] == "echo-agent"
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "hello")
        assert list(view.messages().values()) == ["hello"]


async def test_talking_to_the_client() -> None:
    async with connect_agent(ChattyAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "go")
        kinds = [u["sessionUpdate"] for u in view.updates]
        for kind in ("agent_thought", "plan_update", "agent_message_chunk", "session_info_update", "usage_update"):
            assert kind in kinds
        assert list(view.messages().values()) == ["Working on it.", "Edited."]  # allow_first allowed it


async def test_config_options_and_commands() -> None:
    async with connect_agent(ModalAgent()) as client:
        await client.initialize()
        answer = await client.request("session/new", {"cwd": "/tmp"})
        [option] = answer["configOptions"]
        assert option["configId"] == "mode" and option["currentValue"] == "ask"
        assert answer["availableCommands"] == [{"type": "command", "name": "plan", "description": "Make a plan"}]
        sid = answer["sessionId"]
        client.view(sid)
        await client.set_config_option(sid, "mode", "code")
        view = await client.prompt_and_wait(sid, "which mode?")
        assert list(view.messages().values()) == ["mode: code"]
        assert MODE_OPTION.current_value == "ask"  # each session changes its own copy
        view = await client.prompt_and_wait(sid, "/plan fix the login")  # the command is the prompt's text
        assert list(view.messages().values())[-1] == "planning: fix the login"


async def test_work_after_the_turn() -> None:
    async with connect_agent(TestRunnerAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "run the tests")
        view = await client.wait_idle(sid, count=2)  # the report is foreground work of its own
        assert list(view.messages().values())[-1] == "tests finished: exit 0"


async def test_background_work() -> None:
    async with connect_agent(DevAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "start")
        kinds = sorted(item["type"] for item in view.background)
        assert kinds == ["terminal", "tool_call", "tool_call"]  # the dev server, the watcher, the wake-up
        await client.close_session(sid)  # stops them all


async def test_subagents() -> None:
    assert await said(LeadAgent(), "explore") == ["The explorer said: Found the token check in auth.py (end_turn)"]


async def test_questions() -> None:
    answer = {"action": "accept", "content": {"db": "production"}}
    forms = {"elicitation": {"form": {}}}
    assert await said(MigrationAgent(), "migrate", forms, elicitation_policy=lambda params: answer) == [
        "Migrating production."
    ]


async def test_url_question() -> None:
    async with connect_agent(SignInAgent(), elicitation_policy=lambda params: {"action": "accept"}) as client:
        await client.initialize(capabilities={"elicitation": {"url": {}}})
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "sign in")
        assert list(view.messages().values()) == ["Signed in."]
        completions = [m for m in client.sent_by_agent() if m.get("method") == "elicitation/complete"]
        assert completions and completions[0]["params"]["elicitationId"] == "gh-7"


async def test_login_gate() -> None:
    async with connect_agent(LoginAgent(), elicitation_policy=lambda params: {"action": "decline"}) as client:
        await client.initialize(capabilities={"elicitation": {"form": {}, "url": {}}})
        with pytest.raises(RequestError) as gated:
            await client.new_session("/tmp")  # gated until a login succeeded
        assert gated.value.code == -32000
        with pytest.raises(RequestError) as refused:
            await client.request("auth/login", {"methodId": "agent-login"})  # declined: refused
        assert refused.value.code == -32000


async def test_extensions() -> None:
    agent = IndexingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        assert await client.request("_acme/index_status", {"folder": "src"}) == {"folder": "src", "files": 1200}
        client.notify("_acme/reindex", {})
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "buffers?")
        assert list(view.messages().values()) == ["0 open buffers"]  # this client has no _zed/open_buffers
        assert agent.reindexed == 1


async def test_import_threads(tmp_path: Path) -> None:
    folder = tmp_path / "threads"
    folder.mkdir()
    thread = {"id": "t1", "cwd": "/tmp", "title": "Old thread", "turns": [["hi", "hello"]]}
    (folder / "t1.json").write_text(json.dumps(thread))
    store = SqliteStore(tmp_path / "agent.sqlite3")
    await import_threads(folder, store)
    await import_threads(folder, store)  # a second start skips what is stored
    async with connect_agent(ContextAgent(), store=store) as client:
        await client.initialize()
        [listed] = await client.list_sessions()
        assert listed["sessionId"] == "sess_imported_t1" and listed["title"] == "Old thread"
        await client.resume_session("sess_imported_t1", "/tmp")
        await client.close_session("sess_imported_t1")
    await store.close()


async def test_resume_rebuilds_the_context() -> None:
    store = MemoryStore()
    async with connect_agent(ContextAgent(), store=store) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "remember this")
        await client.close_session(sid)
    agent = ContextAgent()
    async with connect_agent(agent, store=store) as client:
        await client.initialize()
        await client.resume_session(sid, "/tmp")
    assert agent.contexts[sid] == [
        {"role": "user", "content": "remember this"},
        {"role": "assistant", "content": "You said: remember this"},
    ]


async def test_limits() -> None:
    assert await said(BoundedAgent(), "limits?") == ["at most 16 sessions"]


async def test_limit_error_is_the_documented_one() -> None:
    documented = json.loads((ROOT / "docs_src" / "limit_error.json").read_text())
    async with connect_agent(BoundedAgent(), limits=Limits(max_sessions=4)) as client:
        await client.initialize()
        for _ in range(4):
            await client.new_session("/tmp")
        with pytest.raises(RequestError) as refused:
            await client.new_session("/tmp")
    assert (refused.value.code, refused.value.data) == (documented["error"]["code"], documented["error"]["data"])
    answers = [m for m in client.transcript if m.message.get("error")]
    assert answers[-1].message["error"] == documented["error"]


async def test_zed_settings_start_the_agent() -> None:
    settings = json.loads((ROOT / "docs_src" / "zed_settings.json").read_text())
    entry = settings["agent_servers"]["Echo Agent"]
    assert entry["type"] == "custom"
    script = ROOT / "docs_src" / Path(entry["args"][0]).name  # the same file, in this checkout
    async with spawn_agent([sys.executable, str(script)], env=entry["env"]) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        assert list((await client.prompt_and_wait(sid, "hi")).messages().values()) == ["hi"]


async def test_served_apps_are_asgi(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    monkeypatch.setenv("ACP_TOKEN", "secret")
    agent_app = importlib.import_module("docs_src.agent_app")
    assert callable(agent_app.app)
    mounted = importlib.import_module("docs_src.mounted_app")
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": 2, "info": {"name": "t", "version": "1"}, "capabilities": {}}}
    headers = {"Authorization": "Bearer secret", "Accept": "application/json, text/event-stream"}
    async with mounted.acp.lifespan():
        transport = httpx.ASGITransport(app=mounted.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            answer = await http.post("/acp/", json=initialize, headers=headers)
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["info"]["name"] == "echo-agent"
            refused = await http.post("/acp/", json=initialize, headers={**headers, "Authorization": "Bearer x"})
            assert refused.status_code == 401


def test_nginx_conf_streams() -> None:
    conf = (ROOT / "docs_src" / "nginx.conf").read_text()
    for directive in ("proxy_buffering off;", "proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;"):
        assert directive in conf


def test_the_balancer_configurations_keep_their_essentials() -> None:
    """docs_src/haproxy.cfg and docs_src/nginx-replicas.conf run in front of real replicas in
    tests/e2e/test_scale_out.py; here: the lines whose loss would hurt without failing loudly."""
    haproxy = (ROOT / "docs_src" / "haproxy.cfg").read_text()
    for directive in ("option http-no-delay", "balance roundrobin", "option httpchk GET /readyz", "timeout tunnel"):
        assert directive in haproxy
    nginx = (ROOT / "docs_src" / "nginx-replicas.conf").read_text()
    for directive in ("proxy_buffering off;", "proxy_next_upstream off;", "proxy_set_header Upgrade $http_upgrade;"):
        assert directive in nginx


def test_the_script_prints_the_answer() -> None:
    done = subprocess.run([sys.executable, "-m", "docs_src.testing_script"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout == "['hello'] end_turn\n"


async def test_a_durable_wakeup_survives_a_restart(tmp_path: Path) -> None:
    store_file = tmp_path / "agent.sqlite3"
    first = SqliteStore(store_file)
    async with connect_agent(DeployWatcher(), store=first) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "deploy")
        assert [item["type"] for item in view.background or []] == ["tool_call"]
    await first.close()  # the agent stopped before the check was due

    second = SqliteStore(store_file)
    async with connect_agent(DeployWatcher(), store=second) as client:  # restarted
        await client.initialize()
        await client.resume_session(sid, "/tmp")
        view = client.view(sid)
        [again] = view.background or []
        assert view.tool_calls[again["toolCallId"]]["status"] == "pending"  # re-armed for the time left
        await client.cancel_tool_call(sid, again["toolCallId"])
        await client.wait_for(lambda: view.background == [])
    await second.close()


async def test_a_diff_reaches_the_client(tmp_path: Path) -> None:
    (tmp_path / "greeting.txt").write_text("Hello\n")
    async with connect_agent(EditingAgent()) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        view = await client.prompt_and_wait(sid, "greet the world")
        [tool] = view.tool_calls.values()
        assert tool["status"] == "completed" and tool["kind"] == "edit"
        chunks = [u["content"] for u in view.updates if u["sessionUpdate"] == "tool_call_content_chunk"]
        [diff] = [c for c in chunks if c["type"] == "diff"]
        path = str(tmp_path / "greeting.txt")
        assert diff["changes"] == [{"operation": "modify", "path": path, "fileType": "text"}]
        assert diff["patch"]["format"] == "git_patch"
        assert f"--- {path}\n+++ {path}\n" in diff["patch"]["text"] and "+Hello, world\n" in diff["patch"]["text"]
    assert (tmp_path / "greeting.txt").read_text() == "Hello, world\n"


def test_the_stdio_by_hand_recipe_gets_every_answer(tmp_path: Path) -> None:
    script = (ROOT / "docs_src" / "stdio_by_hand.sh").read_text()
    script = script.replace("python my_agent.py", f"'{sys.executable}' '{ROOT / 'docs_src' / 'first_agent.py'}'")
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ACP_AGENT_DATA_DIR": str(tmp_path)})
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [0, 1, 2] and all("result" in a for a in answers), done.stdout
    assert [s["sessionId"] for s in answers[2]["result"]["sessions"]] == [answers[1]["result"]["sessionId"]]


def test_host_limits_serve_picks_the_class_defined_there() -> None:
    from acp_agent.cli import load_agent
    from docs_src.host_limits import HostAgent

    source, name = load_agent(str(ROOT / "docs_src" / "host_limits.py"))
    assert name == "HostAgent"  # EchoAgent, imported, does not count
    assert isinstance(source, type) and source.__name__ == "HostAgent"
    assert HostAgent.limits.max_principal_sessions == 2 and HostAgent.limits.max_principal_processes == 4


async def test_the_telemetry_agent_works_with_telemetry_off() -> None:
    """The Telemetry guide's coding agent, untraced: the same turn (a tool, a permission, a terminal, a watcher)."""
    assert await said(Coder(), "run the tests") == ["Running the tests."]


async def test_an_agent_over_your_own_providers_is_traced() -> None:
    """The guide's ``MyAgent`` reports to the global providers it was given (here: the API's default ones)."""
    assert MyAgent.telemetry is not None
    assert await said(MyAgent(), "hi") == ["Hello."]
