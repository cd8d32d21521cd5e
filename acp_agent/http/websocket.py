"""WebSocket: one full-duplex connection per socket, one JSON-RPC message per text frame.

The socket is accepted with ``Acp-Connection-Id`` (and the token subprotocol the client offered, if any); its first
message must be ``initialize`` (close 1002 otherwise), an over-long request id closes it 1008, an over-size frame
1009, a credential the token callable stops accepting 1008, the server's shutdown 1001. A socket refused before it
is accepted gets the HTTP status where the server can send one (the ``websocket.http.response`` extension), else
close 1008. The connection runs inside the socket's own request. When the client drops with a session active, the
connection waits ``turn_grace`` seconds (its turns running on) for a new socket that names it (``Acp-Connection-Id``
and ``Last-Event-ID``: how many frames the client got): that socket gets the frames it missed and carries on. A
reattaching socket that lands on a replica not holding its connection is proxied, frames both ways, to the peer the
connection id names (`acp_agent.http.peers`); the peer's refusal (its status and text) is the client's.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs

import anyio
import orjson
from anyio.abc import SocketStream
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from ..errors import RequestError
from .asgi import BATCH_ERROR, INVALID_REQUEST, PARSE_ERROR, Receive, Scope, Send, is_initialize, one_line
from .connections import RemoteConnection, credential_digest
from .host import Host
from .options import HttpOptions
from .peers import FORWARDED_HEADER, Peer
from .security import Admitted, Refusal, principal_of

__all__ = ["REATTACH_GONE", "WebSocketTransport", "deny_socket"]

logger = logging.getLogger(__name__)

REATTACH_GONE: Final = "The messages after this cursor are no longer kept; resume the sessions with session/resume"
"""Why a reattaching socket is refused ``409``."""

_REFUSAL_WAIT: Final = 5.0
"""Seconds a WebSocket refused for a limit waits for its first request, to answer it with the limit's error."""


@dataclass(slots=True)
class _SocketState:
    client_gone: bool = False
    close: tuple[int, str] | None = None
    initialize_seen: bool = False


