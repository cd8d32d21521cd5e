"""The deprecation policy (docs/deprecations.md): a removed or renamed public parameter keeps working for one
minor release, with a DeprecationWarning that names what to write instead and points at the caller's line."""

from __future__ import annotations

import warnings

import pytest

from acp_agent import Agent, ContentBlock, Session, StopReason
from tests.helpers.agents import one_turn

pytestmark = pytest.mark.anyio


class ForegroundAgent(Agent):
    """Written for 0.1: starts its follow-up with ``now=True``."""

    name = "foreground-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        async def follow_up() -> StopReason:
            await session.say("follow-up")
            return "end_turn"

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session.start_foreground(follow_up, now=True)  # 0.1 code: TypeError in 0.2.0 before this fix
        self.caught = caught
        return "end_turn"


async def test_start_foreground_now_is_a_deprecated_no_op() -> None:
    agent = ForegroundAgent()
    view = await one_turn(agent, turns=2)
    assert list(view.messages().values()) == ["follow-up"]
    [warning] = agent.caught
    assert warning.category is DeprecationWarning
    assert "start_foreground(now=...) is deprecated" in str(warning.message)
    assert "start_foreground(work)" in str(warning.message)  # names the replacement
    assert warning.filename == __file__  # points at the author's line
