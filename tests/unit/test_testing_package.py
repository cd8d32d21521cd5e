"""``acp_agent.testing`` as a package: its public names, cheap imports, and its packaged schemas."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import acp_agent.testing
from acp_agent.testing import SchemaValidator, default_schema_path
from acp_agent.testing.schema import packaged_schema

PUBLIC_NAMES = [
    "RULES",
    "SHOULD_RULES",
    "AgentExitedError",
    "Client",
    "HostedMcpRequest",
    "McpErrorAnswer",
    "PermissionPolicy",
    "RemoteTransport",
    "RuleViolation",
    "SchemaValidator",
    "SessionView",
    "TranscriptEntry",
    "WireChecker",
    "allow_first",
    "byte_pipe",
    "check_transcript",
    "connect_agent",
    "connect_remote",
    "default_schema_path",
    "monitor_event_loop",
    "retry_prompt",
    "spawn_agent",
]

PACKAGE_DIR = Path(acp_agent.testing.__file__).resolve().parent
NPM_SCHEMAS = Path(__file__).resolve().parents[1] / "interop/node_modules/@agentclientprotocol/sdk/schema/v2"
GOOD_CHUNK = {
    "jsonrpc": "2.0",
    "method": "session/update",
    "params": {
        "sessionId": "sess_1",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "msg_1",
            "content": {"type": "text", "text": "hello"},
        },
    },
}


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (same environment) and return its stdout."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr}"
    return proc.stdout


def test_public_names_are_pinned() -> None:
    assert acp_agent.testing.__all__ == PUBLIC_NAMES
    for name in PUBLIC_NAMES:
        value = getattr(acp_agent.testing, name)
        if callable(value) and name not in ("PermissionPolicy", "RemoteTransport"):  # type aliases: no docstring
            assert (value.__doc__ or "").strip(), f"acp_agent.testing.{name} has no docstring"
    assert (acp_agent.testing.__doc__ or "").strip()


def test_star_import_gives_the_test_author_everything() -> None:
    namespace: dict[str, object] = {}
    exec("from acp_agent.testing import *", namespace)
    assert set(PUBLIC_NAMES) <= set(namespace)


def test_the_runtime_never_imports_the_testing_package() -> None:
    out = run_python(
        """
        import importlib, pkgutil, sys
        import acp_agent

        def import_all(package):
            for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                # demo.py and dev/ are commands (``python -m acp_agent.demo``, ``python -m acp_agent dev``)
                # built on the testing client.
                if info.name in ("acp_agent.testing", "acp_agent.demo", "acp_agent.dev"):
                    continue
                module = importlib.import_module(info.name)
                if info.ispkg:
                    import_all(module)

        import_all(acp_agent)
        loaded = sorted(m for m in sys.modules if m == "acp_agent.testing" or m.startswith("acp_agent.testing."))
        print(loaded)
        """
    )
    assert out.strip() == "[]"


def test_importing_the_testing_package_is_cheap() -> None:
    # jsonrpcserver (a runtime dependency) already imports jsonschema; forget it, then refuse any new import of
    # jsonschema, pytest or hypothesis while acp_agent.testing loads.
    out = run_python(
        """
        import sys
        import acp_agent

        HEAVY = ("jsonschema", "pytest", "_pytest", "hypothesis")
        for name in [m for m in sys.modules if m.split(".")[0] in HEAVY]:
            del sys.modules[name]
        attempts = []

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HEAVY:
                    attempts.append(name)
                    raise ImportError(f"{name} must not be imported by acp_agent.testing")
                return None

        sys.meta_path.insert(0, Refuse())
        from acp_agent.testing import Client, SchemaValidator, WireChecker, connect_agent, spawn_agent
        assert attempts == [], attempts
        sys.meta_path.pop(0)
        SchemaValidator()  # the first validator imports jsonschema
        print("jsonschema" in sys.modules)
        """
    )
    assert out.strip() == "True"


@pytest.mark.parametrize("unstable", [True, False], ids=["unstable", "stable"])
def test_schemas_ship_inside_the_package_and_validate(unstable: bool) -> None:
    path = default_schema_path(unstable=unstable)
    assert path.is_file()
    assert path.parent == PACKAGE_DIR / "schemas"  # found next to the code, never in a checkout
    validator = SchemaValidator(path)
    assert validator.check(GOOD_CHUNK) == []
    broken = {**GOOD_CHUNK, "params": {"sessionId": "sess_1", "update": {"sessionUpdate": "agent_message_chunk"}}}
    assert validator.check(broken) != []


def test_default_validator_uses_the_packaged_unstable_schema() -> None:
    validator = SchemaValidator()
    official = SchemaValidator(default_schema_path()).schema
    assert validator.schema != official  # the Preview shapes are merged in ...
    assert validator.schema == packaged_schema(unstable=True)
    assert official["$defs"].keys() <= validator.schema["$defs"].keys()  # ... on top of the official schema
    assert validator.check(GOOD_CHUNK) == []
    answer = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2, "agentCapabilities": {}}}
    assert any("'info' is a required property" in p for p in validator.check(answer, "initialize"))


@pytest.mark.parametrize(("packaged", "npm"), [
    ("acp-v2-schema.unstable.json", "schema.unstable.json"),
    ("acp-v2-schema.json", "schema.json"),
])
def test_packaged_schemas_equal_the_pinned_npm_package(packaged: str, npm: str) -> None:
    official = NPM_SCHEMAS / npm
    if not official.is_file():
        pytest.skip(f"{official} is missing (run `make test`, which runs `npm ci`)")
    assert (PACKAGE_DIR / "schemas" / packaged).read_bytes() == official.read_bytes()


@pytest.mark.anyio
async def test_kill_agent_ends_a_spawned_agent_like_a_crash(tmp_path: Path) -> None:
    import signal

    from acp_agent import Agent
    from acp_agent.testing import connect_agent, spawn_agent

    echo = Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"
    async with spawn_agent([sys.executable, str(echo)], env={"ACP_AGENT_DATA_DIR": str(tmp_path)},
                           check=False) as client:
        await client.initialize()
        pid = client.agent_pid
        assert isinstance(pid, int) and pid > 0
        assert await client.kill_agent() == -signal.SIGKILL
        assert client.returncode == -signal.SIGKILL
        assert await client.kill_agent() == -signal.SIGKILL  # already ended: the same status, nothing sent
    async with connect_agent(Agent()) as in_process:
        assert in_process.agent_pid is None
        with pytest.raises(RuntimeError, match="in this process"):
            await in_process.kill_agent()
