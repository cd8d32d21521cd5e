"""A checked client for an agent served over the network: [`connect_remote`][acp_agent.testing.connect_remote].

The [`Client`][acp_agent.testing.Client] reads and writes newline-delimited JSON on byte
streams, as on stdio. Here those streams are backed by one of ACP's remote transports:

- ``"websocket"``: one WebSocket, each text message one JSON-RPC message, both ways.
- ``"http"`` (Streamable HTTP): every client message is one ``POST``; ``initialize`` is answered
  in the POST's body together with an ``Acp-Connection-Id`` header, which every later request
  carries; everything else the agent sends arrives on the connection's event stream (a ``GET``
  with ``Accept: text/event-stream``, one ``data:`` line per message). Closing sends ``DELETE``.

A WebSocket the server refuses raises ``ConnectionError`` on entry. A POST the server refuses
(a 4xx/5xx status) is answered with the JSON-RPC error the refusal carries (a quota's ``-32800``), or
else with a local one naming the status, so the request does not hang; the transcript records it as the
agent's answer.
Needs ``httpx`` and ``httpx-ws`` (the ``inspector`` extra; both run on asyncio and trio).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final, Literal

import anyio
import orjson
from anyio.abc import ByteSendStream, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import ErrorCode, RequestError
from .client import Client
from .streams import MemoryByteReceiveStream

__all__ = ["RemoteTransport", "connect_remote", "retry_prompt"]

RemoteTransport = Literal["websocket", "http"]
"""The remote transports [`connect_remote`][acp_agent.testing.connect_remote] speaks."""

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest message accepted from the agent (the server's default ``max_body_bytes``)."""

class _LineSender(ByteSendStream):
    """The client's sending side: splits what it writes into lines for the transport's pump."""

    def __init__(self, lines: MemoryObjectSendStream[bytes]) -> None:
        self._lines = lines
        self._partial = b""

    async def send(self, item: bytes) -> None:
        *lines, self._partial = (self._partial + item).split(b"\n")
        for line in lines:
            if line.strip():
                await self._lines.send(line)

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._lines.close()


