"""Running the official SDK clients' scripts (``tests/interop``) and judging what the agent sent them.

:func:`run_official_client` runs one of the TypeScript client scripts against an agent, then checks its
summary, validates every agent message against the official schema shipped in the pinned npm package
(:class:`AgentTrafficValidator`) and, on request, runs the ``WireChecker`` over both directions.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from acp_agent.testing.checker import WireChecker

ROOT = Path(__file__).resolve().parents[2]
INTEROP_DIR = ROOT / "tests" / "interop"
NODE_MODULES = INTEROP_DIR / "node_modules"
OFFICIAL_SCHEMA = NODE_MODULES / "@agentclientprotocol" / "sdk" / "schema" / "v2" / "schema.unstable.json"

Message = dict[str, Any]


def official_schema_path() -> Path:
    """The pinned official unstable v2 schema, from the npm package installed by `make test` (`npm ci`)."""
    if not OFFICIAL_SCHEMA.is_file():
        pytest.fail(f"{OFFICIAL_SCHEMA.relative_to(ROOT)} is missing; run `make test` (it runs `npm ci`)")
    return OFFICIAL_SCHEMA


@functools.cache
def load_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return schema


class AgentTrafficValidator:
    """Validates agent→client messages against the official schema.

    Two layers. First the schema's own top-level envelope for agent-sent messages: the `Agent` entry
    of the top-level `anyOf` (`ProtocolLevel` for `$/…` notifications, which either side may send).
    Those envelopes end in catch-all extension variants that accept any params/result, so second the
    method-specific `$defs`, found through their `x-method` / `x-side` tags: params of agent→client
    requests and notifications, and results paired with the client request they answer.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        defs = schema["$defs"]
        envelopes = {entry.get("title"): entry for entry in schema["anyOf"]}
        assert {"Agent", "Client", "ProtocolLevel"} <= envelopes.keys(), sorted(envelopes)
        dialect = schema["$schema"]
        self._envelopes = {
            title: self._validator(defs, envelopes[title], dialect) for title in ("Agent", "ProtocolLevel")
        }
        # (method, is_request) -> params validator, for what the agent may send
        self._agent_sent: dict[tuple[str, bool], Draft202012Validator] = {}
        self._results: dict[str, Draft202012Validator] = {}  # client request method -> result validator
        self._client_methods: set[str] = set()
        for name, definition in defs.items():
            method, side = definition.get("x-method"), definition.get("x-side")
            if method is None:
                continue
            ref = self._validator(defs, {"$ref": f"#/$defs/{name}"}, dialect)
            if side in ("client", "protocol") and name.endswith("Request"):
                self._agent_sent[method, True] = ref
            elif side in ("client", "protocol") and name.endswith("Notification"):
                self._agent_sent[method, False] = ref
            elif side == "agent" and name.endswith("Response"):
                self._results[method] = ref
            if side == "agent":
                self._client_methods.add(method)

    @staticmethod
    def _validator(defs: dict[str, Any], root: dict[str, Any], dialect: str) -> Draft202012Validator:
        return Draft202012Validator({"$schema": dialect, **root, "$defs": defs})

    @staticmethod
    def _check(validator: Draft202012Validator, instance: Any, what: str, message: Message) -> None:
        error = best_match(validator.iter_errors(instance))
        if error is not None:
            details = "\n".join(f"  error at {e.json_path}: {e.message}" for e in _explain(error)[:8])
            pytest.fail(
                f"agent message does not validate against {what} of the official schema:\n"
                f"  message: {json.dumps(message)}\n{details}",
                pytrace=False,
            )

    def validate(self, message: Message, client_requests: dict[Any, str]) -> None:
        method = message.get("method")
        envelope = "ProtocolLevel" if isinstance(method, str) and method.startswith("$/") else "Agent"
        self._check(self._envelopes[envelope], message, f"the {envelope} envelope", message)
        if isinstance(method, str):
            kind = (method, "id" in message)
            what = "request" if kind[1] else "notification"
            if kind in self._agent_sent:
                self._check(self._agent_sent[kind], message.get("params"), f"the params of {method}", message)
            elif not method.startswith("_") or method in self._client_methods:
                pytest.fail(
                    f"agent sent {method!r} as a {what}, which the schema does not define as an agent→client "
                    f"{what}: {json.dumps(message)}",
                    pytrace=False,
                )
        else:
            request_id = message.get("id")
            request_key = json.dumps(request_id)
            if request_key not in client_requests:
                pytest.fail(
                    f"agent answered a request the client never sent: {json.dumps(message)}", pytrace=False
                )
            answered = client_requests[request_key]
            if "result" in message and answered in self._results:
                self._check(self._results[answered], message["result"], f"the result of {answered}", message)


