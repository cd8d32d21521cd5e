import sys

import anyio

from acp_agent import Agent, ContentBlock, Session, StopReason, ToolCall

DEV_SERVER = [sys.executable, "-c", "import time; print('listening on :8000', flush=True); time.sleep(60)"]


class DevAgent(Agent):
    name = "dev-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        # A dev server: the tool call completes at hand-off, the terminal is listed until the process exits.
        tool = await session.start_tool_call("Start the dev server", kind="execute", status="in_progress")
        await session.start_terminal(DEV_SERVER, tool_call=tool, detach=True)
        await tool.complete()

        # A watcher: its body runs in the session, survives the turn and session/cancel, and is cancellable.
        watch = await session.start_tool_call("Watch deploy", kind="other")

        async def body(tool: ToolCall) -> None:
            for i in range(10):
                await anyio.sleep(1)
                await tool.append(f"check {i}: healthy")

        watch.run(body)  # in_progress, listed, offers tool_call/cancel; completed when body returns

        # A wake-up: pending and listed until it fires; then the follow-up turn starts in the same snapshot.
        async def check_deploy() -> StopReason:
            await session.say("Deploy check: all healthy.")
            return "end_turn"

        await session.schedule(600, check_deploy)
        return "end_turn"