def _failure(message: Any, status: int, text: str) -> bytes | None:
    """A JSON-RPC error answering ``message`` (if it is a request) that the server refused: the server's own
    JSON-RPC error when the refusal carries one (a quota's ``-32800`` with its ``data``), else a local
    ``-32603`` naming the HTTP status."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + b"\n"
    error = {"code": -32603, "message": f"HTTP {status}: {text.strip()[:300]}"}
    return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + b"\n"


async def _pump_websocket(url: str, headers: Mapping[str, str], outgoing: MemoryObjectReceiveStream[bytes],
                          incoming: MemoryObjectSendStream[bytes], connected: TaskStatus[None]) -> None:
    import httpx
    from httpx_ws import AsyncWebSocketSession, HTTPXWSException, aconnect_ws

    socket: AsyncWebSocketSession
    async with httpx.AsyncClient(headers=dict(headers), timeout=None) as http, aconnect_ws(
        url, http, max_message_size_bytes=MAX_MESSAGE_BYTES, keepalive_ping_interval_seconds=None,
    ) as socket, anyio.create_task_group() as tg:
        connected.started()

        async def read() -> None:
            try:
                while True:
                    text = await socket.receive_text()
                    await incoming.send(text.encode() + b"\n")
            except (HTTPXWSException, anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                incoming.close()
                tg.cancel_scope.cancel()

        tg.start_soon(read)
        async with outgoing:
            async for line in outgoing:
                await socket.send_text(line.decode())
        # The client closed its side: end the socket; the agent winds down and the reader sees the close.
        with contextlib.suppress(HTTPXWSException, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await socket.close()


async def _pump_http(url: str, headers: Mapping[str, str], outgoing: MemoryObjectReceiveStream[bytes],
                     incoming: MemoryObjectSendStream[bytes], connected: TaskStatus[None]) -> None:
    import httpx

    connected.started()  # nothing to open before the first POST (initialize)

    base = {"Accept": "application/json, text/event-stream", **headers}
    connection_id: str | None = None
    async with httpx.AsyncClient(headers=base, timeout=httpx.Timeout(30.0, read=None)) as http, \
            anyio.create_task_group() as tg:

        async def events(connection: str) -> None:
            try:
                async with http.stream("GET", url, headers={"Accept": "text/event-stream",
                                                            "Acp-Connection-Id": connection}) as response:
                    if response.status_code != 200:
                        return
                    data: list[str] = []
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            data.append(line[5:].removeprefix(" "))
                        elif not line and data:
                            await incoming.send("\n".join(data).encode() + b"\n")
                            data = []
            except httpx.HTTPError:
                pass
            finally:
                incoming.close()

        async with outgoing:
            async for line in outgoing:
                message = orjson.loads(line)
                extra = {"Content-Type": "application/json"}
                if connection_id is not None:
                    extra["Acp-Connection-Id"] = connection_id
                params = message.get("params") if isinstance(message, dict) else None
                session = params.get("sessionId") if isinstance(params, dict) else None
                if isinstance(session, str):
                    extra["Acp-Session-Id"] = session
                try:
                    response = await http.post(url, content=line, headers=extra)
                except httpx.HTTPError as exc:
                    refused = _failure(message, 0, f"{type(exc).__name__}: {exc}")
                    if refused is not None:
                        await incoming.send(refused)
                    continue
                if connection_id is None and response.status_code == 200:
                    connection_id = response.headers.get("acp-connection-id")
                    await incoming.send(response.content.strip() + b"\n")
                    if connection_id is not None:
                        tg.start_soon(events, connection_id)
                elif response.status_code >= 300:
                    refused = _failure(message, response.status_code, response.text)
                    if refused is not None:
                        await incoming.send(refused)
        if connection_id is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5), contextlib.suppress(httpx.HTTPError):
                await http.delete(url, headers={"Acp-Connection-Id": connection_id})
        else:
            incoming.close()


@asynccontextmanager
async def connect_remote(
    url: str, *, transport: RemoteTransport = "websocket", token: str | None = None,
    headers: Mapping[str, str] | None = None, **client_options: Any,
) -> AsyncIterator[Client]:
    """Connect to an agent served over ACP's remote transports and yield a checked [`Client`][acp_agent.testing.Client].

    ``url`` is the endpoint (``http://host:port/acp``; for ``"websocket"`` an ``http``/``https``
    URL is turned into ``ws``/``wss``). ``token`` is sent as ``Authorization: Bearer TOKEN``;
    ``headers`` adds any other header. ``client_options`` go to [`Client`][acp_agent.testing.Client], as for
    [`connect_agent`][acp_agent.testing.connect_agent].

    When the block ends the client closes its side (the WebSocket, or ``DELETE`` over HTTP), and
    the transcript is judged by the client's [`WireChecker`][acp_agent.testing.WireChecker]
    (``check=False`` skips it).
    """
    if transport not in ("websocket", "http"):
        raise ValueError(f"unknown transport {transport!r}: use 'websocket' or 'http'")
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if transport == "websocket":
        url = "ws" + url[4:] if url.startswith("http") else url
        pump = _pump_websocket
    else:
        url = "http" + url[2:] if url.startswith("ws") else url
        pump = _pump_http
    out_send, out_receive = anyio.create_memory_object_stream[bytes](64)
    in_send, in_receive = anyio.create_memory_object_stream[bytes](1024)
    client = Client(MemoryByteReceiveStream(in_receive), _LineSender(out_send), **client_options)
    transport_done = anyio.Event()
    failure: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def run_transport(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                await pump(url, sent, out_receive, in_send, task_status)
            except Exception as exc:
                failure.append(exc)
            finally:
                in_send.close()
                transport_done.set()
                with contextlib.suppress(RuntimeError):  # it failed before connecting: let start() return
                    task_status.started()

        await tg.start(run_transport)
        opened = not failure
        if opened:
            tg.start_soon(client.connection.run)
            try:
                yield client
            finally:
                await client.wind_down(transport_done)
                tg.cancel_scope.cancel()
    if not opened:  # the socket could not be opened: nothing was yielded
        raise ConnectionError(f"cannot connect to the agent at {url}: {failure[0]}") from failure[0]
    if failure:
        raise ConnectionError(f"the connection to the agent at {url} failed: {failure[0]}") from failure[0]
    client.check()


async def retry_prompt(
    stack: AsyncExitStack, connect: Callable[[], AbstractAsyncContextManager[Client]], session_id: str,
    prompt: str | Sequence[dict[str, Any]], *, client: Client | None = None, idempotency_key: str | None = None,
    attempts: int = 3, cwd: str = "/tmp", replay: bool = True, resume_wait: float = 10.0,
) -> tuple[Client, str]:
    """[Preview] Send a prompt with an ``idempotencyKey``, across dropped connections; ``(client, messageId)``.

    Tries ``client`` first (if given and still connected). Whenever the connection is gone (before or while the
    prompt waits for its answer), opens a new one with ``connect()`` (entered on ``stack``, so it stays open for the
    caller), initializes it, resumes ``session_id`` (with ``replay``; a resume refused because the old connection
    still holds the session is retried for up to ``resume_wait`` seconds) and sends the prompt again with the same
    key: the agent inserts it once, and every attempt is answered with the same ``messageId``. ``idempotency_key``
    defaults to a new random UUID (one submission). Raises the last error after ``attempts`` connections.
    """
    key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
    failure: BaseException | None = None
    for _ in range(attempts):
        if client is None or client.connection.closed:
            client = await stack.enter_async_context(connect())
            await client.initialize()
            await _resume(client, session_id, cwd, replay, resume_wait)
        try:
            return client, await client.prompt(session_id, prompt, idempotency_key=key)
        except RequestError as exc:
            if not (exc.code == ErrorCode.REQUEST_CANCELLED and client.connection.closed):
                raise
            failure, client = exc, None
    assert failure is not None
    raise failure


async def _resume(client: Client, session_id: str, cwd: str, replay: bool, wait: float) -> None:
    """``session/resume``, retried while another connection (the dropped one, not yet seen gone) holds it."""
    with anyio.fail_after(wait):
        while True:
            try:
                await client.resume_session(session_id, cwd, replay=replay)
                return
            except RequestError as exc:
                if exc.code != ErrorCode.RESOURCE_NOT_FOUND or "another" not in exc.message:
                    raise
            await anyio.sleep(0.1)
