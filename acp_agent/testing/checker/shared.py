"""Judgements more than one rule family makes: the session a message names (R45, R111), paths (R34), commands
(R77) and config option values (S8).

Plain functions over the model (`model.py`); not a judge (judges import this, never each other).
"""

from __future__ import annotations

from typing import Any

from .model import CheckerModel, SessionModel, custom, is_abs, obj
from .rules import quote


def touch_session(m: CheckerModel, sid: Any, message: Any) -> SessionModel | None:
    """Common checks for an agent message naming a session (R45, R111, R79 early uses); ``None``: judge no further."""
    if not isinstance(sid, str):
        return None
    s = m.session(sid)
    parent = m.sessions.get(s.parent) if s.parent else None
    if parent is not None and parent.closed and parent.resume is None:
        m.flag("R111", f"message for child {sid!r} after its parent's close answer", message)
        return None
    if s.closed and s.resume is None and not _child_marker(parent, message):
        m.flag("R45", f"message for session {sid!r} after its close answer", message)
        return None
    m.note_early(sid, message, own=True)
    return s


def _child_marker(parent: SessionModel | None, message: Any) -> bool:
    """A ``replay_complete`` for a child while its parent's resume replays (Preview P12: the child was announced)."""
    update = obj(obj(obj(message).get("params")).get("update"))
    return parent is not None and parent.resume is not None and update.get("sessionUpdate") == "replay_complete"


def check_path(m: CheckerModel, path: Any, message: Any, what: str) -> None:
    """R34: paths are absolute."""
    if path is not None and not is_abs(path):
        m.flag("R34", f"{what} {path!r} is not absolute", message)


def check_commands(m: CheckerModel, commands: list[Any], message: Any) -> None:
    """R77: ``{"type": "command"}`` entries with unique names, no leading ``/``, no whitespace."""
    names: set[str] = set()
    for command in commands:
        c = obj(command)
        if custom(c.get("type")):
            continue
        name = c.get("name")
        if (
            c.get("type") != "command" or not isinstance(name, str) or not name or name.startswith("/")
            or any(ch.isspace() for ch in name) or name in names
        ):
            m.flag("R77", f"bad or duplicate command {quote(command)}", message)
            return
        names.add(name)


def check_config_values(m: CheckerModel, options: list[Any], message: Any) -> None:
    """S8: a ``select`` option's ``currentValue`` is one of its values, and its values are unique."""
    for option in options:
        o = obj(option)
        if o.get("type") != "select" or not isinstance(o.get("options"), list):
            continue
        values = [obj(v).get("value") for entry in o["options"]
                  for v in (obj(entry)["options"] if isinstance(obj(entry).get("options"), list) else [entry])]
        if len(values) != len(set(map(repr, values))):
            m.flag("S8", f"config option {o.get('configId')!r} lists a value twice: {values!r}", message)
        elif o.get("currentValue") not in values:
            m.flag("S8", f"config option {o.get('configId')!r} has currentValue {o.get('currentValue')!r}, "
                         f"not one of its values {values!r}", message)
