"""The byte streams of a connection that may speak v1: watch, then pass through or translate.

`negotiating_streams` wraps the streams a `Connection` reads
and writes. Until the client's ``initialize`` they only watch (see `negotiation`);
version 1 switches the connection to v1, 2 or more to v2. In v2 mode bytes pass through
untouched. In v1 mode whole lines go through a `V1Translator` both ways,
and what the bridge answers the client itself is written under the same lock as the
runtime's output, so lines never interleave. While it waits for the client, the receiving side
also sends the v1 terminal output the translator held back when it falls due. A line that is
not JSON reaches the runtime as is (it answers -32700). An unfinished last line at end of input is still delivered.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream

from .messages import Message
from .negotiation import Mode, list_version_1, old_initialize, probe

if TYPE_CHECKING:
    from .translator import V1Translator

__all__ = ["INITIALIZE_WAIT", "PROBE_LIMIT", "negotiating_streams"]

PROBE_LIMIT: Final = 1 << 20
"""Bytes of a first line the bridge looks into before it gives up watching (pass-through)."""


INITIALIZE_WAIT: Final = 10.0
"""Seconds a session request sent before the agent's ``initialize`` answer waits for it (then goes on)."""

_SESSION_OPENERS: Final = frozenset({"session/new", "session/load", "session/resume"})


def _waits_for_initialize(translator: V1Translator, message: object) -> bool:
    """A request that opens a session, read while the agent's ``initialize`` answer is still out: its
    translation depends on the agent's capabilities (which stdio MCP servers it takes)."""
    return (translator.state.initializing and isinstance(message, dict)
            and message.get("method") in _SESSION_OPENERS)


