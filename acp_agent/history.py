"""Retained session history, kept compact for ``session/resume`` replay.

Every update a session sends passes through `History.record`. Streams of chunks
are folded into the full entity they build (a message with its whole content, a tool
call with its patched state, a terminal with a bounded output tail), so a replay sends
one update per entity, in the order the entities first appeared, each with its
original id (R36). Live-only updates (``notice``, ``state_update``, usage, command and
option lists) are not history (R37).

For a durable store the history also knows what changed since it was last saved
(`History.take_changes`): each entity is one entry with a sequence number (its place
in the replay), and an entry is marked changed once per save, not per chunk.
"""

from __future__ import annotations

import base64
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from ._util.processes import DEFAULT_TAIL_LIMIT as DEFAULT_TERMINAL_TAIL
from ._wire.templates import PLAIN_MESSAGE_FIELDS, plain_message_head, plain_message_json
from .errors import ErrorCode
from .schema import (
    AgentMessage,
    AgentMessageChunk,
    AgentThought,
    AgentThoughtChunk,
    CompactionSummaryChunk,
    CompactionUpdate,
    Error,
    IdleStateUpdate,
    PlanRemoved,
    PlanUpdate,
    SessionMessage,
    SessionMessageChunk,
    SubagentUpdate,
    TerminalExitStatus,
    TerminalOutput,
    TerminalOutputChunk,
    TerminalUpdate,
    TextContent,
    ToolCallContentChunk,
    ToolCallUpdate,
    UserMessage,
    UserMessageChunk,
)
from .schema.base import to_json

__all__ = [
    "CHILD_GONE", "ITEM_CLASSES", "History", "HistoryChanges", "HistoryItem", "finalize_live_items",
]

HistoryItem = (
    UserMessage | AgentMessage | AgentThought | SessionMessage | ToolCallUpdate | TerminalUpdate | SubagentUpdate
    | PlanUpdate | CompactionUpdate
)
"""One entry of a session's history: a whole message, tool call, terminal, child, plan or compaction."""

ITEM_CLASSES: Final[dict[str, type[BaseModel]]] = {
    cls.__name__: cls
    for cls in (UserMessage, AgentMessage, AgentThought, SessionMessage, ToolCallUpdate, TerminalUpdate,
                SubagentUpdate, PlanUpdate, CompactionUpdate)
}
"""Every history item class by its name (how a store writes an entry's kind)."""


# full upsert class -> (name of its id field, name of the collection its chunks append to)
_UPSERTS: Final[dict[type[BaseModel], tuple[str, str]]] = {
    UserMessage: ("message_id", "content"),
    AgentMessage: ("message_id", "content"),
    AgentThought: ("message_id", "content"),
    SessionMessage: ("message_id", "content"),
    ToolCallUpdate: ("tool_call_id", "content"),
    CompactionUpdate: ("compaction_id", "summary"),
    SubagentUpdate: ("session_id", ""),
    TerminalUpdate: ("terminal_id", ""),
}
# chunk class -> the full class it belongs to
_CHUNKS: Final[dict[type[BaseModel], type[BaseModel]]] = {
    UserMessageChunk: UserMessage,
    AgentMessageChunk: AgentMessage,
    AgentThoughtChunk: AgentThought,
    SessionMessageChunk: SessionMessage,
    ToolCallContentChunk: ToolCallUpdate,
    CompactionSummaryChunk: CompactionUpdate,
}


_KINDS: Final[dict[str, type[BaseModel]]] = {
    "tool_call": ToolCallUpdate,
    "terminal": TerminalUpdate,
    "subagent": SubagentUpdate,
}


