"""The ASGI vocabulary both transports speak: scope and callables, request headers, plain answers, one JSON line.

Nothing here knows a connection: `acp_agent.http.streamable` and `acp_agent.http.websocket` (and the routing in
`acp_agent.http.app`) answer with these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import orjson

from ..errors import RequestError

__all__ = [
    "BATCH_ERROR",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "Receive",
    "Scope",
    "Send",
    "is_initialize",
    "one_line",
    "request_headers",
    "send_empty",
    "send_json",
    "send_text",
]

Scope = MutableMapping[str, Any]
"""An ASGI connection scope."""
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
"""An ASGI ``receive`` callable."""
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
"""An ASGI ``send`` callable."""

BATCH_ERROR: Final = orjson.dumps({
    "jsonrpc": "2.0", "id": None,
    "error": RequestError.invalid_request("JSON-RPC batches are not supported").to_dict(),
})
"""The answer to a JSON-RPC batch (not supported)."""
PARSE_ERROR: Final = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": RequestError.parse_error().to_dict()})
"""The answer to a message that is not JSON."""
INVALID_REQUEST: Final = orjson.dumps(
    {"jsonrpc": "2.0", "id": None, "error": RequestError.invalid_request().to_dict()})
"""The answer to JSON that is not a JSON-RPC message (not an object)."""


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (latin-1, as HTTP/1.1 carries them)."""
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


def is_initialize(message: dict[str, Any]) -> bool:
    """Whether ``message`` is an ``initialize`` request."""
    return message.get("jsonrpc") == "2.0" and "id" in message and message.get("method") == "initialize"


def one_line(body: bytes) -> bytes:
    """``body`` (one JSON message) as one line for the runtime's inbox, ``\\n`` ended."""
    # Valid JSON holds raw line breaks only as whitespace between tokens, so blanking them keeps the message.
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    return body + b"\n"


async def send_text(send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer ``status`` with a plain-text body."""
    await send_json(send, status, text.encode(), [(b"content-type", b"text/plain; charset=utf-8"), *(headers or [])])


async def send_json(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer ``status`` with ``body`` (JSON unless ``headers`` name another content type)."""
    fields = headers or []
    if not any(name == b"content-type" for name, _ in fields):
        fields = [(b"content-type", b"application/json"), *fields]
    await send({"type": "http.response.start", "status": status,
                "headers": [*fields, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def send_empty(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    """Answer ``status`` with no body."""
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})
