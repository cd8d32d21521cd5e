"""The way out to the client: the Writer's direct writes, the stdio descriptors, message framing (framing.py,
stdio.py, sink.py)."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from anyio.abc import ByteSendStream
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_agent._wire.framing import DIRECT_WRITE_BYTES, TextFrame, Writer
from acp_agent.history import History
from acp_agent.schema.base import to_json
from acp_agent.stdio import FdReceiveStream, FdSendStream

pytestmark = pytest.mark.anyio


class Recording(ByteSendStream):
    """A stream that records what it is given; ``take`` bytes per ``write_now`` (``None``: all)."""

    def __init__(self, take: int | None = None, *, direct: bool = True) -> None:
        self.sent: list[bytes] = []
        self.direct: list[bytes] = []
        self.take = take
        self.gate: anyio.Event | None = None
        if not direct:
            self.write_now = None  # type: ignore[assignment]

    async def send(self, item: bytes) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.sent.append(item)

    def write_now(self, item: bytes) -> int:
        taken = len(item) if self.take is None else min(self.take, len(item))
        if taken:
            self.direct.append(item[:taken])
        return taken

    async def aclose(self) -> None:
        pass

    def everything(self) -> bytes:
        return b"".join(self.direct) + b"".join(self.sent)


async def test_flush_now_writes_the_queue_on_the_callers_step() -> None:
    stream = Recording()
    writer = Writer(stream)
    writer.send_nowait(b"a\n")
    writer.send_nowait(b"b\n")
    writer.flush_now()
    assert stream.direct == [b"a\nb\n"] and writer.queued_bytes == 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.drain()
        writer.close()
    assert stream.sent == []  # the writer task found nothing left to write


async def test_flush_now_keeps_what_the_stream_did_not_take_queued_in_order() -> None:
    stream = Recording(take=3)
    writer = Writer(stream)
    for line in (b"one\n", b"two\n", b"three\n"):
        writer.send_nowait(line)
    writer.flush_now()
    assert stream.direct == [b"one"] and writer.queued_bytes == len(b"\ntwo\nthree\n")
    writer.send_nowait(b"four\n")
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        await writer.drain()
        writer.close()
    assert stream.everything() == b"one\ntwo\nthree\nfour\n"


async def test_flush_now_does_nothing_while_the_writer_task_writes_or_without_direct_writes() -> None:
    stream = Recording()
    stream.gate = anyio.Event()
    writer = Writer(stream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        writer.send_nowait(b"first\n")
        await anyio.wait_all_tasks_blocked()  # the writer task is inside send(), held by the gate
        writer.send_nowait(b"second\n")
        writer.flush_now()
        assert stream.direct == []  # "second" must not overtake "first"
        stream.gate.set()
        await writer.drain()
        writer.close()
    assert stream.sent == [b"first\n", b"second\n"]

    plain = Recording(direct=False)
    writer = Writer(plain)
    writer.send_nowait(b"x\n")
    writer.flush_now()
    assert writer.queued_bytes == 2 and plain.direct == []


async def test_a_producer_over_the_mark_writes_the_batch_itself_when_the_stream_takes_it() -> None:
    stream = Recording()
    writer = Writer(stream, high_water=4)
    for i in range(10):
        if writer.send_nowait(b"%d\n" % i):
            await writer.backpressure()  # no writer task runs: only a direct write can make room
    assert b"".join(stream.direct) + b"".join(writer._queue) == b"".join(b"%d\n" % i for i in range(10))
    assert not writer.full()


async def test_a_producer_waits_when_the_stream_takes_nothing() -> None:
    stream = Recording(take=0)
    writer = Writer(stream, high_water=2)
    for i in range(3):
        writer.send_nowait(b"%d\n" % i)
    with anyio.move_on_after(0.2) as waited:
        await writer.backpressure()
    assert waited.cancelled_caught  # still full: it waits for the writer task


async def test_stdout_takes_direct_writes_without_waiting() -> None:
    read_fd, write_fd = os.pipe()
    try:
        send = FdSendStream(write_fd)
        assert send.write_now(b"hello\n") == 6
        assert os.read(read_fd, 100) == b"hello\n"
        big = b"x" * (4 << 20)
        written = send.write_now(big)
        assert 0 < written < len(big)  # what fits now; the rest waits for the writer task
        assert send.write_now(b"more") == 0  # full: nothing taken, no error
    finally:
        os.close(read_fd)
    with pytest.raises(anyio.BrokenResourceError):
        send.write_now(b"gone")
    os.close(write_fd)


async def test_flush_now_leaves_big_batches_to_the_writer_task() -> None:
    stream = Recording()
    writer = Writer(stream)
    writer.send_nowait(b"x" * DIRECT_WRITE_BYTES + b"\n")
    writer.flush_now()
    assert stream.direct == [] and writer.queued_bytes == DIRECT_WRITE_BYTES + 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio shuffles ready tasks on purpose; see the next test
async def test_receive_lets_ready_tasks_run_before_it_reads() -> None:
    read_fd, write_fd = os.pipe()
    receive = FdReceiveStream(read_fd)
    order: list[str] = []

    async def started() -> None:
        order.append("started by the last line")

    try:
        os.write(write_fd, b"line\n")
        async with anyio.create_task_group() as tg:
            tg.start_soon(started)
            order.append("read " + (await receive.receive()).decode().strip())
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert order == ["started by the last line", "read line"]


async def test_receive_is_a_checkpoint_even_with_data_waiting() -> None:
    read_fd, write_fd = os.pipe()
    receive = FdReceiveStream(read_fd)
    try:
        os.write(write_fd, b"line\n")
        with anyio.CancelScope() as scope:
            scope.cancel()
            await receive.receive()
        assert scope.cancelled_caught
        assert await receive.receive() == b"line\n"  # nothing was read by the cancelled call
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_a_producer_that_writes_directly_still_lets_other_tasks_run() -> None:
    stream = Recording()
    writer = Writer(stream, high_water=4)
    ran = anyio.Event()

    async def other() -> None:
        ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        while not ran.is_set():  # a client that keeps up: every batch is written directly
            if writer.send_nowait(b"chunk\n"):
                await writer.backpressure()
            assert len(stream.direct) < 10, "the producer never gave the event loop back"


async def test_only_a_write_now_that_reports_bytes_written_is_used() -> None:
    class QueueLike(Recording):
        """anyio's memory streams have a ``send_nowait`` that queues and returns ``None``: not a direct write."""

        def send_nowait(self, item: bytes) -> None:
            self.direct.append(item)

        def write_now(self, item: bytes) -> Any:
            return self.send_nowait(item)

    stream = QueueLike()
    writer = Writer(stream)
    writer.send_nowait(b"once\n")
    writer.flush_now()  # write_now said nothing about what it took: the queue keeps it for the writer task
    assert writer.queued_bytes == len(b"once\n")


