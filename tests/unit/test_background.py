"""Background work (spec §11, rules R85-R113): one test per rule the SDK enforces.

Each test drives a small agent that uses only the public handle API (``Session``,
``ToolCall``, ``Terminal``) through the in-process client, then judges the wire: what the
client received, in which order. A library bug is shown by a test marked
``xfail(strict=True, reason="BUG: ...")`` until it is fixed; the tests then stay as regressions.
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from acp_agent import PermissionOption, RequestError, Session, ToolCallStateError
from acp_agent._session.registry import BackgroundRegistry
from acp_agent.schema import (
    BackgroundSubagent,
    BackgroundTerminal,
    BackgroundToolCall,
    IdleStateUpdate,
    RunningStateUpdate,
    SubagentUpdate,
    Terminal,
    TerminalUpdate,
    ToolCallContentChunk,
    ToolCallPermissionSubject,
    ToolCallUpdate,
)
from acp_agent.testing.pytest_plugin import check_client
from acp_agent.testing.schema import SchemaValidator, default_schema_path
from tests.helpers.background import (
    BgAgent,
    ForkingBgAgent,
    agent_wire,
    assert_clean,
    first_index,
    flush,
    is_exit,
    is_final,
    is_listing,
    is_update,
    items,
    opened,
    order_problems,
    snapshots,
    statuses,
    tool_updates,
    wire_violations,
)

pytestmark = pytest.mark.anyio

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
]


def _seen(updates: list[dict[str, Any]], predicate: Callable[[dict[str, Any]], bool]) -> Callable[[], bool]:
    return lambda: any(predicate(u) for u in updates)


# -- R85: only detached work is listed ---------------------------------------------------------


async def test_r85_foreground_work_is_listed_only_once_detached() -> None:
    async def scenario(session: Session, _: str) -> None:
        tool = await session.start_tool_call("pytest", kind="execute", status="in_progress")
        term = await session.start_terminal(["sleep", "30"], tool_call=tool)
        agent.h.update(tool=tool, term=term)
        # a list change while the foreground waits on the process: it must not be listed
        agent.h["wake"] = await session.schedule(60, _noop, title="later")
        await agent.event("detach").wait()
        term.detach()
        tool.finish_with(term)

    agent = BgAgent(fg=scenario)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "fg")
        view = client.view(sid)
        wake = await _wait_handle(agent, "wake")
        await client.wait_for(lambda: any(is_listing("tool_call", wake.id)(u) for u in view.updates))
        term, tool = agent.h["term"], agent.h["tool"]
        before = [items(s) for s in snapshots(view.updates)]
        assert all(("terminal", term.id) not in s and ("tool_call", tool.id) not in s for s in before)
        assert before[-1] == [("tool_call", wake.id)]
        agent.event("detach").set()
        await client.wait_idle(sid)
        listed = [items(s) for s in snapshots(view.updates)]
        # the snapshot right after detaching lists the terminal (still in the turn: running)
        joined = next(s for s in snapshots(view.updates) if ("terminal", term.id) in items(s))
        assert joined["state"] == "running"
        assert set(listed[-1]) == {("terminal", term.id), ("tool_call", wake.id)}
        assert_clean(client, sid)


async def _noop() -> None:
    return None


async def _wait_handle(agent: BgAgent, name: str) -> Any:
    with anyio.fail_after(5):
        while name not in agent.h:
            await anyio.sleep(0.005)
    return agent.h[name]


# -- R87: references stay inside the session ---------------------------------------------------


async def test_r87_items_name_only_this_sessions_entities_and_foreign_handles_are_refused() -> None:
    async def start(session: Session, name: str) -> None:
        tool = await session.start_tool_call(f"watch {name}", kind="other")
        tool.run(_wait_forever)
        agent.h[name] = tool
        agent.h[name + "-term"] = await session.start_terminal(["sleep", "30"], detach=True)

    async def foreign(session: Session, name: str) -> None:
        with pytest.raises(ValueError, match="another session"):
            await session.start_terminal(["echo", "x"], tool_call=agent.h[name])

    agent = BgAgent(start=start, foreign=foreign)
    async with opened(agent) as (client, a, _sa):
        b = await client.new_session("/tmp")
        await client.prompt_and_wait(a, "start A")
        await client.prompt_and_wait(b, "start B")
        mark = len(client.transcript)
        await client.prompt_and_wait(b, "foreign A")  # a handle of session A used in session B
        new = [e.message["params"]["update"] for e in client.transcript[mark:]
               if e.message.get("method") == "session/update"]
        assert [u["sessionUpdate"] for u in new] == ["user_message", "state_update", "state_update"]
        assert client.view(b).stop_reason == "end_turn"
        own = {"A": {("tool_call", agent.h["A"].id), ("terminal", agent.h["A-term"].id)},
               "B": {("tool_call", agent.h["B"].id), ("terminal", agent.h["B-term"].id)}}
        for sid, name in ((a, "A"), (b, "B")):
            for snapshot in snapshots(client.view(sid).updates):
                assert set(items(snapshot)) <= own[name]
            assert set(items(snapshots(client.view(sid).updates)[-1])) == own[name]
            assert_clean(client, sid)
        if default_schema_path().exists():  # every item is well-formed (R87)
            problems = SchemaValidator().check_transcript(client.transcript)
            assert not problems, "\n".join(problems)


async def _wait_forever(tool: Any) -> None:
    await anyio.sleep_forever()


# -- R88: one shell is one task ----------------------------------------------------------------


async def test_r88_process_backed_work_is_listed_through_its_terminal_only() -> None:
    async def bgwait(session: Session, _: str) -> None:
        tool = await session.start_tool_call("sleep", kind="execute", name="bash", status="in_progress")
        term = await session.start_terminal(["sleep", "0.3"], tool_call=tool, detach=True)
        tool.finish_with(term)
        agent.h.update(tool=tool, term=term)

    async def handoff(session: Session, _: str) -> None:
        tool = await session.start_tool_call("sleep", kind="execute", name="bash", status="in_progress")
        term = await session.start_terminal(["sleep", "30"], tool_call=tool)
        term.detach()  # pushed to the background mid-turn; the tool call stays live
        agent.h.update(tool2=tool, term2=term)

    agent = BgAgent(bgwait=bgwait, handoff=handoff)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "bgwait")
        tool, term = agent.h["tool"], agent.h["term"]
        assert items(snapshots(view.updates)[-1]) == [("terminal", term.id)]
        assert not any(is_listing("tool_call", tool.id)(u) for u in view.updates)
        assert statuses(view.updates, tool.id) == ["in_progress"]  # live, yet not listed
        await client.wait_for(lambda: any(is_final(tool.id)(u) for u in view.updates))
        await flush(client, _session)
        exit_at = first_index(view.updates, is_exit(term.id))
        # the exit ends the tool call in the same step; the next snapshot drops the terminal
        assert is_final(tool.id)(view.updates[exit_at + 1])
        assert items(view.updates[exit_at + 2]) == []
        assert not any(is_listing("tool_call", tool.id)(u) for u in view.updates)

        view = await client.prompt_and_wait(sid, "handoff")
        tool2, term2 = agent.h["tool2"], agent.h["term2"]
        assert items(snapshots(view.updates)[-1]) == [("terminal", term2.id)]
        assert not any(is_listing("tool_call", tool2.id)(u) for u in view.updates)
        assert order_problems(view.updates, strict_r88=True) == []


async def test_r88_tool_call_detached_at_creation_is_not_listed_next_to_its_terminal() -> None:
    async def launch(session: Session, _: str) -> None:
        tool = await session.start_tool_call("sleep", kind="execute", status="in_progress", detach=True)
        term = await session.start_terminal(["sleep", "30"], tool_call=tool, detach=True)
        tool.finish_with(term)
        agent.h.update(tool=tool, term=term)

    agent = BgAgent(launch=launch)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "launch")
        assert items(snapshots(view.updates)[-1]) == [("terminal", agent.h["term"].id)]


# -- R89: pending and paused tool calls stay listed --------------------------------------------


async def test_r89_pending_and_paused_tool_calls_stay_listed() -> None:
    async def setup(session: Session, _: str) -> None:
        agent.h["wake"] = await session.schedule(60, _noop, title="check later")
        flow = await session.start_tool_call("workflow", kind="other", detach=True)
        await flow.start()
        await flow.pause()
        agent.h["flow"] = flow

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        view = await client.prompt_and_wait(sid, "setup")
        wake, flow = agent.h["wake"], agent.h["flow"]
        assert statuses(view.updates, wake.id) == ["pending"]
        assert statuses(view.updates, flow.id) == ["pending", "in_progress", "paused"]
        pause_at = first_index(view.updates, lambda u: u.get("status") == "paused")
        for snapshot in view.updates[pause_at:]:
            if snapshot["sessionUpdate"] == "state_update":
                assert items(snapshot) == [("tool_call", wake.id), ("tool_call", flow.id)]
        assert view.updates[-1]["state"] == "idle"
        # an idle session with only pending/paused work is still reported as owning it
        await flow.resume()
        await flow.pause()
        await flush(client, session)
        assert items(snapshots(view.updates)[-1]) == [("tool_call", wake.id), ("tool_call", flow.id)]
        assert_clean(client, sid)


# -- R90: a detached child is listed while it is busy --------------------------------------------


async def test_r90_busy_child_is_listed_until_it_reports_quiet() -> None:
    async def spawn(session: Session, _: str) -> None:
        child = await session.spawn_subagent("explore auth module")

        async def work(child_session: Session) -> None:
            await child_session.say("exploring")
            await agent.event("child done").wait()

        child.start(work)
        agent.h["child"] = child

    agent = BgAgent(spawn=spawn)
    async with opened(agent) as (client, sid, session):
        view = await client.prompt_and_wait(sid, "spawn")
        child = agent.h["child"]
        await client.wait_for(lambda: ("subagent", child.id) in items(snapshots(view.updates)[-1]))
        listed_at = first_index(view.updates, is_listing("subagent", child.id))
        announced_at = first_index(view.updates, lambda u: u["sessionUpdate"] == "subagent_update")
        assert announced_at < listed_at
        agent.event("child done").set()
        await client.wait_for(lambda: items(snapshots(view.updates)[-1]) == [])
        await flush(client, session)
        dropped_at = max(i for i, u in enumerate(view.updates) if u["sessionUpdate"] == "state_update")
        mirrors = [(i, u["state"]) for i, u in enumerate(view.updates)
                   if u["sessionUpdate"] == "subagent_update" and "state" in u and i < dropped_at]
        # the child's quiet idle reached the parent before the snapshot that drops it
        assert mirrors[-1][1]["state"] == "idle" and mirrors[-1][1]["background"] == []
        assert client.view(child.id).stop_reason == "end_turn"
        assert_clean(client, sid)


# -- R91 / R92: every snapshot carries the list; a changed list is re-sent -----------------------


async def test_r91_every_snapshot_carries_background() -> None:
    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")
        tool.run(_wait_forever)
        await session.request_permission("go on?", OPTIONS)
        await anyio.sleep(30)

    agent = BgAgent(work=work)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "work")
        await client.wait_for(lambda: client.view(sid).state == "running" and any(
            u.get("state") == "running" for u in snapshots(client.view(sid).updates)[2:]))
        client.cancel(sid)
        await client.wait_idle(sid)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        shots = snapshots(client.view(sid).updates)
        assert [s["state"] for s in shots] == ["running", "running", "requires_action", "running", "idle", "idle"]
        assert all(isinstance(s.get("background"), list) for s in shots)
        assert shots[0]["background"] == []  # [] when nothing runs, never omitted


async def test_r92_list_changes_resend_the_present_state() -> None:
    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")
        agent.h["tool"] = tool

        async def body(tool: Any) -> str:
            await agent.event("finish").wait()
            return "done"

        tool.run(body)

    agent = BgAgent(work=work)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "work")
        tool = agent.h["tool"]
        shots = snapshots(view.updates)
        # joined while running: a repeated running with the new list, then the idle
        assert [(s["state"], items(s)) for s in shots] == [
            ("running", []), ("running", [("tool_call", tool.id)]), ("idle", [("tool_call", tool.id)])]
        agent.event("finish").set()
        await client.wait_for(lambda: len(snapshots(view.updates)) == 4)
        last = snapshots(view.updates)[-1]
        assert last == {"sessionUpdate": "state_update", "state": "idle", "background": []}  # R62: no stopReason
        assert view.idle_count == 1
        assert_clean(client, sid)


# -- R93 / R94: announce before listing, finalize before removing ------------------------------


async def test_r93_items_are_announced_before_any_snapshot_lists_them() -> None:
    async def start(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other", detach=True)
        agent.h["tool"] = tool
        agent.h["term"] = await session.start_terminal(["sleep", "30"], detach=True)
        agent.h["wake"] = await session.schedule(60, _noop)

    agent = BgAgent(start=start)
    async with opened(agent) as (client, sid, session):
        view = await client.prompt_and_wait(sid, "start")
        for kind, handle, tag, key in (("tool_call", agent.h["tool"], "tool_call_update", "toolCallId"),
                                       ("terminal", agent.h["term"], "terminal_update", "terminalId"),
                                       ("tool_call", agent.h["wake"], "tool_call_update", "toolCallId")):
            announced = first_index(view.updates, is_update(tag, key, handle.id))
            listed = first_index(view.updates, is_listing(kind, handle.id))
            assert announced < listed
        # background work (not foreground) names a tool call that was never announced: a content
        # chunk is not an announcement, so it is not listed until its tool_call_update arrives
        mark = len(view.updates)
        await session.tool_call_content("call_unannounced", Terminal(terminal_id="term_shown_elsewhere"))
        await flush(client, session)
        assert not any(is_listing("tool_call", "call_unannounced")(u) for u in view.updates)
        await session.update_tool_call("call_unannounced", title="late announcement", status="in_progress")
        await flush(client, session)
        new = view.updates[mark:]
        announced = first_index(new, lambda u: u["sessionUpdate"] == "tool_call_update")
        listed = first_index(new, is_listing("tool_call", "call_unannounced"))
        assert announced < listed
        assert_clean(client, sid)


async def test_r94_items_are_finalized_before_a_snapshot_drops_them() -> None:
    async def start(session: Session, _: str) -> None:
        done = await session.start_tool_call("quick", kind="other")

        async def quick(tool: Any) -> str:
            await agent.event("go").wait()
            return "ok"

        done.run(quick)
        flow = await session.start_tool_call("flow", kind="other", detach=True)
        await flow.start()
        await flow.pause()
        agent.h.update(done=done, flow=flow,
                       term=await session.start_terminal(["sleep", "0.2"], detach=True),
                       wake=await session.schedule(0.3, _noop))

    agent = BgAgent(start=start)
    async with opened(agent) as (client, sid, session):
        view = await client.prompt_and_wait(sid, "start")
        assert len(items(snapshots(view.updates)[-1])) == 4
        agent.event("go").set()
        await agent.h["flow"].fail(raw_output={"error": "discarded"})  # paused -> failed, then dropped
        await client.wait_for(lambda: snapshots(view.updates)[-1].get("background") == [], timeout=5)
        await flush(client, session)
        for kind, handle, ended in (("tool_call", agent.h["done"], is_final), ("tool_call", agent.h["flow"], is_final),
                                    ("terminal", agent.h["term"], is_exit), ("tool_call", agent.h["wake"], is_final)):
            end_at = first_index(view.updates, ended(handle.id))
            last_listed = max(i for i, u in enumerate(view.updates) if is_listing(kind, handle.id)(u))
            dropped_at = next(i for i, u in enumerate(view.updates)
                              if i > last_listed and u["sessionUpdate"] == "state_update")
            assert last_listed < end_at < dropped_at
        assert_clean(client, sid)


# -- R95: follow-up work rides on the removal --------------------------------------------------


async def test_r95_follow_up_running_is_in_the_removing_snapshot() -> None:
    async def follow_up_word(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")

        async def report() -> None:
            await session.say("the job finished")

        async def body(tool: Any) -> None:
            await agent.event("finish").wait()
            await tool.complete(follow_up=report)

        tool.run(body)
        agent.h["tool"] = tool

    async def wake(session: Session, _: str) -> None:
        async def report() -> None:
            await session.say("woke up")

        agent.h["wake"] = await session.schedule(0.1, report)

    agent = BgAgent(job=follow_up_word, wake=wake)
    async with opened(agent) as (client, sid, _session):
        triggers: list[tuple[str, str, Callable[[], None] | None]] = [
            ("job", "tool", agent.event("finish").set), ("wake", "wake", None)]
        for word, name, trigger in triggers:
            view = await client.prompt_and_wait(sid, word)
            before = view.idle_count
            handle = agent.h[name]
            mark = len(view.updates)
            if trigger is not None:
                trigger()
            await client.wait_idle(sid, before + 1)
            new = view.updates[mark:]
            final_at = first_index(new, is_final(handle.id))
            removing = next(u for u in new[final_at:] if u["sessionUpdate"] == "state_update")
            assert removing == {"sessionUpdate": "state_update", "state": "running", "background": []}
            assert not any(u.get("state") == "idle" for u in new[:final_at + 1])
            shots = snapshots(new)
            assert [s["state"] for s in shots] == ["running", "idle"]
            assert shots[-1]["stopReason"] == "end_turn"
        assert_clean(client, sid)


# -- R96: listed terminals stream their output -------------------------------------------------


async def test_r96_listed_terminal_output_streams_while_listed() -> None:
    script = "for i in 1 2 3; do echo line$i; sleep 0.05; done"

    async def start(session: Session, _: str) -> None:
        agent.h["term"] = await session.start_terminal(["sh", "-c", script], detach=True)

    agent = BgAgent(start=start)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "start")
        term = agent.h["term"]
        idle_at = len(view.updates) - 1
        await client.wait_for(lambda: any(is_exit(term.id)(u) for u in view.updates))
        exit_at = first_index(view.updates, is_exit(term.id))
        chunks = [u for u in view.updates[: exit_at] if u["sessionUpdate"] == "terminal_output_chunk"]
        data = b"".join(base64.b64decode(c["data"]) for c in chunks)
        assert data == b"line1\nline2\nline3\n"
        # output kept arriving after the turn ended, while only the list said it was alive
        assert any(i > idle_at for i, u in enumerate(view.updates) if u["sessionUpdate"] == "terminal_output_chunk")
        assert items(snapshots(view.updates[:exit_at])[-1]) == [("terminal", term.id)]


# -- R97: illegal status moves raise in the author's code and send nothing -----------------------


async def test_r97_illegal_moves_raise_and_send_nothing() -> None:
    async def setup(session: Session, _: str) -> None:
        started = await session.start_tool_call("started", kind="other", detach=True)
        await started.start()
        pending = await session.start_tool_call("pending", kind="other", detach=True)
        ended = await session.start_tool_call("ended", kind="other")
        await ended.start()
        await ended.complete(raw_output={"ok": True})
        agent.h.update(started=started, pending=pending, ended=ended)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt_and_wait(sid, "setup")
        started, pending, ended = agent.h["started"], agent.h["pending"], agent.h["ended"]
        attempts: list[Callable[[], Awaitable[Any]]] = [
            lambda: started.update(status="pending"),          # back to pending
            lambda: started.update(status=None),               # null resets to pending
            lambda: session.update_tool_call(started.id, status=None),
            lambda: pending.pause(),                           # pending -> paused
            lambda: ended.start(),                             # any change after a final status
            lambda: ended.fail(),
            lambda: ended.cancel(),
            lambda: ended.complete(),
            lambda: ended.update(title="renamed"),
            lambda: ended.append("more output"),
            lambda: session.update_tool_call(ended.id, raw_output={"ok": False}),
            lambda: session.request_permission("ok?", OPTIONS, subject=ToolCallPermissionSubject(
                tool_call=ToolCallUpdate(tool_call_id=started.id, status="pending"))),
            lambda: session.request_permission("ok?", OPTIONS, subject=ToolCallPermissionSubject(
                tool_call=ToolCallUpdate(tool_call_id=ended.id, status="in_progress"))),
        ]
        for n, attempt in enumerate(attempts):
            await flush(client, session)
            mark = len(client.transcript)
            with pytest.raises(ToolCallStateError):
                await attempt()
            marker = await flush(client, session)
            new = [e.message for e in client.transcript[mark:]]
            assert [m["params"]["update"] for m in new] == [marker], f"attempt {n} sent something"
        assert started.status == "in_progress" and pending.status == "pending" and ended.status == "completed"
        # the legal moves still work afterwards
        await started.pause()
        await started.resume()
        await started.complete()
        await pending.cancel()
        await flush(client, session)
        assert_clean(client, sid)


# -- R98 / R99 / R100: capabilities.cancel ------------------------------------------------------


async def test_r98_r99_r100_cancel_is_advertised_only_with_a_cancel_path() -> None:
    async def setup(session: Session, _: str) -> None:
        plain = await session.start_tool_call("plain", kind="other", detach=True)
        fixed = await session.start_tool_call("fixed", kind="other")
        fixed.run(_quick_body, cancellable=False)
        body = await session.start_tool_call("body", kind="other")
        body.run(_quick_body)
        handled = await session.start_tool_call("handled", kind="other", detach=True)
        await handled.set_cancel_handler(_noop)
        await handled.set_cancel_handler(None)
        await handled.set_cancel_handler(_noop)
        term = await session.start_terminal(["echo", "x"], detach=True)
        fixed_term = await session.start_terminal(["echo", "x"], detach=True, cancellable=False)
        wake = await session.schedule(0.05, _noop)
        agent.h.update(plain=plain, fixed=fixed, body=body, handled=handled, term=term, fixed_term=fixed_term,
                       wake=wake)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        view = await client.prompt_and_wait(sid, "setup")
        h = agent.h
        await client.wait_for(lambda: all(any(is_final(h[n].id)(u) for u in view.updates)
                                          for n in ("fixed", "body", "wake")))
        await client.wait_for(lambda: all(any(is_exit(h[n].id)(u) for u in view.updates)
                                          for n in ("term", "fixed_term")))
        await h["handled"].complete()
        await flush(client, session)
        ups = view.updates

        def caps(tag: str, key: str, item_id: str) -> list[Any]:
            return [u["capabilities"] for u in ups if u["sessionUpdate"] == tag and u[key] == item_id
                    and "capabilities" in u]

        cancel: dict[str, Any] = {"cancel": {}}
        assert caps("tool_call_update", "toolCallId", h["plain"].id) == []  # no cancel path, no controls
        assert caps("tool_call_update", "toolCallId", h["fixed"].id) == []
        assert caps("tool_call_update", "toolCallId", h["body"].id) == [cancel, None]
        assert caps("tool_call_update", "toolCallId", h["handled"].id) == [cancel, None, cancel, None]
        assert caps("tool_call_update", "toolCallId", h["wake"].id) == [cancel, None]
        assert caps("terminal_update", "terminalId", h["term"].id) == [cancel, None]
        assert caps("terminal_update", "terminalId", h["fixed_term"].id) == []
        # R100: the update that reports the end is the one that clears it
        for name in ("body", "handled", "wake"):
            final = next(u for u in ups if is_final(h[name].id)(u))
            assert final["capabilities"] is None
        assert next(u for u in ups if is_exit(h["term"].id)(u))["capabilities"] is None
        # R99: nothing without an advertised cancel can be cancelled
        for name in ("plain", "fixed"):
            with pytest.raises(RequestError) as info:
                await client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": h[name].id})
            assert info.value.code == -32602


async def _quick_body(tool: Any) -> str:
    await anyio.sleep(0.02)
    return "ok"


# -- R101 / R102: tool_call/cancel ----------------------------------------------------------------


async def test_r101_tool_call_cancel_answers_then_confirms() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("watch", kind="other")

        async def body(tool: Any) -> None:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                agent.log.append("body cancelled")
                raise

        watcher.run(body)
        handled = await session.start_tool_call("handled", kind="other", detach=True)
        await handled.start()

        async def stop() -> None:
            agent.log.append("handler ran")

        await handled.set_cancel_handler(stop)
        agent.h.update(watcher=watcher, handled=handled)
        await agent.event("end turn").wait()

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "setup")
        view = client.view(sid)
        handled = await _wait_handle(agent, "handled")
        await client.wait_for(lambda: any(is_listing("tool_call", handled.id)(u) for u in view.updates))
        watcher = agent.h["watcher"]
        for handle in (watcher, handled):
            mark = len(client.transcript)
            result = await client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": handle.id})
            assert result == {}
            await client.wait_for(_seen(view.updates, is_final(handle.id)))
            confirm = next(u for u in view.updates if is_final(handle.id)(u))
            assert confirm["status"] == "cancelled" and confirm["capabilities"] is None
            # stopping one tool call leaves the foreground state as it is
            new = [e.message["params"]["update"] for e in client.transcript[mark:]
                   if e.message.get("method") == "session/update"]
            assert all(u["state"] == "running" and "stopReason" not in u for u in snapshots(new))
        assert agent.log == ["body cancelled", "handler ran"]
        agent.event("end turn").set()
        await client.wait_idle(sid)
        assert_clean(client, sid)


async def test_r102_tool_call_cancel_rejections() -> None:
    async def setup(session: Session, _: str) -> None:
        plain = await session.start_tool_call("plain", kind="other", detach=True)
        done = await session.start_tool_call("done", kind="other")
        done.run(_quick_body)
        agent.h.update(plain=plain, done=done)
        await done.wait()

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt_and_wait(sid, "setup")
        await flush(client, session)
        mark = len(client.transcript)
        cases = [(sid, "call_nope", -32602), (sid, agent.h["done"].id, -32602), (sid, agent.h["plain"].id, -32602),
                 ("sess_nope", agent.h["plain"].id, -32002)]
        for session_id, tool_call_id, code in cases:
            with pytest.raises(RequestError) as info:
                await client.request("tool_call/cancel", {"sessionId": session_id, "toolCallId": tool_call_id})
            assert info.value.code == code
        assert not any(e.message.get("method") == "session/update" for e in client.transcript[mark:])
        assert agent.h["plain"].status == "pending"


# -- R103 / R104 / R105: terminal/cancel --------------------------------------------------------------


async def test_r103_r105_terminal_cancel_stops_the_process_and_nothing_else() -> None:
    async def setup(session: Session, _: str) -> None:
        tool = await session.start_tool_call("server", kind="execute", status="in_progress")
        term = await session.start_terminal(["sh", "-c", "echo hello; exec sleep 30"], tool_call=tool, detach=True)
        agent.h.update(tool=tool, term=term)
        await agent.event("end turn").wait()

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt(sid, "setup")
        view = client.view(sid)
        term = await _wait_handle(agent, "term")
        tool = agent.h["tool"]

        def said_hello() -> bool:
            return b"hello" in b"".join(base64.b64decode(u["data"]) for u in view.updates
                                        if u["sessionUpdate"] == "terminal_output_chunk")

        await client.wait_for(said_hello)
        mark = len(view.updates)
        assert await client.request("terminal/cancel", {"sessionId": sid, "terminalId": term.id}) == {}
        await client.wait_for(lambda: any(is_exit(term.id)(u) for u in view.updates))
        await flush(client, session)
        new = view.updates[mark:]
        exit_update = next(u for u in new if is_exit(term.id)(u))
        assert exit_update["exitStatus"] == {"exitCode": None, "signal": "SIGTERM"}
        assert exit_update["capabilities"] is None
        assert term.process is not None and term.process.exited
        # R105: no tool call change, no foreground change (still running, no stop reason)
        assert tool_updates(new, tool.id) == []
        assert all(s["state"] == "running" and "stopReason" not in s for s in snapshots(new))
        # the terminal is kept, with its output
        assert b"hello" in term.tail()
        agent.event("end turn").set()
        await client.wait_idle(sid)
        assert tool.status == "in_progress"
        mark = len(view.updates)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        replayed = next(u for u in view.updates[mark:] if u["sessionUpdate"] == "terminal_update")
        assert b"hello" in base64.b64decode(replayed["output"]["data"])
        assert replayed["exitStatus"] == {"exitCode": None, "signal": "SIGTERM"}
        assert_clean(client, sid)


async def test_r105_the_end_of_input_after_a_per_item_cancel_is_not_blamed_on_it() -> None:
    """A tool_call/cancel, then the client closes its input while the turn still runs: winding
    down ends the turn cancelled, and the client's checker (told of the end) does not call it R105."""
    async def setup(session: Session, _: str) -> None:
        tool = await session.start_tool_call("job", kind="other", status="in_progress", detach=True)
        tool.run(lambda t: anyio.sleep(3600), cancellable=True)
        agent.h.update(tool=tool)
        await anyio.sleep(3600)  # the turn runs until the connection ends

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt(sid, "setup")
        tool = await _wait_handle(agent, "tool")
        await client.wait_for(lambda: tool.detached and client.view(sid).background == [
            {"type": "tool_call", "toolCallId": tool.id}])
        assert await client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": tool.id}) == {}
        await client.wait_for(lambda: tool.final)
        await flush(client, session)
        assert client.view(sid).state == "running"  # the per-item cancel left the turn alone
    # connect_agent closed the client's input, the agent wound down, and the checker found nothing
    assert client.view(sid).stop_reason == "cancelled"
    assert client.checker is not None and client.checker.violations == []
    assert client.closed_at is not None and client.closed_at < len(client.transcript)  # the idle came after
    assert check_client(client) == []  # the pytest plugin's judge, from the transcript


