"""An agent whose turn ``tick N`` says ``tick 1`` ... ``tick N``, one every 50 ms (a turn that takes a while)."""

from __future__ import annotations

import anyio

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent


class TickerAgent(Agent):
    """Ticks for as many steps as the prompt asks."""

    name = "ticker"
    version = "1.0.0"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent))
        count = int(text.split()[1]) if text.startswith("tick ") else 1
        for step in range(1, count + 1):
            await session.say(f"tick {step}")
            await anyio.sleep(0.05)
        return "end_turn"
