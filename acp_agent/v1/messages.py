"""The JSON-RPC envelopes the v1 bridge builds.

Pure functions: each returns a fresh dict and never touches the values it wraps, so what the
bridge sends keeps the exact key order of the shapes below.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["Message", "answer", "error", "key", "notify", "obj", "result"]

Message = dict[str, Any]
"""One decoded JSON-RPC message."""


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty dict (a lenient view of untrusted input)."""
    return value if isinstance(value, dict) else {}


def key(request_id: Any) -> str:
    """A request id as a dict key: its JSON text, so ``1`` and ``"1"`` stay apart."""
    return orjson.dumps(request_id).decode()


def result(request_id: Any, value: Any) -> Message:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str, data: Any = None) -> Message:
    """An error response; ``data`` is left out when ``None``."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def answer(request_id: Any, outcome: Message) -> Message:
    """A response from an outcome that is either ``{"error": ...}`` or the result itself."""
    if "error" in outcome:
        return {"jsonrpc": "2.0", "id": request_id, "error": outcome["error"]}
    return result(request_id, outcome)


def notify(session_id: str, update: Message) -> Message:
    """A ``session/update`` notification carrying ``update``."""
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}