async def test_r104_terminal_cancel_rejections() -> None:
    async def setup(session: Session, _: str) -> None:
        exited = await session.start_terminal(["echo", "x"], detach=True)
        await exited.wait()
        fixed = await session.start_terminal(["sleep", "30"], detach=True, cancellable=False)
        agent.h.update(exited=exited, fixed=fixed)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt_and_wait(sid, "setup")
        await flush(client, session)
        mark = len(client.transcript)
        cases = [(sid, "term_nope", -32602), (sid, agent.h["exited"].id, -32602), (sid, agent.h["fixed"].id, -32602),
                 ("sess_nope", agent.h["fixed"].id, -32002)]
        for session_id, terminal_id, code in cases:
            with pytest.raises(RequestError) as info:
                await client.request("terminal/cancel", {"sessionId": session_id, "terminalId": terminal_id})
            assert info.value.code == code
        await anyio.sleep(0.05)
        assert not any(e.message.get("method") == "session/update" for e in client.transcript[mark:])
        assert not agent.h["fixed"].process.exited


# -- R106 / R107: session/cancel leaves listed work alone ------------------------------------------


async def test_r106_session_cancel_leaves_listed_work_running() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("watch", kind="other")

        async def body(tool: Any) -> None:
            for n in itertools.count():
                await agent.event(f"tick {n}").wait()
                await tool.append(f"tick {n}")
                agent.log.append(n)

        watcher.run(body)

        async def woke() -> None:
            await session.say("woke")

        agent.h.update(watcher=watcher, term=await session.start_terminal(["sleep", "30"], detach=True),
                       wake=await session.schedule(0.3, woke))
        await anyio.sleep(30)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, session):
        await client.prompt(sid, "setup")
        view = client.view(sid)
        wake = await _wait_handle(agent, "wake")
        await client.wait_for(lambda: any(is_listing("tool_call", wake.id)(u) for u in view.updates))
        listed = set(items(snapshots(view.updates)[-1]))
        assert len(listed) == 3
        client.cancel(sid)
        await client.wait_idle(sid)
        idle = snapshots(view.updates)[-1]
        assert idle["stopReason"] == "cancelled" and set(items(idle)) == listed
        agent.event("tick 0").set()
        await client.wait_for(lambda: agent.log == [0])
        await client.wait_idle(sid, 2)  # the wakeup still fires: its follow-up turn
        watcher, term = agent.h["watcher"], agent.h["term"]
        assert watcher.status == "in_progress" and not term.process.exited
        assert statuses(view.updates, wake.id) == ["pending", "completed"]
        assert set(items(snapshots(view.updates)[-1])) == listed - {("tool_call", wake.id)}
        await flush(client, session)
        assert_clean(client, sid)


