"""Retained history: folding chunks, patching entities, bounded terminal tails."""

from __future__ import annotations

import base64

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_agent._session.sink import SessionSink
from acp_agent.history import History
from acp_agent.schema import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    TerminalOutput,
    TerminalOutputChunk,
    TerminalUpdate,
    TextContent,
    ToolCallUpdate,
    UserMessage,
    UserMessageChunk,
    to_wire,
)
from acp_agent.schema.base import to_json


def test_text_chunks_fold_into_one_message() -> None:
    history = History()
    for piece in ("a", "b", "c"):
        history.record(AgentMessageChunk(message_id="m1", content=TextContent(text=piece)))
    history.append_text(False, "m1", "d")
    [message] = [to_wire(u) for u in history.replay()]
    assert message == {
        "sessionUpdate": "agent_message", "messageId": "m1", "content": [{"type": "text", "text": "abcd"}]
    }


def test_tool_call_patches_merge_and_keep_null() -> None:
    history = History()
    history.record(ToolCallUpdate(tool_call_id="c1", title="t", kind="read", status="pending"))
    history.record(ToolCallUpdate(tool_call_id="c1", status="in_progress", raw_input=None))
    assert to_wire(history.current("tool_call", "c1")) == {
        "sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "t", "kind": "read",
        "status": "in_progress", "rawInput": None,
    }


def test_terminal_tail_is_bounded_and_exact() -> None:
    history = History(terminal_tail=10)
    history.record(TerminalUpdate(terminal_id="t1", command="x"))
    stream = b""
    for i in range(50):
        piece = bytes([65 + i % 26]) * (i % 7 + 1)
        stream += piece
        if i % 2:
            history.append_output("t1", piece)
        else:
            history.record(TerminalOutputChunk(terminal_id="t1", data=base64.b64encode(piece).decode()))
    assert history.output("t1") == stream[-10:]
    current = history.current("terminal", "t1")
    assert isinstance(current, TerminalUpdate) and isinstance(current.output, TerminalOutput)
    assert base64.b64decode(current.output.data) == stream[-10:]
    # an output snapshot replaces what was retained
    history.record(TerminalUpdate(terminal_id="t1", output=TerminalOutput(data=base64.b64encode(b"fresh").decode())))
    assert history.output("t1") == b"fresh"


def test_fork_copy_is_independent() -> None:
    history = History()
    history.append_output("t1", b"abc")
    copy = history.copy()
    history.append_output("t1", b"def")
    assert copy.output("t1") == b"abc" and history.output("t1") == b"abcdef"


def test_long_text_streams_are_joined_as_they_grow() -> None:
    history = History()
    pieces = [f"chunk {i} " for i in range(5000)]
    for i, piece in enumerate(pieces):
        if i % 2:
            history.append_text(False, "m1", piece)
        else:
            history.record(AgentMessageChunk(message_id="m1", content=TextContent(text=piece)))
    copy = history.copy()
    history.append_text(False, "m1", "tail")
    [message] = [to_wire(u) for u in history.replay()]
    assert message["content"] == [{"type": "text", "text": "".join(pieces) + "tail"}]
    [copied] = [to_wire(u) for u in copy.replay()]
    assert copied["content"] == [{"type": "text", "text": "".join(pieces)}]
    # Memory follows the text, not the number of chunks: every 256 chunks become one string.
    stored = next(iter(history._entries.values())).text
    assert stored is not None and len(stored) == 5001 // 256 + 5001 % 256


