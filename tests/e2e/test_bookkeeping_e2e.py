"""[unstable] Session bookkeeping and providers in real agent processes on the SQLite store of ``run_stdio``:
titles and archive marks set in one process are what the next one lists, and a provider secret never
reaches the agent's stderr (logging at DEBUG, on stdio and served over WebSocket) or any message it writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from acp_agent import RequestError
from acp_agent.testing.client import Client, spawn_agent
from acp_agent.testing.schema import SchemaValidator
from tests.helpers.e2e import ROOT
from tests.helpers.remote import served_agent

pytestmark = pytest.mark.anyio

AGENT = [sys.executable, str(ROOT / "tests" / "helpers" / "bookkeeping_agent.py")]
SECRET = "sk-e2e-5ecret-never-echo-0451"


async def listed(client: Client, archived: str | None = None) -> list[dict[str, Any]]:
    params = {} if archived is None else {"archived": archived}
    page = await client.request("session/list", params)
    assert page.get("nextCursor") is None
    sessions: list[dict[str, Any]] = page["sessions"]
    return sessions


async def status(client: Client, sid: str) -> str:
    answer = await client.request("session/status", {"sessionId": sid})
    return str(answer["status"])


async def test_titles_and_archive_marks_survive_an_agent_restart(tmp_path: Path, anyio_backend: str,
                                                                 validator: SchemaValidator) -> None:
    cwd = str(tmp_path)
    env = {"ACP_AGENT_BACKEND": anyio_backend}
    async with spawn_agent(AGENT, env=env) as first:
        init = await first.initialize()
        assert {"title", "archive", "status"} <= init["capabilities"]["session"].keys()
        kept = await first.new_session(cwd)
        await first.prompt_and_wait(kept, "retitle The agent's title")
        answer = await first.request("session/set_title", {"sessionId": kept, "title": "  Kept title  "})
        assert answer == {"title": "Kept title"}
        hidden = await first.new_session(cwd)
        await first.prompt(hidden, "sleep 30")
        await first.wait_for(lambda: first.view(hidden).state == "running")
        await first.request("session/archive", {"sessionId": hidden})
        assert first.view(hidden).state == "idle"  # its work ended before the answer
        stored = await first.new_session(cwd)
        await first.close_session(stored)
        await first.request("session/set_title", {"sessionId": stored, "title": "Stored title"})  # only stored
        assert await status(first, kept) == "open" and await status(first, stored) == "saved"
        assert await status(first, hidden) == "saved"
    assert first.returncode == 0
    assert validator.check_transcript(first.transcript) == []

    async with spawn_agent(AGENT, env=env) as second:
        await second.initialize()
        assert sorted((s["sessionId"], s.get("title"), s["archived"]) for s in await listed(second)) == sorted([
            (kept, "Kept title", False), (stored, "Stored title", False)])
        assert [s["sessionId"] for s in await listed(second, "only")] == [hidden]
        assert await status(second, kept) == "saved"
        await second.resume_session(kept, cwd, replay=True)
        view = await second.prompt_and_wait(kept, "retitle Another agent title")
        assert list(view.messages().values())[-1] == "title=Kept title"  # the client's title still wins
        assert await status(second, kept) == "open"
        await second.request("session/unarchive", {"sessionId": hidden})
        assert sorted(s["sessionId"] for s in await listed(second)) == sorted([kept, hidden, stored])
        with pytest.raises(RequestError) as info:
            await second.request("session/status", {"sessionId": "sess_gone"})
        assert (info.value.code, info.value.data) == (-32002, {"sessionId": "sess_gone"})
    assert validator.check_transcript(second.transcript) == []


async def test_a_provider_secret_never_reaches_stderr_or_the_wire(anyio_backend: str, validator: SchemaValidator,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    env = {"ACP_AGENT_BACKEND": anyio_backend, "ACP_AGENT_LOG_LEVEL": "DEBUG"}
    headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET}
    async with spawn_agent(AGENT, env=env) as client:
        init = await client.initialize()
        assert init["capabilities"]["providers"] == {}
        good = {"providerId": "main", "apiType": "openai", "baseUrl": "https://gateway.example/v1",
                "headers": headers}
        assert await client.request("providers/set", good) == {}
        refused: list[tuple[dict[str, Any], int]] = [
            ({**good, "providerId": "nope"}, -32602),
            ({**good, "apiType": "vertex"}, -32602),
            ({**good, "baseUrl": f"https://key:{SECRET}@gateway.example"}, -32602),
            ({**good, "headers": {"Authorization": 1, "X-Api-Key": SECRET}}, -32602),
            ({**good, "baseUrl": "https://fail.example/v1"}, -32603),  # the hook raised: a traceback in the log
        ]
        for params, code in refused:
            with pytest.raises(RequestError) as info:
                await client.request("providers/set", params)
            assert info.value.code == code
        providers = (await client.request("providers/list", {}))["providers"]
        assert providers[0]["current"] == {"apiType": "openai", "baseUrl": "https://gateway.example/v1"}
        await client.request("providers/set", {**good, "providerId": "embeddings"})
        await client.request("providers/disable", {"providerId": "embeddings"})
        with pytest.raises(RequestError) as info:
            await client.request("providers/disable", {"providerId": "main"})
        assert info.value.code == -32602
    assert client.returncode == 0
    assert validator.check_transcript(client.transcript) == []
    sent_by_client = str([e.message for e in client.transcript if e.direction == "client->agent"])
    assert SECRET in sent_by_client  # the secret did go in ...
    assert SECRET not in str(client.sent_by_agent())  # ... and never came back out
    err = capsys.readouterr().err
    assert "provider main now speaks openai" in err  # DEBUG logging was on
    assert "the provider endpoint did not answer" in err and "Traceback" in err
    assert SECRET not in err


def test_a_provider_secret_never_reaches_the_log_of_a_served_agent(validator: SchemaValidator) -> None:
    # At DEBUG, uvicorn's WebSocket trace would log the upgrade's headers (the bearer token) and the start and end
    # of every frame (the end of a providers/set is its headers). Short secrets: the trace shows the last 25 chars.
    secret, token = "sk-w5-0451", "tok-w5-7788"
    good = {"providerId": "main", "apiType": "openai", "baseUrl": "https://gateway.example/v1",
            "headers": {"Authorization": f"Bearer {secret}"}}
    env = {"ACP_AGENT_LOG_LEVEL": "DEBUG", "ACP_AGENT_TOKEN": token}
    with served_agent(AGENT[1], "--store", "memory", env=env) as served:
        with connect(served.ws_url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            hello = {"protocolVersion": 2, "info": {"name": "t", "version": "0"}, "capabilities": {}}
            requests = [("initialize", hello),
                        ("providers/set", good), ("providers/set", {**good, "baseUrl": "https://fail.example/v1"}),
                        ("providers/list", {})]
            answers = []
            for number, (method, params) in enumerate(requests):
                ws.send(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}))
                answers.append(json.loads(ws.recv(timeout=10)))
        assert [("error" in answer) for answer in answers] == [False, False, True, False]
        assert answers[3]["result"]["providers"][0]["current"]["baseUrl"] == "https://gateway.example/v1"
        for (method, _), answer in zip(requests, answers, strict=True):
            assert validator.check(answer, method) == []
            assert secret not in json.dumps(answer)
    log = served.log()
    assert "provider main now speaks openai" in log  # DEBUG logging was on
    assert "0451" not in log and "7788" not in log
