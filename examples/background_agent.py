"""An agent whose work outlives its turns: background processes, watchers, wake-ups, workflows.

Run it as an ACP agent process:  python examples/background_agent.py

Each prompt is one line; its first word picks the behaviour:

    echo TEXT / any text   reply with TEXT
    /bg CMD                run CMD in the background (its tool call completes at hand-off)
    /bgwait CMD            run CMD in the background (its tool call ends when CMD exits)
    /run CMD               run CMD in the foreground, the turn waits for it
    /watch SECS            a watcher that reports once a second for SECS seconds
    /schedule SECS TEXT    wake up after SECS seconds and say TEXT
    /workflow STEPS        a workflow of STEPS one-second steps
    /pause, /resume        pause or resume the newest unfinished workflow
    /subagent SECS TEXT    a child session that streams TEXT over SECS seconds
    /ask TEXT              ask permission for TEXT in the foreground
    /bgask                 a background tool call that asks permission for itself

It also offers ``session/fork``: a fork copies the conversation, never the source's live work.
"""

from __future__ import annotations

import math

import anyio

from acp_agent import (
    Agent,
    AvailableCommand,
    ContentBlock,
    LimitExceededError,
    PermissionOption,
    Session,
    StopReason,
    Terminal,
    TextContent,
    ToolCall,
    run_stdio,
)

COMMANDS = [  # advertised, so editors offer them (and do not put their own menu in place of /run)
    AvailableCommand(name=name, description=description, input={"type": "text", "hint": hint} if hint else None)
    for name, description, hint in [
        ("bg", "Run a command in the background", "command"),
        ("bgwait", "Run a command in the background; its tool call ends when it exits", "command"),
        ("run", "Run a command in the foreground", "command"),
        ("watch", "A watcher reporting once a second", "seconds"),
        ("schedule", "Wake up later and say something", "seconds text"),
        ("workflow", "A workflow of one-second steps", "steps"),
        ("pause", "Pause the newest unfinished workflow", None),
        ("resume", "Resume the paused workflow", None),
        ("subagent", "A child session streaming a text", "seconds text"),
        ("ask", "Ask permission in the foreground", "text"),
        ("bgask", "A background tool call that asks permission", None),
    ]
]

OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
]


