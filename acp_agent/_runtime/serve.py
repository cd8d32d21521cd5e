"""One connection's runtime over any pair of byte streams: what every transport builds and runs.

`open_runtime` is shared by stdio ([`serve_stdio`][acp_agent.serve_stdio]) and HTTP/WebSocket
([`acp_agent.http`][acp_agent.http]), so neither transport imports the other; [`serve`][acp_agent.serve] runs one over
streams the caller passes (the in-memory test client does). Nothing here touches file descriptors, signals or threads.
"""

from __future__ import annotations

from anyio.abc import ByteReceiveStream, ByteSendStream

from .._util import environment
from ..agent import Agent
from ..auth import Workspace
from ..limits import Limits, resolve_limits
from ..records import DEFAULT_PRINCIPAL
from ..store import SessionStore
from ..store.opening import session_store
from ..v1 import negotiating_streams
from .runtime import AgentRuntime

__all__ = ["open_runtime", "serve"]


async def serve(
    agent: Agent,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    *,
    limits: Limits | None = None,
    max_message_bytes: int | None = None,
    store: SessionStore | None = None,
) -> None:
    """Serve ``agent`` on any pair of anyio byte streams until the input ends (v1 clients via the bridge).

    ``limits`` (default: ``agent.limits``) bounds the connection; ``max_message_bytes``
    overrides its field of that name. ``store`` keeps the sessions (default: ``agent.store``,
    else a fresh [`MemoryStore`][acp_agent.store.MemoryStore] for this connection: `acp_agent.store.opening`).
    """
    runtime = open_runtime(agent, receive, send, limits=limits, max_message_bytes=max_message_bytes,
                           store=session_store(agent, store, durable=False))
    await runtime.connection.run()


def open_runtime(
    agent: Agent,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    *,
    limits: Limits | None = None,
    max_message_bytes: int | None = None,
    store: SessionStore | None = None,
    shutdown_timeout: float | None = None,
    principal: str = DEFAULT_PRINCIPAL,
    workspace: Workspace | None = None,
    client_mcp: bool = True,
) -> AgentRuntime:
    """Build the runtime of one client connection over a pair of byte streams, ready to run.

    The same for every transport: the v1 bridge watches the first lines, ``limits`` (default:
    ``agent.limits``, ``max_message_bytes`` overriding its field) bounds the connection, ``store`` keeps its
    sessions (the transport chose it with `session_store`; ``None`` is a
    fresh memory store), ``shutdown_timeout`` (if given) how long the end of the connection waits for work to
    stop, ``principal`` whose sessions it sees (stdio: ``"default"``), ``workspace`` where they may live (default:
    ``agent.workspace``), ``client_mcp`` whether the client may name stdio/HTTP MCP servers (a remote transport
    passes ``False`` unless its operator allowed them). ``await runtime.connection.run()`` serves it.
    Telemetry, when on (``Agent.telemetry`` or the ``OTEL_*`` variables: `acp_agent.telemetry`), is bound to the
    connection here.
    """
    chosen = resolve_limits(agent.limits, limits, max_message_bytes)
    runtime = AgentRuntime(agent, *negotiating_streams(receive, send), limits=chosen, store=store, principal=principal,
                           workspace=workspace, client_mcp=client_mcp)
    if shutdown_timeout is not None:
        runtime.shutdown_timeout = shutdown_timeout
    if agent.telemetry is not None or environment.otel_configured():  # else off, and nothing of it imported
        from ..telemetry import for_connection

        runtime.connection.use_telemetry(for_connection(
            agent.telemetry, agent_name=agent.name, principal=None if principal == DEFAULT_PRINCIPAL else principal))
    return runtime
