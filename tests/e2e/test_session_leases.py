"""Issue 40, findings 1 to 3, over real agent processes and a real PostgreSQL: which process owns a session is a
lease with an epoch in the store. Two stdio agents on one database never run one session; a frozen owner loses its
sessions once its lease expires and its late writes are refused; a killed owner's sessions are taken over at once;
a database restart under load keeps every lease, and no turn a client saw answered is lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_agent import RequestError
from acp_agent.store.keeper import ACTIVE_IN_ANOTHER_PROCESS
from acp_agent.testing import SchemaValidator
from acp_agent.testing.client import Client, spawn_agent
from tests.e2e.test_http_faults import ECHO_AGENT
from tests.e2e.test_http_reconnect import Client as HttpClient
from tests.e2e.test_http_reconnect import replayed_texts
from tests.e2e.test_store_e2e import STORE_AGENT, kill
from tests.helpers.postgres import SKIP_REASON, RestartableServer, find_bindir, fresh_database, restartable_server
from tests.helpers.remote import served_agent

TTL = float(os.environ.get("ACP_TEST_LEASE_TTL", "2"))  # the agents' ACP_AGENT_LEASE_TTL here (measure: 10)


def agent_env(dsn: str) -> dict[str, str]:
    return {"ACP_TEST_PG_DSN": dsn, "ACP_AGENT_LEASE_TTL": str(TTL)}


def pid_of(client: Client) -> int:
    assert client._agent_process is not None
    return client._agent_process.process.pid


async def refused(client: Client, sid: str, cwd: str) -> None:
    with pytest.raises(RequestError) as caught:
        await client.resume_session(sid, cwd)
    assert (caught.value.code, caught.value.message, caught.value.data) == (
        -32002, ACTIVE_IN_ANOTHER_PROCESS, {"sessionId": sid})


async def resume_once_free(client: Client, sid: str, cwd: str, limit: float) -> float:
    """Resume ``sid``, retrying while another process holds it; the seconds that took."""
    began = time.monotonic()
    with anyio.fail_after(limit):
        while True:
            try:
                await client.resume_session(sid, cwd)
                return time.monotonic() - began
            except RequestError as exc:
                assert exc.message == ACTIVE_IN_ANOTHER_PROCESS, exc
                await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_two_stdio_agents_on_one_postgres_store_never_run_one_session(tmp_path: Path, postgres_dsn: str) -> None:
    """Finding 2: both resumed one session and turns were lost; now the second is refused as on SQLite."""
    cwd, env = str(tmp_path), agent_env(postgres_dsn)
    async with spawn_agent(STORE_AGENT, env=env) as first, spawn_agent(STORE_AGENT, env=env) as second:
        await first.initialize()
        await second.initialize()
        sid = await first.new_session(cwd)
        await first.prompt_and_wait(sid, "one")
        await refused(second, sid, cwd)
        await first.prompt_and_wait(sid, "two")
        await first.close_session(sid)  # saved, the lease given back
        await second.resume_session(sid, cwd, replay=True)
        assert list(second.view(sid).messages().values())[-2:] == ["one", "two"]
        await refused(first, sid, cwd)


@pytest.mark.anyio
async def test_a_frozen_owner_loses_its_session_and_its_late_writes_are_refused(tmp_path: Path,
                                                                               postgres_dsn: str) -> None:
    """Finding 3: a replica frozen (SIGSTOP) held its sessions as long as it was frozen, and nothing stopped its
    writes after a takeover. Now its lease expires within TTL, and once it runs again its writes are refused."""
    cwd, env = str(tmp_path), agent_env(postgres_dsn)
    async with spawn_agent(STORE_AGENT, env=env, check=False) as frozen, spawn_agent(STORE_AGENT, env=env) as other:
        await frozen.initialize()
        await other.initialize()
        sid = await frozen.new_session(cwd)
        assert (await frozen.prompt_and_wait(sid, "one")).stop_reason == "end_turn"
        os.kill(pid_of(frozen), signal.SIGSTOP)
        try:
            took = await resume_once_free(other, sid, cwd, TTL * 3)
            print(f"takeover after SIGSTOP: {took:.2f} s (lease TTL {TTL} s)")
            assert took < TTL * 2
            assert (await other.prompt_and_wait(sid, "two")).stop_reason == "end_turn"
        finally:
            os.kill(pid_of(frozen), signal.SIGCONT)
        view = await frozen.prompt_and_wait(sid, "late")  # the stale owner: its save is refused
        assert view.updates[-1]["stopReason"] == "error", view.updates[-1]
        with anyio.fail_after(5):  # it gives the session up: the next request for it is refused
            while True:
                try:
                    await frozen.request("session/prompt", {"sessionId": sid,
                                                            "prompt": [{"type": "text", "text": "later"}]})
                except RequestError as exc:
                    assert (exc.code, exc.message) == (-32002, ACTIVE_IN_ANOTHER_PROCESS)
                    break
                await anyio.sleep(0.1)
        assert "taken over by another process" in frozen._agent_process.stderr_tail()  # type: ignore[union-attr]
        assert (await other.prompt_and_wait(sid, "three")).stop_reason == "end_turn"
        await other.close_session(sid)
    async with spawn_agent(STORE_AGENT, env=env) as last:
        await last.initialize()
        await last.resume_session(sid, cwd, replay=True)
        assert list(last.view(sid).messages().values()) == ["one", "two", "three"]


@pytest.mark.anyio
async def test_a_killed_owner_s_session_is_taken_over_at_once(tmp_path: Path, postgres_dsn: str) -> None:
    cwd, env = str(tmp_path), {**agent_env(postgres_dsn), "ACP_AGENT_LEASE_TTL": "30"}
    async with spawn_agent(STORE_AGENT, env=env, check=False) as doomed, spawn_agent(STORE_AGENT, env=env) as other:
        await doomed.initialize()
        await other.initialize()
        sid = await doomed.new_session(cwd)
        await doomed.prompt_and_wait(sid, "one")
        kill(doomed)
        took = await resume_once_free(other, sid, cwd, 10)  # well below the 30 s time to live
        print(f"takeover after SIGKILL: {took:.3f} s (lease TTL 30 s)")
        assert took < 5
        await other.resume_session(sid, cwd, replay=True)
        assert list(other.view(sid).messages().values())[-1] == "one"


# -- a database restart under load (finding 1) ------------------------------------------------------------


@pytest.fixture
def restartable() -> Iterator[RestartableServer]:
    pytest.importorskip("psycopg")
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(SKIP_REASON)
    with restartable_server(bindir) as server:
        yield server


def prompt(client: HttpClient, sid: str, text: str) -> dict[str, Any] | None:
    """Prompt and wait for the turn's end: its ``idle`` update, or ``None`` if the prompt was refused."""
    answer, _ = client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, sid)
    if "error" in answer:
        return None
    while True:
        update = client._next().get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            return dict(update)


