"""JSON-RPC connection: framing, every bad-input case, batches, cancel_request, outgoing requests, EOF."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import ByteReceiveStream
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from acp_agent._wire.connection import Connection, Method, _response_bytes
from acp_agent._wire.framing import OVERSIZED, LineReader, Oversized
from acp_agent.errors import RequestError
from tests.helpers.rawpeer import connected

pytestmark = pytest.mark.anyio


class AddParams(BaseModel):
    a: int
    b: int


def setup_methods(conn: Connection) -> None:
    async def add(p: AddParams) -> dict[str, Any]:
        return {"sum": p.a + p.b}

    async def sleep(p: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(float(p.get("seconds", 3600)))
        return {"slept": True}

    async def boom(p: dict[str, Any]) -> None:
        raise ZeroDivisionError("secret internals")

    async def refuse(p: dict[str, Any]) -> None:
        raise RequestError(-32099, "custom refusal", {"why": "test"})

    conn.requests.update(
        {
            "add": Method(add, AddParams),
            "sleep": Method(sleep),
            "boom": Method(boom),
            "refuse": Method(refuse),
        }
    )
    seen: list[Any] = []
    conn.notifications["note"] = Method(lambda p: _append(seen, p))
    conn.seen = seen  # type: ignore[attr-defined]


async def _append(seen: list[Any], p: Any) -> None:
    seen.append(p)


def req(id_: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


async def assert_alive(peer: Any) -> None:
    """The connection still serves a normal request."""
    await peer.send(req(999, "add", {"a": 2, "b": 3}))
    assert await peer.recv() == {"jsonrpc": "2.0", "id": 999, "result": {"sum": 5}}


async def test_request_and_id_types_echoed_exactly() -> None:  # R7
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(1, "add", {"a": 1, "b": 2}))
        assert await peer.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"sum": 3}}
        await peer.send(req("1", "add", {"a": 1, "b": 2}))
        answer = await peer.recv()
        assert answer["id"] == "1" and isinstance(answer["id"], str)


async def test_parse_error() -> None:  # R10
    async with connected(setup_methods) as (peer, _):
        await peer.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32700
        await peer.send_bytes(b"\xff\xfe not utf-8\n")
        assert (await peer.recv())["error"]["code"] == -32700
        await assert_alive(peer)


async def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    async with connected(setup_methods) as (peer, _):
        await peer.send_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] in (-32700, -32600)
        await assert_alive(peer)


@pytest.mark.parametrize(
    "line",
    [b"5", b'"text"', b"null", b"true", b'{"id": 1, "method": "add"}', b'{"jsonrpc": "1.0", "id": 1}',
     b'{"jsonrpc": "2.0"}', b'{"jsonrpc": "2.0", "method": 5, "id": 1}'],
)
async def test_not_a_message(line: bytes) -> None:  # R10
    async with connected(setup_methods) as (peer, _):
        await peer.send_bytes(line + b"\n")
        answer = await peer.recv()
        assert answer == {"jsonrpc": "2.0", "id": None, "error": answer["error"]}
        assert answer["error"]["code"] == -32600
        await assert_alive(peer)


@pytest.mark.parametrize("bad_id", [None, 1.5, True, [1], {"x": 1}])
async def test_bad_request_ids(bad_id: Any) -> None:  # R11
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(bad_id, "add", {"a": 1, "b": 2}))
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        await assert_alive(peer)


async def test_unknown_method_and_notification() -> None:  # R12
    async with connected(setup_methods) as (peer, _):
        await peer.send({"jsonrpc": "2.0", "method": "nope/never"})
        await peer.send({"jsonrpc": "2.0", "method": "$/unknown_protocol_thing", "params": {}})
        await peer.send(req(7, "nope/never", {}))
        answer = await peer.recv()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32601, "message": "Method not found", "data": {"method": "nope/never"}},
        }


async def test_invalid_params_are_described_without_values() -> None:  # R13
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(3, "add", {"a": "SECRET-VALUE", "b": 2}))
        answer = await peer.recv()
        assert answer["id"] == 3 and answer["error"]["code"] == -32602
        assert "SECRET-VALUE" not in str(answer)
        assert "a" in answer["error"]["message"]
        await peer.send(req(4, "add", [1, 2]))
        assert (await peer.recv())["error"]["code"] == -32602
        await peer.send(req(5, "add", 17))
        assert (await peer.recv())["error"]["code"] == -32600
        await assert_alive(peer)


async def test_handler_crash_is_internal_error(caplog: pytest.LogCaptureFixture) -> None:  # R13
    with caplog.at_level(logging.ERROR):
        async with connected(setup_methods) as (peer, _):
            await peer.send(req(9, "boom", {}))
            answer = await peer.recv()
            assert answer["error"]["code"] == -32603
            assert "secret internals" not in str(answer)
            await peer.send(req(10, "refuse", {}))
            expected = {"code": -32099, "message": "custom refusal", "data": {"why": "test"}}
            assert (await peer.recv())["error"] == expected
            await assert_alive(peer)
    assert any("boom" in r.getMessage() or r.exc_info for r in caplog.records)


async def test_batches() -> None:  # R9
    async with connected(setup_methods) as (peer, conn):
        await peer.send(
            [
                req(1, "add", {"a": 1, "b": 1}),
                {"jsonrpc": "2.0", "method": "note", "params": {"n": 1}},
                5,
                req(2, "nope", {}),
            ]
        )
        answer = await peer.recv()
        assert isinstance(answer, list) and len(answer) == 3
        by_id = {(type(a["id"]), a["id"]): a for a in answer}
        assert by_id[(int, 1)]["result"] == {"sum": 2}
        assert by_id[(int, 2)]["error"]["code"] == -32601
        assert by_id[(type(None), None)]["error"]["code"] == -32600
        # only notifications: no reply at all
        await peer.send([{"jsonrpc": "2.0", "method": "note", "params": {"n": 2}}])
        await peer.nothing()
        assert conn.seen == [{"n": 1}, {"n": 2}]  # type: ignore[attr-defined]
        # empty batch: a single error object, not an array
        await peer.send([])
        answer = await peer.recv()
        assert isinstance(answer, dict) and answer["id"] is None and answer["error"]["code"] == -32600


async def test_oversized_line_is_skipped_and_reading_resumes() -> None:  # R14
    async with connected(setup_methods, max_message_bytes=1000) as (peer, _):
        big = b'{"jsonrpc":"2.0","id":1,"method":"add","params":{"pad":"' + b"x" * 50_000 + b'"}}\n'
        for i in range(0, len(big), 700):  # arrives in many small pieces
            await peer.send_bytes(big[i : i + 700])
        answer = await peer.recv()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        assert "1000" in answer["error"]["message"]
        # exactly at the limit is fine
        line = b'{"jsonrpc":"2.0","id":2,"method":"add","params":{"a":1,"b":1}}'
        await peer.send_bytes(line + b" " * (1000 - len(line)) + b"\n")
        assert (await peer.recv())["id"] == 2
        await assert_alive(peer)


async def test_crlf_blank_lines_and_final_line_without_newline() -> None:
    async with connected(setup_methods) as (peer, _):
        await peer.send_bytes(b"\r\n   \n" + b'{"jsonrpc":"2.0","id":1,"method":"add","params":{"a":1,"b":1}}\r\n')
        assert (await peer.recv())["result"] == {"sum": 2}
        await peer.send_bytes(b'{"jsonrpc":"2.0","id":2,"method":"add","params":{"a":2,"b":2}}')
        await peer.eof()
        assert (await peer.recv())["result"] == {"sum": 4}


async def test_cancel_request_answers_once() -> None:  # R16, R17
    async with connected(setup_methods) as (peer, _):
        await peer.send(req("slow", "sleep", {}))
        await peer.send(req(2, "add", {"a": 1, "b": 1}))  # R5: not blocked by the slow one
        assert (await peer.recv())["id"] == 2
        await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "slow"}})
        answer = await peer.recv()
        assert answer["id"] == "slow" and answer["error"]["code"] == -32800
        # cancelling it again, or an id never seen, or a finished one: ignored
        for rid in ("slow", 12345, 2):
            await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
        await peer.nothing()
        await assert_alive(peer)


async def test_cancel_request_matches_id_type() -> None:  # R17
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(1, "sleep", {"seconds": 0.3}))
        await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "1"}})
        answer = await peer.recv()
        assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"slept": True}}


async def test_duplicate_id_in_flight() -> None:
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(1, "sleep", {"seconds": 0.3}))
        await peer.send(req(1, "add", {"a": 1, "b": 1}))
        first = await peer.recv()
        assert first["id"] == 1 and first["error"]["code"] == -32600
        assert (await peer.recv())["result"] == {"slept": True}


async def test_eof_answers_pending_requests_and_returns() -> None:  # R18
    async with connected(setup_methods) as (peer, _):
        await peer.send(req(1, "sleep", {}))
        await peer.send(req(2, "sleep", {}))
        await anyio.sleep(0.05)
        await peer.eof()
        answers = {(await peer.recv())["id"], (await peer.recv())["id"]}
        assert answers == {1, 2}


async def test_outgoing_requests(caplog: pytest.LogCaptureFixture) -> None:  # R6, R19
    async with connected(setup_methods) as (peer, conn):
        results: list[Any] = []

        async def ask(n: int) -> None:
            try:
                results.append(await conn.request("client/thing", {"n": n}))
            except RequestError as exc:
                results.append(exc.code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, 1)
            tg.start_soon(ask, 2)
            first, second = await peer.recv(), await peer.recv()
            assert first["id"] != second["id"]
            assert all(isinstance(m["id"], int) for m in (first, second))
            await peer.send({"jsonrpc": "2.0", "id": second["id"], "error": {"code": -32099, "message": "no"}})
            await peer.send({"jsonrpc": "2.0", "id": first["id"], "result": {"ok": first["params"]["n"]}})
        assert sorted(map(str, results)) == sorted(map(str, [{"ok": first["params"]["n"]}, -32099]))
        with caplog.at_level(logging.WARNING):
            await peer.send({"jsonrpc": "2.0", "id": 424242, "result": {}})
            await assert_alive(peer)
        assert any("424242" in r.getMessage() for r in caplog.records)


async def test_withdrawn_outgoing_request_sends_cancel_and_drops_late_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:  # R19
    async with connected(setup_methods) as (peer, conn):
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.request, "client/slow", {})
            sent = await peer.recv()
            tg.cancel_scope.cancel()
        cancel = await peer.recv()
        assert cancel == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sent["id"]}}
        with caplog.at_level(logging.WARNING):
            await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"outcome": {"outcome": "cancelled"}}})
            await assert_alive(peer)
        assert not any(str(sent["id"]) in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


async def test_outgoing_request_fails_when_connection_closes() -> None:
    async with connected(setup_methods) as (peer, conn):
        async with anyio.create_task_group() as tg:
            outcome: list[Any] = []

            async def ask() -> None:
                try:
                    await conn.request("client/slow", {})
                except RequestError as exc:
                    outcome.append(exc.code)

            tg.start_soon(ask)
            await peer.recv()
            await peer.eof()
        assert outcome == [-32800]


# -- the line reader's one-line read, and the answer's bytes ------------------------------------------------------


class _Chunks(ByteReceiveStream):
    """A stream that hands out the given chunks, one per receive, then ends."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._chunks:
            raise anyio.EndOfStream
        return self._chunks.pop(0)

    async def aclose(self) -> None:
        pass