class WebSocketTransport:
    """The WebSocket transport of one app."""

    def __init__(self, host: Host) -> None:
        self._host = host

    @property
    def _options(self) -> HttpOptions:
        return self._host.options

    async def handle(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str],
                     admitted: Admitted | Refusal) -> None:
        """Serve one WebSocket on the ACP path until either side closes it (refused unless ``admitted``)."""
        host = self._host
        if (await receive())["type"] != "websocket.connect":
            return
        if not isinstance(admitted, Admitted):
            await deny_socket(scope, send, admitted)
            return

        async def send_lines(lines: list[bytes]) -> None:
            for line in lines:
                await send({"type": "websocket.send", "text": line.decode("utf-8", "replace")})

        reattach = _reattach_request(scope, headers)
        if reattach is not None:
            await self._reattach(scope, receive, send, headers, admitted, reattach, send_lines)
            return
        if host.registry.full() or host.closing:
            await deny_socket(scope, send, (503, "Too many connections" if not host.closing else "Shutting down"))
            return

        agent = host.new_agent()
        refusal = host.principal_full(agent, admitted.principal)
        if refusal is not None:
            await _refuse_socket(receive, send, admitted.subprotocol, refusal)
            return
        connection = RemoteConnection(
            agent, "websocket", self._options, credential=credential_digest(admitted.token),
            send_lines=send_lines, store=await host.shared_store(agent), active=host.sessions,
            principal=admitted.principal, connection_id=host.peers.connection_id(str(uuid.uuid4())),
        )
        host.registry.add(connection)
        state = _SocketState()
        try:
            accept: dict[str, Any] = {"type": "websocket.accept", "headers": [
                (b"acp-connection-id", connection.id.encode()), *host.extra_headers]}
            if admitted.subprotocol is not None:
                accept["subprotocol"] = admitted.subprotocol
            await send(accept)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._run_socket, connection, send, state)
                if admitted.token is not None and not isinstance(self._options.token, str):
                    tg.start_soon(self._recheck, connection, state, admitted)
                await self._read_frames(connection, receive, state)
        finally:
            host.registry.forget(connection)
            connection.shutdown(discard=True)

    async def _reattach(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str],
                        admitted: Admitted, request: tuple[str, int],
                        send_lines: Callable[[list[bytes]], Awaitable[None]]) -> None:
        """A client back on a new socket for its detached connection: the frames it missed, then on as before
        (refused 404 for a connection not here or another client's, 409 when the frames it missed are gone)."""
        connection_id, cursor = request
        connection = self._host.registry.get(connection_id, "websocket")
        if connection is None and (peer := self._host.peers.owner(connection_id, headers)) is not None:
            await _relay(self._host, peer, scope, receive, send, headers)
            return
        if connection is None or connection.credential != credential_digest(admitted.token) or \
                connection.runtime.principal != admitted.principal or not connection.detached:
            await deny_socket(scope, send, (404, "Unknown Acp-Connection-Id"))
            return
        accept: dict[str, Any] = {"type": "websocket.accept", "headers": [
            (b"acp-connection-id", connection.id.encode()), *self._host.extra_headers]}
        if admitted.subprotocol is not None:
            accept["subprotocol"] = admitted.subprotocol
        if not connection.can_reattach(cursor):
            await deny_socket(scope, send, (409, REATTACH_GONE))
            return
        await send(accept)
        if not await connection.reattach(send_lines, cursor):
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": 1008, "reason": REATTACH_GONE[:120]})
            return
        state = _SocketState(initialize_seen=True)
        async with anyio.create_task_group() as tg:

            async def close_when_done() -> None:
                await connection.done.wait()
                if not state.client_gone:
                    code, reason = state.close or ((1001, "Server shutting down") if self._host.closing else (1000, ""))
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await send({"type": "websocket.close", "code": code, "reason": reason})
                tg.cancel_scope.cancel()

            tg.start_soon(close_when_done)
            await self._read_frames(connection, receive, state)
            if state.close is not None:
                await connection.done.wait()
            tg.cancel_scope.cancel()

    async def _recheck(self, connection: RemoteConnection, state: _SocketState, admitted: Admitted) -> None:
        """Ask the token callable again every ``recheck_interval`` seconds; close the socket once it refuses
        the credential or names another principal."""
        token = self._options.token
        assert token is not None and admitted.token is not None
        while True:
            with anyio.move_on_after(self._options.recheck_interval):
                await connection.done.wait()
                return
            try:
                principal = await principal_of(token, admitted.token)
            except Exception:
                logger.exception("acp: re-checking the credential of connection %s failed", connection.id)
                principal = None
            if principal != admitted.principal:
                _close_socket(connection, state, 1008, "Credential no longer accepted")
                return

    async def _run_socket(self, connection: RemoteConnection, send: Send, state: _SocketState) -> None:
        try:
            await connection.run()
        finally:
            self._host.registry.forget(connection)
            if not state.client_gone:
                if state.close is not None:
                    code, reason = state.close
                elif connection.close_reason is not None:
                    code, reason = 1008, connection.close_reason[:120]
                elif self._host.closing:
                    code, reason = 1001, "Server shutting down"
                else:
                    code, reason = 1000, ""
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": code, "reason": reason})

    async def _read_frames(self, connection: RemoteConnection, receive: Receive, state: _SocketState) -> None:
        limit = self._options.max_body_bytes
        while True:
            event = await receive()
            kind = event["type"]
            if kind == "websocket.disconnect":
                state.client_gone = True
                connection.client_lost()  # its turns may run on, for the client to reattach
                return
            if kind != "websocket.receive" or connection.closing:
                continue
            connection.touch()
            text = event.get("text")
            if text is None:
                logger.debug("acp: ignoring a binary WebSocket frame on connection %s", connection.id)
                continue
            data = text.encode("utf-8", "surrogatepass")
            if len(data) > limit:
                _close_socket(connection, state, 1009, f"Message exceeds {limit} bytes")
                return
            try:
                message = orjson.loads(data)
            except orjson.JSONDecodeError:
                connection.runtime.connection.send_raw(PARSE_ERROR + b"\n")
                continue
            if isinstance(message, list):
                connection.runtime.connection.send_raw(BATCH_ERROR + b"\n")
                continue
            if not isinstance(message, dict):
                connection.runtime.connection.send_raw(INVALID_REQUEST + b"\n")
                continue
            if not state.initialize_seen:
                if "method" not in message and ("id" in message or "result" in message or "error" in message):
                    continue  # a stray response before initialize: ignored
                if not is_initialize(message):
                    _close_socket(connection, state, 1002, "First message must be initialize")
                    return
                if message.get("id") is None:
                    _close_socket(connection, state, 1002, "Initialize request must include an ID")
                    return
                state.initialize_seen = True
            elif is_initialize(message):
                refusal = RequestError.invalid_request("Initialize not allowed on existing connection")
                connection.runtime.connection.send_raw(
                    orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": refusal.to_dict()}) + b"\n")
                continue
            if "method" in message and "id" in message:
                request_id = message["id"]
                if isinstance(request_id, str) and len(request_id) > self._options.max_id_length:
                    _close_socket(connection, state, 1008,
                                  f"Request ID exceeds max_id_length ({self._options.max_id_length})")
                    return
                await connection.wait_for_writer()
            try:
                await connection.inbox.put(one_line(data))
            except anyio.ClosedResourceError:
                continue


def _reattach_request(scope: Scope, headers: dict[str, str]) -> tuple[str, int] | None:
    """The connection id and cursor of a reattaching socket (``Acp-Connection-Id`` and ``Last-Event-ID`` headers,
    or ``connectionId`` and ``lastEventId`` in the query, for a browser), if it is one."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    connection_id = headers.get("acp-connection-id") or next(iter(query.get("connectionId", [])), None)
    cursor = headers.get("last-event-id") or next(iter(query.get("lastEventId", [])), None)
    if not connection_id or cursor is None or not cursor.isdigit() or len(cursor) > 20:
        return None
    return connection_id, int(cursor)


_NOT_RELAYED: Final = frozenset({
    "host", "upgrade", "connection", "content-length", "transfer-encoding", "sec-websocket-key",
    "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol", FORWARDED_HEADER})
_CLOSE_CODES: Final = range(1000, 5000)
_NO_CLOSE_FRAME: Final = frozenset({1005, 1006, 1015})


async def _relay(host: Host, peer: Peer, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
    """Proxy a reattaching socket to ``peer``, the replica holding its connection: the same handshake there
    (marked forwarded, so it goes no further), then frames both ways until either side closes. The peer's refusal
    is the client's; a peer that cannot be reached answers 404, as for an unknown connection."""
    stream = await host.peers.connect(peer)
    if stream is None:
        await deny_socket(scope, send, (404, "Unknown Acp-Connection-Id"))
        return
    async with stream:
        query = scope.get("query_string", b"").decode("latin-1")
        path = (scope.get("raw_path") or scope.get("path", "/").encode()).decode("latin-1")
        offered = [Subprotocol(name.strip()) for name in headers.get("sec-websocket-protocol", "").split(",")
                   if name.strip()]
        protocol = ClientProtocol(parse_uri(f"ws://{peer.host}:{peer.port}{path}{'?' + query if query else ''}"),
                                  subprotocols=offered or None, max_size=None)
        request = protocol.connect()
        if "host" in headers:
            del request.headers["Host"]
            request.headers["Host"] = headers["host"]
        for name, value in headers.items():
            if name not in _NOT_RELAYED:
                request.headers[name] = value
        request.headers[FORWARDED_HEADER] = host.peers.tag or "-"
        protocol.send_request(request)
        lock = anyio.Lock()
        try:
            await _flush(protocol, stream, lock)
            answer, early = await _handshake(protocol, stream)
        except (anyio.BrokenResourceError, OSError) as exc:
            logger.info("acp: relaying a WebSocket to replica %s failed: %s", peer.url, exc)
            answer, early = None, []
        if answer is None or protocol.handshake_exc is not None:
            refusal = (answer.status_code, bytes(answer.body or b"").decode("utf-8", "replace")) \
                if answer is not None and answer.status_code != 101 else (404, "Unknown Acp-Connection-Id")
            await deny_socket(scope, send, refusal)
            return
        accept: dict[str, Any] = {"type": "websocket.accept", "headers": [
            (b"acp-connection-id", answer.headers.get("acp-connection-id", "").encode("latin-1")),
            *host.extra_headers]}
        if answer.headers.get("sec-websocket-protocol"):
            accept["subprotocol"] = answer.headers["sec-websocket-protocol"]
        await send(accept)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_peer_to_client, protocol, stream, lock, send, early, tg.cancel_scope)
            await _client_to_peer(protocol, stream, lock, receive)
            tg.cancel_scope.cancel()


