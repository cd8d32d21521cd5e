"""pytest plugin (registered through the ``pytest11`` entry point as ``acp_agent``).

Fixtures, for tests marked ``@pytest.mark.anyio`` (anyio's own plugin runs them on the
backend in use):

``acp_connect``
    A function ``acp_connect(target, **client_options)`` returning an async context
    manager that yields a [`Client`][acp_agent.testing.Client]: ``target`` is an
    [`Agent`][acp_agent.Agent] instance (served in-process) or a command line (a list of
    strings, launched as a subprocess). The client is **not initialized**: the test sends
    ``await client.initialize(...)`` itself (so it can choose the version and capabilities,
    or test what happens before or without it). On exit the transcript is checked by the
    [`WireChecker`][acp_agent.testing.WireChecker] and against the official schema that
    ships with the package; any problem fails the test.

``acp_client``
    An **initialized** client for the target named by ``@pytest.mark.acp_agent(agent=target)``
    (an agent class or instance, or a command line as a list): ``initialize`` (protocol
    version 2, default client info) has already been answered, so the test starts with
    ``new_session``. Checked the same way. (Pass a class as ``agent=``: pytest treats a lone
    callable argument as the decorated object.)

A command-line agent gets its own data directory: ``ACP_AGENT_DATA_DIR`` is set to a fresh
directory under the test's ``tmp_path`` (``tmp_path / "acp-agent-data"``, shared by every agent
the test starts, so a restart test finds what the first run stored), never your real data
directory. Pass ``env={"ACP_AGENT_DATA_DIR": ...}`` in the marker or to ``acp_connect`` to choose
another.

A command-line agent that dies makes the waiting request fail with
[`AgentExitedError`][acp_agent.testing.AgentExitedError] (exit status and stderr tail).

A forgotten ``await``: in every test, a coroutine of acp-agent's (``session.say(...)``,
``tool.complete()``, ``client.prompt(...)``, ...) that is created and dropped without being awaited fails
the test, naming the file and line that called it (Python itself only warns, and the call did nothing).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest

from .._util import environment
from .._util.awaiting import NEVER_AWAITED, describe, sdk_call
from .checker import WireChecker
from .client import Client, connect_agent, spawn_agent
from .schema import SchemaValidator, default_schema_path

__all__ = ["acp_client", "acp_connect", "check_client"]

DATA_DIR: Final = environment.DATA_DIR.name
DATA_SUBDIR: Final = "acp-agent-data"
"""The directory under the test's ``tmp_path`` that command-line agents keep their sessions in."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``acp_agent`` marker."""
    config.addinivalue_line("markers", "acp_agent(target): the agent (instance, class or command) for acp_client")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Fail a test in which an acp-agent coroutine was never awaited, at the line that created it."""
    depth = sys.get_coroutine_origin_tracking_depth()
    sys.set_coroutine_origin_tracking_depth(max(depth, 1))  # where each coroutine was created
    try:
        with warnings.catch_warnings(record=True) as caught:  # the filters in force stay as they are
            warnings.filterwarnings("always", message=NEVER_AWAITED.pattern, category=RuntimeWarning)
            result = yield
    finally:
        sys.set_coroutine_origin_tracking_depth(depth)
    problems = []
    for warning in caught:
        qualname = sdk_call(str(warning.message)) if issubclass(warning.category, RuntimeWarning) else None
        if qualname is None:  # not ours: on to pytest's own record, as if this wrapper were not here
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                                   source=warning.source)
            continue
        origin = getattr(warning.source, "cr_origin", None)
        filename, lineno = (origin[0][0], origin[0][1]) if origin else (warning.filename, warning.lineno)
        problems.append(describe(qualname, filename, lineno))
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    return result


def check_client(client: Client, *, schema_path: str | None = None) -> list[str]:
    """Wire-rule violations and schema problems of everything ``client`` saw."""
    checker = WireChecker(raise_on_violation=False)
    checker.feed_transcript(client.transcript, end_at=client.closed_at)
    checker.finish()
    problems = [str(v) for v in checker.violations]
    path = schema_path or os.environ.get("ACP_SCHEMA")
    try:
        resolved = path or str(default_schema_path())
        if os.path.exists(resolved):
            problems += SchemaValidator(resolved).check_transcript(client.transcript)
    except ImportError:  # jsonschema is optional
        pass
    return problems


def _connect(target: Any, data_dir: Path, **options: Any) -> AbstractAsyncContextManager[Client]:
    options.setdefault("check", False)  # judged by check_client() instead, together with the schema
    if isinstance(target, type):
        target = target()
    if isinstance(target, (list, tuple)):
        if options.get("limits") is not None:
            raise TypeError("limits= applies to an in-process agent; a command's agent sets its own (run_stdio)")
        options.pop("limits", None)
        env = dict(options.pop("env", None) or {})
        if DATA_DIR not in env:  # the test's own directory, not the user's real sessions
            data_dir.mkdir(exist_ok=True)
            env[DATA_DIR] = str(data_dir)
        return spawn_agent([str(part) for part in target], env=env, **options)
    return connect_agent(target, **options)


@pytest.fixture
def acp_connect(tmp_path: Path) -> Callable[..., AbstractAsyncContextManager[Client]]:
    """Connect a checked but *uninitialized* client to an agent instance or command line.

    Use ``async with acp_connect(target, **client_options) as client:`` and call
    ``await client.initialize()`` first (``acp_client`` does that for you). See the module docs.
    """

    @asynccontextmanager
    async def connect(target: Any, **options: Any) -> AsyncIterator[Client]:
        async with _connect(target, tmp_path / DATA_SUBDIR, **options) as client:
            yield client
        problems = check_client(client)
        if problems:
            pytest.fail("the agent broke the protocol:\n" + "\n".join(problems), pytrace=False)

    return connect


@pytest.fixture
async def acp_client(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Client]:
    """An *initialized*, checked client for ``@pytest.mark.acp_agent(agent=target)``.

    ``initialize`` has already been answered (protocol version 2): start with ``new_session``.
    For an uninitialized client, or several connections, use ``acp_connect``.
    """
    marker = request.node.get_closest_marker("acp_agent")
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    target: Any = marker.args[0] if marker is not None and marker.args else options.pop("agent", None)
    if target is None:
        raise pytest.UsageError("acp_client needs @pytest.mark.acp_agent(agent=AgentClassOrInstance or [command])")
    async with _connect(target, tmp_path / DATA_SUBDIR, **options) as client:
        await client.initialize()
        yield client
    problems = check_client(client)
    if problems:
        pytest.fail("the agent broke the protocol:\n" + "\n".join(problems), pytrace=False)


def command(*parts: str | os.PathLike[str]) -> Sequence[str]:
    """A command line for ``acp_agent`` markers: ``command(sys.executable, "my_agent.py")``."""
    return [os.fspath(p) for p in parts]
