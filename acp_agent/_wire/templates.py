"""Every hand-framed piece of wire JSON, in one place.

The hot paths write some messages as bytes joined around ``orjson`` output instead of
serializing a pydantic model (a streamed chunk, a turn's snapshots, a plain-text message, the
JSON-RPC envelopes). Each template here must give exactly the bytes the schema's model
serializes to (``acp_agent.schema.base.to_json``: camelCase, unset fields omitted, compact);
``tests/unit/test_templates.py`` compares every one with the model's own output, so a schema
change that a template misses fails there.
"""

from __future__ import annotations

import base64
from typing import Any, Final

import orjson
from pydantic import BaseModel

from .. import schema
from ..schema import TextContent

__all__ = [
    "HEAD_NOTIFY",
    "OUTPUT_TAIL",
    "PLAIN_MESSAGE_FIELDS",
    "TEXT_TAIL",
    "UPDATE_HEAD",
    "UPDATE_TAIL",
    "empty_list_snapshot",
    "notification_line",
    "output_chunk_head",
    "output_chunk_line",
    "plain_message_head",
    "plain_message_json",
    "request_line",
    "result_line",
    "text_chunk_head",
    "update_prefix",
]

# -- JSON-RPC envelopes --------------------------------------------------------------------------

HEAD_NOTIFY: Final = b'{"jsonrpc":"2.0","method":'
"""How every notification line begins (an agent's request line never does: its ``id`` comes first)."""


def notification_line(method: str, params: bytes) -> bytes:
    """The line of a notification of ``method`` with ``params`` (its JSON)."""
    return HEAD_NOTIFY + orjson.dumps(method) + b',"params":' + params + b"}\n"


def request_line(request_id: int, method: str, params: bytes) -> bytes:
    """The line of an outgoing request (our ids are integers) with ``params`` (its JSON)."""
    return b'{"jsonrpc":"2.0","id":%d,"method":' % request_id + orjson.dumps(method) + b',"params":' + params + b"}\n"


def result_line(request_id: Any, result: bytes) -> bytes:
    """The line answering ``request_id`` with ``result`` (its JSON)."""
    return b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + b',"result":' + result + b"}\n"


# -- session/update ------------------------------------------------------------------------------

UPDATE_HEAD: Final = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
"""How every ``session/update`` line begins, up to the session id's JSON string."""

UPDATE_TAIL: Final = b"}}\n"
"""What follows an update's JSON in its ``session/update`` line (closes ``params`` and the message)."""


def update_prefix(session_id: str) -> bytes:
    """The bytes every ``session/update`` line of ``session_id`` starts with, up to the update's JSON."""
    return UPDATE_HEAD + orjson.dumps(session_id) + b',"update":'


TEXT_TAIL: Final = b"}}}}\n"
"""What follows a text chunk's JSON string (closes the content, the update, ``params`` and the message)."""


def text_chunk_head(prefix: bytes, thought: bool, message_id: str) -> bytes:
    """An ``agent_message_chunk`` (or ``agent_thought_chunk``) of plain text up to its text's JSON string."""
    return (
        prefix
        + (b'{"sessionUpdate":"agent_thought_chunk","messageId":' if thought
           else b'{"sessionUpdate":"agent_message_chunk","messageId":')
        + orjson.dumps(message_id)
        + b',"content":{"type":"text","text":'
    )


OUTPUT_TAIL: Final = b'"}}}\n'
"""What follows a terminal output chunk's base64 data."""


def output_chunk_head(prefix: bytes, terminal_id: str) -> bytes:
    """A ``terminal_output_chunk`` of ``terminal_id`` up to (and with the quote opening) its base64 data."""
    return prefix + b'{"sessionUpdate":"terminal_output_chunk","terminalId":' + orjson.dumps(terminal_id) + b',"data":"'


def output_chunk_line(head: bytes, data: bytes) -> bytes:
    """The line of raw output ``data`` (``head``: `output_chunk_head`); base64 needs no JSON escaping."""
    return head + base64.b64encode(data) + OUTPUT_TAIL


def empty_list_snapshot(state: str, stop_reason: str | None) -> bytes | None:
    """The JSON of a ``state_update`` with an empty ``background`` list and nothing else but ``stop_reason``.

    ``None`` if ``orjson`` cannot write the stop reason (a lone surrogate): the model's serializer takes it.
    """
    head = b'{"sessionUpdate":"state_update","state":"' + state.encode() + b'"'
    if stop_reason is not None:
        try:
            head += b',"stopReason":' + orjson.dumps(stop_reason)
        except orjson.JSONEncodeError:
            return None
    return head + b',"background":[]}'


# -- plain-text messages -------------------------------------------------------------------------

_plain_heads: dict[type[BaseModel], bytes] = {}


def plain_message_head(kind: type[BaseModel]) -> bytes | None:
    """The JSON of a user message, agent message or thought (by class) up to its ``messageId`` value; ``None`` for
    any other class. The table is made on first use (by the history), so importing the envelopes here loads no
    session models."""
    if not _plain_heads:
        _plain_heads.update({  # through schema's lazy map: the update models load here, not with this module
            schema.UserMessage: b'{"sessionUpdate":"user_message","messageId":',
            schema.AgentMessage: b'{"sessionUpdate":"agent_message","messageId":',
            schema.AgentThought: b'{"sessionUpdate":"agent_thought","messageId":',
        })
    return _plain_heads.get(kind)


PLAIN_MESSAGE_FIELDS: Final = frozenset({"session_update", "message_id", "content"})
"""The fields of a plain message (its model's fields set, or at most those of its history entry)."""

_TEXT_FIELDS: Final = frozenset({"type", "text"})


def plain_message_json(head: bytes, message_id: str, content: list[Any],
                       text: str | list[str] | None = None) -> bytes | None:
    """The JSON of a message (``head``: its `plain_message_head`) whose blocks are all plain text
    (no annotations, ``_meta`` or extra keys), ``text`` (if given) as one more text block, else ``None``.
    ``text`` may be given as the pieces it is the concatenation of (a streamed message's runs of chunks):
    each piece is escaped on its own, so a long text is never copied whole before its one copy in the
    result (``orjson`` reserves several times a string's length while it writes it).

    Written by ``orjson``: the bytes the message's model serializes to (unset fields omitted), without
    building it. ``None`` also for a lone surrogate, which only the model's serializer takes.
    """
    texts = []
    for block in content:
        if type(block) is not TextContent or block.__pydantic_fields_set__ != _TEXT_FIELDS or block.__pydantic_extra__:
            return None
        texts.append({"type": "text", "text": block.text})
    if isinstance(text, str):
        texts.append({"type": "text", "text": text})
    try:
        parts: list[bytes] = [head, orjson.dumps(message_id), b',"content":', orjson.dumps(texts)]
        if isinstance(text, list):
            parts[-1] = parts[-1][:-1] + (b',{"type":"text","text":"' if texts else b'{"type":"text","text":"')
            parts += [orjson.dumps(piece)[1:-1] for piece in text]  # a copy of each: orjson's own is oversized
            parts.append(b'"}]')
        parts.append(b"}")
        return b"".join(parts)
    except orjson.JSONEncodeError:
        return None
        texts.append({"type": "text", "text": block.text})
    if text is not None:
        texts.append({"type": "text", "text": text})
    try:
        return head + orjson.dumps(message_id) + b',"content":' + orjson.dumps(texts) + b"}"
    except orjson.JSONEncodeError:
        return None
