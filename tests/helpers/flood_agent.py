"""An agent that streams as much as it is asked for, served by ``tests/e2e/test_http_stall.py``.

``flood N`` runs a terminal that writes N MiB (its output streams as the client takes it; replay keeps
only its tail, so the session's history stays small); ``message N`` streams an agent message of N MiB in
64 KiB chunks (kept whole in the history); anything else is echoed back.
"""

from __future__ import annotations

from acp_agent import Agent, ContentBlock, Session, StopReason, TextContent


class FloodAgent(Agent):
    """Floods on ``flood N``, echoes otherwise."""

    name = "flood-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent))
        word, _, arg = text.partition(" ")
        if word == "flood":
            terminal = await session.start_terminal(f"head -c {int(arg) * 1024 * 1024} /dev/zero")
            await terminal.wait()
            return "end_turn"
        if word == "message":
            chunk = "x" * 65536
            reply = session.message()
            for _ in range(int(arg) * 16):
                await reply.write(chunk)
            return "end_turn"
        await session.say(text)
        return "end_turn"
