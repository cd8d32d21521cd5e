"""A prompt retried with its ``idempotencyKey`` after the connection dropped (V2-PREVIEW P3/P4) gets the first
attempt's ``messageId`` and the work runs once: over WebSocket and Streamable HTTP (a real ``serve`` process,
``retry_prompt``) and over stdio (the agent process restarted, its keys in its SQLite store); asyncio and trio."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent.testing import Client, connect_remote, retry_prompt, spawn_agent
from tests.helpers.remote import ROOT, ServedAgent, served_agent

pytestmark = pytest.mark.anyio

AGENT = ROOT / "tests" / "helpers" / "preview_agent.py"


@pytest.fixture(scope="module")
def runs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("preview") / "runs.txt"


@pytest.fixture(scope="module")
def server(runs_file: Path) -> Iterator[ServedAgent]:
    with served_agent(AGENT, "--store", "memory", env={"ACP_TEST_RUNS": str(runs_file)}) as served:
        yield served


def runs_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().count(text) if path.exists() else 0


def user_messages(client: Client, sid: str) -> list[str]:
    return [m["params"]["update"]["messageId"] for m in client.sent_by_agent()
            if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
            and m["params"]["update"]["sessionUpdate"] == "user_message"]


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_retry_after_a_dropped_connection(server: ServedAgent, runs_file: Path, transport: Any,
                                                anyio_backend: str) -> None:
    text = f"sleep 0.5 {transport} {anyio_backend}"
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(connect_remote(server.url, transport=transport, check=False))
        await first.initialize()
        sid = await first.new_session("/tmp")
        # The prompt goes out and runs; the connection drops before its answer is read (a lost answer).
        async with anyio.create_task_group() as tg:

            async def send() -> None:
                with contextlib.suppress(Exception):  # answered, or cut off by the drop: the test never reads it
                    await first.prompt(sid, text, idempotency_key="submission-1")

            tg.start_soon(send)
            with anyio.fail_after(10):
                while runs_of(runs_file, text) == 0:
                    await anyio.sleep(0.02)
            await first.close()  # the connection drops while the turn runs
        second, message_id = await retry_prompt(
            stack, lambda: connect_remote(server.url, transport=transport), sid, text,
            idempotency_key="submission-1")
        assert user_messages(second, sid) == [message_id]  # the replayed history holds the one message
        assert runs_of(runs_file, text) == 1
        # Once more, on the live connection: still the same message, still no new work.
        assert await second.prompt(sid, text, idempotency_key="submission-1") == message_id
        await anyio.sleep(0.3)
        assert runs_of(runs_file, text) == 1
        assert user_messages(second, sid) == [message_id]


async def test_retry_after_the_stdio_agent_restarted(tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    command = [sys.executable, str(AGENT)]
    env = {"ACP_TEST_RUNS": str(runs)}
    async with spawn_agent(command, env=env) as client:
        await client.initialize()
        sid = await client.new_session("/tmp")
        message_id = await client.prompt(sid, "sleep 0.2", idempotency_key="k")
        await client.wait_idle(sid)
    async with spawn_agent(command, env=env) as client:  # a new process, the same SQLite store
        await client.initialize()
        await client.resume_session(sid, "/tmp", replay=True)
        assert await client.prompt(sid, "sleep 0.2", idempotency_key="k") == message_id
        await anyio.sleep(0.3)
        assert user_messages(client, sid) == [message_id]
    assert runs.read_text().splitlines() == ["sleep 0.2"]
