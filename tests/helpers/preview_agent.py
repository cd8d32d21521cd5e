"""An agent for the Preview end-to-end tests, run as a process (stdio, or ``serve`` over WebSocket and
Streamable HTTP): every prompt it runs is appended as one line to the file ``ACP_TEST_RUNS`` names (so a test
counts how often the work ran, across connections and restarts); ``sleep N`` sleeps N seconds first; then it
says what it ran and offers a follow-up prompt suggestion."""

from __future__ import annotations

import os

import anyio

from acp_agent import Agent, ContentBlock, Session, TextContent, run_stdio


class PreviewAgent(Agent):
    """See the module docstring."""

    name = "preview-test-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> None:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        runs = os.environ.get("ACP_TEST_RUNS")
        if runs:
            with open(runs, "a", encoding="utf-8") as out:
                out.write(text + "\n")
        if text.startswith("sleep"):
            await anyio.sleep(float(text.split()[1]))
        await session.say(f"ran {text}")


agent = PreviewAgent()

if __name__ == "__main__":
    run_stdio(agent)