@dataclass(slots=True)
class _Entry:
    kind: type[BaseModel]
    fields: dict[str, Any] = field(default_factory=dict)
    text: list[str] | None = None  # an open run of plain-text chunks at the end of the collection
    joined: int = 0  # leading pieces of ``text`` that are already joined runs of chunks
    join_at: int = 0  # length of ``text`` at which the newest run is joined
    output: _Tail | None = None  # terminals: retained output tail
    seq: int = 0  # place in the replay order (kept by a store)
    dirty: bool = True  # changed since the last save (only while changes are tracked)
    model: BaseModel | None = None  # the one update this entry was made from, while nothing changed it
    encoded: bytes | None = None  # that update's JSON as sent, while nothing changed it (``model`` may be unbuilt)

    def add_text(self, text: str) -> None:
        """Append a plain-text chunk to the open run."""
        run = self.text
        if run is None:
            run = self.text = []
            self.joined, self.join_at = 0, _TEXT_JOIN
        run.append(text)
        if len(run) >= self.join_at:
            self.join()

    def join(self) -> None:
        """Join the newest run of chunks into one string (memory follows the text, not the chunk count)."""
        assert self.text is not None
        self.text[self.joined :] = ["".join(self.text[self.joined :])]
        self.joined += 1
        self.join_at = self.joined + _TEXT_JOIN


class HistoryChanges:
    """What changed in a history since it was last saved (see `History.take_changes`)."""

    __slots__ = ("_entries", "_rows", "full", "removed")

    def __init__(self, full: bool, rows: list[tuple[int, type[BaseModel], HistoryItem | None, bytes | None]],
                 removed: list[int]) -> None:
        self.full = full
        """True when ``entries`` is the whole history (the first save): stored entries not in it go."""
        self.removed = removed
        """Sequence numbers of entries that left the history (a replaced or removed plan)."""
        self._rows = rows  # (seq, kind, item, JSON as sent): item or JSON (or both) is given
        self._entries: list[tuple[int, HistoryItem]] | None = None

    @property
    def entries(self) -> list[tuple[int, HistoryItem]]:
        """``(sequence number, item)`` of every new or changed entry.

        An entry known only by the JSON it was sent as is parsed from it on first access (a store
        that writes `encoded_entries` never pays for that).
        """
        if self._entries is None:
            self._entries = [
                (seq, item if item is not None else kind.model_validate_json(data))  # type: ignore[arg-type,misc]
                for seq, kind, item, data in self._rows
            ]
        return self._entries

    @property
    def encoded(self) -> dict[int, bytes]:
        """The JSON of entries that are exactly one update as it was sent, by sequence number: the bytes
        that went on the wire, which a store writes instead of serializing the item again."""
        return {seq: data for seq, _, _, data in self._rows if data is not None}

    def encoded_entries(self) -> list[tuple[int, str, bytes]]:
        """``(sequence number, kind, JSON)`` of every new or changed entry: the bytes an entry was sent as
        where known, else its item serialized (unset fields omitted); ``kind`` is its class name
        (``ITEM_CLASSES``)."""
        return [
            (seq, kind.__name__, data if data is not None else to_json(item))  # type: ignore[arg-type]
            for seq, kind, item, data in self._rows
        ]


