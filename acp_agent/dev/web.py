"""The inspector's web app: the page, its files, and the WebSocket between the page and the agent.

Only this machine's browser gets in. Every request must name a loopback host (or the host the
inspector was bound to) in ``Host``, so a page of another site reaching it through DNS rebinding is
refused. The page and its files hold nothing secret; what matters goes over the WebSocket, which needs an
``Origin`` that is this very server and, as its first message, ``{"type": "auth", "token": ...}`` with the
per-run secret. The page reads that secret from the URL's fragment (``/#token=...``: never sent to any
server, dropped from the address bar at once) and keeps it in ``sessionStorage``, which belongs to this
origin, port included. No cookie carries it: cookies ignore ports, so one would reach every other server the
browser visits on this host.

Over the WebSocket the server sends ``{"type": "hello", "events": [...], "telemetry": bool}`` (every event so far, see
[`Inspection`][acp_agent.dev.link.Inspection]) and then batches ``{"type": "events", "events": [...]}``;
the page sends operations: ``request`` (``rid``, ``method``, ``params``: answered by ``result``),
``notify``, ``answer`` (a held question's ``id`` and ``result``), ``restart`` (with ``capabilities``).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .._util import environment
from ..errors import RequestError
from .link import Event, Inspection

__all__ = ["AUTH_TIMEOUT", "COOKIE", "STATIC_FILES", "build_app"]

logger = logging.getLogger(__name__)

COOKIE: Final = "acp_inspector"
"""The cookie earlier releases kept the per-run secret in; none is set now (see the module docstring)."""
AUTH_TIMEOUT: Final = 10.0
"""Seconds the page's WebSocket has to send its ``auth`` message."""

STATIC_FILES: Final = {
    "app.js": "text/javascript", "model.js": "text/javascript", "view.js": "text/javascript",
    "wirelog.js": "text/javascript", "forms.js": "text/javascript", "style.css": "text/css",
}
"""The page's files (in ``acp_agent/dev/static``), each with its media type."""

_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})
_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}


def _static(name: str) -> bytes:
    return files(__package__ or "acp_agent.dev").joinpath("static", name).read_bytes()


def build_app(inspection: Inspection, secret: str, *, bound_host: str = "127.0.0.1",
              on_admitted: Callable[[], None] | None = None) -> Starlette:
    """The ASGI app serving ``inspection`` to a page that knows ``secret`` (``on_admitted`` is called each time a
    page's WebSocket proves it)."""
    hosts = _LOOPBACK | {bound_host.strip("[]").lower()}

    def host_ok(headers: Any) -> bool:
        host = headers.get("host", "")
        return (urlsplit(f"//{host}").hostname or "") in hosts

    def refused(text: str, status: int = 403) -> Response:
        return PlainTextResponse(text, status, headers=_SECURITY_HEADERS)

    async def index(request: Request) -> Response:
        if not host_ok(request.headers):
            return refused("unknown Host", 421)
        return Response(_static("index.html"), media_type="text/html", headers=_SECURITY_HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if not host_ok(request.headers):
            return refused("unknown Host", 421)
        if name not in STATIC_FILES:
            return refused("not found", 404)
        return Response(_static(name), media_type=STATIC_FILES[name], headers=_SECURITY_HEADERS)

    async def proven(websocket: WebSocket) -> bool:
        """Whether the socket's first message carries the secret (within `AUTH_TIMEOUT`)."""
        text = ""
        with anyio.move_on_after(AUTH_TIMEOUT), contextlib.suppress(WebSocketDisconnect, RuntimeError):
            text = await websocket.receive_text()
        try:
            first = orjson.loads(text) if text else None
        except orjson.JSONDecodeError:
            first = None
        token = first.get("token") if isinstance(first, dict) and first.get("type") == "auth" else None
        return isinstance(token, str) and hmac.compare_digest(token.encode(), secret.encode())

    async def socket(websocket: WebSocket) -> None:
        headers = websocket.headers
        origin = headers.get("origin", "")
        if not host_ok(headers) or origin != f"http://{headers.get('host')}":
            await websocket.close(code=1008)
            return
        await websocket.accept()
        if not await proven(websocket):
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await websocket.send_text('{"type":"refused"}')
                await websocket.close(code=1008)
            return
        if on_admitted is not None:
            on_admitted()
        await _converse(inspection, websocket)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(inspection.serve)
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await inspection.stop()
                tg.cancel_scope.cancel()

    return Starlette(routes=[Route("/", index), Route("/static/{name}", static), WebSocketRoute("/ws", socket)],
                     lifespan=lifespan)


async def _converse(inspection: Inspection, websocket: WebSocket) -> None:
    """Send the page every event (then each new one); carry out the page's operations."""
    send_events, receive_events = anyio.create_memory_object_stream[Event](math.inf)
    inspection.listeners.add(send_events.send_nowait)
    outgoing_send, outgoing_receive = anyio.create_memory_object_stream[bytes](math.inf)

    async def pump() -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # the page went away
            async for message in outgoing_receive:
                await websocket.send_text(message.decode())

    async def forward() -> None:
        async for event in receive_events:
            batch = [event]
            while True:
                try:
                    batch.append(receive_events.receive_nowait())
                except anyio.WouldBlock:
                    break
            outgoing_send.send_nowait(orjson.dumps({"type": "events", "events": batch}, default=repr))

    async def carry_out(op: dict[str, Any]) -> None:
        rid = op.get("rid")
        try:
            answer = {"result": await _operate(inspection, op)}
        except RequestError as exc:
            answer = {"error": exc.to_dict()}
        except (LookupError, RuntimeError, ValueError, TypeError) as exc:
            answer = {"error": {"code": -32603, "message": str(exc)}}
        if rid is not None:
            outgoing_send.send_nowait(orjson.dumps({"type": "result", "rid": rid, **answer}, default=repr))

    try:
        hello = {"type": "hello", "replay": inspection.replay, "events": list(inspection.events),
                 "telemetry": environment.otel_configured()}  # the page then shows each turn's trace id
        outgoing_send.send_nowait(orjson.dumps(hello, default=repr))
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            tg.start_soon(forward)
            while True:
                try:
                    text = await websocket.receive_text()
                except (WebSocketDisconnect, RuntimeError):  # the page went away
                    break
                try:
                    op = orjson.loads(text)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(op, dict):
                    tg.start_soon(carry_out, op)
            tg.cancel_scope.cancel()
    finally:
        inspection.listeners.discard(send_events.send_nowait)


async def _operate(inspection: Inspection, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    if inspection.replay:
        raise LookupError("a replay has no agent: nothing can be sent")
    given = op.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    if kind == "request":
        return await inspection.request(str(op.get("method")), params)
    if kind == "notify":
        inspection.notify(str(op.get("method")), params)
        return None
    if kind == "answer":
        result = op.get("result")
        inspection.answer(op.get("id"), result if isinstance(result, dict) else {})
        return None
    if kind == "restart":
        capabilities = op.get("capabilities")
        inspection.restart(capabilities if isinstance(capabilities, dict) else None)
        return None
    raise ValueError(f"unknown operation {kind!r}")
