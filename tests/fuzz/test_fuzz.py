"""Fuzzing live agent processes over real pipes (hypothesis), with a JSON-RPC oracle per input.

One agent process per agent kind serves every generated input; after each input the harness checks
that every request got exactly one answer with its id and the precise error code (R8-R14), that
nothing but valid, schema-checked JSON-RPC reached stdout, and that a normal session still works.
A crash, hang or wrong answer is recorded with its input and the agent restarted (a restart is itself
a failure); the test fails at the end if anything was recorded.

``make test`` runs a small derandomized slice; ``make fuzz`` sets ``ACP_FUZZ_EXAMPLES`` (inputs in
total across the agents) and ``ACP_FUZZ_RANDOM=1`` and prints the counts.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from acp_agent._wire.connection import MAX_NESTING
from acp_agent._wire.framing import DEFAULT_MAX_MESSAGE_BYTES
from tests.helpers.fuzz_harness import (
    AGENTS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    RESULT,
    Case,
    Inputs,
    LiveAgent,
    SchemaStrategies,
    Stats,
    deep_value,
    dumps,
    paths,
    replace,
)

TOTAL = int(os.environ.get("ACP_FUZZ_EXAMPLES", "240"))
RANDOM = os.environ.get("ACP_FUZZ_RANDOM") == "1"
TOTALS = Stats()


def _report(label: str, stats: Stats) -> None:
    for name in ("inputs", "lines", "messages", "answers", "agent_lines", "crashes", "hangs", "wrong", "restarts"):
        setattr(TOTALS, name, getattr(TOTALS, name) + getattr(stats, name))
    if os.environ.get("ACP_FUZZ_STATS_DIR"):
        stats.save(os.environ["ACP_FUZZ_STATS_DIR"], label)
    sys.__stderr__.write("\n" + stats.summary(label) + "\n")
    sys.__stderr__.write(TOTALS.summary("total so far") + "\n")
    for failure in stats.failures[:20]:
        sys.__stderr__.write(f"  FAILURE {failure[:3000]}\n")


def _check(agent: LiveAgent, label: str) -> None:
    problems = agent.finish()
    agent.stats.failures += [f"exit: {p}" for p in problems]
    agent.stats.crashes += len(problems)
    _report(label, agent.stats)
    assert not agent.stats.failures, "\n\n".join(agent.stats.failures[:10])


@pytest.mark.parametrize("agent_name", sorted(AGENTS))
def test_fuzz_live_agent(agent_name: str) -> None:
    """Random inputs of every kind, one live agent, oracle and health probe after each."""
    agent = LiveAgent(agent_name, Stats())
    inputs = Inputs(agent)
    strategy = inputs.cases()
    examples = max(TOTAL // len(AGENTS), 1)

    @settings(max_examples=examples, derandomize=not RANDOM, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def fuzz(case: Case) -> None:
        agent.run_case(case)

    try:
        fuzz()
    finally:
        _check(agent, f"{agent_name}, {examples} generated")


def test_every_field_of_every_method_with_every_wrong_type() -> None:
    """Systematic: each location of each accepted method's params, set to each JSON type (and removed)."""
    agent = LiveAgent("forking", Stats())
    try:
        schema = SchemaStrategies(agent.schema.schema, agent.session_ids)
        methods = sorted(m for m in agent.oracle.requests | agent.oracle.notifications)
        assert {"initialize", "session/new", "session/prompt", "session/list", "session/resume", "session/fork",
                "session/close", "session/delete", "session/set_config_option", "session/cancel",
                "tool_call/cancel", "terminal/cancel", "$/cancel_request"} <= set(methods)
        samples = ["text", 7, 2.5, -3, 2**64, None, True, {"k": 1}, [1, "a"]]
        number = 0
        for method in methods:
            name = agent.oracle.request_defs.get(method) or agent.oracle.notification_defs.get(method)
            assert name is not None, method
            # The fullest params the schema describes, every optional field present (derived, not listed).
            full = _full_instance(schema, {"$ref": f"#/$defs/{name}"}, agent.session_ids[0])
            for index, path in enumerate([(), *paths(full)]):
                # ``make fuzz`` tries every type at every location; ``make test`` a rotating third of them.
                values = [*samples, "<delete>"] if RANDOM else [*samples, "<delete>"][index % 3 :: 3]
                for value in values:
                    if value == "<delete>" and not path:
                        continue
                    params = replace(full, path, None, delete=True) if value == "<delete>" else replace(
                        full, path, value)
                    number += 1
                    is_request = method in agent.oracle.requests
                    message = {"jsonrpc": "2.0", "method": method, "params": params}
                    if is_request:
                        message["id"] = f"wt-{number}"
                    agent.run_case(Case(dumps(message) + b"\n"), health=number % 10 == 0)
        assert agent.stats.inputs > (1000 if RANDOM else 300)
    finally:
        _check(agent, "every field x every type")


