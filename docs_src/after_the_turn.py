import sys

from acp_agent import Agent, ContentBlock, ExitStatus, Session, StopReason


class TestRunnerAgent(Agent):
    name = "test-runner"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        terminal = await session.start_terminal([sys.executable, "-c", "print('3 passed')"], detach=True)

        # --8<-- [start:report]
        async def report() -> StopReason:
            status = terminal.exit_status
            await session.say(f"tests finished: exit {status.exit_code if status else None}")
            return "end_turn"

        def on_exit(status: ExitStatus) -> None:
            session.start_foreground(report)  # new foreground work: running ... idle

        terminal.on_exit(on_exit)
        # --8<-- [end:report]
        await session.say("Running the tests in the background.")
        return "end_turn"
