"""The bench workload written with acp-agent, the way the README teaches it.

    stream N   -> N ``agent_message_chunk`` updates of one message ("chunk 0 ", "chunk 1 ", ...), then end_turn
    echo TEXT  -> one complete ``agent_message`` with TEXT, then end_turn

Run: ``.venv/bin/python bench/agents/sdk_agent.py`` (ACP v2 on stdio).
"""

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent, run_stdio


class BenchAgent(Agent):
    """Streams or echoes, as the prompt says."""

    name = "bench-sdk-agent"
    title = "acp-agent bench agent"
    version = "1.0.0"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent))
        command, _, argument = text.partition(" ")
        if command == "stream":
            stream = session.message()
            for i in range(int(argument)):
                await stream.write(f"chunk {i} ")
        elif command == "echo":
            await session.say(argument)
        else:
            await session.say(f"unknown command: {command}")
        return "end_turn"


if __name__ == "__main__":
    run_stdio(BenchAgent())
