"""The one path from a session to the wire.

Every ``session/update`` a session sends goes through its `SessionSink`: complete
updates (`SessionSink.send`), already-recorded ones (`SessionSink.resend`) and the
two hot paths, streamed message text (`SessionSink.text`) and terminal output
(`SessionSink.output`). The sink owns the framing (the session's prefix bytes), the
replayable history and back-pressure, and it gates the wire:

- after the session closed nothing goes out (``send`` raises, ``resend`` drops);
- until the client knows the session (the ``session/new`` or ``session/fork`` answer is
  queued) output is held, in order, and released right after that answer; a child session
  created meanwhile holds its output in the same queue, so order across them is kept;
- while a ``session/resume`` replays history, live output is held the same way, and released
  once the ``replay_complete`` marker has gone (`replay` writes past the hold).
"""

from __future__ import annotations

import orjson
from pydantic import BaseModel

from .._wire import templates
from .._wire.framing import TextFrame, Writer
from .._wire.templates import PLAIN_MESSAGE_FIELDS, TEXT_TAIL, UPDATE_TAIL, plain_message_head, plain_message_json
from ..errors import SessionClosedError
from ..history import History
from ..schema import ContentBlock

__all__ = ["SessionSink"]


class SessionSink:
    """Frames, records and writes one session's updates (see the module docstring)."""

    __slots__ = ("_held", "_root", "_writer", "closed", "history", "prefix", "session_id")

    def __init__(self, writer: Writer, session_id: str, history: History, *, hold: bool = False,
                 parent: SessionSink | None = None) -> None:
        self._writer = writer
        self._root: SessionSink = parent._root if parent is not None else self  # where output is held
        self.session_id = session_id
        self.history = history
        """The session's replayable history; everything sent through `send` is folded in."""
        self.prefix = templates.update_prefix(session_id)
        """The bytes every ``session/update`` of this session starts with."""
        self.closed = False
        """Set when the session closed: nothing more goes out."""
        self._held: list[bytes] | None = [] if hold else None

    # -- gate ------------------------------------------------------------------------------

    @property
    def holding(self) -> bool:
        """True until the client was told the session id (output is held until then)."""
        return self._root._held is not None

    def release(self) -> None:
        """The answer naming the session is queued: send what was held, in order, and stop holding."""
        held, self._held = self._held, None
        if held and not self.closed:
            for data in held:
                self._writer.send_nowait(data)  # a child's output held here was queued after its announcement

    def check_open(self) -> None:
        """Raise [`SessionClosedError`][acp_agent.SessionClosedError] if nothing may be sent any more."""
        if self.closed:
            raise SessionClosedError(f"session {self.session_id} is closed")

    def _write(self, data: bytes) -> None:
        held = self._root._held
        if held is not None:
            held.append(data)
        else:
            self._writer.send_nowait(data)

    # -- complete updates ------------------------------------------------------------------

    def frame(self, update: BaseModel) -> bytes:
        """The ``session/update`` line carrying ``update`` (unset fields omitted)."""
        return (
            self.prefix
            + update.__pydantic_serializer__.to_json(update, by_alias=True, exclude_unset=True)
            + UPDATE_TAIL
        )

    def send(self, update: BaseModel, *, record: bool = True) -> None:
        """Queue ``update`` (folded into the history unless ``record`` is false); raises once closed."""
        self.check_open()
        self._write(self.record(update) if record else self.frame(update))

    def record(self, update: BaseModel) -> bytes:
        """Fold ``update`` into the history now and return its line, for `resend_line` later.

        The history keeps the serialized update too, so a store writes those bytes instead of
        serializing it again.
        """
        body = _plain_message(update)
        if body is None:
            body = update.__pydantic_serializer__.to_json(update, by_alias=True, exclude_unset=True)
        self.history.record(update, body)
        return self.prefix + body + UPDATE_TAIL

    def record_plain(self, kind: type[BaseModel], message_id: str, content: list[ContentBlock]) -> bytes | None:
        """`record` of the message ``kind(message_id=message_id, content=content)`` without building it.

        For a user message, agent message or thought whose blocks are all plain text (no annotations,
        ``_meta`` or extra keys): its line, framed by ``orjson`` into the bytes the model serializes to, and
        the history keeps the fields it would keep. ``None`` for anything else (nothing recorded): build
        the model and `record` it.
        """
        head = plain_message_head(kind)
        if head is None or type(message_id) is not str:
            return None
        body = plain_message_json(head, message_id, content)
        if body is None:
            return None
        self.history.record_message(kind, message_id, content, body)
        return self.prefix + body + UPDATE_TAIL

    def send_plain(self, kind: type[BaseModel], message_id: str, content: list[ContentBlock]) -> bool:
        """`send` of the message `record_plain` takes, if it takes it; whether it was sent.

        Raises [`SessionClosedError`][acp_agent.SessionClosedError] once the session is closed, like `send`.
        """
        self.check_open()
        line = self.record_plain(kind, message_id, content)
        if line is None:
            return False
        self._write(line)
        return True

    def resend(self, update: BaseModel) -> None:
        """Queue an update that is not new history (a snapshot, a replay); dropped once closed."""
        if not self.closed:
            self._write(self.frame(update))

    def replay(self, update: BaseModel, session_id: str | None = None) -> None:
        """Queue a replayed update (or a ``replay_complete`` marker, for this session or, with ``session_id``, one
        of its children) ahead of the output held meanwhile (see `release`); dropped once closed."""
        if self.closed:
            return
        prefix = self.prefix if session_id is None else templates.update_prefix(session_id)
        self._writer.send_nowait(
            prefix + update.__pydantic_serializer__.to_json(update, by_alias=True, exclude_unset=True) + UPDATE_TAIL)

    def resend_line(self, data: bytes) -> None:
        """Queue an already framed line that is not new history (see `resend`); dropped once closed."""
        if not self.closed:
            self._write(data)

    # -- hot paths -------------------------------------------------------------------------

    def text_frame(self, thought: bool, message_id: str) -> TextFrame:
        """The framing of the plain-text chunks of one streamed message (or thought), for `text`."""
        return TextFrame(templates.text_chunk_head(self.prefix, thought, message_id), TEXT_TAIL)

    def text(self, frame: TextFrame, thought: bool, message_id: str, text: str) -> bool:
        """One text chunk of a streamed message; ``frame`` is `text_frame` of it.

        Returns `full` (the caller awaits `backpressure` if true): the hot path of a
        stream is this one call per chunk. ASCII text is framed by the writer, a batch at a time.
        """
        if self.closed:
            self.check_open()
        held = self._root._held
        if held is None and text.isascii():
            self.history.append_text(thought, message_id, text)
            return self._writer.send_text(frame, text)
        data = frame.head + orjson.dumps(text) + frame.tail  # a lone surrogate raises before anything is recorded
        self.history.append_text(thought, message_id, text)
        if held is not None:
            held.append(data)
            return False
        return self._writer.send_nowait(data)

    def output_head(self, terminal_id: str) -> bytes:
        """The framing of a ``terminal_output_chunk`` of ``terminal_id`` up to its base64 data."""
        return templates.output_chunk_head(self.prefix, terminal_id)

    def output(self, head: bytes, terminal_id: str, data: bytes, limit: int) -> None:
        """Raw terminal output: kept in the terminal's retained tail (``limit`` bytes) and sent."""
        if self.closed:
            return
        self.history.append_output(terminal_id, data, limit=limit)
        self._write(templates.output_chunk_line(head, data))

    # -- back-pressure ---------------------------------------------------------------------

    def full(self) -> bool:
        """Whether the client is behind on reading (a producer should await `backpressure`)."""
        return self._writer.full()

    def flush(self) -> None:
        """Write what is queued now if the transport can take it at once (the end of a turn)."""
        if self._root._held is None and not self.closed:
            self._writer.flush_now()

    async def backpressure(self) -> None:
        """Wait while the client is behind on reading (bounded output queue)."""
        await self._writer.backpressure()


def _plain_message(update: BaseModel) -> bytes | None:
    """The JSON of a whole message of plain text only (no ``_meta``, no annotations, no extra keys), else ``None``.

    The same JSON the model serializes to, written by ``orjson`` (the echo of a text prompt and ``say()``
    of a string: most messages).
    """
    head = plain_message_head(type(update))
    if head is None or update.__pydantic_fields_set__ != PLAIN_MESSAGE_FIELDS or update.__pydantic_extra__:
        return None
    return plain_message_json(head, update.message_id, update.content)  # type: ignore[attr-defined]
