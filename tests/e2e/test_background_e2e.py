"""End-to-end: examples/background_agent.py over real pipes, its public contract checked row by row.

Every test drives the agent as a subprocess (on the anyio backend under test, chosen through
``ACP_AGENT_BACKEND``), then validates every message it wrote against the official schema, runs
the wire-rule checker when it is available, checks the background-list invariants itself
(R91, R93, R94) and requires the agent to exit with status 0.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import pytest

from acp_agent.testing.client import Client, spawn_agent
from acp_agent.testing.schema import SchemaValidator
from tests.helpers.e2e import (
    FINAL,
    ROOT,
    answer_index,
    capabilities,
    error_code,
    group_alive,
    is_exit,
    is_state,
    is_tool,
    listed,
    listing_problems,
    not_listing,
    pid_alive,
    snapshots_between,
    start_pid_process,
    statuses,
    terminal_output,
    tool_texts,
    turn,
    updates,
    wait_gone,
    wait_update,
    wire_violations,
)

pytestmark = pytest.mark.anyio

AGENT = ROOT / "examples" / "background_agent.py"
CANCEL = {"cancel": {}}


# -- harness ---------------------------------------------------------------------------------


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups a test started through the agent; SIGKILLed at teardown if a test left any."""
    started: list[int] = []
    yield started
    for pgid in started:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


@asynccontextmanager
async def agent_process(validator: SchemaValidator, backend: str, script: Path = AGENT) -> AsyncIterator[Client]:
    async with spawn_agent([sys.executable, str(script)], env={"ACP_AGENT_BACKEND": backend}) as client:
        yield client
    problems = validator.check_transcript(client.transcript)
    assert not problems, "\n".join(problems)
    problems = listing_problems(client.transcript)
    assert not problems, "\n".join(problems)
    violations = wire_violations(client.transcript)
    assert not violations, "\n".join(violations)
    assert client.returncode == 0


async def open_session(client: Client) -> str:
    init = await client.initialize()
    assert init["info"]["name"] == "background-agent"
    return await client.new_session(str(ROOT))


# -- one test per row of the contract -----------------------------------------------------------


