"""The jsonrpcserver adapter: its hot path and its pipeline answer a call alike."""

from __future__ import annotations

from typing import Any

import pytest

from acp_agent._wire import dispatch
from acp_agent._wire.connection import id_key
from acp_agent.errors import RequestError


def _raising(exc: Exception) -> dispatch.BoundMethod:
    def bound(context: Any, /, **params: Any) -> None:
        raise exc

    return bound


def _both(bound: dispatch.BoundMethod, params: dict[str, Any]) -> tuple[Any, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": params}
    return dispatch.call(bound, None, "m", params), dispatch.dispatch(message, {"m": bound}, None, "m")


@pytest.mark.parametrize(("exc", "expected"), [
    (RequestError(-32602, "Invalid params: x"), {"code": -32602, "message": "Invalid params: x"}),
    (RequestError(-32000, "nope", {"k": 1}), {"code": -32000, "message": "nope", "data": {"k": 1}}),
    (RequestError(-32602, "Invalid params", "why"),
     {"code": -32602, "message": "Invalid params: params do not fit the method"}),
    (RequestError(-32601, "other text"), RequestError.method_not_found("m").to_dict()),
    (ValueError("boom"), {"code": -32603, "message": "Internal error", "data": "boom"}),
])
def test_both_paths_give_the_same_error(exc: Exception, expected: dict[str, Any]) -> None:
    assert _both(_raising(exc), {"a": 1}) == (expected, expected)


def test_a_call_that_runs_has_no_error_and_sees_its_params() -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []

    def bound(context: Any, /, **params: Any) -> None:
        seen.append((context, params))

    assert _both(bound, {"call": 1, "x": "y"}) == (None, None)
    assert seen == [(None, {"call": 1, "x": "y"})] * 2


def test_the_pipeline_answers_unknown_methods_and_positional_params() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {}}
    assert dispatch.dispatch(message, {}, None, "nope") == RequestError.method_not_found("nope").to_dict()
    bound = _raising(AssertionError("not called"))
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]}
    assert dispatch.dispatch(message, {"m": bound}, None, "m") == {
        "code": -32602, "message": "Invalid params: params do not fit the method"}
    assert dispatch.dispatch({"jsonrpc": "2.0", "method": "nope", "params": {}}, {}, None, "nope") is None


def test_id_key_keeps_json_types_apart() -> None:
    assert id_key(1) != id_key("1")
    assert id_key(5) == id_key(5.0)
    assert id_key(True) is None and id_key(None) is None and id_key(1.5) is None
