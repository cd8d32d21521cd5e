"""The inspector's web app: the page, its files, and the WebSocket between the page and the agent.

Only this machine's browser gets in. Every request must name a loopback host (or the host the
inspector was bound to) in ``Host``, so a page of another site reaching it through DNS rebinding is
refused; the first visit carries the per-run secret in its URL (``/?token=...``), which becomes an
``HttpOnly``, ``SameSite=Strict`` cookie that every later request needs; the WebSocket also needs an
``Origin`` that is this very server.

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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from .._util import environment
from ..errors import RequestError
from .link import Event, Inspection

__all__ = ["COOKIE", "STATIC_FILES", "build_app"]

logger = logging.getLogger(__name__)

COOKIE: Final = "acp_inspector"
"""The cookie holding the per-run secret."""

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


def build_app(inspection: Inspection, secret: str, *, bound_host: str = "127.0.0.1") -> Starlette:
    """The ASGI app serving ``inspection`` to a browser that knows ``secret``."""
    hosts = _LOOPBACK | {bound_host.strip("[]").lower()}

    def host_ok(headers: Any) -> bool:
        host = headers.get("host", "")
        return (urlsplit(f"//{host}").hostname or "") in hosts

    def cookie_ok(cookies: dict[str, str]) -> bool:
        return hmac.compare_digest(cookies.get(COOKIE, ""), secret)

    def refused(text: str, status: int = 403) -> Response:
        return PlainTextResponse(text, status, headers=_SECURITY_HEADERS)

    async def index(request: Request) -> Response:
        if not host_ok(request.headers):
            return refused("unknown Host", 421)
        token = request.query_params.get("token")
        if token is not None:
            if not hmac.compare_digest(token, secret):
                return refused("wrong token: open the URL that `acp-agent dev` printed")
            response: Response = RedirectResponse("/", 303, headers=_SECURITY_HEADERS)
            response.set_cookie(COOKIE, secret, httponly=True, samesite="strict", path="/")
            return response
        if not cookie_ok(request.cookies):
            return refused("open the URL that `acp-agent dev` printed (it carries this run's token)")
        return Response(_static("index.html"), media_type="text/html", headers=_SECURITY_HEADERS)

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if not host_ok(request.headers) or not cookie_ok(request.cookies):
            return refused("forbidden")
        if name not in STATIC_FILES:
            return refused("not found", 404)
        return Response(_static(name), media_type=STATIC_FILES[name], headers=_SECURITY_HEADERS)

    async def socket(websocket: WebSocket) -> None:
        headers = websocket.headers
        origin = headers.get("origin", "")
        if not host_ok(headers) or not cookie_ok(websocket.cookies) or origin != f"http://{headers.get('host')}":
            await websocket.close(code=1008)
            return
        await websocket.accept()
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
