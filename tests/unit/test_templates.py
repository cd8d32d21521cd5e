"""Every hand-framed template of ``acp_agent._wire.templates`` gives the bytes the pydantic model serializes to."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from acp_agent._wire import templates
from acp_agent.schema import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    IdleStateUpdate,
    PromptResponse,
    RequiresActionStateUpdate,
    RunningStateUpdate,
    TerminalOutputChunk,
    TextContent,
    UserMessage,
)
from acp_agent.schema.base import to_json

TEXTS = ["", "hello", 'quo"te \\ back', "tab\tnew\nline\x00\x1f", "héllo wörld ✓", "emoji 🎉 𝄞", "\u2028\u2029", "/"]
IDS = ["msg_1", "", 'id "q"', "ünï", "🎉"]
STOP_REASONS = ["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error", "custom/ünï \"x\""]


def _line(session_id: str, update: Any) -> bytes:
    """The ``session/update`` line the model path writes, built from the envelope dict and the model's JSON."""
    envelope = {"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": session_id, "update": orjson.Fragment(to_json(update))}}
    return orjson.dumps(envelope) + b"\n"


@pytest.mark.parametrize("session_id", IDS)
def test_update_prefix_and_tail_frame_a_model(session_id: str) -> None:
    update = AgentMessage(message_id="m", content=[TextContent(text="x")])
    assert templates.update_prefix(session_id) + to_json(update) + templates.UPDATE_TAIL == _line(session_id, update)
    assert templates.update_prefix(session_id).startswith(templates.UPDATE_HEAD)


@pytest.mark.parametrize("thought", [False, True])
@pytest.mark.parametrize("message_id", IDS)
@pytest.mark.parametrize("text", TEXTS)
def test_text_chunk(thought: bool, message_id: str, text: str) -> None:
    prefix = templates.update_prefix("sess_1")
    head = templates.text_chunk_head(prefix, thought, message_id)
    cls = AgentThoughtChunk if thought else AgentMessageChunk
    model = cls(message_id=message_id, content=TextContent(text=text))
    assert head + orjson.dumps(text) + templates.TEXT_TAIL == _line("sess_1", model)


def test_text_chunk_with_a_lone_surrogate_is_left_to_the_model() -> None:
    # orjson refuses a lone surrogate; the sink then records nothing (the hot path raises before it records).
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps("a\ud800b")


@pytest.mark.parametrize("terminal_id", ["term_1", "ünï", 'q"'])
@pytest.mark.parametrize("data", [b"", b"hello\n", bytes(range(256)), "ünï\r\n".encode()])
def test_output_chunk(terminal_id: str, data: bytes) -> None:
    prefix = templates.update_prefix("sess_1")
    head = templates.output_chunk_head(prefix, terminal_id)
    model = TerminalOutputChunk(terminal_id=terminal_id, data=base64.b64encode(data).decode())
    assert templates.output_chunk_line(head, data) == _line("sess_1", model)
    assert templates.output_chunk_line(head, data).endswith(templates.OUTPUT_TAIL)


@pytest.mark.parametrize("state", ["running", "requires_action", "idle"])
def test_empty_list_snapshot_without_a_stop_reason(state: str) -> None:
    model = {"running": RunningStateUpdate, "requires_action": RequiresActionStateUpdate,
             "idle": IdleStateUpdate}[state](background=[])
    assert templates.empty_list_snapshot(state, None) == to_json(model)


@pytest.mark.parametrize("stop_reason", STOP_REASONS)
def test_empty_list_snapshot_with_a_stop_reason(stop_reason: str) -> None:
    model = IdleStateUpdate(background=[], stop_reason=stop_reason)
    assert templates.empty_list_snapshot("idle", stop_reason) == to_json(model)


def test_empty_list_snapshot_leaves_a_lone_surrogate_to_the_model() -> None:
    assert templates.empty_list_snapshot("idle", "bad\ud800") is None


@pytest.mark.parametrize("cls", [UserMessage, AgentMessage, AgentThought])
@pytest.mark.parametrize("message_id", IDS)
@pytest.mark.parametrize("texts", [[], ["one"], TEXTS])
def test_plain_message(cls: type[Any], message_id: str, texts: list[str]) -> None:
    content = [TextContent(text=t) for t in texts]
    model = cls(message_id=message_id, content=content)
    head = templates.plain_message_head(cls)
    assert templates.plain_message_json(head, message_id, content) == to_json(model)
    assert model.__pydantic_fields_set__ == templates.PLAIN_MESSAGE_FIELDS


@pytest.mark.parametrize("extra", ["tail", ""])
def test_plain_message_with_an_extra_text(extra: str) -> None:
    content = [TextContent(text="a")]
    model = AgentMessage(message_id="m", content=[*content, TextContent(text=extra)])
    head = templates.plain_message_head(AgentMessage)
    assert templates.plain_message_json(head, "m", content, extra) == to_json(model)


def test_plain_message_refuses_what_is_not_plain() -> None:
    head = templates.plain_message_head(AgentMessage)
    annotated = TextContent.model_validate({"type": "text", "text": "a", "_meta": {"k": 1}})
    assert templates.plain_message_json(head, "m", [annotated]) is None
    extra = TextContent.model_validate({"type": "text", "text": "a", "x": 1})
    assert templates.plain_message_json(head, "m", [extra]) is None
    assert templates.plain_message_json(head, "m", [TextContent(text="a\ud800")]) is None


@pytest.mark.parametrize("method", ["session/request_permission", "x/ünï", 'q"'])
@pytest.mark.parametrize("params", [{}, {"sessionId": "s", "text": "🎉 \"q\""}])
def test_envelopes(method: str, params: dict[str, Any]) -> None:
    body = orjson.dumps(params)
    notification = templates.notification_line(method, body)
    assert notification == orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n"
    assert notification.startswith(templates.HEAD_NOTIFY)
    for request_id in (0, 7, 2**40):
        request = templates.request_line(request_id, method, body)
        assert request == orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n"
        assert not request.startswith(templates.HEAD_NOTIFY)


@pytest.mark.parametrize("request_id", [0, 5, -3, "1", "ünï", 'q"'])
def test_result_line(request_id: Any) -> None:
    body = to_json(PromptResponse(message_id="m_ünï \"1\""))
    expected = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": orjson.Fragment(body)}) + b"\n"
    assert templates.result_line(request_id, body) == expected


@pytest.mark.parametrize("pieces", [[], [""], ["a"], ["a", "", 'b"\n\\', "🎉 ü\x00"], ["x" * 3000] * 5])
@pytest.mark.parametrize("content", [[], [TextContent(text="first")]])
def test_plain_message_with_an_extra_text_in_pieces(pieces: list[str], content: list[TextContent]) -> None:
    """A streamed message's text given as its pieces (escaped one at a time) gives the same bytes as the whole text."""
    head = templates.plain_message_head(AgentMessage)
    assert templates.plain_message_json(head, "m", content, pieces) == templates.plain_message_json(
        head, "m", content, "".join(pieces)) == to_json(
        AgentMessage(message_id="m", content=[*content, TextContent(text="".join(pieces))]))
    assert templates.plain_message_json(head, "m", content, [*pieces, "\ud800"]) is None
