"""Issue 27, sections 3 and 4, over real agent processes: what a terminal inherits, the modes of the
store's files, a full disk, two processes on one SQLite file, and the processes of a killed agent."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from acp_agent.testing.client import Client, spawn_agent
from tests.e2e.test_store_e2e import STORE_AGENT

pytestmark = pytest.mark.anyio


async def terminal_output(client: Client, sid: str, command: str) -> bytes:
    """Run ``command`` as a listed terminal of ``sid`` and return its whole output once it exited."""
    view = await client.prompt_and_wait(sid, f"bgwait {command}")
    await client.wait_for(lambda: any("exitStatus" in t for t in view.terminals.values()))
    (terminal,) = view.terminals.values()
    return bytes(terminal["output"])


async def test_a_terminal_inherits_no_acp_agent_variable(tmp_path: Path) -> None:
    secrets = {
        "ACP_AGENT_TOKEN": "planted-token-0001",
        "ACP_AGENT_STORE": "postgres://alice:planted-password-0002@db/acp",
        "ACP_AGENT_SOMETHING_NEW": "planted-value-0003",
        "ACP_AGENT_WITHHOLD_ENV": "MY_API_KEY,CLOUD_*",
        "MY_API_KEY": "planted-key-0004",
        "CLOUD_SECRET": "planted-secret-0005",
        "HARMLESS_SETTING": "kept-0006",
    }
    async with spawn_agent(STORE_AGENT, env=secrets) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        output = await terminal_output(client, sid, "env")
    assert b"HARMLESS_SETTING=kept-0006" in output  # the environment is there: only the secrets are not
    assert b"PATH=" in output
    for name, value in secrets.items():
        if name != "HARMLESS_SETTING":
            assert value.encode() not in output, name
    assert b"ACP_AGENT_" not in output


async def test_store_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    command = ["sh", "-c", 'umask 022 && exec "$0" "$@"', *STORE_AGENT]  # the usual umask: 0644 files
    async with spawn_agent(command, env={"ACP_AGENT_DATA_DIR": str(data)}) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt_and_wait(sid, "hello")
        names = {p.name.removeprefix("store-test-agent.sqlite3") for p in data.iterdir()}
        assert {"", "-wal", "-shm"} <= names, names
        assert any(name.startswith(".journal-") for name in names), names
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir() if p.is_file()}
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert modes and set(modes.values()) == {0o600}, modes
