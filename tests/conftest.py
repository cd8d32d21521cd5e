"""Shared test fixtures: every anyio test runs on both asyncio and trio.

Agent processes the tests start keep their session files (the SQLite store of ``run_stdio``)
in a temporary directory of their own test (``ACP_AGENT_DATA_DIR``), never in the user's data
directory, and a test never sees the sessions of another.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.helpers.postgres import SKIP_REASON, find_bindir, fresh_database, throwaway_server

_DATA_DIR = tempfile.mkdtemp(prefix="acp-agent-test-data-")
os.environ["ACP_AGENT_DATA_DIR"] = _DATA_DIR  # set before any agent process starts (inherited)


@pytest.fixture(scope="session", autouse=True)
def _run_data_dir() -> Iterator[str]:
    """The temporary data directory of this test run, removed at its end."""
    yield _DATA_DIR
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def agent_data_dir(_run_data_dir: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh ``ACP_AGENT_DATA_DIR`` for the agent processes this test starts."""
    path = tempfile.mkdtemp(dir=_run_data_dir)
    monkeypatch.setenv("ACP_AGENT_DATA_DIR", path)
    return path


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each ``@pytest.mark.anyio`` test once per backend."""
    return str(request.param)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL server for the whole run (started on first use); its conninfo."""
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[test]'")
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(SKIP_REASON)
    with throwaway_server(bindir) as conninfo:
        yield conninfo


_databases = itertools.count(1)


@pytest.fixture
def postgres_dsn(postgres_server: str) -> str:
    """The conninfo of a new, empty database on the throwaway server (one per test)."""
    return fresh_database(postgres_server, f"acp_test_{os.getpid()}_{next(_databases)}")
