"""Streamable HTTP: one client message per ``POST``, the agent's messages on ``GET`` event streams.

``POST`` carries one client message (``initialize`` is answered ``200`` with the answer and an
``Acp-Connection-Id``; everything else ``202``, its answer coming on an event stream); ``GET``
with ``Accept: text/event-stream`` opens the connection's event stream, or a session's with
``Acp-Session-Id``; ``DELETE`` ends the connection. Statuses and headers follow the TypeScript SDK's server
(the reference): 400 for a missing or mismatched header or an over-long id, 404 for an unknown connection,
406, 409 for a stream that already has a reader, 413, 415, and 401/403 for the security checks.

A connection runs in the app's task group (`Host.task_group`), so it outlives the request that opened it. Every
event has an ``id:`` (the stream's cursor): a ``GET`` with ``Last-Event-ID`` takes the stream over and gets what
followed, or ``409`` when that is no longer kept. A request for a connection another replica holds is forwarded
there (`acp_agent.http.peers`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

import anyio
import orjson

from .._wire.connection import id_key
from ..schema.session_reach import SESSION_METHODS
from .asgi import BATCH_ERROR, Receive, Send, is_initialize, one_line, send_empty, send_json, send_text
from .connections import ConnectionLimitError, RemoteConnection, credential_digest
from .host import Host
from .options import HttpOptions
from .security import Admitted, Refusal, principal_of

__all__ = ["STREAM_GONE", "StreamableHttp"]

logger = logging.getLogger(__name__)

STREAM_GONE: Final = "Last-Event-ID is no longer replayable; resume the sessions with session/resume"
"""The ``409`` text of a stream resumed from a cursor older than what is kept (``HttpOptions.replay_messages``)."""

_EVENT_STREAM: Final = "text/event-stream"
_JSON: Final = "application/json"


class _Disconnected(Exception):
    """The client went away while its request was read."""


class StreamableHttp:
    """The Streamable HTTP transport of one app (its ``POST``, ``GET`` and ``DELETE`` requests)."""

    def __init__(self, host: Host) -> None:
        self._host = host

    @property
    def _options(self) -> HttpOptions:
        return self._host.options

    async def handle(self, receive: Receive, send: Send, method: str, headers: dict[str, str],
                     admitted: Admitted | Refusal, target: str = "/") -> None:
        """Answer one HTTP request on the ACP path (``method`` its HTTP method, ``target`` its path and query, for
        a request forwarded to the replica holding its connection), admitted or refused by the security checks."""
        if not isinstance(admitted, Admitted):
            status, text = admitted
            await send_text(send, status, text, [(b"www-authenticate", b"Bearer")] if status == 401 else [])
            return
        try:
            if method == "POST":
                await self._post(receive, send, headers, admitted, target)
            elif method == "GET":
                await self._get(receive, send, headers, admitted, target)
            elif method == "DELETE":
                await self._delete(receive, send, headers, admitted, target)
            else:
                await send_text(send, 405, "Method Not Allowed", [(b"allow", b"GET, POST, DELETE")])
        except _Disconnected:
            pass

    def _lookup(self, connection_id: str, admitted: Admitted) -> RemoteConnection | None:
        """The connection ``connection_id`` names, if it was opened with the credential this request presents
        (whichever header carries it) and that credential still stands for the connection's principal."""
        connection = self._host.registry.get(connection_id)
        if connection is None:
            return None
        if self._options.token is None:
            return connection
        if connection.credential != credential_digest(admitted.token):
            return None  # another client's connection: as if it did not exist
        if connection.runtime.principal != admitted.principal:
            self._end(connection, "its credential now stands for another principal")
            return None
        return connection

    def _end(self, connection: RemoteConnection, why: str) -> None:
        """End ``connection`` because its credential no longer holds (as a WebSocket is closed 1008)."""
        logger.info("acp: closing connection %s: %s", connection.id, why)
        self._host.registry.remove(connection.id)
        connection.shutdown(discard=True)

    async def _recheck(self, connection: RemoteConnection, admitted: Admitted, stream: anyio.CancelScope) -> None:
        """While an event stream is open, ask the token callable again every ``recheck_interval`` seconds; end the
        connection (and the stream) once it refuses the credential or names another principal."""
        token = self._options.token
        assert token is not None and admitted.token is not None
        while True:
            await anyio.sleep(self._options.recheck_interval)
            try:
                principal = await principal_of(token, admitted.token)
            except Exception:
                logger.exception("acp: re-checking the credential of connection %s failed", connection.id)
                principal = None
            if principal != connection.runtime.principal:
                self._end(connection, "its credential is no longer accepted for its principal")
                stream.cancel()
                return

    async def _run_connection(self, connection: RemoteConnection) -> None:
        try:
            await connection.run()
        finally:
            self._host.registry.forget(connection)

    # -- POST ---------------------------------------------------------------------------------

    async def _elsewhere(self, receive: Receive, send: Send, method: str, target: str, headers: dict[str, str],
                         body: bytes = b"") -> bool:
        """Forward a request for a connection another replica holds there; whether it was (else: unknown)."""
        peer = self._host.peers.owner(headers.get("acp-connection-id", ""), headers)
        if peer is None:
            return False
        await self._host.peers.forward(peer, method, target, headers, body, receive, send)
        return True

    async def _post(self, receive: Receive, send: Send, headers: dict[str, str], admitted: Admitted,
                    target: str) -> None:
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != _JSON:
            await send_text(send, 415, "Unsupported Media Type")
            return
        body = await _read_body(receive, headers, self._options.max_body_bytes)
        if body is None:
            await send_text(send, 413, f"Request body exceeds {self._options.max_body_bytes} bytes")
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            await send_text(send, 400, "Invalid JSON")
            return
        if isinstance(message, list):
            await send_json(send, 400, BATCH_ERROR)
            return
        if not isinstance(message, dict):
            await send_text(send, 400, "Invalid JSON-RPC message")
            return
        line = one_line(body)
        connection_id = headers.get("acp-connection-id")
        if is_initialize(message):
            if connection_id:
                await send_text(send, 400, "Initialize not allowed on existing connection")
            else:
                await self._initialize(receive, send, message, line, admitted)
            return
        if not connection_id:
            await send_text(send, 400, "Missing Acp-Connection-Id")
            return
        connection = self._lookup(connection_id, admitted)
        if connection is None:
            if not await self._elsewhere(receive, send, "POST", target, headers, body):
                await send_text(send, 404, "Unknown Acp-Connection-Id")
            return
        try:
            problem = await self._forward(connection, message, headers, line)
        except ConnectionLimitError as exc:
            problem = str(exc)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send_text(send, 404, "Unknown Acp-Connection-Id")
            return
        if problem is not None:
            await send_text(send, 400, problem)
        else:
            await send_empty(send, 202, self._host.extra_headers)

    async def _forward(
        self, connection: RemoteConnection, message: dict[str, Any], headers: dict[str, str], line: bytes
    ) -> str | None:
        """Check the headers against the message and hand it to the runtime; the 400 text if refused."""
        header_session = headers.get("acp-session-id")
        method = message.get("method")
        if method is None:
            # An answer to a request of the agent: a session header, if sent, must name that request's session.
            key = id_key(message.get("id"))
            route = connection.client_response_routes.get(key) if key is not None else None
            if header_session and route is not None and header_session != route:
                return "Mismatched Acp-Session-Id"
            if key is not None:
                connection.client_response_routes.pop(key, None)
        else:
            params = message.get("params")
            params_session = params.get("sessionId") if isinstance(params, dict) else None
            if not isinstance(params_session, str):
                params_session = None
            if (method in SESSION_METHODS or params_session is not None) and not header_session:
                return "Missing Acp-Session-Id"
            if header_session and params_session is not None and header_session != params_session:
                return "Mismatched Acp-Session-Id"
            if header_session:
                connection.check_id("Session ID", header_session)
            if "id" in message:
                request_id = message["id"]
                if isinstance(request_id, str):
                    connection.check_id("Request ID", request_id)
                # An answer adds output: wait until the clients have read enough to make room.
                await connection.wait_for_room()
                await connection.wait_for_writer()
        connection.touch()
        if connection.closing:
            raise anyio.ClosedResourceError
        await connection.inbox.put(line)
        return None

    async def _initialize(
        self, receive: Receive, send: Send, message: dict[str, Any], line: bytes, admitted: Admitted,
    ) -> None:
        host = self._host
        principal = admitted.principal
        if message.get("id") is None:
            await send_text(send, 400, "Initialize request must include an ID")
            return
        if host.task_group is None or host.closing:
            logger.error("acp: an HTTP initialize arrived while the app's lifespan is not running; mount the app "
                         "with lifespan=app.lifespan (or run it on a server with lifespan support)")
            await send_text(send, 503, "Service Unavailable")
            return
        if host.registry.full():
            await send_text(send, 503, "Too many connections")
            return
        agent = host.new_agent()
        refusal = host.principal_full(agent, principal)
        if refusal is not None:
            await send_json(send, 429, orjson.dumps({"jsonrpc": "2.0", "id": message["id"],
                                                     "error": refusal.to_dict()}))
            return
        connection = RemoteConnection(
            agent, "http", self._options, credential=credential_digest(admitted.token),
            store=await host.shared_store(agent), active=host.sessions, principal=principal,
            connection_id=host.peers.connection_id(str(uuid.uuid4())),
        )
        host.registry.add(connection)
        task_group = host.task_group
        assert task_group is not None
        task_group.start_soon(self._run_connection, connection)
        await connection.inbox.put(line)
        answer: bytes | None = None
        disconnected = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal disconnected
                while (await receive())["type"] != "http.disconnect":
                    pass
                disconnected = True
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            answer = await connection.wait_initialized()
            tg.cancel_scope.cancel()
        if disconnected or answer is None or not _answers(answer, message["id"]):
            host.registry.remove(connection.id)
            connection.shutdown(discard=True)
            if disconnected:
                return
            failure = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "Initialize failed"}}
            await send_json(send, 500, orjson.dumps(failure))
            return
        connection.touch()
        await send_json(send, 200, answer, [(b"acp-connection-id", connection.id.encode()), *host.extra_headers])

    # -- GET: event streams -------------------------------------------------------------------

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str], admitted: Admitted,
                   target: str) -> None:
        if headers.get("upgrade", "").lower() == "websocket":
            await send_text(send, 426, "WebSocket upgrade is not available on this server")
            return
        if _EVENT_STREAM not in headers.get("accept", "").lower():
            await send_text(send, 406, "Not Acceptable")
            return
        connection_id = headers.get("acp-connection-id")
        if not connection_id:
            await send_text(send, 400, "Missing Acp-Connection-Id")
            return
        connection = self._lookup(connection_id, admitted)
        if connection is None:
            if not await self._elsewhere(receive, send, "GET", target, headers):
                await send_text(send, 404, "Unknown Acp-Connection-Id")
            return
        session_id = headers.get("acp-session-id") or None
        cursor_text = headers.get("last-event-id")
        cursor: int | None = None
        if cursor_text is not None:
            if not cursor_text.strip().isdigit() or len(cursor_text) > 20:
                await send_text(send, 400, "Invalid Last-Event-ID")
                return
            cursor = int(cursor_text)
        try:
            lease = connection.acquire(session_id, takeover=cursor is not None)
        except ConnectionLimitError as exc:
            await send_text(send, 400, str(exc))
            return
        if lease is None:
            await send_text(send, 409, "Outbound stream already has an active receiver")
            return
        mailbox, token = lease
        if cursor is not None and not mailbox.rewind(cursor):
            connection.release(session_id, mailbox, token)
            await send_text(send, 409, STREAM_GONE)
            return
        try:
            await send({
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                            (b"x-accel-buffering", b"no"), *self._host.extra_headers],
            })
            async with anyio.create_task_group() as tg:
                tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
                if admitted.token is not None and self._options.token is not None \
                        and not isinstance(self._options.token, str):
                    tg.start_soon(self._recheck, connection, admitted, tg.cancel_scope)
                keepalive = self._options.keepalive
                while True:
                    with anyio.move_on_after(keepalive) as timer:
                        lines = await mailbox.take(token)
                    if timer.cancelled_caught:
                        body = b":\n\n"
                    elif lines is None:
                        break
                    else:
                        parts: list[bytes] = []
                        for number, item in lines:
                            parts += (b"id: ", str(number).encode(), b"\ndata: ", item, b"\n\n")
                        body = b"".join(parts)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            connection.release(session_id, mailbox, token)

    # -- DELETE -------------------------------------------------------------------------------

    async def _delete(self, receive: Receive, send: Send, headers: dict[str, str], admitted: Admitted,
                      target: str) -> None:
        connection_id = headers.get("acp-connection-id")
        if not connection_id:
            await send_text(send, 400, "Missing Acp-Connection-Id")
            return
        if self._lookup(connection_id, admitted) is None:
            if not await self._elsewhere(receive, send, "DELETE", target, headers):
                await send_text(send, 404, "Unknown Acp-Connection-Id")
            return
        connection = self._host.registry.remove(connection_id)
        if connection is not None:
            connection.shutdown(discard=True)
        await send_empty(send, 202, self._host.extra_headers)


def _answers(line: bytes, request_id: Any) -> bool:
    try:
        answer = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(answer, dict) and "method" not in answer and id_key(answer.get("id")) == id_key(request_id)


async def _read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes | None:
    length = headers.get("content-length", "").strip()
    if length.isdigit() and int(length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