def _expected_lines(data: bytes, limit: int) -> list[bytes | Oversized]:
    """What LineReader must yield for ``data`` however it arrives: each line cleaned, blank ones skipped,
    one OVERSIZED per line over the limit (counting its ``\\r``)."""
    pieces = data.split(b"\n")
    out: list[bytes | Oversized] = []
    for piece in pieces:
        if len(piece) > limit:
            out.append(OVERSIZED)
            continue
        line = piece[:-1] if piece.endswith(b"\r") else piece
        if line.strip():
            out.append(line)
    return out


async def _read_all(chunks: list[bytes], limit: int) -> list[bytes | Oversized]:
    return [line async for line in LineReader(_Chunks(chunks), limit)]


_LINE = st.one_of(
    st.binary(max_size=24).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b"\r", b"  \t", b'{"a":1}', b'{"a":1}\r', b" {}", b"\x0b", b"x" * 16, b"y" * 17]),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=8), final=st.booleans(), cuts=st.lists(st.integers(0, 200), max_size=6))
def test_the_line_reader_yields_the_same_lines_however_the_input_is_cut(
        lines: list[bytes], final: bool, cuts: list[int]) -> None:
    limit = 16
    data = b"".join(line + b"\n" for line in lines) + (b"tail" if final else b"")
    expected = _expected_lines(data, limit)
    # One line per read (the reader's shortcut), arbitrary cuts, and everything at once all agree.
    per_line = [line + b"\n" for line in lines] + ([b"tail"] if final else [])
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    cut = [data[a:b] for a, b in itertools.pairwise(points) if b > a]
    for chunks in (per_line, cut, [data]):
        assert anyio.run(_read_all, chunks, limit) == expected, chunks


@pytest.mark.parametrize("id_", [0, 7, -3, "abc", 'q"uote', 2.0])
@pytest.mark.parametrize("result", [None, {}, {"messageId": "msg_1"}, {"sum": 5, "nested": [1, {"x": None}]}])
def test_a_plain_answer_is_the_bytes_the_envelope_joins_to(id_: Any, result: Any) -> None:
    expected = b'{"jsonrpc":"2.0","id":' + orjson.dumps(id_) + b',"result":' + (
        b"{}" if result is None else orjson.dumps(result)) + b"}\n"
    assert _response_bytes(id_, None, result) == expected
    error = {"code": -32600, "message": "Invalid request"}
    assert _response_bytes(id_, error, None) == (
        b'{"jsonrpc":"2.0","id":' + orjson.dumps(id_) + b',"error":' + orjson.dumps(error) + b"}\n")