def _full_instance(schema: SchemaStrategies, node: dict[str, object], sid: str, name: str = "", budget: int = 4
                   ) -> object:
    """A deterministic instance of a schema node with every property present (first alternative)."""
    if name == "sessionId":
        return sid
    if name in ("cwd", "path"):
        return "/tmp"
    resolved = schema.resolve(node)
    if "const" in resolved:
        return resolved["const"]
    if "enum" in resolved:
        return resolved["enum"][0]
    alternatives = resolved.get("anyOf") or resolved.get("oneOf")
    if isinstance(alternatives, list):
        base = {k: v for k, v in resolved.items() if k not in ("anyOf", "oneOf")}
        return _full_instance(schema, {**base, "allOf": [alternatives[0]]}, sid, name, budget)
    kind = resolved.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if budget <= 0:
        return None
    if kind == "object" or "properties" in resolved:
        props = resolved.get("properties", {})
        assert isinstance(props, dict)
        return {k: _full_instance(schema, v, sid, k, budget - 1) for k, v in props.items()}
    if kind == "array":
        items = resolved.get("items", {})
        assert isinstance(items, dict)
        return [_full_instance(schema, items, sid, name, budget - 1)]
    return {"string": "s", "integer": 2, "number": 1.5, "boolean": False, "null": None}.get(str(kind), {})


def test_initialize_params_fuzzed_on_a_fresh_agent() -> None:
    """``initialize`` params of every shape, on an agent that has seen no other request.

    Any other request (even a ping) would make every later ``initialize`` a -32600, so here the
    answers themselves show the agent alive, and the full health probe runs once at the end.
    """
    agent = LiveAgent("echo", Stats(), initialize=False)
    try:
        strategy = Inputs(agent).params("initialize")

        @settings(max_examples=2000 if RANDOM else 40, derandomize=not RANDOM, database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(params=strategy)
        def fuzz(params: object) -> None:
            message = {"jsonrpc": "2.0", "id": agent.stats.inputs, "method": "initialize", "params": params}
            agent.run_case(Case(dumps(message) + b"\n"), health=False)

        # Regression found by fuzzing: lax validation read ``false`` as version 0 and answered -32022.
        regression = {"jsonrpc": "2.0", "id": "bool-version", "method": "initialize",
                      "params": {"protocolVersion": False, "info": {"name": "x", "version": "1"}}}
        assert agent.oracle.message(regression, set()).allowed == {INVALID_PARAMS}  # type: ignore[union-attr]
        agent.run_case(Case(dumps(regression) + b"\n"), health=False)
        fuzz()
        assert not agent.oracle.locked
        agent.health()
    finally:
        _check(agent, "initialize")


def test_deep_nesting_never_overflows() -> None:
    """100k levels in every position: parse error or -32602, never a crash; the agent keeps serving."""
    agent = LiveAgent("echo", Stats())
    try:
        sid = agent.session_ids[0]
        for levels in (MAX_NESTING - 2, MAX_NESTING + 1, 255, 1000, 1024, 1025, 100_000):
            for kind in ("array", "object"):
                value = deep_value(levels, kind)
                for data in (
                    value + b"\n",
                    b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"_meta":' + value + b"}}\n",
                    b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"' + sid.encode()
                    + b'","prompt":[{"type":"text","text":"x","_meta":' + value + b"}]}}\n",
                    b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","_meta":' + value + b"}}\n",
                    b'[{"jsonrpc":"2.0","id":3,"method":"session/list","params":{"_meta":' + value + b"}}]\n",
                ):
                    agent.run_case(Case(data))
    finally:
        _check(agent, "deep nesting")


