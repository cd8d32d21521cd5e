"""``serve``'s safe defaults (issue 39, finding 6): quotas on with flags to change them, a store of its own, and a
retention of stored sessions."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from acp_agent import Limits
from acp_agent.cli.parser import build_parser
from acp_agent.cli.serve import SERVE_QUOTAS, serve_limits
from acp_agent.http import asgi_app
from acp_agent.records import SessionRecord
from acp_agent.store import MemoryStore, SqliteStore
from tests.unit.test_http_app import EchoAgent
from tests.unit.test_http_reconnect import HttpClient, serving


def parsed(*flags: str) -> object:
    return build_parser().parse_args(["serve", "agent.py", *flags])


def test_quotas_are_on_by_default_for_several_users_and_flags_change_them() -> None:
    limits = serve_limits(EchoAgent, parsed("--tokens", "users.txt"))
    for field, (_, default) in SERVE_QUOTAS.items():
        assert getattr(limits, field) == default  # was: None, every quota off
    limits = serve_limits(EchoAgent, parsed("--tokens", "users.txt", "--max-user-stored-sessions", "5",
                                            "--max-user-connections", "0", "--max-history-bytes", "1000"))
    assert (limits.max_principal_stored_sessions, limits.max_principal_connections, limits.max_history_bytes) == (
        5, None, 1000)
    with pytest.raises(Exception, match="must be 0"):
        serve_limits(EchoAgent, parsed("--max-user-sessions", "-1"))


def test_one_user_is_bounded_by_the_server_and_the_agent_s_own_limits_are_kept() -> None:
    one_user = serve_limits(EchoAgent, parsed("--token", "secret"))
    assert one_user.max_principal_connections is None and one_user.max_history_bytes == 64 * 1024 * 1024

    class Strict(EchoAgent):
        limits = Limits(max_principal_sessions=3, max_sessions=7)

    limits = serve_limits(Strict, parsed("--tokens", "users.txt"))
    assert (limits.max_principal_sessions, limits.max_sessions, limits.max_principal_processes) == (3, 7, 16)


def test_a_served_agent_s_default_store_is_not_its_stdio_store(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("ACP_AGENT_DATA_DIR", str(tmp_path))
    store = asgi_app(EchoAgent).store
    assert isinstance(store, SqliteStore)
    assert store.path == tmp_path / "echo.served.sqlite3"  # was: echo.sqlite3, the editor's own sessions
    assert store.path != SqliteStore.for_agent(EchoAgent.name).path


@pytest.mark.anyio
async def test_stored_sessions_expire_after_the_retention() -> None:
    store = MemoryStore()
    old = SessionRecord("old-session", "/tmp")
    old.updated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3 * 86400))
    recent = SessionRecord("recent-session", "/tmp")
    await store.save(old)
    await store.save(recent)
    app = asgi_app(EchoAgent, store=store, keepalive=0.2, retention=2)
    async with serving(app) as tg:
        client = await HttpClient(app, tg).open()
        live = await client.new_session()
        with anyio.fail_after(5):
            while await store.load("old-session") is not None:
                await anyio.sleep(0.05)
        assert await store.load("recent-session") is not None and await store.load(live) is not None


def test_retention_must_be_positive() -> None:
    with pytest.raises(ValueError, match="retention"):
        asgi_app(EchoAgent, retention=0)