async def _flush(protocol: ClientProtocol, stream: SocketStream, lock: anyio.Lock) -> None:
    """Write what ``protocol`` has to send (an empty chunk: end the stream's writing side)."""
    async with lock:
        for chunk in protocol.data_to_send():
            if chunk:
                await stream.send(chunk)
            else:
                with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.send_eof()


async def _receive_into(protocol: ClientProtocol, stream: SocketStream) -> bool:
    """Feed ``protocol`` the next bytes from the peer; whether there were any (else: it is gone)."""
    try:
        data = await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        protocol.receive_eof()
        return False
    protocol.receive_data(data)
    return True


async def _handshake(protocol: ClientProtocol, stream: SocketStream) -> tuple[Response | None, list[Frame]]:
    """The peer's answer to the handshake, and any frames that came with it."""
    frames: list[Frame] = []
    answer: Response | None = None
    with anyio.move_on_after(10):
        while answer is None:
            more = await _receive_into(protocol, stream)
            for event in protocol.events_received():
                if isinstance(event, Response):
                    answer = event
                elif isinstance(event, Frame):
                    frames.append(event)
            if not more:
                break
    return answer, frames


async def _peer_to_client(protocol: ClientProtocol, stream: SocketStream, lock: anyio.Lock, send: Send,
                          early: list[Frame], scope: anyio.CancelScope) -> None:
    """Pass the peer's messages to the client (fragments joined) until it closes; then close the client alike."""
    parts: list[bytes] = []
    text = True
    events: list[Frame] = early
    try:
        while True:
            for frame in events:
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                    text, parts = frame.opcode is Opcode.TEXT, [bytes(frame.data)]
                elif frame.opcode is Opcode.CONT:
                    parts.append(bytes(frame.data))
                else:
                    continue
                if frame.fin:
                    data = b"".join(parts)
                    await send({"type": "websocket.send", **({"text": data.decode("utf-8", "replace")} if text
                                                              else {"bytes": data})})
            await _flush(protocol, stream, lock)  # pongs and the close's echo
            if protocol.close_rcvd is not None or protocol.state is State.CLOSED:
                break
            more = await _receive_into(protocol, stream)
            events = [event for event in protocol.events_received() if isinstance(event, Frame)]
            if not more and not events:
                break
    except (anyio.BrokenResourceError, OSError) as exc:
        logger.info("acp: a relayed WebSocket's replica link ended: %s", exc)
    close = protocol.close_rcvd
    code = close.code if close is not None and close.code not in _NO_CLOSE_FRAME else 1011
    reason = close.reason if close is not None else "Replica link lost"
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        await send({"type": "websocket.close", "code": code, "reason": reason})
    scope.cancel()