def test_a_first_full_update_is_kept_as_recorded_until_it_is_saved_or_changes() -> None:
    untracked = History()  # no store saves it: nothing is kept
    untracked.record(AgentMessage(message_id="m0", content=[TextContent(text="hi")]))
    assert not any(entry.model for entry in untracked._entries.values())
    history = History()
    history.take_changes()  # tracking, as once a store saved it
    message = AgentMessage(message_id="m1", content=[TextContent(text="hi")])
    history.record(message)
    history.record(UserMessage(message_id="u1", content=[TextContent(text="q")], meta={"k": 1}))
    call = ToolCallUpdate(tool_call_id="c1", title="t", status="pending")
    history.record(call)
    # Saving and replaying the untouched message use the recorded model (no rebuild); the same wire
    # shape as a rebuild from the folded fields.
    saved = dict(history.take_changes().entries)
    assert saved[1] is message
    assert next(history.replay()) is not message  # kept for that save only: rebuilt from here on
    assert to_wire(saved[2]) == {"sessionUpdate": "user_message", "messageId": "u1",
                                 "content": [{"type": "text", "text": "q"}], "_meta": {"k": 1}}
    # Any later change of the entity drops the kept model: chunks, patches, plain text.
    history.record(AgentMessageChunk(message_id="m1", content=TextContent(text=" there")))
    history.record(ToolCallUpdate(tool_call_id="c1", status="completed"))
    [(_, merged), (_, patched)] = history.take_changes().entries
    assert to_wire(merged) == {"sessionUpdate": "agent_message", "messageId": "m1",
                               "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": " there"}]}
    assert to_wire(patched) == {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "t",
                                "status": "completed"}
    assert to_wire(message) == {"sessionUpdate": "agent_message", "messageId": "m1",
                                "content": [{"type": "text", "text": "hi"}]}  # the recorded model is untouched
    history.append_text(False, "m1", "!")
    assert to_wire(history.current("tool_call", "c1")) == to_wire(patched)
    [replayed, *_] = history.replay()
    assert to_wire(replayed)["content"] == [{"type": "text", "text": "hi"}, {"type": "text", "text": " there!"}]


def test_the_json_an_update_was_sent_as_is_saved_with_it_until_the_entry_changes() -> None:
    history = History()
    history.record(AgentMessage(message_id="m0", content=[TextContent(text="early")]), b"m0 as sent")
    first = history.take_changes()  # the first save writes everything; an entry recorded untracked kept nothing
    assert first.full and first.encoded == {}
    sent = AgentMessage(message_id="m1", content=[TextContent(text="hi")])
    history.record(sent, b"m1 as sent")
    history.record(UserMessage(message_id="u1", content=[TextContent(text="q")]))  # sent without its JSON
    changes = history.take_changes()
    assert changes.encoded == {2: b"m1 as sent"}
    assert [seq for seq, _ in changes.entries] == [2, 3]
    assert history.take_changes().encoded == {}  # kept for one save only
    history.record(ToolCallUpdate(tool_call_id="c1", title="t", status="pending"), b"c1 as sent")
    history.record(ToolCallUpdate(tool_call_id="c1", status="completed"), b"c1 patch as sent")
    assert history.take_changes().encoded == {}  # changed before the save: rebuilt and serialized by the store
    history.unsaved()
    history.record(AgentMessage(message_id="m2", content=[TextContent(text="x")]), b"m2 as sent")
    assert history.take_changes().encoded == {5: b"m2 as sent"}  # a full save after a failure still uses it


def test_streamed_text_after_a_save_is_a_change_again() -> None:
    history = History()
    history.take_changes()
    for piece in ("a", "b", "c"):
        history.append_text(False, "m1", piece)
    assert [seq for seq, _ in history.take_changes().entries] == [1]
    assert history.take_changes().entries == []
    history.append_text(False, "m1", "d")  # the run is still open: the entry must be marked changed again
    history.append_text(False, "m1", "e")
    [(seq, item)] = history.take_changes().entries
    assert seq == 1 and to_wire(item)["content"] == [{"type": "text", "text": "abcde"}]


class _Dropped:
    """A writer that drops what it is given."""

    def send_nowait(self, data: bytes) -> bool:
        return False


_PLAIN = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["user", "agent", "thought"]), texts=st.lists(_PLAIN, max_size=3),
       earlier=st.sampled_from([None, "whole", "chunk"]), tracked=st.booleans(), chunk_after=st.booleans())
