"""Prompt suggestions (V2-PREVIEW P17-P20, unstable) and the rest of the Preview (P21, P22), in-process on asyncio
and trio: ``Session.suggest_prompts`` reaches only a client that advertised ``capabilities.session.promptSuggestions``,
replaces the list each time, withdraws it with ``[]``, is never replayed, and refuses suggestions the client could
not take; ``capabilities.session`` is accepted in ``initialize``; subagents need no client capability."""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent import Agent, ContentBlock, ImageContent, InvalidArgumentError, ResourceLink, Session, TextContent
from acp_agent.schema import PromptSuggestionsCapabilities
from acp_agent.store import MemoryStore
from acp_agent.testing import Client, connect_agent
from tests.helpers.agents import text_of

pytestmark = pytest.mark.anyio

SUGGESTIONS = {"session": {"promptSuggestions": {}}}
IMAGE = ImageContent(data="aGk=", mime_type="image/png")


class SuggestingAgent(Agent):
    """``suggest`` offers two follow-ups, ``withdraw`` withdraws them, ``image`` offers an image prompt,
    ``blank`` a blank one, ``spawn`` starts a subagent; ``outcomes`` records what each call returned or raised."""

    name = "suggesting"
    version = "1"

    def __init__(self) -> None:
        self.outcomes: list[Any] = []

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> None:
        text = text_of(prompt)
        offers: dict[str, list[Any]] = {
            "suggest": ["Run the tests", [TextContent(text="Explain "), ResourceLink(name="a.py", uri="file:///a.py")]],
            "withdraw": [],
            "image": [[TextContent(text="What is this?"), IMAGE]],
            "blank": ["   "],
            "empty": [[]],
        }
        if text == "spawn":
            child = await session.spawn_subagent("helper")
            self.outcomes.append(child.id)
        elif text in offers:
            try:
                self.outcomes.append(await session.suggest_prompts(offers[text]))
            except InvalidArgumentError as exc:
                self.outcomes.append(exc)
        await session.say(f"did {text}")


def suggestions(client: Client, sid: str) -> list[list[dict[str, Any]]]:
    return [[s["prompt"] for s in m["params"]["update"]["suggestions"]] for m in client.sent_by_agent()
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
            and m["params"]["update"]["sessionUpdate"] == "prompt_suggestions_update"]


async def test_suggestions_reach_a_client_that_advertises_them() -> None:  # P17, P18, bar 5c
    agent = SuggestingAgent()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities=SUGGESTIONS)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "suggest")
        await client.prompt_and_wait(sid, "withdraw")
        assert agent.outcomes == [True, True]
        assert suggestions(client, sid) == [
            [[{"type": "text", "text": "Run the tests"}],
             [{"type": "text", "text": "Explain "}, {"type": "resource_link", "name": "a.py", "uri": "file:///a.py"}]],
            [],  # the list withdrawn
        ]


async def test_nothing_is_sent_to_a_client_that_did_not_advertise_them() -> None:  # P17
    agent = SuggestingAgent()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities={"session": {"commands": {}}})
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "suggest")
        assert agent.outcomes == [False] and suggestions(client, sid) == []


async def test_suggestions_are_never_replayed() -> None:  # P20
    agent = SuggestingAgent()
    store = MemoryStore()
    async with connect_agent(agent, store=store) as client:
        await client.initialize(capabilities=SUGGESTIONS)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "suggest")
        await client.close_session(sid)
    async with connect_agent(agent, store=store) as client:
        await client.initialize(capabilities=SUGGESTIONS)
        await client.resume_session(sid, "/tmp", replay=True)
        assert suggestions(client, sid) == []
        assert any(m["params"]["update"]["sessionUpdate"] == "replay_complete" for m in client.sent_by_agent()
                   if m.get("method") == "session/update")


async def test_blocks_beyond_the_baseline_need_the_clients_opt_in() -> None:  # P17, P19
    agent = SuggestingAgent()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities=SUGGESTIONS)
        sid = await client.new_session("/tmp")
        for text in ("image", "blank", "empty"):
            await client.prompt_and_wait(sid, text)
        assert all(isinstance(o, InvalidArgumentError) for o in agent.outcomes)
        assert suggestions(client, sid) == []
    agent = SuggestingAgent()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities={"session": {"promptSuggestions": {"image": {}}}})
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "image")
        assert agent.outcomes == [True] and suggestions(client, sid)[0][0][1]["type"] == "image"


async def test_session_capabilities_are_accepted_in_initialize() -> None:  # P22, bar 5a
    async with connect_agent(SuggestingAgent()) as client:
        answer = await client.initialize(capabilities={"session": {
            "promptSuggestions": {"image": {}, "audio": {}, "embeddedContext": {}}, "commands": {},
            "futureThing": {"x": 1}}})
        assert answer["protocolVersion"] == 2
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "hello")


async def test_subagents_need_no_client_capability() -> None:  # P21
    agent = SuggestingAgent()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities={})
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "spawn")
        (child,) = agent.outcomes
        announced = [m["params"]["update"] for m in client.sent_by_agent() if m.get("method") == "session/update"
                     and m["params"]["update"]["sessionUpdate"] == "subagent_update"]
        assert announced and announced[0]["sessionId"] == child


def test_suggest_prompts_refuses_one_string() -> None:
    from acp_agent._session.suggestions import suggestion_update

    with pytest.raises(InvalidArgumentError):
        suggestion_update("run the tests", None)  # type: ignore[arg-type]


def test_suggest_prompts_takes_wire_dicts_as_say_does() -> None:
    # Found by the issue-38 user trial: `session.say([{"type": "text", ...}])` works, but the same block given to
    # suggest_prompts was refused "None blocks cannot be suggested" (the check read `.type` off the dict).
    from acp_agent._session.suggestions import suggestion_update

    update = suggestion_update([[{"type": "text", "text": "Run the tests"}]], None)  # type: ignore[list-item]
    assert update.suggestions[0].prompt == [TextContent(text="Run the tests")]
    with pytest.raises(InvalidArgumentError, match="'image'"):  # a dict block is judged by its type
        suggestion_update([[{"type": "image", "data": "aGk=", "mimeType": "image/png"}]],
                          PromptSuggestionsCapabilities())  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="suggestion 0"):  # not a content block at all
        suggestion_update([[{"type": "nonsense"}]], None)  # type: ignore[list-item]
