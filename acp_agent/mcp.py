"""[unstable] MCP over ACP: calling the MCP servers a client hosts itself (``type: "acp"``).

A client may hand a session MCP servers that live inside the client and are reached over the
ACP connection itself. The agent opts in with [`Agent.mcp_acp`][acp_agent.Agent.mcp_acp] (advertised as
``session.mcp.acp``); each such server then appears in [`Session.acp_mcp_servers`][acp_agent.Session.acp_mcp_servers] as
an [`AcpMcpServer`][acp_agent.AcpMcpServer]. Every call is one ``mcp/message`` request (agent -> client) carrying one
inner MCP request; the client's ``mcp/message`` notifications about that request (progress,
subscription events) reach the caller's ``on_notification`` callback. MCP 2026-07-28 is stateless:
there is no handshake, and each request carries the protocol version and the caller's MCP
capabilities in its ``params._meta``.

Cancelling the calling task (``session/cancel``, a timeout, a cancel scope) withdraws the
``mcp/message`` request with ``$/cancel_request``, which is how the binding cancels the inner
MCP request. The session closing ends every call still waiting.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import Field, ValidationError

from . import schema
from ._util.ids import new_id
from ._wire.connection import Connection, describe_validation_error
from .errors import (
    AcpAgentError,
    McpServerError,
    McpTransportError,
    RequestError,
    SessionClosedError,
    UnknownMcpServerError,
)
from .schema import Implementation
from .schema.base import WireModel, to_wire

if TYPE_CHECKING:  # the mcp/message and session models load when first used (start-up)
    from .schema import MessageMcpNotification

__all__ = [
    "MCP_PROTOCOL_VERSION",
    "AcpMcpServer",
    "AcpMcpServers",
    "McpNotification",
    "McpRouter",
    "McpTool",
    "McpToolResult",
    "NotificationHandler",
]

logger = logging.getLogger(__name__)

_Model = TypeVar("_Model", bound=WireModel)

MCP_MESSAGE: Final = "mcp/message"
MCP_PROTOCOL_VERSION: Final = "2026-07-28"
"""The MCP revision the inner requests speak (the one the MCP-over-ACP binding supports)."""
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
MAX_LIST_PAGES: Final = 100
"""Most pages [`AcpMcpServer.list_tools`][acp_agent.AcpMcpServer.list_tools] follows before it gives up on a server's
cursors."""


@dataclass(frozen=True, slots=True)
class McpNotification:
    """One MCP notification the client forwarded about a request in flight (``mcp/message``)."""

    method: str
    """The inner MCP method, such as ``notifications/progress``."""
    params: dict[str, Any] | None
    """The inner MCP params (``None`` when omitted or null)."""
    meta: dict[str, Any] | None = None
    """The ACP-level ``_meta`` of the carrying notification (not the inner MCP ``_meta``)."""


NotificationHandler = Callable[[McpNotification], Awaitable[None] | None]
"""Called with each notification about one request, in arrival order (plain or ``async``)."""


class McpTool(WireModel):
    """One tool an MCP server lists (``tools/list``); unknown fields are kept."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


class McpToolResult(WireModel):
    """What a tool call returned (``tools/call``); unknown fields are kept.

    ``is_error`` marks a failure the tool reports about itself (its ``content`` says what
    went wrong, for the model to read); a failure of the call itself raises instead.
    """

    content: list[dict[str, Any]] = Field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text of the result's ``text`` content blocks, one per line."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


