"""An agent for the session bookkeeping and providers tests, run as a process (SQLite store of ``run_stdio``):

    sleep SECS       says "sleeping", then sleeps (archive or cancel ends it)
    retitle TITLE    sets the agent's own title with session.update_info, says "title=<the session's title>"
    anything else    echoed back

It declares two providers: ``main`` (required, anthropic or openai, starts on https://api.anthropic.com) and
``embeddings`` (optional, openai, starts disabled). ``configure_provider`` logs the provider and protocol at DEBUG
(never the headers) and fails with a RuntimeError for a base URL on ``fail.example``. The bookkeeping hooks log
what they are told on stderr. ``ACP_TEST_AGENT_NAME`` names it (the name picks its SQLite file).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_agent import (
    Agent,
    ContentBlock,
    Provider,
    ProviderSettings,
    Session,
    StopReason,
    TextContent,
    run_stdio,
)

logger = logging.getLogger("bookkeeping_agent")


class BookkeepingAgent(Agent):
    """See the module docstring."""

    name = os.environ.get("ACP_TEST_AGENT_NAME", "bookkeeping-agent")
    version = "0.0.0"
    providers = (
        Provider("main", supported=("anthropic", "openai"), required=True, api_type="anthropic",
                 base_url="https://api.anthropic.com"),
        Provider("embeddings", supported=("openai",)),
    )

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        command, _, rest = text.partition(" ")
        if command == "sleep":
            await session.say("sleeping")
            await anyio.sleep(float(rest))
        elif command == "retitle":
            await session.update_info(title=rest)
            await session.say(f"title={session.title}")
        else:
            await session.say(text)
        return "end_turn"

    async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
        if settings is None:
            logger.debug("provider %s disabled", provider_id)
            return
        logger.debug("provider %s now speaks %s (%r)", provider_id, settings.api_type, settings)
        if "fail.example" in settings.base_url:
            raise RuntimeError("the provider endpoint did not answer")

    async def set_session_title(self, session_id: str, title: str) -> None:
        logger.info("titled %s: %s", session_id, title)

    async def archive_session(self, session_id: str) -> None:
        logger.info("archived %s", session_id)

    async def unarchive_session(self, session_id: str) -> None:
        logger.info("unarchived %s", session_id)


if __name__ == "__main__":
    run_stdio(BookkeepingAgent())
