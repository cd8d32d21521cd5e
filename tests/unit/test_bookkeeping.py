"""[unstable] Session bookkeeping the SDK serves for every agent (``session/set_title``, ``session/archive``,
``session/unarchive``, ``session/status``, the ``archived`` filter of ``session/list``) and the providers
methods (``providers/list|set|disable``), driven over the in-memory client on every store."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent import ContentBlock, Provider, ProviderSettings, RequestError, Session, StopReason
from acp_agent.store import MemoryStore, SessionStore, SqliteStore
from acp_agent.testing.client import Client, connect_agent
from acp_agent.testing.schema import SchemaValidator
from tests.helpers.agents import ScriptedAgent, text_of

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], SessionStore]
SECRET = "sk-live-5ecret-never-echo-42"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Each call is a new store object on one place (a restarted agent); memory keeps one object."""
    if request.param == "memory":
        store = MemoryStore()
        return lambda: store
    if request.param == "sqlite":
        return lambda: SqliteStore(tmp_path / "agent.sqlite3")
    dsn = request.getfixturevalue("postgres_dsn")
    from acp_agent.store.postgres import PostgresStore

    return lambda: PostgresStore(dsn)


@pytest.fixture(scope="module")
def validator() -> SchemaValidator:
    return SchemaValidator()


