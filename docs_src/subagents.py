from acp_agent import Agent, ContentBlock, Session, StopReason


class LeadAgent(Agent):
    name = "lead-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        child = await session.spawn_subagent("Explore the auth module")  # announced on the parent first

        async def explore(child_session: Session) -> StopReason:
            await child_session.say("Found the token check in auth.py")
            return "end_turn"

        child.start(explore)  # the child runs as its own session; the parent lists it while it is busy
        result = await child.result()  # waits until the child is idle
        # or, in one step: result = await child.run(explore)
        await session.say(f"The explorer said: {result.text} ({result.stop_reason})")
        return "end_turn"