def test_a_message_recorded_without_its_model_is_kept_as_the_model_would_be(
    kind: str, texts: list[str], earlier: str | None, tracked: bool, chunk_after: bool
) -> None:
    """``SessionSink.record_plain`` (``say()`` of text, a text prompt's echo) sends and keeps exactly what
    ``record`` of the built model would: the same line, replay, saved changes and their bytes."""
    cls: type[UserMessage | AgentMessage | AgentThought] = {
        "user": UserMessage, "agent": AgentMessage, "thought": AgentThought}[kind]
    chunk_cls = {"user": UserMessageChunk, "agent": AgentMessageChunk, "thought": AgentThoughtChunk}[kind]
    by_model, plain = History(), History()
    sinks = [SessionSink(_Dropped(), "s1", h) for h in (by_model, plain)]  # type: ignore[arg-type]
    for history in (by_model, plain):
        if tracked:
            history.take_changes()  # as once a store saved it
        # The same id sent before (a whole message, or a chunk that left a text run open): the whole
        # message replaces its content.
        if earlier == "whole":
            history.record(cls(message_id="m", content=[TextContent(text="old")]))
        elif earlier == "chunk":
            history.record(chunk_cls(message_id="m", content=TextContent(text="old")))
    message = cls(message_id="m", content=[TextContent(text=t) for t in texts])
    line = sinks[0].record(message)
    assert sinks[1].record_plain(cls, "m", list(message.content)) == line
    if chunk_after:
        for history in (by_model, plain):
            history.record(chunk_cls(message_id="m", content=TextContent(text="more")))
    saved = [h.take_changes() for h in (by_model, plain)]
    assert saved[0].encoded_entries() == saved[1].encoded_entries()
    assert saved[0].encoded == saved[1].encoded
    assert [(seq, to_wire(item)) for seq, item in saved[0].entries] == [
        (seq, to_wire(item)) for seq, item in saved[1].entries]
    assert [to_wire(u) for u in by_model.replay()] == [to_wire(u) for u in plain.replay()]


_ANY_TEXT = st.text(max_size=6)  # lone surrogates too: those messages take the model's serializer


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["user", "agent", "thought"]), chunks=st.lists(_ANY_TEXT, min_size=1, max_size=300),
       before=st.sampled_from([None, "plain", "annotated", "meta", "block", "patch"]), saves=st.booleans())
def test_a_streamed_message_is_saved_as_the_json_of_its_rebuilt_model(
    kind: str, chunks: list[str], before: str | None, saves: bool
) -> None:
    """A message ending in a run of text chunks is saved without building its model (``orjson``, as ``say()``):
    the bytes are what the rebuilt model serializes to, whatever came before the run."""
    cls: type[UserMessage | AgentMessage | AgentThought] = {
        "user": UserMessage, "agent": AgentMessage, "thought": AgentThought}[kind]
    chunk_cls = {"user": UserMessageChunk, "agent": AgentMessageChunk, "thought": AgentThoughtChunk}[kind]
    history = History()
    history.take_changes()
    if before == "plain":
        history.record(cls(message_id="m", content=[TextContent(text="a"), TextContent(text="b\n")]))
    elif before == "annotated":
        history.record(cls(message_id="m", content=[TextContent(text="a", annotations={"priority": 1})]))
    elif before == "meta":
        history.record(cls(message_id="m", content=[TextContent(text="a")], meta={"k": 1}))
    elif before == "block":
        history.record(chunk_cls(message_id="m", content=TextContent(text="x", meta={"k": 1})))
    elif before == "patch":
        history.record(cls(message_id="m", content=[TextContent(text="a")], extra_key=1))  # type: ignore[call-arg]
    for i, text in enumerate(chunks):
        if kind == "user":
            history.record(chunk_cls(message_id="m", content=TextContent(text=text)))
        else:
            history.append_text(kind == "thought", "m", text)
        if saves and i % 97 == 96:
            history.take_changes()  # a save in the middle: the run goes on, the entry changed again
    [item] = list(history.replay())
    [(seq, name, data)] = history.take_changes().encoded_entries()
    assert (seq, name) == (1, cls.__name__)
    assert data == to_json(item)
    if before in (None, "plain") and not any(0xD800 <= ord(c) <= 0xDFFF for c in "".join(chunks)):
        history.append_text(kind == "thought", "m", "z") if kind != "user" else history.record(
            chunk_cls(message_id="m", content=TextContent(text="z")))
        [(_, _, item_json, known)] = history.take_changes()._rows
        assert item_json is None and known is not None  # no model built to save it