_PLAIN_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]))  # lone surrogates: no JSON at all


@settings(max_examples=200, deadline=None)
@given(message_id=_PLAIN_TEXT, texts=st.lists(_PLAIN_TEXT, max_size=3),
       kind=st.sampled_from(["user", "agent", "thought"]))
def test_a_plain_text_message_is_framed_to_the_bytes_its_model_serializes_to(
    message_id: str, texts: list[str], kind: str
) -> None:
    from acp_agent._session.sink import _plain_message
    from acp_agent.schema import AgentMessage, AgentThought, TextContent, UserMessage

    cls = {"user": UserMessage, "agent": AgentMessage, "thought": AgentThought}[kind]
    message = cls(message_id=message_id, content=[TextContent(text=t) for t in texts])
    assert _plain_message(message) == to_json(message)


def test_anything_but_plain_text_is_left_to_the_model() -> None:
    from acp_agent._session.sink import SessionSink, _plain_message
    from acp_agent.schema import AgentMessage, ImageContent, TextContent

    text = TextContent(text="x")
    others = [
        AgentMessage(message_id="m", content=[text], meta={"k": 1}),  # _meta
        AgentMessage(message_id="m", content=[TextContent(text="x", annotations={"priority": 1})]),
        AgentMessage(message_id="m", content=[TextContent(text="x", extra_key=1)]),  # type: ignore[call-arg]
        AgentMessage(message_id="m", content=[text], vendor=True),  # type: ignore[call-arg]
        AgentMessage(message_id="m", content=[text, ImageContent(data="AA==", mime_type="image/png")]),
        AgentMessage(message_id="m", content=[TextContent(text="\ud800")]),  # a lone surrogate
    ]
    for message in others:
        assert _plain_message(message) is None
    sink = SessionSink(Recording(), "s1", History())  # type: ignore[arg-type]
    for message in others[:-1]:  # what the model serializes is what is sent and kept
        line = sink.record(message)
        assert line.endswith(to_json(message) + b"}}\n")