async def test_r107_r110_background_permission_request_survives_session_cancel() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("deploy watcher", kind="other")

        async def body(tool: Any) -> str:
            outcome = await tool.request_permission("Restart the service?", OPTIONS)
            agent.log.append(outcome.option_id)
            return f"restart allowed={outcome.allowed}"

        watcher.run(body)
        agent.h["watcher"] = watcher
        await anyio.sleep(30)  # foreground work the client will cancel

    agent = BgAgent(setup=setup)
    async with opened(agent, permission_policy=None) as (client, sid, _session):
        await client.prompt(sid, "setup")
        await client.wait_for(lambda: bool(client.pending_permissions))
        watcher = agent.h["watcher"]
        wire = agent_wire(client)
        request_at = next(i for i, m in enumerate(wire) if m.get("method") == "session/request_permission")
        request = wire[request_at]
        assert request["params"]["subject"] == {"type": "tool_call", "toolCall": {"toolCallId": watcher.id}}
        # R110: a snapshot listing the work went out before the request; R61: no requires_action
        listing_at = next(i for i, m in enumerate(wire) if m.get("method") == "session/update"
                          and is_listing("tool_call", watcher.id)(m["params"]["update"]))
        assert listing_at < request_at
        assert all(s["state"] != "requires_action" for s in snapshots(client.view(sid).updates))
        client.cancel(sid)
        await client.wait_idle(sid)
        await anyio.sleep(0.05)
        assert not any(m.get("method") == "$/cancel_request" for m in agent_wire(client))
        assert items(snapshots(client.view(sid).updates)[-1]) == [("tool_call", watcher.id)]
        client.answer_permission(0, "allow")
        await client.wait_for(lambda: any(is_final(watcher.id)(u) for u in client.view(sid).updates))
        final = next(u for u in client.view(sid).updates if is_final(watcher.id)(u))
        assert final["status"] == "completed" and final["rawOutput"] == "restart allowed=True"
        assert agent.log == ["allow"]
        assert_clean(client, sid)


