"""The rest of the stable v2 agent surface (issue 12): login, elicitation, extension methods, ``_meta``,
system prompts and turn results, through the in-memory client (which judges every transcript)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from acp_agent import (
    Agent,
    AuthMethodAgent,
    AuthMethodTerminal,
    ClientPeer,
    ContentBlock,
    ElicitationUnsupportedError,
    Login,
    RequestError,
    Session,
    StopReason,
    TextContent,
    Usage,
    extension,
)
from acp_agent.testing import Client, connect_agent

pytestmark = pytest.mark.anyio

FORMS = {"elicitation": {"form": {}, "url": {}}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def text_of(prompt: list[ContentBlock]) -> str:
    return " ".join(b.text for b in prompt if isinstance(b, TextContent))


def requests_sent(client: Client, method: str) -> list[dict[str, Any]]:
    return [m for m in client.sent_by_agent() if m.get("method") == method]


class Reindex(BaseModel):
    """Typed params of an extension method."""

    path: str
    depth: int = 1


class Everything(Agent):
    """Declares auth, extension methods and system prompts; its prompt hook asks questions."""

    name = "everything"
    auth_methods = [AuthMethodAgent(method_id="agent-login", name="Log in"),
                    AuthMethodTerminal(method_id="tui-login", name="Log in in a terminal", args=["--login"])]
    require_login = True
    accepts_system_prompt = True

    def __init__(self) -> None:
        self.h: dict[str, Any] = {}

    async def login(self, login: Login) -> None:
        self.h["login client"] = login.client.info
        if self.h.get("ask at login"):
            answer = await login.ask("Your token name?", NAME_FORM)
            if not answer.accepted:
                raise RequestError.auth_required()
            self.h["token name"] = answer.content

    async def logout(self, login: Login) -> None:
        self.h["logged out"] = True

    @extension("_acme/echo")
    async def echo(self, params: dict[str, Any], client: ClientPeer) -> dict[str, Any]:
        return {"echo": params, "client": client.info.name if client.info else None}

    @extension("_acme/reindex")
    async def reindex(self, params: Reindex, client: ClientPeer) -> dict[str, Any]:
        return {"path": params.path, "depth": params.depth}

    @extension("_acme/ping", notification=True)
    async def ping(self, params: dict[str, Any], client: ClientPeer) -> None:
        self.h["pinged"] = params

    async def new_session(self, session: Session) -> None:
        self.h["new meta"] = session.meta
        self.h["system prompt"] = session.system_prompt

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = text_of(prompt)
        self.h["prompt meta"] = session.prompt_meta
        if text == "/ask":
            try:
                answer = await session.ask("Who are you?", NAME_FORM)
            except ElicitationUnsupportedError as exc:
                self.h["unsupported"] = exc
                return "end_turn"
            self.h["answer"] = answer
            if answer.accepted:
                await session.say(f"Hello, {answer.content['name']}")  # type: ignore[index]
            return "end_turn"
        if text == "/url":
            answer = await session.ask_url("Sign in to GitHub", "https://example.com/oauth", elicitation_id="gh-1")
            self.h["url answer"] = answer
            session.complete_elicitation("gh-1")
            return "end_turn"
        if text == "/call-client":
            self.h["client said"] = await session.client.request("_client/hello", {"n": 1})
            return "end_turn"
        if text == "/usage":
            session.set_turn_usage(Usage(input_tokens=10, output_tokens=5, total_tokens=15))
            await session.say("counted", meta={"acme": 1})
            return "end_turn"
        await session.say(text)
        return "end_turn"


async def login(client: Client) -> None:
    await client.request("auth/login", {"methodId": "agent-login"})


# -- authentication ------------------------------------------------------------------------------


async def test_initialize_offers_auth_methods_terminal_only_to_terminal_clients() -> None:
    async with connect_agent(Everything()) as client:
        result = await client.initialize()
        assert [m["methodId"] for m in result["authMethods"]] == ["agent-login"]
    async with connect_agent(Everything()) as client:
        result = await client.initialize(capabilities={"auth": {"terminal": {}}})
        assert [m["methodId"] for m in result["authMethods"]] == ["agent-login", "tui-login"]
        assert result["authMethods"][1]["args"] == ["--login"]


async def test_the_gate_holds_until_login_and_closes_again_after_logout() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        await client.initialize()
        with pytest.raises(RequestError) as gated:
            await client.new_session("/tmp")
        assert gated.value.code == -32000
        assert "new meta" not in agent.h  # no hook ran
        with pytest.raises(RequestError) as unknown:
            await client.request("auth/login", {"methodId": "nope"})
        assert unknown.value.code == -32602 and unknown.value.data == {"methodId": "nope"}
        with pytest.raises(RequestError) as terminal:  # not offered to this client
            await client.request("auth/login", {"methodId": "tui-login"})
        assert terminal.value.code == -32602
        await login(client)
        assert agent.h["login client"].name
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "hi")
        assert await client.request("auth/logout", {}) == {}
        assert agent.h["logged out"]
        with pytest.raises(RequestError) as again:
            await client.prompt(sid, "hi")
        assert again.value.code == -32000


async def test_login_can_ask_a_request_scoped_question() -> None:
    agent = Everything()
    agent.h["ask at login"] = True
    async with connect_agent(agent, elicitation_policy=lambda p: {"action": "accept",
                                                                   "content": {"name": "ci"}}) as client:
        await client.initialize(capabilities=FORMS)
        await login(client)
        [question] = requests_sent(client, "elicitation/create")
        params = question["params"]
        assert "sessionId" not in params and isinstance(params["requestId"], int)
        assert agent.h["token name"] == {"name": "ci"}


async def test_a_refused_login_keeps_the_gate_closed() -> None:
    agent = Everything()
    agent.h["ask at login"] = True
    async with connect_agent(agent, elicitation_policy=lambda p: {"action": "decline"}) as client:
        await client.initialize(capabilities=FORMS)
        with pytest.raises(RequestError) as refused:
            await login(client)
        assert refused.value.code == -32000
        with pytest.raises(RequestError):
            await client.new_session("/tmp")


# -- elicitation ---------------------------------------------------------------------------------


async def test_a_form_in_the_foreground_is_requires_action_then_running() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities=FORMS)
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "/ask")
        await client.wait_for(lambda: bool(client.pending_elicitations))
        assert client.view(sid).state == "requires_action"
        params = client.pending_elicitations[0]["params"]
        assert params["sessionId"] == sid and params["mode"] == "form" and params["requestedSchema"] == NAME_FORM
        client.answer_elicitation(0, "accept", {"name": "Ada"})
        view = await client.wait_idle(sid)
        assert list(view.messages().values()) == ["Hello, Ada"]
        states = [u["state"] for u in view.updates if u["sessionUpdate"] == "state_update"]
        assert states == ["running", "requires_action", "running", "idle"]


@pytest.mark.parametrize(("answer", "expected"), [
    ({"action": "decline"}, ("decline", None)),
    ({"action": "cancel"}, ("cancel", None)),
    ({"action": "_later"}, ("cancel", "unknown action '_later'")),
    ({"action": "accept", "content": {"name": 3}}, ("cancel", "name: 3 is not of type 'string'")),
    ({"action": "accept", "content": {}}, ("cancel", "content: 'name' is a required property")),
])
async def test_every_answer_is_typed(answer: dict[str, Any], expected: tuple[str, str | None]) -> None:
    agent = Everything()
    async with connect_agent(agent, elicitation_policy=lambda p: answer) as client:
        await client.initialize(capabilities=FORMS)
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/ask")
        result = agent.h["answer"]
        assert (result.action, result.problem) == expected
        assert not result.accepted and result.content is None


async def test_session_cancel_withdraws_a_foreground_question() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities=FORMS)
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "/ask")
        await client.wait_for(lambda: bool(client.pending_elicitations))
        question_id = requests_sent(client, "elicitation/create")[0]["id"]
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        withdrawn = [m["params"]["requestId"] for m in requests_sent(client, "$/cancel_request")]
        assert withdrawn == [question_id]


async def test_a_mode_the_client_did_not_advertise_sends_nothing() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        await client.initialize(capabilities={"elicitation": {"url": {}}})  # no forms
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/ask")
        assert "form" in str(agent.h["unsupported"])
        assert requests_sent(client, "elicitation/create") == []


async def test_a_url_flow_and_its_completion() -> None:
    agent = Everything()
    async with connect_agent(agent, elicitation_policy=lambda p: {"action": "accept"}) as client:
        await client.initialize(capabilities=FORMS)
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/url")
        [question] = requests_sent(client, "elicitation/create")
        assert question["params"]["mode"] == "url" and question["params"]["elicitationId"] == "gh-1"
        assert agent.h["url answer"].accepted
        assert [m["params"] for m in requests_sent(client, "elicitation/complete")] == [{"elicitationId": "gh-1"}]


# -- extension methods ---------------------------------------------------------------------------


async def test_extension_methods_both_ways() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        from acp_agent._wire.connection import Method

        async def hello(params: dict[str, Any]) -> dict[str, Any]:
            return {"hello": params["n"]}

        client.connection.requests["_client/hello"] = Method(hello)
        await client.initialize()
        assert await client.request("_acme/echo", {"x": 1}) == {"echo": {"x": 1}, "client": "acp-agent-testing"}
        assert await client.request("_acme/reindex", {"path": "/src"}) == {"path": "/src", "depth": 1}
        with pytest.raises(RequestError) as bad:
            await client.request("_acme/reindex", {"path": 3})
        assert bad.value.code == -32602
        with pytest.raises(RequestError) as unknown:
            await client.request("_acme/nope", {})
        assert unknown.value.code == -32601
        client.notify("_acme/ping", {"t": 1})
        with anyio.fail_after(5):  # a notification has no answer to wait for: poll
            while "pinged" not in agent.h:
                await anyio.sleep(0.01)
        assert agent.h["pinged"] == {"t": 1}
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "/call-client")
        assert agent.h["client said"] == {"hello": 1}


def test_extension_names_start_with_an_underscore() -> None:
    with pytest.raises(ValueError, match="start with '_'"):
        extension("acme/x")


# -- _meta, system prompts, turn results ---------------------------------------------------------


async def test_meta_reaches_the_hooks_and_goes_out() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        await client.initialize()
        await login(client)
        sid = await client.new_session("/tmp", _meta={"trace": "n1"})
        assert agent.h["new meta"] == {"trace": "n1"}
        await client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/usage"}],
                                                "_meta": {"trace": "p1"}})
        view = await client.wait_idle(sid)
        assert agent.h["prompt meta"] == {"trace": "p1"}
        said = next(u for u in view.updates if u["sessionUpdate"] == "agent_message")
        assert said["_meta"] == {"acme": 1}
        idle = view.updates[-1]
        assert idle["usage"] == {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}


async def test_system_prompts_in_the_advertised_modes_only() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:
        result = await client.initialize()
        assert result["capabilities"]["session"]["systemPrompt"] == {}
        await login(client)
        terse = {"mode": "append", "content": [{"type": "text", "text": "Be terse."}]}
        await client.new_session("/tmp", systemPrompt=terse)
        assert agent.h["system prompt"].mode == "append"
        with pytest.raises(RequestError) as refused:
            await client.new_session("/tmp", systemPrompt={"mode": "override", "content": []})
        assert refused.value.code == -32602


async def test_no_system_prompt_capability_without_opting_in() -> None:
    class Plain(Agent):
        async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
            return "end_turn"

    async with connect_agent(Plain()) as client:
        result = await client.initialize()
        assert "systemPrompt" not in result["capabilities"]["session"]
        assert "authMethods" not in result
        with pytest.raises(RequestError) as refused:
            await client.new_session("/tmp", systemPrompt={"mode": "append", "content": []})
        assert refused.value.code == -32602
        with pytest.raises(RequestError) as no_login:
            await client.request("auth/login", {"methodId": "x"})
        assert no_login.value.code == -32601
    await anyio.sleep(0)


async def test_after_logout_running_work_can_still_be_cancelled_and_closed() -> None:
    agent = Everything()
    async with connect_agent(agent) as client:  # the client's checker judges R68
        await client.initialize(capabilities=FORMS)
        await login(client)
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "/ask")
        await client.wait_for(lambda: bool(client.pending_elicitations))
        await client.request("auth/logout", {})
        client.cancel(sid)
        view = await client.wait_idle(sid)
        assert view.stop_reason == "cancelled"
        await client.close_session(sid)


async def test_auth_status_is_served_and_advertised_when_implemented() -> None:
    from acp_agent.schema import AuthStatusResponse, AuthStatusUpdateNotification

    class WithStatus(Everything):
        async def auth_status(self, client: ClientPeer) -> AuthStatusResponse:
            client.report_auth_status(AuthStatusUpdateNotification(state="authenticated"))
            return AuthStatusResponse(state="authenticated")

    async with connect_agent(WithStatus()) as client:
        result = await client.initialize()
        assert result["capabilities"]["auth"] == {"status": {}}
        assert (await client.request("auth/status", {}))["state"] == "authenticated"
        assert [m["params"] for m in requests_sent(client, "auth/status_update")] == [{"state": "authenticated"}]
    async with connect_agent(Everything()) as client:
        result = await client.initialize()
        assert "auth" not in result["capabilities"]
        with pytest.raises(RequestError) as missing:
            await client.request("auth/status", {})
        assert missing.value.code == -32601


async def test_every_agent_side_method_of_the_unstable_schema_is_served() -> None:
    """Issue 13's coverage: an agent that opts into everything answers every method the unstable schema sends
    to agents (``x-side: agent``) with anything but -32601; ``proxy/*`` methods are a proxy's, not an agent's."""
    import json

    from acp_agent import Provider, ProviderSettings
    from acp_agent._runtime.runtime import AgentRuntime
    from acp_agent.schema import AuthStatusResponse
    from acp_agent.testing.schema import default_schema_path
    from acp_agent.testing.streams import byte_pipe

    schema = json.loads(default_schema_path(unstable=True).read_text())
    agent_side = {d["x-method"]: "Notification" in name for name, d in schema["$defs"].items()
                  if d.get("x-side") == "agent"}
    assert {"session/set_title", "session/archive", "session/status", "providers/set", "mcp/message"} <= set(agent_side)

    class AllOfIt(Everything):
        require_login = False
        providers = (Provider("main", ["anthropic"]),)
        mcp_acp = True

        async def auth_status(self, client: ClientPeer) -> AuthStatusResponse:
            return AuthStatusResponse(state="authenticated")

        async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
            pass

        async def fork_session(self, session: Session, source: Session) -> None:
            pass

    send, receive = byte_pipe()
    runtime = AgentRuntime(AllOfIt(), receive, send)
    served = {**runtime.connection.requests, **runtime.connection.notifications}
    assert set(agent_side) <= set(served), sorted(set(agent_side) - set(served))
    async with connect_agent(AllOfIt()) as client:
        await client.initialize()
        for method, is_notification in sorted(agent_side.items()):
            if is_notification:
                continue
            try:
                await client.request(method, {})  # wrong params: -32602, never -32601
            except RequestError as error:
                assert error.code != -32601, method