@settings(max_examples=200, deadline=None)
@given(state=st.sampled_from(["idle", "running", "requires_action"]), stop_reason=st.none() | st.text())
def test_a_snapshot_with_an_empty_list_is_framed_to_the_bytes_its_model_serializes_to(
    state: str, stop_reason: str | None
) -> None:
    from acp_agent._session.registry import BackgroundRegistry
    from acp_agent._session.sink import SessionSink
    from acp_agent._session.snapshots import StatePublisher

    stop = stop_reason if state == "idle" else None  # only idle carries a stop reason
    recording = Recording()
    publisher = StatePublisher(BackgroundRegistry(), SessionSink(Writer(recording), "s1", History()))
    model = publisher.snapshot(state, stop)  # type: ignore[arg-type]
    publisher.set(state, stop)  # type: ignore[arg-type]
    publisher.set(state, stop)  # type: ignore[arg-type]  # the second time from the publisher's lines
    publisher._sink.flush()
    expected = publisher._sink.frame(model)
    assert b"".join(recording.direct) == expected + expected


# -- streamed text: framed by the writer a run at a time (Writer.send_text, SessionSink.text) --------------------

_ASCII = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=12)  # quotes, backslashes, controls, '","'


def _line(frame: Any, text: str) -> bytes:
    import orjson

    return frame.head + orjson.dumps(text) + frame.tail


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.one_of(st.tuples(st.sampled_from(["a", "b"]), _ASCII), st.just(("line", ""))), max_size=40))
def test_streamed_texts_reach_the_wire_as_the_lines_of_each_text_in_call_order(steps: list[tuple[str, str]]) -> None:
    from acp_agent._wire.framing import TextFrame

    frames = {"a": TextFrame(b'{"x":', b"}\n"), "b": TextFrame(b'{"y":[', b"]}\n")}
    stream = Recording()
    writer = Writer(stream)
    expected = []
    for n, (kind, text) in enumerate(steps):
        if kind == "line":  # another message between texts: texts before it go first
            writer.send_nowait(b"%d\n" % n)
            expected.append(b"%d\n" % n)
        else:
            writer.send_text(frames[kind], text)
            expected.append(_line(frames[kind], text))
        if n % 7 == 6:
            writer.flush_now()
    writer.flush_now()
    assert stream.everything() == b"".join(expected)
    assert writer.queued_bytes == 0


async def test_streamed_texts_count_as_messages_and_bytes_for_backpressure() -> None:
    from acp_agent._wire.framing import TextFrame

    frame = TextFrame(b"<", b">\n")
    stream = Recording(take=0)  # the client reads nothing
    writer = Writer(stream, high_water=4, high_water_bytes=1000)
    assert [writer.send_text(frame, "x") for _ in range(5)] == [False] * 4 + [True]
    assert writer.full() and writer.queued_bytes == 5 * len(b'<"x">\n')
    writer.flush_now()  # nothing taken: the run is sealed into one queued item, still counted exactly
    assert writer.full() and writer.queued_bytes == 5 * len(b'<"x">\n')
    writer = Writer(Recording(take=0), high_water=100, high_water_bytes=20)
    assert writer.send_text(frame, '"\n\x00') is False  # counted at its length (+ quotes) until framed
    assert writer.send_text(frame, "0123456789") is True  # over the byte mark
    writer.flush_now()
    # the escapes are counted once the run is framed
    assert writer.queued_bytes == len(_line(frame, '"\n\x00') + _line(frame, "0123456789"))