async def test_r107_listed_work_request_awaited_by_the_turn_stays_open() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("deploy watcher", kind="other", detach=True, status="in_progress")
        agent.h["watcher"] = watcher
        outcome = await watcher.request_permission("Restart the service?", OPTIONS)
        agent.log.append(outcome.option_id)

    agent = BgAgent(setup=setup)
    async with opened(agent, permission_policy=None) as (client, sid, _session):
        await client.prompt(sid, "setup")
        await client.wait_for(lambda: bool(client.pending_permissions))
        client.cancel(sid)
        await client.wait_idle(sid)
        await anyio.sleep(0.05)
        assert not any(m.get("method") == "$/cancel_request" for m in agent_wire(client))


async def test_r110_terminal_permission_request_follows_a_listing_snapshot() -> None:
    async def setup(session: Session, _: str) -> None:
        term = await session.start_terminal(["sleep", "30"])
        agent.h["term"] = term
        with session.batch():  # the list change is still unsent when the request is made
            term.detach()
            outcome = await term.request_permission("Keep the server running?", OPTIONS)
        agent.log.append(outcome.allowed)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, _session):
        await client.prompt_and_wait(sid, "setup")
        term = agent.h["term"]
        wire = agent_wire(client)
        request_at = next(i for i, m in enumerate(wire) if m.get("method") == "session/request_permission")
        assert wire[request_at]["params"]["subject"]["terminalId"] == term.id
        listing_at = next(i for i, m in enumerate(wire) if m.get("method") == "session/update"
                          and is_listing("terminal", term.id)(m["params"]["update"]))
        assert listing_at < request_at
        assert agent.log == [True]
        assert_clean(client, sid)


