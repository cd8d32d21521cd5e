"""The smallest useful ACP agent: it echoes each prompt back as an agent message.

Run it as an ACP agent process:  python examples/echo_agent.py
"""

from acp_agent import Agent, ContentBlock, ResourceLink, Session, StopReason, TextContent, run_stdio


class EchoAgent(Agent):
    """Replies to every prompt with the text it was sent."""

    name = "echo-agent"
    title = "Echo Agent"
    version = "1.0.0"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent))
        links = [block.uri for block in prompt if isinstance(block, ResourceLink)]
        if links:
            text += "\n" + "\n".join(f"(linked: {uri})" for uri in links)
        # Stream the reply word by word: every chunk shares the stream's messageId.
        reply = session.message()
        for i, word in enumerate(text.split(" ")):
            await reply.write(word if i == 0 else " " + word)
        return "end_turn"


if __name__ == "__main__":
    run_stdio(EchoAgent())
