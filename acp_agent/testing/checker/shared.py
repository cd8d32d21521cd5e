"""Judgements more than one rule family makes: the session a message names (R45, R111), paths (R34), commands
(R77), config option values (S8) and what makes a prompt one every agent takes (R55, P2).

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
    """A ``replay_complete`` for a child that its parent's resume (in progress) announced: P12 asks for it, even
    though the child was closed with its parent, so it is not R45's; the preview judge judges it."""
    if parent is None or parent.resume is None:
        return False
    params = obj(obj(message).get("params"))
    return (obj(params.get("update")).get("sessionUpdate") == "replay_complete"
            and ("subagent", params.get("sessionId")) in parent.resume.entity_at)


def baseline_prompt(prompt: Any) -> bool:
    """Whether ``prompt`` is a non-empty list of well-formed ``text`` / ``resource_link`` blocks (every agent takes
    such a prompt: a ``-32602`` for it is R55's, or P2's when it carries a key)."""
    if not isinstance(prompt, list) or not prompt:
        return False
    for block in prompt:
        b = obj(block)
        text_ok = b.get("type") == "text" and isinstance(b.get("text"), str)
        link_ok = b.get("type") == "resource_link" and isinstance(b.get("name"), str) and isinstance(
            b.get("uri"), str)
        if not (text_ok or link_ok):
            return False
    return True


def is_blank(block: Any) -> bool:
    """A ``text`` block holding only whitespace (or nothing)."""
    b = obj(block)
    return b.get("type") == "text" and isinstance(b.get("text"), str) and not b["text"].strip()


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