# -- R108: an erroring turn finalizes only its own tool calls ---------------------------------------


async def test_r108_error_finalizes_only_the_failed_works_tool_calls() -> None:
    async def crash(session: Session, _: str) -> None:
        listed = await session.start_tool_call("watch", kind="other")
        listed.run(_wait_forever)
        launcher = await session.start_tool_call("server", kind="execute", status="in_progress")
        term = await session.start_terminal(["sleep", "30"], tool_call=launcher, detach=True)
        mine = await session.start_tool_call("edit", kind="edit", status="in_progress")
        waiting = await session.start_tool_call("read", kind="read")
        agent.h.update(listed=listed, launcher=launcher, term=term, mine=mine, waiting=waiting)
        raise RuntimeError("model provider returned HTTP 500")

    agent = BgAgent(crash=crash)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "crash")
        h = agent.h
        assert view.stop_reason == "error"
        idle_at = len(view.updates) - 1
        for name in ("mine", "waiting"):
            assert statuses(view.updates, h[name].id)[-1] == "failed"
            assert first_index(view.updates, is_final(h[name].id)) < idle_at
        assert statuses(view.updates, h["listed"].id) == ["pending", "in_progress"]
        assert statuses(view.updates, h["launcher"].id) == ["in_progress"]
        assert not any(is_exit(h["term"].id)(u) for u in view.updates)
        assert set(items(view.updates[-1])) == {("tool_call", h["listed"].id), ("terminal", h["term"].id)}
        assert not h["term"].process.exited and h["listed"].status == "in_progress"
        assert_clean(client, sid)


async def test_r108_error_leaves_tool_calls_of_background_work_alone() -> None:
    async def job(session: Session, _: str) -> None:
        top = await session.start_tool_call("job", kind="other")

        async def body(tool: Any) -> None:
            step = await session.start_tool_call("job step", kind="other")  # started by background work
            agent.h["step"] = step
            await step.start()
            await agent.event("finish").wait()
            await step.complete()

        top.run(body)
        agent.h["top"] = top

    async def crash(session: Session, _: str) -> None:
        raise RuntimeError("boom")

    agent = BgAgent(job=job, crash=crash)
    async with opened(agent) as (client, sid, _session):
        await client.prompt_and_wait(sid, "job")
        step = await _wait_handle(agent, "step")
        view = await client.prompt_and_wait(sid, "crash")
        assert view.stop_reason == "error"
        assert "failed" not in statuses(view.updates, step.id)