class _Bridge:
    """The shared state of one connection's two wrapped streams."""

    def __init__(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        self.outer_receive = receive
        self.outer_send = send
        self.mode: Mode = "probe"
        self.translator: V1Translator | None = None
        self.in_buffer = bytearray()
        self.out_buffer = bytearray()
        self.eof = False
        self.lock = anyio.Lock()
        self.refused: set[str] = set()
        """Ids of ``initialize`` requests below version 1 seen while watching (their -32022 lists 1 as well)."""
        self.answered = anyio.Event()
        """Set when the runtime's ``initialize`` answer went through the translator."""
        self.held = False
        """Client lines were put back in ``in_buffer`` to wait for that answer (handled before reading more)."""

    async def to_client(self, messages: list[Message]) -> None:
        if messages:
            data = b"".join(orjson.dumps(m) + b"\n" for m in messages)
            async with self.lock:
                await self.outer_send.send(data)


class _BridgeReceive(ByteReceiveStream):
    """What the connection reads: the client's bytes, translated once the client chose v1."""

    def __init__(self, bridge: _Bridge) -> None:
        self._b = bridge

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Next bytes for the runtime (raw in v2 mode, translated lines in v1 mode)."""
        b = self._b
        while True:
            if b.mode == "v2" and not b.in_buffer:
                return await b.outer_receive.receive(max_bytes)
            if b.eof:
                if b.in_buffer:
                    rest = bytes(b.in_buffer) + (b"" if b.in_buffer.endswith(b"\n") else b"\n")
                    b.in_buffer.clear()
                    out = await self._lines(rest)
                    if out:
                        return out
                    continue
                raise anyio.EndOfStream
            if b.mode == "v2":
                rest = bytes(b.in_buffer)
                b.in_buffer.clear()
                return rest
            if b.held:
                b.held = False
            else:
                try:
                    data = await self._receive(max_bytes)
                except anyio.EndOfStream:
                    b.eof = True
                    continue
                if data is None:
                    continue  # held terminal output was due and went out
                b.in_buffer += data
            end = b.in_buffer.rfind(b"\n")
            if end < 0:
                if b.mode == "probe" and len(b.in_buffer) > PROBE_LIMIT:
                    b.mode = "v2"  # too long for an initialize worth watching: the runtime judges it
                continue
            chunk = bytes(b.in_buffer[: end + 1])
            del b.in_buffer[: end + 1]
            out = await self._lines(chunk)
            if out:
                return out

    async def _receive(self, max_bytes: int) -> bytes | None:
        """The client's next bytes; ``None`` when, waiting for them, held v1 terminal output fell due (then sent)."""
        b = self._b
        due = b.translator.due() if b.translator is not None else None
        if due is None:
            return await b.outer_receive.receive(max_bytes)
        with anyio.move_on_after(max(0.0, due - time.monotonic())):
            return await b.outer_receive.receive(max_bytes)
        if b.translator is not None:
            await b.to_client(b.translator.flush())
        return None

    async def _lines(self, chunk: bytes) -> bytes:
        b = self._b
        out: list[bytes] = []
        lines = chunk.splitlines(keepends=True)
        for index, line in enumerate(lines):
            if b.mode == "probe":
                b.mode = probe(line)
                if b.mode == "probe" and (old := old_initialize(line)) is not None:
                    b.refused.add(old)
                if b.mode == "v1":
                    from .translator import V1Translator  # here: a v2 client never loads the translation

                    b.translator = V1Translator()
            if b.mode != "v1" or b.translator is None:
                out.append(line)
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                out.append(line)  # the runtime answers -32700
                continue
            if _waits_for_initialize(b.translator, message):
                if out:  # the runtime gets the initialize first, then this line comes back here
                    b.in_buffer[:0] = b"".join(lines[index:])
                    b.held = True
                    return b"".join(out)
                with anyio.move_on_after(INITIALIZE_WAIT):
                    await b.answered.wait()
            to_runtime, to_client = b.translator.incoming(message)
            out.extend(orjson.dumps(m) + b"\n" for m in to_runtime)
            await b.to_client(to_client)
        return b"".join(out)

    async def aclose(self) -> None:
        """Close the client's stream."""
        await self._b.outer_receive.aclose()


class _BridgeSend(ByteSendStream):
    """What the connection writes: passed through in v2 mode, translated to v1 in v1 mode."""

    def __init__(self, bridge: _Bridge) -> None:
        self._b = bridge

    def write_now(self, item: bytes) -> int:
        """In v2 mode, what the client's stream takes of ``item`` without waiting (see
        `flush_now`); otherwise ``0``: nothing is written here."""
        if self._b.mode != "v2":
            return 0
        write_now = getattr(self._b.outer_send, "write_now", None)
        return write_now(item) if write_now is not None else 0

    async def send(self, item: bytes) -> None:
        """Write the runtime's bytes, translated when the connection speaks v1."""
        b = self._b
        if b.mode == "v2":
            await b.outer_send.send(item)
            return
        if b.mode == "probe" or b.translator is None:
            if b.refused:
                item = list_version_1(item, b.refused)
            async with b.lock:
                await b.outer_send.send(item)
            return
        b.out_buffer += item
        end = b.out_buffer.rfind(b"\n")
        if end < 0:
            return
        chunk = bytes(b.out_buffer[: end + 1])
        del b.out_buffer[: end + 1]
        messages: list[Message] = []
        for line in chunk.splitlines():
            if not line.strip():
                continue
            parsed = orjson.loads(line)
            if isinstance(parsed, list):
                translated = [m for entry in parsed for m in b.translator.outgoing(entry)]
                responses = [m for m in translated if "method" not in m]
                messages.extend(m for m in translated if "method" in m)
                if responses:
                    messages.append(responses)  # type: ignore[arg-type]  # a batch answer stays one array
            else:
                messages.extend(b.translator.outgoing(parsed))
        if b.translator.state.initialized and not b.answered.is_set():
            b.answered.set()
        await b.to_client(messages)

    async def aclose(self) -> None:
        """Close the client's stream."""
        await self._b.outer_send.aclose()


def negotiating_streams(
    receive: ByteReceiveStream, send: ByteSendStream
) -> tuple[ByteReceiveStream, ByteSendStream]:
    """Wrap a connection's streams so a client that initializes with version 1 is served in v1 shapes."""
    bridge = _Bridge(receive, send)
    return _BridgeReceive(bridge), _BridgeSend(bridge)
