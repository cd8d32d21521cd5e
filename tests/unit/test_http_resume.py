"""Issue 40's pieces in isolation: the per-stream cursors of an SSE mailbox (`Mailbox.rewind`), the replica tags
that route a Streamable HTTP request to its connection's replica (`Peers`), and their settings."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest

from acp_agent.http import AcpApp, HttpOptions
from acp_agent.http.peers import FORWARDED_HEADER, Peers, replica_tag
from acp_agent.http.streams import Mailbox
from examples.echo_agent import EchoAgent
from tests.helpers.balancer import free_port


def numbers(taken: list[tuple[int, bytes]] | None) -> list[int]:
    assert taken is not None
    return [number for number, _ in taken]


@pytest.mark.anyio
async def test_a_mailbox_replays_what_followed_a_cursor_and_refuses_one_too_old() -> None:
    held = [0]
    box = Mailbox(lambda n: held.__setitem__(0, held[0] + n), lambda n: held.__setitem__(0, held[0] - n), keep=3)
    token = box.acquire()
    for i in range(5):
        box.push(b"m%d" % i)
    assert numbers(await box.take(token)) == [1, 2, 3, 4, 5]
    assert held == [0]
    assert not box.rewind(1)  # 2 is no longer kept (3 are: 3, 4, 5)
    assert box.rewind(2)
    assert held[0] > 0
    replacement = box.acquire(takeover=True)  # a reconnecting client replaces a stream not yet seen dead
    assert replacement is not None and await box.take(token) is None
    box.push(b"m5")
    assert numbers(await box.take(replacement)) == [3, 4, 5, 6]
    assert box.rewind(6) and not box.queued  # up to date: nothing to send again
    assert not box.rewind(7)  # a cursor from the future


def test_peers_route_only_to_listed_replicas_and_never_twice() -> None:
    one, two = "http://10.0.0.1:8000", "http://10.0.0.2:8000"
    peers = Peers(one, [one, two])
    connection_id = Peers(two, [one, two]).connection_id("abc")
    assert connection_id == f"{replica_tag(two)}.abc"
    owner = peers.owner(connection_id, {})
    assert owner is not None and (owner.host, owner.port) == ("10.0.0.2", 8000)
    assert peers.owner(connection_id, {FORWARDED_HEADER: "x"}) is None
    assert peers.owner(peers.connection_id("abc"), {}) is None  # its own
    assert peers.owner("deadbeef.abc", {}) is None  # not a listed peer: no request goes there
    assert not Peers() and Peers().connection_id("abc") == "abc"


def test_replica_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        HttpOptions(peers=("https://10.0.0.1",))
    with pytest.raises(ValueError, match="turn_grace"):
        HttpOptions(turn_grace=-1)
    assert HttpOptions(turn_grace=0, drain_delay=0).turn_grace == 0




@pytest.mark.anyio
async def test_a_websocket_reattach_for_an_unreachable_peer_is_refused_404() -> None:
    """A reattach naming a listed peer that cannot be reached is answered as an unknown connection; one naming a
    replica not listed is never sent anywhere (also 404)."""
    port = free_port()  # nothing listens there
    one, two = "http://127.0.0.1:1", f"http://127.0.0.1:{port}"
    app = AcpApp(EchoAgent(), HttpOptions(advertise_url=one, peers=(one, two)))
    for connection_id in (Peers(two).connection_id("abc"), "deadbeef.abc"):
        sent: list[dict[str, Any]] = []
        events = [{"type": "websocket.connect"}]

        async def receive(events: list[dict[str, Any]] = events) -> dict[str, Any]:
            return events.pop(0) if events else {"type": "websocket.disconnect", "code": 1000}

        async def send(message: MutableMapping[str, Any], sent: list[dict[str, Any]] = sent) -> None:
            sent.append(dict(message))

        scope = {"type": "websocket", "path": "/acp", "query_string": b"",
                 "extensions": {"websocket.http.response": {}},
                 "headers": [(b"acp-connection-id", connection_id.encode()), (b"last-event-id", b"3")]}
        await app(scope, receive, send)
        assert sent[0]["type"] == "websocket.http.response.start" and sent[0]["status"] == 404, sent
        assert sent[1]["body"] == b"Unknown Acp-Connection-Id"