async def test_echo_and_plain_text(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        first = await turn(client, sid, "echo hello over pipes")
        assert first.agent_texts() == ["hello over pipes"]
        second = await turn(client, sid, "no command here, just text")
        assert second.agent_texts() == ["no command here, just text"]
        for _, u in updates(client, sid):
            assert u["sessionUpdate"] in ("user_message", "agent_message", "agent_message_chunk", "state_update"), u
            if is_state(u):
                assert u["background"] == []


async def test_bg(validator: SchemaValidator, anyio_backend: str) -> None:
    cmd = "echo start; sleep 0.4; echo done"
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        t = await turn(client, sid, f"/bg {cmd}")
        call = t.tool_call()
        call_id = call["toolCallId"]
        assert (call["title"], call["kind"]) == (cmd, "execute")
        term = t.terminal()
        term_id = term["terminalId"]
        assert term["command"] == cmd and term["cwd"] == str(ROOT)
        assert term["capabilities"] == CANCEL
        assert any(u["sessionUpdate"] == "tool_call_content_chunk" and u["toolCallId"] == call_id
                   and u["content"] == {"type": "terminal", "terminalId": term_id} for _, u in t.updates)
        # handed off: the tool call completes within the turn, the terminal stays listed after it
        done = [i for i, u in t.updates if is_tool(call_id, status="completed")(u)]
        assert len(done) == 1 and done[0] < t.end
        assert ("terminal", term_id) in listed(t.stop)

        exit_index, exit_update = await wait_update(client, sid, is_exit(term_id), since=t.end)
        assert exit_update["exitStatus"]["exitCode"] == 0
        assert exit_update.get("capabilities", "absent") is None  # R100: cancel withdrawn with the exit
        removed, snapshot = await wait_update(client, sid, not_listing(("terminal", term_id)), since=t.end)
        assert exit_index < removed  # R94: exitStatus first, then the snapshot without it
        assert snapshot["state"] == "idle" and snapshot.get("stopReason") is None  # not a new completion
        first_listed = next(i for i, u in snapshots_between(client, sid, t.start) if ("terminal", term_id) in listed(u))
        for _, u in snapshots_between(client, sid, first_listed, removed):
            assert ("terminal", term_id) in listed(u)  # listed until the process exits
        for _, u in snapshots_between(client, sid, 0):
            assert ("tool_call", call_id) not in listed(u)

        # output streamed as it came (not only at the exit), and complete
        assert terminal_output(client, sid, term_id) == b"start\ndone\n"
        chunks = [i for i, u in updates(client, sid) if u["sessionUpdate"] == "terminal_output_chunk"]
        assert chunks and max(chunks) < exit_index
        assert client.transcript[exit_index].at - client.transcript[chunks[0]].at > 0.2
        assert not [u for _, u in updates(client, sid, done[0] + 1) if is_tool(call_id)(u)]  # final stays final


async def test_bgwait(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        for cmd, exit_code, status in (("echo out; sleep 0.4; exit 3", 3, "failed"), ("sleep 0.1", 0, "completed")):
            t = await turn(client, sid, f"/bgwait {cmd}")
            call = t.tool_call()
            call_id = call["toolCallId"]
            assert (call["title"], call["kind"], call["status"]) == (cmd, "execute", "in_progress")
            term_id = t.terminal()["terminalId"]
            assert t.terminal()["capabilities"] == CANCEL
            assert not [u for _, u in t.updates if is_tool(call_id)(u) and u.get("status") in FINAL]
            assert listed(t.stop) == {("terminal", term_id)}

            exit_index, exit_update = await wait_update(client, sid, is_exit(term_id), since=t.end)
            assert exit_update["exitStatus"]["exitCode"] == exit_code
            if exit_code:  # the turn ended right after the start, not when the process did
                assert client.transcript[exit_index].at - client.transcript[t.end].at > 0.2
            final_index, final = await wait_update(client, sid, is_tool(call_id, status=status), since=t.end)
            assert final["rawOutput"]["exitCode"] == exit_code
            removed, _ = await wait_update(client, sid, not_listing(("terminal", term_id)), since=t.end)
            assert exit_index < removed and final_index < removed
            ends = [u for _, u in updates(client, sid, t.start) if is_tool(call_id)(u) and u.get("status") in FINAL]
            assert len(ends) == 1
            for _, u in snapshots_between(client, sid, 0):
                assert ("tool_call", call_id) not in listed(u)  # only the terminal is ever listed (R88)


async def test_run(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        for cmd, exit_code, status in (("echo ran; sleep 0.3", 0, "completed"), ("exit 4", 4, "failed")):
            t = await turn(client, sid, f"/run {cmd}")
            if exit_code == 0:  # the turn waited for the process
                assert client.transcript[t.end].at - client.transcript[t.start].at > 0.25
            call_id = t.tool_call()["toolCallId"]
            assert (t.tool_call()["title"], t.tool_call()["kind"]) == (cmd, "execute")
            term_id = t.terminal()["terminalId"]
            exit_index = next(i for i, u in t.updates if is_exit(term_id)(u))
            final_index = next(i for i, u in t.updates if is_tool(call_id, status=status)(u))
            assert exit_index < final_index < t.end  # the turn waits for the process
            assert dict(t.updates)[exit_index]["exitStatus"]["exitCode"] == exit_code
            states = [u for _, u in t.updates if is_state(u)]
            assert [u["state"] for u in states] == ["running"] * (len(states) - 1) + ["idle"]
        assert b"ran\n" in b"".join(terminal_output(client, sid, u["terminalId"]) for _, u in updates(client, sid)
                                    if u["sessionUpdate"] == "terminal_update" and "command" in u)
        for _, u in snapshots_between(client, sid, 0):
            assert u["background"] == []  # foreground work is never listed (R85)


@pytest.mark.parametrize("anyio_backend", ["trio"])  # slow; asyncio watchers tick in the cancel/resume/interop tests
async def test_watch(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        t = await turn(client, sid, "/watch 2")
        call_id = t.tool_call()["toolCallId"]
        assert t.tool_call()["title"] == "Watch"
        assert statuses(t.updates, call_id) == ["pending", "in_progress"]
        assert capabilities(client, sid, ("tool_call", call_id), t.end) == CANCEL
        assert listed(t.stop) == {("tool_call", call_id)}
        assert not tool_texts(client, sid, call_id)  # the turn ended before the first tick

        done_index, done = await wait_update(client, sid, is_tool(call_id, status="completed"), since=t.end,
                                             timeout=6)
        assert done.get("capabilities", "absent") is None
        ticks = tool_texts(client, sid, call_id)
        assert [text for _, text in ticks] == ["tick 1", "tick 2"]
        t0 = client.transcript[t.end].at
        for n, (index, _) in enumerate(ticks, 1):
            assert n - 0.5 < client.transcript[index].at - t0 < n + 0.7, "about one tick a second"
        assert ticks[-1][0] < done_index
        removed, _ = await wait_update(client, sid, not_listing(("tool_call", call_id)), since=t.end)
        assert done_index < removed
        for _, u in snapshots_between(client, sid, t.end, removed):
            assert ("tool_call", call_id) in listed(u)


async def test_schedule(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        t = await turn(client, sid, "/schedule 0.5 time to wake up")
        call = t.tool_call()
        call_id = call["toolCallId"]
        assert (call["title"], call["status"]) == ("Wake up", "pending")
        assert capabilities(client, sid, ("tool_call", call_id), t.end) == CANCEL
        assert listed(t.stop) == {("tool_call", call_id)}
        assert not t.agent_texts()

        await client.wait_idle(sid, 2, timeout=6)
        fired = updates(client, sid, t.end + 1)
        assert [u["sessionUpdate"] for _, u in fired] == \
            ["tool_call_update", "state_update", "agent_message", "state_update"], fired
        (i_done, done), (_, running), (_, message), (_, idle) = fired
        assert done["toolCallId"] == call_id and done["status"] == "completed"
        assert done.get("capabilities", "absent") is None
        assert 0.3 < client.transcript[i_done].at - client.transcript[t.end].at < 2.0
        # R95: the snapshot that drops it already says running -- no idle [] in between
        assert running["state"] == "running" and ("tool_call", call_id) not in listed(running)
        assert [b["text"] for b in message["content"]] == ["time to wake up"]
        assert idle["state"] == "idle" and idle["stopReason"] == "end_turn" and idle["background"] == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # slow; its steps run on trio in test_pause_and_resume
async def test_workflow(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        t = await turn(client, sid, "/workflow 2")
        call_id = t.tool_call()["toolCallId"]
        assert t.tool_call()["title"] == "Workflow"
        assert statuses(t.updates, call_id)[-1] == "in_progress"
        assert listed(t.stop) == {("tool_call", call_id)}

        done_index, _ = await wait_update(client, sid, is_tool(call_id, status="completed"), since=t.end, timeout=6)
        steps = tool_texts(client, sid, call_id)
        assert [text for _, text in steps] == ["step 1/2", "step 2/2"]
        t0 = client.transcript[t.end].at
        for n, (index, _) in enumerate(steps, 1):
            assert n - 0.5 < client.transcript[index].at - t0 < n + 0.7, "one step a second"
        assert steps[-1][0] < done_index
        removed, _ = await wait_update(client, sid, not_listing(("tool_call", call_id)), since=t.end)
        assert done_index < removed
        for _, u in snapshots_between(client, sid, t.end, removed):
            assert ("tool_call", call_id) in listed(u)


@pytest.mark.parametrize("anyio_backend", ["trio"])  # slow; test_workflow covers asyncio
async def test_pause_and_resume(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        assert (await turn(client, sid, "/pause")).agent_texts() == ["No running workflow to pause."]
        assert (await turn(client, sid, "/resume")).agent_texts() == ["No paused workflow to resume."]
        t = await turn(client, sid, "/workflow 2")
        flow = t.tool_call()["toolCallId"]

        paused = await turn(client, sid, "/pause")
        assert statuses(paused.updates, flow) == ["paused"]
        assert ("tool_call", flow) in listed(paused.stop)  # paused work stays listed (R89)
        assert (await turn(client, sid, "/pause")).agent_texts() == ["No running workflow to pause."]
        pause_index = next(i for i, u in paused.updates if u.get("toolCallId") == flow and u.get("status") == "paused")
        await anyio.sleep(1.3)  # the step under way waits at its checkpoint: nothing lands while paused
        assert all(i < pause_index for i, _ in tool_texts(client, sid, flow))
        assert statuses(updates(client, sid), flow)[-1] == "paused"
        assert ("tool_call", flow) in listed(snapshots_between(client, sid, 0)[-1][1])

        resumed = await turn(client, sid, "/resume")
        assert statuses(resumed.updates, flow) == ["in_progress"]
        assert ("tool_call", flow) in listed(resumed.stop)
        done_index, _ = await wait_update(client, sid, is_tool(flow, status="completed"), since=resumed.end,
                                          timeout=6)
        steps = tool_texts(client, sid, flow)
        assert [text for _, text in steps] == ["step 1/2", "step 2/2"]
        assert resumed.start < steps[-1][0] < done_index
        assert not any(pause_index < i < resumed.start for i, _ in steps)  # no progress while paused
        await wait_update(client, sid, not_listing(("tool_call", flow)), since=done_index)


# -- per-item cancels ---------------------------------------------------------------------------


async def test_cancel_every_cancellable_item(validator: SchemaValidator, anyio_backend: str,
                                             groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        t_bg, bg_term, (bg_pid,) = await start_pid_process(client, sid, "/bg echo $$; sleep 30", groups)
        bg_call = t_bg.tool_call()["toolCallId"]
        t_bw, bw_term, (bw_pid,) = await start_pid_process(client, sid, "/bgwait echo $$; sleep 30", groups)
        bw_call = t_bw.tool_call()["toolCallId"]
        watch = (await turn(client, sid, "/watch 30")).tool_call()["toolCallId"]
        flow = (await turn(client, sid, "/workflow 30")).tool_call()["toolCallId"]
        paused = (await turn(client, sid, "/workflow 30")).tool_call()["toolCallId"]
        await turn(client, sid, "/pause")  # acts on the newest workflow
        schedule_start = anyio.current_time()
        sched = (await turn(client, sid, "/schedule 1 this must never be said")).tool_call()["toolCallId"]
        everything = {("terminal", bg_term), ("terminal", bw_term), ("tool_call", sched), ("tool_call", watch),
                      ("tool_call", flow), ("tool_call", paused)}
        assert listed(snapshots_between(client, sid, 0)[-1][1]) == everything
        assert not [u for _, u in updates(client, sid) if is_tool(bw_call)(u) and u.get("capabilities")]

        # unknown, final and non-cancellable items: -32602, never -32601 (R102, R104)
        for method, params in (
            ("tool_call/cancel", {"toolCallId": bg_call}),  # completed
            ("tool_call/cancel", {"toolCallId": bw_call}),  # in progress, but no cancel advertised
            ("tool_call/cancel", {"toolCallId": "call_unknown"}),
            ("tool_call/cancel", {"toolCallId": bg_term}),  # a terminal id is not a tool call id
            ("terminal/cancel", {"terminalId": "term_unknown"}),
            ("terminal/cancel", {"terminalId": watch}),
        ):
            assert await error_code(client, method, {"sessionId": sid, **params}) == -32602, (method, params)
        for method, params in (("tool_call/cancel", {"toolCallId": watch}),
                               ("terminal/cancel", {"terminalId": bg_term})):
            assert await error_code(client, method, {"sessionId": "sess_unknown", **params}) == -32002

        remaining = set(everything)
        for key in [("tool_call", sched), ("terminal", bg_term), ("terminal", bw_term), ("tool_call", watch),
                    ("tool_call", flow), ("tool_call", paused)]:
            kind, item = key
            assert capabilities(client, sid, key) == CANCEL
            method = f"{kind}/cancel"
            params = {"sessionId": sid, ("terminalId" if kind == "terminal" else "toolCallId"): item}
            mark = len(client.transcript)
            assert await client.request(method, params) == {}
            # the answer {} and the final status / exit both come (R101, R103); their order is not
            # fixed (§11.5): a wake-up's `cancelled` typically goes out before the answer
            if kind == "terminal":
                final_index, final = await wait_update(client, sid, is_exit(item), since=mark)
                assert final["exitStatus"].get("signal") == "SIGTERM", final
            else:
                final_index, final = await wait_update(client, sid, is_tool(item, status="cancelled"), since=mark)
            assert final.get("capabilities", "absent") is None  # R100
            remaining.discard(key)
            removed, snapshot = await wait_update(client, sid, not_listing(key), since=mark)
            assert final_index < removed and listed(snapshot) == remaining
            for _, u in snapshots_between(client, sid, mark):
                assert u["state"] == "idle" and u.get("stopReason") is None  # foreground state untouched (R105)
            assert await error_code(client, method, params) == -32602  # now final / exited

        # terminal/cancel leaves the referencing tool calls alone: /bg's stays completed, /bgwait's
        # ends exactly as for any other exit of its process (failed, with the signal), never "cancelled"
        assert statuses(updates(client, sid), bg_call) == ["in_progress", "completed"]
        bw_end = [u for _, u in updates(client, sid) if is_tool(bw_call)(u) and u.get("status") in FINAL]
        assert [(u["status"], u["rawOutput"]["signal"]) for u in bw_end] == [("failed", "SIGTERM")]
        await wait_gone(group_alive, bg_pid)
        await wait_gone(group_alive, bw_pid)
        # the cancelled wake-up never fires
        await anyio.sleep(max(0.0, schedule_start + 1.3 - anyio.current_time()))
        assert "this must never be said" not in client.view(sid).messages().values()
        assert client.view(sid).idle_count == 7
        await client.close_session(sid)


async def test_terminal_cancel_of_a_foreground_process(validator: SchemaValidator, anyio_backend: str,
                                                       groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        start = len(client.transcript)
        await client.prompt(sid, "/run echo $$; sleep 30")
        _, term = await wait_update(client, sid, lambda u: u["sessionUpdate"] == "terminal_update", since=start)
        term_id = term["terminalId"]
        assert term["capabilities"] == CANCEL
        await client.wait_for(lambda: b"\n" in terminal_output(client, sid, term_id))
        pid = int(terminal_output(client, sid, term_id).split()[0])
        groups.append(pid)
        mark = len(client.transcript)
        params = {"sessionId": sid, "terminalId": term_id}
        assert await client.request("terminal/cancel", params) == {}
        _, exit_update = await wait_update(client, sid, is_exit(term_id), since=mark)
        assert exit_update["exitStatus"].get("signal") == "SIGTERM"
        await client.wait_idle(sid)
        after = updates(client, sid, mark)
        # the turn goes on: the tool call reports the exit like any other, then the turn ends normally
        assert [u["sessionUpdate"] for _, u in after] == ["terminal_update", "tool_call_update", "state_update"]
        assert after[1][1]["status"] == "failed" and after[1][1]["rawOutput"]["signal"] == "SIGTERM"
        assert after[2][1]["state"] == "idle" and after[2][1]["stopReason"] == "end_turn"
        await wait_gone(group_alive, pid)


async def test_session_cancel_leaves_listed_work_running(validator: SchemaValidator, anyio_backend: str,
                                                         groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        _, bg_term, (bg_pid,) = await start_pid_process(client, sid, "/bg echo $$; sleep 30", groups)
        watch = (await turn(client, sid, "/watch 30")).tool_call()["toolCallId"]
        start = len(client.transcript)
        await client.prompt(sid, "/run echo $$; sleep 30")
        _, term = await wait_update(client, sid, lambda u: u["sessionUpdate"] == "terminal_update", since=start)
        run_term = term["terminalId"]
        await client.wait_for(lambda: b"\n" in terminal_output(client, sid, run_term))
        run_pid = int(terminal_output(client, sid, run_term).split()[0])
        groups.append(run_pid)
        mark = len(client.transcript)
        client.cancel(sid)
        view = await client.wait_idle(sid, 3)
        assert view.stop_reason == "cancelled"
        idle_index = max(i for i, u in updates(client, sid) if is_state(u) and u.get("stopReason") == "cancelled")
        exit_index, _ = await wait_update(client, sid, is_exit(run_term), since=mark)
        assert exit_index < idle_index  # R68: the cancelled work's final updates precede the idle
        idle = dict(updates(client, sid))[idle_index]
        assert listed(idle) == {("terminal", bg_term), ("tool_call", watch)}  # R106: listed work keeps running
        await wait_gone(group_alive, run_pid)
        assert group_alive(bg_pid)
        assert not [u for _, u in updates(client, sid, mark)
                    if is_exit(bg_term)(u) or is_tool(watch, status="cancelled")(u)]
        await client.close_session(sid)
        await wait_gone(group_alive, bg_pid)


# -- session level ------------------------------------------------------------------------------


async def test_resume_reannounces_listed_work(validator: SchemaValidator, anyio_backend: str,
                                              groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        _, bg_term, _ = await start_pid_process(client, sid, "/bg echo $$; echo from-bg; sleep 30", groups)
        await client.wait_for(lambda: b"from-bg" in terminal_output(client, sid, bg_term))
        t_bw, bw_term, _ = await start_pid_process(client, sid, "/bgwait echo $$; sleep 30", groups)
        watch = (await turn(client, sid, "/watch 30")).tool_call()["toolCallId"]
        sched = (await turn(client, sid, "/schedule 30 later")).tool_call()["toolCallId"]
        flow = (await turn(client, sid, "/workflow 30")).tool_call()["toolCallId"]
        await turn(client, sid, "/pause")
        outputs = {t: terminal_output(client, sid, t) for t in (bg_term, bw_term)}

        mark = len(client.transcript)
        params = {"sessionId": sid, "cwd": str(ROOT)}
        result = await client.request("session/resume", params)
        assert all(isinstance(result.get(k, []), list) for k in ("configOptions", "availableCommands"))
        answered = answer_index(client, "session/resume", params)
        between = updates(client, sid, mark, answered)
        *announced, snapshot = [u for _, u in between]
        # R40/R113: the re-announcements, then one snapshot, then the answer -- and no replay
        assert is_state(snapshot) and snapshot["state"] == "idle"
        expected = {("terminal", bg_term), ("terminal", bw_term), ("tool_call", watch), ("tool_call", sched),
                    ("tool_call", flow)}
        assert listed(snapshot) == expected
        keys = [("terminal", u["terminalId"]) if u["sessionUpdate"] == "terminal_update"
                else ("tool_call", u.get("toolCallId")) for u in announced]
        assert sorted(keys) == sorted(expected), announced  # each listed item once, nothing else
        for u in announced:
            if u["sessionUpdate"] == "terminal_update":
                assert u["command"] and u["cwd"] == str(ROOT) and u["capabilities"] == CANCEL
                assert u.get("exitStatus") is None
                assert base64.b64decode(u["output"]["data"]) == outputs[u["terminalId"]]
            else:
                want = {watch: ("Watch", "in_progress"), sched: ("Wake up", "pending"), flow: ("Workflow", "paused")}
                assert (u["title"], u["status"]) == want[u["toolCallId"]]
                assert u["kind"] == "other" and u["capabilities"] == CANCEL
        assert ("tool_call", t_bw.tool_call()["toolCallId"]) not in keys

        # the resumed session still works
        assert await client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": watch}) == {}
        await wait_update(client, sid, is_tool(watch, status="cancelled"), since=answered)
        await client.close_session(sid)


def _implements_fork() -> bool:
    spec = importlib.util.spec_from_file_location("background_agent_example", AGENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return bool(module.BackgroundAgent().implements("fork_session"))


@pytest.mark.skipif(not _implements_fork(), reason="the agent does not implement (advertise) session/fork")
async def test_fork_reports_no_background(validator: SchemaValidator, anyio_backend: str) -> None:
    async with agent_process(validator, anyio_backend) as client:
        init = await client.initialize()
        assert init["capabilities"]["session"]["fork"] is not None
        sid = await client.new_session(str(ROOT))
        await turn(client, sid, "/watch 30")
        fork = (await client.request("session/fork", {"sessionId": sid, "cwd": str(ROOT)}))["sessionId"]
        await turn(client, fork, "echo in the fork")
        for _, u in snapshots_between(client, fork, 0):
            assert u["background"] == []  # R112


async def test_close_stops_all_background_work(validator: SchemaValidator, anyio_backend: str,
                                               groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        _, _, (bg_pid,) = await start_pid_process(client, sid, "/bg echo $$; sleep 300", groups)
        _, _, (bw_pid,) = await start_pid_process(client, sid, "/bgwait echo $$; sleep 300", groups)
        due = anyio.current_time() + 1.1  # a watcher tick, a workflow step and the wake-up are due by then
        for prompt in ("/watch 30", "/schedule 1 too late", "/workflow 30"):
            await turn(client, sid, prompt)
        assert len(listed(snapshots_between(client, sid, 0)[-1][1])) == 5
        await client.close_session(sid)
        closed = answer_index(client, "session/close", {"sessionId": sid})
        await wait_gone(group_alive, bg_pid)
        await wait_gone(group_alive, bw_pid)
        await anyio.sleep(max(0.0, due - anyio.current_time()))
        assert updates(client, sid, closed) == []  # R45: nothing for the session after the answer
        assert await error_code(client, "session/prompt",
                                {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}) == -32002
        assert await error_code(client, "terminal/cancel", {"sessionId": sid, "terminalId": "term_1"}) == -32002


async def test_eof_with_background_process(validator: SchemaValidator, anyio_backend: str,
                                           groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        _, _, (pid,) = await start_pid_process(client, sid, "/bg echo $$; sleep 300", groups)
        await turn(client, sid, "/watch 30")
    # leaving the block closed the agent's stdin; agent_process checked the exit status 0
    await wait_gone(group_alive, pid)


async def test_sigterm_with_background_process(validator: SchemaValidator, anyio_backend: str,
                                               groups: list[int]) -> None:
    async with agent_process(validator, anyio_backend) as client:
        sid = await open_session(client)
        _, _, (pid, agent_pid) = await start_pid_process(client, sid, "/bg echo $$ $PPID; sleep 300", groups)
        assert agent_pid not in (1, os.getpid())
        os.kill(agent_pid, signal.SIGTERM)
        await wait_gone(pid_alive, agent_pid, timeout=8)  # it exits on the signal, stdin still open
    await wait_gone(group_alive, pid)


# -- regressions -----------------------------------------------------------------------------------

# examples/background_agent.py, unchanged, with one delay: Session.start_terminal returns 0.3 s late. That is what
# its last step, `await self.drain_backpressure()`, does whenever the writer is over its high-water mark because the
# client reads slowly (e.g. behind a chatty background process); a short command exits in that window. Before
# 31e8388 an exit callback registered after the exit was reported never ran, so /bgwait's tool call then stayed
# in_progress forever and was listed in place of its exited terminal.
SLOW_CLIENT_AGENT = """
import runpy
import anyio
from acp_agent.session import Session

start_terminal = Session.start_terminal

async def start_terminal_behind_a_slow_client(self, *args, **kwargs):
    terminal = await start_terminal(self, *args, **kwargs)
    await anyio.sleep(0.3)  # stands for drain_backpressure() waiting on the client
    return terminal

Session.start_terminal = start_terminal_behind_a_slow_client
runpy.run_path({agent!r}, run_name="__main__")
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_bgwait_process_exiting_during_handoff(validator: SchemaValidator, anyio_backend: str,
                                                     tmp_path: Path) -> None:
    script = tmp_path / "slow_client_agent.py"
    script.write_text(SLOW_CLIENT_AGENT.format(agent=str(AGENT)))
    async with agent_process(validator, anyio_backend, script) as client:
        sid = await open_session(client)
        t = await turn(client, sid, "/bgwait exit 3")
        call_id = t.tool_call()["toolCallId"]
        term_id = t.terminal()["terminalId"]
        await wait_update(client, sid, is_exit(term_id), since=t.start)
        try:
            # the tool call ends by the exit code, and only the terminal was ever listed
            await wait_update(client, sid, is_tool(call_id, status="failed"), since=t.start, timeout=1.0)
            for _, u in snapshots_between(client, sid, 0):
                assert ("tool_call", call_id) not in listed(u)
        finally:
            await client.close_session(sid)