async def _client_to_peer(protocol: ClientProtocol, stream: SocketStream, lock: anyio.Lock,
                          receive: Receive) -> None:
    """Pass the client's messages to the peer until the client leaves; a client's close goes on to the peer (a
    dropped client drops the link: the peer's connection detaches, its turns running on)."""
    try:
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                code = event.get("code", 1006)
                if code in _CLOSE_CODES and code not in _NO_CLOSE_FRAME and protocol.state is State.OPEN:
                    protocol.send_close(code, event.get("reason") or "")
                    with anyio.move_on_after(2):
                        await _flush(protocol, stream, lock)
                return
            if event["type"] != "websocket.receive" or protocol.state is not State.OPEN:
                continue
            if event.get("text") is not None:
                protocol.send_text(event["text"].encode("utf-8", "surrogatepass"))
            elif event.get("bytes") is not None:
                protocol.send_binary(event["bytes"])
            await _flush(protocol, stream, lock)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        logger.info("acp: a relayed WebSocket's replica link ended: %s", exc)


def _close_socket(connection: RemoteConnection, state: _SocketState, code: int, reason: str) -> None:
    logger.warning("acp: closing WebSocket connection %s: %s", connection.id, reason)
    state.close = (code, reason)
    connection.shutdown(discard=True)


async def _refuse_socket(receive: Receive, send: Send, subprotocol: str | None, error: RequestError) -> None:
    """Accept a WebSocket only to answer its first request with ``error`` (a limit, as JSON-RPC), then close it
    (1008); a client that sends nothing within `_REFUSAL_WAIT` seconds gets the close alone."""
    accept: dict[str, Any] = {"type": "websocket.accept"}
    if subprotocol is not None:
        accept["subprotocol"] = subprotocol
    await send(accept)
    request_id: Any = None
    with anyio.move_on_after(_REFUSAL_WAIT):
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            if event["type"] == "websocket.receive" and event.get("text") is not None:
                with contextlib.suppress(orjson.JSONDecodeError):
                    message = orjson.loads(event["text"])
                    request_id = message.get("id") if isinstance(message, dict) else None
                break
    with contextlib.suppress(Exception):  # the client may be gone
        if request_id is not None:
            answer = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})
            await send({"type": "websocket.send", "text": answer.decode()})
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})


async def deny_socket(scope: Scope, send: Send, refusal: Refusal) -> None:
    """Refuse a WebSocket before accepting it: ``refusal``'s HTTP status and text where the server supports the
    ``websocket.http.response`` extension, else close 1008."""
    status, text = refusal
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": text.encode()})
    else:
        await send({"type": "websocket.close", "code": 1008})