# -- R111: close stops everything ---------------------------------------------------------------------


async def test_r111_close_stops_all_listed_work_and_then_sends_nothing() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("watch", kind="other")

        async def body(tool: Any) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                agent.log.append("body stopped")

        watcher.run(body)
        agent.h.update(watcher=watcher, term=await session.start_terminal(["sleep", "30"], detach=True),
                       wake=await session.schedule(0.2, _say_woke(session)))
        agent.event("ready").set()
        await anyio.sleep(30)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "setup")
        await agent.event("ready").wait()
        await flush(client, _session)
        assert len(items(snapshots(client.view(sid).updates)[-1])) == 3
        term = agent.h["term"]
        assert term.process is not None
        pid = term.process.pid
        await client.close_session(sid)
        wire = agent_wire(client)
        close_at = max(i for i, m in enumerate(wire) if m.get("result") == {})
        await anyio.sleep(0.4)  # past the wakeup's delay
        after = [m for m in agent_wire(client)[close_at + 1:] if m.get("params", {}).get("sessionId") == sid
                 or m.get("method") in ("$/cancel_request", "session/request_permission")]
        assert after == []
        assert agent.log == ["body stopped"]
        assert term.process.exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert not any(u.get("content") == [{"type": "text", "text": "woke"}] for u in client.view(sid).updates)
        assert_clean(client, sid)


def _say_woke(session: Session) -> Callable[[], Awaitable[None]]:
    async def woke() -> None:
        await session.say("woke")

    return woke


# -- R112: a fork starts with no background work ---------------------------------------------------


async def test_r112_fork_carries_no_background_work() -> None:
    async def setup(session: Session, _: str) -> None:
        watcher = await session.start_tool_call("watch", kind="other")
        watcher.run(_wait_forever)
        agent.h.update(watcher=watcher, term=await session.start_terminal(["sleep", "30"], detach=True))

    async def echo(session: Session, text: str) -> None:
        await session.say(text)

    agent = ForkingBgAgent(setup=setup, echo=echo)
    async with opened(agent) as (client, sid, _session):
        init = next(m for m in agent_wire(client) if "protocolVersion" in m.get("result", {}))
        assert init["result"]["capabilities"]["session"]["fork"] == {}
        await client.prompt_and_wait(sid, "setup")
        source_list = items(snapshots(client.view(sid).updates)[-1])
        assert len(source_list) == 2
        fork = (await client.request("session/fork", {"sessionId": sid, "cwd": "/tmp"}))["sessionId"]
        view = await client.prompt_and_wait(fork, "echo in the fork")
        await client.request("session/resume", {"sessionId": fork, "cwd": "/tmp"})
        shots = snapshots(view.updates)
        assert shots and all(s["background"] == [] for s in shots)
        assert [u["sessionUpdate"] for u in view.updates if u["sessionUpdate"] != "state_update"] == [
            "user_message", "agent_message"]
        # the source's items are dead entries in the fork: not cancellable there
        with pytest.raises(RequestError) as info:
            await client.request("tool_call/cancel", {"sessionId": fork, "toolCallId": agent.h["watcher"].id})
        assert info.value.code == -32602
        with pytest.raises(RequestError) as info:
            await client.request("terminal/cancel", {"sessionId": fork, "terminalId": agent.h["term"].id})
        assert info.value.code == -32602
        assert items(snapshots(client.view(sid).updates)[-1]) == source_list  # the source still runs them


# -- R113: resume re-announces listed work before the snapshot -------------------------------------


async def test_r113_resume_without_replay_reannounces_each_listed_item() -> None:
    async def setup(session: Session, _: str) -> None:
        flow = await session.start_tool_call("workflow", kind="other", name="workflow")

        async def body(tool: Any) -> None:
            await tool.append("step 1/3")
            await tool.pause()
            await anyio.sleep_forever()

        flow.run(body)
        term = await session.start_terminal(["sh", "-c", "echo ready; exec sleep 30"], detach=True, size=(80, 24))
        done = await session.start_tool_call("finished", kind="read")
        await done.complete()
        agent.h.update(flow=flow, term=term, done=done)

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "setup")
        flow, term = agent.h["flow"], agent.h["term"]
        await client.wait_for(lambda: flow.status == "paused" and b"ready" in term.tail())
        await flush(client, _session)
        mark = len(view.updates)
        wire_mark = len(client.transcript)
        result = await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        new = view.updates[mark:]
        assert [u["sessionUpdate"] for u in new] == ["tool_call_update", "terminal_update", "state_update"]
        tool_update, terminal_update, snapshot = new
        assert tool_update == {
            "sessionUpdate": "tool_call_update", "toolCallId": flow.id, "title": "workflow", "kind": "other",
            "name": "workflow", "status": "paused", "capabilities": {"cancel": {}},
            "content": [{"type": "content", "content": {"type": "text", "text": "step 1/3"}}]}
        assert terminal_update["terminalId"] == term.id and terminal_update["cwd"] == "/tmp"
        assert terminal_update["command"] == "sh -c 'echo ready; exec sleep 30'"
        assert terminal_update["capabilities"] == {"cancel": {}}
        assert terminal_update["size"] == {"cols": 80, "rows": 24}
        assert b"ready" in base64.b64decode(terminal_update["output"]["data"])
        assert "exitStatus" not in terminal_update
        assert snapshot == {"sessionUpdate": "state_update", "state": "idle",
                            "background": [{"type": "tool_call", "toolCallId": flow.id},
                                           {"type": "terminal", "terminalId": term.id}]}
        wire = [e.message for e in client.transcript[wire_mark:] if e.direction == "agent->client"]
        assert wire[-1] == {"jsonrpc": "2.0", "id": wire[-1]["id"], "result": result}  # the answer comes last
        assert_clean(client, sid)


async def test_r113_resume_with_replay_shows_listed_items_in_their_present_state() -> None:
    async def setup(session: Session, _: str) -> None:
        flow = await session.start_tool_call("workflow", kind="other")
        await flow.start()
        await flow.pause()
        flow.detach()
        agent.h.update(flow=flow, term=await session.start_terminal(["sleep", "30"], detach=True))

    agent = BgAgent(setup=setup)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "setup")
        flow, term = agent.h["flow"], agent.h["term"]
        mark = len(view.updates)
        await client.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
        new = view.updates[mark:]
        assert new[-1]["sessionUpdate"] == "state_update"
        assert items(new[-1]) == [("tool_call", flow.id), ("terminal", term.id)]
        replayed_tool = [u for u in new[:-1] if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == flow.id]
        replayed_term = [u for u in new[:-1] if u["sessionUpdate"] == "terminal_update" and u["terminalId"] == term.id]
        assert len(replayed_tool) == 1 and replayed_tool[0]["status"] == "paused"
        assert replayed_tool[0]["title"] == "workflow" and replayed_tool[0]["kind"] == "other"
        assert len(replayed_term) == 1 and replayed_term[0]["command"] == "sleep 30"
        assert "exitStatus" not in replayed_term[0]
        assert order_problems(new) == []  # the replay alone is a consistent history


# -- the end of foreground work finalizes what it left unfinished -------------------------------


@pytest.mark.parametrize(("word", "stop", "status"), [("leave", "end_turn", "cancelled"),
                                                       ("crash", "error", "failed")])
