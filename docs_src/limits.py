from acp_agent import Agent, ContentBlock, Limits, Session, StopReason, run_stdio


class MyAgent(Agent):
    name = "bounded-agent"
    limits = Limits(max_sessions=16, max_processes=8)

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say(f"at most {session.limits.max_sessions} sessions")
        return "end_turn"


if __name__ == "__main__":
    run_stdio(MyAgent(), limits=Limits(max_sessions=4))  # or just run_stdio(MyAgent())