def _explain(error: ValidationError) -> list[ValidationError]:
    """The errors behind a failed `anyOf`, leaving out the variants whose discriminator did not match.

    Tagged unions fail as a whole ("is not valid under any of the given schemas"); the useful errors are those
    of the variant selected by its `const` tag (the `other` fallback excludes known tags with `not`).
    """
    if not error.context:
        return [error]
    variants: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        variants.setdefault(sub.relative_schema_path[0], []).append(sub)
    # A variant whose own tag does not match: `const` on a direct property, or the fallback's `not`.
    # (Context errors carry paths relative to the failed `anyOf`'s instance.)
    matching = [
        errors
        for errors in variants.values()
        if not any(
            (sub.validator == "const" and len(sub.path) == 1) or (sub.validator == "not" and not sub.path)
            for sub in errors
        )
    ]
    if not matching:
        return [error]
    return [leaf for errors in matching for sub in errors for leaf in _explain(sub)]


def read_jsonl(path: Path) -> list[Message]:
    messages = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{path.name} line {number} is not JSON ({exc}): {line!r}", pytrace=False)
        assert isinstance(message, dict), f"{path.name} line {number} is not a JSON object: {line!r}"
        messages.append(message)
    return messages


@dataclass
class InteropRun:
    """What one official-client script run produced, already checked (exit 0, schema, wire rules)."""

    summary: dict[str, Any]
    agent_messages: list[Message]
    client_messages: list[Message]
    stderr: str = ""
    """What the script and the agent it spawned wrote to stderr."""


def run_official_client(
    tmp_path: Path, script: Path, agent: Path, *, wire: bool = False, backend: str | None = None,
    remote: tuple[str, str] | None = None, env: dict[str, str] | None = None,
) -> InteropRun:
    """Run a ``tests/interop`` script against ``agent``; validate every agent message against the official
    schema and, with ``wire``, judge the ordered log of both directions with the ``WireChecker``.
    ``backend`` (``"asyncio"`` / ``"trio"``) is the agent process's event loop (``ACP_AGENT_BACKEND``);
    ``remote`` is ``(url, "http" | "ws")``: the script connects to an agent served there instead of spawning it.
    """
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    if not NODE_MODULES.is_dir():
        pytest.skip("tests/interop/node_modules is missing; run `make test` (it runs `npm ci`)")
    validator = AgentTrafficValidator(load_schema(official_schema_path()))
    agent_transcript, client_transcript, wire_log = (tmp_path / f"{n}.jsonl" for n in ("agent", "client", "wire"))
    env = {
        **os.environ,
        **(env or {}),
        "ACP_INTEROP_TRANSCRIPT": str(agent_transcript),
        "ACP_INTEROP_CLIENT_TRANSCRIPT": str(client_transcript),
    }
    if wire:
        env["ACP_INTEROP_WIRE"] = str(wire_log)
    if backend is not None:
        env["ACP_AGENT_BACKEND"] = backend
    if remote is not None:
        env["ACP_INTEROP_URL"], env["ACP_INTEROP_TRANSPORT"] = remote
    proc = subprocess.run(
        [node, str(script), sys.executable, str(agent)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (
        f"{script.name} exited with {proc.returncode}\n--- stderr ---\n{proc.stderr}\n--- stdout ---\n{proc.stdout}"
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line JSON summary on stdout, got:\n{proc.stdout}"
    summary = json.loads(lines[0])
    assert summary["ok"] is True

    # Schema pass over the recorded traffic, then the wire rules over both directions in order.
    agent_messages = read_jsonl(agent_transcript)
    client_messages = read_jsonl(client_transcript)
    assert len(agent_messages) == summary["messages"]["agent"]
    assert len(client_messages) == summary["messages"]["client"]
    client_requests = {
        json.dumps(message["id"]): message["method"]
        for message in client_messages
        if "method" in message and "id" in message
    }
    for message in agent_messages:
        validator.validate(message, client_requests)
    if wire:
        entries = read_jsonl(wire_log)
        assert len(entries) == len(agent_messages) + len(client_messages)
        checker = WireChecker(raise_on_violation=False)
        for entry in entries:
            checker.feed("agent->client" if entry["from"] == "agent" else "client->agent", entry["message"])
        checker.finish()
        violations = [str(v) for v in checker.violations]
        assert not violations, "\n".join(violations)
    return InteropRun(summary, agent_messages, client_messages, proc.stderr)
