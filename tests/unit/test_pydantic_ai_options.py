"""``PydanticAIAgent``'s options offline: per-session deps and toolsets, the tool presenter, the client's
system prompt, slash commands, prompt capabilities, providers, and cancellation while the user is asked.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import RunContext
from pydantic_ai.messages import BinaryContent, ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.toolsets import FunctionToolset

from acp_agent import Provider, ProviderSettings, Session
from acp_agent.integrations.pydantic_ai import (
    Command,
    ProviderModels,
    PydanticAIAgent,
    ToolPresentation,
)
from tests.helpers.pydantic_ai_models import checked, last_tool_return, scripted, user_texts
from tests.unit.test_v1 import new_session as v1_session
from tests.unit.test_v1 import prompt as v1_prompt
from tests.unit.test_v1 import updates as v1_updates
from tests.unit.test_v1 import v1

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


async def test_deps_and_toolsets_come_from_the_session(tmp_path: Any) -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAgent(scripted([("where", {}), ("hello", {}), "ok"], seen), deps_type=str)

    @agent.tool
    async def where(ctx: RunContext[str]) -> str:
        return ctx.deps

    def toolsets(session: Session) -> list[FunctionToolset[Any]]:
        tools: FunctionToolset[Any] = FunctionToolset()

        @tools.tool_plain
        def hello() -> str:
            return f"hello from {session.id}"

        return [tools]

    async def deps(session: Session) -> str:
        return session.cwd

    async with checked(PydanticAIAgent(agent, deps=deps, toolsets=toolsets)) as client:
        await client.initialize()
        sid = await client.new_session(cwd=str(tmp_path))
        await client.prompt_and_wait(sid, "go")
        assert last_tool_return(seen[1]) == str(tmp_path)
        assert last_tool_return(seen[2]) == f"hello from {sid}"


async def test_the_presenter_names_and_kinds_tool_calls() -> None:
    agent = PydanticAgent(scripted([("deploy", {"env": "prod"}), "ok"]))

    @agent.tool_plain
    def deploy(env: str) -> str:
        return "deployed"

    def presenter(name: str, args: Mapping[str, Any], session: Session) -> ToolPresentation | None:
        return ToolPresentation(f"Deploy to {args['env']}", kind="execute") if name == "deploy" else None

    async with checked(PydanticAIAgent(agent, tool_presenter=presenter)) as client:
        await client.initialize()
        sid = await client.new_session()
        view = await client.prompt_and_wait(sid, "ship it")
        (tool,) = view.tool_calls.values()
        assert (tool["title"], tool["kind"]) == ("Deploy to prod", "execute")


async def test_the_clients_system_prompt_becomes_instructions_when_accepted() -> None:
    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted(["ok"], seen), instructions="Be brief."),
                            accept_system_prompt=True)
    async with checked(agent) as client:
        answer = await client.initialize()
        assert "systemPrompt" in answer["capabilities"]["session"]
        sid = await client.new_session(systemPrompt={"mode": "append", "content": [
            {"type": "text", "text": "Answer in French."}]})
        await client.prompt_and_wait(sid, "hi")
        request = seen[0][-1]
        assert isinstance(request, ModelRequest)
        assert "Be brief." in (request.instructions or "") and "Answer in French." in (request.instructions or "")


async def test_user_slash_commands_run_or_become_prompts() -> None:
    seen: list[list[ModelMessage]] = []

    async def review(session: Session, args: str) -> str | None:
        if not args:
            await session.say("Usage: /review PATH")
            return None
        return f"Review {args} carefully."

    agent = PydanticAIAgent(PydanticAgent(scripted(["reviewed"], seen)),
                            commands={"review": Command("Review a file", review, hint="path")})
    async with checked(agent) as client:
        await client.initialize()
        sid = await client.new_session()
        commands = client.view(sid).available_commands or []
        review_command = {"type": "command", "name": "review", "description": "Review a file",
                          "input": {"type": "text", "hint": "path"}}
        assert review_command in commands
        view = await client.prompt_and_wait(sid, "/review")
        assert list(view.messages().values()) == ["Usage: /review PATH"] and seen == []
        await client.prompt_and_wait(sid, "/review src/a.py")
        assert user_texts(seen[0]) == ["Review src/a.py carefully."]


async def test_prompt_capabilities_are_off_by_default_and_images_reach_the_model() -> None:
    async with checked(PydanticAIAgent(PydanticAgent(scripted(["x"])))) as client:
        answer = await client.initialize()
        assert "prompt" not in answer["capabilities"]["session"]

    seen: list[list[ModelMessage]] = []
    agent = PydanticAIAgent(PydanticAgent(scripted(["a cat"], seen)), accepts_image=True,
                            accepts_embedded_context=True)
    image = base64.b64encode(b"\x89PNG fake").decode()
    async with checked(agent) as client:
        answer = await client.initialize()
        assert answer["capabilities"]["session"]["prompt"] == {"image": {}, "embeddedContext": {}}
        sid = await client.new_session()
        await client.prompt_and_wait(sid, [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "notes"}},
        ])
        (part,) = [p for p in seen[0][-1].parts if isinstance(p, UserPromptPart)]
        text, picture, resource = part.content
        assert text == "what is this?" and isinstance(picture, BinaryContent) and picture.data == b"\x89PNG fake"
        assert resource == '<resource uri="file:///a.txt">\nnotes\n</resource>'


async def test_a_provider_the_client_configures_offers_its_models() -> None:
    made: list[ProviderSettings] = []
    seen: list[list[ModelMessage]] = []

    def models(settings: ProviderSettings) -> Mapping[str, Model]:
        made.append(settings)
        return {"gateway-model": scripted(["from the gateway"], seen)}

    provider = ProviderModels(Provider("gateway", supported=["openai"]), models)
    agent = PydanticAIAgent(PydanticAgent(scripted(["default"])), providers=[provider])
    async with checked(agent) as client:
        answer = await client.initialize()
        assert "providers" in answer["capabilities"]
        sid = await client.new_session()
        await client.request("providers/set", {"providerId": "gateway", "apiType": "openai",
                                               "baseUrl": "https://gateway.example/v1",
                                               "headers": {"Authorization": "Bearer sk-1"}})
        assert made[0].headers == {"Authorization": "Bearer sk-1"}
        await client.prompt_and_wait(sid, "first")  # the session now offers the gateway's model
        assert [o["value"] for o in (client.view(sid).config_options or [])[0]["options"]] == ["gateway-model"]
        assert len(seen) == 1
        await client.request("providers/disable", {"providerId": "gateway"})
        assert agent.models == {}


async def test_cancel_while_asking_never_runs_the_tool() -> None:
    ran: list[str] = []
    agent = PydanticAgent(scripted([("write", {"path": "a"}), "never"]))

    @agent.tool_plain(requires_approval=True)
    def write(path: str) -> str:
        ran.append(path)
        return "wrote"

    async with checked(PydanticAIAgent(agent), permission_policy=None) as client:
        await client.initialize()
        sid = await client.new_session()
        await client.prompt(sid, "write")
        await client.wait_for(lambda: bool(client.pending_permissions))
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled" and ran == []
        (tool,) = view.tool_calls.values()
        assert tool["status"] in ("cancelled", "failed")


async def test_a_v1_client_gets_the_stream_and_the_tool_calls() -> None:
    agent = PydanticAgent(scripted([("lookup", {"path": "a.txt"}), "found it"]))

    @agent.tool_plain
    def lookup(path: str) -> str:
        return "here"

    async with v1(PydanticAIAgent(agent)) as (client, answer):
        assert answer["protocolVersion"] == 1
        sid = await v1_session(client)
        assert (await v1_prompt(client, sid, "look"))["stopReason"] == "end_turn"
        kinds = [u["sessionUpdate"] for u in v1_updates(client, sid)]
        assert "tool_call" in kinds and "agent_message_chunk" in kinds
        chunks = [u["content"]["text"] for u in v1_updates(client, sid) if u["sessionUpdate"] == "agent_message_chunk"]
        assert "".join(chunks) == "found it"