async def test_foreground_end_finalizes_unfinished_tool_calls_and_processes(word: str, stop: str,
                                                                            status: str) -> None:
    async def leave(session: Session, arg: str) -> None:
        tool = await session.start_tool_call("run tests", kind="execute", status="in_progress")
        await tool.set_cancel_handler(_noop)
        term = await session.start_terminal(["sleep", "30"], tool_call=tool)
        agent.h.update(tool=tool, term=term)
        if arg:
            raise RuntimeError(arg)

    agent = BgAgent(leave=leave)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "leave" if word == "leave" else "leave crashed")
        tool, term = agent.h["tool"], agent.h["term"]
        assert view.stop_reason == stop
        idle_at = len(view.updates) - 1
        final = next(u for u in view.updates if is_final(tool.id)(u))
        assert final["status"] == status and final["capabilities"] is None
        exit_at = first_index(view.updates, is_exit(term.id))
        assert first_index(view.updates, is_final(tool.id)) < idle_at and exit_at < idle_at
        assert term.process.exited and tool.final
        assert all(items(s) == [] for s in snapshots(view.updates))
        assert_clean(client, sid)


async def test_session_cancel_finalizes_foreground_tool_calls_before_the_idle() -> None:
    async def work(session: Session, _: str) -> None:
        tool = await session.start_tool_call("long step", kind="other", status="in_progress")
        agent.h["tool"] = tool
        await anyio.sleep(30)

    agent = BgAgent(work=work)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "work")
        tool = await _wait_handle(agent, "tool")
        await client.wait_for(lambda: any(u.get("toolCallId") == tool.id for u in client.view(sid).updates))
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        assert view.updates[-2] == {"sessionUpdate": "tool_call_update", "toolCallId": tool.id, "status": "cancelled"}


async def test_foreground_end_stops_the_work_of_the_tool_calls_it_finalizes() -> None:
    async def leave(session: Session, _: str) -> None:
        tool = await session.start_tool_call("step", kind="other")

        async def body(tool: Any) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                agent.log.append("body stopped")

        tool.run(body, detach=False)
        agent.h["tool"] = tool

    agent = BgAgent(leave=leave)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "leave")
        tool = agent.h["tool"]
        assert statuses(view.updates, tool.id)[-1] == "cancelled"  # reported stopped...
        with anyio.move_on_after(1):
            await tool.wait()
        assert agent.log == ["body stopped"]  # ...so the work must be stopped too


async def test_start_terminal_refused_for_a_final_tool_call_sends_nothing() -> None:
    async def late(session: Session, _: str) -> None:
        tool = await session.start_tool_call("build", kind="execute", status="in_progress")
        await tool.complete()
        await flush(client, session)
        mark = len(client.transcript)
        with pytest.raises(ToolCallStateError):
            await session.start_terminal(["sleep", "30"], tool_call=tool, detach=True)
        marker = await flush(client, session)
        sent = [e.message["params"]["update"] for e in client.transcript[mark:]]
        agent.log.append(sent == [marker])

    agent = BgAgent(late=late)
    async with opened(agent) as (client, sid, _session):
        view = await client.prompt_and_wait(sid, "late")
        assert agent.log == [True]  # nothing was announced for the refused terminal
        assert all(items(s) == [] for s in snapshots(view.updates))


async def test_cancel_right_after_follow_up_running_still_ends_with_an_idle() -> None:
    agent = BgAgent()
    async with opened(agent) as (client, sid, session):
        async def follow_up() -> None:
            await session.say("the deploy is healthy")

        # A wakeup fires (start_foreground(now=True): 'running' goes out at once, R95) and, in
        # the same event-loop step, a session/cancel is dispatched: AgentRuntime._cancel calls
        # session.cancel(), which drops the queued job before the worker ever ran it.
        session.start_foreground(follow_up)
        session._core.cancel()
        view = client.view(sid)
        await client.wait_for(lambda: any(s["state"] == "running" for s in snapshots(view.updates)))
        await client.wait_for(lambda: snapshots(view.updates)[-1]["state"] == "idle", timeout=2)
        assert view.stop_reason == "cancelled"


async def test_terminal_started_by_background_work_is_background_work() -> None:
    async def echo(session: Session, _: str) -> None:
        await session.say("hello")

    agent = BgAgent(echo=echo)
    async with opened(agent) as (client, sid, session):
        async def background() -> None:
            agent.h["term"] = await session.start_terminal(["sleep", "0.5"])

        session.spawn(background)
        term = await _wait_handle(agent, "term")
        view = await client.prompt_and_wait(sid, "echo")  # an unrelated turn comes and goes
        assert term.detached
        assert ("terminal", term.id) in items(snapshots(view.updates)[-1])
        assert not any(is_exit(term.id)(u) for u in view.updates)  # the turn did not stop it


async def test_cancel_while_a_turn_finalizes_sends_one_idle() -> None:
    async def leave(session: Session, _: str) -> None:
        # a foreground process that ignores SIGTERM: stopping it at the end of the turn takes `grace`
        terminal = await session.start_terminal(["sh", "-c", "trap '' TERM; echo ready; sleep 5"], grace=0.5)
        while b"ready" not in terminal.tail():  # the trap is in place before the turn ends
            await anyio.sleep(0.01)
        session.start_foreground(_say_woke(session))  # queued behind this turn
        agent.event("returned").set()

    agent = BgAgent(leave=leave)
    async with opened(agent) as (client, sid, _session):
        await client.prompt(sid, "leave")
        await agent.event("returned").wait()
        await anyio.sleep(0.1)  # the turn returned; the session is stopping its process
        client.cancel(sid)
        view = client.view(sid)
        await client.wait_for(lambda: any(u["sessionUpdate"] == "terminal_update" and u.get("exitStatus")
                                          for u in view.updates))
        await anyio.sleep(0.2)
        idles = [s for s in snapshots(view.updates) if s["state"] == "idle" and "stopReason" in s]
        assert [s["stopReason"] for s in idles] == ["cancelled"]
        # the cancelled work's final updates precede its idle (R68)
        assert first_index(view.updates, lambda u: u["sessionUpdate"] == "terminal_update" and bool(
            u.get("exitStatus"))) < view.updates.index(idles[0])


async def test_follow_up_removal_is_not_folded_into_another_tasks_idle() -> None:
    async def job(session: Session, _: str) -> None:
        tool = await session.start_tool_call("watch", kind="other")

        async def body(tool: Any) -> None:
            await agent.event("finish").wait()
            await tool.complete(follow_up=_say_woke(session))

        tool.run(body)
        agent.h["tool"] = tool

    async def wait(session: Session, _: str) -> None:
        await agent.event("end turn").wait()

    agent = BgAgent(job=job, wait=wait)
    async with opened(agent) as (client, sid, session):
        await client.prompt_and_wait(sid, "job")
        await client.prompt(sid, "wait")
        await flush(client, session)
        # Background code holds a batch across an await, as start_terminal() does around the
        # process spawn; meanwhile the watcher completes with follow-up work and the turn ends.
        with session.batch():
            agent.event("finish").set()
            await agent.h["tool"].wait()  # completed: its removal snapshot waits for the batch
            agent.event("end turn").set()  # the turn ends while the batch is still open
            await anyio.sleep(0.05)
        await client.wait_idle(sid, 3)
        problems = [v for v in wire_violations(client) if v.startswith("R95")]
        assert problems == []


# -- scheduled work ---------------------------------------------------------------------------------


async def test_cancelled_repeating_schedule_stops_firing() -> None:
    async def cron(session: Session, _: str) -> None:
        async def tick() -> None:
            await session.say("tick")

        agent.h["cron"] = await session.schedule(0.05, tick, repeat=0.05)

    agent = BgAgent(cron=cron)
    async with opened(agent) as (client, sid, _session):
        await client.prompt_and_wait(sid, "cron")
        await client.wait_idle(sid, 2)  # it fired once
        await agent.h["cron"].cancel()
        count = client.view(sid).idle_count
        await anyio.sleep(0.3)
        assert client.view(sid).idle_count <= count + 1  # at most a run already under way


