"""Version negotiation: what a client's line says about the protocol it wants.

Functions over raw lines, used by the streams while they still watch (before the mode is
chosen). `probe` and `old_initialize` never raise on the client's input: a line that
is not JSON, not an ``initialize`` request or carries no integer version decides nothing.
`list_version_1` reads the runtime's own output (whole JSON lines) and changes nothing but
the ``supported`` list of the answers it was asked to amend.
"""

from __future__ import annotations

from typing import Final, Literal

import orjson

from .messages import key, obj

__all__ = ["V1_PROTOCOL_VERSION", "Mode", "list_version_1", "old_initialize", "probe"]

V1_PROTOCOL_VERSION: Final = 1
"""The protocol version a client asks for to be served in v1 shapes."""

Mode = Literal["probe", "v1", "v2"]
"""A connection still watching for ``initialize``, translated to v1, or passed through as v2."""


def probe(line: bytes) -> Mode:
    """The mode a line decides: ``v1``, ``v2`` (an initialize of 2 or more), or still ``probe``."""
    if b'"initialize"' not in line:
        return "probe"
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "probe"
    if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
        return "probe"
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        return "probe"
    if version == V1_PROTOCOL_VERSION:
        return "v1"
    return "v2" if version >= 2 else "probe"


def old_initialize(line: bytes) -> str | None:
    """The id (as JSON) of an ``initialize`` request for a version below 1, else ``None``."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
        return None
    version = obj(message.get("params")).get("protocolVersion")
    if isinstance(version, int) and not isinstance(version, bool) and version < V1_PROTOCOL_VERSION:
        return key(message["id"])
    return None


def list_version_1(item: bytes, refused: set[str]) -> bytes:
    """Add 1 to ``supported`` in the runtime's -32022 answers to those requests: the bridge serves it.

    ``refused`` holds the ids `old_initialize` found; an id is dropped once its answer was amended.
    """
    lines = item.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if b"-32022" not in line:
            continue
        message = orjson.loads(line)
        request = key(message.get("id")) if isinstance(message, dict) else None
        data = obj(obj(message.get("error")).get("data")) if request in refused else {}
        supported = data.get("supported")
        if isinstance(supported, list) and V1_PROTOCOL_VERSION not in supported:
            refused.discard(str(request))
            data["supported"] = [V1_PROTOCOL_VERSION, *supported]
            lines[index] = orjson.dumps(message) + b"\n"
    return b"".join(lines)