class History:
    """The replayable history of one session."""

    def __init__(self, terminal_tail: int = DEFAULT_TERMINAL_TAIL) -> None:
        self._entries: dict[tuple[type[BaseModel], str], _Entry] = {}
        self._terminal_tail = terminal_tail
        self._seq = 0
        self._tracking = False  # changes are tracked once a store saved this history
        self._full = True  # the next save writes everything
        self._dirty: list[_Entry] = []
        self._removed: list[int] = []
        # The entry the last text chunk went to, by its id object and kind (see append_text).
        self._text_entry: _Entry | None = None
        self._text_id: str | None = None
        self._text_thought = False
        self.size = 0
        """Bytes recorded so far, about (updates as sent, streamed text; a restored history: as stored), for
        `max_history_bytes`."""

    def __len__(self) -> int:
        return len(self._entries)

    def copy(self, *, without_children: bool = False) -> History:
        """An independent copy (used by ``session/fork``).

        ``without_children`` leaves out child sessions and messages between sessions: a
        fork owns no children (R112), and naming one it never announced would break R79.
        """
        other = History(self._terminal_tail)
        other.size = self.size
        for key, entry in self._entries.items():
            if without_children and entry.kind in (SubagentUpdate, SessionMessage):
                continue
            fields = {
                name: list(value) if isinstance(value, list) else value
                for name, value in entry.fields.items()
            }
            other._seq += 1
            other._entries[key] = _Entry(
                entry.kind,
                fields,
                list(entry.text) if entry.text is not None else None,
                entry.joined,
                entry.join_at,
                entry.output.copy() if entry.output is not None else None,
                other._seq,
            )
        return other

    def record(self, update: BaseModel, encoded: bytes | None = None) -> None:
        """Fold one outgoing update into the history; ``encoded`` is its JSON as sent, if known."""
        if encoded is not None:
            self.size += len(encoded)
        kind = type(update)
        full = _CHUNKS.get(kind)
        if full is not None:
            self._append_chunk(full, update)
        elif kind in _UPSERTS:
            self._apply_upsert(kind, update, encoded)
        elif kind is TerminalOutputChunk:
            entry = self._entry(TerminalUpdate, update.terminal_id)  # type: ignore[attr-defined]
            self._append_output(entry, base64.b64decode(update.data))  # type: ignore[attr-defined]
        elif kind is PlanUpdate:
            plan_id = str(getattr(update.plan, "plan_id", ""))  # type: ignore[attr-defined]
            self._drop((PlanUpdate, plan_id))
            self._add((PlanUpdate, plan_id), _Entry(PlanUpdate, {"plan": update.plan}))  # type: ignore[attr-defined]
        elif kind is PlanRemoved:
            self._drop((PlanUpdate, update.plan_id))  # type: ignore[attr-defined]

    def replay(self, start: int = 0) -> Iterator[HistoryItem]:
        """One full update per retained entity, in order of first appearance (from the ``start``-th)."""
        for entry in itertools.islice(self._entries.values(), start, None):
            yield self._rebuild(entry)

    def _rebuild(self, entry: _Entry) -> HistoryItem:
        if entry.model is not None:
            return entry.model  # type: ignore[return-value]  # the update as recorded: the same fields
        fields = dict(entry.fields)
        collection = _UPSERTS.get(entry.kind, ("", ""))[1]
        if collection and (entry.text is not None or collection in fields):
            items = _expanded(fields.get(collection) or [])
            if entry.text is not None:
                items.append(TextContent(text="".join(entry.text)))
            fields[collection] = items
        if entry.output is not None:
            fields["output"] = TerminalOutput(data=base64.b64encode(entry.output.data()).decode())
        return entry.kind(**fields)  # type: ignore[return-value]  # kinds are the HistoryItem classes

    def append_output(self, terminal_id: str, data: bytes, *, limit: int | None = None) -> None:
        """Record raw terminal output (same as a ``terminal_output_chunk`` carrying ``data``).

        ``limit`` sets how many bytes this terminal retains (on its first output).
        """
        entry = self._entry(TerminalUpdate, terminal_id)
        if entry.output is None and limit is not None:
            entry.output = _Tail(limit)
        self._append_output(entry, data)

    def output(self, terminal_id: str) -> bytes:
        """The retained output tail of a terminal."""
        entry = self._entries.get((TerminalUpdate, terminal_id))
        return entry.output.data() if entry is not None and entry.output is not None else b""

    def current(self, kind: str, entity_id: str) -> BaseModel | None:
        """The full present state of one tool call, terminal or child, as one update."""
        full = _KINDS.get(kind)
        entry = self._entries.get((full, entity_id)) if full is not None else None
        if entry is None:
            return None
        return self._rebuild(entry)

    # -- saving ------------------------------------------------------------------------

    def take_changes(self) -> HistoryChanges:
        """What changed since the last call (everything, the first time), now marked saved.

        From the first call on, changes are tracked (each changed entry once per save). If
        saving what this returned fails, call `unsaved` so the next save writes all.
        """
        if self._full or not self._tracking:
            self._tracking, self._full = True, False
            self._dirty.clear()
            self._removed.clear()
            rows = [self._row(e) for e in self._entries.values()]
            for entry in self._entries.values():
                entry.dirty, entry.model, entry.encoded = False, None, None
            return HistoryChanges(True, rows, [])
        dirty, self._dirty = self._dirty, []
        removed, self._removed = self._removed, []
        changed = []
        for entry in dirty:
            entry.dirty = False
            if self._entries.get(_key_of(entry)) is entry:
                changed.append(self._row(entry))
            entry.model = entry.encoded = None  # kept for this save only: the history holds the fields, not models
        return HistoryChanges(False, changed, removed)

    def _row(self, entry: _Entry) -> tuple[int, type[BaseModel], HistoryItem | None, bytes | None]:
        """What a save gets of one entry: its JSON as sent if known (the item is then built only if asked
        for), else its item rebuilt now."""
        if entry.encoded is not None:
            return (entry.seq, entry.kind, entry.model, entry.encoded)  # type: ignore[return-value]
        if entry.text is not None:
            encoded = _streamed_message_json(entry)
            if encoded is not None:
                return (entry.seq, entry.kind, None, encoded)
        return (entry.seq, entry.kind, self._rebuild(entry), None)

    @property
    def changed(self) -> bool:
        """Whether something changed since the last `take_changes`."""
        return self._full or not self._tracking or bool(self._dirty or self._removed)

    def unsaved(self) -> None:
        """Saving the last changes failed: the next `take_changes` returns everything."""
        self._full = True

    def restore(self, entries: Iterator[tuple[int, HistoryItem]] | list[tuple[int, HistoryItem]]) -> None:
        """Rebuild a saved history from its ``(sequence number, item)`` entries, in order.

        The result counts as saved: only later changes are returned by `take_changes`.
        """
        for seq, item in entries:
            kind: type[BaseModel] = type(item)
            key: tuple[type[BaseModel], str]
            if kind is PlanUpdate:
                key = (PlanUpdate, str(getattr(item.plan, "plan_id", "")))  # type: ignore[union-attr]
            else:
                key = (kind, getattr(item, _UPSERTS[kind][0]))
            if kind is PlanUpdate:
                self.record(item)
            else:
                self._apply_upsert(kind, item)
            entry = self._entries[key]
            entry.fields.pop("session_update", None)
            entry.seq = seq
            self._seq = max(self._seq, seq)
        for entry in self._entries.values():
            entry.dirty = False
        self._tracking, self._full = True, False
        self._dirty.clear()
        self._removed.clear()

    # -- folding -----------------------------------------------------------------------

    def _add(self, key: tuple[type[BaseModel], str], entry: _Entry) -> None:
        self._seq += 1
        entry.seq = self._seq
        self._entries[key] = entry
        if self._tracking:
            self._dirty.append(entry)

    def _drop(self, key: tuple[type[BaseModel], str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and self._tracking:
            self._removed.append(entry.seq)

    def _entry(self, kind: type[BaseModel], key: str) -> _Entry:
        entry = self._entries.get((kind, key))
        if entry is None:
            entry = _Entry(kind, {_UPSERTS[kind][0]: key})
            self._add((kind, key), entry)
            return entry
        entry.model = entry.encoded = None  # about to change
        if not entry.dirty:
            entry.dirty = True
            self._dirty.append(entry)
        return entry

    def append_text(self, thought: bool, message_id: str, text: str) -> None:
        """Record a plain-text agent message (or thought) chunk without building its model."""
        self.size += len(text)
        entry = self._text_entry
        if entry is None or message_id is not self._text_id or thought is not self._text_thought:
            # Another message than the last chunk's: found by key. A message's entry stays the same object for
            # the life of the history (only plans leave it), so it is kept for the next chunk of the same id.
            entry = self._entries.get((AgentThought if thought else AgentMessage, message_id))
            if entry is not None:
                self._text_entry, self._text_id, self._text_thought = entry, message_id, thought
        if entry is not None:
            run = entry.text
            if run is not None and entry.dirty and len(run) + 1 < entry.join_at:
                run.append(text)  # the hot path of a stream: a chunk more in an open run, already marked changed
                return
        self._entry(AgentThought if thought else AgentMessage, message_id).add_text(text)

    def _append_chunk(self, full: type[BaseModel], chunk: BaseModel) -> None:
        id_field, collection = _UPSERTS[full]
        entry = self._entry(full, getattr(chunk, id_field))
        content = chunk.content  # type: ignore[attr-defined]
        if type(content) is TextContent and content.model_fields_set <= {"type", "text"}:
            entry.add_text(content.text)
            return
        self._close_text(entry, collection)
        entry.fields.setdefault(collection, [])
        if entry.fields[collection] is None:
            entry.fields[collection] = []
        entry.fields[collection].append(content)

    def _close_text(self, entry: _Entry, collection: str) -> None:
        if entry.text is not None:
            items = entry.fields.get(collection) or []
            items.append("".join(entry.text))  # a plain text block, kept as its text (see _compacted)
            entry.fields[collection] = items
            entry.text = None

    def record_message(self, kind: type[BaseModel], message_id: str, content: list[Any], encoded: bytes) -> None:
        """Fold in the whole message ``kind(message_id=message_id, content=content)`` (a user message, agent
        message or thought) without building it; ``encoded`` is its JSON as sent.

        The history keeps what `record` of that model would keep (its replay and saved items are
        the same), and a save writes ``encoded``.
        """
        self.size += len(encoded)
        fresh = (kind, message_id) not in self._entries
        entry = self._entry(kind, message_id)
        if fresh and self._tracking:
            entry.encoded = encoded  # the model is built from it only if a store asks for the item
        entry.text = None
        entry.fields["content"] = _compacted(content)

    def _apply_upsert(self, kind: type[BaseModel], update: BaseModel, encoded: bytes | None = None) -> None:
        id_field, collection = _UPSERTS[kind]
        key = getattr(update, id_field)
        fresh = (kind, key) not in self._entries
        entry = self._entry(kind, key)
        fields_set = update.model_fields_set
        if (fresh and self._tracking and kind is not TerminalUpdate and id_field in fields_set
                and "meta" not in fields_set
                and not update.model_extra
                and (collection not in fields_set or getattr(update, collection) is not None)):
            # A new entity's first full update: rebuilding it from the fields below would give the
            # same model, so the next save uses this one (which drops it, as does a change: _entry).
            entry.model, entry.encoded = update, encoded
        for name in fields_set:
            value = getattr(update, name)
            if name == collection:
                entry.text = None
                entry.fields[name] = _compacted(value) if value else []
            elif name == "meta":
                entry.fields["meta"] = _patch_meta(entry.fields.get("meta"), value)
            elif name == "output" and kind is TerminalUpdate:
                entry.output = _Tail(entry.output.limit if entry.output is not None else self._terminal_tail)
                if value is not None:
                    self._append_output(entry, base64.b64decode(value.data))
            else:
                entry.fields[name] = value
        if update.model_extra:
            entry.fields.update(update.model_extra)

    def _append_output(self, entry: _Entry, data: bytes) -> None:
        if entry.output is None:
            entry.output = _Tail(self._terminal_tail)
        entry.output.append(data)


_TEXT_JOIN: Final = 256  # text chunks joined into one string at a time in a long run


class _Tail:
    """The last ``limit`` bytes of a stream, kept as chunks (appending never copies the tail)."""

    __slots__ = ("chunks", "limit", "size")

    def __init__(self, limit: int) -> None:
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.limit = limit

    def append(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        while self.chunks and self.size - len(self.chunks[0]) >= self.limit:
            self.size -= len(self.chunks.popleft())

    def data(self) -> bytes:
        joined = b"".join(self.chunks)
        return joined[len(joined) - self.limit :] if len(joined) > self.limit else joined

    def copy(self) -> _Tail:
        other = _Tail(self.limit)
        other.chunks = deque(self.chunks)
        other.size = self.size
        return other


def _streamed_message_json(entry: _Entry) -> bytes | None:
    """The JSON of a message entry ending in a run of text chunks (a streamed message) as `History._rebuild`
    would serialize, written by ``orjson`` (no model built: a long stream is megabytes); ``None`` if not plain."""
    head = plain_message_head(entry.kind)
    fields = entry.fields
    message_id = fields.get("message_id")
    if head is None or type(message_id) is not str or not fields.keys() <= PLAIN_MESSAGE_FIELDS:
        return None
    assert entry.text is not None
    return plain_message_json(head, message_id, _expanded(fields.get("content") or []), entry.text)


_PLAIN_TEXT: Final = frozenset({"type", "text"})


def _compacted(blocks: list[Any]) -> list[Any]:
    """A collection as an entry keeps it: each plain text block (no annotations, ``_meta`` or extra keys) as its
    bare text, a few hundred bytes less than the model with its field dict and fields set (a long session keeps
    thousands of them); `_expanded` gives the blocks back."""
    return [
        block.text if type(block) is TextContent and block.__pydantic_fields_set__ == _PLAIN_TEXT
        and not block.__pydantic_extra__ else block
        for block in blocks
    ]


def _expanded(items: list[Any]) -> list[Any]:
    """The blocks of a collection kept by `_compacted` (a new list: the entry's stays as it is)."""
    return [TextContent(text=item) if type(item) is str else item for item in items]


def _key_of(entry: _Entry) -> tuple[type[BaseModel], str]:
    if entry.kind is PlanUpdate:
        return (PlanUpdate, str(getattr(entry.fields["plan"], "plan_id", "")))
    return (entry.kind, entry.fields[_UPSERTS[entry.kind][0]])


def finalize_live_items(history: History, status: str = "failed") -> int:
    """End, in ``history`` only, every tool call, terminal and child it still shows live; returns how many.

    For work that will never report its end: a session loaded from a store (the process that ran
    it closed or crashed: ``failed``), a session closed without a word to the client, or what a
    fork copied but does not run (``cancelled``). A tool call not in a final status gets
    ``status``, a terminal without an exit status exited with an unknown status
    (``{"exitCode": null, "signal": null}``); all lose the ``cancel`` capability. A subagent child
    whose mirrored ``state`` is not ``idle`` with an empty ``background`` list (a child its parent
    would list, R90) is reported finished: ``idle`` with ``background: []``, its stop reason
    ``cancelled`` (``status="cancelled"``: the session was closed) or ``error`` (its process is
    gone); an ``idle`` child keeps the stop reason it had.
    """
    ended = 0
    for item in list(history.replay()):
        fields: dict[str, Any] = {"capabilities": None} if getattr(item, "capabilities", None) else {}
        if isinstance(item, ToolCallUpdate) and item.status not in ("completed", "failed", "cancelled"):
            history.record(ToolCallUpdate(tool_call_id=item.tool_call_id, status=status, **fields))
            ended += 1
        elif isinstance(item, TerminalUpdate) and getattr(item, "exit_status", None) is None:
            history.record(TerminalUpdate(terminal_id=item.terminal_id,
                                          exit_status=TerminalExitStatus(exit_code=None, signal=None), **fields))
            ended += 1
        elif isinstance(item, SubagentUpdate) and not _child_finished(item.state):
            history.record(SubagentUpdate(session_id=item.session_id, state=_child_ended(item.state, status),
                                          **fields))
            ended += 1
    return ended


def _child_finished(state: Any) -> bool:
    """Whether a child's mirrored snapshot says it runs nothing: ``idle`` with ``background: []`` (R90)."""
    return isinstance(state, IdleStateUpdate) and state.background == []


def _child_ended(state: Any, status: str) -> IdleStateUpdate:
    """The snapshot of a child whose work ended unseen (see `finalize_live_items`)."""
    if isinstance(state, IdleStateUpdate):
        kept = {name: getattr(state, name) for name in ("stop_reason", "error", "meta")
                if name in state.model_fields_set}
        return IdleStateUpdate(**kept, background=[])
    if status == "cancelled":
        return IdleStateUpdate(stop_reason="cancelled", background=[])
    return IdleStateUpdate(stop_reason="error", background=[],
                           error=Error(code=ErrorCode.INTERNAL_ERROR, message=CHILD_GONE))


CHILD_GONE: Final = "the agent process that ran this subagent stopped before its work ended"
"""The ``error`` message of a child reported ended because its process is gone."""


def _patch_meta(stored: dict[str, Any] | None, patch: dict[str, Any] | None) -> dict[str, Any] | None:
    """Apply an upsert ``_meta`` patch by top-level key (R72)."""
    if patch is None:
        return None
    merged = dict(stored or {})
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged
