"""Replicas that forward each other's Streamable HTTP requests, so a balancer needs no affinity.

A Streamable HTTP connection lives in the process that answered its ``initialize``: its runtime, its sessions and
its event streams are there. Behind a balancer without affinity, the connection's next ``POST`` or ``GET`` may land on
another replica. With `Peers` configured (``serve --advertise-url URL --peer URL ...``), every connection id starts
with a short tag naming the replica that holds it (a digest of its advertised URL), and a replica that does not hold
a connection forwards the request, unchanged, to the peer the tag names, streaming the answer back (an event stream
too). Only the listed peers are ever contacted (a client cannot make a replica send requests anywhere else), and a
forwarded request (``Acp-Forwarded``) is never forwarded again. A peer that cannot be reached answers
``404 Unknown Acp-Connection-Id``: the connection is gone, and the client initializes again and resumes its session.
A WebSocket that reattaches to a detached connection held elsewhere is proxied the same way, frame by frame
(`acp_agent.http.websocket`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import anyio
import h11
from anyio.abc import SocketAttribute, SocketStream

from .._util.episodes import Episode
from .asgi import Receive, Send, send_text

__all__ = ["FORWARDED_HEADER", "Peer", "Peers", "replica_tag"]

logger = logging.getLogger(__name__)

FORWARDED_HEADER: Final = "acp-forwarded"
"""The header a forwarded request carries (the tag of the replica that forwarded it)."""

_HOP_BY_HOP: Final = frozenset({"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
                                "proxy-connection", "content-length", FORWARDED_HEADER})
_CONNECT_TIMEOUT: Final = 5.0


def replica_tag(url: str) -> str:
    """The tag of the replica advertised at ``url``: 8 hex digits of a digest of its normalized URL."""
    parts = urlsplit(url.strip())
    normal = f"{parts.scheme.lower()}://{parts.netloc.lower()}"
    return hashlib.sha256(normal.encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Peer:
    """One replica requests can be forwarded to."""

    url: str
    """Its advertised URL (``http://host:port``, plain HTTP on the replicas' network)."""
    host: str
    port: int
    tag: str


def _peer(url: str) -> Peer:
    parts = urlsplit(url.strip())
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"a peer URL must be http://HOST:PORT (the replicas' own network), got {url!r}")
    return Peer(url, parts.hostname, parts.port or 80, replica_tag(url))


class Peers:
    """This replica's tag and the peers it forwards to (none: every connection is served here or not at all)."""

    def __init__(self, advertise_url: str | None = None, peer_urls: Sequence[str] = ()) -> None:
        self.tag = replica_tag(advertise_url) if advertise_url else ""
        """This replica's tag (empty: connection ids carry none)."""
        self._peers = {peer.tag: peer for peer in map(_peer, peer_urls) if peer.tag != self.tag}
        self._unreachable = Episode()

    def __bool__(self) -> bool:
        return bool(self._peers)

    def connection_id(self, unique: str) -> str:
        """The id of a new connection held here: ``unique`` prefixed with this replica's tag."""
        return f"{self.tag}.{unique}" if self.tag else unique

    def owner(self, connection_id: str, headers: Mapping[str, str]) -> Peer | None:
        """The peer holding ``connection_id``, if its tag names a listed peer and the request was not forwarded
        already."""
        if FORWARDED_HEADER in headers or "." not in connection_id:
            return None
        return self._peers.get(connection_id.split(".", 1)[0])

    async def connect(self, peer: Peer) -> SocketStream | None:
        """A TCP stream to ``peer`` (no delay on small writes), or ``None`` when it cannot be reached (logged once
        per outage)."""
        try:
            with anyio.fail_after(_CONNECT_TIMEOUT):
                stream = await anyio.connect_tcp(peer.host, peer.port)
        except (OSError, TimeoutError) as exc:
            self._unreachable.log(logger, logging.WARNING, "acp: replica %s cannot be reached (%s); its connections "
                                  "are answered 404", peer.url, exc)
            return None
        with contextlib.suppress(OSError, anyio.TypedAttributeLookupError):
            stream.extra(SocketAttribute.raw_socket).setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return stream

    async def forward(self, peer: Peer, method: str, target: str, headers: Mapping[str, str], body: bytes,
                      receive: Receive, send: Send) -> None:
        """Send the request to ``peer`` and stream its answer back to the client (until either side ends)."""
        stream = await self.connect(peer)
        if stream is None:
            await send_text(send, 404, "Unknown Acp-Connection-Id")
            return
        client = h11.Connection(h11.CLIENT)
        sent = [(name, value) for name, value in headers.items() if name not in _HOP_BY_HOP]
        sent += [(FORWARDED_HEADER, self.tag or "-"), ("connection", "close")]
        if method != "GET" or body:
            sent.append(("content-length", str(len(body))))
        started = False
        async with stream, anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_disconnect, receive, tg.cancel_scope)
            try:
                head = client.send(h11.Request(method=method, target=target, headers=sent)) or b""
                data = client.send(h11.Data(data=body)) or b"" if body else b""
                await stream.send(head + data + (client.send(h11.EndOfMessage()) or b""))  # one write
                while True:
                    event = client.next_event()
                    if event is h11.NEED_DATA:
                        try:
                            data = await stream.receive()
                        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                            data = b""
                        client.receive_data(data)
                    elif isinstance(event, h11.Response):
                        started = True
                        kept = [(name, value) for name, value in event.headers
                                if name.decode("latin-1").lower() not in _HOP_BY_HOP]
                        await send({"type": "http.response.start", "status": event.status_code, "headers": kept})
                    elif isinstance(event, h11.Data):
                        await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        break
            except (h11.RemoteProtocolError, anyio.BrokenResourceError, OSError) as exc:
                logger.info("acp: forwarding to replica %s ended: %s", peer.url, exc)
            tg.cancel_scope.cancel()
        with contextlib.suppress(Exception):  # the client may be gone
            if not started:
                await send_text(send, 502, "Bad Gateway")
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