# -- BackgroundRegistry.listing() directly (R88, R89, R90) ------------------------------------------


def _dump(listing: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(by_alias=True, exclude_unset=True) for item in listing]


def _tool_ids(listing: list[Any]) -> list[str]:
    return [item.tool_call_id for item in listing if isinstance(item, BackgroundToolCall)]


def test_listing_r88_a_tool_call_covered_by_its_listed_terminal_is_not_listed() -> None:
    reg = BackgroundRegistry()
    reg.observe(TerminalUpdate(terminal_id="t1", command="npm run dev", cwd="/tmp"), detach=True)
    reg.observe(ToolCallUpdate(tool_call_id="c1", title="dev server", status="in_progress",
                               content=[Terminal(terminal_id="t1")]), detach=True)
    reg.observe(ToolCallUpdate(tool_call_id="c2", title="other", status="in_progress"), detach=True)
    reg.observe(ToolCallContentChunk(tool_call_id="c2", content=Terminal(terminal_id="t1")))
    assert _dump(reg.listing()) == [{"type": "terminal", "terminalId": "t1"}]
    # a tool call with work of its own stays listed next to the terminal
    c2 = reg.get("tool_call", "c2")
    assert c2 is not None
    assert reg.set_own_work(c2)
    assert _dump(reg.listing()) == [{"type": "terminal", "terminalId": "t1"}, {"type": "tool_call", "toolCallId": "c2"}]
    # once the terminal exited, the still-live tool calls stand for themselves
    reg.observe(TerminalUpdate(terminal_id="t1", exit_status={"exitCode": 0}))
    assert sorted(_tool_ids(reg.listing())) == ["c1", "c2"]
    assert set(reg.listed_ids()) == {("tool_call", "c1"), ("tool_call", "c2")}


def test_listing_r89_live_statuses_are_listed_final_ones_are_not() -> None:
    reg = BackgroundRegistry()
    for n, status in enumerate(["pending", "in_progress", "paused", "_custom", "completed", "failed", "cancelled"]):
        reg.observe(ToolCallUpdate(tool_call_id=f"c{n}", title=status, status="in_progress"), detach=True)
        if status != "in_progress":
            reg.observe(ToolCallUpdate(tool_call_id=f"c{n}", status=status) if status != "pending" else
                        ToolCallUpdate(tool_call_id=f"c{n}", title="scheduled"))
    reg.observe(ToolCallUpdate(tool_call_id="wake", title="wake", status="pending"), detach=True)
    assert _tool_ids(reg.listing()) == ["c0", "c1", "c2", "c3", "wake"]
    # not announced (only a chunk seen) or not detached: not listed
    reg.observe(ToolCallContentChunk(tool_call_id="ghost", content=Terminal(terminal_id="t9")), detach=True)
    reg.observe(ToolCallUpdate(tool_call_id="fg", title="fg", status="in_progress"), foreground=True)
    assert _tool_ids(reg.listing()) == ["c0", "c1", "c2", "c3", "wake"]


def test_listing_r90_child_listed_while_busy_or_its_own_list_is_not_empty() -> None:
    reg = BackgroundRegistry()
    reg.observe(SubagentUpdate(session_id="child", title="explore"), detach=True)
    assert reg.listing() == [BackgroundSubagent(session_id="child")]  # state unreported
    cases = [
        (RunningStateUpdate(background=[]), True),
        (IdleStateUpdate(background=[]), False),
        (IdleStateUpdate(stop_reason="end_turn", background=[]), False),
        (IdleStateUpdate(background=None), True),  # its own list unreported
        (IdleStateUpdate(background=[BackgroundTerminal(terminal_id="t")]), True),
        (IdleStateUpdate(background=[BackgroundToolCall(tool_call_id="c")]), True),
        (RunningStateUpdate(background=None), True),
    ]
    for state, listed in cases:
        reg.observe(SubagentUpdate(session_id="child", state=state))
        assert (reg.listing() == [BackgroundSubagent(session_id="child")]) is listed, state
    reg.observe(SubagentUpdate(session_id="child", state=None))  # withdrawn: unconfirmed, still listed
    assert reg.listing() == [BackgroundSubagent(session_id="child")]
    reg.observe(SubagentUpdate(session_id="attached", title="fg child", state=RunningStateUpdate(background=[])),
                foreground=True)
    assert set(reg.listed_ids()) == {("subagent", "child")}


def test_registry_check_refuses_illegal_moves() -> None:
    reg = BackgroundRegistry()
    reg.observe(ToolCallUpdate(tool_call_id="c", title="t", status="pending"))
    with pytest.raises(ToolCallStateError):
        reg.check(ToolCallUpdate(tool_call_id="c", status="paused"))
    reg.check(ToolCallUpdate(tool_call_id="c", status="pending"))  # still pending: a no-op, allowed
    reg.observe(ToolCallUpdate(tool_call_id="c", status="in_progress"))
    for bad in (ToolCallUpdate(tool_call_id="c", status="pending"), ToolCallUpdate(tool_call_id="c", status=None)):
        with pytest.raises(ToolCallStateError):
            reg.check(bad)
    reg.check(ToolCallUpdate(tool_call_id="c", status="paused"))
    reg.observe(ToolCallUpdate(tool_call_id="c", status="completed"))
    for bad_update in (ToolCallUpdate(tool_call_id="c", status="completed"),
                       ToolCallUpdate(tool_call_id="c", title="x"),
                       ToolCallContentChunk(tool_call_id="c", content=Terminal(terminal_id="t"))):
        with pytest.raises(ToolCallStateError):
            reg.check(bad_update)
    reg.observe(TerminalUpdate(terminal_id="t", command="x", cwd="/tmp"))
    reg.observe(TerminalUpdate(terminal_id="t", exit_status={"exitCode": 1}))
    with pytest.raises(ToolCallStateError):
        reg.check(TerminalUpdate(terminal_id="t", exit_status=None))


def test_state_snapshot_lines_are_reused_only_while_the_list_is_empty() -> None:
    from acp_agent._session.sink import SessionSink
    from acp_agent._session.snapshots import StatePublisher
    from acp_agent.history import History
    from acp_agent.schema import Error

    class Lines:
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        def send_nowait(self, data: bytes) -> None:
            self.sent.append(data)

    writer = Lines()
    reg = BackgroundRegistry()
    publisher = StatePublisher(reg, SessionSink(writer, "s1", History()))  # type: ignore[arg-type]

    def updates() -> list[dict[str, Any]]:
        import orjson

        found = [orjson.loads(line)["params"]["update"] for line in writer.sent]
        writer.sent.clear()
        return found

    for _ in range(2):  # the second turn sends the same bytes, from the kept lines
        publisher.set("running")
        publisher.set("idle", "end_turn")
    first_turn = [{"sessionUpdate": "state_update", "state": "running", "background": []},
                  {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn", "background": []}]
    assert updates() == first_turn * 2
    # an error or a listed item is never taken from the kept lines
    publisher.set("idle", "error", Error(code=-32603, message="boom"))
    reg.observe(ToolCallUpdate(tool_call_id="c1", title="t", status="in_progress"), detach=True)
    publisher.set("running")
    assert updates() == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "error",
         "error": {"code": -32603, "message": "boom"}, "background": []},
        {"sessionUpdate": "state_update", "state": "running",
         "background": [{"type": "tool_call", "toolCallId": "c1"}]},
    ]
    assert not publisher.list_unsent
    # custom stop reasons beyond the kept lines are still sent right
    reg.observe(ToolCallUpdate(tool_call_id="c1", status="completed"))
    for n in range(20):
        publisher.set("idle", f"_custom{n}")
    assert [u["stopReason"] for u in updates()] == [f"_custom{n}" for n in range(20)]