class McpRouter:
    """The MCP-over-ACP traffic of one connection: sends requests, routes the client's notifications.

    One per connection (``ClientPeer.mcp``); notifications are matched to the request in flight
    by ``(serverId, requestId)`` and dropped when no request waits for them.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.client_info: Implementation | None = None
        """Sent as the MCP ``clientInfo`` of every request (the agent's ``info``)."""
        self._listeners: dict[tuple[str, str], MemoryObjectSendStream[McpNotification]] = {}

    def deliver(self, notification: MessageMcpNotification) -> None:
        """Hand one ``mcp/message`` notification to the request it is about (called in arrival order)."""
        listener = self._listeners.get((notification.server_id, notification.request_id))
        if listener is None:
            logger.debug("acp: dropping an mcp/message notification for no request in flight (%s, %s)",
                         notification.server_id, notification.request_id)
            return
        listener.send_nowait(McpNotification(notification.method, notification.params, notification.meta))

    def _params(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        body = dict(params or {})
        existing = body.get("_meta")
        meta = dict(existing) if isinstance(existing, Mapping) else {}
        meta.setdefault(META_PROTOCOL_VERSION, MCP_PROTOCOL_VERSION)
        meta.setdefault(META_CLIENT_CAPABILITIES, {})
        if self.client_info is not None:
            meta.setdefault(META_CLIENT_INFO, to_wire(self.client_info))
        body["_meta"] = meta
        return body

    async def request(self, server_id: str, method: str, params: Mapping[str, Any] | None,
                      on_notification: NotificationHandler | None) -> Any:
        """Send one MCP request to ``server_id`` and return the raw ``mcp/message`` answer."""
        request_id = new_id("mcp")
        message = schema.MessageMcpRequest(server_id=server_id, request_id=request_id, method=method,
                                    params=self._params(params))
        if on_notification is None:
            return await self.connection.request(MCP_MESSAGE, message)
        key = (server_id, request_id)
        send, receive = anyio.create_memory_object_stream[McpNotification](math.inf)
        self._listeners[key] = send
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump, receive, on_notification)
                try:
                    return await self.connection.request(MCP_MESSAGE, message)
                finally:
                    # Notifications precede the answer on the wire: the pump hands over what came, then ends.
                    del self._listeners[key]
                    send.close()
        except BaseExceptionGroup as group:
            _, failures = group.split(anyio.get_cancelled_exc_class())
            if failures is not None and len(failures.exceptions) == 1:
                raise failures.exceptions[0] from None  # the callback's own exception, unwrapped
            raise
        finally:
            self._listeners.pop(key, None)
            send.close()
            receive.close()  # also when the pump never got to run


async def _pump(receive: MemoryObjectReceiveStream[McpNotification], handler: NotificationHandler) -> None:
    with receive:
        async for notification in receive:
            result = handler(notification)
            if inspect.isawaitable(result):
                await result


class AcpMcpServer:
    """A client-hosted MCP server given to a session (``type: "acp"``): call it over ``mcp/message``.

    Every method raises [`McpServerError`][acp_agent.McpServerError] when the MCP server answers
    with an MCP error, [`McpTransportError`][acp_agent.McpTransportError] when the client could not
    deliver the request or gave no MCP answer (unknown server id ``-33001``, ``timeout``, the
    connection ending), [`SessionClosedError`][acp_agent.SessionClosedError] once the session closed,
    and [`UnknownMcpServerError`][acp_agent.UnknownMcpServerError] once a ``session/resume`` left the
    server out. Cancelling the caller withdraws the request (``$/cancel_request``).
    """

    def __init__(self, router: McpRouter, config: schema.McpServerAcp) -> None:
        self._router = router
        self._config = config
        self._calls: set[anyio.CancelScope] = set()
        self._ended: Callable[[], AcpAgentError] | None = None

    @property
    def config(self) -> schema.McpServerAcp:
        """The ``mcpServers`` entry the client sent."""
        return self._config

    @property
    def name(self) -> str:
        """The server's human-readable name (unique within the session)."""
        return self._config.name

    @property
    def server_id(self) -> str:
        """The opaque id the client gave the server (``serverId``)."""
        return self._config.server_id

    def __repr__(self) -> str:
        return f"AcpMcpServer({self.name!r}, server_id={self.server_id!r})"

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float | None = None,
                      on_notification: NotificationHandler | None = None) -> Any:
        """Send any MCP request (``resources/read``, ``prompts/get``, ...) and return its MCP result.

        ``params`` are the inner MCP params; the MCP version, capabilities and client info are
        added to their ``_meta`` unless already there. ``on_notification`` receives the client's
        notifications about this request while it runs (an exception it raises ends the request
        and is raised here). After ``timeout`` seconds the request is withdrawn and
        ``McpTransportError`` (``-32800``) raised.
        """
        if self._ended is not None:
            raise self._ended()
        answer: Any = None
        with anyio.CancelScope() as call:
            self._calls.add(call)
            try:
                with anyio.move_on_after(math.inf if timeout is None else timeout) as deadline:
                    answer = await self._router.request(self.server_id, method, params, on_notification)
            except McpTransportError:
                raise
            except RequestError as exc:
                raise McpTransportError(self.name, exc.code, exc.message, exc.data) from None
            finally:
                self._calls.discard(call)
        if call.cancelled_caught and self._ended is not None:
            raise self._ended()
        if deadline.cancelled_caught:
            raise McpTransportError(self.name, McpTransportError.REQUEST_CANCELLED,
                                    f"no answer to {method} from MCP server {self.name!r} within {timeout} s")
        return self._outcome(method, answer)

    def _outcome(self, method: str, answer: Any) -> Any:
        # The carrier holds exactly one inner outcome; a present result wins, even null.
        if isinstance(answer, dict):
            if "result" in answer:
                return answer["result"]
            error = answer.get("error")
            if (isinstance(error, dict) and isinstance(error.get("code"), int)
                    and not isinstance(error.get("code"), bool) and isinstance(error.get("message"), str)):
                raise McpServerError(self.name, error["code"], error["message"], error.get("data"))
        raise McpTransportError(self.name, McpTransportError.BACKEND_FAILED,
                                f"the client's answer to {method} carries no MCP result or error")

    async def list_tools(self, *, timeout: float | None = None) -> list[McpTool]:
        """Every tool the server offers (``tools/list``, following its pages)."""
        tools: list[McpTool] = []
        cursor: Any = None
        for _ in range(MAX_LIST_PAGES):
            page = await self.request("tools/list", {} if cursor is None else {"cursor": cursor}, timeout=timeout)
            raw = page.get("tools") if isinstance(page, dict) else None
            if not isinstance(raw, list):
                raise self._malformed("tools/list", "no tools list")
            for entry in raw:
                tools.append(self._parse(McpTool, entry, "tools/list"))
            cursor = page.get("nextCursor")
            if cursor is None:
                return tools
        raise self._malformed("tools/list", f"more than {MAX_LIST_PAGES} pages")

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                        timeout: float | None = None, on_notification: NotificationHandler | None = None,
                        ) -> McpToolResult:
        """Call one tool (``tools/call``) and return its result; check ``result.is_error``."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        result = await self.request("tools/call", params, timeout=timeout, on_notification=on_notification)
        return self._parse(McpToolResult, result, "tools/call")

    def _parse(self, model: type[_Model], value: Any, method: str) -> _Model:
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise self._malformed(method, describe_validation_error(exc)) from None

    def _malformed(self, method: str, detail: str) -> McpServerError:
        return McpServerError(self.name, RequestError.internal_error().code,
                              f"MCP server {self.name!r} answered {method} with a malformed result: {detail}")

    def _end(self, error: Callable[[], AcpAgentError]) -> None:
        """Refuse new calls with ``error()`` and end the ones waiting with it (their requests are withdrawn)."""
        self._ended = error
        for call in list(self._calls):
            call.cancel()


class AcpMcpServers(Mapping[str, AcpMcpServer]):
    """A session's client-hosted MCP servers by name ([`Session.acp_mcp_servers`][acp_agent.Session.acp_mcp_servers]).

    Looking up a name the client did not give raises
    [`UnknownMcpServerError`][acp_agent.UnknownMcpServerError] (a ``KeyError``).
    """

    def __init__(self, router: McpRouter, session_id: str) -> None:
        self._router = router
        self._session_id = session_id
        self._servers: dict[str, AcpMcpServer] = {}

    def __getitem__(self, name: str) -> AcpMcpServer:
        server = self._servers.get(name)
        if server is None:
            raise UnknownMcpServerError(name)
        return server

    def __iter__(self) -> Iterator[str]:
        return iter(self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def __repr__(self) -> str:
        return f"AcpMcpServers({list(self._servers.values())!r})"

    def replace(self, configs: Sequence[Any]) -> None:
        """Take the session's new ``mcpServers`` list: keep the servers still given, end the others."""
        servers: dict[str, AcpMcpServer] = {}
        for config in configs:
            if isinstance(config, schema.McpServerAcp):
                kept = self._servers.get(config.name)
                same = kept is not None and kept.server_id == config.server_id
                servers[config.name] = kept if same and kept is not None else AcpMcpServer(self._router, config)
        for name, server in self._servers.items():
            if servers.get(name) is not server:
                server._end(functools.partial(UnknownMcpServerError, name, "no longer given to this session"))
        self._servers = servers

    def close(self) -> None:
        """The session closed: every server refuses calls and the waiting ones end."""
        message = f"session {self._session_id} is closed"
        for server in self._servers.values():
            server._end(lambda: SessionClosedError(message))