def test_a_database_restart_keeps_every_lease_and_loses_no_acknowledged_turn(
    validator: SchemaValidator, restartable: RestartableServer
) -> None:
    """Finding 1: after a restart a replica retook its locks only when it next needed them, so another replica
    resumed a session still live on the first and acknowledged turns were lost. Now the leases are rows: the
    restart loses none, the other replica is refused, and every turn a client saw answered is in the store."""
    dsn = fresh_database(restartable.conninfo, "acp_restart")
    store = ("--store", f"postgres:{dsn}")
    env = {"ACP_AGENT_LEASE_TTL": "3"}
    with served_agent(ECHO_AGENT, *store, env=env) as one, served_agent(ECHO_AGENT, *store, env=env) as two:
        other = HttpClient(two, validator)  # replica two has served before the restart too
        warm = other.new_session()
        other.prompt_and_wait(warm, "served on replica two")
        clients = [HttpClient(one, validator) for _ in range(4)]
        sids = [client.new_session() for client in clients]
        acknowledged: dict[str, list[str]] = {sid: [] for sid in sids}
        stop = threading.Event()

        def load(client: HttpClient, sid: str) -> None:
            turn = 0
            while not stop.is_set():
                turn += 1
                text = f"{sid[-6:]} turn {turn}"
                try:
                    idle = prompt(client, sid, text)
                except Exception:
                    time.sleep(0.05)
                    continue
                if idle is not None and "error" not in idle and idle.get("stopReason") == "end_turn":
                    acknowledged[sid].append(text)

        threads = [threading.Thread(target=load, args=(c, s), daemon=True) for c, s in zip(clients, sids, strict=True)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        restartable.restart()  # every connection cut: advisory locks would be gone
        with served_agent(ECHO_AGENT, *store, env=env) as three:  # a replica started after the restart
            newcomer = HttpClient(three, validator)
            for sid in sids:  # still live on replica one: refused on replica three, and on replica two
                for asking in (newcomer, HttpClient(two, validator)):
                    for _ in range(3):  # a first call may meet a connection the restart cut (-32603): retried
                        refused, _ = asking.resume(sid)
                        assert "error" in refused, f"{sid}, live on replica one, was resumed on another replica"
                        if refused["error"]["code"] == -32002:
                            break
                    assert refused["error"]["code"] == -32002, refused
            newcomer.delete()
        other = HttpClient(two, validator)
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(15)
        print(f"acknowledged turns across the restart: {sum(map(len, acknowledged.values()))}")
        for client in clients:
            client.delete()  # the close saves each session and gives its lease back
        for sid in sids:
            deadline = time.monotonic() + 10
            while True:
                answer, before = other.resume(sid)
                if "result" in answer or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert "result" in answer, answer
            stored = replayed_texts(before)
            lost = [text for text in acknowledged[sid] if text not in stored]
            assert acknowledged[sid] and not lost, (sid, lost)
        other.delete()
