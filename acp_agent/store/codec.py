"""How a durable store writes a session: JSON for metadata, one JSON document per history entry.

Shared by the SQLite and PostgreSQL stores. Items are written exactly as the wire carries
them (camelCase, unset fields omitted), so a stored history reads like a replay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import orjson
from pydantic import BaseModel

from .. import schema
from ..records import DEFAULT_PRINCIPAL, SessionRecord

if TYPE_CHECKING:
    from ..history import HistoryItem
    from ..schema import SessionConfigOption

__all__ = [
    "decode_item", "encode_info", "encode_info_text", "encode_state",
    "encode_state_text", "listing_filters", "record_from",
]

LISTING_ORDER: Final = "ORDER BY updated_at DESC, session_id DESC"
"""The order of a listing (most recently active first; ties by id): what `listing_filters`' ``after`` follows."""

logger = logging.getLogger(__name__)

_warned: Final[set[str]] = set()  # sessions whose data could not be written (warned once each)


def decode_item(kind: str, data: bytes | str) -> HistoryItem:
    """A history item from its JSON (``HistoryChanges.encoded_entries``); ``kind`` is its class name."""
    from ..history import ITEM_CLASSES  # loaded with the first session, not with the store

    return ITEM_CLASSES[kind].model_validate_json(data)  # type: ignore[return-value]


def encode_info(record: SessionRecord) -> bytes:
    """What ``session/list`` shows besides the columns: extra directories and ``_meta`` (and whether the
    client set the title)."""
    info: dict[str, Any] = {"additionalDirectories": record.additional_directories, "meta": record.meta}
    if record.client_title:
        info["clientTitle"] = True  # S4: kept across restarts
    return orjson.dumps(info)


def encode_state(record: SessionRecord) -> bytes:
    """Config options, commands and the author's ``data`` (left out, with a warning, if it is not JSON)."""
    state: dict[str, Any] = {
        "configOptions": [_dump(o) for o in record.config_options],
        "availableCommands": [_dump(c) for c in record.available_commands],
        "data": record.data,
    }
    if record.wakeups:
        state["wakeups"] = record.wakeups
    if record.prompt_keys:
        state["promptKeys"] = record.prompt_keys
    try:
        return orjson.dumps(state)
    except TypeError as exc:
        if record.session_id not in _warned:
            _warned.add(record.session_id)
            logger.warning("acp: session.data of %s is not JSON-serializable (%s); it is not stored, so it "
                           "is lost once the session leaves memory", record.session_id, exc)
        state["data"] = None
        return orjson.dumps(state)


_EMPTY_INFO: Final = orjson.dumps({"additionalDirectories": [], "meta": None}).decode()
_EMPTY_STATE: Final = orjson.dumps({"configOptions": [], "availableCommands": [], "data": {}}).decode()


def encode_info_text(record: SessionRecord) -> str:
    """`encode_info` as text; a session with none of those set (most) takes no serializing."""
    if not record.additional_directories and record.meta is None and not record.client_title:
        return _EMPTY_INFO
    return encode_info(record).decode()


def encode_state_text(record: SessionRecord) -> str:
    """`encode_state` as text; a session with no options, no commands and empty ``data`` takes no
    serializing."""
    if not record.config_options and not record.available_commands and not record.data and not record.wakeups \
            and not record.prompt_keys:
        return _EMPTY_STATE
    return encode_state(record).decode()


def _dump(model: BaseModel) -> Any:
    return orjson.loads(model.__pydantic_serializer__.to_json(model, by_alias=True, exclude_unset=True))


def record_from(
    columns: dict[str, Any], info: bytes | str | dict[str, Any], state: bytes | str | dict[str, Any],
    entries: Iterable[tuple[int, str, bytes | str]], *, terminal_tail: int | None,
) -> SessionRecord:
    """Rebuild a record from its stored columns, JSON documents and ``(seq, kind, item)`` history rows."""
    from ..history import History

    info_doc = info if isinstance(info, dict) else orjson.loads(info)
    state_doc = state if isinstance(state, dict) else orjson.loads(state)
    history = History(terminal_tail) if terminal_tail is not None else History()
    rows = list(entries)
    history.restore([(seq, decode_item(kind, item)) for seq, kind, item in rows])
    history.size = sum(len(item) for _, _, item in rows)
    return SessionRecord(
        session_id=columns["session_id"],
        cwd=columns["cwd"],
        additional_directories=list(info_doc.get("additionalDirectories") or []),
        title=columns.get("title"),
        updated_at=columns["updated_at"],
        created_at=columns["created_at"],
        archived=bool(columns.get("archived")),
        client_title=bool(info_doc.get("clientTitle")),
        meta=info_doc.get("meta"),
        history=history,
        config_options=_config_options(schema.SessionConfigOption, state_doc.get("configOptions") or [],
                                       columns["session_id"]),
        available_commands=[schema.AvailableCommand.model_validate(c)
                            for c in state_doc.get("availableCommands") or []],
        data=dict(state_doc.get("data") or {}),
        wakeups=dict(state_doc.get("wakeups") or {}),
        prompt_keys=dict(state_doc.get("promptKeys") or {}),
        principal=columns.get("principal") or DEFAULT_PRINCIPAL,
    )


def _config_options(model: type[SessionConfigOption], stored: list[Any], session_id: str) -> list[SessionConfigOption]:
    """The stored config options that are still valid; one that is not (a ``select`` whose ``currentValue`` is
    not one of its values, which 0.1 accepted) is dropped with a warning rather than failing the load."""
    options = []
    for raw in stored:
        try:
            options.append(model.model_validate(raw))
        except ValueError as exc:
            logger.warning("acp: session %s: dropping a stored config option that is not valid (%s)", session_id,
                           str(exc).splitlines()[-1].strip())
    return options


def listing_filters(cwd: str | None, archived: bool | None, mark: str, principal: str | None = None,
                    after: tuple[str, str] | None = None) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause of a listing filtered by ``cwd`` / ``archived`` / ``principal``, starting
    ``after`` a key in `LISTING_ORDER` (``mark`` is the driver's placeholder), and its parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if principal is not None:
        conditions.append(f"principal = {mark}")
        params.append(principal)
    if after is not None:
        conditions.append(f"(updated_at, session_id) < ({mark}, {mark})")  # a row value: the index serves it
        params += [after[0], after[1]]
    if cwd is not None:
        conditions.append(f"cwd = {mark}")
        params.append(cwd)
    if archived is not None:
        conditions.append(f"archived = {mark}")
        params.append(archived)
    return ("WHERE " + " AND ".join(conditions) if conditions else ""), params