def test_duplicate_ids_in_flight_and_stray_responses() -> None:
    """A second request with an id still in flight gets -32600 with that id; the first its own answer."""
    agent = LiveAgent("background", Stats())
    try:
        sid = agent.session_ids[0]
        busy = {"jsonrpc": "2.0", "id": "busy", "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "/run sleep 2"}]}}
        held = {"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "after"}]}}
        twin = {"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}}
        agent.write(dumps(busy) + b"\n")
        assert "result" in agent.wait_answer("busy")
        agent.write(dumps(held) + b"\n" + dumps(twin) + b"\n")
        # The held prompt (id 7) waits behind the running turn, so the twin is refused with its id.
        first = agent.wait_answer(7)
        assert first.get("error", {}).get("code") == INVALID_REQUEST, first
        second = agent.wait_answer(7)
        assert "result" in second, second
        # Three requests sharing one id in one write: answers come in any order (the harness pairs them
        # by matching, not greedily); the third is refused -32600 while the second is still in flight.
        same = [{"jsonrpc": "2.0", "id": "same", "method": "auth/login", "params": {}},
                {"jsonrpc": "2.0", "id": "same", "method": "session/resume", "params": {
                    "sessionId": agent.session_ids[1], "cwd": "/"}},
                {"jsonrpc": "2.0", "id": "same", "method": "auth/login", "params": {}}]
        agent.run_case(Case(b"".join(dumps(m) + b"\n" for m in same), len(same)))
        # Responses to ids the agent never used are ignored (logged) and nothing breaks.
        for stray in ({"jsonrpc": "2.0", "id": 12345, "result": {}}, {"jsonrpc": "2.0", "id": "x", "result": 1},
                      {"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}}):
            agent.run_case(Case(dumps(stray) + b"\n"))
        assert "unknown request id" in agent.stderr_tail(100_000)
    finally:
        _check(agent, "duplicate ids")


def test_oversized_line_gets_an_error_and_the_connection_continues() -> None:
    """A line over the 32 MiB limit: one -32600 (id null), then the next line is served normally."""
    agent = LiveAgent("echo", Stats())
    try:
        oversized = b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"x":"' + b"a" * (
            DEFAULT_MAX_MESSAGE_BYTES + 10) + b'"}}\n'
        agent.run_case(Case(oversized))
        agent.run_case(Case(dumps({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}) + b"\n"))
        answer = agent.call("session/list", {})
        assert "result" in answer
    finally:
        _check(agent, "oversized line")


def test_oracle_sanity() -> None:
    """The oracle itself: the codes the reference fixes for the classic malformed inputs."""
    agent = LiveAgent("echo", Stats())
    try:
        oracle = agent.oracle
        cases = {
            b"{": PARSE_ERROR, b"[]": INVALID_REQUEST, b"1": INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":null,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":1.5,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":1,"method":"nope"}': -32601,
            b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":5}}': INVALID_PARAMS,
            # Regressions found by fuzzing: ids beyond int64 were echoed altered (orjson turns them into
            # floats), lax coercion accepted a bool as a number, a mistyped config value got -32002,
            # by-position (array) params were bound as if empty.
            b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":1e300,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":-9223372036854775809,"method":"session/list"}': INVALID_REQUEST,
            b'{"jsonrpc":"2.0","id":3,"method":"session/set_config_option","params":{"sessionId":"nope",'
            b'"configId":"c","type":"id","value":7}}': INVALID_PARAMS,
            b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":[]}': INVALID_PARAMS,
            b'{"jsonrpc":"2.0","id":5,"method":"nope","params":[]}': -32601,
        }
        for line, code in cases.items():
            expects, _ = oracle.line(line, set(), set())
            assert [e.allowed for e in expects] == [frozenset({code})], line
            agent.run_case(Case(line + b"\n"))
        expects, _ = oracle.line(b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}', set(), set())
        assert RESULT in expects[0].allowed
        # Lax coercion (a bool read as a number) is refused: params are validated strictly.
        strict = {"jsonrpc": "2.0", "id": "strict", "method": "session/prompt", "params": {
            "sessionId": agent.session_ids[0],
            "prompt": [{"type": "text", "text": "x", "annotations": {"priority": True}}]}}
        agent.write(dumps(strict) + b"\n")
        assert agent.wait_answer("strict").get("error", {}).get("code") == INVALID_PARAMS
        for exact in (b"4.0", b"-9007199254740992", b"9223372036854775807"):  # still valid ids, echoed as sent
            line = b'{"jsonrpc":"2.0","id":' + exact + b',"method":"session/list","params":{}}'
            assert RESULT in oracle.line(line, set(), set())[0][0].allowed
            agent.run_case(Case(line + b"\n"))
    finally:
        _check(agent, "oracle sanity")