def test_only_plain_text_messages_skip_the_model() -> None:
    history = History()
    sink = SessionSink(_Dropped(), "s1", history)  # type: ignore[arg-type]
    annotated = TextContent(text="x", annotations={"priority": 1})
    for content in ([annotated], [TextContent(text="\ud800")], [TextContent(text="x", extra=1)]):  # type: ignore[call-arg]
        assert sink.record_plain(AgentMessage, "m", content) is None
    assert sink.record_plain(ToolCallUpdate, "m", [TextContent(text="x")]) is None  # not a message
    assert sink.record_plain(AgentMessage, 7, [TextContent(text="x")]) is None  # type: ignore[arg-type]
    assert len(history) == 0  # nothing recorded for what it refused


def test_a_saved_entry_known_by_its_json_is_built_only_when_asked_for() -> None:
    history = History()
    sink = SessionSink(_Dropped(), "s1", history)  # type: ignore[arg-type]
    history.take_changes()
    sink.record_plain(AgentMessage, "m1", [TextContent(text="hi")])
    [entry] = history._entries.values()
    assert entry.model is None and entry.encoded is not None  # no model built to send or keep it
    changes = history.take_changes()
    assert changes.encoded_entries() == [(1, "AgentMessage", entry_json := changes.encoded[1])]
    assert b'"messageId":"m1"' in entry_json
    [(seq, item)] = changes.entries  # parsed from those bytes on demand
    assert seq == 1 and type(item) is AgentMessage and to_wire(item) == orjson.loads(entry_json)


def test_text_chunks_of_interleaved_streams_each_reach_their_own_message() -> None:
    history = History()
    ids = ["m1", "m2"]
    for i in range(600):  # past the joins of long runs
        history.append_text(i % 3 == 0, ids[i % 2], f"{i},")
        if i == 300:
            history.take_changes()  # saved: the next chunk of each entry marks it changed again
            assert not history.changed
            history.append_text(False, "m1", "")
            assert history.changed
    history.append_text(False, "".join(["m", "1"]), "end")  # an equal id that is another string object
    texts = {(type(u).__name__, u.message_id): u.content[0].text for u in history.replay()}  # type: ignore[union-attr]
    expected: dict[tuple[str, str], str] = {}
    for i in range(600):
        key = ("AgentThought" if i % 3 == 0 else "AgentMessage", ids[i % 2])
        expected[key] = expected.get(key, "") + f"{i},"
    expected[("AgentMessage", "m1")] += "end"
    assert texts == expected


def test_a_plain_text_block_is_kept_as_its_text() -> None:
    """A message's plain text blocks are kept as their strings, not models (memory: a long session keeps
    thousands), and come back as the same blocks; a block with more than its text stays the model it was."""
    history = History()
    sink = SessionSink(_Dropped(), "s1", history)  # type: ignore[arg-type]
    annotated = TextContent(text="b", annotations={"priority": 1})
    sink.record_plain(UserMessage, "u", [TextContent(text="a"), TextContent(text="b")])
    history.record(AgentMessage(message_id="m", content=[TextContent(text="a"), annotated]))
    history.append_text(False, "m", "c")
    history.record(AgentMessageChunk(message_id="m", content=TextContent(text="d", meta={"k": 1})))
    kept = [entry.fields["content"] for entry in history._entries.values()]
    assert kept == [["a", "b"], ["a", annotated, "c", TextContent(text="d", meta={"k": 1})]]
    assert [to_wire(u) for u in history.replay()] == [
        {"sessionUpdate": "user_message", "messageId": "u",
         "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"sessionUpdate": "agent_message", "messageId": "m",
         "content": [{"type": "text", "text": "a"}, to_wire(annotated), {"type": "text", "text": "c"},
                     {"type": "text", "text": "d", "_meta": {"k": 1}}]},
    ]