async def test_the_writer_task_writes_streamed_texts_and_drain_waits_for_them() -> None:
    from acp_agent._wire.framing import TextFrame

    frame = TextFrame(b"<", b">\n")
    stream = Recording(direct=False)
    writer = Writer(stream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        writer.send_text(frame, "a")
        writer.send_text(frame, "b")
        with anyio.fail_after(5):
            await writer.drain()
        assert stream.sent == [b'<"a">\n<"b">\n']
        writer.close()


async def test_a_broken_writer_drops_streamed_texts() -> None:
    from acp_agent._wire.framing import TextFrame

    class Broken(Recording):
        async def send(self, item: bytes) -> None:
            raise anyio.BrokenResourceError

    frame = TextFrame(b"<", b">\n")
    writer = Writer(Broken(direct=False))
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        writer.send_text(frame, "a")
        with anyio.fail_after(5):
            await writer.drain()
    assert writer.broken and writer.send_text(frame, "b") is False and not writer.full() and writer.queued_bytes == 0


async def test_the_sink_streams_any_text_as_the_chunk_model_serializes_and_records_it() -> None:
    from acp_agent._session.sink import SessionSink
    from acp_agent.schema import AgentMessageChunk, AgentThoughtChunk, TextContent

    stream = Recording()
    writer = Writer(stream)
    history = History()
    sink = SessionSink(writer, "s1", history)
    expected = []
    for thought, text in [(False, "plain"), (False, "é ✓ \u2028"), (True, 'a","b\\'), (False, "")]:
        frame = sink.text_frame(thought, "m1")
        sink.text(frame, thought, "m1", text)
        chunk = (AgentThoughtChunk if thought else AgentMessageChunk)(message_id="m1", content=TextContent(text=text))
        expected.append(sink.frame(chunk))
    writer.flush_now()
    assert stream.everything() == b"".join(expected)
    frame = sink.text_frame(False, "m1")
    with pytest.raises(Exception, match="surrogates"):  # no JSON for a lone surrogate: raised, nothing recorded
        sink.text(frame, False, "m1", "\ud800")
    assert [(type(i).__name__, i.content[0].text) for i in history.replay()] == [  # type: ignore[union-attr]
        ("AgentMessage", "plainé ✓ \u2028"), ("AgentThought", 'a","b\\')]


async def test_text_held_until_the_session_is_announced_goes_out_in_order() -> None:
    from acp_agent._session.sink import SessionSink

    stream = Recording()
    writer = Writer(stream)
    sink = SessionSink(writer, "s1", History(), hold=True)
    frame = sink.text_frame(False, "m1")
    assert sink.text(frame, False, "m1", "a") is False
    writer.send_nowait(b"answer\n")
    sink.release()
    sink.text(frame, False, "m1", "b")
    writer.flush_now()
    assert stream.everything() == b"answer\n" + _line(frame, "a") + _line(frame, "b")


async def test_flush_now_leaves_a_run_its_escapes_made_big_to_the_writer_task() -> None:
    from acp_agent._wire.framing import TextFrame

    frame = TextFrame(b"<", b">\n")
    stream = Recording()
    writer = Writer(stream)
    text = "\x00" * (DIRECT_WRITE_BYTES // 2)  # counted at its length; each character is 6 bytes of JSON
    writer.send_text(frame, text)
    writer.flush_now()
    assert stream.direct == [] and writer.queued_bytes == len(_line(frame, text)) > DIRECT_WRITE_BYTES
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)
        with anyio.fail_after(5):
            await writer.drain()
        writer.close()
    assert stream.sent == [_line(frame, text)]


class _Stuck(ByteSendStream):
    """A client that never reads: every send blocks forever."""

    held = 0  # bytes handed to send() and not written

    async def send(self, item: bytes) -> None:
        self.held += len(item)
        await anyio.sleep_forever()

    async def aclose(self) -> None:
        pass


async def test_streamed_text_needing_escapes_stays_within_the_byte_mark() -> None:
    """A run of texts is counted at their lengths until it is framed (escapes grow control characters 6x): runs
    are framed early enough that a client that never reads still holds the agent's output near the byte mark."""
    frame = TextFrame(b"<", b">\n")
    text = "\x01" * 100_000  # ASCII: 100 kB counted while in the run, 600 kB once framed (\u0001 each)
    mark = 1_000_000
    stream = _Stuck()
    writer = Writer(stream, high_water_bytes=mark)
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.run)

        async def produce() -> None:
            while True:
                if writer.send_text(frame, text):
                    await writer.backpressure()

        tg.start_soon(produce)
        await anyio.sleep(0.2)
        queued = writer.queued_bytes + stream.held
        tg.cancel_scope.cancel()
    one_message = len(frame.head) + len(frame.tail) + 2 + 6 * len(text)
    # As when each text was framed at once: the chunk being written and the queue behind it, each at most one
    # message over the mark (without framing runs early: 7 MB held).
    assert queued <= 2 * (mark + one_message), f"{queued} bytes held for a {mark}-byte mark"