class KeepingAgent(ScriptedAgent):
    """ScriptedAgent that records the bookkeeping hooks (and refuses when told to); ``child`` spawns a
    subagent and says its id; ``retitle T`` sets an agent title with ``update_info``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, ...]] = []
        self.refuse = False
        self.closed: list[str] = []

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        command, _, rest = text_of(prompt).partition(" ")
        if command == "child":
            child = await session.spawn_subagent("helper")
            await session.say(child.id)
            return "end_turn"
        if command == "retitle":
            await session.update_info(title=rest)
            await session.say(f"title={session.title}")
            return "end_turn"
        return await super().prompt(session, prompt)

    def _hook(self, *call: str) -> None:
        self.calls.append(call)
        if self.refuse:
            raise RequestError.invalid_params("refused by the agent")

    async def set_session_title(self, session_id: str, title: str) -> None:
        self._hook("title", session_id, title)

    async def archive_session(self, session_id: str) -> None:
        self._hook("archive", session_id)

    async def unarchive_session(self, session_id: str) -> None:
        self._hook("unarchive", session_id)

    async def close_session(self, session: Session) -> None:
        self.closed.append(session.id)


async def fails(client: Client, method: str, params: dict[str, Any], code: int) -> Any:
    with pytest.raises(RequestError) as info:
        await client.request(method, params)
    assert info.value.code == code, info.value
    return info.value.data


async def listed(client: Client, archived: str | None = None, cwd: str | None = None) -> list[dict[str, Any]]:
    """Every page of ``session/list`` with the same filter (the test client follows the cursor)."""
    return await client.list_sessions(cwd, archived=archived)


def ids(sessions: list[dict[str, Any]]) -> list[str]:
    return [s["sessionId"] for s in sessions]


def answers(client: Client, method: str) -> list[dict[str, Any]]:
    """The agent's answers to this client's requests for ``method``, in order."""
    asked = {m["id"] for m in (e.message for e in client.transcript if e.direction == "client->agent")
             if m.get("method") == method and "id" in m}
    return [m for m in client.sent_by_agent() if "method" not in m and m.get("id") in asked]


# -- capabilities -------------------------------------------------------------------------------


async def test_every_agent_advertises_and_serves_bookkeeping_but_not_providers() -> None:
    async with connect_agent(ScriptedAgent()) as client:
        init = await client.initialize()
        session_caps = init["capabilities"]["session"]
        assert session_caps["title"] == {} and session_caps["archive"] == {} and session_caps["status"] == {}
        assert "providers" not in init["capabilities"]
        await fails(client, "providers/list", {}, -32601)
        sid = await client.new_session("/tmp")
        assert (await client.request("session/set_title", {"sessionId": sid, "title": "x"})) == {"title": "x"}


# -- session/set_title ------------------------------------------------------------------------------


async def test_set_title_trims_stores_lists_and_refuses_empty(validator: SchemaValidator) -> None:
    agent = KeepingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        answer = await client.request("session/set_title", {"sessionId": sid, "title": "  Fix the login bug \n"})
        assert answer == {"title": "Fix the login bug"}
        assert agent.calls == [("title", sid, "Fix the login bug")]
        [info] = await listed(client)
        assert info["title"] == "Fix the login bug" and info["archived"] is False
        # The open session reports it too, before the answer.
        [update] = [u for u in client.view(sid).updates if u["sessionUpdate"] == "session_info_update"]
        assert update == {"sessionUpdate": "session_info_update", "title": "Fix the login bug"}
        for bad in ("", "   \t\n"):
            await fails(client, "session/set_title", {"sessionId": sid, "title": bad}, -32602)
        await fails(client, "session/set_title", {"sessionId": sid}, -32602)
        await fails(client, "session/set_title", {"sessionId": sid, "title": None}, -32602)
        data = await fails(client, "session/set_title", {"sessionId": "sess_nope", "title": "t"}, -32002)
        assert data == {"sessionId": "sess_nope"}
        assert len(agent.calls) == 1
    assert validator.check_transcript(client.transcript) == []


async def test_the_clients_title_wins_over_the_agents_own() -> None:
    async with connect_agent(KeepingAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "retitle Agent title one")
        assert (await listed(client))[0]["title"] == "Agent title one"
        await client.request("session/set_title", {"sessionId": sid, "title": "Mine"})
        mark = len(client.view(sid).updates)
        view = await client.prompt_and_wait(sid, "retitle Agent title two")
        assert list(view.messages().values())[-1] == "title=Mine"
        assert not [u for u in view.updates[mark:] if u["sessionUpdate"] == "session_info_update"]
        await client.prompt_and_wait(sid, "extras")  # update_info(title=..., updated_at=...): the time still goes
        [extra] = [u for u in view.updates[mark:] if u["sessionUpdate"] == "session_info_update"]
        assert extra == {"sessionUpdate": "session_info_update", "updatedAt": "2026-11-29T12:00:00Z"}
        assert (await listed(client))[0]["title"] == "Mine"


async def test_a_refused_title_changes_nothing() -> None:
    agent = KeepingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.request("session/set_title", {"sessionId": sid, "title": "First"})
        agent.refuse = True
        await fails(client, "session/set_title", {"sessionId": sid, "title": "Second"}, -32602)
        assert (await listed(client))[0]["title"] == "First"


async def test_stored_sessions_are_retitled_and_keep_it_across_a_restart(make_store: StoreFactory,
                                                                         validator: SchemaValidator) -> None:
    async with connect_agent(KeepingAgent(), store=make_store()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "retitle From the agent")
        await client.close_session(sid)
        mark = len(client.sent_by_agent())
        assert await client.request("session/set_title", {"sessionId": sid, "title": "Renamed"}) == {
            "title": "Renamed"}
        assert len(client.sent_by_agent()) == mark + 1  # only the answer: the session stays closed
        assert (await client.request("session/status", {"sessionId": sid}))["status"] == "saved"
    assert validator.check_transcript(client.transcript) == []
    async with connect_agent(KeepingAgent(), store=make_store()) as client:
        await client.initialize()
        [info] = await listed(client)
        assert info["title"] == "Renamed"
        await client.resume_session(sid, "/tmp", replay=True)
        view = await client.prompt_and_wait(sid, "retitle Agent again")  # the client's title still wins
        assert list(view.messages().values())[-1] == "title=Renamed"
        assert [s["title"] for s in await listed(client)] == ["Renamed"]


# -- session/archive, session/unarchive, the archived filter ---------------------------------------


async def test_archiving_an_active_session_closes_it_first(validator: SchemaValidator) -> None:
    agent = KeepingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt(sid, "sleep 30")
        await client.wait_for(lambda: client.view(sid).state == "running")
        assert await client.request("session/archive", {"sessionId": sid}) == {}
        wire = client.sent_by_agent()
        [answer] = answers(client, "session/archive")
        at = wire.index(answer)
        idle = [i for i, m in enumerate(wire) if m.get("method") == "session/update"
                and m["params"]["update"].get("state") == "idle"]
        assert idle and idle[-1] < at  # the work ended cancelled before the answer ...
        assert wire[idle[-1]]["params"]["update"]["stopReason"] == "cancelled"
        await anyio.sleep(0.1)
        assert not [m for m in client.sent_by_agent()[at + 1:] if m.get("params", {}).get("sessionId") == sid]
        assert agent.calls == [("archive", sid)] and agent.closed == [sid]  # ... as session/close does it
        await fails(client, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                    -32002)
        assert await listed(client) == []
        [info] = await listed(client, "only")
        assert info["sessionId"] == sid and info["archived"] is True
        # Archiving twice succeeds (and the agent hears of it once).
        assert await client.request("session/archive", {"sessionId": sid}) == {}
        assert agent.calls == [("archive", sid)]
        data = await fails(client, "session/archive", {"sessionId": "sess_nope"}, -32002)
        assert data == {"sessionId": "sess_nope"}
        await fails(client, "session/unarchive", {"sessionId": "sess_nope"}, -32002)
        assert await client.request("session/unarchive", {"sessionId": sid}) == {}
        assert await client.request("session/unarchive", {"sessionId": sid}) == {}
        assert agent.calls == [("archive", sid), ("unarchive", sid)]
        assert ids(await listed(client)) == [sid] and await listed(client, "only") == []
    assert validator.check_transcript(client.transcript) == []


async def test_an_archived_session_can_be_resumed_and_archived_again_while_open() -> None:
    agent = KeepingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, "echo before")
        await client.request("session/archive", {"sessionId": sid})
        await client.resume_session(sid, "/tmp", replay=True)
        await client.prompt_and_wait(sid, "echo after")
        assert (await client.request("session/status", {"sessionId": sid}))["status"] == "open"
        await client.request("session/archive", {"sessionId": sid})  # already archived: still closed
        assert agent.closed == [sid, sid] and agent.calls == [("archive", sid)]
        assert (await client.request("session/status", {"sessionId": sid}))["status"] == "saved"


async def test_a_refused_archive_leaves_the_session_open() -> None:
    agent = KeepingAgent()
    async with connect_agent(agent) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        agent.refuse = True
        await fails(client, "session/archive", {"sessionId": sid}, -32602)
        assert (await client.request("session/status", {"sessionId": sid}))["status"] == "open"
        assert ids(await listed(client)) == [sid] and agent.closed == []


async def test_a_session_closed_while_the_archive_hook_runs_is_still_archived(make_store: StoreFactory) -> None:
    class SlowArchive(KeepingAgent):
        def __init__(self) -> None:
            super().__init__()
            self.entered = anyio.Event()
            self.go_on = anyio.Event()

        async def archive_session(self, session_id: str) -> None:
            self.entered.set()
            await self.go_on.wait()

    agent = SlowArchive()
    async with connect_agent(agent, store=make_store()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.request, "session/archive", {"sessionId": sid})
            await agent.entered.wait()
            await client.close_session(sid)  # closed (and saved) while the hook runs
            agent.go_on.set()
        assert ids(await listed(client, "only")) == [sid]
    async with connect_agent(KeepingAgent(), store=make_store()) as client:
        await client.initialize()
        assert ids(await listed(client, "only")) == [sid]


async def test_archived_filter_applies_before_pagination(make_store: StoreFactory) -> None:
    async with connect_agent(KeepingAgent(), store=make_store()) as client:
        await client.initialize()
        made = [await client.new_session("/a" if i % 4 else "/b") for i in range(110)]
        archived = made[::2]  # 55: two pages of archived sessions, two of the others
        for sid in archived:
            await client.request("session/archive", {"sessionId": sid})
        first = await client.request("session/list", {"archived": "only"})
        assert len(first["sessions"]) == 50 and set(ids(first["sessions"])) <= set(archived) and first["nextCursor"]
        assert sorted(ids(await listed(client, "only"))) == sorted(archived)
        assert sorted(ids(await listed(client, "include"))) == sorted(made)
        assert sorted(ids(await listed(client))) == sorted(s for s in made if s not in archived)
        assert ids(await listed(client, "exclude")) == ids(await listed(client))
        assert sorted(ids(await listed(client, "only", cwd="/b"))) == sorted(s for s in archived if s in made[::4])
        for info in await listed(client, "include"):
            assert info["archived"] is (info["sessionId"] in archived)
        for bad in ("everything", "_vendor", ""):
            data = await fails(client, "session/list", {"archived": bad}, -32602)
            assert data == {"archived": bad}
    async with connect_agent(KeepingAgent(), store=make_store()) as client:  # kept across a restart
        await client.initialize()
        assert sorted(ids(await listed(client, "only"))) == sorted(archived)


# -- session/status -----------------------------------------------------------------------------------


async def test_status_reports_open_with_the_current_state_and_saved_without_side_effects(
        validator: SchemaValidator) -> None:
    async with connect_agent(KeepingAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        assert await client.request("session/status", {"sessionId": sid}) == {
            "status": "open", "state": {"state": "idle", "background": []}}
        await client.prompt(sid, "sleep 30")
        await client.wait_for(lambda: client.view(sid).state == "running")
        mark = len(client.sent_by_agent())
        answer = await client.request("session/status", {"sessionId": sid})
        assert answer == {"status": "open", "state": {"state": "running", "background": []}}
        assert len(client.sent_by_agent()) == mark + 1  # the answer, no state_update
        client.cancel(sid)
        await client.wait_idle(sid)
        await client.close_session(sid)
        mark = len(client.sent_by_agent())
        assert await client.request("session/status", {"sessionId": sid}) == {"status": "saved"}
        assert len(client.sent_by_agent()) == mark + 1
        # Nothing was loaded or attached: the session is still closed here.
        await fails(client, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]},
                    -32002)
        data = await fails(client, "session/status", {"sessionId": "sess_unknown"}, -32002)
        assert data == {"sessionId": "sess_unknown"}
    assert validator.check_transcript(client.transcript) == []


async def test_child_sessions_report_status_but_are_not_retitled_or_archived() -> None:
    async with connect_agent(KeepingAgent()) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        view = await client.prompt_and_wait(sid, "child")
        child = list(view.messages().values())[-1]
        assert (await client.request("session/status", {"sessionId": child}))["status"] == "open"
        for method, params in (("session/set_title", {"title": "t"}), ("session/archive", {}),
                               ("session/unarchive", {})):
            await fails(client, method, {"sessionId": child, **params}, -32602)


# -- sessions open on another connection of the process -----------------------------------------------


async def test_a_session_open_on_another_connection_is_seen_retitled_and_closed_by_archive() -> None:
    store = MemoryStore()
    agent = KeepingAgent()
    async with connect_agent(agent, store=store) as owner, connect_agent(agent, store=store) as other:
        await owner.initialize()
        await other.initialize()
        sid = await owner.new_session("/tmp")
        await owner.prompt(sid, "sleep 30")
        await owner.wait_for(lambda: owner.view(sid).state == "running")
        status = await other.request("session/status", {"sessionId": sid})
        assert status == {"status": "open", "state": {"state": "running", "background": []}}
        await other.request("session/set_title", {"sessionId": sid, "title": "From elsewhere"})
        await owner.wait_for(lambda: any(u.get("title") == "From elsewhere" for u in owner.view(sid).updates))
        await other.request("session/archive", {"sessionId": sid})
        assert owner.view(sid).state == "idle" and agent.closed == [sid]
        await fails(owner, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]},
                    -32002)
        [info] = await listed(owner, "only")
        assert info["title"] == "From elsewhere"


# -- providers ---------------------------------------------------------------------------------------


class ProviderAgent(ScriptedAgent):
    """Declares two providers; records what configure_provider got (headers included)."""

    providers = (
        Provider("main", supported=("anthropic", "openai"), required=True, api_type="anthropic",
                 base_url="https://api.anthropic.com"),
        Provider("embeddings", supported=("openai",)),
    )

    def __init__(self) -> None:
        super().__init__()
        self.configured: list[tuple[str, ProviderSettings | None]] = []
        self.refuse = False

    async def configure_provider(self, provider_id: str, settings: ProviderSettings | None) -> None:
        if self.refuse:
            raise RequestError.invalid_params("cannot reach that endpoint")
        self.configured.append((provider_id, settings))


async def test_providers_are_listed_set_and_disabled(validator: SchemaValidator) -> None:
    agent = ProviderAgent()
    async with connect_agent(agent) as client:
        init = await client.initialize()
        assert init["capabilities"]["providers"] == {}
        assert await client.request("providers/list", {}) == {"providers": [
            {"providerId": "main", "supported": ["anthropic", "openai"], "required": True,
             "current": {"apiType": "anthropic", "baseUrl": "https://api.anthropic.com"}},
            {"providerId": "embeddings", "supported": ["openai"], "required": False},
        ]}
        headers = {"Authorization": f"Bearer {SECRET}", "X-Route": "eu"}
        assert await client.request("providers/set", {
            "providerId": "embeddings", "apiType": "openai", "baseUrl": "https://gateway.example/v1",
            "headers": headers}) == {}
        [(provider_id, settings)] = agent.configured
        assert provider_id == "embeddings" and settings is not None
        assert (settings.api_type, settings.base_url, dict(settings.headers)) == (
            "openai", "https://gateway.example/v1", headers)
        assert SECRET not in repr(settings)
        listed_now = (await client.request("providers/list", {}))["providers"]
        assert listed_now[1]["current"] == {"apiType": "openai", "baseUrl": "https://gateway.example/v1"}
        assert await client.request("providers/disable", {"providerId": "embeddings"}) == {}
        assert agent.configured[-1] == ("embeddings", None)
        assert "current" not in (await client.request("providers/list", {}))["providers"][1]
    assert validator.check_transcript(client.transcript) == []


async def test_provider_requests_are_checked_before_the_hook_and_never_echo_secrets(
        caplog: pytest.LogCaptureFixture) -> None:
    agent = ProviderAgent()
    secret_headers = {"Authorization": f"Bearer {SECRET}"}
    with caplog.at_level(logging.DEBUG):
        async with connect_agent(agent) as client:
            await client.initialize()
            base = {"providerId": "main", "apiType": "openai", "baseUrl": "https://proxy.example",
                    "headers": secret_headers}
            await fails(client, "providers/set", {**base, "providerId": "nope"}, -32602)
            await fails(client, "providers/set", {**base, "apiType": "bedrock"}, -32602)
            await fails(client, "providers/set", {**base, "apiType": "_custom"}, -32602)
            await fails(client, "providers/set", {**base, "baseUrl": "not a url"}, -32602)
            await fails(client, "providers/set", {**base, "baseUrl": f"https://user:{SECRET}@proxy.example"}, -32602)
            await fails(client, "providers/set", {**base, "headers": {"Authorization": 7, "X": SECRET}}, -32602)
            await fails(client, "providers/disable", {"providerId": "main"}, -32602)
            await fails(client, "providers/disable", {"providerId": "nope"}, -32602)
            assert agent.configured == []
            agent.refuse = True
            await fails(client, "providers/set", base, -32602)
            agent.refuse = False
            listed_now = (await client.request("providers/list", {}))["providers"]
            assert listed_now[0]["current"] == {"apiType": "anthropic", "baseUrl": "https://api.anthropic.com"}
            await client.request("providers/set", base)
            assert agent.configured == [("main", agent.configured[0][1])]
    assert SECRET not in str(client.sent_by_agent())
    assert SECRET not in caplog.text


def test_a_provider_is_declared_with_a_whole_endpoint_or_none() -> None:
    with pytest.raises(ValueError, match="both api_type and base_url"):
        Provider("main", supported=("openai",), api_type="openai")
    with pytest.raises(TypeError, match="sequence of protocols"):
        Provider("main", supported="openai")


def test_a_declared_endpoint_obeys_the_rules_of_providers_set() -> None:
    # providers/list shows it as is: a typo would be advertised, a bad URL would break the answer's schema.
    with pytest.raises(ValueError, match="'opnai' is not in supported"):
        Provider("main", supported=("openai",), api_type="opnai", base_url="https://api.openai.com/v1")
    with pytest.raises(ValueError, match="absolute URL"):
        Provider("main", supported=("openai",), api_type="openai", base_url="api.openai.com/v1")
    with pytest.raises(ValueError, match="must not carry credentials") as refused:
        Provider("main", supported=("openai",), api_type="openai", base_url="https://me:sk-1@api.openai.com/v1")
    assert "sk-1" not in str(refused.value)
    assert Provider("main", supported=("_acme",), api_type="_acme", base_url="http://127.0.0.1:9000").required is False


async def test_an_unhashable_agent_class_can_offer_providers() -> None:
    @dataclass(eq=True)
    class DataAgent(ProviderAgent):
        label: str = "x"

        def __post_init__(self) -> None:
            ProviderAgent.__init__(self)

    first, second = DataAgent(), DataAgent()
    assert first == second  # unhashable, and equal: each still has its own providers
    async with connect_agent(first) as client:
        await client.initialize()
        await client.request("providers/disable", {"providerId": "embeddings"})
        await client.request("providers/set", {"providerId": "main", "apiType": "openai", "baseUrl": "https://a.b"})
    async with connect_agent(second) as client:
        await client.initialize()
        [main, _] = (await client.request("providers/list", {}))["providers"]
        assert main["current"]["apiType"] == "anthropic"


async def test_declared_providers_without_the_hook_are_not_offered() -> None:
    class Half(ScriptedAgent):
        providers = (Provider("main", supported=("openai",)),)

    async with connect_agent(Half()) as client:
        init = await client.initialize()
        assert "providers" not in init["capabilities"]
        await fails(client, "providers/list", {}, -32601)
