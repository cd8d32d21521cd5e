"""``acp_agent.testing.connect_remote``: the checked client over WebSocket and Streamable HTTP,
against a real ``python -m acp_agent serve`` on loopback, on asyncio and trio."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from acp_agent.errors import RequestError
from acp_agent.testing import connect_remote
from tests.helpers.remote import ROOT, ServedAgent, served_agent

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server() -> Iterator[ServedAgent]:
    with served_agent(ROOT / "examples" / "background_agent.py", "--token", TOKEN, "--store", "memory") as served:
        yield served


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_chat_turn_and_background_work(server: ServedAgent, transport: str) -> None:
    async with connect_remote(server.url, transport=transport, token=TOKEN) as client:  # type: ignore[arg-type]
        answer = await client.initialize()
        assert answer["protocolVersion"] == 2
        session = await client.new_session()
        view = await client.prompt_and_wait(session, "hello there")
        assert "hello there" in "".join(view.messages().values())
        assert view.stop_reason == "end_turn"
        # A background terminal, listed then stopped with terminal/cancel.
        await client.prompt_and_wait(session, "/bg sleep 30")
        await client.wait_for(lambda: bool(view.cancellable_terminals()))
        (terminal,) = view.cancellable_terminals()
        await client.cancel_terminal(session, terminal)
        await client.wait_for(lambda: view.terminals[terminal].get("exitStatus") is not None and view.quiet)
        assert [s["sessionId"] for s in await client.list_sessions()].count(session) == 1
        await client.close_session(session)
    # connect_remote's exit judged the transcript with the WireChecker: no violation got through.
    assert client.checker is not None and not client.checker.violations


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_permission_asked_over_the_network(server: ServedAgent, transport: str) -> None:
    async with connect_remote(server.url, transport=transport, token=TOKEN,  # type: ignore[arg-type]
                              permission_policy=None) as client:
        await client.initialize()
        session = await client.new_session()
        await client.prompt(session, "/ask deploy")
        await client.wait_for(lambda: bool(client.pending_permissions))
        (key,) = client.pending_permissions
        params = client.pending_permissions[key]["params"]
        reject = next(o["optionId"] for o in params["options"] if o["kind"].startswith("reject"))
        client.answer_permission(key, reject)
        view = await client.wait_idle(session)
        assert view.stop_reason is not None


async def test_wrong_token_refuses_the_socket(server: ServedAgent) -> None:
    with pytest.raises(ConnectionError, match="401"):
        async with connect_remote(server.url, token="wrong"):
            pass


async def test_wrong_token_answers_initialize_with_the_status(server: ServedAgent) -> None:
    async with connect_remote(server.url, transport="http", token="wrong", check=False) as client:
        with pytest.raises(RequestError, match="HTTP 401"):
            await client.initialize()


async def test_unknown_transport() -> None:
    with pytest.raises(ValueError, match="unknown transport"):
        async with connect_remote("http://127.0.0.1:1/acp", transport="carrier-pigeon"):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_leaving_with_a_question_held_logs_no_stream_failure(
    server: ServedAgent, transport: str, caplog: pytest.LogCaptureFixture,
) -> None:
    # The client closes its side while it still holds a permission request: its late answer is dropped
    # quietly, not reported as "output stream failed".
    async with connect_remote(server.url, transport=transport, token=TOKEN,  # type: ignore[arg-type]
                              permission_policy=None, check=False) as client:
        await client.initialize()
        session = await client.new_session()
        await client.prompt(session, "/ask deploy")
        await client.wait_for(lambda: bool(client.pending_permissions))
    assert "output stream failed" not in caplog.text


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_a_connection_past_the_quota_gets_the_limit_error_on_both_transports(transport: str) -> None:
    # docs_src/host_limits.py: max_principal_connections=3. Over HTTP the 429's JSON-RPC error used to become a
    # local -32603 "HTTP 429: ..." with the limit only in its text.
    with served_agent(ROOT / "docs_src" / "host_limits.py", "--token", TOKEN, "--store", "memory") as served:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(3):
                client = await stack.enter_async_context(
                    connect_remote(served.url, transport=transport, token=TOKEN, check=False))  # type: ignore[arg-type]
                await client.initialize()
            extra = await stack.enter_async_context(
                connect_remote(served.url, transport=transport, token=TOKEN, check=False))  # type: ignore[arg-type]
            with pytest.raises(RequestError) as refused:
                await extra.initialize()
    assert refused.value.code == -32800
    assert refused.value.data == {"limit": "max_principal_connections", "value": 3}
