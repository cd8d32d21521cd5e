"""The in-process agent of the background-work property and race tests (``tests/fuzz``).

:class:`PropAgent` runs the foreground script named by the prompt (:data:`SCRIPTS`) and keeps every
tool call and terminal it made, so random operations can act on them by index.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_agent import Agent, ContentBlock, PermissionOption, Session, TextContent, ToolCall
from acp_agent.session import StopReason
from acp_agent.terminals import Terminal

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
]

class PropAgent(Agent):
    """Foreground scripts chosen by the prompt word; every handle lands in ``tools`` / ``terms``."""

    name = "bg-props"

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.tools: list[ToolCall] = []
        self.terms: list[Terminal] = []
        self.launchers: set[str] = set()  # tool calls that show a terminal: never given a body
        self.busy: set[str] = set()  # tool calls given a body: never shown a terminal
        self.forever_started = 0
        self.forever_stopped = 0

    async def new_session(self, session: Session) -> None:
        self.sessions[session.id] = session

    async def fork_session(self, source: Session, session: Session) -> None:
        self.sessions[session.id] = session

    async def resume_session(self, session: Session) -> None:
        self.sessions[session.id] = session  # a closed session brought back: a new Session object

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason | None:
        word = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        await SCRIPTS[word](self, session)
        return None

    # foreground scripts ------------------------------------------------------------------

    async def say(self, session: Session) -> None:
        await session.say("hello")

    async def slow(self, session: Session) -> None:
        await session.say("thinking")
        await anyio.sleep(0.05)

    async def fg_leave(self, session: Session) -> None:
        tool = await session.start_tool_call("left running", kind="other", status="in_progress")
        self.tools.append(tool)
        await tool.set_cancel_handler(noop)
        await anyio.sleep(0.01)

    async def fg_complete(self, session: Session) -> None:
        tool = await session.start_tool_call("quick step", kind="read")
        self.tools.append(tool)
        await tool.start()
        await anyio.sleep(0.01)
        await tool.complete(raw_output={"ok": True})

    async def fg_term(self, session: Session) -> None:
        tool = await session.start_tool_call("echo", kind="execute", status="in_progress")
        term = await session.start_terminal(["sh", "-c", "echo x"], tool_call=tool)
        self.launchers.add(tool.id)
        self.tools.append(tool)
        self.terms.append(term)
        status = await term.wait()
        await (tool.complete() if status.exit_code == 0 else tool.fail())

    async def fg_term_leave(self, session: Session) -> None:
        self.terms.append(await session.start_terminal(["sleep", "0.3"]))

    async def detach_mid(self, session: Session) -> None:
        tool = await session.start_tool_call("sleep", kind="execute", status="in_progress")
        term = await session.start_terminal(["sleep", "0.05"], tool_call=tool)
        tool.finish_with(term)
        self.launchers.add(tool.id)
        self.tools.append(tool)
        self.terms.append(term)
        await anyio.sleep(0.01)
        term.detach()

    async def launch(self, session: Session) -> None:
        tool = await session.start_tool_call("server", kind="execute", status="in_progress")
        self.launchers.add(tool.id)
        self.tools.append(tool)  # random operations may end it before its terminal is attached
        ends = len(self.terms) % 2 == 1
        term = await session.start_terminal(["sleep", "0.05"], tool_call=tool, detach=True, ends_tool_call=ends)
        self.terms.append(term)
        if not ends:
            await tool.complete()  # handed off: the terminal stands for the work

    async def ask_for_listed(self, session: Session) -> None:
        tool = await session.start_tool_call("deploy watcher", kind="other", status="in_progress", detach=True)
        self.tools.append(tool)
        await tool.request_permission("Restart the service?", OPTIONS)  # awaited by the turn (R107)

    async def bg_body(self, session: Session) -> None:
        tool = await session.start_tool_call("watch", kind="other")
        self.tools.append(tool)
        self.busy.add(tool.id)
        tool.run(self.body("ok"))

    async def crash(self, session: Session) -> None:
        self.tools.append(await session.start_tool_call("edit", kind="edit", status="in_progress"))
        raise RuntimeError("model provider returned HTTP 500")

    async def sched(self, session: Session) -> None:
        tool = await session.schedule(0.02, make_follow_up(session), title="wake up")
        self.busy.add(tool.id)  # a timer is work of its own
        self.tools.append(tool)

    # bodies -------------------------------------------------------------------------------

    def body(self, mode: str) -> Callable[[ToolCall], Awaitable[Any]]:
        async def run(tool: ToolCall) -> Any:
            if mode == "forever":
                self.forever_started += 1
                try:
                    await tool.append("watching")
                    await anyio.sleep_forever()
                finally:
                    self.forever_stopped += 1
            await anyio.sleep(0.01)
            if mode == "raise":
                raise RuntimeError("the watched service went away")
            return {"mode": mode}

        return run


SCRIPTS: dict[str, Callable[[PropAgent, Session], Awaitable[None]]] = {
    "say": PropAgent.say, "slow": PropAgent.slow, "fg_leave": PropAgent.fg_leave,
    "fg_complete": PropAgent.fg_complete, "fg_term": PropAgent.fg_term, "fg_term_leave": PropAgent.fg_term_leave,
    "detach_mid": PropAgent.detach_mid, "launch": PropAgent.launch, "bg_body": PropAgent.bg_body,
    "crash": PropAgent.crash, "sched": PropAgent.sched, "ask_for_listed": PropAgent.ask_for_listed,
}


async def noop() -> None:
    return None


def make_follow_up(session: Session) -> Callable[[], Awaitable[None]]:
    async def follow_up() -> None:
        await session.say("following up")

    return follow_up
