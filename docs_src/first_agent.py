from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent, run_stdio


class EchoAgent(Agent):
    name = "echo-agent"
    version = "1.0.0"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        await session.say(text)  # one complete agent message
        return "end_turn"


if __name__ == "__main__":
    run_stdio(EchoAgent())