class BackgroundAgent(Agent):
    """Starts work that keeps running after the turn; the SDK keeps the wire correct."""

    name = "background-agent"
    title = "Background Agent"
    version = "1.0.0"

    def __init__(self) -> None:
        # Live handles stay here, by session id: session.data is for plain values (it is stored with the session).
        self.workflows: dict[str, list[ToolCall]] = {}

    async def new_session(self, session: Session) -> None:
        session.available_commands = COMMANDS

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent)).strip()
        command, _, arg = text.partition(" ")
        handlers = {
            "/bg": self.bg, "/bgwait": self.bgwait, "/run": self.run, "/watch": self.watch,
            "/schedule": self.schedule, "/workflow": self.workflow, "/pause": self.pause, "/resume": self.resume,
            "/subagent": self.subagent, "/ask": self.ask, "/bgask": self.bgask,
        }
        handler = handlers.get(command)
        if handler is None:
            await session.say(arg if command == "echo" else text)
            return "end_turn"
        return await handler(session, arg.strip()) or "end_turn"

    async def fork_session(self, source: Session, session: Session) -> None:
        """The fork has the source's history; the source's workflows stay the source's (R112)."""
        self.workflows[session.id] = []

    async def close_session(self, session: Session) -> None:
        self.workflows.pop(session.id, None)  # the SDK ends the session's live work itself

    async def _start(self, session: Session, cmd: str, tool: ToolCall, *, detach: bool = False,
                     ends_tool_call: bool = False) -> Terminal | None:
        """Start ``cmd`` for ``tool``; past a process limit, fail the tool call and say why (no error turn)."""
        try:
            return await session.start_terminal(cmd, tool_call=tool, detach=detach, ends_tool_call=ends_tool_call)
        except LimitExceededError as exc:  # Limits(max_processes=...) or max_principal_processes on a server
            await tool.fail(raw_output={"limit": exc.limit, "value": exc.value})
            await session.say(f"Not started: the limit {exc.limit}={exc.value} is reached; stop a process first.")
            return None

    async def bg(self, session: Session, cmd: str) -> None:
        tool = await session.start_tool_call(cmd, kind="execute", name="bash", status="in_progress",
                                             raw_input={"command": cmd})
        if await self._start(session, cmd, tool, detach=True):
            await tool.complete()  # handed off: from now on the terminal stands for the work

    async def bgwait(self, session: Session, cmd: str) -> None:
        tool = await session.start_tool_call(cmd, kind="execute", name="bash", status="in_progress",
                                             raw_input={"command": cmd})
        # The tool call ends with the process (completed or failed by exit code), after the turn.
        await self._start(session, cmd, tool, ends_tool_call=True, detach=True)

    async def run(self, session: Session, cmd: str) -> None:
        tool = await session.start_tool_call(cmd, kind="execute", name="bash", status="in_progress",
                                             raw_input={"command": cmd})
        terminal = await self._start(session, cmd, tool)
        if terminal is None:
            return
        status = await terminal.wait()
        output = {"exitCode": status.exit_code, "signal": status.signal}
        await (tool.complete(raw_output=output) if status.exit_code == 0 else tool.fail(raw_output=output))

    async def watch(self, session: Session, secs: str) -> None:
        seconds = float(secs or 5)
        tool = await session.start_tool_call("Watch", kind="other", name="watch")

        async def ticks(tool: ToolCall) -> None:
            for i in range(math.ceil(seconds)):
                await anyio.sleep(min(1.0, seconds - i))
                await tool.append(f"tick {i + 1}")

        tool.run(ticks)  # in_progress, listed, cancellable; completed when ticks() returns

    async def schedule(self, session: Session, arg: str) -> None:
        secs, _, text = arg.partition(" ")

        async def wake_up() -> StopReason:
            await session.say(text)
            return "end_turn"

        await session.schedule(float(secs), wake_up, title="Wake up")

    async def workflow(self, session: Session, steps: str) -> None:
        count = int(steps or 3)
        flow = await session.start_tool_call("Workflow", kind="other", name="workflow")
        self.workflows.setdefault(session.id, []).append(flow)

        async def run_steps(tool: ToolCall) -> None:
            for step in range(count):
                await anyio.sleep(1)
                await tool.checkpoint()  # while paused, the step waits here: nothing is reported
                await tool.append(f"step {step + 1}/{count}")

        flow.run(run_steps)

    def _newest_workflow(self, session: Session) -> ToolCall | None:
        live = [tool for tool in self.workflows.get(session.id, []) if not tool.final]
        return live[-1] if live else None

    async def pause(self, session: Session, _: str) -> None:
        flow = self._newest_workflow(session)
        if flow is None or flow.paused:
            await session.say("No running workflow to pause.")
            return
        await flow.pause()

    async def resume(self, session: Session, _: str) -> None:
        flow = self._newest_workflow(session)
        if flow is None or not flow.paused:
            await session.say("No paused workflow to resume.")
            return
        await flow.resume()

    async def subagent(self, session: Session, arg: str) -> None:
        secs, _, text = arg.partition(" ")
        words = text.split() or ["..."]
        child = await session.spawn_subagent(f"Subagent: {text}", description="streams a message")

        async def stream(child_session: Session) -> StopReason:
            message = child_session.message()
            for i, word in enumerate(words):
                await anyio.sleep(float(secs) / len(words))
                await message.write(word if i == 0 else " " + word)
            return "end_turn"

        child.start(stream)  # listed while it runs; session/cancel on its id stops it

    async def ask(self, session: Session, text: str) -> StopReason:
        tool = await session.start_tool_call(f"Ask: {text}", kind="other", name="ask")
        outcome = await tool.request_permission(f"Allow: {text}?", OPTIONS)  # requires_action meanwhile
        if outcome.cancelled:
            await tool.cancel()
            return "cancelled"
        await (tool.complete() if outcome.allowed else tool.fail())
        await session.say(f"{'allowed' if outcome.allowed else 'rejected'}: {text}")
        return "end_turn"

    async def bgask(self, session: Session, _: str) -> None:
        tool = await session.start_tool_call("Background job", kind="other", name="bgask")

        async def ask_first(tool: ToolCall) -> None:
            # Listed before the request goes out; session/cancel leaves it pending (R107, R110).
            outcome = await tool.request_permission("Allow the background job to continue?", OPTIONS)
            await tool.append("allowed" if outcome.allowed else "not allowed")

        tool.run(ask_first)


if __name__ == "__main__":
    run_stdio(BackgroundAgent())
