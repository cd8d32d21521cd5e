"""The server's socket and start-up (acp_agent.http.server)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from acp_agent.http.server import bind_socket


async def _accepted_nodelay() -> int:
    """Serve on a socket from ``bind_socket`` as uvicorn does (``create_server(sock=...)``); TCP_NODELAY of the
    connection it accepts."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[int] = loop.create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    server = await loop.create_server(Probe, sock=bind_socket("127.0.0.1", 0))
    host, port = server.sockets[0].getsockname()[:2]
    _, writer = await asyncio.open_connection(host, port)
    try:
        return await asyncio.wait_for(accepted, 5)
    finally:
        writer.close()
        server.close()


def _uvloop_run(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    uvloop = pytest.importorskip("uvloop")
    result: int = uvloop.run(main())
    return result


@pytest.mark.parametrize("run", [lambda main: asyncio.run(main()), _uvloop_run], ids=["asyncio", "uvloop"])
def test_accepted_connections_have_nagle_off(run: Callable[[Callable[[], Coroutine[Any, Any, int]]], int]) -> None:
    # Nagle's algorithm on holds a message written right after another small one until the client's delayed ACK
    # (~40 ms): a WebSocket turn took 44 ms. asyncio sets TCP_NODELAY only when the socket's protocol says TCP.
    assert run(_accepted_nodelay) == 1
