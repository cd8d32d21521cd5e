"""Isolation between sessions and connections, and the checks on client-supplied paths.

A cancel, close or permission answer that names another session's item, an id that session
never had, or a session of another connection affects nothing and gets the precise error.
Relative paths and unadvertised MCP transports are refused with ``-32602`` on every entry
point (R33, R34). Terminal processes get exactly the author's environment over the agent's,
and an argv is never interpreted by a shell.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import orjson
import pytest

from acp_agent import RequestError, Session, StopReason
from acp_agent._util import watch
from acp_agent._util.reaper import MARK_ENV
from acp_agent.terminals import command_text
from acp_agent.testing.client import Client, connect_agent
from tests.helpers.agents import ForkingAgent, ScriptedAgent
from tests.helpers.background import BgAgent, ForkingBgAgent, assert_clean, flush, is_exit, opened

pytestmark = pytest.mark.anyio


def expect(info: pytest.ExceptionInfo[RequestError], code: int, data: Any) -> None:
    assert (info.value.code, info.value.data) == (code, data), info.value


async def refused(client: Client, method: str, params: dict[str, Any], code: int, data: Any) -> None:
    with pytest.raises(RequestError) as info:
        await client.request(method, params)
    expect(info, code, data)


# -- per-item cancels across sessions ------------------------------------------------------------------


async def test_item_cancels_naming_another_sessions_items_affect_nothing() -> None:  # R15, R102, R104
    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")
        tool.run(lambda tool: anyio.sleep(3600))  # listed, cancellable
        term = await session.start_terminal(["sleep", "30"], detach=True)
        agent.h[session.id] = (tool, term)

    agent = BgAgent(work=work)
    async with opened(agent) as (client, a, session_a):
        b = await client.new_session("/tmp")
        await client.prompt_and_wait(a, "work")
        await client.prompt_and_wait(b, "work")
        tool_b, term_b = agent.h[b]
        tool_a, term_a = agent.h[a]
        mark = len(client.transcript)
        # B's items named under A's id: unknown to A
        await refused(client, "tool_call/cancel", {"sessionId": a, "toolCallId": tool_b.id},
                      -32602, {"toolCallId": tool_b.id})
        await refused(client, "terminal/cancel", {"sessionId": a, "terminalId": term_b.id},
                      -32602, {"terminalId": term_b.id})
        # ids no session ever had
        await refused(client, "tool_call/cancel", {"sessionId": a, "toolCallId": "call_never"},
                      -32602, {"toolCallId": "call_never"})
        await refused(client, "terminal/cancel", {"sessionId": a, "terminalId": "term_never"},
                      -32602, {"terminalId": "term_never"})
        # a terminal id under tool_call/cancel and the other way round
        await refused(client, "tool_call/cancel", {"sessionId": b, "toolCallId": term_b.id},
                      -32602, {"toolCallId": term_b.id})
        await refused(client, "terminal/cancel", {"sessionId": b, "terminalId": tool_b.id},
                      -32602, {"terminalId": tool_b.id})
        # an unknown session
        await refused(client, "tool_call/cancel", {"sessionId": "sess_never", "toolCallId": tool_b.id},
                      -32002, {"sessionId": "sess_never"})
        await refused(client, "terminal/cancel", {"sessionId": "sess_never", "terminalId": term_b.id},
                      -32002, {"sessionId": "sess_never"})
        await flush(client, session_a)
        sent = [e.message for e in client.transcript[mark:] if e.direction == "agent->client"]
        assert [m for m in sent if m.get("method") == "session/update"
                and m["params"]["update"].get("sessionUpdate") != "notice"] == []
        for tool, term in ((tool_a, term_a), (tool_b, term_b)):
            assert tool.status == "in_progress" and tool.cancellable
            assert term.process is not None and not term.process.exited
        # the right session's id works, and only on that item
        await client.cancel_tool_call(b, tool_b.id)
        await client.cancel_terminal(b, term_b.id)
        await client.wait_for(lambda: any(is_exit(term_b.id)(u) for u in client.view(b).updates))
        await client.wait_for(lambda: tool_b.final)
        assert tool_a.status == "in_progress" and not term_a.process.exited
        await client.cancel_tool_call(a, tool_a.id)
        await client.cancel_terminal(a, term_a.id)
        await client.wait_for(lambda: client.view(a).background == [] and client.view(b).background == [])
        assert_clean(client, a)
        assert_clean(client, b)


async def test_child_items_are_not_reachable_through_the_parent() -> None:
    async def spawn(session: Session, _: str) -> None:
        child = await session.spawn_subagent("child")

        async def body(child_session: Session) -> StopReason:
            tool = await child_session.start_tool_call("child watch", kind="other")
            tool.run(lambda tool: anyio.sleep(3600))
            agent.h["child_tool"] = tool
            return "end_turn"

        child.start(body)
        agent.h["child"] = child

    agent = ForkingBgAgent(spawn=spawn)
    async with opened(agent) as (client, sid, _):
        await client.prompt_and_wait(sid, "spawn")
        child = agent.h["child"]
        await client.wait_for(lambda: "child_tool" in agent.h)
        tool = agent.h["child_tool"]
        await refused(client, "tool_call/cancel", {"sessionId": sid, "toolCallId": tool.id},
                      -32602, {"toolCallId": tool.id})
        # requests naming the child are refused; the child keeps running
        named = {"sessionId": child.id}
        for method, params in [
            ("session/close", named),
            ("session/delete", named),
            ("session/resume", {**named, "cwd": "/tmp"}),
            ("session/fork", {**named, "cwd": "/tmp"}),
            ("session/prompt", {**named, "prompt": [{"type": "text", "text": "hi"}]}),
        ]:
            await refused(client, method, params, -32602, named)
        assert not child.session.closed and tool.status == "in_progress"
        await client.cancel_tool_call(child.id, tool.id)  # the child's own id reaches it (cancellable child)
        await client.wait_for(lambda: tool.final)
        assert tool.status == "cancelled"


async def test_session_cancel_and_close_touch_only_the_named_session() -> None:  # R41, R63
    agent = ScriptedAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        a, b = await client.new_session("/tmp"), await client.new_session("/tmp")
        await client.prompt(a, "sleep 30")
        await client.prompt(b, "sleep 30")
        await client.wait_for(lambda: client.view(a).state == "running" and client.view(b).state == "running")
        client.cancel("sess_never")  # unknown: ignored
        client.cancel(b)
        view_b = await client.wait_idle(b)
        assert view_b.stop_reason == "cancelled"
        assert client.view(a).state == "running" and client.view(a).idle_count == 0
        assert await client.request("session/close", {"sessionId": "sess_never"}) == {}  # idempotent, no effect
        assert client.view(a).state == "running"
        await client.close_session(b)
        assert client.view(a).state == "running"
        with pytest.raises(RequestError) as info:
            await client.prompt(b, "echo closed")
        expect(info, -32002, {"sessionId": b})
        client.cancel(a)
        assert (await client.wait_idle(a)).stop_reason == "cancelled"


async def test_sessions_of_another_connection_are_unknown() -> None:  # R15
    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")
        tool.run(lambda tool: anyio.sleep(3600))
        term = await session.start_terminal(["sleep", "30"], detach=True)
        agent.h["items"] = (tool, term)

    async def sleep(session: Session, _: str) -> None:
        await anyio.sleep(30)

    agent = ForkingBgAgent(work=work, sleep=sleep)
    async with opened(agent) as (first, sid, _):
        await first.prompt_and_wait(sid, "work")
        tool, term = agent.h["items"]
        await first.prompt(sid, "sleep 30")
        await first.wait_for(lambda: first.view(sid).state == "running")
        async with connect_agent(agent) as second:
            await second.initialize()
            missing = {"sessionId": sid}
            for method, params in [
                ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "echo x"}]}),
                ("tool_call/cancel", {"sessionId": sid, "toolCallId": tool.id}),
                ("terminal/cancel", {"sessionId": sid, "terminalId": term.id}),
                ("session/resume", {"sessionId": sid, "cwd": "/tmp"}),
                ("session/fork", {"sessionId": sid, "cwd": "/tmp"}),
                ("session/set_config_option", {"sessionId": sid, "configId": "x", "type": "boolean", "value": True}),
            ]:
                await refused(second, method, params, -32002, missing)
            second.cancel(sid)
            assert await second.request("session/close", {"sessionId": sid}) == {}
            assert await second.request("session/delete", {"sessionId": sid}) == {}
            assert await second.list_sessions() == []
        assert first.view(sid).state == "running" and first.view(sid).idle_count == 1
        assert tool.status == "in_progress" and not term.process.exited
        assert [s["sessionId"] for s in await first.list_sessions()] == [sid]
        first.cancel(sid)
        assert (await first.wait_idle(sid, 2)).stop_reason == "cancelled"
        await first.cancel_terminal(sid, term.id)
        await first.cancel_tool_call(sid, tool.id)
        await first.wait_for(lambda: first.view(sid).background == [])


# -- permission answers ----------------------------------------------------------------------------------


async def test_permission_answers_resolve_only_their_own_request() -> None:  # R20
    agent = ScriptedAgent()
    async with connect_agent(agent, permission_policy=None) as client:
        await client.initialize()
        a, b = await client.new_session("/tmp"), await client.new_session("/tmp")
        await client.prompt(a, "ask")
        await client.wait_for(lambda: len(client.pending_permissions) == 1)
        await client.prompt(b, "ask")
        await client.wait_for(lambda: len(client.pending_permissions) == 2)
        requests = [m for m in client.sent_by_agent() if m.get("method") == "session/request_permission"]
        id_a, id_b = (r["id"] for r in requests)
        assert [r["params"]["sessionId"] for r in requests] == [a, b]

        async def respond(request_id: Any, option: str = "allow") -> None:
            result = {"outcome": {"outcome": "selected", "optionId": option}}
            line = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"
            await client._send_stream.send(line)

        mark = len(client.sent_by_agent())
        # ids the agent never used, the right number as a string or a float, a boolean, null
        for wrong in (max(id_a, id_b) + 100, -1, str(id_b), float(id_b) + 0.5, True, None):
            await respond(wrong)
        await respond(id_b, "no_such_option")  # B's own id, but not one of B's options: refused, not A's
        view_b = await client.wait_idle(b)
        assert list(view_b.messages().values())[-1] == "allowed=False"
        assert client.view(a).state == "requires_action" and client.view(a).idle_count == 0
        await respond(id_b)  # a second answer to an answered request changes nothing
        client.answer_permission(0, "allow")  # A's request, through its own id
        view_a = await client.wait_idle(a)
        assert list(view_a.messages().values())[-1] == "allowed=True"
        assert [o.option_id for o in agent.outcomes] == [None, "allow"]
        sent = client.sent_by_agent()[mark:]
        assert not any("error" in m and "id" in m for m in sent)  # responses are never answered
        assert client.view(b).idle_count == 1


# -- paths and MCP transports (R33, R34) ----------------------------------------------------------------


class PathAgent(ForkingAgent):
    accepts_additional_directories = True
    mcp_stdio = True


STDIO = {"type": "stdio", "name": "tools", "command": "/bin/true", "args": [], "env": []}
BAD_PARAMS: list[tuple[str, dict[str, Any], str]] = [
    ("relative cwd", {"cwd": "project"}, "cwd must be an absolute path"),
    ("dot cwd", {"cwd": "./project"}, "cwd must be an absolute path"),
    ("empty cwd", {"cwd": ""}, "cwd must be an absolute path"),
    ("uri cwd", {"cwd": "file:///tmp"}, "cwd must be an absolute path"),
    ("relative directory", {"additionalDirectories": ["/ok", "lib"]}, "additionalDirectories must be absolute"),
    ("relative MCP command", {"mcpServers": [{**STDIO, "command": "bin/tool"}]}, "command must be an absolute"),
    ("http MCP (not advertised)", {"mcpServers": [{"type": "http", "name": "h", "url": "https://x", "headers": []}]},
     "Invalid params"),
    ("sse MCP", {"mcpServers": [{"type": "sse", "name": "s", "url": "https://x", "headers": []}]}, "Invalid params"),
    ("custom MCP", {"mcpServers": [{"type": "_custom", "name": "c"}]}, "Invalid params"),
    ("untyped MCP", {"mcpServers": [{"name": "n", "command": "/bin/true"}]}, "Invalid params"),
]


@pytest.mark.parametrize("entry", ["session/new", "session/resume", "session/fork"])
@pytest.mark.parametrize(("case", "bad", "message"), BAD_PARAMS, ids=[c[0] for c in BAD_PARAMS])
async def test_paths_and_transports_are_checked_on_every_entry_point(
    entry: str, case: str, bad: dict[str, Any], message: str
) -> None:  # R33, R34
    async with connect_agent(PathAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp", additionalDirectories=["/srv"], mcpServers=[STDIO])
        base: dict[str, Any] = {"cwd": "/tmp"} if entry == "session/new" else {"sessionId": sid, "cwd": "/tmp"}
        with pytest.raises(RequestError) as info:
            await client.request(entry, {**base, **bad})
        assert info.value.code == -32602
        assert message in info.value.message
        # nothing changed: no new session, the stored one keeps its directories
        [stored] = await client.list_sessions()
        assert stored["cwd"] == "/tmp" and stored["additionalDirectories"] == ["/srv"]
        await client.request(entry, base)  # the same request with good paths succeeds


async def test_list_filter_cwd_must_be_absolute() -> None:  # R34
    async with connect_agent(ScriptedAgent()) as client:
        await client.initialize()
        await client.new_session("/tmp")
        with pytest.raises(RequestError) as info:
            await client.request("session/list", {"cwd": "tmp"})
        expect(info, -32602, {"cwd": "tmp"})
        assert len(await client.list_sessions("/tmp")) == 1


async def test_terminal_cwd_must_be_absolute() -> None:  # R34
    async def start(session: Session, _: str) -> None:
        with pytest.raises(ValueError, match="absolute"):
            await session.start_terminal(["true"], cwd="relative")
        agent.h["checked"] = True

    agent = BgAgent(start=start)
    async with opened(agent) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "start")
        assert agent.h["checked"] and view.terminals == {}


# -- what terminal processes get ---------------------------------------------------------------------------


DUMP_ENV = [sys.executable, "-c", "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))"]


async def test_terminal_environment_is_the_agents_plus_the_authors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_TEST_AGENT_ONLY", "agent")
    monkeypatch.setenv("ACP_AGENT_TOKEN", "never in a terminal")
    monkeypatch.setenv("ACP_TEST_BOTH", "agent")

    async def run(session: Session, arg: str) -> None:
        env = {"ACP_TEST_BOTH": "author", "ACP_TEST_AUTHOR_ONLY": "author $(x) `y`"}
        terminal = await session.start_terminal(DUMP_ENV, env=env if arg == "env" else None)
        await terminal.wait()
        agent.h[arg] = json.loads(terminal.tail())
        # The agent's environment without the SDK's variables (child_environment), the author's, and the mark
        # the watchdog finds the terminal's processes by (reaper).
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("ACP_AGENT_")}
        agent.h[f"{arg}-expected"] = {**inherited, **(env if arg == "env" else {}), MARK_ENV: watch.current()}

    agent = BgAgent(run=run)
    async with opened(agent) as (client, sid, _):
        await client.prompt_and_wait(sid, "run env")
        await client.prompt_and_wait(sid, "run plain")
    assert agent.h["env"] == agent.h["env-expected"]  # exactly: nothing else added, nothing else lost
    assert agent.h["env"]["ACP_TEST_BOTH"] == "author"  # the author wins on conflicts
    assert agent.h["env"]["ACP_TEST_AGENT_ONLY"] == "agent"
    assert agent.h["env"]["ACP_TEST_AUTHOR_ONLY"] == "author $(x) `y`"  # values are never expanded
    assert agent.h["plain"] == agent.h["plain-expected"]


TRICKY = ["$(echo injected)", "`echo injected`", "a; echo injected", "x | cat", "*", "$HOME", "'\"", "&& true", "\n"]


async def test_argv_is_never_interpreted_by_a_shell(tmp_path: Any) -> None:
    script = "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"

    async def run(session: Session, arg: str) -> None:
        terminal = await session.start_terminal([sys.executable, "-c", script, *TRICKY], cwd=str(tmp_path))
        await terminal.wait()
        agent.h["argv"] = json.loads(terminal.tail())
        agent.h["command"] = terminal.command

    agent = BgAgent(run=run)
    async with opened(agent) as (client, sid, _):
        view = await client.prompt_and_wait(sid, "run")
    assert agent.h["argv"] == TRICKY  # each argument arrives as one literal string
    assert not (tmp_path / "injected").exists()
    [terminal] = view.terminals.values()
    assert terminal["command"] == agent.h["command"]  # the display form is shell-quoted, not run


async def test_a_string_command_is_a_shell_command_line() -> None:
    # A string is the author asking for `sh -c`: its metacharacters are the shell's.
    assert command_text("echo $((1 + 2)) | tr 3 4") == ("echo $((1 + 2)) | tr 3 4", None)
    assert command_text(["echo", "$((1 + 2))"]) == ("echo '$((1 + 2))'", ["echo", "$((1 + 2))"])

    async def run(session: Session, arg: str) -> None:
        shell = await session.start_terminal("echo $((1 + 2)) | tr 3 4")
        argv = await session.start_terminal(["echo", "$((1 + 2))", "|", "tr", "3", "4"])
        await shell.wait()
        await argv.wait()
        agent.h.update(shell=shell.tail(), argv=argv.tail(), shell_argv=shell.process.argv)

    agent = BgAgent(run=run)
    async with opened(agent) as (client, sid, _):
        await client.prompt_and_wait(sid, "run")
    assert agent.h["shell"] == b"4\n"
    assert agent.h["argv"] == b"$((1 + 2)) | tr 3 4\n"
    assert agent.h["shell_argv"] == ("/bin/sh", "-c", "echo $((1 + 2)) | tr 3 4")
