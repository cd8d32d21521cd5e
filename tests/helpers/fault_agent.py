"""An agent that misbehaves on request, run on stdio by ``tests/e2e/test_faults.py``.

The prompt's first word picks the behaviour; everything after it is the argument:

    bg CMD          CMD as a listed background terminal (its tool call completes at hand-off)
    run CMD         CMD as a foreground process: the turn waits for it
    tool            a listed tool call whose body sleeps until cancelled
    ask             a foreground permission request (the turn waits for the answer)
    bgask           a listed tool call that waits on its own permission request
    stubborn        a listed tool call whose body swallows every cancellation and keeps going
    stubborn_turn   the turn itself swallows every cancellation
    thread SECS     a listed tool call blocked in a worker thread for SECS seconds (not cancellable)
    block SECS      a listed tool call that blocks the event loop for SECS seconds once cancelled
    raise_on_cancel a listed tool call whose body raises an error when it is cancelled
    crash           a listed tool call whose body raises at once
    chatty          a listed tool call appending a 1 KiB line as fast as the client takes it
    echo TEXT       reply TEXT

``session/new`` with a ``cwd`` ending in ``/stubborn`` hangs and swallows its cancellation.
With ``FAULT_AGENT_STORE=hangs`` the agent keeps its sessions in memory, and closing that store
never ends.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent import (
    Agent,
    ContentBlock,
    Session,
    StopReason,
    ToolCall,
    run_stdio,
)
from acp_agent.store import MemoryStore
from tests.helpers.agents import OPTIONS, text_of


class FaultAgent(Agent):
    """Starts background work that ends badly on purpose."""

    name = "fault-agent"
    version = "1.0.0"

    async def new_session(self, session: Session) -> None:
        if session.cwd.endswith("/stubborn"):
            await _swallow_cancellation()  # a session/new that never answers and ignores cancellation

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        command, _, arg = text_of(prompt).strip().partition(" ")
        if command == "bg":
            tool = await session.start_tool_call(arg, kind="execute", status="in_progress")
            await session.start_terminal(arg, tool_call=tool, detach=True)
            await tool.complete()
        elif command == "run":
            tool = await session.start_tool_call(arg, kind="execute", status="in_progress")
            terminal = await session.start_terminal(arg, tool_call=tool)
            await session.say("started")
            status = await terminal.wait()
            await (tool.complete() if status.exit_code == 0 else tool.fail())
        elif command == "ask":
            outcome = await session.request_permission("Go ahead?", OPTIONS)
            await session.say(f"allowed={outcome.allowed}")
        elif command == "stubborn_turn":
            await session.say("ignoring cancellation")
            await _swallow_cancellation()
        elif command == "echo":
            await session.say(arg)
        else:
            body = _BODIES.get(command)
            if body is None:
                await session.say(f"unknown command {command!r}")
                return "end_turn"
            tool = await session.start_tool_call(command, kind="other")
            tool.run(lambda t: body(t, arg))
            if command == "bgask":
                await session.say("asking")
        return "end_turn"


async def _swallow_cancellation() -> None:
    while True:
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            pass  # the bug under test: cancellation is swallowed


async def _sleep(tool: ToolCall, arg: str) -> None:
    await anyio.sleep(3600)


async def _bgask(tool: ToolCall, arg: str) -> None:
    outcome = await tool.request_permission("Continue in the background?", OPTIONS)
    await tool.append(f"allowed={outcome.allowed}")


async def _stubborn(tool: ToolCall, arg: str) -> None:
    await _swallow_cancellation()


async def _thread(tool: ToolCall, arg: str) -> None:
    await anyio.to_thread.run_sync(time.sleep, float(arg))


async def _block(tool: ToolCall, arg: str) -> None:
    try:
        await anyio.sleep(3600)
    finally:
        time.sleep(float(arg))  # blocking work on the event loop while being cancelled


async def _raise_on_cancel(tool: ToolCall, arg: str) -> None:
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        raise RuntimeError("cleanup failed") from None


async def _crash(tool: ToolCall, arg: str) -> None:
    raise RuntimeError("tool backend unavailable")


async def _chatty(tool: ToolCall, arg: str) -> None:
    line = "x" * 1024
    i = 0
    while True:
        i += 1
        await tool.append(f"{i} {line}")


_BODIES = {
    "tool": _sleep, "bgask": _bgask, "stubborn": _stubborn, "thread": _thread, "block": _block,
    "raise_on_cancel": _raise_on_cancel, "crash": _crash, "chatty": _chatty,
}

class HangingStore(MemoryStore):
    """Sessions in memory; closing it never ends and ignores cancellation (a database gone silent)."""

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.sleep_forever()


if __name__ == "__main__":
    run_stdio(FaultAgent(), **({"store": HangingStore()} if os.environ.get("FAULT_AGENT_STORE") == "hangs" else {}))
